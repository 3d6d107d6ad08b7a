//! The Flink REST client against a real local HTTP server (wiremock) serving the answers
//! recorded from Flink 2.3 in `examples/captures/*/rest/`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use culprit::collect::flink_rest::{FlinkError, FlinkRest, JobOverview, parse_jobs_overview, pick_job};
use culprit::config::{FlinkCluster, FlinkConfig, HttpAuth, Millis, SecretSource};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const SLOW_SINK_ID: &str = "da23ad9af4e7326542c9a70eac958f42";

fn capture(name: &str, file: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/captures").join(name).join("rest").join(file);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn flink(timeout_ms: i64, deadline_ms: i64) -> FlinkConfig {
    FlinkConfig { timeout: Millis(timeout_ms), deadline: Millis(deadline_ms), ..FlinkConfig::default() }
}

fn cluster(url: &str, auth: Option<HttpAuth>) -> FlinkCluster {
    FlinkCluster { name: "lab".into(), rest_url: url.into(), auth, ..Default::default() }
}

fn client(server: &MockServer) -> FlinkRest {
    FlinkRest::new(&cluster(&server.uri(), None), &flink(1000, 2000)).unwrap()
}

fn json(body: String) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(body, "application/json")
}

/// A secret in a temporary file, as a mounted Kubernetes Secret would be.
fn secret_file(secret: &str) -> (tempfile::NamedTempFile, PathBuf) {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    writeln!(f, "{secret}").unwrap();
    let p = f.path().to_path_buf();
    (f, p)
}

#[tokio::test]
async fn the_recorded_job_overview_lists_every_run_with_state_and_start_time() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/jobs/overview"))
        .respond_with(json(capture("hard-backpressure", "jobs-overview.json")))
        .mount(&server)
        .await;
    let rest = client(&server);
    let jobs = rest.jobs().await.unwrap();
    assert_eq!(jobs.len(), 8);
    assert_eq!(
        jobs[0],
        JobOverview {
            id: "1cd3b48d0be42fe317d2a4ac91801fc4".into(),
            name: "bp-lab-slow-sink".into(),
            state: "RUNNING".into(),
            start_time_ms: 1795949277706,
        }
    );
    assert_eq!(jobs.iter().filter(|j| j.state == "CANCELED").count(), 7);
    assert_eq!(rest.requests(), 1);
}

#[tokio::test]
async fn the_recorded_plan_of_the_slow_sink_job_has_four_vertices() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("/jobs/{SLOW_SINK_ID}/plan")))
        .respond_with(json(capture("slow-sink", "plan.json")))
        .mount(&server)
        .await;
    let graph = client(&server).plan(SLOW_SINK_ID).await.unwrap();
    assert_eq!(graph.vertices.len(), 4);
    assert_eq!(graph.job_id.as_deref(), Some(SLOW_SINK_ID));
    assert_eq!(graph.job_name.as_deref(), Some("bp-lab-slow-sink"));
    let sink = graph.vertices.last().unwrap();
    assert!(graph.is_sink(&sink.id), "{sink:?}");
    assert_eq!(sink.id, "2e588ce1c86a9d46e2e85186773ce4fd");
}

#[tokio::test]
async fn the_recorded_checkpoint_config_of_the_slow_sink_job_is_read() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("/jobs/{SLOW_SINK_ID}/checkpoints/config")))
        .respond_with(json(capture("slow-sink", "checkpoints-config.json")))
        .mount(&server)
        .await;
    let config = client(&server).checkpoint_config(SLOW_SINK_ID).await.unwrap();
    assert_eq!(config.interval_ms, 10_000);
    assert_eq!(config.timeout_ms, 600_000);
    assert!(!config.unaligned);
    assert_eq!(config.state_backend.as_deref(), Some("HashMapStateBackend"));
}

