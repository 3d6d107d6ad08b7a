//! Jobs to run culprit on without a cluster.
//!
//! * [`captures`]: real Flink 2.3 recordings bundled into the binary (`culprit demo`).
//! * [`synthetic`]: a generated job of any size, for benchmarks and scale tests.
//! * [`storm`]: hundreds of generated jobs backpressured at once, for `benches/storm.sh`.

pub mod captures;
pub mod storm;
pub mod synthetic;

use std::collections::BTreeMap;

use crate::model::notice::{Notice, NoticeKind};
use crate::model::verdict::{JobRef, Verdict};

/// The verdict of a bundled capture (`slow-sink`, `hot-key`, …), diagnosed now.
///
/// # Panics
/// When no bundled capture has that name or it does not diagnose: for tests and examples.
pub fn capture_verdict(name: &str) -> Verdict {
    let capture = captures::CAPTURES.iter().find(|c| c.name == name).expect("a bundled capture");
    captures::verdict(capture).expect("the capture diagnoses")
}

/// A notice of `kind` about the slow-sink capture's job (with its verdict for
/// [`NoticeKind::Verdict`]), as the service would plan it for a group that pages: what a
/// renderer's or a router's test starts from.
pub fn notice(kind: NoticeKind) -> Notice {
    let verdict = (kind == NoticeKind::Verdict).then(|| capture_verdict("slow-sink"));
    let job = verdict
        .as_ref()
        .map(|v| v.job.clone())
        .unwrap_or(JobRef { name: "bp-lab-slow-sink".into(), id: "da23ad9af4e7326542c9a70eac958f42".into() });
    Notice {
        links: Default::default(),
        kind,
        group_key: "{}:{alertname=\"FlinkBackpressure\"}".into(),
        labels: BTreeMap::from([
            ("alertname".to_string(), "FlinkBackpressure".to_string()),
            ("severity".to_string(), "page".to_string()),
        ]),
        job,
        verdict,
        verdict_id: Some(42),
        verdict_url: Some("https://culprit.example.com/api/v1/verdicts/42".into()),
        reason: (kind == NoticeKind::CouldNotDiagnose)
            .then(|| "Prometheus at http://prometheus:9090: query failed: HTTP 503 Service Unavailable".into()),
        firing: kind != NoticeKind::Resolved,
        changed: false,
        idempotency_key: "group:1".into(),
        at_ms: 1_795_000_000_000,
        episode: Default::default(),
        maybe_repeat: false,
        incident: None,
        incident_view: None,
        incident_parent: None,
    }
}
