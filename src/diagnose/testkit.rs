//! Hand-built snapshots for the diagnosis' unit tests.
//!
//! Time is written relative to the verdict's `at`: [`t`]`(-60)` is one minute before it.
//! A fresh builder describes a job that started an hour before `at`, looked at over the 5
//! minutes before `at` (60 samples of 5 s), with no vertices and no metrics:
//!
//! ```ignore
//! let snap = SnapshotBuilder::new()
//!     .vertex("src", "Source: s", 2)
//!     .vertex("map", "map", 2)
//!     .edge("src", "map", "HASH")
//!     .subtask("map", 0, 0.95, 0.0, 0.05, 500.0) // busy, backpressured, idle, records in/s
//!     .build();
//! let report = on_vertex(&snap, "map", hot_key::run);
//! ```
//!
//! Declare vertices sources first: the declaration order is the graph's topological order.
//! Ratios and rates take `f64` or `None` (absent, as Flink's NaN busy of legacy sources).

use crate::config::DiagnosisConfig;
use crate::diagnose::signals::{JobSignals, VertexSignals};
use crate::diagnose::{Context, diagnose};
use crate::model::graph::{Edge, JobGraph, Vertex, sanitize_label_value};
use crate::model::snapshot::{
    CheckpointConfig, CheckpointPoint, Checkpoints, JobIdentity, PartitionLag, Point, RocksDbSubtask, Snapshot,
    SourceReader, SourceSubtaskLag, SubtaskMetrics, TaskManagerMetrics, TopicRetention, VertexAggregate,
    VertexWatermark, Watermark, Window, WindowBound,
};
use crate::model::verdict::{Evidence, Verdict};

/// The time every hand-built verdict is about: 2027-01-15T08:00:00Z, Unix ms.
pub const AT_MS: i64 = 1_800_000_000_000;
/// The default window, s.
pub const WINDOW_S: i64 = 300;
/// The job name of hand-built snapshots.
pub const JOB: &str = "test-job";

/// An exception history entry: `exception` thrown by task `task` (`validate (2/2)`) on
/// `tm`, `offset_s` after `at`.
pub fn failed(task: &str, exception: &str, message: &str, offset_s: i64) -> crate::model::failover::ExceptionEntry {
    crate::model::failover::ExceptionEntry {
        exception: exception.into(),
        message: message.into(),
        frame: Some("com.acme.Job$Validate.map(Job.java:42)".into()),
        root_cause: None,
        timestamp_ms: t(offset_s),
        task_name: Some(task.into()),
        endpoint: Some("10.0.0.7:6121".into()),
        task_manager_id: Some("tm-1".into()),
        concurrent: 0,
    }
}

/// Source: txn (red: 90 % backpressured) → HASH → vertex `score`, named `score_name` (2
/// subtasks, busy 0.95, 1000 records/s each: the culprit) → FORWARD → Sink: out.
pub fn keyed_score_job(score_name: &str) -> SnapshotBuilder {
    SnapshotBuilder::new()
        .vertex("src", "Source: txn", 2)
        .vertex("score", score_name, 2)
        .vertex("sink", "Sink: out", 2)
        .edge("src", "score", "HASH")
        .edge("score", "sink", "FORWARD")
        .all_subtasks("src", 0.0, 0.9, 0.1, None)
        .all_subtasks("score", 0.95, 0.0, 0.05, 1000.0)
        .all_subtasks("sink", 0.1, 0.0, 0.9, 1000.0)
}

/// `offset_s` seconds after `at` (negative: before), Unix ms.
pub fn t(offset_s: i64) -> i64 {
    AT_MS + offset_s * 1000
}

/// A straight series from `from_s` to `to_s` (offsets from `at`, inclusive) every `every_s`
/// seconds: `v0` at `from_s`, rising by `per_s` per second.
pub fn line(from_s: i64, to_s: i64, every_s: i64, v0: f64, per_s: f64) -> Vec<Point> {
    (from_s..=to_s).step_by(every_s as usize).map(|s| (t(s), v0 + per_s * (s - from_s) as f64)).collect()
}

