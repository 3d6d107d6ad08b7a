//! Reading lines: values, comments and `# TYPE`, `# EOF`, line endings, exemplars, JSON, the
//! summary, and errors naming their line.

use super::*;

#[test]
fn lines_sharing_the_last_lines_label_set_read_as_each_line_alone() {
    // Repeated heads in every form (escapes, a quoted name, promtool's dump form), a
    // label set that starts like the last one, and a repeated head with a bad value.
    let lines = [
        "m{a=\"x\\\"y\",b=\"2\",} 1 1795000000000",
        "m{a=\"x\\\"y\",b=\"2\",} 2 1795000005000",
        "m{a=\"x\\\"y\",b=\"2\",c=\"3\"} 3 1795000005000",
        "m{a=\"x\\\"y\",b=\"2\",} 4 1795000010000",
        "{\"my.metric\", \"a.b\"=\"x\"} 5 1795000010000",
        "{\"my.metric\", \"a.b\"=\"x\"} 6 1795000015000",
        "{__name__=\"d\", a=\"\\t\"} 7 1795000015000",
        "{__name__=\"d\", a=\"\\t\"} 8 1795000020000",
        "n 9 1795000020000",
    ];
    let alone: Vec<Owned> = lines.iter().map(|l| read_ok(l).samples.remove(0)).collect();
    assert_eq!(read_ok(&lines.join("\n")).samples, alone);
    assert_eq!(alone[1].1, pairs(&[("a", "x\"y"), ("b", "2")]));
    assert_eq!(alone[5].0, "my.metric");
    assert_eq!(alone[7], ("d".to_owned(), pairs(&[("a", "\t")]), 8.0, Some(1_795_000_020_000)));
    let bad = format!("{}\nm{{a=\"x\\\"y\",b=\"2\",}} x", lines[0]);
    assert_eq!(error_at(&bad, 2), error_at(&bad[lines[0].len() + 1..], 1));
}

