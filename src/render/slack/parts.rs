//! The parts of a verdict message: its title, culprit, hazards, evidence line, labels,
//! job, the lists of the fix, and the blocks of a verdict, resolved or "could not
//! diagnose" notice.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::Value;

use super::blocks::{context, fields, header, list_text, section, verdict_link, view_block, within_block_limit};
use super::escaping::{code, mrkdwn, plain, prose};
use super::{Budget, ELLIPSIS, MAX_GRAPH_NAME, MAX_SUBTASKS_LISTED};
use crate::model::notice::Notice;
use crate::model::verdict::{Culprit, Hazard, HazardKind, Severity, Status, Verdict, VertexState};
use crate::render::names::{self, Names};

/// The header: an emoji for the status, `Changed: ` when the verdict replaces another,
/// the status and the job (and the culprit, in its prose form).
/// `esc` escapes the names: [`plain`] for the header, [`mrkdwn`] for text.
pub(super) fn status_title(v: &Verdict, job: &str, changed: bool, esc: fn(&str) -> String) -> String {
    let changed = if changed { "Changed: " } else { "" };
    let job = if job.trim().is_empty() { "unknown job".to_string() } else { esc(job) };
    match (v.status, &v.culprit) {
        (Status::CulpritFound, Some(c)) => {
            format!(":red_circle: {changed}Backpressure culprit {} in {job}", esc(&names::prose_name(&c.vertex_name)))
        }
        (Status::CulpritFound, None) => format!(":red_circle: {changed}Backpressure culprit in {job}"),
        (Status::NoSingleCulprit, _) => {
            format!(":large_orange_circle: {changed}No single backpressure culprit in {job}")
        }
        (Status::NoBackpressure, _) => format!(":large_green_circle: {changed}No backpressure in {job}"),
        (Status::Inconclusive, _) => format!(":grey_question: {changed}Backpressure diagnosis inconclusive for {job}"),
    }
}

/// `fraud-score (subtask 0 of 4)`: the prose name, and the subtasks when not all of them
/// carry the problem.
pub(super) fn culprit_name(c: &Culprit) -> String {
    let mut s = mrkdwn(&names::prose_name(&c.vertex_name));
    if !c.subtasks.is_empty() && c.subtasks.len() < c.parallelism as usize {
        let listed: Vec<String> = c.subtasks.iter().take(MAX_SUBTASKS_LISTED).map(|i| i.to_string()).collect();
        let more = if c.subtasks.len() > MAX_SUBTASKS_LISTED { format!(", {ELLIPSIS}") } else { String::new() };
        let noun = if c.subtasks.len() == 1 { "subtask" } else { "subtasks" };
        let _ = write!(s, " ({noun} {}{more} of {})", listed.join(", "), c.parallelism);
    }
    s
}

pub(super) fn other_culprits(v: &Verdict) -> Option<String> {
    let main = v.culprit.as_ref().map(|c| c.vertex_id.as_str());
    let others: Vec<String> =
        v.culprits.iter().filter(|c| Some(c.vertex_id.as_str()) != main).take(5).map(culprit_name).collect();
    (!others.is_empty()).then(|| format!("also: {}", others.join(", ")))
}

pub(super) fn hazard_line(names: &Names, h: &Hazard) -> String {
    let (icon, severity) = match h.severity {
        Severity::Critical => (":rotating_light:", "critical"),
        Severity::Warning => (":warning:", "warning"),
    };
    let kind = match h.kind {
        HazardKind::Retention => "retention",
        HazardKind::CheckpointsStalled => "checkpoints stalled",
        HazardKind::CheckpointTimeout => "checkpoint timeout",
    };
    let mut s = format!("{icon} *{severity}* · {kind}");
    if let Some(topic) = &h.topic {
        let _ = write!(s, " · topic {}", mrkdwn(topic));
    }
    match h.time_to_loss_seconds {
        Some(t) if t <= 0 => s.push_str(" · losing data now"),
        Some(t) => {
            let _ = write!(s, " · data loss in {:#}", jiff::SignedDuration::from_secs(t));
        }
        None => {}
    }
    if let Some(t) = h.time_to_timeout_seconds {
        let _ = write!(s, " · checkpoints time out in {:#}", jiff::SignedDuration::from_secs(t.max(0)));
    }
    let _ = write!(s, ": {}", prose(&names.text(&h.detail)));
    s
}

pub(super) fn hazards_sorted(v: &Verdict) -> Vec<&Hazard> {
    let mut hazards: Vec<&Hazard> = v.hazards.iter().collect();
    hazards.sort_by_key(|h| std::cmp::Reverse(h.severity));
    hazards
}

fn pct(v: Option<f64>) -> String {
    v.map(|r| format!("{:.0}%", r * 100.0)).unwrap_or_else(|| "unknown".into())
}

