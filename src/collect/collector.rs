//! Request + metric source → [`Snapshot`].
//!
//! One code path for every backend: the collector decides which [`Query`]s to ask, in
//! four rounds (which job; which window; every vertex aggregated and the job-level signals;
//! per-subtask detail where the runbook looks), and a [`MetricSource`]
//! answers them — a recording in memory, or Prometheus over HTTP. A query that fails or
//! finds nothing becomes a [`Missing`] entry, never an error: only "no such job" stops a
//! diagnosis.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;

use crate::collect::identity::{self, SeriesScope};
use crate::collect::kafka;
use crate::collect::query::{Agg, Aggregation, OverTime, Query, QueryResult, ResultSeries, Selector};
use crate::config::Config;
use crate::model::catalog::{MetricCatalog, labels as l};
use crate::model::graph::{JobGraph, flink_taskmanager_id, sanitize_label_value};
use crate::model::request::DiagnosisRequest;
use crate::model::snapshot::{
    BackpressureMeasure, CheckpointConfig, CheckpointPoint, Checkpoints, JobIdentity, Missing, OperatorRates,
    RocksDbSubtask, Snapshot, SourceSubtaskLag, SubtaskMetrics, TaskManagerMetrics, VertexAggregate, VertexTimeline,
    VertexWatermark, Window, WindowBound,
};

/// A query that could not be answered (network, HTTP status, bad answer). The message
/// never contains credentials.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct QueryError {
    pub message: String,
    /// The backend refused the query as too large: smaller queries may be answered.
    pub too_large: Option<TooLarge>,
}

/// What a backend found too large in a query it refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TooLarge {
    /// Too many series, chunks or samples: fewer series (or a shorter range) may pass.
    Series,
    /// Too many evaluation steps, or too long a range: only a shorter range passes.
    Steps,
}

impl QueryError {
    pub fn new(message: impl Into<String>) -> Self {
        QueryError { message: message.into(), too_large: None }
    }
}

/// Something that answers queries: a recording in memory or a live backend.
pub trait MetricSource {
    /// Answers independent queries; one result per query, in order. A backend may run
    /// them concurrently or merge them into fewer requests.
    fn run(&self, queries: &[Query]) -> impl Future<Output = Vec<Result<QueryResult, QueryError>>>;

    /// The newest time with data: a recording's last sample; live, now. Unix ms.
    fn latest_ms(&self) -> Option<i64>;
}

impl MetricSource for crate::collect::store::SeriesStore {
    async fn run(&self, queries: &[Query]) -> Vec<Result<QueryResult, QueryError>> {
        queries.iter().map(|q| Ok(self.evaluate(q))).collect()
    }

    fn latest_ms(&self) -> Option<i64> {
        self.last_timestamp_ms()
    }
}

/// Why no snapshot could be taken. One sentence each.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CollectError {
    #[error("there is no data to diagnose (no samples, and no time was given)")]
    NoData,
    #[error("no Flink job named or with id `{wanted}` has metrics here{}", did_you_mean(.wanted, .known))]
    JobNotFound { wanted: String, known: Vec<String> },
    #[error("several jobs have metrics here ({}); choose one with --job", list_some(.names))]
    AmbiguousJob { names: Vec<String> },
    #[error("{}", ambiguous_deployment(.job_id, .deployments, .labels, .asked))]
    AmbiguousDeployment {
        job_id: String,
        /// Each deployment, as `label=value, …`.
        deployments: Vec<String>,
        /// The labels that tell them apart.
        labels: Vec<String>,
        /// What the request said of those labels (`label=value`).
        asked: Vec<String>,
    },
    #[error(
        "job_id {job_id} is reported by several deployments at once, and its task metrics carry none of the labels that tell the one with {} apart: they cannot be diagnosed apart. Give every series of each deployment a label that tells it apart (e.g. relabel `namespace` or `cluster` onto the TaskManagers' series too)",
        .deployment.join(", ")
    )]
    InseparableDeployments { job_id: String, deployment: Vec<String> },
    #[error(
        "no Flink job metrics (`{metric}`) between {from} and {to}; is this a Flink reporter's output, and is that the time to look at?"
    )]
    NoJobs { metric: String, from: String, to: String },
    #[error("could not look up the job: {0}")]
    Source(String),
}

/// Most job names an error quotes: a Prometheus holds other teams' jobs, and a message
/// that goes to Slack and PagerDuty must neither list them all nor grow with them.
pub const QUOTED_JOBS: usize = 3;

/// `; did you mean `a`, `b`?` with the known names closest to `wanted` (at most
/// [`QUOTED_JOBS`], only those alike: sharing most characters, or one holding the other),
/// else how many jobs there are.
fn did_you_mean(wanted: &str, known: &[String]) -> String {
    let close = closest(wanted, known, QUOTED_JOBS);
    match (close.is_empty(), known.len()) {
        (_, 0) => " (no job has metrics)".into(),
        (true, 1) => " (1 other job has metrics; its name is not alike)".into(),
        (true, n) => format!(" ({n} other jobs have metrics; none is named alike)"),
        (false, _) => {
            format!("; did you mean {}?", close.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "))
        }
    }
}

/// The names of `known` most like `wanted` (compared as the reporter writes names, case
/// aside), best first, at most `max`.
pub fn closest<'a>(wanted: &str, known: &'a [String], max: usize) -> Vec<&'a str> {
    let norm = |s: &str| sanitize_label_value(s).to_lowercase();
    let w = norm(wanted);
    let mut scored: Vec<(f64, &str)> = known
        .iter()
        // A job without a name (series without `job_name`) is nothing to suggest, and the
        // empty string is inside every name.
        .filter(|k| !k.trim().is_empty())
        .map(|k| {
            let n = norm(k);
            let mut score = strsim::normalized_damerau_levenshtein(&w, &n);
            if !w.is_empty() && (n.contains(&w) || w.contains(&n)) {
                score = score.max(0.7);
            }
            (score, k.as_str())
        })
        .filter(|(score, _)| *score >= 0.6)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    scored.into_iter().take(max).map(|(_, k)| k).collect()
}

/// Up to ten names, then how many more.
fn list_some(v: &[String]) -> String {
    const MAX: usize = 10;
    match v.len() {
        n if n > MAX => format!("{}, and {} more", v[..MAX].join(", "), n - MAX),
        _ => v.join(", "),
    }
}

fn ambiguous_deployment(job_id: &str, deployments: &[String], labels: &[String], asked: &[String]) -> String {
    let example = labels.first().map(String::as_str).unwrap_or("namespace");
    let which = if asked.is_empty() {
        String::from("the request does not say which")
    } else {
        format!("the request's {} names no single one of them", asked.join(", "))
    };
    format!(
        "job_id {job_id} is reported by {} deployments at once ({}) and {which}; their metrics are not blended into one verdict. Name one by {} (an alert label, `--label {example}=…`, or the API's `label={example}=…`)",
        deployments.len(),
        deployments.join("; "),
        labels.join(", ")
    )
}

