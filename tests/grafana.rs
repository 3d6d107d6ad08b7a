//! `[[notify.grafana]]` against a local stand-in of Grafana's annotations HTTP API
//! (`tests/support/grafana.rs`; a real Grafana is not in Debian's archive): it keeps
//! annotations as Grafana does, answers `POST /api/annotations` with `{"id", "message"}`,
//! `PATCH /api/annotations/{id}`, `GET /api/annotations?tags=…&limit=…` and `GET
//! /api/health`, checks the bearer token (401), answers 404 for an unknown dashboard UID,
//! and can be told to rate-limit (429 with `Retry-After`) or to take a request and drop the
//! connection without answering.

mod support;

use std::time::Duration;

use culprit::config::SecretSource;
use culprit::model::notice::{Notice, NoticeEpisode, NoticeKind};
use culprit::notify::FailureReason;
use culprit::notify::grafana::{Grafana, GrafanaConfig};
use serde_json::json;
use support::grafana::{TOKEN, start};

fn grafana(url: &str, dir: &std::path::Path, token: &str, dashboard: Option<&str>) -> Grafana {
    let p = dir.join("token");
    std::fs::write(&p, token).unwrap();
    Grafana::new(&GrafanaConfig {
        name: "ops".into(),
        url: url.into(),
        token: SecretSource::File(p),
        dashboard_uid: dashboard.map(str::to_string),
        tags: vec!["flink".into()],
    })
    .unwrap()
}

fn notice(kind: NoticeKind, key: &str, at_ms: i64) -> Notice {
    let capture = culprit::samples::captures::CAPTURES.iter().find(|c| c.name == "slow-sink").unwrap();
    let verdict = culprit::samples::captures::verdict(capture).unwrap();
    Notice {
        links: Default::default(),
        kind,
        group_key: "{}:{alertname=\"FlinkJobBackpressured\"}".into(),
        labels: Default::default(),
        job: verdict.job.clone(),
        verdict: (kind == NoticeKind::Verdict).then_some(verdict),
        verdict_id: Some(1),
        verdict_url: Some("https://culprit.example.com/api/v1/verdicts/1".into()),
        reason: None,
        firing: kind != NoticeKind::Resolved,
        changed: false,
        idempotency_key: key.into(),
        at_ms,
        episode: NoticeEpisode {
            thread: "job".into(),
            groups: vec![],
            revision: 0,
            verdict_ref: "grafana:ops:1".into(),
        },
        maybe_repeat: false,
        incident: None,
        incident_view: None,
        incident_parent: None,
    }
}

