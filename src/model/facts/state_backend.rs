//! Facts of step `state_backend` (`crate::diagnose::steps::state_backend`): RocksDB's
//! readings of the culprit and the signs of write stalls they show, or a stuck watermark
//! that makes state grow by itself.
//!
//! Ratios are 0..1 (`_ratio`), bytes and bytes/s as named, times in s.

/// One sign of RocksDB write stalls, with the reading behind it (the highest of the
/// culprit's subtasks).
#[derive(Debug, Clone, PartialEq)]
pub enum StallSign {
    /// `is_write_stopped` reached 1.
    WriteStopped,
    /// `actual_delayed_write_rate` above 0.
    DelayedWrites { bytes_per_s: f64 },
    /// `stall_micros` per second above the stall threshold.
    Stalled { stall_micros_per_s: f64 },
    /// `compaction_pending` set in this share of the samples.
    CompactionPending { samples_ratio: f64 },
    /// `mem_table_flush_pending` set in this share of the samples.
    FlushPending { samples_ratio: f64 },
    /// Pending compaction bytes over, or heading for, the soft limit.
    PendingCompaction { bytes: f64, growth_bytes_per_s: f64, soft_limit_bytes: f64 },
}

/// The fixes for RocksDB write stalls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateBackendFix {
    /// More background threads for flushes and compaction.
    MoreThreads,
    /// More memory for write buffers.
    MoreWriteBuffers,
    /// A faster local disk.
    FasterDisk,
    /// Less state to write (TTL, incremental checkpoints).
    LessState,
}

#[derive(Debug, Clone, PartialEq)]
pub enum StateBackendFact {
    /// Clear: no keyed input, no RocksDB metrics.
    Stateless { vertex: String },
    /// Clear: the state is in `backend` (from the checkpoint config), not RocksDB.
    NotRocksDb { vertex: String, backend: String },
    /// No data: stateful, without RocksDB native metrics; `options` turn them on.
    NoNativeMetrics { vertex: String, options: &'static [&'static str] },
    /// Clear: RocksDB's readings show no stall (each unknown when absent).
    NoStall {
        vertex: String,
        write_stopped: Option<f64>,
        delayed_write_bytes_per_s: Option<f64>,
        stall_micros_per_s: Option<f64>,
        compaction_pending_ratio: Option<f64>,
        pending_compaction_bytes: Option<f64>,
    },
    /// Hit (detail): RocksDB stalls writes, by these signs.
    Stalls { vertex: String, signs: Vec<StallSign> },
    /// Cause: RocksDB cannot keep up with the writes.
    StallCause { vertex: String, signs: Vec<StallSign> },
    /// Fix for write stalls.
    Fix(StateBackendFix),
    /// Summary: the RocksDB state backend stalls writes.
    StallSummary { vertex: String },
    /// Hit (detail): the input watermark has been flat for `flat_s` while records flow.
    WatermarkStuck { vertex: String, flat_s: f64 },
    /// Cause: event time `behind_s` behind wall time (0 when ahead), flat for `flat_s`.
    WatermarkBehind { vertex: String, behind_s: f64, flat_s: f64 },
    /// Fix: mark idle inputs idle.
    MarkIdleInputs,
    /// Not the fix: tuning the state backend.
    NotTheStateBackend,
    /// Summary: the watermark is stuck.
    WatermarkSummary { vertex: String },
    /// Hit (detail): the input watermark has read `Long.MIN_VALUE` ("No Watermark") for
    /// `for_s` while records flow: no watermark has arrived.
    NoWatermark { vertex: String, for_s: f64 },
    /// Cause: an input of `vertex` never sent a watermark; `sources` feed it.
    NoWatermarkCause { vertex: String, sources: Vec<String> },
    /// Fix: at most as many source subtasks as partitions (splits), so every one reads.
    SourceSubtasksToPartitions { sources: Vec<String> },
    /// Not the fix: RocksDB's stalls (`signs`) are a symptom of the state that piles up.
    StallsAreASymptom { vertex: String, signs: Vec<StallSign> },
    /// Summary: no watermark arrives.
    NoWatermarkSummary { vertex: String },
}
