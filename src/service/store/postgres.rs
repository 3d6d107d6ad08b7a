//! The store on PostgreSQL, shared by any number of replicas with no leader.
//!
//! * Work and outbox rows are claimed with `FOR UPDATE SKIP LOCKED` and held with a lease
//!   (`owner`, `lease_until_ms`) that a background task renews every third of
//!   `store.lease`. A replica that dies stops renewing: once its lease expires another
//!   replica takes the row — a diagnosis runs again (merged into the job's pending one, if
//!   any), a send in flight becomes *unsure* (the destination is asked before sending
//!   again). A replica that lost a lease cannot store an outcome for the row any more.
//! * Sends are fenced: each claim of an outbox row increments its `lease_token`; right
//!   before a send the sender checks, in the database, that it still holds the row with
//!   its token and that the lease has at least the send's margin left (renewing it), and
//!   its outcome is stored only under that token ([`PgStore::fence`]). A replica paused, or
//!   cut off from the database, past its lease drops the send instead of sending it after
//!   another replica took it over. A reaped send waits [`REAPED_SEND_GRACE_MS`] before it
//!   is claimed again, so that an owner that did send stores that first (same token).
//! * Times are the database's: every lease, due time and stored time is compared in
//!   PostgreSQL's clock ([`clock`]), so a replica whose clock is off neither takes all the
//!   work nor none of it.
//! * Coalescing holds across replicas: at most one pending diagnosis per job
//!   (`work_one_pending`, an upsert merges groups), at most one running
//!   (`work_one_running`). Completions lock their alert groups
//!   (`pg_advisory_xact_lock`) before reading the last verdicts, so two replicas never
//!   plan the same (group, verdict) twice; `UNIQUE(destination, idem_key)` is the last
//!   guard.
//! * Schema migrations are versioned and forward-only (`culprit_schema`), applied in one
//!   transaction under `pg_advisory_xact_lock`: replicas starting at once migrate once.
//!   They run at the first operation, not at start: a database that is down at start
//!   makes culprit not ready (503 with the reason) until it answers, never a crash loop.
//! * Webhook intake is group-committed by one writer task per replica ([`intake`]).
//! * Connections come from a deadpool pool; a connection broken by a database restart
//!   is dropped and a new one made at the next use.

mod clock;
mod intake;

pub use clock::{LocalClock, WARN_MS as CLOCK_SKEW_WARN_MS};

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime, Transaction};
use tokio_postgres::NoTls;
use tokio_postgres::error::SqlState;

use super::{
    Completed, Completion, DeadLetter, Depths, Enqueued, FOLD_WAIT_MAX_MS, Fairness, GroupInfo, LastVerdicts,
    OutboxRow, Prune, Pruned, StoreError, StoreErrorKind, StoredVerdict, WorkItem, priority,
};
use crate::config::StoreConfig;
use crate::model::notice::{Notice, NoticeKind};
use crate::model::verdict::JobRef;
use crate::service::intake::Intake;
use crate::service::metrics::Metrics;

/// Versioned, forward-only migrations: (version, SQL). Never edit one that shipped; add
/// the next.
const MIGRATIONS: &[(i32, &str)] = &[
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
];

/// The advisory lock key of migrations (`pg_advisory_xact_lock(bigint)`): "culprit" in ASCII.
const MIGRATION_LOCK: i64 = 0x63_75_6c_70_72_69_74;

/// The advisory lock class (first key) of alert groups in completions.
const GROUP_LOCK_CLASS: i32 = 0x6375_6c70;

/// Most undecodable rows moved aside in one claim (the rest wait for the next claim).
const MAX_DEAD_PER_CLAIM: usize = 64;

/// How long a send whose lease expired waits before another replica takes it: a lease that
/// ran out is no proof that its owner died (PostgreSQL down, or a network cut, for longer
/// than the lease): an owner that sent and comes back to the database retries storing
/// its outcome at least every [`crate::service::retry::STORE_RETRY_MAX`] (5 s), and
/// does so under the same token within twice that, so that its send is not made again.
const REAPED_SEND_GRACE_MS: i64 = 2 * crate::service::retry::STORE_RETRY_MAX.as_millis() as i64;

/// How long an operation waits for a pooled connection, and a new connection to open.
const POOL_TIMEOUT: Duration = Duration::from_secs(5);

struct Inner {
    pool: Pool,
    /// This replica, as written in `owner`: claims it holds and renews.
    owner: String,
    lease_ms: i64,
    fairness: Fairness,
    /// The database's clock as this replica sees it.
    clock: clock::DbClock,
    migrated: tokio::sync::OnceCell<()>,
    /// The intake writer, started at the first webhook.
    intake: std::sync::OnceLock<tokio::sync::mpsc::Sender<intake::Batch>>,
    metrics: Arc<Metrics>,
}

/// The PostgreSQL store (cheap to clone: a handle on the pool).
#[derive(Clone)]
pub struct PgStore {
    inner: Arc<Inner>,
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(e: tokio_postgres::Error) -> Self {
        let kind = match e.code() {
            Some(c) if *c == SqlState::DISK_FULL || *c == SqlState::PROGRAM_LIMIT_EXCEEDED => StoreErrorKind::Full,
            Some(c) if *c == SqlState::DATA_CORRUPTED || *c == SqlState::INDEX_CORRUPTED => StoreErrorKind::Corrupt,
            Some(c)
                if *c == SqlState::T_R_DEADLOCK_DETECTED
                    || *c == SqlState::T_R_SERIALIZATION_FAILURE
                    || *c == SqlState::LOCK_NOT_AVAILABLE =>
            {
                StoreErrorKind::Busy
            }
            // Connection exceptions (08), operator intervention such as a shutdown (57),
            // insufficient resources (53), and errors without a code (a closed socket).
            Some(c) if ["08", "57", "53"].iter().any(|p| c.code().starts_with(p)) => StoreErrorKind::Io,
            None => StoreErrorKind::Io,
            _ => StoreErrorKind::Other,
        };
        let detail = match e.as_db_error() {
            Some(db) => db.message().to_string(),
            // "error connecting to server" says little without its cause.
            None => match std::error::Error::source(&e) {
                Some(cause) => format!("{e}: {cause}"),
                None => e.to_string(),
            },
        };
        StoreError::new(kind, format!("PostgreSQL: {detail}"))
    }
}

impl From<deadpool_postgres::PoolError> for StoreError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        match e {
            deadpool_postgres::PoolError::Backend(e) => e.into(),
            e => StoreError::new(StoreErrorKind::Io, format!("PostgreSQL: cannot get a connection: {e}")),
        }
    }
}

