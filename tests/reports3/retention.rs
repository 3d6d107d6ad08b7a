//! What retention means for a topic (issue 22, report 06): records are lost only when the
//! consumer's position falls below the partition's log start; the cleanup policy decides
//! whether anything goes by age or size; a lag in time is an estimate, a risk at most.

use std::path::{Path, PathBuf};

use culprit::cli::{DiagnoseArgs, diagnose_command};
use culprit::collect::collector::{CollectInput, collect};
use culprit::collect::prometheus::{PromSource, Prometheus};
use culprit::config::{Config, Millis, PrometheusConfig};
use culprit::model::graph::JobGraph;
use culprit::model::request::DiagnosisRequest;
use culprit::model::verdict::{Finding, HazardKind, Verdict};
use culprit::render::Format;

use crate::support;

fn report(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/reports3").join(name)
}

/// `culprit diagnose --recording <dir>/recording.om.gz --plan <dir>/plan.json [--config …]`.
fn diagnose(dir: &Path, config: Option<&Path>) -> Verdict {
    diagnose_recording(&dir.join("recording.om.gz"), dir, config)
}

/// As [`diagnose`], with another recording of the report's job (`variants/`).
fn diagnose_recording(recording: &Path, dir: &Path, config: Option<&Path>) -> Verdict {
    let args = DiagnoseArgs {
        recording: Some(recording.to_path_buf()),
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
        config: config.map(Path::to_path_buf),
        checkpoint_config: None,
        exceptions: None,
        rescales: None,
        format: Format::Json,
    };
    diagnose_command(&args, 0).unwrap_or_else(|e| panic!("{}", e.message))
}

/// The user's expected value of report 06: the JDBC sink is the culprit, and no retention
/// or data-loss hazard, since the topic is compacted and its log still starts at offset 0.
fn assert_sink_without_loss(v: &Verdict) {
    assert_eq!(
        v.culprit.as_ref().map(|c| c.vertex_name.as_str()),
        Some("ConstraintEnforcer -> Sink: jdbc customers_dim"),
        "{}",
        v.summary
    );
    assert_eq!(v.finding, Finding::Sink, "{}", v.summary);
    assert!(
        v.hazards.iter().all(|h| !matches!(h.kind, HazardKind::Retention | HazardKind::CheckpointsStalled)),
        "{:?}",
        v.hazards
    );
    assert!(!v.summary.contains("DATA LOSS"), "{}", v.summary);
    assert!(!v.summary.to_lowercase().contains("losing data"), "{}", v.summary);
}

#[test]
fn report_06_a_compacted_changelog_topic_read_from_the_earliest_offset_loses_nothing_with_its_config() {
    let dir = report("06-kminion-compacted-topic");
    let v = diagnose(&dir, Some(&dir.join("culprit.toml")));
    assert_sink_without_loss(&v);
    // The verdict says what it used: KMinion's cleanup.policy=compact, and that the 7 d
    // retention.ms (the broker default KMinion shows) does not apply. The lag is ~11.4 M
    // records per partition at 15 records/s produced: 11.4e6 / 15 ≈ 760 000 s ≈ 8.8 d.
    let note = v.notes.iter().find(|n| n.starts_with("customers-changelog is compacted")).unwrap_or_else(|| {
        panic!("no compaction note in {:?}", v.notes);
    });
    assert!(note.contains("cleanup.policy=compact and retention.ms from KMinion's topic configuration"), "{note}");
    assert!(note.contains("retention.ms of 7.0 d"), "{note}");
}

#[test]
fn report_06_without_its_config_the_consumer_group_named_like_the_job_gives_the_same_verdict() {
    let dir = report("06-kminion-compacted-topic");
    assert_sink_without_loss(&diagnose(&dir, None));
}

#[test]
fn report_06_read_as_a_deleting_topic_is_still_no_loss_since_the_position_is_inside_the_log() {
    // The same recording with cleanup.policy=compact,delete set in the configuration (it
    // wins over KMinion's label): records now go by age, and the lag's age (~8.8 d) is past
    // the 7 d retention. But the position (high water mark − lag: 14 000 000 + 15 × 1800 −
    // (12 000 000 − 635 × 1800) ≈ 3.17 M) is far above the log start (0), which does not
    // move: offsets win over the age estimate, no hazard, and a note says the estimate
    // was set aside.
    let dir = report("06-kminion-compacted-topic");
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("culprit.toml");
    let text = std::fs::read_to_string(dir.join("culprit.toml")).unwrap();
    std::fs::write(&config, format!("{text}\n[kafka.cleanup_policy]\n\"customers-changelog\" = \"compact,delete\"\n"))
        .unwrap();
    let v = diagnose(&dir, Some(&config));
    assert_sink_without_loss(&v);
    assert!(
        v.notes.iter().any(|n| n.starts_with("kminion reports a lag (records behind ÷ produce rate)")
            && n.contains("past the 7.0 d retention")),
        "{:?}",
        v.notes
    );
}

