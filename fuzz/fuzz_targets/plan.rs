//! The Flink job plan reader (`GET /jobs/:id/plan`, or a plan file given with --plan or
//! `[flink.plans]`): parse, then walk the graph as the diagnosis does. Must never panic.
#![no_main]

use culprit::model::graph::JobGraph;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(graph) = JobGraph::from_plan_json(text) else { return };
    assert!(!graph.vertices.is_empty());
    for v in &graph.vertices {
        assert!(graph.vertex(&v.id).is_some());
        for up in graph.upstream(&v.id) {
            assert!(graph.vertex(up).is_some(), "{} has an upstream vertex {up} that is not in the graph", v.id);
        }
        for down in graph.downstream(&v.id) {
            assert!(graph.vertex(down).is_some());
        }
        let _ = graph.inputs(&v.id).count();
        let _ = (graph.is_source(&v.id), graph.is_sink(&v.id), graph.has_keyed_input(&v.id));
        let region = graph.upstream_region(&v.id, |_| true);
        assert!(region.iter().all(|id| graph.vertex(id).is_some()));
    }
});
