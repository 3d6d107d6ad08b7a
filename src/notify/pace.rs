//! Sending at a vendor's documented rate, so that a storm of notices waits in culprit
//! instead of being refused with 429 (a 429 still goes through the delivery loop's retry).
//!
//! Each destination names its limit as a constant with the documentation link, in its own
//! module; this module only keeps time:
//!
//! * [`Pacer`]: requests of one scope (in the order they ask: the lock is fair) at least an interval apart (one per
//!   `window / limit`: a vendor counting N per window, sliding or fixed, never sees more).
//!   [`shared`] gives every destination of the process with the same scope (a PagerDuty
//!   routing key, a Mattermost server) the same pacer.
//! * [`Bucket`]: a vendor that says on each answer what is left (Discord's
//!   `X-RateLimit-Remaining` and `X-RateLimit-Reset-After`): one request of the scope at a
//!   time, and none while the vendor said the bucket is empty.
//!
//! Within one process the pacers above keep time. Replicas sharing a destination (on
//! PostgreSQL) also take each turn from a [`Ledger`] the delivery loop lends the send
//! ([`scoped`]): the next slot of the scope is reserved in the database, by its clock, so
//! three replicas posting to one channel post as one would. Without a ledger (SQLite, the
//! CLI, a notifier tested alone), or when the ledger cannot answer within
//! [`LEDGER_DEADLINE`], the process's own pacing holds alone.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, LazyLock, Weak};
use std::time::Duration;

use futures::future::BoxFuture;
use reqwest::header::HeaderMap;
use tokio::sync::{Mutex, MutexGuard};
use tokio::time::Instant;

/// Slots shared by every replica: `reserve(scope, interval)` takes the scope's next slot,
/// at least `interval` after the one reserved before it, and answers how long to wait for
/// it from now (`None`: the ledger could not answer).
pub type Ledger = Arc<dyn Fn(String, Duration) -> BoxFuture<'static, Option<Duration>> + Send + Sync>;

/// The longest a turn waits for the ledger's answer; past it the turn goes by the
/// process's own pacing (a slow database delays no notice by more than this).
pub const LEDGER_DEADLINE: Duration = Duration::from_secs(2);

/// The longest a ledger's slot is waited for: each replica reserves one slot of a scope at
/// a time ([`across`]), so a longer wait means a clock or a row gone wrong, not a queue
/// (60 replicas at one post a second).
pub const MAX_LEDGER_WAIT: Duration = Duration::from_secs(60);

tokio::task_local! {
    static LEDGER: Ledger;
}

/// Runs `send` with `ledger` as the replicas' shared pacing.
pub async fn scoped<F: Future>(ledger: Ledger, send: F) -> F::Output {
    LEDGER.scope(ledger, send).await
}

/// Waits for `scope`'s next slot in the replicas' ledger, if this task has one; at once
/// otherwise. Call it while holding the process's own turn of the scope (a lock), so that
/// a replica holds at most one reservation of a scope at a time and the slots reserved
/// ahead stay within replicas × interval (hence [`MAX_LEDGER_WAIT`]).
pub async fn across(scope: &str, interval: Duration) {
    let Ok(ledger) = LEDGER.try_with(Arc::clone) else { return };
    match tokio::time::timeout(LEDGER_DEADLINE, ledger(scope.to_string(), interval)).await {
        Ok(Some(wait)) => tokio::time::sleep(wait.min(MAX_LEDGER_WAIT)).await,
        Ok(None) | Err(_) => {
            tracing::warn!(scope, "the replicas' pacing ledger did not answer; pacing by this replica alone")
        }
    }
}

/// Turns of one limit's scope, at least `interval` apart, in this process and (with a
/// [`Ledger`]) across replicas.
#[derive(Debug)]
pub struct Pacer {
    interval: Duration,
    last: Mutex<Option<Instant>>,
    /// The scope's name in the ledger (`None`: paced in this process only).
    scope: Option<String>,
}

impl Pacer {
    /// A pacer of this process alone.
    pub fn new(interval: Duration) -> Pacer {
        Pacer { interval, last: Mutex::new(None), scope: None }
    }

    /// A pacer that also takes its turns from the replicas' ledger under `scope`.
    pub fn shared_as(scope: &str, interval: Duration) -> Pacer {
        Pacer { scope: Some(scope.to_string()), ..Pacer::new(interval) }
    }

    /// Waits for this scope's next turn (at once when it had none for `interval`), then
    /// for its slot in the replicas' ledger, holding the turn meanwhile: this process
    /// reserves one slot of the scope at a time.
    pub async fn turn(&self) {
        let mut last = self.last.lock().await;
        if let Some(at) = *last {
            tokio::time::sleep_until(at + self.interval).await;
        }
        if let Some(scope) = &self.scope {
            across(scope, self.interval).await;
        }
        *last = Some(Instant::now());
    }

