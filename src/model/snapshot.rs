//! The snapshot: everything the diagnosis sees about one job, as plain values.
//!
//! Raw Flink metric names stay in [`crate::model::catalog`]; a snapshot holds measured
//! quantities with units in their names or docs. Absent data is `None` or an empty list,
//! and every metric that was looked for and not found is listed in
//! [`Snapshot::missing`]: missing data is an outcome, not an error.
//!
//! Pure data, serializable, built by [`crate::collect::collector`] from a recording or a
//! live backend.

use serde::{Deserialize, Serialize};

use crate::model::graph::JobGraph;

/// A point of a series: Unix ms and a value.
pub type Point = (i64, f64);

/// The job the snapshot is about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobIdentity {
    /// Name as Flink shows it (from the plan) or, without a plan, as the reporter wrote it.
    pub name: String,
    /// Flink job id (32 hex digits).
    pub id: String,
    /// The labels that tell this job's deployment from others reporting the same job id
    /// (e.g. `namespace = flink-us`), as its series carry them; empty when the job id is
    /// one deployment's.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub deployment: std::collections::BTreeMap<String, String>,
}

/// Why the diagnosis window has the bounds it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowBound {
    /// The requested window, whole.
    Requested,
    /// Starts after the job's first seconds of uptime, which are not representative.
    StartupExcluded,
    /// Starts where the data starts (a recording that begins after the window would).
    DataStart,
    /// Starts where the current backpressure episode (or calm) began inside the requested
    /// window, so a regime change does not dilute the averages.
    EpisodeStart,
    /// Starts after a restart or rescale of the job (`numRestarts`, `numRescales`) plus
    /// the ~60 s Flink's rates and time ratios average over.
    RestartExcluded,
}

/// The period averages are taken over: `(start_ms, end_ms]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    pub start_ms: i64,
    pub end_ms: i64,
    /// The window that was asked for, in ms.
    pub requested_ms: i64,
    pub bound: WindowBound,
    /// When the job's latest start, restart or rescale stops weighing on Flink's ~60 s
    /// averages (that time plus `diagnosis.startup_exclusion`), Unix ms; None when unknown.
    /// A window ending before it holds nothing but warm-up.
    #[serde(default)]
    pub settled_ms: Option<i64>,
}

impl Window {
    /// Length in ms.
    pub fn len_ms(&self) -> i64 {
        self.end_ms - self.start_ms
    }
}

/// How the snapshot's backpressured ratios were measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BackpressureMeasure {
    /// `backPressuredTimeMsPerSecond` / 1000 (Flink ≥ 1.13): time backpressured.
    #[default]
    TimeMsPerSecond,
    /// The share of samples with `isBackPressured` = 1 (Flink ≤ 1.12, whose reporter has
    /// neither busy nor backpressured time): backpressure sampled once per scrape, busy
    /// time unknown.
    IsBackPressuredShare,
}

/// One subtask's task metrics averaged over the window.
///
/// Ratios are the Flink `…TimeMsPerSecond` gauges divided by 1000, as measured (not
/// clamped; the diagnosis clamps). `None`: the metric was absent or NaN.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubtaskMetrics {
    /// Vertex id (`task_id`).
    pub vertex_id: String,
    /// `subtask_index`.
    pub subtask: u32,
    /// `task_name` as the reporter wrote it (sanitized).
    pub task_name: String,
    /// `tm_id` label: the TaskManager running this subtask.
    pub tm_id: Option<String>,
    /// `host` label.
    pub host: Option<String>,
    /// `busyTimeMsPerSecond` / 1000 (ratio).
    pub busy_ratio: Option<f64>,
    /// `backPressuredTimeMsPerSecond` / 1000, or the share of samples with
    /// `isBackPressured` = 1 ([`Snapshot::backpressure_measure`]), ratio.
    pub backpressured_ratio: Option<f64>,
    /// `idleTimeMsPerSecond` / 1000 (ratio).
    pub idle_ratio: Option<f64>,
    /// Records in per second over the window (`rate(numRecordsIn)`, else the mean of
    /// `numRecordsInPerSecond`), records/s.
    pub records_in_per_s: Option<f64>,
    /// Records out per second over the window, records/s.
    pub records_out_per_s: Option<f64>,
    /// Mean `checkpointStartDelayNanos` over the window, in ms.
    pub checkpoint_start_delay_ms: Option<f64>,
    /// Mean `checkpointAlignmentTime` over the window, in ms.
    pub checkpoint_alignment_ms: Option<f64>,
}

