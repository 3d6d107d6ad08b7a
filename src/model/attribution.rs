//! What a verdict's culprit is tied to outside its own job: the external system it writes
//! to or reads from, the TaskManager hosts its slow subtasks run on, the Kafka topics it
//! reads. Jobs whose culprits share one of these share a cause
//! ([`crate::model::incident`]). Pure data, set by [`crate::diagnose::attribution`].

use serde::{Deserialize, Serialize};

/// What the culprit is tied to outside its job (added field of `culprit.verdict/v1`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Attribution {
    /// The external system the culprit writes to (a sink) or reads from (a source or a
    /// lookup), as its vertex and operator names say it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<ExternalSystem>,
    /// The hosts (else TaskManager ids) of the culprit's slow subtasks, when one instance
    /// is slow for reasons of its own (`slow_instance`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// The Kafka topics the job reads, when the culprit is a source (`source`,
    /// `source_skew`, `watermark_stall`, `watermark_alignment`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topics: Vec<String>,
}

impl Attribution {
    pub fn is_empty(&self) -> bool {
        self.system.is_none() && self.hosts.is_empty() && self.topics.is_empty()
    }
}

/// An external system named by a vertex: its connector (`elasticsearch`, `jdbc`, `kafka`,
/// …, lower case) and, when the names carry it, its target (an index, table, topic or
/// host, as written).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ExternalSystem {
    pub connector: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Whether the culprit writes to it (a sink) rather than reads from it.
    pub writes: bool,
}
