//! The exposition reader over the real captures, broken inputs, and round trips through the
//! OpenMetrics writer and Flink's raw scrape style.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use culprit::collect::exposition::{
    Format, MetricType, OpenMetricsWriter, ReadError, SampleLine, SampleSink, read_from, read_path,
};
use proptest::prelude::*;

/// Counts samples and checks that every label set splits into pairs.
#[derive(Default)]
struct Count {
    samples: u64,
    types: u64,
}

impl SampleSink for Count {
    fn sample(&mut self, line: &SampleLine<'_>, _t_ms: Option<i64>) -> Result<(), String> {
        line.labels()?;
        self.samples += 1;
        Ok(())
    }

    fn metric_type(&mut self, _family: &str, _kind: MetricType) {
        self.types += 1;
    }
}

/// One sample, owned.
#[derive(Debug, Clone)]
struct Sample {
    name: String,
    labels: Vec<(String, String)>,
    value: f64,
    t_ms: Option<i64>,
}

/// Keeps every sample, owned.
#[derive(Default)]
struct Keep(Vec<Sample>);

impl SampleSink for Keep {
    fn sample(&mut self, line: &SampleLine<'_>, t_ms: Option<i64>) -> Result<(), String> {
        let labels = line.labels()?.into_iter().map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
        self.0.push(Sample { name: line.name.to_string(), labels, value: line.value, t_ms });
        Ok(())
    }
}

fn captures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/captures")
}

/// Every `recording.om.gz` and `metrics/*.prom` under the captures.
fn capture_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(captures()).unwrap() {
        let dir = entry.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        let recording = dir.join("recording.om.gz");
        if recording.exists() {
            files.push(recording);
        }
        if let Ok(metrics) = std::fs::read_dir(dir.join("metrics")) {
            for entry in metrics {
                let path = entry.unwrap().path();
                if path.extension().is_some_and(|e| e == "prom") {
                    files.push(path);
                }
            }
        }
    }
    files.sort();
    files
}

/// The file's text, gunzipped when its name ends with `.gz`.
fn text_of(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap();
    if path.extension().is_some_and(|e| e == "gz") {
        let mut text = String::new();
        flate2::read::MultiGzDecoder::new(bytes.as_slice()).read_to_string(&mut text).unwrap();
        text
    } else {
        String::from_utf8(bytes).unwrap()
    }
}

/// Sample lines counted with plain string operations: neither blank nor a comment.
fn count_sample_lines(text: &str) -> u64 {
    text.lines().map(str::trim).filter(|line| !line.is_empty() && !line.starts_with('#')).count() as u64
}

/// Asserts the error names `source` and `line` in one sentence on one line.
fn assert_one_sentence(error: &ReadError, source: &str, line: u64) {
    let shown = error.to_string();
    assert_eq!(error.line, Some(line), "{shown}");
    assert!(shown.starts_with(&format!("{source}:{line}: ")), "{shown} should start with {source}:{line}: ");
    assert!(!shown.contains('\n'), "{shown}");
    assert!(!shown.trim_end().ends_with('.'), "{shown}");
    let after = &shown[source.len()..];
    assert!(!after.contains(". "), "more than one sentence: {shown}");
}

#[test]
fn every_capture_reads_without_error_and_returns_every_sample_line() {
    let files = capture_files();
    assert!(files.iter().any(|f| f.ends_with("recording.om.gz")), "no recordings found");
    assert!(files.iter().any(|f| f.extension().is_some_and(|e| e == "prom")), "no scrapes found");
    for path in files {
        let mut sink = Count::default();
        let summary = read_path(&path, &mut sink).unwrap_or_else(|e| panic!("{e}"));
        let expected = count_sample_lines(&text_of(&path));
        assert!(expected > 0, "{}", path.display());
        assert_eq!(summary.samples, expected, "{}", path.display());
        assert_eq!(sink.samples, expected, "{}", path.display());
        assert!(sink.types > 0, "{}", path.display());
        if path.ends_with("recording.om.gz") {
            assert_eq!(summary.format, Format::OpenMetrics, "{}", path.display());
            assert_eq!(summary.with_timestamp, expected, "{}", path.display());
        } else {
            assert_eq!(summary.format, Format::Text, "{}", path.display());
            assert_eq!(summary.with_timestamp, 0, "{}", path.display());
        }
    }
}

#[test]
fn recording_timestamps_are_unix_milliseconds() {
    let path = capture_files().into_iter().find(|f| f.ends_with("recording.om.gz")).unwrap();
    let mut sink = Keep::default();
    read_path(&path, &mut sink).unwrap();
    // 2020-01-01 .. 2100-01-01 in milliseconds.
    assert!(sink.0.iter().all(|s| { s.t_ms.is_some_and(|t| (1_577_836_800_000..4_102_444_800_000).contains(&t)) }));
}

