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
//!
//! Layout: [`Store`] keeps readiness and metrics around one [`backend::Backend`], SQLite
//! (`sqlite/`) or PostgreSQL (`postgres/`); both backends split along the same files
//! (`schema`, `intake`, `work`, `notices`, `verdicts`, `dead_letters`, `upkeep`,
//! `backend`), so the same thing is in the same place in each. What does not depend on
//! the backend is decided once here: the unknown-jobs caps ([`fairness`]), the folding of
//! "could not diagnose" notices ([`fold`]), the types both take and give ([`types`]).

mod backend;
mod fairness;
mod fold;
mod postgres;
mod sqlite;
#[cfg(test)]
pub(crate) mod tests;
mod types;

use std::sync::{Arc, Mutex};

use crate::config::StoreConfig;
use crate::service::intake::Intake;
use crate::service::metrics::Metrics;

use backend::Backend;
pub use backend::report_dead;
pub use fairness::{
    FIRST_DIAGNOSIS, FOLLOW_UP, Fairness, RESOLVED_ONLY, UnknownWaiting, claim_class, is_deep, newest_first,
    unknown_share,
};
pub use fold::{FOLD_WAIT_MAX_MS, FOLDED_JOBS_NAMED, fold_could_not_diagnose};
pub use postgres::{CLOCK_SKEW_WARN_MS, LocalClock, PgStore};
pub use sqlite::SqliteStore;
pub use sqlite::integrity as sqlite_integrity;
pub use types::*;

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

impl From<serde_json::Error> for StoreError {
    fn from(e: serde_json::Error) -> Self {
        StoreError::new(StoreErrorKind::Decode, e.to_string())
    }
}

/// Why the store is not ready, kept between checks: page-level corruption stays until
/// restart (the file needs an operator); a failed write until a write succeeds.
#[derive(Debug, Default)]
struct Health {
    corrupt: Option<String>,
    write_error: Option<String>,
}

