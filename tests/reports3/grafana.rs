//! Report 08 and its kind, "alert sources other than Alertmanager v4": a Grafana-managed
//! alert rule's webhook contact point (version 1, orgId, state, title, message, per alert
//! silenceURL, dashboardURL, panelURL, values, valueString) is diagnosed as Alertmanager's
//! webhook is, at `/webhook/grafana` and at `/webhook/alertmanager`; its silence link goes
//! with the verdict; and what culprit cannot read is refused with a 400 that says what it
//! accepts, logged once per sender.
//!
//! Real parts: the built `culprit serve` (its own process, its log a file), a real
//! VictoriaMetrics holding the report's job (imported by the report's own
//! `tools/live_job.py`, as its README runs it), the report's Flink REST answers (written by
//! the same tool) behind a stand-in server, and the capture server for Slack and the webhook.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::support::capture::Capture;
use crate::support::{self, serve};

const JOB_ID: &str = "3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f";
const SILENCE: &str = "https://grafana.example.com/alerting/silence/new?alertmanager=grafana&matcher=__alert_rule_uid__%3Dbdx1f2h3k4l5ma&orgId=1";

fn report() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/reports3/08-grafana-alerting-webhook")
}

/// A running setup of report 08: VictoriaMetrics with the job, Flink REST, the capture
/// server and culprit serving the report's `culprit.toml` (ports and tokens made local).
struct Setup {
    _vm: support::Server,
    _flink: wiremock::MockServer,
    capture: Capture,
    culprit: serve::ServeProcess,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

/// The webhook token of a setup that asks for one (`{dir}/webhook-token`).
const WEBHOOK_TOKEN: &str = "glsa_SECRETTOKEN_abcdef0123456789";

async fn setup() -> Setup {
    setup_with("").await
}

/// [`setup`] with `server` added to the `[server]` table (`{dir}` is the setup's directory).
async fn setup_with(server: &str) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    // VictoriaMetrics with its default flags, as the report runs it.
    let vm = support::victoria_metrics_holding("", &[]);
    let tool = report().join("../tools/live_job.py");
    let out = std::process::Command::new("python3").arg(&tool).arg(dir.path()).arg(&vm.url).output().unwrap();
    assert!(out.status.success(), "live_job.py: {}", String::from_utf8_lossy(&out.stderr));
    // The tool's Flink answers, laid out as the Flink REST stand-in serves them.
    std::fs::create_dir_all(dir.path().join("rest")).unwrap();
    std::fs::copy(dir.path().join("flink/plan.json"), dir.path().join("plan.json")).unwrap();
    for f in ["jobs-overview.json", "checkpoints-config.json"] {
        std::fs::copy(dir.path().join("flink").join(f), dir.path().join("rest").join(f)).unwrap();
    }
    let flink = support::flink_rest_for(dir.path()).await;
    let capture = Capture::start().await;
    std::fs::write(dir.path().join("slack-token"), "xoxb-test-token").unwrap();
    std::fs::write(dir.path().join("hook-token"), "hook-secret").unwrap();
    // For a setup whose `[server]` names it as its webhook credentials.
    std::fs::write(dir.path().join("webhook-token"), WEBHOOK_TOKEN).unwrap();
    let port = support::free_port();
    let config = std::fs::read_to_string(report().join("culprit.toml"))
        .unwrap()
        .replace("http://127.0.0.1:18428", &vm.url)
        .replace("http://127.0.0.1:19300/flink", &flink.uri())
        .replace("http://127.0.0.1:19300", &capture.url)
        .replace("127.0.0.1:19187", &format!("127.0.0.1:{port}"))
        .replace("[server]\n", &format!("[server]\n{}\n", server.replace("{dir}", &dir.path().display().to_string())))
        .replace("run/culprit.db", &dir.path().join("culprit.db").display().to_string())
        .replace(
            r#"{ env = "SLACK_BOT_TOKEN" }"#,
            &format!(r#"{{ file = "{}" }}"#, dir.path().join("slack-token").display()),
        )
        .replace(
            r#"{ env = "HOOK_TOKEN" }"#,
            &format!(r#"{{ file = "{}" }}"#, dir.path().join("hook-token").display()),
        );
    let path = dir.path().join("culprit.toml");
    std::fs::write(&path, config).unwrap();
    let log = dir.path().join("culprit.log");
    let culprit = serve::start(&path, port, &log).await;
    Setup { _vm: vm, _flink: flink, capture, culprit, log, _dir: dir }
}

async fn post(url: &str, path: &str, body: &str) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(format!("{url}{path}"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// Slack `chat.postMessage` bodies: (top-level posts, thread replies).
fn slack_posts(c: &Capture) -> (Vec<Value>, Vec<Value>) {
    let posts: Vec<Value> = c.on("/slack/api/chat.postMessage").into_iter().map(|r| r.body).collect();
    posts.into_iter().partition(|b| b.get("thread_ts").is_none())
}

async fn verdicts(url: &str) -> Vec<Value> {
    let v: Value = reqwest::get(format!("{url}/api/v1/verdicts")).await.unwrap().json().await.unwrap();
    v.as_array().cloned().or_else(|| v["verdicts"].as_array().cloned()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_08_a_grafana_managed_alert_is_diagnosed_and_posted_with_its_silence_link() {
    let s = setup().await;
    let url = s.culprit.url.clone();
    let body = std::fs::read_to_string(report().join("webhook-grafana.json")).unwrap();
    let (status, answer) = post(&url, "/webhook/grafana", &body).await;
    assert_eq!(status, 202, "{answer}");
    assert_eq!(answer["jobs"], 1, "{answer}");
    support::drained_at(&url).await;

    let metrics = reqwest::get(format!("{url}/metrics")).await.unwrap().text().await.unwrap();
    assert_eq!(support::diagnoses_total(&metrics), 1.0, "one diagnosis");
    let v = verdicts(&url).await;
    assert_eq!(v.len(), 1, "{v:#?}");
    let verdict = if v[0].get("verdict").is_some() { &v[0]["verdict"] } else { &v[0] };
    assert_eq!(verdict["job"]["id"], JOB_ID);
    assert_eq!(verdict["finding"], "sink", "{verdict:#}");
    assert_eq!(verdict["culprit"]["vertex_name"], "Sink: checkouts-es", "{verdict:#}");

    // One Slack post and its thread reply (the details); one webhook POST.
    let (posts, replies) = slack_posts(&s.capture);
    assert_eq!((posts.len(), replies.len()), (1, 1), "{posts:#?}\n{replies:#?}");
    let hooks = s.capture.on("/hook");
    assert_eq!(hooks.len(), 1);
    // Grafana's silence link is a button of the post and a field of the webhook's body;
    // its empty dashboardURL and panelURL are no links.
    let buttons: Vec<&Value> = posts[0]["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "actions")
        .flat_map(|b| b["elements"].as_array().unwrap())
        .collect();
    assert!(buttons.iter().any(|b| b["text"]["text"] == "Silence" && b["url"] == SILENCE), "{buttons:#?}");
    assert!(!buttons.iter().any(|b| b["text"]["text"] == "Dashboard"));
    assert_eq!(hooks[0].body["alert_links"], serde_json::json!({"silence": SILENCE}));
    // The group is Grafana's, scoped by its URL and organisation.
    let group = hooks[0].headers["x-culprit-group-key"].to_str().unwrap().to_string();
    assert!(group.starts_with("grafana:1@https://grafana.example.com/|{}/{__grafana_autogenerated__"), "{group}");

    // The same notification again, now at /webhook/alertmanager (Grafana repeats a firing
    // group at its repeat interval): recognised as Grafana's, the same group, the verdict
    // unchanged, so nothing new is posted.
    let (status, answer) = post(&url, "/webhook/alertmanager", &body).await;
    assert_eq!(status, 202, "{answer}");
    support::drained_at(&url).await;
    let (posts, replies) = slack_posts(&s.capture);
    assert_eq!((posts.len(), replies.len(), s.capture.on("/hook").len()), (1, 1, 1), "a repeat posts nothing");

    // Resolved: the group's message is told so (Slack replies in the thread, the webhook
    // gets a resolved notice).
    let mut resolved: Value = serde_json::from_str(&body).unwrap();
    resolved["status"] = "resolved".into();
    resolved["state"] = "ok".into();
    resolved["alerts"][0]["status"] = "resolved".into();
    resolved["alerts"][0]["endsAt"] = "2026-12-01T12:10:00Z".into();
    let (status, _) = post(&url, "/webhook/grafana", &resolved.to_string()).await;
    assert_eq!(status, 202);
    support::drained_at(&url).await;
    let hooks = s.capture.on("/hook");
    assert_eq!(hooks.len(), 2, "the resolution reaches the webhook");
    assert_eq!(hooks[1].body["kind"], "resolved", "{:#}", hooks[1].body);
    let (posts, _) = slack_posts(&s.capture);
    assert_eq!(posts.len(), 1, "no second top-level Slack post");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_culprit_cannot_read_is_refused_with_what_it_accepts_and_logged_once_per_sender() {
    let s = setup().await;
    let url = s.culprit.url.clone();
    // Three refusals from one Grafana (wrong shape: no groupKey, an alerts object, an
    // alert status Grafana never sends), one from another sender.
    let bad = [
        r#"{"externalURL": "https://grafana-a.example.com/", "status": "firing", "alerts": []}"#,
        r#"{"externalURL": "https://grafana-a.example.com/", "groupKey": "g", "status": "firing", "alerts": {}}"#,
        r#"{"externalURL": "https://grafana-a.example.com/", "groupKey": "g", "status": "firing", "alerts": [{"status": "pending"}]}"#,
    ];
    for b in bad {
        let (status, answer) = post(&url, "/webhook/grafana", b).await;
        assert_eq!(status, 400, "{answer}");
        let error = answer["error"].as_str().unwrap();
        assert!(
            error.contains(
                "Alertmanager's webhook (version 4) and Grafana Alerting's webhook contact point (version 1)"
            ),
            "{error}"
        );
        assert_eq!(
            answer["accepted"],
            serde_json::json!(["alertmanager webhook version 4", "grafana alerting webhook version 1"])
        );
    }
    let legacy = r#"{"externalURL": "https://grafana-b.example.com/", "ruleName": "old", "evalMatches": [], "state": "alerting"}"#;
    let (status, answer) = post(&url, "/webhook/alertmanager", legacy).await;
    assert_eq!(status, 400);
    assert!(answer["error"].as_str().unwrap().contains("legacy dashboard alerting"), "{answer}");

    // An Alertmanager-shaped payload of a version culprit does not know, with usable
    // alerts: accepted, and the answer says how it was read.
    let mut v5 = support::webhook_for(JOB_ID, "checkout-enricher", &["f1".to_string()]);
    v5["version"] = "5".into();
    v5["alerts"][0]["labels"]["alertname"] = "KubeJobFailed".into();
    let (status, answer) = post(&url, "/webhook/alertmanager", &v5.to_string()).await;
    assert_eq!(status, 202, "{answer}");
    assert!(
        answer["note"].as_str().unwrap().contains("version \"5\" is not the version 4 Alertmanager sends"),
        "{answer}"
    );

    tokio::time::sleep(Duration::from_millis(300)).await;
    let log = std::fs::read_to_string(&s.log).unwrap();
    let refused: Vec<&str> = log.lines().filter(|l| l.contains("webhook refused (400)")).collect();
    // 4 refusals from 2 senders: one line each.
    assert_eq!(refused.len(), 2, "{refused:#?}");
    assert!(refused[0].contains("INFO") && refused[0].contains("grafana-a.example.com"), "{}", refused[0]);
    assert!(refused[1].contains("grafana-b.example.com"));
    assert!(log.lines().any(|l| l.contains("INFO") && l.contains("unknown version accepted")), "{log}");
    // No payload in the log: the alert status that was refused is named, no body.
    assert!(!log.contains(r#""alerts""#));
    let metrics = reqwest::get(format!("{url}/metrics")).await.unwrap().text().await.unwrap();
    assert_eq!(support::metric(&metrics, "culprit_webhooks_total{outcome=\"bad_request\"}"), 4.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_before_the_body_is_read_413_401_415_are_logged_once_per_sender_with_status_and_reason() {
    const TOKEN: &str = WEBHOOK_TOKEN;
    let s = setup_with(
        r#"body_limit_bytes = 4096
webhook_auth = { type = "bearer", token = { file = "{dir}/webhook-token" } }"#,
    )
    .await;
    let url = s.culprit.url.clone();
    let client = reqwest::Client::new();
    let send = |token: &'static str, content_type: &'static str, body: String| {
        let client = client.clone();
        let url = url.clone();
        async move {
            client
                .post(format!("{url}/webhook/grafana"))
                .bearer_auth(token)
                .header("content-type", content_type)
                .body(body)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    let small = r#"{"externalURL": "https://grafana-a.example.com/", "status": "firing", "alerts": []}"#.to_string();
    // Three of each: 401 with a wrong token (that looks like one), 415, 413 (5000 > 4096 bytes).
    for _ in 0..3 {
        assert_eq!(send("glsa_WRONGTOKEN_0000", "application/json", small.clone()).await, 401);
        assert_eq!(send(TOKEN, "text/plain", small.clone()).await, 415);
        assert_eq!(send(TOKEN, "application/json", format!("{{\"pad\": \"{}\"}}", "x".repeat(5000))).await, 413);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let log = std::fs::read_to_string(&s.log).unwrap();
    for (status, reason) in [
        (401, "missing or wrong webhook credentials"),
        (415, "not application/json"),
        (413, "larger than server.body_limit_bytes"),
    ] {
        let lines: Vec<&str> = log.lines().filter(|l| l.contains(&format!("webhook refused ({status})"))).collect();
        // Three refusals from one peer: one line.
        assert_eq!(lines.len(), 1, "{status}: {lines:#?}");
        assert!(
            lines[0].contains("INFO") && lines[0].contains("peer 127.0.0.1") && lines[0].contains(reason),
            "{}",
            lines[0]
        );
    }
    assert!(!log.contains("WRONGTOKEN") && !log.contains(TOKEN) && !log.contains("xxxx"), "{log}");
    let metrics = reqwest::get(format!("{url}/metrics")).await.unwrap().text().await.unwrap();
    assert_eq!(support::metric(&metrics, "culprit_webhooks_total{outcome=\"unauthorized\"}"), 3.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_final_slack_error_of_a_grafana_verdict_says_what_to_do_in_the_log() {
    let s = setup().await;
    let url = s.culprit.url.clone();
    // Slack answers the post as it does for an archived channel (HTTP 200, ok: false).
    s.capture.fail_next("/slack/api/chat.postMessage", 200, None, r#"{"ok": false, "error": "is_archived"}"#);
    let body = std::fs::read_to_string(report().join("webhook-grafana.json")).unwrap();
    assert_eq!(post(&url, "/webhook/grafana", &body).await.0, 202);
    support::drained_at(&url).await;
    let log = std::fs::read_to_string(&s.log).unwrap();
    let failed = log.lines().find(|l| l.contains("delivery failed for good")).unwrap_or_else(|| panic!("{log}"));
    assert!(failed.contains("is_archived") && failed.contains("unarchive it and invite the app"), "{failed}");
    assert!(!log.contains("xoxb-test-token"));
    // The webhook got the verdict all the same: one destination's refusal holds no other.
    assert_eq!(s.capture.on("/hook").len(), 1);
}
