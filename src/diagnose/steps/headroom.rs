//! Step `headroom`: nothing broken, just too close to capacity.
//!
//! Utilisation ρ of a vertex is its mean busy ratio. Hits when the culprit (or, with no
//! culprit, the busiest vertex) runs at ρ ≥ 0.9. Response time grows as 1/(1−ρ). When
//! several vertices are near capacity (ρ ≥ 0.8) and the culprit does not stand out (within
//! 0.1), there is no single culprit: the whole job needs capacity. With the demand known
//! (a source lag or backlog) the fix gives a number:
//! `parallelism_needed = ceil(p × offered / (capacity × 0.7))`, offered being the source's
//! produce rate when its lag shows it. Without the demand no number is given, for one
//! vertex or several: the job runs flat out, and the fix says what limits it and what to
//! measure.
//!
//! Inside: `async_io` — a busy async I/O or lookup operator on TaskManagers with low CPU
//! waits on its in-flight queue, not on CPU (Little's law), and needs a different fix.

use crate::diagnose::signals::VertexSignals;
use crate::diagnose::{Context, StepReport};
use crate::model::facts::headroom::{AsyncFact, Busy, HeadroomFact, LittlesLaw, Raise};
use crate::model::verdict::Finding;

pub use crate::diagnose::parallelism::{Needed, NoNumber, demand_known, needed as parallelism_needed, offered_factor};

/// What `headroom` found besides its report.
#[derive(Debug, Clone, PartialEq)]
pub struct HeadroomResult {
    pub report: StepReport,
    /// The vertex judged (the culprit, or the busiest one).
    pub subject: Option<String>,
    /// True when several vertices are near capacity and none stands out.
    pub no_single_culprit: bool,
}

pub fn run(ctx: &Context, culprit: Option<&VertexSignals>) -> HeadroomResult {
    let t = &ctx.cfg.thresholds;
    let busiest = || {
        ctx.signals
            .vertices
            .iter()
            .filter(|v| v.utilisation().is_some())
            .max_by(|a, b| a.utilisation().unwrap().total_cmp(&b.utilisation().unwrap()))
    };
    let Some(subject) = culprit.or_else(busiest) else {
        return HeadroomResult {
            report: StepReport::no_data(HeadroomFact::NoBusyTime { vertex: None }, vec!["busyTimeMsPerSecond".into()]),
            subject: None,
            no_single_culprit: false,
        };
    };
    let Some(rho) = subject.utilisation() else {
        return HeadroomResult {
            report: StepReport::no_data(
                HeadroomFact::NoBusyTime { vertex: Some(subject.name.clone()) },
                vec!["busyTimeMsPerSecond".into()],
            ),
            subject: Some(subject.id.clone()),
            no_single_culprit: false,
        };
    };
    // Several vertices near capacity, judged over all vertices whatever the subject's own
    // ρ: when the subject does not stand out from them, no single vertex is the culprit.
    let near: Vec<&VertexSignals> = ctx
        .signals
        .vertices
        .iter()
        .filter(|v| v.utilisation().is_some_and(|u| u >= t.near_capacity_utilisation))
        .collect();
    let others_max = near.iter().filter(|v| v.id != subject.id).filter_map(|v| v.utilisation()).reduce(f64::max);
    if near.len() >= 2
        && let Some(other) = others_max.filter(|o| rho - o <= t.stand_out_margin)
    {
        return no_single_culprit(ctx, subject, &near, rho, other);
    }
    if rho < t.headroom_utilisation {
        return HeadroomResult {
            report: StepReport::clear(HeadroomFact::BelowThreshold {
                vertex: subject.name.clone(),
                culprit: culprit.is_some(),
                utilisation_ratio: rho,
                subtasks: subject.subtask_count(),
                threshold_ratio: t.headroom_utilisation,
            }),
            subject: Some(subject.id.clone()),
            no_single_culprit: false,
        };
    }

    if let Some(report) = async_io(ctx, subject, rho) {
        return HeadroomResult { report, subject: Some(subject.id.clone()), no_single_culprit: false };
    }

    let report = at_capacity(ctx, culprit, subject, rho);
    HeadroomResult { report, subject: Some(subject.id.clone()), no_single_culprit: false }
}