/// One vertex's task metrics aggregated over its subtasks, for every vertex of the job.
///
/// Ratios are the Flink `…TimeMsPerSecond` gauges divided by 1000, averaged over the window
/// per subtask, then aggregated across subtasks. `None`: absent, or NaN for every subtask
/// (a legacy source's busy time: its subtasks are then in [`Snapshot::subtasks`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VertexAggregate {
    /// Vertex id (`task_id`).
    pub vertex_id: String,
    /// `task_name` as the reporter wrote it.
    pub task_name: String,
    /// Subtasks reporting.
    pub subtask_count: u32,
    pub busy_max: Option<f64>,
    pub busy_min: Option<f64>,
    pub busy_mean: Option<f64>,
    pub busy_median: Option<f64>,
    pub backpressured_max: Option<f64>,
    pub idle_mean: Option<f64>,
    /// Records in per second, summed over subtasks, records/s.
    pub records_in_per_s: Option<f64>,
    /// Records out per second, summed over subtasks, records/s.
    pub records_out_per_s: Option<f64>,
    /// Max over subtasks of the mean `checkpointStartDelayNanos`, in ms.
    pub checkpoint_start_delay_ms_max: Option<f64>,
    /// Max over subtasks of the mean input buffer pool usage (`inPoolUsage`), ratio;
    /// collected only when the reporter predates Flink 1.13.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_pool_usage_max: Option<f64>,
    /// Max over subtasks of the mean output buffer pool usage (`outPoolUsage`), ratio;
    /// collected only when the reporter predates Flink 1.13.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out_pool_usage_max: Option<f64>,
}

/// Job-level checkpoint gauges at one evaluation time (`flink_jobmanager_job_*`).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct CheckpointPoint {
    /// Unix ms of the evaluation.
    pub t_ms: i64,
    /// `uptime`, ms.
    pub uptime_ms: Option<f64>,
    /// `lastCheckpointDuration`, ms.
    pub last_duration_ms: Option<f64>,
    /// `numberOfCompletedCheckpoints` (count since job start).
    pub completed: Option<f64>,
    /// `numberOfFailedCheckpoints` (count since job start).
    pub failed: Option<f64>,
    /// `numberOfInProgressCheckpoints`.
    pub in_progress: Option<f64>,
    /// `lastCheckpointCompletedTimestamp`, Unix ms (absent or ≤ 0 before the first).
    pub last_completed_at_ms: Option<f64>,
    /// What `lastCheckpointDuration` says of the last checkpoint: its −1 is "none
    /// completed yet", never a duration (`last_duration_ms` is then None).
    #[serde(default)]
    pub last_checkpoint: LastCheckpoint,
    /// `lastCheckpointSize`, bytes: what the last checkpoint checkpointed (the increment,
    /// with incremental checkpoints or changelog). Its −1 ("none completed yet") is None.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<f64>,
    /// `lastCheckpointFullSize` (Flink 1.15+), bytes: the full state size of the last
    /// checkpoint. Its −1 ("none completed yet") is None.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_size_bytes: Option<f64>,
    /// What `uptime` says of the job: its 0 is "not running at the moment", never an age
    /// (`uptime_ms` is then None).
    #[serde(default)]
    pub running: JobRunning,
}

/// The last checkpoint as Flink's `lastCheckpoint*` gauges tell it. Flink's
/// `CheckpointStatsTracker` (`flink-runtime`, `checkpoint/CheckpointStatsTracker.java`)
/// answers −1 from `lastCheckpointDuration`, `lastCheckpointSize`, `lastCheckpointFullSize`,
/// `lastCheckpointProcessedData` and `lastCheckpointPersistedData` while no checkpoint has
/// completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LastCheckpoint {
    /// Not reported.
    #[default]
    Unknown,
    /// −1: no checkpoint has completed yet (since the job, or its JobManager, started).
    NoneCompletedYet,
    /// A checkpoint completed; its duration is `last_duration_ms`.
    Completed,
}

/// The job as Flink's `uptime` gauge tells it (`UpTimeGauge`, `flink-runtime`,
/// `executiongraph/metrics/UpTimeGauge.java`): the time since it switched to RUNNING
/// while it runs, 0 while it is "not yet running or not up at the moment" (created,
/// restarting, failing over), −1 once it is no longer running (read as unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobRunning {
    /// Not reported.
    #[default]
    Unknown,
    /// Running, for `uptime_ms`.
    Running,
    /// 0: not running at the moment (created, restarting, failing over).
    NotRunningNow,
}

