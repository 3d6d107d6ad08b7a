//! SQLite's own faults: a full disk, corruption, a second process, file modes, the
//! commits of the intake writer, a store written by culprit 0.1.0.

use super::*;

#[tokio::test]
async fn on_a_full_disk_every_write_is_an_error_that_changes_nothing_and_all_works_once_it_frees() {
    let tmp = tempfile::tempdir().unwrap();
    let disk = faulty_disk::FaultyDir::new(tmp.path());
    let (store, metrics) = open_with(tmp.path());
    with_notices(&store, "a", vec![("slack", notice(NoticeKind::Verdict, "g", "1"))]).await;
    stored(&store, vec![intake("b", "g")], T0).await;
    assert!(store.ready(T0).await.is_ok());

    disk.fill();
    fn full<T: std::fmt::Debug>(r: Result<T, StoreError>) -> StoreErrorKind {
        r.unwrap_err().kind
    }
    assert_eq!(full(store.enqueue(vec![intake("c", "g")], T0, COALESCE, MAX).await), StoreErrorKind::Full);
    assert_eq!(full(store.claim_work(T0 + COALESCE).await), StoreErrorKind::Full);
    assert_eq!(full(store.claim_delivery("slack", T0 + COALESCE).await), StoreErrorKind::Full);
    // The same time as the last check: the check writes all the same.
    let ready = store.ready(T0).await.unwrap_err();
    assert!(ready.starts_with("store cannot write: database or disk is full"), "{ready}");
    // Reads still answer, and count from the database: nothing claimed, nothing lost.
    assert_eq!(store.depths().await.unwrap(), Depths { work: 1, outbox: 1, dead_letters: 0 });
    assert!(metric(&metrics, "culprit_store_errors_total{operation=\"claim_work\",kind=\"full\"}") >= 1.0);

    disk.free();
    assert!(store.ready(T0 + 2).await.is_ok());
    // The failed claims left nothing half-done: each row is claimed exactly once now.
    let item = store.claim_work(T0 + COALESCE).await.unwrap().unwrap();
    assert_eq!(item.job, "b");
    assert_eq!(store.claim_work(T0 + COALESCE).await.unwrap(), None);
    let row = store.claim_delivery("slack", T0 + COALESCE).await.unwrap().unwrap();
    assert_eq!((row.attempts, row.unsure), (1, false), "the failed claim did not count as an attempt");

    // A commit that fails after a send leaves the row in flight; once the disk frees the
    // delivery is recorded and nothing is claimed twice.
    disk.fill();
    assert_eq!(full(store.delivered(&row, None, T0).await), StoreErrorKind::Full);
    assert_eq!(full(store.complete(&item, completion(vec![], T0)).await), StoreErrorKind::Full);
    assert_eq!(full(store.retry_work(&item, T0, T0).await), StoreErrorKind::Full);
    assert_eq!(full(store.retry_delivery(&row, T0, "x", false).await), StoreErrorKind::Full);
    assert_eq!(full(store.fail_delivery(&row, "x", T0).await), StoreErrorKind::Full);
    disk.free();
    assert_eq!(store.claim_delivery("slack", T0 + COALESCE).await.unwrap(), None, "still in flight");
    store.delivered(&row, None, T0).await.unwrap();
    store.complete(&item, completion(vec![], T0)).await.unwrap();
    assert_eq!(store.depths().await.unwrap(), Depths { work: 0, outbox: 0, dead_letters: 0 });
}

#[test]
fn the_intake_connection_syncs_every_commit_with_synchronous_full_and_not_with_normal() {
    // SQLite in WAL mode: FULL (2) syncs the WAL at every commit, before the commit is
    // visible; NORMAL (1) leaves it to checkpoints. The writer's connection is opened so.
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("culprit.db");
    for (sync, pragma) in [(crate::config::Synchronous::Full, 2), (crate::config::Synchronous::Normal, 1)] {
        let conn = sqlite::open_conn(&path, sync).unwrap();
        assert_eq!(conn.pragma_query_value(None, "synchronous", |r| r.get::<_, i64>(0)).unwrap(), pragma);
        assert_eq!(conn.pragma_query_value(None, "journal_mode", |r| r.get::<_, String>(0)).unwrap(), "wal");
    }
}

#[tokio::test]
async fn each_webhook_is_answered_after_the_commit_that_holds_it_and_one_that_changes_nothing_writes_nothing() {
    // Five webhooks one after another, each awaited: no commit can hold two, so five.
    let tmp = tempfile::tempdir().unwrap();
    let (store, metrics) = open_with(tmp.path());
    for job in ["a", "b", "c", "d", "e"] {
        stored(&store, vec![intake(job, "g")], T0).await;
    }
    assert_eq!(metric(&metrics, "culprit_store_intake_commits_total"), 5.0, "{}", metrics.encode());
    assert_eq!(store.depths().await.unwrap().work, 5);
    // `data_version` of another connection moves when a commit changed the database.
    let other = rusqlite::Connection::open(tmp.path().join("culprit.db")).unwrap();
    let version = || other.pragma_query_value(None, "data_version", |r| r.get::<_, i64>(0)).unwrap();
    let before = version();
    // Alertmanager notifies the same group again (its repeat, or a retry): merged, nothing
    // to write.
    assert_eq!(
        stored(&store, vec![intake("a", "g")], T0 + 5).await,
        Enqueued::Stored { jobs: 1, created: 0, depth: 5 }
    );
    assert_eq!(version(), before, "a webhook that changes nothing commits no change");
    // Another alert of the group fires: its firing set changed, so the merge writes.
    let changed = Intake { firing_set: "t".into(), ..intake("a", "g") };
    assert_eq!(stored(&store, vec![changed], T0 + 6).await, Enqueued::Stored { jobs: 1, created: 0, depth: 5 });
    assert_ne!(version(), before);
    let item = store.claim_work(T0 + COALESCE).await.unwrap().unwrap();
    assert_eq!(item.groups["g"].firing_set, "t");
}

