//! Step `hot_key`: one instance hot, the rest idle — one key, or one slow instance?
//!
//! Hits when the culprit's hottest subtask is ≥ 0.9 busy and the median of the others is
//! ≤ 0.5. Records-in rates then tell a hot key (the hot subtask gets ≥ 2/parallelism of
//! the records and ≥ 1.5× the next busiest) from a slow instance (records even: a bad
//! TaskManager, GC, CPU throttling, a stuck thread). A key's state is indivisible, so with
//! share s the job never exceeds about 1/s times one instance's capacity.

use crate::config::OperatorKind;
use crate::diagnose::signals::VertexSignals;
use crate::diagnose::steps::skew;
use crate::diagnose::{Context, StepReport, num, pct};
use crate::verdict::Finding;

pub fn run(ctx: &Context, culprit: &VertexSignals) -> StepReport {
    let t = &ctx.cfg.thresholds;
    if culprit.subtasks.len() < 2 {
        return StepReport::clear(format!("{} has one subtask; there is no skew to look at.", culprit.name));
    }
    let Some(hot) = skew::find(culprit, t) else {
        return StepReport::clear(format!(
            "No single hot subtask: busy ratios {} (hot needs ≥ {} with the others' median ≤ {}).",
            busy_list(culprit),
            pct(t.hot_subtask_busy_ratio),
            pct(t.others_busy_median_ratio)
        ));
    };
    let hot_busy = hot.busy.unwrap_or(0.0);
    let others = skew::others_median(culprit, hot.subtask).unwrap_or(0.0);
    let Some(share) = skew::share(culprit, hot.subtask) else {
        let mut r = StepReport::no_data(
            format!(
                "{} is {} busy while the others' median is {}, but records-in rates are missing: a hot key cannot be told from a slow instance.",
                culprit.subtask_name(hot.subtask),
                pct(hot_busy),
                pct(others)
            ),
            vec!["numRecordsIn".into()],
        );
        r.subtasks = Some(vec![hot.subtask]);
        return r;
    };
    let p = culprit.subtasks.len();
    let hot_rate = culprit.throughput_of(hot).unwrap_or(0.0);
    let total = culprit.throughput().unwrap_or(0.0);
    let mut evidence = vec![
        ctx.evidence(
            &culprit.subtask_name(hot.subtask),
            "busyTimeMsPerSecond",
            hot_busy,
            "ratio",
            Some(t.hot_subtask_busy_ratio),
            "busy",
        ),
        ctx.evidence(
            &culprit.name,
            "median busy of the other subtasks",
            others,
            "ratio",
            Some(t.others_busy_median_ratio),
            "busy",
        ),
        ctx.evidence(
            &culprit.subtask_name(hot.subtask),
            "share of numRecordsIn",
            share,
            "ratio",
            Some(t.hot_key_share_factor / p as f64),
            "records_in",
        ),
        ctx.evidence(
            &culprit.subtask_name(hot.subtask),
            "numRecordsIn rate",
            hot_rate,
            "records/s",
            None,
            "records_in",
        ),
    ];

    let mut r;
    if skew::is_hot_key(culprit, hot.subtask, t) {
        // Capacity of the hot subtask: what it would do at 100 % busy.
        let capacity = if hot_busy > 0.0 { hot_rate / hot_busy } else { hot_rate };
        let ceiling = 1.0 / share;
        let job_max = capacity / share;
        r = StepReport::hit(
            Finding::HotKey,
            format!(
                "{} is {} busy and gets {} of the records (share {:.2} ≥ {:.2} = {}/{}); the others' median busy is {}: a hot key.",
                culprit.subtask_name(hot.subtask),
                pct(hot_busy),
                pct(share),
                share,
                t.hot_key_share_factor / p as f64,
                t.hot_key_share_factor,
                p,
                pct(others)
            ),
        );
        r.cause.push(format!(
            "{} is {} busy and receives {} of {} records/s (share s = {:.2}, {:.1}× a uniform 1/{p}), while the other subtasks are about {} busy: one key (or a few) carries that share, and all records of a key go to one subtask.",
            culprit.subtask_name(hot.subtask),
            pct(hot_busy),
            num(hot_rate),
            num(total),
            share,
            share * p as f64,
            pct(others)
        ));
        r.cause.push(format!(
            "A key's state is indivisible: the job can never exceed about 1/s = {:.1}× one subtask's capacity (~{} records/s), i.e. ~{} records/s at this vertex, whatever the parallelism.",
            ceiling,
            num(capacity),
            num(job_max)
        ));
        r.fix.extend(hot_key_fix(culprit));
        r.not_the_fix.push(format!(
            "More parallelism for {}: the hot key stays on one subtask, which is already {} busy.",
            culprit.name,
            pct(hot_busy)
        ));
        r.summary = Some(format!(
            "{} is the culprit: a hot key sends {} of its records to subtask {}; this vertex cannot exceed ~{} records/s.",
            culprit.name,
            pct(share),
            hot.subtask,
            num(job_max)
        ));
        evidence.push(ctx.evidence(
            &culprit.name,
            "job maximum at this key share",
            job_max,
            "records/s",
            None,
            "records_in",
        ));
    } else {
        let tm = hot.tm_id.clone().unwrap_or_else(|| "unknown".into());
        let host = hot.host.clone().map(|h| format!(" on host {h}")).unwrap_or_default();
        r = StepReport::hit(
            Finding::SlowInstance,
            format!(
                "{} is {} busy while the others' median is {}, but it gets only {} of the records (share {:.2} < {:.2}): not a key, a slow instance.",
                culprit.subtask_name(hot.subtask),
                pct(hot_busy),
                pct(others),
                pct(share),
                share,
                t.hot_key_share_factor / p as f64
            ),
        );
        r.cause.push(format!(
            "{} is {} busy while the other subtasks are about {} busy, but records are spread evenly ({} of {} records/s, share {:.2} ≈ 1/{p}): not a key — the instance itself is slow. It runs on TaskManager {tm}{host}.",
            culprit.subtask_name(hot.subtask),
            pct(hot_busy),
            pct(others),
            num(hot_rate),
            num(total),
            share
        ));
        let gc = gc_comparison(ctx, hot.tm_id.as_deref());
        match gc {
            Some((mine, rest)) => {
                let stands_out = rest.is_none_or(|o| mine > 2.0 * o + 5.0);
                r.cause.push(match (stands_out, rest) {
                    (true, Some(o)) => format!("Garbage collection on that TaskManager takes {mine:.0} ms/s against {o:.0} ms/s on the job's other TaskManagers: a likely reason."),
                    (true, None) => format!("Garbage collection on that TaskManager takes {mine:.0} ms/s."),
                    (false, Some(o)) => format!("Garbage collection is not the reason: {mine:.0} ms/s there, {o:.0} ms/s on the job's other TaskManagers."),
                    (false, None) => unreachable!("no comparison means it stands out"),
                });
                r.evidence.push(ctx.evidence(
                    &tm,
                    "Status.JVM.GarbageCollector.All.Time rate",
                    mine,
                    "ms/s",
                    None,
                    "gc_time",
                ));
            }
            None => r.missing.push("Status.JVM.GarbageCollector.All.Time".into()),
        }
        r.fix.push(format!(
            "Fix the node, not the key: look at TaskManager {tm}{host} — GC{}, CPU throttling (cgroup cpu.stat nr_throttled), a noisy neighbour, a slow local disk, or a stuck thread (thread dump: Flink REST /taskmanagers/:id/thread-dump). Restarting that TaskManager moves subtask {} elsewhere.",
            gc.map(|(m, _)| format!(" ({m:.0} ms/s now)")).unwrap_or_default(),
            hot.subtask
        ));
        r.not_the_fix.push(format!("Salting or re-keying {}: its records are already spread evenly.", culprit.name));
        r.not_the_fix.push(format!(
            "More parallelism for {}: the slow instance stays slow and keeps its share of the keys.",
            culprit.name
        ));
        r.summary = Some(format!(
            "{} is the culprit: subtask {} on TaskManager {tm} is slow ({} busy vs {}) although its records are even.",
            culprit.name,
            hot.subtask,
            pct(hot_busy),
            pct(others)
        ));
    }
    r.subtasks = Some(vec![hot.subtask]);
    r.evidence = evidence;
    r
}

