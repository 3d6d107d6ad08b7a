//! Google Chat messages for a space's incoming webhook: a short `text` (what notifications
//! show) and one `cardsV2` card, threaded by `thread.threadKey`, for every [`NoticeKind`].
//!
//! Pure: no IO, no clock. [`crate::notify::google_chat`] sends what this module builds.
//!
//! # Layout
//!
//! `text` is one line: the possible-repeat mark, what the post updates and the title
//! (shown above the card, and in notifications). The card leads with the answer, then the
//! fix, then the evidence: its header (title and job); the summary; hazards and the
//! numbered fix; culprit, finding, confidence, job and time; the vertex table (one
//! `decoratedText` per vertex); the details (why, what would not help, labels); and buttons
//! opening the verdict page and the alert source's links.
//!
//! Every notice of a job's episode carries the same `thread.threadKey` ([`thread_key`]),
//! so with `messageReplyOption=REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD` its updates thread
//! under its first message.
//!
//! # Limits
//!
//! A message is at most 32,000 bytes ([`MAX_MESSAGE_BYTES`]), a card at most 100 widgets
//! ([`MAX_WIDGETS`]); the message is cut to [`MAX_BODY_BYTES`] and [`MAX_WIDGETS`], vertex
//! rows first (a last row says how many were left out), then the details; never refused
//! for its size.
//!
//! # Untrusted text
//!
//! Card text is Google Chat's HTML subset: every dynamic string is cleaned of control
//! characters and HTML-escaped ([`crate::render::html::escape`]), so a label `<a href=…>`
//! or `<users/all>` stays text. In `text` (Chat's own markup), `<` and `>` become `‹` and
//! `›` (no mention, no link) and `*`, `~` and `` ` `` their look-alikes `∗`, `∼`, `ˋ`.

use std::fmt::Write as _;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::model::incident::Incident;
use crate::model::notice::{AlertLinks, Notice, NoticeKind};
use crate::model::verdict::{Severity, Status, Verdict};
use crate::render::hh_mm;
use crate::render::html;
use crate::render::incident::{MAX_JOBS_NAMED, MAX_OTHERS_NAMED, cause_phrase_quoted, job_line, named};
use crate::render::names::{self, Names};

/// Largest message, its text and cards included: 32,000 bytes.
/// <https://developers.google.com/workspace/chat/api/reference/rest/v1/spaces.messages/create>
pub const MAX_MESSAGE_BYTES: usize = 32_000;

/// What a message's JSON is cut to: 2,000 bytes below [`MAX_MESSAGE_BYTES`] (the thread and
/// the wire form of the request around it).
pub const MAX_BODY_BYTES: usize = MAX_MESSAGE_BYTES - 2_000;

/// Most widgets of one card; "widgets beyond this limit are ignored".
/// <https://developers.google.com/workspace/chat/api/reference/rest/v1/cards#Card>
pub const MAX_WIDGETS: usize = 100;

/// Longest `text`, characters. The reference found gives no limit of its own for `text`
/// beside the 32,000-byte message ([`MAX_MESSAGE_BYTES`]); 4,096 characters is the figure
/// commonly cited, not confirmed in Google's pages, and kept as a conservative cut (ours
/// is one line far below it).
/// <https://developers.google.com/workspace/chat/api/reference/rest/v1/spaces.messages#Message>
pub const MAX_TEXT_CHARS: usize = 4096;

/// Longest `threadKey`: 4,000 characters (ours is 40).
/// <https://developers.google.com/workspace/chat/api/reference/rest/v1/spaces.messages#Thread>
pub const MAX_THREAD_KEY: usize = 4000;

/// What a post that may repeat an earlier one says first.
pub const REPEAT_MARK: &str = "Possible repeat: an earlier delivery could not be confirmed";

const SUMMARY: usize = 1500;
const FIX_STEP: usize = 600;
const FIX_STEPS: usize = 8;
const HAZARD: usize = 300;
const HAZARDS: usize = 6;
const DETAIL: usize = 2000;
const FACT: usize = 200;
const TITLE_NAME: usize = 120;
/// The summary a revision's reply repeats: one or two lines.
const REVISION_SUMMARY: usize = 400;

