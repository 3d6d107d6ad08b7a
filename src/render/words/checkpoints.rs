//! Words of [`CheckpointFact`].

use std::fmt::{self, Formatter};

use super::numbers::human_secs;
use crate::model::facts::checkpoints::{BarrierWait, CheckpointFact, Reason};

/// A duration, readable: `500 ms` under a second, else `14 s`, `10 min`.
fn ms(v: f64) -> String {
    if v < 1000.0 { format!("{v:.0} ms") } else { human_secs(v / 1000.0) }
}

fn estimated(yes: bool) -> &'static str {
    if yes { "estimated " } else { "" }
}

fn reason(r: &Reason, f: &mut Formatter<'_>) -> fmt::Result {
    match *r {
        Reason::Failed { count } => write!(f, "{count:.0} checkpoint(s) failed or expired in the window"),
        Reason::NoCompletion { age_ms, interval_ms, estimated: e } => write!(
            f,
            "no checkpoint has completed for {} = {:.0}× the {}interval of {}",
            ms(age_ms),
            age_ms / interval_ms as f64,
            estimated(e),
            ms(interval_ms as f64)
        ),
        Reason::NearTimeout { duration_ms, timeout_ms } => write!(
            f,
            "the last checkpoint took {}, {:.0}% of the {} timeout",
            ms(duration_ms),
            duration_ms / timeout_ms as f64 * 100.0,
            ms(timeout_ms as f64)
        ),
    }
}

/// The reasons joined with `; `.
fn reasons(rs: &[Reason], f: &mut Formatter<'_>) -> fmt::Result {
    for (i, r) in rs.iter().enumerate() {
        if i > 0 {
            f.write_str("; ")?;
        }
        reason(r, f)?;
    }
    Ok(())
}

fn unaligned(already_on: bool, f: &mut Formatter<'_>) -> fmt::Result {
    f.write_str(if already_on {
        "Unaligned checkpoints are already on: they cannot help when the task thread itself is blocked (timer or window-firing storms, a sink stuck in its snapshot); look at what the culprit does while it snapshots."
    } else {
        "Unaligned checkpoints, so barriers overtake the backlog: execution.checkpointing.unaligned.enabled: true, optionally execution.checkpointing.aligned-checkpoint-timeout: 30 s (start aligned, switch when alignment takes longer), and buffer debloating (taskmanager.network.memory.buffer-debloat.enabled: true); the cost is in-flight data written into each checkpoint."
    })
}

