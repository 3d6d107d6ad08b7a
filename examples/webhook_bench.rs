//! Webhook intake under load: culprit's `POST /webhook/alertmanager` (parse, plan, durable
//! enqueue with group commit) on SQLite and on PostgreSQL, next to a bare axum handler
//! that only reads the body and answers 202, in the same run and process, on loopback.
//!
//! PostgreSQL is a real server started for the run (`initdb` in a temporary directory,
//! Debian's `postgresql` package; fsync and synchronous commit on, as in production; left
//! out with a message when it is not installed). Its own CPU (other processes) is not in
//! the CPU column.
//!
//! ```sh
//! cargo run --release --example webhook_bench -- --seconds 10 --connections 64 --rounds 3
//! ```
//!
//! Each round runs every target once, in turn (so a noisy neighbour hurts them alike);
//! the summary gives each target's median over the rounds and its ratio to the bare
//! handler's median. The client sends pre-serialized bodies (the real webhook of the
//! slow-sink capture, for 1,000 different jobs), so the load generator costs little of the
//! CPU it shares with the server.

// The allocator of the `culprit` binary (src/main.rs), so the bench measures what runs.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::routing::post;
use clap::Parser;
use culprit::config::{Config, SecretSource, Synchronous};
use culprit::service::server::Application;

#[path = "../tests/support/pg_server.rs"]
mod pg_server;

#[derive(Parser)]
struct Args {
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    #[arg(long, default_value_t = 64)]
    connections: usize,
    /// Rounds of every target; the summary is the median.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// `full` (fsync per batch) or `normal`.
    #[arg(long, default_value = "full")]
    synchronous: String,
    /// Leave PostgreSQL out (e.g. to profile the SQLite intake alone).
    #[arg(long)]
    no_postgres: bool,
    /// Every webhook of a job changes its pending diagnosis (its alert's fingerprint
    /// alternates between two), so every merge writes. By default a job's webhooks repeat,
    /// as Alertmanager's repeated notifications and retries of a group do, and a merge
    /// finds its group already recorded.
    #[arg(long)]
    changing: bool,
}

/// One measurement: requests/s, p50, p99, errors, and the CPU time the whole process
/// (server and client) spent per request.
#[derive(Clone, Copy)]
struct Run {
    rps: f64,
    p50: Duration,
    p99: Duration,
    errors: usize,
    cpu_us: f64,
}

/// CPU time of this process (all threads, user + system) so far, seconds: Linux
/// `/proc/self/stat` fields 14 and 15, in clock ticks of 10 ms (`CLK_TCK` = 100). Under a
/// noisy neighbour, CPU per request moves far less than requests per second.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    // After the name: state is field 3, so utime (14) and stime (15) are at 11 and 12.
    (ticks(11) + ticks(12)) / 100.0
}

