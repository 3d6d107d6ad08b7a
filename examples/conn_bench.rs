//! `culprit serve` under connections that ask nothing: `--idle N` connections that send
//! nothing and `--trickling N` slowloris clients that send a webhook's head one byte every
//! `--every` (as /work/shared/attack/tools/slowloris.py does), reconnecting whenever the
//! server closes them (`--no-reconnect`: once each). Meanwhile `/healthz` and a real
//! webhook are asked twice a second on fresh connections, each with a 5 s timeout.
//! Reports the culprit process' RSS and open descriptors, the probes' latency and
//! failures, and how the server closed the attackers.
//!
//! ```sh
//! cargo build --release
//! cargo run --release --example conn_bench -- --idle 8000 --seconds 30
//! cargo run --release --example conn_bench -- --trickling 2000 --nofile 1024 --seconds 60
//! ```
//!
//! culprit runs as its own process (`--culprit`, default `target/release/culprit`), so its
//! RSS is its own; `--nofile` starts it under `ulimit -n` (soft and hard). Prometheus is a
//! closed port (`/healthz` and the webhook do not need it; the diagnoses fail, unposted).

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[derive(Parser)]
struct Args {
    #[arg(long, default_value_t = 0)]
    idle: usize,
    #[arg(long, default_value_t = 0)]
    trickling: usize,
    /// How long the attack lasts, seconds.
    #[arg(long, default_value_t = 30)]
    seconds: u64,
    /// A trickling client's pause between two bytes, ms.
    #[arg(long, default_value_t = 5000)]
    every: u64,
    /// Open each attacker once (slowloris.py) instead of reopening closed ones.
    #[arg(long)]
    no_reconnect: bool,
    /// `ulimit -n` for culprit (soft and hard).
    #[arg(long)]
    nofile: Option<u64>,
    #[arg(long, default_value = "target/release/culprit")]
    culprit: String,
    /// Extra lines for `[server]`, e.g. 'header_read_timeout = "2s"'.
    #[arg(long, default_value = "")]
    server: String,
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count()).unwrap_or(0)
}

fn start_culprit(args: &Args, dir: &std::path::Path, port: u16) -> Child {
    let config = dir.join("culprit.toml");
    std::fs::write(
        &config,
        format!(
            "[prometheus]\nurl = \"http://127.0.0.1:9\"\n[server]\nlisten = \"127.0.0.1:{port}\"\n{}\n[store]\npath = \"{}\"\n",
            args.server.replace("\\n", "\n"),
            dir.join("culprit.db").display()
        ),
    )
    .unwrap();
    let ulimit = args.nofile.map(|n| format!("ulimit -n {n} && ")).unwrap_or_default();
    Command::new("sh")
        .arg("-c")
        .arg(format!("{ulimit}exec {} serve --config {}", args.culprit, config.display()))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("culprit.log")).unwrap())
        .spawn()
        .expect("culprit (build it: cargo build --release)")
}

/// One request on a fresh connection; its latency, or `None` when it failed or took 5 s.
async fn probe(port: u16, request: &[u8]) -> Option<Duration> {
    let started = Instant::now();
    let run = async {
        let mut s = TcpStream::connect(("127.0.0.1", port)).await.ok()?;
        s.write_all(request).await.ok()?;
        let mut buf = [0u8; 256];
        let n = s.read(&mut buf).await.ok()?;
        (n >= 12 && (buf[9] == b'2')).then_some(())
    };
    tokio::time::timeout(Duration::from_secs(5), run).await.ok().flatten()?;
    Some(started.elapsed())
}

