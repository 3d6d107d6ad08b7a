//! Field report 14 and its kind, "one job through several alert groups": a route with
//! `group_by: ['...']` (or group_by labels that split one job's alerts, job-level plus
//! task-level alerts, several routes with `continue: true`) sends one webhook per alert
//! group; every destination shows one verdict for the job, the other groups tied to it, and
//! the verdict resolves with the last group carrying it. And the lab defect "latest verdict
//! everywhere": a weak verdict's follow-up with the same culprit and a higher confidence is
//! shown in place by every destination.
//!
//! Real parts: `culprit serve` in process (`Application`, what `serve` runs) with its SQLite
//! store, a real VictoriaMetrics holding a real Flink 1.20 capture (a slow sink) shifted to
//! end now, the capture's plan, and the capture server standing for Slack's Web API,
//! PagerDuty's Events API, a generic webhook receiver and Alertmanager's API. The three
//! webhooks are report 14's own (`tests/data/reports3/14-*/webhook-{1,2,3}.json`: the
//! job-level `FlinkJobBackpressured` and two `FlinkTaskBackpressured`, each its own
//! `groupKey`), with the report's job id and name replaced by the capture's.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use culprit::config::Config;
use culprit::service::server::Application;
use serde_json::Value;

use crate::support;
use crate::support::capture::{Capture, Received};

/// The capture the job's metrics come from (Flink 1.20, a slow sink, high confidence).
pub(super) const CAPTURE: &str = "examples/captures/flink-1.20-slow-sink";
/// Its job, as Flink and the reporter name it.
const JOB_ID: &str = "1693c3fd3273a60c5bb4710556379791";
pub(super) const JOB_NAME: &str = "bp_lab_slow_sink";
/// Report 14's job, replaced in its webhooks.
const REPORT_JOB_ID: &str = "3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f";
const REPORT_JOB_NAME: &str = "checkout_enricher";

pub(super) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// Report 14's webhook `n` (1: the job-level alert; 2, 3: task-level ones) for the capture's
/// job: job id and name replaced everywhere (labels and `groupKey`).
pub(super) fn webhook(n: u32) -> Value {
    let path = root().join(format!("tests/data/reports3/14-group-by-all-per-task-alerts/webhook-{n}.json"));
    let text = std::fs::read_to_string(path).unwrap();
    serde_json::from_str(&text.replace(REPORT_JOB_ID, JOB_ID).replace(REPORT_JOB_NAME, JOB_NAME)).unwrap()
}

/// The same group's webhook once its alert resolved.
pub(super) fn resolved(mut w: Value) -> Value {
    w["status"] = "resolved".into();
    for a in w["alerts"].as_array_mut().unwrap() {
        a["status"] = "resolved".into();
        a["endsAt"] = jiff::Timestamp::now().to_string().into();
    }
    w
}

/// The capture's recording, shifted to end a second ago; without `numRecordsIn` when
/// `records` is false (then the records rates are unknown and the verdict's confidence is
/// medium: the same culprit and finding, a weaker verdict).
pub(super) fn recording(records: bool) -> String {
    let text = support::shifted(&root().join(CAPTURE).join("recording.om.gz"), now_ms() - 1_000);
    if records {
        return text;
    }
    text.lines().filter(|l| !l.contains("numRecordsIn")).map(|l| format!("{l}\n")).collect()
}

pub(super) fn vm(text: &str) -> support::Server {
    support::victoria_metrics_holding(text, &["-search.latencyOffset=0s", "-search.disableCache"])
}

/// `serve` reading `prometheus`, posting every destination to `capture`: Slack's Web API
/// (`/api/…`), PagerDuty (`/v2/enqueue`), a webhook (`/hook`) and Alertmanager (`/am/…`).
async fn serve(dir: &Path, prometheus: &str, capture: &Capture, service: &str) -> Application {
    let plan = root().join(CAPTURE).join("plan.json");
    let extra = format!(
        "[flink.plans]\n\"bp-lab-slow-sink\" = \"{}\"\n[[notify.webhook]]\nname = \"incident-bot\"\nurl = \"{c}/hook\"\n\
         [notify.alertmanager]\nurl = \"{c}/am\"\n[service]\n{service}\n",
        plan.display(),
        c = capture.url
    );
    let text = support::culprit_config(dir, prometheus, &capture.url, &capture.url, &extra);
    Application::build(Config::from_toml(&text, "episode.toml").unwrap()).await.unwrap()
}

pub(super) async fn post(app: &Application, body: &Value) {
    let r = reqwest::Client::new().post(format!("{}/webhook/alertmanager", app.url())).json(body).send().await.unwrap();
    assert_eq!(r.status(), 202, "{}", r.text().await.unwrap());
}

