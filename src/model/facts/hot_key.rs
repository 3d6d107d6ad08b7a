//! Facts of step `hot_key` (`crate::diagnose::steps::hot_key`): a hot subtask, and whether
//! a key (its share of the records, the ceiling that share puts on the job) or a slow
//! instance (its TaskManager, its GC time) explains it.
//!
//! Subtasks are named `vertex[i]` (`subtask_name`); ratios are 0..1 (`_ratio`), rates in
//! records/s, GC time in ms per second.

use super::Fact;

/// The busy ratios a "no hot subtask" finding lists.
#[derive(Debug, Clone, PartialEq)]
pub enum BusyRatios {
    /// Every subtask's busy ratio, in subtask order (`None`: no busy time reported).
    Each(Vec<Option<f64>>),
    /// Too many subtasks to list: the vertex's busy range (`crate::diagnose::busy_range`).
    Range(Box<Fact>),
}

/// The fix for a hot key, by what the operator does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HotKeyFix {
    /// An associative aggregate: pre-aggregate before the keyBy, or salt and combine.
    PreAggregate,
    /// Flink SQL's mini-batch and two-phase aggregation settings.
    SqlTwoPhase,
    /// A join, window or order-dependent operator: salting is wrong.
    NoSaltingOrdered,
    /// Unknown kind: salting applies only to associative and commutative logic.
    SaltIfAssociative,
    /// Unknown kind: how to tell culprit the operator's kind.
    TellOperatorKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum HotKeyFact {
    /// No data: only `reporting` of `vertex`'s `parallelism` subtasks report metrics.
    SubtasksMissing { vertex: String, reporting: usize, parallelism: u32 },
    /// Clear: parallelism one.
    OneSubtask { vertex: String },
    /// No data: the vertex reports no busy time (Flink ≤ 1.12).
    BusyUnknown { vertex: String },
    /// Clear: no subtask is hot (≥ `hot_busy_threshold_ratio`) with the others' median
    /// ≤ `others_median_threshold_ratio`.
    NoHotSubtask { busy: BusyRatios, hot_busy_threshold_ratio: f64, others_median_threshold_ratio: f64 },
    /// No data: a hot subtask, but no records-in rates to tell a key from a slow instance.
    RecordsUnknown { subtask_name: String, hot_busy_ratio: f64, others_median_busy_ratio: f64 },
    /// Hit (detail): the hot subtask gets `share_ratio` of the records, at least the
    /// threshold `share_threshold_ratio` = `share_factor` / `parallelism`.
    HotKeyFound {
        subtask_name: String,
        hot_busy_ratio: f64,
        share_ratio: f64,
        share_threshold_ratio: f64,
        share_factor: f64,
        parallelism: usize,
        others_median_busy_ratio: f64,
    },
    /// Cause: the hot subtask's records against the vertex's (its share is
    /// `share_ratio` = `hot_records_per_s` / `total_records_per_s`, `share_ratio ×
    /// parallelism` times a uniform share).
    HotKeyShare {
        subtask_name: String,
        hot_busy_ratio: f64,
        hot_records_per_s: f64,
        total_records_per_s: f64,
        share_ratio: f64,
        parallelism: usize,
        others_median_busy_ratio: f64,
    },
    /// Cause: the ceiling a key share puts on the job: `ceiling_ratio` = 1/share times one
    /// subtask's capacity (`capacity_records_per_s`, its rate at 100 % busy), i.e.
    /// `job_max_records_per_s` at this vertex.
    Ceiling { ceiling_ratio: f64, capacity_records_per_s: f64, job_max_records_per_s: f64 },
    /// Fix for a hot key in `vertex`.
    Fix { fix: HotKeyFix, vertex: String },
    /// Not the fix: more parallelism, the hot subtask being `hot_busy_ratio` busy.
    MoreParallelismHotKey { vertex: String, hot_busy_ratio: f64 },
    /// Summary of a hot key.
    HotKeySummary { vertex: String, share_ratio: f64, subtask: u32, job_max_records_per_s: f64 },
    /// Hit (detail): a hot subtask with a share below the key threshold.
    SlowInstanceFound {
        subtask_name: String,
        hot_busy_ratio: f64,
        others_median_busy_ratio: f64,
        share_ratio: f64,
        share_threshold_ratio: f64,
    },
    /// Cause: records are even; the slow instance runs on TaskManager `tm` (`unknown` when
    /// not known) on `host`.
    SlowInstance {
        subtask_name: String,
        hot_busy_ratio: f64,
        others_median_busy_ratio: f64,
        hot_records_per_s: f64,
        total_records_per_s: f64,
        share_ratio: f64,
        parallelism: usize,
        tm: String,
        host: Option<String>,
    },
    /// Cause: GC on the slow instance's TaskManager stands out (more than twice the others'
    /// mean plus 5 ms/s, or no other TaskManager to compare with).
    GcStandsOut { tm_gc_ms_per_s: f64, others_gc_ms_per_s: Option<f64> },
    /// Cause: GC on that TaskManager is like the others'.
    GcNotTheReason { tm_gc_ms_per_s: f64, others_gc_ms_per_s: f64 },
    /// Fix: look at the node, with its GC time when known; restarting moves `subtask`.
    /// `reading`: what was measured of its TaskManager and pod (step `resources`' reading);
    /// `cause`: the pressure that reading shows over its threshold and above the job's
    /// other TaskManagers, when one does.
    FixTheNode {
        tm: String,
        host: Option<String>,
        tm_gc_ms_per_s: Option<f64>,
        subtask: u32,
        reading: Box<crate::model::facts::resources::NodeReading>,
        cause: Option<crate::model::facts::resources::Pressure>,
    },
    /// Not the fix: salting (records are already even).
    NoSaltingEven { vertex: String },
    /// Not the fix: more parallelism (the slow instance stays slow).
    MoreParallelismSlow { vertex: String },
    /// Summary of a slow instance.
    /// `pressure`: the TaskManager's pressure when it is the finding.
    SlowInstanceSummary {
        vertex: String,
        subtask: u32,
        tm: String,
        hot_busy_ratio: f64,
        others_median_busy_ratio: f64,
        pressure: Option<crate::model::facts::resources::Pressure>,
        /// With `pressure`: every busy subtask of the vertex on that TaskManager.
        on_node: Vec<u32>,
    },
}
