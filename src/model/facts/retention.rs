//! Facts of the hazards `retention` and `checkpoints_stalled`
//! (`crate::diagnose::steps::retention`): can the log upstream hold the lag?

pub use crate::model::snapshot::CleanupPolicy;

/// Where the consumer's position in a partition came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Position {
    /// The group's committed offset (kafka_exporter, kafka-lag-exporter, Redpanda, Flink).
    Committed,
    /// The log end less the lag in records (KMinion, which exports no committed offset).
    LogEndLessLag,
}

/// The rules a topic's records go by, and where each came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Rules {
    /// `cleanup.policy`; `None` when unknown (Kafka's default `delete` is then assumed).
    pub policy: Option<CleanupPolicy>,
    /// Where the policy came from (`config`, `kminion`, `broker default`).
    pub policy_from: Option<String>,
    /// Where `retention.ms` came from.
    pub retention_from: String,
}

/// How a topic's exposure was measured.
#[derive(Debug, Clone, PartialEq)]
pub enum Measured {
    /// Flink's own source lag: `pendingRecords` over the produce rate.
    SourceLag { pending_records: f64, produced_records_per_s: f64, consumed_records_per_s: f64 },
    /// A Kafka exporter's lag of one partition.
    Partition { partition: String, consumer_group: String, exporter: String },
    /// The consumer's position in the partition is below its log start.
    BelowLogStart { partition: String, position: Position, committed_offset: f64, log_start_offset: f64 },
}

/// Which lag estimate of an exporter was judged implausible.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LagEstimate {
    /// The exporter's lag in seconds.
    InSeconds,
    /// Records behind divided by the produce rate.
    RecordsOverProduceRate,
}

#[derive(Debug, Clone, PartialEq)]
pub enum RetentionFact {
    /// Missing: the retention of a topic the exporter covers.
    TopicRetentionUnknown { topic: String },
    /// Missing: the retention of the topic a source vertex reads.
    SourceRetentionUnknown { vertex: String },
    /// Hazard: the consumer is already below the log start (evidence of loss).
    LosingBelowLogStart { topic: String, measured: Measured },
    /// Hazard (an estimate): the lag, in time, has reached the retention, and no offsets
    /// say whether the consumer is still in the log.
    AtRiskLagAtRetention { topic: String, lag_s: f64, retention_s: f64, rules: Rules, measured: Measured },
    /// Hazard (an estimate): the oldest unconsumed record ages towards the retention.
    FallsOutByLag {
        topic: String,
        time_to_loss_s: f64,
        lag_s: f64,
        /// Seconds the oldest record ages per second; unknown from one sample.
        lag_growth: Option<f64>,
        retention_s: f64,
        rules: Rules,
        measured: Measured,
    },
    /// Hazard (an estimate): the lag in records grows towards what `retention.bytes` lets
    /// the partition hold (`retention.bytes` ÷ bytes per record now).
    FallsOutBySize {
        topic: String,
        time_to_loss_s: f64,
        lag_records: f64,
        capacity_records: f64,
        retention_bytes: f64,
        bytes_per_record: f64,
        rules: Rules,
        measured: Measured,
    },
    /// Note: a compacted topic (`cleanup.policy=compact`) loses nothing by age or size;
    /// only a position below the log start would, and none is known to be.
    Compacted { topic: String, rules: Rules, retention_s: Option<f64>, lag_s: Option<f64> },
    /// Hazard: the log start advances faster than the consumer (from offsets).
    FallsOutByOffsets { topic: String, time_to_loss_s: f64, measured: Measured },
    /// Hazard `checkpoints_stalled`: the recovery point is older than the lag the log can
    /// still hold.
    CheckpointOlderThanRoom { checkpoint_age_s: f64, room_s: f64, topic: String },
    /// Note: an exporter's lag at or past the retention while the offsets are in the log.
    ImplausiblePastRetention {
        exporter: String,
        estimate: LagEstimate,
        max_lag_s: f64,
        topic: String,
        partitions: Vec<String>,
        retention_s: f64,
        /// Least records between the committed offset and the log start.
        min_room_records: f64,
    },
    /// Note: a lag in records past what `retention.bytes` lets a partition hold (by the
    /// estimate) while the position is still in the log: the estimate is not used.
    ImplausiblePastSize {
        topic: String,
        partitions: Vec<String>,
        max_lag_records: f64,
        /// Least records the partitions hold by the estimate.
        capacity_records: f64,
        retention_bytes: f64,
        /// Least records between the position and the log start.
        min_room_records: f64,
    },
    /// Note: an exporter's lag that ages faster than one second per second.
    ImplausibleAgesTooFast {
        exporter: String,
        estimate: LagEstimate,
        max_lag_s: f64,
        topic: String,
        partitions: Vec<String>,
        max_growth: f64,
    },
}

impl RetentionFact {
    /// Whether the hazard is an estimate (a lag in time or size from the produce rate) and
    /// not evidence: then it is a risk, never "losing data".
    pub fn is_estimate(&self) -> bool {
        matches!(
            self,
            RetentionFact::AtRiskLagAtRetention { .. }
                | RetentionFact::FallsOutByLag { .. }
                | RetentionFact::FallsOutBySize { .. }
        )
    }
}
