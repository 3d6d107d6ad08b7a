//! A synthetic shape: the case `buffering-sink-sawtooth` (an HBase sink flushing in every
//! checkpoint, finding `sink`) with the Flink Kubernetes Operator autoscaler's gauges added
//! to its recording, named and labelled as the operator's Prometheus reporter writes them
//! (`flink-autoscaler` `AutoscalerFlinkMetrics`: `AutoScaler` → `jobVertexID` → metric →
//! `Current`; labels `jobVertexID`, `resourcens`, `resourcename`, `resourcetype`, `host`,
//! `namespace`, `name`). The autoscaler would scale the sink from 4 to 8; the verdict says
//! that will not help, the system behind it being the limit, and keeps its finding.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use culprit::cli::{DiagnoseArgs, diagnose_command};
use culprit::model::autoscaler::AutoscalerStance;
use culprit::model::verdict::{Finding, Verdict};
use culprit::render::Format;

const CASE: &str = "tests/data/cases/buffering-sink-sawtooth";
const SINK: &str = "e6ddb1d8804abf796b73b8fd261e7dde";
const MERGE: &str = "7365852fdcfced5670efa8fea5b7d853";
const SOURCE: &str = "6c41655a5000af8053bad609f7710bd1";
/// The case's `at`, 2026-12-09T11:05:00Z, Unix s.
const AT_S: i64 = 1_796_814_300;

fn case() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(CASE)
}

/// The operator's gauges, every 15 s over the 10 minutes before `at`: (vertex, metric,
/// value).
fn autoscaler_series(gauges: &[(&str, &str, f64)]) -> String {
    let mut text = String::new();
    let mut metrics: Vec<&str> = gauges.iter().map(|(_, m, _)| *m).collect();
    metrics.sort();
    metrics.dedup();
    for metric in metrics {
        let name = format!("flink_k8soperator_namespace_resource_AutoScaler_jobVertexID_{metric}_Current");
        let _ = writeln!(text, "# TYPE {name} gauge");
        for (vertex, _, v) in gauges.iter().filter(|(_, m, _)| *m == metric) {
            for t in (AT_S - 600..=AT_S).step_by(15) {
                let value = if v.is_nan() { "NaN".to_string() } else { v.to_string() };
                let _ = writeln!(
                    text,
                    "{name}{{host=\"10.0.3.17\",jobVertexID=\"{vertex}\",name=\"flink-kubernetes-operator-7d9f8b6c5d-x2x9q\",namespace=\"flink-operator\",resourcename=\"account-profile-hbase-sync\",resourcens=\"accounts\",resourcetype=\"FlinkDeployment\"}} {value} {t}.000"
                );
            }
        }
    }
    text
}

/// The case's recording with `extra` before its `# EOF`, written to a temporary file.
fn recording_with(extra: &str, tag: &str) -> PathBuf {
    let mut text = String::new();
    let file = std::fs::File::open(case().join("recording.om.gz")).unwrap();
    flate2::read::GzDecoder::new(file).read_to_string(&mut text).unwrap();
    let body = text.strip_suffix("# EOF\n").expect("an OpenMetrics recording ends with # EOF");
    let path = std::env::temp_dir().join(format!("culprit-autoscaler-{}-{tag}.om.gz", std::process::id()));
    let mut gz = flate2::write::GzEncoder::new(std::fs::File::create(&path).unwrap(), flate2::Compression::fast());
    gz.write_all(format!("{body}{extra}# EOF\n").as_bytes()).unwrap();
    gz.finish().unwrap();
    path
}

fn diagnose(recording: PathBuf) -> Verdict {
    let args = DiagnoseArgs {
        recording: Some(recording),
        metrics: Vec::new(),
        scrape: Vec::new(),
        flamegraph: None,
        flink: None,
        cluster: None,
        plan: Some(case().join("plan.json")),
        job: Some("account-profile-hbase-sync".into()),
        label: Vec::new(),
        at: Some("2026-12-09T11:05:00Z".into()),
        window: None,
        config: None,
        checkpoint_config: None,
        exceptions: None,
        rescales: None,
        format: Format::Json,
    };
    diagnose_command(&args, 0).unwrap_or_else(|e| panic!("{}", e.message))
}

#[test]
fn the_autoscaler_scaling_the_sink_to_8_will_not_help_when_the_system_behind_it_is_the_limit() {
    let gauges = [
        (SINK, "PARALLELISM", 4.0),
        (SINK, "RECOMMENDED_PARALLELISM", 8.0),
        (SINK, "TRUE_PROCESSING_RATE", 7400.0),
        (SINK, "LOAD", 0.41),
        (MERGE, "PARALLELISM", 6.0),
        (MERGE, "RECOMMENDED_PARALLELISM", 6.0),
        (SOURCE, "PARALLELISM", 6.0),
        (SOURCE, "RECOMMENDED_PARALLELISM", 6.0),
    ];
    let path = recording_with(&autoscaler_series(&gauges), "sink");
    let v = diagnose(path.clone());
    let _ = std::fs::remove_file(path);
    // The finding is the case's, the autoscaler's gauges change nothing of it.
    assert_eq!(v.finding, Finding::Sink);
    assert_eq!(v.culprit.as_ref().unwrap().vertex_id, SINK);
    let a = v.autoscaler.as_ref().expect("the autoscaler section");
    assert_eq!(a.stance, AutoscalerStance::ScalesUpCulprit);
    assert_eq!((a.agrees, a.next_step_helps), (Some(true), Some(false)));
    assert_eq!((a.parallelism, a.recommended_parallelism), (4, Some(8)));
    assert_eq!(a.true_processing_rate_per_s, Some(7400.0));
    assert_eq!(a.resource.as_deref(), Some("accounts/account-profile-hbase-sync"));
    let said = v.not_the_fix.iter().find(|s| s.contains("autoscaler")).expect("a not-the-fix sentence");
    assert!(
        said.contains(
            "would scale Sink: hbase-account-profile from 4 to 8: that will not help, the system behind it is the limit"
        ),
        "{said}"
    );
    let text = culprit::render::text::render(&v, &Default::default());
    assert!(text.contains("Autoscaler: Sink: hbase-account-profile 4 → 8, agrees; will not help\n"), "{text}");
    let md = culprit::render::markdown::render(&v, false);
    assert!(md.contains("**Autoscaler:** Sink: hbase-account-profile 4 → 8, agrees; will not help"), "{md}");
}

#[test]
fn the_autoscaler_not_evaluated_yet_is_said_and_without_its_gauges_there_is_no_section() {
    let gauges = [(SINK, "PARALLELISM", 4.0), (SINK, "RECOMMENDED_PARALLELISM", f64::NAN)];
    let path = recording_with(&autoscaler_series(&gauges), "nan");
    let v = diagnose(path.clone());
    let _ = std::fs::remove_file(path);
    assert_eq!(v.finding, Finding::Sink);
    let a = v.autoscaler.as_ref().unwrap();
    assert_eq!((a.stance, a.recommended_parallelism), (AutoscalerStance::NotEvaluated, None));
    assert!(v.advice.iter().any(|s| s.contains("has not evaluated Sink: hbase-account-profile yet")), "{:?}", v.advice);

    let plain = diagnose(case().join("recording.om.gz"));
    assert_eq!(plain.autoscaler, None);
    assert!(!serde_json::to_string(&plain).unwrap().contains("autoscaler"));
}
