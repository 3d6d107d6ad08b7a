//! Messages that always arrive: the Slack notifier against a capture server that refuses
//! what Slack refuses (`msg_too_long`, `msg_blocks_too_long`, `invalid_blocks`), field
//! report 04 (a Flink SQL job whose vertex descriptions run to 2,000 characters), and
//! property tests over long and odd names for Slack, PagerDuty and Alertmanager.

mod support;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;

use culprit::cli::{DiagnoseArgs, diagnose_command};
use culprit::config::{SecretSource, SlackConfig, SlackMode};
use culprit::model::notice::{Notice, NoticeKind};
use culprit::model::verdict::Verdict;
use culprit::notify::slack::Slack;
use culprit::render::{alertmanager, pagerduty, slack};
use proptest::prelude::*;
use serde_json::{Value, json};
use support::capture::{Capture, slack_refusal};

const SHORT_NAME: &str = "ConstraintEnforcer[9] -> Sink: dws_merchant_sku_1m[10]";
/// The same in Slack `mrkdwn`: `>` escaped, the word with `_` in a code span.
const SHORT_NAME_SLACK: &str = "ConstraintEnforcer[9] -&gt; Sink: `dws_merchant_sku_1m[10]`";

fn report_04() -> Verdict {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/reports/04-sql-names");
    let args = DiagnoseArgs {
        recording: Some(dir.join("recording.om.gz")),
        metrics: Vec::new(),
        scrape: Vec::new(),
        flamegraph: None,
        flink: None,
        cluster: None,
        plan: Some(dir.join("plan.json")),
        job: None,
        label: Vec::new(),
        at: None,
        window: None,
        config: None,
        checkpoint_config: None,
        exceptions: None,
        rescales: None,
        format: culprit::render::Format::Json,
    };
    diagnose_command(&args, 0).unwrap_or_else(|e| panic!("{}", e.message))
}

fn notice(v: &Verdict) -> Notice {
    Notice {
        links: Default::default(),
        kind: NoticeKind::Verdict,
        group_key: "{}/{alertname=\"FlinkJobBackpressured\"}:{job_id=\"3c9d2e1f0a8b4c7d9e6f5a4b3c2d1e0f\"}".into(),
        labels: BTreeMap::from([
            ("alertname".to_string(), "FlinkJobBackpressured".to_string()),
            ("team".to_string(), "data-platform".to_string()),
        ]),
        job: v.job.clone(),
        verdict: Some(v.clone()),
        verdict_id: Some(12),
        verdict_url: Some("https://culprit.example.com/verdicts/12".into()),
        reason: None,
        firing: true,
        changed: false,
        idempotency_key: "slack:g:12".into(),
        at_ms: 1_795_000_000_000,
        episode: Default::default(),
        maybe_repeat: false,
        incident: None,
        incident_view: None,
        incident_parent: None,
    }
}

fn web_api(capture: &Capture) -> (Slack, tempfile::NamedTempFile) {
    let mut token = tempfile::NamedTempFile::new().unwrap();
    writeln!(token, "xoxb-test-token").unwrap();
    let cfg = SlackConfig {
        name: None,
        mode: SlackMode::WebApi,
        token: Some(SecretSource::File(token.path().to_path_buf())),
        channel: Some("C0FLINKOPS".into()),
        webhook_url: None,
        api_url: format!("{}/api", capture.url),
        image: culprit::notify::slack::SlackImage::Off,
        signing_secret: None,
        alertmanager_url: None,
        alertmanager_auth: None,
    };
    (Slack::new(&cfg).unwrap(), token)
}

/// The characters of every `text` in a value, as Slack adds up a message's blocks.
fn text_chars(v: &Value) -> usize {
    match v {
        Value::Object(o) => o
            .iter()
            .map(|(k, x)| match x {
                Value::String(s) if k == "text" => s.chars().count(),
                x => text_chars(x),
            })
            .sum(),
        Value::Array(a) => a.iter().map(text_chars).sum(),
        _ => 0,
    }
}

