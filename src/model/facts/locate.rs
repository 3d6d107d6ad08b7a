//! What step `locate` found (`crate::diagnose::steps::locate`): where the backpressure
//! stops, the culprit with its busy and backpressured ratios, the exchange that is slow,
//! the source that cannot keep up, the bottleneck read sample by sample. Ratios are in
//! 0..1 (`_ratio`), thresholds are the configured ones the values were judged against.

/// A vertex and its backpressured ratio (`p_max`, unknown when `None`): one entry of the
/// list of backpressured vertices.
#[derive(Debug, Clone, PartialEq)]
pub struct Backpressured {
    pub vertex: String,
    pub backpressured_ratio: Option<f64>,
}

/// The busy range of a vertex over the subtasks that report busy time (min, max), and how
/// many of its subtasks report none (`without_data` of `subtasks`). A subtask without data
/// never counts as 0 % busy.
#[derive(Debug, Clone, PartialEq)]
pub struct BusyRange {
    /// `(min, max)` busy ratio; `None` when no subtask reports busy time.
    pub min_max_ratio: Option<(f64, f64)>,
    pub without_data: usize,
    pub subtasks: usize,
}

/// What a busy or backpressured maximum was taken over: every subtask, or the ones with
/// data (`with_data` of `subtasks`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MaxOver {
    pub with_data: usize,
    pub subtasks: usize,
    /// Per-subtask values were read (not only the vertex's aggregate).
    pub detailed: bool,
}

/// How the receiver of a slow exchange was judged not to hold records back.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Receiver {
    /// Its busy ratio (max over subtasks), below the busy threshold.
    Busy { busy_ratio: f64 },
    /// No busy time (Flink ≤ 1.12): its input buffer pool usage, not full (unknown when
    /// `None`).
    InputPool { in_pool_ratio: Option<f64> },
}

/// What the window averages pointed to, when the samples overrule them.
#[derive(Debug, Clone, PartialEq)]
pub enum Averaged {
    /// The exchange before the vertex (finding `network`).
    Exchange,
    /// No culprit.
    Nothing,
    /// Another culprit (its name; `?` when not in the plan).
    Culprit(String),
}

/// The stalls recur with a period, in phase with the checkpoints or not.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Period {
    pub period_ms: i64,
    /// Spacing of completed checkpoints when the stalls are in phase with them.
    pub checkpoint_spacing_ms: Option<i64>,
}

/// The bottleneck read sample by sample (`timeline`), where it overrules the averages.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleReading {
    pub vertex: String,
    /// Samples in which the vertex holds the job back, of `samples`.
    pub bottleneck_samples: usize,
    pub samples: usize,
    pub share_ratio: f64,
    /// Its busy ratio (max) while it holds the job back, and while it does not.
    pub busy_holding_ratio: Option<f64>,
    pub busy_other_ratio: Option<f64>,
    /// Upstream vertices backpressured while it holds the job back, with their ratio.
    pub stalled: Vec<(String, f64)>,
    /// Its busy ratio over the window averages, and what those pointed to.
    pub averaged_busy_ratio: Option<f64>,
    pub averaged: Averaged,
    /// Share of samples where nothing is backpressured, and where the exchange is suspect.
    pub calm_ratio: f64,
    pub network_ratio: f64,
    pub period: Option<Period>,
}

/// What the left-out impossible values hide.
#[derive(Debug, Clone, PartialEq)]
pub enum LeftOut {
    /// The backpressure of these vertices.
    Backpressure { vertices: Vec<String> },
    /// The busy time of every vertex.
    BusyOfEveryVertex,
}