/// RocksDB metrics of one subtask with nothing reported; fill in what a test needs with
/// `RocksDbSubtask { write_stopped_max: Some(1.0), ..rocks("op", 0) }`.
pub fn rocks(vertex: &str, subtask: u32) -> RocksDbSubtask {
    RocksDbSubtask {
        vertex_id: vertex.into(),
        subtask,
        write_stopped_max: None,
        delayed_write_rate_max: None,
        compaction_pending_ratio: None,
        flush_pending_ratio: None,
        pending_compaction_bytes: Vec::new(),
        stall_micros_per_s: None,
        live_data_bytes: Vec::new(),
        sst_files_bytes: Vec::new(),
        num_keys: Vec::new(),
    }
}

/// A Kafka partition of consumer group [`JOB`] (KMinion) with no series; fill in the
/// series a test needs with struct update syntax.
pub fn partition(topic: &str, partition: &str) -> PartitionLag {
    PartitionLag {
        topic: topic.into(),
        partition: partition.into(),
        consumer_group: JOB.into(),
        exporter: "kminion".into(),
        lag_records: Vec::new(),
        lag_seconds: Vec::new(),
        consumer_offset: Vec::new(),
        log_start_offset: Vec::new(),
        log_end_offset: Vec::new(),
    }
}

/// A source reader of `vertex` reading `records_per_s`, nothing else reported; fill in
/// the rest with struct update syntax.
pub fn reader(vertex: &str, subtask: u32, records_per_s: impl Into<Option<f64>>) -> SourceReader {
    SourceReader { vertex_id: vertex.into(), subtask, records_per_s: records_per_s.into(), ..Default::default() }
}

/// A job-level checkpoint sample at `offset_s` with a long uptime and nothing else.
pub fn cp(offset_s: i64) -> CheckpointPoint {
    CheckpointPoint { t_ms: t(offset_s), uptime_ms: Some(3_600_000.0 + offset_s as f64 * 1000.0), ..Default::default() }
}

/// Builds a [`Snapshot`] by hand.
pub struct SnapshotBuilder {
    snapshot: Snapshot,
    vertices: Vec<Vertex>,
    edges: Vec<Edge>,
    with_graph: bool,
    /// Vertices whose per-subtask detail is dropped, keeping only their aggregate.
    aggregate_only: Vec<String>,
}

impl Default for SnapshotBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl SnapshotBuilder {
    pub fn new() -> Self {
        SnapshotBuilder {
            snapshot: Snapshot {
                job: JobIdentity {
                    name: JOB.into(),
                    id: "7e57000000000000000000000000000a".into(),
                    deployment: Default::default(),
                },
                at_ms: AT_MS,
                window: Window {
                    start_ms: t(-WINDOW_S),
                    end_ms: AT_MS,
                    requested_ms: WINDOW_S * 1000,
                    bound: WindowBound::Requested,
                    settled_ms: None,
                },
                job_start_ms: Some(t(-3600)),
                graph: None,
                plan_mismatch: None,
                vertex_aggregates: Vec::new(),
                subtasks: Vec::new(),
                checkpoints: Checkpoints::default(),
                rocksdb: Vec::new(),
                source_lag: Vec::new(),
                source_readers: Vec::new(),
                partitions: Vec::new(),
                retention: Vec::new(),
                job_topics: Vec::new(),
                taskmanagers: Vec::new(),
                pods: None,
                autoscaler: None,
                watermarks: Vec::new(),
                timeline: Vec::new(),
                operators: Vec::new(),
                step_ms: 5000,
                samples_in_window: Some(60),
                backpressure_measure: Default::default(),
                queries: Default::default(),
                missing: Vec::new(),
                left_out: Vec::new(),
                notes: Vec::new(),
                changes: Vec::new(),
                failover: None,
            },
            vertices: Vec::new(),
            edges: Vec::new(),
            with_graph: true,
            aggregate_only: Vec::new(),
        }
    }

    /// A job vertex; `name` chains operators with ` -> ` (`"enrich -> score"`).
    pub fn vertex(mut self, id: &str, name: &str, parallelism: u32) -> Self {
        self.vertices.push(Vertex {
            id: id.into(),
            name: name.into(),
            operators: name.split(" -> ").map(str::to_string).collect(),
            parallelism,
        });
        self
    }

