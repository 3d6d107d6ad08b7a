//! The verdict notice a Slack button looks up (`Store::verdict_notice`): the first notice
//! of one verdict for one destination, by the verdict's id, never a neighbour's (42 is not
//! 420) nor another destination's. On a real SQLite file and a real PostgreSQL.

use super::{Fx, NoticeKind, notice, with_notices};

async fn a_verdicts_notice_is_found_by_its_id_and_destination_alone(f: Fx) {
    let store = f.open();
    let of = |id: i64, key: &str, group: &str| {
        let mut n = notice(NoticeKind::Verdict, group, key);
        n.verdict_id = Some(id);
        n.labels = std::collections::BTreeMap::from([("team".to_string(), group.to_string())]);
        n
    };
    let resolved = {
        let mut n = notice(NoticeKind::Resolved, "g42", "k-resolved");
        n.verdict_id = Some(42);
        n
    };
    with_notices(
        &store,
        "a",
        vec![
            ("slack", resolved),
            ("slack", of(420, "k420", "g420")),
            ("slack", of(42, "k42", "g42")),
            ("slack", of(42, "k42-second", "g42-second")),
            ("slack:other", of(7, "k7", "g7")),
        ],
    )
    .await;
    let found = store.verdict_notice("slack", 42).await.unwrap().unwrap();
    // The first verdict notice of 42 (the resolution is not one; 420 is another verdict).
    assert_eq!((found.idempotency_key.as_str(), found.group_key.as_str()), ("k42", "g42"));
    assert_eq!(found.labels["team"], "g42");
    assert_eq!(store.verdict_notice("slack", 420).await.unwrap().unwrap().idempotency_key, "k420");
    assert_eq!(store.verdict_notice("slack", 7).await.unwrap(), None, "another destination's");
    assert_eq!(store.verdict_notice("slack:other", 7).await.unwrap().unwrap().idempotency_key, "k7");
    assert_eq!(store.verdict_notice("slack", 4).await.unwrap(), None);
}

both![a_verdicts_notice_is_found_by_its_id_and_destination_alone];
