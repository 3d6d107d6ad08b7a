//! Derived signals: per-vertex aggregates over the snapshot's per-subtask values.
//!
//! Units: ratios in [0, 1] (busy b, backpressured p, idle i), rates in records/s.
//! b = 1 − min(i + p, 1) when Flink reports busy as NaN (legacy sources) and i and p are
//! known time ratios; otherwise an unknown b stays unknown, never 0. A reporter older than
//! Flink 1.13 has no busy time at all, and its p is a share of `isBackPressured` samples, not
//! time: b is not inferred from it. Values that add up to slightly
//! more than 1 (seen: p 1.0 with i 0.055) are clamped, not rejected.
//!
//! Pure.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::config::{DiagnosisConfig, OperatorKind};
use crate::model::graph::sanitize_label_value;
use crate::model::graph::{Edge, JobGraph};
use crate::model::snapshot::{BackpressureMeasure, OperatorRates, Snapshot, SubtaskMetrics, VertexAggregate};

/// One subtask's signals.
#[derive(Debug, Clone, PartialEq)]
pub struct SubtaskSignals {
    pub subtask: u32,
    /// Busy ratio, clamped to [0, 1]; inferred as 1 − min(i + p, 1) when Flink reports NaN.
    pub busy: Option<f64>,
    /// True when `busy` was inferred from idle and backpressured.
    pub busy_inferred: bool,
    /// Backpressured ratio, clamped to [0, 1].
    pub backpressured: Option<f64>,
    /// Idle ratio, clamped to [0, 1].
    pub idle: Option<f64>,
    /// Records in, records/s.
    pub records_in_per_s: Option<f64>,
    /// Records out, records/s.
    pub records_out_per_s: Option<f64>,
    pub tm_id: Option<String>,
    pub host: Option<String>,
}

/// One vertex's signals.
#[derive(Debug, Clone, PartialEq)]
pub struct VertexSignals {
    pub id: String,
    /// Display name (chained operators joined by ` -> `).
    pub name: String,
    pub operators: Vec<String>,
    pub parallelism: u32,
    /// Per-subtask detail, by index; empty for vertices known only by their aggregate.
    pub subtasks: Vec<SubtaskSignals>,
    /// The vertex aggregated over its subtasks (every vertex with metrics has one when
    /// collected live or from a recording).
    pub aggregate: Option<VertexAggregate>,
    pub is_source: bool,
    pub is_sink: bool,
    /// An input edge is `HASH` (keyBy).
    pub keyed_input: bool,
    pub kind: OperatorKind,
    /// The chain holds an async I/O or lookup operator.
    pub has_async: bool,
    /// Records rates of the operators chained in the vertex (operator scope), when collected.
    pub operator_rates: Vec<OperatorRates>,
}

fn clamp01(v: f64) -> f64 {
    v.clamp(0.0, 1.0)
}

/// The median of `v` (the mean of the middle two for an even count); `None` when empty.
pub(crate) fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

/// Each accessor reads the per-subtask detail when the vertex has it, else its aggregate.
impl VertexSignals {
    fn busy_values(&self) -> Vec<f64> {
        self.subtasks.iter().filter_map(|s| s.busy).collect()
    }

    /// Whether per-subtask readings are at hand (else only the vertex aggregate).
    pub fn detailed(&self) -> bool {
        !self.subtasks.is_empty()
    }

    /// Subtasks reporting metrics.
    pub fn subtask_count(&self) -> usize {
        if self.detailed() {
            self.subtasks.len()
        } else {
            self.aggregate.as_ref().map(|a| a.subtask_count as usize).unwrap_or(0)
        }
    }

    /// The vertex's parallelism now, for advice: the plan's (without a plan, as derived
    /// from the highest subtask index of its series), never below the subtasks reporting.
    pub fn parallelism_now(&self) -> u32 {
        self.parallelism.max(self.subtask_count() as u32)
    }

    /// How many times the reporting subtasks the whole vertex is: subtasks that report no
    /// metrics (a TaskManager not scraped) still run, and are taken to do what the
    /// reporting ones do on average. 1 when every subtask reports, or none does.
    fn whole_per_reporting(&self) -> f64 {
        match self.subtask_count() {
            0 => 1.0,
            seen => self.parallelism_now() as f64 / seen as f64,
        }
    }

