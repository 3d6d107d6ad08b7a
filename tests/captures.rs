//! Every real Flink capture in `examples/captures/` gives the culprit and finding its
//! `EXPECTED.json` names — from the recording, the plan and Flink REST's exception history,
//! as a user runs `culprit diagnose --recording … --plan … --exceptions …`.

use std::path::{Path, PathBuf};

use culprit::cli::{DiagnoseArgs, diagnose_command};
use culprit::model::verdict::{Outcome, Verdict};
use culprit::render::Format;
use serde_json::Value;

fn captures() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/captures");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("examples/captures exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("EXPECTED.json").exists())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 11, "expected the 11 bundled captures, found {}", dirs.len());
    dirs
}

fn args(dir: &Path) -> DiagnoseArgs {
    DiagnoseArgs {
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
        checkpoint_config: None,
        // Every capture has Flink REST's exception history, as `culprit record` users have
        // it with Flink REST: `--exceptions rest/exceptions.json`.
        exceptions: Some(dir.join("rest/exceptions.json")).filter(|p| p.exists()),
        // A capture of a job on the Adaptive scheduler has Flink 2.3's rescale history:
        // `--rescales rest/rescales-history.json`.
        rescales: Some(dir.join("rest/rescales-history.json")).filter(|p| p.exists()),
        format: Format::Json,
    }
}

fn expected(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("EXPECTED.json")).unwrap()).unwrap()
}

fn assert_matches(dir: &Path, v: &Verdict, how: &str) {
    let e = expected(dir);
    let name = dir.file_name().unwrap().to_string_lossy();
    let json: Value = serde_json::to_value(v).unwrap();
    assert_eq!(json["status"], e["status"], "{name} ({how}): status; summary: {}", v.summary);
    assert_eq!(json["finding"], e["finding"], "{name} ({how}): finding; summary: {}", v.summary);
    assert_eq!(
        v.culprit.as_ref().map(|c| c.vertex_id.clone()),
        e["culprit_vertex_id"].as_str().map(str::to_string),
        "{name} ({how}): culprit vertex"
    );
    assert_eq!(
        v.culprit.as_ref().map(|c| c.vertex_name.clone()),
        e["culprit_vertex_name"].as_str().map(str::to_string),
        "{name} ({how}): culprit name"
    );
    assert_eq!(v.job.id, e["job_id"].as_str().unwrap(), "{name} ({how}): job id");
    assert_eq!(json["hazards"], e["hazards"], "{name} ({how}): hazards");
}

#[test]
fn every_capture_gives_its_expected_culprit_and_finding_from_recording_plan_and_exceptions() {
    for dir in captures() {
        let v = diagnose_command(&args(&dir), 0).unwrap_or_else(|e| panic!("{}: {}", dir.display(), e.message));
        assert_matches(&dir, &v, "recording + plan + exceptions");
    }
}

#[test]
fn a_failing_job_seen_only_by_its_restarts_is_failing_over_with_the_task_unknown() {
    // The failover capture without its exception history: numRestarts 0 → 5 in the run says
    // it fails over; which task throws is not in the metrics.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/captures/failover");
    let mut a = args(&dir);
    a.exceptions = None;
    let v = diagnose_command(&a, 0).unwrap();
    let json: Value = serde_json::to_value(&v).unwrap();
    assert_eq!((json["status"].as_str(), json["finding"].as_str()), (Some("inconclusive"), Some("failing_over")));
    assert!(v.culprit.is_none());
    assert!(v.summary.starts_with("bp-lab-failover is failing over: 5 restarts"), "{}", v.summary);
    assert!(v.missing.iter().any(|m| m.contains("/jobs/:id/exceptions")), "{:?}", v.missing);
}

#[test]
fn a_job_whose_watermark_readers_without_splits_hold_back_says_so_though_nothing_is_backpressured() {
    // idle-split: 4 readers over 2 splits, no idleness; readers 1 and 3 read nothing and
    // the watermark after them never arrives.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/captures/idle-split");
    let v = diagnose_command(&args(&dir), 0).unwrap();
    assert!(
        v.summary.ends_with(
            "But parse's input watermark never arrived: 2 of the 4 readers of Source: txn-source hold no split."
        ),
        "{}",
        v.summary
    );
    assert!(v.advice.iter().any(|a| a.contains("(subtasks 1, 3) read no records")), "{:?}", v.advice);
    assert!(v.advice.iter().any(|a| a.contains("WatermarkStrategy.withIdleness")), "{:?}", v.advice);
}

