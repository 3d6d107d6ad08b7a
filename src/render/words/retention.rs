//! Words of [`RetentionFact`].

use std::fmt::{self, Formatter};

use super::numbers::{human_bytes, human_secs, num};
use crate::model::facts::retention::{LagEstimate, Measured, Position, RetentionFact, Rules};

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
            "Already losing data on {topic}: the consumer's position is below the log start offset ({}). {SILENT_RESET}",
            Words(measured)
        ),
        RetentionFact::AtRiskLagAtRetention { topic, lag_s, retention_s, rules, measured } => write!(
            f,
            "At risk of losing data on {topic}: the lag, estimated at {} from the produce rate ({}), has reached the retention ({}, {}). No committed offset and log start offset say whether the consumer is still in the log. {SILENT_LOSS}",
            human_secs(*lag_s),
            Words(measured),
            human_secs(*retention_s),
            RulesWords(rules)
        ),
        RetentionFact::FallsOutByLag { topic, time_to_loss_s, lag_s, lag_growth, retention_s, rules, measured } => {
            write!(
                f,
                "{topic} is at risk of falling out of retention in {}: the oldest unconsumed record is an estimated {} old and ages {} s per s against a retention of {} ({}; {}). {SILENT_LOSS}",
                human_secs(*time_to_loss_s),
                human_secs(*lag_s),
                lag_growth.map(|g| format!("{g:.2}")).unwrap_or_else(|| "an unknown number of".into()),
                human_secs(*retention_s),
                RulesWords(rules),
                Words(measured)
            )
        }
        RetentionFact::FallsOutBySize { .. } | RetentionFact::ImplausiblePastSize { .. } => size_words(fact, f),
        RetentionFact::Compacted { topic, rules, retention_s, lag_s } => {
            write!(f, "{topic} is compacted ({}): records go by key, never by age or size", RulesWords(rules))?;
            match (retention_s, lag_s) {
                (Some(r), Some(l)) => write!(
                    f,
                    ", so a lag of about {} against its retention.ms of {} loses nothing",
                    human_secs(*l),
                    human_secs(*r)
                )?,
                (Some(r), None) => write!(f, ", so its retention.ms of {} does not apply", human_secs(*r))?,
                _ => {}
            }
            write!(f, "; only a consumer position below the log start would lose data.")
        }
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

/// Words of the facts on `retention.bytes`.
fn size_words(fact: &RetentionFact, f: &mut Formatter<'_>) -> fmt::Result {
    match fact {
        RetentionFact::FallsOutBySize {
            topic,
            time_to_loss_s,
            lag_records,
            capacity_records,
            retention_bytes,
            bytes_per_record,
            rules,
            measured,
        } if *time_to_loss_s <= 0.0 => write!(
            f,
            "At risk of losing data on {topic}: the lag ({} records) has reached the {} records that retention.bytes ({} per partition) holds at {} per record ({}; {}), and no log start offset says whether the consumer is still in the log. {SILENT_LOSS}",
            num(*lag_records),
            num(*capacity_records),
            human_bytes(*retention_bytes),
            human_bytes(*bytes_per_record),
            RulesWords(rules),
            Words(measured)
        ),
        RetentionFact::FallsOutBySize {
            topic,
            time_to_loss_s,
            lag_records,
            capacity_records,
            retention_bytes,
            bytes_per_record,
            rules,
            measured,
        } => write!(
            f,
            "{topic} is at risk of falling out of retention in {}: the lag ({} records) grows towards the {} records that retention.bytes ({} per partition) holds at {} per record ({}; {}). {SILENT_LOSS}",
            human_secs(*time_to_loss_s),
            num(*lag_records),
            num(*capacity_records),
            human_bytes(*retention_bytes),
            human_bytes(*bytes_per_record),
            RulesWords(rules),
            Words(measured)
        ),
        RetentionFact::ImplausiblePastSize {
            topic,
            partitions,
            max_lag_records,
            capacity_records,
            retention_bytes,
            min_room_records,
        } => write!(
            f,
            "The lag of up to {} records on {} is past the {} records that retention.bytes ({} per partition) holds by the partition's size, while the position is still at least {} records above the log start: the estimate is contradicted by the offsets and not used; loss is judged from the offsets.",
            num(*max_lag_records),
            on(topic, partitions),
            num(*capacity_records),
            human_bytes(*retention_bytes),
            num(*min_room_records)
        ),
        _ => Ok(()),
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
            Measured::BelowLogStart { partition, position, committed_offset, log_start_offset } => write!(
                f,
                "partition {partition}: {} {} < log start {}",
                match position {
                    Position::Committed => "committed offset",
                    Position::LogEndLessLag => "position (log end − lag)",
                },
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

/// `cleanup.policy=delete from KMinion's topic configuration, retention.ms from culprit's
/// configuration`; one source named once when both came from it.
struct RulesWords<'a>(&'a Rules);

impl fmt::Display for RulesWords<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let r = self.0;
        let retention_from = Some(r.retention_from.as_str()).filter(|s| !s.is_empty());
        match (r.policy, r.policy_from.as_deref()) {
            (Some(p), Some(from)) if retention_from == Some(from) => {
                return write!(f, "cleanup.policy={} and retention.ms from {}", p.as_str(), origin(from));
            }
            (Some(p), Some(from)) => write!(f, "cleanup.policy={} from {}", p.as_str(), origin(from))?,
            (Some(p), None) => write!(f, "cleanup.policy={}", p.as_str())?,
            (None, _) => write!(f, "cleanup.policy unknown, Kafka's default delete assumed")?,
        }
        if let Some(from) = retention_from {
            write!(f, ", retention.ms from {}", origin(from))?;
        }
        Ok(())
    }
}

/// Where a topic setting came from, in words (the collector's `from` values).
fn origin(from: &str) -> &str {
    match from {
        "kminion" => "KMinion's topic configuration",
        "config" => "culprit's configuration",
        "broker default" => "the configured broker default",
        other => other,
    }
}
