//! Naming schemes: the names one Flink metric gets on its way into a store, per reporter and
//! pipeline. `[metrics] scheme` picks one; [`MetricCatalog::for_scheme`] maps every name of
//! the catalog from it, and [`MetricCatalog::apply_scheme`] keeps the keys a file sets.
//!
//! Each catalog name stands for one Flink metric: a scope (`taskmanager.job.task`, …), the
//! metric's name as Flink registers it (`busyTimeMsPerSecond`, `buffers.inPoolUsage`) and
//! its kind. From them:
//!
//! * Flink's Prometheus reporter writes `flink_<scope>_<metric>` with every character outside
//!   `[a-zA-Z0-9_:]` as `_` (`flink_taskmanager_job_task_busyTimeMsPerSecond`); a meter is
//!   one gauge of its rate (`…_numRecordsInPerSecond`), a counter keeps its name.
//! * Flink's OpenTelemetry reporter (`metrics.reporter.otel`, flink-metrics-otel, Flink 1.20
//!   and 2.x) names a metric `flink.<logical scope>.<metric>` with dots
//!   (`OpenTelemetryMetricReporter.notifyOfAddedMetric`), its attributes are the scope
//!   variables without `<>` (`job_id`, `task_name`, `subtask_index`, … as the Prometheus
//!   reporter's labels), a counter is a monotonic sum, and a meter two metrics, `<name>.count`
//!   (a monotonic sum) and `<name>.rate` (a gauge) (`OpenTelemetryMetricAdapter.convertMeter`).
//! * Through an OpenTelemetry Collector's `prometheus` exporter, the Collector's name
//!   normalization (`pkg/translator/prometheus`, on by default) writes every unsupported
//!   character as `_` and adds `_total` to a monotonic sum:
//!   `flink_taskmanager_job_task_numRecordsIn_total`,
//!   `flink_taskmanager_job_task_numRecordsInPerSecond_count_total`,
//!   `…_numRecordsInPerSecond_rate`. The exporter labels each series with `job` and
//!   `instance` from the resource (`service.name`, `service.instance.id`); the Prometheus
//!   that scrapes the Collector keeps its own and renames those to `exported_job` and
//!   `exported_instance`: scrape labels.
//! * Over OTLP into Prometheus 3 with `otlp.translation_strategy: NoUTF8EscapingWithSuffixes`
//!   (prometheus/prometheus#15384) the dots stay and the suffixes are added:
//!   `flink.taskmanager.job.task.busyTimeMsPerSecond`,
//!   `flink.taskmanager.job.task.numRecordsIn_total`. (The reporter's sums are deltas:
//!   Prometheus 3 needs its OTLP delta-to-cumulative conversion for them.)

use serde::{Deserialize, Serialize};

use super::catalog::MetricCatalog;

/// Which reporter and pipeline named the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NamingScheme {
    /// Flink's Prometheus reporter (`flink_taskmanager_job_task_busyTimeMsPerSecond`).
    #[default]
    FlinkPrometheus,
    /// Flink's OpenTelemetry reporter through an OpenTelemetry Collector's Prometheus
    /// exporter (`…_numRecordsIn_total`, `…_numRecordsInPerSecond_count_total`,
    /// `exported_job`).
    OtelCollector,
    /// Flink's OpenTelemetry reporter over OTLP into Prometheus 3 with
    /// `NoUTF8EscapingWithSuffixes` (`flink.taskmanager.job.task.busyTimeMsPerSecond`,
    /// `…numRecordsIn_total`).
    OtlpUtf8,
    /// The Prometheus reporter's names, and whichever scheme the data holds when they are
    /// absent (offline from the recording; live with one series lookup).
    Auto,
}

impl NamingScheme {
    /// The schemes that name metrics (all but `auto`), the default first.
    pub const CONCRETE: [NamingScheme; 3] =
        [NamingScheme::FlinkPrometheus, NamingScheme::OtelCollector, NamingScheme::OtlpUtf8];

