//! The Flink Kubernetes Operator's autoscaler, as its own metrics show it: per job vertex
//! the parallelism it sees, the one it recommends, the vertex's true processing rate and
//! load ([`AutoscalerVertex`], collected into the snapshot), and what the verdict makes of
//! them for the culprit ([`AutoscalerView`]).
//!
//! What the operator exports, confirmed in its sources:
//!
//! * `flink-autoscaler/src/main/java/org/apache/flink/autoscaler/metrics/AutoscalerFlinkMetrics.java`
//!   (<https://github.com/apache/flink-kubernetes-operator/blob/main/flink-autoscaler/src/main/java/org/apache/flink/autoscaler/metrics/AutoscalerFlinkMetrics.java>):
//!   under the resource's `AutoScaler` group, per vertex
//!   `addGroup("jobVertexID", jobVertexID.toHexString())` (a key/value group), then one group
//!   per scaling metric with a `Current` gauge, and an `Average` gauge for the metrics that
//!   average. A gauge with nothing evaluated yet reads `Double.NaN`.
//! * `flink-autoscaler/src/main/java/org/apache/flink/autoscaler/metrics/ScalingMetric.java`:
//!   `REPORTED_VERTEX_METRICS` = `LOAD`, `TRUE_PROCESSING_RATE`, `TARGET_DATA_RATE`,
//!   `CATCH_UP_DATA_RATE`, `LAG`, `PARALLELISM`, `RECOMMENDED_PARALLELISM`,
//!   `MAX_PARALLELISM`, `NUM_SOURCE_PARTITIONS`, `SCALE_UP_RATE_THRESHOLD`,
//!   `SCALE_DOWN_RATE_THRESHOLD`, `EXPECTED_PROCESSING_RATE`; `Average` only for `LOAD`,
//!   `TRUE_PROCESSING_RATE`, `TARGET_DATA_RATE` (`calculateAverage`). `LOAD` is the busy-time
//!   ratio (0 idle, 1 fully utilized), `TRUE_PROCESSING_RATE` records/s at full capacity.
//!   `initRecommendedParallelism` sets `RECOMMENDED_PARALLELISM` to `PARALLELISM` before a
//!   cycle decides; `resetRecommendedParallelism` clears it (NaN again).
//! * `docs/content/docs/operations/metrics-logging.md` ("Scope", "Scaling metrics"): the
//!   resource scope's logical scope is `k8soperator.namespace.resource`; labeling reporters
//!   (Prometheus) name a metric from the logical scope and expose the scope variables
//!   `host`, `namespace`, `name` (the operator pod's), `resourcens`, `resourcename`,
//!   `resourcetype` as labels; the table names the gauges
//!   `AutoScaler.jobVertexID.<jobVertexID>.<ScalingMetric>.{Current,Average}`.
//!
//! Hence, through Flink's Prometheus reporter (a key/value group's key is part of the
//! name, its value the label, as for the Kafka source's `topic`/`partition`):
//! `flink_k8soperator_namespace_resource_AutoScaler_jobVertexID_RECOMMENDED_PARALLELISM_Current`
//! with `jobVertexID="<32 hex digits>"`, `resourcens`, `resourcename`, `resourcetype`,
//! `host`, `namespace`, `name`. Not confirmed against a live operator: the docs' own
//! Prometheus example writes `…_AutoScaler_<jobVertexID>_TRUE_PROCESSING_RATE_Current`,
//! which reads as the id inside the name; culprit asks for the names of the catalog
//! (`[metrics] autoscaler_*`, overridable) and joins by the `jobVertexID` label only. The
//! plan's vertex ids are that label's values, so no job id is needed; two resources running
//! the same plan (the same ids) are told apart by `resourcens`/`resourcename`.

use serde::{Deserialize, Serialize};

/// One gauge of the autoscaler for one vertex: a number, or NaN (nothing evaluated yet: a
/// fresh deployment, a metric window not yet full, or just after a rescale).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AutoscalerValue {
    Value(f64),
    NotEvaluated,
}

impl AutoscalerValue {
    /// From a sample: NaN is "not evaluated", anything else a value.
    pub fn of(v: f64) -> Self {
        if v.is_nan() { AutoscalerValue::NotEvaluated } else { AutoscalerValue::Value(v) }
    }

