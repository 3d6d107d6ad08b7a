//! The field reports of issue 8 ("Every Flink a user runs"), each with the value its README
//! says a user expects: offline, as a user runs `culprit diagnose --recording … --plan …`,
//! and live, from a real Prometheus backfilled with the same recording by promtool.
//!
//! The inputs are copied from the reports into `tests/data/reports/NN-*/` (README, the
//! `make.py` that generates them, the recording and the plan).

mod support;

use std::path::{Path, PathBuf};

use culprit::cli::{DiagnoseArgs, diagnose_command};
use culprit::collect::collector::{CollectInput, collect};
use culprit::collect::prometheus::{PromSource, Prometheus};
use culprit::config::{Config, Millis, PrometheusConfig};
use culprit::diagnose::diagnose;
use culprit::model::graph::JobGraph;
use culprit::model::request::DiagnosisRequest;
use culprit::model::verdict::{Finding, Status, Verdict};
use culprit::render::Format;
use serde_json::Value;

fn report(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/reports").join(name)
}

fn args(dir: &Path, recording: &Path) -> DiagnoseArgs {
    DiagnoseArgs {
        recording: Some(recording.to_path_buf()),
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
        checkpoint_config: None,
        exceptions: None,
        rescales: None,
        format: Format::Json,
    }
}

/// The verdict of `culprit diagnose --recording <dir>/recording.om.gz --plan <dir>/plan.json`.
fn offline(dir: &Path) -> Verdict {
    diagnose_command(&args(dir, &dir.join("recording.om.gz")), 0).unwrap_or_else(|e| panic!("{}", e.message))
}

fn at_of(v: &Verdict) -> i64 {
    v.at.parse::<jiff::Timestamp>().unwrap().as_millisecond()
}

/// The live verdict from Prometheus at `url`, for `request` with the plan of `dir`.
async fn live(url: &str, dir: &Path, request: &DiagnosisRequest) -> Verdict {
    let config = Config::default();
    let prom = Prometheus::new(&PrometheusConfig {
        url: url.to_string(),
        timeout: Millis::from_secs(10),
        deadline: Millis::from_secs(20),
        auth: None,
        tenant: None,
        max_answer_bytes: culprit::collect::prometheus::MAX_ANSWER_BYTES,
        max_answer_bytes_in_flight: culprit::config::PROMETHEUS_MAX_ANSWER_BYTES_IN_FLIGHT,
        max_concurrency: culprit::config::PROMETHEUS_MAX_CONCURRENCY,
    })
    .unwrap();
    let source = PromSource::new(&prom, request.at_ms.unwrap());
    let graph = JobGraph::from_plan_json(&std::fs::read_to_string(dir.join("plan.json")).unwrap()).unwrap();
    let snapshot = collect(
        &source,
        CollectInput {
            request,
            graph: Some(graph),
            checkpoint_config: None,
            exceptions: None,
            rescales: None,
            config: &config,
            catalog: &config.metrics,
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    culprit::render::words::verdict(&diagnose(&snapshot, &config.diagnosis))
}

/// Equal JSON, numbers within a relative 1e-3 (Prometheus' float sums differ in the last
/// bits).
fn assert_same(a: &Value, b: &Value, path: &str) {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            assert!((x - y).abs() <= 1e-3 * x.abs().max(y.abs()).max(1e-9), "{path}: {x} vs {y}");
        }
        (Value::Array(x), Value::Array(y)) => {
            assert_eq!(x.len(), y.len(), "{path}: lengths\n{a:#}\nvs\n{b:#}");
            for (i, (x, y)) in x.iter().zip(y).enumerate() {
                assert_same(x, y, &format!("{path}[{i}]"));
            }
        }
        (Value::Object(x), Value::Object(y)) => {
            assert_eq!(x.keys().collect::<Vec<_>>(), y.keys().collect::<Vec<_>>(), "{path}: keys");
            for (k, v) in x {
                assert_same(v, &y[k], &format!("{path}.{k}"));
            }
        }
        _ => assert_eq!(a, b, "{path}"),
    }
}

fn vertex<'a>(v: &'a Verdict, name: &str) -> &'a culprit::model::verdict::GraphVertex {
    v.graph.vertices.iter().find(|g| g.name == name).unwrap_or_else(|| panic!("no vertex {name}"))
}

