//! The changes of the job's identity or shape the collector saw (`Snapshot::changes`), as
//! facts: each in the summary, and a change that cut the culprit's parallelism first in
//! the fix (the cut, not only the code or the system behind it, made it the bottleneck).

use crate::model::facts::Fact;
use crate::model::facts::changes::{ChangeFact, CutBy};
use crate::model::snapshot::{RunChange, Snapshot};

/// Every change, for the summary's tail.
pub(super) fn summary_tail(snapshot: &Snapshot) -> Vec<Fact> {
    snapshot.changes.iter().map(|c| ChangeFact::Happened(c.clone()).into()).collect()
}

/// The fix to weigh first when a change inside the window cut the culprit's parallelism
/// (`culprit`: its vertex id; `sink`: it writes to an external system), whatever its kind:
/// a rescale seen in the series ([`RunChange::Rescaled`]), one only in Flink's rescale
/// history ([`RunChange::SchedulerRescale`] that completed, naming the culprit's vertex),
/// or a redeploy whose new run runs the culprit with fewer subtasks
/// ([`RunChange::Replaced`] with it among `resized`). The latest cut when there are
/// several (the one the culprit runs with now).
pub(super) fn cut_culprit(snapshot: &Snapshot, culprit: Option<&str>, sink: bool) -> Option<Fact> {
    let culprit = culprit?;
    let name = snapshot.graph.as_ref().and_then(|g| g.vertex(culprit)).map(|v| v.name.as_str());
    let of_culprit = |vertices: &[(String, u32, u32)]| {
        vertices.iter().find(|(v, from, to)| Some(v.as_str()) == name && to < from).cloned()
    };
    let cut = |(vertex, from, to): (String, u32, u32), at_ms: i64, by: CutBy| ChangeFact::ParallelismCut {
        vertex,
        from,
        to,
        at_ms,
        sink,
        by,
    };
    let cuts = snapshot.changes.iter().filter_map(|c| match c {
        RunChange::Rescaled { vertex_id, vertex, at_ms, from, to, by } if vertex_id == culprit && to < from => {
            let by = by.clone().map_or(CutBy::Rescale, CutBy::Scheduler);
            Some((*at_ms, cut((vertex.clone(), *from, *to), *at_ms, by)))
        }
        RunChange::SchedulerRescale { at_ms, cause, vertices } if cause.completed() => {
            Some((*at_ms, cut(of_culprit(vertices)?, *at_ms, CutBy::Scheduler(cause.clone()))))
        }
        RunChange::Replaced { old_id, new_id, new_start_ms, resized, .. } => {
            let by = CutBy::Redeploy { old_id: old_id.clone(), new_id: new_id.clone() };
            Some((*new_start_ms, cut(of_culprit(resized)?, *new_start_ms, by)))
        }
        RunChange::Rescaled { .. }
        | RunChange::SchedulerRescale { .. }
        | RunChange::Stopped { .. }
        | RunChange::Restarted { .. } => None,
    });
    // Of two cuts at one time, the later-listed wins (the history's, which says more).
    cuts.enumerate().max_by_key(|(i, (at_ms, _))| (*at_ms, *i)).map(|(_, (_, c))| c.into())
}

#[cfg(test)]
mod tests {
    use crate::diagnose::testkit::*;
    use crate::model::rescales::RescaleCause;
    use crate::model::snapshot::{RunChange, Snapshot};
    use crate::model::verdict::Finding;

    /// Source → map → sink, the sink (1 subtask, busy 0.95) the culprit after `changes`.
    fn cut_sink(changes: Vec<RunChange>) -> Snapshot {
        let mut snap = SnapshotBuilder::new()
            .vertex("src", "Source: orders", 2)
            .vertex("map", "map", 2)
            .vertex("sink", "Sink: orders-es", 1)
            .edge("src", "map", "FORWARD")
            .edge("map", "sink", "REBALANCE")
            .all_subtasks("src", 0.0, 0.9, 0.1, None)
            .all_subtasks("map", 0.05, 0.9, 0.05, 300.0)
            .subtask("sink", 0, 0.95, 0.0, 0.05, 600.0)
            .build();
        snap.changes = changes;
        snap
    }

    fn completed() -> Box<RescaleCause> {
        Box::new(RescaleCause {
            trigger: Some("UPDATE_REQUIREMENT".into()),
            terminal_state: Some("COMPLETED".into()),
            terminated_reason: Some("SUCCEEDED".into()),
        })
    }

