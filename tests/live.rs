//! Live diagnosis against real backends: for every capture, Prometheus (backfilled with
//! promtool) and VictoriaMetrics (imported) give the verdict the recording gives.

mod support;

use std::path::Path;

use culprit::collect::block_on;
use culprit::collect::collector::{CollectInput, collect};
use culprit::collect::prometheus::{PromSource, Prometheus};
use culprit::collect::store::SeriesStore;
use culprit::config::{Config, Millis, PrometheusConfig};
use culprit::diagnose::diagnose;
use culprit::model::graph::JobGraph;
use culprit::model::request::DiagnosisRequest;
use culprit::model::verdict::Verdict;
use serde_json::Value;

fn recording_verdict(dir: &Path) -> Verdict {
    let mut store = SeriesStore::new();
    store.read_path(&dir.join("recording.om.gz"), None).unwrap();
    store.finish();
    let config = Config::default();
    let graph = JobGraph::from_plan_json(&std::fs::read_to_string(dir.join("plan.json")).unwrap()).unwrap();
    let snapshot = block_on(collect(
        &store,
        CollectInput {
            request: &DiagnosisRequest::default(),
            graph: Some(graph),
            checkpoint_config: None,
            exceptions: None,
            rescales: None,
            config: &config,
            catalog: &config.metrics,
        },
    ))
    .unwrap();
    culprit::render::words::verdict(&diagnose(&snapshot, &config.diagnosis))
}

