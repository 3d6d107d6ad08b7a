//! `culprit serve` as its own process (the built binary), for tests that kill it.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running `culprit serve`; killed and reaped when dropped.
pub struct ServeProcess {
    pub child: Child,
    /// `http://127.0.0.1:{port}`.
    pub url: String,
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `culprit serve --config CONFIG` (which listens on `port`), its stderr appended to
/// `log`, and waits until `/healthz` answers (at most 20 s, else panics with the log).
pub async fn start(config: &Path, port: u16, log: &Path) -> ServeProcess {
    // Cargo names the binary to integration tests; examples that share this support
    // code (`examples/flood_bench.rs`) never start a process (else: the one on PATH).
    let binary = option_env!("CARGO_BIN_EXE_culprit").unwrap_or("culprit");
    let child = Command::new(binary)
        .args(["serve", "--config"])
        .arg(config)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let started = std::time::Instant::now();
    while reqwest::get(format!("{url}/healthz")).await.is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "culprit did not start: {}",
            std::fs::read_to_string(log).unwrap()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    ServeProcess { child, url }
}
