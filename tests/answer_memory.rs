//! How Prometheus answers are read and held: parsed into typed series as their chunks
//! arrive (the same series as parsing the whole body), and within the process' budget of
//! answer bytes (`prometheus.max_answer_bytes_in_flight`) however many are read at once.
//! The answers come from a local HTTP server writing them in pieces, chunked or with a
//! `Content-Length`, and from a real Prometheus holding a capture.

mod support;

use std::time::Duration;

use culprit::collect::collector::TooLarge;
use culprit::collect::prometheus::{Answer, MAX_ANSWER_BYTES, Prometheus, parse_answer, what_went_wrong};
use culprit::config::{Millis, PrometheusConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn config(url: &str) -> PrometheusConfig {
    PrometheusConfig {
        url: url.into(),
        timeout: Millis::from_secs(5),
        deadline: Millis::from_secs(10),
        auth: None,
        tenant: None,
        max_answer_bytes: MAX_ANSWER_BYTES,
        max_answer_bytes_in_flight: culprit::config::PROMETHEUS_MAX_ANSWER_BYTES_IN_FLIGHT,
        max_concurrency: culprit::config::PROMETHEUS_MAX_CONCURRENCY,
    }
}

/// How the server writes an answer.
#[derive(Clone, Copy)]
struct Send {
    /// Bytes per write (and per chunk when chunked).
    piece: usize,
    with_length: bool,
}

/// A server answering every request with `body`, written `send.piece` bytes at a time.
async fn serve(body: String, send: Send) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let body = body.clone();
            tokio::spawn(async move {
                let mut request = vec![0u8; 64 * 1024];
                let _ = conn.read(&mut request).await;
                let framing = if send.with_length {
                    format!("content-length: {}", body.len())
                } else {
                    "transfer-encoding: chunked".into()
                };
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{framing}\r\nconnection: close\r\n\r\n"
                );
                let _ = conn.write_all(head.as_bytes()).await;
                for piece in body.as_bytes().chunks(send.piece) {
                    let written = if send.with_length {
                        conn.write_all(piece).await
                    } else {
                        let mut framed = format!("{:x}\r\n", piece.len()).into_bytes();
                        framed.extend_from_slice(piece);
                        framed.extend_from_slice(b"\r\n");
                        conn.write_all(&framed).await
                    };
                    if written.is_err() {
                        return;
                    }
                }
                if !send.with_length {
                    let _ = conn.write_all(b"0\r\n\r\n").await;
                }
            });
        }
    });
    url
}

