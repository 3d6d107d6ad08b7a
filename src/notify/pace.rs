//! Sending at a vendor's documented rate, so that a storm of notices waits in culprit
//! instead of being refused with 429 (a 429 still goes through the delivery loop's retry).
//!
//! Each destination names its limit as a constant with the documentation link, in its own
//! module; this module only keeps time:
//!
//! * [`pace`] / [`Pacer`]: requests of one scope at least an interval apart (one per
//!   `window / limit`: a vendor counting N per window, sliding or fixed, never sees more).
//!   [`shared`] gives every destination of the process with the same scope (a PagerDuty
//!   routing key, a Mattermost server) the same pacer.
//! * [`Bucket`]: a vendor that says on each answer what is left (Discord's
//!   `X-RateLimit-Remaining` and `X-RateLimit-Reset-After`): one request of the scope at a
//!   time, and none while the vendor said the bucket is empty.
//!
//! Pacing holds within one process: replicas sharing a destination each keep their own.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Weak};
use std::time::Duration;

use reqwest::header::HeaderMap;
use tokio::sync::{Mutex, MutexGuard};
use tokio::time::Instant;

/// Waits until `interval` has passed since the last turn recorded in `last`, then records
/// now. Turns are taken in the order they are asked for (the lock is fair).
pub(crate) async fn pace(last: &Mutex<Option<Instant>>, interval: Duration) {
    let mut last = last.lock().await;
    if let Some(at) = *last {
        tokio::time::sleep_until(at + interval).await;
    }
    *last = Some(Instant::now());
}

/// Turns of one limit's scope, at least `interval` apart.
#[derive(Debug)]
pub struct Pacer {
    interval: Duration,
    last: Mutex<Option<Instant>>,
}

impl Pacer {
    pub fn new(interval: Duration) -> Pacer {
        Pacer { interval, last: Mutex::new(None) }
    }

    /// Waits for this scope's next turn (at once when it had none for `interval`).
    pub async fn turn(&self) {
        pace(&self.last, self.interval).await;
    }

    pub fn interval(&self) -> Duration {
        self.interval
    }
}

/// Pacers by scope, alive while a destination holds them.
static SHARED: LazyLock<std::sync::Mutex<HashMap<String, Weak<Pacer>>>> = LazyLock::new(Default::default);

/// The pacer of `scope` (e.g. `pagerduty:<hash of the routing key>`), shared with every
/// destination of this process that holds the same scope; made with `interval` when none
/// does. Never put a secret in `scope` as it is: hash it ([`scope_of_secret`]).
pub fn shared(scope: &str, interval: Duration) -> Arc<Pacer> {
    let mut map = SHARED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(p) = map.get(scope).and_then(Weak::upgrade) {
        return p;
    }
    map.retain(|_, w| w.strong_count() > 0);
    let pacer = Arc::new(Pacer::new(interval));
    map.insert(scope.to_string(), Arc::downgrade(&pacer));
    pacer
}

/// A scope named by a secret (a routing key): `kind:` and the first 16 hexadecimal digits
/// of its SHA-256, so that equal secrets share a pacer and none is kept as it is.
pub fn scope_of_secret(kind: &str, secret: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(secret.as_bytes());
    format!("{kind}:{}", &hex::encode(digest)[..16])
}

/// The most a vendor's answer may hold back the next request of its bucket: a longer
/// reset is capped here (an answer that says days is not believed; a 429 still retries).
pub const MAX_BUCKET_HOLD: Duration = Duration::from_secs(3600);

/// A rate-limit bucket the vendor reports on: one request at a time, each after the reset
/// the previous answer announced when it left the bucket empty.
#[derive(Debug, Default)]
pub struct Bucket {
    next: Mutex<Option<Instant>>,
}

/// The bucket's turn: held until its answer is read ([`BucketTurn::answered`]).
pub struct BucketTurn<'a>(MutexGuard<'a, Option<Instant>>);

impl Bucket {
    /// Waits until no other request of the bucket is in flight and the vendor's last
    /// announced reset (if the bucket was empty) has passed.
    pub async fn enter(&self) -> BucketTurn<'_> {
        let mut next = self.next.lock().await;
        if let Some(at) = next.take() {
            tokio::time::sleep_until(at).await;
        }
        BucketTurn(next)
    }
}

