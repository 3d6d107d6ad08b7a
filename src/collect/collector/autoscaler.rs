//! The Flink Kubernetes Operator autoscaler's gauges of the plan's vertices
//! ([`crate::model::autoscaler`] says what the operator exports and how it is named), asked
//! in round 4 as ONE query whatever the job's size: the catalog's `autoscaler_*` names,
//! `jobVertexID` one of the plan's vertex ids, each series' value at the time the diagnosis
//! is about (a raw range query of one step keeps the metric names apart).

use std::collections::BTreeMap;

use super::rounds::Scope;
use crate::collect::query::{Query, QueryResult, ResultSeries, Selector};
use crate::model::autoscaler::{AutoscalerValue, AutoscalerVertex};
use crate::model::catalog::{MetricCatalog, labels as l};
use crate::model::graph::JobGraph;

/// Round 4's autoscaler answer, by name.
pub(super) const AUTOSCALER: &str = "autoscaler_vertices";

/// The plan's vertex ids: the `jobVertexID` values to ask for.
fn plan_ids(graph: Option<&JobGraph>) -> Vec<String> {
    graph.map(|g| g.vertices.iter().map(|v| v.id.clone()).collect()).unwrap_or_default()
}

/// The one autoscaler query for the plan's vertices; none without a plan to join by.
pub(super) fn autoscaler_query(s: &Scope<'_>, graph: Option<&JobGraph>) -> Option<(String, Query)> {
    ids_query(s, &plan_ids(graph))
}

fn ids_query(s: &Scope<'_>, vertex_ids: &[String]) -> Option<(String, Query)> {
    if vertex_ids.is_empty() {
        return None;
    }
    let c = s.cat;
    let names = [
        &c.autoscaler_parallelism,
        &c.autoscaler_recommended_parallelism,
        &c.autoscaler_true_processing_rate,
        &c.autoscaler_load,
    ];
    let selector = Selector::metrics(&names).with_one_of(l::JOB_VERTEX_ID, vertex_ids);
    Some((
        AUTOSCALER.to_string(),
        Query::Range { selector, aggregation: None, start_ms: s.at, end_ms: s.at, step_ms: s.step },
    ))
}

/// Which gauge a series is.
#[derive(Clone, Copy)]
enum Gauge {
    Parallelism,
    Recommended,
    TrueProcessingRate,
    Load,
}

fn gauge_of(cat: &MetricCatalog, name: &str) -> Option<Gauge> {
    [
        (&cat.autoscaler_parallelism, Gauge::Parallelism),
        (&cat.autoscaler_recommended_parallelism, Gauge::Recommended),
        (&cat.autoscaler_true_processing_rate, Gauge::TrueProcessingRate),
        (&cat.autoscaler_load, Gauge::Load),
    ]
    .into_iter()
    .find(|(n, _)| n.as_str() == name)
    .map(|(_, g)| g)
}

/// `<resourcens>/<resourcename>`, when the series carries them.
fn resource_of(s: &ResultSeries) -> Option<String> {
    let (ns, name) = (s.label(l::RESOURCE_NS), s.label(l::RESOURCE_NAME));
    (!name.is_empty()).then(|| if ns.is_empty() { name.to_string() } else { format!("{ns}/{name}") })
}

/// One entry per (resource, vertex) from the answer, sorted by vertex then resource. A
/// gauge seen twice (two operator replicas) keeps a number over NaN; series of another
/// vertex than asked, or of no gauge of the catalog, are left out. `None` when the query
/// was not asked.
pub(super) fn assemble_autoscaler(
    answer: Option<&QueryResult>,
    cat: &MetricCatalog,
    graph: Option<&JobGraph>,
) -> Option<Vec<AutoscalerVertex>> {
    assemble_for(answer, cat, &plan_ids(graph))
}

