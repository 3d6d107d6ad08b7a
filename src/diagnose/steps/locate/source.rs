//! Nothing is backpressured: a source whose lag grows steadily is the culprit (finding
//! `source`); and the lag a source reads behind.

use super::Located;
use crate::diagnose::signals::VertexSignals;
use crate::diagnose::steps::headroom;
use crate::diagnose::{Context, StepReport, slope_per_s};
use crate::model::facts::locate::LocateFact;
use crate::model::verdict::Finding;

/// Nothing backpressured: the source is the culprit when its lag grows steadily and it is
/// busy — or its busy time is unknown (legacy sources report NaN), with lowered
/// confidence. A source chain that holds an async I/O operator waiting on its service
/// (busy, with idle CPUs) is `async_io` instead: more source parallelism would only add
/// waiting slots in front of the same slow service.
pub(super) fn source_bound(ctx: &Context) -> Located {
    let t = &ctx.cfg.thresholds;
    for v in ctx.signals.vertices.iter().filter(|v| v.is_source) {
        let busy = v.busy_max();
        if busy.is_some_and(|b| b < t.source_busy_ratio) {
            continue;
        }
        let Some(growth) = steady_growth(&source_lag(ctx, &v.id)) else { continue };
        if let Some(report) = v.utilisation().and_then(|rho| headroom::async_io(ctx, v, rho)) {
            return Located { report, culprits: vec![v.id.clone()], network: Vec::new() };
        }
        return Located {
            report: source_report(ctx, v, busy, growth),
            culprits: vec![v.id.clone()],
            network: Vec::new(),
        };
    }
    Located {
        report: StepReport::clear(LocateFact::NothingRed { backpressured_threshold_ratio: t.backpressured_ratio }),
        culprits: Vec::new(),
        network: Vec::new(),
    }
}

/// The report naming source `v` (busy `busy`, unknown when `None`) whose lag grows by
/// `growth` records/s.
fn source_report(ctx: &Context, v: &VertexSignals, busy: Option<f64>, growth: f64) -> StepReport {
    let t = &ctx.cfg.thresholds;
    let vertex = || v.name.clone();
    let mut r = StepReport::hit(
        Finding::Source,
        LocateFact::SourceBound { vertex: vertex(), busy_ratio: busy, lag_growth_records_per_s: growth },
    );
    r.cause.push(LocateFact::SourceCannotKeepUp {
        vertex: vertex(),
        busy_ratio: busy,
        emitted_records_per_s: v.throughput(),
        lag_growth_records_per_s: growth,
    });
    r.fix.push(LocateFact::RaiseSourceParallelism { vertex: vertex(), parallelism: v.parallelism });
    r.fix.push(LocateFact::TuneFetch);
    if busy.is_none() {
        r.fix.push(LocateFact::MoveToFlip27);
    }
    r.summary =
        Some(LocateFact::SourceCulprit { vertex: vertex(), busy_ratio: busy, lag_growth_records_per_s: growth }.into());
    if let Some(b) = busy {
        r.evidence.push(ctx.evidence(&v.name, "busyTimeMsPerSecond", b, "ratio", Some(t.source_busy_ratio), "busy"));
    }
    r.evidence.push(ctx.evidence(&v.name, "lag growth", growth, "records/s", Some(0.0), "pending_records"));
    r
}

/// The growth of a lag series, records/s, when it grows steadily: the least-squares slope,
/// when the growth it makes over the series' span exceeds the spread of the lag around the
/// line (an exporter's lag saw-tooths with the checkpoints, because Flink commits offsets
/// only when one completes: that is not growth).
pub fn steady_growth(points: &[(i64, f64)]) -> Option<f64> {
    let slope = slope_per_s(points).filter(|g| *g > 0.0)?;
    let pts: Vec<(f64, f64)> = points.iter().filter(|p| p.1.is_finite()).map(|p| (p.0 as f64 / 1000.0, p.1)).collect();
    let n = pts.len() as f64;
    let (mt, mv) = (pts.iter().map(|p| p.0).sum::<f64>() / n, pts.iter().map(|p| p.1).sum::<f64>() / n);
    let residuals = pts.iter().map(|p| p.1 - (mv + slope * (p.0 - mt)));
    let spread = residuals.clone().fold(f64::MIN, f64::max) - residuals.fold(f64::MAX, f64::min);
    let span = pts.last()?.0 - pts.first()?.0;
    (slope * span > spread).then_some(slope)
}

/// The source vertex's total lag (pendingRecords summed over subtasks) per step in the
/// window, records.
pub fn sum_lag(ctx: &Context, vertex_id: &str) -> Vec<(i64, f64)> {
    let mut by_t: std::collections::BTreeMap<i64, f64> = std::collections::BTreeMap::new();
    for s in ctx.snapshot.source_lag.iter().filter(|s| s.vertex_id == vertex_id) {
        for &(t, v) in &s.pending_records {
            if t > ctx.snapshot.window.start_ms && v.is_finite() {
                *by_t.entry(t).or_insert(0.0) += v;
            }
        }
    }
    by_t.into_iter().collect()
}

/// The job's consumer-group lag from a Kafka exporter, summed over partitions per step in
/// the window, records (one exporter per partition: the first listed).
pub fn exporter_lag(ctx: &Context) -> Vec<(i64, f64)> {
    let mut seen = std::collections::BTreeSet::new();
    let mut by_t: std::collections::BTreeMap<i64, f64> = std::collections::BTreeMap::new();
    for p in &ctx.snapshot.partitions {
        if p.lag_records.is_empty() || !seen.insert((p.topic.as_str(), p.partition.as_str())) {
            continue;
        }
        for &(t, v) in &p.lag_records {
            if t > ctx.snapshot.window.start_ms && v.is_finite() {
                *by_t.entry(t).or_insert(0.0) += v;
            }
        }
    }
    by_t.into_iter().collect()
}

/// The lag a source vertex reads behind: Flink's own pendingRecords when the source
/// reports it, else the job's consumer-group lag from a Kafka exporter.
pub fn source_lag(ctx: &Context, vertex_id: &str) -> Vec<(i64, f64)> {
    let own = sum_lag(ctx, vertex_id);
    if own.is_empty() { exporter_lag(ctx) } else { own }
}
