//! Slack messages: Block Kit blocks plus a `text` fallback, for every [`NoticeKind`].
//!
//! Pure: no IO, no clock. [`crate::notify::slack`] sends what this module builds.
//!
//! # Layout of a verdict
//!
//! 1. `header`: an emoji, status and job (`:red_circle: Backpressure culprit in <job>:
//!    <vertex>`), with `Changed:` before the status when the verdict replaces an earlier one.
//! 2. `section`: the verdict's summary.
//! 3. `section` with `fields`: culprit (with its subtasks when not all of them carry the
//!    problem, and the other culprits when there are several), finding, confidence, job
//!    and time.
//! 4. `section`: the cause.
//! 5. `section`s: the numbered fix, Flink/connector configuration keys in `code`.
//! 6. `section`s: what would not help.
//! 7. `section`s: hazards, critical first.
//! 8. `context`: the graph on one line, vertices in topological order with busy and
//!    backpressured percentages, the culprit in bold.
//! 9. `context`: the alert group's common labels.
//! 10. `context`: the link to the stored verdict, when there is one.
//!
//! # Safety of untrusted text
//!
//! Job, vertex and operator names and the alert labels come from outside. Every dynamic
//! string goes through [`escape`] (`&`, `<`, `>` become `&amp;`, `&lt;`, `&gt;`), so a
//! label `<!channel>` shows as text and pings nobody, and `<https://evil|click>` does not
//! become a link. Every `mrkdwn` text object is also `verbatim`, so Slack does not turn
//! bare channel names, `@here` or URLs in that text into mentions or links. The only
//! links in a message are the ones this module writes itself (the verdict URL).
//!
//! # Limits
//!
//! Vendor limits are the constants below; text beyond them is cut and ends with `…`
//! (never an error). Lengths are counted in UTF-16 code units, which is never less than
//! the number of characters Slack counts.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;
use serde_json::{Value, json};

use crate::model::notice::{Notice, NoticeKind};
use crate::model::verdict::{Culprit, Hazard, HazardKind, Severity, Status, Verdict, VertexState};

/// Most blocks in one message.
/// <https://api.slack.com/reference/block-kit/blocks>
pub const MAX_BLOCKS: usize = 50;

/// Longest `text` of a `section` block.
/// <https://api.slack.com/reference/block-kit/blocks#section>
pub const MAX_SECTION_TEXT: usize = 3000;

/// Most `fields` of a `section` block.
/// <https://api.slack.com/reference/block-kit/blocks#section>
pub const MAX_FIELDS: usize = 10;

/// Longest text of one `field` of a `section` block.
/// <https://api.slack.com/reference/block-kit/blocks#section>
pub const MAX_FIELD_TEXT: usize = 2000;

/// Longest `text` of a `header` block (`plain_text`).
/// <https://api.slack.com/reference/block-kit/blocks#header>
pub const MAX_HEADER_TEXT: usize = 150;

/// Most elements of a `context` block.
/// <https://api.slack.com/reference/block-kit/blocks#context>
pub const MAX_CONTEXT_ELEMENTS: usize = 10;

/// Longest text object (here: one `context` element).
/// <https://api.slack.com/reference/block-kit/composition-objects#text>
pub const MAX_TEXT_OBJECT: usize = 3000;

/// Longest top-level `text` kept: `chat.postMessage` truncates longer messages.
/// <https://api.slack.com/methods/chat.postMessage#truncating>
pub const MAX_FALLBACK_TEXT: usize = 40_000;

/// Sections one list (fix, not the fix, hazards) may take; the rest is summarised.
const MAX_LIST_SECTIONS: usize = 4;

/// Subtask ids listed before `…`.
const MAX_SUBTASKS_LISTED: usize = 16;

/// What ends cut text.
pub const ELLIPSIS: char = '…';

/// One Slack message: the `text` fallback (notifications, clients without blocks, the
/// text-only retry) and the Block Kit `blocks`.
///
/// Guarantees: at most [`MAX_BLOCKS`] blocks; every text within its limit; `text` at most
/// [`MAX_FALLBACK_TEXT`] long; every dynamic string escaped.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SlackMessage {
    /// Fallback text (Slack `mrkdwn`, escaped): [`text_only`] for [`message`], the reply's
    /// own text for [`changed_reply`]. Sent alone when Slack refuses the blocks.
    pub text: String,
    /// Block Kit blocks, as JSON objects.
    pub blocks: Vec<Value>,
}

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
/// Never cuts inside an entity (`&amp;`) or inside a link this module wrote (`<url|label>`).
fn clip(s: &str, max: usize) -> String {
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
    let mut out = kept.trim_end().to_string();
    out.push(ELLIPSIS);
    out
}

