//! The flood of attack B6, measured: webhooks for thousands of Flink jobs nobody runs
//! (each its own alert group, from a misrouted Alertmanager), then one real alert of a job
//! culprit has diagnosed before; how long its verdict takes to reach PagerDuty, what the
//! flood was answered, and how many "could not diagnose" posts reached Slack.
//!
//! Everything is real but the destinations: a Prometheus holding one synthetic job
//! (`tests/support`, Debian's `prometheus`), `culprit serve` in process on a SQLite file,
//! capture servers standing in for Slack and PagerDuty.
//!
//! ```sh
//! cargo run --release --example flood_bench -- --unknown 10000 --connections 64
//! ```

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use clap::Parser;
use culprit::config::Config;
use culprit::service::server::Application;
use futures::StreamExt;
use support::capture::Capture;

#[derive(Parser)]
struct Args {
    /// Webhooks of the flood, each a job never seen.
    #[arg(long, default_value_t = 2000)]
    unknown: usize,
    /// Webhooks in flight at once.
    #[arg(long, default_value_t = 64)]
    connections: usize,
}

#[tokio::main]
async fn main() {
    let a = Args::parse();
    let now = jiff::Timestamp::now().as_millisecond();
    let jobs = support::synthetic_jobs(1, now - 1_000);
    let (job, text) = &jobs[0];
    let prom = support::prometheus_with_texts(std::slice::from_ref(text), support::free_port());
    let (slack, pagerduty) = (Capture::start().await, Capture::start().await);
    let tmp = tempfile::tempdir().unwrap();
    let text = support::culprit_config(tmp.path(), &prom.url, &slack.url, &pagerduty.url, "");
    let app = Application::build(Config::from_toml(&text, "flood.toml").unwrap()).await.unwrap();
    let url = format!("{}/webhook/alertmanager", app.url());
    let client = reqwest::Client::new();
    let real = |group: &str| {
        let mut w = support::webhook_for(&job.job_id(), &job.job_name(), &[group.to_string()]);
        w["groupKey"] = format!("{{}}:{{job_id=\"{}\", replica=\"{group}\"}}", job.job_id()).into();
        w
    };
    let verdicts = || pagerduty.pagerduty_events().len();
    // The job is known: it was diagnosed before the flood.
    client.post(&url).json(&real("before")).send().await.unwrap();
    support::wait_for("the first verdict", Duration::from_secs(60), || verdicts() == 1).await;

    let flood_started = Instant::now();
    let codes: Vec<u16> = futures::stream::iter(0..a.unknown)
        .map(|i| {
            let mut w = support::webhook_for(&format!("b0605{i:027x}"), &format!("bogus_{i:05}"), &[format!("f{i}")]);
            w["externalURL"] = "http://misrouted-alertmanager:9093".into();
            let (client, url) = (client.clone(), url.clone());
            async move { client.post(&url).json(&w).send().await.map_or(0, |r| r.status().as_u16()) }
        })
        .buffer_unordered(a.connections)
        .collect()
        .await;
    let flood_took = flood_started.elapsed();
    let depth = app.service.store.depths().await.unwrap().work;
    let real_started = Instant::now();
    let status = client.post(&url).json(&real("after")).send().await.unwrap().status();
    support::wait_for("the real verdict", Duration::from_secs(3600), || verdicts() == 2).await;
    let real_took = real_started.elapsed();
    let count = |c: u16| codes.iter().filter(|s| **s == c).count();
    let could_not = || slack.slack_messages().iter().filter(|m| m.to_string().contains("could not diagnose")).count();
    println!(
        "flood: {} webhooks in {:.1} s: {} × 202, {} × 429, {} × 503, {} other",
        a.unknown,
        flood_took.as_secs_f64(),
        count(202),
        count(429),
        count(503),
        a.unknown - count(202) - count(429) - count(503)
    );
    println!("queue when the real alert came: {depth} diagnoses; its webhook: {status}");
    println!(
        "the real verdict reached PagerDuty {:.2} s after its webhook (service.coalesce, 10 s, of it)",
        real_took.as_secs_f64()
    );
    println!("\"could not diagnose\" posts to Slack so far: {}", could_not());
    app.stop().await;
}