/// Everything the collector needs besides the metric source.
pub struct CollectInput<'a> {
    pub request: &'a DiagnosisRequest,
    /// The job graph, from Flink REST or a plan file; `None` for graph-free mode.
    pub graph: Option<JobGraph>,
    /// Checkpoint configuration from Flink REST, when known.
    pub checkpoint_config: Option<CheckpointConfig>,
    pub config: &'a Config,
    pub catalog: &'a MetricCatalog,
}

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
            let &(t, u) = finite.last()?;
            // A step evaluation repeats the newest sample until the next one: the step where
            // the value last changed is within one step of that sample's own time, however
            // stale the data is (a job that stopped reporting).
            let sampled_at = finite.windows(2).rev().find(|w| w[1].1 != w[0].1).map(|w| w[1].0).unwrap_or(finite[0].0);
            // The scrape interval: the median spacing of the steps where the value changed.
            let changes: Vec<i64> = finite.windows(2).filter(|w| w[1].1 != w[0].1).map(|w| w[1].0).collect();
            let mut spacings: Vec<i64> = changes.windows(2).map(|c| c[1] - c[0]).collect();
            spacings.sort_unstable();
            let scrape_interval_ms = spacings.get(spacings.len() / 2).copied();
            Some(JobRun {
                id: s.label(l::JOB_ID).to_string(),
                name_label: s.label(l::JOB_NAME).to_string(),
                last_seen_ms: t,
                sampled_at_ms: sampled_at,
                scrape_interval_ms,
                start_ms: Some(sampled_at - u as i64),
                first_seen_ms: finite[0].0,
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
            let sanitized = sanitize_label_value(w);
            runs.iter().filter(|r| r.id == w || r.name_label == w || r.name_label == sanitized).collect()
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

/// The start of the current episode: the time of the latest evaluation whose state
/// (backpressured or not) differs from the state at the end. `points` are
/// `(t_ms, max backpressured ms/s over the job's subtasks)`, oldest first; `threshold` in
/// the same unit. `None` when the state never changes.
pub fn episode_start(points: &[(i64, f64)], threshold: f64) -> Option<i64> {
    let state = |v: f64| v > threshold;
    let last = state(points.last()?.1);
    points.iter().rev().find(|p| state(p.1) != last).map(|p| p.0)
}

fn over_time(selector: Selector, func: OverTime, window: &Window, aggregation: Option<Aggregation>) -> Query {
    Query::OverTime { selector, func, range_ms: window.len_ms(), at_ms: window.end_ms, aggregation }
}

fn by_subtask(agg: Agg) -> Option<Aggregation> {
    Some(Aggregation::new(agg, &[l::TASK_ID, l::SUBTASK_INDEX]))
}

/// When the scrape interval is unknown: a job whose newest sample is older than this (ms)
/// before the diagnosis time is judged as of that sample (a 60 s scrape interval, its
/// jitter and an evaluation step fit within it).
pub const STALE_AFTER_MS: i64 = 90_000;

/// Takes a snapshot of one job, in four rounds of queries: which job (`which_job`), which
/// window (`which_window`), every vertex aggregated over its subtasks together with the
/// job-level signals (`job_wide_queries`, `job_signal_queries`: checkpoints, RocksDB,
/// sources, TaskManagers, Kafka lag), and the per-subtask detail of the vertices the
/// runbook looks into (`detail_queries`).
///
/// A query the backend refuses as too large is asked again in smaller pieces that add up
/// to the same answer (per vertex, shorter ranges; [`crate::collect::degrade`]) before the
/// signal is given up; a note says so.
pub async fn collect<S: MetricSource>(source: &S, input: CollectInput<'_>) -> Result<Snapshot, CollectError> {
    let vertex_ids: Vec<String> =
        input.graph.as_ref().map(|g| g.vertices.iter().map(|v| v.id.clone()).collect()).unwrap_or_default();
    let catalog = input.catalog;
    let degrading = crate::collect::degrade::Degrading::new(source, vertex_ids);
    // Every answer of every round is held to its metric's domain before anything reads it.
    let source = crate::collect::domain::Screening::new(&degrading, catalog);
    let mut snapshot = collect_from(&source, input).await?;
    snapshot.notes.extend(degrading.note());
    let graph = snapshot.graph.clone();
    let vertex_name = |id: &str, label: &str| {
        graph.as_ref().and_then(|g| g.vertex(id)).map(|v| v.name.clone()).unwrap_or_else(|| label.to_string())
    };
    snapshot.notes.extend(source.note(&vertex_name));
    snapshot.left_out = source.left_out();
    Ok(snapshot)
}

async fn collect_from<S: MetricSource>(source: &S, input: CollectInput<'_>) -> Result<Snapshot, CollectError> {
    let cfg = &input.config.diagnosis;
    let at = input.request.at_ms.or_else(|| source.latest_ms()).ok_or(CollectError::NoData)?;

    // Round 1: which job.
    let Which { run, mut notes, at, distinguishing } = which_job(source, &input, at).await?;

    // Round 2: which series (the run's deployment, the hygiene its task series need), then
    // which window.
    let mut answers = Answers::default();
    let series = which_series(source, &input, &run, &distinguishing, at, &mut notes, &mut answers.missing).await?;
    let (window, measure) = which_window(source, &input, &run, &series, at, &mut answers.missing, &mut notes).await;

    // The name as Flink shows it when the plan belongs to this job, else the reporter's.
    let name = input
        .graph
        .as_ref()
        .and_then(|g| g.job_name.clone())
        .filter(|n| sanitize_label_value(n) == run.name_label || run.name_label.is_empty())
        .unwrap_or_else(|| run.name_label.clone());
    let kafka_inputs = kafka::job_inputs(&input.config.kafka, &name, &run.id);
    let scope = Scope {
        cat: input.catalog,
        job_id: &run.id,
        series: &series,
        window,
        at,
        step: cfg.step.as_ms(),
        trend_start: at - cfg.trend_lookback.as_ms(),
        measure,
    };

    // Round 3: every vertex aggregated over its subtasks, the job-level signals, and the
    // lag of the job's consumer group, in one batch.
    let mut round3 = job_wide_queries(&scope);
    round3.extend(job_signal_queries(&scope));
    let mut round3: Vec<(String, Query)> = round3.into_iter().map(|(n, q)| (n.to_string(), q)).collect();
    round3.extend(kafka::lag_queries(&kafka_inputs, scope.trend_start, at, scope.step));
    let task = |selector: Selector| scope.series.task(selector.with(l::JOB_ID, scope.job_id));
    round3.extend(kafka::flink_offset_queries(&kafka_inputs, task, scope.trend_start, at, scope.step));
    round3.extend(identity::superseded_queries(&scope.job(&scope.cat.records_in), window.len_ms(), at));
    answers.ask(source, round3).await;
    answers.note_missing_task_metrics(scope.cat, measure);
    let vertex_aggregates = assemble_aggregates(&|name| answers.get(name), scope.backpressure_scale());
    let (graph, plan_mismatch) = check_plan(input.graph, &run, &vertex_aggregates, &mut notes);
    let vertex_name = |id: &str, label: &str| {
        graph.as_ref().and_then(|g| g.vertex(id)).map(|v| v.name.clone()).unwrap_or_else(|| label.to_string())
    };
    notes.extend(identity::superseded_note(
        answers.get(identity::SUPERSEDED_ALL),
        answers.get(identity::SUPERSEDED_NEWEST),
        &series.hygiene.attempts,
        vertex_name,
    ));

    // Round 4: per-subtask detail for the vertices the diagnosis looks into, and the
    // offsets of the topics round 3 found.
    let detail_ids =
        crate::diagnose::signals::detail_vertices(graph.as_ref(), &vertex_aggregates, &cfg.thresholds, measure);
    let mut round4 = detail_queries(&scope, &detail_ids);
    let topics = kafka::topics_seen(&kafka_inputs, &answers.results);
    round4.extend(kafka::offset_queries(&topics, scope.trend_start, at, scope.step));
    if !round4.is_empty() {
        answers.ask(source, round4).await;
    }

    let subtasks = assemble_subtasks(DETAIL.map(|name| answers.get(name)), scope.backpressure_scale());
    let operators = assemble_operators(
        answers.get("operator_records_in"),
        answers.get("operator_records_in_meter"),
        answers.get("operator_records_out_meter"),
    );
    let timeline = assemble_timeline(
        answers.get("timeline_busy"),
        answers.get("timeline_backpressured"),
        scope.backpressure_scale(),
    );
    let (partitions, retention) = kafka::assemble(&kafka_inputs, &answers.results, &input.config.kafka.retention);
    let signals = assemble_job_signals(&mut answers, scope.cat, &subtasks, input.checkpoint_config);
    notes.extend(signals.lag_note.clone());
    let Answers { promql, mut missing, .. } = answers;
    missing.sort();
    missing.dedup();
    Ok(Snapshot {
        job: JobIdentity {
            name: name.clone(),
            id: run.id.clone(),
            deployment: series.matchers.iter().cloned().collect(),
        },
        at_ms: at,
        window,
        job_start_ms: run.start_ms,
        graph,
        plan_mismatch,
        vertex_aggregates,
        subtasks,
        checkpoints: signals.checkpoints,
        rocksdb: signals.rocksdb,
        source_lag: signals.source_lag,
        partitions,
        retention,
        job_topics: kafka_inputs.topics.clone(),
        taskmanagers: signals.taskmanagers,
        watermarks: signals.watermarks,
        timeline,
        operators,
        step_ms: scope.step,
        samples_in_window: signals.samples_in_window,
        backpressure_measure: measure,
        queries: promql,
        missing,
        left_out: Vec::new(),
        notes,
    })
}

/// What every query of one collection shares: the job, the window, the evaluation step.
struct Scope<'a> {
    cat: &'a MetricCatalog,
    job_id: &'a str,
    /// The run's deployment and the hygiene of its series.
    series: &'a SeriesScope,
    window: Window,
    /// The time the diagnosis is about (the window's end), Unix ms.
    at: i64,
    step: i64,
    /// Start of the longer look back that trends (checkpoints, lag) need, Unix ms.
    trend_start: i64,
    /// What the job's reporter measures backpressure with.
    measure: BackpressureMeasure,
}

impl Scope<'_> {
    /// The task metric backpressured ratios come from: time backpressured, or (a reporter
    /// older than Flink 1.13) `isBackPressured`.
    fn backpressure_metric(&self) -> &str {
        match self.measure {
            BackpressureMeasure::TimeMsPerSecond => &self.cat.backpressured,
            BackpressureMeasure::IsBackPressuredShare => &self.cat.is_backpressured,
        }
    }

    /// What a value of [`Scope::backpressure_metric`] is divided by to give a ratio: ms/s
    /// over 1000; the mean of a 0/1 gauge is already the share of samples.
    fn backpressure_scale(&self) -> f64 {
        match self.measure {
            BackpressureMeasure::TimeMsPerSecond => 1000.0,
            BackpressureMeasure::IsBackPressuredShare => 1.0,
        }
    }

    /// A task metric every subtask reports, to count subtasks and samples by: busy time,
    /// or `isBackPressured` when the reporter has no busy time.
    fn presence_metric(&self) -> &str {
        match self.measure {
            BackpressureMeasure::TimeMsPerSecond => &self.cat.busy,
            BackpressureMeasure::IsBackPressuredShare => &self.cat.is_backpressured,
        }
    }

    /// The job's task series of metric `m` (newest attempts, each target once).
    fn job(&self, m: &str) -> Selector {
        self.series.task(Selector::metric(m).with(l::JOB_ID, self.job_id))
    }

    /// The job's task series whose name ends with `m` (RocksDB metrics carry the state's
    /// name).
    fn job_suffix(&self, m: &str) -> Selector {
        self.series.task(Selector::metric_suffix(m).with(l::JOB_ID, self.job_id))
    }

    /// TaskManager series of metric `m` (of the run's deployment, each target once).
    fn taskmanager(&self, m: &str) -> Selector {
        self.series.taskmanager(Selector::metric(m))
    }

    fn over_window(&self, selector: Selector, func: OverTime, aggregation: Option<Aggregation>) -> Query {
        over_time(selector, func, &self.window, aggregation)
    }

    fn range(&self, selector: Selector, aggregation: Option<Aggregation>, start_ms: i64) -> Query {
        Query::Range { selector, aggregation, start_ms, end_ms: self.at, step_ms: self.step }
    }
}