/// Escapes `raw` and puts what looks like a configuration key (`state.backend.rocksdb.thread.num`,
/// `sink.buffer-flush.max-rows`, `[diagnosis.operator_kinds]`) in `code`.
///
/// A key is a run of lowercase ASCII letters, digits, `-` and `_` in at least two
/// `.`-separated parts of two characters or more, starting with a letter: numbers
/// (`1.09`) and abbreviations (`e.g.`) are not keys.
pub fn with_code_keys(raw: &str) -> String {
    fn in_run(c: char) -> bool {
        c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')
    }
    fn is_key(w: &str) -> bool {
        w.starts_with(|c: char| c.is_ascii_lowercase())
            && w.contains('.')
            && w.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '-' | '_'))
            && w.split('.').all(|part| part.len() >= 2)
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
            out.push('`');
            out.push_str(core);
            out.push('`');
            out.push_str(&run[lead + core.len()..]);
        } else {
            out.push_str(run);
        }
        rest = &rest[len..];
    }
    out
}

/// Escapes text for a `plain_text` object on one line (newlines become spaces).
fn plain(s: &str) -> String {
    escape(&s.replace(['\n', '\r'], " "))
}

fn pct(v: Option<f64>) -> String {
    v.map(|r| format!("{:.0}%", r * 100.0)).unwrap_or_else(|| "?".into())
}

fn mrkdwn(text: String, max: usize) -> Value {
    json!({ "type": "mrkdwn", "text": clip(&text, max), "verbatim": true })
}

fn header(text: &str) -> Value {
    json!({
        "type": "header",
        "text": { "type": "plain_text", "text": clip(text, MAX_HEADER_TEXT), "emoji": true }
    })
}

fn section(text: String) -> Value {
    json!({ "type": "section", "text": mrkdwn(text, MAX_SECTION_TEXT) })
}

fn fields(items: Vec<String>) -> Value {
    let fields: Vec<Value> = items.into_iter().take(MAX_FIELDS).map(|f| mrkdwn(f, MAX_FIELD_TEXT)).collect();
    json!({ "type": "section", "fields": fields })
}

fn context(items: Vec<String>) -> Value {
    let elements: Vec<Value> =
        items.into_iter().take(MAX_CONTEXT_ELEMENTS).map(|t| mrkdwn(t, MAX_TEXT_OBJECT)).collect();
    json!({ "type": "context", "elements": elements })
}

/// Packs escaped lines into sections of at most [`MAX_SECTION_TEXT`], the first one
/// starting with `title`; at most [`MAX_LIST_SECTIONS`] sections, then `… n more`.
fn list_sections(title: &str, lines: &[String]) -> Vec<Value> {
    let mut sections: Vec<String> = Vec::new();
    let mut current = title.to_string();
    let mut dropped = 0;
    for (i, line) in lines.iter().enumerate() {
        let line = clip(line, MAX_SECTION_TEXT - 1 - slack_len(title));
        if slack_len(&current) + 1 + slack_len(&line) > MAX_SECTION_TEXT {
            if sections.len() + 1 == MAX_LIST_SECTIONS {
                dropped = lines.len() - i;
                break;
            }
            sections.push(std::mem::take(&mut current));
            current = line;
        } else {
            if !current.is_empty() {
                current.push('\n');
            }
            current.push_str(&line);
        }
    }
    if dropped > 0 {
        let more = format!("\n{ELLIPSIS} {dropped} more in the verdict");
        current = clip(&current, MAX_SECTION_TEXT - slack_len(&more));
        current.push_str(&more);
    }
    sections.push(current);
    sections.into_iter().map(section).collect()
}

/// Keeps at most [`MAX_BLOCKS`] blocks; the last kept says that some were left out.
fn within_block_limit(mut blocks: Vec<Value>) -> Vec<Value> {
    if blocks.len() > MAX_BLOCKS {
        let left_out = blocks.len() - (MAX_BLOCKS - 1);
        blocks.truncate(MAX_BLOCKS - 1);
        blocks.push(context(vec![format!("{ELLIPSIS} {left_out} more blocks left out")]));
    }
    blocks
}

/// The header: an emoji for the status, `Changed: ` when the verdict replaces another,
/// the status and the job (and the culprit).
fn status_title(v: &Verdict, job: &str, changed: bool) -> String {
    let changed = if changed { "Changed: " } else { "" };
    match (v.status, &v.culprit) {
        (Status::CulpritFound, Some(c)) => {
            format!(":red_circle: {changed}Backpressure culprit in {job}: {}", plain(&c.vertex_name))
        }
        (Status::CulpritFound, None) => format!(":red_circle: {changed}Backpressure culprit in {job}"),
        (Status::NoSingleCulprit, _) => {
            format!(":large_orange_circle: {changed}No single backpressure culprit in {job}")
        }
        (Status::NoBackpressure, _) => format!(":large_green_circle: {changed}No backpressure in {job}"),
        (Status::Inconclusive, _) => format!(":grey_question: {changed}Backpressure diagnosis inconclusive for {job}"),
    }
}

