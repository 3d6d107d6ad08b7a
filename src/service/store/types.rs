//! What the store takes and gives back, the same for both backends.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::notice::{AlertLinks, Notice, NoticeKind};

/// What a work item knows about one of its alert groups.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupInfo {
    pub firing: bool,
    pub firing_set: String,
    pub labels: BTreeMap<String, String>,
    /// The group is here for the follow-up of a weak verdict, not for a webhook (a webhook
    /// for the group replaces the entry): a diagnosis whose groups are all follow-ups
    /// schedules no further one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rediagnosis: bool,
    /// The links the alert source gave for the group (Grafana's), put in its notices.
    #[serde(default, skip_serializing_if = "AlertLinks::is_empty")]
    pub links: AlertLinks,
}

/// A diagnosis to run.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkItem {
    pub id: i64,
    pub job_key: String,
    pub job: String,
    /// Labels common to the job's alerts (they choose the Flink cluster).
    pub labels: BTreeMap<String, String>,
    /// Alert groups that asked, by groupKey.
    pub groups: BTreeMap<String, GroupInfo>,
    pub created_ms: i64,
    pub attempts: i64,
    /// When the diagnosis first failed, for the retry window.
    pub first_failure_ms: Option<i64>,
    /// Whether the job is known (a verdict before, or `[flink.plans]`): known jobs are
    /// claimed first. Read by the store tests; the worker diagnoses either kind the same way.
    pub known: bool,
}

impl WorkItem {
    /// Whether this diagnosis is only the follow-up of a weak verdict: no webhook asked
    /// for any of its groups since (it schedules no further follow-up).
    pub fn is_rediagnosis(&self) -> bool {
        !self.groups.is_empty() && self.groups.values().all(|g| g.rediagnosis)
    }

    /// The `group_state` row that holds, per destination, what the destination was told of
    /// this job's episode ([`crate::service::episode`]): read and written with the item's
    /// groups in the completing transaction (and on PostgreSQL locked with them).
    pub fn episode_row(&self) -> String {
        episode_row(&self.job_key)
    }
}

/// The `group_state` key of a job's episode row. It starts with a unit separator, which no
/// Alertmanager `groupKey` does (they start with `{`).
pub fn episode_row(job_key: &str) -> String {
    format!("\u{1f}episode\u{1f}{job_key}")
}

/// A notice claimed for delivery (marked `sending`).
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxRow {
    pub id: i64,
    pub destination: String,
    pub notice: Notice,
    /// True when an earlier attempt may have arrived (a crash mid-send, a timeout): the
    /// destination is asked before sending again, when it can tell.
    pub unsure: bool,
    /// Attempts so far, this one included.
    pub attempts: i64,
    pub first_ms: i64,
    /// What the last delivery to this (destination, group) returned.
    pub group_state: Option<serde_json::Value>,
    /// The fencing token of this claim (PostgreSQL: incremented at every claim of the row;
    /// SQLite, one process: 0). The send is checked under it ([`super::Store::fence`]) and its
    /// outcome stored under it only.
    pub token: i64,
}

/// A stored verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredVerdict {
    pub id: i64,
    pub created_ms: i64,
    pub verdict: serde_json::Value,
}

/// A row that could not be decoded, moved aside.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeadLetter {
    pub id: i64,
    /// The table it came from: `work`, `outbox`, `group_state`, `verdicts`.
    pub source: String,
    /// Its id there (0 for `group_state`).
    pub source_id: i64,
    /// The destination, for outbox and group-state rows.
    pub destination: Option<String>,
    /// Why it could not be decoded.
    pub error: String,
    /// The row as stored (columns as text), for a person to read.
    pub payload: serde_json::Value,
    pub at_ms: i64,
}

/// One notice to enqueue in [`super::Store::complete`].
#[derive(Debug, Clone)]
pub struct NewNotice {
    pub destination: String,
    pub notice: Notice,
    /// The verdict key to remember at this destination under the notice's
    /// [`Notice::thread_key`] (`None`: keep).
    pub remember_verdict: Option<String>,
}

/// A `group_state` row's verdict key to write in [`super::Store::complete`], whether or
/// not a notice goes with it (what a destination was told of an episode changes when a
/// group joins it, even where the destination wants no notice of that).
#[derive(Debug, Clone, PartialEq)]
pub struct Remember {
    pub destination: String,
    pub row: String,
    pub value: String,
}

