//! The runbook: the ordered list of steps, and the verdict assembled from their reports.
//!
//! Order (spec §2, with the added steps): `failover` → `locate` → `sink` → `sources` → `hot_key` → `resources` → `state_backend` →
//! `state_growth` → `checkpoints` → `headroom`. A job failing over (`failover` hits) is its
//! own outcome: every other step is skipped. Else `locate` finds the culprit; the finding is the first later step that hits,
//! and the steps after it are `skipped`. When `locate` itself decides (`network`,
//! `source`), the later steps are skipped. The hazards (`retention`,
//! `checkpoints_stalled`, `checkpoint_timeout`) run on every diagnosis.

use std::collections::BTreeSet;

use crate::config::DiagnosisConfig;
use crate::diagnose::signals::{JobSignals, VertexSignals};
use crate::diagnose::steps::locate::Located;
use crate::diagnose::steps::{
    checkpoints, failover, headroom, hot_key, locate, resources, retention, sink, sources, state_backend, state_growth,
};
use crate::diagnose::{Context, StepReport};
use crate::model::facts::runbook::RunbookFact;
use crate::model::facts::{Diagnosis, Fact, Facts, MissingFact, StepFacts, Summary};
use crate::model::snapshot::{Snapshot, WindowBound};
use crate::model::verdict::{
    Confidence, Culprit, Evidence, Finding, Graph, GraphEdge, GraphVertex, JobRef, Outcome, Role, Severity, Status,
    StepName, VertexState,
};

/// Diagnoses one snapshot. Pure: the same snapshot and configuration always give the same
/// diagnosis; `crate::render::words::verdict` words it.
pub fn diagnose(snapshot: &Snapshot, cfg: &DiagnosisConfig) -> Diagnosis {
    let signals = JobSignals::derive(snapshot, cfg);
    let ctx = Context::new(snapshot, &signals, cfg);
    let run = run_steps(&ctx);
    let finding_report = run.finding_report();
    let finding = finding_report.and_then(|r| r.finding).unwrap_or(Finding::None);
    let status = run.status(&ctx, finding);
    // A vertex that holds the job back for a reason no step finds is its own outcome,
    // never "culprit found" with no finding.
    let finding =
        if status == Status::CulpritFound && finding == Finding::None { Finding::Unexplained } else { finding };
    let culprit_shown = if matches!(status, Status::CulpritFound) { run.culprit } else { None };
    let (mut hazards, retention) = retention::evaluate(&ctx);
    // Warnings come after the critical hazards (retention's are sorted so already).
    hazards.extend(state_growth::timeout_hazard(&ctx));

    let evaluated: Vec<&StepReport> =
        run.reports.iter().map(|(_, r)| r).filter(|r| r.outcome != Outcome::Skipped).collect();
    let mut explained = explain(&run, finding_report, status, finding, culprit_shown);
    let culprit_id = culprit_shown.map(|c| c.id.as_str());
    if let Some(cut) = super::changes::cut_culprit(snapshot, culprit_id, finding == Finding::Sink) {
        let mut fix = Facts::from([cut]);
        fix.extend(explained.fix);
        explained.fix = fix;
    }
    let mut advice: Vec<Fact> = evaluated.iter().flat_map(|r| r.advice.iter().cloned()).collect();
    // The operator autoscaler's recommendation: "not the fix" when its next step cannot help.
    let autoscaler = super::autoscaler::evaluate(&ctx, culprit_shown, finding);
    if let Some(view) = autoscaler.clone() {
        let cannot_help = view.next_step_helps == Some(false);
        let fact = Fact::from(crate::model::facts::autoscaler::AutoscalerFact { view, finding });
        if cannot_help { explained.not_the_fix.push(fact) } else { advice.push(fact) }
    }
    let mut evidence: Vec<Evidence> = Vec::new();
    for r in &evaluated {
        for e in &r.evidence {
            if !evidence.iter().any(|x| x.subject == e.subject && x.metric == e.metric) {
                evidence.push(e.clone());
            }
        }
    }
    // Only what would change or firm up this verdict: checkpoint metrics matter when the
    // checkpoints step ran (it then lists them itself).
    let checkpoints_ran = run.reports.iter().any(|(s, r)| *s == StepName::Checkpoints && r.outcome != Outcome::Skipped);
    let mut missing: Vec<MissingFact> = snapshot
        .missing
        .iter()
        .filter(|m| checkpoints_ran || !m.metric.ends_with("lastCheckpointDuration"))
        .map(|m| MissingFact::Collected(m.clone()))
        .collect();
    for r in &evaluated {
        missing.extend(r.missing.iter().cloned().map(MissingFact::Metric));
        missing.extend(r.missing_inputs.iter().cloned().map(MissingFact::Input));
    }
    missing.extend(retention.missing.into_iter().map(MissingFact::Input));

    let (culprit_out, culprits) = culprits(&ctx, &run, finding_report, status, culprit_shown);
    let summary = Summary {
        hazard: hazards.iter().find(|h| h.severity == Severity::Critical).cloned(),
        line: finding_report
            .and_then(|r| r.summary.clone())
            .unwrap_or_else(|| default_summary(&ctx, status, culprit_shown).into()),
        more_culprits: culprits.iter().skip(1).map(|c| c.vertex_name.clone()).collect(),
        changes: super::changes::summary_tail(snapshot),
        // A clear step's summary: only when no step gave the line.
        health: if finding_report.is_none() {
            run.reports
                .iter()
                .filter(|(_, r)| r.outcome == Outcome::Clear)
                .filter_map(|(_, r)| r.summary.clone())
                .collect()
        } else {
            Vec::new()
        },
    };
    let mut notes = notes(snapshot, &signals, cfg, finding == Finding::FailingOver);
    notes.extend(retention.notes);
    let confidence = confidence(&ctx, status, finding, &run, &missing);
    let graph = verdict_graph(&ctx, &culprits);
    let cause = explained.cause.into_vec();
    let attribution = super::attribution::attribute(snapshot, culprit_out.as_ref(), finding, &cause);

    Diagnosis {
        job: JobRef { name: snapshot.job.name.clone(), id: snapshot.job.id.clone() },
        at_ms: snapshot.at_ms,
        window_seconds: (snapshot.window.len_ms() as f64 / 1000.0).round() as i64,
        window_start_ms: snapshot.window.start_ms,
        status,
        finding,
        culprit: culprit_out,
        culprits,
        summary,
        cause,
        fix: explained.fix.into_vec(),
        not_the_fix: explained.not_the_fix.into_vec(),
        advice,
        steps: run
            .reports
            .into_iter()
            .map(|(step, r)| StepFacts { step, outcome: r.outcome, detail: r.detail })
            .collect(),
        hazards,
        evidence,
        graph,
        confidence,
        missing,
        notes,
        timeline: ctx.timeline.view(&signals, cfg, snapshot.step_ms),
        autoscaler,
        attribution,
    }
}

