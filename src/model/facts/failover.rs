//! Facts of step `failover` (`crate::diagnose::steps::failover`): a job that fails and
//! restarts, the failure that makes it (from Flink REST's exception history), and the fix
//! that belongs to that failure. Times are Unix ms or s as named.

/// What kind of failure an exception is, for the fix that belongs to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// `OutOfMemoryError: Java heap space` (or `GC overhead limit exceeded`).
    HeapOom,
    /// `OutOfMemoryError: Direct buffer memory`.
    DirectOom,
    /// `OutOfMemoryError: Metaspace`.
    MetaspaceOom,
    /// A TaskManager was lost (heartbeat timeout, no longer reachable, its connection closed):
    /// the process or its pod went away.
    TaskManagerLost,
    /// The TaskManager's container was OOM-killed in the window (kube-state-metrics'
    /// last termination `OOMKilled` of the pod named like the TaskManager): the process
    /// outgrew the pod's memory limit, whatever the exception says.
    ContainerOomKilled,
    /// More checkpoints failed than `execution.checkpointing.tolerable-failed-checkpoints`
    /// allows.
    CheckpointFailures,
    /// Anything else: the job's code or its data.
    Code,
}

/// One failure as the verdict names it.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub exception: String,
    pub message: String,
    pub frame: Option<String>,
    /// The innermost `Caused by:`, `Class: message`.
    pub root_cause: Option<String>,
    /// The task as Flink names it.
    pub task: Option<String>,
    /// The vertex of the job graph it ran in, by name; `None` when no vertex has that name.
    pub vertex: Option<String>,
    pub subtask: Option<u32>,
    pub endpoint: Option<String>,
    pub task_manager_id: Option<String>,
    pub at_ms: i64,
    pub kind: FailureKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum FailoverFact {
    /// Neither `numRestarts` nor an exception history was available.
    NotMeasured,
    /// Step detail: the restarts (`None`: `numRestarts` not in the store) and the failures
    /// of the history inside the window of `window_s`, against the threshold.
    Counted { restarts: Option<u32>, failures: Option<u32>, window_s: i64, threshold: u32, restarting_now: bool },
    /// Clear: it restarted in the window, but has run for `since_s` since, longer than
    /// twice the gap between its failures and than the warm-up: recovered.
    Recovered { restarts: u32, window_s: i64, since_s: i64 },
    /// Summary: the job is failing over.
    FailingOver { job: String, restarts: u32, window_s: i64, ago_s: Option<i64>, failure: Option<Failure> },
    /// Cause: this failure, `count` of the `failures` in the window's history.
    Threw { failure: Failure, count: u32, failures: u32, truncated: bool },
    /// Cause when no exception history was read: restarts only.
    RestartsOnly { restarts: u32, window_s: i64 },
    /// Fix belonging to the failure's kind.
    FixFailure { failure: Failure },
    /// Fix: read the root exception (no history was read).
    ReadTheHistory,
    /// Fix: restart with backoff until the failure is fixed.
    Backoff,
    /// Not the fix: scaling the backpressured vertices; the backpressure is catch-up.
    NotScaling { memory: bool },
    /// Missing input: the exception history.
    HistoryMissing,
}
