//! The store on embedded SQLite (WAL), for one replica.
//!
//! * One process per database: `serve` holds an exclusive lock on `<path>.lock` (flock)
//!   for as long as it runs; a second one refuses to start and names the holder. (A
//!   separate lock file, not the database: SQLite's own POSIX locks on the database must
//!   stay independent of ours.)
//! * The database, its WAL and shared-memory files and the lock file are created 0600
//!   (SQLite gives the WAL and SHM files the database's mode); an older file is narrowed
//!   to 0600 at open.
//! * Webhook intake goes through one writer thread that commits many webhooks per
//!   transaction (group commit), each webhook all or nothing, and answers them once the
//!   commit returned: with `synchronous=FULL`, one sync of the WAL per batch that wrote.
//!   A webhook that changes nothing (Alertmanager's repeated notifications of a group, its
//!   retries) writes nothing. Everything else runs on a second connection, each operation
//!   one `BEGIN IMMEDIATE` transaction whose `COMMIT` is checked.
//! * Schema versions are `PRAGMA user_version`, migrated forward at open in one
//!   transaction: 0 is culprit 0.1.0's schema (or none), 1 adds the per-group outbox
//!   columns, `dead_letter` and `group_state.updated_ms`; 2 adds fairness: `work.sender`,
//!   `work.known`, `known_jobs` (jobs given a verdict) and `sender_turns` (round robin).
//! * After a crash, work that was running is pending again (merged into a newer pending
//!   row of the job, if any); outbox rows caught `sending` are pending and *unsure*.
//! * Before SQLite opens the files, what SQLite would paper over (an empty database where
//!   a store was, a damaged, cut or missing log) is found, kept aside and said
//!   ([`super::sqlite_integrity`]). A clean stop ([`SqliteStore::close`]) checkpoints the
//!   log into the database file and closes every connection: `culprit.db` alone holds
//!   everything.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use tokio::sync::{mpsc, oneshot};

use super::sqlite_integrity::{self, Problem};
use super::{
    Completed, Completion, DeadLetter, Depths, Enqueued, FOLD_WAIT_MAX_MS, Fairness, GroupInfo, LastVerdicts,
    OutboxRow, Prune, Pruned, Recovered, StoreError, StoreErrorKind, StoredVerdict, WorkItem, column_as_json, priority,
    unknown_share,
};
use crate::config::{StoreConfig, Synchronous};
use crate::model::notice::{Notice, NoticeKind};
use crate::model::verdict::JobRef;
use crate::service::intake::Intake;
use crate::service::metrics::Metrics;

/// The schema version this build writes (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = 2;

/// How long a connection waits for another's lock before failing with `busy`.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Most webhooks committed in one intake transaction.
const MAX_BATCH: usize = 512;

/// Most undecodable rows moved aside in one claim (the rest wait for the next claim).
const MAX_DEAD_PER_CLAIM: usize = 64;

/// culprit 0.1.0's schema (version 0): a new database is made with it, then migrated.
pub(super) const SCHEMA_V0: &str = "
CREATE TABLE work (
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
CREATE UNIQUE INDEX work_one_pending ON work(job_key) WHERE state = 'pending';
CREATE INDEX work_due ON work(state, due_ms);
CREATE TABLE outbox (
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
CREATE INDEX outbox_head ON outbox(destination, state, id);
CREATE TABLE group_state (
  destination TEXT NOT NULL,
  group_key TEXT NOT NULL,
  verdict_key TEXT,
  state TEXT,
  PRIMARY KEY (destination, group_key)
);
CREATE TABLE verdicts (
  id INTEGER PRIMARY KEY,
  job TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  json TEXT NOT NULL
);
CREATE TABLE health (id INTEGER PRIMARY KEY CHECK (id = 1), touched_ms INTEGER NOT NULL);
";

/// From culprit 0.1.0's schema (version 0) to version 1.
const MIGRATE_V0_V1: &str = "
DROP INDEX IF EXISTS outbox_head;
ALTER TABLE outbox ADD COLUMN group_key TEXT NOT NULL DEFAULT '';
ALTER TABLE outbox ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE outbox ADD COLUMN unsure INTEGER NOT NULL DEFAULT 0;
ALTER TABLE outbox ADD COLUMN done_ms INTEGER;
UPDATE outbox SET
  group_key = COALESCE(CASE WHEN json_valid(notice) THEN json_extract(notice, '$.group_key') END, ''),
  priority = CASE WHEN json_valid(notice) AND json_extract(notice, '$.kind') = 'could_not_diagnose' THEN 1 ELSE 0 END,
  done_ms = CASE WHEN state IN ('sent', 'failed') THEN first_ms END;
CREATE INDEX outbox_queue ON outbox(destination, priority, id) WHERE state IN ('pending', 'sending');
CREATE INDEX outbox_group ON outbox(destination, group_key, id) WHERE state IN ('pending', 'sending');
CREATE INDEX outbox_done ON outbox(done_ms) WHERE state IN ('sent', 'failed');
ALTER TABLE group_state ADD COLUMN updated_ms INTEGER NOT NULL DEFAULT 0;
CREATE TABLE dead_letter (
  id INTEGER PRIMARY KEY,
  source TEXT NOT NULL,
  source_id INTEGER NOT NULL,
  destination TEXT,
  error TEXT NOT NULL,
  payload TEXT NOT NULL,
  at_ms INTEGER NOT NULL
);
";

/// From version 1 to 2: fairness. Rows from before are taken as known (they keep their
/// place in line).
const MIGRATE_V1_V2: &str = "
ALTER TABLE work ADD COLUMN sender TEXT NOT NULL DEFAULT '';
ALTER TABLE work ADD COLUMN known INTEGER NOT NULL DEFAULT 1;
CREATE INDEX work_unknown ON work(sender) WHERE known = 0;
CREATE TABLE known_jobs (job_key TEXT PRIMARY KEY, verdict_ms INTEGER NOT NULL);
CREATE INDEX known_jobs_age ON known_jobs(verdict_ms);
CREATE TABLE sender_turns (sender TEXT PRIMARY KEY, turn INTEGER NOT NULL);
";

/// The next diagnosis to claim (`?1` now, `?2` before when a due unknown job counts as
/// starved): of a job with none running, known jobs (and starved unknown ones) first, then
/// the sender whose turn came least recently (round robin), then the earliest due.
const CLAIM_ORDER: &str = "SELECT w.id, w.sender FROM work w LEFT JOIN sender_turns t ON t.sender = w.sender
     WHERE w.state = 'pending' AND w.due_ms <= ?1
       AND NOT EXISTS (SELECT 1 FROM work r WHERE r.job_key = w.job_key AND r.state = 'running')
     ORDER BY (w.known = 1 OR w.due_ms <= ?2) DESC, COALESCE(t.turn, 0), w.due_ms, w.id LIMIT 1";

/// A sender's turn is taken: it goes to the back of the round robin.
const TAKE_TURN: &str = "INSERT INTO sender_turns (sender, turn)
     VALUES (?1, (SELECT COALESCE(MAX(turn), 0) + 1 FROM sender_turns))
     ON CONFLICT(sender) DO UPDATE SET turn = excluded.turn";

/// A webhook's intakes on their way to the writer thread.
struct Batch {
    intakes: Vec<Intake>,
    now_ms: i64,
    due_ms: i64,
    max_queue: i64,
    done: oneshot::Sender<Result<Enqueued, StoreError>>,
}

/// The SQLite store.
pub struct SqliteStore {
    conn: Mutex<Connection>,
    /// Taken at [`SqliteStore::close`]: the writer ends once the last webhook in hand is in.
    intake: Mutex<Option<mpsc::Sender<Batch>>>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    path: PathBuf,
    metrics: Arc<Metrics>,
    /// What the start found, not yet acknowledged (older starts' too).
    pub(super) found_at_start: Vec<Problem>,
    fairness: Fairness,
    /// The sidecar said the last `serve` stopped cleanly.
    pub(super) last_stop_clean: bool,
    /// Held for the life of the store: the single-process lock.
    _lock: File,
}

/// Takes `<path>.lock` exclusively, or says who holds it.
pub(super) fn lock(path: &Path) -> Result<File, StoreError> {
    let lock_path = PathBuf::from(format!("{}.lock", path.display()));
    let mut file = private_file(&lock_path)
        .map_err(|e| StoreError::new(StoreErrorKind::Io, format!("cannot open {}: {e}", lock_path.display())))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let holder = std::fs::read_to_string(&lock_path).unwrap_or_default();
            let holder = holder.trim();
            let holder = if holder.is_empty() { String::new() } else { format!(" (process {holder})") };
            return Err(StoreError::new(
                StoreErrorKind::InUse,
                format!(
                    "another culprit{holder} is using the store {}: one process per SQLite database, or two would deliver every notice; stop it first, or give this one another store.path",
                    path.display()
                ),
            ));
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(StoreError::new(StoreErrorKind::Io, format!("cannot lock {}: {e}", lock_path.display())));
        }
    }
    file.set_len(0).and_then(|_| write!(file, "{}", std::process::id())).and_then(|_| file.flush()).ok();
    Ok(file)
}

