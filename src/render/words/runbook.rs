//! Words of [`RunbookFact`].

use std::fmt::{self, Formatter};

use super::numbers::{limited_list, num, pct, pct_or_unknown};
use crate::model::facts::runbook::RunbookFact;
use crate::model::verdict::rfc3339;

pub(super) fn word(fact: &RunbookFact, f: &mut Formatter<'_>) -> fmt::Result {
    match fact {
        RunbookFact::SkippedAfterHit { step } => write!(f, "Skipped: step {} hit first.", step.as_str()),
        RunbookFact::SkippedLocateDecided { finding } => {
            write!(f, "Skipped: step locate decided ({}).", finding.map(|x| x.as_str()).unwrap_or("located"))
        }
        RunbookFact::NoCulpritToExamine { nothing_red: true } => {
            f.write_str("No culprit vertex to examine: nothing is backpressured.")
        }
        RunbookFact::NoCulpritToExamine { nothing_red: false } => {
            f.write_str("No culprit vertex to examine: locate found none (see its outcome).")
        }
        RunbookFact::UnexplainedCause { utilisation_ratio, capacity_records_per_s } => write!(
            f,
            "No runbook step explains why: it is not a sink, no subtask is hot, no state-backend or checkpoint trouble shows, and it runs at ρ = {} (below the headroom threshold){}. The reason is in its code or its environment, not in the task metrics.",
            utilisation_ratio.map(|u| format!("{u:.2}")).unwrap_or_else(|| "unknown".into()),
            capacity_records_per_s
                .map(|cap| format!("; it could handle about {} records/s at 100% busy", num(cap)))
                .unwrap_or_default()
        ),
        RunbookFact::ProfileIt { vertex } => write!(
            f,
            "Profile {vertex}: a flame graph (rest.flamegraph.enabled: true, then the vertex's Flame Graph tab) or a few thread dumps of its TaskManagers (Flink UI: Task Managers, Thread Dump) show where its time goes: a blocking call, lock contention, an expensive function, serialization."
        ),
        RunbookFact::HoldsBackUnexplained { vertex, busy_max_ratio } => write!(
            f,
            "{vertex} holds the job back (busy {}, not backpressured) for a reason the metrics do not show: profile it (flame graph, thread dump).",
            busy_max_ratio.map(pct).unwrap_or_else(|| "unknown".into())
        ),
        RunbookFact::NoBackpressure { job, busiest: Some((vertex, utilisation)) } => write!(
            f,
            "No backpressure in {job}: nothing is backpressured and the busiest vertex ({vertex}) is {} busy.",
            pct_or_unknown(*utilisation)
        ),
        RunbookFact::NoBackpressure { job, busiest: None } => write!(f, "No backpressure in {job}."),
        RunbookFact::Inconclusive { job } => {
            write!(f, "Inconclusive for {job}: the metrics do not show where the backpressure stops.")
        }
        RunbookFact::GraphFree => f.write_str(
            "No job graph: vertices come from the metrics and the culprit is the busiest vertex that is not backpressured; confidence is lowered.",
        ),
        RunbookFact::ClassicBackpressure { in_pool_full_ratio, out_pool_low_ratio } => write!(
            f,
            "The job's metrics reporter predates Flink 1.13: it reports no busy or backpressured time. Backpressure is the share of samples with isBackPressured = 1 (one sample per scrape, so short bursts may be missed), and the culprit is told by the classic method: the first vertex downstream of backpressured ones that is not backpressured, with a full input buffer pool (inPoolUsage ≥ {}) and a low output pool (outPoolUsage ≤ {}); busy time is unknown, and confidence is lowered.",
            pct(*in_pool_full_ratio),
            pct(*out_pool_low_ratio)
        ),
        RunbookFact::TooYoung {
            restarted,
            age_s,
            window_end_ms,
            meaningful_from_ms,
            min_window_s,
            started_ms,
            exclusion_s,
        } => write!(
            f,
            "Too young to diagnose: the job {} only {age_s} s before {}, so every sample of the window falls in its first {exclusion_s} s, whose busy, idle and backpressured times and records rates still average over its start (Flink reports every task busy right after a start); this verdict rests on warm-up alone and its confidence is low. A diagnosis is meaningful from {} on ({exclusion_s} s of warm-up and a {min_window_s} s window after {}).",
            if *restarted { "restarted or rescaled" } else { "started" },
            rfc3339(*window_end_ms),
            rfc3339(*meaningful_from_ms),
            rfc3339(*started_ms),
        ),
        RunbookFact::WarmUpInWindow { uptime_s, in_window_s, exclusion_s } => write!(
            f,
            "The job has run only {uptime_s} s: {in_window_s} s of the window fall in its first {exclusion_s} s of uptime, whose warm-up is not representative; confidence is lowered."
        ),
        RunbookFact::SubtasksWithoutMetrics { vertices } => {
            let each: Vec<String> =
                vertices.iter().map(|(name, with, parallelism)| format!("{name} ({with} of {parallelism})")).collect();
            write!(
                f,
                "Some subtasks report no metrics (a TaskManager not scraped, or subtasks not running): {}.",
                limited_list(&each, 8)
            )
        }
        RunbookFact::UnknownVertices { names } => write!(
            f,
            "Metrics name vertices the plan does not have ({}): the plan may be from another version of the job.",
            names.join(", ")
        ),
    }
}
