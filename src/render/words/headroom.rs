//! Words of [`HeadroomFact`].

use std::fmt::{self, Formatter};

use super::numbers::{approx, num, pct, per_record};
use crate::model::facts::headroom::{AsyncFact, Busy, HeadroomFact, LittlesLaw, Raise};
use crate::model::verdict::round_sig;

fn role(culprit: bool) -> &'static str {
    if culprit { "the culprit" } else { "the busiest vertex" }
}

/// `a 92%, b 88%`.
fn list(near: &[Busy]) -> String {
    near.iter().map(|b| format!("{} {}", b.vertex, pct(b.utilisation_ratio))).collect::<Vec<_>>().join(", ")
}

pub(super) fn word(fact: &HeadroomFact, f: &mut Formatter<'_>) -> fmt::Result {
    match fact {
        HeadroomFact::NoBusyTime { vertex: None } => f.write_str("No busy time for any vertex."),
        HeadroomFact::NoBusyTime { vertex: Some(v) } => write!(f, "No busy time for {v}."),
        HeadroomFact::BelowThreshold { vertex, culprit, utilisation_ratio, subtasks, threshold_ratio } => write!(
            f,
            "{vertex} ({}) runs at ρ = {:.2} (mean busy over {subtasks} subtasks), below {threshold_ratio:.2}.",
            role(*culprit),
            // Rounded first, so float sums that differ in the last bits read alike.
            round_sig(*utilisation_ratio),
        ),
        HeadroomFact::AtCapacity { vertex, culprit, utilisation_ratio, threshold_ratio } => write!(
            f,
            "{vertex} ({}) runs at ρ = {utilisation_ratio:.2} ≥ {threshold_ratio:.2}: at capacity.",
            role(*culprit)
        ),
        HeadroomFact::AtCapacityCause {
            vertex,
            utilisation_ratio,
            subtasks,
            busy_min_ratio,
            busy_max_ratio,
            culprit,
            graph_free,
            capacity_records_per_s,
        } => write!(
            f,
            "{vertex} runs at ρ = {} (mean busy over {subtasks} subtasks, {}–{}){}: it is at capacity{}. Response time grows as 1/(1−ρ): at ρ = 0.95 every burst waits 20× longer than on an idle job, so bursts turn into growing lag.",
            pct(*utilisation_ratio),
            pct(*busy_min_ratio),
            pct(*busy_max_ratio),
            match (culprit, graph_free) {
                (true, false) =>
                    " and no earlier step explains it (no sink, no hot key, no state-backend or checkpoint trouble)",
                (true, true) =>
                    " and no earlier step explains it (no hot key, no state-backend or checkpoint trouble; whether it is a sink is unknown)",
                (false, _) => "",
            },
            capacity_records_per_s.map(|c| format!(", ~{} records/s", num(c))).unwrap_or_default()
        ),
        HeadroomFact::ParallelismHelps(p) => {
            super::parallelism::word(p, f)?;
            f.write_str(" Here, unlike for backpressured vertices, parallelism helps.")
        }
        HeadroomFact::RaiseWithoutRates { vertex, parallelism, target_utilisation_ratio } => write!(
            f,
            "Raise {vertex}'s parallelism (now {parallelism}) so it runs below {} busy; records rates are missing, so the exact number is unknown.",
            pct(*target_utilisation_ratio)
        ),
        HeadroomFact::CheaperPerRecord { vertex, busy_ms_per_record } => write!(
            f,
            "Or make {vertex} cheaper per record: it spends {} of busy time per record now.",
            per_record(*busy_ms_per_record)
        ),
        HeadroomFact::FlatOut { .. } | HeadroomFact::FlatOutNearCapacity { .. } | HeadroomFact::DemandUnknown => {
            demand_words(fact, f)
        }
        HeadroomFact::MaybeASink { vertex } => write!(
            f,
            "Without the job graph it is unknown whether {vertex} is a sink: if it writes to an external system, check that system's latency and the sink's batching first (the sink step's checks), since more parallelism adds load to a system that is already slow."
        ),
        HeadroomFact::CulpritAtCapacity { vertex, utilisation_ratio, raise } => {
            write!(f, "{vertex} is the culprit: it runs at {} of its capacity", pct(*utilisation_ratio))?;
            match raise {
                Raise::From { from_parallelism, to_parallelism } => {
                    write!(f, "; raise its parallelism from {from_parallelism} to {to_parallelism}.")
                }
                Raise::CannotHelp => f.write_str(", and more parallelism cannot help (see the fix)."),
                Raise::Unknown => f.write_str("."),
                Raise::DemandUnknown { throughput_records_per_s } => {
                    if let Some(rate) = throughput_records_per_s {
                        write!(f, " ({} records/s)", approx(*rate))?;
                    }
                    f.write_str(" and limits the job, which runs flat out; the demand is unknown, so more parallelism would only move the saturation point.")
                }
            }
        }
        HeadroomFact::NoBackpressureYet { vertex, utilisation_ratio } => write!(
            f,
            "No backpressure yet, but {vertex} runs at {} of its capacity: bursts will turn into lag.",
            pct(*utilisation_ratio)
        ),
        HeadroomFact::AtCapacityWhileBackpressured { vertex, utilisation_ratio } => write!(
            f,
            "Vertices are backpressured but the metrics do not show where the backpressure stops; {vertex} runs at {} of its capacity and may be where it does.",
            pct(*utilisation_ratio)
        ),
        HeadroomFact::NearCapacity { .. }
        | HeadroomFact::NoSingleOperator { .. }
        | HeadroomFact::MoreParallelismWithoutRates { .. }
        | HeadroomFact::ScalingOnlyOne { .. }
        | HeadroomFact::NoSingleCulprit { .. } => near_capacity(fact, f),
        HeadroomFact::Async(a) => async_io(a, f),
    }
}

