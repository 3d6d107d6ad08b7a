//! Final errors that say what to do: each vendor's final (non-retryable) error carries its
//! own hint, chosen by the notifier's classification and written into the error's message,
//! so it reaches every place the error does (the delivery log, the stored failure, dead
//! letters, `check-config --connect`). Each case has the local capture server answer the
//! vendor's documented error body:
//! * Slack Web API `ok: false` codes, <https://api.slack.com/methods/chat.postMessage#errors>
//!   (`missing_scope` with its `needed` and `provided` fields, as Slack answers it);
//! * Slack incoming webhooks' bare codes with their statuses,
//!   <https://api.slack.com/messaging/webhooks#handling_errors>;
//! * PagerDuty Events API v2's 400 `{"status": "invalid event", "message": "Event object is
//!   invalid", "errors": [...]}`;
//! * the webhook's and Alertmanager's 401, 403 and 404.

mod support;

use std::collections::BTreeMap;
use std::io::Write as _;

use culprit::config::{
    AlertmanagerConfig, HttpAuth, Millis, PagerDutyConfig, SecretSource, SlackConfig, SlackMode, WebhookConfig,
};
use culprit::model::notice::{Notice, NoticeKind};
use culprit::model::verdict::Verdict;
use culprit::notify::NotifyError;
use culprit::notify::alertmanager::Alertmanager;
use culprit::notify::pagerduty::PagerDuty;
use culprit::notify::slack::Slack;
use culprit::notify::webhook::Webhook;
use serde_json::json;
use support::capture::Capture;

const TOKEN: &str = "xoxb-1111-2222-S3CR3TT0K3N";
const ROUTING_KEY: &str = "R0UT1NGKEY5ECRET0123456789abcdef";

fn secret_file(value: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    writeln!(f, "{value}").unwrap();
    f
}

fn verdict() -> Verdict {
    let capture = culprit::samples::captures::CAPTURES.iter().find(|c| c.name == "slow-sink").unwrap();
    culprit::samples::captures::verdict(capture).unwrap()
}

fn notice() -> Notice {
    let v = verdict();
    Notice {
        links: Default::default(),
        episode: Default::default(),
        maybe_repeat: false,
        incident: None,
        incident_view: None,
        incident_parent: None,
        kind: NoticeKind::Verdict,
        group_key: "{}:{alertname=\"FlinkJobBackpressured\"}".into(),
        labels: BTreeMap::new(),
        job: v.job.clone(),
        verdict: Some(v),
        verdict_id: Some(7),
        verdict_url: None,
        reason: None,
        firing: true,
        changed: false,
        idempotency_key: "k1".into(),
        at_ms: 1_795_000_000_000,
    }
}

fn web_api(c: &Capture, token: &tempfile::NamedTempFile) -> Slack {
    Slack::new(&SlackConfig {
        name: None,
        mode: SlackMode::WebApi,
        token: Some(SecretSource::File(token.path().to_path_buf())),
        channel: Some("C0ALERTS".into()),
        webhook_url: None,
        api_url: format!("{}/slack/api", c.url),
        image: culprit::notify::slack::SlackImage::Off,
        signing_secret: None,
        alertmanager_url: None,
        alertmanager_auth: None,
    })
    .unwrap()
}

/// A final error that names `code` and says what to do, with `fix` in its hint and no
/// secret in it.
fn assert_final(e: &NotifyError, code: &str, fix: &str) {
    assert!(!e.retryable, "{e}");
    let hint = e.hint.as_deref().unwrap_or_else(|| panic!("no hint: {e}"));
    assert!(hint.contains(fix), "{code}: {hint}");
    assert!(e.message.contains(code) && e.message.ends_with(&format!("To fix: {hint}")), "{}", e.message);
    assert!(!e.message.contains("S3CR3T") && !e.message.contains(ROUTING_KEY), "{}", e.message);
}

#[tokio::test]
async fn each_final_slack_error_says_what_to_do_about_it() {
    let c = Capture::start().await;
    let token = secret_file(TOKEN);
    let slack = web_api(&c, &token);
    let cases: &[(&str, serde_json::Value, &str)] = &[
        ("is_archived", json!({"ok": false, "error": "is_archived"}), "unarchive it and invite the app"),
        ("not_in_channel", json!({"ok": false, "error": "not_in_channel"}), "/invite @<app>"),
        ("not_in_channel", json!({"ok": false, "error": "not_in_channel"}), "chat:write.public"),
        ("channel_not_found", json!({"ok": false, "error": "channel_not_found"}), "use the channel's ID"),
        ("invalid_auth", json!({"ok": false, "error": "invalid_auth"}), "reinstall the app"),
        ("not_authed", json!({"ok": false, "error": "not_authed"}), "notify.slack.token"),
        ("token_revoked", json!({"ok": false, "error": "token_revoked"}), "Bot User OAuth Token"),
        (
            "missing_scope",
            json!({"ok": false, "error": "missing_scope", "needed": "chat:write", "provided": "channels:read"}),
            "the scope `chat:write`",
        ),
    ];
    for (code, body, fix) in cases {
        c.fail_next("/slack/api/chat.postMessage", 200, None, &body.to_string());
        let e = slack.send(&notice(), None).await.unwrap_err();
        assert_final(&e, code, fix);
    }
    // Each code its own hint: archived, not a member and not found say different things.
    let mut hints = Vec::new();
    for code in ["is_archived", "not_in_channel", "channel_not_found"] {
        c.fail_next("/slack/api/chat.postMessage", 200, None, &json!({"ok": false, "error": code}).to_string());
        hints.push(slack.send(&notice(), None).await.unwrap_err().hint.unwrap());
    }
    let (a, b, d) = (&hints[0], &hints[1], &hints[2]);
    assert!(a != b && b != d && a != d);
}

