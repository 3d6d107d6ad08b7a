//! The Slack notifier against a local HTTP server (wiremock) standing in for Slack.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use culprit::config::{SecretSource, SlackConfig, SlackMode};
use culprit::model::notice::{Notice, NoticeKind};
use culprit::model::verdict::Verdict;
use culprit::notify::slack::Slack;
use culprit::notify::slack::SlackImage;
use culprit::notify::{NotifyError, Sent};
use serde_json::{Value, json};
use tokio::time::Instant;
use wiremock::matchers::{body_partial_json, header, method, path, query_param};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const TOKEN: &str = "xoxb-1111-2222-S3CR3TT0K3N";
const CHANNEL: &str = "C0ALERTS";
const TS: &str = "1795000000.000100";
const WEBHOOK_PATH: &str = "/services/T000/B000/W3BH00KS3CR3T";

fn secret_file(value: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    writeln!(f, "{value}").unwrap();
    f
}

/// A web_api notifier toward `server` without pictures (they have tests of their own); keep
/// the file alive while it is used.
fn web_api(server: &MockServer) -> (Slack, tempfile::NamedTempFile) {
    web_api_with(server, SlackImage::Off)
}

fn web_api_with(server: &MockServer, image: SlackImage) -> (Slack, tempfile::NamedTempFile) {
    let file = secret_file(TOKEN);
    let cfg = SlackConfig {
        name: None,
        mode: SlackMode::WebApi,
        token: Some(SecretSource::File(file.path().to_path_buf())),
        channel: Some(CHANNEL.into()),
        webhook_url: None,
        api_url: server.uri(),
        image,
        signing_secret: None,
        alertmanager_url: None,
        alertmanager_auth: None,
    };
    (Slack::new(&cfg).unwrap(), file)
}

fn incoming_webhook(server: &MockServer) -> (Slack, tempfile::NamedTempFile, String) {
    let url = format!("{}{WEBHOOK_PATH}", server.uri());
    let file = secret_file(&url);
    let cfg = SlackConfig {
        name: None,
        mode: SlackMode::IncomingWebhook,
        token: None,
        channel: None,
        webhook_url: Some(SecretSource::File(file.path().to_path_buf())),
        api_url: "https://slack.com/api".into(),
        image: culprit::notify::slack::SlackImage::Off,
        signing_secret: None,
        alertmanager_url: None,
        alertmanager_auth: None,
    };
    (Slack::new(&cfg).unwrap(), file, url)
}

fn verdict(name: &str) -> Verdict {
    let capture = culprit::samples::captures::CAPTURES.iter().find(|c| c.name == name).unwrap();
    culprit::samples::captures::verdict(capture).unwrap()
}

fn notice(kind: NoticeKind, verdict: Option<Verdict>, key: &str) -> Notice {
    let job = verdict.as_ref().map(|v| v.job.clone()).unwrap_or(culprit::model::verdict::JobRef {
        name: "bp-lab-slow-sink".into(),
        id: "da23ad9af4e7326542c9a70eac958f42".into(),
    });
    Notice {
        links: Default::default(),
        kind,
        group_key: "{}:{alertname=\"FlinkBackpressure\"}".into(),
        labels: BTreeMap::from([("alertname".to_string(), "FlinkBackpressure".to_string())]),
        job,
        verdict,
        verdict_id: Some(7),
        verdict_url: Some("https://culprit.example.com/api/v1/verdicts/7".into()),
        reason: (kind == NoticeKind::CouldNotDiagnose).then(|| "Prometheus timed out".to_string()),
        firing: kind != NoticeKind::Resolved,
        changed: false,
        idempotency_key: key.into(),
        at_ms: 1_795_000_000_000,
        episode: Default::default(),
        maybe_repeat: false,
        incident: None,
        incident_view: None,
        incident_parent: None,
    }
}

fn first_verdict() -> Notice {
    notice(NoticeKind::Verdict, Some(verdict("slow-sink")), "slack:g1:v1")
}

fn posted(ts: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({ "ok": true, "channel": CHANNEL, "ts": ts }))
}

fn slack_error(code: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({ "ok": false, "error": code }))
}

fn state() -> Value {
    json!({ "channel": CHANNEL, "ts": TS })
}

async fn bodies(server: &MockServer, p: &str) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.url.path() == p)
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

fn has_blocks(r: &Request) -> bool {
    serde_json::from_slice::<Value>(&r.body).is_ok_and(|b| b.get("blocks").is_some())
}

fn without_blocks(r: &Request) -> bool {
    !has_blocks(r)
}

#[tokio::test]
async fn the_first_verdict_of_a_group_is_posted_with_metadata_and_blocks_and_its_message_becomes_the_state() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/chat.postMessage"))
        .and(header("authorization", format!("Bearer {TOKEN}").as_str()))
        .respond_with(posted(TS))
        .expect(2)
        .mount(&server)
        .await;
    let (slack, _f) = web_api(&server);
    let n = first_verdict();
    let sent = slack.send(&n, None).await.unwrap();
    assert_eq!(sent, Sent { state: Some(state()) });
    // The message, then the details in its thread (cause, numbers, steps), with metadata of
    // their own type: never taken for the notice itself, found by their own key.
    let details = &bodies(&server, "/chat.postMessage").await[1];
    assert_eq!(details["thread_ts"], TS);
    assert_eq!(details["metadata"]["event_type"], "culprit_verdict_details");
    assert_eq!(details["metadata"]["event_payload"]["idempotency_key"], "slack:g1:v1");
    assert!(details["blocks"][0]["text"]["text"].as_str().unwrap().starts_with("*Why*\nslow-sink: Writer is busy 99%"));

    let body = &bodies(&server, "/chat.postMessage").await[0];
    assert_eq!(body["channel"], CHANNEL);
    assert_eq!(
        body["metadata"],
        json!({
            "event_type": "culprit_verdict",
            "event_payload": { "idempotency_key": "slack:g1:v1", "group_key": n.group_key },
        })
    );
    let blocks = body["blocks"].as_array().unwrap();
    assert_eq!(blocks[0]["type"], "header");
    assert!(blocks[1]["text"]["text"].as_str().unwrap().starts_with("slow-sink: Writer (sink) is the culprit"));
    assert!(body["text"].as_str().unwrap().starts_with("slow-sink: Writer (sink) is the culprit"));
    assert!(body.get("thread_ts").is_none());
}

