//! Kafka lag and retention of a job's input topics, from the Kafka exporters' series.
//!
//! The collector calls this module in two rounds (diagnosis.md §6, hazard `retention` §2):
//!
//! 1. [`job_inputs`] says which consumer group (and, optionally, topics) belong to the job;
//!    [`lag_queries`] asks every supported exporter for that group's per-partition lag and
//!    committed offsets.
//! 2. [`topics_seen`] reads the topics the group was seen reading from round 1's answers;
//!    [`offset_queries`] asks for those topics' log-start / log-end offsets, KMinion's
//!    topic info (whose `cleanup_policy`, `retention_ms` and `retention_bytes` labels carry
//!    the topic's effective config, for the keys KMinion's `configKeys` lists) and KMinion's
//!    topic log-dir size (bytes over all replicas).
//!
//! [`assemble`] then turns both rounds' answers into the snapshot's
//! [`PartitionLag`]s and [`TopicRetention`]s.
//!
//! Supported exporters and the series read (label names as each exporter writes them):
//!
//! | exporter | lag (records) | lag (s) | committed offset | log start | log end |
//! |---|---|---|---|---|---|
//! | `kafka_exporter` (danielqsj; also Strimzi's Kafka Exporter) | `kafka_consumergroup_lag` | – | `kafka_consumergroup_current_offset` | `kafka_topic_partition_oldest_offset` | `kafka_topic_partition_current_offset` |
//! | `kminion` | `kminion_kafka_consumer_group_topic_partition_lag` | – | – (the diagnosis takes high water mark − lag) | `kminion_kafka_topic_partition_low_water_mark` | `kminion_kafka_topic_partition_high_water_mark` |
//! | `kafka_lag_exporter` (seglo) | `kafka_consumergroup_group_lag` | `kafka_consumergroup_group_lag_seconds` | `kafka_consumergroup_group_offset` | `kafka_partition_earliest_offset` | `kafka_partition_latest_offset` |
//! | `redpanda` (`/public_metrics`) | log end − committed | – | `redpanda_kafka_consumer_group_committed_offset` | – | `redpanda_kafka_max_offset` |
//! | `flink` (the Kafka source's own) | log end − committed | – | `…_KafkaSourceReader_topic_partition_committedOffset` | – | – |
//!
//! Group / topic / partition labels: `consumergroup` / `topic` / `partition`
//! (kafka_exporter), `group_id` / `topic_name` / `partition_id` (KMinion), `group` /
//! `topic` / `partition` (kafka-lag-exporter), `redpanda_group` / `redpanda_topic` /
//! `redpanda_partition` (Redpanda); Flink's offsets are the job's (`job_id`, its task series
//! hygiene) with `topic` / `partition`, and count only beside an exporter's log offsets.
//! Every query is `max by (<topic label>, <partition label>) (…)`, so extra labels
//! (`instance`, `cluster_name`, `member_host`, `consumer_id`, `client_id`, Strimzi's
//! `strimzi_io_*` and pod labels) and exporter replicas do not split a partition into
//! several series. Where an exporter gives no lag in records, it is the log end less the
//! committed offset. Flink's `pendingRecords` per source subtask (and, without it, the Kafka
//! consumer's `records-lag-max`) is read by the collector as the source lag.
//!
//! Pure: no IO, no clock.

use std::collections::{BTreeMap, BTreeSet};

use crate::collect::query::{Agg, Aggregation, Query, QueryResult, ResultSeries, Selector};
use crate::config::KafkaConfig;
use crate::model::snapshot::{PartitionLag, Point, TopicRetention};

/// The consumer group and topics that feed one Flink job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaInputs {
    /// Consumer group id of the job's Kafka source (`group.id`).
    pub consumer_group: String,
    /// Topics the job reads, sorted, without duplicates or empty names. Empty: every topic
    /// the group is seen reading.
    pub topics: Vec<String>,
}

/// [`PartitionLag::exporter`] of series from danielqsj/kafka_exporter.
pub const KAFKA_EXPORTER: &str = "kafka_exporter";
/// [`PartitionLag::exporter`] of series from redpanda-data/kminion.
pub const KMINION: &str = "kminion";
/// [`PartitionLag::exporter`] of series from seglo/kafka-lag-exporter.
pub const KAFKA_LAG_EXPORTER: &str = "kafka_lag_exporter";
/// [`PartitionLag::exporter`] of Redpanda's own `/public_metrics`.
pub const REDPANDA: &str = "redpanda";
/// [`PartitionLag::exporter`] of the Flink Kafka source's own per-partition offsets.
pub const FLINK: &str = "flink";
/// The Flink Kafka source's committed offset per partition (`KafkaSourceReader.topic.<t>
/// .partition.<p>.committedOffset`; the reporter turns `topic` and `partition` into labels),
/// and the value it reports before the first commit.
pub const FLINK_COMMITTED_OFFSET: &str =
    "flink_taskmanager_job_task_operator_KafkaSourceReader_topic_partition_committedOffset";

/// KMinion's topic info series: value 1, topic config in labels.
pub const KMINION_TOPIC_INFO: &str = "kminion_kafka_topic_info";
/// The label of [`KMINION_TOPIC_INFO`] holding `retention.ms` (KMinion turns the config
/// key's dots into underscores; it is there when `minion.topics.infoMetric.configKeys`
/// lists `retention.ms`). A string: milliseconds, `-1` for unlimited.
pub const KMINION_RETENTION_LABEL: &str = "retention_ms";
/// The label of [`KMINION_TOPIC_INFO`] holding `cleanup.policy` (with `cleanup.policy` in
/// `configKeys`, KMinion's default list): `delete`, `compact` or `compact,delete`.
pub const KMINION_CLEANUP_POLICY_LABEL: &str = "cleanup_policy";
/// The label of [`KMINION_TOPIC_INFO`] holding `retention.bytes` (bytes per partition, `-1`
/// for unlimited), when `configKeys` lists it.
pub const KMINION_RETENTION_BYTES_LABEL: &str = "retention_bytes";
/// KMinion's summed size of a topic's partitions over all brokers, replicas included
/// (from `DescribeLogDirs`).
pub const KMINION_TOPIC_BYTES: &str = "kminion_kafka_topic_log_dir_size_total_bytes";
/// KMinion's topic label.
const KMINION_TOPIC_LABEL: &str = "topic_name";
/// The name of the topic-size query in round B.
const TOPIC_BYTES_QUERY: &str = "kafka/kminion/topic_bytes";

/// The name of the topic-info query in round B.
const TOPIC_INFO_QUERY: &str = "kafka/kminion/topic_info";

/// A per-partition quantity an exporter may report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quantity {
    /// Lag in records.
    Lag,
    /// Lag in seconds.
    LagSeconds,
    /// The group's committed offset.
    ConsumerOffset,
    /// The partition's log-start (oldest retained) offset.
    LogStart,
    /// The partition's log-end (high-water mark) offset.
    LogEnd,
}

impl Quantity {
    /// Quantities of a consumer group (round A).
    const GROUP: [Quantity; 3] = [Quantity::Lag, Quantity::LagSeconds, Quantity::ConsumerOffset];
    /// Quantities of a topic partition, whoever reads it (round B).
    const LOG: [Quantity; 2] = [Quantity::LogStart, Quantity::LogEnd];

    fn key(self) -> &'static str {
        match self {
            Quantity::Lag => "lag_records",
            Quantity::LagSeconds => "lag_seconds",
            Quantity::ConsumerOffset => "consumer_offset",
            Quantity::LogStart => "log_start_offset",
            Quantity::LogEnd => "log_end_offset",
        }
    }
}

/// One exporter's series and label names.
struct Exporter {
    name: &'static str,
    group_label: &'static str,
    topic_label: &'static str,
    partition_label: &'static str,
    lag: Option<&'static str>,
    lag_seconds: Option<&'static str>,
    consumer_offset: Option<&'static str>,
    log_start: Option<&'static str>,
    log_end: Option<&'static str>,
    /// The value the exporter writes into lag and committed offset when the group has no
    /// committed offset on the partition: left out.
    no_committed_offset: Option<f64>,
}

impl Exporter {
    /// Whether the group's series are found by the group label; Flink's own offsets are
    /// found by the job instead ([`flink_offset_queries`]).
    fn by_group(&self) -> bool {
        !self.group_label.is_empty()
    }
}

impl Exporter {
    fn metric(&self, q: Quantity) -> Option<&'static str> {
        match q {
            Quantity::Lag => self.lag,
            Quantity::LagSeconds => self.lag_seconds,
            Quantity::ConsumerOffset => self.consumer_offset,
            Quantity::LogStart => self.log_start,
            Quantity::LogEnd => self.log_end,
        }
    }

    /// `max by (<topic>, <partition>)`.
    fn by_partition(&self) -> Aggregation {
        Aggregation::new(Agg::Max, &[self.topic_label, self.partition_label])
    }
}

