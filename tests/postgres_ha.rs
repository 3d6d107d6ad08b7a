//! Replicas sharing one real PostgreSQL (Debian's `postgresql`, started by
//! `support::pg_server` in a temporary directory), against a real Prometheus and capture
//! servers for Slack and PagerDuty: a storm spread over three replicas, Alertmanager HA
//! sending one group to two replicas at once, the database restarted mid-storm, and a
//! replica killed with SIGKILL mid-delivery while two others carry on.
//!
//! Each test skips with a message when PostgreSQL is not installed (`scripts/test.sh`
//! installs it, so CI runs them).

mod support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use culprit::config::Config;
use culprit::service::server::Application;
use support::capture::Capture;
use support::pg_server::{PASSWORD, PgServer};
use support::serve::start;

/// The configuration `support::culprit_config` writes, on PostgreSQL instead of SQLite:
/// the URL without the password, the password from a file, a short lease.
fn on_postgres(text: &str, dir: &Path, url: &str, lease: &str) -> String {
    let pw = dir.join("db-password");
    std::fs::write(&pw, PASSWORD).unwrap();
    let sqlite = format!("[store]\npath = \"{}\"\n", dir.join("culprit.db").display());
    assert!(text.contains(&sqlite));
    text.replace(
        &sqlite,
        &format!("[store]\nurl = \"{url}\"\npassword = {{ file = \"{}\" }}\nlease = \"{lease}\"\n", pw.display()),
    )
}

async fn post(url: &str, body: &serde_json::Value) -> reqwest::StatusCode {
    reqwest::Client::new().post(format!("{url}/webhook/alertmanager")).json(body).send().await.unwrap().status()
}

async fn metrics(url: &str) -> String {
    reqwest::get(format!("{url}/metrics")).await.unwrap().text().await.unwrap()
}

use support::diagnoses_total as diagnoses;

/// Top-level Slack posts by group (replies in a thread left out), sorted.
fn slack_groups(slack: &Capture) -> Vec<String> {
    let mut groups: Vec<String> = slack
        .on("/api/chat.postMessage")
        .iter()
        .filter(|p| p.body.get("thread_ts").is_none())
        .map(|p| p.body["metadata"]["event_payload"]["group_key"].as_str().unwrap_or("?").to_string())
        .collect();
    groups.sort();
    groups
}

fn distinct(mut v: Vec<String>) -> usize {
    v.dedup();
    v.len()
}