/// The answers gathered so far, by name; the PromQL behind each; what could not be had.
#[derive(Default)]
struct Answers {
    results: BTreeMap<String, QueryResult>,
    promql: BTreeMap<String, String>,
    missing: Vec<Missing>,
}

impl Answers {
    /// Asks `named` queries in one batch; a failed query becomes a [`Missing`] entry.
    async fn ask<S: MetricSource>(&mut self, source: &S, named: Vec<(String, Query)>) {
        let queries: Vec<Query> = named.iter().map(|(_, q)| q.clone()).collect();
        for ((name, q), answer) in named.into_iter().zip(source.run(&queries).await) {
            self.promql.insert(name.clone(), q.to_promql());
            match answer {
                Ok(r) => {
                    self.results.insert(name, r);
                }
                Err(e) => self.missing.push(Missing { metric: q.to_promql(), detail: format!("query failed: {e}") }),
            }
        }
    }

    /// The answer to the query `name`; empty when it failed or was not asked.
    fn get(&self, name: &str) -> &QueryResult {
        static EMPTY: QueryResult = Vec::new();
        self.results.get(name).unwrap_or(&EMPTY)
    }

    /// After round 3: the task metrics every step needs, when absent.
    fn note_missing_task_metrics(&mut self, cat: &MetricCatalog, measure: BackpressureMeasure) {
        let classic = measure == BackpressureMeasure::IsBackPressuredShare;
        for (name, key) in [(&cat.busy, "busy"), (&cat.backpressured, "backpressured"), (&cat.idle, "idle")] {
            let detail = if classic && key != "idle" {
                "the reporter predates Flink 1.13, which added busy and backpressured time; backpressure is read from isBackPressured, busy time is unknown"
            } else {
                "no samples for this job in the window"
            };
            // In the classic case the `backpressured` answer is isBackPressured's.
            if (classic && key == "backpressured") || self.get(key).is_empty() {
                self.missing.push(Missing { metric: name.clone(), detail: detail.into() });
            }
        }
        if self.get("records_in").is_empty() && self.get("records_in_meter").is_empty() {
            self.missing.push(Missing {
                metric: cat.records_in.clone(),
                detail: "no records-in counter or meter: records shares and capacities are unknown".into(),
            });
        }
    }
}

/// Round 1: the run to diagnose, notes about the choice, and the time the diagnosis is
/// about (`at`, or earlier when the data ends earlier: see [`data_end`]).
async fn which_job<S: MetricSource>(source: &S, input: &CollectInput<'_>, at: i64) -> Result<Which, CollectError> {
    let cfg = &input.config.diagnosis;
    let (runs, newest) = find_runs(source, input.catalog, at, cfg.trend_lookback.as_ms(), cfg.step.as_ms()).await?;
    let plan_job_id = input.graph.as_ref().and_then(|g| g.job_id.clone());
    let (picked, mut notes) = resolve_job(&newest_per_id(&runs), input.request.job.as_deref(), plan_job_id.as_deref())?;
    let (run, distinguishing) =
        choose_deployment(&runs, &picked.id, &input.request.labels, cfg.step.as_ms(), &mut notes)?;
    let stale_after = run.scrape_interval_ms.map_or(STALE_AFTER_MS, |i| 2 * i + cfg.step.as_ms());
    let at = data_end(&run, at, newest, stale_after, input.request.at_ms.is_some(), &mut notes);
    Ok(Which { run, notes, at, distinguishing })
}

/// Round 1's answer.
struct Which {
    run: JobRun,
    notes: Vec<String>,
    /// The time the diagnosis is about.
    at: i64,
    /// The labels that tell the run's deployment from others under its job id, with its
    /// values (empty: the job id is one deployment's).
    distinguishing: Vec<(String, String)>,
}

