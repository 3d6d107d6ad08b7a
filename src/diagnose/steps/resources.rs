//! Step `resources`: the culprit's TaskManagers' memory, garbage collection and CPU quota.
//!
//! Runs after `hot_key` (one slow instance is judged there, with these same readings) and
//! before `state_backend` (GC pressure and a container at its limit slow every operator of
//! the TaskManager, RocksDB included). Judged only on the TaskManagers that run the
//! culprit's subtasks (their `tm_id`; on Kubernetes their pods):
//! * `memory_limit`: a container OOM-killed in the window, or its working set at
//!   `memory_limit_ratio` of its limit;
//! * `gc_pressure`: GC time ≥ `gc_time_share` of the wall time (Tencent Oceanus' "Full GC
//!   too long"), heap used over max (AWS: 85 %) as supporting evidence;
//! * `cpu_throttled`: CFS throttled periods ≥ `cpu_throttled_ratio` of all periods
//!   (kubernetes-mixin's `CPUThrottlingHigh`).
//!
//! The same pressure on a TaskManager that runs none of the culprit's subtasks is advice
//! ("present, not the reason"); metrics not in the store are missing, never zero.

use std::collections::BTreeSet;

use crate::diagnose::signals::VertexSignals;
use crate::diagnose::{Context, StepReport};
use crate::model::facts::resources::{NodeReading, Pressure, ResourcesFact};
use crate::model::verdict::{Evidence, Finding};

/// What was measured of TaskManager `tm`, and the job's other TaskManagers' means.
pub fn reading(ctx: &Context, tm: &str) -> NodeReading {
    let snap = ctx.snapshot;
    let mine = snap.taskmanagers.iter().find(|t| t.tm_id == tm);
    // The TaskManager id may be the reporter's sanitized form of the pod name.
    let pod =
        |id: &str| snap.pods.as_deref().unwrap_or_default().iter().find(|p| crate::model::graph::same_name(&p.pod, id));
    let others: Vec<&str> = snap.taskmanagers.iter().map(|t| t.tm_id.as_str()).filter(|id| *id != tm).collect();
    let mean = |values: Vec<f64>| (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64);
    let tm_mean = |f: fn(&crate::model::snapshot::TaskManagerMetrics) -> Option<f64>| {
        mean(snap.taskmanagers.iter().filter(|t| t.tm_id != tm).filter_map(f).collect())
    };
    let p = pod(tm);
    NodeReading {
        tm: tm.to_string(),
        gc_share_ratio: mine.and_then(|t| t.gc_ms_per_s).map(|ms| ms / 1000.0),
        old_gen_share_ratio: mine.and_then(|t| t.old_gen_gc_ms_per_s).map(|ms| ms / 1000.0),
        others_gc_share_ratio: tm_mean(|t| t.gc_ms_per_s.map(|ms| ms / 1000.0)),
        heap_used_bytes: mine.and_then(|t| t.heap_used_bytes),
        heap_max_bytes: mine.and_then(|t| t.heap_max_bytes),
        cpu_load_ratio: mine.and_then(|t| t.cpu_load),
        others_cpu_load_ratio: tm_mean(|t| t.cpu_load),
        throttled_ratio: p.and_then(|p| p.cpu_throttled_ratio),
        others_throttled_ratio: mean(others.iter().filter_map(|id| pod(id)?.cpu_throttled_ratio).collect()),
        cpu_limit_cores: p.and_then(|p| p.cpu_limit_cores),
        oom_killed: p.and_then(|p| p.oom_killed_in_window()),
        working_set_bytes: p.and_then(|p| p.working_set_max_bytes),
        memory_limit_bytes: p.and_then(|p| p.memory_limit_bytes),
    }
}