/// The runbook's steps, run in order over one snapshot.
struct Run<'a> {
    located: Located,
    /// The first culprit `locate` ranked.
    culprit: Option<&'a VertexSignals>,
    /// `locate` decided the finding itself (`network`, `source`).
    locate_decides: bool,
    /// Every step's report, in runbook order.
    reports: Vec<(StepName, StepReport)>,
    /// The first later step that hit.
    hit: Option<StepName>,
    /// `headroom` found several vertices near capacity, none alone the culprit.
    no_single_culprit: bool,
}

/// Runs `locate`, then the later steps on its culprit until one hits; the steps after a
/// hit, or after `locate` decided, are `skipped`.
fn run_steps<'a>(ctx: &Context<'a>) -> Run<'a> {
    let failing = failover::run(ctx);
    if failing.report.outcome == Outcome::Hit {
        return failing_over(ctx, failing);
    }
    let located = locate::run(ctx);
    let culprit: Option<&VertexSignals> = located.culprits.first().and_then(|id| ctx.signals.vertex(id));
    let locate_decides = located.report.finding.is_some();
    let mut reports: Vec<(StepName, StepReport)> =
        vec![(StepName::Failover, failing.report), (StepName::Locate, located.report.clone())];
    let mut hit: Option<StepName> = None;
    let mut no_single_culprit = false;
    let examined = culprit.filter(|_| !locate_decides);

    for step in StepName::ALL.into_iter().filter(|s| !matches!(s, StepName::Failover | StepName::Locate)) {
        if locate_decides || hit.is_some() {
            reports.push((step, StepReport::new(Outcome::Skipped, skipped_detail(hit, &located.report))));
            continue;
        }
        let report = match (step, examined) {
            (StepName::Sink, Some(c)) => sink::run(ctx, c),
            (StepName::Sources, Some(c)) => sources::run(ctx, c),
            (StepName::Sources, None) if ctx.red.is_empty() => sources::without_culprit(ctx),
            (StepName::StateGrowth, None) if ctx.red.is_empty() => state_growth::without_culprit(ctx),
            (StepName::HotKey, Some(c)) => hot_key::run(ctx, c),
            (StepName::Resources, Some(c)) => resources::run(ctx, c),
            (StepName::StateBackend, Some(c)) => state_backend::run(ctx, c),
            (StepName::StateGrowth, Some(c)) => state_growth::run(ctx, c),
            (
                StepName::Sink
                | StepName::Sources
                | StepName::HotKey
                | StepName::Resources
                | StepName::StateBackend
                | StepName::StateGrowth,
                None,
            ) => StepReport::clear(RunbookFact::NoCulpritToExamine { nothing_red: ctx.red.is_empty() }),
            (StepName::Checkpoints, c) => checkpoints::run(ctx, c),
            (StepName::Headroom, c) => {
                let h = headroom::run(ctx, c);
                no_single_culprit = h.no_single_culprit;
                h.report
            }
            (StepName::Failover | StepName::Locate, _) => unreachable!("failover and locate run first"),
        };
        if report.outcome == Outcome::Hit {
            hit = Some(step);
        }
        reports.push((step, report));
    }
    Run { located, culprit, locate_decides, reports, hit, no_single_culprit }
}

/// The run of a job failing over: `failover` hit, every other step is skipped, and the
/// culprit is the vertex whose task throws (none when unknown).
fn failing_over<'a>(ctx: &Context<'a>, failing: failover::Failing) -> Run<'a> {
    let skipped = || StepReport::new(Outcome::Skipped, RunbookFact::SkippedAfterHit { step: StepName::Failover });
    let culprit = failing.vertex_id.as_deref().and_then(|id| ctx.signals.vertex(id));
    let located = Located { report: skipped(), culprits: failing.vertex_id.into_iter().collect(), network: Vec::new() };
    let mut reports = vec![(StepName::Failover, failing.report)];
    reports.extend(StepName::ALL.into_iter().skip(1).map(|s| (s, skipped())));
    Run { located, culprit, locate_decides: false, reports, hit: Some(StepName::Failover), no_single_culprit: false }
}

