//! Step `failover`: is the job failing and restarting? It runs first and, when it hits,
//! decides the verdict: what backpressure a job shows while it recovers is catch-up (its
//! sources reread from the last checkpoint), not a bottleneck, and the failure is what to
//! fix.
//!
//! Counts the restarts inside the window from the rises of Flink's `numRestarts` (the
//! requested window, before the collector narrows it past the warm-up of the latest
//! restart), else the entries of Flink REST's exception history inside it. Hits with at
//! least `failover_restarts` (default 2: it failed again after recovering; Alibaba Cloud's
//! P0 alert is "≥ 1 failover per minute"), or with one while the job is restarting at the
//! end of the window. A single restart the job has recovered from is a warm-up, left out of
//! the window by the collector, not a failover.
//!
//! The culprit is the vertex whose tasks the history's entries in the window name most
//! often (the newest of them tells the failure); without a history the task is unknown and
//! the verdict is inconclusive about it. `no_data` without either input, which, like a
//! `sources` without readers' metrics, limits nothing else.

use std::collections::BTreeMap;

use crate::diagnose::{Context, StepReport};
use crate::model::facts::failover::{FailoverFact, Failure, FailureKind};
use crate::model::failover::ExceptionEntry;
use crate::model::verdict::{Evidence, Finding, Outcome};

/// What the step found: its report and the vertex (id) it names.
pub struct Failing {
    pub report: StepReport,
    pub vertex_id: Option<String>,
}

pub fn run(ctx: &Context) -> Failing {
    let none = |report| Failing { report, vertex_id: None };
    let Some(failover) = ctx.snapshot.failover.as_ref() else {
        return none(StepReport::new(Outcome::NoData, FailoverFact::NotMeasured));
    };
    let (from, at) = (failover.counted_from_ms, ctx.snapshot.at_ms);
    let in_window: Vec<&ExceptionEntry> = failover
        .exceptions
        .iter()
        .flat_map(|x| &x.entries)
        .filter(|e| e.timestamp_ms > from && e.timestamp_ms <= at)
        .collect();
    let restarts = failover.restarts_in_window();
    let failures = failover.exceptions.as_ref().map(|_| in_window.len() as u32);
    if restarts.is_none() && failures.is_none() {
        return none(StepReport::new(Outcome::NoData, FailoverFact::NotMeasured));
    }
    let threshold = ctx.cfg.thresholds.failover_restarts;
    let window_s = (at - from) / 1000;
    let counted = restarts.unwrap_or(0).max(failures.unwrap_or(0));
    let detail =
        FailoverFact::Counted { restarts, failures, window_s, threshold, restarting_now: failover.restarting_now };
    if counted < threshold && !(counted >= 1 && failover.restarting_now) {
        return none(StepReport::clear(detail));
    }
    // Failures from the counter's rises, else the history's entries (newest first).
    let mut times: Vec<i64> = match &failover.restarts {
        Some(r) if !r.is_empty() => r.iter().map(|(t, _)| *t).collect(),
        _ => in_window.iter().map(|e| e.timestamp_ms).collect(),
    };
    times.sort_unstable();
    if let Some(since_s) = recovered(ctx, &times, failover.restarting_now) {
        return none(StepReport::clear(FailoverFact::Recovered { restarts: counted, window_s, since_s }));
    }

    let mut report = StepReport::hit(Finding::FailingOver, detail);
    let job = ctx.snapshot.job.name.clone();
    report.evidence.push(Evidence {
        subject: job.clone(),
        metric: if restarts.is_some() { "numRestarts (rises in the window)" } else { "exceptions in the window" }
            .into(),
        value: counted as f64,
        unit: "count".into(),
        threshold: Some(threshold as f64),
        query: None,
    });
    let latest = times.last().copied();
    let ago_s = latest.map(|t| (at - t) / 1000);
    let Some((entries, vertex_id)) = most_failing(ctx, &in_window) else {
        report.summary =
            Some(FailoverFact::FailingOver { job, restarts: counted, window_s, ago_s, failure: None }.into());
        report.cause.push(FailoverFact::RestartsOnly { restarts: counted, window_s });
        report.fix.push(FailoverFact::ReadTheHistory);
        report.fix.push(FailoverFact::Backoff);
        report.not_the_fix.push(FailoverFact::NotScaling { memory: false });
        if failover.exceptions.is_none() {
            report.missing_inputs.push(FailoverFact::HistoryMissing.into());
        }
        return none(report);
    };
    let newest = entries[0];
    let failure = failure_of(ctx, newest);
    let mut subtasks: Vec<u32> = entries.iter().filter_map(|e| e.vertex_and_subtask().and_then(|(_, s)| s)).collect();
    subtasks.sort_unstable();
    subtasks.dedup();
    report.subtasks = (!subtasks.is_empty() && vertex_id.is_some()).then_some(subtasks);
    report.evidence.push(Evidence {
        subject: failure.vertex.clone().or(failure.task.clone()).unwrap_or_else(|| job.clone()),
        metric: format!("exceptions: {}", failure.exception),
        value: entries.len() as f64,
        unit: "count".into(),
        threshold: None,
        query: None,
    });
    report.summary = Some(
        FailoverFact::FailingOver { job, restarts: counted, window_s, ago_s, failure: Some(failure.clone()) }.into(),
    );
    let truncated = failover.exceptions.as_ref().is_some_and(|x| x.truncated);
    report.cause.push(FailoverFact::Threw {
        failure: failure.clone(),
        count: entries.len() as u32,
        failures: in_window.len() as u32,
        truncated,
    });
    let memory = matches!(
        failure.kind,
        FailureKind::HeapOom | FailureKind::DirectOom | FailureKind::MetaspaceOom | FailureKind::ContainerOomKilled
    );
    report.fix.push(FailoverFact::FixFailure { failure });
    report.fix.push(FailoverFact::Backoff);
    report.not_the_fix.push(FailoverFact::NotScaling { memory });
    if restarts.is_none() {
        report.missing.push("numRestarts".into());
    }
    Failing { report, vertex_id }
}

