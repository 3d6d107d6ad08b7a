//! Issue 22, "A job's identity changes under an alert" and "A configured plan, whatever the
//! job is called": report 01 (the Flink Kubernetes Operator redeploys `orders-enricher` from a
//! savepoint under a new job id while the alert, and the plan fetched for it, still name the
//! old one), an in-place rescale that cut a sink from 4 to 2 writers, and `[flink.plans]`
//! found by every name a job goes by. Offline as a user runs `culprit diagnose`, live from a
//! real Prometheus backfilled with the same recording, and through `culprit serve`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use culprit::cli::{DiagnoseArgs, diagnose_command};
use culprit::config::Config;
use culprit::model::graph::JobGraph;
use culprit::model::request::DiagnosisRequest;
use culprit::model::verdict::{Finding, Verdict};
use culprit::render::Format;
use culprit::service::pipeline::{Live, Overrides};
use culprit::service::server::Application;
use serde_json::Value;

use crate::support;

/// Run A, which the alert and `plan-old.json` name: it reports until minute 6.
const A: &str = "6f1e2d3c4b5a69788796a5b4c3d2e1f0";
/// Run B, the redeploy from a savepoint: from minute 6.7 to the end (minute 10).
const B: &str = "a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8";
const SINK: &str = "4bf7c1955ffe56e2106d666433eaf137";

fn dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

fn report01() -> PathBuf {
    dir("reports3/01-operator-upgrade-rotated-job-id")
}

fn args(recording: &Path, plan: Option<&Path>, job: Option<&str>, config: Option<&Path>) -> DiagnoseArgs {
    DiagnoseArgs {
        recording: Some(recording.to_path_buf()),
        metrics: Vec::new(),
        scrape: Vec::new(),
        flamegraph: None,
        flink: None,
        cluster: None,
        plan: plan.map(Path::to_path_buf),
        job: job.map(str::to_string),
        label: Vec::new(),
        at: None,
        window: None,
        config: config.map(Path::to_path_buf),
        checkpoint_config: None,
        exceptions: None,
        rescales: None,
        format: Format::Json,
    }
}

fn offline(plan: Option<&str>, job: Option<&str>) -> Verdict {
    let d = report01();
    let plan = plan.map(|p| d.join(p));
    diagnose_command(&args(&d.join("recording.om.gz"), plan.as_deref(), job, None), 0)
        .unwrap_or_else(|e| panic!("{}", e.message))
}

/// What the on-call must read about run A and run B in every output: A was replaced by B.
fn names_the_replacement(text: &str) {
    assert!(text.contains(&format!("Run {A} was replaced by run {B} at 2026-11-18T11:13:15Z")), "{text}");
}

/// The verdict a user expects for report 01: run B, its sink the culprit (`sink`).
fn is_run_b_with_its_sink(v: &Verdict, what: &str) {
    assert_eq!(v.job.id, B, "{what}: {:?}", v.notes);
    assert_eq!(v.finding, Finding::Sink, "{what}: {}", v.summary);
    let culprit = v.culprit.as_ref().unwrap_or_else(|| panic!("{what}: no culprit"));
    assert_eq!((culprit.vertex_id.as_str(), culprit.vertex_name.as_str()), (SINK, "Sink: orders-es"), "{what}");
    // The window is B's, after its start-up: B's uptime says it started at 11:13:15 (its
    // first scrape at 11:13:20 carries uptime 5 s), plus the 75 s of warm-up = 11:14:30;
    // it ends at B's last sample, 11:16:40 (A's last one was 11:12:40).
    assert_eq!((v.window_start.as_str(), v.at.as_str()), ("2026-11-18T11:14:30Z", "2026-11-18T11:16:40Z"), "{what}");
    assert!(!v.notes.iter().any(|n| n.contains("stopped reporting")), "{what}: {:?}", v.notes);
}

#[test]
fn report_01_the_alerts_plan_leads_to_the_run_that_replaced_it() {
    let v = offline(Some("plan-old.json"), None);
    is_run_b_with_its_sink(&v, "plan-old.json");
    names_the_replacement(&v.summary);
    // A's plan has B's vertices (same ids and names): it is used, and a note says whose it is.
    assert!(v.graph.from_plan, "{:?}", v.notes);
    assert!(v.notes.iter().any(|n| n.contains(&format!("the job plan is of job_id {A}"))), "{:?}", v.notes);
}