    #[test]
    fn every_kind_of_change_that_cut_the_culprits_parallelism_leads_the_fix() {
        let at = t(-120);
        let kinds = [
            (
                "rescale in the series",
                RunChange::Rescaled {
                    vertex_id: "sink".into(),
                    vertex: "Sink: orders-es".into(),
                    at_ms: at,
                    from: 2,
                    to: 1,
                    by: None,
                },
                "Restore its parallelism; when the Flink Kubernetes Operator's autoscaler made the cut",
            ),
            (
                "rescale in Flink's history only",
                RunChange::SchedulerRescale {
                    at_ms: at,
                    cause: completed(),
                    vertices: vec![("Sink: orders-es".into(), 2, 1)],
                },
                "Flink's rescale history says the Adaptive scheduler made the cut",
            ),
            (
                "redeploy",
                RunChange::Replaced {
                    old_id: "a".into(),
                    new_id: "b".into(),
                    old_last_ms: at - 10_000,
                    new_start_ms: at,
                    resized: vec![("Sink: orders-es".into(), 2, 1)],
                },
                "when run a was redeployed as run b: it has fewer writers",
            ),
        ];
        for (kind, change, says) in kinds {
            let v = verdict(&cut_sink(vec![change]));
            assert_eq!(v.finding, Finding::Sink, "{kind}: {}", v.summary);
            let first = &v.fix[0];
            assert!(
                first.starts_with("Weigh first: Sink: orders-es was cut from 2 to 1 subtasks at 2027-01-15T07:58:00Z"),
                "{kind}: {:?}",
                v.fix
            );
            assert!(first.contains(says), "{kind}: {first}");
            // The slow system behind it comes after the cut, not instead of it.
            assert!(v.fix[1].starts_with("Fix the system behind Sink: orders-es"), "{kind}: {:?}", v.fix);
        }
    }

    #[test]
    fn a_change_that_did_not_cut_the_culprit_does_not_lead_the_fix() {
        let at = t(-120);
        let failed = Box::new(RescaleCause { terminal_state: Some("FAILED".into()), ..*completed() });
        for (kind, change) in [
            (
                "redeploy that raised it",
                RunChange::Replaced {
                    old_id: "a".into(),
                    new_id: "b".into(),
                    old_last_ms: at,
                    new_start_ms: at,
                    resized: vec![("Sink: orders-es".into(), 1, 2)],
                },
            ),
            (
                "redeploy that cut another vertex",
                RunChange::Replaced {
                    old_id: "a".into(),
                    new_id: "b".into(),
                    old_last_ms: at,
                    new_start_ms: at,
                    resized: vec![("map".into(), 4, 2)],
                },
            ),
            (
                "failed rescale",
                RunChange::SchedulerRescale {
                    at_ms: at,
                    cause: failed,
                    vertices: vec![("Sink: orders-es".into(), 2, 1)],
                },
            ),
            ("restart", RunChange::Restarted { at_ms: at }),
        ] {
            let v = verdict(&cut_sink(vec![change]));
            assert!(!v.fix.iter().any(|f| f.starts_with("Weigh first")), "{kind}: {:?}", v.fix);
        }
    }

    #[test]
    fn of_a_redeploy_and_a_later_rescale_the_later_cut_is_weighed() {
        // Redeployed at −240 s with the sink 4 → 2, rescaled in place at −60 s 2 → 1: the
        // culprit runs with the rescale's 1, whatever order the changes are listed in.
        let redeploy = RunChange::Replaced {
            old_id: "a".into(),
            new_id: "b".into(),
            old_last_ms: t(-250),
            new_start_ms: t(-240),
            resized: vec![("Sink: orders-es".into(), 4, 2)],
        };
        let rescale = RunChange::Rescaled {
            vertex_id: "sink".into(),
            vertex: "Sink: orders-es".into(),
            at_ms: t(-60),
            from: 2,
            to: 1,
            by: None,
        };
        for changes in [vec![redeploy.clone(), rescale.clone()], vec![rescale, redeploy]] {
            let v = verdict(&cut_sink(changes));
            assert!(v.fix[0].starts_with("Weigh first: Sink: orders-es was cut from 2 to 1"), "{:?}", v.fix);
        }
    }
}
