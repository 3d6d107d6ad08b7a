//! `[[notify.mattermost]]` against a stand-in that answers as Mattermost's incoming webhooks
//! are documented to (<https://developers.mattermost.com/integrate/webhooks/incoming/>):
//! `200 ok`; errors as `{id, message, detailed_error, request_id, status_code}`; 429 with
//! `X-Ratelimit-*` and `Retry-After` while the limit lasts. The stand-in refuses a message
//! longer than the default `MaxPostSize` (16383 characters) outright, stricter than
//! Mattermost (which splits it into several posts), so that a post that would not fit
//! fails here.

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use culprit::config::Config;
use culprit::model::notice::{Notice, NoticeKind};
use culprit::model::verdict::GraphVertex;
use culprit::notify::{FailureReason, Notifier};
use culprit::render::mattermost::{MAX_POST_CHARS, REPEAT_MARK};
use serde_json::{Value, json};
use support::chat::{Reply, Request, Stand};

const KEY: &str = "xk4m9secretkeyq7w1mattermost";

/// What the stand-in does next.
#[derive(Default)]
struct Vendor {
    /// Posts made, as their JSON bodies.
    posts: Vec<Value>,
    /// 429 until then.
    limited_until: Option<Instant>,
    /// Take the next post, then drop the connection.
    crash_next: bool,
}

fn error(status: u16, id: &str, message: &str) -> Reply {
    Reply::json(
        status,
        json!({"id": id, "message": message, "detailed_error": "", "request_id": "rq1", "status_code": status}),
    )
}

fn handle(v: &Mutex<Vendor>, r: &Request) -> Reply {
    let mut v = v.lock().unwrap();
    if r.method != "POST" {
        return Reply::text(405, "405 method not allowed");
    }
    if r.path != format!("/hooks/{KEY}") {
        return error(400, "web.incoming_webhook.invalid.app_error", "Invalid webhook.");
    }
    if let Some(until) = v.limited_until
        && Instant::now() < until
    {
        let left = (until - Instant::now()).as_secs_f64().ceil() as u64;
        return Reply::text(429, "limit exceeded\n")
            .with_header("X-Ratelimit-Limit", "10")
            .with_header("X-Ratelimit-Remaining", "0")
            .with_header("X-Ratelimit-Reset", &left.to_string())
            .with_header("Retry-After", &left.to_string());
    }
    let body = r.json();
    let text = body["text"].as_str().unwrap_or_default();
    if text.is_empty() && body["attachments"].is_null() {
        return error(400, "web.incoming_webhook.text.app_error", "No text specified.");
    }
    if text.chars().count() > MAX_POST_CHARS {
        return error(400, "api.post.create_post.message_length.app_error", "Message too long.");
    }
    if body["channel"].as_str().is_some_and(|c| c != "town-square") {
        return error(404, "web.incoming_webhook.channel.app_error", "Couldn't find the channel.");
    }
    v.posts.push(body);
    if std::mem::take(&mut v.crash_next) {
        return Reply::Drop;
    }
    Reply::text(200, "ok")
}

async fn stand() -> (Stand, Arc<Mutex<Vendor>>) {
    let vendor = Arc::new(Mutex::new(Vendor::default()));
    let v = vendor.clone();
    (Stand::start(move |r| handle(&v, r)).await, vendor)
}

fn notifier(dir: &std::path::Path, url: &str, extra: &str) -> Notifier {
    let file = dir.join("mm-url");
    std::fs::write(&file, url).unwrap();
    let text =
        format!("[[notify.mattermost]]\nname = \"ops\"\nwebhook_url = {{ file = \"{}\" }}\n{extra}", file.display());
    let config = Config::from_toml(&text, "m.toml").unwrap();
    Notifier::from_config(&config.notify).unwrap().pop().unwrap()
}