#[tokio::test]
async fn report_04_a_flink_sql_job_is_posted_at_once_within_slacks_limits_naming_vertices_as_flink_does() {
    let v = report_04();
    // The plan's descriptions stay in the verdict (the JSON has them all).
    assert!(v.culprit.as_ref().unwrap().vertex_name.starts_with("[9]:ConstraintEnforcer[NotNullEnforcer("));
    let capture = Capture::start().await;
    let (slack, _token) = web_api(&capture);
    slack.send(&notice(&v), None).await.expect("posted");

    let posts = capture.on("/api/chat.postMessage");
    assert_eq!(posts.len(), 2, "the message and its details, each taken at once");
    assert!(posts.iter().all(|p| p.refused.is_none()), "{:?}", posts.iter().map(|p| p.refused).collect::<Vec<_>>());
    let message = &posts[0].body;
    // 0.1.0 sent a 16,710-character text and 11,034 characters of block text.
    let text = message["text"].as_str().unwrap();
    assert!(text.chars().count() <= slack::MAX_FALLBACK_TEXT, "text of {}", text.chars().count());
    assert!(text_chars(&message["blocks"]) <= slack::MAX_BLOCKS_TEXT);
    assert!(text.starts_with(&format!("{SHORT_NAME_SLACK} (sink) is the culprit")), "{text}");
    // The header is plain text (only `&<>` escaped), the culprit first: it is cut at 150.
    let header = message["blocks"][0]["text"]["text"].as_str().unwrap();
    assert!(
        header.starts_with(":red_circle: Backpressure culprit ConstraintEnforcer[9] -&gt; Sink: dws_merchant_sku_1m[10] in insert-into_"),
        "{header}"
    );
    assert!(header.chars().count() <= slack::MAX_HEADER_TEXT);
    for p in &posts {
        let all = p.body.to_string();
        assert!(!all.contains("NotNullEnforcer(") && !all.contains("fields=["), "a description in a message: {all}");
        assert!(!all.contains("[9]:"), "{all}");
    }
    assert!(posts[1].body["thread_ts"].is_string());

    let event = pagerduty::event(&notice(&v), "R0UTINGKEY", "error");
    let summary = event["payload"]["summary"].as_str().unwrap();
    assert!(summary.chars().count() <= pagerduty::MAX_SUMMARY_CHARS);
    assert!(summary.contains(SHORT_NAME) && !summary.contains("NotNullEnforcer"), "{summary}");
    assert_eq!(event["payload"]["component"], SHORT_NAME);
    let alert = alertmanager::culprit_alert(&notice(&v), alertmanager::DEFAULT_ALERTNAME, 1_795_000_900_000);
    assert_eq!(alert["labels"]["culprit_vertex"], SHORT_NAME);
    assert!(!alert["annotations"].to_string().contains("NotNullEnforcer"), "{}", alert["annotations"]);
}

#[tokio::test]
async fn a_message_slack_still_refuses_is_replaced_by_a_fallback_slack_takes() {
    for code in ["msg_too_long", "msg_blocks_too_long", "invalid_blocks"] {
        let capture = Capture::start().await;
        capture.fail_next("/api/chat.postMessage", 200, None, &json!({"ok": false, "error": code}).to_string());
        let (slack, _token) = web_api(&capture);
        let n = notice(&report_04());
        slack.send(&n, None).await.unwrap_or_else(|e| panic!("{code}: {e:?}"));
        let posts = capture.on("/api/chat.postMessage");
        assert_eq!(posts.len(), 3, "{code}: refused, the fallback, the details");
        let fallback = &posts[1].body;
        assert!(fallback.get("blocks").is_none() && posts[1].refused.is_none(), "{code}: {fallback}");
        let text = fallback["text"].as_str().unwrap();
        assert!(text.chars().count() <= slack::MAX_SAFE_TEXT, "{code}: {}", text.chars().count());
        assert!(text.contains(SHORT_NAME_SLACK) && text.contains("*Fix first:*"), "{text}");
        assert!(text.ends_with("<https://culprit.example.com/verdicts/12|Verdict #12>"), "{text}");
        assert_eq!(capture.slack_messages().len(), 1);
    }
}

