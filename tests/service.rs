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

use support::diagnoses_total as diagnoses;

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
        // Ten jobs of one finding are an incident (`[incidents]`, tests/incidents.rs); here
        // each job's own post is counted.
        support::culprit_config(
            tmp.path(),
            &prom.url,
            &slack.url,
            &pagerduty.url,
            "[incidents]\nenabled = false\n[service]\ncoalesce = \"5s\"\n",
        );
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
    support::drained(&app).await;
    assert_eq!(slack.slack_messages().len(), 10);
    assert_eq!(pagerduty.on("/v2/enqueue").len(), 10);
    let metrics = reqwest::get(format!("{}/metrics", app.url())).await.unwrap().text().await.unwrap();
    assert_eq!(diagnoses(&metrics), 10.0, "{metrics}");
    // Ten diagnoses at once asked Prometheus at most `prometheus.max_concurrency` (8)
    // queries at a time, and none is left in flight or waiting.
    let gauge = |name: &str| support::metric_value(&metrics, name);
    assert_eq!(gauge("culprit_prometheus_queries_max"), 8.0, "{metrics}");
    let peak = gauge("culprit_prometheus_queries_peak");
    assert!((1.0..=8.0).contains(&peak), "{metrics}");
    assert_eq!(gauge("culprit_prometheus_queries{state=\"in_flight\"}"), 0.0, "{metrics}");
    assert_eq!(gauge("culprit_prometheus_queries{state=\"waiting\"}"), 0.0, "{metrics}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slack_429_and_a_pagerduty_500_hold_only_their_own_group_and_everything_is_delivered() {
    let now = jiff::Timestamp::now().as_millisecond();
    let jobs = support::synthetic_jobs(3, now - 1_000);
    let prom =
        support::prometheus_with_texts(&jobs.iter().map(|j| j.1.clone()).collect::<Vec<_>>(), support::free_port());
    let (slack, pagerduty) = (Capture::start().await, Capture::start().await);
    slack.fail_next("/api/chat.postMessage", 429, Some(8), "");
    pagerduty.fail_next("/v2/enqueue", 500, None, "oops");
    let tmp = tempfile::tempdir().unwrap();
    let text =
        support::culprit_config(tmp.path(), &prom.url, &slack.url, &pagerduty.url, "[service]\ncoalesce = \"100ms\"\n");
    let app = Application::build(Config::from_toml(&text, "faults.toml").unwrap()).await.unwrap();
    let metrics = || async { reqwest::get(format!("{}/metrics", app.url())).await.unwrap().text().await.unwrap() };
    for (i, (job, _)) in jobs.iter().enumerate() {
        assert_eq!(post(&app.url(), &support::webhook_for(&job.job_id(), &job.job_name(), &["a".into()])).await, 202);
        // One diagnosis after the other, so the queue order is known.
        let started = std::time::Instant::now();
        while diagnoses(&metrics().await) < (i + 1) as f64 {
            assert!(started.elapsed() < Duration::from_secs(60), "diagnosis {i} never came");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    support::drained(&app).await;
    // Without a job graph the names are the reporter's (sanitized).
    let name = |i: usize| culprit::model::graph::sanitize_label_value(&jobs[i].0.job_name());
    // Top-level posts (each verdict's details follow in its thread).
    let posts: Vec<_> =
        slack.on("/api/chat.postMessage").into_iter().filter(|p| p.body.get("thread_ts").is_none()).collect();
    let order: Vec<String> = posts.iter().map(|p| p.body["text"].as_str().unwrap_or_default().to_string()).collect();
    // Job 0's post is refused with Retry-After: 8 s; jobs 1 and 2 go meanwhile (posts one
    // second apart: Slack's pace per channel); job 0 goes again after its 8 s.
    assert_eq!(posts.len(), 4, "{order:#?}");
    for (post, job) in [(0, 0), (1, 1), (2, 2), (3, 0)] {
        assert!(order[post].contains(&name(job)), "post {post} should be job {job}: {order:#?}");
    }
    assert!(posts[3].at.duration_since(posts[0].at) >= Duration::from_millis(7_950));
    assert!(posts[2].at.duration_since(posts[0].at) < Duration::from_millis(7_950), "not held by job 0's wait");
    assert_eq!(slack.slack_messages().len(), 3);
    // PagerDuty: 500 then 202 for job 0, the two others once each.
    assert_eq!(pagerduty.on("/v2/enqueue").len(), 4);
    let mut sources: Vec<String> = pagerduty
        .pagerduty_events()
        .iter()
        .map(|e| e["payload"]["source"].as_str().unwrap_or_default().to_string())
        .collect();
    sources.sort();
    let mut expected: Vec<String> = (0..3).map(name).collect();
    expected.sort();
    assert_eq!(sources, expected);
    // The reasons are counted.
    let m = metrics().await;
    let failures = |dest: &str, reason: &str| {
        support::metric(
            &m,
            &format!(
                "culprit_notification_failures_total{{destination=\"{dest}\",reason=\"{reason}\",outcome=\"retry\"}}"
            ),
        )
    };
    assert_eq!((failures("slack", "rate_limited"), failures("pagerduty", "server_error")), (1.0, 1.0), "{m}");
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
    // Two failed attempts (each one try of every request, the worker's own retry: no
    // client retries inside it; then 1 s of backoff, jittered), then look.
    let started = std::time::Instant::now();
    loop {
        let metrics = reqwest::get(format!("{}/metrics", app.url())).await.unwrap().text().await.unwrap();
        if support::metric(&metrics, "culprit_diagnosis_failures_total{reason=\"backend\"}") >= 2.0 {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "no retries: {metrics}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(slack.all().is_empty(), "nothing posted while Prometheus is down");
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
    let mut text = support::culprit_config(tmp.path(), &dead, &slack.url, &pagerduty.url, &extra);
    text = text.replace(
        "[server]\nlisten = \"127.0.0.1:0\"\n",
        "[server]\nlisten = \"127.0.0.1:0\"\nbody_limit_bytes = 4096\n",
    );
    let app = Application::build(Config::from_toml(&text, "http.toml").unwrap()).await.unwrap();
    let c = reqwest::Client::new();
    let url = format!("{}/webhook/alertmanager", app.url());
    let good = support::webhook_for("5e1ec7ed000000000000000000000002", "j", &["a".into()]);
    // No or wrong credentials: 401 (Alertmanager does not retry 4xx: a config error).
    assert_eq!(c.post(&url).json(&good).send().await.unwrap().status(), 401);
    assert_eq!(c.post(&url).bearer_auth("s3cretX").json(&good).send().await.unwrap().status(), 401);
    // Malformed: 400 with a reason.
    let r = c
        .post(&url)
        .bearer_auth("s3cret")
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let text = r.text().await.unwrap();
    assert!(text.contains("not an alert notification of Alertmanager's shape"), "{text}");
    assert!(text.contains("culprit accepts Alertmanager's webhook (version 4)"), "{text}");
    // Grafana's path is behind the same credentials.
    let grafana = url.replace("/webhook/alertmanager", "/webhook/grafana");
    assert_eq!(c.post(&grafana).json(&good).send().await.unwrap().status(), 401);
    // Over the body limit: 413.
    let big = "x".repeat(10_000);
    let big = c.post(&url).bearer_auth("s3cret").header("content-type", "application/json").body(big);
    assert_eq!(big.send().await.unwrap().status(), 413);
    // Accepted durably: 202, and a request id comes back.
    let r = c.post(&url).bearer_auth("s3cret").json(&good).send().await.unwrap();
    assert_eq!(r.status(), 202);
    assert!(r.headers().contains_key("x-request-id"));
    // A request's own id comes back as it was sent.
    let r = c.post(&url).bearer_auth("s3cret").header("x-request-id", "am-42").json(&good).send().await.unwrap();
    assert_eq!(r.headers()["x-request-id"], "am-42");
    // Authentication comes before routing: an unknown API path tells nothing without it.
    let nowhere = format!("{}/api/v1/nowhere", app.url());
    assert_eq!(c.get(&nowhere).send().await.unwrap().status(), 401);
    assert_eq!(c.get(&nowhere).bearer_auth("s3cret").send().await.unwrap().status(), 404);
    // Health is open; metrics pass promtool.
    assert_eq!(c.get(format!("{}/healthz", app.url())).send().await.unwrap().status(), 200);
    let metrics = c.get(format!("{}/metrics", app.url())).send().await.unwrap().text().await.unwrap();
    // Accepted: the webhook above and the one sent with its own request id. Unauthorized:
    // the three webhooks without credentials, one of them at /webhook/grafana (the API's
    // 401 is not a webhook's).
    assert!(metrics.contains("culprit_webhooks_total{outcome=\"accepted\"} 2"), "{metrics}");
    assert!(metrics.contains("culprit_webhooks_total{outcome=\"unauthorized\"} 3"), "{metrics}");
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
    assert!(
        unknown.text().await.unwrap().contains("has metrics here (1 other job has metrics; its name is not alike)")
    );
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn could_not_diagnose_goes_to_slack_and_never_opens_a_pagerduty_incident() {
    let now = jiff::Timestamp::now().as_millisecond();
    let jobs = support::synthetic_jobs(1, now - 1_000);
    let prom = support::prometheus_with_texts(&[jobs[0].1.clone()], support::free_port());
    let (slack, pagerduty) = (Capture::start().await, Capture::start().await);
    let tmp = tempfile::tempdir().unwrap();
    let text =
        support::culprit_config(tmp.path(), &prom.url, &slack.url, &pagerduty.url, "[service]\ncoalesce = \"100ms\"\n");
    let app = Application::build(Config::from_toml(&text, "cnd.toml").unwrap()).await.unwrap();
    // A job Prometheus has never seen: no verdict, for good.
    let body = support::webhook_for("0123456789abcdef0123456789abcdef", "no_such_job", &["a".into()]);
    assert_eq!(post(&app.url(), &body).await, 202);
    support::wait_for("the Slack message", Duration::from_secs(60), || slack.slack_messages().len() == 1).await;
    support::drained(&app).await;
    assert!(
        slack.slack_messages()[0]["text"].as_str().unwrap().contains("could not diagnose"),
        "{:#}",
        slack.slack_messages()[0]
    );
    assert!(pagerduty.all().is_empty(), "PagerDuty: {:#?}", pagerduty.all());
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alert_whose_job_id_has_no_metrics_is_diagnosed_by_its_job_name_and_the_verdict_says_so() {
    let now = jiff::Timestamp::now().as_millisecond();
    let jobs = support::synthetic_jobs(1, now - 1_000);
    let prom = support::prometheus_with_texts(&[jobs[0].1.clone()], support::free_port());
    let (slack, pagerduty) = (Capture::start().await, Capture::start().await);
    let tmp = tempfile::tempdir().unwrap();
    let text =
        support::culprit_config(tmp.path(), &prom.url, &slack.url, &pagerduty.url, "[service]\ncoalesce = \"100ms\"\n");
    let app = Application::build(Config::from_toml(&text, "stale.toml").unwrap()).await.unwrap();
    // The job_id of an earlier run (no metrics), the job's real name.
    let stale = "0123456789abcdef0123456789abcdef";
    let (job, _) = &jobs[0];
    assert_ne!(job.job_id(), stale);
    let body = support::webhook_for(stale, &job.job_name(), &["a".into()]);
    assert_eq!(post(&app.url(), &body).await, 202);
    support::wait_for("the Slack message", Duration::from_secs(60), || !slack.slack_messages().is_empty()).await;
    support::drained(&app).await;
    let first = slack.slack_messages()[0].to_string();
    assert!(!first.contains("could not diagnose"), "{first}");
    let verdict = pagerduty.pagerduty_events()[0].to_string();
    assert!(verdict.contains(&format!("has no metrics; the job it names, `{}`", job.job_name())), "{verdict}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_naming_ten_thousand_jobs_is_capped_and_the_queue_never_passes_its_bound() {
    let (slack, pagerduty) = (Capture::start().await, Capture::start().await);
    let tmp = tempfile::tempdir().unwrap();
    let dead = format!("http://127.0.0.1:{}", support::free_port());
    let mut text = support::culprit_config(
        tmp.path(),
        &dead,
        &slack.url,
        &pagerduty.url,
        "[service]\ncoalesce = \"1h\"\nmax_jobs_per_webhook = 50\n",
    );
    text = text.replace("[store]\n", "[store]\nmax_queue = 100\n");
    text = text.replace("[server]\n", "[server]\nbody_limit_bytes = 16777216\n");
    let app = Application::build(Config::from_toml(&text, "cap.toml").unwrap()).await.unwrap();
    // Flink job ids: 32 hexadecimal digits (`a` or `b`, then the number).
    let many = |prefix: &str| {
        let mut w = support::webhook_for("x", "x", &[]);
        w["alerts"] = (0..10_000)
            .map(|i| serde_json::json!({"status": "firing", "labels": {"alertname": "FlinkJobBackpressured", "job_id": format!("{prefix}{i:031x}")}, "fingerprint": format!("{i}")}))
            .collect::<Vec<_>>()
            .into();
        w
    };
    let c = reqwest::Client::new();
    let url = format!("{}/webhook/alertmanager", app.url());
    let r = c.post(&url).json(&many("a")).send().await.unwrap();
    assert_eq!(r.status(), 202);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!((body["jobs"].as_u64(), body["jobs_dropped"].as_u64()), (Some(50), Some(9_950)), "{body}");
    assert!(body["note"].as_str().unwrap().contains("max_jobs_per_webhook"), "{body}");
    // These jobs are unknown to culprit (no verdict yet, no plan): together they may hold
    // half the queue, 100 / 2 = 50. 50 more would make 100 > 50: refused whole with 429,
    // nothing stored, before the queue itself (100 ≤ max_queue) is full.
    let r = c.post(&url).json(&many("b")).send().await.unwrap();
    assert_eq!(r.status(), 429);
    assert!(r.headers().contains_key("retry-after"));
    // The same jobs again merge into the waiting diagnoses: accepted when full.
    assert_eq!(c.post(&url).json(&many("a")).send().await.unwrap().status(), 202);
    let metrics = c.get(format!("{}/metrics", app.url())).send().await.unwrap().text().await.unwrap();
    assert_eq!(support::metric(&metrics, "culprit_queue_depth{queue=\"work\"}"), 50.0, "{metrics}");
    // Three webhooks of 10,000 jobs, each capped at 50: 3 × 9,950 left out.
    assert_eq!(support::metric(&metrics, "culprit_webhook_jobs_dropped_total"), 29_850.0, "{metrics}");
    assert_eq!(support::metric(&metrics, "culprit_webhooks_total{outcome=\"too_many_unknown\"}"), 1.0, "{metrics}");
    app.stop().await;
}
