//! Step `sink`: the culprit is a sink, so the fix belongs to the system it writes to.
//!
//! Hits when the culprit vertex has no downstream consumers. Tells a uniformly slow sink
//! (every subtask busy: the external system overall) from one hot subtask (one writer
//! stuck, or a hot key or document at the destination).

use crate::diagnose::signals::VertexSignals;
use crate::diagnose::steps::{headroom, skew};
use crate::diagnose::{Context, StepReport, busy_range};
use crate::model::facts::Fact;
use crate::model::facts::sink::SinkFact;
use crate::model::verdict::Finding;

pub fn run(ctx: &Context, culprit: &VertexSignals) -> StepReport {
    if ctx.signals.graph_free {
        return StepReport::no_data(SinkFact::NoGraph, vec!["job graph (Flink REST /jobs/:id/plan)".into()]);
    }
    if !culprit.is_sink {
        return StepReport::clear(SinkFact::NotASink { vertex: culprit.name.clone() });
    }
    let t = &ctx.cfg.thresholds;
    let mut r = StepReport::hit(Finding::Sink, SinkFact::IsASink { vertex: culprit.name.clone() });
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
                    r.cause.push(SinkFact::HotKeyAtDestination {
                        subtask_name: culprit.subtask_name(hot.subtask),
                        hot_busy_ratio: hot.busy,
                        share_ratio: s,
                        parallelism: culprit.parallelism,
                        others_median_busy_ratio: skew::others_median(culprit, hot.subtask),
                    });
                    r.fix.push(SinkFact::SpreadTheHotKey {
                        subtask_name: culprit.subtask_name(hot.subtask),
                        share_ratio: s,
                        vertex: culprit.name.clone(),
                    });
                }
                _ => {
                    r.cause.push(SinkFact::SlowWriter {
                        subtask_name: culprit.subtask_name(hot.subtask),
                        hot_busy_ratio: hot.busy,
                        others_median_busy_ratio: skew::others_median(culprit, hot.subtask),
                        share_ratio: share,
                    });
                    r.fix.push(SinkFact::LookAtTheWriter {
                        subtask_name: culprit.subtask_name(hot.subtask),
                        tm: tm.to_string(),
                    });
                }
            }
            r.summary = Some(SinkFact::OneSubtaskSummary { vertex: culprit.name.clone(), subtask: hot.subtask }.into());
        }
        None => {
            r.cause.push(uniform_cause(culprit, throughput, per_record_ms));
            r.fix.push(SinkFact::FixTheSystem { vertex: culprit.name.clone(), per_record_ms });
            r.fix.push(SinkFact::BiggerBatches);
            // Without demand (no source lag) the number would rest on the throughput the sink
            // allows, a job running flat out: no number then (README "A job running flat out").
            if let Ok(needed) = headroom::parallelism_needed(ctx, culprit)
                && needed.parallelism > culprit.parallelism_now()
            {
                let parallelism = needed.sentence(
                    &culprit.name,
                    culprit.parallelism_now(),
                    ctx.cfg.thresholds.target_utilisation,
                    ctx.cfg.catch_up.as_ms() as f64 / 1000.0,
                );
                r.fix.push(SinkFact::MoreConnections { parallelism: Box::new(Fact::from(parallelism)) });
            }
            r.summary =
                Some(SinkFact::SlowSystemSummary { vertex: culprit.name.clone(), records_per_s: throughput }.into());
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
    r.cause.push(SinkFact::FlushesOnCheckpoints {
        vertex: culprit.name.clone(),
        period_s,
        last_checkpoint_ms: last_duration,
        busy_during_flush_ratio: during,
        busy_between_ratio: between,
    });
    r.fix.push(SinkFact::FlushBySize { vertex: culprit.name.clone() });
    r.fix.push(SinkFact::DestinationThroughput);
    r.not_the_fix.push(SinkFact::NotUnalignedCheckpoints);
    r.not_the_fix.push(SinkFact::NotCheckpoints);
    r.summary = Some(SinkFact::FlushSummary { vertex: culprit.name.clone(), period_s }.into());
    if let Some(d) = last_duration {
        r.evidence.push(ctx.evidence("job", "lastCheckpointDuration", d, "ms", None, "checkpoints"));
    }
    r.evidence.push(ctx.evidence(&culprit.name, "period of the stalls", period_s as f64, "s", None, "busy"));
    Some(r)
}

