//! Facts of step `sources` (`crate::diagnose::steps::sources`): the source readers that
//! feed the culprit — readers without a split, partition skew, watermark alignment holding
//! readers back, idle readers under backpressure, and where the lag is (fetch against
//! emit).
//!
//! Rates in records/s, times in ms or s as named, ratios as plain factors (`_ratio`).

/// How a reader was found to hold no split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoSplitSign {
    /// Its Kafka consumer reports `assigned-partitions` 0, or it reports no partition's
    /// `currentOffset` while the source's other readers do.
    NoPartition,
    /// No split count is reported: it reads no records while the source's other readers
    /// do, and is idle (`sourceIdleTime` over the window, or not reported).
    ReadsNothing,
}

/// The fix of partition skew in the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkewFix {
    /// Spread the topic's keys better (the producer's partitioner, a salted key).
    RebalanceTheKeys,
    /// More partitions, so the hot keys spread over more readers.
    MorePartitions,
    /// `rebalance()` (or `rescale()`) after the source, so the hot reader's records reach
    /// every subtask of the culprit instead of one over the chain.
    RebalanceAfterTheSource,
}

/// The fix of readers held back by watermark alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlignmentFix {
    /// Speed up the reader that holds the group back (its partition's lag, its node).
    SpeedUpTheLaggard,
    /// A larger `maxAllowedWatermarkDrift` in `withWatermarkAlignment(…)`.
    LargerDrift,
    /// `pipeline.watermark-alignment.allow-unaligned-source-splits` for a source whose
    /// readers hold several splits (split-level alignment, FLIP-217).
    UnalignedSplits,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SourcesFact {
    /// Advice when nothing is backpressured: `vertex`'s input watermark never arrived (its
    /// event-time windows and timers never fire) while readers of a source feeding it hold
    /// no split (`ReadersWithoutSplits` says which).
    /// `vertices`: those whose input watermark never arrived, nearest the source first.
    WatermarkHeldBySplits { vertices: Vec<String>, source: String },
    /// Summary tail when nothing is backpressured: the first such vertex, and how many of
    /// the source's readers hold no split.
    WatermarkHeldSummary { vertex: String, source: String, without: usize, readers: usize },
    /// No data: without the job graph, which sources feed the culprit is unknown.
    NoGraph,
    /// No data: the sources feeding the culprit report none of the reader metrics
    /// (`metrics`).
    NotReported { sources: Vec<String>, metrics: Vec<String> },
    /// No data: one sample in the window; nothing is judged on one.
    OneSample,
    /// Clear: the `readers` readers of `sources` (`without_split` of them holding no split)
    /// read evenly (max over median `max_over_median_ratio` against `factor`), none paused
    /// by alignment.
    ReadersEven {
        sources: Vec<String>,
        readers: usize,
        without_split: usize,
        max_over_median_ratio: Option<f64>,
        factor: f64,
    },
    /// `subtasks` of the `readers` readers of `source` hold no split; `splits` the splits
    /// the others hold, when counted.
    ReadersWithoutSplits { source: String, subtasks: Vec<u32>, readers: usize, splits: Option<u32>, sign: NoSplitSign },
    /// Advice: those readers hold no watermark back (it advances, or none is used): they
    /// only take slots.
    WastedSlots { source: String, without: usize, splits: Option<u32> },
    /// Fix: source parallelism at most the splits, or idleness on the watermark strategy.
    ParallelismToSplits { source: String, splits: Option<u32>, readers: usize },
    /// Hit (detail): reader `subtask` of `source` reads `ratio` × the median reader
    /// (`factor` the threshold).
    Skewed {
        source: String,
        subtask: u32,
        reader_records_per_s: f64,
        median_records_per_s: f64,
        ratio: f64,
        factor: f64,
    },
    /// Cause: the skewed reader feeds the culprit's hot subtask over a forward chain
    /// (`chained`: the culprit is the source vertex itself).
    SkewFeedsTheCulprit { source: String, subtask: u32, culprit_subtask_name: String, hot_busy_ratio: f64 },
    /// Fix.
    Skew { fix: SkewFix, source: String, culprit: String },
    /// Not the fix: more parallelism for the culprit; the hot reader still feeds one subtask.
    NotMoreParallelism { vertex: String },
    /// Summary.
    SkewSummary { culprit: String, source: String, subtask: u32 },
    /// Advice: a skewed reader that does not explain the culprit (no forward chain to its
    /// hot subtask, or no hot subtask).
    SkewNotTheCulprit { source: String, subtask: u32, ratio: f64, culprit: String },
    /// Hit (detail): `paused` readers of `source` drift `drift_ms` ahead of their alignment
    /// group (max over them), past `max_drift_ms`, and emit nothing (`sourceIdleTime`).
    AlignmentPaused { source: String, paused: Vec<u32>, drift_ms: f64, max_drift_ms: f64 },
    /// Cause: paused readers' lag grows by `lag_growth_records_per_s` (when known).
    AlignmentHoldsBack { source: String, paused: usize, lag_growth_records_per_s: Option<f64> },
    /// Fix.
    Alignment { fix: AlignmentFix, source: String },
    /// Summary.
    AlignmentSummary { source: String, paused: usize },
    /// Advice: readers of a backpressured source that have emitted nothing for `idle_s`:
    /// no data reaches them; backpressure does not make a reader idle.
    IdleUnderBackpressure { source: String, subtasks: Vec<u32>, idle_s: f64 },
    /// Advice: records are `fetch_lag_ms` old when fetched and spend `in_reader_ms` in the
    /// reader: the lag is before Flink (the producer, the broker, the topic's backlog).
    LagBeforeFlink { source: String, fetch_lag_ms: f64, in_reader_ms: f64 },
    /// Advice: records wait `in_reader_ms` inside the reader after a fetch `fetch_lag_ms`
    /// behind: the reader's handover or the chain after it is slow.
    LagInsideTheReader { source: String, fetch_lag_ms: f64, in_reader_ms: f64 },
}