pub(super) fn word(fact: &CheckpointFact, f: &mut Formatter<'_>) -> fmt::Result {
    match fact {
        CheckpointFact::NoMetrics => f.write_str(
            "No checkpoint metrics for this job (checkpointing off, or the JobManager is not scraped).",
        ),
        CheckpointFact::StallsInPhase { vertex, period_s } => {
            write!(f, "{vertex} stalls the job every ~{period_s} s, in phase with the checkpoints.")
        }
        CheckpointFact::StallsCause { vertex, period_s } => write!(
            f,
            "{vertex} holds the job back only while checkpoints run (every ~{period_s} s): its synchronous checkpoint phase blocks the task thread — a large synchronous snapshot, or a flush or commit in snapshotState — and everything before it is backpressured until it ends."
        ),
        CheckpointFact::StallsFix { vertex } => write!(
            f,
            "In the Flink UI (Checkpoints, History, the checkpoint, {vertex}) compare the sync and async durations per subtask; move work out of snapshotState (flush by size and time between checkpoints), and for RocksDB state use incremental checkpoints (execution.checkpointing.incremental: true) so the synchronous part stays small."
        ),
        CheckpointFact::StallsSummary { vertex, period_s } => {
            write!(f, "{vertex} is the culprit: it stalls the job during every checkpoint (every ~{period_s} s).")
        }
        CheckpointFact::UnalignedCannotHelpBlocked => {
            f.write_str("Unaligned checkpoints: they cannot help while the task thread itself is blocked in the snapshot.")
        }
        CheckpointFact::InTrouble { reasons: rs } => {
            f.write_str("The recovery point is in trouble: ")?;
            reasons(rs, f)?;
            f.write_str(".")
        }
        CheckpointFact::NotHeldUpByData { reasons: rs } => {
            f.write_str("No vertex is backpressured, so barriers are not held up by data: ")?;
            reasons(rs, f)?;
            f.write_str(". The time goes into the checkpoint itself: the synchronous snapshot, uploading state to checkpoint storage, or a sink's pre-commit (two-phase commit, e.g. Kafka transactions).")
        }
        CheckpointFact::SlowSnapshotFix { timeout_ms } => write!(
            f,
            "In the Flink UI (Checkpoints → History → per subtask) find the subtasks whose sync or async duration dominates, then: incremental RocksDB checkpoints (execution.checkpointing.incremental: true) for large state; execution.checkpointing.timeout (now {}) above the longest healthy duration; execution.checkpointing.min-pause so checkpoints do not run back to back; and the checkpoint storage's throughput (S3/HDFS throttling).",
            ms(*timeout_ms as f64)
        ),
        CheckpointFact::NothingToOvertake => f.write_str(
            "Unaligned checkpoints: they let barriers overtake buffered data, and there is no backpressure here to overtake.",
        ),
        CheckpointFact::SlowSnapshotSummary { reason: r } => {
            f.write_str("Checkpoints are in trouble: ")?;
            reason(r, f)?;
            f.write_str(".")
        }
        CheckpointFact::HeldUpByData { reasons: rs, barrier_wait } => {
            f.write_str(
                "Aligned checkpoint barriers travel at the speed of the data, so the backpressure slows checkpoints: ",
            )?;
            reasons(rs, f)?;
            f.write_str(".")?;
            match barrier_wait {
                Some(BarrierWait { vertex, delay_ms }) => {
                    write!(f, " Barriers wait behind data: checkpointStartDelay on {vertex} is {}.", ms(*delay_ms))
                }
                None => Ok(()),
            }
        }
        CheckpointFact::Unaligned { already_on } => unaligned(*already_on, f),
        CheckpointFact::RelieveBackpressure { vertex } => {
            write!(f, "Relieve the backpressure at {vertex}: the checkpoints slow because the data waits for it.")
        }
        CheckpointFact::HeldUpSummary { culprit, reason: r } => {
            if let Some(c) = culprit {
                write!(f, "{c} is the culprit and ")?;
            }
            f.write_str("checkpoints are in trouble: ")?;
            reason(r, f)?;
            f.write_str(".")
        }
        CheckpointFact::NoneCompletedYet => f.write_str(
            "No checkpoint has completed yet (lastCheckpointDuration reads -1, Flink's value before the first completed checkpoint): periodic checkpointing is off, or the first checkpoint has not finished; nothing says it is stuck.",
        ),
        CheckpointFact::Complete {
            last_duration_ms,
            slower_than_before_ms,
            longer_than_interval_ms,
            barrier_wait,
            timeout_ms,
            interval_estimated,
        } => {
            f.write_str("Checkpoints complete")?;
            if let Some(d) = last_duration_ms {
                write!(f, " (last took {})", ms(*d))?;
                if let Some(b) = slower_than_before_ms {
                    write!(f, ", slower than before the backpressure ({} then, {} now)", ms(*b), ms(*d))?;
                }
            }
            if let Some(iv) = longer_than_interval_ms {
                write!(f, ", longer than their {}interval of {}", estimated(*interval_estimated), ms(*iv as f64))?;
            }
            if let Some(BarrierWait { vertex, delay_ms }) = barrier_wait {
                write!(f, ", barriers wait {} behind data on {vertex}", ms(*delay_ms))?;
            }
            write!(
                f,
                "; no failures after start-up, the recovery point advances and no checkpoint nears the {} timeout.",
                ms(*timeout_ms as f64)
            )?;
            if *interval_estimated {
                f.write_str(" The interval is estimated from completed checkpoints (no Flink REST checkpoint config).")?;
            }
            Ok(())
        }
        CheckpointFact::SlowedWithBacklog { unaligned_on } => {
            f.write_str("Checkpoints have slowed with the backlog. ")?;
            unaligned(*unaligned_on, f)
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::model::facts::Fact;
    use crate::model::facts::checkpoints::{BarrierWait, CheckpointFact, Reason};

    fn words(f: CheckpointFact) -> String {
        Fact::from(f).to_string()
    }

    #[test]
    fn the_reasons_read_with_their_numbers_joined_by_semicolons() {
        // 60 s / 10 s = 6×; 300 s / 600 s = 50%.
        let reasons = vec![
            Reason::Failed { count: 2.0 },
            Reason::NoCompletion { age_ms: 60_000.0, interval_ms: 10_000, estimated: true },
            Reason::NearTimeout { duration_ms: 300_000.0, timeout_ms: 600_000 },
        ];
        assert_eq!(
            words(CheckpointFact::InTrouble { reasons }),
            "The recovery point is in trouble: 2 checkpoint(s) failed or expired in the window; no checkpoint has completed for 60 s = 6× the estimated interval of 10 s; the last checkpoint took 5 min, 50% of the 10 min timeout."
        );
        let reason = Reason::Failed { count: 1.0 };
        assert_eq!(
            words(CheckpointFact::HeldUpSummary { culprit: Some("score".into()), reason }),
            "score is the culprit and checkpoints are in trouble: 1 checkpoint(s) failed or expired in the window."
        );
        assert_eq!(
            words(CheckpointFact::HeldUpSummary { culprit: None, reason }),
            "checkpoints are in trouble: 1 checkpoint(s) failed or expired in the window."
        );
    }

    #[test]
    fn no_checkpoint_completed_yet_reads_as_such_never_as_a_duration() {
        let w = words(CheckpointFact::NoneCompletedYet);
        assert!(w.starts_with("No checkpoint has completed yet (lastCheckpointDuration reads -1"), "{w}");
    }

    #[test]
    fn checkpoints_that_complete_read_each_slowdown_the_barrier_wait_and_the_estimated_interval() {
        assert_eq!(
            words(CheckpointFact::Complete {
                last_duration_ms: Some(14_000.0),
                slower_than_before_ms: Some(20.0),
                longer_than_interval_ms: Some(10_000),
                barrier_wait: Some(BarrierWait { vertex: "Source: txn".into(), delay_ms: 400.0 }),
                timeout_ms: 600_000,
                interval_estimated: true,
            }),
            "Checkpoints complete (last took 14 s), slower than before the backpressure (20 ms then, 14 s now), longer than their estimated interval of 10 s, barriers wait 400 ms behind data on Source: txn; no failures after start-up, the recovery point advances and no checkpoint nears the 10 min timeout. The interval is estimated from completed checkpoints (no Flink REST checkpoint config)."
        );
        assert_eq!(
            words(CheckpointFact::Complete {
                last_duration_ms: None,
                slower_than_before_ms: None,
                longer_than_interval_ms: None,
                barrier_wait: None,
                timeout_ms: 600_000,
                interval_estimated: false,
            }),
            "Checkpoints complete; no failures after start-up, the recovery point advances and no checkpoint nears the 10 min timeout."
        );
    }
}