/// An attacker: opens a connection, sends `head` then a byte every `every` until closed;
/// again while `reconnect`, until `end`.
async fn attacker(
    port: u16,
    head: &'static [u8],
    every: Duration,
    reconnect: bool,
    end: Instant,
    closed: Arc<AtomicUsize>,
) {
    while Instant::now() < end {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let _ = s.write_all(head).await;
        let mut buf = [0u8; 256];
        let was_closed = loop {
            if Instant::now() >= end {
                break false;
            }
            match tokio::time::timeout(every, s.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => break true,
                Ok(Ok(_)) => continue,
                Err(_) if every.is_zero() || head.is_empty() => continue,
                Err(_) => {
                    if s.write_all(b"a").await.is_err() {
                        break true;
                    }
                }
            }
        };
        if was_closed {
            closed.fetch_add(1, Ordering::Relaxed);
        }
        if !reconnect {
            // Held until the end, as slowloris.py does.
            tokio::time::sleep_until(end.into()).await;
            return;
        }
    }
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize].as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    // The client holds every attacker's socket: raise its own limit.
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    let _ = rustix::process::setrlimit(
        rustix::process::Resource::Nofile,
        rustix::process::Rlimit { current: limit.maximum, maximum: limit.maximum },
    );
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = start_culprit(&args, dir.path(), port);
    let pid = child.id();
    let healthz: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    while probe(port, healthz).await.is_none() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_before = rss_kib(pid);
    let hook = br#"{"version":"4","groupKey":"{}:{alertname=\"FlinkBackpressure\"}","status":"firing","receiver":"culprit","groupLabels":{},"commonLabels":{},"commonAnnotations":{},"externalURL":"http://am","alerts":[{"status":"firing","labels":{"alertname":"FlinkBackpressure","job_id":"a1b2c3d4e5f60718293a4b5c6d7e8f90","job_name":"orders"},"annotations":{},"startsAt":"2026-11-29T10:30:00Z","endsAt":"0001-01-01T00:00:00Z","fingerprint":"f1"}]}"#;
    let webhook = [
        format!(
            "POST /webhook/alertmanager HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            hook.len()
        )
        .into_bytes(),
        hook.to_vec(),
    ]
    .concat();

    let started = Instant::now();
    let end = started + Duration::from_secs(args.seconds);
    let closed = Arc::new(AtomicUsize::new(0));
    let every = Duration::from_millis(args.every);
    let mut tasks = Vec::new();
    let trickle_head: &'static [u8] = b"POST /webhook/alertmanager HTTP/1.1\r\nHost: x\r\nX-a: ";
    for i in 0..args.idle + args.trickling {
        let head: &'static [u8] = if i < args.idle { b"" } else { trickle_head };
        tasks.push(tokio::spawn(attacker(port, head, every, !args.no_reconnect, end, closed.clone())));
        if i % 200 == 199 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let (mut health, mut hooks, mut health_failed, mut hooks_failed) = (vec![], vec![], 0, 0);
    let (mut rss_max, mut fds_max) = (0, 0);
    let mut next_report = started;
    while Instant::now() < end {
        match probe(port, healthz).await {
            Some(d) => health.push(d),
            None => health_failed += 1,
        }
        match probe(port, &webhook).await {
            Some(d) => hooks.push(d),
            None => hooks_failed += 1,
        }
        let (rss, fds) = (rss_kib(pid), open_fds(pid));
        rss_max = rss_max.max(rss);
        fds_max = fds_max.max(fds);
        if Instant::now() >= next_report {
            println!(
                "t={:>3}s rss={:>7} KiB fds={fds:>5} closed by server={:>6} healthz failed={health_failed} webhook failed={hooks_failed}",
                started.elapsed().as_secs(),
                rss,
                closed.load(Ordering::Relaxed)
            );
            next_report += Duration::from_secs(5);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    for t in tasks {
        let _ = t.await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_after = rss_kib(pid);
    health.sort();
    hooks.sort();
    println!(
        "summary: idle={} trickling={} seconds={} nofile={:?} reconnect={}",
        args.idle, args.trickling, args.seconds, args.nofile, !args.no_reconnect
    );
    println!(
        "  culprit RSS: {rss_before} KiB before, {rss_max} KiB at most, {rss_after} KiB after; at most {fds_max} open descriptors"
    );
    println!(
        "  /healthz: {} answered, {health_failed} failed; p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        health.len(),
        percentile(&health, 0.5),
        percentile(&health, 0.99),
        percentile(&health, 1.0)
    );
    println!(
        "  webhook: {} answered 202, {hooks_failed} failed; p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        hooks.len(),
        percentile(&hooks, 0.5),
        percentile(&hooks, 0.99),
        percentile(&hooks, 1.0)
    );
    println!("  attacker connections closed by the server: {}", closed.load(Ordering::Relaxed));
    let log = std::fs::read_to_string(dir.path().join("culprit.log")).unwrap_or_default();
    for line in log.lines().filter(|l| l.contains("WARN") || l.contains("ERROR")).take(5) {
        println!("  log: {line}");
    }
    let _ = child.kill();
    let _ = child.wait();
}