/// Which pressure a TaskManager's reading shows over its threshold, the worst first
/// (a kill for memory, a working set at its limit, GC, throttling), with its value.
pub fn pressures(ctx: &Context, n: &NodeReading) -> Vec<(Pressure, f64)> {
    let t = &ctx.cfg.thresholds;
    let mut out = Vec::new();
    if n.oom_killed == Some(true) {
        out.push((Pressure::OomKilled, n.memory_limit_ratio().unwrap_or(1.0)));
    } else if let Some(r) = n.memory_limit_ratio().filter(|&r| r >= t.memory_limit_ratio) {
        out.push((Pressure::MemoryLimit, r));
    }
    if let Some(g) = n.gc_share_ratio.filter(|&g| g >= t.gc_time_share) {
        out.push((Pressure::Gc, g));
    }
    if let Some(c) = n.throttled_ratio.filter(|&c| c >= t.cpu_throttled_ratio) {
        out.push((Pressure::CpuThrottled, c));
    }
    out
}

/// The threshold a pressure is judged by.
fn threshold(ctx: &Context, p: Pressure) -> f64 {
    let t = &ctx.cfg.thresholds;
    match p {
        Pressure::Gc => t.gc_time_share,
        Pressure::OomKilled | Pressure::MemoryLimit => t.memory_limit_ratio,
        Pressure::CpuThrottled => t.cpu_throttled_ratio,
    }
}

pub fn run(ctx: &Context, culprit: &VertexSignals) -> StepReport {
    let tms: BTreeSet<&str> = culprit.subtasks.iter().filter_map(|s| s.tm_id.as_deref()).collect();
    if tms.is_empty() {
        let mut r = StepReport::clear(ResourcesFact::NoTaskManagers { vertex: culprit.name.clone() });
        r.missing.push("tm_id of the culprit's subtasks".into());
        return r;
    }
    let nodes: Vec<NodeReading> = tms.iter().map(|tm| reading(ctx, tm)).collect();
    // Every pressure over its threshold on the culprit's TaskManagers, the worst kind first,
    // the worst TaskManager of a kind first.
    let mut found: Vec<(Pressure, f64, &NodeReading)> =
        nodes.iter().flat_map(|n| pressures(ctx, n).into_iter().map(move |(p, v)| (p, v, n))).collect();
    found.sort_by(|a, b| rank(a.0).cmp(&rank(b.0)).then(b.1.total_cmp(&a.1)));
    let mut r = match found.first() {
        Some(&(p, v, n)) => hit(ctx, culprit, p, v, n, &nodes),
        None => clear(ctx, culprit, &nodes),
    };
    // Other kinds on the culprit's TaskManagers: said, not the finding.
    let lead = found.first().map(|f| f.0);
    let mut said: Vec<Pressure> = lead.into_iter().collect();
    for &(p, v, n) in &found {
        let same_kind = matches!(
            (p, lead),
            (Pressure::OomKilled | Pressure::MemoryLimit, Some(Pressure::OomKilled | Pressure::MemoryLimit))
        );
        if !said.contains(&p) && !same_kind {
            said.push(p);
            r.advice.push(ResourcesFact::AlsoPresent {
                pressure: p,
                subject: n.tm.clone(),
                value_ratio: v,
                threshold_ratio: threshold(ctx, p),
            });
        }
    }
    elsewhere(ctx, &tms, &mut r);
    r.evidence = evidence_of(ctx, &nodes);
    r.missing = missing(ctx, &nodes);
    r
}

fn rank(p: Pressure) -> u8 {
    match p {
        Pressure::OomKilled => 0,
        Pressure::MemoryLimit => 1,
        Pressure::Gc => 2,
        Pressure::CpuThrottled => 3,
    }
}

