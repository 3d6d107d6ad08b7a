//! A shared cause: many jobs reaching verdicts within a short time whose culprits share
//! what they are tied to outside their jobs ([`crate::model::attribution`]) — the system
//! their sinks write to, the host their slow instances run on, the topic their sources
//! read — or, failing those, the same finding. One incident per cause and burst; pure
//! data and a pure grouping ([`incidents`]), so that the service, the API and tests group
//! the same verdicts the same way.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::model::verdict::{Finding, JobRef, Status, Verdict};

/// What an incident groups by, most specific first: a job is counted under the first kind
/// that gathers enough jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CauseKind {
    /// Sinks writing to (or sources and lookups reading from) one external system: the
    /// same connector and target, or the same connector when no target is named.
    System,
    /// Slow instances on one host (or TaskManager).
    Host,
    /// Source culprits reading one Kafka topic.
    Topic,
    /// The same finding, when nothing more specific is shared.
    Finding,
}

impl CauseKind {
    pub fn as_str(self) -> &'static str {
        match self {
            CauseKind::System => "system",
            CauseKind::Host => "host",
            CauseKind::Topic => "topic",
            CauseKind::Finding => "finding",
        }
    }
}

/// One cause a verdict can share with others.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Cause {
    pub kind: CauseKind,
    /// What is shared, as the verdicts write it: `elasticsearch` `logs-*`, a host, a
    /// topic, a finding's name.
    pub name: String,
    /// The target within the system (an index, table, topic), for [`CauseKind::System`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// For [`CauseKind::System`]: the culprits write to it (sinks).
    #[serde(default)]
    pub writes: bool,
    /// The finding the jobs share (for every kind: the most common among them).
    pub finding: Finding,
}

/// One verdict as incidents see it: small, so that recent ones can be read in every
/// completing transaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Member {
    pub verdict_id: i64,
    /// When the verdict was stored, Unix ms.
    pub at_ms: i64,
    pub job: JobRef,
    pub finding: Finding,
    /// The culprit vertex's name, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub culprit: Option<String>,
    /// The causes it can share, most specific first.
    #[serde(default)]
    pub causes: Vec<Cause>,
}

impl Member {
    /// The member a stored verdict makes; `None` for a verdict without a culprit
    /// (nothing held back, or not diagnosable): it shares no cause.
    pub fn of(verdict_id: i64, at_ms: i64, v: &Verdict) -> Option<Member> {
        if v.status != Status::CulpritFound || v.finding == Finding::None {
            return None;
        }
        let mut causes = Vec::new();
        if let Some(a) = &v.attribution {
            // A system written to is shared by the sinks holding their jobs back, whatever
            // step named them (a sink at its capacity writes to a system that takes no
            // more). A system read from shares the cause only when the finding points at
            // it (a slow source, a lookup), never for a job at its capacity or with a hot
            // key whose culprit chain starts at a source, and only with its target (every
            // job reads "Kafka").
            let shared = |s: &&crate::model::attribution::ExternalSystem| {
                s.writes || (shared_by_finding(v.finding) && s.target.is_some())
            };
            if let Some(s) = a.system.as_ref().filter(shared) {
                causes.push(Cause {
                    kind: CauseKind::System,
                    name: s.connector.clone(),
                    target: s.target.clone(),
                    writes: s.writes,
                    finding: v.finding,
                });
            }
            for h in &a.hosts {
                causes.push(Cause {
                    kind: CauseKind::Host,
                    name: h.clone(),
                    target: None,
                    writes: false,
                    finding: v.finding,
                });
            }
            for t in &a.topics {
                causes.push(Cause {
                    kind: CauseKind::Topic,
                    name: t.clone(),
                    target: None,
                    writes: false,
                    finding: v.finding,
                });
            }
        }
        if shared_by_finding(v.finding) {
            causes.push(Cause {
                kind: CauseKind::Finding,
                name: v.finding.as_str().to_string(),
                target: None,
                writes: false,
                finding: v.finding,
            });
        }
        Some(Member {
            verdict_id,
            at_ms,
            job: v.job.clone(),
            finding: v.finding,
            culprit: v.culprit.as_ref().map(|c| c.vertex_name.clone()),
            causes,
        })
    }