/// Opens `path` for writing, creating it 0600, and narrows an existing file to 0600.
pub(super) fn private_file(path: &Path) -> std::io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        options.mode(0o600);
        let file = options.open(path)?;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        Ok(file)
    }
    #[cfg(not(unix))]
    options.open(path)
}

pub(super) fn open_conn(path: &Path, sync: Synchronous) -> Result<Connection, StoreError> {
    let conn = Connection::open(path)
        .map_err(|e| StoreError::new(StoreErrorKind::Io, format!("cannot open {}: {e}", path.display())))?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", if sync == Synchronous::Full { "FULL" } else { "NORMAL" })?;
    Ok(conn)
}

/// Brings the schema to [`SCHEMA_VERSION`] in one transaction.
fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if version > SCHEMA_VERSION {
        return Err(StoreError::new(
            StoreErrorKind::Other,
            format!(
                "the store was written by a newer culprit (schema {version}; this one knows {SCHEMA_VERSION}): upgrade culprit or use another store.path"
            ),
        ));
    }
    if version == SCHEMA_VERSION {
        return Ok(());
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Exclusive)?;
    let has_work: bool =
        tx.query_row("SELECT COUNT(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'work'", [], |r| {
            r.get(0)
        })?;
    if !has_work {
        tx.execute_batch(SCHEMA_V0)?;
    }
    if version < 1 {
        tx.execute_batch(MIGRATE_V0_V1)?;
    }
    tx.execute_batch(MIGRATE_V1_V2)?;
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    tx.commit()?;
    Ok(())
}

/// A database SQLite cannot use at all ("file is not a database"): the error names the
/// file and the way out.
fn unusable(path: &Path, e: StoreError) -> StoreError {
    if e.kind != StoreErrorKind::Corrupt {
        return e;
    }
    let p = path.display();
    StoreError::new(
        StoreErrorKind::Corrupt,
        format!(
            "{p}: {}: the file is damaged or is not a culprit store. Stop culprit, move {p} and its -wal and -shm files aside (keep them for recovery), then start again: a new, empty store is created; or put back a backup made with `culprit store backup`",
            e.message
        ),
    )
}

/// Makes the files next to the database 0600 too (an older culprit left them 0644).
fn narrow_permissions(path: &Path) {
    #[cfg(unix)]
    for suffix in ["", "-wal", "-shm"] {
        use std::os::unix::fs::PermissionsExt;
        let p = PathBuf::from(format!("{}{suffix}", path.display()));
        if p.exists() {
            let _ = std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600));
        }
    }
}

/// Work that was running when the process died runs again; if webhooks for the same job
/// queued a newer diagnosis meanwhile, the two merge (no alert group is lost). Deliveries
/// that were being sent are pending and unsure.
fn recover(conn: &mut Connection, now_ms: i64) -> Result<Recovered, StoreError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let running: Vec<i64> = {
        let mut stmt = tx.prepare("SELECT id FROM work WHERE state = 'running'")?;
        stmt.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?
    };
    let mut dead = Vec::new();
    for id in &running {
        match read_work(&tx, *id)? {
            Ok(item) => requeue(&tx, &item, None, &mut dead, now_ms)?,
            Err(why) => dead.push(dead_letter_work(&tx, *id, &why, now_ms)?),
        }
    }
    let deliveries = tx.execute("UPDATE outbox SET state = 'pending', unsure = 1 WHERE state = 'sending'", [])?;
    tx.commit()?;
    Ok(Recovered { work: running.len(), deliveries })
}

impl SqliteStore {
    /// Locks, creates 0600, migrates, recovers, starts the intake writer.
    pub fn open(cfg: &StoreConfig, metrics: Arc<Metrics>) -> Result<(SqliteStore, Recovered), StoreError> {
        let path = cfg.path.clone();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
            && !dir.is_dir()
        {
            return Err(StoreError::new(
                StoreErrorKind::Io,
                format!("cannot open {}: the directory {} does not exist", path.display(), dir.display()),
            ));
        }
        let lock = lock(&path)?;
        let now_ms = jiff::Timestamp::now().as_millisecond();
        let inspection = sqlite_integrity::inspect(&path, now_ms)?;
        let last_stop_clean = inspection.last_stop_clean();
        private_file(&path)
            .map_err(|e| StoreError::new(StoreErrorKind::Io, format!("cannot create {}: {e}", path.display())))?;
        let mut conn = open_conn(&path, cfg.synchronous)
            .and_then(|mut c| migrate(&mut c).map(|_| c))
            .map_err(|e| unusable(&path, e))?;
        let found_at_start = match sqlite_integrity::settle(&conn, &path, inspection, now_ms) {
            Ok(found) => found,
            // A damaged file still opens (below); `/readyz` says it is damaged.
            Err(e) if e.kind == StoreErrorKind::Corrupt => {
                tracing::error!(error = %e, "cannot check the store's identity: the store is damaged");
                Vec::new()
            }
            Err(e) => return Err(e),
        };
        narrow_permissions(&path);
        let recovered = match recover(&mut conn, jiff::Timestamp::now().as_millisecond()) {
            Ok(r) => r,
            // A damaged file still opens: `/readyz` says so (quick_check) and what can be
            // read is served.
            Err(e) if e.kind == StoreErrorKind::Corrupt => {
                tracing::error!(error = %e, "cannot recover work in flight: the store is damaged");
                Recovered::default()
            }
            Err(e) => return Err(e),
        };
        // The writer commits with SQLite's own sync: with synchronous=FULL each commit that
        // wrote syncs the WAL before the webhooks it holds are answered.
        let writer = open_conn(&path, cfg.synchronous)?;
        let (tx, rx) = mpsc::channel::<Batch>(4096);
        let fairness = Fairness::of(cfg);
        let writer = std::thread::Builder::new()
            .name("culprit-intake".into())
            .spawn({
                let metrics = metrics.clone();
                move || intake_writer(writer, rx, &metrics, fairness)
            })
            .map_err(|e| StoreError::new(StoreErrorKind::Other, format!("cannot start the intake writer: {e}")))?;
        // After recovery no diagnosis runs: the index cannot meet two of one job left
        // running by culprit 0.1.0.
        if let Err(e) = conn.execute_batch(
            "CREATE UNIQUE INDEX IF NOT EXISTS work_one_running ON work(job_key) WHERE state = 'running'",
        ) {
            tracing::error!(error = %e, "cannot create the index of running work");
        }
        let store = SqliteStore {
            conn: Mutex::new(conn),
            intake: Mutex::new(Some(tx)),
            writer: Mutex::new(Some(writer)),
            path,
            metrics,
            found_at_start,
            fairness,
            last_stop_clean,
            _lock: lock,
        };
        Ok((store, recovered))
    }