    /// [`Self::throughput`] of every subtask, those without metrics taken at the mean of
    /// those with, records/s: what the whole vertex handles, for parallelism advice.
    pub fn throughput_all_subtasks(&self) -> Option<f64> {
        self.throughput().map(|r| r * self.whole_per_reporting())
    }

    /// True when the vertex has no metrics at all.
    pub fn has_no_metrics(&self) -> bool {
        !self.detailed() && self.aggregate.is_none()
    }

    /// `b_max`: max busy ratio over subtasks.
    pub fn busy_max(&self) -> Option<f64> {
        if self.detailed() {
            self.busy_values().into_iter().reduce(f64::max)
        } else {
            self.aggregate.as_ref()?.busy_max.map(clamp01)
        }
    }

    /// Min busy ratio over subtasks.
    pub fn busy_min(&self) -> Option<f64> {
        if self.detailed() {
            self.busy_values().into_iter().reduce(f64::min)
        } else {
            self.aggregate.as_ref()?.busy_min.map(clamp01)
        }
    }

    /// `b_median` over subtasks.
    pub fn busy_median(&self) -> Option<f64> {
        if self.detailed() { median(self.busy_values()) } else { self.aggregate.as_ref()?.busy_median.map(clamp01) }
    }

    /// Utilisation ρ: mean busy ratio over subtasks.
    pub fn utilisation(&self) -> Option<f64> {
        if self.detailed() {
            let v = self.busy_values();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        } else {
            self.aggregate.as_ref()?.busy_mean.map(clamp01)
        }
    }

    /// `p_max`: max backpressured ratio over subtasks.
    pub fn backpressured_max(&self) -> Option<f64> {
        if self.detailed() {
            self.subtasks.iter().filter_map(|s| s.backpressured).reduce(f64::max)
        } else {
            self.aggregate.as_ref()?.backpressured_max.map(clamp01)
        }
    }

    /// Mean idle ratio over subtasks.
    pub fn idle_avg(&self) -> Option<f64> {
        if self.detailed() {
            let v: Vec<f64> = self.subtasks.iter().filter_map(|s| s.idle).collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        } else {
            self.aggregate.as_ref()?.idle_mean.map(clamp01)
        }
    }

    /// Max over subtasks of the input buffer pool usage (`inPoolUsage`), ratio; collected
    /// only for reporters older than Flink 1.13.
    pub fn in_pool_usage(&self) -> Option<f64> {
        self.aggregate.as_ref()?.in_pool_usage_max.map(clamp01)
    }

    /// Max over subtasks of the output buffer pool usage (`outPoolUsage`), ratio.
    pub fn out_pool_usage(&self) -> Option<f64> {
        self.aggregate.as_ref()?.out_pool_usage_max.map(clamp01)
    }

    /// The subtask with the highest busy ratio.
    pub fn hottest(&self) -> Option<&SubtaskSignals> {
        self.subtasks.iter().filter(|s| s.busy.is_some()).max_by(|a, b| a.busy.unwrap().total_cmp(&b.busy.unwrap()))
    }

    /// True when the vertex is both a source and a sink (everything chained into one
    /// vertex): Flink then reports 0 records in and 0 records out for its tasks, which says
    /// nothing about what it handles.
    fn task_counters_meaningless(&self) -> bool {
        self.is_source && self.is_sink
    }

    /// The records-in rate of a chained operator (operator scope, summed over subtasks),
    /// by its name as Flink shows it or as the reporter wrote it.
    pub fn operator_records_in(&self, operator: &str) -> Option<f64> {
        let sanitized = sanitize_label_value(operator);
        self.operator_rates
            .iter()
            .find(|o| o.operator_name == operator || o.operator_name == sanitized)
            .and_then(|o| o.records_in_per_s)
    }

    /// The throughput a subtask handles, records/s: records in, or records out for a
    /// source (whose records come from outside the job). Unknown for a vertex that is both
    /// source and sink.
    pub fn throughput_of(&self, s: &SubtaskSignals) -> Option<f64> {
        if self.task_counters_meaningless() {
            None
        } else if self.is_source {
            s.records_out_per_s
        } else {
            s.records_in_per_s
        }
    }

