//! Step `checkpoints`: have checkpoints slowed with the backlog so far that the recovery
//! point is in trouble?
//!
//! Aligned barriers travel at the speed of the data, so under backpressure checkpoints
//! slow exactly when the job struggles. Hits when checkpoints failed or expired in the
//! window (not the one every fresh job fails in its first minute), when the last completed
//! checkpoint is older than 3 × the interval, or when the last one took half the timeout.
//! Checkpoints merely slower than before, or than their interval, are evidence and
//! secondary advice, not a hit — so two jobs in the same state get the same finding
//! whether or not the data reaches back to before the backpressure.

use crate::diagnose::signals::VertexSignals;
use crate::diagnose::{Context, StepReport};
use crate::model::facts::checkpoints::{BarrierWait, CheckpointFact, Reason};
use crate::model::snapshot::{CheckpointPoint, JobRunning, LastCheckpoint};
use crate::model::verdict::Finding;

/// Checkpoint interval and where it came from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    pub ms: i64,
    /// True when estimated from the spacing of completed checkpoints (an upper bound).
    pub estimated: bool,
}

/// The interval from Flink REST, else estimated from the completions (before the window
/// when there are such, since under backpressure completions are spaced by their duration,
/// not the interval): the smallest spacing of distinct `lastCheckpointCompletedTimestamp`
/// values, or, where Flink does not report that gauge (1.x), the mean spacing of the rises of
/// `numberOfCompletedCheckpoints` (a rise is seen up to one sample step late, so single
/// spacings are off by up to a step each; their mean over several is not).
pub fn interval(ctx: &Context) -> Option<Interval> {
    if let Some(c) = &ctx.snapshot.checkpoints.config {
        return Some(Interval { ms: c.interval_ms, estimated: false });
    }
    let series = &ctx.snapshot.checkpoints.series;
    let completions = |upto: i64| -> Vec<i64> {
        let mut v: Vec<i64> = series
            .iter()
            .filter(|p| p.t_ms <= upto)
            .filter_map(|p| p.last_completed_at_ms)
            .filter(|t| *t > 0.0)
            .map(|t| t as i64)
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let min_spacing = |v: &[i64]| v.windows(2).map(|w| w[1] - w[0]).filter(|d| *d > 0).min();
    let estimate = |upto: i64| min_spacing(&completions(upto)).or_else(|| counter_spacing(series, upto));
    let ms = estimate(ctx.snapshot.window.start_ms).or_else(|| estimate(ctx.snapshot.at_ms))?;
    Some(Interval { ms, estimated: true })
}

/// The samples (time, count) at which `numberOfCompletedCheckpoints` rose, up to `upto_ms`.
fn counter_rises(series: &[CheckpointPoint], upto_ms: i64) -> Vec<(i64, f64)> {
    let mut rises = Vec::new();
    let mut prev: Option<f64> = None;
    for p in series.iter().filter(|p| p.t_ms <= upto_ms) {
        let Some(c) = p.completed else { continue };
        if prev.is_some_and(|pc| c > pc) {
            rises.push((p.t_ms, c));
        }
        prev = Some(c);
    }
    rises
}

/// Mean time between completions from the counter's rises: two rises at least.
fn counter_spacing(series: &[CheckpointPoint], upto_ms: i64) -> Option<i64> {
    let rises = counter_rises(series, upto_ms);
    let (&(t0, c0), &(t1, c1)) = (rises.first()?, rises.last()?);
    (c1 > c0 && t1 > t0).then(|| ((t1 - t0) as f64 / (c1 - c0)).round() as i64)
}

/// Flink's gauge of the last completion time (2.0+) and the completion counter (every version).
const COMPLETED_AT: &str = "lastCheckpointCompletedTimestamp";
const COMPLETED_COUNTER: &str = "numberOfCompletedCheckpoints";
/// Evidence: the age of the last completion from [`COMPLETED_AT`] (or the job start).
const SINCE_COMPLETED_AT: &str = "time since lastCheckpointCompletedTimestamp";
/// Evidence: the age of the last completion from the last rise of [`COMPLETED_COUNTER`].
const SINCE_COUNTER_ROSE: &str = "time since numberOfCompletedCheckpoints last rose";

/// When the last checkpoint completed, as far as the series tells.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LastCompletion {
    /// ms since the epoch.
    pub at_ms: f64,
    /// The metric it comes from, for evidence.
    pub metric: &'static str,
}

