//! Whether a job plan is the diagnosed job's, and whether the metrics cover it.

use std::collections::BTreeSet;

use super::JobRun;
use crate::model::graph::{JobGraph, same_name};
use crate::model::snapshot::{RunChange, VertexAggregate};
/// A vertex the run runs with another parallelism than its plan's: name, the plan's and the
/// run's (reporting) parallelism.
pub(super) type Resized = (String, u32, u32);

/// A plan of another job (its vertex ids are hashes of the topology) shares no vertex
/// with the metrics: diagnosing with it would name vertices the job does not have. Returns
/// the graph to diagnose with (none when the plan is not this job's) and why it was
/// refused; notes say what was noticed.
///
/// `replaced`: the job id of the run the request named, when it stopped and `run` took
/// over from it. Its plan (the alert's) is then used only when its vertices are those of
/// `run`; when they are not, the diagnosis goes on without it (a note says why): the user
/// asked about the job, not about that plan.
///
/// A plan of another run (a redeploy), or fetched before a rescale inside the window
/// (`rescaled`: the changes seen, [`RunChange::Rescaled`] in the series or a completed
/// [`RunChange::SchedulerRescale`] of Flink's rescale history), may give a vertex a parallelism
/// the run no longer has: the number of subtasks reporting then is the run's parallelism,
/// said so (the third answer: each vertex's name, the plan's and the run's parallelism),
/// not data that did not arrive.
pub(super) fn check_plan(
    graph: Option<JobGraph>,
    run: &JobRun,
    replaced: Option<&str>,
    vertex_aggregates: &[VertexAggregate],
    rescaled: &[RunChange],
    notes: &mut Vec<String>,
) -> (Option<JobGraph>, Option<String>, Vec<Resized>) {
    let Some(mut g) = graph else { return (None, None, Vec::new()) };
    let known = vertex_aggregates.iter().filter(|a| g.vertex(&a.vertex_id).is_some()).count();
    let plan_label = g.job_name.clone().or_else(|| g.job_id.clone()).unwrap_or_else(|| "unnamed".into());
    // Jobs built from one topology share vertex ids, so a matching id alone does not
    // prove the plan is this job's. A plan of another job id is used only when it is
    // another run of the same job (same name) with exactly the vertices the metrics
    // show; a redeploy with a changed topology would mislabel or drop vertices.
    let other_id = g.job_id.as_deref().is_some_and(|id| id != run.id);
    let other_name =
        g.job_name.as_deref().is_some_and(|n| !run.name_label.is_empty() && !same_name(n, &run.name_label));
    let plan_ids: BTreeSet<&str> = g.vertices.iter().map(|v| v.id.as_str()).collect();
    let metric_ids: BTreeSet<&str> = vertex_aggregates.iter().map(|a| a.vertex_id.as_str()).collect();
    let plan_id = g.job_id.clone().unwrap_or_default();
    let why = if !vertex_aggregates.is_empty() && known == 0 {
        Some(format!("the job plan ({plan_label}) shares no vertex with the metrics of job_id {}", run.id))
    } else if other_id && other_name {
        Some(format!(
            "the job plan is of job {plan_label} ({plan_id}), not of the diagnosed job {} ({})",
            run.name_label, run.id
        ))
    } else if other_id && !metric_ids.is_empty() && plan_ids != metric_ids {
        Some(format!(
            "the job plan is of another run of {plan_label} (job_id {plan_id}) whose vertices differ from those of job_id {} ({} in the plan, {} with metrics): the topology changed",
            run.id,
            plan_ids.len(),
            metric_ids.len()
        ))
    } else {
        None
    };
    if let Some(why) = why {
        notes.push(format!("{why}; diagnosing without the job graph"));
        let of_replaced = g.job_id.is_some() && g.job_id.as_deref() == replaced;
        return (None, (!of_replaced).then_some(why), Vec::new());
    }
    let resized = resize(&mut g, other_id, vertex_aggregates, rescaled);
    if other_id {
        let changed: Vec<String> = resized.iter().map(|(v, from, to)| format!("{v} {from} → {to}")).collect();
        notes.push(format!(
            "the job plan is of job_id {plan_id}, another run of {plan_label} with the same vertices{}; the metrics are of job_id {}",
            if changed.is_empty() {
                String::new()
            } else {
                format!(" and another parallelism ({}: the subtasks reporting are this run's)", changed.join(", "))
            },
            run.id
        ));
    }
    for a in vertex_aggregates {
        if let Some(v) = g.vertex(&a.vertex_id)
            && a.subtask_count > v.parallelism
        {
            notes.push(format!(
                "{} reports {} subtasks but the job plan says parallelism {}: the plan is not of this run",
                v.name, a.subtask_count, v.parallelism
            ));
        }
    }
    notes.extend(incomplete_note(&g, vertex_aggregates));
    (Some(g), None, resized)
}

