//! Request + metric source → [`Snapshot`].
//!
//! One code path for every backend: the collector decides which [`Query`]s to ask, in
//! four rounds (which job; which window; every vertex aggregated and the job-level signals;
//! per-subtask detail where the runbook looks), and a [`MetricSource`]
//! answers them — a recording in memory, or Prometheus over HTTP. A query that fails or
//! finds nothing becomes a [`Missing`] entry, never an error: only "no such job" stops a
//! diagnosis.

use std::collections::BTreeMap;

use crate::collect::identity::{self};
use crate::collect::kafka;
use crate::collect::query::{Query, QueryResult, Selector};
use crate::config::Config;
use crate::model::catalog::{MetricCatalog, labels as l};
use crate::model::graph::JobGraph;
use crate::model::request::DiagnosisRequest;
use crate::model::snapshot::{
    BackpressureMeasure, CheckpointConfig, JobIdentity, Leaves, Missing, MissingWhy, OperatorRates, RunChange,
    Snapshot, SubtaskMetrics, VertexTimeline,
};

mod assemble;
mod autoscaler;
mod changes;
mod error;
mod failover;
mod lookup;
mod plan_check;
mod resources;
mod rounds;
mod runs;
mod source;
mod window;

pub use error::{CollectError, QUOTED_JOBS, closest};
pub use lookup::JobLookup;
pub use runs::{
    JobRun, Resolved, STALE_AFTER_MS, STORE_LAG_NOTE_MS, STORE_NEWEST, UP, job_runs, newest_query, resolve_job,
    successor,
};
pub use source::{MetricSource, QueryError, TooLarge};
pub use window::episode_start;

use assemble::{assemble_aggregates, assemble_job_signals, assemble_operators, assemble_subtasks, assemble_timeline};
use plan_check::check_plan;
use rounds::{DETAIL, Scope, detail_queries, job_signal_queries, job_wide_queries, source_reader_queries};
use runs::{Which, which_job};
use window::{which_series, which_window};

/// Everything the collector needs besides the metric source.
pub struct CollectInput<'a> {
    pub request: &'a DiagnosisRequest,
    /// The job graph, from Flink REST or a plan file; `None` for graph-free mode.
    pub graph: Option<JobGraph>,
    /// Checkpoint configuration from Flink REST, when known.
    pub checkpoint_config: Option<CheckpointConfig>,
    /// The job's exception history from Flink REST (`/jobs/:id/exceptions`), when read.
    pub exceptions: Option<crate::model::failover::JobExceptions>,
    /// Flink 2.3's rescale history (`/jobs/:id/rescales/history`), when read.
    pub rescales: Option<crate::model::rescales::RescaleHistory>,
    pub config: &'a Config,
    pub catalog: &'a MetricCatalog,
}

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
    collect_after(source, input, None).await
}

