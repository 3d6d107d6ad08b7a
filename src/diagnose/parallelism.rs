//! Parallelism advice users can apply, the way the Flink autoscaler computes it
//! (`ScalingMetricEvaluator`, `JobVertexScaler`):
//!
//! * capacity (true processing rate) from the subtasks that have busy time;
//! * the target rate: the offered rate at the target utilisation, plus a catch-up term
//!   that drains the current backlog within `diagnosis.catch_up`;
//! * `ceil(p × target rate / capacity)`, clamped to the max parallelism (key groups) of a
//!   keyed vertex or the partition count of a source, and aligned so that the busiest
//!   subtask's share of key groups or partitions gives the capacity needed;
//! * how long the backlog takes to drain at the parallelism advised.
//!
//! Pure.

use crate::diagnose::Context;
use crate::diagnose::signals::VertexSignals;
use crate::diagnose::slope_per_s;
use crate::diagnose::steps::locate::{exporter_lag, sum_lag};
pub use crate::model::facts::parallelism::{Limit, Needed, ParallelismFact};

/// Flink's default max parallelism (number of key groups) for operator parallelism `p`:
/// `min(max(roundUpToPowerOfTwo(p + p / 2), 128), 32768)`.
pub fn default_max_parallelism(p: u32) -> u32 {
    (p + p / 2).max(1).next_power_of_two().clamp(128, 32768)
}

/// How much more the sources are offered than they emit: (Σ emitted + lag growth) /
/// Σ emitted, the lag from Flink's `pendingRecords` or else a Kafka exporter's consumer-group
/// lag. `None` without lag data.
pub fn offered_factor(ctx: &Context) -> Option<f64> {
    let emitted = emitted(ctx)?;
    let sources: Vec<&VertexSignals> = ctx.signals.vertices.iter().filter(|v| v.is_source).collect();
    // Flink's own pendingRecords per source, or else the job's consumer-group lag once.
    let own: Vec<f64> = sources.iter().filter_map(|v| slope_per_s(&sum_lag(ctx, &v.id))).collect();
    let growth = if own.is_empty() { slope_per_s(&exporter_lag(ctx))? } else { own.iter().map(|g| g.max(0.0)).sum() };
    Some((emitted + growth.max(0.0)) / emitted)
}

/// Whether the demand on the job is known: a source lag (Flink's `pendingRecords`, a Kafka
/// exporter's consumer-group lag) that gives the offered rate or a backlog. Without it the
/// throughput of a job whose source has no rate limit is its maximum, not its demand.
pub fn demand_known(ctx: &Context) -> bool {
    offered_factor(ctx).is_some() || backlog(ctx).is_some()
}

/// Records/s the source vertices emit; `None` when unknown or 0.
fn emitted(ctx: &Context) -> Option<f64> {
    let e: f64 = ctx.signals.vertices.iter().filter(|v| v.is_source).filter_map(|v| v.throughput_all_subtasks()).sum();
    (e > 0.0).then_some(e)
}

/// The current backlog at the sources, records: Flink's `pendingRecords` summed over the
/// source subtasks at their newest step, else the job's consumer-group lag.
pub fn backlog(ctx: &Context) -> Option<f64> {
    let own: f64 = ctx
        .signals
        .vertices
        .iter()
        .filter(|v| v.is_source)
        .filter_map(|v| sum_lag(ctx, &v.id).last().map(|p| p.1))
        .sum();
    if own > 0.0 {
        return Some(own);
    }
    exporter_lag(ctx).last().map(|p| p.1).filter(|b| *b > 0.0)
}

/// Partitions the job's sources read (distinct topic partitions of its consumer group).
pub fn partitions(ctx: &Context) -> Option<u32> {
    let set: std::collections::BTreeSet<(&str, &str)> =
        ctx.snapshot.partitions.iter().map(|p| (p.topic.as_str(), p.partition.as_str())).collect();
    (!set.is_empty()).then_some(set.len() as u32)
}

/// The smallest parallelism ≥ `raw` (and ≤ `units`) whose busiest subtask holds at most
/// `floor(units / raw)` of the `units` (key groups, partitions): with uneven shares the
/// busiest subtask sets the pace, so 17 subtasks over 128 key groups (some hold 8) do no
/// better than 16; 19 (at most 7 each) do.
pub fn align(raw: u32, units: u32) -> u32 {
    if raw >= units {
        return units;
    }
    let per_subtask = units / raw;
    (raw..=units).find(|p| units.div_ceil(*p) <= per_subtask).unwrap_or(units)
}

