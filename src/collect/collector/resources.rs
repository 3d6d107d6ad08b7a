//! The job's TaskManagers' memory and CPU: heap and old-generation GC from round 3's
//! answers, and, where kube-state-metrics and cAdvisor are in the same store, their pods'
//! containers (memory limit, working set, OOM kills, CFS throttling), asked in round 4 as
//! six queries whatever the job's size, for the pods named like round 3's TaskManagers.
//!
//! Names and labels as the exporters document them: kube-state-metrics
//! `docs/metrics/workload/pod-metrics.md` (`kube_pod_container_status_last_terminated_reason`
//! with `reason`, `kube_pod_container_status_restarts_total`,
//! `kube_pod_container_resource_limits` with `resource` and `unit`; labels `namespace`,
//! `pod`, `container`) and cAdvisor `docs/storage/prometheus.md`
//! (`container_memory_working_set_bytes`, `container_cpu_cfs_periods_total`,
//! `container_cpu_cfs_throttled_periods_total`; the kubelet adds `namespace`, `pod`,
//! `container`).

use std::collections::{BTreeMap, BTreeSet};

use super::assemble::{GC_PER_COLLECTOR, gc_rate_per_taskmanager};
use super::rounds::{HEAP_MAX, HEAP_USED, Scope, over_time};
use crate::collect::query::{Agg, Aggregation, OverTime, Query, QueryResult, ResultSeries, Selector};
use crate::model::catalog::{MetricCatalog, labels as l};
use crate::model::graph::flink_taskmanager_id;
use crate::model::resources::PodResources;
use crate::model::snapshot::TaskManagerMetrics;

/// Round 4's container answers, by name.
pub(super) const OOM: &str = "kube_last_terminated_oom";
pub(super) const RESTARTS: &str = "kube_restarts";
pub(super) const LIMITS: &str = "kube_resource_limits";
pub(super) const WORKING_SET: &str = "container_working_set";
pub(super) const THROTTLED: &str = "container_cfs_throttled";
pub(super) const PERIODS: &str = "container_cfs_periods";

/// The pod names of the TaskManagers round 3 saw (`tm_id` read back: on Kubernetes the
/// pod's name), sorted, each once.
pub(super) fn taskmanager_pods(answers: &[&QueryResult]) -> Vec<String> {
    let mut pods: BTreeSet<String> = BTreeSet::new();
    for result in answers {
        for s in result.iter() {
            let tm = flink_taskmanager_id(s.label(l::TM_ID));
            if !tm.is_empty() {
                pods.insert(tm);
            }
        }
    }
    pods.into_iter().collect()
}

/// Round 4's six container queries for `pods`: none without a TaskManager to join to.
pub(super) fn container_queries(s: &Scope<'_>, pods: &[String]) -> Vec<(String, Query)> {
    if pods.is_empty() {
        return Vec::new();
    }
    let cat = s.cat;
    // The pods as the reporter sanitized their names into `tm_id` (`lab_tm_1` for pod
    // `lab-tm-1`): matched in any form the filter maps to it.
    let sanitized: Vec<String> = pods.iter().map(|p| crate::model::graph::sanitize_label_value(p)).collect();
    let of = |m: &str| Selector::metric(m).with_sanitized_one_of(l::POD, &sanitized);
    let by = |agg: Agg, labels: &[&str]| Some(Aggregation::new(agg, labels));
    let per_container = [l::NAMESPACE, l::POD, l::CONTAINER];
    let per_resource = [l::NAMESPACE, l::POD, l::CONTAINER, l::RESOURCE];
    let q = |sel: Selector, func: OverTime, agg: Option<Aggregation>| over_time(sel, func, &s.window, agg);
    vec![
        (
            OOM.to_string(),
            q(
                of(&cat.kube_last_terminated_reason).with(l::REASON, "OOMKilled"),
                OverTime::Max,
                by(Agg::Max, &per_container),
            ),
        ),
        (RESTARTS.to_string(), q(of(&cat.kube_restarts), OverTime::Rate, by(Agg::Max, &per_container))),
        (LIMITS.to_string(), q(of(&cat.kube_resource_limits), OverTime::Max, by(Agg::Max, &per_resource))),
        (WORKING_SET.to_string(), q(of(&cat.container_working_set), OverTime::Max, by(Agg::Max, &per_container))),
        (
            THROTTLED.to_string(),
            q(of(&cat.container_cfs_throttled_periods), OverTime::Rate, by(Agg::Max, &per_container)),
        ),
        (PERIODS.to_string(), q(of(&cat.container_cfs_periods), OverTime::Rate, by(Agg::Max, &per_container))),
    ]
}