fn no_plan_of_another_run_note(v: &Verdict) {
    assert!(!v.notes.iter().any(|n| n.contains("the plan is not of this run")), "{:#?}", v.notes);
}

// ---------------------------------------------------------------------------------------
// 02: a PushGateway keeps the last push of a dead TaskManager (attempt 0).
// ---------------------------------------------------------------------------------------

/// Report 02's expectation: attempt 1 is healthy, so no backpressure; the frozen attempt-0
/// series of tm-b (window subtask 1 busy 1000 ms/s, source subtask 1 backpressured 960 ms/s)
/// are left out and a note says so.
fn assert_report_02(v: &Verdict) {
    assert_eq!((v.status, v.finding), (Status::NoBackpressure, Finding::None), "{}", v.summary);
    // Live attempt 1: window busy 260 and 270 ms/s → b_max = 0.27; source backpressured 0.
    assert_eq!(vertex(v, "TumblingEventTimeWindows").busy_max, Some(0.27));
    assert_eq!(vertex(v, "Source: clicks").backpressured_max, Some(0.0));
    no_plan_of_another_run_note(v);
    let note = v.notes.iter().find(|n| n.contains("superseded task attempts")).expect("a note on the attempts");
    // One frozen subtask per vertex (subtask 1 of each of the 3 vertices ran on tm-b).
    assert!(note.starts_with("Left out 3 series of superseded task attempts"), "{note}");
    assert!(note.contains("attempts seen: 0, 1"), "{note}");
}

