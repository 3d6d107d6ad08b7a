//! Step `sources`: the source readers that feed the culprit (after `sink`, before `hot_key`:
//! a hot subtask fed by one heavy reader over a forward chain is partition skew, which
//! `hot_key` would call a hot key or a slow instance).
//!
//! Reads [`SourceReader`]s (FLIP-27 / FLIP-33 reader metrics, the Kafka source's
//! partitions) of the sources upstream of the culprit (or the culprit itself):
//! - **watermark alignment** (hit, `watermark_alignment`): readers whose
//!   `watermarkAlignmentDrift` reaches `watermark_alignment_max_drift` and that emit
//!   nothing (`sourceIdleTime` at least one scrape step) are paused by alignment;
//! - **partition skew** (hit, `source_skew`): one reader reads more than
//!   `source_skew_factor` × the median reader holding a split (AWS: max over 3 × median),
//!   and feeds the culprit's hot subtask (`skew::find`) over FORWARD edges only — else advice;
//! - **readers without splits**: `assigned-partitions` 0, no `currentOffset` while the
//!   source's other readers report theirs, or (no split count) no records while the others
//!   read and idle. Where the culprit's watermark never arrived, `state_backend`'s
//!   `watermark_stall` names them ([`without_splits_feeding`]); otherwise advice (slots);
//! - **idle under backpressure** and **fetch against emit lag**: advice.
//!
//! Nothing is judged on one sample; metrics not reported are `no_data`, never zero.

use crate::diagnose::signals::VertexSignals;
use crate::diagnose::signals::median;
use crate::diagnose::steps::skew;
use crate::diagnose::{Context, StepReport, slope_per_s};
use crate::model::facts::sources::{AlignmentFix, NoSplitSign, SkewFix, SourcesFact};
use crate::model::facts::{Fact, Facts};
use crate::model::snapshot::SourceReader;
use crate::model::verdict::Finding;

/// A reader reading at most this share of the median reader reads nothing.
const READS_NOTHING_SHARE: f64 = 0.01;
/// The reader metrics the step reads, as Flink names them.
const READER_METRICS: [&str; 5] = [
    "sourceIdleTime",
    "currentFetchEventTimeLag",
    "watermarkAlignmentDrift",
    "KafkaSourceReader.KafkaConsumer.assigned-partitions",
    "KafkaSourceReader.topic.<t>.partition.<p>.currentOffset",
];
/// Fetch and in-reader lag below this say nothing about where records wait, ms.
const MIN_LAG_MS: f64 = 1000.0;

pub fn run(ctx: &Context, culprit: &VertexSignals) -> StepReport {
    if ctx.signals.graph_free {
        return StepReport::no_data(SourcesFact::NoGraph, Vec::new());
    }
    let sources = feeding_sources(ctx, culprit);
    let names: Vec<String> = sources.iter().map(|s| s.name.clone()).collect();
    let readers: Vec<&SourceReader> = sources.iter().flat_map(|s| readers_of(ctx, &s.id)).collect();
    let reported = readers.iter().any(|r| {
        r.idle_time_ms.is_some() || r.fetch_lag_ms.is_some() || r.alignment_drift_ms.is_some() || r.splits.is_some()
    });
    if !reported && readers.iter().all(|r| r.records_per_s.is_none()) {
        // Stated in the step (no line in `missing`: most sources export some of these only).
        let metrics = READER_METRICS.iter().map(|m| m.to_string()).collect();
        return StepReport::no_data(SourcesFact::NotReported { sources: names, metrics }, Vec::new());
    }
    if ctx.snapshot.samples_in_window.is_some_and(|n| n < 2) {
        return StepReport::no_data(SourcesFact::OneSample, Vec::new());
    }
    let mut advice = Facts::new();
    let stalled = locate_no_watermark(ctx, culprit);
    let mut without_split = 0;
    for s in &sources {
        if let Some(without) = without_splits(ctx, s) {
            if let SourcesFact::ReadersWithoutSplits { subtasks, .. } = &without {
                without_split += subtasks.len();
            }
            if !stalled && let SourcesFact::ReadersWithoutSplits { subtasks, splits, .. } = &without {
                advice.push(SourcesFact::WastedSlots {
                    source: s.name.clone(),
                    without: subtasks.len(),
                    splits: *splits,
                });
            }
        }
        advice.extend(idle_under_backpressure(ctx, s));
        advice.extend(fetch_against_emit(ctx, s));
    }
    let mut r =
        alignment(ctx, &sources).or_else(|| skew_report(ctx, culprit, &sources, &mut advice)).unwrap_or_else(|| {
            StepReport::clear(SourcesFact::ReadersEven {
                sources: names,
                readers: readers.len(),
                without_split,
                max_over_median_ratio: sources.iter().filter_map(|s| heaviest(ctx, s).map(|h| h.2)).reduce(f64::max),
                factor: ctx.cfg.thresholds.source_skew_factor,
            })
        });
    r.advice.extend(advice.into_vec());
    r
}

