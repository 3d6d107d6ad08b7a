//! Step `locate`: read the graph from the sink backwards.
//!
//! A vertex is backpressured (red) when `p_max` exceeds the threshold (0.10). Candidates
//! are vertices that are not red and have a red direct upstream vertex; a candidate busy
//! by itself (`b_max ≥ 0.5`) is a culprit, one that is neither red nor busy points to the
//! exchange in between (finding `network`). Several culprits are ranked by the size of
//! the red region upstream of each, then by `b_max`. With nothing red, a busy source whose
//! lag grows is the culprit (finding `source`). Without a job graph, not-red busy vertices
//! are ranked by `b_max` and the verdict says so.

use crate::diagnose::signals::VertexSignals;
use crate::diagnose::{Context, StepReport, limited_list, num, pct, slope_per_s};
use crate::verdict::{Finding, Outcome};

/// What `locate` found besides its report.
#[derive(Debug, Clone, PartialEq)]
pub struct Located {
    pub report: StepReport,
    /// Culprit vertex ids, ranked.
    pub culprits: Vec<String>,
    /// Exchanges `(from, to)` where the backpressure stops without a busy receiver.
    pub network: Vec<(String, String)>,
}

pub fn run(ctx: &Context) -> Located {
    let t = &ctx.cfg.thresholds;
    let verts = &ctx.signals.vertices;
    let with_metrics: Vec<&VertexSignals> = verts.iter().filter(|v| v.backpressured_max().is_some()).collect();
    if with_metrics.is_empty() {
        return Located {
            report: StepReport::no_data(
                "no busy or backpressured time for any vertex of the job",
                vec!["backPressuredTimeMsPerSecond".into(), "busyTimeMsPerSecond".into()],
            ),
            culprits: Vec::new(),
            network: Vec::new(),
        };
    }
    let red: Vec<&VertexSignals> = verts.iter().filter(|v| ctx.is_red(v)).collect();
    if red.is_empty() {
        return source_bound(ctx);
    }
    let red_list = limited_list(
        &red.iter().map(|v| format!("{} {}", v.name, pct(v.backpressured_max().unwrap_or(0.0)))).collect::<Vec<_>>(),
        8,
    );

    let mut culprits: Vec<(&VertexSignals, usize)> = Vec::new();
    let mut network: Vec<(String, String)> = Vec::new();
    let mut unknown: Vec<&VertexSignals> = Vec::new();
    if ctx.signals.graph_free {
        for v in verts.iter().filter(|v| !ctx.is_red(v)) {
            if v.busy_max().is_some_and(|b| b >= t.busy_ratio) {
                culprits.push((v, red.len()));
            }
        }
    } else {
        for v in verts.iter().filter(|v| !ctx.is_red(v)) {
            let red_upstream: Vec<&VertexSignals> =
                ctx.signals.upstream(&v.id).into_iter().filter(|u| ctx.is_red(u)).collect();
            if red_upstream.is_empty() {
                continue;
            }
            if v.backpressured_max().is_none() {
                unknown.push(v);
                continue;
            }
            match v.busy_max() {
                Some(b) if b >= t.busy_ratio => {
                    let region = ctx.signals.upstream_region(&v.id, |u| ctx.is_red(u)).len();
                    culprits.push((v, region));
                }
                Some(_) => network.extend(red_upstream.iter().map(|u| (u.id.clone(), v.id.clone()))),
                None => unknown.push(v),
            }
        }
    }
    culprits
        .sort_by(|a, b| b.1.cmp(&a.1).then(b.0.busy_max().unwrap_or(0.0).total_cmp(&a.0.busy_max().unwrap_or(0.0))));

    let mut report;
    if let Some((first, _)) = culprits.first() {
        let b = first.busy_max().unwrap_or(0.0);
        let p = first.backpressured_max().unwrap_or(0.0);
        let upstream_red: Vec<String> = if ctx.signals.graph_free {
            red.iter().map(|v| v.name.clone()).collect()
        } else {
            ctx.signals.upstream_region(&first.id, |u| ctx.is_red(u)).iter().map(|v| v.name.clone()).collect()
        };
        let detail = if ctx.signals.graph_free {
            format!(
                "Backpressured (p_max > {:.2}): {red_list}. Without the job graph, the busiest vertex that is not backpressured is taken: {} (busy {}, backpressured {}).",
                t.backpressured_ratio,
                first.name,
                pct(b),
                pct(p)
            )
        } else {
            format!(
                "Backpressured (p_max > {:.2}): {red_list}. First vertex downstream that is not: {} (busy {}, backpressured {}), busy by itself (b_max ≥ {:.2}).",
                t.backpressured_ratio,
                first.name,
                pct(b),
                pct(p),
                t.busy_ratio
            )
        };
        report = StepReport::new(Outcome::Hit, detail);
        report.cause.push(format!(
            "{} is busy {} of the time (max over {} subtasks) and not backpressured ({}), while {} upstream of it {} backpressured: it is the slowest vertex, and credit-based flow control slows everything before it.",
            first.name,
            pct(b),
            first.subtasks.len(),
            pct(p),
            plural(upstream_red.len(), "vertex", "vertices"),
            if upstream_red.len() == 1 { "is" } else { "are" },
        ));
        if !upstream_red.is_empty() {
            report.not_the_fix.push(format!(
                "More parallelism or resources for the backpressured {} ({}): they wait on {}; the job's throughput is the minimum over its vertices.",
                if upstream_red.len() == 1 { "vertex" } else { "vertices" },
                limited_list(&upstream_red, 8),
                first.name
            ));
        }
        if first.operators.len() > 1 {
            report.cause.push(format!(
                "The vertex chains {} operators ({}); task metrics are per vertex, so they cannot tell which operator inside the chain is slow.",
                first.operators.len(),
                first.operators.join(", ")
            ));
            report.fix.push(format!(
                "To see which of {} is slow, break the chain: disableChaining() on the suspect operator (or startNewChain()), or pipeline.operator-chaining.enabled: false for a test run; a flame graph (rest.flamegraph.enabled: true, then the vertex's Flame Graph tab) shows it without redeploying.",
                first.operators.join(", ")
            ));
        }
        if culprits.len() > 1 {
            report.detail.push_str(&format!(
                " {} independent culprits: {}.",
                culprits.len(),
                culprits.iter().map(|(v, n)| format!("{} ({} red upstream)", v.name, n)).collect::<Vec<_>>().join(", ")
            ));
        }
        report.evidence.push(ctx.evidence(&first.name, "busyTimeMsPerSecond", b, "ratio", Some(t.busy_ratio), "busy"));
        report.evidence.push(ctx.evidence(
            &first.name,
            "backPressuredTimeMsPerSecond",
            p,
            "ratio",
            Some(t.backpressured_ratio),
            "backpressured",
        ));
        for v in &red {
            report.evidence.push(ctx.evidence(
                &v.name,
                "backPressuredTimeMsPerSecond",
                v.backpressured_max().unwrap_or(0.0),
                "ratio",
                Some(t.backpressured_ratio),
                "backpressured",
            ));
        }
    } else if !network.is_empty() {
        let (from, to) = &network[0];
        let (from_v, to_v) = (ctx.signals.vertex(from).expect("edge end"), ctx.signals.vertex(to).expect("edge end"));
        let detail = format!(
            "Backpressured (p_max > {:.2}): {red_list}. The backpressure stops at the exchange {} → {}: {} is neither backpressured ({}) nor busy ({}).",
            t.backpressured_ratio,
            from_v.name,
            to_v.name,
            to_v.name,
            pct(to_v.backpressured_max().unwrap_or(0.0)),
            pct(to_v.busy_max().unwrap_or(0.0)),
        );
        report = StepReport::hit(Finding::Network, detail);
        report.cause.push(format!(
            "{} waits to send while {} is {} busy and not backpressured: the exchange between them (network, serialization, a stuck channel) is slow, not an operator.",
            from_v.name,
            to_v.name,
            pct(to_v.busy_max().unwrap_or(0.0))
        ));
        report.fix.push(format!(
            "Look at the exchange {} → {}: network between the TaskManagers (bandwidth, packet loss), serialization cost of the records (Kryo fallback: pipeline.generic-types: false shows it), and the network buffers (taskmanager.memory.network.fraction; outPoolUsage of {} and inPoolUsage of {}).",
            from_v.name, to_v.name, from_v.name, to_v.name
        ));
        report.summary = Some(format!(
            "Inconclusive: backpressure stops at the exchange {} → {}, whose receiver is neither backpressured nor busy.",
            from_v.name, to_v.name
        ));
        for v in [from_v, to_v] {
            report.evidence.push(ctx.evidence(
                &v.name,
                "busyTimeMsPerSecond",
                v.busy_max().unwrap_or(0.0),
                "ratio",
                Some(t.busy_ratio),
                "busy",
            ));
        }
    } else {
        let names: Vec<&str> = unknown.iter().map(|v| v.name.as_str()).collect();
        report = StepReport::no_data(
            format!(
                "Backpressured: {red_list}, but the vertices downstream of them have no metrics ({}).",
                if names.is_empty() { "none found".to_string() } else { names.join(", ") }
            ),
            vec!["busyTimeMsPerSecond".into(), "backPressuredTimeMsPerSecond".into()],
        );
    }
    Located { report, culprits: culprits.into_iter().map(|(v, _)| v.id.clone()).collect(), network }
}