/// The subject runs at capacity, and no other vertex is as close: a hit, with the
/// parallelism it needs.
fn at_capacity(ctx: &Context, culprit: Option<&VertexSignals>, subject: &VertexSignals, rho: f64) -> StepReport {
    let t = &ctx.cfg.thresholds;
    let mut r = StepReport::hit(
        Finding::Headroom,
        HeadroomFact::AtCapacity {
            vertex: subject.name.clone(),
            culprit: culprit.is_some(),
            utilisation_ratio: rho,
            threshold_ratio: t.headroom_utilisation,
        },
    );
    let busy_min = subject.subtasks.iter().filter_map(|s| s.busy).reduce(f64::min).unwrap_or(rho);
    let per_record_ms =
        subject.throughput().filter(|r| *r > 0.0).map(|rate| rho * 1000.0 * subject.subtask_count() as f64 / rate);
    r.cause.push(HeadroomFact::AtCapacityCause {
        vertex: subject.name.clone(),
        utilisation_ratio: rho,
        subtasks: subject.subtask_count(),
        busy_min_ratio: busy_min,
        busy_max_ratio: subject.busy_max().unwrap_or(rho),
        culprit: culprit.is_some(),
        graph_free: ctx.signals.graph_free,
        capacity_records_per_s: subject.capacity(),
    });
    let needed = parallelism_needed(ctx, subject);
    if needed != Err(NoNumber::Demand) {
        parallelism_fix(ctx, subject, needed, &mut r);
    } else {
        // A source without a rate limit and no lag metric: the job runs as fast as the
        // subject lets it; more parallelism only moves the saturation point.
        r.fix.push(HeadroomFact::FlatOut {
            vertex: subject.name.clone(),
            parallelism: subject.parallelism_now(),
            throughput_records_per_s: subject.throughput_all_subtasks(),
        });
        r.missing_inputs.push(HeadroomFact::DemandUnknown.into());
        if let Some(capacity) = subject.capacity() {
            r.evidence.push(ctx.evidence(
                &subject.name,
                "capacity (records in / busy)",
                capacity,
                "records/s",
                None,
                "records_in",
            ));
        }
    }
    if let Some(ms) = per_record_ms {
        r.fix.push(HeadroomFact::CheaperPerRecord { vertex: subject.name.clone(), busy_ms_per_record: ms });
    }
    if ctx.signals.graph_free {
        // The sink step could not run: a sink waiting on its external system looks the same.
        r.fix.push(HeadroomFact::MaybeASink { vertex: subject.name.clone() });
    }
    r.evidence.push(ctx.evidence(
        &subject.name,
        "utilisation ρ (mean busyTimeMsPerSecond)",
        rho,
        "ratio",
        Some(t.headroom_utilisation),
        "busy",
    ));
    let (vertex, utilisation_ratio) = (subject.name.clone(), rho);
    r.summary = Some(
        match (culprit, needed) {
            (Some(_), Err(NoNumber::Demand)) => HeadroomFact::CulpritAtCapacity {
                vertex,
                utilisation_ratio,
                raise: Raise::DemandUnknown { throughput_records_per_s: subject.throughput_all_subtasks() },
            },
            (Some(_), Ok(n)) if n.parallelism > subject.parallelism_now() => HeadroomFact::CulpritAtCapacity {
                vertex,
                utilisation_ratio,
                raise: Raise::From { from_parallelism: subject.parallelism_now(), to_parallelism: n.parallelism },
            },
            (Some(_), Ok(_)) => HeadroomFact::CulpritAtCapacity { vertex, utilisation_ratio, raise: Raise::CannotHelp },
            (Some(_), Err(NoNumber::Rates)) => {
                HeadroomFact::CulpritAtCapacity { vertex, utilisation_ratio, raise: Raise::Unknown }
            }
            // Backpressure whose end `locate` could not read (a vertex without metrics) is
            // backpressure all the same: never "no backpressure yet".
            (None, _) if !ctx.red.is_empty() => {
                HeadroomFact::AtCapacityWhileBackpressured { vertex, utilisation_ratio }
            }
            (None, _) => HeadroomFact::NoBackpressureYet { vertex, utilisation_ratio },
        }
        .into(),
    );
    r
}

/// The parallelism fix with the demand known: a number from the offered rate and
/// capacity, or without rates, the direction.
fn parallelism_fix(ctx: &Context, subject: &VertexSignals, needed: Result<Needed, NoNumber>, r: &mut StepReport) {
    let t = &ctx.cfg.thresholds;
    match needed {
        Ok(n) => {
            r.fix.push(HeadroomFact::ParallelismHelps(n.fact(
                &subject.name,
                subject.parallelism_now(),
                t.target_utilisation,
                ctx.cfg.catch_up.as_ms() as f64 / 1000.0,
            )));
            r.evidence.push(ctx.evidence(
                &subject.name,
                "capacity (records in / busy)",
                n.capacity_per_s,
                "records/s",
                None,
                "records_in",
            ));
            r.evidence.push(ctx.evidence(
                &subject.name,
                "offered rate",
                n.offered_per_s,
                "records/s",
                None,
                "pending_records",
            ));
        }
        Err(_) => {
            r.fix.push(HeadroomFact::RaiseWithoutRates {
                vertex: subject.name.clone(),
                parallelism: subject.parallelism_now(),
                target_utilisation_ratio: t.target_utilisation,
            });
            r.missing.push("numRecordsIn".into());
        }
    }
}

