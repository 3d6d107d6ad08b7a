//! Field reports about recordings, stores and lag sources (`tests/data/reports/`), each
//! with the result a user expects (see each report's README in the project's shared
//! reports; the inputs needed are copied here).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn culprit(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_culprit"))
        .args(args)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    if let Some(bytes) = stdin {
        child.stdin.take().unwrap().write_all(bytes).unwrap();
    }
    child.wait_with_output().unwrap()
}

fn report(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/reports").join(name)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn gunzip(path: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap()), &mut out)
        .unwrap();
    out
}

fn json(out: &Output) -> serde_json::Value {
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Report 05: a recording made with `promtool tsdb dump` (Prometheus < 2.49, Debian 12's
/// 2.42): `{__name__="…", …} value ts_ms` lines, no `# TYPE`, no `# EOF`. It is the
/// slow-sink capture loaded with promtool and dumped back, so it must give that capture's
/// verdict, byte for byte, from a file and from standard input.
#[test]
fn report_05_a_promtool_tsdb_dump_gives_the_verdict_of_the_recording_it_was_made_from() {
    let dir = report("05-promtool-tsdb-dump");
    let plan = dir.join("plan.json");
    let dump = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(dump.path(), gunzip(&dir.join("dump.txt.gz"))).unwrap();
    let recording = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/captures/slow-sink/recording.om.gz");

    let from_dump =
        json(&culprit(&["diagnose", "--recording", s(dump.path()), "--plan", s(&plan), "--format", "json"], None));
    let from_recording =
        json(&culprit(&["diagnose", "--recording", s(&recording), "--plan", s(&plan), "--format", "json"], None));
    assert_eq!(from_dump["finding"], "sink");
    assert_eq!(from_dump["culprit"]["vertex_id"], "2e588ce1c86a9d46e2e85186773ce4fd");
    assert_eq!(from_dump, from_recording);

    let from_stdin = json(&culprit(
        &["diagnose", "--recording", "-", "--plan", s(&plan), "--format", "json"],
        Some(&gunzip(&dir.join("dump.txt.gz"))),
    ));
    assert_eq!(from_stdin, from_recording);
}

/// Report 05, the other half: a JSON file given where metrics belong names itself and the
/// option that takes it, in one sentence, exit 2.
#[test]
fn report_05_a_plan_given_as_the_recording_says_it_is_json_and_points_to_plan() {
    let plan = report("05-promtool-tsdb-dump").join("plan.json");
    let out = culprit(&["diagnose", "--recording", s(&plan)], None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("plan.json:1: this is JSON"), "{stderr}");
    assert!(stderr.contains(&format!("did you mean --plan {}", s(&plan))), "{stderr}");
}

/// Report 09: a job reset to an older offset catches up (9000 records/s per partition
/// against 1500 produced), its committed offsets tens of millions of records above the log
/// start; kafka-lag-exporter's time estimate is ~9.6e7 s (3 years) and rising. Topic
/// retention 7 days. Expected: no data-loss hazard (the offsets decide), one note that the
/// time estimate disagrees with the offsets.
#[test]
fn report_09_an_astronomical_time_lag_with_the_consumer_far_inside_the_log_is_a_note_not_data_loss() {
    let dir = report("09-kafka-lag-exporter-seconds");
    let args = |format: &'static str| {
        [
            "diagnose".to_string(),
            "--recording".into(),
            s(&dir.join("recording.om.gz")).into(),
            "--plan".into(),
            s(&dir.join("plan.json")).into(),
            "--config".into(),
            s(&dir.join("culprit.toml")).into(),
            "--format".into(),
            format.into(),
        ]
    };
    let run = |format| {
        let args = args(format);
        culprit(&args.iter().map(String::as_str).collect::<Vec<_>>(), None)
    };
    let v = json(&run("json"));
    assert_eq!(v["hazards"], serde_json::json!([]), "{:#}", v["hazards"]);
    assert_eq!(v["status"], "no_backpressure");
    // Committed 20 000 000 + 9000/s and log start 5 000 000 + 200/s per partition over the
    // hour (15 s steps): at the end 52 400 000 − 5 720 000 = 46 680 000 records of room,
    // and the log start never catches up.
    let notes: Vec<&str> = v["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    let implausible: Vec<&&str> = notes.iter().filter(|n| n.contains("implausible")).collect();
    assert_eq!(implausible.len(), 1, "{notes:?}");
    assert!(
        implausible[0].starts_with(
            "kafka_lag_exporter reports a lag (in seconds) of up to 1112.8 d on payments (partitions 0, 1, 2), past the 7.0 d retention, while the committed offsets are still at least 46680000 records above the log start"
        ),
        "{}",
        implausible[0]
    );
    let text = String::from_utf8(run("text").stdout).unwrap();
    assert!(!text.contains("DATA LOSS") && !text.contains("losing data"), "{text}");
}
