//! Round 1: which job. The runs of every job the metrics show ([`find_runs`]), the one a
//! request names ([`resolve_job`]), its deployment, and where its data ends.

use std::collections::{BTreeMap, BTreeSet};

use super::lookup::JobLookup;
use super::{CollectError, CollectInput, MetricSource};
use crate::collect::identity::{self};
use crate::collect::query::{Agg, Aggregation, OverTime, Query, QueryResult, Selector};
use crate::model::catalog::{MetricCatalog, labels as l};
use crate::model::graph::same_name;
use crate::model::snapshot::RunChange;
/// One run of a job as its metrics show it.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRun {
    pub id: String,
    /// `job_name` label (sanitized by the reporter).
    pub name_label: String,
    /// Time of the newest sample, Unix ms.
    pub last_seen_ms: i64,
    /// When the newest sample was taken, Unix ms: the last step at which the uptime
    /// changed (a step evaluation repeats a sample for up to the lookback delta).
    pub sampled_at_ms: i64,
    /// How often the job's metrics are scraped, ms, as the uptime gauge's changes show it
    /// (median spacing); None with fewer than three changes.
    pub scrape_interval_ms: Option<i64>,
    /// Start of the run (evaluation time minus uptime), Unix ms, when uptime is known.
    pub start_ms: Option<i64>,
    /// The first evaluation time with data for this run (a recording may begin after the
    /// run started), Unix ms.
    pub first_seen_ms: i64,
    /// The JobManager still reports, but its newest uptime is 0 after the run ran: Flink's
    /// "not running at the moment" (restarting, failing over).
    pub not_running_now: bool,
    /// The last evaluation time where the run ran before its latest start (a restart or
    /// in-place rescale: the uptime reset), Unix ms; None when it did not run before it
    /// in the data.
    pub before_start_ms: Option<i64>,
    /// The labels of its JobManager series besides `job_id` and `job_name`, scrape labels
    /// dropped (`host`, `namespace`, `cluster`, …): what tells two deployments under one job
    /// id apart.
    pub labels: BTreeMap<String, String>,
}

/// Runs of every job seen in the answer of the job lookup query (uptime per step).
pub fn job_runs(uptime: &QueryResult) -> Vec<JobRun> {
    uptime
        .iter()
        .filter(|s| !s.label(l::JOB_ID).is_empty())
        .filter_map(|s| {
            let finite: Vec<(i64, f64)> = s.points.iter().copied().filter(|p| p.1.is_finite()).collect();
            let &(t, newest) = finite.last()?;
            // Flink's uptime is an age only while the job runs: 0 is "not running at the
            // moment" (created, restarting), −1 "no longer running". Neither is a start:
            // the run's samples are those where it ran, and a start is where the uptime
            // becomes positive again after a reset.
            let running: Vec<(i64, f64)> = finite.iter().copied().filter(|p| p.1 > 0.0).collect();
            let seen = if running.is_empty() { &finite } else { &running };
            let u = seen.last().map_or(0.0, |p| p.1);
            // A step evaluation repeats the newest sample until the next one: the step where
            // the value last changed is within one step of that sample's own time, however
            // stale the data is (a job that stopped reporting).
            let sampled_at = seen.windows(2).rev().find(|w| w[1].1 != w[0].1).map(|w| w[1].0).unwrap_or(seen[0].0);
            // The scrape interval: the median spacing of the steps where the value changed.
            let changes: Vec<i64> = seen.windows(2).filter(|w| w[1].1 != w[0].1).map(|w| w[1].0).collect();
            let mut spacings: Vec<i64> = changes.windows(2).map(|c| c[1] - c[0]).collect();
            spacings.sort_unstable();
            let scrape_interval_ms = spacings.get(spacings.len() / 2).copied();
            let start = (!running.is_empty()).then(|| sampled_at - u as i64);
            Some(JobRun {
                id: s.label(l::JOB_ID).to_string(),
                name_label: s.label(l::JOB_NAME).to_string(),
                last_seen_ms: t,
                sampled_at_ms: sampled_at,
                scrape_interval_ms,
                start_ms: start,
                first_seen_ms: seen[0].0,
                not_running_now: newest == 0.0 && !running.is_empty(),
                before_start_ms: start.and_then(|st| running.iter().rev().find(|p| p.0 < st).map(|p| p.0)),
                labels: s
                    .labels
                    .iter()
                    .filter(|(k, _)| *k != l::JOB_ID && *k != l::JOB_NAME)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            })
        })
        .collect()
}