/// The last checkpoint completion up to `upto_ms`. Flink 2.x reports its time
/// (`lastCheckpointCompletedTimestamp`); Flink 1.x (1.20 included) does not, and then it is the
/// first sample at which `numberOfCompletedCheckpoints` held its latest value — at most one
/// sample step after the completion, so an age measured from it is never overstated (when the
/// count never changed within the series, the series' first sample). None when no checkpoint
/// has completed, or neither metric is there.
pub fn last_completion(series: &[CheckpointPoint], upto_ms: i64) -> Option<LastCompletion> {
    let upto = || series.iter().filter(move |p| p.t_ms <= upto_ms);
    if let Some(at_ms) = upto().filter_map(|p| p.last_completed_at_ms).next_back().filter(|t| *t > 0.0) {
        return Some(LastCompletion { at_ms, metric: COMPLETED_AT });
    }
    if upto().any(|p| p.last_completed_at_ms.is_some()) {
        return None; // reported, and 0: nothing completed yet
    }
    let mut since: Option<(f64, i64)> = None;
    for p in upto() {
        if let Some(c) = p.completed
            && since.is_none_or(|(sc, _)| sc != c)
        {
            since = Some((c, p.t_ms));
        }
    }
    let (count, t_ms) = since?;
    (count > 0.0).then_some(LastCompletion { at_ms: t_ms as f64, metric: COMPLETED_COUNTER })
}

/// Median `lastCheckpointDuration` before the window, ms.
fn duration_before(series: &[CheckpointPoint], start_ms: i64) -> Option<f64> {
    let mut v: Vec<f64> = series.iter().filter(|p| p.t_ms <= start_ms).filter_map(|p| p.last_duration_ms).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

pub fn run(ctx: &Context, culprit: Option<&VertexSignals>) -> StepReport {
    if let Some(r) = culprit.and_then(|c| stalls_in_checkpoints(ctx, c)) {
        return r;
    }
    let t = &ctx.cfg.thresholds;
    let snap = ctx.snapshot;
    let series = &snap.checkpoints.series;
    // A gauge saying "none completed yet" (−1) is a checkpoint metric too.
    let reported = |p: &&CheckpointPoint| {
        p.last_duration_ms.is_some() || p.completed.is_some() || p.last_checkpoint != LastCheckpoint::Unknown
    };
    let Some(last) = series.iter().rev().find(reported) else {
        return StepReport::no_data(
            CheckpointFact::NoMetrics,
            vec!["lastCheckpointDuration".into(), "numberOfFailedCheckpoints".into()],
        );
    };
    let f = Facts {
        interval: interval(ctx),
        timeout_ms: snap
            .checkpoints
            .config
            .as_ref()
            .map(|c| c.timeout_ms)
            .unwrap_or(t.checkpoint_default_timeout.as_ms()),
        unaligned: snap.checkpoints.config.as_ref().is_some_and(|c| c.unaligned),
        last,
        barrier_wait: barrier_wait(ctx),
    };
    let (reasons, r) = trouble(ctx, &f);
    if !reasons.is_empty() && ctx.red.is_empty() {
        slow_snapshot_report(r, &reasons, &f)
    } else if !reasons.is_empty() {
        held_up_report(r, &reasons, &f, culprit)
    } else {
        clear_report(ctx, &f)
    }
}

/// A culprit (not a sink: the sink step explains those) that stalls the job in phase with
/// the checkpoints, read sample by sample: its synchronous checkpoint phase blocks its task
/// thread (a large synchronous snapshot, a flush or commit in `snapshotState`).
fn stalls_in_checkpoints(ctx: &Context, c: &VertexSignals) -> Option<StepReport> {
    let tl = &ctx.timeline;
    let index = ctx.signals.vertices.iter().position(|v| v.id == c.id)?;
    if !tl.with_checkpoints || tl.ranked().first().map(|x| x.0) != Some(index) {
        return None;
    }
    let period_s = tl.period_ms? / 1000;
    let vertex = c.name.clone();
    let mut r =
        StepReport::hit(Finding::Checkpoints, CheckpointFact::StallsInPhase { vertex: vertex.clone(), period_s });
    r.cause.push(CheckpointFact::StallsCause { vertex: vertex.clone(), period_s });
    r.fix.push(CheckpointFact::StallsFix { vertex: vertex.clone() });
    r.not_the_fix.push(CheckpointFact::UnalignedCannotHelpBlocked);
    r.summary = Some(CheckpointFact::StallsSummary { vertex, period_s }.into());
    Some(r)
}

/// What the step judges by.
struct Facts<'a> {
    interval: Option<Interval>,
    timeout_ms: i64,
    unaligned: bool,
    /// The newest point with checkpoint data.
    last: &'a CheckpointPoint,
    /// The vertex whose barriers wait longest behind data, and how long (ms).
    barrier_wait: Option<(String, f64)>,
}

impl Facts<'_> {
    fn unaligned_fix(&self) -> CheckpointFact {
        CheckpointFact::Unaligned { already_on: self.unaligned }
    }

    /// The barrier wait as a fact's term.
    fn barrier_wait(&self) -> Option<BarrierWait> {
        self.barrier_wait.as_ref().map(|(vertex, delay_ms)| BarrierWait { vertex: vertex.clone(), delay_ms: *delay_ms })
    }
}

