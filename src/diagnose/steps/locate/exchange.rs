//! Where `locate` names no vertex: the backpressure stops at an exchange whose receiver is
//! neither backpressured nor busy, or the vertices below the backpressured ones do not
//! report enough to decide.

use crate::diagnose::signals::VertexSignals;
use crate::diagnose::{Context, StepReport};
use crate::model::facts::locate::{Backpressured, LocateFact, Receiver, Undecided};
use crate::model::verdict::Finding;

/// The report when the backpressure stops at the exchange `from` → `to`, whose receiver
/// is neither backpressured nor busy.
pub(super) fn network_report(ctx: &Context, from: &str, to: &str, red_list: &[Backpressured]) -> StepReport {
    let t = &ctx.cfg.thresholds;
    let (from_v, to_v) = (ctx.signals.vertex(from).expect("edge end"), ctx.signals.vertex(to).expect("edge end"));
    // Without busy time (Flink ≤ 1.12) the receiver's input buffer pool says it is not the
    // one holding records back.
    let receiver = match to_v.busy_max() {
        Some(busy_ratio) => Receiver::Busy { busy_ratio },
        None => Receiver::InputPool { in_pool_ratio: to_v.in_pool_usage() },
    };
    let detail = LocateFact::Exchange {
        red: red_list.to_vec(),
        backpressured_threshold_ratio: t.backpressured_ratio,
        from: from_v.name.clone(),
        to: to_v.name.clone(),
        to_backpressured_ratio: to_v.backpressured_max(),
        receiver,
    };
    let mut report = StepReport::hit(Finding::Network, detail);
    let (from, to) = (from_v.name.clone(), to_v.name.clone());
    report.cause.push(LocateFact::ExchangeSlow { from: from.clone(), to: to.clone(), receiver });
    report.fix.push(LocateFact::LookAtExchange { from: from.clone(), to: to.clone() });
    report.summary = Some(LocateFact::ExchangeInconclusive { from, to }.into());
    for v in [from_v, to_v] {
        if let Some(b) = v.busy_max() {
            report.evidence.push(ctx.evidence(&v.name, "busyTimeMsPerSecond", b, "ratio", Some(t.busy_ratio), "busy"));
        }
    }
    if let Some(input) = to_v.in_pool_usage().filter(|_| to_v.busy_max().is_none()) {
        report.evidence.push(ctx.evidence(
            &to_v.name,
            "inPoolUsage",
            input,
            "ratio",
            Some(t.in_pool_full_ratio),
            "in_pool_usage",
        ));
    }
    report
}

/// The report when the vertices below the red ones have no or partial metrics.
/// `classic`: the reporter predates Flink 1.13, and only buffer pool usage could decide.
pub(super) fn unknown_report(unknown: &[&VertexSignals], red_list: &[Backpressured], classic: bool) -> StepReport {
    let undecided = unknown
        .iter()
        .map(|v| Undecided {
            vertex: v.name.clone(),
            subtasks_reporting: (v.missing_subtasks() > 0).then(|| (v.subtask_count(), v.parallelism)),
        })
        .collect();
    let fact = LocateFact::Undecided { red: red_list.to_vec(), undecided, classic };
    let missing = if classic {
        vec!["inPoolUsage".into(), "outPoolUsage".into()]
    } else {
        vec!["busyTimeMsPerSecond".into(), "backPressuredTimeMsPerSecond".into()]
    };
    StepReport::no_data(fact, missing)
}
