//! Raw metric names, as Flink's Prometheus reporter (Flink 1.x and 2.x) and the Kafka
//! exporters write them. Derived signals live in the snapshot and the diagnosis; only
//! this module knows the names.
//!
//! Flink's reporter builds names as `flink_<scope>_<metric>` with scope `taskmanager_job_task`
//! for task metrics, `taskmanager_job_task_operator` for operator metrics and
//! `jobmanager_job` for job metrics (docs: "Metrics → System metrics").

use serde::{Deserialize, Serialize};

/// Label names the reporter attaches.
pub mod labels {
    pub const JOB_ID: &str = "job_id";
    pub const JOB_NAME: &str = "job_name";
    pub const TASK_ID: &str = "task_id";
    pub const TASK_NAME: &str = "task_name";
    pub const SUBTASK_INDEX: &str = "subtask_index";
    pub const TM_ID: &str = "tm_id";
    pub const HOST: &str = "host";
    pub const COLUMN_FAMILY: &str = "column_family";
    /// kube-state-metrics' and cAdvisor's pod, namespace and container labels (their
    /// docs: kube-state-metrics `docs/metrics/workload/pod-metrics.md`, cAdvisor
    /// `docs/storage/prometheus.md`).
    pub const POD: &str = "pod";
    pub const NAMESPACE: &str = "namespace";
    pub const CONTAINER: &str = "container";
    /// kube-state-metrics' `reason` of `kube_pod_container_status_last_terminated_reason`.
    pub const REASON: &str = "reason";
    /// kube-state-metrics' `resource` of `kube_pod_container_resource_limits`.
    pub const RESOURCE: &str = "resource";
    /// The Flink Kubernetes Operator autoscaler's vertex label (`AutoscalerFlinkMetrics.JOB_VERTEX_ID`):
    /// the plan's vertex id, 32 hex digits.
    pub const JOB_VERTEX_ID: &str = "jobVertexID";
    /// The operator's resource scope variables (`metrics-logging.md`, "Scope"): the
    /// FlinkDeployment's or FlinkSessionJob's namespace and name.
    pub const RESOURCE_NS: &str = "resourcens";
    pub const RESOURCE_NAME: &str = "resourcename";
}