    /// The clean stop, after the last write: the intake writer ends (webhooks in hand are
    /// committed first), the log is checkpointed into the database file and emptied, the
    /// sidecar says the stop was clean, and both connections close, so SQLite removes
    /// `-wal` and `-shm`. Operations after it fail.
    pub fn close(&self) -> Result<(), StoreError> {
        drop(self.intake.lock().unwrap_or_else(|p| p.into_inner()).take());
        if let Some(writer) = self.writer.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = writer.join();
        }
        let mut conn = self.conn();
        let result = sqlite_integrity::checkpoint_and_mark_clean(&conn, &self.path);
        // An in-memory connection takes the place of the file's, which closes.
        let spare = Connection::open_in_memory()?;
        if let Err((_, e)) = std::mem::replace(&mut *conn, spare).close() {
            tracing::error!(error = %e, path = %self.path.display(), "cannot close the store");
        }
        result
    }

    /// Problems found at starts and not yet acknowledged (`culprit store acknowledge`).
    pub fn problems(&self) -> Result<Vec<Problem>, StoreError> {
        sqlite_integrity::unacknowledged(&self.conn())
    }

    pub(super) fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `PRAGMA quick_check`: page-level damage, as an error of kind `Corrupt`.
    pub fn quick_check(&self) -> Result<(), StoreError> {
        let conn = self.conn();
        let result: Result<String, rusqlite::Error> = conn.query_row("PRAGMA quick_check(1)", [], |r| r.get(0));
        match result {
            Ok(ok) if ok == "ok" => Ok(()),
            Ok(problem) => Err(StoreError::new(
                StoreErrorKind::Corrupt,
                format!("database disk image is malformed ({}: {problem})", self.path.display()),
            )),
            Err(e) => Err(e.into()),
        }
    }

    fn report_dead(&self, dead: Vec<DeadLetter>) {
        report_dead(&self.metrics, dead);
    }

    /// See [`super::Store::enqueue`].
    pub async fn enqueue(
        &self,
        intakes: Vec<Intake>,
        now_ms: i64,
        due_ms: i64,
        max_queue: usize,
    ) -> Result<Enqueued, StoreError> {
        let (done, wait) = oneshot::channel();
        let stopped = || StoreError::new(StoreErrorKind::Other, "the intake writer stopped");
        let max_queue = i64::try_from(max_queue).unwrap_or(i64::MAX);
        let intake = self.intake.lock().unwrap_or_else(|p| p.into_inner()).clone().ok_or_else(stopped)?;
        intake.send(Batch { intakes, now_ms, due_ms, max_queue, done }).await.map_err(|_| stopped())?;
        wait.await.map_err(|_| stopped())?
    }

    /// See [`super::Store::claim_work`].
    pub fn claim_work(&self, now_ms: i64) -> Result<Option<WorkItem>, StoreError> {
        const ANY_DUE: &str = "SELECT w.id FROM work w WHERE w.state = 'pending' AND w.due_ms <= ?1
               AND NOT EXISTS (SELECT 1 FROM work r WHERE r.job_key = w.job_key AND r.state = 'running')
             LIMIT 1";
        let mut conn = self.conn();
        // Look before taking the write lock: most wakes find nothing due, and the lock
        // would stall the intake writer.
        if conn.prepare_cached(ANY_DUE)?.query_row(params![now_ms], |r| r.get::<_, i64>(0)).optional()?.is_none() {
            return Ok(None);
        }
        let starved_before = now_ms.saturating_sub(self.fairness.unknown_max_wait_ms);
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut dead = Vec::new();
        let item = loop {
            let candidate: Option<(i64, String)> = tx
                .prepare_cached(CLAIM_ORDER)?
                .query_row(params![now_ms, starved_before], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            let Some((id, sender)) = candidate else { break None };
            match read_work(&tx, id)? {
                Ok(item) => {
                    tx.prepare_cached("UPDATE work SET state = 'running' WHERE id = ?1")?.execute(params![id])?;
                    tx.prepare_cached(TAKE_TURN)?.execute(params![sender])?;
                    break Some(item);
                }
                Err(why) if dead.len() < MAX_DEAD_PER_CLAIM => dead.push(dead_letter_work(&tx, id, &why, now_ms)?),
                Err(_) => break None,
            }
        };
        tx.commit()?;
        drop(conn);
        self.report_dead(dead);
        Ok(item)
    }

    /// See [`super::Store::next_work_ms`].
    pub fn next_work_ms(&self) -> Result<Option<i64>, StoreError> {
        Ok(self
            .conn()
            .prepare_cached(
                "SELECT MIN(w.due_ms) FROM work w WHERE w.state = 'pending'
               AND NOT EXISTS (SELECT 1 FROM work r WHERE r.job_key = w.job_key AND r.state = 'running')",
            )?
            .query_row([], |r| r.get(0))?)
    }

    /// See [`super::Store::retry_work`].
    pub fn retry_work(&self, item: &WorkItem, due_ms: i64, first_failure_ms: i64) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut dead = Vec::new();
        let now_ms = jiff::Timestamp::now().as_millisecond();
        requeue(&tx, item, Some((due_ms, first_failure_ms)), &mut dead, now_ms)?;
        tx.commit()?;
        drop(conn);
        self.report_dead(dead);
        Ok(())
    }

    /// See [`super::Store::complete_rediagnosing`].
    pub fn complete(
        &self,
        item: &WorkItem,
        completion: Completion,
        rediagnose_at_ms: Option<i64>,
    ) -> Result<Completed, StoreError> {
        let now_ms = completion.now_ms;
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let verdict_id = match &completion.verdict {
            Some((job, json)) => {
                tx.prepare_cached("INSERT INTO verdicts (job, created_ms, json) VALUES (?1, ?2, ?3)")?
                    .execute(params![job, now_ms, json])?;
                let id = tx.last_insert_rowid();
                // The job is known from now on: its next diagnoses go first.
                tx.prepare_cached(
                    "INSERT INTO known_jobs (job_key, verdict_ms) VALUES (?1, ?2)
                     ON CONFLICT(job_key) DO UPDATE SET verdict_ms = MAX(known_jobs.verdict_ms, excluded.verdict_ms)",
                )?
                .execute(params![item.job_key, now_ms])?;
                tx.prepare_cached("UPDATE work SET known = 1 WHERE job_key = ?1 AND known = 0")?
                    .execute(params![item.job_key])?;
                Some(id)
            }
            None => None,
        };
        let last = last_verdicts(&tx, item.groups.keys())?;
        let notices = (completion.plan)(verdict_id, &last);
        let mut added = 0;
        for n in notices {
            added += tx
                .prepare_cached(
                    "INSERT OR IGNORE INTO outbox (destination, group_key, idem_key, priority, notice, state, next_ms, first_ms)
                     VALUES (?1, ?2, ?3, ?4, ?5, 'pending', ?6, ?6)",
                )?
                .execute(params![
                    n.destination,
                    n.notice.group_key,
                    n.notice.idempotency_key,
                    priority(n.notice.kind),
                    serde_json::to_string(&n.notice)?,
                    now_ms
                ])?;
            if let Some(key) = n.remember_verdict {
                tx.prepare_cached(
                    "INSERT INTO group_state (destination, group_key, verdict_key, updated_ms) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT(destination, group_key) DO UPDATE SET verdict_key = excluded.verdict_key, updated_ms = excluded.updated_ms",
                )?
                .execute(params![n.destination, n.notice.group_key, key, now_ms])?;
            }
        }
        for group in item.groups.keys() {
            tx.prepare_cached("UPDATE group_state SET updated_ms = ?2 WHERE group_key = ?1")?
                .execute(params![group, now_ms])?;
        }
        match rediagnose_at_ms {
            Some(due_ms) => rediagnose(&tx, item, due_ms, now_ms)?,
            None => {
                tx.prepare_cached("DELETE FROM work WHERE id = ?1")?.execute(params![item.id])?;
            }
        }
        tx.commit()?;
        Ok(Completed { verdict_id, notices: added })
    }

    /// See [`super::Store::claim_delivery`].
    pub fn claim_delivery(
        &self,
        destination: &str,
        now_ms: i64,
        window_ms: i64,
    ) -> Result<Option<OutboxRow>, StoreError> {
        // "Could not diagnose" waits (up to ?3 ms) while any diagnosis is queued or running
        // (its group's, or a burst's draining): their failures fold in.
        // It also waits while one is being sent to the destination or was sent within the
        // last ?4 ms (folded rows are not sent: their last_error says so); a verdict or a
        // resolution does not wait behind a waiting one of its group.
        const CANDIDATE: &str = "SELECT o.id FROM outbox o
             WHERE o.destination = ?1 AND o.state = 'pending' AND o.next_ms <= ?2
               AND NOT EXISTS (SELECT 1 FROM outbox e WHERE e.destination = o.destination
                 AND e.group_key = o.group_key AND e.state IN ('pending', 'sending') AND e.id < o.id
                 AND (o.priority = 1 OR e.priority = 0 OR e.state = 'sending'))
               AND (o.priority = 0 OR ((o.first_ms <= ?2 - ?3
                   OR NOT EXISTS (SELECT 1 FROM work WHERE state IN ('pending', 'running')))
                 AND NOT EXISTS (SELECT 1 FROM outbox s WHERE s.destination = o.destination AND s.priority = 1
                   AND (s.state = 'sending' OR (s.state = 'sent' AND s.last_error IS NULL AND s.done_ms > ?2 - ?4)))))
             ORDER BY o.priority, o.id LIMIT 1";
        let mut conn = self.conn();
        // Look before taking the write lock (see `claim_work`).
        let due = conn
            .prepare_cached(CANDIDATE)?
            .query_row(params![destination, now_ms, FOLD_WAIT_MAX_MS, window_ms], |r| r.get::<_, i64>(0));
        if due.optional()?.is_none() {
            return Ok(None);
        }
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut dead = Vec::new();
        let row = loop {
            let candidate: Option<i64> = tx
                .prepare_cached(CANDIDATE)?
                .query_row(params![destination, now_ms, FOLD_WAIT_MAX_MS, window_ms], |r| r.get(0))
                .optional()?;
            let Some(id) = candidate else { break None };
            match read_outbox(&tx, id)? {
                Ok(mut row) => {
                    tx.prepare_cached("UPDATE outbox SET state = 'sending', attempts = attempts + 1 WHERE id = ?1")?
                        .execute(params![id])?;
                    row.attempts += 1;
                    fold_siblings(&tx, &mut row, now_ms)?;
                    row.group_state = group_state(&tx, destination, &row.notice.group_key, &mut dead, now_ms)?;
                    break Some(row);
                }
                Err(why) if dead.len() < MAX_DEAD_PER_CLAIM => dead.push(dead_letter_outbox(&tx, id, &why, now_ms)?),
                Err(_) => break None,
            }
        };
        tx.commit()?;
        drop(conn);
        self.report_dead(dead);
        Ok(row)
    }

    /// See [`super::Store::next_delivery_ms`].
    pub fn next_delivery_ms(&self, destination: &str, window_ms: i64) -> Result<Option<i64>, StoreError> {
        // A "could not diagnose" is due once the window after the last one sent is over.
        Ok(self
            .conn()
            .prepare_cached(
                "SELECT MIN(CASE WHEN o.priority = 0 THEN o.next_ms ELSE MAX(o.next_ms, COALESCE((SELECT MAX(s.done_ms)
                     FROM outbox s WHERE s.destination = o.destination AND s.priority = 1 AND s.state = 'sent'
                       AND s.last_error IS NULL), 0) + ?2) END)
                 FROM outbox o WHERE o.destination = ?1 AND o.state = 'pending'
                   AND NOT EXISTS (SELECT 1 FROM outbox e WHERE e.destination = o.destination
                     AND e.group_key = o.group_key AND e.state IN ('pending', 'sending') AND e.id < o.id
                     AND (o.priority = 1 OR e.priority = 0 OR e.state = 'sending'))
                   AND (o.priority = 0 OR (
                     NOT EXISTS (SELECT 1 FROM work WHERE state IN ('pending', 'running'))
                     AND NOT EXISTS (SELECT 1 FROM outbox s WHERE s.destination = o.destination AND s.priority = 1
                       AND s.state = 'sending')))",
            )?
            .query_row(params![destination, window_ms], |r| r.get(0))?)
    }

    /// See [`super::Store::delivered`].
    pub fn delivered(
        &self,
        id: i64,
        destination: &str,
        group_key: &str,
        state: Option<&serde_json::Value>,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.prepare_cached(
            "UPDATE outbox SET state = 'sent', unsure = 0, last_error = NULL, done_ms = ?2 WHERE id = ?1",
        )?
        .execute(params![id, now_ms])?;
        if let Some(state) = state {
            tx.prepare_cached(
                "INSERT INTO group_state (destination, group_key, state, updated_ms) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(destination, group_key) DO UPDATE SET state = excluded.state, updated_ms = excluded.updated_ms",
            )?
            .execute(params![destination, group_key, serde_json::to_string(state)?, now_ms])?;
        }
        tx.commit()?;
        Ok(())
    }

    /// See [`super::Store::retry_delivery`].
    pub fn retry_delivery(&self, id: i64, next_ms: i64, error: &str, unsure: bool) -> Result<(), StoreError> {
        self.conn()
            .prepare_cached(
                "UPDATE outbox SET state = 'pending', next_ms = ?2, last_error = ?3, unsure = ?4 WHERE id = ?1",
            )?
            .execute(params![id, next_ms, error, unsure])?;
        Ok(())
    }

    /// See [`super::Store::fail_delivery`].
    pub fn fail_delivery(&self, id: i64, error: &str, now_ms: i64) -> Result<(), StoreError> {
        self.conn()
            .prepare_cached("UPDATE outbox SET state = 'failed', last_error = ?2, done_ms = ?3 WHERE id = ?1")?
            .execute(params![id, error, now_ms])?;
        Ok(())
    }

    /// See [`super::Store::verdicts`].
    pub fn verdicts(&self, limit: usize) -> Result<Vec<StoredVerdict>, StoreError> {
        let ids: Vec<i64> = {
            let conn = self.conn();
            let mut stmt = conn.prepare_cached("SELECT id FROM verdicts ORDER BY id DESC LIMIT ?1")?;
            stmt.query_map(params![limit as i64], |r| r.get(0))?.collect::<Result<_, _>>()?
        };
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(v) = self.verdict(id)? {
                out.push(v);
            }
        }
        Ok(out)
    }

    /// See [`super::Store::verdict`]. An undecodable verdict goes to the dead-letter table.
    pub fn verdict(&self, id: i64) -> Result<Option<StoredVerdict>, StoreError> {
        let mut conn = self.conn();
        let decoded = conn
            .prepare_cached("SELECT created_ms, json FROM verdicts WHERE id = ?1")?
            .query_row(params![id], |r| {
                let created_ms = r.get::<_, i64>(0);
                let json = r.get::<_, String>(1);
                Ok(match (created_ms, json) {
                    (Ok(created_ms), Ok(json)) => serde_json::from_str(&json)
                        .map(|verdict| StoredVerdict { id, created_ms, verdict })
                        .map_err(|e| e.to_string()),
                    (Err(e), _) | (_, Err(e)) => Err(e.to_string()),
                })
            })
            .optional()?;
        match decoded {
            None => Ok(None),
            Some(Ok(v)) => Ok(Some(v)),
            Some(Err(why)) => {
                let now_ms = jiff::Timestamp::now().as_millisecond();
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let dead = dead_letter(&tx, "verdicts", id, None, &why, now_ms)?;
                tx.execute("DELETE FROM verdicts WHERE id = ?1", params![id])?;
                tx.commit()?;
                drop(conn);
                self.report_dead(vec![dead]);
                Ok(None)
            }
        }
    }

    /// See [`super::Store::last_verdict_job`].
    pub fn last_verdict_job(&self, job_id: Option<&str>, name: Option<&str>) -> Result<Option<JobRef>, StoreError> {
        use crate::model::graph::sanitize_label_value;
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT json_extract(json, '$.job.name'), json_extract(json, '$.job.id') FROM verdicts \
             WHERE ?1 IS NULL OR json_extract(json, '$.job.id') = ?1 ORDER BY id DESC LIMIT 200",
        )?;
        let rows = stmt
            .query_map(params![job_id], |r| {
                Ok((
                    r.get::<_, Option<String>>(0)?.unwrap_or_default(),
                    r.get::<_, Option<String>>(1)?.unwrap_or_default(),
                ))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        let wanted = name.map(sanitize_label_value);
        Ok(rows
            .into_iter()
            .find(|(n, _)| job_id.is_some() || wanted.as_deref() == Some(sanitize_label_value(n).as_str()))
            .map(|(name, id)| JobRef { name, id }))
    }

    /// See [`super::Store::dead_letters`].
    pub fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT id, source, source_id, destination, error, payload, at_ms FROM dead_letter ORDER BY id DESC LIMIT ?1",
        )?;
        let rows = stmt
            .query_map(params![limit as i64], |r| {
                let payload: String = r.get(5)?;
                Ok(DeadLetter {
                    id: r.get(0)?,
                    source: r.get(1)?,
                    source_id: r.get(2)?,
                    destination: r.get(3)?,
                    error: r.get(4)?,
                    payload: serde_json::from_str(&payload).unwrap_or(serde_json::Value::String(payload)),
                    at_ms: r.get(6)?,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }

    /// See [`super::Store::depths`].
    pub fn depths(&self) -> Result<Depths, StoreError> {
        Ok(self
            .conn()
            .prepare_cached(
                "SELECT (SELECT COUNT(*) FROM work),
                    (SELECT COUNT(*) FROM outbox WHERE state IN ('pending', 'sending')),
                    (SELECT COUNT(*) FROM dead_letter)",
            )?
            .query_row([], |r| Ok(Depths { work: r.get(0)?, outbox: r.get(1)?, dead_letters: r.get(2)? }))?)
    }

    /// See [`super::Store::prune`].
    pub fn prune(&self, p: Prune) -> Result<Pruned, StoreError> {
        let cutoff = p.now_ms - p.older_than_ms;
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut pruned = Pruned {
            outbox: tx
                .execute("DELETE FROM outbox WHERE state IN ('sent', 'failed') AND done_ms < ?1", params![cutoff])?,
            ..Pruned::default()
        };
        pruned.outbox += tx.execute(
            "DELETE FROM outbox WHERE state IN ('sent', 'failed') AND id NOT IN (
               SELECT id FROM outbox WHERE state IN ('sent', 'failed') ORDER BY done_ms DESC, id DESC LIMIT ?1)",
            params![p.keep_rows],
        )?;
        // A group's state goes once nothing was heard of the group for the whole period
        // and nothing of it waits: a later alert for it starts afresh.
        pruned.group_state = tx.execute(
            "DELETE FROM group_state WHERE updated_ms < ?1 AND NOT EXISTS (SELECT 1 FROM outbox o
               WHERE o.destination = group_state.destination AND o.group_key = group_state.group_key
                 AND o.state IN ('pending', 'sending'))",
            params![cutoff],
        )?;
        pruned.verdicts = tx.execute("DELETE FROM verdicts WHERE created_ms < ?1", params![cutoff])?;
        pruned.verdicts += tx.execute(
            "DELETE FROM verdicts WHERE id <= (SELECT MAX(id) FROM verdicts) - ?1",
            params![p.verdicts_kept],
        )?;
        // A job not given a verdict for the whole period is unknown again.
        pruned.known_jobs = tx.execute("DELETE FROM known_jobs WHERE verdict_ms < ?1", params![cutoff])?;
        pruned.known_jobs += tx.execute(
            "DELETE FROM known_jobs WHERE job_key NOT IN (
               SELECT job_key FROM known_jobs ORDER BY verdict_ms DESC LIMIT ?1)",
            params![p.keep_rows],
        )?;
        tx.execute("DELETE FROM sender_turns WHERE sender NOT IN (SELECT sender FROM work)", [])?;
        pruned.dead_letters = tx.execute("DELETE FROM dead_letter WHERE at_ms < ?1", params![cutoff])?;
        pruned.dead_letters += tx.execute(
            "DELETE FROM dead_letter WHERE id <= (SELECT MAX(id) FROM dead_letter) - ?1",
            params![p.keep_rows],
        )?;
        tx.commit()?;
        Ok(pruned)
    }

    /// A write that proves the store is writable (for `/readyz`).
    pub fn touch(&self, now_ms: i64) -> Result<(), StoreError> {
        self.conn()
            .prepare_cached(
                // Always a new value: SQLite skips writing a row rewritten unchanged, and
                // this write must reach the disk to prove it takes writes.
                "INSERT INTO health (id, touched_ms) VALUES (1, ?1)
                 ON CONFLICT(id) DO UPDATE SET touched_ms = MAX(excluded.touched_ms, health.touched_ms + 1)",
            )?
            .execute(params![now_ms])?;
        Ok(())
    }
}