/// Nothing backpressured: the source is the culprit when it is busy and its lag grows.
fn source_bound(ctx: &Context) -> Located {
    let t = &ctx.cfg.thresholds;
    for v in ctx.signals.vertices.iter().filter(|v| v.is_source) {
        let Some(b) = v.busy_max().filter(|b| *b >= t.source_busy_ratio) else { continue };
        let lag: Vec<(i64, f64)> = sum_lag(ctx, &v.id);
        let growth = slope_per_s(&lag).filter(|g| *g > 0.0);
        if let Some(growth) = growth {
            let mut r = StepReport::hit(
                Finding::Source,
                format!(
                    "Nothing is backpressured; source {} is busy {} and its lag grows by {} records/s: the source itself is the bottleneck.",
                    v.name,
                    pct(b),
                    num(growth)
                ),
            );
            r.cause.push(format!(
                "{} spends {} of its time reading and emitting, with no backpressure from downstream, and its lag (pendingRecords) grows by {} records/s: it cannot read as fast as data arrives.",
                v.name,
                pct(b),
                num(growth)
            ));
            r.fix.push(format!(
                "Raise {}'s parallelism (now {}) up to the number of partitions of its topic; beyond that, add partitions.",
                v.name, v.parallelism
            ));
            r.fix.push(
                "Tune the source's fetch settings (Kafka: properties.fetch.min.bytes, properties.max.partition.fetch.bytes, properties.max.poll.records) and check deserialization cost.".into(),
            );
            r.summary = Some(format!(
                "Source {} is the culprit: it is {} busy and cannot keep up; its lag grows.",
                v.name,
                pct(b)
            ));
            r.evidence.push(ctx.evidence(
                &v.name,
                "busyTimeMsPerSecond",
                b,
                "ratio",
                Some(t.source_busy_ratio),
                "busy",
            ));
            r.evidence.push(ctx.evidence(
                &v.name,
                "pendingRecords growth",
                growth,
                "records/s",
                Some(0.0),
                "pending_records",
            ));
            return Located { report: r, culprits: vec![v.id.clone()], network: Vec::new() };
        }
    }
    Located {
        report: StepReport::clear(format!("No vertex is backpressured (every p_max ≤ {:.2}).", t.backpressured_ratio)),
        culprits: Vec::new(),
        network: Vec::new(),
    }
}

/// The source vertex's total lag (pendingRecords summed over subtasks) per step.
pub fn sum_lag(ctx: &Context, vertex_id: &str) -> Vec<(i64, f64)> {
    let mut by_t: std::collections::BTreeMap<i64, f64> = std::collections::BTreeMap::new();
    for s in ctx.snapshot.source_lag.iter().filter(|s| s.vertex_id == vertex_id) {
        for &(t, v) in &s.pending_records {
            if t > ctx.snapshot.window.start_ms && v.is_finite() {
                *by_t.entry(t).or_insert(0.0) += v;
            }
        }
    }
    by_t.into_iter().collect()
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
