//! Facts of step `sink` (`crate::diagnose::steps::sink`): the culprit is a sink, and
//! whether the system behind it is slow overall (its rate and time per record), one writer
//! is hot (a hot key at the destination, or a stuck writer), or it flushes in every
//! checkpoint.
//!
//! Ratios are 0..1 (`_ratio`), rates in records/s, times in ms or s as named.

use super::Fact;

#[derive(Debug, Clone, PartialEq)]
pub enum SinkFact {
    /// No data: without the job graph, whether the culprit is a sink is unknown.
    NoGraph,
    /// Clear: the culprit has downstream consumers.
    NotASink { vertex: String },
    /// Hit (detail): the culprit has no downstream consumers.
    IsASink { vertex: String },
    /// Cause: one sink subtask gets `share_ratio` of the records (a key share at
    /// `parallelism`): a hot key or document at the destination.
    HotKeyAtDestination {
        subtask_name: String,
        hot_busy_ratio: Option<f64>,
        share_ratio: f64,
        parallelism: u32,
        others_median_busy_ratio: Option<f64>,
    },
    /// Fix: spread the hot key at the destination.
    SpreadTheHotKey { subtask_name: String, share_ratio: f64, vertex: String },
    /// Cause: one sink writer is slow although records are even (its share when known).
    SlowWriter {
        subtask_name: String,
        hot_busy_ratio: Option<f64>,
        others_median_busy_ratio: Option<f64>,
        share_ratio: Option<f64>,
    },
    /// Fix: look at the node that writer writes to, and its TaskManager (`unknown` when
    /// not known).
    LookAtTheWriter { subtask_name: String, tm: String },
    /// Summary: one subtask of the sink is the bottleneck.
    OneSubtaskSummary { vertex: String, subtask: u32 },
    /// Cause: every writer is busy (none hot). `with_data` of the `subtasks` running
    /// report busy time; `busy_range` is theirs (`crate::diagnose::busy_range`); the
    /// destination accepts `accepts_records_per_s` in total, `per_record_ms` of busy
    /// time per record per writer.
    UniformlySlow {
        with_data: usize,
        subtasks: usize,
        busy_range: Box<Fact>,
        accepts_records_per_s: Option<f64>,
        per_record_ms: Option<f64>,
    },
    /// Cause: the sink holds the job back and reports no busy time (Flink ≤ 1.12).
    BusyUnknown { accepts_records_per_s: Option<f64> },
    /// Fix: the system behind the sink takes `per_record_ms` per record.
    FixTheSystem { vertex: String, per_record_ms: Option<f64> },
    /// Fix: write in bigger batches.
    BiggerBatches,
    /// Fix: more parallelism, only if the destination scales with more connections (the
    /// parallelism needed, `crate::diagnose::parallelism`).
    MoreConnections { parallelism: Box<Fact> },
    /// Summary: the system the sink writes to is too slow at `records_per_s`.
    SlowSystemSummary { vertex: String, records_per_s: Option<f64> },
    /// Cause: the sink stalls in phase with the checkpoints (every `period_s`), the last
    /// one taking `last_checkpoint_ms`; busy up to `busy_during_flush_ratio` during the
    /// flush, `busy_between_ratio` between (both shown only when both are known).
    FlushesOnCheckpoints {
        vertex: String,
        period_s: i64,
        last_checkpoint_ms: Option<f64>,
        busy_during_flush_ratio: Option<f64>,
        busy_between_ratio: Option<f64>,
    },
    /// Fix: flush by size and time between checkpoints.
    FlushBySize { vertex: String },
    /// Fix: look at the destination's write throughput during the flush.
    DestinationThroughput,
    /// Not the fix: unaligned checkpoints.
    NotUnalignedCheckpoints,
    /// Not the fix: checkpoints as the finding.
    NotCheckpoints,
    /// Summary: the sink stalls the job during every checkpoint.
    FlushSummary { vertex: String, period_s: i64 },
}
