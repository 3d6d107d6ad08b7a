//! The Kubernetes containers of a job's TaskManagers, as kube-state-metrics and cAdvisor
//! report them: the memory limit and what the container holds against it, its last
//! termination, its CPU quota and how often the quota throttled it.
//!
//! A TaskManager's `tm_id` on native Kubernetes and under the Flink Kubernetes Operator is
//! its pod's name (Flink's reporter writes `-` as `_`: `model::graph::flink_taskmanager_id`
//! reads it back), which is the `pod` label of both exporters.

use serde::{Deserialize, Serialize};

/// One TaskManager pod's container over the window. Every value is `None` when its
/// exporter has no series for the container (never zero).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PodResources {
    /// The pod's name: the TaskManager's `tm_id`.
    pub pod: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// The container's last termination was `OOMKilled`
    /// (`kube_pod_container_status_last_terminated_reason{reason="OOMKilled"}` = 1 in the
    /// window).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_terminated_oom_killed: Option<bool>,
    /// Restarts of the container inside the window (`kube_pod_container_status_restarts_total`'s
    /// increase), count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarts_in_window: Option<f64>,
    /// Highest `container_memory_working_set_bytes` in the window, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_set_max_bytes: Option<f64>,
    /// `kube_pod_container_resource_limits{resource="memory"}`, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit_bytes: Option<f64>,
    /// `kube_pod_container_resource_limits{resource="cpu"}`, cores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_limit_cores: Option<f64>,
    /// Share of CFS periods the container was throttled in: `rate(container_cpu_cfs_throttled_periods_total)
    /// / rate(container_cpu_cfs_periods_total)` over the window, ratio. `None` without a
    /// CPU limit (no periods: no quota to throttle by).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_throttled_ratio: Option<f64>,
}

impl PodResources {
    /// Working set over the memory limit, when both are known and the limit is set.
    pub fn memory_limit_ratio(&self) -> Option<f64> {
        match (self.working_set_max_bytes, self.memory_limit_bytes) {
            (Some(w), Some(l)) if l > 0.0 => Some(w / l),
            _ => None,
        }
    }

    /// Killed for memory inside the window: the last termination was `OOMKilled` and the
    /// container restarted in the window (an old kill of a container that has run since is
    /// not this window's).
    pub fn oom_killed_in_window(&self) -> Option<bool> {
        let oom = self.last_terminated_oom_killed?;
        Some(oom && self.restarts_in_window.is_none_or(|r| r > 0.0))
    }
}
