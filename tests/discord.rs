//! `[[notify.discord]]` against a stand-in that answers as Discord's webhooks are
//! documented to (<https://discord.com/developers/docs/resources/webhook>): `POST
//! ?wait=true` answers the message; `PATCH …/messages/<id>` edits it; `GET …/messages/<id>`
//! reads it; a body past a documented limit is refused with 400 `{"code": 50035, "message":
//! "Invalid Form Body", "errors": …}`; an unknown message is 404 `{"code": 10008}`, an
//! unknown webhook 404 `{"code": 10015}`; a rate limit is 429 with `{"message", "retry_after"
//! (seconds, float), "global"}` and `Retry-After`/`X-RateLimit-*` headers
//! (<https://discord.com/developers/docs/topics/rate-limits>).

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use culprit::config::Config;
use culprit::model::notice::{Notice, NoticeKind};
use culprit::model::verdict::GraphVertex;
use culprit::notify::{FailureReason, Notifier};
use culprit::render::discord::{GREEN, REPEAT_MARK};
use serde_json::{Value, json};
use support::chat::{Reply, Request, Stand};

const HOOK: &str = "/api/webhooks/1111111111111111111/T0kenS3cretD1scordWebhookZZ";

#[derive(Default)]
struct Vendor {
    messages: BTreeMap<u64, Value>,
    next_id: u64,
    limited_until: Option<Instant>,
    /// Apply the next write, then drop the connection.
    crash_next: bool,
    /// Refuse any body with embeds (a stand-in stricter than Discord, to reach the fallback).
    refuse_embeds: bool,
}

fn form_error() -> Reply {
    Reply::json(400, json!({"code": 50035, "message": "Invalid Form Body", "errors": {"embeds": {"_errors": []}}}))
}

/// Every documented limit of a message body.
fn within_limits(b: &Value) -> bool {
    let l = |v: &Value| v.as_str().map_or(0, |s| s.encode_utf16().count());
    let embeds = b["embeds"].as_array().cloned().unwrap_or_default();
    let mut total = 0;
    for e in &embeds {
        let fields = e["fields"].as_array().cloned().unwrap_or_default();
        if l(&e["title"]) > 256 || l(&e["description"]) > 4096 || fields.len() > 25 || l(&e["footer"]["text"]) > 2048 {
            return false;
        }
        if fields.iter().any(|f| l(&f["name"]) > 256 || l(&f["value"]) > 1024) {
            return false;
        }
        total += l(&e["title"]) + l(&e["description"]) + l(&e["footer"]["text"]);
        total += fields.iter().map(|f| l(&f["name"]) + l(&f["value"])).sum::<usize>();
    }
    l(&b["content"]) <= 2000 && embeds.len() <= 10 && total <= 6000 && (l(&b["content"]) > 0 || !embeds.is_empty())
}

fn handle(v: &Mutex<Vendor>, r: &Request) -> Reply {
    let mut v = v.lock().unwrap();
    let Some(rest) = r.path.strip_prefix(HOOK) else {
        return Reply::json(404, json!({"message": "Unknown Webhook", "code": 10015}));
    };
    if let Some(until) = v.limited_until
        && Instant::now() < until
    {
        let left = (until - Instant::now()).as_secs_f64();
        return Reply::json(
            429,
            json!({"message": "You are being rate limited.", "retry_after": left, "global": false}),
        )
        .with_header("Retry-After", &(left.ceil() as u64).to_string())
        .with_header("X-RateLimit-Limit", "5")
        .with_header("X-RateLimit-Remaining", "0")
        .with_header("X-RateLimit-Reset-After", &format!("{left:.3}"))
        .with_header("X-RateLimit-Bucket", "abcd1234")
        .with_header("X-RateLimit-Scope", "user");
    }
    let body = r.json();
    let write = |v: &mut Vendor, reply: Reply| if std::mem::take(&mut v.crash_next) { Reply::Drop } else { reply };
    match (r.method.as_str(), rest) {
        ("GET", "") => {
            Reply::json(200, json!({"id": "1111111111111111111", "type": 1, "channel_id": "222", "name": "culprit"}))
        }
        ("POST", "") => {
            if !within_limits(&body) || (v.refuse_embeds && body["embeds"].as_array().is_some_and(|e| !e.is_empty())) {
                return form_error();
            }
            v.next_id += 1;
            let id = 1_300_000_000_000_000_000 + v.next_id;
            let message = json!({"id": id.to_string(), "content": body["content"], "embeds": body["embeds"]});
            v.messages.insert(id, message.clone());
            // Without wait=true Discord answers 204 and no message.
            let reply = if r.query.contains("wait=true") { Reply::json(200, message) } else { Reply::text(204, "") };
            write(&mut v, reply)
        }
        (method, path) => {
            let Some(id) = path.strip_prefix("/messages/").and_then(|i| i.parse::<u64>().ok()) else {
                return Reply::json(405, json!({"message": "405: Method Not Allowed", "code": 0}));
            };
            if !v.messages.contains_key(&id) {
                return Reply::json(404, json!({"message": "Unknown Message", "code": 10008}));
            }
            match method {
                "GET" => Reply::json(200, v.messages[&id].clone()),
                "PATCH" => {
                    if !within_limits(&body)
                        || (v.refuse_embeds && body["embeds"].as_array().is_some_and(|e| !e.is_empty()))
                    {
                        return form_error();
                    }
                    let m = v.messages.get_mut(&id).unwrap();
                    for k in ["content", "embeds"] {
                        if !body[k].is_null() {
                            m[k] = body[k].clone();
                        }
                    }
                    let m = m.clone();
                    write(&mut v, Reply::json(200, m))
                }
                _ => Reply::json(405, json!({"message": "405: Method Not Allowed", "code": 0})),
            }
        }
    }
}