#[test]
fn report_01_the_alerts_job_id_and_the_job_name_lead_to_the_run_that_replaced_it() {
    for job in [A, "orders-enricher", "orders_enricher"] {
        let v = offline(Some("plan-old.json"), Some(job));
        is_run_b_with_its_sink(&v, job);
        names_the_replacement(&v.summary);
        // No word of choosing A "from the job plan" among the runs of the name.
        assert!(!v.notes.iter().any(|n| n.contains("from the job plan")), "{job}: {:?}", v.notes);
    }
}

#[test]
fn report_01_the_default_text_output_names_the_replacement() {
    let v = offline(Some("plan-old.json"), None);
    let text = culprit::render::render(&v, Format::Text);
    // The text wraps at 100 columns: join its lines before looking for the sentence.
    let joined = text.lines().collect::<Vec<_>>().join(" ");
    names_the_replacement(&joined);
    assert!(joined.contains("Sink: orders-es (sink) is the culprit"), "{text}");
}

#[test]
fn report_01_the_control_with_the_new_runs_plan_says_nothing_was_replaced() {
    let v = offline(Some("plan-new.json"), None);
    is_run_b_with_its_sink(&v, "plan-new.json");
    assert!(!v.summary.contains("was replaced"), "{}", v.summary);
}

#[test]
fn report_01_without_a_plan_the_newest_run_is_diagnosed_and_the_old_one_named() {
    let v = offline(None, Some("orders-enricher"));
    assert_eq!(v.job.id, B);
    // Without a graph the culprit is the busiest vertex that is not backpressured: the sink,
    // under its reporter name (no plan to give Flink's).
    assert_eq!(v.culprit.as_ref().map(|c| c.vertex_id.as_str()), Some(SINK), "{}", v.summary);
    assert!(v.notes.iter().any(|n| n.contains(&format!("(ignored: {A})"))), "{:?}", v.notes);
    // B is the newest run of the name, chosen as such: not a replacement of what was asked.
    assert!(!v.summary.contains("was replaced"), "{}", v.summary);
}

#[test]
fn report_01_asked_about_a_while_it_still_ran_the_verdict_is_of_a() {
    // At 11:12:00 A reports (its last sample is at 11:12:40) and B does not exist yet:
    // nothing was replaced then.
    let d = report01();
    let mut a = args(&d.join("recording.om.gz"), Some(&d.join("plan-old.json")), None, None);
    a.at = Some("2026-11-18T11:12:00Z".into());
    let v = diagnose_command(&a, 0).unwrap_or_else(|e| panic!("{}", e.message));
    assert_eq!(v.job.id, A);
    assert!(!v.summary.contains("was replaced"), "{}", v.summary);
}

/// Report 01's recording shifted to end `now - 2 s`, in a real Prometheus.
fn report01_prometheus(now: i64) -> support::Server {
    let text = support::shifted(&report01().join("recording.om.gz"), now - 2_000);
    support::prometheus_with_texts(&[text], support::free_port())
}