    /// An edge `from → to` with a ship strategy (`FORWARD`, `HASH`, `REBALANCE`, …).
    pub fn edge(mut self, from: &str, to: &str, ship_strategy: &str) -> Self {
        for end in [from, to] {
            assert!(self.vertices.iter().any(|v| v.id == end), "edge end {end} is not a declared vertex");
        }
        self.edges.push(Edge { from: from.into(), to: to.into(), ship_strategy: ship_strategy.into() });
        self
    }

    /// One subtask's averages over the window: busy, backpressured and idle ratios, records
    /// in per second. `None` for what the metrics lack.
    pub fn subtask(
        mut self,
        vertex: &str,
        index: u32,
        busy: impl Into<Option<f64>>,
        backpressured: impl Into<Option<f64>>,
        idle: impl Into<Option<f64>>,
        records_in_per_s: impl Into<Option<f64>>,
    ) -> Self {
        let v = self.vertices.iter().find(|v| v.id == vertex).unwrap_or_else(|| panic!("vertex {vertex} not declared"));
        assert!(index < v.parallelism, "subtask {index} of {vertex} beyond its parallelism {}", v.parallelism);
        let task_name = sanitize_label_value(&v.name);
        self.snapshot.subtasks.retain(|s| !(s.vertex_id == vertex && s.subtask == index));
        self.snapshot.subtasks.push(SubtaskMetrics {
            vertex_id: vertex.into(),
            subtask: index,
            task_name,
            tm_id: None,
            host: None,
            busy_ratio: busy.into(),
            backpressured_ratio: backpressured.into(),
            idle_ratio: idle.into(),
            records_in_per_s: records_in_per_s.into(),
            records_out_per_s: None,
            checkpoint_start_delay_ms: None,
            checkpoint_alignment_ms: None,
        });
        self
    }

    /// Every subtask of `vertex` with the same averages.
    pub fn all_subtasks(
        mut self,
        vertex: &str,
        busy: impl Into<Option<f64>>,
        backpressured: impl Into<Option<f64>>,
        idle: impl Into<Option<f64>>,
        records_in_per_s: impl Into<Option<f64>>,
    ) -> Self {
        let p = self.vertices.iter().find(|v| v.id == vertex).map(|v| v.parallelism).unwrap_or(0);
        let (b, bp, i, r) = (busy.into(), backpressured.into(), idle.into(), records_in_per_s.into());
        for index in 0..p {
            self = self.subtask(vertex, index, b, bp, i, r);
        }
        self
    }

    fn subtask_mut(&mut self, vertex: &str, index: u32) -> &mut SubtaskMetrics {
        self.snapshot
            .subtasks
            .iter_mut()
            .find(|s| s.vertex_id == vertex && s.subtask == index)
            .unwrap_or_else(|| panic!("declare subtask {vertex}[{index}] before setting more of it"))
    }

    /// Records out per second of a subtask (a source's throughput).
    pub fn records_out(mut self, vertex: &str, index: u32, per_s: f64) -> Self {
        self.subtask_mut(vertex, index).records_out_per_s = Some(per_s);
        self
    }

    /// The TaskManager (`tm_id`, `host`) running a subtask.
    pub fn on_taskmanager(mut self, vertex: &str, index: u32, tm_id: &str, host: &str) -> Self {
        let s = self.subtask_mut(vertex, index);
        s.tm_id = Some(tm_id.into());
        s.host = Some(host.into());
        self
    }

    /// Mean `checkpointStartDelayNanos` of a subtask, in ms.
    pub fn start_delay_ms(mut self, vertex: &str, index: u32, ms: f64) -> Self {
        self.subtask_mut(vertex, index).checkpoint_start_delay_ms = Some(ms);
        self
    }

    /// A TaskManager's GC time (ms/s) and CPU load (ratio).
    pub fn taskmanager(
        mut self,
        tm_id: &str,
        gc_ms_per_s: impl Into<Option<f64>>,
        cpu_load: impl Into<Option<f64>>,
    ) -> Self {
        self.snapshot.taskmanagers.push(TaskManagerMetrics {
            tm_id: tm_id.into(),
            host: None,
            gc_ms_per_s: gc_ms_per_s.into(),
            cpu_load: cpu_load.into(),
            ..TaskManagerMetrics::default()
        });
        self
    }

