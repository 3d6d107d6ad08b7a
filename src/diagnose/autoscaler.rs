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

/// A finding more parallelism does not fix: the limit is outside the vertex (`sink`) or in
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::testkit::{SnapshotBuilder, on_vertex};
    use crate::model::autoscaler::AutoscalerValue;
    use crate::model::facts::autoscaler::AutoscalerFact;
    use crate::model::snapshot::Snapshot;

    const SRC: &str = "50c0000000000000000000000000000a";
    const SINK: &str = "51a0000000000000000000000000000b";

    /// A source backpressured by a sink busy 0.9 on its 4 subtasks, each taking 1,000
    /// records/s: culprit's capacity estimate of the sink is 1,000 / 0.9 × 4 = 4,444.4
    /// records/s.
    fn job() -> Snapshot {
        SnapshotBuilder::new()
            .vertex(SRC, "Source: orders", 4)
            .vertex(SINK, "Sink: jdbc", 4)
            .edge(SRC, SINK, "REBALANCE")
            .all_subtasks(SRC, 0.05, 0.9, 0.05, 1000.0)
            .all_subtasks(SINK, 0.9, 0.0, 0.1, 1000.0)
            .build()
    }

    fn gauges(id: &str, p: f64, rec: f64) -> AutoscalerVertex {
        AutoscalerVertex {
            vertex_id: id.into(),
            resource: Some("payments/orders".into()),
            parallelism: Some(AutoscalerValue::of(p)),
            recommended_parallelism: Some(AutoscalerValue::of(rec)),
            true_processing_rate: Some(AutoscalerValue::of(4200.0)),
            load: Some(AutoscalerValue::of(0.93)),
        }
    }

    fn view(autoscaler: Option<Vec<AutoscalerVertex>>, finding: Finding) -> Option<AutoscalerView> {
        let mut snap = job();
        snap.autoscaler = autoscaler;
        on_vertex(&snap, SINK, |ctx, v| evaluate(ctx, Some(v), finding))
    }

    fn words(v: AutoscalerView, finding: Finding) -> String {
        crate::model::facts::Fact::from(AutoscalerFact { view: v, finding }).to_string()
    }

    #[test]
    fn the_autoscaler_agrees_when_it_scales_the_culprit_up_and_that_helps_a_vertex_out_of_headroom() {
        let v = view(Some(vec![gauges(SRC, 4.0, 4.0), gauges(SINK, 4.0, 8.0)]), Finding::Headroom).unwrap();
        assert_eq!(v.stance, AutoscalerStance::ScalesUpCulprit);
        assert_eq!((v.agrees, v.next_step_helps), (Some(true), Some(true)));
        assert_eq!((v.parallelism, v.recommended_parallelism), (4, Some(8)));
        assert_eq!(v.true_processing_rate_per_s, Some(4200.0));
        // 1,000 / 0.9 × 4 = 4,444.44…, rounded to 4 significant digits.
        assert_eq!(v.capacity_per_s, Some(4444.0));
        assert_eq!(v.resource.as_deref(), Some("payments/orders"));
        let said = words(v, Finding::Headroom);
        assert!(said.starts_with("The Flink autoscaler agrees: it recommends Sink: jdbc from 4 to 8"), "{said}");
    }

    #[test]
    fn scaling_a_sink_up_cannot_help_when_the_system_behind_it_is_the_limit() {
        let v = view(Some(vec![gauges(SINK, 4.0, 8.0)]), Finding::Sink).unwrap();
        assert_eq!((v.agrees, v.next_step_helps), (Some(true), Some(false)));
        let said = words(v, Finding::Sink);
        assert!(
            said.contains("would scale Sink: jdbc from 4 to 8: that will not help, the system behind it is the limit"),
            "{said}"
        );
        // The rates to 3 significant digits: 4,200 as reported, 4,444.4 read as 4440.
        assert!(
            said.contains("true processing rate 4200 records/s; culprit's capacity estimate 4440 records/s"),
            "{said}"
        );
        // One subtask as the limit is the same: more subtasks leave it where it is.
        for finding in [Finding::HotKey, Finding::SlowInstance, Finding::SourceSkew] {
            let v = view(Some(vec![gauges(SINK, 4.0, 8.0)]), finding).unwrap();
            assert_eq!(v.next_step_helps, Some(false), "{finding:?}");
        }
    }

    #[test]
    fn the_autoscaler_disagrees_when_it_scales_another_vertex_up_or_the_culprit_down() {
        let v = view(Some(vec![gauges(SRC, 4.0, 12.0), gauges(SINK, 4.0, 4.0)]), Finding::Headroom).unwrap();
        assert_eq!(v.stance, AutoscalerStance::ScalesUpOthers);
        assert_eq!((v.agrees, v.next_step_helps), (Some(false), None));
        assert_eq!(v.scales_up_elsewhere[0].vertex_name, "Source: orders");
        assert_eq!((v.scales_up_elsewhere[0].from, v.scales_up_elsewhere[0].to), (4, 12));
        let said = words(v, Finding::Headroom);
        assert!(said.contains("keeps Sink: jdbc at 4 and would scale Source: orders from 4 to 12 instead"), "{said}");

        // FLINK-38538: down on a vertex culprit finds busy 0.9.
        let v = view(Some(vec![gauges(SINK, 4.0, 2.0)]), Finding::Headroom).unwrap();
        assert_eq!(v.stance, AutoscalerStance::ScalesDownCulprit);
        assert_eq!((v.agrees, v.next_step_helps), (Some(false), Some(false)));

        let v = view(Some(vec![gauges(SRC, 4.0, 4.0), gauges(SINK, 4.0, 4.0)]), Finding::Headroom).unwrap();
        assert_eq!((v.stance, v.agrees), (AutoscalerStance::Holds, Some(false)));
    }

    #[test]
    fn a_nan_recommendation_is_not_evaluated_yet_never_a_parallelism() {
        let v = view(Some(vec![gauges(SINK, 4.0, f64::NAN)]), Finding::Sink).unwrap();
        assert_eq!(v.stance, AutoscalerStance::NotEvaluated);
        assert_eq!((v.agrees, v.next_step_helps, v.recommended_parallelism), (None, None, None));
        assert!(words(v, Finding::Sink).contains("has not evaluated Sink: jdbc yet"));
    }

    #[test]
    fn without_the_autoscalers_gauges_or_a_culprit_there_is_no_section() {
        assert_eq!(view(None, Finding::Sink), None, "not asked");
        assert_eq!(view(Some(Vec::new()), Finding::Sink), None, "asked, nothing found");
        let mut snap = job();
        snap.autoscaler = Some(vec![gauges(SINK, 4.0, 8.0)]);
        let none = crate::diagnose::testkit::with_context(&snap, |ctx| evaluate(ctx, None, Finding::None));
        assert_eq!(none, None, "no culprit");
        // Gauges of other vertices only: said, not guessed.
        let v = view(Some(vec![gauges(SRC, 4.0, 8.0)]), Finding::Sink).unwrap();
        assert_eq!((v.stance, v.agrees), (AutoscalerStance::NoCulpritSeries, None));
    }

    #[test]
    fn two_resources_reporting_the_same_vertex_ids_are_not_told_apart() {
        let mut other = gauges(SINK, 2.0, 16.0);
        other.resource = Some("staging/orders".into());
        let v = view(Some(vec![gauges(SINK, 4.0, 8.0), other]), Finding::Sink).unwrap();
        assert_eq!((v.stance, v.agrees, v.recommended_parallelism), (AutoscalerStance::Ambiguous, None, None));
    }
}