/// The episode's thread key: `culprit-` and 32 hex digits of the SHA-256 of
/// [`Notice::thread_key`] (the episode's thread, else the alert group), stable across
/// restarts and free of the group key's quotes and braces.
/// A job's verdict that goes into an incident's summary thread
/// ([`crate::model::notice::NoticeIncident::summary_here`]) takes the incident's key.
pub fn thread_key(notice: &Notice) -> String {
    match &notice.incident {
        Some(tag) if tag.summary_here && notice.kind == NoticeKind::Verdict => key_of(&tag.thread),
        _ => key_of(notice.thread_key()),
    }
}

/// `culprit-` and 32 hex digits of the SHA-256 of `thread`.
fn key_of(thread: &str) -> String {
    let digest = Sha256::digest(thread.as_bytes());
    format!("culprit-{}", &hex::encode(digest)[..32])
}

/// An incident's summary: the headline, when it started, the jobs that share the cause
/// (each one's verdict is a reply in its thread) and those that do not fit, in the thread
/// of the incident's key. A webhook cannot edit it: it is posted once, when the incident
/// forms; the jobs that join later reply in its thread.
pub fn incident_message(incident: &Incident, thread: &str) -> Value {
    let phrase = |quote: &dyn Fn(&str) -> String, plain: &dyn Fn(&str) -> String| {
        cause_phrase_quoted(&incident.cause, quote, plain)
    };
    let n = incident.members.len();
    let when = format!(
        "Since {} · last verdict {} · each job's verdict is a reply in this thread",
        hh_mm(incident.first_ms),
        hh_mm(incident.last_ms)
    );
    let card_quote = |t: &str| format!("<b>{}</b>", esc(t, TITLE_NAME));
    let text_quote = |t: &str| plain(t, TITLE_NAME);
    let card_jobs = named(incident.members.iter().map(|m| job_line(m, false)), MAX_JOBS_NAMED, &|t| esc(t, TITLE_NAME));
    let mut widgets = vec![
        paragraph(&format!("{n} jobs held back by {}", phrase(&card_quote, &|t| html::escape(t)))),
        paragraph(&format!("<i>{}</i>", html::escape(&when))),
        paragraph(&format!("<b>Jobs:</b> {card_jobs}")),
    ];
    let text_plain = |t: &str| plain(t, TITLE_NAME);
    let mut text = format!("{n} jobs held back by {} · {when}", phrase(&text_quote, &text_plain));
    if !incident.others.is_empty() {
        let others = incident.others.iter().map(|m| job_line(m, true));
        let shown = named(others.clone(), MAX_OTHERS_NAMED, &|t| esc(t, TITLE_NAME));
        widgets.push(paragraph(&format!(
            "<b>Not part of it</b> ({} jobs with other culprits): {shown}",
            incident.others.len()
        )));
        text.push_str(&format!(" · Not part of it: {}", named(others, MAX_OTHERS_NAMED, &|t| plain(t, TITLE_NAME))));
    }
    let title = plain(&format!("{n} jobs held back by {}", phrase(&text_quote, &text_plain)), 200);
    json!({
        "text": crate::model::secret::cut(&text, MAX_TEXT_CHARS),
        "cardsV2": [{ "cardId": "culprit-incident", "card": {
            "header": { "title": title, "subtitle": format!("incident of {n} jobs") },
            "sections": [{ "widgets": widgets }] } }],
        "thread": { "threadKey": key_of(thread) },
    })
}

/// Card text: cleaned, cut to `max` characters, HTML-escaped.
fn esc(s: &str, max: usize) -> String {
    html::escape(&crate::model::secret::cut(names::clean(s).trim(), max))
}

/// `text` markup: cleaned, no `<`/`>` (mentions, links) and no formatting characters.
pub fn plain(s: &str, max: usize) -> String {
    let s = crate::model::secret::cut(names::clean(s).trim(), max);
    s.chars()
        .map(|c| match c {
            '<' => '‹',
            '>' => '›',
            '*' => '∗',
            '~' => '∼',
            '`' => 'ˋ',
            c => c,
        })
        .collect()
}