/// Checkpoint configuration from Flink REST `GET /jobs/:id/checkpoints/config`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointConfig {
    /// `interval`, ms.
    pub interval_ms: i64,
    /// `timeout`, ms.
    pub timeout_ms: i64,
    /// `unaligned_checkpoints`.
    pub unaligned: bool,
    /// `state_backend` (e.g. `HashMapStateBackend`, `EmbeddedRocksDBStateBackend`).
    pub state_backend: Option<String>,
}

impl CheckpointConfig {
    /// Parses the REST answer; `None` when it lacks `interval` or `timeout`.
    pub fn from_rest_json(text: &str) -> Option<CheckpointConfig> {
        let v: serde_json::Value = serde_json::from_str(text).ok()?;
        Some(CheckpointConfig {
            interval_ms: v.get("interval")?.as_i64()?,
            timeout_ms: v.get("timeout")?.as_i64()?,
            unaligned: v.get("unaligned_checkpoints").and_then(|u| u.as_bool()).unwrap_or(false),
            state_backend: v.get("state_backend").and_then(|b| b.as_str()).map(str::to_string),
        })
    }
}

/// Checkpoint history of the job over the trend lookback.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Checkpoints {
    /// Evaluated every step over the trend lookback, oldest first.
    pub series: Vec<CheckpointPoint>,
    /// From Flink REST, when available.
    pub config: Option<CheckpointConfig>,
}

/// RocksDB native metrics of one subtask of a vertex, over the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RocksDbSubtask {
    pub vertex_id: String,
    pub subtask: u32,
    /// Max of `is_write_stopped` over the window and column families (0 or 1).
    pub write_stopped_max: Option<f64>,
    /// Max of `actual_delayed_write_rate` over the window and column families, bytes/s.
    pub delayed_write_rate_max: Option<f64>,
    /// Share of samples with `compaction_pending` = 1, for the most affected column family
    /// (ratio).
    pub compaction_pending_ratio: Option<f64>,
    /// Share of samples with `mem_table_flush_pending` = 1, most affected column family
    /// (ratio).
    pub flush_pending_ratio: Option<f64>,
    /// `estimate_pending_compaction_bytes` summed over column families, per step over the
    /// window, bytes.
    pub pending_compaction_bytes: Vec<Point>,
    /// `rate(stall_micros)`: microseconds of write stall per second of wall time.
    pub stall_micros_per_s: Option<f64>,
    /// `estimate-live-data-size` summed over column families, per step over the trend
    /// lookback, bytes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub live_data_bytes: Vec<Point>,
    /// `total-sst-files-size` summed over column families, per step over the trend
    /// lookback, bytes (read where the live data size is not reported).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sst_files_bytes: Vec<Point>,
    /// `estimate-num-keys` summed over column families, per step over the trend lookback,
    /// keys.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub num_keys: Vec<Point>,
}

/// Source lag as Flink's own source metrics report it, per source subtask.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceSubtaskLag {
    pub vertex_id: String,
    pub subtask: u32,
    /// `pendingRecords` (FLIP-33) per step over the trend lookback, records.
    pub pending_records: Vec<Point>,
    /// Mean `currentEmitEventTimeLag` over the window, ms.
    pub emit_event_time_lag_ms: Option<f64>,
}

/// One source reader (a source subtask) as its FLIP-27 / FLIP-33 reader metrics and the
/// Kafka source's per-partition metrics report it. Every field is `None` when not reported
/// (never 0); −1 (`UNDEFINED`, no record yet) reads as `None`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SourceReader {
    pub vertex_id: String,
    pub subtask: u32,
    /// `sourceIdleTime` at the window's end: how long the reader has emitted no record, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_time_ms: Option<f64>,
    /// Mean `currentFetchEventTimeLag` over the window (fetch time − event time), ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetch_lag_ms: Option<f64>,
    /// Mean `currentEmitEventTimeLag` over the window (emit time − event time), ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emit_lag_ms: Option<f64>,
    /// Mean `watermarkAlignmentDrift` over the window (FLIP-182: how far the reader's
    /// watermark is ahead of its alignment group's), ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alignment_drift_ms: Option<f64>,
    /// Splits the reader holds: the Kafka consumer's `assigned-partitions`, else the number
    /// of partitions it reports `currentOffset` for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub splits: Option<u32>,
    /// True when `splits` is a count of `currentOffset` series: a reader without one reports
    /// none, so a reader of the same source absent from it holds no split.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub splits_from_offsets: bool,
    /// Records the reader's task emits per second over the window (`rate(numRecordsOut)`),
    /// records/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records_per_s: Option<f64>,
}