/// Picks the run to diagnose. `wanted` may be the Flink name, the sanitized name or the
/// id; without it, the plan's job id, else the only job there is. Among several runs of
/// one name, the newest wins (latest sample, then latest start) and a note says so.
pub fn resolve_job(
    runs: &[JobRun],
    wanted: Option<&str>,
    plan_job_id: Option<&str>,
) -> Result<(JobRun, Vec<String>), CollectError> {
    let mut notes = Vec::new();
    let known: BTreeSet<String> = runs.iter().map(|r| r.name_label.clone()).collect();
    let matching: Vec<&JobRun> = match wanted {
        Some(w) => {
            runs.iter().filter(|r| r.id == w || (!r.name_label.is_empty() && same_name(&r.name_label, w))).collect()
        }
        None => {
            if let Some(run) = plan_job_id.and_then(|id| runs.iter().find(|r| r.id == id)) {
                return Ok((run.clone(), notes));
            }
            if known.len() > 1 {
                return Err(CollectError::AmbiguousJob { names: known.into_iter().collect() });
            }
            runs.iter().collect()
        }
    };
    if matching.is_empty() {
        return Err(CollectError::JobNotFound {
            wanted: wanted.unwrap_or_default().to_string(),
            known: known.into_iter().collect(),
        });
    }
    // An explicit id, or the plan's id among the runs, names one run exactly.
    if let Some(run) = matching.iter().find(|r| Some(r.id.as_str()) == wanted || Some(r.id.as_str()) == plan_job_id) {
        if matching.len() > 1 && Some(run.id.as_str()) == plan_job_id && Some(run.id.as_str()) != wanted {
            notes.push(format!(
                "{} runs of job {} left metrics; using job_id {} from the job plan",
                matching.len(),
                run.name_label,
                run.id
            ));
        }
        return Ok(((*run).clone(), notes));
    }
    let newest = matching.iter().max_by_key(|r| (r.last_seen_ms, r.start_ms.unwrap_or(i64::MIN))).expect("non-empty");
    if matching.len() > 1 {
        let others: Vec<&str> = matching.iter().filter(|r| r.id != newest.id).map(|r| r.id.as_str()).collect();
        notes.push(format!(
            "{} runs of job {} left metrics; using the newest, job_id {} (ignored: {})",
            matching.len(),
            newest.name_label,
            newest.id,
            others.join(", ")
        ));
    }
    Ok(((*newest).clone(), notes))
}

/// The labels of a JobManager series that a new pod of the same deployment gets anew:
/// Flink's `host` (the pod's address). Every other label both runs carry (`namespace`,
/// `cluster`, …; scrape labels are dropped already) must agree for a run to take over
/// another.
const PER_PROCESS_LABELS: [&str; 1] = ["host"];

/// How long after its last sample a run counts as stopped, ms: two scrape intervals and a
/// step, or [`STALE_AFTER_MS`] when the interval is unknown.
pub(super) fn stale_after(run: &JobRun, step: i64) -> i64 {
    run.scrape_interval_ms.map_or(STALE_AFTER_MS, |i| 2 * i + step)
}

/// The run that took over from `run` when it stopped: a run of the same job name and
/// deployment (every label both carry equal, but [`PER_PROCESS_LABELS`]) under another job
/// id, started after it, that still reports while `run` does not (judged against
/// `newest`, the store's newest data, else the newest sample of any run). A redeploy from
/// a savepoint (the Flink Kubernetes Operator's upgrade) brings the job back so. The
/// newest such run, when several.
pub fn successor<'a>(runs: &'a [JobRun], run: &JobRun, newest: Option<i64>, step: i64) -> Option<&'a JobRun> {
    let reference = newest.or_else(|| runs.iter().map(|r| r.sampled_at_ms).max())?;
    let stopped = |r: &JobRun| reference - r.sampled_at_ms > stale_after(r, step);
    if run.name_label.is_empty() || !stopped(run) {
        return None;
    }
    let started = |r: &JobRun| r.start_ms.unwrap_or(r.first_seen_ms);
    let same_deployment = |r: &JobRun| {
        r.labels
            .iter()
            .filter(|(k, _)| !PER_PROCESS_LABELS.contains(&k.as_str()))
            .all(|(k, v)| run.labels.get(k).is_none_or(|w| w == v))
    };
    runs.iter()
        .filter(|r| r.id != run.id && r.name_label == run.name_label && !stopped(r))
        .filter(|r| started(r) > started(run) && same_deployment(r))
        .max_by_key(|r| (started(r), r.sampled_at_ms))
}