#[tokio::test]
async fn the_first_post_creates_a_point_an_update_patches_its_text_and_the_resolution_closes_the_region() {
    let (stand, url) = start().await;
    let dir = tempfile::tempdir().unwrap();
    let g = grafana(&url, dir.path(), TOKEN, Some("flink-jobs"));
    let first = g.send(&notice(NoticeKind::Verdict, "grafana:ops:1", 1_000), None).await.unwrap();
    assert_eq!(first.state, Some(json!({"id": 1})));
    let mut update = notice(NoticeKind::Verdict, "grafana:ops:2", 2_000);
    update.changed = true;
    let second = g.send(&update, first.state.as_ref()).await.unwrap();
    assert_eq!(second.state, first.state, "the same annotation");
    g.send(&notice(NoticeKind::Resolved, "grafana:ops:3", 5_000), second.state.as_ref()).await.unwrap();

    let i = stand.0.lock().unwrap();
    assert_eq!(i.requests, ["POST", "PATCH 1", "PATCH 1"]);
    assert_eq!(i.annotations.len(), 1);
    let a = &i.annotations[0];
    // The region: from the first verdict (1000 ms) to the resolution (5000 ms).
    assert_eq!((a["time"].as_i64(), a["timeEnd"].as_i64()), (Some(1_000), Some(5_000)));
    assert_eq!(a["dashboardUID"], "flink-jobs");
    let tags: Vec<&str> = a["tags"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    assert_eq!(tags[..4], ["flink", "culprit", "bp-lab-slow-sink", "sink"]);
    assert!(tags[4].starts_with("culprit-key:"));
    assert!(a["text"].as_str().unwrap().starts_with("bp-lab-slow-sink: changed: "), "{}", a["text"]);
}

#[tokio::test]
async fn a_revision_patches_the_annotations_text_in_place_with_its_confidence() {
    // The same culprit diagnosed again with a higher confidence: the annotation shows it,
    // no second annotation.
    let (stand, url) = start().await;
    let dir = tempfile::tempdir().unwrap();
    let g = grafana(&url, dir.path(), TOKEN, None);
    let first = notice(NoticeKind::Verdict, "grafana:ops:1", 1_000);
    let shown = first.verdict.as_ref().unwrap().confidence;
    let sent = g.send(&first, None).await.unwrap();
    let mut revision = notice(NoticeKind::Verdict, "grafana:ops:1:r1", 2_000);
    revision.episode.revision = 1;
    let higher = if shown == culprit::model::verdict::Confidence::High {
        culprit::model::verdict::Confidence::Medium
    } else {
        culprit::model::verdict::Confidence::High
    };
    revision.verdict.as_mut().unwrap().confidence = higher;
    assert!(revision.is_revision() && g.wants(&revision));
    assert_eq!(g.send(&revision, sent.state.as_ref()).await.unwrap().state, sent.state);
    let i = stand.0.lock().unwrap();
    assert_eq!(i.requests, ["POST", "PATCH 1"]);
    assert_eq!(i.annotations.len(), 1);
    let text = i.annotations[0]["text"].as_str().unwrap();
    assert!(text.contains(&format!("(confidence {})", higher.as_str())), "{text}");
    assert!(!text.contains(&format!("(confidence {})", shown.as_str())), "{text}");
}

#[tokio::test]
async fn an_unknown_dashboard_and_a_refused_token_are_final_with_hints() {
    let (_stand, url) = start().await;
    let dir = tempfile::tempdir().unwrap();
    let e = grafana(&url, dir.path(), TOKEN, Some("nope"))
        .send(&notice(NoticeKind::Verdict, "k", 1_000), None)
        .await
        .unwrap_err();
    assert!(!e.retryable && e.reason == FailureReason::Refused, "{e:?}");
    assert!(e.hint.as_deref().unwrap().contains("no dashboard with the dashboard_uid"), "{e:?}");
    let wrong = grafana(&url, dir.path(), "glsa_wrong", None);
    let e = wrong.send(&notice(NoticeKind::Verdict, "k", 1_000), None).await.unwrap_err();
    assert!(!e.retryable && e.message.contains("401"), "{e:?}");
    assert!(e.hint.as_deref().unwrap().contains("does not accept the token"), "{e:?}");
    assert!(!e.message.contains("glsa_wrong"));
    assert!(wrong.probe().await.is_err(), "the probe reads with the token");
}

#[tokio::test]
async fn a_rate_limit_is_retryable_after_grafanas_retry_after() {
    let (stand, url) = start().await;
    let dir = tempfile::tempdir().unwrap();
    let g = grafana(&url, dir.path(), TOKEN, None);
    stand.0.lock().unwrap().limit_next = true;
    let e = g.send(&notice(NoticeKind::Verdict, "k", 1_000), None).await.unwrap_err();
    assert!(e.retryable && e.reason == FailureReason::RateLimited, "{e:?}");
    assert_eq!(e.retry_after, Some(Duration::from_secs(3)));
    g.send(&notice(NoticeKind::Verdict, "k", 1_000), None).await.unwrap();
    assert_eq!(stand.0.lock().unwrap().annotations.len(), 1);
}

#[tokio::test]
async fn a_connection_dropped_after_the_create_is_maybe_delivered_and_already_sent_finds_the_annotation() {
    let (stand, url) = start().await;
    let dir = tempfile::tempdir().unwrap();
    let g = grafana(&url, dir.path(), TOKEN, None);
    let n = notice(NoticeKind::Verdict, "grafana:ops:1", 1_000);
    stand.0.lock().unwrap().crash_next = true;
    let e = g.send(&n, None).await.unwrap_err();
    assert!(e.retryable && e.reason.maybe_delivered(), "{e:?}");
    // The delivery loop asks first: the annotation is found by its idempotency tag.
    let found = g.already_sent(&n, None).await.unwrap().expect("found by its culprit-key tag");
    assert_eq!(found.state, Some(json!({"id": 1})));
    // Another notice's key finds nothing.
    assert_eq!(g.already_sent(&notice(NoticeKind::Verdict, "other", 1_000), None).await.unwrap(), None);
    assert_eq!(stand.0.lock().unwrap().annotations.len(), 1, "no second annotation");
}

#[tokio::test]
async fn the_probe_reads_health_and_annotations_and_writes_nothing() {
    let (stand, url) = start().await;
    let dir = tempfile::tempdir().unwrap();
    let ok = grafana(&url, dir.path(), TOKEN, None).probe().await.unwrap();
    assert!(ok.contains("nothing was written"), "{ok}");
    let i = stand.0.lock().unwrap();
    assert_eq!(i.requests, ["GET"]);
    assert!(i.annotations.is_empty());
}

#[tokio::test]
async fn a_resolution_without_an_annotation_sends_nothing() {
    let (stand, url) = start().await;
    let dir = tempfile::tempdir().unwrap();
    let g = grafana(&url, dir.path(), TOKEN, None);
    assert!(!g.wants(&Notice { kind: NoticeKind::CouldNotDiagnose, ..notice(NoticeKind::Resolved, "k", 1) }));
    let sent = g.send(&notice(NoticeKind::Resolved, "k", 1_000), None).await.unwrap();
    assert_eq!(sent.state, None);
    assert!(stand.0.lock().unwrap().requests.is_empty());
}
