//! The `culprit` binary as a user meets it: help, exit codes, one-sentence errors.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn culprit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_culprit")).args(args).output().expect("the binary runs")
}

fn capture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/captures").join(name)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Bad input: exit code 2 and exactly one line on stderr, no panic, no backtrace.
fn assert_one_sentence_error(out: &Output, must_contain: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line expected: {stderr}");
    assert!(!stderr.contains("panicked") && !stderr.contains("backtrace"), "{stderr}");
    for needle in must_contain {
        assert!(stderr.contains(needle), "`{needle}` missing from: {stderr}");
    }
    assert!(out.stdout.is_empty(), "nothing on stdout on error");
}

#[test]
fn diagnose_help_explains_every_flag_and_the_exit_codes() {
    let out = culprit(&["diagnose", "--help"]);
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    for flag in [
        "--recording",
        "--metrics",
        "--plan",
        "--job",
        "--at",
        "--window",
        "--config",
        "--checkpoint-config",
        "--format",
    ] {
        assert!(help.contains(flag), "{flag} missing from help");
    }
    assert!(help.contains("Exit codes") && help.contains("0  a verdict was produced") && help.contains("2  bad usage"));
    assert!(help.contains("3  a backend failed") && help.contains("refused the query"), "{help}");
}

/// Every command of the CLI with its path of subcommand names (`[]` is `culprit` itself).
fn every_command() -> Vec<(Vec<String>, clap::Command)> {
    fn walk(path: Vec<String>, cmd: &clap::Command, out: &mut Vec<(Vec<String>, clap::Command)>) {
        out.push((path.clone(), cmd.clone()));
        for sub in cmd.get_subcommands().filter(|c| c.get_name() != "help") {
            let mut p = path.clone();
            p.push(sub.get_name().to_string());
            walk(p, sub, out);
        }
    }
    let mut cmd = <culprit::cli::Cli as clap::CommandFactory>::command();
    cmd.build();
    let mut out = Vec::new();
    walk(Vec::new(), &cmd, &mut out);
    out
}

#[test]
fn every_commands_help_lists_each_of_its_flags_and_subcommands_with_their_text() {
    // Clap's own list of each command's arguments, not a hand-kept one: a flag added
    // without a help text, or one that --help does not show, fails here.
    let commands = every_command();
    let names: Vec<String> = commands.iter().map(|(p, _)| p.join(" ")).collect();
    for expected in ["", "diagnose", "record", "demo", "serve", "mcp", "check-config", "store"] {
        assert!(names.iter().any(|n| n == expected), "command `{expected}` not found in {names:?}");
    }
    let mut checked = 0;
    for (path, cmd) in &commands {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let out = culprit(&args);
        assert!(out.status.success(), "culprit {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
        let help = String::from_utf8(out.stdout).unwrap();
        let read = words(&help);
        let name = format!("culprit {}", path.join(" "));
        for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
            let shown = match (arg.get_long(), arg.get_short()) {
                (Some(long), _) => format!("--{long}"),
                (None, Some(short)) => format!("-{short}"),
                (None, None) => {
                    let value = arg
                        .get_value_names()
                        .and_then(|v| v.first())
                        .map_or(arg.get_id().to_string(), |v| v.to_string());
                    format!("<{value}>")
                }
            };
            assert!(help.contains(&shown), "{name} --help does not show {shown}:\n{help}");
            if let Some(short) = arg.get_short() {
                assert!(help.contains(&format!("-{short}")), "{name} --help does not show -{short}");
            }
            let text = arg.get_long_help().or(arg.get_help()).map(|h| words(&h.to_string())).unwrap_or_default();
            assert!(!text.is_empty(), "{name} {shown} has no help text");
            let start: String = text.chars().take(50).collect();
            assert!(read.contains(&start), "{name} --help does not explain {shown} (`{start}`):\n{help}");
            checked += 1;
        }
        for sub in cmd.get_subcommands().filter(|c| !c.is_hide_set()) {
            assert!(help.contains(sub.get_name()), "{name} --help does not list {}", sub.get_name());
        }
    }
    // diagnose alone has 13 flags; with help, version and --verbose on every command, far
    // more than the list the test below spells out.
    assert!(checked > 40, "{checked} arguments checked");
}

