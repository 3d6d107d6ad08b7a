//! Discord messages: a short `content` line and one embed, for every [`NoticeKind`].
//!
//! Pure: no IO, no clock. [`crate::notify::discord`] sends what this module builds.
//!
//! # Layout of a verdict (the order of [`crate::render::slack`])
//!
//! * `content`: the marks (a possible repeat) and the status line: what a notification
//!   shows.
//! * the embed: `title` (status, culprit, job), `description` (the summary, hazards, the
//!   numbered fix, what would not help, the vertex table in a code block, the links),
//!   `fields` (culprit, finding, confidence, job, time), `footer` (the labels), `color`
//!   by status, `timestamp` (the notice's time) and `image`: the verdict's picture
//!   ([`crate::render::png`]) when the notice links its signed page over HTTPS.
//!
//! [`resolved_edit`] turns the verdict's embed green and titles it "Resolved";
//! [`changed_note`] is the short new message posted when the culprit changed (the verdict's
//! own message is edited in place).
//!
//! # Safety of untrusted text
//!
//! Names, verdict text and label values go through [`escape`]: control characters are
//! replaced, newlines become spaces, Markdown's characters (`\` `` ` `` `*` `_` `~` `[`
//! `]` `<` `>` `|` `#`, and `-` starting the text) get a backslash (so `<@id>`, `<@&role>` and `<#channel>` are no
//! mentions, `||x||` no spoiler, `[x](url)` no link), `@` is followed by a zero width space
//! (`@everyone`, `@here` read as text) and `://` becomes `\://` (no autolink). In the
//! vertex table (a code block, where Discord formats and mentions nothing) a backtick
//! becomes `ˋ`. The notifier also sends `allowed_mentions: {parse: []}`, so that nothing in
//! a message can ping, escaped or not. The footer is plain text (cleaned, `@` broken as above).
//!
//! # Limits
//!
//! Discord's limits are the constants below; lengths are counted in UTF-16 units (never
//! fewer than the characters Discord counts). Each part of the embed has a budget
//! ([`Budget`]) adding up to less than [`MAX_EMBEDS_TOTAL`].

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::{Value, json};

use crate::model::incident::Incident;
use crate::model::notice::{Notice, NoticeKind};
use crate::model::verdict::{Culprit, Hazard, HazardKind, Severity, Status, Verdict, VertexState};
use crate::render::hh_mm;
use crate::render::incident::{MAX_OTHERS_NAMED, cause_phrase_quoted, job_line as incident_job_line, named};
use crate::render::names::{self, Names};

/// Longest `content` of a message.
/// <https://discord.com/developers/docs/resources/webhook#execute-webhook>
pub const MAX_CONTENT: usize = 2000;

/// Most embeds in one message.
/// <https://discord.com/developers/docs/resources/webhook#execute-webhook>
pub const MAX_EMBEDS: usize = 10;

/// Longest embed `title`. <https://discord.com/developers/docs/resources/message#embed-object-embed-limits>
pub const MAX_TITLE: usize = 256;

/// Longest embed `description`. <https://discord.com/developers/docs/resources/message#embed-object-embed-limits>
pub const MAX_DESCRIPTION: usize = 4096;

/// Most `fields` of an embed. <https://discord.com/developers/docs/resources/message#embed-object-embed-limits>
pub const MAX_FIELDS: usize = 25;

/// Longest field `name`. <https://discord.com/developers/docs/resources/message#embed-object-embed-limits>
pub const MAX_FIELD_NAME: usize = 256;

/// Longest field `value`. <https://discord.com/developers/docs/resources/message#embed-object-embed-limits>
pub const MAX_FIELD_VALUE: usize = 1024;

/// Longest `footer.text`. <https://discord.com/developers/docs/resources/message#embed-object-embed-limits>
pub const MAX_FOOTER: usize = 2048;

/// Most characters in all embeds of a message together (titles, descriptions, field names
/// and values, footers, author names).
/// <https://discord.com/developers/docs/resources/message#embed-object-embed-limits>
pub const MAX_EMBEDS_TOTAL: usize = 6000;

/// What ends cut text.
pub const ELLIPSIS: char = '…';

/// The mark of a message that may repeat one sent before ([`Notice::maybe_repeat`]).
pub const REPEAT_MARK: &str = "*possible repeat: an earlier delivery could not be confirmed*";