/// A name for this replica: host, process and a random part (a restarted process is a new
/// owner; its old claims expire with their lease).
fn owner_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "culprit".into());
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos());
    format!("{host}/{}/{:08x}", std::process::id(), h.finish() as u32)
}

impl PgStore {
    /// Builds the pool (no connection yet: the first operation connects and migrates).
    pub fn new(cfg: &StoreConfig, url: &str, metrics: Arc<Metrics>, local: LocalClock) -> Result<PgStore, StoreError> {
        let bad = |why: String| StoreError::new(StoreErrorKind::Other, format!("store.url: {why}"));
        let mut pg: tokio_postgres::Config = url.parse().map_err(|e| bad(format!("not a PostgreSQL URL: {e}")))?;
        if let Some(secret) = &cfg.password {
            let password = secret.resolve().map_err(|e| bad(format!("store.password: {e}")))?;
            pg.password(secrecy::ExposeSecret::expose_secret(&password).as_bytes());
        }
        if pg.get_application_name().is_none() {
            pg.application_name("culprit");
        }
        pg.connect_timeout(POOL_TIMEOUT);
        let manager = Manager::from_config(pg, NoTls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
        let pool = Pool::builder(manager)
            .max_size(cfg.pool_size.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(POOL_TIMEOUT))
            .create_timeout(Some(POOL_TIMEOUT))
            .recycle_timeout(Some(POOL_TIMEOUT))
            .build()
            .map_err(|e| bad(e.to_string()))?;
        let inner = Inner {
            pool,
            owner: owner_id(),
            lease_ms: cfg.lease.as_ms().max(1000),
            fairness: Fairness::of(cfg),
            clock: clock::DbClock::new(local, metrics.clone()),
            migrated: tokio::sync::OnceCell::new(),
            intake: std::sync::OnceLock::new(),
            metrics,
        };
        Ok(PgStore { inner: Arc::new(inner) })
    }

    /// This replica's name in `owner` columns.
    pub fn owner(&self) -> &str {
        &self.inner.owner
    }

    /// A pooled connection to a migrated database; the first one migrates and starts the
    /// lease renewal.
    async fn client(&self) -> Result<Object, StoreError> {
        self.inner
            .migrated
            .get_or_try_init(|| async {
                migrate(&self.inner.pool).await?;
                spawn_renewal(Arc::downgrade(&self.inner));
                Ok::<(), StoreError>(())
            })
            .await?;
        let client = self.inner.pool.get().await?;
        self.inner.clock.refresh(&client).await?;
        Ok(client)
    }

    fn lease_until(&self, now_ms: i64) -> i64 {
        now_ms + self.inner.lease_ms
    }

    /// A local time as database time (see [`clock`]).
    fn db(&self, local_ms: i64) -> i64 {
        self.inner.clock.to_db(local_ms)
    }

    /// A database time as local time.
    fn local(&self, db_ms: i64) -> i64 {
        self.inner.clock.to_local(db_ms)
    }

    /// The database's clock minus this replica's, ms, once measured.
    pub fn clock_skew_ms(&self) -> Option<i64> {
        self.inner.clock.offset_ms()
    }

    /// See [`super::Store::enqueue`]: through this replica's intake writer (group commit).
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

    /// See [`super::Store::claim_work`]. Running work whose lease expired is put back first.
    pub async fn claim_work(&self, now_ms: i64) -> Result<Option<WorkItem>, StoreError> {
        // Known jobs (and unknown ones due before $2, starved) first, then the sender whose
        // turn came least recently (round robin), then the earliest due.
        const CANDIDATE: &str = "SELECT w.id, w.sender FROM work w LEFT JOIN sender_turns t ON t.sender = w.sender
             WHERE w.state = 'pending' AND w.due_ms <= $1
               AND NOT EXISTS (SELECT 1 FROM work r WHERE r.job_key = w.job_key AND r.state = 'running')
             ORDER BY (w.known OR w.due_ms <= $2) DESC, COALESCE(t.turn, 0), w.due_ms, w.id
             LIMIT 1 FOR UPDATE OF w SKIP LOCKED";
        const TAKE_TURN: &str = "INSERT INTO sender_turns (sender, turn) VALUES ($1, nextval('sender_turn'))
             ON CONFLICT (sender) DO UPDATE SET turn = excluded.turn";
        let mut client = self.client().await?;
        let now_ms = self.db(now_ms);
        // Due times are the database's: so is how long an unknown job has waited.
        let starved_before = now_ms.saturating_sub(self.inner.fairness.unknown_max_wait_ms);
        let tx = client.transaction().await?;
        let mut dead = Vec::new();
        reap_work(&tx, now_ms, &mut dead).await?;
        let item = loop {
            let Some(row) = tx.query_opt(&tx.prepare_cached(CANDIDATE).await?, &[&now_ms, &starved_before]).await?
            else {
                break None;
            };
            let (id, sender): (i64, String) = (row.get(0), row.get(1));
            match read_work(&tx, id).await? {
                Ok(item) => {
                    let sql = "UPDATE work SET state = 'running', owner = $2, lease_until_ms = $3 WHERE id = $1";
                    let (stmt, until) = (tx.prepare_cached(sql).await?, self.lease_until(now_ms));
                    match tx.execute(&stmt, &[&id, &self.inner.owner, &until]).await {
                        Ok(_) => {
                            tx.execute(&tx.prepare_cached(TAKE_TURN).await?, &[&sender]).await?;
                            break Some(item);
                        }
                        // Another replica runs the job already (a race the index settles).
                        Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => return Ok(None),
                        Err(e) => return Err(e.into()),
                    }
                }
                Err(why) if dead.len() < MAX_DEAD_PER_CLAIM => {
                    dead.push(dead_letter_work(&tx, id, &why, now_ms).await?)
                }
                Err(_) => break None,
            }
        };
        tx.commit().await?;
        report_dead(&self.inner.metrics, dead);
        // Times the service compares with its own clock.
        Ok(item.map(|item| WorkItem {
            created_ms: self.local(item.created_ms),
            first_failure_ms: item.first_failure_ms.map(|t| self.local(t)),
            ..item
        }))
    }

    /// See [`super::Store::next_work_ms`]; an expired lease counts as due.
    pub async fn next_work_ms(&self) -> Result<Option<i64>, StoreError> {
        let client = self.client().await?;
        let sql = "SELECT LEAST(
               (SELECT MIN(w.due_ms) FROM work w WHERE w.state = 'pending'
                  AND NOT EXISTS (SELECT 1 FROM work r WHERE r.job_key = w.job_key AND r.state = 'running')),
               (SELECT MIN(lease_until_ms) FROM work WHERE state = 'running'))";
        let due: Option<i64> = client.query_one(&client.prepare_cached(sql).await?, &[]).await?.get(0);
        Ok(due.map(|t| self.local(t)))
    }