/// The finding of pressure `p` (value `v`) on TaskManager `n`.
fn hit(
    ctx: &Context,
    culprit: &VertexSignals,
    p: Pressure,
    v: f64,
    n: &NodeReading,
    all: &[NodeReading],
) -> StepReport {
    let vertex = culprit.name.clone();
    let over = all.iter().filter(|m| pressures(ctx, m).iter().any(|(q, _)| *q == p)).count();
    let threshold_ratio = threshold(ctx, p);
    let mut r = match p {
        Pressure::OomKilled | Pressure::MemoryLimit => {
            let mut r = StepReport::hit(
                Finding::MemoryLimit,
                ResourcesFact::MemoryLimitFound { vertex: vertex.clone(), node: n.clone(), threshold_ratio },
            );
            r.fix.push(ResourcesFact::FitProcessToLimit {
                pod: n.tm.clone(),
                memory_limit_bytes: n.memory_limit_bytes,
                working_set_bytes: n.working_set_bytes,
            });
            r
        }
        Pressure::Gc => {
            let mut r = StepReport::hit(
                Finding::GcPressure,
                ResourcesFact::GcPressureFound {
                    vertex: vertex.clone(),
                    node: n.clone(),
                    over,
                    of: all.len(),
                    threshold_ratio,
                },
            );
            gc_fix(ctx, n, &mut r);
            r
        }
        Pressure::CpuThrottled => {
            let mut r = StepReport::hit(
                Finding::CpuThrottled,
                ResourcesFact::CpuThrottledFound {
                    vertex: vertex.clone(),
                    node: n.clone(),
                    over,
                    of: all.len(),
                    threshold_ratio,
                },
            );
            r.fix.push(ResourcesFact::MoreCpu {
                pod: n.tm.clone(),
                cpu_limit_cores: n.cpu_limit_cores,
                throttled_ratio: v,
            });
            r
        }
    };
    r.not_the_fix.push(ResourcesFact::NotMoreParallelism { vertex: vertex.clone(), pressure: p });
    r.summary = Some(ResourcesFact::Summary { vertex, pressure: p, subject: n.tm.clone(), value_ratio: v }.into());
    r
}

/// The memory fix for GC pressure on `n`: a task heap large enough for its use to be the
/// target utilisation of it, and state off the heap when it is there.
fn gc_fix(ctx: &Context, n: &NodeReading, r: &mut StepReport) {
    let t = &ctx.cfg.thresholds;
    if let (Some(used), Some(max)) = (n.heap_used_bytes, n.heap_max_bytes) {
        r.cause.push(ResourcesFact::HeapOccupancy {
            tm: n.tm.clone(),
            heap_used_bytes: used,
            heap_max_bytes: max,
            threshold_ratio: t.heap_used_ratio,
        });
        // The heap at which today's use is the target utilisation: used / target.
        let add = used / t.target_utilisation - max;
        if add > 0.0 {
            r.fix.push(ResourcesFact::RaiseTaskHeap {
                tm: n.tm.clone(),
                heap_used_bytes: used,
                heap_max_bytes: max,
                add_bytes: add,
                target_ratio: t.target_utilisation,
            });
        }
    } else {
        r.fix.push(ResourcesFact::RaiseTaskHeapUnmeasured);
    }
    let backend = ctx.snapshot.checkpoints.config.as_ref().and_then(|c| c.state_backend.clone());
    let on_heap = match backend.as_deref() {
        Some(b) => !b.to_ascii_lowercase().contains("rocksdb"),
        None => ctx.snapshot.rocksdb.is_empty(),
    };
    if on_heap {
        r.fix.push(ResourcesFact::StateOffHeap { state_backend: backend });
    }
}

/// No pressure on the culprit's TaskManagers: what was measured, or that nothing was.
fn clear(ctx: &Context, culprit: &VertexSignals, nodes: &[NodeReading]) -> StepReport {
    let t = &ctx.cfg.thresholds;
    let worst = |f: fn(&NodeReading) -> Option<f64>| nodes.iter().filter_map(f).reduce(f64::max);
    let gc = worst(|n| n.gc_share_ratio);
    let heap = worst(|n| n.heap_used_ratio());
    let throttled = worst(|n| n.throttled_ratio);
    let measured = gc.is_some() || heap.is_some() || nodes.iter().any(NodeReading::container_measured);
    if !measured {
        return StepReport::clear(ResourcesFact::NotMeasured {
            vertex: culprit.name.clone(),
            taskmanagers: nodes.len(),
        });
    }
    StepReport::clear(ResourcesFact::BelowThresholds {
        vertex: culprit.name.clone(),
        taskmanagers: nodes.len(),
        gc_share_ratio: gc,
        gc_threshold_ratio: t.gc_time_share,
        heap_used_ratio: heap,
        throttled_ratio: throttled,
        throttled_threshold_ratio: t.cpu_throttled_ratio,
    })
}