#[tokio::test]
async fn a_changed_verdict_updates_the_first_message_and_replies_in_its_thread() {
    let server = MockServer::start().await;
    Mock::given(method("POST")).and(path("/chat.update")).respond_with(posted(TS)).expect(1).mount(&server).await;
    Mock::given(method("POST"))
        .and(path("/chat.postMessage"))
        .respond_with(posted("1795000060.000200"))
        .expect(2)
        .mount(&server)
        .await;
    let (slack, _f) = web_api(&server);
    let mut n = notice(NoticeKind::Verdict, Some(verdict("hot-key")), "slack:g1:v2");
    n.changed = true;
    let sent = slack.send(&n, Some(&state())).await.unwrap();
    assert_eq!(sent.state, Some(state()), "the group keeps threading under its first message");

    let update = &bodies(&server, "/chat.update").await[0];
    assert_eq!(update["channel"], CHANNEL);
    assert_eq!(update["ts"], TS);
    assert!(update["blocks"][0]["text"]["text"].as_str().unwrap().contains("Changed: Backpressure culprit"));
    assert_eq!(update["metadata"]["event_payload"]["idempotency_key"], "slack:g1:v2");
    let reply = &bodies(&server, "/chat.postMessage").await[0];
    assert_eq!(reply["channel"], CHANNEL);
    assert_eq!(reply["thread_ts"], TS);
    let said = reply["blocks"][0]["text"]["text"].as_str().unwrap();
    assert!(said.starts_with(":arrows_counterclockwise: *Verdict changed*"), "{said}");
    assert!(said.contains("fraud-score (subtask 0 of 4)"), "{said}");
}

#[tokio::test]
async fn a_resolved_group_gets_a_threaded_reply() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/chat.postMessage"))
        .and(body_partial_json(json!({ "channel": CHANNEL, "thread_ts": TS })))
        .respond_with(posted("1795000120.000300"))
        .expect(1)
        .mount(&server)
        .await;
    let (slack, _f) = web_api(&server);
    let n = notice(NoticeKind::Resolved, None, "slack:g1:resolved");
    let sent = slack.send(&n, Some(&state())).await.unwrap();
    assert_eq!(sent.state, Some(state()));
    let reply = &bodies(&server, "/chat.postMessage").await[0];
    assert!(reply["text"].as_str().unwrap().contains("*Resolved*"));
}

#[tokio::test]
async fn could_not_diagnose_is_a_threaded_reply_under_the_first_message_too() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/chat.postMessage"))
        .and(body_partial_json(json!({ "thread_ts": TS })))
        .respond_with(posted("1795000120.000300"))
        .expect(1)
        .mount(&server)
        .await;
    let (slack, _f) = web_api(&server);
    slack.send(&notice(NoticeKind::CouldNotDiagnose, None, "k"), Some(&state())).await.unwrap();
    let reply = &bodies(&server, "/chat.postMessage").await[0];
    assert!(reply["text"].as_str().unwrap().contains("could not diagnose: Prometheus timed out"));
}

#[tokio::test]
async fn a_first_message_that_is_gone_is_replaced_by_a_new_one_that_becomes_the_state() {
    let server = MockServer::start().await;
    Mock::given(path("/chat.update")).respond_with(slack_error("message_not_found")).expect(1).mount(&server).await;
    Mock::given(path("/chat.postMessage")).respond_with(posted("1795000300.000400")).expect(2).mount(&server).await;
    let (slack, _f) = web_api(&server);
    let mut n = first_verdict();
    n.changed = true;
    let sent = slack.send(&n, Some(&state())).await.unwrap();
    assert_eq!(sent.state, Some(json!({ "channel": CHANNEL, "ts": "1795000300.000400" })));
    assert!(bodies(&server, "/chat.postMessage").await[0].get("thread_ts").is_none());
}

#[tokio::test]
async fn invalid_auth_is_a_final_error() {
    let server = MockServer::start().await;
    Mock::given(path("/chat.postMessage")).respond_with(slack_error("invalid_auth")).expect(1).mount(&server).await;
    let (slack, _f) = web_api(&server);
    let e = slack.send(&first_verdict(), None).await.unwrap_err();
    assert!(!e.retryable, "{e:?}");
    assert!(e.message.contains("invalid_auth"), "{}", e.message);
}

#[tokio::test]
async fn every_auth_and_channel_error_is_final() {
    for code in culprit::notify::slack::FINAL_ERRORS {
        let server = MockServer::start().await;
        Mock::given(path("/chat.postMessage")).respond_with(slack_error(code)).expect(1).mount(&server).await;
        let (slack, _f) = web_api(&server);
        let e = slack.send(&first_verdict(), None).await.unwrap_err();
        assert!(!e.retryable, "{code}: {e:?}");
    }
}

