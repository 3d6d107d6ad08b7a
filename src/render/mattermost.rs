//! Mattermost posts: one Markdown `text`, for every [`NoticeKind`].
//!
//! Pure: no IO, no clock. [`crate::notify::mattermost`] sends what this module builds.
//!
//! # Why `text` alone (no attachments)
//!
//! Mattermost renders Markdown in a post's message, tables included, so the verdict reads
//! as Slack's does in one piece: the answer, the fix, the vertex table, the facts, the
//! links. The message is also what Mattermost shows in notifications and search, which
//! skip attachments; Slack-compatible attachments would split the answer (a fallback)
//! from the evidence (their fields cannot hold a table), for a coloured bar.
//!
//! # Layout of a verdict (the order of [`crate::render::slack`])
//!
//! 1. the marks: a possible repeat, and what the post updates (a later revision, a changed
//!    verdict), since an incoming webhook cannot edit the post it made;
//! 2. `#### ` status, culprit and job; the summary;
//! 3. hazards (a quote), the numbered fix, what would not help;
//! 4. the vertex table (the graph's order, or "order unknown"), cut to its budget with a
//!    line counting the vertices left out;
//! 5. culprit, finding, confidence, job, time on one line; the labels;
//! 6. the links (the verdict page, the alert source's silence, dashboard and panel).
//!
//! # Safety of untrusted text
//!
//! Job, vertex and operator names, verdict text and label values go through [`escape`]:
//! control characters are replaced, newlines become spaces, Markdown's characters (`\`
//! `` ` `` `*` `_` `~` `[` `]` `<` `>` `|` `#`) get a backslash, `@` is followed by a zero
//! width space so `@channel`, `@all`, `@here` and `@someone` mention nobody, and `://`
//! becomes `\://` so Mattermost links no URL this module did not write. Links are the
//! module's own (`[label](url)`, with `(`, `)` and spaces percent-encoded).
//!
//! # Limits
//!
//! The post is at most [`MAX_POST_CHARS`]; each part has a budget ([`Budget`]) and the
//! budgets add up to less, so a verdict of any size fits (long parts end with `…`).

use std::fmt::Write as _;

use crate::model::notice::{Notice, NoticeKind};
use crate::model::verdict::{Culprit, Hazard, HazardKind, Severity, Status, Verdict, VertexState};
use crate::render::names::{self, Names};

/// Longest post message, in characters (runes): Mattermost's default
/// `ServiceSettings.MaxPostSize` (16383). An incoming webhook's longer text is split into
/// several posts by the server; culprit cuts its text below it instead.
/// <https://docs.mattermost.com/configure/environment-configuration-settings.html>,
/// <https://developers.mattermost.com/integrate/webhooks/incoming/>
pub const MAX_POST_CHARS: usize = 16383;

/// What ends cut text.
pub const ELLIPSIS: char = '…';

/// Widest vertex name in a table cell, characters.
pub const MAX_CELL_NAME: usize = 60;

/// The mark of a post that may repeat one sent before (see [`Notice::maybe_repeat`]).
pub const REPEAT_MARK: &str = "_possible repeat: an earlier delivery could not be confirmed_";

/// The text budget of each part of a verdict post (characters). Their sum, 600 (marks and
/// title) + 2,000 + 1,500 + 2,500 + 1,000 + 5,500 + 800 + 800 + 1,000 = 15,700, plus 9
/// blank-line separators (18), is below [`MAX_POST_CHARS`].
pub struct Budget;

impl Budget {
    pub const HEAD: usize = 600;
    pub const SUMMARY: usize = 2000;
    pub const HAZARDS: usize = 1500;
    pub const FIX: usize = 2500;
    pub const NOT_THE_FIX: usize = 1000;
    pub const TABLE: usize = 5500;
    pub const FACTS: usize = 800;
    pub const LABELS: usize = 800;
    pub const LINKS: usize = 1000;
}

/// Untrusted text for a Mattermost message (see the module docs).
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
            '@' => out.push_str("@\u{200B}"),
            ':' if chars.get(i + 1) == Some(&'/') && chars.get(i + 2) == Some(&'/') => out.push_str("\\:"),
            c => out.push(c),
        }
    }
    out
}

/// `s` cut to at most `max` characters, ending with `…` when cut (never inside an escape:
/// a trailing lone backslash is dropped).
pub fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    if out.ends_with('\\') && !out.ends_with("\\\\") {
        out.pop();
    }
    out.push(ELLIPSIS);
    out
}