/// The fix for a hot key, by the operator's kind.
fn hot_key_fix(v: &VertexSignals) -> Vec<String> {
    match v.kind {
        OperatorKind::Aggregate => vec![
            format!("{} is an associative aggregate: pre-aggregate before the keyBy (a local combiner), or salt the key (key + random 0..N) and combine the partial results in a second aggregation.", v.name),
            "In Flink SQL: table.exec.mini-batch.enabled: true, table.exec.mini-batch.allow-latency: 5s, table.exec.mini-batch.size: 5000 and table.optimizer.agg-phase-strategy: TWO_PHASE (plus table.optimizer.distinct-agg.split.enabled: true for COUNT DISTINCT).".into(),
        ],
        OperatorKind::Join | OperatorKind::Window | OperatorKind::OrderDependent => vec![
            format!("Salting is wrong for {}: its result depends on seeing all records of a key, in order. Aggregate before it, isolate the hot key on its own path, or broadcast the small side of a join.", v.name),
        ],
        _ => vec![
            format!("Salting the key and combining partial results applies only if {}'s logic is associative and commutative (sum, count, min, max); otherwise isolate the hot key on its own path or pre-aggregate upstream.", v.name),
            format!("Tell culprit what {} does to get the exact fix: [diagnosis.operator_kinds] \"{}\" = \"aggregate\" (or \"join\", \"window\", \"order_dependent\").", v.name, v.name),
        ],
    }
}

/// GC time per second of `tm` and the mean over the job's other TaskManagers.
fn gc_comparison(ctx: &Context, tm: Option<&str>) -> Option<(f64, Option<f64>)> {
    let tm = tm?;
    let tms = &ctx.snapshot.taskmanagers;
    let mine = tms.iter().find(|t| t.tm_id == tm)?.gc_ms_per_s?;
    let others: Vec<f64> = tms.iter().filter(|t| t.tm_id != tm).filter_map(|t| t.gc_ms_per_s).collect();
    let rest = (!others.is_empty()).then(|| others.iter().sum::<f64>() / others.len() as f64);
    Some((mine, rest))
}

fn busy_list(v: &VertexSignals) -> String {
    let busy: Vec<f64> = v.subtasks.iter().filter_map(|s| s.busy).collect();
    if busy.len() > 8 {
        let min = busy.iter().copied().fold(f64::INFINITY, f64::min);
        let max = busy.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        return format!("{}–{} over {} subtasks", pct(min), pct(max), busy.len());
    }
    v.subtasks.iter().map(|s| s.busy.map(pct).unwrap_or_else(|| "?".into())).collect::<Vec<_>>().join(", ")
}