/// Colours of the embed's bar.
pub const RED: u32 = 0xE0_1E_5A;
pub const ORANGE: u32 = 0xF2_99_4A;
pub const GREEN: u32 = 0x2E_B6_7D;
pub const GREY: u32 = 0x9E_9E_9E;

/// The text budget of each part of a verdict's embed (UTF-16 units). The description's
/// parts, 700 + 400 + 1,000 + 300 + 1,000 + 400 = 3,800, plus 5 blank-line separators (10),
/// stay below [`MAX_DESCRIPTION`]; the embed, 256 (title) + 3,810 + 5 fields × (10 + 200)
/// + 500 (footer) = 5,616, below [`MAX_EMBEDS_TOTAL`].
pub struct Budget;

impl Budget {
    pub const SUMMARY: usize = 700;
    pub const HAZARDS: usize = 400;
    pub const FIX: usize = 1000;
    pub const NOT_THE_FIX: usize = 300;
    pub const TABLE: usize = 1000;
    pub const LINKS: usize = 400;
    pub const FIELD: usize = 200;
    pub const FOOTER: usize = 500;
    /// The short text alone sent after Discord refused a message's form.
    pub const FALLBACK: usize = 1000;
}

/// Length as Discord limits it, counted in UTF-16 units.
pub fn len(s: &str) -> usize {
    s.encode_utf16().count()
}

/// Untrusted text for Discord Markdown (see the module docs).
pub fn escape(s: &str) -> String {
    let s = names::clean(s);
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    for (i, &c) in chars.iter().enumerate() {
        match c {
            '\n' | '\r' => out.push(' '),
            '\\' | '`' | '*' | '_' | '~' | '[' | ']' | '<' | '>' | '|' | '#' => {
                out.push('\\');
                out.push(c);
            }
            // A list item only at the start of a line.
            '-' if i == 0 => out.push_str("\\-"),
            '@' => out.push_str("@\u{200B}"),
            ':' if chars.get(i + 1) == Some(&'/') && chars.get(i + 2) == Some(&'/') => out.push_str("\\:"),
            c => out.push(c),
        }
    }
    out
}

/// Plain text (a footer, a code block): cleaned, one line, backticks as `ˋ`, `@` followed
/// by a zero width space (no mention reads as one, even where Discord would not ping).
fn plain(s: &str) -> String {
    names::clean(s).replace(['\n', '\r'], " ").replace('`', "\u{02CB}").replace('@', "@\u{200B}")
}

/// `s` cut to at most `max` UTF-16 units, ending with `…` when cut (a trailing lone
/// backslash is dropped so it escapes nothing).
pub fn cut(s: &str, max: usize) -> String {
    if len(s) <= max {
        return s.to_string();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in s.chars() {
        if used + c.len_utf16() + 1 > max {
            break;
        }
        used += c.len_utf16();
        out.push(c);
    }
    if out.ends_with('\\') && !out.ends_with("\\\\") {
        out.pop();
    }
    out.push(ELLIPSIS);
    out
}

/// One Discord message: `content` and `embeds` (the notifier adds `allowed_mentions`,
/// `username`).
///
/// Guarantees: `content` at most [`MAX_CONTENT`]; at most one embed, each text within its
/// limit and all of them within [`MAX_EMBEDS_TOTAL`]; untrusted text escaped.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiscordMessage {
    pub content: String,
    pub embeds: Vec<Value>,
}