/// The lag of one consumer group on one topic partition, from a Kafka exporter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartitionLag {
    pub topic: String,
    pub partition: String,
    pub consumer_group: String,
    /// Which exporter reported it (`kafka_exporter`, `kminion`, `kafka_lag_exporter`).
    pub exporter: String,
    /// Lag in records per step over the trend lookback.
    pub lag_records: Vec<Point>,
    /// Lag in seconds (age of the oldest unconsumed record) per step, when the exporter
    /// reports it.
    pub lag_seconds: Vec<Point>,
    /// Consumer group committed offset per step.
    pub consumer_offset: Vec<Point>,
    /// Log-start (oldest retained) offset per step.
    pub log_start_offset: Vec<Point>,
    /// Log-end (newest) offset per step.
    pub log_end_offset: Vec<Point>,
}

/// Retention of a topic (`retention.ms`, `cleanup.policy`, `retention.bytes`), from
/// configuration, KMinion's topic info or the configured broker default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopicRetention {
    pub topic: String,
    /// ms; `None` when retention is unlimited (`-1`).
    pub retention_ms: Option<i64>,
    /// Where `retention_ms` came from: `config`, `kminion` or `broker default`.
    pub from: String,
    /// `cleanup.policy`; `None` when unknown (Kafka's default, `delete`, is then assumed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup_policy: Option<CleanupPolicy>,
    /// Where `cleanup_policy` came from (`config`, `kminion`, `broker default`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup_policy_from: Option<String>,
    /// `retention.bytes` per partition; `None` when unlimited (`-1`) or unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_bytes: Option<i64>,
    /// Bytes one partition (one replica) holds now, e.g. KMinion's topic log-dir size
    /// ÷ (partitions × replicas); `None` when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_bytes: Option<f64>,
}

impl TopicRetention {
    /// A topic's `retention.ms` alone, policy and size unknown.
    pub fn by_time(topic: &str, retention_ms: Option<i64>, from: &str) -> Self {
        TopicRetention {
            topic: topic.into(),
            retention_ms,
            from: from.into(),
            cleanup_policy: None,
            cleanup_policy_from: None,
            retention_bytes: None,
            partition_bytes: None,
        }
    }
}

/// A topic's `cleanup.policy`: which rule removes its records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String")]
pub enum CleanupPolicy {
    /// `delete`: whole segments go by age (`retention.ms`) and size (`retention.bytes`).
    #[serde(rename = "delete")]
    Delete,
    /// `compact`: only older values of a key go; nothing by age or size.
    #[serde(rename = "compact")]
    Compact,
    /// `compact,delete`: compacted, and segments also go by age and size.
    #[serde(rename = "compact,delete")]
    CompactDelete,
}

/// Kafka's three spellings in the schema (other orders and spacings are read too).
impl schemars::JsonSchema for CleanupPolicy {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "CleanupPolicy".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "oneOf": [
            { "type": "string", "const": "delete" },
            { "type": "string", "const": "compact" },
            { "type": "string", "const": "compact,delete" }
        ] })
    }
}

/// Read as Kafka writes it: any order, case and spacing (`"delete, compact"`).
impl TryFrom<String> for CleanupPolicy {
    type Error = String;

    fn try_from(value: String) -> Result<Self, String> {
        CleanupPolicy::parse(&value).ok_or_else(|| {
            format!("`{value}` is no cleanup.policy: write \"delete\", \"compact\" or \"compact,delete\" (any order)")
        })
    }
}

impl CleanupPolicy {
    /// Kafka's value: `delete`, `compact`, `compact,delete`, `[compact, delete]` (a list in
    /// any order, any case, with spaces or brackets). `None` for anything else.
    pub fn parse(value: &str) -> Option<Self> {
        let mut compact = false;
        let mut delete = false;
        let inner = value.trim().trim_start_matches('[').trim_end_matches(']');
        for part in inner.split(',').map(|p| p.trim().to_ascii_lowercase()) {
            match part.as_str() {
                "compact" => compact = true,
                "delete" => delete = true,
                _ => return None,
            }
        }
        match (compact, delete) {
            (true, true) => Some(CleanupPolicy::CompactDelete),
            (true, false) => Some(CleanupPolicy::Compact),
            (false, true) => Some(CleanupPolicy::Delete),
            (false, false) => None,
        }
    }

    /// Whether segments are deleted by age and size (`delete` is in the policy).
    pub fn deletes(self) -> bool {
        !matches!(self, CleanupPolicy::Compact)
    }

    /// Kafka's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            CleanupPolicy::Delete => "delete",
            CleanupPolicy::Compact => "compact",
            CleanupPolicy::CompactDelete => "compact,delete",
        }
    }
}