    /// Whether this replica still holds running work `id` (locks the row).
    async fn holds_work(&self, tx: &Transaction<'_>, id: i64) -> Result<bool, StoreError> {
        let sql = "SELECT 1 FROM work WHERE id = $1 AND state = 'running' AND owner = $2 FOR UPDATE";
        let held = tx.query_opt(&tx.prepare_cached(sql).await?, &[&id, &self.inner.owner]).await?.is_some();
        if !held {
            tracing::warn!(
                work = id,
                "the lease on a diagnosis expired and another replica took it; this outcome is dropped"
            );
        }
        Ok(held)
    }

    /// See [`super::Store::retry_work`].
    pub async fn retry_work(&self, item: &WorkItem, due_ms: i64, first_failure_ms: i64) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        if !self.holds_work(&tx, item.id).await? {
            return Ok(());
        }
        let mut dead = Vec::new();
        let now_ms = self.inner.clock.db_now_ms();
        let retry = (self.db(due_ms), self.db(first_failure_ms));
        requeue(&tx, item, Some(retry), &mut dead, now_ms).await?;
        tx.commit().await?;
        report_dead(&self.inner.metrics, dead);
        Ok(())
    }

    /// See [`super::Store::complete_rediagnosing`]. The item's groups are locked first
    /// (sorted, so two completions never deadlock): the last verdicts read are the last ones.
    pub async fn complete(
        &self,
        item: &WorkItem,
        completion: Completion,
        rediagnose_at_ms: Option<i64>,
    ) -> Result<Completed, StoreError> {
        let mut client = self.client().await?;
        let now_ms = self.db(completion.now_ms);
        let rediagnose_at_ms = rediagnose_at_ms.map(|t| self.db(t));
        let tx = client.transaction().await?;
        if !self.holds_work(&tx, item.id).await? {
            return Ok(Completed { verdict_id: None, notices: 0 });
        }
        let lock = tx.prepare_cached("SELECT pg_advisory_xact_lock($1, hashtext($2))").await?;
        for group in item.groups.keys() {
            tx.execute(&lock, &[&GROUP_LOCK_CLASS, group]).await?;
        }
        let verdict_id: Option<i64> = match &completion.verdict {
            Some((job, json)) => {
                let sql = "INSERT INTO verdicts (job, created_ms, json) VALUES ($1, $2, $3) RETURNING id";
                let id = tx.query_one(&tx.prepare_cached(sql).await?, &[job, &now_ms, json]).await?.get(0);
                // The job is known from now on: its next diagnoses go first.
                let known = "INSERT INTO known_jobs (job_key, verdict_ms) VALUES ($1, $2)
                     ON CONFLICT (job_key) DO UPDATE SET verdict_ms = GREATEST(known_jobs.verdict_ms, excluded.verdict_ms)";
                tx.execute(&tx.prepare_cached(known).await?, &[&item.job_key, &now_ms]).await?;
                let sql = "UPDATE work SET known = TRUE WHERE job_key = $1 AND NOT known";
                tx.execute(&tx.prepare_cached(sql).await?, &[&item.job_key]).await?;
                Some(id)
            }
            None => None,
        };
        let last = last_verdicts(&tx, item.groups.keys()).await?;
        let notices = (completion.plan)(verdict_id, &last);
        let insert = tx
            .prepare_cached(
                "INSERT INTO outbox (destination, group_key, idem_key, priority, notice, state, next_ms, first_ms)
                 VALUES ($1, $2, $3, $4, $5, 'pending', $6, $6) ON CONFLICT (destination, idem_key) DO NOTHING",
            )
            .await?;
        let remember = tx
            .prepare_cached(
                "INSERT INTO group_state (destination, group_key, verdict_key, updated_ms) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (destination, group_key) DO UPDATE SET verdict_key = excluded.verdict_key, updated_ms = excluded.updated_ms",
            )
            .await?;
        let mut added = 0;
        for n in notices {
            let json = serde_json::to_string(&n.notice)?;
            let prio = priority(n.notice.kind);
            let (d, g) = (&n.destination, &n.notice.group_key);
            added += tx.execute(&insert, &[d, g, &n.notice.idempotency_key, &prio, &json, &now_ms]).await? as usize;
            if let Some(key) = &n.remember_verdict {
                tx.execute(&remember, &[d, g, key, &now_ms]).await?;
            }
        }
        let touch = tx.prepare_cached("UPDATE group_state SET updated_ms = $2 WHERE group_key = $1").await?;
        for group in item.groups.keys() {
            tx.execute(&touch, &[group, &now_ms]).await?;
        }
        match rediagnose_at_ms {
            Some(due_ms) => rediagnose(&tx, item, due_ms, now_ms).await?,
            None => {
                tx.execute(&tx.prepare_cached("DELETE FROM work WHERE id = $1").await?, &[&item.id]).await?;
            }
        }
        tx.commit().await?;
        Ok(Completed { verdict_id, notices: added })
    }

    /// See [`super::Store::claim_delivery`]. Sends whose lease expired are pending again
    /// and unsure first.
    pub async fn claim_delivery(
        &self,
        destination: &str,
        now_ms: i64,
        window_ms: i64,
    ) -> Result<Option<OutboxRow>, StoreError> {
        // "Could not diagnose" waits (up to $3 ms) while any diagnosis is queued or running
        // (its group's, or a burst's draining): their failures fold in.
        // It also waits while one is being sent to the destination or was sent within the
        // last $4 ms (folded rows are not sent: their last_error says so); a verdict or a
        // resolution does not wait behind a waiting one of its group.
        const CANDIDATE: &str = "SELECT o.id FROM outbox o
             WHERE o.destination = $1 AND o.state = 'pending' AND o.next_ms <= $2
               AND NOT EXISTS (SELECT 1 FROM outbox e WHERE e.destination = o.destination
                 AND e.group_key = o.group_key AND e.state IN ('pending', 'sending') AND e.id < o.id
                 AND (o.priority = 1 OR e.priority = 0 OR e.state = 'sending'))
               AND (o.priority = 0 OR ((o.first_ms <= $2 - $3
                   OR NOT EXISTS (SELECT 1 FROM work WHERE state IN ('pending', 'running')))
                 AND NOT EXISTS (SELECT 1 FROM outbox s WHERE s.destination = o.destination AND s.priority = 1
                   AND (s.state = 'sending' OR (s.state = 'sent' AND s.last_error IS NULL AND s.done_ms > $2 - $4)))))
             ORDER BY o.priority, o.id LIMIT 1 FOR UPDATE SKIP LOCKED";
        let mut client = self.client().await?;
        let now_ms = self.db(now_ms);
        let tx = client.transaction().await?;
        let reap = "UPDATE outbox SET state = 'pending', unsure = TRUE, owner = NULL,
               next_ms = GREATEST(next_ms, $2 + $3)
             WHERE destination = $1 AND state = 'sending' AND lease_until_ms < $2";
        let stmt = tx.prepare_cached(reap).await?;
        let reaped = tx.execute(&stmt, &[&destination, &now_ms, &REAPED_SEND_GRACE_MS]).await?;
        if reaped > 0 {
            tracing::warn!(
                destination,
                sends = reaped,
                "sends of a replica whose lease expired are checked or sent again"
            );
        }
        let mut dead = Vec::new();
        let row = loop {
            let candidate = tx.prepare_cached(CANDIDATE).await?;
            let Some(c) = tx.query_opt(&candidate, &[&destination, &now_ms, &FOLD_WAIT_MAX_MS, &window_ms]).await?
            else {
                break None;
            };
            let id: i64 = c.get(0);
            match read_outbox(&tx, id).await? {
                Ok(mut row) => {
                    let sql =
                        "UPDATE outbox SET state = 'sending', attempts = attempts + 1, owner = $2, lease_until_ms = $3,
                         lease_token = lease_token + 1 WHERE id = $1 RETURNING lease_token";
                    let (stmt, until) = (tx.prepare_cached(sql).await?, self.lease_until(now_ms));
                    row.token = tx.query_one(&stmt, &[&id, &self.inner.owner, &until]).await?.get(0);
                    row.attempts += 1;
                    fold_siblings(&tx, &mut row, now_ms).await?;
                    row.group_state = group_state(&tx, destination, &row.notice.group_key, &mut dead, now_ms).await?;
                    break Some(row);
                }
                Err(why) if dead.len() < MAX_DEAD_PER_CLAIM => {
                    dead.push(dead_letter_outbox(&tx, id, destination, &why, now_ms).await?)
                }
                Err(_) => break None,
            }
        };
        tx.commit().await?;
        report_dead(&self.inner.metrics, dead);
        Ok(row.map(|row| OutboxRow { first_ms: self.local(row.first_ms), ..row }))
    }

    /// See [`super::Store::next_delivery_ms`]; an expired lease counts as due.
    pub async fn next_delivery_ms(&self, destination: &str, window_ms: i64) -> Result<Option<i64>, StoreError> {
        let client = self.client().await?;
        // A "could not diagnose" is due once the window after the last one sent is over.
        let sql = "SELECT LEAST(
               (SELECT MIN(CASE WHEN o.priority = 0 THEN o.next_ms ELSE GREATEST(o.next_ms, COALESCE((SELECT
                    MAX(s.done_ms) FROM outbox s WHERE s.destination = o.destination AND s.priority = 1
                      AND s.state = 'sent' AND s.last_error IS NULL), 0) + $2) END)
                FROM outbox o WHERE o.destination = $1 AND o.state = 'pending'
                  AND NOT EXISTS (SELECT 1 FROM outbox e WHERE e.destination = o.destination
                    AND e.group_key = o.group_key AND e.state IN ('pending', 'sending') AND e.id < o.id
                    AND (o.priority = 1 OR e.priority = 0 OR e.state = 'sending'))
                  AND (o.priority = 0 OR (
                    NOT EXISTS (SELECT 1 FROM work WHERE state IN ('pending', 'running'))
                    AND NOT EXISTS (SELECT 1 FROM outbox s WHERE s.destination = o.destination AND s.priority = 1
                      AND s.state = 'sending')))),
               (SELECT MIN(lease_until_ms) FROM outbox WHERE destination = $1 AND state = 'sending'))";
        let due: Option<i64> =
            client.query_one(&client.prepare_cached(sql).await?, &[&destination, &window_ms]).await?.get(0);
        Ok(due.map(|t| self.local(t)))
    }

    /// See [`super::Store::delivered`]: stored under the claim's token only. A send whose
    /// lease expired is still recorded while no replica has claimed it again (its token is
    /// the same): it is then not sent twice.
    pub async fn delivered(
        &self,
        row: &OutboxRow,
        state: Option<&serde_json::Value>,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let (id, destination, group_key) = (row.id, row.destination.as_str(), row.notice.group_key.as_str());
        let mut client = self.client().await?;
        let now_ms = self.db(now_ms);
        let tx = client.transaction().await?;
        let sql = "UPDATE outbox SET state = 'sent', unsure = FALSE, last_error = NULL, done_ms = $2, owner = NULL
             WHERE id = $1 AND lease_token = $4 AND ((state = 'sending' AND owner = $3) OR state = 'pending')";
        let stmt = tx.prepare_cached(sql).await?;
        let updated = tx.execute(&stmt, &[&id, &now_ms, &self.inner.owner, &row.token]).await?;
        if updated == 0 {
            tracing::warn!(
                destination,
                outbox = id,
                "another replica took this send over after the lease expired; this outcome is not stored (the send may arrive twice)"
            );
        }
        if let (Some(state), 1..) = (state, updated) {
            let sql = "INSERT INTO group_state (destination, group_key, state, updated_ms) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (destination, group_key) DO UPDATE SET state = excluded.state, updated_ms = excluded.updated_ms";
            let state = serde_json::to_string(state)?;
            tx.execute(&tx.prepare_cached(sql).await?, &[&destination, &group_key, &state, &now_ms]).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// See [`super::Store::retry_delivery`] (under the claim's token).
    pub async fn retry_delivery(
        &self,
        row: &OutboxRow,
        next_ms: i64,
        error: &str,
        unsure: bool,
    ) -> Result<(), StoreError> {
        let client = self.client().await?;
        let next_ms = self.db(next_ms);
        let sql = "UPDATE outbox SET state = 'pending', next_ms = $2, last_error = $3, unsure = $4, owner = NULL
             WHERE id = $1 AND state = 'sending' AND owner = $5 AND lease_token = $6";
        let args: [&(dyn tokio_postgres::types::ToSql + Sync); 6] =
            [&row.id, &next_ms, &error, &unsure, &self.inner.owner, &row.token];
        client.execute(&client.prepare_cached(sql).await?, &args).await?;
        Ok(())
    }

    /// See [`super::Store::fail_delivery`] (under the claim's token).
    pub async fn fail_delivery(&self, row: &OutboxRow, error: &str, now_ms: i64) -> Result<(), StoreError> {
        let client = self.client().await?;
        let now_ms = self.db(now_ms);
        let sql = "UPDATE outbox SET state = 'failed', last_error = $2, done_ms = $3, owner = NULL
             WHERE id = $1 AND state = 'sending' AND owner = $4 AND lease_token = $5";
        let args: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
            [&row.id, &error, &now_ms, &self.inner.owner, &row.token];
        client.execute(&client.prepare_cached(sql).await?, &args).await?;
        Ok(())
    }

    /// See [`super::Store::fence`]: whether this replica still holds the send under its
    /// token with its lease not expired, by the database's clock; if so the lease is
    /// renewed to at least `margin_ms` from now (the send's own timeout), so that it
    /// cannot expire while the send is on the wire unless renewals stop (a pause, the
    /// database unreachable) for that long.
    pub async fn fence(&self, row: &OutboxRow, now_ms: i64, margin_ms: i64) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let now_ms = self.db(now_ms);
        let until = now_ms + self.inner.lease_ms.max(margin_ms);
        let sql = "UPDATE outbox SET lease_until_ms = GREATEST(lease_until_ms, $4)
             WHERE id = $1 AND state = 'sending' AND owner = $2 AND lease_token = $3 AND lease_until_ms > $5";
        let args: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
            [&row.id, &self.inner.owner, &row.token, &until, &now_ms];
        Ok(client.execute(&client.prepare_cached(sql).await?, &args).await? == 1)
    }

    /// See [`super::Store::verdicts`].
    pub async fn verdicts(&self, limit: usize) -> Result<Vec<StoredVerdict>, StoreError> {
        let ids: Vec<i64> = {
            let client = self.client().await?;
            let sql = "SELECT id FROM verdicts ORDER BY id DESC LIMIT $1";
            let rows = client.query(&client.prepare_cached(sql).await?, &[&(limit as i64)]).await?;
            rows.iter().map(|r| r.get(0)).collect()
        };
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(v) = self.verdict(id).await? {
                out.push(v);
            }
        }
        Ok(out)
    }

    /// See [`super::Store::verdict`]. An undecodable verdict goes to the dead-letter table.
    pub async fn verdict(&self, id: i64) -> Result<Option<StoredVerdict>, StoreError> {
        let mut client = self.client().await?;
        let sql = "SELECT created_ms, json FROM verdicts WHERE id = $1";
        let Some(row) = client.query_opt(&client.prepare_cached(sql).await?, &[&id]).await? else {
            return Ok(None);
        };
        let created_ms: i64 = row.get(0);
        let json: String = row.get(1);
        match serde_json::from_str(&json) {
            // Stored on the database's clock; callers compare with this replica's.
            Ok(verdict) => Ok(Some(StoredVerdict { id, created_ms: self.local(created_ms), verdict })),
            Err(why) => {
                let now_ms = self.inner.clock.db_now_ms();
                let tx = client.transaction().await?;
                let dead = dead_letter(&tx, "verdicts", id, None, &why.to_string(), now_ms).await?;
                tx.execute("DELETE FROM verdicts WHERE id = $1", &[&id]).await?;
                tx.commit().await?;
                report_dead(&self.inner.metrics, vec![dead]);
                Ok(None)
            }
        }
    }

    /// See [`super::Store::last_verdict_job`].
    pub async fn last_verdict_job(
        &self,
        job_id: Option<&str>,
        name: Option<&str>,
    ) -> Result<Option<JobRef>, StoreError> {
        use crate::model::graph::sanitize_label_value;
        let client = self.client().await?;
        let sql = "SELECT json FROM verdicts ORDER BY id DESC LIMIT 200";
        let rows = client.query(&client.prepare_cached(sql).await?, &[]).await?;
        let wanted = name.map(sanitize_label_value);
        Ok(rows
            .iter()
            .filter_map(|r| serde_json::from_str::<serde_json::Value>(&r.get::<_, String>(0)).ok())
            .map(|v| {
                let field =
                    |k: &str| v.pointer(&format!("/job/{k}")).and_then(|x| x.as_str()).unwrap_or("").to_string();
                (field("name"), field("id"))
            })
            .find(|(n, id)| match job_id {
                Some(j) => id == j,
                None => wanted.as_deref() == Some(sanitize_label_value(n).as_str()),
            })
            .map(|(name, id)| JobRef { name, id }))
    }

    /// See [`super::Store::dead_letters`].
    pub async fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>, StoreError> {
        let client = self.client().await?;
        let sql = "SELECT id, source, source_id, destination, error, payload, at_ms FROM dead_letter ORDER BY id DESC LIMIT $1";
        let rows = client.query(&client.prepare_cached(sql).await?, &[&(limit as i64)]).await?;
        Ok(rows
            .iter()
            .map(|r| {
                let payload: String = r.get(5);
                DeadLetter {
                    id: r.get(0),
                    source: r.get(1),
                    source_id: r.get(2),
                    destination: r.get(3),
                    error: r.get(4),
                    payload: serde_json::from_str(&payload).unwrap_or(serde_json::Value::String(payload)),
                    at_ms: self.local(r.get(6)),
                }
            })
            .collect())
    }

    /// See [`super::Store::depths`].
    pub async fn depths(&self) -> Result<Depths, StoreError> {
        let client = self.client().await?;
        let sql = "SELECT (SELECT COUNT(*) FROM work),
                (SELECT COUNT(*) FROM outbox WHERE state IN ('pending', 'sending')),
                (SELECT COUNT(*) FROM dead_letter)";
        let r = client.query_one(&client.prepare_cached(sql).await?, &[]).await?;
        Ok(Depths { work: r.get(0), outbox: r.get(1), dead_letters: r.get(2) })
    }

    /// See [`super::Store::prune`].
    pub async fn prune(&self, p: Prune) -> Result<Pruned, StoreError> {
        let mut client = self.client().await?;
        let cutoff = self.db(p.now_ms) - p.older_than_ms;
        let tx = client.transaction().await?;
        let n = |sql: &'static str, arg: i64| {
            let tx = &tx;
            async move { Ok::<usize, StoreError>(tx.execute(sql, &[&arg]).await? as usize) }
        };
        let mut pruned = Pruned {
            outbox: n("DELETE FROM outbox WHERE state IN ('sent', 'failed') AND done_ms < $1", cutoff).await?,
            ..Pruned::default()
        };
        pruned.outbox += n(
            "DELETE FROM outbox WHERE state IN ('sent', 'failed') AND id NOT IN (
               SELECT id FROM outbox WHERE state IN ('sent', 'failed') ORDER BY done_ms DESC, id DESC LIMIT $1)",
            p.keep_rows,
        )
        .await?;
        // A group's state goes once nothing was heard of the group for the whole period
        // and nothing of it waits: a later alert for it starts afresh.
        pruned.group_state = n(
            "DELETE FROM group_state WHERE updated_ms < $1 AND NOT EXISTS (SELECT 1 FROM outbox o
               WHERE o.destination = group_state.destination AND o.group_key = group_state.group_key
                 AND o.state IN ('pending', 'sending'))",
            cutoff,
        )
        .await?;
        pruned.verdicts = n("DELETE FROM verdicts WHERE created_ms < $1", cutoff).await?;
        pruned.verdicts +=
            n("DELETE FROM verdicts WHERE id <= (SELECT MAX(id) FROM verdicts) - $1", p.verdicts_kept).await?;
        // A job not given a verdict for the whole period is unknown again.
        pruned.known_jobs = n("DELETE FROM known_jobs WHERE verdict_ms < $1", cutoff).await?;
        pruned.known_jobs += n(
            "DELETE FROM known_jobs WHERE job_key NOT IN (
               SELECT job_key FROM known_jobs ORDER BY verdict_ms DESC LIMIT $1)",
            p.keep_rows,
        )
        .await?;
        tx.execute("DELETE FROM sender_turns WHERE sender NOT IN (SELECT sender FROM work)", &[]).await?;
        pruned.dead_letters = n("DELETE FROM dead_letter WHERE at_ms < $1", cutoff).await?;
        pruned.dead_letters +=
            n("DELETE FROM dead_letter WHERE id <= (SELECT MAX(id) FROM dead_letter) - $1", p.keep_rows).await?;
        tx.commit().await?;
        Ok(pruned)
    }

    /// A write that proves the database takes writes (for `/readyz`).
    pub async fn touch(&self, now_ms: i64) -> Result<(), StoreError> {
        let client = self.client().await?;
        let now_ms = self.db(now_ms);
        let sql = "INSERT INTO health (id, touched_ms) VALUES (1, $1)
             ON CONFLICT (id) DO UPDATE SET touched_ms = GREATEST(excluded.touched_ms, health.touched_ms + 1)";
        client.execute(&client.prepare_cached(sql).await?, &[&now_ms]).await?;
        Ok(())
    }
}