/// Seconds the job has run since its last failure, when that is long enough to call it
/// recovered: longer than twice the mean gap between its failures and than the warm-up
/// (`startup_exclusion`) — a job that failed twice four minutes ago and ran since is judged
/// on its bottleneck, not on its old failures. `None` while restarting, or still failing.
fn recovered(ctx: &Context, times: &[i64], restarting_now: bool) -> Option<i64> {
    let (first, last) = (*times.first()?, *times.last()?);
    let gap = if times.len() >= 2 { (last - first) / (times.len() as i64 - 1) } else { 0 };
    let since = ctx.snapshot.at_ms - last;
    (!restarting_now && since > (2 * gap).max(ctx.cfg.startup_exclusion.as_ms())).then_some(since / 1000)
}

/// The entries of the task (by vertex, else by task name) that failed most often in the
/// window, newest first, with its vertex id when the graph has a vertex of that name; ties
/// go to the newest failure. `None` when no entry names a task.
fn most_failing<'e>(
    ctx: &Context,
    in_window: &[&'e ExceptionEntry],
) -> Option<(Vec<&'e ExceptionEntry>, Option<String>)> {
    let mut by_task: BTreeMap<String, Vec<&ExceptionEntry>> = BTreeMap::new();
    for e in in_window {
        if let Some((name, _)) = e.vertex_and_subtask() {
            by_task.entry(name).or_default().push(e);
        }
    }
    let Some((name, mut entries)) =
        by_task.into_iter().max_by(|(_, a), (_, b)| a.len().cmp(&b.len()).then(newest(a).cmp(&newest(b))))
    else {
        // Only global failures (the JobManager's own: a checkpoint failure threshold, a
        // suppressed recovery): the newest tells the failure, no vertex is the culprit.
        let mut all: Vec<&ExceptionEntry> = in_window.to_vec();
        all.sort_by_key(|e| std::cmp::Reverse(e.timestamp_ms));
        return (!all.is_empty()).then_some((all, None));
    };
    entries.sort_by_key(|e| std::cmp::Reverse(e.timestamp_ms));
    Some((entries, vertex_named(ctx, &name)))
}

fn newest(entries: &[&ExceptionEntry]) -> i64 {
    entries.iter().map(|e| e.timestamp_ms).max().unwrap_or(0)
}

/// The id of the vertex named `name` (exactly, else as the reporter sanitizes names).
fn vertex_named(ctx: &Context, name: &str) -> Option<String> {
    let vertices = &ctx.signals.vertices;
    vertices
        .iter()
        .find(|v| v.name == name)
        .or_else(|| vertices.iter().find(|v| crate::model::graph::same_name(&v.name, name)))
        .map(|v| v.id.clone())
}

