//! Read and diagnose a synthetic job (issue target: 1,000 vertices × 128 subtasks × 60
//! samples per series in ≤ 1 s and ≤ 300 MB peak RSS; RSS is measured on the CLI with
//! `/usr/bin/time -v`, see `examples/synthetic.rs`).
//!
//! `CULPRIT_BENCH_SIZES` picks sizes as `VxSxN` list, e.g. `1000x128x60,100x64x60`
//! (default `100x64x60`: the full size writes ~12 GB of text, run it on purpose).

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
use culprit::samples::synthetic::SyntheticJob;

fn sizes() -> Vec<SyntheticJob> {
    let spec = std::env::var("CULPRIT_BENCH_SIZES").unwrap_or_else(|_| "100x64x60".into());
    SyntheticJob::parse_sizes(&spec).expect("CULPRIT_BENCH_SIZES")
}

fn bench(c: &mut Criterion) {
    let config = Config::default();
    let catalog = MetricCatalog::default();
    for job in sizes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("job.om");
        job.write_openmetrics(std::fs::File::create(&path).unwrap()).unwrap();
        let plan = job.plan_json();
        let name = format!("{}x{}x{}", job.vertices, job.subtasks, job.samples);

        let mut group = c.benchmark_group("diagnose");
        group.sample_size(10).measurement_time(Duration::from_secs(20));
        group.bench_function(format!("read_and_diagnose/{name}"), |b| {
            b.iter(|| {
                let mut store = SeriesStore::new();
                store.read_path(&path, None).unwrap();
                store.finish();
                let snapshot = block_on(collect(
                    &store,
                    CollectInput {
                        request: &DiagnosisRequest::default(),
                        graph: Some(JobGraph::from_plan_json(&plan).unwrap()),
                        checkpoint_config: None,
                        exceptions: None,
                        rescales: None,
                        config: &config,
                        catalog: &catalog,
                    },
                ))
                .unwrap();
                black_box(culprit::render::words::verdict(&diagnose(&snapshot, &config.diagnosis)))
            })
        });

        // The pure diagnosis alone, on a snapshot taken once.
        let mut store = SeriesStore::new();
        store.read_path(&path, None).unwrap();
        store.finish();
        let snapshot = block_on(collect(
            &store,
            CollectInput {
                request: &DiagnosisRequest::default(),
                graph: Some(JobGraph::from_plan_json(&plan).unwrap()),
                checkpoint_config: None,
                exceptions: None,
                rescales: None,
                config: &config,
                catalog: &catalog,
            },
        ))
        .unwrap();
        group.bench_function(format!("diagnose_only/{name}"), |b| {
            b.iter(|| black_box(culprit::render::words::verdict(&diagnose(&snapshot, &config.diagnosis))))
        });
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