fn assemble_for(
    answer: Option<&QueryResult>,
    cat: &MetricCatalog,
    vertex_ids: &[String],
) -> Option<Vec<AutoscalerVertex>> {
    let answer = answer?;
    let mut out: BTreeMap<(String, Option<String>), AutoscalerVertex> = BTreeMap::new();
    for s in answer {
        let id = s.label(l::JOB_VERTEX_ID);
        let Some(gauge) = gauge_of(cat, s.label("__name__")) else { continue };
        if !vertex_ids.iter().any(|v| v == id) {
            continue;
        }
        let Some(v) = s.last_value() else { continue };
        let resource = resource_of(s);
        let entry = out.entry((id.to_string(), resource.clone())).or_insert_with(|| AutoscalerVertex {
            vertex_id: id.to_string(),
            resource,
            ..AutoscalerVertex::default()
        });
        let slot = match gauge {
            Gauge::Parallelism => &mut entry.parallelism,
            Gauge::Recommended => &mut entry.recommended_parallelism,
            Gauge::TrueProcessingRate => &mut entry.true_processing_rate,
            Gauge::Load => &mut entry.load,
        };
        let value = AutoscalerValue::of(v);
        if slot.is_none_or(|old| old.value().is_none()) {
            *slot = Some(value);
        }
    }
    Some(out.into_values().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::identity::SeriesScope;

    fn series(name: &str, vertex: &str, v: f64) -> ResultSeries {
        // The labels the operator's Prometheus reporter writes for a resource-scoped gauge
        // (metrics-logging.md, "Scope"): its pod's host, namespace and name, the resource's
        // namespace, name and type, and the key/value group's `jobVertexID`.
        let labels = [
            ("__name__", name),
            ("host", "10.0.3.17"),
            ("namespace", "flink-operator"),
            ("name", "flink-kubernetes-operator-7d9f8b6c5d-x2x9q"),
            ("resourcens", "payments"),
            ("resourcename", "fraud-detection"),
            ("resourcetype", "FlinkDeployment"),
            ("jobVertexID", vertex),
        ];
        ResultSeries {
            labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            points: vec![(300_000, v)],
        }
    }

    #[test]
    fn one_query_asks_for_every_vertex_by_its_id_whatever_the_jobs_size() {
        let cat = MetricCatalog::default();
        let series = SeriesScope::default();
        let s = super::super::rounds::test_scope(&cat, &series);
        assert!(ids_query(&s, &[]).is_none(), "no plan, nothing to join by");
        let ids: Vec<String> = (0..400).map(|i| format!("{i:032x}")).collect();
        let (name, q) = ids_query(&s, &ids).unwrap();
        assert_eq!(name, AUTOSCALER);
        let promql = q.to_promql();
        assert!(
            promql.contains(
                "flink_k8soperator_namespace_resource_AutoScaler_jobVertexID_RECOMMENDED_PARALLELISM_Current"
            ),
            "{promql}"
        );
        assert!(promql.contains(&format!("jobVertexID=~\"{}|", ids[0])) && promql.contains(&ids[399]), "{promql}");
        // A hostile id is escaped as every other one-of matcher is.
        let (_, q) = ids_query(&s, &["a.b|c\"".to_string()]).unwrap();
        assert!(q.to_promql().contains(r#"jobVertexID=~"a\\.b\\|c\"""#), "{}", q.to_promql());
    }

    #[test]
    fn the_vertices_are_read_from_the_operators_names_and_labels_and_nan_is_not_evaluated() {
        let cat = MetricCatalog::default();
        let (sink, merge) = ("e6ddb1d8804abf796b73b8fd261e7dde", "7365852fdcfced5670efa8fea5b7d853");
        let name = |m: &str| format!("flink_k8soperator_namespace_resource_AutoScaler_jobVertexID_{m}_Current");
        let answer = vec![
            series(&name("PARALLELISM"), sink, 4.0),
            series(&name("RECOMMENDED_PARALLELISM"), sink, 8.0),
            series(&name("TRUE_PROCESSING_RATE"), sink, 12_000.0),
            series(&name("LOAD"), sink, 0.92),
            series(&name("PARALLELISM"), merge, 6.0),
            series(&name("RECOMMENDED_PARALLELISM"), merge, f64::NAN),
            // Another vertex than asked: left out.
            series(&name("PARALLELISM"), "ffffffffffffffffffffffffffffffff", 2.0),
            // Not one of the catalog's gauges: left out.
            series(&name("LAG"), sink, 10.0),
        ];
        let ids = [sink.to_string(), merge.to_string()];
        let got = assemble_for(Some(&answer), &cat, &ids).unwrap();
        assert_eq!(got.len(), 2);
        let (m, s) = (&got[0], &got[1]);
        assert_eq!(s.vertex_id, sink);
        assert_eq!(s.resource.as_deref(), Some("payments/fraud-detection"));
        assert_eq!(s.parallelism, Some(AutoscalerValue::Value(4.0)));
        assert_eq!(s.recommended_parallelism, Some(AutoscalerValue::Value(8.0)));
        assert_eq!(s.true_processing_rate, Some(AutoscalerValue::Value(12_000.0)));
        assert_eq!(s.load, Some(AutoscalerValue::Value(0.92)));
        assert_eq!(m.recommended_parallelism, Some(AutoscalerValue::NotEvaluated));
        assert_eq!(m.true_processing_rate, None, "no series: unknown, not zero");
        // Asked and nothing found is an empty list; not asked is none.
        assert_eq!(assemble_for(Some(&Vec::new()), &cat, &ids), Some(Vec::new()));
        assert_eq!(assemble_for(None, &cat, &ids), None);
    }
}