async fn stand() -> (Stand, Arc<Mutex<Vendor>>) {
    let vendor = Arc::new(Mutex::new(Vendor::default()));
    let v = vendor.clone();
    (Stand::start(move |r| handle(&v, r)).await, vendor)
}

fn notifier(dir: &std::path::Path, url: &str) -> Notifier {
    let file = dir.join("dc-url");
    std::fs::write(&file, url).unwrap();
    let text = format!(
        "[[notify.discord]]\nname = \"ops\"\nwebhook_url = {{ file = \"{}\" }}\nusername = \"culprit\"\n",
        file.display()
    );
    let config = Config::from_toml(&text, "d.toml").unwrap();
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
        idempotency_key: "discord:ops:1".into(),
        at_ms: 1_795_000_000_000,
        episode: Default::default(),
        maybe_repeat: false,
        incident: None,
        incident_view: None,
        incident_parent: None,
    }
}

fn id_of(state: &Option<Value>) -> u64 {
    state.as_ref().unwrap()["message_id"].as_str().unwrap().parse().unwrap()
}

#[tokio::test]
async fn a_verdict_is_posted_then_edited_in_place_and_a_changed_culprit_also_posts_a_note() {
    let (s, vendor) = stand().await;
    let dir = tempfile::tempdir().unwrap();
    let n = notifier(dir.path(), &format!("{}{HOOK}", s.url));
    let first = notice(NoticeKind::Verdict);
    let state = n.send(&first, None).await.unwrap().state;
    let id = id_of(&state);
    let post = &s.received()[0];
    assert_eq!((post.method.as_str(), post.query.as_str()), ("POST", "wait=true"));
    assert_eq!(post.json()["allowed_mentions"], json!({"parse": []}));
    assert_eq!(post.json()["username"], "culprit");
    // A revision edits the same message: no new one.
    let mut revision = first.clone();
    revision.episode.revision = 1;
    let state = n.send(&revision, state.as_ref()).await.unwrap().state;
    assert_eq!(id_of(&state), id);
    {
        let v = vendor.lock().unwrap();
        assert_eq!(v.messages.len(), 1);
        assert!(v.messages[&id]["content"].as_str().unwrap().ends_with("(revision 1)"));
    }
    let patch = &s.received()[1];
    assert_eq!((patch.method.as_str(), patch.path.as_str()), ("PATCH", format!("{HOOK}/messages/{id}").as_str()));
    assert_eq!(patch.json()["allowed_mentions"], json!({"parse": []}));
    // A changed culprit: the message is edited, and a short note is posted after it.
    let mut changed = first.clone();
    changed.changed = true;
    let state = n.send(&changed, state.as_ref()).await.unwrap().state;
    assert_eq!(id_of(&state), id, "the state stays the verdict's message");
    let v = vendor.lock().unwrap();
    assert_eq!(v.messages.len(), 2);
    assert!(v.messages[&id]["embeds"][0]["title"].as_str().unwrap().contains("Changed: "));
    let note = v.messages.values().last().unwrap();
    assert!(note["content"].as_str().unwrap().starts_with("🔄 **Verdict changed** (the message above was updated)"));
}