/// When the scrape interval is unknown: a job whose newest sample is older than this (ms)
/// before the diagnosis time is judged as of that sample (a 60 s scrape interval, its
/// jitter and an evaluation step fit within it).
pub const STALE_AFTER_MS: i64 = 90_000;

/// Round 1: the run to diagnose, notes about the choice, and the time the diagnosis is
/// about (`at`, or earlier when the data ends earlier: see [`data_end`]).
pub(super) async fn which_job<S: MetricSource>(
    source: &S,
    input: &CollectInput<'_>,
    at: i64,
) -> Result<Which, CollectError> {
    let cfg = &input.config.diagnosis;
    let lookup = JobLookup::find(source, input.catalog, at, cfg.trend_lookback.as_ms(), cfg.step.as_ms()).await;
    let plan_job_id = input.graph.as_ref().and_then(|g| g.job_id.clone());
    let Resolved { run: picked, mut notes, replaced } =
        lookup.resolve(input.request.job.as_deref(), plan_job_id.as_deref())?;
    let (runs, newest) = lookup.runs?;
    let (run, distinguishing) =
        choose_deployment(&runs, &picked.id, &input.request.labels, cfg.step.as_ms(), &mut notes)?;
    let stale_after = stale_after(&run, cfg.step.as_ms());
    let end = data_end(&run, at, newest, stale_after, input.request.at_ms.is_some(), &mut notes);
    // The verdict is as of the run's last sample: said in its summary, not in a note alone.
    // (`data_end`'s first case: the run's data ends more than `stale_after` before the store's.)
    let gap = newest.map_or(at, |n| n.min(at)) - run.sampled_at_ms;
    let stopped = (gap > stale_after).then(|| RunChange::Stopped {
        id: run.id.clone(),
        last_ms: run.sampled_at_ms,
        gap_s: gap / 1000,
        not_running_now: run.not_running_now,
    });
    Ok(Which { run, notes, at: end, distinguishing, replaced, stopped })
}

/// Round 1's answer.
pub(super) struct Which {
    pub(super) run: JobRun,
    pub(super) notes: Vec<String>,
    /// The time the diagnosis is about.
    pub(super) at: i64,
    /// The labels that tell the run's deployment from others under its job id, with its
    /// values (empty: the job id is one deployment's).
    pub(super) distinguishing: Vec<(String, String)>,
    /// The run asked about stopped and this one took over ([`RunChange::Replaced`]).
    pub(super) replaced: Option<RunChange>,
    /// The run stopped and none took over ([`RunChange::Stopped`]).
    pub(super) stopped: Option<RunChange>,
}

/// The run a request names, as [`JobLookup::resolve`] chooses it.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The run to diagnose: the one named, or the run that took over when it stopped.
    pub run: JobRun,
    /// Notes about the choice.
    pub notes: Vec<String>,
    /// Set when the run named stopped and [`Resolved::run`] took over from it.
    pub replaced: Option<RunChange>,
}

impl Resolved {
    /// The choice among `runs` (one per job id, [`newest_per_id`]) of `resolve_job`, then
    /// the run that took over when the chosen one stopped ([`successor`]).
    pub(super) fn among(
        runs: &[JobRun],
        wanted: Option<&str>,
        plan_job_id: Option<&str>,
        newest: Option<i64>,
        step: i64,
    ) -> Result<Resolved, CollectError> {
        let (run, notes) = resolve_job(runs, wanted, plan_job_id)?;
        match successor(runs, &run, newest, step) {
            // The notes were about choosing the stopped run among its namesakes.
            Some(next) => Ok(Resolved {
                replaced: Some(RunChange::Replaced {
                    old_id: run.id.clone(),
                    new_id: next.id.clone(),
                    old_last_ms: run.sampled_at_ms,
                    new_start_ms: next.start_ms.unwrap_or(next.first_seen_ms),
                    resized: Vec::new(),
                }),
                run: next.clone(),
                notes: Vec::new(),
            }),
            None => Ok(Resolved { run, notes, replaced: None }),
        }
    }
}

/// One run per job id (its newest series) for choosing the job; the deployments of the
/// chosen id are told apart afterwards.
pub(super) fn newest_per_id(runs: &[JobRun]) -> Vec<JobRun> {
    let mut by_id: BTreeMap<&str, &JobRun> = BTreeMap::new();
    for r in runs {
        let e = by_id.entry(&r.id).or_insert(r);
        if (r.sampled_at_ms, r.last_seen_ms) > (e.sampled_at_ms, e.last_seen_ms) {
            *e = r;
        }
    }
    by_id.into_values().cloned().collect()
}

