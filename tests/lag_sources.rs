//! Every lag source culprit reads, on its real metric names and labels: kafka_exporter,
//! Strimzi's Kafka Exporter, KMinion, kafka-lag-exporter, Redpanda's `/public_metrics`, and
//! the Flink Kafka source's own metrics (`pendingRecords`, `records-lag-max`, committed
//! offsets per partition). Each feeds the `retention` hazard of a small synthetic job.
//!
//! One scenario for the exporters: topic `orders` (one partition), scraped every 5 s with
//! the job, produced at 1000 records/s; the job's consumer group `orders-job` stands still
//! at committed offset 7 295 000. At the diagnosis time (the last scrape, d = 295 s) the log
//! end is 10 295 000: 3 000 000 records behind, 3000 s at 1000 records/s, aging 1 s per s.
//! Retention 1 h: (3600 − 3000) / 1 = 600 s to loss, a critical hazard. Where the log start
//! is known it is 600 000 records below the committed offset and advances 1000/s (retention
//! deleting as fast as producers write): 600 000 / (1000 − 0) = 600 s by offsets too.

use culprit::collect::block_on;
use culprit::collect::collector::{CollectInput, collect};
use culprit::collect::store::SeriesStore;
use culprit::config::{Config, KafkaJob, Millis};
use culprit::diagnose::diagnose;
use culprit::model::graph::JobGraph;
use culprit::model::request::DiagnosisRequest;
use culprit::model::snapshot::Snapshot;
use culprit::model::verdict::{HazardKind, Severity, Verdict};
use culprit::samples::synthetic::SyntheticJob;

const JOB: SyntheticJob = SyntheticJob { vertices: 3, subtasks: 2, samples: 60, start_ms: 1_795_000_000_000, job: 0 };

/// Seconds since the first scrape of each scrape, every 5 s.
fn scrapes() -> impl Iterator<Item = i64> {
    (0..60).map(|k| k * 5)
}

fn t(d: i64) -> String {
    let ms = JOB.start_ms + d * 1000;
    format!("{}.{:03}", ms / 1000, ms % 1000)
}

/// Exposition lines of `name{labels}` at every scrape, value `f(d)`.
fn series(name: &str, labels: &str, f: impl Fn(i64) -> f64) -> String {
    scrapes().map(|d| format!("{name}{{{labels}}} {} {}\n", f(d), t(d))).collect()
}

fn log_end(d: i64) -> f64 {
    10_000_000.0 + 1000.0 * d as f64
}
const COMMITTED: f64 = 7_295_000.0;
fn lag(d: i64) -> f64 {
    log_end(d) - COMMITTED
}
fn log_start(d: i64) -> f64 {
    COMMITTED - 600_000.0 - 1000.0 * (295 - d) as f64
}

/// The synthetic job's recording with `extra` lines, diagnosed with the consumer group and
/// topic configured, and `retention` for `orders` when given.
fn diagnosed(extra: &str, retention: Option<i64>) -> (Snapshot, Verdict) {
    let mut text = String::from_utf8(JOB.write_openmetrics(Vec::new()).unwrap()).unwrap();
    text.truncate(text.rfind("# EOF").unwrap());
    text.push_str(extra);
    text.push_str("# EOF\n");
    let mut store = SeriesStore::new();
    store.read_from(text.as_bytes(), "lag-sources", None).unwrap();
    store.finish();
    let mut config = Config::default();
    config.kafka.jobs.push(KafkaJob {
        job: "synthetic-job".into(),
        consumer_group: Some("orders-job".into()),
        topics: vec!["orders".into()],
    });
    if let Some(s) = retention {
        config.kafka.retention.insert("orders".into(), culprit::config::RetentionMs::Limited(Millis::from_secs(s)));
    }
    let request =
        DiagnosisRequest { job: Some("synthetic-job".into()), at_ms: None, window_ms: None, ..Default::default() };
    let snapshot = block_on(collect(
        &store,
        CollectInput {
            request: &request,
            graph: Some(JobGraph::from_plan_json(&JOB.plan_json()).unwrap()),
            checkpoint_config: None,
            exceptions: None,
            rescales: None,
            config: &config,
            catalog: &config.metrics,
        },
    ))
    .unwrap();
    let verdict = culprit::render::words::verdict(&diagnose(&snapshot, &config.diagnosis));
    (snapshot, verdict)
}