/// The message for a notice (see the module docs); a verdict notice without a verdict
/// renders as "could not diagnose".
pub fn message(n: &Notice) -> DiscordMessage {
    let (title, color, description, fields) = match (n.kind, &n.verdict) {
        (NoticeKind::Verdict, Some(v)) => {
            (status_title(v, &n.job.name, n.changed), status_color(v), verdict_description(n, v), verdict_fields(n, v))
        }
        (NoticeKind::Resolved, _) => (
            format!("✅ Resolved: {}", job_name(n)),
            GREEN,
            with_links(n, format!("{}: the alert group stopped firing.", job_line(n))),
            Vec::new(),
        ),
        (NoticeKind::Joined, _) => (
            format!("🔗 Also firing: {}", job_name(n)),
            GREY,
            with_links(n, format!("{}: another alert group carries this verdict.", job_line(n))),
            Vec::new(),
        ),
        (NoticeKind::GroupResolved, _) => (
            format!("✅ Alert group resolved: {}", job_name(n)),
            GREY,
            with_links(n, format!("{}: one alert group stopped firing; the verdict stays open.", job_line(n))),
            Vec::new(),
        ),
        _ => (
            format!("⚠️ Could not diagnose {}", job_name(n)),
            GREY,
            with_links(n, format!("{}: could not diagnose: {}", job_line(n), escape(reason(n)))),
            Vec::new(),
        ),
    };
    let title = cut(&title, MAX_TITLE);
    let mut embed = json!({
        "title": title,
        "description": cut(&description, MAX_DESCRIPTION),
        "color": color,
    });
    if !fields.is_empty() {
        embed["fields"] = json!(fields);
    }
    // The verdict's picture by its signed HTTPS link: Discord fetches it (not counted in
    // the embed's text limits). <https://discord.com/developers/docs/resources/message#embed-object-embed-image-structure>
    if n.kind == NoticeKind::Verdict
        && let Some(url) = n.picture_https()
    {
        embed["image"] = json!({ "url": url });
    }
    if let Some(f) = footer(n) {
        embed["footer"] = json!({ "text": f });
    }
    if let Ok(t) = jiff::Timestamp::from_millisecond(n.at_ms) {
        embed["timestamp"] = json!(t.to_string());
    }
    DiscordMessage { content: content(n, &title), embeds: vec![embed] }
}

/// An incident's summary, one embed posted once and edited in place as jobs join: the
/// headline, when it started, the jobs that share the cause (their verdicts are folded
/// into it: a webhook cannot thread, [`crate::notify::discord`]) and those that do not.
///
/// It names the first [`SUMMARY_NAMED`] jobs (names cut to [`SUMMARY_NAME_CHARS`], so that the description never cuts a name); the jobs after them are named in
/// digests ([`incident_digest`]).
pub fn incident_message(incident: &Incident) -> DiscordMessage {
    let quote = |t: &str| format!("**{}**", escape(t));
    let phrase = cause_phrase_quoted(&incident.cause, &quote, &|t| escape(t));
    let n = incident.members.len();
    let title = cut(
        &format!("🧭 {n} jobs held back by {}", cause_phrase_quoted(&incident.cause, &|t| escape(t), &|t| escape(t))),
        MAX_TITLE,
    );
    let mut description = format!(
        "{n} jobs held back by {phrase}.\nSince {} · last verdict {} · each job's verdict is folded into this message{}.\n\n**Jobs:** {}",
        hh_mm(incident.first_ms),
        hh_mm(incident.last_ms),
        if n > SUMMARY_NAMED { " (the jobs after these are named in posts below, one a minute at most)" } else { "" },
        named(incident.members.iter().map(|m| incident_job_line(m, false)), SUMMARY_NAMED, &|t| escape(&cut(
            t,
            SUMMARY_NAME_CHARS
        ))),
    );
    if !incident.others.is_empty() {
        let others =
            named(incident.others.iter().map(|m| incident_job_line(m, true)), MAX_OTHERS_NAMED, &|t| escape(t));
        description.push_str(&format!(
            "\n\n**Not part of it** ({} jobs with other culprits): {others}",
            incident.others.len()
        ));
    }
    let mut embed = json!({ "title": title, "description": cut(&description, MAX_DESCRIPTION), "color": ORANGE });
    if let Ok(t) = jiff::Timestamp::from_millisecond(incident.last_ms) {
        embed["timestamp"] = json!(t.to_string());
    }
    DiscordMessage {
        content: cut(&escape(&format!("{n} jobs held back by one cause")), MAX_CONTENT),
        embeds: vec![embed],
    }
}

/// Jobs an incident's summary names: 25 names of at most [`SUMMARY_NAME_CHARS`], every
/// character escaped (about 125 each), and the headline stay under [`MAX_DESCRIPTION`].
pub const SUMMARY_NAMED: usize = 25;

/// Longest job name the summary shows.
pub const SUMMARY_NAME_CHARS: usize = 60;

/// Jobs one digest post names: 14 names of 120 characters, every character escaped
/// (about 246 each), stay under [`MAX_DESCRIPTION`].
pub const DIGEST_NAMED: usize = 14;

