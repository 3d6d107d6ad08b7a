//! The Teams notifier against a local stand-in for a Workflows webhook trigger
//! (tests/support/chat.rs): 202 on success, Logic Apps' error bodies, 413 above 28 KB,
//! 429 with Retry-After, and a connection dropped after the request arrived.

mod support;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::time::Duration;

use culprit::config::SecretSource;
use culprit::model::notice::{Notice, NoticeKind};
use culprit::model::verdict::{Graph, GraphVertex, Verdict, VertexState};
use culprit::notify::teams::{FIRST_POST, Teams, TeamsConfig};
use culprit::notify::{Destination, FailureReason, NotifyError};
use culprit::render::teams::REPEAT_MARK;
use serde_json::{Value, json};
use support::cards::{ChatStandIn, Reply, TEAMS_MAX_BYTES, TEAMS_SIG, Vendor, logic_apps_error};

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
        idempotency_key: "teams:payments:g1:v1".into(),
        at_ms: 1_795_000_000_000,
        episode: Default::default(),
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
fn teams(stand_in: &ChatStandIn) -> (Teams, tempfile::NamedTempFile) {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    writeln!(f, "{}", stand_in.webhook_url()).unwrap();
    let cfg = TeamsConfig { name: "payments".into(), webhook_url: SecretSource::File(f.path().to_path_buf()) };
    (Teams::new(&cfg).unwrap(), f)
}

/// The text of every block of a posted card's body.
fn card_texts(post: &Value) -> Vec<String> {
    post["attachments"][0]["content"]["body"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["text"].as_str().map(str::to_string))
        .collect()
}

#[track_caller]
fn assert_no_secret(e: &NotifyError) {
    let all = format!("{e} {e:?}");
    assert!(!all.contains(TEAMS_SIG) && !all.contains(&TEAMS_SIG[..8]) && !all.contains("/workflows/"), "{all}");
}

#[tokio::test]
async fn the_first_verdict_is_one_adaptive_card_and_its_post_time_is_the_state() {
    let stand_in = ChatStandIn::start(Vendor::Teams).await;
    let (t, _f) = teams(&stand_in);
    let sent = t.send(&first_verdict(), None).await.unwrap();
    assert_eq!(sent.state, Some(json!({ FIRST_POST: 1_795_000_000_000i64 })));
    let posts = stand_in.posts();
    assert_eq!(posts.len(), 1);
    let body = &posts[0].body;
    assert_eq!(body["type"], "message");
    assert_eq!(body["attachments"][0]["contentType"], "application/vnd.microsoft.card.adaptive");
    let texts = card_texts(body);
    assert!(texts[0].starts_with("Backpressure culprit slow-sink: Writer"), "{texts:?}");
    assert!(!texts.iter().any(|t| t == REPEAT_MARK));
    assert_eq!(body["attachments"][0]["content"]["actions"][0]["url"], "https://culprit.example.com/api/v1/verdicts/7");
}

#[tokio::test]
async fn a_changed_verdict_and_a_resolution_are_new_posts_that_name_the_first_posts_time() {
    let stand_in = ChatStandIn::start(Vendor::Teams).await;
    let (t, _f) = teams(&stand_in);
    let first = t.send(&first_verdict(), None).await.unwrap().state;
    let mut changed = first_verdict();
    changed.changed = true;
    changed.at_ms += 600_000;
    let after_update = t.send(&changed, first.as_ref()).await.unwrap().state;
    // The state keeps the first post's time, not the update's.
    assert_eq!(after_update, first);
    let mut resolved = notice(NoticeKind::Resolved, None);
    resolved.at_ms += 1_200_000;
    t.send(&resolved, after_update.as_ref()).await.unwrap();
    let posts = stand_in.posts();
    assert_eq!(posts.len(), 3);
    // 1_795_000_000_000 ms is 2026-11-18T11:06:40Z (40_000 s into the day: 11 h 6 min 40 s).
    assert_eq!(card_texts(&posts[1].body)[0], "**Changed:** replaces the verdict posted at 11:06 UTC");
    assert_eq!(card_texts(&posts[2].body)[0], "**Resolved:** the verdict posted at 11:06 UTC");
}

