//! Priorities under load, on a real SQLite file and a real PostgreSQL: first diagnoses
//! before follow-ups and retries, resolved-only work last; under a deep queue every other
//! claim the newest first diagnosis; firing notices before resolutions of other threads,
//! a thread's own in order.

use super::{COALESCE, Fx, T0, completion, intake, notice, stored};
use crate::model::notice::{NoticeEpisode, NoticeKind};
use crate::service::intake::Intake;
use crate::service::store::{Completion, Store};

fn nothing(now_ms: i64) -> Completion {
    Completion { verdict: None, plan: Box::new(|_, _| Default::default()), now_ms }
}

fn resolved(job: &str, group: &str) -> Intake {
    Intake { firing: false, ..intake(job, group) }
}

/// Claims and finishes the next diagnosis; its job.
async fn next_job(store: &Store, now: i64) -> Option<String> {
    let item = store.claim_work(now).await.unwrap()?;
    store.complete(&item, nothing(now)).await.unwrap();
    Some(item.job)
}

async fn first_diagnoses_go_before_retries_and_follow_ups_and_resolved_only_work_goes_last(f: Fx) {
    let store = f.open();
    // A retry: tried once at T0 + 10 s, due again 1 s later.
    stored(&store, vec![intake("retry", "g-retry")], T0).await;
    let item = store.claim_work(T0 + COALESCE).await.unwrap().unwrap();
    store.retry_work(&item, T0 + COALESCE + 1_000, T0 + COALESCE).await.unwrap();
    // A weak verdict's follow-up, due at T0 + 10 s + 2 s.
    stored(&store, vec![intake("follow", "g-follow")], T0).await;
    let item = store.claim_work(T0 + COALESCE).await.unwrap().unwrap();
    assert_eq!(item.job, "follow");
    store.complete_rediagnosing(&item, nothing(T0 + COALESCE), Some(T0 + COALESCE + 2_000)).await.unwrap();
    // Work for a group that resolved, due at T0 + 1 s + 10 s.
    stored(&store, vec![resolved("gone", "g-gone")], T0 + 1_000).await;
    // The first diagnosis comes last of all: due at T0 + 5 s + 10 s.
    stored(&store, vec![intake("first", "g-first")], T0 + 5_000).await;
    let now = T0 + 5_000 + COALESCE;
    assert_eq!(next_job(&store, now).await.as_deref(), Some("first"), "due last, claimed first");
    // Then the retry (due at +11 s) and the follow-up (+12 s), earliest due first.
    assert_eq!(next_job(&store, now).await.as_deref(), Some("retry"));
    assert_eq!(next_job(&store, now).await.as_deref(), Some("follow"));
    assert_eq!(next_job(&store, now).await.as_deref(), Some("gone"), "due second, claimed last");
    assert_eq!(next_job(&store, now).await, None);
}

async fn under_a_deep_queue_a_job_after_a_storm_of_300_is_claimed_within_two_claims(f: Fx) {
    let store = f.open();
    store.deep_queue_beyond(4);
    // The storm: 300 jobs in 6 webhooks of 50 at T0, due at T0 + 10 s.
    for w in 0..6 {
        let intakes = (0..50).map(|j| intake(&format!("storm{:03}", w * 50 + j), &format!("g{w}-{j}"))).collect();
        stored(&store, intakes, T0).await;
    }
    // The unrelated job's webhook 1 s after the storm's.
    stored(&store, vec![intake("unrelated", "g-unrelated")], T0 + 1_000).await;
    let now = T0 + 1_000 + COALESCE;
    // 301 due, 4 can start at once: a deep queue. Claims held (running), as four workers
    // would: the oldest, then the newest, then the oldest left, then the newest left.
    let mut claimed = Vec::new();
    for _ in 0..4 {
        claimed.push(store.claim_work(now).await.unwrap().unwrap().job);
    }
    assert_eq!(claimed, ["storm000", "unrelated", "storm001", "storm299"]);
}

async fn without_a_deep_queue_claims_stay_oldest_first(f: Fx) {
    let store = f.open();
    // service.concurrency 4 and 4 due: all start now, no one waits behind another.
    store.deep_queue_beyond(4);
    for j in 0..4 {
        stored(&store, vec![intake(&format!("j{j}"), &format!("g{j}"))], T0 + j * 1_000).await;
    }
    let now = T0 + 3_000 + COALESCE;
    let mut claimed = Vec::new();
    for _ in 0..4 {
        claimed.push(store.claim_work(now).await.unwrap().unwrap().job);
    }
    assert_eq!(claimed, ["j0", "j1", "j2", "j3"]);
}