/// The deployment to diagnose among the JobManager series of job id `id`: one, or the one
/// the request's labels name (a note says so); several at once without a choice is an
/// error naming them.
pub(super) fn choose_deployment(
    runs: &[JobRun],
    id: &str,
    wanted: &BTreeMap<String, String>,
    step: i64,
    notes: &mut Vec<String>,
) -> Result<(JobRun, Vec<(String, String)>), CollectError> {
    let of_id: Vec<&JobRun> = runs.iter().filter(|r| r.id == id).collect();
    let newest = of_id.iter().map(|r| r.sampled_at_ms).max().unwrap_or_default();
    let reporters: Vec<identity::Reporter> = of_id
        .iter()
        .map(|r| identity::Reporter {
            labels: &r.labels,
            current: newest - r.sampled_at_ms <= r.scrape_interval_ms.map_or(STALE_AFTER_MS, |i| 2 * i + step),
            sampled_at_ms: r.sampled_at_ms,
        })
        .collect();
    match identity::pick_deployment(&reporters, wanted) {
        Ok(chosen) => {
            notes.extend(chosen.note);
            Ok((of_id[chosen.index].clone(), chosen.distinguishing))
        }
        Err(a) => Err(CollectError::AmbiguousDeployment {
            job_id: id.to_string(),
            deployments: a.deployments,
            labels: a.labels,
            asked: a.asked,
        }),
    }
}

/// The end of the window: `at`, or earlier when the data ends earlier.
///
/// A window that runs past the newest sample dilutes every rate with empty time (and ages
/// such as "time since the last checkpoint" keep growing). Staleness is judged against the
/// store's own newest data (`newest`, the answer of [`newest_query`]), never the wall
/// clock: VictoriaMetrics hides the last 30 s by default (`-search.latencyOffset`), remote
/// write arrives late. So:
/// * the job's newest sample is more than `stale_after` (two scrape intervals and a step)
///   older than the store's newest data: the job stopped reporting or running (its
///   uptime gauge no longer advances: finished, failed, restarting); the window ends at
///   the job's last sample, with a note;
/// * else, when the store's newest data is more than `stale_after` older than `at`, the
///   window ends there, with a note when `at` was asked for, or beyond
///   [`STORE_LAG_NOTE_MS`] (a store's usual delay is no news).
pub(super) fn data_end(
    run: &JobRun,
    at: i64,
    newest: Option<i64>,
    stale_after: i64,
    asked: bool,
    notes: &mut Vec<String>,
) -> i64 {
    let store_end = newest.map_or(at, |n| n.min(at));
    let gap = store_end - run.sampled_at_ms;
    if gap > stale_after {
        let before = match newest {
            Some(_) if store_end < at => "the newest data in the metric store".to_string(),
            Some(_) if asked => "the time asked for".to_string(),
            Some(_) => "the newest data".to_string(),
            None => format!(
                "{}, and no `{UP}` or JobManager uptime series has samples in the {} min before it",
                if asked { "the time asked for" } else { "the newest data" },
                crate::collect::store::LOOKBACK_DELTA_MS / 60_000
            ),
        };
        notes.push(if run.not_running_now {
            format!(
                "job_id {} has not been running since {} ({} s before {before}): its uptime reads 0 (restarting or failing over), so the diagnosis is as of its last running sample",
                run.id,
                crate::model::verdict::rfc3339(run.sampled_at_ms),
                gap / 1000,
            )
        } else {
            format!(
                "job_id {} has no newer samples than {} ({} s before {before}): it stopped reporting or running (finished, failed, restarting), so the diagnosis is as of its last sample",
                run.id,
                crate::model::verdict::rfc3339(run.sampled_at_ms),
                gap / 1000,
            )
        });
        return run.sampled_at_ms;
    }
    let lag = at - store_end;
    if lag > stale_after {
        if asked || lag > STORE_LAG_NOTE_MS {
            notes.push(format!(
                "the metric store has no newer data than {} ({} s before {}): the diagnosis is as of then",
                crate::model::verdict::rfc3339(store_end),
                lag / 1000,
                if asked { "the time asked for" } else { "the time of the diagnosis" }
            ));
        }
        return store_end;
    }
    at
}

