//! Slack messages: Block Kit blocks plus a `text` fallback, for every [`NoticeKind`].
//!
//! Pure: no IO, no clock. [`crate::notify::slack`] sends what this module builds.
//!
//! # Layout of a verdict
//!
//! The message leads with the answer, then the fix, then the evidence:
//!
//! 1. `header`: an emoji, status, culprit and job (`:red_circle: Backpressure culprit
//!    <vertex> in <job>`: the culprit first, as the header is cut at its end), with
//!    `Changed:` before the status when the verdict replaces an earlier one.
//! 2. `section`: the verdict's summary (culprit and why).
//! 3. `section`: critical hazards and warnings, when there are any.
//! 4. `section`: the numbered fix, Flink/connector configuration keys in `code`.
//! 5. `section`: what would not help.
//! 6. `context`: the evidence: each vertex's busy and backpressured time, in the graph's
//!    order (`→`) with a job plan, and without one in no order (`·`, "order unknown").
//! 7. `section` with `fields`: culprit (with its subtasks when not all of them carry the
//!    problem, and the other culprits when there are several), finding, confidence, job
//!    and time.
//! 8. `context`: the alert group's common labels.
//! 9. `actions`: a "Open verdict" button opening the verdict page, when there is a link
//!    (its URL is not counted as text; a URL Slack could not link to is shown as text),
//!    and, when the Slack app's interactivity is configured, "Re-diagnose now" and
//!    "Silence 2 h" ([`with_actions`]).
//!
//! The cause (the queueing theory), every number, the runbook's steps, what was missing and
//! the notes go to a reply in the message's thread: [`details`].
//!
//! Vertex names are Flink's short vertex names in their prose form
//! ([`crate::render::names`]), never the plan's descriptions (a Flink SQL job's run to
//! thousands of characters).
//!
//! # Safety of untrusted text
//!
//! Job, vertex and operator names and the alert labels come from outside. Every dynamic
//! string is cleaned of control characters
//! ([`names::clean`](crate::render::names::clean)) and goes through [`mrkdwn`] (or
//! [`escape`] for `plain_text`): `&`, `<`, `>` become `&amp;`, `&lt;`,
//! `&gt;`, so a label `<!channel>` shows as text and pings nobody, and
//! `<https://evil|click>` does not become a link; a word holding one of Slack's formatting
//! characters (`*`, `_`, `~`, `` ` ``) or an emoji code (`:fire:`) is put in a code span,
//! where Slack formats nothing (a backtick inside becomes `ˋ`, U+02CB, since code spans
//! have no escape); an empty id is left out rather than shown as an empty code span. Every
//! `mrkdwn` text object is also `verbatim`, so Slack does not turn bare channel names,
//! `@here` or URLs into mentions or links. The only links in a message are the ones this
//! module writes itself (the verdict URL).
//!
//! # Limits
//!
//! Vendor limits are the constants below; text beyond them is cut and ends with `…`
//! (never an error). Each block of a verdict has a budget ([`Budget`]) and the budgets add
//! up to less than [`MAX_BLOCKS_TEXT`]. Lengths are counted in UTF-16 code units, which is
//! never less than the number of characters Slack counts. When Slack still refuses a
//! message (`msg_too_long`, `msg_blocks_too_long`, `invalid_blocks`), the notifier sends
//! [`fallback`]: text alone, at most [`MAX_SAFE_TEXT`].

mod actions;
mod blocks;
mod escaping;
mod incident;
mod parts;
mod picture;

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;

use crate::model::notice::{Notice, NoticeKind};
use crate::render::names::Names;

pub use actions::{
    ACTIONS_TEXT, Actions, REDIAGNOSE_ACTION, SILENCE_ACTION, action_failed_reply, rediagnosed_reply, silenced_reply,
    who, with_actions,
};
use blocks::{context, list_text, section, verdict_link};
use escaping::clip;
pub use escaping::{code, escape, mrkdwn, prose, slack_len, with_code_keys};
pub use incident::{INCIDENT_EVENT_TYPE, incident_message, incident_metadata};
use parts::{
    bulleted, could_not_line, culprit_name, graph_line, group_resolved_line, hazard_line, hazards_sorted, job_line,
    joined_line, labels_line, numbered, resolved_line, short_blocks, status_title, verdict_blocks,
};
pub use picture::{MAX_IMAGE_URL, with_picture};

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

