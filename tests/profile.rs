//! The profile at alert time (issue 23): the flame graph of the culprit's vertex from Flink
//! REST (a local wiremock server serving the answer recorded from Flink 2.3 in
//! `examples/captures/chained-culprit-flamegraph/rest/`) asked within a bound, and the
//! recorded answer given offline with `diagnose --flamegraph`.

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use culprit::collect::flink_rest::{FLAMEGRAPH_POLLS, FlinkRest};
use culprit::config::{FlinkCluster, FlinkConfig, Millis};
use culprit::model::flamegraph::{FlameGraph, ProfileKind};
use wiremock::matchers::{method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

const JOB: &str = "4a3ba8139c485344d6b7c75527a8dbd8";
const VERTEX: &str = "9c32e3838cee893dbb2fc90ccad79598";

fn capture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/captures/chained-culprit-flamegraph")
}

fn recorded() -> String {
    std::fs::read_to_string(capture_dir().join("rest/vertex-1-enrich_-_score-flamegraph-off_cpu.json")).unwrap()
}

fn client(server: &MockServer) -> FlinkRest {
    let cluster = FlinkCluster { name: "lab".into(), rest_url: server.uri(), ..Default::default() };
    let flink = FlinkConfig { timeout: Millis(1000), deadline: Millis(2000), ..FlinkConfig::default() };
    FlinkRest::new(&cluster, &flink).unwrap()
}

fn answer(body: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(body.to_string(), "application/json")
}

fn flamegraph_path() -> String {
    format!("/jobs/{JOB}/vertices/{VERTEX}/flamegraph")
}