/// [`collect`] after the job lookup was asked already (by a caller that needed the run
/// first): round 1 takes its answers from `lookup` (asked at the time the collection is
/// about, `request.at_ms` or the source's newest), not from the source again.
pub async fn collect_after<S: MetricSource>(
    source: &S,
    input: CollectInput<'_>,
    lookup: Option<JobLookup>,
) -> Result<Snapshot, CollectError> {
    let replay = lookup::Replay::new(source, lookup);
    let source = &replay;
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

/// The job's name as Flink shows it when the plan belongs to this job, else the reporter's.
fn job_name(graph: Option<&JobGraph>, name_label: &str) -> String {
    graph
        .and_then(|g| g.job_name.clone())
        .filter(|n| name_label.is_empty() || crate::model::graph::same_name(n, name_label))
        .unwrap_or_else(|| name_label.to_string())
}

/// Round 4's per-subtask detail, per-operator rates and the busy/backpressured timeline,
/// from its answers.
fn assemble_detail(
    answers: &Answers,
    scope: &Scope<'_>,
) -> (Vec<SubtaskMetrics>, Vec<OperatorRates>, Vec<VertexTimeline>) {
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
    (subtasks, operators, timeline)
}

/// Round 4's queries: per-subtask detail of `detail_ids`, the containers of the
/// TaskManagers round 3 named (and those pods), the autoscaler's view, the offsets of the
/// topics round 3 found.
fn round4_queries(
    scope: &Scope<'_>,
    graph: Option<&JobGraph>,
    detail_ids: &[String],
    answers: &Answers,
    kafka_inputs: &kafka::KafkaInputs,
) -> (Vec<(String, Query)>, Vec<String>) {
    let mut round4 = detail_queries(scope, detail_ids);
    let tm_answers = ["gc_time", "cpu_load", rounds::HEAP_USED].map(|n| answers.get(n));
    let pods = resources::taskmanager_pods(&tm_answers);
    round4.extend(resources::container_queries(scope, &pods));
    round4.extend(autoscaler::autoscaler_query(scope, graph));
    let topics = kafka::topics_seen(kafka_inputs, &answers.results);
    round4.extend(kafka::offset_queries(&topics, scope.trend_start, scope.at, scope.step));
    (round4, pods)
}

/// Round 3's queries: every vertex aggregated over its subtasks, the job-level signals, the
/// source readers, the lag of the job's consumer group, superseded attempts, and the
/// parallelism before and after a change inside the window.
fn round3_queries(
    scope: &Scope<'_>,
    graph: Option<&JobGraph>,
    kafka_inputs: &kafka::KafkaInputs,
    run: &runs::JobRun,
    changed: Option<i64>,
) -> Vec<(String, Query)> {
    let at = scope.at;
    let mut round3 = job_wide_queries(scope);
    round3.extend(job_signal_queries(scope).into_iter().chain(source_reader_queries(scope, graph)));
    let mut round3: Vec<(String, Query)> = round3.into_iter().map(|(n, q)| (n.to_string(), q)).collect();
    round3.extend(kafka::lag_queries(kafka_inputs, scope.trend_start, at, scope.step));
    let task = |selector: Selector| scope.series.task(selector.with(l::JOB_ID, scope.job_id));
    round3.extend(kafka::flink_offset_queries(kafka_inputs, task, scope.trend_start, at, scope.step));
    round3.extend(identity::superseded_queries(&scope.job(&scope.cat.records_in), scope.window.len_ms(), at));
    let recent = runs::stale_after(run, scope.step);
    let before = |t| changes::counted_before(run, t, scope.step);
    round3.extend(changed.map(|t| changes::change_queries(scope, before(t), recent)).unwrap_or_default());
    round3
}

async fn collect_from<S: MetricSource>(source: &S, input: CollectInput<'_>) -> Result<Snapshot, CollectError> {
    let cfg = &input.config.diagnosis;
    let at = input.request.at_ms.or_else(|| source.latest_ms()).ok_or(CollectError::NoData)?;

    // Round 1: which job.
    let Which { run, mut notes, at, distinguishing, replaced, stopped } = which_job(source, &input, at).await?;

    // Round 2: which series (the run's deployment, the hygiene its task series need), then
    // which window.
    let mut answers = Answers::default();
    let series = which_series(source, &input, &run, &distinguishing, at, &mut notes, &mut answers.missing).await?;
    let (window, measure, changed, failover) =
        which_window(source, &input, &run, &series, at, &mut answers.missing, &mut notes).await;

    let name = job_name(input.graph.as_ref(), &run.name_label);
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
    answers.ask(source, round3_queries(&scope, input.graph.as_ref(), &kafka_inputs, &run, changed)).await;
    answers.note_missing_task_metrics(scope.cat, measure);
    let vertex_aggregates = assemble_aggregates(&|name| answers.get(name), scope.backpressure_scale());
    let replaced_id = match &replaced {
        Some(RunChange::Replaced { old_id, .. }) => Some(old_id.as_str()),
        _ => None,
    };
    let (before, after) = (answers.get(changes::BEFORE), answers.get(changes::AFTER));
    let found = |name: &dyn Fn(&str, &str) -> String| {
        changed.map(|t| changes::assemble_changes(before, after, t, name)).unwrap_or_default()
    };
    // A rescale explains a plan's other parallelism whether the series show it or only
    // Flink's rescale history does.
    let counted = changes::join_history(
        found(&|_: &str, label: &str| label.to_string()),
        input.rescales.as_ref(),
        failover.counted_from_ms,
        at,
        scope.step,
        changes::HISTORY_JOIN_TOLERANCE_MS,
    );
    let (graph, plan_mismatch, resized) =
        check_plan(input.graph, &run, replaced_id, &vertex_aggregates, &counted, &mut notes);
    let vertex_name = |id: &str, label: &str| {
        graph.as_ref().and_then(|g| g.vertex(id)).map(|v| v.name.clone()).unwrap_or_else(|| label.to_string())
    };
    let replaced = replaced.map(|r| r.with_resized(resized));
    let run_changes: Vec<RunChange> = replaced.clone().into_iter().chain(stopped).chain(found(&vertex_name)).collect();
    let run_changes = changes::join_history(
        run_changes,
        input.rescales.as_ref(),
        failover.counted_from_ms,
        at,
        scope.step,
        changes::HISTORY_JOIN_TOLERANCE_MS,
    );
    notes.extend(identity::superseded_note(
        answers.get(identity::SUPERSEDED_ALL),
        answers.get(identity::SUPERSEDED_NEWEST),
        &series.hygiene.attempts,
        vertex_name,
    ));

    // Round 4: per-subtask detail for the vertices the diagnosis looks into, and the
    // offsets of the topics round 3 found.
    let detail_ids =
        crate::diagnose::plan::detail_vertices(graph.as_ref(), &vertex_aggregates, &cfg.thresholds, measure);
    let (round4, pods) = round4_queries(&scope, graph.as_ref(), &detail_ids, &answers, &kafka_inputs);
    if !round4.is_empty() {
        answers.ask(source, round4).await;
    }

    let (subtasks, operators, timeline) = assemble_detail(&answers, &scope);
    let (partitions, retention) = kafka::assemble(&kafka_inputs, &answers.results, &input.config.kafka);
    let mut signals = assemble_job_signals(&mut answers, scope.cat, &subtasks, input.checkpoint_config);
    resources::add_jvm_memory(&mut signals.taskmanagers, &answers, scope.cat);
    let pods = (!pods.is_empty()).then(|| resources::assemble_pods(&answers, window.len_ms() as f64 / 1000.0));
    let autoscaler =
        autoscaler::assemble_autoscaler(answers.results.get(autoscaler::AUTOSCALER), scope.cat, graph.as_ref());
    notes.extend(signals.lag_note.clone());
    let (promql, missing) = answers.into_queries_and_missing();
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
        source_readers: signals.source_readers,
        partitions,
        retention,
        job_topics: kafka_inputs.topics.clone(),
        taskmanagers: signals.taskmanagers,
        pods,
        autoscaler,
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
        changes: run_changes,
        // The history Flink REST gave, with the restarts the window's series show.
        failover: Some(crate::model::failover::Failover { exceptions: input.exceptions, ..failover }),
    })
}

