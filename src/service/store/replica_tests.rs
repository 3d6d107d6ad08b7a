//! PostgreSQL only: replicas sharing one database (migrations, claims, leases, fencing).

use super::*;

async fn claim_all(s: &Store) -> Vec<WorkItem> {
    let mut got = Vec::new();
    while let Some(item) = s.claim_work(T0 + COALESCE).await.unwrap() {
        got.push(item);
        tokio::task::yield_now().await;
    }
    got
}

async fn deliver_all(s: &Store) -> Vec<i64> {
    let mut got = Vec::new();
    while let Some(row) = s.claim_delivery("slack", T0 + COALESCE).await.unwrap() {
        s.delivered(&row, None, T0 + COALESCE).await.unwrap();
        got.push(row.id);
    }
    got
}

/// A second replica on the same database (its own pool and owner name).
pub(super) fn replica(f: &Fx, lease_ms: i64) -> Store {
    let cfg = StoreConfig { lease: crate::config::Millis(lease_ms), ..f.config() };
    Store::open(&cfg, Arc::new(Metrics::new())).unwrap()
}

#[tokio::test]
async fn replicas_reserving_one_pacing_scope_at_once_get_one_slot_each_an_interval_apart() {
    let Some(f) = Fx::postgres() else { return };
    let stores: Vec<Store> = (0..3).map(|_| f.open()).collect();
    let scope = "slack:0123456789abcdef:#alerts";
    // Warm each replica's pool, so that the six reservations below are made together.
    for s in &stores {
        assert_eq!(s.reserve_pace("warm-up", 1).await.unwrap().map(|w| w <= 1), Some(true));
    }
    let db_now =
        || f.column("SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT")[0].parse::<i64>().unwrap();
    let before = db_now();
    let asked = stores.iter().flat_map(|s| [s.reserve_pace(scope, 1_000), s.reserve_pace(scope, 1_000)]);
    let mut waits: Vec<i64> = futures::future::join_all(asked).await.into_iter().map(|w| w.unwrap().unwrap()).collect();
    let after = db_now();
    waits.sort();
    // Six reservations, two from each replica, 1 s apart: one slot each, the first at the
    // database's time of the first reservation (between `before` and `after`), the last
    // reserved 5 s after it, so the row's next free slot is 6 s after the first.
    let next: i64 = f.column(&format!("SELECT next_ms FROM pace_slots WHERE scope = '{scope}'"))[0].parse().unwrap();
    let first = next - 6_000;
    assert!((before..=after).contains(&first), "first slot {first} not within {before}..={after}");
    // Each wait is counted from its own statement, made between `before` and `after`: the
    // i-th slot is first + i s, so its wait is within that spread of i s.
    let spread = after - before;
    for (i, wait) in waits.iter().enumerate() {
        let slot = i as i64 * 1_000;
        assert!(
            (slot - spread..=slot + spread).contains(wait),
            "slot {i}: waits {wait} ms of {waits:?} (spread {spread})"
        );
    }
    // Another scope waits for nothing.
    assert_eq!(stores[0].reserve_pace("slack:0123456789abcdef:#other", 1_000).await.unwrap(), Some(0));
}

#[tokio::test]
async fn replicas_starting_at_once_migrate_the_database_once() {
    let Some(f) = Fx::postgres() else { return };
    let stores: Vec<Store> = (0..4).map(|_| f.open()).collect();
    let depths = futures::future::join_all(stores.iter().map(|s| s.depths())).await;
    assert!(depths.iter().all(|d| d.as_ref().is_ok_and(|d| *d == Depths::default())), "{depths:?}");
    // Each migration once: 1 (the schema), 2 (fairness), 3 (fencing tokens), 4 (priorities),
    // 5 (incident rows), 6 (pacing slots).
    assert_eq!(f.column("SELECT version FROM culprit_schema ORDER BY version"), ["1", "2", "3", "4", "5", "6"]);
}

#[tokio::test]
async fn two_replicas_claiming_at_once_never_claim_the_same_diagnosis_or_notice() {
    let Some(f) = Fx::postgres() else { return };
    let (a, b) = (f.open(), f.open());
    // 40 jobs → 40 diagnoses, claimed by both replicas racing.
    let intakes: Vec<Intake> = (0..40).map(|i| intake(&format!("j{i}"), &format!("g{i}"))).collect();
    stored(&a, intakes, T0).await;
    let (ga, gb) = tokio::join!(claim_all(&a), claim_all(&b));
    let mut ids: Vec<i64> = ga.iter().chain(&gb).map(|i| i.id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 40, "each diagnosis claimed once: {} + {}", ga.len(), gb.len());
    // Each completes its own with one notice per group; then both deliver.
    for (s, items) in [(&a, &ga), (&b, &gb)] {
        for item in items.iter() {
            let g = item.groups.keys().next().unwrap().clone();
            s.complete(item, completion(vec![("slack", notice(NoticeKind::Verdict, &g, &g))], T0 + COALESCE))
                .await
                .unwrap();
        }
    }
    let (da, db) = tokio::join!(deliver_all(&a), deliver_all(&b));
    let mut sent: Vec<i64> = da.iter().chain(&db).copied().collect();
    sent.sort();
    sent.dedup();
    assert_eq!((sent.len(), da.len() + db.len()), (40, 40), "each notice sent once");
}

