//! Step `sink`: the culprit is a sink, so the fix belongs to the system it writes to.
//!
//! Hits when the culprit vertex has no downstream consumers. Tells a uniformly slow sink
//! (every subtask busy: the external system overall) from one hot subtask (one writer
//! stuck, or a hot key or document at the destination).

use crate::diagnose::signals::VertexSignals;
use crate::diagnose::steps::{headroom, skew};
use crate::diagnose::{Context, StepReport, busy_range, num, pct, pct_or_unknown};
use crate::model::verdict::Finding;

pub fn run(ctx: &Context, culprit: &VertexSignals) -> StepReport {
    if ctx.signals.graph_free {
        return StepReport::no_data(
            "Without the job graph it is unknown whether the culprit is a sink.",
            vec!["job graph (Flink REST /jobs/:id/plan)".into()],
        );
    }
    if !culprit.is_sink {
        return StepReport::clear(format!("{} has downstream consumers; it is not a sink.", culprit.name));
    }
    let t = &ctx.cfg.thresholds;
    let mut r = StepReport::hit(Finding::Sink, format!("{} is a sink vertex (no downstream consumers).", culprit.name));
    if let Some(r) = flushes_on_checkpoints(ctx, culprit, r.clone()) {
        return r;
    }
    let throughput = culprit.throughput();
    let per_record_ms = match (culprit.utilisation(), throughput) {
        (Some(rho), Some(rate)) if rate > 0.0 => Some(rho * 1000.0 * culprit.subtask_count() as f64 / rate),
        _ => None,
    };
    match skew::find(culprit, t) {
        Some(hot) => {
            let share = skew::share(culprit, hot.subtask);
            let tm = hot.tm_id.as_deref().unwrap_or("unknown");
            r.subtasks = Some(vec![hot.subtask]);
            match share {
                Some(s) if skew::is_hot_key(culprit, hot.subtask, t) => {
                    r.cause.push(format!(
                        "One sink subtask is hot: {} is busy {} and receives {} of the records (share {:.2} at parallelism {}), while the others are about {} busy: a hot key or document at the destination.",
                        culprit.subtask_name(hot.subtask),
                        pct_or_unknown(hot.busy),
                        pct(s),
                        s,
                        culprit.parallelism,
                        pct_or_unknown(skew::others_median(culprit, hot.subtask))
                    ));
                    r.fix.push(format!(
                        "Spread the hot key at the destination: write it under a different key or partition (the sink's input is keyed so {} gets {} of the records), or batch and merge writes to that key before they reach the system behind {}.",
                        culprit.subtask_name(hot.subtask),
                        pct(s),
                        culprit.name
                    ));
                }
                _ => {
                    r.cause.push(format!(
                        "One sink writer is slow: {} is busy {} while the others are about {} busy, although records are spread evenly{}: that writer's connection or the destination node it talks to is slow or stuck.",
                        culprit.subtask_name(hot.subtask),
                        pct_or_unknown(hot.busy),
                        pct_or_unknown(skew::others_median(culprit, hot.subtask)),
                        share.map(|s| format!(" (share {s:.2})")).unwrap_or_default()
                    ));
                    r.fix.push(format!(
                        "Look at the destination node, shard or partition that {} writes to, and at its TaskManager ({tm}): a stuck connection, a slow replica, a hot shard. Restarting that writer's connection (or the TaskManager) moves it elsewhere.",
                        culprit.subtask_name(hot.subtask)
                    ));
                }
            }
            r.summary = Some(
                format!(
                    "{} (sink) is the culprit: one of its subtasks ({}) is the bottleneck, the others are mostly idle.",
                    culprit.name, hot.subtask
                )
                .into(),
            );
        }
        None => {
            r.cause.push(uniform_cause(culprit, throughput, per_record_ms));
            r.fix.push(format!(
                "Fix the system behind {}: it takes {} per record. Look at its write latency, locks, throttling, indexing and partitions (database, search cluster, HTTP service or broker).",
                culprit.name,
                per_record_ms.map(|ms| format!("{ms:.2} ms")).unwrap_or_else(|| "too long".into())
            ));
            r.fix.push(
                "Write in bigger batches: raise the sink's batch size and flush interval (JDBC sink.buffer-flush.max-rows / sink.buffer-flush.interval, Elasticsearch sink.bulk-flush.max-actions, Kafka properties.linger.ms and properties.batch.size).",
            );
            if let Some(needed) =
                headroom::parallelism_needed(ctx, culprit).filter(|n| n.parallelism > culprit.parallelism_now())
            {
                r.fix.push(format!(
                    "Only if the destination scales with more connections: {}",
                    needed.sentence(
                        &culprit.name,
                        culprit.parallelism_now(),
                        ctx.cfg.thresholds.target_utilisation,
                        ctx.cfg.catch_up.as_ms() as f64 / 1000.0
                    )
                ));
            }
            r.summary = Some(format!(
                "{} (sink) is the culprit: the system it writes to is too slow ({} records/s); the vertices before it are backpressured.",
                culprit.name,
                throughput.map(num).unwrap_or_else(|| "unknown".into())
            ).into());
        }
    }
    if let Some(b) = culprit.busy_max() {
        r.evidence.push(ctx.evidence(&culprit.name, "busyTimeMsPerSecond", b, "ratio", Some(t.busy_ratio), "busy"));
    }
    if let Some(rate) = throughput {
        r.evidence.push(ctx.evidence(&culprit.name, "numRecordsIn rate", rate, "records/s", None, "records_in"));
    }
    if let Some(ms) = per_record_ms {
        r.evidence.push(ctx.evidence(&culprit.name, "busy time per record", ms, "ms", None, "busy"));
    }
    r
}