    /// The number, when evaluated.
    pub fn value(self) -> Option<f64> {
        match self {
            AutoscalerValue::Value(v) => Some(v),
            AutoscalerValue::NotEvaluated => None,
        }
    }
}

/// The autoscaler's gauges of one job vertex at the time the diagnosis is about. A field is
/// `None` when the store has no series of that gauge for the vertex.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AutoscalerVertex {
    /// The `jobVertexID` label: the plan's vertex id.
    pub vertex_id: String,
    /// The operator's resource, `<resourcens>/<resourcename>` (the FlinkDeployment or
    /// FlinkSessionJob), when labelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// `PARALLELISM.Current`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallelism: Option<AutoscalerValue>,
    /// `RECOMMENDED_PARALLELISM.Current`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recommended_parallelism: Option<AutoscalerValue>,
    /// `TRUE_PROCESSING_RATE.Current`, records/s at full capacity, the whole vertex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub true_processing_rate: Option<AutoscalerValue>,
    /// `LOAD.Current`, busy-time ratio 0–1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<AutoscalerValue>,
}

/// What the autoscaler recommends for the culprit's vertex, next to culprit's finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AutoscalerStance {
    /// It recommends a higher parallelism for the culprit: it agrees on the bottleneck.
    ScalesUpCulprit,
    /// It recommends a lower parallelism for the culprit (it sees the vertex as having
    /// room; cf. FLINK-38538, its rates and busy time read apart from culprit's).
    ScalesDownCulprit,
    /// It keeps the culprit's parallelism and recommends more for other vertices.
    ScalesUpOthers,
    /// It recommends no change for the culprit nor for any other vertex.
    Holds,
    /// Its `RECOMMENDED_PARALLELISM` for the culprit is NaN: not evaluated yet.
    NotEvaluated,
    /// It reports other vertices of the job, not the culprit's.
    NoCulpritSeries,
    /// Several operator resources report these vertex ids (the same plan deployed twice):
    /// which one is this job's is not known.
    Ambiguous,
}

impl AutoscalerStance {
    pub fn as_str(self) -> &'static str {
        match self {
            AutoscalerStance::ScalesUpCulprit => "scales_up_culprit",
            AutoscalerStance::ScalesDownCulprit => "scales_down_culprit",
            AutoscalerStance::ScalesUpOthers => "scales_up_others",
            AutoscalerStance::Holds => "holds",
            AutoscalerStance::NotEvaluated => "not_evaluated",
            AutoscalerStance::NoCulpritSeries => "no_culprit_series",
            AutoscalerStance::Ambiguous => "ambiguous",
        }
    }
}

/// The verdict's autoscaler section (added field `autoscaler`): present when the store
/// holds the operator's autoscaler gauges for the job's vertices and there is a culprit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AutoscalerView {
    /// The culprit's vertex.
    pub vertex_id: String,
    pub vertex_name: String,
    /// `<resourcens>/<resourcename>` of the operator's resource, when labelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    pub stance: AutoscalerStance,
    /// Does the autoscaler recommend more parallelism for the culprit (`true`), or not
    /// (`false`); `null` when not evaluated or not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agrees: Option<bool>,
    /// Can its next step (the recommended parallelism) relieve the culprit: `false` when
    /// the finding is one more parallelism does not fix (`sink`: the external system is the
    /// limit; `hot_key`, `slow_instance`, `source_skew`: one subtask is); `null` when it
    /// recommends no increase or was not evaluated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_step_helps: Option<bool>,
    /// The culprit's parallelism as the autoscaler sees it (`PARALLELISM`), else the plan's.
    pub parallelism: u32,
    /// Its `RECOMMENDED_PARALLELISM` for the culprit; `null` when not evaluated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recommended_parallelism: Option<u32>,
    /// Its `TRUE_PROCESSING_RATE` for the culprit, records/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub true_processing_rate_per_s: Option<f64>,
    /// culprit's own capacity estimate of the vertex (records/s at full busy time), for
    /// comparison.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_per_s: Option<f64>,
    /// Its `LOAD` for the culprit, ratio.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_ratio: Option<f64>,
    /// Other vertices it recommends more parallelism for: `name: from → to`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scales_up_elsewhere: Vec<AutoscalerStep>,
}

/// One vertex the autoscaler would rescale.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AutoscalerStep {
    pub vertex_id: String,
    pub vertex_name: String,
    pub from: u32,
    pub to: u32,
}