/// The supported exporters; also the order in which a partition's log offsets are borrowed
/// from another exporter (see [`assemble`]).
const EXPORTERS: [Exporter; 5] = [
    Exporter {
        name: KAFKA_EXPORTER,
        group_label: "consumergroup",
        topic_label: "topic",
        partition_label: "partition",
        lag: Some("kafka_consumergroup_lag"),
        lag_seconds: None,
        consumer_offset: Some("kafka_consumergroup_current_offset"),
        log_start: Some("kafka_topic_partition_oldest_offset"),
        log_end: Some("kafka_topic_partition_current_offset"),
        no_committed_offset: Some(-1.0),
    },
    Exporter {
        name: KMINION,
        group_label: "group_id",
        topic_label: KMINION_TOPIC_LABEL,
        partition_label: "partition_id",
        lag: Some("kminion_kafka_consumer_group_topic_partition_lag"),
        lag_seconds: None,
        consumer_offset: None,
        log_start: Some("kminion_kafka_topic_partition_low_water_mark"),
        log_end: Some("kminion_kafka_topic_partition_high_water_mark"),
        no_committed_offset: None,
    },
    Exporter {
        name: KAFKA_LAG_EXPORTER,
        group_label: "group",
        topic_label: "topic",
        partition_label: "partition",
        lag: Some("kafka_consumergroup_group_lag"),
        lag_seconds: Some("kafka_consumergroup_group_lag_seconds"),
        consumer_offset: Some("kafka_consumergroup_group_offset"),
        log_start: Some("kafka_partition_earliest_offset"),
        log_end: Some("kafka_partition_latest_offset"),
        no_committed_offset: None,
    },
    // Redpanda's `/public_metrics`: no per-partition lag (only `…_lag_max` / `…_lag_sum`
    // per group, and only with `enable_consumer_group_metrics` holding `consumer_lag`), no
    // log start; the lag is the high watermark less the committed offset.
    Exporter {
        name: REDPANDA,
        group_label: "redpanda_group",
        topic_label: "redpanda_topic",
        partition_label: "redpanda_partition",
        lag: None,
        lag_seconds: None,
        consumer_offset: Some("redpanda_kafka_consumer_group_committed_offset"),
        log_start: None,
        log_end: Some("redpanda_kafka_max_offset"),
        no_committed_offset: None,
    },
    // Flink's Kafka source: committed offsets per partition, found by the job's id, no
    // log offsets of its own (they come from an exporter above).
    Exporter {
        name: FLINK,
        group_label: "",
        topic_label: "topic",
        partition_label: "partition",
        lag: None,
        lag_seconds: None,
        consumer_offset: Some(FLINK_COMMITTED_OFFSET),
        log_start: None,
        log_end: None,
        no_committed_offset: Some(-1.0),
    },
];

/// `kafka/<exporter>/<quantity>`, e.g. `kafka/kminion/lag_records`.
fn query_name(exporter: &str, q: Quantity) -> String {
    format!("kafka/{exporter}/{}", q.key())
}

/// Non-empty names, sorted, once each.
fn clean_topics(topics: &[String]) -> Vec<String> {
    let set: BTreeSet<&String> = topics.iter().filter(|t| !t.is_empty()).collect();
    set.into_iter().cloned().collect()
}

/// Which consumer group and topics to look at for a job.
///
/// The `[[kafka.jobs]]` entry of the job (matched by Flink name, sanitized name or job id,
/// see [`KafkaConfig::job`]) gives its `consumer_group` and `topics`; an entry without a
/// consumer group, or no entry, means a consumer group named like the job (`job_name`, the
/// Flink name). Topics come only from configuration (empty: all the group reads). Pure.
pub fn job_inputs(config: &KafkaConfig, job_name: &str, job_id: &str) -> KafkaInputs {
    match config.job(job_name, job_id) {
        Some(entry) => KafkaInputs {
            consumer_group: entry
                .consumer_group
                .clone()
                .filter(|g| !g.is_empty())
                .unwrap_or_else(|| job_name.to_string()),
            topics: clean_topics(&entry.topics),
        },
        None => KafkaInputs { consumer_group: job_name.to_string(), topics: Vec::new() },
    }
}

fn range(selector: Selector, aggregation: Aggregation, start_ms: i64, end_ms: i64, step_ms: i64) -> Query {
    Query::Range { selector, aggregation: Some(aggregation), start_ms, end_ms, step_ms }
}

/// Round A: the consumer group's per-partition series from every supported exporter.
///
/// Returns `(name, query)` pairs, one per exporter and quantity it reports: names
/// `kafka/<exporter>/lag_records`, `…/lag_seconds` (kafka-lag-exporter only) and
/// `…/consumer_offset` (not KMinion), with `<exporter>` one of [`KAFKA_EXPORTER`],
/// [`KMINION`], [`KAFKA_LAG_EXPORTER`]. Each is a [`Query::Range`] over
/// `[start_ms, end_ms]` (Unix ms) every `step_ms` ms, e.g.
/// `max by (topic, partition) ({__name__="kafka_consumergroup_lag", consumergroup="orders-job", topic=~"orders"})`;
/// the topic matcher is there only when `inputs.topics` is not empty. Values: records,
/// seconds, offsets. No queries when the consumer group is empty. Pure.
pub fn lag_queries(inputs: &KafkaInputs, start_ms: i64, end_ms: i64, step_ms: i64) -> Vec<(String, Query)> {
    if inputs.consumer_group.is_empty() {
        return Vec::new();
    }
    let topics = clean_topics(&inputs.topics);
    let mut out = Vec::new();
    for e in EXPORTERS.iter().filter(|e| e.by_group()) {
        for q in Quantity::GROUP {
            let Some(metric) = e.metric(q) else { continue };
            let mut selector = Selector::metric(metric).with(e.group_label, &inputs.consumer_group);
            if !topics.is_empty() {
                selector = selector.with_one_of(e.topic_label, &topics);
            }
            out.push((query_name(e.name, q), range(selector, e.by_partition(), start_ms, end_ms, step_ms)));
        }
    }
    out
}

/// Round A, Flink's side: the committed offset of every partition the job's Kafka source
/// reads, `max by (topic, partition) (<FLINK_COMMITTED_OFFSET>{job_id=…})`, under the name
/// `kafka/flink/consumer_offset`. `task` turns a selector into the job's task selector (its
/// id, deployment and series hygiene: only the newest attempt counts, as a restored
/// attempt's offsets may be lower than a superseded one's). Pure.
pub fn flink_offset_queries(
    inputs: &KafkaInputs,
    task: impl Fn(Selector) -> Selector,
    start_ms: i64,
    end_ms: i64,
    step_ms: i64,
) -> Vec<(String, Query)> {
    let topics = clean_topics(&inputs.topics);
    let e = EXPORTERS.iter().find(|e| e.name == FLINK).expect("listed");
    let mut selector = task(Selector::metric(FLINK_COMMITTED_OFFSET));
    if !topics.is_empty() {
        selector = selector.with_one_of(e.topic_label, &topics);
    }
    vec![(query_name(FLINK, Quantity::ConsumerOffset), range(selector, e.by_partition(), start_ms, end_ms, step_ms))]
}

/// The topics the group was seen reading: the topic labels of round A's answers (keyed by
/// the names [`lag_queries`] gave), together with the configured `inputs.topics`. Sorted,
/// once each, no empty name. Pure.
pub fn topics_seen(inputs: &KafkaInputs, answers: &BTreeMap<String, QueryResult>) -> Vec<String> {
    let mut topics: BTreeSet<String> = clean_topics(&inputs.topics).into_iter().collect();
    for e in &EXPORTERS {
        for q in Quantity::GROUP {
            for s in answers.get(&query_name(e.name, q)).into_iter().flatten() {
                let topic = s.label(e.topic_label);
                if !topic.is_empty() {
                    topics.insert(topic.to_string());
                }
            }
        }
    }
    topics.into_iter().collect()
}

