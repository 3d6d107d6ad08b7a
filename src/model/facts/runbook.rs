//! The runbook's own facts (`crate::diagnose::runbook`): why a step was skipped, the
//! summary line when no step words one, the unexplained culprit, and the notes on what
//! limits the diagnosis.

use crate::model::verdict::{Finding, StepName};

#[derive(Debug, Clone, PartialEq)]
pub enum RunbookFact {
    /// A later step did not run: `step` hit first.
    SkippedAfterHit { step: StepName },
    /// A later step did not run: `locate` decided the finding itself.
    SkippedLocateDecided { finding: Option<Finding> },
    /// The culprit-examining steps had no culprit: nothing is backpressured
    /// (`nothing_red`), or `locate` found none.
    NoCulpritToExamine { nothing_red: bool },
    /// The culprit holds the job back for a reason no step finds (cause): its utilisation
    /// ρ and capacity (records/s at 100 % busy) when known.
    UnexplainedCause { utilisation_ratio: Option<f64>, capacity_records_per_s: Option<f64> },
    /// Profile the unexplained culprit (fix).
    ProfileIt { vertex: String },
    /// Summary of an unexplained culprit: its busy ratio (max over subtasks) when known.
    HoldsBackUnexplained { vertex: String, busy_max_ratio: Option<f64> },
    /// Summary when nothing is backpressured: the busiest vertex and its utilisation.
    NoBackpressure { job: String, busiest: Option<(String, Option<f64>)> },
    /// Summary when the metrics do not show where the backpressure stops.
    Inconclusive { job: String },
    /// Note: no job graph (graph-free mode).
    GraphFree,
    /// Note: a reporter older than Flink 1.13 (isBackPressured shares, classic method) and
    /// the pool thresholds it is judged by.
    ClassicBackpressure { in_pool_full_ratio: f64, out_pool_low_ratio: f64 },
    /// Note: every sample of the window falls in the job's warm-up.
    TooYoung {
        /// Restarted or rescaled within the window (else started).
        restarted: bool,
        /// Seconds between the (re)start and the window's end.
        age_s: i64,
        window_end_ms: i64,
        /// When a diagnosis becomes meaningful: warm-up end plus the minimum window.
        meaningful_from_ms: i64,
        min_window_s: i64,
        started_ms: i64,
        exclusion_s: i64,
    },
    /// Note: part of the window falls in the job's warm-up.
    WarmUpInWindow { uptime_s: i64, in_window_s: i64, exclusion_s: i64 },
    /// Note: vertices with subtasks that report nothing: (name, subtasks with data,
    /// parallelism).
    SubtasksWithoutMetrics { vertices: Vec<(String, usize, u32)> },
    /// Note: metrics name vertices the plan does not have.
    UnknownVertices { names: Vec<String> },
}
