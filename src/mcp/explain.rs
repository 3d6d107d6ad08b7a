//! One vertex of a verdict explained: its numbers, its place in the graph, the runbook
//! steps that judged it and the PromQL behind each number. Read from the verdict alone
//! (pure): the same verdict always explains the same way.

use serde::Serialize;

use crate::model::verdict::{Evidence, GraphVertex, JobRef, Step, TimelineVertex, Verdict, VertexState};

/// The explanation of one vertex (`explain_vertex`'s structured output).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct VertexExplanation {
    pub job: JobRef,
    /// The time of the verdict, RFC 3339.
    pub at: String,
    /// The stored verdict explained; absent when it was diagnosed for this call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict_id: Option<i64>,
    /// The vertex as the verdict's graph shows it: parallelism, max busy and
    /// backpressured ratios over its subtasks, mean idle ratio, and its state.
    pub vertex: GraphVertex,
    /// What its state means in this verdict, in one sentence.
    pub role: String,
    /// The vertices feeding it and fed by it (names), from the job plan.
    pub upstream: Vec<String>,
    pub downstream: Vec<String>,
    /// Its share of the window's samples as the bottleneck and as backpressured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeline: Option<TimelineVertex>,
    /// The numbers about it (the vertex or one of its subtasks, `name[3]`), each with
    /// the threshold it was judged by and the PromQL that gives it (`query`).
    pub evidence: Vec<Evidence>,
    /// The runbook steps that judged it: those naming it and, for the culprit, every step
    /// that hit.
    pub steps: Vec<Step>,
    /// For the culprit: the finding and its fix.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finding: Option<String>,
    pub fix: Vec<String>,
}

/// Why no vertex was explained: the vertex names and ids the verdict has.
pub fn vertex_names(verdict: &Verdict) -> Vec<String> {
    verdict.graph.vertices.iter().map(|v| format!("{} (id {})", v.name, v.id)).collect()
}

/// The vertex of `verdict` whose id or name is `wanted` (names compared without case),
/// explained; `None` when it has none.
pub fn explain(verdict: &Verdict, wanted: &str, verdict_id: Option<i64>) -> Option<VertexExplanation> {
    let w = wanted.trim();
    let vertex = verdict
        .graph
        .vertices
        .iter()
        .find(|v| v.id == w || v.name == w)
        .or_else(|| verdict.graph.vertices.iter().find(|v| v.name.eq_ignore_ascii_case(w)))?
        .clone();
    let name_of = |id: &str| {
        verdict.graph.vertices.iter().find(|v| v.id == id).map(|v| v.name.clone()).unwrap_or_else(|| id.to_string())
    };
    let edges = &verdict.graph.edges;
    let upstream = edges.iter().filter(|e| e.to == vertex.id).map(|e| name_of(&e.from)).collect();
    let downstream = edges.iter().filter(|e| e.from == vertex.id).map(|e| name_of(&e.to)).collect();
    let about = |subject: &str| {
        subject == vertex.name || subject.strip_prefix(vertex.name.as_str()).is_some_and(|r| r.starts_with('['))
    };
    let evidence = verdict.evidence.iter().filter(|e| about(&e.subject)).cloned().collect();
    let is_culprit = verdict.culprits.iter().any(|c| c.vertex_id == vertex.id)
        || verdict.culprit.as_ref().is_some_and(|c| c.vertex_id == vertex.id);
    let steps = verdict
        .steps
        .iter()
        .filter(|s| s.detail.contains(&vertex.name) || (is_culprit && s.outcome == crate::model::verdict::Outcome::Hit))
        .cloned()
        .collect();
    let timeline = verdict.timeline.as_ref().and_then(|t| t.vertices.iter().find(|v| v.id == vertex.id).cloned());
    Some(VertexExplanation {
        job: verdict.job.clone(),
        at: verdict.at.clone(),
        verdict_id,
        role: role(&vertex, is_culprit, verdict),
        upstream,
        downstream,
        timeline,
        evidence,
        steps,
        finding: is_culprit.then(|| verdict.finding.as_str().to_string()),
        fix: if is_culprit { verdict.fix.clone() } else { Vec::new() },
        vertex,
    })
}