fn title(v: &Verdict, job: &str, esc: impl Fn(&str, usize) -> String) -> String {
    let job = if job.trim().is_empty() { "unknown job".to_string() } else { esc(job, TITLE_NAME) };
    match (v.status, &v.culprit) {
        (Status::CulpritFound, Some(c)) => {
            format!("Backpressure culprit {} in {job}", esc(&names::prose_name(&c.vertex_name), TITLE_NAME))
        }
        (Status::CulpritFound, None) => format!("Backpressure culprit in {job}"),
        (Status::NoSingleCulprit, _) => format!("No single backpressure culprit in {job}"),
        (Status::NoBackpressure, _) => format!("No backpressure in {job}"),
        (Status::Inconclusive, _) => format!("Backpressure diagnosis inconclusive for {job}"),
    }
}

fn update_line(notice: &Notice, first_post_ms: Option<i64>) -> Option<String> {
    let at = hh_mm(first_post_ms?);
    Some(match notice.kind {
        NoticeKind::Verdict if notice.changed => format!("Changed: replaces the verdict posted at {at}"),
        NoticeKind::Verdict => format!("Update of the verdict posted at {at}"),
        NoticeKind::Resolved => format!("Resolved: the verdict posted at {at}"),
        NoticeKind::CouldNotDiagnose => format!("Update of the post at {at}: could not diagnose"),
        NoticeKind::Joined | NoticeKind::GroupResolved => format!("About the verdict posted at {at}"),
        NoticeKind::Incident => format!("Update of the incident posted at {at}"),
    })
}

/// The one line of a notice without a verdict (escaped by `esc`).
fn short_line(notice: &Notice, esc: impl Fn(&str, usize) -> String) -> String {
    let job = if notice.job.name.trim().is_empty() { "unknown job".into() } else { esc(&notice.job.name, TITLE_NAME) };
    match notice.kind {
        NoticeKind::Resolved => format!("{job}: the alert group stopped firing"),
        NoticeKind::Joined => format!("{job}: another alert group now carries this verdict"),
        NoticeKind::GroupResolved => format!("{job}: one alert group stopped firing; others still carry the verdict"),
        _ => format!(
            "{job}: could not diagnose: {}",
            esc(notice.reason.as_deref().unwrap_or("the notice carries no verdict"), SUMMARY)
        ),
    }
}

/// The one line of a revision: the job, that its verdict was revised, and its confidence
/// now (escaped by `esc`).
fn revision_line(notice: &Notice, v: &Verdict, esc: impl Fn(&str, usize) -> String) -> String {
    let job = if notice.job.name.trim().is_empty() { "unknown job".into() } else { esc(&notice.job.name, TITLE_NAME) };
    format!(
        "{job}: the verdict was revised (revision {}): confidence {}, other numbers",
        notice.episode.revision,
        v.confidence.as_str()
    )
}

fn paragraph(s: &str) -> Value {
    json!({ "textParagraph": { "text": s } })
}

fn decorated(label: &str, value: &str) -> Value {
    json!({ "decoratedText": { "topLabel": label, "text": value, "wrapText": true } })
}

