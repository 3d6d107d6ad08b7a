//! The durable queue and outbox of `serve`.
//!
//! * `work`: diagnoses to run, one pending and at most one running per Flink job.
//!   Webhooks for a job that arrive while its diagnosis waits (the coalescing window)
//!   merge into it; webhooks that arrive while it runs queue the next one, which waits
//!   until the running one is done (one running diagnosis per job).
//! * `outbox`: notices per destination, `UNIQUE(destination, idem_key)`: a notice enqueued
//!   twice (a replay after a crash) is stored once. Delivered per (destination, group):
//!   a group's notices in order, one at a time; groups independently, so a group held by a
//!   `Retry-After` holds no other. "Could not diagnose" notices wait while a verdict or a
//!   resolution is due for the same destination, while any diagnosis (of their alert
//!   group, or of a burst draining) is queued or running (at most [`FOLD_WAIT_MAX_MS`]),
//!   and within `notify.could_not_diagnose_every` of the last one
//!   sent to the destination; claimed, the destination's pending ones fold into one
//!   ([`fold_could_not_diagnose`]): one notice per destination and window, never one per
//!   job or per group. A verdict or resolution never waits behind one of its group.
//! * `group_state`: per destination and alert group, the last verdict posted and the
//!   destination's own state (the Slack message to thread under).
//! * `verdicts`: recent verdicts, for the API and links.
//! * `dead_letter`: rows that could not be decoded, moved aside (logged once, counted in
//!   `culprit_dead_letters_total`, listed by `GET /api/v1/dead-letters`) so that one bad
//!   row never blocks the rows behind it.
//!
//! Every state change is one transaction whose commit is checked: a claim that could not
//! be committed is an error, never a claim. Depths are counted in the database, never
//! kept in a counter. Finished rows are pruned by age and count ([`Prune`]).
//!
//! Delivery after a crash: a row caught `sending` is marked *unsure*; the delivery loop
//! asks the destination whether it arrived (Slack) before sending it again, and otherwise
//! sends it again with the same idempotency key (at least once).

mod postgres;
mod sqlite;
pub mod sqlite_integrity;
mod sqlite_wal;
#[cfg(test)]
pub(crate) mod tests;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::config::StoreConfig;
use crate::model::notice::{Notice, NoticeKind};
use crate::service::intake::Intake;
use crate::service::metrics::Metrics;

pub use postgres::{CLOCK_SKEW_WARN_MS, LocalClock, PgStore};
pub use sqlite::SqliteStore;

/// What kind of failure a store error is: it decides readiness and the metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreErrorKind {
    /// The disk (or the database's size limit) is full.
    Full,
    /// The file is damaged ("database disk image is malformed").
    Corrupt,
    /// Another connection held a lock for longer than the busy timeout.
    Busy,
    /// The disk or filesystem failed (I/O error, read-only, cannot open).
    Io,
    /// A row could not be decoded (it goes to the dead-letter table).
    Decode,
    /// Another process uses the store.
    InUse,
    /// Anything else.
    Other,
}

impl StoreErrorKind {
    /// The `kind` label of `culprit_store_errors_total`.
    pub fn as_str(self) -> &'static str {
        match self {
            StoreErrorKind::Full => "full",
            StoreErrorKind::Corrupt => "corrupt",
            StoreErrorKind::Busy => "busy",
            StoreErrorKind::Io => "io",
            StoreErrorKind::Decode => "decode",
            StoreErrorKind::InUse => "in_use",
            StoreErrorKind::Other => "other",
        }
    }
}

/// A store failure. Messages never hold secrets (they name SQLite's error and the file).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("store: {message}")]
pub struct StoreError {
    pub kind: StoreErrorKind,
    pub message: String,
}

impl StoreError {
    pub fn new(kind: StoreErrorKind, message: impl Into<String>) -> Self {
        StoreError { kind, message: message.into() }
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        use rusqlite::ErrorCode as C;
        let kind = match e.sqlite_error_code() {
            Some(C::DiskFull) => StoreErrorKind::Full,
            Some(C::DatabaseCorrupt | C::NotADatabase) => StoreErrorKind::Corrupt,
            Some(C::DatabaseBusy | C::DatabaseLocked) => StoreErrorKind::Busy,
            Some(C::SystemIoFailure | C::ReadOnly | C::CannotOpen | C::PermissionDenied) => StoreErrorKind::Io,
            _ => StoreErrorKind::Other,
        };
        StoreError::new(kind, e.to_string())
    }
}

