//! Peak memory and time of one large Prometheus answer read by the client: a local server
//! on port 0 answers `query_range` with a matrix of Flink-like series (`--mb` of JSON,
//! default 30), and the client reads it as a diagnosis would.
//!
//! ```sh
//! cargo run --release --example prom_answer_bench -- --mb 30 --runs 3
//! ```
//!
//! Prints the answer's size, the time the client took, and the process' peak RSS during the
//! query (VmHWM, reset before each query through `/proc/self/clear_refs`) beside its RSS
//! before it (the answer the server holds is part of both).

use std::fmt::Write as _;
use std::time::Instant;

use axum::Router;
use axum::routing::post;
use clap::Parser;
use culprit::collect::prometheus::Prometheus;
use culprit::config::{Millis, PrometheusConfig};

#[derive(Parser)]
struct Args {
    /// Size of the answer, MB.
    #[arg(long, default_value_t = 30)]
    mb: usize,
    #[arg(long, default_value_t = 3)]
    runs: usize,
}

/// A `query_range` answer of about `bytes`: series of 60 points each, labelled as Flink's
/// reporter labels a subtask's busy time.
fn answer(bytes: usize) -> String {
    let mut s = String::with_capacity(bytes + 4096);
    s.push_str(r#"{"status":"success","data":{"resultType":"matrix","result":["#);
    let mut i = 0;
    while s.len() < bytes {
        if i > 0 {
            s.push(',');
        }
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
        i += 1;
    }
    s.push_str("]}}");
    s
}

fn status_kb(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix(field)?.trim().strip_suffix(" kB")?.trim().parse().ok()).unwrap_or(0)
}

#[tokio::main]
async fn main() {
    let a = Args::parse();
    let body = answer(a.mb * 1_000_000);
    let len = body.len();
    let body = axum::body::Bytes::from(body);
    let app = Router::new().route(
        "/api/v1/query_range",
        post(move || {
            let body = body.clone();
            async move { ([("content-type", "application/json")], body) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let prom = Prometheus::new(&PrometheusConfig {
        url,
        timeout: Millis::from_secs(60),
        deadline: Millis::from_secs(120),
        auth: None,
        tenant: None,
        max_answer_bytes: culprit::collect::prometheus::MAX_ANSWER_BYTES,
    })
    .unwrap();
    for run in 0..a.runs {
        let before = status_kb("VmRSS:");
        let _ = std::fs::write("/proc/self/clear_refs", "5");
        let started = Instant::now();
        let answer = prom.range("up", 1_795_000_000_000, 1_795_000_295_000, 5_000).await;
        let elapsed = started.elapsed();
        let peak = status_kb("VmHWM:");
        let summary = match &answer {
            Ok(a) => {
                format!("{} series, {} points", a.series.len(), a.series.iter().map(|s| s.points.len()).sum::<usize>())
            }
            Err(e) => format!("error: {e}"),
        };
        drop(answer);
        println!(
            "run {run}: answer {:.1} MB, {:.2} s, RSS before {:.0} MB, peak {:.0} MB (+{:.0} MB): {summary}",
            len as f64 / 1e6,
            elapsed.as_secs_f64(),
            before as f64 / 1024.0,
            peak as f64 / 1024.0,
            peak.saturating_sub(before) as f64 / 1024.0
        );
    }
}