impl BucketTurn<'_> {
    /// Records what the answer's headers say of the bucket ([`empty_for`]).
    pub fn answered(mut self, headers: &HeaderMap) {
        *self.0 = empty_for(headers).map(|d| Instant::now() + d);
    }
}

/// How long the bucket stays empty by Discord's headers
/// (<https://discord.com/developers/docs/topics/rate-limits#header-format>): when
/// `X-RateLimit-Remaining` is 0, `X-RateLimit-Reset-After` (seconds, a float), capped at
/// [`MAX_BUCKET_HOLD`]; `None` when requests are left or the headers are missing or not
/// numbers. Pure.
pub fn empty_for(headers: &HeaderMap) -> Option<Duration> {
    let value = |name: &str| headers.get(name)?.to_str().ok()?.trim().parse::<f64>().ok();
    let remaining = value("x-ratelimit-remaining")?;
    let after = value("x-ratelimit-reset-after").filter(|s| s.is_finite() && *s >= 0.0)?;
    (remaining <= 0.0).then(|| Duration::from_secs_f64(after).min(MAX_BUCKET_HOLD))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        pairs.iter().map(|(k, v)| (reqwest::header::HeaderName::from_static(k), v.parse().unwrap())).collect()
    }

    #[test]
    fn an_empty_bucket_holds_for_the_reset_the_answer_gives_and_nothing_else_holds() {
        let empty = headers(&[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset-after", "1.25")]);
        assert_eq!(empty_for(&empty), Some(Duration::from_millis(1250)));
        let left = headers(&[("x-ratelimit-remaining", "3"), ("x-ratelimit-reset-after", "1.25")]);
        assert_eq!(empty_for(&left), None);
        assert_eq!(empty_for(&headers(&[("x-ratelimit-remaining", "0")])), None);
        let odd = headers(&[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset-after", "-1")]);
        assert_eq!(empty_for(&odd), None);
        let days = headers(&[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset-after", "900000")]);
        assert_eq!(empty_for(&days), Some(MAX_BUCKET_HOLD));
    }

    #[test]
    fn equal_scopes_share_a_pacer_while_it_is_held_and_a_secret_is_only_hashed() {
        let scope = scope_of_secret("pagerduty", "R0UT1NGKEY5ECRET0123456789abcdef");
        assert!(scope.starts_with("pagerduty:") && !scope.contains("R0UT1NG"), "{scope}");
        assert_eq!(scope.len(), "pagerduty:".len() + 16);
        let a = shared(&scope, Duration::from_millis(500));
        let b = shared(&scope, Duration::from_secs(9));
        assert!(Arc::ptr_eq(&a, &b) && b.interval() == Duration::from_millis(500));
        let other = shared(&scope_of_secret("pagerduty", "another key"), Duration::from_millis(500));
        assert!(!Arc::ptr_eq(&a, &other));
    }

    #[tokio::test(start_paused = true)]
    async fn turns_of_one_pacer_are_an_interval_apart_however_many_ask_at_once() {
        let pacer = Arc::new(Pacer::new(Duration::from_millis(500)));
        let start = Instant::now();
        let turns: Vec<_> = (0..5)
            .map(|_| {
                let p = pacer.clone();
                tokio::spawn(async move {
                    p.turn().await;
                    Instant::now()
                })
            })
            .collect();
        let mut at = Vec::new();
        for t in turns {
            at.push(t.await.unwrap() - start);
        }
        at.sort();
        // Five at once: 0, 0.5, 1.0, 1.5 and 2.0 s (the clock is paused: exact).
        let expected: Vec<Duration> = (0..5).map(|i| Duration::from_millis(500 * i)).collect();
        assert_eq!(at, expected);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_waits_for_the_reset_an_empty_bucket_announced() {
        let bucket = Bucket::default();
        let start = Instant::now();
        bucket.enter().await.answered(&headers(&[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset-after", "2")]));
        let second = bucket.enter().await;
        assert_eq!(Instant::now() - start, Duration::from_secs(2));
        second.answered(&headers(&[("x-ratelimit-remaining", "4"), ("x-ratelimit-reset-after", "2")]));
        let _third = bucket.enter().await;
        assert_eq!(Instant::now() - start, Duration::from_secs(2), "requests left: no wait");
    }
}
