//! Real backends for integration tests: a Prometheus or a VictoriaMetrics on a free
//! loopback port, loaded with a recording, stopped when dropped.
//!
//! Prometheus gets the recording through `promtool tsdb create-blocks-from openmetrics`
//! (the backfill path users have); VictoriaMetrics through `/api/v1/import/prometheus`.
//! Both binaries come from Debian packages (`prometheus`, `victoria-metrics`), which
//! `.ci/run` installs.

#![allow(dead_code)]

pub mod capture;
pub mod cards;
pub mod chat;
pub mod echo;
pub mod faulty_disk;
pub mod grafana;
pub mod incident;
pub mod limits;
pub mod logs;
pub mod opsgenie;
pub mod pg_server;
pub mod png_ink;
pub mod serve;

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The repository's bundled capture folder.
pub fn capture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/captures").join(name)
}

/// Every bundled capture with an EXPECTED.json, sorted.
pub fn captures() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/captures");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("EXPECTED.json").exists())
        .collect();
    dirs.sort();
    dirs
}

/// Decompresses a `.gz` file (or copies a plain one) to `out`.
pub fn gunzip(path: &Path, out: &Path) {
    let mut bytes = Vec::new();
    std::fs::File::open(path).unwrap().read_to_end(&mut bytes).unwrap();
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut text = Vec::new();
        flate2::read::MultiGzDecoder::new(&bytes[..]).read_to_end(&mut text).unwrap();
        bytes = text;
    }
    std::fs::write(out, bytes).unwrap();
}

fn require(binary: &str, package: &str) -> PathBuf {
    for dir in std::env::var("PATH").unwrap_or_default().split(':') {
        let p = Path::new(dir).join(binary);
        if p.exists() {
            return p;
        }
    }
    panic!("`{binary}` is not installed: apt-get install -y {package} (.ci/run does)");
}

fn wait_ready(url: &str, child: &mut Child, log: &Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{url}: the server exited ({status}): {}", std::fs::read_to_string(log).unwrap_or_default());
        }
        if let Ok(resp) = reqwest::blocking_get(url)
            && resp
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{url} not ready within 30 s: {}", std::fs::read_to_string(log).unwrap_or_default());
}

/// Minimal blocking GET over std (tests must not need a runtime to wait for readiness).
mod reqwest {
    use std::io::{Read, Write};
    use std::net::TcpStream;

    /// True when `url` (http://host:port/path) answers 2xx.
    pub fn blocking_get(url: &str) -> std::io::Result<bool> {
        let rest = url.strip_prefix("http://").unwrap();
        let (host, path) = rest.split_once('/').unwrap();
        let mut s = TcpStream::connect(host)?;
        s.set_read_timeout(Some(std::time::Duration::from_secs(2)))?;
        write!(s, "GET /{path} HTTP/1.0\r\nHost: {host}\r\n\r\n")?;
        let mut buf = String::new();
        let _ = s.read_to_string(&mut buf);
        Ok(buf.starts_with("HTTP/1.0 2") || buf.starts_with("HTTP/1.1 2"))
    }
}

/// A running backend.
pub struct Server {
    pub url: String,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Prometheus on `port` with this configuration (YAML), holding these recordings
/// (OpenMetrics texts), each backfilled by promtool as its own blocks into one TSDB.
fn start_prometheus(texts: &[String], port: u16, config_yaml: &str) -> Server {
    let prometheus = require("prometheus", "prometheus");
    let promtool = require("promtool", "prometheus");
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    for (i, text) in texts.iter().enumerate() {
        let om = dir.path().join(format!("recording-{i}.om"));
        std::fs::write(&om, text).unwrap();
        let out = Command::new(&promtool)
            .args(["tsdb", "create-blocks-from", "openmetrics"])
            .arg(&om)
            .arg(&data)
            .output()
            .unwrap();
        assert!(out.status.success(), "promtool: {}", String::from_utf8_lossy(&out.stderr));
    }
    let config = dir.path().join("prometheus.yml");
    std::fs::write(&config, config_yaml).unwrap();
    let mut command = Command::new(prometheus);
    command
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", data.display()))
        .arg("--storage.tsdb.retention.time=100y");
    serve(command, port, dir, "prometheus.log")
}

/// Starts `command` listening on `port` (`--web.listen-address`), its stderr in `log_name`
/// inside `dir`, and waits for `/-/ready` (both Prometheus and Alertmanager answer it).
fn serve(mut command: Command, port: u16, dir: tempfile::TempDir, log_name: &str) -> Server {
    let log = dir.path().join(log_name);
    let mut child = command
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}");
    wait_ready(&format!("{url}/-/ready"), &mut child, &log);
    Server { url, child, _dir: dir }
}

const PLAIN_PROMETHEUS: &str = "global:\n  scrape_interval: 1h\n";

