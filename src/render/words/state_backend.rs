//! Words of [`StateBackendFact`].

use std::fmt::{self, Formatter};

use super::numbers::{human_bytes, human_secs, pct};
use crate::model::facts::state_backend::{StallSign, StateBackendFact, StateBackendFix};

pub(super) fn word(fact: &StateBackendFact, f: &mut Formatter<'_>) -> fmt::Result {
    match fact {
        StateBackendFact::Stateless { vertex } => write!(
            f,
            "{vertex} is stateless as far as the metrics and the graph tell (no keyed input, no RocksDB metrics)."
        ),
        StateBackendFact::NotRocksDb { vertex, backend } => {
            write!(f, "{vertex} keeps its state in {backend}, not RocksDB.")
        }
        StateBackendFact::NoNativeMetrics { vertex, options } => write!(
            f,
            "{vertex} is stateful, but there are no RocksDB native metrics for it (off by default, or a heap state backend). To see write stalls, set: {}: true.",
            options.join(": true, ")
        ),
        StateBackendFact::NoStall {
            vertex,
            write_stopped,
            delayed_write_bytes_per_s,
            stall_micros_per_s,
            compaction_pending_ratio,
            pending_compaction_bytes,
        } => write!(
            f,
            "RocksDB of {vertex} does not stall: is_write_stopped {}, actual_delayed_write_rate {}, stall_micros {}, compaction_pending {}, pending compaction bytes {}.",
            write_stopped.map(|v| format!("{v:.0}")).unwrap_or_else(|| "unknown".into()),
            delayed_write_bytes_per_s.map(|v| format!("{}/s", human_bytes(v))).unwrap_or_else(|| "unknown".into()),
            stall_micros_per_s.map(|v| format!("{:.0} ms/s", v / 1000.0)).unwrap_or_else(|| "unknown".into()),
            compaction_pending_ratio.map(pct).unwrap_or_else(|| "unknown".into()),
            pending_compaction_bytes.map(human_bytes).unwrap_or_else(|| "unknown".into())
        ),
        StateBackendFact::Stalls { vertex, signs } => {
            write!(f, "RocksDB of {vertex} stalls writes: ")?;
            word_signs(signs, f)?;
            f.write_str(".")
        }
        StateBackendFact::StallCause { vertex, signs } => {
            write!(f, "{vertex} is stateful and its RocksDB cannot keep up with the writes: ")?;
            word_signs(signs, f)?;
            f.write_str(". Write stalls block the task thread, which shows upstream as backpressure.")
        }
        StateBackendFact::Fix(fix) => f.write_str(match fix {
            StateBackendFix::MoreThreads => {
                "More background threads for flushes and compaction: state.backend.rocksdb.thread.num: 4 (or the number of cores the TaskManager can spare)."
            }
            StateBackendFix::MoreWriteBuffers => {
                "More memory for write buffers, so flushes keep pace: raise taskmanager.memory.managed.fraction (default 0.4) and state.backend.rocksdb.memory.write-buffer-ratio (default 0.5); with unmanaged memory, state.backend.rocksdb.writebuffer.size and state.backend.rocksdb.writebuffer.count."
            }
            StateBackendFix::FasterDisk => {
                "A faster local disk for RocksDB: point state.backend.rocksdb.localdir at local SSD/NVMe, not network storage or the container's overlay filesystem."
            }
            StateBackendFix::LessState => {
                "Less state to write: a state TTL (StateTtlConfig, or table.exec.state.ttl in SQL) and incremental checkpoints (execution.checkpointing.incremental: true)."
            }
        }),
        StateBackendFact::StallSummary { vertex } => {
            write!(f, "{vertex} is the culprit: its RocksDB state backend stalls writes.")
        }
        StateBackendFact::WatermarkStuck { vertex, flat_s } => write!(
            f,
            "The input watermark of {vertex} has not advanced for {} while records flow: its state and timers grow; the state backend is not the cause.",
            human_secs(*flat_s)
        ),
        StateBackendFact::WatermarkBehind { vertex, behind_s, flat_s } => write!(
            f,
            "{vertex}'s input watermark is stuck (event time {} behind wall time, flat for {}), so windows and timers never fire and state only grows — often one idle input or source partition holds back the minimum.",
            human_secs(*behind_s),
            human_secs(*flat_s)
        ),
        StateBackendFact::MarkIdleInputs => f.write_str(
            "Mark idle inputs idle: WatermarkStrategy.withIdleness(Duration.ofMinutes(1)) on the sources (SQL: table.exec.source.idle-timeout: 1 min), or fix the input that stopped (an empty partition, a stalled upstream).",
        ),
        StateBackendFact::NotTheStateBackend => {
            f.write_str("Tuning the state backend: the state grows because event time stands still.")
        }
        StateBackendFact::WatermarkSummary { vertex } => {
            write!(f, "{vertex} is the culprit: its watermark is stuck, so its state and timers pile up.")
        }
        StateBackendFact::NoWatermark { vertex, for_s } => write!(
            f,
            "No watermark has reached {vertex} for {} while records flow: its input watermark reads Long.MIN_VALUE, what Flink's web UI shows as \"No Watermark\". Its event-time windows and timers never fire and its state only grows; the state backend is not the cause.",
            human_secs(*for_s)
        ),
        StateBackendFact::NoWatermarkCause { vertex, sources } => {
            write!(
                f,
                "The watermark never arrived: {vertex}'s input watermark is the minimum over its inputs, and at least one input has never sent a watermark. Most often that is a source subtask without a partition or split to read (source parallelism above the partition count) and no idleness configured, so it never emits a watermark and never declares itself idle"
            )?;
            match sources.as_slice() {
                [] => f.write_str("."),
                [one] => write!(f, "; the source feeding {vertex} is {one}."),
                many => write!(f, "; the sources feeding {vertex} are {}.", many.join(", ")),
            }
        }
        StateBackendFact::SourceSubtasksToPartitions { sources } => {
            let which = if sources.is_empty() { "the sources".to_string() } else { sources.join(", ") };
            write!(
                f,
                "Or give {which} at most as many subtasks as the topic has partitions (splits), so that every source subtask reads and emits watermarks."
            )
        }
        StateBackendFact::StallsAreASymptom { vertex, signs } => {
            write!(f, "Tuning RocksDB of {vertex} (threads, write buffers, disk): its stalls (")?;
            word_signs(signs, f)?;
            f.write_str(") are a symptom of the window state that piles up while no watermark fires the windows.")
        }
        StateBackendFact::NoWatermarkSummary { vertex } => write!(
            f,
            "{vertex} is the culprit: no watermark ever reached it, so its windows never fire and its state piles up."
        ),
    }
}

