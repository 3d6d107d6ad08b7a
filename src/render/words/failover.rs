//! Words of [`FailoverFact`]. Exception classes and messages come from the job: they are
//! written as they are here and escaped by each renderer.

use std::fmt::{self, Formatter};

use super::numbers::human_secs;
use crate::model::facts::failover::{FailoverFact, Failure, FailureKind};
use crate::model::verdict::rfc3339;

/// `validate[1]`, else the task as Flink names it, else "the JobManager" (a global failure).
fn where_(failure: &Failure) -> String {
    match (&failure.vertex, failure.subtask, &failure.task) {
        (Some(v), Some(s), _) => format!("{v}[{s}]"),
        (Some(v), None, _) => v.clone(),
        (None, _, Some(t)) => t.clone(),
        (None, _, None) => "the JobManager (a global failure)".into(),
    }
}

/// `java.lang.IllegalStateException: message`, with the innermost cause.
fn exception(failure: &Failure) -> String {
    let mut s = failure.exception.clone();
    if !failure.message.is_empty() {
        s.push_str(&format!(": {}", failure.message));
    }
    if let Some(cause) = &failure.root_cause {
        s.push_str(&format!(" (caused by {cause})"));
    }
    s
}

fn host(failure: &Failure) -> String {
    match (&failure.task_manager_id, &failure.endpoint) {
        (Some(tm), Some(e)) if tm != e => format!(" on TaskManager {tm} ({e})"),
        (Some(tm), _) => format!(" on TaskManager {tm}"),
        (None, Some(e)) => format!(" on {e}"),
        (None, None) => String::new(),
    }
}

fn restarts(n: u32) -> String {
    if n == 1 { "1 restart".into() } else { format!("{n} restarts") }
}

pub(super) fn word(fact: &FailoverFact, f: &mut Formatter<'_>) -> fmt::Result {
    match fact {
        FailoverFact::NotMeasured => {
            f.write_str("No numRestarts and no exception history: whether the job restarts is not known.")
        }
        FailoverFact::Counted { restarts: r, failures, window_s, threshold, restarting_now } => {
            let counted = match (r, failures) {
                (Some(r), Some(x)) => format!(
                    "{} in the last {} (numRestarts), {x} failure(s) in the exception history",
                    restarts(*r),
                    human_secs(*window_s as f64)
                ),
                (Some(r), None) => {
                    format!("{} in the last {} (numRestarts)", restarts(*r), human_secs(*window_s as f64))
                }
                (None, Some(x)) => format!(
                    "{x} failure(s) in the exception history in the last {}",
                    human_secs(*window_s as f64)
                ),
                (None, None) => "nothing counted".into(),
            };
            let now = if *restarting_now { "; restarting at the end of the window" } else { "" };
            write!(f, "{counted}{now}; {threshold} or more is a job failing over.")
        }
        FailoverFact::Recovered { restarts: n, window_s, since_s } => write!(
            f,
            "{} in the last {}, and running for {} s since: recovered, not failing over.",
            restarts(*n),
            human_secs(*window_s as f64),
            since_s
        ),
        FailoverFact::FailingOver { job, restarts: n, window_s, ago_s, failure } => {
            write!(f, "{job} is failing over: {} in the last {}", restarts(*n), human_secs(*window_s as f64))?;
            if let Some(ago) = ago_s {
                write!(f, ", the latest {} before the verdict's time", human_secs(*ago as f64))?;
            }
            if let Some(x) = failure {
                write!(f, "; {} threw {}", where_(x), x.exception)?;
            }
            f.write_str(". Its backpressure is the recovery's catch-up, not a bottleneck.")
        }
        FailoverFact::Threw { failure, count, failures, truncated } => {
            // It opens the sentence (a vertex's name is written as it is).
            let at = match (&failure.vertex, &failure.task) {
                (None, None) => "The JobManager (a global failure)".to_string(),
                _ => where_(failure),
            };
            write!(f, "{at} threw {}", exception(failure))?;
            if let Some(frame) = &failure.frame {
                write!(f, " at {frame}")?;
            }
            write!(f, "{} at {}", host(failure), rfc3339(failure.at_ms))?;
            if count == failures {
                write!(f, "; every one of the {failures} failure(s) in the window's exception history")?;
            } else {
                write!(f, "; {count} of the {failures} failures in the window's exception history")?;
            }
            if *truncated {
                f.write_str(" (Flink kept only the newest: web.exception-history-size)")?;
            }
            f.write_str(
                ". Flink restarts the job after each failure and it fails again, so it makes no progress past its last checkpoint.",
            )
        }
        FailoverFact::RestartsOnly { restarts: n, window_s } => write!(
            f,
            "Flink restarted the job {} in the last {}; which task fails, and with what, is in its exception history, which was not read.",
            if *n == 1 { "once".into() } else { format!("{n} times") },
            human_secs(*window_s as f64)
        ),
        FailoverFact::FixFailure { failure } => fix(failure, f),
        FailoverFact::ReadTheHistory => f.write_str(
            "Read the root exception: Flink UI, the job's Exceptions tab, or GET /jobs/:id/exceptions (give culprit Flink REST, or --exceptions, to have it named here); fix what throws.",
        ),
        FailoverFact::Backoff => f.write_str(
            "Until it is fixed, restart with backoff so that the restarts do not hammer the sources and the state backend: restart-strategy.type: exponential-delay with restart-strategy.exponential-delay.max-backoff (e.g. 5 min); a fixed-delay strategy whose attempts run out fails the job for good.",
        ),
        FailoverFact::NotScaling { memory: false } => f.write_str(
            "More parallelism or resources for the backpressured vertices: their backpressure is the catch-up after each restart (the sources reread from the last checkpoint) and ends when the job stops failing.",
        ),
        FailoverFact::NotScaling { memory: true } => f.write_str(
            "More parallelism for the backpressured vertices: their backpressure is the catch-up after each restart and ends when the job stops failing; the memory that runs out is the fix.",
        ),
        FailoverFact::HistoryMissing => f.write_str(
            "Flink REST's exception history (GET /jobs/:id/exceptions; --exceptions offline): which task fails, and why",
        ),
    }
}

