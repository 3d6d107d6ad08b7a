//! Webhook intake, the pure part (issue 9's intake speed: the handler's share of a
//! webhook): parsing the real Alertmanager webhook of the slow-sink capture (1.5 KB) and
//! planning its intakes. The whole path under HTTP load is `examples/webhook_bench.rs`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use culprit::config::ServiceConfig;
use culprit::service::intake;

fn bench(c: &mut Criterion) {
    let body =
        std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/captures/slow-sink/alerts/webhook-0001.json"))
            .expect("the slow-sink capture's webhook");
    let cfg = ServiceConfig::default();
    c.bench_function("intake/parse", |b| b.iter(|| intake::parse(black_box(&body)).unwrap()));
    let webhook = intake::parse(&body).unwrap();
    c.bench_function("intake/plan", |b| b.iter(|| intake::plan(black_box(&webhook), &cfg)));
    c.bench_function("intake/parse_and_plan", |b| {
        b.iter(|| intake::plan(&intake::parse(black_box(&body)).unwrap(), &cfg))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
