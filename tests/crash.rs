//! Crash safety: 200 accepted alerts over 20 jobs, the process killed with SIGKILL midway
//! and restarted on the same store: every verdict is delivered, none twice.

mod support;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use support::capture::Capture;

struct Culprit {
    child: Child,
    url: String,
}

impl Drop for Culprit {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `culprit serve` on a fixed port and waits until it answers.
async fn start(config: &std::path::Path, port: u16, log: &std::path::Path) -> Culprit {
    let child = Command::new(env!("CARGO_BIN_EXE_culprit"))
        .args(["serve", "--config"])
        .arg(config)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let started = std::time::Instant::now();
    while reqwest::get(format!("{url}/healthz")).await.is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "culprit did not start: {}",
            std::fs::read_to_string(log).unwrap()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Culprit { child, url }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sigkill_midway_loses_no_alert_and_delivers_no_verdict_twice() {
    let now = jiff::Timestamp::now().as_millisecond();
    let jobs = support::synthetic_jobs(20, now + 30_000);
    let prom =
        support::prometheus_with_texts(&jobs.iter().map(|j| j.1.clone()).collect::<Vec<_>>(), support::free_port());
    let (slack, pagerduty) = (Capture::start().await, Capture::start().await);
    // Slow destinations widen the window in which the kill lands mid-delivery.
    slack.delay(60);
    pagerduty.delay(60);
    let tmp = tempfile::tempdir().unwrap();
    let port = support::free_port();
    let mut text =
        support::culprit_config(tmp.path(), &prom.url, &slack.url, &pagerduty.url, "[service]\ncoalesce = \"300ms\"\n");
    text = text.replace("listen = \"127.0.0.1:0\"", &format!("listen = \"127.0.0.1:{port}\""));
    let config = tmp.path().join("culprit.toml");
    std::fs::write(&config, text).unwrap();
    let log = tmp.path().join("culprit.log");

    // 10 webhooks per job, each with one more alert firing: 200 alerts over 20 jobs.
    let webhooks: Vec<serde_json::Value> = (0..10)
        .flat_map(|k| {
            jobs.iter().map(move |(job, _)| {
                let fps: Vec<String> = (0..=k).map(|i| format!("fp-{i}")).collect();
                support::webhook_for(&job.job_id(), &job.job_name(), &fps)
            })
        })
        .collect();
    let client = reqwest::Client::new();

    let culprit = start(&config, port, &log).await;
    for w in &webhooks[..100] {
        let status =
            client.post(format!("{}/webhook/alertmanager", culprit.url)).json(w).send().await.unwrap().status();
        assert_eq!(status, 202);
    }
    // Kill it while deliveries are under way.
    support::wait_for("the first deliveries", Duration::from_secs(60), || slack.slack_messages().len() >= 4).await;
    let mut culprit = culprit;
    unsafe_kill(&mut culprit.child);
    let delivered_before = slack.slack_messages().len();

    let culprit = start(&config, port, &log).await;
    for w in &webhooks[100..] {
        let status =
            client.post(format!("{}/webhook/alertmanager", culprit.url)).json(w).send().await.unwrap().status();
        assert_eq!(status, 202);
    }
    support::wait_for("20 Slack messages and 20 PagerDuty events", Duration::from_secs(120), || {
        slack.slack_messages().len() >= 20 && pagerduty.pagerduty_events().len() >= 20
    })
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;

    // Every group's verdict delivered exactly once per destination.
    let groups = |msgs: Vec<serde_json::Value>, key: &dyn Fn(&serde_json::Value) -> String| {
        let mut v: Vec<String> = msgs.iter().map(key).collect();
        v.sort();
        v
    };
    let slack_groups = groups(slack.slack_messages(), &|m| {
        m["metadata"]["event_payload"]["group_key"].as_str().unwrap_or("?").to_string()
    });
    assert_eq!(slack_groups.len(), 20, "Slack messages: {slack_groups:#?}");
    let mut distinct = slack_groups.clone();
    distinct.dedup();
    assert_eq!(distinct.len(), 20, "a group posted twice: {slack_groups:#?}");
    let pd = pagerduty.pagerduty_events();
    let mut dedup_keys: Vec<String> = pd.iter().map(|e| e["dedup_key"].as_str().unwrap().to_string()).collect();
    dedup_keys.sort();
    dedup_keys.dedup();
    assert_eq!((pd.len(), dedup_keys.len()), (20, 20), "PagerDuty events: {pd:#?}");
    eprintln!(
        "killed after {delivered_before} Slack messages; PagerDuty saw {} POSTs for 20 events",
        pagerduty.on("/v2/enqueue").len()
    );
    drop(culprit);
}

/// SIGKILL: no chance to flush or clean up.
fn unsafe_kill(child: &mut Child) {
    let status = Command::new("kill").args(["-9", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let _ = child.wait();
}