fn no_single_culprit(
    ctx: &Context,
    subject: &VertexSignals,
    near: &[&VertexSignals],
    rho: f64,
    other: f64,
) -> HeadroomResult {
    let t = &ctx.cfg.thresholds;
    let busy: Vec<Busy> = near
        .iter()
        .filter_map(|v| Some(Busy { vertex: v.name.clone(), utilisation_ratio: v.utilisation()? }))
        .collect();
    let mut r = StepReport::hit(
        Finding::Headroom,
        HeadroomFact::NearCapacity {
            near: busy.clone(),
            near_threshold_ratio: t.near_capacity_utilisation,
            subject: subject.name.clone(),
            subject_ratio: rho,
            others_max_ratio: other,
            margin_ratio: t.stand_out_margin,
        },
    );
    r.cause.push(HeadroomFact::NoSingleOperator { near: busy.clone() });
    let demand = demand_known(ctx);
    if !demand {
        // As for one vertex at capacity: the job runs as fast as these let it, and a number
        // from that rate would only move the saturation point.
        r.fix.push(HeadroomFact::FlatOutNearCapacity {
            near: busy.clone(),
            throughput_records_per_s: near.iter().filter_map(|v| v.throughput_all_subtasks()).reduce(f64::min),
        });
        r.missing_inputs.push(HeadroomFact::DemandUnknown.into());
    }
    for v in near {
        match parallelism_needed(ctx, v) {
            Ok(n) => r.fix.push(n.fact(
                &v.name,
                v.parallelism_now(),
                t.target_utilisation,
                ctx.cfg.catch_up.as_ms() as f64 / 1000.0,
            )),
            Err(NoNumber::Rates) => r.fix.push(HeadroomFact::MoreParallelismWithoutRates {
                vertex: v.name.clone(),
                parallelism: v.parallelism_now(),
            }),
            Err(NoNumber::Demand) => {}
        }
        if let Some(rho) = v.utilisation() {
            r.evidence.push(ctx.evidence(
                &v.name,
                "utilisation ρ (mean busyTimeMsPerSecond)",
                rho,
                "ratio",
                Some(t.near_capacity_utilisation),
                "busy",
            ));
        }
    }
    r.not_the_fix.push(HeadroomFact::ScalingOnlyOne { vertex: subject.name.clone() });
    r.summary = Some(HeadroomFact::NoSingleCulprit { near: busy, demand_known: demand }.into());
    HeadroomResult { report: r, subject: None, no_single_culprit: true }
}

/// A busy async I/O or lookup operator on TaskManagers with low CPU load waits on its
/// in-flight queue. Little's law: throughput = in-flight capacity × parallelism ÷ latency,
/// so with the throughput it manages and the capacity (from a Flink SQL plan's
/// `async=[mode, timeout, capacity]`, else unknown) the service's latency follows.
pub fn async_io(ctx: &Context, v: &VertexSignals, rho: f64) -> Option<StepReport> {
    if !v.has_async {
        return None;
    }
    let t = &ctx.cfg.thresholds;
    let tms: Vec<&str> = v.subtasks.iter().filter_map(|s| s.tm_id.as_deref()).collect();
    let loads: Vec<f64> = ctx
        .snapshot
        .taskmanagers
        .iter()
        .filter(|tm| tms.contains(&tm.tm_id.as_str()))
        .filter_map(|tm| tm.cpu_load)
        .collect();
    if loads.is_empty() {
        return None;
    }
    let cpu = loads.iter().sum::<f64>() / loads.len() as f64;
    if cpu >= t.async_io_cpu_load {
        return None;
    }
    let async_op = v.operators.iter().find(|op| is_async_operator(op));
    let lookups = async_op.and_then(|op| v.operator_records_in(op)).or_else(|| v.throughput());
    let settings = v.operators.iter().find_map(|op| async_settings(op));
    let mut r = StepReport::hit(
        Finding::AsyncIo,
        AsyncFact::AsyncWaits { vertex: v.name.clone(), utilisation_ratio: rho, cpu_load_ratio: cpu },
    );
    let subtasks = v.subtask_count().max(1);
    let law = match (lookups, settings.and_then(|s| s.capacity)) {
        (Some(rate), Some(capacity)) if rate > 0.0 => {
            Some(LittlesLaw::Capacity { requests_per_s: rate, subtasks, capacity })
        }
        (Some(rate), None) if rate > 0.0 => Some(LittlesLaw::DefaultCapacity { requests_per_s: rate, subtasks }),
        _ => None,
    };
    r.cause.push(AsyncFact::AsyncCause { vertex: v.name.clone(), utilisation_ratio: rho, cpu_load_ratio: cpu, law });
    r.fix.push(AsyncFact::FixServiceLatency);
    r.fix.push(match (settings.and_then(|s| s.capacity), lookups) {
        (Some(capacity), Some(rate)) => {
            AsyncFact::RaiseInFlight { capacity, requests_per_s: rate, timeout_ms: settings.and_then(|s| s.timeout_ms) }
        }
        _ => AsyncFact::RaiseInFlightUnknown,
    });
    r.not_the_fix.push(AsyncFact::MoreCpu);
    if v.is_source {
        r.not_the_fix.push(AsyncFact::MoreSourceParallelism { vertex: v.name.clone() });
    }
    r.evidence.push(ctx.evidence(&v.name, "Status.JVM.CPU.Load", cpu, "ratio", Some(t.async_io_cpu_load), "cpu_load"));
    r.evidence.push(ctx.evidence(
        &v.name,
        "utilisation ρ (mean busyTimeMsPerSecond)",
        rho,
        "ratio",
        Some(t.headroom_utilisation),
        "busy",
    ));
    if let Some(rate) = lookups {
        r.evidence.push(ctx.evidence(&v.name, "async requests completed", rate, "records/s", None, "records_in"));
    }
    r.summary = Some(AsyncFact::AsyncCulprit { vertex: v.name.clone(), cpu_load_ratio: cpu }.into());
    Some(r)
}

