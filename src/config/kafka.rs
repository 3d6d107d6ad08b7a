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
    /// `retention.ms` per topic, e.g. `payments = "7d"`; `-1` (quoted or not),
    /// `"unlimited"` or `"infinite"` for no age limit (Kafka's `retention.ms=-1`). KMinion's
    /// `retention_ms` label is used for topics not listed.
    pub retention: BTreeMap<String, RetentionMs>,
    /// `cleanup.policy` per topic: `"delete"`, `"compact"` or `"compact,delete"` (any
    /// order and spacing, as Kafka writes it), e.g.
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
    /// `log.retention.ms` (Kafka's default: 7 days), e.g. `"7d"`; `-1`, `"unlimited"` or
    /// `"infinite"` for no age limit.
    pub retention: Option<RetentionMs>,
    /// `log.cleanup.policy` (Kafka's default: `"delete"`).
    pub cleanup_policy: Option<CleanupPolicy>,
    /// `log.retention.bytes` per partition (Kafka's default: `-1`, unlimited).
    pub retention_bytes: Option<i64>,
}

/// A `retention.ms`: a duration (`"7d"`), or no age limit (`-1`, `"-1"`, `"unlimited"`,
/// `"infinite"`), as Kafka's `retention.ms=-1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetentionMs {
    Limited(Millis),
    Unlimited,
}

impl RetentionMs {
    /// The limit in ms; `None` when there is none.
    pub fn as_ms(self) -> Option<i64> {
        match self {
            RetentionMs::Limited(ms) => Some(ms.as_ms()),
            RetentionMs::Unlimited => None,
        }
    }
}

impl std::str::FromStr for RetentionMs {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "-1" | "unlimited" | "infinite" => Ok(RetentionMs::Unlimited),
            _ => s.parse::<Millis>().map(RetentionMs::Limited).map_err(|e| {
                format!("{e}; a retention is a duration such as \"7d\", or -1 / \"unlimited\" for no age limit")
            }),
        }
    }
}

impl<'de> Deserialize<'de> for RetentionMs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(i64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Number(-1) => Ok(RetentionMs::Unlimited),
            Raw::Number(n) => Err(serde::de::Error::custom(format!(
                "`{n}` is no retention: write a duration such as \"7d\", or -1 / \"unlimited\" for no age limit"
            ))),
            Raw::Text(s) => s.parse().map_err(serde::de::Error::custom),
        }
    }
}

impl Serialize for RetentionMs {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            RetentionMs::Limited(ms) => ms.serialize(s),
            RetentionMs::Unlimited => s.serialize_str("unlimited"),
        }
    }
}

/// A duration string, or `-1` / `"unlimited"` / `"infinite"`.
impl schemars::JsonSchema for RetentionMs {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Retention".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        // Documented as a duration; the field's doc names -1 and "unlimited".
        schemars::json_schema!({ "type": "string", "format": "duration" })
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn kafka(toml_text: &str) -> Result<KafkaConfig, String> {
        toml::from_str(toml_text).map_err(|e| e.message().to_string())
    }

    #[test]
    fn minus_one_quoted_or_not_unlimited_and_infinite_mean_no_age_limit_as_kafkas_retention_ms() {
        let c = kafka(
            "[retention]\na = -1\nb = \"-1\"\nc = \"unlimited\"\nd = \"Infinite\"\ne = \"7d\"\n[broker_defaults]\nretention = -1\n",
        )
        .unwrap();
        let limits: Vec<Option<i64>> = c.retention.values().map(|r| r.as_ms()).collect();
        // 7 d = 7 × 86 400 000 ms.
        assert_eq!(limits, [None, None, None, None, Some(604_800_000)]);
        assert_eq!(c.broker_defaults.retention, Some(RetentionMs::Unlimited));
        assert_eq!(
            kafka("[broker_defaults]\nretention = \"unlimited\"\n").unwrap(),
            KafkaConfig {
                broker_defaults: BrokerDefaults { retention: Some(RetentionMs::Unlimited), ..Default::default() },
                ..Default::default()
            }
        );
    }

    #[test]
    fn a_retention_that_is_neither_a_duration_nor_unlimited_is_refused_saying_what_is_allowed() {
        for bad in ["a = 5", "a = \"forever\"", "a = -2"] {
            let e = kafka(&format!("[retention]\n{bad}\n")).unwrap_err();
            assert!(e.contains("\"unlimited\" for no age limit"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_cleanup_policy_is_read_in_any_order_case_and_spacing() {
        let c = kafka(
            "[cleanup_policy]\na = \"delete,compact\"\nb = \"compact, delete\"\nc = \" Compact \"\n[broker_defaults]\ncleanup_policy = \"delete , compact\"\n",
        )
        .unwrap();
        let policies: Vec<CleanupPolicy> = c.cleanup_policy.values().copied().collect();
        assert_eq!(policies, [CleanupPolicy::CompactDelete, CleanupPolicy::CompactDelete, CleanupPolicy::Compact]);
        assert_eq!(c.broker_defaults.cleanup_policy, Some(CleanupPolicy::CompactDelete));
        let e = kafka("[cleanup_policy]\na = \"delete,archive\"\n").unwrap_err();
        assert!(e.contains("is no cleanup.policy"), "{e}");
    }
}