/// The retention hazard on `orders`: critical, 600 s to loss.
fn assert_600_s_to_loss(v: &Verdict) {
    let h: Vec<_> = v.hazards.iter().filter(|h| h.kind == HazardKind::Retention).collect();
    assert_eq!(h.len(), 1, "{:#?}\n{:?}", v.hazards, v.missing);
    assert_eq!((h[0].severity, h[0].time_to_loss_seconds), (Severity::Critical, Some(600)), "{}", h[0].detail);
    assert_eq!(h[0].topic.as_deref(), Some("orders"));
}

#[test]
fn kafka_exporter_gives_lag_committed_and_log_offsets() {
    let labels = "consumergroup=\"orders-job\",topic=\"orders\",partition=\"0\",instance=\"kafka-exporter:9308\",job=\"kafka-exporter\"";
    let topic = "topic=\"orders\",partition=\"0\",instance=\"kafka-exporter:9308\",job=\"kafka-exporter\"";
    let extra = [
        series("kafka_consumergroup_lag", labels, lag),
        series("kafka_consumergroup_current_offset", labels, |_| COMMITTED),
        series("kafka_topic_partition_oldest_offset", topic, log_start),
        series("kafka_topic_partition_current_offset", topic, log_end),
    ]
    .concat();
    let (snap, v) = diagnosed(&extra, Some(3600));
    assert_eq!(snap.partitions.len(), 1);
    assert_eq!(snap.partitions[0].exporter, "kafka_exporter");
    assert_600_s_to_loss(&v);
}

#[test]
fn strimzis_kafka_exporter_is_kafka_exporter_with_the_operators_labels() {
    // Strimzi deploys danielqsj/kafka_exporter; its PodMonitor adds the pod's strimzi.io
    // labels, the namespace, pod, node and container.
    let target = "namespace=\"kafka\",strimzi_io_cluster=\"my-cluster\",strimzi_io_kind=\"Kafka\",strimzi_io_name=\"my-cluster-kafka-exporter\",kubernetes_pod_name=\"my-cluster-kafka-exporter-5d8f9c7b6-x2k4p\",node_name=\"worker-1\",node_ip=\"10.0.1.7\",container=\"my-cluster-kafka-exporter\",job=\"kafka/kafka-resources-metrics\",instance=\"10.244.1.12:9404\"";
    let labels = format!("consumergroup=\"orders-job\",topic=\"orders\",partition=\"0\",{target}");
    let topic = format!("topic=\"orders\",partition=\"0\",{target}");
    let extra = [
        series("kafka_consumergroup_lag", &labels, lag),
        series("kafka_consumergroup_current_offset", &labels, |_| COMMITTED),
        series("kafka_topic_partition_oldest_offset", &topic, log_start),
        series("kafka_topic_partition_current_offset", &topic, log_end),
    ]
    .concat();
    let (snap, v) = diagnosed(&extra, Some(3600));
    assert_eq!(snap.partitions[0].exporter, "kafka_exporter");
    assert_eq!(snap.partitions[0].consumer_offset.last().unwrap().1, COMMITTED);
    assert_600_s_to_loss(&v);
}

#[test]
fn kminion_gives_lag_watermarks_and_the_topics_retention() {
    // No committed offsets per partition: the loss comes from the lag (3000 s, aging 1 s
    // per s) against the retention KMinion's topic info carries (`retention_ms`, when
    // `minion.topics.infoMetric.configKeys` lists `retention.ms`).
    let lag_labels =
        "group_id=\"orders-job\",topic_name=\"orders\",partition_id=\"0\",instance=\"kminion:8080\",job=\"kminion\"";
    let topic = "topic_name=\"orders\",partition_id=\"0\",instance=\"kminion:8080\",job=\"kminion\"";
    let info = "topic_name=\"orders\",partition_count=\"1\",replication_factor=\"3\",cleanup_policy=\"delete\",retention_ms=\"3600000\",instance=\"kminion:8080\",job=\"kminion\"";
    let extra = [
        series("kminion_kafka_consumer_group_topic_partition_lag", lag_labels, lag),
        series("kminion_kafka_topic_partition_low_water_mark", topic, log_start),
        series("kminion_kafka_topic_partition_high_water_mark", topic, log_end),
        series("kminion_kafka_topic_info", info, |_| 1.0),
    ]
    .concat();
    let (snap, v) = diagnosed(&extra, None);
    assert_eq!(snap.retention[0].from, "kminion");
    assert_eq!(snap.retention[0].retention_ms, Some(3_600_000));
    assert_600_s_to_loss(&v);
}