/// A port nothing listens on.
fn dead_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A configuration reading Prometheus at `prometheus`, giving up after 2 s.
fn short_deadline_config(dir: &Path, prometheus: &str) -> PathBuf {
    let path = dir.join("c.toml");
    std::fs::write(
        &path,
        format!("[prometheus]\nurl = \"{prometheus}\"\ntimeout = \"1s\"\ndeadline = \"2s\"\n[flink]\ntimeout = \"1s\"\ndeadline = \"2s\"\n"),
    )
    .unwrap();
    path
}

/// Exit code 3 (a backend is unreachable), the line saying retrying started, then the
/// error line.
fn assert_backend_unreachable(out: &Output, retrying: &str, error: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "stderr: {stderr}");
    let lines: Vec<&str> = stderr.trim_end().lines().collect();
    assert_eq!(lines.len(), 2, "the retry line, then the error: {stderr}");
    assert_eq!(lines[0], format!("culprit: {retrying}"));
    for needle in error {
        assert!(lines[1].contains(needle), "`{needle}` missing from: {}", lines[1]);
    }
    assert!(out.stdout.is_empty());
}

#[test]
fn a_prometheus_that_refuses_the_connection_says_so_when_retrying_starts_and_exits_3() {
    let tmp = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{}", dead_port());
    let config = short_deadline_config(tmp.path(), &url);
    let out = culprit(&["diagnose", "--config", s(&config), "--job", "fraud-detection"]);
    assert_backend_unreachable(
        &out,
        &format!("Prometheus at {url} refused the connection; retrying for 2 s (prometheus.deadline)"),
        &["could not look up the job", "Connection refused", "retried for the 2 s deadline"],
    );
    let out = culprit(&[
        "record",
        "--config",
        s(&config),
        "--job",
        "fraud-detection",
        "--out",
        s(&tmp.path().join("r.om.gz")),
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn an_unreachable_flink_rest_given_with_flink_says_so_when_retrying_starts_and_exits_3() {
    let tmp = tempfile::tempdir().unwrap();
    let prometheus = format!("http://127.0.0.1:{}", dead_port());
    let flink = format!("http://127.0.0.1:{}", dead_port());
    let config = short_deadline_config(tmp.path(), &prometheus);
    let out = culprit(&["diagnose", "--config", s(&config), "--job", "fraud-detection", "--flink", &flink]);
    assert_backend_unreachable(
        &out,
        &format!("Flink REST at {flink} refused the connection; retrying for 2 s (flink.deadline)"),
        &[&format!("--flink {flink}"), "could not be reached", "Connection refused"],
    );
}

#[test]
fn an_unreachable_scrape_endpoint_exits_3_in_one_sentence() {
    let url = format!("http://127.0.0.1:{}/metrics", dead_port());
    let out = culprit(&["diagnose", "--scrape", &url, "--job", "x"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains(&format!("--scrape {url}: cannot connect")) && stderr.contains("refused"), "{stderr}");
}

#[test]
fn a_missing_recording_is_one_sentence_naming_the_path() {
    let out = culprit(&[
        "diagnose",
        "--recording",
        "/nope/recording.om.gz",
        "--plan",
        s(&capture("slow-sink").join("plan.json")),
    ]);
    assert_one_sentence_error(&out, &["/nope/recording.om.gz", "cannot open"]);
}

#[test]
fn a_malformed_line_is_one_sentence_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.prom");
    std::fs::write(&path, "# TYPE m gauge\nm{a=\"1\"} 1\nm{a=\"2\" 2\n").unwrap();
    let out = culprit(&["diagnose", "--metrics", s(&path)]);
    assert_one_sentence_error(&out, &["bad.prom:3:"]);
}

#[test]
fn a_broken_plan_is_one_sentence_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.json");
    std::fs::write(&plan, "{\"plan\": {\"nodes\": [").unwrap();
    let out =
        culprit(&["diagnose", "--recording", s(&capture("slow-sink").join("recording.om.gz")), "--plan", s(&plan)]);
    assert_one_sentence_error(&out, &["plan.json", "not a Flink job plan"]);
}

#[test]
fn a_plan_of_another_job_is_refused_instead_of_mislabelling_the_vertices() {
    // The hot-key and slow-sink jobs share a topology, so their vertex ids match; the plan
    // still names another job (id and name), and its parallelism (2) is not the metrics' (4).
    let out = culprit(&[
        "diagnose",
        "--recording",
        s(&capture("hot-key").join("recording.om.gz")),
        "--plan",
        s(&capture("slow-sink").join("plan.json")),
    ]);
    assert_one_sentence_error(&out, &["slow-sink/plan.json", "bp-lab-slow-sink", "bp_lab_hot_key"]);
}

#[test]
fn a_plan_of_another_run_with_another_topology_is_refused() {
    // hard-backpressure ran under the name bp-lab-slow-sink too, with a fifth vertex
    // (explode): its plan would show a vertex that never ran here.
    let out = culprit(&[
        "diagnose",
        "--recording",
        s(&capture("slow-sink").join("recording.om.gz")),
        "--plan",
        s(&capture("hard-backpressure").join("plan.json")),
    ]);
    assert_one_sentence_error(&out, &["another run of bp-lab-slow-sink", "5 in the plan, 4 with metrics"]);
}

#[test]
fn a_bad_time_or_window_is_a_usage_error() {
    let rec = capture("slow-sink").join("recording.om.gz");
    assert_one_sentence_error(
        &culprit(&["diagnose", "--recording", s(&rec), "--at", "yesterday"]),
        &["--at", "RFC 3339"],
    );
    assert_one_sentence_error(&culprit(&["diagnose", "--recording", s(&rec), "--window", "soon"]), &["--window"]);
    assert_one_sentence_error(
        &culprit(&["diagnose", "--recording", s(&rec), "--window", "0.5ms"]),
        &["--window `0.5ms` is shorter than 1s, the shortest window"],
    );
    // Too large is not "too small", and a valid RFC 3339 time past jiff's range is not
    // "not RFC 3339": each says the limit it crosses.
    assert_one_sentence_error(
        &culprit(&["diagnose", "--recording", s(&rec), "--window", "1000000000d"]),
        &["--window `1000000000d` is longer than 36525d (100 years), the longest window"],
    );
    assert_one_sentence_error(
        &culprit(&["diagnose", "--recording", s(&rec), "--at", "9999-12-31T23:59:59Z"]),
        &["--at `9999-12-31T23:59:59Z` is after 9999-12-30T22:00:00Z, the latest time culprit takes"],
    );
}

#[test]
fn a_scrape_target_that_is_not_a_url_says_why() {
    assert_one_sentence_error(&culprit(&["diagnose", "--scrape", "localhost:9249"]), &["not an http(s) URL"]);
}

#[test]
fn an_unknown_job_names_the_jobs_named_alike_and_only_those() {
    let rec = capture("slow-sink").join("recording.om.gz");
    let out = culprit(&["diagnose", "--recording", s(&rec), "--job", "bp-lab-slow"]);
    assert_one_sentence_error(&out, &["`bp-lab-slow`", "did you mean `bp_lab_slow_sink`?"]);
    let out = culprit(&["diagnose", "--recording", s(&rec), "--job", "payments"]);
    assert_one_sentence_error(&out, &["`payments`", "1 other job has metrics; its name is not alike"]);
}

#[test]
fn control_characters_in_a_message_reach_the_terminal_escaped() {
    let rec = capture("slow-sink").join("recording.om.gz");
    let out = culprit(&["diagnose", "--recording", s(&rec), "--job", "x\u{1b}[2J\u{7}\r"]);
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(!err.contains('\u{1b}') && !err.contains('\u{7}') && !err.contains('\r'), "{err:?}");
    assert!(err.contains(r"`x\u{1b}[2J\u{7}\r`"), "{err}");
}

#[test]
fn a_verdict_exits_zero_whatever_it_says() {
    let dir = capture("healthy");
    let out =
        culprit(&["diagnose", "--recording", s(&dir.join("recording.om.gz")), "--plan", s(&dir.join("plan.json"))]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8(out.stdout).unwrap().starts_with("No backpressure in bp-lab-healthy"));
}

/// Text as a reader sees it: every run of whitespace one space (wrapped lines joined).
fn words(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Markdown as read: `\x` escapes, `**` and backticks gone.
fn markdown_read(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.extend(chars.next()),
            '*' | '`' => {}
            c => out.push(c),
        }
    }
    words(&out)
}

/// A page as read: styles and scripts out, tags as spaces, the five entities unescaped.
fn html_read(s: &str) -> String {
    let mut rest = s;
    let mut out = String::new();
    while let Some(i) = rest.find('<') {
        out.push_str(&rest[..i]);
        out.push(' ');
        let tag = &rest[i..];
        let skip_to = ["<style", "<script"]
            .iter()
            .find(|t| tag.starts_with(**t))
            .and_then(|t| tag.find(&format!("</{}>", &t[1..])).map(|k| k + t.len() + 2))
            .or_else(|| tag.find('>').map(|k| k + 1))
            .unwrap_or(tag.len());
        rest = &tag[skip_to..];
    }
    out.push_str(rest);
    let out = out.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&#39;", "'");
    words(&out.replace("&amp;", "&"))
}

/// Every string of the Slack messages of a verdict's notice (message, details, fallback),
/// as read: Slack's three entities unescaped, `*` and backticks gone.
fn slack_read(v: &culprit::model::verdict::Verdict) -> String {
    use culprit::model::notice::{Notice, NoticeKind};
    use culprit::render::slack;
    let n = Notice {
        links: Default::default(),
        kind: NoticeKind::Verdict,
        group_key: "{}:{job_id=\"x\"}".into(),
        labels: Default::default(),
        job: v.job.clone(),
        verdict: Some(v.clone()),
        verdict_id: Some(7),
        verdict_url: Some("https://culprit.example.com/verdicts/7".into()),
        reason: None,
        firing: true,
        changed: false,
        idempotency_key: "slack:g:7".into(),
        at_ms: 1_795_000_000_000,
        episode: Default::default(),
        maybe_repeat: false,
        incident: None,
        incident_view: None,
        incident_parent: None,
    };
    fn leaves(x: &serde_json::Value, out: &mut String) {
        match x {
            serde_json::Value::String(s) => {
                out.push_str(s);
                out.push('\n');
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| leaves(x, out)),
            serde_json::Value::Object(o) => o.values().for_each(|x| leaves(x, out)),
            _ => {}
        }
    }
    let mut all = String::new();
    for m in [Some(slack::message(&n)), slack::details(&n), Some(slack::fallback(&n))].into_iter().flatten() {
        leaves(&serde_json::to_value(&m).unwrap(), &mut all);
    }
    let all = all.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&");
    words(&all.replace(['*', '`'], ""))
}

/// The headline words of a status, as every rendering puts them in the summary.
fn status_words(status: &str) -> &'static str {
    match status {
        "culprit_found" => " is the culprit: ",
        "no_backpressure" => "No backpressure in ",
        "no_single_culprit" => "No single culprit: ",
        other => panic!("no headline words known for status {other}"),
    }
}