#[tokio::test]
async fn a_first_answer_without_samples_is_asked_again_and_the_second_gives_the_flame_graph() {
    let server = MockServer::start().await;
    // Registered first, answers once: Flink's "waiting for the first samples" (-3).
    Mock::given(method("GET"))
        .and(path(flamegraph_path()))
        .and(query_param("type", "full"))
        .respond_with(answer(r#"{"endTimestamp":-3}"#))
        .up_to_n_times(1)
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(flamegraph_path()))
        .and(query_param("type", "full"))
        .respond_with(answer(&recorded()))
        .expect(1)
        .mount(&server)
        .await;
    let rest = client(&server);
    // 1 s bound: polls every 1 s / 5 = 200 ms; the second poll has the samples.
    let got = rest.flamegraph_within(JOB, VERTEX, ProfileKind::Full, Duration::from_secs(1)).await;
    let Ok(FlameGraph::Ready { root, .. }) = got else { panic!("no flame graph: {got:?}") };
    assert_eq!(root.value, 200);
    assert_eq!(rest.requests(), 2);
}

#[tokio::test]
async fn an_answer_that_stays_empty_stops_at_the_bound_with_a_reason_after_at_most_five_requests() {
    let server = MockServer::start().await;
    // What Flink 2.3 gave for type=on_cpu of a parked thread: a root without children.
    Mock::given(method("GET"))
        .and(path(flamegraph_path()))
        .respond_with(answer(r#"{"endTimestamp":1796211547153,"data":{"name":"root","value":0,"children":[]}}"#))
        .mount(&server)
        .await;
    let rest = client(&server);
    let got = rest.flamegraph_within(JOB, VERTEX, ProfileKind::OnCpu, Duration::from_millis(500)).await;
    let why = got.expect_err("no samples");
    assert!(why.contains("no samples within 0.5 s"), "{why}");
    let sent = rest.requests();
    assert!((1..=u64::from(FLAMEGRAPH_POLLS)).contains(&sent), "{sent} requests");
}

#[tokio::test]
async fn a_cluster_with_flame_graphs_disabled_is_asked_once_and_says_so() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(flamegraph_path()))
        .respond_with(answer(r#"{"endTimestamp":-2}"#))
        .expect(1)
        .mount(&server)
        .await;
    let rest = client(&server);
    let why = rest.flamegraph_within(JOB, VERTEX, ProfileKind::Full, Duration::from_secs(1)).await.unwrap_err();
    assert!(why.contains("rest.flamegraph.enabled: false"), "{why}");
}

#[tokio::test]
async fn a_vertex_id_that_is_not_32_hex_digits_sends_nothing() {
    let server = MockServer::start().await;
    let rest = client(&server);
    let why = rest.flamegraph_within(JOB, "../../x", ProfileKind::Full, Duration::from_secs(1)).await.unwrap_err();
    assert!(why.contains("32 hexadecimal digits"), "{why}");
    assert_eq!(rest.requests(), 0);
}

fn culprit(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_culprit")).args(args).output().expect("the binary runs")
}

#[test]
fn diagnose_with_the_recorded_flame_graph_puts_the_top_frame_of_the_chain_with_its_user_function_and_operator_in_the_verdict()
 {
    let dir = capture_dir();
    let (recording, plan, flamegraph) = (
        dir.join("recording.om.gz"),
        dir.join("plan.json"),
        format!("off_cpu={}", dir.join("rest/vertex-1-enrich_-_score-flamegraph-off_cpu.json").display()),
    );
    let out = culprit(&[
        "diagnose",
        "--recording",
        recording.to_str().unwrap(),
        "--plan",
        plan.to_str().unwrap(),
        "--flamegraph",
        &flamegraph,
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["finding"], "headroom");
    let p = &v["profile"];
    assert_eq!(p["vertex_id"], VERTEX);
    assert_eq!(p["vertex_name"], "enrich -> score");
    assert_eq!(p["type"], "off_cpu");
    assert_eq!(p["samples"], 200);
    // Every one of the 200 samples ends in Unsafe.park (see model::flamegraph's tests for
    // the hand check): 200 / 200 = 1, under score's sleepMicros.
    assert_eq!(p["top_frames"][0]["frame"], "jdk.internal.misc.Unsafe.park:-2");
    assert_eq!(p["top_frames"][0]["self_samples"], 200);
    assert_eq!(p["top_frames"][0]["share_ratio"], 1.0);
    assert_eq!(p["top_frames"][0]["user_frame"], "lab.BackpressureLab.sleepMicros:109");
    // The user function the park runs in, the first job frame above Flink's StreamMap
    // frame, and the operator of the chain it is (ScoreMap holds "score").
    assert_eq!(p["top_frames"][0]["function"], "lab.BackpressureLab$ScoreMap.map:582");
    assert_eq!(p["top_frames"][0]["operator"], "score");

    let text = culprit(&[
        "diagnose",
        "--recording",
        recording.to_str().unwrap(),
        "--plan",
        plan.to_str().unwrap(),
        "--flamegraph",
        &flamegraph,
    ]);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("Profile of enrich -> score: top frames of 200 off-CPU samples"), "{text}");
    assert!(
        text.contains("- in ScoreMap.map (operator score): 100% (200 samples) at BackpressureLab.sleepMicros:109"),
        "{text}"
    );
}

#[test]
fn a_flame_graph_for_a_culprit_that_is_one_operator_is_not_used_and_a_note_says_so() {
    let slow_sink = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/captures/slow-sink");
    let fg =
        format!("off_cpu={}", capture_dir().join("rest/vertex-1-enrich_-_score-flamegraph-off_cpu.json").display());
    let out = culprit(&[
        "diagnose",
        "--recording",
        slow_sink.join("recording.om.gz").to_str().unwrap(),
        "--plan",
        slow_sink.join("plan.json").to_str().unwrap(),
        "--flamegraph",
        &fg,
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["culprit"]["operators"].as_array().map(Vec::len), Some(1), "slow-sink's culprit is one operator");
    assert!(v.get("profile").is_none());
    assert!(
        v["notes"].as_array().unwrap().iter().any(|n| n.as_str().unwrap().contains("--flamegraph file was not used"))
    );
}

/// The offline verdict of the capture (recording and plan), for its time.
fn recorded_at_ms(dir: &Path) -> i64 {
    use culprit::collect::collector::{CollectInput, collect};
    let mut store = culprit::collect::store::SeriesStore::new();
    store.read_path(&dir.join("recording.om.gz"), None).unwrap();
    store.finish();
    let config = culprit::config::Config::default();
    let plan = std::fs::read_to_string(dir.join("plan.json")).unwrap();
    let graph = culprit::model::graph::JobGraph::from_plan_json(&plan).unwrap();
    let request = culprit::model::request::DiagnosisRequest::default();
    let input = CollectInput {
        request: &request,
        graph: Some(graph),
        checkpoint_config: None,
        exceptions: None,
        rescales: None,
        config: &config,
        catalog: &config.metrics,
    };
    let snapshot = culprit::collect::block_on(collect(&store, input)).unwrap();
    let v = culprit::render::words::verdict(&culprit::diagnose::diagnose(&snapshot, &config.diagnosis));
    v.at.parse::<jiff::Timestamp>().unwrap().as_millisecond()
}

async fn live_verdict(flamegraph: bool, expected_requests: u64) -> culprit::model::verdict::Verdict {
    let dir = capture_dir();
    let at = recorded_at_ms(&dir);
    let prom = support::prometheus_with(&dir.join("recording.om.gz"));
    let flink = support::flink_rest_for(&dir).await;
    Mock::given(method("GET"))
        .and(path(flamegraph_path()))
        .and(query_param("type", "full"))
        .respond_with(answer(r#"{"endTimestamp":-3}"#))
        .up_to_n_times(1)
        .mount(&flink)
        .await;
    Mock::given(method("GET"))
        .and(path(flamegraph_path()))
        .and(query_param("type", "full"))
        .respond_with(answer(&recorded()))
        .mount(&flink)
        .await;
    let toml = format!(
        "[prometheus]\nurl = \"{}\"\n[flink]\nflamegraph = {flamegraph}\nflamegraph_deadline = \"1s\"\n[[flink.clusters]]\nname = \"lab\"\nrest_url = \"{}\"\n",
        prom.url,
        flink.uri()
    );
    let config = culprit::config::Config::from_toml(&toml, "culprit.toml").unwrap();
    let live = culprit::service::pipeline::Live::new(config).unwrap();
    let request = culprit::model::request::DiagnosisRequest {
        job: Some("bp-lab-chained-culprit-flamegraph".into()),
        at_ms: Some(at),
        ..Default::default()
    };
    let v = live.diagnose(&request, &Default::default(), at).await.unwrap();
    let asked =
        flink.received_requests().await.unwrap().iter().filter(|r| r.url.path().ends_with("/flamegraph")).count()
            as u64;
    assert_eq!(asked, expected_requests, "flame graph requests");
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_diagnosis_with_flamegraph_on_profiles_the_chained_culprit_in_two_requests() {
    // The first answer is Flink's "waiting" (-3), the second the recorded graph: 2 requests.
    let v = live_verdict(true, 2).await;
    assert_eq!(v.culprit.as_ref().unwrap().vertex_id, VERTEX, "{}", v.summary);
    let p = v.profile.expect("a profile");
    assert_eq!((p.vertex_id.as_str(), p.kind, p.samples), (VERTEX, ProfileKind::Full, 200));
    assert_eq!(p.top_frames[0].frame, "jdk.internal.misc.Unsafe.park:-2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_diagnosis_with_flamegraph_off_sends_no_flame_graph_request() {
    let v = live_verdict(false, 0).await;
    assert_eq!(v.culprit.as_ref().unwrap().vertex_id, VERTEX, "{}", v.summary);
    assert!(v.profile.is_none());
}

#[test]
fn frame_names_from_flink_are_escaped_in_text_markdown_and_the_page() {
    use culprit::model::flamegraph::{Profile, TopFrame};
    use culprit::render::{Format, render};
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/captures/slow-sink");
    let out = culprit(&[
        "diagnose",
        "--recording",
        dir.join("recording.om.gz").to_str().unwrap(),
        "--plan",
        dir.join("plan.json").to_str().unwrap(),
        "--format",
        "json",
    ]);
    let mut v: culprit::model::verdict::Verdict = serde_json::from_slice(&out.stdout).unwrap();
    let hostile = "<script>x</script>|*b*\u{1b}[31m";
    v.profile = Some(Profile {
        vertex_id: VERTEX.into(),
        vertex_name: "a <b> vertex".into(),
        kind: ProfileKind::OffCpu,
        samples: 4,
        at: None,
        top_frames: vec![TopFrame {
            frame: hostile.into(),
            self_samples: 3,
            share_ratio: 0.75,
            user_frame: Some(format!("lab.{hostile}")),
            function: Some(format!("lab.Job${hostile}.map:1")),
            operator: Some(format!("op {hostile}")),
        }],
    });
    let page = render(&v, Format::Html);
    assert!(!page.contains("<script>") && !page.contains('\u{1b}'), "the page carries markup");
    assert!(page.contains("<code>&lt;script&gt;x&lt;/script&gt;|*b*"), "frame table missing");
    // 3 of 4 samples: 75%.
    assert!(page.contains("<td>3</td><td>75%</td>"), "share missing");
    let md = render(&v, Format::Markdown);
    assert!(md.contains("\\<script\\>x\\</script\\>\\|\\*b\\*"), "{md}");
    // The function and its operator, escaped alike.
    assert!(page.contains("(op &lt;script&gt;x&lt;/script&gt;|*b*"), "operator missing");
    assert!(md.contains("(operator op \\<script\\>x\\</script\\>"), "{md}");
    assert!(md.contains("#### Profile of a \\<b\\> vertex: top frames of 4 off-CPU samples"), "{md}");
    let text = render(&v, Format::Text);
    assert!(!text.contains('\u{1b}'), "{text}");
    assert!(text.contains("Profile of a <b> vertex: top frames of 4 off-CPU samples"), "{text}");
}

#[test]
fn a_verdict_without_a_profile_renders_no_profile_section() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/captures/slow-sink");
    let base = |format: &str| {
        let out = culprit(&[
            "diagnose",
            "--recording",
            dir.join("recording.om.gz").to_str().unwrap(),
            "--plan",
            dir.join("plan.json").to_str().unwrap(),
            "--format",
            format,
        ]);
        String::from_utf8(out.stdout).unwrap()
    };
    for format in ["text", "markdown", "html", "json"] {
        let s = base(format);
        assert!(!s.contains("Profile of") && !s.contains("\"profile\""), "{format}: {s}");
    }
}

#[test]
fn a_profile_is_wanted_for_an_unexplained_finding_or_a_chained_culprit_only() {
    use culprit::model::flamegraph::wants_profile;
    use culprit::model::verdict::Finding;
    let capture = |name: &str| {
        let c = culprit::samples::captures::CAPTURES.iter().find(|c| c.name == name).unwrap();
        culprit::samples::captures::verdict(c).unwrap()
    };
    // chained-culprit: headroom on `enrich -> score`, two operators.
    let chained = capture("chained-culprit");
    assert_eq!(chained.culprit.as_ref().unwrap().operators.len(), 2);
    assert!(wants_profile(&chained).is_some());
    // slow-sink: one operator, finding sink.
    let mut single = capture("slow-sink");
    assert_eq!(single.culprit.as_ref().unwrap().operators.len(), 1);
    assert!(wants_profile(&single).is_none());
    single.finding = Finding::Unexplained;
    assert!(wants_profile(&single).is_some());
    // healthy: no culprit, nothing to profile.
    let mut healthy = capture("healthy");
    healthy.finding = Finding::Unexplained;
    assert!(healthy.culprit.is_none() && wants_profile(&healthy).is_none());
}

#[test]
fn a_flamegraph_file_that_is_not_one_is_bad_input_naming_the_file() {
    let dir = capture_dir();
    let plan = dir.join("plan.json");
    // The plan is JSON but no flame graph (no `endTimestamp`).
    let out = culprit(&[
        "diagnose",
        "--recording",
        dir.join("recording.om.gz").to_str().unwrap(),
        "--plan",
        plan.to_str().unwrap(),
        "--flamegraph",
        &format!("off_cpu={}", plan.display()),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("plan.json") && stderr.contains("not a Flink flame graph"), "{stderr}");
    assert!(out.stdout.is_empty());
}