/// The evidence on one line: `Graph (busy/backpressured): A 0%/74% → B 0%/86% → C 99%/0% (culprit)`
/// in the graph's order; without a job plan `Vertices, order unknown (…): A … · B …`.
pub(super) fn graph_line(v: &Verdict) -> String {
    let parts: Vec<String> = v
        .graph
        .vertices
        .iter()
        .map(|x| {
            let name = names::clip(&names::prose_name(&x.name), MAX_GRAPH_NAME).into_owned();
            let item = format!("{} {}/{}", mrkdwn(&name), pct(x.busy_max), pct(x.backpressured_max));
            // Marked in words, not bold: a name may hold code spans.
            if x.state == VertexState::Culprit { format!("{item} (culprit)") } else { item }
        })
        .collect();
    if v.graph.from_plan {
        format!("Graph (busy/backpressured): {}", parts.join(" → "))
    } else {
        format!("Vertices, no job graph so order unknown (busy/backpressured): {}", parts.join(" · "))
    }
}

pub(super) fn labels_line(labels: &BTreeMap<String, String>) -> Option<String> {
    if labels.is_empty() {
        return None;
    }
    let parts: Vec<String> = labels.iter().map(|(k, v)| format!("{}={}", mrkdwn(k), mrkdwn(v))).collect();
    Some(format!("Labels: {}", parts.join(" · ")))
}

pub(super) fn numbered(names: &Names, items: &[String]) -> Vec<String> {
    items.iter().enumerate().map(|(i, f)| format!("{}. {}", i + 1, prose(&names.text(f)))).collect()
}

pub(super) fn bulleted(names: &Names, items: &[String]) -> Vec<String> {
    items.iter().map(|f| format!("• {}", prose(&names.text(f)))).collect()
}

/// `job-name` and its id in code; an empty id is left out, an empty name reads `unknown job`.
pub(super) fn job_line(n: &Notice) -> String {
    let name = if n.job.name.trim().is_empty() { "unknown job".to_string() } else { mrkdwn(&n.job.name) };
    if n.job.id.trim().is_empty() { name } else { format!("{name} {}", code(&names::clean(&n.job.id))) }
}

pub(super) fn verdict_blocks(n: &Notice, v: &Verdict) -> Vec<Value> {
    let names = Names::of(v);
    let mut blocks = Vec::new();
    blocks.push(header(&status_title(v, &n.job.name, n.changed, plain)));
    blocks.push(section(&prose(&names.text(&v.summary)), Budget::SUMMARY));
    if !v.hazards.is_empty() {
        let lines: Vec<String> = hazards_sorted(v).into_iter().map(|h| hazard_line(&names, h)).collect();
        blocks.push(section(&list_text("*Hazards*", &lines, Budget::HAZARDS), Budget::HAZARDS));
    }
    if !v.fix.is_empty() {
        blocks.push(section(&list_text("*Fix*", &numbered(&names, &v.fix), Budget::FIX), Budget::FIX));
    }
    if !v.not_the_fix.is_empty() {
        let lines = bulleted(&names, &v.not_the_fix);
        blocks.push(section(&list_text("*Would not help*", &lines, Budget::NOT_THE_FIX), Budget::NOT_THE_FIX));
    }
    if !v.graph.vertices.is_empty() {
        blocks.push(context(vec![graph_line(v)], Budget::EVIDENCE));
    }
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
    f.push(format!("*At*\n{} · window {} s", mrkdwn(&v.at), v.window_seconds));
    blocks.push(fields(f, Budget::FIELD));
    if let Some(labels) = labels_line(&n.labels) {
        blocks.push(context(vec![labels], Budget::LABELS));
    }
    blocks.extend(view_block(n));
    within_block_limit(blocks)
}

pub(super) fn resolved_line(n: &Notice) -> String {
    format!(":white_check_mark: *Resolved*: {}: the alert group stopped firing.", job_line(n))
}

/// A reply naming an alert group (its labels follow) that now carries the job's verdict.
pub(super) fn joined_line(n: &Notice) -> String {
    let all = n.episode.groups.len().max(1);
    format!(
        ":link: *Also firing*: {}: another alert group carries this verdict (its labels below; {all} alert group{} in all). Nothing else changed.",
        job_line(n),
        if all == 1 { "" } else { "s" }
    )
}

/// A reply naming an alert group that resolved while others still fire.
pub(super) fn group_resolved_line(n: &Notice) -> String {
    let left = n.episode.groups.len();
    format!(
        ":white_check_mark: *Alert group resolved*: {}: this group (its labels below) stopped firing; the verdict stays open while {left} other alert group{} still fire{}.",
        job_line(n),
        if left == 1 { "" } else { "s" },
        if left == 1 { "s" } else { "" }
    )
}

pub(super) fn could_not_line(n: &Notice) -> String {
    let reason = n.reason.as_deref().unwrap_or("no reason given");
    format!(":warning: {}: could not diagnose: {}", job_line(n), mrkdwn(reason))
}

pub(super) fn short_blocks(n: &Notice, line: String) -> Vec<Value> {
    let mut blocks = vec![section(&line, Budget::SUMMARY + Budget::FIX)];
    if let Some(labels) = labels_line(&n.labels) {
        blocks.push(context(vec![labels], Budget::LABELS));
    }
    if let Some(l) = verdict_link(n) {
        blocks.push(context(vec![l], Budget::LINK));
    }
    blocks
}
