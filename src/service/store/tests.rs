//! The store's own tests. The semantics every backend shares run against both: a real
//! SQLite file in a temporary directory (`on_sqlite::…`) and a real PostgreSQL, one
//! database per test on a server shared by the test process (`on_postgres::…`, failed
//! when PostgreSQL is not installed, skipped with a message only when
//! `CULPRIT_SKIP_POSTGRES_TESTS=1` asks for it). SQLite's own faults follow. Disk faults come
//! from `tests/support/faulty_disk.rs`, a VFS shim that makes every write under a
//! directory fail with `SQLITE_FULL` (what SQLite reports for `ENOSPC`).

#[path = "clock_fence_tests.rs"]
mod clock_fence;
#[path = "../../../tests/support/faulty_disk.rs"]
mod faulty_disk;
#[path = "../../../tests/support/pg_server.rs"]
pub(crate) mod pg_server;

use std::collections::BTreeMap;
use std::sync::Arc;

use super::*;
use crate::config::StoreConfig;
use crate::model::notice::{Notice, NoticeKind};
use crate::model::verdict::JobRef;
use crate::service::intake::Intake;
use crate::service::metrics::Metrics;

const T0: i64 = 1_800_000_000_000;
const COALESCE: i64 = 10_000;
const MAX: usize = 10_000;

fn config(dir: &std::path::Path) -> StoreConfig {
    StoreConfig { path: dir.join("culprit.db"), ..StoreConfig::default() }
}

fn open(dir: &std::path::Path) -> Store {
    Store::open(&config(dir), Arc::new(Metrics::new())).unwrap()
}

fn open_with(dir: &std::path::Path) -> (Store, Arc<Metrics>) {
    let m = Arc::new(Metrics::new());
    (Store::open(&config(dir), m.clone()).unwrap(), m)
}

/// One store under test: a SQLite file, or a PostgreSQL database of its own.
struct Fx {
    dir: tempfile::TempDir,
    pg: Option<(&'static pg_server::PgServer, String)>,
}

impl Fx {
    fn sqlite() -> Fx {
        Fx { dir: tempfile::tempdir().unwrap(), pg: None }
    }

    /// A database of its own on the shared server. PostgreSQL not installed fails the
    /// test ([`pg_server::not_installed`]); `None` only when `CULPRIT_SKIP_POSTGRES_TESTS=1`
    /// asks to skip (the server says so).
    fn postgres() -> Option<Fx> {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let server = pg_server::PgServer::shared()?;
        let name = format!("store_{}", N.fetch_add(1, std::sync::atomic::Ordering::SeqCst));
        server.database(&name);
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("pw"), pg_server::PASSWORD).unwrap();
        Some(Fx { dir, pg: Some((server, name)) })
    }

    fn config(&self) -> StoreConfig {
        match &self.pg {
            None => config(self.dir.path()),
            Some((server, name)) => StoreConfig {
                url: Some(server.url(name)),
                password: Some(crate::config::SecretSource::File(self.dir.path().join("pw"))),
                ..StoreConfig::default()
            },
        }
    }

    fn open(&self) -> Store {
        self.open_with().0
    }

    /// Opens (again) the store. A SQLite reopen right after a drop may find its lock still
    /// held for a moment: another test's thread forking a server (PostgreSQL, Prometheus)
    /// copies every open descriptor into the child until it execs, the lock's included
    /// (flock belongs to the open file, shared by the copy). So "in use" is asked again for
    /// up to 2 s; any other error fails at once.
    fn open_with(&self) -> (Store, Arc<Metrics>) {
        let m = Arc::new(Metrics::new());
        let started = std::time::Instant::now();
        loop {
            match Store::open(&self.config(), m.clone()) {
                Ok(store) => return (store, m),
                Err(e) if e.kind == StoreErrorKind::InUse && started.elapsed() < std::time::Duration::from_secs(2) => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(e) => panic!("{e:?}"),
            }
        }
    }

    /// Changes rows behind the store's back (as an operator or a damaged disk would):
    /// `sqlite` on SQLite, `postgres` on PostgreSQL.
    fn poke2(&self, sqlite: &str, postgres: &str) {
        match &self.pg {
            None => poke(self.dir.path(), sqlite),
            Some((server, name)) => {
                server.psql(name, postgres);
            }
        }
    }

    /// Changes rows with SQL both understand.
    fn poke(&self, sql: &str) {
        self.poke2(sql, sql)
    }

    /// The first column of a query's rows, as text.
    fn column(&self, sql: &str) -> Vec<String> {
        match &self.pg {
            None => {
                let conn = rusqlite::Connection::open(self.dir.path().join("culprit.db")).unwrap();
                let mut stmt = conn.prepare(sql).unwrap();
                stmt.query_map([], |r| r.get(0)).unwrap().collect::<Result<_, _>>().unwrap()
            }
            Some((server, name)) => server.psql(name, sql).lines().map(str::to_string).collect(),
        }
    }