    /// A TaskManager's heap: mean used and max, bytes, and its old-generation GC, ms/s
    /// (the TaskManager added by [`SnapshotBuilder::taskmanager`] first).
    pub fn heap(
        mut self,
        tm_id: &str,
        used_bytes: f64,
        max_bytes: f64,
        old_gen_gc_ms_per_s: impl Into<Option<f64>>,
    ) -> Self {
        let tm = self.snapshot.taskmanagers.iter_mut().find(|t| t.tm_id == tm_id).expect("add the TaskManager first");
        tm.heap_used_bytes = Some(used_bytes);
        tm.heap_max_bytes = Some(max_bytes);
        tm.old_gen_gc_ms_per_s = old_gen_gc_ms_per_s.into();
        self
    }

    /// A TaskManager pod's container as kube-state-metrics and cAdvisor report it; the
    /// snapshot then holds the exporters' answers (an empty list without this call means
    /// they were asked and found nothing: see [`SnapshotBuilder::pods_asked`]).
    pub fn pod(mut self, pod: crate::model::resources::PodResources) -> Self {
        self.snapshot.pods.get_or_insert_with(Vec::new).push(pod);
        self
    }

    /// The exporters were asked for the job's pods (and answered with what `pod` adds).
    pub fn pods_asked(mut self) -> Self {
        self.snapshot.pods.get_or_insert_with(Vec::new);
        self
    }

    /// The job's restarts and exception history (see [`failed`]).
    pub fn failover(mut self, f: crate::model::failover::Failover) -> Self {
        self.snapshot.failover = Some(f);
        self
    }

    /// RocksDB metrics of one subtask (see [`rocks`]).
    pub fn rocksdb(mut self, r: RocksDbSubtask) -> Self {
        self.snapshot.rocksdb.push(r);
        self
    }

    /// A job-level checkpoint sample (see [`cp`]); add them oldest first.
    pub fn checkpoint_point(mut self, p: CheckpointPoint) -> Self {
        self.snapshot.checkpoints.series.push(p);
        self
    }

    /// Flink REST `/jobs/:id/checkpoints/config`.
    pub fn checkpoint_config(
        mut self,
        interval_s: i64,
        timeout_s: i64,
        unaligned: bool,
        backend: Option<&str>,
    ) -> Self {
        self.snapshot.checkpoints.config = Some(CheckpointConfig {
            interval_ms: interval_s * 1000,
            timeout_ms: timeout_s * 1000,
            unaligned,
            state_backend: backend.map(str::to_string),
        });
        self
    }

    /// `pendingRecords` of a source subtask over time.
    pub fn pending_records(mut self, vertex: &str, index: u32, points: Vec<Point>) -> Self {
        self.snapshot.source_lag.push(SourceSubtaskLag {
            vertex_id: vertex.into(),
            subtask: index,
            pending_records: points,
            emit_event_time_lag_ms: None,
        });
        self
    }

    /// A source reader's own metrics (see [`reader`]); replaces one of the same subtask.
    pub fn source_reader(mut self, r: SourceReader) -> Self {
        self.snapshot.source_readers.retain(|x| !(x.vertex_id == r.vertex_id && x.subtask == r.subtask));
        self.snapshot.source_readers.push(r);
        self
    }

    /// A Kafka partition's lag (see [`partition`]).
    pub fn partition(mut self, p: PartitionLag) -> Self {
        self.snapshot.partitions.push(p);
        self
    }

    /// `retention.ms` of a topic; `None` for unlimited.
    pub fn retention(mut self, topic: &str, retention_s: Option<i64>) -> Self {
        self.snapshot.retention.push(TopicRetention::by_time(topic, retention_s.map(|s| s * 1000), "config"));
        self
    }

    /// A topic's whole retention settings.
    pub fn topic_retention(mut self, r: TopicRetention) -> Self {
        self.snapshot.retention.push(r);
        self
    }

