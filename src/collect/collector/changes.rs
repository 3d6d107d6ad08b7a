//! A rescale or restart inside the window, from the series: the run's latest (re)start
//! (its uptime reset, or its `numRestarts` / `numRescales` rose) and each vertex's subtasks
//! with samples just before it and at the end ([`RunChange::Rescaled`],
//! [`RunChange::Restarted`]).

use std::collections::BTreeMap;

use super::JobRun;
use super::rounds::Scope;
use crate::collect::query::{Agg, Aggregation, OverTime, Query, QueryResult};
use crate::model::catalog::labels as l;
use crate::model::snapshot::RunChange;

pub(super) const BEFORE: &str = "changes/subtasks_before";
pub(super) const AFTER: &str = "changes/subtasks_after";

/// When the run (re)started in `(since, at]` (the requested window and the warm-up before
/// it, whose averages reach into it): the latest of its
/// start by the uptime gauge (`job_start`) and the last rise of its restart or rescale
/// counters (`restarted`), when the run reported before it (`first_seen_ms` a step or more
/// earlier: else it is the run's own start, not a restart).
pub(super) fn changed_at(
    job_start: Option<i64>,
    restarted: Option<i64>,
    first_seen_ms: i64,
    since: i64,
    at: i64,
    step: i64,
) -> Option<i64> {
    let t = job_start.into_iter().chain(restarted).max()?;
    (t > since && t <= at && first_seen_ms <= t - step).then_some(t)
}

/// Per vertex, the subtasks with samples in the `recent_ms` before the change (`changed`,
/// counted at `before_ms`, [`counted_before`]) and before the end of the window: what a
/// rescale changed.
pub(super) fn change_queries(s: &Scope<'_>, before_ms: i64, recent_ms: i64) -> Vec<(String, Query)> {
    let count = |at_ms: i64| Query::OverTime {
        selector: s.job(s.presence_metric()),
        func: OverTime::Last,
        range_ms: recent_ms,
        at_ms,
        aggregation: Some(Aggregation::new(Agg::Count, &[l::TASK_ID, l::TASK_NAME])),
    };
    vec![(BEFORE.to_string(), count(before_ms)), (AFTER.to_string(), count(s.at))]
}

/// When to count the subtasks before the change at `changed`: the step before it (its own
/// scrape may already be of the new run), or, when the uptime reset then, the run's last
/// running sample before the reset: a restart leaves its tasks absent for its gap
/// (cancelling, rescheduling, restoring state), often longer than the lookback of the count.
pub(super) fn counted_before(run: &JobRun, changed: i64, step: i64) -> i64 {
    match run.before_start_ms {
        Some(before) if run.start_ms == Some(changed) => before.min(changed - step),
        _ => changed - step,
    }
}

/// The changes [`change_queries`]' answers show: a vertex whose number of subtasks differs
/// before and after `changed` was rescaled then; when none was, the job restarted. `name`
/// gives a vertex's name by id and reporter name.
pub(super) fn assemble_changes(
    before: &QueryResult,
    after: &QueryResult,
    changed: i64,
    name: impl Fn(&str, &str) -> String,
) -> Vec<RunChange> {
    let counts = |r: &QueryResult| -> BTreeMap<(String, String), u32> {
        r.iter()
            .filter_map(|s| {
                let n = s.last_value().filter(|v| v.is_finite() && *v >= 1.0)?;
                Some(((s.label(l::TASK_ID).to_string(), s.label(l::TASK_NAME).to_string()), n as u32))
            })
            .collect()
    };
    let (before, after) = (counts(before), counts(after));
    let rescaled: Vec<RunChange> = before
        .iter()
        .filter_map(|((id, label), &from)| {
            let to = after.iter().find(|((a, _), _)| a == id).map(|(_, &n)| n)?;
            (to != from).then(|| RunChange::Rescaled {
                vertex_id: id.clone(),
                vertex: name(id, label),
                at_ms: changed,
                from,
                to,
            })
        })
        .collect();
    if rescaled.is_empty() && !before.is_empty() && !after.is_empty() {
        return vec![RunChange::Restarted { at_ms: changed }];
    }
    rescaled
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::query::ResultSeries;

    fn counts(rows: &[(&str, f64)]) -> QueryResult {
        rows.iter()
            .map(|(id, n)| ResultSeries {
                labels: [(l::TASK_ID.to_string(), id.to_string()), (l::TASK_NAME.to_string(), format!("v_{id}"))]
                    .into(),
                points: vec![(0, *n)],
            })
            .collect()
    }

    #[test]
    fn a_vertex_with_fewer_subtasks_after_the_change_was_rescaled_then() {
        // Sink 4 → 2 subtasks, source 4 → 4: one rescale, of the sink.
        let changes = assemble_changes(
            &counts(&[("src", 4.0), ("sink", 4.0)]),
            &counts(&[("src", 4.0), ("sink", 2.0)]),
            1_000,
            |id, _| format!("Vertex {id}"),
        );
        assert_eq!(
            changes,
            [RunChange::Rescaled {
                vertex_id: "sink".into(),
                vertex: "Vertex sink".into(),
                at_ms: 1_000,
                from: 4,
                to: 2
            }]
        );
    }

    #[test]
    fn the_same_subtasks_before_and_after_is_a_restart_and_no_data_before_is_nothing() {
        let same = counts(&[("src", 2.0)]);
        assert_eq!(assemble_changes(&same, &same, 5, |i, _| i.into()), [RunChange::Restarted { at_ms: 5 }]);
        assert!(assemble_changes(&Vec::new(), &same, 5, |i, _| i.into()).is_empty());
    }

    #[test]
    fn the_subtasks_before_a_restart_are_counted_at_its_last_running_sample_however_long_the_gap() {
        let mut run = JobRun {
            id: "a".into(),
            name_label: "j".into(),
            last_seen_ms: 600_000,
            sampled_at_ms: 600_000,
            scrape_interval_ms: Some(5_000),
            start_ms: Some(320_000),
            first_seen_ms: 0,
            not_running_now: false,
            before_start_ms: Some(295_000),
            labels: BTreeMap::new(),
        };
        // The uptime reset at 300 s and became positive at 320 s: counted at 295 s.
        assert_eq!(counted_before(&run, 320_000, 5_000), 295_000);
        // A change the counters show (not the uptime's start), or no running sample before
        // the start: the step before it.
        assert_eq!(counted_before(&run, 400_000, 5_000), 395_000);
        run.before_start_ms = None;
        assert_eq!(counted_before(&run, 320_000, 5_000), 315_000);
    }

    #[test]
    fn a_start_is_a_change_only_when_the_run_reported_before_it_inside_the_window() {
        // The run was seen from 0; it restarted at 200 s, inside (100 s, 300 s].
        assert_eq!(changed_at(Some(200_000), None, 0, 100_000, 300_000, 5_000), Some(200_000));
        // The counters' rise wins when later than the uptime's start.
        assert_eq!(changed_at(Some(50_000), Some(250_000), 0, 100_000, 300_000, 5_000), Some(250_000));
        // Its first sample is its start: a new run, not a restart.
        assert_eq!(changed_at(Some(200_000), None, 199_000, 100_000, 300_000, 5_000), None);
        // Before the window.
        assert_eq!(changed_at(Some(90_000), None, 0, 100_000, 300_000, 5_000), None);
    }
}