#[tokio::test]
async fn a_full_disk_at_start_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let disk = faulty_disk::FaultyDir::new(tmp.path());
    disk.fill();
    let e = Store::open(&config(tmp.path()), Arc::new(Metrics::new())).err().unwrap();
    assert_eq!(e.kind, StoreErrorKind::Full, "{e}");
    disk.free();
    assert!(Store::open(&config(tmp.path()), Arc::new(Metrics::new())).is_ok());
}

#[tokio::test]
async fn page_level_corruption_makes_the_store_not_ready_with_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let store = open(tmp.path());
        for i in 0..200 {
            stored(&store, vec![intake(&format!("job-{i}"), "g")], T0).await;
        }
    }
    poke(tmp.path(), "PRAGMA wal_checkpoint(TRUNCATE);");
    // Scribble over the pages of the `work` table's b-tree (not the schema page).
    let db = tmp.path().join("culprit.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    let page_size: u64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap();
    let root: u64 = conn.query_row("SELECT rootpage FROM sqlite_master WHERE name = 'work'", [], |r| r.get(0)).unwrap();
    drop(conn);
    let mut bytes = std::fs::read(&db).unwrap();
    let at = ((root - 1) * page_size) as usize;
    bytes[at..at + page_size as usize].fill(0xA5);
    std::fs::write(&db, bytes).unwrap();

    let store = open(tmp.path());
    let why = store.ready(T0).await.unwrap_err();
    assert!(why.starts_with("store corrupt: database disk image is malformed"), "{why}");
    assert!(why.contains("move the database file aside"), "{why}");
}

#[tokio::test]
async fn a_second_process_on_the_same_database_is_refused_with_a_clear_message() {
    let tmp = tempfile::tempdir().unwrap();
    let first = open(tmp.path());
    let e = Store::open(&config(tmp.path()), Arc::new(Metrics::new())).err().unwrap();
    assert_eq!(e.kind, StoreErrorKind::InUse);
    assert!(e.message.contains(&format!("another culprit (process {}) is using the store", std::process::id())), "{e}");
    assert!(e.message.contains("culprit.db"), "{e}");
    drop(first);
    assert!(Store::open(&config(tmp.path()), Arc::new(Metrics::new())).is_ok(), "free once the first is gone");
}

#[cfg(unix)]
#[tokio::test]
async fn the_database_its_wal_and_shm_and_the_lock_are_readable_by_the_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    // An older culprit's file, 0644, is narrowed too.
    std::fs::write(tmp.path().join("culprit.db"), b"").unwrap();
    std::fs::set_permissions(tmp.path().join("culprit.db"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let store = open(tmp.path());
    stored(&store, vec![intake("a", "g")], T0).await;
    for name in ["culprit.db", "culprit.db-wal", "culprit.db-shm", "culprit.db.lock"] {
        let mode = std::fs::metadata(tmp.path().join(name)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{name}: {mode:o}");
    }
}

/// The store culprit 0.1.0 left after a crash, checked in as SQL: its schema and rows as
/// 0.1.0 wrote them (its statements, its serializer), made by
/// `tests/data/store-0.1.0/generate.sh` from the 0.1.0 commit, never by today's code.
const STORE_0_1_0: &str = include_str!("../../../tests/data/store-0.1.0/culprit-0.1.0.sql");

#[tokio::test]
async fn a_store_written_by_culprit_0_1_0_is_migrated_and_its_rows_delivered() {
    let tmp = tempfile::tempdir().unwrap();
    rusqlite::Connection::open(tmp.path().join("culprit.db")).unwrap().execute_batch(STORE_0_1_0).unwrap();
    let store = open(tmp.path());
    // Two running rows of one job (0.1.0 allowed that) are one pending row now.
    assert_eq!(store.depths().await.unwrap().work, 1);
    // The verdict first (priority), then the failure, caught sending: unsure.
    let first = store.claim_delivery("slack", T0).await.unwrap().unwrap();
    assert_eq!((first.notice.idempotency_key.as_str(), first.unsure), ("k2", false));
    let second = store.claim_delivery("slack", T0).await.unwrap().unwrap();
    assert_eq!((second.notice.idempotency_key.as_str(), second.unsure), ("k1", true));
    assert_eq!(second.notice.reason.as_deref(), Some("Prometheus: query failed: backend down"));
    // k0 was sent by 0.1.0: nothing more to deliver.
    assert_eq!(store.claim_delivery("slack", T0).await.unwrap(), None);
    // The one pending row of job a holds the groups of both running ones, 0.1.0's labels.
    let a = store.claim_work(T0).await.unwrap().unwrap();
    assert_eq!((a.job.as_str(), a.groups.keys().map(String::as_str).collect::<Vec<_>>()), ("a", vec!["g3", "g4"]));
    assert_eq!(a.groups["g4"].labels["alertname"], "FlinkBackpressure");
    assert_eq!(store.depths().await.unwrap().dead_letters, 0);
}