/// Decodes a work row; `Ok(Err(why))` when the row is there but cannot be decoded.
fn read_work(tx: &Connection, id: i64) -> Result<Result<WorkItem, String>, StoreError> {
    let mut stmt = tx.prepare_cached(
        "SELECT job_key, job, labels, groups, created_ms, attempts, first_failure_ms, known FROM work WHERE id = ?1",
    )?;
    Ok(stmt.query_row(params![id], |r| {
        Ok((|| -> Result<WorkItem, String> {
            let text = |i: usize| r.get::<_, String>(i).map_err(|e| e.to_string());
            Ok(WorkItem {
                id,
                job_key: text(0)?,
                job: text(1)?,
                labels: serde_json::from_str(&text(2)?).map_err(|e| format!("labels: {e}"))?,
                groups: serde_json::from_str(&text(3)?).map_err(|e| format!("groups: {e}"))?,
                created_ms: r.get(4).map_err(|e| e.to_string())?,
                attempts: r.get(5).map_err(|e| e.to_string())?,
                first_failure_ms: r.get(6).map_err(|e| e.to_string())?,
                known: r.get(7).map_err(|e| e.to_string())?,
            })
        })())
    })?)
}

/// Decodes an outbox row (without its group state); `Ok(Err(why))` when it cannot be.
fn read_outbox(tx: &Connection, id: i64) -> Result<Result<OutboxRow, String>, StoreError> {
    let mut stmt =
        tx.prepare_cached("SELECT destination, notice, unsure, attempts, first_ms FROM outbox WHERE id = ?1")?;
    Ok(stmt.query_row(params![id], |r| {
        Ok((|| -> Result<OutboxRow, String> {
            let notice: String = r.get(1).map_err(|e| format!("notice: {e}"))?;
            Ok(OutboxRow {
                id,
                destination: r.get(0).map_err(|e| e.to_string())?,
                notice: serde_json::from_str::<Notice>(&notice).map_err(|e| format!("notice: {e}"))?,
                unsure: r.get(2).map_err(|e| e.to_string())?,
                attempts: r.get(3).map_err(|e| e.to_string())?,
                first_ms: r.get(4).map_err(|e| e.to_string())?,
                group_state: None,
                token: 0,
            })
        })())
    })?)
}