    /// The job as incidents count it: its id when known, else its name.
    fn job_key(&self) -> &str {
        if self.job.id.is_empty() { &self.job.name } else { &self.job.id }
    }
}

/// Whether many jobs with this finding at once point to one cause outside them, the finding
/// alone saying so: a slow system they write to or read from, the network, their nodes
/// (GC, memory, CPU, a slow instance), checkpoint storage, restarts. A hot key, a job at its
/// capacity, state that grows, skewed or stalled sources are each job's own: many of them
/// at once share no cause by the finding alone.
pub fn shared_by_finding(f: Finding) -> bool {
    match f {
        Finding::Sink
        | Finding::Source
        | Finding::Network
        | Finding::AsyncIo
        | Finding::SlowInstance
        | Finding::GcPressure
        | Finding::MemoryLimit
        | Finding::CpuThrottled
        | Finding::Checkpoints
        | Finding::StateBackend
        | Finding::FailingOver => true,
        Finding::HotKey
        | Finding::Headroom
        | Finding::StateGrowth
        | Finding::WatermarkStall
        | Finding::SourceSkew
        | Finding::WatermarkAlignment
        | Finding::Unexplained
        | Finding::None => false,
    }
}

/// When verdicts make an incident (`[incidents]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IncidentRules {
    /// Least number of jobs sharing a cause.
    pub min_jobs: usize,
    /// Longest time between one job's verdict and the next of the same cause, ms: a
    /// storm's verdicts come within seconds of each other; a gap longer than this starts
    /// a new incident.
    pub window_ms: i64,
}

/// Jobs sharing a cause within a burst of verdicts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Incident {
    /// Stable as the incident grows: its cause and its first verdict.
    pub id: String,
    pub cause: Cause,
    /// The jobs that share it, one verdict each (the latest), in the order they came.
    pub members: Vec<Member>,
    /// Jobs with verdicts in the same time that do not share it, with their own causes.
    pub others: Vec<Member>,
    pub first_ms: i64,
    pub last_ms: i64,
}

impl Incident {
    /// Whether the job of `verdict_id` is counted in it.
    pub fn counts(&self, verdict_id: i64) -> bool {
        self.members.iter().any(|m| m.verdict_id == verdict_id)
    }

    /// The key its messages are delivered and kept under, at every destination.
    pub fn thread(&self) -> String {
        format!("incident:{}", self.id)
    }
}

/// Groups verdicts into incidents: for each cause kind, most specific first, the
/// verdicts not yet counted that share one cause within `window_ms` of each other, when
/// they come from at least `min_jobs` jobs. A job counts once per incident (its latest
/// verdict); its earlier verdicts of the same burst are not "others".
pub fn incidents(members: &[Member], rules: &IncidentRules) -> Vec<Incident> {
    let mut sorted: Vec<&Member> = members.iter().collect();
    sorted.sort_by_key(|m| (m.at_ms, m.verdict_id));
    let mut counted: BTreeSet<i64> = BTreeSet::new();
    let mut out = Vec::new();
    for kind in [CauseKind::System, CauseKind::Host, CauseKind::Topic, CauseKind::Finding] {
        let mut by_cause: BTreeMap<CauseKey<'_>, (&Cause, Vec<&Member>)> = BTreeMap::new();
        for m in sorted.iter().filter(|m| !counted.contains(&m.verdict_id)) {
            for c in m.causes.iter().filter(|c| c.kind == kind) {
                // A system is shared whatever each job's finding; a finding is the cause itself.
                let finding = (kind == CauseKind::Finding).then_some(c.finding.as_str());
                by_cause.entry((&c.name, c.target.as_deref(), c.writes, finding)).or_insert((c, Vec::new())).1.push(m);
            }
        }
        // The cause shared by most jobs first, so that a job tied to two (two hosts) is
        // counted in the bigger; a job counted already is left out of the rest, which may
        // still make their own incident.
        let mut groups: Vec<(&Cause, Vec<&Member>)> = by_cause.into_values().collect();
        groups.sort_by_key(|(_, l)| std::cmp::Reverse(l.iter().map(|m| m.job_key()).collect::<BTreeSet<_>>().len()));
        for (cause, list) in groups {
            let list: Vec<&Member> = list.into_iter().filter(|m| !counted.contains(&m.verdict_id)).collect();
            for chain in chains(&list, rules.window_ms) {
                let latest = latest_per_job(&chain);
                if latest.len() < rules.min_jobs.max(2) {
                    continue;
                }
                counted.extend(chain.iter().map(|m| m.verdict_id));
                out.push(incident(cause, &chain, latest));
            }
        }
    }
    let all: Vec<&Member> = sorted.clone();
    for inc in &mut out {
        let jobs: BTreeSet<&str> = inc.members.iter().map(|m| m.job_key()).collect();
        let others = all
            .iter()
            .filter(|m| m.at_ms >= inc.first_ms - rules.window_ms && m.at_ms <= inc.last_ms + rules.window_ms)
            .filter(|m| !jobs.contains(m.job_key()))
            .map(|m| (*m).clone())
            .collect::<Vec<_>>();
        inc.others = latest_per_job(&others.iter().collect::<Vec<_>>());
    }
    out.sort_by_key(|i| (i.first_ms, i.id.clone()));
    out
}