/// `n` replicas in this process on one database.
async fn replicas(text: &str, n: usize) -> Vec<Application> {
    let mut apps = Vec::new();
    for _ in 0..n {
        apps.push(Application::build(Config::from_toml(text, "ha.toml").unwrap()).await.unwrap());
    }
    apps
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_replicas_share_a_storm_of_1000_alerts_for_10_jobs_and_post_each_verdict_once() {
    support::init_logs();
    let Some(pg) = PgServer::start(false) else { return };
    let url = pg.database("storm");
    let now = jiff::Timestamp::now().as_millisecond();
    let jobs = support::synthetic_jobs(10, now - 1_000);
    let prom =
        support::prometheus_with_texts(&jobs.iter().map(|j| j.1.clone()).collect::<Vec<_>>(), support::free_port());
    let (slack, pagerduty) = (Capture::start().await, Capture::start().await);
    let tmp = tempfile::tempdir().unwrap();
    let text =
        support::culprit_config(tmp.path(), &prom.url, &slack.url, &pagerduty.url, "[service]\ncoalesce = \"10s\"\n");
    let apps = replicas(&on_postgres(&text, tmp.path(), &url, "30s"), 3).await;

    // 100 webhooks of 10 alerts each for every job, spread round-robin over the three
    // replicas, in a burst: 1000 alerts. (The window is long enough for the whole burst to
    // land in it on a busy 2-core machine: a webhook after a job's diagnosis started
    // rightly queues another one.)
    let mut sends = Vec::new();
    for round in 0..10 {
        for (i, (job, _)) in jobs.iter().enumerate() {
            let fps: Vec<String> = (0..10).map(|k| format!("{round}-{k}")).collect();
            let body = support::webhook_for(&job.job_id(), &job.job_name(), &fps);
            let target = apps[(round * 10 + i) % 3].url();
            sends.push(tokio::spawn(async move { post(&target, &body).await }));
        }
    }
    for s in sends {
        assert_eq!(s.await.unwrap(), reqwest::StatusCode::ACCEPTED);
    }
    support::wait_for("10 Slack posts", Duration::from_secs(60), || slack.slack_messages().len() >= 10).await;
    support::drained(&apps[0]).await;
    assert_eq!(slack.slack_messages().len(), 10);
    assert_eq!(distinct(slack_groups(&slack)), 10);
    assert_eq!(pagerduty.on("/v2/enqueue").len(), 10);
    let mut total = 0.0;
    for app in &apps {
        total += diagnoses(&metrics(&app.url()).await);
    }
    assert_eq!(total, 10.0, "diagnoses over the three replicas");
    for app in apps {
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_same_group_from_two_alertmanagers_to_two_replicas_at_once_is_one_diagnosis_and_one_post() {
    support::init_logs();
    let Some(pg) = PgServer::start(false) else { return };
    let url = pg.database("ha");
    let now = jiff::Timestamp::now().as_millisecond();
    let jobs = support::synthetic_jobs(5, now - 1_000);
    let prom =
        support::prometheus_with_texts(&jobs.iter().map(|j| j.1.clone()).collect::<Vec<_>>(), support::free_port());
    let (slack, pagerduty) = (Capture::start().await, Capture::start().await);
    let tmp = tempfile::tempdir().unwrap();
    let text =
        support::culprit_config(tmp.path(), &prom.url, &slack.url, &pagerduty.url, "[service]\ncoalesce = \"5s\"\n");
    let apps = replicas(&on_postgres(&text, tmp.path(), &url, "30s"), 2).await;
    // Both Alertmanagers of an HA pair send every group, each to another replica, at once.
    for (job, _) in &jobs {
        let body = support::webhook_for(&job.job_id(), &job.job_name(), &["fp-1".to_string()]);
        let (u0, u1) = (apps[0].url(), apps[1].url());
        let (a, b) = tokio::join!(post(&u0, &body), post(&u1, &body));
        assert_eq!((a, b), (reqwest::StatusCode::ACCEPTED, reqwest::StatusCode::ACCEPTED));
    }
    support::wait_for("5 Slack posts", Duration::from_secs(60), || slack.slack_messages().len() >= 5).await;
    support::drained(&apps[0]).await;
    let groups = slack_groups(&slack);
    assert_eq!((groups.len(), distinct(groups)), (5, 5), "one post per group");
    assert_eq!(pagerduty.on("/v2/enqueue").len(), 5);
    let total = diagnoses(&metrics(&apps[0].url()).await) + diagnoses(&metrics(&apps[1].url()).await);
    assert_eq!(total, 5.0, "one diagnosis per job over both replicas");
    for app in apps {
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_restarted_mid_storm_loses_nothing_posts_nothing_twice_and_replicas_recover_by_themselves() {
    support::init_logs();
    let Some(pg) = PgServer::start(false) else { return };
    let url = pg.database("outage");
    let now = jiff::Timestamp::now().as_millisecond();
    let jobs = support::synthetic_jobs(12, now - 1_000);
    let prom =
        support::prometheus_with_texts(&jobs.iter().map(|j| j.1.clone()).collect::<Vec<_>>(), support::free_port());
    let (slack, pagerduty) = (Capture::start().await, Capture::start().await);
    slack.delay(50);
    let tmp = tempfile::tempdir().unwrap();
    let text =
        support::culprit_config(tmp.path(), &prom.url, &slack.url, &pagerduty.url, "[service]\ncoalesce = \"300ms\"\n");
    let apps = replicas(&on_postgres(&text, tmp.path(), &url, "30s"), 2).await;
    let webhook = |i: usize| {
        let (job, _) = &jobs[i];
        support::webhook_for(&job.job_id(), &job.job_name(), &[format!("fp-{i}")])
    };
    // The first half arrives; the database goes down while it is diagnosed and delivered.
    for i in 0..6 {
        assert_eq!(post(&apps[i % 2].url(), &webhook(i)).await, reqwest::StatusCode::ACCEPTED);
    }
    support::wait_for("a first Slack post", Duration::from_secs(60), || !slack.slack_messages().is_empty()).await;
    pg.stop();
    // While it is down: webhooks get 503 (Alertmanager retries) and /readyz says why.
    assert_eq!(post(&apps[0].url(), &webhook(6)).await, reqwest::StatusCode::SERVICE_UNAVAILABLE);
    let ready = reqwest::get(format!("{}/readyz", apps[1].url())).await.unwrap();
    assert_eq!(ready.status(), reqwest::StatusCode::SERVICE_UNAVAILABLE);
    let why = ready.text().await.unwrap();
    assert!(why.contains("store cannot write") && why.contains("PostgreSQL"), "{why}");
    assert!(!why.contains(PASSWORD), "{why}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    pg.restart();
    // Back: ready again without a restart, and the rest of the storm (the 503'd webhook
    // again, as Alertmanager resends it) is taken.
    let started = std::time::Instant::now();
    while reqwest::get(format!("{}/readyz", apps[1].url())).await.unwrap().status() != reqwest::StatusCode::OK {
        assert!(started.elapsed() < Duration::from_secs(30), "not ready again after the database returned");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for i in 6..12 {
        assert_eq!(post(&apps[i % 2].url(), &webhook(i)).await, reqwest::StatusCode::ACCEPTED);
    }
    support::wait_for("12 Slack posts", Duration::from_secs(90), || slack_groups(&slack).len() >= 12).await;
    support::drained(&apps[0]).await;
    let groups = slack_groups(&slack);
    assert_eq!((groups.len(), distinct(groups.clone())), (12, 12), "every job once: {groups:#?}");
    for app in apps {
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_killed_mid_delivery_leaves_its_work_to_the_others_every_verdict_arrives_and_slack_once() {
    let Some(pg) = PgServer::start(false) else { return };
    let db = pg.database("sigkill");
    let now = jiff::Timestamp::now().as_millisecond();
    let jobs = support::synthetic_jobs(20, now + 30_000);
    let prom =
        support::prometheus_with_texts(&jobs.iter().map(|j| j.1.clone()).collect::<Vec<_>>(), support::free_port());
    let (slack, pagerduty) = (Capture::start().await, Capture::start().await);
    // Slow destinations widen the window in which the kill lands mid-delivery.
    slack.delay(60);
    pagerduty.delay(400);
    let tmp = tempfile::tempdir().unwrap();
    let text =
        support::culprit_config(tmp.path(), &prom.url, &slack.url, &pagerduty.url, "[service]\ncoalesce = \"300ms\"\n");
    let text = on_postgres(&text, tmp.path(), &db, "3s");
    let mut replicas = Vec::new();
    for i in 0..3 {
        let port = support::free_port();
        let config = tmp.path().join(format!("culprit-{i}.toml"));
        std::fs::write(&config, text.replace("listen = \"127.0.0.1:0\"", &format!("listen = \"127.0.0.1:{port}\"")))
            .unwrap();
        replicas.push(start(&config, port, &tmp.path().join(format!("culprit-{i}.log"))).await);
    }
    // 10 webhooks per job, each with one more alert firing (200 alerts over 20 jobs),
    // spread over the three replicas.
    let webhooks: Vec<serde_json::Value> = (0..10)
        .flat_map(|k| {
            jobs.iter().map(move |(job, _)| {
                let fps: Vec<String> = (0..=k).map(|i| format!("fp-{i}")).collect();
                support::webhook_for(&job.job_id(), &job.job_name(), &fps)
            })
        })
        .collect();
    // The first half at once (so that it is all in before the first delivery ends).
    let mut sends = Vec::new();
    for (i, w) in webhooks[..100].iter().enumerate() {
        let (url, w) = (replicas[i % 3].url.clone(), w.clone());
        sends.push(tokio::spawn(async move { post(&url, &w).await }));
    }
    for s in sends {
        assert_eq!(s.await.unwrap(), reqwest::StatusCode::ACCEPTED);
    }
    // Kill the replica that holds a send (its owner names its process) while a
    // PagerDuty event is on the wire, after the first Slack post.
    let logs = || {
        let read = |i: usize| std::fs::read_to_string(tmp.path().join(format!("culprit-{i}.log"))).unwrap_or_default();
        (0..3).map(read).collect::<Vec<_>>().join("\n---\n")
    };
    let started = std::time::Instant::now();
    let holder = loop {
        assert!(started.elapsed() < Duration::from_secs(60), "no send in flight after a Slack post: {}", logs());
        if !slack.slack_messages().is_empty() && pagerduty.in_flight("/v2/enqueue") > 0 {
            let owner = pg.psql("sigkill", "SELECT owner FROM outbox WHERE state = 'sending' LIMIT 1");
            let pid: Option<u32> = owner.split('/').nth(1).and_then(|p| p.parse().ok());
            if let Some(i) = replicas.iter().position(|r| Some(r.child.id()) == pid) {
                break i;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let mut killed = replicas.remove(holder);
    let status = Command::new("kill").args(["-9", &killed.child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let _ = killed.child.wait();
    let in_flight_at_kill = pagerduty.in_flight("/v2/enqueue") + slack.in_flight("/api/chat.postMessage");
    // The rest of the storm goes to the two left; they take the dead one's rows once its
    // lease (3 s) expires.
    for (i, w) in webhooks[100..].iter().enumerate() {
        assert_eq!(post(&replicas[i % 2].url, w).await, reqwest::StatusCode::ACCEPTED);
    }
    support::wait_for("20 Slack posts", Duration::from_secs(90), || slack_groups(&slack).len() >= 20).await;
    support::drained_at(&replicas[0].url).await;
    let groups = slack_groups(&slack);
    assert_eq!((groups.len(), distinct(groups.clone())), (20, 20), "Slack posts: {groups:#?}");
    // PagerDuty: every group, duplicates only of events in flight at the kill, with the
    // idempotency key of the first copy.
    let mut by_group: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    let raw = pagerduty.on("/v2/enqueue");
    for r in &raw {
        let key = r.body["payload"]["custom_details"]["idempotency_key"].as_str().unwrap_or_default();
        by_group.entry(r.body["dedup_key"].as_str().unwrap().to_string()).or_default().push(key.to_string());
    }
    assert_eq!(by_group.len(), 20, "PagerDuty events: {by_group:#?}");
    // A group's verdict seen again with other numbers is a revision with its own key (shown
    // in place, under the same dedup_key); a copy is an event sent again with its key.
    let events: usize =
        by_group.values().map(|keys| keys.iter().collect::<std::collections::BTreeSet<_>>().len()).sum();
    let duplicates = raw.len() - events;
    assert!(duplicates <= in_flight_at_kill, "{duplicates} duplicates but {in_flight_at_kill} in flight at the kill");
    // The replicas left took the dead one's sends over once its lease expired.
    assert!(logs().contains("sends of a replica whose lease expired"), "{}", logs());
    eprintln!("killed with {in_flight_at_kill} requests in flight; PagerDuty saw {} POSTs for 20 events", raw.len());
}