    /// Total throughput over subtasks, records/s; `None` when any subtask lacks it. For a
    /// vertex that is both source and sink, what its first operator reads (operator scope).
    pub fn throughput(&self) -> Option<f64> {
        if self.task_counters_meaningless() {
            return self.operators.first().and_then(|op| self.operator_records_in(op)).map(|r| r.max(0.0));
        }
        if !self.detailed() {
            let a = self.aggregate.as_ref()?;
            return if self.is_source { a.records_out_per_s } else { a.records_in_per_s }.map(|r| r.max(0.0));
        }
        let v: Option<Vec<f64>> = self.subtasks.iter().map(|s| self.throughput_of(s)).collect();
        v.filter(|v| !v.is_empty()).map(|v| v.iter().sum())
    }

    /// True processing rate (capacity), records/s: what the vertex could do at 100 % busy
    /// (the Flink autoscaler's and DS2's estimate). Per subtask, throughput / busy, from the
    /// subtasks that have busy time and a records rate, scaled to every subtask of the
    /// parallelism, reporting or not (a subtask with busy 0 says nothing about capacity,
    /// and voids no estimate); without per-subtask detail, the reporting subtasks'
    /// throughput / their mean busy, scaled the same way. `None` when no subtask has both.
    pub fn capacity(&self) -> Option<f64> {
        let per: Vec<f64> = self
            .subtasks
            .iter()
            .filter_map(|s| Some((self.throughput_of(s)?, s.busy?)))
            .filter(|(_, busy)| *busy > 0.0)
            .map(|(rate, busy)| rate / busy)
            .collect();
        if !per.is_empty() {
            return Some(per.iter().sum::<f64>() / per.len() as f64 * self.parallelism_now() as f64);
        }
        let (rate, busy) = (self.throughput_all_subtasks()?, self.utilisation()?);
        (busy > 0.0).then(|| rate / busy)
    }

    /// Subtasks the plan has that report no metrics (a TaskManager not scraped, a
    /// subtask not running): judgements across subtasks are then unreliable.
    pub fn missing_subtasks(&self) -> usize {
        let seen = self.subtask_count();
        if seen == 0 { 0 } else { (self.parallelism as usize).saturating_sub(seen) }
    }

    /// Whether the vertex keeps keyed state in practice.
    pub fn is_stateful(&self) -> bool {
        self.keyed_input
            || matches!(
                self.kind,
                OperatorKind::Aggregate | OperatorKind::Join | OperatorKind::Window | OperatorKind::OrderDependent
            )
    }

    /// `name[3]` for subtask 3.
    pub fn subtask_name(&self, subtask: u32) -> String {
        // A name, not a sentence: joined here so the diagnosis builds no text.
        [self.name.as_str(), "[", &subtask.to_string(), "]"].concat()
    }
}

/// The signals of every vertex, in topological order, with the edges.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSignals {
    pub vertices: Vec<VertexSignals>,
    pub edges: Vec<Edge>,
    /// No job graph: vertices come from the metrics and there are no edges.
    pub graph_free: bool,
    /// Vertices with metrics that the plan does not know (plan from another job version).
    pub unknown_vertices: Vec<String>,
    /// Vertex positions by id and each id's neighbours, built with the vertices and edges
    /// (looking them up by scanning made `locate` quadratic in the vertices).
    index: Neighbours,
}

/// The first position of each vertex id, and per id the positions of the vertices its
/// edges come from and go to, in edge order.
#[derive(Debug, Clone, PartialEq, Default)]
struct Neighbours {
    position: HashMap<String, usize>,
    upstream: HashMap<String, Vec<usize>>,
    downstream: HashMap<String, Vec<usize>>,
}