    /// The topics the job reads, as configured.
    pub fn job_topics(mut self, topics: &[&str]) -> Self {
        self.snapshot.job_topics = topics.iter().map(|s| s.to_string()).collect();
        self
    }

    /// Min input watermark of a vertex over time (event time, Unix ms).
    pub fn watermark(mut self, vertex: &str, points: Vec<Point>) -> Self {
        // Read as the collector reads them: Long.MIN_VALUE is "no watermark", Long.MAX_VALUE
        // "input finished".
        let input_watermark = points.into_iter().map(|(t, v)| (t, Watermark::from_reported(v))).collect();
        self.snapshot.watermarks.push(VertexWatermark { vertex_id: vertex.into(), input_watermark });
        self
    }

    /// A vertex's max busy and backpressured ratios over subtasks at each step, for the
    /// time-resolved reading: `samples` are `(offset_s from at, busy, backpressured)`.
    pub fn timeline(mut self, vertex: &str, samples: &[(i64, f64, f64)]) -> Self {
        self.snapshot.timeline.push(crate::model::snapshot::VertexTimeline {
            vertex_id: vertex.into(),
            busy_max: samples.iter().map(|(s, b, _)| (t(*s), *b)).collect(),
            backpressured_max: samples.iter().map(|(s, _, p)| (t(*s), *p)).collect(),
        });
        self
    }

    /// Records in and out per second of one chained operator of a vertex, summed over its
    /// subtasks.
    pub fn operator_rates(mut self, vertex: &str, operator: &str, records_in: f64, records_out: f64) -> Self {
        self.snapshot.operators.push(crate::model::snapshot::OperatorRates {
            vertex_id: vertex.into(),
            operator_name: sanitize_label_value(operator),
            records_in_per_s: Some(records_in),
            records_out_per_s: Some(records_out),
        });
        self
    }

    /// Samples per task series in the window (`Some(1)`: a single scrape).
    pub fn samples_in_window(mut self, n: Option<u32>) -> Self {
        self.snapshot.samples_in_window = n;
        self
    }

    /// The job started `offset_s` from `at` (negative).
    pub fn job_started(mut self, offset_s: i64) -> Self {
        self.snapshot.job_start_ms = Some(t(offset_s));
        self
    }

    /// The window starts `offset_s` from `at` (negative).
    pub fn window_from(mut self, offset_s: i64) -> Self {
        self.snapshot.window.start_ms = t(offset_s);
        self.snapshot.window.bound = WindowBound::StartupExcluded;
        self
    }

    /// The PromQL behind a signal (`busy`, `backpressured`, …), as a live collector records it.
    pub fn query(mut self, signal: &str, promql: &str) -> Self {
        self.snapshot.queries.insert(signal.into(), promql.into());
        self
    }

    /// A metric the collector looked for and did not find.
    pub fn missing(mut self, metric: &str, detail: &str) -> Self {
        self.snapshot.missing.push(crate::model::snapshot::Missing {
            metric: metric.into(),
            why: crate::model::snapshot::MissingWhy::Said { detail: detail.into() },
        });
        self
    }

    /// Keeps only the aggregates of these vertices, as the collector does for vertices the
    /// diagnosis does not look into (the red ones far from the culprit, idle ones).
    pub fn aggregate_only(mut self, vertices: &[&str]) -> Self {
        self.aggregate_only.extend(vertices.iter().map(|v| v.to_string()));
        self
    }

    /// Graph-free mode: no job plan; vertices come from the metrics alone.
    pub fn without_graph(mut self) -> Self {
        self.with_graph = false;
        self
    }

    /// The snapshot: the graph (unless [`Self::without_graph`]), every vertex's aggregates
    /// computed from the subtasks given, and the per-subtask detail of all vertices but the
    /// [`Self::aggregate_only`] ones.
    pub fn build(mut self) -> Snapshot {
        self.snapshot.vertex_aggregates =
            self.vertices.iter().filter_map(|v| aggregate(&v.id, &self.snapshot.subtasks)).collect();
        let dropped = &self.aggregate_only;
        self.snapshot.subtasks.retain(|s| !dropped.contains(&s.vertex_id));
        if self.with_graph {
            self.snapshot.graph = Some(JobGraph {
                job_id: Some(self.snapshot.job.id.clone()),
                job_name: Some(JOB.into()),
                vertices: self.vertices,
                edges: self.edges,
            });
        }
        self.snapshot
    }
}