/// What verdicts are grouped by within one kind: the cause's name, target, whether it is
/// written to, and (for [`CauseKind::Finding`]) the finding.
type CauseKey<'a> = (&'a str, Option<&'a str>, bool, Option<&'a str>);

/// The incident of one verdict, when it is counted in one.
pub fn incident_of(verdict_id: i64, members: &[Member], rules: &IncidentRules) -> Option<Incident> {
    incidents(members, rules).into_iter().find(|i| i.counts(verdict_id))
}

/// Splits time-ordered verdicts where two follow each other more than `window_ms` apart.
fn chains<'a>(list: &[&'a Member], window_ms: i64) -> Vec<Vec<&'a Member>> {
    let mut out: Vec<Vec<&Member>> = Vec::new();
    for m in list {
        match out.last_mut() {
            Some(chain) if chain.last().is_some_and(|l| m.at_ms - l.at_ms <= window_ms) => chain.push(m),
            _ => out.push(vec![m]),
        }
    }
    out
}

/// Each job's latest verdict, in the order the jobs first came.
fn latest_per_job(chain: &[&Member]) -> Vec<Member> {
    let mut order: Vec<&str> = Vec::new();
    let mut latest: BTreeMap<&str, &Member> = BTreeMap::new();
    for m in chain {
        if !latest.contains_key(m.job_key()) {
            order.push(m.job_key());
        }
        latest.insert(m.job_key(), m);
    }
    order.into_iter().map(|k| latest[k].clone()).collect()
}