/// The cause when every subtask of the sink is busy (none hot): the destination's total
/// rate, and the writers' busy range when busy time is known (Flink ≤ 1.12 has none).
fn uniform_cause(culprit: &VertexSignals, throughput: Option<f64>, per_record_ms: Option<f64>) -> SinkFact {
    // Over the subtasks with data only: one without is unknown, never 0 % busy.
    match culprit.busy_max() {
        Some(_) => SinkFact::UniformlySlow {
            with_data: culprit.subtasks.iter().filter(|s| s.busy.is_some()).count(),
            subtasks: culprit.parallelism_now() as usize,
            busy_range: Box::new(Fact::from(busy_range(culprit))),
            accepts_records_per_s: throughput,
            per_record_ms,
        },
        None => SinkFact::BusyUnknown { accepts_records_per_s: throughput },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::testkit::*;
    use crate::model::verdict::Outcome;

    /// The sink fact a fact is, or a panic saying what it is instead.
    fn sink(f: &Fact) -> &SinkFact {
        match f {
            Fact::Sink(s) => s,
            other => panic!("not a sink fact: {other:?}"),
        }
    }

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
        let SinkFact::UniformlySlow { with_data, subtasks, accepts_records_per_s, per_record_ms, .. } =
            sink(&r.cause[0])
        else {
            panic!("{:?}", r.cause)
        };
        assert_eq!((*with_data, *subtasks), (2, 2));
        assert_close(accepts_records_per_s.unwrap(), 600.0, 1e-9);
        assert_close(per_record_ms.unwrap(), 3.0, 1e-9);
        let SinkFact::FixTheSystem { per_record_ms, .. } = sink(&r.fix[0]) else { panic!("{:?}", r.fix) };
        assert_close(per_record_ms.unwrap(), 3.0, 1e-9);
        assert_eq!(*sink(&r.fix[1]), SinkFact::BiggerBatches);
        // No source lag: the demand is unknown, so no number of connections is advised.
        assert_eq!(r.fix.len(), 2, "{:?}", r.fix);
        let SinkFact::SlowSystemSummary { records_per_s, .. } = sink(r.summary.as_ref().unwrap()) else {
            panic!("{:?}", r.summary)
        };
        assert_close(records_per_s.unwrap(), 600.0, 1e-9);
        assert!(r.cause[0].to_string().contains("Both subtasks of the sink are busy (85%–95%)"), "{:?}", r.cause);
        assert!(r.cause[0].to_string().contains("3.00 ms per record per writer"), "{:?}", r.cause);
        assert!(r.fix[0].to_string().contains("3.00 ms"), "{:?}", r.fix);
        // Uniform: no particular subtask.
        assert_eq!(r.subtasks, None);
    }

    #[test]
    fn with_the_demand_known_a_slow_sink_gets_the_connections_it_would_need() {
        // As above, with pendingRecords steady at 0 (the source keeps up): offered = observed
        // 600, known. Capacity = 300/0.95 + 300/0.85 = 315.79 + 352.94 = 668.73 records/s;
        // ceil(2 × 600 / (668.73 × 0.7)) = ceil(2.564) = 3.
        let snap = job(2, "REBALANCE")
            .subtask("sink", 0, 0.95, 0.0, 0.05, 300.0)
            .subtask("sink", 1, 0.85, 0.0, 0.15, 300.0)
            .records_out("src", 0, 300.0)
            .records_out("src", 1, 300.0)
            .pending_records("src", 0, line(-240, 0, 60, 0.0, 0.0))
            .pending_records("src", 1, line(-240, 0, 60, 0.0, 0.0))
            .build();
        let r = on_vertex(&snap, "sink", run);
        assert!(matches!(sink(&r.fix[2]), SinkFact::MoreConnections { .. }), "{:?}", r.fix);
        assert!(r.fix[2].to_string().contains("parallelism 2 to 3"), "{:?}", r.fix);
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
        // Two of the three writers report busy time.
        assert!(
            matches!(sink(&r.cause[0]), SinkFact::UniformlySlow { with_data: 2, subtasks: 3, .. }),
            "{:?}",
            r.cause
        );
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
        // 2 × 300 = 600 records/s in total; no busy time, so no time per record either.
        assert_eq!(*sink(&r.cause[0]), SinkFact::BusyUnknown { accepts_records_per_s: Some(600.0) });
        assert_eq!(*sink(&r.fix[0]), SinkFact::FixTheSystem { vertex: "Sink: billing".into(), per_record_ms: None });
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
        // Others' median busy = median(0.2, 0.25, 0.2) = 0.2.
        let SinkFact::SlowWriter { subtask_name, hot_busy_ratio, others_median_busy_ratio, share_ratio } =
            sink(&r.cause[0])
        else {
            panic!("{:?}", r.cause)
        };
        assert_eq!(subtask_name, "Sink: billing[1]");
        assert_close(hot_busy_ratio.unwrap(), 0.98, 1e-12);
        assert_close(others_median_busy_ratio.unwrap(), 0.2, 1e-9);
        assert_close(share_ratio.unwrap(), 0.25, 1e-9);
        assert_eq!(
            *sink(&r.fix[0]),
            SinkFact::LookAtTheWriter { subtask_name: "Sink: billing[1]".into(), tm: "tm-7".into() }
        );
        assert_eq!(
            *sink(r.summary.as_ref().unwrap()),
            SinkFact::OneSubtaskSummary { vertex: "Sink: billing".into(), subtask: 1 }
        );
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
        // Others' median busy = median(0.2, 0.3, 0.1) = 0.2.
        let SinkFact::HotKeyAtDestination {
            subtask_name,
            hot_busy_ratio,
            share_ratio,
            parallelism,
            others_median_busy_ratio,
        } = sink(&r.cause[0])
        else {
            panic!("{:?}", r.cause)
        };
        assert_eq!((subtask_name.as_str(), *parallelism), ("Sink: billing[0]", 4));
        assert_close(hot_busy_ratio.unwrap(), 0.97, 1e-12);
        assert_close(*share_ratio, 0.7, 1e-9);
        assert_close(others_median_busy_ratio.unwrap(), 0.2, 1e-9);
        assert!(
            matches!(sink(&r.fix[0]), SinkFact::SpreadTheHotKey { share_ratio, .. } if (share_ratio - 0.7).abs() < 1e-9),
            "{:?}",
            r.fix
        );
        assert!(r.cause[0].to_string().contains("a hot key or document at the destination"), "{:?}", r.cause);
        assert!(r.cause[0].to_string().contains("share 0.70 at parallelism 4"), "{:?}", r.cause);
    }

    #[test]
    fn a_culprit_with_downstream_consumers_is_not_a_sink() {
        let snap = job(2, "FORWARD").all_subtasks("sink", 0.1, 0.0, 0.9, 300.0).build();
        let r = on_vertex(&snap, "map", run);
        assert_eq!((r.outcome, r.finding), (Outcome::Clear, None));
        assert_eq!(*sink(&r.detail), SinkFact::NotASink { vertex: "map".into() });
    }

    #[test]
    fn without_the_graph_whether_it_is_a_sink_is_unknown() {
        let snap = job(2, "FORWARD").all_subtasks("sink", 0.95, 0.0, 0.05, 300.0).without_graph().build();
        let r = on_vertex(&snap, "sink", run);
        assert_eq!(r.outcome, Outcome::NoData);
        assert_eq!(*sink(&r.detail), SinkFact::NoGraph);
        assert_eq!(r.missing, ["job graph (Flink REST /jobs/:id/plan)"]);
    }
}
