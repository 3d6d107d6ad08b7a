//! The Slack buttons that act, end to end: culprit serve with real Prometheus, a Slack
//! stand-in (tests/support/capture.rs) and a real Alertmanager (Debian's
//! `prometheus-alertmanager`; the tests say so and stop when it is not installed).
//!
//! The button presses are Slack's documented `block_actions` payload, form-encoded as
//! `payload=…` and signed as Slack signs (`v0=` HMAC-SHA256 of `v0:{ts}:{body}`), posted
//! to `POST /slack/interactivity`: answered 200 within Slack's 3 s, the silence created in
//! Alertmanager on the group's stored labels (and suppressing an alert with them), the
//! results replied in the verdict's thread. Forged, replayed, unsigned and tampered
//! requests are refused and do nothing.

mod support;

use std::time::{Duration, Instant};

use culprit::config::Config;
use culprit::service::server::Application;
use culprit::service::slack_actions::signature::sign;
use serde_json::{Value, json};
use support::capture::Capture;

const SIGNING_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";

/// Where the payloads' `response_url` points: the Slack stand-in (whose host is
/// `api_url`'s), as `https://hooks.slack.com/actions/…` in Slack's example.
const RESPONSE_PATH: &str = "/actions/AABA1ABCD/1232321423432/D09sSasdasdAS9091209";

/// Slack's documented block_actions example, with culprit's button as the action pressed
/// and its `response_url` on `slack` (the stand-in).
fn block_actions(slack: &Capture, action_id: &str, value: &str) -> String {
    let payload = json!({
        "type": "block_actions",
        "team": {"id": "T9TK3CUKW", "domain": "example"},
        "user": {"id": "UA8RXUSPL", "username": "jtorrance", "name": "jtorrance", "team_id": "T9TK3CUKW"},
        "api_app_id": "AABA1ABCD",
        "token": "9s8d9as89d8as9d8as989",
        "container": {"type": "message", "message_ts": "1548261231.000200", "channel_id": "CBR2V3XEX", "is_ephemeral": false},
        "trigger_id": "12321423423.333649436676.d8c1bb837935619ccad0f624c448ffb3",
        "channel": {"id": "CBR2V3XEX", "name": "review-updates"},
        "response_url": format!("{}{RESPONSE_PATH}", slack.url),
        "actions": [{"action_id": action_id, "block_id": "=qXel", "text": {"type": "plain_text", "text": "x", "emoji": true},
                     "value": value, "type": "button", "action_ts": "1548426417.840180"}]
    });
    url::form_urlencoded::Serializer::new(String::new()).append_pair("payload", &payload.to_string()).finish()
}

fn now_s() -> i64 {
    jiff::Timestamp::now().as_second()
}

struct World {
    app: Application,
    slack: Capture,
    alertmanager: support::Server,
    _prom: support::Server,
    _pagerduty: Capture,
    _tmp: tempfile::TempDir,
}

/// The Alertmanager binary, or `None` (the caller says why it stops).
fn alertmanager_installed() -> bool {
    let found = std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .any(|d| std::path::Path::new(d).join("prometheus-alertmanager").exists());
    if !found {
        eprintln!("SKIPPED: `prometheus-alertmanager` is not installed (apt-get install -y prometheus-alertmanager)");
    }
    found
}

