//! Many jobs at once whose culprits share a cause, through the service against a real
//! Prometheus and capture servers for Slack and PagerDuty: one summary in the channel
//! naming the cause, the jobs counted after it in its thread, the jobs that do not fit
//! named apart, the shared cause in each PagerDuty event, and `GET /api/v1/incidents`.

mod support;

use std::time::Duration;

use culprit::config::Config;
use culprit::samples::synthetic::SyntheticJob;
use culprit::service::server::Application;
use support::capture::Capture;

/// A two-vertex synthetic job (its sink is the culprit), its sink renamed `sink` as the
/// reporter writes it in labels; or the three-vertex one (a map is the culprit).
fn job(n: u32, end_ms: i64, sink: Option<&str>) -> (SyntheticJob, String) {
    let j = SyntheticJob {
        vertices: if sink.is_some() { 2 } else { 3 },
        subtasks: 2,
        samples: 24,
        start_ms: end_ms - 23 * 5_000,
        job: n,
    };
    let text = String::from_utf8(j.write_openmetrics(Vec::new()).unwrap()).unwrap();
    let filtered = |s: &str| culprit::model::graph::sanitize_label_value(s);
    let text = match sink {
        Some(name) => text.replace(&filtered("Sink: store"), &filtered(name)),
        None => text,
    };
    (j, text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn six_jobs_whose_sinks_write_to_one_system_get_one_summary_and_their_verdicts_in_its_thread() {
    support::init_logs();
    let now = jiff::Timestamp::now().as_millisecond();
    // Six jobs whose sinks write to Elasticsearch `logs-*`, two whose culprit is a map.
    let mut jobs: Vec<(SyntheticJob, String)> =
        (1..=6).map(|n| job(n, now - 1_000, Some("Sink: Elasticsearch logs-*"))).collect();
    jobs.extend((7..=8).map(|n| job(n, now - 1_000, None)));
    let prom =
        support::prometheus_with_texts(&jobs.iter().map(|j| j.1.clone()).collect::<Vec<_>>(), support::free_port());
    let (slack, pagerduty) = (Capture::start().await, Capture::start().await);
    let tmp = tempfile::tempdir().unwrap();
    // One diagnosis at a time: the order the verdicts are counted in is the order they
    // are stored in, whatever the machine's speed.
    let extra = "[service]\ncoalesce = \"1s\"\nconcurrency = 1\n";
    let text = support::culprit_config(tmp.path(), &prom.url, &slack.url, &pagerduty.url, extra);
    let app = Application::build(Config::from_toml(&text, "incidents.toml").unwrap()).await.unwrap();

    let client = reqwest::Client::new();
    for (j, _) in &jobs {
        let body = support::webhook_for(&j.job_id(), &j.job_name(), &["a".to_string()]);
        let status =
            client.post(format!("{}/webhook/alertmanager", app.url())).json(&body).send().await.unwrap().status();
        assert_eq!(status, reqwest::StatusCode::ACCEPTED);
    }
    support::wait_for("8 PagerDuty events", Duration::from_secs(90), || pagerduty.pagerduty_events().len() >= 8).await;
    support::drained(&app).await;

    // One summary, top-level, with its own metadata type.
    let top: Vec<serde_json::Value> = slack.slack_messages();
    let summaries: Vec<&serde_json::Value> =
        top.iter().filter(|m| m["metadata"]["event_type"] == "culprit_incident").collect();
    assert_eq!(summaries.len(), 1, "{top:#?}");
    // The first four sink jobs were posted before there was an incident (min_jobs = 5):
    // 4 + the 2 maps + the summary = 7 top-level messages; the fifth and sixth sink
    // jobs' verdicts are replies in the summary's thread.
    assert_eq!(top.len(), 7, "{top:#?}");
    let posts = slack.on("/api/chat.postMessage");
    let summary_post = posts.iter().find(|p| p.body["metadata"]["event_type"] == "culprit_incident").unwrap();
    // The summary's ts: the capture numbers messages in order from 1795000001.
    let position = posts.iter().position(|p| p.body["metadata"]["event_type"] == "culprit_incident").unwrap();
    let summary_ts = format!("{}.000100", 1_795_000_001 + position);
    let updates = slack.on("/api/chat.update");
    let summary_updates: Vec<_> =
        updates.iter().filter(|u| u.body["metadata"]["event_type"] == "culprit_incident").collect();
    let in_thread: Vec<_> = posts
        .iter()
        .filter(|p| p.body["thread_ts"] == summary_ts.as_str() && p.body["metadata"]["event_type"] == "culprit_verdict")
        .collect();
    let shape: Vec<(String, String)> = posts
        .iter()
        .map(|p| {
            (p.body["thread_ts"].as_str().unwrap_or("-").to_string(), p.body["metadata"]["event_type"].to_string())
        })
        .collect();
    assert_eq!(in_thread.len(), 2, "the fifth and sixth jobs' verdicts (summary {summary_ts}): {shape:?}");
    // Posted when the fifth was counted (it shows five, or six when the sixth was stored
    // before the post went out), then updated in place: it ends showing six, and the maps
    // as not part of it.
    let first = serde_json::to_string(&summary_post.body["blocks"]).unwrap();
    assert!(first.contains("jobs held back by their sinks writing to Elasticsearch `logs`"), "{first}");
    let last = summary_updates.last().map_or(summary_post.body["blocks"].clone(), |u| u.body["blocks"].clone());
    let last = serde_json::to_string(&last).unwrap();
    assert!(last.contains("6 jobs held back by their sinks writing to Elasticsearch `logs`"), "{last}");
    assert!(last.contains("Not part of it"), "{last}");

    // Every job has its own PagerDuty event; the ones counted in the incident say so.
    let events = pagerduty.pagerduty_events();
    assert_eq!(events.len(), 8);
    let shared: Vec<_> = events.iter().filter(|e| e["payload"]["custom_details"]["shared_cause"].is_object()).collect();
    assert_eq!(shared.len(), 2, "the fifth and sixth: {events:#?}");
    assert!(
        shared[0]["payload"]["summary"].as_str().unwrap().contains("held back by their sinks writing to Elasticsearch")
    );

    // The API lists the incident with its six jobs and the two that do not fit.
    let listed: serde_json::Value =
        reqwest::get(format!("{}/api/v1/incidents", app.url())).await.unwrap().json().await.unwrap();
    let incidents = listed["incidents"].as_array().unwrap();
    assert_eq!(incidents.len(), 1, "{listed:#}");
    assert_eq!(incidents[0]["jobs"], 6);
    assert_eq!(incidents[0]["others"].as_array().unwrap().len(), 2);
    assert_eq!(incidents[0]["cause"]["kind"], "system");
    assert_eq!(incidents[0]["headline"], "6 jobs held back by their sinks writing to Elasticsearch `logs`");
    app.stop().await;
}

fn notice(kind: culprit::model::notice::NoticeKind, thread: &str) -> culprit::model::notice::Notice {
    let capture = culprit::samples::captures::CAPTURES.iter().find(|c| c.name == "slow-sink").unwrap();
    let verdict = culprit::samples::captures::verdict(capture).unwrap();
    culprit::model::notice::Notice {
        kind,
        group_key: thread.into(),
        labels: Default::default(),
        job: verdict.job.clone(),
        verdict: Some(verdict),
        verdict_id: Some(7),
        verdict_url: None,
        reason: None,
        firing: true,
        changed: false,
        idempotency_key: format!("{thread}-{kind:?}"),
        at_ms: 1_795_000_000_000,
        links: Default::default(),
        episode: culprit::model::notice::NoticeEpisode { thread: thread.into(), ..Default::default() },
        maybe_repeat: false,
        incident: None,
        incident_view: None,
        incident_parent: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slack_posts_a_summary_once_updates_it_only_when_it_changed_and_threads_the_jobs_under_it() {
    use culprit::config::{SecretSource, SlackConfig, SlackMode};
    use culprit::model::notice::{NoticeIncident, NoticeKind};
    let slack_server = Capture::start().await;
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("token"), "xoxb-test").unwrap();
    let slack = culprit::notify::slack::Slack::new(&SlackConfig {
        name: None,
        mode: SlackMode::WebApi,
        token: Some(SecretSource::File(tmp.path().join("token"))),
        channel: Some("C0NCALL".into()),
        webhook_url: None,
        api_url: format!("{}/api", slack_server.url),
        image: culprit::notify::slack::SlackImage::Off,
        signing_secret: None,
        alertmanager_url: None,
        alertmanager_auth: None,
    })
    .unwrap();
    let tag = NoticeIncident {
        id: "1-abcd".into(),
        thread: "incident:1-abcd".into(),
        cause: support::incident::incident(5).cause,
        jobs: 5,
        summary_here: true,
    };
    let summary = |jobs: i64| {
        let mut n = notice(NoticeKind::Incident, "incident:1-abcd");
        n.verdict = None;
        n.incident = Some(tag.clone());
        n.incident_view = Some(support::incident::incident(jobs));
        n
    };
    // First: posted, with its own metadata type.
    let sent = slack.send(&summary(5), None).await.unwrap();
    let state = sent.state.expect("the summary's message");
    assert_eq!(slack_server.on("/api/chat.postMessage").len(), 1);
    let post = &slack_server.on("/api/chat.postMessage")[0].body;
    assert_eq!(post["metadata"]["event_type"], "culprit_incident");
    assert!(post.get("thread_ts").is_none());
    // The same five again: nothing sent; six: updated in place.
    let again = slack.send(&summary(5), Some(&state)).await.unwrap();
    assert_eq!(again.state.as_ref(), Some(&state));
    assert!(slack_server.on("/api/chat.update").is_empty());
    let six = slack.send(&summary(6), Some(&state)).await.unwrap().state.unwrap();
    let updates = slack_server.on("/api/chat.update");
    assert_eq!(updates.len(), 1);
    assert_eq!(updates[0].body["ts"], state["ts"]);
    assert!(updates[0].body["blocks"].to_string().contains("6 jobs held back"));
    assert_eq!(six["ts"], state["ts"]);

    // A job counted in it: its verdict is a reply in the summary's thread, and its
    // resolution a reply in that same thread.
    let mut verdict = notice(NoticeKind::Verdict, "job-6");
    verdict.incident = Some(tag.clone());
    verdict.incident_parent = Some(state.clone());
    let job_state = slack.send(&verdict, None).await.unwrap().state.unwrap();
    let posts = slack_server.on("/api/chat.postMessage");
    assert_eq!(posts.len(), 2, "the reply alone, no details reply");
    assert_eq!(posts[1].body["thread_ts"], state["ts"]);
    assert_eq!(job_state["thread_ts"], state["ts"]);
    // After a crash mid-send, both are found where they went, never posted twice.
    let found = slack.already_sent(&summary(6), None).await.unwrap().expect("the summary is found");
    assert_eq!(found.state.unwrap()["ts"], state["ts"]);
    let found = slack.already_sent(&verdict, None).await.unwrap().expect("the reply is found in the thread");
    assert_eq!(found.state.as_ref().unwrap()["ts"], job_state["ts"]);
    assert_eq!(found.state.unwrap()["thread_ts"], state["ts"]);
    let resolved = notice(NoticeKind::Resolved, "job-6");
    slack.send(&resolved, Some(&job_state)).await.unwrap();
    let posts = slack_server.on("/api/chat.postMessage");
    assert_eq!(posts[2].body["thread_ts"], state["ts"], "replies go to the parent's thread, never under a reply");
}