#[test]
fn a_truncated_gzip_recording_is_a_one_sentence_error_naming_file_and_line() {
    let recording = capture_files().into_iter().find(|f| f.ends_with("recording.om.gz")).unwrap();
    let bytes = std::fs::read(&recording).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("cut.om.gz");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let mut sink = Count::default();
    let error = read_path(&cut, &mut sink).unwrap_err();
    let line = error.line.expect("the error names a line");
    assert!(line > 1, "{error}");
    assert_one_sentence(&error, &cut.display().to_string(), line);
    assert!(error.message.contains("gzip"), "{error}");
}

#[test]
fn a_garbage_line_in_a_scrape_is_a_one_sentence_error_naming_file_and_line() {
    let scrape = capture_files().into_iter().find(|f| f.extension().is_some_and(|e| e == "prom")).unwrap();
    let text = text_of(&scrape);
    let mut lines: Vec<&str> = text.lines().collect();
    let at = lines.len() / 2;
    lines.insert(at, "this is not a sample");
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.prom");
    std::fs::write(&broken, lines.join("\n")).unwrap();
    let error = read_path(&broken, &mut Count::default()).unwrap_err();
    assert_one_sentence(&error, &broken.display().to_string(), at as u64 + 1);
    assert_eq!(error.message, "expected a sample value after the metric name, found \"is\"");
}

#[test]
fn a_missing_file_is_a_one_sentence_error_without_a_line() {
    let error = read_path(Path::new("missing.om.gz"), &mut Count::default()).unwrap_err();
    assert_eq!(error.line, None);
    let expected = format!("missing.om.gz: cannot open: {}", std::fs::File::open("missing.om.gz").unwrap_err());
    assert_eq!(error.to_string(), expected);
}

// ---------------------------------------------------------------------------------------
// Round trips
// ---------------------------------------------------------------------------------------

fn metric_name() -> impl Strategy<Value = String> {
    "[a-zA-Z_:][a-zA-Z0-9_:]{0,24}"
}

fn label_name() -> impl Strategy<Value = String> {
    "[a-zA-Z_][a-zA-Z0-9_]{0,12}"
}

/// Arbitrary unicode, with the characters that matter to the format made frequent.
fn label_value() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            4 => any::<char>(),
            1 => prop::sample::select(vec![',', '=', '"', '}', '{', '\\', '\n', '\r', '\t', ' ', '#', 'n']),
        ],
        0..16,
    )
    .prop_map(String::from_iter)
}

/// Unique label names, in no particular order.
fn labels() -> impl Strategy<Value = Vec<(String, String)>> {
    prop::collection::vec((label_name(), label_value()), 0..6).prop_map(|mut pairs| {
        let mut seen = std::collections::HashSet::new();
        pairs.retain(|(name, _)| seen.insert(name.clone()));
        pairs
    })
}

fn value() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => any::<f64>(),
        1 => Just(f64::NAN),
        1 => Just(f64::INFINITY),
        1 => Just(f64::NEG_INFINITY),
        1 => Just(-0.0),
        1 => (any::<bool>(), 1u64..(1 << 52)).prop_map(|(negative, bits)| {
            let subnormal = f64::from_bits(bits);
            if negative { -subnormal } else { subnormal }
        }),
        2 => (0u32..1_000_000).prop_map(f64::from),
        2 => 0.0f64..1e12,
    ]
}

/// Unix milliseconds from 2000 to 2100, or none.
fn timestamp() -> impl Strategy<Value = Option<i64>> {
    prop::option::weighted(0.9, 946_684_800_000i64..4_102_444_800_000)
}

fn sample(t: impl Strategy<Value = Option<i64>>) -> impl Strategy<Value = Sample> {
    (metric_name(), labels(), value(), t).prop_map(|(name, labels, value, t_ms)| Sample { name, labels, value, t_ms })
}

fn read_back(text: &[u8]) -> Result<(Vec<Sample>, Format), ReadError> {
    let mut sink = Keep::default();
    let summary = read_from(text, "generated", &mut sink)?;
    assert_eq!(summary.samples as usize, sink.0.len());
    Ok((sink.0, summary.format))
}

fn assert_same(written: &[Sample], read: &[Sample]) -> Result<(), TestCaseError> {
    prop_assert_eq!(written.len(), read.len());
    for (w, r) in written.iter().zip(read) {
        prop_assert_eq!(&w.name, &r.name);
        prop_assert_eq!(&w.labels, &r.labels);
        if w.value.is_nan() {
            prop_assert!(r.value.is_nan(), "{} read back as {}", w.value, r.value);
        } else {
            prop_assert_eq!(w.value.to_bits(), r.value.to_bits(), "{:e} vs {:e}", w.value, r.value);
        }
        prop_assert_eq!(w.t_ms, r.t_ms);
    }
    Ok(())
}