/// The reason of a query that failed: its error, and whether the backend refused it as
/// too large.
fn failed(e: &QueryError, leaves: Option<Leaves>) -> MissingWhy {
    MissingWhy::query_failed(e.message.clone(), leaves, e.too_large.is_some())
}

/// The answers gathered so far, by name; the PromQL behind each; what could not be had.
#[derive(Default)]
struct Answers {
    results: BTreeMap<String, QueryResult>,
    promql: BTreeMap<String, String>,
    missing: Vec<Missing>,
}

impl Answers {
    /// The PromQL of every query asked, by name, and what was missing, sorted, once each.
    fn into_queries_and_missing(self) -> (BTreeMap<String, String>, Vec<Missing>) {
        let Answers { promql, mut missing, .. } = self;
        missing.sort();
        missing.dedup();
        (promql, missing)
    }

    /// Asks `named` queries in one batch; a failed query becomes a [`Missing`] entry.
    pub(super) async fn ask<S: MetricSource>(&mut self, source: &S, named: Vec<(String, Query)>) {
        let queries: Vec<Query> = named.iter().map(|(_, q)| q.clone()).collect();
        for ((name, q), answer) in named.into_iter().zip(source.run(&queries).await) {
            self.promql.insert(name.clone(), q.to_promql());
            match answer {
                Ok(r) => {
                    self.results.insert(name, r);
                }
                Err(e) => self.missing.push(Missing { metric: q.to_promql(), why: failed(&e, None) }),
            }
        }
    }

