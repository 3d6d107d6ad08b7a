//! The verdict's picture in Slack, against a local HTTP server (wiremock) standing in for
//! Slack: uploaded into the verdict's thread by the external upload flow, in order; a
//! failed upload at any step leaves exactly one verdict post and the notice sent; `link`
//! puts an image block in the message only for a signed HTTPS link; `off` sends nothing.

mod support;

use std::collections::BTreeMap;
use std::io::Write as _;

use culprit::config::{SecretSource, SlackConfig, SlackMode};
use culprit::model::notice::{Notice, NoticeKind};
use culprit::notify::Sent;
use culprit::notify::slack::{Slack, SlackImage};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

const TOKEN: &str = "xoxb-1111-2222-P1CTUR3T0K3N";
const CHANNEL: &str = "C0ALERTS";
const TS: &str = "1795000000.000100";
const FILE_ID: &str = "F0PICTURE";

fn web_api(server: &MockServer, image: SlackImage) -> (Slack, tempfile::NamedTempFile) {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    writeln!(file, "{TOKEN}").unwrap();
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

fn first_verdict(verdict_url: &str) -> Notice {
    let capture = culprit::samples::captures::CAPTURES.iter().find(|c| c.name == "slow-sink").unwrap();
    let verdict = culprit::samples::captures::verdict(capture).unwrap();
    Notice {
        links: Default::default(),
        kind: NoticeKind::Verdict,
        group_key: "{}:{alertname=\"FlinkBackpressure\"}".into(),
        labels: BTreeMap::new(),
        job: verdict.job.clone(),
        verdict: Some(verdict),
        verdict_id: Some(7),
        verdict_url: Some(verdict_url.into()),
        reason: None,
        firing: true,
        changed: false,
        idempotency_key: "slack:g1:v1".into(),
        at_ms: 1_795_000_000_000,
        episode: Default::default(),
        maybe_repeat: false,
        incident: None,
        incident_view: None,
        incident_parent: None,
    }
}

const SIGNED: &str = "https://culprit.example.com/verdicts/7?expires=1795604800&sig=00ab";

/// Slack standing in: posts answer the message's `ts`; the upload URL is on the same
/// server. `fail` makes one step fail: `get` (ok: false), `upload` (HTTP 500) or `complete`
/// (ok: false).
async fn slack(fail: Option<&str>) -> MockServer {
    let server = MockServer::start().await;
    let ok = |body: Value| ResponseTemplate::new(200).set_body_json(body);
    let refused = |code: &str| ResponseTemplate::new(200).set_body_json(json!({ "ok": false, "error": code }));
    Mock::given(method("POST"))
        .and(path("/chat.postMessage"))
        .respond_with(ok(json!({ "ok": true, "channel": CHANNEL, "ts": TS })))
        .mount(&server)
        .await;
    let get = match fail {
        Some("get") => refused("missing_scope"),
        _ => ok(json!({ "ok": true, "upload_url": format!("{}/upload/{FILE_ID}", server.uri()), "file_id": FILE_ID })),
    };
    Mock::given(method("POST")).and(path("/files.getUploadURLExternal")).respond_with(get).mount(&server).await;
    let upload = if fail == Some("upload") { ResponseTemplate::new(500) } else { ResponseTemplate::new(200) };
    Mock::given(method("POST")).and(path(format!("/upload/{FILE_ID}"))).respond_with(upload).mount(&server).await;
    let complete = match fail {
        Some("complete") => refused("channel_not_found"),
        _ => ok(json!({ "ok": true, "files": [{ "id": FILE_ID }] })),
    };
    Mock::given(method("POST")).and(path("/files.completeUploadExternal")).respond_with(complete).mount(&server).await;
    server
}

async fn requests(server: &MockServer) -> Vec<Request> {
    server.received_requests().await.unwrap()
}

fn form(r: &Request) -> BTreeMap<String, String> {
    url::form_urlencoded::parse(&r.body).into_owned().collect()
}

fn top_level_posts(rs: &[Request]) -> usize {
    rs.iter()
        .filter(|r| r.url.path() == "/chat.postMessage")
        .filter(|r| serde_json::from_slice::<Value>(&r.body).unwrap().get("thread_ts").is_none())
        .count()
}

#[tokio::test]
async fn the_picture_is_uploaded_into_the_verdicts_thread_after_its_message_in_slacks_three_steps() {
    let server = slack(None).await;
    let (slack, _f) = web_api(&server, SlackImage::Upload);
    let sent = slack.send(&first_verdict(SIGNED), None).await.unwrap();
    assert_eq!(sent, Sent { state: Some(json!({ "channel": CHANNEL, "ts": TS })) });
    let rs = requests(&server).await;
    let paths: Vec<&str> = rs.iter().map(|r| r.url.path()).collect();
    // The message, its details in the thread, then the three steps of the upload.
    let upload = format!("/upload/{FILE_ID}");
    assert_eq!(
        paths,
        [
            "/chat.postMessage",
            "/chat.postMessage",
            "/files.getUploadURLExternal",
            upload.as_str(),
            "/files.completeUploadExternal"
        ]
    );
    let get = form(&rs[2]);
    assert_eq!(rs[2].headers["authorization"], format!("Bearer {TOKEN}").as_str());
    assert_eq!(get["filename"], "culprit-verdict-7.png");
    assert!(get["alt_txt"].starts_with("slow-sink: Writer (sink) is the culprit"), "{get:?}");
    // The bytes sent are the PNG whose length was announced, and carry no token.
    let bytes = &rs[3].body;
    assert_eq!(get["length"], bytes.len().to_string());
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"));
    assert!(!rs[3].headers.contains_key("authorization"));
    let info = png::Decoder::new(std::io::Cursor::new(&bytes[..])).read_info().unwrap().info().clone();
    assert_eq!(info.width, culprit::render::png::WIDTH);
    let complete = form(&rs[4]);
    assert_eq!(complete["channel_id"], CHANNEL);
    assert_eq!(complete["thread_ts"], TS);
    let files: Value = serde_json::from_str(&complete["files"]).unwrap();
    assert_eq!(files[0]["id"], FILE_ID);
}

#[tokio::test]
async fn a_failed_upload_at_any_step_leaves_one_verdict_post_the_notice_sent_and_a_warning() {
    support::logs::capture();
    for step in ["get", "upload", "complete"] {
        let server = slack(Some(step)).await;
        let (slack, _f) = web_api(&server, SlackImage::Upload);
        let sent = slack.send(&first_verdict(SIGNED), None).await;
        assert_eq!(sent.unwrap(), Sent { state: Some(json!({ "channel": CHANNEL, "ts": TS })) }, "{step}");
        let rs = requests(&server).await;
        assert_eq!(top_level_posts(&rs), 1, "{step}: exactly one verdict post");
        let steps = rs.iter().filter(|r| r.url.path().starts_with("/files.") || r.url.path().starts_with("/upload/"));
        // get fails: 1 request; upload fails: get + upload; complete fails: all three.
        let expected = match step {
            "get" => 1,
            "upload" => 2,
            _ => 3,
        };
        assert_eq!(steps.count(), expected, "{step}: stops at the failed step, tries once");
    }
    let logs = support::logs::text();
    let warnings: Vec<&str> = logs.lines().filter(|l| l.contains("the verdict's picture was not shared")).collect();
    assert_eq!(warnings.len(), 3, "{logs}");
    assert!(warnings.iter().all(|l| l.contains("WARN")), "{warnings:?}");
    assert!(warnings[0].contains("missing_scope") && warnings[1].contains("HTTP 500"), "{warnings:?}");
    assert!(!logs.contains("P1CTUR3T0K3N") && !logs.contains("/upload/"), "no token, no upload URL in the logs");
}

#[tokio::test]
async fn no_picture_goes_when_it_is_off() {
    let server = slack(None).await;
    let (slack, _f) = web_api(&server, SlackImage::Off);
    slack.send(&first_verdict(SIGNED), None).await.unwrap();
    let rs = requests(&server).await;
    assert!(rs.iter().all(|r| r.url.path() == "/chat.postMessage"));
    assert!(rs.iter().all(|r| !String::from_utf8_lossy(&r.body).contains("\"image\"")));
}

#[tokio::test]
async fn link_puts_an_image_block_in_the_message_only_for_a_signed_https_link() {
    for (url, image) in [
        (SIGNED, Some("https://culprit.example.com/verdicts/7.png?expires=1795604800&sig=00ab")),
        ("http://culprit.example.com/verdicts/7?expires=1795604800&sig=00ab", None),
        ("https://culprit.example.com/api/v1/verdicts/7", None),
    ] {
        let server = slack(None).await;
        let (slack, _f) = web_api(&server, SlackImage::Link);
        slack.send(&first_verdict(url), None).await.unwrap();
        let rs = requests(&server).await;
        assert!(rs.iter().all(|r| r.url.path() == "/chat.postMessage"), "link mode uploads nothing");
        let message: Value = serde_json::from_slice(&rs[0].body).unwrap();
        let block = message["blocks"].as_array().unwrap().iter().find(|b| b["type"] == "image").cloned();
        assert_eq!(block.as_ref().map(|b| b["image_url"].as_str().unwrap()), image, "{url}");
    }
}
