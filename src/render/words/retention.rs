//! Words of [`RetentionFact`].

use std::fmt::{self, Formatter};

use super::numbers::{human_secs, num};
use crate::model::facts::retention::{LagEstimate, Measured, RetentionFact};

const SILENT_RESET: &str = "A Kafka source that falls off the log resets silently to the earliest retained offset.";
const SILENT_LOSS: &str = "The loss would be silent: the source resets to the earliest retained offset.";

pub(super) fn word(fact: &RetentionFact, f: &mut Formatter<'_>) -> fmt::Result {
    match fact {
        RetentionFact::TopicRetentionUnknown { topic } => {
            write!(f, "retention.ms of topic {topic} ([kafka.retention] or KMinion topic info)")
        }
        RetentionFact::SourceRetentionUnknown { vertex } => write!(
            f,
            "retention.ms of the topic that {vertex} reads (set [kafka.retention] and [[kafka.jobs]] topics in the configuration)"
        ),
        RetentionFact::LosingBelowLogStart { topic, measured } => write!(
            f,
            "Already losing data on {topic}: the consumer's committed offset is below the log start ({}). {SILENT_RESET}",
            Words(measured)
        ),
        RetentionFact::LosingLagAtRetention { topic, lag_s, retention_s } => write!(
            f,
            "Already losing data on {topic}: the lag ({}) has reached the retention ({}). {SILENT_RESET}",
            human_secs(*lag_s),
            human_secs(*retention_s)
        ),
        RetentionFact::FallsOutByLag { topic, time_to_loss_s, lag_s, lag_growth, retention_s, measured } => write!(
            f,
            "{topic} falls out of retention in {}: the oldest unconsumed record is {} old and ages {} s per s against a retention of {} ({}). {SILENT_LOSS}",
            human_secs(*time_to_loss_s),
            human_secs(*lag_s),
            lag_growth.map(|g| format!("{g:.2}")).unwrap_or_else(|| "an unknown number of".into()),
            human_secs(*retention_s),
            Words(measured)
        ),
        RetentionFact::FallsOutByOffsets { topic, time_to_loss_s, measured } => write!(
            f,
            "{topic} falls out of retention in {}: the log start advances faster than the consumer ({}). {SILENT_LOSS}",
            human_secs(time_to_loss_s.max(0.0)),
            Words(measured)
        ),
        RetentionFact::CheckpointOlderThanRoom { checkpoint_age_s, room_s, topic } => write!(
            f,
            "The last completed checkpoint is {} old, more than the {} of lag {topic} can still hold: a restart now would resume from offsets already out of retention.",
            human_secs(*checkpoint_age_s),
            human_secs(room_s.max(0.0)),
        ),
        RetentionFact::ImplausiblePastRetention {
            exporter,
            estimate,
            max_lag_s,
            topic,
            partitions,
            retention_s,
            min_room_records,
        } => write!(
            f,
            "{exporter} reports a lag ({}) of up to {} on {}, past the {} retention, while the committed offsets are still at least {} records above the log start: the estimate is implausible and not used; loss is judged from the offsets.",
            estimate_words(*estimate),
            human_secs(*max_lag_s),
            on(topic, partitions),
            human_secs(*retention_s),
            num(*min_room_records)
        ),
        RetentionFact::ImplausibleAgesTooFast { exporter, estimate, max_lag_s, topic, partitions, max_growth } => {
            write!(
                f,
                "{exporter} reports a lag ({}) of up to {} on {} that grows {max_growth:.1} s per s, faster than the age of a record can: the estimate is implausible and not used.",
                estimate_words(*estimate),
                human_secs(*max_lag_s),
                on(topic, partitions),
            )
        }
    }
}

struct Words<'a>(&'a Measured);

impl fmt::Display for Words<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self.0 {
            Measured::SourceLag { pending_records, produced_records_per_s, consumed_records_per_s } => write!(
                f,
                "pendingRecords {} at {} records/s produced ({} consumed)",
                num(*pending_records),
                num(*produced_records_per_s),
                num(*consumed_records_per_s)
            ),
            Measured::Partition { partition, consumer_group, exporter } => {
                write!(f, "partition {partition} of consumer group {consumer_group} ({exporter})")
            }
            Measured::BelowLogStart { partition, committed_offset, log_start_offset } => write!(
                f,
                "partition {partition}: committed offset {} < log start {}",
                num(*committed_offset),
                num(*log_start_offset)
            ),
        }
    }
}

fn estimate_words(e: LagEstimate) -> &'static str {
    match e {
        LagEstimate::InSeconds => "in seconds",
        LagEstimate::RecordsOverProduceRate => "records behind ÷ produce rate",
    }
}

/// `orders (partition 3)`, `orders (partitions 0, 2)`.
fn on(topic: &str, partitions: &[String]) -> String {
    format!("{topic} (partition{} {})", if partitions.len() > 1 { "s" } else { "" }, partitions.join(", "))
}
