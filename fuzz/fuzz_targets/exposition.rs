//! Arbitrary bytes into the exposition reader: it must never panic, every error must name
//! a line in one line of text, and every label set it accepts must split into pairs (only
//! a duplicate label name may fail).
//!
//! Run with `cargo +nightly fuzz run exposition` from the repository root.

#![no_main]

use culprit::collect::exposition::{MetricType, SampleLine, SampleSink, read_from};
use libfuzzer_sys::fuzz_target;

struct Check {
    samples: u64,
}

impl SampleSink for Check {
    fn sample(&mut self, line: &SampleLine<'_>, _t_ms: Option<i64>) -> Result<(), String> {
        match line.labels() {
            Ok(pairs) => {
                for (name, value) in &pairs {
                    assert!(!name.is_empty());
                    // Touch the unescaped value so the whole of it is checked.
                    std::hint::black_box(value.len());
                }
            }
            Err(message) => assert!(
                message.starts_with("duplicate label name"),
                "the reader accepted {:?} but labels() says: {message}",
                line.labels_raw
            ),
        }
        self.samples += 1;
        Ok(())
    }

    fn metric_type(&mut self, family: &str, _kind: MetricType) {
        assert!(!family.is_empty());
    }
}

fuzz_target!(|data: &[u8]| {
    let mut sink = Check { samples: 0 };
    match read_from(data, "fuzz", &mut sink) {
        Ok(summary) => assert_eq!(summary.samples, sink.samples),
        Err(error) => {
            assert!(error.line.is_some(), "{error}");
            assert!(!error.to_string().contains('\n'), "{error}");
        }
    }
});