/// Pressures on the job's TaskManagers that run none of the culprit's subtasks: advice.
fn elsewhere(ctx: &Context, culprits: &BTreeSet<&str>, r: &mut StepReport) {
    for tm in ctx.snapshot.taskmanagers.iter().filter(|t| !culprits.contains(t.tm_id.as_str())) {
        let n = reading(ctx, &tm.tm_id);
        for (p, v) in pressures(ctx, &n) {
            r.advice.push(ResourcesFact::ElsewhereNotTheReason {
                pressure: p,
                subject: n.tm.clone(),
                value_ratio: v,
                threshold_ratio: threshold(ctx, p),
            });
        }
    }
}

/// One evidence row: the reading, the metric's name, its threshold and the signal whose
/// PromQL gives it.
type EvidenceRow<'a> = (&'a dyn Fn(&NodeReading) -> Option<f64>, &'a str, f64, &'a str);

/// The worst culprit TaskManager's numbers.
fn evidence_of(ctx: &Context, nodes: &[NodeReading]) -> Vec<Evidence> {
    let t = &ctx.cfg.thresholds;
    let worst = |f: &dyn Fn(&NodeReading) -> Option<f64>| {
        nodes.iter().filter_map(|n| Some((n, f(n)?))).max_by(|a, b| a.1.total_cmp(&b.1))
    };
    let mut out = Vec::new();
    let rows: [EvidenceRow; 4] = [
        (&|n| n.gc_share_ratio, "share of time in GC (Status.JVM.GarbageCollector.*.Time)", t.gc_time_share, "gc_time"),
        (&|n| n.heap_used_ratio(), "Status.JVM.Memory.Heap.Used / Heap.Max", t.heap_used_ratio, "heap_used"),
        (
            &|n| n.memory_limit_ratio(),
            "container_memory_working_set_bytes / memory limit",
            t.memory_limit_ratio,
            "container_working_set",
        ),
        (
            &|n| n.throttled_ratio,
            "container_cpu_cfs_throttled_periods_total / container_cpu_cfs_periods_total",
            t.cpu_throttled_ratio,
            "container_cfs_throttled",
        ),
    ];
    for (f, metric, threshold, signal) in rows {
        if let Some((n, v)) = worst(f) {
            out.push(ctx.evidence(&n.tm, metric, v, "ratio", Some(threshold), signal));
        }
    }
    out
}