impl From<serde_json::Error> for StoreError {
    fn from(e: serde_json::Error) -> Self {
        StoreError::new(StoreErrorKind::Decode, e.to_string())
    }
}

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
    /// SQLite, one process: 0). The send is checked under it ([`Store::fence`]) and its
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

/// One notice to enqueue in [`Store::complete`].
#[derive(Debug, Clone)]
pub struct NewNotice {
    pub destination: String,
    pub notice: Notice,
    /// The verdict key to remember for the group at this destination (`None`: keep).
    pub remember_verdict: Option<String>,
}

/// The delivery priority of a notice: verdicts and resolutions first (0), "could not
/// diagnose" after them (1), so that failures never delay a real verdict.
pub fn priority(kind: NoticeKind) -> i64 {
    match kind {
        NoticeKind::Verdict | NoticeKind::Resolved => 0,
        NoticeKind::CouldNotDiagnose => 1,
    }
}

/// Longest a "could not diagnose" notice waits for the diagnoses still queued or running
/// (of its alert group, or a burst draining), so that their failures fold into it
/// ([`fold_could_not_diagnose`]) and verdicts go first.
pub const FOLD_WAIT_MAX_MS: i64 = 60_000;

/// Most jobs a folded "could not diagnose" notice names; the rest are counted.
pub const FOLDED_JOBS_NAMED: usize = 10;

/// Folds the other "could not diagnose" notices waiting for the same destination (of
/// any alert group) into `head`, so that a destination gets one such notice per window,
/// never one per job: the reason goes on to name the other jobs, at most
/// [`FOLDED_JOBS_NAMED`], counts the rest ("and N more"), says in which alert groups, and
/// whether they failed for the same reason (a reason that differs only by naming its own
/// job is the same). Pure.
pub fn fold_could_not_diagnose(head: &mut Notice, others: &[Notice]) {
    let own = head.reason.clone().unwrap_or_default();
    let mut seen = std::collections::BTreeSet::from([head.job.name.clone()]);
    let mut same = true;
    let mut jobs = Vec::new();
    for n in others {
        let reason = n.reason.clone().unwrap_or_default();
        let (name, head_name) = (n.job.name.as_str(), head.job.name.as_str());
        same &= reason == own || (!name.is_empty() && replace_word(&reason, name, head_name) == own);
        if seen.insert(name.to_string()) {
            jobs.push(name.to_string());
        }
    }
    if jobs.is_empty() {
        return;
    }
    let mut list = jobs.iter().take(FOLDED_JOBS_NAMED).cloned().collect::<Vec<_>>().join(", ");
    if jobs.len() > FOLDED_JOBS_NAMED {
        list.push_str(&format!(" and {} more", jobs.len() - FOLDED_JOBS_NAMED));
    }
    let more = if jobs.len() == 1 { "1 more job".to_string() } else { format!("{} more jobs", jobs.len()) };
    let why = if same { "for the same reason" } else { "each for its own reason (culprit's log has them)" };
    let groups: std::collections::BTreeSet<&str> =
        others.iter().map(|n| n.group_key.as_str()).filter(|g| *g != head.group_key).collect();
    let scope = match groups.len() {
        0 => "in this alert group".to_string(),
        1 => "in this alert group or 1 other".to_string(),
        n => format!("in this alert group or {n} others"),
    };
    head.reason = Some(format!("{own}\nNot diagnosed either {scope}, {why}: {more}: {list}"));
}

/// `s` with every `from` that stands as a word of its own (no letter, digit, `_` or `-`
/// around it) replaced by `to`.
fn replace_word(s: &str, from: &str, to: &str) -> String {
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '-');
    let mut out = String::with_capacity(s.len());
    let mut rest = 0;
    for (i, _) in s.match_indices(from) {
        let end = i + from.len();
        if i < rest || word(s[..i].chars().next_back()) || word(s[end..].chars().next()) {
            continue;
        }
        out.push_str(&s[rest..i]);
        out.push_str(to);
        rest = end;
    }
    out.push_str(&s[rest..]);
    out
}

