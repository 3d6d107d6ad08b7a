//! Step `locate`: read the graph from the sink backwards.
//!
//! A vertex is backpressured (red) when `p_max` exceeds the threshold (0.10). Candidates
//! are vertices that are not red and have a red direct upstream vertex; a candidate busy
//! by itself (`b_max ≥ 0.5`) is a culprit, one that is neither red nor busy points to the
//! exchange in between (finding `network`). Several culprits are ranked by the size of
//! the red region upstream of each, then by `b_max`. With nothing red, a busy source whose
//! lag grows is the culprit (finding `source`). Without a job graph, not-red busy vertices
//! are ranked by `b_max` and the verdict says so.
//!
//! A reporter older than Flink 1.13 has no busy time, and `p_max` is the share of
//! `isBackPressured` samples. There the classic method decides a candidate: a full input
//! buffer pool (`inPoolUsage ≥ in_pool_full_ratio`) and a low output pool (`outPoolUsage ≤
//! out_pool_low_ratio`, or none: a sink) make it the culprit; an input pool that is not full
//! points to the exchange before it; without pool usage nothing is concluded.

mod culprit;
mod dropped;
mod exchange;
mod samples;
mod source;
#[cfg(test)]
mod tests;

pub use dropped::without_series;
pub use samples::period;
pub use source::{exporter_lag, source_lag, steady_growth, sum_lag};

use crate::diagnose::signals::VertexSignals;
use crate::diagnose::timeline;
use crate::diagnose::{Context, StepReport};
use crate::model::facts::locate::{Backpressured, LeftOut, LocateFact};
use crate::model::snapshot::BackpressureMeasure;
use crate::model::verdict::Finding;
use culprit::culprit_report;
use dropped::{dropped_report, dropped_vertex, red_region};
use exchange::{network_report, unknown_report};
use samples::from_samples;
use source::source_bound;

/// What `locate` found besides its report.
#[derive(Debug, Clone, PartialEq)]
pub struct Located {
    pub report: StepReport,
    /// Culprit vertex ids, ranked.
    pub culprits: Vec<String>,
    /// Exchanges `(from, to)` where the backpressure stops without a busy receiver.
    pub network: Vec<(String, String)>,
}

/// `locate` over the window averages, then over the window read sample by sample: when
/// the samples show a vertex holding the job back more often than the one the averages
/// point to (a bottleneck that comes and goes), the samples decide.
pub fn run(ctx: &Context) -> Located {
    let averaged = on_averages(ctx);
    if averaged.report.finding == Some(Finding::Source) {
        return averaged;
    }
    let index = |id: &str| ctx.signals.vertices.iter().position(|v| v.id == id);
    let averaged_top = averaged.culprits.first().and_then(|id| index(id));
    match timeline::refine_target(&ctx.timeline, averaged_top, ctx.cfg) {
        Some(top) => from_samples(ctx, top, &averaged),
        None => with_alternation(ctx, averaged),
    }
}

fn on_averages(ctx: &Context) -> Located {
    let verts = &ctx.signals.vertices;
    let with_metrics: Vec<&VertexSignals> = verts.iter().filter(|v| v.backpressured_max().is_some()).collect();
    if with_metrics.is_empty() {
        return Located {
            report: StepReport::no_data(
                LocateFact::NoMetrics,
                vec!["backPressuredTimeMsPerSecond".into(), "busyTimeMsPerSecond".into()],
            ),
            culprits: Vec::new(),
            network: Vec::new(),
        };
    }
    let red: Vec<&VertexSignals> = verts.iter().filter(|v| ctx.is_red(v)).collect();
    if red.is_empty() {
        if let Some(report) = left_out_report(ctx) {
            return Located { report, culprits: Vec::new(), network: Vec::new() };
        }
        return source_bound(ctx);
    }
    let red_list: Vec<Backpressured> = red
        .iter()
        .map(|v| Backpressured { vertex: v.name.clone(), backpressured_ratio: v.backpressured_max() })
        .collect();
    let found = search(ctx, &red);
    let report = if let Some((first, _)) = found.culprits.first() {
        culprit_report(ctx, first, &found.culprits, &red, &red_list)
    } else if let Some((from, to)) = found.network.first() {
        network_report(ctx, from, to, &red_list)
    } else if let Some(v) = dropped_vertex(ctx, &found.unknown) {
        let report = dropped_report(ctx, v, &red_list);
        return Located { report, culprits: vec![v.id.clone()], network: Vec::new() };
    } else {
        unknown_report(&found.unknown, &red_list, classic(ctx))
    };
    Located {
        report,
        culprits: found.culprits.into_iter().map(|(v, _)| v.id.clone()).collect(),
        network: found.network,
    }
}

/// No data when no vertex is red but the values it would rest on were left out as
/// impossible (a broken reporter or store): the backpressure of some vertex, or the busy
/// time of every vertex. "No backpressure" would rest on the values that happened to
/// survive.
fn left_out_report(ctx: &Context) -> Option<StepReport> {
    let left_out = |signals: &[&str]| ctx.snapshot.left_out.iter().any(|l| signals.contains(&l.signal.as_str()));
    let verts = &ctx.signals.vertices;
    let names = |f: &dyn Fn(&VertexSignals) -> bool| -> Vec<String> {
        verts.iter().filter(|v| f(v)).map(|v| v.name.clone()).collect()
    };
    let unknown_bp = names(&|v| v.backpressured_max().is_none());
    let what = if left_out(&["backpressured", "is_backpressured"]) && !unknown_bp.is_empty() {
        LeftOut::Backpressure { vertices: unknown_bp }
    } else if left_out(&["busy"]) && verts.iter().all(|v| v.busy_max().is_none()) {
        LeftOut::BusyOfEveryVertex
    } else {
        return None;
    };
    Some(StepReport::no_data(
        LocateFact::LeftOutImpossible { what },
        vec!["backPressuredTimeMsPerSecond".into(), "busyTimeMsPerSecond".into()],
    ))
}