#[test]
fn state_that_rose_for_only_two_minutes_is_not_called_growth_and_the_verdict_says_why() {
    // state-growth: a new key per record, no TTL, 150 s: live data 0 → ~8 MB, shorter than
    // the 10 min `state_growth_min_span`.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/captures/state-growth");
    let v = diagnose_command(&args(&dir), 0).unwrap();
    let step = v.steps.iter().find(|s| s.step.as_str() == "state_growth").unwrap();
    assert!(step.detail.starts_with("The state of account-state rises ("), "{}", step.detail);
    assert!(step.detail.contains("but over 2 min only: growth is judged over at least 10 min"), "{}", step.detail);
    assert!(!v.summary.contains("only grows"), "{}", v.summary);
}

#[test]
fn state_that_only_grows_for_thirteen_minutes_ends_the_summary_with_a_ttl() {
    // state-growth-long: a new key per record, no TTL, 13 min: RocksDB live data 0 → 46.7 MB,
    // never falling (100 % of its movement upward ≥ 90 %, 158 samples over 785 s ≥ 10 min);
    // slope ≈ 60 kB/s ≈ 216 MB/h, so a TTL of size ÷ growth ≈ 0.2 h, at least 1 h.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/captures/state-growth-long");
    let v = diagnose_command(&args(&dir), 0).unwrap();
    assert!(v.summary.contains("But account-state's state only grows: "), "{}", v.summary);
    assert!(
        v.summary.ends_with("give it a TTL before its checkpoints and restores outgrow their time."),
        "{}",
        v.summary
    );
    assert!(v.advice.iter().any(|a| a.contains("1 h")), "{:?}", v.advice);
}

#[test]
fn a_taskmanager_throttled_by_its_cpu_quota_is_the_finding_with_its_slow_subtasks() {
    // cpu-quota (2.3): lab-tm-1 in a 0.2-CPU quota, throttled in 1944 of 2009 periods
    // (0.97 over the run, 0.998 at the end ≥ 0.25); fraud-score's subtasks 1 and 3 run on it
    // at 1000 ms/s busy, 0 and 2 elsewhere at ~135. The 1.20 run put 0 and 1 on it.
    for (name, on_node) in [("cpu-quota", "1, 3"), ("flink-1.20-cpu-quota", "0, 1")] {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/captures").join(name);
        let v = diagnose_command(&args(&dir), 0).unwrap();
        assert_eq!(v.finding.as_str(), "cpu_throttled", "{name}: {}", v.summary);
        let expected = format!("subtasks {on_node} on TaskManager lab_tm_1 are slow");
        assert!(v.summary.contains(&expected), "{name}: {}", v.summary);
        assert!(v.summary.ends_with("its TaskManager shows CFS periods throttled by the CPU limit."), "{}", v.summary);
        assert!(v.fix[0].contains("kubernetes.taskmanager.cpu.amount"), "{name}: {:?}", v.fix);
    }
}

#[test]
fn the_checkpoint_configuration_from_flink_rest_does_not_change_any_finding() {
    for dir in captures() {
        let mut a = args(&dir);
        a.checkpoint_config = Some(dir.join("rest/checkpoints-config.json"));
        let v = diagnose_command(&a, 0).unwrap_or_else(|e| panic!("{}: {}", dir.display(), e.message));
        assert_matches(&dir, &v, "with checkpoint config");
    }
}