#[tokio::test]
async fn a_resolution_turns_the_message_green_and_titles_it_resolved() {
    let (s, vendor) = stand().await;
    let dir = tempfile::tempdir().unwrap();
    let n = notifier(dir.path(), &format!("{}{HOOK}", s.url));
    let state = n.send(&notice(NoticeKind::Verdict), None).await.unwrap().state;
    let id = id_of(&state);
    let state = n.send(&notice(NoticeKind::Resolved), state.as_ref()).await.unwrap().state;
    assert_eq!(id_of(&state), id);
    let v = vendor.lock().unwrap();
    assert_eq!(v.messages.len(), 1, "edited, not posted");
    let e = &v.messages[&id]["embeds"][0];
    assert_eq!(e["color"], GREEN);
    assert!(e["title"].as_str().unwrap().starts_with("✅ Resolved · 🔴 Backpressure culprit"), "{e}");
}

#[tokio::test]
async fn a_message_that_is_gone_is_posted_anew_and_becomes_the_state() {
    let (s, vendor) = stand().await;
    let dir = tempfile::tempdir().unwrap();
    let n = notifier(dir.path(), &format!("{}{HOOK}", s.url));
    let state = n.send(&notice(NoticeKind::Verdict), None).await.unwrap().state;
    let old = id_of(&state);
    vendor.lock().unwrap().messages.clear();
    let mut revision = notice(NoticeKind::Verdict);
    revision.episode.revision = 1;
    let state = n.send(&revision, state.as_ref()).await.unwrap().state;
    assert_ne!(id_of(&state), old);
    assert!(vendor.lock().unwrap().messages.contains_key(&id_of(&state)));
}

#[tokio::test]
async fn a_refused_body_is_sent_again_as_text_alone_and_an_unknown_webhook_is_final() {
    let (s, vendor) = stand().await;
    vendor.lock().unwrap().refuse_embeds = true;
    let dir = tempfile::tempdir().unwrap();
    let n = notifier(dir.path(), &format!("{}{HOOK}", s.url));
    let state = n.send(&notice(NoticeKind::Verdict), None).await.unwrap().state;
    {
        let v = vendor.lock().unwrap();
        let m = &v.messages[&id_of(&state)];
        assert_eq!(m["embeds"], json!([]));
        assert!(m["content"].as_str().unwrap().contains("**Fix first:**"), "{m}");
    }
    let gone = notifier(dir.path(), &format!("{}/api/webhooks/1/wrong", s.url));
    let e = gone.send(&notice(NoticeKind::Verdict), None).await.unwrap_err();
    assert!(!e.retryable && e.reason == FailureReason::Refused, "{e:?}");
    assert!(e.message.starts_with("discord:ops: HTTP 404 Not Found: code 10015 (Unknown Webhook)"), "{}", e.message);
    assert!(e.hint.as_deref().unwrap().contains("webhook_url"));
}

#[tokio::test]
async fn a_rate_limit_is_retryable_after_discords_retry_after_and_then_arrives() {
    let (s, vendor) = stand().await;
    let dir = tempfile::tempdir().unwrap();
    let n = notifier(dir.path(), &format!("{}{HOOK}", s.url));
    let verdict = notice(NoticeKind::Verdict);
    vendor.lock().unwrap().limited_until = Some(Instant::now() + Duration::from_millis(400));
    let e = n.send(&verdict, None).await.unwrap_err();
    assert!(e.retryable && e.reason == FailureReason::RateLimited, "{e:?}");
    assert!(e.message.ends_with("the webhook's rate limit"), "{}", e.message);
    // The JSON's float (0.4 s less the time the request took), not the header's whole
    // second (`Retry-After: 1`).
    let wait = e.retry_after.unwrap();
    assert!(wait > Duration::ZERO && wait <= Duration::from_millis(400), "{wait:?}");
    tokio::time::sleep(wait).await;
    n.send(&verdict, None).await.unwrap();
    assert_eq!(vendor.lock().unwrap().messages.len(), 1);
}

