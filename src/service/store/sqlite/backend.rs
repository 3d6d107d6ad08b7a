//! [`Backend`] on SQLite: every operation but intake is a blocking call on the store's
//! connection, run off the async threads.

use std::sync::Arc;

use super::SqliteStore;
use super::integrity::Problem;
use super::work as sqlite_work;
use crate::model::verdict::JobRef;
use crate::service::intake::Intake;
use crate::service::store::RecentMember;
use crate::service::store::backend::{Backend, Fut, task_failed};
use crate::service::store::{
    Completed, Completion, DeadLetter, Depths, Enqueued, OutboxRow, Prune, Pruned, StoreError, StoredVerdict, WorkItem,
};

/// Runs `f` on the store on tokio's blocking threads.
fn blocking<T: Send + 'static>(
    store: &Arc<SqliteStore>,
    f: impl FnOnce(&SqliteStore) -> Result<T, StoreError> + Send + 'static,
) -> Fut<'static, T> {
    let store = store.clone();
    Box::pin(async move { tokio::task::spawn_blocking(move || f(&store)).await.unwrap_or_else(task_failed) })
}

impl Backend for Arc<SqliteStore> {
    fn name(&self) -> &'static str {
        "sqlite"
    }

    fn enqueue(&self, intakes: Vec<Intake>, now_ms: i64, due_ms: i64, max_queue: usize) -> Fut<'_, Enqueued> {
        Box::pin(SqliteStore::enqueue(self, intakes, now_ms, due_ms, max_queue))
    }

    fn claim_work(&self, now_ms: i64, deep_over: i64) -> Fut<'_, Option<WorkItem>> {
        blocking(self, move |s| s.claim_work(now_ms, deep_over))
    }

    fn next_work_ms(&self) -> Fut<'_, Option<i64>> {
        blocking(self, |s| s.next_work_ms())
    }

    fn retry_work<'a>(&'a self, item: &'a WorkItem, due_ms: i64, first_failure_ms: i64) -> Fut<'a, ()> {
        let item = item.clone();
        blocking(self, move |s| s.retry_work(&item, due_ms, first_failure_ms))
    }

    fn complete<'a>(
        &'a self,
        item: &'a WorkItem,
        completion: Completion,
        rediagnose_at_ms: Option<i64>,
        recent_since_ms: Option<i64>,
    ) -> Fut<'a, Completed> {
        let item = item.clone();
        blocking(self, move |s| s.complete(&item, completion, rediagnose_at_ms, recent_since_ms))
    }

    fn recent_members(&self, since_ms: i64) -> Fut<'_, Vec<RecentMember>> {
        blocking(self, move |s| sqlite_work::recent_members(&s.conn(), since_ms))
    }

    fn thread_state<'a>(&'a self, destination: &'a str, thread: &'a str) -> Fut<'a, Option<serde_json::Value>> {
        let (d, t) = (destination.to_string(), thread.to_string());
        blocking(self, move |s| s.thread_state(&d, &t))
    }

    fn verdict_notice<'a>(
        &'a self,
        destination: &'a str,
        verdict_id: i64,
    ) -> Fut<'a, Option<crate::model::notice::Notice>> {
        let d = destination.to_string();
        blocking(self, move |s| s.verdict_notice(&d, verdict_id))
    }

    fn claim_delivery<'a>(&'a self, destination: &'a str, now_ms: i64, window_ms: i64) -> Fut<'a, Option<OutboxRow>> {
        let d = destination.to_string();
        blocking(self, move |s| s.claim_delivery(&d, now_ms, window_ms))
    }

    fn next_delivery_ms<'a>(&'a self, destination: &'a str, window_ms: i64) -> Fut<'a, Option<i64>> {
        let d = destination.to_string();
        blocking(self, move |s| s.next_delivery_ms(&d, window_ms))
    }

    fn delivered<'a>(&'a self, row: &'a OutboxRow, state: Option<&'a serde_json::Value>, now_ms: i64) -> Fut<'a, ()> {
        let (id, destination, group) = (row.id, row.destination.clone(), row.notice.thread_key().to_string());
        let state = state.cloned();
        blocking(self, move |s| s.delivered(id, &destination, &group, state.as_ref(), now_ms))
    }

    fn retry_delivery<'a>(&'a self, row: &'a OutboxRow, next_ms: i64, error: &'a str, unsure: bool) -> Fut<'a, ()> {
        let (id, e) = (row.id, error.to_string());
        blocking(self, move |s| s.retry_delivery(id, next_ms, &e, unsure))
    }

    fn fail_delivery<'a>(&'a self, row: &'a OutboxRow, error: &'a str, now_ms: i64) -> Fut<'a, ()> {
        let (id, e) = (row.id, error.to_string());
        blocking(self, move |s| s.fail_delivery(id, &e, now_ms))
    }

    fn reserve_pace<'a>(&'a self, _scope: &'a str, _interval_ms: i64) -> Option<Fut<'a, i64>> {
        None
    }

    fn fence<'a>(&'a self, _row: &'a OutboxRow, _now_ms: i64, _margin_ms: i64) -> Option<Fut<'a, bool>> {
        None
    }

    fn clock_skew_ms(&self) -> Option<i64> {
        None
    }

    fn verdicts(&self, limit: usize) -> Fut<'_, Vec<StoredVerdict>> {
        blocking(self, move |s| s.verdicts(limit))
    }

    fn verdict(&self, id: i64) -> Fut<'_, Option<StoredVerdict>> {
        blocking(self, move |s| s.verdict(id))
    }

    fn last_verdict_job<'a>(&'a self, job_id: Option<&'a str>, name: Option<&'a str>) -> Fut<'a, Option<JobRef>> {
        let (job_id, name) = (job_id.map(str::to_string), name.map(str::to_string));
        blocking(self, move |s| s.last_verdict_job(job_id.as_deref(), name.as_deref()))
    }

    fn dead_letters(&self, limit: usize) -> Fut<'_, Vec<DeadLetter>> {
        blocking(self, move |s| s.dead_letters(limit))
    }

    fn depths(&self) -> Fut<'_, Depths> {
        blocking(self, |s| s.depths())
    }

    fn prune(&self, policy: Prune) -> Fut<'_, Pruned> {
        blocking(self, move |s| s.prune(policy))
    }

    fn touch(&self, now_ms: i64) -> Fut<'_, ()> {
        blocking(self, move |s| s.touch(now_ms))
    }

    fn problems(&self) -> Option<Fut<'_, Vec<Problem>>> {
        Some(blocking(self, |s| s.problems()))
    }

    fn close(&self) -> Fut<'_, ()> {
        blocking(self, |s| s.close())
    }
}