/// The sources upstream of the culprit, or the culprit itself when it is a source.
fn feeding_sources<'a>(ctx: &Context<'a>, culprit: &'a VertexSignals) -> Vec<&'a VertexSignals> {
    if culprit.is_source {
        return vec![culprit];
    }
    ctx.signals.upstream_region(&culprit.id, |_| true).into_iter().filter(|v| v.is_source).collect()
}

fn readers_of<'a>(ctx: &Context<'a>, vertex_id: &str) -> Vec<&'a SourceReader> {
    ctx.snapshot.source_readers.iter().filter(|r| r.vertex_id == vertex_id).collect()
}

/// True when the culprit's input watermark reads "no watermark" at the window's end:
/// `state_backend`'s `watermark_stall` then names the readers without a split.
fn locate_no_watermark(ctx: &Context, culprit: &VertexSignals) -> bool {
    use crate::model::snapshot::Watermark;
    ctx.snapshot.watermarks.iter().filter(|w| w.vertex_id == culprit.id).any(|w| {
        w.input_watermark
            .iter()
            .rev()
            .find(|p| p.1 != Watermark::Unknown)
            .is_some_and(|p| p.1 == Watermark::NoWatermark)
    })
}

/// The readers of `source` that hold no split, with how that was seen; `None` when every
/// reader holds one or nothing tells.
pub fn without_splits(ctx: &Context, source: &VertexSignals) -> Option<SourcesFact> {
    let readers = readers_of(ctx, &source.id);
    let counted = readers.iter().any(|r| r.splits.is_some_and(|n| n > 0));
    let window_ms = ctx.snapshot.window.len_ms() as f64;
    let idle_share = ctx.cfg.thresholds.source_idle_share;
    let (subtasks, sign): (Vec<u32>, NoSplitSign) = if readers.iter().any(|r| r.splits.is_some()) {
        // Counted: 0 assigned, or no `currentOffset` while the others report theirs.
        let none = readers
            .iter()
            .filter(|r| r.splits == Some(0) || (r.splits.is_none() && counted && offsets_counted(&readers)))
            .map(|r| r.subtask)
            .collect();
        (none, NoSplitSign::NoPartition)
    } else {
        let median_rate = median(readers.iter().filter_map(|r| r.records_per_s).filter(|x| *x > 0.0).collect())?;
        let none = readers
            .iter()
            .filter(|r| r.records_per_s.is_some_and(|x| x <= READS_NOTHING_SHARE * median_rate))
            .filter(|r| r.idle_time_ms.is_none_or(|ms| ms >= idle_share * window_ms))
            .map(|r| r.subtask)
            .collect();
        (none, NoSplitSign::ReadsNothing)
    };
    if subtasks.is_empty() {
        return None;
    }
    let splits = (sign == NoSplitSign::NoPartition).then(|| readers.iter().filter_map(|r| r.splits).sum());
    Some(SourcesFact::ReadersWithoutSplits {
        source: source.name.clone(),
        subtasks,
        readers: (source.parallelism_now() as usize).max(readers.len()),
        splits,
        sign,
    })
}

fn offsets_counted(readers: &[&SourceReader]) -> bool {
    readers.iter().any(|r| r.splits_from_offsets)
}

