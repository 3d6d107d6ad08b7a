//! The runbook: the ordered list of steps, and the verdict assembled from their reports.
//!
//! Order (spec §2): `locate` → `sink` → `hot_key` → `state_backend` → `checkpoints` →
//! `headroom`. `locate` finds the culprit; the finding is the first later step that hits,
//! and the steps after it are `skipped`. When `locate` itself decides (`network`,
//! `source`), the later steps are skipped. The hazards (`retention`,
//! `checkpoints_stalled`) run on every diagnosis.

use std::collections::BTreeSet;

use crate::collect::snapshot::Snapshot;
use crate::config::DiagnosisConfig;
use crate::diagnose::signals::{JobSignals, VertexSignals};
use crate::diagnose::steps::{checkpoints, headroom, hot_key, locate, retention, sink, state_backend};
use crate::diagnose::{Context, StepReport, pct};
use crate::verdict::{
    Confidence, Culprit, Evidence, Finding, Graph, GraphEdge, GraphVertex, JobRef, Outcome, Role, SCHEMA, Severity,
    Status, Step, StepName, Verdict, VertexState,
};

fn rfc3339(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms).map(|t| t.to_string()).unwrap_or_else(|_| ms.to_string())
}

/// Diagnoses one snapshot. Pure: the same snapshot and configuration always give the same
/// verdict.
pub fn diagnose(snapshot: &Snapshot, cfg: &DiagnosisConfig) -> Verdict {
    let signals = JobSignals::derive(snapshot, cfg);
    let ctx = Context::new(snapshot, &signals, cfg);

    let located = locate::run(&ctx);
    let culprit: Option<&VertexSignals> = located.culprits.first().and_then(|id| signals.vertex(id));
    let locate_decides = located.report.finding.is_some();
    let mut reports: Vec<(StepName, StepReport)> = vec![(StepName::Locate, located.report.clone())];
    let mut hit: Option<StepName> = None;
    let mut no_single_culprit = false;
    let examined = culprit.filter(|_| !locate_decides);

    for step in [StepName::Sink, StepName::HotKey, StepName::StateBackend, StepName::Checkpoints, StepName::Headroom] {
        if locate_decides || hit.is_some() {
            reports.push((step, StepReport::new(Outcome::Skipped, skipped_detail(hit, &located.report))));
            continue;
        }
        let report = match (step, examined) {
            (StepName::Sink, Some(c)) => sink::run(&ctx, c),
            (StepName::HotKey, Some(c)) => hot_key::run(&ctx, c),
            (StepName::StateBackend, Some(c)) => state_backend::run(&ctx, c),
            (StepName::Sink | StepName::HotKey | StepName::StateBackend, None) => {
                StepReport::clear("No culprit vertex to examine: nothing is backpressured.")
            }
            (StepName::Checkpoints, c) => checkpoints::run(&ctx, c),
            (StepName::Headroom, c) => {
                let h = headroom::run(&ctx, c);
                no_single_culprit = h.no_single_culprit;
                h.report
            }
            (StepName::Locate, _) => unreachable!("locate runs first"),
        };
        if report.outcome == Outcome::Hit {
            hit = Some(step);
        }
        reports.push((step, report));
    }

    let finding_report = if locate_decides {
        Some(&reports[0].1)
    } else {
        hit.and_then(|s| reports.iter().find(|(n, _)| *n == s)).map(|(_, r)| r)
    };
    let finding = finding_report.and_then(|r| r.finding).unwrap_or(Finding::None);
    let red_exists = !ctx.red.is_empty();
    let status = match (&located.report.outcome, finding) {
        (Outcome::NoData, _) => Status::Inconclusive,
        (_, Finding::Network) => Status::Inconclusive,
        _ if no_single_culprit => Status::NoSingleCulprit,
        _ if culprit.is_some() => Status::CulpritFound,
        _ if red_exists => Status::Inconclusive,
        _ => Status::NoBackpressure,
    };
    let culprit_shown = if matches!(status, Status::CulpritFound) { culprit } else { None };

    let (hazards, retention_missing) = retention::evaluate(&ctx);

    // Cause, fix, not the fix, advice, evidence, missing: locate first, then the finding.
    let evaluated: Vec<&StepReport> =
        reports.iter().map(|(_, r)| r).filter(|r| r.outcome != Outcome::Skipped).collect();
    let mut cause: Vec<String> = Vec::new();
    let mut fix: Vec<String> = Vec::new();
    let mut not_the_fix: Vec<String> = Vec::new();
    if status != Status::NoSingleCulprit {
        cause.extend(located.report.cause.iter().cloned());
    }
    if let Some(r) = finding_report.filter(|_| !locate_decides) {
        cause.extend(r.cause.iter().cloned());
        fix.extend(r.fix.iter().cloned());
        not_the_fix.extend(r.not_the_fix.iter().cloned());
    }
    if status != Status::NoSingleCulprit {
        fix.extend(located.report.fix.iter().cloned());
        not_the_fix.extend(located.report.not_the_fix.iter().cloned());
    }
    if culprit_shown.is_some() && finding == Finding::None {
        fix.push(format!(
            "Profile {}: a flame graph (rest.flamegraph.enabled: true) or a thread dump shows where its time goes.",
            culprit_shown.map(|c| c.name.as_str()).unwrap_or_default()
        ));
    }
    let advice: Vec<String> = dedup(evaluated.iter().flat_map(|r| r.advice.iter().cloned()).collect());
    let mut evidence: Vec<Evidence> = Vec::new();
    for r in &evaluated {
        for e in &r.evidence {
            if !evidence.iter().any(|x| x.subject == e.subject && x.metric == e.metric) {
                evidence.push(e.clone());
            }
        }
    }
    let mut missing: Vec<String> = snapshot.missing.iter().map(|m| format!("{} ({})", m.metric, m.detail)).collect();
    for r in &evaluated {
        missing.extend(r.missing.iter().cloned());
    }
    missing.extend(retention_missing);
    let missing = dedup(missing);

    let subtasks_of = |v: &VertexSignals| -> Vec<u32> {
        finding_report
            .and_then(|r| r.subtasks.clone())
            .unwrap_or_else(|| v.subtasks.iter().map(|s| s.subtask).collect())
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
        located
            .culprits
            .iter()
            .filter_map(|id| signals.vertex(id))
            .enumerate()
            .map(|(i, v)| {
                to_culprit(v, if i == 0 { subtasks_of(v) } else { v.subtasks.iter().map(|s| s.subtask).collect() })
            })
            .collect()
    } else {
        Vec::new()
    };

    let mut summary =
        finding_report.and_then(|r| r.summary.clone()).unwrap_or_else(|| default_summary(&ctx, status, culprit_shown));
    if culprits.len() > 1 {
        summary.push_str(&format!(
            " ({} more independent culprit{}: {}.)",
            culprits.len() - 1,
            if culprits.len() > 2 { "s" } else { "" },
            culprits[1..].iter().map(|c| c.vertex_name.as_str()).collect::<Vec<_>>().join(", ")
        ));
    }
    if let Some(h) = hazards.iter().find(|h| h.severity == Severity::Critical) {
        let lead = match h.time_to_loss_seconds {
            Some(0) => "DATA LOSS: already losing data".to_string(),
            Some(s) => format!("DATA LOSS in {}", crate::diagnose::human_secs(s as f64)),
            None => "DATA LOSS risk".to_string(),
        };
        summary = format!("{lead}{}. {summary}", h.topic.as_ref().map(|t| format!(" on {t}")).unwrap_or_default());
    }

    let mut notes = snapshot.notes.clone();
    if signals.graph_free {
        notes.push("No job graph: vertices come from the metrics and the culprit is the busiest vertex that is not backpressured; confidence is lowered.".into());
    }
    if !signals.unknown_vertices.is_empty() {
        notes.push(format!(
            "Metrics name vertices the plan does not have ({}): the plan may be from another version of the job.",
            signals.unknown_vertices.join(", ")
        ));
    }

    let confidence = confidence(&ctx, status, finding, &located.report, &reports, &missing);
    let culprit_ids: BTreeSet<&str> = culprits.iter().map(|c| c.vertex_id.as_str()).collect();
    let graph = Graph {
        vertices: signals
            .vertices
            .iter()
            .map(|v| GraphVertex {
                id: v.id.clone(),
                name: v.name.clone(),
                parallelism: v.parallelism,
                busy_max: v.busy_max().map(crate::diagnose::round_sig),
                backpressured_max: v.backpressured_max().map(crate::diagnose::round_sig),
                idle_avg: v.idle_avg().map(crate::diagnose::round_sig),
                state: if culprit_ids.contains(v.id.as_str()) {
                    VertexState::Culprit
                } else if ctx.is_red(v) {
                    VertexState::Backpressured
                } else if v.subtasks.is_empty() {
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
    };

    Verdict {
        schema: SCHEMA.to_string(),
        job: JobRef { name: snapshot.job.name.clone(), id: snapshot.job.id.clone() },
        at: rfc3339(snapshot.at_ms),
        window_seconds: (snapshot.window.len_ms() as f64 / 1000.0).round() as i64,
        window_start: rfc3339(snapshot.window.start_ms),
        status,
        finding,
        culprit: culprit_out,
        culprits,
        summary,
        cause: cause.join(" "),
        fix: dedup(fix),
        not_the_fix: dedup(not_the_fix),
        advice,
        steps: reports.into_iter().map(|(step, r)| Step { step, outcome: r.outcome, detail: r.detail }).collect(),
        hazards,
        evidence,
        graph,
        confidence,
        missing,
        notes,
    }
}

fn skipped_detail(hit: Option<StepName>, located: &StepReport) -> String {
    match hit {
        Some(step) => format!("Skipped: step {} hit first.", step.as_str()),
        None => format!("Skipped: step locate decided ({}).", located.finding.map(|f| f.as_str()).unwrap_or("located")),
    }
}

fn default_summary(ctx: &Context, status: Status, culprit: Option<&VertexSignals>) -> String {
    match (status, culprit) {
        (Status::CulpritFound, Some(c)) => format!(
            "{} holds the job back (busy {}, not backpressured), but no runbook step explains why.",
            c.name,
            pct(c.busy_max().unwrap_or(0.0))
        ),
        (Status::NoBackpressure, _) => {
            let busiest = ctx
                .signals
                .vertices
                .iter()
                .filter(|v| v.utilisation().is_some())
                .max_by(|a, b| a.utilisation().unwrap().total_cmp(&b.utilisation().unwrap()));
            match busiest {
                Some(v) => format!(
                    "No backpressure in {}: nothing is backpressured and the busiest vertex ({}) is {} busy.",
                    ctx.snapshot.job.name,
                    v.name,
                    pct(v.utilisation().unwrap_or(0.0))
                ),
                None => format!("No backpressure in {}.", ctx.snapshot.job.name),
            }
        }
        _ => {
            format!("Inconclusive for {}: the metrics do not show where the backpressure stops.", ctx.snapshot.job.name)
        }
    }
}

fn confidence(
    ctx: &Context,
    status: Status,
    finding: Finding,
    located: &StepReport,
    reports: &[(StepName, StepReport)],
    missing: &[String],
) -> Confidence {
    if ctx.signals.graph_free || status == Status::Inconclusive || located.outcome == Outcome::NoData {
        return Confidence::Low;
    }
    let no_data_before_finding = reports.iter().any(|(_, r)| r.outcome == Outcome::NoData);
    let records_missing = missing.iter().any(|m| m.contains("numRecordsIn"));
    if (status == Status::CulpritFound && finding == Finding::None) || no_data_before_finding || records_missing {
        return Confidence::Medium;
    }
    Confidence::High
}

fn dedup(v: Vec<String>) -> Vec<String> {
    let mut seen = BTreeSet::new();
    v.into_iter().filter(|s| seen.insert(s.clone())).collect()
}