/// Prometheus' own series for every scrape target: where anything is scraped, it is.
pub const UP: &str = "up";
/// The series `culprit record` writes at the time of the store's newest data, so that a
/// replay judges staleness as the live diagnosis did.
pub const STORE_NEWEST: &str = "culprit_store_newest";
/// A store lagging the time of the diagnosis by more than this gets a note.
pub const STORE_LAG_NOTE_MS: i64 = 120_000;

/// The time of the store's newest data at `at`: the newest sample of `up`, of any job's
/// uptime gauge, or of a recording's [`STORE_NEWEST`] marker.
pub fn newest_query(cat: &MetricCatalog, at: i64) -> Query {
    Query::Newest {
        selectors: vec![Selector::metric(UP), Selector::metric(&cat.uptime), Selector::metric(STORE_NEWEST)],
        at_ms: at,
    }
}

/// The time in a [`newest_query`] answer (seconds there), Unix ms.
pub(super) fn newest_ms(answer: &QueryResult) -> Option<i64> {
    answer.first().and_then(|s| s.last_value()).filter(|v| v.is_finite()).map(|s| (s * 1000.0).round() as i64)
}

/// The runs of every job with metrics in the `lookback` before `at`: from the JobManager's
/// uptime gauge, else (only TaskManagers scraped) from task metrics; and the time of the
/// store's newest data ([`newest_query`]; None when unknown).
pub(super) async fn find_runs<S: MetricSource>(
    source: &S,
    cat: &MetricCatalog,
    at: i64,
    lookback: i64,
    step: i64,
) -> Result<(Vec<JobRun>, Option<i64>), CollectError> {
    // One series per JobManager, however many scrape jobs read it; deployments that share a
    // job id stay apart by their other labels.
    let lookup = Query::Range {
        selector: Selector::metric(&cat.uptime),
        aggregation: Some(Aggregation::without(Agg::Max, &cat.scrape_labels)),
        start_ms: at - lookback,
        end_ms: at,
        step_ms: step,
    };
    let fallback_lookup = Query::OverTime {
        selector: Selector::metrics(&[&cat.busy, &cat.is_backpressured]),
        func: OverTime::Last,
        range_ms: lookback,
        at_ms: at,
        aggregation: Some(Aggregation::new(Agg::Max, &[l::JOB_ID, l::JOB_NAME])),
    };
    let mut answers = source.run(&[lookup, newest_query(cat, at)]).await.into_iter();
    let uptime = answers.next().expect("two answers").map_err(|e| CollectError::Source(e.message))?;
    // Unknown (the query failed): staleness is judged against `at`, as before.
    let newest = answers.next().and_then(Result::ok).and_then(|a| newest_ms(&a));
    let mut runs = job_runs(&uptime);
    if runs.is_empty() {
        // No JobManager metrics (e.g. only TaskManager scrapes): jobs from task metrics.
        let busy = source
            .run(&[fallback_lookup])
            .await
            .pop()
            .expect("one answer")
            .map_err(|e| CollectError::Source(e.message))?;
        runs = busy
            .iter()
            .filter(|s| !s.label(l::JOB_ID).is_empty())
            .map(|s| JobRun {
                id: s.label(l::JOB_ID).into(),
                name_label: s.label(l::JOB_NAME).into(),
                last_seen_ms: at,
                sampled_at_ms: at,
                scrape_interval_ms: None,
                start_ms: None,
                first_seen_ms: at,
                not_running_now: false,
                before_start_ms: None,
                labels: BTreeMap::new(),
            })
            .collect();
    }
    if runs.is_empty() {
        return Err(CollectError::NoJobs {
            metric: cat.uptime.clone(),
            from: crate::model::verdict::rfc3339(at - lookback),
            to: crate::model::verdict::rfc3339(at),
        });
    }
    Ok((runs, newest))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run of `orders_enricher` seen from `first` to `last` s (scraped every 5 s), started
    /// at `start` s, with these JobManager labels.
    fn run(id: &str, first: i64, last: i64, start: i64, labels: &[(&str, &str)]) -> JobRun {
        JobRun {
            id: id.into(),
            name_label: "orders_enricher".into(),
            last_seen_ms: last * 1000,
            sampled_at_ms: last * 1000,
            scrape_interval_ms: Some(5_000),
            start_ms: Some(start * 1000),
            first_seen_ms: first * 1000,
            not_running_now: false,
            before_start_ms: None,
            labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        }
    }

    const NS: (&str, &str) = ("namespace", "streaming");

    /// The JobManager's uptime series of one job, `(s, uptime ms)` at 5 s steps.
    fn uptime(points: &[(i64, f64)]) -> QueryResult {
        vec![crate::collect::query::ResultSeries {
            labels: [(l::JOB_ID.to_string(), "a".to_string()), (l::JOB_NAME.to_string(), "j".to_string())].into(),
            points: points.iter().map(|&(t, u)| (t * 1000, u)).collect(),
        }]
    }

    #[test]
    fn an_uptime_of_zero_or_minus_one_never_starts_a_run_and_a_start_is_where_it_becomes_positive_again() {
        // Ran from 100 s (uptime 0 at 100 s + 5 s … ), then 0 from 120 s on: restarting.
        for sentinel in [0.0, -1.0] {
            let r = &job_runs(&uptime(&[
                (100, 5_000.0),
                (105, 10_000.0),
                (110, 15_000.0),
                (115, sentinel),
                (120, sentinel),
            ]))[0];
            // The last running sample is at 110 s; 110 s − 15 s = started at 95 s.
            assert_eq!((r.sampled_at_ms, r.start_ms), (110_000, Some(95_000)), "{sentinel}");
            assert_eq!(r.not_running_now, sentinel == 0.0);
            assert_eq!(r.before_start_ms, None);
        }
        // Ran, was 0 for 20 s (the restart gap), ran again: started where it became positive
        // (uptime 5 s at 140 s: 135 s); the last running sample before that is at 110 s.
        let r = &job_runs(&uptime(&[
            (100, 5_000.0),
            (110, 15_000.0),
            (115, 0.0),
            (130, 0.0),
            (140, 5_000.0),
            (145, 10_000.0),
        ]))[0];
        assert_eq!((r.start_ms, r.before_start_ms, r.not_running_now), (Some(135_000), Some(110_000), false));
        // Only zeros (created, never running in the data): no start at all.
        let r = &job_runs(&uptime(&[(100, 0.0), (105, 0.0)]))[0];
        assert_eq!(r.start_ms, None);
    }

    #[test]
    fn a_run_that_stopped_gives_way_to_the_newer_run_of_its_name_and_deployment() {
        // A stopped at 360 s; B started at 395 s and reports until 600 s, the newest data.
        // Stopped: 600 − 360 = 240 s > 2 × 5 s + 5 s. B's JobManager pod has another host.
        let a = run("a", 0, 360, -3600, &[NS, ("host", "jm-1")]);
        let b = run("b", 400, 600, 395, &[NS, ("host", "jm-2")]);
        let runs = [a.clone(), b.clone()];
        assert_eq!(successor(&runs, &a, Some(600_000), 5_000).map(|r| r.id.as_str()), Some("b"));
        let resolved = Resolved::among(&runs, Some("a"), None, Some(600_000), 5_000).unwrap();
        assert_eq!(resolved.run.id, "b");
        assert_eq!(
            resolved.replaced,
            Some(RunChange::Replaced {
                old_id: "a".into(),
                new_id: "b".into(),
                old_last_ms: 360_000,
                new_start_ms: 395_000,
                resized: Vec::new(),
            })
        );
        // B reports: nothing takes over from it.
        assert!(successor(&runs, &b, Some(600_000), 5_000).is_none());
    }

    #[test]
    fn no_run_takes_over_from_one_that_still_reports_or_from_another_deployment_or_an_older_run() {
        let a = run("a", 0, 360, -3600, &[NS]);
        // Another namespace: another deployment of the same jar.
        let other_ns = run("b", 400, 600, 395, &[("namespace", "staging")]);
        assert!(successor(&[a.clone(), other_ns], &a, Some(600_000), 5_000).is_none());
        // A still reports at 600 s (last sample 595 s: 5 s ≤ 15 s): it was not replaced,
        // whatever else runs under its name.
        let current = run("a", 0, 595, -3600, &[NS]);
        let b = run("b", 400, 600, 395, &[NS]);
        assert!(successor(&[current.clone(), b], &current, Some(600_000), 5_000).is_none());
        // A run started before A is no successor.
        let older = run("c", 0, 600, -7200, &[NS]);
        assert!(successor(&[a.clone(), older], &a, Some(600_000), 5_000).is_none());
        // Nor is a run of another name.
        let mut renamed = run("d", 400, 600, 395, &[NS]);
        renamed.name_label = "payments".into();
        assert!(successor(&[a.clone(), renamed], &a, Some(600_000), 5_000).is_none());
    }
}
