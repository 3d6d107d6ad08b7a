//! `[prometheus]`: the PromQL-compatible backend, and the check every backend URL passes.

use serde::{Deserialize, Serialize};

use super::{HttpAuth, Millis, check_backend_url};

/// A Prometheus-compatible query API (Prometheus, Thanos, Mimir, Cortex, VictoriaMetrics).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PrometheusConfig {
    /// Base URL including any path prefix, without `/api/v1`:
    /// `http://prometheus:9090`, `https://mimir.example.com/prometheus`.
    pub url: String,
    /// Per-request timeout, also sent as the `timeout` parameter. Default 10s.
    #[serde(default = "default_prometheus_timeout")]
    pub timeout: Millis,
    /// Total time one query may take with its retries (503, other 5xx, network errors).
    /// Default 30s.
    #[serde(default = "default_prometheus_deadline")]
    pub deadline: Millis,
    /// Optional authentication.
    #[serde(default)]
    pub auth: Option<HttpAuth>,
    /// Tenant for multi-tenant stores, sent as `X-Scope-OrgID` (Mimir, Cortex, Loki-style).
    #[serde(default)]
    pub tenant: Option<String>,
    /// The largest answer read, bytes; a larger one is asked again in smaller pieces.
    /// Default [`PROMETHEUS_MAX_ANSWER_BYTES`] (64 MiB).
    #[serde(default = "default_prometheus_max_answer_bytes")]
    pub max_answer_bytes: usize,
    /// The bytes of answers the process reads at once, across every diagnosis: an answer
    /// takes its bytes as they arrive (at once by its `Content-Length`) and gives them back
    /// when parsed; one that cannot get them within `timeout` is asked again in smaller
    /// pieces. At least `max_answer_bytes`. Default
    /// [`PROMETHEUS_MAX_ANSWER_BYTES_IN_FLIGHT`] (128 MiB).
    #[serde(default = "default_prometheus_max_answer_bytes_in_flight")]
    pub max_answer_bytes_in_flight: usize,
    /// Queries culprit has in flight at this backend at most, over every diagnosis at once:
    /// in an alert storm the queries wait in culprit, not in the shared Prometheus (which
    /// runs 20 at once for all its users by default, `--query.max-concurrency`). A query
    /// waits its turn (where queries are retried, as in the CLI, the wait counts against
    /// `deadline`). `/metrics` shows the queries in flight and waiting. Default 8.
    #[serde(default = "default_prometheus_max_concurrency")]
    pub max_concurrency: usize,
}

/// The default of `prometheus.max_concurrency`: 8, under half of Prometheus' own 20
/// (`--query.max-concurrency`), so that culprit in a storm leaves the dashboards and rules
/// sharing the server most of it; a diagnosis' rounds ask at most a few queries at once.
pub const PROMETHEUS_MAX_CONCURRENCY: usize = 8;

fn default_prometheus_max_concurrency() -> usize {
    PROMETHEUS_MAX_CONCURRENCY
}

/// The default of `prometheus.max_answer_bytes_in_flight`: 128 MiB, two answers at the
/// default cap at once. What they take parsed is about their size again or less (typed
/// series; `examples/prom_answer_bench.rs`), so with the process' own some 60 MB this fits
/// the shipped Deployment's 512 MiB limit with room for the diagnoses' snapshots
/// (`deploy/kubernetes/deployment.yaml` gives the arithmetic).
pub const PROMETHEUS_MAX_ANSWER_BYTES_IN_FLIGHT: usize = 128 * 1024 * 1024;

fn default_prometheus_max_answer_bytes_in_flight() -> usize {
    PROMETHEUS_MAX_ANSWER_BYTES_IN_FLIGHT
}

/// The default of `prometheus.max_answer_bytes`: 64 MiB, some 30,000 series of 60 points
/// with Flink's labels. A diagnosis' answers are far smaller (its queries aggregate); one
/// this large is a query that selects too much.
pub const PROMETHEUS_MAX_ANSWER_BYTES: usize = 64 * 1024 * 1024;

fn default_prometheus_max_answer_bytes() -> usize {
    PROMETHEUS_MAX_ANSWER_BYTES
}

fn default_prometheus_timeout() -> Millis {
    Millis::from_secs(10)
}

fn default_prometheus_deadline() -> Millis {
    Millis::from_secs(30)
}

impl PrometheusConfig {
    pub(super) fn validate(&self, problems: &mut Vec<String>) {
        check_backend_url("prometheus.url", &self.url, "[prometheus.auth]", problems);
        if self.timeout.0 <= 0 || self.deadline < self.timeout {
            problems.push(format!(
                "prometheus.timeout ({} s) must be positive and at most prometheus.deadline ({} s); the defaults are 10 s and 30 s: set both when lowering the deadline",
                self.timeout.0 as f64 / 1000.0,
                self.deadline.0 as f64 / 1000.0
            ));
        }
        if self.max_answer_bytes < 1024 {
            problems.push(format!(
                "prometheus.max_answer_bytes ({}) must be at least 1024: no answer would fit",
                self.max_answer_bytes
            ));
        }
        if self.max_concurrency == 0 {
            problems.push("prometheus.max_concurrency must be at least 1 (0 would never query)".into());
        }
        if self.max_answer_bytes_in_flight < self.max_answer_bytes {
            problems.push(format!(
                "prometheus.max_answer_bytes_in_flight ({}) must be at least prometheus.max_answer_bytes ({}): an answer that size could never be held",
                self.max_answer_bytes_in_flight, self.max_answer_bytes
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::*;

    #[test]
    fn answer_bytes_in_flight_default_to_two_capped_answers_and_are_at_least_one() {
        let c = Config::from_toml("[prometheus]\nurl = \"http://p:9090\"\n", "c.toml").unwrap();
        let p = c.prometheus.as_ref().unwrap();
        // 128 MiB = 2 × 64 MiB.
        assert_eq!((p.max_answer_bytes, p.max_answer_bytes_in_flight), (67_108_864, 134_217_728));
        let e = Config::from_toml(
            "[prometheus]\nurl = \"http://p:9090\"\nmax_answer_bytes = 2048\nmax_answer_bytes_in_flight = 2047\n",
            "c.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains(
                "prometheus.max_answer_bytes_in_flight (2047) must be at least prometheus.max_answer_bytes (2048)"
            ),
            "{e}"
        );
    }
}