/// Longest top-level `text`. Slack documents 40,000 characters as where it truncates, but
/// advises at most 4,000 (<https://api.slack.com/methods/chat.postMessage#truncating>), and
/// refuses longer messages with `msg_too_long` in practice (about 4,000 characters,
/// seratch/ChatGPT-in-Slack#102; a 16,710-character text in field report 04). 3,000 keeps a
/// margin below the advice.
pub const MAX_FALLBACK_TEXT: usize = 3000;

/// Most text in all blocks of one message together. Not documented; Slack answered
/// `msg_blocks_too_long` at 11,341 measured characters (slackapi/bolt-js#2867) and about
/// 13,200 (slackapi/bolt-js#2509), where a maintainer cites about 12,000. The budgets of a
/// verdict's blocks add up to less than this ([`Budget`]).
pub const MAX_BLOCKS_TEXT: usize = 8000;

/// Longest `text` of [`fallback`], the message sent alone after Slack refused one: a
/// quarter of the length Slack refuses, so it surely fits.
pub const MAX_SAFE_TEXT: usize = 1000;

/// Longest `url` of a button element.
/// <https://api.slack.com/reference/block-kit/block-elements#button>
pub const MAX_BUTTON_URL: usize = 3000;

/// Subtask ids listed before `…`.
const MAX_SUBTASKS_LISTED: usize = 16;

/// Widest vertex name in the evidence line, characters.
const MAX_GRAPH_NAME: usize = 40;

/// What ends cut text.
pub const ELLIPSIS: char = '…';

/// The text budget of each block of a verdict message (UTF-16 units). Their sum,
/// 150 + 1,000 + 800 + 2,500 + 800 + 800 + 5 × 160 + 500 + 500 = 7,850, is below
/// [`MAX_BLOCKS_TEXT`], so a verdict message fits however long its parts are.
pub struct Budget;

impl Budget {
    pub const HEADER: usize = MAX_HEADER_TEXT;
    pub const SUMMARY: usize = 1000;
    pub const HAZARDS: usize = 800;
    pub const FIX: usize = 2500;
    pub const NOT_THE_FIX: usize = 800;
    pub const EVIDENCE: usize = 800;
    /// Each of the five fields (culprit, finding, confidence, job, time).
    pub const FIELD: usize = 160;
    pub const LABELS: usize = 500;
    pub const LINK: usize = 500;
}

/// The text budget of the blocks of [`details`]: 2,400 (cause) + 2,400 (steps) + 1,500
/// (numbers) + 1,200 (missing and notes) = 7,500 < [`MAX_BLOCKS_TEXT`].
struct DetailsBudget;

impl DetailsBudget {
    const CAUSE: usize = 2400;
    const STEPS: usize = 2400;
    const NUMBERS: usize = 1500;
    const NOTES: usize = 1200;
}

/// One Slack message: the `text` fallback (notifications, clients without blocks) and the
/// Block Kit `blocks`.
///
/// Guarantees: at most [`MAX_BLOCKS`] blocks; every text within its limit; all block text
/// together at most [`MAX_BLOCKS_TEXT`]; `text` at most [`MAX_FALLBACK_TEXT`] long; every
/// dynamic string cleaned and escaped.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SlackMessage {
    /// Fallback text (Slack `mrkdwn`, escaped): [`text_only`] for [`message`], the reply's
    /// own text for [`changed_reply`] and [`details`], empty-free.
    pub text: String,
    /// Block Kit blocks, as JSON objects.
    pub blocks: Vec<Value>,
}

