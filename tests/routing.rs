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

/// The webhook of `job` with its alerts resolved (as Alertmanager sends it when the group
/// stops firing), with these common labels.
fn resolved(mut body: serde_json::Value) -> serde_json::Value {
    body["status"] = "resolved".into();
    body["alerts"][0]["status"] = "resolved".into();
    body["alerts"][0]["endsAt"] = "2026-11-29T10:45:53.562Z".into();
    body
}

async fn post(app: &Application, body: &serde_json::Value) {
    let status = reqwest::Client::new()
        .post(format!("{}/webhook/alertmanager", app.url()))
        .json(body)
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 202);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_verdict_a_route_holds_back_leaves_its_destination_untold_of_its_resolution_too() {
    let now = jiff::Timestamp::now().as_millisecond();
    let jobs = support::synthetic_jobs(1, now - 1_000);
    let prom = support::prometheus_with_texts(&[jobs[0].1.clone()], support::free_port());
    let (slack, pagerduty, hooks) = (Capture::start().await, Capture::start().await, Capture::start().await);
    let tmp = tempfile::tempdir().unwrap();
    // The pager-like webhook takes verdicts of medium confidence and above; the synthetic
    // verdict is of low confidence.
    let extra = format!(
        "[[notify.webhook]]\nname = \"pager\"\nurl = \"{}/pager\"\n[route]\ndestinations = [\"webhook:pager\", \"slack\"]\n\
         [[route.routes]]\nmatchers = ['job_id =~ \".+\"']\ndestinations = [\"webhook:pager\"]\nmin_confidence = \"medium\"\ncontinue = true\n\
         [[route.routes]]\ndestinations = [\"slack\"]\n[service]\ncoalesce = \"100ms\"\n",
        hooks.url
    );
    let text = support::culprit_config(tmp.path(), &prom.url, &slack.url, &pagerduty.url, &extra);
    let app = Application::build(Config::from_toml(&text, "held.toml").unwrap()).await.unwrap();
    let (job, _) = &jobs[0];
    let firing = support::webhook_for(&job.job_id(), &job.job_name(), &["a".into()]);
    post(&app, &firing).await;
    support::wait_for("the Slack verdict", Duration::from_secs(60), || !slack.slack_messages().is_empty()).await;
    support::drained(&app).await;
    assert!(hooks.on("/pager").is_empty(), "a low-confidence verdict held back: {:?}", hooks.on("/pager"));
    // The group resolves: Slack, which showed the verdict, is told; the pager, shown
    // nothing, is not told of the resolution of a verdict it never got.
    post(&app, &resolved(firing)).await;
    support::wait_for("the Slack resolution", Duration::from_secs(60), || slack.on("/api/chat.postMessage").len() >= 2)
        .await;
    support::drained(&app).await;
    assert!(hooks.on("/pager").is_empty(), "{:?}", hooks.on("/pager").iter().map(|r| &r.body).collect::<Vec<_>>());
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_resolution_whose_labels_no_longer_match_the_route_still_reaches_the_destination_that_showed_the_verdict() {
    let now = jiff::Timestamp::now().as_millisecond();
    let jobs = support::synthetic_jobs(1, now - 1_000);
    let prom = support::prometheus_with_texts(&[jobs[0].1.clone()], support::free_port());
    let (slack, pagerduty, hooks) = (Capture::start().await, Capture::start().await, Capture::start().await);
    let tmp = tempfile::tempdir().unwrap();
    let extra = format!(
        "[[notify.webhook]]\nname = \"payments\"\nurl = \"{}/payments\"\n[route]\ndestinations = [\"slack\"]\n\
         [[route.routes]]\nmatchers = ['team = payments']\ndestinations = [\"webhook:payments\"]\n\
         [service]\ncoalesce = \"100ms\"\n",
        hooks.url
    );
    let text = support::culprit_config(tmp.path(), &prom.url, &slack.url, &pagerduty.url, &extra);
    let app = Application::build(Config::from_toml(&text, "moved.toml").unwrap()).await.unwrap();
    let (job, _) = &jobs[0];
    let mut firing = support::webhook_for(&job.job_id(), &job.job_name(), &["a".into()]);
    firing["commonLabels"]["team"] = "payments".into();
    firing["alerts"][0]["labels"]["team"] = "payments".into();
    post(&app, &firing).await;
    support::wait_for("the payments verdict", Duration::from_secs(60), || !hooks.on("/payments").is_empty()).await;
    support::drained(&app).await;
    // Resolved, with common labels that no longer carry `team` (another alert of the
    // group did not have it): the route now picks Slack, but the episode is payments'.
    let mut end = resolved(firing);
    end["commonLabels"].as_object_mut().unwrap().remove("team");
    post(&app, &end).await;
    support::wait_for("the payments resolution", Duration::from_secs(60), || hooks.on("/payments").len() >= 2).await;
    support::drained(&app).await;
    let kinds: Vec<String> =
        hooks.on("/payments").iter().map(|r| r.body["kind"].as_str().unwrap_or("verdict").to_string()).collect();
    assert_eq!(kinds, ["verdict", "resolved"]);
    assert!(slack.slack_messages().is_empty(), "Slack was shown nothing: {:?}", slack.slack_messages());
    app.stop().await;
}
