//! The verdict: schema `culprit.verdict/v1`, the one value every interface renders.
//!
//! Field names are fixed by the spec (§4); fields may be added, never renamed. Fields
//! added here beyond the spec: `window_start`, `culprits`, `advice`, `notes`,
//! `graph.from_plan`, `timeline`, `profile`; the finding `unexplained`. The JSON Schema published in
//! `docs/verdict.schema.json` is generated from these types ([`json_schema`]).
//!
//! Pure data.

use serde::{Deserialize, Serialize};

/// The schema id written in every verdict.
pub const SCHEMA: &str = "culprit.verdict/v1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    CulpritFound,
    NoSingleCulprit,
    NoBackpressure,
    Inconclusive,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::CulpritFound => "culprit_found",
            Status::NoSingleCulprit => "no_single_culprit",
            Status::NoBackpressure => "no_backpressure",
            Status::Inconclusive => "inconclusive",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Finding {
    Sink,
    HotKey,
    SlowInstance,
    StateBackend,
    /// The culprit's state only grows (no TTL, or one too long): added value.
    StateGrowth,
    Checkpoints,
    Headroom,
    Source,
    Network,
    AsyncIo,
    WatermarkStall,
    /// The culprit's TaskManagers spend a large share of their time in garbage collection
    /// (step `resources`).
    GcPressure,
    /// A container of the culprit's TaskManagers was OOM-killed in the window, or its
    /// working set is at its memory limit (step `resources`).
    MemoryLimit,
    /// The culprit's TaskManager containers are throttled by their CPU quota (step
    /// `resources`).
    CpuThrottled,
    /// The culprit's hot subtask is fed over a forward chain by one source reader that reads
    /// far more than the median reader: partition skew in the topic, not a key or a node.
    SourceSkew,
    /// Source readers are paused by watermark alignment (`watermarkAlignmentDrift` past the
    /// allowed drift while their lag grows).
    WatermarkAlignment,
    /// A vertex holds the job back (busy by itself, not backpressured) for a reason no
    /// runbook step finds in the metrics: profile it (added value).
    Unexplained,
    /// The job fails and restarts (step `failover`): its backpressure is recovery
    /// catch-up; the culprit is the vertex whose task throws (added value).
    FailingOver,
    None,
}

impl Finding {
    pub fn as_str(self) -> &'static str {
        match self {
            Finding::Sink => "sink",
            Finding::HotKey => "hot_key",
            Finding::SlowInstance => "slow_instance",
            Finding::StateBackend => "state_backend",
            Finding::StateGrowth => "state_growth",
            Finding::Checkpoints => "checkpoints",
            Finding::Headroom => "headroom",
            Finding::Source => "source",
            Finding::Network => "network",
            Finding::AsyncIo => "async_io",
            Finding::WatermarkStall => "watermark_stall",
            Finding::GcPressure => "gc_pressure",
            Finding::MemoryLimit => "memory_limit",
            Finding::CpuThrottled => "cpu_throttled",
            Finding::SourceSkew => "source_skew",
            Finding::WatermarkAlignment => "watermark_alignment",
            Finding::Unexplained => "unexplained",
            Finding::FailingOver => "failing_over",
            Finding::None => "none",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Source,
    Operator,
    Sink,
}

/// The job the verdict is about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobRef {
    pub name: String,
    pub id: String,
}

/// The culprit vertex.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Culprit {
    pub vertex_id: String,
    pub vertex_name: String,
    /// Operators chained in the vertex, in chain order.
    pub operators: Vec<String>,
    pub role: Role,
    pub parallelism: u32,
    /// The subtasks that carry the problem (all of them when it is uniform).
    pub subtasks: Vec<u32>,
}

/// The runbook steps, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepName {
    /// Added step, first: is the job failing and restarting?
    Failover,
    Locate,
    Sink,
    /// The culprit's source readers: splits, partition skew, watermark alignment, idleness
    /// and fetch against emit lag.
    Sources,
    HotKey,
    /// The culprit's TaskManagers' memory, GC and CPU quota.
    Resources,
    StateBackend,
    /// Added step: does the culprit's state only grow?
    StateGrowth,
    Checkpoints,
    Headroom,
}

impl StepName {
    pub const ALL: [StepName; 10] = [
        StepName::Failover,
        StepName::Locate,
        StepName::Sink,
        StepName::Sources,
        StepName::HotKey,
        StepName::Resources,
        StepName::StateBackend,
        StepName::StateGrowth,
        StepName::Checkpoints,
        StepName::Headroom,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            StepName::Failover => "failover",
            StepName::Locate => "locate",
            StepName::Sink => "sink",
            StepName::Sources => "sources",
            StepName::HotKey => "hot_key",
            StepName::Resources => "resources",
            StepName::StateBackend => "state_backend",
            StepName::StateGrowth => "state_growth",
            StepName::Checkpoints => "checkpoints",
            StepName::Headroom => "headroom",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Hit,
    Clear,
    NoData,
    Skipped,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Hit => "hit",
            Outcome::Clear => "clear",
            Outcome::NoData => "no_data",
            Outcome::Skipped => "skipped",
        }
    }
}