fn notice(kind: NoticeKind) -> Notice {
    let capture = culprit::samples::captures::CAPTURES.iter().find(|c| c.name == "slow-sink").unwrap();
    let verdict = culprit::samples::captures::verdict(capture).unwrap();
    Notice {
        links: Default::default(),
        kind,
        group_key: "{}:{alertname=\"FlinkJobBackpressured\"}".into(),
        labels: [("team".to_string(), "flink".to_string())].into(),
        job: verdict.job.clone(),
        verdict: (kind == NoticeKind::Verdict).then_some(verdict),
        verdict_id: Some(7),
        verdict_url: Some("https://culprit.example.com/api/v1/verdicts/7".into()),
        reason: None,
        firing: kind != NoticeKind::Resolved,
        changed: false,
        idempotency_key: "mattermost:ops:1".into(),
        at_ms: 1_795_000_000_000,
        episode: Default::default(),
        maybe_repeat: false,
        incident: None,
        incident_view: None,
        incident_parent: None,
    }
}

fn texts(v: &Mutex<Vendor>) -> Vec<String> {
    v.lock().unwrap().posts.iter().map(|p| p["text"].as_str().unwrap().to_string()).collect()
}

#[tokio::test]
async fn a_verdict_its_change_and_its_resolution_are_three_posts_each_saying_what_it_is() {
    let (s, vendor) = stand().await;
    let dir = tempfile::tempdir().unwrap();
    let n =
        notifier(dir.path(), &format!("{}/hooks/{KEY}", s.url), "channel = \"town-square\"\nusername = \"culprit\"\n");
    let first = notice(NoticeKind::Verdict);
    assert_eq!(n.send(&first, None).await.unwrap().state, None, "an incoming webhook keeps no post id");
    let mut update = first.clone();
    update.changed = true;
    n.send(&update, None).await.unwrap();
    n.send(&notice(NoticeKind::Resolved), None).await.unwrap();
    let t = texts(&vendor);
    assert_eq!(t.len(), 3);
    assert!(t[0].starts_with("#### :red_circle: Backpressure culprit"), "{}", t[0]);
    assert!(t[1].starts_with("**Verdict changed**: this replaces the verdict posted earlier"), "{}", t[1]);
    assert!(t[2].contains("**Resolved**") && t[2].contains("updates the verdict posted earlier"), "{}", t[2]);
    let body = &vendor.lock().unwrap().posts[0];
    assert_eq!((body["channel"].as_str(), body["username"].as_str()), (Some("town-square"), Some("culprit")));
    // Joined and GroupResolved are not posted (no threads to put them in).
    assert!(!n.wants(&notice(NoticeKind::Joined)) && !n.wants(&notice(NoticeKind::GroupResolved)));
    // Nor a revision (same culprit, other confidence or numbers): the webhook cannot edit
    // the verdict's post, and a second post of the same verdict is what "in place" avoids.
    let mut revision = first.clone();
    revision.episode.revision = 1;
    assert!(revision.is_revision() && !n.wants(&revision));
    assert!(n.wants(&update), "a changed verdict is posted");
}

#[tokio::test]
async fn a_refused_post_is_final_names_mattermosts_error_id_and_the_key_to_fix() {
    let (s, vendor) = stand().await;
    let dir = tempfile::tempdir().unwrap();
    let n = notifier(dir.path(), &format!("{}/hooks/{KEY}", s.url), "channel = \"no-such-channel\"\n");
    let e = n.send(&notice(NoticeKind::Verdict), None).await.unwrap_err();
    assert!(!e.retryable && e.reason == FailureReason::Refused, "{e:?}");
    assert!(
        e.message.starts_with("mattermost:ops: HTTP 404 Not Found: web.incoming_webhook.channel.app_error"),
        "{}",
        e.message
    );
    assert!(e.hint.as_deref().unwrap().contains("check `channel`"), "{e:?}");
    assert!(vendor.lock().unwrap().posts.is_empty());
}