/// The last verdict key each (destination, group) of a work item holds, as the completing
/// transaction sees it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LastVerdicts(pub BTreeMap<(String, String), String>);

impl LastVerdicts {
    pub fn get(&self, destination: &str, group_key: &str) -> Option<String> {
        self.0.get(&(destination.to_string(), group_key.to_string())).cloned()
    }
}

/// Plans the notices of a finished diagnosis inside the completing transaction, from the
/// verdict id (when a verdict was stored) and the groups' last verdicts.
pub type Planner = Box<dyn FnOnce(Option<i64>, &LastVerdicts) -> Vec<NewNotice> + Send>;

/// How a finished diagnosis is stored.
pub struct Completion {
    /// The verdict: job name and `culprit.verdict/v1` JSON.
    pub verdict: Option<(String, String)>,
    pub plan: Planner,
    pub now_ms: i64,
}

/// What [`Store::complete`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completed {
    pub verdict_id: Option<i64>,
    /// Notices added to the outbox (a replayed one is not added twice).
    pub notices: usize,
}

/// What [`Store::enqueue`] did with one webhook's intakes.
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

/// Most diagnoses of unknown jobs waiting, all senders together: half the queue, so that
/// however many senders a flood of bogus job names comes from, known jobs always find
/// room.
pub fn unknown_share(max_queue: i64) -> i64 {
    (max_queue / 2).max(1)
}

/// What the queue holds back for fairness, from `[store]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fairness {
    /// `store.max_unknown_per_sender`.
    pub max_unknown_per_sender: i64,
    /// `store.unknown_max_wait`, ms.
    pub unknown_max_wait_ms: i64,
}

impl Fairness {
    pub fn of(cfg: &StoreConfig) -> Fairness {
        Fairness {
            max_unknown_per_sender: i64::try_from(cfg.max_unknown_per_sender).unwrap_or(i64::MAX),
            unknown_max_wait_ms: cfg.unknown_max_wait.as_ms(),
        }
    }
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

/// Rows removed by [`Store::prune`], per table.
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

/// Why the store is not ready, kept between checks: page-level corruption stays until
/// restart (the file needs an operator); a failed write until a write succeeds.
#[derive(Debug, Default)]
struct Health {
    corrupt: Option<String>,
    write_error: Option<String>,
}

/// Where the store keeps its rows.
enum Backend {
    /// One replica, a file.
    Sqlite(Arc<SqliteStore>),
    /// Any number of replicas, one database.
    Postgres(PgStore),
}

/// The store: the backend and what it has been seen to do.
pub struct Store {
    backend: Backend,
    health: Mutex<Health>,
    metrics: Arc<Metrics>,
    /// Set by [`Store::close`]: every operation after it fails.
    closed: std::sync::atomic::AtomicBool,
    /// At most one "could not diagnose" per destination within this many ms
    /// ([`Store::fold_could_not_diagnose_every`]); 0 until set.
    fold_window_ms: std::sync::atomic::AtomicI64,
}

/// Operations that write: their failure makes the store not ready until a write works.
const WRITES: &[&str] = &[
    "enqueue",
    "claim_work",
    "retry_work",
    "complete",
    "claim_delivery",
    "fence",
    "record_delivery",
    "prune",
    "touch",
];

impl Store {
    /// Opens the store `cfg` names: PostgreSQL when `store.url` is set (no connection yet:
    /// the first operation connects and migrates, and `/readyz` says why it cannot), else
    /// SQLite at `store.path` (takes the single-process lock, migrates, recovers from a
    /// crash, starts the intake writer).
    pub fn open(cfg: &StoreConfig, metrics: Arc<Metrics>) -> Result<Store, StoreError> {
        Store::open_with_clock(cfg, metrics, Arc::new(|| jiff::Timestamp::now().as_millisecond()))
    }