fn live_config(prometheus: &str, extra: &str) -> Config {
    let text = format!("[prometheus]\nurl = \"{prometheus}\"\ntimeout = \"5s\"\ndeadline = \"10s\"\n{extra}");
    Config::from_toml(&text, "identity.toml").unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_01_live_through_prometheus_the_alerts_job_id_and_plan_lead_to_the_new_run() {
    let now = jiff::Timestamp::now().as_millisecond();
    let prom = report01_prometheus(now);
    let live = Live::new(live_config(&prom.url, "")).unwrap();
    let plan_a = JobGraph::from_plan_json(&std::fs::read_to_string(report01().join("plan-old.json")).unwrap()).unwrap();
    for (job, plan) in [(Some(A), Some(plan_a.clone())), (Some("orders-enricher"), Some(plan_a)), (Some(A), None)] {
        let request = DiagnosisRequest { job: job.map(str::to_string), ..DiagnosisRequest::default() };
        let overrides = Overrides { graph: plan.clone(), checkpoint_config: None, exceptions: None, rescales: None };
        let v = live.diagnose_with(&request, &Default::default(), now, overrides).await.unwrap();
        let what = format!("{job:?} with a plan: {}", plan.is_some());
        assert_eq!(v.job.id, B, "{what}: {:?}", v.notes);
        assert!(v.summary.contains(&format!("Run {A} was replaced by run {B}")), "{what}: {}", v.summary);
        if plan.is_some() {
            assert_eq!(v.finding, Finding::Sink, "{what}: {}", v.summary);
            assert_eq!(v.culprit.as_ref().map(|c| c.vertex_name.as_str()), Some("Sink: orders-es"), "{what}");
        }
    }
}

/// A Flink REST stand-in for the new JobManager: it lists only run B, whose plan is
/// `plan-new.json` (the old JobManager, and run A with it, are gone).
async fn new_jobmanager() -> (wiremock::MockServer, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("rest")).unwrap();
    let overview = serde_json::json!({"jobs": [{
        "jid": B, "name": "orders-enricher", "jobType": "STREAMING", "state": "RUNNING",
        "start-time": 1, "end-time": -1, "duration": 1, "last-modification": 1,
        "tasks": {"running": 6, "total": 6}
    }]});
    std::fs::write(tmp.path().join("rest/jobs-overview.json"), overview.to_string()).unwrap();
    let capture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/captures/slow-sink/rest/checkpoints-config.json");
    std::fs::copy(capture, tmp.path().join("rest/checkpoints-config.json")).unwrap();
    std::fs::copy(report01().join("plan-new.json"), tmp.path().join("plan.json")).unwrap();
    (support::flink_rest_for(tmp.path()).await, tmp)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_01_live_an_alert_naming_the_old_run_gets_the_new_runs_plan_from_flink_rest() {
    let now = jiff::Timestamp::now().as_millisecond();
    let prom = report01_prometheus(now);
    let (rest, _files) = new_jobmanager().await;
    let extra = format!("[[flink.clusters]]\nname = \"streaming\"\nrest_url = \"{}\"\n", rest.uri());
    let live = Live::new(live_config(&prom.url, &extra)).unwrap();
    let request = DiagnosisRequest { job: Some(A.into()), ..DiagnosisRequest::default() };
    let v = live.diagnose(&request, &Default::default(), now).await.unwrap();
    // Flink REST was asked about B (it knows no A): its plan is the graph, and no note
    // says that the cluster has no job A.
    assert!(v.graph.from_plan, "{:?}", v.notes);
    assert!(!v.notes.iter().any(|n| n.contains("has no job named")), "{:?}", v.notes);
    assert_eq!((v.job.id.as_str(), v.finding), (B, Finding::Sink), "{:?}", v.notes);
    assert!(v.summary.contains(&format!("Run {A} was replaced by run {B}")), "{}", v.summary);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_01_through_serve_a_plan_configured_under_the_old_id_diagnoses_the_new_run() {
    let now = jiff::Timestamp::now().as_millisecond();
    let prom = report01_prometheus(now);
    let tmp = tempfile::tempdir().unwrap();
    let slack = support::capture::Capture::start().await;
    let pagerduty = support::capture::Capture::start().await;
    // The on-call keeps the plan fetched for the alert under the alert's job id.
    let extra = format!("[flink.plans]\n\"{A}\" = \"{}\"\n", report01().join("plan-old.json").display());
    let text = support::culprit_config(tmp.path(), &prom.url, &slack.url, &pagerduty.url, &extra);
    let app = Application::build(Config::from_toml(&text, "identity.toml").unwrap()).await.unwrap();
    for job in [A, "orders-enricher"] {
        let r = reqwest::get(format!("{}/api/v1/diagnose?job={job}", app.url())).await.unwrap();
        assert_eq!(r.status(), 200, "{job}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["job"]["id"], B, "{job}: {}", v["notes"]);
        assert_eq!(v["finding"], "sink", "{job}: {}", v["summary"]);
        assert_eq!(v["graph"]["from_plan"], true, "{job}: {}", v["notes"]);
        let summary = v["summary"].as_str().unwrap();
        if job == A {
            assert!(summary.contains(&format!("Run {A} was replaced by run {B}")), "{summary}");
        } else {
            // Asked by name, B is the newest run of the name: nothing asked for was replaced;
            // a note names the older run left aside.
            assert!(v["notes"].to_string().contains(&format!("(ignored: {A})")), "{}", v["notes"]);
        }
    }
    // The alert as Alertmanager sends it, naming A: the Slack post names the replacement.
    let webhook = support::webhook_for(A, "orders_enricher", &["f01".to_string()]);
    let r = reqwest::Client::new().post(format!("{}/webhook/alertmanager", app.url())).json(&webhook).send().await;
    assert_eq!(r.unwrap().status(), 202);
    support::wait_for("the Slack post", Duration::from_secs(60), || !slack.slack_messages().is_empty()).await;
    let post = slack.slack_messages()[0].to_string();
    assert!(post.contains(&format!("was replaced by run {B}")), "{post}");
    app.stop().await;
}

/// The rescale case (`tests/data/identity/rescale-sink/make.py`): at 11:11:40 the job
/// restarts with its sink cut from 4 to 2 subtasks, and the sink becomes the bottleneck.
fn rescaled(plan: bool) -> Verdict {
    let d = dir("identity/rescale-sink");
    let plan = plan.then(|| d.join("plan.json"));
    diagnose_command(&args(&d.join("recording.om.gz"), plan.as_deref(), None, None), 0)
        .unwrap_or_else(|e| panic!("{}", e.message))
}

#[test]
fn a_rescale_inside_the_window_is_named_with_its_time_and_parallelism_and_leads_the_fix() {
    let v = rescaled(true);
    assert_eq!(v.finding, Finding::Sink, "{}", v.summary);
    // 4 subtasks reported until 11:11:35 (the step before the restart), 2 at the end.
    assert!(
        v.summary.contains("Sink: payments-jdbc was rescaled from 4 to 2 subtasks at 2026-11-18T11:11:40Z"),
        "{}",
        v.summary
    );
    assert!(!v.summary.contains("the job started"), "{}", v.summary);
    // The cut, not only the system behind the sink, is the fix to weigh first.
    assert!(v.fix[0].starts_with("Weigh first: Sink: payments-jdbc was cut from 4 to 2 subtasks"), "{:?}", v.fix);
    assert!(
        v.fix[0].contains("fewer writers") && v.fix[0].contains("job.autoscaler.vertex.min-parallelism"),
        "{}",
        v.fix[0]
    );
    // The samples before the restart and its warm-up are left out: 11:11:40 + 75 s.
    assert_eq!(v.window_start, "2026-11-18T11:12:55Z");
    // A restart within the run is called one, not the job's start.
    assert!(
        v.notes.iter().any(|n| n.contains("the job restarted or rescaled at 2026-11-18T11:11:40Z")),
        "{:?}",
        v.notes
    );
    assert!(!v.notes.iter().any(|n| n.contains("the job started")), "{:?}", v.notes);
}

#[test]
fn a_rescale_whose_restart_leaves_the_tasks_absent_for_a_while_is_still_named_and_leads_the_fix() {
    // recording-gap{10,20}.om.gz: the restart begins at 11:11:40; for 10 or 20 s the uptime
    // reads 0 and no task reports; the new attempts start at 11:11:50 or 11:12:00. The
    // subtasks before are counted at the last running sample (11:11:35: 4), not in the
    // 15 s before the new start (none reported then).
    let d = dir("identity/rescale-sink");
    for (gap, start) in [(10, "2026-11-18T11:11:50Z"), (20, "2026-11-18T11:12:00Z")] {
        let rec = d.join(format!("recording-gap{gap}.om.gz"));
        let v = diagnose_command(&args(&rec, Some(&d.join("plan.json")), None, None), 0)
            .unwrap_or_else(|e| panic!("{}", e.message));
        assert_eq!(v.finding, Finding::Sink, "{gap}: {}", v.summary);
        assert!(
            v.summary.contains(&format!("Sink: payments-jdbc was rescaled from 4 to 2 subtasks at {start}")),
            "{gap}: {}",
            v.summary
        );
        assert!(v.fix[0].starts_with("Weigh first: Sink: payments-jdbc was cut from 4 to 2"), "{gap}: {:?}", v.fix);
        assert!(
            v.notes.iter().any(|n| n.contains(&format!("restarted or rescaled at {start}"))),
            "{gap}: {:?}",
            v.notes
        );
        assert!(!v.notes.iter().any(|n| n.contains("the job started")), "{gap}: {:?}", v.notes);
    }
}

#[test]
fn a_rescale_is_named_without_a_plan_too() {
    let v = rescaled(false);
    assert!(v.summary.contains("was rescaled from 4 to 2 subtasks at 2026-11-18T11:11:40Z"), "{}", v.summary);
}

#[test]
fn a_restart_without_a_change_of_parallelism_is_named_as_a_restart() {
    // recording-restart.om.gz: the same restart at 11:11:40 (uptime reset, numRestarts
    // 0 → 1, every task a new attempt), every vertex at 4 subtasks before and after.
    let d = dir("identity/rescale-sink");
    let v = diagnose_command(&args(&d.join("recording-restart.om.gz"), None, None, None), 0)
        .unwrap_or_else(|e| panic!("{}", e.message));
    assert!(v.summary.contains("The job restarted at 2026-11-18T11:11:40Z (same parallelism)."), "{}", v.summary);
    assert!(!v.summary.contains("rescaled"), "{}", v.summary);
    assert!(!v.fix.iter().any(|f| f.starts_with("Weigh first")), "{:?}", v.fix);
}

#[test]
fn before_a_restart_nothing_is_said_of_it() {
    // At 11:11:30 the restart has not happened: the window holds none.
    let d = dir("identity/rescale-sink");
    let mut a = args(&d.join("recording.om.gz"), None, None, None);
    a.at = Some("2026-11-18T11:11:30Z".into());
    let v = diagnose_command(&a, 0).unwrap_or_else(|e| panic!("{}", e.message));
    assert!(!v.summary.contains("rescaled") && !v.summary.contains("restarted"), "{}", v.summary);
}

/// A job name with every kind of character the reporter's default filter replaces: a
/// space, a dot, quotes and CJK characters.
const FLINK_NAME: &str = "orders enricher.v2 \"eu\" 注文";

/// Report 01's recording and plans with the job renamed [`FLINK_NAME`], its `job_name`
/// label as the reporter writes it: kept as Flink shows it (`filter: false`, the
/// reporter's `filterLabelValueCharacters: false`) or filtered (the default). Returns the
/// directory holding `recording.om`, `plan-new.json` and `plan-old.json`.
fn renamed(filter: bool) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let om = tmp.path().join("recording.om");
    support::gunzip(&report01().join("recording.om.gz"), &om);
    let label = if filter {
        culprit::model::graph::sanitize_label_value(FLINK_NAME)
    } else {
        // The exposition escapes `"` and `\` in a label value.
        FLINK_NAME.replace('\\', "\\\\").replace('"', "\\\"")
    };
    let text =
        std::fs::read_to_string(&om).unwrap().replace("job_name=\"orders_enricher\"", &format!("job_name=\"{label}\""));
    std::fs::write(&om, text).unwrap();
    for plan in ["plan-new.json", "plan-old.json"] {
        let mut json: Value = serde_json::from_str(&std::fs::read_to_string(report01().join(plan)).unwrap()).unwrap();
        json["plan"]["name"] = Value::String(FLINK_NAME.into());
        std::fs::write(tmp.path().join(plan), json.to_string()).unwrap();
    }
    tmp
}

/// `culprit diagnose --recording … --config` with `[flink.plans]` holding `key` = `plan`.
fn with_configured_plan(dir: &Path, key: &str, plan: &str, job: Option<&str>) -> Verdict {
    let config = dir.join("culprit.toml");
    let key = key.replace('\\', "\\\\").replace('"', "\\\"");
    std::fs::write(&config, format!("[flink.plans]\n\"{key}\" = \"{}\"\n", dir.join(plan).display())).unwrap();
    diagnose_command(&args(&dir.join("recording.om"), None, job, Some(&config)), 0)
        .unwrap_or_else(|e| panic!("{}", e.message))
}

#[test]
fn a_configured_plan_is_found_by_every_name_of_the_job_in_either_label_form_offline() {
    let filtered = culprit::model::graph::sanitize_label_value(FLINK_NAME);
    // Space, dot, quotes and the two CJK characters each became `_`.
    assert_eq!(filtered, "orders_enricher_v2__eu____");
    for filter in [false, true] {
        let d = renamed(filter);
        for (key, plan) in [
            (FLINK_NAME, "plan-new.json"),
            (filtered.as_str(), "plan-new.json"),
            (B, "plan-new.json"),
            (A, "plan-old.json"),
        ] {
            for job in [None, Some(FLINK_NAME), Some(filtered.as_str()), Some(A)] {
                let what = format!("label filtered: {filter}, key {key:?}, --job {job:?}");
                let v = with_configured_plan(d.path(), key, plan, job);
                assert!(v.graph.from_plan, "{what}: {:?}", v.notes);
                assert_eq!((v.job.id.as_str(), v.job.name.as_str()), (B, FLINK_NAME), "{what}");
                assert_eq!(v.finding, Finding::Sink, "{what}: {}", v.summary);
                let note = format!("read the configured plan [flink.plans] \"{key}\"");
                assert!(v.notes.contains(&note), "{what}: {:?}", v.notes);
            }
        }
    }
}

#[test]
fn a_configured_plan_for_no_name_of_the_job_is_not_used_and_a_note_says_why() {
    let d = renamed(false);
    let v = with_configured_plan(d.path(), "orders enricher.v1", "plan-new.json", None);
    assert!(!v.graph.from_plan);
    assert!(
        v.notes
            .iter()
            .any(|n| n.starts_with(&format!("no configured plan [flink.plans] is for job {FLINK_NAME} (job_id {B})"))),
        "{:?}",
        v.notes
    );
}

#[test]
fn a_configured_plan_whose_file_is_missing_says_so_in_words_and_the_job_is_still_diagnosed() {
    // A new user's try: the note read "is unusable: entity not found" (the I/O error's kind).
    let d = renamed(false);
    let v = with_configured_plan(d.path(), FLINK_NAME, "no-such-plan.json", None);
    assert!(!v.graph.from_plan);
    // Diagnosed without a graph, on the run that reports.
    assert_eq!(v.job.id, B, "{}", v.summary);
    let note = format!("the configured plan [flink.plans] \"{FLINK_NAME}\" is unusable: its file does not exist");
    assert!(v.notes.contains(&note), "{:?}", v.notes);
    assert!(!v.notes.iter().any(|n| n.contains("entity not found")), "{:?}", v.notes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_plan_is_found_by_every_name_of_the_job_live_through_prometheus() {
    let now = jiff::Timestamp::now().as_millisecond();
    let filtered = culprit::model::graph::sanitize_label_value(FLINK_NAME);
    for filter in [false, true] {
        let d = renamed(filter);
        let gz = d.path().join("recording.om.gz");
        let om = std::fs::read(d.path().join("recording.om")).unwrap();
        let mut enc = flate2::write::GzEncoder::new(std::fs::File::create(&gz).unwrap(), flate2::Compression::fast());
        std::io::Write::write_all(&mut enc, &om).unwrap();
        enc.finish().unwrap();
        let prom = support::prometheus_with_texts(&[support::shifted(&gz, now - 2_000)], support::free_port());
        for key in [FLINK_NAME, filtered.as_str()] {
            let extra = format!(
                "[flink.plans]\n\"{}\" = \"{}\"\n",
                key.replace('"', "\\\""),
                d.path().join("plan-new.json").display()
            );
            let live = Live::new(live_config(&prom.url, &extra)).unwrap();
            for job in [FLINK_NAME, filtered.as_str(), A] {
                let what = format!("label filtered: {filter}, key {key:?}, job {job:?}");
                let request = DiagnosisRequest { job: Some(job.into()), ..DiagnosisRequest::default() };
                let v = live.diagnose(&request, &Default::default(), now).await.unwrap();
                assert!(v.graph.from_plan, "{what}: {:?}", v.notes);
                assert_eq!((v.job.id.as_str(), v.finding), (B, Finding::Sink), "{what}: {:?}", v.notes);
            }
        }
    }
}

#[test]
fn a_run_that_stopped_with_no_run_to_take_over_says_so_in_the_summary() {
    // Report 01 with run B under another job name: A, the only run of orders-enricher,
    // stopped at 11:12:40, 240 s before the newest data (B's, at 11:16:40).
    let tmp = tempfile::tempdir().unwrap();
    let om = tmp.path().join("recording.om");
    support::gunzip(&report01().join("recording.om.gz"), &om);
    let text: String =
        std::fs::read_to_string(&om)
            .unwrap()
            .lines()
            .map(|l| {
                if l.contains(B) {
                    l.replace("job_name=\"orders_enricher\"", "job_name=\"payments\"")
                } else {
                    l.into()
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
    std::fs::write(&om, text + "\n").unwrap();
    let v = diagnose_command(&args(&om, None, Some("orders-enricher"), None), 0)
        .unwrap_or_else(|e| panic!("{}", e.message));
    assert_eq!(v.job.id, A);
    assert_eq!(v.at, "2026-11-18T11:12:40Z");
    assert!(
        v.summary.contains(&format!(
            "Run {A} has not reported since 2026-11-18T11:12:40Z (240 s before the time of the diagnosis)"
        )),
        "{}",
        v.summary
    );
}

/// The slow-sink capture whose job went into RESTARTING for its last 40 s: the JobManager
/// reports an uptime of 0 and no task reports (`identity/restarting/make.py`).
fn restarting() -> Verdict {
    let rec = dir("identity/restarting/recording.om.gz");
    let plan = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/captures/slow-sink/plan.json");
    diagnose_command(&args(&rec, Some(&plan), None, None), 0).unwrap_or_else(|e| panic!("{}", e.message))
}

#[test]
fn an_uptime_of_zero_while_restarting_is_no_new_start_and_the_verdict_is_as_of_the_last_running_sample() {
    let v = restarting();
    // As with the capture itself: the writer is the culprit, diagnosed from the samples
    // where the job ran (the last one 40 s before the newest data).
    assert_eq!(v.finding, Finding::Sink, "{}", v.summary);
    assert_eq!(v.culprit.as_ref().map(|c| c.vertex_name.as_str()), Some("slow-sink: Writer"), "{}", v.summary);
    assert!(v.summary.contains("has not been running since"), "{}", v.summary);
    assert!(v.summary.contains("restarting"), "{}", v.summary);
    // The 0 is not read as a start: no restart at the last sample, no "started only 0 s".
    assert!(!v.summary.contains("The job restarted"), "{}", v.summary);
    assert!(!v.notes.iter().any(|n| n.contains("started only 0 s")), "{:?}", v.notes);
}

#[test]
fn a_redeploy_with_another_parallelism_names_the_change_and_diagnoses_with_the_new_runs_parallelism() {
    // identity/redeploy-rescaled: report 01 with run B's sink at parallelism 1; the alert's
    // plan is run A's (sink parallelism 2). One subtask of B's sink reports: B's
    // parallelism, not half of A's lost.
    let d = dir("identity/redeploy-rescaled");
    let v = diagnose_command(&args(&d.join("recording.om.gz"), Some(&d.join("plan-old.json")), None, None), 0)
        .unwrap_or_else(|e| panic!("{}", e.message));
    is_run_b_with_its_sink(&v, "plan-old");
    assert!(v.summary.contains(&format!("Run {A} was replaced by run {B}")), "{}", v.summary);
    assert!(v.summary.contains("parallelism Sink: orders-es 2 → 1"), "{}", v.summary);
    assert!(!v.notes.iter().any(|n| n.contains("may be incomplete")), "{:?}", v.notes);
    assert_eq!(v.culprit.as_ref().map(|c| c.parallelism), Some(1));
    let text = culprit::render::render(&v, Format::Text);
    // The sink's line shows its one writer (the source and enrich keep their 2).
    assert!(text.lines().any(|l| l.contains(">> Sink: orders-es  ×1")), "{text}");
    assert!(!text.contains("subtask 0 of 2"), "{text}");
    // As for an in-place rescale: the cut leads the fix, before the system behind the sink.
    assert!(v.fix[0].starts_with("Weigh first: Sink: orders-es was cut from 2 to 1 subtasks at"), "{:?}", v.fix);
    assert!(v.fix[0].contains(&format!("when run {A} was redeployed as run {B}: it has fewer writers")), "{:?}", v.fix);
    assert!(v.fix[1..].iter().any(|f| f.starts_with("Fix the system behind Sink: orders-es")), "{:?}", v.fix);
}

#[test]
fn a_plan_fetched_before_an_in_place_rescale_takes_the_parallelism_the_rescale_left() {
    // plan-before.json: the sink at 4; the rescale at 11:11:40 left 2 reporting. The
    // rescale explains the 2 of 4: no "incomplete" note, the culprit's parallelism is 2.
    let d = dir("identity/rescale-sink");
    let v = diagnose_command(&args(&d.join("recording.om.gz"), Some(&d.join("plan-before.json")), None, None), 0)
        .unwrap_or_else(|e| panic!("{}", e.message));
    assert!(v.summary.contains("was rescaled from 4 to 2 subtasks at 2026-11-18T11:11:40Z"), "{}", v.summary);
    assert!(!v.notes.iter().any(|n| n.contains("may be incomplete")), "{:?}", v.notes);
    assert_eq!(v.culprit.as_ref().map(|c| c.parallelism), Some(2));
    assert!(v.fix[0].starts_with("Weigh first: Sink: payments-jdbc was cut from 4 to 2"), "{:?}", v.fix);
}
