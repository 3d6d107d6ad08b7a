//! Changes of the job's identity or shape the collector saw ([`RunChange`]): the run asked
//! about was replaced by a newer one, a vertex was rescaled, the job restarted. Said in the
//! summary of every verdict, and in the fix when a rescale cut the culprit's parallelism.

use crate::model::rescales::RescaleCause;
use crate::model::snapshot::RunChange;

#[derive(Debug, Clone, PartialEq)]
pub enum ChangeFact {
    /// What changed, and when (the summary's tail).
    Happened(RunChange),
    /// Fix: the culprit's parallelism was cut inside the window; restoring it (or the
    /// autoscaler's bounds that allowed the cut) is the fix to weigh first. `sink`: the
    /// culprit writes to an external system (fewer writers, not only a slow system).
    /// `by`: what Flink's rescale history says of the cut (the Adaptive scheduler's
    /// trigger cause), when it has it.
    ParallelismCut { vertex: String, from: u32, to: u32, at_ms: i64, sink: bool, by: Option<Box<RescaleCause>> },
}