#[tokio::test]
async fn every_recorded_rest_answer_is_read() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/captures");
    let mut dirs: Vec<_> = std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().path()).collect();
    dirs.retain(|d| d.join("rest/plan.json").exists());
    dirs.sort();
    assert!(dirs.len() >= 11, "{} captures", dirs.len());
    for dir in dirs {
        let name = dir.file_name().unwrap().to_str().unwrap();
        let jobs = parse_jobs_overview(&capture(name, "jobs-overview.json")).unwrap();
        let running = jobs.iter().find(|j| j.state == "RUNNING").unwrap_or_else(|| panic!("{name}"));
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .and(path("/jobs/overview"))
            .respond_with(json(capture(name, "jobs-overview.json")))
            .mount(&server)
            .await;
        Mock::given(method("GET"))
            .and(path(format!("/jobs/{}/plan", running.id)))
            .respond_with(json(capture(name, "plan.json")))
            .mount(&server)
            .await;
        Mock::given(method("GET"))
            .and(path(format!("/jobs/{}/checkpoints/config", running.id)))
            .respond_with(json(capture(name, "checkpoints-config.json")))
            .mount(&server)
            .await;
        let rest = client(&server);
        let jobs = rest.jobs().await.unwrap();
        let job = pick_job(&jobs, &running.name).unwrap();
        assert_eq!(job.id, running.id, "{name}");
        let graph = rest.plan(&job.id).await.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(graph.job_id.as_deref(), Some(job.id.as_str()), "{name}");
        assert!(!graph.vertices.is_empty(), "{name}");
        let config = rest.checkpoint_config(&job.id).await.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(config.interval_ms > 0 && config.timeout_ms > 0, "{name}: {config:?}");
        assert_eq!(rest.requests(), 3, "{name}");
    }
}

#[tokio::test]
async fn two_server_errors_then_success_gives_the_answer_after_three_requests() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/jobs/overview"))
        .respond_with(ResponseTemplate::new(500).set_body_string(r#"{"errors":["Internal server error."]}"#))
        .up_to_n_times(2)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/jobs/overview"))
        .respond_with(json(capture("slow-sink", "jobs-overview.json")))
        .with_priority(2)
        .mount(&server)
        .await;
    let rest = client(&server);
    let jobs = rest.jobs().await.unwrap();
    assert_eq!(jobs[0].id, SLOW_SINK_ID);
    assert_eq!(rest.requests(), 3);
    assert_eq!(server.received_requests().await.unwrap().len(), 3);
}

/// A rate limit (429, from a proxy in front of the JobManager) and an unavailable
/// JobManager (503) pass by themselves: both are retried as every backend retries them
/// (`culprit::retry_status`), and the third request is answered. Before the shared table,
/// Flink REST gave up on the 429 after one request.
#[tokio::test]
async fn a_rate_limit_and_an_unavailable_jobmanager_are_retried_then_answered() {
    let server = MockServer::start().await;
    for (status, priority) in [(429, 1), (503, 2)] {
        Mock::given(method("GET"))
            .and(path("/jobs/overview"))
            .respond_with(ResponseTemplate::new(status))
            .up_to_n_times(1)
            .with_priority(priority)
            .mount(&server)
            .await;
    }
    Mock::given(method("GET"))
        .and(path("/jobs/overview"))
        .respond_with(json(capture("slow-sink", "jobs-overview.json")))
        .with_priority(3)
        .mount(&server)
        .await;
    let rest = client(&server);
    let jobs = rest.jobs().await.unwrap();
    assert_eq!(jobs[0].id, SLOW_SINK_ID);
    // 429, then 503, then the answer.
    assert_eq!(rest.requests(), 3);
}

/// 501 Not Implemented will not change by asking again: one request, a final error.
#[tokio::test]
async fn a_not_implemented_answer_is_final_after_one_request() {
    let server = MockServer::start().await;
    Mock::given(method("GET")).respond_with(ResponseTemplate::new(501)).mount(&server).await;
    let rest = client(&server);
    let err = rest.jobs().await.unwrap_err();
    assert_eq!(err.status(), Some(501), "{err}");
    assert!(!err.is_retryable(), "{err}");
    assert_eq!(rest.requests(), 1);
}

#[tokio::test]
async fn a_plan_answered_404_is_a_final_no_such_job_error_after_one_request() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(404).set_body_string(r#"{"errors":["Job could not be found."]}"#))
        .mount(&server)
        .await;
    let rest = client(&server);
    let err = rest.plan(SLOW_SINK_ID).await.unwrap_err();
    assert!(matches!(err, FlinkError::NoSuchJob { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains(SLOW_SINK_ID) && text.contains("`lab`") && text.contains("/plan"), "{text}");
    assert_eq!(err.status(), Some(404));
    assert_eq!(rest.requests(), 1);
}

#[tokio::test]
async fn a_checkpoint_config_answered_404_keeps_flinks_reason_for_the_log_and_is_not_retried() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(404).set_body_string(
            r#"{"errors":["Checkpointing is not enabled for this job (da23ad9af4e7326542c9a70eac958f42)."]}"#,
        ))
        .mount(&server)
        .await;
    let rest = client(&server);
    let err = rest.checkpoint_config(SLOW_SINK_ID).await.unwrap_err();
    assert_eq!(err.status(), Some(404));
    // Flink's reason is kept for the log, out of the message (which becomes a note).
    let FlinkError::Status { detail, .. } = &err else { panic!("{err:?}") };
    assert!(detail.contains("Checkpointing is not enabled"), "{detail}");
    assert!(!err.to_string().contains("Checkpointing"), "{err}");
    assert!(
        err.to_string()
            .ends_with("answered HTTP 404 Not Found to GET /jobs/da23ad9af4e7326542c9a70eac958f42/checkpoints/config"),
        "{err}"
    );
    assert_eq!(rest.requests(), 1);
}

#[tokio::test]
async fn a_server_that_never_answers_fails_within_about_the_deadline() {
    let server = MockServer::start().await;
    Mock::given(method("GET")).respond_with(json("{}".into()).set_delay(Duration::from_secs(30))).mount(&server).await;
    let rest = FlinkRest::new(&cluster(&server.uri(), None), &flink(300, 2000)).unwrap();
    let started = Instant::now();
    let err = rest.jobs().await.unwrap_err();
    let elapsed = started.elapsed();
    // Retries stop when the next pause would end after the deadline, so the call ends
    // between ~1.2 s (three timed-out attempts and their pauses) and the 2 s deadline.
    assert!(elapsed >= Duration::from_millis(1000) && elapsed < Duration::from_millis(2600), "{elapsed:?}");
    match &err {
        FlinkError::GaveUp { attempts, last, .. } => {
            assert!(*attempts >= 2, "{err}");
            assert!(matches!(**last, FlinkError::Timeout { .. }), "{err}");
        }
        other => panic!("{other:?}"),
    }
    assert!(rest.requests() >= 2);
    assert!(err.to_string().contains("2s deadline"), "{err}");
}

#[tokio::test]
async fn a_refused_connection_is_retried_until_the_deadline() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let rest = FlinkRest::new(&cluster(&format!("http://127.0.0.1:{port}"), None), &flink(300, 1000)).unwrap();
    let started = Instant::now();
    let err = rest.jobs().await.unwrap_err();
    assert!(started.elapsed() < Duration::from_millis(1800), "{:?}", started.elapsed());
    match &err {
        FlinkError::GaveUp { last, .. } => assert!(matches!(**last, FlinkError::Network { .. }), "{err}"),
        other => panic!("{other:?}"),
    }
    assert!(rest.requests() >= 2, "{}", rest.requests());
}

