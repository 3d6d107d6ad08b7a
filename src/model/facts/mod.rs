//! What the diagnosis found, as data: the culprit, the numbers and thresholds each step
//! judged by, what was missing and why. The diagnosis (`crate::diagnose`) returns a
//! [`Diagnosis`]; the sentences a person reads are worded from it in one place,
//! `crate::render::words`, which also builds the `culprit.verdict/v1` value every renderer
//! and destination takes. Tests check these values, not prose.
//!
//! Pure data: no wording here. Each area of the runbook has its own enum in its own file
//! (`runbook`, one per step); [`Fact`] has one variant per area.

pub mod autoscaler;
pub mod changes;
pub mod checkpoints;
pub mod failover;
pub mod headroom;
pub mod hot_key;
pub mod locate;
pub mod parallelism;
pub mod resources;
pub mod retention;
pub mod runbook;
pub mod sink;
pub mod sources;
pub mod state_backend;
pub mod state_growth;

use std::ops::Deref;

use crate::model::verdict::{
    Confidence, Culprit, Evidence, Finding, Graph, HazardKind, JobRef, Outcome, Severity, Status, StepName, Timeline,
};

/// One statement of the diagnosis, worded by `crate::render::words`.
#[derive(Debug, Clone, PartialEq)]
pub enum Fact {
    /// A sentence worded before the diagnosis: the collector's notes on how the data was
    /// chosen (`Snapshot::notes`) arrive as text.
    Text(String),
    /// Facts worded one after the other, as written (each brings its own spacing).
    Seq(Vec<Fact>),
    /// A change of the job's identity or shape: a run replaced, a rescale, a restart.
    Change(changes::ChangeFact),
    /// The hazards `retention` and `checkpoints_stalled`.
    Retention(retention::RetentionFact),
    /// Step `hot_key`: the hot subtask, its share of the records and the ceiling it puts
    /// on the job, or the slow instance and its TaskManager.
    HotKey(hot_key::HotKeyFact),
    /// What step `locate` found.
    Locate(locate::LocateFact),
    /// What step `checkpoints` found.
    Checkpoint(checkpoints::CheckpointFact),
    /// What step `headroom` found.
    Headroom(headroom::HeadroomFact),
    /// The parallelism a vertex needs, with its terms.
    Parallelism(parallelism::ParallelismFact),
    /// The runbook's own statements: skipped steps, the summary's parts, notes on what
    /// limits the diagnosis.
    Runbook(runbook::RunbookFact),
    /// Step `sink`: the sink's destination, a hot writer, or flushes in checkpoints.
    Sink(sink::SinkFact),
    /// Step `sources`: readers without a split, partition skew, watermark alignment,
    /// idleness, fetch against emit lag.
    Sources(sources::SourcesFact),
    /// Step `state_backend`: RocksDB's write stalls, or a stuck watermark.
    StateBackend(state_backend::StateBackendFact),
    /// Step `resources`: GC and heap, the container's memory limit, CPU throttling.
    Resources(resources::ResourcesFact),
    /// Step `state_growth` and the hazard `checkpoint_timeout`: state that only grows.
    StateGrowth(state_growth::StateGrowthFact),
    /// Boxed: a failure's strings would make every fact larger.
    Failover(Box<failover::FailoverFact>),
    /// The Flink Kubernetes Operator autoscaler's recommendation for the culprit, and
    /// whether it can help.
    Autoscaler(Box<autoscaler::AutoscalerFact>),
}

impl Fact {
    /// This fact followed by `more`.
    pub fn then(self, more: impl Into<Fact>) -> Fact {
        match self {
            Fact::Seq(mut all) => {
                all.push(more.into());
                Fact::Seq(all)
            }
            one => Fact::Seq(vec![one, more.into()]),
        }
    }
}

impl From<String> for Fact {
    fn from(s: String) -> Self {
        Fact::Text(s)
    }
}

impl From<&str> for Fact {
    fn from(s: &str) -> Self {
        Fact::Text(s.to_string())
    }
}

impl From<changes::ChangeFact> for Fact {
    fn from(f: changes::ChangeFact) -> Self {
        Fact::Change(f)
    }
}

impl From<autoscaler::AutoscalerFact> for Fact {
    fn from(f: autoscaler::AutoscalerFact) -> Self {
        Fact::Autoscaler(Box::new(f))
    }
}

impl From<retention::RetentionFact> for Fact {
    fn from(f: retention::RetentionFact) -> Self {
        Fact::Retention(f)
    }
}

impl From<failover::FailoverFact> for Fact {
    fn from(f: failover::FailoverFact) -> Self {
        Fact::Failover(Box::new(f))
    }
}

impl From<resources::ResourcesFact> for Fact {
    fn from(f: resources::ResourcesFact) -> Self {
        Fact::Resources(f)
    }
}

impl From<hot_key::HotKeyFact> for Fact {
    fn from(f: hot_key::HotKeyFact) -> Self {
        Fact::HotKey(f)
    }
}

impl From<locate::LocateFact> for Fact {
    fn from(f: locate::LocateFact) -> Self {
        Fact::Locate(f)
    }
}

impl From<checkpoints::CheckpointFact> for Fact {
    fn from(f: checkpoints::CheckpointFact) -> Self {
        Fact::Checkpoint(f)
    }
}

impl From<headroom::HeadroomFact> for Fact {
    fn from(f: headroom::HeadroomFact) -> Self {
        Fact::Headroom(f)
    }
}

impl From<parallelism::ParallelismFact> for Fact {
    fn from(f: parallelism::ParallelismFact) -> Self {
        Fact::Parallelism(f)
    }
}

impl From<runbook::RunbookFact> for Fact {
    fn from(f: runbook::RunbookFact) -> Self {
        Fact::Runbook(f)
    }
}

