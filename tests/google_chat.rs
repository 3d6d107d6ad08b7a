//! The Google Chat notifier against a local stand-in for a space's incoming webhook
//! (tests/support/chat.rs): 200 with the message and its thread, threads by `threadKey`
//! with `messageReplyOption`, Google's error bodies, 32,000 bytes at most, `key` and
//! `token` checked, 429 with Retry-After, and a connection dropped after the request.

mod support;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::time::Duration;

use culprit::config::SecretSource;
use culprit::model::notice::{Notice, NoticeKind};
use culprit::model::verdict::{Graph, GraphVertex, Verdict, VertexState};
use culprit::notify::google_chat::{FIRST_POST, GoogleChat, GoogleChatConfig};
use culprit::notify::{Destination, FailureReason, NotifyError};
use culprit::render::google_chat::REPEAT_MARK;
use serde_json::{Value, json};
use support::cards::{ChatStandIn, GOOGLE_KEY, GOOGLE_MAX_BYTES, GOOGLE_TOKEN, Reply, Vendor, google_error};

fn verdict(name: &str) -> Verdict {
    let capture = culprit::samples::captures::CAPTURES.iter().find(|c| c.name == name).unwrap();
    culprit::samples::captures::verdict(capture).unwrap()
}

fn notice(kind: NoticeKind, verdict: Option<Verdict>) -> Notice {
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
        idempotency_key: "google_chat:payments:g1:v1".into(),
        at_ms: 1_795_000_000_000,
        episode: culprit::model::notice::NoticeEpisode {
            thread: "job:bp-lab-slow-sink:1".into(),
            ..Default::default()
        },
        maybe_repeat: false,
        incident: None,
        incident_view: None,
        incident_parent: None,
    }
}

fn first_verdict() -> Notice {
    notice(NoticeKind::Verdict, Some(verdict("slow-sink")))
}

/// A notifier toward the stand-in; keep the file alive while it is used.
fn chat(stand_in: &ChatStandIn) -> (GoogleChat, tempfile::NamedTempFile) {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    writeln!(f, "{}", stand_in.webhook_url()).unwrap();
    let cfg = GoogleChatConfig { name: "payments".into(), webhook_url: SecretSource::File(f.path().to_path_buf()) };
    (GoogleChat::new(&cfg).unwrap(), f)
}

#[track_caller]
fn assert_no_secret(e: &NotifyError) {
    let all = format!("{e} {e:?}");
    for s in [GOOGLE_KEY, &GOOGLE_KEY[..8], GOOGLE_TOKEN, &GOOGLE_TOKEN[..8], "/v1/spaces/"] {
        assert!(!all.contains(s), "{s} in {all}");
    }
}

#[tokio::test]
async fn the_first_verdict_starts_the_episodes_thread_with_text_and_a_card() {
    let stand_in = ChatStandIn::start(Vendor::GoogleChat).await;
    let (c, _f) = chat(&stand_in);
    let sent = c.send(&first_verdict(), None).await.unwrap();
    let key = culprit::render::google_chat::thread_key(&first_verdict());
    assert_eq!(
        sent.state,
        Some(json!({ FIRST_POST: 1_795_000_000_000i64, "thread": "spaces/AAAAspace/threads/T0", "thread_key": key }))
    );
    let posts = stand_in.posts();
    assert_eq!(posts.len(), 1);
    assert!(
        posts[0].target.ends_with("&messageReplyOption=REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD"),
        "{}",
        posts[0].target
    );
    let body = &posts[0].body;
    assert!(body["text"].as_str().unwrap().starts_with("Backpressure culprit slow-sink: Writer"));
    assert!(body["cardsV2"][0]["card"]["sections"].as_array().unwrap().len() >= 2);
    assert!(body["thread"]["threadKey"].as_str().unwrap().starts_with("culprit-"));
}