#[tokio::test]
async fn a_path_prefix_in_the_base_url_is_kept_with_or_without_trailing_slash() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/flink/jobs/overview"))
        .respond_with(json(capture("slow-sink", "jobs-overview.json")))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("/flink/jobs/{SLOW_SINK_ID}/checkpoints/config")))
        .respond_with(json(capture("slow-sink", "checkpoints-config.json")))
        .mount(&server)
        .await;
    for base in [format!("{}/flink/", server.uri()), format!("{}/flink", server.uri())] {
        let rest = FlinkRest::new(&cluster(&base, None), &flink(1000, 2000)).unwrap();
        assert_eq!(rest.jobs().await.unwrap().len(), 1, "{base}");
        assert_eq!(rest.checkpoint_config(SLOW_SINK_ID).await.unwrap().interval_ms, 10_000, "{base}");
    }
}

#[tokio::test]
async fn a_bearer_token_is_sent_in_the_authorization_header() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/jobs/overview"))
        .and(header("authorization", "Bearer tok-123"))
        .respond_with(json(capture("slow-sink", "jobs-overview.json")))
        .mount(&server)
        .await;
    let (_keep, file) = secret_file("tok-123");
    let auth = HttpAuth::Bearer { token: SecretSource::File(file) };
    let rest = FlinkRest::new(&cluster(&server.uri(), Some(auth)), &flink(1000, 2000)).unwrap();
    assert_eq!(rest.jobs().await.unwrap()[0].id, SLOW_SINK_ID);
}

