//! The bytes of backend answers the process may hold at once, across every diagnosis
//! (`prometheus.max_answer_bytes_in_flight`).
//!
//! An answer takes its bytes from the budget as they arrive (all of them at once when its
//! `Content-Length` says how many) and gives them back when it has been parsed (or given
//! up). One that cannot get them within the time its request has left is refused as too
//! large for now, so the collector asks for it in smaller pieces. Waiting holds what the
//! answer has taken so far, so answers can wait on each other: when every answer holding
//! bytes is waiting for more, none would ever move, and the one that would close the circle
//! gives up at once instead (returning its bytes to the others).
//!
//! The semaphore is fair (first come, first served), so a large answer is not starved by
//! small ones.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;

/// A process-wide budget of answer bytes.
#[derive(Debug, Clone)]
pub struct AnswerBudget {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    semaphore: Semaphore,
    total: usize,
    in_use: AtomicUsize,
    peak: AtomicUsize,
    /// Answers holding bytes, and how many of them wait for more.
    holders: Mutex<Holders>,
}

#[derive(Debug, Default)]
struct Holders {
    holding: usize,
    waiting: usize,
}

/// One holder counted as waiting while it lives (a dropped wait is no longer one).
struct Waiting<'a>(&'a Inner);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.holders.lock().expect("not poisoned").waiting -= 1;
    }
}

/// The budget was not free within the time allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exhausted {
    /// Bytes the answer already held, beside the ones it asked for.
    pub held: usize,
    pub asked: usize,
    pub total: usize,
    /// Every other answer holding bytes was waiting too (given up at once), rather than
    /// the time allowed running out.
    pub stuck: bool,
}

impl AnswerBudget {
    /// A budget of `total` bytes (at least 1).
    pub fn new(total: usize) -> Self {
        let total = total.clamp(1, Semaphore::MAX_PERMITS);
        AnswerBudget {
            inner: Arc::new(Inner {
                semaphore: Semaphore::new(total),
                total,
                in_use: AtomicUsize::new(0),
                peak: AtomicUsize::new(0),
                holders: Mutex::new(Holders::default()),
            }),
        }
    }

    /// The bytes of the budget.
    pub fn total(&self) -> usize {
        self.inner.total
    }

    /// Bytes held by answers now.
    pub fn in_use(&self) -> usize {
        self.inner.in_use.load(Ordering::Relaxed)
    }

    /// The most bytes ever held at once.
    pub fn peak(&self) -> usize {
        self.inner.peak.load(Ordering::Relaxed)
    }

    /// An empty hold for one answer; its bytes go back when the last clone is dropped.
    pub fn hold(&self) -> Arc<Held> {
        Arc::new(Held { budget: self.clone(), bytes: AtomicUsize::new(0) })
    }
}

/// The bytes one answer holds.
#[derive(Debug)]
pub struct Held {
    budget: AnswerBudget,
    bytes: AtomicUsize,
}

impl Held {
    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Takes `n` more bytes, waiting at most `wait` for them. An answer never asks for
    /// more than the whole budget (the cap is at most the budget), but if it did it would
    /// be refused at once.
    pub async fn take(&self, n: usize, wait: Duration) -> Result<(), Exhausted> {
        let inner = &self.budget.inner;
        let exhausted = |stuck| Exhausted { held: self.bytes(), asked: n, total: inner.total, stuck };
        if n > inner.total.saturating_sub(self.bytes()) {
            return Err(exhausted(false));
        }
        // `acquire_many` takes a u32: larger amounts are taken in steps (each step is
        // counted as held at once, so giving up returns it).
        let mut left = n;
        while left > 0 {
            let step = left.min(u32::MAX as usize) as u32;
            let permits = match inner.semaphore.try_acquire_many(step) {
                Ok(p) => p,
                Err(_) => {
                    let _waiting = match self.wait_in_turn() {
                        Some(w) => w,
                        None => return Err(exhausted(true)),
                    };
                    match tokio::time::timeout(wait, inner.semaphore.acquire_many(step)).await {
                        Ok(Ok(p)) => p,
                        _ => return Err(exhausted(false)),
                    }
                }
            };
            permits.forget();
            self.record(step as usize);
            left -= step as usize;
        }
        Ok(())
    }