/// Round B: per-partition log offsets of these topics from every exporter, and KMinion's
/// topic info.
///
/// Names `kafka/<exporter>/log_start_offset` and `…/log_end_offset` (offsets), each
/// `max by (<topic>, <partition>) ({__name__="…", <topic>=~"t1|t2"})`; and
/// `kafka/kminion/topic_info`:
/// `max by (topic_name, retention_ms) ({__name__="kminion_kafka_topic_info", topic_name=~"t1|t2"})`,
/// whose result series carry the `retention_ms` label (value 1). All [`Query::Range`] over
/// `[start_ms, end_ms]` (Unix ms) every `step_ms` ms. No queries for no topics. Pure.
pub fn offset_queries(topics: &[String], start_ms: i64, end_ms: i64, step_ms: i64) -> Vec<(String, Query)> {
    let topics = clean_topics(topics);
    if topics.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for e in &EXPORTERS {
        for q in Quantity::LOG {
            let Some(metric) = e.metric(q) else { continue };
            let selector = Selector::metric(metric).with_one_of(e.topic_label, &topics);
            out.push((query_name(e.name, q), range(selector, e.by_partition(), start_ms, end_ms, step_ms)));
        }
    }
    let selector = Selector::metric(KMINION_TOPIC_INFO).with_one_of(KMINION_TOPIC_LABEL, &topics);
    let by = Aggregation::new(
        Agg::Max,
        &[
            KMINION_TOPIC_LABEL,
            KMINION_RETENTION_LABEL,
            KMINION_CLEANUP_POLICY_LABEL,
            KMINION_RETENTION_BYTES_LABEL,
            "partition_count",
            "replication_factor",
        ],
    );
    out.push((TOPIC_INFO_QUERY.to_string(), range(selector, by, start_ms, end_ms, step_ms)));
    let selector = Selector::metric(KMINION_TOPIC_BYTES).with_one_of(KMINION_TOPIC_LABEL, &topics);
    let by = Aggregation::new(Agg::Max, &[KMINION_TOPIC_LABEL]);
    out.push((TOPIC_BYTES_QUERY.to_string(), range(selector, by, start_ms, end_ms, step_ms)));
    out
}

/// KMinion's `retention_ms` label: `Some(Some(ms))` for a whole number of ms ≥ 0,
/// `Some(None)` for `-1` (unlimited), `None` for anything else (`N/A` when the config key is
/// missing, `nil`, garbage, other negatives, overflow).
fn parse_retention_label(value: &str) -> Option<Option<i64>> {
    match value.trim().parse::<i64>() {
        Ok(-1) => Some(None),
        Ok(ms) if ms >= 0 => Some(Some(ms)),
        _ => None,
    }
}

/// Points by `(topic, partition)`.
type ByPartition = BTreeMap<(String, String), Vec<Point>>;

/// One answer's series by `(topic, partition)`, points kept only when finite and not the
/// exporter's "no committed offset" value (`sentinel`).
fn by_partition(series: Option<&QueryResult>, e: &Exporter, sentinel: Option<f64>) -> ByPartition {
    let mut out = ByPartition::new();
    for s in series.into_iter().flatten() {
        let (topic, partition) = (s.label(e.topic_label), s.label(e.partition_label));
        if topic.is_empty() || partition.is_empty() {
            continue;
        }
        let points: Vec<Point> =
            s.points.iter().copied().filter(|&(_, v)| v.is_finite() && Some(v) != sentinel).collect();
        if !points.is_empty() {
            out.entry((topic.to_string(), partition.to_string())).or_default().extend(points);
        }
    }
    for points in out.values_mut() {
        points.sort_by_key(|p| p.0);
    }
    out
}

/// Builds the snapshot's Kafka part from both rounds' answers (keyed by the names
/// [`lag_queries`] and [`offset_queries`] gave).
///
/// Partitions: one [`PartitionLag`] per (exporter, topic, partition) on which the group has
/// at least one lag or committed-offset point, sorted by topic, partition (numerically),
/// exporter; two exporters reporting the same partition give two entries. Series are per
/// step, Unix ms, oldest first: lag in records, lag in seconds (kafka-lag-exporter only),
/// committed offset (not KMinion), log-start and log-end offsets. An exporter's own log
/// offsets are used; when it has none for the partition they are borrowed from the first
/// exporter, in the order kafka_exporter, KMinion, kafka-lag-exporter, that has them (they
/// describe the topic, not the exporter). Non-finite values and kafka_exporter's `-1`
/// (no committed offset) are left out; vectors are empty where nothing is reported.
///
/// Retention: per topic and field (`retention.ms`, `cleanup.policy`, `retention.bytes`),
/// the topic's value in `config` (`from: "config"`), then KMinion's topic-info label
/// (`from: "kminion"`; `-1` gives `None`, unlimited; unparsable values such as `N/A` are
/// ignored), then `config.broker_defaults` (`from: "broker default"`); the partition's size
/// from KMinion's topic log-dir size ÷ (partitions × replicas). When a label changed
/// during the range, the series seen last (then the one that appeared last) wins; a tie goes
/// to the shorter retention. Sorted by topic. Pure.
pub fn assemble(
    inputs: &KafkaInputs,
    answers: &BTreeMap<String, QueryResult>,
    config: &KafkaConfig,
) -> (Vec<PartitionLag>, Vec<TopicRetention>) {
    // [exporter][LogStart, LogEnd] → (topic, partition) → points.
    let logs: Vec<[ByPartition; 2]> = EXPORTERS
        .iter()
        .map(|e| Quantity::LOG.map(|q| by_partition(answers.get(&query_name(e.name, q)), e, None)))
        .collect();

    let mut partitions = Vec::new();
    for (i, e) in EXPORTERS.iter().enumerate() {
        let [lag, lag_seconds, consumer_offset] =
            Quantity::GROUP.map(|q| by_partition(answers.get(&query_name(e.name, q)), e, e.no_committed_offset));
        let keys: BTreeSet<&(String, String)> =
            lag.keys().chain(lag_seconds.keys()).chain(consumer_offset.keys()).collect();
        for key in keys {
            let log = |which: usize| -> Vec<Point> {
                std::iter::once(i)
                    .chain(0..EXPORTERS.len())
                    .find_map(|j| logs[j][which].get(key))
                    .cloned()
                    .unwrap_or_default()
            };
            let own = |m: &ByPartition| m.get(key).cloned().unwrap_or_default();
            let (log_start_offset, log_end_offset) = (log(0), log(1));
            // Flink's offsets say something about retention only beside an exporter's
            // log offsets.
            if !e.by_group() && log_start_offset.is_empty() && log_end_offset.is_empty() {
                continue;
            }
            let consumer_offset = own(&consumer_offset);
            let mut lag_records = own(&lag);
            if lag_records.is_empty() {
                lag_records = behind(&log_end_offset, &consumer_offset);
            }
            partitions.push(PartitionLag {
                topic: key.0.clone(),
                partition: key.1.clone(),
                consumer_group: inputs.consumer_group.clone(),
                exporter: e.name.to_string(),
                lag_records,
                lag_seconds: own(&lag_seconds),
                consumer_offset,
                log_start_offset,
                log_end_offset,
            });
        }
    }
    partitions.sort_by(|a, b| {
        let numeric = |p: &PartitionLag| p.partition.parse::<u64>().unwrap_or(u64::MAX);
        (a.topic.as_str(), numeric(a), a.partition.as_str(), a.exporter.as_str()).cmp(&(
            b.topic.as_str(),
            numeric(b),
            b.partition.as_str(),
            b.exporter.as_str(),
        ))
    });

    let retention = topic_retention(config, answers, partitions.iter().map(|p| p.topic.as_str()));
    (partitions, retention)
}

/// Each topic's retention settings, field by field: the topic's value in `config` (`from:
/// "config"`), else KMinion's label (`"kminion"`), else the configured broker default
/// (`"broker default"`). A topic is listed when its `retention.ms` is known, or when it is
/// compacted (`compact` alone: no retention by age or size applies, `retention_ms: None`).
/// Topics: those configured or labelled, and `seen` (the partitions' topics) for the
/// broker defaults. Sorted by topic.
fn topic_retention<'a>(
    config: &KafkaConfig,
    answers: &BTreeMap<String, QueryResult>,
    seen: impl Iterator<Item = &'a str>,
) -> Vec<TopicRetention> {
    let info = kminion_topic_info(answers.get(TOPIC_INFO_QUERY));
    let bytes = kminion_topic_bytes(answers.get(TOPIC_BYTES_QUERY));
    let broker = &config.broker_defaults;
    let mut topics: BTreeSet<&str> = seen.collect();
    topics.extend(config.retention.keys().map(String::as_str));
    topics.extend(info.keys().map(String::as_str));
    let mut out = Vec::new();
    for topic in topics {
        let kminion = info.get(topic);
        let retention = config
            .retention
            .get(topic)
            .map(|ms| (ms.as_ms(), "config"))
            .or_else(|| kminion.and_then(|k| k.retention_ms).map(|ms| (ms, KMINION)))
            .or_else(|| broker.retention.map(|ms| (ms.as_ms(), BROKER_DEFAULT)));
        let policy = config
            .cleanup_policy
            .get(topic)
            .map(|p| (*p, "config"))
            .or_else(|| kminion.and_then(|k| k.cleanup_policy).map(|p| (p, KMINION)))
            .or_else(|| broker.cleanup_policy.map(|p| (p, BROKER_DEFAULT)));
        let retention_bytes = config
            .retention_bytes
            .get(topic)
            .map(|b| unlimited_below_zero(*b))
            .or_else(|| kminion.and_then(|k| k.retention_bytes))
            .or_else(|| broker.retention_bytes.map(unlimited_below_zero))
            .flatten();
        let replicas_and_partitions = kminion.and_then(|k| k.partitions.zip(k.replicas)).map(|(p, r)| p * r);
        let partition_bytes =
            bytes.get(topic).zip(replicas_and_partitions.filter(|n| *n > 0)).map(|(total, n)| total / n as f64);
        let compacted = policy.is_some_and(|(p, _)| !p.deletes());
        let (retention_ms, from) = match retention {
            Some(r) => r,
            None if compacted => (None, policy.map_or(KMINION, |(_, from)| from)),
            None => continue,
        };
        out.push(TopicRetention {
            topic: topic.to_string(),
            retention_ms,
            from: from.into(),
            cleanup_policy: policy.map(|(p, _)| p),
            cleanup_policy_from: policy.map(|(_, from)| from.to_string()),
            retention_bytes,
            partition_bytes,
        });
    }
    out
}

