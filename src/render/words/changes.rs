//! Words of [`ChangeFact`]: a run replaced, a rescale, a restart.

use std::fmt::{self, Formatter};

use crate::model::facts::changes::{ChangeFact, CutBy};
use crate::model::rescales::RescaleCause;
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
        ChangeFact::Happened(RunChange::Rescaled { vertex, at_ms, from, to, by: None, .. }) => {
            write!(f, "{vertex} was rescaled from {from} to {to} subtasks at {}.", rfc3339(*at_ms))
        }
        ChangeFact::Happened(RunChange::Rescaled { vertex, at_ms, from, to, by: Some(by), .. }) => write!(
            f,
            "{vertex} was rescaled from {from} to {to} subtasks at {} by the Adaptive scheduler: {}.",
            rfc3339(*at_ms),
            trigger(by)
        ),
        ChangeFact::Happened(RunChange::SchedulerRescale { at_ms, cause, vertices }) => {
            let vertices: Vec<String> = vertices.iter().map(|(v, from, to)| format!("{v} {from} → {to}")).collect();
            let vertices =
                if vertices.is_empty() { String::new() } else { format!(" (parallelism {})", vertices.join(", ")) };
            let ended =
                cause.terminated_reason.as_deref().map(reason).map(|r| format!("; it ended: {r}")).unwrap_or_default();
            match cause.terminal_state.as_deref() {
                Some("COMPLETED") => write!(
                    f,
                    "The Adaptive scheduler rescaled the job at {}{vertices}: {}.",
                    rfc3339(*at_ms),
                    trigger(cause)
                ),
                None => write!(
                    f,
                    "The Adaptive scheduler is rescaling the job since {}{vertices}: {}.",
                    rfc3339(*at_ms),
                    trigger(cause)
                ),
                Some(state) => write!(
                    f,
                    "A rescale of the job by the Adaptive scheduler {} at {} (begun because {}{ended}): Flink's rescale history says it did not take effect.",
                    match state {
                        "FAILED" => "failed".to_string(),
                        "IGNORED" => "was ignored".to_string(),
                        other => format!("ended {}", words_of(other)),
                    },
                    rfc3339(*at_ms),
                    trigger(cause)
                ),
            }
        }
        ChangeFact::Happened(RunChange::Restarted { at_ms }) => {
            write!(f, "The job restarted at {} (same parallelism).", rfc3339(*at_ms))
        }
        ChangeFact::ParallelismCut { vertex, from, to, at_ms, sink, by: CutBy::Scheduler(by) } => write!(
            f,
            "Weigh first: {vertex} was cut from {from} to {to} subtasks at {}{}; Flink's rescale history says the Adaptive scheduler made the cut: {}. {}",
            rfc3339(*at_ms),
            if *sink { " (it has fewer writers, not only a slow system behind it)" } else { "" },
            trigger(by),
            match by.trigger.as_deref() {
                Some("UPDATE_REQUIREMENT") =>
                    "Restore its upper bound (PUT /jobs/:jobid/resource-requirements); when the Flink Kubernetes Operator's autoscaler set it, bound it (job.autoscaler.vertex.min-parallelism), leave the vertex out of scaling (job.autoscaler.vertex.exclude.ids), or check the utilisation it aims for (job.autoscaler.target.utilization).",
                Some("RECOVERABLE_FAILOVER") =>
                    "It came back from a failure with fewer slots than it asks for: give the cluster back the TaskManagers it lost, or raise the vertex's lower bound in the job's resource requirements so that it waits for them.",
                _ =>
                    "Restore its parallelism: raise the vertex's bounds in the job's resource requirements (PUT /jobs/:jobid/resource-requirements) or give the cluster the slots it needs.",
            }
        ),
        ChangeFact::ParallelismCut { vertex, from, to, at_ms, sink, by: CutBy::Redeploy { old_id, new_id } } => write!(
            f,
            "Weigh first: {vertex} was cut from {from} to {to} subtasks at {} when run {old_id} was redeployed as run {new_id}{}. Restore its parallelism in what deploys the job (the vertex's setParallelism, pipeline.jobvertex-parallelism-overrides, parallelism.default or the FlinkDeployment's spec.job.parallelism); when the Flink Kubernetes Operator's autoscaler made the cut (it redeploys with pipeline.jobvertex-parallelism-overrides where it cannot rescale in place), bound it (job.autoscaler.vertex.min-parallelism), leave the vertex out of scaling (job.autoscaler.vertex.exclude.ids), or check the utilisation it aims for (job.autoscaler.target.utilization).",
            rfc3339(*at_ms),
            if *sink { ": it has fewer writers, not only a slow system behind it" } else { "" }
        ),
        ChangeFact::ParallelismCut { vertex, from, to, at_ms, sink, by: CutBy::Rescale } => write!(
            f,
            "Weigh first: {vertex} was cut from {from} to {to} subtasks at {}{}. Restore its parallelism; when the Flink Kubernetes Operator's autoscaler made the cut, bound it (job.autoscaler.vertex.min-parallelism), leave the vertex out of scaling (job.autoscaler.vertex.exclude.ids), or check the utilisation it aims for (job.autoscaler.target.utilization).",
            rfc3339(*at_ms),
            if *sink { ": it has fewer writers, not only a slow system behind it" } else { "" }
        ),
    }
}

/// Why the Adaptive scheduler began a rescale (Flink's `TriggerCause`), in words.
fn trigger(cause: &RescaleCause) -> String {
    match cause.trigger.as_deref() {
        Some("UPDATE_REQUIREMENT") => "resource requirements changed".into(),
        Some("NEW_RESOURCE_AVAILABLE") => "new resources became available".into(),
        Some("RECOVERABLE_FAILOVER") => "a recoverable failure restarted the job".into(),
        Some("INITIAL_SCHEDULE") => "the job's first schedule".into(),
        Some(other) => words_of(other),
        None => "no cause given".into(),
    }
}

/// How a rescale ended (Flink's `TerminatedReason`), in words.
fn reason(reason: &str) -> String {
    match reason {
        "SUCCEEDED" => "succeeded".into(),
        "EXCEPTION_OCCURRED" => "an exception occurred".into(),
        "RESOURCE_REQUIREMENTS_UPDATED" => "the resource requirements changed again".into(),
        "NO_RESOURCES_OR_PARALLELISMS_CHANGE" => "neither the resources nor the parallelism changed".into(),
        "JOB_FINISHED" => "the job finished".into(),
        "JOB_FAILED" => "the job failed".into(),
        "JOB_CANCELED" => "the job was cancelled".into(),
        "JOB_FAILOVER_RESTARTING" => "the job failed over and restarted".into(),
        other => words_of(other),
    }
}

/// `SOME_NAME` → `some name` (a name Flink may add later).
fn words_of(name: &str) -> String {
    name.to_lowercase().replace('_', " ")
}
