//! End to end with real parts: a real Prometheus holding a capture shifted to end just
//! before now evaluates the shipped alerting rules; a real Alertmanager routes the alert to
//! culprit's webhook; culprit diagnoses from that Prometheus (and a Flink REST stand-in
//! serving the capture's real answers) and posts to capture servers standing in for Slack
//! and PagerDuty, and back into the Alertmanager.

mod support;

use std::path::Path;
use std::time::Duration;

use culprit::config::Config;
use culprit::service::server::Application;
use support::capture::Capture;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backpressure_alert_reaches_slack_and_pagerduty_once_with_the_culprit_and_its_fix() {
    let dir = support::capture("slow-sink");
    let now = jiff::Timestamp::now().as_millisecond();
    let recording = support::shifted(&dir.join("recording.om.gz"), now - 2_000);
    let tmp = tempfile::tempdir().unwrap();
    let (prom_port, am_port) = (support::free_port(), support::free_port());

    let slack = Capture::start().await;
    let pagerduty = Capture::start().await;
    let group_keys = Capture::start().await;
    let flink = support::flink_rest_for(&dir).await;

    let extra = format!(
        "[[flink.clusters]]\nname = \"lab\"\nrest_url = \"{}\"\n[service]\ncoalesce = \"1s\"\n[notify.alertmanager]\nurl = \"http://127.0.0.1:{am_port}\"\n",
        flink.uri()
    );
    let text = support::culprit_config(
        tmp.path(),
        &format!("http://127.0.0.1:{prom_port}"),
        &slack.url,
        &pagerduty.url,
        &extra,
    )
    .replace(
        "[server]\nlisten = \"127.0.0.1:0\"\n",
        "[server]\nlisten = \"127.0.0.1:0\"\nexternal_url = \"http://culprit.test\"\n",
    );
    let config = Config::from_toml(&text, "e2e.toml").unwrap();
    let app = Application::build(config).await.unwrap();

    // Alertmanager: Flink alerts to culprit (and to a recorder of the groupKey sent);
    // culprit's own alert elsewhere.
    let _am = support::alertmanager(
        &format!(
            r#"
route:
  receiver: blackhole
  group_by: [alertname, job_id]
  group_wait: 1s
  group_interval: 5s
  repeat_interval: 1h
  routes:
    - matchers: ['culprit="true"']
      receiver: blackhole
    - matchers: ['alertname="FlinkJobBackpressured"']
      receiver: culprit
      continue: true
    - matchers: ['alertname="FlinkJobBackpressured"']
      receiver: recorder
receivers:
  - name: blackhole
  - name: culprit
    webhook_configs:
      - url: '{culprit}/webhook/alertmanager'
        send_resolved: true
  - name: recorder
    webhook_configs:
      - url: '{recorder}/alertmanager'
"#,
            culprit = app.url(),
            recorder = group_keys.url
        ),
        am_port,
    );
    let rules = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus/flink-backpressure.rules.yml");
    let _prom = support::prometheus_alerting(&recording, &rules, &format!("http://127.0.0.1:{am_port}"), prom_port);

    // The rule holds for 1m before it fires; then Alertmanager, culprit, the destinations.
    support::wait_for("the Slack message and the PagerDuty event", Duration::from_secs(180), || {
        !slack.slack_messages().is_empty() && !pagerduty.pagerduty_events().is_empty()
    })
    .await;
    // Once culprit has nothing left to do, nothing more can arrive: one post per
    // destination.
    support::drained(&app).await;

    let messages = slack.slack_messages();
    assert_eq!(messages.len(), 1, "{messages:#?}");
    let text = messages[0].to_string();
    assert!(text.contains("slow-sink: Writer"), "{text}");
    assert!(text.contains("sink.buffer-flush.max-rows"), "the fix with its config keys: {text}");

    let events = pagerduty.pagerduty_events();
    assert_eq!(events.len(), 1, "{events:#?}");
    let sent = group_keys.on("/alertmanager");
    let group_key = sent[0].body["groupKey"].as_str().unwrap();
    assert_eq!(
        events[0]["dedup_key"],
        culprit::service::intake::sha256_hex(group_key),
        "PagerDuty's dedup_key is SHA-256 of the groupKey"
    );
    assert_eq!(events[0]["payload"]["custom_details"]["verdict"]["finding"], "sink", "{:#}", events[0]);

    // culprit's own alert is in Alertmanager, beside (not over) the source alert.
    let alerts: serde_json::Value =
        reqwest::get(format!("http://127.0.0.1:{am_port}/api/v2/alerts")).await.unwrap().json().await.unwrap();
    let names: Vec<&str> =
        alerts.as_array().unwrap().iter().filter_map(|a| a["labels"]["alertname"].as_str()).collect();
    assert!(names.contains(&"FlinkBackpressureCulprit"), "{names:?}");
    assert!(names.contains(&"FlinkJobBackpressured"), "{names:?}");
    let own =
        alerts.as_array().unwrap().iter().find(|a| a["labels"]["alertname"] == "FlinkBackpressureCulprit").unwrap();
    assert_eq!(own["labels"]["culprit_vertex"], "slow-sink: Writer");
    // The same job, one identity: culprit's alert carries the source alert's job labels
    // unchanged (the reporter's `bp_lab_slow_sink`), and Flink's name in its own label.
    let source =
        alerts.as_array().unwrap().iter().find(|a| a["labels"]["alertname"] == "FlinkJobBackpressured").unwrap();
    for label in ["job_id", "job_name"] {
        assert_eq!(own["labels"][label], source["labels"][label], "{label}: {own:#}");
    }
    assert_eq!(own["labels"]["job_name"], "bp_lab_slow_sink");
    assert_eq!(own["labels"]["flink_job_name"], "bp-lab-slow-sink");

    app.stop().await;
}