impl Neighbours {
    fn new(vertices: &[VertexSignals], edges: &[Edge]) -> Self {
        let mut position: HashMap<String, usize> = HashMap::with_capacity(vertices.len());
        for (i, v) in vertices.iter().enumerate() {
            position.entry(v.id.clone()).or_insert(i);
        }
        let (mut upstream, mut downstream) = (HashMap::new(), HashMap::new());
        // The id is copied only for its first edge.
        let add = |map: &mut HashMap<String, Vec<usize>>, id: &str, i: usize| match map.get_mut(id) {
            Some(list) => list.push(i),
            None => {
                map.insert(id.to_string(), vec![i]);
            }
        };
        for e in edges {
            if let Some(&from) = position.get(&e.from) {
                add(&mut upstream, &e.to, from);
            }
            if let Some(&to) = position.get(&e.to) {
                add(&mut downstream, &e.from, to);
            }
        }
        Neighbours { position, upstream, downstream }
    }
}

impl JobSignals {
    /// Derives the signals of a snapshot.
    pub fn derive(snapshot: &Snapshot, cfg: &DiagnosisConfig) -> JobSignals {
        let mut by_vertex: HashMap<&str, Vec<&SubtaskMetrics>> = HashMap::new();
        // A vertex's subtasks mostly come one after another: one lookup per run of them.
        for run in snapshot.subtasks.chunk_by(|a, b| a.vertex_id == b.vertex_id) {
            by_vertex.entry(run[0].vertex_id.as_str()).or_default().extend(run);
        }
        let aggregates: BTreeMap<&str, &VertexAggregate> =
            snapshot.vertex_aggregates.iter().map(|a| (a.vertex_id.as_str(), a)).collect();
        match &snapshot.graph {
            Some(graph) => Self::with_graph(snapshot, graph, &by_vertex, &aggregates, cfg),
            None => Self::graph_free(snapshot, &by_vertex, &aggregates, cfg),
        }
    }

    fn with_graph(
        snapshot: &Snapshot,
        graph: &JobGraph,
        by_vertex: &HashMap<&str, Vec<&SubtaskMetrics>>,
        aggregates: &BTreeMap<&str, &VertexAggregate>,
        cfg: &DiagnosisConfig,
    ) -> JobSignals {
        // What the edges say of each vertex, in one pass over them.
        let mut with_input: HashSet<&str> = HashSet::new();
        let mut with_output: HashSet<&str> = HashSet::new();
        let mut keyed: HashSet<&str> = HashSet::new();
        for e in &graph.edges {
            with_input.insert(&e.to);
            with_output.insert(&e.from);
            if e.ship_strategy.eq_ignore_ascii_case("HASH") {
                keyed.insert(&e.to);
            }
        }
        let vertices: Vec<VertexSignals> = graph
            .vertices
            .iter()
            .map(|v| {
                let subtasks =
                    by_vertex.get(v.id.as_str()).map(|s| subtask_signals(s, infers_busy(snapshot))).unwrap_or_default();
                let (kind, has_async) = classify(&v.name, &v.operators, cfg);
                VertexSignals {
                    id: v.id.clone(),
                    name: v.name.clone(),
                    operators: v.operators.clone(),
                    parallelism: v.parallelism,
                    subtasks,
                    aggregate: aggregates.get(v.id.as_str()).map(|a| (*a).clone()),
                    is_source: !with_input.contains(v.id.as_str()),
                    is_sink: !with_output.contains(v.id.as_str()),
                    keyed_input: keyed.contains(v.id.as_str()),
                    kind,
                    has_async,
                    operator_rates: operators_of(snapshot, &v.id),
                }
            })
            .collect();
        let known: HashSet<&str> = graph.vertices.iter().map(|v| v.id.as_str()).collect();
        let unknown_vertices: Vec<String> = by_vertex
            .keys()
            .chain(aggregates.keys())
            .filter(|id| !known.contains(*id))
            .map(|id| id.to_string())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let edges = graph.edges.clone();
        let index = Neighbours::new(&vertices, &edges);
        JobSignals { vertices, edges, graph_free: false, unknown_vertices, index }
    }