/// Why no parallelism number can be given for a vertex.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoNumber {
    /// Its records rates or busy time are missing: its capacity is unknown.
    Rates,
    /// The demand on the job is unknown ([`demand_known`]): the throughput is the job's
    /// maximum, not what it is offered, and a number from it would only move the
    /// saturation point.
    Demand,
}

/// The parallelism `v` needs. Every parallelism number culprit advises comes from here, so
/// none is given without the demand: [`NoNumber::Demand`] without a source lag or backlog
/// (a job running flat out), [`NoNumber::Rates`] without rates or busy time.
pub fn needed(ctx: &Context, v: &VertexSignals) -> Result<Needed, NoNumber> {
    let n = needed_at_observed_demand(ctx, v).ok_or(NoNumber::Rates)?;
    if demand_known(ctx) { Ok(n) } else { Err(NoNumber::Demand) }
}

/// [`needed`] whether or not the demand is known (the observed rate then stands for it).
fn needed_at_observed_demand(ctx: &Context, v: &VertexSignals) -> Option<Needed> {
    // The whole vertex, subtasks without metrics included: advice from the subtasks that
    // report would raise the parallelism to what it already is.
    let capacity = v.capacity().filter(|c| *c > 0.0)?;
    let observed = v.throughput_all_subtasks()?;
    let p = v.parallelism_now().max(1) as f64;
    let factor = offered_factor(ctx);
    let offered = observed * factor.unwrap_or(1.0);
    let target = ctx.cfg.thresholds.target_utilisation;
    let catch_up_s = ctx.cfg.catch_up.as_ms() as f64 / 1000.0;
    // The backlog reaches this vertex in proportion to the records it gets per source record.
    let backlog = backlog(ctx).zip(emitted(ctx)).map(|(b, e)| b * observed / e);
    let catch_up_per_s = match backlog {
        Some(b) if catch_up_s > 0.0 => b / catch_up_s,
        _ => 0.0,
    };
    let keep_up = ((p * offered / (capacity * target)).ceil().max(1.0)) as u32;
    let raw = ((p * (offered / target + catch_up_per_s) / capacity).ceil().max(1.0)) as u32;
    let limit = if v.is_source {
        partitions(ctx).map(Limit::Partitions)
    } else if v.keyed_input {
        Some(Limit::KeyGroups { count: default_max_parallelism(v.parallelism), default: true })
    } else {
        None
    };
    let units = match limit {
        Some(Limit::KeyGroups { count, .. }) | Some(Limit::Partitions(count)) => Some(count),
        None => None,
    };
    let (parallelism, clamped, aligned_from) = match units {
        Some(u) => {
            let a = align(raw, u);
            (a, raw > u, (a != raw && raw <= u).then_some(raw))
        }
        None => (raw, false, None),
    };
    // The capacity the advised parallelism gives: the busiest subtask's share sets it.
    let effective = match units {
        Some(u) => u as f64 / u.div_ceil(parallelism) as f64,
        None => parallelism as f64,
    };
    let new_capacity = capacity / p * effective;
    let drain_seconds = backlog.filter(|b| *b > 0.0).map(|b| {
        let surplus = new_capacity - offered;
        if surplus > 0.0 { b / surplus } else { f64::INFINITY }
    });
    Some(Needed {
        parallelism,
        keep_up,
        offered_per_s: offered,
        capacity_per_s: capacity,
        offered_known: factor.is_some(),
        backlog,
        catch_up_per_s,
        drain_seconds,
        limit,
        clamped,
        aligned_from,
    })
}

impl Needed {
    /// The advice as a fact with its terms: `name`'s parallelism from `now` to the advised
    /// number at the target utilisation `target`, draining within `catch_up_s`.
    pub fn fact(&self, name: &str, now: u32, target: f64, catch_up_s: f64) -> ParallelismFact {
        ParallelismFact {
            vertex: name.to_string(),
            from_parallelism: now,
            target_utilisation_ratio: target,
            catch_up_s,
            needed: *self,
        }
    }

