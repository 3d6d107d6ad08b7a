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
use crate::model::verdict::{Finding, Outcome};

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
    let found = search(ctx, &red);
    let report = if let Some((first, _)) = found.culprits.first() {
        culprit_report(ctx, first, &found.culprits, &red, &red_list)
    } else if let Some((from, to)) = found.network.first() {
        network_report(ctx, from, to, &red_list)
    } else {
        unknown_report(&found.unknown, &red_list)
    };
    Located {
        report,
        culprits: found.culprits.into_iter().map(|(v, _)| v.id.clone()).collect(),
        network: found.network,
    }
}

/// Where the backpressure stops, read from the sink backwards.
struct Search<'a> {
    /// Busy vertices that are not red below red ones, with the size of the red region
    /// upstream of each, ranked.
    culprits: Vec<(&'a VertexSignals, usize)>,
    /// Exchanges into vertices neither red nor busy.
    network: Vec<(String, String)>,
    /// Vertices below red ones whose metrics do not decide.
    unknown: Vec<&'a VertexSignals>,
}

/// Candidates are the vertices that are not red with a red direct upstream vertex (without
/// a graph: every busy vertex that is not red).
fn search<'a>(ctx: &Context<'a>, red: &[&VertexSignals]) -> Search<'a> {
    let t = &ctx.cfg.thresholds;
    let verts = &ctx.signals.vertices;
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
                // A busy subtask may be among those not reporting: no conclusion.
                Some(_) if v.missing_subtasks() > 0 => unknown.push(v),
                Some(_) => network.extend(red_upstream.iter().map(|u| (u.id.clone(), v.id.clone()))),
                None => unknown.push(v),
            }
        }
    }
    culprits
        .sort_by(|a, b| b.1.cmp(&a.1).then(b.0.busy_max().unwrap_or(0.0).total_cmp(&a.0.busy_max().unwrap_or(0.0))));
    Search { culprits, network, unknown }
}

/// The report when `first` is the culprit (`culprits` ranked, `first` among them).
fn culprit_report(
    ctx: &Context,
    first: &VertexSignals,
    culprits: &[(&VertexSignals, usize)],
    red: &[&VertexSignals],
    red_list: &str,
) -> StepReport {
    let t = &ctx.cfg.thresholds;
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
    let mut report = StepReport::new(Outcome::Hit, detail);
    report.cause.push(if ctx.signals.graph_free {
        format!(
            "{} is busy {} of the time (max over {} subtasks) and not backpressured ({}), while {} {} backpressured. Without the job graph it is assumed, not known, that they are upstream of it: then it is the slowest vertex, and credit-based flow control slows everything before it.",
            first.name,
            pct(b),
            first.subtask_count(),
            pct(p),
            plural(upstream_red.len(), "other vertex", "other vertices"),
            if upstream_red.len() == 1 { "is" } else { "are" },
        )
    } else {
        format!(
            "{} is busy {} of the time (max over {} subtasks) and not backpressured ({}), while {} upstream of it {} backpressured: it is the slowest vertex, and credit-based flow control slows everything before it.",
            first.name,
            pct(b),
            first.subtask_count(),
            pct(p),
            plural(upstream_red.len(), "vertex", "vertices"),
            if upstream_red.len() == 1 { "is" } else { "are" },
        )
    });
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
    for v in red {
        report.evidence.push(ctx.evidence(
            &v.name,
            "backPressuredTimeMsPerSecond",
            v.backpressured_max().unwrap_or(0.0),
            "ratio",
            Some(t.backpressured_ratio),
            "backpressured",
        ));
    }
    report
}

/// The report when the backpressure stops at the exchange `from` → `to`, whose receiver
/// is neither backpressured nor busy.
fn network_report(ctx: &Context, from: &str, to: &str, red_list: &str) -> StepReport {
    let t = &ctx.cfg.thresholds;
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
    let mut report = StepReport::hit(Finding::Network, detail);
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
    report
}