/// The fix that belongs to the kind of failure.
fn fix(failure: &Failure, f: &mut Formatter<'_>) -> fmt::Result {
    let at = where_(failure);
    match failure.kind {
        FailureKind::HeapOom => write!(
            f,
            "Give {at}'s TaskManagers more heap: raise taskmanager.memory.task.heap.size (or taskmanager.memory.process.size, which Flink divides) by about half, or keep keyed state off the heap (state.backend.type: rocksdb)."
        ),
        FailureKind::DirectOom => write!(
            f,
            "Give {at}'s TaskManagers more direct memory: raise taskmanager.memory.task.off-heap.size (the user code's and connectors' direct buffers; taskmanager.memory.framework.off-heap.size when the trace is Flink's own)."
        ),
        FailureKind::MetaspaceOom => write!(
            f,
            "Raise taskmanager.memory.jvm-metaspace.size (default 256m); a metaspace that fills up over restarts is a class-loader leak: put the connectors' jars into Flink's lib/ rather than the job jar."
        ),
        FailureKind::TaskManagerLost => write!(
            f,
            "The TaskManager{} running {at} went away: see why its process or pod ended (kubectl describe pod: OOMKilled, evicted, a preempted node); an OOM-killed container needs a memory limit above taskmanager.memory.process.size. Raising heartbeat.timeout only hides a TaskManager that is gone.",
            failure.task_manager_id.as_deref().map(|t| format!(" {t}")).unwrap_or_default()
        ),
        FailureKind::ContainerOomKilled => write!(
            f,
            "The container of TaskManager{} running {at} was OOM-killed in the window (kube-state-metrics: last terminated OOMKilled): the process outgrew the pod's memory limit. Keep taskmanager.memory.process.size under the limit (times kubernetes.taskmanager.memory.limit-factor), raise taskmanager.memory.jvm-overhead.fraction (or .min) for native memory, and keep RocksDB in managed memory (state.backend.rocksdb.memory.managed: true).",
            failure.task_manager_id.as_deref().map(|t| format!(" {t}")).unwrap_or_default()
        ),
        FailureKind::CheckpointFailures => f.write_str(
            "The job fails because more checkpoints fail than execution.checkpointing.tolerable-failed-checkpoints allows: find why they fail (their duration against execution.checkpointing.timeout, the alignment); raising the tolerance only buys time.",
        ),
        FailureKind::Code => {
            write!(f, "Fix what makes {at} throw {}", failure.exception)?;
            if let Some(frame) = &failure.frame {
                write!(f, " (at {frame})")?;
            }
            f.write_str(
                "; if a bad record causes it, catch the exception in the operator and send the record to a side output (a dead-letter topic) instead of failing the job.",
            )
        }
    }
}
