//! Words of [`SourcesFact`].

use std::fmt::{self, Formatter};

use super::numbers::{human_secs, limited_list, num, pct};
use crate::model::facts::sources::{AlignmentFix, NoSplitSign, SkewFix, SourcesFact};

/// `subtask 3`, `subtasks 3, 4`.
fn subtasks(list: &[u32]) -> String {
    let all: Vec<String> = list.iter().map(u32::to_string).collect();
    format!("{} {}", if list.len() == 1 { "subtask" } else { "subtasks" }, limited_list(&all, 8))
}

fn splits_held(splits: Option<u32>) -> String {
    match splits {
        Some(n) => format!("the source holds {n} split{} (partitions)", if n == 1 { "" } else { "s" }),
        None => "the split (partition) count is not reported".to_string(),
    }
}

pub(super) fn word(fact: &SourcesFact, f: &mut Formatter<'_>) -> fmt::Result {
    match fact {
        SourcesFact::NoGraph => f.write_str("Without the job graph the sources feeding the culprit are unknown."),
        SourcesFact::NotReported { sources, metrics } => write!(
            f,
            "{} report none of the source reader metrics ({}); splits, skew and alignment are not judged.",
            limited_list(sources, 4),
            limited_list(metrics, 8)
        ),
        SourcesFact::OneSample => f.write_str("The window holds one sample: the source readers are not judged on it."),
        SourcesFact::ReadersEven { sources, readers, without_split, max_over_median_ratio, factor } => {
            match without_split {
                0 => write!(f, "The {readers} readers of {} read evenly", limited_list(sources, 4))?,
                n => write!(
                    f,
                    "The {} readers of {} holding a split read evenly",
                    readers.saturating_sub(*n),
                    limited_list(sources, 4)
                )?,
            }
            if let Some(r) = max_over_median_ratio {
                write!(f, " (the busiest {}× the median, skew from {}×)", num(*r), num(*factor))?;
            }
            f.write_str("; none is held back by watermark alignment.")
        }
        SourcesFact::ReadersWithoutSplits { source, subtasks: list, readers, splits, sign } => {
            without_splits(source, list, *readers, *splits, *sign, f)
        }
        SourcesFact::WatermarkHeldBySplits { .. } | SourcesFact::WatermarkHeldSummary { .. } => held(fact, f),
        SourcesFact::WastedSlots { source, without, splits } => write!(
            f,
            "{without} reader(s) of {source} hold no split and hold no watermark back (it advances or none is used): they only take slots; {} — set the source's parallelism to at most its splits.",
            splits_held(*splits)
        ),
        SourcesFact::ParallelismToSplits { source, splits, readers } => {
            match splits {
                Some(n) => write!(f, "Give {source} at most {n} subtasks (it runs {readers} for {n} splits)")?,
                None => write!(f, "Give {source} at most as many subtasks as its splits (it runs {readers})")?,
            }
            f.write_str(", or let its idle readers stop holding the watermark: `WatermarkStrategy.withIdleness(…)` (SQL: `table.exec.source.idle-timeout`).")
        }
        SourcesFact::Skewed { source, subtask, reader_records_per_s, median_records_per_s, ratio, factor } => write!(
            f,
            "Reader {subtask} of {source} reads {} records/s, {}× the median reader's {} records/s (skew from {}×).",
            num(*reader_records_per_s),
            num(*ratio),
            num(*median_records_per_s),
            num(*factor)
        ),
        SourcesFact::SkewFeedsTheCulprit { source, subtask, culprit_subtask_name, hot_busy_ratio } => write!(
            f,
            "Partition skew in the source: reader {subtask} of {source} feeds {culprit_subtask_name} (busy {}) over a forward chain, so that subtask gets the records of the source's heaviest partitions and no keyBy spreads them.",
            pct(*hot_busy_ratio)
        ),
        SourcesFact::Skew { fix, source, culprit } => skew_fix(*fix, source, culprit, f),
        SourcesFact::NotMoreParallelism { vertex } => {
            write!(f, "More parallelism for {vertex}: the heavy reader still feeds one of its subtasks over the chain.")
        }
        SourcesFact::SkewSummary { culprit, source, subtask } => write!(
            f,
            "{culprit} is the culprit: reader {subtask} of {source} reads far more than the others and feeds one of its subtasks over a forward chain (partition skew)."
        ),
        SourcesFact::SkewNotTheCulprit { source, subtask, ratio, culprit } => write!(
            f,
            "Reader {subtask} of {source} reads {}× the median reader (partition skew), but it does not explain {culprit}: no forward chain carries it to a hot subtask.",
            num(*ratio)
        ),
        SourcesFact::AlignmentPaused { source, paused, drift_ms, max_drift_ms } => write!(
            f,
            "{} of {source} drift {} ahead of their watermark alignment group (allowed {}) and emit nothing: alignment pauses them.",
            subtasks(paused),
            human_secs(drift_ms / 1000.0),
            human_secs(max_drift_ms / 1000.0)
        ),
        SourcesFact::AlignmentHoldsBack { source, paused, lag_growth_records_per_s } => {
            write!(
                f,
                "Watermark alignment holds {paused} reader(s) of {source} back until the slowest reader of the group catches up"
            )?;
            match lag_growth_records_per_s {
                Some(g) => write!(f, "; their lag grows by {} records/s.", num(*g)),
                None => f.write_str("; their lag (`pendingRecords`) is not reported."),
            }
        }
        SourcesFact::Alignment { fix, source } => alignment_fix(*fix, source, f),
        SourcesFact::AlignmentSummary { source, paused } => {
            write!(
                f,
                "Watermark alignment pauses {paused} reader(s) of {source}: the lag grows behind the slowest reader of the group."
            )
        }
        SourcesFact::IdleUnderBackpressure { source, subtasks: list, idle_s } => write!(
            f,
            "{} of {source} emitted nothing for {} although the source is backpressured: a backpressured reader is not idle, so no data reaches these (empty partitions).",
            subtasks(list),
            human_secs(*idle_s)
        ),
        SourcesFact::LagBeforeFlink { source, fetch_lag_ms, in_reader_ms } => write!(
            f,
            "Records of {source} are already {} old when fetched and spend {} in the reader: the lag is before Flink (the producer, the broker, the topic's backlog), not in the job.",
            human_secs(fetch_lag_ms / 1000.0),
            human_secs(in_reader_ms / 1000.0)
        ),
        SourcesFact::LagInsideTheReader { source, fetch_lag_ms, in_reader_ms } => write!(
            f,
            "Records of {source} wait {} inside the reader after a fetch {} behind: the reader's hand-over or the chain after it is slow, not the broker.",
            human_secs(in_reader_ms / 1000.0),
            human_secs(fetch_lag_ms / 1000.0)
        ),
    }
}