/// The signs, joined by `, `.
fn word_signs(signs: &[StallSign], f: &mut Formatter<'_>) -> fmt::Result {
    for (i, sign) in signs.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        match sign {
            StallSign::WriteStopped => f.write_str("is_write_stopped reached 1")?,
            StallSign::DelayedWrites { bytes_per_s } => {
                write!(f, "actual_delayed_write_rate up to {}/s", human_bytes(*bytes_per_s))?
            }
            StallSign::Stalled { stall_micros_per_s } => {
                write!(f, "writes stalled {:.0} ms of every second (stall_micros)", stall_micros_per_s / 1000.0)?
            }
            StallSign::CompactionPending { samples_ratio } => {
                write!(f, "compaction_pending set in {} of samples", pct(*samples_ratio))?
            }
            StallSign::FlushPending { samples_ratio } => {
                write!(f, "mem_table_flush_pending set in {} of samples", pct(*samples_ratio))?
            }
            StallSign::PendingCompaction { bytes, growth_bytes_per_s, soft_limit_bytes } => write!(
                f,
                "pending compaction bytes at {} growing {}/s toward the {} soft limit",
                human_bytes(*bytes),
                human_bytes(*growth_bytes_per_s),
                human_bytes(*soft_limit_bytes)
            )?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::facts::Fact;

    fn words(f: StateBackendFact) -> String {
        Fact::from(f).to_string()
    }

    #[test]
    fn write_stalls_read_as_before() {
        let signs = vec![
            StallSign::WriteStopped,
            StallSign::DelayedWrites { bytes_per_s: 2_500_000.0 },
            StallSign::Stalled { stall_micros_per_s: 300_000.0 },
            StallSign::CompactionPending { samples_ratio: 0.8 },
            StallSign::FlushPending { samples_ratio: 1.0 },
            StallSign::PendingCompaction { bytes: 60e9, growth_bytes_per_s: 10e6, soft_limit_bytes: 64e9 },
        ];
        assert_eq!(
            words(StateBackendFact::Stalls { vertex: "agg".into(), signs: signs.clone() }),
            "RocksDB of agg stalls writes: is_write_stopped reached 1, actual_delayed_write_rate up to 2.5 MB/s, writes stalled 300 ms of every second (stall_micros), compaction_pending set in 80% of samples, mem_table_flush_pending set in 100% of samples, pending compaction bytes at 60.0 GB growing 10.0 MB/s toward the 64.0 GB soft limit."
        );
        assert!(
            words(StateBackendFact::StallCause { vertex: "agg".into(), signs: vec![StallSign::WriteStopped] }).starts_with(
                "agg is stateful and its RocksDB cannot keep up with the writes: is_write_stopped reached 1. Write stalls"
            )
        );
    }

    #[test]
    fn readings_without_a_stall_read_as_before() {
        let clear = StateBackendFact::NoStall {
            vertex: "agg".into(),
            write_stopped: Some(0.0),
            delayed_write_bytes_per_s: None,
            stall_micros_per_s: Some(2000.0),
            compaction_pending_ratio: Some(0.1),
            pending_compaction_bytes: Some(1e6),
        };
        assert_eq!(
            words(clear),
            "RocksDB of agg does not stall: is_write_stopped 0, actual_delayed_write_rate unknown, stall_micros 2 ms/s, compaction_pending 10%, pending compaction bytes 1.0 MB."
        );
    }

    #[test]
    fn a_watermark_that_never_arrived_reads_as_no_watermark_with_its_origin_and_fixes() {
        let detail = words(StateBackendFact::NoWatermark { vertex: "w".into(), for_s: 300.0 });
        assert!(detail.starts_with("No watermark has reached w for 5 min while records flow"), "{detail}");
        assert!(detail.contains("\"No Watermark\""), "{detail}");
        let cause = words(StateBackendFact::NoWatermarkCause { vertex: "w".into(), sources: vec!["Source: a".into()] });
        assert!(cause.ends_with("the source feeding w is Source: a."), "{cause}");
        let fix = words(StateBackendFact::SourceSubtasksToPartitions { sources: vec![] });
        assert!(fix.starts_with("Or give the sources at most as many subtasks"), "{fix}");
        let not = words(StateBackendFact::StallsAreASymptom {
            vertex: "w".into(),
            signs: vec![StallSign::CompactionPending { samples_ratio: 1.0 }],
        });
        assert_eq!(
            not,
            "Tuning RocksDB of w (threads, write buffers, disk): its stalls (compaction_pending set in 100% of samples) are a symptom of the window state that piles up while no watermark fires the windows."
        );
    }

    #[test]
    fn a_stuck_watermark_reads_as_before() {
        assert_eq!(
            words(StateBackendFact::WatermarkStuck { vertex: "w".into(), flat_s: 600.0 }),
            "The input watermark of w has not advanced for 10 min while records flow: its state and timers grow; the state backend is not the cause."
        );
    }
}