/// Applies the migrations this database lacks, in one transaction under an advisory lock.
async fn migrate(pool: &Pool) -> Result<(), StoreError> {
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
    tx.commit().await?;
    Ok(())
}

/// Renews this replica's leases every third of the lease, while the store lives. A lease
/// that expired stays lost, even while no replica has taken its row yet (a pause or an
/// outage past the lease ends the claim: [`PgStore::fence`] then refuses the send).
fn spawn_renewal(inner: Weak<Inner>) {
    tokio::spawn(async move {
        loop {
            let every = match inner.upgrade() {
                Some(i) => Duration::from_millis((i.lease_ms / 3) as u64),
                None => return,
            };
            tokio::time::sleep(every).await;
            let Some(i) = inner.upgrade() else { return };
            if let Err(e) = renew(&i).await {
                tracing::warn!(error = %e, "cannot renew the leases of claimed work; retrying");
            }
        }
    });
}

async fn renew(i: &Inner) -> Result<(), StoreError> {
    let client = i.pool.get().await?;
    i.clock.refresh(&client).await?;
    let until = i.clock.db_now_ms() + i.lease_ms;
    for table in ["work", "outbox"] {
        let state = if table == "work" { "running" } else { "sending" };
        let sql = format!(
            "UPDATE {table} SET lease_until_ms = GREATEST(lease_until_ms, $2)
             WHERE owner = $1 AND state = '{state}' AND lease_until_ms > $3"
        );
        client.execute(&client.prepare_cached(&sql).await?, &[&i.owner, &until, &(until - i.lease_ms)]).await?;
    }
    Ok(())
}

