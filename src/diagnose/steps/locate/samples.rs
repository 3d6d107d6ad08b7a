//! The culprit the window read sample by sample shows, when it overrules the averages (a
//! bottleneck that comes and goes).

use super::{Located, chain_advice};
use crate::diagnose::timeline::Holder;
use crate::diagnose::{Context, StepReport};
use crate::model::facts::locate::{Averaged, LocateFact, Period, SampleReading};
use crate::model::verdict::{Finding, Outcome};

/// The culprit the samples show (`top`, an index into the signals' vertices), overruling
/// what the window averages said (`averaged`).
pub(super) fn from_samples(ctx: &Context, top: usize, averaged: &Located) -> Located {
    let t = &ctx.cfg.thresholds;
    let r = &ctx.timeline;
    let v = &ctx.signals.vertices[top];
    let share = r.bottleneck_share(top);
    let (busy_holding, busy_other) = r.busy_when_holding(top);
    let upstream: Vec<(usize, f64)> = ctx
        .signals
        .vertices
        .iter()
        .enumerate()
        .filter(|(_, u)| ctx.signals.upstream(&v.id).iter().any(|x| x.id == u.id))
        .filter_map(|(i, _)| r.backpressured_during(i, top).map(|p| (i, p)))
        .filter(|(_, p)| *p > t.backpressured_ratio)
        .collect();
    let reading = SampleReading {
        vertex: v.name.clone(),
        bottleneck_samples: r.bottleneck_count[top],
        samples: r.len(),
        share_ratio: share,
        busy_holding_ratio: busy_holding,
        busy_other_ratio: busy_other,
        stalled: upstream.iter().map(|(i, p)| (ctx.signals.vertices[*i].name.clone(), *p)).collect(),
        averaged_busy_ratio: v.busy_max(),
        averaged: match averaged.report.finding {
            Some(Finding::Network) => Averaged::Exchange,
            _ if averaged.culprits.is_empty() => Averaged::Nothing,
            _ => Averaged::Culprit(
                averaged
                    .culprits
                    .first()
                    .and_then(|id| ctx.signals.vertex(id))
                    .map(|c| c.name.clone())
                    .unwrap_or_else(|| "?".into()),
            ),
        },
        calm_ratio: r.share_of(Holder::Calm),
        network_ratio: r.share_of(Holder::Network),
        period: period(ctx),
    };
    let mut report = StepReport::new(Outcome::Hit, LocateFact::HoldsBackInSamples(Box::new(reading.clone())));
    report.cause.push(LocateFact::ComesAndGoes(Box::new(reading)));
    if !upstream.is_empty() {
        report.not_the_fix.push(LocateFact::NotTheStalled {
            vertices: upstream.iter().map(|(i, _)| ctx.signals.vertices[*i].name.clone()).collect(),
            culprit: v.name.clone(),
        });
    }
    chain_advice(v, &mut report);
    report.evidence.push(ctx.evidence(
        &v.name,
        "share of samples as the bottleneck",
        share,
        "ratio",
        Some(t.timeline_holder_share),
        "busy",
    ));
    if let Some(b) = busy_holding {
        report.evidence.push(ctx.evidence(
            &v.name,
            "busyTimeMsPerSecond while it holds the job back",
            b,
            "ratio",
            Some(t.busy_ratio),
            "busy",
        ));
    }
    for (i, p) in &upstream {
        report.evidence.push(ctx.evidence(
            &ctx.signals.vertices[*i].name,
            "backPressuredTimeMsPerSecond while stalled",
            *p,
            "ratio",
            Some(t.backpressured_ratio),
            "backpressured",
        ));
    }
    Located { report, culprits: vec![v.id.clone()], network: Vec::new() }
}

/// The period of the stalls when the backpressure is periodic, with the checkpoints'
/// spacing when in phase with them (worded " The stalls recur every ~120 s, in phase with
/// the checkpoints (completed every ~120 s).").
pub fn period(ctx: &Context) -> Option<Period> {
    let r = &ctx.timeline;
    r.period_ms.map(|period_ms| Period {
        period_ms,
        checkpoint_spacing_ms: r.checkpoint_spacing_ms.filter(|_| r.with_checkpoints),
    })
}