/// Where the backpressure stops, read from the sink backwards.
struct Search<'a> {
    /// Busy vertices that are not red below red ones, with the size of the red region
    /// upstream of each, ranked.
    culprits: Vec<(&'a VertexSignals, usize)>,
    /// Exchanges into vertices neither red nor busy.
    network: Vec<(String, String)>,
    /// Vertices below red ones whose metrics do not decide.
    unknown: Vec<&'a VertexSignals>,
}

/// Candidates are the vertices that are not red with a red direct upstream vertex (without
/// a graph: every busy vertex that is not red).
fn search<'a>(ctx: &Context<'a>, red: &[&VertexSignals]) -> Search<'a> {
    let t = &ctx.cfg.thresholds;
    let verts = &ctx.signals.vertices;
    let mut culprits: Vec<(&VertexSignals, usize)> = Vec::new();
    let mut network: Vec<(String, String)> = Vec::new();
    let mut unknown: Vec<&VertexSignals> = Vec::new();
    if ctx.signals.graph_free {
        for v in verts.iter().filter(|v| !ctx.is_red(v)) {
            if v.busy_max().is_some_and(|b| b >= t.busy_ratio) {
                culprits.push((v, red.len()));
            }
        }
    } else {
        for v in verts.iter().filter(|v| !ctx.is_red(v)) {
            let red_upstream: Vec<&VertexSignals> =
                ctx.signals.upstream(&v.id).into_iter().filter(|u| ctx.is_red(u)).collect();
            if red_upstream.is_empty() {
                // Backpressure passes unseen through a vertex without series: a busy vertex
                // after red ones and such vertices only is where it stops.
                let through_unseen =
                    ctx.signals.upstream(&v.id).iter().any(|u| without_series(u)) && !red_region(ctx, &v.id).is_empty();
                if through_unseen && v.backpressured_max().is_some() && v.busy_max().is_some_and(|b| b >= t.busy_ratio)
                {
                    culprits.push((v, red_region(ctx, &v.id).len()));
                }
                continue;
            }
            if v.backpressured_max().is_none() {
                unknown.push(v);
                continue;
            }
            match v.busy_max() {
                Some(b) if b >= t.busy_ratio => {
                    let region = red_region(ctx, &v.id).len();
                    culprits.push((v, region));
                }
                None if classic(ctx) => match starved_input(ctx, v) {
                    Some(true) => {
                        let region = red_region(ctx, &v.id).len();
                        culprits.push((v, region));
                    }
                    Some(false) if v.missing_subtasks() == 0 => {
                        network.extend(red_upstream.iter().map(|u| (u.id.clone(), v.id.clone())))
                    }
                    _ => unknown.push(v),
                },
                // A busy subtask may be among those not reporting: no conclusion.
                Some(_) if v.missing_subtasks() > 0 => unknown.push(v),
                Some(_) => network.extend(red_upstream.iter().map(|u| (u.id.clone(), v.id.clone()))),
                None => unknown.push(v),
            }
        }
    }
    culprits
        .sort_by(|a, b| b.1.cmp(&a.1).then(b.0.busy_max().unwrap_or(0.0).total_cmp(&a.0.busy_max().unwrap_or(0.0))));
    Search { culprits, network, unknown }
}

/// The reporter predates Flink 1.13: backpressure is the share of `isBackPressured`
/// samples and busy time is unknown.
pub fn classic(ctx: &Context) -> bool {
    ctx.snapshot.backpressure_measure == BackpressureMeasure::IsBackPressuredShare
}

/// The classic method on a candidate: `Some(true)` when its input buffer pool is full and
/// its output pool low (or absent: a sink), `Some(false)` when its input pool is not full
/// or its output pool is full, `None` without input pool usage.
fn starved_input(ctx: &Context, v: &VertexSignals) -> Option<bool> {
    let t = &ctx.cfg.thresholds;
    let input = v.in_pool_usage()?;
    let output_low = v.out_pool_usage().is_none_or(|o| o <= t.out_pool_low_ratio);
    Some(input >= t.in_pool_full_ratio && output_low)
}

/// When the bottleneck alternates between vertices and the averages name one of them,
/// the verdict names every one with its share of the time.
fn with_alternation(ctx: &Context, mut located: Located) -> Located {
    let holders = ctx.timeline.holders_over(ctx.cfg.thresholds.timeline_holder_share);
    if holders.len() < 2 {
        return located;
    }
    let list: Vec<(String, f64)> = holders.iter().map(|(i, s)| (ctx.signals.vertices[*i].name.clone(), *s)).collect();
    located.report.cause.push(LocateFact::Alternates { holders: list.clone() });
    located.report.detail = located.report.detail.clone().then(LocateFact::AlternatesShort { holders: list });
    if located.culprits.first().map(String::as_str) != Some(ctx.signals.vertices[holders[0].0].id.as_str())
        && located.report.finding.is_none()
    {
        located.culprits.retain(|id| *id != ctx.signals.vertices[holders[0].0].id);
        located.culprits.insert(0, ctx.signals.vertices[holders[0].0].id.clone());
    }
    located
}

/// Chains: task metrics cannot tell which operator inside is slow.
fn chain_advice(v: &VertexSignals, report: &mut StepReport) {
    if v.operators.len() > 1 {
        report.cause.push(LocateFact::Chain { operators: v.operators.clone() });
        report.fix.push(LocateFact::BreakChain { operators: v.operators.clone() });
    }
}
