//! Issue 22, kinds "Sentinel values" and "A vertex whose series the store dropped".
//!
//! Report 07: the windows' input watermark stays at Long.MIN_VALUE ("No Watermark": source
//! subtask 3 of 4 reads no partition of a 3-partition topic, no idleness). Expected: finding
//! `watermark_stall` on the window vertex, the idleness fixes, no RocksDB advice; offline
//! and live from a real Prometheus and a real VictoriaMetrics backfilled with the same
//! recording.

use std::path::{Path, PathBuf};

use culprit::cli::{DiagnoseArgs, diagnose_command};
use culprit::collect::collector::{CollectInput, collect};
use culprit::collect::prometheus::{PromSource, Prometheus};
use culprit::config::{Config, Millis, PrometheusConfig};
use culprit::diagnose::diagnose;
use culprit::model::graph::JobGraph;
use culprit::model::request::DiagnosisRequest;
use culprit::model::verdict::{Confidence, Finding, Status, Verdict};
use culprit::render::Format;

use crate::support;

fn report(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/reports3").join(name)
}

fn args(plan: &Path, recording: &Path) -> DiagnoseArgs {
    DiagnoseArgs {
        recording: Some(recording.to_path_buf()),
        metrics: Vec::new(),
        scrape: Vec::new(),
        flamegraph: None,
        flink: None,
        cluster: None,
        plan: Some(plan.to_path_buf()),
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

/// `culprit diagnose --recording <recording> --plan <plan>`.
fn offline(plan: &Path, recording: &Path) -> Verdict {
    diagnose_command(&args(plan, recording), 0).unwrap_or_else(|e| panic!("{}", e.message))
}

fn at_of(v: &Verdict) -> i64 {
    v.at.parse::<jiff::Timestamp>().unwrap().as_millisecond()
}

/// The live verdict from the PromQL store at `url` for the job and time of `expected`.
async fn live(url: &str, plan: &Path, expected: &Verdict) -> Verdict {
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
    let request =
        DiagnosisRequest { job: Some(expected.job.id.clone()), at_ms: Some(at_of(expected)), ..Default::default() };
    let source = PromSource::new(&prom, request.at_ms.unwrap());
    let graph = JobGraph::from_plan_json(&std::fs::read_to_string(plan).unwrap()).unwrap();
    let input = CollectInput {
        request: &request,
        graph: Some(graph),
        checkpoint_config: None,
        exceptions: None,
        rescales: None,
        config: &config,
        catalog: &config.metrics,
    };
    let snapshot = collect(&source, input).await.unwrap_or_else(|e| panic!("{e}"));
    culprit::render::words::verdict(&diagnose(&snapshot, &config.diagnosis))
}

/// Every sentence of a verdict a user reads: summary, cause, fix, not the fix, steps.
fn said(v: &Verdict) -> String {
    let steps: Vec<String> = v.steps.iter().map(|s| s.detail.clone()).collect();
    [vec![v.summary.clone(), v.cause.clone()], v.fix.clone(), v.not_the_fix.clone(), steps].concat().join("\n")
}

/// Report 07's expectation (its README): the watermark never arrived, on the window vertex,
/// with the idleness fixes; RocksDB tuning is not advised.
fn assert_report_07(v: &Verdict) {
    assert_eq!((v.status, v.finding), (Status::CulpritFound, Finding::WatermarkStall), "{}", v.summary);
    assert_eq!(v.culprit.as_ref().map(|c| c.vertex_name.as_str()), Some("TumblingEventTimeWindows"));
    let fix = v.fix.join("\n");
    assert!(fix.contains("WatermarkStrategy.withIdleness"), "{fix}");
    assert!(fix.contains("table.exec.source.idle-timeout"), "{fix}");
    assert!(fix.contains("at most as many subtasks as the topic has partitions"), "{fix}");
    for rocks in ["state.backend.rocksdb", "write-buffer", "writebuffer", "localdir", "managed.fraction"] {
        assert!(!fix.contains(rocks), "RocksDB advice {rocks:?} in the fix: {fix}");
    }
    assert!(v.summary.contains("no watermark ever reached it"), "{}", v.summary);
    assert!(v.cause.contains("The watermark never arrived"), "{}", v.cause);
    // Step `sources` names the reader without a split: source subtask 3 reads 0 records/s
    // while the other three read 800 (0 ≤ 1 % of the median 800), no split count reported.
    assert!(v.cause.contains("1 of the 4 readers of Source: impressions (subtask 3) reads no records"), "{}", v.cause);
    let sources = v.steps.iter().find(|s| s.step == culprit::model::verdict::StepName::Sources).expect("step sources");
    assert_eq!(sources.outcome, culprit::model::verdict::Outcome::Clear, "{}", sources.detail);
    // The RocksDB stalls are named, as a symptom, under "not the fix".
    assert!(
        v.not_the_fix.iter().any(|n| n.contains("Tuning RocksDB") && n.contains("symptom")),
        "{:#?}",
        v.not_the_fix
    );
    // Never the sentinel as a number: no event time 292 million years ago.
    let all = said(v);
    assert!(!all.contains("9.22") && !all.contains("9223372"), "{all}");
    assert!(v.evidence.iter().all(|e| e.value.abs() < 1e15), "{:#?}", v.evidence);
    // The window holds 300 s of "no watermark" (the recording's 15 min, from the window's start).
    let e = v.evidence.iter().find(|e| e.metric == "time at Long.MIN_VALUE (currentInputWatermark)").expect("evidence");
    assert_eq!((e.value, e.threshold), (300.0, Some(120.0)));
    assert_eq!(v.confidence, Confidence::High);
}

#[test]
fn report_07_a_watermark_stuck_at_long_min_is_a_watermark_that_never_arrived_not_rocksdb() {
    let dir = report("07-watermark-never-arrived-min-long");
    assert_report_07(&offline(&dir.join("plan.json"), &dir.join("recording.om.gz")));
}

#[tokio::test(flavor = "multi_thread")]
async fn report_07_live_from_prometheus_gives_the_same_watermark_stall() {
    let dir = report("07-watermark-never-arrived-min-long");
    let expected = offline(&dir.join("plan.json"), &dir.join("recording.om.gz"));
    let server = support::prometheus_with(&dir.join("recording.om.gz"));
    let v = live(&server.url, &dir.join("plan.json"), &expected).await;
    assert_report_07(&v);
    assert_eq!(v.fix, expected.fix);
}

#[tokio::test(flavor = "multi_thread")]
async fn report_07_live_from_victoria_metrics_which_keeps_decimals_gives_the_same_watermark_stall() {
    // VictoriaMetrics stores a value as a decimal mantissa and exponent: Long.MIN_VALUE may
    // come back rounded, and must still read as "no watermark".
    let dir = report("07-watermark-never-arrived-min-long");
    let expected = offline(&dir.join("plan.json"), &dir.join("recording.om.gz"));
    let server = support::victoria_metrics_with(&dir.join("recording.om.gz"));
    let v = live(&server.url, &dir.join("plan.json"), &expected).await;
    assert_report_07(&v);
}

// ---------------------------------------------------------------------------------------
// A vertex whose series the store dropped.
// ---------------------------------------------------------------------------------------

/// The recording of capture `name` with every series of vertex `task_id` removed, as a
/// store that refused them (a label value over its limit, a series limit) holds it.
fn without_vertex(name: &str, task_id: &str, out: &Path) {
    without_vertices(name, &[task_id], out);
}

/// The recording of capture `name` with every series of each of `task_ids` removed.
fn without_vertices(name: &str, task_ids: &[&str], out: &Path) {
    let plain = out.with_extension("plain");
    support::gunzip(&support::capture(name).join("recording.om.gz"), &plain);
    let text = std::fs::read_to_string(&plain).unwrap();
    let mut kept: Vec<&str> = text.lines().collect();
    for task_id in task_ids {
        let needle = format!("task_id=\"{task_id}\"");
        let before = kept.len();
        kept.retain(|l| !l.contains(&needle));
        assert!(kept.len() < before, "{name} has series of {task_id}");
    }
    std::fs::write(out, kept.join("\n") + "\n").unwrap();
}

/// The expectation: the vertex without series is named as the likely culprit, at low
/// confidence, its metrics said missing with the likely reason and the fix.
fn assert_dropped(v: &Verdict, vertex: &str) {
    assert_eq!(v.status, Status::CulpritFound, "{}", v.summary);
    assert_eq!(v.culprit.as_ref().map(|c| c.vertex_name.as_str()), Some(vertex), "{}", v.summary);
    assert_eq!(v.confidence, Confidence::Low);
    assert!(v.summary.contains("the store has none of its metrics"), "{}", v.summary);
    assert!(v.cause.contains(&format!("The metrics of {vertex} are missing")), "{}", v.cause);
    assert!(v.cause.contains("2048 characters"), "{}", v.cause);
    let fix = v.fix.join("\n");
    assert!(fix.contains("table.exec.simplify-operator-name-enabled"), "{fix}");
    assert!(fix.contains("metrics.scope.operator") && fix.contains("max_label_value_length"), "{fix}");
    assert!(!said(v).contains("do not show where the backpressure stops"), "{}", said(v));
    assert!(!fix.contains("Profile"), "{fix}");
}

#[test]
fn a_real_capture_whose_culprit_lost_every_series_names_it_as_the_likely_culprit_at_low_confidence() {
    // hot-key (Flink 2.3): Source → parse → fraud-score → sink; fraud-score's series gone,
    // parse backpressured 63 %, the sink idle.
    let dir = tempfile::tempdir().unwrap();
    let recording = dir.path().join("recording.om");
    without_vertex("hot-key", "b6178eccb258469b79a723c7c5e49988", &recording);
    let v = offline(&support::capture("hot-key").join("plan.json"), &recording);
    assert_dropped(&v, "fraud-score");
    // slow-middle: enrich-slow between parse (backpressured) and fraud-score (idle).
    let recording = dir.path().join("slow-middle.om");
    without_vertex("slow-middle", "1bf8d58c28152204a13a150d4ee1fd98", &recording);
    assert_dropped(&offline(&support::capture("slow-middle").join("plan.json"), &recording), "enrich-slow");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_vertex_whose_series_a_real_prometheus_lacks_is_named_the_same_live() {
    let dir = tempfile::tempdir().unwrap();
    let recording = dir.path().join("recording.om");
    without_vertex("hot-key", "b6178eccb258469b79a723c7c5e49988", &recording);
    let plan = support::capture("hot-key").join("plan.json");
    let expected = offline(&plan, &recording);
    let server = support::prometheus_with(&recording);
    let v = live(&server.url, &plan, &expected).await;
    assert_dropped(&v, "fraud-score");
    assert_eq!((v.fix.clone(), v.summary.clone()), (expected.fix.clone(), expected.summary.clone()));
}

#[test]
fn a_real_capture_whose_sink_lost_every_series_names_the_sink_as_the_likely_culprit() {
    // slow-sink: Source → parse → fraud-score → slow-sink: Writer; the sink's series gone.
    // fraud-score is backpressured 100 % and the sink is its only downstream vertex: the
    // backpressure stops somewhere after fraud-score, and only the sink is there.
    let dir = tempfile::tempdir().unwrap();
    let recording = dir.path().join("recording.om");
    without_vertex("slow-sink", "2e588ce1c86a9d46e2e85186773ce4fd", &recording);
    let v = offline(&support::capture("slow-sink").join("plan.json"), &recording);
    assert_dropped(&v, "slow-sink: Writer");
    assert_eq!(v.finding, Finding::Unexplained);
}

#[test]
fn a_real_capture_whose_last_two_vertices_lost_every_series_names_neither() {
    // slow-sink without fraud-score and the sink: parse is backpressured (86 %), and the
    // two vertices after it have no series; either could be where the backpressure stops.
    let dir = tempfile::tempdir().unwrap();
    let recording = dir.path().join("recording.om");
    let ids = ["b6178eccb258469b79a723c7c5e49988", "2e588ce1c86a9d46e2e85186773ce4fd"];
    without_vertices("slow-sink", &ids, &recording);
    let v = offline(&support::capture("slow-sink").join("plan.json"), &recording);
    assert_eq!(v.status, Status::Inconclusive, "{}", v.summary);
    assert!(v.culprit.is_none(), "{:?}", v.culprit);
    assert!(said(&v).contains("fraud-score"), "{}", said(&v));
}

#[test]
fn a_real_capture_whose_backpressured_vertex_lost_every_series_still_names_the_busy_vertex_after_it() {
    // slow-middle: Source → parse → enrich-slow → fraud-score → sink; parse's series gone.
    // The source is backpressured 94 % and enrich-slow, after parse, is busy 100 %: the
    // backpressure passes through parse unseen and stops at enrich-slow, the culprit of the
    // full capture.
    let dir = tempfile::tempdir().unwrap();
    let plan = support::capture("slow-middle").join("plan.json");
    let full = dir.path().join("full.om");
    support::gunzip(&support::capture("slow-middle").join("recording.om.gz"), &full);
    let whole = offline(&plan, &full);
    let recording = dir.path().join("recording.om");
    without_vertex("slow-middle", "a0bcbe636c3291fd3f45c25deb2b0823", &recording);
    let v = offline(&plan, &recording);
    assert_eq!(v.status, Status::CulpritFound, "{}", v.summary);
    assert_eq!(v.culprit.as_ref().map(|c| c.vertex_name.as_str()), Some("enrich-slow"), "{}", v.summary);
    assert_eq!(
        (v.finding, v.culprit.as_ref().map(|c| &c.vertex_name)),
        (whole.finding, whole.culprit.as_ref().map(|c| &c.vertex_name))
    );
    assert!(!v.summary.contains("No backpressure yet"), "{}", v.summary);
    assert!(v.cause.contains("The metrics of parse are missing"), "{}", v.cause);
}
