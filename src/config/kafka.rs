//! `[kafka]`: which consumer group and topics belong to which Flink job, and retention.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Millis;

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
