//! Smaller queries when a backend refuses one as too large.
//!
//! Mimir and Cortex answer 422 to a query over too many series, chunks or samples;
//! Prometheus refuses too many samples (422) or points per series (400); VictoriaMetrics
//! and Thanos have limits of their own ([`crate::collect::prometheus::TOO_LARGE`]). A
//! refused query is asked again in pieces whose answers combine into exactly the answer the
//! whole would have given, or not at all:
//!
//! * **per vertex**: the series split by `task_id` into disjoint parts (halves, halved again
//!   while a part is refused) and the series of no listed vertex. Exact when the query
//!   groups by `task_id` (each group lies in one part), has no aggregation (each series
//!   lies in one part), or aggregates with `sum`, `count`, `max` or `min` (which combine
//!   across parts). `avg` and `quantile` over several vertices do not combine, so such a
//!   query is not split by vertex.
//! * **shorter ranges**: a range query's evaluation steps in halves; each step is evaluated
//!   on its own, so the pieces' points join exactly. The range of `*_over_time` and `rate`
//!   is never shortened: that would change the number.
//!
//! A part refused that cannot be split further, any other failure, or more than
//! [`MAX_REQUESTS`] requests give the whole query up: it fails (a `Missing` entry in the
//! snapshot), never with a partial answer.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use crate::collect::collector::{MetricSource, QueryError, TooLarge};
use crate::collect::query::{Agg, Aggregation, MatchOp, Matcher, OverTime, Query, QueryResult, ResultSeries, Selector};
use crate::collect::store::LOOKBACK_DELTA_MS;

/// The label that tells a job's vertices apart.
const VERTEX_LABEL: &str = "task_id";
/// The label of the job a task series belongs to: only such selectors split by vertex.
const JOB_LABEL: &str = "job_id";
/// The label of a subtask's index; subtask 0 exists for every vertex.
const SUBTASK_LABEL: &str = "subtask_index";

/// Requests one refused query may take in pieces before it is given up.
pub const MAX_REQUESTS: usize = 256;
/// Pieces asked at once.
const CONCURRENCY: usize = 8;

/// A [`MetricSource`] that asks refused queries again in smaller pieces (see the module
/// doc); everything else passes through.
pub struct Degrading<'a, S> {
    inner: &'a S,
    /// The job's vertices when known beforehand (the job graph); else they are looked up
    /// from the refused query's series of subtask 0.
    vertex_ids: Vec<String>,
    stats: Mutex<Stats>,
}

/// What happened to refused queries.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    /// Queries the backend refused as too large.
    pub refused: usize,
    /// Of those, answered in pieces.
    pub answered: usize,
    /// Requests the pieces took.
    pub requests: usize,
    /// The first refusal, as the backend said it.
    pub first_refusal: Option<String>,
}

/// How the answers of disjoint pieces combine into the whole's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Combine {
    /// Every (series, time) comes from exactly one piece.
    Union,
    /// Values of one (series, time) from several pieces add up (`sum`, `count`).
    Add,
    Max,
    Min,
}

/// Which of the query's series a piece selects.
#[derive(Debug, Clone, PartialEq)]
enum Part {
    Whole,
    /// The series of these vertices.
    Only(Vec<String>),
    /// The series of none of these vertices (other or no `task_id`).
    NoneOf(Vec<String>),
}

/// One piece: some of the series, over some of the evaluation steps (range queries).
#[derive(Debug, Clone, PartialEq)]
struct Piece {
    part: Part,
    steps: Option<(i64, i64)>,
}

impl<'a, S: MetricSource> Degrading<'a, S> {
    pub fn new(inner: &'a S, vertex_ids: Vec<String>) -> Self {
        Degrading { inner, vertex_ids, stats: Mutex::new(Stats::default()) }
    }

    pub fn stats(&self) -> Stats {
        self.stats.lock().expect("not poisoned").clone()
    }

    /// A note for the verdict when queries were asked in pieces; None when none were.
    pub fn note(&self) -> Option<String> {
        let s = self.stats();
        (s.answered > 0).then(|| {
            format!(
                "the metric store refused {} quer{} as too large ({}); {} answered in {} smaller queries (per vertex or over shorter ranges), which add up to the same numbers",
                s.refused,
                if s.refused == 1 { "y" } else { "ies" },
                s.first_refusal.as_deref().unwrap_or("a limit"),
                if s.answered == s.refused { "all were".to_string() } else { format!("{} were", s.answered) },
                s.requests
            )
        })
    }