/// Words of several vertices near capacity, none standing out.
fn near_capacity(fact: &HeadroomFact, f: &mut Formatter<'_>) -> fmt::Result {
    match fact {
        HeadroomFact::NearCapacity {
            near,
            near_threshold_ratio,
            subject,
            subject_ratio,
            others_max_ratio,
            margin_ratio,
        } => write!(
            f,
            "{} vertices run near capacity (ρ ≥ {near_threshold_ratio:.2}): {}; {subject} ({subject_ratio:.2}) does not stand out from the busiest of the others ({others_max_ratio:.2}) by more than {margin_ratio:.2}.",
            near.len(),
            list(near)
        ),
        HeadroomFact::NoSingleOperator { near } => write!(
            f,
            "No single operator is broken: {} vertices run near capacity ({}). The whole job is too close to its capacity; scaling only the first one would move the bottleneck to the next.",
            near.len(),
            list(near)
        ),
        HeadroomFact::MoreParallelismWithoutRates { vertex, parallelism } => {
            write!(f, "{vertex}: more parallelism (now {parallelism}); records rates are missing.")
        }
        HeadroomFact::ScalingOnlyOne { vertex } => {
            write!(f, "Scaling only {vertex}: the next vertex near capacity becomes the bottleneck.")
        }
        HeadroomFact::NoSingleCulprit { near, demand_known: true } => write!(
            f,
            "No single culprit: {} vertices run near capacity ({}); the job needs more capacity.",
            near.len(),
            list(near)
        ),
        HeadroomFact::NoSingleCulprit { near, demand_known: false } => write!(
            f,
            "No single culprit: {} vertices run near capacity ({}) and limit the job, which runs flat out; the demand is unknown, so whether it needs more capacity, and how much, is unknown.",
            near.len(),
            list(near)
        ),
        _ => Ok(()),
    }
}