#[test]
fn kafka_lag_exporter_gives_lag_in_seconds_and_offsets() {
    let labels = "cluster_name=\"prod\",group=\"orders-job\",topic=\"orders\",partition=\"0\",member_host=\"/10.1.2.3\",consumer_id=\"consumer-1-4f1\",client_id=\"consumer-1\",instance=\"kafka-lag-exporter:8000\",job=\"kafka-lag-exporter\"";
    let topic = "cluster_name=\"prod\",topic=\"orders\",partition=\"0\",instance=\"kafka-lag-exporter:8000\",job=\"kafka-lag-exporter\"";
    let extra = [
        series("kafka_consumergroup_group_lag", labels, lag),
        // 3000 s at the end, aging 1 s per s: plausible, and agreeing with the offsets.
        series("kafka_consumergroup_group_lag_seconds", labels, |d| 2705.0 + d as f64),
        series("kafka_consumergroup_group_offset", labels, |_| COMMITTED),
        series("kafka_partition_earliest_offset", topic, log_start),
        series("kafka_partition_latest_offset", topic, log_end),
    ]
    .concat();
    let (snap, v) = diagnosed(&extra, Some(3600));
    assert_eq!(snap.partitions[0].exporter, "kafka_lag_exporter");
    assert_eq!(snap.partitions[0].lag_seconds.last().unwrap().1, 3000.0);
    assert!(v.notes.iter().all(|n| !n.contains("implausible")), "{:?}", v.notes);
    assert_600_s_to_loss(&v);
}

#[test]
fn redpanda_gives_committed_offsets_and_the_high_watermark_and_culprit_derives_the_lag() {
    // `/public_metrics`: per-partition committed offsets and `max_offset` (the high
    // watermark); lag only per group (`…_lag_max`, `…_lag_sum`, not read), no log start.
    let group = "redpanda_group=\"orders-job\",redpanda_topic=\"orders\",redpanda_partition=\"0\",shard=\"0\",instance=\"redpanda-0:9644\",job=\"redpanda\"";
    let topic = "redpanda_namespace=\"kafka\",redpanda_topic=\"orders\",redpanda_partition=\"0\",instance=\"redpanda-0:9644\",job=\"redpanda\"";
    let extra = [
        series("redpanda_kafka_consumer_group_committed_offset", group, |_| COMMITTED),
        series("redpanda_kafka_max_offset", topic, log_end),
        series(
            "redpanda_kafka_consumer_group_lag_max",
            "redpanda_group=\"orders-job\",instance=\"redpanda-0:9644\"",
            lag,
        ),
    ]
    .concat();
    let (snap, v) = diagnosed(&extra, Some(3600));
    let p = &snap.partitions[0];
    assert_eq!(p.exporter, "redpanda");
    // 10 295 000 − 7 295 000 = 3 000 000 behind at the end.
    assert_eq!(p.lag_records.last().unwrap().1, 3_000_000.0);
    assert!(p.log_start_offset.is_empty());
    assert_600_s_to_loss(&v);
}

#[test]
fn without_a_known_retention_the_lag_is_read_and_the_retention_is_listed_as_missing() {
    let group = "redpanda_group=\"orders-job\",redpanda_topic=\"orders\",redpanda_partition=\"0\"";
    let topic = "redpanda_namespace=\"kafka\",redpanda_topic=\"orders\",redpanda_partition=\"0\"";
    let extra = [
        series("redpanda_kafka_consumer_group_committed_offset", group, |_| COMMITTED),
        series("redpanda_kafka_max_offset", topic, log_end),
    ]
    .concat();
    let (snap, v) = diagnosed(&extra, None);
    assert_eq!(snap.partitions.len(), 1);
    assert!(v.hazards.iter().all(|h| h.kind != HazardKind::Retention), "{:?}", v.hazards);
    assert!(v.missing.iter().any(|m| m.starts_with("retention.ms of topic orders")), "{:?}", v.missing);
}

/// Flink's labels on an operator series of source subtask `s`.
fn flink_operator(s: u32) -> String {
    let id = JOB.job_id();
    let task = SyntheticJob::vertex_id(0);
    format!(
        "host=\"10_0_0_{s}\",job=\"flink\",job_id=\"{id}\",job_name=\"synthetic_job\",operator_id=\"cbc357ccb763df2852fee8c4fc7d55f2\",operator_name=\"Source:_events\",subtask_index=\"{s}\",task_attempt_id=\"{id}_{task}_{s}_0\",task_attempt_num=\"0\",task_id=\"{task}\",task_name=\"Source:_events\",tm_id=\"10_0_0_{s}:6122_00000{s}\""
    )
}