/// The widgets of a verdict's card: the head (repeat mark, update line, summary, hazards,
/// fix, culprit, job, time), one row per vertex, and the details (why, what would not
/// help).
fn verdict_widgets(
    notice: &Notice,
    v: &crate::model::verdict::Verdict,
    names: &Names,
    update: Option<&str>,
) -> (Vec<Value>, Vec<Value>, Vec<Value>) {
    let (mut head, mut vertices, mut details) = (Vec::new(), Vec::new(), Vec::new());
    if notice.maybe_repeat {
        head.push(paragraph(&format!("<i>{REPEAT_MARK}</i>")));
    }
    if let Some(u) = update {
        head.push(paragraph(&format!("<b>{}</b>", html::escape(u))));
    }
    head.push(paragraph(&esc(&names.text(&v.summary), SUMMARY)));
    let mut hazards: Vec<_> = v.hazards.iter().collect();
    hazards.sort_by_key(|h| std::cmp::Reverse(h.severity));
    if !hazards.is_empty() {
        let lines: Vec<String> = hazards
            .iter()
            .take(HAZARDS)
            .map(|h| {
                let s = if h.severity == Severity::Critical { "critical" } else { "warning" };
                format!("• <b>{s}</b> {}", esc(&names.text(&h.detail), HAZARD))
            })
            .collect();
        head.push(paragraph(&format!("<b>Hazards</b><br>{}", lines.join("<br>"))));
    }
    if !v.fix.is_empty() {
        let mut s = String::from("<b>Fix</b>");
        for (i, f) in v.fix.iter().take(FIX_STEPS).enumerate() {
            let _ = write!(s, "<br>{}. {}", i + 1, esc(&names.text(f), FIX_STEP));
        }
        if v.fix.len() > FIX_STEPS {
            let _ = write!(s, "<br>… and {} more steps on the verdict page", v.fix.len() - FIX_STEPS);
        }
        head.push(paragraph(&s));
    }
    if let Some(c) = &v.culprit {
        let mut name = esc(&names::prose_name(&c.vertex_name), FACT);
        if !c.subtasks.is_empty() && c.subtasks.len() < c.parallelism as usize {
            let listed: Vec<String> = c.subtasks.iter().take(16).map(u32::to_string).collect();
            let more = if c.subtasks.len() > 16 { ", …" } else { "" };
            let _ = write!(name, " (subtasks {}{more} of {})", listed.join(", "), c.parallelism);
        }
        head.push(decorated("Culprit", &name));
    }
    head.push(decorated("Job", &esc(&notice.job.name, FACT)));
    head.push(decorated("At", &format!("{} (window {} s)", esc(&v.at, 40), v.window_seconds)));
    for vx in &v.graph.vertices {
        let pct = |x: Option<f64>| x.map(|x| format!("{:.0} %", x * 100.0)).unwrap_or_else(|| "?".into());
        vertices.push(decorated(
            &esc(&names::prose_name(&vx.name), FACT),
            &format!("busy {} · backpressured {} · {}", pct(vx.busy_max), pct(vx.backpressured_max), vx.state.as_str()),
        ));
    }
    if !v.cause.is_empty() {
        details.push(paragraph(&format!("<b>Why</b><br>{}", esc(&names.text(&v.cause), DETAIL))));
    }
    if !v.not_the_fix.is_empty() {
        let lines: Vec<String> =
            v.not_the_fix.iter().take(FIX_STEPS).map(|s| format!("• {}", esc(&names.text(s), 300))).collect();
        details.push(paragraph(&format!("<b>Would not help</b><br>{}", lines.join("<br>"))));
    }
    (head, vertices, details)
}

