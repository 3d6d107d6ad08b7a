//! `[service]`: from Alertmanager alerts to diagnoses.

use serde::{Deserialize, Serialize};

use super::Millis;

/// From Alertmanager alerts to diagnoses.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ServiceConfig {
    /// Alert label naming the Flink job id (preferred). Default `job_id`.
    pub job_id_label: String,
    /// Alert label naming the Flink job (as the reporter writes it). Default `job_name`.
    pub job_name_label: String,
    /// Alerts and webhooks for one job within this window give one diagnosis. Default 10s.
    pub coalesce: Millis,
    /// While the metrics backend fails, retry for this long, then post "could not
    /// diagnose". Default 5m.
    pub diagnose_retry_for: Millis,
    /// Diagnoses run at once. Default 4.
    pub concurrency: usize,
    /// A weak verdict (no finding, confidence below high, a ratio within 4 points of its
    /// threshold) is diagnosed once more this long after, and the posted messages are
    /// updated in place if it changed (an alert often arrives while Flink's 60 s averages
    /// still settle). `0s`: never. Default 1m.
    pub rediagnose_weak_after: Millis,
    /// Post a short "resolved" follow-up when a group resolves. Default true.
    pub notify_resolved: bool,
    /// Alerts with these alertnames are culprit's own and are ignored (no loops). Default
    /// `["FlinkBackpressureCulprit"]`.
    pub ignore_alertnames: Vec<String>,
    /// Most Flink jobs one webhook may ask to diagnose; the others are left out (logged,
    /// counted, and said in the answer). Default 50.
    pub max_jobs_per_webhook: usize,
    /// The alerts culprit diagnoses, by alertname; any other alert in a webhook is
    /// answered 2xx, counted and logged, and never diagnosed or posted (a route by
    /// namespace also brings Kubernetes alerts with a `job_name` label). Empty: every
    /// alert with a job label. Default: the alerts of the shipped rules
    /// (`deploy/prometheus/flink-backpressure.rules.yml`).
    pub alertnames: Vec<String>,
}

/// The alertnames of the shipped Prometheus rules (`deploy/prometheus/`).
pub const SHIPPED_ALERTNAMES: [&str; 3] = ["FlinkJobBackpressured", "FlinkTaskBackpressured", "FlinkCheckpointSlow"];

impl Default for ServiceConfig {
    fn default() -> Self {
        ServiceConfig {
            job_id_label: "job_id".into(),
            job_name_label: "job_name".into(),
            coalesce: Millis::from_secs(10),
            diagnose_retry_for: Millis::from_secs(300),
            concurrency: 4,
            rediagnose_weak_after: Millis::from_secs(60),
            notify_resolved: true,
            ignore_alertnames: vec!["FlinkBackpressureCulprit".into()],
            max_jobs_per_webhook: 50,
            alertnames: SHIPPED_ALERTNAMES.iter().map(|s| s.to_string()).collect(),
        }
    }
}

impl ServiceConfig {
    pub(super) fn validate(&self, problems: &mut Vec<String>) {
        if self.max_jobs_per_webhook == 0 {
            problems.push("service.max_jobs_per_webhook must be at least 1".into());
        }
    }
}