/// Metric names the collector queries. Every field names one Flink metric; the doc says
/// its unit as Flink reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct MetricCatalog {
    /// The naming scheme that maps every name below at once: `flink_prometheus` (Flink's
    /// Prometheus reporter, `flink_taskmanager_job_task_busyTimeMsPerSecond`),
    /// `otel_collector` (Flink's OpenTelemetry reporter through an OpenTelemetry Collector's
    /// Prometheus exporter: `…_numRecordsIn_total`, `exported_job`), `otlp_utf8` (OTLP into
    /// Prometheus 3 with `NoUTF8EscapingWithSuffixes`: `flink.taskmanager.job.task.busyTimeMsPerSecond`),
    /// or `auto` (the Prometheus reporter's names, and the scheme the data holds when they
    /// are absent). A name set below overrides its scheme's, unless it is the Prometheus
    /// reporter's name, which stands for the scheme's. Offline, a recording without
    /// the scheme's names but with another scheme's is read with that one, and a note says so.
    pub scheme: crate::model::naming::NamingScheme,
    /// Task `busyTimeMsPerSecond`, ms/s (NaN for legacy sources).
    pub busy: String,
    /// Task `backPressuredTimeMsPerSecond`, ms/s.
    pub backpressured: String,
    /// Task `idleTimeMsPerSecond`, ms/s.
    pub idle: String,
    /// Task `isBackPressured`, 0 or 1 at each scrape: the only backpressure signal of
    /// Flink ≤ 1.12, whose reporter has no busy or backpressured time (added in 1.13).
    pub is_backpressured: String,
    /// Task `buffers.inPoolUsage` (input buffer pool usage, floating and exclusive
    /// buffers), ratio; read when the reporter predates Flink 1.13.
    pub in_pool_usage: String,
    /// Task `buffers.outPoolUsage` (output buffer pool usage), ratio; read when the
    /// reporter predates Flink 1.13.
    pub out_pool_usage: String,
    /// Task `numRecordsIn`, records (counter).
    pub records_in: String,
    /// Task `numRecordsInPerSecond`, records/s (a 60 s meter).
    pub records_in_per_second: String,
    /// Task `numRecordsOut`, records (counter).
    pub records_out: String,
    /// Task `numRecordsOutPerSecond`, records/s (a 60 s meter).
    pub records_out_per_second: String,
    /// Task `checkpointStartDelayNanos`, ns.
    pub checkpoint_start_delay: String,
    /// Task `checkpointAlignmentTime`, ns.
    pub checkpoint_alignment: String,
    /// Job `uptime`, ms.
    pub uptime: String,
    /// Job `lastCheckpointDuration`, ms.
    pub last_checkpoint_duration: String,
    /// Job `numberOfCompletedCheckpoints`, count.
    pub completed_checkpoints: String,
    /// Job `numberOfFailedCheckpoints`, count.
    pub failed_checkpoints: String,
    /// Job `numberOfInProgressCheckpoints`, count.
    pub in_progress_checkpoints: String,
    /// Job `lastCheckpointCompletedTimestamp`, Unix ms.
    pub last_checkpoint_completed_timestamp: String,
    /// Job `lastCheckpointSize`, bytes: the checkpointed size of the last checkpoint (with
    /// incremental checkpoints or changelog, what it uploaded; −1 before the first).
    pub last_checkpoint_size: String,
    /// Job `lastCheckpointFullSize` (Flink 1.15+), bytes: the full state size of the last
    /// checkpoint (−1 before the first).
    pub last_checkpoint_full_size: String,
    /// Operator `pendingRecords` (FLIP-33 source lag), records.
    pub pending_records: String,
    /// Kafka source `KafkaSourceReader.KafkaConsumer.records-lag-max`: the lag of the
    /// subtask's worst partition, records; read when `pendingRecords` is not reported.
    pub records_lag_max: String,
    /// The same from the legacy `FlinkKafkaConsumer` (`KafkaConsumer.records-lag-max`).
    pub legacy_records_lag_max: String,
    /// Operator `currentEmitEventTimeLag` (FLIP-33), ms.
    pub emit_event_time_lag: String,
    /// Operator `sourceIdleTime` (FLIP-33): how long the source reader has emitted no
    /// record, ms.
    pub source_idle_time: String,
    /// Operator `currentFetchEventTimeLag` (FLIP-33): fetch time − event time of the last
    /// record fetched, ms.
    pub fetch_event_time_lag: String,
    /// Operator `watermarkAlignmentDrift` (FLIP-182, `MetricNames.WATERMARK_ALIGNMENT_DRIFT`):
    /// how far the reader's watermark is ahead of its alignment group's, ms.
    pub watermark_alignment_drift: String,
    /// Kafka source `KafkaSourceReader.KafkaConsumer.assigned-partitions`: partitions the
    /// reader's consumer holds, count.
    pub assigned_partitions: String,
    /// Kafka source `KafkaSourceReader.topic.<t>.partition.<p>.currentOffset` (`topic` and
    /// `partition` as labels): one series per partition a reader holds, offset.
    pub partition_current_offset: String,
    /// Task `currentInputWatermark`, Unix ms of event time.
    pub input_watermark: String,
    /// Operator `numRecordsIn` (counter) and `numRecordsInPerSecond` / `numRecordsOutPerSecond`
    /// (60 s meters), records: what each chained operator handles.
    pub operator_records_in: String,
    /// Operator `numRecordsInPerSecond`, records/s (a 60 s meter).
    pub operator_records_in_per_second: String,
    /// Operator `numRecordsOutPerSecond`, records/s (a 60 s meter).
    pub operator_records_out_per_second: String,
    /// Job `numRestarts` and `numRescales` (Flink 2.0+; older versions count rescales as
    /// restarts): samples right after one are not representative.
    pub num_restarts: String,
    /// Job `numRescales` (Flink 2.0+), count (counter).
    pub num_rescales: String,
    /// TaskManager `Status.JVM.GarbageCollector.All.Time`, ms (counter).
    pub gc_time: String,
    /// TaskManager `Status.JVM.GarbageCollector.<collector>.Time`, ms (counters), one per
    /// JVM garbage collector. Read when `All.Time` is absent (Flink before 1.20 reports only
    /// these); their sum is what `All.Time` counts.
    pub gc_collector_times: Vec<String>,
    /// The old-generation (whole-heap) collectors among `gc_collector_times`: G1 Old
    /// Generation, PS MarkSweep, MarkSweepCompact, ConcurrentMarkSweep, and ZGC's and
    /// Shenandoah's whole-heap cycles, ms (counters). Tencent Oceanus' "Full GC too long"
    /// is theirs.
    pub gc_old_gen_collector_times: Vec<String>,
    /// TaskManager `Status.JVM.CPU.Load`, ratio.
    pub cpu_load: String,
    /// TaskManager `Status.JVM.Memory.Heap.Used`, bytes.
    pub heap_used: String,
    /// TaskManager `Status.JVM.Memory.Heap.Max`, bytes (the JVM's `-Xmx`: Flink's framework
    /// and task heap).
    pub heap_max: String,
    /// kube-state-metrics `kube_pod_container_status_last_terminated_reason` (1 for the
    /// container's last termination's `reason`, e.g. `OOMKilled`). Not a Flink metric:
    /// the same under every naming scheme.
    pub kube_last_terminated_reason: String,
    /// kube-state-metrics `kube_pod_container_status_restarts_total`, count (counter).
    pub kube_restarts: String,
    /// kube-state-metrics `kube_pod_container_resource_limits` (`resource` = `memory`,
    /// bytes; `cpu`, cores).
    pub kube_resource_limits: String,
    /// cAdvisor `container_memory_working_set_bytes`, bytes: what the kubelet's OOM
    /// decisions read.
    pub container_working_set: String,
    /// cAdvisor `container_cpu_cfs_throttled_periods_total`, CFS periods (counter).
    pub container_cfs_throttled_periods: String,
    /// cAdvisor `container_cpu_cfs_periods_total`, CFS periods (counter).
    pub container_cfs_periods: String,
    /// The Flink Kubernetes Operator autoscaler's `AutoScaler.jobVertexID.<id>.PARALLELISM.Current`
    /// through the operator's Prometheus reporter (`jobVertexID` a label), the vertex's
    /// parallelism. Not a Flink job metric: the same under every naming scheme.
    pub autoscaler_parallelism: String,
    /// The autoscaler's `RECOMMENDED_PARALLELISM.Current` (NaN: not evaluated yet).
    pub autoscaler_recommended_parallelism: String,
    /// The autoscaler's `TRUE_PROCESSING_RATE.Current`, records/s at full capacity.
    pub autoscaler_true_processing_rate: String,
    /// The autoscaler's `LOAD.Current`, busy-time ratio 0–1.
    pub autoscaler_load: String,
    /// Name suffixes of RocksDB native metrics. They match both forms the reporter
    /// writes: `…_operator_column_family_rocksdb_<m>` (with
    /// `state.backend.rocksdb.metrics.column-family-as-variable: true`) and
    /// `…_operator_<column family>_rocksdb_<m>`.
    /// This one: RocksDB property `is-write-stopped`, 0 or 1.
    pub rocksdb_is_write_stopped_suffix: String,
    /// RocksDB property `actual-delayed-write-rate`, bytes/s (0: writes not delayed).
    pub rocksdb_actual_delayed_write_rate_suffix: String,
    /// RocksDB property `compaction-pending`, 0 or 1.
    pub rocksdb_compaction_pending_suffix: String,
    /// RocksDB property `mem-table-flush-pending`, 0 or 1.
    pub rocksdb_mem_table_flush_pending_suffix: String,
    /// RocksDB property `estimate-pending-compaction-bytes`, bytes.
    pub rocksdb_estimate_pending_compaction_bytes_suffix: String,
    /// RocksDB statistic `stall_micros` (`…_operator_rocksdb_stall_micros`), µs (counter).
    pub rocksdb_stall_micros_suffix: String,
    /// RocksDB property `estimate-live-data-size`, bytes
    /// (`state.backend.rocksdb.metrics.estimate-live-data-size`).
    pub rocksdb_estimate_live_data_size_suffix: String,
    /// RocksDB property `total-sst-files-size`, bytes
    /// (`state.backend.rocksdb.metrics.total-sst-files-size`).
    pub rocksdb_total_sst_files_size_suffix: String,
    /// RocksDB property `estimate-num-keys`, keys
    /// (`state.backend.rocksdb.metrics.estimate-num-keys`).
    pub rocksdb_estimate_num_keys_suffix: String,
    /// Labels that only say how a series was scraped (the target, the scrape job, the
    /// Prometheus replica), never what it measures. Series of one job equal but for these
    /// (one pod scraped through pod annotations and a PodMonitor) count once.
    pub scrape_labels: Vec<String>,
}

