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

use crate::collect::snapshot::CheckpointPoint;
use crate::diagnose::signals::VertexSignals;
use crate::diagnose::{Context, StepReport, human_secs};
use crate::verdict::Finding;

/// Checkpoint interval and where it came from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    pub ms: i64,
    /// True when estimated from the spacing of completed checkpoints (an upper bound).
    pub estimated: bool,
}

/// The interval from Flink REST, else the smallest spacing of distinct completion times
/// (before the window when there are such, since under backpressure completions are
/// spaced by their duration, not the interval).
pub fn interval(ctx: &Context) -> Option<Interval> {
    if let Some(c) = &ctx.snapshot.checkpoints.config {
        return Some(Interval { ms: c.interval_ms, estimated: false });
    }
    let completions = |upto: i64| -> Vec<i64> {
        let mut v: Vec<i64> = ctx
            .snapshot
            .checkpoints
            .series
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
    let before = completions(ctx.snapshot.window.start_ms);
    let ms = min_spacing(&before).or_else(|| min_spacing(&completions(ctx.snapshot.at_ms)))?;
    Some(Interval { ms, estimated: true })
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

fn ms(v: f64) -> String {
    if v < 1000.0 { format!("{v:.0} ms") } else { human_secs(v / 1000.0) }
}

pub fn run(ctx: &Context, culprit: Option<&VertexSignals>) -> StepReport {
    let t = &ctx.cfg.thresholds;
    let snap = ctx.snapshot;
    let series = &snap.checkpoints.series;
    let Some(last) = series.iter().rev().find(|p| p.last_duration_ms.is_some() || p.completed.is_some()) else {
        return StepReport::no_data(
            "No checkpoint metrics for this job (checkpointing off, or the JobManager is not scraped).",
            vec!["lastCheckpointDuration".into(), "numberOfFailedCheckpoints".into()],
        );
    };
    let grace = t.checkpoint_startup_grace.as_ms() as f64;
    let interval = interval(ctx);
    let timeout_ms =
        snap.checkpoints.config.as_ref().map(|c| c.timeout_ms).unwrap_or(t.checkpoint_default_timeout.as_ms());
    let unaligned = snap.checkpoints.config.as_ref().is_some_and(|c| c.unaligned);

    // Failures in the window, leaving out the one every fresh job has while its tasks start.
    let mut failed = 0.0;
    for pair in series.windows(2) {
        let (prev, cur) = (&pair[0], &pair[1]);
        if cur.t_ms <= snap.window.start_ms {
            continue;
        }
        if let (Some(a), Some(b)) = (prev.failed, cur.failed)
            && b > a
            && cur.uptime_ms.is_some_and(|u| u >= grace)
        {
            failed += b - a;
        }
    }
    let uptime_ms = last.uptime_ms.unwrap_or(f64::INFINITY);
    let age_ms = match last.last_completed_at_ms.filter(|t| *t > 0.0) {
        Some(done) => Some((snap.at_ms as f64 - done).max(0.0)),
        None => snap.job_start_ms.map(|s| (snap.at_ms - s) as f64),
    };
    let last_duration = last.last_duration_ms;

    let mut reasons: Vec<String> = Vec::new();
    let mut r = StepReport::hit(Finding::Checkpoints, String::new());
    if failed > 0.0 {
        reasons.push(format!("{failed:.0} checkpoint(s) failed or expired in the window"));
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
        if age > limit && uptime_ms > limit {
            reasons.push(format!(
                "no checkpoint has completed for {} = {:.0}× the {}interval of {}",
                ms(age),
                age / iv.ms as f64,
                if iv.estimated { "estimated " } else { "" },
                ms(iv.ms as f64)
            ));
            r.evidence.push(ctx.evidence(
                "job",
                "time since lastCheckpointCompletedTimestamp",
                age,
                "ms",
                Some(limit),
                "checkpoints",
            ));
        }
    }
    if let Some(d) = last_duration.filter(|d| *d >= t.checkpoint_timeout_share * timeout_ms as f64) {
        reasons.push(format!(
            "the last checkpoint took {}, {:.0}% of the {} timeout",
            ms(d),
            d / timeout_ms as f64 * 100.0,
            ms(timeout_ms as f64)
        ));
        r.evidence.push(ctx.evidence(
            "job",
            "lastCheckpointDuration",
            d,
            "ms",
            Some(t.checkpoint_timeout_share * timeout_ms as f64),
            "checkpoints",
        ));
    }

    let unaligned_fix = if unaligned {
        "Unaligned checkpoints are already on: they cannot help when the task thread itself is blocked (timer or window-firing storms, a sink stuck in its snapshot); look at what the culprit does while it snapshots.".to_string()
    } else {
        "Unaligned checkpoints, so barriers overtake the backlog: execution.checkpointing.unaligned.enabled: true, optionally execution.checkpointing.aligned-checkpoint-timeout: 30 s (start aligned, switch when alignment takes longer), and buffer debloating (taskmanager.network.memory.buffer-debloat.enabled: true); the cost is in-flight data written into each checkpoint.".to_string()
    };
    let barrier_wait = barrier_wait(ctx);
    if !reasons.is_empty() {
        r.detail = format!("The recovery point is in trouble: {}.", reasons.join("; "));
        r.cause.push(format!(
            "Aligned checkpoint barriers travel at the speed of the data, so the backpressure slows checkpoints: {}.{}",
            reasons.join("; "),
            barrier_wait
                .as_ref()
                .map(|(name, v)| format!(" Barriers wait behind data: checkpointStartDelay on {name} is {}.", ms(*v)))
                .unwrap_or_default()
        ));
        r.fix.push(unaligned_fix);
        if let Some(c) = culprit {
            r.fix.push(format!(
                "Relieve the backpressure at {}: the checkpoints slow because the data waits for it.",
                c.name
            ));
        }
        r.summary = Some(format!(
            "{}checkpoints are in trouble: {}.",
            culprit.map(|c| format!("{} is the culprit and ", c.name)).unwrap_or_default(),
            reasons[0]
        ));
        return r;
    }

    // Not a hit: report a slowdown as evidence and secondary advice.
    let mut clear = StepReport::clear(String::new());
    let before = duration_before(series, snap.window.start_ms);
    let mut slow = false;
    let mut parts = vec![format!(
        "Checkpoints complete{}",
        last_duration.map(|d| format!(" (last took {})", ms(d))).unwrap_or_default()
    )];
    if let Some(d) = last_duration {
        if let Some(b) = before.filter(|b| *b > 0.0 && d >= 10.0 * b) {
            parts.push(format!("slower than before the backpressure ({} then, {} now)", ms(b), ms(d)));
            clear.evidence.push(ctx.evidence(
                "job",
                "lastCheckpointDuration before the window",
                b,
                "ms",
                None,
                "checkpoints",
            ));
            slow = true;
        }
        if let Some(iv) = interval.filter(|iv| d > iv.ms as f64) {
            parts.push(format!(
                "longer than their {}interval of {}",
                if iv.estimated { "estimated " } else { "" },
                ms(iv.ms as f64)
            ));
            slow = true;
        }
        clear.evidence.push(ctx.evidence("job", "lastCheckpointDuration", d, "ms", None, "checkpoints"));
    }
    if let Some((name, v)) = &barrier_wait {
        parts.push(format!("barriers wait {} behind data on {name}", ms(*v)));
    }
    clear.detail = format!(
        "{}; no failures after start-up, the recovery point advances and no checkpoint nears the {} timeout.",
        parts.join(", "),
        ms(timeout_ms as f64)
    );
    if slow {
        clear.advice.push(format!("Checkpoints have slowed with the backlog. {unaligned_fix}"));
    }
    if interval.is_some_and(|i| i.estimated) {
        clear
            .detail
            .push_str(" The interval is estimated from completed checkpoints (no Flink REST checkpoint config).");
    }
    clear
}

/// The backpressured vertex whose barriers wait longest (`checkpointStartDelayNanos`), ms.
fn barrier_wait(ctx: &Context) -> Option<(String, f64)> {
    ctx.snapshot
        .subtasks
        .iter()
        .filter(|s| ctx.red.contains(&s.vertex_id))
        .filter_map(|s| Some((s.vertex_id.clone(), s.checkpoint_start_delay_ms?)))
        .filter(|(_, v)| *v >= 100.0)
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(id, v)| (ctx.signals.vertex(&id).map(|x| x.name.clone()).unwrap_or(id), v))
}
