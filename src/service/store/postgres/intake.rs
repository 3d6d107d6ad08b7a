//! Webhook intake on PostgreSQL: one writer task per replica commits every webhook waiting
//! in one transaction (group commit), so a burst costs one commit (one WAL flush) per
//! batch, not per webhook, and a replica holds one intake connection, not one per request.
//!
//! When no webhook of the batch can take the queue over its bound, every intake is applied
//! in job order (stable: a job's webhooks keep their order), so two replicas' batches lock
//! jobs' rows in the same order and never deadlock. Near the bound, each webhook is a
//! savepoint of its own, all or nothing, as on SQLite. The same holds for the caps on
//! unknown jobs (`store.max_unknown_per_sender`, [`crate::service::store::unknown_share`],
//! decided by [`UnknownWaiting`]): a batch that surely fits them takes the fast way, else
//! each webhook is checked on its own.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Weak;

use deadpool_postgres::Transaction;
use tokio::sync::{mpsc, oneshot};

use super::*;
use crate::service::store::UnknownWaiting;

/// Most webhooks committed in one intake transaction.
const MAX_BATCH: usize = 256;

/// A webhook's intakes on their way to the writer task.
pub(super) struct Batch {
    pub intakes: Vec<Intake>,
    /// Local times (the writer turns them into the database's).
    pub now_ms: i64,
    pub due_ms: i64,
    pub max_queue: i64,
    pub done: oneshot::Sender<Result<Enqueued, StoreError>>,
}

/// Starts the writer task; it ends when the store is dropped (the sender with it).
pub(super) fn spawn_writer(inner: Weak<Inner>) -> mpsc::Sender<Batch> {
    let (tx, rx) = mpsc::channel::<Batch>(4096);
    tokio::spawn(writer(inner, rx));
    tx
}

async fn writer(inner: Weak<Inner>, mut rx: mpsc::Receiver<Batch>) {
    while let Some(first) = rx.recv().await {
        let mut batches = vec![first];
        while batches.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(b) => batches.push(b),
                Err(_) => break,
            }
        }
        let Some(inner) = inner.upgrade() else { return };
        let store = PgStore { inner };
        let mut dead = Vec::new();
        match commit_batches(&store, &batches, &mut dead).await {
            Ok(results) => {
                report_dead(&store.inner.metrics, dead);
                for (b, r) in batches.into_iter().zip(results) {
                    let _ = b.done.send(r);
                }
            }
            Err(e) => {
                for b in batches {
                    let _ = b.done.send(Err(e.clone()));
                }
            }
        }
    }
}

/// One transaction for many webhooks. The outer error fails them all (the commit failed);
/// an inner one fails that webhook alone.
async fn commit_batches(
    store: &PgStore,
    batches: &[Batch],
    dead: &mut Vec<DeadLetter>,
) -> Result<Vec<Result<Enqueued, StoreError>>, StoreError> {
    let mut client = store.client().await?;
    let mut tx = client.transaction().await?;
    let mut depth: i64 = tx.query_one(&tx.prepare_cached("SELECT COUNT(*) FROM work").await?, &[]).await?.get(0);
    let total: usize = batches.iter().map(|b| b.intakes.len()).sum();
    let bound = batches.iter().map(|b| b.max_queue).min().unwrap_or(i64::MAX);
    let keys: Vec<&str> = batches.iter().flat_map(|b| b.intakes.iter().map(|i| i.job_key.as_str())).collect();
    let sql = "SELECT job_key FROM known_jobs WHERE job_key = ANY($1)";
    let known: BTreeSet<String> =
        tx.query(&tx.prepare_cached(sql).await?, &[&keys]).await?.iter().map(|r| r.get(0)).collect();
    let known = Known(known);
    let mut unknown = unknown_waiting(&tx, store.inner.fairness, batches).await?;
    // At most every firing intake of a job not known is a new unknown diagnosis.
    let mut at_most = BTreeMap::new();
    for i in batches.iter().flat_map(|b| &b.intakes).filter(|i| i.firing && !known.of(i)) {
        *at_most.entry(i.sender.clone()).or_insert(0) += 1;
    }
    let mut results = Vec::with_capacity(batches.len());
    if depth.saturating_add(total as i64) <= bound && unknown.refusal(&at_most, bound).is_none() {
        let mut order: Vec<(usize, &Intake)> =
            batches.iter().enumerate().flat_map(|(k, b)| b.intakes.iter().map(move |i| (k, i))).collect();
        order.sort_by(|a, b| a.1.job_key.cmp(&b.1.job_key));
        let mut created = vec![0usize; batches.len()];
        for (k, i) in order {
            let (now, due) = (store.db(batches[k].now_ms), store.db(batches[k].due_ms));
            created[k] += apply_intake(&tx, i, known.of(i), now, due, dead).await?;
        }
        for (b, created) in batches.iter().zip(created) {
            depth += created as i64;
            results.push(Ok(Enqueued::Stored { jobs: b.intakes.len(), created, depth }));
        }
    } else {
        for b in batches {
            results.push(one_webhook(store, &mut tx, b, (&mut depth, &mut unknown), &known, dead).await?);
        }
    }
    tx.commit().await?;
    Ok(results)
}