async fn a_newest_first_claim_keeps_known_jobs_first_and_one_running_diagnosis_per_job(f: Fx) {
    let store = f.open();
    store.deep_queue_beyond(2);
    // Ten known jobs due at T0 + 10 s, and an unknown one due 1 s later (the newest).
    let known: Vec<Intake> = (0..10).map(|j| intake(&format!("k{j}"), &format!("g{j}"))).collect();
    stored(&store, known, T0).await;
    stored(&store, vec![Intake { known: false, ..intake("unknown", "g-u") }], T0 + 1_000).await;
    let now = T0 + 1_000 + COALESCE;
    // The first claim, oldest first: k0, left running.
    assert_eq!(store.claim_work(now).await.unwrap().unwrap().job, "k0");
    // A webhook for k0 while it runs queues its next diagnosis, the newest of all (due
    // at T0 + 2 s + 10 s).
    stored(&store, vec![intake("k0", "g0")], T0 + 2_000).await;
    let now = T0 + 2_000 + COALESCE;
    // Newest first: not k0 (it runs), not the unknown job (known ones first): k9.
    assert_eq!(store.claim_work(now).await.unwrap().unwrap().job, "k9");
}

async fn resolutions_wait_behind_firing_notices_of_other_threads_and_a_threads_own_stay_in_order(f: Fx) {
    let store = f.open();
    let in_thread = |kind, group: &str, key: &str, thread: &str| {
        let mut n = notice(kind, group, key);
        n.episode = NoticeEpisode { thread: thread.into(), ..Default::default() };
        n
    };
    // Episode A: its group g1 resolved, then g3 joined it (ids 1 and 2); episode B: a
    // firing verdict (id 3).
    let notices = vec![
        ("slack", in_thread(NoticeKind::Resolved, "g1", "a-resolved", "episode-a")),
        ("slack", in_thread(NoticeKind::Joined, "g3", "a-joined", "episode-a")),
        ("slack", in_thread(NoticeKind::Verdict, "g2", "b-verdict", "episode-b")),
    ];
    stored(&store, vec![intake("j", "g")], T0).await;
    let item = store.claim_work(T0 + COALESCE).await.unwrap().unwrap();
    store.complete(&item, completion(notices, T0 + COALESCE)).await.unwrap();
    let now = T0 + COALESCE;
    let mut order = Vec::new();
    while let Some(row) = store.claim_delivery("slack", now).await.unwrap() {
        order.push(row.notice.idempotency_key.clone());
        store.delivered(&row, None, now).await.unwrap();
    }
    // B's verdict (rank 0) before A's resolution (rank 2) although stored after it; A's
    // join (rank 0) still waits for the resolution before it in A's thread.
    assert_eq!(order, ["b-verdict", "a-resolved", "a-joined"]);
}

async fn rows_stored_before_priorities_get_their_class_and_rank_at_the_migration(f: Fx) {
    let store = f.open();
    stored(&store, vec![resolved("gone", "g-gone")], T0).await;
    stored(&store, vec![intake("j", "g")], T0).await;
    let item = store.claim_work(T0 + COALESCE).await.unwrap().unwrap();
    assert_eq!(item.job, "j");
    let notices = vec![("slack", notice(NoticeKind::Resolved, "g1", "resolved"))];
    store.complete(&item, completion(notices, T0 + COALESCE)).await.unwrap();
    drop(store);
    // Back to the schema before priorities (and the incident rows after them), as the
    // previous release left it.
    f.poke2(
        "DROP INDEX outbox_queue; ALTER TABLE work DROP COLUMN claim_class; ALTER TABLE outbox DROP COLUMN rank;
         CREATE INDEX outbox_queue ON outbox(destination, priority, id) WHERE state IN ('pending', 'sending');
         DROP TABLE incident_members; PRAGMA user_version = 2;",
        "ALTER TABLE work DROP COLUMN claim_class; ALTER TABLE outbox DROP COLUMN rank; DROP SEQUENCE claim_turn;
         CREATE INDEX outbox_queue ON outbox(destination, priority, id) WHERE state IN ('pending', 'sending');
         DROP TABLE incident_members; DELETE FROM culprit_schema WHERE version >= 4;",
    );
    let store = f.open();
    assert_eq!(store.depths().await.unwrap().work, 1, "migrated at the first operation");
    // The resolved-only diagnosis is class 2, the resolution rank 2.
    assert_eq!(f.column("SELECT CAST(claim_class AS TEXT) FROM work"), ["2"]);
    assert_eq!(f.column("SELECT CAST(rank AS TEXT) FROM outbox"), ["2"]);
}

both![
    first_diagnoses_go_before_retries_and_follow_ups_and_resolved_only_work_goes_last,
    under_a_deep_queue_a_job_after_a_storm_of_300_is_claimed_within_two_claims,
    without_a_deep_queue_claims_stay_oldest_first,
    a_newest_first_claim_keeps_known_jobs_first_and_one_running_diagnosis_per_job,
    resolutions_wait_behind_firing_notices_of_other_threads_and_a_threads_own_stay_in_order,
    rows_stored_before_priorities_get_their_class_and_rank_at_the_migration,
];