/// The watermark that readers without a split hold back, when nothing is backpressured.
fn held(fact: &SourcesFact, f: &mut Formatter<'_>) -> fmt::Result {
    match fact {
        SourcesFact::WatermarkHeldBySplits { vertices, source } => {
            let (first, rest) = vertices.split_first().map_or(("", 0), |(f, r)| (f.as_str(), r.len()));
            write!(f, "Nothing is backpressured, but the input watermark of {first}")?;
            if rest > 0 {
                write!(f, " (and of the {rest} vertices after it)")?;
            }
            write!(
                f,
                " never arrived, so event-time windows and timers there never fire: readers of {source} that hold no split emit no watermark, and a watermark is the minimum over all readers."
            )
        }
        SourcesFact::WatermarkHeldSummary { vertex, source, without, readers } => write!(
            f,
            "But {vertex}'s input watermark never arrived: {without} of the {readers} readers of {source} {} no split.",
            if *without == 1 { "holds" } else { "hold" }
        ),
        _ => Ok(()),
    }
}

fn skew_fix(fix: SkewFix, source: &str, culprit: &str, f: &mut Formatter<'_>) -> fmt::Result {
    match fix {
        SkewFix::RebalanceTheKeys => write!(
            f,
            "Spread the keys of the topic {source} reads over its partitions (the producer's partitioner or key): one partition carries far more than the others."
        ),
        SkewFix::MorePartitions => {
            write!(f, "Give the topic {source} reads more partitions, so its heavy keys spread over more readers.")
        }
        SkewFix::RebalanceAfterTheSource => write!(
            f,
            "Add `rebalance()` (or `rescale()`) after {source}, so the heavy reader's records reach every subtask of {culprit} instead of one over the chain."
        ),
    }
}