/// One webhook in a savepoint: stored whole, refused whole when the queue is full, or
/// failed alone.
async fn one_webhook(
    store: &PgStore,
    tx: &mut Transaction<'_>,
    b: &Batch,
    (depth, unknown): (&mut i64, &mut UnknownWaiting),
    known: &Known,
    dead: &mut Vec<DeadLetter>,
) -> Result<Result<Enqueued, StoreError>, StoreError> {
    let mut intakes: Vec<&Intake> = b.intakes.iter().collect();
    intakes.sort_by(|a, b| a.job_key.cmp(&b.job_key));
    let (now, due) = (store.db(b.now_ms), store.db(b.due_ms));
    let sp = tx.savepoint("webhook").await?;
    let mut own_dead = Vec::new();
    let (mut created, mut diagnoses) = (0usize, 0usize);
    let mut new_unknown = BTreeMap::new();
    for i in intakes {
        match apply_intake(&sp, i, known.of(i), now, due, &mut own_dead).await {
            Ok(n) => {
                created += n;
                // The bound is about diagnosis work: a new row for a resolved group needs none.
                diagnoses += if i.firing { n } else { 0 };
                if i.firing && n > 0 && !known.of(i) {
                    *new_unknown.entry(i.sender.clone()).or_insert(0) += 1;
                }
            }
            Err(e) => {
                sp.rollback().await?;
                return Ok(Err(e));
            }
        }
    }
    if diagnoses > 0 && *depth + diagnoses as i64 > b.max_queue {
        sp.rollback().await?;
        return Ok(Ok(Enqueued::QueueFull { depth: *depth }));
    }
    if let Some(refused) = unknown.refusal(&new_unknown, b.max_queue) {
        sp.rollback().await?;
        return Ok(Ok(refused));
    }
    sp.commit().await?;
    unknown.stored(&new_unknown);
    *depth += created as i64;
    dead.append(&mut own_dead);
    Ok(Ok(Enqueued::Stored { jobs: b.intakes.len(), created, depth: *depth }))
}

/// The jobs of a batch the store has given a verdict.
struct Known(BTreeSet<String>);

impl Known {
    /// Whether an intake's job is known (by the intake itself, or by the store).
    fn of(&self, i: &Intake) -> bool {
        i.known || self.0.contains(&i.job_key)
    }
}

/// The diagnoses of unknown jobs waiting, in all and per sender of the batch, counted
/// once per intake transaction ([`UnknownWaiting`] decides and keeps them up to date).
async fn unknown_waiting(
    tx: &Transaction<'_>,
    fairness: Fairness,
    batches: &[Batch],
) -> Result<UnknownWaiting, StoreError> {
    let senders: Vec<&str> = batches
        .iter()
        .flat_map(|b| b.intakes.iter().map(|i| i.sender.as_str()))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut unknown = UnknownWaiting::new(fairness);
    let sql = "SELECT COUNT(*) FROM work WHERE NOT known";
    unknown.set_total(tx.query_one(&tx.prepare_cached(sql).await?, &[]).await?.get(0));
    for s in &senders {
        unknown.set_sender(s, 0);
    }
    let sql = "SELECT sender, COUNT(*) FROM work WHERE NOT known AND sender = ANY($1) GROUP BY sender";
    for r in tx.query(&tx.prepare_cached(sql).await?, &[&senders]).await? {
        let (sender, waiting): (String, i64) = (r.get(0), r.get(1));
        unknown.set_sender(&sender, waiting);
    }
    Ok(unknown)
}

