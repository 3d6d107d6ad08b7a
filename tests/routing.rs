//! Routing by team: the service in process against a real Prometheus, alerts of three
//! teams (and one of nobody's) sent to three different sets of destinations by `[route]`.

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use culprit::config::Config;
use culprit::service::server::Application;
use support::capture::Capture;

/// The route tree: the platform channel (Slack) by default; payments to its webhook and
/// the pager; fraud to its webhook, and to the pager only at confidence medium or above;
/// search to its webhook and, going on, to the
/// platform channel too.
const ROUTES: &str = r#"
[[notify.webhook]]
name = "payments"
url = "{hooks}/payments"
[[notify.webhook]]
name = "fraud"
url = "{hooks}/fraud"
[[notify.webhook]]
name = "search"
url = "{hooks}/search"

[route]
destinations = ["slack"]
[[route.routes]]
matchers = ['team = "payments"']
destinations = ["webhook:payments", "pagerduty"]
[[route.routes]]
matchers = ['team = fraud', 'namespace =~ "fraud-.*"']
destinations = ["webhook:fraud"]
continue = true
[[route.routes]]
matchers = ['team = fraud']
destinations = ["pagerduty"]
min_confidence = "medium"
[[route.routes]]
matchers = ['team = "search"']
destinations = ["webhook:search"]
continue = true
[[route.routes]]
matchers = ['team =~ "search|ads"']
destinations = ["slack"]
"#;

/// The job ids in the bodies a capture server received at `path`.
fn jobs_at(capture: &Capture, path: &str) -> BTreeSet<String> {
    capture
        .on(path)
        .iter()
        .filter_map(|r| r.body["job"]["id"].as_str().or(r.body["verdict"]["job"]["id"].as_str()).map(String::from))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn alerts_of_three_teams_reach_three_different_sets_of_destinations_and_nobodys_the_default() {
    support::init_logs();
    let now = jiff::Timestamp::now().as_millisecond();
    let jobs = support::synthetic_jobs(4, now - 1_000);
    let prom =
        support::prometheus_with_texts(&jobs.iter().map(|j| j.1.clone()).collect::<Vec<_>>(), support::free_port());
    let (slack, pagerduty, hooks) = (Capture::start().await, Capture::start().await, Capture::start().await);
    let tmp = tempfile::tempdir().unwrap();
    let extra = format!("{}\n[service]\ncoalesce = \"100ms\"\n", ROUTES.replace("{hooks}", &hooks.url));
    let text = support::culprit_config(tmp.path(), &prom.url, &slack.url, &pagerduty.url, &extra);
    let app = Application::build(Config::from_toml(&text, "routes.toml").unwrap()).await.unwrap();

    // Job 1 payments, job 2 fraud (in namespace fraud-eu), job 3 search, job 4 nobody's.
    let teams = [Some(("payments", "pay")), Some(("fraud", "fraud-eu")), Some(("search", "search")), None];
    for ((job, _), team) in jobs.iter().zip(teams) {
        let mut body = support::webhook_for(&job.job_id(), &job.job_name(), &["a".into()]);
        if let Some((team, namespace)) = team {
            for path in ["/commonLabels", "/alerts/0/labels"] {
                let labels = body.pointer_mut(path).unwrap();
                labels["team"] = team.into();
                labels["namespace"] = namespace.into();
            }
        }
        let status = reqwest::Client::new()
            .post(format!("{}/webhook/alertmanager", app.url()))
            .json(&body)
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status, 202);
    }
    support::wait_for("four verdicts", Duration::from_secs(60), || {
        slack.slack_messages().len() >= 2 && hooks.all().len() >= 3 && !pagerduty.on("/v2/enqueue").is_empty()
    })
    .await;
    support::drained(&app).await;

    // Verdicts name the job by its metrics' (sanitized) name: compared by id.
    let name = |i: usize| jobs[i].0.job_id();
    let one = |i: usize| BTreeSet::from([name(i)]);
    assert_eq!(jobs_at(&hooks, "/payments"), one(0));
    assert_eq!(jobs_at(&hooks, "/fraud"), one(1));
    assert_eq!(jobs_at(&hooks, "/search"), one(2));
    let paged: BTreeSet<String> = pagerduty
        .pagerduty_events()
        .iter()
        .filter_map(|e| e["payload"]["custom_details"]["job"]["id"].as_str().map(String::from))
        .collect();
    // The synthetic verdicts are of low confidence: fraud's pager route (medium and
    // above) lets none through, payments' (no floor) does.
    assert_eq!(pagerduty.pagerduty_events().len(), 1, "only payments pages");
    assert!(paged.is_empty() || paged == one(0), "{paged:?}");
    // Slack: search (its route goes on to the next, which names Slack) and nobody's job
    // (the root's). Each message names its job in its metadata.
    let posted: BTreeSet<String> = slack
        .slack_messages()
        .iter()
        .map(|m| serde_json::to_string(m).unwrap())
        .map(|m| (0..4).map(name).filter(|n| m.contains(n.as_str())).collect::<Vec<_>>().join(","))
        .collect();
    assert_eq!(posted, BTreeSet::from([name(2), name(3)]), "{:?}", slack.slack_messages());
    app.stop().await;
}
