//! The SQLite store at stop and start (attack G6, G7, G9, G10): a clean stop leaves
//! `culprit.db` alone holding everything; an empty database where a store was, a WAL
//! damaged, cut in half or missing after a kill are said at start (the log at ERROR,
//! `/readyz` warnings, a metric) with the files kept aside, until `culprit store
//! acknowledge`; a fresh path and a start after a clean stop say nothing; a backup taken
//! while serve writes holds what was acknowledged.
//!
//! Real `culprit serve` processes (stopped with SIGTERM or killed with SIGKILL), real
//! SQLite files damaged the way `tools/corrupt.sh` of the attack did, a real Prometheus
//! (for `/readyz`; no diagnosis runs: `service.coalesce` is 5 minutes).

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use support::serve::{ServeProcess, start};

/// Ten jobs, one webhook each, acknowledged (202) and pending for 5 minutes.
const PENDING: usize = 10;

struct Setup {
    dir: tempfile::TempDir,
    config: PathBuf,
    port: u16,
    _prometheus: support::Server,
}

impl Setup {
    fn new() -> Setup {
        let now = jiff::Timestamp::now().as_millisecond();
        let jobs = support::synthetic_jobs(1, now);
        let prometheus = support::prometheus_with_texts(&[jobs[0].1.clone()], support::free_port());
        let dir = tempfile::tempdir().unwrap();
        let port = support::free_port();
        let text = support::culprit_config(
            dir.path(),
            &prometheus.url,
            "http://127.0.0.1:9",
            "http://127.0.0.1:9",
            "[service]\ncoalesce = \"5m\"\n",
        )
        .replace("listen = \"127.0.0.1:0\"", &format!("listen = \"127.0.0.1:{port}\""));
        let config = dir.path().join("culprit.toml");
        std::fs::write(&config, text).unwrap();
        Setup { dir, config, port, _prometheus: prometheus }
    }

    fn db(&self) -> PathBuf {
        self.dir.path().join("culprit.db")
    }

    fn file(&self, suffix: &str) -> PathBuf {
        PathBuf::from(format!("{}{suffix}", self.db().display()))
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("culprit.log")
    }

    async fn start(&self) -> ServeProcess {
        start(&self.config, self.port, &self.log()).await
    }

    /// A start with [`PENDING`] webhooks acknowledged.
    async fn with_pending(&self) -> ServeProcess {
        let culprit = self.start().await;
        let client = reqwest::Client::new();
        for i in 0..PENDING {
            let hook = support::webhook_for(&format!("{:032x}", i + 1), &format!("job-{i}"), &["a".into()]);
            let r = client.post(format!("{}/webhook/alertmanager", culprit.url)).json(&hook).send().await.unwrap();
            assert_eq!(r.status(), 202);
        }
        assert_eq!(work_depth(&culprit).await, PENDING as f64);
        culprit
    }

    /// The directories `<db>.damaged-*` a start kept files in.
    fn kept(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("culprit.db.damaged-"))
            .collect()
    }

    fn culprit(&self, args: &[&str]) -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_culprit")).args(args).arg("--config").arg(&self.config).output().unwrap()
    }
}

async fn metrics(c: &ServeProcess) -> String {
    reqwest::get(format!("{}/metrics", c.url)).await.unwrap().text().await.unwrap()
}

async fn work_depth(c: &ServeProcess) -> f64 {
    support::metric(&metrics(c).await, "culprit_queue_depth{queue=\"work\"}")
}

