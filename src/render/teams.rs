//! Microsoft Teams messages for a Workflows (Power Automate) webhook: a `message` with one
//! Adaptive Card attachment, for every [`NoticeKind`].
//!
//! Pure: no IO, no clock. [`crate::notify::teams`] sends what this module builds.
//!
//! # Layout
//!
//! A verdict's card leads with the answer, then the fix, then the evidence:
//!
//! 1. a possible-repeat mark ([`REPEAT_MARK`]) when [`Notice::maybe_repeat`] is set, and the
//!    line saying what the post updates ("Update of the verdict posted at 14:05 UTC",
//!    "Changed: …") — Workflows webhooks cannot edit a message, so every later notice is a
//!    new post that says what it updates;
//! 2. the title (status, culprit, job) and the summary (culprit and why);
//! 3. hazards, then the numbered fix, then the verdict's picture ([`crate::render::png`],
//!    an `Image` by its signed HTTPS link) when the notice has one;
//! 4. a `FactSet` of culprit, finding, confidence, job and time;
//! 5. the vertex table as a `FactSet` (one fact per vertex: busy, backpressured, state);
//! 6. details: why (the cause), what would not help, the alert group's labels;
//! 7. `Action.OpenUrl` actions: the verdict page (`notice.verdict_url`) and the alert
//!    source's links (silence, dashboard, panel) when present.
//!
//! [`NoticeKind::Resolved`] and [`NoticeKind::CouldNotDiagnose`] are short cards that say
//! what they update; [`NoticeKind::Joined`] and [`NoticeKind::GroupResolved`] are one-line
//! cards (which [`crate::notify::teams`] does not post: a Workflows webhook cannot put them
//! in a thread).
//!
//! # Size
//!
//! Teams refuses a message over about 28 KB ([`MAX_MESSAGE_BYTES`]). The card is cut to
//! [`MAX_CARD_BYTES`] of JSON, never refused for its size: vertex rows go first (a last
//! fact says how many were left out), then the details, last to first; every text is also
//! cut to its own budget beforehand, so that the answer, the fix and the link always fit.
//!
//! # Untrusted text
//!
//! Names, labels and verdict text come from outside. Each is cleaned of control characters
//! ([`names::clean`]) and escaped for the Markdown subset Teams renders in a `TextBlock`
//! and a `FactSet` ([`escape`]): a label `[click](https://evil)` stays text, `**` makes
//! nothing bold. The only links are the card's actions, which carry the verdict URL and the
//! alert links [`crate::model::notice::AlertLinks::keep`] keeps.

use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::model::notice::{Notice, NoticeKind};
use crate::model::verdict::{Status, Verdict};
use crate::render::hh_mm;
use crate::render::names::{self, Names};

/// Teams' message size limit for a post from a flow: "about 28 KB", all content included;
/// a larger message fails with "Request Entity too large".
/// <https://learn.microsoft.com/en-us/connectors/teams/#known-issues-and-limitations>
/// (also <https://learn.microsoft.com/en-us/microsoftteams/platform/webhooks-and-connectors/how-to/add-incoming-webhook>:
/// "The message size limit is 28 KB").
pub const MAX_MESSAGE_BYTES: usize = 28 * 1024;

/// What the card's JSON is cut to: 4 KB below [`MAX_MESSAGE_BYTES`], room for what the
/// flow wraps around the card when it posts it (the limit counts the whole message).
pub const MAX_CARD_BYTES: usize = MAX_MESSAGE_BYTES - 4 * 1024;

/// The attachment's content type of an Adaptive Card.
/// <https://learn.microsoft.com/en-us/microsoftteams/platform/task-modules-and-cards/cards/cards-reference#adaptive-card>
pub const CONTENT_TYPE: &str = "application/vnd.microsoft.card.adaptive";

/// The Adaptive Card version used: 1.4 is what Teams renders in posted cards.
/// <https://learn.microsoft.com/en-us/microsoftteams/platform/task-modules-and-cards/cards/cards-reference#adaptive-card>
pub const CARD_VERSION: &str = "1.4";

/// What a post that may repeat an earlier one says first.
pub const REPEAT_MARK: &str = "Possible repeat: an earlier delivery could not be confirmed";

