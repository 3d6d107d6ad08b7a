//! The database's clock decides on PostgreSQL: every lease, due time and stored time that
//! another replica compares is in PostgreSQL's time, never in a replica's own.
//!
//! The service reads its own clock (`now_ms`, and times derived from it: due times,
//! backoffs). This replica's offset from the database, `db − local`, is measured on a
//! store round trip at most every [`MEASURE_EVERY`] (`clock_timestamp()` read between two
//! local readings: the error is at most half the round trip), and every local time the
//! store is given is turned into database time with it ([`DbClock::to_db`]), every stored
//! time it hands back into local time ([`DbClock::to_local`]). A replica whose clock is
//! two minutes fast then claims work when the database says it is due, like the others.
//!
//! The offset is kept in whole steps of [`RESOLUTION_MS`] (rounded), and a new
//! measurement is adopted only when it is more than a step away from the offset kept (or
//! is the first): the offset stays steady between round trips, so that a due time stored
//! by one call and compared by the next does not jitter by the measurement noise, and
//! replicas whose clocks agree with the database's to within half a step all use an offset
//! of exactly 0. The offset is `culprit_store_clock_skew_seconds` and `/readyz` warns above
//! [`WARN_MS`].

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use deadpool_postgres::Object;

use crate::service::metrics::Metrics;
use crate::service::store::StoreError;

/// Reads this replica's clock, Unix ms (the service's clock; tests inject their own).
pub type LocalClock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// How often the offset is measured, at most (on the next store round trip after it).
pub const MEASURE_EVERY: Duration = Duration::from_secs(1);

/// The step of the offset. Changes smaller than this are measurement noise (half a round
/// trip on a loaded host) and leave it as it is. A tenth of a second is far below the
/// shortest lease (1 s) and the coalescing windows, so scheduling stays in the database's
/// time to within it.
pub const RESOLUTION_MS: i64 = 100;

/// A sample whose round trip took longer than this says little about the offset: skipped.
pub const MAX_SAMPLE_RTT_MS: i64 = 2 * RESOLUTION_MS;

/// Above this offset `/readyz` says so (still ready: the database's clock decides, but
/// the times this replica writes into notices and logs are off by as much; NTP needs a
/// look). Two seconds is well beyond what NTP leaves between hosts.
pub const WARN_MS: i64 = 2_000;

/// `clock_timestamp()` in Unix ms, as SQL.
pub const DB_NOW_MS: &str = "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint";

/// This replica's view of the database's clock.
pub struct DbClock {
    local: LocalClock,
    offset_ms: AtomicI64,
    measured: AtomicBool,
    last: Mutex<Option<Instant>>,
    metrics: Arc<Metrics>,
}

impl DbClock {
    pub fn new(local: LocalClock, metrics: Arc<Metrics>) -> DbClock {
        DbClock {
            local,
            offset_ms: AtomicI64::new(0),
            measured: AtomicBool::new(false),
            last: Mutex::new(None),
            metrics,
        }
    }

    /// This replica's clock now, Unix ms.
    pub fn local_ms(&self) -> i64 {
        (self.local)()
    }

    /// `db − local`, ms; `None` before the first measurement.
    pub fn offset_ms(&self) -> Option<i64> {
        self.measured.load(Ordering::SeqCst).then(|| self.offset_ms.load(Ordering::SeqCst))
    }

    /// A local time as database time.
    pub fn to_db(&self, local_ms: i64) -> i64 {
        local_ms.saturating_add(self.offset_ms.load(Ordering::SeqCst))
    }

    /// A database time as local time.
    pub fn to_local(&self, db_ms: i64) -> i64 {
        db_ms.saturating_sub(self.offset_ms.load(Ordering::SeqCst))
    }

    /// The database's time now, as this replica best knows it.
    pub fn db_now_ms(&self) -> i64 {
        self.to_db(self.local_ms())
    }

    /// Measures the offset on `client` when the last measurement is [`MEASURE_EVERY`] old.
    pub async fn refresh(&self, client: &Object) -> Result<(), StoreError> {
        {
            let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
            if last.is_some_and(|t| t.elapsed() < MEASURE_EVERY) {
                return Ok(());
            }
            *last = Some(Instant::now());
        }
        let sql = format!("SELECT {DB_NOW_MS}");
        let before = self.local_ms();
        let db: i64 = client.query_one(&client.prepare_cached(&sql).await?, &[]).await?.get(0);
        let after = self.local_ms();
        self.adopt(db, before, after);
        Ok(())
    }

    /// Takes a sample (database time `db` read between local `before` and `after`).
    fn adopt(&self, db: i64, before: i64, after: i64) {
        let first = !self.measured.load(Ordering::SeqCst);
        if after - before > MAX_SAMPLE_RTT_MS && !first {
            return;
        }
        let raw = db - (before + after) / 2;
        let current = self.offset_ms.load(Ordering::SeqCst);
        if first || (raw - current).abs() > RESOLUTION_MS {
            let sample = (raw as f64 / RESOLUTION_MS as f64).round() as i64 * RESOLUTION_MS;
            self.offset_ms.store(sample, Ordering::SeqCst);
            self.measured.store(true, Ordering::SeqCst);
            self.metrics.store_clock_skew.set(sample as f64 / 1000.0);
            if sample.abs() > WARN_MS {
                tracing::warn!(
                    skew_ms = sample,
                    "this replica's clock is off from PostgreSQL's; the database's clock decides leases and due times (check NTP)"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clock() -> DbClock {
        DbClock::new(Arc::new(|| 0), Arc::new(Metrics::new()))
    }

    #[test]
    fn the_offset_follows_the_database_and_ignores_changes_within_the_resolution() {
        let c = clock();
        assert_eq!(c.offset_ms(), None);
        // Local 1000 and 1010 around a database reading of 121037: 121037 − 1005 = 120032,
        // kept as 120000 (steps of 100 ms).
        c.adopt(121_037, 1_000, 1_010);
        assert_eq!(c.offset_ms(), Some(120_000));
        assert_eq!(c.to_db(5_000), 125_000);
        assert_eq!(c.to_local(125_000), 5_000);
        // 80 ms off: noise, kept.
        c.adopt(121_080, 1_000, 1_000);
        assert_eq!(c.offset_ms(), Some(120_000));
        // The clock was stepped back by a minute: adopted (60000 differs by more than 250).
        c.adopt(61_000, 1_000, 1_000);
        assert_eq!(c.offset_ms(), Some(60_000));
        // 3 ms and 40 ms off 0 both round to 0.
        let (d, e) = (clock(), clock());
        d.adopt(1_003, 1_000, 1_000);
        e.adopt(960, 1_000, 1_000);
        assert_eq!((d.offset_ms(), e.offset_ms()), (Some(0), Some(0)));
        // A sample with a 2 s round trip is skipped.
        c.adopt(0, 1_000, 3_000);
        assert_eq!(c.offset_ms(), Some(60_000));
        assert_eq!(c.to_db(i64::MAX), i64::MAX);
    }
}