#[test]
fn the_end_of_run_scrape_dumps_give_the_same_finding_as_the_recording() {
    // Plain reporter scrapes (no timestamps, `,}` label endings) at the end of each run,
    // stamped with the time they were taken (the recording's last sample), so that the
    // exception history's times fall where they did.
    use culprit::collect::collector::MetricSource;
    for dir in captures() {
        let mut a = args(&dir);
        a.recording = None;
        a.metrics = ["jm", "tm1", "tm2"].iter().map(|f| dir.join(format!("metrics/{f}.prom"))).collect();
        let mut recording = culprit::collect::store::SeriesStore::new();
        recording.read_path(&dir.join("recording.om.gz"), None).unwrap();
        recording.finish();
        let taken_ms = recording.latest_ms().expect("a recording has samples");
        let v = diagnose_command(&a, taken_ms).unwrap_or_else(|e| panic!("{}: {}", dir.display(), e.message));
        // A finding resting on the rate of another exporter's counters (cAdvisor's CFS
        // periods) cannot come from one scrape: the expectation says what one scrape shows.
        match expected(&dir).get("finding_from_one_scrape").and_then(|f| f.as_str()) {
            Some(finding) => assert_eq!(v.finding.as_str(), finding, "{} (scrape dumps): {}", dir.display(), v.summary),
            None => assert_matches(&dir, &v, "scrape dumps"),
        }
    }
}

#[test]
fn the_job_can_be_named_as_flink_shows_it_as_the_reporter_writes_it_or_by_id() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/captures/slow-sink");
    for job in ["bp-lab-slow-sink", "bp_lab_slow_sink", "da23ad9af4e7326542c9a70eac958f42"] {
        let mut a = args(&dir);
        a.job = Some(job.into());
        let v = diagnose_command(&a, 0).unwrap();
        assert_eq!(v.job.id, "da23ad9af4e7326542c9a70eac958f42", "{job}");
    }
}

#[test]
fn the_episode_window_keeps_a_healthy_prefix_from_diluting_the_verdict() {
    // checkpoint-slowdown is healthy for ~3 minutes, then enrich slows. The 5-minute window
    // before the last sample reaches into the healthy part; averaged whole, enrich would be
    // ~69% busy and not at capacity. The window starts at the episode instead.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/captures/checkpoint-slowdown");
    let v = diagnose_command(&args(&dir), 0).unwrap();
    assert!(v.window_seconds < 300, "window {} s", v.window_seconds);
    assert_eq!(v.finding.as_str(), "headroom");
    // The slowdown shows as evidence and advice, not as the finding.
    assert!(v.advice.iter().any(|a| a.contains("execution.checkpointing.unaligned.enabled")), "{:?}", v.advice);
    let step = v.steps.iter().find(|s| s.step.as_str() == "checkpoints").unwrap();
    assert_eq!(step.outcome.as_str(), "clear", "{}", step.detail);
}

#[test]
fn without_the_episode_window_the_healthy_prefix_dilutes_the_checkpoint_slowdown_verdict() {
    // The control for the test above: averaging the whole 5 minutes, enrich is ~69% busy
    // (60 s healthy at ~0%, 60 s ramping, 180 s at 100%), under the 0.9 headroom threshold.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/captures/checkpoint-slowdown");
    let cfg = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(cfg.path(), "[diagnosis]\nepisode_window = false\n").unwrap();
    let mut a = args(&dir);
    a.config = Some(cfg.path().to_path_buf());
    let v = diagnose_command(&a, 0).unwrap();
    assert_eq!(v.window_seconds, 300);
    assert_ne!(v.finding.as_str(), "headroom");
    let busy = v.graph.vertices.iter().find(|x| x.name == "enrich").unwrap().busy_max.unwrap();
    assert!((0.6..0.8).contains(&busy), "enrich busy over the whole window: {busy}");
}

/// The five scenarios captured on every Flink version the README calls proven.
const CORE: [&str; 5] = ["slow-sink", "hot-key", "rocksdb-stall", "chained-culprit", "healthy"];

#[test]
fn every_flink_version_the_readme_calls_proven_has_its_core_captures_from_that_version() {
    // 2.3.0 captures sit unprefixed (the first ones); the others are `flink-<major.minor>-<scenario>`
    // and say in scenario.txt which Flink the lab ran.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/captures");
    for scenario in CORE {
        assert!(root.join(scenario).join("EXPECTED.json").exists(), "2.3: {scenario}");
    }
    for version in ["1.16", "1.18", "1.20"] {
        for scenario in CORE {
            let dir = root.join(format!("flink-{version}-{scenario}"));
            assert!(dir.join("EXPECTED.json").exists(), "{}", dir.display());
            let ran = std::fs::read_to_string(dir.join("scenario.txt")).unwrap();
            assert!(ran.lines().any(|l| l.starts_with(&format!("flink {version}."))), "{}: {ran}", dir.display());
            assert!(ran.lines().any(|l| l == format!("scenario {scenario}")), "{}: {ran}", dir.display());
        }
    }
}