/// [`TopicRetention::from`] of a value taken from `[kafka.broker_defaults]`.
pub const BROKER_DEFAULT: &str = "broker default";

/// A byte count where `-1` (any negative) means unlimited.
fn unlimited_below_zero(bytes: i64) -> Option<i64> {
    (bytes >= 0).then_some(bytes)
}

/// Records behind at each time both are known: log end less committed offset (never
/// below 0: the committed offset of a partition can run a scrape ahead of its log end).
fn behind(log_end: &[Point], committed: &[Point]) -> Vec<Point> {
    let committed: BTreeMap<i64, f64> = committed.iter().copied().collect();
    log_end.iter().filter_map(|&(t, end)| committed.get(&t).map(|c| (t, (end - c).max(0.0)))).collect()
}

/// What KMinion's topic info says of a topic; `None` where its label is missing or
/// unparsable (`N/A` when the config key is not described).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct TopicInfo {
    /// `Some(None)`: `-1`, unlimited.
    retention_ms: Option<Option<i64>>,
    cleanup_policy: Option<crate::model::snapshot::CleanupPolicy>,
    /// `Some(None)`: `-1`, unlimited.
    retention_bytes: Option<Option<i64>>,
    partitions: Option<u64>,
    replicas: Option<u64>,
}

/// Per topic, KMinion's topic info labels (see [`assemble`]). When a label changed during
/// the range, the series seen last (then the one that appeared last) wins; a tie goes to
/// the shorter retention.
fn kminion_topic_info(series: Option<&QueryResult>) -> BTreeMap<String, TopicInfo> {
    // Per topic: (last point, first point, info) of the winning series.
    let mut best: BTreeMap<String, (i64, i64, TopicInfo)> = BTreeMap::new();
    for s in series.into_iter().flatten() {
        let topic = s.label(KMINION_TOPIC_LABEL);
        let info = TopicInfo {
            retention_ms: parse_retention_label(s.label(KMINION_RETENTION_LABEL)),
            cleanup_policy: crate::model::snapshot::CleanupPolicy::parse(s.label(KMINION_CLEANUP_POLICY_LABEL)),
            retention_bytes: parse_retention_label(s.label(KMINION_RETENTION_BYTES_LABEL)),
            partitions: s.label("partition_count").trim().parse().ok(),
            replicas: s.label("replication_factor").trim().parse().ok(),
        };
        if info.retention_ms.is_none() && info.cleanup_policy.is_none() && info.retention_bytes.is_none() {
            continue;
        }
        let (Some(first), Some(last)) = (first_t(s), s.points.last().map(|p| p.0)) else { continue };
        if topic.is_empty() {
            continue;
        }
        let candidate = (last, first, info);
        let key = |i: &TopicInfo| i.retention_ms.flatten().unwrap_or(i64::MAX);
        best.entry(topic.to_string())
            .and_modify(|held| {
                let newer = (candidate.0, candidate.1) > (held.0, held.1);
                let tie = (candidate.0, candidate.1) == (held.0, held.1);
                if newer || (tie && key(&candidate.2) < key(&held.2)) {
                    *held = candidate;
                }
            })
            .or_insert(candidate);
    }
    best.into_iter().map(|(topic, (_, _, info))| (topic, info)).collect()
}

/// Per topic, KMinion's newest summed log-dir size, bytes.
fn kminion_topic_bytes(series: Option<&QueryResult>) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for s in series.into_iter().flatten() {
        let topic = s.label(KMINION_TOPIC_LABEL);
        if let Some(v) = s.points.iter().rev().map(|p| p.1).find(|v| v.is_finite() && *v >= 0.0)
            && !topic.is_empty()
        {
            out.insert(topic.to_string(), v);
        }
    }
    out
}

