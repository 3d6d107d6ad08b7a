//! Backends that are down, as the HTTP API meets them: a Prometheus that refuses the
//! connection is named with its cause at once (no diagnosis is tried), and a Prometheus
//! that answers but keeps failing gives a JSON error within the request timeout, never an
//! empty 503. (The command line's side is in tests/cli.rs: the line on stderr when
//! retrying starts, exit code 3.)

mod support;

use culprit::config::Config;
use culprit::service::server::Application;
use serde_json::Value;
use support::capture::Capture;
use wiremock::matchers::{body_string_contains, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// culprit reading `prometheus` with a 30 s deadline per query, answering requests within
/// `request_timeout`.
async fn app(prometheus: &str, request_timeout: &str) -> (Application, tempfile::TempDir) {
    let (slack, pagerduty) = (Capture::start().await, Capture::start().await);
    let tmp = tempfile::tempdir().unwrap();
    let text = support::culprit_config(tmp.path(), prometheus, &slack.url, &pagerduty.url, "")
        .replace("timeout = \"2s\"\ndeadline = \"4s\"", "timeout = \"10s\"\ndeadline = \"30s\"")
        .replace("[server]\n", &format!("[server]\nrequest_timeout = \"{request_timeout}\"\n"));
    (Application::build(Config::from_toml(&text, "down.toml").unwrap()).await.unwrap(), tmp)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_diagnose_api_names_a_prometheus_that_refuses_the_connection_in_json_without_retrying() {
    let url = format!("http://127.0.0.1:{}", support::free_port());
    // Prometheus' deadline is 30 s: an answer naming the refusal comes from the probe, not
    // from retrying until the deadline.
    let (app, _tmp) = app(&url, "60s").await;
    let r = reqwest::get(format!("{}/api/v1/diagnose?job=fraud-detection", app.url())).await.unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["content-type"], "application/json");
    assert_eq!(r.headers()["retry-after"], "10");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"], format!("Prometheus at {url} refused the connection; no diagnosis was tried"));
    assert_eq!(body["backend"], "prometheus");
    assert!(body["cause"].as_str().unwrap().contains("Connection refused"), "{body}");
    let metrics = reqwest::get(format!("{}/metrics", app.url())).await.unwrap().text().await.unwrap();
    assert!(metrics.contains("culprit_diagnosis_failures_total{reason=\"api_backend\"} 1"), "{metrics}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prometheus_that_answers_probes_but_fails_every_query_gives_json_within_the_request_timeout() {
    let prometheus = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/v1/query"))
        .and(body_string_contains("vector%281%29"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_raw(r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#, "application/json"),
        )
        .mount(&prometheus)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503).set_body_string("overloaded"))
        .mount(&prometheus)
        .await;
    // Queries are retried for 30 s (prometheus.deadline); the request may take 3 s: the
    // answer is the handler's JSON after 2 s, not the timeout's empty body.
    let (app, _tmp) = app(&prometheus.uri(), "3s").await;
    let r = reqwest::get(format!("{}/api/v1/diagnose?job=fraud-detection", app.url())).await.unwrap();
    assert_eq!(r.status(), 503);
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        body["error"],
        format!(
            "no verdict within 2 s (server.request_timeout): Prometheus at {} answers slowly or a query keeps failing (the log names it)",
            prometheus.uri()
        )
    );
    assert_eq!(body["backend"], "prometheus");
    app.stop().await;
}