/// What a finished diagnosis's planner gives: the notices and the rows to remember.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    pub notices: Vec<NewNotice>,
    pub remember: Vec<Remember>,
    /// The stored verdict as incidents see it (`crate::model::incident::Member`, JSON),
    /// kept with the verdict's id and time so that later completions and the API read
    /// recent verdicts without their whole text.
    pub member: Option<String>,
}

impl From<Vec<NewNotice>> for Plan {
    fn from(notices: Vec<NewNotice>) -> Plan {
        Plan { notices, remember: Vec::new(), member: None }
    }
}

/// The delivery priority of a notice: verdicts and resolutions first (0), "could not
/// diagnose" after them (1), so that failures never delay a real verdict.
pub fn priority(kind: NoticeKind) -> i64 {
    match kind {
        NoticeKind::Verdict
        | NoticeKind::Resolved
        | NoticeKind::Joined
        | NoticeKind::GroupResolved
        | NoticeKind::Incident => 0,
        NoticeKind::CouldNotDiagnose => 1,
    }
}

/// Delivery rank of a firing verdict and of a group joining a verdict: first among notices
/// of one priority.
pub const RANK_FIRING: i64 = 0;
/// Delivery rank of a verdict that goes into an incident's thread (a job counted in an
/// incident where its summary is shown): after unrelated jobs' verdicts, so that a storm's
/// replies never hold them up, before resolutions.
pub const RANK_IN_INCIDENT: i64 = 1;
/// Delivery rank of resolutions (a group's or the episode's) and of a verdict whose group
/// no longer fires: after everything that fires.
pub const RANK_RESOLVED: i64 = 2;

/// The delivery rank of a notice (`outbox.rank`): ordered by after [`priority`] and before
/// the row id, so that among notices of one priority those about firing groups go first.
/// [`RANK_FIRING`] (0): firing verdicts, [`NoticeKind::Joined`], and "could not diagnose"
/// (whose [`priority`] already puts it after); [`RANK_RESOLVED`] (2): [`NoticeKind::Resolved`],
/// [`NoticeKind::GroupResolved`] and a verdict of a group that resolved meanwhile;
/// [`RANK_IN_INCIDENT`] (1): a firing verdict that goes into an incident's thread (the
/// summary itself is [`RANK_FIRING`]: the replies wait for it). Only the order between threads: a
/// thread's (an episode's) own notices still go one after the other in id order (the
/// claim skips a notice while an earlier one of its thread waits or is being sent).
pub fn rank(notice: &Notice) -> i64 {
    let in_incident = notice.incident.as_ref().is_some_and(|t| t.summary_here);
    match notice.kind {
        NoticeKind::Verdict if notice.firing && in_incident => RANK_IN_INCIDENT,
        NoticeKind::Verdict if notice.firing => RANK_FIRING,
        // A summary goes before the verdicts in its thread (rank 0): it is what they reply to.
        NoticeKind::Incident => RANK_FIRING,
        NoticeKind::Joined | NoticeKind::CouldNotDiagnose => RANK_FIRING,
        NoticeKind::Verdict | NoticeKind::Resolved | NoticeKind::GroupResolved => RANK_RESOLVED,
    }
}

/// The last verdict key each (destination, row) of a work item holds — its groups, its
/// job's episode row ([`WorkItem::episode_row`]) — and the recent verdicts' incident rows
/// ([`RecentMember`], since the store's incident lookback), as the completing transaction
/// sees them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LastVerdicts(pub BTreeMap<(String, String), String>, pub Vec<RecentMember>);

/// One recent verdict's incident row: its id, when it was stored (Unix ms, this process's
/// clock) and what incidents see of it (`crate::model::incident::Member`, JSON; the store
/// does not read it).
#[derive(Debug, Clone, PartialEq)]
pub struct RecentMember {
    pub verdict_id: i64,
    pub created_ms: i64,
    pub member: String,
}

impl LastVerdicts {
    pub fn get(&self, destination: &str, group_key: &str) -> Option<String> {
        self.0.get(&(destination.to_string(), group_key.to_string())).cloned()
    }

    /// The recent verdicts' incident rows, oldest first.
    pub fn recent(&self) -> &[RecentMember] {
        &self.1
    }
}

