//! Round 2: which series of the run count, and which window the averages are taken over.

use super::{CollectError, CollectInput, JobRun, MetricSource, failed};
use crate::collect::identity::{self, SeriesScope};
use crate::collect::query::{Agg, Aggregation, Query, Selector};
use crate::model::catalog::labels as l;
use crate::model::failover::Failover;
use crate::model::snapshot::Leaves;
use crate::model::snapshot::{BackpressureMeasure, Missing, Window, WindowBound};
/// The start of the current episode: the time of the latest evaluation whose state
/// (backpressured or not) differs from the state at the end. `points` are
/// `(t_ms, max backpressured ms/s over the job's subtasks)`, oldest first; `threshold` in
/// the same unit. `None` when the state never changes.
pub fn episode_start(points: &[(i64, f64)], threshold: f64) -> Option<i64> {
    let state = |v: f64| v > threshold;
    let last = state(points.last()?.1);
    points.iter().rev().find(|p| state(p.1) != last).map(|p| p.0)
}

/// Round 2, first half: which series of the run count: its deployment (of
/// `distinguishing`, the labels its task series carry), and the hygiene its task series
/// need (only the newest of several task attempts, each of several scrape targets once); a
/// note when series were scraped more than once. A failed query is noted in `missing` and
/// leaves the series as they are.
pub(super) async fn which_series<S: MetricSource>(
    source: &S,
    input: &CollectInput<'_>,
    run: &JobRun,
    distinguishing: &[(String, String)],
    at: i64,
    notes: &mut Vec<String>,
    missing: &mut Vec<Missing>,
) -> Result<SeriesScope, CollectError> {
    // Until the task series say otherwise, the deployment is told apart by every label
    // that tells its JobManager series apart.
    let mut series = SeriesScope { matchers: distinguishing.to_vec(), ..SeriesScope::default() };
    let cat = input.catalog;
    let selector = Selector::metric(&cat.records_in).with(l::JOB_ID, &run.id);
    let lookback = input.config.diagnosis.trend_lookback.as_ms();
    let labels: Vec<String> = distinguishing.iter().map(|(k, _)| k.clone()).collect();
    let named = identity::hygiene_queries(&selector, &labels, &cat.scrape_labels, at, lookback);
    let queries: Vec<Query> = named.iter().map(|(_, q)| q.clone()).collect();
    let mut answers = source.run(&queries).await.into_iter();
    match (answers.next(), answers.next()) {
        (Some(Ok(attempts)), Some(Ok(once))) => {
            if !attempts.is_empty() {
                series.matchers = identity::task_matchers(distinguishing, &attempts);
                if series.matchers.is_empty() && !distinguishing.is_empty() {
                    return Err(CollectError::InseparableDeployments {
                        job_id: run.id.clone(),
                        deployment: distinguishing.iter().map(|(k, v)| format!("{k}={v}")).collect(),
                    });
                }
            }
            let (hygiene, note) = identity::hygiene_from(
                &identity::matching(&attempts, &series.matchers),
                &identity::matching(&once, &series.matchers),
                &cat.scrape_labels,
            );
            series.hygiene = hygiene;
            notes.extend(note);
        }
        (Some(Err(e)), _) | (_, Some(Err(e))) => {
            missing.push(Missing { metric: cat.records_in.clone(), why: failed(&e, Some(Leaves::SeriesHygiene)) })
        }
        _ => {}
    }
    Ok(series)
}