/// The store: the backend and what it has been seen to do.
pub struct Store {
    backend: Box<dyn Backend>,
    health: Mutex<Health>,
    metrics: Arc<Metrics>,
    /// Set by [`Store::close`]: every operation after it fails.
    closed: std::sync::atomic::AtomicBool,
    /// At most one "could not diagnose" per destination within this many ms
    /// ([`Store::fold_could_not_diagnose_every`]); 0 until set.
    fold_window_ms: std::sync::atomic::AtomicI64,
    /// How far back completions read incident rows ([`Store::read_incidents_within`]), ms.
    incident_lookback_ms: std::sync::atomic::AtomicI64,
    /// More due diagnoses than this make a deep queue ([`Store::deep_queue_beyond`]);
    /// `i64::MAX` (never) until set.
    deep_over: std::sync::atomic::AtomicI64,
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

/// Outbox rows [`Store::verdict_notice`] reads at most (the notices of one verdict at one
/// destination: one per alert group carrying it, folded repeats aside).
pub(crate) const VERDICT_NOTICES_READ: i64 = 20;

/// The `LIKE` pattern of a stored notice of verdict `id`: serde writes `verdict_id` and
/// then `verdict_url`, so the comma ends the number (42 never matches 420). Digits only:
/// nothing to escape.
pub(crate) fn verdict_pattern(id: i64) -> String {
    format!("%\"verdict_id\":{id},%")
}

/// The first of the stored notices `rows` (JSON) that is a verdict notice of `id`.
pub(crate) fn first_verdict_notice(rows: &[String], id: i64) -> Option<crate::model::notice::Notice> {
    rows.iter()
        .filter_map(|t| serde_json::from_str::<crate::model::notice::Notice>(t).ok())
        .find(|n| n.kind == crate::model::notice::NoticeKind::Verdict && n.verdict_id == Some(id))
}

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
            let backend: Box<dyn Backend> = Box::new(PgStore::new(cfg, url, metrics.clone(), local)?);
            // Claims of a replica that died come back through lease expiry, not at start.
            metrics.store_recovered("work", 0);
            metrics.store_recovered("outbox", 0);
            return Ok(Store {
                backend,
                health: Mutex::new(Health::default()),
                metrics,
                closed: Default::default(),
                fold_window_ms: 0.into(),
                incident_lookback_ms: 0.into(),
                deep_over: i64::MAX.into(),
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
            backend: Box::new(backend.clone()),
            health: Mutex::new(Health::default()),
            metrics,
            closed: Default::default(),
            fold_window_ms: 0.into(),
            incident_lookback_ms: 0.into(),
            deep_over: i64::MAX.into(),
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

    /// More due diagnoses than `concurrency` (`service.concurrency`, the diagnoses that can
    /// start at once) make a deep queue: then every other claim takes the newest due first
    /// diagnosis ([`fairness`]'s claim order).
    pub fn deep_queue_beyond(&self, concurrency: usize) {
        let n = i64::try_from(concurrency).unwrap_or(i64::MAX);
        self.deep_over.store(n, std::sync::atomic::Ordering::Relaxed);
    }

    fn fold_window(&self) -> i64 {
        self.fold_window_ms.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Which backend this is: `sqlite` or `postgres`.
    pub fn backend_name(&self) -> &'static str {
        self.backend.name()
    }

    /// Runs an operation on the backend unless the store is closed, and keeps track of
    /// health.
    async fn call<T>(&self, op: &'static str, operation: backend::Fut<'_, T>) -> Result<T, StoreError> {
        if self.is_closed() {
            return Err(closed());
        }
        let result = operation.await;
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
        self.call("enqueue", self.backend.enqueue(intakes, now_ms, due_ms, max_queue)).await
    }

    /// Claims the next due diagnosis of a job that has none running (it becomes
    /// `running`), in the claim order [`fairness`] gives: known jobs first, first
    /// diagnoses before follow-ups and retries and those before resolved-only work, senders
    /// in turn, the earliest due (every other claim the newest under a deep queue). Rows
    /// that cannot be decoded go to the dead-letter table on the way.
    pub async fn claim_work(&self, now_ms: i64) -> Result<Option<WorkItem>, StoreError> {
        let deep_over = self.deep_over.load(std::sync::atomic::Ordering::Relaxed);
        self.call("claim_work", self.backend.claim_work(now_ms, deep_over)).await
    }

    /// The earliest time a claimable diagnosis is due, Unix ms.
    pub async fn next_work_ms(&self) -> Result<Option<i64>, StoreError> {
        self.call("next_work", self.backend.next_work_ms()).await
    }

    /// Puts a failed diagnosis back, due again at `due_ms`. If webhooks queued a newer
    /// diagnosis of the job meanwhile, the two merge.
    pub async fn retry_work(&self, item: &WorkItem, due_ms: i64, first_failure_ms: i64) -> Result<(), StoreError> {
        self.call("retry_work", self.backend.retry_work(item, due_ms, first_failure_ms)).await
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
        let lookback = self.incident_lookback_ms.load(std::sync::atomic::Ordering::Relaxed);
        let since = (lookback > 0).then(|| completion.now_ms - lookback);
        self.call("complete", self.backend.complete(item, completion, rediagnose_at_ms, since)).await
    }

    /// Completions read the incident rows of the verdicts stored within `lookback_ms`
    /// before them, for their planner ([`LastVerdicts::recent`]); 0 (the default): none.
    pub fn read_incidents_within(&self, lookback_ms: i64) {
        self.incident_lookback_ms.store(lookback_ms.max(0), std::sync::atomic::Ordering::Relaxed);
    }

    /// The incident rows of the verdicts stored since `since_ms`, oldest first.
    pub async fn recent_members(&self, since_ms: i64) -> Result<Vec<RecentMember>, StoreError> {
        self.call("verdicts", self.backend.recent_members(since_ms)).await
    }

    /// The state `destination` keeps under `thread` (a Slack message's channel and ts),
    /// if any.
    pub async fn thread_state(&self, destination: &str, thread: &str) -> Result<Option<serde_json::Value>, StoreError> {
        self.call("thread_state", self.backend.thread_state(destination, thread)).await
    }

    /// The verdict notice of stored verdict `verdict_id` planned for `destination` (its
    /// first, while the outbox keeps it): the alert group's labels and the thread its
    /// message is kept under, for the Slack buttons (`POST /slack/interactivity`).
    pub async fn verdict_notice(
        &self,
        destination: &str,
        verdict_id: i64,
    ) -> Result<Option<crate::model::notice::Notice>, StoreError> {
        self.call("verdict_notice", self.backend.verdict_notice(destination, verdict_id)).await
    }

    /// Claims the next notice for `destination`: the oldest due head of a group with
    /// nothing in flight, verdicts and resolutions before "could not diagnose". It becomes
    /// `sending`. Undecodable rows go to the dead-letter table on the way.
    pub async fn claim_delivery(&self, destination: &str, now_ms: i64) -> Result<Option<OutboxRow>, StoreError> {
        self.call("claim_delivery", self.backend.claim_delivery(destination, now_ms, self.fold_window())).await
    }

    /// When the next notice for `destination` is due (a group head), Unix ms.
    pub async fn next_delivery_ms(&self, destination: &str) -> Result<Option<i64>, StoreError> {
        self.call("next_delivery", self.backend.next_delivery_ms(destination, self.fold_window())).await
    }

    /// Records a delivery and the destination's new state for the group (under the
    /// claim's token: a replica that lost the row stores nothing).
    pub async fn delivered(
        &self,
        row: &OutboxRow,
        state: Option<serde_json::Value>,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.call("record_delivery", self.backend.delivered(row, state.as_ref(), now_ms)).await
    }

    /// Schedules another attempt at `next_ms`; `unsure` when this attempt may have arrived.
    pub async fn retry_delivery(
        &self,
        row: &OutboxRow,
        next_ms: i64,
        error: &str,
        unsure: bool,
    ) -> Result<(), StoreError> {
        self.call("record_delivery", self.backend.retry_delivery(row, next_ms, error, unsure)).await
    }

    /// Gives up on a notice.
    pub async fn fail_delivery(&self, row: &OutboxRow, error: &str, now_ms: i64) -> Result<(), StoreError> {
        self.call("record_delivery", self.backend.fail_delivery(row, error, now_ms)).await
    }

    /// Right before a send: whether this process still holds the claimed `row` (the same
    /// claim, by its token) with a lease that has not expired, by the database's clock;
    /// then the lease lasts at least `margin_ms` more (the send's timeout). `false`: the
    /// lease was lost (another replica took the send or will): the send must be dropped.
    /// SQLite (one process, no leases): always `true`.
    pub async fn fence(&self, row: &OutboxRow, now_ms: i64, margin_ms: i64) -> Result<bool, StoreError> {
        let Some(fenced) = self.backend.fence(row, now_ms, margin_ms) else { return Ok(true) };
        let result = fenced.await;
        self.track("fence", &result);
        result
    }

    /// Whether replicas share this store's destinations (PostgreSQL): their sends then
    /// take each paced turn from it ([`Store::reserve_pace`]).
    pub fn paces_replicas(&self) -> bool {
        self.backend.name() == "postgres"
    }

    /// Reserves the next slot of the pacing `scope` for every replica on the database: at
    /// least `interval_ms` after the slot reserved before it, by the database's clock.
    /// Answers how long to wait for it, ms; `Ok(None)` on SQLite (one process paces
    /// alone).
    pub async fn reserve_pace(&self, scope: &str, interval_ms: i64) -> Result<Option<i64>, StoreError> {
        match self.backend.reserve_pace(scope, interval_ms) {
            Some(reserved) => self.call("reserve_pace", reserved).await.map(Some),
            None => Ok(None),
        }
    }

    /// On PostgreSQL, the database's clock minus this process's, ms, once measured (the
    /// database's decides leases and due times); `None` on SQLite or before the first
    /// round trip.
    pub fn clock_skew_ms(&self) -> Option<i64> {
        self.backend.clock_skew_ms()
    }

    /// Recent verdicts, newest first (undecodable ones go to the dead-letter table).
    pub async fn verdicts(&self, limit: usize) -> Result<Vec<StoredVerdict>, StoreError> {
        self.call("verdicts", self.backend.verdicts(limit)).await
    }

    /// One verdict.
    pub async fn verdict(&self, id: i64) -> Result<Option<StoredVerdict>, StoreError> {
        self.call("verdicts", self.backend.verdict(id)).await
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
        self.call("verdicts", self.backend.last_verdict_job(job_id.as_deref(), name.as_deref())).await
    }

    /// The dead-letter table, newest first.
    pub async fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>, StoreError> {
        self.call("dead_letters", self.backend.dead_letters(limit)).await
    }

    /// Items waiting, counted in the database.
    pub async fn depths(&self) -> Result<Depths, StoreError> {
        self.call("depths", self.backend.depths()).await
    }

    /// Removes finished rows by age and count.
    pub async fn prune(&self, policy: Prune) -> Result<Pruned, StoreError> {
        self.call("prune", self.backend.prune(policy)).await
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
        self.backend.close().await
    }

    /// Problems found at starts about the store's files and not yet acknowledged, each one
    /// sentence with the way out (SQLite; PostgreSQL keeps its own files). The gauge
    /// `culprit_store_integrity_problems_unacknowledged` follows.
    pub async fn problems(&self) -> Vec<String> {
        let found = match self.backend.problems() {
            Some(problems) => self.call("problems", problems).await,
            None => Ok(Vec::new()),
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
        self.call("touch", self.backend.touch(now_ms)).await.map_err(|e| format!("store cannot write: {}", e.message))
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
