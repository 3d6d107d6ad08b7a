//! The SQLite schema and its migrations, by `PRAGMA user_version`.

use super::*;

/// The schema version this build writes (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = 4;

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
pub(super) const MIGRATE_V0_V1: &str = "
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
pub(super) const MIGRATE_V1_V2: &str = "
ALTER TABLE work ADD COLUMN sender TEXT NOT NULL DEFAULT '';
ALTER TABLE work ADD COLUMN known INTEGER NOT NULL DEFAULT 1;
CREATE INDEX work_unknown ON work(sender) WHERE known = 0;
CREATE TABLE known_jobs (job_key TEXT PRIMARY KEY, verdict_ms INTEGER NOT NULL);
CREATE INDEX known_jobs_age ON known_jobs(verdict_ms);
CREATE TABLE sender_turns (sender TEXT PRIMARY KEY, turn INTEGER NOT NULL);
";

/// From version 2 to 3: priorities. The rows already there get theirs from Rust
/// ([`backfill_priorities`]), as every write does.
pub(super) const MIGRATE_V2_V3: &str = "
ALTER TABLE work ADD COLUMN claim_class INTEGER NOT NULL DEFAULT 0;
ALTER TABLE outbox ADD COLUMN rank INTEGER NOT NULL DEFAULT 0;
DROP INDEX IF EXISTS outbox_queue;
CREATE INDEX outbox_queue ON outbox(destination, priority, rank, id) WHERE state IN ('pending', 'sending');
";

/// Gives the waiting rows their claim class and delivery rank. A row that cannot be
/// decoded keeps 0: it goes to the dead letters at its claim.
pub(super) fn backfill_priorities(tx: &Connection) -> Result<(), StoreError> {
    let work: Vec<(i64, rusqlite::types::Value, i64)> = {
        let mut stmt = tx.prepare("SELECT id, groups, attempts FROM work")?;
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect::<Result<_, _>>()?
    };
    for (id, groups, attempts) in work {
        let rusqlite::types::Value::Text(groups) = groups else { continue };
        if let Ok(groups) = serde_json::from_str::<BTreeMap<String, GroupInfo>>(&groups) {
            tx.execute("UPDATE work SET claim_class = ?2 WHERE id = ?1", params![id, claim_class(&groups, attempts)])?;
        }
    }
    let outbox: Vec<(i64, rusqlite::types::Value)> = {
        let mut stmt = tx.prepare("SELECT id, notice FROM outbox WHERE state IN ('pending', 'sending')")?;
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<Result<_, _>>()?
    };
    for (id, notice) in outbox {
        let rusqlite::types::Value::Text(notice) = notice else { continue };
        if let Ok(notice) = serde_json::from_str::<Notice>(&notice) {
            tx.execute("UPDATE outbox SET rank = ?2 WHERE id = ?1", params![id, rank(&notice)])?;
        }
    }
    Ok(())
}

/// From version 3 to 4: incidents. Each verdict's incident row (what incidents see of it),
/// read back by time.
pub(super) const MIGRATE_V3_V4: &str = "
CREATE TABLE IF NOT EXISTS incident_members (verdict_id INTEGER PRIMARY KEY, created_ms INTEGER NOT NULL, member TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS incident_members_age ON incident_members(created_ms);
";

/// Brings the schema to [`SCHEMA_VERSION`] in one transaction.
pub(super) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
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
    if version < 2 {
        tx.execute_batch(MIGRATE_V1_V2)?;
    }
    if version < 3 {
        tx.execute_batch(MIGRATE_V2_V3)?;
        backfill_priorities(&tx)?;
    }
    tx.execute_batch(MIGRATE_V3_V4)?;
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    tx.commit()?;
    Ok(())
}