/// One runbook step's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Step {
    pub step: StepName,
    pub outcome: Outcome,
    pub detail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HazardKind {
    Retention,
    CheckpointsStalled,
    /// Checkpoint durations grow towards the checkpoint timeout (added kind): at the
    /// current rate they reach it in `time_to_timeout_seconds`.
    CheckpointTimeout,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Warning,
    Critical,
}

/// A risk reported whatever the finding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Hazard {
    pub kind: HazardKind,
    pub severity: Severity,
    /// Seconds until data is lost; 0 when it is already being lost; absent when unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_to_loss_seconds: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    /// Seconds until checkpoints reach their timeout at the current growth of their
    /// duration (kind `checkpoint_timeout`; added field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_to_timeout_seconds: Option<i64>,
    pub detail: String,
}

/// A number the verdict rests on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Evidence {
    /// Vertex (`fraud-score`) or subtask (`fraud-score[0]`), TaskManager or job.
    pub subject: String,
    /// The Flink metric (or derived signal) the value comes from.
    pub metric: String,
    pub value: f64,
    /// `ratio`, `records/s`, `ms`, `bytes`, `bytes/s`, `s`, `count`.
    pub unit: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
    /// The PromQL that gives the value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum VertexState {
    Culprit,
    Backpressured,
    Ok,
    Unknown,
}

impl VertexState {
    pub fn as_str(self) -> &'static str {
        match self {
            VertexState::Culprit => "culprit",
            VertexState::Backpressured => "backpressured",
            VertexState::Ok => "ok",
            VertexState::Unknown => "unknown",
        }
    }
}

/// A vertex as the verdict shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GraphVertex {
    pub id: String,
    pub name: String,
    pub parallelism: u32,
    /// Max over subtasks of the busy ratio; absent when unknown.
    pub busy_max: Option<f64>,
    /// Max over subtasks of the backpressured ratio.
    pub backpressured_max: Option<f64>,
    /// Mean over subtasks of the idle ratio.
    pub idle_avg: Option<f64>,
    pub state: VertexState,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GraphEdge {
    pub from: String,
    pub to: String,
    pub ship_strategy: String,
}

/// The job graph, vertices in topological order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Graph {
    pub vertices: Vec<GraphVertex>,
    pub edges: Vec<GraphEdge>,
    /// False when no job plan was available (graph-free mode): the vertices come from the
    /// metrics in no meaningful order, and there are no edges. An additional field (spec
    /// §4 allows them); absent in older verdicts, which always had a plan.
    #[serde(default = "from_plan_default")]
    pub from_plan: bool,
}

fn from_plan_default() -> bool {
    true
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Confidence {
    High,
    Medium,
    Low,
}

impl Confidence {
    pub fn as_str(self) -> &'static str {
        match self {
            Confidence::High => "high",
            Confidence::Medium => "medium",
            Confidence::Low => "low",
        }
    }
}

/// How the backpressure behaved over the window, read sample by sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Pattern {
    /// Nothing was backpressured in any sample.
    Calm,
    /// One vertex held the job back in (nearly) every sample.
    Steady,
    /// Backpressure came and went without a regular period.
    Intermittent,
    /// Backpressure recurred with a regular period (`period_seconds`).
    Periodic,
    /// The bottleneck moved between vertices, each holding the job back a share of the time.
    Alternating,
}

impl Pattern {
    pub fn as_str(self) -> &'static str {
        match self {
            Pattern::Calm => "calm",
            Pattern::Steady => "steady",
            Pattern::Intermittent => "intermittent",
            Pattern::Periodic => "periodic",
            Pattern::Alternating => "alternating",
        }
    }
}

/// One vertex in the time-resolved reading.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TimelineVertex {
    pub id: String,
    pub name: String,
    /// Share of the window's samples in which this vertex held the job back (it was the
    /// bottleneck), ratio.
    pub bottleneck_share: f64,
    /// Share of the window's samples in which it was backpressured, ratio.
    pub backpressured_share: f64,
}

/// The window read sample by sample (added field): at each evaluation step, which vertex
/// held the job back, by the rules of `locate` applied to that step's values (max over
/// subtasks of Flink's ~60 s busy and backpressured averages).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Timeline {
    /// Samples (evaluation steps) classified.
    pub samples: u32,
    /// Spacing of the samples, s.
    pub step_seconds: f64,
    pub pattern: Pattern,
    /// Period of a periodic pattern, s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub period_seconds: Option<f64>,
    /// True when the periodic stalls recur with checkpoint completions.
    pub with_checkpoints: bool,
    /// Share of samples in which nothing was backpressured, ratio.
    pub calm_share: f64,
    /// Share of samples in which the backpressure stopped at an exchange whose receiver was
    /// not busy, ratio.
    pub network_share: f64,
    /// Share of samples that could not be classified (metrics missing), ratio.
    pub unknown_share: f64,
    /// Every vertex, in the graph's order.
    pub vertices: Vec<TimelineVertex>,
}

