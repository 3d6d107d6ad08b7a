//! Fairness of the queue: known jobs first, senders in turn, unknown jobs capped per
//! sender and in all, never starved. On a real SQLite file and a real PostgreSQL.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::Fx;
use crate::config::{Millis, StoreConfig};
use crate::service::intake::Intake;
use crate::service::metrics::Metrics;
use crate::service::store::{Completion, Enqueued, Prune, Store};

const T0: i64 = 1_800_000_000_000;
const COALESCE: i64 = 10_000;

fn intake(job: &str, sender: &str) -> Intake {
    Intake {
        links: Default::default(),
        job_key: format!("name:{job}"),
        job: job.into(),
        group_key: format!("{{}}:{{job_name=\"{job}\"}}"),
        firing: true,
        firing_set: "s".into(),
        labels: BTreeMap::from([("job_name".to_string(), job.to_string())]),
        sender: sender.into(),
        known: false,
    }
}

fn open(f: &Fx, change: impl FnOnce(&mut StoreConfig)) -> Store {
    let mut cfg = f.config();
    change(&mut cfg);
    Store::open(&cfg, Arc::new(Metrics::new())).unwrap()
}

/// Stores a verdict for `job` (sent by `sender`): the store knows the job from then on.
async fn give_a_verdict(store: &Store, job: &str, sender: &str, now: i64) {
    store.enqueue(vec![intake(job, sender)], now, COALESCE, 100_000).await.unwrap();
    let item = store.claim_work(now + COALESCE).await.unwrap().expect("due");
    assert_eq!(item.job, job);
    let completion = Completion {
        verdict: Some((job.into(), r#"{"schema":"culprit.verdict/v1"}"#.into())),
        plan: Box::new(|_, _| Default::default()),
        now_ms: now + COALESCE,
    };
    store.complete(&item, completion).await.unwrap();
}

async fn claimed(store: &Store, now: i64) -> Option<String> {
    let item = store.claim_work(now).await.unwrap()?;
    let job = item.job.clone();
    let done = Completion { verdict: None, plan: Box::new(|_, _| Default::default()), now_ms: now };
    store.complete(&item, done).await.unwrap();
    Some(job)
}

async fn a_real_alerts_work_is_claimed_before_ten_thousand_unknown_ones(f: Fx) {
    let store = open(&f, |c| {
        c.max_queue = 30_000;
        c.max_unknown_per_sender = 20_000;
    });
    give_a_verdict(&store, "real", "http://am", T0).await;
    // The flood: 10,000 bogus job names in 100 webhooks of 100, due at T0 + 1 s + the
    // window, all before the real alert (due 1 s later still).
    for w in 0..100 {
        let intakes = (0..100).map(|j| intake(&format!("bogus{:05}", w * 100 + j), "peer 127.0.0.1")).collect();
        let e = store.enqueue(intakes, T0 + 1_000, COALESCE, 30_000).await.unwrap();
        assert!(matches!(e, Enqueued::Stored { created: 100, .. }), "{e:?}");
    }
    let e = store.enqueue(vec![intake("real", "http://am")], T0 + 2_000, COALESCE, 30_000).await.unwrap();
    assert!(matches!(e, Enqueued::Stored { created: 1, depth: 10_001, .. }), "{e:?}");
    // Everything is due: the known job goes first although it is due last.
    assert_eq!(claimed(&store, T0 + 3_000 + COALESCE).await.as_deref(), Some("real"));
    assert_eq!(claimed(&store, T0 + 3_000 + COALESCE).await.as_deref(), Some("bogus00000"));
}

async fn unknown_jobs_wait_behind_known_ones_but_never_longer_than_unknown_max_wait(f: Fx) {
    let store = open(&f, |c| c.unknown_max_wait = Millis::from_secs(60));
    give_a_verdict(&store, "known", "am", T0).await;
    store.enqueue(vec![intake("new", "am")], T0 + 100_000, COALESCE, 100).await.unwrap();
    store.enqueue(vec![intake("known", "am")], T0 + 130_000, COALESCE, 100).await.unwrap();
    // At T0 + 150 s "new" is due since 40 s (T0 + 110 s), under the 60 s: "known" first.
    assert_eq!(claimed(&store, T0 + 150_000).await.as_deref(), Some("known"));
    store.enqueue(vec![intake("known", "am")], T0 + 150_000, COALESCE, 100).await.unwrap();
    // At T0 + 175 s "new" is due since 65 s, over the 60 s: it ranks with "known" (due
    // at T0 + 160 s) and was due first.
    assert_eq!(claimed(&store, T0 + 175_000).await.as_deref(), Some("new"));
    assert_eq!(claimed(&store, T0 + 175_000).await.as_deref(), Some("known"));
}

async fn senders_take_turns_so_a_flood_from_one_does_not_hold_another(f: Fx) {
    let store = open(&f, |_| {});
    for j in ["a1", "a2", "a3"] {
        store.enqueue(vec![intake(j, "flood")], T0, COALESCE, 100).await.unwrap();
    }
    store.enqueue(vec![intake("b1", "other")], T0 + 500, COALESCE, 100).await.unwrap();
    let mut order = Vec::new();
    while let Some(job) = claimed(&store, T0 + 60_000).await {
        order.push(job);
    }
    // Neither sender had a turn: the earliest due (a1); then "other", whose turn came
    // never, before "flood", whose turn came just now.
    assert_eq!(order, ["a1", "b1", "a2", "a3"]);
}

async fn a_sender_over_its_unknown_cap_is_refused_and_others_and_known_jobs_are_not(f: Fx) {
    let store = open(&f, |c| c.max_unknown_per_sender = 5);
    give_a_verdict(&store, "known", "flood", T0).await;
    let now = T0 + 100_000;
    let five: Vec<Intake> = (0..5).map(|j| intake(&format!("x{j}"), "flood")).collect();
    assert!(matches!(store.enqueue(five, now, COALESCE, 100).await.unwrap(), Enqueued::Stored { created: 5, .. }));
    // The sixth unknown job of the flooder: refused whole, with what waits.
    let e = store.enqueue(vec![intake("x5", "flood"), intake("x6", "flood")], now, COALESCE, 100).await.unwrap();
    assert_eq!(e, Enqueued::TooManyUnknown { waiting: 5, limit: 5 });
    // Its webhooks for a job waiting already merge (nothing new), and a known job gets in.
    let e = store.enqueue(vec![intake("x0", "flood"), intake("known", "flood")], now, COALESCE, 100).await.unwrap();
    assert!(matches!(e, Enqueued::Stored { created: 1, depth: 6, .. }), "{e:?}");
    // Another sender's unknown job is not held by the flood.
    let e = store.enqueue(vec![intake("y0", "other")], now, COALESCE, 100).await.unwrap();
    assert!(matches!(e, Enqueued::Stored { created: 1, depth: 7, .. }), "{e:?}");
    // Claimed, the flooder's unknown job makes room for one more.
    assert_eq!(claimed(&store, now + COALESCE).await.as_deref(), Some("known"));
    assert!(claimed(&store, now + COALESCE).await.is_some());
    assert!(claimed(&store, now + COALESCE).await.is_some());
    let e = store.enqueue(vec![intake("x5", "flood")], now, COALESCE, 100).await.unwrap();
    assert!(matches!(e, Enqueued::Stored { created: 1, .. }), "{e:?}");
}

async fn unknown_jobs_of_every_sender_together_hold_at_most_half_the_queue(f: Fx) {
    let store = open(&f, |_| {});
    give_a_verdict(&store, "known", "s", T0).await;
    let now = T0 + 100_000;
    // max_queue 10: unknown jobs from five senders fill 10 / 2 = 5 places...
    for j in 0..5 {
        let e = store.enqueue(vec![intake(&format!("u{j}"), &format!("s{j}"))], now, COALESCE, 10).await.unwrap();
        assert!(matches!(e, Enqueued::Stored { created: 1, .. }), "{e:?}");
    }
    // ...and a sixth sender's is refused, while a known job still finds room.
    let e = store.enqueue(vec![intake("u5", "s5")], now, COALESCE, 10).await.unwrap();
    assert_eq!(e, Enqueued::TooManyUnknown { waiting: 5, limit: 5 });
    let e = store.enqueue(vec![intake("known", "s5")], now, COALESCE, 10).await.unwrap();
    assert!(matches!(e, Enqueued::Stored { created: 1, depth: 6, .. }), "{e:?}");
}

async fn a_verdict_makes_a_job_known_until_prune_forgets_it(f: Fx) {
    let store = open(&f, |_| {});
    store.enqueue(vec![intake("j", "am")], T0, COALESCE, 100).await.unwrap();
    let item = store.claim_work(T0 + COALESCE).await.unwrap().unwrap();
    assert!(!item.known);
    store
        .complete(&item, Completion { verdict: None, plan: Box::new(|_, _| Default::default()), now_ms: T0 })
        .await
        .unwrap();
    give_a_verdict(&store, "j", "am", T0 + 60_000).await;
    store.enqueue(vec![intake("j", "am")], T0 + 120_000, COALESCE, 100).await.unwrap();
    let item = store.claim_work(T0 + 120_000 + COALESCE).await.unwrap().unwrap();
    assert!(item.known);
    store
        .complete(&item, Completion { verdict: None, plan: Box::new(|_, _| Default::default()), now_ms: T0 })
        .await
        .unwrap();
    // Pruned a day later with a one-hour retention: no verdict since, unknown again.
    let day = 86_400_000;
    let policy = Prune { now_ms: T0 + day, older_than_ms: 3_600_000, keep_rows: 100, verdicts_kept: 100 };
    assert_eq!(store.prune(policy).await.unwrap().known_jobs, 1);
    store.enqueue(vec![intake("j", "am")], T0 + day, COALESCE, 100).await.unwrap();
    assert!(!store.claim_work(T0 + day + COALESCE).await.unwrap().unwrap().known);
}

both![
    a_real_alerts_work_is_claimed_before_ten_thousand_unknown_ones,
    unknown_jobs_wait_behind_known_ones_but_never_longer_than_unknown_max_wait,
    senders_take_turns_so_a_flood_from_one_does_not_hold_another,
    a_sender_over_its_unknown_cap_is_refused_and_others_and_known_jobs_are_not,
    unknown_jobs_of_every_sender_together_hold_at_most_half_the_queue,
    a_verdict_makes_a_job_known_until_prune_forgets_it,
    could_not_diagnose_notices_of_many_groups_fold_into_one_per_destination_and_window,
];

async fn could_not_diagnose_notices_of_many_groups_fold_into_one_per_destination_and_window(f: Fx) {
    use super::{completion, could_not, notice};
    use crate::model::notice::NoticeKind;
    let store = open(&f, |_| {});
    store.fold_could_not_diagnose_every(600_000);
    let now = T0 + COALESCE;
    // 200 unknown jobs, each its own alert group, each could not be diagnosed.
    for j in 0..200 {
        let job = format!("bogus{j:03}");
        store.enqueue(vec![intake(&job, "flood")], T0, COALESCE, 1000).await.unwrap();
        let item = store.claim_work(now).await.unwrap().unwrap();
        let n = could_not(&job, &format!("g{j:03}"), &format!("k{j:03}"));
        store.complete(&item, completion(vec![("slack", n)], now)).await.unwrap();
    }
    // One notice carries all 200: its own job, 10 named, 189 counted.
    let row = store.claim_delivery("slack", now).await.unwrap().unwrap();
    let reason = row.notice.reason.clone().unwrap();
    assert!(
        reason.ends_with(
            "Not diagnosed either in this alert group or 199 others, for the same reason: 199 more jobs: bogus001, bogus002, bogus003, bogus004, bogus005, bogus006, bogus007, bogus008, bogus009, bogus010 and 189 more"
        ),
        "{reason}"
    );
    assert_eq!(store.claim_delivery("slack", now).await.unwrap(), None);
    store.delivered(&row, None, now).await.unwrap();
    // Another failure within the 10 minutes waits for the window's end...
    store.enqueue(vec![intake("late", "flood")], now, COALESCE, 1000).await.unwrap();
    let item = store.claim_work(now + COALESCE).await.unwrap().unwrap();
    let late = could_not("late", "g-late", "k-late");
    store.complete(&item, completion(vec![("slack", late)], now + COALESCE)).await.unwrap();
    // ...and holds no verdict of its own group.
    store.enqueue(vec![intake("late", "flood")], now + COALESCE, COALESCE, 1000).await.unwrap();
    let item = store.claim_work(now + 2 * COALESCE).await.unwrap().unwrap();
    let verdict = notice(NoticeKind::Verdict, "g-late", "v-late");
    store.complete(&item, completion(vec![("slack", verdict)], now + 2 * COALESCE)).await.unwrap();
    let row = store.claim_delivery("slack", now + 2 * COALESCE).await.unwrap().unwrap();
    assert_eq!(row.notice.idempotency_key, "v-late");
    store.delivered(&row, None, now + 2 * COALESCE).await.unwrap();
    assert_eq!(store.claim_delivery("slack", now + 2 * COALESCE).await.unwrap(), None);
    // Due when the window after the first post is over: now + 600 s.
    assert_eq!(store.next_delivery_ms("slack").await.unwrap(), Some(now + 600_000));
    let row = store.claim_delivery("slack", now + 600_001).await.unwrap().unwrap();
    assert_eq!(row.notice.idempotency_key, "k-late");
}