fn failure_of(ctx: &Context, e: &ExceptionEntry) -> Failure {
    let task = e.vertex_and_subtask();
    let vertex = task.as_ref().and_then(|(name, _)| vertex_named(ctx, name)).and_then(|id| ctx.signals.vertex(&id));
    Failure {
        exception: e.exception.clone(),
        message: e.message.clone(),
        frame: e.frame.clone(),
        root_cause: e.root_cause.clone(),
        task: e.task_name.clone(),
        vertex: vertex.map(|v| v.name.clone()),
        subtask: task.and_then(|(_, s)| s),
        endpoint: e.endpoint.clone(),
        task_manager_id: e.task_manager_id.clone(),
        at_ms: e.timestamp_ms,
        kind: if pod_oom_killed(ctx, e) { FailureKind::ContainerOomKilled } else { kind_of(e) },
    }
}

/// The pod of the failure's TaskManager (on Kubernetes the TaskManager id is the pod name)
/// was OOM-killed in the window.
fn pod_oom_killed(ctx: &Context, e: &ExceptionEntry) -> bool {
    let Some(tm) = e.task_manager_id.as_deref() else { return false };
    let pods = ctx.snapshot.pods.as_deref().unwrap_or_default();
    pods.iter().any(|p| crate::model::graph::same_name(&p.pod, tm) && p.oom_killed_in_window() == Some(true))
}

/// Messages of a TaskManager that went away, as Flink's JobMaster and network stack write
/// them (1.x and 2.x).
const TASKMANAGER_LOST: [&str; 7] = [
    "Heartbeat of TaskManager",
    "is no longer reachable",
    "TaskManager with id",
    "Connection unexpectedly closed by remote task manager",
    "RemoteTransportException",
    "PartitionNotFoundException",
    "The TaskExecutor is shutting down",
];