fn async_io(fact: &AsyncFact, f: &mut Formatter<'_>) -> fmt::Result {
    match fact {
        AsyncFact::AsyncWaits { vertex, utilisation_ratio, cpu_load_ratio } => write!(
            f,
            "{vertex} chains an async I/O or lookup operator, runs at ρ = {utilisation_ratio:.2}, while its TaskManagers' CPU load is {}: it waits on the service it calls.",
            pct(*cpu_load_ratio)
        ),
        AsyncFact::AsyncCause { vertex, utilisation_ratio, cpu_load_ratio, law } => {
            write!(
                f,
                "{vertex} is {} busy but its TaskManagers use only {} CPU: the task thread waits for a free slot in the async operator's in-flight queue (Flink counts that wait as busy time). Throughput is bounded by queue capacity × parallelism ÷ request latency (Little's law).",
                pct(*utilisation_ratio),
                pct(*cpu_load_ratio),
            )?;
            match law {
                Some(l) => littles_law(l, f),
                None => Ok(()),
            }
        }
        AsyncFact::FixServiceLatency => f.write_str(
            "Fix the latency of the service it calls (its p99 is what bounds throughput), or cache its answers (lookup joins: lookup.cache = 'PARTIAL' with lookup.partial-cache.max-rows and lookup.partial-cache.expire-after-write).",
        ),
        AsyncFact::RaiseInFlight { capacity: c, requests_per_s, timeout_ms } => write!(
            f,
            "Raise the in-flight capacity from {c} to {} (SQL: table.exec.async-lookup.buffer-capacity; DataStream: the capacity argument of AsyncDataStream.unorderedWait): at the same latency the ceiling doubles to ~{} requests/s, if the service can take the extra concurrency{}.",
            2 * c,
            num(2.0 * requests_per_s),
            timeout_ms.map(|ms| format!("; check the {ms} ms timeout too")).unwrap_or_default()
        ),
        AsyncFact::RaiseInFlightUnknown => f.write_str(
            "Raise the in-flight capacity of the async operator (AsyncDataStream.unorderedWait(…, timeout, capacity); SQL: table.exec.async-lookup.buffer-capacity) and check its timeout: the ceiling grows with it at the same latency.",
        ),
        AsyncFact::MoreCpu => f.write_str("More CPU or memory for the TaskManagers: they are waiting, not computing."),
        AsyncFact::MoreSourceParallelism { vertex } => write!(
            f,
            "More source parallelism or partitions for {vertex}: the reader is not what is slow; more subtasks only add waiting slots in front of the same slow service."
        ),
        AsyncFact::AsyncCulprit { vertex, cpu_load_ratio } => write!(
            f,
            "{vertex} is the culprit: its async I/O waits on the service it calls (CPU {}).",
            pct(*cpu_load_ratio)
        ),
    }
}

/// Words of a job without demand: what limits it, and the demand as a missing input.
fn demand_words(fact: &HeadroomFact, f: &mut Formatter<'_>) -> fmt::Result {
    match fact {
        HeadroomFact::FlatOut { vertex, parallelism, throughput_records_per_s } => {
            write!(f, "The job runs as fast as {vertex} lets it")?;
            if let Some(rate) = throughput_records_per_s {
                write!(f, " (~{} records/s at parallelism {parallelism})", approx(*rate))?;
            }
            f.write_str(": without a source lag (pendingRecords, or a Kafka exporter's consumer-group lag) the demand is unknown, and a source without a rate limit reads as fast as the slowest vertex allows, so this rate is the job's maximum, not what it is offered. More parallelism only moves the saturation point to the next vertex: raise it only if the job must go faster than this; if the job is meant to keep up with an input, export its lag so the parallelism it needs can be computed.")
        }
        HeadroomFact::FlatOutNearCapacity { near, throughput_records_per_s } => {
            write!(f, "The job runs as fast as {} let it", list(near))?;
            if let Some(rate) = throughput_records_per_s {
                write!(f, " (~{} records/s)", approx(*rate))?;
            }
            f.write_str(": without a source lag (pendingRecords, or a Kafka exporter's consumer-group lag) the demand is unknown, and a source without a rate limit reads as fast as the slowest vertices allow, so this rate is the job's maximum, not what it is offered, and no parallelism can be computed from it. Raising them together only moves the saturation point: do it only if the job must go faster than this; if the job is meant to keep up with an input, export its lag so the parallelism each needs can be computed.")
        }
        HeadroomFact::DemandUnknown => f.write_str(
            "the demand on the job: a source lag (pendingRecords, or a Kafka exporter's consumer-group lag) or an offered rate; without it the throughput is the job's maximum, not what it is offered",
        ),
        _ => Ok(()),
    }
}

