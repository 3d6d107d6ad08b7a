//! The job lookup, asked once per diagnosis: the runs of every job the metrics show
//! ([`JobLookup::find`]) and the one rule that picks the run a request names
//! ([`JobLookup::resolve`]).
//!
//! A live diagnosis needs the run before it collects (the labels of its JobManager series
//! fill a Flink REST URL template; its name or id finds a configured plan), and the
//! collector needs it again for round 1. The caller asks once and hands the lookup down:
//! the collector answers its own round-1 queries from the lookup's recorded answers
//! ([`Replay`]), so they pass through the same domain screening and degrading as every
//! other answer, and resolves with the same rule.

use std::sync::Mutex;

use super::runs::{Resolved, find_runs, newest_per_id};
use super::{CollectError, JobRun, MetricSource, QueryError};
use crate::collect::query::{Query, QueryResult};
use crate::model::catalog::MetricCatalog;

/// A query and the answer it got.
type Answered = (Query, Result<QueryResult, QueryError>);

/// The answer of the job lookup at one time: every run (or why there is none), and the
/// queries it took with their answers, for the collector to reuse.
#[derive(Debug)]
pub struct JobLookup {
    /// The runs of every job with metrics in the lookback, and the time of the store's
    /// newest data; or why the lookup failed.
    pub runs: Result<(Vec<JobRun>, Option<i64>), CollectError>,
    answers: Vec<Answered>,
    /// The step of the lookup's range query, ms.
    step_ms: i64,
}

impl JobLookup {
    /// Asks `source` for the runs of every job with metrics in the `lookback` before `at`
    /// (the queries of [`find_runs`]: the uptime lookup and the store's newest sample,
    /// and the task-metrics fallback when no JobManager is scraped).
    pub async fn find<S: MetricSource>(source: &S, cat: &MetricCatalog, at: i64, lookback: i64, step: i64) -> Self {
        let recording = Recording { inner: source, answers: Mutex::new(Vec::new()) };
        let runs = find_runs(&recording, cat, at, lookback, step).await;
        JobLookup { runs, answers: recording.answers.into_inner().unwrap_or_else(|p| p.into_inner()), step_ms: step }
    }

    /// The run to diagnose: `wanted` (the Flink name, the reporter's name or the id),
    /// else the plan's job id, else the only job there is; among several runs of one name
    /// the newest, with a note ([`resolve_job`] over one run per job id). The one rule every
    /// caller uses.
    ///
    /// A run that stopped reporting while a newer run of the same job name and deployment
    /// reports (a redeploy under a new job id) gives way to that run
    /// ([`super::runs::successor`]), and [`Resolved::replaced`] says so.
    pub fn resolve(&self, wanted: Option<&str>, plan_job_id: Option<&str>) -> Result<Resolved, CollectError> {
        let (runs, newest) = self.runs.as_ref().map_err(Clone::clone)?;
        Resolved::among(&newest_per_id(runs), wanted, plan_job_id, *newest, self.step_ms)
    }

    /// How many queries the lookup asked.
    pub fn queries(&self) -> usize {
        self.answers.len()
    }
}

/// Asks `inner` and keeps every answer.
struct Recording<'a, S> {
    inner: &'a S,
    answers: Mutex<Vec<Answered>>,
}

impl<S: MetricSource> MetricSource for Recording<'_, S> {
    async fn run(&self, queries: &[Query]) -> Vec<Result<QueryResult, QueryError>> {
        let answers = self.inner.run(queries).await;
        let mut kept = self.answers.lock().unwrap_or_else(|p| p.into_inner());
        kept.extend(queries.iter().cloned().zip(answers.iter().cloned()));
        answers
    }

    fn latest_ms(&self) -> Option<i64> {
        self.inner.latest_ms()
    }
}

/// Answers each query a [`JobLookup`] already asked from its answer (once: the answer is
/// handed over, not copied), every other query from `inner`, in one batch.
pub(super) struct Replay<'a, S> {
    inner: &'a S,
    answers: Mutex<Vec<Answered>>,
}

impl<'a, S> Replay<'a, S> {
    pub(super) fn new(inner: &'a S, lookup: Option<JobLookup>) -> Self {
        Replay { inner, answers: Mutex::new(lookup.map(|l| l.answers).unwrap_or_default()) }
    }
}

impl<S: MetricSource> MetricSource for Replay<'_, S> {
    async fn run(&self, queries: &[Query]) -> Vec<Result<QueryResult, QueryError>> {
        let mut out: Vec<Option<Result<QueryResult, QueryError>>> = {
            let mut answers = self.answers.lock().unwrap_or_else(|p| p.into_inner());
            queries
                .iter()
                .map(|q| answers.iter().position(|(asked, _)| asked == q).map(|i| answers.swap_remove(i).1))
                .collect()
        };
        let ask: Vec<Query> = queries.iter().zip(&out).filter(|(_, a)| a.is_none()).map(|(q, _)| q.clone()).collect();
        if !ask.is_empty() {
            let mut fresh = self.inner.run(&ask).await.into_iter();
            for slot in out.iter_mut().filter(|a| a.is_none()) {
                *slot = fresh.next();
            }
        }
        out.into_iter().map(|a| a.expect("one answer per query")).collect()
    }

    fn latest_ms(&self) -> Option<i64> {
        self.inner.latest_ms()
    }
}
