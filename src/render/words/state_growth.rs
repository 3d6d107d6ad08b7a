//! Words of [`StateGrowthFact`].

use std::fmt::{self, Formatter};

use super::numbers::{human_bytes, human_secs, pct};
use crate::model::facts::state_growth::{Growth, SizeSource, StateGrowthFact};

fn source(s: SizeSource) -> &'static str {
    match s {
        SizeSource::LiveData => "RocksDB's estimate-live-data-size",
        SizeSource::SstFiles => "RocksDB's total-sst-files-size",
        SizeSource::CheckpointFullSize => "the job's lastCheckpointFullSize",
        SizeSource::CheckpointSize => "the job's lastCheckpointSize",
    }
}

/// `grows 2.0 GB/h (18%/h of 11.0 GB) over 30 min, 100% of its movement upward (RocksDB's …)`.
fn numbers(g: &Growth, f: &mut Formatter<'_>) -> fmt::Result {
    write!(
        f,
        "{}/h ({}/h of {} now) over {}, {} of its movement upward ({}, {} samples)",
        human_bytes(g.bytes_per_hour()),
        pct(g.per_hour_ratio),
        human_bytes(g.bytes_now),
        human_secs(g.span_s),
        pct(g.rising_ratio),
        source(g.source),
        g.samples
    )
}