    fn is_postgres(&self) -> bool {
        self.pg.is_some()
    }
}

/// Runs each named test against both backends: `on_sqlite::name`, `on_postgres::name`.
macro_rules! both {
    ($($name:ident),* $(,)?) => {
        mod on_sqlite {
            $(#[tokio::test]
            async fn $name() {
                super::$name(super::Fx::sqlite()).await
            })*
        }
        mod on_postgres {
            $(#[tokio::test]
            async fn $name() {
                if let Some(f) = super::Fx::postgres() {
                    super::$name(f).await
                }
            })*
        }
    };
}

fn intake(job: &str, group: &str) -> Intake {
    Intake {
        links: Default::default(),
        job_key: format!("id:{job}"),
        job: job.into(),
        group_key: group.into(),
        firing: true,
        firing_set: "s".into(),
        labels: BTreeMap::from([("job_id".to_string(), job.to_string())]),
        sender: String::new(),
        // Known: these tests are about the queue, not about fairness (`fairness_tests`).
        known: true,
    }
}

fn notice(kind: NoticeKind, group: &str, key: &str) -> Notice {
    Notice {
        links: Default::default(),
        kind,
        group_key: group.into(),
        labels: BTreeMap::new(),
        job: JobRef { name: "j".into(), id: "i".into() },
        verdict: None,
        verdict_id: None,
        verdict_url: None,
        reason: (kind == NoticeKind::CouldNotDiagnose).then(|| "backend down".into()),
        firing: true,
        changed: false,
        idempotency_key: key.into(),
        at_ms: T0,
        episode: Default::default(),
        maybe_repeat: false,
        incident: None,
        incident_view: None,
        incident_parent: None,
    }
}

/// A completion that stores no verdict and enqueues `notices` (destination, notice).
fn completion(notices: Vec<(&str, Notice)>, now_ms: i64) -> Completion {
    let notices: Vec<NewNotice> = notices
        .into_iter()
        .map(|(d, n)| NewNotice {
            destination: d.into(),
            remember_verdict: Some(format!("v-{}", n.idempotency_key)),
            notice: n,
        })
        .collect();
    Completion { verdict: None, plan: Box::new(move |_, _| notices.into()), now_ms }
}

async fn stored(store: &Store, intakes: Vec<Intake>, now: i64) -> Enqueued {
    store.enqueue(intakes, now, COALESCE, MAX).await.unwrap()
}

/// Enqueues notices for delivery through a diagnosis of job `job`.
async fn with_notices(store: &Store, job: &str, notices: Vec<(&str, Notice)>) {
    stored(store, vec![intake(job, "g")], T0).await;
    let item = store.claim_work(T0 + COALESCE).await.unwrap().expect("due");
    store.complete(&item, completion(notices, T0 + COALESCE)).await.unwrap();
}

/// Runs SQL on the database file from a second connection (as an operator or a damaged
/// disk would change it).
fn poke(dir: &std::path::Path, sql: &str) {
    let conn = rusqlite::Connection::open(dir.join("culprit.db")).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
    conn.execute_batch(sql).unwrap();
}

fn metric(m: &Metrics, line_start: &str) -> f64 {
    m.encode()
        .lines()
        .find(|l| l.starts_with(line_start))
        .and_then(|l| l.rsplit_once(' '))
        .map_or(0.0, |(_, v)| v.parse().unwrap())
}

// ---------------------------------------------------------------------------------------
// Work: intake, claim, retry, completion
// ---------------------------------------------------------------------------------------

async fn webhooks_for_one_job_coalesce_into_one_diagnosis_due_after_the_window(f: Fx) {
    let store = f.open();
    assert_eq!(stored(&store, vec![intake("a", "g1")], T0).await, Enqueued::Stored { jobs: 1, created: 1, depth: 1 });
    assert_eq!(
        stored(&store, vec![intake("a", "g2")], T0 + 5).await,
        Enqueued::Stored { jobs: 1, created: 0, depth: 1 }
    );
    assert_eq!(store.claim_work(T0 + COALESCE - 1).await.unwrap(), None, "not due before the window ends");
    let item = store.claim_work(T0 + COALESCE).await.unwrap().unwrap();
    assert_eq!(item.groups.keys().collect::<Vec<_>>(), ["g1", "g2"]);
    assert_eq!(store.claim_work(T0 + COALESCE).await.unwrap(), None, "claimed once");
}