#[tokio::test]
async fn http_429_with_retry_after_2_is_retryable_after_2_s() {
    let server = MockServer::start().await;
    Mock::given(path("/chat.postMessage"))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "2")
                .set_body_json(json!({ "ok": false, "error": "ratelimited" })),
        )
        .expect(1)
        .mount(&server)
        .await;
    let (slack, _f) = web_api(&server);
    let e = slack.send(&first_verdict(), None).await.unwrap_err();
    assert!(e.retryable);
    assert_eq!(e.retry_after, Some(Duration::from_secs(2)));
    assert!(e.message.starts_with("slack: chat.postMessage: HTTP 429"), "{}", e.message);
}

#[tokio::test]
async fn ok_false_ratelimited_is_retryable_with_slacks_retry_after() {
    let server = MockServer::start().await;
    Mock::given(path("/chat.postMessage"))
        .respond_with(slack_error("ratelimited").insert_header("retry-after", "30"))
        .expect(1)
        .mount(&server)
        .await;
    let (slack, _f) = web_api(&server);
    let e = slack.send(&first_verdict(), None).await.unwrap_err();
    assert!(e.retryable);
    assert_eq!(e.retry_after, Some(Duration::from_secs(30)));
}

#[tokio::test]
async fn slack_side_failures_and_http_5xx_are_retryable_and_unknown_errors_final() {
    for (response, retryable) in [
        (slack_error("internal_error"), true),
        (slack_error("fatal_error"), true),
        (slack_error("service_unavailable"), true),
        (slack_error("request_timeout"), true),
        (ResponseTemplate::new(503).set_body_string("upstream down"), true),
        (ResponseTemplate::new(200).set_body_string("<html>proxy</html>"), true),
        (slack_error("invalid_arguments"), false),
        (ResponseTemplate::new(404).set_body_string("not found"), false),
    ] {
        let server = MockServer::start().await;
        Mock::given(path("/chat.postMessage")).respond_with(response).mount(&server).await;
        let (slack, _f) = web_api(&server);
        let e = slack.send(&first_verdict(), None).await.unwrap_err();
        assert_eq!(e.retryable, retryable, "{e:?}");
    }
}

#[tokio::test]
async fn a_message_refused_for_its_blocks_or_size_is_sent_again_once_as_the_short_fallback() {
    for code in ["invalid_blocks", "msg_too_long", "msg_blocks_too_long"] {
        let server = MockServer::start().await;
        Mock::given(path("/chat.postMessage"))
            .and(has_blocks)
            .and(|r: &Request| !serde_json::from_slice::<Value>(&r.body).is_ok_and(|b| b.get("thread_ts").is_some()))
            .respond_with(slack_error(code))
            .expect(1)
            .mount(&server)
            .await;
        Mock::given(path("/chat.postMessage")).respond_with(posted(TS)).expect(2).mount(&server).await;
        let (slack, _f) = web_api(&server);
        let n = first_verdict();
        let sent = slack.send(&n, None).await.unwrap();
        assert_eq!(sent.state, Some(state()));
        let requests = bodies(&server, "/chat.postMessage").await;
        assert_eq!(requests.len(), 3, "{code}: the message, its short fallback, the details");
        assert!(requests[1].get("blocks").is_none());
        assert_eq!(requests[1]["text"], culprit::render::slack::fallback(&n).text);
        assert!(requests[1]["text"].as_str().unwrap().chars().count() <= culprit::render::slack::MAX_SAFE_TEXT);
        assert_eq!(requests[1]["metadata"], requests[0]["metadata"]);
    }
}

fn is_reply(r: &Request) -> bool {
    serde_json::from_slice::<Value>(&r.body).is_ok_and(|b| b.get("thread_ts").is_some())
}

#[tokio::test]
async fn details_refused_for_their_blocks_or_size_are_sent_again_once_as_text_that_fits() {
    for code in ["invalid_blocks", "msg_blocks_too_long"] {
        let server = MockServer::start().await;
        Mock::given(path("/chat.postMessage"))
            .and(has_blocks)
            .and(is_reply)
            .respond_with(slack_error(code))
            .expect(1)
            .mount(&server)
            .await;
        Mock::given(path("/chat.postMessage")).respond_with(posted(TS)).expect(2).mount(&server).await;
        let (slack, _f) = web_api(&server);
        let n = first_verdict();
        assert_eq!(slack.send(&n, None).await.unwrap().state, Some(state()));
        let requests = bodies(&server, "/chat.postMessage").await;
        assert_eq!(requests.len(), 3, "{code}: the message, its details, their short fallback");
        let short = &requests[2];
        assert_eq!(short["thread_ts"], TS);
        assert!(short.get("blocks").is_none(), "{short:#}");
        assert_eq!(short["text"], culprit::render::slack::details_fallback(&n).unwrap().text);
        assert!(short["text"].as_str().unwrap().chars().count() <= culprit::render::slack::MAX_SAFE_TEXT);
        assert_eq!(short["metadata"], requests[1]["metadata"]);
    }
}