pub(super) fn word(fact: &StateGrowthFact, f: &mut Formatter<'_>) -> fmt::Result {
    match fact {
        StateGrowthFact::Stateless { vertex } => {
            write!(f, "{vertex} holds no state the metrics or the graph show: its state cannot be growing.")
        }
        StateGrowthFact::TooFewSamples { source: s, samples, needed } => write!(
            f,
            "{} has {samples} sample{} over the trend lookback, fewer than the {needed} needed to call the state growing.",
            source(*s),
            if *samples == 1 { "" } else { "s" }
        ),
        StateGrowthFact::NotGrowing { vertex, growth, short_of_s: Some(min) } => write!(
            f,
            "The state of {vertex} rises ({}/h at {} now, {} of its movement upward; {}, {} samples), but over {} only: growth is judged over at least {} (a fresh job's state fills from empty).",
            human_bytes(growth.bytes_per_hour()),
            human_bytes(growth.bytes_now),
            pct(growth.rising_ratio),
            source(growth.source),
            growth.samples,
            human_secs(growth.span_s),
            human_secs(*min)
        ),
        StateGrowthFact::NotGrowing { vertex, growth, short_of_s: None } => {
            write!(f, "The state of {vertex} does not only grow: ")?;
            write!(
                f,
                "{}/h at {} now, {} of its movement upward ({}, {} samples over {}).",
                human_bytes(growth.bytes_per_hour()),
                human_bytes(growth.bytes_now),
                pct(growth.rising_ratio),
                source(growth.source),
                growth.samples,
                human_secs(growth.span_s)
            )
        }
        StateGrowthFact::WhoseUnknown { vertex } => write!(
            f,
            "{vertex} is stateful, but no state size of its own is reported and the job's checkpoints hold other vertices' state too."
        ),
        StateGrowthFact::NoSizes { vertex } => write!(
            f,
            "{vertex} is stateful, but no state size is reported: neither lastCheckpointFullSize / lastCheckpointSize nor RocksDB's estimate-live-data-size (state.backend.rocksdb.metrics.estimate-live-data-size: true)."
        ),
        StateGrowthFact::Grows { vertex, growth, keys_per_s } => {
            write!(f, "The state of {vertex} only grows: ")?;
            numbers(growth, f)?;
            if let Some(k) = keys_per_s.filter(|k| *k > 0.0) {
                write!(f, "; its keys grow by about {:.0} per hour", k * 3600.0)?;
            }
            f.write_str(".")
        }
        StateGrowthFact::GrowthCause { vertex, growth, rocksdb } => {
            write!(f, "{vertex} keeps state that is never cleaned up (no state TTL, or one far too long): it grows ")?;
            numbers(growth, f)?;
            if *rocksdb {
                f.write_str(". In RocksDB every read then reaches more levels and misses the block cache more often, compaction rewrites ever more data, and each checkpoint uploads more, which shows upstream as backpressure.")
            } else {
                f.write_str(". Ever more state makes every access, garbage collection and checkpoint slower, which shows upstream as backpressure.")
            }
        }
        StateGrowthFact::Ttl { bytes_per_hour, bytes_now, ttl_hours } => write!(
            f,
            "Give the state a TTL: StateTtlConfig.newBuilder(Duration.ofHours({ttl_hours:.0})) on each state descriptor (DataStream API), or table.exec.state.ttl: {ttl_hours:.0} h (SQL). The state grows {}/h; with a TTL it levels off near that growth × the TTL, so {ttl_hours:.0} h holds it near today's {}. Choose the longest time a key must be remembered, not less.",
            human_bytes(*bytes_per_hour),
            human_bytes(*bytes_now)
        ),
        StateGrowthFact::CompactionFilter => f.write_str(
            "With RocksDB, let compaction drop expired entries: StateTtlConfig.Builder.cleanupInRocksdbCompactFilter(1000) (the default cleanup since Flink 1.10 once a TTL is set); without a TTL it has nothing to drop.",
        ),
        StateGrowthFact::NotMoreMemory { bytes_per_hour } => write!(
            f,
            "More RocksDB memory alone (taskmanager.memory.managed.fraction, state.backend.rocksdb.memory.*): state that grows {}/h outgrows any cache; it only postpones the slowdown.",
            human_bytes(*bytes_per_hour)
        ),
        StateGrowthFact::Summary { vertex, bytes_per_hour } => write!(
            f,
            "{vertex} is the culprit: its state only grows ({}/h) and slows it down; give the state a TTL.",
            human_bytes(*bytes_per_hour)
        ),
        StateGrowthFact::GrowsWithoutBackpressure { vertex, growth } => write!(
            f,
            "But {vertex}'s state only grows: {}/h at {} now; give it a TTL before its checkpoints and restores outgrow their time.",
            human_bytes(growth.bytes_per_hour()),
            human_bytes(growth.bytes_now)
        ),
        StateGrowthFact::GrowsElsewhere { culprit, growth } => {
            write!(f, "The job's state only grows (")?;
            numbers(growth, f)?;
            write!(
                f,
                "), but it is not shown to be {culprit}'s and does not explain this bottleneck; still, state that only grows needs a TTL (StateTtlConfig, table.exec.state.ttl) before checkpoints outgrow their timeout."
            )
        }
        StateGrowthFact::TimeoutAhead { duration_ms, growth_ms_per_s, timeout_ms, time_to_timeout_s, state_bytes_per_hour } => {
            write!(
                f,
                "Checkpoints take longer and longer: the last took {}, growing {} per minute; at this rate they reach the {} timeout (execution.checkpointing.timeout) in {} and then fail",
                human_secs(duration_ms / 1000.0),
                human_secs(growth_ms_per_s * 60.0 / 1000.0),
                human_secs(*timeout_ms as f64 / 1000.0),
                human_secs(*time_to_timeout_s)
            )?;
            match state_bytes_per_hour {
                Some(b) => write!(f, ", with the state growing {}/h.", human_bytes(*b)),
                None => f.write_str("."),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::model::facts::Fact;
    use crate::model::facts::state_growth::{Growth, SizeSource, StateGrowthFact};

    fn growth() -> Growth {
        Growth {
            source: SizeSource::LiveData,
            bytes_now: 11e9,
            bytes_per_s: 2e9 / 3600.0,
            per_hour_ratio: 2.0 / 11.0,
            samples: 31,
            span_s: 1800.0,
            rising_ratio: 1.0,
            only_grows: true,
        }
    }

    #[test]
    fn growth_reads_with_its_rate_share_and_source() {
        let f: Fact = StateGrowthFact::Grows { vertex: "agg".into(), growth: growth(), keys_per_s: None }.into();
        assert_eq!(
            f.to_string(),
            "The state of agg only grows: 2.0 GB/h (18%/h of 11.0 GB now) over 30 min, 100% of its movement upward (RocksDB's estimate-live-data-size, 31 samples)."
        );
    }

    #[test]
    fn the_ttl_fix_names_both_apis_and_the_value() {
        let f: Fact = StateGrowthFact::Ttl { bytes_per_hour: 2e9, bytes_now: 11e9, ttl_hours: 6.0 }.into();
        let s = f.to_string();
        assert!(s.contains("Duration.ofHours(6)") && s.contains("table.exec.state.ttl: 6 h"), "{s}");
        assert!(s.contains("near today's 11.0 GB"), "{s}");
    }

    #[test]
    fn the_timeout_hazard_says_when() {
        let f: Fact = StateGrowthFact::TimeoutAhead {
            duration_ms: 40_000.0,
            growth_ms_per_s: 10_000.0 / 60.0,
            timeout_ms: 120_000,
            time_to_timeout_s: 480.0,
            state_bytes_per_hour: None,
        }
        .into();
        assert_eq!(
            f.to_string(),
            "Checkpoints take longer and longer: the last took 40 s, growing 10 s per minute; at this rate they reach the 2 min timeout (execution.checkpointing.timeout) in 8 min and then fail."
        );
    }
}