/// A digest of the incident's jobs in `range` (those after the summary's, counted since
/// the last post), each named.
pub fn incident_digest(incident: &Incident, range: (usize, usize)) -> DiscordMessage {
    let quote = |t: &str| format!("**{}**", escape(&cut(t, crate::render::incident::DIGEST_NAME_CHARS)));
    let d = crate::render::incident::digest(incident, range, &quote, &|t| escape(t));
    let description = format!("{}\n\n**Jobs:** {}", escape(&d.when), d.jobs);
    let embed = json!({ "title": cut(&d.title, MAX_TITLE), "description": cut(&description, MAX_DESCRIPTION), "color": ORANGE });
    DiscordMessage { content: String::new(), embeds: vec![embed] }
}

/// The verdict's message edited when the job resolved: `previous` (the verdict's embed as
/// posted, kept in the notifier's state) turned green and titled "Resolved", the resolution
/// in `content`; without it, [`message`] of the resolved notice.
pub fn resolved_edit(n: &Notice, previous: Option<&Value>) -> DiscordMessage {
    let fresh = message(n);
    let Some(prev) = previous.filter(|p| p.is_object()) else { return fresh };
    let mut embed = prev.clone();
    let old = prev["title"].as_str().unwrap_or_default();
    embed["title"] = json!(cut(&format!("✅ Resolved · {old}"), MAX_TITLE));
    embed["color"] = json!(GREEN);
    // The resolution's own line leads the description, within its limit.
    let old_description = prev["description"].as_str().unwrap_or_default();
    let line = format!("**Resolved**: {}: the alert group stopped firing.", job_line(n));
    let room = MAX_DESCRIPTION.saturating_sub(len(&line) + 2);
    embed["description"] = json!(format!("{line}\n\n{}", cut(old_description, room)));
    // The title and description grew by at most 256 + 4,096 − what they held; the total
    // is checked again and the description cut when it would pass.
    let over = embeds_len(std::slice::from_ref(&embed)).saturating_sub(MAX_EMBEDS_TOTAL);
    if over > 0 {
        let d = embed["description"].as_str().unwrap_or_default().to_string();
        embed["description"] = json!(cut(&d, len(&d).saturating_sub(over)));
    }
    DiscordMessage { content: fresh.content, embeds: vec![embed] }
}

/// The short new message posted when a verdict's culprit changed (its message above is
/// edited in place): the new status line and summary, and the link.
pub fn changed_note(n: &Notice) -> DiscordMessage {
    let Some(v) = &n.verdict else { return message(n) };
    let names = Names::of(v);
    let mut s = String::new();
    if n.maybe_repeat {
        let _ = writeln!(s, "{REPEAT_MARK}");
    }
    let _ = write!(
        s,
        "🔄 **Verdict changed** (the message above was updated): {}",
        cut(&escape(&names.text(&v.summary)), Budget::SUMMARY)
    );
    if let Some(l) = links_line(n) {
        let _ = write!(s, "\n{}", cut(&l, Budget::LINKS));
    }
    DiscordMessage { content: cut(&s, MAX_CONTENT), embeds: Vec::new() }
}

/// The message as text alone, sent once after Discord refused a message's form (400,
/// `50035 Invalid Form Body`): the status line, the summary, the first step of the fix and
/// the link, at most [`Budget::FALLBACK`].
pub fn fallback(n: &Notice) -> DiscordMessage {
    if n.kind == NoticeKind::Incident {
        // An incident's summary or digest: its headline (a notice of it has no verdict).
        let line = n.incident_view.as_ref().map(crate::render::incident::headline);
        let line = line.unwrap_or_else(|| "Jobs held back by one cause".to_string());
        return DiscordMessage { content: cut(&escape(&line), Budget::FALLBACK), embeds: Vec::new() };
    }
    let m = message(n);
    let mut s = m.content.clone();
    if let Some(v) = n.verdict.as_ref().filter(|_| n.kind == NoticeKind::Verdict) {
        let names = Names::of(v);
        let _ = write!(s, "\n{}", cut(&escape(&names.text(&v.summary)), 350));
        if let Some(first) = v.fix.first() {
            let _ = write!(s, "\n**Fix first:** {}", cut(&escape(&names.text(first)), 300));
        }
    }
    if let Some(l) = links_line(n) {
        let _ = write!(s, "\n{}", cut(&l, 300));
    }
    DiscordMessage { content: cut(&s, Budget::FALLBACK), embeds: Vec::new() }
}