/// The kind of a failure, from its class, message and innermost cause.
pub fn kind_of(e: &ExceptionEntry) -> FailureKind {
    let text = format!("{}: {} {}", e.exception, e.message, e.root_cause.as_deref().unwrap_or(""));
    if text.contains("OutOfMemoryError") {
        return if text.contains("Direct buffer memory") {
            FailureKind::DirectOom
        } else if text.contains("Metaspace") {
            FailureKind::MetaspaceOom
        } else {
            FailureKind::HeapOom
        };
    }
    if TASKMANAGER_LOST.iter().any(|m| text.contains(m)) {
        return FailureKind::TaskManagerLost;
    }
    if text.contains("tolerable failure threshold") {
        return FailureKind::CheckpointFailures;
    }
    FailureKind::Code
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::testkit::*;
    use crate::model::failover::{Failover, JobExceptions};
    use crate::model::verdict::{Confidence, Status, StepName};

    /// Source → validate → sink, everything upstream of validate red (its recovery's
    /// catch-up), validate busy.
    fn job() -> SnapshotBuilder {
        SnapshotBuilder::new()
            .vertex("src", "Source: txns", 2)
            .vertex("val", "validate", 2)
            .vertex("sink", "Sink: db", 2)
            .edge("src", "val", "HASH")
            .edge("val", "sink", "FORWARD")
            .all_subtasks("src", 0.02, 0.95, 0.03, None)
            .all_subtasks("val", 0.97, 0.0, 0.03, 800.0)
            .all_subtasks("sink", 0.1, 0.0, 0.9, 800.0)
    }

    fn restarts(at_s: &[i64]) -> Option<Vec<(i64, u32)>> {
        Some(at_s.iter().map(|s| (t(*s), 1)).collect())
    }

    fn history(entries: Vec<ExceptionEntry>) -> Option<JobExceptions> {
        Some(JobExceptions { entries, truncated: false })
    }

    fn failover(r: Option<Vec<(i64, u32)>>, x: Option<JobExceptions>, now: bool) -> Failover {
        Failover { restarts: r, counted_from_ms: t(-WINDOW_S), restarting_now: now, exceptions: x }
    }

    #[test]
    fn a_job_restarting_again_and_again_leads_the_verdict_with_the_task_that_throws() {
        // Restarts at −250, −190, −130, −70, −10 s: 5 in the 300 s window, ≥ 2.
        let thrown = |s| failed("validate (2/2) - execution #3", "java.lang.IllegalStateException", "bad txn", s);
        let snap = job()
            .failover(failover(
                restarts(&[-250, -190, -130, -70, -10]),
                history(vec![thrown(-11), thrown(-71), thrown(-131)]),
                false,
            ))
            .build();
        let v = verdict(&snap);
        assert_eq!((v.status, v.finding), (Status::CulpritFound, Finding::FailingOver));
        let c = v.culprit.as_ref().unwrap();
        // "(2/2)" is subtask index 1.
        assert_eq!((c.vertex_name.as_str(), c.subtasks.as_slice()), ("validate", &[1][..]));
        assert_eq!(v.confidence, Confidence::High);
        assert!(v.summary.starts_with("test-job is failing over: 5 restarts in the last 5 min"), "{}", v.summary);
        assert!(v.summary.contains("validate[1] threw java.lang.IllegalStateException"), "{}", v.summary);
        assert!(v.cause.contains("bad txn") && v.cause.contains("com.acme.Job$Validate.map"), "{}", v.cause);
        assert!(v.fix[0].starts_with("Fix what makes validate[1] throw"), "{:?}", v.fix);
        assert!(v.fix[1].contains("restart-strategy.type: exponential-delay"), "{:?}", v.fix);
        // Every other step is skipped: the red vertices are catch-up, not a bottleneck.
        assert_eq!(v.steps[0].step, StepName::Failover);
        assert!(v.steps[1..].iter().all(|s| s.outcome == Outcome::Skipped));
        assert_eq!(evidence(&v.evidence, "numRestarts (rises in the window)").value, 5.0);
    }

    #[test]
    fn one_restart_the_job_recovered_from_is_not_a_failover_but_one_while_restarting_is() {
        let once = job().failover(failover(restarts(&[-200]), history(vec![]), false)).build();
        let v = verdict(&once);
        assert_eq!(v.steps[0].outcome, Outcome::Clear, "{}", v.steps[0].detail);
        assert_ne!(v.finding, Finding::FailingOver);
        let restarting = job().failover(failover(restarts(&[-20]), None, true)).build();
        assert_eq!(verdict(&restarting).finding, Finding::FailingOver);
    }

    #[test]
    fn a_job_that_failed_twice_minutes_ago_and_ran_since_has_recovered_and_is_judged_on_its_bottleneck() {
        // Restarts at −290 and −280 s: gap 10 s; running 280 s since > max(2 × 10 s, 75 s).
        let snap = job().failover(failover(restarts(&[-290, -280]), history(vec![]), false)).build();
        let v = verdict(&snap);
        assert_eq!(v.steps[0].outcome, Outcome::Clear);
        assert!(v.steps[0].detail.contains("running for 280 s since"), "{}", v.steps[0].detail);
        assert_ne!(v.finding, Finding::FailingOver);
        // Every ~60 s up to 20 s ago: still failing (20 s < max(2 × 60 s, 75 s)).
        let failing = job().failover(failover(restarts(&[-200, -140, -80, -20]), None, false)).build();
        assert_eq!(verdict(&failing).finding, Finding::FailingOver);
    }

    #[test]
    fn without_an_exception_history_the_failing_task_is_unknown_and_the_verdict_says_what_to_read() {
        let snap = job().failover(failover(restarts(&[-100, -40]), None, false)).build();
        let v = verdict(&snap);
        assert_eq!((v.status, v.finding), (Status::Inconclusive, Finding::FailingOver));
        assert!(v.culprit.is_none());
        assert!(v.fix[0].starts_with("Read the root exception"), "{:?}", v.fix);
        assert!(v.missing.iter().any(|m| m.contains("exception history")), "{:?}", v.missing);
    }

    #[test]
    fn without_num_restarts_the_history_counts_and_old_entries_do_not() {
        // Two failures inside the window and one an hour before it: 2 ≥ 2.
        let e = |s| failed("validate (1/2)", "java.lang.NullPointerException", "", s);
        let snap = job().failover(failover(None, history(vec![e(-30), e(-90), e(-3600)]), false)).build();
        let v = verdict(&snap);
        assert_eq!((v.status, v.finding), (Status::CulpritFound, Finding::FailingOver));
        assert_eq!(v.confidence, Confidence::Medium, "no numRestarts: the restarts rest on the history");
        // Only the old one: nothing in the window.
        let old = job().failover(failover(None, history(vec![e(-3600)]), false)).build();
        assert_eq!(verdict(&old).steps[0].outcome, Outcome::Clear);
    }

    #[test]
    fn no_restart_counter_and_no_history_is_no_data_and_changes_nothing_else() {
        let with = job().failover(failover(None, None, false)).build();
        let without = job().build();
        let (a, b) = (verdict(&with), verdict(&without));
        assert_eq!(a.steps[0].outcome, Outcome::NoData);
        assert_eq!((a.finding, a.confidence, &a.summary), (b.finding, b.confidence, &b.summary));
    }

    #[test]
    fn the_task_that_fails_most_often_is_the_culprit_and_its_kind_chooses_the_fix() {
        // validate fails once (newest), the sink three times with a heap OOM: the sink.
        let oom = |s| failed("Sink: db (1/2)", "java.lang.OutOfMemoryError", "Java heap space", s);
        let snap = job()
            .failover(failover(
                restarts(&[-200, -140, -80, -20]),
                history(vec![
                    failed("validate (1/2)", "java.lang.IllegalStateException", "x", -10),
                    oom(-21),
                    oom(-81),
                    oom(-141),
                ]),
                false,
            ))
            .build();
        let v = verdict(&snap);
        assert_eq!(v.culprit.as_ref().unwrap().vertex_name, "Sink: db");
        assert!(v.fix[0].contains("taskmanager.memory.task.heap.size"), "{:?}", v.fix);
        assert!(v.not_the_fix[0].contains("the memory that runs out is the fix"), "{:?}", v.not_the_fix);
    }

    #[test]
    fn a_lost_taskmanager_whose_pod_was_oom_killed_gets_the_containers_memory_fix() {
        // The heartbeat timed out on tm-1; kube-state-metrics says pod tm-1 was OOM-killed
        // and restarted in the window.
        let lost = |s| {
            failed(
                "validate (1/2)",
                "java.util.concurrent.TimeoutException",
                "Heartbeat of TaskManager with id tm-1 timed out.",
                s,
            )
        };
        let pod = crate::model::resources::PodResources {
            pod: "tm-1".into(),
            namespace: None,
            container: None,
            last_terminated_oom_killed: Some(true),
            restarts_in_window: Some(2.0),
            working_set_max_bytes: None,
            memory_limit_bytes: None,
            cpu_limit_cores: None,
            cpu_throttled_ratio: None,
        };
        let snap = job()
            .pod(pod)
            .failover(failover(restarts(&[-200, -60]), history(vec![lost(-61), lost(-201)]), false))
            .build();
        let v = verdict(&snap);
        assert!(v.fix[0].contains("OOM-killed") && v.fix[0].contains("taskmanager.memory.process.size"), "{:?}", v.fix);
        // Without the pod's kill it is a lost TaskManager: look at why the pod ended.
        let without =
            job().failover(failover(restarts(&[-200, -60]), history(vec![lost(-61), lost(-201)]), false)).build();
        assert!(verdict(&without).fix[0].contains("heartbeat.timeout only hides"), "{:?}", verdict(&without).fix);
    }

    #[test]
    fn a_job_failing_over_on_a_global_failure_names_it_without_a_vertex() {
        // Two global failovers (no task): checkpoints failing beyond the tolerance.
        let global = |s| ExceptionEntry {
            task_name: None,
            endpoint: None,
            task_manager_id: None,
            ..failed(
                "x",
                "org.apache.flink.util.FlinkRuntimeException",
                "Exceeded checkpoint tolerable failure threshold.",
                s,
            )
        };
        let snap =
            job().failover(failover(restarts(&[-150, -30]), history(vec![global(-31), global(-151)]), false)).build();
        let v = verdict(&snap);
        assert_eq!((v.status, v.finding), (Status::Inconclusive, Finding::FailingOver));
        assert!(
            v.cause.starts_with("The JobManager (a global failure) threw org.apache.flink.util.FlinkRuntimeException"),
            "{}",
            v.cause
        );
        assert!(v.fix[0].contains("execution.checkpointing.tolerable-failed-checkpoints"), "{:?}", v.fix);
    }

    #[test]
    fn failures_are_told_apart_by_class_message_and_cause() {
        let kind = |class: &str, message: &str, cause: Option<&str>| {
            let mut e = failed("t (1/1)", class, message, 0);
            e.root_cause = cause.map(str::to_string);
            kind_of(&e)
        };
        assert_eq!(kind("java.lang.OutOfMemoryError", "Direct buffer memory", None), FailureKind::DirectOom);
        assert_eq!(kind("java.lang.OutOfMemoryError", "Metaspace", None), FailureKind::MetaspaceOom);
        assert_eq!(
            kind(
                "org.apache.flink.runtime.JobException",
                "Recovery is suppressed",
                Some("java.lang.OutOfMemoryError: Java heap space")
            ),
            FailureKind::HeapOom
        );
        assert_eq!(
            kind("java.util.concurrent.TimeoutException", "Heartbeat of TaskManager with id tm-3 timed out.", None),
            FailureKind::TaskManagerLost
        );
        assert_eq!(
            kind(
                "org.apache.flink.util.FlinkRuntimeException",
                "Exceeded checkpoint tolerable failure threshold.",
                None
            ),
            FailureKind::CheckpointFailures
        );
        assert_eq!(kind("java.lang.ArithmeticException", "/ by zero", None), FailureKind::Code);
    }
}