/// What the vertex's state means.
fn role(vertex: &GraphVertex, is_culprit: bool, verdict: &Verdict) -> String {
    let culprit = verdict.culprit.as_ref().map(|c| c.vertex_name.as_str());
    match (is_culprit, vertex.state, culprit) {
        (true, _, _) => format!(
            "the culprit: busy by itself and not backpressured while what feeds it is; finding `{}`",
            verdict.finding.as_str()
        ),
        (false, VertexState::Backpressured, Some(c)) => format!(
            "a victim: backpressured because a vertex downstream ({c}) cannot keep up; scaling or fixing this vertex does not help"
        ),
        (false, VertexState::Backpressured, None) => {
            "backpressured, with no single culprit found downstream".to_string()
        }
        (false, VertexState::Ok | VertexState::Culprit, _) => {
            "healthy: neither the bottleneck nor held back by it".to_string()
        }
        (false, VertexState::Unknown, _) => "unknown: its busy and backpressured metrics were missing".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slow_sink() -> Verdict {
        crate::samples::capture_verdict("slow-sink")
    }

    #[test]
    fn the_culprit_is_explained_with_its_numbers_its_hit_steps_their_promql_and_its_fix() {
        let v = slow_sink();
        let e = explain(&v, "slow-sink: Writer", Some(7)).expect("the sink is a vertex");
        assert_eq!(e.vertex.state, VertexState::Culprit);
        assert_eq!(e.verdict_id, Some(7));
        assert_eq!(e.finding.as_deref(), Some("sink"));
        assert!(!e.fix.is_empty());
        assert_eq!(e.upstream, vec!["fraud-score".to_string()]);
        assert!(e.downstream.is_empty(), "a sink feeds nothing");
        // locate and sink hit; both name the vertex.
        let steps: Vec<&str> = e.steps.iter().map(|s| s.step.as_str()).collect();
        assert_eq!(steps, ["locate", "sink"]);
        assert!(e.evidence.iter().all(|x| x.subject.starts_with("slow-sink: Writer")));
        let busy = e.evidence.iter().find(|x| x.metric == "busyTimeMsPerSecond").expect("busy evidence");
        assert!(busy.query.as_deref().is_some_and(|q| q.contains("busyTimeMsPerSecond")), "{busy:?}");
    }

    #[test]
    fn a_victim_upstream_is_told_apart_from_the_culprit_and_gets_no_fix() {
        let v = slow_sink();
        // By id as well as by name, and names without case.
        let id = v.graph.vertices.iter().find(|x| x.name == "parse").unwrap().id.clone();
        let e = explain(&v, &id, None).unwrap();
        assert_eq!(explain(&v, "PARSE", None).unwrap().vertex.id, id);
        assert_eq!(e.vertex.state, VertexState::Backpressured);
        assert!(e.role.starts_with("a victim"), "{}", e.role);
        assert!(e.role.contains("slow-sink: Writer"));
        assert!(e.fix.is_empty() && e.finding.is_none());
        // Only locate names parse; its backpressure evidence (0.8637) comes with its query.
        assert_eq!(e.steps.iter().map(|s| s.step.as_str()).collect::<Vec<_>>(), ["locate"]);
        let bp = e.evidence.iter().find(|x| x.metric == "backPressuredTimeMsPerSecond").unwrap();
        assert!(bp.value > 0.5 && bp.query.is_some(), "{bp:?}");
    }

    #[test]
    fn an_unknown_vertex_explains_nothing_and_the_names_say_what_there_is() {
        let v = slow_sink();
        assert!(explain(&v, "no-such-vertex", None).is_none());
        assert!(vertex_names(&v).iter().any(|n| n.starts_with("fraud-score (id ")));
    }
}