    /// Asks `q` in pieces after the backend refused it with `refused` for `kind`.
    async fn in_pieces(&self, q: &Query, refused: QueryError, kind: TooLarge) -> Result<QueryResult, QueryError> {
        {
            let mut stats = self.stats.lock().expect("not poisoned");
            stats.refused += 1;
            stats.first_refusal.get_or_insert_with(|| refused.message.clone());
        }
        let give_up = |why: &str| QueryError { message: format!("{} ({why})", refused.message), too_large: Some(kind) };
        let combine = combine_of(q);
        // The vertices to split by, looked up at the first refusal for too many series.
        let mut vertices: Option<(Vec<String>, bool)> = None;
        let whole = Piece { part: Part::Whole, steps: steps_of(q) };
        let mut queue: VecDeque<Piece> = self
            .smaller(q, &whole, kind, combine, &mut vertices)
            .await
            .ok_or_else(|| give_up("it cannot be asked in smaller pieces that add up to the same number"))?
            .into();
        let mut answers: Vec<QueryResult> = Vec::new();
        let mut requests = 0;
        while !queue.is_empty() {
            let batch: Vec<Piece> = queue.drain(..queue.len().min(CONCURRENCY)).collect();
            requests += batch.len();
            if requests > MAX_REQUESTS {
                return Err(give_up(&format!("still refused after {MAX_REQUESTS} smaller queries")));
            }
            let runs = batch.iter().map(|p| {
                let piece = piece_query(q, p);
                async move { self.inner.run(std::slice::from_ref(&piece)).await.pop().expect("one answer") }
            });
            for (piece, answer) in batch.iter().zip(futures::future::join_all(runs).await) {
                match answer {
                    Ok(result) => answers.push(result),
                    Err(QueryError { too_large: Some(kind), .. }) => {
                        match self.smaller(q, piece, kind, combine, &mut vertices).await {
                            Some(pieces) => queue.extend(pieces),
                            None => return Err(give_up(&format!("refused even for {}", describe(piece)))),
                        }
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        let mut stats = self.stats.lock().expect("not poisoned");
        stats.answered += 1;
        stats.requests += requests;
        Ok(combine_answers(answers, combine))
    }

    /// A piece refused for `kind`, split further: for too many series, its vertices in
    /// halves (the whole query: per half of the job's vertices, and the series of none of
    /// them); else, and for too many steps, its steps in halves. None when nothing smaller
    /// adds up to the same answer.
    async fn smaller(
        &self,
        q: &Query,
        piece: &Piece,
        kind: TooLarge,
        combine: Option<Combine>,
        vertices: &mut Option<(Vec<String>, bool)>,
    ) -> Option<Vec<Piece>> {
        if kind == TooLarge::Series {
            let steps = piece.steps;
            match &piece.part {
                Part::Only(ids) if ids.len() > 1 => {
                    return Some(halves(ids).into_iter().map(|ids| Piece { part: Part::Only(ids), steps }).collect());
                }
                Part::Whole => {
                    if vertices.is_none() {
                        *vertices = Some(self.vertices(q, combine).await);
                    }
                    let (universe, rest) = vertices.as_ref().expect("just set");
                    if !universe.is_empty() {
                        let mut pieces: Vec<Piece> =
                            halves(universe).into_iter().map(|ids| Piece { part: Part::Only(ids), steps }).collect();
                        if *rest {
                            pieces.push(Piece { part: Part::NoneOf(universe.clone()), steps });
                        }
                        return Some(pieces);
                    }
                }
                _ => {}
            }
        }
        fewer_steps(q, piece)
    }

    /// The vertices to split `q` by and whether the series of no listed vertex form a part
    /// of their own: the query's own `task_id` list, else the job graph's, else the
    /// vertices of its series of subtask 0. Empty when it cannot be split by vertex.
    async fn vertices(&self, q: &Query, combine: Option<Combine>) -> (Vec<String>, bool) {
        let Some(selector) = selector_of(q) else { return (Vec::new(), false) };
        if combine.is_none() || !selector.matchers.iter().any(|m| m.label == JOB_LABEL) {
            return (Vec::new(), false);
        }
        match selector.matchers.iter().find(|m| m.label == VERTEX_LABEL).map(|m| &m.op) {
            Some(MatchOp::OneOf(ids)) => return (ids.clone(), false),
            Some(_) => return (Vec::new(), false),
            None => {}
        }
        if !self.vertex_ids.is_empty() {
            return (self.vertex_ids.clone(), true);
        }
        let Some(probe) = subtask_zero_probe(q) else { return (Vec::new(), false) };
        let found = self.inner.run(std::slice::from_ref(&probe)).await.pop().expect("one answer");
        let mut ids: Vec<String> = found
            .map(|r| r.iter().map(|s| s.label(VERTEX_LABEL).to_string()).filter(|id| !id.is_empty()).collect())
            .unwrap_or_default();
        ids.sort();
        ids.dedup();
        (ids, true)
    }
}

impl<S: MetricSource> MetricSource for Degrading<'_, S> {
    async fn run(&self, queries: &[Query]) -> Vec<Result<QueryResult, QueryError>> {
        let mut answers = self.inner.run(queries).await;
        for (q, answer) in queries.iter().zip(answers.iter_mut()) {
            if let Err(e) = answer
                && let Some(kind) = e.too_large
            {
                let refused = e.clone();
                *answer = self.in_pieces(q, refused, kind).await;
            }
        }
        answers
    }

    fn latest_ms(&self) -> Option<i64> {
        self.inner.latest_ms()
    }
}

fn selector_of(q: &Query) -> Option<&Selector> {
    match q {
        Query::OverTime { selector, .. } | Query::Range { selector, .. } => Some(selector),
        Query::Newest { .. } => None,
    }
}

fn selector_mut(q: &mut Query) -> Option<&mut Selector> {
    match q {
        Query::OverTime { selector, .. } | Query::Range { selector, .. } => Some(selector),
        Query::Newest { .. } => None,
    }
}

/// How pieces split by vertex combine; None when they cannot (an `avg` or `quantile` over
/// several vertices, a [`Query::Newest`]).
fn combine_of(q: &Query) -> Option<Combine> {
    let aggregation = match q {
        Query::OverTime { aggregation, .. } | Query::Range { aggregation, .. } => aggregation,
        Query::Newest { .. } => return None,
    };
    match aggregation {
        None => Some(Combine::Union),
        Some(a) if a.by.iter().any(|l| l == VERTEX_LABEL) => Some(Combine::Union),
        Some(a) => match a.agg {
            Agg::Sum | Agg::Count => Some(Combine::Add),
            Agg::Max => Some(Combine::Max),
            Agg::Min => Some(Combine::Min),
            Agg::Avg | Agg::Median => None,
        },
    }
}

/// The evaluation steps of a range query.
fn steps_of(q: &Query) -> Option<(i64, i64)> {
    match q {
        Query::Range { start_ms, end_ms, .. } => Some((*start_ms, *end_ms)),
        _ => None,
    }
}

fn step_of(q: &Query) -> i64 {
    match q {
        Query::Range { step_ms, .. } => (*step_ms).max(1),
        _ => 1,
    }
}

/// A refused piece's steps in halves; None for one step (or not a range query).
fn fewer_steps(q: &Query, piece: &Piece) -> Option<Vec<Piece>> {
    let (start, end) = piece.steps?;
    let step = step_of(q);
    let evaluations = (end - start) / step + 1;
    if evaluations < 2 {
        return None;
    }
    let mid = start + (evaluations - 1) / 2 * step;
    Some(vec![
        Piece { part: piece.part.clone(), steps: Some((start, mid)) },
        Piece { part: piece.part.clone(), steps: Some((mid + step, end)) },
    ])
}

fn halves(ids: &[String]) -> Vec<Vec<String>> {
    if ids.len() < 2 {
        return vec![ids.to_vec()];
    }
    let (a, b) = ids.split_at(ids.len() / 2);
    vec![a.to_vec(), b.to_vec()]
}

/// The query of one piece: its vertices as a `task_id` matcher (replacing the query's own
/// list), its steps as the range.
fn piece_query(q: &Query, piece: &Piece) -> Query {
    let mut q = q.clone();
    if let Some(selector) = selector_mut(&mut q) {
        match &piece.part {
            Part::Whole => {}
            Part::Only(ids) => {
                selector.matchers.retain(|m| m.label != VERTEX_LABEL);
                selector.matchers.push(Matcher { label: VERTEX_LABEL.into(), op: MatchOp::OneOf(ids.clone()) });
            }
            Part::NoneOf(ids) => {
                selector.matchers.push(Matcher { label: VERTEX_LABEL.into(), op: MatchOp::NotOneOf(ids.clone()) });
            }
        }
    }
    if let (Query::Range { start_ms, end_ms, .. }, Some((start, end))) = (&mut q, piece.steps) {
        *start_ms = start;
        *end_ms = end;
    }
    q
}

/// The query that finds the vertices of `q`'s series: those of subtask 0 (every vertex has
/// one) over the time `q` covers.
fn subtask_zero_probe(q: &Query) -> Option<Query> {
    let (selector, at_ms, range_ms) = match q {
        Query::OverTime { selector, range_ms, at_ms, .. } => (selector, *at_ms, *range_ms),
        Query::Range { selector, start_ms, end_ms, .. } => (selector, *end_ms, end_ms - start_ms + LOOKBACK_DELTA_MS),
        Query::Newest { .. } => return None,
    };
    let mut selector = Selector { matchers: selector.matchers.clone(), hygiene: Default::default() };
    selector.matchers.retain(|m| m.label != SUBTASK_LABEL);
    Some(Query::OverTime {
        selector: selector.with(SUBTASK_LABEL, "0"),
        func: OverTime::Last,
        range_ms,
        at_ms,
        aggregation: Some(Aggregation::new(Agg::Count, &[VERTEX_LABEL])),
    })
}

fn describe(piece: &Piece) -> String {
    let what = match &piece.part {
        Part::Whole => "the whole series set".to_string(),
        Part::Only(ids) if ids.len() == 1 => format!("vertex {}", ids[0]),
        Part::Only(ids) => format!("{} vertices", ids.len()),
        Part::NoneOf(_) => "the series of no known vertex".to_string(),
    };
    match piece.steps {
        Some((start, end)) if start == end => format!("{what} at one evaluation step"),
        _ => what,
    }
}

/// The pieces' answers as the whole's: series by labels, points by time, values of one
/// (series, time) from several pieces combined.
fn combine_answers(answers: Vec<QueryResult>, combine: Option<Combine>) -> QueryResult {
    let mut by_labels: BTreeMap<BTreeMap<String, String>, BTreeMap<i64, f64>> = BTreeMap::new();
    for series in answers.into_iter().flatten() {
        let points = by_labels.entry(series.labels).or_default();
        for (t, v) in series.points {
            points
                .entry(t)
                .and_modify(|held| {
                    *held = match combine {
                        Some(Combine::Add) => *held + v,
                        // Prometheus' max and min take a number over NaN.
                        Some(Combine::Max) if held.is_nan() || v > *held => v,
                        Some(Combine::Min) if held.is_nan() || v < *held => v,
                        _ => *held,
                    }
                })
                .or_insert(v);
        }
    }
    by_labels
        .into_iter()
        .map(|(labels, points)| ResultSeries { labels, points: points.into_iter().collect() })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::store::SeriesStore;

    /// A store that refuses, as too large, any query whose selector matches more than
    /// `limit` series, or a range query over more than `max_steps` evaluations; it counts
    /// what it was asked.
    struct Limited {
        store: SeriesStore,
        limit: usize,
        max_steps: i64,
        asked: Mutex<usize>,
    }

    impl MetricSource for Limited {
        async fn run(&self, queries: &[Query]) -> Vec<Result<QueryResult, QueryError>> {
            queries
                .iter()
                .map(|q| {
                    *self.asked.lock().unwrap() += 1;
                    let series = selector_of(q).map_or(0, |s| self.store.count_matching(s));
                    let steps = steps_of(q).map_or(1, |(a, b)| (b - a) / step_of(q) + 1);
                    if steps > self.max_steps {
                        Err(QueryError {
                            message: "exceeded maximum resolution of 11,000 points per timeseries".into(),
                            too_large: Some(TooLarge::Steps),
                        })
                    } else if series > self.limit {
                        Err(QueryError {
                            message: format!("the query exceeded the maximum number of series (limit: {} series) (err-mimir-max-series-per-query)", self.limit),
                            too_large: Some(TooLarge::Series),
                        })
                    } else {
                        Ok(self.store.evaluate(q))
                    }
                })
                .collect()
        }

        fn latest_ms(&self) -> Option<i64> {
            self.store.last_timestamp_ms()
        }
    }

    /// 6 vertices × 4 subtasks of busy time, scraped every 10 s for 10 min; vertex v,
    /// subtask s reports 100·v + s + k at scrape k.
    fn job() -> SeriesStore {
        let mut store = SeriesStore::new();
        for v in 0..6 {
            for s in 0..4 {
                let (task, sub) = (format!("v{v}"), s.to_string());
                for k in 0..=60 {
                    let labels = [("job_id", "j"), ("task_id", task.as_str()), ("subtask_index", sub.as_str())];
                    store.push("busy", &labels, k * 10_000, (100 * v + s + k) as f64);
                }
            }
        }
        store.push("other", &[("job_id", "j")], 600_000, 1.0);
        store.finish();
        store
    }

    fn limited(limit: usize, max_steps: i64) -> Limited {
        Limited { store: job(), limit, max_steps, asked: Mutex::new(0) }
    }

    fn queries() -> Vec<Query> {
        let busy = || Selector::metric("busy").with("job_id", "j");
        let over = |agg: Agg, by: &[&str]| Query::OverTime {
            selector: busy(),
            func: OverTime::Avg,
            range_ms: 300_000,
            at_ms: 600_000,
            aggregation: Some(Aggregation::new(agg, by)),
        };
        vec![
            over(Agg::Max, &["task_id"]),
            over(Agg::Median, &["task_id"]),
            over(Agg::Count, &["task_id"]),
            over(Agg::Max, &[]),
            over(Agg::Sum, &[]),
            over(Agg::Count, &[]),
            Query::OverTime {
                selector: busy(),
                func: OverTime::Rate,
                range_ms: 300_000,
                at_ms: 600_000,
                aggregation: None,
            },
            Query::Range {
                selector: busy(),
                aggregation: Some(Aggregation::new(Agg::Max, &[])),
                start_ms: 0,
                end_ms: 600_000,
                step_ms: 10_000,
            },
            Query::Range {
                selector: busy().with("task_id", "v2"),
                aggregation: None,
                start_ms: 0,
                end_ms: 600_000,
                step_ms: 5_000,
            },
        ]
    }

    #[test]
    fn refused_queries_asked_in_pieces_give_exactly_the_whole_answer() {
        // 24 series; the store refuses more than 6 series (one vertex of 4 subtasks per
        // query; the 6 series of subtask 0 that name the vertices when there is no graph)
        // and more than 20 evaluation steps.
        let whole = job();
        for with_graph in [true, false] {
            let limited = limited(6, 20);
            let ids: Vec<String> = if with_graph { (0..6).map(|v| format!("v{v}")).collect() } else { Vec::new() };
            let source = Degrading::new(&limited, ids);
            let answers = crate::collect::block_on(source.run(&queries()));
            for (q, answer) in queries().iter().zip(answers) {
                // Series in any order (as a backend gives them), else equal.
                let sorted = |mut r: QueryResult| {
                    r.sort_by(|a, b| a.labels.cmp(&b.labels));
                    r
                };
                let expected = sorted(whole.evaluate(q));
                let got = sorted(answer.unwrap_or_else(|e| panic!("{}: {e}", q.to_promql())));
                assert_eq!(got, expected, "{}", q.to_promql());
            }
            let stats = source.stats();
            assert_eq!((stats.refused, stats.answered), (9, 9), "{stats:?}");
            assert!(source.note().unwrap().contains("refused 9 queries as too large"), "{:?}", source.note());
        }
    }

    #[test]
    fn an_average_over_all_vertices_is_not_split_and_a_refused_single_vertex_gives_up() {
        // avg over every series does not combine from per-vertex pieces: given up.
        let limited = limited(5, 1000);
        let source = Degrading::new(&limited, (0..6).map(|v| format!("v{v}")).collect());
        let avg = Query::OverTime {
            selector: Selector::metric("busy").with("job_id", "j"),
            func: OverTime::Avg,
            range_ms: 300_000,
            at_ms: 600_000,
            aggregation: Some(Aggregation::new(Agg::Avg, &[])),
        };
        let e = crate::collect::block_on(source.run(std::slice::from_ref(&avg))).pop().unwrap().unwrap_err();
        assert!(e.message.contains("cannot be asked in smaller pieces"), "{e}");
        // A limit of 3 series refuses even one vertex of 4 subtasks: no partial answer.
        let limited = self::limited(3, 1000);
        let source = Degrading::new(&limited, (0..6).map(|v| format!("v{v}")).collect());
        let max = Query::OverTime {
            selector: Selector::metric("busy").with("job_id", "j"),
            func: OverTime::Avg,
            range_ms: 300_000,
            at_ms: 600_000,
            aggregation: Some(Aggregation::new(Agg::Max, &["task_id"])),
        };
        let e = crate::collect::block_on(source.run(std::slice::from_ref(&max))).pop().unwrap().unwrap_err();
        assert!(e.message.contains("refused even for vertex"), "{e}");
        assert!(*limited.asked.lock().unwrap() <= MAX_REQUESTS + 1);
    }
}