/// Java's `Double.toString` style, as Flink's reporter writes values: `1.0`, `5.892944E7`,
/// `1.0E-5`, `NaN`, `+Inf`, `-Inf`.
fn java_style(value: f64) -> String {
    if value.is_nan() {
        return "NaN".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { "+Inf" } else { "-Inf" }.to_owned();
    }
    let magnitude = value.abs();
    if magnitude == 0.0 || (1e-3..1e7).contains(&magnitude) {
        format!("{value:?}")
    } else {
        let text = format!("{value:E}");
        match text.split_once('E') {
            Some((mantissa, exponent)) if !mantissa.contains('.') => {
                format!("{mantissa}.0E{exponent}")
            }
            _ => text,
        }
    }
}

fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn openmetrics_written_by_the_writer_reads_back_exactly(
        samples in prop::collection::vec(sample(timestamp()), 0..40),
    ) {
        let mut writer = OpenMetricsWriter::new(Vec::new());
        for (k, s) in samples.iter().enumerate() {
            if k % 7 == 0 {
                writer.metric_type(&s.name, MetricType::Gauge).unwrap();
            }
            let labels: Vec<(&str, &str)> =
                s.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            writer.sample(&s.name, &labels, s.value, s.t_ms).unwrap();
        }
        let text = writer.finish().unwrap();
        let (read, format) = read_back(&text)
            .map_err(|e| TestCaseError::fail(format!("{e}\n{}", String::from_utf8_lossy(&text))))?;
        prop_assert_eq!(format, Format::OpenMetrics);
        assert_same(&samples, &read)?;
    }

    #[test]
    fn flink_raw_scrapes_read_back_exactly(
        samples in prop::collection::vec(sample(Just(None)), 0..40),
        crlf in any::<bool>(),
    ) {
        let newline = if crlf { "\r\n" } else { "\n" };
        let mut text = String::new();
        for s in &samples {
            text += &format!("# HELP {} {} (scope: taskmanager_job_task){newline}", s.name, s.name);
            text += &format!("# TYPE {} gauge{newline}", s.name);
            text += &s.name;
            if !s.labels.is_empty() {
                text += "{";
                for (k, v) in &s.labels {
                    text += &format!("{k}=\"{}\",", escape(v));
                }
                text += "}";
            }
            text += &format!(" {}{newline}", java_style(s.value));
        }
        let (read, format) = read_back(text.as_bytes())
            .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(format, Format::Text);
        assert_same(&samples, &read)?;
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_accepted_label_sets_split(
        bytes in prop::collection::vec(
            prop_oneof![
                3 => prop::sample::select(b"ab_:{}=\",\\ \t\n\r#.0123456789eE+-NaInf\"TYPEOF".to_vec()),
                1 => any::<u8>(),
            ],
            0..200,
        ),
    ) {
        struct Check;
        impl SampleSink for Check {
            fn sample(&mut self, line: &SampleLine<'_>, _t: Option<i64>) -> Result<(), String> {
                match line.labels() {
                    Ok(_) => Ok(()),
                    Err(e) if e.starts_with("duplicate label name") => Ok(()),
                    Err(e) => panic!("an accepted line has unreadable labels: {e}"),
                }
            }
        }
        if let Err(error) = read_from(bytes.as_slice(), "fuzz", &mut Check) {
            let shown = error.to_string();
            prop_assert!(error.line.is_some(), "{}", shown);
            prop_assert!(!shown.contains('\n'), "{}", shown);
        }
    }
}

#[test]
fn the_writer_output_of_a_flink_like_series_is_stable() {
    let mut writer = OpenMetricsWriter::new(Vec::new());
    writer.metric_type("flink_taskmanager_job_task_busyTimeMsPerSecond", MetricType::Gauge).unwrap();
    writer
        .sample(
            "flink_taskmanager_job_task_busyTimeMsPerSecond",
            &[("task_name", "Source:_txn_source"), ("subtask_index", "0")],
            1000.0,
            Some(1_795_949_325_765),
        )
        .unwrap();
    let mut out = writer.finish().unwrap();
    out.flush().unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "# TYPE flink_taskmanager_job_task_busyTimeMsPerSecond gauge\n\
         flink_taskmanager_job_task_busyTimeMsPerSecond{task_name=\"Source:_txn_source\",subtask_index=\"0\"} 1000 1795949325.765\n\
         # EOF\n"
    );
}