/// A vertex below backpressured ones whose metrics do not decide: `Some((reporting,
/// parallelism))` when only some of its subtasks report.
#[derive(Debug, Clone, PartialEq)]
pub struct Undecided {
    pub vertex: String,
    pub subtasks_reporting: Option<(usize, u32)>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum LocateFact {
    /// No data: no busy or backpressured time for any vertex.
    NoMetrics,
    /// No data: nothing is red, but the values that would say so were left out as impossible.
    LeftOutImpossible { what: LeftOut },
    /// Detail: the backpressured vertices and the first one downstream that is not, busy by
    /// itself (`busy_ratio ≥ busy_threshold_ratio`); `graph_free`: without the job graph,
    /// the busiest vertex that is not backpressured.
    Culprit {
        red: Vec<Backpressured>,
        backpressured_threshold_ratio: f64,
        vertex: String,
        busy_ratio: Option<f64>,
        backpressured_ratio: Option<f64>,
        busy_threshold_ratio: f64,
        graph_free: bool,
    },
    /// Cause: the culprit is the slowest vertex, with `upstream_red` backpressured vertices
    /// before it (assumed upstream when `graph_free`).
    Slowest {
        vertex: String,
        busy_ratio: Option<f64>,
        max_over: MaxOver,
        backpressured_ratio: Option<f64>,
        upstream_red: usize,
        graph_free: bool,
    },
    /// Not the fix: more for the backpressured vertices that wait on `culprit`.
    NotTheBackpressured { vertices: Vec<String>, culprit: String },
    /// Detail, appended: several culprits, each with the size of its red region upstream.
    IndependentCulprits { culprits: Vec<(String, usize)> },
    /// Detail (by the samples).
    HoldsBackInSamples(Box<SampleReading>),
    /// Cause (by the samples).
    ComesAndGoes(Box<SampleReading>),
    /// Not the fix: more for the vertices `culprit` stalls.
    NotTheStalled { vertices: Vec<String>, culprit: String },
    /// Cause: the bottleneck alternates; each holder with its share of the samples, most
    /// often first.
    Alternates { holders: Vec<(String, f64)> },
    /// Detail, appended: the same, short.
    AlternatesShort { holders: Vec<(String, f64)> },
    /// Cause: the vertex chains these operators.
    Chain { operators: Vec<String> },
    /// Fix: break the chain to see which operator is slow.
    BreakChain { operators: Vec<String> },
    /// Detail: the culprit by the classic method (no busy time): its isBackPressured share,
    /// its full input pool and low (or absent) output pool.
    ClassicCulprit {
        red: Vec<Backpressured>,
        backpressured_threshold_ratio: f64,
        vertex: String,
        backpressured_ratio: f64,
        in_pool_ratio: f64,
        in_pool_full_threshold_ratio: f64,
        out_pool_ratio: Option<f64>,
    },
    /// Cause: the same.
    ClassicCause { vertex: String, upstream_red: usize, in_pool_ratio: f64, out_pool_ratio: Option<f64> },
    /// Detail: the backpressure stops at the exchange `from` → `to`.
    Exchange {
        red: Vec<Backpressured>,
        backpressured_threshold_ratio: f64,
        from: String,
        to: String,
        to_backpressured_ratio: Option<f64>,
        receiver: Receiver,
    },
    /// Cause: the exchange is slow, not an operator.
    ExchangeSlow { from: String, to: String, receiver: Receiver },
    /// Fix: what to look at on the exchange.
    LookAtExchange { from: String, to: String },
    /// Summary: inconclusive, the backpressure stops at the exchange.
    ExchangeInconclusive { from: String, to: String },
    /// No data: the vertices below the red ones do not decide (`classic`: without busy
    /// time, no buffer pool usage either).
    Undecided { red: Vec<Backpressured>, undecided: Vec<Undecided>, classic: bool },
    /// Clear: no vertex is backpressured.
    NothingRed { backpressured_threshold_ratio: f64 },
    /// Detail: nothing is backpressured and the source's lag grows steadily.
    SourceBound { vertex: String, busy_ratio: Option<f64>, lag_growth_records_per_s: f64 },
    /// Cause: the same, with its emitted records/s when known.
    SourceCannotKeepUp {
        vertex: String,
        busy_ratio: Option<f64>,
        emitted_records_per_s: Option<f64>,
        lag_growth_records_per_s: f64,
    },
    /// Fix: raise the source's parallelism (now `parallelism`).
    RaiseSourceParallelism { vertex: String, parallelism: u32 },
    /// Fix: tune the source's fetch settings.
    TuneFetch,
    /// Fix: move to the FLIP-27 KafkaSource (its busy time is unknown).
    MoveToFlip27,
    /// Summary: the source is the culprit.
    SourceCulprit { vertex: String, busy_ratio: Option<f64>, lag_growth_records_per_s: f64 },
    /// Cause: the store has no series of `vertices`, between the backpressured vertices and
    /// `culprit`; the backpressure passes through them unseen.
    UnseenBetween { vertices: Vec<String>, culprit: String },
    /// Detail: the backpressure stops at `vertex`, which has no series at all, between the
    /// backpressured `red` and the idle `downstream` (each with its busy ratio).
    SeriesDropped { vertex: String, red: Vec<Backpressured>, downstream: Vec<(String, Option<f64>)> },
    /// Cause: its series are missing from the store, and why that is likely: its name is
    /// `name_chars` long (a label value over `label_limit_chars` is refused by the store),
    /// else a cardinality limit.
    SeriesDroppedCause { vertex: String, name_chars: usize, label_limit_chars: usize },
    /// Fix: bring its series back (simplified operator names, a shorter metric scope, the
    /// store's label length limit).
    RestoreDroppedSeries { vertex: String, long_name: bool },
    /// Summary: `vertex` is the likely culprit; its metrics are missing.
    SeriesDroppedSummary { vertex: String },
}