#[tokio::test]
async fn basic_credentials_are_sent_in_the_authorization_header() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/jobs/overview"))
        // base64("flink:hunter2")
        .and(header("authorization", "Basic Zmxpbms6aHVudGVyMg=="))
        .respond_with(json(capture("slow-sink", "jobs-overview.json")))
        .mount(&server)
        .await;
    let (_keep, file) = secret_file("hunter2");
    let auth = HttpAuth::Basic { username: "flink".into(), password: SecretSource::File(file) };
    let rest = FlinkRest::new(&cluster(&server.uri(), Some(auth)), &flink(1000, 2000)).unwrap();
    assert_eq!(rest.jobs().await.unwrap()[0].id, SLOW_SINK_ID);
}

#[tokio::test]
async fn the_secret_never_appears_in_errors_or_debug_output() {
    const SECRET: &str = "s3cr3t-flink-token-42";
    let server = MockServer::start().await;
    // A hostile or careless proxy that echoes the credentials in its error page.
    Mock::given(method("GET"))
        .and(path("/jobs/overview"))
        .respond_with(ResponseTemplate::new(401).set_body_string(format!("bad token Bearer {SECRET}")))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("/jobs/{SLOW_SINK_ID}/plan")))
        .respond_with(ResponseTemplate::new(503).set_body_string(format!("{{\"errors\":[\"{SECRET}\"]}}")))
        .mount(&server)
        .await;
    let (_keep, file) = secret_file(SECRET);
    let auth = HttpAuth::Bearer { token: SecretSource::File(file) };
    let rest = FlinkRest::new(&cluster(&server.uri(), Some(auth)), &flink(200, 600)).unwrap();
    assert!(!format!("{rest:?}").contains(SECRET), "{rest:?}");

    let unauthorized = rest.jobs().await.unwrap_err();
    assert_eq!(unauthorized.status(), Some(401));
    let gave_up = rest.plan(SLOW_SINK_ID).await.unwrap_err();
    assert!(matches!(gave_up, FlinkError::GaveUp { .. }), "{gave_up:?}");
    for err in [unauthorized, gave_up] {
        let (display, debug) = (err.to_string(), format!("{err:?}"));
        assert!(!display.contains(SECRET) && !debug.contains(SECRET), "{display}\n{debug}");
        assert!(display.contains("`lab`"), "{display}");
        // The body is not quoted at all (it is logged); the detail kept for the log is
        // masked.
        assert!(!display.contains("bad token"), "{display}");
        assert!(debug.contains("[REDACTED]"), "the echoed secret is masked: {debug}");
    }
}

#[tokio::test]
async fn an_unreadable_secret_fails_at_construction_naming_the_file_not_a_value() {
    let missing = std::env::temp_dir().join("culprit-no-such-secret-file");
    let auth = HttpAuth::Basic { username: "flink".into(), password: SecretSource::File(missing.clone()) };
    let err = FlinkRest::new(&cluster("http://127.0.0.1:1", Some(auth)), &flink(1000, 2000)).unwrap_err();
    assert!(matches!(err, FlinkError::Config { .. }), "{err:?}");
    assert!(err.to_string().contains(&missing.display().to_string()), "{err}");
}

#[tokio::test]
async fn credentials_inside_the_rest_url_are_refused_without_echoing_them() {
    let err = FlinkRest::new(&cluster("http://flink:pw-in-url@jm:8081", None), &flink(1000, 2000)).unwrap_err();
    assert!(matches!(err, FlinkError::Config { .. }), "{err:?}");
    assert!(!err.to_string().contains("pw-in-url") && !format!("{err:?}").contains("pw-in-url"), "{err}");
}