#[tokio::test]
async fn a_verdict_found_already_posted_gets_its_missing_details_reply_once() {
    let server = MockServer::start().await;
    let ours = json!({ "event_type": "culprit_verdict", "event_payload": { "idempotency_key": "slack:g1:v1" } });
    Mock::given(method("GET"))
        .and(path("/conversations.history"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"ok": true, "messages": [{"type": "message", "ts": TS, "metadata": ours}]})),
        )
        .mount(&server)
        .await;
    // The thread: first with the message alone (the crash came before the details), then
    // with the details reply the first recovery sent.
    let replies = Arc::new(Mutex::new(vec![json!({"type": "message", "ts": TS, "metadata": ours})]));
    struct Thread(Arc<Mutex<Vec<Value>>>);
    impl Respond for Thread {
        fn respond(&self, _: &Request) -> ResponseTemplate {
            ResponseTemplate::new(200).set_body_json(json!({"ok": true, "messages": *self.0.lock().unwrap()}))
        }
    }
    Mock::given(method("GET"))
        .and(path("/conversations.replies"))
        .and(query_param("ts", TS))
        .and(query_param("include_all_metadata", "true"))
        .respond_with(Thread(replies.clone()))
        .expect(2)
        .mount(&server)
        .await;
    Mock::given(path("/chat.postMessage")).respond_with(posted("1795000001.000200")).expect(1).mount(&server).await;
    let (slack, _f) = web_api(&server);
    let n = first_verdict();
    assert_eq!(slack.already_sent(&n, None).await.unwrap(), Some(Sent { state: Some(state()) }));
    let posts = bodies(&server, "/chat.postMessage").await;
    assert_eq!(posts.len(), 1, "only the details: {posts:#?}");
    assert_eq!(posts[0]["thread_ts"], TS);
    assert_eq!(posts[0]["metadata"]["event_type"], "culprit_verdict_details");
    assert!(posts[0]["blocks"][0]["text"]["text"].as_str().unwrap().starts_with("*Why*"));
    // Asked again (another crash): the details are in the thread now, nothing is posted.
    replies.lock().unwrap().push(json!({"type": "message", "ts": "1795000001.000200", "thread_ts": TS,
        "metadata": posts[0]["metadata"]}));
    assert_eq!(slack.already_sent(&n, None).await.unwrap(), Some(Sent { state: Some(state()) }));
    assert_eq!(bodies(&server, "/chat.postMessage").await.len(), 1);
}

#[tokio::test]
async fn a_text_only_retry_that_fails_too_is_a_final_error_after_two_requests() {
    let server = MockServer::start().await;
    Mock::given(path("/chat.postMessage")).respond_with(slack_error("msg_too_long")).expect(2).mount(&server).await;
    let (slack, _f) = web_api(&server);
    let e = slack.send(&first_verdict(), None).await.unwrap_err();
    assert!(!e.retryable);
    assert!(e.message.contains("msg_too_long"));
}

#[tokio::test]
async fn a_changed_verdict_whose_blocks_are_refused_updates_with_empty_blocks() {
    let server = MockServer::start().await;
    Mock::given(path("/chat.update"))
        .and(|r: &Request| serde_json::from_slice::<Value>(&r.body).is_ok_and(|b| b["blocks"] != json!([])))
        .respond_with(slack_error("invalid_blocks"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(path("/chat.update"))
        .and(body_partial_json(json!({ "blocks": [] })))
        .respond_with(posted(TS))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(path("/chat.postMessage")).respond_with(posted("1795000060.000200")).expect(2).mount(&server).await;
    let (slack, _f) = web_api(&server);
    let mut n = first_verdict();
    n.changed = true;
    slack.send(&n, Some(&state())).await.unwrap();
    let update = &bodies(&server, "/chat.update").await[1];
    assert_eq!(update["text"], culprit::render::slack::fallback(&n).text);
}

#[tokio::test]
async fn two_posts_to_one_channel_are_at_least_one_second_apart() {
    #[derive(Clone, Default)]
    struct Stamp(Arc<Mutex<Vec<Instant>>>);
    impl Respond for Stamp {
        fn respond(&self, _: &Request) -> ResponseTemplate {
            self.0.lock().unwrap().push(Instant::now());
            posted(TS)
        }
    }
    let server = MockServer::start().await;
    let stamps = Stamp::default();
    Mock::given(path("/chat.postMessage")).respond_with(stamps.clone()).mount(&server).await;
    let (slack, _f) = web_api(&server);
    slack.send(&first_verdict(), None).await.unwrap();
    slack.send(&notice(NoticeKind::Resolved, None, "r"), Some(&state())).await.unwrap();
    // Another channel has its own slot.
    let elsewhere = json!({ "channel": "C0OTHER", "ts": TS });
    // (That it does not wait is the pacer's unit test, on paused time.)
    slack.send(&notice(NoticeKind::Resolved, None, "r2"), Some(&elsewhere)).await.unwrap();
    let t = stamps.0.lock().unwrap().clone();
    // The verdict, its details in the thread, the two resolutions.
    assert_eq!(t.len(), 4);
    // One post per second per channel; stamped on arrival, so the first post's trip may have
    // been a few ms longer than the second's: 950 ms is "paced", 0 ms is not.
    assert!(t[1] - t[0] >= Duration::from_millis(950), "{:?} apart", t[1] - t[0]);
}

#[tokio::test]
async fn already_sent_finds_a_message_by_its_metadata_key_in_the_channel_history() {
    let server = MockServer::start().await;
    let history = json!({
        "ok": true,
        "messages": [
            { "type": "message", "ts": "1795000500.000900", "text": "someone else" },
            {
                "type": "message", "ts": "1795000400.000800", "text": "another verdict",
                "metadata": { "event_type": "culprit_verdict", "event_payload": { "idempotency_key": "slack:g0:v1", "group_key": "g0" } }
            },
            {
                "type": "message", "ts": TS, "text": "ours",
                "metadata": { "event_type": "culprit_verdict", "event_payload": { "idempotency_key": "slack:g1:v1", "group_key": "g1" } }
            }
        ],
        "has_more": false
    });
    Mock::given(method("GET"))
        .and(path("/conversations.history"))
        .and(query_param("channel", CHANNEL))
        .and(query_param("limit", "100"))
        .and(query_param("include_all_metadata", "true"))
        .and(header("authorization", format!("Bearer {TOKEN}").as_str()))
        .respond_with(ResponseTemplate::new(200).set_body_json(history))
        .expect(2)
        .mount(&server)
        .await;
    let (slack, _f) = web_api(&server);
    let found = slack.already_sent(&first_verdict(), None).await.unwrap();
    assert_eq!(found, Some(Sent { state: Some(state()) }));
    let missing = notice(NoticeKind::Verdict, Some(verdict("slow-sink")), "slack:g1:v9");
    assert_eq!(slack.already_sent(&missing, None).await.unwrap(), None);
}

#[tokio::test]
async fn already_sent_finds_a_threaded_reply_in_its_thread_and_keeps_the_groups_message() {
    let server = MockServer::start().await;
    // The channel history has the group's message, not its replies.
    Mock::given(method("GET"))
        .and(path("/conversations.history"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"ok": true, "messages": [{"type": "message", "ts": TS}]})),
        )
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/conversations.replies"))
        .and(query_param("ts", TS))
        .and(query_param("include_all_metadata", "true"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"ok": true, "messages": [
            {"type": "message", "ts": TS},
            {"type": "message", "ts": "1795000999.000100", "thread_ts": TS,
             "metadata": {"event_type": "culprit_verdict", "event_payload": {"idempotency_key": "slack:g1:resolved"}}}
        ]})))
        .expect(1)
        .mount(&server)
        .await;
    let (slack, _f) = web_api(&server);
    let resolved = notice(NoticeKind::Resolved, None, "slack:g1:resolved");
    // Found in the thread: the state stays the group's message, not the reply.
    assert_eq!(slack.already_sent(&resolved, Some(&state())).await.unwrap(), Some(Sent { state: Some(state()) }));
}

