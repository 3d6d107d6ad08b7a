//! `GET /verdicts`, the history of verdicts, as a browser and an API client see it: culprit
//! serve with real Prometheus and a Slack stand-in, two jobs diagnosed (one of them twice),
//! the page opened in a real headless Chromium (its screenshot has ink, its DOM the rows),
//! the JSON filtered by job, finding and time, two verdicts of one job compared, and the
//! API's authentication required.

mod support;

use support::png_ink::ink;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use culprit::config::Config;
use culprit::service::server::Application;
use serde_json::Value;
use support::capture::Capture;

const API_USER: &str = "ops";
const API_PASSWORD: &str = "history-pa55";

fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser"].iter().find_map(|name| {
        std::env::var("PATH").unwrap_or_default().split(':').map(|d| Path::new(d).join(name)).find(|p| p.exists())
    })
}

/// Headless Chromium on `url` with `action` (`--dump-dom` or `--screenshot=…`).
fn run_chromium(binary: &Path, profile: &Path, url: &str, action: &str) -> String {
    let out = Command::new(binary)
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
            "--window-size=1280,900",
            &format!("--user-data-dir={}", profile.display()),
            action,
            url,
        ])
        .stdin(Stdio::null())
        .output()
        .expect("chromium runs");
    assert!(out.status.success(), "chromium failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

struct World {
    app: Application,
    jobs: Vec<(String, String)>,
    _prom: support::Server,
    _slack: Capture,
    _pagerduty: Capture,
    _tmp: tempfile::TempDir,
}

/// Posts a webhook for job `i` and waits until culprit has nothing left to do.
async fn diagnose(w: &World, i: usize) {
    let (id, name) = &w.jobs[i];
    let status = reqwest::Client::new()
        .post(format!("{}/webhook/alertmanager", w.app.url()))
        .basic_auth(API_USER, Some(API_PASSWORD))
        .json(&support::webhook_for(id, name, &[format!("f{i}")]))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 202);
    tokio::time::sleep(Duration::from_millis(300)).await;
    support::drained(&w.app).await;
}

/// culprit with three stored verdicts: job 0, job 1, job 0 again.
async fn world(auth: bool) -> World {
    let now = jiff::Timestamp::now().as_millisecond();
    let synthetic = support::synthetic_jobs(2, now - 1_000);
    let texts: Vec<String> = synthetic.iter().map(|(_, t)| t.clone()).collect();
    let prom = support::prometheus_with_texts(&texts, support::free_port());
    let (slack, pagerduty) = (Capture::start().await, Capture::start().await);
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("api-password"), API_PASSWORD).unwrap();
    let auth_line = if auth {
        format!(
            "auth = {{ type = \"basic\", username = \"{API_USER}\", password = {{ file = \"{}\" }} }}\n",
            tmp.path().join("api-password").display()
        )
    } else {
        String::new()
    };
    let text =
        support::culprit_config(tmp.path(), &prom.url, &slack.url, &pagerduty.url, "[service]\ncoalesce = \"100ms\"\n")
            .replace(
                "[server]\nlisten = \"127.0.0.1:0\"\n",
                &format!("[server]\nlisten = \"127.0.0.1:0\"\n{auth_line}"),
            );
    let app = Application::build(Config::from_toml(&text, "history.toml").unwrap()).await.unwrap();
    let jobs = synthetic.iter().map(|(j, _)| (j.job_id(), j.job_name())).collect();
    let w = World { app, jobs, _prom: prom, _slack: slack, _pagerduty: pagerduty, _tmp: tmp };
    diagnose(&w, 0).await;
    diagnose(&w, 1).await;
    // The same job again: a new alert group (another fingerprint), so a new diagnosis.
    let (id, name) = w.jobs[0].clone();
    let status = reqwest::Client::new()
        .post(format!("{}/webhook/alertmanager", w.app.url()))
        .basic_auth(API_USER, Some(API_PASSWORD))
        .json(&support::webhook_for(&id, &name, &["again".into()]))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 202);
    tokio::time::sleep(Duration::from_millis(300)).await;
    support::drained(&w.app).await;
    w
}