/// Folds the destination's other pending "could not diagnose" notices, of any alert
/// group, into a claimed one ([`super::fold_could_not_diagnose`]): the claimed row carries
/// them from now on (its notice is rewritten), and they are done.
fn fold_siblings(tx: &Connection, row: &mut OutboxRow, now_ms: i64) -> Result<(), StoreError> {
    if row.notice.kind != NoticeKind::CouldNotDiagnose {
        return Ok(());
    }
    let mut others = Vec::new();
    let mut ids = Vec::new();
    {
        let mut stmt = tx.prepare_cached(
            "SELECT id, notice FROM outbox WHERE destination = ?1 AND state = 'pending'
               AND priority = 1 AND id <> ?2 ORDER BY id",
        )?;
        let rows = stmt.query_map(params![row.destination, row.id], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, rusqlite::types::Value>(1)?))
        })?;
        for r in rows {
            let (id, notice) = r?;
            // An undecodable row is left for the claim that moves it aside.
            if let rusqlite::types::Value::Text(t) = notice
                && let Ok(n) = serde_json::from_str::<Notice>(&t)
            {
                others.push(n);
                ids.push(id);
            }
        }
    }
    if ids.is_empty() {
        return Ok(());
    }
    super::fold_could_not_diagnose(&mut row.notice, &others);
    tx.prepare_cached("UPDATE outbox SET notice = ?2 WHERE id = ?1")?
        .execute(params![row.id, serde_json::to_string(&row.notice)?])?;
    let why = format!("folded into notice {}", row.id);
    for id in &ids {
        tx.prepare_cached("UPDATE outbox SET state = 'sent', last_error = ?2, done_ms = ?3 WHERE id = ?1")?
            .execute(params![id, why, now_ms])?;
    }
    tracing::info!(destination = %row.destination, group = ?row.notice.group_key, folded = ids.len(),
        "could-not-diagnose notices folded into one");
    Ok(())
}