/// Labels Flink's reporter writes that tell series apart: never scrape labels.
const FLINK_LABELS: [&str; 12] = [
    "job_id",
    "job_name",
    "task_id",
    "task_name",
    "subtask_index",
    "task_attempt_num",
    "task_attempt_id",
    "tm_id",
    "host",
    "operator_id",
    "operator_name",
    "column_family",
];

impl MetricCatalog {
    /// Every name must be non-empty and hold no NUL: Prometheus 3 accepts any UTF-8 name
    /// (`flink.taskmanager.job.task.busyTimeMsPerSecond`), which culprit quotes where the
    /// text formats and PromQL need it. Scrape labels are label names by the same rule.
    pub fn validate(&self, problems: &mut Vec<String>) {
        let value = serde_json::to_value(self).expect("plain strings");
        let usable = |name: &str| !name.is_empty() && !name.contains('\0');
        for label in &self.scrape_labels {
            if !usable(label) {
                problems.push(format!(
                    "metrics.scrape_labels: `{}` is not a label name (empty, or holding a NUL character)",
                    label.escape_debug()
                ));
            } else if FLINK_LABELS.contains(&label.as_str()) {
                problems.push(format!(
                    "metrics.scrape_labels: `{label}` is a label of Flink's reporter that tells series apart, not a scrape label"
                ));
            }
        }
        for (key, v) in value.as_object().expect("a struct").iter() {
            if key == "scrape_labels" || key == "scheme" {
                continue;
            }
            // A list (gc_collector_times) holds names; an empty list asks for nothing.
            let names: Vec<&str> = match v.as_array() {
                Some(list) => list.iter().map(|n| n.as_str().unwrap_or_default()).collect(),
                None => vec![v.as_str().unwrap_or_default()],
            };
            for name in names {
                if !usable(name) {
                    problems.push(format!(
                        "metrics.{key} = `{}` is not a metric name: a name is any non-empty UTF-8 text without a NUL character",
                        name.escape_debug()
                    ));
                }
            }
        }
    }
}