impl Run<'_> {
    /// The report that carries the finding: `locate`'s when it decided, else the step that
    /// hit.
    fn finding_report(&self) -> Option<&StepReport> {
        if self.locate_decides {
            Some(&self.located.report)
        } else {
            self.hit.and_then(|s| self.reports.iter().find(|(n, _)| *n == s)).map(|(_, r)| r)
        }
    }

    fn status(&self, ctx: &Context, finding: Finding) -> Status {
        match (&self.located.report.outcome, finding) {
            (Outcome::NoData, _) => Status::Inconclusive,
            (_, Finding::Network) => Status::Inconclusive,
            // Failing over, but which task throws is unknown (no exception history).
            (_, Finding::FailingOver) if self.culprit.is_none() => Status::Inconclusive,
            _ if self.no_single_culprit => Status::NoSingleCulprit,
            _ if self.culprit.is_some() => Status::CulpritFound,
            _ if !ctx.red.is_empty() => Status::Inconclusive,
            _ => Status::NoBackpressure,
        }
    }
}

/// Cause, fix and not-the-fix sentences of a verdict, before deduplication.
struct Explained {
    cause: Facts,
    fix: Facts,
    not_the_fix: Facts,
}

/// Cause, fix, not the fix: `locate`'s first, then the finding's.
fn explain(
    run: &Run,
    finding_report: Option<&StepReport>,
    status: Status,
    finding: Finding,
    culprit_shown: Option<&VertexSignals>,
) -> Explained {
    let located = &run.located.report;
    let mut cause = Facts::new();
    let mut fix = Facts::new();
    let mut not_the_fix = Facts::new();
    if status != Status::NoSingleCulprit {
        cause.extend(located.cause.iter().cloned());
    }
    if let Some(r) = finding_report.filter(|_| !run.locate_decides) {
        cause.extend(r.cause.iter().cloned());
        fix.extend(r.fix.iter().cloned());
        not_the_fix.extend(r.not_the_fix.iter().cloned());
    }
    if status != Status::NoSingleCulprit {
        fix.extend(located.fix.iter().cloned());
        not_the_fix.extend(located.not_the_fix.iter().cloned());
    }
    // A culprit without any series is named by where the backpressure stops; its own
    // words say so (no utilisation to show, nothing to profile before its metrics return).
    if let Some(c) = culprit_shown.filter(|c| finding == Finding::Unexplained && !locate::without_series(c)) {
        cause.push(RunbookFact::UnexplainedCause {
            utilisation_ratio: c.utilisation(),
            capacity_records_per_s: c.capacity(),
        });
        fix.push(RunbookFact::ProfileIt { vertex: c.name.clone() });
    }
    Explained { cause, fix, not_the_fix }
}

/// The culprit shown first (with the subtasks the finding names) and every culprit
/// `locate` ranked, when a culprit was found.
fn culprits(
    ctx: &Context,
    run: &Run,
    finding_report: Option<&StepReport>,
    status: Status,
    culprit_shown: Option<&VertexSignals>,
) -> (Option<Culprit>, Vec<Culprit>) {
    let all_subtasks = |v: &VertexSignals| -> Vec<u32> {
        if v.subtasks.is_empty() {
            (0..v.parallelism_now()).collect()
        } else {
            v.subtasks.iter().map(|s| s.subtask).collect()
        }
    };
    let subtasks_of = |v: &VertexSignals| -> Vec<u32> {
        finding_report.and_then(|r| r.subtasks.clone()).unwrap_or_else(|| all_subtasks(v))
    };
    let to_culprit = |v: &VertexSignals, subtasks: Vec<u32>| Culprit {
        vertex_id: v.id.clone(),
        vertex_name: v.name.clone(),
        operators: v.operators.clone(),
        role: if v.is_source {
            Role::Source
        } else if v.is_sink {
            Role::Sink
        } else {
            Role::Operator
        },
        parallelism: v.parallelism,
        subtasks,
    };
    let culprit_out = culprit_shown.map(|c| to_culprit(c, subtasks_of(c)));
    let culprits: Vec<Culprit> = if status == Status::CulpritFound {
        run.located
            .culprits
            .iter()
            .filter_map(|id| ctx.signals.vertex(id))
            .enumerate()
            .map(|(i, v)| {
                to_culprit(v, if i == 0 { subtasks_of(v) } else { v.subtasks.iter().map(|s| s.subtask).collect() })
            })
            .collect()
    } else {
        Vec::new()
    };
    (culprit_out, culprits)
}

/// The snapshot's notes, and what limits the diagnosis: no graph, start-up in the window,
/// subtasks without metrics, vertices the plan does not have.
/// `failing_over`: the job fails and restarts, its warm-ups are its state, not a reason to
/// wait (no note about them).
fn notes(snapshot: &Snapshot, signals: &JobSignals, cfg: &DiagnosisConfig, failing_over: bool) -> Vec<Fact> {
    let mut notes: Vec<Fact> = snapshot.notes.iter().cloned().map(Fact::Text).collect();
    if signals.graph_free {
        notes.push(RunbookFact::GraphFree.into());
    }
    if snapshot.backpressure_measure == crate::model::snapshot::BackpressureMeasure::IsBackPressuredShare {
        notes.push(
            RunbookFact::ClassicBackpressure {
                in_pool_full_ratio: cfg.thresholds.in_pool_full_ratio,
                out_pool_low_ratio: cfg.thresholds.out_pool_low_ratio,
            }
            .into(),
        );
    }
    let startup_ms = startup_in_window_ms(snapshot, cfg);
    let exclusion_s = cfg.startup_exclusion.as_ms() / 1000;
    match warm_up_end_ms(snapshot, cfg) {
        _ if failing_over => {}
        Some(settled) if settled >= snapshot.window.end_ms => {
            let since = settled - cfg.startup_exclusion.as_ms();
            notes.push(
                RunbookFact::TooYoung {
                    restarted: snapshot.window.bound == WindowBound::RestartExcluded,
                    age_s: (snapshot.window.end_ms - since) / 1000,
                    window_end_ms: snapshot.window.end_ms,
                    meaningful_from_ms: settled + cfg.min_window.as_ms(),
                    min_window_s: cfg.min_window.as_ms() / 1000,
                    started_ms: since,
                    exclusion_s,
                }
                .into(),
            );
        }
        _ if startup_ms > 0 => notes.push(
            RunbookFact::WarmUpInWindow {
                uptime_s: snapshot.job_start_ms.map_or(0, |s| (snapshot.at_ms - s) / 1000),
                in_window_s: startup_ms / 1000,
                exclusion_s,
            }
            .into(),
        ),
        _ => {}
    }
    let incomplete: Vec<(String, usize, u32)> = signals
        .vertices
        .iter()
        .filter(|v| v.missing_subtasks() > 0)
        .map(|v| (v.name.clone(), v.subtask_count(), v.parallelism))
        .collect();
    if !incomplete.is_empty() {
        notes.push(RunbookFact::SubtasksWithoutMetrics { vertices: incomplete }.into());
    }
    if !signals.unknown_vertices.is_empty() {
        notes.push(RunbookFact::UnknownVertices { names: signals.unknown_vertices.clone() }.into());
    }
    notes
}