async fn a_job_has_at_most_one_running_diagnosis_and_the_next_waits_for_it(f: Fx) {
    let store = f.open();
    stored(&store, vec![intake("a", "g1")], T0).await;
    let first = store.claim_work(T0 + COALESCE).await.unwrap().unwrap();
    // A webhook while it runs queues the next diagnosis of the job …
    assert_eq!(
        stored(&store, vec![intake("a", "g2")], T0 + COALESCE).await,
        Enqueued::Stored { jobs: 1, created: 1, depth: 2 }
    );
    // … which is due but not claimable while the first runs; another job is.
    stored(&store, vec![intake("b", "g3")], T0 + COALESCE).await;
    let later = T0 + 3 * COALESCE;
    assert_eq!(store.next_work_ms().await.unwrap(), Some(T0 + 2 * COALESCE), "job b's due time; a's next waits");
    assert_eq!(store.claim_work(later).await.unwrap().unwrap().job, "b");
    assert_eq!(store.claim_work(later).await.unwrap(), None);
    store.complete(&first, completion(vec![], later)).await.unwrap();
    let next = store.claim_work(later).await.unwrap().unwrap();
    assert_eq!((next.job.as_str(), next.groups.keys().map(String::as_str).collect::<Vec<_>>()), ("a", vec!["g2"]));
}

async fn the_queue_bound_is_hard_and_a_webhook_is_stored_all_or_nothing(f: Fx) {
    let store = f.open();
    let enqueue = |intakes, max| store.enqueue(intakes, T0, COALESCE, max);
    assert!(matches!(
        enqueue(vec![intake("a", "g"), intake("b", "g")], 3).await.unwrap(),
        Enqueued::Stored { created: 2, .. }
    ));
    // Two more jobs would make 4 > 3: neither is stored.
    assert_eq!(enqueue(vec![intake("c", "g"), intake("d", "g")], 3).await.unwrap(), Enqueued::QueueFull { depth: 2 });
    assert_eq!(store.depths().await.unwrap().work, 2);
    // Merging into a waiting diagnosis does not grow the queue: accepted even when full.
    assert!(matches!(enqueue(vec![intake("c", "g")], 3).await.unwrap(), Enqueued::Stored { created: 1, depth: 3, .. }));
    assert!(matches!(
        enqueue(vec![intake("a", "g9")], 3).await.unwrap(),
        Enqueued::Stored { created: 0, depth: 3, .. }
    ));
    assert_eq!(enqueue(vec![intake("e", "g")], 3).await.unwrap(), Enqueued::QueueFull { depth: 3 });
}

async fn a_resolved_group_needs_no_diagnosis_and_is_stored_when_the_queue_is_full(f: Fx) {
    let store = f.open();
    stored(&store, vec![intake("a", "g"), intake("b", "g")], T0).await;
    let running = store.claim_work(T0 + COALESCE).await.unwrap().unwrap();
    assert_eq!(running.job, "a");
    let enqueue = |intakes| store.enqueue(intakes, T0 + COALESCE, COALESCE, 2);
    // Job a fires again while its diagnosis runs: a new diagnosis would make 3 > 2.
    assert_eq!(enqueue(vec![intake("a", "g")]).await.unwrap(), Enqueued::QueueFull { depth: 2 });
    // Its group resolves instead: a row waits behind the running diagnosis, but it needs no
    // diagnosis, so the bound (about diagnosis work) does not refuse it.
    let resolved = Intake { firing: false, ..intake("a", "g") };
    assert!(matches!(enqueue(vec![resolved]).await.unwrap(), Enqueued::Stored { created: 1, depth: 3, .. }));
    // Job c firing is still refused: 3 + 1 > 2.
    assert_eq!(enqueue(vec![intake("c", "g")]).await.unwrap(), Enqueued::QueueFull { depth: 3 });
}

/// A "could not diagnose" notice of `job` for group `group`, keyed `key`.
fn could_not(job: &str, group: &str, key: &str) -> Notice {
    let mut n = notice(NoticeKind::CouldNotDiagnose, group, key);
    n.job = JobRef { name: job.into(), id: String::new() };
    n.reason = Some(format!("Prometheus has no job named {job}"));
    n
}