/// JVM signals of one TaskManager over the window.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TaskManagerMetrics {
    pub tm_id: String,
    pub host: Option<String>,
    /// Garbage collection time per second (`rate(Status_JVM_GarbageCollector_All_Time)`),
    /// ms/s.
    pub gc_ms_per_s: Option<f64>,
    /// Mean `Status_JVM_CPU_Load` (ratio of one core's time to the JVM's available cores).
    pub cpu_load: Option<f64>,
    /// The old-generation collectors' part of `gc_ms_per_s` (`catalog.gc_old_gen_collector_times`), ms/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_gen_gc_ms_per_s: Option<f64>,
    /// Mean `Status.JVM.Memory.Heap.Used` over the window, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heap_used_bytes: Option<f64>,
    /// `Status.JVM.Memory.Heap.Max`, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heap_max_bytes: Option<f64>,
}

/// Event-time progress of one vertex over the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VertexWatermark {
    pub vertex_id: String,
    /// Min over subtasks of `currentInputWatermark` per step, read as what it stands for
    /// ([`Watermark::from_reported`]).
    pub input_watermark: Vec<(i64, Watermark)>,
}

/// The value Flink's watermark gauges start at, `Long.MIN_VALUE` (−2⁶³), as a float64.
/// −2⁶³ is a power of two, so float64 holds it exactly: the Prometheus reporter writes it
/// `-9.223372036854776E18` and PromQL answers `-9223372036854775808`.
pub const LONG_MIN_AS_F64: f64 = i64::MIN as f64;
/// `Long.MAX_VALUE` (2⁶³ − 1), the final watermark, as a float64: 2⁶³ − 1 has no float64,
/// so it reads as 2⁶³ (`9.223372036854776E18`).
pub const LONG_MAX_AS_F64: f64 = i64::MAX as f64;

/// What one reading of a watermark gauge (`currentInputWatermark`,
/// `currentOutputWatermark`) stands for. Flink's `WatermarkGauge`
/// (`flink-streaming-java`, `streaming/runtime/metrics/WatermarkGauge.java`) starts at
/// `Long.MIN_VALUE` and keeps it until a watermark arrives (the web UI shows "No
/// Watermark"); a source that finishes emits `Watermark.MAX_WATERMARK`, `Long.MAX_VALUE`
/// ("When a source closes it will emit a final watermark with timestamp Long.MAX_VALUE",
/// `streaming/api/watermark/Watermark.java`). Neither is an event time: they are never
/// averaged, compared with a threshold or subtracted from a clock.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Watermark {
    /// An event time, Unix ms.
    EventTime { ms: f64 },
    /// `Long.MIN_VALUE`: no watermark has arrived (yet). A vertex's input watermark is the
    /// minimum over its inputs, so one input that never sends one (a source subtask with
    /// no partition and no idleness) holds the whole vertex here.
    NoWatermark,
    /// `Long.MAX_VALUE`: the final watermark; every input has finished (a bounded input,
    /// a finished source).
    InputFinished,
    /// Not reported, or NaN.
    Unknown,
}

impl Watermark {
    /// How far (relative) a reading may be from ±2⁶³ and still be that sentinel: a store
    /// that keeps values as decimals (VictoriaMetrics) may round the 19 digits, and a
    /// generator's `Long.MIN_VALUE + outOfOrderness + 1` rounds to −2⁶³ in float64 anyway.
    /// No event time comes near: 2⁶³ ms is 292 million years.
    pub const SENTINEL_TOLERANCE: f64 = 1e-9;

    /// The state a reported value stands for.
    pub fn from_reported(v: f64) -> Watermark {
        let near = |s: f64| (v - s).abs() <= s.abs() * Self::SENTINEL_TOLERANCE;
        if v.is_nan() {
            Watermark::Unknown
        } else if near(LONG_MIN_AS_F64) {
            Watermark::NoWatermark
        } else if near(LONG_MAX_AS_F64) {
            Watermark::InputFinished
        } else if v.is_finite() {
            Watermark::EventTime { ms: v }
        } else {
            Watermark::Unknown
        }
    }

    /// The event time, when the reading is one.
    pub fn event_time_ms(self) -> Option<f64> {
        match self {
            Watermark::EventTime { ms } => Some(ms),
            _ => None,
        }
    }
}

/// One vertex at each evaluation step of the window, aggregated over its subtasks: what
/// the time-resolved reading classifies sample by sample (window averages hide a
/// bottleneck that comes and goes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VertexTimeline {
    pub vertex_id: String,
    /// Max over subtasks of `busyTimeMsPerSecond` / 1000 per step (ratio; NaN: unknown).
    pub busy_max: Vec<Point>,
    /// Max over subtasks of `backPressuredTimeMsPerSecond` / 1000 per step (ratio).
    pub backpressured_max: Vec<Point>,
}