    /// [`Self::fact`] worded: the advice in one sentence with its numbers, why, and how long
    /// the backlog takes.
    pub fn sentence(&self, name: &str, now: u32, target: f64, catch_up_s: f64) -> String {
        crate::model::facts::Fact::from(self.fact(name, now, target, catch_up_s)).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::testkit::*;

    #[test]
    fn flinks_default_max_parallelism_is_a_power_of_two_at_least_128() {
        // 12 + 6 = 18 → 32 → at least 128; 200 + 100 = 300 → 512.
        assert_eq!(default_max_parallelism(12), 128);
        assert_eq!(default_max_parallelism(200), 512);
        assert_eq!(default_max_parallelism(30000), 32768);
    }

    #[test]
    fn alignment_gives_the_busiest_subtask_few_enough_key_groups() {
        // 128 key groups: 16 divides them (8 each). 17 leaves some subtasks 8 (= 16's
        // pace); floor(128 / 17) = 7 → ceil(128 / p) ≤ 7 → p ≥ 18.3 → 19.
        assert_eq!(align(16, 128), 16);
        assert_eq!(align(17, 128), 19);
        // 16 partitions, 5 needed: floor(16/5) = 3 → ceil(16/p) ≤ 3 → p ≥ 5.33 → 6.
        assert_eq!(align(5, 16), 6);
        // More than there are: capped at the count.
        assert_eq!(align(40, 16), 16);
    }

    /// Source (2 subtasks emitting 500 records/s each) → score (keyed, 2 subtasks at 0.9
    /// busy, 500 records/s each), no lag of any kind.
    fn without_lag() -> SnapshotBuilder {
        SnapshotBuilder::new()
            .vertex("src", "Source: in", 2)
            .vertex("score", "score", 2)
            .edge("src", "score", "HASH")
            .all_subtasks("src", 0.05, 0.9, 0.05, None)
            .records_out("src", 0, 500.0)
            .records_out("src", 1, 500.0)
            .all_subtasks("score", 0.9, 0.0, 0.1, 500.0)
    }

    /// Source (2 subtasks emitting 500 records/s each, lag growing 100 records/s per
    /// subtask from 0) → score (keyed, 2 subtasks at 0.9 busy, 500 records/s each).
    fn job() -> SnapshotBuilder {
        without_lag().pending_records("src", 0, line(-300, 0, 5, 0.0, 100.0)).pending_records(
            "src",
            1,
            line(-300, 0, 5, 0.0, 100.0),
        )
    }

    #[test]
    fn the_advice_drains_the_backlog_within_the_catch_up_time_and_says_how_long_it_takes() {
        // Capacity = 2 × 500 / 0.9 = 1111.1 records/s. Offered = 1000 × (1000 + 200) / 1000
        // = 1200. Backlog = 2 × 100 × 300 = 60,000 records (score gets 1000 per 1000 source
        // records: the same). Catch-up 60,000 / 1800 s = 33.3 records/s.
        // Keep up: ceil(2 × 1200 / (1111.1 × 0.7)) = ceil(3.086) = 4.
        // Advised: ceil(2 × (1200 / 0.7 + 33.3) / 1111.1) = ceil(2 × 1747.6 / 1111.1)
        //        = ceil(3.146) = 4; 128 key groups: floor(128/4) = 32 = ceil(128/4) → 4.
        // At 4: capacity 2222.2, surplus 2222.2 − 1200 = 1022.2 → 60,000 / 1022.2 = 58.7 s.
        let snap = job().build();
        let n = on_vertex(&snap, "score", needed).unwrap();
        assert_eq!((n.keep_up, n.parallelism), (4, 4));
        assert_close(n.capacity_per_s, 1111.11, 0.01);
        assert_close(n.offered_per_s, 1200.0, 1e-6);
        assert_close(n.backlog.unwrap(), 60_000.0, 1e-6);
        assert_close(n.catch_up_per_s, 33.33, 0.01);
        assert_close(n.drain_seconds.unwrap(), 58.70, 0.01);
        assert_eq!(n.limit, Some(Limit::KeyGroups { count: 128, default: true }));
        // The fact carries the terms: from 2 to 4 at 0.7 within 1800 s (the wording is
        // render::words::parallelism's tests').
        let f = n.fact("score", 2, 0.7, 1800.0);
        assert_eq!((f.vertex.as_str(), f.from_parallelism, f.needed.parallelism), ("score", 2, 4));
        assert_eq!((f.target_utilisation_ratio, f.catch_up_s), (0.7, 1800.0));
    }

    #[test]
    fn without_the_plan_the_same_data_gives_the_same_advice() {
        // The source shows in its metrics (pendingRecords), so the offered rate and the
        // backlog are the same with or without the plan. Without it the key groups are
        // unknown (no edges, so no keyBy): the advice is not aligned, and it says nothing
        // about key groups. Here 4 needs no alignment either way.
        let with = on_vertex(&job().build(), "score", needed).unwrap();
        let without = on_vertex(&job().without_graph().build(), "score", needed).unwrap();
        assert_eq!((without.parallelism, without.keep_up), (with.parallelism, with.keep_up));
        assert_close(without.offered_per_s, with.offered_per_s, 1e-9);
        assert_eq!(without.backlog, with.backlog);
        assert!(without.offered_known);
    }

    #[test]
    fn no_number_is_computed_without_the_demand_or_without_rates() {
        // score has rates and busy time, but no lag, exporter lag or backlog: the demand is
        // unknown, whatever the capacity.
        let no_lag = without_lag;
        assert_eq!(on_vertex(&no_lag().build(), "score", needed), Err(NoNumber::Demand));
        // Lag but no records rates at score: its capacity is unknown.
        let no_rates = job().all_subtasks("score", 0.9, 0.0, 0.1, None).build();
        assert_eq!(on_vertex(&no_rates, "score", needed), Err(NoNumber::Rates));
        // One sample of lag, 30,000 records per subtask: a backlog (demand known to exceed
        // the throughput) without its growth: a number from the observed rate, said to be a
        // lower bound. Capacity 1111.1, offered 1000, catch-up 60,000 / 1800 = 33.3:
        // ceil(2 × (1000 / 0.7 + 33.3) / 1111.1) = ceil(2.63) = 3; keyed (128 key groups):
        // floor(128 / 3) = 42 < ceil(128 / 3) = 43 → aligned to 4.
        let backlog_only = no_lag()
            .pending_records("src", 0, vec![(t(0), 30_000.0)])
            .pending_records("src", 1, vec![(t(0), 30_000.0)])
            .build();
        let n = on_vertex(&backlog_only, "score", needed).unwrap();
        assert!(!n.offered_known);
        assert_eq!((n.aligned_from, n.parallelism), (Some(3), 4));
        assert_close(n.backlog.unwrap(), 60_000.0, 1e-6);
    }

    #[test]
    fn a_subtask_with_no_busy_time_does_not_void_the_capacity() {
        // score[1] reports busy 0 (it got nothing): capacity from score[0] alone,
        // 500 / 0.9 = 555.6 per subtask × 2 subtasks = 1111.1 records/s.
        let snap = job().subtask("score", 1, 0.0, 0.0, 1.0, 0.0).build();
        let v = with_context(&snap, |ctx| ctx.signals.vertex("score").unwrap().capacity());
        assert_close(v.unwrap(), 1111.11, 0.01);
    }

    #[test]
    fn a_source_is_capped_at_its_partitions_and_says_the_backlog_cannot_drain() {
        // The source itself, 2 subtasks at 0.95 busy emitting 500 each: capacity
        // 2 × 500 / 0.95 = 1052.6. It reads 2 partitions. Advised ≥ 3 → capped at 2 = now:
        // capacity stays 1052.6 < offered 1200: the backlog never drains.
        let snap = job()
            .all_subtasks("src", 0.95, 0.0, 0.05, None)
            .records_out("src", 0, 500.0)
            .records_out("src", 1, 500.0)
            .partition(crate::model::snapshot::PartitionLag { ..partition("in", "0") })
            .partition(crate::model::snapshot::PartitionLag { ..partition("in", "1") })
            .build();
        let n = on_vertex(&snap, "src", needed).unwrap();
        assert_eq!((n.parallelism, n.clamped), (2, true));
        assert_eq!(n.drain_seconds, Some(f64::INFINITY));
        // Capped by the 2 partitions it reads, so the backlog cannot drain: the topic needs
        // more partitions.
        assert_eq!(n.limit, Some(Limit::Partitions(2)));
        assert_eq!(n.aligned_from, None);
    }
}
