//! Every wait of the service in one place: delivery backoff, diagnosis retries, and the
//! backoff of a store that fails. Backoffs double from a minimum to a cap and carry
//! jitter ("equal jitter": half the delay fixed, half random), so rows that failed
//! together do not retry together.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The longest `Retry-After` honoured: a destination asking for more (or a misread date)
/// still gets a try within the hour, inside `notify.retry.give_up_after` by default.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// Extra wait added to a `Retry-After`, at most this share of it: rows told to wait alike
/// spread out instead of arriving together when it ends.
pub const RETRY_AFTER_SPREAD: f64 = 0.1;

/// First wait after a failed diagnosis (the metrics backend did not answer).
pub const DIAGNOSIS_RETRY_MIN: Duration = Duration::from_secs(1);

/// Longest wait between two diagnosis attempts, within `service.diagnose_retry_for`.
pub const DIAGNOSIS_RETRY_MAX: Duration = Duration::from_secs(30);

/// First wait after a store operation failed (disk full, busy, I/O).
pub const STORE_RETRY_MIN: Duration = Duration::from_millis(100);

/// Longest wait between two store attempts: a freed disk is noticed within this.
pub const STORE_RETRY_MAX: Duration = Duration::from_secs(5);

/// A number in `[0, 1)`, different at every call (std's randomly keyed SipHash over a
/// counter; no cryptographic use).
pub fn jitter() -> f64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// `min · 2^(attempts−1)` capped at `max`, then jittered into its upper half by `j` ∈ [0, 1).
pub fn backoff(attempts: i64, min: Duration, max: Duration, j: f64) -> Duration {
    let exp = min.saturating_mul(1u32 << attempts.clamp(1, 20).saturating_sub(1) as u32).min(max);
    exp / 2 + exp.mul_f64(j.clamp(0.0, 1.0)) / 2
}

/// The wait before delivery attempt `attempts + 1`: the destination's `Retry-After` when
/// given (capped at [`MAX_RETRY_AFTER`], plus up to [`RETRY_AFTER_SPREAD`] of it), else
/// [`backoff`] between `notify.retry.min` and `.max`.
pub fn delivery_delay(attempts: i64, retry_after: Option<Duration>, min: Duration, max: Duration, j: f64) -> Duration {
    match retry_after {
        Some(d) => {
            let d = d.min(MAX_RETRY_AFTER);
            d + d.mul_f64(RETRY_AFTER_SPREAD * j.clamp(0.0, 1.0))
        }
        None => backoff(attempts, min, max, j),
    }
}

/// The wait before the next diagnosis attempt after `attempts` failures.
pub fn diagnosis_delay(attempts: i64, j: f64) -> Duration {
    backoff(attempts + 1, DIAGNOSIS_RETRY_MIN, DIAGNOSIS_RETRY_MAX, j)
}

/// Backoff of a loop whose store operation fails: doubles from [`STORE_RETRY_MIN`] to
/// [`STORE_RETRY_MAX`] while it fails, starts over once it works.
#[derive(Debug, Default)]
pub struct StoreBackoff {
    failures: i64,
}

impl StoreBackoff {
    /// The wait after one more failure.
    pub fn failed(&mut self) -> Duration {
        self.failures += 1;
        backoff(self.failures, STORE_RETRY_MIN, STORE_RETRY_MAX, jitter())
    }

    /// The operation worked.
    pub fn reset(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_the_cap_with_jitter_in_its_upper_half() {
        let (min, max) = (Duration::from_secs(1), Duration::from_secs(60));
        // Without jitter (j = 0) half of 1, 2, 4, …, 60; with the most (j → 1) all of it.
        assert_eq!(delivery_delay(1, None, min, max, 0.0), Duration::from_millis(500));
        assert_eq!(delivery_delay(3, None, min, max, 0.0), Duration::from_secs(2));
        assert_eq!(delivery_delay(3, None, min, max, 1.0), Duration::from_secs(4));
        assert_eq!(delivery_delay(10, None, min, max, 0.0), Duration::from_secs(30));
        assert_eq!(delivery_delay(10, None, min, max, 1.0), Duration::from_secs(60));
        for _ in 0..1000 {
            let d = delivery_delay(4, None, min, max, jitter());
            // attempt 4: 8 s, jittered into [4 s, 8 s).
            assert!(d >= Duration::from_secs(4) && d < Duration::from_secs(8), "{d:?}");
        }
    }

    #[test]
    fn retry_after_wins_up_to_an_hour_and_is_spread_by_at_most_a_tenth() {
        let (min, max) = (Duration::from_secs(1), Duration::from_secs(60));
        assert_eq!(delivery_delay(1, Some(Duration::from_secs(7)), min, max, 0.0), Duration::from_secs(7));
        // 7 s + 10 % · 0.5 = 7.35 s.
        assert_eq!(delivery_delay(1, Some(Duration::from_secs(7)), min, max, 0.5), Duration::from_millis(7350));
        assert_eq!(delivery_delay(1, Some(Duration::from_secs(86_400)), min, max, 0.0), MAX_RETRY_AFTER);
    }

    #[test]
    fn jitter_varies_and_stays_below_one() {
        let draws: Vec<f64> = (0..1000).map(|_| jitter()).collect();
        assert!(draws.iter().all(|j| (0.0..1.0).contains(j)));
        let distinct: std::collections::BTreeSet<u64> = draws.iter().map(|j| j.to_bits()).collect();
        assert!(distinct.len() > 990, "{} distinct of 1000", distinct.len());
        // Both halves are drawn.
        assert!(draws.iter().any(|j| *j < 0.5) && draws.iter().any(|j| *j >= 0.5));
    }

    #[test]
    fn a_failing_store_is_retried_sooner_than_five_seconds_and_starts_over_once_it_works() {
        let mut b = StoreBackoff::default();
        let waits: Vec<Duration> = (0..12).map(|_| b.failed()).collect();
        // 100 ms → [50, 100) ms; the cap 5 s → [2.5, 5) s.
        assert!(waits[0] >= Duration::from_millis(50) && waits[0] < Duration::from_millis(100), "{waits:?}");
        assert!(waits.iter().all(|w| *w < STORE_RETRY_MAX), "{waits:?}");
        assert!(waits[11] >= STORE_RETRY_MAX / 2, "{waits:?}");
        b.reset();
        assert!(b.failed() < Duration::from_millis(100));
    }

    #[test]
    fn diagnosis_retries_wait_one_second_first_and_at_most_thirty() {
        assert!(diagnosis_delay(0, 0.999) <= Duration::from_secs(1));
        assert!(diagnosis_delay(0, 0.0) >= Duration::from_millis(500));
        assert!(diagnosis_delay(50, 0.999) <= DIAGNOSIS_RETRY_MAX);
    }
}
