//! The seam between [`super::Store`] and where its rows live: one trait, two backends
//! behind it — SQLite (`sqlite/`, one replica, a file) and PostgreSQL (`postgres/`, any
//! number of replicas). Both split along the same files: `schema.rs` (migrations),
//! `intake.rs` (webhooks, group commit), `work.rs` (diagnoses), `notices.rs` (the outbox),
//! `verdicts.rs`, `dead_letters.rs`, `upkeep.rs` (depths, pruning, the health row) and
//! `backend.rs` (this trait). What does not depend on the backend lives above it: the
//! fairness decisions ([`super::fairness`]), the folding of "could not diagnose" notices
//! ([`super::fold`]), health and metrics ([`super::Store`]).

use std::future::Future;
use std::pin::Pin;

use super::sqlite::integrity::Problem;
use super::{
    Completed, Completion, DeadLetter, Depths, Enqueued, OutboxRow, Prune, Pruned, RecentMember, StoreError,
    StoreErrorKind, StoredVerdict, WorkItem,
};
use crate::model::verdict::JobRef;
use crate::service::intake::Intake;
use crate::service::metrics::Metrics;

/// Most undecodable rows moved aside in one claim (the rest wait for the next claim), on
/// either backend: a claim stays one short transaction however many rows went bad.
pub const MAX_DEAD_PER_CLAIM: usize = 64;

/// A backend's answer, to await.
pub type Fut<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Where the store keeps its rows. Each operation is one transaction whose commit is
/// checked; [`super::Store`] documents what each does and keeps track of health around
/// them. Times are this process's clock (PostgreSQL converts to the database's).
pub trait Backend: Send + Sync {
    /// `sqlite` or `postgres`.
    fn name(&self) -> &'static str;
    /// `due_ms`: when a new diagnosis is due (now plus the coalescing window).
    fn enqueue(&self, intakes: Vec<Intake>, now_ms: i64, due_ms: i64, max_queue: usize) -> Fut<'_, Enqueued>;
    /// `deep_over`: more due diagnoses than this make a deep queue (`i64::MAX`: never).
    fn claim_work(&self, now_ms: i64, deep_over: i64) -> Fut<'_, Option<WorkItem>>;
    fn next_work_ms(&self) -> Fut<'_, Option<i64>>;
    fn retry_work<'a>(&'a self, item: &'a WorkItem, due_ms: i64, first_failure_ms: i64) -> Fut<'a, ()>;
    /// `recent_since_ms`: the incident rows of verdicts stored since then are read for the
    /// planner (`None`: none are).
    fn complete<'a>(
        &'a self,
        item: &'a WorkItem,
        completion: Completion,
        rediagnose_at_ms: Option<i64>,
        recent_since_ms: Option<i64>,
    ) -> Fut<'a, Completed>;
    /// The incident rows of verdicts stored since `since_ms`, oldest first.
    fn recent_members(&self, since_ms: i64) -> Fut<'_, Vec<RecentMember>>;
    /// The state a destination keeps under one thread key (a Slack message), if any.
    fn thread_state<'a>(&'a self, destination: &'a str, thread: &'a str) -> Fut<'a, Option<serde_json::Value>>;
    /// The first verdict notice of `verdict_id` for `destination` still in the outbox.
    fn verdict_notice<'a>(
        &'a self,
        destination: &'a str,
        verdict_id: i64,
    ) -> Fut<'a, Option<crate::model::notice::Notice>>;
    /// `window_ms`: at most one "could not diagnose" per destination within it.
    fn claim_delivery<'a>(&'a self, destination: &'a str, now_ms: i64, window_ms: i64) -> Fut<'a, Option<OutboxRow>>;
    fn next_delivery_ms<'a>(&'a self, destination: &'a str, window_ms: i64) -> Fut<'a, Option<i64>>;
    fn delivered<'a>(&'a self, row: &'a OutboxRow, state: Option<&'a serde_json::Value>, now_ms: i64) -> Fut<'a, ()>;
    fn retry_delivery<'a>(&'a self, row: &'a OutboxRow, next_ms: i64, error: &'a str, unsure: bool) -> Fut<'a, ()>;
    fn fail_delivery<'a>(&'a self, row: &'a OutboxRow, error: &'a str, now_ms: i64) -> Fut<'a, ()>;
    /// `None` when the backend has no leases (one process: a claim is always held).
    fn fence<'a>(&'a self, row: &'a OutboxRow, now_ms: i64, margin_ms: i64) -> Option<Fut<'a, bool>>;
    /// Reserves the next slot of a pacing `scope`, at least `interval_ms` after the slot
    /// reserved before it, by the database's clock; answers the wait from now, ms. `None`
    /// when the backend serves one process (its pacing is the process's own).
    fn reserve_pace<'a>(&'a self, scope: &'a str, interval_ms: i64) -> Option<Fut<'a, i64>>;
    /// The database's clock minus this process's, ms, once measured; `None` when the
    /// backend has no clock of its own.
    fn clock_skew_ms(&self) -> Option<i64>;
    fn verdicts(&self, limit: usize) -> Fut<'_, Vec<StoredVerdict>>;
    fn verdict(&self, id: i64) -> Fut<'_, Option<StoredVerdict>>;
    fn last_verdict_job<'a>(&'a self, job_id: Option<&'a str>, name: Option<&'a str>) -> Fut<'a, Option<JobRef>>;
    fn dead_letters(&self, limit: usize) -> Fut<'_, Vec<DeadLetter>>;
    fn depths(&self) -> Fut<'_, Depths>;
    fn prune(&self, policy: Prune) -> Fut<'_, Pruned>;
    /// Writes the health row.
    fn touch(&self, now_ms: i64) -> Fut<'_, ()>;
    /// Problems found in the store's files at starts, not yet acknowledged; `None` when
    /// the backend keeps no files of its own (PostgreSQL).
    fn problems(&self) -> Option<Fut<'_, Vec<Problem>>>;
    /// The clean stop, after the last write.
    fn close(&self) -> Fut<'_, ()>;
}

/// Logs and counts dead letters once their transaction committed.
pub fn report_dead(metrics: &Metrics, dead: Vec<DeadLetter>) {
    for d in dead {
        tracing::error!(table = %d.source, row = d.source_id, destination = d.destination.as_deref().unwrap_or(""),
            error = %d.error, dead_letter = d.id, "moved an undecodable row to the dead-letter table");
        metrics.dead_letter(&d.source);
    }
}

/// A blocking task that did not finish (it panicked or was cancelled), as a store error.
pub fn task_failed<T>(e: tokio::task::JoinError) -> Result<T, StoreError> {
    Err(StoreError::new(StoreErrorKind::Other, format!("the store task failed: {e}")))
}
