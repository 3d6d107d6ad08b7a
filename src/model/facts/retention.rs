//! Facts of the hazards `retention` and `checkpoints_stalled`
//! (`crate::diagnose::steps::retention`): can the log upstream hold the lag?

/// How a topic's exposure was measured.
#[derive(Debug, Clone, PartialEq)]
pub enum Measured {
    /// Flink's own source lag: `pendingRecords` over the produce rate.
    SourceLag { pending_records: f64, produced_records_per_s: f64, consumed_records_per_s: f64 },
    /// A Kafka exporter's lag of one partition.
    Partition { partition: String, consumer_group: String, exporter: String },
    /// The partition's committed offset is below its log start.
    BelowLogStart { partition: String, committed_offset: f64, log_start_offset: f64 },
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
    /// Hazard: the consumer is already below the log start.
    LosingBelowLogStart { topic: String, measured: Measured },
    /// Hazard: the lag has reached the retention.
    LosingLagAtRetention { topic: String, lag_s: f64, retention_s: f64 },
    /// Hazard: the oldest unconsumed record ages towards the retention.
    FallsOutByLag {
        topic: String,
        time_to_loss_s: f64,
        lag_s: f64,
        /// Seconds the oldest record ages per second; unknown from one sample.
        lag_growth: Option<f64>,
        retention_s: f64,
        measured: Measured,
    },
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