#[test]
fn a_flink_scrape_with_trailing_commas_reads_every_sample() {
    let text = "\
# HELP flink_taskmanager_Status_JVM_Memory_Metaspace_Used Used (scope: taskmanager_Status_JVM_Memory_Metaspace)
# TYPE flink_taskmanager_Status_JVM_Memory_Metaspace_Used gauge
flink_taskmanager_Status_JVM_Memory_Metaspace_Used{host=\"127_0_0_1\",tm_id=\"127_0_0_1:46717_23536e\",} 5.892944E7
flink_taskmanager_job_task_busyTimeMsPerSecond{task_name=\"Source:_txn_source\",subtask_index=\"0\",} NaN
flink_jobmanager_numRunningJobs{host=\"127_0_0_1\",} 1.0
";

    let (sink, summary) = read(text).unwrap();
    assert_eq!(summary.samples, 3);
    assert_eq!(summary.lines, 5);
    assert_eq!(summary.with_timestamp, 0);
    assert_eq!(summary.format, Format::Text);
    assert_eq!(sink.samples[0].1, pairs(&[("host", "127_0_0_1"), ("tm_id", "127_0_0_1:46717_23536e")]));
    assert_eq!(sink.samples[0].2, 5.892944e7);
    assert!(sink.samples[1].2.is_nan());
    assert_eq!(sink.samples[1].1[0], ("task_name".to_owned(), "Source:_txn_source".to_owned()));
    assert_eq!(sink.samples[2].2, 1.0);
    assert!(sink.samples.iter().all(|s| s.3.is_none()));
}

#[test]
fn values_accept_nan_infinities_exponents_negative_zero_and_tiny_numbers() {
    let sink = read_ok("a NaN\na +Inf\na -Inf\na 1.5156E10\na -0\na 1e-300\na 5e-324\na +3\n");
    let v: Vec<f64> = sink.samples.iter().map(|s| s.2).collect();
    assert!(v[0].is_nan());
    assert_eq!(v[1], f64::INFINITY);
    assert_eq!(v[2], f64::NEG_INFINITY);
    assert_eq!(v[3], 1.5156e10);
    assert_eq!(v[4].to_bits(), (-0.0f64).to_bits());
    assert_eq!(v[5], 1e-300);
    assert_eq!(v[6].to_bits(), 1);
    assert_eq!(v[7], 3.0);
}

#[test]
fn a_bad_value_is_a_one_sentence_error_naming_file_and_line() {
    let error = read("# HELP x y\nx{a=\"b\"} 1\n\nx{a=\"b\"} abc\n").unwrap_err();
    assert_eq!(error.to_string(), "test.prom:4: expected a sample value after the label set, found \"abc\"");
    let message = error_at("x\n", 1);
    assert_eq!(message, "expected a sample value after the metric name, found the end of the line");
    error_at("x{}\n", 1);
    error_at("x{a=\"b\"}1\n", 1);
}

#[test]
fn help_unit_and_other_comments_are_ignored_and_type_lines_reach_the_sink() {
    let sink = read_ok(
        "# HELP a some \"help\" {text\n# UNIT a seconds\n#just a comment\n# TYPE a counter\n#\ta\n# TYPE b untyped\n#TYPE c gauge\n# TYPE \"my.metric\" stateset\na 1\n",
    );
    assert_eq!(
        sink.types,
        [
            ("a".to_owned(), MetricType::Counter),
            ("b".to_owned(), MetricType::Unknown),
            ("my.metric".to_owned(), MetricType::StateSet),
        ]
    );
    assert_eq!(sink.samples.len(), 1);
}

#[test]
fn every_metric_type_name_is_read() {
    for kind in [
        MetricType::Counter,
        MetricType::Gauge,
        MetricType::Histogram,
        MetricType::GaugeHistogram,
        MetricType::Summary,
        MetricType::Info,
        MetricType::StateSet,
        MetricType::Unknown,
    ] {
        assert_eq!(MetricType::from_name(kind.as_str()), Some(kind));
    }
}

#[test]
fn a_malformed_type_line_is_an_error_naming_its_line() {
    let message = error_at("a 1\n# TYPE a colour\n", 2);
    assert!(message.contains("unknown metric type \"colour\""), "{message}");
    error_at("# TYPE a\n", 1);
    error_at("# TYPE\n", 1);
    error_at("# TYPE a gauge extra\n", 1);
    error_at("# TYPE a.b gauge\n", 1);
}

#[test]
fn content_after_eof_is_an_error_but_blank_lines_are_not() {
    let (_, summary) = read("a 1\n# EOF\n\n  \n").unwrap();
    assert_eq!(summary.format, Format::OpenMetrics);
    assert_eq!(summary.lines, 4);
    let message = error_at("a 1\n# EOF\n\na 2\n", 4);
    assert!(message.contains("after \"# EOF\" on line 2"), "{message}");
    error_at("# EOF\n# EOF\n", 2);
    error_at("# EOF\n# HELP a b\n", 2);
}

#[test]
fn input_ending_with_eof_is_openmetrics_and_other_input_is_text() {
    assert_eq!(read("a 1\n# EOF").unwrap().1.format, Format::OpenMetrics);
    assert_eq!(read("a 1\n# EOF\r\n").unwrap().1.format, Format::OpenMetrics);
    assert_eq!(read("a 1\n").unwrap().1.format, Format::Text);
    assert_eq!(read("").unwrap().1.format, Format::Text);
    assert_eq!(read("# EOFX\na 1\n").unwrap().1.format, Format::Text);
}

#[test]
fn crlf_line_endings_are_tolerated() {
    let (sink, summary) = read("# TYPE a gauge\r\na{b=\"c\"} 1 1000\r\n\r\na 2\r\n# EOF\r\n").unwrap();
    assert_eq!(summary.samples, 2);
    assert_eq!(sink.samples[0].1, pairs(&[("b", "c")]));
    assert_eq!(sink.samples[0].3, Some(1_000_000));
    assert_eq!(sink.samples[1].2, 2.0);
    assert_eq!(sink.types.len(), 1);
}

#[test]
fn invalid_utf8_is_an_error_naming_its_line() {
    let mut sink = Collect::default();
    let error = read_bytes(&b"a 1\na{b=\"\xff\"} 2\n"[..], "x.prom", &mut sink).unwrap_err();
    assert_eq!(error.line, Some(2));
    assert_eq!(error.to_string(), "x.prom:2: the line is not valid UTF-8 (invalid byte at column 6)");
}

#[test]
fn tabs_and_repeated_spaces_separate_tokens() {
    let sink = read_ok("a\t1\t1000\na  {b=\"c\"}   2    2000   \n  c 3\n");
    assert_eq!(sink.samples.len(), 3);
    assert_eq!(sink.samples[1].1, pairs(&[("b", "c")]));
    assert_eq!(sink.samples[1].3, Some(2_000_000));
    assert_eq!(sink.samples[2].0, "c");
}

#[test]
fn an_exemplar_is_accepted_and_ignored() {
    let sink = read_ok("a_bucket{le=\"1\"} 3 1000 # {trace_id=\"abc\"} 0.5 999.5\na_bucket{le=\"2\"} 4 # {} 1\n");
    assert_eq!(sink.samples.len(), 2);
    assert_eq!(sink.samples[0].3, Some(1_000_000));
    assert_eq!(sink.samples[1].3, None);
    assert_eq!(sink.samples[1].2, 4.0);
}

#[test]
fn a_malformed_exemplar_is_an_error_naming_its_line() {
    error_at("a 1\na 1 # trace\n", 2);
    error_at("a 1 # {a=\"b\"}\n", 1);
    error_at("a 1 # {a=\"b\"} x\n", 1);
    error_at("a 1 # {a=\"b\"} 1 2 3\n", 1);
    error_at("a 1 # {a=b} 1\n", 1);
    error_at("a 1 #{a=\"b\"} 1\n", 1);
}

#[test]
fn text_after_the_timestamp_is_an_error_naming_its_line() {
    let message = error_at("a 1\n\na 1 2 3\n", 3);
    assert_eq!(message, "unexpected text after the timestamp: \"3\"");
}

#[test]
fn metric_names_may_contain_colons_but_not_dots() {
    let sink = read_ok("job:rate5m:sum 1\n_x 2\n:y 3\n");
    assert_eq!(sink.samples[0].0, "job:rate5m:sum");
    let message = error_at("a 1\nmy.metric 1\n", 2);
    assert!(message.starts_with("unexpected character '.' after metric name \"my\""), "{message}");
    let message = error_at("1abc 1\n", 1);
    assert_eq!(message, "expected a metric name, found \"1abc 1\"");
}

#[test]
fn json_where_metrics_belong_is_named_as_json() {
    for text in ["{\"plan\": {\"jid\": \"x\"}}\n", "{\n  \"plan\": 1\n}\n", "[1, 2]\n", "{ \"status\" : \"success\" }"]
    {
        let error = read_bytes(text.as_bytes(), "plan.json", &mut Collect::default()).unwrap_err();
        assert!(error.json, "{text}: {error}");
        assert_eq!(error.to_string(), "plan.json:1: this is JSON, not Prometheus text exposition or OpenMetrics");
    }
    // Lines that open with a brace but are exposition text are not JSON.
    for text in ["{\"q\", a=\"b\"} x\n", "{__name__=\"m\"} x\n", "{} 1\n"] {
        let error = read_bytes(text.as_bytes(), "x.prom", &mut Collect::default()).unwrap_err();
        assert!(!error.json, "{text}: {error}");
    }
}

struct Refuse;

impl SampleSink for Refuse {
    fn sample(&mut self, line: &SampleLine<'_>, _t_ms: Option<i64>) -> Result<(), String> {
        if line.name == "bad" { Err("the sink refuses metric \"bad\"".to_owned()) } else { Ok(()) }
    }
}

#[test]
fn a_sink_error_aborts_the_read_with_file_and_line() {
    let error = read_bytes(&b"good 1\n\nbad 2\ngood 3\n"[..], "in.prom", &mut Refuse).unwrap_err();
    assert_eq!(error.to_string(), "in.prom:3: the sink refuses metric \"bad\"");
}

#[test]
fn a_last_line_without_newline_is_read() {
    let (sink, summary) = read("a 1\nb 2").unwrap();
    assert_eq!(summary.lines, 2);
    assert_eq!(sink.samples[1].0, "b");
}

#[test]
fn the_summary_counts_lines_samples_and_timestamps() {
    let (_, summary) = read("# TYPE a gauge\na 1 1\n\na 2\n# EOF\n").unwrap();
    assert_eq!(
        summary,
        ReadSummary {
            lines: 5,
            samples: 2,
            with_timestamp: 1,
            format: Format::OpenMetrics,
            timestamp_unit: Some(TimeUnit::Seconds),
        }
    );
}

#[test]
fn a_byte_order_mark_at_the_start_is_skipped() {
    let sink = read_ok("\u{feff}a 1\n");
    assert_eq!(sink.samples[0].0, "a");
}