    /// The value of `[metrics] scheme` that selects it.
    pub fn key(self) -> &'static str {
        match self {
            NamingScheme::FlinkPrometheus => "flink_prometheus",
            NamingScheme::OtelCollector => "otel_collector",
            NamingScheme::OtlpUtf8 => "otlp_utf8",
            NamingScheme::Auto => "auto",
        }
    }

    /// Who names the metrics so, for a note.
    pub fn describe(self) -> &'static str {
        match self {
            NamingScheme::FlinkPrometheus | NamingScheme::Auto => "Flink's Prometheus reporter",
            NamingScheme::OtelCollector => {
                "Flink's OpenTelemetry reporter through an OpenTelemetry Collector's Prometheus exporter"
            }
            NamingScheme::OtlpUtf8 => {
                "Flink's OpenTelemetry reporter over OTLP into Prometheus 3, dotted (UTF-8) names kept"
            }
        }
    }
}

/// A metric's scope, as Flink's logical scopes name it.
#[derive(Debug, Clone, Copy)]
enum Scope {
    Task,
    Operator,
    Job,
    TaskManager,
}

impl Scope {
    fn dotted(self) -> &'static str {
        match self {
            Scope::Task => "taskmanager.job.task",
            Scope::Operator => "taskmanager.job.task.operator",
            Scope::Job => "jobmanager.job",
            Scope::TaskManager => "taskmanager",
        }
    }
}

/// How Flink registers a metric.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Gauge,
    Counter,
    /// A meter, read as its rate.
    MeterRate,
}

/// The Flink metric behind each catalog key (its suffix keys aside).
const METRICS: [(&str, Scope, &str, Kind); 41] = [
    ("busy", Scope::Task, "busyTimeMsPerSecond", Kind::Gauge),
    ("backpressured", Scope::Task, "backPressuredTimeMsPerSecond", Kind::Gauge),
    ("idle", Scope::Task, "idleTimeMsPerSecond", Kind::Gauge),
    ("is_backpressured", Scope::Task, "isBackPressured", Kind::Gauge),
    ("in_pool_usage", Scope::Task, "buffers.inPoolUsage", Kind::Gauge),
    ("out_pool_usage", Scope::Task, "buffers.outPoolUsage", Kind::Gauge),
    ("records_in", Scope::Task, "numRecordsIn", Kind::Counter),
    ("records_in_per_second", Scope::Task, "numRecordsInPerSecond", Kind::MeterRate),
    ("records_out", Scope::Task, "numRecordsOut", Kind::Counter),
    ("records_out_per_second", Scope::Task, "numRecordsOutPerSecond", Kind::MeterRate),
    ("checkpoint_start_delay", Scope::Task, "checkpointStartDelayNanos", Kind::Gauge),
    ("checkpoint_alignment", Scope::Task, "checkpointAlignmentTime", Kind::Gauge),
    ("uptime", Scope::Job, "uptime", Kind::Gauge),
    ("last_checkpoint_duration", Scope::Job, "lastCheckpointDuration", Kind::Gauge),
    ("completed_checkpoints", Scope::Job, "numberOfCompletedCheckpoints", Kind::Gauge),
    ("failed_checkpoints", Scope::Job, "numberOfFailedCheckpoints", Kind::Gauge),
    ("in_progress_checkpoints", Scope::Job, "numberOfInProgressCheckpoints", Kind::Gauge),
    ("last_checkpoint_completed_timestamp", Scope::Job, "lastCheckpointCompletedTimestamp", Kind::Gauge),
    ("last_checkpoint_size", Scope::Job, "lastCheckpointSize", Kind::Gauge),
    ("last_checkpoint_full_size", Scope::Job, "lastCheckpointFullSize", Kind::Gauge),
    ("pending_records", Scope::Operator, "pendingRecords", Kind::Gauge),
    ("records_lag_max", Scope::Operator, "KafkaSourceReader.KafkaConsumer.records-lag-max", Kind::Gauge),
    ("legacy_records_lag_max", Scope::Operator, "KafkaConsumer.records-lag-max", Kind::Gauge),
    ("emit_event_time_lag", Scope::Operator, "currentEmitEventTimeLag", Kind::Gauge),
    ("source_idle_time", Scope::Operator, "sourceIdleTime", Kind::Gauge),
    ("fetch_event_time_lag", Scope::Operator, "currentFetchEventTimeLag", Kind::Gauge),
    ("watermark_alignment_drift", Scope::Operator, "watermarkAlignmentDrift", Kind::Gauge),
    ("assigned_partitions", Scope::Operator, "KafkaSourceReader.KafkaConsumer.assigned-partitions", Kind::Gauge),
    ("partition_current_offset", Scope::Operator, "KafkaSourceReader.topic.partition.currentOffset", Kind::Gauge),
    ("input_watermark", Scope::Task, "currentInputWatermark", Kind::Gauge),
    ("operator_records_in", Scope::Operator, "numRecordsIn", Kind::Counter),
    ("operator_records_in_per_second", Scope::Operator, "numRecordsInPerSecond", Kind::MeterRate),
    ("operator_records_out_per_second", Scope::Operator, "numRecordsOutPerSecond", Kind::MeterRate),
    ("num_restarts", Scope::Job, "numRestarts", Kind::Gauge),
    ("num_rescales", Scope::Job, "numRescales", Kind::Counter),
    ("gc_time", Scope::TaskManager, "Status.JVM.GarbageCollector.All.Time", Kind::Gauge),
    ("cpu_load", Scope::TaskManager, "Status.JVM.CPU.Load", Kind::Gauge),
    ("heap_used", Scope::TaskManager, "Status.JVM.Memory.Heap.Used", Kind::Gauge),
    ("heap_max", Scope::TaskManager, "Status.JVM.Memory.Heap.Max", Kind::Gauge),
    // Listed for completeness of the table's check; the list keys are mapped apart.
    ("gc_collector_times", Scope::TaskManager, "", Kind::Gauge),
    ("gc_old_gen_collector_times", Scope::TaskManager, "", Kind::Gauge),
];