/// A verdict of report 04 with every vertex name replaced by `name` (in the graph, the
/// culprit and its prose), and `text` appended to the prose.
fn with_names(name: &str, text: &str) -> Verdict {
    static BASE: std::sync::OnceLock<Verdict> = std::sync::OnceLock::new();
    let mut v = BASE.get_or_init(report_04).clone();
    let old: Vec<String> = v.graph.vertices.iter().map(|x| x.name.clone()).collect();
    let swap = |s: &str| old.iter().fold(s.to_string(), |s, o| s.replace(o.as_str(), name));
    v.summary = format!("{} {text}", swap(&v.summary));
    v.cause = format!("{} {text}", swap(&v.cause));
    v.fix = v.fix.iter().map(|f| format!("{} {text}", swap(f))).collect();
    v.not_the_fix = v.not_the_fix.iter().map(|f| swap(f)).collect();
    for s in &mut v.steps {
        s.detail = swap(&s.detail);
    }
    for (i, x) in v.graph.vertices.iter_mut().enumerate() {
        x.name = format!("{name}{i}");
    }
    if let Some(c) = v.culprit.as_mut() {
        c.vertex_name = name.to_string();
        c.operators = vec![name.to_string(); 3];
    }
    v.job.name = name.to_string();
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn any_name_gives_payloads_within_every_destinations_limits(
        name in prop_oneof![
            "[*_~`<>&:!a-z ]{0,60}",
            "\\PC{0,80}",
            "[\\x00-\\x1f\\u{202e}a-z]{0,40}",
            "(\\[[0-9]{1,3}\\]:[A-Za-z]{3,20}\\(table=\\[[a-z_., ]{5,200}\\], fields=\\[[a-z_, ]{100,1800}\\]\\) -> ){1,4}",
            "[a-z -]{2000,4000}",
            "漢字[漢字a-z]{0,500}",
        ],
        text in "[*_~`<>&a-z :]{0,400}",
    ) {
        let v = with_names(&name, &text);
        let mut n = notice(&v);
        n.labels.insert("name".into(), name.clone());
        for changed in [false, true] {
            n.changed = changed;
            let mut bodies = vec![slack::message(&n), slack::changed_reply(&n), slack::fallback(&n)];
            bodies.extend(slack::details(&n));
            for m in bodies {
                let body = json!({ "channel": "C1", "text": m.text, "blocks": m.blocks });
                prop_assert_eq!(slack_refusal(&body), None, "{:#}", body);
                prop_assert!(!m.text.chars().any(|c| culprit::render::names::is_unsafe(c) && c != '\n'));
            }
            let event = pagerduty::event(&n, "R0UTINGKEY", "error");
            prop_assert!(event["payload"]["summary"].as_str().unwrap().chars().count() <= pagerduty::MAX_SUMMARY_CHARS);
            prop_assert!(serde_json::to_vec(&event).unwrap().len() <= pagerduty::MAX_EVENT_BYTES);
            let alert = alertmanager::culprit_alert(&n, alertmanager::DEFAULT_ALERTNAME, n.at_ms);
            for (k, max) in [("summary", alertmanager::MAX_SUMMARY_ANNOTATION), ("fix", alertmanager::MAX_SUMMARY_ANNOTATION),
                             ("description", alertmanager::MAX_DESCRIPTION_ANNOTATION)] {
                prop_assert!(alert["annotations"][k].as_str().map_or(0, |s| s.chars().count()) <= max);
            }
            prop_assert!(alert["labels"]["culprit_vertex"].as_str().map_or(0, |s| s.chars().count()) <= alertmanager::MAX_VERTEX_LABEL);
            let text = culprit::render::render_with(&v, culprit::render::Format::Text, &culprit::render::Options { width: 80, verbose: false });
            prop_assert!(text.lines().count() <= 20, "{}", text);
            prop_assert!(text.lines().all(|l| culprit::render::names::width(l) <= 80), "{}", text);
            prop_assert!(!text.chars().any(|c| culprit::render::names::is_unsafe(c) && c != '\n'));
        }
    }
}
