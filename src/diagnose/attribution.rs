//! What the culprit is tied to outside its job ([`Attribution`]): read from the names Flink
//! gives the culprit's vertex and its chained operators (a connector's default name, a
//! user's `.name(…)`, a Flink SQL sink's table), from the slow instance's TaskManager, and
//! from the Kafka topics a source culprit reads. Pure; nothing here is guessed from a
//! job's name.

use std::collections::BTreeSet;

use crate::model::attribution::{Attribution, ExternalSystem};
use crate::model::facts::Fact;
use crate::model::facts::hot_key::HotKeyFact;
use crate::model::snapshot::Snapshot;
use crate::model::verdict::{Culprit, Finding, Role};

/// Connectors as the words their Flink connectors, table factories (`'connector' = …`) and
/// default operator names use, with the name culprit gives them (lower case). The first
/// word found in a name wins, longest first so that `opensearch` is not read as `search`.
const CONNECTORS: &[(&str, &str)] = &[
    ("elasticsearch", "elasticsearch"),
    ("opensearch", "opensearch"),
    ("clickhouse", "clickhouse"),
    ("starrocks", "starrocks"),
    ("cassandra", "cassandra"),
    ("dynamodb", "dynamodb"),
    ("firehose", "firehose"),
    ("bigquery", "bigquery"),
    ("snowflake", "snowflake"),
    ("postgresql", "postgres"),
    ("postgres", "postgres"),
    ("rabbitmq", "rabbitmq"),
    ("mongodb", "mongodb"),
    ("kinesis", "kinesis"),
    ("iceberg", "iceberg"),
    ("pulsar", "pulsar"),
    ("paimon", "paimon"),
    ("oracle", "oracle"),
    ("mysql", "mysql"),
    ("kafka", "kafka"),
    ("hbase", "hbase"),
    ("redis", "redis"),
    ("doris", "doris"),
    ("hudi", "hudi"),
    ("jdbc", "jdbc"),
    ("mongo", "mongodb"),
    ("http", "http"),
    ("hdfs", "hdfs"),
    ("s3", "s3"),
    ("es", "elasticsearch"),
];

/// Keys that name a connector's target in Flink's own descriptions
/// (`TableSink(table=[…])`, `Sink(table=[…], fields=[…])`) and in users' names
/// (`index=logs`, `topic: orders`).
const TARGET_KEYS: &[&str] = &["table", "index", "topic", "host", "bucket", "stream", "collection", "keyspace"];

/// Operator names Flink gives when the user gave none: they say nothing of a target.
const DEFAULT_NAMES: &[&str] =
    &["unnamed", "writer", "committer", "sink", "source", "print to std. out", "discarding sink", "global committer"];

/// What the culprit of a diagnosis is tied to outside its job; `None` without a culprit
/// or when nothing is known.
pub fn attribute(
    snapshot: &Snapshot,
    culprit: Option<&Culprit>,
    finding: Finding,
    cause: &[Fact],
) -> Option<Attribution> {
    let culprit = culprit?;
    let names: Vec<&str> =
        std::iter::once(culprit.vertex_name.as_str()).chain(culprit.operators.iter().map(String::as_str)).collect();
    let system = names.iter().find_map(|n| system_of(n)).map(|(connector, target)| ExternalSystem {
        connector,
        target: target.or_else(|| names.iter().find_map(|n| target_of(n))),
        // A sink by the graph, by the step that found it, or by the name Flink gives
        // sinks (`Sink: …`, filtered `Sink:_…`) when there is no graph.
        writes: culprit.role == Role::Sink
            || finding == Finding::Sink
            || culprit.vertex_name.trim_start().to_ascii_lowercase().starts_with("sink:"),
    });
    let mut hosts = BTreeSet::new();
    let mut facts: Vec<&Fact> = cause.iter().collect();
    while let Some(fact) = facts.pop() {
        if let Fact::Seq(all) = fact {
            facts.extend(all.iter());
        }
        if let Fact::HotKey(HotKeyFact::SlowInstance { tm, host, .. }) = fact {
            match host {
                Some(h) if !h.is_empty() => hosts.insert(h.clone()),
                _ if tm != "unknown" && !tm.is_empty() => hosts.insert(tm.clone()),
                _ => false,
            };
        }
    }
    let reads_topics = matches!(
        finding,
        Finding::Source | Finding::SourceSkew | Finding::WatermarkStall | Finding::WatermarkAlignment
    ) || culprit.role == Role::Source;
    let topics: BTreeSet<String> = if reads_topics {
        snapshot
            .partitions
            .iter()
            .map(|p| p.topic.clone())
            .chain(snapshot.job_topics.iter().cloned())
            .filter(|t| !t.is_empty())
            .collect()
    } else {
        BTreeSet::new()
    };
    let a = Attribution { system, hosts: hosts.into_iter().collect(), topics: topics.into_iter().collect() };
    (!a.is_empty()).then_some(a)
}

/// The connector one name names, and the target written beside it (`Sink: Elasticsearch
/// logs-*` → `elasticsearch`, `logs-*`).
pub fn system_of(name: &str) -> Option<(String, Option<String>)> {
    // The reporter's filtered form (`Sink:_Elasticsearch_logs__`: every character outside
    // `[a-zA-Z0-9:_]` written `_`) has no spaces left; its `_` separate the words.
    let spaced;
    let name = if !name.contains(char::is_whitespace) && name.contains('_') && !name.contains('=') {
        spaced = name.replace('_', " ");
        spaced.as_str()
    } else {
        name
    };
    let words = words(name);
    let (at, connector) = words.iter().enumerate().find_map(|(i, w)| {
        let lower = w.to_ascii_lowercase();
        // A connector's word alone, or as the start of a class name (`ElasticsearchSink`,
        // `KafkaSource`, `JdbcSink`): `es` only alone, it starts too many words.
        CONNECTORS.iter().find_map(|(word, name)| {
            let fits =
                lower == *word || (word.len() > 2 && lower.starts_with(word) && is_class_suffix(&lower[word.len()..]));
            fits.then(|| (i, name.to_string()))
        })
    })?;
    let target = target_of(name).or_else(|| words.get(at + 1).filter(|w| looks_like_target(w)).map(|w| w.to_string()));
    Some((connector, target))
}