#[tokio::test]
async fn a_revision_and_the_notices_of_one_alert_group_among_several_are_not_posted() {
    // A Workflows webhook can neither edit the verdict's card nor reply under it: a
    // revision (same culprit, other confidence or numbers) would be a second card of the
    // same verdict, a joined or resolved group a card per group. None is wanted.
    let stand_in = ChatStandIn::start(Vendor::Teams).await;
    let (t, _f) = teams(&stand_in);
    let mut revision = first_verdict();
    revision.episode.revision = 1;
    assert!(revision.is_revision());
    assert!(!t.wants(&revision));
    assert!(!t.wants(&notice(NoticeKind::Joined, None)) && !t.wants(&notice(NoticeKind::GroupResolved, None)));
    // What it does take: the first post, a changed verdict, the resolution, a failure.
    let mut changed = revision.clone();
    changed.changed = true;
    for n in [first_verdict(), changed, notice(NoticeKind::Resolved, None), notice(NoticeKind::CouldNotDiagnose, None)]
    {
        assert!(t.wants(&n), "{:?} changed {}", n.kind, n.changed);
    }
    assert!(stand_in.posts().is_empty());
}

#[tokio::test]
async fn a_refused_card_is_final_and_names_the_code_and_the_key_to_fix() {
    let stand_in = ChatStandIn::start(Vendor::Teams).await;
    let (t, _f) = teams(&stand_in);
    stand_in.then(Reply::Answer {
        status: 400,
        retry_after: None,
        body: logic_apps_error("TriggerInputSchemaMismatch", &format!("bad input at sig={TEAMS_SIG}")),
    });
    let e = t.send(&first_verdict(), None).await.unwrap_err();
    assert!(!e.retryable);
    assert_eq!(e.reason, FailureReason::Refused);
    assert!(e.message.contains("HTTP 400") && e.message.contains("TriggerInputSchemaMismatch"), "{e}");
    assert!(e.hint.as_deref().unwrap().contains("notify.teams (name \"payments\").webhook_url"), "{e:?}");
    assert_no_secret(&e);
}

#[tokio::test]
async fn a_deleted_flow_and_a_refused_signature_are_final_with_their_hints_and_no_secret() {
    let stand_in = ChatStandIn::start(Vendor::Teams).await;
    let (t, _f) = teams(&stand_in);
    stand_in.then(Reply::Answer { status: 404, retry_after: None, body: logic_apps_error("WorkflowNotFound", "gone") });
    let e = t.send(&first_verdict(), None).await.unwrap_err();
    assert!(!e.retryable && e.message.contains("WorkflowNotFound"), "{e}");
    assert!(e.hint.as_deref().unwrap().contains("deleted"), "{e:?}");
    assert_no_secret(&e);
    stand_in.then(Reply::Answer {
        status: 401,
        retry_after: None,
        body: logic_apps_error("DirectApiInvalidAuthorizationScheme", "sig"),
    });
    let e = t.send(&first_verdict(), None).await.unwrap_err();
    assert!(!e.retryable && e.hint.as_deref().unwrap().contains("signature"), "{e:?}");
    assert_no_secret(&e);
    let debug = format!("{t:?}");
    assert!(!debug.contains(TEAMS_SIG) && !debug.contains("/workflows/"), "{debug}");
}

#[tokio::test]
async fn a_rate_limit_is_retryable_after_the_wait_teams_gives() {
    let stand_in = ChatStandIn::start(Vendor::Teams).await;
    let (t, _f) = teams(&stand_in);
    stand_in.then(Reply::Answer {
        status: 429,
        retry_after: Some(7),
        body: logic_apps_error("TooManyRequests", "slow down"),
    });
    let e = t.send(&first_verdict(), None).await.unwrap_err();
    assert!(e.retryable);
    assert_eq!(e.reason, FailureReason::RateLimited);
    assert_eq!(e.retry_after, Some(Duration::from_secs(7)));
    assert_no_secret(&e);
}

#[tokio::test]
async fn a_crash_mid_send_says_maybe_delivered_and_the_repeat_is_marked() {
    let stand_in = ChatStandIn::start(Vendor::Teams).await;
    let (t, _f) = teams(&stand_in);
    stand_in.then(Reply::Drop);
    let e = t.send(&first_verdict(), None).await.unwrap_err();
    assert!(e.retryable && e.reason.maybe_delivered(), "{e:?}");
    assert_no_secret(&e);
    // Teams cannot tell whether it arrived: the delivery loop sends it again marked.
    assert_eq!(t.already_sent(&first_verdict(), None).await.unwrap(), None);
    let again = Notice { maybe_repeat: true, ..first_verdict() };
    t.send(&again, None).await.unwrap();
    let posts = stand_in.posts();
    assert_eq!(posts.len(), 2, "the dropped post arrived, and the repeat");
    assert!(!card_texts(&posts[0].body).iter().any(|t| t == REPEAT_MARK));
    assert_eq!(card_texts(&posts[1].body)[0], REPEAT_MARK, "the second copy is marked");
}