/// When nothing is backpressured (no culprit to examine): every vertex whose input
/// watermark never arrived while readers of a source feeding it hold no split, as advice
/// (the readers, the stall, the fix). A job whose windows never fire is not slow; it is
/// still the first thing an engineer looking at it needs to know.
pub fn without_culprit(ctx: &Context) -> StepReport {
    let mut r = StepReport::clear(crate::model::facts::runbook::RunbookFact::NoCulpritToExamine { nothing_red: true });
    if ctx.signals.graph_free {
        return r;
    }
    let stalled: Vec<&VertexSignals> =
        ctx.signals.vertices.iter().filter(|v| !v.is_source && locate_no_watermark(ctx, v)).collect();
    for s in ctx.signals.vertices.iter().filter(|v| v.is_source) {
        // The stalled vertices this source feeds, in the graph's (topological) order.
        let fed: Vec<String> = stalled
            .iter()
            .filter(|v| feeding_sources(ctx, v).iter().any(|f| f.id == s.id))
            .map(|v| v.name.clone())
            .collect();
        let Some(first) = fed.first().cloned() else { continue };
        let Some(readers @ SourcesFact::ReadersWithoutSplits { splits, readers: n, .. }) = without_splits(ctx, s)
        else {
            continue;
        };
        if let SourcesFact::ReadersWithoutSplits { subtasks, .. } = &readers
            && r.summary.is_none()
        {
            r.summary = Some(
                SourcesFact::WatermarkHeldSummary {
                    vertex: first,
                    source: s.name.clone(),
                    without: subtasks.len(),
                    readers: n,
                }
                .into(),
            );
        }
        r.advice.push(SourcesFact::WatermarkHeldBySplits { vertices: fed, source: s.name.clone() });
        r.advice.push(readers);
        r.advice.push(SourcesFact::ParallelismToSplits { source: s.name.clone(), splits, readers: n });
    }
    r
}

/// For `state_backend`'s `watermark_stall`: the readers without a split of every source
/// feeding `culprit` (cause), and the fix that belongs to each.
pub fn without_splits_feeding(ctx: &Context, culprit: &VertexSignals) -> (Vec<Fact>, Vec<Fact>) {
    let mut cause = Vec::new();
    let mut fix = Vec::new();
    for s in feeding_sources(ctx, culprit) {
        if let Some(f) = without_splits(ctx, s) {
            // Counted splits give the number to set; without a count the idleness fixes say it.
            if let SourcesFact::ReadersWithoutSplits { splits: splits @ Some(_), readers, .. } = &f {
                fix.push(
                    SourcesFact::ParallelismToSplits { source: s.name.clone(), splits: *splits, readers: *readers }
                        .into(),
                );
            }
            cause.push(f.into());
        }
    }
    (cause, fix)
}

/// The heaviest reader holding a split of `source`: (subtask, its rate, rate over the
/// median, the median); `None` with fewer than two such readers or a median of 0.
fn heaviest(ctx: &Context, source: &VertexSignals) -> Option<(u32, f64, f64, f64)> {
    let no_split: Vec<u32> = match without_splits(ctx, source) {
        Some(SourcesFact::ReadersWithoutSplits { subtasks, .. }) => subtasks,
        _ => Vec::new(),
    };
    let rates: Vec<(u32, f64)> = readers_of(ctx, &source.id)
        .into_iter()
        .filter(|r| !no_split.contains(&r.subtask))
        .filter_map(|r| r.records_per_s.map(|x| (r.subtask, x)))
        .collect();
    if rates.len() < 2 {
        return None;
    }
    let m = median(rates.iter().map(|x| x.1).collect())?;
    let (subtask, rate) = rates.into_iter().max_by(|a, b| a.1.total_cmp(&b.1))?;
    (m > 0.0).then_some((subtask, rate, rate / m, m))
}

/// True when every edge from `source` to `culprit` is FORWARD and each vertex on the way
/// has one input: subtask i of the source feeds subtask i of the culprit.
fn forward_chain(ctx: &Context, source: &VertexSignals, culprit: &VertexSignals) -> bool {
    let mut at = culprit.id.as_str();
    for _ in 0..ctx.signals.vertices.len() {
        if at == source.id {
            return true;
        }
        let inputs: Vec<_> = ctx.signals.edges.iter().filter(|e| e.to == at).collect();
        match inputs.as_slice() {
            [e] if e.ship_strategy.eq_ignore_ascii_case("FORWARD") => at = e.from.as_str(),
            _ => return false,
        }
    }
    false
}