#[tokio::test]
async fn a_message_slack_refuses_even_as_text_says_the_verdict_is_kept() {
    let c = Capture::start().await;
    let token = secret_file(TOKEN);
    let slack = web_api(&c, &token);
    for code in ["msg_too_long", "invalid_blocks"] {
        // The blocks, then the text alone sent after them: both refused.
        for _ in 0..2 {
            c.fail_next("/slack/api/chat.postMessage", 200, None, &json!({"ok": false, "error": code}).to_string());
        }
        let e = slack.send(&notice(), None).await.unwrap_err();
        assert_final(&e, code, "the verdict is kept");
    }
}

#[tokio::test]
async fn check_config_connect_shows_the_hint_of_a_refused_token() {
    let c = Capture::start().await;
    let token = secret_file(TOKEN);
    let slack = web_api(&c, &token);
    c.fail_next("/slack/api/auth.test", 200, None, &json!({"ok": false, "error": "invalid_auth"}).to_string());
    // What `check-config --connect` prints for the destination is the probe's message.
    let e = slack.probe().await.unwrap_err();
    assert_final(&e, "invalid_auth", "reinstall the app");
}

#[tokio::test]
async fn slack_incoming_webhook_errors_say_what_to_do() {
    let c = Capture::start().await;
    let url = format!("{}/services/T000/B000/W3BH00KS3CR3T", c.url);
    let file = secret_file(&url);
    let slack = Slack::new(&SlackConfig {
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
    })
    .unwrap();
    for (status, code, fix) in [
        (410, "channel_is_archived", "unarchive it"),
        (403, "invalid_token", "reinstall the app"),
        (404, "no_service", "create a new incoming webhook"),
        (404, "channel_not_found", "use the channel's ID"),
    ] {
        c.fail_next("/services/T000/B000/W3BH00KS3CR3T", status, None, code);
        let e = slack.send(&notice(), None).await.unwrap_err();
        assert_final(&e, code, fix);
        assert!(!e.message.contains("W3BH00K"), "{}", e.message);
    }
}

#[tokio::test]
async fn pagerdutys_invalid_routing_key_names_the_setting_and_where_the_key_is_never_the_key() {
    let c = Capture::start().await;
    let key = secret_file(ROUTING_KEY);
    let pd = PagerDuty::new(&PagerDutyConfig {
        name: None,
        routing_key: SecretSource::File(key.path().to_path_buf()),
        url: format!("{}/v2/enqueue", c.url),
        severity: "error".into(),
    })
    .unwrap();
    let invalid =
        json!({"status": "invalid event", "message": "Event object is invalid", "errors": ["Invalid routing key"]});
    c.fail_next("/v2/enqueue", 400, None, &invalid.to_string());
    let e = pd.send(&notice(), None).await.unwrap_err();
    assert_final(&e, "400", "notify.pagerduty.routing_key");
    assert!(e.hint.unwrap().contains("Events API v2 integration"));
    let short = json!({"status": "invalid event", "message": "Event object is invalid",
        "errors": ["Length of 'routing_key' is incorrect (should be 32 characters)"]});
    c.fail_next("/v2/enqueue", 400, None, &short.to_string());
    assert_final(&pd.send(&notice(), None).await.unwrap_err(), "400", "Integration Key");
    c.fail_next("/v2/enqueue", 404, None, "Not Found");
    assert_final(&pd.send(&notice(), None).await.unwrap_err(), "404", "notify.pagerduty.url");
    // Another 400 (a field of the event) is final without a routing-key hint.
    let other = json!({"status": "invalid event", "message": "Event object is invalid", "errors": ["'payload.summary' is missing"]});
    c.fail_next("/v2/enqueue", 400, None, &other.to_string());
    let e = pd.send(&notice(), None).await.unwrap_err();
    assert!(!e.retryable && e.hint.is_none(), "{e}");
}

#[tokio::test]
async fn webhook_and_alertmanager_refusals_name_their_settings() {
    let c = Capture::start().await;
    let hook = Webhook::new(&WebhookConfig { name: "incident-bot".into(), url: format!("{}/hook", c.url), auth: None })
        .unwrap();
    for (status, fix) in [
        (404, "the url of the [[notify.webhook]] named \"incident-bot\""),
        (403, "the auth of"),
        (401, "set or correct"),
    ] {
        c.fail_next("/hook", status, None, "no");
        assert_final(&hook.send(&notice(), None).await.unwrap_err(), &status.to_string(), fix);
    }
    let am = Alertmanager::new(&AlertmanagerConfig {
        url: format!("{}/am", c.url),
        ends_after: Millis::from_secs(900),
        alertname: "FlinkBackpressureCulprit".into(),
        auth: None::<HttpAuth>,
    })
    .unwrap();
    c.fail_next("/am/api/v2/alerts", 404, None, "404 page not found");
    assert_final(&am.send(&notice(), None).await.unwrap_err(), "404", "Alertmanager's base URL");
    c.fail_next("/am/api/v2/alerts", 403, None, "forbidden");
    assert_final(&am.send(&notice(), None).await.unwrap_err(), "403", "notify.alertmanager.auth");
    // A retryable answer has no hint: it is not final.
    c.fail_next("/am/api/v2/alerts", 503, None, "down");
    let e = am.send(&notice(), None).await.unwrap_err();
    assert!(e.retryable && e.hint.is_none());
}