/// The report when the vertices below the red ones have no or partial metrics.
fn unknown_report(unknown: &[&VertexSignals], red_list: &str) -> StepReport {
    let names: Vec<String> = unknown
        .iter()
        .map(|v| match v.missing_subtasks() {
            0 => v.name.clone(),
            _ => format!("{}: {} of {} subtasks report", v.name, v.subtask_count(), v.parallelism),
        })
        .collect();
    StepReport::no_data(
        format!(
            "Backpressured: {red_list}, but the vertices downstream of them have no or partial metrics ({}).",
            if names.is_empty() { "none found".to_string() } else { names.join(", ") }
        ),
        vec!["busyTimeMsPerSecond".into(), "backPressuredTimeMsPerSecond".into()],
    )
}

/// Nothing backpressured: the source is the culprit when it is busy and its lag grows.
fn source_bound(ctx: &Context) -> Located {
    let t = &ctx.cfg.thresholds;
    for v in ctx.signals.vertices.iter().filter(|v| v.is_source) {
        let Some(b) = v.busy_max().filter(|b| *b >= t.source_busy_ratio) else { continue };
        let lag: Vec<(i64, f64)> = source_lag(ctx, &v.id);
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

/// The source vertex's total lag (pendingRecords summed over subtasks) per step in the
/// window, records.
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

/// The job's consumer-group lag from a Kafka exporter, summed over partitions per step in
/// the window, records (one exporter per partition: the first listed).
pub fn exporter_lag(ctx: &Context) -> Vec<(i64, f64)> {
    let mut seen = std::collections::BTreeSet::new();
    let mut by_t: std::collections::BTreeMap<i64, f64> = std::collections::BTreeMap::new();
    for p in &ctx.snapshot.partitions {
        if p.lag_records.is_empty() || !seen.insert((p.topic.as_str(), p.partition.as_str())) {
            continue;
        }
        for &(t, v) in &p.lag_records {
            if t > ctx.snapshot.window.start_ms && v.is_finite() {
                *by_t.entry(t).or_insert(0.0) += v;
            }
        }
    }
    by_t.into_iter().collect()
}

/// The lag a source vertex reads behind: Flink's own pendingRecords when the source
/// reports it, else the job's consumer-group lag from a Kafka exporter.
pub fn source_lag(ctx: &Context, vertex_id: &str) -> Vec<(i64, f64)> {
    let own = sum_lag(ctx, vertex_id);
    if own.is_empty() { exporter_lag(ctx) } else { own }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::testkit::*;
    use crate::model::verdict::{Status, VertexState};

    /// Source → parse → score → sink, two subtasks each, `HASH` into score.
    fn line_job() -> SnapshotBuilder {
        SnapshotBuilder::new()
            .vertex("src", "Source: txn", 2)
            .vertex("parse", "parse", 2)
            .vertex("score", "score", 2)
            .vertex("sink", "Sink: store", 2)
            .edge("src", "parse", "FORWARD")
            .edge("parse", "score", "HASH")
            .edge("score", "sink", "FORWARD")
    }

    #[test]
    fn a_busy_vertex_after_red_vertices_is_the_culprit() {
        let snap = line_job()
            .all_subtasks("src", 0.02, 0.97, 0.01, None)
            .all_subtasks("parse", 0.03, 0.95, 0.02, 1000.0)
            .subtask("score", 0, 0.98, 0.0, 0.02, 1000.0)
            .subtask("score", 1, 0.91, 0.0, 0.09, 1000.0)
            .all_subtasks("sink", 0.05, 0.0, 0.95, 1000.0)
            .build();
        let located = with_context(&snap, run);
        assert_eq!(located.culprits, ["score"]);
        assert_eq!(located.report.outcome, Outcome::Hit);
        // locate names the culprit; the finding comes from a later step.
        assert_eq!(located.report.finding, None);
        // b_max = max(0.98, 0.91) = 0.98 against the 0.5 threshold.
        let busy = evidence(&located.report.evidence, "busyTimeMsPerSecond");
        assert_eq!((busy.subject.as_str(), busy.value, busy.threshold), ("score", 0.98, Some(0.5)));
        // Both red vertices (src, parse) are upstream: the fix is not theirs.
        assert!(located.report.not_the_fix[0].contains("Source: txn, parse"), "{:?}", located.report.not_the_fix);
        assert!(located.network.is_empty());
    }

    #[test]
    fn red_vertices_read_from_their_aggregates_still_point_at_the_culprit() {
        // src and parse carry only aggregates (p_max 0.97 and 0.95); the culprit is found
        // the same way, and its cause counts the subtasks from the detail (2).
        let snap = line_job()
            .all_subtasks("src", 0.02, 0.97, 0.01, None)
            .all_subtasks("parse", 0.03, 0.95, 0.02, 1000.0)
            .all_subtasks("score", 0.98, 0.0, 0.02, 1000.0)
            .all_subtasks("sink", 0.05, 0.0, 0.95, 1000.0)
            .aggregate_only(&["src", "parse", "sink"])
            .build();
        let located = with_context(&snap, run);
        assert_eq!(located.culprits, ["score"]);
        assert!(located.report.cause[0].contains("(max over 2 subtasks)"), "{:?}", located.report.cause);
        let red_p = evidence(&located.report.evidence[2..], "backPressuredTimeMsPerSecond");
        assert_eq!((red_p.subject.as_str(), red_p.value), ("Source: txn", 0.97));
    }

    #[test]
    fn a_candidate_busy_exactly_at_the_threshold_is_busy_by_itself() {
        // b_max ≥ 0.5 (inclusive): 0.5 is busy by itself.
        let snap = line_job()
            .all_subtasks("src", 0.0, 0.6, 0.4, None)
            .all_subtasks("parse", 0.0, 0.6, 0.4, 100.0)
            .all_subtasks("score", 0.5, 0.0, 0.5, 100.0)
            .all_subtasks("sink", 0.0, 0.0, 1.0, 100.0)
            .build();
        assert_eq!(with_context(&snap, run).culprits, ["score"]);
    }

    #[test]
    fn a_candidate_with_subtasks_missing_is_unknown_not_a_slow_exchange() {
        // score has parallelism 2 but only subtask 1 reports (busy 0.2 < 0.5, not red): the
        // missing subtask 0 may be the busy one, so nothing is concluded about the exchange.
        let snap = line_job()
            .all_subtasks("src", 0.1, 0.8, 0.1, None)
            .all_subtasks("parse", 0.1, 0.8, 0.1, 500.0)
            .subtask("score", 1, 0.2, 0.05, 0.75, 250.0)
            .all_subtasks("sink", 0.05, 0.0, 0.95, 500.0)
            .build();
        let located = with_context(&snap, run);
        assert_eq!(located.report.outcome, Outcome::NoData);
        assert!(located.network.is_empty() && located.culprits.is_empty());
        assert!(located.report.detail.contains("score: 1 of 2 subtasks report"), "{}", located.report.detail);
        let v = verdict(&snap);
        assert_eq!(v.status, Status::Inconclusive);
        assert!(v.notes.iter().any(|n| n.contains("score (1 of 2)")), "{:?}", v.notes);
    }

    #[test]
    fn a_candidate_neither_red_nor_busy_points_to_the_exchange_and_the_verdict_is_inconclusive() {
        // parse is red (p 0.8 > 0.10); score is neither red (0.05 ≤ 0.10) nor busy
        // (0.2 < 0.5): the backpressure stops at the exchange parse → score.
        let snap = line_job()
            .all_subtasks("src", 0.1, 0.8, 0.1, None)
            .all_subtasks("parse", 0.1, 0.8, 0.1, 500.0)
            .all_subtasks("score", 0.2, 0.05, 0.75, 500.0)
            .all_subtasks("sink", 0.05, 0.0, 0.95, 500.0)
            .build();
        let located = with_context(&snap, run);
        assert_eq!(located.report.finding, Some(Finding::Network));
        assert!(located.culprits.is_empty());
        assert_eq!(located.network, [("parse".to_string(), "score".to_string())]);
        assert!(located.report.detail.contains("parse → score"), "{}", located.report.detail);

        let v = verdict(&snap);
        assert_eq!(v.status, Status::Inconclusive);
        assert_eq!(v.finding, Finding::Network);
        assert!(v.culprit.is_none());
    }

    /// Two pipelines sharing nothing: a1 → a2 → a3 → ca → ka and b1 → cb → kb.
    fn two_regions() -> SnapshotBuilder {
        SnapshotBuilder::new()
            .vertex("a1", "Source: a", 1)
            .vertex("b1", "Source: b", 1)
            .vertex("a2", "a-parse", 1)
            .vertex("a3", "a-enrich", 1)
            .vertex("ca", "a-score", 1)
            .vertex("cb", "b-score", 1)
            .vertex("ka", "Sink: a", 1)
            .vertex("kb", "Sink: b", 1)
            .edge("a1", "a2", "FORWARD")
            .edge("a2", "a3", "FORWARD")
            .edge("a3", "ca", "HASH")
            .edge("ca", "ka", "FORWARD")
            .edge("b1", "cb", "HASH")
            .edge("cb", "kb", "FORWARD")
            .all_subtasks("ka", 0.1, 0.0, 0.9, 10.0)
            .all_subtasks("kb", 0.1, 0.0, 0.9, 10.0)
    }

    #[test]
    fn two_independent_red_regions_give_two_culprits_the_larger_region_first() {
        // Region of ca: a1, a2, a3 = 3 red vertices; region of cb: b1 = 1. cb is busier
        // (0.99 > 0.7) but region size ranks first: [ca, cb].
        let snap = two_regions()
            .all_subtasks("a1", 0.0, 0.9, 0.1, None)
            .all_subtasks("a2", 0.0, 0.9, 0.1, 10.0)
            .all_subtasks("a3", 0.0, 0.9, 0.1, 10.0)
            .all_subtasks("ca", 0.7, 0.0, 0.3, 10.0)
            .all_subtasks("b1", 0.0, 0.9, 0.1, None)
            .all_subtasks("cb", 0.99, 0.0, 0.01, 10.0)
            .build();
        let located = with_context(&snap, run);
        assert_eq!(located.culprits, ["ca", "cb"]);
        assert!(
            located.report.detail.contains("a-score (3 red upstream), b-score (1 red upstream)"),
            "{}",
            located.report.detail
        );

        let v = verdict(&snap);
        assert_eq!(v.status, Status::CulpritFound);
        assert_eq!(v.culprit.as_ref().unwrap().vertex_id, "ca");
        assert_eq!(v.culprits.iter().map(|c| c.vertex_id.as_str()).collect::<Vec<_>>(), ["ca", "cb"]);
        assert!(v.summary.contains("1 more independent culprit: b-score"), "{}", v.summary);
    }

    #[test]
    fn equal_red_regions_rank_their_culprits_by_busy_max() {
        // Only a3 is red in the a-chain: region of ca = {a3} (a2 is not red, the walk
        // upstream stops there) = 1; region of cb = {b1} = 1. Tie → b_max: cb 0.99 > ca 0.7
        // → [cb, ca].
        let snap = two_regions()
            .all_subtasks("a1", 0.2, 0.0, 0.8, None)
            .all_subtasks("a2", 0.2, 0.0, 0.8, 10.0)
            .all_subtasks("a3", 0.0, 0.9, 0.1, 10.0)
            .all_subtasks("ca", 0.7, 0.0, 0.3, 10.0)
            .all_subtasks("b1", 0.0, 0.9, 0.1, None)
            .all_subtasks("cb", 0.99, 0.0, 0.01, 10.0)
            .build();
        assert_eq!(with_context(&snap, run).culprits, ["cb", "ca"]);
    }

    #[test]
    fn nothing_red_is_clear_even_at_exactly_the_threshold() {
        // p_max = 0.10 is not > 0.10: OK in Flink's UI, not backpressured.
        let snap = line_job()
            .all_subtasks("src", 0.3, 0.10, 0.6, None)
            .all_subtasks("parse", 0.3, 0.05, 0.65, 100.0)
            .all_subtasks("score", 0.6, 0.0, 0.4, 100.0)
            .all_subtasks("sink", 0.1, 0.0, 0.9, 100.0)
            .build();
        let located = with_context(&snap, run);
        assert_eq!(located.report.outcome, Outcome::Clear);
        assert!(located.culprits.is_empty());
        assert_eq!(verdict(&snap).status, Status::NoBackpressure);
    }

    #[test]
    fn nothing_red_and_a_busy_source_whose_lag_grows_is_the_source_culprit() {
        // Source busy 0.95 ≥ 0.9; pendingRecords of each subtask grows 50 records/s over
        // the window (1000 → 16000 in 300 s), so the summed lag grows 2 × 50 = 100 records/s.
        let snap = line_job()
            .all_subtasks("src", 0.95, 0.0, 0.05, None)
            .all_subtasks("parse", 0.4, 0.0, 0.6, 800.0)
            .all_subtasks("score", 0.4, 0.0, 0.6, 800.0)
            .all_subtasks("sink", 0.1, 0.0, 0.9, 800.0)
            .pending_records("src", 0, line(-295, 0, 5, 1000.0, 50.0))
            .pending_records("src", 1, line(-295, 0, 5, 1000.0, 50.0))
            .build();
        let located = with_context(&snap, run);
        assert_eq!(located.report.finding, Some(Finding::Source));
        assert_eq!(located.culprits, ["src"]);
        assert_close(evidence(&located.report.evidence, "pendingRecords growth").value, 100.0, 1e-6);
        assert!(located.report.fix[0].contains("parallelism (now 2)"), "{:?}", located.report.fix);

        let v = verdict(&snap);
        assert_eq!((v.status, v.finding), (Status::CulpritFound, Finding::Source));
        assert_eq!(v.culprit.unwrap().role, crate::model::verdict::Role::Source);
    }

    #[test]
    fn a_busy_source_whose_lag_is_flat_is_not_the_culprit() {
        // Same source at 0.95 busy, but pendingRecords stays at 1000: slope 0, not growing.
        let snap = line_job()
            .all_subtasks("src", 0.95, 0.0, 0.05, None)
            .all_subtasks("parse", 0.4, 0.0, 0.6, 800.0)
            .all_subtasks("score", 0.4, 0.0, 0.6, 800.0)
            .all_subtasks("sink", 0.1, 0.0, 0.9, 800.0)
            .pending_records("src", 0, line(-295, 0, 5, 1000.0, 0.0))
            .build();
        let located = with_context(&snap, run);
        assert_eq!(located.report.outcome, Outcome::Clear);
        assert!(located.culprits.is_empty());
    }

    #[test]
    fn a_busy_source_whose_kafka_exporter_lag_grows_is_the_source_culprit() {
        // No pendingRecords, but the job's consumer group lags more every scrape: 200
        // records/s (kafka_exporter / KMinion lag of group test-job on topic txn).
        let p = crate::model::snapshot::PartitionLag {
            lag_records: line(-240, 0, 60, 10_000.0, 200.0),
            ..partition("txn", "0")
        };
        let snap = line_job()
            .all_subtasks("src", 0.95, 0.0, 0.05, None)
            .all_subtasks("parse", 0.4, 0.0, 0.6, 800.0)
            .all_subtasks("score", 0.4, 0.0, 0.6, 800.0)
            .all_subtasks("sink", 0.1, 0.0, 0.9, 800.0)
            .partition(p)
            .build();
        assert_eq!(with_context(&snap, run).report.finding, Some(Finding::Source));
    }

    #[test]
    fn no_busy_or_backpressured_metrics_at_all_is_no_data_and_inconclusive() {
        // Only records rates: nothing to read the graph with.
        let snap = line_job()
            .all_subtasks("parse", None, None, None, 800.0)
            .all_subtasks("score", None, None, None, 800.0)
            .build();
        let located = with_context(&snap, run);
        assert_eq!(located.report.outcome, Outcome::NoData);
        assert_eq!(located.report.missing, ["backPressuredTimeMsPerSecond", "busyTimeMsPerSecond"]);
        let v = verdict(&snap);
        assert_eq!(v.status, Status::Inconclusive);
        assert_eq!(v.confidence, crate::model::verdict::Confidence::Low);
    }

    #[test]
    fn red_vertices_whose_downstream_has_no_metrics_are_no_data() {
        // parse is red; score (its only downstream) reports nothing at all.
        let snap =
            line_job().all_subtasks("src", 0.0, 0.9, 0.1, None).all_subtasks("parse", 0.0, 0.9, 0.1, 100.0).build();
        let located = with_context(&snap, run);
        assert_eq!(located.report.outcome, Outcome::NoData);
        assert!(located.report.detail.contains("score"), "{}", located.report.detail);
        assert_eq!(verdict(&snap).status, Status::Inconclusive);
    }

    #[test]
    fn without_a_graph_the_busiest_vertex_that_is_not_red_is_taken() {
        // Graph-free: red = {src, parse}; not red and busy ≥ 0.5: score (0.9), sink (0.6).
        // Ranked by b_max: score first.
        let snap = line_job()
            .all_subtasks("src", 0.05, 0.9, 0.05, None)
            .all_subtasks("parse", 0.05, 0.9, 0.05, 100.0)
            .all_subtasks("score", 0.9, 0.0, 0.1, 100.0)
            .all_subtasks("sink", 0.6, 0.0, 0.4, 100.0)
            .without_graph()
            .build();
        let located = with_context(&snap, run);
        assert_eq!(located.culprits.first().map(String::as_str), Some("score"));
        assert!(located.report.detail.contains("Without the job graph"), "{}", located.report.detail);

        let v = verdict(&snap);
        assert_eq!(v.culprit.as_ref().unwrap().vertex_id, "score");
        assert_eq!(v.confidence, crate::model::verdict::Confidence::Low);
        assert!(v.notes.iter().any(|n| n.contains("No job graph")), "{:?}", v.notes);
        assert!(v.graph.edges.is_empty());
    }

    #[test]
    fn a_legacy_source_with_nan_busy_gets_busy_inferred_from_idle_and_backpressure() {
        // Flink reports busy NaN for legacy sources. i = 0.04, p = 0.02 →
        // b = 1 − min(0.04 + 0.02, 1) = 0.94 ≥ 0.9, and its lag grows 20 records/s:
        // source-bound. Treated as 0, it would have been clear.
        let snap = line_job()
            .all_subtasks("src", None, 0.02, 0.04, None)
            .all_subtasks("parse", 0.3, 0.0, 0.7, 500.0)
            .all_subtasks("score", 0.3, 0.0, 0.7, 500.0)
            .all_subtasks("sink", 0.1, 0.0, 0.9, 500.0)
            .pending_records("src", 0, line(-240, 0, 60, 0.0, 20.0))
            .build();
        let located = with_context(&snap, run);
        assert_eq!(located.report.finding, Some(Finding::Source));
        assert_close(evidence(&located.report.evidence, "busyTimeMsPerSecond").value, 0.94, 1e-9);
        let v = verdict(&snap);
        assert_close(v.graph.vertices[0].busy_max.unwrap(), 0.94, 1e-9);
    }

    #[test]
    fn a_legacy_source_without_idle_has_unknown_busy_not_zero() {
        // busy NaN and no idle: b stays unknown (busy_max null), never 0.
        let snap =
            line_job().all_subtasks("src", None, 0.9, None, None).all_subtasks("parse", 0.8, 0.0, 0.2, 500.0).build();
        let located = with_context(&snap, run);
        assert_eq!(located.culprits, ["parse"]);
        let v = verdict(&snap);
        assert_eq!(v.graph.vertices[0].busy_max, None);
        assert_eq!(v.graph.vertices[0].state, VertexState::Backpressured);
    }

    #[test]
    fn a_chained_culprit_names_its_operators_and_suggests_breaking_the_chain() {
        let snap = SnapshotBuilder::new()
            .vertex("src", "Source: txn -> parse", 2)
            .vertex("mid", "enrich -> score", 2)
            .edge("src", "mid", "HASH")
            .all_subtasks("src", 0.0, 0.9, 0.1, None)
            .all_subtasks("mid", 0.95, 0.0, 0.05, 100.0)
            .build();
        let located = with_context(&snap, run);
        assert_eq!(located.culprits, ["mid"]);
        assert!(
            located.report.cause.iter().any(|c| c.contains("chains 2 operators (enrich, score)")),
            "{:?}",
            located.report.cause
        );
        assert!(located.report.fix.iter().any(|f| f.contains("disableChaining()")), "{:?}", located.report.fix);
    }
}