/// An async wait operator or an async lookup join, by the names Flink gives them.
fn is_async_operator(op: &str) -> bool {
    let lower = op.to_ascii_lowercase();
    lower.contains("async") || op.contains("LookupJoin")
}

/// `async=[UNORDERED, 20000ms, 120]` of a Flink SQL lookup join.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AsyncSettings {
    pub timeout_ms: Option<u64>,
    pub capacity: Option<u32>,
}

/// The async settings a Flink SQL plan writes into the operator's description.
pub fn async_settings(op: &str) -> Option<AsyncSettings> {
    let start = op.find("async=[")? + "async=[".len();
    let inner = &op[start..start + op[start..].find(']')?];
    let parts: Vec<&str> = inner.split(',').map(str::trim).collect();
    let timeout_ms = parts.iter().find_map(|p| p.strip_suffix("ms")?.parse().ok());
    let capacity = parts.iter().rev().find_map(|p| p.parse().ok());
    Some(AsyncSettings { timeout_ms, capacity })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::testkit::*;
    use crate::model::facts::Fact;
    use crate::model::verdict::{Outcome, Status};

    /// Source (red, emitting 950 records/s per subtask) → score (0.95 busy, 950 records/s
    /// per subtask) → sink; two subtasks each.
    fn job() -> SnapshotBuilder {
        SnapshotBuilder::new()
            .vertex("src", "Source: txn", 2)
            .vertex("score", "score", 2)
            .vertex("sink", "Sink: out", 2)
            .edge("src", "score", "REBALANCE")
            .edge("score", "sink", "FORWARD")
            .all_subtasks("src", 0.05, 0.9, 0.05, None)
            .records_out("src", 0, 950.0)
            .records_out("src", 1, 950.0)
            .all_subtasks("score", 0.95, 0.0, 0.05, 950.0)
            .all_subtasks("sink", 0.1, 0.0, 0.9, 950.0)
    }

    fn on_score(snap: &crate::model::snapshot::Snapshot) -> HeadroomResult {
        with_context(snap, |ctx| run(ctx, ctx.signals.vertex("score")))
    }

    #[test]
    fn a_culprit_at_capacity_needs_the_parallelism_for_the_offered_rate_from_source_lag() {
        // Source lag grows 190 records/s per subtask = 380 records/s; the sources emit
        // 2 × 950 = 1900. Offered factor = (1900 + 380) / 1900 = 1.2.
        // score: capacity = 950/0.95 + 950/0.95 = 2000 records/s; observed 1900;
        // offered = 1900 × 1.2 = 2280 records/s.
        // parallelism_needed = ceil(2 × 2280 / (2000 × 0.7)) = ceil(4560 / 1400)
        //                    = ceil(3.257) = 4.
        let snap = job()
            .pending_records("src", 0, line(-295, 0, 5, 0.0, 190.0))
            .pending_records("src", 1, line(-295, 0, 5, 0.0, 190.0))
            .build();
        let needed = on_vertex(&snap, "score", parallelism_needed).unwrap();
        assert_eq!(needed.parallelism, 4);
        assert_close(needed.offered_per_s, 2280.0, 1e-6);
        assert_close(needed.capacity_per_s, 2000.0, 1e-9);
        assert!(needed.offered_known);

        let h = on_score(&snap);
        assert!(!h.no_single_culprit);
        assert_eq!((h.report.outcome, h.report.finding), (Outcome::Hit, Some(Finding::Headroom)));
        // The fix is the advice with its terms: 2 → 4 from the offered rate the lag shows.
        let Fact::Headroom(HeadroomFact::ParallelismHelps(p)) = &h.report.fix[0] else { panic!("{:?}", h.report.fix) };
        assert_eq!((p.vertex.as_str(), p.from_parallelism, p.needed.parallelism), ("score", 2, 4));
        assert_eq!(p.needed, needed);
        assert_close(evidence(&h.report.evidence, "offered rate").value, 2280.0, 1e-6);
        // Busy time per record = ρ × 1000 ms × 2 / 1900 records/s = 0.95 × 2000 / 1900 = 1.00 ms.
        let Fact::Headroom(HeadroomFact::CheaperPerRecord { busy_ms_per_record, .. }) = &h.report.fix[1] else {
            panic!("{:?}", h.report.fix)
        };
        assert_close(*busy_ms_per_record, 1.0, 1e-9);
        assert_close(evidence(&h.report.evidence, "utilisation ρ (mean busyTimeMsPerSecond)").value, 0.95, 1e-9);
    }

    #[test]
    fn without_source_lag_no_parallelism_number_is_computed() {
        // The observed 1900 records/s would give ceil(2 × 1900 / (2000 × 0.7)) = 3, but
        // it is the job's maximum, not its demand: no number.
        let snap = job().build();
        assert_eq!(on_vertex(&snap, "score", parallelism_needed), Err(NoNumber::Demand));
    }

    #[test]
    fn without_demand_a_job_at_capacity_runs_flat_out_and_no_parallelism_is_advised() {
        // No pendingRecords, no exporter lag: the source reads as fast as score allows
        // (1900 records/s at ρ 0.95). Raising score from 2 to 3 would only move the
        // saturation point; the step says what limits the job and that demand is unknown.
        let snap = job().build();
        let h = on_score(&snap);
        assert_eq!((h.report.outcome, h.report.finding), (Outcome::Hit, Some(Finding::Headroom)));
        assert!(
            h.report.fix.iter().all(|f| !matches!(f, Fact::Headroom(HeadroomFact::ParallelismHelps(_)))),
            "{:?}",
            h.report.fix
        );
        assert_eq!(
            h.report.fix[0],
            Fact::Headroom(HeadroomFact::FlatOut {
                vertex: "score".into(),
                parallelism: 2,
                throughput_records_per_s: Some(1900.0)
            })
        );
        assert_eq!(h.report.missing_inputs, [Fact::Headroom(HeadroomFact::DemandUnknown)]);
        let Some(Fact::Headroom(HeadroomFact::CulpritAtCapacity { raise, .. })) = &h.report.summary else {
            panic!("{:?}", h.report.summary)
        };
        assert_eq!(*raise, Raise::DemandUnknown { throughput_records_per_s: Some(1900.0) });
        // The verdict: medium, the demand named as missing, no "raise … from 2 to".
        let v = verdict(&snap);
        assert_eq!(v.confidence, crate::model::verdict::Confidence::Medium);
        assert!(!v.summary.contains("raise its parallelism"), "{}", v.summary);
        assert!(v.summary.contains("the demand is unknown"), "{}", v.summary);
        assert!(v.missing.iter().any(|m| m.starts_with("the demand on the job")), "{:?}", v.missing);
    }

    #[test]
    fn with_demand_known_from_a_flat_pending_records_the_advice_is_a_number_again() {
        // pendingRecords steady at 0: the source keeps up, the offered rate is the
        // observed one and known: (1900 + 0) / 1900 = factor 1; ceil(2 × 1900 / 1400) = 3.
        let snap = job()
            .pending_records("src", 0, line(-240, 0, 60, 0.0, 0.0))
            .pending_records("src", 1, line(-240, 0, 60, 0.0, 0.0))
            .build();
        let h = on_score(&snap);
        let Fact::Headroom(HeadroomFact::ParallelismHelps(p)) = &h.report.fix[0] else { panic!("{:?}", h.report.fix) };
        assert_eq!((p.from_parallelism, p.needed.parallelism, p.needed.offered_known), (2, 3, true));
        assert!(h.report.missing_inputs.is_empty());
    }

    #[test]
    fn a_culprit_below_ninety_percent_is_clear() {
        // ρ = (0.95 + 0.75) / 2 = 0.85 < 0.9, although b_max is 0.95.
        let snap = job().subtask("score", 1, 0.75, 0.0, 0.25, 950.0).build();
        let h = on_score(&snap);
        assert_eq!((h.report.outcome, h.report.finding), (Outcome::Clear, None));
        let Fact::Headroom(HeadroomFact::BelowThreshold {
            culprit, utilisation_ratio, subtasks, threshold_ratio, ..
        }) = &h.report.detail
        else {
            panic!("{:?}", h.report.detail)
        };
        assert_eq!((*culprit, *subtasks, *threshold_ratio), (true, 2, 0.9));
        assert_close(*utilisation_ratio, 0.85, 1e-9);
        assert!(h.report.detail.to_string().contains("ρ = 0.85"), "{}", h.report.detail);
    }

    #[test]
    fn a_culprit_that_stands_out_from_the_next_near_capacity_vertex_is_the_one_to_scale() {
        // score 0.95, sink 0.80 (near capacity): 0.95 − 0.80 = 0.15 > 0.1 → it stands out.
        let snap = job().all_subtasks("sink", 0.8, 0.0, 0.2, 950.0).build();
        let h = on_score(&snap);
        assert!(!h.no_single_culprit);
        assert_eq!(h.report.finding, Some(Finding::Headroom));
        assert_eq!(h.subject.as_deref(), Some("score"));
    }

    /// src (red, 2 subtasks emitting 500 records/s each) → a (ρ 0.92) → b (ρ 0.88) → sink,
    /// 500 records/s per subtask.
    fn two_near_capacity() -> SnapshotBuilder {
        SnapshotBuilder::new()
            .vertex("src", "Source: txn", 2)
            .vertex("a", "a", 2)
            .vertex("b", "b", 2)
            .vertex("sink", "Sink: out", 2)
            .edge("src", "a", "REBALANCE")
            .edge("a", "b", "FORWARD")
            .edge("b", "sink", "FORWARD")
            .all_subtasks("src", 0.05, 0.6, 0.35, None)
            .records_out("src", 0, 500.0)
            .records_out("src", 1, 500.0)
            .all_subtasks("a", 0.92, 0.0, 0.08, 500.0)
            .all_subtasks("b", 0.88, 0.05, 0.07, 500.0)
            .all_subtasks("sink", 0.1, 0.0, 0.9, 500.0)
    }

    #[test]
    fn several_vertices_near_capacity_have_no_single_culprit() {
        // a is the first non-red busy vertex, but 0.92 − 0.88 = 0.04 ≤ 0.1: the whole job
        // is at capacity. The demand: pendingRecords steady at 0 (the source keeps up), so
        // the offered rate is the observed 1000 records/s and known.
        // a: capacity = 2 × 500 / 0.92 = 1086.96; ceil(2 × 1000 / (1086.96 × 0.7))
        //    = ceil(2.629) = 3. b: capacity = 2 × 500 / 0.88 = 1136.36;
        //    ceil(2 × 1000 / (1136.36 × 0.7)) = ceil(2.514) = 3.
        let snap = two_near_capacity()
            .pending_records("src", 0, line(-240, 0, 60, 0.0, 0.0))
            .pending_records("src", 1, line(-240, 0, 60, 0.0, 0.0))
            .build();
        let h = with_context(&snap, |ctx| run(ctx, ctx.signals.vertex("a")));
        assert!(h.no_single_culprit);
        assert_eq!(h.subject, None);
        assert_eq!(
            h.report.fix.iter().map(|f| f.to_string()).collect::<Vec<_>>(),
            [
                "a: parallelism 2 to 3: ceil(2 × (offered 1000 records/s / 0.7) / capacity 1090 records/s).",
                "b: parallelism 2 to 3: ceil(2 × (offered 1000 records/s / 0.7) / capacity 1140 records/s)."
            ]
        );
        assert!(h.report.missing_inputs.is_empty());

        let v = verdict(&snap);
        assert_eq!(v.status, Status::NoSingleCulprit);
        assert_eq!(v.finding, Finding::Headroom);
        assert!(v.culprit.is_none() && v.culprits.is_empty());
        assert_eq!(
            v.summary,
            "No single culprit: 2 vertices run near capacity (a 92%, b 88%); the job needs more capacity."
        );
        let json = serde_json::to_value(&v).unwrap();
        assert!(json["culprit"].is_null());
        // Not "a is the culprit": locate's cause and fix are left out.
        assert!(!v.cause.contains("it is the slowest vertex"), "{}", v.cause);
    }

    #[test]
    fn several_vertices_near_capacity_without_demand_get_no_parallelism_number_and_lower_confidence() {
        // The same job with no pendingRecords and no exporter lag: its 1000 records/s are
        // what a and b allow, not what it is offered. No "parallelism 2 to 3" anywhere;
        // the fix says what limits the job and what to measure.
        let snap = two_near_capacity().build();
        let h = with_context(&snap, |ctx| run(ctx, ctx.signals.vertex("a")));
        assert!(h.no_single_culprit);
        assert_eq!(
            h.report.fix,
            [Fact::Headroom(HeadroomFact::FlatOutNearCapacity {
                near: vec![
                    Busy { vertex: "a".into(), utilisation_ratio: 0.92 },
                    Busy { vertex: "b".into(), utilisation_ratio: 0.88 }
                ],
                // Each passes 2 × 500 records/s.
                throughput_records_per_s: Some(1000.0),
            })]
            .into()
        );
        assert_eq!(h.report.missing_inputs, [Fact::Headroom(HeadroomFact::DemandUnknown)]);

        let v = verdict(&snap);
        assert_eq!((v.status, v.finding), (Status::NoSingleCulprit, Finding::Headroom));
        assert_eq!(v.confidence, crate::model::verdict::Confidence::Medium);
        let said = format!("{} {} {}", v.summary, v.fix.join(" "), v.not_the_fix.join(" "));
        assert!(!said.contains("parallelism 2 to"), "{said}");
        assert!(v.summary.contains("the demand is unknown"), "{}", v.summary);
        assert!(v.fix[0].starts_with("The job runs as fast as a 92%, b 88% let it (~1000 records/s)"), "{:?}", v.fix);
        assert!(v.fix[0].contains("export its lag"), "{:?}", v.fix);
        assert!(v.missing.iter().any(|m| m.starts_with("the demand on the job")), "{:?}", v.missing);
    }

    #[test]
    fn a_first_non_red_vertex_below_ninety_percent_among_busier_ones_is_no_single_culprit() {
        // src (red 0.3) → seg (ρ 0.85, the first non-red vertex: the culprit by locate) →
        // match (ρ 0.93) → writer (ρ 0.84). seg is below the 0.9 headroom threshold, but
        // the judgement is over all vertices: three at ≥ 0.8, and 0.85 − 0.93 < 0.1.
        let snap = SnapshotBuilder::new()
            .vertex("src", "Source: t", 2)
            .vertex("seg", "seg", 2)
            .vertex("match", "match", 2)
            .vertex("writer", "writer", 2)
            .edge("src", "seg", "HASH")
            .edge("seg", "match", "HASH")
            .edge("match", "writer", "REBALANCE")
            .all_subtasks("src", 0.68, 0.3, 0.02, None)
            .records_out("src", 0, 500.0)
            .records_out("src", 1, 500.0)
            // The demand: the source keeps up (pendingRecords steady at 0).
            .pending_records("src", 0, line(-240, 0, 60, 0.0, 0.0))
            .pending_records("src", 1, line(-240, 0, 60, 0.0, 0.0))
            .all_subtasks("seg", 0.85, 0.05, 0.1, 500.0)
            .all_subtasks("match", 0.93, 0.0, 0.07, 500.0)
            .all_subtasks("writer", 0.84, 0.0, 0.16, 500.0)
            .build();
        let v = verdict(&snap);
        assert_eq!((v.status, v.finding), (Status::NoSingleCulprit, Finding::Headroom));
        assert!(v.culprit.is_none());
        assert_eq!(v.fix.len(), 3, "{:?}", v.fix);
        // seg: capacity 2 × 500 / 0.85 = 1176.5; ceil(2 × 1000 / 0.7 / 1176.5) = ceil(2.43)
        // = 3; keyed (128 key groups): floor(128/3) = 42, ceil(128/3) = 43 > 42 → 4.
        assert!(v.fix[0].starts_with("seg: parallelism 2 to 4"), "{}", v.fix[0]);
        assert!(v.fix[0].contains("raised to 4"), "{}", v.fix[0]);
    }

    #[test]
    fn with_no_culprit_the_busiest_vertex_is_judged() {
        // Nothing red; score at 0.95 is the busiest: headroom hits on it.
        let snap = job().all_subtasks("src", 0.05, 0.0, 0.95, None).build();
        let h = with_context(&snap, |ctx| run(ctx, None));
        assert_eq!(h.report.finding, Some(Finding::Headroom));
        assert_eq!(h.subject.as_deref(), Some("score"));
        assert_eq!(
            h.report.summary,
            Some(Fact::Headroom(HeadroomFact::NoBackpressureYet { vertex: "score".into(), utilisation_ratio: 0.95 }))
        );
        assert!(
            h.report.summary.as_ref().unwrap().to_string().starts_with("No backpressure yet, but score runs at 95%")
        );
    }

    #[test]
    fn with_no_culprit_but_backpressure_the_busiest_vertex_is_not_said_to_run_before_any_backpressure() {
        // The source is backpressured (0.9 > 0.10), but no culprit was named (its end was
        // not read): score at 0.95 is judged, and the summary says there is backpressure.
        let snap = job().build();
        let h = with_context(&snap, |ctx| run(ctx, None));
        assert_eq!(h.subject.as_deref(), Some("score"));
        assert_eq!(
            h.report.summary,
            Some(Fact::Headroom(HeadroomFact::AtCapacityWhileBackpressured {
                vertex: "score".into(),
                utilisation_ratio: 0.95
            }))
        );
        let said = h.report.summary.as_ref().unwrap().to_string();
        assert!(!said.contains("No backpressure yet") && said.contains("score runs at 95%"), "{said}");
    }

    /// Source (red) → lookup chain (0.95 busy) on tm-1 and tm-2 with CPU `cpu_1`, `cpu_2`
    /// → sink.
    fn async_job(cpu_1: f64, cpu_2: f64) -> crate::model::snapshot::Snapshot {
        SnapshotBuilder::new()
            .vertex("src", "Source: orders", 2)
            .vertex("enrich", "parse -> AsyncWaitOperator", 2)
            .vertex("sink", "Sink: out", 2)
            .edge("src", "enrich", "FORWARD")
            .edge("enrich", "sink", "FORWARD")
            .all_subtasks("src", 0.0, 0.9, 0.1, None)
            .all_subtasks("enrich", 0.95, 0.0, 0.05, 200.0)
            .all_subtasks("sink", 0.05, 0.0, 0.95, 200.0)
            .on_taskmanager("enrich", 0, "tm-1", "node-1")
            .on_taskmanager("enrich", 1, "tm-2", "node-2")
            .taskmanager("tm-1", 5.0, cpu_1)
            .taskmanager("tm-2", 5.0, cpu_2)
            .build()
    }

    #[test]
    fn a_busy_async_io_chain_on_idle_cpus_waits_on_its_service() {
        // TaskManager CPU (0.15 + 0.25) / 2 = 0.2 < 0.5 while ρ = 0.95.
        let snap = async_job(0.15, 0.25);
        let h = with_context(&snap, |ctx| run(ctx, ctx.signals.vertex("enrich")));
        assert_eq!(h.report.finding, Some(Finding::AsyncIo));
        assert_close(evidence(&h.report.evidence, "Status.JVM.CPU.Load").value, 0.2, 1e-9);
        // 2 × 200 records/s = 400 requests/s, 200 per subtask = capacity ÷ latency: with a
        // capacity of 100, 100 × 2 / 400 = 0.50 s = 500 ms per request.
        let Fact::Headroom(HeadroomFact::Async(AsyncFact::AsyncCause { law: Some(law), cpu_load_ratio, .. })) =
            &h.report.cause[0]
        else {
            panic!("{:?}", h.report.cause)
        };
        assert_eq!(*law, LittlesLaw::DefaultCapacity { requests_per_s: 400.0, subtasks: 2 });
        assert_close(*cpu_load_ratio, 0.2, 1e-9);
        assert!(h.report.cause[0].to_string().contains("500 ms per request"), "{:?}", h.report.cause);
        assert_eq!(verdict(&snap).finding, Finding::AsyncIo);
    }

    #[test]
    fn a_busy_async_io_chain_on_busy_cpus_is_plain_headroom() {
        // CPU (0.7 + 0.9) / 2 = 0.8 ≥ 0.5: it computes, it does not wait.
        let snap = async_job(0.7, 0.9);
        let h = with_context(&snap, |ctx| run(ctx, ctx.signals.vertex("enrich")));
        assert_eq!(h.report.finding, Some(Finding::Headroom));
    }

    #[test]
    fn an_async_io_chain_shows_even_with_no_backpressure_anywhere() {
        // Everything chained into one vertex: no edge, nothing red, the source is busy but
        // its lag is unknown, so locate is clear; headroom finds the async wait.
        let snap = SnapshotBuilder::new()
            .vertex("all", "Source: orders -> AsyncWaitOperator -> Sink: out", 2)
            .all_subtasks("all", 0.95, 0.0, 0.05, None)
            .records_out("all", 0, 100.0)
            .records_out("all", 1, 100.0)
            .on_taskmanager("all", 0, "tm-1", "node-1")
            .on_taskmanager("all", 1, "tm-1", "node-1")
            .taskmanager("tm-1", 5.0, 0.1)
            .build();
        let v = verdict(&snap);
        assert_eq!((v.status, v.finding), (Status::NoBackpressure, Finding::AsyncIo));
    }

    #[test]
    fn without_a_plan_a_taskmanager_not_scraped_leaves_the_advice_from_the_real_parallelism() {
        // TaskManager 1 (subtasks 0) is not scraped: only subtasks 1 report. Subtask index 1
        // means at least 2 subtasks, so score runs at parallelism 2, not the 1 reporting.
        // score[1]: 950 records/s at ρ 0.95 → 1000 records/s per subtask; capacity
        // 1000 × 2 = 2000; observed 950 × 2/1 = 1900 (score[0] taken at the mean);
        // ceil(2 × 1900 / (2000 × 0.7)) = ceil(2.714) = 3. From the reporting subtask
        // alone it would read ceil(1 × 950 / (1000 × 0.7)) = 2: "1 to 2", a no-op.
        let snap = SnapshotBuilder::new()
            .vertex("src", "Source: txn", 2)
            .vertex("score", "score", 2)
            .vertex("sink", "Sink: out", 2)
            .subtask("src", 1, 0.05, 0.9, 0.05, None)
            .records_out("src", 1, 950.0)
            // The demand: the source keeps up (pendingRecords steady at 0).
            .pending_records("src", 1, line(-240, 0, 60, 0.0, 0.0))
            .subtask("score", 1, 0.95, 0.0, 0.05, 950.0)
            .subtask("sink", 1, 0.1, 0.0, 0.9, 950.0)
            .without_graph()
            .build();
        let needed = on_vertex(&snap, "score", |ctx, v| {
            assert_eq!((v.parallelism, v.subtask_count(), v.missing_subtasks()), (2, 1, 1));
            parallelism_needed(ctx, v)
        })
        .unwrap();
        assert_eq!(needed.parallelism, 3);
        assert_close(needed.capacity_per_s, 2000.0, 1e-9);
        assert_close(needed.offered_per_s, 1900.0, 1e-9);
        let v = verdict(&snap);
        assert_eq!(v.culprit.as_ref().map(|c| c.vertex_id.as_str()), Some("score"));
        let fix = v.fix.join(" ");
        assert!(fix.contains("score: parallelism 2 to 3"), "{fix}");
        assert!(!fix.contains("parallelism 1 to"), "{fix}");
        assert!(v.summary.contains("from 2 to 3"), "{}", v.summary);
        assert_eq!(v.confidence, crate::model::verdict::Confidence::Low);
        let notes = v.notes.join(" ");
        assert!(notes.contains("Some subtasks report no metrics") && notes.contains("score (1 of 2)"), "{notes}");
    }
}