#[tokio::test]
async fn a_crash_mid_post_is_maybe_delivered_and_the_repeat_is_marked() {
    let (s, vendor) = stand().await;
    vendor.lock().unwrap().crash_next = true;
    let dir = tempfile::tempdir().unwrap();
    let n = notifier(dir.path(), &format!("{}{HOOK}", s.url));
    let first = notice(NoticeKind::Verdict);
    let e = n.send(&first, None).await.unwrap_err();
    assert!(e.retryable && e.reason.maybe_delivered(), "{e:?}");
    // Without a message id a webhook cannot find the message: unknown.
    assert_eq!(n.already_sent(&first, None).await.unwrap(), None);
    n.send(&Notice { maybe_repeat: true, ..first }, None).await.unwrap();
    let v = vendor.lock().unwrap();
    let contents: Vec<&str> = v.messages.values().map(|m| m["content"].as_str().unwrap()).collect();
    assert_eq!(contents.len(), 2);
    assert!(!contents[0].contains(REPEAT_MARK) && contents[1].starts_with(REPEAT_MARK), "{contents:?}");
}

#[tokio::test]
async fn a_crash_mid_edit_is_found_by_already_sent_and_not_edited_twice() {
    let (s, vendor) = stand().await;
    let dir = tempfile::tempdir().unwrap();
    let n = notifier(dir.path(), &format!("{}{HOOK}", s.url));
    let state = n.send(&notice(NoticeKind::Verdict), None).await.unwrap().state;
    vendor.lock().unwrap().crash_next = true;
    let mut revision = notice(NoticeKind::Verdict);
    revision.episode.revision = 1;
    revision.verdict.as_mut().unwrap().summary.push_str(" Revised.");
    let e = n.send(&revision, state.as_ref()).await.unwrap_err();
    assert!(e.reason.maybe_delivered(), "{e:?}");
    let found = n.already_sent(&revision, state.as_ref()).await.unwrap().expect("the edit is found");
    assert_eq!(id_of(&found.state), id_of(&state));
    let requests = s.received();
    assert_eq!(requests.last().unwrap().method, "GET", "found by reading the message, not by editing again");
    assert_eq!(vendor.lock().unwrap().messages.len(), 1);
    // An edit not made yet is not found (the message shows the first verdict).
    let mut other = revision.clone();
    other.verdict.as_mut().unwrap().summary.push_str(" Again.");
    assert_eq!(n.already_sent(&other, state.as_ref()).await.unwrap(), None);
    // Sent again as a possible repeat, it is an edit of the same message: folded, unmarked.
    n.send(&Notice { maybe_repeat: true, ..other }, state.as_ref()).await.unwrap();
    let v = vendor.lock().unwrap();
    assert_eq!(v.messages.len(), 1);
    assert!(!v.messages.values().next().unwrap()["content"].as_str().unwrap().contains(REPEAT_MARK));
}

#[tokio::test]
async fn a_200_vertex_verdict_passes_every_limit_discord_checks() {
    let (s, vendor) = stand().await;
    let dir = tempfile::tempdir().unwrap();
    let n = notifier(dir.path(), &format!("{}{HOOK}", s.url));
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
    v.fix = (0..40).map(|i| format!("step {i}: {}", "ü".repeat(200))).collect();
    let state = n.send(&big, None).await.unwrap().state;
    let v = vendor.lock().unwrap();
    let m = &v.messages[&id_of(&state)];
    assert!(m["embeds"][0]["description"].as_str().unwrap().contains("more vertices"), "the embed, not the fallback");
}

#[tokio::test]
async fn mentions_never_ping_and_never_read_as_mentions() {
    let (s, vendor) = stand().await;
    let dir = tempfile::tempdir().unwrap();
    let n = notifier(dir.path(), &format!("{}{HOOK}", s.url));
    let mut x = notice(NoticeKind::Verdict);
    x.labels.insert("owner".into(), "@everyone @here <@123> <@&456>".into());
    x.job.name = "@everyone-job".into();
    let state = n.send(&x, None).await.unwrap().state;
    let body = s.received()[0].json();
    assert_eq!(body["allowed_mentions"], json!({"parse": []}));
    let text = vendor.lock().unwrap().messages[&id_of(&state)].to_string();
    for m in ["@everyone", "@here", "<@123>", "<@&456>"] {
        assert!(!text.contains(m), "{m} in {text}");
    }
}

