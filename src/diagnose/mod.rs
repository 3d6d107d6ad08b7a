//! The diagnosis: a pure function from a [`Snapshot`] to a [`crate::model::verdict::Verdict`].
//!
//! [`runbook`] holds the ordered list of steps (and only it); each step lives in its own
//! file under [`steps`] and reports a [`StepReport`]. No IO, no clock, no logging: the
//! same snapshot always gives the same verdict.

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
use crate::model::snapshot::Snapshot;
use crate::model::verdict::{Evidence, Finding, Outcome};

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
    pub detail: String,
    /// The finding, when the step hits.
    pub finding: Option<Finding>,
    /// Sentences of the cause.
    pub cause: Vec<String>,
    pub fix: Vec<String>,
    pub not_the_fix: Vec<String>,
    pub advice: Vec<String>,
    pub evidence: Vec<Evidence>,
    /// Metrics whose absence limited the step.
    pub missing: Vec<String>,
    /// Subtasks that carry the problem, when not all.
    pub subtasks: Option<Vec<u32>>,
    /// One line for the summary, when the step hits.
    pub summary: Option<String>,
}

impl StepReport {
    pub fn new(outcome: Outcome, detail: impl Into<String>) -> Self {
        StepReport {
            outcome,
            detail: detail.into(),
            finding: None,
            cause: Vec::new(),
            fix: Vec::new(),
            not_the_fix: Vec::new(),
            advice: Vec::new(),
            evidence: Vec::new(),
            missing: Vec::new(),
            subtasks: None,
            summary: None,
        }
    }

    pub fn clear(detail: impl Into<String>) -> Self {
        Self::new(Outcome::Clear, detail)
    }

    pub fn no_data(detail: impl Into<String>, missing: Vec<String>) -> Self {
        let mut r = Self::new(Outcome::NoData, detail);
        r.missing = missing;
        r
    }

    pub fn hit(finding: Finding, detail: impl Into<String>) -> Self {
        let mut r = Self::new(Outcome::Hit, detail);
        r.finding = Some(finding);
        r
    }
}

/// Joins at most `max` items, then says how many more there are.
pub fn limited_list(items: &[String], max: usize) -> String {
    if items.len() <= max {
        items.join(", ")
    } else {
        format!("{}, and {} more", items[..max].join(", "), items.len() - max)
    }
}

/// `0.973` → `97%`.
pub fn pct(ratio: f64) -> String {
    // Rounded to 4 significant digits first, so float sums that differ in the last bits
    // (a live backend and its recording) read alike.
    no_negative_zero(format!("{:.0}%", round_sig(ratio) * 100.0))
}

/// A formatted number that rounds to zero is written without its minus sign: `-0.3` at no
/// decimals is `0`, never `-0`.
pub fn no_negative_zero(s: String) -> String {
    match s.strip_prefix('-') {
        Some(rest) if !rest.chars().any(|c| c.is_ascii_digit() && c != '0') => rest.to_string(),
        _ => s,
    }
}

/// [`pct`] of a value that may be missing: `unknown` then, never `0%`.
pub fn pct_or_unknown(ratio: Option<f64>) -> String {
    ratio.map(pct).unwrap_or_else(|| "unknown".into())
}

/// The busy range of a vertex over the subtasks that report busy time, saying how many do
/// not: `54%–100%`, `54%–100%; 1 of 3 subtasks without data`, `unknown: no subtask
/// reports busy time`. A subtask without data never counts as 0 % busy.
pub fn busy_range(v: &VertexSignals) -> String {
    let without = v.subtasks.iter().filter(|s| s.busy.is_none()).count() + v.missing_subtasks();
    let of = v.subtask_count() + v.missing_subtasks();
    let range = match (v.busy_min(), v.busy_max()) {
        (Some(lo), Some(hi)) => format!("{}–{}", pct(lo), pct(hi)),
        _ => return "unknown: no subtask reports busy time".into(),
    };
    match without {
        0 => range,
        n => format!("{range}; {n} of {of} subtasks without data"),
    }
}

/// "max over 3 subtasks", or "max over the 2 of 3 subtasks with data": what a busy or
/// backpressured maximum was taken over.
pub fn max_over(v: &VertexSignals) -> String {
    let with = v.subtasks.iter().filter(|s| s.busy.is_some()).count();
    let of = v.subtask_count() + v.missing_subtasks();
    if !v.detailed() || with == of {
        format!("max over {of} subtasks")
    } else {
        format!("max over the {with} of {of} subtasks with data")
    }
}

/// A rate or count, readable: `1660`, `12.5`, `0.84`.
pub fn num(v: f64) -> String {
    let a = v.abs();
    no_negative_zero(if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    })
}

/// A rate or count to three significant digits, readable: `33400`, `778000`, `12.5`:
/// advice numbers that should not wobble with the last digits of a float sum.
pub fn approx(v: f64) -> String {
    if v.abs() >= 1000.0 {
        let digits = v.abs().log10().floor() as i32 - 2;
        let factor = 10f64.powi(digits);
        no_negative_zero(format!("{:.0}", (v / factor).round() * factor))
    } else {
        num(v)
    }
}

/// Seconds, readable: `45 s`, `12 min`, `3.5 h`, `2.1 d`.
pub fn human_secs(s: f64) -> String {
    no_negative_zero(if s < 120.0 {
        format!("{s:.0} s")
    } else if s < 2.0 * 3600.0 {
        format!("{:.0} min", s / 60.0)
    } else if s < 2.0 * 86400.0 {
        format!("{:.1} h", s / 3600.0)
    } else {
        format!("{:.1} d", s / 86400.0)
    })
}

/// Bytes, readable: `3.5 MB`.
pub fn human_bytes(b: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut v = b;
    let mut i = 0;
    while v.abs() >= 1000.0 && i < UNITS.len() - 1 {
        v /= 1000.0;
        i += 1;
    }
    no_negative_zero(if i == 0 { format!("{v:.0} {}", UNITS[i]) } else { format!("{v:.1} {}", UNITS[i]) })
}

/// Rounds to 4 significant digits so verdicts do not carry float noise.
pub fn round_sig(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let digits = 4 - 1 - v.abs().log10().floor() as i32;
    let factor = 10f64.powi(digits);
    (v * factor).round() / factor
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

    #[test]
    fn numbers_read_well() {
        assert_eq!(pct(0.973), "97%");
        assert_eq!(num(1660.03), "1660");
        // Three significant digits from 1000 up: 33365 and 33366 read the same.
        assert_eq!(
            (approx(33365.2), approx(33366.0), approx(778267.0), approx(999.4)),
            ("33400".into(), "33400".into(), "778000".into(), "999".into())
        );
        assert_eq!(human_secs(5400.0), "90 min");
        assert_eq!(human_bytes(3_500_000.0), "3.5 MB");
        assert_eq!(round_sig(0.123456), 0.1235);
        assert_eq!(round_sig(1660.033), 1660.0);
    }

    #[test]
    fn a_number_that_rounds_to_zero_is_never_written_negative() {
        // −0.3 % at no decimals, −0.001 at two, −0.0 itself, −0.2 s: all read as zero.
        assert_eq!(
            (pct(-0.003), num(-0.001), num(-0.0), human_secs(-0.2)),
            ("0%".into(), "0.00".into(), "0.00".into(), "0 s".into())
        );
        assert_eq!((pct(-0.5), num(-12.5)), ("-50%".into(), "-12.5".into()));
    }
}