impl Default for MetricCatalog {
    fn default() -> Self {
        let task = |m: &str| format!("flink_taskmanager_job_task_{m}");
        let job = |m: &str| format!("flink_jobmanager_job_{m}");
        let autoscaler = |m: &str| format!("flink_k8soperator_namespace_resource_AutoScaler_jobVertexID_{m}_Current");
        MetricCatalog {
            scheme: crate::model::naming::NamingScheme::FlinkPrometheus,
            busy: task("busyTimeMsPerSecond"),
            backpressured: task("backPressuredTimeMsPerSecond"),
            idle: task("idleTimeMsPerSecond"),
            is_backpressured: task("isBackPressured"),
            in_pool_usage: task("buffers_inPoolUsage"),
            out_pool_usage: task("buffers_outPoolUsage"),
            records_in: task("numRecordsIn"),
            records_in_per_second: task("numRecordsInPerSecond"),
            records_out: task("numRecordsOut"),
            records_out_per_second: task("numRecordsOutPerSecond"),
            checkpoint_start_delay: task("checkpointStartDelayNanos"),
            checkpoint_alignment: task("checkpointAlignmentTime"),
            uptime: job("uptime"),
            last_checkpoint_duration: job("lastCheckpointDuration"),
            completed_checkpoints: job("numberOfCompletedCheckpoints"),
            failed_checkpoints: job("numberOfFailedCheckpoints"),
            in_progress_checkpoints: job("numberOfInProgressCheckpoints"),
            last_checkpoint_completed_timestamp: job("lastCheckpointCompletedTimestamp"),
            last_checkpoint_size: job("lastCheckpointSize"),
            last_checkpoint_full_size: job("lastCheckpointFullSize"),
            pending_records: task("operator_pendingRecords"),
            records_lag_max: task("operator_KafkaSourceReader_KafkaConsumer_records_lag_max"),
            legacy_records_lag_max: task("operator_KafkaConsumer_records_lag_max"),
            emit_event_time_lag: task("operator_currentEmitEventTimeLag"),
            source_idle_time: task("operator_sourceIdleTime"),
            fetch_event_time_lag: task("operator_currentFetchEventTimeLag"),
            watermark_alignment_drift: task("operator_watermarkAlignmentDrift"),
            assigned_partitions: task("operator_KafkaSourceReader_KafkaConsumer_assigned_partitions"),
            partition_current_offset: task("operator_KafkaSourceReader_topic_partition_currentOffset"),
            input_watermark: task("currentInputWatermark"),
            operator_records_in: task("operator_numRecordsIn"),
            operator_records_in_per_second: task("operator_numRecordsInPerSecond"),
            operator_records_out_per_second: task("operator_numRecordsOutPerSecond"),
            num_restarts: job("numRestarts"),
            num_rescales: job("numRescales"),
            gc_time: "flink_taskmanager_Status_JVM_GarbageCollector_All_Time".into(),
            // The JVM's collector bean names (HotSpot's G1, Parallel, Serial, CMS, ZGC,
            // Shenandoah), spaces written as `_` by Flink's Prometheus reporter.
            gc_collector_times: [
                "G1_Young_Generation",
                "G1_Old_Generation",
                "G1_Concurrent_GC",
                "PS_Scavenge",
                "PS_MarkSweep",
                "Copy",
                "MarkSweepCompact",
                "ParNew",
                "ConcurrentMarkSweep",
                "ZGC_Cycles",
                "ZGC_Pauses",
                "ZGC_Minor_Cycles",
                "ZGC_Minor_Pauses",
                "ZGC_Major_Cycles",
                "ZGC_Major_Pauses",
                "Shenandoah_Cycles",
                "Shenandoah_Pauses",
            ]
            .map(|c| format!("flink_taskmanager_Status_JVM_GarbageCollector_{c}_Time"))
            .to_vec(),
            gc_old_gen_collector_times: crate::model::naming::GC_OLD_GEN_COLLECTORS
                .map(|c| format!("flink_taskmanager_Status_JVM_GarbageCollector_{}_Time", c.replace(' ', "_")))
                .to_vec(),
            cpu_load: "flink_taskmanager_Status_JVM_CPU_Load".into(),
            heap_used: "flink_taskmanager_Status_JVM_Memory_Heap_Used".into(),
            heap_max: "flink_taskmanager_Status_JVM_Memory_Heap_Max".into(),
            kube_last_terminated_reason: "kube_pod_container_status_last_terminated_reason".into(),
            kube_restarts: "kube_pod_container_status_restarts_total".into(),
            kube_resource_limits: "kube_pod_container_resource_limits".into(),
            container_working_set: "container_memory_working_set_bytes".into(),
            container_cfs_throttled_periods: "container_cpu_cfs_throttled_periods_total".into(),
            container_cfs_periods: "container_cpu_cfs_periods_total".into(),
            autoscaler_parallelism: autoscaler("PARALLELISM"),
            autoscaler_recommended_parallelism: autoscaler("RECOMMENDED_PARALLELISM"),
            autoscaler_true_processing_rate: autoscaler("TRUE_PROCESSING_RATE"),
            autoscaler_load: autoscaler("LOAD"),
            rocksdb_is_write_stopped_suffix: "_rocksdb_is_write_stopped".into(),
            rocksdb_actual_delayed_write_rate_suffix: "_rocksdb_actual_delayed_write_rate".into(),
            rocksdb_compaction_pending_suffix: "_rocksdb_compaction_pending".into(),
            rocksdb_mem_table_flush_pending_suffix: "_rocksdb_mem_table_flush_pending".into(),
            rocksdb_estimate_pending_compaction_bytes_suffix: "_rocksdb_estimate_pending_compaction_bytes".into(),
            rocksdb_stall_micros_suffix: "_rocksdb_stall_micros".into(),
            rocksdb_estimate_live_data_size_suffix: "_rocksdb_estimate_live_data_size".into(),
            rocksdb_total_sst_files_size_suffix: "_rocksdb_total_sst_files_size".into(),
            rocksdb_estimate_num_keys_suffix: "_rocksdb_estimate_num_keys".into(),
            scrape_labels: [
                "job",
                "instance",
                "pod",
                "pod_name",
                "kubernetes_pod_name",
                "container",
                "container_name",
                "endpoint",
                "service",
                "prometheus",
                "prometheus_replica",
                "replica",
            ]
            .map(String::from)
            .to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrape_labels_must_be_label_names_and_never_flinks_own() {
        let cat = MetricCatalog {
            scrape_labels: vec![
                "kubernetes_namespace".into(),
                "subtask_index".into(),
                "".into(),
                "service.name".into(),
            ],
            ..MetricCatalog::default()
        };
        let mut problems = Vec::new();
        cat.validate(&mut problems);
        assert_eq!(
            problems,
            [
                "metrics.scrape_labels: `subtask_index` is a label of Flink's reporter that tells series apart, not a scrape label",
                "metrics.scrape_labels: `` is not a label name (empty, or holding a NUL character)",
            ]
        );
        let mut problems = Vec::new();
        MetricCatalog::default().validate(&mut problems);
        assert!(problems.is_empty(), "{problems:?}");
    }

    #[test]
    fn each_name_of_a_metric_list_must_be_a_metric_name() {
        let cat = MetricCatalog {
            gc_collector_times: vec![
                "flink_taskmanager_Status_JVM_GarbageCollector_ParNew_Time".into(),
                "flink.taskmanager.Status.JVM.GarbageCollector.G1 Old Generation.Time".into(),
                "G1\0Old".into(),
            ],
            ..MetricCatalog::default()
        };
        let mut problems = Vec::new();
        cat.validate(&mut problems);
        assert_eq!(
            problems,
            [
                "metrics.gc_collector_times = `G1\\0Old` is not a metric name: a name is any non-empty UTF-8 text without a NUL character"
            ]
        );
    }

    #[test]
    fn prometheus_3_utf8_names_are_valid_metric_names() {
        // OTLP into Prometheus 3 with NoUTF8EscapingWithSuffixes keeps the dots (report 04).
        let cat = MetricCatalog {
            busy: "flink.taskmanager.job.task.busyTimeMsPerSecond".into(),
            records_in: "flink.taskmanager.job.task.numRecordsIn_total".into(),
            uptime: "flink.jobmanager.job.uptime".into(),
            idle: "fließ/zeit {ms}".into(),
            ..MetricCatalog::default()
        };
        let mut problems = Vec::new();
        cat.validate(&mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        let mut problems = Vec::new();
        MetricCatalog { busy: String::new(), ..MetricCatalog::default() }.validate(&mut problems);
        assert_eq!(problems.len(), 1, "{problems:?}");
    }
}
