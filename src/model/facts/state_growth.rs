//! Facts of step `state_growth` (`crate::diagnose::steps::state_growth`) and of the hazard
//! `checkpoint_timeout`: state that only grows, with its numbers, and checkpoint durations
//! growing towards their timeout.
//!
//! Bytes and bytes/s as named, shares of an hour as `_per_hour_ratio` (0.18: 18 % per
//! hour), times in s or ms as named.

/// Where a state size was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeSource {
    /// RocksDB `estimate-live-data-size` of the culprit, summed over its subtasks and
    /// column families.
    LiveData,
    /// RocksDB `total-sst-files-size` of the culprit (where the live data size is not
    /// reported), summed over its subtasks and column families.
    SstFiles,
    /// The job's `lastCheckpointFullSize`: every vertex's state.
    CheckpointFullSize,
    /// The job's `lastCheckpointSize` (where the full size is not reported): every
    /// vertex's state, or the increment with incremental checkpoints.
    CheckpointSize,
}

impl SizeSource {
    /// True for the job's checkpoint sizes (all vertices), false for the culprit's own.
    pub fn is_job_wide(self) -> bool {
        matches!(self, SizeSource::CheckpointFullSize | SizeSource::CheckpointSize)
    }
}

/// A state size over the trend lookback, fitted by least squares.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Growth {
    pub source: SizeSource,
    /// The newest size, bytes.
    pub bytes_now: f64,
    /// The fit's slope, bytes/s.
    pub bytes_per_s: f64,
    /// The slope over an hour as a share of `bytes_now`.
    pub per_hour_ratio: f64,
    /// Samples fitted.
    pub samples: u32,
    /// Span of the samples, s.
    pub span_s: f64,
    /// Share of the movement between consecutive samples that was rises (by size: the sum
    /// of the rises over the sum of rises and falls).
    pub rising_ratio: f64,
    /// Whether it only grows (the step's rule).
    pub only_grows: bool,
}

impl Growth {
    /// Bytes per hour.
    pub fn bytes_per_hour(&self) -> f64 {
        self.bytes_per_s * 3600.0
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum StateGrowthFact {
    /// Clear: the culprit holds no state the metrics or the graph show.
    Stateless { vertex: String },
    /// Clear: too few samples of the state's size to call it growing (`samples`, at least
    /// `needed`).
    TooFewSamples { source: SizeSource, samples: u32, needed: u32 },
    /// Clear: the state does not only grow (flat, or cleaned up: it falls between rises).
    /// `short_of_s`: it rises as growth does, but over a span shorter than this minimum (s).
    NotGrowing { vertex: String, growth: Growth, short_of_s: Option<f64> },
    /// Clear: the culprit is stateful, but the job's growing state is not known to be its
    /// own (other vertices hold state, no RocksDB size of its own, or it is a sink).
    WhoseUnknown { vertex: String },
    /// No data: no state size (neither checkpoint sizes nor RocksDB's).
    NoSizes { vertex: String },
    /// Hit (detail): the culprit's state only grows.
    Grows { vertex: String, growth: Growth, keys_per_s: Option<f64> },
    /// Cause: state that only grows makes every access and checkpoint slower.
    GrowthCause { vertex: String, growth: Growth, rocksdb: bool },
    /// Fix: a state TTL; `ttl_hours` holds the state near its size now at this rate.
    Ttl { bytes_per_hour: f64, bytes_now: f64, ttl_hours: f64 },
    /// Fix (RocksDB): expired entries removed in compaction.
    CompactionFilter,
    /// Not the fix: more RocksDB memory, alone.
    NotMoreMemory { bytes_per_hour: f64 },
    /// Summary: the culprit's state only grows.
    Summary { vertex: String, bytes_per_hour: f64 },
    /// Summary tail when nothing is backpressured: `vertex`'s state only grows.
    GrowsWithoutBackpressure { vertex: String, growth: Growth },
    /// Advice: state grows, but not the culprit's (or not known to be).
    GrowsElsewhere { culprit: String, growth: Growth },
    /// Hazard: checkpoint durations grow towards the timeout.
    TimeoutAhead {
        duration_ms: f64,
        growth_ms_per_s: f64,
        timeout_ms: i64,
        time_to_timeout_s: f64,
        /// The state's growth, when it grows too.
        state_bytes_per_hour: Option<f64>,
    },
}
