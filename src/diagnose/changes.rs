//! The changes of the job's identity or shape the collector saw (`Snapshot::changes`), as
//! facts: each in the summary, and a rescale that cut the culprit's parallelism first in
//! the fix (the cut, not only the code or the system behind it, made it the bottleneck).

use crate::model::facts::Fact;
use crate::model::facts::changes::ChangeFact;
use crate::model::snapshot::{RunChange, Snapshot};

/// Every change, for the summary's tail.
pub(super) fn summary_tail(snapshot: &Snapshot) -> Vec<Fact> {
    snapshot.changes.iter().map(|c| ChangeFact::Happened(c.clone()).into()).collect()
}

/// The fix to weigh first when a rescale inside the window cut the culprit's parallelism
/// (`culprit`: its vertex id; `sink`: it writes to an external system): seen in the series
/// ([`RunChange::Rescaled`]), or only in Flink's rescale history
/// ([`RunChange::SchedulerRescale`] that completed, naming the culprit's vertex).
pub(super) fn cut_culprit(snapshot: &Snapshot, culprit: Option<&str>, sink: bool) -> Option<Fact> {
    let culprit = culprit?;
    let name = snapshot.graph.as_ref().and_then(|g| g.vertex(culprit)).map(|v| v.name.as_str());
    snapshot.changes.iter().rev().find_map(|c| match c {
        RunChange::Rescaled { vertex_id, vertex, at_ms, from, to, by } if vertex_id == culprit && to < from => Some(
            ChangeFact::ParallelismCut {
                vertex: vertex.clone(),
                from: *from,
                to: *to,
                at_ms: *at_ms,
                sink,
                by: by.clone(),
            }
            .into(),
        ),
        RunChange::SchedulerRescale { at_ms, cause, vertices } if cause.completed() => {
            let (vertex, from, to) = vertices.iter().find(|(v, from, to)| Some(v.as_str()) == name && to < from)?;
            Some(
                ChangeFact::ParallelismCut {
                    vertex: vertex.clone(),
                    from: *from,
                    to: *to,
                    at_ms: *at_ms,
                    sink,
                    by: Some(cause.clone()),
                }
                .into(),
            )
        }
        _ => None,
    })
}