#[tokio::test]
async fn already_sent_says_unknown_when_the_history_cannot_be_read_and_retries_rate_limits() {
    let server = MockServer::start().await;
    Mock::given(path("/conversations.history")).respond_with(slack_error("missing_scope")).mount(&server).await;
    let (slack, _f) = web_api(&server);
    assert_eq!(slack.already_sent(&first_verdict(), None).await.unwrap(), None);

    let server = MockServer::start().await;
    Mock::given(path("/conversations.history"))
        .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "5"))
        .mount(&server)
        .await;
    let (slack, _f) = web_api(&server);
    let e = slack.already_sent(&first_verdict(), None).await.unwrap_err();
    assert!(e.retryable);
    assert_eq!(e.retry_after, Some(Duration::from_secs(5)));
}

#[tokio::test]
async fn the_incoming_webhook_mode_posts_text_and_blocks_as_new_messages() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(WEBHOOK_PATH))
        .respond_with(ResponseTemplate::new(200).set_body_string("ok"))
        .expect(2)
        .mount(&server)
        .await;
    let (slack, _f, _url) = incoming_webhook(&server);
    let sent = slack.send(&first_verdict(), None).await.unwrap();
    assert_eq!(sent, Sent { state: None });
    // No threads or updates: a resolution is a new message even with a state.
    slack.send(&notice(NoticeKind::Resolved, None, "r"), Some(&state())).await.unwrap();
    let posts = bodies(&server, WEBHOOK_PATH).await;
    assert!(posts[0]["blocks"].as_array().is_some_and(|b| !b.is_empty()));
    assert!(posts[0]["text"].as_str().unwrap().starts_with("slow-sink: Writer (sink) is the culprit"));
    assert!(posts.iter().all(|p| p.get("thread_ts").is_none() && p.get("channel").is_none()));
    assert!(slack.already_sent(&first_verdict(), None).await.unwrap().is_none());
}

