//! The Flink Kubernetes Operator autoscaler next to the verdict: when its gauges are in the
//! store (`Snapshot::autoscaler`), what it recommends for the culprit's vertex, whether that
//! agrees with culprit, and whether its next step can help. Not a runbook step: it changes
//! no finding, only adds one sentence (advice, or "not the fix") and the verdict's
//! `autoscaler` section.
//!
//! * It agrees when its `RECOMMENDED_PARALLELISM` for the culprit is above the culprit's
//!   `PARALLELISM`. It disagrees when it recommends less for the culprit (cf. FLINK-38538:
//!   its scaling reads output ratios as well as busy time), or keeps the culprit and scales
//!   other vertices up, or changes nothing.
//! * Its next step cannot help when it scales the culprit down, or when the finding is one
//!   more parallelism does not fix: `sink` (the system behind the sink is the limit),
//!   `hot_key`, `slow_instance`, `source_skew` (one subtask is).
//! * NaN is "not evaluated yet" (`AutoscalerFlinkMetrics`: a gauge without an evaluation
//!   reads `Double.NaN`), never a recommendation.
//!
//! Pure: the snapshot and the signals in, a view out.

use super::Context;
use super::signals::VertexSignals;
use crate::model::autoscaler::{AutoscalerStance, AutoscalerStep, AutoscalerVertex, AutoscalerView};
use crate::model::verdict::{Finding, round_sig};

/// A findings more parallelism does not fix: the limit is outside the vertex (`sink`) or in
/// one of its subtasks.
pub fn parallelism_cannot_fix(finding: Finding) -> bool {
    matches!(finding, Finding::Sink | Finding::HotKey | Finding::SlowInstance | Finding::SourceSkew)
}

/// A gauge's parallelism: a whole, non-negative number that fits.
fn whole(v: Option<f64>) -> Option<u32> {
    v.filter(|v| v.is_finite() && *v >= 0.0 && *v <= u32::MAX as f64).map(|v| v.round() as u32)
}

/// The autoscaler's view of `culprit`; `None` without its gauges or without a culprit.
pub fn evaluate(ctx: &Context<'_>, culprit: Option<&VertexSignals>, finding: Finding) -> Option<AutoscalerView> {
    let all = ctx.snapshot.autoscaler.as_ref().filter(|a| !a.is_empty())?;
    let c = culprit?;
    let name_of = |id: &str| ctx.signals.vertex(id).map(|v| v.name.clone()).unwrap_or_else(|| id.to_string());
    let mut view = AutoscalerView {
        vertex_id: c.id.clone(),
        vertex_name: c.name.clone(),
        resource: None,
        stance: AutoscalerStance::NoCulpritSeries,
        agrees: None,
        next_step_helps: None,
        parallelism: c.parallelism_now(),
        recommended_parallelism: None,
        true_processing_rate_per_s: None,
        capacity_per_s: c.capacity().map(round_sig),
        load_ratio: None,
        scales_up_elsewhere: Vec::new(),
    };
    let mut resources: Vec<&Option<String>> = all.iter().map(|a| &a.resource).collect();
    resources.sort();
    resources.dedup();
    if resources.len() > 1 {
        view.stance = AutoscalerStance::Ambiguous;
        return Some(view);
    }
    let Some(mine) = all.iter().find(|a| a.vertex_id == c.id) else { return Some(view) };
    view.resource = mine.resource.clone();
    view.parallelism = whole(mine.parallelism.and_then(|p| p.value())).unwrap_or(view.parallelism);
    view.true_processing_rate_per_s = mine.true_processing_rate.and_then(|t| t.value()).map(round_sig);
    view.load_ratio = mine.load.and_then(|l| l.value()).map(round_sig);
    view.scales_up_elsewhere = all
        .iter()
        .filter(|a| a.vertex_id != c.id)
        .filter_map(|a| step(a, &name_of))
        .filter(|s| s.to > s.from)
        .collect();
    let Some(to) = whole(mine.recommended_parallelism.and_then(|r| r.value())) else {
        view.stance = AutoscalerStance::NotEvaluated;
        return Some(view);
    };
    view.recommended_parallelism = Some(to);
    let from = view.parallelism;
    view.stance = if to > from {
        AutoscalerStance::ScalesUpCulprit
    } else if to < from {
        AutoscalerStance::ScalesDownCulprit
    } else if !view.scales_up_elsewhere.is_empty() {
        AutoscalerStance::ScalesUpOthers
    } else {
        AutoscalerStance::Holds
    };
    view.agrees = Some(view.stance == AutoscalerStance::ScalesUpCulprit);
    view.next_step_helps = match view.stance {
        AutoscalerStance::ScalesUpCulprit => Some(!parallelism_cannot_fix(finding)),
        AutoscalerStance::ScalesDownCulprit => Some(false),
        _ => None,
    };
    Some(view)
}

/// What the autoscaler would do to another vertex, when it reports both parallelisms.
fn step(a: &AutoscalerVertex, name_of: &impl Fn(&str) -> String) -> Option<AutoscalerStep> {
    Some(AutoscalerStep {
        vertex_id: a.vertex_id.clone(),
        vertex_name: name_of(&a.vertex_id),
        from: whole(a.parallelism.and_then(|p| p.value()))?,
        to: whole(a.recommended_parallelism.and_then(|r| r.value()))?,
    })
}
