//! What collection needs decided before it can ask: the diagnosis-side rules that choose
//! which vertices get per-subtask detail ([`detail_vertices`]) and how long a recurring
//! backpressure's period is ([`period_of_series`], which keeps a window from being cut
//! inside one pattern).
//!
//! The collector calls these between its rounds of queries; they are pure functions of
//! what the earlier rounds found and of the thresholds, and depend on nothing else of the
//! diagnosis (not on its steps, nor on the signals or timeline built from a snapshot), so
//! the rules live here once, beside the diagnosis that relies on them, and the collector
//! only asks for what they name.

use std::collections::{BTreeMap, BTreeSet};

use crate::config::Thresholds;
use crate::model::graph::JobGraph;
use crate::model::snapshot::{BackpressureMeasure, VertexAggregate};

/// The vertices whose per-subtask detail the diagnosis needs, from the aggregates: culprit
/// candidates (not backpressured, downstream of a backpressured vertex; without a graph,
/// not backpressured and busy), vertices near capacity, the busiest vertex, and vertices
/// whose busy time is unknown in aggregate (legacy sources report NaN: it is inferred per
/// subtask; not when the reporter has no busy time at all, `measure`). Everything else is
/// judged by its aggregate.
pub fn detail_vertices(
    graph: Option<&JobGraph>,
    aggregates: &[VertexAggregate],
    t: &Thresholds,
    measure: BackpressureMeasure,
) -> Vec<String> {
    let red = |a: &VertexAggregate| a.backpressured_max.is_some_and(|p| p > t.backpressured_ratio);
    let by_id: BTreeMap<&str, &VertexAggregate> = aggregates.iter().map(|a| (a.vertex_id.as_str(), a)).collect();
    let mut out: BTreeSet<String> = BTreeSet::new();
    for a in aggregates {
        let candidate = if red(a) {
            false
        } else {
            match graph {
                Some(g) => g.upstream(&a.vertex_id).iter().any(|u| by_id.get(u).is_some_and(|ua| red(ua))),
                None => a.busy_max.is_some_and(|b| b >= t.busy_ratio),
            }
        };
        let near_capacity = a.busy_mean.is_some_and(|b| b >= t.near_capacity_utilisation);
        let unknown_busy = a.busy_max.is_none() && measure == BackpressureMeasure::TimeMsPerSecond;
        if candidate || near_capacity || unknown_busy {
            out.insert(a.vertex_id.clone());
        }
    }
    // Nothing backpressured: the sources are where the runbook looks (source-bound, an
    // async lookup chained with the source).
    if let Some(g) = graph.filter(|_| !aggregates.iter().any(red)) {
        out.extend(g.vertices.iter().filter(|v| g.is_source(&v.id)).map(|v| v.id.clone()));
    }
    if let Some(busiest) = aggregates
        .iter()
        .filter(|a| a.busy_mean.is_some())
        .max_by(|a, b| a.busy_mean.unwrap().total_cmp(&b.busy_mean.unwrap()))
    {
        out.insert(busiest.vertex_id.clone());
    }
    out.into_iter().collect()
}

/// The period of recurring onsets: the median spacing when there are at least two
/// spacings and they agree within a factor 1.5; `None` otherwise.
pub fn period_of(onsets: &[i64]) -> Option<i64> {
    let mut spacings: Vec<i64> = onsets.windows(2).map(|w| w[1] - w[0]).collect();
    if spacings.len() < 2 {
        return None;
    }
    spacings.sort_unstable();
    let (min, max) = (spacings[0], spacings[spacings.len() - 1]);
    (min > 0 && max as f64 <= 1.5 * min as f64).then(|| spacings[spacings.len() / 2])
}

/// The period of the job's backpressure from a job-wide max backpressured series
/// (`(t_ms, ms/s)` or ratio, with `threshold` in the same unit): the median spacing of its
/// onsets when they recur regularly (at least two spacings).
pub fn period_of_series(points: &[(i64, f64)], threshold: f64) -> Option<i64> {
    let onsets: Vec<i64> =
        points.windows(2).filter(|w| w[0].1 <= threshold && w[1].1 > threshold).map(|w| w[1].0).collect();
    period_of(&onsets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn onsets_recurring_regularly_have_a_period() {
        // Onsets at 0, 120, 245 s: spacings 120 and 125 s agree within 1.5×; the median
        // (upper middle of two) is 125 s.
        assert_eq!(period_of(&[0, 120_000, 245_000]), Some(125_000));
        // One spacing is not a pattern; spacings 60 and 200 s do not agree.
        assert_eq!(period_of(&[0, 120_000]), None);
        assert_eq!(period_of(&[0, 60_000, 260_000]), None);
    }

    #[test]
    fn a_job_wide_series_gives_the_period_of_its_onsets() {
        // Backpressured (> 100 ms/s) from 20–40 s, 80–100 s, 140–160 s: onsets at 20, 80
        // and 140 s, every 60 s.
        let points: Vec<(i64, f64)> =
            (0..36).map(|k| (k * 5000, if (k * 5 % 60) >= 20 && (k * 5 % 60) < 40 { 600.0 } else { 0.0 })).collect();
        assert_eq!(period_of_series(&points, 100.0), Some(60_000));
    }
}