async fn could_not_diagnose_notices_of_one_group_fold_into_one_once_its_diagnoses_are_done(f: Fx) {
    let store = f.open();
    stored(&store, vec![intake("a", "g"), intake("b", "g"), intake("c", "g")], T0).await;
    let now = T0 + COALESCE;
    let (a, b) = (store.claim_work(now).await.unwrap().unwrap(), store.claim_work(now).await.unwrap().unwrap());
    store.complete(&a, completion(vec![("slack", could_not("a", "g", "ka"))], now)).await.unwrap();
    store.complete(&b, completion(vec![("slack", could_not("b", "g", "kb"))], now)).await.unwrap();
    // Job c's diagnosis of the same group still waits: the notices wait for it.
    assert_eq!(store.claim_delivery("slack", now).await.unwrap(), None);
    assert_eq!(store.next_delivery_ms("slack").await.unwrap(), None);
    let c = store.claim_work(now).await.unwrap().unwrap();
    store.complete(&c, completion(vec![("slack", could_not("c", "g", "kc"))], now)).await.unwrap();
    // One notice for the group: a's, naming b and c, failed for the same reason.
    let row = store.claim_delivery("slack", now).await.unwrap().unwrap();
    assert_eq!(row.notice.idempotency_key, "ka");
    assert_eq!(
        row.notice.reason.as_deref(),
        Some(
            "Prometheus has no job named a\nNot diagnosed either in this alert group, for the same reason: 2 more jobs: b, c"
        )
    );
    store.delivered(&row, None, now).await.unwrap();
    assert_eq!(store.claim_delivery("slack", now).await.unwrap(), None);
    assert_eq!(store.depths().await.unwrap().outbox, 0);

    // A diagnosis of the group that takes longer than FOLD_WAIT_MAX_MS holds nothing.
    stored(&store, vec![intake("d", "g2"), intake("e", "g2")], now).await;
    let later = now + COALESCE;
    let d = store.claim_work(later).await.unwrap().unwrap();
    store.complete(&d, completion(vec![("slack", could_not("d", "g2", "kd"))], later)).await.unwrap();
    assert_eq!(store.claim_delivery("slack", later).await.unwrap(), None);
    let row = store.claim_delivery("slack", later + FOLD_WAIT_MAX_MS).await.unwrap().unwrap();
    assert_eq!(row.notice.reason.as_deref(), Some("Prometheus has no job named d"));
}

#[test]
fn a_folded_notice_names_at_most_ten_jobs_and_counts_the_rest() {
    let mut head = could_not("j0", "g", "k0");
    let others: Vec<Notice> = (1..50).map(|i| could_not(&format!("j{i}"), "g", &format!("k{i}"))).collect();
    fold_could_not_diagnose(&mut head, &others);
    // 49 others: 10 named (j1 … j10), 39 counted.
    assert_eq!(
        head.reason.as_deref(),
        Some(
            "Prometheus has no job named j0\nNot diagnosed either in this alert group, for the same reason: 49 more jobs: j1, j2, j3, j4, j5, j6, j7, j8, j9, j10 and 39 more"
        )
    );
    let mut head = could_not("x", "g", "k");
    let mut other = could_not("y", "g", "k2");
    other.reason = Some("Prometheus timed out".into());
    fold_could_not_diagnose(&mut head, &[other, could_not("x", "g", "k3")]);
    assert!(head.reason.unwrap().ends_with("each for its own reason (culprit's log has them): 1 more job: y"));
}

async fn a_failed_diagnosis_is_retried_later_and_merges_with_webhooks_that_came_meanwhile(f: Fx) {
    let store = f.open();
    stored(&store, vec![intake("a", "g1")], T0).await;
    let item = store.claim_work(T0 + COALESCE).await.unwrap().unwrap();
    // Alone: pending again at the due time, one attempt more, the first failure kept.
    store.retry_work(&item, T0 + 20_000, T0 + COALESCE).await.unwrap();
    assert_eq!(store.claim_work(T0 + 19_999).await.unwrap(), None);
    let again = store.claim_work(T0 + 20_000).await.unwrap().unwrap();
    assert_eq!((again.id, again.attempts, again.first_failure_ms), (item.id, 1, Some(T0 + COALESCE)));
    // With a newer pending diagnosis of the job: one row with both groups, due at the
    // earlier of the two times.
    stored(&store, vec![intake("a", "g2")], T0 + 20_000).await;
    store.retry_work(&again, T0 + 90_000, T0 + COALESCE).await.unwrap();
    assert_eq!(store.depths().await.unwrap().work, 1);
    let merged = store.claim_work(T0 + 30_000).await.unwrap().unwrap();
    assert_eq!(merged.groups.keys().collect::<Vec<_>>(), ["g1", "g2"]);
    assert_eq!((merged.attempts, merged.first_failure_ms), (2, Some(T0 + COALESCE)));
}

