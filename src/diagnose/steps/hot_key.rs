//! Step `hot_key`: one instance hot, the rest idle — one key, or one slow instance?
//!
//! Hits when the culprit's hottest subtask is ≥ 0.9 busy and the median of the others is
//! ≤ 0.5. Records-in rates then tell a hot key (the hot subtask gets ≥ 2/parallelism of
//! the records and ≥ 1.5× the next busiest) from a slow instance (records even: a bad
//! TaskManager, GC, CPU throttling, a stuck thread). A key's state is indivisible, so with
//! share s the job never exceeds about 1/s times one instance's capacity.

use crate::config::OperatorKind;
use crate::diagnose::signals::{SubtaskSignals, VertexSignals};
use crate::diagnose::steps::skew;
use crate::diagnose::{Context, StepReport};
use crate::model::facts::Fact;
use crate::model::facts::hot_key::{BusyRatios, HotKeyFact, HotKeyFix};
use crate::model::facts::resources::{NodeReading, Pressure};
use crate::model::verdict::{Evidence, Finding};

pub fn run(ctx: &Context, culprit: &VertexSignals) -> StepReport {
    let t = &ctx.cfg.thresholds;
    if culprit.missing_subtasks() > 0 {
        return StepReport::no_data(
            HotKeyFact::SubtasksMissing {
                vertex: culprit.name.clone(),
                reporting: culprit.subtask_count(),
                parallelism: culprit.parallelism,
            },
            vec![format!(
                "metrics of {} subtasks of {} (a TaskManager not scraped?)",
                culprit.missing_subtasks(),
                culprit.name
            )],
        );
    }
    if culprit.subtasks.len() < 2 {
        return StepReport::clear(HotKeyFact::OneSubtask { vertex: culprit.name.clone() });
    }
    if culprit.busy_max().is_none() {
        // Flink ≤ 1.12 reports no busy time: a hot subtask cannot be told from the others.
        return StepReport::no_data(
            HotKeyFact::BusyUnknown { vertex: culprit.name.clone() },
            vec!["busyTimeMsPerSecond".into()],
        );
    }
    let Some(hot) = skew::find(culprit, t) else {
        return StepReport::clear(HotKeyFact::NoHotSubtask {
            busy: busy_list(culprit),
            hot_busy_threshold_ratio: t.hot_subtask_busy_ratio,
            others_median_threshold_ratio: t.others_busy_median_ratio,
        });
    };
    let hot_busy = hot.busy.unwrap_or(0.0);
    let others = skew::others_median(culprit, hot.subtask).unwrap_or(0.0);
    let Some(share) = skew::share(culprit, hot.subtask) else {
        let mut r = StepReport::no_data(
            HotKeyFact::RecordsUnknown {
                subtask_name: culprit.subtask_name(hot.subtask),
                hot_busy_ratio: hot_busy,
                others_median_busy_ratio: others,
            },
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

    let h = Hot { hot, hot_busy, others, share, p, hot_rate, total };
    let mut r = if skew::is_hot_key(culprit, hot.subtask, t) {
        hot_key_report(ctx, culprit, &h, &mut evidence)
    } else {
        slow_instance_report(ctx, culprit, &h, &mut evidence)
    };
    // The slow node's other busy subtasks, when it named them, else the hot one.
    r.subtasks = r.subtasks.take().or(Some(vec![hot.subtask]));
    r.evidence = evidence;
    r
}

/// The hot subtask and what it is measured against.
#[derive(Clone, Copy)]
struct Hot<'a> {
    hot: &'a SubtaskSignals,
    hot_busy: f64,
    /// Median busy ratio of the other subtasks.
    others: f64,
    /// The hot subtask's share of the vertex's records.
    share: f64,
    /// Parallelism (subtasks reporting).
    p: usize,
    /// The hot subtask's records-in rate, records/s.
    hot_rate: f64,
    /// The vertex's records-in rate, records/s.
    total: f64,
}

/// The hot subtask gets the records: a hot key, and the ceiling it puts on the job.
fn hot_key_report(ctx: &Context, culprit: &VertexSignals, h: &Hot, evidence: &mut Vec<Evidence>) -> StepReport {
    let Hot { hot, hot_busy, others, share, p, hot_rate, total } = *h;
    let t = &ctx.cfg.thresholds;
    // Capacity of the hot subtask: what it would do at 100 % busy.
    let capacity = if hot_busy > 0.0 { hot_rate / hot_busy } else { hot_rate };
    let ceiling = 1.0 / share;
    let job_max = capacity / share;
    let subtask_name = culprit.subtask_name(hot.subtask);
    let mut r = StepReport::hit(
        Finding::HotKey,
        HotKeyFact::HotKeyFound {
            subtask_name: subtask_name.clone(),
            hot_busy_ratio: hot_busy,
            share_ratio: share,
            share_threshold_ratio: t.hot_key_share_factor / p as f64,
            share_factor: t.hot_key_share_factor,
            parallelism: p,
            others_median_busy_ratio: others,
        },
    );
    r.cause.push(HotKeyFact::HotKeyShare {
        subtask_name,
        hot_busy_ratio: hot_busy,
        hot_records_per_s: hot_rate,
        total_records_per_s: total,
        share_ratio: share,
        parallelism: p,
        others_median_busy_ratio: others,
    });
    r.cause.push(HotKeyFact::Ceiling {
        ceiling_ratio: ceiling,
        capacity_records_per_s: capacity,
        job_max_records_per_s: job_max,
    });
    r.fix.extend(hot_key_fix(culprit).iter().map(|&fix| HotKeyFact::Fix { fix, vertex: culprit.name.clone() }));
    r.not_the_fix.push(HotKeyFact::MoreParallelismHotKey { vertex: culprit.name.clone(), hot_busy_ratio: hot_busy });
    r.summary = Some(
        HotKeyFact::HotKeySummary {
            vertex: culprit.name.clone(),
            share_ratio: share,
            subtask: hot.subtask,
            job_max_records_per_s: job_max,
        }
        .into(),
    );
    evidence.push(ctx.evidence(
        &culprit.name,
        "job maximum at this key share",
        job_max,
        "records/s",
        None,
        "records_in",
    ));
    r
}

/// The hot subtask gets no more records than the others: a slow instance, and where it
/// runs.
fn slow_instance_report(ctx: &Context, culprit: &VertexSignals, h: &Hot, evidence: &mut Vec<Evidence>) -> StepReport {
    let Hot { hot, hot_busy, others, share, p, hot_rate, total } = *h;
    let t = &ctx.cfg.thresholds;
    let tm = hot.tm_id.clone().unwrap_or_else(|| "unknown".into());
    let subtask_name = culprit.subtask_name(hot.subtask);
    let mut r = StepReport::hit(
        Finding::SlowInstance,
        HotKeyFact::SlowInstanceFound {
            subtask_name: subtask_name.clone(),
            hot_busy_ratio: hot_busy,
            others_median_busy_ratio: others,
            share_ratio: share,
            share_threshold_ratio: t.hot_key_share_factor / p as f64,
        },
    );
    r.cause.push(HotKeyFact::SlowInstance {
        subtask_name,
        hot_busy_ratio: hot_busy,
        others_median_busy_ratio: others,
        hot_records_per_s: hot_rate,
        total_records_per_s: total,
        share_ratio: share,
        parallelism: p,
        tm: tm.clone(),
        host: hot.host.clone(),
    });
    let gc = gc_comparison(ctx, hot.tm_id.as_deref());
    match gc {
        Some((mine, rest)) => {
            // No other TaskManager to compare with: it stands out.
            let stands_out = rest.is_none_or(|o| mine > 2.0 * o + 5.0);
            r.cause.push(match (stands_out, rest) {
                (false, Some(o)) => HotKeyFact::GcNotTheReason { tm_gc_ms_per_s: mine, others_gc_ms_per_s: o },
                _ => HotKeyFact::GcStandsOut { tm_gc_ms_per_s: mine, others_gc_ms_per_s: rest },
            });
            evidence.push(ctx.evidence(
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
    let reading = hot.tm_id.as_deref().map(|id| super::resources::reading(ctx, id)).unwrap_or_default();
    let cause = node_cause(ctx, &reading, gc);
    // A node whose pressure is over its threshold is that pressure's finding, its slow
    // subtasks the ones on that TaskManager ("say which one it is"); else a slow instance.
    if let Some(finding) = cause.and_then(|c| pressure_finding(ctx, &reading, c)) {
        r.finding = Some(finding);
        let on_node: Vec<u32> = culprit
            .subtasks
            .iter()
            .filter(|s| s.tm_id.is_some() && s.tm_id == hot.tm_id)
            .filter(|s| s.busy.is_some_and(|b| b >= t.hot_subtask_busy_ratio))
            .map(|s| s.subtask)
            .collect();
        r.subtasks = (!on_node.is_empty()).then_some(on_node);
    }
    if let Some(ratio) = reading.throttled_ratio {
        evidence.push(ctx.evidence(
            &tm,
            "container_cpu_cfs_throttled_periods_total / container_cpu_cfs_periods_total",
            ratio,
            "ratio",
            Some(t.cpu_throttled_ratio),
            "container_cfs_throttled",
        ));
    }
    r.fix.push(HotKeyFact::FixTheNode {
        tm: tm.clone(),
        host: hot.host.clone(),
        tm_gc_ms_per_s: gc.map(|(m, _)| m),
        subtask: hot.subtask,
        reading: Box::new(reading),
        cause,
    });
    r.not_the_fix.push(HotKeyFact::NoSaltingEven { vertex: culprit.name.clone() });
    r.not_the_fix.push(HotKeyFact::MoreParallelismSlow { vertex: culprit.name.clone() });
    r.summary = Some(
        HotKeyFact::SlowInstanceSummary {
            vertex: culprit.name.clone(),
            subtask: hot.subtask,
            tm,
            hot_busy_ratio: hot_busy,
            others_median_busy_ratio: others,
            pressure: cause.filter(|_| r.finding != Some(Finding::SlowInstance)),
            on_node: r.subtasks.clone().unwrap_or_default(),
        }
        .into(),
    );
    r
}

/// The finding of a node's pressure when it is over the threshold `resources` judges it by
/// (GC standing out below `gc_time_share` names it in the fix, not as the finding).
fn pressure_finding(ctx: &Context, n: &NodeReading, cause: Pressure) -> Option<Finding> {
    let over = super::resources::pressures(ctx, n);
    over.iter().any(|(p, _)| *p == cause).then_some(match cause {
        Pressure::Gc => Finding::GcPressure,
        Pressure::OomKilled | Pressure::MemoryLimit => Finding::MemoryLimit,
        Pressure::CpuThrottled => Finding::CpuThrottled,
    })
}

/// The pressure that explains a slow instance's TaskManager: over its threshold
/// (`resources::pressures`) and, for GC and throttling, above the job's other TaskManagers
/// (GC: more than twice their mean plus 5 ms/s, as [`GcStandsOut`](HotKeyFact::GcStandsOut)).
fn node_cause(ctx: &Context, n: &NodeReading, gc: Option<(f64, Option<f64>)>) -> Option<Pressure> {
    let over = super::resources::pressures(ctx, n);
    let memory = over.iter().map(|(p, _)| *p).find(|p| matches!(p, Pressure::OomKilled | Pressure::MemoryLimit));
    let gc_stands_out = gc.is_some_and(|(mine, rest)| rest.is_none_or(|o| mine > 2.0 * o + 5.0));
    let margin = ctx.cfg.thresholds.stand_out_margin;
    let throttled = over.iter().any(|(p, _)| *p == Pressure::CpuThrottled)
        && n.others_throttled_ratio.is_none_or(|o| n.throttled_ratio.unwrap_or(0.0) > o + margin);
    memory.or(gc_stands_out.then_some(Pressure::Gc)).or(throttled.then_some(Pressure::CpuThrottled))
}

/// The fix for a hot key, by the operator's kind.
fn hot_key_fix(v: &VertexSignals) -> &'static [HotKeyFix] {
    match v.kind {
        OperatorKind::Aggregate => &[HotKeyFix::PreAggregate, HotKeyFix::SqlTwoPhase],
        OperatorKind::Join | OperatorKind::Window | OperatorKind::OrderDependent => &[HotKeyFix::NoSaltingOrdered],
        _ => &[HotKeyFix::SaltIfAssociative, HotKeyFix::TellOperatorKind],
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

/// Each subtask's busy ratio, or the busy range when there are more than 8.
fn busy_list(v: &VertexSignals) -> BusyRatios {
    if v.subtasks.len() > 8 {
        return BusyRatios::Range(Box::new(Fact::from(crate::diagnose::busy_range(v))));
    }
    BusyRatios::Each(v.subtasks.iter().map(|s| s.busy).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::testkit::*;
    use crate::model::verdict::Outcome;

    /// The hot-key fact a fact is, or a panic saying what it is instead.
    fn hk(f: &Fact) -> &HotKeyFact {
        match f {
            Fact::HotKey(h) => h,
            other => panic!("not a hot-key fact: {other:?}"),
        }
    }

    /// Source → `name` (keyed, parallelism `p`) → sink.
    fn job(name: &str, p: u32) -> SnapshotBuilder {
        SnapshotBuilder::new()
            .vertex("src", "Source: clicks", 2)
            .vertex("agg", name, p)
            .vertex("sink", "Sink: out", 2)
            .edge("src", "agg", "HASH")
            .edge("agg", "sink", "FORWARD")
            .all_subtasks("src", 0.0, 0.9, 0.1, None)
            .all_subtasks("sink", 0.1, 0.0, 0.9, 1200.0)
    }

    /// Subtask 0 at 0.96 busy with 1920 records/s; the others 0.3, 0.2, 0.1 busy with 160
    /// each. Total 1920 + 3 × 160 = 2400 records/s.
    fn hot_key_job(name: &str) -> SnapshotBuilder {
        job(name, 4)
            .subtask("agg", 0, 0.96, 0.0, 0.04, 1920.0)
            .subtask("agg", 1, 0.3, 0.0, 0.7, 160.0)
            .subtask("agg", 2, 0.2, 0.0, 0.8, 160.0)
            .subtask("agg", 3, 0.1, 0.0, 0.9, 160.0)
    }

    #[test]
    fn a_hot_subtask_with_most_of_the_records_is_a_hot_key_with_its_ceiling() {
        // share s = 1920 / 2400 = 0.8 ≥ 2/4 = 0.5, and 1920 ≥ 1.5 × 160 (the next busiest,
        // subtask 1) = 240 → hot key. Others' median busy = median(0.3, 0.2, 0.1) = 0.2.
        // Capacity of the hot subtask = 1920 / 0.96 = 2000 records/s. Ceiling 1/s = 1.25×;
        // job maximum = capacity / s = 2000 / 0.8 = 2500 records/s.
        let snap = hot_key_job("GroupAggregate(groupBy=[user], select=[user, COUNT(*)])").build();
        let r = on_vertex(&snap, "agg", run);
        assert_eq!((r.outcome, r.finding), (Outcome::Hit, Some(Finding::HotKey)));
        assert_eq!(r.subtasks, Some(vec![0]));
        assert_close(evidence(&r.evidence, "share of numRecordsIn").value, 0.8, 1e-9);
        assert_close(evidence(&r.evidence, "share of numRecordsIn").threshold.unwrap(), 0.5, 1e-12);
        assert_close(evidence(&r.evidence, "median busy of the other subtasks").value, 0.2, 1e-9);
        assert_close(evidence(&r.evidence, "job maximum at this key share").value, 2500.0, 1e-6);
        // The detail: share 0.8 against the threshold 2/4 = 0.5.
        let HotKeyFact::HotKeyFound {
            hot_busy_ratio,
            share_ratio,
            share_threshold_ratio,
            share_factor,
            parallelism,
            others_median_busy_ratio,
            ..
        } = *hk(&r.detail)
        else {
            panic!("{:?}", r.detail)
        };
        assert_close(hot_busy_ratio, 0.96, 1e-12);
        assert_close(share_ratio, 0.8, 1e-9);
        assert_close(share_threshold_ratio, 0.5, 1e-12);
        assert_eq!((share_factor, parallelism), (2.0, 4));
        assert_close(others_median_busy_ratio, 0.2, 1e-9);
        // The share: 1920 of 2400 records/s.
        let HotKeyFact::HotKeyShare { hot_records_per_s, total_records_per_s, share_ratio, parallelism, .. } =
            *hk(&r.cause[0])
        else {
            panic!("{:?}", r.cause)
        };
        assert_close(hot_records_per_s, 1920.0, 1e-9);
        assert_close(total_records_per_s, 2400.0, 1e-9);
        assert_close(share_ratio, 0.8, 1e-9);
        assert_eq!(parallelism, 4);
        // The ceiling: 1/s = 1/0.8 = 1.25×, capacity 2000, job maximum 2500 records/s.
        let HotKeyFact::Ceiling { ceiling_ratio, capacity_records_per_s, job_max_records_per_s } = *hk(&r.cause[1])
        else {
            panic!("{:?}", r.cause)
        };
        assert_close(ceiling_ratio, 1.25, 1e-9);
        assert_close(capacity_records_per_s, 2000.0, 1e-6);
        assert_close(job_max_records_per_s, 2500.0, 1e-6);
        // 1.25 printed with one decimal: round half to even → "1.2".
        assert!(r.cause[1].to_string().contains("1/s = 1.2×"), "{:?}", r.cause);
        // An aggregate: pre-aggregate / two-phase aggregation applies.
        let vertex = "GroupAggregate(groupBy=[user], select=[user, COUNT(*)])".to_string();
        assert_eq!(
            r.fix.iter().map(hk).cloned().collect::<Vec<_>>(),
            [
                HotKeyFact::Fix { fix: HotKeyFix::PreAggregate, vertex: vertex.clone() },
                HotKeyFact::Fix { fix: HotKeyFix::SqlTwoPhase, vertex: vertex.clone() }
            ]
        );
        assert!(r.fix.iter().any(|f| f.to_string().contains("TWO_PHASE")), "{:?}", r.fix);
        assert_eq!(
            *hk(&r.not_the_fix[0]),
            HotKeyFact::MoreParallelismHotKey { vertex: vertex.clone(), hot_busy_ratio: 0.96 }
        );
        let HotKeyFact::HotKeySummary { share_ratio, subtask, job_max_records_per_s, .. } =
            *hk(r.summary.as_ref().unwrap())
        else {
            panic!("{:?}", r.summary)
        };
        assert_close(share_ratio, 0.8, 1e-9);
        assert_eq!(subtask, 0);
        assert_close(job_max_records_per_s, 2500.0, 1e-6);
    }

    #[test]
    fn a_vertex_with_a_subtask_not_reporting_cannot_be_judged_for_skew() {
        // Subtasks 0, 1, 2 of 4 report; with subtask 3 unseen, neither the share
        // s = 1920 / (1920 + 160 + 160) nor the others' median busy means anything.
        let snap = job("agg", 4)
            .subtask("agg", 0, 0.96, 0.0, 0.04, 1920.0)
            .subtask("agg", 1, 0.3, 0.0, 0.7, 160.0)
            .subtask("agg", 2, 0.2, 0.0, 0.8, 160.0)
            .build();
        let r = on_vertex(&snap, "agg", run);
        assert_eq!((r.outcome, r.finding), (Outcome::NoData, None));
        assert_eq!(*hk(&r.detail), HotKeyFact::SubtasksMissing { vertex: "agg".into(), reporting: 3, parallelism: 4 });
        assert!(r.detail.to_string().contains("Only 3 of agg's 4 subtasks"), "{}", r.detail);
        assert_eq!(verdict(&snap).confidence, crate::model::verdict::Confidence::Low);
    }

    #[test]
    fn a_hot_key_in_a_join_is_not_salted() {
        let snap = hot_key_job("Join(joinType=[InnerJoin])").build();
        let r = on_vertex(&snap, "agg", run);
        assert_eq!(r.finding, Some(Finding::HotKey));
        assert_eq!(
            r.fix.iter().map(hk).cloned().collect::<Vec<_>>(),
            [HotKeyFact::Fix { fix: HotKeyFix::NoSaltingOrdered, vertex: "Join(joinType=[InnerJoin])".into() }]
        );
        assert!(r.fix[0].to_string().starts_with("Salting is wrong"), "{:?}", r.fix);
    }

    #[test]
    fn a_hot_key_in_an_operator_of_unknown_kind_says_when_salting_applies() {
        let snap = hot_key_job("fraud-score").build();
        let r = on_vertex(&snap, "agg", run);
        assert_eq!(
            r.fix.iter().map(hk).cloned().collect::<Vec<_>>(),
            [
                HotKeyFact::Fix { fix: HotKeyFix::SaltIfAssociative, vertex: "fraud-score".into() },
                HotKeyFact::Fix { fix: HotKeyFix::TellOperatorKind, vertex: "fraud-score".into() }
            ]
        );
        assert!(r.fix[0].to_string().contains("applies only if"), "{:?}", r.fix);
        assert!(r.fix[1].to_string().contains("[diagnosis.operator_kinds]"), "{:?}", r.fix);
    }

    #[test]
    fn a_share_just_under_two_over_p_is_not_a_key() {
        // 490 of 1000 records/s: s = 0.49 < 2/4 = 0.5 (although 490 ≥ 1.5 × 170) → the
        // hot subtask is a slow instance.
        let snap = job("score", 4)
            .subtask("agg", 0, 0.95, 0.0, 0.05, 490.0)
            .subtask("agg", 1, 0.3, 0.0, 0.7, 170.0)
            .subtask("agg", 2, 0.2, 0.0, 0.8, 170.0)
            .subtask("agg", 3, 0.1, 0.0, 0.9, 170.0)
            .build();
        assert_eq!(on_vertex(&snap, "agg", run).finding, Some(Finding::SlowInstance));
    }

    #[test]
    fn a_large_share_not_well_above_the_next_busiest_is_not_a_key() {
        // Records 500, 400, 50, 50: s = 500 / 1000 = 0.5 ≥ 2/4, but the next busiest
        // (subtask 1, busy 0.45) gets 400 and 500 < 1.5 × 400 = 600 → not a key.
        let snap = job("score", 4)
            .subtask("agg", 0, 0.95, 0.0, 0.05, 500.0)
            .subtask("agg", 1, 0.45, 0.0, 0.55, 400.0)
            .subtask("agg", 2, 0.1, 0.0, 0.9, 50.0)
            .subtask("agg", 3, 0.1, 0.0, 0.9, 50.0)
            .build();
        assert_eq!(on_vertex(&snap, "agg", run).finding, Some(Finding::SlowInstance));
    }

    /// Busy 0.97 vs 0.3, 0.3, 0.2 with 250 records/s each: share 250/1000 = 0.25 < 0.5.
    fn slow_instance_job(gc_bad: f64) -> SnapshotBuilder {
        job("score", 4)
            .subtask("agg", 0, 0.3, 0.0, 0.7, 250.0)
            .subtask("agg", 1, 0.97, 0.0, 0.03, 250.0)
            .subtask("agg", 2, 0.3, 0.0, 0.7, 250.0)
            .subtask("agg", 3, 0.2, 0.0, 0.8, 250.0)
            .on_taskmanager("agg", 0, "tm-a", "node-1")
            .on_taskmanager("agg", 1, "tm-bad", "node-7")
            .on_taskmanager("agg", 2, "tm-b", "node-2")
            .on_taskmanager("agg", 3, "tm-a", "node-1")
            .taskmanager("tm-a", 10.0, 0.6)
            .taskmanager("tm-bad", gc_bad, 0.9)
            .taskmanager("tm-b", 14.0, 0.6)
    }

    #[test]
    fn a_hot_subtask_with_even_records_is_a_slow_instance_named_by_its_taskmanager() {
        // GC on tm-bad 120 ms/s; the others' mean (10 + 14) / 2 = 12 ms/s; 120 > 2 × 12 + 5
        // = 29 → GC stands out.
        let snap = slow_instance_job(120.0).build();
        let r = on_vertex(&snap, "agg", run);
        assert_eq!((r.outcome, r.finding), (Outcome::Hit, Some(Finding::SlowInstance)));
        assert_eq!(r.subtasks, Some(vec![1]));
        assert_close(evidence(&r.evidence, "share of numRecordsIn").value, 0.25, 1e-9);
        // Share 250 / 1000 = 0.25 < 2/4 = 0.5; the others' median busy is median(0.3, 0.3,
        // 0.2) = 0.3.
        let HotKeyFact::SlowInstanceFound {
            hot_busy_ratio,
            others_median_busy_ratio,
            share_ratio,
            share_threshold_ratio,
            ..
        } = *hk(&r.detail)
        else {
            panic!("{:?}", r.detail)
        };
        assert_close(hot_busy_ratio, 0.97, 1e-12);
        assert_close(others_median_busy_ratio, 0.3, 1e-9);
        assert_close(share_ratio, 0.25, 1e-9);
        assert_close(share_threshold_ratio, 0.5, 1e-12);
        let HotKeyFact::SlowInstance { hot_records_per_s, total_records_per_s, parallelism, tm, host, .. } =
            hk(&r.cause[0])
        else {
            panic!("{:?}", r.cause)
        };
        assert_close(*hot_records_per_s, 250.0, 1e-9);
        assert_close(*total_records_per_s, 1000.0, 1e-9);
        assert_eq!((*parallelism, tm.as_str(), host.as_deref()), (4, "tm-bad", Some("node-7")));
        assert!(r.cause[0].to_string().contains("TaskManager tm-bad on host node-7"), "{:?}", r.cause);
        let HotKeyFact::GcStandsOut { tm_gc_ms_per_s, others_gc_ms_per_s: Some(others_gc) } = *hk(&r.cause[1]) else {
            panic!("{:?}", r.cause)
        };
        assert_close(tm_gc_ms_per_s, 120.0, 1e-9);
        assert_close(others_gc, 12.0, 1e-9);
        let HotKeyFact::FixTheNode { tm, host, tm_gc_ms_per_s: Some(gc), subtask: 1, reading, cause } = hk(&r.fix[0])
        else {
            panic!("{:?}", r.fix)
        };
        assert_eq!((tm.as_str(), host.as_deref(), *cause), ("tm-bad", Some("node-7"), Some(Pressure::Gc)));
        assert_close(*gc, 120.0, 1e-9);
        // 120 ms/s ÷ 1000 = 0.12 of the time; the others' (10 + 14) / 2 / 1000 = 0.012.
        assert_close(reading.gc_share_ratio.unwrap(), 0.12, 1e-12);
        assert_close(reading.others_gc_share_ratio.unwrap(), 0.012, 1e-12);
        // CPU load 0.9 against the others' (0.6 + 0.6) / 2; no pod: throttling unmeasured.
        assert_close(reading.others_cpu_load_ratio.unwrap(), 0.6, 1e-12);
        assert_eq!(reading.throttled_ratio, None);
        assert!(r.fix[0].to_string().contains("(120 ms/s now)"), "{:?}", r.fix);
        assert!(
            matches!(hk(r.summary.as_ref().unwrap()), HotKeyFact::SlowInstanceSummary { tm, subtask: 1, .. } if tm == "tm-bad"),
            "{:?}",
            r.summary
        );
        assert!(
            r.not_the_fix.contains(&HotKeyFact::NoSaltingEven { vertex: "score".into() }.into()),
            "{:?}",
            r.not_the_fix
        );
    }

    #[test]
    fn a_slow_instance_with_ordinary_gc_says_gc_is_not_the_reason() {
        // 15 ms/s against 12: 15 ≤ 2 × 12 + 5 = 29.
        let snap = slow_instance_job(15.0).build();
        let r = on_vertex(&snap, "agg", run);
        let HotKeyFact::GcNotTheReason { tm_gc_ms_per_s, others_gc_ms_per_s } = *hk(&r.cause[1]) else {
            panic!("{:?}", r.cause)
        };
        assert_close(tm_gc_ms_per_s, 15.0, 1e-9);
        assert_close(others_gc_ms_per_s, 12.0, 1e-9);
        assert!(
            r.cause[1].to_string().starts_with("Garbage collection is not the reason: 15 ms/s there, 12 ms/s"),
            "{:?}",
            r.cause
        );
    }

    /// A pod of `tm` throttled in `ratio` of its CFS periods under a 2-core limit.
    fn throttled(tm: &str, ratio: f64) -> crate::model::resources::PodResources {
        crate::model::resources::PodResources {
            pod: tm.into(),
            container: Some("flink-main-container".into()),
            cpu_throttled_ratio: Some(ratio),
            cpu_limit_cores: Some(2.0),
            ..Default::default()
        }
    }

    #[test]
    fn a_slow_instance_whose_pod_is_throttled_names_the_throttling_and_its_ratio() {
        // GC ordinary (15 against 12 ms/s); tm-bad's pod throttled in 0.45 of its periods,
        // ≥ 0.25, the others' mean (0.05 + 0.03) / 2 = 0.04, 0.45 > 0.04 + 0.1.
        let snap = slow_instance_job(15.0)
            .pod(throttled("tm-bad", 0.45))
            .pod(throttled("tm-a", 0.05))
            .pod(throttled("tm-b", 0.03))
            .build();
        let r = on_vertex(&snap, "agg", run);
        // Throttled over 0.25 and standing out: the finding is the throttling.
        assert_eq!(r.finding, Some(Finding::CpuThrottled));
        let HotKeyFact::FixTheNode { reading, cause, .. } = hk(&r.fix[0]) else { panic!("{:?}", r.fix) };
        assert_eq!(*cause, Some(Pressure::CpuThrottled));
        assert_close(reading.throttled_ratio.unwrap(), 0.45, 1e-12);
        assert_close(reading.others_throttled_ratio.unwrap(), 0.04, 1e-12);
        assert_close(
            evidence(&r.evidence, "container_cpu_cfs_throttled_periods_total / container_cpu_cfs_periods_total").value,
            0.45,
            1e-9,
        );
    }

    #[test]
    fn a_slow_instance_throttled_like_every_other_pod_is_not_called_throttled() {
        // 0.30 against the others' 0.30: over 0.25 but no more than the rest.
        let snap = slow_instance_job(15.0)
            .pod(throttled("tm-bad", 0.3))
            .pod(throttled("tm-a", 0.3))
            .pod(throttled("tm-b", 0.3))
            .build();
        let r = on_vertex(&snap, "agg", run);
        let HotKeyFact::FixTheNode { cause, .. } = hk(&r.fix[0]) else { panic!("{:?}", r.fix) };
        assert_eq!(*cause, None);
    }

    #[test]
    fn a_slow_instance_shows_its_gc_time_as_evidence() {
        let snap = slow_instance_job(120.0).build();
        let r = on_vertex(&snap, "agg", run);
        assert_close(evidence(&r.evidence, "Status.JVM.GarbageCollector.All.Time rate").value, 120.0, 1e-9);
    }

    #[test]
    fn a_slow_instance_without_gc_metrics_lists_them_missing() {
        let snap =
            job("score", 2).subtask("agg", 0, 0.95, 0.0, 0.05, 500.0).subtask("agg", 1, 0.2, 0.0, 0.8, 500.0).build();
        let r = on_vertex(&snap, "agg", run);
        assert_eq!(r.finding, Some(Finding::SlowInstance));
        assert_eq!(r.missing, ["Status.JVM.GarbageCollector.All.Time"]);
        assert!(
            matches!(hk(&r.cause[0]), HotKeyFact::SlowInstance { tm, host: None, .. } if tm == "unknown"),
            "{:?}",
            r.cause
        );
        assert!(r.cause[0].to_string().contains("TaskManager unknown"), "{:?}", r.cause);
        // No GC time: the fix names none.
        assert!(matches!(hk(&r.fix[0]), HotKeyFact::FixTheNode { tm_gc_ms_per_s: None, .. }), "{:?}", r.fix);
    }

    #[test]
    fn a_hot_subtask_without_records_rates_is_no_data() {
        let snap = job("score", 4)
            .subtask("agg", 0, 0.95, 0.0, 0.05, None)
            .subtask("agg", 1, 0.2, 0.0, 0.8, None)
            .subtask("agg", 2, 0.2, 0.0, 0.8, None)
            .subtask("agg", 3, 0.2, 0.0, 0.8, None)
            .build();
        let r = on_vertex(&snap, "agg", run);
        assert_eq!(r.outcome, Outcome::NoData);
        assert_eq!(r.missing, ["numRecordsIn"]);
        assert_eq!(r.subtasks, Some(vec![0]));
    }

    #[test]
    fn parallelism_one_has_no_skew() {
        let snap = job("score", 1).subtask("agg", 0, 0.99, 0.0, 0.01, 1000.0).build();
        let r = on_vertex(&snap, "agg", run);
        assert_eq!((r.outcome, r.finding), (Outcome::Clear, None));
    }

    #[test]
    fn uniformly_busy_subtasks_have_no_hot_one() {
        // Hottest 0.97 ≥ 0.9, but the others' median 0.95 > 0.5.
        let snap = job("score", 4)
            .subtask("agg", 0, 0.97, 0.0, 0.03, 250.0)
            .subtask("agg", 1, 0.95, 0.0, 0.05, 250.0)
            .subtask("agg", 2, 0.95, 0.0, 0.05, 250.0)
            .subtask("agg", 3, 0.94, 0.0, 0.06, 250.0)
            .build();
        let r = on_vertex(&snap, "agg", run);
        assert_eq!((r.outcome, r.finding), (Outcome::Clear, None));
        assert_eq!(
            *hk(&r.detail),
            HotKeyFact::NoHotSubtask {
                busy: BusyRatios::Each(vec![Some(0.97), Some(0.95), Some(0.95), Some(0.94)]),
                hot_busy_threshold_ratio: 0.9,
                others_median_threshold_ratio: 0.5
            }
        );
        assert!(r.detail.to_string().contains("97%, 95%, 95%, 94%"), "{}", r.detail);
    }

    #[test]
    fn a_hottest_subtask_below_the_hot_threshold_is_not_hot() {
        // 0.89 < 0.9, others idle.
        let snap =
            job("score", 2).subtask("agg", 0, 0.89, 0.0, 0.11, 900.0).subtask("agg", 1, 0.1, 0.0, 0.9, 100.0).build();
        assert_eq!(on_vertex(&snap, "agg", run).outcome, Outcome::Clear);
    }
}
