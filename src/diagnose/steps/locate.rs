//! Step `locate`: read the graph from the sink backwards.
//!
//! A vertex is backpressured (red) when `p_max` exceeds the threshold (0.10). Candidates
//! are vertices that are not red and have a red direct upstream vertex; a candidate busy
//! by itself (`b_max ≥ 0.5`) is a culprit, one that is neither red nor busy points to the
//! exchange in between (finding `network`). Several culprits are ranked by the size of
//! the red region upstream of each, then by `b_max`. With nothing red, a busy source whose
//! lag grows is the culprit (finding `source`). Without a job graph, not-red busy vertices
//! are ranked by `b_max` and the verdict says so.
//!
//! A reporter older than Flink 1.13 has no busy time, and `p_max` is the share of
//! `isBackPressured` samples. There the classic method decides a candidate: a full input
//! buffer pool (`inPoolUsage ≥ in_pool_full_ratio`) and a low output pool (`outPoolUsage ≤
//! out_pool_low_ratio`, or none: a sink) make it the culprit; an input pool that is not full
//! points to the exchange before it; without pool usage nothing is concluded.

use crate::diagnose::signals::VertexSignals;
use crate::diagnose::steps::headroom;
use crate::diagnose::timeline::{self, Holder};
use crate::diagnose::{Context, StepReport, limited_list, max_over, num, pct, pct_or_unknown, slope_per_s};
use crate::model::snapshot::BackpressureMeasure;
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

/// `locate` over the window averages, then over the window read sample by sample: when
/// the samples show a vertex holding the job back more often than the one the averages
/// point to (a bottleneck that comes and goes), the samples decide.
pub fn run(ctx: &Context) -> Located {
    let averaged = on_averages(ctx);
    if averaged.report.finding == Some(Finding::Source) {
        return averaged;
    }
    let index = |id: &str| ctx.signals.vertices.iter().position(|v| v.id == id);
    let averaged_top = averaged.culprits.first().and_then(|id| index(id));
    match timeline::refine_target(&ctx.timeline, averaged_top, ctx.cfg) {
        Some(top) => from_samples(ctx, top, &averaged),
        None => with_alternation(ctx, averaged),
    }
}

fn on_averages(ctx: &Context) -> Located {
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
        if let Some(report) = left_out_report(ctx) {
            return Located { report, culprits: Vec::new(), network: Vec::new() };
        }
        return source_bound(ctx);
    }
    let red_list = limited_list(
        &red.iter().map(|v| format!("{} {}", v.name, pct_or_unknown(v.backpressured_max()))).collect::<Vec<_>>(),
        8,
    );
    let found = search(ctx, &red);
    let report = if let Some((first, _)) = found.culprits.first() {
        culprit_report(ctx, first, &found.culprits, &red, &red_list)
    } else if let Some((from, to)) = found.network.first() {
        network_report(ctx, from, to, &red_list)
    } else {
        unknown_report(&found.unknown, &red_list, classic(ctx))
    };
    Located {
        report,
        culprits: found.culprits.into_iter().map(|(v, _)| v.id.clone()).collect(),
        network: found.network,
    }
}

