//! `[kafka]`: which consumer group and topics belong to which Flink job, and retention.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Millis;
pub use crate::model::snapshot::CleanupPolicy;

/// Which Kafka consumer group and topics belong to which Flink job, and topic retention.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct KafkaConfig {
    /// Job → consumer group and topics. Without an entry, a consumer group named like
    /// the job is taken as the job's.
    pub jobs: Vec<KafkaJob>,
    /// `retention.ms` per topic, e.g. `payments = "7d"`. KMinion's `retention_ms` label
    /// is used for topics not listed.
    pub retention: BTreeMap<String, Millis>,
    /// `cleanup.policy` per topic: `"delete"`, `"compact"` or `"compact,delete"`, e.g.
    /// `customers-changelog = "compact"`. A compacted topic (`compact` alone) loses nothing
    /// by age or size. KMinion's `cleanup_policy` label is used for topics not listed.
    pub cleanup_policy: BTreeMap<String, CleanupPolicy>,
    /// `retention.bytes` per topic (bytes per partition; `-1` for unlimited). KMinion's
    /// `retention_bytes` label is used for topics not listed.
    pub retention_bytes: BTreeMap<String, i64>,
    /// The brokers' defaults, for topics with no value above (no topic-level override, and
    /// no KMinion label): `log.retention.ms`, `log.cleanup.policy`, `log.retention.bytes`.
    pub broker_defaults: BrokerDefaults,
}

/// The brokers' topic defaults (`server.properties`), used only for a topic whose own
/// value is neither configured here nor labelled by KMinion.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct BrokerDefaults {
    /// `log.retention.ms` (Kafka's default: 7 days), e.g. `"7d"`.
    pub retention: Option<Millis>,
    /// `log.cleanup.policy` (Kafka's default: `"delete"`).
    pub cleanup_policy: Option<CleanupPolicy>,
    /// `log.retention.bytes` per partition (Kafka's default: `-1`, unlimited).
    pub retention_bytes: Option<i64>,
}

/// One job's Kafka inputs.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KafkaJob {
    /// Job name as Flink shows it, or the job id.
    pub job: String,
    /// Consumer group id the job's Kafka source uses.
    pub consumer_group: Option<String>,
    /// Topics the job reads.
    #[serde(default)]
    pub topics: Vec<String>,
}

impl KafkaConfig {
    /// The entry for a job, by Flink name, sanitized name or id.
    pub fn job(&self, name: &str, id: &str) -> Option<&KafkaJob> {
        let sanitized = crate::model::graph::sanitize_label_value(name);
        self.jobs
            .iter()
            .find(|j| j.job == name || j.job == id || crate::model::graph::sanitize_label_value(&j.job) == sanitized)
    }
}
