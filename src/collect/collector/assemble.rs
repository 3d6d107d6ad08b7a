//! The snapshot's parts from the answers of rounds 3 and 4.

use std::collections::{BTreeMap, BTreeSet};

use super::Answers;
use super::rounds::OPERATOR_NAME;
use crate::collect::query::{QueryResult, ResultSeries};
use crate::model::catalog::{MetricCatalog, labels as l};
use crate::model::graph::flink_taskmanager_id;
use crate::model::snapshot::{
    CheckpointConfig, CheckpointPoint, Checkpoints, JobRunning, LastCheckpoint, Missing, MissingWhy, OperatorRates,
    RocksDbSubtask, SourceReader, SourceSubtaskLag, SubtaskMetrics, TaskManagerMetrics, VertexAggregate,
    VertexTimeline, VertexWatermark, Watermark,
};
/// Operator-level records rates from round 4's answers, per (vertex, operator).
pub(super) fn assemble_operators(
    counter_in: &QueryResult,
    meter_in: &QueryResult,
    meter_out: &QueryResult,
) -> Vec<OperatorRates> {
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
pub(super) fn assemble_timeline(
    busy: &QueryResult,
    backpressured: &QueryResult,
    backpressure_scale: f64,
) -> Vec<VertexTimeline> {
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
pub(super) struct JobSignals {
    pub(super) checkpoints: Checkpoints,
    pub(super) rocksdb: Vec<RocksDbSubtask>,
    pub(super) source_lag: Vec<SourceSubtaskLag>,
    pub(super) source_readers: Vec<SourceReader>,
    pub(super) taskmanagers: Vec<TaskManagerMetrics>,
    pub(super) watermarks: Vec<VertexWatermark>,
    pub(super) samples_in_window: Option<u32>,
    /// How the source lag was read, when not from `pendingRecords`.
    pub(super) lag_note: Option<String>,
}

/// Checkpoints, RocksDB, source lag, TaskManagers (those running `subtasks`), watermarks
/// and the sample count, from round 3's answers; absent checkpoint metrics are noted.
pub(super) fn assemble_job_signals(
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
        [r("rocksdb_estimate_live_data_size"), r("rocksdb_total_sst_files_size"), r("rocksdb_estimate_num_keys")],
    );
    let (source_lag, lag_note) =
        assemble_source_lag(r("pending_records"), r("records_lag_max"), r("emit_event_time_lag"), cat);
    let source_readers = assemble_source_readers(&r);
    let job_tms: BTreeSet<&str> = subtasks.iter().filter_map(|s| s.tm_id.as_deref()).collect();
    let (taskmanagers, gc_from_collectors) =
        assemble_taskmanagers(r("gc_time"), r(GC_PER_COLLECTOR), r("cpu_load"), &job_tms);
    let watermarks = r("input_watermark")
        .iter()
        .filter(|s| !s.label(l::TASK_ID).is_empty())
        .map(|s| VertexWatermark {
            vertex_id: s.label(l::TASK_ID).into(),
            input_watermark: s.points.iter().map(|&(t, v)| (t, Watermark::from_reported(v))).collect(),
        })
        .collect();
    let samples_in_window =
        r("samples_in_window").first().and_then(|s| s.last_value()).filter(|v| v.is_finite()).map(|v| v as u32);
    if gc_from_collectors {
        // The GC times came from each collector's counter: theirs is the PromQL shown.
        if let Some(q) = answers.promql.get(GC_PER_COLLECTOR).cloned() {
            answers.promql.insert("gc_time".into(), q);
        }
    }
    // Gauges that say "none completed yet" are checkpoint metrics: nothing is missing.
    if checkpoints.series.iter().all(|p| p.last_checkpoint == LastCheckpoint::Unknown) {
        answers
            .missing
            .push(Missing { metric: cat.last_checkpoint_duration.clone(), why: MissingWhy::NoCheckpointMetrics });
    }
    JobSignals {
        checkpoints,
        rocksdb,
        source_lag,
        source_readers,
        taskmanagers,
        watermarks,
        samples_in_window,
        lag_note,
    }
}

/// Per-vertex aggregates from round 3's answers.
pub(super) fn assemble_aggregates<'a>(
    r: &impl Fn(&str) -> &'a QueryResult,
    backpressure_scale: f64,
) -> Vec<VertexAggregate> {
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

pub(super) fn subtask_key(s: &ResultSeries) -> Option<(String, u32)> {
    let task = s.label(l::TASK_ID);
    let index = s.label(l::SUBTASK_INDEX).parse().ok()?;
    (!task.is_empty()).then(|| (task.to_string(), index))
}

pub(super) fn finite(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

/// A ratio from busy, idle or backpressured time per second (ms/s ÷ 1000; an
/// `isBackPressured` share ÷ 1), clamped to 0–1; unknown when not finite. Values outside
/// 0–1 by more than measuring noise never get here: [`crate::collect::domain`] left them
/// out as unknown where they entered (−5 or 10⁹ ms/s is a broken reporter or recording, and
/// reasoning with it would name a wrong culprit).
pub(super) fn plausible_ratio(v: f64, scale: f64) -> Option<f64> {
    let r = v / scale;
    r.is_finite().then(|| r.clamp(0.0, 1.0) + 0.0)
}

/// Values per subtask; of several series for one subtask (task attempts), the highest
/// `task_attempt_num` wins.
pub(super) fn per_subtask(result: &QueryResult) -> BTreeMap<(String, u32), &ResultSeries> {
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

pub(super) fn assemble_subtasks(results: [&QueryResult; 9], backpressure_scale: f64) -> Vec<SubtaskMetrics> {
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

pub(super) fn assemble_checkpoints(result: &QueryResult, cat: &MetricCatalog) -> Vec<CheckpointPoint> {
    let mut points: BTreeMap<i64, CheckpointPoint> = BTreeMap::new();
    for series in result {
        let name = series.label("__name__");
        for &(t, v) in &series.points {
            let p = points.entry(t).or_insert_with(|| CheckpointPoint { t_ms: t, ..Default::default() });
            let v = finite(v);
            if name == cat.uptime {
                // 0 is "not running at the moment", not an age (UpTimeGauge).
                p.running = match v {
                    Some(u) if u > 0.0 => JobRunning::Running,
                    Some(_) => JobRunning::NotRunningNow,
                    None => JobRunning::Unknown,
                };
                p.uptime_ms = v.filter(|u| *u > 0.0);
            } else if name == cat.last_checkpoint_duration {
                // −1 is "no checkpoint completed yet" (CheckpointStatsTracker), never a duration.
                p.last_checkpoint = match v {
                    Some(d) if d >= 0.0 => LastCheckpoint::Completed,
                    Some(_) => LastCheckpoint::NoneCompletedYet,
                    None => LastCheckpoint::Unknown,
                };
                p.last_duration_ms = v.filter(|d| *d >= 0.0);
            } else if name == cat.completed_checkpoints {
                p.completed = v;
            } else if name == cat.failed_checkpoints {
                p.failed = v;
            } else if name == cat.in_progress_checkpoints {
                p.in_progress = v;
            } else if name == cat.last_checkpoint_completed_timestamp {
                p.last_completed_at_ms = v;
            } else if name == cat.last_checkpoint_size {
                // −1 is "none completed yet", like lastCheckpointDuration's: no size.
                p.size_bytes = v.filter(|b| *b >= 0.0);
            } else if name == cat.last_checkpoint_full_size {
                p.full_size_bytes = v.filter(|b| *b >= 0.0);
            }
        }
    }
    points.into_values().collect()
}

pub(super) fn assemble_rocksdb(
    stop: &QueryResult,
    delay: &QueryResult,
    cpend: &QueryResult,
    fpend: &QueryResult,
    bytes: &QueryResult,
    stall: &QueryResult,
    sizes: [&QueryResult; 3],
) -> Vec<RocksDbSubtask> {
    let [live, sst, keys_count] = sizes;
    let maps: Vec<BTreeMap<(String, u32), &ResultSeries>> =
        [stop, delay, cpend, fpend, bytes, stall, live, sst, keys_count].iter().map(|r| per_subtask(r)).collect();
    let keys: BTreeSet<(String, u32)> = maps.iter().flat_map(|m| m.keys().cloned()).collect();
    keys.into_iter()
        .map(|key| {
            let value = |i: usize| maps[i].get(&key).and_then(|s| s.last_value()).and_then(finite);
            let points = |i: usize| maps[i].get(&key).map(|s| s.points.clone()).unwrap_or_default();
            RocksDbSubtask {
                vertex_id: key.0.clone(),
                subtask: key.1,
                write_stopped_max: value(0),
                delayed_write_rate_max: value(1),
                compaction_pending_ratio: value(2),
                flush_pending_ratio: value(3),
                pending_compaction_bytes: points(4),
                stall_micros_per_s: value(5),
                live_data_bytes: points(6),
                sst_files_bytes: points(7),
                num_keys: points(8),
            }
        })
        .collect()
}

/// Source lag per subtask: `pendingRecords`, else the Kafka consumer's `records-lag-max`
/// (the subtask's worst partition: a lower bound of its lag), with a note saying so.
pub(super) fn assemble_source_lag(
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

/// The source readers' own metrics per subtask (round 3's [`super::rounds::source_reader_queries`]).
/// A value that is not a measurement is `None`: −1 (`UNDEFINED`: no record yet) and other
/// negative lags, a drift computed from a `Long.MIN_VALUE` watermark (beyond ±10¹⁵ ms).
pub(super) fn assemble_source_readers<'a>(r: &dyn Fn(&str) -> &'a QueryResult) -> Vec<SourceReader> {
    use super::rounds::{
        ASSIGNED_PARTITIONS, FETCH_EVENT_TIME_LAG, PARTITION_OFFSETS, SOURCE_IDLE_TIME, SOURCE_RECORDS,
        WATERMARK_ALIGNMENT_DRIFT,
    };
    let names = [SOURCE_IDLE_TIME, FETCH_EVENT_TIME_LAG, "emit_event_time_lag", WATERMARK_ALIGNMENT_DRIFT];
    let [idle, fetch, emit, drift] = names.map(|n| per_subtask(r(n)));
    let (assigned, offsets, records) =
        (per_subtask(r(ASSIGNED_PARTITIONS)), per_subtask(r(PARTITION_OFFSETS)), per_subtask(r(SOURCE_RECORDS)));
    let maps = [&idle, &fetch, &drift, &assigned, &offsets, &records];
    // Emit lag alone is already the source lag's: it makes no reader.
    let keys: BTreeSet<(String, u32)> = maps.iter().flat_map(|m| m.keys().cloned()).collect();
    let value = |m: &BTreeMap<(String, u32), &ResultSeries>, k: &(String, u32)| {
        m.get(k).and_then(|s| s.last_value()).and_then(finite)
    };
    let non_negative = |v: f64| (v >= 0.0).then_some(v);
    keys.into_iter()
        .map(|key| {
            let from_consumer = value(&assigned, &key).and_then(non_negative).map(|v| v as u32);
            let from_offsets = value(&offsets, &key).and_then(non_negative).map(|v| v as u32);
            SourceReader {
                idle_time_ms: value(&idle, &key).and_then(non_negative),
                fetch_lag_ms: value(&fetch, &key).and_then(non_negative),
                emit_lag_ms: value(&emit, &key).and_then(non_negative),
                alignment_drift_ms: value(&drift, &key).filter(|v| v.abs() < 1e15),
                splits: from_consumer.or(from_offsets),
                splits_from_offsets: from_consumer.is_none() && from_offsets.is_some(),
                records_per_s: value(&records, &key).map(|v| v.max(0.0)),
                vertex_id: key.0,
                subtask: key.1,
            }
        })
        .collect()
}

/// The per-collector GC counters (raw, over the window), for TaskManagers without
/// `All.Time`.
pub(super) const GC_PER_COLLECTOR: &str = "gc_time_per_collector";

/// The TaskManagers running the job's subtasks, with their GC time (`All.Time`'s rate, else
/// the sum of each collector's) and CPU load; true when a GC time came from the collectors.
pub(super) fn assemble_taskmanagers(
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
                ..TaskManagerMetrics::default()
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
            ..TaskManagerMetrics::default()
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
pub(super) fn gc_rate_per_taskmanager(series: &QueryResult) -> BTreeMap<String, f64> {
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

    fn gauge(name: &str, points: &[(i64, f64)]) -> ResultSeries {
        ResultSeries { labels: [("__name__".to_string(), name.to_string())].into(), points: points.to_vec() }
    }

    #[test]
    fn a_minus_one_checkpoint_duration_is_no_checkpoint_completed_yet_and_never_a_duration() {
        let cat = MetricCatalog::default();
        // −1 before the first checkpoint completes (at 20 s), then 1200 ms.
        let result = vec![gauge(&cat.last_checkpoint_duration, &[(0, -1.0), (10_000, -1.0), (20_000, 1200.0)])];
        let points = assemble_checkpoints(&result, &cat);
        let states: Vec<LastCheckpoint> = points.iter().map(|p| p.last_checkpoint).collect();
        assert_eq!(
            states,
            [LastCheckpoint::NoneCompletedYet, LastCheckpoint::NoneCompletedYet, LastCheckpoint::Completed]
        );
        let durations: Vec<Option<f64>> = points.iter().map(|p| p.last_duration_ms).collect();
        assert_eq!(durations, [None, None, Some(1200.0)]);
    }

    #[test]
    fn an_uptime_of_0_is_a_job_not_running_at_the_moment_and_never_an_age() {
        let cat = MetricCatalog::default();
        // Running 60 s, then 0 (restarting: UpTimeGauge's "not up at the moment"), then NaN.
        let result = vec![gauge(&cat.uptime, &[(0, 60_000.0), (10_000, 0.0), (20_000, f64::NAN)])];
        let points = assemble_checkpoints(&result, &cat);
        let states: Vec<JobRunning> = points.iter().map(|p| p.running).collect();
        assert_eq!(states, [JobRunning::Running, JobRunning::NotRunningNow, JobRunning::Unknown]);
        let uptimes: Vec<Option<f64>> = points.iter().map(|p| p.uptime_ms).collect();
        assert_eq!(uptimes, [Some(60_000.0), None, None]);
    }
}
