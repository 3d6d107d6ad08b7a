//! A vertex whose series the store dropped: the plan has it, the store has none of its
//! series, and it sits where the backpressure stops (a backpressured vertex right before
//! it, and the vertices after it report and are neither busy nor backpressured, or it is a
//! sink: backpressure must stop somewhere after a backpressured vertex, and no other
//! vertex after it reports). Stores drop series silently: Mimir and
//! Cortex refuse a series with a label value over 2,048 characters by default
//! (`max_label_value_length`; a long Flink SQL operator name in `task_name` or
//! `operator_name`), and series limits drop others. Such a vertex is named as the likely
//! culprit, at low confidence (the runbook's `confidence`), instead of "the metrics do not
//! show where the backpressure stops".

use crate::diagnose::signals::VertexSignals;
use crate::diagnose::{Context, StepReport};
use crate::model::facts::locate::{Backpressured, LocateFact};
use crate::model::verdict::Finding;

/// The label value length over which Mimir and Cortex refuse a series by default
/// (`-validation.max-length-label-value`, 2048); Grafana Cloud Metrics documents the same
/// 2,048-character limit ("Label handling and limits").
pub const LABEL_VALUE_LIMIT_CHARS: usize = 2048;

/// Whether `v` has no series at all: no aggregate and no subtask of it answered.
pub fn without_series(v: &VertexSignals) -> bool {
    v.aggregate.is_none() && v.subtasks.is_empty()
}

/// Among the vertices below the red ones that did not decide, the one without any series
/// whose downstream vertices all report and are neither red nor busy, or which has none
/// (a sink: the backpressure of the vertex before it stops somewhere, and nothing after
/// it reports). Two such vertices: none is named (the verdict says both are undecided).
pub(super) fn dropped_vertex<'a>(ctx: &Context<'a>, unknown: &[&'a VertexSignals]) -> Option<&'a VertexSignals> {
    let t = &ctx.cfg.thresholds;
    let idle =
        |d: &VertexSignals| !without_series(d) && !ctx.is_red(d) && d.busy_max().is_some_and(|b| b < t.busy_ratio);
    let mut found = unknown.iter().copied().filter(|v| {
        let downstream = ctx.signals.downstream(&v.id);
        without_series(v) && downstream.iter().all(|d| idle(d))
    });
    let first = found.next()?;
    // Two such vertices: the metrics cannot tell which one; none is named.
    found.next().is_none().then_some(first)
}

/// The red vertices upstream of `id`, reached through red vertices and vertices without
/// series: backpressure passes unseen through a vertex the store has no series of.
pub(super) fn red_region<'a>(ctx: &Context<'a>, id: &str) -> Vec<&'a VertexSignals> {
    let region = ctx.signals.upstream_region(id, |u| ctx.is_red(u) || without_series(u));
    region.into_iter().filter(|u| ctx.is_red(u)).collect()
}

/// The vertices without series between `id` and the red vertices upstream of it.
pub(super) fn unseen_upstream<'a>(ctx: &Context<'a>, id: &str) -> Vec<&'a VertexSignals> {
    let region = ctx.signals.upstream_region(id, |u| ctx.is_red(u) || without_series(u));
    region.into_iter().filter(|u| without_series(u)).collect()
}