#[tokio::test]
async fn a_rate_limited_post_is_retryable_after_the_time_asked_and_then_arrives() {
    let (s, vendor) = stand().await;
    vendor.lock().unwrap().limited_until = Some(Instant::now() + Duration::from_millis(900));
    let dir = tempfile::tempdir().unwrap();
    let n = notifier(dir.path(), &format!("{}/hooks/{KEY}", s.url), "");
    let e = n.send(&notice(NoticeKind::Verdict), None).await.unwrap_err();
    // 900 ms left, rounded up to whole seconds by the stand-in: Retry-After 1.
    assert!(e.retryable && e.reason == FailureReason::RateLimited, "{e:?}");
    assert_eq!(e.retry_after, Some(Duration::from_secs(1)));
    tokio::time::sleep(e.retry_after.unwrap()).await;
    n.send(&notice(NoticeKind::Verdict), None).await.unwrap();
    assert_eq!(texts(&vendor).len(), 1);
}

#[tokio::test]
async fn a_crash_mid_send_is_maybe_delivered_and_the_next_attempt_is_marked_as_a_possible_repeat() {
    let (s, vendor) = stand().await;
    vendor.lock().unwrap().crash_next = true;
    let dir = tempfile::tempdir().unwrap();
    let n = notifier(dir.path(), &format!("{}/hooks/{KEY}", s.url), "");
    let first = notice(NoticeKind::Verdict);
    let e = n.send(&first, None).await.unwrap_err();
    assert!(e.retryable && e.reason.maybe_delivered(), "{e:?}");
    // A webhook cannot look its posts up: the delivery loop sends it again as maybe_repeat.
    assert_eq!(n.already_sent(&first, None).await.unwrap(), None);
    let again = Notice { maybe_repeat: true, ..first };
    n.send(&again, None).await.unwrap();
    let t = texts(&vendor);
    assert_eq!(t.len(), 2, "the first post arrived before the connection dropped");
    assert!(!t[0].contains(REPEAT_MARK) && t[1].starts_with(REPEAT_MARK), "{t:?}");
}

#[tokio::test]
async fn a_200_vertex_verdict_still_fits_one_post() {
    let (s, vendor) = stand().await;
    let dir = tempfile::tempdir().unwrap();
    let n = notifier(dir.path(), &format!("{}/hooks/{KEY}", s.url), "");
    let mut big = notice(NoticeKind::Verdict);
    let v = big.verdict.as_mut().unwrap();
    let template = v.graph.vertices[0].clone();
    v.graph.vertices = (0..200)
        .map(|i| GraphVertex {
            id: format!("v{i}"),
            name: format!("Source: topic_{i} -> Calc(select=[a, b]) -> Sink: s{i}"),
            ..template.clone()
        })
        .collect();
    n.send(&big, None).await.unwrap();
    let t = texts(&vendor);
    assert!(t[0].chars().count() <= MAX_POST_CHARS && t[0].contains("more vertices"), "{}", t[0].chars().count());
}

#[tokio::test]
async fn mentions_in_labels_and_names_never_reach_mattermost_as_mentions() {
    let (s, vendor) = stand().await;
    let dir = tempfile::tempdir().unwrap();
    let n = notifier(dir.path(), &format!("{}/hooks/{KEY}", s.url), "");
    let mut x = notice(NoticeKind::Verdict);
    x.labels.insert("owner".into(), "@channel @all @here @alice".into());
    x.job.name = "@here-job".into();
    n.send(&x, None).await.unwrap();
    let t = &texts(&vendor)[0];
    for m in ["@channel", "@all", "@here", "@alice"] {
        assert!(!t.contains(m), "{m} in {t}");
    }
}

