//! What the SQLite store finds about its own files at start, its clean stop, its online
//! backup.
//!
//! SQLite papers over three kinds of loss: an empty or new `culprit.db` where a store was
//! (it makes a new one), a damaged or cut `-wal` (recovery stops at the first bad frame), a
//! missing `-wal` (the database is read without it). None can be seen from inside the
//! database, so the store keeps two things of its own:
//!
//! * a random **store id**, inside the database (`culprit_meta`) and in a sidecar file,
//!   `<path>.state`, which also says whether the last `serve` stopped cleanly (it is
//!   written at start, `running`, and after the checkpoint of a clean stop, `stopped`);
//! * the log is read before SQLite opens it ([`super::wal`]).
//!
//! At start, before SQLite touches the files:
//! * the sidecar names a store, and the database is empty or missing → *lost*;
//! * the database holds another store id than the sidecar → *replaced*;
//! * the last stop was not clean and `-wal` is missing → *WAL missing*;
//! * the log has committed transactions recovery would drop, or was cut → *WAL damaged*.
//!
//! What was found is kept: the files are copied (the WAL, whose valid part SQLite still
//! uses) or moved (the files of a database that is gone) into `<path>.damaged-<UTC time>/`,
//! never deleted. Then the store opens, and serves: losing more time is no help to the
//! alerts that were lost, and a single replica that refused to start would miss every new
//! page too. Each problem is recorded in the database (`store_problems`), logged at ERROR,
//! counted (`culprit_store_integrity_problems_total{kind}`), shown by the gauge
//! `culprit_store_integrity_problems_unacknowledged` and in `/readyz` (200, with a `warnings` list) at
//! every start until an operator runs `culprit store acknowledge`.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, params};

use super::wal as sqlite_wal;
use crate::service::store::{StoreError, StoreErrorKind};

/// The sidecar's first line, for whoever opens it.
const SIDECAR_NOTE: &str = "# culprit serve: the store id of the database beside this file and whether the last serve stopped cleanly; read at start to tell a lost or damaged store from a new one.";

/// The tables of this module, outside the schema versions (`CREATE … IF NOT EXISTS`, so an
/// older culprit's database gains them at open and an older culprit ignores them).
const TABLES: &str = "
CREATE TABLE IF NOT EXISTS culprit_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS store_problems (
  id INTEGER PRIMARY KEY,
  found_ms INTEGER NOT NULL,
  kind TEXT NOT NULL,
  detail TEXT NOT NULL,
  kept TEXT,
  acknowledged_ms INTEGER
);
";

/// What kind of problem a start found (the `kind` label of the metric).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProblemKind {
    Lost,
    Replaced,
    WalMissing,
    WalDamaged,
}

impl ProblemKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProblemKind::Lost => "lost",
            ProblemKind::Replaced => "replaced",
            ProblemKind::WalMissing => "wal_missing",
            ProblemKind::WalDamaged => "wal_damaged",
        }
    }
}

/// A problem found at a start, not yet acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Found by this start (not an older one's, still unacknowledged).
    pub new: bool,
    pub kind: String,
    pub found_ms: i64,
    /// What was found and what it means.
    pub detail: String,
    /// Where the files as found were kept.
    pub kept: Option<String>,
}

impl Problem {
    /// One sentence for `/readyz` and the log: what, where it was kept, and the way out.
    pub fn explain(&self) -> String {
        let at = jiff::Timestamp::from_millisecond(self.found_ms).map(|t| t.to_string()).unwrap_or_default();
        let kept = self.kept.as_deref().map(|k| format!("; the files as found are kept in {k}")).unwrap_or_default();
        format!(
            "store {} (found at start, {at}): {}{kept}. Acknowledged diagnoses may be lost: they come back with Alertmanager's next notification of each group (repeat_interval). Once handled, run `culprit store acknowledge --config FILE`",
            self.kind, self.detail
        )
    }
}

/// The sidecar `<path>.state`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Sidecar {
    store_id: String,
    clean: bool,
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    PathBuf::from(format!("{}{suffix}", path.display()))
}

