//! The parallelism a vertex needs, with its terms (`crate::diagnose::parallelism` computes
//! them, the way the Flink autoscaler does): the offered rate, the capacity, the target
//! utilisation, the catch-up term, the parallelism from and to, and the limit that capped
//! or aligned it.

/// What bounds the parallelism of a vertex.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// Key groups of a keyed vertex (its max parallelism); `default` when it is Flink's
    /// default for the current parallelism, not read from the job.
    KeyGroups { count: u32, default: bool },
    /// Partitions a source reads.
    Partitions(u32),
}

/// The parallelism a vertex needs, with the numbers behind it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Needed {
    /// The parallelism advised: keeps up at the target utilisation, drains the backlog
    /// within the catch-up time, within the limit, aligned to it.
    pub parallelism: u32,
    /// What only keeps up with the offered rate at the target utilisation (no catch-up).
    pub keep_up: u32,
    /// Offered rate at this vertex, records/s.
    pub offered_per_s: f64,
    /// The vertex's true processing rate now, records/s.
    pub capacity_per_s: f64,
    /// False when the offered rate is the observed one (a lower bound).
    pub offered_known: bool,
    /// The backlog as this vertex will see it, records (the source lag scaled by this
    /// vertex's records per source record).
    pub backlog: Option<f64>,
    /// Extra rate to drain the backlog within the catch-up time, records/s.
    pub catch_up_per_s: f64,
    /// Seconds to drain the backlog at [`Self::parallelism`] running flat out; `None`
    /// without a backlog, infinite when it cannot.
    pub drain_seconds: Option<f64>,
    /// The bound that applies, and whether it cut the advice.
    pub limit: Option<Limit>,
    pub clamped: bool,
    /// Raised above the plain number so the busiest subtask's key groups or partitions
    /// allow the capacity needed.
    pub aligned_from: Option<u32>,
}

/// The parallelism advice for one vertex: raise `vertex` from `from_parallelism` to
/// `needed.parallelism`, by `ceil(from × (offered / target + catch-up) / capacity)`.
#[derive(Debug, Clone, PartialEq)]
pub struct ParallelismFact {
    pub vertex: String,
    /// Its parallelism now.
    pub from_parallelism: u32,
    /// The utilisation the advice aims at (`thresholds.target_utilisation`).
    pub target_utilisation_ratio: f64,
    /// The time the backlog is to drain within (`diagnosis.catch_up`), s.
    pub catch_up_s: f64,
    /// The parallelism advised and its terms.
    pub needed: Needed,
}