/// Partition skew: a hit when the heavy reader feeds the culprit's hot subtask over a
/// forward chain; advice when it does not.
fn skew_report(
    ctx: &Context,
    culprit: &VertexSignals,
    sources: &[&VertexSignals],
    advice: &mut Facts,
) -> Option<StepReport> {
    let t = &ctx.cfg.thresholds;
    let hot = skew::find(culprit, t);
    for s in sources {
        let Some((subtask, rate, ratio, m)) = heaviest(ctx, s).filter(|h| h.2 > t.source_skew_factor) else {
            continue;
        };
        let feeds = hot.filter(|h| h.subtask == subtask && forward_chain(ctx, s, culprit));
        let Some(h) = feeds else {
            advice.push(SourcesFact::SkewNotTheCulprit {
                source: s.name.clone(),
                subtask,
                ratio,
                culprit: culprit.name.clone(),
            });
            continue;
        };
        let mut r = StepReport::hit(
            Finding::SourceSkew,
            SourcesFact::Skewed {
                source: s.name.clone(),
                subtask,
                reader_records_per_s: rate,
                median_records_per_s: m,
                ratio,
                factor: t.source_skew_factor,
            },
        );
        let hot_busy = h.busy.unwrap_or(0.0);
        r.cause.push(SourcesFact::SkewFeedsTheCulprit {
            source: s.name.clone(),
            subtask,
            culprit_subtask_name: culprit.subtask_name(h.subtask),
            hot_busy_ratio: hot_busy,
        });
        for fix in [SkewFix::RebalanceTheKeys, SkewFix::MorePartitions, SkewFix::RebalanceAfterTheSource] {
            r.fix.push(SourcesFact::Skew { fix, source: s.name.clone(), culprit: culprit.name.clone() });
        }
        r.not_the_fix.push(SourcesFact::NotMoreParallelism { vertex: culprit.name.clone() });
        r.summary =
            Some(SourcesFact::SkewSummary { culprit: culprit.name.clone(), source: s.name.clone(), subtask }.into());
        r.subtasks = Some(vec![h.subtask]);
        let reader = culprit.subtask_name(subtask).replace(&culprit.name, &s.name);
        r.evidence.push(ctx.evidence(&reader, "source reader records rate", rate, "records/s", None, "source_records"));
        r.evidence.push(ctx.evidence(
            &s.name,
            "median source reader records rate",
            m,
            "records/s",
            None,
            "source_records",
        ));
        r.evidence.push(ctx.evidence(
            &reader,
            "reader records over the median",
            ratio,
            "factor",
            Some(t.source_skew_factor),
            "source_records",
        ));
        return Some(r);
    }
    None
}

/// Readers paused by watermark alignment: drift at or past the allowed drift and nothing
/// emitted for at least a scrape step.
fn alignment(ctx: &Context, sources: &[&VertexSignals]) -> Option<StepReport> {
    let max_drift_ms = ctx.cfg.thresholds.watermark_alignment_max_drift.as_ms() as f64;
    let step_ms = ctx.snapshot.step_ms.max(1000) as f64;
    for s in sources {
        let paused: Vec<&SourceReader> = readers_of(ctx, &s.id)
            .into_iter()
            .filter(|r| r.alignment_drift_ms.is_some_and(|d| d >= max_drift_ms))
            .filter(|r| r.idle_time_ms.is_some_and(|ms| ms >= step_ms))
            .collect();
        if paused.is_empty() {
            continue;
        }
        let drift_ms = paused.iter().filter_map(|r| r.alignment_drift_ms).fold(f64::MIN, f64::max);
        let subtasks: Vec<u32> = paused.iter().map(|r| r.subtask).collect();
        let growth = lag_growth(ctx, &s.id, &subtasks);
        let mut r = StepReport::hit(
            Finding::WatermarkAlignment,
            SourcesFact::AlignmentPaused { source: s.name.clone(), paused: subtasks.clone(), drift_ms, max_drift_ms },
        );
        r.cause.push(SourcesFact::AlignmentHoldsBack {
            source: s.name.clone(),
            paused: subtasks.len(),
            lag_growth_records_per_s: growth,
        });
        if growth.is_none() {
            r.missing.push("pendingRecords".into());
        }
        for fix in [AlignmentFix::SpeedUpTheLaggard, AlignmentFix::LargerDrift, AlignmentFix::UnalignedSplits] {
            r.fix.push(SourcesFact::Alignment { fix, source: s.name.clone() });
        }
        r.summary = Some(SourcesFact::AlignmentSummary { source: s.name.clone(), paused: subtasks.len() }.into());
        r.evidence.push(ctx.evidence(
            &s.name,
            "watermarkAlignmentDrift",
            drift_ms,
            "ms",
            Some(max_drift_ms),
            "watermark_alignment_drift",
        ));
        return Some(r);
    }
    None
}

/// The paused readers' summed `pendingRecords` slope, records/s; `None` when not reported.
fn lag_growth(ctx: &Context, vertex_id: &str, subtasks: &[u32]) -> Option<f64> {
    let slopes: Vec<f64> = ctx
        .snapshot
        .source_lag
        .iter()
        .filter(|l| l.vertex_id == vertex_id && subtasks.contains(&l.subtask))
        .filter_map(|l| slope_per_s(&l.pending_records))
        .collect();
    (!slopes.is_empty()).then(|| slopes.iter().sum())
}