async fn live_verdict(url: &str, dir: &Path, at_ms: i64, job: &str) -> (Verdict, u64) {
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
    let source = PromSource::new(&prom, at_ms);
    let graph = JobGraph::from_plan_json(&std::fs::read_to_string(dir.join("plan.json")).unwrap()).unwrap();
    let request =
        DiagnosisRequest { job: Some(job.to_string()), at_ms: Some(at_ms), window_ms: None, ..Default::default() };
    let snapshot = collect(
        &source,
        CollectInput {
            request: &request,
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
    (culprit::render::words::verdict(&diagnose(&snapshot, &config.diagnosis)), prom.requests())
}

fn at_of(v: &Verdict) -> i64 {
    v.at.parse::<jiff::Timestamp>().unwrap().as_millisecond()
}

/// Equal JSON, numbers within a relative 1e-3 (Prometheus' float sums differ in the last
/// bits), strings equal.
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_gives_every_capture_the_verdict_of_its_recording() {
    for dir in support::captures() {
        let expected = recording_verdict(&dir);
        let server = support::prometheus_with(&dir.join("recording.om.gz"));
        let (live, requests) = live_verdict(&server.url, &dir, at_of(&expected), &expected.job.id).await;
        assert_same(
            &serde_json::to_value(&expected).unwrap(),
            &serde_json::to_value(&live).unwrap(),
            &dir.display().to_string(),
        );
        eprintln!("{}: {requests} requests", dir.display());
        assert!(requests <= 12, "{}: {requests} requests", dir.display());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn victoria_metrics_gives_every_capture_the_finding_of_its_recording() {
    // VictoriaMetrics computes rate() without extrapolation, so rates differ a little;
    // the decision must not.
    for dir in support::captures() {
        let expected = recording_verdict(&dir);
        let server = support::victoria_metrics_with(&dir.join("recording.om.gz"));
        let (live, _) = live_verdict(&server.url, &dir, at_of(&expected), &expected.job.id).await;
        let name = dir.display();
        assert_eq!(live.status, expected.status, "{name}: {}", live.summary);
        assert_eq!(live.finding, expected.finding, "{name}: {}", live.summary);
        assert_eq!(
            live.culprit.as_ref().map(|c| &c.vertex_id),
            expected.culprit.as_ref().map(|c| &c.vertex_id),
            "{name}"
        );
        let outcomes = |v: &Verdict| v.steps.iter().map(|s| s.outcome).collect::<Vec<_>>();
        assert_eq!(outcomes(&live), outcomes(&expected), "{name}");
        assert_eq!(live.hazards.len(), expected.hazards.len(), "{name}");
    }
}

fn write_config(dir: &Path, prometheus: &str, flink: &str) -> std::path::PathBuf {
    let path = dir.join("culprit.toml");
    std::fs::write(
        &path,
        format!("[prometheus]\nurl = \"{prometheus}\"\n\n[[flink.clusters]]\nname = \"lab\"\nrest_url = \"{flink}\"\n"),
    )
    .unwrap();
    path
}

/// A capture's recording in a real Prometheus and its Flink REST answers served, diagnosed
/// live by job name at the recording's time; with the recording's own verdict.
async fn live_by_name(capture: &str, job: &str) -> (Verdict, Verdict) {
    let dir = support::capture(capture);
    let expected = recording_verdict(&dir);
    let prom = support::prometheus_with(&dir.join("recording.om.gz"));
    let flink = support::flink_rest_for(&dir).await;
    let tmp = tempfile::tempdir().unwrap();
    let config = Config::load(&write_config(tmp.path(), &prom.url, &flink.uri())).unwrap();
    let live = culprit::service::pipeline::Live::new(config).unwrap();
    let request = DiagnosisRequest { job: Some(job.into()), at_ms: Some(at_of(&expected)), ..Default::default() };
    let v = live.diagnose(&request, &Default::default(), at_of(&expected)).await.unwrap();
    (v, expected)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_diagnosis_by_job_name_uses_flink_rest_for_the_graph_and_checkpoint_configuration() {
    let (v, expected) = live_by_name("slow-instance", "bp-lab-slow-instance").await;
    assert_eq!(v.finding, expected.finding, "{}", v.summary);
    assert_eq!(v.culprit.unwrap().vertex_id, "b6178eccb258469b79a723c7c5e49988");
    assert_eq!(v.job.name, "bp-lab-slow-instance");
    // As the recording's: a lab job this young has start-up samples in its window.
    assert_eq!(v.confidence, expected.confidence);
    // Flink REST answered: checkpoint interval from it, not estimated.
    let ckpt = v.steps.iter().find(|s| s.step.as_str() == "checkpoints").unwrap();
    assert!(!ckpt.detail.contains("estimated"), "{}", ckpt.detail);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_diagnosis_of_a_job_failing_over_names_the_task_that_throws_from_flink_rest() {
    // The failover capture in a real Prometheus (numRestarts 0 → 5) and its real exception
    // history served as Flink REST: the task that throws leads the verdict.
    let (v, _) = live_by_name("failover", "bp-lab-failover").await;
    assert_eq!((v.status.as_str(), v.finding.as_str()), ("culprit_found", "failing_over"), "{}", v.summary);
    assert_eq!(v.culprit.as_ref().unwrap().vertex_name, "validate");
    assert!(v.cause.contains("java.lang.IllegalStateException: lab failover"), "{}", v.cause);
    assert!(v.summary.contains("5 restarts"), "{}", v.summary);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_diagnosis_of_a_rescaled_job_reads_flinks_rescale_history_and_names_the_rescale_once() {
    // adaptive-rescale served as Flink REST: the history (the rescale and the first schedule)
    // and the details of the rescale, 4 → 2 for the sink.
    let dir = support::capture("adaptive-rescale");
    let expected = recording_verdict(&dir);
    let prom = support::prometheus_with(&dir.join("recording.om.gz"));
    let flink = support::flink_rest_for(&dir).await;
    let tmp = tempfile::tempdir().unwrap();
    let config = Config::load(&write_config(tmp.path(), &prom.url, &flink.uri())).unwrap();
    let live = culprit::service::pipeline::Live::new(config).unwrap();
    let request =
        DiagnosisRequest { job: Some("bp-lab-slow-sink".into()), at_ms: Some(at_of(&expected)), ..Default::default() };
    let v = live.diagnose(&request, &Default::default(), at_of(&expected)).await.unwrap();
    assert_eq!(v.culprit.as_ref().unwrap().vertex_name, "slow-sink: Writer", "{}", v.summary);
    assert!(
        v.summary.contains("was rescaled from 4 to 2 subtasks at 2026-12-03T13:23:45.905Z by the Adaptive scheduler: resource requirements changed."),
        "{}",
        v.summary
    );
    assert_eq!(v.summary.matches("rescale").count(), 1, "named once: {}", v.summary);
    assert!(v.fix[0].contains("the Adaptive scheduler made the cut"), "{}", v.fix[0]);
    let asked: Vec<String> =
        flink.received_requests().await.unwrap().iter().map(|r| r.url.path().to_string()).collect();
    assert!(asked.iter().any(|p| p.ends_with("/rescales/details/fa208db8c8c8624158e684f4d2d64fe2")), "{asked:?}");
    assert_eq!(asked.len(), 6, "jobs, plan, checkpoint config, exceptions, rescale history and details: {asked:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_flink_rest_the_live_diagnosis_runs_graph_free_and_says_so() {
    let dir = support::capture("slow-sink");
    let expected = recording_verdict(&dir);
    let prom = support::prometheus_with(&dir.join("recording.om.gz"));
    let tmp = tempfile::tempdir().unwrap();
    // A Flink REST address where nothing listens.
    let dead = format!("http://127.0.0.1:{}", support::free_port());
    let mut config = Config::load(&write_config(tmp.path(), &prom.url, &dead)).unwrap();
    config.flink.deadline = Millis::from_secs(1);
    config.flink.timeout = Millis::from_secs(1);
    let live = culprit::service::pipeline::Live::new(config).unwrap();
    let request = DiagnosisRequest {
        job: Some("bp_lab_slow_sink".into()),
        at_ms: Some(at_of(&expected)),
        window_ms: None,
        ..Default::default()
    };
    let v = live.diagnose(&request, &Default::default(), at_of(&expected)).await.unwrap();
    assert_eq!(v.culprit.as_ref().unwrap().vertex_id, "2e588ce1c86a9d46e2e85186773ce4fd", "{}", v.summary);
    assert_eq!(v.confidence.as_str(), "low");
    let notes = v.notes.join(" | ");
    assert!(notes.contains("Flink REST did not list the jobs") && notes.contains("No job graph"), "{notes}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_writes_flinks_rescale_history_and_its_replay_names_the_rescale_as_live_does() {
    let dir = support::capture("adaptive-rescale");
    let expected = recording_verdict(&dir);
    let at = at_of(&expected);
    let prom = support::prometheus_with(&dir.join("recording.om.gz"));
    let flink = support::flink_rest_for(&dir).await;
    let tmp = tempfile::tempdir().unwrap();
    let config_path = write_config(tmp.path(), &prom.url, &flink.uri());
    let (out, plan, rescales) =
        (tmp.path().join("bundle.om.gz"), tmp.path().join("plan.json"), tmp.path().join("rescales.json"));
    let args = culprit::cli::RecordArgs {
        job: "bp-lab-slow-sink".into(),
        lookback: "1h".into(),
        at: Some(expected.at.clone()),
        window: None,
        config: config_path.clone(),
        cluster: None,
        label: Vec::new(),
        out: out.clone(),
        plan_out: Some(plan.clone()),
        checkpoint_config_out: None,
        exceptions_out: None,
        rescales_out: Some(rescales.clone()),
    };
    let summary = culprit::cli::record_command(&args, at).await.unwrap_or_else(|e| panic!("{}", e.message));
    assert!(summary.contains(&format!("--rescales {}", rescales.display())), "{summary}");
    // What was written is the history Flink gave, with the details of its rescale.
    let written =
        culprit::model::rescales::RescaleHistory::from_rest_json(&std::fs::read_to_string(&rescales).unwrap()).unwrap();
    assert_eq!(written.entries.len(), 2);
    assert_eq!(written.entries[0].vertices.len(), 4, "the details' four vertices");

    let live = culprit::service::pipeline::Live::new(Config::load(&config_path).unwrap()).unwrap();
    let request = DiagnosisRequest { job: Some("bp-lab-slow-sink".into()), at_ms: Some(at), ..Default::default() };
    let live_verdict = live.diagnose(&request, &Default::default(), at).await.unwrap();
    let replay = culprit::cli::diagnose_command(
        &culprit::cli::DiagnoseArgs {
            recording: Some(out),
            metrics: Vec::new(),
            scrape: Vec::new(),
            flamegraph: None,
            flink: None,
            cluster: None,
            plan: Some(plan),
            job: None,
            label: Vec::new(),
            at: None,
            window: None,
            config: None,
            checkpoint_config: None,
            exceptions: None,
            rescales: Some(rescales),
            format: culprit::render::Format::Json,
        },
        0,
    )
    .unwrap_or_else(|e| panic!("{}", e.message));
    assert!(replay.summary.contains("by the Adaptive scheduler: resource requirements changed."), "{}", replay.summary);
    assert_eq!(replay.summary, live_verdict.summary);
    assert_eq!(replay.fix, live_verdict.fix);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recording_written_by_record_replays_to_the_live_verdict_and_holds_only_its_job() {
    let dir = support::capture("rocksdb-stall");
    let expected = recording_verdict(&dir);
    let at = at_of(&expected);
    // rocksdb-bound ran ~55 min earlier: its series are inside the 1 h lookback of the job
    // lookup, and must not end up in rocksdb-stall's bundle.
    let text = |name: &str| {
        let om = tempfile::NamedTempFile::new().unwrap();
        support::gunzip(&support::capture(name).join("recording.om.gz"), om.path());
        std::fs::read_to_string(om.path()).unwrap()
    };
    let prom = support::prometheus_with_texts(&[text("rocksdb-stall"), text("rocksdb-bound")], support::free_port());
    let flink = support::flink_rest_for(&dir).await;
    let tmp = tempfile::tempdir().unwrap();
    let config_path = write_config(tmp.path(), &prom.url, &flink.uri());
    let out = tmp.path().join("bundle.om.gz");
    let plan = tmp.path().join("plan.json");
    let ckpt = tmp.path().join("checkpoints-config.json");
    let exceptions = tmp.path().join("exceptions.json");
    let args = culprit::cli::RecordArgs {
        job: "bp-lab-rocksdb-stall".into(),
        lookback: "1h".into(),
        at: Some(expected.at.clone()),
        window: None,
        config: config_path.clone(),
        cluster: None,
        label: Vec::new(),
        out: out.clone(),
        plan_out: Some(plan.clone()),
        checkpoint_config_out: Some(ckpt.clone()),
        exceptions_out: Some(exceptions.clone()),
        rescales_out: None,
    };
    let summary = culprit::cli::record_command(&args, at).await.unwrap_or_else(|e| panic!("{}", e.message));
    assert!(summary.contains("replay: culprit diagnose --recording"), "{summary}");
    let bundle = tempfile::NamedTempFile::new().unwrap();
    support::gunzip(&out, bundle.path());
    let bundle = std::fs::read_to_string(bundle.path()).unwrap();
    let job_ids: std::collections::BTreeSet<&str> =
        bundle.match_indices("job_id=\"").map(|(i, m)| &bundle[i + m.len()..i + m.len() + 32]).collect();
    assert_eq!(job_ids.len(), 1, "one job in the bundle: {job_ids:?}");
    assert!(bundle.contains("bp_lab_rocksdb_stall") && !bundle.contains("bp_lab_rocksdb_bound"));

    let live = culprit::service::pipeline::Live::new(Config::load(&config_path).unwrap()).unwrap();
    let request = DiagnosisRequest {
        job: Some("bp-lab-rocksdb-stall".into()),
        at_ms: Some(at),
        window_ms: None,
        ..Default::default()
    };
    let live_verdict = live.diagnose(&request, &Default::default(), at).await.unwrap();

    let replay = culprit::cli::diagnose_command(
        &culprit::cli::DiagnoseArgs {
            recording: Some(out),
            metrics: Vec::new(),
            scrape: Vec::new(),
            flamegraph: None,
            flink: None,
            cluster: None,
            plan: Some(plan),
            job: None,
            label: Vec::new(),
            at: None,
            window: None,
            config: None,
            checkpoint_config: Some(ckpt),
            exceptions: Some(exceptions),
            rescales: None,
            format: culprit::render::Format::Json,
        },
        0,
    )
    .unwrap_or_else(|e| panic!("{}", e.message));
    let mut a = serde_json::to_value(&live_verdict).unwrap();
    let mut b = serde_json::to_value(&replay).unwrap();
    // Notes say how each was taken (REST, file); everything else must match.
    a["notes"] = Value::Null;
    b["notes"] = Value::Null;
    assert_same(&a, &b, "record → replay");
    assert_eq!(replay.finding.as_str(), "state_backend");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scraping_the_reporters_directly_finds_the_culprit_without_prometheus() {
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, ResponseTemplate};
    let dir = support::capture("hot-key");
    let flink = support::flink_rest_for(&dir).await;
    let reporters = wiremock::MockServer::start().await;
    for f in ["jm", "tm1", "tm2"] {
        Mock::given(method("GET"))
            .and(path(format!("/{f}/metrics")))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_raw(std::fs::read(dir.join(format!("metrics/{f}.prom"))).unwrap(), "text/plain"),
            )
            .mount(&reporters)
            .await;
    }
    let args = culprit::cli::DiagnoseArgs {
        recording: None,
        metrics: Vec::new(),
        scrape: ["jm", "tm1", "tm2"].iter().map(|f| format!("{}/{f}/metrics", reporters.uri())).collect(),
        flamegraph: None,
        flink: Some(flink.uri()),
        cluster: None,
        plan: None,
        job: Some("bp-lab-hot-key".into()),
        label: Vec::new(),
        at: None,
        window: None,
        config: None,
        checkpoint_config: None,
        exceptions: None,
        rescales: None,
        format: culprit::render::Format::Json,
    };
    let v =
        culprit::cli::diagnose_live_command(&args, 1_795_960_000_000).await.unwrap_or_else(|e| panic!("{}", e.message));
    assert_eq!(v.finding.as_str(), "hot_key", "{}", v.summary);
    assert_eq!(v.culprit.unwrap().subtasks, vec![0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_diagnosis_of_a_100_vertex_64_subtask_job_sends_at_most_12_requests() {
    use culprit::samples::synthetic::SyntheticJob;
    // 100 vertices × 64 subtasks × 4 task metrics × 12 samples, backfilled.
    let job = SyntheticJob { vertices: 100, subtasks: 64, samples: 12, start_ms: 1_795_000_000_000, job: 0 };
    let tmp = tempfile::tempdir().unwrap();
    let rec = tmp.path().join("job.om");
    job.write_openmetrics(std::fs::File::create(&rec).unwrap()).unwrap();
    let server = support::prometheus_with(&rec);
    let config = Config::default();
    let prom = Prometheus::new(&PrometheusConfig {
        url: server.url.clone(),
        timeout: Millis::from_secs(30),
        deadline: Millis::from_secs(60),
        auth: None,
        tenant: None,
        max_answer_bytes: culprit::collect::prometheus::MAX_ANSWER_BYTES,
        max_answer_bytes_in_flight: culprit::config::PROMETHEUS_MAX_ANSWER_BYTES_IN_FLIGHT,
        max_concurrency: culprit::config::PROMETHEUS_MAX_CONCURRENCY,
    })
    .unwrap();
    // The last sample is at start + 11 × 5 s.
    let at = job.start_ms + 55_000;
    let source = PromSource::new(&prom, at);
    let request =
        DiagnosisRequest { job: Some("synthetic-job".into()), at_ms: Some(at), window_ms: None, ..Default::default() };
    let snapshot = collect(
        &source,
        CollectInput {
            request: &request,
            graph: Some(JobGraph::from_plan_json(&job.plan_json()).unwrap()),
            checkpoint_config: None,
            exceptions: None,
            rescales: None,
            config: &config,
            catalog: &config.metrics,
        },
    )
    .await
    .unwrap();
    let v = culprit::render::words::verdict(&diagnose(&snapshot, &config.diagnosis));
    assert_eq!(v.culprit.unwrap().vertex_id, SyntheticJob::vertex_id(50), "{}", v.summary);
    let requests = prom.requests();
    eprintln!("100 × 64 job: {requests} requests");
    assert!(requests <= 12, "{requests} requests");
    // Only the vertices the steps look into have per-subtask detail: the culprit (and the
    // busiest, the same vertex here), not the 99 others.
    let detailed: std::collections::BTreeSet<&str> = snapshot.subtasks.iter().map(|s| s.vertex_id.as_str()).collect();
    assert_eq!(detailed.len(), 1, "{detailed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_names_reach_promql_escaped_and_select_only_their_own_series() {
    use culprit::samples::synthetic::SyntheticJob;
    let hostile = r#"g"} or vector(1) or {job_id=~".+"#;
    let job = SyntheticJob { vertices: 3, subtasks: 2, samples: 12, start_ms: 1_795_000_000_000, job: 0 };
    let mut text = String::from_utf8(job.write_openmetrics(Vec::new()).unwrap()).unwrap();
    text.truncate(text.rfind("# EOF").unwrap());
    text.push_str("# TYPE kafka_consumergroup_lag gauge\n");
    let escaped = hostile.replace('\\', "\\\\").replace('"', "\\\"");
    for k in 0..12 {
        let t = (job.start_ms + k * 5_000) as f64 / 1000.0;
        text.push_str(&format!(
            "kafka_consumergroup_lag{{consumergroup=\"{escaped}\",topic=\"t\",partition=\"0\"}} {} {t:.3}\n",
            100 + k
        ));
        text.push_str(&format!(
            "kafka_consumergroup_lag{{consumergroup=\"decoy\",topic=\"decoy-topic\",partition=\"0\"}} {} {t:.3}\n",
            9000 + k
        ));
    }
    text.push_str("# EOF\n");
    let tmp = tempfile::tempdir().unwrap();
    let rec = tmp.path().join("job.om");
    std::fs::write(&rec, text).unwrap();
    let server = support::prometheus_with(&rec);

    let mut config = Config::default();
    config.kafka.jobs.push(culprit::config::KafkaJob {
        job: "synthetic-job".into(),
        consumer_group: Some(hostile.into()),
        topics: Vec::new(),
    });
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
    let at = job.start_ms + 55_000;
    let source = PromSource::new(&prom, at);
    let graph = Some(JobGraph::from_plan_json(&job.plan_json()).unwrap());
    let request =
        DiagnosisRequest { job: Some("synthetic-job".into()), at_ms: Some(at), window_ms: None, ..Default::default() };
    let snapshot = collect(
        &source,
        CollectInput {
            request: &request,
            graph: graph.clone(),
            checkpoint_config: None,
            exceptions: None,
            rescales: None,
            config: &config,
            catalog: &config.metrics,
        },
    )
    .await
    .unwrap();
    assert!(snapshot.missing.iter().all(|m| !m.why.is_query_failure()), "{:?}", snapshot.missing);
    let topics: Vec<&str> = snapshot.partitions.iter().map(|p| p.topic.as_str()).collect();
    assert_eq!(topics, ["t"], "only the hostile group's own partition");
    assert_eq!(snapshot.partitions[0].consumer_group, hostile);

    // A hostile job name given directly selects nothing and says so.
    let request = DiagnosisRequest {
        job: Some(r#"x"} or vector(1) or {""#.into()),
        at_ms: Some(at),
        window_ms: None,
        ..Default::default()
    };
    let err = collect(
        &source,
        CollectInput {
            request: &request,
            graph,
            checkpoint_config: None,
            exceptions: None,
            rescales: None,
            config: &config,
            catalog: &config.metrics,
        },
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("no Flink job named"), "{err}");
}

/// A live diagnosis of `job` at `at` through `url`: the snapshot and the verdict.
async fn snapshot_through(
    url: &str,
    job: &culprit::samples::synthetic::SyntheticJob,
    at: i64,
    with_graph: bool,
) -> (culprit::model::snapshot::Snapshot, Verdict) {
    let config = Config::default();
    let prom = Prometheus::new(&PrometheusConfig {
        url: url.to_string(),
        timeout: Millis::from_secs(30),
        deadline: Millis::from_secs(60),
        auth: None,
        tenant: None,
        max_answer_bytes: culprit::collect::prometheus::MAX_ANSWER_BYTES,
        max_answer_bytes_in_flight: culprit::config::PROMETHEUS_MAX_ANSWER_BYTES_IN_FLIGHT,
        max_concurrency: culprit::config::PROMETHEUS_MAX_CONCURRENCY,
    })
    .unwrap();
    let source = PromSource::new(&prom, at);
    let request =
        DiagnosisRequest { job: Some("synthetic-job".into()), at_ms: Some(at), window_ms: None, ..Default::default() };
    let graph = with_graph.then(|| JobGraph::from_plan_json(&job.plan_json()).unwrap());
    let snapshot = collect(
        &source,
        CollectInput {
            request: &request,
            graph,
            checkpoint_config: None,
            exceptions: None,
            rescales: None,
            config: &config,
            catalog: &config.metrics,
        },
    )
    .await
    .unwrap();
    let verdict = culprit::render::words::verdict(&diagnose(&snapshot, &config.diagnosis));
    (snapshot, verdict)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_refusing_large_queries_gets_smaller_ones_and_the_same_verdict_or_says_what_is_missing() {
    use culprit::samples::synthetic::SyntheticJob;
    // 12 vertices × 8 subtasks, 5 min at 5 s: 96 series per task metric.
    let job = SyntheticJob { vertices: 12, subtasks: 8, samples: 60, start_ms: 1_795_000_000_000, job: 0 };
    let tmp = tempfile::tempdir().unwrap();
    let rec = tmp.path().join("job.om");
    job.write_openmetrics(std::fs::File::create(&rec).unwrap()).unwrap();
    let server = support::prometheus_with(&rec);
    let at = job.start_ms + 59 * 5_000;
    let (direct, expected) = snapshot_through(&server.url, &job, at, true).await;
    assert!(direct.notes.iter().all(|n| !n.contains("refused")), "{:?}", direct.notes);

    // Mimir-like: at most 20 series per query (two or three vertices), and at most 200
    // evaluations per range query (the 1 h trend at 5 s has 721).
    for with_graph in [true, false] {
        let limits = support::limits::start(&server.url, 20, 200).await;
        let (snapshot, live) = snapshot_through(&limits.url, &job, at, with_graph).await;
        let refused = limits.asked().iter().filter(|a| a.refused.is_some()).count();
        assert!(refused > 0, "the limits were hit");
        assert!(snapshot.missing.iter().all(|m| !m.why.is_query_failure()), "{:?}", snapshot.missing);
        assert!(snapshot.notes.iter().any(|n| n.contains("as too large")), "{:?}", snapshot.notes);
        if with_graph {
            let mut a = serde_json::to_value(&expected).unwrap();
            let mut b = serde_json::to_value(&live).unwrap();
            a["notes"] = Value::Null;
            b["notes"] = Value::Null;
            assert_same(&a, &b, "limited");
        } else {
            assert_eq!(live.culprit.as_ref().map(|c| c.vertex_id.clone()), Some(SyntheticJob::vertex_id(6)));
        }
        eprintln!("graph {with_graph}: {} requests, {refused} refused", limits.asked().len());
    }

    // At most 4 series: one vertex of 8 subtasks is already too many. The per-vertex
    // signals are given up with the reason, never answered in part.
    let limits = support::limits::start(&server.url, 4, 200).await;
    let (snapshot, _) = snapshot_through(&limits.url, &job, at, true).await;
    let refused: Vec<&culprit::model::snapshot::Missing> = snapshot
        .missing
        .iter()
        .filter(|m| culprit::render::words::missing::why(&m.why).contains("refused even for vertex"))
        .collect();
    assert!(!refused.is_empty(), "{:?}", snapshot.missing);
    assert!(snapshot.vertex_aggregates.iter().all(|a| a.busy_max.is_none()), "no partial busy time");
}

/// A config whose one Flink cluster is reached through `rest_url_template` on the stub at
/// `base` (one server standing in for every Kubernetes service, one path prefix each).
fn templated_config(dir: &Path, prometheus: &str, base: &str, template_labels: &str) -> Config {
    // A template's host must be a DNS name, never an IP address: the stub by name.
    let base = base.replace("://127.0.0.1:", "://localhost:");
    let path = dir.join("culprit.toml");
    std::fs::write(
        &path,
        format!(
            "[prometheus]\nurl = \"{prometheus}\"\n\n[[flink.clusters]]\nname = \"k8s\"\nrest_url_template = \"{base}/{{deployment}}-rest.{{namespace}}\"\n{template_labels}"
        ),
    )
    .unwrap();
    let mut config = Config::load(&path).unwrap();
    config.flink.deadline = Millis::from_secs(2);
    config.flink.timeout = Millis::from_secs(1);
    config
}

fn alert_labels(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_kubernetes_the_rest_url_follows_from_the_alerts_labels_and_hostile_values_never_reach_a_url() {
    let dir = support::capture("slow-instance");
    let expected = recording_verdict(&dir);
    let prom = support::prometheus_with(&dir.join("recording.om.gz"));
    // The operator's service `<deployment>-rest.<namespace>`, as a path under the stub.
    let flink = support::flink_rest_under(&dir, "/fraud-scoring-rest.payments").await;
    let tmp = tempfile::tempdir().unwrap();
    let live =
        culprit::service::pipeline::Live::new(templated_config(tmp.path(), &prom.url, &flink.uri(), "")).unwrap();
    let request = DiagnosisRequest {
        job: Some("bp-lab-slow-instance".into()),
        at_ms: Some(at_of(&expected)),
        ..Default::default()
    };
    // Defaults: {deployment} ← the alert's `app`, {namespace} ← its `namespace`.
    let labels = alert_labels(&[("app", "fraud-scoring"), ("namespace", "payments")]);
    let v = live.diagnose(&request, &labels, at_of(&expected)).await.unwrap();
    assert_eq!(v.culprit.as_ref().unwrap().vertex_id, "b6178eccb258469b79a723c7c5e49988", "{}", v.summary);
    let ckpt = v.steps.iter().find(|s| s.step.as_str() == "checkpoints").unwrap();
    assert!(!ckpt.detail.contains("estimated"), "Flink REST answered: {}", ckpt.detail);
    let asked: Vec<String> =
        flink.received_requests().await.unwrap().iter().map(|r| r.url.path().to_string()).collect();
    assert!(asked.iter().all(|p| p.starts_with("/fraud-scoring-rest.payments/jobs/")), "{asked:?}");
    // The capture has no rescale history: its request is answered 404, and no details asked.
    assert_eq!(asked.len(), 5, "jobs, plan, checkpoint config, exceptions, rescale history: {asked:?}");

    // A value that would add a host, a port or a path is refused before any URL is built.
    for hostile in ["evil.example:80/x", "a@evil.example", "fraud-scoring/../admin", "Fraud"] {
        let labels = alert_labels(&[("app", hostile), ("namespace", "payments")]);
        let v = live.diagnose(&request, &labels, at_of(&expected)).await.unwrap();
        let note = v.notes.iter().find(|n| n.contains("no REST URL")).unwrap_or_else(|| panic!("{:#?}", v.notes));
        assert!(note.contains("is not a DNS label") && note.contains("`app`"), "{note}");
        assert!(v.notes.iter().any(|n| n.contains("No job graph")), "graph-free: {:#?}", v.notes);
    }
    // The one good diagnosis above: jobs, plan, checkpoint config, exceptions, rescale history.
    assert_eq!(flink.received_requests().await.unwrap().len(), 5, "no request for a hostile value");
}

/// A canary: a real socket on 127.0.0.1 that answers every request 500 with a secret and
/// counts the requests (one line each, the request's `Host`).
async fn canary() -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let n = socket.read(&mut buf).await.unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]).to_string();
                let host =
                    head.lines().find(|l| l.to_ascii_lowercase().starts_with("host:")).unwrap_or("?").to_string();
                log.lock().unwrap().push(host);
                let body = r#"{"errors":["SECRET-METADATA-TOKEN=AKIAXXXXEXFIL"]}"#;
                let answer = format!(
                    "HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            });
        }
    });
    (port, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_label_that_url_parsers_read_as_an_ip_address_never_reaches_a_request_nor_its_answer_a_note() {
    let dir = support::capture("slow-instance");
    let expected = recording_verdict(&dir);
    let prom = support::prometheus_with(&dir.join("recording.om.gz"));
    let (port, seen) = canary().await;
    // The report's template: the host is one placeholder (REPORT D5).
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("culprit.toml");
    let text = format!(
        "[prometheus]\nurl = \"{}\"\n[flink]\ntimeout = \"1s\"\ndeadline = \"1s\"\n[[flink.clusters]]\nname = \"k8s\"\nrest_url_template = \"http://{{deployment}}:{port}\"\n",
        prom.url
    );
    std::fs::write(&path, text).unwrap();
    let live = culprit::service::pipeline::Live::new(Config::load(&path).unwrap()).unwrap();
    let request = DiagnosisRequest {
        job: Some("bp-lab-slow-instance".into()),
        at_ms: Some(at_of(&expected)),
        ..Default::default()
    };
    // 2130706433 = 127.0.0.1, 0x7f000001 the same in hex, 0177 = 127 in octal, 0 = 0.0.0.0
    // (all reach this canary if asked); 2852039166 = 169.254.169.254.
    for numeric in ["2130706433", "0x7f000001", "0177", "0", "2852039166"] {
        let v = live.diagnose(&request, &alert_labels(&[("app", numeric)]), at_of(&expected)).await.unwrap();
        let note = v.notes.iter().find(|n| n.contains("no REST URL")).unwrap_or_else(|| panic!("{:#?}", v.notes));
        assert!(note.contains("is a number") && note.contains("`app`"), "{note}");
    }
    assert_eq!(*seen.lock().unwrap(), Vec::<String>::new(), "no request reached the canary");
    // The canary works: a DNS name that resolves to it is asked, and what it answers (a
    // 500 with a secret) stays out of the verdict, which says the status (REPORT D6).
    let v = live.diagnose(&request, &alert_labels(&[("app", "localhost")]), at_of(&expected)).await.unwrap();
    assert!(!seen.lock().unwrap().is_empty(), "localhost is asked");
    let verdict = serde_json::to_string(&v).unwrap();
    assert!(!verdict.contains("SECRET-METADATA"), "{verdict}");
    assert!(v.notes.iter().any(|n| n.contains("HTTP 500 Internal Server Error")), "{:#?}", v.notes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_label_the_alert_lacks_is_read_from_the_jobs_series_and_checked_the_same_way() {
    let dir = support::capture("slow-instance");
    let expected = recording_verdict(&dir);
    let prom = support::prometheus_with(&dir.join("recording.om.gz"));
    // The JobManager's series carry flink_role="jobmanager" and host="127_0_0_1".
    let flink = support::flink_rest_under(&dir, "/jobmanager-rest.lab").await;
    let tmp = tempfile::tempdir().unwrap();
    let request = DiagnosisRequest {
        job: Some("bp-lab-slow-instance".into()),
        at_ms: Some(at_of(&expected)),
        ..Default::default()
    };
    let labels = alert_labels(&[("namespace", "lab")]);
    let config =
        templated_config(tmp.path(), &prom.url, &flink.uri(), "template_labels = { deployment = \"flink_role\" }\n");
    let v = culprit::service::pipeline::Live::new(config).unwrap().diagnose(&request, &labels, at_of(&expected)).await;
    let v = v.unwrap();
    assert!(!v.notes.iter().any(|n| n.contains("no REST URL") || n.contains("No job graph")), "{:#?}", v.notes);
    // jobs, plan, checkpoint config, exceptions, rescale history.
    assert_eq!(flink.received_requests().await.unwrap().len(), 5);
    // `host` = "127_0_0_1" holds underscores: not a DNS label, refused.
    let config = templated_config(tmp.path(), &prom.url, &flink.uri(), "template_labels = { deployment = \"host\" }\n");
    let v = culprit::service::pipeline::Live::new(config).unwrap().diagnose(&request, &labels, at_of(&expected)).await;
    let note = v.unwrap().notes.into_iter().find(|n| n.contains("no REST URL")).expect("refused");
    assert!(note.contains("\"127_0_0_1\"") && note.contains("is not a DNS label"), "{note}");
    // jobs, plan, checkpoint config, exceptions, rescale history.
    assert_eq!(flink.received_requests().await.unwrap().len(), 5);
}

/// The job's runs are looked up once per diagnosis, however many parts need the run: the
/// labels a Flink REST URL template lacks (read from the job's JobManager series), the
/// configured plan of the job (`[flink.plans]`, used here because this Flink REST has no
/// such job), and the collector's first round. Each used to ask Prometheus again: three
/// uptime lookups. A real Prometheus behind a logging proxy (tests/support/limits.rs with
/// no limits) counts them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_jobs_runs_are_looked_up_once_per_diagnosis() {
    let dir = support::capture("slow-instance");
    let expected = recording_verdict(&dir);
    let prom = support::prometheus_with(&dir.join("recording.om.gz"));
    let proxy = support::limits::start(&prom.url, usize::MAX, i64::MAX).await;
    // The URL the template gives (`/jobmanager-rest.lab`) is not served: no job graph from
    // Flink REST, so the configured plan is looked up.
    let flink = support::flink_rest_under(&dir, "/elsewhere").await;
    let tmp = tempfile::tempdir().unwrap();
    let plans = format!(
        "template_labels = {{ deployment = \"flink_role\" }}\n[flink.plans]\n\"bp-lab-slow-instance\" = \"{}\"\n",
        dir.join("rest/plan.json").display()
    );
    let config = templated_config(tmp.path(), &proxy.url, &flink.uri(), &plans);
    let lookup = culprit::collect::query::Query::Range {
        selector: culprit::collect::query::Selector::metric(&config.metrics.uptime),
        aggregation: Some(culprit::collect::query::Aggregation::without(
            culprit::collect::query::Agg::Max,
            &config.metrics.scrape_labels,
        )),
        start_ms: 0,
        end_ms: 0,
        step_ms: 1,
    }
    .to_promql();
    let request = DiagnosisRequest {
        job: Some("bp-lab-slow-instance".into()),
        at_ms: Some(at_of(&expected)),
        ..Default::default()
    };
    let labels = alert_labels(&[("namespace", "lab")]);
    let v = culprit::service::pipeline::Live::new(config).unwrap().diagnose(&request, &labels, at_of(&expected)).await;
    let v = v.unwrap();
    // The template was filled (from the lookup's labels) and asked, and the plan was used.
    assert!(!flink.received_requests().await.unwrap().is_empty());
    assert!(v.notes.iter().any(|n| n.contains("[flink.plans] \"bp-lab-slow-instance\"")), "{:#?}", v.notes);
    let asked: Vec<String> = proxy.asked().into_iter().map(|a| a.query).filter(|q| q.contains(&lookup)).collect();
    assert_eq!(asked.len(), 1, "{lookup}: {asked:#?}");
}