    /// [`Store::open`] for a service whose clock is `local` (the clock its `now_ms`
    /// arguments come from): on PostgreSQL the store measures that clock's offset from the
    /// database's and schedules in the database's time; SQLite (one process) keeps `local`.
    pub fn open_with_clock(cfg: &StoreConfig, metrics: Arc<Metrics>, local: LocalClock) -> Result<Store, StoreError> {
        if let Some(url) = &cfg.url {
            let backend = Backend::Postgres(PgStore::new(cfg, url, metrics.clone(), local)?);
            // Claims of a replica that died come back through lease expiry, not at start.
            metrics.store_recovered("work", 0);
            metrics.store_recovered("outbox", 0);
            return Ok(Store {
                backend,
                health: Mutex::new(Health::default()),
                metrics,
                closed: Default::default(),
                fold_window_ms: 0.into(),
            });
        }
        let (backend, recovered) = SqliteStore::open(cfg, metrics.clone())?;
        if recovered != Recovered::default() {
            let by = if backend.last_stop_clean {
                "recovered work the last stop did not wait for (it stopped cleanly, with diagnoses or sends still running)"
            } else {
                "recovered work interrupted by a crash"
            };
            tracing::warn!(
                diagnoses = recovered.work,
                deliveries = recovered.deliveries,
                "{by}: diagnoses run again; deliveries are checked or sent again"
            );
        }
        metrics.store_recovered("work", recovered.work as u64);
        metrics.store_recovered("outbox", recovered.deliveries as u64);
        report_problems(&metrics, &backend.found_at_start);
        let backend = Arc::new(backend);
        let store = Store {
            backend: Backend::Sqlite(backend.clone()),
            health: Mutex::new(Health::default()),
            metrics,
            closed: Default::default(),
            fold_window_ms: 0.into(),
        };
        if let Err(e) = backend.quick_check() {
            store.observe("quick_check", &e);
        }
        Ok(store)
    }

    /// At most one "could not diagnose" notice per destination within `window_ms`
    /// (`notify.could_not_diagnose_every`): one claimed after it carries every other
    /// waiting for the destination, of any alert group ([`fold_could_not_diagnose`]).
    pub fn fold_could_not_diagnose_every(&self, window_ms: i64) {
        self.fold_window_ms.store(window_ms.max(0), std::sync::atomic::Ordering::Relaxed);
    }

    fn fold_window(&self) -> i64 {
        self.fold_window_ms.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Which backend this is: `sqlite` or `postgres`.
    pub fn backend_name(&self) -> &'static str {
        match self.backend {
            Backend::Sqlite(_) => "sqlite",
            Backend::Postgres(_) => "postgres",
        }
    }

    /// Runs an operation on the backend — a blocking SQLite call off the async threads, or
    /// a PostgreSQL future — and keeps track of health.
    async fn call<T, F>(
        &self,
        op: &'static str,
        sqlite: impl FnOnce(&SqliteStore) -> Result<T, StoreError> + Send + 'static,
        postgres: impl FnOnce(PgStore) -> F,
    ) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, StoreError>>,
    {
        if self.is_closed() {
            return Err(closed());
        }
        let result = match &self.backend {
            Backend::Sqlite(backend) => {
                let backend = backend.clone();
                tokio::task::spawn_blocking(move || sqlite(&backend)).await.unwrap_or_else(task_failed)
            }
            Backend::Postgres(p) => postgres(p.clone()).await,
        };
        self.track(op, &result);
        result
    }

    /// Remembers what an operation's outcome says about readiness.
    fn track<T>(&self, op: &str, result: &Result<T, StoreError>) {
        match result {
            Ok(_) if WRITES.contains(&op) => self.health().write_error = None,
            Ok(_) => {}
            Err(e) => self.observe(op, e),
        }
    }

    fn health(&self) -> std::sync::MutexGuard<'_, Health> {
        self.health.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts an error and remembers what it says about readiness.
    fn observe(&self, op: &str, e: &StoreError) {
        self.metrics.store_error(op, e.kind.as_str());
        let mut h = self.health();
        match e.kind {
            StoreErrorKind::Corrupt => h.corrupt = Some(e.message.clone()),
            _ if WRITES.contains(&op) => h.write_error = Some(e.message.clone()),
            _ => {}
        }
    }