fn incident(cause: &Cause, chain: &[&Member], members: Vec<Member>) -> Incident {
    let first = chain[0];
    let (kind, cause) = (cause.kind, cause.clone());
    // The finding most of its jobs share (ties: the earliest).
    let mut count: BTreeMap<&str, (usize, Finding)> = BTreeMap::new();
    for m in &members {
        count.entry(m.finding.as_str()).or_insert((0, m.finding)).0 += 1;
    }
    let finding = count
        .values()
        .max_by_key(|(n, f)| (*n, std::cmp::Reverse(members.iter().position(|m| m.finding == *f))))
        .map(|(_, f)| *f)
        .unwrap_or(first.finding);
    let key = format!(
        "{}\u{0}{}\u{0}{}\u{0}{}",
        kind.as_str(),
        cause.name,
        cause.target.as_deref().unwrap_or(""),
        cause.writes
    );
    let digest = Sha256::digest(key.as_bytes());
    let hex: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    Incident {
        id: format!("{}-{hex}", first.verdict_id),
        cause: Cause { finding, ..cause },
        first_ms: chain.iter().map(|m| m.at_ms).min().unwrap_or(first.at_ms),
        last_ms: chain.iter().map(|m| m.at_ms).max().unwrap_or(first.at_ms),
        members,
        others: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULES: IncidentRules = IncidentRules { min_jobs: 5, window_ms: 60_000 };

    fn member(id: i64, at_s: i64, job: &str, finding: Finding, causes: &[(CauseKind, &str, Option<&str>)]) -> Member {
        let mut all: Vec<Cause> = causes
            .iter()
            .map(|(kind, name, target)| Cause {
                kind: *kind,
                name: name.to_string(),
                target: target.map(str::to_string),
                writes: *kind == CauseKind::System,
                finding,
            })
            .collect();
        if shared_by_finding(finding) {
            all.push(Cause {
                kind: CauseKind::Finding,
                name: finding.as_str().into(),
                target: None,
                writes: false,
                finding,
            });
        }
        Member {
            verdict_id: id,
            at_ms: at_s * 1000,
            job: JobRef { name: job.into(), id: String::new() },
            finding,
            culprit: Some("Sink: x".into()),
            causes: all,
        }
    }

    fn es(id: i64, at_s: i64) -> Member {
        member(id, at_s, &format!("job-{id}"), Finding::Sink, &[(CauseKind::System, "elasticsearch", Some("logs-*"))])
    }

    #[test]
    fn sinks_writing_to_one_system_within_the_window_are_one_incident_and_the_rest_are_listed_apart() {
        // 290 sinks to Elasticsearch `logs-*` one every 10 ms, 10 hot keys among them.
        let mut all: Vec<Member> = (1..=290).map(|i| es(i, 100 + i / 100)).collect();
        all.extend((291..=300).map(|i| member(i, 101, &format!("job-{i}"), Finding::HotKey, &[])));
        // 10 hot keys more, and 6 slow instances on six hosts.
        all.extend((301..=306).map(|i| {
            member(i, 101, &format!("job-{i}"), Finding::SlowInstance, &[(CauseKind::Host, &format!("node-{i}"), None)])
        }));
        let found = incidents(&all, &RULES);
        // Hot keys are each job's own: no incident of theirs, however many. Slow instances
        // on six hosts share no host, but the finding points at the nodes: one incident.
        assert_eq!(found.len(), 2, "{:?}", found.iter().map(|i| &i.cause).collect::<Vec<_>>());
        let sinks = &found[0];
        assert_eq!((sinks.cause.kind, sinks.cause.name.as_str()), (CauseKind::System, "elasticsearch"));
        assert_eq!(sinks.cause.target.as_deref(), Some("logs-*"));
        assert_eq!(sinks.members.len(), 290);
        assert_eq!(sinks.others.len(), 16, "the hot keys and slow instances of the same minutes do not fit");
        assert!(sinks.id.starts_with("1-"), "named by its first verdict: {}", sinks.id);
        assert_eq!((found[1].cause.kind, found[1].cause.finding), (CauseKind::Finding, Finding::SlowInstance));
        assert_eq!(found[1].members.len(), 6);
    }

    #[test]
    fn fewer_jobs_than_the_least_number_or_a_gap_longer_than_the_window_make_no_incident() {
        let four: Vec<Member> = (1..=4).map(|i| es(i, 100)).collect();
        assert!(incidents(&four, &RULES).is_empty());
        // Five jobs, but the fifth 61 s after the fourth: two bursts of 4 and 1.
        let mut gap = four.clone();
        gap.push(es(5, 161));
        assert!(incidents(&gap, &RULES).is_empty());
        // 60 s after is within the window.
        let mut close = four;
        close.push(es(5, 160));
        assert_eq!(incidents(&close, &RULES)[0].members.len(), 5);
    }

    #[test]
    fn a_job_tied_to_two_hosts_is_counted_in_the_bigger_incident_and_the_smaller_keeps_the_rest() {
        let host = |id: i64, hosts: &[&str]| {
            let causes: Vec<(CauseKind, &str, Option<&str>)> =
                hosts.iter().map(|h| (CauseKind::Host, *h, None)).collect();
            member(id, 100, &format!("j{id}"), Finding::SlowInstance, &causes)
        };
        // Job 1 runs on hosts a and z; 5 more jobs on a, 9 more on z.
        let mut all = vec![host(1, &["a", "z"])];
        all.extend((2..=6).map(|i| host(i, &["a"])));
        all.extend((10..=18).map(|i| host(i, &["z"])));
        let found = incidents(&all, &RULES);
        let sizes: Vec<(&str, usize)> = found.iter().map(|i| (i.cause.name.as_str(), i.members.len())).collect();
        // z: 9 + job 1 = 10; a: the other 5, still enough.
        assert!(sizes.contains(&("z", 10)) && sizes.contains(&("a", 5)), "{sizes:?}");
    }

    #[test]
    fn a_system_is_shared_only_when_the_finding_points_at_it_and_a_read_one_only_with_its_target() {
        let capture = crate::samples::captures::CAPTURES.iter().find(|c| c.name == "slow-sink").unwrap();
        let mut v = crate::samples::captures::verdict(capture).unwrap();
        let sys = |connector: &str, target: Option<&str>, writes| crate::model::attribution::Attribution {
            system: Some(crate::model::attribution::ExternalSystem {
                connector: connector.into(),
                target: target.map(str::to_string),
                writes,
            }),
            ..Default::default()
        };
        let kinds = |v: &Verdict| Member::of(1, 0, v).unwrap().causes.iter().map(|c| c.kind).collect::<Vec<_>>();
        v.attribution = Some(sys("elasticsearch", Some("logs-*"), true));
        assert_eq!(kinds(&v), [CauseKind::System, CauseKind::Finding]);
        v.attribution = Some(sys("kafka", None, false));
        assert_eq!(kinds(&v), [CauseKind::Finding], "every job reads Kafka");
        v.finding = Finding::Headroom;
        v.attribution = Some(sys("kafka", Some("orders"), false));
        assert!(kinds(&v).is_empty(), "a job at its capacity shares no cause with the others reading the topic");
        // A sink at its capacity writes to a system that takes no more.
        v.attribution = Some(sys("elasticsearch", Some("logs-*"), true));
        assert_eq!(kinds(&v), [CauseKind::System]);
    }

    #[test]
    fn a_job_diagnosed_twice_counts_once_with_its_latest_verdict() {
        let mut all: Vec<Member> = (1..=4).map(|i| es(i, 100)).collect();
        let mut again = es(5, 101);
        again.job.name = "job-1".into();
        all.push(again);
        assert!(incidents(&all, &RULES).is_empty(), "4 jobs, not 5");
        all.push(es(6, 102));
        let inc = &incidents(&all, &RULES)[0];
        assert_eq!(inc.members.len(), 5);
        assert!(inc.counts(5) && !inc.counts(1), "job-1 by its latest verdict");
    }

    #[test]
    fn the_incidents_id_stays_as_it_grows_and_differs_by_cause() {
        let five: Vec<Member> = (1..=5).map(|i| es(i, 100)).collect();
        let mut six = five.clone();
        six.push(es(6, 130));
        assert_eq!(incidents(&five, &RULES)[0].id, incidents(&six, &RULES)[0].id);
        let other: Vec<Member> = (1..=5)
            .map(|i| member(i, 100, &format!("j{i}"), Finding::Sink, &[(CauseKind::System, "jdbc", Some("orders"))]))
            .collect();
        assert_ne!(incidents(&five, &RULES)[0].id, incidents(&other, &RULES)[0].id);
        assert_eq!(incident_of(6, &six, &RULES).map(|i| i.members.len()), Some(6));
        assert_eq!(incident_of(99, &six, &RULES), None);
    }

    #[test]
    fn a_shared_host_is_found_among_slow_instances_and_a_system_wins_over_a_finding() {
        let mut all: Vec<Member> = (1..=5)
            .map(|i| member(i, 100, &format!("j{i}"), Finding::SlowInstance, &[(CauseKind::Host, "node-7", None)]))
            .collect();
        // Sinks to two systems, 5 and 3: the 5 are one system's incident; the 3 are not
        // enough for a finding of their own.
        all.extend((10..15).map(|i| es(i, 100)));
        all.extend(
            (20..23).map(|i| {
                member(i, 100, &format!("j{i}"), Finding::Sink, &[(CauseKind::System, "jdbc", Some("orders"))])
            }),
        );
        let found = incidents(&all, &RULES);
        let mut kinds: Vec<(CauseKind, &str)> = found.iter().map(|i| (i.cause.kind, i.cause.name.as_str())).collect();
        kinds.sort();
        assert_eq!(kinds, vec![(CauseKind::System, "elasticsearch"), (CauseKind::Host, "node-7")]);
    }
}
