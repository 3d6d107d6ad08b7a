//! The offline path from a recording (Prometheus text exposition or OpenMetrics, plain or
//! gzip): read it into the series store, and when it reads, collect a snapshot of the only
//! job there is, diagnose it and render the verdict as text, JSON and a Slack message that
//! must fit Slack's limits. Must never panic.
#![no_main]

use culprit::collect::block_on;
use culprit::collect::collector::{CollectInput, collect};
use culprit::collect::store::SeriesStore;
use culprit::config::Config;
use culprit::model::notice::{Notice, NoticeKind};
use culprit::model::request::DiagnosisRequest;
use culprit::render::{Format, render, slack};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut store = SeriesStore::new();
    // Samples without a timestamp are taken at 2026-01-01T00:00:00Z, as --at would stamp them.
    if store.read_from(data, "fuzz.om", Some(1_767_225_600_000)).is_err() {
        return;
    }
    store.finish();
    let config = Config::default();
    let request = DiagnosisRequest::default(); // the only job there is, at its newest data
    let input = CollectInput {
        request: &request,
        graph: None,
        checkpoint_config: None,
        config: &config,
        catalog: &config.metrics,
    };
    let Ok(snapshot) = block_on(collect(&store, input)) else { return };
    let verdict = culprit::render::words::verdict(&culprit::diagnose::diagnose(&snapshot, &config.diagnosis));
    let _ = render(&verdict, Format::Text);
    let _ = render(&verdict, Format::Json);
    let notice = Notice {
        kind: NoticeKind::Verdict,
        group_key: "{}:{alertname=\"FlinkJobBackpressured\"}".into(),
        labels: Default::default(),
        job: verdict.job.clone(),
        verdict: Some(verdict),
        verdict_id: Some(1),
        verdict_url: None,
        reason: None,
        firing: true,
        changed: false,
        idempotency_key: "fuzz".into(),
        at_ms: 1_767_225_600_000,
        episode: Default::default(),
        links: Default::default(),
    };
    let message = slack::message(&notice);
    assert!(slack::slack_len(&message.text) <= slack::MAX_FALLBACK_TEXT, "{}", message.text);
    assert!(message.blocks.len() <= slack::MAX_BLOCKS);
});