    /// Counts this answer as waiting when it holds bytes; None when every other holder
    /// waits already (nothing would ever come free).
    fn wait_in_turn(&self) -> Option<Option<Waiting<'_>>> {
        let inner = &self.budget.inner;
        if self.bytes() == 0 {
            return Some(None);
        }
        let mut h = inner.holders.lock().expect("not poisoned");
        if h.waiting + 1 >= h.holding {
            return None;
        }
        h.waiting += 1;
        Some(Some(Waiting(inner)))
    }

    fn record(&self, n: usize) {
        let inner = &self.budget.inner;
        if self.bytes.fetch_add(n, Ordering::Relaxed) == 0 {
            inner.holders.lock().expect("not poisoned").holding += 1;
        }
        let now = inner.in_use.fetch_add(n, Ordering::Relaxed) + n;
        inner.peak.fetch_max(now, Ordering::Relaxed);
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let n = *self.bytes.get_mut();
        if n > 0 {
            let inner = &self.budget.inner;
            inner.holders.lock().expect("not poisoned").holding -= 1;
            inner.in_use.fetch_sub(n, Ordering::Relaxed);
            inner.semaphore.add_permits(n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bytes_come_back_when_the_last_holder_goes_and_a_waiter_then_gets_them() {
        let budget = AnswerBudget::new(100);
        let a = budget.hold();
        a.take(70, Duration::from_secs(1)).await.unwrap();
        let shared = a.clone();
        drop(a);
        // 70 held, 30 free: 40 more cannot be had within 10 ms.
        let b = budget.hold();
        let e = b.take(40, Duration::from_millis(10)).await.unwrap_err();
        assert_eq!(e, Exhausted { held: 0, asked: 40, total: 100, stuck: false });
        // The parser's clone goes too: the 70 come back and 40 are taken at once.
        drop(shared);
        assert_eq!(budget.in_use(), 0);
        b.take(40, Duration::ZERO).await.unwrap();
        assert_eq!((budget.in_use(), budget.peak()), (40, 70));
    }

    #[tokio::test]
    async fn more_than_the_whole_budget_is_refused_without_waiting() {
        let budget = AnswerBudget::new(100);
        let a = budget.hold();
        a.take(60, Duration::ZERO).await.unwrap();
        assert_eq!(a.take(41, Duration::from_secs(3600)).await.unwrap_err().held, 60);
        assert_eq!(budget.in_use(), 60);
    }

    #[tokio::test]
    async fn the_answer_that_would_close_a_circle_of_waiting_holders_gives_up_at_once() {
        let budget = AnswerBudget::new(100);
        let (a, b) = (budget.hold(), budget.hold());
        a.take(50, Duration::ZERO).await.unwrap();
        b.take(50, Duration::ZERO).await.unwrap();
        // a waits for 10 more (b holds the rest and may still finish)...
        let waiting = {
            let a = a.clone();
            tokio::spawn(async move { a.take(10, Duration::from_secs(3600)).await })
        };
        while budget.inner.holders.lock().unwrap().waiting == 0 {
            tokio::task::yield_now().await;
        }
        // ...so b, wanting more too, would wait for a forever: it gives up at once, and
        // its 50 let a go on.
        let e = b.take(10, Duration::from_secs(3600)).await.unwrap_err();
        assert_eq!(e, Exhausted { held: 50, asked: 10, total: 100, stuck: true });
        drop(b);
        waiting.await.unwrap().unwrap();
        assert_eq!((a.bytes(), budget.in_use()), (60, 60));
    }
}