#[tokio::test]
async fn an_update_and_a_resolution_reply_in_the_first_posts_thread_and_say_what_they_update() {
    let stand_in = ChatStandIn::start(Vendor::GoogleChat).await;
    let (c, _f) = chat(&stand_in);
    let first = c.send(&first_verdict(), None).await.unwrap().state;
    let mut revision = first_verdict();
    revision.episode.revision = 1;
    let after = c.send(&revision, first.as_ref()).await.unwrap().state;
    assert_eq!(after, first, "the same thread, the first post's time");
    let resolved = Notice { episode: first_verdict().episode, ..notice(NoticeKind::Resolved, None) };
    let last = c.send(&resolved, after.as_ref()).await.unwrap().state.unwrap();
    assert_eq!(last["thread"], "spaces/AAAAspace/threads/T0");
    let posts = stand_in.posts();
    let keys: Vec<&Value> = posts.iter().map(|p| &p.body["thread"]["threadKey"]).collect();
    assert!(keys.iter().all(|k| *k == keys[0]), "{keys:?}");
    // 1_795_000_000_000 ms is 2026-11-18T11:06:40Z (40_000 s into the day: 11 h 6 min 40 s).
    assert!(posts[1].body["text"].as_str().unwrap().starts_with("Update of the verdict posted at 11:06 UTC"));
    assert!(posts[2].body["text"].as_str().unwrap().starts_with("Resolved: the verdict posted at 11:06 UTC"));
    // The revision is a short reply (a webhook cannot edit the verdict's message): what
    // changed, not the whole verdict a second time.
    assert!(posts[1].body["text"].as_str().unwrap().contains("the verdict was revised (revision 1): confidence"));
    assert!(posts[1].bytes * 2 < posts[0].bytes, "{} vs {} bytes", posts[1].bytes, posts[0].bytes);
    assert!(!posts[1].body.to_string().contains("Vertices"));
}

#[tokio::test]
async fn a_refused_card_is_final_and_names_googles_status_and_the_key_to_fix() {
    let stand_in = ChatStandIn::start(Vendor::GoogleChat).await;
    let (c, _f) = chat(&stand_in);
    stand_in.then(Reply::Answer {
        status: 400,
        retry_after: None,
        body: google_error(400, "INVALID_ARGUMENT", &format!("Invalid JSON payload at token={GOOGLE_TOKEN}")),
    });
    let e = c.send(&first_verdict(), None).await.unwrap_err();
    assert!(!e.retryable);
    assert_eq!(e.reason, FailureReason::Refused);
    assert!(e.message.contains("HTTP 400") && e.message.contains("INVALID_ARGUMENT"), "{e}");
    assert!(e.hint.as_deref().unwrap().contains("notify.google_chat (name \"payments\").webhook_url"), "{e:?}");
    assert_no_secret(&e);
}

#[tokio::test]
async fn a_wrong_token_is_final_with_its_hint_and_no_secret_anywhere() {
    let stand_in = ChatStandIn::start(Vendor::GoogleChat).await;
    let mut f = tempfile::NamedTempFile::new().unwrap();
    writeln!(f, "{}", stand_in.webhook_url().replace(GOOGLE_TOKEN, "T0K3NS3CR3T0123456789WRONG")).unwrap();
    let cfg = GoogleChatConfig { name: "payments".into(), webhook_url: SecretSource::File(f.path().to_path_buf()) };
    let c = GoogleChat::new(&cfg).unwrap();
    let e = c.send(&first_verdict(), None).await.unwrap_err();
    assert!(!e.retryable && e.message.contains("UNAUTHENTICATED"), "{e}");
    assert!(e.hint.as_deref().unwrap().contains("key or token"), "{e:?}");
    assert!(!format!("{e} {e:?} {c:?}").contains("T0K3NS3CR3T"), "{e:?}");
    let e = c.probe().await.unwrap_err();
    assert!(e.message.contains("UNAUTHENTICATED") && !format!("{e:?}").contains("T0K3NS3CR3T"), "{e:?}");
}

#[tokio::test]
async fn a_rate_limit_is_retryable_after_the_wait_google_gives() {
    let stand_in = ChatStandIn::start(Vendor::GoogleChat).await;
    let (c, _f) = chat(&stand_in);
    stand_in.then(Reply::Answer {
        status: 429,
        retry_after: Some(30),
        body: google_error(429, "RESOURCE_EXHAUSTED", "Quota exceeded for quota metric 'Write requests per space'"),
    });
    let e = c.send(&first_verdict(), None).await.unwrap_err();
    assert!(e.retryable);
    assert_eq!(e.reason, FailureReason::RateLimited);
    assert_eq!(e.retry_after, Some(Duration::from_secs(30)));
    assert_no_secret(&e);
}

#[tokio::test]
async fn a_crash_mid_send_says_maybe_delivered_and_the_repeat_is_marked_in_the_same_thread() {
    let stand_in = ChatStandIn::start(Vendor::GoogleChat).await;
    let (c, _f) = chat(&stand_in);
    stand_in.then(Reply::Drop);
    let e = c.send(&first_verdict(), None).await.unwrap_err();
    assert!(e.retryable && e.reason.maybe_delivered(), "{e:?}");
    assert_no_secret(&e);
    assert_eq!(c.already_sent(&first_verdict(), None).await.unwrap(), None, "a webhook cannot look");
    c.send(&Notice { maybe_repeat: true, ..first_verdict() }, None).await.unwrap();
    let posts = stand_in.posts();
    assert_eq!(posts.len(), 2, "the dropped post arrived, and the repeat");
    assert!(!posts[0].body.to_string().contains(REPEAT_MARK));
    assert!(posts[1].body["text"].as_str().unwrap().starts_with(REPEAT_MARK), "the second copy is marked");
    assert_eq!(posts[0].body["thread"], posts[1].body["thread"], "in the same thread");
}

