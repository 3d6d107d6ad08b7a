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
