//! Text inside a Slack message: escaping untrusted text (`&<>`, formatting characters,
//! emoji codes in code spans), configuration keys in code, lengths in UTF-16 units and
//! cutting that never breaks an entity, a code span or a link.

use super::ELLIPSIS;
use crate::render::names;

/// Escapes the three characters Slack's message formatting reserves: `&` → `&amp;`,
/// `<` → `&lt;`, `>` → `&gt;`.
/// <https://api.slack.com/reference/surfaces/formatting#escaping>
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// Length as Slack may count it: UTF-16 code units (≥ characters).
pub fn slack_len(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
}

/// Cuts already escaped text to `max` (in [`slack_len`] units), ending with `…` when cut.
/// Never cuts inside an entity (`&amp;`), a code span, or a link this module wrote
/// (`<url|label>`).
pub(super) fn clip(s: &str, max: usize) -> String {
    if slack_len(s) <= max {
        return s.to_string();
    }
    let budget = max.saturating_sub(ELLIPSIS.len_utf16());
    let mut end = 0;
    let mut used = 0;
    for (i, c) in s.char_indices() {
        if used + c.len_utf16() > budget {
            break;
        }
        used += c.len_utf16();
        end = i + c.len_utf8();
    }
    let mut kept = &s[..end];
    if let Some(amp) = kept.rfind('&')
        && !kept[amp..].contains(';')
    {
        kept = &kept[..amp];
    }
    if let Some(lt) = kept.rfind('<')
        && !kept[lt..].contains('>')
    {
        kept = &kept[..lt];
    }
    // An odd number of backticks: the last code span was cut open; drop it.
    if kept.matches('`').count() % 2 == 1
        && let Some(tick) = kept.rfind('`')
    {
        kept = &kept[..tick];
    }
    let mut out = kept.trim_end().to_string();
    out.push(ELLIPSIS);
    out
}

/// True for a configuration key: lowercase ASCII letters, digits, `-` and `_` in at least
/// two `.`-separated parts of two characters or more, starting with a letter (numbers such
/// as `1.09` and abbreviations such as `e.g.` are not keys).
pub(super) fn is_key(w: &str) -> bool {
    w.starts_with(|c: char| c.is_ascii_lowercase())
        && w.contains('.')
        && w.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '-' | '_'))
        && w.split('.').all(|part| part.len() >= 2)
}

/// Escapes `raw` and puts what looks like a configuration key (`state.backend.rocksdb.thread.num`,
/// `sink.buffer-flush.max-rows`, `[diagnosis.operator_kinds]`) in `code`.
pub fn with_code_keys(raw: &str) -> String {
    fn in_run(c: char) -> bool {
        c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')
    }
    let mut out = String::with_capacity(raw.len() + 16);
    let mut rest = raw;
    while !rest.is_empty() {
        let start = rest.find(in_run).unwrap_or(rest.len());
        out.push_str(&escape(&rest[..start]));
        rest = &rest[start..];
        let len = rest.find(|c: char| !in_run(c)).unwrap_or(rest.len());
        let run = &rest[..len];
        let core = run.trim_matches(|c: char| matches!(c, '.' | '-' | '_'));
        if !core.is_empty() && is_key(core) {
            let lead = run.find(core).unwrap_or(0);
            out.push_str(&run[..lead]);
            out.push_str(&code(core));
            out.push_str(&run[lead + core.len()..]);
        } else {
            out.push_str(run);
        }
        rest = &rest[len..];
    }
    out
}

/// `s` in a code span, escaped; a backtick inside becomes `ˋ` (U+02CB): code spans have no
/// escape for it.
pub fn code(s: &str) -> String {
    format!("`{}`", escape(&s.replace('`', "\u{2CB}")))
}

/// True when `word` holds an emoji code (`:fire:`), which Slack would show as an emoji.
pub(super) fn has_emoji_code(word: &str) -> bool {
    let parts: Vec<&str> = word.split(':').collect();
    parts.len() >= 3
        && parts[1..parts.len() - 1].iter().any(|p| {
            p.chars().any(|c| c.is_ascii_alphabetic())
                && p.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '+' | '-' | '\''))
        })
}

/// Punctuation that may stay outside a code span around a word.
pub(super) const OUTER: &[char] = &['(', ')', '[', ']', '{', '}', ',', ';', ':', '.', '!', '?', '"', '\''];

/// One word of untrusted text as mrkdwn (see [`mrkdwn`]); `keys`: configuration keys in code.
pub(super) fn mrkdwn_word(word: &str, line_start: bool, keys: bool) -> String {
    if has_emoji_code(word) {
        return code(word);
    }
    let trimmed = word.trim_matches(OUTER);
    if trimmed.is_empty() {
        return escape(word);
    }
    let mut start = word.find(trimmed).unwrap_or(0);
    let mut end = start + trimmed.len();
    // Brackets that close or open one inside the word belong to it: `t[10]`, `(x)y`.
    for (open, close) in [('[', ']'), ('(', ')')] {
        let core = &word[start..end];
        let (opens, closes) = (core.matches(open).count(), core.matches(close).count());
        if opens > closes && word[end..].starts_with(close) {
            end += close.len_utf8();
        } else if closes > opens && word[..start].ends_with(open) {
            start -= open.len_utf8();
        }
    }
    let (lead, core, trail) = (&word[..start], &word[start..end], &word[end..]);
    let formatting = core.contains(['*', '_', '~', '`']) || (line_start && lead.is_empty() && core.starts_with('>'));
    if formatting {
        format!("{}{}{}", escape(lead), code(core), escape(trail))
    } else if keys {
        with_code_keys(word)
    } else {
        escape(word)
    }
}

/// Untrusted text (names, labels, reasons) as Slack `mrkdwn` that shows exactly that text:
/// cleaned of control characters, `&<>` escaped, and every word that Slack would format (it
/// holds `*`, `_`, `~`, `` ` `` or an emoji code, or starts the text with `>`) in a code
/// span.
pub fn mrkdwn(raw: &str) -> String {
    mrkdwn_text(raw, false)
}

/// What the diagnosis wrote (summary, fix, cause, …) as [`mrkdwn`], with configuration
/// keys in code as well ([`with_code_keys`]).
pub fn prose(raw: &str) -> String {
    mrkdwn_text(raw, true)
}

pub(super) fn mrkdwn_text(raw: &str, keys: bool) -> String {
    let raw = names::clean(raw);
    let mut out = String::with_capacity(raw.len() + 16);
    let mut rest: &str = &raw;
    let mut first = true;
    while !rest.is_empty() {
        let ws = rest.len() - rest.trim_start().len();
        out.push_str(&rest[..ws]);
        rest = &rest[ws..];
        let len = rest.find(char::is_whitespace).unwrap_or(rest.len());
        if len > 0 {
            out.push_str(&mrkdwn_word(&rest[..len], first, keys));
            first = false;
        }
        rest = &rest[len..];
    }
    out
}

/// Escapes text for a `plain_text` object on one line (control characters cleaned).
pub(super) fn plain(s: &str) -> String {
    escape(&names::clean(s))
}
