//! Reading a recording: the exposition parser alone, and the parser filling the series
//! store (compressed samples), in bytes of OpenMetrics text per second. Small sizes so it
//! runs in seconds; `benches/recording.sh` measures the 1,000 × 128 × 60 run's peak RSS
//! and compares with promtool.
//!
//! `CULPRIT_BENCH_SIZES` picks sizes as a `VxSxN` list (default `10x16x60,40x32x60`).

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use culprit::collect::exposition::{self, SampleLine, SampleSink};
use culprit::collect::store::SeriesStore;
use culprit::samples::synthetic::SyntheticJob;

/// Counts samples and touches every value: the parser's cost without a store.
#[derive(Default)]
struct Count(u64, f64);

impl SampleSink for Count {
    fn sample(&mut self, line: &SampleLine<'_>, _t_ms: Option<i64>) -> Result<(), String> {
        self.0 += 1;
        self.1 += line.value;
        Ok(())
    }
}

fn sizes() -> Vec<SyntheticJob> {
    let spec = std::env::var("CULPRIT_BENCH_SIZES").unwrap_or_else(|_| "10x16x60,40x32x60".into());
    SyntheticJob::parse_sizes(&spec).expect("CULPRIT_BENCH_SIZES")
}

fn bench(c: &mut Criterion) {
    for job in sizes() {
        let text = job.write_openmetrics(Vec::new()).unwrap();
        let name = format!("{}x{}x{}", job.vertices, job.subtasks, job.samples);
        let mut group = c.benchmark_group("recording");
        group.sample_size(10).measurement_time(Duration::from_secs(3)).throughput(Throughput::Bytes(text.len() as u64));
        group.bench_function(format!("parse/{name}"), |b| {
            b.iter(|| {
                let mut sink = Count::default();
                exposition::read_from(&text[..], "bench", &mut sink).unwrap();
                black_box((sink.0, sink.1))
            })
        });
        group.bench_function(format!("read_into_store/{name}"), |b| {
            b.iter(|| {
                let mut store = SeriesStore::new();
                store.read_from(&text[..], "bench", None).unwrap();
                store.finish();
                black_box(store.stats())
            })
        });
        group.finish();
        let mut store = SeriesStore::new();
        store.read_from(&text[..], "bench", None).unwrap();
        store.finish();
        let stats = store.stats();
        eprintln!(
            "recording/{name}: {} bytes of text, {} series, {} samples in {} bytes ({:.2} bytes a sample)",
            text.len(),
            stats.series,
            stats.samples,
            store.sample_bytes(),
            store.sample_bytes() as f64 / stats.samples as f64
        );
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
