//! Words of [`ResourcesFact`].

use std::fmt::{self, Formatter};

use super::numbers::{human_bytes, pct};
use crate::model::facts::resources::{NodeReading, Pressure, ResourcesFact};

/// What a pressure is, in a few words.
pub(super) fn pressure(p: Pressure) -> &'static str {
    match p {
        Pressure::Gc => "time in garbage collection",
        Pressure::OomKilled => "container OOM-killed in the window (memory over its limit)",
        Pressure::MemoryLimit => "container working set against its memory limit",
        Pressure::CpuThrottled => "CFS periods throttled by the CPU limit",
    }
}

/// The GC share with its old-generation part.
fn gc(n: &NodeReading, f: &mut Formatter<'_>) -> fmt::Result {
    write!(f, "{} of the time in GC", pct(n.gc_share_ratio.unwrap_or(0.0)))?;
    if let Some(old) = n.old_gen_share_ratio {
        write!(f, " ({} in the old generation)", pct(old))?;
    }
    if let Some(o) = n.others_gc_share_ratio {
        write!(f, " against {} on the job's other TaskManagers", pct(o))?;
    }
    Ok(())
}

pub(super) fn word(fact: &ResourcesFact, f: &mut Formatter<'_>) -> fmt::Result {
    match fact {
        ResourcesFact::NoTaskManagers { vertex } => {
            write!(f, "{vertex}'s subtasks name no TaskManager: memory, GC and CPU quota cannot be joined to them.")
        }
        ResourcesFact::NotMeasured { vertex, taskmanagers } => write!(
            f,
            "No JVM or container metrics of the {taskmanagers} TaskManager(s) running {vertex}: memory, GC and CPU quota not measured."
        ),
        ResourcesFact::BelowThresholds {
            vertex,
            taskmanagers,
            gc_share_ratio,
            gc_threshold_ratio,
            heap_used_ratio,
            throttled_ratio,
            throttled_threshold_ratio,
        } => {
            write!(f, "The {taskmanagers} TaskManager(s) running {vertex} are not short of memory or CPU:")?;
            if let Some(g) = gc_share_ratio {
                write!(f, " at most {} of the time in GC (< {})", pct(*g), pct(*gc_threshold_ratio))?;
            }
            if let Some(h) = heap_used_ratio {
                write!(f, ", heap at most {} used", pct(*h))?;
            }
            if let Some(c) = throttled_ratio {
                write!(f, ", at most {} of CFS periods throttled (< {})", pct(*c), pct(*throttled_threshold_ratio))?;
            }
            f.write_str(".")
        }
        ResourcesFact::GcPressureFound { vertex, node, over, of, threshold_ratio } => {
            write!(f, "TaskManager {} running {vertex} spends ", node.tm)?;
            gc(node, f)?;
            write!(f, " (≥ {}; {over} of its {of} TaskManager(s) are over): GC pressure.", pct(*threshold_ratio))
        }
        ResourcesFact::HeapOccupancy { tm, heap_used_bytes, heap_max_bytes, threshold_ratio } => {
            let ratio = heap_used_bytes / heap_max_bytes;
            write!(
                f,
                "Its heap is {} used on average ({} of {}; {} {}).",
                pct(ratio),
                human_bytes(*heap_used_bytes),
                human_bytes(*heap_max_bytes),
                if ratio >= *threshold_ratio { "over" } else { "under" },
                pct(*threshold_ratio)
            )?;
            let _ = tm;
            Ok(())
        }
        ResourcesFact::MemoryLimitFound { vertex, node, threshold_ratio } => {
            write!(f, "The container of TaskManager pod {} running {vertex} ", node.tm)?;
            if node.oom_killed == Some(true) {
                f.write_str("was OOM-killed in the window")?;
            } else {
                f.write_str("is at its memory limit")?;
            }
            if let (Some(w), Some(l)) = (node.working_set_bytes, node.memory_limit_bytes) {
                write!(
                    f,
                    " (working set up to {} of a {} limit, ≥ {} is at it)",
                    human_bytes(w),
                    human_bytes(l),
                    pct(*threshold_ratio)
                )?;
            }
            f.write_str(".")
        }
        ResourcesFact::CpuThrottledFound { vertex, node, over, of, threshold_ratio } => {
            write!(
                f,
                "The container of TaskManager pod {} running {vertex} is throttled in {} of its CFS periods (≥ {}; {over} of its {of} pod(s) are over)",
                node.tm,
                pct(node.throttled_ratio.unwrap_or(0.0)),
                pct(*threshold_ratio)
            )?;
            if let Some(c) = node.cpu_limit_cores {
                write!(f, " under a CPU limit of {c} cores")?;
            }
            f.write_str(": busy because throttled.")
        }
        ResourcesFact::ElsewhereNotTheReason { pressure: p, subject, value_ratio, threshold_ratio } => write!(
            f,
            "TaskManager {subject} shows {} {} (≥ {}), but runs none of the culprit's subtasks: present, not the reason for this bottleneck.",
            pct(*value_ratio),
            pressure(*p),
            pct(*threshold_ratio)
        ),
        ResourcesFact::AlsoPresent { pressure: p, subject, value_ratio, threshold_ratio } => write!(
            f,
            "Also on the culprit's TaskManager {subject}: {} {} (≥ {}).",
            pct(*value_ratio),
            pressure(*p),
            pct(*threshold_ratio)
        ),
        ResourcesFact::RaiseTaskHeap { .. }
        | ResourcesFact::RaiseTaskHeapUnmeasured
        | ResourcesFact::StateOffHeap { .. }
        | ResourcesFact::FitProcessToLimit { .. }
        | ResourcesFact::MoreCpu { .. }
        | ResourcesFact::NotMoreParallelism { .. } => word_fix(fact, f),
        ResourcesFact::Summary { vertex, pressure: p, subject, value_ratio } => write!(
            f,
            "{vertex} is the culprit: its TaskManager {subject} shows {} {}.",
            pct(*value_ratio),
            pressure(*p)
        ),
    }
}