    /// Durably records one webhook's intakes, all or nothing; returns once committed.
    /// Coalescing: an intake for a job with a pending diagnosis merges into it; otherwise
    /// a new diagnosis is due at `now_ms + coalesce_ms`. When the new diagnoses would take
    /// the queue (waiting and running) over `max_queue`, nothing is stored; a new row for a
    /// resolved group (its job's diagnosis runs) needs no diagnosis and is not held to it.
    pub async fn enqueue(
        &self,
        intakes: Vec<Intake>,
        now_ms: i64,
        coalesce_ms: i64,
        max_queue: usize,
    ) -> Result<Enqueued, StoreError> {
        let due_ms = now_ms + coalesce_ms;
        if self.is_closed() {
            return Err(closed());
        }
        let result = match &self.backend {
            Backend::Sqlite(s) => s.enqueue(intakes, now_ms, due_ms, max_queue).await,
            Backend::Postgres(p) => p.enqueue(intakes, now_ms, due_ms, max_queue).await,
        };
        self.track("enqueue", &result);
        result
    }

    /// Claims the earliest due diagnosis of a job that has none running (it becomes
    /// `running`). Rows that cannot be decoded go to the dead-letter table on the way.
    pub async fn claim_work(&self, now_ms: i64) -> Result<Option<WorkItem>, StoreError> {
        self.call("claim_work", move |s| s.claim_work(now_ms), |p| async move { p.claim_work(now_ms).await }).await
    }

    /// The earliest time a claimable diagnosis is due, Unix ms.
    pub async fn next_work_ms(&self) -> Result<Option<i64>, StoreError> {
        self.call("next_work", |s| s.next_work_ms(), |p| async move { p.next_work_ms().await }).await
    }

    /// Puts a failed diagnosis back, due again at `due_ms`. If webhooks queued a newer
    /// diagnosis of the job meanwhile, the two merge.
    pub async fn retry_work(&self, item: &WorkItem, due_ms: i64, first_failure_ms: i64) -> Result<(), StoreError> {
        let (lite, pg) = (item.clone(), item.clone());
        self.call(
            "retry_work",
            move |s| s.retry_work(&lite, due_ms, first_failure_ms),
            |p| async move { p.retry_work(&pg, due_ms, first_failure_ms).await },
        )
        .await
    }

    /// Finishes a diagnosis in one transaction: stores the verdict, reads the last verdict
    /// of each (destination, group) of the item, plans the notices from them
    /// (`completion.plan`), enqueues them (a notice already in the outbox is not added
    /// again), remembers each group's verdict per destination, and removes the work.
    pub async fn complete(&self, item: &WorkItem, completion: Completion) -> Result<Completed, StoreError> {
        self.complete_rediagnosing(item, completion, None).await
    }

    /// [`Store::complete`], and, with `rediagnose_at_ms`, the item's firing groups are
    /// diagnosed once more at that time (a weak verdict's follow-up), in the same
    /// transaction: the finished row becomes pending again with its groups marked
    /// [`GroupInfo::rediagnosis`]; if webhooks queued a diagnosis of the job meanwhile,
    /// the groups it lacks join that one instead (it is due sooner; its own entries are
    /// newer). A webhook for the job while the follow-up waits merges into it and brings
    /// it forward to the coalescing window.
    pub async fn complete_rediagnosing(
        &self,
        item: &WorkItem,
        completion: Completion,
        rediagnose_at_ms: Option<i64>,
    ) -> Result<Completed, StoreError> {
        // By hand: the completion moves into whichever backend runs it.
        if self.is_closed() {
            return Err(closed());
        }
        let result = match &self.backend {
            Backend::Sqlite(s) => {
                let (s, item) = (s.clone(), item.clone());
                tokio::task::spawn_blocking(move || s.complete(&item, completion, rediagnose_at_ms))
                    .await
                    .unwrap_or_else(task_failed)
            }
            Backend::Postgres(p) => p.complete(item, completion, rediagnose_at_ms).await,
        };
        self.track("complete", &result);
        result
    }

    /// Claims the next notice for `destination`: the oldest due head of a group with
    /// nothing in flight, verdicts and resolutions before "could not diagnose". It becomes
    /// `sending`. Undecodable rows go to the dead-letter table on the way.
    pub async fn claim_delivery(&self, destination: &str, now_ms: i64) -> Result<Option<OutboxRow>, StoreError> {
        let (d, window) = (destination.to_string(), self.fold_window());
        self.call(
            "claim_delivery",
            move |s| s.claim_delivery(&d, now_ms, window),
            |p| async move { p.claim_delivery(destination, now_ms, window).await },
        )
        .await
    }