/// Catalog keys of metrics other exporters write (kube-state-metrics, cAdvisor, the Flink
/// Kubernetes Operator's own reporter): the same name under every scheme, since the job's
/// reporter does not name them.
#[cfg(test)]
const NOT_FLINKS: [&str; 10] = [
    "kube_last_terminated_reason",
    "kube_restarts",
    "kube_resource_limits",
    "container_working_set",
    "container_cfs_throttled_periods",
    "container_cfs_periods",
    "autoscaler_parallelism",
    "autoscaler_recommended_parallelism",
    "autoscaler_true_processing_rate",
    "autoscaler_load",
];

/// The old-generation (whole-heap) collectors among [`GC_COLLECTORS`]: what Tencent
/// Oceanus' "Full GC too long" counts. ZGC's and Shenandoah's cycles collect the whole
/// heap (mostly concurrently).
pub const GC_OLD_GEN_COLLECTORS: [&str; 7] = [
    "G1 Old Generation",
    "PS MarkSweep",
    "MarkSweepCompact",
    "ConcurrentMarkSweep",
    "ZGC Cycles",
    "ZGC Major Cycles",
    "Shenandoah Cycles",
];

/// The JVM's garbage collector bean names (HotSpot's G1, Parallel, Serial, CMS, ZGC,
/// Shenandoah), as Flink's `Status.JVM.GarbageCollector.<name>` groups hold them.
const GC_COLLECTORS: [&str; 17] = [
    "G1 Young Generation",
    "G1 Old Generation",
    "G1 Concurrent GC",
    "PS Scavenge",
    "PS MarkSweep",
    "Copy",
    "MarkSweepCompact",
    "ParNew",
    "ConcurrentMarkSweep",
    "ZGC Cycles",
    "ZGC Pauses",
    "ZGC Minor Cycles",
    "ZGC Minor Pauses",
    "ZGC Major Cycles",
    "ZGC Major Pauses",
    "Shenandoah Cycles",
    "Shenandoah Pauses",
];

/// RocksDB native metrics, matched by their name's end: the catalog key and the metric as
/// Flink registers it (`rocksdb.<property>`).
const ROCKSDB: [(&str, &str); 9] = [
    ("rocksdb_is_write_stopped_suffix", "rocksdb.is-write-stopped"),
    ("rocksdb_actual_delayed_write_rate_suffix", "rocksdb.actual-delayed-write-rate"),
    ("rocksdb_compaction_pending_suffix", "rocksdb.compaction-pending"),
    ("rocksdb_mem_table_flush_pending_suffix", "rocksdb.mem-table-flush-pending"),
    ("rocksdb_estimate_pending_compaction_bytes_suffix", "rocksdb.estimate-pending-compaction-bytes"),
    ("rocksdb_stall_micros_suffix", "rocksdb.stall.micros"),
    ("rocksdb_estimate_live_data_size_suffix", "rocksdb.estimate-live-data-size"),
    ("rocksdb_total_sst_files_size_suffix", "rocksdb.total-sst-files-size"),
    ("rocksdb_estimate_num_keys_suffix", "rocksdb.estimate-num-keys"),
];