#[tokio::test]
async fn the_webhook_url_is_in_no_error_debug_or_probe_answer() {
    let (s, _vendor) = stand().await;
    let dir = tempfile::tempdir().unwrap();
    let wrong = "wr0ngk3ywr0ngk3ywr0ngk3y";
    let n = notifier(dir.path(), &format!("{}/hooks/{wrong}", s.url), "");
    let e = n.send(&notice(NoticeKind::Verdict), None).await.unwrap_err();
    assert!(
        e.message.contains("web.incoming_webhook.invalid.app_error")
            && e.hint.as_deref().unwrap().contains("webhook_url")
    );
    let p = n.probe().await.unwrap_err();
    let file = dir.path().join("u");
    std::fs::write(&file, format!("{}/hooks/{wrong}", s.url)).unwrap();
    let cfg: culprit::notify::mattermost::MattermostConfig =
        toml::from_str(&format!("name = \"ops\"\nwebhook_url = {{ file = \"{}\" }}", file.display())).unwrap();
    let debug = format!("{:?}", culprit::notify::mattermost::Mattermost::new(&cfg).unwrap());
    for text in [&e.message, &p.message, &debug] {
        assert!(!text.contains(wrong) && !text.contains("/hooks/"), "{text}");
    }
    // Refused connection: the transport error names no URL either.
    let closed = format!("http://127.0.0.1:{}/hooks/{wrong}", support::free_port());
    let e = notifier(dir.path(), &closed, "").send(&notice(NoticeKind::Verdict), None).await.unwrap_err();
    assert!(!e.message.contains(wrong), "{}", e.message);
}

#[tokio::test]
async fn the_probe_posts_nothing_and_tells_a_known_webhook_from_an_unknown_one() {
    let (s, vendor) = stand().await;
    let dir = tempfile::tempdir().unwrap();
    let ok = notifier(dir.path(), &format!("{}/hooks/{KEY}", s.url), "").probe().await.unwrap();
    assert!(ok.contains("the webhook is known") && ok.contains("not verified"), "{ok}");
    assert!(notifier(dir.path(), &format!("{}/hooks/nope", s.url), "").probe().await.is_err());
    assert!(vendor.lock().unwrap().posts.is_empty());
}

#[tokio::test]
async fn an_incident_is_one_post_and_the_jobs_counted_in_it_post_nothing_of_their_own() {
    let (s, vendor) = stand().await;
    let dir = tempfile::tempdir().unwrap();
    let n = notifier(dir.path(), &format!("{}/hooks/{KEY}", s.url), "");
    let summary = |jobs| support::incident::summary(&notice(NoticeKind::Verdict), jobs);
    assert!(n.wants(&summary(5)));
    let state = n.send(&summary(5), None).await.unwrap().state;
    // Nothing new: nothing; the jobs counted in it: folded.
    assert_eq!(n.send(&summary(5), state.as_ref()).await.unwrap().state, state);
    let mut counted = notice(NoticeKind::Verdict);
    counted.incident = Some(support::incident::tag());
    counted.incident_parent = Some(serde_json::json!({ "incident_shown": 5 }));
    let job = n.send(&counted, None).await.unwrap().state;
    assert_eq!(job.as_ref().unwrap()["in_incident"], "incident:1-abcd");
    n.send(&notice(NoticeKind::Resolved), job.as_ref()).await.unwrap();
    // A changed verdict of that job is news of its own: posted.
    n.send(&notice_changed(), job.as_ref()).await.unwrap();
    let t = texts(&vendor);
    assert_eq!(t.len(), 2, "{t:#?}");
    assert!(t[0].starts_with("#### 5 jobs held back by their sinks writing to Elasticsearch"), "{}", t[0]);
    assert!(t[0].contains("**Jobs:** **job\\-1**") || t[0].contains("**Jobs:** **job-1**"), "{}", t[0]);
    assert!(t[1].starts_with("**Verdict changed**"), "{}", t[1]);
}

fn notice_changed() -> Notice {
    Notice { changed: true, ..notice(NoticeKind::Verdict) }
}