/// The job graph as the verdict draws it: every vertex with its ratios and state.
fn verdict_graph(ctx: &Context, culprits: &[Culprit]) -> Graph {
    let signals = ctx.signals;
    let culprit_ids: BTreeSet<&str> = culprits.iter().map(|c| c.vertex_id.as_str()).collect();
    Graph {
        vertices: signals
            .vertices
            .iter()
            .map(|v| GraphVertex {
                id: v.id.clone(),
                name: v.name.clone(),
                parallelism: v.parallelism,
                busy_max: v.busy_max().map(crate::model::verdict::round_sig),
                backpressured_max: v.backpressured_max().map(crate::model::verdict::round_sig),
                idle_avg: v.idle_avg().map(crate::model::verdict::round_sig),
                state: if culprit_ids.contains(v.id.as_str()) {
                    VertexState::Culprit
                } else if ctx.is_red(v) {
                    VertexState::Backpressured
                } else if v.has_no_metrics() {
                    VertexState::Unknown
                } else {
                    VertexState::Ok
                },
            })
            .collect(),
        edges: signals
            .edges
            .iter()
            .map(|e| GraphEdge { from: e.from.clone(), to: e.to.clone(), ship_strategy: e.ship_strategy.clone() })
            .collect(),
        from_plan: !signals.graph_free,
    }
}

fn skipped_detail(hit: Option<StepName>, located: &StepReport) -> RunbookFact {
    match hit {
        Some(step) => RunbookFact::SkippedAfterHit { step },
        None => RunbookFact::SkippedLocateDecided { finding: located.finding },
    }
}

fn default_summary(ctx: &Context, status: Status, culprit: Option<&VertexSignals>) -> RunbookFact {
    match (status, culprit) {
        (Status::CulpritFound, Some(c)) => {
            RunbookFact::HoldsBackUnexplained { vertex: c.name.clone(), busy_max_ratio: c.busy_max() }
        }
        (Status::NoBackpressure, _) => {
            let busiest = ctx
                .signals
                .vertices
                .iter()
                .filter(|v| v.utilisation().is_some())
                .max_by(|a, b| a.utilisation().unwrap().total_cmp(&b.utilisation().unwrap()));
            RunbookFact::NoBackpressure {
                job: ctx.snapshot.job.name.clone(),
                busiest: busiest.map(|v| (v.name.clone(), v.utilisation())),
            }
        }
        _ => RunbookFact::Inconclusive { job: ctx.snapshot.job.name.clone() },
    }
}

fn confidence(ctx: &Context, status: Status, finding: Finding, run: &Run, missing: &[MissingFact]) -> Confidence {
    let (located, reports) = (&run.located.report, &run.reports);
    if ctx.signals.graph_free || status == Status::Inconclusive || located.outcome == Outcome::NoData {
        return Confidence::Low;
    }
    // A failing job is judged by its restarts and its exception history, not by averages
    // its restarts disturb: high with both, medium without the restart counter.
    if finding == Finding::FailingOver {
        let counted = reports.first().is_some_and(|(_, r)| r.missing.is_empty());
        return if counted { Confidence::High } else { Confidence::Medium };
    }
    // Judgements across subtasks of a vertex the runbook looked into rest on part of it.
    let examined_incomplete = ctx
        .signals
        .vertices
        .iter()
        .any(|v| v.missing_subtasks() > 0 && (!v.subtasks.is_empty() || ctx.red.contains(&v.id)));
    // Every sample still averages over the job's start: nothing representative to judge.
    // A culprit with no series of its own is named by its neighbours' metrics alone.
    let culprit_without_series = run.culprit.is_some_and(locate::without_series);
    if examined_incomplete || only_warm_up(ctx.snapshot, ctx.cfg) || culprit_without_series {
        return Confidence::Low;
    }
    // `sources` only adds explanations: its readers' metrics not reported weakens no other
    // step's finding.
    let no_data_before_finding = reports
        .iter()
        .any(|(s, r)| r.outcome == Outcome::NoData && !matches!(s, StepName::Sources | StepName::Failover));
    // Records counts absent (collected or a step's): throughput-based judgements rest on less.
    let records_missing = missing.iter().any(|m| m.metric().is_some_and(|name| name.contains(NUM_RECORDS_IN)));
    // A culprit whose busy time is unknown (a legacy source's NaN) rests on other signs.
    let culprit_busy_unknown = run.culprit.is_some_and(|c| c.busy_max().is_none());
    // Without demand (lag, pendingRecords) the throughput is the job's maximum, not what it
    // is offered: the parallelism it needs is unknown.
    let demand_unknown = missing.iter().any(|m| {
        matches!(m, MissingFact::Input(Fact::Headroom(crate::model::facts::headroom::HeadroomFact::DemandUnknown)))
    });
    // Flink ≤ 1.12: backpressure sampled once per scrape, busy time unknown.
    let classic =
        ctx.snapshot.backpressure_measure == crate::model::snapshot::BackpressureMeasure::IsBackPressuredShare;
    if (status == Status::CulpritFound && finding == Finding::Unexplained)
        || no_data_before_finding
        || records_missing
        || culprit_busy_unknown
        || demand_unknown
        || classic
        || startup_in_window_ms(ctx.snapshot, ctx.cfg) > 0
    {
        return Confidence::Medium;
    }
    Confidence::High
}