/// `fraud-score (subtask 0 of 4)`: the subtasks when not all of them carry the problem.
fn culprit_name(c: &Culprit) -> String {
    let mut s = escape(&c.vertex_name);
    if !c.subtasks.is_empty() && c.subtasks.len() < c.parallelism as usize {
        let listed: Vec<String> = c.subtasks.iter().take(MAX_SUBTASKS_LISTED).map(|i| i.to_string()).collect();
        let more = if c.subtasks.len() > MAX_SUBTASKS_LISTED { format!(", {ELLIPSIS}") } else { String::new() };
        let noun = if c.subtasks.len() == 1 { "subtask" } else { "subtasks" };
        let _ = write!(s, " ({noun} {}{more} of {})", listed.join(", "), c.parallelism);
    }
    s
}

fn other_culprits(v: &Verdict) -> Option<String> {
    let main = v.culprit.as_ref().map(|c| c.vertex_id.as_str());
    let others: Vec<String> =
        v.culprits.iter().filter(|c| Some(c.vertex_id.as_str()) != main).map(culprit_name).collect();
    (!others.is_empty()).then(|| format!("also: {}", others.join(", ")))
}

fn hazard_line(h: &Hazard) -> String {
    let (icon, severity) = match h.severity {
        Severity::Critical => (":rotating_light:", "critical"),
        Severity::Warning => (":warning:", "warning"),
    };
    let kind = match h.kind {
        HazardKind::Retention => "retention",
        HazardKind::CheckpointsStalled => "checkpoints stalled",
    };
    let mut s = format!("{icon} *{severity}* · {kind}");
    if let Some(topic) = &h.topic {
        let _ = write!(s, " · topic {}", escape(topic));
    }
    match h.time_to_loss_seconds {
        Some(t) if t <= 0 => s.push_str(" · losing data now"),
        Some(t) => {
            let _ = write!(s, " · data loss in {:#}", jiff::SignedDuration::from_secs(t));
        }
        None => {}
    }
    let _ = write!(s, ": {}", escape(&h.detail));
    s
}

fn hazards_sorted(v: &Verdict) -> Vec<&Hazard> {
    let mut hazards: Vec<&Hazard> = v.hazards.iter().collect();
    hazards.sort_by_key(|h| std::cmp::Reverse(h.severity));
    hazards
}

/// `A 0%/74% → B 0%/86% → *C 99%/0%*` (busy / backpressured, max over subtasks).
fn graph_line(v: &Verdict) -> String {
    let parts: Vec<String> = v
        .graph
        .vertices
        .iter()
        .map(|x| {
            let item = format!("{} {}/{}", escape(&x.name), pct(x.busy_max), pct(x.backpressured_max));
            if x.state == VertexState::Culprit { format!("*{item}*") } else { item }
        })
        .collect();
    format!("Graph (busy/backpressured): {}", parts.join(" → "))
}

fn labels_line(labels: &BTreeMap<String, String>) -> Option<String> {
    if labels.is_empty() {
        return None;
    }
    let parts: Vec<String> = labels.iter().map(|(k, v)| format!("{}={}", escape(k), escape(v))).collect();
    Some(format!("Labels: {}", parts.join(" · ")))
}

/// `<url|label>` when the URL is a plain http(s) URL; otherwise the escaped URL as text
/// (never a link).
fn link(url: &str, label: &str) -> String {
    let clean = (url.starts_with("https://") || url.starts_with("http://"))
        && !url.chars().any(|c| c.is_whitespace() || c.is_control() || matches!(c, '<' | '>' | '|'));
    if clean { format!("<{}|{label}>", escape(url)) } else { escape(url) }
}

fn verdict_link(n: &Notice) -> Option<String> {
    let url = n.verdict_url.as_deref()?;
    let label = match n.verdict_id {
        Some(id) => format!("Verdict #{id}"),
        None => "The verdict".to_string(),
    };
    Some(format!(":link: {}", link(url, &label)))
}

fn numbered(items: &[String]) -> Vec<String> {
    items.iter().enumerate().map(|(i, f)| format!("{}. {}", i + 1, with_code_keys(f))).collect()
}

fn bulleted(items: &[String]) -> Vec<String> {
    items.iter().map(|f| format!("• {}", with_code_keys(f))).collect()
}

fn job_line(n: &Notice) -> String {
    format!("{} `{}`", escape(&n.job.name), escape(&n.job.id))
}

