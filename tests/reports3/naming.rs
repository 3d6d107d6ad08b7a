//! Metric naming schemes other than Flink's Prometheus reporter (report 04: Prometheus 3
//! keeps the dots of OTLP names). The user expects "sessionize is the culprit" (finding
//! `headroom`) from both recordings, with their hand-written `[metrics]` and with the one
//! `[metrics] scheme` setting; without any configuration the scheme is read from the data.
//! Beyond the folder: a real capture renamed the way the OpenTelemetry Collector's
//! Prometheus exporter and Prometheus 3's OTLP ingestion name it gives the capture's verdict.

use std::path::{Path, PathBuf};

use culprit::cli::{DiagnoseArgs, diagnose_command};
use culprit::collect::exposition::{OpenMetricsWriter, SampleLine, SampleSink, read_path};
use culprit::model::catalog::MetricCatalog;
use culprit::model::naming::NamingScheme;
use culprit::model::verdict::{Finding, Status, Verdict};
use culprit::render::Format;

fn report() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/reports3/04-prometheus3-otlp-utf8-names")
}

fn args(recording: &Path, plan: &Path, config: Option<&Path>) -> DiagnoseArgs {
    DiagnoseArgs {
        recording: Some(recording.to_path_buf()),
        metrics: Vec::new(),
        scrape: Vec::new(),
        flamegraph: None,
        flink: None,
        cluster: None,
        plan: Some(plan.to_path_buf()),
        job: None,
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

fn diagnosed(recording: &Path, plan: &Path, config: Option<&Path>) -> Verdict {
    diagnose_command(&args(recording, plan, config), 0).unwrap_or_else(|e| panic!("{}", e.message))
}

/// Report 04's expected verdict: sessionize (busy 985 and 990 ms/s of 1000, its HASH input
/// from the ~93 % backpressured source, its sink 8-9 % busy) is the culprit, `headroom`.
fn assert_sessionize_with_headroom(v: &Verdict) {
    assert_eq!(v.status, Status::CulpritFound, "{}", v.summary);
    assert_eq!(v.finding, Finding::Headroom, "{}", v.summary);
    assert_eq!(v.culprit.as_ref().map(|c| c.vertex_name.as_str()), Some("sessionize"));
}

const RECORDINGS: [&str; 2] = ["recording-quoted.om.gz", "recording-promtool.om.gz"];

#[test]
fn with_the_users_utf8_metric_names_both_recordings_name_sessionize_with_headroom() {
    let dir = report();
    for recording in RECORDINGS {
        let v = diagnosed(&dir.join(recording), &dir.join("plan.json"), Some(&dir.join("culprit-utf8.toml")));
        assert_sessionize_with_headroom(&v);
        // The names were configured: nothing was guessed.
        assert!(!v.notes.iter().any(|n| n.contains("[metrics] scheme")), "{recording}: {:?}", v.notes);
    }
}

#[test]
fn with_the_one_scheme_setting_both_recordings_name_sessionize_with_headroom() {
    let dir = report();
    let scratch = tempfile::tempdir().unwrap();
    let config = scratch.path().join("culprit.toml");
    std::fs::write(&config, "[metrics]\nscheme = \"otlp_utf8\"\n").unwrap();
    for recording in RECORDINGS {
        let v = diagnosed(&dir.join(recording), &dir.join("plan.json"), Some(&config));
        assert_sessionize_with_headroom(&v);
        assert!(!v.notes.iter().any(|n| n.contains("[metrics] scheme")), "{recording}: {:?}", v.notes);
    }
}

#[test]
fn without_configuration_the_dotted_names_are_read_and_a_note_names_the_scheme_setting() {
    let dir = report();
    for recording in RECORDINGS {
        let v = diagnosed(&dir.join(recording), &dir.join("plan.json"), None);
        assert_sessionize_with_headroom(&v);
        let note = v.notes.iter().find(|n| n.contains("[metrics] scheme = \"otlp_utf8\"")).unwrap_or_else(|| {
            panic!("{recording}: no note names the scheme: {:?}", v.notes);
        });
        assert!(note.contains("Prometheus 3") && note.contains("dotted (UTF-8)"), "{note}");
    }
}

#[test]
fn dotted_flink_names_no_scheme_maps_are_an_error_that_says_so_and_names_the_setting() {
    // Report 04's names under another scope format (`flink.tm.…`): no scheme names them.
    let dir = report();
    let scratch = tempfile::tempdir().unwrap();
    let renamed = scratch.path().join("renamed.om.gz");
    rewrite(&dir.join("recording-quoted.om.gz"), &renamed, |name, labels| {
        (name.replace("flink.taskmanager.", "flink.tm.").replace("flink.jobmanager.", "flink.jm."), labels.to_vec())
    });
    let error = diagnose_command(&args(&renamed, &dir.join("plan.json"), None), 0).unwrap_err();
    assert!(error.message.contains("no Flink job metrics"), "{}", error.message);
    assert!(error.message.contains("under dotted (UTF-8) names such as `flink.jm.job."), "{}", error.message);
    // No scheme maps them (else it would have been read with it): the hint names the keys,
    // never a scheme, which would send the user in a circle.
    assert!(error.message.contains("which no `[metrics] scheme` names"), "{}", error.message);
    assert!(error.message.contains("map them with the `[metrics]` keys one by one"), "{}", error.message);
    assert!(!error.message.contains("scheme = \"otlp_utf8\""), "{}", error.message);
}

/// Rewrites a recording sample by sample, through culprit's own writer.
fn rewrite(from: &Path, to: &Path, rename: impl Fn(&str, &[(String, String)]) -> (String, Vec<(String, String)>)) {
    struct Rewrite<F> {
        writer: OpenMetricsWriter<flate2::write::GzEncoder<std::fs::File>>,
        rename: F,
    }
    impl<F: Fn(&str, &[(String, String)]) -> (String, Vec<(String, String)>)> SampleSink for Rewrite<F> {
        fn sample(&mut self, line: &SampleLine<'_>, t_ms: Option<i64>) -> Result<(), String> {
            let labels: Vec<(String, String)> =
                line.labels()?.into_iter().map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
            let (name, labels) = (self.rename)(&line.name, &labels);
            let pairs: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            self.writer.sample(&name, &pairs, line.value, t_ms).map_err(|e| e.to_string())
        }
    }
    let file = std::fs::File::create(to).unwrap();
    let gz = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
    let mut sink = Rewrite { writer: OpenMetricsWriter::new(gz), rename };
    let summary = read_path(from, &mut sink).unwrap();
    assert!(summary.samples > 0);
    sink.writer.finish().unwrap().finish().unwrap();
}

/// Each name of the Prometheus reporter's catalog, and that scheme's name for it.
fn renames(scheme: NamingScheme) -> Vec<(String, String)> {
    let from = serde_json::to_value(MetricCatalog::default()).unwrap();
    let to = serde_json::to_value(MetricCatalog::for_scheme(scheme)).unwrap();
    let mut out = Vec::new();
    for (key, value) in from.as_object().unwrap() {
        if key.ends_with("_suffix") || key == "scrape_labels" || key == "scheme" {
            continue;
        }
        match (value, &to[key]) {
            (serde_json::Value::String(a), serde_json::Value::String(b)) => out.push((a.clone(), b.clone())),
            (serde_json::Value::Array(a), serde_json::Value::Array(b)) => {
                out.extend(a.iter().zip(b).map(|(a, b)| (a.as_str().unwrap().into(), b.as_str().unwrap().into())));
            }
            _ => unreachable!("names are strings and lists"),
        }
    }
    out
}

fn expected(capture: &Path) -> (String, String) {
    let e: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(capture.join("EXPECTED.json")).unwrap()).unwrap();
    (e["finding"].as_str().unwrap().to_string(), e["culprit_vertex_name"].as_str().unwrap_or_default().to_string())
}

fn finding_and_culprit(v: &Verdict) -> (String, String) {
    let finding = serde_json::to_value(v.finding).unwrap().as_str().unwrap_or_default().to_string();
    (finding, v.culprit.as_ref().map(|c| c.vertex_name.clone()).unwrap_or_default())
}

/// A capture with every catalog name as `scheme` writes it; under the Collector, `job` and
/// `instance` become `exported_job` and `exported_instance` (the Collector's own, from the
/// resource) and the scrape of the Collector adds its own `job` and `instance`.
fn renamed_capture(capture: &Path, scheme: NamingScheme, to: &Path) {
    let names = renames(scheme);
    rewrite(&capture.join("recording.om.gz"), to, |name, labels| {
        let name = names.iter().find(|(a, _)| a == name).map_or_else(|| name.to_string(), |(_, b)| b.clone());
        let mut labels: Vec<(String, String)> = labels.to_vec();
        if scheme == NamingScheme::OtelCollector {
            for (k, _) in labels.iter_mut() {
                if k == "job" || k == "instance" {
                    *k = format!("exported_{k}");
                }
            }
            labels.push(("job".into(), "otel-collector".into()));
            labels.push(("instance".into(), "otel-collector:8889".into()));
        }
        (name, labels)
    });
}

#[test]
fn a_capture_named_by_the_collectors_prometheus_exporter_gives_the_captures_verdict() {
    // `_total` on counters, `_rate` on meters, `exported_job`: the same job, the same
    // verdict, whether the scheme is set or read from the data.
    let scratch = tempfile::tempdir().unwrap();
    let config = scratch.path().join("culprit.toml");
    std::fs::write(&config, "[metrics]\nscheme = \"otel_collector\"\n").unwrap();
    for name in ["hot-key", "flink-1.18-chained-culprit"] {
        let capture = crate::support::capture(name);
        let renamed = scratch.path().join(format!("{name}.om.gz"));
        renamed_capture(&capture, NamingScheme::OtelCollector, &renamed);
        let want = expected(&capture);
        let set = diagnosed(&renamed, &capture.join("plan.json"), Some(&config));
        assert_eq!(finding_and_culprit(&set), want, "{name} with the scheme set");
        let read = diagnosed(&renamed, &capture.join("plan.json"), None);
        assert_eq!(finding_and_culprit(&read), want, "{name} with the scheme read from the data");
        assert!(read.notes.iter().any(|n| n.contains("`[metrics] scheme = \"otel_collector\"`")), "{:?}", read.notes);
    }
}

#[test]
fn a_capture_named_by_prometheus_3s_otlp_ingestion_gives_the_captures_verdict() {
    // Dotted names, written quoted by culprit's writer and read back.
    let scratch = tempfile::tempdir().unwrap();
    for name in ["hot-key", "flink-1.18-chained-culprit"] {
        let capture = crate::support::capture(name);
        let renamed = scratch.path().join(format!("{name}.om.gz"));
        renamed_capture(&capture, NamingScheme::OtlpUtf8, &renamed);
        let text = support_text(&renamed);
        assert!(text.contains("{\"flink.taskmanager.job.task.busyTimeMsPerSecond\","), "quoted names");
        let v = diagnosed(&renamed, &capture.join("plan.json"), None);
        assert_eq!(finding_and_culprit(&v), expected(&capture), "{name}");
    }
}

fn support_text(path: &Path) -> String {
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("plain.om");
    crate::support::gunzip(path, &out);
    std::fs::read_to_string(out).unwrap()
}

#[path = "naming_stub.rs"]
mod stub;

/// Report 04's data in a real Prometheus 2 under legacy names, behind the stub that speaks
/// Prometheus 3's quoted syntax; the map from each UTF-8 name to the legacy one.
fn prometheus_2_with_report_04(scratch: &Path) -> (crate::support::Server, BTreeMap<String, String>) {
    let legacy = scratch.join("legacy.om.gz");
    let names = std::sync::Mutex::new(BTreeMap::new());
    rewrite(&report().join("recording-quoted.om.gz"), &legacy, |name, labels| {
        // A stand-in no scheme names, so that only the UTF-8 names find the data.
        let underscored = format!("stub_{}", name.replace('.', "_"));
        names.lock().unwrap().insert(name.to_string(), underscored.clone());
        (underscored, labels.to_vec())
    });
    (crate::support::prometheus_with(&legacy), names.into_inner().unwrap())
}

use std::collections::BTreeMap;

async fn live(url: &str, scheme: &str, scratch: &Path) -> Verdict {
    let config = scratch.join(format!("live-{scheme}.toml"));
    std::fs::write(&config, format!("[prometheus]\nurl = \"{url}\"\n\n[metrics]\nscheme = \"{scheme}\"\n")).unwrap();
    // The offline verdict's time: the recording's last sample.
    let at = diagnosed(&report().join("recording-quoted.om.gz"), &report().join("plan.json"), None).at;
    let mut a = args(&report().join("recording-quoted.om.gz"), &report().join("plan.json"), Some(&config));
    a.recording = None;
    a.job = Some("clickstream-sessionizer".into());
    a.at = Some(at);
    culprit::cli::diagnose_live_command(&a, 0).await.unwrap_or_else(|e| panic!("{}", e.message))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_through_prometheus_3s_quoted_syntax_sessionize_is_named_with_the_scheme_set_or_detected() {
    let scratch = tempfile::tempdir().unwrap();
    let (prometheus, names) = prometheus_2_with_report_04(scratch.path());
    let stub = stub::start(&prometheus.url, names).await;
    let set = live(&stub.url, "otlp_utf8", scratch.path()).await;
    assert_sessionize_with_headroom(&set);
    // culprit wrote the dotted names in the quoted form, first in the braces.
    let queries = stub.queries();
    assert!(
        queries.iter().any(|q| q.contains(r#"{"flink.taskmanager.job.task.busyTimeMsPerSecond", "#)),
        "{queries:#?}"
    );
    assert!(!queries.iter().any(|q| q.contains(r#"__name__="flink."#)), "{queries:#?}");
    // `auto`: the Prometheus reporter's names find nothing, one lookup finds the scheme.
    let before = stub.queries().len();
    let detected = live(&stub.url, "auto", scratch.path()).await;
    assert_sessionize_with_headroom(&detected);
    assert!(detected.notes.iter().any(|n| n.contains("[metrics] scheme = \"otlp_utf8\"")), "{:?}", detected.notes);
    let lookups = stub.queries()[before..].iter().filter(|q| q.starts_with("count by (__name__)")).count();
    assert_eq!(lookups, 1, "one series lookup");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn culprit_record_writes_utf8_names_quoted_and_its_recording_gives_the_same_verdict() {
    let scratch = tempfile::tempdir().unwrap();
    let (prometheus, names) = prometheus_2_with_report_04(scratch.path());
    let stub = stub::start(&prometheus.url, names).await;
    let config = scratch.path().join("record.toml");
    let plan = report().join("plan.json");
    std::fs::write(
        &config,
        format!(
            "[prometheus]\nurl = \"{}\"\n\n[flink.plans]\n\"clickstream-sessionizer\" = \"{}\"\n\n[metrics]\nscheme = \"otlp_utf8\"\n",
            stub.url,
            plan.display()
        ),
    )
    .unwrap();
    let at = diagnosed(&report().join("recording-quoted.om.gz"), &plan, None).at;
    let out = scratch.path().join("recorded.om.gz");
    let args = culprit::cli::RecordArgs {
        job: "clickstream-sessionizer".into(),
        label: Vec::new(),
        lookback: "10m".into(),
        at: Some(at),
        window: None,
        config,
        cluster: None,
        out: out.clone(),
        plan_out: None,
        checkpoint_config_out: None,
        exceptions_out: None,
        rescales_out: None,
    };
    if let Err(e) = culprit::cli::record_command(&args, 0).await {
        panic!("{}: the last query was {:?}", e.message, stub.queries().last());
    }
    let text = support_text(&out);
    assert!(text.contains("{\"flink.taskmanager.job.task.busyTimeMsPerSecond\","), "{}", &text[..text.len().min(2000)]);
    // Read back without configuration: the scheme is read from the names, the verdict kept.
    let v = diagnosed(&out, &plan, None);
    assert_sessionize_with_headroom(&v);
}