pub(super) async fn diagnoses(app: &Application) -> f64 {
    let m = reqwest::get(format!("{}/metrics", app.url())).await.unwrap().text().await.unwrap();
    support::diagnoses_total(&m)
}

/// Slack top-level posts and thread replies (their text).
fn slack_posts(c: &Capture) -> (Vec<String>, Vec<String>) {
    let text = |r: &Received| r.body["text"].as_str().unwrap_or_default().to_string();
    let posts = c.on("/api/chat.postMessage");
    let top = posts.iter().filter(|p| p.body.get("thread_ts").is_none()).map(text).collect();
    let replies = posts.iter().filter(|p| p.body.get("thread_ts").is_some()).map(text).collect();
    (top, replies)
}

fn header(r: &Received, name: &str) -> String {
    r.headers.get(name).map(|v| v.to_str().unwrap().to_string()).unwrap_or_default()
}

/// The alert groups a webhook POST names (`X-Culprit-Alert-Groups`, header-encoded JSON).
fn alert_groups(r: &Received) -> Vec<String> {
    let raw = header(r, "x-culprit-alert-groups");
    let decoded = percent_decode(&raw);
    serde_json::from_str(&decoded).unwrap()
}

fn percent_decode(s: &str) -> String {
    let (mut out, b) = (Vec::new(), s.as_bytes());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap());
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

pub(super) fn group_key(n: u32) -> String {
    webhook(n)["groupKey"].as_str().unwrap().to_string()
}

/// Report 14 as reported: the three webhooks back to back (within `service.coalesce`, the
/// report's 1 s). Expected: one diagnosis, one Slack verdict (its post and the details reply
/// in its thread), one PagerDuty event for the job, one webhook POST and one Alertmanager
/// alert, each naming the three groups.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_14_three_groups_of_one_job_at_once_give_one_verdict_per_destination() {
    support::init_logs();
    let store = vm(&recording(true));
    let capture = Capture::start().await;
    let dir = tempfile::tempdir().unwrap();
    let app = serve(dir.path(), &store.url, &capture, "coalesce = \"1s\"").await;
    for n in 1..=3 {
        post(&app, &webhook(n)).await;
    }
    support::wait_for("the Slack verdict", Duration::from_secs(60), || !capture.slack_messages().is_empty()).await;
    support::drained(&app).await;

    assert_eq!(diagnoses(&app).await, 1.0, "one diagnosis");
    let (top, replies) = slack_posts(&capture);
    assert_eq!(top.len(), 1, "one Slack verdict, not three: {top:#?}");
    assert!(top[0].contains("is the culprit"), "{}", top[0]);
    assert_eq!(replies.len(), 1, "its details reply alone: {replies:#?}");
    assert!(capture.on("/api/chat.update").is_empty());
    // The three groups, sorted by groupKey: the lead is the first (`{}/{}:{alertname=
    // "FlinkJobBackpressured"…` sorts before `…"FlinkTaskBackpressured"…`).
    let mut groups: Vec<String> = (1..=3).map(group_key).collect();
    groups.sort();
    let events = capture.pagerduty_events();
    assert_eq!(events.len(), 1, "one PagerDuty event for the job: {events:#?}");
    assert_eq!(events[0]["payload"]["custom_details"]["alert_groups"], serde_json::json!(groups));
    assert_eq!(events[0]["payload"]["custom_details"]["group_key"], groups[0].as_str());
    let hooks = capture.on("/hook");
    assert_eq!(hooks.len(), 1, "one webhook POST");
    assert_eq!(alert_groups(&hooks[0]), groups);
    assert_eq!(header(&hooks[0], "x-culprit-revision"), "0");
    let am = capture.on("/am/api/v2/alerts");
    assert_eq!(am.len(), 1, "one Alertmanager alert");
    let alert = &am[0].body[0];
    assert_eq!(
        alert["annotations"]["alert_groups"].as_str().map(|s| serde_json::from_str::<Value>(s).unwrap()),
        Some(serde_json::json!(groups))
    );
    // Its labels are what the three have in common: the job's, no task's.
    assert_eq!(alert["labels"]["job_id"], JOB_ID);
    assert!(alert["labels"].get("task_name").is_none(), "{alert:#}");
    app.stop().await;
}