fn read_sidecar(path: &Path) -> Option<Sidecar> {
    let text = std::fs::read_to_string(sibling(path, ".state")).ok()?;
    let field =
        |name: &str| text.lines().find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix('='))).map(str::trim);
    let store_id = field("store_id").filter(|s| !s.is_empty())?.to_string();
    Some(Sidecar { store_id, clean: field("stopped") == Some("clean") })
}

/// Writes the sidecar whole (a temporary file renamed over it), synced.
fn write_sidecar(path: &Path, s: &Sidecar) -> Result<(), StoreError> {
    use std::io::Write as _;
    let (target, tmp) = (sibling(path, ".state"), sibling(path, ".state.tmp"));
    let io = |e: std::io::Error| StoreError::new(StoreErrorKind::Io, format!("cannot write {}: {e}", target.display()));
    let stopped = if s.clean { "clean" } else { "running" };
    let mut f = super::private_file(&tmp).map_err(io)?;
    f.set_len(0).map_err(io)?;
    write!(f, "{SIDECAR_NOTE}\nstore_id={}\nstopped={stopped}\n", s.store_id).map_err(io)?;
    f.sync_all().map_err(io)?;
    std::fs::rename(&tmp, &target).map_err(io)
}

/// What [`inspect`] found before SQLite opened the files.
#[derive(Debug, Default)]
pub struct Inspection {
    sidecar: Option<Sidecar>,
    /// The database file was missing or empty.
    new_database: bool,
    found: Vec<(ProblemKind, String, Option<PathBuf>)>,
}

impl Inspection {
    /// The sidecar said the last `serve` stopped cleanly.
    pub fn last_stop_clean(&self) -> bool {
        self.sidecar.as_ref().is_some_and(|s| s.clean)
    }
}

fn len(p: &Path) -> Option<u64> {
    std::fs::metadata(p).ok().map(|m| m.len())
}

/// Looks at the files before SQLite opens them (the lock is held), and keeps what is
/// damaged aside.
pub fn inspect(path: &Path, now_ms: i64) -> Result<Inspection, StoreError> {
    let sidecar = read_sidecar(path);
    let (wal, shm) = (sibling(path, "-wal"), sibling(path, "-shm"));
    let new_database = len(path).unwrap_or(0) == 0;
    let mut found = Vec::new();
    if new_database {
        // The files beside a database that is gone belong to it: moved aside, or SQLite
        // would read the old log into the new database.
        let leftovers: Vec<&Path> = [wal.as_path(), shm.as_path()].into_iter().filter(|p| p.exists()).collect();
        if let Some(s) = &sidecar {
            let was = if path.exists() { "is empty (0 bytes)" } else { "is missing" };
            let detail = format!(
                "{} {was}, but {} says store {} was here: the database was lost or replaced by an empty file, and every row it held with it",
                path.display(),
                sibling(path, ".state").display(),
                s.store_id
            );
            let kept = keep(path, &[path], &leftovers, now_ms)?;
            found.push((ProblemKind::Lost, detail, kept));
        } else if !leftovers.is_empty() {
            let kept = keep(path, &[], &leftovers, now_ms)?;
            let detail = format!("{} is empty or missing, but its -wal/-shm files were there", path.display());
            found.push((ProblemKind::Lost, detail, kept));
        }
        return Ok(Inspection { sidecar, new_database, found });
    }
    match std::fs::read(&wal) {
        Ok(bytes) => {
            if let Some(damage) = sqlite_wal::scan(&bytes).damage {
                let kept = keep(path, &[path, &wal, &shm], &[], now_ms)?;
                found.push((ProblemKind::WalDamaged, format!("{}: {damage}", wal.display()), kept));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(s) = sidecar.as_ref().filter(|s| !s.clean) {
                let detail = format!(
                    "the last serve of store {} did not stop cleanly and {} is missing: the transactions it held (everything since the last checkpoint) are lost",
                    s.store_id,
                    wal.display()
                );
                let kept = keep(path, &[path, &shm], &[], now_ms)?;
                found.push((ProblemKind::WalMissing, detail, kept));
            }
        }
        Err(e) => return Err(StoreError::new(StoreErrorKind::Io, format!("cannot read {}: {e}", wal.display()))),
    }
    Ok(Inspection { sidecar, new_database, found })
}

/// Copies `copy` and moves `moved` (those that exist) into `<path>.damaged-<UTC time>/`.
fn keep(path: &Path, copy: &[&Path], moved: &[&Path], now_ms: i64) -> Result<Option<PathBuf>, StoreError> {
    let stamp = jiff::Timestamp::from_millisecond(now_ms)
        .map(|t| t.strftime("%Y%m%dT%H%M%S%.3fZ").to_string())
        .unwrap_or_else(|_| now_ms.to_string());
    let dir = sibling(path, &format!(".damaged-{stamp}"));
    let io = |e: std::io::Error| {
        StoreError::new(StoreErrorKind::Io, format!("cannot keep the files in {}: {e}", dir.display()))
    };
    std::fs::create_dir_all(&dir).map_err(io)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).map_err(io)?;
    }
    let target = |p: &Path| dir.join(p.file_name().unwrap_or_default());
    for p in copy.iter().filter(|p| p.exists()) {
        std::fs::copy(p, target(p)).map_err(io)?;
    }
    for p in moved.iter().filter(|p| p.exists()) {
        std::fs::rename(p, target(p)).map_err(io)?;
    }
    Ok(Some(dir))
}