#[tokio::test]
async fn hostile_job_ids_are_rejected_without_a_request() {
    let server = MockServer::start().await;
    Mock::given(method("GET")).respond_with(json("{}".into())).mount(&server).await;
    let rest = client(&server);
    for bad in ["../../x", "a b", "", "da23ad9af4e7326542c9a70eac958f42/../../jobs", "da23ad9af4e7326542c9a70eac958f4%"]
    {
        let err = rest.plan(bad).await.unwrap_err();
        assert!(matches!(err, FlinkError::InvalidJobId { .. }), "{bad:?}: {err:?}");
        let err = rest.checkpoint_config(bad).await.unwrap_err();
        assert!(matches!(err, FlinkError::InvalidJobId { .. }), "{bad:?}: {err:?}");
        assert!(err.to_string().contains("no request was sent"), "{err}");
    }
    assert_eq!(rest.requests(), 0);
    assert!(server.received_requests().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_success_answer_that_is_not_a_plan_is_a_final_parse_error() {
    let server = MockServer::start().await;
    Mock::given(method("GET")).respond_with(json("<html>login</html>".into())).mount(&server).await;
    let rest = client(&server);
    let err = rest.plan(SLOW_SINK_ID).await.unwrap_err();
    assert!(matches!(err, FlinkError::Parse { .. }), "{err:?}");
    let err = rest.checkpoint_config(SLOW_SINK_ID).await.unwrap_err();
    assert!(matches!(err, FlinkError::Parse { .. }), "{err:?}");
    assert_eq!(rest.requests(), 2);
}

fn job(id: &str, name: &str, state: &str, start_time_ms: i64) -> JobOverview {
    JobOverview { id: id.into(), name: name.into(), state: state.into(), start_time_ms }
}

#[test]
fn among_runs_with_the_same_name_the_running_one_wins() {
    let jobs = parse_jobs_overview(&capture("hard-backpressure", "jobs-overview.json")).unwrap();
    assert_eq!(pick_job(&jobs, "bp-lab-slow-sink").unwrap().id, "1cd3b48d0be42fe317d2a4ac91801fc4");
    // Running wins even over a newer run that is not running.
    let jobs = [
        job("11111111111111111111111111111111", "etl", "RUNNING", 1_000),
        job("22222222222222222222222222222222", "etl", "FAILED", 2_000),
    ];
    assert_eq!(pick_job(&jobs, "etl").unwrap().id, "11111111111111111111111111111111");
}

#[test]
fn when_no_run_is_running_the_newest_start_wins() {
    let jobs = parse_jobs_overview(&capture("hard-backpressure", "jobs-overview.json")).unwrap();
    // Two canceled runs of bp-lab-rocksdb.
    assert_eq!(pick_job(&jobs, "bp-lab-rocksdb").unwrap().id, "8c17cf9d2b8c253747de287bb8def048");
}

#[test]
fn the_reporter_sanitized_name_finds_the_job() {
    let jobs = parse_jobs_overview(&capture("chained-culprit", "jobs-overview.json")).unwrap();
    assert_eq!(pick_job(&jobs, "bp_lab_chained_culprit").unwrap().id, "f60c9c5e4aed970136f76a329a615e6f");
    // An exact name is preferred over a name that only sanitizes alike.
    let jobs = [
        job("11111111111111111111111111111111", "a_b", "RUNNING", 2_000),
        job("22222222222222222222222222222222", "a-b", "CANCELED", 1_000),
    ];
    assert_eq!(pick_job(&jobs, "a-b").unwrap().id, "22222222222222222222222222222222");
}

#[test]
fn an_exact_job_id_wins_over_names_and_unknown_names_give_none() {
    let jobs = parse_jobs_overview(&capture("hard-backpressure", "jobs-overview.json")).unwrap();
    // A canceled run, picked by id although a running run has the same name.
    assert_eq!(pick_job(&jobs, SLOW_SINK_ID).unwrap().state, "CANCELED");
    assert!(pick_job(&jobs, "no-such-job").is_none());
    assert!(pick_job(&[], "bp-lab-slow-sink").is_none());
}

#[test]
fn a_url_that_cannot_be_used_names_the_key_it_came_from() {
    // REPORT D7: a URL built by rest_url_template was blamed on `rest_url`.
    let fixed = FlinkRest::new(&cluster("ftp://jm:8081", None), &flink(1000, 2000)).unwrap_err();
    assert!(fixed.to_string().contains("rest_url is not an http(s) URL"), "{fixed}");
    let templated = FlinkCluster {
        name: "k8s".into(),
        rest_url_template: Some("ftp://{deployment}:8081".into()),
        ..Default::default()
    };
    let e = FlinkRest::at(&templated, &flink(1000, 2000), "ftp://fraud:8081").unwrap_err();
    assert_eq!(
        e.to_string(),
        "Flink cluster `k8s` cannot be used: the URL rest_url_template gave is not an http(s) URL"
    );
}

#[tokio::test]
async fn an_answer_over_sixteen_mib_is_refused_unread_with_a_length_and_cut_off_when_chunked() {
    use culprit::collect::flink_rest::MAX_ANSWER_BYTES;
    // With a Content-Length: 16 MiB + 1 byte of JSON-looking text, refused before its body.
    let server = MockServer::start().await;
    let body = format!("\"{}\"", "x".repeat(MAX_ANSWER_BYTES - 1));
    assert_eq!(body.len(), MAX_ANSWER_BYTES + 1);
    Mock::given(method("GET")).respond_with(json(body)).mount(&server).await;
    let rest = client(&server);
    let err = rest.plan(SLOW_SINK_ID).await.unwrap_err();
    assert!(matches!(err, FlinkError::Parse { .. }), "{err:?}");
    assert!(err.to_string().contains("larger than 16 MiB"), "{err}");
    assert_eq!(rest.requests(), 1, "a body too large is final, not retried");

    // Chunked, without a length, as a host streaming without end would: 1 MiB chunks; the
    // read stops at the 17th (17 MiB > 16 MiB) instead of holding what the host sends.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = sent.clone();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut head = [0u8; 4096];
        let _ = socket.read(&mut head).await;
        let _ = socket
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
            .await;
        let chunk = vec![b' '; 1 << 20];
        for _ in 0..64 {
            let frame = [format!("{:x}\r\n", chunk.len()).as_bytes(), &chunk, b"\r\n"].concat();
            if socket.write_all(&frame).await.is_err() {
                return;
            }
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let rest = FlinkRest::new(&cluster(&format!("http://{addr}"), None), &flink(20_000, 20_000)).unwrap();
    let err = rest.plan(SLOW_SINK_ID).await.unwrap_err();
    assert!(err.to_string().contains("larger than 16 MiB"), "{err}");
    let chunks = sent.load(std::sync::atomic::Ordering::SeqCst);
    assert!(chunks < 64, "the read went on to the end of what the host sent ({chunks} MiB)");
}

const RESCALED_ID: &str = "e13e489c122feea0de84f83199c0dd05";

fn rescale_data(file: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/rescales").join(file)).unwrap()
}

#[tokio::test]
async fn the_rescale_history_and_the_details_of_its_newest_rescale_take_two_requests() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("/jobs/{RESCALED_ID}/rescales/history")))
        .respond_with(json(capture("adaptive-rescale", "rescales-history.json")))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("/jobs/{RESCALED_ID}/rescales/details/fa208db8c8c8624158e684f4d2d64fe2")))
        .respond_with(json(rescale_data("details.json")))
        .mount(&server)
        .await;
    let rest = client(&server);
    let h = rest.rescales(RESCALED_ID).await.unwrap();
    assert_eq!(h.entries.len(), 2);
    let sink = h.entries[0].vertices.iter().find(|v| v.vertex == "slow-sink: Writer").unwrap();
    assert_eq!((sink.from, sink.to), (Some(4), Some(2)));
    assert_eq!(rest.requests(), 2);
}

