//! The PostgreSQL schema: versioned, forward-only migrations (`culprit_schema`), applied
//! in one transaction under an advisory lock so that replicas starting at once migrate once.

use super::*;

/// Versioned, forward-only migrations: (version, SQL). Never edit one that shipped; add
/// the next.
pub(super) const MIGRATIONS: &[(i32, &str)] = &[
    (
        1,
        "
CREATE TABLE work (
  id BIGSERIAL PRIMARY KEY,
  job_key TEXT NOT NULL,
  job TEXT NOT NULL,
  labels TEXT NOT NULL,
  groups TEXT NOT NULL,
  due_ms BIGINT NOT NULL,
  created_ms BIGINT NOT NULL,
  first_failure_ms BIGINT,
  attempts BIGINT NOT NULL DEFAULT 0,
  state TEXT NOT NULL,
  owner TEXT,
  lease_until_ms BIGINT
);
CREATE UNIQUE INDEX work_one_pending ON work(job_key) WHERE state = 'pending';
CREATE UNIQUE INDEX work_one_running ON work(job_key) WHERE state = 'running';
CREATE INDEX work_due ON work(due_ms, id) WHERE state = 'pending';
CREATE INDEX work_lease ON work(lease_until_ms) WHERE state = 'running';
CREATE TABLE outbox (
  id BIGSERIAL PRIMARY KEY,
  destination TEXT NOT NULL,
  group_key TEXT NOT NULL,
  idem_key TEXT NOT NULL,
  priority BIGINT NOT NULL,
  notice TEXT NOT NULL,
  state TEXT NOT NULL,
  attempts BIGINT NOT NULL DEFAULT 0,
  next_ms BIGINT NOT NULL,
  first_ms BIGINT NOT NULL,
  last_error TEXT,
  unsure BOOLEAN NOT NULL DEFAULT FALSE,
  done_ms BIGINT,
  owner TEXT,
  lease_until_ms BIGINT,
  UNIQUE (destination, idem_key)
);
CREATE INDEX outbox_queue ON outbox(destination, priority, id) WHERE state IN ('pending', 'sending');
CREATE INDEX outbox_group ON outbox(destination, group_key, id) WHERE state IN ('pending', 'sending');
CREATE INDEX outbox_done ON outbox(done_ms) WHERE state IN ('sent', 'failed');
CREATE INDEX outbox_lease ON outbox(lease_until_ms) WHERE state = 'sending';
CREATE TABLE group_state (
  destination TEXT NOT NULL,
  group_key TEXT NOT NULL,
  verdict_key TEXT,
  state TEXT,
  updated_ms BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (destination, group_key)
);
CREATE INDEX group_state_group ON group_state(group_key);
CREATE TABLE verdicts (
  id BIGSERIAL PRIMARY KEY,
  job TEXT NOT NULL,
  created_ms BIGINT NOT NULL,
  json TEXT NOT NULL
);
CREATE TABLE dead_letter (
  id BIGSERIAL PRIMARY KEY,
  source TEXT NOT NULL,
  source_id BIGINT NOT NULL,
  destination TEXT,
  error TEXT NOT NULL,
  payload TEXT NOT NULL,
  at_ms BIGINT NOT NULL
);
CREATE TABLE health (id INT PRIMARY KEY CHECK (id = 1), touched_ms BIGINT NOT NULL);
",
    ),
    // Fairness: who sent each diagnosis, whether its job is known, the jobs given a
    // verdict, and the senders' turns. Rows from before are taken as known.
    (
        2,
        "
ALTER TABLE work ADD COLUMN sender TEXT NOT NULL DEFAULT '';
ALTER TABLE work ADD COLUMN known BOOLEAN NOT NULL DEFAULT TRUE;
CREATE INDEX work_unknown ON work(sender) WHERE NOT known;
CREATE TABLE known_jobs (job_key TEXT PRIMARY KEY, verdict_ms BIGINT NOT NULL);
CREATE INDEX known_jobs_age ON known_jobs(verdict_ms);
CREATE TABLE sender_turns (sender TEXT PRIMARY KEY, turn BIGINT NOT NULL);
CREATE SEQUENCE sender_turn;
",
    ),
    // Fencing: the claim's token, checked before a send and at its record.
    (
        3,
        "
ALTER TABLE outbox ADD COLUMN lease_token BIGINT NOT NULL DEFAULT 0;
",
    ),
    // Priorities: a diagnosis' claim class, a notice's rank, and the turns of claims under
    // a deep queue (shared by the replicas). Rows already there get theirs from Rust
    // ([`backfill_priorities`]).
    (
        4,
        "
ALTER TABLE work ADD COLUMN claim_class BIGINT NOT NULL DEFAULT 0;
ALTER TABLE outbox ADD COLUMN rank BIGINT NOT NULL DEFAULT 0;
DROP INDEX IF EXISTS outbox_queue;
CREATE INDEX outbox_queue ON outbox(destination, priority, rank, id) WHERE state IN ('pending', 'sending');
CREATE SEQUENCE claim_turn;
",
    ),
    // Incidents: each verdict's incident row (what incidents see of it), read back by time.
    (
        5,
        "
CREATE TABLE IF NOT EXISTS incident_members (verdict_id BIGINT PRIMARY KEY, created_ms BIGINT NOT NULL, member TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS incident_members_age ON incident_members(created_ms);
",
    ),
    // Pacing shared by the replicas: the next free slot of each vendor limit's scope
    // (a Slack channel, a PagerDuty routing key), Unix ms by the database's clock.
    (
        6,
        "
CREATE TABLE IF NOT EXISTS pace_slots (scope TEXT PRIMARY KEY, next_ms BIGINT NOT NULL);
",
    ),
];

/// The migration that added `work.claim_class` and `outbox.rank`.
const PRIORITIES: i32 = 4;

/// Gives the waiting rows their claim class and delivery rank, as every write does. A row
/// that cannot be decoded keeps 0: it goes to the dead letters at its claim.
async fn backfill_priorities(tx: &Transaction<'_>) -> Result<(), StoreError> {
    for row in tx.query("SELECT id, groups, attempts FROM work", &[]).await? {
        if let Ok(groups) = serde_json::from_str::<BTreeMap<String, GroupInfo>>(row.get(1)) {
            let class = claim_class(&groups, row.get(2));
            tx.execute("UPDATE work SET claim_class = $2 WHERE id = $1", &[&row.get::<_, i64>(0), &class]).await?;
        }
    }
    for row in tx.query("SELECT id, notice FROM outbox WHERE state IN ('pending', 'sending')", &[]).await? {
        if let Ok(notice) = serde_json::from_str::<Notice>(row.get(1)) {
            tx.execute("UPDATE outbox SET rank = $2 WHERE id = $1", &[&row.get::<_, i64>(0), &rank(&notice)]).await?;
        }
    }
    Ok(())
}

/// The advisory lock key of migrations (`pg_advisory_xact_lock(bigint)`): "culprit" in ASCII.
pub(super) const MIGRATION_LOCK: i64 = 0x63_75_6c_70_72_69_74;

/// Applies the migrations this database lacks, in one transaction under an advisory lock.
pub(super) async fn migrate(pool: &Pool) -> Result<(), StoreError> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).await?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS culprit_schema (version INT PRIMARY KEY, applied_ms BIGINT NOT NULL)")
        .await?;
    let current: i32 = tx.query_one("SELECT COALESCE(MAX(version), 0) FROM culprit_schema", &[]).await?.get(0);
    let latest = MIGRATIONS.last().map_or(0, |m| m.0);
    if current > latest {
        return Err(StoreError::new(
            StoreErrorKind::Other,
            format!(
                "the database was migrated by a newer culprit (schema {current}; this one knows {latest}): upgrade culprit"
            ),
        ));
    }
    let now_ms = jiff::Timestamp::now().as_millisecond();
    for (version, sql) in MIGRATIONS.iter().filter(|m| m.0 > current) {
        tx.batch_execute(sql).await?;
        tx.execute("INSERT INTO culprit_schema (version, applied_ms) VALUES ($1, $2)", &[version, &now_ms]).await?;
        tracing::info!(version, "migrated the PostgreSQL store");
    }
    if current < PRIORITIES {
        backfill_priorities(&tx).await?;
    }
    tx.commit().await?;
    Ok(())
}