/// Longest summary, characters.
const SUMMARY: usize = 1500;
/// Longest fix step, characters; at most [`FIX_STEPS`] of them.
const FIX_STEP: usize = 600;
const FIX_STEPS: usize = 8;
/// Longest hazard line; at most [`HAZARDS`] of them.
const HAZARD: usize = 300;
const HAZARDS: usize = 6;
/// Longest cause and would-not-help texts.
const DETAIL: usize = 2000;
/// Longest fact value (names, labels).
const FACT: usize = 200;
/// Longest job name in a title.
const TITLE_NAME: usize = 120;

/// `s` cleaned of control characters, cut to `max` characters (with `…`), with every
/// character the Teams Markdown subset reads (`\ * _ ~ ` # [ ] < >` and a leading `-` or
/// `+` list marker) escaped by a backslash. Without `[` and `]` no link can form, so
/// parentheses stay as they are.
pub fn escape(s: &str, max: usize) -> String {
    let cleaned = names::clean(s);
    let cut = crate::model::secret::cut(cleaned.trim(), max);
    let mut out = String::with_capacity(cut.len() + 8);
    for (i, c) in cut.chars().enumerate() {
        let list_marker = i == 0 && matches!(c, '-' | '+');
        if matches!(c, '\\' | '*' | '_' | '~' | '`' | '#' | '[' | ']' | '<' | '>') || list_marker {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The message for a notice: `{type: "message", attachments: [{contentType, content}]}`
/// with the card of the module docs, at most [`MAX_CARD_BYTES`] of JSON. `first_post_ms`
/// is when the episode's first post was made (the notifier's state), `None` for the first
/// post itself.
pub fn message(notice: &Notice, first_post_ms: Option<i64>) -> Value {
    let parts = parts(notice, first_post_ms);
    wrap(fit(parts))
}

/// An incident's summary or digest ([`crate::notify::digest`]) as one card: the
/// headline, when, the jobs it names and (in the summary) those that do not fit.
pub fn incident_message(incident: &crate::model::incident::Incident, range: (usize, usize)) -> Value {
    let quote = |t: &str| format!("**{}**", escape(t, crate::render::incident::DIGEST_NAME_CHARS));
    let d = crate::render::incident::digest(incident, range, &quote, &|t| escape(t, 200));
    let mut body = vec![
        heading(&d.title),
        json!({ "type": "TextBlock", "text": escape(&d.when, 400), "wrap": true, "isSubtle": true }),
    ];
    body.push(text(&format!("**Jobs:** {}", d.jobs)));
    if let Some(o) = &d.others {
        body.push(text(&format!("**Not part of it:** {o}")));
    }
    wrap(card(body, &[]))
}

/// A card's pieces, cut in order when too large.
struct Parts {
    /// Never cut: the mark, the update line, title, summary, hazards, fix, facts.
    head: Vec<Value>,
    /// One fact per vertex.
    vertices: Vec<Value>,
    /// Cut last to first after the vertex rows.
    details: Vec<Value>,
    actions: Vec<Value>,
}

fn text(s: &str) -> Value {
    json!({ "type": "TextBlock", "text": s, "wrap": true })
}

fn heading(s: &str) -> Value {
    json!({ "type": "TextBlock", "text": s, "wrap": true, "weight": "Bolder", "size": "Medium" })
}

fn fact(title: &str, value: &str) -> Value {
    json!({ "title": title, "value": value })
}

fn fact_set(facts: Vec<Value>) -> Value {
    json!({ "type": "FactSet", "facts": facts })
}

fn open_url(title: &str, url: &str) -> Value {
    json!({ "type": "Action.OpenUrl", "title": title, "url": url })
}

fn title(v: &Verdict, job: &str) -> String {
    let job = if job.trim().is_empty() { "unknown job".to_string() } else { escape(job, TITLE_NAME) };
    match (v.status, &v.culprit) {
        (Status::CulpritFound, Some(c)) => {
            format!("Backpressure culprit {} in {job}", escape(&names::prose_name(&c.vertex_name), TITLE_NAME))
        }
        (Status::CulpritFound, None) => format!("Backpressure culprit in {job}"),
        (Status::NoSingleCulprit, _) => format!("No single backpressure culprit in {job}"),
        (Status::NoBackpressure, _) => format!("No backpressure in {job}"),
        (Status::Inconclusive, _) => format!("Backpressure diagnosis inconclusive for {job}"),
    }
}

fn job_name(notice: &Notice) -> String {
    if notice.job.name.trim().is_empty() { "unknown job".into() } else { escape(&notice.job.name, TITLE_NAME) }
}

fn percent(x: Option<f64>) -> String {
    x.map(|x| format!("{:.0} %", x * 100.0)).unwrap_or_else(|| "?".into())
}

/// What the post updates, when it is not the episode's first.
fn update_line(notice: &Notice, first_post_ms: Option<i64>) -> Option<String> {
    let at = hh_mm(first_post_ms?);
    Some(match notice.kind {
        NoticeKind::Verdict if notice.changed => format!("**Changed:** replaces the verdict posted at {at}"),
        NoticeKind::Verdict => format!("Update of the verdict posted at {at}"),
        NoticeKind::Resolved => format!("**Resolved:** the verdict posted at {at}"),
        NoticeKind::CouldNotDiagnose => format!("Update of the post at {at}: could not diagnose"),
        NoticeKind::Joined | NoticeKind::GroupResolved => format!("About the verdict posted at {at}"),
        NoticeKind::Incident => format!("Update of the incident posted at {at}"),
    })
}

/// The hazards, worst first, and the fix's steps, each one text block.
fn hazards_and_fix(v: &crate::model::verdict::Verdict, names: &Names) -> Vec<Value> {
    let mut out = Vec::new();
    let mut hazards: Vec<_> = v.hazards.iter().collect();
    hazards.sort_by_key(|h| std::cmp::Reverse(h.severity));
    if !hazards.is_empty() {
        let lines: Vec<String> = hazards
            .iter()
            .take(HAZARDS)
            .map(|h| {
                let severity = match h.severity {
                    crate::model::verdict::Severity::Critical => "critical",
                    crate::model::verdict::Severity::Warning => "warning",
                };
                format!("- **{severity}** {}", escape(&names.text(&h.detail), HAZARD))
            })
            .collect();
        out.push(text(&format!("**Hazards**\n\n{}", lines.join("\n"))));
    }
    if !v.fix.is_empty() {
        let mut s = String::from("**Fix**\n\n");
        for (i, f) in v.fix.iter().take(FIX_STEPS).enumerate() {
            let _ = writeln!(s, "{}. {}", i + 1, escape(&names.text(f), FIX_STEP));
        }
        if v.fix.len() > FIX_STEPS {
            let _ = writeln!(s, "… and {} more steps on the verdict page", v.fix.len() - FIX_STEPS);
        }
        out.push(text(s.trim_end()));
    }
    out
}

fn parts(notice: &Notice, first_post_ms: Option<i64>) -> Parts {
    let mut head = Vec::new();
    if notice.maybe_repeat {
        head.push(json!({ "type": "TextBlock", "text": REPEAT_MARK, "wrap": true, "isSubtle": true }));
    }
    let update = update_line(notice, first_post_ms);
    let mut vertices = Vec::new();
    let mut details = Vec::new();
    let mut actions = Vec::new();
    if let Some(url) = notice.verdict_url.as_deref().and_then(crate::model::notice::AlertLinks::keep) {
        actions.push(open_url("View verdict", &url));
    }
    for (label, url) in notice.links.labelled() {
        actions.push(open_url(label, url));
    }
    match (notice.kind, &notice.verdict) {
        (NoticeKind::Verdict, Some(v)) => {
            if let Some(u) = update {
                head.push(text(&u));
            }
            let names = Names::of(v);
            head.push(heading(&title(v, &notice.job.name)));
            head.push(text(&escape(&names.text(&v.summary), SUMMARY)));
            head.extend(hazards_and_fix(v, &names));
            // The verdict's picture by its signed HTTPS link: Teams fetches it.
            // <https://adaptivecards.io/explorer/Image.html>
            if let Some(url) = notice.picture_https() {
                head.push(
                    json!({ "type": "Image", "url": url, "altText": crate::render::png::ALT_TEXT, "size": "Stretch" }),
                );
            }
            let mut facts = Vec::new();
            if let Some(c) = &v.culprit {
                let mut name = escape(&names::prose_name(&c.vertex_name), FACT);
                if !c.subtasks.is_empty() && c.subtasks.len() < c.parallelism as usize {
                    let listed: Vec<String> = c.subtasks.iter().take(16).map(u32::to_string).collect();
                    let more = if c.subtasks.len() > 16 { ", …" } else { "" };
                    let _ = write!(name, " (subtasks {}{more} of {})", listed.join(", "), c.parallelism);
                }
                facts.push(fact("Culprit", &name));
            }
            facts.push(fact("Finding", v.finding.as_str()));
            facts.push(fact("Confidence", v.confidence.as_str()));
            facts.push(fact("Job", &job_name(notice)));
            facts.push(fact("At", &format!("{} (window {} s)", escape(&v.at, 40), v.window_seconds)));
            head.push(fact_set(facts));
            for vx in &v.graph.vertices {
                let value = format!(
                    "busy {} · backpressured {} · {}",
                    percent(vx.busy_max),
                    percent(vx.backpressured_max),
                    vx.state.as_str()
                );
                vertices.push(fact(&escape(&names::prose_name(&vx.name), FACT), &value));
            }
            if !v.cause.is_empty() {
                details.push(text(&format!("**Why**\n\n{}", escape(&names.text(&v.cause), DETAIL))));
            }
            if !v.not_the_fix.is_empty() {
                let lines: Vec<String> = v
                    .not_the_fix
                    .iter()
                    .take(FIX_STEPS)
                    .map(|s| format!("- {}", escape(&names.text(s), 300)))
                    .collect();
                details.push(text(&crate::model::secret::cut(
                    &format!("**Would not help**\n\n{}", lines.join("\n")),
                    DETAIL,
                )));
            }
            if let Some(l) = labels(notice) {
                details.push(l);
            }
        }
        (kind, _) => {
            let line = match kind {
                NoticeKind::Resolved => format!("{}: the alert group stopped firing", job_name(notice)),
                NoticeKind::Joined => {
                    format!("{}: another alert group now carries this verdict", job_name(notice))
                }
                NoticeKind::GroupResolved => {
                    format!("{}: one alert group stopped firing; others still carry the verdict", job_name(notice))
                }
                _ => {
                    let reason = notice.reason.as_deref().unwrap_or("the notice carries no verdict");
                    format!("{}: could not diagnose: {}", job_name(notice), escape(reason, SUMMARY))
                }
            };
            let short = matches!(kind, NoticeKind::Joined | NoticeKind::GroupResolved);
            match update {
                // A one-line card: what it is about, then the line.
                Some(u) if short => head.push(text(&format!("{u}. {line}"))),
                Some(u) => {
                    head.push(text(&u));
                    head.push(text(&line));
                }
                None => head.push(text(&line)),
            }
            if !short && let Some(l) = labels(notice) {
                details.push(l);
            }
        }
    }
    Parts { head, vertices, details, actions }
}

fn labels(notice: &Notice) -> Option<Value> {
    if notice.labels.is_empty() {
        return None;
    }
    let facts: Vec<Value> =
        notice.labels.iter().take(20).map(|(k, v)| fact(&escape(k, 60), &escape(v, FACT))).collect();
    Some(fact_set(facts))
}

fn card(body: Vec<Value>, actions: &[Value]) -> Value {
    let mut card = json!({
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": CARD_VERSION,
        "msteams": { "width": "Full" },
        "body": body,
    });
    if !actions.is_empty() {
        card["actions"] = Value::Array(actions.to_vec());
    }
    card
}

fn wrap(card: Value) -> Value {
    json!({
        "type": "message",
        "attachments": [{ "contentType": CONTENT_TYPE, "contentUrl": null, "content": card }],
    })
}

fn size(card: &Value) -> usize {
    serde_json::to_vec(&wrap(card.clone())).map(|b| b.len()).unwrap_or(usize::MAX)
}

/// The card of `parts`, cut to [`MAX_CARD_BYTES`]: vertex rows from the last, then the
/// details from the last; then the head's blocks but the first three from the last.
fn fit(p: Parts) -> Value {
    let build = |rows: usize, details: usize, head: usize| {
        let mut body: Vec<Value> = p.head.iter().take(head).cloned().collect();
        if !p.vertices.is_empty() {
            body.push(json!({ "type": "TextBlock", "text": "**Vertices**", "wrap": true, "spacing": "Medium" }));
            let mut facts: Vec<Value> = p.vertices.iter().take(rows).cloned().collect();
            if rows < p.vertices.len() {
                facts.push(fact("…", &format!("{} more vertices on the verdict page", p.vertices.len() - rows)));
            }
            body.push(fact_set(facts));
        }
        body.extend(p.details.iter().take(details).cloned());
        card(body, &p.actions)
    };
    let whole = build(p.vertices.len(), p.details.len(), p.head.len());
    if size(&whole) <= MAX_CARD_BYTES {
        return whole;
    }
    // Fewest rows cut: the largest row count that fits, found by halving.
    let fits = |c: &Value| size(c) <= MAX_CARD_BYTES;
    if fits(&build(0, p.details.len(), p.head.len())) {
        let (mut lo, mut hi) = (0, p.vertices.len());
        while lo + 1 < hi {
            let mid = (lo + hi) / 2;
            if fits(&build(mid, p.details.len(), p.head.len())) { lo = mid } else { hi = mid }
        }
        return build(lo, p.details.len(), p.head.len());
    }
    for details in (0..p.details.len()).rev() {
        let c = build(0, details, p.head.len());
        if fits(&c) {
            return c;
        }
    }
    for head in (1..p.head.len()).rev() {
        let c = build(0, 0, head);
        if fits(&c) {
            return c;
        }
    }
    build(0, 0, 1)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::model::verdict::{Graph, GraphVertex, VertexState};

    fn demo(name: &str) -> Verdict {
        let capture = crate::samples::captures::CAPTURES.iter().find(|c| c.name == name).expect("a bundled capture");
        crate::samples::captures::verdict(capture).expect("the capture diagnoses")
    }

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
            idempotency_key: "teams:group:1".into(),
            at_ms: 1_795_000_000_000,
            episode: Default::default(),
            maybe_repeat: false,
            incident: None,
            incident_view: None,
            incident_parent: None,
        }
    }

    fn body_text(m: &Value) -> String {
        m["attachments"][0]["content"]["body"].to_string()
    }

    #[test]
    fn the_verdicts_picture_is_an_image_only_with_a_signed_https_link() {
        let images = |url: &str| {
            let mut n = notice(NoticeKind::Verdict, Some(demo("slow-sink")));
            n.verdict_url = Some(url.into());
            let m = message(&n, None);
            let body = m["attachments"][0]["content"]["body"].as_array().unwrap().clone();
            body.into_iter()
                .filter(|b| b["type"] == "Image")
                .map(|b| b["url"].as_str().unwrap().to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            images("https://c.example/verdicts/42?expires=9&sig=ab"),
            ["https://c.example/verdicts/42.png?expires=9&sig=ab"]
        );
        assert!(images("https://culprit.example.com/api/v1/verdicts/42").is_empty());
        assert!(images("http://c.example/verdicts/42?expires=9&sig=ab").is_empty());
    }

    #[test]
    fn a_first_slow_sink_verdict_renders_as_snapshot() {
        let m = message(&notice(NoticeKind::Verdict, Some(demo("slow-sink"))), None);
        assert_eq!(m["attachments"][0]["contentType"], CONTENT_TYPE);
        insta::assert_json_snapshot!(m);
    }

    #[test]
    fn the_card_leads_with_the_answer_and_the_fix_then_the_vertex_table_and_the_link() {
        let m = message(&notice(NoticeKind::Verdict, Some(demo("slow-sink"))), None);
        let body = m["attachments"][0]["content"]["body"].as_array().unwrap().clone();
        assert!(body[0]["text"].as_str().unwrap().starts_with("Backpressure culprit"));
        let fix = body.iter().position(|b| b["text"].as_str().is_some_and(|t| t.starts_with("**Fix**"))).unwrap();
        let table = body.iter().position(|b| b["text"] == "**Vertices**").unwrap();
        assert!(fix < table, "the fix comes before the evidence");
        assert_eq!(body[table + 1]["type"], "FactSet");
        let actions = m["attachments"][0]["content"]["actions"].as_array().unwrap();
        assert_eq!(actions[0]["type"], "Action.OpenUrl");
        assert_eq!(actions[0]["url"], "https://culprit.example.com/api/v1/verdicts/42");
    }

    #[test]
    fn a_later_post_says_what_it_updates_and_a_resolution_says_resolved() {
        // 1_795_000_000_000 ms is 2026-11-18T11:06:40Z (1_795_000_000 s = 20_775 days + 40_000 s; 40_000 s = 11 h 6 min 40 s): the first post was at 11:06 UTC.
        let first = Some(1_795_000_000_000);
        let mut revision = notice(NoticeKind::Verdict, Some(demo("slow-sink")));
        revision.episode.revision = 1;
        let m = message(&revision, first);
        assert_eq!(m["attachments"][0]["content"]["body"][0]["text"], "Update of the verdict posted at 11:06 UTC");
        let mut changed = revision.clone();
        changed.changed = true;
        assert!(body_text(&message(&changed, first)).contains("**Changed:** replaces the verdict posted at 11:06 UTC"));
        let resolved = message(&notice(NoticeKind::Resolved, None), first);
        insta::assert_json_snapshot!(resolved);
        assert!(body_text(&resolved).contains("**Resolved:** the verdict posted at 11:06 UTC"));
        let mut could_not = notice(NoticeKind::CouldNotDiagnose, None);
        could_not.reason = Some("Prometheus timed out".into());
        assert!(body_text(&message(&could_not, first)).contains("could not diagnose: Prometheus timed out"));
    }

    #[test]
    fn joined_and_group_resolved_notices_are_one_line_cards() {
        for kind in [NoticeKind::Joined, NoticeKind::GroupResolved] {
            let m = message(&notice(kind, None), Some(1_795_000_000_000));
            let body = m["attachments"][0]["content"]["body"].as_array().unwrap();
            assert_eq!(body.len(), 1, "{kind:?}: {body:?}");
            assert!(body[0]["text"].as_str().unwrap().starts_with("About the verdict posted at 11:06 UTC. "));
        }
    }

    #[test]
    fn a_possible_repeat_is_marked_first() {
        let mut n = notice(NoticeKind::Verdict, Some(demo("slow-sink")));
        n.maybe_repeat = true;
        assert_eq!(message(&n, None)["attachments"][0]["content"]["body"][0]["text"], REPEAT_MARK);
        assert!(
            !body_text(&message(&notice(NoticeKind::Verdict, Some(demo("slow-sink"))), None)).contains(REPEAT_MARK)
        );
    }

    fn huge() -> Notice {
        let mut v = demo("slow-sink");
        v.graph = Graph {
            vertices: (0..200)
                .map(|i| GraphVertex {
                    id: format!("{i:032x}"),
                    name: format!("vertex-{i} with a rather long operator name, number {i} of the job"),
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
        v.cause = "The cause & its numbers. ".repeat(400);
        v.fix = (0..40).map(|i| format!("{i}: set sink.buffer-flush.max-rows. {}", "x".repeat(700))).collect();
        notice(NoticeKind::Verdict, Some(v))
    }

    #[test]
    fn a_200_vertex_verdict_is_cut_to_the_limit_rows_first_keeping_the_answer_the_fix_and_the_link() {
        let m = message(&huge(), None);
        let bytes = serde_json::to_vec(&m).unwrap().len();
        assert!(bytes <= MAX_CARD_BYTES, "{bytes} bytes");
        let body = body_text(&m);
        assert!(body.contains("Backpressure culprit") && body.contains("**Fix**"));
        assert!(body.contains("more vertices on the verdict page"), "rows were cut and say so");
        assert_eq!(m["attachments"][0]["content"]["actions"][0]["title"], "View verdict");
    }

    #[test]
    fn markdown_and_links_in_untrusted_text_stay_text() {
        assert_eq!(escape("**x** [a](https://evil) <at>y</at>", 100), r"\*\*x\*\* \[a\](https://evil) \<at\>y\</at\>");
        assert_eq!(escape("- item\u{7}", 100), "\\- item\u{FFFD}");
        let mut n = notice(NoticeKind::Resolved, None);
        n.job.name = "[pwn](https://evil.example)".into();
        n.labels.insert("team".into(), "**loud**".into());
        let body = body_text(&message(&n, None));
        assert!(!body.contains("[pwn](") && !body.contains("\"**loud**\""), "{body}");
    }

    #[test]
    fn alert_links_become_actions_and_unsafe_ones_are_dropped() {
        let mut n = notice(NoticeKind::Verdict, Some(demo("slow-sink")));
        n.links.silence = Some("https://grafana.example.com/alerting/silence/new".into());
        n.links.dashboard = Some("javascript:alert(1)".into());
        let m = message(&n, None);
        let titles: Vec<&str> = m["attachments"][0]["content"]["actions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["title"].as_str().unwrap())
            .collect();
        assert_eq!(titles, ["View verdict", "Silence"]);
    }
}