#[test]
fn every_format_renders_the_same_verdict() {
    // The JSON verdict is the reference; every other rendering must say the same: the
    // summary (its status in words), the culprit, the finding and confidence, and each fix
    // with its numbers: in full in verbose text, Markdown, the page and Slack; in the
    // 20-line default text each fix at least to its first 60 characters (longer ones are
    // clipped with `…`). Names here are plain: SQL descriptions are shortened for display
    // (tests/renderings.rs snapshots those).
    let inputs: Vec<(PathBuf, Vec<String>)> =
        ["hot-key", "slow-sink", "slow-instance", "rocksdb-stall", "checkpoint-slowdown", "healthy"]
            .iter()
            .map(|c| {
                let dir = capture(c);
                (
                    dir.clone(),
                    vec![
                        "--recording".into(),
                        s(&dir.join("recording.om.gz")).into(),
                        "--plan".into(),
                        s(&dir.join("plan.json")).into(),
                    ],
                )
            })
            .chain(["job-wide-near-capacity", "buffering-sink-sawtooth"].iter().map(|c| {
                let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/cases").join(c);
                let e: serde_json::Value =
                    serde_json::from_str(&std::fs::read_to_string(dir.join("EXPECTED.json")).unwrap()).unwrap();
                let args = ["--recording", s(&dir.join("recording.om.gz")), "--plan", s(&dir.join("plan.json"))]
                    .into_iter()
                    .map(String::from)
                    .chain([
                        "--job".to_string(),
                        e["job_name"].as_str().unwrap().into(),
                        "--at".into(),
                        e["at"].as_str().unwrap().into(),
                    ])
                    .collect();
                (dir, args)
            }))
            .collect();
    let (mut statuses, mut fixes) = (std::collections::BTreeSet::new(), 0);
    for (dir, args) in &inputs {
        let name = dir.file_name().unwrap().to_string_lossy();
        let run = |verbose: bool, format: &str| {
            let mut a: Vec<&str> = if verbose { vec!["--verbose"] } else { vec![] };
            a.push("diagnose");
            a.extend(args.iter().map(String::as_str));
            a.extend(["--format", format]);
            let out = culprit(&a);
            assert_eq!(out.status.code(), Some(0), "{name} {format}: {}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8(out.stdout).unwrap()
        };
        let json: serde_json::Value = serde_json::from_str(&run(false, "json")).unwrap();
        assert_eq!(json["schema"], "culprit.verdict/v1");
        let v: culprit::model::verdict::Verdict = serde_json::from_value(json.clone()).unwrap();
        let (status, finding, confidence) = (v.status.as_str(), v.finding.as_str(), v.confidence.as_str());
        statuses.insert(status);
        fixes += v.fix.len();
        let renderings = [
            ("text", words(&run(false, "text"))),
            ("verbose text", words(&run(true, "text"))),
            ("markdown", markdown_read(&run(true, "markdown"))),
            ("html", html_read(&run(false, "html"))),
            ("slack", slack_read(&v)),
        ];
        for (format, r) in &renderings {
            // Slack's bold and code marks are read away on both sides.
            let expect = |x: &str| if *format == "slack" { words(&x.replace(['*', '`'], "")) } else { words(x) };
            let summary = expect(&v.summary);
            assert!(summary.contains(status_words(status)), "{name}: {status}: {summary}");
            assert!(r.contains(&summary), "{name} {format}: the summary `{summary}` missing from\n{r}");
            if let Some(c) = &v.culprit {
                assert!(r.contains(&expect(&c.vertex_name)), "{name} {format}: the culprit {} missing", c.vertex_name);
            }
            for fix in &v.fix {
                let fix = expect(fix);
                let shown: String = if *format == "text" { fix.chars().take(60).collect() } else { fix.clone() };
                assert!(r.contains(&shown), "{name} {format}: the fix `{shown}` missing from\n{r}");
            }
            if *format != "text" {
                assert!(r.contains(finding), "{name} {format}: the finding {finding} missing");
            }
            if *format != "slack" {
                assert!(r.contains(&format!("confidence {confidence}")), "{name} {format}: confidence {confidence}");
            }
        }
        // The status by its name where a format shows it: the verbose footer, the page's badge.
        assert!(renderings[1].1.contains(&format!("· {status} ·")), "{name}: status {status} in the verbose text");
        assert!(
            renderings[3].1.contains(&status.replace('_', " ").to_uppercase()),
            "{name}: status {status} on the page"
        );
    }
    // 2 + 1 + 1 + 1 + 2 fixes of the captures (healthy has none), 3 + 2 of the cases: the
    // checks above ran on each.
    assert!(fixes >= 10, "{fixes} fixes compared");
    // The inputs cover each headline: a culprit, none, and a job-wide shortage.
    assert_eq!(statuses.into_iter().collect::<Vec<_>>(), ["culprit_found", "no_backpressure", "no_single_culprit"]);

    // And hot-key as each format lays it out: the arrow of the text, the row of the table.
    let dir = capture("hot-key");
    let args = |f: &str| {
        culprit(&[
            "diagnose",
            "--recording",
            s(&dir.join("recording.om.gz")),
            "--plan",
            s(&dir.join("plan.json")),
            "--format",
            f,
        ])
    };
    let json: serde_json::Value = serde_json::from_slice(&args("json").stdout).unwrap();
    assert_eq!(json["schema"], "culprit.verdict/v1");
    assert_eq!(json["finding"], "hot_key");
    let text = String::from_utf8(args("text").stdout).unwrap();
    assert!(text.contains(">> fraud-score") && text.contains("subtask 0"), "{text}");
    let md = String::from_utf8(args("markdown").stdout).unwrap();
    assert!(md.contains("| fraud-score | 4 | 100% | 0% | **culprit** |"), "{md}");
}

#[test]
fn the_demo_replays_every_bundled_capture_offline() {
    let out = culprit(&["demo"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    for name in [
        "slow-sink",
        "hard-backpressure",
        "hot-key",
        "slow-instance",
        "rocksdb-stall",
        "healthy",
        "failover",
        "adaptive-rescale",
        "chained-culprit-flamegraph",
        "flink-1.18-chained-culprit",
        "flink-1.20-slow-sink-legacy-source",
        "flink-1.20-failover",
    ] {
        assert!(text.contains(&format!("━━ {name} —")), "{name} missing");
    }
    // 12 of the 16 Flink 2.3 runs (not the two healthy ones, nor state-growth-long, which
    // has no backpressure, nor failover, which leads with its failure) and two of the three
    // 1.x runs (not the failover) have a culprit.
    assert_eq!(text.matches(" is the culprit: ").count(), 14);
    // adaptive-rescale reads its bundled rescale history: the cut and who made it.
    assert!(text.contains("by the Adaptive scheduler: resource requirements changed."), "{text}");
    assert!(text.contains("But account-state's state only grows"), "{text}");
    // chained-culprit-flamegraph shows its recorded profile: all 200 off-CPU samples parked.
    assert!(text.contains("Profile of enrich -> score: top frames of 200 off-CPU samples"), "{text}");
    // healthy, rocksdb (healthy) and state-growth-long.
    assert_eq!(text.matches("No backpressure in").count(), 3);
    // The failover run leads with its failure, the task that throws named.
    assert_eq!(text.matches("bp-lab-failover is failing over: 5 restarts").count(), 2, "2.3 and 1.20");
    assert!(text.contains("validate[1] threw java.lang.IllegalStateException"), "{text}");
    // Each verdict at most 20 lines (the demo's own title line and blank line aside).
    for verdict in text.split("━━ ").skip(1) {
        assert!(verdict.trim_end().lines().count() <= 21, "{verdict}");
    }
}

#[test]
fn the_demo_in_json_is_one_array_of_verdicts() {
    let out = culprit(&["demo", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0));
    let all: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).expect("one JSON array");
    assert_eq!(all.len(), 19);
    assert!(all.iter().all(|v| v["schema"] == "culprit.verdict/v1"));
}

#[test]
fn the_demo_refuses_html_and_says_how_to_get_one_verdict_page() {
    // Nineteen HTML documents in one stream would open as one broken page.
    let out = culprit(&["demo", "--format", "html"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("--format html > verdict.html"), "{err}");
    assert!(out.stdout.is_empty());
}

/// Joins two OpenMetrics recordings into one (dropping the first `# EOF`).
fn joined(a: &Path, b: &Path, out: &Path) {
    let read = |p: &Path| {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(std::fs::File::open(p).unwrap()), &mut s)
            .unwrap();
        s
    };
    let first = read(a);
    let first = first.trim_end().strip_suffix("# EOF").unwrap();
    let mut f = std::fs::File::create(out).unwrap();
    f.write_all(first.as_bytes()).unwrap();
    f.write_all(read(b).as_bytes()).unwrap();
}

#[test]
fn with_two_runs_of_one_job_name_the_newest_job_id_wins_and_the_verdict_says_so() {
    // slow-sink (10:35) and hard-backpressure (10:48) both ran as bp-lab-slow-sink.
    let dir = tempfile::tempdir().unwrap();
    let both = dir.path().join("both.om");
    joined(&capture("slow-sink").join("recording.om.gz"), &capture("hard-backpressure").join("recording.om.gz"), &both);
    let out = culprit(&["diagnose", "--recording", s(&both), "--job", "bp-lab-slow-sink", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["job"]["id"], "1cd3b48d0be42fe317d2a4ac91801fc4");
    let notes = v["notes"].to_string();
    assert!(notes.contains("newest") && notes.contains("da23ad9af4e7326542c9a70eac958f42"), "{notes}");
    // Graph-free (no plan) still finds the sink vertex as the busy non-backpressured one.
    assert_eq!(v["culprit"]["vertex_id"], "2e588ce1c86a9d46e2e85186773ce4fd");
    assert_eq!(v["confidence"], "low");

    // An older --at picks the run that was alive then: the first one.
    let out = culprit(&[
        "diagnose",
        "--recording",
        s(&both),
        "--job",
        "bp_lab_slow_sink",
        "--at",
        "2026-11-29T10:36:20Z",
        "--format",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["job"]["id"], "da23ad9af4e7326542c9a70eac958f42");
}

#[test]
fn without_a_plan_the_text_view_says_the_vertex_order_is_unknown() {
    let rec = capture("slow-sink").join("recording.om.gz");
    let out = culprit(&["diagnose", "--recording", s(&rec), "--format", "text"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Evidence (no job graph: order unknown)"), "{text}");
    assert!(!text.contains("sources first") && text.contains("confidence low"), "{text}");
    let out = culprit(&["diagnose", "--recording", s(&rec), "--format", "text", "--verbose"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("assumed, not known"), "{text}");
}

#[test]
fn an_untimed_line_in_a_timestamped_recording_is_taken_at_its_newest_timestamp_not_now() {
    // slow-sink's newest sample is at 1795948587.780 s = 2026-11-29T10:36:27.78Z; one `up`
    // line without a timestamp is added at the top. Taken as "now" it would move the
    // diagnosis time past the job's data; taken at the file's newest it changes nothing.
    let rec = capture("slow-sink").join("recording.om.gz");
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(std::fs::File::open(&rec).unwrap()), &mut text)
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mixed = dir.path().join("mixed.om");
    std::fs::write(&mixed, format!("up{{instance=\"127.0.0.1:9252\",job=\"flink\"}} 1\n{text}")).unwrap();
    let json = |path: &Path| -> serde_json::Value {
        let out = culprit(&["diagnose", "--recording", s(path), "--format", "json"]);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let (plain, v) = (json(&rec), json(&mixed));
    assert_eq!(v["at"], "2026-11-29T10:36:27.78Z");
    assert_eq!((&v["finding"], &v["culprit"]), (&plain["finding"], &plain["culprit"]));
    let notes = v["notes"].to_string();
    assert!(
        notes.contains(
            "1 sample carries no timestamp in a file whose other samples do: taken at the file's newest timestamp (2026-11-29T10:36:27.78Z)"
        ),
        "{notes}"
    );
    assert!(!notes.contains("sampled now"), "{notes}");
}

#[test]
fn a_job_younger_than_its_warm_up_is_diagnosed_with_low_confidence_and_says_when_to_look_again() {
    // slow-instance started at ~11:40:28Z; at 11:41:25Z it has run ~57 s, less than the
    // 75 s warm-up (60 s of Flink's averaging + deployment), so all of the 60 s minimum
    // window is warm-up. Meaningful from start + 75 s + 60 s ≈ 11:42:43Z.
    let dir = capture("slow-instance");
    let out = culprit(&[
        "diagnose",
        "--recording",
        s(&dir.join("recording.om.gz")),
        "--plan",
        s(&dir.join("plan.json")),
        "--at",
        "2026-11-29T11:41:25Z",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["confidence"], "low");
    let notes = v["notes"].to_string();
    assert!(notes.contains("Too young to diagnose: the job started only 56 s before 2026-11-29T11:41:25Z"), "{notes}");
    assert!(notes.contains("meaningful from 2026-11-29T11:42:43"), "{notes}");
}
