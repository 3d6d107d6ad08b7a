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

mod backend;
mod clock;
mod dead_letters;
mod intake;
mod notices;
mod schema;
mod upkeep;
mod verdicts;
mod work;

use dead_letters::*;
use schema::*;

pub use clock::{LocalClock, WARN_MS as CLOCK_SKEW_WARN_MS};

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime, Transaction};
use tokio_postgres::NoTls;
use tokio_postgres::error::SqlState;

use super::backend::MAX_DEAD_PER_CLAIM;
use super::{
    Completed, Completion, DeadLetter, Depths, Enqueued, FOLD_WAIT_MAX_MS, Fairness, GroupInfo, LastVerdicts,
    OutboxRow, Prune, Pruned, RecentMember, StoreError, StoreErrorKind, StoredVerdict, WorkItem, claim_class, is_deep,
    newest_first, priority, rank, report_dead,
};
use crate::config::StoreConfig;
use crate::model::notice::{Notice, NoticeKind};
use crate::model::verdict::JobRef;
use crate::service::intake::Intake;
use crate::service::metrics::Metrics;

/// The advisory lock class (first key) of alert groups in completions.
const GROUP_LOCK_CLASS: i32 = 0x6375_6c70;

/// The advisory lock class of incidents: completions that count their verdict with the
/// recent ones take it (after their groups' locks, so never a deadlock), so that replicas
/// count verdicts one after the other and plan an incident's summary once.
const INCIDENT_LOCK_CLASS: i32 = 0x696e_6364;

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
}