#[tokio::test]
async fn the_incoming_webhook_sends_text_alone_once_after_invalid_blocks() {
    let server = MockServer::start().await;
    Mock::given(path(WEBHOOK_PATH))
        .and(has_blocks)
        .respond_with(ResponseTemplate::new(400).set_body_string("invalid_blocks"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(path(WEBHOOK_PATH))
        .and(without_blocks)
        .respond_with(ResponseTemplate::new(200).set_body_string("ok"))
        .expect(1)
        .mount(&server)
        .await;
    let (slack, _f, _url) = incoming_webhook(&server);
    slack.send(&first_verdict(), None).await.unwrap();
    let posts = bodies(&server, WEBHOOK_PATH).await;
    assert_eq!(posts[1]["text"], culprit::render::slack::fallback(&first_verdict()).text);
}

#[tokio::test]
async fn the_incoming_webhook_retries_429_and_5xx_and_stops_on_403_and_404_without_leaking_its_url() {
    for (response, retryable) in [
        (ResponseTemplate::new(429).insert_header("retry-after", "2").set_body_string("rate_limited"), true),
        (ResponseTemplate::new(500).set_body_string("internal error"), true),
        (ResponseTemplate::new(403).set_body_string(format!("invalid_token for {WEBHOOK_PATH}")), false),
        (ResponseTemplate::new(404).set_body_string("no_service W3BH00KS3CR3T"), false),
        (ResponseTemplate::new(404).set_body_string("channel_not_found"), false),
    ] {
        let server = MockServer::start().await;
        Mock::given(path(WEBHOOK_PATH)).respond_with(response).mount(&server).await;
        let (slack, _f, url) = incoming_webhook(&server);
        let e = slack.send(&first_verdict(), None).await.unwrap_err();
        assert_eq!(e.retryable, retryable, "{e:?}");
        assert_no_secret(&e, &[&url, WEBHOOK_PATH, "W3BH00KS3CR3T"]);
        assert!(!format!("{slack:?}").contains("W3BH00KS3CR3T"));
    }
}

#[tokio::test]
async fn an_unreachable_webhook_is_retryable_and_its_url_is_not_in_the_error() {
    // A port nothing listens on (wiremock keeps a dropped server alive in its pool).
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}{WEBHOOK_PATH}");
    let f = secret_file(&url);
    let cfg = SlackConfig {
        name: None,
        mode: SlackMode::IncomingWebhook,
        token: None,
        channel: None,
        webhook_url: Some(SecretSource::File(f.path().to_path_buf())),
        api_url: "https://slack.com/api".into(),
        image: culprit::notify::slack::SlackImage::Off,
        signing_secret: None,
        alertmanager_url: None,
        alertmanager_auth: None,
    };
    let slack = Slack::new(&cfg).unwrap();
    let e = slack.send(&first_verdict(), None).await.unwrap_err();
    assert!(e.retryable);
    assert_no_secret(&e, &[&url, WEBHOOK_PATH, "W3BH00KS3CR3T"]);
}

fn assert_no_secret(e: &NotifyError, secrets: &[&str]) {
    for s in secrets {
        assert!(!e.message.contains(s), "{s} leaked in {e:?}");
        assert!(!format!("{e:?}").contains(s));
    }
}

/// Answers with what it got: the Authorization header in the error, the body, everything.
struct Echo {
    status: u16,
    json: bool,
}

impl Respond for Echo {
    fn respond(&self, r: &Request) -> ResponseTemplate {
        let auth = r.headers.get("authorization").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
        let echoed = format!("you sent {auth} to {}", r.url);
        if self.json {
            ResponseTemplate::new(self.status).set_body_json(json!({ "ok": false, "error": echoed }))
        } else {
            ResponseTemplate::new(self.status).set_body_string(echoed)
        }
    }
}

#[tokio::test]
async fn the_token_is_never_in_debug_or_errors_even_when_slack_echoes_it_back() {
    for echo in [
        Echo { status: 200, json: true },
        Echo { status: 200, json: false },
        Echo { status: 500, json: false },
        Echo { status: 401, json: true },
    ] {
        let server = MockServer::start().await;
        Mock::given(wiremock::matchers::any()).respond_with(echo).mount(&server).await;
        let (slack, _f) = web_api(&server);
        assert!(!format!("{slack:?}").contains(TOKEN));
        let e = slack.send(&first_verdict(), None).await.unwrap_err();
        assert_no_secret(&e, &[TOKEN, "S3CR3TT0K3N"]);
        // The echo is not quoted at all: the error says the status or that the answer's
        // `error` is not an error code (the answer itself is logged, redacted).
        assert!(!e.message.contains("Bearer"), "{}", e.message);
        let e = slack.send(&notice(NoticeKind::Resolved, None, "r"), Some(&state())).await.unwrap_err();
        assert_no_secret(&e, &[TOKEN]);
    }
    let server = MockServer::start().await;
    Mock::given(wiremock::matchers::any()).respond_with(Echo { status: 500, json: true }).mount(&server).await;
    let (slack, _f, url) = incoming_webhook(&server);
    let e = slack.send(&first_verdict(), None).await.unwrap_err();
    assert_no_secret(&e, &[&url, WEBHOOK_PATH, "W3BH00KS3CR3T"]);
}

#[test]
fn a_configuration_without_its_secret_is_refused_without_showing_a_url() {
    let base = SlackConfig {
        name: None,
        mode: SlackMode::WebApi,
        token: None,
        channel: Some(CHANNEL.into()),
        webhook_url: None,
        api_url: "https://slack.com/api".into(),
        image: culprit::notify::slack::SlackImage::Off,
        signing_secret: None,
        alertmanager_url: None,
        alertmanager_auth: None,
    };
    assert!(Slack::new(&base).unwrap_err().contains("token"));
    let f = secret_file(TOKEN);
    let no_channel =
        SlackConfig { token: Some(SecretSource::File(f.path().to_path_buf())), channel: None, ..base.clone() };
    assert!(Slack::new(&no_channel).unwrap_err().contains("channel"));
    let webhook = SlackConfig { mode: SlackMode::IncomingWebhook, ..base.clone() };
    assert!(Slack::new(&webhook).unwrap_err().contains("webhook_url"));
    let bad = secret_file("ftp://hooks.example/services/W3BH00KS3CR3T");
    let bad_url = SlackConfig { webhook_url: Some(SecretSource::File(bad.path().to_path_buf())), ..webhook };
    let e = Slack::new(&bad_url).unwrap_err();
    assert!(!e.contains("W3BH00KS3CR3T"), "{e}");
}

#[test]
fn slack_wants_every_kind_of_notice() {
    let f = secret_file(TOKEN);
    let cfg = SlackConfig {
        name: None,
        mode: SlackMode::WebApi,
        token: Some(SecretSource::File(f.path().to_path_buf())),
        channel: Some(CHANNEL.into()),
        webhook_url: None,
        api_url: "https://slack.com/api".into(),
        image: culprit::notify::slack::SlackImage::Off,
        signing_secret: None,
        alertmanager_url: None,
        alertmanager_auth: None,
    };
    let slack = Slack::new(&cfg).unwrap();
    for kind in [NoticeKind::Verdict, NoticeKind::Resolved, NoticeKind::CouldNotDiagnose] {
        assert!(slack.wants(&notice(kind, None, "k")));
    }
}

#[tokio::test]
async fn a_details_reply_that_fails_transiently_after_the_message_fails_the_notice_so_the_outbox_completes_it() {
    let server = MockServer::start().await;
    Mock::given(path("/chat.postMessage"))
        .and(is_reply)
        .respond_with(slack_error("ratelimited").insert_header("retry-after", "7"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(path("/chat.postMessage")).respond_with(posted(TS)).expect(1).mount(&server).await;
    let (slack, _f) = web_api(&server);
    let e = slack.send(&first_verdict(), None).await.unwrap_err();
    // Retried after Slack's 7 s, and asked about first: the message is there, so the next
    // attempt (already_sent, tested above) posts only the details.
    assert!(e.retryable && e.reason.maybe_delivered(), "{e:?}");
    assert_eq!((e.reason.as_str(), e.retry_after), ("partly_delivered", Some(Duration::from_secs(7))));
    assert!(e.message.contains("the verdict's message was posted; its details reply is sent again"), "{e}");
}

#[tokio::test]
async fn a_details_reply_refused_for_good_after_the_message_is_logged_and_the_notice_delivered() {
    let server = MockServer::start().await;
    Mock::given(path("/chat.postMessage"))
        .and(is_reply)
        .respond_with(slack_error("no_permission"))
        .mount(&server)
        .await;
    Mock::given(path("/chat.postMessage")).respond_with(posted(TS)).expect(1).mount(&server).await;
    let (slack, _f) = web_api(&server);
    assert_eq!(slack.send(&first_verdict(), None).await.unwrap().state, Some(state()));
}

/// A stand-in for a channel's `conversations.history` as Slack pages it: newest first,
/// `limit` messages a page, `oldest` honoured, `response_metadata.next_cursor` and
/// `has_more` while older messages remain. Keeps the query of every request.
struct Channel {
    /// Newest first.
    messages: Vec<Value>,
    queries: Arc<Mutex<Vec<BTreeMap<String, String>>>>,
}

impl Respond for Channel {
    fn respond(&self, r: &Request) -> ResponseTemplate {
        let q: BTreeMap<String, String> = r.url.query_pairs().into_owned().collect();
        self.queries.lock().unwrap().push(q.clone());
        let oldest: f64 = q.get("oldest").and_then(|o| o.parse().ok()).unwrap_or(0.0);
        let limit: usize = q.get("limit").and_then(|l| l.parse().ok()).unwrap_or(100);
        let from: usize = q.get("cursor").and_then(|c| c.parse().ok()).unwrap_or(0);
        let after: Vec<&Value> =
            self.messages.iter().filter(|m| m["ts"].as_str().unwrap().parse::<f64>().unwrap() > oldest).collect();
        let page: Vec<&Value> = after.iter().skip(from).take(limit).copied().collect();
        let more = from + limit < after.len();
        let cursor = if more { (from + limit).to_string() } else { String::new() };
        ResponseTemplate::new(200).set_body_json(json!({
            "ok": true, "messages": page, "has_more": more, "response_metadata": {"next_cursor": cursor}
        }))
    }
}

#[tokio::test]
async fn already_sent_pages_the_history_back_to_the_notices_time_past_150_later_messages() {
    let server = MockServer::start().await;
    // Our verdict, posted a second after the notice was made (1795000000 s), then 150
    // other alerts in the channel (an incident storm) before the check; and one message
    // from long before, never read: the check stops at the notice's time less 5 minutes.
    let ours = json!({"type": "message", "ts": "1795000001.000100", "text": "ours",
        "metadata": {"event_type": "culprit_verdict", "event_payload": {"idempotency_key": "slack:g1:v1"}}});
    let mut messages: Vec<Value> = (0..150)
        .rev()
        .map(|i| json!({"type": "message", "ts": format!("{}.000100", 1_795_000_002 + i), "text": "other alert"}))
        .collect();
    messages.push(ours);
    messages.push(json!({"type": "message", "ts": "1794990000.000100", "text": "last week"}));
    let queries = Arc::new(Mutex::new(Vec::new()));
    Mock::given(method("GET"))
        .and(path("/conversations.history"))
        .respond_with(Channel { messages, queries: queries.clone() })
        .mount(&server)
        .await;
    Mock::given(path("/conversations.replies"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"ok": true, "messages": []})))
        .mount(&server)
        .await;
    Mock::given(path("/chat.postMessage")).respond_with(posted("1795000200.000100")).mount(&server).await;
    let (slack, _f) = web_api(&server);
    let started = Instant::now();
    let found = slack.already_sent(&first_verdict(), None).await.unwrap();
    // Found on the second page (messages 101 to 151; the first 100 are the others).
    assert_eq!(found, Some(Sent { state: Some(json!({"channel": CHANNEL, "ts": "1795000001.000100"})) }));
    let queries = queries.lock().unwrap().clone();
    assert_eq!(queries.len(), 2, "{queries:#?}");
    // oldest = 1795000000 s − 300 s; the second page follows the first's cursor.
    assert!(queries.iter().all(|q| q["oldest"] == "1794999700.000000"), "{queries:#?}");
    assert_eq!((queries[0].get("cursor"), queries[1].get("cursor")), (None, Some(&"100".to_string())));
    // Tier 3: the second read waited 1.2 s after the first.
    assert!(started.elapsed() >= Duration::from_millis(1_200), "{:?}", started.elapsed());
}

#[tokio::test]
async fn a_verdict_whose_lease_is_lost_after_its_message_stops_before_its_details_reply() {
    use culprit::notify::FailureReason;
    use culprit::notify::fence::{Check, scoped};
    let server = MockServer::start().await;
    Mock::given(path("/chat.postMessage")).respond_with(posted(TS)).mount(&server).await;
    let (slack, _f) = web_api(&server);
    // The delivery loop's check says the lease was lost after the message (the replica
    // was paused past it between the two requests; another one completes the thread).
    let asked = Arc::new(Mutex::new(0));
    let lost: Check = {
        let asked = asked.clone();
        Arc::new(move || {
            *asked.lock().unwrap() += 1;
            Box::pin(async { false })
        })
    };
    let e = scoped(lost, slack.send(&first_verdict(), None)).await.unwrap_err();
    assert_eq!(e.reason, FailureReason::PartlyDelivered, "{e}");
    let posts = bodies(&server, "/chat.postMessage").await;
    assert_eq!(posts.len(), 1, "the message alone: {posts:#?}");
    assert!(posts[0].get("thread_ts").is_none());
    assert_eq!(*asked.lock().unwrap(), 1, "asked once, before the details");
    // Held: the details reply follows.
    let held: Check = Arc::new(|| Box::pin(async { true }));
    scoped(held, slack.send(&notice(NoticeKind::Verdict, Some(verdict("slow-sink")), "slack:g2:v1"), None))
        .await
        .unwrap();
    let posts = bodies(&server, "/chat.postMessage").await;
    assert_eq!((posts.len(), &posts[2]["thread_ts"]), (3, &json!(TS)));
}

/// A notice of one job's episode: `kind`, about group `g2` (the lead is `g1`), revision
/// `revision`.
fn episode_notice(kind: NoticeKind, revision: u32, key: &str) -> Notice {
    let mut n = notice(kind, (kind == NoticeKind::Verdict).then(|| verdict("slow-sink")), key);
    n.episode = culprit::model::notice::NoticeEpisode {
        thread: "\u{1f}episode\u{1f}id:j\u{1f}1".into(),
        groups: vec!["g1".into(), "g2".into()],
        revision,
        verdict_ref: "slack:g1:v1".into(),
    };
    n
}

#[tokio::test]
async fn a_revision_of_the_verdict_updates_its_message_in_place_and_posts_nothing() {
    // The same culprit with a higher confidence: chat.update of the message alone, no
    // "changed" reply, no details reply, no new message.
    let server = MockServer::start().await;
    Mock::given(method("POST")).and(path("/chat.update")).respond_with(posted(TS)).expect(1).mount(&server).await;
    Mock::given(method("POST")).and(path("/chat.postMessage")).respond_with(posted(TS)).expect(0).mount(&server).await;
    let (slack, _f) = web_api(&server);
    let n = episode_notice(NoticeKind::Verdict, 1, "slack:g1:v1:r1");
    assert!(n.is_revision());
    assert_eq!(slack.send(&n, Some(&state())).await.unwrap(), Sent { state: Some(state()) });
    let update = &bodies(&server, "/chat.update").await[0];
    assert_eq!((update["channel"].as_str(), update["ts"].as_str()), (Some(CHANNEL), Some(TS)));
    assert_eq!(update["metadata"]["event_payload"]["idempotency_key"], "slack:g1:v1:r1");
    assert!(!update["text"].as_str().unwrap().starts_with("Changed"), "{}", update["text"]);
}

#[tokio::test]
async fn a_revision_found_already_made_after_a_crash_is_not_made_again_nor_replied_to() {
    // Crash after the chat.update, before its outcome was stored: the message carries the
    // revision's key; it is found there, and nothing is posted.
    let server = MockServer::start().await;
    let message = json!({"ok": true, "messages": [{"type": "message", "ts": TS,
        "metadata": {"event_type": "culprit_verdict", "event_payload": {"idempotency_key": "slack:g1:v1:r1"}}}]});
    Mock::given(method("GET"))
        .and(path("/conversations.history"))
        .respond_with(ResponseTemplate::new(200).set_body_json(message))
        .mount(&server)
        .await;
    Mock::given(method("POST")).and(path("/chat.postMessage")).respond_with(posted(TS)).expect(0).mount(&server).await;
    let (slack, _f) = web_api(&server);
    let n = episode_notice(NoticeKind::Verdict, 1, "slack:g1:v1:r1");
    assert_eq!(slack.already_sent(&n, Some(&state())).await.unwrap(), Some(Sent { state: Some(state()) }));
}

#[tokio::test]
async fn a_group_joining_or_leaving_the_verdict_is_a_reply_in_its_thread_and_never_a_message_of_its_own() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/chat.postMessage"))
        .respond_with(posted("1795000070.000300"))
        .expect(2)
        .mount(&server)
        .await;
    let (slack, _f) = web_api(&server);
    for (kind, said) in [(NoticeKind::Joined, "*Also firing*"), (NoticeKind::GroupResolved, "*Alert group resolved*")] {
        let n = episode_notice(kind, 0, &format!("slack:g2:{kind:?}"));
        assert_eq!(slack.send(&n, Some(&state())).await.unwrap(), Sent { state: Some(state()) });
        let reply = bodies(&server, "/chat.postMessage").await.pop().unwrap();
        assert_eq!(reply["thread_ts"], TS);
        assert!(reply["text"].as_str().unwrap().contains(said), "{}", reply["text"]);
        // Without the verdict's message (it failed for good) nothing is posted.
        assert_eq!(slack.send(&n, None).await.unwrap(), Sent { state: None });
    }
}

#[test]
fn the_incoming_webhook_takes_no_revision_and_no_group_joining_or_leaving() {
    let f = secret_file("https://hooks.slack.com/services/T000/B000/XXXX");
    let cfg = SlackConfig {
        name: None,
        mode: SlackMode::IncomingWebhook,
        token: None,
        channel: None,
        webhook_url: Some(SecretSource::File(f.path().to_path_buf())),
        api_url: "https://slack.com/api".into(),
        image: culprit::notify::slack::SlackImage::Off,
        signing_secret: None,
        alertmanager_url: None,
        alertmanager_auth: None,
    };
    let slack = Slack::new(&cfg).unwrap();
    assert!(!slack.wants(&episode_notice(NoticeKind::Verdict, 1, "k")));
    assert!(!slack.wants(&episode_notice(NoticeKind::Joined, 0, "k")));
    assert!(!slack.wants(&episode_notice(NoticeKind::GroupResolved, 0, "k")));
    assert!(slack.wants(&episode_notice(NoticeKind::Verdict, 0, "k")));
    assert!(slack.wants(&episode_notice(NoticeKind::Resolved, 0, "k")));
}
