//! Incident rows: kept with their verdict in the completing transaction, read back by
//! later completions (for their planner) and by the API, pruned with the verdicts. On a
//! real SQLite file and a real PostgreSQL.

use std::sync::{Arc, Mutex};

use super::{COALESCE, Fx, T0, intake, stored};
use crate::service::store::{Completion, LastVerdicts, Plan, Prune};

async fn incident_rows_are_kept_with_their_verdicts_read_by_later_completions_and_pruned_with_them(f: Fx) {
    let store = f.open();
    store.read_incidents_within(60_000);
    let seen: Arc<Mutex<Vec<LastVerdicts>>> = Arc::new(Mutex::new(Vec::new()));
    for (i, job) in ["a", "b", "c"].into_iter().enumerate() {
        let now = T0 + COALESCE + i as i64 * 1_000;
        stored(&store, vec![intake(job, &format!("g-{job}"))], now - COALESCE).await;
        let item = store.claim_work(now).await.unwrap().unwrap();
        let seen = seen.clone();
        let completion = Completion {
            verdict: Some((job.into(), r#"{"schema":"culprit.verdict/v1"}"#.into())),
            plan: Box::new(move |id, last| {
                seen.lock().unwrap().push(last.clone());
                Plan {
                    member: Some(format!("{{\"job\":\"{job}\",\"verdict\":{}}}", id.unwrap())),
                    ..Default::default()
                }
            }),
            now_ms: now,
        };
        store.complete(&item, completion).await.unwrap();
    }
    // Each completion saw the rows of the verdicts before it, oldest first.
    let seen = seen.lock().unwrap().clone();
    let jobs = |l: &LastVerdicts| l.recent().iter().map(|r| r.member.clone()).collect::<Vec<_>>();
    assert!(jobs(&seen[0]).is_empty());
    assert_eq!(jobs(&seen[1]).len(), 1);
    assert!(jobs(&seen[2])[0].contains("\"job\":\"a\"") && jobs(&seen[2])[1].contains("\"job\":\"b\""));
    // Read by time: since the second verdict, two rows, with their verdicts' ids and times.
    let since_b = store.recent_members(T0 + COALESCE + 1_000).await.unwrap();
    assert_eq!(since_b.len(), 2);
    assert_eq!(since_b[0].created_ms, T0 + COALESCE + 1_000);
    assert!(since_b[0].member.contains(&format!("\"verdict\":{}", since_b[0].verdict_id)));
    // Pruned with the verdicts: keeping the newest verdict keeps its row alone.
    let p = Prune { now_ms: T0 + COALESCE + 2_000, older_than_ms: 1_000_000, keep_rows: 1, verdicts_kept: 1 };
    store.prune(p).await.unwrap();
    let left = store.recent_members(0).await.unwrap();
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(left[0].member.contains("\"job\":\"c\""));
}

async fn without_an_incident_lookback_completions_read_no_rows(f: Fx) {
    let store = f.open();
    stored(&store, vec![intake("a", "g")], T0).await;
    let item = store.claim_work(T0 + COALESCE).await.unwrap().unwrap();
    let completion = Completion {
        verdict: Some(("a".into(), r#"{"schema":"culprit.verdict/v1"}"#.into())),
        plan: Box::new(|_, last| {
            assert!(last.recent().is_empty());
            Plan { member: Some("{}".into()), ..Default::default() }
        }),
        now_ms: T0 + COALESCE,
    };
    store.complete(&item, completion).await.unwrap();
    assert_eq!(store.recent_members(0).await.unwrap().len(), 1, "the row is kept all the same");
}

both![
    incident_rows_are_kept_with_their_verdicts_read_by_later_completions_and_pruned_with_them,
    without_an_incident_lookback_completions_read_no_rows,
];
