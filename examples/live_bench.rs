//! Times live diagnoses against a running Prometheus (see `benches/live.sh`): wall time of
//! one whole diagnosis, its request count, and its slowest single request.
//!
//! ```sh
//! cargo run --release --example live_bench -- --prometheus http://127.0.0.1:9090 \
//!     --plan job-plan.json --job synthetic-job --at-ms 1795000295000 --runs 10
//! ```

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use culprit::collect::collector::{CollectInput, collect};
use culprit::collect::prometheus::{PromSource, Prometheus};
use culprit::config::{Config, Millis, PrometheusConfig};
use culprit::diagnose::diagnose;
use culprit::model::graph::JobGraph;
use culprit::model::request::DiagnosisRequest;

#[derive(Parser)]
struct Args {
    #[arg(long)]
    prometheus: String,
    #[arg(long)]
    plan: PathBuf,
    #[arg(long)]
    job: String,
    #[arg(long)]
    at_ms: i64,
    #[arg(long, default_value_t = 10)]
    runs: usize,
}

#[tokio::main]
async fn main() {
    let a = Args::parse();
    let config = Config::default();
    let graph = JobGraph::from_plan_json(&std::fs::read_to_string(&a.plan).unwrap()).unwrap();
    let mut ratios = Vec::new();
    for run in 0..a.runs {
        let prom = Prometheus::new(&PrometheusConfig {
            url: a.prometheus.clone(),
            timeout: Millis::from_secs(60),
            deadline: Millis::from_secs(120),
            auth: None,
            tenant: None,
            max_answer_bytes: culprit::collect::prometheus::MAX_ANSWER_BYTES,
            max_answer_bytes_in_flight: culprit::config::PROMETHEUS_MAX_ANSWER_BYTES_IN_FLIGHT,
            max_concurrency: culprit::config::PROMETHEUS_MAX_CONCURRENCY,
        })
        .unwrap();
        let started = Instant::now();
        let source = PromSource::new(&prom, a.at_ms);
        let request =
            DiagnosisRequest { job: Some(a.job.clone()), at_ms: Some(a.at_ms), window_ms: None, ..Default::default() };
        let snapshot = collect(
            &source,
            CollectInput {
                request: &request,
                graph: Some(graph.clone()),
                checkpoint_config: None,
                exceptions: None,
                rescales: None,
                config: &config,
                catalog: &config.metrics,
            },
        )
        .await
        .unwrap();
        let verdict = culprit::render::words::verdict(&diagnose(&snapshot, &config.diagnosis));
        let wall = started.elapsed();
        let slowest = prom.request_durations().into_iter().max().unwrap_or_default();
        let ratio = wall.as_secs_f64() / slowest.as_secs_f64();
        ratios.push(ratio);
        println!(
            "run {run}: wall {:.1} ms, {} requests, slowest request {:.1} ms, wall/slowest {:.2}, culprit {}",
            wall.as_secs_f64() * 1e3,
            prom.requests(),
            slowest.as_secs_f64() * 1e3,
            ratio,
            verdict.culprit.map(|c| c.vertex_name).unwrap_or_default()
        );
    }
    ratios.sort_by(f64::total_cmp);
    println!("median wall/slowest over {} runs: {:.2}", ratios.len(), ratios[ratios.len() / 2]);
}