#[tokio::test]
async fn a_200_vertex_verdict_is_cut_below_the_size_google_refuses_and_gets_through() {
    let stand_in = ChatStandIn::start(Vendor::GoogleChat).await;
    let (c, _f) = chat(&stand_in);
    // The stand-in refuses what Google refuses: a message over 32,000 bytes.
    let big = json!({ "text": "x".repeat(GOOGLE_MAX_BYTES) });
    let status = reqwest::Client::new().post(stand_in.webhook_url()).json(&big).send().await.unwrap().status();
    assert_eq!(status.as_u16(), 400);
    let mut v = verdict("slow-sink");
    v.graph = Graph {
        vertices: (0..200)
            .map(|i| GraphVertex {
                id: format!("{i:032x}"),
                name: format!("vertex-{i} with a rather long operator name, number {i} of this job"),
                parallelism: 64,
                busy_max: Some(0.5),
                backpressured_max: Some(0.25),
                idle_avg: Some(0.25),
                state: VertexState::Backpressured,
            })
            .collect(),
        edges: Vec::new(),
        from_plan: true,
    };
    v.cause = "A long cause <&>. ".repeat(2000);
    c.send(&notice(NoticeKind::Verdict, Some(v)), None).await.unwrap();
    let last = stand_in.posts().pop().unwrap();
    assert!(last.bytes <= GOOGLE_MAX_BYTES, "{} bytes", last.bytes);
    assert!(last.body.to_string().contains("more vertices on the verdict page"));
}

#[tokio::test]
async fn the_probe_posts_an_empty_message_that_google_refuses_so_nothing_appears() {
    let stand_in = ChatStandIn::start(Vendor::GoogleChat).await;
    let (c, _f) = chat(&stand_in);
    let said = c.probe().await.unwrap();
    assert!(said.contains("nothing was posted"), "{said}");
    let posts = stand_in.posts();
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0].body, json!({}));
}

#[tokio::test]
async fn an_incident_summary_is_posted_once_and_the_jobs_counted_after_it_reply_in_its_thread() {
    let stand_in = ChatStandIn::start(Vendor::GoogleChat).await;
    let (c, _f) = chat(&stand_in);
    let summary = |jobs| support::incident::summary(&first_verdict(), jobs);
    let posted = c.send(&summary(5), None).await.unwrap().state;
    // A webhook cannot edit it: the next summary of the incident posts nothing.
    let again = c.send(&summary(6), posted.as_ref()).await.unwrap().state;
    assert_eq!(again, posted);
    assert_eq!(stand_in.posts().len(), 1);
    // A job counted in it replies under it, and so does that job's resolution.
    let mut counted = first_verdict();
    counted.incident = Some(support::incident::tag());
    counted.incident_parent = posted.clone();
    let job = c.send(&counted, None).await.unwrap().state;
    let resolved = Notice { episode: first_verdict().episode, ..notice(NoticeKind::Resolved, None) };
    c.send(&resolved, job.as_ref()).await.unwrap();
    // A job of its own (no incident) starts its own thread.
    let own = Notice {
        episode: culprit::model::notice::NoticeEpisode { thread: "job:other:1".into(), ..Default::default() },
        ..first_verdict()
    };
    c.send(&own, None).await.unwrap();
    let posts = stand_in.posts();
    assert_eq!(posts.len(), 4);
    let keys: Vec<&Value> = posts.iter().map(|p| &p.body["thread"]["threadKey"]).collect();
    assert!(keys[..3].iter().all(|k| *k == keys[0]) && keys[3] != keys[0], "{keys:?}");
    assert_eq!(job.unwrap()["thread"], "spaces/AAAAspace/threads/T0");
    let text = posts[0].body["text"].as_str().unwrap();
    assert!(text.starts_with("5 jobs held back by their sinks writing to Elasticsearch logs-"), "{text}");
    assert!(text.contains("each job's verdict is a reply in this thread"), "{text}");
    assert!(posts[0].body.to_string().contains("job-1, job-2, job-3, job-4, job-5"));
}