async fn completing_stores_the_verdict_and_notices_and_a_replay_adds_nothing(f: Fx) {
    let store = f.open();
    stored(&store, vec![intake("a", "g")], T0).await;
    let item = store.claim_work(T0 + COALESCE).await.unwrap().unwrap();
    let make = |seen: Arc<std::sync::Mutex<Vec<LastVerdicts>>>| Completion {
        verdict: Some(("j".into(), r#"{"schema":"culprit.verdict/v1"}"#.into())),
        plan: Box::new(move |verdict_id, last| {
            seen.lock().unwrap().push(last.clone());
            let mut n = notice(NoticeKind::Verdict, "g", "k1");
            n.verdict_id = verdict_id;
            vec![NewNotice { destination: "slack".into(), notice: n, remember_verdict: Some("v1".into()) }].into()
        }),
        now_ms: T0 + COALESCE,
    };
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let done = store.complete(&item, make(seen.clone())).await.unwrap();
    assert_eq!(done.notices, 1);
    let id = done.verdict_id.unwrap();
    assert_eq!(store.verdict(id).await.unwrap().unwrap().verdict["schema"], "culprit.verdict/v1");
    assert_eq!(store.depths().await.unwrap(), Depths { work: 0, outbox: 1, dead_letters: 0 });
    // The same diagnosis replayed: nothing is added. On SQLite (a crash before the work
    // row went) the notice is there already and the planner sees the verdict it
    // remembered; on PostgreSQL the replica no longer holds the work, so nothing is
    // planned at all.
    let replay = store.complete(&item, make(seen.clone())).await.unwrap();
    assert_eq!(replay.notices, 0);
    assert_eq!(store.depths().await.unwrap().outbox, 1);
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0], LastVerdicts::default());
    if f.is_postgres() {
        assert_eq!((seen.len(), replay.verdict_id), (1, None));
    } else {
        assert_eq!(seen[1].get("slack", "g").as_deref(), Some("v1"));
    }
}

// ---------------------------------------------------------------------------------------
// Outbox: per-group order, priority, recording
// ---------------------------------------------------------------------------------------

async fn a_groups_notices_go_in_order_one_at_a_time_and_groups_do_not_wait_for_each_other(f: Fx) {
    let store = f.open();
    with_notices(
        &store,
        "a",
        vec![
            ("slack", notice(NoticeKind::Verdict, "g1", "1")),
            ("slack", notice(NoticeKind::Resolved, "g1", "2")),
            ("slack", notice(NoticeKind::Verdict, "g2", "3")),
        ],
    )
    .await;
    let now = T0 + COALESCE;
    let first = store.claim_delivery("slack", now).await.unwrap().unwrap();
    assert_eq!((first.notice.idempotency_key.as_str(), first.attempts, first.unsure), ("1", 1, false));
    // g1's second notice waits for its first; g2 goes meanwhile.
    let second = store.claim_delivery("slack", now).await.unwrap().unwrap();
    assert_eq!(second.notice.idempotency_key, "3");
    assert_eq!(store.claim_delivery("slack", now).await.unwrap(), None);
    // g1's first is told to wait (Retry-After): g1 waits, nothing else does.
    store.retry_delivery(&first, now + 60_000, "slack: ratelimited", false).await.unwrap();
    store.delivered(&second, None, now).await.unwrap();
    assert_eq!(store.claim_delivery("slack", now + 59_999).await.unwrap(), None);
    assert_eq!(store.next_delivery_ms("slack").await.unwrap(), Some(now + 60_000));
    let retried = store.claim_delivery("slack", now + 60_000).await.unwrap().unwrap();
    assert_eq!((retried.id, retried.attempts), (first.id, 2));
    store.delivered(&retried, Some(serde_json::json!({"channel": "C1", "ts": "1.2"})), now).await.unwrap();
    let last = store.claim_delivery("slack", now + 60_000).await.unwrap().unwrap();
    assert_eq!(last.notice.idempotency_key, "2");
    assert_eq!(last.group_state, Some(serde_json::json!({"channel": "C1", "ts": "1.2"})), "the state of the group");
    // Another destination has its own queue.
    assert_eq!(store.claim_delivery("pagerduty", now).await.unwrap(), None);
}

async fn could_not_diagnose_notices_wait_while_a_verdict_is_due(f: Fx) {
    let store = f.open();
    let mut notices: Vec<(&str, Notice)> =
        (0..5).map(|i| ("slack", notice(NoticeKind::CouldNotDiagnose, &format!("f{i}"), &format!("f{i}")))).collect();
    notices.push(("slack", notice(NoticeKind::Verdict, "v", "v")));
    notices.push(("slack", notice(NoticeKind::Resolved, "r", "r")));
    with_notices(&store, "a", notices).await;
    let now = T0 + COALESCE;
    let mut order = Vec::new();
    while let Some(row) = store.claim_delivery("slack", now).await.unwrap() {
        order.push(row.notice.idempotency_key.clone());
        store.delivered(&row, None, now).await.unwrap();
    }
    // The four other "could not diagnose" notices (their own groups) folded into f0: one
    // per destination, never one per group.
    assert_eq!(order, ["v", "r", "f0"]);
    assert_eq!(store.depths().await.unwrap().outbox, 0);
}