/// A URL as a Markdown link target: `(`, `)`, spaces and `<`/`>` percent-encoded.
fn target(url: &str) -> String {
    url.replace(' ', "%20").replace('(', "%28").replace(')', "%29").replace('<', "%3C").replace('>', "%3E")
}

/// An incident's summary or digest ([`crate::notify::digest`]) as one post.
pub fn incident_message(incident: &crate::model::incident::Incident, range: (usize, usize)) -> String {
    let quote = |t: &str| format!("**{}**", escape(&cut(t, crate::render::incident::DIGEST_NAME_CHARS)));
    let d = crate::render::incident::digest(incident, range, &quote, &|t| escape(t));
    let mut s = format!("#### {}\n_{}_\n**Jobs:** {}", d.title, escape(&d.when), d.jobs);
    if let Some(o) = &d.others {
        s.push_str(&format!("\n**Not part of it:** {o}"));
    }
    cut(&s, MAX_POST_CHARS)
}

/// The post for a notice. Never fails: long text is cut (see the limits).
///
/// * [`NoticeKind::Verdict`]: the layout in the module docs; a later revision or a changed
///   verdict says first which earlier post it updates (the notifier posts no revision: an
///   incoming webhook cannot edit the post it made).
/// * [`NoticeKind::Resolved`]: the job resolved, saying it updates the verdict posted
///   earlier; labels and links.
/// * [`NoticeKind::CouldNotDiagnose`] (and a verdict notice without a verdict): the job
///   and the reason.
/// * [`NoticeKind::Joined`], [`NoticeKind::GroupResolved`]: one line each (the notifier
///   does not post them: without threads they would only be noise).
pub fn message(n: &Notice) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut head = String::new();
    if n.maybe_repeat {
        let _ = writeln!(head, "{REPEAT_MARK}");
    }
    match (n.kind, &n.verdict) {
        (NoticeKind::Verdict, Some(v)) => {
            if n.changed {
                let _ = writeln!(
                    head,
                    "**Verdict changed**: this replaces the verdict posted earlier for {}.",
                    job_line(n)
                );
            } else if n.episode.revision > 0 {
                let _ = writeln!(
                    head,
                    "**Update** (revision {}) of the verdict posted earlier for {}: the same culprit, other confidence or numbers.",
                    n.episode.revision,
                    job_line(n)
                );
            }
            let _ = write!(head, "#### {}", title(v, &n.job.name, n.changed));
            parts.push(cut(&head, Budget::HEAD));
            verdict_parts(n, v, &mut parts);
        }
        (kind, _) => {
            let line = match kind {
                NoticeKind::Resolved => format!(
                    ":white_check_mark: **Resolved**: {}: the alert group stopped firing (this updates the verdict posted earlier).",
                    job_line(n)
                ),
                NoticeKind::Joined => format!(
                    ":link: **Also firing**: {}: another alert group carries the verdict posted earlier.",
                    job_line(n)
                ),
                NoticeKind::GroupResolved => format!(
                    ":white_check_mark: **Alert group resolved**: {}: one alert group stopped firing; the verdict stays open.",
                    job_line(n)
                ),
                _ => {
                    let reason = n.reason.as_deref().unwrap_or(if n.kind == NoticeKind::Verdict {
                        "the notice carries no verdict"
                    } else {
                        "no reason given"
                    });
                    format!(":warning: {}: could not diagnose: {}", job_line(n), escape(reason))
                }
            };
            head.push_str(&line);
            parts.push(cut(&head, Budget::HEAD + Budget::SUMMARY));
        }
    }
    if let Some(l) = labels_line(n) {
        parts.push(cut(&l, Budget::LABELS));
    }
    if let Some(l) = links_line(n) {
        parts.push(cut(&l, Budget::LINKS));
    }
    cut(&parts.join("\n\n"), MAX_POST_CHARS)
}

