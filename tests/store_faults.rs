//! Store faults never wedge the service: a full disk while diagnosing and while
//! delivering, an undecodable row, a damaged file, a second process on the same store.
//!
//! The disk: `support::faulty_disk`, a fault-injecting SQLite VFS (every write under the
//! test's directory fails with `SQLITE_FULL`, what SQLite reports for `ENOSPC`, until the
//! disk is freed). Real SQLite files, a real Prometheus, capture servers for Slack and
//! PagerDuty.

mod support;

use std::time::{Duration, Instant};

use culprit::config::Config;
use culprit::service::server::Application;
use support::capture::Capture;
use support::faulty_disk::FaultyDir;

async fn metrics(app: &Application) -> String {
    reqwest::get(format!("{}/metrics", app.url())).await.unwrap().text().await.unwrap()
}

async fn post(app: &Application, body: &serde_json::Value) -> (u16, String) {
    let r = reqwest::Client::new().post(format!("{}/webhook/alertmanager", app.url())).json(body).send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

async fn ready(app: &Application) -> (u16, String) {
    let r = reqwest::get(format!("{}/readyz", app.url())).await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// Polls culprit's metrics until `series` reaches `at_least`.
async fn wait_metric(app: &Application, series: &str, at_least: f64) {
    let started = Instant::now();
    loop {
        let m = metrics(app).await;
        if support::metric(&m, series) >= at_least {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "{series} never reached {at_least}: {m}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

use support::diagnoses_total as diagnoses;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_disk_stops_intake_and_claims_with_503s_and_once_freed_each_job_is_diagnosed_once() {
    support::init_logs();
    let now = jiff::Timestamp::now().as_millisecond();
    let jobs = support::synthetic_jobs(3, now - 1_000);
    let prom =
        support::prometheus_with_texts(&jobs.iter().map(|j| j.1.clone()).collect::<Vec<_>>(), support::free_port());
    let (slack, pagerduty) = (Capture::start().await, Capture::start().await);
    let tmp = tempfile::tempdir().unwrap();
    let disk = FaultyDir::new(tmp.path());
    let text =
        support::culprit_config(tmp.path(), &prom.url, &slack.url, &pagerduty.url, "[service]\ncoalesce = \"500ms\"\n");
    let app = Application::build(Config::from_toml(&text, "full.toml").unwrap()).await.unwrap();
    for (job, _) in &jobs {
        assert_eq!(post(&app, &support::webhook_for(&job.job_id(), &job.job_name(), &["a".into()])).await.0, 202);
    }
    // The disk fills before the diagnoses are due (500 ms).
    disk.fill();
    let (status, body) = post(&app, &support::webhook_for(&jobs[0].0.job_id(), "x", &["b".into()])).await;
    assert_eq!(status, 503, "Alertmanager retries a 503: {body}");
    assert!(body.contains("database or disk is full"), "{body}");
    let (status, body) = ready(&app).await;
    assert_eq!(status, 503);
    assert!(body.contains("store cannot write: database or disk is full"), "{body}");
    // Claims fail, are counted and retried with backoff; nothing is diagnosed meanwhile.
    wait_metric(&app, "culprit_store_errors_total{operation=\"claim_work\",kind=\"full\"}", 4.0).await;
    let m = metrics(&app).await;
    assert_eq!(diagnoses(&m), 0.0, "{m}");
    assert_eq!(support::metric(&m, "culprit_queue_depth{queue=\"work\"}"), 3.0, "counted in the store: {m}");
    assert!(slack.all().is_empty() && pagerduty.all().is_empty());

    disk.free();
    support::drained(&app).await;
    let m = metrics(&app).await;
    assert_eq!(diagnoses(&m), 3.0, "each job once: {m}");
    assert_eq!(slack.slack_messages().len(), 3);
    assert_eq!(pagerduty.on("/v2/enqueue").len(), 3);
    assert_eq!(ready(&app).await.0, 200);
    assert_eq!(post(&app, &support::webhook_for(&jobs[0].0.job_id(), "x", &["c".into()])).await.0, 202);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_delivery_whose_record_fails_on_a_full_disk_is_recorded_once_freed_and_never_sent_again() {
    support::init_logs();
    let now = jiff::Timestamp::now().as_millisecond();
    let jobs = support::synthetic_jobs(2, now - 1_000);
    let prom =
        support::prometheus_with_texts(&jobs.iter().map(|j| j.1.clone()).collect::<Vec<_>>(), support::free_port());
    let (slack, pagerduty) = (Capture::start().await, Capture::start().await);
    // PagerDuty answers slowly: the disk fills while an event is on its way.
    pagerduty.delay(1_500);
    let tmp = tempfile::tempdir().unwrap();
    let disk = FaultyDir::new(tmp.path());
    let text =
        support::culprit_config(tmp.path(), &prom.url, &slack.url, &pagerduty.url, "[service]\ncoalesce = \"100ms\"\n");
    let app = Application::build(Config::from_toml(&text, "full.toml").unwrap()).await.unwrap();
    for (job, _) in &jobs {
        assert_eq!(post(&app, &support::webhook_for(&job.job_id(), &job.job_name(), &["a".into()])).await.0, 202);
    }
    support::wait_for("a PagerDuty event in flight", Duration::from_secs(60), || {
        pagerduty.in_flight("/v2/enqueue") > 0
    })
    .await;
    disk.fill();
    // The event is accepted, but recording that fails, and is retried.
    wait_metric(&app, "culprit_store_errors_total{operation=\"record_delivery\",kind=\"full\"}", 3.0).await;
    disk.free();
    support::drained(&app).await;
    assert_eq!(pagerduty.on("/v2/enqueue").len(), 2, "one POST per event, none again: {:#?}", pagerduty.all());
    assert_eq!(slack.slack_messages().len(), 2);
    assert_eq!(diagnoses(&metrics(&app).await), 2.0);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_undecodable_notice_is_dead_lettered_visible_and_counted_and_the_others_are_delivered() {
    support::init_logs();
    let now = jiff::Timestamp::now().as_millisecond();
    let jobs = support::synthetic_jobs(3, now - 1_000);
    let prom =
        support::prometheus_with_texts(&jobs.iter().map(|j| j.1.clone()).collect::<Vec<_>>(), support::free_port());
    let (slack, pagerduty) = (Capture::start().await, Capture::start().await);
    // Slack asks every post to wait 3 s: the notices sit in the outbox meanwhile.
    for _ in 0..3 {
        slack.fail_next("/api/chat.postMessage", 429, Some(3), "");
    }
    let tmp = tempfile::tempdir().unwrap();
    let text =
        support::culprit_config(tmp.path(), &prom.url, &slack.url, &pagerduty.url, "[service]\ncoalesce = \"100ms\"\n");
    let app = Application::build(Config::from_toml(&text, "dead.toml").unwrap()).await.unwrap();
    for (job, _) in &jobs {
        assert_eq!(post(&app, &support::webhook_for(&job.job_id(), &job.job_name(), &["a".into()])).await.0, 202);
    }
    support::wait_for("three refused posts", Duration::from_secs(60), || slack.on("/api/chat.postMessage").len() >= 3)
        .await;
    // The second job's Slack notice is damaged on disk.
    let group = support::webhook_for(&jobs[1].0.job_id(), "", &[])["groupKey"].as_str().unwrap().to_string();
    let conn = rusqlite::Connection::open(tmp.path().join("culprit.db")).unwrap();
    conn.busy_timeout(Duration::from_secs(5)).unwrap();
    let damaged = conn
        .execute(
            "UPDATE outbox SET notice = '{\"kind\": ' WHERE destination = 'slack' AND json_extract(notice, '$.group_key') = ?1",
            rusqlite::params![group],
        )
        .unwrap();
    assert_eq!(damaged, 1);
    drop(conn);
    support::drained(&app).await;
    assert_eq!(slack.slack_messages().len(), 2, "the other two groups");
    assert_eq!(pagerduty.pagerduty_events().len(), 3);
    let m = metrics(&app).await;
    assert_eq!(support::metric(&m, "culprit_dead_letters_total{table=\"outbox\"}"), 1.0, "{m}");
    assert_eq!(support::metric(&m, "culprit_queue_depth{queue=\"dead_letter\"}"), 1.0, "{m}");
    let dead: serde_json::Value =
        reqwest::get(format!("{}/api/v1/dead-letters", app.url())).await.unwrap().json().await.unwrap();
    let dead = dead["dead_letters"].as_array().unwrap();
    assert_eq!(dead.len(), 1, "{dead:#?}");
    assert_eq!((dead[0]["source"].as_str(), dead[0]["destination"].as_str()), (Some("outbox"), Some("slack")));
    // The outbox keeps a notice under its job's episode (one thread per job, whichever alert
    // group it is about).
    let thread = dead[0]["payload"]["group_key"].as_str().unwrap();
    assert!(
        thread.starts_with(&format!("\u{1f}episode\u{1f}id:{}\u{1f}", jobs[1].0.job_id())),
        "{thread:?} of {group}"
    );
    assert!(dead[0]["error"].as_str().unwrap().starts_with("notice: "), "{dead:#?}");
    // A dead letter is a row set aside, not an outage.
    assert_eq!(ready(&app).await.0, 200);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_database_file_makes_readyz_503_with_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let (slack, pagerduty) = (Capture::start().await, Capture::start().await);
    let prom = support::prometheus_with_texts(&[], support::free_port());
    let text =
        support::culprit_config(tmp.path(), &prom.url, &slack.url, &pagerduty.url, "[service]\ncoalesce = \"1h\"\n");
    let config = Config::from_toml(&text, "damaged.toml").unwrap();
    let app = Application::build(config.clone()).await.unwrap();
    for i in 0..300 {
        let body = support::webhook_for(&format!("{i:032x}"), "j", &["a".into()]);
        assert_eq!(post(&app, &body).await.0, 202);
    }
    assert_eq!(ready(&app).await.0, 200);
    app.stop().await;
    let db = tmp.path().join("culprit.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);").unwrap();
    let page: u64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap();
    let root: u64 = conn.query_row("SELECT rootpage FROM sqlite_master WHERE name = 'work'", [], |r| r.get(0)).unwrap();
    drop(conn);
    let mut bytes = std::fs::read(&db).unwrap();
    let at = ((root - 1) * page) as usize;
    bytes[at..at + page as usize].fill(0x5A);
    std::fs::write(&db, bytes).unwrap();

    let app = Application::build(config).await.unwrap();
    let (status, body) = ready(&app).await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("store corrupt: database disk image is malformed"), "{body}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_serve_on_the_same_store_refuses_to_start_and_says_why() {
    let tmp = tempfile::tempdir().unwrap();
    let (slack, pagerduty) = (Capture::start().await, Capture::start().await);
    let dead = format!("http://127.0.0.1:{}", support::free_port());
    let config = tmp.path().join("culprit.toml");
    std::fs::write(&config, support::culprit_config(tmp.path(), &dead, &slack.url, &pagerduty.url, "")).unwrap();
    let log = tmp.path().join("first.log");
    let mut first = std::process::Command::new(env!("CARGO_BIN_EXE_culprit"))
        .args(["serve", "--config"])
        .arg(&config)
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    support::wait_for("the first serve to take the store", Duration::from_secs(30), || {
        std::fs::read_to_string(tmp.path().join("culprit.db.lock"))
            .is_ok_and(|pid| pid.trim() == first.id().to_string())
    })
    .await;
    let second = std::process::Command::new(env!("CARGO_BIN_EXE_culprit"))
        .args(["serve", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let _ = first.kill();
    let _ = first.wait();
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("another culprit (process {}) is using the store", first.id())),
        "{stderr}\nfirst: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert!(stderr.contains(&tmp.path().join("culprit.db").display().to_string()), "{stderr}");
}