/// Suffixes of connector class names (`Elasticsearch7SinkFunction`, `KafkaSink`,
/// `JdbcOutputFormat`, `HBaseSinkFunction`), digits for versions first.
fn is_class_suffix(rest: &str) -> bool {
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_digit());
    if rest.starts_with(['-', '_']) {
        return true;
    }
    let rest: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
    rest.is_empty()
        || ["sink", "source", "writer", "output", "input", "table", "lookup", "dynamic", "async", "upsert", "client"]
            .iter()
            .any(|s| rest.starts_with(s))
}

/// A target named by a key (`table=[default_catalog.default_database.orders]` → `orders`,
/// `index=logs-*`, `topic: payments`).
pub fn target_of(name: &str) -> Option<String> {
    let lower = name.to_ascii_lowercase();
    for key in TARGET_KEYS {
        let mut from = 0;
        while let Some(pos) = lower[from..].find(key) {
            let start = from + pos;
            from = start + key.len();
            // The key must be a word of its own.
            if start > 0 && lower.as_bytes()[start - 1].is_ascii_alphanumeric() {
                continue;
            }
            let rest = name[from..].trim_start();
            let Some(rest) = rest.strip_prefix('=').or_else(|| rest.strip_prefix(':')) else { continue };
            let rest = rest.trim_start().trim_start_matches('[').trim_start_matches(['\'', '"', '`']);
            let value: String =
                rest.chars().take_while(|c| !matches!(c, ']' | ',' | ')' | '\'' | '"' | '`' | ' ' | ';')).collect();
            // `default_catalog.default_database.orders` names the table `orders`.
            let value = if *key == "table" { value.rsplit('.').next().unwrap_or("").to_string() } else { value };
            if !value.is_empty() {
                return Some(value);
            }
        }
    }
    None
}

/// The words of a name: Flink's `Sink: `, `Source: ` and chain arrows are separators.
fn words(name: &str) -> Vec<&str> {
    name.split(|c: char| c.is_whitespace() || matches!(c, ':' | '(' | ')' | '[' | ']' | ',' | '>' | '|'))
        .map(|w| w.trim_matches(['\'', '"', '`', '-']))
        .filter(|w| !w.is_empty())
        .collect()
}

/// Whether the word after a connector's reads as its target: an index pattern
/// (`logs-*`), a dotted or dashed name (`orders.v2`), or a plain name that is not one of
/// Flink's defaults or a word of the connector's class.
fn looks_like_target(word: &str) -> bool {
    let lower = word.to_ascii_lowercase();
    if DEFAULT_NAMES.contains(&lower.as_str()) || CONNECTORS.iter().any(|(w, _)| lower == *w) {
        return false;
    }
    let role_words = ["sink", "source", "writer", "lookup", "output", "to", "into", "from", "for"];
    !role_words.contains(&lower.as_str()) && word.chars().any(|c| c.is_ascii_alphanumeric() || c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sys(name: &str) -> Option<(String, Option<String>)> {
        system_of(name)
    }

    #[test]
    fn a_connector_and_the_target_written_after_it_are_read_from_a_sink_name() {
        assert_eq!(sys("Sink: Elasticsearch logs-*"), Some(("elasticsearch".into(), Some("logs-*".into()))));
        assert_eq!(sys("Sink: Kafka orders-enriched"), Some(("kafka".into(), Some("orders-enriched".into()))));
        assert_eq!(sys("es-sink"), None, "a word that only starts with `es` is no connector");
        assert_eq!(sys("Sink: ES logs"), Some(("elasticsearch".into(), Some("logs".into()))));
        // As the reporter's default filter writes `Sink: Elasticsearch logs-*` in a label.
        assert_eq!(sys("Sink:_Elasticsearch_logs__"), Some(("elasticsearch".into(), Some("logs".into()))));
    }

    #[test]
    fn connector_class_names_and_flinks_default_names_name_the_connector_without_a_target() {
        assert_eq!(sys("Sink: Elasticsearch7SinkFunction"), Some(("elasticsearch".into(), None)));
        assert_eq!(sys("KafkaSink: Writer"), Some(("kafka".into(), None)));
        assert_eq!(sys("Sink: JdbcSink"), Some(("jdbc".into(), None)));
        assert_eq!(sys("Source: KafkaSource-orders"), Some(("kafka".into(), None)));
        assert_eq!(sys("Sink: Writer"), None);
        assert_eq!(sys("enrich -> score"), None);
        // A word that merely starts like a connector is not one.
        assert_eq!(sys("Sink: Kafkaesque reports"), None);
    }

    #[test]
    fn a_target_given_by_key_wins_and_a_sql_table_is_named_by_its_last_part() {
        assert_eq!(
            sys("Sink: Sink(table=[default_catalog.default_database.orders_jdbc], fields=[id, amount]) jdbc"),
            Some(("jdbc".into(), Some("orders_jdbc".into())))
        );
        assert_eq!(target_of("Elasticsearch index=logs-2026.12"), Some("logs-2026.12".into()));
        assert_eq!(target_of("write topic: 'payments'"), Some("payments".into()));
        assert_eq!(target_of("subtable=x"), None, "a key inside a word is no key");
        assert_eq!(target_of("table=[]"), None);
    }
}
