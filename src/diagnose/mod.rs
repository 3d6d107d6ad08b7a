//! The diagnosis: a pure function from a [`Snapshot`] to a [`crate::model::verdict::Verdict`].
//!
//! [`runbook`] holds the ordered list of steps (and only it); each step lives in its own
//! file under [`steps`] and reports a [`StepReport`]. No IO, no clock, no logging: the
//! same snapshot always gives the same verdict.

pub mod attribution;
pub mod autoscaler;
mod changes;
pub mod parallelism;
pub mod plan;
pub mod runbook;
pub mod signals;
pub mod steps;
#[cfg(test)]
pub mod testkit;
pub mod timeline;

use std::collections::BTreeSet;

use crate::config::DiagnosisConfig;
use crate::diagnose::signals::{JobSignals, VertexSignals};
use crate::model::facts::locate::{BusyRange, MaxOver};
use crate::model::facts::{Fact, Facts};
use crate::model::snapshot::Snapshot;
use crate::model::verdict::{Evidence, Finding, Outcome};

use crate::model::verdict::round_sig;
pub use runbook::diagnose;

/// What every step reads.
pub struct Context<'a> {
    pub snapshot: &'a Snapshot,
    pub signals: &'a JobSignals,
    pub cfg: &'a DiagnosisConfig,
    /// Ids of backpressured vertices (`p_max` above the threshold).
    pub red: BTreeSet<String>,
    /// The window read sample by sample.
    pub timeline: timeline::Reading,
}

impl<'a> Context<'a> {
    pub fn new(snapshot: &'a Snapshot, signals: &'a JobSignals, cfg: &'a DiagnosisConfig) -> Self {
        let red = signals
            .vertices
            .iter()
            .filter(|v| v.backpressured_max().is_some_and(|p| p > cfg.thresholds.backpressured_ratio))
            .map(|v| v.id.clone())
            .collect();
        let timeline = timeline::read(snapshot, signals, cfg);
        Context { snapshot, signals, cfg, red, timeline }
    }

    pub fn is_red(&self, v: &VertexSignals) -> bool {
        self.red.contains(&v.id)
    }

    /// The PromQL behind a signal, when the collector recorded it.
    pub fn query(&self, signal: &str) -> Option<String> {
        self.snapshot.queries.get(signal).cloned()
    }

    /// Evidence with the query of `signal`.
    pub fn evidence(
        &self,
        subject: &str,
        metric: &str,
        value: f64,
        unit: &str,
        threshold: Option<f64>,
        signal: &str,
    ) -> Evidence {
        Evidence {
            subject: subject.to_string(),
            metric: metric.to_string(),
            value: round_sig(value),
            unit: unit.to_string(),
            threshold,
            query: self.query(signal),
        }
    }
}

/// What one step found.
#[derive(Debug, Clone, PartialEq)]
pub struct StepReport {
    pub outcome: Outcome,
    pub detail: Fact,
    /// The finding, when the step hits.
    pub finding: Option<Finding>,
    /// The cause, a fact a sentence.
    pub cause: Facts,
    pub fix: Facts,
    pub not_the_fix: Facts,
    pub advice: Facts,
    pub evidence: Vec<Evidence>,
    /// Metrics whose absence limited the step.
    pub missing: Vec<String>,
    /// Inputs whose absence limited the step, as the step states them (the demand).
    pub missing_inputs: Vec<Fact>,
    /// Subtasks that carry the problem, when not all.
    pub subtasks: Option<Vec<u32>>,
    /// One line for the summary, when the step hits.
    pub summary: Option<Fact>,
}

impl StepReport {
    pub fn new(outcome: Outcome, detail: impl Into<Fact>) -> Self {
        StepReport {
            outcome,
            detail: detail.into(),
            finding: None,
            cause: Facts::new(),
            fix: Facts::new(),
            not_the_fix: Facts::new(),
            advice: Facts::new(),
            evidence: Vec::new(),
            missing: Vec::new(),
            missing_inputs: Vec::new(),
            subtasks: None,
            summary: None,
        }
    }

    pub fn clear(detail: impl Into<Fact>) -> Self {
        Self::new(Outcome::Clear, detail)
    }

    pub fn no_data(detail: impl Into<Fact>, missing: Vec<String>) -> Self {
        let mut r = Self::new(Outcome::NoData, detail);
        r.missing = missing;
        r
    }

    pub fn hit(finding: Finding, detail: impl Into<Fact>) -> Self {
        let mut r = Self::new(Outcome::Hit, detail);
        r.finding = Some(finding);
        r
    }
}

/// The busy range of a vertex over the subtasks that report busy time, with how many do
/// not (worded `54%–100%; 1 of 3 subtasks without data`). A subtask without data never
/// counts as 0 % busy.
pub fn busy_range_of(v: &VertexSignals) -> BusyRange {
    BusyRange {
        min_max_ratio: v.busy_min().zip(v.busy_max()),
        without_data: v.subtasks.iter().filter(|s| s.busy.is_none()).count() + v.missing_subtasks(),
        subtasks: v.subtask_count() + v.missing_subtasks(),
    }
}

/// [`busy_range_of`] worded: `54%–100%`, `54%–100%; 1 of 3 subtasks without data`,
/// `unknown: no subtask reports busy time` (kept for the steps that still build text).
pub fn busy_range(v: &VertexSignals) -> String {
    busy_range_of(v).to_string()
}

/// What a busy or backpressured maximum was taken over (worded "max over 3 subtasks", or
/// "max over the 2 of 3 subtasks with data").
pub fn max_over(v: &VertexSignals) -> MaxOver {
    MaxOver {
        with_data: v.subtasks.iter().filter(|s| s.busy.is_some()).count(),
        subtasks: v.subtask_count() + v.missing_subtasks(),
        detailed: v.detailed(),
    }
}

/// Least-squares slope of `(t_ms, value)` points, in value units per second.
pub fn slope_per_s(points: &[(i64, f64)]) -> Option<f64> {
    let pts: Vec<(f64, f64)> = points.iter().filter(|p| p.1.is_finite()).map(|p| (p.0 as f64 / 1000.0, p.1)).collect();
    if pts.len() < 2 {
        return None;
    }
    let n = pts.len() as f64;
    let mt = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let mv = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let var = pts.iter().map(|p| (p.0 - mt).powi(2)).sum::<f64>();
    if var <= 0.0 {
        return None;
    }
    Some(pts.iter().map(|p| (p.0 - mt) * (p.1 - mv)).sum::<f64>() / var)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slope_of_a_line_is_its_rate_per_second() {
        // 0, 10, 20 at 0, 5, 10 s → 2 per second.
        assert_eq!(slope_per_s(&[(0, 0.0), (5000, 10.0), (10000, 20.0)]), Some(2.0));
        assert_eq!(slope_per_s(&[(0, 1.0)]), None);
    }
}
