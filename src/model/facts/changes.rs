//! Changes of the job's identity or shape the collector saw ([`RunChange`]): the run asked
//! about was replaced by a newer one, a vertex was rescaled, the job restarted. Said in the
//! summary of every verdict, and in the fix when a change cut the culprit's parallelism.

use crate::model::rescales::RescaleCause;
use crate::model::snapshot::RunChange;

#[derive(Debug, Clone, PartialEq)]
pub enum ChangeFact {
    /// What changed, and when (the summary's tail).
    Happened(RunChange),
    /// Fix: the culprit's parallelism was cut inside the window; restoring it (or the
    /// autoscaler's bounds that allowed the cut) is the fix to weigh first. `sink`: the
    /// culprit writes to an external system (fewer writers, not only a slow system).
    /// `by`: the kind of change that made the cut.
    ParallelismCut { vertex: String, from: u32, to: u32, at_ms: i64, sink: bool, by: CutBy },
}

/// The change that cut a vertex's parallelism: whatever its kind, the cut leads the fix.
#[derive(Debug, Clone, PartialEq)]
pub enum CutBy {
    /// An in-place rescale seen in the series only (the number of reporting subtasks fell).
    Rescale,
    /// A rescale of the Adaptive scheduler, with its trigger cause from Flink's rescale
    /// history.
    Scheduler(Box<RescaleCause>),
    /// A redeploy: run `old_id` was replaced by run `new_id`, which runs the vertex with
    /// fewer subtasks than the old run's plan.
    Redeploy { old_id: String, new_id: String },
}