/// `series` series of `points` points each, labelled like Flink's subtasks.
fn matrix(series: usize, points: usize) -> String {
    let one = |i: usize| {
        let values: Vec<String> =
            (0..points).map(|k| format!(r#"[{}.5,"{}"]"#, 1_795_000_000 + k * 5, i * 1000 + k)).collect();
        format!(
            r#"{{"metric":{{"__name__":"flink_taskmanager_job_task_busyTimeMsPerSecond","task_id":"v{i}","subtask_index":"{}"}},"values":[{}]}}"#,
            i % 8,
            values.join(",")
        )
    };
    let all: Vec<String> = (0..series).map(one).collect();
    format!(r#"{{"status":"success","data":{{"resultType":"matrix","result":[{}]}}}}"#, all.join(","))
}

/// A series as comparable values: its labels and its points with the values' bits.
type Series = (Vec<(String, String)>, Vec<(i64, u64)>);

/// An answer as comparable values: NaN equals NaN (bit for bit).
fn comparable(a: &Answer) -> (Vec<Series>, Vec<String>) {
    let series = a
        .series
        .iter()
        .map(|s| {
            let labels = s.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            (labels, s.points.iter().map(|(t, v)| (*t, v.to_bits())).collect())
        })
        .collect();
    (series, a.warnings.clone())
}

/// Every value form, escapes in labels, `result` before `resultType`, and warnings.
const FIXTURE: &str = r#"{"data":{"result":[
  {"metric":{"task_name":"Sink: \"quoted\" \u00e9\\ tab\t","subtask_index":"0"},
   "values":[[1795000000,"NaN"],[1795000005.25,"+Inf"],[1795000010.125,"-Inf"],[1795000015,"1e-300"],
             [1795000020,"-0"],[1795000025,"12345678901234567890"],[1795000030,"0.1"]]},
  {"metric":{},"values":[[1795000000.001,"3"]]}],
  "resultType":"matrix"},"warnings":["partial \"data\"","another"],"status":"success"}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_read_in_pieces_of_any_size_gives_the_typed_series_of_the_whole_body() {
    let whole = comparable(&parse_answer(FIXTURE.as_bytes(), "p").unwrap());
    assert_eq!(whole.0.len(), 2);
    // One byte at a time splits every token, escape and number; 7 bytes at odd places;
    // 4096 bytes, one piece.
    for piece in [1, 7, 4096] {
        for with_length in [false, true] {
            let url = serve(FIXTURE.to_string(), Send { piece, with_length }).await;
            let p = Prometheus::new(&config(&url)).unwrap();
            let streamed = p.range("up", 0, 295_000, 5_000).await.unwrap();
            assert_eq!(comparable(&streamed), whole, "pieces of {piece} bytes, with length {with_length}");
            assert_eq!(p.answer_budget().in_use(), 0);
        }
    }
    // A larger answer across many network reads: 2,000 series × 60 points.
    let body = matrix(2000, 60);
    let url = serve(body.clone(), Send { piece: 1500, with_length: false }).await;
    let p = Prometheus::new(&config(&url)).unwrap();
    let streamed = p.range("up", 0, 295_000, 5_000).await.unwrap();
    assert_eq!(comparable(&streamed), comparable(&parse_answer(body.as_bytes(), &url).unwrap()));
    // Series 1234, point 59: t = 1795000000 + 59 × 5 + 0.5 s, value 1234 × 1000 + 59.
    assert_eq!(streamed.series[1234].points[59], (1_795_000_295_500, 1_234_059.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_answer_read_in_pieces_gives_the_error_of_the_whole_body_parse() {
    // A point of three parts, and an answer that is not JSON: final errors, worded as
    // parsing the whole body words them (same line and column).
    for body in [r#"{"status":"success","data":{"resultType":"vector","result":[{"value":[1,"2",3]}]}}"#, "<html>"] {
        let url = serve(body.to_string(), Send { piece: 3, with_length: false }).await;
        let p = Prometheus::new(&config(&url)).unwrap();
        let e = p.instant("up", 0).await.unwrap_err();
        assert_eq!(e.message, parse_answer(body.as_bytes(), &url).unwrap_err().message);
        assert!(e.message.contains("the answer is not a Prometheus API response"), "{}", e.message);
        assert!(!e.retryable && e.too_large.is_none(), "{e:?}");
        assert_eq!(p.requests(), 1);
    }
}

/// Reads `n` copies of the answer at `url` at once through one client.
async fn at_once(p: &Prometheus, n: usize) -> Vec<Result<Answer, culprit::collect::prometheus::PromError>> {
    futures::future::join_all((0..n).map(|_| p.range("up", 0, 295_000, 5_000))).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_big_answers_with_a_length_are_read_two_at_a_time_within_the_budget() {
    let body = matrix(400, 60);
    let size = body.len();
    let expected = comparable(&parse_answer(body.as_bytes(), "p").unwrap());
    let url = serve(body, Send { piece: 16 * 1024, with_length: true }).await;
    // The cap is the answer's size; the budget two and a half answers: each takes its
    // whole Content-Length at once, so at most two are held (2 × size ≤ 2.5 × size < 3 ×
    // size), and the other two wait their turn.
    let budget = size * 5 / 2;
    let p = Prometheus::new(&PrometheusConfig {
        max_answer_bytes: size,
        max_answer_bytes_in_flight: budget,
        max_concurrency: culprit::config::PROMETHEUS_MAX_CONCURRENCY,
        ..config(&url)
    })
    .unwrap();
    for answer in at_once(&p, 4).await {
        assert_eq!(comparable(&answer.unwrap()), expected);
    }
    let b = p.answer_budget();
    assert!(b.peak() >= size && b.peak() <= 2 * size, "peak {} of {budget}, answers of {size}", b.peak());
    assert_eq!(b.peak() % size, 0, "whole answers only: {}", b.peak());
    assert_eq!((b.in_use(), b.total()), (0, budget));
    assert_eq!(p.requests(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_big_chunked_answers_at_once_never_hold_more_than_the_budget() {
    let body = matrix(400, 60);
    let size = body.len();
    let expected = comparable(&parse_answer(body.as_bytes(), "p").unwrap());
    let url = serve(body, Send { piece: 4096, with_length: false }).await;
    // 4 × size asked of a budget of 2.5 × size: answers take their bytes as they come,
    // wait for more when it is all taken, and one that gets none within its 2 s timeout
    // is refused as too large for now (it would be asked again in pieces).
    let budget = size * 5 / 2;
    let p = Prometheus::new(&PrometheusConfig {
        timeout: Millis::from_secs(2),
        max_answer_bytes: size,
        max_answer_bytes_in_flight: budget,
        max_concurrency: culprit::config::PROMETHEUS_MAX_CONCURRENCY,
        ..config(&url)
    })
    .unwrap();
    let answers = at_once(&p, 4).await;
    let mut read = 0;
    for answer in answers {
        match answer {
            Ok(a) => {
                assert_eq!(comparable(&a), expected);
                read += 1;
            }
            Err(e) => {
                assert!(e.message.contains(": no memory for the answer"), "{}", e.message);
                assert_eq!(e.too_large, Some(TooLarge::Series));
            }
        }
    }
    let b = p.answer_budget();
    eprintln!("{read} of 4 read, peak {} of {budget}", p.answer_budget().peak());
    assert!(read >= 1, "no answer was read");
    assert!(b.peak() >= size && b.peak() <= budget, "peak {} of {budget}, answers of {size}", b.peak());
    assert_eq!(b.in_use(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_waits_for_budget_held_elsewhere_and_is_read_once_it_is_freed() {
    let body = matrix(50, 60);
    let url = serve(body.clone(), Send { piece: 4096, with_length: false }).await;
    let p = Prometheus::new(&PrometheusConfig { max_answer_bytes_in_flight: body.len(), ..config(&url) }).unwrap();
    // A stand-in for another diagnosis' answer: all of the budget, given back after 300 ms
    // (the answer's timeout is 5 s).
    let other = p.answer_budget().hold();
    other.take(body.len(), Duration::ZERO).await.unwrap();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        drop(other);
    });
    let a = p.range("up", 0, 295_000, 5_000).await.unwrap();
    assert_eq!(a.series.len(), 50);
    assert_eq!((p.answer_budget().in_use(), p.answer_budget().peak()), (0, body.len()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_that_gets_no_budget_within_its_timeout_is_too_large_for_now() {
    let body = matrix(50, 60);
    let size = body.len();
    for with_length in [false, true] {
        let url = serve(body.clone(), Send { piece: 4096, with_length }).await;
        let budget = size + 1000;
        let p = Prometheus::new(&PrometheusConfig {
            timeout: Millis::from_secs(1),
            max_answer_bytes: size,
            max_answer_bytes_in_flight: budget,
            max_concurrency: culprit::config::PROMETHEUS_MAX_CONCURRENCY,
            ..config(&url)
        })
        .unwrap();
        // A stand-in for other answers holding all but 1000 bytes, longer than the timeout.
        let other = p.answer_budget().hold();
        other.take(size, Duration::ZERO).await.unwrap();
        let e = p.range("up", 0, 295_000, 5_000).await.unwrap_err();
        // Chunked, the answer takes what is free as it comes; with its length, all at once.
        let expected = if with_length {
            format!("after 0 bytes of it, {size} more did not fit")
        } else {
            "more did not fit".to_string()
        };
        assert!(e.message.contains(&expected), "{}", e.message);
        assert!(e.message.starts_with(&format!("{url}: no memory for the answer in time: after ")), "{}", e.message);
        assert!(
            e.message.ends_with(&format!(
                "in prometheus.max_answer_bytes_in_flight ({budget} bytes, 0 MiB), held by the other answers being read"
            )),
            "{}",
            e.message
        );
        // Too large for now: not retried as it is; the collector asks for smaller pieces.
        assert!(!e.retryable && e.too_large == Some(TooLarge::Series), "{e:?}");
        assert_eq!(p.requests(), 1);
        assert_eq!(p.answer_budget().in_use(), size, "the answer gave back what it took");
        assert_eq!(
            what_went_wrong(&url, &e),
            format!("answered more than culprit may read or hold ({})", &e.message[url.len() + 2..])
        );
        drop(other);
        assert_eq!(p.answer_budget().in_use(), 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_over_the_cap_is_said_to_be_too_large_not_unreachable() {
    let body = matrix(50, 60);
    for with_length in [false, true] {
        let url = serve(body.clone(), Send { piece: 4096, with_length }).await;
        let limit = body.len() / 2;
        let p = Prometheus::new(&PrometheusConfig { max_answer_bytes: limit, ..config(&url) }).unwrap();
        // The readiness probe reads the same way (the attack's proxy answered every query so).
        let e = p.ping(Duration::from_secs(5)).await.unwrap_err();
        let size = if with_length {
            format!("{} bytes (Content-Length)", body.len())
        } else {
            format!("more than {limit} bytes")
        };
        let detail = format!(
            "the answer is {size}, over prometheus.max_answer_bytes ({limit} bytes, 0 MiB): the query selects too much"
        );
        assert_eq!(e.message, format!("{url}: {detail}"));
        assert_eq!(what_went_wrong(&url, &e), format!("answered more than culprit may read or hold ({detail})"));
        assert_eq!(p.answer_budget().in_use(), 0);
        // Chunked, the bytes read before the cap were in the budget; with a length none were.
        assert_eq!(p.answer_budget().peak() > 0, !with_length);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_prometheus_answer_read_in_chunks_gives_the_series_of_its_whole_body() {
    // Prometheus gzips and chunks its answers: the client reads them decompressed, chunk
    // by chunk. Every series of the capture over its last 10 minutes, read by the client
    // and, whole, by a plain request with the same form.
    let dir = support::capture("slow-sink");
    let mut store = culprit::collect::store::SeriesStore::new();
    store.read_path(&dir.join("recording.om.gz"), None).unwrap();
    store.finish();
    let end_ms = culprit::collect::collector::MetricSource::latest_ms(&store).unwrap();
    let start_ms = end_ms - 600_000;
    let server = support::prometheus_with(&dir.join("recording.om.gz"));
    let p = Prometheus::new(&config(&server.url)).unwrap();
    let expr = r#"{__name__=~"flink_taskmanager_job_task_.+"}"#;
    let streamed = p.range(expr, start_ms, end_ms, 15_000).await.unwrap();
    let seconds = |ms: i64| format!("{}.{:03}", ms / 1000, ms % 1000);
    let whole = reqwest::Client::new()
        .post(format!("{}/api/v1/query_range", server.url))
        .form(&[
            ("query", expr.to_string()),
            ("start", seconds(start_ms)),
            ("end", seconds(end_ms)),
            ("step", "15.000".to_string()),
            ("timeout", "5000ms".to_string()),
        ])
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let whole = parse_answer(&whole, &server.url).unwrap();
    assert!(whole.series.len() > 100, "{} series", whole.series.len());
    assert_eq!(comparable(&streamed), comparable(&whole));
    assert_eq!(p.answer_budget().in_use(), 0);
}