/// The verdict on `variants/<name>/recording.om.gz` (made by `variants/make.py`) with the
/// report's plan and culprit.toml.
fn variant(name: &str) -> Verdict {
    let dir = report("06-kminion-compacted-topic");
    diagnose_recording(&dir.join("variants").join(name).join("recording.om.gz"), &dir, Some(&dir.join("culprit.toml")))
}

#[test]
fn report_06_with_retention_bytes_below_the_topics_size_the_position_inside_the_log_wins_over_the_bytes_estimate() {
    // KMinion: cleanup.policy=delete, retention.ms=-1, retention.bytes=1 GiB, 12 GiB on disk
    // (3 partitions × 3 replicas: 12 GiB / 9 / ≈14.03 M records ≈ 102 B per record, so 1 GiB
    // holds ≈10.5 M records), lag ≈10.86 M records shrinking 635 records/s. The estimate
    // says past the limit, but the position (≈14.03 M − 10.86 M ≈ 3.17 M) is above the log
    // start (0): no hazard ("DATA LOSS RISK in 0 s … grows towards" before), a note with
    // the real margin.
    let v = variant("bytes_12g_lwm");
    assert_sink_without_loss(&v);
    assert!(!v.summary.contains("RISK"), "{}", v.summary);
    let note = v.notes.iter().find(|n| n.contains("retention.bytes")).unwrap_or_else(|| panic!("{:?}", v.notes));
    assert!(note.contains("contradicted by the offsets"), "{note}");
    assert!(note.contains("at least 3170000 records above the log start"), "{note}");
}

#[test]
fn report_06_compacted_but_below_the_log_start_is_a_loss_without_a_loses_nothing_note() {
    // cleanup.policy=compact; the log start is 500 000 above the position (3.17 M): lost,
    // and the compaction note ("loses nothing") is not given beside it.
    let v = variant("compact_below");
    assert!(v.summary.starts_with("DATA LOSS: already losing data on customers-changelog"), "{}", v.summary);
    assert!(v.notes.iter().all(|n| !n.contains("loses nothing")), "{:?}", v.notes);
}

/// The verdict from a real Prometheus backfilled with the report's recording, as `serve`
/// collects it, with the report's culprit.toml.
async fn live(dir: &Path, at_ms: i64, job: &str) -> Verdict {
    let server = support::prometheus_with(&dir.join("recording.om.gz"));
    let text = std::fs::read_to_string(dir.join("culprit.toml")).unwrap();
    let config: Config = toml::from_str(&text).unwrap();
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
    let request = DiagnosisRequest { job: Some(job.into()), at_ms: Some(at_ms), ..Default::default() };
    let source = PromSource::new(&prom, at_ms);
    let graph = JobGraph::from_plan_json(&std::fs::read_to_string(dir.join("plan.json")).unwrap()).unwrap();
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
    // KMinion's topic info reached the snapshot through PromQL: compacted, from KMinion.
    let r = snapshot.retention.iter().find(|r| r.topic == "customers-changelog").expect("retention of the topic");
    assert_eq!(r.cleanup_policy, Some(culprit::model::snapshot::CleanupPolicy::Compact), "{r:?}");
    assert_eq!((r.retention_ms, r.from.as_str()), (Some(604_800_000), "kminion"));
    culprit::render::words::verdict(&culprit::diagnose::diagnose(&snapshot, &config.diagnosis))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_06_live_from_prometheus_a_compacted_topic_loses_nothing() {
    let dir = report("06-kminion-compacted-topic");
    let offline = diagnose(&dir, Some(&dir.join("culprit.toml")));
    let at_ms = offline.at.parse::<jiff::Timestamp>().unwrap().as_millisecond();
    let v = live(&dir, at_ms, &offline.job.id).await;
    assert_sink_without_loss(&v);
    assert!(v.notes.iter().any(|n| n.starts_with("customers-changelog is compacted")), "{:?}", v.notes);
}
