//! What step `checkpoints` (`crate::diagnose::steps::checkpoints`) found: why the recovery
//! point is in trouble (failures, no completion for several intervals, a checkpoint near
//! its timeout), a culprit that stalls the job in phase with the checkpoints, or
//! checkpoints that complete, slower or not.

/// Why the recovery point is in trouble, each with the numbers that crossed a threshold.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Reason {
    /// Checkpoints failed or expired in the window (after the start-up grace).
    Failed { count: f64 },
    /// No checkpoint completed for `age_ms`, more than 3 × the interval (`estimated` from
    /// the spacing of completions when Flink REST gave none).
    NoCompletion { age_ms: f64, interval_ms: i64, estimated: bool },
    /// The last checkpoint took `duration_ms`, at least half the timeout.
    NearTimeout { duration_ms: f64, timeout_ms: i64 },
}

/// The backpressured vertex whose barriers wait longest behind data
/// (`checkpointStartDelayNanos`).
#[derive(Debug, Clone, PartialEq)]
pub struct BarrierWait {
    pub vertex: String,
    pub delay_ms: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub enum CheckpointFact {
    /// No checkpoint metrics (no data).
    NoMetrics,
    /// The culprit stalls the job every `period_s`, in phase with the checkpoints (detail,
    /// cause, fix and summary say it in turn).
    StallsInPhase {
        vertex: String,
        period_s: i64,
    },
    StallsCause {
        vertex: String,
        period_s: i64,
    },
    StallsFix {
        vertex: String,
    },
    StallsSummary {
        vertex: String,
        period_s: i64,
    },
    /// Not the fix: unaligned checkpoints, with the task thread blocked in the snapshot.
    UnalignedCannotHelpBlocked,
    /// Detail of a hit: the reasons.
    InTrouble {
        reasons: Vec<Reason>,
    },
    /// Cause without backpressure: the checkpoint itself is slow or failing.
    NotHeldUpByData {
        reasons: Vec<Reason>,
    },
    /// Fix without backpressure, with the timeout now.
    SlowSnapshotFix {
        timeout_ms: i64,
    },
    /// Not the fix without backpressure: unaligned checkpoints, nothing to overtake.
    NothingToOvertake,
    /// Summary without backpressure: the first reason.
    SlowSnapshotSummary {
        reason: Reason,
    },
    /// Cause with backpressure: aligned barriers wait behind the data.
    HeldUpByData {
        reasons: Vec<Reason>,
        barrier_wait: Option<BarrierWait>,
    },
    /// Unaligned checkpoints (fix or advice): on already (`already_on`), or how to turn them on.
    Unaligned {
        already_on: bool,
    },
    /// Fix: relieve the backpressure at the culprit.
    RelieveBackpressure {
        vertex: String,
    },
    /// Summary with backpressure: the culprit when there is one, the first reason.
    HeldUpSummary {
        culprit: Option<String>,
        reason: Reason,
    },
    /// Clear: checkpoints complete. The last duration, and when it is at least 10 × the
    /// median before the window (`slower_than_before_ms`, that median) or longer than the
    /// interval (`longer_than_interval_ms`, the interval); the barrier wait; the timeout;
    /// whether the interval is estimated.
    Complete {
        last_duration_ms: Option<f64>,
        slower_than_before_ms: Option<f64>,
        longer_than_interval_ms: Option<i64>,
        barrier_wait: Option<BarrierWait>,
        timeout_ms: i64,
        interval_estimated: bool,
    },
    /// Clear: no checkpoint has completed yet (`lastCheckpointDuration` is −1, Flink's value
    /// before the first completed checkpoint), and that is no stall (yet): periodic
    /// checkpointing may be off, or the first one still runs.
    NoneCompletedYet,
    /// Advice: checkpoints slowed with the backlog, then [`Self::Unaligned`].
    SlowedWithBacklog {
        unaligned_on: bool,
    },
}