/// Prometheus holding `recording` (OpenMetrics, plain or gzip), backfilled with promtool.
pub fn prometheus_with(recording: &Path) -> Server {
    let om = tempfile::NamedTempFile::new().unwrap();
    gunzip(recording, om.path());
    start_prometheus(&[std::fs::read_to_string(om.path()).unwrap()], free_port(), PLAIN_PROMETHEUS)
}

/// VictoriaMetrics holding `recording`, imported as Prometheus text with ms timestamps.
pub fn victoria_metrics_with(recording: &Path) -> Server {
    let tmp = tempfile::NamedTempFile::new().unwrap();
    gunzip(recording, tmp.path());
    let text = std::fs::read_to_string(tmp.path()).unwrap();
    victoria_metrics_holding(&text, &["-search.latencyOffset=0s", "-search.disableCache"])
}

/// VictoriaMetrics started with `flags` (none: its defaults, such as the 30 s
/// `-search.latencyOffset`), holding `text` (OpenMetrics with timestamps in seconds),
/// imported as Prometheus text with ms timestamps.
pub fn victoria_metrics_holding(text: &str, flags: &[&str]) -> Server {
    let vm = require("victoria-metrics", "victoria-metrics");
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let log = dir.path().join("vm.log");
    let mut child = Command::new(vm)
        .arg(format!("-storageDataPath={}", dir.path().join("data").display()))
        .arg(format!("-httpListenAddr=127.0.0.1:{port}"))
        .arg("-retentionPeriod=100y")
        .args(flags)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}");
    wait_ready(&format!("{url}/health"), &mut child, &log);

    // Convert to text format lines with millisecond timestamps.
    let mut body = String::with_capacity(text.len());
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (head, ts) = line.rsplit_once(' ').unwrap();
        let ms = (ts.parse::<f64>().unwrap() * 1000.0).round() as i64;
        body.push_str(head);
        body.push(' ');
        body.push_str(&ms.to_string());
        body.push('\n');
    }
    request(&format!("127.0.0.1:{port}"), "POST", "/api/v1/import/prometheus", &body);
    request(&format!("127.0.0.1:{port}"), "GET", "/internal/force_flush", "");
    Server { url, child, _dir: dir }
}

fn request(host: &str, method: &str, path: &str, body: &str) {
    use std::io::Write;
    let mut s = std::net::TcpStream::connect(host).unwrap();
    write!(s, "{method} {path} HTTP/1.0\r\nHost: {host}\r\nContent-Length: {}\r\n\r\n{body}", body.len()).unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.0 2") || answer.starts_with("HTTP/1.1 2"), "{path}: {answer}");
}

/// A recording's text with every timestamp shifted so the last sample is at `end_ms`.
pub fn shifted(recording: &Path, end_ms: i64) -> String {
    let tmp = tempfile::NamedTempFile::new().unwrap();
    gunzip(recording, tmp.path());
    let text = std::fs::read_to_string(tmp.path()).unwrap();
    let last = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<f64>().unwrap())
        .fold(f64::MIN, f64::max);
    let shift = end_ms as f64 / 1000.0 - last;
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            out.push_str(line);
        } else {
            let (head, ts) = line.rsplit_once(' ').unwrap();
            let t = ts.parse::<f64>().unwrap() + shift;
            // Metrics whose value is a time (lastCheckpointCompletedTimestamp, in ms) move too.
            let (name_and_labels, value) = head.rsplit_once(' ').unwrap();
            let name = name_and_labels.split('{').next().unwrap();
            let value = match value.parse::<f64>() {
                Ok(v) if name.ends_with("Timestamp") && v > 1e12 => format!("{}", (v + shift * 1000.0).round()),
                _ => value.to_string(),
            };
            out.push_str(&format!("{name_and_labels} {value} {t:.3}"));
        }
        out.push('\n');
    }
    out
}

/// Prometheus on `port` holding `recording` (OpenMetrics text), evaluating `rules` every
/// second and sending alerts to `alertmanager`.
pub fn prometheus_alerting(recording_text: &str, rules: &Path, alertmanager: &str, port: u16) -> Server {
    let am = alertmanager.trim_start_matches("http://");
    let config = format!(
        "global:\n  scrape_interval: 1h\n  evaluation_interval: 1s\nrule_files:\n  - {}\nalerting:\n  alertmanagers:\n    - static_configs:\n        - targets: ['{am}']\n",
        rules.display()
    );
    start_prometheus(&[recording_text.to_string()], port, &config)
}

