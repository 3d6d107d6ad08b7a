//! Peak memory and time of large Prometheus answers read by the client, as diagnoses read
//! them: a local server on port 0 answers `query_range` with a matrix of Flink-like series
//! (`--mb` of JSON, default 30), `--concurrent` queries at once (default 1), sent chunked
//! (no length, as Prometheus sends a large answer) or with a `Content-Length` (`--send`).
//!
//! ```sh
//! cargo run --release --example prom_answer_bench -- --mb 30 --runs 3
//! # four diagnoses at once, each answered 100 MB (over the 64 MiB cap), both ways:
//! cargo run --release --example prom_answer_bench -- --mb 100 --concurrent 4 --send both --runs 1
//! ```
//!
//! The server writes each answer as it generates it (nothing of it is held), so the
//! process' memory is the client's. Prints, per run and way of sending, the answers' size,
//! the time the client took, and the process' peak RSS during the queries (VmHWM, reset
//! before each run through `/proc/self/clear_refs`) beside its RSS before them. Each
//! answer's series are counted and dropped where they arrive, as a diagnosis turns them
//! into its snapshot.

use std::fmt::Write as _;
use std::time::Instant;

use clap::Parser;
use culprit::collect::prometheus::Prometheus;
use culprit::config::{Millis, PrometheusConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The binary's allocator (`src/main.rs`), so that the memory measured is the server's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
struct Args {
    /// Size of each answer, MB.
    #[arg(long, default_value_t = 30)]
    mb: usize,
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Queries at once (each its own answer).
    #[arg(long, default_value_t = 1)]
    concurrent: usize,
    /// How the server sends: `chunked`, `length` (Content-Length) or `both` (one after
    /// the other).
    #[arg(long, default_value = "chunked")]
    send: String,
}

const HEAD: &str = r#"{"status":"success","data":{"resultType":"matrix","result":["#;
const TAIL: &str = "]}}";

/// Series `i` of the answer: 60 points, labelled as Flink's reporter labels a subtask's
/// busy time (about 1.9 KB).
fn series(i: usize) -> String {
    let mut s = String::with_capacity(2048);
    let _ = write!(
        s,
        r#"{{"metric":{{"__name__":"flink_taskmanager_job_task_busyTimeMsPerSecond","culprit_query":"0","host":"10_0_{}_{}","instance":"10.0.{}.{}:9249","job":"flink","job_id":"1cd3b48d0be42fe317d2a4ac91801fc4","job_name":"bp-lab-slow-sink","subtask_index":"{}","task_attempt_id":"{:032x}","task_attempt_num":"0","task_id":"{:032x}","task_name":"Writer","tm_id":"10_0_{}_{}:43127-{:06x}"}},"values":["#,
        i / 256 % 256,
        i % 256,
        i / 256 % 256,
        i % 256,
        i % 128,
        i,
        i / 128,
        i / 256 % 256,
        i % 256,
        i
    );
    for k in 0..60 {
        if k > 0 {
            s.push(',');
        }
        let _ = write!(s, r#"[{}.{:03},"{}"]"#, 1_795_000_000 + k * 5, k % 1000, (i * 7 + k) % 1000);
    }
    s.push_str("]}");
    s
}

/// The series an answer of about `bytes` holds, and its exact length.
fn shape(bytes: usize) -> (usize, usize) {
    let (mut len, mut n) = (HEAD.len() + TAIL.len(), 0);
    while len < bytes {
        len += series(n).len() + usize::from(n > 0);
        n += 1;
    }
    (n, len)
}

/// Answers every connection with the generated answer, written as it is generated:
/// chunked, or with its `Content-Length`.
async fn serve(listener: tokio::net::TcpListener, series_count: usize, len: usize, with_length: bool) {
    while let Ok((mut conn, _)) = listener.accept().await {
        tokio::spawn(async move {
            // The request (a small form) is read before answering.
            let mut request = vec![0u8; 64 * 1024];
            let _ = conn.read(&mut request).await;
            let framing =
                if with_length { format!("content-length: {len}") } else { "transfer-encoding: chunked".to_string() };
            let head =
                format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{framing}\r\nconnection: close\r\n\r\n");
            if conn.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            let mut piece = String::from(HEAD);
            for i in 0..=series_count {
                if i == series_count {
                    piece.push_str(TAIL);
                } else {
                    if i > 0 {
                        piece.push(',');
                    }
                    piece.push_str(&series(i));
                }
                if piece.len() < 32 * 1024 && i < series_count {
                    continue;
                }
                let written = if with_length {
                    conn.write_all(piece.as_bytes()).await
                } else {
                    let framed = format!("{:x}\r\n{piece}\r\n", piece.len());
                    conn.write_all(framed.as_bytes()).await
                };
                // The client hung up (an answer over the cap): stop generating.
                if written.is_err() {
                    return;
                }
                piece.clear();
            }
            if !with_length {
                let _ = conn.write_all(b"0\r\n\r\n").await;
            }
        });
    }
}

fn status_kb(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix(field)?.trim().strip_suffix(" kB")?.trim().parse().ok()).unwrap_or(0)
}

fn client(url: String) -> Prometheus {
    Prometheus::new(&PrometheusConfig {
        url,
        timeout: Millis::from_secs(60),
        deadline: Millis::from_secs(120),
        auth: None,
        tenant: None,
        max_answer_bytes: culprit::collect::prometheus::MAX_ANSWER_BYTES,
        max_answer_bytes_in_flight: culprit::config::PROMETHEUS_MAX_ANSWER_BYTES_IN_FLIGHT,
        max_concurrency: culprit::config::PROMETHEUS_MAX_CONCURRENCY,
    })
    .unwrap()
}

/// One run: `concurrent` queries at once; each answer is summarised and dropped where it
/// arrives.
async fn run(prom: &Prometheus, concurrent: usize) -> Vec<String> {
    let queries = (0..concurrent).map(|_| async {
        match prom.range("up", 1_795_000_000_000, 1_795_000_295_000, 5_000).await {
            Ok(a) => {
                format!("{} series, {} points", a.series.len(), a.series.iter().map(|s| s.points.len()).sum::<usize>())
            }
            Err(e) => format!("error: {e}"),
        }
    });
    futures::future::join_all(queries).await
}

#[tokio::main]
async fn main() {
    let a = Args::parse();
    let (series_count, len) = shape(a.mb * 1_000_000);
    let ways: &[bool] = match a.send.as_str() {
        "chunked" => &[false],
        "length" => &[true],
        "both" => &[false, true],
        other => panic!("--send {other}: chunked, length or both"),
    };
    for &with_length in ways {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(serve(listener, series_count, len, with_length));
        let prom = client(url);
        let sent = if with_length { "Content-Length" } else { "chunked" };
        for run_no in 0..a.runs {
            let before = status_kb("VmRSS:");
            let _ = std::fs::write("/proc/self/clear_refs", "5");
            let started = Instant::now();
            let mut summaries = run(&prom, a.concurrent).await;
            let elapsed = started.elapsed();
            let peak = status_kb("VmHWM:");
            summaries.dedup();
            println!(
                "{sent} run {run_no}: {} × answer {:.1} MB, {:.2} s, RSS before {:.0} MB, peak {:.0} MB (+{:.0} MB): {}",
                a.concurrent,
                len as f64 / 1e6,
                elapsed.as_secs_f64(),
                before as f64 / 1024.0,
                peak as f64 / 1024.0,
                peak.saturating_sub(before) as f64 / 1024.0,
                summaries.join("; ")
            );
        }
    }
}