/// The same three groups arriving apart (each after the previous one was diagnosed and
/// posted), then resolving one by one. Every destination keeps one verdict for the job:
/// Slack one post, each later group a short reply naming it in the thread, each group that
/// resolves while others fire a reply saying the verdict stays open, and one "resolved"
/// reply when the last one resolves; PagerDuty one event (folded groups, never a resolve of
/// its own); the webhook one verdict POST, a `joined` and a `group_resolved` notice per
/// group and one `resolved`; Alertmanager one alert (refreshed under the same labels), ended
/// once, with the last group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_that_arrive_and_resolve_apart_are_tied_to_the_one_verdict_at_every_destination() {
    support::init_logs();
    let store = vm(&recording(true));
    let capture = Capture::start().await;
    let dir = tempfile::tempdir().unwrap();
    let app = serve(dir.path(), &store.url, &capture, "coalesce = \"100ms\"").await;
    for n in 1..=3 {
        // Stored before the 202: drained waits for its diagnosis and every notice.
        post(&app, &webhook(n)).await;
        support::drained(&app).await;
    }
    assert_eq!(diagnoses(&app).await, 3.0, "three diagnoses, one per webhook");
    let (top, replies) = slack_posts(&capture);
    assert_eq!(top.len(), 1, "one Slack verdict: {top:#?}");
    let joined: Vec<&String> = replies.iter().filter(|r| r.contains("Also firing")).collect();
    assert_eq!(joined.len(), 2, "{replies:#?}");
    // Each reply names its group by its labels (task_name, as the webhooks carry it).
    assert!(joined.iter().any(|r| r.contains("Source:\\_checkouts") || r.contains("Source:_checkouts")), "{joined:#?}");
    // A later diagnosis may see other numbers (the window follows the store's newest data):
    // then the verdict is revised in place, never posted again. PagerDuty: one incident,
    // the job's lead group's.
    let events = capture.pagerduty_events();
    let dedup: std::collections::BTreeSet<&str> = events.iter().map(|e| e["dedup_key"].as_str().unwrap()).collect();
    assert_eq!(dedup.len(), 1, "one PagerDuty incident for the job: {events:#?}");
    assert!(events.iter().all(|e| e["event_action"] == "trigger"));
    let hooks = capture.on("/hook");
    let kinds = |hooks: &[Received]| -> Vec<String> {
        hooks.iter().map(|h| h.body.get("kind").and_then(Value::as_str).unwrap_or("verdict").to_string()).collect()
    };
    let (verdicts, joined): (Vec<&Received>, Vec<&Received>) = hooks.iter().partition(|h| h.body.get("kind").is_none());
    assert_eq!(joined.iter().map(|h| h.body["kind"].as_str().unwrap()).collect::<Vec<_>>(), ["joined", "joined"]);
    assert_eq!(alert_groups(joined[1]).len(), 3);
    // Every verdict POST is the one verdict (its first post and any revisions).
    let refs: std::collections::BTreeSet<String> =
        verdicts.iter().map(|h| header(h, "x-culprit-verdict-ref")).collect();
    assert_eq!(refs.len(), 1, "one verdict: {refs:?}");
    assert_eq!(header(verdicts[0], "x-culprit-revision"), "0");
    let am = capture.on("/am/api/v2/alerts");
    let labels: std::collections::BTreeSet<String> = am.iter().map(|r| r.body[0]["labels"].to_string()).collect();
    assert_eq!(labels.len(), 1, "one Alertmanager alert, refreshed: {labels:#?}");

    // Two groups resolve: the verdict stays open, and the thread says so.
    let before = (capture.on("/am/api/v2/alerts").len(), capture.on("/hook").len());
    for n in [1, 2] {
        post(&app, &resolved(webhook(n))).await;
        support::drained(&app).await;
    }
    let (top, replies) = slack_posts(&capture);
    assert_eq!(top.len(), 1);
    let still: Vec<&String> = replies.iter().filter(|r| r.contains("Alert group resolved")).collect();
    assert_eq!(still.len(), 2, "{replies:#?}");
    assert!(still[1].contains("while 1 other alert group still fires"), "{}", still[1]);
    assert!(!replies.iter().any(|r| r.contains("*Resolved*")), "not resolved yet: {replies:#?}");
    assert_eq!(capture.on("/am/api/v2/alerts").len(), before.0, "culprit's alert is not ended");
    assert_eq!(kinds(&capture.on("/hook")[before.1..]), ["group_resolved", "group_resolved"]);
    // The last one: the verdict resolves, once per destination.
    post(&app, &resolved(webhook(3))).await;
    support::drained(&app).await;
    let (top, replies) = slack_posts(&capture);
    assert_eq!(top.len(), 1);
    assert_eq!(replies.iter().filter(|r| r.contains("*Resolved*")).count(), 1, "{replies:#?}");
    assert_eq!(kinds(&capture.on("/hook")[before.1..]), ["group_resolved", "group_resolved", "resolved"]);
    let am = capture.on("/am/api/v2/alerts");
    assert_eq!(am.len(), before.0 + 1, "one post ends culprit's alert");
    let ended = &am.last().unwrap().body[0];
    assert!(ended["endsAt"].as_str().unwrap() <= jiff::Timestamp::now().to_string().as_str(), "{ended:#}");
    assert_eq!(
        capture.pagerduty_events().len(),
        events.len(),
        "PagerDuty: nothing more (Alertmanager resolves its incidents)"
    );
    app.stop().await;
}