    pub fn interval(&self) -> Duration {
        self.interval
    }
}

/// Turns per key within one scope (the edits of one incident summary), at least
/// `interval` apart per key, in this process and through the ledger under `scope:key`.
#[derive(Debug)]
pub struct KeyedPacer {
    scope: String,
    interval: Duration,
    /// The slot last reserved per key.
    next: std::sync::Mutex<HashMap<String, Instant>>,
}

impl KeyedPacer {
    pub fn new(scope: &str, interval: Duration) -> KeyedPacer {
        KeyedPacer { scope: scope.to_string(), interval, next: Default::default() }
    }

    /// Waits for `key`'s next turn.
    pub async fn turn(&self, key: &str) {
        let now = Instant::now();
        let slot = {
            let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
            let slot = next.get(key).map_or(now, |t| (*t + self.interval).max(now));
            next.insert(key.to_string(), slot);
            // Keys not used for a while (finished incidents) are forgotten.
            next.retain(|_, t| now.saturating_duration_since(*t) < self.interval * 20);
            slot
        };
        tokio::time::sleep_until(slot).await;
        across(&format!("{}:{key}", self.scope), self.interval).await;
    }
}

/// Pacers by scope, alive while a destination holds them.
static SHARED: LazyLock<std::sync::Mutex<HashMap<String, Weak<Pacer>>>> = LazyLock::new(Default::default);

/// The pacer of `scope` (e.g. `pagerduty:<hash of the routing key>`), shared with every
/// destination of this process that holds the same scope, and with the other replicas
/// through the ledger; made with `interval` when none does. Never put a secret in `scope` as it is: hash it ([`scope_of_secret`]).
pub fn shared(scope: &str, interval: Duration) -> Arc<Pacer> {
    let mut map = SHARED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(p) = map.get(scope).and_then(Weak::upgrade) {
        return p;
    }
    map.retain(|_, w| w.strong_count() > 0);
    let pacer = Arc::new(Pacer::shared_as(scope, interval));
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

    /// A ledger kept in memory, as the database keeps it: the next free slot per scope.
    fn memory_ledger() -> Ledger {
        let next: Arc<std::sync::Mutex<HashMap<String, Instant>>> = Arc::default();
        Arc::new(move |scope, interval| {
            let next = next.clone();
            Box::pin(async move {
                let now = Instant::now();
                let mut next = next.lock().unwrap();
                let slot = next.get(&scope).map_or(now, |t| (*t).max(now));
                next.insert(scope, slot + interval);
                Some(slot - now)
            })
        })
    }

    #[tokio::test(start_paused = true)]
    async fn two_replicas_pacing_one_scope_through_the_ledger_take_turns_an_interval_apart() {
        let ledger = memory_ledger();
        // Two processes: two pacers of the same scope that know nothing of each other.
        let replicas = [
            Arc::new(Pacer::shared_as("pagerduty:k", Duration::from_millis(500))),
            Arc::new(Pacer::shared_as("pagerduty:k", Duration::from_millis(500))),
        ];
        let start = Instant::now();
        let turns: Vec<_> = (0..6)
            .map(|i| {
                let (p, l) = (replicas[i % 2].clone(), ledger.clone());
                tokio::spawn(scoped(l, async move {
                    p.turn().await;
                    Instant::now()
                }))
            })
            .collect();
        let mut at = Vec::new();
        for t in turns {
            at.push(t.await.unwrap() - start);
        }
        at.sort();
        // Six turns of one scope, three on each replica, all asked at 0: the ledger spaces
        // all six, 0, 0.5, ..., 2.5 s (each replica alone would have let two go at 0).
        let expected: Vec<Duration> = (0..6).map(|i| Duration::from_millis(500 * i)).collect();
        assert_eq!(at, expected);
    }

    #[tokio::test(start_paused = true)]
    async fn a_ledger_that_does_not_answer_delays_a_turn_by_its_deadline_only() {
        let silent: Ledger = Arc::new(|_, _| Box::pin(futures::future::pending()));
        let pacer = Pacer::shared_as("mattermost:x", Duration::from_millis(100));
        let start = Instant::now();
        scoped(silent, pacer.turn()).await;
        assert_eq!(Instant::now() - start, LEDGER_DEADLINE);
        // Outside a scope (the CLI, SQLite) no ledger is asked.
        let start = Instant::now();
        Pacer::shared_as("mattermost:y", Duration::from_millis(100)).turn().await;
        assert_eq!(Instant::now() - start, Duration::ZERO);
    }
}