    /// When the next notice for `destination` is due (a group head), Unix ms.
    pub async fn next_delivery_ms(&self, destination: &str) -> Result<Option<i64>, StoreError> {
        let (d, window) = (destination.to_string(), self.fold_window());
        self.call(
            "next_delivery",
            move |s| s.next_delivery_ms(&d, window),
            |p| async move { p.next_delivery_ms(destination, window).await },
        )
        .await
    }

    /// Records a delivery and the destination's new state for the group (under the
    /// claim's token: a replica that lost the row stores nothing).
    pub async fn delivered(
        &self,
        row: &OutboxRow,
        state: Option<serde_json::Value>,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let (id, destination, group) = (row.id, row.destination.clone(), row.notice.group_key.clone());
        let pg_state = state.clone();
        self.call(
            "record_delivery",
            move |s| s.delivered(id, &destination, &group, state.as_ref(), now_ms),
            |p| async move { p.delivered(row, pg_state.as_ref(), now_ms).await },
        )
        .await
    }

    /// Schedules another attempt at `next_ms`; `unsure` when this attempt may have arrived.
    pub async fn retry_delivery(
        &self,
        row: &OutboxRow,
        next_ms: i64,
        error: &str,
        unsure: bool,
    ) -> Result<(), StoreError> {
        let (id, e) = (row.id, error.to_string());
        self.call(
            "record_delivery",
            move |s| s.retry_delivery(id, next_ms, &e, unsure),
            |p| async move { p.retry_delivery(row, next_ms, error, unsure).await },
        )
        .await
    }

    /// Gives up on a notice.
    pub async fn fail_delivery(&self, row: &OutboxRow, error: &str, now_ms: i64) -> Result<(), StoreError> {
        let (id, e) = (row.id, error.to_string());
        self.call(
            "record_delivery",
            move |s| s.fail_delivery(id, &e, now_ms),
            |p| async move { p.fail_delivery(row, error, now_ms).await },
        )
        .await
    }

    /// Right before a send: whether this process still holds the claimed `row` (the same
    /// claim, by its token) with a lease that has not expired, by the database's clock;
    /// then the lease lasts at least `margin_ms` more (the send's timeout). `false`: the
    /// lease was lost (another replica took the send or will): the send must be dropped.
    /// SQLite (one process, no leases): always `true`.
    pub async fn fence(&self, row: &OutboxRow, now_ms: i64, margin_ms: i64) -> Result<bool, StoreError> {
        match &self.backend {
            Backend::Sqlite(_) => Ok(true),
            Backend::Postgres(p) => {
                let result = p.fence(row, now_ms, margin_ms).await;
                self.track("fence", &result);
                result
            }
        }
    }

    /// On PostgreSQL, the database's clock minus this process's, ms, once measured (the
    /// database's decides leases and due times); `None` on SQLite or before the first
    /// round trip.
    pub fn clock_skew_ms(&self) -> Option<i64> {
        match &self.backend {
            Backend::Sqlite(_) => None,
            Backend::Postgres(p) => p.clock_skew_ms(),
        }
    }

    /// Recent verdicts, newest first (undecodable ones go to the dead-letter table).
    pub async fn verdicts(&self, limit: usize) -> Result<Vec<StoredVerdict>, StoreError> {
        self.call("verdicts", move |s| s.verdicts(limit), |p| async move { p.verdicts(limit).await }).await
    }

    /// One verdict.
    pub async fn verdict(&self, id: i64) -> Result<Option<StoredVerdict>, StoreError> {
        self.call("verdicts", move |s| s.verdict(id), |p| async move { p.verdict(id).await }).await
    }

    /// The job as the newest stored verdict about it names it (Flink's name, with its id),
    /// found by job id, else by name as the reporter writes it (among the last 200
    /// verdicts): a notice without a verdict (resolved, could not diagnose) names the job
    /// the way its verdicts did.
    pub async fn last_verdict_job(
        &self,
        job_id: Option<String>,
        name: Option<String>,
    ) -> Result<Option<crate::model::verdict::JobRef>, StoreError> {
        let (id2, name2) = (job_id.clone(), name.clone());
        self.call(
            "verdicts",
            move |s| s.last_verdict_job(job_id.as_deref(), name.as_deref()),
            |p| async move { p.last_verdict_job(id2.as_deref(), name2.as_deref()).await },
        )
        .await
    }