/// After SQLite opened the database: compares store ids, records what was found, marks
/// the store running. Returns the problems not yet acknowledged (older ones too).
pub fn settle(conn: &Connection, path: &Path, inspection: Inspection, now_ms: i64) -> Result<Vec<Problem>, StoreError> {
    conn.execute_batch(TABLES)?;
    let own: Option<String> =
        conn.query_row("SELECT value FROM culprit_meta WHERE key = 'store_id'", [], |r| r.get(0)).optional()?;
    let mut found = inspection.found;
    let store_id = match own {
        Some(id) => {
            if let Some(s) = inspection.sidecar.as_ref().filter(|s| s.store_id != id) {
                found.push((ProblemKind::Replaced, format!(
                    "{} holds store {id}, but {} says store {} was here: the database was replaced (a restore from another store, or a copy); the rows of store {} are not in it",
                    path.display(), sibling(path, ".state").display(), s.store_id, s.store_id
                ), None));
            }
            id
        }
        None => {
            // A new database, or one of a culprit that kept no id: it gets one. Where the
            // sidecar names a store, a database without an id is not that store (an empty
            // one was said `lost` already; after a lost or damaged log the id may have
            // been in the log, which was said).
            if let Some(s) = inspection.sidecar.as_ref().filter(|_| !inspection.new_database && found.is_empty()) {
                found.push((ProblemKind::Replaced, format!(
                    "{} holds no store id (a database this culprit never opened), but {} says store {} was here: the database was replaced; the rows of store {} are not in it",
                    path.display(), sibling(path, ".state").display(), s.store_id, s.store_id
                ), None));
            }
            let id = uuid::Uuid::new_v4().simple().to_string();
            conn.execute("INSERT INTO culprit_meta (key, value) VALUES ('store_id', ?1)", [&id])?;
            id
        }
    };
    let mut new = Vec::new();
    for (kind, detail, kept) in &found {
        let kept = kept.as_ref().map(|k| k.display().to_string());
        conn.execute(
            "INSERT INTO store_problems (found_ms, kind, detail, kept) VALUES (?1, ?2, ?3, ?4)",
            params![now_ms, kind.as_str(), detail, kept],
        )?;
        new.push(conn.last_insert_rowid());
    }
    if !found.is_empty() {
        // What recovery kept goes into the database file and the log is emptied: the
        // damage (kept aside) is not found again at the next start.
        let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
    }
    write_sidecar(path, &Sidecar { store_id, clean: false })?;
    let mut open = Vec::new();
    for (id, mut p) in unacknowledged_with_ids(conn)? {
        p.new = new.contains(&id);
        open.push(p);
    }
    Ok(open)
}

/// Problems found at starts and not acknowledged, oldest first.
pub fn unacknowledged(conn: &Connection) -> Result<Vec<Problem>, StoreError> {
    Ok(unacknowledged_with_ids(conn)?.into_iter().map(|(_, p)| p).collect())
}

