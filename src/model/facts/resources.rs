//! Facts of step `resources` (`crate::diagnose::steps::resources`): the culprit's
//! TaskManagers' garbage collection and heap, their containers' memory limit and OOM
//! kills, and their CPU quota's throttling; and, for a slow instance (step `hot_key`),
//! which of these its TaskManager shows.
//!
//! Shares and ratios are 0..1 (`_ratio`), memory in bytes, CPU in cores. A TaskManager is
//! named by its `tm_id` (on Kubernetes its pod's name).

/// What presses on a TaskManager.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pressure {
    /// Share of time in garbage collection.
    Gc,
    /// Container killed for memory (`OOMKilled`) in the window.
    OomKilled,
    /// Container working set over its memory limit.
    MemoryLimit,
    /// Share of CFS periods throttled by the CPU quota.
    CpuThrottled,
}

/// What was measured of one TaskManager, and against the job's other TaskManagers.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NodeReading {
    pub tm: String,
    /// GC time ÷ wall time.
    pub gc_share_ratio: Option<f64>,
    /// The old-generation collectors' part of it.
    pub old_gen_share_ratio: Option<f64>,
    /// Mean GC share of the job's other TaskManagers.
    pub others_gc_share_ratio: Option<f64>,
    pub heap_used_bytes: Option<f64>,
    pub heap_max_bytes: Option<f64>,
    /// `Status.JVM.CPU.Load`.
    pub cpu_load_ratio: Option<f64>,
    pub others_cpu_load_ratio: Option<f64>,
    /// `None`: no container of this TaskManager's pod in the store.
    pub throttled_ratio: Option<f64>,
    pub others_throttled_ratio: Option<f64>,
    pub cpu_limit_cores: Option<f64>,
    pub oom_killed: Option<bool>,
    pub working_set_bytes: Option<f64>,
    pub memory_limit_bytes: Option<f64>,
}

impl NodeReading {
    pub fn heap_used_ratio(&self) -> Option<f64> {
        match (self.heap_used_bytes, self.heap_max_bytes) {
            (Some(u), Some(m)) if m > 0.0 => Some(u / m),
            _ => None,
        }
    }

    pub fn memory_limit_ratio(&self) -> Option<f64> {
        match (self.working_set_bytes, self.memory_limit_bytes) {
            (Some(w), Some(l)) if l > 0.0 => Some(w / l),
            _ => None,
        }
    }

    /// Whether its pod's container was found (kube-state-metrics or cAdvisor).
    pub fn container_measured(&self) -> bool {
        self.throttled_ratio.is_some()
            || self.oom_killed.is_some()
            || self.working_set_bytes.is_some()
            || self.memory_limit_bytes.is_some()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum ResourcesFact {
    /// Clear: the culprit's subtasks name no TaskManager (`tm_id`) to look at.
    NoTaskManagers { vertex: String },
    /// Clear: no JVM or container metrics of the culprit's `taskmanagers` TaskManagers.
    NotMeasured { vertex: String, taskmanagers: usize },
    /// Clear: the worst of the culprit's `taskmanagers` TaskManagers stays under every
    /// threshold measured (`None`: not measured).
    BelowThresholds {
        vertex: String,
        taskmanagers: usize,
        gc_share_ratio: Option<f64>,
        gc_threshold_ratio: f64,
        heap_used_ratio: Option<f64>,
        throttled_ratio: Option<f64>,
        throttled_threshold_ratio: f64,
    },
    /// Hit (detail) or cause: `over` of the culprit's `of` TaskManagers spend at least
    /// `threshold_ratio` of the time in GC; the worst, `node.tm`, `node.gc_share_ratio`.
    GcPressureFound { vertex: String, node: NodeReading, over: usize, of: usize, threshold_ratio: f64 },
    /// Cause: the heap of that TaskManager, `heap_used_ratio` of its max, the supporting
    /// evidence at `threshold_ratio` (whether over or under it).
    HeapOccupancy { tm: String, heap_used_bytes: f64, heap_max_bytes: f64, threshold_ratio: f64 },
    /// Fix: raise `taskmanager.memory.task.heap.size` by `add_bytes` (heap
    /// `heap_max_bytes` → `heap_max_bytes + add_bytes`, for `heap_used_bytes` to be
    /// `target_ratio` of it), and `taskmanager.memory.process.size` by as much.
    RaiseTaskHeap { tm: String, heap_used_bytes: f64, heap_max_bytes: f64, add_bytes: f64, target_ratio: f64 },
    /// Fix: raise the task heap, its size unknown (no heap metrics).
    RaiseTaskHeapUnmeasured,
    /// Fix: keep state off the JVM heap (`state.backend.type: rocksdb`), when the job's
    /// state backend is on the heap (`state_backend`, from Flink REST) or not known
    /// (`None`) without RocksDB metrics.
    StateOffHeap { state_backend: Option<String> },
    /// Hit (detail) or cause: the container of pod `node.tm` was OOM-killed in the window,
    /// or its working set is at `threshold_ratio` of its limit.
    MemoryLimitFound { vertex: String, node: NodeReading, threshold_ratio: f64 },
    /// Fix: fit the TaskManager's process size to the pod's limit (`memory_limit_bytes`),
    /// native memory into `taskmanager.memory.jvm-overhead.*` and managed memory.
    FitProcessToLimit { pod: String, memory_limit_bytes: Option<f64>, working_set_bytes: Option<f64> },
    /// Hit (detail) or cause: pod `node.tm`'s container is throttled in
    /// `node.throttled_ratio` of its CFS periods, at least `threshold_ratio`; `over` of the
    /// culprit's `of` pods are.
    CpuThrottledFound { vertex: String, node: NodeReading, over: usize, of: usize, threshold_ratio: f64 },
    /// Fix: more CPU for the TaskManager (`kubernetes.taskmanager.cpu.amount`,
    /// `kubernetes.taskmanager.cpu.limit-factor`; the operator's
    /// `spec.taskManager.resource.cpu`), from `cpu_limit_cores`.
    MoreCpu { pod: String, cpu_limit_cores: Option<f64>, throttled_ratio: f64 },
    /// Not the fix: more parallelism, with TaskManagers as they are (`pressure`).
    NotMoreParallelism { vertex: String, pressure: Pressure },
    /// Advice: a pressure on a TaskManager (or pod) `subject` that runs none of the
    /// culprit's subtasks: present, not the reason for this bottleneck.
    ElsewhereNotTheReason { pressure: Pressure, subject: String, value_ratio: f64, threshold_ratio: f64 },
    /// Advice: a second pressure on the culprit's TaskManagers besides the finding's.
    AlsoPresent { pressure: Pressure, subject: String, value_ratio: f64, threshold_ratio: f64 },
    /// Summary of a finding of this step.
    Summary { vertex: String, pressure: Pressure, subject: String, value_ratio: f64 },
}