/// The message for a notice.
///
/// * [`NoticeKind::Verdict`] (first or `changed`): the layout in the module docs. A
///   verdict notice without a verdict renders as "could not diagnose: no verdict".
/// * [`NoticeKind::Resolved`]: one short section (job, "the alert group stopped firing"),
///   the labels and the link.
/// * [`NoticeKind::CouldNotDiagnose`]: "`<job>`: could not diagnose: `<reason>`", the
///   labels and the link.
/// * [`NoticeKind::Joined`], [`NoticeKind::GroupResolved`]: one short section saying that
///   another alert group carries the verdict, or that one stopped firing while others still
///   fire, with that group's labels (replies in the verdict's thread).
///
/// `text` is [`text_only`]. Never fails: long text is cut with `…` (see the limits).
pub fn message(notice: &Notice) -> SlackMessage {
    let blocks = match (notice.kind, &notice.verdict) {
        (NoticeKind::Verdict, Some(v)) => verdict_blocks(notice, v),
        (NoticeKind::Resolved, _) => short_blocks(notice, resolved_line(notice)),
        (NoticeKind::Joined, _) => short_blocks(notice, joined_line(notice)),
        (NoticeKind::GroupResolved, _) => short_blocks(notice, group_resolved_line(notice)),
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
    let names = Names::of(v);
    let title = if notice.changed { "Verdict changed" } else { "Diagnosed" };
    let mut line = format!(
        ":arrows_counterclockwise: *{title}* (message above updated): {}",
        clip(&prose(&names.text(&v.summary)), Budget::SUMMARY)
    );
    let mut facts = Vec::new();
    if let Some(c) = &v.culprit {
        facts.push(format!("culprit {}", culprit_name(c)));
    }
    facts.push(format!("finding `{}`", v.finding.as_str()));
    facts.push(format!("confidence {}", v.confidence.as_str()));
    let _ = write!(line, "\n{}", facts.join(" · "));
    let mut blocks = vec![section(&line, Budget::SUMMARY + Budget::FIX)];
    if let Some(l) = verdict_link(notice) {
        blocks.push(context(vec![l.clone()], Budget::LINK));
        let _ = write!(line, "\n{l}");
    }
    SlackMessage { text: clip(&line, MAX_FALLBACK_TEXT), blocks }
}

/// The reply in a verdict's thread with what the message leaves out: the cause (the
/// queueing theory), every number, the runbook's steps, what was missing and the notes.
/// `None` for a notice without a verdict.
pub fn details(notice: &Notice) -> Option<SlackMessage> {
    let v = notice.verdict.as_ref().filter(|_| notice.kind == NoticeKind::Verdict)?;
    let names = Names::of(v);
    let mut blocks = Vec::new();
    if !v.cause.is_empty() {
        let cause = format!("*Why*\n{}", prose(&names.text(&v.cause)));
        blocks.push(section(&cause, DetailsBudget::CAUSE));
    }
    if !v.steps.is_empty() {
        let lines: Vec<String> = v
            .steps
            .iter()
            .map(|s| format!("`{}` {}: {}", s.step.as_str(), s.outcome.as_str(), prose(&names.text(&s.detail))))
            .collect();
        blocks.push(section(&list_text("*Runbook steps*", &lines, DetailsBudget::STEPS), DetailsBudget::STEPS));
    }
    if !v.evidence.is_empty() {
        let lines: Vec<String> = v
            .evidence
            .iter()
            .map(|e| {
                let threshold = e.threshold.map(|t| format!(" (threshold {t})")).unwrap_or_default();
                format!(
                    "• {}: {} = {} {}{threshold}",
                    prose(&names.text(&e.subject)),
                    mrkdwn(&e.metric),
                    e.value,
                    mrkdwn(&e.unit)
                )
            })
            .collect();
        blocks.push(section(&list_text("*Numbers*", &lines, DetailsBudget::NUMBERS), DetailsBudget::NUMBERS));
    }
    let mut notes: Vec<String> = v.missing.iter().map(|m| format!("• missing: {}", prose(&names.text(m)))).collect();
    notes.extend(v.notes.iter().map(|m| format!("• {}", prose(&names.text(m)))));
    if !notes.is_empty() {
        blocks.push(section(&list_text("*Notes*", &notes, DetailsBudget::NOTES), DetailsBudget::NOTES));
    }
    if blocks.is_empty() {
        return None;
    }
    let mut text = String::from("Details of the verdict: why, the numbers and the runbook's steps");
    for b in &blocks {
        let _ = write!(text, "\n\n{}", b["text"]["text"].as_str().unwrap_or_default());
    }
    Some(SlackMessage { text: clip(&text, MAX_FALLBACK_TEXT), blocks })
}

/// The details reply as text alone, at most [`MAX_SAFE_TEXT`] long: sent when Slack refused
/// the details' blocks or size (`msg_blocks_too_long`, `invalid_blocks`, …), as
/// [`fallback`] is for the message. `None` for a notice without a verdict.
pub fn details_fallback(notice: &Notice) -> Option<SlackMessage> {
    let d = details(notice)?;
    Some(SlackMessage { text: clip(&d.text, MAX_SAFE_TEXT), blocks: Vec::new() })
}

/// The whole notice as escaped `mrkdwn` text without blocks, at most
/// [`MAX_FALLBACK_TEXT`] long: the `text` of every message (what notifications show).
///
/// A verdict reads: summary; the link; fix; hazards; what would not help; culprit, finding,
/// confidence, job and time; the evidence line; labels.
pub fn text_only(notice: &Notice) -> String {
    let n = with_reason(notice);
    let mut s = String::new();
    match (n.kind, &n.verdict) {
        (NoticeKind::Verdict, Some(v)) => {
            let names = Names::of(v);
            if n.changed {
                s.push_str("Changed: ");
            }
            let _ = writeln!(s, "{}", clip(&prose(&names.text(&v.summary)), Budget::SUMMARY));
            if let Some(l) = verdict_link(&n) {
                let _ = writeln!(s, "{l}");
            }
            let mut list = |title: &str, lines: Vec<String>, max: usize| {
                if !lines.is_empty() {
                    let _ = writeln!(s, "\n{}", list_text(&format!("*{title}*"), &lines, max));
                }
            };
            list("Fix", numbered(&names, &v.fix), Budget::FIX);
            list("Hazards", hazards_sorted(v).into_iter().map(|h| hazard_line(&names, h)).collect(), Budget::HAZARDS);
            list("Would not help", bulleted(&names, &v.not_the_fix), Budget::NOT_THE_FIX);
            let mut facts = Vec::new();
            if let Some(c) = &v.culprit {
                facts.push(format!("Culprit: {}", culprit_name(c)));
            }
            facts.push(format!("finding `{}`", v.finding.as_str()));
            facts.push(format!("confidence {}", v.confidence.as_str()));
            facts.push(format!("job {}", job_line(&n)));
            facts.push(format!("at {} · window {} s", mrkdwn(&v.at), v.window_seconds));
            let _ = writeln!(s, "\n{}", clip(&facts.join(" · "), Budget::FIELD * 5));
            if !v.graph.vertices.is_empty() {
                let _ = writeln!(s, "{}", clip(&graph_line(v), Budget::EVIDENCE));
            }
        }
        (NoticeKind::Resolved | NoticeKind::Joined | NoticeKind::GroupResolved, _) => {
            let line = match n.kind {
                NoticeKind::Joined => joined_line(&n),
                NoticeKind::GroupResolved => group_resolved_line(&n),
                _ => resolved_line(&n),
            };
            let _ = writeln!(s, "{line}");
            if let Some(l) = verdict_link(&n) {
                let _ = writeln!(s, "{l}");
            }
        }
        _ => {
            let _ = writeln!(s, "{}", clip(&could_not_line(&n), Budget::SUMMARY + Budget::FIX));
            if let Some(l) = verdict_link(&n) {
                let _ = writeln!(s, "{l}");
            }
        }
    }
    if let Some(labels) = labels_line(&n.labels) {
        let _ = writeln!(s, "{}", clip(&labels, Budget::LABELS));
    }
    clip(s.trim_end(), MAX_FALLBACK_TEXT)
}

/// The message sent, as text alone, when Slack refused a message (`msg_too_long`,
/// `msg_blocks_too_long`, `invalid_blocks`, …): the status and job, the summary, the first
/// step of the fix and the link, at most [`MAX_SAFE_TEXT`] long. No blocks.
pub fn fallback(notice: &Notice) -> SlackMessage {
    let n = with_reason(notice);
    let link = verdict_link(&n).map(|l| clip(&l, 400));
    let room = MAX_SAFE_TEXT - link.as_ref().map_or(0, |l| slack_len(l) + 1);
    let body = match (n.kind, &n.verdict) {
        (NoticeKind::Verdict, Some(v)) => {
            let names = Names::of(v);
            let mut s = clip(&status_title(v, &n.job.name, n.changed, mrkdwn), MAX_HEADER_TEXT);
            let _ = write!(s, "\n{}", clip(&prose(&names.text(&v.summary)), 350));
            if let Some(first) = v.fix.first() {
                let _ = write!(s, "\n*Fix first:* {}", clip(&prose(&names.text(first)), 300));
            }
            s
        }
        (NoticeKind::Resolved, _) => resolved_line(&n),
        (NoticeKind::Joined, _) => joined_line(&n),
        (NoticeKind::GroupResolved, _) => group_resolved_line(&n),
        _ => could_not_line(&n),
    };
    let mut text = clip(&body, room);
    if let Some(l) = link {
        let _ = write!(text, "\n{l}");
    }
    SlackMessage { text: clip(&text, MAX_SAFE_TEXT), blocks: Vec::new() }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::blocks::{link, within_block_limit};
    use super::*;
    use crate::model::verdict::{Culprit, Graph, GraphVertex, Hazard, HazardKind, Severity, Verdict, VertexState};
    use crate::render::names;
    use proptest::prelude::*;

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
            idempotency_key: "slack:group:1".into(),
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

    /// The text of every `text` member of the blocks, as Slack adds it up.
    pub(crate) fn blocks_text_len(v: &Value) -> usize {
        match v {
            Value::Object(o) => o
                .iter()
                .map(|(k, x)| match x {
                    Value::String(s) if k == "text" => slack_len(s),
                    x => blocks_text_len(x),
                })
                .sum(),
            Value::Array(a) => a.iter().map(blocks_text_len).sum(),
            _ => 0,
        }
    }

    /// Checks every vendor limit of a message.
    fn assert_within_limits(m: &SlackMessage) {
        assert!(m.blocks.len() <= MAX_BLOCKS, "{} blocks", m.blocks.len());
        assert!(slack_len(&m.text) <= MAX_FALLBACK_TEXT, "text of {}", slack_len(&m.text));
        assert!(!m.text.trim().is_empty());
        let total = blocks_text_len(&Value::Array(m.blocks.clone()));
        assert!(total <= MAX_BLOCKS_TEXT, "blocks text of {total}");
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
                "actions" => {
                    let e = &b["elements"][0];
                    assert_eq!(e["type"], "button");
                    assert!(slack_len(e["url"].as_str().unwrap()) <= MAX_BUTTON_URL);
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
        assert!(!s.chars().any(|c| names::is_unsafe(c) && c != '\n'), "control character in {s:?}");
    }

    /// Outside code spans, no formatting character of Slack's is left, and every code span
    /// closes and holds something.
    fn assert_no_stray_formatting(s: &str, ours: &[&str]) {
        let mut s = s.to_string();
        for o in ours {
            s = s.replace(o, "");
        }
        assert!(s.matches('`').count().is_multiple_of(2), "an open code span in {s:?}");
        assert!(!s.contains("``"), "an empty code span in {s:?}");
        for (i, part) in s.split('`').enumerate() {
            if i % 2 == 0 {
                assert!(!part.contains(['*', '_', '~']), "formatting outside code in {part:?} of {s:?}");
            }
        }
    }

    /// The formatting this module writes itself.
    const OURS: &[&str] = &[
        "*Fix*",
        "*Would not help*",
        "*Hazards*",
        "*Culprit*",
        "*Finding*",
        "*Confidence*",
        "*Job*",
        "*At*",
        "*Resolved*",
        "*Verdict changed*",
        "*Diagnosed*",
        "*critical*",
        "*warning*",
        "*Fix first:*",
        "*Why*",
        "*Runbook steps*",
        "*Numbers*",
        "*Notes*",
        ":red_circle:",
        ":large_orange_circle:",
        ":large_green_circle:",
        ":grey_question:",
        ":rotating_light:",
        ":white_check_mark:",
        ":arrows_counterclockwise:",
        ":link:",
        ":warning:",
    ];

    #[test]
    fn a_first_sink_verdict_renders_as_snapshot() {
        let m = message(&notice(NoticeKind::Verdict, Some(demo("slow-sink"))));
        assert_within_limits(&m);
        insta::assert_json_snapshot!(m);
    }

    #[test]
    fn the_message_leads_with_the_answer_then_the_fix_then_the_evidence() {
        let m = message(&notice(NoticeKind::Verdict, Some(demo("slow-sink"))));
        let kinds: Vec<String> = m
            .blocks
            .iter()
            .map(|b| b["text"]["text"].as_str().or(b["elements"][0]["text"].as_str()).unwrap_or("fields").to_string())
            .collect();
        assert!(kinds[1].starts_with("slow-sink: Writer (sink) is the culprit"), "{kinds:?}");
        assert!(kinds[2].starts_with("*Fix*\n1. Fix the system behind slow-sink: Writer"), "{kinds:?}");
        assert!(kinds[3].starts_with("*Would not help*"), "{kinds:?}");
        assert!(kinds[4].starts_with("Graph (busy/backpressured)"), "{kinds:?}");
        assert!(
            !m.blocks.iter().any(|b| b.to_string().contains("credit-based flow control")),
            "the theory is in the thread"
        );
        assert!(m.text.starts_with("slow-sink: Writer (sink) is the culprit"), "{}", m.text);
        let details = details(&notice(NoticeKind::Verdict, Some(demo("slow-sink")))).unwrap();
        assert_within_limits(&details);
        let all = all_text(&details).join("\n");
        assert!(all.contains("*Why*\n") && all.contains("credit-based flow control"), "{all}");
        assert!(all.contains("*Runbook steps*\n`failover` clear:"), "{all}");
        assert!(all.contains("\n`locate` hit:"), "{all}");
    }

    #[test]
    fn a_changed_hot_key_verdict_names_its_subtask_and_renders_as_snapshot() {
        let mut n = notice(NoticeKind::Verdict, Some(demo("hot-key")));
        n.changed = true;
        let m = message(&n);
        assert_within_limits(&m);
        let header = m.blocks[0]["text"]["text"].as_str().unwrap();
        assert!(
            header.starts_with(":red_circle: Changed: Backpressure culprit fraud-score in bp-lab-hot-key"),
            "{header}"
        );
        let fields = m.blocks.iter().find(|b| b["fields"].is_array()).unwrap();
        assert!(fields["fields"][0]["text"].as_str().unwrap().contains("fraud-score (subtask 0 of 4)"));
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
        assert!(m.blocks.len() <= 3);
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
        assert!(details(&notice(NoticeKind::Verdict, None)).is_none());
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
                time_to_timeout_seconds: None,
                detail: "d<>".repeat(300),
            })
            .collect();
        v.steps = (0..6)
            .map(|_| v.steps[0].clone())
            .map(|mut s| {
                s.detail = "detail <&> ".repeat(500);
                s
            })
            .collect();
        v.notes = vec!["n".repeat(5000); 20];
        v.missing = vec!["m".repeat(5000); 20];
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
        for m in [message(&n), changed_reply(&n), details(&n).unwrap(), fallback(&n)] {
            if !m.blocks.is_empty() {
                assert_within_limits(&m);
            }
            assert!(slack_len(&m.text) <= MAX_FALLBACK_TEXT);
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
        let failed = message(&Notice { kind: NoticeKind::CouldNotDiagnose, ..n.clone() });
        assert_within_limits(&failed);
        assert!(failed.text.ends_with(ELLIPSIS));
        let safe = fallback(&n);
        assert!(safe.blocks.is_empty() && slack_len(&safe.text) <= MAX_SAFE_TEXT, "{}", safe.text);
        assert!(safe.text.ends_with("<https://culprit.example.com/api/v1/verdicts/42|Verdict #42>"), "{}", safe.text);
    }

    #[test]
    fn the_fallback_is_the_answer_the_first_step_and_the_link() {
        let n = notice(NoticeKind::Verdict, Some(demo("slow-sink")));
        let m = fallback(&n);
        assert!(m.blocks.is_empty());
        assert_eq!(
            m.text,
            ":red_circle: Backpressure culprit slow-sink: Writer in bp-lab-slow-sink\n\
             slow-sink: Writer (sink) is the culprit: the system it writes to is too slow (1816 records/s); the vertices before it are backpressured.\n\
             *Fix first:* Fix the system behind slow-sink: Writer: it takes 1.09 ms per record. Look at its write latency, locks, throttling, indexing and partitions (database, search cluster, HTTP service or broker).\n\
             :link: <https://culprit.example.com/api/v1/verdicts/42|Verdict #42>"
        );
    }

    #[test]
    fn more_than_50_blocks_are_cut_to_50_with_a_note() {
        let blocks: Vec<Value> = (0..80).map(|i| section(&format!("b{i}"), MAX_SECTION_TEXT)).collect();
        let kept = within_block_limit(blocks);
        assert_eq!(kept.len(), MAX_BLOCKS);
        assert_eq!(kept[49]["elements"][0]["text"], "… 31 more blocks left out");
    }

    #[test]
    fn clipping_never_splits_an_escape_a_code_span_or_a_link() {
        assert_eq!(clip("abc", 3), "abc");
        assert_eq!(clip("abcd", 3), "ab…");
        assert_eq!(clip("a &amp; b", 5), "a…");
        assert_eq!(clip("see <https://x.example/y|link>", 12), "see…");
        assert_eq!(clip("a `code span`", 9), "a…");
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
    fn formatting_characters_in_names_stay_text_and_an_empty_id_is_no_code_span() {
        assert_eq!(mrkdwn("*bold* _it_ ~s~ a`b"), "`*bold*` `_it_` `~s~` `aˋb`");
        assert_eq!(mrkdwn("(my_op), :fire: > x"), "(`my_op`), `:fire:` &gt; x");
        assert_eq!(mrkdwn("Sink: t_1[10]. (a_b[2])"), "Sink: `t_1[10]`. (`a_b[2]`)");
        assert_eq!(mrkdwn("> quote"), "`&gt;` quote");
        assert_eq!(mrkdwn("esc\u{1b}[31m bell\u{7}"), "esc\u{FFFD}[31m bell\u{FFFD}");
        let mut v = demo("slow-sink");
        for x in &mut v.graph.vertices {
            x.name = format!("*{}* _x_ `y", x.name);
        }
        let old = v.culprit.as_ref().unwrap().vertex_name.clone();
        let new = format!("*{old}* _x_ `y");
        v.culprit.as_mut().unwrap().vertex_name = new.clone();
        v.summary = v.summary.replace(&old, &new);
        v.fix = v.fix.iter().map(|f| f.replace(&old, &new)).collect();
        let mut n = notice(NoticeKind::Verdict, Some(v));
        n.job.id = String::new();
        n.job.name = "job_with_underscores".into();
        for m in [message(&n), fallback(&n), changed_reply(&n), details(&n).unwrap()] {
            for t in all_text(&m).iter().filter(|t| {
                !["mrkdwn", "plain_text", "header", "section", "context", "actions", "button", "view_verdict"]
                    .contains(&t.as_str())
            }) {
                if m.blocks.iter().any(|b| b["type"] == "header" && b["text"]["text"] == **t) {
                    continue; // plain_text: Slack formats nothing there.
                }
                assert_no_stray_formatting(t, OURS);
            }
        }
        let m = message(&n);
        let fields = m.blocks.iter().find(|b| b["fields"].is_array()).unwrap().to_string();
        assert!(fields.contains("*Job*\\n`job_with_underscores`\""), "{fields}");
        assert!(fields.contains("*Culprit*\\n`*slow-sink`: `Writer*` `_x_` `ˋy`\""), "{fields}");
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
        assert_eq!(link("https://c.example/x|<!channel>", "V"), "`https://c.example/x|&lt;!channel&gt;`");
        assert_eq!(link("javascript:alert(1)", "V"), "`javascript:alert(1)`");
    }

    #[test]
    fn config_keys_go_in_code_but_numbers_and_abbreviations_do_not() {
        assert_eq!(
            with_code_keys("raise taskmanager.memory.managed.fraction (default 0.4), e.g. 0.6."),
            "raise `taskmanager.memory.managed.fraction` (default 0.4), e.g. 0.6."
        );
        assert_eq!(
            prose("[diagnosis.operator_kinds] \"a<b\" = 1.09 ms; sink.buffer-flush.max-rows."),
            "[`diagnosis.operator_kinds`] \"a&lt;b\" = 1.09 ms; `sink.buffer-flush.max-rows`."
        );
        assert_eq!(mrkdwn("Source: txn-source -> parse"), "Source: txn-source -&gt; parse");
        assert_eq!(mrkdwn("see https://evil.example 10:36:27"), "see https://evil.example 10:36:27");
    }

    #[test]
    fn a_graph_without_a_plan_draws_no_arrows() {
        let mut v = demo("slow-sink");
        v.graph.from_plan = false;
        v.graph.edges.clear();
        let m = message(&notice(NoticeKind::Verdict, Some(v)));
        let line = m.blocks.iter().find(|b| b["type"] == "context").unwrap()["elements"][0]["text"].to_string();
        assert!(line.contains("order unknown") && !line.contains('→'), "{line}");
        assert!(!m.text.contains('→'), "{}", m.text);
    }

    #[test]
    fn an_exception_message_from_a_failing_job_is_escaped_in_every_message() {
        use crate::diagnose::testkit::{SnapshotBuilder, WINDOW_S, failed, t, verdict};
        use crate::model::failover::{Failover, JobExceptions};
        let hostile = "<!channel> *boom* <https://evil.example|click> & `more`";
        let e = |s| failed("validate (1/1)", "java.lang.RuntimeException", hostile, s);
        let snap = SnapshotBuilder::new()
            .vertex("src", "Source: in", 1)
            .vertex("val", "validate", 1)
            .edge("src", "val", "FORWARD")
            .all_subtasks("src", 0.0, 0.9, 0.1, None)
            .all_subtasks("val", 0.9, 0.0, 0.1, 100.0)
            .failover(Failover {
                restarts: Some(vec![(t(-100), 1), (t(-40), 1)]),
                counted_from_ms: t(-WINDOW_S),
                restarting_now: false,
                exceptions: Some(JobExceptions { entries: vec![e(-41), e(-101)], truncated: false }),
            })
            .build();
        let v = verdict(&snap);
        assert!(v.cause.contains(hostile), "{}", v.cause);
        let mut n = notice(NoticeKind::Verdict, Some(v));
        // Our own link is the one `<…>` a message may hold.
        n.verdict_url = None;
        let mut all = vec![message(&n)];
        all.extend(details(&n));
        for m in all {
            assert_within_limits(&m);
            for text in all_text(&m) {
                assert_escaped(&text);
                assert!(!text.contains("<!channel>"), "{text}");
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        #[test]
        fn any_label_job_or_vertex_name_comes_out_escaped_and_within_limits(
            label_key in "[<>&!a-z|:/ *_~`]{0,40}|\\PC{0,40}",
            label_value in "[<>&!a-z|:/ *_~`]{0,40}|\\PC{0,40}",
            job in "[<>&!a-z|:/ *_~`]{0,40}|\\PC{0,40}|.{0,40}",
            vertex in "[<>&!a-z|:/ *_~`\\[\\]0-9-]{0,40}|\\PC{0,40}|.{0,3000}",
            long in "[<>&a *_`]{2990,3010}",
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
                    let mut all = vec![message(&n), changed_reply(&n), fallback(&n)];
                    all.extend(details(&n));
                    for m in all {
                        if m.blocks.is_empty() {
                            prop_assert!(slack_len(&m.text) <= MAX_SAFE_TEXT);
                        } else {
                            assert_within_limits(&m);
                        }
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

    #[test]
    fn an_upper_case_scheme_is_linked_and_a_link_with_credentials_is_not_even_if_stored_before_the_filter() {
        let mut n = notice(NoticeKind::Verdict, Some(demo("slow-sink")));
        // As a queue row written before AlertLinks::keep refused credentials would hold them.
        n.links = crate::model::notice::AlertLinks {
            silence: Some("https://user:pass@g.example.com/alerting/silence/new".into()),
            dashboard: Some("HTTPS://g.example.com/d/flink".into()),
            panel: Some("https://g.example.com/d/\u{202E}x".into()),
        };
        let m = message(&n);
        assert!(m.text.contains("<HTTPS://g.example.com/d/flink|Dashboard>"), "{}", m.text);
        let all = serde_json::to_string(&m.blocks).unwrap() + &m.text;
        assert!(!all.contains("pass@") && !all.contains('\u{202E}') && !all.contains("Silence"), "{all}");
    }

    #[test]
    fn grafanas_silence_and_dashboard_links_are_buttons_beside_the_verdict_and_links_in_the_text() {
        let mut n = notice(NoticeKind::Verdict, Some(demo("slow-sink")));
        n.links = crate::model::notice::AlertLinks {
            silence: Some("https://g.example.com/alerting/silence/new?alertmanager=grafana&matcher=a%3Db".into()),
            dashboard: Some("https://g.example.com/d/flink?orgId=1".into()),
            // A link that could break out of `<url|label>`: no button, no link.
            panel: Some("https://g.example.com/d/x|<!channel>".into()),
        };
        let m = message(&n);
        let actions = m.blocks.iter().find(|b| b["type"] == "actions").expect("an actions block");
        let buttons: Vec<(&str, &str)> = actions["elements"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["text"]["text"].as_str().unwrap(), e["action_id"].as_str().unwrap()))
            .collect();
        assert_eq!(
            buttons,
            [("Open verdict", "view_verdict"), ("Silence", "alert_silence"), ("Dashboard", "alert_dashboard")]
        );
        assert_eq!(
            actions["elements"][1]["url"],
            "https://g.example.com/alerting/silence/new?alertmanager=grafana&matcher=a%3Db"
        );
        // In mrkdwn the `&` of the URL is escaped, and the panel link is left out.
        assert!(
            m.text.contains(
                "<https://g.example.com/alerting/silence/new?alertmanager=grafana&amp;matcher=a%3Db|Silence>"
            ),
            "{}",
            m.text
        );
        assert!(m.text.contains("<https://g.example.com/d/flink?orgId=1|Dashboard>"));
        assert!(!m.text.contains("channel"), "{}", m.text);
        // The resolution and the short fallback carry them too.
        let r = message(&Notice { kind: NoticeKind::Resolved, ..n.clone() });
        assert!(r.text.contains("|Dashboard>"), "{}", r.text);
        assert!(fallback(&n).text.contains("|Silence>"));
        // Without links, the verdict keeps its one button.
        n.links = Default::default();
        let m = message(&n);
        let actions = m.blocks.iter().find(|b| b["type"] == "actions").unwrap();
        assert_eq!(actions["elements"].as_array().unwrap().len(), 1);
    }
}