/// A sink whose stalls recur with the checkpoints, read sample by sample: it buffers writes
/// and flushes them synchronously in `snapshotState` (or commits in its pre-commit), and its
/// task thread is blocked while it does. `None` when the stalls are not the checkpoints'.
fn flushes_on_checkpoints(ctx: &Context, culprit: &VertexSignals, mut r: StepReport) -> Option<StepReport> {
    let tl = &ctx.timeline;
    let index = ctx.signals.vertices.iter().position(|v| v.id == culprit.id)?;
    if !tl.with_checkpoints || tl.ranked().first().map(|x| x.0) != Some(index) {
        return None;
    }
    let period_s = tl.period_ms? / 1000;
    let (during, between) = tl.busy_when_holding(index);
    let last_duration = ctx.snapshot.checkpoints.series.iter().rev().find_map(|p| p.last_duration_ms);
    r.cause.push(format!(
        "{} stalls the job in phase with the checkpoints (every ~{period_s} s){}: a sink that buffers its writes and flushes them synchronously in snapshotState (or commits in a pre-commit) blocks its task thread during every checkpoint, so its input buffers fill and everything upstream is backpressured until the flush ends; between checkpoints it keeps up{}.",
        culprit.name,
        last_duration.map(|d| format!(", and the last checkpoint took {}", crate::diagnose::human_secs(d / 1000.0))).unwrap_or_default(),
        match (during, between) {
            (Some(d), Some(b)) => format!(" (busy up to {} during the flush, {} between)", pct(d), pct(b)),
            _ => String::new(),
        }
    ));
    r.fix.push(format!(
        "Make {} flush by size and time between checkpoints instead of holding everything until snapshotState (buffer-flush max rows / interval: HBase sink.buffer-flush.max-rows and sink.buffer-flush.interval, JDBC sink.buffer-flush.*, Elasticsearch bulk-flush), so each checkpoint has little left to write.",
        culprit.name
    ));
    r.fix.push("Look at the destination's write throughput during the flush (write throttling, flush or compaction queues of the database or region servers): the flush takes as long as it accepts the buffered rows.");
    r.not_the_fix.push("Unaligned checkpoints: they let barriers overtake buffered data, but here the task thread itself is blocked in the snapshot.");
    r.not_the_fix.push("Checkpoints as the finding: they are slow because the sink flushes in them, not because barriers wait behind data.");
    r.summary = Some(format!(
        "{} (sink) is the culprit: it stalls the job during every checkpoint (every ~{period_s} s), flushing what it buffered.",
        culprit.name
    ).into());
    if let Some(d) = last_duration {
        r.evidence.push(ctx.evidence("job", "lastCheckpointDuration", d, "ms", None, "checkpoints"));
    }
    r.evidence.push(ctx.evidence(&culprit.name, "period of the stalls", period_s as f64, "s", None, "busy"));
    Some(r)
}