/// Failed or expired checkpoints in the window, leaving out the one every fresh job has
/// while its tasks start.
fn failures_in_window(ctx: &Context) -> f64 {
    let snap = ctx.snapshot;
    let grace = ctx.cfg.thresholds.checkpoint_startup_grace.as_ms() as f64;
    let mut failed = 0.0;
    for pair in snap.checkpoints.series.windows(2) {
        let (prev, cur) = (&pair[0], &pair[1]);
        if cur.t_ms <= snap.window.start_ms {
            continue;
        }
        // Start-up noise: a failure in the job's first minute. Without the uptime gauge, the
        // job start (when known) tells; without either, the failure counts.
        let uptime = cur.uptime_ms.or_else(|| snap.job_start_ms.map(|start| (cur.t_ms - start) as f64));
        // Uptime 0: the job is not running at that moment (restarting); its aborted
        // checkpoints are the restart's, not the job's trouble.
        let not_running = cur.running == JobRunning::NotRunningNow;
        if let (Some(a), Some(b)) = (prev.failed, cur.failed)
            && b > a
            && !not_running
            && uptime.is_none_or(|u| u >= grace)
        {
            failed += b - a;
        }
    }
    failed
}

/// Why the recovery point is in trouble (failures, no recent completion, a checkpoint
/// near its timeout), with a hit report carrying the evidence.
fn trouble(ctx: &Context, f: &Facts) -> (Vec<Reason>, StepReport) {
    let t = &ctx.cfg.thresholds;
    let snap = ctx.snapshot;
    let (interval, timeout_ms, last) = (f.interval, f.timeout_ms, f.last);
    let failed = failures_in_window(ctx);
    let uptime_ms = last.uptime_ms.unwrap_or(f64::INFINITY);
    let completion = last_completion(&snap.checkpoints.series, snap.at_ms);
    let age_ms = match completion {
        Some(done) => Some((snap.at_ms as f64 - done.at_ms).max(0.0)),
        None => snap.job_start_ms.map(|s| (snap.at_ms - s) as f64),
    };
    let last_duration = last.last_duration_ms;

    let mut reasons: Vec<Reason> = Vec::new();
    let mut r = StepReport::hit(Finding::Checkpoints, String::new());
    if failed > 0.0 {
        reasons.push(Reason::Failed { count: failed });
        r.evidence.push(ctx.evidence(
            "job",
            "numberOfFailedCheckpoints increase",
            failed,
            "count",
            Some(0.0),
            "checkpoints",
        ));
    }
    if let (Some(iv), Some(age)) = (interval, age_ms) {
        let limit = t.checkpoint_stalled_intervals * iv.ms as f64;
        // A job that is not running at the moment (uptime 0) completes no checkpoint: no stall.
        if age > limit && uptime_ms > limit && last.running != JobRunning::NotRunningNow {
            reasons.push(Reason::NoCompletion { age_ms: age, interval_ms: iv.ms, estimated: iv.estimated });
            // Without a completion, the age runs from the job start (as before the counter).
            let since = match completion {
                Some(c) if c.metric == COMPLETED_COUNTER => SINCE_COUNTER_ROSE,
                _ => SINCE_COMPLETED_AT,
            };
            r.evidence.push(ctx.evidence("job", since, age, "ms", Some(limit), "checkpoints"));
        }
    }
    if let Some(d) = last_duration.filter(|d| *d >= t.checkpoint_timeout_share * timeout_ms as f64) {
        reasons.push(Reason::NearTimeout { duration_ms: d, timeout_ms });
        r.evidence.push(ctx.evidence(
            "job",
            "lastCheckpointDuration",
            d,
            "ms",
            Some(t.checkpoint_timeout_share * timeout_ms as f64),
            "checkpoints",
        ));
    }
    (reasons, r)
}

/// No backpressure: the barriers are not stuck behind data, so the checkpoint itself is
/// slow or failing.
fn slow_snapshot_report(mut r: StepReport, reasons: &[Reason], f: &Facts) -> StepReport {
    // No backpressure: the barriers are not stuck behind data, so unaligned
    // checkpoints would change nothing; the checkpoint itself is slow or failing.
    r.detail = CheckpointFact::InTrouble { reasons: reasons.to_vec() }.into();
    r.cause.push(CheckpointFact::NotHeldUpByData { reasons: reasons.to_vec() });
    r.fix.push(CheckpointFact::SlowSnapshotFix { timeout_ms: f.timeout_ms });
    r.not_the_fix.push(CheckpointFact::NothingToOvertake);
    r.summary = Some(CheckpointFact::SlowSnapshotSummary { reason: reasons[0] }.into());
    r
}

/// Backpressure holds the aligned barriers up behind the data.
fn held_up_report(mut r: StepReport, reasons: &[Reason], f: &Facts, culprit: Option<&VertexSignals>) -> StepReport {
    r.detail = CheckpointFact::InTrouble { reasons: reasons.to_vec() }.into();
    r.cause.push(CheckpointFact::HeldUpByData { reasons: reasons.to_vec(), barrier_wait: f.barrier_wait() });
    r.fix.push(f.unaligned_fix());
    if let Some(c) = culprit {
        r.fix.push(CheckpointFact::RelieveBackpressure { vertex: c.name.clone() });
    }
    r.summary =
        Some(CheckpointFact::HeldUpSummary { culprit: culprit.map(|c| c.name.clone()), reason: reasons[0] }.into());
    r
}

