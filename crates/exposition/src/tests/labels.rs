//! Label sets, quoted names and `promtool tsdb dump` lines.

use super::*;

#[test]
fn label_values_are_unescaped_in_labels() {
    let sink = read_ok(r#"a{b="x\\y\"z\nw",c="},=#"} 1"#);
    assert_eq!(sink.samples[0].1, pairs(&[("b", "x\\y\"z\nw"), ("c", "},=#")]));
    let text = r#"a{b="plain",c="x\"y"} 1"#;
    let (sample, _) = parse_sample(text).unwrap();
    let labels = sample.labels().unwrap();
    assert!(matches!(labels[0].1, Cow::Borrowed("plain")));
    assert!(matches!(&labels[1].1, Cow::Owned(v) if v == "x\"y"));
}

#[test]
fn an_unknown_escape_in_a_label_value_is_an_error_naming_its_line() {
    let message = error_at("a 1\na{b=\"x\\ty\"} 1\n", 2);
    assert!(message.starts_with("invalid escape sequence \"\\\\t\""), "{message}");
}

#[test]
fn labels_tolerate_trailing_comma_whitespace_and_empty_sets() {
    let sink = read_ok("a{} 1\na{ } 1\na{b=\"c\",} 1\na{ b = \"c\" , d=\"e\" , } 1\n");
    assert!(sink.samples[0].1.is_empty());
    assert!(sink.samples[1].1.is_empty());
    assert_eq!(sink.samples[2].1, pairs(&[("b", "c")]));
    assert_eq!(sink.samples[3].1, pairs(&[("b", "c"), ("d", "e")]));
    let (sample, _) = parse_sample("a{ b = \"c\" , } 1").unwrap();
    assert_eq!(sample.labels_raw, " b = \"c\" , ");
}

#[test]
fn labels_keep_their_written_order() {
    let sink = read_ok("a{z=\"1\",a=\"2\",m=\"3\"} 1\n");
    assert_eq!(sink.samples[0].1, pairs(&[("z", "1"), ("a", "2"), ("m", "3")]));
}

#[test]
fn duplicate_label_names_are_an_error_from_labels() {
    let line = SampleLine::new("a", "b=\"1\",c=\"2\",b=\"3\"", 1.0);
    assert_eq!(line.labels().unwrap_err(), "duplicate label name \"b\" in the label set");
    let message = error_at("a 1\na{b=\"1\",b=\"2\"} 1\n", 2);
    assert!(message.contains("duplicate label name"), "{message}");
}

#[test]
fn labels_of_a_hand_made_sample_line_report_syntax_errors() {
    for raw in ["b=\"1\"}", "b=1", "b", "=\"1\"", "b=\"1\" c=\"2\"", "b=\"1", ",", "\"q\""] {
        let line = SampleLine::new("a", raw, 1.0);
        assert!(line.labels().is_err(), "{raw}");
    }
}

#[test]
fn malformed_label_sets_are_errors_naming_their_line() {
    let cases = [
        ("a{b=\"c\" 1", "expected ',' or '}' after \"b\" in the label set, found \"1\""),
        ("a{b=\"c\",", "the label set is not closed with '}'"),
        ("a{b=\"c} 1", "the value of label \"b\" is not closed with '\"'"),
        ("a{b} 1", "expected '=' after label name \"b\", found \"} 1\""),
        ("a{b=c} 1", "expected a double-quoted value for label \"b\", found \"c} 1\""),
        ("a{b=\"c\" d=\"e\"} 1", "expected ',' or '}' after \"b\" in the label set, found \"d=\\\"e\\\"} 1\""),
        ("a{,} 1", "expected a label name in the label set, found \",} 1\""),
        ("a{b=\"c\",,} 1", "expected a label name in the label set, found \",} 1\""),
        ("a{1b=\"c\"} 1", "expected a label name in the label set, found \"1b=\\\"c\\\"} 1\""),
        ("a{b:c=\"d\"} 1", "expected '=' after label name \"b\", found \":c=\\\"d\\\"} 1\""),
    ];
    for (line, expected) in cases {
        let message = error_at(&format!("ok 1\n# c\n{line}\n"), 3);
        assert_eq!(message, expected, "{line}");
    }
}

#[test]
fn prometheus_3_quoted_names_are_read() {
    let sink = read_ok(
        "{\"my.metric\", \"a.b\"=\"x\", c=\"y\"} 1\n{\"only.name\"} 2\n{\"n\",} 3\nplain{\"dotted.label\"=\"v\"} 4\n",
    );
    assert_eq!(sink.samples[0].0, "my.metric");
    assert_eq!(sink.samples[0].1, pairs(&[("a.b", "x"), ("c", "y")]));
    assert_eq!(sink.samples[1].0, "only.name");
    assert!(sink.samples[1].1.is_empty());
    assert_eq!(sink.samples[2].0, "n");
    assert_eq!(sink.samples[3].1, pairs(&[("dotted.label", "v")]));
    let (sample, _) = parse_sample("{\"my.metric\", \"a.b\"=\"x\"} 1").unwrap();
    assert_eq!(sample.labels_raw, " \"a.b\"=\"x\"");
}

#[test]
fn quoted_names_hold_the_escapes_of_label_values() {
    // Prometheus 3's escaping schemes: inside quotes, `\\`, `\"` and `\n` are escaped;
    // the quoted form of the text exposition and OpenMetrics, metric and label names.
    let sink = read_ok(
        "{\"my\\\"metric\", \"a\\\\b\"=\"x\", \"new\\nline\"=\"y\"} 1\n{\"my\\\"metric\", \"a\\\\b\"=\"x\", \"new\\nline\"=\"y\"} 2\n",
    );
    for sample in &sink.samples {
        assert_eq!(sample.0, "my\"metric");
        assert_eq!(sample.1, pairs(&[("a\\b", "x"), ("new\nline", "y")]));
    }
    let sink = read_ok("# TYPE \"a\\\"b\" counter\n{\"a\\\"b\"} 1\n");
    assert_eq!(sink.types, [("a\"b".to_owned(), MetricType::Counter)]);
    // Any other escape is refused, as in values.
    let message = error_at("{\"my\\tmetric\"} 1\n", 1);
    assert!(message.starts_with("invalid escape sequence \"\\\\t\" in a quoted name"), "{message}");
}

#[test]
fn quoted_names_out_of_place_are_rejected_with_a_clear_error() {
    let message = error_at("a{\"q\"} 1\n", 1);
    assert_eq!(message, "unexpected quoted metric name \"q\" in the label set of \"a\"");
    let message = error_at("{a=\"b\", \"q\"} 1\n", 1);
    assert_eq!(message, "the quoted metric name \"q\" must come first in the label set");
    let message = error_at("{a=\"b\"} 1\n", 1);
    assert_eq!(
        message,
        "expected a metric name (a quoted name first in the label set, or a __name__ label), found label \"a\""
    );
    // The exposition's escapes only, in the quoted form.
    let message = error_at("{\"q\", a=\"x\\ty\"} 1\n", 1);
    assert!(message.starts_with("invalid escape sequence \"\\\\t\""), "{message}");
    let message = error_at("{\"q\", \"r\"} 1\n", 1);
    assert_eq!(message, "the quoted metric name \"r\" must come first in the label set");
    error_at("{} 1\n", 1);
    error_at("{\"\"} 1\n", 1);
}

#[test]
fn promtool_tsdb_dump_lines_are_read_with_the_name_from_the_name_label() {
    // `promtool tsdb dump` before Prometheus 2.49: labels sorted (an upper-case label
    // before `__name__`), `", "` separators, Go-quoted values, `%g` values, ms times.
    let text = "{__name__=\"flink_uptime\", host=\"127_0_0_1\", job=\"flink\"} 998 1795948512780\n\
                {A=\"x\\ty\\u00e9\\x41\", __name__=\"m\"} 1.795948507e+09 1795948517780\n\
                {__name__=\"m\"} NaN 1795948522780\n";
    let (sink, summary) = read(text).unwrap();
    assert_eq!(summary.samples, 3);
    assert_eq!(summary.timestamp_unit, Some(TimeUnit::Milliseconds));
    assert_eq!(sink.samples[0].0, "flink_uptime");
    assert_eq!(sink.samples[0].1, pairs(&[("host", "127_0_0_1"), ("job", "flink")]));
    assert_eq!(sink.samples[0].2, 998.0);
    assert_eq!(sink.samples[0].3, Some(1_795_948_512_780));
    assert_eq!(sink.samples[1].0, "m");
    assert_eq!(sink.samples[1].1, pairs(&[("A", "x\tyéA")]));
    assert_eq!(sink.samples[1].2, 1_795_948_507.0);
    assert!(sink.samples[2].2.is_nan() && sink.samples[2].1.is_empty());
    let (sample, _) = parse_sample("{__name__=\"m\", a=\"b\"} 1 2").unwrap();
    assert_eq!(sample.form, LineForm::PromtoolDump);
}

#[test]
fn a_name_label_that_is_empty_doubled_escaped_or_beside_another_name_is_an_error() {
    assert_eq!(error_at("{__name__=\"\"} 1\n", 1), "the __name__ label is empty");
    assert!(error_at("{__name__=\"a\", __name__=\"b\"} 1\n", 1).starts_with("duplicate label name"));
    assert_eq!(
        error_at("{\"q\", __name__=\"a\"} 1\n", 1),
        "the metric \"q\" is named twice: as a quoted name and as a __name__ label"
    );
    assert_eq!(
        error_at("m{__name__=\"a\"} 1\n", 1),
        "a __name__ label in the label set of \"m\": the metric is named twice"
    );
    // A byte of invalid UTF-8 or a surrogate cannot be a label value.
    assert!(error_at("{__name__=\"a\", b=\"\\xff\"} 1\n", 1).starts_with("invalid escape sequence"));
    assert!(error_at("{__name__=\"a\", b=\"\\ud800\"} 1\n", 1).starts_with("invalid escape sequence"));
}

#[test]
fn the_name_label_of_promtool_tsdb_dump_is_unescaped_like_its_other_values() {
    // Prometheus 3's `promtool tsdb dump` writes labels with `labels.String()`: the name
    // as `__name__`, every value and every non-legacy label name `strconv.Quote`d.
    let sink = read_ok("{__name__=\"flink.a\\tb\", \"a.b\"=\"x\"} 1 1795948512780\n");
    assert_eq!(sink.samples[0].0, "flink.a\tb");
    assert_eq!(sink.samples[0].1, pairs(&[("a.b", "x")]));
}

#[test]
fn promtool_3_dump_openmetrics_lines_with_raw_utf8_names_are_read() {
    // Prometheus 3's `promtool tsdb dump-openmetrics` prints `%s%s %g %.3f` with the
    // metric name raw and `CondensedString` labels: names raw, values `strconv.Quote`d
    // (cmd/promtool/tsdb.go, formatSeriesSetOpenMetrics). Dotted names stay unquoted.
    let text = "flink.taskmanager.job.task.busyTimeMsPerSecond{job_id=\"j\",task.name=\"a\\tb\\u00e9\"} 990 1795000000.000\n\
                flink.taskmanager.job.task.busyTimeMsPerSecond{job_id=\"j\",task.name=\"a\\tb\\u00e9\"} 985 1795000015.000\n\
                flink.jobmanager.job.uptime{} 9e+05 1795000015.000\n# EOF\n";
    let (sink, summary) = read(text).unwrap();
    assert_eq!(summary.samples, 3);
    for sample in &sink.samples[..2] {
        assert_eq!(sample.0, "flink.taskmanager.job.task.busyTimeMsPerSecond");
        assert_eq!(sample.1, pairs(&[("job_id", "j"), ("task.name", "a\tbé")]));
    }
    assert_eq!((sink.samples[2].0.as_str(), sink.samples[2].2), ("flink.jobmanager.job.uptime", 900_000.0));
    let (sample, _) = parse_sample("a.b{c=\"d\"} 1 2").unwrap();
    assert_eq!(sample.form, LineForm::PromtoolOpenMetrics);
    // Exposition text keeps its rules: a legacy name is never read in promtool's form.
    assert!(error_at("a{b=\"x\\ty\"} 1\n", 1).starts_with("invalid escape sequence"));
    // A raw name without braces, or with a blank, is no line of promtool's.
    assert!(error_at("a.b 1\n", 1).starts_with("unexpected character '.' after metric name"));
    assert!(error_at("a.b c{} 1\n", 1).starts_with("unexpected character '.' after metric name"));
}

#[test]
fn promtool_dump_openmetrics_lines_are_read() {
    // `promtool tsdb dump-openmetrics` (2.49+): `%s%s %g %.3f`, condensed label sets,
    // `{}` for a series without labels, `# EOF`.
    let text = "flink_uptime{host=\"h\",job=\"flink\"} 998 1795948512.780\nup{} 1 1795948512.780\n# EOF\n";
    let (sink, summary) = read(text).unwrap();
    assert_eq!(summary.format, Format::OpenMetrics);
    assert_eq!(sink.samples[0].1, pairs(&[("host", "h"), ("job", "flink")]));
    assert_eq!(sink.samples[1].3, Some(1_795_948_512_780));
}