#[tokio::test]
async fn a_200_vertex_verdict_is_cut_below_the_size_teams_refuses_and_gets_through() {
    let stand_in = ChatStandIn::start(Vendor::Teams).await;
    let (t, _f) = teams(&stand_in);
    // The stand-in refuses what Teams refuses: a body over 28 KB.
    let big = json!({ "type": "message", "attachments": [{ "contentType": "application/vnd.microsoft.card.adaptive",
        "content": { "type": "AdaptiveCard", "body": [{ "type": "TextBlock", "text": "x".repeat(TEAMS_MAX_BYTES) }] } }] });
    let status = reqwest::Client::new().post(stand_in.webhook_url()).json(&big).send().await.unwrap().status();
    assert_eq!(status.as_u16(), 413);
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
    v.cause = "A long cause. ".repeat(2000);
    t.send(&notice(NoticeKind::Verdict, Some(v)), None).await.unwrap();
    let posts = stand_in.posts();
    let last = posts.last().unwrap();
    assert!(last.bytes <= TEAMS_MAX_BYTES, "{} bytes", last.bytes);
    assert!(last.body.to_string().contains("more vertices on the verdict page"));
}

#[tokio::test]
async fn the_probe_reaches_the_host_without_posting_or_sending_the_signature() {
    let stand_in = ChatStandIn::start(Vendor::Teams).await;
    let (t, _f) = teams(&stand_in);
    let said = t.probe().await.unwrap();
    assert!(said.contains("not verified") && said.contains("nothing was posted"), "{said}");
    let received = stand_in.received();
    assert_eq!(received.len(), 1);
    assert_eq!((received[0].method.as_str(), received[0].target.as_str()), ("HEAD", "/"));
    assert!(stand_in.posts().is_empty());
}

#[tokio::test]
async fn an_incident_is_one_card_its_jobs_are_folded_and_later_jobs_come_in_a_digest_a_minute_at_most() {
    use culprit::notify::FailureReason;
    let stand_in = ChatStandIn::start(Vendor::Teams).await;
    let (t, _f) = teams(&stand_in);
    let summary = |jobs| support::incident::summary(&first_verdict(), jobs);
    let state = t.send(&summary(5), None).await.unwrap().state;
    assert_eq!(state.as_ref().unwrap()["incident_shown"], 5);
    // Two more jobs at once: too soon after the card, so deferred to a minute after it.
    let e = t.send(&summary(7), state.as_ref()).await.unwrap_err();
    assert_eq!(e.reason, FailureReason::Deferred);
    assert!(e.retry_after.unwrap() > std::time::Duration::from_secs(55), "{e:?}");
    // The jobs counted in it are folded: nothing posted, nor for their resolution.
    let mut counted = first_verdict();
    counted.incident = Some(support::incident::tag());
    counted.incident_parent = Some(serde_json::json!({ "incident_shown": 5 }));
    let job = t.send(&counted, None).await.unwrap().state;
    t.send(&notice(NoticeKind::Resolved, None), job.as_ref()).await.unwrap();
    assert_eq!(stand_in.posts().len(), 1, "the card alone");
    // A minute after the card: the digest names the two new jobs alone.
    let mut earlier = state.clone().unwrap();
    earlier["incident_posted_ms"] = json!(jiff::Timestamp::now().as_millisecond() - 61_000);
    let after = t.send(&summary(7), Some(&earlier)).await.unwrap().state.unwrap();
    assert_eq!(after["incident_shown"], 7);
    let posts = stand_in.posts();
    assert_eq!(posts.len(), 2);
    let first = card_texts(&posts[0].body).join("\n");
    assert!(first.contains("5 jobs held back by their sinks writing to Elasticsearch"), "{first}");
    assert!(first.contains("**job-1**, **job-2**, **job-3**, **job-4**, **job-5**"), "{first}");
    let digest = card_texts(&posts[1].body).join("\n");
    assert!(digest.contains("2 more jobs held back by") && digest.contains("(7 in all)"), "{digest}");
    assert!(digest.contains("**job-6**, **job-7**") && !digest.contains("job-5"), "{digest}");
    // 120 more a minute later: every one named, 50 a card (7..57, 57..107, 107..127).
    let mut earlier = after.clone();
    earlier["incident_posted_ms"] = json!(jiff::Timestamp::now().as_millisecond() - 61_000);
    t.send(&summary(127), Some(&earlier)).await.unwrap();
    let posts = stand_in.posts();
    assert_eq!(posts.len(), 5);
    let named: Vec<String> = posts[2..].iter().map(|p| card_texts(&p.body).join("\n")).collect();
    assert!(named[0].contains("50 more jobs held back by") && named[2].contains("20 more jobs"), "{named:?}");
    for j in 8..=127 {
        let job = format!("**job-{j}**");
        assert_eq!(named.iter().filter(|t| t.contains(&format!("{job},")) || t.ends_with(&job)).count(), 1, "{job}");
    }
}
