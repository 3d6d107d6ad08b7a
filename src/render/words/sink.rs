//! Words of [`SinkFact`].

use std::fmt::{self, Formatter};

use super::numbers::{human_secs, num, pct, pct_or_unknown, per_record};
use crate::model::facts::sink::SinkFact;

pub(super) fn word(fact: &SinkFact, f: &mut Formatter<'_>) -> fmt::Result {
    match fact {
        SinkFact::NoGraph => f.write_str("Without the job graph it is unknown whether the culprit is a sink."),
        SinkFact::NotASink { vertex } => write!(f, "{vertex} has downstream consumers; it is not a sink."),
        SinkFact::IsASink { vertex } => write!(f, "{vertex} is a sink vertex (no downstream consumers)."),
        SinkFact::HotKeyAtDestination {
            subtask_name,
            hot_busy_ratio,
            share_ratio,
            parallelism,
            others_median_busy_ratio,
        } => write!(
            f,
            "One sink subtask is hot: {subtask_name} is busy {} and receives {} of the records (share {share_ratio:.2} at parallelism {parallelism}), while the others are about {} busy: a hot key or document at the destination.",
            pct_or_unknown(*hot_busy_ratio),
            pct(*share_ratio),
            pct_or_unknown(*others_median_busy_ratio)
        ),
        SinkFact::SpreadTheHotKey { subtask_name, share_ratio, vertex } => write!(
            f,
            "Spread the hot key at the destination: write it under a different key or partition (the sink's input is keyed so {subtask_name} gets {} of the records), or batch and merge writes to that key before they reach the system behind {vertex}.",
            pct(*share_ratio)
        ),
        SinkFact::SlowWriter { subtask_name, hot_busy_ratio, others_median_busy_ratio, share_ratio } => {
            write!(
                f,
                "One sink writer is slow: {subtask_name} is busy {} while the others are about {} busy, although records are spread evenly",
                pct_or_unknown(*hot_busy_ratio),
                pct_or_unknown(*others_median_busy_ratio)
            )?;
            if let Some(s) = share_ratio {
                write!(f, " (share {s:.2})")?;
            }
            f.write_str(": that writer's connection or the destination node it talks to is slow or stuck.")
        }
        SinkFact::LookAtTheWriter { subtask_name, tm } => write!(
            f,
            "Look at the destination node, shard or partition that {subtask_name} writes to, and at its TaskManager ({tm}): a stuck connection, a slow replica, a hot shard. Restarting that writer's connection (or the TaskManager) moves it elsewhere."
        ),
        SinkFact::OneSubtaskSummary { vertex, subtask } => write!(
            f,
            "{vertex} (sink) is the culprit: one of its subtasks ({subtask}) is the bottleneck, the others are mostly idle."
        ),
        SinkFact::UniformlySlow { with_data, subtasks, busy_range, accepts_records_per_s, per_record_ms } => {
            match (*with_data, *subtasks) {
                (1, all) if all > 1 => f.write_str("The one subtask with data")?,
                (with, all) if with > 0 && with < all => write!(f, "The {with} subtasks with data")?,
                (_, 1) => f.write_str("The one subtask")?,
                (_, 2) => f.write_str("Both subtasks")?,
                (_, n) => write!(f, "All {n} subtasks")?,
            }
            write!(f, " of the sink are busy ({busy_range}): ")?;
            accepts(*accepts_records_per_s, f)?;
            if let Some(ms) = per_record_ms {
                write!(f, " ({} per record per writer)", per_record(*ms))?;
            }
            f.write_str(".")
        }
        SinkFact::BusyUnknown { accepts_records_per_s } => {
            f.write_str("The sink holds the job back and ")?;
            accepts(*accepts_records_per_s, f)?;
            f.write_str(" (its busy time is unknown).")
        }
        SinkFact::FixTheSystem { vertex, per_record_ms } => write!(
            f,
            "Fix the system behind {vertex}: it takes {} per record. Look at its write latency, locks, throttling, indexing and partitions (database, search cluster, HTTP service or broker).",
            per_record_ms.map(per_record).unwrap_or_else(|| "too long".into())
        ),
        SinkFact::BiggerBatches => f.write_str(
            "Write in bigger batches: raise the sink's batch size and flush interval (JDBC sink.buffer-flush.max-rows / sink.buffer-flush.interval, Elasticsearch sink.bulk-flush.max-actions, Kafka properties.linger.ms and properties.batch.size).",
        ),
        SinkFact::MoreConnections { parallelism } => {
            write!(f, "Only if the destination scales with more connections: {parallelism}")
        }
        SinkFact::SlowSystemSummary { vertex, records_per_s } => write!(
            f,
            "{vertex} (sink) is the culprit: the system it writes to is too slow ({} records/s); the vertices before it are backpressured.",
            records_per_s.map(num).unwrap_or_else(|| "unknown".into())
        ),
        SinkFact::FlushesOnCheckpoints {
            vertex,
            period_s,
            last_checkpoint_ms,
            busy_during_flush_ratio,
            busy_between_ratio,
        } => {
            write!(f, "{vertex} stalls the job in phase with the checkpoints (every ~{period_s} s)")?;
            if let Some(d) = last_checkpoint_ms {
                write!(f, ", and the last checkpoint took {}", human_secs(d / 1000.0))?;
            }
            f.write_str(": a sink that buffers its writes and flushes them synchronously in snapshotState (or commits in a pre-commit) blocks its task thread during every checkpoint, so its input buffers fill and everything upstream is backpressured until the flush ends; between checkpoints it keeps up")?;
            if let (Some(d), Some(b)) = (busy_during_flush_ratio, busy_between_ratio) {
                write!(f, " (busy up to {} during the flush, {} between)", pct(*d), pct(*b))?;
            }
            f.write_str(".")
        }
        SinkFact::FlushBySize { vertex } => write!(
            f,
            "Make {vertex} flush by size and time between checkpoints instead of holding everything until snapshotState (buffer-flush max rows / interval: HBase sink.buffer-flush.max-rows and sink.buffer-flush.interval, JDBC sink.buffer-flush.*, Elasticsearch bulk-flush), so each checkpoint has little left to write."
        ),
        SinkFact::DestinationThroughput => f.write_str(
            "Look at the destination's write throughput during the flush (write throttling, flush or compaction queues of the database or region servers): the flush takes as long as it accepts the buffered rows.",
        ),
        SinkFact::NotUnalignedCheckpoints => f.write_str(
            "Unaligned checkpoints: they let barriers overtake buffered data, but here the task thread itself is blocked in the snapshot.",
        ),
        SinkFact::NotCheckpoints => f.write_str(
            "Checkpoints as the finding: they are slow because the sink flushes in them, not because barriers wait behind data.",
        ),
        SinkFact::FlushSummary { vertex, period_s } => write!(
            f,
            "{vertex} (sink) is the culprit: it stalls the job during every checkpoint (every ~{period_s} s), flushing what it buffered."
        ),
    }
}

