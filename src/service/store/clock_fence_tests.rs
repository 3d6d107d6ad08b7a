//! PostgreSQL replicas whose clocks disagree with the database's (the clock each store
//! reads is injected: the system's, two minutes fast or slow, as `libfaketime` made it in
//! the attack), and sends fenced by their claim's token. A real PostgreSQL, the store
//! tests' shared server.

use super::*;
use crate::config::Millis;

/// Two minutes, the attack's skew.
const SKEW: i64 = 120_000;

/// A replica whose clock is `offset_ms` off the system's.
fn skewed(f: &Fx, offset_ms: i64) -> (Store, Arc<Metrics>) {
    let cfg = StoreConfig { lease: Millis(30_000), ..f.config() };
    let m = Arc::new(Metrics::new());
    let local: LocalClock = Arc::new(move || jiff::Timestamp::now().as_millisecond() + offset_ms);
    (Store::open_with_clock(&cfg, m.clone(), local).unwrap(), m)
}

/// Now by a clock `offset_ms` off the system's.
fn now(offset_ms: i64) -> i64 {
    jiff::Timestamp::now().as_millisecond() + offset_ms
}

#[tokio::test]
async fn a_replica_two_minutes_fast_takes_no_work_early_and_one_two_minutes_slow_takes_it_when_due() {
    let Some(f) = Fx::postgres() else { return };
    let (normal, _) = skewed(&f, 0);
    let (fast, fast_metrics) = skewed(&f, SKEW);
    let (slow, _) = skewed(&f, -SKEW);
    // A replica with the right time takes a webhook in: due in COALESCE (10 s).
    normal.enqueue(vec![intake("a", "g")], now(0), COALESCE, MAX).await.unwrap();
    // By the fast replica's own clock that was due 110 s ago; by the database's it is due
    // in 10 s: not yet (with its own clock it took every row at once: 1.9× the diagnoses).
    assert_eq!(fast.claim_work(now(SKEW)).await.unwrap(), None);
    // It sleeps until then by its own clock: at most COALESCE from its now, not -110 s.
    let wait = fast.next_work_ms().await.unwrap().unwrap() - now(SKEW);
    assert!((1..=COALESCE + 100).contains(&wait), "the fast replica would wait {wait} ms");
    // The slow replica, COALESCE later by its clock: due (by its own clock it was due in
    // 130 s: it did nothing).
    let item = slow.claim_work(now(-SKEW) + COALESCE).await.unwrap().expect("due by the database's clock");
    // Its lease (30 s from the database's now) holds against the fast replica, whose own
    // clock is past it by 90 s.
    assert_eq!(fast.claim_work(now(SKEW) + COALESCE).await.unwrap(), None);
    let done = slow
        .complete(&item, completion(vec![("slack", notice(NoticeKind::Verdict, "g", "1"))], now(-SKEW)))
        .await
        .unwrap();
    assert_eq!(done.notices, 1, "the slow replica still held its diagnosis");
    // The notice is due at once for both (stored in the database's time).
    let row = fast.claim_delivery("slack", now(SKEW)).await.unwrap().expect("due");
    assert!(fast.fence(&row, now(SKEW), 10_000).await.unwrap());
    // The skew is measured (database minus local), to within the clock's step (100 ms).
    let skew = fast.clock_skew_ms().unwrap();
    assert!((skew + SKEW).abs() < 250, "fast: {skew}");
    assert!((slow.clock_skew_ms().unwrap() - SKEW).abs() < 250);
    assert!(normal.clock_skew_ms().unwrap().abs() < 250);
    let gauge = metric(&fast_metrics, "culprit_store_clock_skew_seconds ");
    assert!((gauge + 120.0).abs() < 0.25, "{gauge}");
}

#[tokio::test]
async fn a_replica_that_lost_its_lease_is_fenced_from_sending_and_recording_and_the_new_holder_is_not() {
    let Some(f) = Fx::postgres() else { return };
    let (lease, margin) = (10_000, 20_000);
    let (a, b) = (replica(&f, lease), replica(&f, lease));
    with_notices(&a, "a", vec![("slack", notice(NoticeKind::Verdict, "g", "1"))]).await;
    let t = T0 + COALESCE;
    let held = a.claim_delivery("slack", t).await.unwrap().unwrap();
    // Right before its send: held, and the lease now lasts the margin (20 s), longer than
    // the lease (10 s).
    assert!(a.fence(&held, t, margin).await.unwrap());
    assert_eq!(b.claim_delivery("slack", t + margin - 1).await.unwrap(), None);
    // `a` stalls past it; `b` reaps the send and, 10 s later (the owner's grace), takes it
    // over under the next token.
    assert_eq!(b.claim_delivery("slack", t + margin + 1).await.unwrap(), None);
    let t = t + margin + 10_001;
    let taken = b.claim_delivery("slack", t).await.unwrap().unwrap();
    assert_eq!((taken.id, taken.token, taken.unsure), (held.id, held.token + 1, true));
    // `a` resumes: its check fails (it drops the send) and its outcome is not stored.
    assert!(!a.fence(&held, t + 1, margin).await.unwrap());
    a.delivered(&held, None, t + 1).await.unwrap();
    a.retry_delivery(&held, t + 1, "late", true).await.unwrap();
    assert_eq!(f.column("SELECT state FROM outbox"), ["sending"], "neither recorded sent nor put back by `a`");
    // `b` holds it and records it.
    assert!(b.fence(&taken, t + 2, margin).await.unwrap());
    b.delivered(&taken, None, t + 2).await.unwrap();
    assert_eq!(f.column("SELECT state FROM outbox"), ["sent"]);
}

#[tokio::test]
async fn a_lease_that_expired_is_lost_but_its_owner_still_stores_a_send_that_went_before_another_takes_it() {
    let Some(f) = Fx::postgres() else { return };
    let lease = 10_000;
    let a = replica(&f, lease);
    with_notices(&a, "a", vec![("slack", notice(NoticeKind::Verdict, "g", "1"))]).await;
    let t = T0 + COALESCE;
    let held = a.claim_delivery("slack", t).await.unwrap().unwrap();
    // Paused (no renewal, no check) for longer than the lease: the check refuses.
    assert!(!a.fence(&held, t + lease + 1, 0).await.unwrap());
    // Its outcome is still stored while no replica took the row over (the same token),
    // even once another replica reaped it, within the 10 s it then waits: a send that did
    // arrive (PostgreSQL was down past the lease while it was on the wire) is not made
    // again.
    let b = replica(&f, lease);
    assert_eq!(b.claim_delivery("slack", t + lease + 1).await.unwrap(), None);
    a.delivered(&held, None, t + lease + 2).await.unwrap();
    assert_eq!(f.column("SELECT state FROM outbox"), ["sent"]);
    assert_eq!(b.claim_delivery("slack", t + lease + 20_000).await.unwrap(), None);
}