/// When the warm-up after the job's latest start, restart or rescale ends, Unix ms: the
/// collector's (it sees restarts), else the job start plus `startup_exclusion`.
fn warm_up_end_ms(snapshot: &Snapshot, cfg: &DiagnosisConfig) -> Option<i64> {
    let from_start = snapshot.job_start_ms.map(|start| start + cfg.startup_exclusion.as_ms());
    snapshot.window.settled_ms.max(from_start)
}

/// True when the window ends inside the warm-up: no sample of it is representative (a job
/// younger than its warm-up; the collector keeps `min_window` even then).
fn only_warm_up(snapshot: &Snapshot, cfg: &DiagnosisConfig) -> bool {
    warm_up_end_ms(snapshot, cfg).is_some_and(|settled| settled >= snapshot.window.end_ms)
}

/// How much of the window lies in the warm-up after the job's latest start (ms; 0 when
/// none): the collector keeps at least `min_window`, so a young job's window reaches into
/// its start-up, whose warm-up skews the averages.
fn startup_in_window_ms(snapshot: &Snapshot, cfg: &DiagnosisConfig) -> i64 {
    warm_up_end_ms(snapshot, cfg)
        .map_or(0, |settled| {
            let start = settled - cfg.startup_exclusion.as_ms();
            settled.min(snapshot.window.end_ms) - snapshot.window.start_ms.max(start)
        })
        .max(0)
}