#[tokio::test]
async fn a_history_with_only_the_first_schedule_asks_no_details_and_missing_details_leave_the_history() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("/jobs/{RESCALED_ID}/rescales/history")))
        .respond_with(json(rescale_data("history-before.json")))
        .mount(&server)
        .await;
    let rest = client(&server);
    assert_eq!(rest.rescales(RESCALED_ID).await.unwrap().entries.len(), 1);
    assert_eq!(rest.requests(), 1, "no rescale of the running job: no details asked");

    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("/jobs/{RESCALED_ID}/rescales/history")))
        .respond_with(json(rescale_data("history-after.json")))
        .mount(&server)
        .await;
    // /rescales/details answers 404 (unmounted): the history stands without the vertices.
    let rest = client(&server);
    let h = rest.rescales(RESCALED_ID).await.unwrap();
    assert_eq!(h.entries.len(), 2);
    assert!(h.entries[0].vertices.is_empty());
    assert_eq!(rest.requests(), 2);
}

#[tokio::test]
async fn flinks_rescales_unavailable_answer_is_a_404_after_one_request_and_garbage_a_parse_error() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("/jobs/{RESCALED_ID}/rescales/history")))
        .respond_with(
            ResponseTemplate::new(404)
                .set_body_raw(rescale_data("history-default-scheduler-404.json"), "application/json"),
        )
        .mount(&server)
        .await;
    let rest = client(&server);
    let e = rest.rescales(RESCALED_ID).await.unwrap_err();
    assert_eq!(e.status(), Some(404), "{e}");
    assert_eq!(rest.requests(), 1, "a 404 is not retried");

    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("/jobs/{RESCALED_ID}/rescales/history")))
        .respond_with(ResponseTemplate::new(200).set_body_raw("<html>proxy</html>", "text/html"))
        .mount(&server)
        .await;
    let rest = client(&server);
    assert!(matches!(rest.rescales(RESCALED_ID).await, Err(FlinkError::Parse { .. })));
}