async fn readyz(c: &ServeProcess) -> (u16, String) {
    let r = reqwest::get(format!("{}/readyz", c.url)).await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// SIGTERM, and the exit code (0: drained and stopped).
fn terminate(mut c: ServeProcess) -> i32 {
    let status = Command::new("kill").args(["-TERM", &c.child.id().to_string()]).status().unwrap();
    assert!(status.success());
    c.child.wait().unwrap().code().unwrap_or(-1)
}

/// SIGKILL: the process dies with its connections open, as in a crash.
fn kill(mut c: ServeProcess) {
    let status = Command::new("kill").args(["-9", &c.child.id().to_string()]).status().unwrap();
    assert!(status.success());
    c.child.wait().unwrap();
}

fn pending_rows(db: &Path) -> i64 {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row("SELECT COUNT(*) FROM work WHERE state = 'pending'", [], |r| r.get(0)).unwrap()
}

/// The start said `kind` loudly: `/readyz` 200 with the warning, the gauge and the counter,
/// an ERROR line; and the files are kept aside.
async fn said_loudly(s: &Setup, c: &ServeProcess, kind: &str) -> String {
    let (status, body) = readyz(c).await;
    assert_eq!(status, 200, "the store works: ready, with the warning: {body}");
    let json: serde_json::Value = serde_json::from_str(&body).unwrap_or_else(|_| panic!("a JSON answer: {body}"));
    let warnings = json["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{body}");
    let warning = warnings[0].as_str().unwrap().to_string();
    assert!(warning.starts_with(&format!("store {kind} ")), "{warning}");
    assert!(warning.contains("culprit store acknowledge --config FILE"), "the way out: {warning}");
    let m = metrics(c).await;
    assert_eq!(support::metric(&m, "culprit_store_integrity_problems_unacknowledged"), 1.0, "{m}");
    assert_eq!(support::metric(&m, &format!("culprit_store_integrity_problems_total{{kind=\"{kind}\"}}")), 1.0, "{m}");
    let log = std::fs::read_to_string(s.log()).unwrap();
    assert!(log.lines().any(|l| l.contains("ERROR") && l.contains(&format!("store {kind} "))), "{log}");
    assert_eq!(s.kept().len(), 1, "the files as found are kept aside");
    warning
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_stop_leaves_culprit_db_alone_holding_every_acknowledged_webhook_and_the_next_start_says_nothing() {
    let s = Setup::new();
    let c = s.with_pending().await;
    // A fresh path: no warning.
    assert_eq!(readyz(&c).await, (200, "ready\n".to_string()));
    assert_eq!(terminate(c), 0);
    // SQLite removed the log and the shared memory once the last connection closed.
    assert!(!s.file("-wal").exists() && !s.file("-shm").exists(), "{:?}", std::fs::read_dir(s.dir.path()).unwrap());
    // Only culprit.db copied elsewhere: it holds all 10.
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::copy(s.db(), elsewhere.path().join("culprit.db")).unwrap();
    assert_eq!(pending_rows(&elsewhere.path().join("culprit.db")), PENDING as i64);

    let c = s.start().await;
    assert_eq!(readyz(&c).await, (200, "ready\n".to_string()));
    assert_eq!(work_depth(&c).await, PENDING as f64);
    assert_eq!(support::metric(&metrics(&c).await, "culprit_store_integrity_problems_unacknowledged"), 0.0);
    assert!(s.kept().is_empty());
    let log = std::fs::read_to_string(s.log()).unwrap();
    assert!(!log.contains("ERROR"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn culprit_db_truncated_to_0_bytes_with_10_pending_is_said_until_acknowledged() {
    let s = Setup::new();
    assert_eq!(terminate(s.with_pending().await), 0);
    std::fs::File::options().write(true).open(s.db()).unwrap().set_len(0).unwrap();
    let c = s.start().await;
    let warning = said_loudly(&s, &c, "lost").await;
    assert!(warning.contains("is empty (0 bytes)"), "{warning}");
    // The 10 are gone (nothing can bring them back); new webhooks are taken.
    assert_eq!(work_depth(&c).await, 0.0);
    let kept = &s.kept()[0];
    assert_eq!(std::fs::metadata(kept.join("culprit.db")).unwrap().len(), 0, "the file as found");

    // Said again at the next start, until acknowledged (while serve runs).
    assert_eq!(terminate(c), 0);
    let c = s.start().await;
    assert!(readyz(&c).await.1.contains("store lost"));
    let m = metrics(&c).await;
    // Still open, but found by the start before: counted there, not twice.
    assert_eq!(support::metric(&m, "culprit_store_integrity_problems_unacknowledged"), 1.0, "{m}");
    assert_eq!(support::metric(&m, "culprit_store_integrity_problems_total{kind=\"lost\"}"), 0.0, "{m}");
    let out = s.culprit(&["store", "acknowledge"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("acknowledged 1 problem(s)"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(readyz(&c).await, (200, "ready\n".to_string()));
    assert_eq!(support::metric(&metrics(&c).await, "culprit_store_integrity_problems_unacknowledged"), 0.0);
    assert_eq!(terminate(c), 0);
    let c = s.start().await;
    assert_eq!(readyz(&c).await, (200, "ready\n".to_string()));
}

/// The log after a kill with [`PENDING`] webhooks in it, and its frames (4 KiB pages).
async fn killed_with_pending(s: &Setup) -> (Vec<u8>, usize) {
    kill(s.with_pending().await);
    let wal = std::fs::read(s.file("-wal")).unwrap();
    // 32-byte header, then frames of a 24-byte header and a 4096-byte page.
    assert_eq!((wal.len() - 32) % 4120, 0, "a whole log after a kill");
    let frames = (wal.len() - 32) / 4120;
    assert!(frames >= PENDING, "one commit per webhook at least: {frames} frames");
    (wal, frames)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_flipped_in_the_middle_of_the_wal_after_a_kill_are_said_loudly() {
    let s = Setup::new();
    let (mut wal, frames) = killed_with_pending(&s).await;
    // Into the page of the middle frame, as corrupt.sh did.
    let at = 32 + (frames / 2) * 4120 + 24 + 1000;
    wal[at..at + 4].copy_from_slice(&[0x00, 0xff, 0x00, 0xff]);
    std::fs::write(s.file("-wal"), &wal).unwrap();
    let c = s.start().await;
    let warning = said_loudly(&s, &c, "wal_damaged").await;
    assert!(warning.contains("committed transaction(s) follow it"), "{warning}");
    // SQLite kept what came before the damage: fewer than the 10.
    assert!(work_depth(&c).await < PENDING as f64);
    assert_eq!(std::fs::read(s.kept()[0].join("culprit.db-wal")).unwrap(), wal, "the log as found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wal_truncated_to_half_after_a_kill_is_said_loudly() {
    let s = Setup::new();
    let (wal, _) = killed_with_pending(&s).await;
    // Half of 32 + n × 4120 bytes is 16 + n × 2060: never a frame boundary.
    std::fs::write(s.file("-wal"), &wal[..wal.len() / 2]).unwrap();
    let c = s.start().await;
    let warning = said_loudly(&s, &c, "wal_damaged").await;
    assert!(warning.contains("it was cut"), "{warning}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wal_missing_after_a_kill_is_said_loudly() {
    let s = Setup::new();
    killed_with_pending(&s).await;
    // Only culprit.db was kept (a copy of the database file alone).
    std::fs::remove_file(s.file("-wal")).unwrap();
    let c = s.start().await;
    let warning = said_loudly(&s, &c, "wal_missing").await;
    assert!(warning.contains("did not stop cleanly"), "{warning}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_that_is_not_one_refuses_to_start_naming_the_file_and_the_fix() {
    let s = Setup::new();
    std::fs::write(s.db(), vec![0x5a; 8192]).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_culprit")).args(["serve", "--config"]).arg(&s.config).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&s.db().display().to_string()), "{err}");
    assert!(
        err.contains("file is not a database") && err.contains("move") && err.contains("a new, empty store is created"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_taken_while_serve_writes_opens_and_holds_every_webhook_acknowledged_before_it() {
    let s = Setup::new();
    let c = s.with_pending().await;
    // Webhooks go on arriving while the backup is taken.
    let url = c.url.clone();
    let writer = tokio::spawn(async move {
        let client = reqwest::Client::new();
        for i in 0..200 {
            let hook = support::webhook_for(&format!("{:032x}", 1000 + i), &format!("more-{i}"), &["a".into()]);
            let r = client.post(format!("{url}/webhook/alertmanager")).json(&hook).send().await.unwrap();
            assert_eq!(r.status(), 202);
        }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let out_file = s.dir.path().join("backup.db");
    let out = s.culprit(&["store", "backup", out_file.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("one self-contained file"), "{text}");
    writer.await.unwrap();
    // One file, no log beside it; the 10 acknowledged before the backup are all in it.
    assert!(!PathBuf::from(format!("{}-wal", out_file.display())).exists());
    let in_backup = pending_rows(&out_file);
    assert!((PENDING as i64..=PENDING as i64 + 200).contains(&in_backup), "{in_backup}");
    let conn = rusqlite::Connection::open(&out_file).unwrap();
    let ok: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(ok, "ok");
    // serve was not disturbed.
    assert_eq!(work_depth(&c).await, (PENDING + 200) as f64);
    let again = s.culprit(&["store", "backup", out_file.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(2), "an existing file is never overwritten");
}