async fn a_failed_notice_is_final_and_the_next_of_its_group_goes(f: Fx) {
    let store = f.open();
    with_notices(
        &store,
        "a",
        vec![("slack", notice(NoticeKind::Verdict, "g", "1")), ("slack", notice(NoticeKind::Resolved, "g", "2"))],
    )
    .await;
    let now = T0 + COALESCE;
    let row = store.claim_delivery("slack", now).await.unwrap().unwrap();
    store.fail_delivery(&row, "slack: channel_not_found", now).await.unwrap();
    assert_eq!(store.claim_delivery("slack", now).await.unwrap().unwrap().notice.idempotency_key, "2");
    assert_eq!(store.depths().await.unwrap().outbox, 1);
}

// ---------------------------------------------------------------------------------------
// Crash recovery
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn after_a_crash_running_work_is_pending_again_and_sends_in_flight_are_unsure() {
    let tmp = tempfile::tempdir().unwrap();
    let (item_id, row_id) = {
        let store = open(tmp.path());
        with_notices(&store, "a", vec![("slack", notice(NoticeKind::Verdict, "g", "1"))]).await;
        stored(&store, vec![intake("b", "g1")], T0).await;
        let item = store.claim_work(T0 + COALESCE).await.unwrap().unwrap();
        // A webhook for b while it runs.
        stored(&store, vec![intake("b", "g2")], T0 + COALESCE).await;
        let row = store.claim_delivery("slack", T0 + COALESCE).await.unwrap().unwrap();
        (item.id, row.id)
        // Dropped without completing or recording: as a crash leaves it.
    };
    let (store, metrics) = open_with(tmp.path());
    assert_eq!(metric(&metrics, "culprit_store_recovered_total{table=\"work\"}"), 1.0);
    assert_eq!(metric(&metrics, "culprit_store_recovered_total{table=\"outbox\"}"), 1.0);
    // b's running diagnosis merged into the one queued meanwhile: both groups, one row.
    let item = store.claim_work(T0 + 2 * COALESCE).await.unwrap().unwrap();
    assert_eq!(
        (item.job.as_str(), item.groups.keys().map(String::as_str).collect::<Vec<_>>()),
        ("b", vec!["g1", "g2"])
    );
    assert_ne!(item.id, item_id, "the newer row carries both");
    let row = store.claim_delivery("slack", T0 + COALESCE).await.unwrap().unwrap();
    assert_eq!((row.id, row.unsure, row.attempts), (row_id, true, 2));
    // Asking failed (retryable): still unsure at the next attempt.
    store.retry_delivery(&row, T0, "slack: ratelimited", true).await.unwrap();
    assert!(store.claim_delivery("slack", T0 + COALESCE).await.unwrap().unwrap().unsure);
}

async fn a_clean_restart_recovers_nothing(f: Fx) {
    drop(f.open());
    let (_store, metrics) = f.open_with();
    assert!(metrics.encode().contains("culprit_store_recovered_total{table=\"work\"} 0"));
}

// ---------------------------------------------------------------------------------------
// Dead letters
// ---------------------------------------------------------------------------------------

async fn an_undecodable_outbox_row_goes_to_the_dead_letter_table_and_delivery_goes_on(f: Fx) {
    let (store, metrics) = f.open_with();
    with_notices(
        &store,
        "a",
        vec![
            ("slack", notice(NoticeKind::Verdict, "g1", "1")),
            ("slack", notice(NoticeKind::Verdict, "g2", "2")),
            ("slack", notice(NoticeKind::Verdict, "g3", "3")),
            ("slack", notice(NoticeKind::Verdict, "g4", "4")),
        ],
    )
    .await;
    // Three kinds of damage: not JSON, a blob, JSON of the wrong shape.
    // (PostgreSQL's text cannot hold a blob: an empty notice there.)
    f.poke2(
        "UPDATE outbox SET notice = 'not json' WHERE idem_key = '1';
         UPDATE outbox SET notice = x'00ff' WHERE idem_key = '2';
         UPDATE outbox SET notice = '{\"kind\": \"telegram\"}' WHERE idem_key = '3';",
        "UPDATE outbox SET notice = 'not json' WHERE idem_key = '1';
         UPDATE outbox SET notice = '' WHERE idem_key = '2';
         UPDATE outbox SET notice = '{\"kind\": \"telegram\"}' WHERE idem_key = '3';",
    );
    let row = store.claim_delivery("slack", T0 + COALESCE).await.unwrap().unwrap();
    assert_eq!(row.notice.idempotency_key, "4");
    let dead = store.dead_letters(10).await.unwrap();
    assert_eq!(dead.len(), 3);
    assert!(dead.iter().all(|d| d.source == "outbox" && d.destination.as_deref() == Some("slack")));
    assert!(dead.iter().any(|d| d.payload["notice"] == "not json" && d.error.contains("notice")), "{dead:#?}");
    let blob = if f.is_postgres() { "" } else { "x'00ff'" };
    assert!(dead.iter().any(|d| d.payload["notice"] == blob), "{dead:#?}");
    assert_eq!(metric(&metrics, "culprit_dead_letters_total{table=\"outbox\"}"), 3.0);
    assert_eq!(store.depths().await.unwrap(), Depths { work: 0, outbox: 1, dead_letters: 3 });
}