/// The message for a notice: `{text, cardsV2, thread: {threadKey}}`, at most
/// [`MAX_BODY_BYTES`] of JSON and [`MAX_WIDGETS`] widgets. `first_post_ms` is when the
/// episode's first post was made (the notifier's state), `None` for the first post.
pub fn message(notice: &Notice, first_post_ms: Option<i64>) -> Value {
    let update = update_line(notice, first_post_ms);
    let mut line = Vec::new();
    if notice.maybe_repeat {
        line.push(REPEAT_MARK.to_string());
    }
    line.extend(update.clone());
    let mut head: Vec<Value> = Vec::new();
    let mut vertices: Vec<Value> = Vec::new();
    let mut details: Vec<Value> = Vec::new();
    let header;
    match (notice.kind, &notice.verdict) {
        // A webhook cannot edit the verdict's message: a revision is a short reply in its
        // thread, saying what moved (the verdict page behind the link shows it all).
        (NoticeKind::Verdict, Some(v)) if notice.is_revision() => {
            line.push(revision_line(notice, v, plain));
            header = json!({ "title": plain(&revision_line(notice, v, crate::model::secret::cut), 200) });
            if notice.maybe_repeat {
                head.push(paragraph(&format!("<i>{REPEAT_MARK}</i>")));
            }
            if let Some(u) = &update {
                head.push(paragraph(&format!("<b>{}</b>", html::escape(u))));
            }
            head.push(paragraph(&esc(&Names::of(v).text(&v.summary), REVISION_SUMMARY)));
        }
        (NoticeKind::Verdict, Some(v)) => {
            let names = Names::of(v);
            line.push(title(v, &notice.job.name, plain));
            header = json!({ "title": plain(&title(v, &notice.job.name, crate::model::secret::cut), 200),
                             "subtitle": format!("finding {} · confidence {}", v.finding.as_str(), v.confidence.as_str()) });
            (head, vertices, details) = verdict_widgets(notice, v, &names, update.as_deref());
        }
        _ => {
            line.push(short_line(notice, plain));
            header = json!({ "title": plain(&short_line(notice, crate::model::secret::cut), 200) });
            if notice.maybe_repeat {
                head.push(paragraph(&format!("<i>{REPEAT_MARK}</i>")));
            }
            if let Some(u) = &update {
                head.push(paragraph(&format!("<b>{}</b>", html::escape(u))));
            }
            if !matches!(notice.kind, NoticeKind::Joined | NoticeKind::GroupResolved) {
                head.push(paragraph(&short_line(notice, esc)));
            }
        }
    }
    let short = matches!(notice.kind, NoticeKind::Joined | NoticeKind::GroupResolved) || notice.is_revision();
    if !short && !notice.labels.is_empty() {
        let labels: Vec<String> =
            notice.labels.iter().take(20).map(|(k, v)| format!("{}=<b>{}</b>", esc(k, 60), esc(v, FACT))).collect();
        details.push(paragraph(&labels.join(" · ")));
    }
    let mut buttons = Vec::new();
    if let Some(url) = notice.verdict_url.as_deref().and_then(AlertLinks::keep) {
        buttons.push(json!({ "text": "View verdict", "onClick": { "openLink": { "url": url } } }));
    }
    for (label, url) in notice.links.labelled() {
        buttons.push(json!({ "text": label, "onClick": { "openLink": { "url": url } } }));
    }
    let text = crate::model::secret::cut(&line.join(" · "), MAX_TEXT_CHARS);
    let thread = json!({ "threadKey": thread_key(notice) });
    let build = |rows: usize, ndetails: usize| {
        let mut sections = vec![json!({ "widgets": head })];
        if !vertices.is_empty() {
            let mut widgets: Vec<Value> = vertices.iter().take(rows).cloned().collect();
            if rows < vertices.len() {
                widgets.push(paragraph(&format!("… {} more vertices on the verdict page", vertices.len() - rows)));
            }
            sections.push(json!({ "header": "Vertices", "collapsible": true, "uncollapsibleWidgetsCount": 10, "widgets": widgets }));
        }
        let mut tail: Vec<Value> = details.iter().take(ndetails).cloned().collect();
        if !buttons.is_empty() {
            tail.push(json!({ "buttonList": { "buttons": buttons } }));
        }
        if !tail.is_empty() {
            sections.push(json!({ "widgets": tail }));
        }
        json!({
            "text": text,
            "cardsV2": [{ "cardId": "culprit-notice", "card": { "header": header, "sections": sections } }],
            "thread": thread,
        })
    };
    // Widgets besides the vertex rows: the head, the "more" row, the details, the buttons.
    let fixed = head.len() + 1 + details.len() + 1;
    let fits = |m: &Value| serde_json::to_vec(m).map(|b| b.len()).unwrap_or(usize::MAX) <= MAX_BODY_BYTES;
    let max_rows = vertices.len().min(MAX_WIDGETS.saturating_sub(fixed));
    if fits(&build(max_rows, details.len())) {
        return build(max_rows, details.len());
    }
    if fits(&build(0, details.len())) {
        let (mut lo, mut hi) = (0, max_rows);
        while lo + 1 < hi {
            let mid = (lo + hi) / 2;
            if fits(&build(mid, details.len())) { lo = mid } else { hi = mid }
        }
        return build(lo, details.len());
    }
    for n in (0..details.len()).rev() {
        if fits(&build(0, n)) {
            return build(0, n);
        }
    }
    build(0, 0)
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
            idempotency_key: "google_chat:group:1".into(),
            at_ms: 1_795_000_000_000,
            episode: Default::default(),
            maybe_repeat: false,
            incident: None,
            incident_view: None,
            incident_parent: None,
        }
    }

    fn widgets(m: &Value) -> usize {
        m["cardsV2"][0]["card"]["sections"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["widgets"].as_array().unwrap().len())
            .sum()
    }

    #[test]
    fn a_first_slow_sink_verdict_renders_as_snapshot() {
        let m = message(&notice(NoticeKind::Verdict, Some(demo("slow-sink"))), None);
        insta::assert_json_snapshot!(m);
    }

    #[test]
    fn every_notice_of_an_episode_has_one_thread_key_and_another_episode_another() {
        let mut a = notice(NoticeKind::Verdict, Some(demo("slow-sink")));
        a.episode.thread = "job:bp-lab-slow-sink:1".into();
        let mut b = notice(NoticeKind::Resolved, None);
        b.episode.thread = a.episode.thread.clone();
        b.group_key = "another group".into();
        assert_eq!(message(&a, None)["thread"]["threadKey"], message(&b, Some(1))["thread"]["threadKey"]);
        let key = thread_key(&a);
        assert_eq!(key.len(), 40);
        assert!(key.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-'));
        b.episode.thread = "job:bp-lab-slow-sink:2".into();
        assert_ne!(thread_key(&a), thread_key(&b));
        // Without an episode (a notice stored before episodes): its group.
        let c = notice(NoticeKind::Resolved, None);
        let d = Notice { kind: NoticeKind::CouldNotDiagnose, ..c.clone() };
        assert_eq!(thread_key(&c), thread_key(&d));
    }

    #[test]
    fn a_later_post_says_what_it_updates_in_its_text_and_card() {
        // 1_795_000_000_000 ms is 2026-11-18T11:06:40Z (1_795_000_000 s = 20_775 days and 40_000 s, 11 h 6 min 40 s).
        let resolved = message(&notice(NoticeKind::Resolved, None), Some(1_795_000_000_000));
        insta::assert_json_snapshot!(resolved);
        assert!(resolved["text"].as_str().unwrap().starts_with("Resolved: the verdict posted at 11:06 UTC"));
        let mut rev = notice(NoticeKind::Verdict, Some(demo("slow-sink")));
        rev.maybe_repeat = true;
        let m = message(&rev, Some(1_795_000_000_000));
        assert!(
            m["text"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{REPEAT_MARK} · Update of the verdict posted at 11:06 UTC"))
        );
    }

    #[test]
    fn a_revision_is_a_short_reply_in_the_verdicts_thread_not_the_verdict_again() {
        let first = notice(NoticeKind::Verdict, Some(demo("slow-sink")));
        let mut rev = first.clone();
        rev.episode.revision = 2;
        let m = message(&rev, Some(1_795_000_000_000));
        assert_eq!(m["thread"], message(&first, None)["thread"], "in the verdict's thread");
        let text = m["text"].as_str().unwrap();
        let confidence = first.verdict.as_ref().unwrap().confidence.as_str();
        assert_eq!(
            text,
            format!(
                "Update of the verdict posted at 11:06 UTC · bp-lab-slow-sink: the verdict was revised (revision 2): confidence {confidence}, other numbers"
            )
        );
        // One section: the update line and the summary, then the link; no vertex rows, no
        // fix, no labels (the full verdict is on its page).
        let sections = m["cardsV2"][0]["card"]["sections"].as_array().unwrap();
        assert_eq!(sections.len(), 2, "{sections:#?}");
        assert_eq!(sections[0]["widgets"].as_array().unwrap().len(), 2);
        assert!(sections[1]["widgets"][0]["buttonList"].is_object());
        let all = m.to_string();
        assert!(!all.contains("Vertices") && !all.contains("<b>Fix</b>"), "{all}");
        assert!(serde_json::to_vec(&m).unwrap().len() < serde_json::to_vec(&message(&first, None)).unwrap().len() / 2);
    }

    #[test]
    fn a_200_vertex_verdict_stays_within_the_size_and_widget_limits() {
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
                    state: VertexState::Backpressured,
                })
                .collect(),
            edges: Vec::new(),
            from_plan: true,
        };
        v.cause = "The cause <&> ".repeat(600);
        let m = message(&notice(NoticeKind::Verdict, Some(v)), None);
        let bytes = serde_json::to_vec(&m).unwrap().len();
        assert!(bytes <= MAX_BODY_BYTES, "{bytes}");
        assert!(widgets(&m) <= MAX_WIDGETS, "{} widgets", widgets(&m));
        assert!(m.to_string().contains("more vertices on the verdict page"));
        assert!(m.to_string().contains("View verdict"));
    }

    #[test]
    fn html_and_mentions_in_untrusted_text_stay_text() {
        let mut n = notice(NoticeKind::Resolved, None);
        n.job.name = "<users/all> <a href=\"https://evil\">x</a> *bold*".into();
        let m = message(&n, None);
        let text = m["text"].as_str().unwrap();
        assert!(!text.contains('<') && !text.contains('*'), "{text}");
        let card = m["cardsV2"].to_string();
        assert!(!card.contains("<users/all>") && !card.contains("<a href"), "{card}");
    }
}
