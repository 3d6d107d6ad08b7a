//! The recording reader: Prometheus text exposition or OpenMetrics, plain or gzip, into the
//! compressed series store, then every stored sample read back through a range query (so
//! the chunk encoding is decoded too). Must never panic; what it keeps is what it read.
//! (`recording_diagnosis` goes on to collection, diagnosis and rendering: slower.)
#![no_main]

use culprit::collect::query::{Hygiene, MatchOp, Matcher, Query, Selector};
use culprit::collect::store::SeriesStore;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut store = SeriesStore::new();
    // Samples without a timestamp are taken at 2026-01-01T00:00:00Z, as --at would stamp them.
    let Ok(summary) = store.read_from(data, "fuzz.om", Some(1_767_225_600_000)) else { return };
    store.finish();
    let stats = store.stats();
    assert!(stats.samples <= summary.samples, "kept {} of {} samples read", stats.samples, summary.samples);
    let (Some(first), Some(last)) = (store.first_timestamp_ms(), store.last_timestamp_ms()) else {
        assert_eq!(stats.samples, 0);
        return;
    };
    assert!(first <= last);
    // Every series (a non-empty name ends with ""), at ten steps over the whole span.
    let every = Selector {
        matchers: vec![Matcher { label: "__name__".into(), op: MatchOp::EndsWith(String::new()) }],
        hygiene: Hygiene::default(),
    };
    let step_ms = ((last - first) / 10).max(1);
    let result = store.evaluate(&Query::Range {
        selector: every,
        aggregation: None,
        start_ms: first,
        end_ms: first.saturating_add(step_ms.saturating_mul(10)),
        step_ms,
    });
    assert!(result.len() <= stats.series);
    for series in &result {
        assert!(series.points.windows(2).all(|w| w[0].0 < w[1].0), "{:?}", series.points);
    }
});