async fn an_undecodable_work_row_is_moved_aside_at_claim_and_at_intake(f: Fx) {
    let (store, metrics) = f.open_with();
    stored(&store, vec![intake("a", "g"), intake("b", "g"), intake("c", "g")], T0).await;
    f.poke2(
        "UPDATE work SET groups = '[1, 2' WHERE job = 'a';
         UPDATE work SET labels = x'01' WHERE job = 'b';
         UPDATE work SET groups = 'garbage' WHERE job = 'c';",
        "UPDATE work SET groups = '[1, 2' WHERE job = 'a';
         UPDATE work SET labels = '' WHERE job = 'b';
         UPDATE work SET groups = 'garbage' WHERE job = 'c';",
    );
    // An intake for c merges into a row it cannot read: the row goes, a new one is made.
    assert!(matches!(stored(&store, vec![intake("c", "g2")], T0).await, Enqueued::Stored { created: 1, .. }));
    let item = store.claim_work(T0 + COALESCE).await.unwrap().unwrap();
    assert_eq!((item.job.as_str(), item.groups.keys().map(String::as_str).collect::<Vec<_>>()), ("c", vec!["g2"]));
    assert_eq!(store.claim_work(T0 + COALESCE).await.unwrap(), None);
    let dead = store.dead_letters(10).await.unwrap();
    assert_eq!(dead.iter().map(|d| d.payload["job"].as_str().unwrap()).collect::<Vec<_>>(), ["b", "a", "c"]);
    assert_eq!(metric(&metrics, "culprit_dead_letters_total{table=\"work\"}"), 3.0);
}

async fn an_undecodable_group_state_or_verdict_is_moved_aside_and_the_rest_is_served(f: Fx) {
    let store = f.open();
    with_notices(
        &store,
        "a",
        vec![("slack", notice(NoticeKind::Verdict, "g", "1")), ("slack", notice(NoticeKind::Resolved, "g", "2"))],
    )
    .await;
    let row = store.claim_delivery("slack", T0 + COALESCE).await.unwrap().unwrap();
    store.delivered(&row, Some(serde_json::json!({"channel": "C1", "ts": "1.2"})), T0).await.unwrap();
    f.poke("UPDATE group_state SET state = '{\"channel\": ' WHERE group_key = 'g';");
    // The group's next notice goes without a state (a new message, not a lost one).
    let next = store.claim_delivery("slack", T0 + COALESCE).await.unwrap().unwrap();
    assert_eq!((next.notice.idempotency_key.as_str(), next.group_state.clone()), ("2", None));
    let dead = store.dead_letters(10).await.unwrap();
    assert_eq!((dead[0].source.as_str(), dead[0].payload["group_key"].as_str()), ("group_state", Some("g")));

    for i in 0..3 {
        stored(&store, vec![intake(&format!("v{i}"), "g")], T0).await;
        let item = store.claim_work(T0 + COALESCE).await.unwrap().unwrap();
        let c = Completion {
            verdict: Some(("j".into(), format!("{{\"n\": {i}}}"))),
            plan: Box::new(|_, _| Default::default()),
            now_ms: T0,
        };
        store.complete(&item, c).await.unwrap();
    }
    f.poke("UPDATE verdicts SET json = 'nope' WHERE json = '{\"n\": 1}';");
    let listed: Vec<serde_json::Value> = store.verdicts(10).await.unwrap().into_iter().map(|v| v.verdict).collect();
    assert_eq!(listed, [serde_json::json!({"n": 2}), serde_json::json!({"n": 0})]);
    assert_eq!(store.dead_letters(10).await.unwrap()[0].source, "verdicts");
}

#[path = "sqlite_faults_tests.rs"]
mod sqlite_faults;

// ---------------------------------------------------------------------------------------
// Pruning
// ---------------------------------------------------------------------------------------