/// Plans the notices of a finished diagnosis inside the completing transaction, from the
/// verdict id (when a verdict was stored) and the groups' last verdicts.
pub type Planner = Box<dyn FnOnce(Option<i64>, &LastVerdicts) -> Plan + Send>;

/// How a finished diagnosis is stored.
pub struct Completion {
    /// The verdict: job name and `culprit.verdict/v1` JSON.
    pub verdict: Option<(String, String)>,
    pub plan: Planner,
    pub now_ms: i64,
}

/// What [`super::Store::complete`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completed {
    pub verdict_id: Option<i64>,
    /// Notices added to the outbox (a replayed one is not added twice).
    pub notices: usize,
}

/// What [`super::Store::enqueue`] did with one webhook's intakes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enqueued {
    /// Stored durably; `created` new diagnoses (the others merged into waiting ones).
    Stored { jobs: usize, created: usize, depth: i64 },
    /// Storing would take the queue over `max_queue`: nothing was stored.
    QueueFull { depth: i64 },
    /// The webhook asks for new diagnoses of unknown jobs beyond what its sender may have
    /// waiting (`store.max_unknown_per_sender`), or beyond the unknown jobs' share of the
    /// queue ([`unknown_share`]): nothing was stored.
    TooManyUnknown { waiting: i64, limit: i64 },
}

/// Items waiting, counted in the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Depths {
    /// Diagnoses waiting or running.
    pub work: i64,
    /// Notices waiting or being sent.
    pub outbox: i64,
    /// Rows in the dead-letter table.
    pub dead_letters: i64,
}

/// Pruning of finished rows: older than `older_than_ms`, or beyond the newest `keep_rows`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prune {
    pub now_ms: i64,
    pub older_than_ms: i64,
    pub keep_rows: i64,
    pub verdicts_kept: i64,
}

/// Rows removed by [`super::Store::prune`], per table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pruned {
    pub outbox: usize,
    /// Jobs forgotten as known (no verdict for `store.prune_after`).
    pub known_jobs: usize,
    pub group_state: usize,
    pub verdicts: usize,
    pub dead_letters: usize,
}

/// What recovery after a crash found, at open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Recovered {
    /// Diagnoses that were running: pending again.
    pub work: usize,
    /// Deliveries that were being sent: unsure.
    pub deliveries: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::verdict::JobRef;

    #[test]
    fn firing_notices_rank_before_incident_replies_and_those_before_resolutions() {
        let of = |kind, firing| Notice {
            links: Default::default(),
            kind,
            group_key: "g".into(),
            labels: BTreeMap::new(),
            job: JobRef { name: "j".into(), id: "i".into() },
            verdict: None,
            verdict_id: None,
            verdict_url: None,
            reason: None,
            firing,
            changed: false,
            idempotency_key: "k".into(),
            at_ms: 0,
            episode: Default::default(),
            maybe_repeat: false,
            incident: None,
            incident_view: None,
            incident_parent: None,
        };
        let in_incident = |summary_here| {
            let mut n = of(NoticeKind::Verdict, true);
            n.incident = Some(crate::model::notice::NoticeIncident {
                id: "1-a".into(),
                thread: "incident:1-a".into(),
                cause: crate::model::incident::Cause {
                    kind: crate::model::incident::CauseKind::Finding,
                    name: "sink".into(),
                    target: None,
                    writes: false,
                    finding: crate::model::verdict::Finding::Sink,
                },
                jobs: 5,
                summary_here,
            });
            rank(&n)
        };
        // A reply in an incident's thread after unrelated verdicts; where no summary is
        // shown (PagerDuty) the job's verdict is a firing verdict like any other.
        assert_eq!((in_incident(true), in_incident(false), rank(&of(NoticeKind::Incident, true))), (1, 0, 0));
        let ranks = [
            rank(&of(NoticeKind::Verdict, true)),
            rank(&of(NoticeKind::Joined, true)),
            rank(&of(NoticeKind::CouldNotDiagnose, true)),
            rank(&of(NoticeKind::Verdict, false)),
            rank(&of(NoticeKind::Resolved, false)),
            rank(&of(NoticeKind::GroupResolved, true)),
        ];
        assert_eq!(ranks, [0, 0, 0, 2, 2, 2]);
    }
}