#[test]
fn report_02_a_dead_taskmanagers_attempt_kept_by_the_pushgateway_is_left_out_offline() {
    assert_report_02(&offline(&report("02-pushgateway-stale-attempt")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_02_a_dead_taskmanagers_attempt_kept_by_the_pushgateway_is_left_out_live() {
    let dir = report("02-pushgateway-stale-attempt");
    let expected = offline(&dir);
    let server = support::prometheus_with(&dir.join("recording.om.gz"));
    let request =
        DiagnosisRequest { job: Some(expected.job.id.clone()), at_ms: Some(at_of(&expected)), ..Default::default() };
    let v = live(&server.url, &dir, &request).await;
    assert_report_02(&v);
    assert_same(&serde_json::to_value(&expected).unwrap(), &serde_json::to_value(&v).unwrap(), "02 live");
}

// ---------------------------------------------------------------------------------------
// One target scraped by two scrape jobs (pod annotations and a PodMonitor).
// ---------------------------------------------------------------------------------------

/// A capture's recording with every series read twice: once as recorded (`job="flink"`),
/// once by a second scrape job (`job="flink-podmonitor"`), the values equal.
fn scraped_twice(capture: &Path, out: &Path) {
    let tmp = out.with_extension("plain");
    support::gunzip(&capture.join("recording.om.gz"), &tmp);
    let text = std::fs::read_to_string(&tmp).unwrap();
    let mut doubled = String::with_capacity(text.len() * 2);
    for line in text.lines() {
        doubled.push_str(line);
        doubled.push('\n');
        if !line.starts_with('#') && line.contains("job=\"flink\"") {
            doubled.push_str(&line.replace("job=\"flink\"", "job=\"flink-podmonitor\""));
            doubled.push('\n');
        }
    }
    std::fs::write(out, doubled).unwrap();
}

/// The verdict without its notes (the doubled input adds one about the duplicates) and
/// without the PromQL of its evidence (which says each target counts once).
fn without_notes(v: &Verdict) -> Value {
    let mut json = serde_json::to_value(v).unwrap();
    json["notes"] = Value::Null;
    for e in json["evidence"].as_array_mut().unwrap() {
        e["query"] = Value::Null;
    }
    json
}

#[test]
fn a_capture_scraped_by_two_scrape_jobs_gives_the_verdict_of_the_capture_scraped_once() {
    for name in ["slow-sink", "hot-key", "healthy"] {
        let dir = support::capture(name);
        let tmp = tempfile::tempdir().unwrap();
        let doubled = tmp.path().join("doubled.om");
        scraped_twice(&dir, &doubled);
        let once = offline(&dir);
        let twice = diagnose_command(&args(&dir, &doubled), 0).unwrap_or_else(|e| panic!("{}", e.message));
        assert_same(&without_notes(&once), &without_notes(&twice), name);
        no_plan_of_another_run_note(&twice);
        assert!(
            twice.notes.iter().any(|n| n.contains("were scraped more than once") && n.contains("each counts once")),
            "{name}: {:#?}",
            twice.notes
        );
        assert!(!once.notes.iter().any(|n| n.contains("scraped more than once")), "{name}: {:#?}", once.notes);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capture_scraped_by_two_scrape_jobs_gives_the_verdict_of_the_capture_scraped_once_live() {
    let dir = support::capture("slow-sink");
    let tmp = tempfile::tempdir().unwrap();
    let doubled = tmp.path().join("doubled.om");
    scraped_twice(&dir, &doubled);
    let expected = diagnose_command(&args(&dir, &doubled), 0).unwrap_or_else(|e| panic!("{}", e.message));
    let server = support::prometheus_with(&doubled);
    let request =
        DiagnosisRequest { job: Some(expected.job.id.clone()), at_ms: Some(at_of(&expected)), ..Default::default() };
    let v = live(&server.url, &dir, &request).await;
    assert_same(&serde_json::to_value(&expected).unwrap(), &serde_json::to_value(&v).unwrap(), "slow-sink twice live");
    assert_eq!(v.culprit.as_ref().map(|c| c.vertex_name.as_str()), Some("slow-sink: Writer"), "{}", v.summary);
}

// ---------------------------------------------------------------------------------------
// 01: two application-mode deployments share the job id 000…0.
// ---------------------------------------------------------------------------------------

fn with_labels(mut a: DiagnoseArgs, labels: &[&str]) -> DiagnoseArgs {
    a.label = labels.iter().map(|s| s.to_string()).collect();
    a
}

/// The slow US deployment, as the alert's `namespace` names it: its sink is the culprit,
/// with the US numbers only (sink busy max(995, 990) = 0.995, sources backpressured
/// max(930, 925) = 0.93, 2 subtasks each as the plan says); the EU copy (busy 0.18, nothing
/// backpressured) blends in nowhere.
fn assert_report_01_us(v: &Verdict) {
    assert_eq!((v.status, v.finding), (Status::CulpritFound, Finding::Sink), "{}", v.summary);
    assert_eq!(v.culprit.as_ref().unwrap().vertex_name, "Sink: orders-out");
    assert_eq!(v.culprit.as_ref().unwrap().subtasks, [0, 1]);
    assert_eq!(vertex(v, "Sink: orders-out").busy_max, Some(0.995));
    assert_eq!(vertex(v, "Source: orders").backpressured_max, Some(0.93));
    no_plan_of_another_run_note(v);
    assert!(
        v.notes.iter().any(|n| n.starts_with("2 deployments report this job id at once (namespace=flink-eu; namespace=flink-us): diagnosing namespace=flink-us")),
        "{:#?}",
        v.notes
    );
}

/// The healthy EU deployment: no backpressure, its own numbers (enrich busy max(220, 230)).
fn assert_report_01_eu(v: &Verdict) {
    assert_eq!((v.status, v.finding), (Status::NoBackpressure, Finding::None), "{}", v.summary);
    assert_eq!(vertex(v, "enrich").busy_max, Some(0.23));
    assert_eq!(vertex(v, "Source: orders").backpressured_max, Some(0.0));
    no_plan_of_another_run_note(v);
}

fn assert_refuses_to_blend(message: &str) {
    assert!(
        message.contains(
            "job_id 00000000000000000000000000000000 is reported by 2 deployments at once (namespace=flink-eu; namespace=flink-us) and the request does not say which; their metrics are not blended into one verdict"
        ),
        "{message}"
    );
}

#[test]
fn report_01_two_deployments_under_one_job_id_are_never_blended_offline() {
    let dir = report("01-zero-job-id-two-deployments");
    let recording = dir.join("recording.om.gz");
    // Nothing says which deployment: refused, naming both (exit code 2, bad input).
    let err = diagnose_command(&args(&dir, &recording), 0).unwrap_err();
    assert_eq!(err.code, culprit::cli::EXIT_USAGE);
    assert_refuses_to_blend(&err.message);
    let us = diagnose_command(&with_labels(args(&dir, &recording), &["namespace=flink-us"]), 0).unwrap();
    assert_report_01_us(&us);
    let eu = diagnose_command(&with_labels(args(&dir, &recording), &["namespace=flink-eu"]), 0).unwrap();
    assert_report_01_eu(&eu);
    // Labels that do not tell the deployments apart change nothing; a namespace that is
    // neither is refused.
    let err =
        diagnose_command(&with_labels(args(&dir, &recording), &["alertname=FlinkJobBackpressured"]), 0).unwrap_err();
    assert_refuses_to_blend(&err.message);
    let err = diagnose_command(&with_labels(args(&dir, &recording), &["namespace=flink-ap"]), 0).unwrap_err();
    assert!(err.message.contains("the request's namespace=flink-ap names no single one of them"), "{}", err.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_01_two_deployments_under_one_job_id_are_never_blended_live() {
    let dir = report("01-zero-job-id-two-deployments");
    let recording = dir.join("recording.om.gz");
    let expected_us = diagnose_command(&with_labels(args(&dir, &recording), &["namespace=flink-us"]), 0).unwrap();
    let server = support::prometheus_with(&recording);
    let request = |labels: &[(&str, &str)]| DiagnosisRequest {
        job: Some("orders-enricher".into()),
        at_ms: Some(at_of(&expected_us)),
        labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        ..Default::default()
    };
    let us =
        live(&server.url, &dir, &request(&[("namespace", "flink-us"), ("alertname", "FlinkJobBackpressured")])).await;
    assert_report_01_us(&us);
    assert_same(&serde_json::to_value(&expected_us).unwrap(), &serde_json::to_value(&us).unwrap(), "01 us live");
    assert_report_01_eu(&live(&server.url, &dir, &request(&[("namespace", "flink-eu")])).await);

    // Without a namespace the live collection refuses too.
    let config = Config::default();
    let prom = Prometheus::new(&PrometheusConfig {
        url: server.url.clone(),
        timeout: Millis::from_secs(10),
        deadline: Millis::from_secs(20),
        auth: None,
        tenant: None,
        max_answer_bytes: culprit::collect::prometheus::MAX_ANSWER_BYTES,
        max_answer_bytes_in_flight: culprit::config::PROMETHEUS_MAX_ANSWER_BYTES_IN_FLIGHT,
        max_concurrency: culprit::config::PROMETHEUS_MAX_CONCURRENCY,
    })
    .unwrap();
    let source = PromSource::new(&prom, at_of(&expected_us));
    let err = collect(
        &source,
        CollectInput {
            request: &request(&[]),
            graph: None,
            checkpoint_config: None,
            exceptions: None,
            rescales: None,
            config: &config,
            catalog: &config.metrics,
        },
    )
    .await
    .unwrap_err();
    assert_refuses_to_blend(&err.to_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_01_a_recording_of_one_deployment_holds_only_its_series_and_replays_to_its_verdict() {
    let dir = report("01-zero-job-id-two-deployments");
    let recording = dir.join("recording.om.gz");
    let at = at_of(&diagnose_command(&with_labels(args(&dir, &recording), &["namespace=flink-us"]), 0).unwrap());
    let server = support::prometheus_with(&recording);
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("culprit.toml");
    std::fs::write(&config, format!("[prometheus]\nurl = \"{}\"\n", server.url)).unwrap();
    let out = tmp.path().join("us.om.gz");
    let record = culprit::cli::RecordArgs {
        job: "orders-enricher".into(),
        label: vec!["namespace=flink-us".into()],
        lookback: "1h".into(),
        at: Some(culprit::model::verdict::rfc3339(at)),
        window: None,
        config,
        cluster: None,
        out: out.clone(),
        plan_out: None,
        checkpoint_config_out: None,
        exceptions_out: None,
        rescales_out: None,
    };
    let summary = culprit::cli::record_command(&record, at).await.unwrap_or_else(|e| panic!("{}", e.message));
    assert!(summary.contains("verdict: "), "{summary}");
    let text = tmp.path().join("us.om");
    support::gunzip(&out, &text);
    let text = std::fs::read_to_string(&text).unwrap();
    assert!(text.contains("namespace=\"flink-us\"") && !text.contains("namespace=\"flink-eu\""));
    // The bundle replays without a label: only one deployment is in it.
    let mut replay = args(&dir, &out);
    replay.plan = None;
    let v = diagnose_command(&replay, 0).unwrap_or_else(|e| panic!("{}", e.message));
    assert_eq!(
        v.culprit.as_ref().map(|c| c.vertex_id.as_str()),
        Some("4bf7c1955ffe56e2106d666433eaf137"),
        "{}",
        v.summary
    );
}

// ---------------------------------------------------------------------------------------
// 03: Flink ≤ 1.12 reports isBackPressured and buffer pool usage, no busy or
// backpressured time.
// ---------------------------------------------------------------------------------------

/// Report 03's expectation, by the classic method. Source and Map report isBackPressured =
/// 1 in every sample (their backpressured time would be 900–920 ms/s) → share 1.0; the sink
/// 0 in every sample → 0.0. The sink's input pool is full (inPoolUsage 1.0 ≥ 0.9) and its
/// output pool low (outPoolUsage 0.1 ≤ 0.5): it is the culprit, a sink. Busy time is
/// unknown everywhere, never 0; confidence is lowered to medium.
fn assert_report_03(v: &Verdict) {
    assert_eq!((v.status, v.finding), (Status::CulpritFound, Finding::Sink), "{}", v.summary);
    let culprit = v.culprit.as_ref().expect("a culprit");
    assert_eq!(
        (culprit.vertex_name.as_str(), culprit.vertex_id.as_str()),
        ("Sink: JDBC", "6d2677a0ecc3fd8df0b72ec675edf8f4")
    );
    assert_eq!(v.confidence, culprit::model::verdict::Confidence::Medium);
    for (name, p) in [("Source: Custom Source", 1.0), ("Map", 1.0), ("Sink: JDBC", 0.0)] {
        assert_eq!(vertex(v, name).backpressured_max, Some(p), "{name}");
        assert_eq!(vertex(v, name).busy_max, None, "{name}: busy is unknown, never 0");
    }
    let states: Vec<_> = v.graph.vertices.iter().map(|g| (g.name.as_str(), g.state)).collect();
    use culprit::model::verdict::VertexState::{Backpressured, Culprit};
    assert_eq!(states, [("Source: Custom Source", Backpressured), ("Map", Backpressured), ("Sink: JDBC", Culprit)]);
    let evidence =
        |metric: &str| v.evidence.iter().find(|e| e.subject == "Sink: JDBC" && e.metric == metric).map(|e| e.value);
    assert_eq!(evidence("inPoolUsage"), Some(1.0));
    assert_eq!(evidence("outPoolUsage"), Some(0.1));
    assert_eq!(evidence("busyTimeMsPerSecond"), None, "no busy time to show");
    let note = v.notes.iter().find(|n| n.contains("predates Flink 1.13")).expect("a note on the reporter");
    assert!(note.contains("isBackPressured") && note.contains("inPoolUsage"), "{note}");
    assert!(
        v.missing.iter().any(|m| m.contains("busyTimeMsPerSecond") && m.contains("predates Flink 1.13")),
        "{:#?}",
        v.missing
    );
    let text = culprit::render::render(v, Format::Text);
    for wrong in ["busy 0%", "0%–0%", "nothing is backpressured"] {
        assert!(!text.contains(wrong), "`{wrong}` in:\n{text}");
    }
}

#[test]
fn report_03_a_flink_1_12_reporter_without_busy_time_gets_the_classic_method_offline() {
    assert_report_03(&offline(&report("03-flink-1.12-no-busy-metrics")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_03_a_flink_1_12_reporter_without_busy_time_gets_the_classic_method_live() {
    let dir = report("03-flink-1.12-no-busy-metrics");
    let expected = offline(&dir);
    let server = support::prometheus_with(&dir.join("recording.om.gz"));
    let request =
        DiagnosisRequest { job: Some(expected.job.id.clone()), at_ms: Some(at_of(&expected)), ..Default::default() };
    let v = live(&server.url, &dir, &request).await;
    assert_report_03(&v);
    assert_same(&serde_json::to_value(&expected).unwrap(), &serde_json::to_value(&v).unwrap(), "03 live");
}