/// Characters of `embeds` as Discord adds them up for [`MAX_EMBEDS_TOTAL`].
pub fn embeds_len(embeds: &[Value]) -> usize {
    let s = |v: &Value| v.as_str().map_or(0, len);
    embeds
        .iter()
        .map(|e| {
            s(&e["title"])
                + s(&e["description"])
                + s(&e["footer"]["text"])
                + s(&e["author"]["name"])
                + e["fields"].as_array().map_or(0, |f| f.iter().map(|x| s(&x["name"]) + s(&x["value"])).sum())
        })
        .sum()
}

fn content(n: &Notice, title: &str) -> String {
    let mut s = String::new();
    if n.maybe_repeat {
        let _ = writeln!(s, "{REPEAT_MARK}");
    }
    if n.kind == NoticeKind::Verdict && !n.changed && n.episode.revision > 0 {
        let _ = write!(s, "{title} (revision {})", n.episode.revision);
    } else {
        s.push_str(title);
    }
    cut(&s, MAX_CONTENT)
}

fn reason(n: &Notice) -> &str {
    n.reason.as_deref().unwrap_or(if n.kind == NoticeKind::Verdict {
        "the notice carries no verdict"
    } else {
        "no reason given"
    })
}

fn status_color(v: &Verdict) -> u32 {
    match v.status {
        Status::CulpritFound => RED,
        Status::NoSingleCulprit => ORANGE,
        Status::NoBackpressure => GREEN,
        Status::Inconclusive => GREY,
    }
}

fn status_title(v: &Verdict, job: &str, changed: bool) -> String {
    let changed = if changed { "Changed: " } else { "" };
    let job = if job.trim().is_empty() { "unknown job".to_string() } else { escape(job) };
    match (v.status, &v.culprit) {
        (Status::CulpritFound, Some(c)) => {
            format!("🔴 {changed}Backpressure culprit {} in {job}", escape(&names::prose_name(&c.vertex_name)))
        }
        (Status::CulpritFound, None) => format!("🔴 {changed}Backpressure culprit in {job}"),
        (Status::NoSingleCulprit, _) => format!("🟠 {changed}No single backpressure culprit in {job}"),
        (Status::NoBackpressure, _) => format!("🟢 {changed}No backpressure in {job}"),
        (Status::Inconclusive, _) => format!("❔ {changed}Backpressure diagnosis inconclusive for {job}"),
    }
}

fn verdict_description(n: &Notice, v: &Verdict) -> String {
    let names = Names::of(v);
    let mut parts = vec![cut(&escape(&names.text(&v.summary)), Budget::SUMMARY)];
    if !v.hazards.is_empty() {
        let mut hazards: Vec<&Hazard> = v.hazards.iter().collect();
        hazards.sort_by_key(|h| std::cmp::Reverse(h.severity));
        let lines: Vec<String> = hazards.iter().map(|h| format!("> {}", hazard_line(&names, h))).collect();
        parts.push(list("", &lines, Budget::HAZARDS));
    }
    if !v.fix.is_empty() {
        let lines: Vec<String> =
            v.fix.iter().enumerate().map(|(i, f)| format!("{}. {}", i + 1, escape(&names.text(f)))).collect();
        parts.push(list("**Fix**", &lines, Budget::FIX));
    }
    if !v.not_the_fix.is_empty() {
        let lines: Vec<String> = v.not_the_fix.iter().map(|f| format!("• {}", escape(&names.text(f)))).collect();
        parts.push(list("**Would not help**", &lines, Budget::NOT_THE_FIX));
    }
    if !v.graph.vertices.is_empty() {
        parts.push(table(v, &names));
    }
    if let Some(l) = links_line(n) {
        parts.push(cut(&l, Budget::LINKS));
    }
    parts.join("\n\n")
}

fn verdict_fields(n: &Notice, v: &Verdict) -> Vec<Value> {
    let field =
        |name: &str, value: String| json!({ "name": name, "value": cut(&value, Budget::FIELD), "inline": true });
    let mut f = Vec::new();
    if let Some(c) = &v.culprit {
        f.push(field("Culprit", culprit_name(c)));
    }
    f.push(field("Finding", format!("`{}`", v.finding.as_str())));
    f.push(field("Confidence", v.confidence.as_str().to_string()));
    f.push(field("Job", job_line(n)));
    f.push(field("At", format!("{} · window {} s", escape(&v.at), v.window_seconds)));
    f
}