/// culprit with interactivity, a verdict posted to Slack for one synthetic job.
async fn world() -> World {
    let now = jiff::Timestamp::now().as_millisecond();
    let jobs = support::synthetic_jobs(1, now - 1_000);
    let prom = support::prometheus_with_texts(&[jobs[0].1.clone()], support::free_port());
    let am_config = "route:\n  receiver: blackhole\nreceivers:\n  - name: blackhole\n";
    let alertmanager = support::alertmanager(am_config, support::free_port());
    let (slack, pagerduty) = (Capture::start().await, Capture::start().await);
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("signing-secret"), SIGNING_SECRET).unwrap();
    std::fs::write(tmp.path().join("link-key"), "link-key-for-tests").unwrap();
    let port = support::free_port();
    let slack_api = format!("api_url = \"{}/api\"\n", slack.url);
    let text =
        support::culprit_config(tmp.path(), &prom.url, &slack.url, &pagerduty.url, "[service]\ncoalesce = \"100ms\"\n")
            .replace(
                "[server]\nlisten = \"127.0.0.1:0\"\n",
                &format!(
                    "[server]\nlisten = \"127.0.0.1:{port}\"\nexternal_url = \"http://127.0.0.1:{port}\"\nlink_secret = {{ file = \"{}\" }}\n",
                    tmp.path().join("link-key").display()
                ),
            )
            .replace(
                &slack_api,
                &format!(
                    "{slack_api}signing_secret = {{ file = \"{}\" }}\nalertmanager_url = \"{}\"\n",
                    tmp.path().join("signing-secret").display(),
                    alertmanager.url
                ),
            );
    assert!(text.contains("signing_secret") && text.contains("link_secret"), "{text}");
    let app = Application::build(Config::from_toml(&text, "buttons.toml").unwrap()).await.unwrap();
    let (job, _) = &jobs[0];
    let status = reqwest::Client::new()
        .post(format!("{}/webhook/alertmanager", app.url()))
        .json(&support::webhook_for(&job.job_id(), &job.job_name(), &["a".into()]))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 202);
    support::wait_for("the Slack message", Duration::from_secs(60), || !slack.slack_messages().is_empty()).await;
    support::drained(&app).await;
    World { app, slack, alertmanager, _prom: prom, _pagerduty: pagerduty, _tmp: tmp }
}

/// The message's buttons: (action_id, value) of each.
fn buttons(message: &Value) -> Vec<(String, String)> {
    let actions = message["blocks"].as_array().unwrap().iter().find(|b| b["type"] == "actions").unwrap();
    actions["elements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["action_id"].as_str().unwrap().to_string(), e["value"].as_str().unwrap_or("").to_string()))
        .collect()
}

/// Posts `body` to the interactivity endpoint with Slack's headers.
async fn press(app: &Application, body: &str, ts: i64, signature: &str) -> (u16, Duration) {
    let started = Instant::now();
    let r = reqwest::Client::new()
        .post(format!("{}/slack/interactivity", app.url()))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("x-slack-request-timestamp", ts.to_string())
        .header("x-slack-signature", signature)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), started.elapsed())
}

/// The replies culprit posted in threads.
fn replies(slack: &Capture) -> Vec<Value> {
    slack.on("/api/chat.postMessage").into_iter().map(|r| r.body).filter(|b| b.get("thread_ts").is_some()).collect()
}

