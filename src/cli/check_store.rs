//! The store as `check-config` shows and reaches it: the one `serve` will use (PostgreSQL
//! when `store.url` is set, else the SQLite file), reached without changing it.

use std::time::Duration;

use crate::config::{SecretSource, StoreConfig};

/// How long connecting to PostgreSQL may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The URL with any password in it replaced by `***` (validation refuses one, but the
/// report is printed whatever the problems).
fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_string() };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    match authority.rsplit_once('@') {
        Some((user, host)) if user.contains(':') => {
            let name = user.split(':').next().unwrap_or_default();
            format!("{scheme}://{name}:***@{host}{tail}")
        }
        _ => url.to_string(),
    }
}

fn secret_ref(s: &SecretSource) -> String {
    match s {
        SecretSource::Env(v) => format!("env {v}"),
        SecretSource::File(p) => format!("file {}", p.display()),
    }
}

/// One line: which store, where, how.
pub fn describe(cfg: &StoreConfig) -> String {
    match &cfg.url {
        Some(url) => format!(
            "store: PostgreSQL {} ({}; pool {}, lease {})",
            without_password(url),
            cfg.password.as_ref().map_or("no password".to_string(), |p| format!("password from {}", secret_ref(p))),
            cfg.pool_size,
            cfg.lease
        ),
        None => format!(
            "store: SQLite {} (synchronous {})",
            cfg.path.display(),
            match cfg.synchronous {
                crate::config::Synchronous::Full => "full",
                crate::config::Synchronous::Normal => "normal",
            }
        ),
    }
}

/// Reaches the store `serve` would use, changing nothing: PostgreSQL is connected to and
/// asked who it is; the SQLite file is opened read-only, checked, and its lock tried
/// (a running culprit holding it is said, not failed: checking a new configuration beside the
/// running `serve` is the usual rollout, and the new one starts once the old one stops).
/// `Ok(text)` or why not.
pub async fn probe(cfg: &StoreConfig) -> (String, Result<String, String>) {
    match &cfg.url {
        Some(url) => (format!("store PostgreSQL {}", without_password(url)), postgres(cfg, url).await),
        None => (format!("store SQLite {}", cfg.path.display()), sqlite(cfg)),
    }
}

async fn postgres(cfg: &StoreConfig, url: &str) -> Result<String, String> {
    let mut pg: tokio_postgres::Config = url.parse().map_err(|e| format!("store.url is not a PostgreSQL URL: {e}"))?;
    if let Some(secret) = &cfg.password {
        let password = secret.resolve().map_err(|e| format!("store.password: {e}"))?;
        pg.password(secrecy::ExposeSecret::expose_secret(&password).as_bytes());
    }
    pg.connect_timeout(CONNECT_TIMEOUT);
    let connect = pg.connect(tokio_postgres::NoTls);
    let (client, connection) = tokio::time::timeout(CONNECT_TIMEOUT, connect)
        .await
        .map_err(|_| format!("PostgreSQL did not answer within {} s", CONNECT_TIMEOUT.as_secs()))?
        .map_err(|e| format!("PostgreSQL refused or failed: {}", pg_error(&e)))?;
    let task = tokio::spawn(connection);
    let row = client
        .query_one("SELECT current_user::text, current_database()::text, current_setting('server_version')", &[])
        .await
        .map_err(|e| format!("PostgreSQL answered, but not a query: {}", pg_error(&e)));
    drop(client);
    task.abort();
    let row = row?;
    let (user, db, version): (String, String, String) = (row.get(0), row.get(1), row.get(2));
    Ok(format!("connected as {user} to database {db} (PostgreSQL {version})"))
}

/// What PostgreSQL said (`FATAL: password authentication failed for user "culprit"`), or
/// why it could not be asked: the error's own text stops at "db error".
fn pg_error(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.severity(), db.message()),
        None => match std::error::Error::source(e) {
            Some(cause) => format!("{e}: {cause}"),
            None => e.to_string(),
        },
    }
}

fn sqlite(cfg: &StoreConfig) -> Result<String, String> {
    let path = &cfg.path;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    if !path.exists() {
        let meta =
            std::fs::metadata(dir).map_err(|e| format!("the directory {} cannot be read: {e}", dir.display()))?;
        if !meta.is_dir() {
            return Err(format!("{} is not a directory", dir.display()));
        }
        if meta.permissions().readonly() {
            return Err(format!("the directory {} is read-only: serve cannot create the store there", dir.display()));
        }
        return Ok(format!("does not exist yet: serve creates it (0600) in {}", dir.display()));
    }
    let lock_path = std::path::PathBuf::from(format!("{}.lock", path.display()));
    let mut in_use = String::new();
    if lock_path.exists() {
        // Opened without create or truncate: trying the lock changes nothing.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&lock_path)
            .map_err(|e| format!("cannot open {}: {e}", lock_path.display()))?;
        match file.try_lock() {
            Ok(()) => {
                let _ = file.unlock();
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                let holder = std::fs::read_to_string(&lock_path).unwrap_or_default();
                in_use = format!(
                    "; in use by culprit (process {}): another serve on it starts once that one stops (one process per SQLite database)",
                    holder.trim()
                );
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(format!("cannot lock {}: {e}", lock_path.display())),
        }
    }
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = rusqlite::Connection::open_with_flags(path, flags).map_err(|e| format!("cannot open it: {e}"))?;
    let check: String = conn
        .query_row("PRAGMA quick_check(1)", [], |r| r.get(0))
        .map_err(|e| format!("cannot read it: {e} (move it aside or restore it)"))?;
    if check != "ok" {
        return Err(format!("it is damaged ({check}): move it aside or restore it"));
    }
    let waiting: Option<i64> = conn.query_row("SELECT count(*) FROM work", [], |r| r.get(0)).ok();
    Ok(match waiting {
        Some(n) => format!("opens, intact, {n} diagnoses queued or running{in_use}"),
        None => format!("opens, intact, no culprit tables yet (serve creates them){in_use}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_postgres_url_is_shown_without_its_password() {
        assert_eq!(
            without_password("postgres://culprit:hunter2@db:5432/c?x=1"),
            "postgres://culprit:***@db:5432/c?x=1"
        );
        assert_eq!(without_password("postgres://culprit@db:5432/c"), "postgres://culprit@db:5432/c");
    }
}
