//! Webhook intake on PostgreSQL: one writer task per replica commits every webhook waiting
//! in one transaction (group commit), so a burst costs one commit (one WAL flush) per
//! batch, not per webhook, and a replica holds one intake connection, not one per request.
//!
//! When no webhook of the batch can take the queue over its bound, every intake is applied
//! in job order (stable: a job's webhooks keep their order), so two replicas' batches lock
//! jobs' rows in the same order and never deadlock. Near the bound, each webhook is a
//! savepoint of its own, all or nothing, as on SQLite. The same holds for the caps on
//! unknown jobs (`store.max_unknown_per_sender`, [`unknown_share`]): a batch that surely
//! fits them takes the fast way, else each webhook is checked on its own.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Weak;

use deadpool_postgres::Transaction;
use tokio::sync::{mpsc, oneshot};

use super::{Inner, PgStore, apply_intake, report_dead};
use crate::service::intake::Intake;
use crate::service::store::{DeadLetter, Enqueued, Fairness, StoreError, unknown_share};

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
    let mut unknown = Unknown::read(&tx, store.inner.fairness, batches).await?;
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
    (depth, unknown): (&mut i64, &mut Unknown),
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

/// The diagnoses of unknown jobs waiting, in all and per sender of the batch, read once
/// per intake transaction and kept up to date in memory.
struct Unknown {
    fairness: Fairness,
    total: i64,
    per_sender: BTreeMap<String, i64>,
}

impl Unknown {
    async fn read(tx: &Transaction<'_>, fairness: Fairness, batches: &[Batch]) -> Result<Unknown, StoreError> {
        let senders: Vec<&str> = batches
            .iter()
            .flat_map(|b| b.intakes.iter().map(|i| i.sender.as_str()))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let sql = "SELECT COUNT(*) FROM work WHERE NOT known";
        let total: i64 = tx.query_one(&tx.prepare_cached(sql).await?, &[]).await?.get(0);
        let sql = "SELECT sender, COUNT(*) FROM work WHERE NOT known AND sender = ANY($1) GROUP BY sender";
        let mut per_sender: BTreeMap<String, i64> = senders.iter().map(|s| (s.to_string(), 0)).collect();
        for r in tx.query(&tx.prepare_cached(sql).await?, &[&senders]).await? {
            per_sender.insert(r.get(0), r.get(1));
        }
        Ok(Unknown { fairness, total, per_sender })
    }

    /// The refusal when `new` unknown diagnoses (per sender) would not fit; `None` if they do.
    fn refusal(&self, new: &BTreeMap<String, i64>, max_queue: i64) -> Option<Enqueued> {
        let share = unknown_share(max_queue);
        if new.is_empty() {
            return None;
        }
        if self.total + new.values().sum::<i64>() > share {
            return Some(Enqueued::TooManyUnknown { waiting: self.total, limit: share });
        }
        let cap = self.fairness.max_unknown_per_sender;
        new.iter().find_map(|(sender, n)| {
            let waiting = self.per_sender.get(sender).copied().unwrap_or(0);
            (waiting + n > cap).then_some(Enqueued::TooManyUnknown { waiting, limit: cap })
        })
    }

    fn stored(&mut self, new: &BTreeMap<String, i64>) {
        for (sender, n) in new {
            self.total += n;
            *self.per_sender.entry(sender.clone()).or_insert(0) += n;
        }
    }
}
