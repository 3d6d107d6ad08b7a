//! The job graph: Flink's job vertices (operator chains) and the edges between them, read
//! from the JSON of `GET /jobs/:id/plan` (with or without the `{"plan": …}` wrapper).
//!
//! Metrics join the graph by vertex id: the Prometheus label `task_id` is the plan's
//! `nodes[].id`. Names are never used to join (the reporter rewrites them).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// A job vertex: one operator chain run by `parallelism` subtasks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Vertex {
    /// Plan node id = Prometheus `task_id` (32 hex digits).
    pub id: String,
    /// Display name: the chained operator names joined by ` -> `.
    pub name: String,
    /// The operators chained into this vertex, in chain order (from the plan's description).
    pub operators: Vec<String>,
    /// Number of subtasks.
    pub parallelism: u32,
}

/// An edge from an upstream vertex to a downstream vertex.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Edge {
    pub from: String,
    pub to: String,
    /// Flink ship strategy as the plan writes it: `FORWARD`, `HASH` (a keyBy), `REBALANCE`,
    /// `RESCALE`, `BROADCAST`, …
    pub ship_strategy: String,
}

/// The job graph, vertices in topological order (sources first).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobGraph {
    /// Job id from the plan (`jid`), when the plan carries it.
    pub job_id: Option<String>,
    /// Job name as Flink shows it (`name`), when the plan carries it.
    pub job_name: Option<String>,
    pub vertices: Vec<Vertex>,
    pub edges: Vec<Edge>,
}

/// A plan that cannot be used; the message is one sentence.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct PlanError(pub String);

#[derive(Deserialize)]
struct WirePlan {
    jid: Option<String>,
    name: Option<String>,
    nodes: Vec<WireNode>,
}

#[derive(Deserialize)]
struct WireNode {
    id: String,
    #[serde(default)]
    parallelism: Option<i64>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    operator: Option<String>,
    #[serde(default)]
    inputs: Vec<WireInput>,
}

#[derive(Deserialize)]
struct WireInput {
    id: String,
    #[serde(default)]
    ship_strategy: Option<String>,
}

impl JobGraph {
    /// Parses the JSON answer of `GET /jobs/:id/plan`, or the bare plan object inside it.
    ///
    /// Errors: not JSON, no `nodes`, duplicate node ids, an input that names no node, or a
    /// cycle.
    pub fn from_plan_json(text: &str) -> Result<JobGraph, PlanError> {
        let value: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| PlanError(format!("not a Flink job plan: {}", crate::model::foreign::json_error(&e))))?;
        let inner = match value.get("plan") {
            Some(plan) if plan.is_object() => plan.clone(),
            _ => value,
        };
        let wire: WirePlan = serde_json::from_value(inner)
            // serde_json's message would quote the offending value; from a `Value` it knows no
            // line either: say what was expected.
            .map_err(|_| PlanError("not a Flink job plan (expected `nodes` with `id`s)".to_string()))?;
        Self::from_wire(wire)
    }

    fn from_wire(wire: WirePlan) -> Result<JobGraph, PlanError> {
        if wire.nodes.is_empty() {
            return Err(PlanError("the job plan has no nodes".into()));
        }
        let mut vertices: BTreeMap<String, Vertex> = BTreeMap::new();
        let mut edges: Vec<Edge> = Vec::new();
        for node in &wire.nodes {
            let operators =
                operators_from_description(node.description.as_deref().or(node.operator.as_deref()).unwrap_or(""));
            let operators = if operators.is_empty() { vec![node.id.clone()] } else { operators };
            let vertex = Vertex {
                id: node.id.clone(),
                name: operators.join(" -> "),
                operators,
                parallelism: node.parallelism.unwrap_or(1).max(1) as u32,
            };
            if vertices.insert(node.id.clone(), vertex).is_some() {
                return Err(PlanError(format!("the job plan lists node {} twice", node.id)));
            }
            for input in &node.inputs {
                edges.push(Edge {
                    from: input.id.clone(),
                    to: node.id.clone(),
                    ship_strategy: input.ship_strategy.clone().unwrap_or_else(|| "UNKNOWN".into()),
                });
            }
        }
        for edge in &edges {
            if !vertices.contains_key(&edge.from) {
                return Err(PlanError(format!("node {} has an input {} that is not in the plan", edge.to, edge.from)));
            }
        }
        let order = topological_order(vertices.keys().map(String::as_str), &edges)?;
        // Edges in the order of their ends, so the graph is the same however the plan
        // listed its nodes.
        let position: BTreeMap<&str, usize> = order.iter().enumerate().map(|(i, id)| (id.as_str(), i)).collect();
        edges.sort_by_key(|e| (position[e.from.as_str()], position[e.to.as_str()]));
        let vertices = order.into_iter().map(|id| vertices.remove(&id).expect("id from the same map")).collect();
        Ok(JobGraph { job_id: wire.jid, job_name: wire.name, vertices, edges })
    }

    /// The vertex with this id.
    pub fn vertex(&self, id: &str) -> Option<&Vertex> {
        self.vertices.iter().find(|v| v.id == id)
    }

    /// Direct upstream vertex ids of `id`.
    pub fn upstream(&self, id: &str) -> Vec<&str> {
        self.edges.iter().filter(|e| e.to == id).map(|e| e.from.as_str()).collect()
    }

    /// Direct downstream vertex ids of `id`.
    pub fn downstream(&self, id: &str) -> Vec<&str> {
        self.edges.iter().filter(|e| e.from == id).map(|e| e.to.as_str()).collect()
    }

    /// Input edges of `id`.
    pub fn inputs(&self, id: &str) -> impl Iterator<Item = &Edge> {
        self.edges.iter().filter(move |e| e.to == id)
    }

    /// A source vertex has no inputs.
    pub fn is_source(&self, id: &str) -> bool {
        !self.edges.iter().any(|e| e.to == id)
    }

    /// A sink vertex has no downstream consumers.
    pub fn is_sink(&self, id: &str) -> bool {
        !self.edges.iter().any(|e| e.from == id)
    }

    /// True when an input edge of `id` is keyed (`HASH`, a `keyBy`).
    pub fn has_keyed_input(&self, id: &str) -> bool {
        self.inputs(id).any(|e| e.ship_strategy.eq_ignore_ascii_case("HASH"))
    }

    /// All vertices upstream of `id` reachable through vertices for which `keep` holds
    /// (`id` itself excluded).
    pub fn upstream_region(&self, id: &str, keep: impl Fn(&str) -> bool) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<&str> = self.upstream(id).into_iter().filter(|u| keep(u)).collect();
        while let Some(v) = stack.pop() {
            if seen.insert(v.to_string()) {
                stack.extend(self.upstream(v).into_iter().filter(|u| keep(u)));
            }
        }
        seen
    }
}