/// Flink's records-in counter (`numRecordsIn`), by the name the collector and the steps
/// record it under when it is missing.
const NUM_RECORDS_IN: &str = "numRecordsIn";

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use crate::diagnose::testkit::*;
    use crate::model::snapshot::{CheckpointPoint, PartitionLag};
    use crate::model::verdict::{Confidence, Finding, HazardKind, Outcome, Status, StepName, VertexState};

    /// Source (red) → map (red) → `last` vertex "Sink: db" (busy 0.9 on both subtasks,
    /// 300 records/s each).
    fn slow_sink() -> SnapshotBuilder {
        SnapshotBuilder::new()
            .vertex("src", "Source: orders", 2)
            .vertex("map", "map", 2)
            .vertex("sink", "Sink: db", 2)
            .edge("src", "map", "FORWARD")
            .edge("map", "sink", "REBALANCE")
            .all_subtasks("src", 0.02, 0.95, 0.03, None)
            .all_subtasks("map", 0.05, 0.93, 0.02, 300.0)
            .all_subtasks("sink", 0.9, 0.0, 0.1, 300.0)
    }

    fn outcomes(v: &crate::model::verdict::Verdict) -> Vec<(StepName, Outcome)> {
        v.steps.iter().map(|s| (s.step, s.outcome)).collect()
    }

    #[test]
    fn the_first_hit_wins_and_the_later_steps_are_skipped() {
        let v = verdict(&slow_sink().build());
        assert_eq!(
            outcomes(&v),
            [
                (StepName::Failover, Outcome::NoData),
                (StepName::Locate, Outcome::Hit),
                (StepName::Sink, Outcome::Hit),
                (StepName::Sources, Outcome::Skipped),
                (StepName::HotKey, Outcome::Skipped),
                (StepName::Resources, Outcome::Skipped),
                (StepName::StateBackend, Outcome::Skipped),
                (StepName::StateGrowth, Outcome::Skipped),
                (StepName::Checkpoints, Outcome::Skipped),
                (StepName::Headroom, Outcome::Skipped),
            ]
        );
        assert_eq!(v.steps[3].detail, "Skipped: step sink hit first.");
        assert_eq!((v.status, v.finding), (Status::CulpritFound, Finding::Sink));
        let c = v.culprit.as_ref().unwrap();
        assert_eq!(
            (c.vertex_id.as_str(), c.role, c.subtasks.as_slice()),
            ("sink", crate::model::verdict::Role::Sink, &[0, 1][..])
        );
        assert_eq!(v.confidence, Confidence::High);
        let states: Vec<_> = v.graph.vertices.iter().map(|g| g.state).collect();
        assert_eq!(states, [VertexState::Backpressured, VertexState::Backpressured, VertexState::Culprit]);
    }

    #[test]
    fn a_window_reaching_into_start_up_lowers_the_confidence_and_says_how_much() {
        // Started 100 s before `at`; warm-up is its first 75 s (60 s of Flink's averaging
        // and deployment), up to −25 s. The window (−60 s, 0] keeps its minimum: 35 s of it
        // (−60 to −25) are warm-up, 25 s are not.
        let v = verdict(&slow_sink().job_started(-100).window_from(-60).build());
        assert_eq!((v.status, v.confidence), (Status::CulpritFound, Confidence::Medium));
        assert!(
            v.notes
                .iter()
                .any(|n| n.starts_with("The job has run only 100 s: 35 s of the window fall in its first 75 s")),
            "{:?}",
            v.notes
        );
        // Started 105 s before: start-up ends at −30 s, where the window begins: no overlap.
        let v = verdict(&slow_sink().job_started(-105).window_from(-30).build());
        assert_eq!(v.confidence, Confidence::High);
    }

    #[test]
    fn a_job_younger_than_its_warm_up_gets_low_confidence_and_when_a_diagnosis_will_mean_something() {
        // Started 40 s before `at` (2027-01-15T08:00:00Z): warm-up lasts to +35 s, so the
        // window (−30 s, 0] is warm-up only. Meaningful from start + 75 s + the 60 s
        // minimum window = −40 + 135 = +95 s = 08:01:35Z.
        let v = verdict(&slow_sink().job_started(-40).window_from(-30).build());
        assert_eq!((v.status, v.confidence), (Status::CulpritFound, Confidence::Low));
        assert!(v.weak().is_some());
        let notes = v.notes.join(" ");
        assert!(
            notes.contains("Too young to diagnose: the job started only 40 s before 2027-01-15T08:00:00Z")
                && notes.contains("meaningful from 2027-01-15T08:01:35Z on"),
            "{notes}"
        );
        assert!(!notes.contains("The job has run only"), "one note, not both: {notes}");
    }

    #[test]
    fn a_window_right_after_a_restart_is_warm_up_only_too() {
        // The job started an hour ago but restarted 20 s before `at`: the collector marks
        // the warm-up's end at −20 + 75 = +55 s, after the window's end.
        let mut snap = slow_sink().window_from(-60).build();
        snap.window.settled_ms = Some(t(55));
        snap.window.bound = crate::model::snapshot::WindowBound::RestartExcluded;
        let v = verdict(&snap);
        assert_eq!(v.confidence, Confidence::Low);
        assert!(
            v.notes.iter().any(|n| n.starts_with("Too young to diagnose: the job restarted or rescaled only 20 s"))
        );
    }

    #[test]
    fn red_vertices_known_only_by_their_aggregates_give_the_same_verdict() {
        // The collector keeps per-subtask detail only for the vertices the diagnosis looks
        // into; the red ones upstream are read from their aggregates.
        let full = verdict(&slow_sink().build());
        let lean = verdict(&slow_sink().aggregate_only(&["src", "map"]).build());
        assert_eq!((lean.status, lean.finding), (full.status, full.finding));
        assert_eq!(lean.culprit, full.culprit);
        assert_eq!(lean.graph, full.graph);
        assert_eq!(lean.summary, full.summary);
    }

    #[test]
    fn a_later_step_runs_only_when_the_earlier_ones_are_clear() {
        // A keyed, non-sink culprit with a hot key: sink clear, hot_key hit, rest skipped;
        // the culprit's subtasks are the hot one.
        let snap = SnapshotBuilder::new()
            .vertex("src", "Source: clicks", 2)
            .vertex("agg", "agg", 4)
            .vertex("sink", "Sink: out", 2)
            .edge("src", "agg", "HASH")
            .edge("agg", "sink", "FORWARD")
            .all_subtasks("src", 0.0, 0.9, 0.1, None)
            // share 900 / 1200 = 0.75 ≥ 2/4, 900 ≥ 1.5 × 100.
            .subtask("agg", 0, 0.2, 0.0, 0.8, 100.0)
            .subtask("agg", 1, 0.97, 0.0, 0.03, 900.0)
            .subtask("agg", 2, 0.2, 0.0, 0.8, 100.0)
            .subtask("agg", 3, 0.1, 0.0, 0.9, 100.0)
            .all_subtasks("sink", 0.1, 0.0, 0.9, 500.0)
            .build();
        let v = verdict(&snap);
        assert_eq!(
            outcomes(&v)[2..6],
            [
                (StepName::Sink, Outcome::Clear),
                (StepName::Sources, Outcome::NoData),
                (StepName::HotKey, Outcome::Hit),
                (StepName::Resources, Outcome::Skipped)
            ]
        );
        assert_eq!(v.finding, Finding::HotKey);
        assert_eq!(v.culprit.unwrap().subtasks, [1]);
    }

    #[test]
    fn when_locate_decides_every_later_step_is_skipped() {
        // map is red, sink neither red nor busy: the exchange (network).
        let snap = slow_sink().all_subtasks("sink", 0.1, 0.0, 0.9, 300.0).build();
        let v = verdict(&snap);
        assert_eq!(v.finding, Finding::Network);
        assert!(v.steps[2..].iter().all(|s| s.outcome == Outcome::Skipped), "{:?}", v.steps);
        assert_eq!(v.steps[2].detail, "Skipped: step locate decided (network).");
    }

    #[test]
    fn a_culprit_no_step_explains_is_its_own_outcome_with_medium_confidence_and_profiling_advice() {
        // map busy 0.8 behind a red source: not a sink, no skew, stateless, no checkpoint
        // data, ρ 0.8 < 0.9.
        let snap = slow_sink()
            .all_subtasks("map", 0.8, 0.0, 0.2, 300.0)
            .all_subtasks("src", 0.02, 0.95, 0.03, None)
            .all_subtasks("sink", 0.1, 0.0, 0.9, 300.0)
            .build();
        let v = verdict(&snap);
        // Never "culprit found" with finding none: the finding says no step explains it.
        assert_eq!((v.status, v.finding), (Status::CulpritFound, Finding::Unexplained));
        assert_eq!(v.culprit.as_ref().unwrap().vertex_id, "map");
        assert!(
            v.summary.starts_with(
                "map holds the job back (busy 80%, not backpressured) for a reason the metrics do not show"
            ),
            "{}",
            v.summary
        );
        // The numbers: ρ 0.80 and capacity 2 × 300 / 0.8 = 750 records/s.
        assert!(v.cause.contains("ρ = 0.80") && v.cause.contains("about 750 records/s"), "{}", v.cause);
        assert!(v.fix.iter().any(|f| f.starts_with("Profile map")), "{:?}", v.fix);
        assert_eq!(v.confidence, Confidence::Medium);
        assert_eq!(outcomes(&v)[9], (StepName::Headroom, Outcome::Clear));
    }

    #[test]
    fn nothing_backpressured_is_no_backpressure() {
        let snap = slow_sink()
            .all_subtasks("src", 0.1, 0.0, 0.9, None)
            .all_subtasks("map", 0.2, 0.0, 0.8, 300.0)
            .all_subtasks("sink", 0.4, 0.0, 0.6, 300.0)
            .build();
        let v = verdict(&snap);
        assert_eq!((v.status, v.finding), (Status::NoBackpressure, Finding::None));
        assert!(v.culprit.is_none());
        assert_eq!(
            v.summary,
            "No backpressure in test-job: nothing is backpressured and the busiest vertex (Sink: db) is 40% busy."
        );
        // The vertex steps have nothing to examine.
        assert_eq!(outcomes(&v)[2], (StepName::Sink, Outcome::Clear));
    }

    #[test]
    fn backpressure_without_a_readable_end_is_inconclusive() {
        // map is red; of the sink, one subtask of two reports, idle: the one not reporting
        // may be the busy one. (A sink without any series is the likely culprit instead:
        // `locate::dropped`.)
        let snap = SnapshotBuilder::new()
            .vertex("src", "Source: orders", 2)
            .vertex("map", "map", 2)
            .vertex("sink", "Sink: db", 2)
            .edge("src", "map", "FORWARD")
            .edge("map", "sink", "REBALANCE")
            .all_subtasks("src", 0.02, 0.95, 0.03, None)
            .all_subtasks("map", 0.05, 0.93, 0.02, 300.0)
            .subtask("sink", 0, 0.05, 0.0, 0.95, 300.0)
            .build();
        let v = verdict(&snap);
        assert_eq!((v.status, v.finding), (Status::Inconclusive, Finding::None));
        assert!(v.culprit.is_none());
        assert_eq!(v.confidence, Confidence::Low);
        assert_ne!(v.graph.vertices[2].state, VertexState::Culprit);
    }

    /// Topic `payments` lag: 3600 s at `at`, aging 0.5 s per s.
    fn payments_lag() -> PartitionLag {
        PartitionLag { lag_seconds: line(-240, 0, 60, 3480.0, 0.5), ..partition("payments", "0") }
    }

    #[test]
    fn a_critical_retention_hazard_leads_the_summary_as_a_risk_when_it_is_a_lag_estimate() {
        // (5000 − 3600) / 0.5 = 2800 s ≈ 47 min; a lag in seconds is an estimate: a risk.
        let v = verdict(&slow_sink().partition(payments_lag()).retention("payments", Some(5000)).build());
        assert_eq!(v.finding, Finding::Sink);
        assert!(
            v.summary.starts_with("DATA LOSS RISK in 47 min on payments. Sink: db (sink) is the culprit"),
            "{}",
            v.summary
        );
    }

    #[test]
    fn a_lag_estimate_past_the_retention_leads_the_summary_as_a_risk_not_a_loss() {
        // 3600 s ≥ 3000 s retention, by the lag in seconds alone.
        let v = verdict(&slow_sink().partition(payments_lag()).retention("payments", Some(3000)).build());
        assert!(v.summary.starts_with("DATA LOSS RISK on payments: "), "{}", v.summary);
        assert!(!v.summary.contains("already losing"), "{}", v.summary);
    }

    #[test]
    fn a_position_below_the_log_start_leads_the_summary_as_data_already_lost() {
        // Committed 1000 < log start 4000: evidence.
        let p = PartitionLag {
            consumer_offset: line(-60, 0, 30, 1000.0, 0.0),
            log_start_offset: line(-60, 0, 30, 4000.0, 10.0),
            ..partition("payments", "0")
        };
        let v = verdict(&slow_sink().partition(p).retention("payments", Some(3000)).build());
        assert!(v.summary.starts_with("DATA LOSS: already losing data on payments. "), "{}", v.summary);
    }

    #[test]
    fn a_warning_hazard_does_not_lead_the_summary() {
        // (7200 − 3600) / 0.5 = 7200 s: a warning.
        let v = verdict(&slow_sink().partition(payments_lag()).retention("payments", Some(7200)).build());
        assert_eq!(v.hazards.len(), 1);
        assert!(v.summary.starts_with("Sink: db (sink) is the culprit"), "{}", v.summary);
    }

    #[test]
    fn hazards_are_evaluated_even_when_locate_decides() {
        let snap = slow_sink()
            .all_subtasks("sink", 0.1, 0.0, 0.9, 300.0)
            .partition(payments_lag())
            .retention("payments", Some(5000))
            .build();
        let v = verdict(&snap);
        assert_eq!(v.finding, Finding::Network);
        assert_eq!(v.hazards[0].kind, HazardKind::Retention);
        assert!(v.summary.starts_with("DATA LOSS RISK in 47 min on payments. Inconclusive"), "{}", v.summary);
    }

    #[test]
    fn a_stalled_recovery_point_alone_is_not_called_data_already_lost() {
        // Lag 3600 s steady on a 7200 s retention: nothing is lost now. The last checkpoint
        // is 4000 s old > 3600 s of room: a restart would lose data (checkpoints_stalled).
        // Spec §2: say "already losing data" when the consumer is below the log start or
        // lag ≥ retention — neither holds here.
        let p = PartitionLag { lag_seconds: line(-240, 0, 60, 3600.0, 0.0), ..partition("payments", "0") };
        let snap = slow_sink()
            .partition(p)
            .retention("payments", Some(7200))
            .checkpoint_point(CheckpointPoint { last_completed_at_ms: Some(t(-4000) as f64), ..cp(0) })
            .build();
        let v = verdict(&snap);
        assert_eq!(v.hazards.len(), 1);
        assert_eq!(v.hazards[0].kind, HazardKind::CheckpointsStalled);
        assert!(!v.summary.contains("already losing data"), "{}", v.summary);
    }

    #[test]
    fn missing_metrics_of_the_snapshot_and_the_steps_are_listed_once() {
        let v = verdict(
            &slow_sink().missing("numRecordsIn", "records rates of the sink").partition(payments_lag()).build(),
        );
        assert!(v.missing.contains(&"numRecordsIn (records rates of the sink)".to_string()), "{:?}", v.missing);
        assert!(v.missing.iter().any(|m| m.starts_with("retention.ms of topic payments")), "{:?}", v.missing);
        // A missing records rate lowers the confidence.
        assert_eq!(v.confidence, Confidence::Medium);
        let unique: BTreeSet<_> = v.missing.iter().collect();
        assert_eq!(unique.len(), v.missing.len());
    }

    fn keys(v: &serde_json::Value) -> BTreeSet<String> {
        v.as_object().unwrap_or_else(|| panic!("not an object: {v}")).keys().cloned().collect()
    }

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_verdict_json_has_exactly_the_spec_field_names_plus_the_documented_additions() {
        let snap = slow_sink()
            .query("busy", "avg_over_time(flink_taskmanager_job_task_busyTimeMsPerSecond[5m]) / 1000")
            .partition(payments_lag())
            .retention("payments", Some(5000))
            .build();
        let json = serde_json::to_value(verdict(&snap)).unwrap();
        // §4, plus window_start, culprits, advice and notes (documented in verdict.rs).
        assert_eq!(
            keys(&json),
            set(&[
                "schema",
                "job",
                "at",
                "window_seconds",
                "status",
                "finding",
                "culprit",
                "summary",
                "cause",
                "fix",
                "not_the_fix",
                "steps",
                "hazards",
                "evidence",
                "graph",
                "confidence",
                "missing",
                "window_start",
                "culprits",
                "advice",
                "notes",
                "timeline",
            ])
        );
        assert_eq!(json["schema"], "culprit.verdict/v1");
        assert_eq!(json["at"], "2027-01-15T08:00:00Z");
        assert_eq!(json["window_start"], "2027-01-15T07:55:00Z");
        assert_eq!(json["window_seconds"], 300);
        assert_eq!((json["status"].as_str(), json["finding"].as_str()), (Some("culprit_found"), Some("sink")));
        assert_eq!(json["confidence"], "high");
        assert_eq!(keys(&json["job"]), set(&["name", "id"]));
        assert_eq!(
            keys(&json["culprit"]),
            set(&["vertex_id", "vertex_name", "operators", "role", "parallelism", "subtasks"])
        );
        assert_eq!(json["culprit"]["role"], "sink");
        assert_eq!(keys(&json["culprits"][0]), keys(&json["culprit"]));
        assert_eq!(keys(&json["steps"][0]), set(&["step", "outcome", "detail"]));
        let steps: Vec<_> = json["steps"].as_array().unwrap().iter().map(|s| s["step"].as_str().unwrap()).collect();
        assert_eq!(
            steps,
            [
                "failover",
                "locate",
                "sink",
                "sources",
                "hot_key",
                "resources",
                "state_backend",
                "state_growth",
                "checkpoints",
                "headroom"
            ]
        );
        assert_eq!(json["steps"][3]["outcome"], "skipped");
        assert_eq!(keys(&json["hazards"][0]), set(&["kind", "severity", "time_to_loss_seconds", "topic", "detail"]));
        assert_eq!(
            (json["hazards"][0]["kind"].as_str(), json["hazards"][0]["severity"].as_str()),
            (Some("retention"), Some("critical"))
        );
        let busy = json["evidence"].as_array().unwrap().iter().find(|e| e["metric"] == "busyTimeMsPerSecond").unwrap();
        assert_eq!(keys(busy), set(&["subject", "metric", "value", "unit", "threshold", "query"]));
        assert_eq!(busy["unit"], "ratio");
        assert_eq!(keys(&json["graph"]), set(&["vertices", "edges", "from_plan"]));
        assert_eq!(json["graph"]["from_plan"], true);
        assert_eq!(
            keys(&json["graph"]["vertices"][0]),
            set(&["id", "name", "parallelism", "busy_max", "backpressured_max", "idle_avg", "state"])
        );
        assert_eq!(json["graph"]["vertices"][2]["state"], "culprit");
        assert_eq!(keys(&json["graph"]["edges"][0]), set(&["from", "to", "ship_strategy"]));
        assert_eq!(json["graph"]["edges"][1]["ship_strategy"], "REBALANCE");
        assert!(json["fix"].is_array() && json["not_the_fix"].is_array() && json["missing"].is_array());
        assert!(json["cause"].is_string() && json["summary"].is_string());
    }

    #[test]
    fn without_a_culprit_the_culprit_field_is_null_not_absent() {
        let snap = slow_sink()
            .all_subtasks("src", 0.1, 0.0, 0.9, None)
            .all_subtasks("map", 0.2, 0.0, 0.8, 300.0)
            .all_subtasks("sink", 0.4, 0.0, 0.6, 300.0)
            .build();
        let json = serde_json::to_value(verdict(&snap)).unwrap();
        assert!(json.as_object().unwrap().contains_key("culprit"));
        assert!(json["culprit"].is_null());
        assert_eq!(json["status"], "no_backpressure");
        assert_eq!(json["finding"], "none");
    }

    #[test]
    fn the_same_snapshot_always_gives_the_same_verdict() {
        let snap = slow_sink().partition(payments_lag()).retention("payments", Some(5000)).build();
        assert_eq!(verdict(&snap), verdict(&snap.clone()));
    }
}