/// Words of the fixes and not-the-fixes.
fn word_fix(fact: &ResourcesFact, f: &mut Formatter<'_>) -> fmt::Result {
    match fact {
        ResourcesFact::RaiseTaskHeap { tm, heap_used_bytes, heap_max_bytes, add_bytes, target_ratio } => write!(
            f,
            "Raise `taskmanager.memory.task.heap.size` by {} (TaskManager {tm}'s heap {} → {}, so that its {} in use is {} of it), and `taskmanager.memory.process.size` (or `taskmanager.memory.flink.size`) by as much.",
            human_bytes(*add_bytes),
            human_bytes(*heap_max_bytes),
            human_bytes(heap_max_bytes + add_bytes),
            human_bytes(*heap_used_bytes),
            pct(*target_ratio)
        ),
        ResourcesFact::RaiseTaskHeapUnmeasured => f.write_str(
            "Raise `taskmanager.memory.task.heap.size` and `taskmanager.memory.process.size` by as much (heap use not measured: size it from `Status.JVM.Memory.Heap.Used`).",
        ),
        ResourcesFact::StateOffHeap { state_backend } => {
            f.write_str("Keep keyed state off the JVM heap: `state.backend.type: rocksdb`")?;
            match state_backend {
                Some(b) => write!(f, " (the job runs {b})."),
                None => f.write_str(" if the state is on the heap (no RocksDB metrics seen)."),
            }
        }
        ResourcesFact::FitProcessToLimit { pod, memory_limit_bytes, .. } => {
            f.write_str("Fit the TaskManager's memory to the pod: `taskmanager.memory.process.size`")?;
            if let Some(l) = memory_limit_bytes {
                write!(f, " below pod {pod}'s {} limit", human_bytes(*l))?;
            }
            f.write_str(" (on native Kubernetes the limit is that size × `kubernetes.taskmanager.memory.limit-factor`); native memory beyond Flink's budget goes into `taskmanager.memory.jvm-overhead.fraction` / `.max`, and RocksDB stays in managed memory (`state.backend.rocksdb.memory.managed: true`, `taskmanager.memory.managed.fraction`).")
        }
        ResourcesFact::MoreCpu { pod, cpu_limit_cores, throttled_ratio } => {
            write!(f, "Give TaskManager pod {pod} more CPU: raise `kubernetes.taskmanager.cpu.amount` (the request) or `kubernetes.taskmanager.cpu.limit-factor` (limit = amount × factor)")?;
            if let Some(c) = cpu_limit_cores {
                write!(f, " above today's {c}-core limit")?;
            }
            write!(f, ", or the operator's `spec.taskManager.resource.cpu`; throttled {} of the time now.", pct(*throttled_ratio))
        }
        ResourcesFact::NotMoreParallelism { vertex, pressure: p } => write!(
            f,
            "More parallelism for {vertex} on TaskManagers as they are: each new subtask meets the same {}.",
            pressure(*p)
        ),
        other => word(other, f),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::facts::Fact;

    #[test]
    fn a_heap_fix_names_the_key_and_the_sizes() {
        let fact = Fact::from(ResourcesFact::RaiseTaskHeap {
            tm: "tm-1".into(),
            heap_used_bytes: 970.0 * 1024.0 * 1024.0,
            heap_max_bytes: 1024.0 * 1024.0 * 1024.0,
            add_bytes: 361.7 * 1024.0 * 1024.0,
            target_ratio: 0.7,
        });
        let text = fact.to_string();
        assert!(text.contains("`taskmanager.memory.task.heap.size`"), "{text}");
        assert!(text.contains("`taskmanager.memory.process.size`"), "{text}");
        assert!(text.contains("70%") || text.contains("70 %"), "{text}");
    }

    #[test]
    fn a_throttled_pod_is_worded_busy_because_throttled_with_the_cpu_keys() {
        let node = NodeReading {
            tm: "job-taskmanager-1-2".into(),
            throttled_ratio: Some(0.4),
            cpu_limit_cores: Some(2.0),
            ..NodeReading::default()
        };
        let found = Fact::from(ResourcesFact::CpuThrottledFound {
            vertex: "enrich".into(),
            node,
            over: 1,
            of: 2,
            threshold_ratio: 0.25,
        })
        .to_string();
        assert!(found.contains("busy because throttled") && found.contains("2 cores"), "{found}");
        let fix =
            Fact::from(ResourcesFact::MoreCpu { pod: "p".into(), cpu_limit_cores: Some(2.0), throttled_ratio: 0.4 })
                .to_string();
        assert!(
            fix.contains("`kubernetes.taskmanager.cpu.amount`")
                && fix.contains("`kubernetes.taskmanager.cpu.limit-factor`"),
            "{fix}"
        );
    }
}