/// The destination's state for a group; an undecodable one is moved aside (the group
/// starts afresh: a new Slack message instead of a reply).
fn group_state(
    tx: &Connection,
    destination: &str,
    group_key: &str,
    dead: &mut Vec<DeadLetter>,
    now_ms: i64,
) -> Result<Option<serde_json::Value>, StoreError> {
    let raw: Option<rusqlite::types::Value> = tx
        .prepare_cached("SELECT state FROM group_state WHERE destination = ?1 AND group_key = ?2")?
        .query_row(params![destination, group_key], |r| r.get(0))
        .optional()?;
    let why = match raw {
        None | Some(rusqlite::types::Value::Null) => return Ok(None),
        Some(rusqlite::types::Value::Text(t)) => match serde_json::from_str(&t) {
            Ok(v) => return Ok(Some(v)),
            Err(e) => format!("state: {e}"),
        },
        Some(other) => format!("state: a {:?} value where JSON text belongs", other.data_type()),
    };
    let payload = tx.query_row(
        "SELECT destination, group_key, verdict_key, state FROM group_state WHERE destination = ?1 AND group_key = ?2",
        params![destination, group_key],
        |r| row_as_json(r, &["destination", "group_key", "verdict_key", "state"]),
    )?;
    dead.push(insert_dead_letter(tx, "group_state", 0, Some(destination), &why, &payload, now_ms)?);
    tx.execute(
        "UPDATE group_state SET state = NULL WHERE destination = ?1 AND group_key = ?2",
        params![destination, group_key],
    )?;
    Ok(None)
}