/// Readers of a backpressured source idle over the window: no data reaches them.
fn idle_under_backpressure(ctx: &Context, source: &VertexSignals) -> Option<SourcesFact> {
    if !ctx.is_red(source) {
        return None;
    }
    let window_ms = ctx.snapshot.window.len_ms() as f64;
    let idle: Vec<&SourceReader> = readers_of(ctx, &source.id)
        .into_iter()
        .filter(|r| r.idle_time_ms.is_some_and(|ms| ms >= ctx.cfg.thresholds.source_idle_share * window_ms))
        .collect();
    let idle_s = idle.iter().filter_map(|r| r.idle_time_ms).fold(f64::MAX, f64::min) / 1000.0;
    (!idle.is_empty()).then(|| SourcesFact::IdleUnderBackpressure {
        source: source.name.clone(),
        subtasks: idle.iter().map(|r| r.subtask).collect(),
        idle_s,
    })
}

/// Where records wait, from the median fetch lag and the median time in the reader
/// (emit − fetch) over the readers that report both.
fn fetch_against_emit(ctx: &Context, source: &VertexSignals) -> Option<SourcesFact> {
    let both: Vec<(f64, f64)> = readers_of(ctx, &source.id)
        .into_iter()
        .filter_map(|r| Some((r.fetch_lag_ms?, (r.emit_lag_ms? - r.fetch_lag_ms?).max(0.0))))
        .collect();
    let fetch = median(both.iter().map(|b| b.0).collect())?;
    let inside = median(both.iter().map(|b| b.1).collect())?;
    let k = ctx.cfg.thresholds.fetch_emit_lag_factor;
    let source_name = source.name.clone();
    if fetch >= MIN_LAG_MS && fetch >= k * inside {
        Some(SourcesFact::LagBeforeFlink { source: source_name, fetch_lag_ms: fetch, in_reader_ms: inside })
    } else if inside >= MIN_LAG_MS && inside >= k * fetch {
        Some(SourcesFact::LagInsideTheReader { source: source_name, fetch_lag_ms: fetch, in_reader_ms: inside })
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DiagnosisConfig;
    use crate::diagnose::testkit::*;
    use crate::model::facts::state_backend::StateBackendFact;
    use crate::model::snapshot::Snapshot;
    use crate::model::verdict::Outcome;

    /// The sources fact a fact is, or a panic saying what it is instead.
    fn sf(f: &Fact) -> &SourcesFact {
        match f {
            Fact::Sources(s) => s,
            other => panic!("not a sources fact: {other:?}"),
        }
    }

    /// Source `src` (4 readers, backpressured) → `ship` → parse (subtask 2 hot, 95 % busy,
    /// getting `parse_rates`) → FORWARD → sink; readers read `reader_rates`.
    fn job(ship: &str, reader_rates: [f64; 4], parse_rates: [f64; 4]) -> SnapshotBuilder {
        let mut b = SnapshotBuilder::new()
            .vertex("src", "Source: clicks", 4)
            .vertex("parse", "parse", 4)
            .vertex("sink", "Sink: out", 4)
            .edge("src", "parse", ship)
            .edge("parse", "sink", "FORWARD")
            .all_subtasks("src", 0.1, 0.9, 0.0, None)
            .all_subtasks("sink", 0.1, 0.0, 0.9, 1200.0);
        for i in 0..4u32 {
            let busy = if i == 2 { 0.95 } else { 0.3 };
            b = b.subtask("parse", i, busy, 0.0, 1.0 - busy, parse_rates[i as usize]);
            b = b.records_out("src", i, reader_rates[i as usize]);
            b = b.source_reader(SourceReader { splits: Some(2), ..reader("src", i, reader_rates[i as usize]) });
        }
        b
    }

    fn on_parse(snap: &Snapshot) -> StepReport {
        on_vertex(snap, "parse", run)
    }

    #[test]
    fn a_heavy_reader_feeding_the_hot_subtask_over_a_forward_chain_is_source_skew_not_a_hot_key() {
        // Readers 100, 100, 900, 100 records/s: median (100 + 100) / 2 = 100, the heaviest
        // 900 / 100 = 9 > 3 (AWS: max over 3 × median). Reader 2 feeds parse[2] (95 % busy,
        // the others 30 %) over FORWARD: subtask i of the source feeds subtask i.
        let snap = job("FORWARD", [100.0, 100.0, 900.0, 100.0], [100.0, 100.0, 900.0, 100.0]).build();
        let r = on_parse(&snap);
        assert_eq!((r.outcome, r.finding), (Outcome::Hit, Some(Finding::SourceSkew)));
        match sf(&r.detail) {
            SourcesFact::Skewed { subtask, reader_records_per_s, median_records_per_s, ratio, factor, .. } => {
                assert_eq!((*subtask, *reader_records_per_s, *median_records_per_s), (2, 900.0, 100.0));
                assert_close(*ratio, 9.0, 1e-9);
                assert_eq!(*factor, 3.0);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(r.subtasks, Some(vec![2]));
        // The records alone would read as a hot key (share 900 / 1200 = 0.75 ≥ 2 / 4):
        // this step runs first, so the verdict says where the skew comes from.
        let d = crate::diagnose::diagnose(&snap, &DiagnosisConfig::default());
        assert_eq!(d.finding, Finding::SourceSkew);
        let hot_key = d.steps.iter().find(|s| s.step == crate::model::verdict::StepName::HotKey).unwrap();
        assert_eq!(hot_key.outcome, Outcome::Skipped);
    }

    #[test]
    fn a_heavy_reader_behind_a_keyby_is_advice_and_the_hot_key_stays_the_finding() {
        // The same readers (9 × the median), but a HASH edge: the keys decide which parse
        // subtask gets a record, not the reader.
        let snap = job("HASH", [100.0, 100.0, 900.0, 100.0], [100.0, 100.0, 900.0, 100.0]).build();
        let r = on_parse(&snap);
        assert_eq!(r.outcome, Outcome::Clear);
        assert!(
            r.advice.iter().any(|a| matches!(sf(a), SourcesFact::SkewNotTheCulprit { subtask: 2, ratio, .. } if (*ratio - 9.0).abs() < 1e-9)),
            "{:?}",
            r.advice
        );
        let d = crate::diagnose::diagnose(&snap, &DiagnosisConfig::default());
        assert_eq!(d.finding, Finding::HotKey);
    }

    #[test]
    fn readers_within_three_times_the_median_are_even() {
        // 100, 100, 250, 100: 250 / 100 = 2.5 ≤ 3.
        let snap = job("FORWARD", [100.0, 100.0, 250.0, 100.0], [100.0, 100.0, 250.0, 100.0]).build();
        let r = on_parse(&snap);
        assert_eq!(r.outcome, Outcome::Clear);
        match sf(&r.detail) {
            SourcesFact::ReadersEven { readers: 4, without_split: 0, max_over_median_ratio: Some(x), .. } => {
                assert_close(*x, 2.5, 1e-9)
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn readers_past_the_allowed_drift_that_emit_nothing_are_held_back_by_watermark_alignment() {
        // Reader 0 drifts 45 s ahead of its group (allowed 20 s) and has emitted nothing for
        // 30 s (≥ one 5 s step); its pendingRecords grow 1000 → 16000 over 300 s = 50/s.
        // Reader 1 drifts 2 s: not paused.
        let snap = job("FORWARD", [100.0, 100.0, 100.0, 100.0], [100.0; 4])
            .source_reader(SourceReader {
                alignment_drift_ms: Some(45_000.0),
                idle_time_ms: Some(30_000.0),
                ..reader("src", 0, 100.0)
            })
            .source_reader(SourceReader {
                alignment_drift_ms: Some(2_000.0),
                idle_time_ms: Some(0.0),
                ..reader("src", 1, 100.0)
            })
            .pending_records("src", 0, line(-300, 0, 5, 1000.0, 50.0))
            .build();
        let r = on_parse(&snap);
        assert_eq!((r.outcome, r.finding), (Outcome::Hit, Some(Finding::WatermarkAlignment)));
        match sf(&r.detail) {
            SourcesFact::AlignmentPaused { paused, drift_ms, max_drift_ms, .. } => {
                assert_eq!((paused.as_slice(), *drift_ms, *max_drift_ms), (&[0][..], 45_000.0, 20_000.0));
            }
            other => panic!("{other:?}"),
        }
        match sf(&r.cause[0]) {
            SourcesFact::AlignmentHoldsBack { paused: 1, lag_growth_records_per_s: Some(g), .. } => {
                assert_close(*g, 50.0, 1e-6)
            }
            other => panic!("{other:?}"),
        }
        assert!(r.missing.is_empty());
    }

    #[test]
    fn a_drift_past_the_limit_without_idleness_is_no_pause() {
        // 45 s of drift but the reader emitted 0 s ago: alignment is not holding it.
        let snap = job("FORWARD", [100.0; 4], [100.0; 4])
            .source_reader(SourceReader {
                alignment_drift_ms: Some(45_000.0),
                idle_time_ms: Some(0.0),
                ..reader("src", 0, 100.0)
            })
            .build();
        assert_ne!(on_parse(&snap).finding, Some(Finding::WatermarkAlignment));
    }

    #[test]
    fn readers_with_no_partition_and_an_advancing_watermark_only_waste_slots() {
        // Readers 0–2 hold one partition each (assigned-partitions 1), reader 3 none (0):
        // 1 of 4 without a split, 1 + 1 + 1 + 0 = 3 splits. The watermark advances.
        let mut b = job("FORWARD", [100.0; 4], [100.0; 4]).watermark("parse", line(-300, 0, 5, 1.7e12, 1000.0));
        for i in 0..4 {
            let splits = if i == 3 { 0 } else { 1 };
            let rate = if i == 3 { 0.0 } else { 100.0 };
            b = b.source_reader(SourceReader { splits: Some(splits), ..reader("src", i, rate) });
        }
        let r = on_parse(&b.build());
        assert_eq!(r.outcome, Outcome::Clear);
        assert!(
            r.advice.iter().any(|a| matches!(sf(a), SourcesFact::WastedSlots { without: 1, splits: Some(3), .. })),
            "{:?}",
            r.advice
        );
    }

    /// Source: impressions (4) → HASH → TumblingEventTimeWindows (4) → Sink: out; reader 3
    /// reports no `currentOffset` while the others report one partition each (3 splits, 1
    /// reader without); the window's input watermark reads Long.MIN_VALUE all window. `red`:
    /// the source 90 % backpressured behind a window 99 % busy, else all of it calm.
    fn impressions_without_a_split(red: bool) -> SnapshotBuilder {
        let (src, win) =
            if red { ((0.06, 0.9, 0.04), (0.99, 0.0, 0.01)) } else { ((0.05, 0.0, 0.95), (0.02, 0.0, 0.98)) };
        let mut b = SnapshotBuilder::new()
            .vertex("src", "Source: impressions", 4)
            .vertex("win", "TumblingEventTimeWindows", 4)
            .vertex("sink", "Sink: out", 4)
            .edge("src", "win", "HASH")
            .edge("win", "sink", "FORWARD")
            .all_subtasks("src", src.0, src.1, src.2, None)
            .all_subtasks("win", win.0, win.1, win.2, 600.0)
            .all_subtasks("sink", 0.0, 0.0, 1.0, 0.0)
            .watermark("win", line(-300, 0, 10, crate::model::snapshot::LONG_MIN_AS_F64, 0.0));
        for i in 0..4 {
            let r = if i == 3 {
                reader("src", i, 0.0)
            } else {
                SourceReader { splits: Some(1), splits_from_offsets: true, ..reader("src", i, 800.0) }
            };
            b = b.source_reader(r);
        }
        b
    }

    #[test]
    fn readers_without_splits_under_a_watermark_that_never_arrived_are_named_in_the_watermark_stall() {
        let d = crate::diagnose::diagnose(&impressions_without_a_split(true).build(), &DiagnosisConfig::default());
        assert_eq!(d.finding, Finding::WatermarkStall);
        let named: Vec<&SourcesFact> =
            d.cause.iter().filter_map(|f| if let Fact::Sources(s) = f { Some(s) } else { None }).collect();
        assert_eq!(
            named,
            vec![&SourcesFact::ReadersWithoutSplits {
                source: "Source: impressions".into(),
                subtasks: vec![3],
                readers: 4,
                splits: Some(3),
                sign: NoSplitSign::NoPartition,
            }]
        );
        assert!(
            d.fix.iter().any(|f| matches!(
                f,
                Fact::Sources(SourcesFact::ParallelismToSplits { splits: Some(3), readers: 4, .. })
            ))
        );
        assert!(d.fix.iter().any(|f| matches!(f, Fact::StateBackend(StateBackendFact::MarkIdleInputs))));
    }

    #[test]
    fn without_backpressure_a_watermark_held_back_by_readers_without_splits_is_said_in_the_summary() {
        // Nothing is red; otherwise as the watermark-stall case above.
        let v = crate::diagnose::testkit::verdict(&impressions_without_a_split(false).build());
        assert_eq!((v.status.as_str(), v.finding.as_str()), ("no_backpressure", "none"));
        assert!(
            v.summary.ends_with(
                "But TumblingEventTimeWindows's input watermark never arrived: 1 of the 4 readers of Source: impressions holds no split."
            ),
            "{}",
            v.summary
        );
        assert!(
            v.advice.iter().any(|a| a.starts_with("Give Source: impressions at most 3 subtasks")),
            "{:?}",
            v.advice
        );
        // With the watermark arriving, the idle reader only wastes a slot: nothing in the summary.
        let mut b = SnapshotBuilder::new()
            .vertex("src", "Source: impressions", 4)
            .vertex("win", "TumblingEventTimeWindows", 4)
            .edge("src", "win", "HASH")
            .all_subtasks("src", 0.05, 0.0, 0.95, None)
            .all_subtasks("win", 0.02, 0.0, 0.98, 600.0)
            .watermark("win", line(-300, 0, 10, 1.8e12, 1000.0));
        for i in 0..4 {
            b = b.source_reader(SourceReader { splits: Some(if i == 3 { 0 } else { 1 }), ..reader("src", i, 800.0) });
        }
        let v = crate::diagnose::testkit::verdict(&b.build());
        assert!(v.summary.ends_with("is 5% busy."), "{}", v.summary);
    }

    #[test]
    fn a_reader_idle_all_window_in_a_backpressured_source_has_no_data() {
        // Window 300 s; reader 1 idle 300 000 ms ≥ 0.9 × 300 000; the source is 90 %
        // backpressured. It holds a partition (assigned 2), so it is not without a split.
        let snap = job("HASH", [100.0; 4], [100.0; 4])
            .source_reader(SourceReader { splits: Some(2), idle_time_ms: Some(300_000.0), ..reader("src", 1, 0.0) })
            .build();
        let r = on_parse(&snap);
        assert!(
            r.advice.iter().any(|a| sf(a)
                == &SourcesFact::IdleUnderBackpressure {
                    source: "Source: clicks".into(),
                    subtasks: vec![1],
                    idle_s: 300.0
                }),
            "{:?}",
            r.advice
        );
    }

    #[test]
    fn fetch_lag_far_above_the_time_in_the_reader_is_before_flink_and_the_reverse_inside_it() {
        // Fetch 60 s, emit 60.5 s: 0.5 s in the reader; 60 ≥ 10 × 0.5 → before Flink.
        let mut before = job("HASH", [100.0; 4], [100.0; 4]);
        // Fetch 0.2 s, emit 5.2 s: 5 s in the reader ≥ 10 × 0.2 → inside the reader.
        let mut inside = job("HASH", [100.0; 4], [100.0; 4]);
        for i in 0..4 {
            before = before.source_reader(SourceReader {
                splits: Some(2),
                fetch_lag_ms: Some(60_000.0),
                emit_lag_ms: Some(60_500.0),
                ..reader("src", i, 100.0)
            });
            inside = inside.source_reader(SourceReader {
                splits: Some(2),
                fetch_lag_ms: Some(200.0),
                emit_lag_ms: Some(5_200.0),
                ..reader("src", i, 100.0)
            });
        }
        let advice = |b: SnapshotBuilder| on_parse(&b.build()).advice.into_vec();
        assert!(advice(before).iter().any(|a| sf(a)
            == &SourcesFact::LagBeforeFlink {
                source: "Source: clicks".into(),
                fetch_lag_ms: 60_000.0,
                in_reader_ms: 500.0
            }));
        assert!(advice(inside).iter().any(|a| sf(a)
            == &SourcesFact::LagInsideTheReader {
                source: "Source: clicks".into(),
                fetch_lag_ms: 200.0,
                in_reader_ms: 5_000.0
            }));
    }

    #[test]
    fn readers_reporting_nothing_are_no_data_and_one_sample_is_not_judged() {
        let bare = SnapshotBuilder::new()
            .vertex("src", "Source: clicks", 2)
            .vertex("parse", "parse", 2)
            .edge("src", "parse", "FORWARD")
            .all_subtasks("src", 0.1, 0.9, 0.0, None)
            .all_subtasks("parse", 0.95, 0.0, 0.05, 100.0);
        let r = on_parse(&bare.build());
        assert_eq!(r.outcome, Outcome::NoData);
        assert!(matches!(sf(&r.detail), SourcesFact::NotReported { .. }));
        let one = job("FORWARD", [100.0, 100.0, 900.0, 100.0], [100.0; 4]).samples_in_window(Some(1)).build();
        let r = on_parse(&one);
        assert_eq!((r.outcome, sf(&r.detail)), (Outcome::NoData, &SourcesFact::OneSample));
    }
}