/// No data when no vertex is red but the values it would rest on were left out as
/// impossible (a broken reporter or store): the backpressure of some vertex, or the busy
/// time of every vertex. "No backpressure" would rest on the values that happened to
/// survive.
fn left_out_report(ctx: &Context) -> Option<StepReport> {
    let left_out = |signals: &[&str]| ctx.snapshot.left_out.iter().any(|l| signals.contains(&l.signal.as_str()));
    let verts = &ctx.signals.vertices;
    let names = |f: &dyn Fn(&VertexSignals) -> bool| -> Vec<String> {
        verts.iter().filter(|v| f(v)).map(|v| v.name.clone()).collect()
    };
    let unknown_bp = names(&|v| v.backpressured_max().is_none());
    let why = if left_out(&["backpressured", "is_backpressured"]) && !unknown_bp.is_empty() {
        format!("the backpressure of {} is unknown", limited_list(&unknown_bp, 8))
    } else if left_out(&["busy"]) && verts.iter().all(|v| v.busy_max().is_none()) {
        "the busy time of every vertex is unknown".to_string()
    } else {
        return None;
    };
    Some(StepReport::no_data(
        format!(
            "{why}, the metric source having returned impossible values for it (see the notes): the job's state cannot be told"
        ),
        vec!["backPressuredTimeMsPerSecond".into(), "busyTimeMsPerSecond".into()],
    ))
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
                None if classic(ctx) => match starved_input(ctx, v) {
                    Some(true) => {
                        let region = ctx.signals.upstream_region(&v.id, |u| ctx.is_red(u)).len();
                        culprits.push((v, region));
                    }
                    Some(false) if v.missing_subtasks() == 0 => {
                        network.extend(red_upstream.iter().map(|u| (u.id.clone(), v.id.clone())))
                    }
                    _ => unknown.push(v),
                },
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

/// The reporter predates Flink 1.13: backpressure is the share of `isBackPressured`
/// samples and busy time is unknown.
pub fn classic(ctx: &Context) -> bool {
    ctx.snapshot.backpressure_measure == BackpressureMeasure::IsBackPressuredShare
}

/// The classic method on a candidate: `Some(true)` when its input buffer pool is full and
/// its output pool low (or absent: a sink), `Some(false)` when its input pool is not full
/// or its output pool is full, `None` without input pool usage.
fn starved_input(ctx: &Context, v: &VertexSignals) -> Option<bool> {
    let t = &ctx.cfg.thresholds;
    let input = v.in_pool_usage()?;
    let output_low = v.out_pool_usage().is_none_or(|o| o <= t.out_pool_low_ratio);
    Some(input >= t.in_pool_full_ratio && output_low)
}

/// The report when `first` is the culprit (`culprits` ranked, `first` among them).
fn culprit_report(
    ctx: &Context,
    first: &VertexSignals,
    culprits: &[(&VertexSignals, usize)],
    red: &[&VertexSignals],
    red_list: &str,
) -> StepReport {
    if classic(ctx) && first.busy_max().is_none() {
        return classic_culprit_report(ctx, first, red, red_list);
    }
    let t = &ctx.cfg.thresholds;
    // Unknown stays unknown (a legacy source's NaN busy time): said so, never 0 %.
    let (b, p) = (first.busy_max(), first.backpressured_max());
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
            pct_or_unknown(b),
            pct_or_unknown(p)
        )
    } else {
        format!(
            "Backpressured (p_max > {:.2}): {red_list}. First vertex downstream that is not: {} (busy {}, backpressured {}), busy by itself (b_max ≥ {:.2}).",
            t.backpressured_ratio,
            first.name,
            pct_or_unknown(b),
            pct_or_unknown(p),
            t.busy_ratio
        )
    };
    let mut report = StepReport::new(Outcome::Hit, detail);
    report.cause.push(if ctx.signals.graph_free {
        format!(
            "{} is busy {} of the time ({}) and not backpressured ({}), while {} {} backpressured. Without the job graph it is assumed, not known, that they are upstream of it: then it is the slowest vertex, and credit-based flow control slows everything before it.",
            first.name,
            pct_or_unknown(b),
            max_over(first),
            pct_or_unknown(p),
            plural(upstream_red.len(), "other vertex", "other vertices"),
            if upstream_red.len() == 1 { "is" } else { "are" },
        )
    } else {
        format!(
            "{} is busy {} of the time ({}) and not backpressured ({}), while {} upstream of it {} backpressured: it is the slowest vertex, and credit-based flow control slows everything before it.",
            first.name,
            pct_or_unknown(b),
            max_over(first),
            pct_or_unknown(p),
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
    chain_advice(first, &mut report);
    if culprits.len() > 1 {
        report.detail = report.detail.clone().then(format!(
            " {} independent culprits: {}.",
            culprits.len(),
            culprits.iter().map(|(v, n)| format!("{} ({} red upstream)", v.name, n)).collect::<Vec<_>>().join(", ")
        ));
    }
    // Evidence is what was measured: an unknown value gives none (the detail says unknown).
    if let Some(b) = b {
        report.evidence.push(ctx.evidence(&first.name, "busyTimeMsPerSecond", b, "ratio", Some(t.busy_ratio), "busy"));
    }
    for (v, p) in std::iter::once((first, p)).chain(red.iter().map(|v| (*v, v.backpressured_max()))) {
        if let Some(p) = p {
            report.evidence.push(ctx.evidence(
                &v.name,
                "backPressuredTimeMsPerSecond",
                p,
                "ratio",
                Some(t.backpressured_ratio),
                "backpressured",
            ));
        }
    }
    report
}

/// The culprit the samples show (`top`, an index into the signals' vertices), overruling
/// what the window averages said (`averaged`).
fn from_samples(ctx: &Context, top: usize, averaged: &Located) -> Located {
    let t = &ctx.cfg.thresholds;
    let r = &ctx.timeline;
    let v = &ctx.signals.vertices[top];
    let share = r.bottleneck_share(top);
    let (busy_holding, busy_other) = r.busy_when_holding(top);
    let upstream: Vec<(usize, f64)> = ctx
        .signals
        .vertices
        .iter()
        .enumerate()
        .filter(|(_, u)| ctx.signals.upstream(&v.id).iter().any(|x| x.id == u.id))
        .filter_map(|(i, _)| r.backpressured_during(i, top).map(|p| (i, p)))
        .filter(|(_, p)| *p > t.backpressured_ratio)
        .collect();
    let names = |list: &[(usize, f64)]| -> String {
        limited_list(
            &list
                .iter()
                .map(|(i, p)| format!("{} up to {}", ctx.signals.vertices[*i].name, pct(*p)))
                .collect::<Vec<_>>(),
            4,
        )
    };
    let averages = format!(
        "busy {}{}",
        v.busy_max().map(pct).unwrap_or_else(|| "unknown".into()),
        match averaged.report.finding {
            Some(Finding::Network) => ", which by the averages points to the exchange before it".to_string(),
            _ if averaged.culprits.is_empty() => String::new(),
            _ => format!(
                ", while the averages point to {}",
                averaged.culprits.first().and_then(|id| ctx.signals.vertex(id)).map(|c| c.name.as_str()).unwrap_or("?")
            ),
        }
    );
    let when = format!(
        "in {} of the {} samples of the window ({}){}",
        r.bottleneck_count[top],
        r.len(),
        pct(share),
        match (busy_holding, upstream.is_empty()) {
            (Some(b), false) => format!(", busy up to {} while {} backpressured", pct(b), names(&upstream)),
            (Some(b), true) => format!(", busy up to {}", pct(b)),
            (None, _) => String::new(),
        }
    );
    let calm = r.share_of(Holder::Calm);
    let network = r.share_of(Holder::Network);
    let period = periodic_sentence(ctx);
    let mut report = StepReport::new(
        Outcome::Hit,
        format!(
            "Read sample by sample, {} holds the job back {when}; nothing is backpressured in {} of them{}. Averaged over the window it is {averages}: the averages hide a bottleneck that comes and goes.{period}",
            v.name,
            pct(calm),
            if network > 0.0 { format!(" and the exchange is suspect in {}", pct(network)) } else { String::new() },
        ),
    );
    report.cause.push(format!(
        "Backpressure comes and goes: {} holds the job back {when}{}; between those stalls nothing is backpressured. Credit-based flow control stalls everything before it while it is blocked, so the window averages ({averages}) understate it.{period}",
        v.name,
        busy_other.map(|b| format!(" and drops to {} busy between them", pct(b))).unwrap_or_default(),
    ));
    if !upstream.is_empty() {
        report.not_the_fix.push(format!(
            "More parallelism or resources for the vertices it stalls ({}): they wait on {}.",
            limited_list(&upstream.iter().map(|(i, _)| ctx.signals.vertices[*i].name.clone()).collect::<Vec<_>>(), 4),
            v.name
        ));
    }
    chain_advice(v, &mut report);
    report.evidence.push(ctx.evidence(
        &v.name,
        "share of samples as the bottleneck",
        share,
        "ratio",
        Some(t.timeline_holder_share),
        "busy",
    ));
    if let Some(b) = busy_holding {
        report.evidence.push(ctx.evidence(
            &v.name,
            "busyTimeMsPerSecond while it holds the job back",
            b,
            "ratio",
            Some(t.busy_ratio),
            "busy",
        ));
    }
    for (i, p) in &upstream {
        report.evidence.push(ctx.evidence(
            &ctx.signals.vertices[*i].name,
            "backPressuredTimeMsPerSecond while stalled",
            *p,
            "ratio",
            Some(t.backpressured_ratio),
            "backpressured",
        ));
    }
    Located { report, culprits: vec![v.id.clone()], network: Vec::new() }
}

/// " The stalls recur every ~120 s, in phase with the checkpoints (completed every ~120 s)."
/// when the backpressure is periodic.
pub fn periodic_sentence(ctx: &Context) -> String {
    let r = &ctx.timeline;
    match (r.period_ms, r.with_checkpoints, r.checkpoint_spacing_ms) {
        (Some(p), true, Some(c)) => format!(
            " The stalls recur every ~{} s, in phase with the checkpoints (completed every ~{} s).",
            p / 1000,
            c / 1000
        ),
        (Some(p), _, _) => format!(" The stalls recur every ~{} s.", p / 1000),
        _ => String::new(),
    }
}

/// When the bottleneck alternates between vertices and the averages name one of them,
/// the verdict names every one with its share of the time.
fn with_alternation(ctx: &Context, mut located: Located) -> Located {
    let holders = ctx.timeline.holders_over(ctx.cfg.thresholds.timeline_holder_share);
    if holders.len() < 2 {
        return located;
    }
    let list = holders
        .iter()
        .map(|(i, s)| format!("{} {}", ctx.signals.vertices[*i].name, pct(*s)))
        .collect::<Vec<_>>()
        .join(", ");
    let first = &ctx.signals.vertices[holders[0].0].name;
    located.report.cause.push(format!(
        "The bottleneck alternates between vertices (window firings, bursts): read sample by sample, the share of the window each holds the job back is {list}; {first} holds it back most often, so the fix starts there, and the others come next."
    ));
    located.report.detail =
        located.report.detail.clone().then(format!(" The bottleneck alternates: {list} of the samples."));
    if located.culprits.first().map(String::as_str) != Some(ctx.signals.vertices[holders[0].0].id.as_str())
        && located.report.finding.is_none()
    {
        located.culprits.retain(|id| *id != ctx.signals.vertices[holders[0].0].id);
        located.culprits.insert(0, ctx.signals.vertices[holders[0].0].id.clone());
    }
    located
}

/// Chains: task metrics cannot tell which operator inside is slow.
fn chain_advice(v: &VertexSignals, report: &mut StepReport) {
    if v.operators.len() > 1 {
        report.cause.push(format!(
            "The vertex chains {} operators ({}); task metrics are per vertex, so they cannot tell which operator inside the chain is slow.",
            v.operators.len(),
            v.operators.join(", ")
        ));
        report.fix.push(format!(
            "To see which of {} is slow, break the chain: disableChaining() on the suspect operator (or startNewChain()), or pipeline.operator-chaining.enabled: false for a test run; a flame graph (rest.flamegraph.enabled: true, then the vertex's Flame Graph tab) shows it without redeploying.",
            v.operators.join(", ")
        ));
    }
}

/// The culprit by the classic method (no busy time): not backpressured, downstream of
/// backpressured vertices, its input buffer pool full and its output pool low.
fn classic_culprit_report(ctx: &Context, first: &VertexSignals, red: &[&VertexSignals], red_list: &str) -> StepReport {
    let t = &ctx.cfg.thresholds;
    let p = first.backpressured_max().unwrap_or(0.0);
    let input = first.in_pool_usage().unwrap_or(0.0);
    let output = match first.out_pool_usage() {
        Some(o) => format!("its output pool nearly empty (outPoolUsage {})", pct(o)),
        None => "no output pool (nothing after it)".to_string(),
    };
    let upstream_red: Vec<String> =
        ctx.signals.upstream_region(&first.id, |u| ctx.is_red(u)).iter().map(|v| v.name.clone()).collect();
    let mut report = StepReport::new(
        Outcome::Hit,
        format!(
            "Backpressured (isBackPressured = 1 in more than {} of samples): {red_list}. First vertex downstream that is not: {} (isBackPressured = 1 in {} of samples), with its input buffer pool full (inPoolUsage {} ≥ {}) and {}. Busy time is unknown: the reporter predates Flink 1.13.",
            pct(t.backpressured_ratio),
            first.name,
            pct(p),
            pct(input),
            pct(t.in_pool_full_ratio),
            output
        ),
    );
    report.cause.push(format!(
        "{} is not backpressured while {} upstream of it {} backpressured, and records wait in front of it: its input buffers are full (inPoolUsage {}) and {}. It takes records more slowly than they arrive, and credit-based flow control slows everything before it.",
        first.name,
        plural(upstream_red.len(), "vertex", "vertices"),
        if upstream_red.len() == 1 { "is" } else { "are" },
        pct(input),
        output
    ));
    if !upstream_red.is_empty() {
        report.not_the_fix.push(format!(
            "More parallelism or resources for the backpressured {} ({}): they wait on {}; the job's throughput is the minimum over its vertices.",
            if upstream_red.len() == 1 { "vertex" } else { "vertices" },
            limited_list(&upstream_red, 8),
            first.name
        ));
    }
    report.evidence.push(ctx.evidence(
        &first.name,
        "isBackPressured share of samples",
        p,
        "ratio",
        Some(t.backpressured_ratio),
        "backpressured",
    ));
    report.evidence.push(ctx.evidence(
        &first.name,
        "inPoolUsage",
        input,
        "ratio",
        Some(t.in_pool_full_ratio),
        "in_pool_usage",
    ));
    if let Some(o) = first.out_pool_usage() {
        report.evidence.push(ctx.evidence(
            &first.name,
            "outPoolUsage",
            o,
            "ratio",
            Some(t.out_pool_low_ratio),
            "out_pool_usage",
        ));
    }
    for v in red {
        report.evidence.push(ctx.evidence(
            &v.name,
            "isBackPressured share of samples",
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
    // Without busy time (Flink ≤ 1.12) the receiver's input buffer pool says it is not the
    // one holding records back.
    let (not_busy, receiver_state) = match to_v.busy_max() {
        Some(b) => (format!("nor busy ({})", pct(b)), format!("is {} busy and not backpressured", pct(b))),
        None => {
            let input = to_v.in_pool_usage().map(pct).unwrap_or_else(|| "unknown".into());
            (
                format!("nor short of input buffers (inPoolUsage {input}; busy time unknown)"),
                format!("has free input buffers (inPoolUsage {input}) and is not backpressured"),
            )
        }
    };
    let detail = format!(
        "Backpressured (p_max > {:.2}): {red_list}. The backpressure stops at the exchange {} → {}: {} is neither backpressured ({}) {not_busy}.",
        t.backpressured_ratio,
        from_v.name,
        to_v.name,
        to_v.name,
        pct_or_unknown(to_v.backpressured_max()),
    );
    let mut report = StepReport::hit(Finding::Network, detail);
    report.cause.push(format!(
        "{} waits to send while {} {receiver_state}: the exchange between them (network, serialization, a stuck channel) is slow, not an operator.",
        from_v.name, to_v.name,
    ));
    report.fix.push(format!(
        "Look at the exchange {} → {}: network between the TaskManagers (bandwidth, packet loss), serialization cost of the records (Kryo fallback: pipeline.generic-types: false shows it), and the network buffers (taskmanager.memory.network.fraction; outPoolUsage of {} and inPoolUsage of {}).",
        from_v.name, to_v.name, from_v.name, to_v.name
    ));
    report.summary = Some(format!(
        "Inconclusive: backpressure stops at the exchange {} → {}, whose receiver is neither backpressured nor busy.",
        from_v.name, to_v.name
    ).into());
    for v in [from_v, to_v] {
        if let Some(b) = v.busy_max() {
            report.evidence.push(ctx.evidence(&v.name, "busyTimeMsPerSecond", b, "ratio", Some(t.busy_ratio), "busy"));
        }
    }
    if let Some(input) = to_v.in_pool_usage().filter(|_| to_v.busy_max().is_none()) {
        report.evidence.push(ctx.evidence(
            &to_v.name,
            "inPoolUsage",
            input,
            "ratio",
            Some(t.in_pool_full_ratio),
            "in_pool_usage",
        ));
    }
    report
}

/// The report when the vertices below the red ones have no or partial metrics.
/// `classic`: the reporter predates Flink 1.13, and only buffer pool usage could decide.
fn unknown_report(unknown: &[&VertexSignals], red_list: &str, classic: bool) -> StepReport {
    let names: Vec<String> = unknown
        .iter()
        .map(|v| match v.missing_subtasks() {
            0 => v.name.clone(),
            _ => format!("{}: {} of {} subtasks report", v.name, v.subtask_count(), v.parallelism),
        })
        .collect();
    let names = if names.is_empty() { "none found".to_string() } else { names.join(", ") };
    if classic {
        return StepReport::no_data(
            format!(
                "Backpressured: {red_list}, but the reporter predates Flink 1.13 (no busy time) and the vertices downstream of them report no input buffer pool usage to confirm a culprit ({names})."
            ),
            vec!["inPoolUsage".into(), "outPoolUsage".into()],
        );
    }
    StepReport::no_data(
        format!("Backpressured: {red_list}, but the vertices downstream of them have no or partial metrics ({names})."),
        vec!["busyTimeMsPerSecond".into(), "backPressuredTimeMsPerSecond".into()],
    )
}

/// Nothing backpressured: the source is the culprit when its lag grows steadily and it is
/// busy — or its busy time is unknown (legacy sources report NaN), with lowered
/// confidence. A source chain that holds an async I/O operator waiting on its service
/// (busy, with idle CPUs) is `async_io` instead: more source parallelism would only add
/// waiting slots in front of the same slow service.
fn source_bound(ctx: &Context) -> Located {
    let t = &ctx.cfg.thresholds;
    for v in ctx.signals.vertices.iter().filter(|v| v.is_source) {
        let busy = v.busy_max();
        if busy.is_some_and(|b| b < t.source_busy_ratio) {
            continue;
        }
        let Some(growth) = steady_growth(&source_lag(ctx, &v.id)) else { continue };
        if let Some(report) = v.utilisation().and_then(|rho| headroom::async_io(ctx, v, rho)) {
            return Located { report, culprits: vec![v.id.clone()], network: Vec::new() };
        }
        return Located {
            report: source_report(ctx, v, busy, growth),
            culprits: vec![v.id.clone()],
            network: Vec::new(),
        };
    }
    Located {
        report: StepReport::clear(format!("No vertex is backpressured (every p_max ≤ {:.2}).", t.backpressured_ratio)),
        culprits: Vec::new(),
        network: Vec::new(),
    }
}

/// The report naming source `v` (busy `busy`, unknown when `None`) whose lag grows by
/// `growth` records/s.
fn source_report(ctx: &Context, v: &VertexSignals, busy: Option<f64>, growth: f64) -> StepReport {
    let t = &ctx.cfg.thresholds;
    let busy_text = busy.map(|b| format!("is busy {}", pct(b))).unwrap_or_else(|| "has an unknown busy time".into());
    let mut r = StepReport::hit(
        Finding::Source,
        format!(
            "Nothing is backpressured; source {} {busy_text} and its lag grows steadily by {} records/s: the source itself is the bottleneck.",
            v.name,
            num(growth)
        ),
    );
    let emitted = v.throughput().map(|e| format!(", emitting {} records/s", num(e))).unwrap_or_default();
    r.cause.push(match busy {
        Some(b) => format!(
            "{} spends {} of its time reading and emitting{emitted}, with no backpressure from downstream, and its lag grows by {} records/s: it cannot read as fast as data arrives.",
            v.name,
            pct(b),
            num(growth)
        ),
        None => format!(
            "{}'s busy and idle time are unknown (Flink cannot measure them for a legacy SourceFunction source), so its load cannot be read; but nothing downstream is backpressured or holds it back{emitted}, and its lag grows steadily by {} records/s: it cannot read as fast as data arrives. This rests on the lag alone, so the confidence is lowered.",
            v.name,
            num(growth)
        ),
    });
    r.fix.push(format!(
        "Raise {}'s parallelism (now {}) up to the number of partitions of its topic; beyond that, add partitions.",
        v.name, v.parallelism
    ));
    r.fix.push(
        "Tune the source's fetch settings (Kafka: properties.fetch.min.bytes, properties.max.partition.fetch.bytes, properties.max.poll.records) and check deserialization cost.",
    );
    if busy.is_none() {
        r.fix.push(
            "Move to the FLIP-27 KafkaSource: it reports busy, idle and pendingRecords, so its load can be read.",
        );
    }
    r.summary = Some(
        format!(
            "Source {} is the culprit: {}; its lag grows by {} records/s.",
            v.name,
            match busy {
                Some(b) => format!("it is {} busy and cannot keep up", pct(b)),
                None => "it cannot keep up (its busy time is unknown)".into(),
            },
            num(growth)
        )
        .into(),
    );
    if let Some(b) = busy {
        r.evidence.push(ctx.evidence(&v.name, "busyTimeMsPerSecond", b, "ratio", Some(t.source_busy_ratio), "busy"));
    }
    r.evidence.push(ctx.evidence(&v.name, "lag growth", growth, "records/s", Some(0.0), "pending_records"));
    r
}

/// The growth of a lag series, records/s, when it grows steadily: the least-squares slope,
/// when the growth it makes over the series' span exceeds the spread of the lag around the
/// line (an exporter's lag saw-tooths with the checkpoints, because Flink commits offsets
/// only when one completes: that is not growth).
pub fn steady_growth(points: &[(i64, f64)]) -> Option<f64> {
    let slope = slope_per_s(points).filter(|g| *g > 0.0)?;
    let pts: Vec<(f64, f64)> = points.iter().filter(|p| p.1.is_finite()).map(|p| (p.0 as f64 / 1000.0, p.1)).collect();
    let n = pts.len() as f64;
    let (mt, mv) = (pts.iter().map(|p| p.0).sum::<f64>() / n, pts.iter().map(|p| p.1).sum::<f64>() / n);
    let residuals = pts.iter().map(|p| p.1 - (mv + slope * (p.0 - mt)));
    let spread = residuals.clone().fold(f64::MIN, f64::max) - residuals.fold(f64::MAX, f64::min);
    let span = pts.last()?.0 - pts.first()?.0;
    (slope * span > spread).then_some(slope)
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
        assert!(
            located.report.not_the_fix[0].to_string().contains("Source: txn, parse"),
            "{:?}",
            located.report.not_the_fix
        );
        assert!(located.network.is_empty());
    }

    #[test]
    fn a_receiver_without_backpressure_data_is_not_judged_as_an_exchange_from_a_missing_value() {
        // src and parse red (p_max 0.97, 0.95); score reports busy 0.10 but no
        // backPressuredTimeMsPerSecond. Read as 0 it would be "neither backpressured nor
        // busy": the exchange parse → score. Unknown, it is not judged, and the step says so.
        let snap = line_job()
            .all_subtasks("src", 0.02, 0.97, 0.01, None)
            .all_subtasks("parse", 0.03, 0.95, 0.02, 1000.0)
            .all_subtasks("score", 0.10, None, 0.90, 1000.0)
            .all_subtasks("sink", 0.05, 0.0, 0.95, 1000.0)
            .build();
        let located = with_context(&snap, run);
        assert_ne!(located.report.finding, Some(Finding::Network));
        assert!(located.network.is_empty());
        assert!(located.report.detail.to_string().contains("score"), "{}", located.report.detail);
        assert!(!located.report.detail.to_string().contains("score 0%"), "{}", located.report.detail);
    }

    #[test]
    fn a_culprit_with_a_subtask_without_busy_data_says_what_its_maximum_is_over() {
        // score: busy 0.98 and none; b_max = 0.98 over the 1 of 2 subtasks with data.
        let snap = line_job()
            .all_subtasks("src", 0.02, 0.97, 0.01, None)
            .all_subtasks("parse", 0.03, 0.95, 0.02, 1000.0)
            .subtask("score", 0, 0.98, 0.0, 0.02, 1000.0)
            .subtask("score", 1, None, 0.0, None, 1000.0)
            .all_subtasks("sink", 0.05, 0.0, 0.95, 1000.0)
            .build();
        let located = with_context(&snap, run);
        assert_eq!(located.culprits, ["score"]);
        assert!(
            located.report.cause[0]
                .to_string()
                .contains("busy 98% of the time (max over the 1 of 2 subtasks with data)"),
            "{:?}",
            located.report.cause
        );
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
        assert!(located.report.cause[0].to_string().contains("(max over 2 subtasks)"), "{:?}", located.report.cause);
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
        assert!(
            located.report.detail.to_string().contains("score: 1 of 2 subtasks report"),
            "{}",
            located.report.detail
        );
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
        assert!(located.report.detail.to_string().contains("parse → score"), "{}", located.report.detail);

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
            located.report.detail.to_string().contains("a-score (3 red upstream), b-score (1 red upstream)"),
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
        assert_close(evidence(&located.report.evidence, "lag growth").value, 100.0, 1e-6);
        assert!(located.report.fix[0].to_string().contains("parallelism (now 2)"), "{:?}", located.report.fix);

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
        assert!(located.report.detail.to_string().contains("score"), "{}", located.report.detail);
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
        assert!(located.report.detail.to_string().contains("Without the job graph"), "{}", located.report.detail);

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

    /// A consumer-group lag that saw-tooths with the checkpoints: it drops by `drop` at
    /// each commit (every 60 s) and climbs `per_s` in between, over the window.
    fn sawtooth(trend_per_s: f64) -> Vec<(i64, f64)> {
        // Climbs 4000 records/s between commits, drops by 240,000 at each: flat on
        // average, plus `trend_per_s`.
        (-295..=0)
            .step_by(5)
            .map(|s| {
                let since_commit = (s + 300) % 60;
                (t(s), 500_000.0 + 4000.0 * since_commit as f64 + trend_per_s * (s + 300) as f64)
            })
            .collect()
    }

    #[test]
    fn steady_growth_is_growth_beyond_the_sawtooth_of_commits() {
        // Flat sawtooth: slope ~0 and a spread of 236,000 → not growth.
        assert_eq!(steady_growth(&sawtooth(0.0)), None);
        // +2000 records/s: 2000 × 295 s = 590,000 > the spread (~240,000) → growth ≈ 2000.
        let g = steady_growth(&sawtooth(2000.0)).unwrap();
        assert!((g - 2000.0).abs() < 200.0, "{g}");
        // A clean line is growth however small.
        assert_eq!(steady_growth(&line(-300, 0, 5, 0.0, 1.0)), Some(1.0));
    }

    /// Legacy source (busy and idle NaN: unknown) → keyed → sink, nothing backpressured and
    /// downstream mostly idle; the consumer group's lag saw-tooths, plus `trend` records/s.
    fn legacy_source(trend: f64) -> crate::model::snapshot::Snapshot {
        let p = crate::model::snapshot::PartitionLag { lag_records: sawtooth(trend), ..partition("clicks", "0") };
        line_job()
            .all_subtasks("src", None, 0.0, None, None)
            .records_out("src", 0, 2871.0)
            .records_out("src", 1, 2871.0)
            .all_subtasks("parse", 0.16, 0.0, 0.84, 5742.0)
            .all_subtasks("score", 0.16, 0.0, 0.84, 5742.0)
            .all_subtasks("sink", 0.09, 0.0, 0.91, 5742.0)
            .partition(p)
            .build()
    }

    #[test]
    fn a_source_with_unknown_busy_time_and_a_steadily_growing_lag_is_the_culprit_with_lowered_confidence() {
        let v = verdict(&legacy_source(2000.0));
        assert_eq!((v.status, v.finding), (Status::CulpritFound, Finding::Source));
        assert_eq!(v.culprit.as_ref().unwrap().vertex_id, "src");
        assert_eq!(v.confidence, crate::model::verdict::Confidence::Medium);
        // Unknown, never 0: no busy evidence, the graph says null, the cause says unknown.
        assert_eq!(v.graph.vertices[0].busy_max, None);
        assert!(!v.evidence.iter().any(|e| e.subject == "Source: txn" && e.metric == "busyTimeMsPerSecond"));
        assert!(v.cause.contains("busy and idle time are unknown"), "{}", v.cause);
        assert!(v.summary.contains("its busy time is unknown"), "{}", v.summary);
    }

    #[test]
    fn the_same_source_whose_lag_only_saw_tooths_with_the_commits_is_no_culprit() {
        let v = verdict(&legacy_source(0.0));
        assert_eq!((v.status, v.finding), (Status::NoBackpressure, Finding::None));
    }

    #[test]
    fn an_async_wait_chained_with_the_source_on_idle_cpus_is_async_io_not_source() {
        // One vertex: source → async wait → writer, busy 0.99 at CPU 0.07, nothing red, the
        // lag grows 100 records/s. The source-bound rule fits by the letter; async_io
        // decides first. The async operator completes 2 × 150 = 300 requests/s (operator
        // scope: the task counters of a source-and-sink vertex say 0).
        let snap = SnapshotBuilder::new()
            .vertex("all", "Source: pings -> async wait operator -> Writer", 2)
            .all_subtasks("all", 0.99, 0.0, 0.01, 0.0)
            .records_out("all", 0, 0.0)
            .records_out("all", 1, 0.0)
            .on_taskmanager("all", 0, "tm-1", "node-1")
            .on_taskmanager("all", 1, "tm-2", "node-2")
            .taskmanager("tm-1", 1.0, 0.07)
            .taskmanager("tm-2", 1.0, 0.07)
            .operator_rates("all", "Source: pings", 320.0, 320.0)
            .operator_rates("all", "async wait operator", 300.0, 300.0)
            .pending_records("all", 0, line(-295, 0, 5, 0.0, 50.0))
            .pending_records("all", 1, line(-295, 0, 5, 0.0, 50.0))
            .build();
        let v = verdict(&snap);
        assert_eq!((v.status, v.finding), (Status::CulpritFound, Finding::AsyncIo));
        // 300 requests/s over 2 subtasks = 150 per subtask per second = capacity ÷ latency:
        // with a capacity of 100, 100 × 2 / 300 = 0.67 s per request.
        assert!(v.cause.contains("150 per subtask per second"), "{}", v.cause);
        assert!(v.cause.contains("0.67 s per request"), "{}", v.cause);
        assert!(v.not_the_fix.iter().any(|n| n.starts_with("More source parallelism")), "{:?}", v.not_the_fix);
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
            located.report.cause.iter().any(|c| c.to_string().contains("chains 2 operators (enrich, score)")),
            "{:?}",
            located.report.cause
        );
        assert!(
            located.report.fix.iter().any(|f| f.to_string().contains("disableChaining()")),
            "{:?}",
            located.report.fix
        );
    }

    /// Flink ≤ 1.12: no busy time, backpressure as the share of isBackPressured samples,
    /// and buffer pool usage `(vertex, inPoolUsage, outPoolUsage)` per vertex.
    fn classic_job(pools: &[(&str, Option<f64>, Option<f64>)], candidate: &str) -> crate::model::snapshot::Snapshot {
        let mut b = line_job();
        for v in ["src", "parse", "score", "sink"] {
            // Red up to the candidate, not red from it on.
            let red = ["src", "parse", "score", "sink"].iter().position(|x| *x == v)
                < ["src", "parse", "score", "sink"].iter().position(|x| *x == candidate);
            b = b.all_subtasks(v, None, if red { 1.0 } else { 0.0 }, 0.02, 1000.0);
        }
        let mut snap = b.build();
        snap.backpressure_measure = BackpressureMeasure::IsBackPressuredShare;
        for (id, input, output) in pools {
            let a = snap.vertex_aggregates.iter_mut().find(|a| a.vertex_id == *id).unwrap();
            (a.in_pool_usage_max, a.out_pool_usage_max) = (*input, *output);
        }
        snap
    }

    #[test]
    fn without_busy_time_a_full_input_pool_and_a_low_output_pool_make_the_culprit() {
        // src, parse: isBackPressured in every sample (share 1.0 > 0.10); score in none, its
        // input pool 0.97 ≥ 0.9 and output pool 0.2 ≤ 0.5.
        let snap = classic_job(&[("score", Some(0.97), Some(0.2)), ("sink", Some(0.1), None)], "score");
        let located = with_context(&snap, run);
        assert_eq!(located.culprits, ["score"]);
        assert_eq!(evidence(&located.report.evidence, "inPoolUsage").value, 0.97);
        assert_eq!(evidence(&located.report.evidence, "outPoolUsage").value, 0.2);
        assert!(!located.report.evidence.iter().any(|e| e.metric == "busyTimeMsPerSecond"));
        assert!(located.report.detail.to_string().contains("predates Flink 1.13"), "{}", located.report.detail);
        assert!(
            !located.report.cause.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(" ").contains("busy 0%"),
            "{:?}",
            located.report.cause
        );
    }

    #[test]
    fn without_busy_time_a_sink_with_a_full_input_pool_and_no_output_pool_is_the_culprit() {
        let snap = classic_job(&[("sink", Some(1.0), None)], "sink");
        let located = with_context(&snap, run);
        assert_eq!(located.culprits, ["sink"]);
        assert!(located.report.cause[0].to_string().contains("no output pool"), "{:?}", located.report.cause);
    }

    #[test]
    fn without_busy_time_an_input_pool_that_is_not_full_points_at_the_exchange() {
        // score's input pool 0.3 < 0.9: records do not wait in front of it.
        let snap = classic_job(&[("score", Some(0.3), Some(0.1))], "score");
        let located = with_context(&snap, run);
        assert!(located.culprits.is_empty());
        assert_eq!(located.network, [("parse".to_string(), "score".to_string())]);
        assert_eq!(located.report.finding, Some(Finding::Network));
        assert!(located.report.detail.to_string().contains("inPoolUsage 30%"), "{}", located.report.detail);
    }

    #[test]
    fn without_busy_time_or_buffer_pools_nothing_is_concluded_and_the_pools_are_missing() {
        let snap = classic_job(&[], "score");
        let located = with_context(&snap, run);
        assert!(located.culprits.is_empty() && located.network.is_empty());
        assert_eq!(located.report.outcome, Outcome::NoData);
        assert_eq!(located.report.missing, ["inPoolUsage", "outPoolUsage"]);
    }
}
