//! Field reports about recordings, stores and lag sources (`tests/data/reports/`), each
//! with the result a user expects (see each report's README in the project's shared
//! reports; the inputs needed are copied here).

mod support;

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

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

/// Report 06: VictoriaMetrics with its default flags answers only up to now − 30 s
/// (`-search.latencyOffset`). A live diagnosis "now" of a job scraped every 5 s whose last
/// scrape was 1 s ago must not say the job stopped reporting: staleness is judged against
/// the store's own newest data. The same job in a VictoriaMetrics with a 1 s latency
/// offset gives the same verdict (finding, culprit, no such note).
#[test]
fn report_06_a_default_victoria_metrics_hiding_30_s_does_not_make_a_running_job_stopped() {
    let capture = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/captures/slow-sink");
    let end = now_ms() - 1_000;
    let text = support::shifted(&capture.join("recording.om.gz"), end);
    let default_flags = support::victoria_metrics_holding(&text, &[]);
    let one_second = support::victoria_metrics_holding(&text, &["-search.latencyOffset=1s"]);
    let dir = tempfile::tempdir().unwrap();
    let verdict = |url: &str| {
        let config = dir.path().join(format!("{}.toml", url.rsplit(':').next().unwrap()));
        std::fs::write(
            &config,
            format!(
                "[prometheus]\nurl = \"{url}\"\n\n[flink.plans]\n\"bp-lab-slow-sink\" = \"{}\"\n",
                s(&capture.join("plan.json"))
            ),
        )
        .unwrap();
        let v = json(&culprit(
            &["diagnose", "--config", s(&config), "--job", "bp-lab-slow-sink", "--format", "json"],
            None,
        ));
        let at = v["at"].as_str().unwrap().parse::<jiff::Timestamp>().unwrap().as_millisecond();
        (v, at)
    };
    let (hidden, hidden_at) = verdict(&default_flags.url);
    let (shown, shown_at) = verdict(&one_second.url);
    for v in [&hidden, &shown] {
        let notes = v["notes"].to_string();
        assert!(!notes.contains("stopped reporting") && !notes.contains("no newer samples"), "{notes}");
        assert_eq!(v["finding"], "sink", "{}", v["summary"]);
        assert_eq!(v["culprit"]["vertex_id"], "2e588ce1c86a9d46e2e85186773ce4fd");
    }
    assert_eq!(hidden["status"], shown["status"]);
    // The default store's newest visible sample is at least 30 s old, the other's about the
    // last scrape: each window ends at its store's newest data.
    assert!(end - hidden_at >= 25_000, "{}", end - hidden_at);
    assert!(end - shown_at < 10_000, "{}", end - shown_at);
}

/// Report 06 through `culprit record`: recorded from a default VictoriaMetrics, the bundle
/// replays to the live verdict: the same time (the store's newest data, carried by the
/// `culprit_store_newest` marker), the same finding, and no claim that the job stopped.
#[test]
fn report_06_a_recording_from_a_default_victoria_metrics_replays_to_the_live_verdict() {
    let capture = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/captures/slow-sink");
    let text = support::shifted(&capture.join("recording.om.gz"), now_ms() - 1_000);
    let vm = support::victoria_metrics_holding(&text, &[]);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("vm.toml");
    std::fs::write(
        &config,
        format!(
            "[prometheus]\nurl = \"{}\"\n\n[flink.plans]\n\"bp-lab-slow-sink\" = \"{}\"\n",
            vm.url,
            s(&capture.join("plan.json"))
        ),
    )
    .unwrap();
    let bundle = dir.path().join("bundle.om.gz");
    let plan = dir.path().join("plan.json");
    let recorded = culprit(
        &["record", "--config", s(&config), "--job", "bp-lab-slow-sink", "--out", s(&bundle), "--plan-out", s(&plan)],
        None,
    );
    let summary = String::from_utf8_lossy(&recorded.stdout);
    assert_eq!(recorded.status.code(), Some(0), "{summary} {}", String::from_utf8_lossy(&recorded.stderr));
    let text = String::from_utf8(gunzip(&bundle)).unwrap();
    assert!(text.contains("culprit_store_newest{"), "the bundle carries the store's newest data");

    let replay = json(&culprit(&["diagnose", "--recording", s(&bundle), "--plan", s(&plan), "--format", "json"], None));
    let notes = replay["notes"].to_string();
    assert!(!notes.contains("no newer samples"), "{notes}");
    assert_eq!(replay["finding"], "sink", "{}", replay["summary"]);
    // `record` prints the live verdict's time; the replay ends its window there too.
    assert!(summary.contains(&format!("samples up to {}", replay["at"].as_str().unwrap())), "{summary}\n{replay:#}");
}