/// Alertmanager on `port` with this configuration (YAML), no HA gossip.
pub fn alertmanager(config_yaml: &str, port: u16) -> Server {
    let binary = require("prometheus-alertmanager", "prometheus-alertmanager");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("alertmanager.yml");
    std::fs::write(&config, config_yaml).unwrap();
    let mut command = Command::new(binary);
    command
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.path={}", dir.path().join("data").display()))
        .arg("--cluster.listen-address=");
    serve(command, port, dir, "alertmanager.log")
}

/// A Flink REST stand-in serving a capture's real answers.
pub async fn flink_rest_for(dir: &Path) -> wiremock::MockServer {
    flink_rest_under(dir, "").await
}

/// [`flink_rest_for`] under the path prefix `prefix` (`/name-rest.namespace`), as one
/// server standing in for many Kubernetes services.
pub async fn flink_rest_under(dir: &Path, prefix: &str) -> wiremock::MockServer {
    use wiremock::matchers::{method, path, path_regex};
    use wiremock::{Mock, ResponseTemplate};
    let server = wiremock::MockServer::start().await;
    let re = regex_prefix(prefix);
    let file = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
    Mock::given(method("GET"))
        .and(path(format!("{prefix}/jobs/overview")))
        .respond_with(ResponseTemplate::new(200).set_body_raw(file("rest/jobs-overview.json"), "application/json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path_regex(format!("^{re}/jobs/[0-9a-f]{{32}}/plan$")))
        .respond_with(ResponseTemplate::new(200).set_body_raw(file("plan.json"), "application/json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path_regex(format!("^{re}/jobs/[0-9a-f]{{32}}/checkpoints/config$")))
        .respond_with(ResponseTemplate::new(200).set_body_raw(file("rest/checkpoints-config.json"), "application/json"))
        .mount(&server)
        .await;
    // Real captures have the exception history; field reports' folders may not (Flink then
    // answers 404 here, as wiremock does for anything unmounted).
    if dir.join("rest/exceptions.json").exists() {
        Mock::given(method("GET"))
            .and(path_regex(format!("^{re}/jobs/[0-9a-f]{{32}}/exceptions$")))
            .respond_with(ResponseTemplate::new(200).set_body_raw(file("rest/exceptions.json"), "application/json"))
            .mount(&server)
            .await;
    }
    // A capture of a job on the Adaptive scheduler has Flink 2.3's rescale history, and the
    // details of its newest rescale (`rest/rescales-details-<uuid>.json`); any other
    // answers 404, as Flink does for a job without one.
    if dir.join("rest/rescales-history.json").exists() {
        Mock::given(method("GET"))
            .and(path_regex(format!("^{re}/jobs/[0-9a-f]{{32}}/rescales/history$")))
            .respond_with(
                ResponseTemplate::new(200).set_body_raw(file("rest/rescales-history.json"), "application/json"),
            )
            .mount(&server)
            .await;
    }
    for entry in std::fs::read_dir(dir.join("rest")).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(uuid) = name.strip_prefix("rescales-details-").and_then(|n| n.strip_suffix(".json")) {
            Mock::given(method("GET"))
                .and(path_regex(format!("^{re}/jobs/[0-9a-f]{{32}}/rescales/details/{uuid}$")))
                .respond_with(
                    ResponseTemplate::new(200).set_body_raw(file(&format!("rest/{name}")), "application/json"),
                )
                .mount(&server)
                .await;
        }
    }
    server
}

/// `prefix` with regex metacharacters escaped.
fn regex_prefix(prefix: &str) -> String {
    prefix
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '/' { c.to_string() } else { format!("\\{c}") })
        .collect()
}

/// Prometheus (no rules) on `port` holding several recordings (OpenMetrics texts), each
/// backfilled as its own blocks into one TSDB.
pub fn prometheus_with_texts(texts: &[String], port: u16) -> Server {
    start_prometheus(texts, port, PLAIN_PROMETHEUS)
}

/// Synthetic jobs `1..=n` (3 vertices × 2 subtasks, 24 samples every 5 s) ending at
/// `end_ms`, as OpenMetrics texts.
pub fn synthetic_jobs(n: u32, end_ms: i64) -> Vec<(culprit::samples::synthetic::SyntheticJob, String)> {
    (1..=n)
        .map(|job| {
            let j = culprit::samples::synthetic::SyntheticJob {
                vertices: 3,
                subtasks: 2,
                samples: 24,
                start_ms: end_ms - 23 * 5_000,
                job,
            };
            let text = String::from_utf8(j.write_openmetrics(Vec::new()).unwrap()).unwrap();
            (j, text)
        })
        .collect()
}

/// An Alertmanager webhook (v4) for one job with these alert fingerprints firing.
pub fn webhook_for(job_id: &str, job_name: &str, fingerprints: &[String]) -> serde_json::Value {
    let group_key = format!("{{}}:{{alertname=\"FlinkJobBackpressured\", job_id=\"{job_id}\"}}");
    let alerts: Vec<serde_json::Value> = fingerprints
        .iter()
        .map(|f| {
            serde_json::json!({
                "status": "firing",
                "labels": {"alertname": "FlinkJobBackpressured", "job_id": job_id, "job_name": job_name, "severity": "warning", "replica": f},
                "annotations": {"summary": format!("Flink job {job_name} is backpressured")},
                "startsAt": "2026-11-29T10:35:53.562Z",
                "endsAt": "0001-01-01T00:00:00Z",
                "generatorURL": "http://prometheus/graph",
                "fingerprint": f
            })
        })
        .collect();
    serde_json::json!({
        "receiver": "culprit", "status": "firing", "alerts": alerts,
        "groupLabels": {"alertname": "FlinkJobBackpressured", "job_id": job_id},
        "commonLabels": {"alertname": "FlinkJobBackpressured", "job_id": job_id, "job_name": job_name},
        "commonAnnotations": {}, "externalURL": "http://alertmanager:9093", "version": "4",
        "groupKey": group_key, "truncatedAlerts": 0
    })
}

/// A culprit configuration posting to capture servers (Slack Web API at `slack`,
/// PagerDuty at `pagerduty`), reading `prometheus`, storing in `dir`. Weak verdicts are not
/// diagnosed again unless `extra` sets `service.rediagnose_weak_after` (the follow-up a
/// minute later would hold [`drained`] for that minute; `tests/rediagnosis.rs` tests it).
pub fn culprit_config(dir: &Path, prometheus: &str, slack: &str, pagerduty: &str, extra: &str) -> String {
    let no_follow_up = "[service]\nrediagnose_weak_after = \"0s\"\n";
    let extra = match extra {
        e if e.contains("rediagnose_weak_after") => e.to_string(),
        e if e.contains("[service]\n") => e.replacen("[service]\n", no_follow_up, 1),
        e => format!("{e}\n{no_follow_up}"),
    };
    std::fs::write(dir.join("slack-token"), "xoxb-test-token").unwrap();
    std::fs::write(dir.join("routing-key"), "R0UTINGKEY0000000000000000000000").unwrap();
    format!(
        r#"
[prometheus]
url = "{prometheus}"
timeout = "2s"
deadline = "4s"
[server]
listen = "127.0.0.1:0"
[store]
path = "{store}"
[notify.slack]
token = {{ file = "{token}" }}
channel = "C0NCALL"
api_url = "{slack}/api"
[notify.pagerduty]
routing_key = {{ file = "{key}" }}
url = "{pagerduty}/v2/enqueue"
[notify.retry]
min = "200ms"
max = "2s"
{extra}
"#,
        store = dir.join("culprit.db").display(),
        token = dir.join("slack-token").display(),
        key = dir.join("routing-key").display(),
    )
}

/// Polls `done` every 200 ms until it holds, or panics after `timeout`.
pub async fn wait_for(what: &str, timeout: std::time::Duration, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < timeout, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Logs of the code under test, shown for failing tests (`RUST_LOG` filters; default info).
pub fn init_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init();
}

/// Waits until culprit has nothing left to do: no diagnosis waiting or running and no
/// notice waiting or being sent, as its store counts them. After that nothing more can
/// arrive at a destination until another webhook comes (no "nothing more arrived" sleeps).
pub async fn drained(app: &culprit::service::server::Application) {
    let started = Instant::now();
    loop {
        let d = app.service.store.depths().await.unwrap();
        if d.work == 0 && d.outbox == 0 {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(120), "culprit never drained: {d:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A sample of culprit's `/metrics` (the series exactly as written, labels included), 0
/// when absent.
pub fn metric(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series).and_then(|rest| rest.strip_prefix(' ')))
        .map_or(0.0, |v| v.trim().parse().unwrap())
}

/// The same as [`drained`], for a culprit in another process (read from its `/metrics`).
pub async fn drained_at(url: &str) {
    let started = Instant::now();
    loop {
        if let Ok(r) = ::reqwest::get(format!("{url}/metrics")).await
            && let Ok(text) = r.text().await
            && metric(&text, "culprit_queue_depth{queue=\"work\"}") == 0.0
            && metric(&text, "culprit_queue_depth{queue=\"outbox\"}") == 0.0
            && text.contains("culprit_queue_depth{queue=\"outbox\"}")
        {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(120), "culprit at {url} never drained");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The sum of `culprit_diagnoses_total` over its label sets in a `/metrics` answer.
pub fn diagnoses_total(metrics: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("culprit_diagnoses_total{"))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<f64>().unwrap())
        .sum()
}

/// The value of the one series of `/metrics` text written exactly as `series` (a name, or a
/// name with its labels as culprit writes them); NaN when there is none.
pub fn metric_value(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series).and_then(|rest| rest.strip_prefix(' ')))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(f64::NAN)
}