/// Not a hit: a slowdown is reported as evidence and secondary advice.
fn clear_report(ctx: &Context, f: &Facts) -> StepReport {
    let snap = ctx.snapshot;
    let series = &snap.checkpoints.series;
    let (interval, timeout_ms, last_duration) = (f.interval, f.timeout_ms, f.last.last_duration_ms);
    let mut clear = StepReport::clear(String::new());
    let before = duration_before(series, snap.window.start_ms);
    let (mut slower_than_before_ms, mut longer_than_interval_ms) = (None, None);
    if let Some(d) = last_duration {
        if let Some(b) = before.filter(|b| *b > 0.0 && d >= 10.0 * b) {
            slower_than_before_ms = Some(b);
            clear.evidence.push(ctx.evidence(
                "job",
                "lastCheckpointDuration before the window",
                b,
                "ms",
                None,
                "checkpoints",
            ));
        }
        longer_than_interval_ms = interval.filter(|iv| d > iv.ms as f64).map(|iv| iv.ms);
        clear.evidence.push(ctx.evidence("job", "lastCheckpointDuration", d, "ms", None, "checkpoints"));
    }
    // −1 before the first completed checkpoint: say so, not "checkpoints complete".
    if last_duration.is_none() && f.last.last_checkpoint == LastCheckpoint::NoneCompletedYet {
        clear.detail = CheckpointFact::NoneCompletedYet.into();
        return clear;
    }
    let slow = slower_than_before_ms.is_some() || longer_than_interval_ms.is_some();
    clear.detail = CheckpointFact::Complete {
        last_duration_ms: last_duration,
        slower_than_before_ms,
        longer_than_interval_ms,
        barrier_wait: f.barrier_wait(),
        timeout_ms,
        interval_estimated: interval.is_some_and(|i| i.estimated),
    }
    .into();
    if slow {
        clear.advice.push(CheckpointFact::SlowedWithBacklog { unaligned_on: f.unaligned });
    }
    clear
}