    fn graph_free(
        snapshot: &Snapshot,
        by_vertex: &HashMap<&str, Vec<&SubtaskMetrics>>,
        aggregates: &BTreeMap<&str, &VertexAggregate>,
        cfg: &DiagnosisConfig,
    ) -> JobSignals {
        let ids: std::collections::BTreeSet<&str> = by_vertex.keys().chain(aggregates.keys()).copied().collect();
        let vertices: Vec<VertexSignals> = ids
            .into_iter()
            .map(|id| {
                let subs: &[&SubtaskMetrics] = by_vertex.get(id).map(|v| v.as_slice()).unwrap_or(&[]);
                let aggregate = aggregates.get(id).map(|a| (*a).clone());
                let name = subs
                    .first()
                    .map(|s| s.task_name.clone())
                    .or_else(|| aggregate.as_ref().map(|a| a.task_name.clone()))
                    .unwrap_or_else(|| id.to_string());
                let operators = vec![name.clone()];
                let (kind, has_async) = classify(&name, &operators, cfg);
                let parallelism = parallelism_from_metrics(snapshot, id, subs, aggregate.as_ref());
                // Without a plan a source still shows in its metrics: Flink's own source
                // lag (pendingRecords), or records out with none in. The same data then
                // gives the same offered rate and advice as with the plan.
                let is_source = snapshot.source_lag.iter().any(|l| l.vertex_id == id)
                    || aggregate.as_ref().is_some_and(|a| {
                        a.records_in_per_s == Some(0.0) && a.records_out_per_s.is_some_and(|r| r > 0.0)
                    });
                VertexSignals {
                    id: id.to_string(),
                    name,
                    operators,
                    parallelism,
                    subtasks: subtask_signals(subs, infers_busy(snapshot)),
                    aggregate,
                    is_source,
                    is_sink: false,
                    keyed_input: false,
                    kind,
                    has_async,
                    operator_rates: operators_of(snapshot, id),
                }
            })
            .collect();
        let index = Neighbours::new(&vertices, &[]);
        JobSignals { vertices, edges: Vec::new(), graph_free: true, unknown_vertices: Vec::new(), index }
    }

    pub fn vertex(&self, id: &str) -> Option<&VertexSignals> {
        self.index.position.get(id).map(|&i| &self.vertices[i])
    }

    /// Direct upstream vertices.
    pub fn upstream(&self, id: &str) -> Vec<&VertexSignals> {
        self.index.upstream.get(id).into_iter().flatten().map(|&i| &self.vertices[i]).collect()
    }

    /// Direct downstream vertices.
    pub fn downstream(&self, id: &str) -> Vec<&VertexSignals> {
        self.index.downstream.get(id).into_iter().flatten().map(|&i| &self.vertices[i]).collect()
    }

    /// Vertices upstream of `id` reachable through vertices for which `keep` holds.
    pub fn upstream_region(&self, id: &str, keep: impl Fn(&VertexSignals) -> bool) -> Vec<&VertexSignals> {
        // Positions are each id's first, so a vertex is seen once.
        let ups = |id: &str| self.index.upstream.get(id).into_iter().flatten().copied();
        let mut seen: Vec<usize> = Vec::new();
        let mut stack: Vec<usize> = ups(id).filter(|&u| keep(&self.vertices[u])).collect();
        while let Some(v) = stack.pop() {
            if seen.contains(&v) {
                continue;
            }
            seen.push(v);
            stack.extend(ups(&self.vertices[v].id).filter(|&u| keep(&self.vertices[u])));
        }
        // Topological order, sources first.
        seen.sort_unstable();
        seen.into_iter().map(|i| &self.vertices[i]).collect()
    }
}

/// A vertex's parallelism without a plan: the subtasks that report, but at least one more
/// than the highest `subtask_index` any of its series carries (subtask 1 reporting alone
/// means a subtask 0 that does not: a TaskManager not scraped).
fn parallelism_from_metrics(
    snapshot: &Snapshot,
    id: &str,
    subs: &[&SubtaskMetrics],
    aggregate: Option<&VertexAggregate>,
) -> u32 {
    let indices = subs
        .iter()
        .map(|s| s.subtask)
        .chain(snapshot.rocksdb.iter().filter(|r| r.vertex_id == id).map(|r| r.subtask))
        .chain(snapshot.source_lag.iter().filter(|l| l.vertex_id == id).map(|l| l.subtask));
    let by_index = indices.max().map_or(0, |i| i.saturating_add(1));
    let counted = aggregate.map_or(0, |a| a.subtask_count).max(subs.len() as u32);
    counted.max(by_index)
}