fn alignment_fix(fix: AlignmentFix, source: &str, f: &mut Formatter<'_>) -> fmt::Result {
    match fix {
            AlignmentFix::SpeedUpTheLaggard => write!(
                f,
                "Speed up the reader that holds the alignment group of {source} back (the one furthest behind: its partition's backlog, its TaskManager)."
            ),
            AlignmentFix::LargerDrift => f.write_str(
                "Or allow a larger drift: `WatermarkStrategy.withWatermarkAlignment(group, maxAllowedWatermarkDrift, updateInterval)`.",
            ),
            AlignmentFix::UnalignedSplits => f.write_str(
                "For readers holding several splits, `pipeline.watermark-alignment.allow-unaligned-source-splits` decides whether splits are aligned one by one (FLIP-217).",
            ),
        }
}

fn without_splits(
    source: &str,
    list: &[u32],
    readers: usize,
    splits: Option<u32>,
    sign: NoSplitSign,
    f: &mut Formatter<'_>,
) -> fmt::Result {
    write!(f, "{} of the {readers} readers of {source} ({}) ", list.len(), subtasks(list))?;
    let one = list.len() == 1;
    match (sign, one) {
        (NoSplitSign::NoPartition, true) => f.write_str("holds no split (no partition assigned)")?,
        (NoSplitSign::NoPartition, false) => f.write_str("hold no split (no partition assigned)")?,
        (NoSplitSign::ReadsNothing, true) => f.write_str("reads no records while the others do: it holds no split")?,
        (NoSplitSign::ReadsNothing, false) => f.write_str("read no records while the others do: they hold no split")?,
    }
    write!(f, "; {}.", splits_held(splits))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::facts::Fact;

    #[test]
    fn readers_without_splits_are_counted_and_named_with_the_splits() {
        let f = Fact::from(SourcesFact::ReadersWithoutSplits {
            source: "Source: impressions".into(),
            subtasks: vec![3],
            readers: 4,
            splits: Some(3),
            sign: NoSplitSign::NoPartition,
        });
        assert_eq!(
            f.to_string(),
            "1 of the 4 readers of Source: impressions (subtask 3) holds no split (no partition assigned); the source holds 3 splits (partitions)."
        );
    }

    #[test]
    fn the_parallelism_fix_names_the_split_count_and_idleness() {
        let f = Fact::from(SourcesFact::ParallelismToSplits { source: "S".into(), splits: Some(3), readers: 4 });
        let s = f.to_string();
        assert!(s.starts_with("Give S at most 3 subtasks (it runs 4 for 3 splits)"), "{s}");
        assert!(s.contains("withIdleness") && s.contains("table.exec.source.idle-timeout"), "{s}");
    }

    #[test]
    fn fetch_lag_before_flink_says_it_is_not_the_job() {
        let f = Fact::from(SourcesFact::LagBeforeFlink {
            source: "S".into(),
            fetch_lag_ms: 120_000.0,
            in_reader_ms: 200.0,
        });
        assert!(f.to_string().contains("not in the job"), "{f}");
    }
}
