//! A rescale or restart inside the window, from the series: the run's latest (re)start
//! (its uptime reset, or its `numRestarts` / `numRescales` rose) and each vertex's subtasks
//! with samples just before it and at the end ([`RunChange::Rescaled`],
//! [`RunChange::Restarted`]).

use std::collections::BTreeMap;

use super::JobRun;
use super::rounds::Scope;
use crate::collect::query::{Agg, Aggregation, OverTime, Query, QueryResult};
use crate::model::catalog::labels as l;
use crate::model::rescales::{RescaleEntry, RescaleHistory};
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
                by: None,
            })
        })
        .collect();
    if rescaled.is_empty() && !before.is_empty() && !after.is_empty() {
        return vec![RunChange::Restarted { at_ms: changed }];
    }
    rescaled
}

/// How far from a rescale of Flink's history (its start to its end) the series may place
/// the same rescale: the uptime reset or counter rise is seen a scrape or two late, and the
/// restart of the rescaled tasks follows the end of the scheduler's rescale by seconds.
pub(super) const HISTORY_JOIN_TOLERANCE_MS: i64 = 30_000;

/// The changes with Flink's rescale history taken in: each rescale of the history that
/// ended (or began) in `(since, at]`, other than the job's first schedule, is joined with
/// the series' [`RunChange::Rescaled`] (or [`RunChange::Restarted`]) it explains, within
/// `tolerance_ms` (plus `step`) of its span, so that one rescale is named once: a
/// `Rescaled` gains the history's cause (`by`), a `Restarted` becomes the
/// [`RunChange::SchedulerRescale`] it was. An attempt that did not complete (failed,
/// ignored), and a rescale the series do not show, is a `SchedulerRescale` of its own.
pub(super) fn join_history(
    mut changes: Vec<RunChange>,
    history: Option<&RescaleHistory>,
    since: i64,
    at: i64,
    step: i64,
    tolerance_ms: i64,
) -> Vec<RunChange> {
    let Some(history) = history else { return changes };
    let mut entries: Vec<&RescaleEntry> =
        history.entries.iter().filter(|e| !e.is_initial_schedule() && e.at_ms() > since && e.at_ms() <= at).collect();
    entries.sort_by_key(|e| (e.at_ms(), e.attempt));
    let slack = tolerance_ms + step;
    let mut added = Vec::new();
    for e in entries {
        let near = |t: i64| t >= e.start_ms - slack && t <= e.at_ms() + slack;
        let changed: Vec<(String, u32, u32)> = e
            .vertices
            .iter()
            .filter_map(|v| Some((v.vertex.clone(), v.from?, v.to?)).filter(|(_, f, t)| f != t))
            .collect();
        let mut joined = false;
        if e.cause.completed() {
            for c in changes.iter_mut() {
                match c {
                    RunChange::Rescaled { at_ms, by, .. } if by.is_none() && near(*at_ms) => {
                        *by = Some(Box::new(e.cause.clone()));
                        joined = true;
                    }
                    RunChange::Restarted { at_ms } if near(*at_ms) => {
                        *c = RunChange::SchedulerRescale {
                            at_ms: *at_ms,
                            cause: Box::new(e.cause.clone()),
                            vertices: changed.clone(),
                        };
                        joined = true;
                    }
                    _ => {}
                }
            }
        }
        if !joined {
            added.push(RunChange::SchedulerRescale {
                at_ms: e.at_ms(),
                cause: Box::new(e.cause.clone()),
                vertices: changed,
            });
        }
    }
    changes.extend(added);
    changes
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
                to: 2,
                by: None
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

    fn entry(start_ms: i64, end_ms: i64, trigger: &str, state: &str, reason: &str) -> RescaleEntry {
        RescaleEntry {
            uuid: None,
            attempt: 1,
            start_ms,
            end_ms: Some(end_ms),
            cause: crate::model::rescales::RescaleCause {
                trigger: Some(trigger.into()),
                terminal_state: Some(state.into()),
                terminated_reason: Some(reason.into()),
            },
            vertices: Vec::new(),
        }
    }

    fn sink_cut(at_ms: i64) -> RunChange {
        RunChange::Rescaled { vertex_id: "sink".into(), vertex: "Sink".into(), at_ms, from: 4, to: 2, by: None }
    }

    #[test]
    fn a_rescale_the_series_and_the_history_both_show_is_named_once_with_its_cause() {
        // The lab's run: the history's rescale ran 196.263 s → 218.639 s (of 1796304 000 s),
        // the series saw the restart at 225.905 s: 7.266 s after its end, inside 30 s + a
        // 5 s step.
        let history = RescaleHistory {
            entries: vec![
                entry(1_796_304_196_263, 1_796_304_218_639, "UPDATE_REQUIREMENT", "COMPLETED", "SUCCEEDED"),
                entry(1_796_304_141_219, 1_796_304_142_114, "INITIAL_SCHEDULE", "COMPLETED", "SUCCEEDED"),
            ],
        };
        let changes = join_history(
            vec![sink_cut(1_796_304_225_905)],
            Some(&history),
            1_796_304_100_000,
            1_796_304_300_000,
            5_000,
            HISTORY_JOIN_TOLERANCE_MS,
        );
        assert_eq!(changes.len(), 1, "one rescale, named once; the first schedule is no change: {changes:?}");
        match &changes[0] {
            RunChange::Rescaled { by: Some(by), from: 4, to: 2, .. } => {
                assert_eq!(by.trigger.as_deref(), Some("UPDATE_REQUIREMENT"))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_attempt_that_failed_or_a_rescale_far_from_the_series_change_is_named_on_its_own() {
        let history = RescaleHistory {
            entries: vec![
                // Failed at 200 s, next to the series' rescale at 205 s: not joined (it did
                // not take effect).
                entry(190_000, 200_000, "NEW_RESOURCE_AVAILABLE", "FAILED", "EXCEPTION_OCCURRED"),
                // Completed at 100 s: 105 s before the series' change, beyond 30 s + 5 s.
                entry(99_000, 100_000, "UPDATE_REQUIREMENT", "COMPLETED", "SUCCEEDED"),
                // Ended before the window (since = 50 s).
                entry(10_000, 20_000, "UPDATE_REQUIREMENT", "IGNORED", "NO_RESOURCES_OR_PARALLELISMS_CHANGE"),
            ],
        };
        let changes = join_history(vec![sink_cut(205_000)], Some(&history), 50_000, 300_000, 5_000, 30_000);
        assert_eq!(changes.len(), 3, "{changes:?}");
        assert!(matches!(&changes[0], RunChange::Rescaled { by: None, .. }));
        // Oldest first after the series' changes: the completed one at 100 s, the failed at 200 s.
        assert!(matches!(&changes[1], RunChange::SchedulerRescale { at_ms: 100_000, cause, .. } if cause.completed()));
        assert!(
            matches!(&changes[2], RunChange::SchedulerRescale { at_ms: 200_000, cause, .. } if cause.terminal_state.as_deref() == Some("FAILED"))
        );
    }

    #[test]
    fn a_restart_the_history_explains_becomes_the_schedulers_rescale_and_no_history_changes_nothing() {
        let mut e = entry(100_000, 110_000, "RECOVERABLE_FAILOVER", "COMPLETED", "SUCCEEDED");
        e.vertices = vec![crate::model::rescales::VertexRescale {
            vertex_id: "v".into(),
            vertex: "map".into(),
            from: Some(4),
            to: Some(3),
        }];
        let history = RescaleHistory { entries: vec![e] };
        let restarted = vec![RunChange::Restarted { at_ms: 115_000 }];
        let changes = join_history(restarted.clone(), Some(&history), 0, 200_000, 5_000, 30_000);
        assert_eq!(
            changes,
            [RunChange::SchedulerRescale {
                at_ms: 115_000,
                cause: Box::new(history.entries[0].cause.clone()),
                vertices: vec![("map".into(), 4, 3)]
            }]
        );
        assert_eq!(join_history(restarted.clone(), None, 0, 200_000, 5_000, 30_000), restarted);
    }
}
