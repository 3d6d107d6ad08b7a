//! Words of [`HotKeyFact`].

use std::fmt::{self, Formatter};

use super::numbers::{num, pct, pct_or_unknown};
use crate::model::facts::hot_key::{BusyRatios, HotKeyFact, HotKeyFix};
use crate::model::facts::resources::{NodeReading, Pressure};

pub(super) fn word(fact: &HotKeyFact, f: &mut Formatter<'_>) -> fmt::Result {
    match fact {
        HotKeyFact::SubtasksMissing { vertex, reporting, parallelism } => write!(
            f,
            "Only {reporting} of {vertex}'s {parallelism} subtasks report metrics: a hot key or a slow instance cannot be judged without the others."
        ),
        HotKeyFact::OneSubtask { vertex } => write!(f, "{vertex} has one subtask; there is no skew to look at."),
        HotKeyFact::BusyUnknown { vertex } => {
            write!(f, "{vertex}'s busy time is unknown: a hot subtask cannot be told from the others.")
        }
        HotKeyFact::NoHotSubtask { busy, hot_busy_threshold_ratio, others_median_threshold_ratio } => {
            f.write_str("No single hot subtask: busy ratios ")?;
            match busy {
                BusyRatios::Each(all) => {
                    f.write_str(&all.iter().map(|b| pct_or_unknown(*b)).collect::<Vec<_>>().join(", "))?
                }
                BusyRatios::Range(range) => write!(f, "{range}")?,
            }
            write!(
                f,
                " (hot needs ≥ {} with the others' median ≤ {}).",
                pct(*hot_busy_threshold_ratio),
                pct(*others_median_threshold_ratio)
            )
        }
        HotKeyFact::RecordsUnknown { subtask_name, hot_busy_ratio, others_median_busy_ratio } => write!(
            f,
            "{subtask_name} is {} busy while the others' median is {}, but records-in rates are missing: a hot key cannot be told from a slow instance.",
            pct(*hot_busy_ratio),
            pct(*others_median_busy_ratio)
        ),
        HotKeyFact::HotKeyFound {
            subtask_name,
            hot_busy_ratio,
            share_ratio,
            share_threshold_ratio,
            share_factor,
            parallelism,
            others_median_busy_ratio,
        } => write!(
            f,
            "{subtask_name} is {} busy and gets {} of the records (share {share_ratio:.2} ≥ {share_threshold_ratio:.2} = {share_factor}/{parallelism}); the others' median busy is {}: a hot key.",
            pct(*hot_busy_ratio),
            pct(*share_ratio),
            pct(*others_median_busy_ratio)
        ),
        HotKeyFact::HotKeyShare {
            subtask_name,
            hot_busy_ratio,
            hot_records_per_s,
            total_records_per_s,
            share_ratio,
            parallelism,
            others_median_busy_ratio,
        } => write!(
            f,
            "{subtask_name} is {} busy and receives {} of {} records/s (share s = {share_ratio:.2}, {:.1}× a uniform 1/{parallelism}), while the other subtasks are about {} busy: one key (or a few) carries that share, and all records of a key go to one subtask.",
            pct(*hot_busy_ratio),
            num(*hot_records_per_s),
            num(*total_records_per_s),
            share_ratio * *parallelism as f64,
            pct(*others_median_busy_ratio)
        ),
        HotKeyFact::Ceiling { ceiling_ratio, capacity_records_per_s, job_max_records_per_s } => write!(
            f,
            "A key's state is indivisible: the job can never exceed about 1/s = {ceiling_ratio:.1}× one subtask's capacity (~{} records/s), i.e. ~{} records/s at this vertex, whatever the parallelism.",
            num(*capacity_records_per_s),
            num(*job_max_records_per_s)
        ),
        HotKeyFact::Fix { fix, vertex } => word_fix(*fix, vertex, f),
        HotKeyFact::MoreParallelismHotKey { vertex, hot_busy_ratio } => write!(
            f,
            "More parallelism for {vertex}: the hot key stays on one subtask, which is already {} busy.",
            pct(*hot_busy_ratio)
        ),
        HotKeyFact::HotKeySummary { vertex, share_ratio, subtask, job_max_records_per_s } => write!(
            f,
            "{vertex} is the culprit: a hot key sends {} of its records to subtask {subtask}; this vertex cannot exceed ~{} records/s.",
            pct(*share_ratio),
            num(*job_max_records_per_s)
        ),
        HotKeyFact::SlowInstanceFound { .. }
        | HotKeyFact::SlowInstance { .. }
        | HotKeyFact::GcStandsOut { .. }
        | HotKeyFact::GcNotTheReason { .. }
        | HotKeyFact::FixTheNode { .. }
        | HotKeyFact::NoSaltingEven { .. }
        | HotKeyFact::MoreParallelismSlow { .. }
        | HotKeyFact::SlowInstanceSummary { .. } => word_slow_instance(fact, f),
    }
}

