//! One job through several alert groups, in the store (both backends): the job's episode
//! row is read and written in the completing transaction, its notices are delivered under
//! one thread, and the destination's state (the Slack message) is the episode's, whichever
//! group a notice is about.

use std::collections::BTreeMap;

use super::Fx;
use crate::model::notice::NoticeKind;
use crate::model::verdict::{Confidence, JobRef, Verdict};
use crate::service::intake::Intake;
use crate::service::store::{Completion, Store};
use crate::service::{NoticePlan, Outcome, plan_notices};

const T0: i64 = 1_800_000_000_000;
const COALESCE: i64 = 10_000;

fn intake(group: &str, firing: bool) -> Intake {
    Intake {
        job_key: "id:a".into(),
        job: "a".into(),
        group_key: group.into(),
        firing,
        firing_set: "s".into(),
        labels: BTreeMap::from([("job_id".to_string(), "a".to_string()), ("task_name".to_string(), group.to_string())]),
        sender: String::new(),
        known: true,
        links: Default::default(),
    }
}

fn verdict() -> Verdict {
    crate::samples::captures::verdict(&crate::samples::captures::CAPTURES[0]).unwrap()
}

/// Webhooks for these groups of job `a` at `t`, then their diagnosis, completed with the
/// service's own planner for destinations `slack` and `pagerduty`.
async fn diagnosed(store: &Store, groups: &[(&str, bool)], t: i64, v: Option<Verdict>) {
    store.enqueue(groups.iter().map(|(g, f)| intake(g, *f)).collect(), t, COALESCE, 100).await.unwrap();
    let item = store.claim_work(t + COALESCE).await.unwrap().expect("due");
    let plan_item = item.clone();
    let completion = Completion {
        verdict: v.as_ref().map(|v| ("a".to_string(), serde_json::to_string(v).unwrap())),
        plan: Box::new(move |verdict_id, last| {
            let job = JobRef { name: "a".into(), id: "a".into() };
            let dests = vec![("slack".to_string(), false), ("pagerduty".to_string(), false)];
            let plan = NoticePlan {
                item: &plan_item,
                outcome: v.as_ref().map_or(Outcome::CouldNotDiagnose(""), Outcome::Verdict),
                job: &job,
                destinations: &dests,
                verdict_id,
                verdict_url: None,
                notify_resolved: true,
                now_ms: t + COALESCE,
            };
            let mut planned = plan_notices(&plan, &|d: &str, g: &str| last.get(d, g));
            if v.is_none() {
                planned.notices.retain(|n| matches!(n.notice.kind, NoticeKind::Resolved | NoticeKind::GroupResolved));
            }
            planned
        }),
        now_ms: t + COALESCE,
    };
    store.complete(&item, completion).await.unwrap();
}

/// Delivers every due notice of `destination`: (kind, group, the state it was given).
async fn deliver(store: &Store, destination: &str, t: i64) -> Vec<(NoticeKind, String, Option<serde_json::Value>)> {
    let mut out = Vec::new();
    while let Some(row) = store.claim_delivery(destination, t).await.unwrap() {
        out.push((row.notice.kind, row.notice.group_key.clone(), row.group_state.clone()));
        let state = row.group_state.clone().unwrap_or_else(|| serde_json::json!({"channel": "C1", "ts": "1.0"}));
        store.delivered(&row, Some(state), t).await.unwrap();
    }
    out
}

async fn three_groups_of_one_job_give_one_verdict_tied_replies_and_one_resolution(f: Fx) {
    let store = f.open();
    let slack = serde_json::json!({"channel": "C1", "ts": "1.0"});
    // group_by: ['...']: three groups of one job at once → one diagnosis, one notice each.
    diagnosed(&store, &[("gj", true), ("gt1", true), ("gt2", true)], T0, Some(verdict())).await;
    let t = T0 + COALESCE;
    assert_eq!(deliver(&store, "slack", t).await, [(NoticeKind::Verdict, "gj".to_string(), None)]);
    assert_eq!(deliver(&store, "pagerduty", t).await.len(), 1, "one PagerDuty event for the job");
    // A fourth group of the job later, same verdict: a reply in the verdict's thread (the
    // state of the first post), nothing for PagerDuty's verdict.
    diagnosed(&store, &[("gt3", true)], T0 + 60_000, Some(verdict())).await;
    let t = T0 + 60_000 + COALESCE;
    assert_eq!(deliver(&store, "slack", t).await, [(NoticeKind::Joined, "gt3".to_string(), Some(slack.clone()))]);
    // Two resolve while two fire: the verdict stays open, said in its thread.
    diagnosed(&store, &[("gj", false), ("gt1", false)], T0 + 120_000, None).await;
    let t = T0 + 120_000 + COALESCE;
    let got = deliver(&store, "slack", t).await;
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|(k, _, s)| *k == NoticeKind::GroupResolved && s.as_ref() == Some(&slack)), "{got:?}");
    // The follow-up with higher confidence: a revision in the same thread.
    let mut firm = verdict();
    firm.confidence = if firm.confidence == Confidence::High { Confidence::Medium } else { Confidence::High };
    diagnosed(&store, &[("gt2", true)], T0 + 180_000, Some(firm)).await;
    let t = T0 + 180_000 + COALESCE;
    assert_eq!(deliver(&store, "slack", t).await, [(NoticeKind::Verdict, "gt2".to_string(), Some(slack.clone()))]);
    // The last two resolve: the verdict resolves, once.
    diagnosed(&store, &[("gt2", false), ("gt3", false)], T0 + 240_000, None).await;
    let t = T0 + 240_000 + COALESCE;
    assert_eq!(deliver(&store, "slack", t).await, [(NoticeKind::Resolved, "gt2".to_string(), Some(slack))]);
    // After a restart, what the destinations were told is still there: a repeat of the
    // resolution posts nothing.
    drop(store);
    let store = f.open();
    diagnosed(&store, &[("gt2", false)], T0 + 300_000, None).await;
    assert!(deliver(&store, "slack", T0 + 300_000 + COALESCE).await.is_empty());
}

both![three_groups_of_one_job_give_one_verdict_tied_replies_and_one_resolution];

/// PostgreSQL, two replicas on one database: the verdict posted through one, a group that
/// joins later diagnosed and delivered through the other, which replies under the message
/// the first one stored (the episode row and the thread's state are the database's, not a
/// replica's).
#[tokio::test]
async fn on_postgres_a_group_joining_through_another_replica_replies_under_the_first_replicas_message() {
    let Some(f) = Fx::postgres() else { return };
    let (a, b) = (f.open(), super::replica(&f, 3_000));
    diagnosed(&a, &[("gj", true), ("gt1", true)], T0, Some(verdict())).await;
    assert_eq!(deliver(&a, "slack", T0 + COALESCE).await, [(NoticeKind::Verdict, "gj".to_string(), None)]);
    diagnosed(&b, &[("gt2", true)], T0 + 60_000, Some(verdict())).await;
    let slack = serde_json::json!({"channel": "C1", "ts": "1.0"});
    assert_eq!(
        deliver(&b, "slack", T0 + 60_000 + COALESCE).await,
        [(NoticeKind::Joined, "gt2".to_string(), Some(slack))]
    );
    // PagerDuty: one verdict for the job, whichever replica planned what (the Joined notice
    // planned for it is one its notifier does not take: `wants`).
    let pd = deliver(&a, "pagerduty", T0 + 60_000 + COALESCE).await;
    let verdicts: Vec<_> = pd.iter().filter(|(k, _, _)| *k == NoticeKind::Verdict).collect();
    assert_eq!(verdicts.len(), 1, "{pd:?}");
}
