//! A weak verdict is diagnosed once more after `service.rediagnose_weak_after` (here a few
//! seconds), and when the data says something else by then, the posted messages are
//! updated in place: one Slack message, edited with `chat.update` and a reply saying it
//! changed; PagerDuty's event again under the same dedup key. The service runs in process
//! against real Prometheus servers behind a switch that stands for the data changing, and
//! capture servers for Slack and PagerDuty.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use culprit::config::Config;
use culprit::service::server::Application;
use support::capture::Capture;

/// A proxy that forwards every request to `before` until switched, then to `after`.
#[derive(Clone)]
struct Switch {
    before: String,
    after: String,
    switched: Arc<AtomicBool>,
    client: reqwest::Client,
}

async fn forward(State(s): State<Switch>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let upstream = if s.switched.load(Ordering::SeqCst) { &s.after } else { &s.before };
    let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let mut request = s.client.request(method, format!("{upstream}{path}")).body(body);
    if let Some(t) = headers.get("content-type") {
        request = request.header("content-type", t);
    }
    match request.send().await {
        Ok(answer) => {
            let status = StatusCode::from_u16(answer.status().as_u16()).unwrap();
            (status, [("content-type", "application/json")], answer.bytes().await.unwrap()).into_response()
        }
        Err(e) => (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    }
}

async fn switch(before: &str, after: &str) -> (String, Arc<AtomicBool>) {
    let switched = Arc::new(AtomicBool::new(false));
    let state = Switch {
        before: before.into(),
        after: after.into(),
        switched: switched.clone(),
        client: reqwest::Client::new(),
    };
    let app = Router::new().fallback(forward).with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, switched)
}

/// The synthetic job's recording with nothing backpressured: the source's backpressured
/// time becomes idle time (950 ms/s backpressured, 45 idle → 0 and 995), so no vertex
/// holds the job back and the verdict has no finding (weak).
fn without_backpressure(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let source = line.contains("task_name=\"Source:_events\"");
        let value = |l: &str| l.rsplit(' ').nth(1).unwrap().parse::<f64>().unwrap();
        let with_value = |l: &str, v: f64| {
            let mut parts: Vec<&str> = l.rsplitn(3, ' ').collect();
            parts.reverse();
            format!("{} {v} {}", parts[0], parts[2])
        };
        if source && line.starts_with("flink_taskmanager_job_task_backPressuredTimeMsPerSecond{") {
            out.push_str(&with_value(line, 0.0));
        } else if source && line.starts_with("flink_taskmanager_job_task_idleTimeMsPerSecond{") {
            // 45 idle + 950 backpressured: the source waits for records, not for buffers.
            out.push_str(&with_value(line, value(line) + 950.0));
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

fn metric(metrics: &str, prefix: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(prefix))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<f64>().unwrap())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_weak_verdict_is_diagnosed_again_once_and_the_posts_are_updated_in_place_when_it_changed() {
    support::init_logs();
    let now = jiff::Timestamp::now().as_millisecond();
    let jobs = support::synthetic_jobs(1, now - 1_000);
    let (job, backpressured) = &jobs[0];
    let calm = support::prometheus_with_texts(&[without_backpressure(backpressured)], support::free_port());
    let busy = support::prometheus_with_texts(std::slice::from_ref(backpressured), support::free_port());
    let (prometheus, switched) = switch(&calm.url, &busy.url).await;
    let (slack, pagerduty) = (Capture::start().await, Capture::start().await);
    let tmp = tempfile::tempdir().unwrap();
    let text = support::culprit_config(
        tmp.path(),
        &prometheus,
        &slack.url,
        &pagerduty.url,
        "[service]\ncoalesce = \"100ms\"\nrediagnose_weak_after = \"8s\"\n",
    );
    let app = Application::build(Config::from_toml(&text, "rediagnose.toml").unwrap()).await.unwrap();
    let metrics = || async { reqwest::get(format!("{}/metrics", app.url())).await.unwrap().text().await.unwrap() };

    let webhook = support::webhook_for(&job.job_id(), &job.job_name(), &["a".into()]);
    let status =
        reqwest::Client::new().post(format!("{}/webhook/alertmanager", app.url())).json(&webhook).send().await.unwrap();
    assert_eq!(status.status(), 202);

    // The first verdict is weak: a follow-up is scheduled (counted before it is stored).
    let started = std::time::Instant::now();
    while metric(&metrics().await, "culprit_rediagnoses_total") < 1.0 {
        assert!(started.elapsed() < Duration::from_secs(60), "no follow-up was scheduled: {}", metrics().await);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // By the follow-up (8 s later) the data says something else.
    switched.store(true, Ordering::SeqCst);
    support::wait_for("the first Slack post", Duration::from_secs(30), || slack.slack_messages().len() == 1).await;
    let first = slack.slack_messages()[0].clone();
    assert_eq!(slack.on("/api/chat.update").len(), 0, "nothing to update yet");

    support::wait_for("the update in place", Duration::from_secs(60), || !slack.on("/api/chat.update").is_empty())
        .await;
    support::drained(&app).await;

    // One Slack message, edited in place to the new verdict, and a reply saying so.
    assert_eq!(slack.slack_messages().len(), 1, "no second message");
    let updates = slack.on("/api/chat.update");
    assert_eq!(updates.len(), 1);
    let top_ts: Vec<String> = slack
        .on("/api/chat.postMessage")
        .iter()
        .filter(|p| p.body.get("thread_ts").is_none())
        .map(|p| p.body["text"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(top_ts.len(), 1, "{top_ts:#?}");
    let (before, after) =
        (first["text"].as_str().unwrap().to_string(), updates[0].body["text"].as_str().unwrap().to_string());
    assert_ne!(before, after);
    // The synthetic job's bottleneck is its middle vertex, op-1 (3 vertices: 3 / 2 = 1),
    // named as the reporter writes it (no job graph here).
    assert!(after.starts_with("Changed: `op_1` is the culprit"), "the update names the new culprit: {after}");
    assert!(!before.contains("op_1` is the culprit"), "the weak verdict named no culprit: {before}");
    let replies: Vec<String> = slack
        .on("/api/chat.postMessage")
        .iter()
        .filter(|p| p.body.get("thread_ts").is_some())
        .map(|p| p.body["text"].as_str().unwrap_or_default().to_lowercase())
        .collect();
    assert!(replies.iter().any(|r| r.contains("changed")), "a reply says the verdict changed: {replies:#?}");

    // PagerDuty: the changed verdict under the same dedup key (the incident is updated).
    let events = pagerduty.pagerduty_events();
    assert!(!events.is_empty());
    let keys: std::collections::BTreeSet<&str> = events.iter().map(|e| e["dedup_key"].as_str().unwrap()).collect();
    assert_eq!(keys.len(), 1, "one incident: {events:#?}");
    assert!(events.last().unwrap()["payload"]["summary"].as_str().unwrap().contains("op_1"), "{events:#?}");

    // Two diagnoses, one follow-up: the follow-up's verdict is weak too (confidence low:
    // no job graph), yet it schedules none (drained above means nothing waits).
    let m = metrics().await;
    assert_eq!(metric(&m, "culprit_diagnoses_total{"), 2.0, "{m}");
    assert_eq!(metric(&m, "culprit_rediagnoses_total"), 1.0, "{m}");
    app.stop().await;
}