/// `the system it writes to accepts only about 600 records/s in total`.
fn accepts(records_per_s: Option<f64>, f: &mut Formatter<'_>) -> fmt::Result {
    write!(
        f,
        "the system it writes to accepts only about {} records/s in total",
        records_per_s.map(num).unwrap_or_else(|| "unknown".into())
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::facts::Fact;

    fn words(f: SinkFact) -> String {
        Fact::from(f).to_string()
    }

    #[test]
    fn a_uniformly_slow_sink_reads_as_before() {
        let uniform = SinkFact::UniformlySlow {
            with_data: 2,
            subtasks: 2,
            busy_range: Box::new(Fact::from("85%–95%")),
            accepts_records_per_s: Some(600.0),
            per_record_ms: Some(3.0),
        };
        assert_eq!(
            words(uniform),
            "Both subtasks of the sink are busy (85%–95%): the system it writes to accepts only about 600 records/s in total (3.00 ms per record per writer)."
        );
        // Who is busy, by how many report busy time of how many run.
        for ((with, all), lead) in [
            ((1, 3), "The one subtask with data of"),
            ((2, 3), "The 2 subtasks with data of"),
            ((1, 1), "The one subtask of"),
            ((4, 4), "All 4 subtasks of"),
        ] {
            let f = SinkFact::UniformlySlow {
                with_data: with,
                subtasks: all,
                busy_range: Box::new(Fact::from("1%–2%")),
                accepts_records_per_s: None,
                per_record_ms: None,
            };
            let text = words(f);
            assert!(text.starts_with(lead), "{text}");
            assert!(text.ends_with("accepts only about unknown records/s in total."), "{text}");
        }
        assert_eq!(
            words(SinkFact::BusyUnknown { accepts_records_per_s: Some(600.0) }),
            "The sink holds the job back and the system it writes to accepts only about 600 records/s in total (its busy time is unknown)."
        );
        assert!(
            words(SinkFact::FixTheSystem { vertex: "s".into(), per_record_ms: None })
                .contains("it takes too long per record")
        );
    }

    #[test]
    fn a_hot_sink_writer_reads_as_before() {
        let slow = SinkFact::SlowWriter {
            subtask_name: "s[1]".into(),
            hot_busy_ratio: Some(0.98),
            others_median_busy_ratio: Some(0.2),
            share_ratio: Some(0.25),
        };
        assert_eq!(
            words(slow),
            "One sink writer is slow: s[1] is busy 98% while the others are about 20% busy, although records are spread evenly (share 0.25): that writer's connection or the destination node it talks to is slow or stuck."
        );
    }

    #[test]
    fn a_sink_flushing_in_checkpoints_reads_as_before() {
        let flush = SinkFact::FlushesOnCheckpoints {
            vertex: "s".into(),
            period_s: 60,
            last_checkpoint_ms: Some(45_000.0),
            busy_during_flush_ratio: Some(1.0),
            busy_between_ratio: Some(0.1),
        };
        let text = words(flush);
        assert!(text.starts_with("s stalls the job in phase with the checkpoints (every ~60 s), and the last checkpoint took 45 s: a sink"), "{text}");
        assert!(
            text.ends_with("between checkpoints it keeps up (busy up to 100% during the flush, 10% between)."),
            "{text}"
        );
    }
}