/// ` It completes 400 requests/s over 2 subtasks, …`: the latency Little's law gives.
fn littles_law(law: &LittlesLaw, f: &mut Formatter<'_>) -> fmt::Result {
    match *law {
        LittlesLaw::Capacity { requests_per_s: rate, subtasks, capacity: c } => {
            let p = subtasks as f64;
            write!(
                f,
                " It completes {} requests/s with {p} subtasks × {c} in-flight slots, so each request takes about {p} × {c} / {} = {}: the ceiling is {p} × {c} / {} = {} requests/s until the latency falls or the capacity grows.",
                num(rate),
                num(rate),
                per_record(p * c as f64 / rate * 1000.0),
                per_record(p * c as f64 / rate * 1000.0),
                num(rate)
            )
        }
        LittlesLaw::DefaultCapacity { requests_per_s: rate, subtasks } => {
            let p = subtasks as f64;
            write!(
                f,
                " It completes {} requests/s over {p} subtasks, {} per subtask per second = capacity ÷ latency: with a capacity of 100 in-flight requests that is {} per request.",
                num(rate),
                num(rate / p),
                per_record(100.0 * p / rate * 1000.0)
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::model::facts::Fact;
    use crate::model::facts::headroom::{AsyncFact, Busy, HeadroomFact, LittlesLaw, Raise};

    fn words(f: impl Into<Fact>) -> String {
        f.into().to_string()
    }

    #[test]
    fn a_vertex_at_capacity_reads_its_busy_range_capacity_and_why_no_earlier_step_explains_it() {
        assert_eq!(
            words(HeadroomFact::AtCapacityCause {
                vertex: "score".into(),
                utilisation_ratio: 0.95,
                subtasks: 2,
                busy_min_ratio: 0.9,
                busy_max_ratio: 1.0,
                culprit: true,
                graph_free: false,
                capacity_records_per_s: Some(2000.0),
            }),
            "score runs at ρ = 95% (mean busy over 2 subtasks, 90%–100%) and no earlier step explains it (no sink, no hot key, no state-backend or checkpoint trouble): it is at capacity, ~2000 records/s. Response time grows as 1/(1−ρ): at ρ = 0.95 every burst waits 20× longer than on an idle job, so bursts turn into growing lag."
        );
        let summary =
            |raise| words(HeadroomFact::CulpritAtCapacity { vertex: "score".into(), utilisation_ratio: 0.95, raise });
        assert_eq!(
            summary(Raise::From { from_parallelism: 2, to_parallelism: 4 }),
            "score is the culprit: it runs at 95% of its capacity; raise its parallelism from 2 to 4."
        );
        assert_eq!(
            summary(Raise::CannotHelp),
            "score is the culprit: it runs at 95% of its capacity, and more parallelism cannot help (see the fix)."
        );
        assert_eq!(summary(Raise::Unknown), "score is the culprit: it runs at 95% of its capacity.");
    }

    #[test]
    fn several_vertices_near_capacity_read_as_a_list_with_the_margin() {
        let near = vec![
            Busy { vertex: "a".into(), utilisation_ratio: 0.92 },
            Busy { vertex: "b".into(), utilisation_ratio: 0.88 },
        ];
        assert_eq!(
            words(HeadroomFact::NearCapacity {
                near: near.clone(),
                near_threshold_ratio: 0.8,
                subject: "a".into(),
                subject_ratio: 0.92,
                others_max_ratio: 0.88,
                margin_ratio: 0.1,
            }),
            "2 vertices run near capacity (ρ ≥ 0.80): a 92%, b 88%; a (0.92) does not stand out from the busiest of the others (0.88) by more than 0.10."
        );
        assert_eq!(
            words(HeadroomFact::NoSingleCulprit { near: near.clone(), demand_known: true }),
            "No single culprit: 2 vertices run near capacity (a 92%, b 88%); the job needs more capacity."
        );
        // Without the demand: neither "needs more capacity" nor a number.
        assert_eq!(
            words(HeadroomFact::NoSingleCulprit { near, demand_known: false }),
            "No single culprit: 2 vertices run near capacity (a 92%, b 88%) and limit the job, which runs flat out; the demand is unknown, so whether it needs more capacity, and how much, is unknown."
        );
    }

    #[test]
    fn an_async_operator_reads_littles_law_with_the_capacity_from_the_plan() {
        // 2 subtasks × 120 slots / 400 requests/s = 0.60 s a request.
        assert_eq!(
            words(AsyncFact::AsyncCause {
                vertex: "enrich".into(),
                utilisation_ratio: 0.95,
                cpu_load_ratio: 0.2,
                law: Some(LittlesLaw::Capacity { requests_per_s: 400.0, subtasks: 2, capacity: 120 }),
            }),
            "enrich is 95% busy but its TaskManagers use only 20% CPU: the task thread waits for a free slot in the async operator's in-flight queue (Flink counts that wait as busy time). Throughput is bounded by queue capacity × parallelism ÷ request latency (Little's law). It completes 400 requests/s with 2 subtasks × 120 in-flight slots, so each request takes about 2 × 120 / 400 = 600 ms: the ceiling is 2 × 120 / 600 ms = 400 requests/s until the latency falls or the capacity grows."
        );
        // Twice 120 slots, twice 400 requests/s.
        assert_eq!(
            words(AsyncFact::RaiseInFlight { capacity: 120, requests_per_s: 400.0, timeout_ms: Some(20000) }),
            "Raise the in-flight capacity from 120 to 240 (SQL: table.exec.async-lookup.buffer-capacity; DataStream: the capacity argument of AsyncDataStream.unorderedWait): at the same latency the ceiling doubles to ~800 requests/s, if the service can take the extra concurrency; check the 20000 ms timeout too."
        );
    }
}
