//! Rounds 3 and 4: the queries, named, over what one collection shares ([`Scope`]).

use super::assemble::GC_PER_COLLECTOR;
use crate::collect::identity::SeriesScope;
use crate::collect::query::{Agg, Aggregation, OverTime, Query, Selector};
use crate::model::catalog::{MetricCatalog, labels as l};
use crate::model::graph::JobGraph;
use crate::model::snapshot::{BackpressureMeasure, Window};
pub(super) fn over_time(
    selector: Selector,
    func: OverTime,
    window: &Window,
    aggregation: Option<Aggregation>,
) -> Query {
    Query::OverTime { selector, func, range_ms: window.len_ms(), at_ms: window.end_ms, aggregation }
}

pub(super) fn by_subtask(agg: Agg) -> Option<Aggregation> {
    Some(Aggregation::new(agg, &[l::TASK_ID, l::SUBTASK_INDEX]))
}

/// What every query of one collection shares: the job, the window, the evaluation step.
pub(super) struct Scope<'a> {
    pub(super) cat: &'a MetricCatalog,
    pub(super) job_id: &'a str,
    /// The run's deployment and the hygiene of its series.
    pub(super) series: &'a SeriesScope,
    pub(super) window: Window,
    /// The time the diagnosis is about (the window's end), Unix ms.
    pub(super) at: i64,
    pub(super) step: i64,
    /// Start of the longer look back that trends (checkpoints, lag) need, Unix ms.
    pub(super) trend_start: i64,
    /// What the job's reporter measures backpressure with.
    pub(super) measure: BackpressureMeasure,
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
    pub(super) fn backpressure_scale(&self) -> f64 {
        match self.measure {
            BackpressureMeasure::TimeMsPerSecond => 1000.0,
            BackpressureMeasure::IsBackPressuredShare => 1.0,
        }
    }

    /// A task metric every subtask reports, to count subtasks and samples by: busy time,
    /// or `isBackPressured` when the reporter has no busy time.
    pub(super) fn presence_metric(&self) -> &str {
        match self.measure {
            BackpressureMeasure::TimeMsPerSecond => &self.cat.busy,
            BackpressureMeasure::IsBackPressuredShare => &self.cat.is_backpressured,
        }
    }

    /// The job's task series of metric `m` (newest attempts, each target once).
    pub(super) fn job(&self, m: &str) -> Selector {
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

/// Round 3, first half: every vertex aggregated over its subtasks (max, min, mean and
/// median busy time, backpressure, idle time, records rates, checkpoint start delay).
pub(super) fn job_wide_queries(s: &Scope<'_>) -> Vec<(&'static str, Query)> {
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
pub(super) fn job_signal_queries(s: &Scope<'_>) -> Vec<(&'static str, Query)> {
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
        &cat.last_checkpoint_size,
        &cat.last_checkpoint_full_size,
    ];
    // State sizes per subtask (summed over column families) over the trend lookback.
    let rocksdb_trend = |suffix: &str| s.range(s.job_suffix(suffix), by_subtask(Agg::Sum), s.trend_start);
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
        ("rocksdb_estimate_live_data_size", rocksdb_trend(&cat.rocksdb_estimate_live_data_size_suffix)),
        ("rocksdb_total_sst_files_size", rocksdb_trend(&cat.rocksdb_total_sst_files_size_suffix)),
        ("rocksdb_estimate_num_keys", rocksdb_trend(&cat.rocksdb_estimate_num_keys_suffix)),
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
        (HEAP_USED, s.over_window(s.taskmanager(&cat.heap_used), OverTime::Avg, by_tm(Agg::Max))),
        (HEAP_MAX, s.over_window(s.taskmanager(&cat.heap_max), OverTime::Max, by_tm(Agg::Max))),
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

/// Round 3's heap answers: mean heap used and the heap's maximum per TaskManager.
pub(super) const HEAP_USED: &str = "heap_used";
/// See [`HEAP_USED`].
pub(super) const HEAP_MAX: &str = "heap_max";
/// Round 3, the source readers (step `sources`): idleness, fetch lag, watermark alignment
/// drift, the splits each reader holds, and each source subtask's records rate. Five
/// queries whatever the job's size, and a sixth (the records) when the plan names the
/// sources; per subtask, never per vertex or subtask.
pub(super) fn source_reader_queries(s: &Scope<'_>, graph: Option<&JobGraph>) -> Vec<(&'static str, Query)> {
    let cat = s.cat;
    let per_subtask = |m: &str, func: OverTime, agg: Agg| s.over_window(s.job(m), func, by_subtask(agg));
    let mut queries = vec![
        (SOURCE_IDLE_TIME, per_subtask(&cat.source_idle_time, OverTime::Last, Agg::Max)),
        (FETCH_EVENT_TIME_LAG, per_subtask(&cat.fetch_event_time_lag, OverTime::Avg, Agg::Max)),
        (WATERMARK_ALIGNMENT_DRIFT, per_subtask(&cat.watermark_alignment_drift, OverTime::Avg, Agg::Max)),
        (ASSIGNED_PARTITIONS, per_subtask(&cat.assigned_partitions, OverTime::Last, Agg::Max)),
        // One series per partition a reader holds: counted per subtask.
        (PARTITION_OFFSETS, per_subtask(&cat.partition_current_offset, OverTime::Last, Agg::Count)),
    ];
    let sources: Vec<String> = graph
        .map(|g| g.vertices.iter().filter(|v| g.is_source(&v.id)).map(|v| v.id.clone()).collect())
        .unwrap_or_default();
    if !sources.is_empty() {
        let selector = s.job(&cat.records_out).with_one_of(l::TASK_ID, &sources);
        queries.push((SOURCE_RECORDS, s.over_window(selector, OverTime::Rate, by_subtask(Agg::Sum))));
    }
    queries
}

/// Names of the source-reader answers ([`source_reader_queries`]).
pub(super) const SOURCE_IDLE_TIME: &str = "source_idle_time";
pub(super) const FETCH_EVENT_TIME_LAG: &str = "fetch_event_time_lag";
pub(super) const WATERMARK_ALIGNMENT_DRIFT: &str = "watermark_alignment_drift";
pub(super) const ASSIGNED_PARTITIONS: &str = "assigned_partitions";
pub(super) const PARTITION_OFFSETS: &str = "partition_offsets";
pub(super) const SOURCE_RECORDS: &str = "source_records";

/// Names of round 4's per-subtask answers, in the order [`assemble_subtasks`] reads them.
pub(super) const DETAIL: [&str; 9] = [
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
pub(super) fn detail_queries(s: &Scope<'_>, detail_ids: &[String]) -> Vec<(String, Query)> {
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
pub(super) const OPERATOR_NAME: &str = "operator_name";

/// A scope for the collector's unit tests: job `j`, a 300 s window ending at 300 s, 5 s
/// steps, backpressure as time.
#[cfg(test)]
pub(super) fn test_scope<'a>(
    cat: &'a crate::model::catalog::MetricCatalog,
    series: &'a crate::collect::identity::SeriesScope,
) -> Scope<'a> {
    let window = crate::model::snapshot::Window {
        start_ms: 0,
        end_ms: 300_000,
        requested_ms: 300_000,
        bound: crate::model::snapshot::WindowBound::Requested,
        settled_ms: None,
    };
    Scope {
        cat,
        job_id: "j",
        series,
        window,
        at: 300_000,
        step: 5000,
        trend_start: 0,
        measure: crate::model::snapshot::BackpressureMeasure::TimeMsPerSecond,
    }
}