fn verdict_blocks(n: &Notice, v: &Verdict) -> Vec<Value> {
    let mut blocks = Vec::new();
    blocks.push(header(&status_title(v, &plain(&n.job.name), n.changed)));
    blocks.push(section(escape(&v.summary)));

    let mut f = Vec::new();
    if let Some(c) = &v.culprit {
        let mut s = format!("*Culprit*\n{}", culprit_name(c));
        if let Some(others) = other_culprits(v) {
            let _ = write!(s, "\n{others}");
        }
        f.push(s);
    }
    f.push(format!("*Finding*\n`{}`", v.finding.as_str()));
    f.push(format!("*Confidence*\n{}", v.confidence.as_str()));
    f.push(format!("*Job*\n{}", job_line(n)));
    f.push(format!("*At*\n{} · window {} s", escape(&v.at), v.window_seconds));
    blocks.push(fields(f));

    if !v.cause.is_empty() {
        blocks.push(section(format!("*Cause*\n{}", escape(&v.cause))));
    }
    if !v.fix.is_empty() {
        blocks.extend(list_sections("*Fix*", &numbered(&v.fix)));
    }
    if !v.not_the_fix.is_empty() {
        blocks.extend(list_sections("*Would not help*", &bulleted(&v.not_the_fix)));
    }
    if !v.hazards.is_empty() {
        let lines: Vec<String> = hazards_sorted(v).into_iter().map(hazard_line).collect();
        blocks.extend(list_sections("*Hazards*", &lines));
    }
    if !v.graph.vertices.is_empty() {
        blocks.push(context(vec![graph_line(v)]));
    }
    if let Some(labels) = labels_line(&n.labels) {
        blocks.push(context(vec![labels]));
    }
    if let Some(l) = verdict_link(n) {
        blocks.push(context(vec![l]));
    }
    within_block_limit(blocks)
}

fn resolved_line(n: &Notice) -> String {
    format!(":white_check_mark: *Resolved*: {}: the alert group stopped firing.", job_line(n))
}

fn could_not_line(n: &Notice) -> String {
    let reason = n.reason.as_deref().unwrap_or("no reason given");
    format!(":warning: {}: could not diagnose: {}", job_line(n), escape(reason))
}

fn short_blocks(n: &Notice, line: String) -> Vec<Value> {
    let mut blocks = vec![section(line)];
    let mut ctx = Vec::new();
    if let Some(labels) = labels_line(&n.labels) {
        ctx.push(labels);
    }
    if let Some(l) = verdict_link(n) {
        ctx.push(l);
    }
    if !ctx.is_empty() {
        blocks.push(context(ctx));
    }
    blocks
}

/// The message for a notice.
///
/// * [`NoticeKind::Verdict`] (first or `changed`): the layout in the module docs. A
///   verdict notice without a verdict renders as "could not diagnose: no verdict".
/// * [`NoticeKind::Resolved`]: one short section (job, "the alert group stopped firing"),
///   the labels and the link.
/// * [`NoticeKind::CouldNotDiagnose`]: "`<job>`: could not diagnose: `<reason>`", the
///   labels and the link.
///
/// `text` is [`text_only`]. Never fails: long text is cut with `…` (see the limits).
pub fn message(notice: &Notice) -> SlackMessage {
    let blocks = match (notice.kind, &notice.verdict) {
        (NoticeKind::Verdict, Some(v)) => verdict_blocks(notice, v),
        (NoticeKind::Resolved, _) => short_blocks(notice, resolved_line(notice)),
        _ => short_blocks(notice, could_not_line(&with_reason(notice))),
    };
    SlackMessage { text: text_only(notice), blocks }
}

/// A verdict notice that lacks its verdict says so as its reason.
fn with_reason(n: &Notice) -> Notice {
    let mut n = n.clone();
    if n.kind == NoticeKind::Verdict && n.verdict.is_none() && n.reason.is_none() {
        n.reason = Some("the notice carries no verdict".into());
    }
    n
}

/// The short threaded reply under a group's first message when a verdict replaces what it
/// showed (the first message itself is updated with [`message`]): "Verdict changed" (or
/// "Diagnosed" when the notice is not `changed`, e.g. after a failure to diagnose), the new
/// summary, culprit, finding and confidence, in one section, plus the link. A notice
/// without a verdict renders as [`message`].
pub fn changed_reply(notice: &Notice) -> SlackMessage {
    let Some(v) = &notice.verdict else {
        return message(notice);
    };
    let title = if notice.changed { "Verdict changed" } else { "Diagnosed" };
    let mut line = format!(":arrows_counterclockwise: *{title}* (message above updated): {}", escape(&v.summary));
    let mut facts = Vec::new();
    if let Some(c) = &v.culprit {
        facts.push(format!("culprit {}", culprit_name(c)));
    }
    facts.push(format!("finding `{}`", v.finding.as_str()));
    facts.push(format!("confidence {}", v.confidence.as_str()));
    let _ = write!(line, "\n{}", facts.join(" · "));
    let mut blocks = vec![section(line.clone())];
    if let Some(l) = verdict_link(notice) {
        blocks.push(context(vec![l.clone()]));
        let _ = write!(line, "\n{l}");
    }
    SlackMessage { text: clip(&line, MAX_FALLBACK_TEXT), blocks }
}