/// A title line and list lines, as many whole lines as fit `max`, then `… N more`.
fn list(title: &str, lines: &[String], max: usize) -> String {
    let mut s = title.to_string();
    for (i, l) in lines.iter().enumerate() {
        let sep = if s.is_empty() { "" } else { "\n" };
        let more = format!("\n… {} more", lines.len() - i);
        if len(&s) + sep.len() + len(l) + len(&more) > max {
            if i == 0 {
                let rest = if lines.len() > 1 { format!("\n… {} more", lines.len() - 1) } else { String::new() };
                let room = max.saturating_sub(len(&s) + sep.len() + len(&rest));
                let _ = write!(s, "{sep}{}{rest}", cut(l, room));
                return cut(&s, max);
            }
            s.push_str(&more);
            return s;
        }
        let _ = write!(s, "{sep}{l}");
    }
    s
}

fn pct(v: Option<f64>) -> String {
    v.map(|r| format!("{:.0}%", r * 100.0)).unwrap_or_else(|| "?".into())
}

/// Widest vertex name in the table, characters.
const TABLE_NAME: usize = 28;

/// The vertex table in a code block (aligned columns), as many rows as fit
/// [`Budget::TABLE`], then a line counting the rest (outside the block).
fn table(v: &Verdict, names: &Names) -> String {
    let order = if v.graph.from_plan { "job graph order" } else { "no job graph: order unknown" };
    let head = format!("**Vertices** ({order}, busy / backpressured max)\n```\n");
    let close = "```";
    let mut rows = String::new();
    let total = v.graph.vertices.len();
    for (i, x) in v.graph.vertices.iter().enumerate() {
        let name = plain(&names::clip(&names.prose(&x.name), TABLE_NAME));
        let pad = TABLE_NAME.saturating_sub(names::width(&name));
        let state = match x.state {
            VertexState::Culprit => "CULPRIT",
            VertexState::Backpressured => "backpressured",
            VertexState::Ok => "ok",
            VertexState::Unknown => "unknown",
        };
        let row = format!(
            "{name}{} ×{:<3} {:>5} {:>5}  {state}\n",
            " ".repeat(pad),
            x.parallelism,
            pct(x.busy_max),
            pct(x.backpressured_max)
        );
        let more = format!("\n… {} more vertices: the verdict page lists them all", total - i);
        if len(&head) + len(&rows) + len(&row) + len(close) + len(&more) > Budget::TABLE {
            return format!("{head}{rows}{close}{more}");
        }
        rows.push_str(&row);
    }
    format!("{head}{rows}{close}")
}

fn culprit_name(c: &Culprit) -> String {
    let mut s = escape(&names::prose_name(&c.vertex_name));
    if !c.subtasks.is_empty() && c.subtasks.len() < c.parallelism as usize {
        let listed: Vec<String> = c.subtasks.iter().take(16).map(|i| i.to_string()).collect();
        let more = if c.subtasks.len() > 16 { format!(", {ELLIPSIS}") } else { String::new() };
        let noun = if c.subtasks.len() == 1 { "subtask" } else { "subtasks" };
        let _ = write!(s, " ({noun} {}{more} of {})", listed.join(", "), c.parallelism);
    }
    s
}

fn hazard_line(names: &Names, h: &Hazard) -> String {
    let (icon, severity) = match h.severity {
        Severity::Critical => ("🚨", "critical"),
        Severity::Warning => ("⚠️", "warning"),
    };
    let kind = match h.kind {
        HazardKind::Retention => "retention",
        HazardKind::CheckpointsStalled => "checkpoints stalled",
        HazardKind::CheckpointTimeout => "checkpoint timeout",
    };
    let mut s = format!("{icon} **{severity}** · {kind}");
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
    let _ = write!(s, ": {}", escape(&names.text(&h.detail)));
    s
}

fn job_name(n: &Notice) -> String {
    if n.job.name.trim().is_empty() { "unknown job".to_string() } else { escape(&n.job.name) }
}

fn job_line(n: &Notice) -> String {
    let id: String = names::clean(&n.job.id).chars().filter(|c| c.is_ascii_alphanumeric()).collect();
    if id.is_empty() { job_name(n) } else { format!("{} `{id}`", job_name(n)) }
}