/// The slow-instance family: the hot subtask gets no more records than the others.
fn word_slow_instance(fact: &HotKeyFact, f: &mut Formatter<'_>) -> fmt::Result {
    match fact {
        HotKeyFact::SlowInstanceFound {
            subtask_name,
            hot_busy_ratio,
            others_median_busy_ratio,
            share_ratio,
            share_threshold_ratio,
        } => write!(
            f,
            "{subtask_name} is {} busy while the others' median is {}, but it gets only {} of the records (share {share_ratio:.2} < {share_threshold_ratio:.2}): not a key, a slow instance.",
            pct(*hot_busy_ratio),
            pct(*others_median_busy_ratio),
            pct(*share_ratio)
        ),
        HotKeyFact::SlowInstance {
            subtask_name,
            hot_busy_ratio,
            others_median_busy_ratio,
            hot_records_per_s,
            total_records_per_s,
            share_ratio,
            parallelism,
            tm,
            host,
        } => write!(
            f,
            "{subtask_name} is {} busy while the other subtasks are about {} busy, but records are spread evenly ({} of {} records/s, share {share_ratio:.2} ≈ 1/{parallelism}): not a key — the instance itself is slow. It runs on TaskManager {tm}{}.",
            pct(*hot_busy_ratio),
            pct(*others_median_busy_ratio),
            num(*hot_records_per_s),
            num(*total_records_per_s),
            OnHost(host)
        ),
        HotKeyFact::GcStandsOut { tm_gc_ms_per_s: mine, others_gc_ms_per_s: Some(o) } => write!(
            f,
            "Garbage collection on that TaskManager takes {mine:.0} ms/s against {o:.0} ms/s on the job's other TaskManagers: a likely reason."
        ),
        HotKeyFact::GcStandsOut { tm_gc_ms_per_s: mine, others_gc_ms_per_s: None } => {
            write!(f, "Garbage collection on that TaskManager takes {mine:.0} ms/s.")
        }
        HotKeyFact::GcNotTheReason { tm_gc_ms_per_s: mine, others_gc_ms_per_s: o } => write!(
            f,
            "Garbage collection is not the reason: {mine:.0} ms/s there, {o:.0} ms/s on the job's other TaskManagers."
        ),
        HotKeyFact::FixTheNode { tm, host, tm_gc_ms_per_s, subtask, reading, cause } => {
            fix_the_node(tm, host, *tm_gc_ms_per_s, *subtask, reading, *cause, f)
        }
        HotKeyFact::NoSaltingEven { vertex } => {
            write!(f, "Salting or re-keying {vertex}: its records are already spread evenly.")
        }
        HotKeyFact::MoreParallelismSlow { vertex } => {
            write!(f, "More parallelism for {vertex}: the slow instance stays slow and keeps its share of the keys.")
        }
        HotKeyFact::SlowInstanceSummary {
            vertex,
            subtask,
            tm,
            hot_busy_ratio,
            others_median_busy_ratio,
            pressure,
            on_node,
        } => {
            let (busy, others) = (pct(*hot_busy_ratio), pct(*others_median_busy_ratio));
            match on_node.as_slice() {
                [_, _, ..] if pressure.is_some() => write!(
                    f,
                    "{vertex} is the culprit: subtasks {} on TaskManager {tm} are slow ({busy} busy vs {others}) although their records are even",
                    on_node.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
                )?,
                _ => write!(
                    f,
                    "{vertex} is the culprit: subtask {subtask} on TaskManager {tm} is slow ({busy} busy vs {others}) although its records are even"
                )?,
            }
            match pressure {
                Some(p) => write!(f, ": its TaskManager shows {}.", super::resources::pressure(*p)),
                None => f.write_str("."),
            }
        }
        // The hot-key family (`word` sends only the variants above here).
        other => word(other, f),
    }
}