/// Merges an intake into the job's pending diagnosis, or creates one due at `due_ms`.
/// Returns 1 when a new diagnosis was created. A pending row that cannot be decoded is
/// moved aside. The insert is an upsert: a replica that created the job's pending row
/// meanwhile gets the group merged in (a JSON object union).
async fn apply_intake(
    tx: &Transaction<'_>,
    i: &Intake,
    known: bool,
    now_ms: i64,
    due_ms: i64,
    dead: &mut Vec<DeadLetter>,
) -> Result<usize, StoreError> {
    let info =
        GroupInfo { firing: i.firing, firing_set: i.firing_set.clone(), labels: i.labels.clone(), rediagnosis: false };
    let labels = serde_json::to_string(&i.labels)?;
    let sql = "SELECT id, groups FROM work WHERE state = 'pending' AND job_key = $1 FOR UPDATE";
    if let Some(row) = tx.query_opt(&tx.prepare_cached(sql).await?, &[&i.job_key]).await? {
        let id: i64 = row.get(0);
        let groups: String = row.get(1);
        match serde_json::from_str::<BTreeMap<String, GroupInfo>>(&groups) {
            Ok(mut groups) => {
                // A weak verdict's follow-up waits longer than the coalescing window: a
                // webhook brings it forward (a retry keeps its backoff).
                let follow_up = groups.values().all(|g| g.rediagnosis);
                groups.insert(i.group_key.clone(), info);
                let due = if follow_up { due_ms } else { i64::MAX };
                let sql = "UPDATE work SET groups = $2, labels = $3, due_ms = LEAST(due_ms, $4), known = known OR $5
                     WHERE id = $1";
                let groups = serde_json::to_string(&groups)?;
                tx.execute(&tx.prepare_cached(sql).await?, &[&id, &groups, &labels, &due, &known]).await?;
                return Ok(0);
            }
            Err(why) => dead.push(dead_letter_work(tx, id, &format!("groups: {why}"), now_ms).await?),
        }
    }
    let groups: BTreeMap<&str, &GroupInfo> = [(i.group_key.as_str(), &info)].into_iter().collect();
    let sql = "INSERT INTO work (job_key, job, labels, groups, due_ms, created_ms, state, sender, known)
         VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $8)
         ON CONFLICT (job_key) WHERE state = 'pending'
         DO UPDATE SET groups = (work.groups::jsonb || excluded.groups::jsonb)::text, labels = excluded.labels,
           known = work.known OR excluded.known
         RETURNING (xmax = 0)";
    let row = tx
        .query_one(
            &tx.prepare_cached(sql).await?,
            &[&i.job_key, &i.job, &labels, &serde_json::to_string(&groups)?, &due_ms, &now_ms, &i.sender, &known],
        )
        .await?;
    Ok(usize::from(row.get::<_, bool>(0)))
}