/// Records rates of one operator inside a vertex's chain, summed over subtasks (Flink's
/// operator-scope `numRecordsIn` / `numRecordsOut`). They tell what a chained operator
/// (an async wait operator, a lookup join) handles when the task-level counters cannot: a
/// vertex that is both source and sink reports 0 records in and out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OperatorRates {
    pub vertex_id: String,
    /// `operator_name` as the reporter wrote it (sanitized).
    pub operator_name: String,
    /// records/s.
    pub records_in_per_s: Option<f64>,
    /// records/s.
    pub records_out_per_s: Option<f64>,
}

/// A metric that was looked for and not found, and why ([`MissingWhy`]). The verdict
/// words it (`render::words::missing`); decisions read the reason, never the words.
///
/// Serialized as `{metric, why}`; the form of earlier builds, `{metric, detail}` with the
/// reason in words, still loads ([`MissingWhy::from_detail`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(from = "MissingWire")]
pub struct Missing {
    /// Metric (Flink name), query (PromQL) or source that was absent.
    pub metric: String,
    /// Why it is absent.
    pub why: MissingWhy,
}

/// Why a signal is missing from a snapshot.
///
/// The variants are declared in the order of their words (`render::words::missing`), so
/// that a snapshot's `missing` list sorts as it did when the reason was those words.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum MissingWhy {
    /// No checkpoint metrics (checkpointing off, or the JobManager not scraped).
    NoCheckpointMetrics,
    /// Neither the records-in counter nor its meter has samples.
    NoRecordsIn,
    /// Answered, with no samples of the job in the window.
    NoSamples,
    /// The query was sent and failed (network, a status, a bad answer), or the backend
    /// refused it as too large also in smaller pieces (`too_large`): another attempt may
    /// succeed. `error` is the failure as the client worded it (never a credential).
    QueryFailed {
        error: String,
        /// What the failure leaves undone, when more than the signal itself.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        leaves: Option<Leaves>,
        /// The backend refused the query as too large.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        too_large: bool,
    },
    /// The reporter predates Flink 1.13, which added busy and backpressured time.
    PredatesFlink113,
    /// Any other reason, in words (hand-built snapshots; recordings of earlier builds).
    Said { detail: String },
}

/// What a failed query leaves undone besides its own signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Leaves {
    /// The hygiene query: task attempts and duplicate scrapes are not told apart.
    SeriesHygiene,
}

impl MissingWhy {
    /// A failed query's reason: `error` as the client worded it.
    pub fn query_failed(error: impl Into<String>, leaves: Option<Leaves>, too_large: bool) -> MissingWhy {
        MissingWhy::QueryFailed { error: error.into(), leaves, too_large }
    }

    /// Whether the signal is missing because a query failed (too large or not): the data
    /// may be there, and a diagnosis a little later may get it.
    pub fn is_query_failure(&self) -> bool {
        matches!(self, MissingWhy::QueryFailed { .. })
    }

    /// The reason of the `{metric, detail}` form of earlier builds, from its words: the
    /// wordings this build writes for each reason, else [`MissingWhy::Said`]. Only for
    /// loading old snapshots; nothing decides on words.
    pub fn from_detail(detail: &str) -> MissingWhy {
        if let Some(rest) = detail.strip_prefix(QUERY_FAILED) {
            return match rest.strip_suffix(HYGIENE_LEFT) {
                Some(error) => MissingWhy::query_failed(error, Some(Leaves::SeriesHygiene), false),
                None => MissingWhy::query_failed(rest, None, false),
            };
        }
        match detail {
            NO_SAMPLES => MissingWhy::NoSamples,
            PREDATES_FLINK_113 => MissingWhy::PredatesFlink113,
            NO_RECORDS_IN => MissingWhy::NoRecordsIn,
            NO_CHECKPOINT_METRICS => MissingWhy::NoCheckpointMetrics,
            other => MissingWhy::Said { detail: other.into() },
        }
    }
}

/// The words of earlier builds' `detail`, read back by [`MissingWhy::from_detail`] (the
/// renderer words reasons the same way: `render::words::missing`).
pub const QUERY_FAILED: &str = "query failed: ";
/// See [`QUERY_FAILED`].
pub const HYGIENE_LEFT: &str = "; task attempts and duplicate scrapes are not told apart";
/// See [`QUERY_FAILED`].
pub const NO_SAMPLES: &str = "no samples for this job in the window";
/// See [`QUERY_FAILED`].
pub const PREDATES_FLINK_113: &str = "the reporter predates Flink 1.13, which added busy and backpressured time; backpressure is read from isBackPressured, busy time is unknown";
/// See [`QUERY_FAILED`].
pub const NO_RECORDS_IN: &str = "no records-in counter or meter: records shares and capacities are unknown";
/// See [`QUERY_FAILED`].
pub const NO_CHECKPOINT_METRICS: &str =
    "no checkpoint metrics for this job (checkpointing off, or JobManager not scraped)";