/// Sends webhooks from `connections` tasks for `seconds`.
async fn load(url: String, bodies: Arc<Vec<axum::body::Bytes>>, seconds: u64, connections: usize) -> Run {
    let client = reqwest::Client::builder().pool_max_idle_per_host(connections).build().unwrap();
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let cpu = cpu_seconds();
    let tasks: Vec<_> = (0..connections)
        .map(|c| {
            let (client, url, bodies) = (client.clone(), url.clone(), bodies.clone());
            tokio::spawn(async move {
                let mut lat = Vec::new();
                let mut errors = 0;
                let mut i = c;
                while Instant::now() < deadline {
                    let t = Instant::now();
                    let request = client
                        .post(&url)
                        .header("content-type", "application/json")
                        .body(bodies[i % bodies.len()].clone());
                    match request.send().await {
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
    let cpu_us = (cpu_seconds() - cpu) * 1e6 / all.len().max(1) as f64;
    all.sort();
    let pct = |p: f64| all[((all.len() as f64 * p) as usize).min(all.len() - 1)];
    Run { rps: all.len() as f64 / elapsed, p50: pct(0.50), p99: pct(0.99), errors, cpu_us }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The real webhook of the slow-sink capture, for 1000 different jobs, serialized; with
/// `changing`, twice per job with different fingerprints (all jobs once, then again), so
/// consecutive webhooks of a job differ.
fn bodies(changing: bool) -> Vec<axum::body::Bytes> {
    let real: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string("examples/captures/slow-sink/alerts/webhook-0001.json").unwrap())
            .unwrap();
    let variants = if changing { 2 } else { 1 };
    (0..1000 * variants)
        .map(|n| {
            let (i, variant) = (n % 1000, n / 1000);
            let mut w = real.clone();
            if changing {
                w["alerts"][0]["fingerprint"] = format!("{variant:016x}").into();
            }
            let id = format!("{:032x}", i);
            w["alerts"][0]["labels"]["job_id"] = id.clone().into();
            w["groupKey"] = format!("{{}}:{{alertname=\"FlinkJobBackpressured\", job_id=\"{id}\"}}").into();
            serde_json::to_vec(&w).unwrap().into()
        })
        .collect()
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
    config.service.coalesce = culprit::config::Millis::from_secs(3600);
    let app = Application::build(config.clone()).await.unwrap();
    // The same culprit on PostgreSQL (a replica of a set sharing one database).
    let pg = if a.no_postgres { None } else { pg_server::PgServer::start(true) };
    let pg_app = match &pg {
        Some(server) => {
            std::fs::write(dir.path().join("pw"), pg_server::PASSWORD).unwrap();
            let mut c = config.clone();
            c.store.url = Some(server.database("bench"));
            c.store.password = Some(SecretSource::File(dir.path().join("pw")));
            Some(Application::build(c).await.unwrap())
        }
        None => None,
    };

    let bare = axum::Router::new()
        .route("/webhook/alertmanager", post(|_body: axum::body::Bytes| async { axum::http::StatusCode::ACCEPTED }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let bare_url = format!("http://{}/webhook/alertmanager", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, bare).await.unwrap() });

    let bodies = Arc::new(bodies(a.changing));
    let mut targets: Vec<(String, String)> = vec![
        ("bare axum handler".into(), bare_url),
        (format!("culprit, SQLite synchronous={}", a.synchronous), format!("{}/webhook/alertmanager", app.url())),
    ];
    if let Some(p) = &pg_app {
        targets.push(("culprit, PostgreSQL (fsync on)".into(), format!("{}/webhook/alertmanager", p.url())));
    }
    for (_, url) in &targets {
        let _warm = load(url.clone(), bodies.clone(), 1, a.connections).await;
    }
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); targets.len()];
    for round in 1..=a.rounds {
        for (i, (name, url)) in targets.iter().enumerate() {
            let r = load(url.clone(), bodies.clone(), a.seconds, a.connections).await;
            println!(
                "round {round}  {name:34} {:8.0} webhooks/s   p50 {:6.2} ms   p99 {:6.2} ms   CPU {:5.0} µs/webhook   errors {}",
                r.rps,
                ms(r.p50),
                ms(r.p99),
                r.cpu_us,
                r.errors
            );
            runs[i].push(r);
        }
    }
    println!("median of {} rounds, {} connections, {} s each:", a.rounds, a.connections, a.seconds);
    let bare_rps = median(runs[0].iter().map(|r| r.rps).collect());
    for (i, (name, _)) in targets.iter().enumerate() {
        let rps = median(runs[i].iter().map(|r| r.rps).collect());
        let p99 = median(runs[i].iter().map(|r| ms(r.p99)).collect());
        let p50 = median(runs[i].iter().map(|r| ms(r.p50)).collect());
        let cpu = median(runs[i].iter().map(|r| r.cpu_us).collect());
        println!(
            "  {name:34} {rps:8.0} webhooks/s ({:.2}x bare)   p50 {p50:6.2} ms   p99 {p99:6.2} ms   CPU {cpu:5.0} µs/webhook (client included)",
            rps / bare_rps
        );
    }
    let depths = app.service.store.depths().await.unwrap();
    println!("diagnoses queued after the run: {} on SQLite (one per job)", depths.work);
    app.stop().await;
    if let Some(p) = pg_app {
        println!(
            "diagnoses queued after the run: {} on PostgreSQL (one per job)",
            p.service.store.depths().await.unwrap().work
        );
        p.stop().await;
    }
    drop(pg);
}