fn verdict_parts(n: &Notice, v: &Verdict, parts: &mut Vec<String>) {
    let names = Names::of(v);
    parts.push(cut(&escape(&names.text(&v.summary)), Budget::SUMMARY));
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
        let lines: Vec<String> = v.not_the_fix.iter().map(|f| format!("- {}", escape(&names.text(f)))).collect();
        parts.push(list("**Would not help**", &lines, Budget::NOT_THE_FIX));
    }
    if !v.graph.vertices.is_empty() {
        parts.push(table(v, &names));
    }
    let mut facts = Vec::new();
    if let Some(c) = &v.culprit {
        facts.push(format!("**Culprit** {}", culprit_name(c)));
    }
    facts.push(format!("**Finding** `{}`", v.finding.as_str()));
    facts.push(format!("**Confidence** {}", v.confidence.as_str()));
    facts.push(format!("**Job** {}", job_line(n)));
    facts.push(format!("**At** {} · window {} s", escape(&v.at), v.window_seconds));
    parts.push(cut(&facts.join(" · "), Budget::FACTS));
}

/// A title line and list lines, as many whole lines as fit `max`, then `… N more`.
fn list(title: &str, lines: &[String], max: usize) -> String {
    let mut s = title.to_string();
    for (i, l) in lines.iter().enumerate() {
        let more = format!("\n… {} more", lines.len() - i);
        let sep = if s.is_empty() { "" } else { "\n" };
        if s.chars().count() + sep.len() + l.chars().count() + more.chars().count() > max {
            // The first line is cut rather than left out.
            if i == 0 {
                let room = max.saturating_sub(s.chars().count() + 1 + more.chars().count());
                let _ = write!(s, "{sep}{}", cut(l, room));
                if lines.len() > 1 {
                    let _ = write!(s, "\n… {} more", lines.len() - 1);
                }
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
    v.map(|r| format!("{:.0}%", r * 100.0)).unwrap_or_else(|| "unknown".into())
}

/// The vertex table, as many rows as fit [`Budget::TABLE`], then a line counting the rest.
fn table(v: &Verdict, names: &Names) -> String {
    let order = if v.graph.from_plan { "in the job graph's order" } else { "no job graph: order unknown" };
    let mut s = format!(
        "**Vertices** ({order})\n\n| vertex | parallelism | busy max | backpressured max | state |\n|---|---:|---:|---:|---|"
    );
    let total = v.graph.vertices.len();
    for (i, x) in v.graph.vertices.iter().enumerate() {
        let state = match x.state {
            VertexState::Culprit => "**culprit**",
            VertexState::Backpressured => "backpressured",
            VertexState::Ok => "ok",
            VertexState::Unknown => "unknown",
        };
        let row = format!(
            "\n| {} | {} | {} | {} | {state} |",
            escape(&names::clip(&names.prose(&x.name), MAX_CELL_NAME)),
            x.parallelism,
            pct(x.busy_max),
            pct(x.backpressured_max)
        );
        let more = format!("\n\n… {} more vertices: the verdict page lists them all", total - i);
        if s.chars().count() + row.chars().count() + more.chars().count() > Budget::TABLE {
            s.push_str(&more);
            return s;
        }
        s.push_str(&row);
    }
    s
}

/// The status line: an emoji, `Changed: `, the status, the culprit and the job.
fn title(v: &Verdict, job: &str, changed: bool) -> String {
    let changed = if changed { "Changed: " } else { "" };
    let job = if job.trim().is_empty() { "unknown job".to_string() } else { escape(job) };
    match (v.status, &v.culprit) {
        (Status::CulpritFound, Some(c)) => {
            format!(
                ":red_circle: {changed}Backpressure culprit {} in {job}",
                escape(&names::prose_name(&c.vertex_name))
            )
        }
        (Status::CulpritFound, None) => format!(":red_circle: {changed}Backpressure culprit in {job}"),
        (Status::NoSingleCulprit, _) => {
            format!(":large_orange_circle: {changed}No single backpressure culprit in {job}")
        }
        (Status::NoBackpressure, _) => format!(":large_green_circle: {changed}No backpressure in {job}"),
        (Status::Inconclusive, _) => format!(":grey_question: {changed}Backpressure diagnosis inconclusive for {job}"),
    }
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
        Severity::Critical => (":rotating_light:", "critical"),
        Severity::Warning => (":warning:", "warning"),
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

/// The job's name and id (the id in code), or `unknown job`.
fn job_line(n: &Notice) -> String {
    let name = if n.job.name.trim().is_empty() { "unknown job".to_string() } else { escape(&n.job.name) };
    let id: String = names::clean(&n.job.id).chars().filter(|c| c.is_ascii_alphanumeric()).collect();
    if id.is_empty() { name } else { format!("{name} `{id}`") }
}

fn labels_line(n: &Notice) -> Option<String> {
    if n.labels.is_empty() {
        return None;
    }
    let parts: Vec<String> = n.labels.iter().map(|(k, v)| format!("{}={}", escape(k), escape(v))).collect();
    Some(format!("Labels: {}", parts.join(" · ")))
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
    (!links.is_empty()).then(|| format!(":link: {}", links.join(" · ")))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::model::verdict::GraphVertex;

    pub(crate) fn notice(kind: NoticeKind, verdict: Option<Verdict>) -> Notice {
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
            idempotency_key: "mattermost:group:1".into(),
            at_ms: 1_795_000_000_000,
            episode: Default::default(),
            maybe_repeat: false,
            incident: None,
            incident_view: None,
            incident_parent: None,
        }
    }

    pub(crate) fn demo(name: &str) -> Verdict {
        let capture = crate::samples::captures::CAPTURES.iter().find(|c| c.name == name).expect("a bundled capture");
        crate::samples::captures::verdict(capture).expect("the capture diagnoses")
    }

    #[test]
    fn a_first_sink_verdict_renders_as_snapshot() {
        let text = message(&notice(NoticeKind::Verdict, Some(demo("slow-sink"))));
        assert!(text.chars().count() <= MAX_POST_CHARS);
        insta::assert_snapshot!(text);
    }

    #[test]
    fn the_post_leads_with_the_answer_then_the_fix_then_the_table_then_the_links() {
        let text = message(&notice(NoticeKind::Verdict, Some(demo("slow-sink"))));
        let at = |s: &str| text.find(s).unwrap_or_else(|| panic!("{s:?} in {text}"));
        assert!(text.starts_with("#### :red_circle: Backpressure culprit"), "{text}");
        assert!(at("is the culprit") < at("**Fix**"));
        assert!(at("**Fix**") < at("| vertex |"));
        assert!(at("| vertex |") < at("**Culprit**"));
        assert!(at("**Culprit**") < at("[Verdict #42](https://culprit.example.com/api/v1/verdicts/42)"));
    }

    #[test]
    fn mentions_links_and_markup_in_untrusted_text_are_inert() {
        let e = escape("@channel @all <!here> [x](https://evil.example) *b* |t| ~town-square\n# h");
        assert_eq!(
            e,
            "@\u{200B}channel @\u{200B}all \\<!here\\> \\[x\\](https\\://evil.example) \\*b\\* \\|t\\| \\~town-square \\# h"
        );
        let mut n = notice(NoticeKind::Verdict, Some(demo("slow-sink")));
        n.labels.insert("team".into(), "@here ping".into());
        n.job.name = "@all".into();
        let text = message(&n);
        assert!(!text.contains("@here") && !text.contains("@all"), "{text}");
    }

    #[test]
    fn a_200_vertex_verdict_fits_and_counts_the_vertices_left_out() {
        let mut v = demo("slow-sink");
        let template = v.graph.vertices[0].clone();
        v.graph.vertices = (0..200)
            .map(|i| GraphVertex {
                id: format!("v{i}"),
                name: format!("Source: kafka_topic_number_{i} -> Calc(select=[a, b, c]) -> Sink: s{i}"),
                ..template.clone()
            })
            .collect();
        let text = message(&notice(NoticeKind::Verdict, Some(v)));
        assert!(text.chars().count() <= MAX_POST_CHARS, "{}", text.chars().count());
        assert!(text.contains("more vertices: the verdict page lists them all"), "{text}");
        // The links after the table survive the cut.
        assert!(text.ends_with("[Verdict #42](https://culprit.example.com/api/v1/verdicts/42)"), "{text}");
    }

    #[test]
    fn updates_and_resolutions_say_which_post_they_update_and_repeats_are_marked() {
        let mut n = notice(NoticeKind::Verdict, Some(demo("slow-sink")));
        n.episode.revision = 2;
        assert!(message(&n).starts_with("**Update** (revision 2) of the verdict posted earlier"), "{}", message(&n));
        n.changed = true;
        assert!(message(&n).starts_with("**Verdict changed**: this replaces"), "{}", message(&n));
        n.maybe_repeat = true;
        assert!(message(&n).starts_with(REPEAT_MARK));
        let r = message(&notice(NoticeKind::Resolved, None));
        assert!(r.contains("**Resolved**") && r.contains("updates the verdict posted earlier"), "{r}");
    }
}