fn operators_of(snapshot: &Snapshot, vertex_id: &str) -> Vec<OperatorRates> {
    snapshot.operators.iter().filter(|o| o.vertex_id == vertex_id).cloned().collect()
}

/// Whether a NaN busy time may be inferred from idle and backpressured: only when
/// backpressure is measured as time, and no busy time was left out as impossible (then an
/// unknown busy time is a broken value, not a legacy source's NaN, and the idle and
/// backpressured times beside it are no more to be trusted).
fn infers_busy(snapshot: &Snapshot) -> bool {
    snapshot.backpressure_measure == BackpressureMeasure::TimeMsPerSecond
        && !snapshot.left_out.iter().any(|l| l.signal == "busy")
}

/// Per-subtask signals; a NaN busy time is inferred from idle and backpressured time when
/// `infer_busy`.
fn subtask_signals(subs: &[&SubtaskMetrics], infer_busy: bool) -> Vec<SubtaskSignals> {
    let mut out: Vec<SubtaskSignals> = subs
        .iter()
        .map(|s| {
            let backpressured = s.backpressured_ratio.map(clamp01);
            let idle = s.idle_ratio.map(clamp01);
            let (busy, busy_inferred) = match (s.busy_ratio, idle, backpressured) {
                (Some(b), _, _) => (Some(clamp01(b)), false),
                (None, Some(i), Some(p)) if infer_busy => (Some(1.0 - (i + p).min(1.0)), true),
                _ => (None, false),
            };
            SubtaskSignals {
                subtask: s.subtask,
                busy,
                busy_inferred,
                backpressured,
                idle,
                records_in_per_s: s.records_in_per_s.map(|r| r.max(0.0)),
                records_out_per_s: s.records_out_per_s.map(|r| r.max(0.0)),
                tm_id: s.tm_id.clone(),
                host: s.host.clone(),
            }
        })
        .collect();
    out.sort_by_key(|s| s.subtask);
    out
}

/// Operator kind from configuration (by vertex or operator name), else from Flink's names
/// (SQL: `GroupAggregate`, `Join`, `Rank`, …; DataStream: `Window(…)`, `KeyedProcess`, …),
/// and whether the chain holds an async I/O or lookup operator.
pub fn classify(name: &str, operators: &[String], cfg: &DiagnosisConfig) -> (OperatorKind, bool) {
    let has_async = operators.iter().chain(std::iter::once(&name.to_string())).any(|op| {
        let lower = op.to_ascii_lowercase();
        op.contains("AsyncWaitOperator") || lower.contains("async") || op.contains("LookupJoin")
    });
    let kind_of = |n: &str| cfg.operator_kinds.iter().find(|(k, _)| key_matches(k, n)).map(|(_, kind)| kind);
    if let Some(kind) = kind_of(name).or_else(|| operators.iter().find_map(|op| kind_of(op))) {
        return (*kind, has_async || *kind == OperatorKind::AsyncIo);
    }
    let any = |needles: &[&str]| operators.iter().any(|op| needles.iter().any(|n| op.contains(n)));
    let kind = if any(&["Join", "CoProcess", "CoFlatMap", "CoMap", "join"]) {
        OperatorKind::Join
    } else if any(&["Rank", "Deduplicate", "OverAggregate", "Sort", "Limit", "MatchRecognize"]) {
        OperatorKind::OrderDependent
    } else if any(&["GroupAggregate", "WindowAggregate", "Keyed Aggregation", "GroupWindowAggregate"]) {
        OperatorKind::Aggregate
    } else if any(&["Window(", "WindowOperator", "TumblingEventTimeWindows", "SlidingEventTimeWindows", "Windows"]) {
        OperatorKind::Window
    } else if has_async {
        OperatorKind::AsyncIo
    } else {
        OperatorKind::Unknown
    };
    (kind, has_async)
}

/// An `operator_kinds` key names an operator or vertex as Flink shows it
/// (`Window(TumblingEventTimeWindows(60000), …)`) or as the reporter wrote it
/// (`Window_TumblingEventTimeWindows_60000_…`).
fn key_matches(key: &str, name: &str) -> bool {
    key == name || sanitize_label_value(key) == sanitize_label_value(name)
}