/// Kahn's order; ties take the smallest id so the order is stable.
fn topological_order<'a>(ids: impl Iterator<Item = &'a str>, edges: &[Edge]) -> Result<Vec<String>, PlanError> {
    let mut indegree: BTreeMap<&str, usize> = ids.map(|id| (id, 0)).collect();
    for e in edges {
        *indegree.get_mut(e.to.as_str()).expect("edge ends checked") += 1;
    }
    let total = indegree.len();
    let mut ready: BTreeSet<&str> = indegree.iter().filter(|(_, d)| **d == 0).map(|(id, _)| *id).collect();
    let mut order = Vec::with_capacity(total);
    while let Some(id) = ready.pop_first() {
        order.push(id.to_string());
        for e in edges.iter().filter(|e| e.from == id) {
            let d = indegree.get_mut(e.to.as_str()).expect("edge ends checked");
            *d -= 1;
            if *d == 0 {
                ready.insert(e.to.as_str());
            }
        }
    }
    if order.len() != total {
        return Err(PlanError("the job plan has a cycle; Flink streaming plans are acyclic".into()));
    }
    Ok(order)
}

/// Splits a plan node description into chained operator names.
///
/// Flink 2.x writes `enrich<br/>+- score<br/>`; Flink 1.x writes `enrich -&gt; score`.
/// Lines that do not start a new operator (`+- `) continue the previous one (long SQL
/// descriptions wrap).
pub fn operators_from_description(description: &str) -> Vec<String> {
    let text = html_unescape(description);
    let mut ops: Vec<String> = Vec::new();
    for raw_line in text.split("<br/>").flat_map(|l| l.split("<br>")) {
        let line = raw_line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("+-") {
            ops.push(rest.trim().to_string());
        } else if let Some(last) = ops.last_mut().filter(|_| raw_line.starts_with(' ')) {
            last.push(' ');
            last.push_str(line);
        } else {
            ops.extend(line.split(" -> ").map(|s| s.trim().to_string()).filter(|s| !s.is_empty()));
        }
    }
    ops
}

fn html_unescape(s: &str) -> String {
    s.replace("&gt;", ">").replace("&lt;", "<").replace("&quot;", "\"").replace("&#39;", "'").replace("&amp;", "&")
}

/// The reporter's default label filter: characters outside `[A-Za-z0-9:_]` become `_`.
/// `bp-lab-slow-sink` → `bp_lab_slow_sink`; `Source: txn-source` → `Source:_txn_source`.
pub fn sanitize_label_value(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == ':' || c == '_' { c } else { '_' }).collect()
}

/// Whether two names are one job's (or vertex's) name in any form Flink's reporter writes:
/// equal, or equal once both pass the default label filter ([`sanitize_label_value`]).
/// With `filterLabelValueCharacters: false` the reporter keeps the name as Flink shows it
/// (spaces, dots, quotes, CJK characters); by default it writes the filtered form. So
/// `orders enricher.v2`, `orders_enricher_v2` and the label of either reporter match.
pub fn same_name(a: &str, b: &str) -> bool {
    a == b || sanitize_label_value(a) == sanitize_label_value(b)
}

