// The rows, written with culprit 0.1.0's statements (src/service/store.rs at d98c5f7) in
// the order it ran them; the types above are 0.1.0's, copied by generate.sh.

use std::collections::BTreeMap;

use notice::{Notice, NoticeKind};
use store::GroupInfo;
use verdict::JobRef;

/// 2026-11-29, when 0.1.0 ran.
const B: i64 = 1_796_000_000_000;

fn q(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

fn labels(job: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("alertname".to_string(), "FlinkBackpressure".to_string()), ("job_id".to_string(), job.to_string())])
}

/// 0.1.0's intake: a new pending row (no pending one of the job to merge into).
fn enqueue(job: &str, group: &str, now_ms: i64) {
    let info = GroupInfo { firing: true, firing_set: format!("{group}-firing"), labels: labels(job) };
    let groups: BTreeMap<String, GroupInfo> = [(group.to_string(), info)].into_iter().collect();
    println!(
        "INSERT INTO work (job_key, job, labels, groups, due_ms, created_ms, state) VALUES ({}, {}, {}, {}, {}, {}, 'pending');",
        q(&format!("id:{job}")),
        q(job),
        q(&serde_json::to_string(&labels(job)).unwrap()),
        q(&serde_json::to_string(&groups).unwrap()),
        now_ms + 10_000,
        now_ms
    );
}

/// 0.1.0's claim_due: the earliest due pending row becomes running (whatever else of its
/// job runs).
fn claim(now_ms: i64) {
    println!(
        "UPDATE work SET state = 'running' WHERE id = (SELECT id FROM work WHERE state = 'pending' AND due_ms <= {now_ms} ORDER BY due_ms, id LIMIT 1);"
    );
}

fn notice(kind: NoticeKind, job: &str, group: &str, key: &str, at_ms: i64) -> Notice {
    Notice {
        kind,
        group_key: group.into(),
        labels: labels(job),
        job: JobRef { name: job.into(), id: format!("{job}-flink-id") },
        verdict: None,
        verdict_id: None,
        verdict_url: None,
        reason: (kind == NoticeKind::CouldNotDiagnose).then(|| "Prometheus: query failed: backend down".into()),
        firing: true,
        changed: false,
        idempotency_key: key.into(),
        at_ms,
    }
}

/// 0.1.0's complete: the notice into the outbox, the group's verdict remembered, the work
/// row removed (by the id the claim gave: the job's one running row).
fn complete(job: &str, destination: &str, n: &Notice, remember: &str, now_ms: i64) {
    println!(
        "INSERT OR IGNORE INTO outbox (destination, idem_key, notice, state, next_ms, first_ms) VALUES ({}, {}, {}, 'pending', {now_ms}, {now_ms});",
        q(destination),
        q(&n.idempotency_key),
        q(&serde_json::to_string(n).unwrap())
    );
    println!(
        "INSERT INTO group_state (destination, group_key, verdict_key) VALUES ({}, {}, {}) ON CONFLICT(destination, group_key) DO UPDATE SET verdict_key = excluded.verdict_key;",
        q(destination),
        q(&n.group_key),
        q(remember)
    );
    let id = format!("(SELECT id FROM work WHERE job_key = {} AND state = 'running')", q(&format!("id:{job}")));
    println!("DELETE FROM work WHERE id = {id};");
}

fn main() {
    println!("BEGIN;");
    // Job b: diagnosed, its verdict notice for group g0 delivered to Slack.
    enqueue("b", "g0", B);
    claim(B + 10_000);
    let k0 = notice(NoticeKind::Verdict, "b", "g0", "k0", B + 12_000);
    complete("b", "slack", &k0, "verdict-key-b", B + 12_000);
    let k0_row = "(SELECT id FROM outbox WHERE idem_key = 'k0')";
    println!("UPDATE outbox SET state = 'sending', attempts = attempts + 1 WHERE id = {k0_row};");
    println!("UPDATE outbox SET state = 'sent', last_error = NULL WHERE id = {k0_row};");
    let ts = serde_json::json!({"channel": "C0123", "ts": "1796000013.000100"});
    println!(
        "INSERT INTO group_state (destination, group_key, state) VALUES ('slack', 'g0', {}) ON CONFLICT(destination, group_key) DO UPDATE SET state = excluded.state;",
        q(&serde_json::to_string(&ts).unwrap())
    );
    // Job c could not be diagnosed (group g1): its notice was being sent at the crash.
    enqueue("c", "g1", B + 20_000);
    claim(B + 30_000);
    let k1 = notice(NoticeKind::CouldNotDiagnose, "c", "g1", "k1", B + 40_000);
    complete("c", "slack", &k1, "could-not-diagnose:c", B + 40_000);
    println!("UPDATE outbox SET state = 'sending', attempts = attempts + 1 WHERE id = (SELECT id FROM outbox WHERE idem_key = 'k1');");
    // Job d's verdict for group g2 waits behind it.
    enqueue("d", "g2", B + 41_000);
    claim(B + 51_000);
    let k2 = notice(NoticeKind::Verdict, "d", "g2", "k2", B + 52_000);
    complete("d", "slack", &k2, "verdict-key-d", B + 52_000);
    // Job a: claimed, and a webhook meanwhile made a second row that 0.1.0 claimed too:
    // two diagnoses of one job running at the crash.
    enqueue("a", "g3", B + 60_000);
    claim(B + 70_000);
    enqueue("a", "g4", B + 61_000);
    claim(B + 71_000);
    println!("COMMIT;");
}
