//! The verdict page of a large job (issue target: a 100-vertex × 64-subtask verdict's page
//! ≤ 300 KB and rendered in ≤ 50 ms; a capture's page ≤ 60 KB, asserted in
//! tests/renderings.rs). Prints each page's size; criterion times the rendering.
//!
//! `CULPRIT_BENCH_SIZES` picks sizes as `VxSxN`, e.g. `100x64x60,300x16x60` (default
//! `100x64x60`).

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use culprit::collect::block_on;
use culprit::collect::collector::{CollectInput, collect};
use culprit::collect::store::SeriesStore;
use culprit::config::Config;
use culprit::diagnose::diagnose;
use culprit::model::catalog::MetricCatalog;
use culprit::model::graph::JobGraph;
use culprit::model::request::DiagnosisRequest;
use culprit::render::html;
use culprit::samples::synthetic::SyntheticJob;

fn sizes() -> Vec<SyntheticJob> {
    let spec = std::env::var("CULPRIT_BENCH_SIZES").unwrap_or_else(|_| "100x64x60".into());
    SyntheticJob::parse_sizes(&spec).expect("CULPRIT_BENCH_SIZES")
}

fn bench(c: &mut Criterion) {
    let config = Config::default();
    for job in sizes() {
        let mut text = Vec::new();
        job.write_openmetrics(&mut text).unwrap();
        let mut store = SeriesStore::new();
        store.read_from(&text[..], "synthetic", None).unwrap();
        store.finish();
        let snapshot = block_on(collect(
            &store,
            CollectInput {
                request: &DiagnosisRequest::default(),
                graph: Some(JobGraph::from_plan_json(&job.plan_json()).unwrap()),
                checkpoint_config: None,
                exceptions: None,
                rescales: None,
                config: &config,
                catalog: &MetricCatalog::default(),
            },
        ))
        .unwrap();
        let verdict = culprit::render::words::verdict(&diagnose(&snapshot, &config.diagnosis));
        let name = format!("{}x{}x{}", job.vertices, job.subtasks, job.samples);
        let page = html::page(&verdict);
        eprintln!(
            "page/{name}: {} bytes ({:.1} KB), {} vertices",
            page.len(),
            page.len() as f64 / 1024.0,
            verdict.graph.vertices.len()
        );
        let mut group = c.benchmark_group("page");
        group.sample_size(20).measurement_time(Duration::from_secs(5));
        group.bench_function(format!("render/{name}"), |b| b.iter(|| black_box(html::page(black_box(&verdict)))));
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