async fn json(w: &World, query: &str) -> (u16, Value) {
    let r = reqwest::Client::new()
        .get(format!("{}/verdicts{query}", w.app.url()))
        .basic_auth(API_USER, Some(API_PASSWORD))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

fn ids(v: &Value) -> Vec<i64> {
    v["verdicts"].as_array().unwrap().iter().map(|r| r["id"].as_i64().unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_history_page_shows_every_verdict_in_a_real_chromium_with_links_and_what_changed() {
    let Some(browser) = chromium() else {
        eprintln!("SKIPPED: `chromium` is not installed (apt-get install -y chromium)");
        return;
    };
    let w = world(false).await;
    let (_, all) = json(&w, "").await;
    let listed = ids(&all);
    assert_eq!(listed.len(), 3, "{all:#}");
    let tmp = tempfile::tempdir().unwrap();
    let url = format!("{}/verdicts", w.app.url());
    let dom = run_chromium(&browser, &tmp.path().join("p1"), &url, "--dump-dom");
    assert_eq!(dom.matches("<tr class=\"verdict\"").count(), 3, "{dom}");
    for id in &listed {
        assert!(dom.contains(&format!("<a href=\"/verdicts/{id}\">#{id}</a>")), "row {id} links its page: {dom}");
    }
    // Each job by the name its verdicts give it (Flink's, as the metrics label it).
    for r in all["verdicts"].as_array().unwrap() {
        let name = r["verdict"]["job"]["name"].as_str().unwrap();
        assert!(dom.contains(&format!(">{name}</a>")), "{name}: {dom}");
    }
    // Newest first: job 0's second verdict, then job 1's, then job 0's first.
    let (newest, oldest) = (listed[0], listed[2]);
    assert!(dom.contains(&format!("/verdicts?compare={oldest},{newest}")), "{dom}");
    assert!(dom.contains(">first</span>"));
    let shot = tmp.path().join("history.png");
    run_chromium(&browser, &tmp.path().join("p2"), &url, &format!("--screenshot={}", shot.display()));
    let (colours, inked) = ink(&shot);
    // A blank page is one colour and no ink; the table, badges and links are many.
    assert!(colours > 20 && inked > 0.01, "the screenshot looks blank: {colours} colours, {inked:.4} inked");

    // Following a row's link opens its verdict page in the same browser.
    let page =
        run_chromium(&browser, &tmp.path().join("p3"), &format!("{}/verdicts/{newest}", w.app.url()), "--dump-dom");
    assert!(page.contains("id=\"answer\""), "{page}");
    // The comparison of the job's two verdicts.
    let cmp_url = format!("{}/verdicts?compare={oldest},{newest}", w.app.url());
    let cmp = run_chromium(&browser, &tmp.path().join("p4"), &cmp_url, "--dump-dom");
    assert!(
        cmp.contains(&format!("#{oldest}")) && cmp.contains(&format!("#{newest}")) && cmp.contains("class=\"changes\"")
    );
    w.app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_json_filters_by_job_finding_and_time_and_needs_the_apis_credentials() {
    let w = world(true).await;
    let (status, all) = json(&w, "").await;
    assert_eq!(status, 200);
    let listed = ids(&all);
    assert_eq!(listed.len(), 3);
    // The newest is job 0's second verdict: its predecessor is job 0's first (the oldest).
    let newest = &all["verdicts"][0];
    assert_eq!(newest["previous"], listed[2]);
    assert!(newest["changes"].is_array(), "{newest:#}");
    assert_eq!(all["verdicts"][2]["changes"], Value::Null, "a job's first verdict changes nothing");

    let job0_id = &w.jobs[0].0;
    let job0_name = all["verdicts"][0]["verdict"]["job"]["name"].as_str().unwrap().to_string();
    let by_name = ids(&json(&w, &format!("?job={job0_name}")).await.1);
    assert_eq!(by_name, vec![listed[0], listed[2]]);
    assert_eq!(ids(&json(&w, &format!("?job={job0_id}")).await.1), by_name);
    assert!(ids(&json(&w, "?job=no-such-job").await.1).is_empty());

    let finding = newest["verdict"]["finding"].as_str().unwrap().to_string();
    let with_finding = json(&w, &format!("?finding={finding}")).await.1;
    assert!(with_finding["verdicts"].as_array().unwrap().iter().all(|r| r["verdict"]["finding"] == finding.as_str()));
    assert!(!ids(&with_finding).is_empty());
    assert!(ids(&json(&w, "?finding=no_such_finding").await.1).is_empty());

    // All three were stored within the last hour; none before 2000.
    assert_eq!(ids(&json(&w, "?since=1h").await.1).len(), 3);
    assert!(ids(&json(&w, "?until=2000-01-01T00:00:00Z").await.1).is_empty());
    assert_eq!(json(&w, "?since=yesterday").await.0, 400);
    assert_eq!(ids(&json(&w, "?limit=1").await.1), vec![listed[0]]);

    let (status, cmp) = json(&w, &format!("?compare={},{}", listed[0], listed[2])).await;
    assert_eq!(status, 200);
    assert_eq!((cmp["older"]["id"].as_i64(), cmp["newer"]["id"].as_i64()), (Some(listed[2]), Some(listed[0])));
    assert_eq!(json(&w, &format!("?compare={},{}", listed[0], listed[1])).await.0, 400, "two jobs");

    // Without credentials: 401, a page asking for the password to a browser.
    let r = reqwest::Client::new()
        .get(format!("{}/verdicts", w.app.url()))
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(r.headers()["www-authenticate"], "Basic realm=\"culprit\"");
    assert!(r.text().await.unwrap().contains("The history needs the API&#39;s credentials."));
    w.app.stop().await;
}
