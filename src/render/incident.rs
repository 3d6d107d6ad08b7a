//! Incidents in words, for every destination: the headline ("290 jobs held back by their
//! sinks writing to Elasticsearch `logs-*`"), the cause alone, the jobs that share it and
//! those that do not. Pure; the text is raw (each renderer escapes it for its medium).

use crate::model::incident::{Cause, CauseKind, Incident, Member};
use crate::model::verdict::Finding;

/// A connector as people write it (`elasticsearch` → `Elasticsearch`, `jdbc` → `JDBC`).
pub fn connector_name(connector: &str) -> String {
    match connector {
        "jdbc" => "JDBC".into(),
        "http" => "HTTP".into(),
        "hdfs" => "HDFS".into(),
        "s3" => "S3".into(),
        "hbase" => "HBase".into(),
        "mongodb" => "MongoDB".into(),
        "dynamodb" => "DynamoDB".into(),
        "mysql" => "MySQL".into(),
        "postgres" => "PostgreSQL".into(),
        "opensearch" => "OpenSearch".into(),
        "clickhouse" => "ClickHouse".into(),
        "starrocks" => "StarRocks".into(),
        "bigquery" => "BigQuery".into(),
        "rabbitmq" => "RabbitMQ".into(),
        other => {
            let mut c = other.chars();
            c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
        }
    }
}

/// What the jobs share, after "held back by": `their sinks writing to Elasticsearch
/// `logs-*``, `slow instances on host `node-7``, `their sources reading Kafka topic
/// `orders``, `the same finding: sink`.
pub fn cause_phrase(cause: &Cause) -> String {
    cause_phrase_quoted(cause, &|s| format!("`{s}`"), &|s| s.to_string())
}

/// [`cause_phrase`] with the names from the verdicts (untrusted: vertex names, hosts,
/// topics) quoted by `quote` and the connector's name by `plain`, for a medium that
/// escapes them.
pub fn cause_phrase_quoted(cause: &Cause, quote: &dyn Fn(&str) -> String, plain: &dyn Fn(&str) -> String) -> String {
    let target = |t: &Option<String>| t.as_ref().map(|t| format!(" {}", quote(t))).unwrap_or_default();
    let system = plain(&connector_name(&cause.name));
    match cause.kind {
        CauseKind::System if cause.writes => format!("their sinks writing to {system}{}", target(&cause.target)),
        CauseKind::System => format!("reading from {system}{}", target(&cause.target)),
        CauseKind::Host => format!("slow instances on host {}", quote(&cause.name)),
        CauseKind::Topic => format!("their sources reading Kafka topic {}", quote(&cause.name)),
        CauseKind::Finding => format!("the same finding: {}", finding_words(cause.finding)),
    }
}

/// A finding as the cause many jobs share.
fn finding_words(f: Finding) -> String {
    match f {
        Finding::Sink => "their sinks (the systems they write to are slow)".into(),
        Finding::HotKey => "a hot key".into(),
        Finding::SlowInstance => "a slow instance".into(),
        Finding::Checkpoints => "checkpoints".into(),
        Finding::StateBackend => "the state backend (RocksDB)".into(),
        Finding::Source => "their sources".into(),
        Finding::Network => "the network between TaskManagers".into(),
        Finding::AsyncIo => "async I/O waiting on an external service".into(),
        Finding::GcPressure => "garbage collection".into(),
        Finding::MemoryLimit => "the container memory limit".into(),
        Finding::CpuThrottled => "CPU throttling".into(),
        Finding::FailingOver => "restarts".into(),
        other => other.as_str().replace('_', " "),
    }
}

/// `290 jobs held back by their sinks writing to Elasticsearch `logs-*``.
pub fn headline(incident: &Incident) -> String {
    format!("{} jobs held back by {}", incident.members.len(), cause_phrase(&incident.cause))
}

/// Jobs named in a summary; the rest are counted (`GET /api/v1/incidents` lists them).
pub const MAX_JOBS_NAMED: usize = 40;

/// Jobs that do not fit, named in a summary.
pub const MAX_OTHERS_NAMED: usize = 10;

/// Names quoted by `quote`, comma-separated: the first `max` of them and a count of the
/// rest (`a, b and 3 more`).
pub fn named(all: impl Iterator<Item = String>, max: usize, quote: &dyn Fn(&str) -> String) -> String {
    let all: Vec<String> = all.collect();
    let mut out: Vec<String> = all.iter().take(max).map(|n| quote(n)).collect();
    if all.len() > max {
        out.push(format!("and {} more", all.len() - max));
    }
    out.join(", ")
}