/// The last verdict key of every (destination, group) for these groups.
fn last_verdicts<'a>(tx: &Connection, groups: impl Iterator<Item = &'a String>) -> Result<LastVerdicts, StoreError> {
    let mut out = BTreeMap::new();
    let mut stmt = tx.prepare_cached(
        "SELECT destination, verdict_key FROM group_state WHERE group_key = ?1 AND verdict_key IS NOT NULL",
    )?;
    for g in groups {
        let rows = stmt.query_map(params![g], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
        // A key that is not text is as good as none: the verdict is posted again.
        for (destination, key) in rows.flatten() {
            out.insert((destination, g.clone()), key);
        }
    }
    Ok(LastVerdicts(out))
}

/// The follow-up of a weak verdict (see [`super::Store::complete_rediagnosing`]): the
/// finished row is pending again at `due_ms` with its firing groups marked, or those groups
/// join the job's pending diagnosis.
fn rediagnose(tx: &Connection, item: &WorkItem, due_ms: i64, now_ms: i64) -> Result<(), StoreError> {
    let groups: BTreeMap<String, GroupInfo> = item
        .groups
        .iter()
        .filter(|(_, g)| g.firing)
        .map(|(k, g)| (k.clone(), GroupInfo { rediagnosis: true, ..g.clone() }))
        .collect();
    let pending: Option<i64> = tx
        .prepare_cached("SELECT id FROM work WHERE state = 'pending' AND job_key = ?1")?
        .query_row(params![item.job_key], |r| r.get(0))
        .optional()?;
    match pending.map(|id| read_work(tx, id)).transpose()? {
        _ if groups.is_empty() => {}
        Some(Ok(newer)) => {
            let mut merged = groups;
            merged.extend(newer.groups);
            tx.prepare_cached("UPDATE work SET groups = ?2 WHERE id = ?1")?
                .execute(params![newer.id, serde_json::to_string(&merged)?])?;
        }
        // The pending row goes to the dead letters at its claim; no follow-up beside it.
        Some(Err(_)) => {}
        None => {
            tx.prepare_cached(
                "UPDATE work SET state = 'pending', groups = ?2, due_ms = ?3, created_ms = ?4, attempts = 0,
                   first_failure_ms = NULL WHERE id = ?1",
            )?
            .execute(params![item.id, serde_json::to_string(&groups)?, due_ms, now_ms])?;
            return Ok(());
        }
    }
    tx.prepare_cached("DELETE FROM work WHERE id = ?1")?.execute(params![item.id])?;
    Ok(())
}

/// Puts running work back to pending (due at `retry.0`, first failure `retry.1`, one more
/// attempt), or merges it into the job's newer pending row.
fn requeue(
    tx: &Connection,
    item: &WorkItem,
    retry: Option<(i64, i64)>,
    dead: &mut Vec<DeadLetter>,
    now_ms: i64,
) -> Result<(), StoreError> {
    let newer: Option<i64> = tx
        .prepare_cached("SELECT id FROM work WHERE state = 'pending' AND job_key = ?1")?
        .query_row(params![item.job_key], |r| r.get(0))
        .optional()?;
    let attempts = item.attempts + i64::from(retry.is_some());
    let first_failure = retry.map(|r| r.1).or(item.first_failure_ms);
    let newer = match newer.map(|id| read_work(tx, id)).transpose()? {
        Some(Ok(newer)) => Some(newer),
        Some(Err(why)) => {
            let id = newer.expect("read from an id");
            dead.push(dead_letter_work(tx, id, &why, now_ms)?);
            None
        }
        None => None,
    };
    match newer {
        Some(newer) => {
            let mut merged = item.groups.clone();
            merged.extend(newer.groups);
            let due = retry.map_or(i64::MAX, |r| r.0);
            tx.prepare_cached(
                "UPDATE work SET groups = ?2, attempts = ?3, first_failure_ms = ?4, due_ms = MIN(due_ms, ?5) WHERE id = ?1",
            )?
            .execute(params![newer.id, serde_json::to_string(&merged)?, attempts, first_failure, due])?;
            tx.prepare_cached("DELETE FROM work WHERE id = ?1")?.execute(params![item.id])?;
        }
        None => {
            let sql = match retry {
                Some(_) => {
                    "UPDATE work SET state = 'pending', due_ms = ?2, attempts = ?3, first_failure_ms = ?4 WHERE id = ?1"
                }
                None => {
                    "UPDATE work SET state = 'pending', due_ms = MIN(due_ms, ?2), attempts = ?3, first_failure_ms = ?4 WHERE id = ?1"
                }
            };
            let due = retry.map_or(now_ms, |r| r.0);
            tx.prepare_cached(sql)?.execute(params![item.id, due, attempts, first_failure])?;
        }
    }
    Ok(())
}

/// Every column of a row as JSON (`names` in order).
fn row_as_json(r: &rusqlite::Row<'_>, names: &[&str]) -> rusqlite::Result<serde_json::Value> {
    let mut m = serde_json::Map::new();
    for (i, name) in names.iter().enumerate() {
        m.insert(name.to_string(), column_as_json(r.get_ref(i)?));
    }
    Ok(serde_json::Value::Object(m))
}

fn insert_dead_letter(
    tx: &Connection,
    source: &str,
    source_id: i64,
    destination: Option<&str>,
    error: &str,
    payload: &serde_json::Value,
    now_ms: i64,
) -> Result<DeadLetter, StoreError> {
    tx.prepare_cached(
        "INSERT INTO dead_letter (source, source_id, destination, error, payload, at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![source, source_id, destination, error, payload.to_string(), now_ms])?;
    Ok(DeadLetter {
        id: tx.last_insert_rowid(),
        source: source.into(),
        source_id,
        destination: destination.map(str::to_string),
        error: error.into(),
        payload: payload.clone(),
        at_ms: now_ms,
    })
}

/// Moves a row of `table` (all its columns) to the dead-letter table.
fn dead_letter(
    tx: &Connection,
    table: &str,
    id: i64,
    destination: Option<&str>,
    error: &str,
    now_ms: i64,
) -> Result<DeadLetter, StoreError> {
    let payload = {
        let mut stmt = tx.prepare(&format!("SELECT * FROM {table} WHERE id = ?1"))?;
        let names: Vec<String> = stmt.column_names().into_iter().map(str::to_string).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        stmt.query_row(params![id], |r| row_as_json(r, &names))?
    };
    insert_dead_letter(tx, table, id, destination, error, &payload, now_ms)
}

fn dead_letter_work(tx: &Connection, id: i64, error: &str, now_ms: i64) -> Result<DeadLetter, StoreError> {
    let d = dead_letter(tx, "work", id, None, error, now_ms)?;
    tx.prepare_cached("DELETE FROM work WHERE id = ?1")?.execute(params![id])?;
    Ok(d)
}

fn dead_letter_outbox(tx: &Connection, id: i64, error: &str, now_ms: i64) -> Result<DeadLetter, StoreError> {
    let destination: Option<String> =
        tx.query_row("SELECT destination FROM outbox WHERE id = ?1", params![id], |r| r.get(0)).ok();
    let d = dead_letter(tx, "outbox", id, destination.as_deref(), error, now_ms)?;
    tx.prepare_cached("DELETE FROM outbox WHERE id = ?1")?.execute(params![id])?;
    Ok(d)
}

/// Logs and counts dead letters once their transaction committed.
pub(super) fn report_dead(metrics: &Metrics, dead: Vec<DeadLetter>) {
    for d in dead {
        tracing::error!(table = %d.source, row = d.source_id, destination = d.destination.as_deref().unwrap_or(""),
            error = %d.error, dead_letter = d.id, "moved an undecodable row to the dead-letter table");
        metrics.dead_letter(&d.source);
    }
}

/// How long the intake writer keeps looking for the next webhook, yielding its core between
/// looks, before it sleeps. Under load the next one comes within microseconds; going to
/// sleep and being woken by the sender (a futex wake, and an interrupt to another CPU in a
/// VM) cost more than the webhook's own commit. Measured on 2 cores: 3–6 µs of CPU less
/// per webhook at 30k/s; an idle service spends at most this once per batch.
const WRITER_LINGER: std::time::Duration = std::time::Duration::from_micros(50);

/// The next webhook for the writer: looks for [`WRITER_LINGER`], then sleeps until one
/// comes. `None` once the store is dropped.
fn next_webhook(rx: &mut mpsc::Receiver<Batch>) -> Option<Batch> {
    let since = std::time::Instant::now();
    loop {
        match rx.try_recv() {
            Ok(b) => return Some(b),
            Err(mpsc::error::TryRecvError::Disconnected) => return None,
            Err(mpsc::error::TryRecvError::Empty) if since.elapsed() < WRITER_LINGER => std::thread::yield_now(),
            Err(mpsc::error::TryRecvError::Empty) => return rx.blocking_recv(),
        }
    }
}

/// The group-commit loop: takes every batch waiting, commits them in one transaction
/// ([`commit_batches`]), then answers each.
///
/// One thread, one connection: the answers wait for the commit (with synchronous=FULL,
/// its sync of the WAL), and the webhooks that arrive meanwhile make the next batch. (A
/// second thread syncing while the writer went on measured slower on 2 cores: one more
/// hand-off between threads per batch.)
fn intake_writer(conn: Connection, mut rx: mpsc::Receiver<Batch>, metrics: &Metrics, fairness: Fairness) {
    while let Some(first) = next_webhook(&mut rx) {
        let mut batches = vec![first];
        while batches.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(b) => batches.push(b),
                Err(_) => break,
            }
        }
        let mut dead = Vec::new();
        match commit_batches(&conn, &batches, fairness, &mut dead) {
            Ok(results) => {
                metrics.store_intake_commits.inc();
                report_dead(metrics, dead);
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

/// One transaction for many webhooks. The outer error fails them all (the commit failed,
/// or SQLite rolled the transaction back); an inner one fails that webhook alone.
fn commit_batches(
    conn: &Connection,
    batches: &[Batch],
    fairness: Fairness,
    dead: &mut Vec<DeadLetter>,
) -> Result<Vec<Result<Enqueued, StoreError>>, StoreError> {
    let tx = Immediate::begin(conn)?;
    let count_work = |tx: &Connection| -> Result<i64, StoreError> {
        Ok(tx.prepare_cached("SELECT COUNT(*) FROM work")?.query_row([], |r| r.get(0))?)
    };
    let mut depth = count_work(&tx)?;
    let mut unknown = Unknown::new(fairness);
    let mut results = Vec::with_capacity(batches.len());
    for b in batches {
        let mut own_dead = Vec::new();
        let result = apply_webhook(&tx, b, depth, &mut unknown, &mut own_dead);
        // After a disk-full or I/O error SQLite may roll the whole transaction back; what
        // follows would commit statement by statement. Nothing of the batch holds then.
        if tx.is_autocommit() {
            return Err(result.err().unwrap_or_else(|| {
                StoreError::new(StoreErrorKind::Other, "SQLite rolled the intake transaction back")
            }));
        }
        match &result {
            Ok(Enqueued::Stored { depth: d, .. }) => {
                depth = *d;
                dead.append(&mut own_dead);
            }
            Ok(Enqueued::QueueFull { .. }) => {}
            Ok(Enqueued::TooManyUnknown { .. }) => {}
            // Undone by its savepoint, or a single statement that failed whole.
            Err(_) => {
                depth = count_work(&tx)?;
                unknown = Unknown::new(fairness);
            }
        }
        results.push(result);
    }
    tx.commit()?;
    Ok(results)
}

/// `BEGIN IMMEDIATE` … `COMMIT` through cached statements (rusqlite's `Transaction` parses
/// both anew every time); rolled back when dropped uncommitted.
struct Immediate<'c> {
    conn: &'c Connection,
}

impl<'c> Immediate<'c> {
    fn begin(conn: &'c Connection) -> Result<Immediate<'c>, StoreError> {
        conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        Ok(Immediate { conn })
    }

    fn commit(self) -> Result<(), StoreError> {
        self.conn.prepare_cached("COMMIT")?.execute([])?;
        Ok(())
    }
}

impl std::ops::Deref for Immediate<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.conn
    }
}

impl Drop for Immediate<'_> {
    fn drop(&mut self) {
        // After a COMMIT (or SQLite's own rollback) there is no transaction left.
        if !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }
}

/// What one webhook does to one job's pending diagnosis: read once, then every intake of
/// the job in the webhook merged in memory, then at most one write.
struct Edit<'i> {
    intake: &'i Intake,
    /// The pending row to update; `None`: a new diagnosis.
    row: Option<i64>,
    /// An undecodable pending row to move to the dead letters before the new one.
    replaces: Option<(i64, String)>,
    groups: BTreeMap<String, GroupInfo>,
    labels: String,
    /// Whether the row read differs from what the webhook leaves.
    changed: bool,
    due_ms: i64,
    /// Whether the job is known (the row's, the intake's or the store's `known_jobs`).
    known: bool,
}

impl Edit<'_> {
    /// The statements [`write`] runs for it.
    fn statements(&self) -> usize {
        match (self.row, &self.replaces) {
            (Some(_), _) => usize::from(self.changed),
            (None, None) => 1,
            (None, Some(_)) => 3,
        }
    }
}