/// The follow-up of a weak verdict (see [`super::Store::complete_rediagnosing`]): the
/// finished row is pending again at `due_ms` with its firing groups marked, or those groups
/// join the job's pending diagnosis.
async fn rediagnose(tx: &Transaction<'_>, item: &WorkItem, due_ms: i64, now_ms: i64) -> Result<(), StoreError> {
    let groups: BTreeMap<String, GroupInfo> = item
        .groups
        .iter()
        .filter(|(_, g)| g.firing)
        .map(|(k, g)| (k.clone(), GroupInfo { rediagnosis: true, ..g.clone() }))
        .collect();
    let sql = "SELECT id FROM work WHERE state = 'pending' AND job_key = $1 FOR UPDATE";
    let pending: Option<i64> = tx.query_opt(&tx.prepare_cached(sql).await?, &[&item.job_key]).await?.map(|r| r.get(0));
    let pending = match pending {
        Some(id) => Some(read_work(tx, id).await?),
        None => None,
    };
    match pending {
        _ if groups.is_empty() => {}
        Some(Ok(newer)) => {
            let mut merged = groups;
            merged.extend(newer.groups);
            let sql = "UPDATE work SET groups = $2 WHERE id = $1";
            tx.execute(&tx.prepare_cached(sql).await?, &[&newer.id, &serde_json::to_string(&merged)?]).await?;
        }
        // The pending row goes to the dead letters at its claim; no follow-up beside it.
        Some(Err(_)) => {}
        None => {
            let sql = "UPDATE work SET state = 'pending', owner = NULL, groups = $2, due_ms = $3, created_ms = $4,
                   attempts = 0, first_failure_ms = NULL WHERE id = $1";
            let groups = serde_json::to_string(&groups)?;
            tx.execute(&tx.prepare_cached(sql).await?, &[&item.id, &groups, &due_ms, &now_ms]).await?;
            return Ok(());
        }
    }
    tx.execute(&tx.prepare_cached("DELETE FROM work WHERE id = $1").await?, &[&item.id]).await?;
    Ok(())
}