#[tokio::test]
async fn a_replica_that_dies_hands_its_diagnosis_and_its_send_to_another_once_the_lease_expires() {
    let Some(f) = Fx::postgres() else { return };
    let lease = 10_000;
    let (item_id, row_id) = {
        let dying = replica(&f, lease);
        with_notices(&dying, "a", vec![("slack", notice(NoticeKind::Verdict, "g", "1"))]).await;
        stored(&dying, vec![intake("b", "g1")], T0).await;
        let item = dying.claim_work(T0 + COALESCE).await.unwrap().unwrap();
        stored(&dying, vec![intake("b", "g2")], T0 + COALESCE).await;
        let row = dying.claim_delivery("slack", T0 + COALESCE).await.unwrap().unwrap();
        (item.id, row.id)
        // Dropped: it renews nothing any more.
    };
    let other = replica(&f, lease);
    // While the lease lasts, the rows stay with the replica that claimed them.
    assert_eq!(other.claim_delivery("slack", T0 + COALESCE + lease - 1).await.unwrap(), None);
    assert_eq!(other.claim_work(T0 + COALESCE + lease - 1).await.unwrap(), None);
    // Past it: the diagnosis runs again, merged with the webhook that came meanwhile, and
    // the send is unsure (the destination is asked before sending again).
    let after = T0 + COALESCE + lease + 1;
    let item = other.claim_work(after).await.unwrap().unwrap();
    assert_eq!(item.groups.keys().map(String::as_str).collect::<Vec<_>>(), ["g1", "g2"]);
    assert_ne!(item.id, item_id, "the newer row carries both");
    // The send waits 10 s more (its owner may only be cut off from the database, and
    // would store its outcome first), then goes to the other replica.
    assert_eq!(other.claim_delivery("slack", after).await.unwrap(), None);
    assert_eq!(other.claim_delivery("slack", after + 9_999).await.unwrap(), None);
    let row = other.claim_delivery("slack", after + 10_000).await.unwrap().unwrap();
    assert_eq!((row.id, row.unsure, row.attempts), (row_id, true, 2));
}

#[tokio::test]
async fn a_replica_whose_lease_expired_cannot_store_an_outcome_or_a_delivery() {
    let Some(f) = Fx::postgres() else { return };
    let lease = 10_000;
    let (slow, other) = (replica(&f, lease), replica(&f, lease));
    with_notices(&slow, "a", vec![("slack", notice(NoticeKind::Verdict, "g", "1"))]).await;
    stored(&slow, vec![intake("b", "g1")], T0).await;
    let item = slow.claim_work(T0 + COALESCE).await.unwrap().unwrap();
    let row = slow.claim_delivery("slack", T0 + COALESCE).await.unwrap().unwrap();
    let after = T0 + COALESCE + lease + 1;
    let taken = other.claim_work(after).await.unwrap().unwrap();
    assert_eq!(other.claim_delivery("slack", after).await.unwrap(), None, "reaped, held 10 s for its owner");
    let after = after + 10_000;
    let taken_row = other.claim_delivery("slack", after).await.unwrap().unwrap();
    // The slow replica comes back: its outcome is dropped, its retry changes nothing.
    let late = slow
        .complete(&item, completion(vec![("slack", notice(NoticeKind::Verdict, "g1", "late"))], after))
        .await
        .unwrap();
    assert_eq!(late, Completed { verdict_id: None, notices: 0 });
    slow.retry_delivery(&row, after + 60_000, "timeout", true).await.unwrap();
    // The replica holding them now finishes both.
    other.complete(&taken, completion(vec![], after)).await.unwrap();
    other.delivered(&taken_row, None, after).await.unwrap();
    assert_eq!(other.depths().await.unwrap(), Depths { work: 0, outbox: 0, dead_letters: 0 });
}

#[tokio::test]
async fn the_same_group_from_two_replicas_at_once_is_one_diagnosis() {
    let Some(f) = Fx::postgres() else { return };
    let (a, b) = (f.open(), f.open());
    // Alertmanager HA: both members send the group, each to another replica, at once,
    // twenty times over.
    for round in 0..20 {
        let job = format!("j{round}");
        let (ra, rb) = tokio::join!(stored(&a, vec![intake(&job, "g")], T0), stored(&b, vec![intake(&job, "g")], T0));
        let created =
            [ra, rb].iter().map(|r| if let Enqueued::Stored { created, .. } = r { *created } else { 9 }).sum::<usize>();
        assert_eq!(created, 1, "round {round}: {ra:?} {rb:?}");
    }
    assert_eq!(a.depths().await.unwrap().work, 20);
}

#[test]
fn a_password_written_in_the_url_is_refused_without_showing_it() {
    let text = "[store]\nurl = \"postgres://culprit:hunter2@db:5432/culprit\"\n";
    let e = crate::config::Config::from_toml(text, "c.toml").unwrap_err().to_string();
    assert!(e.contains("store.url holds a password") && !e.contains("hunter2"), "{e}");
    // libpq's query form, which tokio-postgres reads as well (and check-config would print).
    let text = "[store]\nurl = \"postgres://culprit@db:5432/culprit?sslmode=disable&Password=hunter2\"\n";
    let e = crate::config::Config::from_toml(text, "c.toml").unwrap_err().to_string();
    assert!(e.contains("store.url holds a password") && !e.contains("hunter2"), "{e}");
    let ok = "[store]\nurl = \"postgres://culprit@db:5432/culprit\"\npassword = { env = \"CULPRIT_DB_PASSWORD\" }\n";
    assert!(crate::config::Config::from_toml(ok, "c.toml").is_ok());
}
