//! The webhook service in process, against a real Prometheus and capture servers for the
//! destinations: coalescing storms, faults at every destination, a backend that is down
//! and comes back, delivery order, and the HTTP answers Alertmanager relies on.

mod support;

use std::time::Duration;

use culprit::config::Config;
use culprit::service::server::Application;
use support::capture::Capture;

async fn post(url: &str, body: &serde_json::Value) -> reqwest::StatusCode {
    reqwest::Client::new().post(format!("{url}/webhook/alertmanager")).json(body).send().await.unwrap().status()
}

fn diagnoses(metrics: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("culprit_diagnoses_total{"))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<f64>().unwrap())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_storm_of_1000_alerts_for_10_jobs_gives_10_diagnoses_and_10_posts_per_destination() {
    support::init_logs();
    let now = jiff::Timestamp::now().as_millisecond();
    let jobs = support::synthetic_jobs(10, now - 1_000);
    let prom =
        support::prometheus_with_texts(&jobs.iter().map(|j| j.1.clone()).collect::<Vec<_>>(), support::free_port());
    let (slack, pagerduty) = (Capture::start().await, Capture::start().await);
    let tmp = tempfile::tempdir().unwrap();
    let text =
        support::culprit_config(tmp.path(), &prom.url, &slack.url, &pagerduty.url, "[service]\ncoalesce = \"5s\"\n");
    let app = Application::build(Config::from_toml(&text, "storm.toml").unwrap()).await.unwrap();

    // 100 webhooks of 10 alerts each for every job, in a burst: 1000 alerts.
    let client = reqwest::Client::new();
    let mut sends = Vec::new();
    for round in 0..10 {
        for (job, _) in &jobs {
            let fps: Vec<String> = (0..10).map(|k| format!("{round}-{k}")).collect();
            let body = support::webhook_for(&job.job_id(), &job.job_name(), &fps);
            let url = format!("{}/webhook/alertmanager", app.url());
            let c = client.clone();
            sends.push(tokio::spawn(async move { c.post(url).json(&body).send().await.unwrap().status() }));
        }
    }
    for s in sends {
        assert_eq!(s.await.unwrap(), reqwest::StatusCode::ACCEPTED);
    }
    support::wait_for("10 Slack posts", Duration::from_secs(60), || slack.slack_messages().len() >= 10).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(slack.slack_messages().len(), 10);
    assert_eq!(pagerduty.on("/v2/enqueue").len(), 10);
    let metrics = reqwest::get(format!("{}/metrics", app.url())).await.unwrap().text().await.unwrap();
    assert_eq!(diagnoses(&metrics), 10.0, "{metrics}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn slack_429_and_pagerduty_500_are_retried_and_everything_is_delivered_in_order() {
    let now = jiff::Timestamp::now().as_millisecond();
    let jobs = support::synthetic_jobs(3, now - 1_000);
    let prom =
        support::prometheus_with_texts(&jobs.iter().map(|j| j.1.clone()).collect::<Vec<_>>(), support::free_port());
    let (slack, pagerduty) = (Capture::start().await, Capture::start().await);
    slack.fail_next("/api/chat.postMessage", 429, Some(1), "");
    pagerduty.fail_next("/v2/enqueue", 500, None, "oops");
    let tmp = tempfile::tempdir().unwrap();
    let text =
        support::culprit_config(tmp.path(), &prom.url, &slack.url, &pagerduty.url, "[service]\ncoalesce = \"100ms\"\n");
    let app = Application::build(Config::from_toml(&text, "faults.toml").unwrap()).await.unwrap();
    for (job, _) in &jobs {
        assert_eq!(post(&app.url(), &support::webhook_for(&job.job_id(), &job.job_name(), &["a".into()])).await, 202);
        // One after the other, so the queue order is known.
        tokio::time::sleep(Duration::from_millis(600)).await;
    }
    support::wait_for("3 Slack posts and 3 PagerDuty events", Duration::from_secs(60), || {
        slack.slack_messages().len() >= 3 && pagerduty.pagerduty_events().len() >= 3
    })
    .await;
    // Top-level posts (each verdict's details follow in its thread).
    let posts: Vec<_> =
        slack.on("/api/chat.postMessage").into_iter().filter(|p| p.body.get("thread_ts").is_none()).collect();
    // The 429, then the retry at least Retry-After (1 s) later, then the other two.
    assert_eq!(posts.len(), 4);
    assert!(posts[1].at.duration_since(posts[0].at) >= Duration::from_millis(950));
    let order: Vec<String> =
        posts[1..].iter().map(|p| p.body["text"].as_str().unwrap_or_default().to_string()).collect();
    // Without a job graph the names are the reporter's (sanitized).
    let name =
        |job: &culprit::samples::synthetic::SyntheticJob| culprit::model::graph::sanitize_label_value(&job.job_name());
    for (i, (job, _)) in jobs.iter().enumerate() {
        assert!(order[i].contains(&name(job)), "post {i} should be {}: {}", name(job), order[i]);
    }
    let pd: Vec<String> = pagerduty
        .pagerduty_events()
        .iter()
        .map(|e| e["payload"]["source"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(pagerduty.on("/v2/enqueue").len(), 4, "500 then 202, then two more");
    for (i, (job, _)) in jobs.iter().enumerate() {
        assert_eq!(pd[i], name(job), "{pd:?}");
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn when_prometheus_is_down_the_diagnosis_waits_and_is_delivered_once_it_is_back() {
    let now = jiff::Timestamp::now().as_millisecond();
    let jobs = support::synthetic_jobs(1, now + 10_000);
    let port = support::free_port();
    let (slack, pagerduty) = (Capture::start().await, Capture::start().await);
    let tmp = tempfile::tempdir().unwrap();
    let text = support::culprit_config(
        tmp.path(),
        &format!("http://127.0.0.1:{port}"),
        &slack.url,
        &pagerduty.url,
        "[service]\ncoalesce = \"100ms\"\ndiagnose_retry_for = \"2m\"\n",
    );
    let app = Application::build(Config::from_toml(&text, "down.toml").unwrap()).await.unwrap();
    let (job, recording) = &jobs[0];
    assert_eq!(post(&app.url(), &support::webhook_for(&job.job_id(), &job.job_name(), &["a".into()])).await, 202);
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(slack.all().is_empty(), "nothing posted while Prometheus is down");
    let metrics = reqwest::get(format!("{}/metrics", app.url())).await.unwrap().text().await.unwrap();
    assert!(metrics.contains("culprit_diagnosis_failures_total{reason=\"backend\"}"), "{metrics}");
    let ready = reqwest::get(format!("{}/readyz", app.url())).await.unwrap();
    assert_eq!(ready.status(), 503);

    let _prom = support::prometheus_with_texts(std::slice::from_ref(recording), port);
    support::wait_for("the Slack post", Duration::from_secs(60), || slack.slack_messages().len() == 1).await;
    support::wait_for("the PagerDuty event", Duration::from_secs(10), || pagerduty.pagerduty_events().len() == 1).await;
    assert!(slack.slack_messages()[0].to_string().contains("op_1"), "{}", slack.slack_messages()[0]);
    assert_eq!(reqwest::get(format!("{}/readyz", app.url())).await.unwrap().status(), 200);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_answers_what_alertmanager_expects() {
    let (slack, pagerduty) = (Capture::start().await, Capture::start().await);
    let tmp = tempfile::tempdir().unwrap();
    let dead = format!("http://127.0.0.1:{}", support::free_port());
    std::fs::write(tmp.path().join("hook-token"), "s3cret").unwrap();
    let extra = format!(
        "[server.auth]\ntype = \"bearer\"\ntoken = {{ file = \"{}\" }}\n[service]\ncoalesce = \"1h\"\n",
        tmp.path().join("hook-token").display()
    );
    let mut text = support::culprit_config(tmp.path(), &dead, &slack.url, &pagerduty.url, "");
    text = text.replace(
        "[server]\nlisten = \"127.0.0.1:0\"\n",
        "[server]\nlisten = \"127.0.0.1:0\"\nbody_limit_bytes = 4096\n",
    );
    text.push_str(&extra);
    let app = Application::build(Config::from_toml(&text, "http.toml").unwrap()).await.unwrap();
    let c = reqwest::Client::new();
    let url = format!("{}/webhook/alertmanager", app.url());
    let good = support::webhook_for("5e1ec7ed000000000000000000000002", "j", &["a".into()]);
    // No or wrong credentials: 401 (Alertmanager does not retry 4xx: a config error).
    assert_eq!(c.post(&url).json(&good).send().await.unwrap().status(), 401);
    assert_eq!(c.post(&url).bearer_auth("s3cretX").json(&good).send().await.unwrap().status(), 401);
    // Malformed: 400 with a reason.
    let r = c.post(&url).bearer_auth("s3cret").body("{not json").send().await.unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("not an Alertmanager webhook"));
    // Over the body limit: 413.
    let big = "x".repeat(10_000);
    assert_eq!(c.post(&url).bearer_auth("s3cret").body(big).send().await.unwrap().status(), 413);
    // Accepted durably: 202, and a request id comes back.
    let r = c.post(&url).bearer_auth("s3cret").json(&good).send().await.unwrap();
    assert_eq!(r.status(), 202);
    assert!(r.headers().contains_key("x-request-id"));
    // Health is open; metrics pass promtool.
    assert_eq!(c.get(format!("{}/healthz", app.url())).send().await.unwrap().status(), 200);
    let metrics = c.get(format!("{}/metrics", app.url())).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains("culprit_webhooks_total{outcome=\"accepted\"} 1"), "{metrics}");
    assert!(metrics.contains("culprit_webhooks_total{outcome=\"unauthorized\"} 2"), "{metrics}");
    let mut promtool = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus)");
    std::io::Write::write_all(promtool.stdin.as_mut().unwrap(), metrics.as_bytes()).unwrap();
    let out = promtool.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_diagnose_api_answers_a_verdict_in_each_format_and_404_when_there_is_nothing_to_diagnose() {
    let dir = support::capture("slow-sink");
    let prom = support::prometheus_with(&dir.join("recording.om.gz"));
    let flink = support::flink_rest_for(&dir).await;
    let (slack, pagerduty) = (Capture::start().await, Capture::start().await);
    let tmp = tempfile::tempdir().unwrap();
    let extra = format!("[[flink.clusters]]\nname = \"lab\"\nrest_url = \"{}\"\n", flink.uri());
    let text = support::culprit_config(tmp.path(), &prom.url, &slack.url, &pagerduty.url, &extra);
    let app = Application::build(Config::from_toml(&text, "api.toml").unwrap()).await.unwrap();
    let c = reqwest::Client::new();
    let api = |q: &str| format!("{}/api/v1/{q}", app.url());
    // The recording's last sample (the verdict time `diagnose --recording` uses).
    let at = "2026-11-29T10:36:27.780Z";

    let r = c.get(api(&format!("diagnose?job=bp-lab-slow-sink&at={at}"))).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/json");
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["schema"], "culprit.verdict/v1");
    assert_eq!(v["culprit"]["vertex_name"], "slow-sink: Writer");
    assert_eq!(v["finding"], "sink");

    let r = c
        .get(api(&format!("diagnose?job=bp_lab_slow_sink&at={at}")))
        .header("accept", "text/plain")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().starts_with("slow-sink: Writer (sink) is the culprit"));
    let md = c.get(api(&format!("diagnose?job=bp-lab-slow-sink&at={at}&format=markdown"))).send().await.unwrap();
    assert!(md.text().await.unwrap().contains("slow-sink: Writer"));

    // Nothing to diagnose is an answer (404), not an outage (503).
    let unknown = c.get(api(&format!("diagnose?job=nope&at={at}"))).send().await.unwrap();
    assert_eq!(unknown.status(), 404);
    assert!(unknown.text().await.unwrap().contains("jobs seen: bp_lab_slow_sink"));
    let before = c.get(api("diagnose?job=bp-lab-slow-sink&at=2020-01-01T00:00:00Z")).send().await.unwrap();
    assert_eq!(before.status(), 404);
    assert!(before.text().await.unwrap().contains("between 2019-12-31T23:00:00Z and 2020-01-01T00:00:00Z"));
    // Bad parameters: 400 with a reason.
    for q in ["diagnose", "diagnose?job=x&format=xml", "diagnose?job=x&at=yesterday", "verdicts?limit=0"] {
        assert_eq!(c.get(api(q)).send().await.unwrap().status(), 400, "{q}");
    }
    assert_eq!(c.get(api("verdicts?limit=5")).send().await.unwrap().status(), 200);
    let nope = c.get(api("verdicts/nope")).send().await.unwrap();
    assert_eq!(nope.status(), 404);
    assert!(nope.json::<serde_json::Value>().await.unwrap()["error"].as_str().unwrap().contains("no such verdict"));
    assert_eq!(c.get(format!("{}/readyz", app.url())).send().await.unwrap().status(), 200);
    // The three verdicts are counted as API diagnoses; no webhook was involved.
    let metrics = c.get(format!("{}/metrics", app.url())).send().await.unwrap().text().await.unwrap();
    assert!(
        metrics.contains("culprit_diagnoses_total{trigger=\"api\",status=\"culprit_found\",finding=\"sink\"} 3"),
        "{metrics}"
    );
    // The two 404s are counted as failed API requests.
    assert!(metrics.contains("culprit_diagnosis_failures_total{reason=\"api_request\"} 2"), "{metrics}");
    assert_eq!(slack.all().len() + pagerduty.all().len(), 0, "the API notifies nobody");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_refuses_to_start_without_prometheus_or_with_an_empty_auth_secret() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("c.db");
    let no_prometheus = format!("[server]\nlisten = \"127.0.0.1:0\"\n[store]\npath = \"{}\"\n", store.display());
    let err = Application::build(Config::from_toml(&no_prometheus, "a.toml").unwrap()).await.err().unwrap();
    assert!(err.contains("[prometheus]"), "{err}");

    std::fs::write(tmp.path().join("empty"), "\n").unwrap();
    let empty_token = format!(
        "[prometheus]\nurl = \"http://127.0.0.1:1\"\n[server]\nlisten = \"127.0.0.1:0\"\n[server.auth]\ntype = \"bearer\"\ntoken = {{ file = \"{}\" }}\n[store]\npath = \"{}\"\n",
        tmp.path().join("empty").display(),
        store.display()
    );
    let err = Application::build(Config::from_toml(&empty_token, "b.toml").unwrap()).await.err().unwrap();
    assert!(err.contains("server.auth token") && err.contains("is empty"), "{err}");
    // The same for a secret toward Prometheus (an empty variable would send `Bearer `).
    let empty_prometheus_token = format!(
        "[prometheus]\nurl = \"http://127.0.0.1:1\"\nauth = {{ type = \"bearer\", token = {{ file = \"{}\" }} }}\n[server]\nlisten = \"127.0.0.1:0\"\n[store]\npath = \"{}\"\n",
        tmp.path().join("empty").display(),
        store.display()
    );
    let err = Application::build(Config::from_toml(&empty_prometheus_token, "d.toml").unwrap()).await.err().unwrap();
    assert!(err.contains("prometheus auth") && err.contains("is empty"), "{err}");

    let err = Config::from_toml("[store]\nmax_queue = 0\n", "c.toml").unwrap_err().to_string();
    assert!(err.contains("store.max_queue must be at least 1"), "{err}");
}