/// Running work whose lease expired runs again (merged into the job's pending row).
async fn reap_work(tx: &Transaction<'_>, now_ms: i64, dead: &mut Vec<DeadLetter>) -> Result<(), StoreError> {
    let sql = "SELECT id FROM work WHERE state = 'running' AND lease_until_ms < $1 FOR UPDATE SKIP LOCKED";
    let expired: Vec<i64> =
        tx.query(&tx.prepare_cached(sql).await?, &[&now_ms]).await?.iter().map(|r| r.get(0)).collect();
    for id in expired {
        match read_work(tx, id).await? {
            Ok(item) => {
                tracing::warn!(job = ?item.job, "the replica running a diagnosis stopped renewing its lease; it runs again");
                requeue(tx, &item, None, dead, now_ms).await?
            }
            Err(why) => dead.push(dead_letter_work(tx, id, &why, now_ms).await?),
        }
    }
    Ok(())
}

/// Puts running work back to pending (due at `retry.0`, first failure `retry.1`, one more
/// attempt), or merges it into the job's newer pending row.
async fn requeue(
    tx: &Transaction<'_>,
    item: &WorkItem,
    retry: Option<(i64, i64)>,
    dead: &mut Vec<DeadLetter>,
    now_ms: i64,
) -> Result<(), StoreError> {
    let sql = "SELECT id FROM work WHERE state = 'pending' AND job_key = $1 FOR UPDATE";
    let newer: Option<i64> = tx.query_opt(&tx.prepare_cached(sql).await?, &[&item.job_key]).await?.map(|r| r.get(0));
    let attempts = item.attempts + i64::from(retry.is_some());
    let first_failure = retry.map(|r| r.1).or(item.first_failure_ms);
    let newer = match newer {
        Some(id) => match read_work(tx, id).await? {
            Ok(newer) => Some(newer),
            Err(why) => {
                dead.push(dead_letter_work(tx, id, &why, now_ms).await?);
                None
            }
        },
        None => None,
    };
    match newer {
        Some(newer) => {
            let mut merged = item.groups.clone();
            merged.extend(newer.groups);
            let due = retry.map_or(i64::MAX, |r| r.0);
            let sql = "UPDATE work SET groups = $2, attempts = $3, first_failure_ms = $4, due_ms = LEAST(due_ms, $5) WHERE id = $1";
            let merged = serde_json::to_string(&merged)?;
            tx.execute(&tx.prepare_cached(sql).await?, &[&newer.id, &merged, &attempts, &first_failure, &due]).await?;
            tx.execute(&tx.prepare_cached("DELETE FROM work WHERE id = $1").await?, &[&item.id]).await?;
        }
        None => {
            let sql = match retry {
                Some(_) => {
                    "UPDATE work SET state = 'pending', owner = NULL, due_ms = $2, attempts = $3, first_failure_ms = $4 WHERE id = $1"
                }
                None => {
                    "UPDATE work SET state = 'pending', owner = NULL, due_ms = LEAST(due_ms, $2), attempts = $3, first_failure_ms = $4 WHERE id = $1"
                }
            };
            let due = retry.map_or(now_ms, |r| r.0);
            tx.execute(&tx.prepare_cached(sql).await?, &[&item.id, &due, &attempts, &first_failure]).await?;
        }
    }
    Ok(())
}

/// Decodes a work row; `Ok(Err(why))` when the row is there but cannot be decoded.
async fn read_work(tx: &Transaction<'_>, id: i64) -> Result<Result<WorkItem, String>, StoreError> {
    let sql =
        "SELECT job_key, job, labels, groups, created_ms, attempts, first_failure_ms, known FROM work WHERE id = $1";
    let r = tx.query_one(&tx.prepare_cached(sql).await?, &[&id]).await?;
    Ok((|| -> Result<WorkItem, String> {
        Ok(WorkItem {
            id,
            job_key: r.get(0),
            job: r.get(1),
            labels: serde_json::from_str(r.get(2)).map_err(|e| format!("labels: {e}"))?,
            groups: serde_json::from_str(r.get(3)).map_err(|e| format!("groups: {e}"))?,
            created_ms: r.get(4),
            attempts: r.get(5),
            first_failure_ms: r.get(6),
            known: r.get(7),
        })
    })())
}

