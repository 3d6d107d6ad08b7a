//! The verdict's picture (issue 26): PNG bytes and time of a bundled capture's verdict
//! (`slow-sink`) and of a large synthetic job's (default 100 vertices × 64 subtasks).
//! Prints each PNG's size and height; criterion times the SVG and the PNG.
//!
//! `CULPRIT_BENCH_SIZES` picks the synthetic sizes as `VxSxN`, e.g. `100x64x60` (the
//! default); `CULPRIT_PICTURE_OUT=dir` also writes each PNG there, to look at.

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
use culprit::model::verdict::Verdict;
use culprit::render::png;
use culprit::samples::synthetic::SyntheticJob;

fn synthetic(job: &SyntheticJob, config: &Config) -> Verdict {
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
            config,
            catalog: &MetricCatalog::default(),
        },
    ))
    .unwrap();
    culprit::render::words::verdict(&diagnose(&snapshot, &config.diagnosis))
}

fn verdicts() -> Vec<(String, Verdict)> {
    let config = Config::default();
    let capture = culprit::samples::captures::CAPTURES.iter().find(|c| c.name == "slow-sink").unwrap();
    let mut out = vec![(format!("capture/{}", capture.name), culprit::samples::captures::verdict(capture).unwrap())];
    let spec = std::env::var("CULPRIT_BENCH_SIZES").unwrap_or_else(|_| "100x64x60".into());
    for job in SyntheticJob::parse_sizes(&spec).expect("CULPRIT_BENCH_SIZES") {
        out.push((format!("{}x{}x{}", job.vertices, job.subtasks, job.samples), synthetic(&job, &config)));
    }
    out
}

fn bench(c: &mut Criterion) {
    for (name, verdict) in verdicts() {
        let bytes = png::png(&verdict).expect("the picture draws");
        let height = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
        eprintln!(
            "picture/{name}: {} bytes ({:.1} KB), {} × {height} px, {} vertices",
            bytes.len(),
            bytes.len() as f64 / 1024.0,
            png::WIDTH,
            verdict.graph.vertices.len()
        );
        if let Ok(dir) = std::env::var("CULPRIT_PICTURE_OUT") {
            std::fs::write(std::path::Path::new(&dir).join(format!("{}.png", name.replace('/', "-"))), &bytes).unwrap();
        }
        let mut group = c.benchmark_group("picture");
        group.sample_size(10).measurement_time(Duration::from_secs(5));
        group.bench_function(format!("svg/{name}"), |b| b.iter(|| black_box(png::picture_svg(black_box(&verdict)))));
        group.bench_function(format!("png/{name}"), |b| b.iter(|| black_box(png::png(black_box(&verdict)).unwrap())));
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
