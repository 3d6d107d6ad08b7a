//! The durable queue and outbox: embedded SQLite in WAL mode.
//!
//! * `work`: one pending diagnosis per Flink job. Webhooks for a job that arrive while its
//!   diagnosis waits (the coalescing window) merge into it.
//! * `outbox`: notices per destination, `UNIQUE(destination, idem_key)`: a notice enqueued
//!   twice (a replay after a crash) is stored once.
//! * `group_state`: per destination and alert group, the last verdict posted and the
//!   destination's own state (the Slack message to thread under).
//! * `verdicts`: recent verdicts, for the API and links.
//!
//! Webhook intake goes through one writer thread that commits many webhooks per
//! transaction (group commit), so `synchronous=FULL` costs one fsync per batch, not per
//! webhook. Everything else runs on a second connection. After a crash, work that was
//! running is pending again; outbox rows caught `sending` are checked before a resend.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

use crate::config::{StoreConfig, Synchronous};
use crate::model::notice::Notice;
use crate::model::verdict::Verdict;
use crate::service::intake::Intake;

/// A store failure. Messages never hold secrets (the store holds none).
#[derive(Debug, thiserror::Error)]
#[error("store: {0}")]
pub struct StoreError(pub String);

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        StoreError(e.to_string())
    }
}

impl From<serde_json::Error> for StoreError {
    fn from(e: serde_json::Error) -> Self {
        StoreError(e.to_string())
    }
}

/// What a work item knows about one of its alert groups.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupInfo {
    pub firing: bool,
    pub firing_set: String,
    pub labels: BTreeMap<String, String>,
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
}

/// A notice waiting for (or in) delivery.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxRow {
    pub id: i64,
    pub destination: String,
    pub notice: Notice,
    /// True when a send started and its outcome was not recorded (a crash).
    pub sending: bool,
    pub attempts: i64,
    pub next_ms: i64,
    pub first_ms: i64,
}

/// The last verdict posted to a destination for a group, and the destination's state.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GroupState {
    pub verdict_key: Option<String>,
    pub state: Option<serde_json::Value>,
}

/// A stored verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredVerdict {
    pub id: i64,
    pub created_ms: i64,
    pub verdict: serde_json::Value,
}

/// One notice to enqueue in [`Store::complete`].
pub struct NewNotice {
    pub destination: String,
    pub notice: Notice,
    /// The verdict key to remember for the group at this destination (`None`: keep).
    pub remember_verdict: Option<String>,
}

struct Batch {
    intakes: Vec<Intake>,
    now_ms: i64,
    due_ms: i64,
    done: oneshot::Sender<Result<usize, String>>,
}