/// The cause when every subtask of the sink is busy (none hot): the destination's total
/// rate, and the writers' busy range when busy time is known (Flink ≤ 1.12 has none).
fn uniform_cause(culprit: &VertexSignals, throughput: Option<f64>, per_record_ms: Option<f64>) -> String {
    let accepts = format!(
        "the system it writes to accepts only about {} records/s in total",
        throughput.map(num).unwrap_or_else(|| "unknown".into())
    );
    // Over the subtasks with data only: one without is unknown, never 0 % busy.
    match culprit.busy_max() {
        Some(_) => format!(
            "{} of the sink are busy ({}): {accepts}{}.",
            match (culprit.subtasks.iter().filter(|s| s.busy.is_some()).count(), culprit.parallelism_now() as usize) {
                (1, all) if all > 1 => "The one subtask with data".to_string(),
                (with, all) if with > 0 && with < all => format!("The {with} subtasks with data"),
                (_, 1) => "The one subtask".to_string(),
                (_, 2) => "Both subtasks".to_string(),
                (_, n) => format!("All {n} subtasks"),
            },
            busy_range(culprit),
            per_record_ms.map(|ms| format!(" ({ms:.2} ms per record per writer)")).unwrap_or_default()
        ),
        None => format!("The sink holds the job back and {accepts} (its busy time is unknown)."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::testkit::*;
    use crate::model::verdict::Outcome;

    /// Source → map → sink; the sink gets its subtasks per test.
    fn job(sink_parallelism: u32, ship: &str) -> SnapshotBuilder {
        SnapshotBuilder::new()
            .vertex("src", "Source: orders", 2)
            .vertex("map", "map", 2)
            .vertex("sink", "Sink: billing", sink_parallelism)
            .edge("src", "map", "FORWARD")
            .edge("map", "sink", ship)
            .all_subtasks("src", 0.0, 0.9, 0.1, None)
            .all_subtasks("map", 0.05, 0.9, 0.05, 300.0)
    }

    #[test]
    fn a_uniformly_slow_sink_is_the_culprit_with_its_time_per_record() {
        // Two writers, busy 0.95 and 0.85 (ρ = 0.9), 300 records/s each (600 in total).
        // Busy time per record per writer = ρ × 1000 ms × 2 subtasks / 600 records/s
        //                                 = 0.9 × 2000 / 600 = 3.0 ms.
        let snap = job(2, "REBALANCE")
            .subtask("sink", 0, 0.95, 0.0, 0.05, 300.0)
            .subtask("sink", 1, 0.85, 0.0, 0.15, 300.0)
            .build();
        let r = on_vertex(&snap, "sink", run);
        assert_eq!((r.outcome, r.finding), (Outcome::Hit, Some(Finding::Sink)));
        assert_close(evidence(&r.evidence, "busy time per record").value, 3.0, 1e-9);
        assert_close(evidence(&r.evidence, "numRecordsIn rate").value, 600.0, 1e-9);
        assert!(r.cause[0].to_string().contains("Both subtasks of the sink are busy (85%–95%)"), "{:?}", r.cause);
        assert!(r.cause[0].to_string().contains("3.00 ms per record per writer"), "{:?}", r.cause);
        assert!(r.fix[0].to_string().contains("3.00 ms"), "{:?}", r.fix);
        // Capacity = 300/0.95 + 300/0.85 = 315.79 + 352.94 = 668.73 records/s; offered =
        // observed 600 (no source lag). ceil(2 × 600 / (668.73 × 0.7)) = ceil(2.564) = 3.
        assert!(r.fix.iter().any(|f| f.to_string().contains("parallelism 2 to 3")), "{:?}", r.fix);
        // Uniform: no particular subtask.
        assert_eq!(r.subtasks, None);
    }

    #[test]
    fn a_sink_subtask_without_busy_data_is_left_out_of_the_range_and_counted_never_read_as_0() {
        // Busy 0.95, 0.88 and none (the third writer reports no busyTimeMsPerSecond),
        // 300 records/s each. The range is over the two with data: 88%–95% (not 0%–95%),
        // and says 1 of 3 had none; ρ = (0.95 + 0.88) / 2 = 0.915 over those two.
        let snap = job(3, "REBALANCE")
            .subtask("sink", 0, 0.95, 0.0, 0.05, 300.0)
            .subtask("sink", 1, 0.88, 0.0, 0.12, 300.0)
            .subtask("sink", 2, None, None, None, 300.0)
            .build();
        let r = on_vertex(&snap, "sink", run);
        assert_eq!(r.finding, Some(Finding::Sink));
        assert!(
            r.cause[0]
                .to_string()
                .starts_with("The 2 subtasks with data of the sink are busy (88%–95%; 1 of 3 subtasks without data)"),
            "{:?}",
            r.cause
        );
        assert!(!r.cause[0].to_string().contains("0%–"), "{:?}", r.cause);
        // b_max over the subtasks with data: 0.95.
        assert_close(evidence(&r.evidence, "busyTimeMsPerSecond").value, 0.95, 1e-9);
    }

    #[test]
    fn a_sink_without_any_busy_data_says_unknown_and_gives_no_busy_evidence() {
        // Both writers report records (300/s each) but no busy time: the range is unknown
        // and no busy evidence is made up.
        let snap = job(2, "REBALANCE").all_subtasks("sink", None, None, None, 300.0).build();
        let r = on_vertex(&snap, "sink", run);
        for line in r.cause.iter().chain(&r.fix) {
            assert!(!line.to_string().contains(" 0%"), "{line}");
        }
        assert!(r.evidence.iter().all(|e| e.metric != "busyTimeMsPerSecond"), "{:?}", r.evidence);
    }

    #[test]
    fn one_hot_sink_subtask_with_even_records_is_a_stuck_writer() {
        // Busy 0.98 vs 0.2, 0.25, 0.2 (others' median 0.2 ≤ 0.5); records 250 each: share
        // 250/1000 = 0.25 < 2/4 = 0.5 → not a key: that writer is slow.
        let snap = job(4, "REBALANCE")
            .subtask("sink", 0, 0.2, 0.0, 0.8, 250.0)
            .subtask("sink", 1, 0.98, 0.0, 0.02, 250.0)
            .subtask("sink", 2, 0.25, 0.0, 0.75, 250.0)
            .subtask("sink", 3, 0.2, 0.0, 0.8, 250.0)
            .on_taskmanager("sink", 1, "tm-7", "node-7")
            .build();
        let r = on_vertex(&snap, "sink", run);
        assert_eq!(r.finding, Some(Finding::Sink));
        assert_eq!(r.subtasks, Some(vec![1]));
        assert!(r.cause[0].to_string().contains("One sink writer is slow"), "{:?}", r.cause);
        assert!(r.cause[0].to_string().contains("(share 0.25)"), "{:?}", r.cause);
        assert!(r.fix[0].to_string().contains("TaskManager (tm-7)"), "{:?}", r.fix);
    }

    #[test]
    fn one_hot_sink_subtask_with_most_records_is_a_hot_key_at_the_destination() {
        // Records 700, 100, 100, 100: share 700/1000 = 0.7 ≥ 2/4 = 0.5, and 700 ≥ 1.5 ×
        // 100 (the next busiest, subtask 2 at 0.3) → a hot key at the destination.
        let snap = job(4, "HASH")
            .subtask("sink", 0, 0.97, 0.0, 0.03, 700.0)
            .subtask("sink", 1, 0.2, 0.0, 0.8, 100.0)
            .subtask("sink", 2, 0.3, 0.0, 0.7, 100.0)
            .subtask("sink", 3, 0.1, 0.0, 0.9, 100.0)
            .build();
        let r = on_vertex(&snap, "sink", run);
        assert_eq!(r.finding, Some(Finding::Sink));
        assert_eq!(r.subtasks, Some(vec![0]));
        assert!(r.cause[0].to_string().contains("a hot key or document at the destination"), "{:?}", r.cause);
        assert!(r.cause[0].to_string().contains("share 0.70 at parallelism 4"), "{:?}", r.cause);
    }

    #[test]
    fn a_culprit_with_downstream_consumers_is_not_a_sink() {
        let snap = job(2, "FORWARD").all_subtasks("sink", 0.1, 0.0, 0.9, 300.0).build();
        let r = on_vertex(&snap, "map", run);
        assert_eq!((r.outcome, r.finding), (Outcome::Clear, None));
    }

    #[test]
    fn without_the_graph_whether_it_is_a_sink_is_unknown() {
        let snap = job(2, "FORWARD").all_subtasks("sink", 0.95, 0.0, 0.05, 300.0).without_graph().build();
        let r = on_vertex(&snap, "sink", run);
        assert_eq!(r.outcome, Outcome::NoData);
        assert_eq!(r.missing, ["job graph (Flink REST /jobs/:id/plan)"]);
    }
}