/// A container of a TaskManager's pod: the pause container (`POD`) and the pod-level
/// cgroup (no `container`) are not.
fn tm_container(s: &ResultSeries) -> bool {
    !matches!(s.label(l::CONTAINER), "" | "POD")
}

fn finite(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

/// Each pod's container from round 4's answers (`window_s`: the window's length, for the
/// restarts' increase). A pod with several containers keeps Flink's
/// (`flink-main-container`, the name native Kubernetes and the operator give it), else the
/// first by name.
pub(super) fn assemble_pods(answers: &super::Answers, window_s: f64) -> Vec<PodResources> {
    let r = |name: &str| answers.get(name);
    let mut pods: BTreeMap<(String, String), PodResources> = BTreeMap::new();
    let mut each = |name: &str, set: &dyn Fn(&mut PodResources, &ResultSeries, f64)| {
        for s in r(name).iter().filter(|s| tm_container(s) && !s.label(l::POD).is_empty()) {
            let Some(v) = s.last_value().and_then(finite) else { continue };
            let key = (s.label(l::POD).to_string(), s.label(l::CONTAINER).to_string());
            let entry = pods.entry(key).or_insert_with(|| PodResources {
                pod: s.label(l::POD).into(),
                namespace: Some(s.label(l::NAMESPACE).to_string()).filter(|n| !n.is_empty()),
                container: Some(s.label(l::CONTAINER).to_string()),
                ..PodResources::default()
            });
            set(entry, s, v);
        }
    };
    each(OOM, &|p, _, v| p.last_terminated_oom_killed = Some(v >= 1.0));
    each(RESTARTS, &|p, _, v| p.restarts_in_window = Some((v * window_s).round()));
    each(LIMITS, &|p, s, v| match s.label(l::RESOURCE) {
        "memory" => p.memory_limit_bytes = Some(v),
        "cpu" => p.cpu_limit_cores = Some(v),
        _ => {}
    });
    each(WORKING_SET, &|p, _, v| p.working_set_max_bytes = Some(v));
    let periods: BTreeMap<(String, String), f64> = r(PERIODS)
        .iter()
        .filter(|s| tm_container(s))
        .filter_map(|s| Some(((s.label(l::POD).to_string(), s.label(l::CONTAINER).to_string()), s.last_value()?)))
        .collect();
    each(THROTTLED, &|p, _, v| {
        let key = (p.pod.clone(), p.container.clone().unwrap_or_default());
        if let Some(&all) = periods.get(&key).filter(|&&all| all > 0.0) {
            p.cpu_throttled_ratio = Some((v / all).clamp(0.0, 1.0));
        }
    });
    // One container a pod: Flink's, else the first.
    let mut out: BTreeMap<String, PodResources> = BTreeMap::new();
    for ((pod, container), p) in pods {
        let flinks = container == "flink-main-container";
        if flinks || !out.contains_key(&pod) {
            out.insert(pod, p);
        }
    }
    out.into_values().collect()
}

/// Adds heap used and max (round 3's `heap_used`, `heap_max`) and the old-generation
/// collectors' GC time to the job's TaskManagers.
pub(super) fn add_jvm_memory(tms: &mut [TaskManagerMetrics], answers: &super::Answers, cat: &MetricCatalog) {
    let r = |name: &str| answers.get(name);
    let per_tm = |name: &str| -> BTreeMap<String, f64> {
        r(name)
            .iter()
            .filter_map(|s| Some((flink_taskmanager_id(s.label(l::TM_ID)), s.last_value().and_then(finite)?)))
            .filter(|(tm, v)| !tm.is_empty() && *v > 0.0)
            .collect()
    };
    let (used, max) = (per_tm(HEAP_USED), per_tm(HEAP_MAX));
    let collectors = r(GC_PER_COLLECTOR);
    let old_gen: QueryResult = collectors
        .iter()
        .filter(|s| cat.gc_old_gen_collector_times.iter().any(|n| n == s.label("__name__")))
        .cloned()
        .collect();
    // Only collectors seen at all count: a TaskManager with collectors but no old-gen
    // series runs no such collector's old generation apart (0 is then not known).
    let old = gc_rate_per_taskmanager(&old_gen);
    for tm in tms.iter_mut() {
        tm.heap_used_bytes = used.get(&tm.tm_id).copied();
        tm.heap_max_bytes = max.get(&tm.tm_id).copied();
        tm.old_gen_gc_ms_per_s = old.get(&tm.tm_id).copied();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::identity::SeriesScope;

    #[test]
    fn the_container_queries_are_six_whatever_the_number_of_taskmanagers_and_vertices() {
        let cat = MetricCatalog::default();
        let series = SeriesScope::default();
        let s = super::super::rounds::test_scope(&cat, &series);
        let pods = |n: usize| (0..n).map(|i| format!("job-taskmanager-1-{i}")).collect::<Vec<_>>();
        assert_eq!(container_queries(&s, &pods(2)).len(), 6);
        assert_eq!(container_queries(&s, &pods(400)).len(), 6);
        assert!(container_queries(&s, &[]).is_empty());
        // Round 3's TaskManager queries (heap included) do not depend on the job's size
        // either: the job-level list is the same length for any job.
        let signals = super::super::rounds::job_signal_queries(&s);
        assert!(signals.iter().any(|(n, _)| *n == HEAP_USED) && signals.iter().any(|(n, _)| *n == HEAP_MAX));
        let promql = container_queries(&s, &pods(1)).into_iter().map(|(_, q)| q.to_promql()).collect::<Vec<_>>();
        // The pod in any form the reporter's filter maps to `job_taskmanager_1_0`.
        assert!(
            promql[0].contains("reason=\"OOMKilled\"")
                && promql[0].contains("pod=~\"job[^a-zA-Z0-9:]taskmanager[^a-zA-Z0-9:]1[^a-zA-Z0-9:]0\""),
            "{promql:?}"
        );
    }

    fn series(name: &str, labels: &[(&str, &str)], v: f64) -> ResultSeries {
        let mut all: BTreeMap<String, String> = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        all.insert("__name__".into(), name.into());
        ResultSeries { labels: all, points: vec![(300_000, v)] }
    }

    #[test]
    fn a_pods_containers_are_read_from_the_exporters_labels_and_the_pause_container_left_out() {
        // Shapes as kube-state-metrics (docs/metrics/workload/pod-metrics.md) and cAdvisor
        // through the kubelet (docs/storage/prometheus.md) label them: namespace, pod,
        // container; the pod-level cgroup has container="" and the pause container "POD".
        let pod = "fraud-taskmanager-1-1";
        let main = [("namespace", "flink"), ("pod", pod), ("container", "flink-main-container")];
        let mut answers = super::super::Answers::default();
        let mut put = |name: &str, s: Vec<ResultSeries>| {
            answers.results.insert(name.to_string(), s);
        };
        put(OOM, vec![series("kube_pod_container_status_last_terminated_reason", &main, 1.0)]);
        // 1 restart over 300 s: a rate of 1/300 per second.
        put(RESTARTS, vec![series("kube_pod_container_status_restarts_total", &main, 1.0 / 300.0)]);
        let mem = [main[0], main[1], main[2], ("resource", "memory")];
        let cpu = [main[0], main[1], main[2], ("resource", "cpu")];
        put(
            LIMITS,
            vec![
                series("kube_pod_container_resource_limits", &mem, 4.0 * 1024.0 * 1024.0 * 1024.0),
                series("kube_pod_container_resource_limits", &cpu, 2.0),
            ],
        );
        put(
            WORKING_SET,
            vec![
                series("container_memory_working_set_bytes", &main, 3.0e9),
                series(
                    "container_memory_working_set_bytes",
                    &[("namespace", "flink"), ("pod", pod), ("container", "")],
                    3.2e9,
                ),
                series(
                    "container_memory_working_set_bytes",
                    &[("namespace", "flink"), ("pod", pod), ("container", "POD")],
                    1.0e6,
                ),
            ],
        );
        // 4 of 10 periods a second throttled: 0.4.
        put(THROTTLED, vec![series("container_cpu_cfs_throttled_periods_total", &main, 4.0)]);
        put(PERIODS, vec![series("container_cpu_cfs_periods_total", &main, 10.0)]);
        let pods = assemble_pods(&answers, 300.0);
        assert_eq!(pods.len(), 1);
        let p = &pods[0];
        assert_eq!((p.pod.as_str(), p.container.as_deref()), (pod, Some("flink-main-container")));
        assert_eq!(p.oom_killed_in_window(), Some(true));
        assert_eq!(p.restarts_in_window, Some(1.0));
        assert_eq!(p.working_set_max_bytes, Some(3.0e9));
        assert_eq!(p.cpu_limit_cores, Some(2.0));
        assert_eq!(p.cpu_throttled_ratio, Some(0.4));
    }
}