#[tokio::test]
async fn the_webhook_url_is_in_no_error_debug_or_probe_answer() {
    let (s, _vendor) = stand().await;
    let dir = tempfile::tempdir().unwrap();
    let token = "Wr0ngT0kenWr0ngT0kenWr0ng";
    let url = format!("{}/api/webhooks/1/{token}", s.url);
    let n = notifier(dir.path(), &url);
    let e = n.send(&notice(NoticeKind::Verdict), None).await.unwrap_err();
    let p = n.probe().await.unwrap_err();
    let file = dir.path().join("u");
    std::fs::write(&file, &url).unwrap();
    let cfg: culprit::notify::discord::DiscordConfig =
        toml::from_str(&format!("name = \"ops\"\nwebhook_url = {{ file = \"{}\" }}", file.display())).unwrap();
    let debug = format!("{:?}", culprit::notify::discord::Discord::new(&cfg).unwrap());
    let closed = format!("http://127.0.0.1:{}/api/webhooks/1/{token}", support::free_port());
    let t = notifier(dir.path(), &closed).send(&notice(NoticeKind::Verdict), None).await.unwrap_err();
    for text in [&e.message, &p.message, &debug, &t.message] {
        assert!(!text.contains(token) && !text.contains("/api/webhooks"), "{text}");
    }
    let ok = notifier(dir.path(), &format!("{}{HOOK}", s.url)).probe().await.unwrap();
    assert!(ok.contains("the webhook is known") && ok.contains("nothing was posted"), "{ok}");
}

#[tokio::test]
async fn an_incident_summary_is_posted_once_edited_as_jobs_join_and_their_verdicts_fold_into_it() {
    let (s, vendor) = stand().await;
    let dir = tempfile::tempdir().unwrap();
    let n = notifier(dir.path(), &format!("{}{HOOK}", s.url));
    let summary = |jobs| support::incident::summary(&notice(NoticeKind::Verdict), jobs);
    let posted = n.send(&summary(5), None).await.unwrap().state;
    let id = id_of(&posted);
    // The same five again: nothing; six: edited in place.
    assert_eq!(n.send(&summary(5), posted.as_ref()).await.unwrap().state, posted);
    let six = n.send(&summary(6), posted.as_ref()).await.unwrap().state;
    assert_eq!(id_of(&six), id);
    let title = vendor.lock().unwrap().messages[&id]["embeds"][0]["title"].as_str().unwrap().to_string();
    assert!(title.contains("6 jobs held back by their sinks writing to Elasticsearch"), "{title}");
    // A job counted in it is folded into it: nothing posted, nor for its revision or
    // its resolution.
    let mut counted = notice(NoticeKind::Verdict);
    counted.incident = Some(support::incident::tag());
    counted.incident_parent = six.clone();
    let job = n.send(&counted, None).await.unwrap().state.unwrap();
    assert_eq!(job["in_incident"], id.to_string());
    let revision = Notice {
        episode: culprit::model::notice::NoticeEpisode { revision: 1, ..Default::default() },
        ..counted.clone()
    };
    assert_eq!(n.send(&revision, Some(&job)).await.unwrap().state.as_ref(), Some(&job));
    assert_eq!(n.send(&notice(NoticeKind::Resolved), Some(&job)).await.unwrap().state.as_ref(), Some(&job));
    assert_eq!(vendor.lock().unwrap().messages.len(), 1, "the summary alone");
    // News of the job's own (its culprit changed) is posted, and is its message from then on.
    let changed = Notice { changed: true, ..notice(NoticeKind::Verdict) };
    let own = n.send(&changed, Some(&job)).await.unwrap().state;
    assert_ne!(id_of(&own), id);
    assert_eq!(vendor.lock().unwrap().messages.len(), 2);
}

#[tokio::test]
async fn a_summary_of_more_jobs_than_it_names_is_followed_by_digests_that_name_the_rest() {
    let (s, vendor) = stand().await;
    let dir = tempfile::tempdir().unwrap();
    let n = notifier(dir.path(), &format!("{}{HOOK}", s.url));
    // 45 jobs at once: the summary names 25, two digests name 26..39 and 40..45 (14 a post).
    let summary = support::incident::summary(&notice(NoticeKind::Verdict), 45);
    let state = n.send(&summary, None).await.unwrap().state.unwrap();
    assert_eq!(state["incident_shown"], 45);
    let v = vendor.lock().unwrap();
    let descriptions: Vec<String> =
        v.messages.values().map(|m| m["embeds"][0]["description"].as_str().unwrap().to_string()).collect();
    assert_eq!(descriptions.len(), 3, "{descriptions:#?}");
    let tokens: Vec<&str> =
        descriptions.iter().flat_map(|d| d.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))).collect();
    for j in 1..=45 {
        let job = format!("job-{j}");
        assert_eq!(tokens.iter().filter(|t| **t == job).count(), 1, "{job} named once: {descriptions:#?}");
    }
}