/// Every character outside `[a-zA-Z0-9_:]` as `_`: what Flink's Prometheus reporter and
/// the Collector's normalization both do to a dotted name.
fn underscored(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == ':' { c } else { '_' }).collect()
}

/// The name of a Flink metric under a scheme.
fn metric_name(scheme: NamingScheme, scope: Scope, metric: &str, kind: Kind) -> String {
    let dotted = format!("flink.{}.{metric}", scope.dotted());
    match (scheme, kind) {
        (NamingScheme::FlinkPrometheus | NamingScheme::Auto, _) => underscored(&dotted),
        (NamingScheme::OtelCollector, Kind::Gauge) => underscored(&dotted),
        (NamingScheme::OtelCollector, Kind::Counter) => format!("{}_total", underscored(&dotted)),
        (NamingScheme::OtelCollector, Kind::MeterRate) => format!("{}_rate", underscored(&dotted)),
        (NamingScheme::OtlpUtf8, Kind::Gauge) => dotted,
        (NamingScheme::OtlpUtf8, Kind::Counter) => format!("{dotted}_total"),
        (NamingScheme::OtlpUtf8, Kind::MeterRate) => format!("{dotted}.rate"),
    }
}

/// The end of a RocksDB metric's name under a scheme.
fn rocksdb_suffix(scheme: NamingScheme, metric: &str) -> String {
    match scheme {
        NamingScheme::OtlpUtf8 => format!(".{metric}"),
        _ => format!("_{}", underscored(metric)),
    }
}

impl MetricCatalog {
    /// The catalog of a naming scheme: every metric name as that scheme writes it, and its
    /// scrape labels (`exported_job` and `exported_instance` behind a Collector).
    pub fn for_scheme(scheme: NamingScheme) -> MetricCatalog {
        let mut value = serde_json::to_value(MetricCatalog::default()).expect("plain strings");
        let map = value.as_object_mut().expect("a struct");
        for (key, scope, metric, kind) in METRICS {
            if !key.starts_with("gc_") || !key.ends_with("_collector_times") {
                map.insert(key.into(), metric_name(scheme, scope, metric, kind).into());
            }
        }
        let collectors: Vec<String> = GC_COLLECTORS
            .iter()
            .map(|c| {
                let metric = format!("Status.JVM.GarbageCollector.{c}.Time");
                metric_name(scheme, Scope::TaskManager, &metric, Kind::Gauge)
            })
            .collect();
        map.insert("gc_collector_times".into(), collectors.into());
        let old_gen: Vec<String> = GC_OLD_GEN_COLLECTORS
            .iter()
            .map(|c| {
                let metric = format!("Status.JVM.GarbageCollector.{c}.Time");
                metric_name(scheme, Scope::TaskManager, &metric, Kind::Gauge)
            })
            .collect();
        map.insert("gc_old_gen_collector_times".into(), old_gen.into());
        for (key, metric) in ROCKSDB {
            map.insert(key.into(), rocksdb_suffix(scheme, metric).into());
        }
        if scheme == NamingScheme::OtelCollector {
            let labels = map.get_mut("scrape_labels").and_then(|v| v.as_array_mut()).expect("a list");
            labels.extend(["exported_job", "exported_instance"].map(serde_json::Value::from));
        }
        map.insert("scheme".into(), serde_json::to_value(scheme).expect("a name"));
        serde_json::from_value(value).expect("the catalog's own fields")
    }

    /// The catalog of `self.scheme` with the keys a file set (`explicit`: `[metrics]` keys
    /// as written) kept as given: the scheme maps a whole naming scheme, a key overrides
    /// one name. A key that holds the Prometheus reporter's name (as the example file
    /// writes every key) stands for the scheme's name: changing the scheme alone is enough.
    pub fn apply_scheme(&self, explicit: &[String]) -> MetricCatalog {
        let mut value = serde_json::to_value(MetricCatalog::for_scheme(self.scheme)).expect("plain strings");
        let given = serde_json::to_value(self).expect("plain strings");
        let default = serde_json::to_value(MetricCatalog::default()).expect("plain strings");
        let (map, given) = (value.as_object_mut().expect("a struct"), given.as_object().expect("a struct"));
        for key in explicit {
            if let Some(v) = given.get(key)
                && default.get(key) != Some(v)
            {
                map.insert(key.clone(), v.clone());
            }
        }
        serde_json::from_value(value).expect("the catalog's own fields")
    }