fn word_fix(fix: HotKeyFix, v: &str, f: &mut Formatter<'_>) -> fmt::Result {
    match fix {
        HotKeyFix::PreAggregate => write!(
            f,
            "{v} is an associative aggregate: pre-aggregate before the keyBy (a local combiner), or salt the key (key + random 0..N) and combine the partial results in a second aggregation."
        ),
        HotKeyFix::SqlTwoPhase => f.write_str(
            "In Flink SQL: table.exec.mini-batch.enabled: true, table.exec.mini-batch.allow-latency: 5s, table.exec.mini-batch.size: 5000 and table.optimizer.agg-phase-strategy: TWO_PHASE (plus table.optimizer.distinct-agg.split.enabled: true for COUNT DISTINCT).",
        ),
        HotKeyFix::NoSaltingOrdered => write!(
            f,
            "Salting is wrong for {v}: its result depends on seeing all records of a key, in order. Aggregate before it, isolate the hot key on its own path, or broadcast the small side of a join."
        ),
        HotKeyFix::SaltIfAssociative => write!(
            f,
            "Salting the key and combining partial results applies only if {v}'s logic is associative and commutative (sum, count, min, max); otherwise isolate the hot key on its own path or pre-aggregate upstream."
        ),
        HotKeyFix::TellOperatorKind => write!(
            f,
            "Tell culprit what {v} does to get the exact fix: [diagnosis.operator_kinds] \"{v}\" = \"aggregate\" (or \"join\", \"window\", \"order_dependent\")."
        ),
    }
}

/// ` on host node-7`, or nothing when the host is unknown.
struct OnHost<'a>(&'a Option<String>);

impl fmt::Display for OnHost<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(h) => write!(f, " on host {h}"),
            None => Ok(()),
        }
    }
}