/// One run per job id (its newest series) for choosing the job; the deployments of the
/// chosen id are told apart afterwards.
fn newest_per_id(runs: &[JobRun]) -> Vec<JobRun> {
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
fn choose_deployment(
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
fn data_end(run: &JobRun, at: i64, newest: Option<i64>, stale_after: i64, asked: bool, notes: &mut Vec<String>) -> i64 {
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
        notes.push(format!(
            "job_id {} has no newer samples than {} ({} s before {before}): it stopped reporting or running (finished, failed, restarting), so the diagnosis is as of its last sample",
            run.id,
            crate::model::verdict::rfc3339(run.sampled_at_ms),
            gap / 1000,
        ));
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
fn newest_ms(answer: &QueryResult) -> Option<i64> {
    answer.first().and_then(|s| s.last_value()).filter(|v| v.is_finite()).map(|s| (s * 1000.0).round() as i64)
}

/// The runs of every job with metrics in the `lookback` before `at`: from the JobManager's
/// uptime gauge, else (only TaskManagers scraped) from task metrics; and the time of the
/// store's newest data ([`newest_query`]; None when unknown).
pub async fn find_runs<S: MetricSource>(
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

/// Round 2, first half: which series of the run count: its deployment (of
/// `distinguishing`, the labels its task series carry), and the hygiene its task series
/// need (only the newest of several task attempts, each of several scrape targets once); a
/// note when series were scraped more than once. A failed query is noted in `missing` and
/// leaves the series as they are.
async fn which_series<S: MetricSource>(
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
        (Some(Err(e)), _) | (_, Some(Err(e))) => missing.push(Missing {
            metric: cat.records_in.clone(),
            detail: format!("query failed: {e}; task attempts and duplicate scrapes are not told apart"),
        }),
        _ => {}
    }
    Ok(series)
}

/// Round 2, second half: the window averages are taken over, ending at `at`: the requested length,
/// after the job's start-up and its last restart or rescale (plus the span Flink averages
/// over), not before the data, and from the start of the current backpressure episode when
/// configured — never narrower than `min_window`, nor than two periods of a backpressure
/// that recurs. Notes say when and why the window was narrowed; a failed query is noted in
/// `missing`.
async fn which_window<S: MetricSource>(
    source: &S,
    input: &CollectInput<'_>,
    run: &JobRun,
    series: &SeriesScope,
    at: i64,
    missing: &mut Vec<Missing>,
    notes: &mut Vec<String>,
) -> (Window, BackpressureMeasure) {
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
            missing.push(Missing { metric: name.to_string(), detail: format!("query failed: {e}") });
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
    let restarted = [&restarts, &rescales].iter().filter_map(|s| last_increase(s)).max();
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
        let period = crate::diagnose::timeline::period_of_series(&backpressure, threshold);
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
    (window, measure)
}

/// Starts the window after the warm-up of the job's latest start, restart or rescale
/// (`restarted`), never later than `latest_start` (the minimum window) nor before the
/// (re)start itself, and records when the warm-up ends.
fn exclude_warm_up(
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
fn last_increase(points: &[(i64, f64)]) -> Option<i64> {
    points.windows(2).rev().find(|w| w[1].1.is_finite() && w[0].1.is_finite() && w[1].1 > w[0].1).map(|w| w[1].0)
}

/// Round 3, first half: every vertex aggregated over its subtasks (max, min, mean and
/// median busy time, backpressure, idle time, records rates, checkpoint start delay).
fn job_wide_queries(s: &Scope<'_>) -> Vec<(&'static str, Query)> {
    let cat = s.cat;
    let by_vertex = |agg: Agg| Some(Aggregation::new(agg, &[l::TASK_ID, l::TASK_NAME]));
    let avg = |m: &str, agg: Agg| s.over_window(s.job(m), OverTime::Avg, by_vertex(agg));
    let rate = |m: &str, agg: Agg| s.over_window(s.job(m), OverTime::Rate, by_vertex(agg));
    let mut queries = vec![
        ("backpressured", avg(s.backpressure_metric(), Agg::Max)),
        ("busy", avg(&cat.busy, Agg::Max)),
        ("busy_min", avg(&cat.busy, Agg::Min)),
        ("busy_mean", avg(&cat.busy, Agg::Avg)),
        ("busy_median", avg(&cat.busy, Agg::Median)),
        ("subtask_count", avg(s.presence_metric(), Agg::Count)),
        ("idle", avg(&cat.idle, Agg::Avg)),
        ("records_in", rate(&cat.records_in, Agg::Sum)),
        ("records_in_meter", avg(&cat.records_in_per_second, Agg::Sum)),
        ("records_out", rate(&cat.records_out, Agg::Sum)),
        ("records_out_meter", avg(&cat.records_out_per_second, Agg::Sum)),
        ("checkpoint_start_delay", avg(&cat.checkpoint_start_delay, Agg::Max)),
    ];
    // Without busy time, the classic method tells the culprit by its buffer pools: a full
    // input pool and an empty output pool.
    if s.measure == BackpressureMeasure::IsBackPressuredShare {
        queries.push(("in_pool_usage", avg(&cat.in_pool_usage, Agg::Max)));
        queries.push(("out_pool_usage", avg(&cat.out_pool_usage, Agg::Max)));
    }
    queries
}

/// Round 3, second half: the job-level signals: checkpoint history, RocksDB per subtask,
/// source lag, TaskManager GC and CPU, input watermarks, and how many samples the window
/// holds.
fn job_signal_queries(s: &Scope<'_>) -> Vec<(&'static str, Query)> {
    let cat = s.cat;
    let rocksdb = |suffix: &str, func: OverTime, agg: Agg| s.over_window(s.job_suffix(suffix), func, by_subtask(agg));
    let by_tm = |agg: Agg| Some(Aggregation::new(agg, &[l::TM_ID, l::HOST]));
    let checkpoint_metrics = [
        &cat.uptime,
        &cat.last_checkpoint_duration,
        &cat.completed_checkpoints,
        &cat.failed_checkpoints,
        &cat.in_progress_checkpoints,
        &cat.last_checkpoint_completed_timestamp,
    ];
    vec![
        (
            "checkpoints",
            s.range(
                s.series.deployment(Selector::metrics(&checkpoint_metrics).with(l::JOB_ID, s.job_id)),
                None,
                s.trend_start,
            ),
        ),
        ("rocksdb_is_write_stopped", rocksdb(&cat.rocksdb_is_write_stopped_suffix, OverTime::Max, Agg::Max)),
        (
            "rocksdb_actual_delayed_write_rate",
            rocksdb(&cat.rocksdb_actual_delayed_write_rate_suffix, OverTime::Max, Agg::Max),
        ),
        ("rocksdb_compaction_pending", rocksdb(&cat.rocksdb_compaction_pending_suffix, OverTime::Avg, Agg::Max)),
        (
            "rocksdb_mem_table_flush_pending",
            rocksdb(&cat.rocksdb_mem_table_flush_pending_suffix, OverTime::Avg, Agg::Max),
        ),
        (
            "rocksdb_estimate_pending_compaction_bytes",
            s.range(
                s.job_suffix(&cat.rocksdb_estimate_pending_compaction_bytes_suffix),
                by_subtask(Agg::Sum),
                s.window.start_ms,
            ),
        ),
        ("rocksdb_stall_micros", rocksdb(&cat.rocksdb_stall_micros_suffix, OverTime::Rate, Agg::Sum)),
        ("pending_records", s.range(s.job(&cat.pending_records), by_subtask(Agg::Sum), s.trend_start)),
        (
            "records_lag_max",
            s.range(
                s.series.task(
                    Selector::metrics(&[&cat.records_lag_max, &cat.legacy_records_lag_max]).with(l::JOB_ID, s.job_id),
                ),
                by_subtask(Agg::Max),
                s.trend_start,
            ),
        ),
        ("emit_event_time_lag", s.over_window(s.job(&cat.emit_event_time_lag), OverTime::Avg, by_subtask(Agg::Max))),
        ("gc_time", s.over_window(s.taskmanager(&cat.gc_time), OverTime::Rate, by_tm(Agg::Sum))),
        // Raw counters, names kept: a rate over several names would give series equal but
        // for the dropped name, which Prometheus 2 refuses; the rate is taken here instead.
        (
            GC_PER_COLLECTOR,
            s.range(
                s.series.taskmanager(Selector::metrics(if cat.gc_collector_times.is_empty() {
                    std::slice::from_ref(&cat.gc_time)
                } else {
                    &cat.gc_collector_times
                })),
                None,
                s.window.start_ms,
            ),
        ),
        ("cpu_load", s.over_window(s.taskmanager(&cat.cpu_load), OverTime::Avg, by_tm(Agg::Max))),
        (
            "input_watermark",
            s.range(s.job(&cat.input_watermark), Some(Aggregation::new(Agg::Min, &[l::TASK_ID])), s.window.start_ms),
        ),
        (
            "samples_in_window",
            s.over_window(s.job(s.presence_metric()), OverTime::Count, Some(Aggregation::new(Agg::Max, &[]))),
        ),
        // Every vertex per step of the window, for the time-resolved reading.
        (
            "timeline_busy",
            s.range(s.job(&cat.busy), Some(Aggregation::new(Agg::Max, &[l::TASK_ID])), s.window.start_ms),
        ),
        (
            "timeline_backpressured",
            s.range(s.job(s.backpressure_metric()), Some(Aggregation::new(Agg::Max, &[l::TASK_ID])), s.window.start_ms),
        ),
    ]
}

/// A plan of another job (its vertex ids are hashes of the topology) shares no vertex
/// with the metrics: diagnosing with it would name vertices the job does not have. Returns
/// the graph to diagnose with (none when the plan is not this job's) and why it was
/// refused; notes say what was noticed.
fn check_plan(
    graph: Option<JobGraph>,
    run: &JobRun,
    vertex_aggregates: &[VertexAggregate],
    notes: &mut Vec<String>,
) -> (Option<JobGraph>, Option<String>) {
    let Some(g) = graph else { return (None, None) };
    let known = vertex_aggregates.iter().filter(|a| g.vertex(&a.vertex_id).is_some()).count();
    let plan_label = g.job_name.clone().or_else(|| g.job_id.clone()).unwrap_or_else(|| "unnamed".into());
    // Jobs built from one topology share vertex ids, so a matching id alone does not
    // prove the plan is this job's. A plan of another job id is used only when it is
    // another run of the same job (same name) with exactly the vertices the metrics
    // show; a redeploy with a changed topology would mislabel or drop vertices.
    let other_id = g.job_id.as_deref().is_some_and(|id| id != run.id);
    let other_name =
        g.job_name.as_deref().is_some_and(|n| !run.name_label.is_empty() && sanitize_label_value(n) != run.name_label);
    let plan_ids: BTreeSet<&str> = g.vertices.iter().map(|v| v.id.as_str()).collect();
    let metric_ids: BTreeSet<&str> = vertex_aggregates.iter().map(|a| a.vertex_id.as_str()).collect();
    let plan_id = g.job_id.as_deref().unwrap_or_default();
    let why = if !vertex_aggregates.is_empty() && known == 0 {
        Some(format!("the job plan ({plan_label}) shares no vertex with the metrics of job_id {}", run.id))
    } else if other_id && other_name {
        Some(format!(
            "the job plan is of job {plan_label} ({plan_id}), not of the diagnosed job {} ({})",
            run.name_label, run.id
        ))
    } else if other_id && !metric_ids.is_empty() && plan_ids != metric_ids {
        Some(format!(
            "the job plan is of another run of {plan_label} (job_id {plan_id}) whose vertices differ from those of job_id {} ({} in the plan, {} with metrics): the topology changed",
            run.id,
            plan_ids.len(),
            metric_ids.len()
        ))
    } else {
        None
    };
    if let Some(why) = why {
        notes.push(format!("{why}; diagnosing without the job graph"));
        return (None, Some(why));
    }
    if other_id {
        notes.push(format!(
            "the job plan is of job_id {plan_id}, another run of {plan_label} with the same vertices; the metrics are of job_id {}",
            run.id
        ));
    }
    for a in vertex_aggregates {
        if let Some(v) = g.vertex(&a.vertex_id)
            && a.subtask_count > v.parallelism
        {
            notes.push(format!(
                "{} reports {} subtasks but the job plan says parallelism {}: the plan is not of this run",
                v.name, a.subtask_count, v.parallelism
            ));
        }
    }
    notes.extend(incomplete_note(&g, vertex_aggregates));
    (Some(g), None)
}

/// Vertices the plan names that the metrics show in part or not at all: fewer subtasks
/// than its parallelism, or none while other vertices have metrics. Every running subtask
/// reports its task metrics, so this is data that did not arrive (a partial answer from
/// Thanos or Mimir, a store that timed out, TaskManagers not scraped), said as such.
fn incomplete_note(g: &JobGraph, vertex_aggregates: &[VertexAggregate]) -> Option<String> {
    if vertex_aggregates.is_empty() {
        return None;
    }
    let items: Vec<String> = g
        .vertices
        .iter()
        .filter_map(|v| match vertex_aggregates.iter().find(|a| a.vertex_id == v.id) {
            None => Some(format!("{} has no task metrics", v.name)),
            Some(a) if a.subtask_count < v.parallelism => {
                Some(format!("{} reports {} of its {} subtasks", v.name, a.subtask_count, v.parallelism))
            }
            Some(_) => None,
        })
        .collect();
    (!items.is_empty()).then(|| {
        format!(
            "The data may be incomplete: {} (the job plan's parallelism). The metric store's answer may have been partial (a Thanos or Mimir partial response, a store or querier that timed out) or some TaskManagers are not scraped; the verdict rests on what arrived",
            crate::diagnose::limited_list(&items, 5)
        )
    })
}

/// Names of round 4's per-subtask answers, in the order [`assemble_subtasks`] reads them.
const DETAIL: [&str; 9] = [
    "busy_per_subtask",
    "backpressured_per_subtask",
    "idle_per_subtask",
    "records_in_per_subtask",
    "records_in_meter_per_subtask",
    "records_out_per_subtask",
    "records_out_meter_per_subtask",
    "checkpoint_start_delay_per_subtask",
    "checkpoint_alignment_per_subtask",
];

/// Round 4: the task metrics of every subtask of the vertices `detail_ids`, with the
/// subtask's identity (TaskManager, host, attempt); none without such vertices.
fn detail_queries(s: &Scope<'_>, detail_ids: &[String]) -> Vec<(String, Query)> {
    if detail_ids.is_empty() {
        return Vec::new();
    }
    let cat = s.cat;
    let detail = |m: &str| s.job(m).with_one_of(l::TASK_ID, detail_ids);
    let identity = || {
        Some(Aggregation::new(
            Agg::Max,
            &[l::TASK_ID, l::SUBTASK_INDEX, l::TASK_NAME, l::TM_ID, l::HOST, "task_attempt_num"],
        ))
    };
    let metrics: [(&str, OverTime); 9] = [
        (&cat.busy, OverTime::Avg),
        (s.backpressure_metric(), OverTime::Avg),
        (&cat.idle, OverTime::Avg),
        (&cat.records_in, OverTime::Rate),
        (&cat.records_in_per_second, OverTime::Avg),
        (&cat.records_out, OverTime::Rate),
        (&cat.records_out_per_second, OverTime::Avg),
        (&cat.checkpoint_start_delay, OverTime::Avg),
        (&cat.checkpoint_alignment, OverTime::Avg),
    ];
    let by_operator = || Some(Aggregation::new(Agg::Sum, &[l::TASK_ID, OPERATOR_NAME]));
    DETAIL
        .iter()
        .zip(metrics)
        .map(|(name, (metric, func))| (name.to_string(), s.over_window(detail(metric), func, identity())))
        .chain([
            (
                "operator_records_in".to_string(),
                s.over_window(detail(&cat.operator_records_in), OverTime::Rate, by_operator()),
            ),
            (
                "operator_records_in_meter".to_string(),
                s.over_window(detail(&cat.operator_records_in_per_second), OverTime::Avg, by_operator()),
            ),
            (
                "operator_records_out_meter".to_string(),
                s.over_window(detail(&cat.operator_records_out_per_second), OverTime::Avg, by_operator()),
            ),
        ])
        .collect()
}

/// The operator label of operator-scope metrics.
const OPERATOR_NAME: &str = "operator_name";

/// Operator-level records rates from round 4's answers, per (vertex, operator).
fn assemble_operators(counter_in: &QueryResult, meter_in: &QueryResult, meter_out: &QueryResult) -> Vec<OperatorRates> {
    let key = |s: &ResultSeries| (s.label(l::TASK_ID).to_string(), s.label(OPERATOR_NAME).to_string());
    let mut out: BTreeMap<(String, String), OperatorRates> = BTreeMap::new();
    for (i, result) in [counter_in, meter_in, meter_out].into_iter().enumerate() {
        for series in result {
            let (vertex_id, operator_name) = key(series);
            if vertex_id.is_empty() || operator_name.is_empty() {
                continue;
            }
            let value = series.last_value().and_then(finite);
            let e = out.entry((vertex_id.clone(), operator_name.clone())).or_insert(OperatorRates {
                vertex_id,
                operator_name,
                records_in_per_s: None,
                records_out_per_s: None,
            });
            match i {
                0 => e.records_in_per_s = value,
                1 => e.records_in_per_s = e.records_in_per_s.or(value),
                _ => e.records_out_per_s = value,
            }
        }
    }
    out.into_values().collect()
}

/// Per-vertex values per step of the window, as ratios.
fn assemble_timeline(busy: &QueryResult, backpressured: &QueryResult, backpressure_scale: f64) -> Vec<VertexTimeline> {
    let mut out: BTreeMap<String, VertexTimeline> = BTreeMap::new();
    for (is_busy, result) in [(true, busy), (false, backpressured)] {
        for series in result {
            let id = series.label(l::TASK_ID);
            if id.is_empty() {
                continue;
            }
            let e = out.entry(id.to_string()).or_insert_with(|| VertexTimeline {
                vertex_id: id.to_string(),
                busy_max: Vec::new(),
                backpressured_max: Vec::new(),
            });
            let scale = if is_busy { 1000.0 } else { backpressure_scale };
            // An implausible value is unknown (NaN), as a legacy source's busy time is.
            let points =
                series.points.iter().map(|&(t, v)| (t, plausible_ratio(v, scale).unwrap_or(f64::NAN))).collect();
            if is_busy {
                e.busy_max = points;
            } else {
                e.backpressured_max = points;
            }
        }
    }
    out.into_values().collect()
}

/// The job-level parts of a snapshot, from round 3's answers.
struct JobSignals {
    checkpoints: Checkpoints,
    rocksdb: Vec<RocksDbSubtask>,
    source_lag: Vec<SourceSubtaskLag>,
    taskmanagers: Vec<TaskManagerMetrics>,
    watermarks: Vec<VertexWatermark>,
    samples_in_window: Option<u32>,
    /// How the source lag was read, when not from `pendingRecords`.
    lag_note: Option<String>,
}

/// Checkpoints, RocksDB, source lag, TaskManagers (those running `subtasks`), watermarks
/// and the sample count, from round 3's answers; absent checkpoint metrics are noted.
fn assemble_job_signals(
    answers: &mut Answers,
    cat: &MetricCatalog,
    subtasks: &[SubtaskMetrics],
    checkpoint_config: Option<CheckpointConfig>,
) -> JobSignals {
    let r = |name: &str| answers.get(name);
    let checkpoints = Checkpoints { series: assemble_checkpoints(r("checkpoints"), cat), config: checkpoint_config };
    let rocksdb = assemble_rocksdb(
        r("rocksdb_is_write_stopped"),
        r("rocksdb_actual_delayed_write_rate"),
        r("rocksdb_compaction_pending"),
        r("rocksdb_mem_table_flush_pending"),
        r("rocksdb_estimate_pending_compaction_bytes"),
        r("rocksdb_stall_micros"),
    );
    let (source_lag, lag_note) =
        assemble_source_lag(r("pending_records"), r("records_lag_max"), r("emit_event_time_lag"), cat);
    let job_tms: BTreeSet<&str> = subtasks.iter().filter_map(|s| s.tm_id.as_deref()).collect();
    let (taskmanagers, gc_from_collectors) =
        assemble_taskmanagers(r("gc_time"), r(GC_PER_COLLECTOR), r("cpu_load"), &job_tms);
    let watermarks = r("input_watermark")
        .iter()
        .filter(|s| !s.label(l::TASK_ID).is_empty())
        .map(|s| VertexWatermark { vertex_id: s.label(l::TASK_ID).into(), input_watermark: s.points.clone() })
        .collect();
    let samples_in_window =
        r("samples_in_window").first().and_then(|s| s.last_value()).filter(|v| v.is_finite()).map(|v| v as u32);
    if gc_from_collectors {
        // The GC times came from each collector's counter: theirs is the PromQL shown.
        if let Some(q) = answers.promql.get(GC_PER_COLLECTOR).cloned() {
            answers.promql.insert("gc_time".into(), q);
        }
    }
    if checkpoints.series.iter().all(|p| p.last_duration_ms.is_none()) {
        answers.missing.push(Missing {
            metric: cat.last_checkpoint_duration.clone(),
            detail: "no checkpoint metrics for this job (checkpointing off, or JobManager not scraped)".into(),
        });
    }
    JobSignals { checkpoints, rocksdb, source_lag, taskmanagers, watermarks, samples_in_window, lag_note }
}

/// Per-vertex aggregates from round 3's answers.
fn assemble_aggregates<'a>(r: &impl Fn(&str) -> &'a QueryResult, backpressure_scale: f64) -> Vec<VertexAggregate> {
    let by_task = |name: &str| -> BTreeMap<String, &'a ResultSeries> {
        r(name)
            .iter()
            .filter(|s| !s.label(l::TASK_ID).is_empty())
            .map(|s| (s.label(l::TASK_ID).to_string(), s))
            .collect()
    };
    let keys = ["backpressured", "busy", "busy_min", "busy_mean", "busy_median", "subtask_count", "idle"];
    let maps: BTreeMap<&str, BTreeMap<String, &ResultSeries>> = keys
        .iter()
        .chain(
            [
                "records_in",
                "records_in_meter",
                "records_out",
                "records_out_meter",
                "checkpoint_start_delay",
                "in_pool_usage",
                "out_pool_usage",
            ]
            .iter(),
        )
        .map(|k| (*k, by_task(k)))
        .collect();
    let ids: BTreeSet<&String> = keys.iter().flat_map(|k| maps[k].keys()).collect();
    ids.into_iter()
        .map(|id| {
            let value = |k: &str| maps[k].get(id).and_then(|s| s.last_value()).and_then(finite);
            let ratio = |k: &str| value(k).and_then(|v| plausible_ratio(v, 1000.0));
            let name = keys
                .iter()
                .find_map(|k| maps[k].get(id))
                .map(|s| s.label(l::TASK_NAME).to_string())
                .unwrap_or_default();
            VertexAggregate {
                vertex_id: id.clone(),
                task_name: name,
                subtask_count: value("subtask_count").unwrap_or(0.0) as u32,
                busy_max: ratio("busy"),
                busy_min: ratio("busy_min"),
                busy_mean: ratio("busy_mean"),
                busy_median: ratio("busy_median"),
                backpressured_max: value("backpressured").and_then(|v| plausible_ratio(v, backpressure_scale)),
                idle_mean: ratio("idle"),
                records_in_per_s: value("records_in").or_else(|| value("records_in_meter")),
                records_out_per_s: value("records_out").or_else(|| value("records_out_meter")),
                checkpoint_start_delay_ms_max: value("checkpoint_start_delay").map(|ns| ns / 1e6),
                in_pool_usage_max: value("in_pool_usage"),
                out_pool_usage_max: value("out_pool_usage"),
            }
        })
        .collect()
}

fn subtask_key(s: &ResultSeries) -> Option<(String, u32)> {
    let task = s.label(l::TASK_ID);
    let index = s.label(l::SUBTASK_INDEX).parse().ok()?;
    (!task.is_empty()).then(|| (task.to_string(), index))
}

fn finite(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

/// A ratio from busy, idle or backpressured time per second (ms/s ÷ 1000; an
/// `isBackPressured` share ÷ 1), clamped to 0–1; unknown when not finite. Values outside
/// 0–1 by more than measuring noise never get here: [`crate::collect::domain`] left them
/// out as unknown where they entered (−5 or 10⁹ ms/s is a broken reporter or recording, and
/// reasoning with it would name a wrong culprit).
fn plausible_ratio(v: f64, scale: f64) -> Option<f64> {
    let r = v / scale;
    r.is_finite().then(|| r.clamp(0.0, 1.0) + 0.0)
}

/// Values per subtask; of several series for one subtask (task attempts), the highest
/// `task_attempt_num` wins.
fn per_subtask(result: &QueryResult) -> BTreeMap<(String, u32), &ResultSeries> {
    let mut out: BTreeMap<(String, u32), &ResultSeries> = BTreeMap::new();
    for s in result {
        let Some(key) = subtask_key(s) else { continue };
        let attempt = |s: &ResultSeries| s.label("task_attempt_num").parse::<u64>().unwrap_or(0);
        match out.get(&key) {
            Some(existing) if attempt(existing) >= attempt(s) => {}
            _ => {
                out.insert(key, s);
            }
        }
    }
    out
}

fn assemble_subtasks(results: [&QueryResult; 9], backpressure_scale: f64) -> Vec<SubtaskMetrics> {
    let maps: Vec<BTreeMap<(String, u32), &ResultSeries>> = results.iter().map(|r| per_subtask(r)).collect();
    let keys: BTreeSet<(String, u32)> = maps[..3].iter().flat_map(|m| m.keys().cloned()).collect();
    keys.into_iter()
        .map(|key| {
            let value = |i: usize| maps[i].get(&key).and_then(|s| s.last_value());
            let identity = maps[..3].iter().find_map(|m| m.get(&key)).expect("key from these maps");
            let label = |name: &str| Some(identity.label(name).to_string()).filter(|v| !v.is_empty());
            let ratio = |i: usize| value(i).and_then(|v| plausible_ratio(v, 1000.0));
            let rate = |counter: usize, meter: usize| {
                value(counter).and_then(finite).or_else(|| value(meter).and_then(finite))
            };
            SubtaskMetrics {
                vertex_id: key.0.clone(),
                subtask: key.1,
                task_name: identity.label(l::TASK_NAME).to_string(),
                tm_id: label(l::TM_ID).map(|id| flink_taskmanager_id(&id)),
                host: label(l::HOST),
                busy_ratio: ratio(0),
                backpressured_ratio: value(1).and_then(|v| plausible_ratio(v, backpressure_scale)),
                idle_ratio: ratio(2),
                records_in_per_s: rate(3, 4),
                records_out_per_s: rate(5, 6),
                checkpoint_start_delay_ms: value(7).and_then(finite).map(|ns| ns / 1e6),
                checkpoint_alignment_ms: value(8).and_then(finite).map(|ns| ns / 1e6),
            }
        })
        .collect()
}

fn assemble_checkpoints(result: &QueryResult, cat: &MetricCatalog) -> Vec<CheckpointPoint> {
    let mut points: BTreeMap<i64, CheckpointPoint> = BTreeMap::new();
    for series in result {
        let name = series.label("__name__");
        for &(t, v) in &series.points {
            let p = points.entry(t).or_insert_with(|| CheckpointPoint { t_ms: t, ..Default::default() });
            let v = finite(v);
            if name == cat.uptime {
                p.uptime_ms = v;
            } else if name == cat.last_checkpoint_duration {
                p.last_duration_ms = v;
            } else if name == cat.completed_checkpoints {
                p.completed = v;
            } else if name == cat.failed_checkpoints {
                p.failed = v;
            } else if name == cat.in_progress_checkpoints {
                p.in_progress = v;
            } else if name == cat.last_checkpoint_completed_timestamp {
                p.last_completed_at_ms = v;
            }
        }
    }
    points.into_values().collect()
}

fn assemble_rocksdb(
    stop: &QueryResult,
    delay: &QueryResult,
    cpend: &QueryResult,
    fpend: &QueryResult,
    bytes: &QueryResult,
    stall: &QueryResult,
) -> Vec<RocksDbSubtask> {
    let maps: Vec<BTreeMap<(String, u32), &ResultSeries>> =
        [stop, delay, cpend, fpend, bytes, stall].iter().map(|r| per_subtask(r)).collect();
    let keys: BTreeSet<(String, u32)> = maps.iter().flat_map(|m| m.keys().cloned()).collect();
    keys.into_iter()
        .map(|key| {
            let value = |i: usize| maps[i].get(&key).and_then(|s| s.last_value()).and_then(finite);
            RocksDbSubtask {
                vertex_id: key.0.clone(),
                subtask: key.1,
                write_stopped_max: value(0),
                delayed_write_rate_max: value(1),
                compaction_pending_ratio: value(2),
                flush_pending_ratio: value(3),
                pending_compaction_bytes: maps[4].get(&key).map(|s| s.points.clone()).unwrap_or_default(),
                stall_micros_per_s: value(5),
            }
        })
        .collect()
}

/// Source lag per subtask: `pendingRecords`, else the Kafka consumer's `records-lag-max`
/// (the subtask's worst partition: a lower bound of its lag), with a note saying so.
fn assemble_source_lag(
    pending: &QueryResult,
    lag_max: &QueryResult,
    emit_lag: &QueryResult,
    cat: &MetricCatalog,
) -> (Vec<SourceSubtaskLag>, Option<String>) {
    let pending = per_subtask(pending);
    let lag_max = per_subtask(lag_max);
    let emit = per_subtask(emit_lag);
    let keys: BTreeSet<(String, u32)> = pending.keys().chain(lag_max.keys()).chain(emit.keys()).cloned().collect();
    let mut from_lag_max = 0;
    let lags = keys
        .into_iter()
        .map(|key| {
            let pending_records = match (pending.get(&key), lag_max.get(&key)) {
                (Some(s), _) => s.points.clone(),
                (None, Some(s)) => {
                    from_lag_max += 1;
                    s.points.clone()
                }
                (None, None) => Vec::new(),
            };
            SourceSubtaskLag {
                vertex_id: key.0.clone(),
                subtask: key.1,
                pending_records,
                emit_event_time_lag_ms: emit.get(&key).and_then(|s| s.last_value()).and_then(finite),
            }
        })
        .collect();
    let note = (from_lag_max > 0).then(|| {
        format!(
            "{from_lag_max} source subtask(s) report no `{}`: their lag is the Kafka consumer's `records-lag-max`, the lag of each subtask's worst partition, a lower bound of the records behind",
            cat.pending_records
        )
    });
    (lags, note)
}

/// The per-collector GC counters (raw, over the window), for TaskManagers without
/// `All.Time`.
const GC_PER_COLLECTOR: &str = "gc_time_per_collector";

/// The TaskManagers running the job's subtasks, with their GC time (`All.Time`'s rate, else
/// the sum of each collector's) and CPU load; true when a GC time came from the collectors.
fn assemble_taskmanagers(
    gc: &QueryResult,
    gc_collectors: &QueryResult,
    cpu: &QueryResult,
    job_tms: &BTreeSet<&str>,
) -> (Vec<TaskManagerMetrics>, bool) {
    let mut out: BTreeMap<String, TaskManagerMetrics> = BTreeMap::new();
    for (is_gc, result) in [(true, gc), (false, cpu)] {
        for s in result {
            let tm = flink_taskmanager_id(s.label(l::TM_ID));
            if tm.is_empty() || !job_tms.contains(tm.as_str()) {
                continue;
            }
            let tm = tm.as_str();
            let entry = out.entry(tm.to_string()).or_insert_with(|| TaskManagerMetrics {
                tm_id: tm.to_string(),
                host: Some(s.label(l::HOST).to_string()).filter(|h| !h.is_empty()),
                gc_ms_per_s: None,
                cpu_load: None,
            });
            let v = s.last_value().and_then(finite);
            if is_gc {
                entry.gc_ms_per_s = v;
            } else {
                entry.cpu_load = v;
            }
        }
    }
    let mut from_collectors = false;
    for (tm, ms_per_s) in gc_rate_per_taskmanager(gc_collectors) {
        if !job_tms.contains(tm.as_str()) {
            continue;
        }
        let entry = out.entry(tm.clone()).or_insert_with(|| TaskManagerMetrics {
            tm_id: tm.clone(),
            host: None,
            gc_ms_per_s: None,
            cpu_load: None,
        });
        if entry.gc_ms_per_s.is_none() {
            entry.gc_ms_per_s = Some(ms_per_s);
            from_collectors = true;
        }
    }
    (out.into_values().collect(), from_collectors)
}

/// GC time per TaskManager, ms/s: each collector's counter increase over its span (a drop
/// is a restart of the counter: the new value is the increase), summed over collectors.
/// One series per (TaskManager, collector): a second scrape target's copy is left out.
/// A TaskManager whose collectors have fewer than two points each has no rate.
fn gc_rate_per_taskmanager(series: &QueryResult) -> BTreeMap<String, f64> {
    let mut per_collector: BTreeMap<(String, String), &ResultSeries> = BTreeMap::new();
    for s in series {
        let tm = flink_taskmanager_id(s.label(l::TM_ID));
        if tm.is_empty() {
            continue;
        }
        let slot = per_collector.entry((tm, s.label("__name__").to_string())).or_insert(s);
        if s.points.len() > slot.points.len() {
            *slot = s;
        }
    }
    let mut out: BTreeMap<String, f64> = BTreeMap::new();
    for ((tm, _), s) in per_collector {
        let points: Vec<(i64, f64)> = s.points.iter().copied().filter(|p| p.1.is_finite()).collect();
        let (Some(first), Some(last)) = (points.first(), points.last()) else { continue };
        let span_s = (last.0 - first.0) as f64 / 1000.0;
        if span_s <= 0.0 {
            continue;
        }
        let increase: f64 = points.windows(2).map(|w| if w[1].1 >= w[0].1 { w[1].1 - w[0].1 } else { w[1].1 }).sum();
        *out.entry(tm).or_insert(0.0) += increase / span_s;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::model::request::DiagnosisRequest;

    fn run(id: &str, name: &str, last: i64, start: i64) -> JobRun {
        JobRun {
            id: id.into(),
            name_label: name.into(),
            last_seen_ms: last,
            sampled_at_ms: last,
            scrape_interval_ms: None,
            start_ms: Some(start),
            first_seen_ms: start,
            labels: BTreeMap::new(),
        }
    }

    #[test]
    fn the_newest_run_of_a_reused_name_wins_and_the_verdict_is_told() {
        let runs = [run("old", "bp_lab_slow_sink", 1_000, 0), run("new", "bp_lab_slow_sink", 9_000, 5_000)];
        let (chosen, notes) = resolve_job(&runs, Some("bp-lab-slow-sink"), None).unwrap();
        assert_eq!(chosen.id, "new");
        assert!(notes[0].contains("newest") && notes[0].contains("old"), "{notes:?}");
    }

    #[test]
    fn a_job_is_found_by_flink_name_sanitized_name_or_id() {
        let runs = [run("abc", "bp_lab_x", 1, 0), run("def", "other", 1, 0)];
        for wanted in ["bp-lab-x", "bp_lab_x", "abc"] {
            assert_eq!(resolve_job(&runs, Some(wanted), None).unwrap().0.id, "abc", "{wanted}");
        }
    }

    #[test]
    fn an_unknown_job_names_at_most_three_jobs_named_alike_never_every_job() {
        // 500 jobs of other teams, and three named like the one asked for.
        let mut runs: Vec<JobRun> =
            (0..500).map(|i| run(&format!("{i:032x}"), &format!("team{i}_etl"), 1, 0)).collect();
        for (id, name) in [
            ("a1", "fraud_detection_v2"),
            ("a2", "fraud_detector"),
            ("a3", "fraud_detection_eu"),
            ("a4", "fraud_detection_us"),
        ] {
            runs.push(run(id, name, 1, 0));
        }
        let err = resolve_job(&runs, Some("fraud-detection"), None).unwrap_err().to_string();
        assert_eq!(
            err,
            // Edit distances from fraud_detection: fraud_detector 2 (of 15 characters: 0.87
            // alike), the three suffixed names 3 each (0.83; ties alphabetical).
            "no Flink job named or with id `fraud-detection` has metrics here; did you mean `fraud_detector`, `fraud_detection_eu`, `fraud_detection_us`?"
        );
        // A run without a job_name is never suggested (the empty name is inside every name).
        runs.push(run("a5", "", 1, 0));
        let err = resolve_job(&runs, Some("payments"), None).unwrap_err().to_string();
        assert_eq!(
            err,
            "no Flink job named or with id `payments` has metrics here (505 other jobs have metrics; none is named alike)"
        );
    }

    #[test]
    fn an_unknown_job_says_how_many_jobs_there_are() {
        let runs = [run("abc", "bp_lab_x", 1, 0)];
        let err = resolve_job(&runs, Some("nope"), None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no Flink job named or with id `nope` has metrics here (1 other job has metrics; its name is not alike)"
        );
    }

    #[test]
    fn without_a_name_several_jobs_are_ambiguous_unless_the_plan_names_one() {
        let runs = [run("a", "x", 1, 0), run("b", "y", 1, 0)];
        assert!(matches!(resolve_job(&runs, None, None), Err(CollectError::AmbiguousJob { .. })));
        assert_eq!(resolve_job(&runs, None, Some("b")).unwrap().0.id, "b");
    }

    /// Two jobs in one store: `done` reports until t = 300 s, `live` until t = 900 s. Each
    /// sample (OpenMetrics, timestamps in seconds): uptime (ms, growing) and the busy time
    /// of one vertex.
    fn two_jobs_one_stopped() -> crate::collect::store::SeriesStore {
        let mut text = String::new();
        for (job, until_s) in [("done", 300), ("live", 900)] {
            for t in (0..=until_s).step_by(15) {
                let ms = t * 1000;
                text.push_str(&format!(
                    "flink_jobmanager_job_uptime{{job_id=\"{job}\",job_name=\"{job}\"}} {} {t}\n",
                    ms + 3_600_000
                ));
                text.push_str(&format!(
                    "flink_taskmanager_job_task_busyTimeMsPerSecond{{job_id=\"{job}\",job_name=\"{job}\",task_id=\"v\",task_name=\"v\",subtask_index=\"0\"}} 500 {t}\n"
                ));
            }
        }
        text.push_str("# EOF\n");
        let mut store = crate::collect::store::SeriesStore::new();
        store.read_from(text.as_bytes(), "two-jobs", None).unwrap();
        store.finish();
        store
    }

    fn collect_job(store: &crate::collect::store::SeriesStore, job: &str, at_ms: Option<i64>) -> Snapshot {
        let config = Config::default();
        let request = DiagnosisRequest { job: Some(job.into()), at_ms, window_ms: None, ..Default::default() };
        let input = CollectInput {
            request: &request,
            graph: None,
            checkpoint_config: None,
            config: &config,
            catalog: &config.metrics,
        };
        crate::collect::block_on(collect(store, input)).unwrap()
    }

    #[test]
    fn a_job_that_stopped_reporting_is_diagnosed_as_of_its_last_sample() {
        // The store's newest sample is at 900 s; `done`'s at 300 s, 600 s earlier (far more
        // than scrape lag): the window [0 s, 300 s] is its last 5 minutes (the default
        // window), and a note says so.
        let store = two_jobs_one_stopped();
        let snap = collect_job(&store, "done", None);
        assert_eq!(snap.at_ms, 300_000);
        assert_eq!(snap.window.start_ms, 0);
        let note = snap.notes.iter().find(|n| n.contains("no newer samples")).expect("a note");
        assert!(note.contains("(600 s before the newest data)"), "{note}");
        // 500 ms/s of busy time = 0.5 busy, read inside the shifted window.
        assert_eq!(snap.vertex_aggregates[0].busy_max, Some(0.5));
        // The job still reporting is diagnosed at the newest data, without that note.
        let snap = collect_job(&store, "live", None);
        assert_eq!(snap.at_ms, 900_000);
        assert!(!snap.notes.iter().any(|n| n.contains("no newer samples")), "{:?}", snap.notes);
    }

    #[test]
    fn a_time_asked_for_past_the_jobs_data_ends_the_window_at_its_last_sample() {
        // Scraped every 15 s: a gap over 2 × 15 + 5 (the step) = 35 s is not scrape lag.
        // Asked for 360 s: 60 s after `done`'s last sample (300 s) → as of 300 s.
        let store = two_jobs_one_stopped();
        let snap = collect_job(&store, "done", Some(360_000));
        assert_eq!(snap.at_ms, 300_000);
        assert!(snap.notes.iter().any(|n| n.contains("(60 s before the time asked for)")), "{:?}", snap.notes);
        // 30 s after the last sample is scrape lag: the time asked for is kept.
        let snap = collect_job(&store, "done", Some(330_000));
        assert_eq!(snap.at_ms, 330_000);
        assert!(!snap.notes.iter().any(|n| n.contains("no newer samples")), "{:?}", snap.notes);
    }

    /// One job scraped every 10 s from 0 to 600 s, with `up` beside it; nothing newer.
    fn one_job_until(last_s: i64) -> crate::collect::store::SeriesStore {
        let mut store = crate::collect::store::SeriesStore::new();
        let job = [("job_id", "j"), ("job_name", "j")];
        for t in (0..=last_s).step_by(10) {
            store.push("flink_jobmanager_job_uptime", &job, t * 1000, (t * 1000 + 3_600_000) as f64);
            store.push("up", &[("job", "flink")], t * 1000, 1.0);
            store.push(
                "flink_taskmanager_job_task_busyTimeMsPerSecond",
                &[("job_id", "j"), ("job_name", "j"), ("task_id", "v"), ("task_name", "v"), ("subtask_index", "0")],
                t * 1000,
                500.0,
            );
        }
        store.finish();
        store
    }

    #[test]
    fn a_store_that_hides_its_newest_seconds_is_not_a_job_that_stopped() {
        // Diagnosed "now" = 637 s, as against a VictoriaMetrics that hides the last 30 s:
        // the store's newest data is at 600 s, the job's too. Scraped every 10 s, a gap
        // over 2 × 10 + 5 = 25 s would be staleness, but it is judged against the store's
        // newest data (600 s), not against 637 s: no note, and the window ends at 600 s.
        let store = one_job_until(600);
        let snap = collect_job(&store, "j", None);
        assert_eq!(snap.at_ms, 600_000);
        let at_637 = {
            let config = Config::default();
            let request = DiagnosisRequest { job: Some("j".into()), ..Default::default() };
            let input = CollectInput {
                request: &request,
                graph: None,
                checkpoint_config: None,
                config: &config,
                catalog: &config.metrics,
            };
            crate::collect::block_on(collect(&Now(&store, 637_000), input)).unwrap()
        };
        assert_eq!(at_637.at_ms, 600_000);
        assert!(at_637.notes.is_empty(), "{:?}", at_637.notes);
        assert_eq!(at_637.vertex_aggregates[0].busy_max, Some(0.5));
    }

    #[test]
    fn a_store_minutes_behind_the_diagnosis_is_noted() {
        // "Now" = 800 s, the newest data at 600 s: 200 s > 120 s, worth a note; the job is
        // not said to have stopped (it is as current as the store).
        let store = one_job_until(600);
        let config = Config::default();
        let request = DiagnosisRequest { job: Some("j".into()), ..Default::default() };
        let input = CollectInput {
            request: &request,
            graph: None,
            checkpoint_config: None,
            config: &config,
            catalog: &config.metrics,
        };
        let snap = crate::collect::block_on(collect(&Now(&store, 800_000), input)).unwrap();
        assert_eq!(snap.at_ms, 600_000);
        assert_eq!(
            snap.notes,
            [
                "the metric store has no newer data than 1970-01-01T00:10:00Z (200 s before the time of the diagnosis): the diagnosis is as of then"
            ]
        );
    }

    /// A store whose default time ("now") is later than its data.
    struct Now<'a>(&'a crate::collect::store::SeriesStore, i64);

    impl MetricSource for Now<'_> {
        async fn run(&self, queries: &[Query]) -> Vec<Result<QueryResult, QueryError>> {
            self.0.run(queries).await
        }

        fn latest_ms(&self) -> Option<i64> {
            Some(self.1)
        }
    }

    /// Two standalone clusters run job id `z` at once; only their JobManagers' `host`
    /// (jm-a, jm-b) tells them apart, and task series carry their TaskManager's host.
    fn two_clusters_told_apart_by_the_jobmanager_host_only() -> crate::collect::store::SeriesStore {
        let mut text = String::new();
        for (jm, tm) in [("jm-a", "tm-a"), ("jm-b", "tm-b")] {
            for t in (0..=300).step_by(15) {
                text.push_str(&format!(
                    "flink_jobmanager_job_uptime{{job_id=\"z\",job_name=\"z\",host=\"{jm}\"}} {} {t}\n",
                    t * 1000 + 3_600_000
                ));
                text.push_str(&format!(
                    "flink_taskmanager_job_task_numRecordsIn{{job_id=\"z\",job_name=\"z\",host=\"{tm}\",task_id=\"v\",subtask_index=\"0\",task_attempt_num=\"0\"}} {} {t}\n",
                    t * 10
                ));
            }
        }
        text.push_str("# EOF\n");
        let mut store = crate::collect::store::SeriesStore::new();
        store.read_from(text.as_bytes(), "two-clusters", None).unwrap();
        store.finish();
        store
    }

    #[test]
    fn deployments_their_task_series_cannot_tell_apart_are_refused_not_blended() {
        let store = two_clusters_told_apart_by_the_jobmanager_host_only();
        let config = Config::default();
        let diagnose = |labels: &[(&str, &str)]| {
            let request = DiagnosisRequest {
                job: Some("z".into()),
                labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
                ..Default::default()
            };
            let input = CollectInput {
                request: &request,
                graph: None,
                checkpoint_config: None,
                config: &config,
                catalog: &config.metrics,
            };
            crate::collect::block_on(collect(&store, input)).unwrap_err()
        };
        let err = diagnose(&[]);
        assert!(matches!(&err, CollectError::AmbiguousDeployment { labels, .. } if labels == &["host"]), "{err}");
        // Naming one by its JobManager host does not help: no task series carries it.
        let err = diagnose(&[("host", "jm-a")]);
        assert!(
            matches!(&err, CollectError::InseparableDeployments { deployment, .. } if deployment == &["host=jm-a"]),
            "{err}"
        );
    }

    #[test]
    fn the_episode_starts_after_the_last_calm_evaluation() {
        // calm, calm, red, red: the episode starts after t = 10.
        let points = [(0, 0.0), (10, 50.0), (20, 900.0), (30, 990.0)];
        assert_eq!(episode_start(&points, 100.0), Some(10));
        assert_eq!(episode_start(&points[2..], 100.0), None);
    }

    fn gc_series(tm: &str, collector: &str, points: &[(i64, f64)]) -> ResultSeries {
        let labels = [
            ("__name__", format!("flink_taskmanager_Status_JVM_GarbageCollector_{collector}_Time")),
            (l::TM_ID, tm.to_string()),
        ];
        ResultSeries { labels: labels.into_iter().map(|(k, v)| (k.to_string(), v)).collect(), points: points.to_vec() }
    }

    #[test]
    fn gc_time_without_all_time_is_the_sum_of_each_collectors_rate() {
        let collectors = vec![
            // 100 → 150 → 250 ms over 20 s: 150 / 20 = 7.5 ms/s.
            gc_series("tm-1", "G1_Young_Generation", &[(0, 100.0), (10_000, 150.0), (20_000, 250.0)]),
            // 0 → 20 ms over 20 s: 1 ms/s; tm-1 in all: 7.5 + 1 = 8.5 ms/s.
            gc_series("tm-1", "G1_Old_Generation", &[(0, 0.0), (20_000, 20.0)]),
            // A second scrape target's shorter copy of the same counter is left out.
            gc_series("tm-1", "G1_Old_Generation", &[(0, 0.0), (10_000, 900.0)]),
            // The counter restarts at 500 → 40: the increase is 40, then 20; 60 / 20 = 3 ms/s.
            gc_series("tm-2", "G1_Young_Generation", &[(0, 500.0), (10_000, 40.0), (20_000, 60.0)]),
            // One point has no rate.
            gc_series("tm-3", "G1_Young_Generation", &[(0, 5.0)]),
        ];
        let rates = gc_rate_per_taskmanager(&collectors);
        assert_eq!(rates.get("tm-1"), Some(&8.5));
        assert_eq!(rates.get("tm-2"), Some(&3.0));
        assert_eq!(rates.get("tm-3"), None);
    }

    #[test]
    fn all_time_is_preferred_and_the_collectors_fill_only_the_taskmanagers_without_it() {
        let mut all = gc_series("tm-1", "All", &[(20_000, 4.0)]);
        all.labels.remove("__name__");
        let collectors = vec![
            gc_series("tm-1", "G1_Young_Generation", &[(0, 0.0), (20_000, 400.0)]),
            gc_series("tm-2", "G1_Young_Generation", &[(0, 0.0), (20_000, 60.0)]),
            // Not one of the job's TaskManagers.
            gc_series("tm-9", "G1_Young_Generation", &[(0, 0.0), (20_000, 60.0)]),
        ];
        let job_tms: BTreeSet<&str> = ["tm-1", "tm-2"].into();
        let (tms, from_collectors) = assemble_taskmanagers(&vec![all], &collectors, &vec![], &job_tms);
        let gc: Vec<(&str, Option<f64>)> = tms.iter().map(|t| (t.tm_id.as_str(), t.gc_ms_per_s)).collect();
        // tm-1 keeps All.Time's 4 ms/s (not 400 / 20 = 20); tm-2 gets 60 / 20 = 3 ms/s.
        assert_eq!(gc, vec![("tm-1", Some(4.0)), ("tm-2", Some(3.0))]);
        assert!(from_collectors);
    }

    #[test]
    fn busy_idle_and_backpressured_time_outside_0_to_1000_ms_per_s_is_unknown_and_said() {
        // 1000 ms/s is 1; 1030 ms/s is within the 5 % slack and reads 1; −5, 10⁹ and +∞ are no
        // value Flink writes: the screening leaves them out where they enter, with a note.
        assert_eq!(plausible_ratio(500.0, 1000.0), Some(0.5));
        assert_eq!(plausible_ratio(1030.0, 1000.0), Some(1.0));
        assert_eq!(plausible_ratio(f64::NAN, 1000.0), None);
        // An isBackPressured share is already a ratio; −0 reads 0.
        assert_eq!(plausible_ratio(0.25, 1.0), Some(0.25));
        assert!(plausible_ratio(-0.0, 1.0).unwrap().is_sign_positive());
        let series = |id: &str, name: &str, subtask: Option<&str>, v: f64| {
            let mut labels: BTreeMap<String, String> =
                [(l::TASK_ID, id), (l::TASK_NAME, name)].into_iter().map(|(k, v)| (k.into(), v.into())).collect();
            if let Some(i) = subtask {
                labels.insert(l::SUBTASK_INDEX.into(), i.into());
            }
            ResultSeries { labels, points: vec![(0, v)] }
        };
        let cat = MetricCatalog::default();
        let busy = |agg: Agg| Query::OverTime {
            selector: Selector::metric(&cat.busy),
            func: OverTime::Avg,
            range_ms: 60_000,
            at_ms: 0,
            aggregation: Some(Aggregation::new(agg, &[l::TASK_ID])),
        };
        let mut tallies = BTreeMap::new();
        let mut vertices = vec![series("a", "sink", None, -5.0), series("b", "parse", None, 400.0)];
        crate::collect::domain::screen(&cat, &busy(Agg::Max), &mut vertices, &mut tallies);
        let mut subtasks = vec![series("a", "sink", Some("1"), 1e9), series("b", "parse", Some("0"), f64::INFINITY)];
        crate::collect::domain::screen(&cat, &busy(Agg::Max), &mut subtasks, &mut tallies);
        assert!(vertices[0].points[0].1.is_nan() && subtasks.iter().all(|s| s.points[0].1.is_nan()));
        assert_eq!(vertices[1].points[0].1, 400.0);
        let note = crate::collect::domain::note(&tallies, &|_: &str, label: &str| label.to_string()).unwrap();
        assert_eq!(
            note,
            "The metric source returned 3 non-finite or impossible values, left out as unknown (no finding rests on them): `flink_taskmanager_job_task_busyTimeMsPerSecond` (0–1000 ms per second): 1 non-finite; 2 out of range, e.g. -5 of `sink`, 1.0e9 of `sink` subtask 1. Is the reporter, the metric store or the recording broken?"
        );
    }
}
