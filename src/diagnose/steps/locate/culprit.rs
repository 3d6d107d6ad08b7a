//! The culprit `locate` names: the first vertex downstream of backpressured ones that is
//! busy by itself (or, without busy time, whose input buffer pool is full).

use super::dropped::{red_region, unseen_upstream};
use super::{chain_advice, classic};
use crate::diagnose::signals::VertexSignals;
use crate::diagnose::{Context, StepReport, max_over};
use crate::model::facts::locate::{Backpressured, LocateFact};
use crate::model::verdict::Outcome;

/// The report when `first` is the culprit (`culprits` ranked, `first` among them).
pub(super) fn culprit_report(
    ctx: &Context,
    first: &VertexSignals,
    culprits: &[(&VertexSignals, usize)],
    red: &[&VertexSignals],
    red_list: &[Backpressured],
) -> StepReport {
    if classic(ctx) && first.busy_max().is_none() {
        return classic_culprit_report(ctx, first, red, red_list);
    }
    let t = &ctx.cfg.thresholds;
    // Unknown stays unknown (a legacy source's NaN busy time): said so, never 0 %.
    let (b, p) = (first.busy_max(), first.backpressured_max());
    let upstream_red: Vec<String> = if ctx.signals.graph_free {
        red.iter().map(|v| v.name.clone()).collect()
    } else {
        red_region(ctx, &first.id).iter().map(|v| v.name.clone()).collect()
    };
    let graph_free = ctx.signals.graph_free;
    let detail = LocateFact::Culprit {
        red: red_list.to_vec(),
        backpressured_threshold_ratio: t.backpressured_ratio,
        vertex: first.name.clone(),
        busy_ratio: b,
        backpressured_ratio: p,
        busy_threshold_ratio: t.busy_ratio,
        graph_free,
    };
    let mut report = StepReport::new(Outcome::Hit, detail);
    report.cause.push(LocateFact::Slowest {
        vertex: first.name.clone(),
        busy_ratio: b,
        max_over: max_over(first),
        backpressured_ratio: p,
        upstream_red: upstream_red.len(),
        graph_free,
    });
    if !upstream_red.is_empty() {
        report
            .not_the_fix
            .push(LocateFact::NotTheBackpressured { vertices: upstream_red, culprit: first.name.clone() });
    }
    unseen_advice(ctx, first, &mut report);
    chain_advice(first, &mut report);
    if culprits.len() > 1 {
        report.detail = report.detail.clone().then(LocateFact::IndependentCulprits {
            culprits: culprits.iter().map(|(v, n)| (v.name.clone(), *n)).collect(),
        });
    }
    // Evidence is what was measured: an unknown value gives none (the detail says unknown).
    if let Some(b) = b {
        report.evidence.push(ctx.evidence(&first.name, "busyTimeMsPerSecond", b, "ratio", Some(t.busy_ratio), "busy"));
    }
    for (v, p) in std::iter::once((first, p)).chain(red.iter().map(|v| (*v, v.backpressured_max()))) {
        if let Some(p) = p {
            report.evidence.push(ctx.evidence(
                &v.name,
                "backPressuredTimeMsPerSecond",
                p,
                "ratio",
                Some(t.backpressured_ratio),
                "backpressured",
            ));
        }
    }
    report
}

/// The culprit by the classic method (no busy time): not backpressured, downstream of
/// backpressured vertices, its input buffer pool full and its output pool low.
fn classic_culprit_report(
    ctx: &Context,
    first: &VertexSignals,
    red: &[&VertexSignals],
    red_list: &[Backpressured],
) -> StepReport {
    let t = &ctx.cfg.thresholds;
    let p = first.backpressured_max().unwrap_or(0.0);
    let input = first.in_pool_usage().unwrap_or(0.0);
    let output = first.out_pool_usage();
    let upstream_red: Vec<String> = red_region(ctx, &first.id).iter().map(|v| v.name.clone()).collect();
    let mut report = StepReport::new(
        Outcome::Hit,
        LocateFact::ClassicCulprit {
            red: red_list.to_vec(),
            backpressured_threshold_ratio: t.backpressured_ratio,
            vertex: first.name.clone(),
            backpressured_ratio: p,
            in_pool_ratio: input,
            in_pool_full_threshold_ratio: t.in_pool_full_ratio,
            out_pool_ratio: output,
        },
    );
    report.cause.push(LocateFact::ClassicCause {
        vertex: first.name.clone(),
        upstream_red: upstream_red.len(),
        in_pool_ratio: input,
        out_pool_ratio: output,
    });
    if !upstream_red.is_empty() {
        report
            .not_the_fix
            .push(LocateFact::NotTheBackpressured { vertices: upstream_red, culprit: first.name.clone() });
    }
    unseen_advice(ctx, first, &mut report);
    report.evidence.push(ctx.evidence(
        &first.name,
        "isBackPressured share of samples",
        p,
        "ratio",
        Some(t.backpressured_ratio),
        "backpressured",
    ));
    report.evidence.push(ctx.evidence(
        &first.name,
        "inPoolUsage",
        input,
        "ratio",
        Some(t.in_pool_full_ratio),
        "in_pool_usage",
    ));
    if let Some(o) = first.out_pool_usage() {
        report.evidence.push(ctx.evidence(
            &first.name,
            "outPoolUsage",
            o,
            "ratio",
            Some(t.out_pool_low_ratio),
            "out_pool_usage",
        ));
    }
    for v in red {
        report.evidence.push(ctx.evidence(
            &v.name,
            "isBackPressured share of samples",
            v.backpressured_max().unwrap_or(0.0),
            "ratio",
            Some(t.backpressured_ratio),
            "backpressured",
        ));
    }
    report
}

/// Vertices without series between the red ones and the culprit: the backpressure passed
/// through them unseen; the verdict says their metrics are missing.
fn unseen_advice(ctx: &Context, first: &VertexSignals, report: &mut StepReport) {
    let unseen: Vec<String> = unseen_upstream(ctx, &first.id).iter().map(|v| v.name.clone()).collect();
    if !unseen.is_empty() {
        report.cause.push(LocateFact::UnseenBetween { vertices: unseen, culprit: first.name.clone() });
    }
}