impl PgStore {
    /// See [`crate::service::store::Store::enqueue`]: through this replica's intake writer (group commit).
    pub async fn enqueue(
        &self,
        intakes: Vec<Intake>,
        now_ms: i64,
        due_ms: i64,
        max_queue: usize,
    ) -> Result<Enqueued, StoreError> {
        let writer = self.inner.intake.get_or_init(|| intake::spawn_writer(Arc::downgrade(&self.inner)));
        let (done, wait) = tokio::sync::oneshot::channel();
        let stopped = || StoreError::new(StoreErrorKind::Other, "the intake writer stopped");
        let max_queue = i64::try_from(max_queue).unwrap_or(i64::MAX);
        writer.send(intake::Batch { intakes, now_ms, due_ms, max_queue, done }).await.map_err(|_| stopped())?;
        wait.await.map_err(|_| stopped())?
    }
}

/// Merges an intake into the job's pending diagnosis, or creates one due at `due_ms`.
/// Returns 1 when a new diagnosis was created. A pending row that cannot be decoded is
/// moved aside. The insert is an upsert: a replica that created the job's pending row
/// meanwhile gets the group merged in (a JSON object union).
pub(super) async fn apply_intake(
    tx: &Transaction<'_>,
    i: &Intake,
    known: bool,
    now_ms: i64,
    due_ms: i64,
    dead: &mut Vec<DeadLetter>,
) -> Result<usize, StoreError> {
    let info = GroupInfo {
        firing: i.firing,
        firing_set: i.firing_set.clone(),
        labels: i.labels.clone(),
        rediagnosis: false,
        links: i.links.clone(),
    };
    let labels = serde_json::to_string(&i.labels)?;
    let sql = "SELECT id, groups, attempts FROM work WHERE state = 'pending' AND job_key = $1 FOR UPDATE";
    if let Some(row) = tx.query_opt(&tx.prepare_cached(sql).await?, &[&i.job_key]).await? {
        let id: i64 = row.get(0);
        let groups: String = row.get(1);
        let attempts: i64 = row.get(2);
        match serde_json::from_str::<BTreeMap<String, GroupInfo>>(&groups) {
            Ok(mut groups) => {
                // A weak verdict's follow-up waits longer than the coalescing window: a
                // webhook brings it forward (a retry keeps its backoff).
                let follow_up = groups.values().all(|g| g.rediagnosis);
                groups.insert(i.group_key.clone(), info);
                let due = if follow_up { due_ms } else { i64::MAX };
                let class = claim_class(&groups, attempts);
                let sql = "UPDATE work SET groups = $2, labels = $3, due_ms = LEAST(due_ms, $4), known = known OR $5,
                     claim_class = $6 WHERE id = $1";
                let groups = serde_json::to_string(&groups)?;
                tx.execute(&tx.prepare_cached(sql).await?, &[&id, &groups, &labels, &due, &known, &class]).await?;
                return Ok(0);
            }
            Err(why) => dead.push(dead_letter_work(tx, id, &format!("groups: {why}"), now_ms).await?),
        }
    }
    let groups: BTreeMap<String, GroupInfo> = [(i.group_key.clone(), info)].into_iter().collect();
    let class = claim_class(&groups, 0);
    let sql = "INSERT INTO work (job_key, job, labels, groups, due_ms, created_ms, state, sender, known, claim_class)
         VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $8, $9)
         ON CONFLICT (job_key) WHERE state = 'pending'
         DO UPDATE SET groups = (work.groups::jsonb || excluded.groups::jsonb)::text, labels = excluded.labels,
           known = work.known OR excluded.known
         RETURNING (xmax = 0), id";
    let groups = serde_json::to_string(&groups)?;
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 9] =
        [&i.job_key, &i.job, &labels, &groups, &due_ms, &now_ms, &i.sender, &known, &class];
    let row = tx.query_one(&tx.prepare_cached(sql).await?, &params).await?;
    let created = row.get::<_, bool>(0);
    if !created {
        // Another replica made the job's pending row meanwhile: its class, from the merged
        // groups, is decided here as everywhere (the row is locked by the upsert).
        reclassify(tx, row.get(1)).await?;
    }
    Ok(usize::from(created))
}

/// Writes a pending row's claim class from its groups and attempts as stored; a row whose
/// groups cannot be decoded keeps its class (it goes to the dead letters at its claim).
async fn reclassify(tx: &Transaction<'_>, id: i64) -> Result<(), StoreError> {
    let sql = "SELECT groups, attempts FROM work WHERE id = $1";
    let row = tx.query_one(&tx.prepare_cached(sql).await?, &[&id]).await?;
    if let Ok(groups) = serde_json::from_str::<BTreeMap<String, GroupInfo>>(row.get(0)) {
        let class = claim_class(&groups, row.get(1));
        let sql = "UPDATE work SET claim_class = $2 WHERE id = $1";
        tx.execute(&tx.prepare_cached(sql).await?, &[&id, &class]).await?;
    }
    Ok(())
}