/// Folds the destination's other pending "could not diagnose" notices, of any alert
/// group, into a claimed one ([`super::fold_could_not_diagnose`]): the claimed row carries
/// them from now on (its notice is rewritten), and they are done.
async fn fold_siblings(tx: &Transaction<'_>, row: &mut OutboxRow, now_ms: i64) -> Result<(), StoreError> {
    if row.notice.kind != NoticeKind::CouldNotDiagnose {
        return Ok(());
    }
    let sql = "SELECT id, notice FROM outbox WHERE destination = $1 AND state = 'pending'
                 AND priority = 1 AND id <> $2 ORDER BY id FOR UPDATE";
    let rows = tx.query(&tx.prepare_cached(sql).await?, &[&row.destination, &row.id]).await?;
    let mut others = Vec::new();
    let mut ids: Vec<i64> = Vec::new();
    for r in rows {
        // An undecodable row is left for the claim that moves it aside.
        if let Ok(n) = serde_json::from_str::<Notice>(r.get(1)) {
            others.push(n);
            ids.push(r.get(0));
        }
    }
    if ids.is_empty() {
        return Ok(());
    }
    super::fold_could_not_diagnose(&mut row.notice, &others);
    let sql = "UPDATE outbox SET notice = $2 WHERE id = $1";
    tx.execute(&tx.prepare_cached(sql).await?, &[&row.id, &serde_json::to_string(&row.notice)?]).await?;
    let why = format!("folded into notice {}", row.id);
    let sql = "UPDATE outbox SET state = 'sent', last_error = $2, done_ms = $3 WHERE id = ANY($1)";
    tx.execute(&tx.prepare_cached(sql).await?, &[&ids, &why, &now_ms]).await?;
    tracing::info!(destination = %row.destination, group = ?row.notice.group_key, folded = ids.len(),
        "could-not-diagnose notices folded into one");
    Ok(())
}

/// Decodes an outbox row (without its group state); `Ok(Err(why))` when it cannot be.
async fn read_outbox(tx: &Transaction<'_>, id: i64) -> Result<Result<OutboxRow, String>, StoreError> {
    let sql = "SELECT destination, notice, unsure, attempts, first_ms FROM outbox WHERE id = $1";
    let r = tx.query_one(&tx.prepare_cached(sql).await?, &[&id]).await?;
    Ok(serde_json::from_str::<Notice>(r.get(1)).map_err(|e| format!("notice: {e}")).map(|notice| OutboxRow {
        id,
        destination: r.get(0),
        notice,
        unsure: r.get(2),
        attempts: r.get(3),
        first_ms: r.get(4),
        group_state: None,
        token: 0,
    }))
}

/// The destination's state for a group; an undecodable one is moved aside (the group
/// starts afresh: a new Slack message instead of a reply).
async fn group_state(
    tx: &Transaction<'_>,
    destination: &str,
    group_key: &str,
    dead: &mut Vec<DeadLetter>,
    now_ms: i64,
) -> Result<Option<serde_json::Value>, StoreError> {
    let sql = "SELECT state, row_to_json(g)::text FROM group_state g WHERE destination = $1 AND group_key = $2";
    let Some(row) = tx.query_opt(&tx.prepare_cached(sql).await?, &[&destination, &group_key]).await? else {
        return Ok(None);
    };
    let Some(state) = row.get::<_, Option<String>>(0) else { return Ok(None) };
    let why = match serde_json::from_str(&state) {
        Ok(v) => return Ok(Some(v)),
        Err(e) => format!("state: {e}"),
    };
    let payload = serde_json::from_str(row.get(1)).unwrap_or(serde_json::Value::Null);
    dead.push(insert_dead_letter(tx, "group_state", 0, Some(destination), &why, &payload, now_ms).await?);
    let sql = "UPDATE group_state SET state = NULL WHERE destination = $1 AND group_key = $2";
    tx.execute(&tx.prepare_cached(sql).await?, &[&destination, &group_key]).await?;
    Ok(None)
}

/// The last verdict key of every (destination, group) for these groups.
async fn last_verdicts<'a>(
    tx: &Transaction<'_>,
    groups: impl Iterator<Item = &'a String>,
) -> Result<LastVerdicts, StoreError> {
    let mut out = BTreeMap::new();
    let stmt = tx
        .prepare_cached(
            "SELECT destination, verdict_key FROM group_state WHERE group_key = $1 AND verdict_key IS NOT NULL",
        )
        .await?;
    for g in groups {
        for r in tx.query(&stmt, &[g]).await? {
            out.insert((r.get::<_, String>(0), g.clone()), r.get::<_, String>(1));
        }
    }
    Ok(LastVerdicts(out))
}

async fn insert_dead_letter(
    tx: &Transaction<'_>,
    source: &str,
    source_id: i64,
    destination: Option<&str>,
    error: &str,
    payload: &serde_json::Value,
    now_ms: i64,
) -> Result<DeadLetter, StoreError> {
    let sql = "INSERT INTO dead_letter (source, source_id, destination, error, payload, at_ms)
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING id";
    let text = payload.to_string();
    let id: i64 = tx
        .query_one(&tx.prepare_cached(sql).await?, &[&source, &source_id, &destination, &error, &text, &now_ms])
        .await?
        .get(0);
    Ok(DeadLetter {
        id,
        source: source.into(),
        source_id,
        destination: destination.map(str::to_string),
        error: error.into(),
        payload: payload.clone(),
        at_ms: now_ms,
    })
}

/// Copies a row of `table` (every column, as JSON) to the dead-letter table.
async fn dead_letter(
    tx: &Transaction<'_>,
    table: &'static str,
    id: i64,
    destination: Option<&str>,
    error: &str,
    now_ms: i64,
) -> Result<DeadLetter, StoreError> {
    let sql = format!("SELECT row_to_json(t)::text FROM {table} t WHERE id = $1");
    let text: String = tx.query_one(&sql, &[&id]).await?.get(0);
    let payload = serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text));
    insert_dead_letter(tx, table, id, destination, error, &payload, now_ms).await
}

async fn dead_letter_work(tx: &Transaction<'_>, id: i64, error: &str, now_ms: i64) -> Result<DeadLetter, StoreError> {
    let d = dead_letter(tx, "work", id, None, error, now_ms).await?;
    tx.execute(&tx.prepare_cached("DELETE FROM work WHERE id = $1").await?, &[&id]).await?;
    Ok(d)
}

async fn dead_letter_outbox(
    tx: &Transaction<'_>,
    id: i64,
    destination: &str,
    error: &str,
    now_ms: i64,
) -> Result<DeadLetter, StoreError> {
    let d = dead_letter(tx, "outbox", id, Some(destination), error, now_ms).await?;
    tx.execute(&tx.prepare_cached("DELETE FROM outbox WHERE id = $1").await?, &[&id]).await?;
    Ok(d)
}

/// Logs and counts dead letters once their transaction committed.
fn report_dead(metrics: &Metrics, dead: Vec<DeadLetter>) {
    super::sqlite::report_dead(metrics, dead);
}