/// A [`Missing`] as stored: `why` now, `detail` (words) in earlier builds.
#[derive(Deserialize)]
struct MissingWire {
    metric: String,
    #[serde(default)]
    why: Option<MissingWhy>,
    #[serde(default)]
    detail: Option<String>,
}

impl From<MissingWire> for Missing {
    fn from(w: MissingWire) -> Missing {
        let why = w.why.unwrap_or_else(|| MissingWhy::from_detail(w.detail.as_deref().unwrap_or_default()));
        Missing { metric: w.metric, why }
    }
}

/// Values of one metric the collector left out as impossible: non-finite, or outside what
/// the metric can be (a negative count, a busy time of 10⁹ ms per second). They read as
/// unknown; this says they were not merely unreported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftOut {
    /// The metric's name.
    pub metric: String,
    /// Which signal it is (the catalog's field name: `busy`, `failed_checkpoints`, …; empty
    /// for other sources' metrics).
    pub signal: String,
    pub count: u64,
}

/// What the diagnosis sees about one job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub job: JobIdentity,
    /// The time the verdict is about, Unix ms.
    pub at_ms: i64,
    pub window: Window,
    /// Job start (evaluation time minus `uptime`), Unix ms.
    pub job_start_ms: Option<i64>,
    /// The job graph; `None` in graph-free mode.
    pub graph: Option<JobGraph>,
    /// Set when a job graph was given but shares no vertex with the metrics (a plan of
    /// another job): the graph was dropped; says why.
    pub plan_mismatch: Option<String>,
    /// Every vertex, aggregated over its subtasks.
    pub vertex_aggregates: Vec<VertexAggregate>,
    /// Per-subtask detail, for the vertices the diagnosis looks into (culprit candidates,
    /// vertices near capacity, vertices whose busy time needs inferring).
    pub subtasks: Vec<SubtaskMetrics>,
    pub checkpoints: Checkpoints,
    pub rocksdb: Vec<RocksDbSubtask>,
    pub source_lag: Vec<SourceSubtaskLag>,
    /// Source readers' own metrics (idleness, fetch and emit lag, alignment drift, splits,
    /// records), per source subtask; empty when none was reported.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source_readers: Vec<SourceReader>,
    pub partitions: Vec<PartitionLag>,
    pub retention: Vec<TopicRetention>,
    /// Topics the job reads, from configuration (`[[kafka.jobs]]`).
    pub job_topics: Vec<String>,
    pub taskmanagers: Vec<TaskManagerMetrics>,
    /// The Kubernetes containers of the job's TaskManagers (kube-state-metrics, cAdvisor),
    /// when those exporters are in the same store; `None` when not asked (no TaskManager
    /// known to join them to), empty when asked and nothing found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<Vec<crate::model::resources::PodResources>>,
    /// The Flink Kubernetes Operator autoscaler's gauges of the plan's vertices, when they
    /// are in the same store; `None` when not asked (no plan: no vertex ids to join by),
    /// empty when asked and nothing found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaler: Option<Vec<crate::model::autoscaler::AutoscalerVertex>>,
    pub watermarks: Vec<VertexWatermark>,
    /// Every vertex per step of the window (max over subtasks), for the time-resolved
    /// reading; empty when not collected.
    #[serde(default)]
    pub timeline: Vec<VertexTimeline>,
    /// Operator-level records rates of the vertices the diagnosis looks into.
    #[serde(default)]
    pub operators: Vec<OperatorRates>,
    /// Step of the trend series, ms.
    pub step_ms: i64,
    /// Samples per task series in the window (max over series): 1 for a single scrape,
    /// where nothing can be called persistent or growing.
    pub samples_in_window: Option<u32>,
    /// What the backpressured ratios measure (time, or the share of `isBackPressured`
    /// samples when the reporter predates Flink 1.13).
    #[serde(default)]
    pub backpressure_measure: BackpressureMeasure,
    /// The PromQL behind each signal, by signal (`busy`, `backpressured`, …), for evidence.
    pub queries: std::collections::BTreeMap<String, String>,
    pub missing: Vec<Missing>,
    /// Values left out as impossible, by metric.
    #[serde(default)]
    pub left_out: Vec<LeftOut>,
    /// Facts about how the snapshot was taken that the verdict should repeat (job runs
    /// chosen among several, a plan from another run, …).
    pub notes: Vec<String>,
    /// Changes of the job's identity or shape the collector saw: the run asked about was
    /// replaced by a newer one, or the job was rescaled or restarted inside the window.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<RunChange>,
    /// The job's restarts in the window and Flink REST's exception history; `None` when
    /// the collector did not look (older snapshots).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover: Option<crate::model::failover::Failover>,
}