/// One webhook's intakes, all or nothing: every job's pending row is read and the queue
/// bound checked before anything is written; a webhook whose writes take more than one
/// statement runs them under a savepoint (most take one, or none: a savepoint journals
/// every page it touches).
fn apply_webhook(
    tx: &Connection,
    b: &Batch,
    depth: i64,
    unknown: &mut Unknown,
    dead: &mut Vec<DeadLetter>,
) -> Result<Enqueued, StoreError> {
    let mut edits: Vec<Edit<'_>> = Vec::with_capacity(b.intakes.len());
    for i in &b.intakes {
        let at = match edits.iter().position(|e| e.intake.job_key == i.job_key) {
            Some(at) => at,
            None => {
                edits.push(read_pending(tx, i, b)?);
                edits.len() - 1
            }
        };
        merge(&mut edits[at], i)?;
    }
    let created = edits.iter().filter(|e| e.row.is_none()).count();
    // The bound is about diagnosis work: a new row for a resolved group needs none.
    let diagnoses = edits.iter().filter(|e| e.row.is_none() && e.intake.firing).count();
    if diagnoses > 0 && depth + diagnoses as i64 > b.max_queue {
        return Ok(Enqueued::QueueFull { depth });
    }
    // New unknown diagnoses count against their sender's cap and the unknown share.
    let mut new_unknown: BTreeMap<&str, i64> = BTreeMap::new();
    for e in edits.iter().filter(|e| e.row.is_none() && e.intake.firing && !e.known) {
        *new_unknown.entry(e.intake.sender.as_str()).or_default() += 1;
    }
    if let Some(refused) = unknown.admit(tx, &new_unknown, b.max_queue)? {
        return Ok(refused);
    }
    let savepoint = edits.iter().map(Edit::statements).sum::<usize>() > 1;
    if savepoint {
        tx.prepare_cached("SAVEPOINT intake")?.execute([])?;
    }
    let mut own_dead = Vec::new();
    let written = edits.into_iter().try_for_each(|e| write(tx, e, b, &mut own_dead));
    if savepoint {
        if written.is_err() && !tx.is_autocommit() {
            tx.prepare_cached("ROLLBACK TO intake")?.execute([])?;
        }
        if !tx.is_autocommit() {
            tx.prepare_cached("RELEASE intake")?.execute([])?;
        }
    }
    written?;
    unknown.stored(&new_unknown);
    dead.append(&mut own_dead);
    Ok(Enqueued::Stored { jobs: b.intakes.len(), created, depth: depth + created as i64 })
}

/// Reads the pending diagnosis of an intake's job.
fn read_pending<'i>(tx: &Connection, i: &'i Intake, b: &Batch) -> Result<Edit<'i>, StoreError> {
    let found: Option<(i64, rusqlite::types::Value, String, bool)> = tx
        .prepare_cached("SELECT id, groups, labels, known FROM work WHERE state = 'pending' AND job_key = ?1")?
        .query_row(params![i.job_key], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .optional()?;
    let known = i.known || found.as_ref().is_some_and(|f| f.3) || is_known(tx, &i.job_key)?;
    let new = |replaces| Edit {
        intake: i,
        row: None,
        replaces,
        groups: BTreeMap::new(),
        labels: String::new(),
        changed: true,
        due_ms: b.due_ms,
        known,
    };
    let Some((id, groups, labels, was_known)) = found else { return Ok(new(None)) };
    let decoded = match &groups {
        rusqlite::types::Value::Text(t) => {
            serde_json::from_str::<BTreeMap<String, GroupInfo>>(t).map_err(|e| format!("groups: {e}"))
        }
        other => Err(format!("groups: a {:?} value where JSON text belongs", other.data_type())),
    };
    Ok(match decoded {
        Ok(groups) => {
            // A weak verdict's follow-up waits longer than the coalescing window: a
            // webhook brings it forward (a retry keeps its backoff).
            let follow_up = groups.values().all(|g| g.rediagnosis);
            let due_ms = if follow_up { b.due_ms } else { i64::MAX };
            Edit {
                intake: i,
                row: Some(id),
                replaces: None,
                groups,
                labels,
                changed: known != was_known,
                due_ms,
                known,
            }
        }
        Err(why) => new(Some((id, why))),
    })
}

/// Merges an intake into its job's edit: its group's entry, and its labels.
fn merge(e: &mut Edit<'_>, i: &Intake) -> Result<(), StoreError> {
    let info =
        GroupInfo { firing: i.firing, firing_set: i.firing_set.clone(), labels: i.labels.clone(), rediagnosis: false };
    if e.groups.get(&i.group_key) != Some(&info) {
        e.groups.insert(i.group_key.clone(), info);
        e.changed = true;
    }
    let labels = serde_json::to_string(&i.labels)?;
    if labels != e.labels {
        e.labels = labels;
        e.changed = true;
    }
    Ok(())
}

/// Writes an edit: nothing when it changes nothing.
fn write(tx: &Connection, e: Edit<'_>, b: &Batch, dead: &mut Vec<DeadLetter>) -> Result<(), StoreError> {
    match e.row {
        Some(_) if !e.changed => {}
        Some(id) => {
            tx.prepare_cached(
                "UPDATE work SET groups = ?2, labels = ?3, due_ms = MIN(due_ms, ?4), known = ?5 WHERE id = ?1",
            )?
            .execute(params![id, serde_json::to_string(&e.groups)?, e.labels, e.due_ms, e.known])?;
        }
        None => {
            if let Some((id, why)) = &e.replaces {
                dead.push(dead_letter_work(tx, *id, why, b.now_ms)?);
            }
            tx.prepare_cached(
                "INSERT INTO work (job_key, job, labels, groups, due_ms, created_ms, state, sender, known)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', ?7, ?8)",
            )?
            .execute(params![
                e.intake.job_key,
                e.intake.job,
                e.labels,
                serde_json::to_string(&e.groups)?,
                e.due_ms,
                b.now_ms,
                e.intake.sender,
                e.known
            ])?;
        }
    }
    Ok(())
}

/// Whether the store has given `job_key` a verdict (and has not pruned it since).
fn is_known(tx: &Connection, job_key: &str) -> Result<bool, StoreError> {
    Ok(tx
        .prepare_cached("SELECT 1 FROM known_jobs WHERE job_key = ?1")?
        .query_row(params![job_key], |_| Ok(()))
        .optional()?
        .is_some())
}

/// The diagnoses of unknown jobs waiting, per sender and in all, as one intake
/// transaction sees them: read from the table once, then kept up to date in memory.
struct Unknown {
    fairness: Fairness,
    total: Option<i64>,
    per_sender: BTreeMap<String, i64>,
}

impl Unknown {
    fn new(fairness: Fairness) -> Unknown {
        Unknown { fairness, total: None, per_sender: BTreeMap::new() }
    }

    /// `None` when a webhook's new unknown diagnoses (per sender) fit; else the refusal.
    fn admit(
        &mut self,
        tx: &Connection,
        new: &BTreeMap<&str, i64>,
        max_queue: i64,
    ) -> Result<Option<Enqueued>, StoreError> {
        if new.is_empty() {
            return Ok(None);
        }
        let total = match self.total {
            Some(t) => t,
            None => *self
                .total
                .insert(tx.prepare_cached("SELECT COUNT(*) FROM work WHERE known = 0")?.query_row([], |r| r.get(0))?),
        };
        let share = unknown_share(max_queue);
        let adding: i64 = new.values().sum();
        if total + adding > share {
            return Ok(Some(Enqueued::TooManyUnknown { waiting: total, limit: share }));
        }
        for (sender, n) in new {
            let waiting = match self.per_sender.get(*sender) {
                Some(w) => *w,
                None => {
                    let w: i64 = tx
                        .prepare_cached("SELECT COUNT(*) FROM work WHERE known = 0 AND sender = ?1")?
                        .query_row(params![sender], |r| r.get(0))?;
                    self.per_sender.insert(sender.to_string(), w);
                    w
                }
            };
            if waiting + n > self.fairness.max_unknown_per_sender {
                return Ok(Some(Enqueued::TooManyUnknown { waiting, limit: self.fairness.max_unknown_per_sender }));
            }
        }
        Ok(None)
    }

    /// Counts a stored webhook's new unknown diagnoses.
    fn stored(&mut self, new: &BTreeMap<&str, i64>) {
        for (sender, n) in new {
            *self.total.get_or_insert(0) += n;
            *self.per_sender.entry(sender.to_string()).or_default() += n;
        }
    }
}