/// Work that was running when the process died runs again; if webhooks for the same job
/// queued a newer diagnosis meanwhile, the two merge (no alert group is lost).
fn recover_running(conn: &Connection) -> Result<(), StoreError> {
    let running: Vec<(i64, String, String)> = {
        let mut stmt = conn.prepare("SELECT id, job_key, groups FROM work WHERE state = 'running'")?;
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect::<Result<_, _>>()?
    };
    for (id, job_key, groups) in running {
        let pending: Option<(i64, String)> = conn
            .query_row("SELECT id, groups FROM work WHERE state = 'pending' AND job_key = ?1", params![job_key], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()?;
        match pending {
            Some((pending_id, newer)) => {
                let mut merged: BTreeMap<String, GroupInfo> = serde_json::from_str(&groups)?;
                merged.extend(serde_json::from_str::<BTreeMap<String, GroupInfo>>(&newer)?);
                conn.execute(
                    "UPDATE work SET groups = ?2 WHERE id = ?1",
                    params![pending_id, serde_json::to_string(&merged)?],
                )?;
                conn.execute("DELETE FROM work WHERE id = ?1", params![id])?;
            }
            None => {
                conn.execute("UPDATE work SET state = 'pending' WHERE id = ?1", params![id])?;
            }
        }
    }
    Ok(())
}

/// The store.
pub struct Store {
    conn: Mutex<Connection>,
    intake: mpsc::Sender<Batch>,
    pending: AtomicUsize,
    cfg: StoreConfig,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS work (
  id INTEGER PRIMARY KEY,
  job_key TEXT NOT NULL,
  job TEXT NOT NULL,
  labels TEXT NOT NULL,
  groups TEXT NOT NULL,
  due_ms INTEGER NOT NULL,
  created_ms INTEGER NOT NULL,
  first_failure_ms INTEGER,
  attempts INTEGER NOT NULL DEFAULT 0,
  state TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS work_one_pending ON work(job_key) WHERE state = 'pending';
CREATE INDEX IF NOT EXISTS work_due ON work(state, due_ms);
CREATE TABLE IF NOT EXISTS outbox (
  id INTEGER PRIMARY KEY,
  destination TEXT NOT NULL,
  idem_key TEXT NOT NULL,
  notice TEXT NOT NULL,
  state TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  next_ms INTEGER NOT NULL,
  first_ms INTEGER NOT NULL,
  last_error TEXT,
  UNIQUE(destination, idem_key)
);
CREATE INDEX IF NOT EXISTS outbox_head ON outbox(destination, state, id);
CREATE TABLE IF NOT EXISTS group_state (
  destination TEXT NOT NULL,
  group_key TEXT NOT NULL,
  verdict_key TEXT,
  state TEXT,
  PRIMARY KEY (destination, group_key)
);
CREATE TABLE IF NOT EXISTS verdicts (
  id INTEGER PRIMARY KEY,
  job TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  json TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS health (id INTEGER PRIMARY KEY CHECK (id = 1), touched_ms INTEGER NOT NULL);
";

fn open_conn(path: &Path, sync: Synchronous) -> Result<Connection, StoreError> {
    let conn = Connection::open(path).map_err(|e| StoreError(format!("cannot open {}: {e}", path.display())))?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", if sync == Synchronous::Full { "FULL" } else { "NORMAL" })?;
    Ok(conn)
}

impl Store {
    /// Opens (creating) the database, recovers from a crash, starts the intake writer.
    pub fn open(cfg: &StoreConfig) -> Result<Store, StoreError> {
        let conn = open_conn(&cfg.path, cfg.synchronous)?;
        conn.execute_batch(SCHEMA)?;
        recover_running(&conn)?;
        let pending: i64 = conn.query_row("SELECT COUNT(*) FROM work WHERE state = 'pending'", [], |r| r.get(0))?;
        let writer = open_conn(&cfg.path, cfg.synchronous)?;
        let (tx, rx) = mpsc::channel::<Batch>(4096);
        std::thread::Builder::new()
            .name("culprit-intake".into())
            .spawn(move || intake_writer(writer, rx))
            .map_err(|e| StoreError(format!("cannot start the intake writer: {e}")))?;
        Ok(Store { conn: Mutex::new(conn), intake: tx, pending: AtomicUsize::new(pending as usize), cfg: cfg.clone() })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Diagnoses waiting or running (approximately; for the queue limit and metrics).
    pub fn queue_depth(&self) -> usize {
        self.pending.load(Ordering::Relaxed)
    }

    /// True when the queue is at its configured limit.
    pub fn queue_full(&self) -> bool {
        self.queue_depth() >= self.cfg.max_queue
    }

    /// Durably records intakes; returns once committed. Coalescing: an intake for a job
    /// with a pending diagnosis merges into it; otherwise a new diagnosis is due at
    /// `now_ms + coalesce_ms`.
    pub async fn enqueue(&self, intakes: Vec<Intake>, now_ms: i64, coalesce_ms: i64) -> Result<usize, StoreError> {
        let (done, wait) = oneshot::channel();
        let n = intakes.len();
        self.intake
            .send(Batch { intakes, now_ms, due_ms: now_ms + coalesce_ms, done })
            .await
            .map_err(|_| StoreError("the intake writer stopped".into()))?;
        let created = wait.await.map_err(|_| StoreError("the intake writer stopped".into()))?.map_err(StoreError)?;
        self.pending.fetch_add(created, Ordering::Relaxed);
        Ok(n)
    }

    /// Claims the earliest due diagnosis.
    pub fn claim_due(&self, now_ms: i64) -> Result<Option<WorkItem>, StoreError> {
        let conn = self.conn();
        let row = conn
            .query_row(
                "UPDATE work SET state = 'running' WHERE id = (
                   SELECT id FROM work WHERE state = 'pending' AND due_ms <= ?1 ORDER BY due_ms, id LIMIT 1)
                 RETURNING id, job_key, job, labels, groups, created_ms, attempts, first_failure_ms",
                params![now_ms],
                |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, String>(4)?,
                        r.get::<_, i64>(5)?,
                        r.get::<_, i64>(6)?,
                        r.get::<_, Option<i64>>(7)?,
                    ))
                },
            )
            .optional()?;
        let Some((id, job_key, job, labels, groups, created_ms, attempts, first_failure_ms)) = row else {
            return Ok(None);
        };
        Ok(Some(WorkItem {
            id,
            job_key,
            job,
            labels: serde_json::from_str(&labels)?,
            groups: serde_json::from_str(&groups)?,
            created_ms,
            attempts,
            first_failure_ms,
        }))
    }

    /// The earliest time a pending diagnosis is due, Unix ms.
    pub fn next_due_ms(&self) -> Result<Option<i64>, StoreError> {
        Ok(self.conn().query_row("SELECT MIN(due_ms) FROM work WHERE state = 'pending'", [], |r| r.get(0))?)
    }

    /// Puts a failed diagnosis back, due again at `due_ms`. If webhooks arrived for the job
    /// meanwhile (a newer pending row), the two merge.
    pub fn retry_later(&self, item: &WorkItem, due_ms: i64, first_failure_ms: i64) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let newer: Option<(i64, String)> = tx
            .query_row(
                "SELECT id, groups FROM work WHERE state = 'pending' AND job_key = ?1",
                params![item.job_key],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        match newer {
            Some((newer_id, groups)) => {
                let mut merged = item.groups.clone();
                let later: BTreeMap<String, GroupInfo> = serde_json::from_str(&groups)?;
                merged.extend(later);
                tx.execute(
                    "UPDATE work SET groups = ?2, attempts = ?3, first_failure_ms = ?4, due_ms = MIN(due_ms, ?5) WHERE id = ?1",
                    params![newer_id, serde_json::to_string(&merged)?, item.attempts + 1, first_failure_ms, due_ms],
                )?;
                tx.execute("DELETE FROM work WHERE id = ?1", params![item.id])?;
                self.pending.fetch_sub(1, Ordering::Relaxed);
            }
            None => {
                tx.execute(
                    "UPDATE work SET state = 'pending', due_ms = ?2, attempts = attempts + 1, first_failure_ms = ?3 WHERE id = ?1",
                    params![item.id, due_ms, first_failure_ms],
                )?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// The last verdict and state a destination holds for a group.
    pub fn group_state(&self, destination: &str, group_key: &str) -> Result<GroupState, StoreError> {
        let row: Option<(Option<String>, Option<String>)> = self
            .conn()
            .query_row(
                "SELECT verdict_key, state FROM group_state WHERE destination = ?1 AND group_key = ?2",
                params![destination, group_key],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        Ok(match row {
            Some((verdict_key, state)) => {
                GroupState { verdict_key, state: state.map(|s| serde_json::from_str(&s)).transpose()? }
            }
            None => GroupState::default(),
        })
    }

    /// Finishes a diagnosis in one transaction: stores the verdict (returning its id),
    /// plans the notices from each (destination, group)'s last verdict as the transaction
    /// sees it, enqueues them (a notice already in the outbox is not added again),
    /// remembers each group's verdict per destination, and marks the work done.
    pub fn complete(
        &self,
        item: &WorkItem,
        verdict: Option<&Verdict>,
        make_notices: impl FnOnce(Option<i64>, &dyn Fn(&str, &str) -> Option<String>) -> Vec<NewNotice>,
        now_ms: i64,
    ) -> Result<(Option<i64>, usize), StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let verdict_id = match verdict {
            Some(v) => {
                tx.execute(
                    "INSERT INTO verdicts (job, created_ms, json) VALUES (?1, ?2, ?3)",
                    params![v.job.name, now_ms, serde_json::to_string(v)?],
                )?;
                Some(tx.last_insert_rowid())
            }
            None => None,
        };
        let last_verdict = |destination: &str, group_key: &str| -> Option<String> {
            tx.query_row(
                "SELECT verdict_key FROM group_state WHERE destination = ?1 AND group_key = ?2",
                params![destination, group_key],
                |r| r.get::<_, Option<String>>(0),
            )
            .optional()
            .ok()
            .flatten()
            .flatten()
        };
        let notices = make_notices(verdict_id, &last_verdict);
        let mut added = 0;
        for n in notices {
            added += tx.execute(
                "INSERT OR IGNORE INTO outbox (destination, idem_key, notice, state, next_ms, first_ms)
                 VALUES (?1, ?2, ?3, 'pending', ?4, ?4)",
                params![n.destination, n.notice.idempotency_key, serde_json::to_string(&n.notice)?, now_ms],
            )?;
            if let Some(key) = n.remember_verdict {
                tx.execute(
                    "INSERT INTO group_state (destination, group_key, verdict_key) VALUES (?1, ?2, ?3)
                     ON CONFLICT(destination, group_key) DO UPDATE SET verdict_key = excluded.verdict_key",
                    params![n.destination, n.notice.group_key, key],
                )?;
            }
        }
        tx.execute("DELETE FROM work WHERE id = ?1", params![item.id])?;
        let keep = self.cfg.verdicts_kept as i64;
        tx.execute("DELETE FROM verdicts WHERE id <= (SELECT MAX(id) FROM verdicts) - ?1", params![keep])?;
        tx.commit()?;
        self.pending.fetch_sub(1, Ordering::Relaxed);
        Ok((verdict_id, added))
    }

    /// Forgets what was posted for a group at a destination (it resolved).
    pub fn forget_group(&self, destination: &str, group_key: &str) -> Result<(), StoreError> {
        self.conn().execute(
            "UPDATE group_state SET verdict_key = NULL WHERE destination = ?1 AND group_key = ?2",
            params![destination, group_key],
        )?;
        Ok(())
    }

    /// The head of a destination's outbox (delivery is in order per destination).
    pub fn outbox_head(&self, destination: &str) -> Result<Option<OutboxRow>, StoreError> {
        let row = self
            .conn()
            .query_row(
                "SELECT id, notice, state, attempts, next_ms, first_ms FROM outbox
                 WHERE destination = ?1 AND state IN ('pending', 'sending') ORDER BY id LIMIT 1",
                params![destination],
                |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, i64>(3)?,
                        r.get::<_, i64>(4)?,
                        r.get::<_, i64>(5)?,
                    ))
                },
            )
            .optional()?;
        let Some((id, notice, state, attempts, next_ms, first_ms)) = row else { return Ok(None) };
        Ok(Some(OutboxRow {
            id,
            destination: destination.to_string(),
            notice: serde_json::from_str(&notice)?,
            sending: state == "sending",
            attempts,
            next_ms,
            first_ms,
        }))
    }

    /// Marks a row as being sent (so a crash mid-send is noticed).
    pub fn mark_sending(&self, id: i64) -> Result<(), StoreError> {
        self.conn()
            .execute("UPDATE outbox SET state = 'sending', attempts = attempts + 1 WHERE id = ?1", params![id])?;
        Ok(())
    }

    /// Records a delivery and the destination's new state for the group.
    pub fn mark_sent(&self, row: &OutboxRow, state: Option<&serde_json::Value>) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        tx.execute("UPDATE outbox SET state = 'sent', last_error = NULL WHERE id = ?1", params![row.id])?;
        if let Some(state) = state {
            tx.execute(
                "INSERT INTO group_state (destination, group_key, state) VALUES (?1, ?2, ?3)
                 ON CONFLICT(destination, group_key) DO UPDATE SET state = excluded.state",
                params![row.destination, row.notice.group_key, serde_json::to_string(state)?],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Schedules another attempt.
    pub fn mark_retry(&self, id: i64, next_ms: i64, error: &str) -> Result<(), StoreError> {
        self.conn().execute(
            "UPDATE outbox SET state = 'pending', next_ms = ?2, last_error = ?3 WHERE id = ?1",
            params![id, next_ms, error],
        )?;
        Ok(())
    }

    /// Gives up on a row.
    pub fn mark_failed(&self, id: i64, error: &str) -> Result<(), StoreError> {
        self.conn().execute("UPDATE outbox SET state = 'failed', last_error = ?2 WHERE id = ?1", params![id, error])?;
        Ok(())
    }

    /// Rows waiting in a destination's outbox.
    pub fn outbox_depth(&self) -> Result<i64, StoreError> {
        Ok(self
            .conn()
            .query_row("SELECT COUNT(*) FROM outbox WHERE state IN ('pending', 'sending')", [], |r| r.get(0))?)
    }

    /// Recent verdicts, newest first.
    pub fn verdicts(&self, limit: usize) -> Result<Vec<StoredVerdict>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare("SELECT id, created_ms, json FROM verdicts ORDER BY id DESC LIMIT ?1")?;
        let rows = stmt
            .query_map(params![limit as i64], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, r.get::<_, String>(2)?))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter()
            .map(|(id, created_ms, json)| Ok(StoredVerdict { id, created_ms, verdict: serde_json::from_str(&json)? }))
            .collect()
    }

    /// One verdict.
    pub fn verdict(&self, id: i64) -> Result<Option<StoredVerdict>, StoreError> {
        let row: Option<(i64, String)> = self
            .conn()
            .query_row("SELECT created_ms, json FROM verdicts WHERE id = ?1", params![id], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()?;
        row.map(|(created_ms, json)| Ok(StoredVerdict { id, created_ms, verdict: serde_json::from_str(&json)? }))
            .transpose()
    }

    /// A write that proves the store is writable (for `/readyz`).
    pub fn touch(&self, now_ms: i64) -> Result<(), StoreError> {
        self.conn().execute(
            "INSERT INTO health (id, touched_ms) VALUES (1, ?1) ON CONFLICT(id) DO UPDATE SET touched_ms = excluded.touched_ms",
            params![now_ms],
        )?;
        Ok(())
    }
}

/// The group-commit loop: takes every batch waiting, commits them in one transaction.
fn intake_writer(mut conn: Connection, mut rx: mpsc::Receiver<Batch>) {
    while let Some(first) = rx.blocking_recv() {
        let mut batches = vec![first];
        while batches.len() < 512 {
            match rx.try_recv() {
                Ok(b) => batches.push(b),
                Err(_) => break,
            }
        }
        let result = (|| -> Result<Vec<usize>, StoreError> {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let mut created = Vec::with_capacity(batches.len());
            for b in &batches {
                let mut n = 0;
                for i in &b.intakes {
                    n += apply_intake(&tx, i, b.now_ms, b.due_ms)?;
                }
                created.push(n);
            }
            tx.commit()?;
            Ok(created)
        })();
        match result {
            Ok(created) => {
                for (b, n) in batches.into_iter().zip(created) {
                    let _ = b.done.send(Ok(n));
                }
            }
            Err(e) => {
                for b in batches {
                    let _ = b.done.send(Err(e.0.clone()));
                }
            }
        }
    }
}

/// Merges an intake into the job's pending diagnosis, or creates one due at `due_ms`.
/// Returns 1 when a new diagnosis was created.
fn apply_intake(tx: &rusqlite::Transaction<'_>, i: &Intake, now_ms: i64, due_ms: i64) -> Result<usize, StoreError> {
    let info = GroupInfo { firing: i.firing, firing_set: i.firing_set.clone(), labels: i.labels.clone() };
    let existing: Option<(i64, String)> = tx
        .query_row("SELECT id, groups FROM work WHERE state = 'pending' AND job_key = ?1", params![i.job_key], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()?;
    match existing {
        Some((id, groups)) => {
            let mut groups: BTreeMap<String, GroupInfo> = serde_json::from_str(&groups)?;
            groups.insert(i.group_key.clone(), info);
            tx.execute(
                "UPDATE work SET groups = ?2, labels = ?3 WHERE id = ?1",
                params![id, serde_json::to_string(&groups)?, serde_json::to_string(&i.labels)?],
            )?;
            Ok(0)
        }
        None => {
            let groups: BTreeMap<String, GroupInfo> = [(i.group_key.clone(), info)].into_iter().collect();
            tx.execute(
                "INSERT INTO work (job_key, job, labels, groups, due_ms, created_ms, state) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending')",
                params![i.job_key, i.job, serde_json::to_string(&i.labels)?, serde_json::to_string(&groups)?, due_ms, now_ms],
            )?;
            Ok(1)
        }
    }
}