/// The whole notice as escaped `mrkdwn` text without blocks, at most
/// [`MAX_FALLBACK_TEXT`] long: the `text` of every message, and what is sent alone when
/// Slack rejects the blocks (`invalid_blocks`, `msg_too_long`, …).
///
/// A verdict reads: summary; culprit, finding, confidence; job and time; cause; fix;
/// what would not help; hazards; graph; labels; link.
pub fn text_only(notice: &Notice) -> String {
    let n = with_reason(notice);
    let mut s = String::new();
    match (n.kind, &n.verdict) {
        (NoticeKind::Verdict, Some(v)) => {
            if n.changed {
                s.push_str("Changed: ");
            }
            let _ = writeln!(s, "{}", escape(&v.summary));
            let mut facts = Vec::new();
            if let Some(c) = &v.culprit {
                let mut culprit = format!("Culprit: {}", culprit_name(c));
                if let Some(others) = other_culprits(v) {
                    let _ = write!(culprit, " ({others})");
                }
                facts.push(culprit);
            }
            facts.push(format!("finding `{}`", v.finding.as_str()));
            facts.push(format!("confidence {}", v.confidence.as_str()));
            let _ = writeln!(s, "{}", facts.join(" · "));
            let _ = writeln!(s, "Job: {} · at {} · window {} s", job_line(&n), escape(&v.at), v.window_seconds);
            if !v.cause.is_empty() {
                let _ = writeln!(s, "\n*Cause*\n{}", escape(&v.cause));
            }
            let mut list = |title: &str, lines: Vec<String>| {
                if !lines.is_empty() {
                    let _ = writeln!(s, "\n*{title}*\n{}", lines.join("\n"));
                }
            };
            list("Fix", numbered(&v.fix));
            list("Would not help", bulleted(&v.not_the_fix));
            list("Hazards", hazards_sorted(v).into_iter().map(hazard_line).collect());
            if !v.graph.vertices.is_empty() {
                let _ = writeln!(s, "\n{}", graph_line(v));
            }
        }
        (NoticeKind::Resolved, _) => {
            let _ = writeln!(s, "{}", resolved_line(&n));
        }
        _ => {
            let _ = writeln!(s, "{}", could_not_line(&n));
        }
    }
    if let Some(labels) = labels_line(&n.labels) {
        let _ = writeln!(s, "{labels}");
    }
    if let Some(l) = verdict_link(&n) {
        let _ = writeln!(s, "{l}");
    }
    clip(s.trim_end(), MAX_FALLBACK_TEXT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::verdict::{Graph, GraphVertex};
    use proptest::prelude::*;

    fn notice(kind: NoticeKind, verdict: Option<Verdict>) -> Notice {
        let job = verdict.as_ref().map(|v| v.job.clone()).unwrap_or(crate::model::verdict::JobRef {
            name: "bp-lab-slow-sink".into(),
            id: "da23ad9af4e7326542c9a70eac958f42".into(),
        });
        Notice {
            kind,
            group_key: "{}:{alertname=\"FlinkBackpressure\"}".into(),
            labels: BTreeMap::from([
                ("alertname".to_string(), "FlinkBackpressure".to_string()),
                ("severity".to_string(), "page".to_string()),
            ]),
            job,
            verdict,
            verdict_id: Some(42),
            verdict_url: Some("https://culprit.example.com/api/v1/verdicts/42".into()),
            reason: None,
            firing: kind != NoticeKind::Resolved,
            changed: false,
            idempotency_key: "slack:group:1".into(),
            at_ms: 1_795_000_000_000,
        }
    }

    fn demo(name: &str) -> Verdict {
        let capture = crate::samples::captures::CAPTURES.iter().find(|c| c.name == name).expect("a bundled capture");
        crate::samples::captures::verdict(capture).expect("the capture diagnoses")
    }

    /// Every string in a JSON value.
    fn strings(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) => out.push(s.clone()),
            Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
            Value::Object(o) => o.values().for_each(|x| strings(x, out)),
            _ => {}
        }
    }

    fn all_text(m: &SlackMessage) -> Vec<String> {
        let mut out = vec![m.text.clone()];
        m.blocks.iter().for_each(|b| strings(b, &mut out));
        out
    }

    /// Checks every vendor limit of a message.
    fn assert_within_limits(m: &SlackMessage) {
        assert!(m.blocks.len() <= MAX_BLOCKS, "{} blocks", m.blocks.len());
        assert!(slack_len(&m.text) <= MAX_FALLBACK_TEXT, "text of {}", slack_len(&m.text));
        for b in &m.blocks {
            match b["type"].as_str().unwrap() {
                "header" => {
                    assert_eq!(b["text"]["type"], "plain_text");
                    assert!(slack_len(b["text"]["text"].as_str().unwrap()) <= MAX_HEADER_TEXT);
                }
                "section" => {
                    if let Some(t) = b["text"]["text"].as_str() {
                        assert!(slack_len(t) <= MAX_SECTION_TEXT, "section of {}", slack_len(t));
                    }
                    if let Some(f) = b["fields"].as_array() {
                        assert!(f.len() <= MAX_FIELDS);
                        for x in f {
                            assert!(slack_len(x["text"].as_str().unwrap()) <= MAX_FIELD_TEXT);
                        }
                    }
                    assert!(b["text"].is_object() || b["fields"].is_array());
                }
                "context" => {
                    let e = b["elements"].as_array().unwrap();
                    assert!(!e.is_empty() && e.len() <= MAX_CONTEXT_ELEMENTS);
                    for x in e {
                        assert!(slack_len(x["text"].as_str().unwrap()) <= MAX_TEXT_OBJECT);
                    }
                }
                other => panic!("unexpected block type {other}"),
            }
        }
    }

    /// No `<` or `>` at all, and every `&` starts one of the three escapes.
    fn assert_escaped(s: &str) {
        assert!(!s.contains('<') && !s.contains('>'), "unescaped angle bracket in {s:?}");
        for (i, _) in s.match_indices('&') {
            let rest = &s[i..];
            assert!(
                rest.starts_with("&amp;") || rest.starts_with("&lt;") || rest.starts_with("&gt;"),
                "bare & in {s:?}"
            );
        }
    }

    #[test]
    fn a_first_sink_verdict_renders_as_snapshot() {
        let m = message(&notice(NoticeKind::Verdict, Some(demo("slow-sink"))));
        assert_within_limits(&m);
        insta::assert_json_snapshot!(m);
    }

    #[test]
    fn a_changed_hot_key_verdict_names_its_subtask_and_renders_as_snapshot() {
        let mut n = notice(NoticeKind::Verdict, Some(demo("hot-key")));
        n.changed = true;
        let m = message(&n);
        assert_within_limits(&m);
        let header = m.blocks[0]["text"]["text"].as_str().unwrap();
        assert!(
            header.starts_with(":red_circle: Changed: Backpressure culprit in bp-lab-hot-key: fraud-score"),
            "{header}"
        );
        assert!(m.blocks[2]["fields"][0]["text"].as_str().unwrap().contains("fraud-score (subtask 0 of 4)"));
        insta::assert_json_snapshot!(m);
    }

    #[test]
    fn a_rocksdb_stall_verdict_puts_config_keys_in_code_and_renders_as_snapshot() {
        let m = message(&notice(NoticeKind::Verdict, Some(demo("rocksdb-stall"))));
        assert_within_limits(&m);
        let fix = m.blocks.iter().find(|b| b["text"]["text"].as_str().is_some_and(|t| t.starts_with("*Fix*"))).unwrap();
        let fix = fix["text"]["text"].as_str().unwrap();
        assert!(fix.contains("1. More background threads"), "{fix}");
        assert!(fix.contains("`state.backend.rocksdb.thread.num`: 4"), "{fix}");
        assert!(fix.contains("`taskmanager.memory.managed.fraction` (default 0.4)"), "{fix}");
        insta::assert_json_snapshot!(m);
    }

    #[test]
    fn a_healthy_verdict_says_no_backpressure_and_renders_as_snapshot() {
        let m = message(&notice(NoticeKind::Verdict, Some(demo("healthy"))));
        assert_within_limits(&m);
        assert!(m.blocks[0]["text"]["text"].as_str().unwrap().contains("No backpressure in bp-lab-healthy"));
        insta::assert_json_snapshot!(m);
    }

    #[test]
    fn a_resolved_notice_is_a_short_follow_up() {
        let m = message(&notice(NoticeKind::Resolved, None));
        assert_within_limits(&m);
        assert!(m.blocks.len() <= 2);
        assert!(m.text.starts_with(":white_check_mark: *Resolved*: bp-lab-slow-sink"), "{}", m.text);
        insta::assert_json_snapshot!(m);
    }

    #[test]
    fn a_could_not_diagnose_notice_gives_the_reason() {
        let mut n = notice(NoticeKind::CouldNotDiagnose, None);
        n.reason = Some("Prometheus at http://prom:9090 timed out for 5 min".into());
        let m = message(&n);
        assert_within_limits(&m);
        assert!(m.text.contains("could not diagnose: Prometheus at http://prom:9090 timed out for 5 min"));
        assert!(m.blocks[0]["text"]["text"].as_str().unwrap().contains("could not diagnose: "));
        insta::assert_json_snapshot!(m);
    }

    #[test]
    fn a_verdict_notice_without_a_verdict_says_it_could_not_diagnose() {
        let m = message(&notice(NoticeKind::Verdict, None));
        assert!(m.text.contains("could not diagnose: the notice carries no verdict"), "{}", m.text);
    }

    #[test]
    fn the_changed_reply_is_one_section_with_the_new_summary_and_the_link() {
        let mut n = notice(NoticeKind::Verdict, Some(demo("slow-sink")));
        n.changed = true;
        let m = changed_reply(&n);
        assert_within_limits(&m);
        assert_eq!(m.blocks.len(), 2);
        let t = m.blocks[0]["text"]["text"].as_str().unwrap();
        assert!(t.starts_with(":arrows_counterclockwise: *Verdict changed*"), "{t}");
        assert!(t.contains("slow-sink: Writer (sink) is the culprit"), "{t}");
        assert!(m.text.contains("<https://culprit.example.com/api/v1/verdicts/42|Verdict #42>"));
    }

    fn huge_verdict() -> Verdict {
        let mut v = demo("hot-key");
        let name = |i: usize| format!("vertex-{i} & <operator> with a rather long name number {i}");
        v.graph = Graph {
            vertices: (0..200)
                .map(|i| GraphVertex {
                    id: format!("{i:032x}"),
                    name: name(i),
                    parallelism: 64,
                    busy_max: Some(0.5),
                    backpressured_max: Some(0.25),
                    idle_avg: Some(0.25),
                    state: if i == 150 { VertexState::Culprit } else { VertexState::Backpressured },
                })
                .collect(),
            edges: Vec::new(),
            from_plan: true,
        };
        v.cause = "The cause & <its numbers>. ".repeat(400);
        assert!(v.cause.len() >= 10_000);
        v.summary = "S<&>".repeat(1000);
        v.fix = (0..100)
            .map(|i| format!("{i}: set state.backend.rocksdb.thread.num & <more>. {}", "x".repeat(400)))
            .collect();
        v.not_the_fix = (0..100).map(|i| format!("{i}: {}", "y&".repeat(2000))).collect();
        v.hazards = (0..100)
            .map(|i| Hazard {
                kind: HazardKind::Retention,
                severity: if i % 2 == 0 { Severity::Warning } else { Severity::Critical },
                time_to_loss_seconds: Some(i * 60),
                topic: Some(format!("topic-{i}")),
                detail: "d<>".repeat(300),
            })
            .collect();
        let c = v.culprit.as_mut().unwrap();
        c.vertex_name = "C&".repeat(500);
        c.parallelism = 4096;
        c.subtasks = (0..1000).collect();
        v.culprits = vec![v.culprit.clone().unwrap(); 30];
        v
    }

    #[test]
    fn a_verdict_with_200_vertices_and_a_10_kb_cause_stays_within_every_limit() {
        let mut n = notice(NoticeKind::Verdict, Some(huge_verdict()));
        n.job.name = "J<".repeat(300);
        n.labels = (0..300).map(|i| (format!("label_{i}"), "v&".repeat(50))).collect();
        n.reason = Some("r".repeat(50_000));
        assert!(message(&n).text.ends_with(ELLIPSIS));
        for m in [message(&n), changed_reply(&n)] {
            assert_within_limits(&m);
            for t in all_text(&m) {
                // Cutting never leaves half an escape behind.
                let without_links = t.replace("<https://culprit.example.com/api/v1/verdicts/42|Verdict #42>", "");
                assert_escaped(&without_links);
            }
        }
        let m = message(&n);
        let graph = m.blocks.iter().find(|b| b["type"] == "context").unwrap();
        let graph = graph["elements"][0]["text"].as_str().unwrap();
        assert!(graph.starts_with("Graph (busy/backpressured): vertex-0 &amp; &lt;operator&gt;"), "{graph}");
        assert!(graph.ends_with(ELLIPSIS));
        let fix = m.blocks.iter().find_map(|b| b["text"]["text"].as_str().filter(|t| t.starts_with("*Fix*"))).unwrap();
        assert!(
            fix.starts_with("*Fix*\n1. 0: set `state.backend.rocksdb.thread.num` &amp; &lt;more&gt;. xxx"),
            "{fix}"
        );
        assert!(m.blocks.iter().any(|b| b["text"]["text"].as_str().is_some_and(|t| t.contains("more in the verdict"))));
        let resolved = message(&Notice { kind: NoticeKind::Resolved, ..n.clone() });
        assert_within_limits(&resolved);
        let failed = message(&Notice { kind: NoticeKind::CouldNotDiagnose, ..n });
        assert_within_limits(&failed);
        assert!(failed.text.ends_with(ELLIPSIS));
    }

    #[test]
    fn more_than_50_blocks_are_cut_to_50_with_a_note() {
        let blocks: Vec<Value> = (0..80).map(|i| section(format!("b{i}"))).collect();
        let kept = within_block_limit(blocks);
        assert_eq!(kept.len(), MAX_BLOCKS);
        assert_eq!(kept[49]["elements"][0]["text"], "… 31 more blocks left out");
    }

    #[test]
    fn clipping_never_splits_an_escape_or_a_link() {
        assert_eq!(clip("abc", 3), "abc");
        assert_eq!(clip("abcd", 3), "ab…");
        assert_eq!(clip("a &amp; b", 5), "a…");
        assert_eq!(clip("see <https://x.example/y|link>", 12), "see…");
        // Surrogate pairs count twice.
        assert_eq!(slack_len("😀"), 2);
        assert_eq!(clip("😀😀😀", 5), "😀😀…");
    }

    #[test]
    fn a_label_or_job_name_that_mentions_channel_pings_nobody() {
        let mut n = notice(NoticeKind::Verdict, Some(demo("slow-sink")));
        n.labels.insert("team".into(), "<!channel>".into());
        n.labels.insert("<!here>".into(), "<https://evil.example|click>".into());
        n.job.name = "<!channel> & co".into();
        for kind in [NoticeKind::Verdict, NoticeKind::Resolved, NoticeKind::CouldNotDiagnose] {
            let m = message(&Notice { kind, ..n.clone() });
            let all = all_text(&m).join("\n");
            assert!(all.contains("&lt;!channel&gt;"), "{all}");
            assert!(all.contains("&lt;!here&gt;=&lt;https://evil.example|click&gt;"), "{all}");
            assert!(!all.contains("<!channel>") && !all.contains("<!here>") && !all.contains("<https://evil"));
            assert!(all.contains("&lt;!channel&gt; &amp; co"), "{all}");
        }
    }

    #[test]
    fn every_mrkdwn_text_is_verbatim_so_bare_mentions_stay_text() {
        let m = message(&notice(NoticeKind::Verdict, Some(demo("hot-key"))));
        let mut n = 0;
        fn walk(v: &Value, n: &mut usize) {
            match v {
                Value::Object(o) => {
                    if o.get("type").and_then(Value::as_str) == Some("mrkdwn") {
                        assert_eq!(o.get("verbatim"), Some(&Value::Bool(true)));
                        *n += 1;
                    }
                    o.values().for_each(|x| walk(x, n));
                }
                Value::Array(a) => a.iter().for_each(|x| walk(x, n)),
                _ => {}
            }
        }
        m.blocks.iter().for_each(|b| walk(b, &mut n));
        assert!(n > 5);
    }

    #[test]
    fn a_verdict_url_that_could_break_the_link_syntax_is_shown_as_text() {
        assert_eq!(link("https://c.example/v/1?a=1&b=2", "V"), "<https://c.example/v/1?a=1&amp;b=2|V>");
        assert_eq!(link("https://c.example/x|<!channel>", "V"), "https://c.example/x|&lt;!channel&gt;");
        assert_eq!(link("javascript:alert(1)", "V"), "javascript:alert(1)");
    }

    #[test]
    fn config_keys_go_in_code_but_numbers_and_abbreviations_do_not() {
        assert_eq!(
            with_code_keys("raise taskmanager.memory.managed.fraction (default 0.4), e.g. 0.6."),
            "raise `taskmanager.memory.managed.fraction` (default 0.4), e.g. 0.6."
        );
        assert_eq!(
            with_code_keys("[diagnosis.operator_kinds] \"a<b\" = 1.09 ms; sink.buffer-flush.max-rows."),
            "[`diagnosis.operator_kinds`] \"a&lt;b\" = 1.09 ms; `sink.buffer-flush.max-rows`."
        );
        assert_eq!(with_code_keys("Source: txn-source -> parse"), "Source: txn-source -&gt; parse");
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        #[test]
        fn any_label_job_or_vertex_name_comes_out_escaped(
            label_key in "[<>&!a-z|:/ ]{0,40}|\\PC{0,40}",
            label_value in "[<>&!a-z|:/ ]{0,40}|\\PC{0,40}",
            job in "[<>&!a-z|:/ ]{0,40}|\\PC{0,40}",
            vertex in "[<>&!a-z|:/ ]{0,40}|\\PC{0,40}",
            long in "[<>&a ]{2990,3010}",
        ) {
            let mut v = crate::model::verdict::Verdict {
                job: crate::model::verdict::JobRef { name: job.clone(), id: job.clone() },
                ..template().clone()
            };
            v.summary = format!("{vertex} is the culprit in {job}");
            v.cause = format!("{long}{vertex}");
            v.fix = vec![format!("raise {vertex}'s state.backend.rocksdb.thread.num"), long.clone()];
            v.not_the_fix = vec![vertex.clone()];
            v.graph.vertices.iter_mut().for_each(|x| x.name = vertex.clone());
            if let Some(c) = v.culprit.as_mut() {
                c.vertex_name = vertex.clone();
            }
            v.culprits = v.culprit.iter().cloned().chain(v.culprit.iter().map(|c| Culprit { vertex_id: "other".into(), ..c.clone() })).collect();
            let mut n = notice(NoticeKind::Verdict, Some(v));
            n.job.name = job.clone();
            n.labels.insert(label_key.clone(), label_value.clone());
            n.labels.insert("x".into(), long.clone());
            n.verdict_url = None;
            n.reason = Some(format!("{label_value}{long}"));
            for kind in [NoticeKind::Verdict, NoticeKind::Resolved, NoticeKind::CouldNotDiagnose] {
                for changed in [false, true] {
                    let n = Notice { kind, changed, ..n.clone() };
                    for m in [message(&n), changed_reply(&n)] {
                        assert_within_limits(&m);
                        for t in all_text(&m) {
                            assert_escaped(&t);
                        }
                    }
                }
            }
        }
    }

    fn template() -> &'static Verdict {
        static V: std::sync::OnceLock<Verdict> = std::sync::OnceLock::new();
        V.get_or_init(|| demo("hot-key"))
    }
}