/// The `operator_kinds` keys that match no vertex or operator of this job (a typo, or a
/// key meant for another job): the configuration should be told.
pub fn unmatched_operator_kinds(cfg: &DiagnosisConfig, signals: &JobSignals) -> Vec<String> {
    cfg.operator_kinds
        .keys()
        .filter(|k| {
            !signals.vertices.iter().any(|v| key_matches(k, &v.name) || v.operators.iter().any(|op| key_matches(k, op)))
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operator_kind_keys_match_the_flink_name_or_the_sanitized_one() {
        let mut cfg = DiagnosisConfig::default();
        // As the reporter writes it: every character outside [A-Za-z0-9:_] became `_`.
        cfg.operator_kinds.insert("Window_TumblingEventTimeWindows_60000___Agg_".into(), OperatorKind::Aggregate);
        cfg.operator_kinds.insert("no-such-operator".into(), OperatorKind::Join);
        let ops = vec!["Window(TumblingEventTimeWindows(60000), Agg)".to_string()];
        assert_eq!(classify(&ops[0], &ops, &cfg).0, OperatorKind::Aggregate);
        let snap = crate::diagnose::testkit::SnapshotBuilder::new()
            .vertex("w", "Window(TumblingEventTimeWindows(60000), Agg)", 1)
            .build();
        let signals = JobSignals::derive(&snap, &cfg);
        assert_eq!(unmatched_operator_kinds(&cfg, &signals), ["no-such-operator"]);
    }

    #[test]
    fn without_a_plan_parallelism_is_one_more_than_the_highest_subtask_index_of_any_series() {
        use crate::diagnose::testkit::{SnapshotBuilder, rocks};
        // Task metrics of subtask 1 alone (2 subtasks at least), RocksDB metrics of
        // subtask 3: parallelism 3 + 1 = 4, of which 1 reports its task metrics.
        let snap = SnapshotBuilder::new()
            .vertex("v", "v", 4)
            .subtask("v", 1, 0.5, 0.0, 0.5, 10.0)
            .rocksdb(rocks("v", 3))
            .without_graph()
            .build();
        let signals = JobSignals::derive(&snap, &DiagnosisConfig::default());
        let v = signals.vertex("v").unwrap();
        assert_eq!((v.parallelism, v.subtask_count(), v.missing_subtasks()), (4, 1, 3));
        // Capacity 10 / 0.5 = 20 records/s per subtask, × 4 subtasks = 80.
        assert!((v.capacity().unwrap() - 80.0).abs() < 1e-9);
        // Throughput of all 4 subtasks, the 3 without metrics at the mean of the one: 40.
        assert_eq!(v.throughput_all_subtasks(), Some(40.0));
    }

    fn sub(i: u32, busy: Option<f64>, bp: Option<f64>, idle: Option<f64>, rate: Option<f64>) -> SubtaskSignals {
        SubtaskSignals {
            subtask: i,
            busy,
            busy_inferred: false,
            backpressured: bp,
            idle,
            records_in_per_s: rate,
            records_out_per_s: None,
            tm_id: None,
            host: None,
        }
    }

    fn vertex(subtasks: Vec<SubtaskSignals>) -> VertexSignals {
        VertexSignals {
            id: "v".into(),
            name: "v".into(),
            operators: vec!["v".into()],
            parallelism: subtasks.len() as u32,
            subtasks,
            aggregate: None,
            is_source: false,
            is_sink: false,
            keyed_input: false,
            kind: OperatorKind::Unknown,
            has_async: false,
            operator_rates: Vec::new(),
        }
    }

    /// One subtask with no busy time, backpressured 0.3 and idle `idle`.
    fn unknown_busy(idle: Option<f64>) -> SubtaskMetrics {
        SubtaskMetrics {
            vertex_id: "v".into(),
            subtask: 0,
            task_name: "v".into(),
            tm_id: None,
            host: None,
            busy_ratio: None,
            backpressured_ratio: Some(0.3),
            idle_ratio: idle,
            records_in_per_s: None,
            records_out_per_s: None,
            checkpoint_start_delay_ms: None,
            checkpoint_alignment_ms: None,
        }
    }

    #[test]
    fn a_nan_busy_is_inferred_from_idle_and_backpressure() {
        let m = unknown_busy(Some(0.5));
        let s = &subtask_signals(&[&m], true)[0];
        // b = 1 − min(0.5 + 0.3, 1) = 0.2
        assert!((s.busy.unwrap() - 0.2).abs() < 1e-12);
        assert!(s.busy_inferred);
    }

    #[test]
    fn an_unknown_busy_without_idle_stays_unknown_not_zero() {
        let m = unknown_busy(None);
        assert_eq!(subtask_signals(&[&m], true)[0].busy, None);
    }

    #[test]
    fn a_share_of_is_backpressured_samples_never_infers_busy_time() {
        // Flink ≤ 1.12: p = 0.3 is a share of samples, not time; 1 − (0.5 + 0.3) would be a
        // guess dressed as a measurement.
        let m = unknown_busy(Some(0.5));
        let s = &subtask_signals(&[&m], false)[0];
        assert_eq!((s.busy, s.busy_inferred), (None, false));
    }

    #[test]
    fn ratios_over_one_are_clamped() {
        let m = SubtaskMetrics {
            vertex_id: "v".into(),
            subtask: 0,
            task_name: "v".into(),
            tm_id: None,
            host: None,
            busy_ratio: None,
            backpressured_ratio: Some(1.0),
            idle_ratio: Some(0.055),
            records_in_per_s: None,
            records_out_per_s: None,
            checkpoint_start_delay_ms: None,
            checkpoint_alignment_ms: None,
        };
        let s = &subtask_signals(&[&m], true)[0];
        // i + p = 1.055 → min(…, 1) = 1 → b = 0
        assert_eq!(s.busy, Some(0.0));
        assert_eq!(s.backpressured, Some(1.0));
    }

    #[test]
    fn capacity_is_throughput_over_busy_summed_over_subtasks() {
        // 900 records/s at 90 % busy and 400 at 50 % → 1000 + 800 = 1800 records/s.
        let v = vertex(vec![sub(0, Some(0.9), None, None, Some(900.0)), sub(1, Some(0.5), None, None, Some(400.0))]);
        assert!((v.capacity().unwrap() - 1800.0).abs() < 1e-9);
        // ρ = (0.9 + 0.5) / 2 = 0.7
        assert!((v.utilisation().unwrap() - 0.7).abs() < 1e-12);
        assert_eq!(v.busy_median(), Some(0.7));
    }

    #[test]
    fn flink_names_give_the_operator_kind() {
        let cfg = DiagnosisConfig::default();
        let k = |ops: &[&str]| {
            let ops: Vec<String> = ops.iter().map(|s| s.to_string()).collect();
            classify(&ops.join(" -> "), &ops, &cfg)
        };
        assert_eq!(k(&["GroupAggregate(groupBy=[user], select=[user, COUNT(*)])"]).0, OperatorKind::Aggregate);
        assert_eq!(k(&["Join(joinType=[InnerJoin])"]).0, OperatorKind::Join);
        assert_eq!(k(&["LookupJoin(table=[dim])"]), (OperatorKind::Join, true));
        assert_eq!(k(&["Rank(strategy=[AppendFastStrategy])"]).0, OperatorKind::OrderDependent);
        assert_eq!(k(&["Window(TumblingEventTimeWindows(60000), EventTimeTrigger, Agg)"]).0, OperatorKind::Window);
        assert_eq!(k(&["fraud-score"]).0, OperatorKind::Unknown);
        assert_eq!(k(&["enrich", "AsyncWaitOperator"]), (OperatorKind::AsyncIo, true));
    }

    #[test]
    fn configuration_overrides_the_kind_by_vertex_or_operator_name() {
        let mut cfg = DiagnosisConfig::default();
        cfg.operator_kinds.insert("score".into(), OperatorKind::Aggregate);
        let ops = vec!["enrich".to_string(), "score".to_string()];
        assert_eq!(classify("enrich -> score", &ops, &cfg).0, OperatorKind::Aggregate);
    }
}
