//! Real backends for integration tests: a Prometheus or a VictoriaMetrics on a free
//! loopback port, loaded with a recording, stopped when dropped.
//!
//! Prometheus gets the recording through `promtool tsdb create-blocks-from openmetrics`
//! (the backfill path users have); VictoriaMetrics through `/api/v1/import/prometheus`.
//! Both binaries come from Debian packages (`prometheus`, `victoria-metrics`), which
//! `.ci/run` installs.

#![allow(dead_code)]

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

/// Prometheus holding `recording` (OpenMetrics, plain or gzip), backfilled with promtool.
pub fn prometheus_with(recording: &Path) -> Server {
    let prometheus = require("prometheus", "prometheus");
    let promtool = require("promtool", "prometheus");
    let dir = tempfile::tempdir().unwrap();
    let om = dir.path().join("recording.om");
    gunzip(recording, &om);
    let data = dir.path().join("data");
    let out = Command::new(&promtool)
        .args(["tsdb", "create-blocks-from", "openmetrics"])
        .arg(&om)
        .arg(&data)
        .output()
        .unwrap();
    assert!(out.status.success(), "promtool: {}", String::from_utf8_lossy(&out.stderr));
    let config = dir.path().join("prometheus.yml");
    std::fs::write(&config, "global:\n  scrape_interval: 1h\n").unwrap();
    let port = free_port();
    let log = dir.path().join("prometheus.log");
    let mut child = Command::new(prometheus)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", data.display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--storage.tsdb.retention.time=100y")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}");
    wait_ready(&format!("{url}/-/ready"), &mut child, &log);
    Server { url, child, _dir: dir }
}

/// VictoriaMetrics holding `recording`, imported as Prometheus text with ms timestamps.
pub fn victoria_metrics_with(recording: &Path) -> Server {
    let vm = require("victoria-metrics", "victoria-metrics");
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let log = dir.path().join("vm.log");
    let mut child = Command::new(vm)
        .arg(format!("-storageDataPath={}", dir.path().join("data").display()))
        .arg(format!("-httpListenAddr=127.0.0.1:{port}"))
        .arg("-retentionPeriod=100y")
        .arg("-search.latencyOffset=0s")
        .arg("-search.disableCache")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}");
    wait_ready(&format!("{url}/health"), &mut child, &log);

    // Convert to text format lines with millisecond timestamps.
    let om = dir.path().join("recording.om");
    gunzip(recording, &om);
    let text = std::fs::read_to_string(&om).unwrap();
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