impl RunChange {
    /// A [`RunChange::Replaced`] with the vertices the new run runs with another
    /// parallelism; any other change as it is.
    pub fn with_resized(self, changed: Vec<(String, u32, u32)>) -> RunChange {
        match self {
            RunChange::Replaced { old_id, new_id, old_last_ms, new_start_ms, .. } => {
                RunChange::Replaced { old_id, new_id, old_last_ms, new_start_ms, resized: changed }
            }
            other => other,
        }
    }
}

/// A change of the job's identity or shape, seen in its series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RunChange {
    /// The run the request named (by its job id, its plan or its name) stopped reporting
    /// while a newer run of the same job name and deployment reports: the diagnosis is of
    /// the newer run (a redeploy from a savepoint gives the job a new id).
    Replaced {
        old_id: String,
        new_id: String,
        /// The old run's last sample, Unix ms.
        old_last_ms: i64,
        /// When the new run started (its first sample when its uptime is unknown), Unix ms.
        new_start_ms: i64,
        /// The vertices the new run runs with another parallelism than the old run's plan:
        /// name, the plan's and the new run's (reporting) parallelism.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        resized: Vec<(String, u32, u32)>,
    },
    /// The run stopped reporting and no newer run of the job took over: the diagnosis is
    /// as of its last sample (`last_ms`), `gap_s` before the newest data (or the time asked
    /// for).
    /// `not_running_now`: its JobManager still reports, with uptime 0 (Flink's "not running
    /// at the moment": restarting, failing over).
    Stopped {
        id: String,
        last_ms: i64,
        gap_s: i64,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        not_running_now: bool,
    },
    /// A vertex's number of reporting subtasks changed inside the window (a rescale:
    /// the autoscaler's in-place rescale, or a redeploy with another parallelism).
    /// `by`: what Flink's rescale history says of the same rescale (its trigger cause and
    /// how it ended), when the history has it.
    Rescaled {
        vertex_id: String,
        vertex: String,
        at_ms: i64,
        from: u32,
        to: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<Box<crate::model::rescales::RescaleCause>>,
    },
    /// A rescale (or an attempt at one) of the Adaptive scheduler inside the window that
    /// Flink's rescale history (`/jobs/:id/rescales/history`) holds and the series do not
    /// show as [`RunChange::Rescaled`]: a failed or ignored attempt, or one the series
    /// missed. `at_ms`: when it ended (began, while in progress); `vertices`: name, the
    /// parallelism before and after of each vertex it changed, when Flink said.
    SchedulerRescale {
        at_ms: i64,
        cause: Box<crate::model::rescales::RescaleCause>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        vertices: Vec<(String, u32, u32)>,
    },
    /// The job restarted inside the window (its uptime reset, or its tasks run a newer
    /// attempt).
    Restarted { at_ms: i64 },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watermark_reading_is_the_state_it_stands_for() {
        // What the Prometheus reporter writes for Long.MIN_VALUE and Long.MAX_VALUE (Java's
        // Double.toString of the longs), and an event time.
        assert_eq!(Watermark::from_reported(-9.223372036854776e18), Watermark::NoWatermark);
        assert_eq!(Watermark::from_reported(9.223372036854776e18), Watermark::InputFinished);
        // Long.MIN_VALUE is −2⁶³, which float64 holds exactly; Long.MAX_VALUE is not.
        assert_eq!(LONG_MIN_AS_F64, -9_223_372_036_854_775_808.0);
        assert_eq!(LONG_MAX_AS_F64, 9_223_372_036_854_775_808.0);
        // Long.MIN_VALUE + a bounded out-of-orderness of 5 s + 1 (a generator's start).
        assert_eq!(Watermark::from_reported((i64::MIN + 5001) as f64), Watermark::NoWatermark);
        assert_eq!(Watermark::from_reported(1.7e12), Watermark::EventTime { ms: 1.7e12 });
        assert_eq!(Watermark::from_reported(f64::NAN), Watermark::Unknown);
        assert_eq!(Watermark::from_reported(f64::NEG_INFINITY), Watermark::Unknown);
        assert_eq!(Watermark::NoWatermark.event_time_ms(), None);
    }
}