/// A proxy to `before` until switched, then to `after`: the job's data changing between a
/// diagnosis and its follow-up.
#[derive(Clone)]
struct Switch {
    before: String,
    after: String,
    switched: Arc<AtomicBool>,
    client: reqwest::Client,
}

async fn forward(State(s): State<Switch>, method: Method, uri: Uri, body: Bytes) -> Response {
    let upstream = if s.switched.load(Ordering::SeqCst) { &s.after } else { &s.before };
    let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let request = s
        .client
        .request(method, format!("{upstream}{path}"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body);
    match request.send().await {
        Ok(answer) => {
            let status = StatusCode::from_u16(answer.status().as_u16()).unwrap();
            (status, [("content-type", "application/json")], answer.bytes().await.unwrap()).into_response()
        }
        Err(e) => (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    }
}

pub(super) async fn switch(before: &str, after: &str) -> (String, Arc<AtomicBool>) {
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

/// The lab defect: the weak verdict (confidence medium: the records counters were not
/// there yet) is followed up `service.rediagnose_weak_after` later with the same culprit and
/// finding and confidence high. Every destination shows the latest: Slack's message updated
/// in place (`chat.update`, no new `chat.postMessage`), PagerDuty re-triggered under the same
/// `dedup_key` with the new verdict, the webhook a new POST with the same verdict ref and
/// revision 1, Alertmanager its alert again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_with_higher_confidence_and_the_same_culprit_is_shown_in_place_everywhere() {
    support::init_logs();
    let (weak, firm) = (vm(&recording(false)), vm(&recording(true)));
    let (prometheus, switched) = switch(&weak.url, &firm.url).await;
    let capture = Capture::start().await;
    let dir = tempfile::tempdir().unwrap();
    let app = serve(dir.path(), &prometheus, &capture, "coalesce = \"100ms\"\nrediagnose_weak_after = \"6s\"").await;
    post(&app, &webhook(1)).await;
    support::wait_for("the first verdict", Duration::from_secs(60), || capture.on("/hook").len() == 1).await;
    // By the follow-up the records counters are there.
    switched.store(true, Ordering::SeqCst);
    support::wait_for("the follow-up", Duration::from_secs(60), || capture.on("/hook").len() == 2).await;
    support::drained(&app).await;

    let hooks = capture.on("/hook");
    let confidence = |r: &Received| r.body["confidence"].as_str().unwrap().to_string();
    assert_eq!((confidence(&hooks[0]), confidence(&hooks[1])), ("medium".into(), "high".into()));
    assert_eq!(hooks[0].body["culprit"]["vertex_id"], hooks[1].body["culprit"]["vertex_id"], "the same culprit");
    // Slack: the message shows the latest verdict, and nothing new was posted.
    let posts = capture.on("/api/chat.postMessage");
    assert_eq!(posts.len(), 2, "the verdict and its details reply, before the follow-up only");
    let updates = capture.on("/api/chat.update");
    assert_eq!(updates.len(), 1);
    assert!(updates[0].body["ts"].as_str().is_some_and(|ts| !ts.is_empty()), "the verdict's message");
    let updated = updates[0].body["text"].as_str().unwrap();
    assert!(updated.contains("confidence high") && !updated.starts_with("Changed"), "{updated}");
    // PagerDuty: the same incident, the new verdict.
    let events = capture.pagerduty_events();
    assert_eq!(events.len(), 2, "{events:#?}");
    assert_eq!(events[0]["dedup_key"], events[1]["dedup_key"]);
    let details = &events[1]["payload"]["custom_details"];
    assert_eq!((details["verdict"]["confidence"].as_str(), details["revision"].as_u64()), (Some("high"), Some(1)));
    // The webhook: a new POST of the same verdict, revision 1, its own idempotency key.
    assert_eq!(header(&hooks[0], "x-culprit-verdict-ref"), header(&hooks[1], "x-culprit-verdict-ref"));
    assert_eq!(
        (header(&hooks[0], "x-culprit-revision"), header(&hooks[1], "x-culprit-revision")),
        ("0".into(), "1".into())
    );
    assert_ne!(header(&hooks[0], "idempotency-key"), header(&hooks[1], "idempotency-key"));
    // Alertmanager already re-posted: its alert now says high too (same labels).
    let am = capture.on("/am/api/v2/alerts");
    assert_eq!(am.len(), 2);
    assert_eq!(am[0].body[0]["labels"], am[1].body[0]["labels"]);
    app.stop().await;
}