/// The backpressured vertex whose barriers wait longest (`checkpointStartDelayNanos`), ms.
fn barrier_wait(ctx: &Context) -> Option<(String, f64)> {
    let per_subtask = ctx
        .snapshot
        .subtasks
        .iter()
        .filter(|s| ctx.red.contains(&s.vertex_id))
        .filter_map(|s| Some((s.vertex_id.clone(), s.checkpoint_start_delay_ms?)));
    let per_vertex = ctx
        .snapshot
        .vertex_aggregates
        .iter()
        .filter(|a| ctx.red.contains(&a.vertex_id))
        .filter_map(|a| Some((a.vertex_id.clone(), a.checkpoint_start_delay_ms_max?)));
    per_subtask
        .chain(per_vertex)
        .filter(|(_, v)| *v >= 100.0)
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(id, v)| (ctx.signals.vertex(&id).map(|x| x.name.clone()).unwrap_or(id), v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::testkit::*;
    use crate::model::facts::Fact;
    use crate::model::snapshot::Snapshot;
    use crate::model::verdict::Outcome;

    /// Source (red) → score (busy) → sink.
    fn job() -> SnapshotBuilder {
        keyed_score_job("score")
    }

    fn report(snap: &Snapshot) -> StepReport {
        with_context(snap, |ctx| run(ctx, ctx.signals.vertex("score")))
    }

    /// A sample at `offset_s` whose last checkpoint completed at `done_s` after `duration_ms`.
    fn done(offset_s: i64, done_s: i64, duration_ms: f64) -> CheckpointPoint {
        CheckpointPoint {
            last_completed_at_ms: Some(t(done_s) as f64),
            last_duration_ms: Some(duration_ms),
            completed: Some(100.0),
            failed: Some(0.0),
            ..cp(offset_s)
        }
    }

    #[test]
    fn failing_checkpoints_without_backpressure_do_not_blame_backpressure() {
        // No vertex is backpressured (all p = 0); 2 checkpoints failed in the window
        // (1 → 3). Unaligned checkpoints would not help: they are named as not the fix.
        let snap = SnapshotBuilder::new()
            .vertex("src", "Source: txn", 2)
            .vertex("sink", "Sink: out", 2)
            .edge("src", "sink", "FORWARD")
            .all_subtasks("src", 0.2, 0.0, 0.8, None)
            .all_subtasks("sink", 0.3, 0.0, 0.7, 1000.0)
            .checkpoint_config(10, 600, false, None)
            .checkpoint_point(CheckpointPoint { failed: Some(1.0), ..done(-290, -292, 500.0) })
            .checkpoint_point(CheckpointPoint { failed: Some(3.0), ..done(-5, -7, 500.0) })
            .build();
        let r = with_context(&snap, |ctx| run(ctx, None));
        assert_eq!((r.outcome, r.finding), (Outcome::Hit, Some(Finding::Checkpoints)));
        assert_eq!(
            r.summary.as_ref().map(|s| s.to_string()).as_deref(),
            Some("Checkpoints are in trouble: 2 checkpoint(s) failed or expired in the window.")
        );
        // Not held up by data (no backpressure), not "the backpressure slows checkpoints".
        assert_eq!(
            r.cause[..],
            [Fact::Checkpoint(CheckpointFact::NotHeldUpByData { reasons: vec![Reason::Failed { count: 2.0 }] })]
        );
        assert!(r.fix[0].to_string().contains("execution.checkpointing.incremental"), "{:?}", r.fix);
        // The timeout now: 600 s from the REST config.
        assert_eq!(r.fix[0], Fact::Checkpoint(CheckpointFact::SlowSnapshotFix { timeout_ms: 600_000 }));
        assert!(r.fix[0].to_string().contains("(now 10 min)"), "{:?}", r.fix);
        assert_eq!(r.not_the_fix[..], [Fact::Checkpoint(CheckpointFact::NothingToOvertake)]);
    }

    #[test]
    fn checkpoints_failing_in_the_window_are_a_hit() {
        // failed 1 → 2 → 3 over samples at −290, −150, −5 s (uptime ~1 h): 2 failures in
        // the window. The last completed 7 s ago in 500 ms: nothing else is wrong.
        let snap = job()
            .checkpoint_config(10, 600, false, None)
            .start_delay_ms("src", 0, 4000.0)
            .checkpoint_point(CheckpointPoint { failed: Some(1.0), ..done(-290, -292, 500.0) })
            .checkpoint_point(CheckpointPoint { failed: Some(2.0), ..done(-150, -152, 500.0) })
            .checkpoint_point(CheckpointPoint { failed: Some(3.0), ..done(-5, -7, 500.0) })
            .build();
        let r = report(&snap);
        assert_eq!((r.outcome, r.finding), (Outcome::Hit, Some(Finding::Checkpoints)));
        assert_eq!(evidence(&r.evidence, "numberOfFailedCheckpoints increase").value, 2.0);
        assert_eq!(r.evidence.len(), 1, "only the failures: {:?}", r.evidence);
        let failed = vec![Reason::Failed { count: 2.0 }];
        assert_eq!(r.detail, Fact::Checkpoint(CheckpointFact::InTrouble { reasons: failed.clone() }));
        assert!(r.detail.to_string().contains("2 checkpoint(s) failed or expired in the window"), "{}", r.detail);
        // Barriers wait 4000 ms on the red source.
        assert_eq!(
            r.cause[..],
            [Fact::Checkpoint(CheckpointFact::HeldUpByData {
                reasons: failed,
                barrier_wait: Some(BarrierWait { vertex: "Source: txn".into(), delay_ms: 4000.0 }),
            })]
        );
        assert!(r.cause[0].to_string().contains("checkpointStartDelay on Source: txn is 4 s"), "{:?}", r.cause);
        assert_eq!(
            r.fix[..],
            [
                Fact::Checkpoint(CheckpointFact::Unaligned { already_on: false }),
                Fact::Checkpoint(CheckpointFact::RelieveBackpressure { vertex: "score".into() })
            ]
        );
        assert!(r.fix[0].to_string().contains("execution.checkpointing.unaligned.enabled: true"), "{:?}", r.fix);
    }

    #[test]
    fn the_failure_every_fresh_job_has_in_its_first_minute_is_not_a_hit() {
        // Job started 50 s before `at`; the window starts at uptime 20 s (−30 s). The failure
        // appears in the sample at uptime 32 s < 60 s grace: start-up noise.
        let up = |offset_s: i64| Some((50 + offset_s) as f64 * 1000.0);
        let snap = job()
            .job_started(-50)
            .window_from(-30)
            .checkpoint_config(10, 600, false, None)
            .checkpoint_point(CheckpointPoint {
                t_ms: t(-28),
                uptime_ms: up(-28),
                failed: Some(0.0),
                completed: Some(0.0),
                ..Default::default()
            })
            .checkpoint_point(CheckpointPoint {
                t_ms: t(-18),
                uptime_ms: up(-18),
                failed: Some(1.0),
                completed: Some(0.0),
                ..Default::default()
            })
            .checkpoint_point(CheckpointPoint {
                t_ms: t(-3),
                uptime_ms: up(-3),
                failed: Some(1.0),
                completed: Some(1.0),
                last_completed_at_ms: Some(t(-5) as f64),
                last_duration_ms: Some(300.0),
                ..Default::default()
            })
            .build();
        let r = report(&snap);
        assert_eq!((r.outcome, r.finding), (Outcome::Clear, None), "{}", r.detail);
    }

    #[test]
    fn failures_in_the_window_count_when_the_uptime_is_unknown() {
        // Same failures as above (1 → 2 → 3 in the window: 2), but no `uptime` samples and
        // so no job start. Spec §2: only a failure in the first minute of uptime is exempt;
        // nothing says these are.
        let no_uptime = |p: CheckpointPoint| CheckpointPoint { uptime_ms: None, ..p };
        let snap = job()
            .checkpoint_config(10, 600, false, None)
            .checkpoint_point(no_uptime(CheckpointPoint { failed: Some(1.0), ..done(-290, -292, 500.0) }))
            .checkpoint_point(no_uptime(CheckpointPoint { failed: Some(2.0), ..done(-150, -152, 500.0) }))
            .checkpoint_point(no_uptime(CheckpointPoint { failed: Some(3.0), ..done(-5, -7, 500.0) }))
            .build();
        let snap = crate::model::snapshot::Snapshot { job_start_ms: None, ..snap };
        let r = report(&snap);
        assert_eq!(r.finding, Some(Finding::Checkpoints), "{}", r.detail);
    }

    #[test]
    fn gauges_at_minus_one_are_no_checkpoint_completed_yet_not_missing_metrics() {
        // Only lastCheckpointDuration, −1 throughout (typed NoneCompletedYet by the
        // collector), in a job up for an hour with a 10 s interval: the age runs from the
        // job start, 3600 s > 3 × 10 s.
        let none_yet = |s| CheckpointPoint { last_checkpoint: LastCheckpoint::NoneCompletedYet, ..cp(s) };
        let mut b = job().checkpoint_config(10, 600, false, None);
        for s in (-60..=0).step_by(10) {
            b = b.checkpoint_point(none_yet(s));
        }
        let snap = b.build();
        let snap = Snapshot { job_start_ms: Some(t(-3600)), ..snap };
        let r = report(&snap);
        assert_ne!(r.detail, Fact::Checkpoint(CheckpointFact::NoMetrics));
        assert_eq!(r.finding, Some(Finding::Checkpoints), "{}", r.detail);
        let Fact::Checkpoint(CheckpointFact::InTrouble { reasons }) = &r.detail else { panic!("{}", r.detail) };
        assert!(matches!(reasons[0], Reason::NoCompletion { age_ms, .. } if age_ms == 3_600_000.0));
    }

    #[test]
    fn minus_one_gauges_without_a_known_interval_say_no_checkpoint_completed_yet() {
        // No checkpoint config and no completion to estimate an interval from: no stall can
        // be judged; the step says none completed yet, never "checkpoints complete".
        let none_yet = |s| CheckpointPoint { last_checkpoint: LastCheckpoint::NoneCompletedYet, ..cp(s) };
        let mut b = job();
        for s in (-60..=0).step_by(10) {
            b = b.checkpoint_point(none_yet(s));
        }
        let r = report(&b.build());
        assert_eq!((r.outcome, r.detail), (Outcome::Clear, Fact::Checkpoint(CheckpointFact::NoneCompletedYet)));
    }

    #[test]
    fn a_job_not_running_at_the_moment_has_no_checkpoint_stall() {
        // Uptime 0 (restarting) at the last sample, last completion 60 s ago (> 30 s): a
        // job that does not run completes no checkpoint; that is no stall of a running job.
        let mut b = job().checkpoint_config(10, 600, false, None);
        for s in (-60..=-10).step_by(10) {
            b = b.checkpoint_point(done(s, -60, 800.0));
        }
        let restarting = CheckpointPoint { uptime_ms: None, running: JobRunning::NotRunningNow, ..done(0, -60, 800.0) };
        let r = report(&b.checkpoint_point(restarting).build());
        assert_ne!(r.finding, Some(Finding::Checkpoints), "{}", r.detail);
    }

    #[test]
    fn a_recovery_point_older_than_three_intervals_is_a_hit() {
        // Interval 10 s; last completed 60 s before `at`: 60 s > 3 × 10 s = 30 s (6×).
        let mut b = job().checkpoint_config(10, 600, false, None);
        for s in (-60..=0).step_by(10) {
            b = b.checkpoint_point(done(s, -60, 800.0));
        }
        let r = report(&b.build());
        assert_eq!(r.finding, Some(Finding::Checkpoints));
        let e = evidence(&r.evidence, "time since lastCheckpointCompletedTimestamp");
        assert_eq!((e.value, e.threshold), (60_000.0, Some(30_000.0)));
        // 60 000 ms / 10 000 ms = 6×.
        assert_eq!(
            r.detail,
            Fact::Checkpoint(CheckpointFact::InTrouble {
                reasons: vec![Reason::NoCompletion { age_ms: 60_000.0, interval_ms: 10_000, estimated: false }]
            })
        );
        assert!(
            r.detail.to_string().contains("no checkpoint has completed for 60 s = 6× the interval of 10 s"),
            "{}",
            r.detail
        );
    }

    /// Flink 1.x: samples every 5 s from `from_s` to 0 with no completion timestamp; the
    /// completion counter rises by one every `every_s` seconds until `until_s`, then stays.
    fn counted(b: SnapshotBuilder, from_s: i64, every_s: i64, until_s: i64) -> SnapshotBuilder {
        (from_s..=0).step_by(5).fold(b, |b, s| {
            let done = ((s.min(until_s) - from_s) / every_s) as f64;
            b.checkpoint_point(CheckpointPoint {
                completed: Some(100.0 + done),
                failed: Some(0.0),
                last_duration_ms: Some(800.0),
                ..cp(s)
            })
        })
    }

    #[test]
    fn without_the_completion_timestamp_a_rising_completed_counter_is_a_recovering_point() {
        // Flink 1.x reports no lastCheckpointCompletedTimestamp. The job started 200 s ago and
        // completes a checkpoint every 10 s (counter +1 per 10 s): the last rise is at most 10 s
        // before `at`, under 3 × 10 s. Measured from the job start it would read 200 s: a stall.
        let snap = counted(job().job_started(-200).checkpoint_config(10, 600, false, None), -200, 10, 0).build();
        let r = report(&snap);
        assert_eq!(r.outcome, Outcome::Clear, "{}", r.detail);
    }

    #[test]
    fn without_the_completion_timestamp_a_counter_that_stopped_rising_is_a_stall() {
        // The counter rose every 10 s until 60 s before `at`, then stayed: its latest value was
        // first sampled at -60 s, so the last completion is 60 s old > 3 × 10 s (6×).
        let snap = counted(job().job_started(-300).checkpoint_config(10, 600, false, None), -300, 10, -60).build();
        let r = report(&snap);
        assert_eq!(r.finding, Some(Finding::Checkpoints), "{}", r.detail);
        let e = evidence(&r.evidence, "time since numberOfCompletedCheckpoints last rose");
        assert_eq!((e.value, e.threshold), (60_000.0, Some(30_000.0)));
    }

    #[test]
    fn without_the_completion_timestamp_the_interval_is_the_mean_spacing_of_the_counters_rises() {
        // No interval from Flink REST. Rises every 10 s, sampled every 5 s: the first at -390 s
        // (count 101), the last at 0 s (count 140): 390 s / 39 completions = 10 s.
        let snap = counted(job().job_started(-400), -400, 10, 0).build();
        let iv = with_context(&snap, interval);
        assert_eq!(iv, Some(Interval { ms: 10_000, estimated: true }));
    }

    #[test]
    fn a_reported_completion_time_of_zero_is_no_completion_whatever_the_counter_says() {
        // Flink 2.x reports the gauge: 0 means nothing completed; the counter is not consulted.
        let series = vec![CheckpointPoint { last_completed_at_ms: Some(0.0), completed: Some(3.0), ..cp(0) }];
        assert_eq!(last_completion(&series, t(0)), None);
    }

    #[test]
    fn a_recovery_point_just_under_three_intervals_is_clear() {
        // 29 s ≤ 30 s.
        let snap = job().checkpoint_config(10, 600, false, None).checkpoint_point(done(0, -29, 800.0)).build();
        assert_eq!(report(&snap).outcome, Outcome::Clear);
    }

    #[test]
    fn a_job_that_never_completed_a_checkpoint_is_measured_from_its_start() {
        // Started 200 s ago, no completion (timestamp 0): age 200 s > 30 s, uptime 200 s
        // > 30 s.
        let snap = job()
            .job_started(-200)
            .checkpoint_config(10, 600, false, None)
            .checkpoint_point(CheckpointPoint {
                t_ms: t(0),
                uptime_ms: Some(200_000.0),
                completed: Some(0.0),
                failed: Some(0.0),
                last_completed_at_ms: Some(0.0),
                ..Default::default()
            })
            .build();
        let r = report(&snap);
        assert_eq!(r.finding, Some(Finding::Checkpoints));
        assert_eq!(evidence(&r.evidence, "time since lastCheckpointCompletedTimestamp").value, 200_000.0);
    }

    #[test]
    fn a_checkpoint_taking_half_the_timeout_is_a_hit() {
        // 300 000 ms ≥ 0.5 × 600 000 ms (exactly half: inclusive).
        let snap = job().checkpoint_config(10, 600, false, None).checkpoint_point(done(0, -2, 300_000.0)).build();
        let r = report(&snap);
        assert_eq!(r.finding, Some(Finding::Checkpoints));
        let e = evidence(&r.evidence, "lastCheckpointDuration");
        assert_eq!((e.value, e.threshold), (300_000.0, Some(300_000.0)));
        assert_eq!(
            r.detail,
            Fact::Checkpoint(CheckpointFact::InTrouble {
                reasons: vec![Reason::NearTimeout { duration_ms: 300_000.0, timeout_ms: 600_000 }]
            })
        );
        assert!(
            r.detail.to_string().contains("the last checkpoint took 5 min, 50% of the 10 min timeout"),
            "{}",
            r.detail
        );
    }

    #[test]
    fn without_rest_config_the_timeout_is_flinks_default_of_ten_minutes() {
        // 320 s ≥ 0.5 × 600 s (the default); no config, no spacing to estimate an interval.
        let snap = job().checkpoint_point(done(0, -2, 320_000.0)).build();
        let r = report(&snap);
        assert_eq!(r.finding, Some(Finding::Checkpoints));
        assert_eq!(evidence(&r.evidence, "lastCheckpointDuration").threshold, Some(300_000.0));
    }

    /// Checkpoints took 20 ms before the window (−600 … −310 s) and 14 s in it.
    fn slower(with_history: bool, unaligned: bool) -> Snapshot {
        let mut b = job().checkpoint_config(10, 600, unaligned, None);
        if with_history {
            for s in [-600, -500, -400, -310] {
                b = b.checkpoint_point(done(s, s - 1, 20.0));
            }
        }
        b.checkpoint_point(done(-200, -201, 14_000.0)).checkpoint_point(done(-5, -4, 14_000.0)).build()
    }

    #[test]
    fn checkpoints_merely_slower_than_before_are_clear_with_evidence_and_unaligned_advice() {
        // 14 000 ms ≥ 10 × 20 ms (slower than before) and > the 10 s interval, but they
        // complete (4 s ago), none failed, 14 s < 300 s.
        let r = report(&slower(true, false));
        assert_eq!((r.outcome, r.finding), (Outcome::Clear, None));
        assert!(
            r.detail.to_string().contains("slower than before the backpressure (20 ms then, 14 s now)"),
            "{}",
            r.detail
        );
        assert!(r.detail.to_string().contains("longer than their interval of 10 s"), "{}", r.detail);
        // The median before the window is 20 ms (14 000 ≥ 10 × 20); the interval 10 000 ms.
        let Fact::Checkpoint(CheckpointFact::Complete {
            slower_than_before_ms,
            longer_than_interval_ms,
            interval_estimated,
            ..
        }) = &r.detail
        else {
            panic!("{:?}", r.detail)
        };
        assert_eq!(
            (*slower_than_before_ms, *longer_than_interval_ms, *interval_estimated),
            (Some(20.0), Some(10_000), false)
        );
        assert_eq!(evidence(&r.evidence, "lastCheckpointDuration before the window").value, 20.0);
        assert_eq!(evidence(&r.evidence, "lastCheckpointDuration").value, 14_000.0);
        assert_eq!(r.advice.len(), 1);
        assert_eq!(r.advice[0], Fact::Checkpoint(CheckpointFact::SlowedWithBacklog { unaligned_on: false }));
        assert!(r.advice[0].to_string().contains("execution.checkpointing.unaligned.enabled: true"), "{:?}", r.advice);
    }

    #[test]
    fn the_same_state_without_history_before_the_backpressure_gets_the_same_outcome() {
        let with = report(&slower(true, false));
        let without = report(&slower(false, false));
        assert_eq!((without.outcome, without.finding), (with.outcome, with.finding));
        assert_eq!(without.advice, with.advice);
        assert!(!without.detail.to_string().contains("before the backpressure"), "{}", without.detail);
    }

    #[test]
    fn with_unaligned_checkpoints_already_on_the_advice_says_they_cannot_help_a_blocked_thread() {
        let r = report(&slower(true, true));
        assert_eq!(r.advice[..], [Fact::Checkpoint(CheckpointFact::SlowedWithBacklog { unaligned_on: true })]);
        assert!(r.advice[0].to_string().contains("already on"), "{:?}", r.advice);
    }

    #[test]
    fn no_checkpoint_metrics_is_no_data() {
        let r = report(&job().build());
        assert_eq!(r.outcome, Outcome::NoData);
        assert_eq!(r.missing, ["lastCheckpointDuration", "numberOfFailedCheckpoints"]);
    }

    #[test]
    fn without_rest_config_the_interval_is_estimated_from_the_spacing_of_completions() {
        // Before the window completions every 10 s (−601, −591, …, −311); in the window the
        // last completion is stuck at −100 s. Interval ≈ 10 s (estimated); age 100 s > 30 s.
        let mut b = job();
        for s in (-600..=-310).step_by(10) {
            b = b.checkpoint_point(done(s, s - 1, 50.0));
        }
        for s in (-300..=0).step_by(10) {
            b = b.checkpoint_point(done(s, i64::min(-100, s), 50.0));
        }
        let snap = b.build();
        assert_eq!(with_context(&snap, interval), Some(Interval { ms: 10_000, estimated: true }));
        let r = report(&snap);
        assert_eq!(r.finding, Some(Finding::Checkpoints));
        // Stuck at −100 s: 100 000 ms / 10 000 ms = 10×.
        assert_eq!(
            r.detail,
            Fact::Checkpoint(CheckpointFact::InTrouble {
                reasons: vec![Reason::NoCompletion { age_ms: 100_000.0, interval_ms: 10_000, estimated: true }]
            })
        );
        assert!(r.detail.to_string().contains("10× the estimated interval of 10 s"), "{}", r.detail);
    }

    #[test]
    fn without_completions_before_the_window_the_interval_comes_from_those_inside_it() {
        // Completions at −95, −65, −35, −5 s: spacing 30 s.
        let mut b = job();
        for s in [-90, -60, -30, 0] {
            b = b.checkpoint_point(done(s, s - 5, 50.0));
        }
        let snap = b.build();
        assert_eq!(with_context(&snap, interval), Some(Interval { ms: 30_000, estimated: true }));
        let r = report(&snap);
        assert_eq!(r.outcome, Outcome::Clear);
        assert!(
            matches!(r.detail, Fact::Checkpoint(CheckpointFact::Complete { interval_estimated: true, .. })),
            "{:?}",
            r.detail
        );
        assert!(r.detail.to_string().contains("The interval is estimated"), "{}", r.detail);
    }
}