async fn silences(am: &support::Server) -> Vec<Value> {
    reqwest::get(format!("{}/api/v2/silences", am.url)).await.unwrap().json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silence_2_h_creates_an_alertmanager_silence_on_the_groups_stored_labels_by_the_user_who_pressed() {
    if !alertmanager_installed() {
        return;
    }
    let w = world().await;
    let message = &w.slack.slack_messages()[0];
    let b = buttons(message);
    let names: Vec<&str> = b.iter().map(|(a, _)| a.as_str()).collect();
    assert_eq!(names, ["view_verdict", "culprit_rediagnose", "culprit_silence"], "{message:#}");
    let id = b[2].1.clone();
    assert!(id.parse::<i64>().is_ok(), "the value is the verdict id alone: {id}");

    let body = block_actions(&w.slack, "culprit_silence", &id);
    let ts = now_s();
    let (status, took) = press(&w.app, &body, ts, &sign(SIGNING_SECRET.as_bytes(), ts, body.as_bytes())).await;
    assert_eq!(status, 200);
    assert!(took < Duration::from_secs(3), "Slack wants an answer within 3 s: {took:?}");

    support::wait_for("the silence reply", Duration::from_secs(20), || {
        replies(&w.slack).iter().any(|r| r["text"].as_str().unwrap_or("").contains("Silenced by"))
    })
    .await;
    let all = silences(&w.alertmanager).await;
    assert_eq!(all.len(), 1, "{all:#?}");
    let s = &all[0];
    assert_eq!(s["status"]["state"], "active");
    assert_eq!(s["createdBy"], "jtorrance");
    let comment = s["comment"].as_str().unwrap();
    assert!(
        comment.starts_with(&format!("culprit verdict #{id}: {}/verdicts/{id}?expires=", w.app.url())),
        "{comment}"
    );
    let mut matchers: Vec<(String, String)> = s["matchers"]
        .as_array()
        .unwrap()
        .iter()
        .inspect(|m| assert_eq!((m["isRegex"].as_bool(), m["isEqual"].as_bool()), (Some(false), Some(true))))
        .map(|m| (m["name"].as_str().unwrap().to_string(), m["value"].as_str().unwrap().to_string()))
        .collect();
    matchers.sort();
    // The webhook's one alert: its labels are the group's common labels.
    let webhook_alert = &support::webhook_for("x", "y", &["a".into()])["alerts"][0]["labels"];
    let names: Vec<&str> = matchers.iter().map(|(n, _)| n.as_str()).collect();
    let mut expected: Vec<&str> = webhook_alert.as_object().unwrap().keys().map(String::as_str).collect();
    expected.sort();
    assert_eq!(names, expected);
    // 2 h: endsAt − startsAt = 7,200 s.
    let t = |k: &str| s[k].as_str().unwrap().parse::<jiff::Timestamp>().unwrap().as_second();
    assert!((t("endsAt") - t("startsAt") - 7_200).abs() <= 1, "{s:#}");

    // An alert with the group's labels is suppressed by it.
    let labels: serde_json::Map<String, Value> =
        matchers.iter().map(|(k, v)| (k.clone(), Value::from(v.clone()))).collect();
    let r = reqwest::Client::new()
        .post(format!("{}/api/v2/alerts", w.alertmanager.url))
        .json(&json!([{ "labels": labels }]))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let mut state = Value::Null;
    for _ in 0..50 {
        let alerts: Vec<Value> =
            reqwest::get(format!("{}/api/v2/alerts", w.alertmanager.url)).await.unwrap().json().await.unwrap();
        state = alerts.first().map(|a| a["status"].clone()).unwrap_or_default();
        if state["state"] == "suppressed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(state["state"], "suppressed", "{state:#}");
    assert_eq!(state["silencedBy"][0], s["id"]);

    let reply = replies(&w.slack).into_iter().find(|r| r["text"].as_str().unwrap().contains("Silenced by")).unwrap();
    let text = reply["text"].as_str().unwrap();
    assert!(text.starts_with(":no_bell: Silenced by <@UA8RXUSPL> until <!date^"), "{text}");
    assert!(text.contains(s["id"].as_str().unwrap()), "{text}");
    // In the verdict message's thread, where culprit's details reply is.
    let details =
        replies(&w.slack).into_iter().find(|r| r["metadata"]["event_type"] == "culprit_verdict_details").unwrap();
    assert_eq!((&reply["channel"], &reply["thread_ts"]), (&details["channel"], &details["thread_ts"]));
    w.app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn re_diagnose_now_replies_in_the_thread_that_the_verdict_is_unchanged_and_runs_once_at_a_time() {
    if !alertmanager_installed() {
        return;
    }
    let w = world().await;
    let id = buttons(&w.slack.slack_messages()[0])[1].1.clone();
    let body = block_actions(&w.slack, "culprit_rediagnose", &id);
    let ts = now_s();
    let (status, took) = press(&w.app, &body, ts, &sign(SIGNING_SECRET.as_bytes(), ts, body.as_bytes())).await;
    assert_eq!(status, 200);
    assert!(took < Duration::from_secs(3), "{took:?}");
    support::wait_for("the re-diagnosis reply", Duration::from_secs(30), || {
        replies(&w.slack).iter().any(|r| r["text"].as_str().unwrap_or("").contains("Re-diagnosed by"))
    })
    .await;
    let reply = replies(&w.slack).into_iter().find(|r| r["text"].as_str().unwrap().contains("Re-diagnosed")).unwrap();
    let text = reply["text"].as_str().unwrap();
    assert!(text.starts_with(":arrows_counterclockwise: Re-diagnosed by <@UA8RXUSPL>: unchanged ("), "{text}");
    assert!(silences(&w.alertmanager).await.is_empty(), "re-diagnosing silences nothing");

    // Two presses at once (two requests: the second presser's action_ts differs): one
    // re-diagnosis runs, the other presser is told so, alone.
    let second = body.replace("1548426417.840180", "1548426417.840181");
    // A second later than the first press: the same body at the same time would be that
    // request again (acknowledged, not acted on).
    let ts = now_s() + 1;
    let sig_a = sign(SIGNING_SECRET.as_bytes(), ts, body.as_bytes());
    let sig_b = sign(SIGNING_SECRET.as_bytes(), ts, second.as_bytes());
    let (a, b) = tokio::join!(press(&w.app, &body, ts, &sig_a), press(&w.app, &second, ts, &sig_b));
    assert_eq!((a.0, b.0), (200, 200));
    let rediagnosed = |slack: &Capture| {
        replies(slack).iter().filter(|r| r["text"].as_str().unwrap_or("").contains("Re-diagnosed by")).count()
    };
    support::wait_for("the second re-diagnosis reply", Duration::from_secs(30), || rediagnosed(&w.slack) >= 2).await;
    support::wait_for("the ephemeral answer", Duration::from_secs(10), || !w.slack.on(RESPONSE_PATH).is_empty()).await;
    let answer = w.slack.on(RESPONSE_PATH)[0].body["text"].as_str().unwrap().to_string();
    assert!(answer.contains(&format!("a re-diagnosis of verdict {id} is running already")), "{answer}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(rediagnosed(&w.slack), 2, "the first press's reply and one for the two at once");
    w.app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_replayed_unsigned_and_tampered_presses_do_nothing_and_the_same_request_twice_acts_once() {
    if !alertmanager_installed() {
        return;
    }
    let w = world().await;
    let id = buttons(&w.slack.slack_messages()[0])[2].1.clone();
    let body = block_actions(&w.slack, "culprit_silence", &id);
    let ts = now_s();
    let posts_before = w.slack.on("/api/chat.postMessage").len();

    // Signed with another secret.
    let forged = sign(b"not the signing secret", ts, body.as_bytes());
    assert_eq!(press(&w.app, &body, ts, &forged).await.0, 401);
    // A real signature, 6 minutes old: a replay.
    let old = ts - 360;
    assert_eq!(press(&w.app, &body, old, &sign(SIGNING_SECRET.as_bytes(), old, body.as_bytes())).await.0, 401);
    // No signature at all.
    assert_eq!(press(&w.app, &body, ts, "").await.0, 401);
    // Signed, then another verdict id put in: the signature no longer holds.
    let signed = sign(SIGNING_SECRET.as_bytes(), ts, body.as_bytes());
    let tampered = block_actions(&w.slack, "culprit_silence", &format!("{}", id.parse::<i64>().unwrap() + 1));
    assert_eq!(press(&w.app, &tampered, ts, &signed).await.0, 401);
    // Signed but not a verdict id (labels smuggled into the value): acknowledged, and the
    // presser alone told why (an ephemeral answer on the response_url), nothing silenced.
    let smuggled = block_actions(&w.slack, "culprit_silence", r#"{"alertname":".+"}"#);
    let (status, _) = press(&w.app, &smuggled, ts, &sign(SIGNING_SECRET.as_bytes(), ts, smuggled.as_bytes())).await;
    assert_eq!(status, 200);
    support::wait_for("the ephemeral answer", Duration::from_secs(10), || !w.slack.on(RESPONSE_PATH).is_empty()).await;
    let answer = &w.slack.on(RESPONSE_PATH)[0].body;
    assert_eq!(answer["response_type"], "ephemeral");
    assert_eq!(answer["text"], ":warning: Silence asked by <@UA8RXUSPL> failed: the button carries no verdict id");
    // A signed body that is no interaction payload.
    assert_eq!(press(&w.app, "text=hi", ts, &sign(SIGNING_SECRET.as_bytes(), ts, b"text=hi")).await.0, 400);

    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(silences(&w.alertmanager).await.is_empty());
    assert_eq!(w.slack.on("/api/chat.postMessage").len(), posts_before, "nothing was posted in the channel");
    assert_eq!(w.slack.on(RESPONSE_PATH).len(), 1, "only the signed press was answered");

    // The genuine request, then the very same request again within the window: one silence.
    assert_eq!(press(&w.app, &body, ts, &signed).await.0, 200);
    assert_eq!(press(&w.app, &body, ts, &signed).await.0, 200);
    support::wait_for("the silence reply", Duration::from_secs(20), || {
        replies(&w.slack).iter().any(|r| r["text"].as_str().unwrap_or("").contains("Silenced by"))
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(silences(&w.alertmanager).await.len(), 1, "a replayed request is not acted on twice");
    w.app.stop().await;
}
