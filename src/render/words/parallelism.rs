//! Words of [`ParallelismFact`]: the parallelism advice with its arithmetic.

use std::fmt::{self, Formatter};

use super::numbers::{approx, human_secs};
use crate::model::facts::parallelism::{Limit, ParallelismFact};

pub(super) fn word(fact: &ParallelismFact, f: &mut Formatter<'_>) -> fmt::Result {
    let ParallelismFact { vertex, from_parallelism: now, target_utilisation_ratio: target, catch_up_s, needed: n } =
        fact;
    write!(
        f,
        "{vertex}: parallelism {now} to {}: ceil({now} × (offered {} records/s / {target}",
        n.parallelism,
        approx(n.offered_per_s)
    )?;
    if n.catch_up_per_s > 0.0 {
        write!(f, " + {} records/s to drain the backlog within {}", approx(n.catch_up_per_s), human_secs(*catch_up_s))?;
    }
    write!(f, ") / capacity {} records/s)", approx(n.capacity_per_s))?;
    if let Some(from) = n.aligned_from {
        write!(f, " = {from}, raised to {}", n.parallelism)?;
        limit(f, n.limit, true)?;
    } else if n.clamped {
        write!(f, ", capped at {}", n.parallelism)?;
        limit(f, n.limit, false)?;
    }
    if n.keep_up != n.parallelism && n.catch_up_per_s > 0.0 {
        write!(f, "; {} would only keep the lag from growing", n.keep_up)?;
    }
    if let Some(d) = n.drain_seconds {
        let backlog = n.backlog.map(approx).unwrap_or_else(|| "unknown".into());
        write!(f, "; at {} the backlog of {backlog} records ", n.parallelism)?;
        if d.is_finite() {
            write!(f, "drains in about {}", human_secs(d))?;
        } else {
            f.write_str(match n.limit {
                Some(Limit::Partitions(_)) => "does not drain: the topic needs more partitions",
                Some(Limit::KeyGroups { .. }) => "does not drain: the max parallelism is reached",
                None => "does not drain: more capacity per subtask is needed",
            })?;
        }
    }
    if !n.offered_known {
        f.write_str(
            " — the offered rate is the observed one, a lower bound: the backlog is known, not how fast the lag grows",
        )?;
    }
    f.write_str(".")
}

/// ` by the 128 key groups`, ` so the busiest subtask's share of the 16 partitions it
/// reads gives the capacity needed`.
fn limit(f: &mut Formatter<'_>, limit: Option<Limit>, aligned: bool) -> fmt::Result {
    let how = if aligned { "so the busiest subtask's share of" } else { "by" };
    match limit {
        Some(Limit::KeyGroups { count, default }) => {
            write!(f, " {how} the {count} key groups")?;
            if default {
                f.write_str(" (Flink's default max parallelism at this parallelism; pipeline.max-parallelism if the job sets it; it cannot change without losing keyed state)")?;
            }
        }
        Some(Limit::Partitions(n)) => write!(f, " {how} the {n} partitions it reads")?,
        None => return Ok(()),
    }
    if aligned { f.write_str(" gives the capacity needed") } else { Ok(()) }
}

#[cfg(test)]
mod tests {
    use crate::model::facts::Fact;
    use crate::model::facts::parallelism::{Limit, Needed, ParallelismFact};

    fn fact(vertex: &str, from: u32, needed: Needed) -> String {
        Fact::from(ParallelismFact {
            vertex: vertex.into(),
            from_parallelism: from,
            target_utilisation_ratio: 0.7,
            catch_up_s: 1800.0,
            needed,
        })
        .to_string()
    }

    /// score of `diagnose::parallelism`'s tests: 2 → 4, a backlog of 60,000 records.
    fn score() -> Needed {
        Needed {
            parallelism: 4,
            keep_up: 4,
            offered_per_s: 1200.0,
            capacity_per_s: 1111.11,
            offered_known: true,
            backlog: Some(60_000.0),
            catch_up_per_s: 33.33,
            drain_seconds: Some(58.7),
            limit: Some(Limit::KeyGroups { count: 128, default: true }),
            clamped: false,
            aligned_from: None,
        }
    }

    #[test]
    fn the_advice_reads_its_terms_the_catch_up_and_how_long_the_backlog_takes() {
        // Numbers to three significant digits (1111.11 → 1110), 1800 s → 30 min, 58.7 s → 59 s.
        assert_eq!(
            fact("score", 2, score()),
            "score: parallelism 2 to 4: ceil(2 × (offered 1200 records/s / 0.7 + 33.3 records/s to drain the backlog within 30 min) / capacity 1110 records/s); at 4 the backlog of 60000 records drains in about 59 s."
        );
    }

    #[test]
    fn an_aligned_advice_says_what_it_was_raised_from_and_what_only_keeps_up() {
        let n = Needed { parallelism: 19, keep_up: 17, aligned_from: Some(17), drain_seconds: None, ..score() };
        assert_eq!(
            fact("match", 12, n),
            "match: parallelism 12 to 19: ceil(12 × (offered 1200 records/s / 0.7 + 33.3 records/s to drain the backlog within 30 min) / capacity 1110 records/s) = 17, raised to 19 so the busiest subtask's share of the 128 key groups (Flink's default max parallelism at this parallelism; pipeline.max-parallelism if the job sets it; it cannot change without losing keyed state) gives the capacity needed; 17 would only keep the lag from growing."
        );
    }

    #[test]
    fn a_capped_advice_names_its_limit_and_a_backlog_that_cannot_drain() {
        let n = Needed {
            parallelism: 2,
            clamped: true,
            keep_up: 2,
            drain_seconds: Some(f64::INFINITY),
            limit: Some(Limit::Partitions(2)),
            ..score()
        };
        assert_eq!(
            fact("Source: in", 2, n),
            "Source: in: parallelism 2 to 2: ceil(2 × (offered 1200 records/s / 0.7 + 33.3 records/s to drain the backlog within 30 min) / capacity 1110 records/s), capped at 2 by the 2 partitions it reads; at 2 the backlog of 60000 records does not drain: the topic needs more partitions."
        );
    }

    #[test]
    fn an_advice_from_the_observed_rate_says_it_is_a_lower_bound() {
        let n = Needed {
            parallelism: 3,
            keep_up: 3,
            offered_per_s: 1000.0,
            offered_known: false,
            // A backlog known from one sample of the lag: the demand is known to exceed
            // the throughput, not by how much (no growth).
            backlog: Some(60_000.0),
            catch_up_per_s: 0.0,
            drain_seconds: None,
            limit: None,
            ..score()
        };
        assert_eq!(
            fact("a", 2, n),
            "a: parallelism 2 to 3: ceil(2 × (offered 1000 records/s / 0.7) / capacity 1110 records/s) — the offered rate is the observed one, a lower bound: the backlog is known, not how fast the lag grows."
        );
    }
}