/// The source emits 2 × 450 = 900 records/s (`numRecordsOut`, 450/s per subtask).
fn source_out() -> String {
    (0..2u32)
        .map(|s| {
            series("flink_taskmanager_job_task_numRecordsOut", &flink_operator(s), |d| 1_000_000.0 + 450.0 * d as f64)
        })
        .collect()
}

#[test]
fn flinks_own_pending_records_give_the_lag_without_any_exporter() {
    // pendingRecords 1 485 250 + 50/s per subtask: 3 000 000 at the end, growing 100/s.
    // Produced = 900 + 100 = 1000 records/s: 3000 s old, aging 0.1 s per s; (3600 − 3000)
    // / 0.1 = 6000 s to loss: a warning (over 1 h, under a day).
    let extra: String = (0..2u32)
        .map(|s| {
            series("flink_taskmanager_job_task_operator_pendingRecords", &flink_operator(s), |d| {
                1_485_250.0 + 50.0 * d as f64
            })
        })
        .collect::<String>()
        + &source_out();
    let (snap, v) = diagnosed(&extra, Some(3600));
    assert_eq!(snap.source_lag.len(), 2);
    let h: Vec<_> = v.hazards.iter().filter(|h| h.kind == HazardKind::Retention).collect();
    assert_eq!(h.len(), 1, "{:?} {:?}", v.hazards, v.missing);
    assert_eq!((h[0].severity, h[0].time_to_loss_seconds), (Severity::Warning, Some(6000)), "{}", h[0].detail);
    assert!(v.notes.iter().all(|n| !n.contains("records-lag-max")), "{:?}", v.notes);
}

#[test]
fn flinks_records_lag_max_stands_in_for_pending_records_as_a_lower_bound_and_says_so() {
    // The same numbers as `records-lag-max` (KafkaSource's consumer metric, one partition
    // per subtask here, so the worst partition is all of it): the same warning, and a note.
    let extra: String = (0..2u32)
        .map(|s| {
            series(
                "flink_taskmanager_job_task_operator_KafkaSourceReader_KafkaConsumer_records_lag_max",
                &flink_operator(s),
                |d| 1_485_250.0 + 50.0 * d as f64,
            )
        })
        .collect::<String>()
        + &source_out();
    let (_, v) = diagnosed(&extra, Some(3600));
    let h: Vec<_> = v.hazards.iter().filter(|h| h.kind == HazardKind::Retention).collect();
    assert_eq!((h[0].severity, h[0].time_to_loss_seconds), (Severity::Warning, Some(6000)), "{}", h[0].detail);
    assert!(
        v.notes.iter().any(|n| n.starts_with("2 source subtask(s) report no `flink_taskmanager_job_task_operator_pendingRecords`: their lag is the Kafka consumer's `records-lag-max`")),
        "{:?}",
        v.notes
    );
}

#[test]
fn flinks_committed_offsets_with_an_exporters_log_offsets_decide_loss_from_offsets() {
    // KMinion gives the topic's watermarks but no committed offsets; the Flink source's
    // own `committedOffset` (labels `topic`, `partition`) completes them: 600 s by offsets.
    let topic = "topic_name=\"orders\",partition_id=\"0\",instance=\"kminion:8080\"";
    let committed = format!("{},topic=\"orders\",partition=\"0\"", flink_operator(0));
    let extra = [
        series("kminion_kafka_topic_partition_low_water_mark", topic, log_start),
        series("kminion_kafka_topic_partition_high_water_mark", topic, log_end),
        series(
            "flink_taskmanager_job_task_operator_KafkaSourceReader_topic_partition_committedOffset",
            &committed,
            |_| COMMITTED,
        ),
    ]
    .concat();
    let (snap, v) = diagnosed(&extra, Some(3600));
    let p = &snap.partitions[0];
    assert_eq!((p.exporter.as_str(), p.topic.as_str(), p.partition.as_str()), ("flink", "orders", "0"));
    assert_eq!(p.lag_records.last().unwrap().1, 3_000_000.0);
    assert_600_s_to_loss(&v);
}
