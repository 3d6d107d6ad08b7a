//! The one place that words what the diagnosis found: every sentence of a verdict (cause,
//! fix, not the fix, advice, steps, hazards, missing, notes, summary) is written here from
//! the typed facts of [`crate::model::facts`], one file per area of the runbook. Text,
//! Markdown, Slack, the page and every destination render the verdict this builds, so a
//! fact reads the same everywhere.
//!
//! Pure: data in, text out.

pub mod autoscaler;
mod changes;
mod checkpoints;
mod failover;
mod headroom;
mod hot_key;
mod locate;
pub mod missing;
pub mod numbers;
mod parallelism;
pub mod profile;
mod resources;
mod retention;
mod runbook;
mod sink;
mod sources;
mod state_backend;
mod state_growth;

use std::fmt;

use crate::model::facts::{Diagnosis, Fact, HazardFacts, MissingFact, Summary};
use crate::model::verdict::{HazardKind, SCHEMA, Severity, Step, Verdict, rfc3339};

impl fmt::Display for Fact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fact::Text(s) => f.write_str(s),
            Fact::Seq(all) => all.iter().try_for_each(|one| one.fmt(f)),
            Fact::Change(c) => changes::word(c, f),
            Fact::Retention(r) => retention::word(r, f),
            Fact::HotKey(h) => hot_key::word(h, f),
            Fact::Locate(l) => locate::word(l, f),
            Fact::Checkpoint(c) => checkpoints::word(c, f),
            Fact::Headroom(h) => headroom::word(h, f),
            Fact::Parallelism(p) => parallelism::word(p, f),
            Fact::Runbook(r) => runbook::word(r, f),
            Fact::Sink(s) => sink::word(s, f),
            Fact::Sources(s) => sources::word(s, f),
            Fact::StateBackend(s) => state_backend::word(s, f),
            Fact::Resources(r) => resources::word(r, f),
            Fact::StateGrowth(s) => state_growth::word(s, f),
            Fact::Failover(x) => failover::word(x, f),
            Fact::Autoscaler(a) => autoscaler::word(a, f),
        }
    }
}

impl fmt::Display for MissingFact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MissingFact::Collected(m) => f.write_str(&missing::missing(m)),
            MissingFact::Metric(m) => f.write_str(m),
            MissingFact::Input(fact) => fact.fmt(f),
        }
    }
}

/// The `culprit.verdict/v1` value of a diagnosis: its facts worded, lists without repeats.
pub fn verdict(d: &Diagnosis) -> Verdict {
    let words = |facts: &[Fact]| -> Vec<String> { facts.iter().map(|f| f.to_string()).collect() };
    Verdict {
        schema: SCHEMA.to_string(),
        job: d.job.clone(),
        at: rfc3339(d.at_ms),
        window_seconds: d.window_seconds,
        window_start: rfc3339(d.window_start_ms),
        status: d.status,
        finding: d.finding,
        culprit: d.culprit.clone(),
        culprits: d.culprits.clone(),
        summary: summary(&d.summary),
        cause: words(&d.cause).join(" "),
        fix: dedup(words(&d.fix)),
        not_the_fix: dedup(words(&d.not_the_fix)),
        advice: dedup(words(&d.advice)),
        steps: d
            .steps
            .iter()
            .map(|s| Step { step: s.step, outcome: s.outcome, detail: s.detail.to_string() })
            .collect(),
        hazards: d.hazards.iter().map(hazard).collect(),
        evidence: d.evidence.clone(),
        graph: d.graph.clone(),
        confidence: d.confidence,
        missing: dedup(d.missing.iter().map(|m| m.to_string()).collect()),
        notes: words(&d.notes),
        timeline: d.timeline.clone(),
        profile: None,
        autoscaler: d.autoscaler.clone(),
        attribution: d.attribution.clone(),
    }
}

fn hazard(h: &HazardFacts) -> crate::model::verdict::Hazard {
    crate::model::verdict::Hazard {
        kind: h.kind,
        severity: h.severity,
        time_to_loss_seconds: h.time_to_loss_seconds,
        topic: h.topic.clone(),
        time_to_timeout_seconds: h.time_to_timeout_seconds,
        detail: h.detail.to_string(),
    }
}

/// The summary line: `DATA LOSS in 12 min on orders. <line> (1 more independent culprit: x.)`.
fn summary(s: &Summary) -> String {
    let mut line = s.line.to_string();
    if !s.more_culprits.is_empty() {
        line.push_str(&format!(
            " ({} more independent culprit{}: {}.)",
            s.more_culprits.len(),
            if s.more_culprits.len() > 1 { "s" } else { "" },
            s.more_culprits.join(", ")
        ));
    }
    for fact in s.health.iter().chain(&s.changes) {
        line.push(' ');
        line.push_str(&fact.to_string());
    }
    match s.hazard.as_ref().filter(|h| h.severity == Severity::Critical) {
        Some(h) => format!("{}. {line}", hazard_lead(h)),
        None => line,
    }
}

fn hazard_lead(h: &HazardFacts) -> String {
    let on = h.topic.as_ref().map(|t| format!(" on {t}")).unwrap_or_default();
    let estimate = matches!(&h.detail, Fact::Retention(r) if r.is_estimate());
    match (h.kind, h.time_to_loss_seconds) {
        (HazardKind::CheckpointsStalled, _) => {
            format!("DATA LOSS RISK{on}: a restart now would resume from offsets already out of retention")
        }
        // An estimate (a lag in time or size) is a risk, never a loss: "DATA LOSS" needs
        // the position below the log start, or offsets heading there.
        _ if estimate => match h.time_to_loss_seconds {
            Some(s) => format!("DATA LOSS RISK in {}{on}", numbers::human_secs(s as f64)),
            None => format!("DATA LOSS RISK{on}: the lag has reached the retention by the estimate"),
        },
        (_, Some(0)) => format!("DATA LOSS: already losing data{on}"),
        (_, Some(s)) => format!("DATA LOSS in {}{on}", numbers::human_secs(s as f64)),
        (_, None) => format!("DATA LOSS RISK{on}"),
    }
}

/// Keeps the first of equal sentences, in order.
fn dedup(items: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    items.into_iter().filter(|s| seen.insert(s.clone())).collect()
}