/// Sets the parallelism of the plan's vertices to the number of subtasks reporting where a
/// change explains the difference: the plan is of another run (`other_run`), or the vertex
/// was rescaled to that number inside the window (seen in the series or in Flink's rescale
/// history). Returns each vertex changed with the
/// plan's and the run's parallelism.
fn resize(
    g: &mut JobGraph,
    other_run: bool,
    vertex_aggregates: &[VertexAggregate],
    rescaled: &[RunChange],
) -> Vec<Resized> {
    let mut resized = Vec::new();
    for v in &mut g.vertices {
        let Some(a) = vertex_aggregates.iter().find(|a| a.vertex_id == v.id) else { continue };
        let explained = other_run
            || rescaled.iter().any(|c| match c {
                RunChange::Rescaled { vertex_id, to, .. } => *vertex_id == v.id && *to == a.subtask_count,
                RunChange::SchedulerRescale { cause, vertices, .. } => {
                    cause.completed() && vertices.iter().any(|(n, _, to)| *n == v.name && *to == a.subtask_count)
                }
                RunChange::Replaced { .. } | RunChange::Stopped { .. } | RunChange::Restarted { .. } => false,
            });
        if explained && a.subtask_count >= 1 && a.subtask_count != v.parallelism {
            resized.push((v.name.clone(), v.parallelism, a.subtask_count));
            v.parallelism = a.subtask_count;
        }
    }
    resized
}

/// Vertices the plan names that the metrics show in part or not at all: fewer subtasks
/// than its parallelism, or none while other vertices have metrics. Every running subtask
/// reports its task metrics, so this is data that did not arrive (a partial answer from
/// Thanos or Mimir, a store that timed out, TaskManagers not scraped), said as such.
pub(super) fn incomplete_note(g: &JobGraph, vertex_aggregates: &[VertexAggregate]) -> Option<String> {
    if vertex_aggregates.is_empty() {
        return None;
    }
    let items: Vec<String> = g
        .vertices
        .iter()
        .filter_map(|v| match vertex_aggregates.iter().find(|a| a.vertex_id == v.id) {
            None => Some(format!("{} has no task metrics", v.name)),
            Some(a) if a.subtask_count < v.parallelism => Some(format!(
                "{} reports {} of the {} subtasks of its parallelism in the job plan",
                v.name, a.subtask_count, v.parallelism
            )),
            Some(_) => None,
        })
        .collect();
    (!items.is_empty()).then(|| {
        format!(
            "The data may be incomplete: {}. The metric store's answer may have been partial (a Thanos or Mimir partial response, a store or querier that timed out) or some TaskManagers are not scraped; the verdict rests on what arrived",
            crate::render::words::numbers::limited_list(&items, 5)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::graph::JobGraph;

    #[test]
    fn only_a_rescale_to_the_count_reporting_of_either_record_or_another_runs_plan_replaces_the_plans_parallelism() {
        let plan = r#"{"jid":"j","name":"job","plan":{"nodes":[
            {"id":"sink","parallelism":4,"description":"Sink<br/>","inputs":[{"id":"src","ship_strategy":"REBALANCE"}]},
            {"id":"src","parallelism":4,"description":"Source<br/>"}]}}"#;
        let g = JobGraph::from_plan_json(plan).expect("plan");
        let agg = |id: &str, n: u32| -> VertexAggregate {
            serde_json::from_value(serde_json::json!({"vertex_id": id, "task_name": id, "subtask_count": n}))
                .expect("aggregate")
        };
        let aggs = [agg("src", 4), agg("sink", 2)];
        let cut =
            RunChange::Rescaled { vertex_id: "sink".into(), vertex: "Sink".into(), at_ms: 0, from: 4, to: 2, by: None };
        // The sink was rescaled 4 → 2 and 2 report: the plan takes 2.
        let mut rescaled = g.clone();
        assert_eq!(resize(&mut rescaled, false, &aggs, std::slice::from_ref(&cut)), [("Sink".to_string(), 4, 2)]);
        assert_eq!(rescaled.vertex("sink").map(|v| v.parallelism), Some(2));
        assert!(incomplete_note(&rescaled, &aggs).is_none());
        // No change explains the 2 of 4: data missing, said so.
        let mut unexplained = g.clone();
        assert!(resize(&mut unexplained, false, &aggs, &[]).is_empty());
        assert!(
            incomplete_note(&unexplained, &aggs)
                .is_some_and(|n| n.contains("reports 2 of the 4 subtasks of its parallelism in the job plan"))
        );
        // A rescale only Flink's rescale history holds (the series missed it) explains the
        // 2 as well; one that failed does not.
        let by_scheduler = |state: &str| RunChange::SchedulerRescale {
            at_ms: 0,
            cause: Box::new(crate::model::rescales::RescaleCause {
                trigger: Some("UPDATE_REQUIREMENT".into()),
                terminal_state: Some(state.into()),
                terminated_reason: None,
            }),
            vertices: vec![("Sink".into(), 4, 2)],
        };
        let mut from_history = g.clone();
        assert_eq!(resize(&mut from_history, false, &aggs, &[by_scheduler("COMPLETED")]), [("Sink".to_string(), 4, 2)]);
        assert!(resize(&mut g.clone(), false, &aggs, &[by_scheduler("FAILED")]).is_empty());
        // The plan of another run: the count reporting is this run's.
        let mut other = g;
        assert_eq!(resize(&mut other, true, &aggs, &[]).len(), 1);
    }
}
