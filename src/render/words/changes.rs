//! Words of [`ChangeFact`]: a run replaced, a rescale, a restart.

use std::fmt::{self, Formatter};

use crate::model::facts::changes::ChangeFact;
use crate::model::snapshot::RunChange;
use crate::model::verdict::rfc3339;

pub(super) fn word(fact: &ChangeFact, f: &mut Formatter<'_>) -> fmt::Result {
    match fact {
        ChangeFact::Happened(RunChange::Replaced { old_id, new_id, old_last_ms, new_start_ms, resized }) => {
            let resized: Vec<String> = resized.iter().map(|(v, from, to)| format!("{v} {from} → {to}")).collect();
            write!(
                f,
                "Run {old_id} was replaced by run {new_id} at {} (same job name and deployment{}; the old run's last sample is from {}): this verdict is about the new run.",
                rfc3339(*new_start_ms),
                if resized.is_empty() { String::new() } else { format!("; parallelism {}", resized.join(", ")) },
                rfc3339(*old_last_ms)
            )
        }
        ChangeFact::Happened(RunChange::Stopped { id, last_ms, gap_s, not_running_now: true }) => write!(
            f,
            "Run {id} has not been running since {} ({gap_s} s before the time of the diagnosis): its JobManager reports an uptime of 0, Flink's \"not running at the moment\" (restarting or failing over), and this verdict is as of its last running sample.",
            rfc3339(*last_ms)
        ),
        ChangeFact::Happened(RunChange::Stopped { id, last_ms, gap_s, .. }) => write!(
            f,
            "Run {id} has not reported since {} ({gap_s} s before the time of the diagnosis) and no newer run of the job reports in its deployment: it stopped (finished, failed, restarting), and this verdict is as of its last sample.",
            rfc3339(*last_ms)
        ),
        ChangeFact::Happened(RunChange::Rescaled { vertex, at_ms, from, to, .. }) => {
            write!(f, "{vertex} was rescaled from {from} to {to} subtasks at {}.", rfc3339(*at_ms))
        }
        ChangeFact::Happened(RunChange::Restarted { at_ms }) => {
            write!(f, "The job restarted at {} (same parallelism).", rfc3339(*at_ms))
        }
        ChangeFact::ParallelismCut { vertex, from, to, at_ms, sink } => write!(
            f,
            "Weigh first: {vertex} was cut from {from} to {to} subtasks at {}{}. Restore its parallelism; when the Flink Kubernetes Operator's autoscaler made the cut, bound it (job.autoscaler.vertex.min-parallelism), leave the vertex out of scaling (job.autoscaler.vertex.exclude.ids), or check the utilisation it aims for (job.autoscaler.target.utilization).",
            rfc3339(*at_ms),
            if *sink { ": it has fewer writers, not only a slow system behind it" } else { "" }
        ),
    }
}