/// The report naming `v` as the likely culprit.
pub(super) fn dropped_report(ctx: &Context, v: &VertexSignals, red_list: &[Backpressured]) -> StepReport {
    let downstream: Vec<(String, Option<f64>)> =
        ctx.signals.downstream(&v.id).iter().map(|d| (d.name.clone(), d.busy_max())).collect();
    let red: Vec<Backpressured> =
        red_list.iter().filter(|b| ctx.signals.upstream(&v.id).iter().any(|u| u.name == b.vertex)).cloned().collect();
    let detail = LocateFact::SeriesDropped { vertex: v.name.clone(), red, downstream };
    // Unexplained: no step can look into a vertex without metrics.
    let mut r = StepReport::hit(Finding::Unexplained, detail);
    let name_chars = v.name.chars().count().max(v.operators.iter().map(|o| o.chars().count()).max().unwrap_or(0));
    r.cause.push(LocateFact::SeriesDroppedCause {
        vertex: v.name.clone(),
        name_chars,
        label_limit_chars: LABEL_VALUE_LIMIT_CHARS,
    });
    r.fix.push(LocateFact::RestoreDroppedSeries {
        vertex: v.name.clone(),
        long_name: name_chars > LABEL_VALUE_LIMIT_CHARS,
    });
    r.missing = vec!["busyTimeMsPerSecond".into(), "backPressuredTimeMsPerSecond".into()];
    r.summary = Some(LocateFact::SeriesDroppedSummary { vertex: v.name.clone() }.into());
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::runbook::diagnose;
    use crate::diagnose::steps::locate::run;
    use crate::diagnose::testkit::*;
    use crate::model::facts::Fact;
    use crate::model::verdict::{Confidence, Outcome, Status};

    /// Source → parse → `name` (id score, no series at all) → sink.
    fn job(name: &str, sink_busy: f64) -> SnapshotBuilder {
        SnapshotBuilder::new()
            .vertex("src", "Source: txn", 2)
            .vertex("parse", "parse", 2)
            .vertex("score", name, 2)
            .vertex("sink", "Sink: store", 2)
            .edge("src", "parse", "FORWARD")
            .edge("parse", "score", "HASH")
            .edge("score", "sink", "FORWARD")
            .all_subtasks("src", 0.02, 0.97, 0.01, None)
            .all_subtasks("parse", 0.03, 0.95, 0.02, 1000.0)
            .all_subtasks("sink", sink_busy, 0.0, 1.0 - sink_busy, 1000.0)
    }

    #[test]
    fn a_vertex_without_series_between_backpressure_and_an_idle_downstream_is_the_likely_culprit() {
        // parse red (0.95 > 0.10), score has no series, sink busy 0.05 < 0.5 and not red.
        let snap = job("score", 0.05).build();
        let located = with_context(&snap, run);
        assert_eq!(located.culprits, ["score"]);
        assert_eq!((located.report.outcome, located.report.finding), (Outcome::Hit, Some(Finding::Unexplained)));
        assert_eq!(
            located.report.detail,
            Fact::Locate(LocateFact::SeriesDropped {
                vertex: "score".into(),
                red: vec![Backpressured { vertex: "parse".into(), backpressured_ratio: Some(0.95) }],
                downstream: vec![("Sink: store".into(), Some(0.05))],
            })
        );
        // A short name: the likely reason is a limit of the store, not the name's length.
        assert!(
            located
                .report
                .fix
                .contains(&LocateFact::RestoreDroppedSeries { vertex: "score".into(), long_name: false }.into())
        );
        // The verdict names it, at low confidence.
        let d = diagnose(&snap, &crate::config::DiagnosisConfig::default());
        assert_eq!((d.status, d.finding), (Status::CulpritFound, Finding::Unexplained));
        assert_eq!(d.culprit.as_ref().map(|c| c.vertex_name.as_str()), Some("score"));
        assert_eq!(d.confidence, Confidence::Low);
    }

    #[test]
    fn a_vertex_named_longer_than_the_stores_label_limit_gets_the_name_as_its_likely_reason() {
        // A Flink SQL vertex name of 2100 characters > 2048.
        let name = "Calc(select=[".to_string() + &"a".repeat(2100 - 15) + "])";
        let snap = job(&name, 0.05).build();
        let located = with_context(&snap, run);
        assert_eq!(located.culprits, ["score"]);
        assert_eq!(
            located.report.cause[0],
            Fact::Locate(LocateFact::SeriesDroppedCause {
                vertex: name.clone(),
                name_chars: 2100,
                label_limit_chars: 2048
            })
        );
        assert!(
            located.report.fix.contains(&LocateFact::RestoreDroppedSeries { vertex: name, long_name: true }.into())
        );
    }

    #[test]
    fn a_vertex_without_series_before_a_busy_downstream_is_not_named() {
        // The sink is busy (0.9 ≥ 0.5): the metrics do not say the backpressure stops at
        // the vertex without series; nothing is named.
        let snap = job("score", 0.9).build();
        let located = with_context(&snap, run);
        assert!(!matches!(located.report.detail, Fact::Locate(LocateFact::SeriesDropped { .. })));
        assert_ne!(located.culprits, ["score"]);
    }

    #[test]
    fn a_sink_without_series_after_a_backpressured_vertex_is_the_likely_culprit() {
        // score red (0.95 > 0.10); its only downstream vertex, the sink, has no series.
        let snap = SnapshotBuilder::new()
            .vertex("src", "Source: txn", 2)
            .vertex("score", "score", 2)
            .vertex("sink", "Sink: store", 2)
            .edge("src", "score", "FORWARD")
            .edge("score", "sink", "HASH")
            .all_subtasks("src", 0.02, 0.97, 0.01, None)
            .all_subtasks("score", 0.03, 0.95, 0.02, 1000.0)
            .build();
        let located = with_context(&snap, run);
        assert_eq!(located.culprits, ["sink"]);
        assert_eq!(
            located.report.detail,
            Fact::Locate(LocateFact::SeriesDropped {
                vertex: "Sink: store".into(),
                red: vec![Backpressured { vertex: "score".into(), backpressured_ratio: Some(0.95) }],
                downstream: vec![],
            })
        );
        assert!(located.report.detail.to_string().contains("a sink with no series at all"));
    }

    #[test]
    fn two_sinks_without_series_after_a_backpressured_vertex_name_neither() {
        // score red, both its sinks without series: either could be the stop.
        let snap = SnapshotBuilder::new()
            .vertex("src", "Source: txn", 2)
            .vertex("score", "score", 2)
            .vertex("sink", "Sink: store", 2)
            .vertex("audit", "Sink: audit", 2)
            .edge("src", "score", "FORWARD")
            .edge("score", "sink", "HASH")
            .edge("score", "audit", "FORWARD")
            .all_subtasks("src", 0.02, 0.97, 0.01, None)
            .all_subtasks("score", 0.03, 0.95, 0.02, 1000.0)
            .build();
        let located = with_context(&snap, run);
        assert!(located.culprits.is_empty(), "{:?}", located.culprits);
        let Fact::Locate(LocateFact::Undecided { undecided, .. }) = &located.report.detail else {
            panic!("{:?}", located.report.detail)
        };
        let names: Vec<&str> = undecided.iter().map(|u| u.vertex.as_str()).collect();
        assert_eq!(names, ["Sink: store", "Sink: audit"]);
    }

    #[test]
    fn backpressure_passes_unseen_through_a_vertex_without_series_to_a_busy_vertex_after_it() {
        // src red (0.97), parse without series, score busy 0.95 ≥ 0.5 and not red: score is
        // the culprit, and parse's metrics are said missing.
        let snap = SnapshotBuilder::new()
            .vertex("src", "Source: txn", 2)
            .vertex("parse", "parse", 2)
            .vertex("score", "score", 2)
            .vertex("sink", "Sink: store", 2)
            .edge("src", "parse", "FORWARD")
            .edge("parse", "score", "HASH")
            .edge("score", "sink", "FORWARD")
            .all_subtasks("src", 0.02, 0.97, 0.01, None)
            .all_subtasks("score", 0.95, 0.0, 0.05, 1000.0)
            .all_subtasks("sink", 0.05, 0.0, 0.95, 1000.0)
            .build();
        let located = with_context(&snap, run);
        assert_eq!(located.culprits, ["score"]);
        assert!(
            located.report.cause.contains(
                &LocateFact::UnseenBetween { vertices: vec!["parse".into()], culprit: "score".into() }.into()
            )
        );
        // The backpressured region upstream of score counts the source beyond parse: 1.
        let Fact::Locate(LocateFact::Culprit { .. }) = &located.report.detail else { panic!() };
        assert!(located.report.not_the_fix.contains(
            &LocateFact::NotTheBackpressured { vertices: vec!["Source: txn".into()], culprit: "score".into() }.into()
        ));
    }

    #[test]
    fn an_idle_vertex_after_a_vertex_without_series_leaves_that_vertex_the_likely_culprit() {
        // Transparency names only a busy vertex: with score idle (0.05), parse without
        // series is where the backpressure stops, not the exchange parse → score.
        let snap = job("score", 0.05).build();
        let located = with_context(&snap, run);
        assert!(located.network.is_empty());
        assert_eq!(located.culprits, ["score"]);
    }
}