async fn finished_rows_are_pruned_by_age_and_by_count_and_waiting_ones_never(f: Fx) {
    let store = f.open();
    let day = 86_400_000;
    // Six notices in six groups; five delivered on days 0..4, one still waiting.
    with_notices(
        &store,
        "a",
        (0..6).map(|i| ("slack", notice(NoticeKind::Verdict, &format!("g{i}"), &format!("{i}")))).collect(),
    )
    .await;
    for d in 0..5 {
        let row = store.claim_delivery("slack", T0 + COALESCE).await.unwrap().unwrap();
        store.delivered(&row, Some(serde_json::json!({"n": d})), T0 + d * day).await.unwrap();
    }
    // Seven days after day 0, a 7-day retention removes day 0's row only (and its group's
    // state); a count of 3 then keeps the newest three of the four left.
    let p = Prune { now_ms: T0 + 7 * day + 1, older_than_ms: 7 * day, keep_rows: 3, verdicts_kept: 1000 };
    let pruned = store.prune(p).await.unwrap();
    assert_eq!((pruned.outbox, pruned.group_state), (2, 1));
    assert_eq!(store.depths().await.unwrap().outbox, 1, "the waiting notice stays");
    let again = store.prune(p).await.unwrap();
    assert_eq!(again, Pruned::default());
    // The pruned group starts afresh; the kept ones keep their state.
    let groups = f.column("SELECT group_key FROM group_state ORDER BY group_key");
    assert_eq!(groups, ["g1", "g2", "g3", "g4", "g5"]);
}

async fn verdicts_and_dead_letters_are_pruned_too(f: Fx) {
    let store = f.open();
    for i in 0..5 {
        stored(&store, vec![intake(&format!("v{i}"), "g")], T0).await;
        let item = store.claim_work(T0 + COALESCE).await.unwrap().unwrap();
        let c = Completion {
            verdict: Some(("j".into(), "{}".into())),
            plan: Box::new(|_, _| Default::default()),
            now_ms: T0 + i,
        };
        store.complete(&item, c).await.unwrap();
    }
    stored(&store, vec![intake("x", "g"), intake("y", "g")], T0).await;
    f.poke("UPDATE work SET groups = 'bad';");
    assert_eq!(store.claim_work(T0 + COALESCE).await.unwrap(), None);
    let p = Prune { now_ms: T0 + 10, older_than_ms: 100_000, keep_rows: 1, verdicts_kept: 2 };
    let pruned = store.prune(p).await.unwrap();
    assert_eq!((pruned.verdicts, pruned.dead_letters), (3, 1));
    assert_eq!(store.verdicts(10).await.unwrap().len(), 2);
}

both![
    webhooks_for_one_job_coalesce_into_one_diagnosis_due_after_the_window,
    a_job_has_at_most_one_running_diagnosis_and_the_next_waits_for_it,
    the_queue_bound_is_hard_and_a_webhook_is_stored_all_or_nothing,
    a_resolved_group_needs_no_diagnosis_and_is_stored_when_the_queue_is_full,
    could_not_diagnose_notices_of_one_group_fold_into_one_once_its_diagnoses_are_done,
    a_failed_diagnosis_is_retried_later_and_merges_with_webhooks_that_came_meanwhile,
    completing_stores_the_verdict_and_notices_and_a_replay_adds_nothing,
    a_groups_notices_go_in_order_one_at_a_time_and_groups_do_not_wait_for_each_other,
    could_not_diagnose_notices_wait_while_a_verdict_is_due,
    a_failed_notice_is_final_and_the_next_of_its_group_goes,
    a_clean_restart_recovers_nothing,
    an_undecodable_outbox_row_goes_to_the_dead_letter_table_and_delivery_goes_on,
    an_undecodable_work_row_is_moved_aside_at_claim_and_at_intake,
    an_undecodable_group_state_or_verdict_is_moved_aside_and_the_rest_is_served,
    finished_rows_are_pruned_by_age_and_by_count_and_waiting_ones_never,
    verdicts_and_dead_letters_are_pruned_too,
];

/// The follow-up of a weak verdict, on both backends.
#[path = "rediagnosis_tests.rs"]
mod rediagnosis;

#[path = "fairness_tests.rs"]
mod fairness;

/// Priorities under load: claim classes, newest first under a deep queue, delivery rank.
#[path = "priority_tests.rs"]
mod priority;

/// One job through several alert groups, on both backends.
#[path = "episode_tests.rs"]
mod episode;

/// Incident rows, on both backends.
#[path = "incident_tests.rs"]
mod incidents;

/// The notice a Slack button looks up, on both backends.
#[path = "verdict_notice_tests.rs"]
mod verdict_notice;

#[path = "replica_tests.rs"]
mod replicas;
use replicas::replica;

#[tokio::test]
async fn one_process_on_sqlite_keeps_no_pacing_slots() {
    let store = Fx::sqlite().open();
    assert!(!store.paces_replicas());
    assert_eq!(store.reserve_pace("slack:x:#alerts", 1_000).await.unwrap(), None);
}