/// A JobManager stand-in for every REST base URL at once (one per first path segment):
/// answers the hard-backpressure capture after `hold`, the rescale history 404, and
/// counts the requests in flight at each base URL (now, and the most at once).
struct CountingJobManagers {
    url: String,
    /// First path segment → (in flight now, most at once).
    counts: std::sync::Arc<std::sync::Mutex<std::collections::BTreeMap<String, (usize, usize)>>>,
    /// Over every base URL: (in flight now, most at once).
    overall: std::sync::Arc<std::sync::Mutex<(usize, usize)>>,
}

impl CountingJobManagers {
    async fn start(hold: Duration) -> CountingJobManagers {
        use axum::http::{StatusCode, Uri};
        use axum::response::IntoResponse;
        let counts: std::sync::Arc<std::sync::Mutex<std::collections::BTreeMap<String, (usize, usize)>>> =
            Default::default();
        let overall: std::sync::Arc<std::sync::Mutex<(usize, usize)>> = Default::default();
        let (c, o) = (counts.clone(), overall.clone());
        let app = axum::Router::new().fallback(move |uri: Uri| {
            let (counts, overall) = (c.clone(), o.clone());
            async move {
                let path = uri.path().to_string();
                let (prefix, rest) = path.trim_start_matches('/').split_once('/').unwrap_or(("", ""));
                let prefix = prefix.to_string();
                let bump = |delta: isize| {
                    let mut m = counts.lock().unwrap();
                    let e = m.entry(prefix.clone()).or_default();
                    e.0 = e.0.checked_add_signed(delta).unwrap();
                    e.1 = e.1.max(e.0);
                    let mut all = overall.lock().unwrap();
                    all.0 = all.0.checked_add_signed(delta).unwrap();
                    all.1 = all.1.max(all.0);
                };
                bump(1);
                tokio::time::sleep(hold).await;
                let file = if rest == "jobs/overview" {
                    Some("jobs-overview.json")
                } else if rest.ends_with("/plan") {
                    Some("plan.json")
                } else if rest.ends_with("/checkpoints/config") {
                    Some("checkpoints-config.json")
                } else if rest.ends_with("/exceptions") {
                    Some("exceptions.json")
                } else {
                    None
                };
                let answer = match file {
                    Some(f) => {
                        ([(axum::http::header::CONTENT_TYPE, "application/json")], capture("hard-backpressure", f))
                            .into_response()
                    }
                    None => (StatusCode::NOT_FOUND, r#"{"errors":["Not found."]}"#).into_response(),
                };
                bump(-1);
                answer
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        CountingJobManagers { url, counts, overall }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_diagnoses_at_once_keep_each_jobmanager_at_most_max_concurrency_requests_and_all_are_answered() {
    let jm = CountingJobManagers::start(Duration::from_millis(25)).await;
    // A fixed cluster under `/fixed`, and a templated one whose jobs each fill in a URL
    // of their own (a path prefix of the stand-in per deployment; a template's host must
    // be a DNS name, so `localhost`).
    let local = jm.url.replace("://127.0.0.1:", "://localhost:");
    let text = format!(
        "[flink]\ntimeout = \"10s\"\ndeadline = \"60s\"\nmax_concurrency = 3\n\n\
         [[flink.clusters]]\nname = \"fixed\"\nmatch = {{ env = \"a\" }}\nrest_url = \"{}/fixed\"\n\n\
         [[flink.clusters]]\nname = \"k8s\"\nrest_url_template = \"{local}/{{deployment}}-rest.{{namespace}}\"\n",
        jm.url
    );
    let config = culprit::config::Config::from_toml(&text, "bound.toml").unwrap();
    let live = std::sync::Arc::new(culprit::service::pipeline::Live::new(config).unwrap());
    let labels = |pairs: &[(&str, &str)]| -> std::collections::BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    };
    // 20 diagnoses on `fixed`, 30 on `k8s` over three deployments: 50 at once, each asking
    // the job list and then plan, checkpoint config, exceptions and rescales at once.
    let mut requests = Vec::new();
    for i in 0..50 {
        let deployment = format!("d{}", i % 3);
        requests.push(if i < 20 {
            labels(&[("env", "a")])
        } else {
            labels(&[("app", deployment.as_str()), ("namespace", "ns")])
        });
    }
    // Samples the load /metrics would show while the diagnoses run.
    let sampling = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let sampler = {
        let (live, sampling) = (live.clone(), sampling.clone());
        tokio::spawn(async move {
            let mut most: std::collections::BTreeMap<String, (usize, usize)> = Default::default();
            while sampling.load(std::sync::atomic::Ordering::Relaxed) {
                for (cluster, load) in live.flink_load() {
                    let e = most.entry(cluster).or_default();
                    *e = (e.0.max(load.in_flight), e.1.max(load.waiting));
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            most
        })
    };
    let tasks: Vec<_> = requests
        .into_iter()
        .map(|l| {
            let live = live.clone();
            tokio::spawn(async move { live.job_context(Some(SLOW_SINK_ID), &l, &l).await })
        })
        .collect();
    for t in tasks {
        let cx = t.await.unwrap();
        assert!(cx.graph.is_some() && cx.checkpoint_config.is_some() && cx.exceptions.is_some(), "{:?}", cx.notes);
    }
    sampling.store(false, std::sync::atomic::Ordering::Relaxed);
    let most = sampler.await.unwrap();

    let counts = jm.counts.lock().unwrap().clone();
    let prefixes: Vec<&str> = counts.keys().map(String::as_str).collect();
    assert_eq!(prefixes, ["d0-rest.ns", "d1-rest.ns", "d2-rest.ns", "fixed"]);
    for (prefix, (now, peak)) in &counts {
        assert_eq!(*now, 0, "{prefix}");
        assert!((1..=3).contains(peak), "{prefix}: {peak} requests at once, the bound is 3");
    }
    // The bound is per JobManager, not over all of them: four of them together had more
    // than one's three at once (250 requests, 25 ms each, most of them waiting).
    let overall_peak = jm.overall.lock().unwrap().1;
    assert!(overall_peak > 3, "{overall_peak}");
    // While they ran, culprit's own counts: `fixed` at most 3 in flight with the rest
    // waiting (20 diagnoses asked their job list at once); `k8s` at most 3 per
    // deployment, 3 × 3 = 9 over the cluster.
    assert!(most["fixed"].0 <= 3 && most["fixed"].1 > 0, "{most:?}");
    assert!(most["k8s"].0 <= 9 && most["k8s"].1 > 0, "{most:?}");
    // Afterwards nothing is in flight or waiting; the peaks are per JobManager.
    for (cluster, load) in live.flink_load() {
        assert_eq!((load.in_flight, load.waiting, load.bound), (0, 0, 3), "{cluster}");
        assert!((1..=3).contains(&load.peak), "{cluster}: {load:?}");
    }
}

#[tokio::test]
async fn a_request_that_gets_no_slot_before_its_deadline_is_not_sent_and_says_why() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/jobs/overview"))
        .respond_with(json(capture("hard-backpressure", "jobs-overview.json")).set_delay(Duration::from_millis(1500)))
        .mount(&server)
        .await;
    // Two clients of one JobManager sharing its one slot; the second's deadline (300 ms)
    // ends while the first's answer (1.5 s) still holds it.
    let loads = culprit::collect::rest_load::RestLoads::new(1);
    let (slow, late) = (flink(5_000, 5_000), flink(300, 300));
    let first = FlinkRest::sharing(&cluster(&server.uri(), None), &slow, &server.uri(), &loads).unwrap();
    let second = FlinkRest::sharing(&cluster(&server.uri(), None), &late, &server.uri(), &loads).unwrap();
    let (a, b) = tokio::join!(first.jobs(), async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        second.jobs().await
    });
    assert_eq!(a.unwrap().len(), 8);
    let e = b.unwrap_err();
    assert!(matches!(e, FlinkError::NoSlot { bound: 1, .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "GET /jobs/overview was not sent to Flink cluster `lab`: culprit had flink.max_concurrency (1) requests in flight there until the deadline"
    );
    assert_eq!((second.requests(), server.received_requests().await.unwrap().len()), (0, 1));
}