fn unacknowledged_with_ids(conn: &Connection) -> Result<Vec<(i64, Problem)>, StoreError> {
    let exists: bool =
        conn.query_row("SELECT COUNT(*) > 0 FROM sqlite_master WHERE name = 'store_problems'", [], |r| r.get(0))?;
    if !exists {
        return Ok(Vec::new());
    }
    let mut stmt = conn.prepare_cached(
        "SELECT id, kind, found_ms, detail, kept FROM store_problems WHERE acknowledged_ms IS NULL ORDER BY id",
    )?;
    let rows = stmt.query_map([], |r| {
        let p = Problem { new: false, kind: r.get(1)?, found_ms: r.get(2)?, detail: r.get(3)?, kept: r.get(4)? };
        Ok((r.get(0)?, p))
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Marks every problem acknowledged; returns them.
pub fn acknowledge(conn: &Connection, now_ms: i64) -> Result<Vec<Problem>, StoreError> {
    let open = unacknowledged(conn)?;
    if !open.is_empty() {
        conn.execute("UPDATE store_problems SET acknowledged_ms = ?1 WHERE acknowledged_ms IS NULL", [now_ms])?;
    }
    Ok(open)
}

/// The clean stop, after the last write: everything in the log goes into the database
/// file (`wal_checkpoint(TRUNCATE)`, which also empties the log), then the sidecar says
/// the stop was clean. The caller closes the connections, and SQLite removes `-wal` and
/// `-shm`. An incomplete checkpoint (a reader held it past the busy timeout) is an error,
/// and the sidecar keeps saying `running`.
pub fn checkpoint_and_mark_clean(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    let (busy, log, done): (i64, i64, i64) =
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    if busy != 0 || log != done {
        return Err(StoreError::new(
            StoreErrorKind::Busy,
            format!(
                "the checkpoint of {} at stop was incomplete ({done} of {log} pages; another process reads the database): the -wal file still holds the rest, keep it with the database",
                path.display()
            ),
        ));
    }
    let store_id: Option<String> =
        conn.query_row("SELECT value FROM culprit_meta WHERE key = 'store_id'", [], |r| r.get(0)).optional()?;
    if let Some(store_id) = store_id {
        write_sidecar(path, &Sidecar { store_id, clean: true })?;
    }
    Ok(())
}

/// `culprit store acknowledge`: marks the problems found at starts acknowledged and
/// returns them. With `serve` running (it holds the lock, and inspected the files at its
/// start) through a connection of its own; with the store stopped, the files are
/// inspected first, as a start would, so that nothing new is acknowledged unseen (it is
/// returned too), and the store is left checkpointed into the database file.
pub fn acknowledge_at(path: &Path, now_ms: i64) -> Result<Vec<Problem>, StoreError> {
    if !path.is_file() {
        return Err(StoreError::new(StoreErrorKind::Io, format!("there is no store at {}", path.display())));
    }
    let lock = match super::lock(path) {
        Ok(lock) => Some(lock),
        Err(e) if e.kind == StoreErrorKind::InUse => None,
        Err(e) => return Err(e),
    };
    // Inspected before SQLite reads the log.
    let inspection = lock.as_ref().map(|_| inspect(path, now_ms)).transpose()?;
    let conn = Connection::open(path)
        .map_err(|e| StoreError::new(StoreErrorKind::Io, format!("cannot open {}: {e}", path.display())))?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    if let Some(inspection) = inspection {
        settle(&conn, path, inspection, now_ms)?;
    }
    let done = acknowledge(&conn, now_ms)?;
    if lock.is_some() {
        checkpoint_and_mark_clean(&conn, path)?;
    }
    Ok(done)
}

/// What a backup holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupSummary {
    pub bytes: u64,
    /// Diagnoses waiting or running.
    pub work: i64,
    /// Notices waiting or being sent.
    pub outbox: i64,
    pub verdicts: i64,
}

/// A consistent copy of the database at `path` into the new file `out`, while `serve`
/// writes: `VACUUM INTO` reads inside one read transaction (WAL: it never blocks the
/// writer, and sees every transaction committed before it began), and writes one
/// self-contained file. The copy is checked (`quick_check`) and counted.
pub fn backup(path: &Path, out: &Path) -> Result<BackupSummary, StoreError> {
    if !path.is_file() || len(path) == Some(0) {
        return Err(StoreError::new(StoreErrorKind::Io, format!("there is no store at {}", path.display())));
    }
    if out.exists() {
        return Err(StoreError::new(
            StoreErrorKind::Io,
            format!("{} exists: give a new file to back up into", out.display()),
        ));
    }
    // Read-only: a stopped store's log is neither checkpointed nor removed by the backup
    // (the next `serve` still inspects it).
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)
        .map_err(|e| StoreError::new(StoreErrorKind::Io, format!("cannot open {}: {e}", path.display())))?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    let target = out.to_str().ok_or_else(|| StoreError::new(StoreErrorKind::Io, "the backup path is not UTF-8"))?;
    conn.execute("VACUUM INTO ?1", [target]).map_err(|e| {
        let e = StoreError::from(e);
        StoreError::new(e.kind, format!("cannot back {} up into {}: {}", path.display(), out.display(), e.message))
    })?;
    drop(conn);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(out, std::fs::Permissions::from_mode(0o600));
    }
    let copy = Connection::open_with_flags(out, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let check: String = copy.query_row("PRAGMA quick_check(1)", [], |r| r.get(0))?;
    if check != "ok" {
        return Err(StoreError::new(
            StoreErrorKind::Corrupt,
            format!("the backup {} does not check: {check}", out.display()),
        ));
    }
    let count = |sql: &str| -> Result<i64, StoreError> { Ok(copy.query_row(sql, [], |r| r.get(0))?) };
    Ok(BackupSummary {
        bytes: len(out).unwrap_or(0),
        work: count("SELECT COUNT(*) FROM work")?,
        outbox: count("SELECT COUNT(*) FROM outbox WHERE state IN ('pending', 'sending')")?,
        verdicts: count("SELECT COUNT(*) FROM verdicts")?,
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use crate::config::StoreConfig;
    use crate::service::metrics::Metrics;
    use crate::service::store::Store;

    fn open(dir: &Path) -> Store {
        let cfg = StoreConfig { path: dir.join("culprit.db"), ..StoreConfig::default() };
        Store::open(&cfg, Arc::new(Metrics::new())).unwrap()
    }

    #[tokio::test]
    async fn a_fresh_path_and_a_start_after_a_clean_stop_find_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        assert!(store.problems().await.is_empty());
        store.close().await.unwrap();
        let state = std::fs::read_to_string(dir.path().join("culprit.db.state")).unwrap();
        assert!(state.contains("stopped=clean"), "{state}");
        drop(store);
        let store = open(dir.path());
        assert!(store.problems().await.is_empty());
        let state = std::fs::read_to_string(dir.path().join("culprit.db.state")).unwrap();
        assert!(state.contains("stopped=running"), "{state}");
    }

    #[tokio::test]
    async fn another_stores_database_put_in_place_is_said_replaced_and_acknowledged_once() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        for dir in [&a, &b] {
            let store = open(dir.path());
            store.close().await.unwrap();
        }
        std::fs::copy(b.path().join("culprit.db"), a.path().join("culprit.db")).unwrap();
        let store = open(a.path());
        let problems = store.problems().await;
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].starts_with("store replaced "), "{}", problems[0]);
        store.close().await.unwrap();
        drop(store);
        let path = a.path().join("culprit.db");
        let done = super::acknowledge_at(&path, 0).unwrap();
        assert_eq!(done.len(), 1);
        assert!(super::acknowledge_at(&path, 0).unwrap().is_empty(), "once");
        assert!(open(a.path()).problems().await.is_empty());
    }

    #[tokio::test]
    async fn a_store_that_is_closed_refuses_operations() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        store.close().await.unwrap();
        let e = store.depths().await.unwrap_err();
        assert!(e.message.contains("the store is closed"), "{e}");
        assert!(!dir.path().join("culprit.db-wal").exists() && !dir.path().join("culprit.db-shm").exists());
    }
}