    /// The same metrics under another scheme, the names this catalog does not take from its
    /// own scheme (overrides) kept.
    pub fn with_scheme(&self, scheme: NamingScheme) -> MetricCatalog {
        let own = serde_json::to_value(MetricCatalog::for_scheme(self.scheme)).expect("plain strings");
        let mine = serde_json::to_value(self).expect("plain strings");
        let (own, mine) = (own.as_object().expect("a struct"), mine.as_object().expect("a struct"));
        let overridden: Vec<String> =
            mine.iter().filter(|(k, v)| *k != "scheme" && own.get(*k) != Some(v)).map(|(k, _)| k.clone()).collect();
        MetricCatalog { scheme, ..self.clone() }.apply_scheme(&overridden)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prometheus_reporter_scheme_is_the_default_catalog_name_for_name() {
        // The table derives every default name from Flink's metric: nothing is written twice.
        assert_eq!(MetricCatalog::for_scheme(NamingScheme::FlinkPrometheus), MetricCatalog::default());
        let fields = serde_json::to_value(MetricCatalog::default()).unwrap();
        let named = fields.as_object().unwrap().keys().filter(|k| !k.ends_with("_suffix")).count();
        // Every field but the suffixes, `scrape_labels`, `scheme` and other exporters'
        // metrics has a row.
        assert_eq!(named - 2, METRICS.len() + NOT_FLINKS.len());
        // Other exporters' names are the same under every scheme.
        let utf8 = MetricCatalog::for_scheme(NamingScheme::OtlpUtf8);
        assert_eq!(utf8.container_cfs_periods, "container_cpu_cfs_periods_total");
        assert_eq!(utf8.heap_used, "flink.taskmanager.Status.JVM.Memory.Heap.Used");
        assert_eq!(
            utf8.gc_old_gen_collector_times[0],
            "flink.taskmanager.Status.JVM.GarbageCollector.G1 Old Generation.Time"
        );
    }

    #[test]
    fn the_collector_scheme_adds_total_to_sums_and_rate_to_meters_and_knows_exported_job() {
        let c = MetricCatalog::for_scheme(NamingScheme::OtelCollector);
        assert_eq!(c.busy, "flink_taskmanager_job_task_busyTimeMsPerSecond");
        assert_eq!(c.records_in, "flink_taskmanager_job_task_numRecordsIn_total");
        assert_eq!(c.records_in_per_second, "flink_taskmanager_job_task_numRecordsInPerSecond_rate");
        assert_eq!(
            c.records_lag_max,
            "flink_taskmanager_job_task_operator_KafkaSourceReader_KafkaConsumer_records_lag_max"
        );
        assert_eq!(c.uptime, "flink_jobmanager_job_uptime");
        assert!(c.scrape_labels.iter().any(|l| l == "exported_job"));
        assert_eq!(c.rocksdb_stall_micros_suffix, "_rocksdb_stall_micros");
    }

    #[test]
    fn the_otlp_utf8_scheme_keeps_the_dots_and_adds_the_suffixes() {
        let c = MetricCatalog::for_scheme(NamingScheme::OtlpUtf8);
        assert_eq!(c.busy, "flink.taskmanager.job.task.busyTimeMsPerSecond");
        assert_eq!(c.records_out, "flink.taskmanager.job.task.numRecordsOut_total");
        assert_eq!(c.uptime, "flink.jobmanager.job.uptime");
        assert_eq!(c.in_pool_usage, "flink.taskmanager.job.task.buffers.inPoolUsage");
        assert_eq!(c.gc_collector_times[0], "flink.taskmanager.Status.JVM.GarbageCollector.G1 Young Generation.Time");
        assert_eq!(c.rocksdb_is_write_stopped_suffix, ".rocksdb.is-write-stopped");
    }

    #[test]
    fn a_key_set_by_hand_overrides_its_schemes_name_and_survives_a_change_of_scheme() {
        let given =
            MetricCatalog { scheme: NamingScheme::OtlpUtf8, busy: "my.busy".into(), ..MetricCatalog::default() };
        let c = given.apply_scheme(&["busy".into()]);
        assert_eq!(c.busy, "my.busy");
        assert_eq!(c.idle, "flink.taskmanager.job.task.idleTimeMsPerSecond");
        let moved = c.with_scheme(NamingScheme::OtelCollector);
        assert_eq!(moved.busy, "my.busy");
        assert_eq!(moved.idle, "flink_taskmanager_job_task_idleTimeMsPerSecond");
    }
}