    /// The answer to the query `name`; empty when it failed or was not asked.
    pub(super) fn get(&self, name: &str) -> &QueryResult {
        static EMPTY: QueryResult = Vec::new();
        self.results.get(name).unwrap_or(&EMPTY)
    }

    /// After round 3: the task metrics every step needs, when absent.
    fn note_missing_task_metrics(&mut self, cat: &MetricCatalog, measure: BackpressureMeasure) {
        let classic = measure == BackpressureMeasure::IsBackPressuredShare;
        for (name, key) in [(&cat.busy, "busy"), (&cat.backpressured, "backpressured"), (&cat.idle, "idle")] {
            let why = if classic && key != "idle" { MissingWhy::PredatesFlink113 } else { MissingWhy::NoSamples };
            // In the classic case the `backpressured` answer is isBackPressured's.
            if (classic && key == "backpressured") || self.get(key).is_empty() {
                self.missing.push(Missing { metric: name.clone(), why });
            }
        }
        if self.get("records_in").is_empty() && self.get("records_in_meter").is_empty() {
            self.missing.push(Missing { metric: cat.records_in.clone(), why: MissingWhy::NoRecordsIn });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::assemble::{assemble_taskmanagers, gc_rate_per_taskmanager, plausible_ratio};
    use super::*;
    use crate::collect::query::{Agg, Aggregation, OverTime, ResultSeries};
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
            not_running_now: false,
            before_start_ms: None,
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
            exceptions: None,
            rescales: None,
            config: &config,
            catalog: &config.metrics,
        };
        crate::collect::block_on(collect(store, input)).unwrap()
    }

    /// A source over a recording that counts the job lookups (the uptime query of round 1)
    /// it is asked.
    struct CountingLookups<'a>(&'a crate::collect::store::SeriesStore, std::sync::atomic::AtomicUsize);

    impl MetricSource for CountingLookups<'_> {
        async fn run(&self, queries: &[Query]) -> Vec<Result<crate::collect::query::QueryResult, QueryError>> {
            let uptime = Config::default().metrics.uptime;
            let lookups = queries
                .iter()
                .filter(|q| matches!(q, Query::Range { selector, aggregation: Some(_), .. } if selector.to_promql().contains(&uptime) && !q.to_promql().contains("job_id")))
                .count();
            self.1.fetch_add(lookups, std::sync::atomic::Ordering::Relaxed);
            self.0.run(queries).await
        }

        fn latest_ms(&self) -> Option<i64> {
            self.0.latest_ms()
        }
    }

    #[test]
    fn a_collection_after_the_job_lookup_does_not_look_the_job_up_again() {
        let store = two_jobs_one_stopped();
        let source = CountingLookups(&store, Default::default());
        let config = Config::default();
        let d = &config.diagnosis;
        let request = DiagnosisRequest { job: Some("done".into()), ..Default::default() };
        let input = || CollectInput {
            request: &request,
            graph: None,
            checkpoint_config: None,
            exceptions: None,
            rescales: None,
            config: &config,
            catalog: &config.metrics,
        };
        let count = || source.1.load(std::sync::atomic::Ordering::Relaxed);
        // Alone, the collector looks the job up once.
        let alone = crate::collect::block_on(collect(&source, input())).unwrap();
        assert_eq!(count(), 1);
        // After a caller's lookup (at the same time), it asks none: still one in all.
        let at = store.last_timestamp_ms().unwrap();
        let lookup = crate::collect::block_on(JobLookup::find(
            &source,
            &config.metrics,
            at,
            d.trend_lookback.as_ms(),
            d.step.as_ms(),
        ));
        assert_eq!(count(), 2);
        assert_eq!(lookup.resolve(Some("done"), None).unwrap().run.id, alone.job.id);
        let after = crate::collect::block_on(collect_after(&source, input(), Some(lookup))).unwrap();
        assert_eq!(count(), 2);
        assert_eq!(after, alone);
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
                exceptions: None,
                rescales: None,
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
            exceptions: None,
            rescales: None,
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
                exceptions: None,
                rescales: None,
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
