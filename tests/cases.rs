//! The incident shapes of `tests/data/cases/` (async I/O chained with the source, a lookup
//! join in its own vertex, a legacy source with NaN busy time, a job near capacity
//! everywhere, a sink flushing on checkpoints, and three controls): each gives the verdict
//! its `EXPECTED.json` names, scored as the case scorer does, with the numbers the shape
//! must show.

use std::path::{Path, PathBuf};

use culprit::cli::{DiagnoseArgs, diagnose_command};
use culprit::model::verdict::{Pattern, Verdict};
use culprit::render::Format;
use serde_json::Value;

fn case(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/cases").join(name)
}

fn cases() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/cases");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("EXPECTED.json").exists())
        .collect();
    dirs.sort();
    assert_eq!(dirs.len(), 7, "the seven cases");
    dirs
}

fn expected(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("EXPECTED.json")).unwrap()).unwrap()
}

fn args(dir: &Path, at: Option<&str>) -> DiagnoseArgs {
    let e = expected(dir);
    DiagnoseArgs {
        recording: Some(dir.join("recording.om.gz")),
        metrics: Vec::new(),
        scrape: Vec::new(),
        flamegraph: None,
        flink: None,
        cluster: None,
        plan: Some(dir.join("plan.json")),
        job: e["job_name"].as_str().map(str::to_string),
        label: Vec::new(),
        at: Some(at.map(str::to_string).unwrap_or_else(|| e["at"].as_str().unwrap().to_string())),
        window: None,
        config: None,
        checkpoint_config: None,
        exceptions: None,
        rescales: None,
        format: Format::Json,
    }
}

fn diagnose(dir: &Path, at: Option<&str>) -> Verdict {
    diagnose_command(&args(dir, at), 0).unwrap_or_else(|e| panic!("{}: {}", dir.display(), e.message))
}

/// The reporter's sanitizing, lower-cased, as the case scorer compares names.
fn norm(s: &str) -> String {
    s.trim()
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == ':' || c == '_' { c } else { '_' })
        .collect()
}

/// The case scorer's rules: status, finding, culprit (id, or sanitized name), hazards.
fn score(dir: &Path, v: &Verdict) -> Vec<String> {
    let e = expected(dir);
    let json = serde_json::to_value(v).unwrap();
    let mut diffs = Vec::new();
    if json["status"] != e["status"] {
        diffs.push(format!("status {} ≠ {}", json["status"], e["status"]));
    }
    if json["finding"] != e["finding"] {
        diffs.push(format!("finding {} ≠ {}", json["finding"], e["finding"]));
    }
    match (&v.culprit, e["culprit_vertex_id"].as_str(), e["culprit_vertex_name"].as_str()) {
        (None, None, None) => {}
        (Some(c), id, name)
            if Some(c.vertex_id.as_str()) == id || name.is_some_and(|n| norm(n) == norm(&c.vertex_name)) => {}
        (c, _, name) => diffs.push(format!("culprit {:?} ≠ {name:?}", c.as_ref().map(|c| &c.vertex_name))),
    }
    for h in e["hazards"].as_array().unwrap() {
        if !v.hazards.iter().any(|x| serde_json::to_value(x.kind).unwrap() == *h) {
            diffs.push(format!("hazard {h} missing"));
        }
    }
    diffs
}