#[test]
fn a_flink_1_x_job_whose_checkpoints_complete_is_not_called_stalled_without_last_checkpoint_completed_timestamp() {
    // Flink 1.x (up to 1.20) exports no lastCheckpointCompletedTimestamp. The 1.18 healthy job
    // completed a checkpoint every 10 s (rest/checkpoints.json: 14 of 15); with the 10 s interval
    // from Flink REST, "no checkpoint for 3 × 10 s" must come from numberOfCompletedCheckpoints,
    // not from the job's start (which read 2+ minutes: a stall that never was).
    for name in ["flink-1.16-healthy", "flink-1.18-healthy", "flink-1.20-healthy", "flink-1.18-chained-culprit"] {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/captures").join(name);
        let text = {
            let mut s = String::new();
            std::io::Read::read_to_string(
                &mut flate2::read::MultiGzDecoder::new(std::fs::File::open(dir.join("recording.om.gz")).unwrap()),
                &mut s,
            )
            .unwrap();
            s
        };
        assert!(!text.contains("lastCheckpointCompletedTimestamp"), "{name}: the 1.x reporter has no such gauge");
        let mut a = args(&dir);
        a.checkpoint_config = Some(dir.join("rest/checkpoints-config.json"));
        let v = diagnose_command(&a, 0).unwrap();
        let step = v.steps.iter().find(|s| s.step.as_str() == "checkpoints").unwrap();
        // Clear, not merely "not hit" (no_data would also pass that): the recovery point
        // advances, judged from the counter's rises.
        assert_eq!(step.outcome, Outcome::Clear, "{name}: {}", step.detail);
        assert!(step.detail.contains("the recovery point advances"), "{name}: {}", step.detail);
        assert_ne!(v.finding.as_str(), "checkpoints", "{name}: {}", v.summary);
    }
}

#[test]
fn every_taskmanager_of_a_flink_1_x_capture_has_its_gc_time_though_all_time_is_not_reported() {
    // Flink 1.16 and 1.18 export only each collector's counter (G1_Young_Generation_Time,
    // G1_Old_Generation_Time); 1.20 and 2.x also export All_Time. Either way each TaskManager
    // running the job gets a GC time, and the PromQL shown is of the series it came from.
    use culprit::collect::block_on;
    use culprit::collect::collector::{CollectInput, collect};
    use culprit::collect::store::SeriesStore;
    use culprit::config::Config;
    use culprit::model::graph::JobGraph;
    use culprit::model::request::DiagnosisRequest;
    for (name, per_collector) in [
        ("flink-1.16-hot-key", true),
        ("flink-1.18-slow-sink", true),
        ("flink-1.20-hot-key", false),
        ("hot-key", false),
    ] {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/captures").join(name);
        let mut store = SeriesStore::new();
        store.read_path(&dir.join("recording.om.gz"), None).unwrap();
        store.finish();
        let config = Config::default();
        let plan = std::fs::read_to_string(dir.join("plan.json")).unwrap();
        let request = DiagnosisRequest::default();
        let snapshot = block_on(collect(
            &store,
            CollectInput {
                request: &request,
                graph: Some(JobGraph::from_plan_json(&plan).unwrap()),
                checkpoint_config: None,
                exceptions: None,
                rescales: None,
                config: &config,
                catalog: &config.metrics,
            },
        ))
        .unwrap();
        assert!(!snapshot.taskmanagers.is_empty(), "{name}");
        for tm in &snapshot.taskmanagers {
            let gc = tm.gc_ms_per_s.unwrap_or_else(|| panic!("{name}: {} has no GC time", tm.tm_id));
            assert!(gc.is_finite() && gc >= 0.0, "{name}: {} GC {gc} ms/s", tm.tm_id);
        }
        let shown = &snapshot.queries["gc_time"];
        assert_eq!(shown.contains("G1_Young_Generation_Time"), per_collector, "{name}: {shown}");
    }
}

