//! Only what is ours, and no noise: which alerts culprit diagnoses, what it says about the
//! others, how alert labels choose (or do not choose) a Flink cluster, configured job plans
//! however the job is named, and one job named one way in every notice. In process, with
//! a real Prometheus, a real SQLite store and capture servers for the destinations.
//!
//! Field reports 10 (`KubeJobFailed` with a `job_name` label) and 12 (`[flink.plans]` and
//! alerts that carry `job_id`) are inputs in `tests/data/reports/`.

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use culprit::config::Config;
use culprit::service::server::Application;
use serde_json::{Value, json};
use support::capture::Capture;

fn report(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/reports").join(name)
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

async fn post(app: &Application, body: &Value) -> (u16, Value) {
    let r = reqwest::Client::new().post(format!("{}/webhook/alertmanager", app.url())).json(body).send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

async fn metrics(app: &Application) -> String {
    reqwest::get(format!("{}/metrics", app.url())).await.unwrap().text().await.unwrap()
}

/// Every destination at capture servers: Slack (Web API), PagerDuty, Alertmanager, a
/// webhook.
struct Destinations {
    slack: Capture,
    pagerduty: Capture,
    other: Capture,
}

impl Destinations {
    async fn start() -> Destinations {
        Destinations { slack: Capture::start().await, pagerduty: Capture::start().await, other: Capture::start().await }
    }

    /// culprit's configuration posting to them, reading `prometheus`, storing in `dir`.
    fn config(&self, dir: &Path, prometheus: &str, extra: &str) -> Config {
        let extra = format!(
            "[notify.alertmanager]\nurl = \"{o}/am\"\n[[notify.webhook]]\nname = \"bot\"\nurl = \"{o}/hook\"\n{extra}",
            o = self.other.url
        );
        let text = support::culprit_config(dir, prometheus, &self.slack.url, &self.pagerduty.url, &extra);
        Config::from_toml(&text, "intake.toml").unwrap()
    }

    fn posts(&self) -> usize {
        self.slack.all().len() + self.pagerduty.all().len() + self.other.all().len()
    }
}

/// A Prometheus holding one synthetic job (its newest sample a second ago), culprit
/// coalescing for 100 ms on it, and the destinations it posts to; keep the server and the
/// directory alive for the test.
async fn with_one_job() -> (
    Vec<(culprit::samples::synthetic::SyntheticJob, String)>,
    support::Server,
    Destinations,
    tempfile::TempDir,
    Application,
) {
    let now = jiff::Timestamp::now().as_millisecond();
    let jobs = support::synthetic_jobs(1, now - 1_000);
    let prom = support::prometheus_with_texts(&[jobs[0].1.clone()], support::free_port());
    let d = Destinations::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let app = Application::build(d.config(tmp.path(), &prom.url, "[service]\ncoalesce = \"100ms\"\n")).await.unwrap();
    (jobs, prom, d, tmp, app)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn report_10_a_kube_job_failed_alert_with_a_job_name_label_is_answered_counted_logged_and_never_posted() {
    support::logs::capture();
    let (jobs, _prom, d, _tmp, app) = with_one_job().await;

    // The report's webhook: a route by namespace brings kube-state-metrics' KubeJobFailed.
    let kube = read_json(&report("10-kube-job-name-label-alert").join("webhook-kubejobfailed.json"));
    let (status, body) = post(&app, &kube).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["jobs"], 0);
    assert_eq!(body["ignored"], 1);
    assert_eq!(
        body["why"][0],
        "1 alert (`KubeJobFailed`) not diagnosed: culprit diagnoses only the alertnames of service.alertnames (FlinkJobBackpressured, FlinkTaskBackpressured, FlinkCheckpointSlow)"
    );

    // A real alert after it: once its verdict is posted everywhere, the KubeJobFailed
    // alert (accepted first) would have been too, had it been diagnosed.
    let (job, _) = &jobs[0];
    let (status, _) = post(&app, &support::webhook_for(&job.job_id(), &job.job_name(), &["a".into()])).await;
    assert_eq!(status, 202);
    support::wait_for("the real verdict everywhere", Duration::from_secs(60), || {
        d.slack.slack_messages().len() == 1
            && d.pagerduty.pagerduty_events().len() == 1
            && d.other.on("/am/api/v2/alerts").len() == 1
            && d.other.on("/hook").len() == 1
    })
    .await;
    assert_eq!(d.posts(), 4, "one post per destination, for the Flink job only");
    let everything: String =
        [d.slack.all(), d.pagerduty.all(), d.other.all()].concat().iter().map(|r| r.body.to_string()).collect();
    assert!(!everything.contains("savepoint-cleanup") && !everything.contains("could not diagnose"), "{everything}");

    let m = metrics(&app).await;
    assert!(m.contains("culprit_alerts_ignored_total{reason=\"alertname\"} 1"), "{m}");
    assert!(m.contains("culprit_webhooks_total{outcome=\"ignored\"} 1"), "{m}");
    let logs = support::logs::text();
    let line = logs
        .lines()
        .find(|l| l.contains("webhook: alerts not diagnosed") && l.contains("KubeJobFailed"))
        .unwrap_or_else(|| panic!("a log line: {logs}"));
    assert!(line.contains(r#"group="{}/{namespace=\"flink\"}:{namespace=\"flink\"}""#), "{line}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alerts_without_job_labels_are_answered_with_why_nothing_will_be_diagnosed_and_logged() {
    support::logs::capture();
    let d = Destinations::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let dead = format!("http://127.0.0.1:{}", support::free_port());
    let app = Application::build(d.config(tmp.path(), &dead, "")).await.unwrap();
    let webhook = json!({
        "receiver": "culprit", "status": "firing", "version": "4",
        "groupKey": "{}:{alertname=\"FlinkJobBackpressured\", team=\"payments-no-labels\"}",
        "alerts": [
            {"status": "firing", "labels": {"alertname": "FlinkJobBackpressured", "team": "payments"}, "fingerprint": "1"},
            {"status": "firing", "labels": {"alertname": "FlinkJobBackpressured", "team": "risk"}, "fingerprint": "2"}
        ]
    });
    let (status, body) = post(&app, &webhook).await;
    assert_eq!(status, 202);
    assert_eq!(body["jobs"], 0);
    assert_eq!(
        body["why"],
        json!(["2 alerts (`FlinkJobBackpressured`) not diagnosed: no `job_id` or `job_name` label names a Flink job"])
    );
    let (status, body) = post(&app, &json!({"status": "firing", "groupKey": "{}:{}", "alerts": []})).await;
    assert_eq!((status, body["why"].clone()), (202, json!(["the webhook carries no alert"])));
    assert!(metrics(&app).await.contains("culprit_alerts_ignored_total{reason=\"no_job_label\"} 2"));
    let logs = support::logs::text();
    assert!(
        logs.lines().any(|l| l.contains("webhook: alerts not diagnosed") && l.contains("payments-no-labels")),
        "{logs}"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cluster_label_from_kube_prometheus_without_flink_clusters_configured_diagnoses_from_prometheus() {
    let (jobs, _prom, d, _tmp, app) = with_one_job().await;
    let (job, _) = &jobs[0];
    let mut webhook = support::webhook_for(&job.job_id(), &job.job_name(), &["a".into()]);
    // kube-prometheus adds `cluster` (and `prometheus`) as external labels to every alert.
    for alert in webhook["alerts"].as_array_mut().unwrap() {
        alert["labels"]["cluster"] = "prod-eu".into();
        alert["labels"]["prometheus"] = "monitoring/k8s".into();
    }
    webhook["commonLabels"]["cluster"] = "prod-eu".into();
    assert_eq!(post(&app, &webhook).await.0, 202);
    support::wait_for("the verdict", Duration::from_secs(60), || d.other.on("/hook").len() == 1).await;
    let verdict = &d.other.on("/hook")[0].body;
    assert_eq!(verdict["schema"], "culprit.verdict/v1", "a verdict, not 'could not diagnose': {verdict}");
    assert_eq!(verdict["job"]["id"], job.job_id());
    // The API still refuses a cluster chosen by name that is not configured.
    let r = reqwest::get(format!("{}/api/v1/diagnose?job={}&cluster=prod-eu", app.url(), job.job_id())).await.unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("no Flink cluster named `prod-eu` is configured"));
    app.stop().await;
}

/// Report 12's recording (two runs of fraud-detection: an older one that stopped 750 s
/// before the end, and the running one the webhook names), shifted to end 2 s ago, in a
/// real Prometheus.
fn report_12_prometheus(now: i64) -> support::Server {
    let recording =
        support::shifted(&report("12-flink-plans-ignored-for-job-id-alerts").join("recording.om.gz"), now - 2_000);
    support::prometheus_with_texts(&[recording], support::free_port())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn report_12_a_plan_configured_by_job_name_is_used_for_an_alert_that_carries_job_id() {
    let dir = report("12-flink-plans-ignored-for-job-id-alerts");
    let prom = report_12_prometheus(jiff::Timestamp::now().as_millisecond());
    let d = Destinations::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let extra = format!(
        "[flink.plans]\n\"fraud-detection\" = \"{}\"\n[service]\ncoalesce = \"100ms\"\n",
        dir.join("plan.json").display()
    );
    let app = Application::build(d.config(tmp.path(), &prom.url, &extra)).await.unwrap();
    assert_eq!(post(&app, &read_json(&dir.join("webhook.json"))).await.0, 202);
    support::wait_for("the verdict", Duration::from_secs(60), || d.other.on("/hook").len() == 1).await;
    let v = &d.other.on("/hook")[0].body;
    // The sink is busy 995 and 990 ms/s and not backpressured, upstream 920–930 ms/s
    // backpressured: with the job graph, the sink is the culprit.
    assert_eq!(v["finding"], "sink", "{v:#}");
    assert_eq!(v["graph"]["from_plan"], true);
    assert_eq!(v["job"]["id"], "5e2b7c9a1d3f4e6a8b0c2d4e6f8a0b1c");
    assert!(v["notes"].to_string().contains("read the configured plan"), "{}", v["notes"]);
    // The note names the plan by its key, never the server's file path (REPORT F10).
    assert!(v["notes"].to_string().contains(r#"[flink.plans] \"fraud-detection\""#), "{}", v["notes"]);
    support::wait_for("the Slack post", Duration::from_secs(30), || !d.slack.all().is_empty()).await;
    let dir_text = dir.display().to_string();
    for r in d.slack.all().iter().chain(d.pagerduty.all().iter()).chain(d.other.all().iter()) {
        assert!(!r.body.to_string().contains(&dir_text), "{} carries {dir_text}: {}", r.path, r.body);
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn report_12_a_configured_plan_of_an_older_run_never_chooses_which_run_is_diagnosed() {
    let dir = report("12-flink-plans-ignored-for-job-id-alerts");
    let prom = report_12_prometheus(jiff::Timestamp::now().as_millisecond());
    let d = Destinations::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let extra = format!("[flink.plans]\nfraud_detection = \"{}\"\n", dir.join("plan-older-run.json").display());
    let app = Application::build(d.config(tmp.path(), &prom.url, &extra)).await.unwrap();
    for job in ["fraud-detection", "fraud_detection", "5e2b7c9a1d3f4e6a8b0c2d4e6f8a0b1c"] {
        let r = reqwest::get(format!("{}/api/v1/diagnose?job={job}", app.url())).await.unwrap();
        assert_eq!(r.status(), 200, "{job}");
        let v: Value = r.json().await.unwrap();
        // The running run, not the plan's (stopped 750 s ago); the plan's vertices are the
        // running run's, so its graph is used.
        assert_eq!(v["job"]["id"], "5e2b7c9a1d3f4e6a8b0c2d4e6f8a0b1c", "{job}: {}", v["notes"]);
        assert_eq!(v["finding"], "sink", "{job}");
        assert_eq!(v["graph"]["from_plan"], true, "{job}");
        let notes = v["notes"].to_string();
        assert!(notes.contains("another run"), "{job}: {notes}");
        assert!(!notes.contains("stopped reporting"), "{job}: {notes}");
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_job_is_named_one_way_in_the_verdict_the_resolved_notices_and_culprits_alert() {
    let dir = support::capture("slow-sink");
    let now = jiff::Timestamp::now().as_millisecond();
    let recording = support::shifted(&dir.join("recording.om.gz"), now - 2_000);
    let prom = support::prometheus_with_texts(&[recording], support::free_port());
    let flink = support::flink_rest_for(&dir).await;
    let d = Destinations::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let extra = format!(
        "[[flink.clusters]]\nname = \"lab\"\nrest_url = \"{}\"\n[service]\ncoalesce = \"100ms\"\n",
        flink.uri()
    );
    let app = Application::build(d.config(tmp.path(), &prom.url, &extra)).await.unwrap();

    let firing = read_json(&dir.join("alerts/webhook-0001.json"));
    assert_eq!(post(&app, &firing).await.0, 202);
    support::wait_for("the verdict", Duration::from_secs(60), || {
        d.other.on("/hook").len() == 1
            && d.slack.slack_messages().len() == 1
            && d.other.on("/am/api/v2/alerts").len() == 1
    })
    .await;
    let resolved = read_json(&dir.join("alerts/webhook-0006.json"));
    assert_eq!(post(&app, &resolved).await.0, 202);
    let resolved_post = || {
        d.slack
            .on("/api/chat.postMessage")
            .into_iter()
            .find(|p| p.body["text"].as_str().unwrap_or("").contains("Resolved"))
    };
    support::wait_for("the resolved notices", Duration::from_secs(60), || {
        d.other.on("/hook").len() == 2 && resolved_post().is_some()
    })
    .await;

    // Flink calls the job bp-lab-slow-sink; its reporter (and the alert) bp_lab_slow_sink.
    let hooks = d.other.on("/hook");
    assert_eq!(hooks[0].body["job"]["name"], "bp-lab-slow-sink");
    assert_eq!(hooks[1].body["kind"], "resolved");
    assert_eq!(hooks[1].body["job"], hooks[0].body["job"], "the resolved notice names the job as the verdict did");
    // Its first line names the job (the alert's labels follow, as they are).
    let resolved_post = resolved_post().unwrap();
    let resolved_text = resolved_post.body["text"].as_str().unwrap().lines().next().unwrap();
    assert!(resolved_text.contains("bp-lab-slow-sink"), "{resolved_text}");
    assert!(!resolved_text.contains("bp_lab_slow_sink"), "{resolved_text}");
    let verdict_text = d.slack.slack_messages()[0]["text"].as_str().unwrap().to_string();
    assert!(verdict_text.contains("bp-lab-slow-sink"), "{verdict_text}");

    // culprit's alert carries the source alert's identifying labels unchanged, and Flink's
    // name in its own label.
    let alert = &d.other.on("/am/api/v2/alerts")[0].body[0];
    let source = &firing["commonLabels"];
    for label in ["job_id", "job_name", "lab", "team"] {
        assert_eq!(alert["labels"][label], source[label], "{label}: {alert:#}");
    }
    assert_eq!(alert["labels"]["flink_job_name"], "bp-lab-slow-sink");
    assert_eq!(alert["labels"]["alertname"], "FlinkBackpressureCulprit");
    assert!(alert["labels"].get("severity").is_none(), "{alert:#}");
    app.stop().await;
}

/// Lines that log the diagnosis of the injecting job (each names it once, escaped).
fn job_lines(logs: &str) -> usize {
    logs.lines().filter(|l| l.contains("inject\\u{1b}")).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_key_with_a_newline_and_control_characters_in_a_job_name_cannot_forge_or_garble_a_log_line() {
    support::logs::capture();
    let d = Destinations::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let dead = format!("http://127.0.0.1:{}", support::free_port());
    let app = Application::build(d.config(tmp.path(), &dead, "[service]\ncoalesce = \"100ms\"\n")).await.unwrap();
    let forged = "2026-11-30T00:00:00.000000Z  INFO culprit::service: forged-line-from-a-group-key";
    let job = "inject\u{1b}[31mred\u{7}\u{0}\r2026-11-30T00:00:00Z ERROR forged-line-from-a-job-name";
    let webhook = json!({
        "receiver": "culprit", "status": "firing", "version": "4",
        "groupKey": format!("{{}}:{{alertname=\"FlinkJobBackpressured\"}}\n{forged}"),
        "alerts": [
            {"status": "firing", "labels": {"alertname": "FlinkJobBackpressured", "job_name": job}, "fingerprint": "1"},
            {"status": "firing", "labels": {"alertname": "FlinkJobBackpressured"}, "fingerprint": "2"}
        ]
    });
    let (status, body) = post(&app, &webhook).await;
    assert_eq!((status, body["jobs"].clone()), (202, json!(1)));
    // Prometheus is down: the diagnosis fails and says so, naming the job.
    support::wait_for("the failed diagnosis in the logs", Duration::from_secs(30), || {
        support::logs::text().lines().any(|l| l.contains("diagnosis failed") && l.contains("inject"))
    })
    .await;
    app.stop().await;
    let logs = support::logs::text();
    for c in ['\u{1b}', '\u{7}', '\u{0}', '\r'] {
        assert!(!logs.contains(c), "{c:?} reached the log raw");
    }
    for line in logs.lines() {
        assert!(!line.starts_with("2026-11-30T00:00:00"), "a forged line: {line}");
    }
    let group_line = logs.lines().find(|l| l.contains("forged-line-from-a-group-key")).unwrap();
    assert!(group_line.contains(r#"\n2026-11-30T00:00:00.000000Z  INFO"#), "{group_line}");
    let job_line = logs.lines().find(|l| l.contains("diagnosis failed") && l.contains("inject")).unwrap();
    assert!(job_line.contains(r#"job="inject\u{1b}[31mred\u{7}\0\r2026-11-30T00:00:00Z ERROR"#), "{job_line}");
    assert_eq!(logs.lines().filter(|l| l.contains("forged-line-from-a-job-name")).count(), job_lines(&logs), "{logs}");
}

/// `webhook_for`'s webhook with its group resolved.
fn resolved(job_id: &str, job_name: &str) -> Value {
    let mut w = support::webhook_for(job_id, job_name, &["a".into()]);
    w["status"] = "resolved".into();
    w["alerts"][0]["status"] = "resolved".into();
    w["alerts"][0]["endsAt"] = "2026-11-29T10:45:53.562Z".into();
    w
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_resolved_webhook_needs_no_diagnosis_and_is_accepted_when_the_diagnosis_queue_is_full() {
    // A Prometheus that answers after 10 s (culprit gives up on a query after 2 s): the
    // diagnosis keeps running while the webhooks come.
    let slow_prometheus = Capture::start().await;
    slow_prometheus.delay(10_000);
    let d = Destinations::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let mut config = d.config(tmp.path(), &slow_prometheus.url, "[service]\ncoalesce = \"100ms\"\n");
    config.store.max_queue = 1;
    let app = Application::build(config).await.unwrap();
    let (id, name) = ("0123456789abcdef0123456789abcdef", "slow_job");
    assert_eq!(post(&app, &support::webhook_for(id, name, &["a".into()])).await.0, 202);
    support::wait_for("the diagnosis running", Duration::from_secs(30), || slow_prometheus.arrived() > 0).await;
    // The job fires again while its diagnosis runs: another diagnosis would make 2 > 1.
    let (status, body) = post(&app, &support::webhook_for(id, name, &["a".into(), "b".into()])).await;
    assert_eq!(status, 503, "{body}");
    // The group resolves: no diagnosis is needed, so the bound does not refuse it.
    let (status, body) = post(&app, &resolved(id, name)).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["jobs"], 1, "{body}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_group_that_resolves_within_the_coalescing_window_is_said_and_counted_and_nothing_is_posted() {
    support::logs::capture();
    let d = Destinations::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let dead = format!("http://127.0.0.1:{}", support::free_port());
    let app = Application::build(d.config(tmp.path(), &dead, "[service]\ncoalesce = \"2s\"\n")).await.unwrap();
    let (id, name) = ("fedcba9876543210fedcba9876543210", "brief_job");
    assert_eq!(post(&app, &support::webhook_for(id, name, &["a".into()])).await.0, 202);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(post(&app, &resolved(id, name)).await.0, 202);
    support::drained(&app).await;
    assert_eq!(d.posts(), 0, "nothing to post: {:#?}", [d.slack.all(), d.pagerduty.all(), d.other.all()].concat());
    let m = metrics(&app).await;
    assert_eq!(support::metric(&m, "culprit_groups_resolved_before_diagnosis_total"), 1.0, "{m}");
    let logs = support::logs::text();
    assert!(
        logs.lines().any(|l| l.contains(" INFO ")
            && l.contains("resolved before it was diagnosed; nothing posted")
            && l.contains(id)),
        "{logs}"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn could_not_diagnose_sixty_jobs_of_one_group_is_one_notice_per_destination_naming_them() {
    let (_jobs, _prom, d, _tmp, app) = with_one_job().await;
    // One group, 60 alerts naming 60 jobs Prometheus has never seen.
    let mut w = support::webhook_for("x", "x", &[]);
    w["alerts"] = (0..60)
        .map(|i| json!({"status": "firing", "labels": {"alertname": "FlinkJobBackpressured", "job_name": format!("unknown_job_{i:02}")}, "fingerprint": format!("{i}")}))
        .collect::<Vec<_>>()
        .into();
    let (status, body) = post(&app, &w).await;
    assert_eq!((status, body["jobs"].as_u64()), (202, Some(50)), "{body}");
    support::wait_for("the notices", Duration::from_secs(90), || {
        d.slack.slack_messages().len() == 1
            && d.other.on("/am/api/v2/alerts").len() == 1
            && d.other.on("/hook").len() == 1
    })
    .await;
    support::drained(&app).await;
    // One Slack post (no reply), one Alertmanager alert, one webhook; PagerDuty opens no
    // incident for a failure to diagnose.
    assert_eq!(d.slack.on("/api/chat.postMessage").len(), 1);
    let am = d.other.on("/am/api/v2/alerts");
    assert_eq!((am.len(), am[0].body.as_array().map(Vec::len)), (1, Some(1)), "{:#?}", am[0].body);
    assert_eq!(d.other.on("/hook").len(), 1);
    assert!(d.pagerduty.all().is_empty());
    // 50 jobs: the notice's own and 49 more, 10 of them named, 39 counted.
    let text = d.slack.slack_messages()[0]["text"].as_str().unwrap().to_string();
    assert!(
        text.contains("could not diagnose") && text.contains("49 more jobs") && text.contains("and 39 more"),
        "{text}"
    );
    let named = (0..50).filter(|i| text.contains(&format!("unknown_job_{i:02}"))).count();
    assert_eq!(named, 11, "the notice's job and 10 more named: {text}");
    for hook in [&d.other.on("/hook")[0].body, &am[0].body] {
        assert!(hook.to_string().contains("and 39 more"), "{hook:#}");
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_flood_of_two_hundred_unknown_jobs_delays_no_real_verdict_and_gives_one_could_not_diagnose_per_destination() {
    let now = jiff::Timestamp::now().as_millisecond();
    let jobs = support::synthetic_jobs(1, now - 1_000);
    let prom = support::prometheus_with_texts(&[jobs[0].1.clone()], support::free_port());
    let d = Destinations::start().await;
    let tmp = tempfile::tempdir().unwrap();
    // A coalescing window (10 s) longer than posting the flood takes: the flood is queued
    // whole before the first of it is diagnosed, as under a real flood.
    let app = Application::build(d.config(tmp.path(), &prom.url, "[service]\ncoalesce = \"10s\"\n")).await.unwrap();
    let (job, _) = &jobs[0];
    let could_not = |bodies: Vec<Value>| bodies.iter().filter(|b| b.to_string().contains("could not diagnose")).count();
    // The real job is known: its first alert got a verdict.
    let real = |group: &str| {
        let mut w = support::webhook_for(&job.job_id(), &job.job_name(), &[group.to_string()]);
        w["groupKey"] = format!("{{}}:{{job_id=\"{}\", replica=\"{group}\"}}", job.job_id()).into();
        w
    };
    assert_eq!(post(&app, &real("first")).await.0, 202);
    support::wait_for("the first verdict", Duration::from_secs(60), || d.pagerduty.pagerduty_events().len() == 1).await;
    support::drained(&app).await;
    // The flood: a misrouted Alertmanager sends 200 webhooks, each a job never seen (its own
    // alert group); then a new alert group of the real job.
    let flood: Vec<Value> = (0..200)
        .map(|i| {
            let mut w = support::webhook_for(&format!("b0605{i:027x}"), &format!("bogus_{i:03}"), &[format!("f{i}")]);
            w["externalURL"] = "http://misrouted-alertmanager:9093".into();
            w
        })
        .collect();
    let client = reqwest::Client::new();
    let url = format!("{}/webhook/alertmanager", app.url());
    let started = std::time::Instant::now();
    let answers = futures::future::join_all(flood.iter().map(|w| client.post(&url).json(w).send())).await;
    assert!(answers.iter().all(|a| a.as_ref().is_ok_and(|r| r.status() == 202)), "{answers:?}");
    assert_eq!(client.post(&url).json(&real("second")).send().await.unwrap().status(), 202);
    // (A precondition, not a measurement: the flood is queued within the window.)
    assert!(started.elapsed() < Duration::from_secs(10), "the flood took {:?} to post", started.elapsed());
    // The real job's new alert group is tied to its verdict: a reply in its Slack thread.
    let tied = || {
        d.slack
            .on("/api/chat.postMessage")
            .iter()
            .any(|p| p.body.get("thread_ts").is_some() && p.body.to_string().contains("Also firing"))
    };
    support::wait_for("the real job's new group", Duration::from_secs(60), tied).await;
    support::wait_for("the flood diagnosed", Duration::from_secs(120), || {
        d.slack.slack_messages().iter().any(|m| m.to_string().contains("could not diagnose"))
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    // The real verdict reached Slack before any "could not diagnose": they wait while the
    // flood drains, then fold into one per destination and 10 minutes (10 jobs named, the
    // rest counted); what fails after it waits for the window's end.
    let slack = d.slack.slack_messages();
    let first_failure = slack.iter().position(|m| m.to_string().contains("could not diagnose")).expect("posted");
    let texts: Vec<String> =
        slack.iter().map(|m| m["text"].as_str().unwrap_or("").chars().take(120).collect()).collect();
    // Every post in order, replies too: the real job's verdict and its new group's reply
    // came before the first "could not diagnose".
    let posts: Vec<Value> = d.slack.on("/api/chat.postMessage").into_iter().map(|p| p.body).collect();
    let failed_at = posts.iter().position(|m| m.to_string().contains("could not diagnose")).expect("posted");
    assert!(
        posts[..failed_at]
            .iter()
            .any(|m| m.to_string().contains("Also firing") && m.to_string().contains(&job.job_name())),
        "{texts:#?}"
    );
    let am = d.other.on("/am/api/v2/alerts").into_iter().map(|r| r.body).collect();
    let hook = d.other.on("/hook").into_iter().map(|r| r.body).collect();
    let counts = (could_not(slack.clone()), could_not(am), could_not(hook));
    assert!(counts.0 <= 2 && counts.1 <= 2 && counts.2 <= 2 && counts.0 >= 1, "{counts:?}");
    assert!(slack[first_failure].to_string().contains(" more"), "{:#}", slack[first_failure]);
    assert!(d.pagerduty.pagerduty_events().iter().all(|e| !e.to_string().contains("could not diagnose")));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sender_over_its_cap_of_unknown_jobs_gets_429_and_another_sender_is_still_accepted() {
    let prom = support::prometheus_with_texts(&[], support::free_port());
    let d = Destinations::start().await;
    let tmp = tempfile::tempdir().unwrap();
    // A long coalescing window: nothing is diagnosed (and leaves the queue) meanwhile.
    let mut config = d.config(tmp.path(), &prom.url, "[service]\ncoalesce = \"1h\"\n");
    config.store.max_unknown_per_sender = 3;
    let app = Application::build(config).await.unwrap();
    let bogus = |i: usize, sender: Option<&str>| {
        let mut w = support::webhook_for(&format!("b0605{i:027x}"), &format!("bogus_{i:03}"), &[format!("f{i}")]);
        w["externalURL"] = sender.unwrap_or("").into();
        w
    };
    let client = reqwest::Client::new();
    let url = format!("{}/webhook/alertmanager", app.url());
    for i in 0..3 {
        let w = bogus(i, Some("http://misrouted:9093"));
        assert_eq!(client.post(&url).json(&w).send().await.unwrap().status(), 202);
    }
    // The fourth unknown job of that sender: 429, retry in a minute, nothing stored.
    let r = client.post(&url).json(&bogus(3, Some("http://misrouted:9093"))).send().await.unwrap();
    assert_eq!(r.status(), 429);
    assert_eq!(r.headers()["retry-after"], "60");
    let body: Value = r.json().await.unwrap();
    assert!(body.to_string().contains("store.max_unknown_per_sender"), "{body}");
    assert_eq!(app.service.store.depths().await.unwrap().work, 3);
    // Another Alertmanager, and one without an externalURL (its peer address is the
    // sender), are not held by the flood.
    assert_eq!(client.post(&url).json(&bogus(4, Some("http://alertmanager:9093"))).send().await.unwrap().status(), 202);
    assert_eq!(client.post(&url).json(&bogus(5, None)).send().await.unwrap().status(), 202);
    let m = metrics(&app).await;
    assert_eq!(support::metric(&m, "culprit_webhooks_total{outcome=\"too_many_unknown\"}"), 1.0, "{m}");
    app.stop().await;
}