/// A TaskManager id as Flink writes it, from the `tm_id` label the reporter sanitized
/// (`.` and `-` became `_`), where the form is unambiguous: a standalone or YARN
/// TaskManager's `10.0.3.7:40113-901294` (`10_0_3_7:40113_901294`), and a Kubernetes pod
/// name such as `fraud-taskmanager-1-3` (`fraud_taskmanager_1_3`; pod names cannot
/// contain `_`). Anything else is kept as written. The id is what Flink's REST API and UI
/// (thread dumps, logs) need.
pub fn flink_taskmanager_id(label: &str) -> String {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if let Some((host, rest)) = label.split_once(':') {
        let octets: Vec<&str> = host.split('_').collect();
        if let Some((port, suffix)) = rest.split_once('_')
            && octets.len() == 4
            && octets.iter().all(|o| digits(o) && o.len() <= 3)
            && digits(port)
            && !suffix.is_empty()
            && suffix.bytes().all(|b| b.is_ascii_hexdigit())
        {
            return format!("{}:{port}-{suffix}", octets.join("."));
        }
        return label.to_string();
    }
    let parts: Vec<&str> = label.split('_').collect();
    let pod_like = label.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if pod_like
        && parts.len() >= 3
        && parts[parts.len() - 3].ends_with("taskmanager")
        && digits(parts[parts.len() - 2])
        && digits(parts[parts.len() - 1])
    {
        return label.replace('_', "-");
    }
    label.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taskmanager_ids_are_restored_to_flinks_form_where_unambiguous() {
        assert_eq!(flink_taskmanager_id("10_0_3_7:40113_901294"), "10.0.3.7:40113-901294");
        assert_eq!(flink_taskmanager_id("127_0_0_1:46181_1f9e48"), "127.0.0.1:46181-1f9e48");
        assert_eq!(flink_taskmanager_id("fraud_detection_taskmanager_1_3"), "fraud-detection-taskmanager-1-3");
        // YARN container ids have real underscores; unknown forms stay as written.
        assert_eq!(
            flink_taskmanager_id("container_e01_1700000000000_0001_01_000002"),
            "container_e01_1700000000000_0001_01_000002"
        );
        assert_eq!(flink_taskmanager_id("tm-7"), "tm-7");
        assert_eq!(flink_taskmanager_id("10_0_3:40113_9"), "10_0_3:40113_9");
    }

    const CHAINED: &str = r#"{"plan":{"jid":"f60c","name":"bp-lab-chained-culprit","nodes":[
        {"id":"sink","parallelism":2,"description":"sink: Writer<br/>","inputs":[{"id":"mid","ship_strategy":"FORWARD"}]},
        {"id":"mid","parallelism":2,"description":"enrich<br/>+- score<br/>","inputs":[{"id":"src","ship_strategy":"HASH"}]},
        {"id":"src","parallelism":2,"description":"Source: txn-source<br/>+- parse<br/>"}]}}"#;

    #[test]
    fn a_wrapped_plan_gives_vertices_in_topological_order_with_chained_operators() {
        let g = JobGraph::from_plan_json(CHAINED).unwrap();
        let ids: Vec<_> = g.vertices.iter().map(|v| v.id.as_str()).collect();
        assert_eq!(ids, ["src", "mid", "sink"]);
        assert_eq!(g.vertices[1].name, "enrich -> score");
        assert_eq!(g.vertices[1].operators, ["enrich", "score"]);
        assert_eq!(g.job_name.as_deref(), Some("bp-lab-chained-culprit"));
        assert!(g.has_keyed_input("mid"));
        assert!(!g.has_keyed_input("sink"));
        assert!(g.is_source("src") && g.is_sink("sink") && !g.is_sink("mid"));
    }

    #[test]
    fn a_bare_plan_without_the_wrapper_parses_the_same() {
        let bare = serde_json::from_str::<serde_json::Value>(CHAINED).unwrap()["plan"].to_string();
        assert_eq!(JobGraph::from_plan_json(&bare).unwrap(), JobGraph::from_plan_json(CHAINED).unwrap());
    }

    #[test]
    fn flink_1_descriptions_with_escaped_arrows_split_into_operators() {
        assert_eq!(operators_from_description("Source: s -&gt; Map -&gt; Filter"), ["Source: s", "Map", "Filter"]);
    }

    #[test]
    fn an_input_naming_no_node_is_a_clear_error() {
        let err = JobGraph::from_plan_json(r#"{"nodes":[{"id":"a","inputs":[{"id":"zz"}]}]}"#).unwrap_err();
        assert!(err.to_string().contains("zz"), "{err}");
    }

    #[test]
    fn a_cycle_is_rejected() {
        let err = JobGraph::from_plan_json(
            r#"{"nodes":[{"id":"a","inputs":[{"id":"b"}]},{"id":"b","inputs":[{"id":"a"}]}]}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("cycle"));
    }

    #[test]
    fn not_json_names_the_position() {
        let err = JobGraph::from_plan_json("{ nope").unwrap_err();
        assert!(err.to_string().contains("line 1"), "{err}");
    }

    #[test]
    fn names_are_sanitized_like_the_reporter_does() {
        assert_eq!(sanitize_label_value("bp-lab-slow-sink"), "bp_lab_slow_sink");
        assert_eq!(sanitize_label_value("Source: txn-source -> parse"), "Source:_txn_source____parse");
    }
}