/// What was not measured of the culprit's TaskManagers.
fn missing(ctx: &Context, nodes: &[NodeReading]) -> Vec<String> {
    let cat_gc = "Status.JVM.GarbageCollector.*.Time";
    let mut out = Vec::new();
    if nodes.iter().all(|n| n.gc_share_ratio.is_none()) {
        out.push(cat_gc.to_string());
    }
    if nodes.iter().all(|n| n.heap_used_ratio().is_none()) {
        out.push("Status.JVM.Memory.Heap.Used / Heap.Max".to_string());
    }
    let none = |f: fn(&NodeReading) -> bool| nodes.iter().all(|n| !f(n));
    if none(NodeReading::container_measured) {
        let asked =
            if ctx.snapshot.pods.is_none() { "not asked: no TaskManager to join to" } else { "not in the store" };
        out.push(format!(
            "kube-state-metrics and cAdvisor series of the culprit's TaskManager pods ({asked}): OOM kills, memory limit, CPU throttling"
        ));
        return out;
    }
    for (absent, name) in [
        (none(|n| n.throttled_ratio.is_some()), "container_cpu_cfs_throttled_periods_total"),
        (none(|n| n.working_set_bytes.is_some()), "container_memory_working_set_bytes"),
        (none(|n| n.memory_limit_bytes.is_some()), "kube_pod_container_resource_limits"),
        (none(|n| n.oom_killed.is_some()), "kube_pod_container_status_last_terminated_reason"),
    ] {
        if absent {
            out.push(name.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::testkit::*;
    use crate::model::facts::Fact;
    use crate::model::resources::PodResources;
    use crate::model::verdict::Outcome;

    const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

    fn rf(f: &Fact) -> &ResourcesFact {
        match f {
            Fact::Resources(r) => r,
            other => panic!("not a resources fact: {other:?}"),
        }
    }

    /// Source → `score` (p 2, evenly busy 0.95: no hot subtask) → sink; score's subtasks on
    /// tm-1 and tm-2, the sink's on tm-3.
    fn job() -> SnapshotBuilder {
        SnapshotBuilder::new()
            .vertex("src", "Source: clicks", 2)
            .vertex("agg", "score", 2)
            .vertex("sink", "Sink: out", 2)
            .edge("src", "agg", "HASH")
            .edge("agg", "sink", "FORWARD")
            .all_subtasks("src", 0.0, 0.9, 0.1, None)
            .subtask("agg", 0, 0.95, 0.0, 0.05, 500.0)
            .subtask("agg", 1, 0.95, 0.0, 0.05, 500.0)
            .all_subtasks("sink", 0.1, 0.0, 0.9, 1000.0)
            .on_taskmanager("agg", 0, "tm-1", "node-1")
            .on_taskmanager("agg", 1, "tm-2", "node-2")
            .on_taskmanager("sink", 0, "tm-3", "node-3")
            .on_taskmanager("sink", 1, "tm-3", "node-3")
    }

    #[test]
    fn a_culprit_whose_taskmanager_spends_45_percent_in_old_gen_gc_with_a_full_heap_is_gc_pressure() {
        // tm-1: 450 ms/s of GC, all of it old generation → 0.45 ≥ 0.30; heap 0.97 GiB of 1 GiB.
        let snap = job()
            .taskmanager("tm-1", 450.0, 0.9)
            .heap("tm-1", 0.97 * GIB, GIB, 450.0)
            .taskmanager("tm-2", 20.0, 0.9)
            .heap("tm-2", 0.5 * GIB, GIB, None)
            .taskmanager("tm-3", 10.0, 0.2)
            .build();
        let r = on_vertex(&snap, "agg", run);
        assert_eq!((r.outcome, r.finding), (Outcome::Hit, Some(Finding::GcPressure)));
        let ResourcesFact::GcPressureFound { node, over, of, threshold_ratio, .. } = rf(&r.detail) else {
            panic!("{:?}", r.detail)
        };
        assert_eq!((node.tm.as_str(), *over, *of), ("tm-1", 1, 2));
        assert_close(node.gc_share_ratio.unwrap(), 0.45, 1e-12);
        assert_close(node.old_gen_share_ratio.unwrap(), 0.45, 1e-12);
        assert_close(*threshold_ratio, 0.3, 1e-12);
        assert_close(node.heap_used_ratio().unwrap(), 0.97, 1e-12);
        // Heap for 0.97 GiB to be 70 %: 0.97 / 0.7 = 1.3857 GiB → add 0.3857 GiB.
        let raise = r.fix.iter().find_map(|f| match rf(f) {
            ResourcesFact::RaiseTaskHeap { add_bytes, .. } => Some(*add_bytes),
            _ => None,
        });
        assert_close(raise.expect("a heap fix") / GIB, 0.97 / 0.7 - 1.0, 1e-9);
        // No state backend known and no RocksDB metrics: state off the heap is offered.
        assert!(r.fix.iter().any(|f| matches!(rf(f), ResourcesFact::StateOffHeap { state_backend: None })));
        assert_close(
            evidence(&r.evidence, "share of time in GC (Status.JVM.GarbageCollector.*.Time)").value,
            0.45,
            1e-9,
        );
        // No kube metrics: listed as missing, nothing concluded from them.
        assert!(r.missing.iter().any(|m| m.contains("kube-state-metrics")), "{:?}", r.missing);
    }

    #[test]
    fn the_same_gc_on_a_taskmanager_without_the_culprits_subtasks_is_present_but_not_the_reason() {
        // tm-3 (the sink's) at 0.45; the culprit's tm-1 and tm-2 at 0.02.
        let snap =
            job().taskmanager("tm-1", 20.0, 0.9).taskmanager("tm-2", 20.0, 0.9).taskmanager("tm-3", 450.0, 0.2).build();
        let r = on_vertex(&snap, "agg", run);
        assert_eq!(r.outcome, Outcome::Clear);
        let ResourcesFact::ElsewhereNotTheReason { pressure, subject, value_ratio, .. } = rf(&r.advice[0]) else {
            panic!("{:?}", r.advice)
        };
        assert_eq!((*pressure, subject.as_str()), (Pressure::Gc, "tm-3"));
        assert_close(*value_ratio, 0.45, 1e-12);
    }

    #[test]
    fn an_oom_killed_container_of_the_culprit_is_memory_limit() {
        // Last termination OOMKilled with 1 restart in the window; working set 3.9 of 4 GiB.
        let snap = job()
            .taskmanager("tm-1", 20.0, 0.9)
            .taskmanager("tm-2", 20.0, 0.9)
            .pod(PodResources {
                pod: "tm-2".into(),
                last_terminated_oom_killed: Some(true),
                restarts_in_window: Some(1.0),
                working_set_max_bytes: Some(3.9 * GIB),
                memory_limit_bytes: Some(4.0 * GIB),
                ..Default::default()
            })
            .build();
        let r = on_vertex(&snap, "agg", run);
        assert_eq!(r.finding, Some(Finding::MemoryLimit));
        let ResourcesFact::MemoryLimitFound { node, .. } = rf(&r.detail) else { panic!("{:?}", r.detail) };
        assert_eq!((node.tm.as_str(), node.oom_killed), ("tm-2", Some(true)));
        assert!(
            matches!(rf(&r.fix[0]), ResourcesFact::FitProcessToLimit { memory_limit_bytes: Some(l), .. } if *l == 4.0 * GIB)
        );
    }

    #[test]
    fn an_old_oom_kill_without_a_restart_in_the_window_is_not_this_windows() {
        let snap = job()
            .taskmanager("tm-1", 20.0, 0.9)
            .pod(PodResources {
                pod: "tm-1".into(),
                last_terminated_oom_killed: Some(true),
                restarts_in_window: Some(0.0),
                ..Default::default()
            })
            .build();
        let r = on_vertex(&snap, "agg", run);
        assert_eq!(r.outcome, Outcome::Clear);
    }

    #[test]
    fn the_culprits_throttled_pods_are_cpu_throttled_with_the_ratio() {
        // Both culprit pods throttled: 0.5 and 0.4 of their CFS periods, ≥ 0.25.
        let pod = |name: &str, ratio: f64| PodResources {
            pod: name.into(),
            cpu_throttled_ratio: Some(ratio),
            cpu_limit_cores: Some(1.0),
            ..Default::default()
        };
        let snap = job()
            .taskmanager("tm-1", 20.0, 0.9)
            .taskmanager("tm-2", 20.0, 0.9)
            .pod(pod("tm-1", 0.5))
            .pod(pod("tm-2", 0.4))
            .build();
        let r = on_vertex(&snap, "agg", run);
        assert_eq!(r.finding, Some(Finding::CpuThrottled));
        let ResourcesFact::CpuThrottledFound { node, over, of, .. } = rf(&r.detail) else { panic!("{:?}", r.detail) };
        assert_eq!((node.tm.as_str(), *over, *of), ("tm-1", 2, 2));
        assert_close(node.throttled_ratio.unwrap(), 0.5, 1e-12);
        assert!(matches!(rf(&r.fix[0]), ResourcesFact::MoreCpu { cpu_limit_cores: Some(c), .. } if *c == 1.0));
        assert!(
            r.not_the_fix
                .iter()
                .any(|f| matches!(rf(f), ResourcesFact::NotMoreParallelism { pressure: Pressure::CpuThrottled, .. }))
        );
    }

    #[test]
    fn without_kube_metrics_the_step_lists_them_missing_and_changes_no_finding() {
        let snap = job().taskmanager("tm-1", 20.0, 0.9).taskmanager("tm-2", 20.0, 0.9).build();
        let r = on_vertex(&snap, "agg", run);
        assert_eq!((r.outcome, r.finding), (Outcome::Clear, None));
        assert!(r.missing.iter().any(|m| m.contains("not asked")), "{:?}", r.missing);
        // Asked and nothing found: "not in the store".
        let snap = job().taskmanager("tm-1", 20.0, 0.9).pods_asked().build();
        let r = on_vertex(&snap, "agg", run);
        assert!(r.missing.iter().any(|m| m.contains("not in the store")), "{:?}", r.missing);
        assert_eq!(r.finding, None);
    }
}
