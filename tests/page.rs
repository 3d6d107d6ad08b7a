//! The verdict page in a real browser: Debian's headless `chromium` (scripts/test.sh
//! installs it) renders every capture's page to a PNG that is not blank, its DOM shows the
//! culprit's name and the finding, and the page makes no network request: Chromium runs
//! with every request routed through a proxy that is a local listener counting the
//! connections it gets (none may come).

mod support;

use support::png_ink::ink;

use std::io::Read as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use culprit::cli::{DiagnoseArgs, diagnose_command};
use culprit::model::verdict::Verdict;
use culprit::render::html;
use culprit::render::names::Names;

fn chromium() -> PathBuf {
    for name in ["chromium", "chromium-browser"] {
        for dir in std::env::var("PATH").unwrap_or_default().split(':') {
            let p = Path::new(dir).join(name);
            if p.exists() {
                return p;
            }
        }
    }
    panic!("`chromium` is not installed: apt-get install -y chromium (scripts/test.sh does)");
}

fn verdict(dir: &Path) -> Verdict {
    let checkpoint_config = dir.join("rest/checkpoints-config.json");
    let args = DiagnoseArgs {
        recording: Some(dir.join("recording.om.gz")),
        metrics: Vec::new(),
        scrape: Vec::new(),
        flamegraph: None,
        flink: None,
        cluster: None,
        plan: Some(dir.join("plan.json")),
        job: None,
        label: Vec::new(),
        at: None,
        window: None,
        config: None,
        checkpoint_config: checkpoint_config.exists().then_some(checkpoint_config),
        exceptions: Some(dir.join("rest/exceptions.json")).filter(|p| p.exists()),
        rescales: None,
        format: culprit::render::Format::Json,
    };
    diagnose_command(&args, 0).unwrap_or_else(|e| panic!("{}: {}", dir.display(), e.message))
}

/// Hosts Chromium itself calls in the background (component updates, its clock, sign-in),
/// whatever the page: not the page's requests.
const CHROMIUM_OWN: &[&str] = &[
    "accounts.google.com",
    "update.googleapis.com",
    "clients1.google.com",
    "clients2.google.com",
    "redirector.gvt1.com",
    "optimizationguide-pa.googleapis.com",
    "safebrowsing.googleapis.com",
    "content-autofill.googleapis.com",
    // Debian's Chromium 148 opens a tunnel to www.google.com at start even with
    // --disable-background-networking (seen here: the only request recorded, on every page).
    "www.google.com",
];

/// A proxy that answers nothing and records the first line of every request it gets
/// (`CONNECT host:443 …`, `GET http://host/… …`), until dropped.
struct Watch {
    port: u16,
    requests: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

impl Watch {
    fn start() -> Watch {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let (requests, stop) = (Arc::new(Mutex::new(Vec::new())), Arc::new(AtomicBool::new(false)));
        let (r, s) = (requests.clone(), stop.clone());
        std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((mut conn, _)) => {
                        let _ = conn.set_nonblocking(false);
                        let _ = conn.set_read_timeout(Some(std::time::Duration::from_secs(2)));
                        let mut buf = [0u8; 2048];
                        let n = conn.read(&mut buf).unwrap_or(0);
                        let line = String::from_utf8_lossy(&buf[..n]).lines().next().unwrap_or("").to_string();
                        r.lock().unwrap().push(line);
                    }
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
                }
            }
        });
        Watch { port, requests, stop }
    }

    /// The requests that are not Chromium's own background calls.
    fn page_requests(&self) -> Vec<String> {
        let host = |line: &str| {
            let target = line.split_whitespace().nth(1).unwrap_or("");
            let target = target.trim_start_matches("http://").trim_start_matches("https://");
            target.split(['/', ':']).next().unwrap_or("").to_string()
        };
        // A connection that sends no request line is one of Chromium's speculative
        // preconnects, not a request.
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter(|l| !l.is_empty() && !CHROMIUM_OWN.contains(&host(l).as_str()))
            .cloned()
            .collect()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Runs headless Chromium on `page` with `action` (`--screenshot=…` or `--dump-dom`).
fn run_chromium(page: &Path, profile: &Path, proxy: u16, action: &str) -> String {
    let out = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--no-default-browser-check",
            "--hide-scrollbars",
            "--window-size=1280,1600",
            &format!("--user-data-dir={}", profile.display()),
            &format!("--proxy-server=http://127.0.0.1:{proxy}"),
            "--proxy-bypass-list=<-loopback>",
            action,
            &format!("file://{}", page.display()),
        ])
        .stdin(Stdio::null())
        .output()
        .expect("chromium runs");
    assert!(out.status.success(), "chromium failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Text as Chromium's `--dump-dom` serializes a text node: only `&`, `<`, `>` (and a
/// no-break space) escaped, so a page's `&#39;` reads back as `'`.
fn dom_text(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('\u{a0}', "&nbsp;")
}

#[test]
fn every_captures_page_renders_in_chromium_shows_the_culprit_and_requests_nothing() {
    let mut inputs = support::captures();
    inputs.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/reports/04-sql-names"));
    let tmp = tempfile::tempdir().unwrap();
    let watch = Watch::start();
    for (i, dir) in inputs.iter().enumerate() {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let v = verdict(dir);
        let page = tmp.path().join(format!("{name}.html"));
        std::fs::write(&page, html::page(&v)).unwrap();
        let profile = tmp.path().join(format!("profile-{i}"));
        let png_path = tmp.path().join(format!("{name}.png"));
        run_chromium(&page, &profile, watch.port, &format!("--screenshot={}", png_path.display()));
        let (colours, share) = ink(&png_path);
        assert!(colours > 20 && share > 0.02, "{name}: a blank page? {colours} colours, {share:.3} inked");

        let dom = run_chromium(&page, &profile, watch.port, "--dump-dom");
        let names = Names::of(&v);
        let summary = dom_text(&names.text(&v.summary));
        assert!(dom.contains(&summary), "{name}: the answer is not in the DOM");
        assert!(dom.contains(&format!("finding <b>{}</b>", v.finding.as_str())), "{name}: no finding in the DOM");
        if let Some(c) = &v.culprit {
            let shown = dom_text(&names.prose(&c.vertex_name));
            assert!(dom.contains(&shown), "{name}: the culprit {shown} is not in the DOM");
            assert!(dom.contains(&format!("CULPRIT · {}", v.finding.as_str())), "{name}: the graph does not mark it");
        }
    }
    // Let any late connection land before counting.
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(watch.page_requests(), Vec::<String>::new(), "the pages made network requests");

    // The watch sees a request when there is one: a page with an outside image.
    let control = tmp.path().join("control.html");
    std::fs::write(&control, "<!doctype html><img src=\"http://culprit-test.invalid/x.png\">").unwrap();
    run_chromium(&control, &tmp.path().join("profile-control"), watch.port, "--dump-dom");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let seen = watch.page_requests();
    assert!(
        seen.iter().any(|l| l.contains("culprit-test.invalid")),
        "the watch missed the control page's request: {seen:?}"
    );
}