#[test]
fn a_rescale_in_flinks_history_and_in_the_series_is_named_once_with_the_adaptive_schedulers_cause() {
    // adaptive-rescale: the sink's upper bound lowered to 2 at 13:23:16 (PUT
    // resource-requirements); the history's rescale ran 13:23:16.263 → 13:23:38.639, the
    // series see the sink's 4 subtasks become 2 at 13:23:45.905 (7.3 s after its end, inside
    // the 30 s tolerance and a step).
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/captures/adaptive-rescale");
    let v = diagnose_command(&args(&dir), 0).unwrap();
    let said = "slow-sink: Writer was rescaled from 4 to 2 subtasks at 2026-12-03T13:23:45.905Z by the Adaptive scheduler: resource requirements changed.";
    assert!(v.summary.contains(said), "{}", v.summary);
    assert_eq!(v.summary.matches("rescale").count(), 1, "named once: {}", v.summary);
    assert!(v.fix[0].starts_with("Weigh first: slow-sink: Writer was cut from 4 to 2 subtasks"), "{:?}", v.fix);
    assert!(v.fix[0].contains("the Adaptive scheduler made the cut: resource requirements changed"), "{}", v.fix[0]);
    assert!(v.fix[0].contains("Restore its upper bound (PUT /jobs/:jobid/resource-requirements)"), "{}", v.fix[0]);

    // Without the history the series alone name the cut, without a cause.
    let mut a = args(&dir);
    a.rescales = None;
    let v = diagnose_command(&a, 0).unwrap();
    assert!(v.summary.contains("slow-sink: Writer was rescaled from 4 to 2 subtasks at 2026-12-03T13:23:45.905Z."));
    assert!(!v.summary.contains("Adaptive") && !v.fix[0].contains("Adaptive"), "{}", v.summary);
}

#[test]
fn a_failed_rescale_attempt_in_the_history_is_named_as_one_that_did_not_take_effect() {
    // The capture's history with one more attempt that failed at 13:24:30 (inside the
    // window, which ends 13:25:00.905), as Flink writes it.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/captures/adaptive-rescale");
    let mut history: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("rest/rescales-history.json")).unwrap()).unwrap();
    history.as_array_mut().unwrap().insert(
        0,
        serde_json::json!({"rescaleUuid": "0123456789abcdef0123456789abcdef", "resourceRequirementsUuid": "6243887cfc765bd1dee6e0a63629b8cc",
            "rescaleAttemptId": 2, "vertices": {}, "slots": {}, "schedulerStates": [],
            "startTimestampInMillis": 1_796_304_260_000i64, "endTimestampInMillis": 1_796_304_270_000i64,
            "terminalState": "FAILED", "triggerCause": "NEW_RESOURCE_AVAILABLE", "terminatedReason": "EXCEPTION_OCCURRED"}),
    );
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("rescales.json");
    std::fs::write(&file, history.to_string()).unwrap();
    let mut a = args(&dir);
    a.rescales = Some(file);
    let v = diagnose_command(&a, 0).unwrap();
    let said = "A rescale of the job by the Adaptive scheduler failed at 2026-12-03T13:24:30Z (begun because new resources became available; it ended: an exception occurred): Flink's rescale history says it did not take effect.";
    assert!(v.summary.contains(said), "{}", v.summary);
    // The completed rescale is still the one the fix weighs first.
    assert!(v.fix[0].contains("the Adaptive scheduler made the cut"), "{}", v.fix[0]);
}

#[test]
fn flinks_404_answer_to_the_rescale_history_is_refused_as_a_file() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/captures/adaptive-rescale");
    let mut a = args(&dir);
    a.rescales =
        Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/rescales/history-default-scheduler-404.json"));
    let e = diagnose_command(&a, 0).unwrap_err();
    assert!(
        e.message.contains("not a Flink rescale history") && e.message.contains("RescalesUnavailableException"),
        "{}",
        e.message
    );
}