/// Round 2, second half: the window averages are taken over, ending at `at`: the requested length,
/// after the job's start-up and its last restart or rescale (plus the span Flink averages
/// over), not before the data, and from the start of the current backpressure episode when
/// configured — never narrower than `min_window`, nor than two periods of a backpressure
/// that recurs. Notes say when and why the window was narrowed; a failed query is noted in
/// `missing`. With the window, when the run restarted or was rescaled inside the requested
/// window ([`super::changes::changed_at`]).
pub(super) async fn which_window<S: MetricSource>(
    source: &S,
    input: &CollectInput<'_>,
    run: &JobRun,
    series: &SeriesScope,
    at: i64,
    missing: &mut Vec<Missing>,
    notes: &mut Vec<String>,
) -> (Window, BackpressureMeasure, Option<i64>, Failover) {
    let cfg = &input.config.diagnosis;
    let cat = input.catalog;
    let requested = input.request.window_ms.unwrap_or(cfg.window.as_ms());
    let min_window = cfg.min_window.as_ms().min(requested);
    let mut window = Window {
        start_ms: at - requested,
        end_ms: at,
        requested_ms: requested,
        bound: WindowBound::Requested,
        settled_ms: None,
    };
    let step = cfg.step.as_ms();
    let exclusion = cfg.startup_exclusion.as_ms();
    let job_range = |selector: Selector, start_ms: i64| Query::Range {
        selector,
        aggregation: Some(Aggregation::new(Agg::Max, &[])),
        start_ms,
        end_ms: at,
        step_ms: step,
    };
    let task = |m: &str| series.task(Selector::metric(m).with(l::JOB_ID, &run.id));
    let job = |m: &str| series.deployment(Selector::metric(m).with(l::JOB_ID, &run.id));
    // Twice the window back, to see whether the backpressure recurs (a pattern needs at
    // least three onsets).
    let pattern_start = window.start_ms - requested;
    let queries = vec![
        job_range(task(&cat.backpressured), pattern_start),
        job_range(job(&cat.num_restarts), window.start_ms - exclusion),
        job_range(job(&cat.num_rescales), window.start_ms - exclusion),
        job_range(task(&cat.is_backpressured), pattern_start),
    ];
    let mut answers = source.run(&queries).await.into_iter();
    let mut series = |name: &str| match answers.next().expect("one answer per query") {
        Ok(result) => result.first().map(|s| s.points.clone()).unwrap_or_default(),
        Err(e) => {
            missing.push(Missing { metric: name.to_string(), why: failed(&e, None) });
            Vec::new()
        }
    };
    let (backpressure, restarts, rescales, is_backpressured) = (
        series(&cat.backpressured),
        series(&cat.num_restarts),
        series(&cat.num_rescales),
        series(&cat.is_backpressured),
    );
    // A reporter older than Flink 1.13 has no backpressured time, only isBackPressured
    // (0 or 1 per scrape): its max over subtasks per step, against the ratio threshold.
    let (measure, backpressure, scale) = if backpressure.is_empty() && !is_backpressured.is_empty() {
        (BackpressureMeasure::IsBackPressuredShare, is_backpressured, 1.0)
    } else {
        (BackpressureMeasure::TimeMsPerSecond, backpressure, 1000.0)
    };

    // Start-up, restarts and rescales: Flink's ratios and rates average over ~60 s.
    // An uptime that became positive again after a reset (the run ran before it in the
    // data) is a restart or in-place rescale too, not the job's start.
    let failover = Failover {
        restarts: super::failover::restarts_in(&restarts, window.start_ms, at),
        counted_from_ms: window.start_ms,
        restarting_now: run.not_running_now,
        exceptions: None,
    };
    let restarted =
        [&restarts, &rescales].iter().filter_map(|s| last_increase(s)).max().max(run.before_start_ms.and(run.start_ms));
    // A (re)start whose warm-up reaches into the window, as for the counters above.
    let changed =
        super::changes::changed_at(run.start_ms, restarted, run.first_seen_ms, window.start_ms - exclusion, at, step);
    exclude_warm_up(&mut window, run.start_ms, restarted, exclusion, at - min_window, notes);
    // Rates over a range that starts before the data would be diluted: begin with the data.
    if run.first_seen_ms > window.start_ms && run.first_seen_ms < at - min_window {
        window.start_ms = run.first_seen_ms;
        window.bound = WindowBound::DataStart;
    }
    if cfg.episode_window {
        let threshold = cfg.thresholds.backpressured_ratio * scale;
        // A backpressure that comes and goes is one pattern, not a new episode each time:
        // keep at least two of its periods.
        let period = crate::diagnose::plan::period_of_series(&backpressure, threshold);
        let points: Vec<(i64, f64)> = backpressure.into_iter().filter(|p| p.0 > window.start_ms).collect();
        let keep = period.map_or(min_window, |p| (2 * p).max(min_window));
        if let Some(flip) = episode_start(&points, threshold) {
            let start = flip.min(at - keep);
            if start > window.start_ms {
                let state = if points.last().is_some_and(|p| p.1 > threshold) { "backpressure" } else { "calm" };
                notes.push(match period {
                    Some(p) => format!(
                        "The window starts at {} ({} s before {}), not the {} s asked for: backpressure comes and goes every ~{} s there, and two periods are kept so the reading does not depend on where {} falls.",
                        crate::model::verdict::rfc3339(start),
                        (at - start) / 1000,
                        crate::model::verdict::rfc3339(at),
                        requested / 1000,
                        p / 1000,
                        crate::model::verdict::rfc3339(at)
                    ),
                    None => format!(
                        "The window starts at {} ({} s before {}), not the {} s asked for: the current {state} began then, and averages over the time before it would describe another state.",
                        crate::model::verdict::rfc3339(start),
                        (at - start) / 1000,
                        crate::model::verdict::rfc3339(at),
                        requested / 1000
                    ),
                });
                window.start_ms = start;
                window.bound = WindowBound::EpisodeStart;
            }
        }
    }
    (window, measure, changed, failover)
}

/// Starts the window after the warm-up of the job's latest start, restart or rescale
/// (`restarted`), never later than `latest_start` (the minimum window) nor before the
/// (re)start itself, and records when the warm-up ends.
pub(super) fn exclude_warm_up(
    window: &mut Window,
    job_start: Option<i64>,
    restarted: Option<i64>,
    exclusion: i64,
    latest_start: i64,
    notes: &mut Vec<String>,
) {
    let Some(start) = job_start.into_iter().chain(restarted).max() else { return };
    let settled = start + exclusion;
    window.settled_ms = Some(settled);
    if settled <= window.start_ms {
        return;
    }
    window.start_ms = settled.min(latest_start).max(start);
    window.bound = if restarted == Some(start) { WindowBound::RestartExcluded } else { WindowBound::StartupExcluded };
    notes.push(format!(
        "Samples before {} are left out: the job {} at {}, and Flink's busy, idle and backpressured times and records rates are ~60 s averages that still carry what happened before{}.",
        crate::model::verdict::rfc3339(window.start_ms),
        if restarted == Some(start) { "restarted or rescaled" } else { "started" },
        crate::model::verdict::rfc3339(start),
        if window.start_ms < settled { "; the window keeps its minimum length, so some of them remain" } else { "" }
    ));
}

/// The time of the last increase of a counter sampled per step (a restart), if any.
pub(super) fn last_increase(points: &[(i64, f64)]) -> Option<i64> {
    points.windows(2).rev().find(|w| w[1].1.is_finite() && w[0].1.is_finite() && w[1].1 > w[0].1).map(|w| w[1].0)
}