/// `culprit.verdict/v1`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Verdict {
    /// Always [`SCHEMA`].
    pub schema: String,
    pub job: JobRef,
    /// RFC 3339, UTC.
    pub at: String,
    /// Length of the window the averages cover, s.
    pub window_seconds: i64,
    /// Start of that window, RFC 3339 (added field).
    pub window_start: String,
    pub status: Status,
    pub finding: Finding,
    /// `null` when there is none.
    pub culprit: Option<Culprit>,
    /// Every culprit when several independent red regions have one, ranked; the first is
    /// `culprit` (added field).
    pub culprits: Vec<Culprit>,
    /// One line a person reads first.
    pub summary: String,
    /// Why it is slow, with the numbers.
    pub cause: String,
    /// The changes that belong to the culprit.
    pub fix: Vec<String>,
    /// What would not help, and why.
    pub not_the_fix: Vec<String>,
    /// Secondary advice that does not change the finding (added field).
    pub advice: Vec<String>,
    pub steps: Vec<Step>,
    pub hazards: Vec<Hazard>,
    pub evidence: Vec<Evidence>,
    pub graph: Graph,
    pub confidence: Confidence,
    /// Metrics or sources that were absent.
    pub missing: Vec<String>,
    /// How the data was chosen (job runs, plan mismatches, short windows) (added field).
    pub notes: Vec<String>,
    /// The window read sample by sample; null when the per-step values were not collected
    /// (added field).
    #[serde(default)]
    pub timeline: Option<Timeline>,
    /// The culprit vertex's flame graph at alert time: its top frames by self samples
    /// (added field). Taken only when `[flink] flamegraph` is on (or `diagnose
    /// --flamegraph FILE` gives one) and the finding is `unexplained` or the culprit is a
    /// chain of operators; absent otherwise, and when Flink gave no samples in time (a
    /// note says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<crate::model::flamegraph::Profile>,
    /// The Flink Kubernetes Operator autoscaler's recommendation for the culprit, whether it
    /// agrees with the verdict and whether its next step can help; absent when its gauges are
    /// not in the store or there is no culprit (added field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaler: Option<crate::model::autoscaler::AutoscalerView>,
    /// What the culprit is tied to outside the job: the external system it writes to or
    /// reads from (connector and target, from its vertex and operator names), the hosts of
    /// its slow instance, the Kafka topics a source culprit reads. Jobs whose culprits
    /// share one of these share a cause (`GET /api/v1/incidents`). Absent when nothing is
    /// known (added field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribution: Option<crate::model::attribution::Attribution>,
}

/// Rounds to 4 significant digits so verdicts do not carry float noise (evidence values,
/// the graph's ratios) and numbers read alike whatever the last bits of a float sum.
pub fn round_sig(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let digits = 4 - 1 - v.abs().log10().floor() as i32;
    let factor = 10f64.powi(digits);
    (v * factor).round() / factor
}

/// A decided threshold is "close" within this many points of a ratio (0.04 = 4 points):
/// Flink's 60 s averages move that much within a minute after an alert.
pub const CLOSE_CALL_RATIO: f64 = 0.04;

impl Verdict {
    /// Why the verdict is weak enough to diagnose again a minute later: no finding, a
    /// confidence below high, or a ratio within [`CLOSE_CALL_RATIO`] of the threshold it
    /// was judged by. `None` for a firm verdict.
    pub fn weak(&self) -> Option<String> {
        if matches!(self.finding, Finding::None | Finding::Unexplained) {
            return Some(format!("no finding ({})", self.finding.as_str()));
        }
        if self.confidence != Confidence::High {
            return Some(format!("confidence {}", self.confidence.as_str()));
        }
        self.evidence
            .iter()
            .filter(|e| e.unit == "ratio")
            .find(|e| e.threshold.is_some_and(|t| (e.value - t).abs() < CLOSE_CALL_RATIO))
            .map(|e| {
                format!(
                    "{} of {} is {:.2}, close to its threshold {:.2}",
                    e.metric,
                    e.subject,
                    e.value,
                    e.threshold.unwrap_or(0.0)
                )
            })
    }
}

/// The JSON Schema (draft 2020-12) of `culprit.verdict/v1`, generated from these types;
/// `docs/verdict.schema.json` is this value, pretty-printed.
pub fn json_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(Verdict)).expect("a schema is JSON")
}

/// RFC 3339 (UTC) of Unix milliseconds, as verdicts and notifications write times; the
/// epoch when out of range.
pub fn rfc3339(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms).unwrap_or(jiff::Timestamp::UNIX_EPOCH).to_string()
}
