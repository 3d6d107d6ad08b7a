//! The Prometheus client against a local HTTP server: envelope, retries, classification,
//! auth headers, tenant header, and secrets that never show.

use std::time::{Duration, Instant};

use culprit::collect::collector::TooLarge;
use culprit::collect::prometheus::{MAX_ANSWER_BYTES, Prometheus};
use culprit::config::{HttpAuth, Millis, PrometheusConfig, SecretSource};
use wiremock::matchers::{body_string_contains, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const OK: &str = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"job_id":"j"},"value":[1795948587.78,"997"]}]},"warnings":["some data was dropped"]}"#;

fn config(url: &str) -> PrometheusConfig {
    PrometheusConfig {
        url: url.into(),
        timeout: Millis(500),
        deadline: Millis::from_secs(3),
        auth: None,
        tenant: None,
        max_answer_bytes: MAX_ANSWER_BYTES,
        max_answer_bytes_in_flight: culprit::config::PROMETHEUS_MAX_ANSWER_BYTES_IN_FLIGHT,
        max_concurrency: culprit::config::PROMETHEUS_MAX_CONCURRENCY,
    }
}

#[tokio::test]
async fn an_instant_query_posts_the_form_with_time_and_timeout_and_reads_warnings() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/prefix/api/v1/query"))
        .and(body_string_contains("time=1795948587.780"))
        .and(body_string_contains("timeout=500ms"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(OK, "application/json"))
        .expect(1)
        .mount(&server)
        .await;
    let p = Prometheus::new(&config(&format!("{}/prefix/", server.uri()))).unwrap();
    let a = p.instant("up", 1_795_948_587_780).await.unwrap();
    assert_eq!(a.series[0].points, vec![(1_795_948_587_780, 997.0)]);
    assert_eq!(a.warnings, ["some data was dropped"]);
}

#[tokio::test]
async fn a_503_then_success_is_retried_and_counted() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503).set_body_string("overloaded"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(OK, "application/json"))
        .mount(&server)
        .await;
    let p = Prometheus::new(&config(&server.uri())).unwrap();
    assert!(p.instant("up", 0).await.is_ok());
    assert_eq!(p.requests(), 2);
}

#[tokio::test]
async fn a_bad_query_answered_400_is_final_after_one_request() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(400)
                .set_body_raw(r#"{"status":"error","errorType":"bad_data","error":"parse error"}"#, "application/json"),
        )
        .mount(&server)
        .await;
    let p = Prometheus::new(&config(&server.uri())).unwrap();
    let e = p.instant("up{", 0).await.unwrap_err();
    assert!(!e.retryable && e.status == Some(400), "{e:?}");
    // Prometheus' documented `errorType`, not its message (that is logged).
    assert!(e.message.ends_with("HTTP 400 bad query (bad_data)"), "{}", e.message);
    assert_eq!(p.requests(), 1);
}

#[tokio::test]
async fn a_422_is_final_too() {
    let server = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(422).set_body_string("{}")).mount(&server).await;
    let p = Prometheus::new(&config(&server.uri())).unwrap();
    assert!(!p.instant("up", 0).await.unwrap_err().retryable);
    assert_eq!(p.requests(), 1);
}

#[tokio::test]
async fn an_unreachable_backend_is_retried_until_the_deadline_then_says_so() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let p = Prometheus::new(&PrometheusConfig {
        deadline: Millis::from_secs(1),
        ..config(&format!("http://127.0.0.1:{port}"))
    })
    .unwrap();
    let started = Instant::now();
    let e = p.instant("up", 0).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    assert!(e.retryable && p.requests() > 1, "{e:?} after {} requests", p.requests());
    // The last failure is kept: the message says why, not only that time ran out.
    assert!(e.message.ends_with("(retried for the 1 s deadline)"), "{}", e.message);
    assert!(e.message.contains("onnect"), "{}", e.message);
}

#[tokio::test]
async fn bearer_auth_and_the_tenant_header_are_sent_and_the_token_never_shows() {
    let server = MockServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "s3cr3t-t0ken\n").unwrap();
    Mock::given(method("POST"))
        .and(header("authorization", "Bearer s3cr3t-t0ken"))
        .and(header("x-scope-orgid", "team-a"))
        .respond_with(ResponseTemplate::new(401).set_body_string("token s3cr3t-t0ken rejected"))
        .expect(1)
        .mount(&server)
        .await;
    let p = Prometheus::new(&PrometheusConfig {
        auth: Some(HttpAuth::Bearer { token: SecretSource::File(token_file) }),
        tenant: Some("team-a".into()),
        ..config(&server.uri())
    })
    .unwrap();
    let e = p.instant("up", 0).await.unwrap_err();
    assert!(!e.retryable);
    assert!(!format!("{e} {e:?} {p:?}").contains("s3cr3t"), "{e} {e:?} {p:?}");
}

