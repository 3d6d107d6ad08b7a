//! [`Backend`] on PostgreSQL: every operation is a future on the pool.

use super::PgStore;
use super::work::recent_members;
use crate::model::verdict::JobRef;
use crate::service::intake::Intake;
use crate::service::store::RecentMember;
use crate::service::store::backend::{Backend, Fut};
use crate::service::store::sqlite_integrity::Problem;
use crate::service::store::{
    Completed, Completion, DeadLetter, Depths, Enqueued, OutboxRow, Prune, Pruned, StoredVerdict, WorkItem,
};

impl Backend for PgStore {
    fn name(&self) -> &'static str {
        "postgres"
    }

    fn enqueue(&self, intakes: Vec<Intake>, now_ms: i64, due_ms: i64, max_queue: usize) -> Fut<'_, Enqueued> {
        Box::pin(PgStore::enqueue(self, intakes, now_ms, due_ms, max_queue))
    }

    fn claim_work(&self, now_ms: i64, deep_over: i64) -> Fut<'_, Option<WorkItem>> {
        Box::pin(PgStore::claim_work(self, now_ms, deep_over))
    }

    fn next_work_ms(&self) -> Fut<'_, Option<i64>> {
        Box::pin(PgStore::next_work_ms(self))
    }

    fn retry_work<'a>(&'a self, item: &'a WorkItem, due_ms: i64, first_failure_ms: i64) -> Fut<'a, ()> {
        Box::pin(PgStore::retry_work(self, item, due_ms, first_failure_ms))
    }

    fn complete<'a>(
        &'a self,
        item: &'a WorkItem,
        completion: Completion,
        rediagnose_at_ms: Option<i64>,
        recent_since_ms: Option<i64>,
    ) -> Fut<'a, Completed> {
        Box::pin(PgStore::complete(self, item, completion, rediagnose_at_ms, recent_since_ms))
    }

    fn recent_members(&self, since_ms: i64) -> Fut<'_, Vec<RecentMember>> {
        Box::pin(async move {
            let client = self.client().await?;
            recent_members(&client, self, since_ms).await
        })
    }

    fn thread_state<'a>(&'a self, destination: &'a str, thread: &'a str) -> Fut<'a, Option<serde_json::Value>> {
        Box::pin(async move {
            let client = self.client().await?;
            let sql = "SELECT state FROM group_state WHERE destination = $1 AND group_key = $2";
            let row = client.query_opt(&client.prepare_cached(sql).await?, &[&destination, &thread]).await?;
            // An undecodable state reads as none here (the claim of that thread's next
            // notice moves it aside).
            Ok(row.and_then(|r| r.get::<_, Option<String>>(0)).and_then(|t| serde_json::from_str(&t).ok()))
        })
    }

    fn verdict_notice<'a>(
        &'a self,
        destination: &'a str,
        verdict_id: i64,
    ) -> Fut<'a, Option<crate::model::notice::Notice>> {
        Box::pin(self.verdict_notice(destination, verdict_id))
    }

    fn claim_delivery<'a>(&'a self, destination: &'a str, now_ms: i64, window_ms: i64) -> Fut<'a, Option<OutboxRow>> {
        Box::pin(PgStore::claim_delivery(self, destination, now_ms, window_ms))
    }

    fn next_delivery_ms<'a>(&'a self, destination: &'a str, window_ms: i64) -> Fut<'a, Option<i64>> {
        Box::pin(PgStore::next_delivery_ms(self, destination, window_ms))
    }

    fn delivered<'a>(&'a self, row: &'a OutboxRow, state: Option<&'a serde_json::Value>, now_ms: i64) -> Fut<'a, ()> {
        Box::pin(PgStore::delivered(self, row, state, now_ms))
    }

    fn retry_delivery<'a>(&'a self, row: &'a OutboxRow, next_ms: i64, error: &'a str, unsure: bool) -> Fut<'a, ()> {
        Box::pin(PgStore::retry_delivery(self, row, next_ms, error, unsure))
    }

    fn fail_delivery<'a>(&'a self, row: &'a OutboxRow, error: &'a str, now_ms: i64) -> Fut<'a, ()> {
        Box::pin(PgStore::fail_delivery(self, row, error, now_ms))
    }

    fn fence<'a>(&'a self, row: &'a OutboxRow, now_ms: i64, margin_ms: i64) -> Option<Fut<'a, bool>> {
        Some(Box::pin(PgStore::fence(self, row, now_ms, margin_ms)))
    }

    fn reserve_pace<'a>(&'a self, scope: &'a str, interval_ms: i64) -> Option<Fut<'a, i64>> {
        Some(Box::pin(PgStore::reserve_pace(self, scope, interval_ms)))
    }

    fn clock_skew_ms(&self) -> Option<i64> {
        PgStore::clock_skew_ms(self)
    }

    fn verdicts(&self, limit: usize) -> Fut<'_, Vec<StoredVerdict>> {
        Box::pin(PgStore::verdicts(self, limit))
    }

    fn verdict(&self, id: i64) -> Fut<'_, Option<StoredVerdict>> {
        Box::pin(PgStore::verdict(self, id))
    }

    fn last_verdict_job<'a>(&'a self, job_id: Option<&'a str>, name: Option<&'a str>) -> Fut<'a, Option<JobRef>> {
        Box::pin(PgStore::last_verdict_job(self, job_id, name))
    }

    fn dead_letters(&self, limit: usize) -> Fut<'_, Vec<DeadLetter>> {
        Box::pin(PgStore::dead_letters(self, limit))
    }

    fn depths(&self) -> Fut<'_, Depths> {
        Box::pin(PgStore::depths(self))
    }

    fn prune(&self, policy: Prune) -> Fut<'_, Pruned> {
        Box::pin(PgStore::prune(self, policy))
    }

    fn touch(&self, now_ms: i64) -> Fut<'_, ()> {
        Box::pin(PgStore::touch(self, now_ms))
    }

    fn problems(&self) -> Option<Fut<'_, Vec<Problem>>> {
        None
    }

    fn close(&self) -> Fut<'_, ()> {
        Box::pin(async { Ok(()) })
    }
}