/// The fix of a slow instance: the pressure its TaskManager shows, or what to look at.
fn fix_the_node(
    tm: &str,
    host: &Option<String>,
    tm_gc_ms_per_s: Option<f64>,
    subtask: u32,
    reading: &NodeReading,
    cause: Option<Pressure>,
    f: &mut Formatter<'_>,
) -> fmt::Result {
    write!(f, "Fix the node, not the key: ")?;
    let n = reading;
    match cause {
        Some(Pressure::CpuThrottled) => {
            write!(
                f,
                "TaskManager {tm}{}'s container is throttled in {} of its CFS periods",
                OnHost(host),
                pct(n.throttled_ratio.unwrap_or(0.0))
            )?;
            if let Some(o) = n.others_throttled_ratio {
                write!(f, " against {} on the job's other pods", pct(o))?;
            }
            if let Some(c) = n.cpu_limit_cores {
                write!(f, " (CPU limit {c} cores)")?;
            }
            f.write_str(": busy because throttled — give it more CPU (`kubernetes.taskmanager.cpu.amount`, `kubernetes.taskmanager.cpu.limit-factor`).")?;
        }
        Some(Pressure::Gc) => {
            write!(
                f,
                "TaskManager {tm}{} spends {} of its time in GC",
                OnHost(host),
                pct(n.gc_share_ratio.unwrap_or(0.0))
            )?;
            if let Some(m) = tm_gc_ms_per_s {
                write!(f, " ({m:.0} ms/s now)")?;
            }
            if let Some(h) = n.heap_used_ratio() {
                write!(f, ", heap {} used", pct(h))?;
            }
            f.write_str(": give it more heap (`taskmanager.memory.task.heap.size`) or keep state off the heap.")?;
        }
        Some(Pressure::OomKilled | Pressure::MemoryLimit) => {
            write!(f, "TaskManager {tm}{}'s container ", OnHost(host))?;
            f.write_str(if cause == Some(Pressure::OomKilled) {
                "was OOM-killed in the window"
            } else {
                "is at its memory limit"
            })?;
            f.write_str(": fit `taskmanager.memory.process.size` to the pod's limit.")?;
        }
        None => {
            write!(f, "look at TaskManager {tm}{} — ", OnHost(host))?;
            let mut unmeasured: Vec<&str> = Vec::new();
            if tm_gc_ms_per_s.is_none() {
                unmeasured.push("GC");
            }
            if n.throttled_ratio.is_none() {
                unmeasured.push("CPU throttling (cgroup cpu.stat nr_throttled)");
            }
            unmeasured.extend(["a noisy neighbour", "a slow local disk"]);
            write!(
                f,
                "{}, or a stuck thread (thread dump: Flink REST /taskmanagers/:id/thread-dump)",
                unmeasured.join(", ")
            )?;
            let mut ordinary: Vec<String> = Vec::new();
            if let Some(m) = tm_gc_ms_per_s {
                ordinary.push(format!("GC {m:.0} ms/s"));
            }
            if let Some(c) = n.throttled_ratio {
                ordinary.push(format!("CPU throttled {}", pct(c)));
            }
            if let (Some(c), Some(o)) = (n.cpu_load_ratio, n.others_cpu_load_ratio) {
                ordinary.push(format!("CPU load {} against {} on the others", pct(c), pct(o)));
            }
            if !ordinary.is_empty() {
                write!(f, "; measured and not standing out: {}", ordinary.join(", "))?;
            }
            f.write_str(".")?;
        }
    }
    write!(f, " Restarting that TaskManager moves subtask {subtask} elsewhere.")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::facts::Fact;

    fn words(f: HotKeyFact) -> String {
        Fact::from(f).to_string()
    }

    #[test]
    fn a_hot_key_reads_as_before() {
        let found = HotKeyFact::HotKeyFound {
            subtask_name: "agg[0]".into(),
            hot_busy_ratio: 0.96,
            share_ratio: 0.8,
            share_threshold_ratio: 0.5,
            share_factor: 2.0,
            parallelism: 4,
            others_median_busy_ratio: 0.2,
        };
        assert_eq!(
            words(found),
            "agg[0] is 96% busy and gets 80% of the records (share 0.80 ≥ 0.50 = 2/4); the others' median busy is 20%: a hot key."
        );
        // 1.25 at one decimal rounds half to even: 1.2.
        let ceiling =
            HotKeyFact::Ceiling { ceiling_ratio: 1.25, capacity_records_per_s: 2000.0, job_max_records_per_s: 2500.0 };
        assert_eq!(
            words(ceiling),
            "A key's state is indivisible: the job can never exceed about 1/s = 1.2× one subtask's capacity (~2000 records/s), i.e. ~2500 records/s at this vertex, whatever the parallelism."
        );
        assert_eq!(
            words(HotKeyFact::Fix { fix: HotKeyFix::TellOperatorKind, vertex: "x".into() }),
            "Tell culprit what x does to get the exact fix: [diagnosis.operator_kinds] \"x\" = \"aggregate\" (or \"join\", \"window\", \"order_dependent\")."
        );
    }

    #[test]
    fn a_slow_instance_names_what_stands_out_and_lists_only_what_was_not_measured() {
        use crate::model::facts::resources::NodeReading;
        let node = HotKeyFact::FixTheNode {
            tm: "tm-bad".into(),
            host: Some("node-7".into()),
            tm_gc_ms_per_s: Some(120.0),
            subtask: 1,
            reading: Box::new(NodeReading { gc_share_ratio: Some(0.12), ..NodeReading::default() }),
            cause: Some(Pressure::Gc),
        };
        assert_eq!(
            words(node),
            "Fix the node, not the key: TaskManager tm-bad on host node-7 spends 12% of its time in GC (120 ms/s now): give it more heap (`taskmanager.memory.task.heap.size`) or keep state off the heap. Restarting that TaskManager moves subtask 1 elsewhere."
        );
        let no_host = HotKeyFact::FixTheNode {
            tm: "unknown".into(),
            host: None,
            tm_gc_ms_per_s: None,
            subtask: 0,
            reading: Box::default(),
            cause: None,
        };
        assert!(words(no_host).starts_with("Fix the node, not the key: look at TaskManager unknown — GC, CPU"));
        let ordinary = HotKeyFact::FixTheNode {
            tm: "tm-1".into(),
            host: None,
            tm_gc_ms_per_s: Some(15.0),
            subtask: 0,
            reading: Box::new(NodeReading { throttled_ratio: Some(0.02), ..NodeReading::default() }),
            cause: None,
        };
        let text = words(ordinary);
        assert!(!text.contains("CPU throttling (cgroup") && text.contains("CPU throttled 2%"), "{text}");
    }

    #[test]
    fn no_hot_subtask_lists_each_busy_ratio_or_the_range() {
        let each = HotKeyFact::NoHotSubtask {
            busy: BusyRatios::Each(vec![Some(0.97), None]),
            hot_busy_threshold_ratio: 0.9,
            others_median_threshold_ratio: 0.5,
        };
        assert_eq!(
            words(each),
            "No single hot subtask: busy ratios 97%, unknown (hot needs ≥ 90% with the others' median ≤ 50%)."
        );
        let range = HotKeyFact::NoHotSubtask {
            busy: BusyRatios::Range(Box::new(Fact::from("54%–100%"))),
            hot_busy_threshold_ratio: 0.9,
            others_median_threshold_ratio: 0.5,
        };
        assert!(words(range).starts_with("No single hot subtask: busy ratios 54%–100% (hot"));
    }
}