#[tokio::test]
async fn basic_auth_is_sent() {
    let server = MockServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let pw = dir.path().join("pw");
    std::fs::write(&pw, "hunter2").unwrap();
    // base64("culprit:hunter2") = Y3VscHJpdDpodW50ZXIy
    Mock::given(header("authorization", "Basic Y3VscHJpdDpodW50ZXIy"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(OK, "application/json"))
        .expect(1)
        .mount(&server)
        .await;
    let p = Prometheus::new(&PrometheusConfig {
        auth: Some(HttpAuth::Basic { username: "culprit".into(), password: SecretSource::File(pw) }),
        ..config(&server.uri())
    })
    .unwrap();
    assert!(p.instant("up", 0).await.is_ok());
}

/// A matrix answer of `series` series with `points` points each, and its size in bytes.
fn matrix(series: usize, points: usize) -> String {
    let one = |i: usize| {
        let values: Vec<String> = (0..points).map(|k| format!("[{}.5,\"{}\"]", 1_795_000_000 + 5 * k, i + k)).collect();
        format!(r#"{{"metric":{{"task_id":"v{i}","subtask_index":"0"}},"values":[{}]}}"#, values.join(","))
    };
    let all: Vec<String> = (0..series).map(one).collect();
    format!(r#"{{"status":"success","data":{{"resultType":"matrix","result":[{}]}}}}"#, all.join(","))
}

#[tokio::test]
async fn an_answer_over_the_maximum_size_is_refused_naming_the_backend_and_the_size() {
    let body = matrix(100, 60);
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(body.clone(), "application/json"))
        .mount(&server)
        .await;
    // One byte under the answer's size: refused from its Content-Length, once, as too
    // large (the collector then asks in smaller pieces), not retried.
    let p = Prometheus::new(&PrometheusConfig { max_answer_bytes: body.len() - 1, ..config(&server.uri()) }).unwrap();
    let e = p.range("up", 0, 295_000, 5_000).await.unwrap_err();
    assert_eq!(
        e.message,
        format!(
            "{}: the answer is {} bytes (Content-Length), over prometheus.max_answer_bytes ({} bytes, 0 MiB): the query selects too much",
            server.uri(),
            body.len(),
            body.len() - 1
        )
    );
    assert!(!e.retryable && e.too_large == Some(TooLarge::Series), "{e:?}");
    assert_eq!(p.requests(), 1);
    // At exactly its size it is read: 100 series × 60 points, typed.
    let p = Prometheus::new(&PrometheusConfig { max_answer_bytes: body.len(), ..config(&server.uri()) }).unwrap();
    let a = p.range("up", 0, 295_000, 5_000).await.unwrap();
    assert_eq!((a.series.len(), a.series.iter().map(|s| s.points.len()).sum::<usize>()), (100, 6000));
    // Series 7, point 3: t = 1795000015.5 s, value 7 + 3 = 10.
    assert_eq!(a.series[7].points[3], (1_795_000_015_500, 10.0));
    assert_eq!(a.series[7].label("task_id"), "v7");
}

#[tokio::test]
async fn a_chunked_answer_without_content_length_is_cut_off_at_the_maximum_size() {
    // A server that streams the answer in chunks and never says its length.
    let body = matrix(50, 60);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let served = body.clone();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut conn, _)) = listener.accept().await {
            let served = served.clone();
            tokio::spawn(async move {
                let mut request = vec![0u8; 64 * 1024];
                let _ = conn.read(&mut request).await;
                let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n";
                let _ = conn.write_all(head.as_bytes()).await;
                for chunk in served.as_bytes().chunks(4096) {
                    let _ = conn.write_all(format!("{:x}\r\n", chunk.len()).as_bytes()).await;
                    let _ = conn.write_all(chunk).await;
                    let _ = conn.write_all(b"\r\n").await;
                }
                let _ = conn.write_all(b"0\r\n\r\n").await;
            });
        }
    });
    let limit = body.len() / 2;
    let p = Prometheus::new(&PrometheusConfig { max_answer_bytes: limit, ..config(&url) }).unwrap();
    let e = p.range("up", 0, 295_000, 5_000).await.unwrap_err();
    assert!(
        e.message
            .starts_with(&format!("{url}: the answer is more than {limit} bytes, over prometheus.max_answer_bytes")),
        "{}",
        e.message
    );
    assert!(!e.retryable && e.too_large == Some(TooLarge::Series), "{e:?}");
    let p = Prometheus::new(&config(&url)).unwrap();
    assert_eq!(p.range("up", 0, 295_000, 5_000).await.unwrap().series.len(), 50);
}

/// A Prometheus (a local stand-in) that answers every query 503, read by the live pipeline
/// with a 1 s `prometheus.deadline`.
async fn failing_live() -> (MockServer, culprit::service::pipeline::Live) {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503).set_body_string("overloaded"))
        .mount(&server)
        .await;
    let text = format!("[prometheus]\nurl = \"{}\"\ntimeout = \"500ms\"\ndeadline = \"1s\"\n", server.uri());
    let config = culprit::config::Config::from_toml(&text, "retry.toml").unwrap();
    (server, culprit::service::pipeline::Live::new(config).unwrap())
}

