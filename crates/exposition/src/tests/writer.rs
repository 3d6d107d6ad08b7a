//! The OpenMetrics writer, read back by the reader.

use super::*;

fn write_all_samples(samples: &[ToWrite<'_>]) -> String {
    let mut writer = OpenMetricsWriter::new(Vec::new());
    writer.metric_type("a", MetricType::Gauge).unwrap();
    for (name, labels, value, t) in samples {
        writer.sample(name, labels, *value, *t).unwrap();
    }
    String::from_utf8(writer.finish().unwrap()).unwrap()
}

#[test]
fn the_writer_writes_seconds_with_millisecond_precision_and_eof() {
    let text = write_all_samples(&[
        ("a", vec![("b", "c")], 1.5, Some(1_795_948_507_780)),
        ("a", vec![], 2.0, Some(-1500)),
        ("a", vec![], 1e-300, Some(7)),
        ("a", vec![], f64::NAN, None),
        ("a", vec![], f64::NEG_INFINITY, Some(0)),
    ]);
    assert_eq!(
        text,
        "# TYPE a gauge\na{b=\"c\"} 1.5 1795948507.780\na 2 -1.500\na 1e-300 0.007\na NaN\na -Inf 0.000\n# EOF\n"
    );
    let (sink, summary) = read(&text).unwrap();
    assert_eq!(summary.format, Format::OpenMetrics);
    let ts: Vec<_> = sink.samples.iter().map(|s| s.3).collect();
    assert_eq!(ts, [Some(1_795_948_507_780), Some(-1500), Some(7), None, Some(0)]);
}

#[test]
fn the_writer_escapes_label_values_and_quotes_other_names() {
    let text = write_all_samples(&[
        ("my.metric", vec![("a.b", "x\\y\"z\nw"), ("c", "},=")], 1.0, None),
        ("dotted.only", vec![], 2.0, None),
    ]);
    assert!(text.contains("{\"my.metric\",\"a.b\"=\"x\\\\y\\\"z\\nw\",c=\"},=\"} 1\n"), "{text}");
    assert!(text.contains("{\"dotted.only\"} 2\n"), "{text}");
    let sink = read_ok(&text);
    assert_eq!(sink.samples[0].0, "my.metric");
    assert_eq!(sink.samples[0].1, pairs(&[("a.b", "x\\y\"z\nw"), ("c", "},=")]));
    assert_eq!(sink.samples[1].0, "dotted.only");
}

#[test]
fn the_writer_rejects_empty_and_duplicate_names() {
    let mut writer = OpenMetricsWriter::new(Vec::new());
    for (name, labels) in [("", vec![]), ("a", vec![("", "x")]), ("a", vec![("b", "x"), ("b", "y")])] {
        let error = writer.sample(name, &labels, 1.0, None).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
    }
    assert!(writer.metric_type("", MetricType::Gauge).is_err());
    // Nothing of a rejected line reaches the output.
    assert_eq!(writer.finish().unwrap(), b"# EOF\n");
}

#[test]
fn names_holding_quotes_backslashes_and_newlines_are_written_quoted_with_escapes_and_read_back() {
    // The allow-utf-8 escaping scheme of Prometheus 3: inside quotes, `\`, `"` and a
    // newline are escaped with a backslash, as in label values.
    let mut writer = OpenMetricsWriter::new(Vec::new());
    writer.metric_type("a\"b", MetricType::Gauge).unwrap();
    writer.sample("a\"b", &[("c\\d", "v"), ("e\nf", "w")], 1.0, Some(1000)).unwrap();
    let text = String::from_utf8(writer.finish().unwrap()).unwrap();
    assert_eq!(text, "# TYPE \"a\\\"b\" gauge\n{\"a\\\"b\",\"c\\\\d\"=\"v\",\"e\\nf\"=\"w\"} 1 1.000\n# EOF\n");
    let sink = read_ok(&text);
    assert_eq!(sink.types, [("a\"b".to_owned(), MetricType::Gauge)]);
    assert_eq!(sink.samples[0].0, "a\"b");
    assert_eq!(sink.samples[0].1, pairs(&[("c\\d", "v"), ("e\nf", "w")]));
}

#[test]
fn written_values_read_back_bit_exactly() {
    let values = [
        0.0,
        -0.0,
        1.0,
        0.1,
        1.0 / 3.0,
        123_456_789.123_456_78,
        1e15,
        1e16,
        9_007_199_254_740_993.0,
        1e-5,
        9.999_999e-6,
        f64::MIN_POSITIVE,
        f64::MIN_POSITIVE / 3.0,
        f64::MAX,
        f64::MIN,
        f64::EPSILON,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ];
    let mut writer = OpenMetricsWriter::new(Vec::new());
    for v in values {
        writer.sample("v", &[], v, None).unwrap();
    }
    let text = String::from_utf8(writer.finish().unwrap()).unwrap();
    let sink = read_ok(&text);
    for (written, (_, _, read, _)) in values.iter().zip(&sink.samples) {
        assert_eq!(written.to_bits(), read.to_bits(), "{written:e} in {text}");
    }
}
