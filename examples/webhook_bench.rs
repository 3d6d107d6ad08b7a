//! Webhook intake under load: culprit's `POST /webhook/alertmanager` (parse, plan, durable
//! SQLite enqueue with group commit) next to a bare axum handler that only reads the body
//! and answers 202, in the same run and process, on loopback.
//!
//! ```sh
//! cargo run --release --example webhook_bench -- --seconds 10 --connections 64
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::routing::post;
use clap::Parser;
use culprit::config::{Config, Millis, PrometheusConfig, Synchronous};
use culprit::service::server::Application;

#[derive(Parser)]
struct Args {
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    #[arg(long, default_value_t = 64)]
    connections: usize,
    /// `full` (fsync per batch) or `normal`.
    #[arg(long, default_value = "full")]
    synchronous: String,
}

/// Sends webhooks from `connections` tasks for `seconds`; returns (requests/s, p50, p99, errors).
async fn load(
    url: String,
    body: Arc<Vec<serde_json::Value>>,
    seconds: u64,
    connections: usize,
) -> (f64, Duration, Duration, usize) {
    let client = reqwest::Client::builder().pool_max_idle_per_host(connections).build().unwrap();
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let tasks: Vec<_> = (0..connections)
        .map(|c| {
            let (client, url, body) = (client.clone(), url.clone(), body.clone());
            tokio::spawn(async move {
                let mut lat = Vec::new();
                let mut errors = 0;
                let mut i = c;
                while Instant::now() < deadline {
                    let t = Instant::now();
                    match client.post(&url).json(&body[i % body.len()]).send().await {
                        Ok(r) if r.status() == 202 => lat.push(t.elapsed()),
                        _ => errors += 1,
                    }
                    i += connections;
                }
                (lat, errors)
            })
        })
        .collect();
    let mut all = Vec::new();
    let mut errors = 0;
    for t in tasks {
        let (l, e) = t.await.unwrap();
        all.extend(l);
        errors += e;
    }
    let elapsed = started.elapsed().as_secs_f64();
    all.sort();
    let pct = |p: f64| all[((all.len() as f64 * p) as usize).min(all.len() - 1)];
    (all.len() as f64 / elapsed, pct(0.50), pct(0.99), errors)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let a = Args::parse();
    let dir = tempfile::tempdir().unwrap();
    // `serve` needs a metrics backend; diagnoses never run here (see `coalesce` below).
    let mut config =
        Config { prometheus: Some(toml::from_str("url = \"http://127.0.0.1:9\"").unwrap()), ..Config::default() };
    config.server.listen = "127.0.0.1:0".into();
    config.store.path = dir.path().join("bench.db");
    config.store.synchronous = if a.synchronous == "normal" { Synchronous::Normal } else { Synchronous::Full };
    config.store.max_queue = usize::MAX;
    // Diagnoses wait: this measures intake alone.
    config.service.coalesce = Millis::from_secs(3600);
    // `serve` refuses to start without a Prometheus; with diagnoses waiting, it is never
    // asked (port 9, discard, would refuse the connection).
    config.prometheus = Some(PrometheusConfig {
        url: "http://127.0.0.1:9".into(),
        timeout: Millis::from_secs(1),
        deadline: Millis::from_secs(1),
        auth: None,
        tenant: None,
    });
    let app = Application::build(config).await.unwrap();

    let bare = axum::Router::new()
        .route("/webhook/alertmanager", post(|_body: axum::body::Bytes| async { axum::http::StatusCode::ACCEPTED }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let bare_url = format!("http://{}/webhook/alertmanager", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, bare).await.unwrap() });

    // The real webhook of the slow-sink capture, for 1000 different jobs.
    let real: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string("examples/captures/slow-sink/alerts/webhook-0001.json").unwrap())
            .unwrap();
    let bodies: Vec<serde_json::Value> = (0..1000)
        .map(|i| {
            let mut w = real.clone();
            let id = format!("{:032x}", i);
            w["alerts"][0]["labels"]["job_id"] = id.clone().into();
            w["groupKey"] = format!("{{}}:{{alertname=\"FlinkJobBackpressured\", job_id=\"{id}\"}}").into();
            w
        })
        .collect();
    let bodies = Arc::new(bodies);

    for (name, url) in
        [("bare axum handler", bare_url), ("culprit webhook (durable)", format!("{}/webhook/alertmanager", app.url()))]
    {
        let _warm = load(url.clone(), bodies.clone(), 1, a.connections).await;
        let (rps, p50, p99, errors) = load(url, bodies.clone(), a.seconds, a.connections).await;
        println!(
            "{name:28} {rps:8.0} webhooks/s   p50 {:6.2} ms   p99 {:6.2} ms   errors {errors}",
            p50.as_secs_f64() * 1e3,
            p99.as_secs_f64() * 1e3
        );
    }
    let depths = app.service.store.depths().await.unwrap();
    println!("synchronous={} queue depth after the run: {}", a.synchronous, depths.work);
    app.stop().await;
}
