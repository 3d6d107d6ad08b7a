//! What step `headroom` (`crate::diagnose::steps::headroom`) found: a vertex near or at
//! capacity (its utilisation ρ and the thresholds it crossed), the whole job near capacity,
//! or an async I/O operator waiting on the service it calls (Little's law).

use super::parallelism::ParallelismFact;

/// A vertex and its utilisation ρ (mean busy ratio over its subtasks).
#[derive(Debug, Clone, PartialEq)]
pub struct Busy {
    pub vertex: String,
    pub utilisation_ratio: f64,
}

/// What the summary of a culprit at capacity says about its parallelism.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Raise {
    /// Raise it from the parallelism now to the one advised.
    From { from_parallelism: u32, to_parallelism: u32 },
    /// The advice is no higher than now: more parallelism cannot help.
    CannotHelp,
    /// No records rates: no number.
    Unknown,
    /// No demand (lag, pendingRecords, an offered rate): the throughput is the job's
    /// maximum, the culprit is what limits it, and no number would mean anything.
    DemandUnknown { throughput_records_per_s: Option<f64> },
}

/// Little's law on an async operator: throughput = in-flight capacity × parallelism ÷ latency.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LittlesLaw {
    /// The in-flight capacity is read from the plan (`async=[…, capacity]`).
    Capacity { requests_per_s: f64, subtasks: usize, capacity: u32 },
    /// The capacity is unknown: Flink's default of 100 is assumed.
    DefaultCapacity { requests_per_s: f64, subtasks: usize },
}

#[derive(Debug, Clone, PartialEq)]
pub enum HeadroomFact {
    /// No busy time for the vertex judged (`None`: for any vertex).
    NoBusyTime { vertex: Option<String> },
    /// The subject (the culprit, else the busiest vertex) runs below the headroom threshold.
    BelowThreshold { vertex: String, culprit: bool, utilisation_ratio: f64, subtasks: usize, threshold_ratio: f64 },
    /// The subject runs at or above the headroom threshold: at capacity.
    AtCapacity { vertex: String, culprit: bool, utilisation_ratio: f64, threshold_ratio: f64 },
    /// Why it is at capacity: ρ, the busy range over its subtasks, its capacity (records/s
    /// at 100 % busy) when known; `culprit` when no earlier step explains it, `graph_free`
    /// when whether it is a sink is unknown.
    AtCapacityCause {
        vertex: String,
        utilisation_ratio: f64,
        subtasks: usize,
        busy_min_ratio: f64,
        busy_max_ratio: f64,
        culprit: bool,
        graph_free: bool,
        capacity_records_per_s: Option<f64>,
    },
    /// The parallelism advice for a vertex at capacity (where, unlike for backpressured
    /// vertices, parallelism helps).
    ParallelismHelps(ParallelismFact),
    /// Without records rates: raise the parallelism so it runs below the target.
    RaiseWithoutRates { vertex: String, parallelism: u32, target_utilisation_ratio: f64 },
    /// Or make it cheaper: busy time per record now, ms.
    CheaperPerRecord { vertex: String, busy_ms_per_record: f64 },
    /// Fix without demand: the job runs flat out, `vertex` limits it; more parallelism only
    /// moves the saturation point, so raise it only if the job must go faster.
    FlatOut { vertex: String, parallelism: u32, throughput_records_per_s: Option<f64> },
    /// Fix without demand when several vertices are near capacity: the job runs as fast as
    /// they let it (`throughput_records_per_s`: the least any of them passes); raising
    /// them only moves the saturation point.
    FlatOutNearCapacity { near: Vec<Busy>, throughput_records_per_s: Option<f64> },
    /// Missing input: the demand on the job (source lag, `pendingRecords`, an offered rate).
    DemandUnknown,
    /// Graph-free: whether the vertex is a sink is unknown; check the system behind it first.
    MaybeASink { vertex: String },
    /// Summary: the culprit runs at its capacity, and what its parallelism can do.
    CulpritAtCapacity { vertex: String, utilisation_ratio: f64, raise: Raise },
    /// Summary: nothing is backpressured yet, but the busiest vertex is at capacity.
    NoBackpressureYet { vertex: String, utilisation_ratio: f64 },
    /// Summary: vertices are backpressured but `locate` could not read where it stops
    /// (metrics missing), and the busiest vertex is at capacity.
    AtCapacityWhileBackpressured { vertex: String, utilisation_ratio: f64 },
    /// Several vertices near capacity (ρ ≥ `near_threshold_ratio`), and the subject's ρ is
    /// within `margin_ratio` of the busiest of the others.
    NearCapacity {
        near: Vec<Busy>,
        near_threshold_ratio: f64,
        subject: String,
        subject_ratio: f64,
        others_max_ratio: f64,
        margin_ratio: f64,
    },
    /// Cause: no single operator is broken, these vertices run near capacity.
    NoSingleOperator { near: Vec<Busy> },
    /// Fix for one of them without records rates.
    MoreParallelismWithoutRates { vertex: String, parallelism: u32 },
    /// Not the fix: scaling only the subject moves the bottleneck.
    ScalingOnlyOne { vertex: String },
    /// Summary: no single culprit, the job needs capacity (`demand_known`), or without the
    /// demand, it runs as fast as these vertices let it.
    NoSingleCulprit { near: Vec<Busy>, demand_known: bool },
    /// An async I/O operator waiting on the service it calls.
    Async(AsyncFact),
}

/// What `headroom` finds about an async I/O or lookup operator on idle TaskManagers.
#[derive(Debug, Clone, PartialEq)]
pub enum AsyncFact {
    /// An async I/O operator busy on TaskManagers with low CPU load.
    AsyncWaits { vertex: String, utilisation_ratio: f64, cpu_load_ratio: f64 },
    /// Cause of it, with Little's law when the request rate is known.
    AsyncCause { vertex: String, utilisation_ratio: f64, cpu_load_ratio: f64, law: Option<LittlesLaw> },
    /// Fix: the latency of the service, or a lookup cache.
    FixServiceLatency,
    /// Fix: double the in-flight capacity read from the plan (its timeout when known).
    RaiseInFlight { capacity: u32, requests_per_s: f64, timeout_ms: Option<u64> },
    /// Fix: raise the in-flight capacity (unknown now).
    RaiseInFlightUnknown,
    /// Not the fix: more CPU or memory.
    MoreCpu,
    /// Not the fix: more source parallelism or partitions (the vertex is a source).
    MoreSourceParallelism { vertex: String },
    /// Summary: the culprit's async I/O waits on its service.
    AsyncCulprit { vertex: String, cpu_load_ratio: f64 },
}

impl From<AsyncFact> for super::Fact {
    fn from(f: AsyncFact) -> Self {
        super::Fact::Headroom(HeadroomFact::Async(f))
    }
}