fn first_t(s: &ResultSeries) -> Option<i64> {
    s.points.first().map(|p| p.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::store::SeriesStore;
    use crate::config::{BrokerDefaults, KafkaJob};
    use crate::diagnose::slope_per_s;
    use crate::model::snapshot::CleanupPolicy;

    /// Start of every test range, Unix ms.
    const T0: i64 = 1_800_000_000_000;
    /// Scrape interval of the hand-built exporters, ms.
    const SCRAPE: i64 = 30_000;
    /// Step of the range queries, ms: two scrapes.
    const STEP: i64 = 60_000;
    /// The range is [T0, T0 + 5 min]: evaluation points k = 0..=5 at T0 + k min.
    const END: i64 = T0 + 5 * STEP;
    const GROUP: &str = "orders-job";

    /// Evaluation point k (0..=5), Unix ms.
    fn at(k: i64) -> i64 {
        T0 + k * STEP
    }

    /// The expected series at the 6 evaluation points.
    fn expect(f: impl Fn(i64) -> f64) -> Vec<Point> {
        (0..=5).map(|k| (at(k), f(k))).collect()
    }

    /// Scrapes i = 0..=10 at T0 + 30 s · i with value f(i). A range query at evaluation
    /// point k takes the latest scrape at or before it: scrape i = 2k.
    fn scrape(store: &mut SeriesStore, name: &str, labels: &[(&str, &str)], f: impl Fn(i64) -> f64) {
        scrape_between(store, name, labels, 0, 10, f);
    }

    fn scrape_between(
        store: &mut SeriesStore,
        name: &str,
        labels: &[(&str, &str)],
        from: i64,
        to: i64,
        f: impl Fn(i64) -> f64,
    ) {
        for i in from..=to {
            store.push(name, labels, T0 + SCRAPE * i, f(i));
        }
    }

    fn inputs(group: &str, topics: &[&str]) -> KafkaInputs {
        KafkaInputs { consumer_group: group.into(), topics: topics.iter().map(|t| t.to_string()).collect() }
    }

    /// Both rounds as the collector runs them, evaluated over the store.
    fn answers(store: &SeriesStore, inputs: &KafkaInputs) -> BTreeMap<String, QueryResult> {
        let mut answers: BTreeMap<String, QueryResult> =
            lag_queries(inputs, T0, END, STEP).into_iter().map(|(name, q)| (name, store.evaluate(&q))).collect();
        let topics = topics_seen(inputs, &answers);
        for (name, q) in offset_queries(&topics, T0, END, STEP) {
            answers.insert(name, store.evaluate(&q));
        }
        answers
    }

    fn run(
        store: &SeriesStore,
        inputs: &KafkaInputs,
        config: &KafkaConfig,
    ) -> (Vec<PartitionLag>, Vec<TopicRetention>) {
        assemble(inputs, &answers(store, inputs), config)
    }

    fn no_config() -> KafkaConfig {
        KafkaConfig::default()
    }

    /// `[kafka.retention]` alone.
    fn retention_config(topics: &[(&str, &str)]) -> KafkaConfig {
        let retention = topics.iter().map(|(t, d)| (t.to_string(), d.parse().unwrap())).collect();
        KafkaConfig { retention, ..KafkaConfig::default() }
    }

    fn find<'a>(partitions: &'a [PartitionLag], exporter: &str, topic: &str, partition: &str) -> &'a PartitionLag {
        partitions
            .iter()
            .find(|p| p.exporter == exporter && p.topic == topic && p.partition == partition)
            .unwrap_or_else(|| panic!("no {exporter} {topic}/{partition} in {partitions:#?}"))
    }

    fn kafka_exporter_labels<'a>(group: &'a str, partition: &'a str, instance: &'a str) -> Vec<(&'a str, &'a str)> {
        vec![
            ("consumergroup", group),
            ("topic", "orders"),
            ("partition", partition),
            ("instance", instance),
            ("job", "kafka-exporter"),
        ]
    }

    #[test]
    fn kafka_exporter_series_become_one_partition_lag_per_partition_without_the_no_offset_sentinel() {
        let mut s = SeriesStore::new();
        // Partition 0, scraped by two exporter replicas; max keeps the higher one.
        scrape(&mut s, "kafka_consumergroup_lag", &kafka_exporter_labels(GROUP, "0", "ke-1:9308"), |i| {
            1000.0 + 100.0 * i as f64
        });
        scrape(&mut s, "kafka_consumergroup_lag", &kafka_exporter_labels(GROUP, "0", "ke-2:9308"), |i| {
            990.0 + 100.0 * i as f64
        });
        scrape(&mut s, "kafka_consumergroup_current_offset", &kafka_exporter_labels(GROUP, "0", "ke-1:9308"), |i| {
            5000.0 + 50.0 * i as f64
        });
        let topic_p0 = [("topic", "orders"), ("partition", "0"), ("instance", "ke-1:9308")];
        scrape(&mut s, "kafka_topic_partition_oldest_offset", &topic_p0, |i| 4000.0 + 80.0 * i as f64);
        scrape(&mut s, "kafka_topic_partition_current_offset", &topic_p0, |i| 6000.0 + 150.0 * i as f64);
        // Partition 1: the group never committed (-1 throughout).
        scrape(&mut s, "kafka_consumergroup_lag", &kafka_exporter_labels(GROUP, "1", "ke-1:9308"), |_| -1.0);
        scrape(&mut s, "kafka_consumergroup_current_offset", &kafka_exporter_labels(GROUP, "1", "ke-1:9308"), |_| -1.0);
        let topic_p1 = [("topic", "orders"), ("partition", "1"), ("instance", "ke-1:9308")];
        scrape(&mut s, "kafka_topic_partition_oldest_offset", &topic_p1, |_| 0.0);
        scrape(&mut s, "kafka_topic_partition_current_offset", &topic_p1, |_| 0.0);
        // Partition 2: first commit between scrape 3 and 4.
        let p2 = |i: i64, v: f64| if i < 4 { -1.0 } else { v };
        scrape(&mut s, "kafka_consumergroup_lag", &kafka_exporter_labels(GROUP, "2", "ke-1:9308"), |i| p2(i, 50.0));
        scrape(&mut s, "kafka_consumergroup_current_offset", &kafka_exporter_labels(GROUP, "2", "ke-1:9308"), |i| {
            p2(i, 700.0)
        });
        // Another group on the same topic.
        scrape(
            &mut s,
            "kafka_consumergroup_lag",
            &kafka_exporter_labels("orders-job-replay", "0", "ke-1:9308"),
            |_| 999_999.0,
        );
        s.finish();

        let (partitions, retention) = run(&s, &inputs(GROUP, &[]), &no_config());

        // Partition 1 has no committed offset at all: left out.
        assert_eq!(partitions.len(), 2, "{partitions:#?}");
        let p0 = find(&partitions, KAFKA_EXPORTER, "orders", "0");
        assert_eq!(p0.consumer_group, GROUP);
        // Evaluation point k reads scrape 2k: lag 1000 + 100·2k = 1000 + 200k (the replica
        // at 990 + 200k is lower; the other group's 999 999 is not selected).
        assert_eq!(p0.lag_records, expect(|k| 1000.0 + 200.0 * k as f64));
        // 5000 + 50·2k.
        assert_eq!(p0.consumer_offset, expect(|k| 5000.0 + 100.0 * k as f64));
        // 4000 + 80·2k and 6000 + 150·2k (= committed + lag: 5000 + 100k + 1000 + 200k).
        assert_eq!(p0.log_start_offset, expect(|k| 4000.0 + 160.0 * k as f64));
        assert_eq!(p0.log_end_offset, expect(|k| 6000.0 + 300.0 * k as f64));
        assert!(p0.lag_seconds.is_empty());
        // Partition 2: k = 0, 1 read scrapes 0 and 2 (-1, left out); k = 2..=5 read 4..=10.
        let p2 = find(&partitions, KAFKA_EXPORTER, "orders", "2");
        assert_eq!(p2.lag_records, (2..=5).map(|k| (at(k), 50.0)).collect::<Vec<_>>());
        assert_eq!(p2.consumer_offset, (2..=5).map(|k| (at(k), 700.0)).collect::<Vec<_>>());
        assert!(p2.log_start_offset.is_empty(), "no log offsets were scraped for partition 2");
        // No KMinion topic info, no configuration: no retention.
        assert!(retention.is_empty());
    }

    #[test]
    fn kminion_series_give_lag_and_watermarks_and_the_retention_label() {
        let mut s = SeriesStore::new();
        let lag = [("group_id", GROUP), ("topic_name", "orders"), ("partition_id", "0"), ("instance", "kminion:8080")];
        scrape(&mut s, "kminion_kafka_consumer_group_topic_partition_lag", &lag, |i| 2000.0 + 10.0 * i as f64);
        let other = [("group_id", "billing"), ("topic_name", "orders"), ("partition_id", "0")];
        scrape(&mut s, "kminion_kafka_consumer_group_topic_partition_lag", &other, |_| 5.0);
        let wm = [("topic_name", "orders"), ("partition_id", "0"), ("instance", "kminion:8080")];
        scrape(&mut s, "kminion_kafka_topic_partition_low_water_mark", &wm, |i| 100.0 + 5.0 * i as f64);
        scrape(&mut s, "kminion_kafka_topic_partition_high_water_mark", &wm, |i| 9000.0 + 30.0 * i as f64);
        let info = [
            ("topic_name", "orders"),
            ("partition_count", "3"),
            ("replication_factor", "3"),
            ("cleanup_policy", "delete"),
            ("retention_ms", "604800000"),
            ("instance", "kminion:8080"),
        ];
        scrape(&mut s, KMINION_TOPIC_INFO, &info, |_| 1.0);
        s.finish();

        let (partitions, retention) = run(&s, &inputs(GROUP, &[]), &no_config());

        assert_eq!(partitions.len(), 1, "{partitions:#?}");
        let p = find(&partitions, KMINION, "orders", "0");
        // 2000 + 10·2k; watermarks 100 + 5·2k and 9000 + 30·2k.
        assert_eq!(p.lag_records, expect(|k| 2000.0 + 20.0 * k as f64));
        assert_eq!(p.log_start_offset, expect(|k| 100.0 + 10.0 * k as f64));
        assert_eq!(p.log_end_offset, expect(|k| 9000.0 + 60.0 * k as f64));
        // KMinion reports neither lag in seconds nor per-partition committed offsets.
        assert!(p.lag_seconds.is_empty() && p.consumer_offset.is_empty());
        // 7 d = 7 × 86 400 000 ms.
        assert_eq!(retention, vec![delete(TopicRetention::by_time("orders", Some(604_800_000), "kminion"))]);
    }

    #[test]
    fn kafka_lag_exporter_series_are_not_split_by_a_member_change_or_the_cluster_name() {
        let mut s = SeriesStore::new();
        let member = |host: &'static str, consumer: &'static str, partition: &'static str| {
            vec![
                ("cluster_name", "prod"),
                ("group", GROUP),
                ("topic", "orders"),
                ("partition", partition),
                ("member_host", host),
                ("consumer_id", consumer),
                ("client_id", "consumer-1"),
            ]
        };
        // The partition moves to another member at scrape 6 (T0 + 3 min): two raw series.
        let before = member("/10.0.0.7", "consumer-1-abc", "0");
        let after = member("/10.0.0.8", "consumer-1-def", "0");
        for (labels, from, to) in [(&before, 0, 5), (&after, 6, 10)] {
            scrape_between(&mut s, "kafka_consumergroup_group_lag", labels, from, to, |i| 5000.0 + 300.0 * i as f64);
            scrape_between(&mut s, "kafka_consumergroup_group_lag_seconds", labels, from, to, |i| {
                600.0 + 30.0 * i as f64
            });
            scrape_between(&mut s, "kafka_consumergroup_group_offset", labels, from, to, |i| {
                20_000.0 + 100.0 * i as f64
            });
        }
        // Partition 1: lag in seconds not estimable yet (NaN), lag in records known.
        let p1 = member("/10.0.0.7", "consumer-1-abc", "1");
        scrape(&mut s, "kafka_consumergroup_group_lag", &p1, |_| 10.0);
        scrape(&mut s, "kafka_consumergroup_group_lag_seconds", &p1, |_| f64::NAN);
        let topic = [("cluster_name", "prod"), ("topic", "orders"), ("partition", "0")];
        scrape(&mut s, "kafka_partition_earliest_offset", &topic, |i| 15_000.0 + 150.0 * i as f64);
        scrape(&mut s, "kafka_partition_latest_offset", &topic, |i| 25_000.0 + 400.0 * i as f64);
        s.finish();

        let (partitions, _) = run(&s, &inputs(GROUP, &[]), &no_config());

        assert_eq!(partitions.len(), 2, "{partitions:#?}");
        let p0 = find(&partitions, KAFKA_LAG_EXPORTER, "orders", "0");
        // After the move both raw series are within the 5 min lookback; max keeps the newer
        // (higher) value, so each quantity reads scrape 2k: 5000 + 300·2k records,
        // 600 + 30·2k s, committed 20 000 + 100·2k.
        assert_eq!(p0.lag_records, expect(|k| 5000.0 + 600.0 * k as f64));
        assert_eq!(p0.lag_seconds, expect(|k| 600.0 + 60.0 * k as f64));
        assert_eq!(p0.consumer_offset, expect(|k| 20_000.0 + 200.0 * k as f64));
        // 15 000 + 150·2k and 25 000 + 400·2k (= committed + lag).
        assert_eq!(p0.log_start_offset, expect(|k| 15_000.0 + 300.0 * k as f64));
        assert_eq!(p0.log_end_offset, expect(|k| 25_000.0 + 800.0 * k as f64));
        let p1 = find(&partitions, KAFKA_LAG_EXPORTER, "orders", "1");
        assert_eq!(p1.lag_records, expect(|_| 10.0));
        assert!(p1.lag_seconds.is_empty(), "NaN is left out");
    }

    #[test]
    fn two_exporters_on_one_partition_give_two_entries_and_log_offsets_are_borrowed_when_missing() {
        let mut s = SeriesStore::new();
        scrape(&mut s, "kafka_consumergroup_lag", &kafka_exporter_labels(GROUP, "0", "ke"), |_| 300.0);
        let topic = [("topic", "orders"), ("partition", "0")];
        scrape(&mut s, "kafka_topic_partition_oldest_offset", &topic, |_| 10.0);
        scrape(&mut s, "kafka_topic_partition_current_offset", &topic, |_| 900.0);
        // KMinion runs with its lag only (no watermarks scraped).
        let lag = [("group_id", GROUP), ("topic_name", "orders"), ("partition_id", "0")];
        scrape(&mut s, "kminion_kafka_consumer_group_topic_partition_lag", &lag, |_| 310.0);
        s.finish();

        let (partitions, _) = run(&s, &inputs(GROUP, &[]), &no_config());

        let order: Vec<(&str, &str)> = partitions.iter().map(|p| (p.exporter.as_str(), p.partition.as_str())).collect();
        assert_eq!(order, vec![(KAFKA_EXPORTER, "0"), (KMINION, "0")]);
        let kminion = find(&partitions, KMINION, "orders", "0");
        assert_eq!(kminion.lag_records, expect(|_| 310.0));
        assert_eq!(kminion.log_start_offset, expect(|_| 10.0));
        assert_eq!(kminion.log_end_offset, expect(|_| 900.0));
    }

    #[test]
    fn partitions_are_ordered_by_number_not_by_text() {
        let mut s = SeriesStore::new();
        for p in ["10", "2", "1"] {
            scrape(&mut s, "kafka_consumergroup_lag", &kafka_exporter_labels(GROUP, p, "ke"), |_| 1.0);
        }
        s.finish();
        let (partitions, _) = run(&s, &inputs(GROUP, &[]), &no_config());
        let order: Vec<&str> = partitions.iter().map(|p| p.partition.as_str()).collect();
        assert_eq!(order, vec!["1", "2", "10"]);
    }

    #[test]
    fn kminion_retention_labels_parse_minus_one_as_unlimited_and_ignore_garbage() {
        assert_eq!(parse_retention_label("604800000"), Some(Some(604_800_000)));
        assert_eq!(parse_retention_label(" 3600000 "), Some(Some(3_600_000)));
        assert_eq!(parse_retention_label("0"), Some(Some(0)));
        assert_eq!(parse_retention_label("-1"), Some(None));
        for garbage in ["", "N/A", "nil", "7d", "1.5", "6.048e+08", "-2", "99999999999999999999", "١٢"] {
            assert_eq!(parse_retention_label(garbage), None, "{garbage:?}");
        }
    }

    /// KMinion lag for `group` on each topic, and a topic info series per (topic, label).
    fn kminion_topics(group: &str, infos: &[(&'static str, &'static str)]) -> SeriesStore {
        let mut s = SeriesStore::new();
        for &(topic, retention_ms) in infos {
            let lag = [("group_id", group), ("topic_name", topic), ("partition_id", "0")];
            scrape(&mut s, "kminion_kafka_consumer_group_topic_partition_lag", &lag, |_| 1.0);
            let info = [("topic_name", topic), ("cleanup_policy", "delete"), ("retention_ms", retention_ms)];
            scrape(&mut s, KMINION_TOPIC_INFO, &info, |_| 1.0);
        }
        s.finish();
        s
    }

    /// `r` with KMinion's `cleanup_policy="delete"`.
    fn delete(r: TopicRetention) -> TopicRetention {
        TopicRetention { cleanup_policy: Some(CleanupPolicy::Delete), cleanup_policy_from: Some(KMINION.into()), ..r }
    }

    /// KMinion's topic info with `configKeys: [cleanup.policy, retention.ms,
    /// retention.bytes]` and its topic size, for one topic read by [`GROUP`].
    fn kminion_info(topic: &str, labels: &[(&str, &str)], topic_bytes: Option<f64>) -> SeriesStore {
        let mut s = SeriesStore::new();
        let lag = [("group_id", GROUP), ("topic_name", topic), ("partition_id", "0")];
        scrape(&mut s, "kminion_kafka_consumer_group_topic_partition_lag", &lag, |_| 10.0);
        let mut info = vec![("topic_name", topic)];
        info.extend_from_slice(labels);
        scrape(&mut s, KMINION_TOPIC_INFO, &info, |_| 1.0);
        if let Some(b) = topic_bytes {
            scrape(&mut s, KMINION_TOPIC_BYTES, &[("topic_name", topic)], |_| b);
        }
        s.finish();
        s
    }

    #[test]
    fn kminions_cleanup_policy_retention_bytes_and_topic_size_give_the_policy_and_a_partitions_size() {
        let s = kminion_info(
            "orders",
            &[
                ("partition_count", "6"),
                ("replication_factor", "3"),
                ("cleanup_policy", "compact,delete"),
                ("retention_ms", "86400000"),
                ("retention_bytes", "1073741824"),
            ],
            Some(36e9),
        );
        let (_, retention) = run(&s, &inputs(GROUP, &[]), &no_config());
        assert_eq!(retention.len(), 1, "{retention:?}");
        let r = &retention[0];
        assert_eq!(r.cleanup_policy, Some(CleanupPolicy::CompactDelete));
        assert_eq!(r.cleanup_policy_from.as_deref(), Some("kminion"));
        assert_eq!((r.retention_ms, r.from.as_str()), (Some(86_400_000), "kminion"));
        assert_eq!(r.retention_bytes, Some(1_073_741_824));
        // 36 GB over 6 partitions × 3 replicas = 2 GB per partition replica.
        assert_eq!(r.partition_bytes, Some(2e9));
    }

    #[test]
    fn a_compacted_topic_is_listed_even_without_a_retention_ms_label() {
        // KMinion's default configKeys hold cleanup.policy only: retention.ms is N/A. A
        // compacted topic needs none: nothing goes by age.
        let s = kminion_info("customers", &[("cleanup_policy", "compact")], None);
        let (_, retention) = run(&s, &inputs(GROUP, &[]), &no_config());
        assert_eq!(retention.len(), 1, "{retention:?}");
        assert_eq!(retention[0].cleanup_policy, Some(CleanupPolicy::Compact));
        assert_eq!(retention[0].retention_ms, None);
        assert_eq!(retention[0].partition_bytes, None);
    }

    #[test]
    fn a_topic_value_wins_over_kminion_and_the_broker_default_fills_only_what_is_unknown() {
        // KMinion labels orders' retention.ms (1 d, a topic-level override or the default,
        // KMinion does not say which) but not its policy; the broker default (7 d,
        // delete) then gives only the policy. The configured policy of payments wins.
        let s = kminion_info("orders", &[("retention_ms", "86400000")], None);
        let config = KafkaConfig {
            cleanup_policy: [("payments".to_string(), CleanupPolicy::Compact)].into(),
            retention_bytes: [("orders".to_string(), -1)].into(),
            broker_defaults: BrokerDefaults {
                retention: Some("7d".parse().unwrap()),
                cleanup_policy: Some(CleanupPolicy::Delete),
                retention_bytes: Some(5_000_000_000),
            },
            ..retention_config(&[("payments", "3d")])
        };
        let (_, retention) = run(&s, &inputs(GROUP, &[]), &config);
        let orders = retention.iter().find(|r| r.topic == "orders").unwrap();
        assert_eq!((orders.retention_ms, orders.from.as_str()), (Some(86_400_000), "kminion"));
        assert_eq!(orders.cleanup_policy, Some(CleanupPolicy::Delete));
        assert_eq!(orders.cleanup_policy_from.as_deref(), Some(BROKER_DEFAULT));
        // The configured -1 (unlimited) wins over the broker's 5 GB.
        assert_eq!(orders.retention_bytes, None);
        let payments = retention.iter().find(|r| r.topic == "payments").unwrap();
        // 3 d = 259 200 000 ms.
        assert_eq!((payments.retention_ms, payments.from.as_str()), (Some(259_200_000), "config"));
        assert_eq!(payments.cleanup_policy, Some(CleanupPolicy::Compact));
        assert_eq!(payments.retention_bytes, Some(5_000_000_000));
    }

    #[test]
    fn the_broker_default_retention_applies_to_a_topic_seen_without_any_other_value() {
        let s = kminion_info("orders", &[("partition_count", "3")], None);
        let config = KafkaConfig {
            broker_defaults: BrokerDefaults { retention: Some("7d".parse().unwrap()), ..BrokerDefaults::default() },
            ..KafkaConfig::default()
        };
        let (_, retention) = run(&s, &inputs(GROUP, &[]), &config);
        // 7 d = 604 800 000 ms; no policy known.
        assert_eq!(retention, vec![TopicRetention::by_time("orders", Some(604_800_000), BROKER_DEFAULT)]);
    }

    #[test]
    fn configured_retention_overrides_kminion_and_kminion_fills_the_rest() {
        let s = kminion_topics(GROUP, &[("orders", "604800000"), ("payments", "-1"), ("audit", "N/A")]);
        let config = retention_config(&[("orders", "1d"), ("unrelated", "12h")]);

        let (_, retention) = run(&s, &inputs(GROUP, &[]), &config);

        assert_eq!(
            retention,
            vec![
                // audit: "N/A" is no retention at all.
                // orders: configured 1 d = 86 400 000 ms wins over KMinion's 7 d; the
                // policy (not configured) is KMinion's.
                delete(TopicRetention::by_time("orders", Some(86_400_000), "config")),
                // payments: KMinion's -1 means unlimited.
                delete(TopicRetention::by_time("payments", None, "kminion")),
                // Configured topics are kept even when not seen: 12 h = 43 200 000 ms.
                TopicRetention::by_time("unrelated", Some(43_200_000), "config"),
            ]
        );
    }

    #[test]
    fn a_configured_unlimited_retention_overrides_kminions_limit_with_no_age_limit() {
        // orders: KMinion says 7 d, the configuration says -1 (no limit, as Kafka's
        // retention.ms=-1): unlimited, from the configuration. payments: "unlimited".
        let s = kminion_topics(GROUP, &[("orders", "604800000"), ("payments", "86400000")]);
        let config = retention_config(&[("orders", "-1"), ("payments", "unlimited")]);
        let (_, retention) = run(&s, &inputs(GROUP, &[]), &config);
        assert_eq!(
            retention,
            vec![
                delete(TopicRetention::by_time("orders", None, "config")),
                delete(TopicRetention::by_time("payments", None, "config")),
            ]
        );
    }

    #[test]
    fn a_retention_label_changed_during_the_range_gives_the_newest_value() {
        let mut s = SeriesStore::new();
        let lag = [("group_id", GROUP), ("topic_name", "orders"), ("partition_id", "0")];
        scrape(&mut s, "kminion_kafka_consumer_group_topic_partition_lag", &lag, |_| 1.0);
        // retention.ms raised from 1 d to 2 d at scrape 5. Without staleness markers the old
        // series stays visible for the 5 min lookback, to the end of the range; the new one
        // appeared later, so it wins.
        scrape_between(
            &mut s,
            KMINION_TOPIC_INFO,
            &[("topic_name", "orders"), ("retention_ms", "86400000")],
            0,
            4,
            |_| 1.0,
        );
        scrape_between(
            &mut s,
            KMINION_TOPIC_INFO,
            &[("topic_name", "orders"), ("retention_ms", "172800000")],
            5,
            10,
            |_| 1.0,
        );
        s.finish();
        let (_, retention) = run(&s, &inputs(GROUP, &[]), &no_config());
        assert_eq!(retention.len(), 1);
        assert_eq!(retention[0].retention_ms, Some(172_800_000));
    }

    #[test]
    fn a_hostile_group_name_is_escaped_and_selects_only_its_own_series() {
        let hostile = r#"a"} or vector(1) or {""#;
        let mut s = SeriesStore::new();
        scrape(&mut s, "kafka_consumergroup_lag", &kafka_exporter_labels(hostile, "0", "ke"), |_| 7.0);
        scrape(&mut s, "kafka_consumergroup_lag", &kafka_exporter_labels("a", "0", "ke"), |_| 1000.0);
        let kminion = |g| [("group_id", g), ("topic_name", "orders"), ("partition_id", "0")];
        scrape(&mut s, "kminion_kafka_consumer_group_topic_partition_lag", &kminion(hostile), |_| 8.0);
        scrape(&mut s, "kminion_kafka_consumer_group_topic_partition_lag", &kminion("a"), |_| 2000.0);
        let lag_exporter = |g| [("cluster_name", "prod"), ("group", g), ("topic", "orders"), ("partition", "0")];
        scrape(&mut s, "kafka_consumergroup_group_lag", &lag_exporter(hostile), |_| 9.0);
        scrape(&mut s, "kafka_consumergroup_group_lag", &lag_exporter("a"), |_| 3000.0);
        s.finish();
        let inputs = inputs(hostile, &[]);

        let queries = lag_queries(&inputs, T0, END, STEP);
        let promql: BTreeMap<&str, String> = queries.iter().map(|(n, q)| (n.as_str(), q.to_promql())).collect();
        assert_eq!(
            promql["kafka/kafka_exporter/lag_records"],
            r#"max by (topic, partition) ({__name__="kafka_consumergroup_lag", consumergroup="a\"} or vector(1) or {\""})"#
        );
        for (name, text) in &promql {
            assert!(text.contains(r#"="a\"} or vector(1) or {\""}"#), "{name}: {text}");
            assert!(!text.contains(r#"="a"}"#), "{name}: {text}");
        }
        for (name, q) in &queries {
            for series in s.evaluate(q) {
                assert!(series.points.iter().all(|p| p.1 < 10.0), "{name} selected the decoy group: {series:?}");
            }
        }
        let (partitions, _) = run(&s, &inputs, &no_config());
        let lags: Vec<(&str, f64)> =
            partitions.iter().map(|p| (p.exporter.as_str(), p.lag_records.last().unwrap().1)).collect();
        // One partition, three exporters, ordered by exporter name.
        assert_eq!(lags, vec![(KAFKA_EXPORTER, 7.0), (KAFKA_LAG_EXPORTER, 9.0), (KMINION, 8.0)]);
        assert!(partitions.iter().all(|p| p.consumer_group == hostile));
    }

    #[test]
    fn configured_topics_narrow_every_query_and_are_matched_literally() {
        let mut s = SeriesStore::new();
        for topic in ["orders.v1", "ordersXv1"] {
            let labels = [("consumergroup", GROUP), ("topic", topic), ("partition", "0")];
            scrape(&mut s, "kafka_consumergroup_lag", &labels, |_| 1.0);
            scrape(&mut s, "kafka_topic_partition_oldest_offset", &[("topic", topic), ("partition", "0")], |_| 0.0);
        }
        s.finish();
        let inputs = inputs(GROUP, &["orders.v1"]);

        let lag = lag_queries(&inputs, T0, END, STEP);
        assert_eq!(
            lag[0].1.to_promql(),
            r#"max by (topic, partition) ({__name__="kafka_consumergroup_lag", consumergroup="orders-job", topic=~"orders\\.v1"})"#
        );
        let offsets = offset_queries(&inputs.topics, T0, END, STEP);
        let names: Vec<&str> = offsets.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "kafka/kafka_exporter/log_start_offset",
                "kafka/kafka_exporter/log_end_offset",
                "kafka/kminion/log_start_offset",
                "kafka/kminion/log_end_offset",
                "kafka/kafka_lag_exporter/log_start_offset",
                "kafka/kafka_lag_exporter/log_end_offset",
                "kafka/redpanda/log_end_offset",
                "kafka/kminion/topic_info",
                "kafka/kminion/topic_bytes",
            ]
        );
        assert_eq!(
            offsets[7].1.to_promql(),
            r#"max by (topic_name, retention_ms, cleanup_policy, retention_bytes, partition_count, replication_factor) ({__name__="kminion_kafka_topic_info", topic_name=~"orders\\.v1"})"#
        );
        let (partitions, _) = run(&s, &inputs, &no_config());
        assert_eq!(partitions.len(), 1);
        assert_eq!(partitions[0].topic, "orders.v1");
        assert_eq!(partitions[0].log_start_offset, expect(|_| 0.0));
    }

    #[test]
    fn no_group_or_no_topics_means_no_queries() {
        assert!(lag_queries(&inputs("", &["orders"]), T0, END, STEP).is_empty());
        assert!(offset_queries(&[], T0, END, STEP).is_empty());
        assert!(offset_queries(&[String::new()], T0, END, STEP).is_empty());
        // The lag of the three exporters that report it per partition, kafka-lag-exporter's
        // lag in seconds, and the committed offsets of the three that report them (Redpanda
        // included): 3 + 1 + 3 = 7 queries. Flink's own offsets are asked by job.
        let names: Vec<String> = lag_queries(&inputs(GROUP, &[]), T0, END, STEP).into_iter().map(|(n, _)| n).collect();
        assert_eq!(
            names,
            vec![
                "kafka/kafka_exporter/lag_records",
                "kafka/kafka_exporter/consumer_offset",
                "kafka/kminion/lag_records",
                "kafka/kafka_lag_exporter/lag_records",
                "kafka/kafka_lag_exporter/lag_seconds",
                "kafka/kafka_lag_exporter/consumer_offset",
                "kafka/redpanda/consumer_offset",
            ]
        );
    }

    fn kafka_config() -> KafkaConfig {
        KafkaConfig {
            jobs: vec![
                KafkaJob {
                    job: "Orders Enrichment".into(),
                    consumer_group: Some("orders-enricher".into()),
                    topics: vec!["orders".into(), "customers".into(), "orders".into(), String::new()],
                },
                KafkaJob {
                    job: "a1b2c3d4e5f60718293a4b5c6d7e8f90".into(),
                    consumer_group: Some("by-id-group".into()),
                    topics: Vec::new(),
                },
                KafkaJob { job: "payments".into(), consumer_group: None, topics: vec!["payments".into()] },
            ],
            ..KafkaConfig::default()
        }
    }

    #[test]
    fn job_inputs_come_from_the_entry_matched_by_name_sanitized_name_or_id() {
        let config = kafka_config();
        let enricher =
            KafkaInputs { consumer_group: "orders-enricher".into(), topics: vec!["customers".into(), "orders".into()] };
        assert_eq!(job_inputs(&config, "Orders Enrichment", "ffff"), enricher);
        // The reporter's sanitized job name (space → _) finds the same entry.
        assert_eq!(job_inputs(&config, "Orders_Enrichment", "ffff"), enricher);
        assert_eq!(
            job_inputs(&config, "renamed-job", "a1b2c3d4e5f60718293a4b5c6d7e8f90"),
            KafkaInputs { consumer_group: "by-id-group".into(), topics: Vec::new() }
        );
    }

    #[test]
    fn job_inputs_fall_back_to_a_group_named_like_the_job() {
        let config = kafka_config();
        // An entry without a consumer group keeps its topics.
        assert_eq!(
            job_inputs(&config, "payments", "eeee"),
            KafkaInputs { consumer_group: "payments".into(), topics: vec!["payments".into()] }
        );
        // No entry at all.
        assert_eq!(
            job_inputs(&config, "fraud-scoring", "dddd"),
            KafkaInputs { consumer_group: "fraud-scoring".into(), topics: Vec::new() }
        );
        assert_eq!(
            job_inputs(&KafkaConfig::default(), "fraud-scoring", "dddd"),
            KafkaInputs { consumer_group: "fraud-scoring".into(), topics: Vec::new() }
        );
    }

    #[test]
    fn topics_seen_joins_every_exporter_and_the_configured_topics() {
        let mut s = SeriesStore::new();
        scrape(
            &mut s,
            "kafka_consumergroup_lag",
            &[("consumergroup", GROUP), ("topic", "orders"), ("partition", "0")],
            |_| 1.0,
        );
        let kminion = |topic| [("group_id", GROUP), ("topic_name", topic), ("partition_id", "3")];
        scrape(&mut s, "kminion_kafka_consumer_group_topic_partition_lag", &kminion("orders"), |_| 1.0);
        scrape(&mut s, "kminion_kafka_consumer_group_topic_partition_lag", &kminion("refunds"), |_| 1.0);
        scrape(
            &mut s,
            "kafka_consumergroup_group_lag_seconds",
            &[("group", GROUP), ("topic", "returns"), ("partition", "0")],
            |_| 1.0,
        );
        // Another group's topic.
        scrape(
            &mut s,
            "kafka_consumergroup_lag",
            &[("consumergroup", "other"), ("topic", "audit"), ("partition", "0")],
            |_| 1.0,
        );
        s.finish();
        let round_a = |inputs: &KafkaInputs| -> BTreeMap<String, QueryResult> {
            lag_queries(inputs, T0, END, STEP).into_iter().map(|(n, q)| (n, s.evaluate(&q))).collect()
        };

        let all = inputs(GROUP, &[]);
        assert_eq!(topics_seen(&all, &round_a(&all)), vec!["orders", "refunds", "returns"]);
        // Configured topics narrow round A and are kept even with no series yet.
        let configured = inputs(GROUP, &["orders", "customers"]);
        assert_eq!(topics_seen(&configured, &round_a(&configured)), vec!["customers", "orders"]);
        assert!(topics_seen(&all, &BTreeMap::new()).is_empty());
    }

    #[test]
    fn a_growing_lag_assembles_into_the_series_the_retention_hazard_reads() {
        // Producers write 200 records/s, the job commits 100 records/s: the lag grows by
        // 100 records/s, and the oldest unconsumed record ages 100 / 200 = 0.5 s per s.
        // Retention deletes old segments at 150 records/s.
        let mut s = SeriesStore::new();
        let ke = kafka_exporter_labels(GROUP, "0", "ke");
        // Per 30 s scrape: committed +3000, log end +6000, log start +4500.
        scrape(&mut s, "kafka_consumergroup_current_offset", &ke, |i| 30_000.0 + 3000.0 * i as f64);
        scrape(&mut s, "kafka_consumergroup_lag", &ke, |i| 90_000.0 + 3000.0 * i as f64);
        let topic = [("topic", "orders"), ("partition", "0")];
        scrape(&mut s, "kafka_topic_partition_oldest_offset", &topic, |i| 4500.0 * i as f64);
        scrape(&mut s, "kafka_topic_partition_current_offset", &topic, |i| 120_000.0 + 6000.0 * i as f64);
        let kle = [("cluster_name", "prod"), ("group", GROUP), ("topic", "orders"), ("partition", "0")];
        scrape(&mut s, "kafka_consumergroup_group_lag", &kle, |i| 90_000.0 + 3000.0 * i as f64);
        // 90 000 records at 200 records/s = 450 s, +15 s per 30 s scrape.
        scrape(&mut s, "kafka_consumergroup_group_lag_seconds", &kle, |i| 450.0 + 15.0 * i as f64);
        s.finish();
        let config = retention_config(&[("orders", "1h")]);

        let (partitions, retention) = run(&s, &inputs(GROUP, &[]), &config);

        // retention.rs looks up retention by topic: 1 h = 3 600 000 ms, from configuration.
        assert_eq!(retention, vec![TopicRetention::by_time("orders", Some(3_600_000), "config")]);
        // Lag in seconds (kafka-lag-exporter): the last is 450 + 15 · 10 = 600 s, growing
        // 0.5 s per s, so (retention − lag) / growth = (3600 − 600) / 0.5 = 6000 s to loss.
        let by_time = find(&partitions, KAFKA_LAG_EXPORTER, "orders", "0");
        assert_eq!(by_time.lag_seconds.last(), Some(&(END, 600.0)));
        let growth = slope_per_s(&by_time.lag_seconds).unwrap();
        assert!((growth - 0.5).abs() < 1e-9, "{growth}");
        assert!(((3600.0 - 600.0) / growth - 6000.0).abs() < 1e-6);
        // kafka-lag-exporter scraped no log offsets here: kafka_exporter's are borrowed.
        assert_eq!(by_time.log_start_offset.last(), Some(&(END, 45_000.0)));
        // Offsets (kafka_exporter): committed 30 000 + 3000 · 10 = 60 000, log start
        // 4500 · 10 = 45 000, still above it; the log start gains 150 − 100 = 50 records/s on
        // the consumer, so (60 000 − 45 000) / 50 = 300 s to loss — the sooner of the two,
        // which the hazard reports.
        let by_offsets = find(&partitions, KAFKA_EXPORTER, "orders", "0");
        assert!(by_offsets.lag_seconds.is_empty());
        assert_eq!(by_offsets.consumer_offset.last(), Some(&(END, 60_000.0)));
        assert_eq!(by_offsets.log_start_offset.last(), Some(&(END, 45_000.0)));
        let start_rate = slope_per_s(&by_offsets.log_start_offset).unwrap();
        let consume_rate = slope_per_s(&by_offsets.consumer_offset).unwrap();
        assert!(
            (start_rate - 150.0).abs() < 1e-9 && (consume_rate - 100.0).abs() < 1e-9,
            "{start_rate} {consume_rate}"
        );
        assert!(((60_000.0 - 45_000.0) / (start_rate - consume_rate) - 300.0).abs() < 1e-6);
        // Produce rate from the log end: 6000 per 30 s = 200 records/s.
        assert!((slope_per_s(&by_offsets.log_end_offset).unwrap() - 200.0).abs() < 1e-9);
    }
}
