//! Timestamps: seconds or milliseconds, rounding, range, one unit an input.

use super::*;

#[test]
fn a_timestamp_past_the_year_9999_is_refused_with_its_line() {
    // The fuzzer's input (fuzz/recording): 8887166017908759.501 s is ~2.8e8 years out;
    // 253402300800 s is 10000-01-01T00:00:00Z, past the last time jiff names
    // (9999-12-30T22:00:00Z = 253402207200 s); 253402000000 s is before it.
    let fuzzed = "flink_up{a=\"b\"} 1 1796068789.501\nflink_up{a=\"c\"} 616 8887166017908759.501\n# EOF\n";
    let m = error_at(fuzzed, 2);
    assert_eq!(m, "timestamp \"8887166017908759.501\" is outside the years -9999 to 9999");
    assert!(error_at("m 1 253402300800.0\n", 1).contains("outside the years"));
    assert_eq!(read_ok("m 1 253402000000.0\n").samples.len(), 1);
    assert!(error_at("m 1 -9223372036854775808\n", 1).contains("outside the years"));
}

#[test]
fn an_openmetrics_recording_with_timestamps_in_seconds_reads_as_milliseconds() {
    let text = "\
# TYPE up gauge
up{instance=\"127.0.0.1:9251\",job=\"flink\"} 1 1795949325.765
up{instance=\"127.0.0.1:9251\",job=\"flink\"} 0 1795949330
# EOF
";

    let (sink, summary) = read(text).unwrap();
    assert_eq!(summary.format, Format::OpenMetrics);
    assert_eq!(summary.with_timestamp, 2);
    assert_eq!(sink.samples[0].3, Some(1_795_949_325_765));
    assert_eq!(sink.samples[1].3, Some(1_795_949_330_000));
}

#[test]
fn text_format_timestamps_in_milliseconds_are_kept_as_milliseconds() {
    let sink = read_ok("a 1 1795949325765\na 2 -1795949325765\n");
    assert_eq!(sink.samples[0].3, Some(1_795_949_325_765));
    assert_eq!(sink.samples[1].3, Some(-1_795_949_325_765));
}

#[test]
fn a_timestamp_contradicting_the_first_unit_is_an_error_naming_its_line() {
    let message = error_at("a 1 1795949325.765\nb 1\na 2 1795949330765\n", 3);
    assert!(message.contains("milliseconds"), "{message}");
    assert!(message.contains("(line 1) was in seconds"), "{message}");
    let message = error_at("# c\na 1 1795949325765\na 2 1795949330.5\n", 3);
    assert!(message.contains("(line 2) was in milliseconds"), "{message}");
    error_at("a 1 1795949325765\na 2 1795949330\n", 2);
}

#[test]
fn seconds_timestamps_round_to_the_nearest_millisecond() {
    let sink = read_ok(
        "a 1 1795948507.780\na 1 1795948507.7804\na 1 1795948507.7805\na 1 1.7959485077806e9\na 1 -1.0005\na 1 12\na 1 .5\n",
    );
    let ts: Vec<_> = sink.samples.iter().map(|s| s.3.unwrap()).collect();
    assert_eq!(ts, [1_795_948_507_780, 1_795_948_507_780, 1_795_948_507_781, 1_795_948_507_781, -1001, 12_000, 500]);
}

#[test]
fn a_timestamp_that_is_not_a_number_is_an_error_naming_its_line() {
    let message = error_at("a 1 1\na 1 NaN\n", 2);
    assert_eq!(message, "expected a timestamp after the sample value, found \"NaN\"");
    error_at("a 1 1e400\n", 1);
    error_at("a 1 99999999999999999999\n", 1);
    error_at("a 1 1.5x\n", 1);
}