fn with_links(n: &Notice, line: String) -> String {
    match links_line(n) {
        Some(l) => format!("{}\n\n{}", cut(&line, Budget::SUMMARY + Budget::FIX), cut(&l, Budget::LINKS)),
        None => cut(&line, Budget::SUMMARY + Budget::FIX),
    }
}

/// A URL as a Markdown link target: `(`, `)`, spaces and `<`/`>` percent-encoded.
fn target(url: &str) -> String {
    url.replace(' ', "%20").replace('(', "%28").replace(')', "%29").replace('<', "%3C").replace('>', "%3E")
}

fn links_line(n: &Notice) -> Option<String> {
    let mut links = Vec::new();
    if let Some(url) = n.verdict_url.as_deref().and_then(crate::model::notice::AlertLinks::keep) {
        let label = n.verdict_id.map(|id| format!("Verdict #{id}")).unwrap_or_else(|| "The verdict".into());
        links.push(format!("[{label}]({})", target(&url)));
    }
    for (label, url) in n.links.labelled() {
        links.push(format!("[{label}]({})", target(url)));
    }
    (!links.is_empty()).then(|| format!("🔗 {}", links.join(" · ")))
}

/// The labels, plain (a footer renders no Markdown and no mentions).
fn footer(n: &Notice) -> Option<String> {
    if n.labels.is_empty() {
        return None;
    }
    let parts: Vec<String> = n.labels.iter().map(|(k, v)| format!("{}={}", plain(k), plain(v))).collect();
    Some(cut(&format!("Labels: {}", parts.join(" · ")), Budget::FOOTER))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::model::verdict::GraphVertex;

    fn notice(kind: NoticeKind, verdict: Option<Verdict>) -> Notice {
        let job = verdict.as_ref().map(|v| v.job.clone()).unwrap_or(crate::model::verdict::JobRef {
            name: "bp-lab-slow-sink".into(),
            id: "da23ad9af4e7326542c9a70eac958f42".into(),
        });
        Notice {
            links: Default::default(),
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
            idempotency_key: "discord:group:1".into(),
            at_ms: 1_795_000_000_000,
            episode: Default::default(),
            maybe_repeat: false,
            incident: None,
            incident_view: None,
            incident_parent: None,
        }
    }

    fn demo(name: &str) -> Verdict {
        let capture = crate::samples::captures::CAPTURES.iter().find(|c| c.name == name).expect("a bundled capture");
        crate::samples::captures::verdict(capture).expect("the capture diagnoses")
    }

    /// Every documented limit of a message.
    fn assert_within_limits(m: &DiscordMessage) {
        assert!(len(&m.content) <= MAX_CONTENT && !m.content.is_empty());
        assert!(m.embeds.len() <= MAX_EMBEDS);
        assert!(embeds_len(&m.embeds) <= MAX_EMBEDS_TOTAL, "embeds of {}", embeds_len(&m.embeds));
        for e in &m.embeds {
            assert!(len(e["title"].as_str().unwrap()) <= MAX_TITLE);
            assert!(len(e["description"].as_str().unwrap()) <= MAX_DESCRIPTION);
            assert!(e["footer"]["text"].as_str().map_or(0, len) <= MAX_FOOTER);
            let fields = e["fields"].as_array().cloned().unwrap_or_default();
            assert!(fields.len() <= MAX_FIELDS);
            for f in fields {
                assert!(len(f["name"].as_str().unwrap()) <= MAX_FIELD_NAME);
                assert!(len(f["value"].as_str().unwrap()) <= MAX_FIELD_VALUE);
            }
            // Every code block closes.
            assert!(e["description"].as_str().unwrap().matches("```").count().is_multiple_of(2));
        }
    }

    #[test]
    fn the_verdicts_picture_is_the_embeds_image_only_with_a_signed_https_link() {
        let image = |url: &str| {
            let mut n = notice(NoticeKind::Verdict, Some(demo("slow-sink")));
            n.verdict_url = Some(url.into());
            message(&n).embeds[0].get("image").cloned()
        };
        assert_eq!(
            image("https://c.example/verdicts/42?expires=9&sig=ab"),
            Some(json!({ "url": "https://c.example/verdicts/42.png?expires=9&sig=ab" }))
        );
        assert_eq!(image("https://culprit.example.com/api/v1/verdicts/42"), None);
        assert_eq!(image("http://c.example/verdicts/42?expires=9&sig=ab"), None);
    }

    #[test]
    fn a_first_sink_verdict_renders_as_snapshot() {
        let m = message(&notice(NoticeKind::Verdict, Some(demo("slow-sink"))));
        assert_within_limits(&m);
        insta::assert_json_snapshot!(m);
    }

    #[test]
    fn the_embed_leads_with_the_answer_then_the_fix_then_the_table_then_the_links() {
        let m = message(&notice(NoticeKind::Verdict, Some(demo("slow-sink"))));
        let d = m.embeds[0]["description"].as_str().unwrap();
        let at = |s: &str| d.find(s).unwrap_or_else(|| panic!("{s:?} in {d}"));
        assert!(m.embeds[0]["title"].as_str().unwrap().starts_with("🔴 Backpressure culprit"));
        assert!(at("is the culprit") < at("**Fix**"));
        assert!(at("**Fix**") < at("**Vertices**"));
        assert!(at("**Vertices**") < at("[Verdict #42](https://culprit.example.com/api/v1/verdicts/42)"));
        assert_eq!(m.embeds[0]["fields"][0]["name"], "Culprit");
    }

    #[test]
    fn mentions_links_and_markup_in_untrusted_text_are_inert() {
        let e = escape("- @everyone @here <@123> <@&456> <#789> ||s|| [x](https://evil.example) - a");
        assert_eq!(
            e,
            "\\- @\u{200B}everyone @\u{200B}here \\<@\u{200B}123\\> \\<@\u{200B}&456\\> \\<\\#789\\> \\|\\|s\\|\\| \\[x\\](https\\://evil.example) - a"
        );
        let mut n = notice(NoticeKind::Verdict, Some(demo("slow-sink")));
        n.labels.insert("team".into(), "@everyone <@&1>".into());
        n.job.name = "@here".into();
        let m = message(&n);
        let all = serde_json::to_string(&m).unwrap();
        assert!(!all.contains("@everyone") && !all.contains("@here") && !all.contains("<@&1>"), "{all}");
    }

    #[test]
    fn a_200_vertex_verdict_fits_every_limit_and_keeps_its_links() {
        let mut v = demo("slow-sink");
        let template = v.graph.vertices[0].clone();
        v.graph.vertices = (0..200)
            .map(|i| GraphVertex {
                id: format!("v{i}"),
                name: format!("Source: kafka_`topic`_number_{i} -> Calc(select=[a, b, c]) -> Sink: s{i}"),
                ..template.clone()
            })
            .collect();
        v.fix = (0..50).map(|i| format!("step {i} {}", "x".repeat(300))).collect();
        let m = message(&notice(NoticeKind::Verdict, Some(v)));
        assert_within_limits(&m);
        let d = m.embeds[0]["description"].as_str().unwrap();
        assert!(d.contains("more vertices: the verdict page lists them all"), "{d}");
        assert!(d.ends_with("[Verdict #42](https://culprit.example.com/api/v1/verdicts/42)"), "{d}");
        let r = resolved_edit(&notice(NoticeKind::Resolved, None), Some(&m.embeds[0]));
        assert_within_limits(&r);
    }

    #[test]
    fn a_resolution_turns_the_verdicts_embed_green_and_titles_it_resolved() {
        let m = message(&notice(NoticeKind::Verdict, Some(demo("slow-sink"))));
        let r = resolved_edit(&notice(NoticeKind::Resolved, None), Some(&m.embeds[0]));
        assert_eq!(r.embeds[0]["color"], GREEN);
        assert!(r.embeds[0]["title"].as_str().unwrap().starts_with("✅ Resolved · 🔴 Backpressure culprit"));
        assert!(r.embeds[0]["description"].as_str().unwrap().contains("is the culprit"), "the verdict stays");
        assert!(r.content.starts_with("✅ Resolved: bp-lab-slow-sink"), "{}", r.content);
    }

    #[test]
    fn a_possible_repeat_is_marked_and_a_revision_says_so() {
        let mut n = notice(NoticeKind::Verdict, Some(demo("slow-sink")));
        n.maybe_repeat = true;
        assert!(message(&n).content.starts_with(REPEAT_MARK));
        n.changed = true;
        assert!(changed_note(&n).content.starts_with(REPEAT_MARK));
        n.maybe_repeat = false;
        n.changed = false;
        n.episode.revision = 3;
        assert!(message(&n).content.ends_with("(revision 3)"), "{}", message(&n).content);
    }
}