/// An incident's post where the destination can neither edit nor thread
/// ([`crate::notify::digest`]), in words escaped by the medium's `quote` (names from the
/// verdicts) and `plain` (the connector's name, the job lists' own words stay as they are).
#[derive(Debug, Clone, PartialEq)]
pub struct Digest {
    /// `290 jobs held back by …`, or for a digest `12 more jobs held back by … (302 in all)`.
    pub title: String,
    /// When, and where the jobs' verdicts are.
    pub when: String,
    /// The jobs it names (those counted since the last post), quoted.
    pub jobs: String,
    /// The jobs of the same minutes that do not fit, quoted (in the summary alone).
    pub others: Option<String>,
}

/// Longest job name a digest shows.
pub const DIGEST_NAME_CHARS: usize = 120;

/// The summary of `incident` (`shown` 0) or a digest of its jobs after the first `shown`,
/// naming every job in `shown..upto` (a post each range, [`crate::notify::digest::ranges`]:
/// a job folded into a digest is named in one, never only counted).
pub fn digest(
    incident: &Incident,
    (shown, upto): (usize, usize),
    quote: &dyn Fn(&str) -> String,
    plain: &dyn Fn(&str) -> String,
) -> Digest {
    let n = incident.members.len();
    let phrase = cause_phrase_quoted(&incident.cause, quote, plain);
    let new = incident.members.get(shown..upto.min(n)).unwrap_or_default();
    let jobs = named(new.iter().map(|m| job_line(m, false)), usize::MAX, quote);
    if shown == 0 {
        let others = (!incident.others.is_empty()).then(|| {
            let listed = named(incident.others.iter().map(|m| job_line(m, true)), MAX_OTHERS_NAMED, quote);
            format!("{} jobs with other culprits: {listed}", incident.others.len())
        });
        let title = if new.len() < n {
            format!("{n} jobs held back by {phrase} (the first {} named here)", new.len())
        } else {
            format!("{n} jobs held back by {phrase}")
        };
        return Digest {
            title,
            when: format!(
                "Since {} · last verdict {} · the jobs counted from now on come in one post a minute at most, not one each",
                crate::render::hh_mm(incident.first_ms),
                crate::render::hh_mm(incident.last_ms)
            ),
            jobs,
            others,
        };
    }
    Digest {
        title: format!("{} more jobs held back by {phrase} ({n} in all)", new.len()),
        when: format!(
            "Counted since the last post · the incident began {} · last verdict {}",
            crate::render::hh_mm(incident.first_ms),
            crate::render::hh_mm(incident.last_ms)
        ),
        jobs,
        others: None,
    }
}

/// One job of an incident: its name, and for a job that does not fit, its own finding
/// and culprit (`orders (hot_key in keyBy)`).
pub fn job_line(m: &Member, with_finding: bool) -> String {
    let name = if m.job.name.trim().is_empty() { m.job.id.clone() } else { m.job.name.clone() };
    if !with_finding {
        return name;
    }
    match &m.culprit {
        Some(c) => format!("{name} ({} in {})", m.finding.as_str(), crate::render::names::vertex_name(c)),
        None => format!("{name} ({})", m.finding.as_str()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::verdict::JobRef;

    fn cause(kind: CauseKind, name: &str, target: Option<&str>, writes: bool) -> Cause {
        Cause { kind, name: name.into(), target: target.map(str::to_string), writes, finding: Finding::Sink }
    }

    #[test]
    fn the_headline_names_the_count_and_the_shared_cause_as_people_write_it() {
        let m = |i: i64| Member {
            verdict_id: i,
            at_ms: 0,
            job: JobRef { name: format!("job-{i}"), id: String::new() },
            finding: Finding::Sink,
            culprit: Some("Sink: Elasticsearch logs-*".into()),
            causes: Vec::new(),
        };
        let inc = Incident {
            id: "1-x".into(),
            cause: cause(CauseKind::System, "elasticsearch", Some("logs-*"), true),
            members: (1..=290).map(m).collect(),
            others: Vec::new(),
            first_ms: 0,
            last_ms: 0,
        };
        assert_eq!(headline(&inc), "290 jobs held back by their sinks writing to Elasticsearch `logs-*`");
        assert_eq!(cause_phrase(&cause(CauseKind::System, "jdbc", None, true)), "their sinks writing to JDBC");
        assert_eq!(cause_phrase(&cause(CauseKind::Host, "node-7", None, false)), "slow instances on host `node-7`");
        assert_eq!(
            cause_phrase(&cause(CauseKind::Finding, "sink", None, false)),
            "the same finding: their sinks (the systems they write to are slow)"
        );
        assert_eq!(job_line(&inc.members[0], true), "job-1 (sink in Sink: Elasticsearch logs-*)");
    }
}
