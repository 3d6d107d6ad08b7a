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
//!   `work.known`, `known_jobs` (jobs given a verdict) and `sender_turns` (round robin);
//!   3 adds priorities: `work.claim_class` ([`super::claim_class`]) and `outbox.rank`
//!   ([`super::rank`]), filled in for the rows already there.
//! * After a crash, work that was running is pending again (merged into a newer pending
//!   row of the job, if any); outbox rows caught `sending` are pending and *unsure*.
//! * Before SQLite opens the files, what SQLite would paper over (an empty database where
//!   a store was, a damaged, cut or missing log) is found, kept aside and said
//!   ([`integrity`]). A clean stop ([`SqliteStore::close`]) checkpoints the
//!   log into the database file and closes every connection: `culprit.db` alone holds
//!   everything.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use tokio::sync::{mpsc, oneshot};

mod backend;
mod dead_letters;
mod intake;
pub mod integrity;
mod notices;
mod schema;
mod upkeep;
mod verdicts;
mod wal;
mod work;

use dead_letters::*;
use intake::*;
use schema::*;
use work::*;

use self::integrity::{self as sqlite_integrity, Problem};
use super::backend::MAX_DEAD_PER_CLAIM;
use super::{
    Completed, Completion, DeadLetter, Depths, Enqueued, FOLD_WAIT_MAX_MS, Fairness, GroupInfo, LastVerdicts,
    OutboxRow, Prune, Pruned, RecentMember, Recovered, StoreError, StoreErrorKind, StoredVerdict, UnknownWaiting,
    WorkItem, claim_class, is_deep, newest_first, priority, rank, report_dead,
};
use crate::config::{StoreConfig, Synchronous};
use crate::model::notice::{Notice, NoticeKind};
use crate::model::verdict::JobRef;
use crate::service::intake::Intake;
use crate::service::metrics::Metrics;

/// How long a connection waits for another's lock before failing with `busy`.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

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
    /// Claims made under a deep queue: every other one takes the newest
    /// ([`super::newest_first`]).
    deep_claims: std::sync::atomic::AtomicI64,
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
            deep_claims: Default::default(),
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