impl From<sink::SinkFact> for Fact {
    fn from(f: sink::SinkFact) -> Self {
        Fact::Sink(f)
    }
}

impl From<sources::SourcesFact> for Fact {
    fn from(f: sources::SourcesFact) -> Self {
        Fact::Sources(f)
    }
}

impl From<state_growth::StateGrowthFact> for Fact {
    fn from(f: state_growth::StateGrowthFact) -> Self {
        Fact::StateGrowth(f)
    }
}

impl From<state_backend::StateBackendFact> for Fact {
    fn from(f: state_backend::StateBackendFact) -> Self {
        Fact::StateBackend(f)
    }
}

/// An ordered list of facts (a step's cause, fix, not-the-fix, advice).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Facts(Vec<Fact>);

impl Facts {
    pub fn new() -> Self {
        Facts(Vec::new())
    }

    pub fn push(&mut self, f: impl Into<Fact>) {
        self.0.push(f.into());
    }

    pub fn extend<F: Into<Fact>>(&mut self, facts: impl IntoIterator<Item = F>) {
        self.0.extend(facts.into_iter().map(Into::into));
    }

    pub fn into_vec(self) -> Vec<Fact> {
        self.0
    }
}

impl Deref for Facts {
    type Target = [Fact];
    fn deref(&self) -> &[Fact] {
        &self.0
    }
}

impl<'a> IntoIterator for &'a Facts {
    type Item = &'a Fact;
    type IntoIter = std::slice::Iter<'a, Fact>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl IntoIterator for Facts {
    type Item = Fact;
    type IntoIter = std::vec::IntoIter<Fact>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl FromIterator<Fact> for Facts {
    fn from_iter<I: IntoIterator<Item = Fact>>(iter: I) -> Self {
        Facts(iter.into_iter().collect())
    }
}

impl<const N: usize> From<[Fact; N]> for Facts {
    fn from(a: [Fact; N]) -> Self {
        Facts(a.into())
    }
}

/// One runbook step's outcome and what it found.
#[derive(Debug, Clone, PartialEq)]
pub struct StepFacts {
    pub step: StepName,
    pub outcome: Outcome,
    pub detail: Fact,
}

/// A risk reported whatever the finding (the verdict's `hazards`).
#[derive(Debug, Clone, PartialEq)]
pub struct HazardFacts {
    pub kind: HazardKind,
    pub severity: Severity,
    /// Seconds until data is lost; 0 when it is already being lost; absent when unknown.
    pub time_to_loss_seconds: Option<i64>,
    pub topic: Option<String>,
    /// Seconds until checkpoints reach their timeout (kind `checkpoint_timeout`).
    pub time_to_timeout_seconds: Option<i64>,
    pub detail: Fact,
}

/// What limited the diagnosis (the verdict's `missing`).
#[derive(Debug, Clone, PartialEq)]
pub enum MissingFact {
    /// A series the collector could not get, and why.
    Collected(crate::model::snapshot::Missing),
    /// A metric a step needed and did not find in the snapshot (its Flink name).
    Metric(String),
    /// An input a step needed, as the step states it (a topic's retention).
    Input(Fact),
}

impl MissingFact {
    /// The metric (a Flink metric name, or the PromQL the collector asked) that is absent;
    /// none for an input a step states in words (a topic's retention).
    pub fn metric(&self) -> Option<&str> {
        match self {
            MissingFact::Collected(m) => Some(&m.metric),
            MissingFact::Metric(m) => Some(m),
            MissingFact::Input(_) => None,
        }
    }
}

/// The verdict's one-line summary, in parts: a critical hazard first, the finding's line
/// (or one from the status), then the other culprits by name.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// The critical hazard that leads the line, when there is one.
    pub hazard: Option<HazardFacts>,
    pub line: Fact,
    /// Names of the culprits after the first (independent red regions).
    pub more_culprits: Vec<String>,
    /// What changed in the job's identity or shape (a run replaced, a rescale, a restart),
    /// said after the line in every output.
    pub changes: Vec<Fact>,
    /// What a clear step found wrong with the job although nothing is backpressured (a
    /// watermark held back by readers without a split), said after the line.
    pub health: Vec<Fact>,
}

/// The diagnosis of one snapshot: the verdict's data, with facts where the verdict has
/// sentences. `crate::render::words::verdict` turns it into the `culprit.verdict/v1` value.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnosis {
    pub job: JobRef,
    /// Evaluation time, ms since the epoch.
    pub at_ms: i64,
    /// Length of the window the averages cover, s.
    pub window_seconds: i64,
    /// Start of that window, ms since the epoch.
    pub window_start_ms: i64,
    pub status: Status,
    pub finding: Finding,
    pub culprit: Option<Culprit>,
    pub culprits: Vec<Culprit>,
    pub summary: Summary,
    /// Why it is slow, one fact a sentence.
    pub cause: Vec<Fact>,
    pub fix: Vec<Fact>,
    pub not_the_fix: Vec<Fact>,
    pub advice: Vec<Fact>,
    pub steps: Vec<StepFacts>,
    pub hazards: Vec<HazardFacts>,
    pub evidence: Vec<Evidence>,
    pub graph: Graph,
    pub confidence: Confidence,
    pub missing: Vec<MissingFact>,
    pub notes: Vec<Fact>,
    pub timeline: Option<Timeline>,
    /// The operator autoscaler's view of the culprit, when its gauges are in the store.
    pub autoscaler: Option<crate::model::autoscaler::AutoscalerView>,
    /// What the culprit is tied to outside the job (the system it writes to, its slow
    /// instance's host, the topics it reads).
    pub attribution: Option<crate::model::attribution::Attribution>,
}
