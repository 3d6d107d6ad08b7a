//! The follow-up of a weak verdict in the store: one pending row of the job, due later,
//! durable, merged with webhooks.

use std::collections::BTreeMap;

use super::Fx;
use crate::service::intake::Intake;
use crate::service::store::{Completion, Enqueued, Store, WorkItem};

const T0: i64 = 1_800_000_000_000;
const COALESCE: i64 = 10_000;
const AFTER: i64 = 60_000;

fn intake(job: &str, group: &str, firing: bool) -> Intake {
    Intake {
        links: Default::default(),
        job_key: format!("id:{job}"),
        job: job.into(),
        group_key: group.into(),
        firing,
        firing_set: "s".into(),
        labels: BTreeMap::from([("job_id".to_string(), job.to_string())]),
        sender: String::new(),
        // Known: these tests are about the queue, not about fairness (`fairness_tests`).
        known: true,
    }
}

fn nothing(now_ms: i64) -> Completion {
    Completion { verdict: None, plan: Box::new(|_, _| Default::default()), now_ms }
}

/// Diagnoses job `a` (groups g1 firing, g2 resolved) and completes it with a follow-up.
async fn weak_verdict_of_a(store: &Store) -> WorkItem {
    store.enqueue(vec![intake("a", "g1", true), intake("a", "g2", false)], T0, COALESCE, 100).await.unwrap();
    let item = store.claim_work(T0 + COALESCE).await.unwrap().expect("due");
    assert!(!item.is_rediagnosis());
    store.complete_rediagnosing(&item, nothing(T0 + COALESCE), Some(T0 + COALESCE + AFTER)).await.unwrap();
    item
}

async fn a_weak_verdict_leaves_one_follow_up_of_its_firing_groups_due_later_that_survives_a_restart(f: Fx) {
    let store = f.open();
    weak_verdict_of_a(&store).await;
    assert_eq!(store.depths().await.unwrap().work, 1);
    assert_eq!(store.next_work_ms().await.unwrap(), Some(T0 + COALESCE + AFTER));
    assert_eq!(store.claim_work(T0 + COALESCE + AFTER - 1).await.unwrap(), None, "not before its time");
    drop(store);

    let store = f.open();
    let again = store.claim_work(T0 + COALESCE + AFTER).await.unwrap().expect("the follow-up, after a restart");
    // The resolved group g2 was answered already; only g1 is diagnosed again.
    assert_eq!(again.groups.keys().collect::<Vec<_>>(), ["g1"]);
    assert!(again.is_rediagnosis(), "a follow-up schedules no further one");
    assert_eq!((again.attempts, again.first_failure_ms), (0, None));
    store.complete(&again, nothing(T0 + COALESCE + AFTER)).await.unwrap();
    assert_eq!(store.depths().await.unwrap().work, 0);
}

async fn a_webhook_while_the_follow_up_waits_merges_into_it_and_brings_it_forward(f: Fx) {
    let store = f.open();
    weak_verdict_of_a(&store).await;
    let t = T0 + COALESCE + 5_000;
    let e = store.enqueue(vec![intake("a", "g1", true)], t, COALESCE, 100).await.unwrap();
    assert!(matches!(e, Enqueued::Stored { created: 0, .. }), "{e:?}");
    // Due at the webhook's coalescing window (t + 10 s), not the follow-up's 60 s.
    assert_eq!(store.next_work_ms().await.unwrap(), Some(t + COALESCE));
    let item = store.claim_work(t + COALESCE).await.unwrap().expect("brought forward");
    assert!(!item.is_rediagnosis(), "a webhook asked again: its weak verdict may be followed up once more");
}

async fn a_webhook_during_the_diagnosis_keeps_its_own_row_and_the_follow_up_joins_it(f: Fx) {
    let store = f.open();
    store.enqueue(vec![intake("a", "g1", true), intake("a", "g3", true)], T0, COALESCE, 100).await.unwrap();
    let item = store.claim_work(T0 + COALESCE).await.unwrap().expect("due");
    // While it runs, g3 resolves: a new pending row of the job.
    store.enqueue(vec![intake("a", "g3", false)], T0 + COALESCE + 1, COALESCE, 100).await.unwrap();
    store.complete_rediagnosing(&item, nothing(T0 + COALESCE + 2), Some(T0 + COALESCE + AFTER)).await.unwrap();
    assert_eq!(store.depths().await.unwrap().work, 1, "one row of the job");
    // The pending row keeps its own time and its newer entry for g3 (resolved); g1 joins.
    assert_eq!(store.next_work_ms().await.unwrap(), Some(T0 + 2 * COALESCE + 1));
    let next = store.claim_work(T0 + 2 * COALESCE + 1).await.unwrap().unwrap();
    assert!(!next.groups["g3"].firing && !next.groups["g3"].rediagnosis);
    assert!(next.groups["g1"].firing && next.groups["g1"].rediagnosis);
    assert!(!next.is_rediagnosis());
}

both![
    a_weak_verdict_leaves_one_follow_up_of_its_firing_groups_due_later_that_survives_a_restart,
    a_webhook_while_the_follow_up_waits_merges_into_it_and_brings_it_forward,
    a_webhook_during_the_diagnosis_keeps_its_own_row_and_the_follow_up_joins_it,
];