/// The worker retries whole diagnoses (`service.diagnose_retry_for`), so its diagnosis
/// tries each request once: no retry nested inside a retried diagnosis.
#[tokio::test]
async fn a_diagnosis_for_the_worker_tries_each_request_once_and_leaves_retrying_to_the_worker() {
    let (_server, live) = failing_live().await;
    let request =
        culprit::model::request::DiagnosisRequest { job: Some("fraud-detection".into()), ..Default::default() };
    let labels = Default::default();
    let started = Instant::now();
    let err = live.diagnosis(&request, &labels, 1_795_948_587_780).await.unwrap_err();
    assert!(err.to_string().contains("HTTP 503"), "{err}");
    // The job lookup is the first round: the uptime range and the store's newest sample,
    // two requests, each once; the uptime failing stops the diagnosis there.
    assert_eq!(live.prometheus().unwrap().requests(), 2);
    assert!(started.elapsed() < Duration::from_millis(900), "{:?}", started.elapsed());
}

/// Where nothing retries the diagnosis (the command line, the HTTP API), each request is
/// retried until `prometheus.deadline`, as before.
#[tokio::test]
async fn a_diagnosis_without_a_worker_retries_each_request_until_the_deadline() {
    let (_server, live) = failing_live().await;
    let request =
        culprit::model::request::DiagnosisRequest { job: Some("fraud-detection".into()), ..Default::default() };
    let err = live.diagnose(&request, &Default::default(), 1_795_948_587_780).await.unwrap_err();
    assert!(err.to_string().contains("deadline"), "{err}");
    // Backoff from 100 ms within 1 s: at least two attempts of each of the two requests.
    assert!(live.prometheus().unwrap().requests() >= 4, "{}", live.prometheus().unwrap().requests());
}

/// A Prometheus stand-in that answers every query after `delay` and counts how many it
/// holds at once (the most, ever).
async fn counting_prometheus(delay: Duration) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let now = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let (n, m) = (now.clone(), most.clone());
    let app = axum::Router::new().route(
        "/api/v1/query",
        axum::routing::post(move || {
            let (n, m) = (n.clone(), m.clone());
            async move {
                let held = n.fetch_add(1, Ordering::SeqCst) + 1;
                m.fetch_max(held, Ordering::SeqCst);
                tokio::time::sleep(delay).await;
                n.fetch_sub(1, Ordering::SeqCst);
                ([(axum::http::header::CONTENT_TYPE, "application/json")], OK)
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, most)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forty_queries_at_once_reach_prometheus_at_most_max_concurrency_at_a_time_and_all_are_answered() {
    let (url, most) = counting_prometheus(Duration::from_millis(100)).await;
    let client = std::sync::Arc::new(
        Prometheus::new(&PrometheusConfig { max_concurrency: 3, deadline: Millis::from_secs(30), ..config(&url) })
            .unwrap(),
    );
    let queries: Vec<_> = (0..40)
        .map(|i| {
            let c = client.clone();
            tokio::spawn(async move { c.instant(&format!("up{{i=\"{i}\"}}"), 1_795_948_587_000).await })
        })
        .collect();
    // While they run: some wait in culprit, never more than 3 at Prometheus.
    tokio::time::sleep(Duration::from_millis(150)).await;
    let load = client.load();
    assert!(load.in_flight <= 3 && load.waiting > 0 && load.bound == 3, "{load:?}");
    for q in queries {
        assert!(q.await.unwrap().is_ok());
    }
    // 40 queries of 100 ms, 3 at a time: all answered, Prometheus never held more than 3,
    // and the client's peak says so too.
    assert_eq!(most.load(std::sync::atomic::Ordering::SeqCst), 3);
    let load = client.load();
    assert_eq!((load.in_flight, load.waiting, load.peak), (0, 0, 3));
    assert_eq!(client.requests(), 40);
}

#[tokio::test]
async fn waiting_for_a_slot_counts_against_the_deadline() {
    let (url, _) = counting_prometheus(Duration::from_secs(2)).await;
    let client = std::sync::Arc::new(
        Prometheus::new(&PrometheusConfig {
            max_concurrency: 1,
            timeout: Millis::from_secs(5),
            deadline: Millis(700),
            ..config(&url)
        })
        .unwrap(),
    );
    let first = {
        let c = client.clone();
        // One attempt, bounded by the 5 s timeout, not by the deadline.
        tokio::spawn(async move {
            c.instant_with("up", 1_795_948_587_000, culprit::collect::prometheus::Attempts::Once).await
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    // The only slot is held for 2 s: the second query gives up at its 0.7 s deadline,
    // without ever reaching Prometheus, and the slot's count comes back.
    let started = Instant::now();
    let e = client.instant("up", 1_795_948_587_000).await.unwrap_err();
    assert!(e.message.contains("deadline"), "{}", e.message);
    assert!(started.elapsed() < Duration::from_millis(1_500), "{:?}", started.elapsed());
    assert_eq!(client.load().waiting, 0);
    assert!(first.await.unwrap().is_ok());
    assert_eq!(client.requests(), 1);
}