/// A vertex's aggregates over the subtasks given, as the collector computes them: `None`
/// fields where no subtask reports the metric; rates summed only when every subtask has one.
fn aggregate(vertex: &str, subtasks: &[SubtaskMetrics]) -> Option<VertexAggregate> {
    let subs: Vec<&SubtaskMetrics> = subtasks.iter().filter(|s| s.vertex_id == vertex).collect();
    let first = subs.first()?;
    let values = |f: fn(&SubtaskMetrics) -> Option<f64>| -> Vec<f64> { subs.iter().filter_map(|s| f(s)).collect() };
    let max = |v: Vec<f64>| v.into_iter().reduce(f64::max);
    let min = |v: Vec<f64>| v.into_iter().reduce(f64::min);
    let mean = |v: Vec<f64>| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        (n > 0).then(|| if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
    };
    let sum_all =
        |f: fn(&SubtaskMetrics) -> Option<f64>| -> Option<f64> { subs.iter().map(|s| f(s)).sum::<Option<f64>>() };
    Some(VertexAggregate {
        vertex_id: vertex.into(),
        task_name: first.task_name.clone(),
        subtask_count: subs.len() as u32,
        busy_max: max(values(|s| s.busy_ratio)),
        busy_min: min(values(|s| s.busy_ratio)),
        busy_mean: mean(values(|s| s.busy_ratio)),
        busy_median: median(values(|s| s.busy_ratio)),
        backpressured_max: max(values(|s| s.backpressured_ratio)),
        idle_mean: mean(values(|s| s.idle_ratio)),
        records_in_per_s: sum_all(|s| s.records_in_per_s),
        records_out_per_s: sum_all(|s| s.records_out_per_s),
        checkpoint_start_delay_ms_max: max(values(|s| s.checkpoint_start_delay_ms)),
        in_pool_usage_max: None,
        out_pool_usage_max: None,
    })
}

/// Runs `f` on the [`Context`] of `snap` with the default configuration.
pub fn with_context<R>(snap: &Snapshot, f: impl FnOnce(&Context<'_>) -> R) -> R {
    with_context_cfg(snap, &DiagnosisConfig::default(), f)
}

/// Runs `f` on the [`Context`] of `snap` with `cfg`.
pub fn with_context_cfg<R>(snap: &Snapshot, cfg: &DiagnosisConfig, f: impl FnOnce(&Context<'_>) -> R) -> R {
    let signals = JobSignals::derive(snap, cfg);
    let ctx = Context::new(snap, &signals, cfg);
    f(&ctx)
}

/// Runs a step that examines one vertex (`sink::run`, `hot_key::run`, …) on vertex `id`,
/// with the default configuration.
pub fn on_vertex<R>(snap: &Snapshot, id: &str, f: impl FnOnce(&Context<'_>, &VertexSignals) -> R) -> R {
    with_context(snap, |ctx| {
        let v = ctx.signals.vertex(id).unwrap_or_else(|| panic!("no vertex {id} in the signals"));
        f(ctx, v)
    })
}

/// The whole diagnosis with the default configuration.
pub fn verdict(snap: &Snapshot) -> Verdict {
    crate::render::words::verdict(&diagnose(snap, &DiagnosisConfig::default()))
}

/// Asserts `|actual − expected| ≤ tol`.
#[track_caller]
pub fn assert_close(actual: f64, expected: f64, tol: f64) {
    assert!((actual - expected).abs() <= tol, "expected {expected} ± {tol}, got {actual}");
}

/// The evidence with this metric; panics listing what there is.
#[track_caller]
pub fn evidence<'a>(evidence: &'a [Evidence], metric: &str) -> &'a Evidence {
    evidence.iter().find(|e| e.metric == metric).unwrap_or_else(|| {
        panic!("no evidence {metric:?}; there is: {:?}", evidence.iter().map(|e| &e.metric).collect::<Vec<_>>())
    })
}