    /// The dead-letter table, newest first.
    pub async fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>, StoreError> {
        self.call("dead_letters", move |s| s.dead_letters(limit), |p| async move { p.dead_letters(limit).await }).await
    }

    /// Items waiting, counted in the database.
    pub async fn depths(&self) -> Result<Depths, StoreError> {
        self.call("depths", |s| s.depths(), |p| async move { p.depths().await }).await
    }

    /// Removes finished rows by age and count.
    pub async fn prune(&self, policy: Prune) -> Result<Pruned, StoreError> {
        self.call("prune", move |s| s.prune(policy), |p| async move { p.prune(policy).await }).await
    }

    fn is_closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The clean stop, after the last write (SQLite: the log checkpointed into the
    /// database file, the connections closed; see [`SqliteStore::close`]). Every operation
    /// after it fails.
    pub async fn close(&self) -> Result<(), StoreError> {
        if self.closed.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return Ok(());
        }
        match &self.backend {
            Backend::Sqlite(s) => {
                let s = s.clone();
                tokio::task::spawn_blocking(move || s.close()).await.unwrap_or_else(task_failed)
            }
            Backend::Postgres(_) => Ok(()),
        }
    }

    /// Problems found at starts about the store's files and not yet acknowledged, each one
    /// sentence with the way out (SQLite; PostgreSQL keeps its own files). The gauge
    /// `culprit_store_integrity_problems_unacknowledged` follows.
    pub async fn problems(&self) -> Vec<String> {
        let found = match &self.backend {
            Backend::Sqlite(_) => self.call("problems", |s| s.problems(), |_| async { Ok(Vec::new()) }).await,
            Backend::Postgres(_) => Ok(Vec::new()),
        };
        match found {
            Ok(found) => {
                self.metrics.store_integrity.unacknowledged.set(found.len() as i64);
                found.iter().map(sqlite_integrity::Problem::explain).collect()
            }
            Err(_) => Vec::new(),
        }
    }

    /// Whether the store can take work: not corrupt, and a write (the `health` row)
    /// commits now. The error is the reason, for `/readyz`.
    pub async fn ready(&self, now_ms: i64) -> Result<(), String> {
        if let Some(c) = self.health().corrupt.clone() {
            return Err(format!(
                "store corrupt: {c} (stop culprit, move the database file aside or restore it; a new one is created at start)"
            ));
        }
        self.call("touch", move |s| s.touch(now_ms), |p| async move { p.touch(now_ms).await })
            .await
            .map_err(|e| format!("store cannot write: {}", e.message))
    }
}

fn closed() -> StoreError {
    StoreError::new(StoreErrorKind::Other, "the store is closed: culprit is stopping")
}

/// Says at ERROR what a start found about the SQLite files (an older start's too, until
/// acknowledged), counts what this one found, sets the gauge.
fn report_problems(metrics: &Metrics, problems: &[sqlite_integrity::Problem]) {
    for p in problems {
        tracing::error!(kind = %p.kind, kept = p.kept.as_deref().unwrap_or("-"), "{}", p.explain());
        if !p.new {
            continue;
        }
        metrics.store_integrity.total.get_or_create(&crate::service::metrics::Kind { kind: p.kind.clone() }).inc();
    }
    metrics.store_integrity.unacknowledged.set(problems.len() as i64);
}

fn task_failed<T>(e: tokio::task::JoinError) -> Result<T, StoreError> {
    Err(StoreError::new(StoreErrorKind::Other, format!("the store task failed: {e}")))
}

/// Reads a column as text whatever its type, for dead letters: NULL as null, numbers as
/// numbers, text lossily, blobs as `x'…'` hex (at most 4 KiB shown).
fn column_as_json(v: rusqlite::types::ValueRef<'_>) -> serde_json::Value {
    use rusqlite::types::ValueRef;
    const MAX: usize = 4096;
    match v {
        ValueRef::Null => serde_json::Value::Null,
        ValueRef::Integer(i) => i.into(),
        ValueRef::Real(f) => f.into(),
        ValueRef::Text(t) => String::from_utf8_lossy(&t[..t.len().min(MAX)]).into_owned().into(),
        ValueRef::Blob(b) => format!("x'{}'", hex::encode(&b[..b.len().min(MAX)])).into(),
    }
}