#[test]
fn every_case_gives_the_verdict_its_expected_json_names() {
    let mut failed = Vec::new();
    for dir in cases() {
        let v = diagnose(&dir, None);
        let diffs = score(&dir, &v);
        if !diffs.is_empty() {
            failed.push(format!(
                "{}: {} (summary: {})",
                dir.file_name().unwrap().to_string_lossy(),
                diffs.join("; "),
                v.summary
            ));
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}

#[test]
fn an_async_lookup_chained_with_the_source_is_async_io_with_littles_law_in_numbers() {
    let v = diagnose(&case("async-lookup-in-source-chain"), None);
    assert_eq!((v.status.as_str(), v.finding.as_str()), ("culprit_found", "async_io"));
    // The async wait operator completes ~914 requests/s over 6 subtasks (operator scope:
    // the task counters of a vertex that is source and sink at once say 0).
    assert!(v.cause.contains("Little's law"), "{}", v.cause);
    assert!(v.cause.contains("over 6 subtasks"), "{}", v.cause);
    let rate = v.evidence.iter().find(|e| e.metric == "async requests completed").expect("the async rate");
    assert!((880.0..950.0).contains(&rate.value), "{}", rate.value);
    assert!(v.not_the_fix.iter().any(|n| n.contains("More source parallelism")), "{:?}", v.not_the_fix);
}

#[test]
fn a_lookup_join_with_its_capacity_in_the_plan_gives_the_services_latency() {
    // 8 subtasks × 120 slots at ~2,224 lookups/s: 8 × 120 / 2224 ≈ 0.432 s = 432 ms per lookup.
    let v = diagnose(&case("async-lookup-own-vertex"), None);
    assert_eq!(v.finding.as_str(), "async_io");
    assert!(v.cause.contains("8 subtasks × 120 in-flight slots"), "{}", v.cause);
    assert!(v.cause.contains("= 432 ms"), "{}", v.cause);
    assert!(v.fix.iter().any(|f| f.contains("from 120 to 240")), "{:?}", v.fix);
}

#[test]
fn a_legacy_source_with_unknown_busy_time_and_a_growing_lag_is_the_culprit_with_lowered_confidence() {
    let v = diagnose(&case("legacy-source-nan-busy"), None);
    assert_eq!((v.status.as_str(), v.finding.as_str()), ("culprit_found", "source"));
    assert_ne!(v.confidence.as_str(), "high");
    // Unknown, never 0.
    let src = v.graph.vertices.iter().find(|x| x.name.starts_with("Source")).unwrap();
    assert_eq!(src.busy_max, None);
    assert!(v.cause.contains("unknown"), "{}", v.cause);
    // The control: the same kind of job keeping up, its lag only saw-toothing.
    let control = diagnose(&case("control-legacy-source-keeping-up"), None);
    assert_eq!((control.status.as_str(), control.finding.as_str()), ("no_backpressure", "none"));
}

#[test]
fn a_job_near_capacity_everywhere_has_no_single_culprit_and_each_vertex_gets_its_parallelism() {
    let v = diagnose(&case("job-wide-near-capacity"), None);
    assert_eq!((v.status.as_str(), v.finding.as_str()), ("no_single_culprit", "headroom"));
    assert!(v.culprit.is_none());
    // Three stages near capacity, each with its number and the terms behind it:
    // ceil(p × (offered / 0.7 + catch-up) / capacity). Offered 64,000 records/s at each stage
    // (the lag grows with the sources' emit rate); a backlog of 2,560,000 records to drain
    // within 30 min adds 2,560,000 / 1800 = 1,420 records/s: 64,000 / 0.7 + 1,420 = 92,849.
    //   segmenter: ceil(12 × 92,849 / 73,000) = ceil(15.26) = 16;
    //   matcher:   ceil(12 × 92,849 / 66,800) = ceil(16.68) = 17; keyed over 128 key groups,
    //              floor(128 / 17) = 7, ceil(128 / p) ≤ 7 → p ≥ 18.3 → 19; only keeping up:
    //              ceil(12 × 64,000 / (66,800 × 0.7)) = ceil(16.42) = 17;
    //   writer:    ceil(8 × 92,849 / 74,000) = ceil(10.04) = 11; only keeping up:
    //              ceil(8 × 64,000 / (74,000 × 0.7)) = ceil(9.88) = 10.
    // (EXPECTED.json's 16, 17 and 10 are p × offered / (capacity × 0.7), before the catch-up
    // and the key-group alignment.)
    assert_eq!(
        v.fix,
        [
            "trip-segmenter -> Map: parallelism 12 to 16: ceil(12 × (offered 64000 records/s / 0.7 + 1420 records/s to drain the backlog within 30 min) / capacity 73000 records/s); at 16 the backlog of 2560000 records drains in about 77 s.",
            "geofence-matcher -> Map: parallelism 12 to 19: ceil(12 × (offered 64000 records/s / 0.7 + 1420 records/s to drain the backlog within 30 min) / capacity 66800 records/s) = 17, raised to 19 so the busiest subtask's share of the 128 key groups (Flink's default max parallelism at this parallelism; pipeline.max-parallelism if the job sets it; it cannot change without losing keyed state) gives the capacity needed; 17 would only keep the lag from growing; at 19 the backlog of 2560000 records drains in about 68 s.",
            "trip-events: Writer: parallelism 8 to 11: ceil(8 × (offered 64000 records/s / 0.7 + 1420 records/s to drain the backlog within 30 min) / capacity 74000 records/s); 10 would only keep the lag from growing; at 11 the backlog of 2560000 records drains in about 68 s.",
        ]
    );
    // The parallelism advised follows from the terms stated: recomputed from the sentence's
    // own (rounded) numbers, each gives the plain number before alignment.
    for (fix, plain) in v.fix.iter().zip([16.0, 17.0, 11.0]) {
        let term = |before: &str| -> f64 {
            let rest = &fix[fix.find(before).unwrap_or_else(|| panic!("{before}: {fix}")) + before.len()..];
            rest.split([' ', ')', ':']).next().unwrap().parse().unwrap()
        };
        let (from, offered, catch_up, capacity) =
            (term("ceil("), term("offered "), term("/ 0.7 + "), term("capacity "));
        assert_eq!((from * (offered / 0.7 + catch_up) / capacity).ceil(), plain, "{fix}");
    }
}

#[test]
fn a_sink_flushing_on_checkpoints_is_the_culprit_wherever_at_falls_within_two_periods() {
    // Checkpoints every ~120 s; sweep `at` back over two periods in 15 s scrape steps.
    let dir = case("buffering-sink-sawtooth");
    let end = jiff::Timestamp::from_second(1_796_814_300).unwrap();
    let mut seen = Vec::new();
    for k in 0..=16 {
        let at = end.checked_sub(jiff::SignedDuration::from_secs(15 * k)).unwrap().to_string();
        let v = diagnose(&dir, Some(&at));
        seen.push((
            at.clone(),
            v.status.as_str(),
            v.finding.as_str(),
            v.culprit.as_ref().map(|c| c.vertex_name.clone()),
        ));
        let tl = v.timeline.as_ref().expect("a timeline");
        assert_eq!(tl.pattern, Pattern::Periodic, "{at}: {tl:?}");
        assert!(tl.with_checkpoints, "{at}");
        assert!(v.window_seconds >= 240, "{at}: window {} s keeps two periods", v.window_seconds);
    }
    let findings: std::collections::BTreeSet<_> = seen.iter().map(|s| (s.1, s.2, s.3.clone())).collect();
    assert_eq!(
        findings.into_iter().collect::<Vec<_>>(),
        [("culprit_found", "sink", Some("Sink: hbase-account-profile".to_string()))],
        "{seen:#?}"
    );
}

#[test]
fn the_sawtooth_verdict_says_why_the_sink_and_what_unaligned_checkpoints_cannot_do() {
    let v = diagnose(&case("buffering-sink-sawtooth"), None);
    assert!(v.cause.contains("in phase with the checkpoints"), "{}", v.cause);
    assert!(v.fix.iter().any(|f| f.contains("flush by size and time")), "{:?}", v.fix);
    assert!(v.not_the_fix.iter().any(|n| n.starts_with("Unaligned checkpoints")), "{:?}", v.not_the_fix);
    let tl = v.timeline.unwrap();
    let sink = tl.vertices.iter().find(|x| x.name == "Sink: hbase-account-profile").unwrap();
    assert!(sink.bottleneck_share >= 0.3, "{sink:?}");
    assert_eq!(sink.backpressured_share, 0.0);
}
