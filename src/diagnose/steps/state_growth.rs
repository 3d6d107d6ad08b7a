//! Step `state_growth`: does the culprit's state only grow? And the hazard
//! `checkpoint_timeout`: will checkpoints outgrow their timeout?
//!
//! Runs after `state_backend` (a RocksDB that stalls writes, or a stuck watermark that makes
//! state pile up, is the nearer cause and is ruled out first) and before `checkpoints`
//! (growing state is one reason checkpoints slow down). AWS names "unbounded state growth"
//! (`lastCheckpointSize` rising) as the anchor.
//!
//! The state's size over the trend lookback: the culprit's own RocksDB
//! `estimate-live-data-size` (else `total-sst-files-size`), summed over its subtasks and
//! column families, else the job's `lastCheckpointFullSize` (else `lastCheckpointSize`).
//! It "only grows" when, over at least `state_growth_min_samples` samples, rises make up at
//! least `state_growth_rising_ratio` of its movement between consecutive samples (the sum of
//! the rises over the sum of rises and falls; at least `state_growth_min_samples − 1`
//! rises), the least-squares slope is positive and at least
//! `state_growth_min_per_hour_ratio` of the newest size per hour. A state that a TTL or
//! firing windows clean up falls as much as it rose (a sawtooth) and does not only grow —
//! by count its steps may be 90 % rises, by size only half.
//!
//! Hits when the culprit's own RocksDB state only grows, or the job's checkpoints only grow
//! and the state is the culprit's: the culprit, not a sink, has RocksDB metrics (the state
//! backend is involved) or is the only stateful vertex. State that grows elsewhere is
//! advice. `no_data` for a stateful culprit without any size; clear for a stateless one.

use crate::diagnose::signals::VertexSignals;
use crate::diagnose::{Context, StepReport, slope_per_s};
use crate::model::facts::HazardFacts;
use crate::model::facts::state_growth::{Growth, SizeSource, StateGrowthFact};
use crate::model::snapshot::{Point, RocksDbSubtask};
use crate::model::verdict::{Finding, HazardKind, Severity};

/// The options that enable the RocksDB sizes this step reads.
pub const ROCKSDB_SIZE_OPTIONS: [&str; 3] = [
    "state.backend.rocksdb.metrics.estimate-live-data-size",
    "state.backend.rocksdb.metrics.total-sst-files-size",
    "state.backend.rocksdb.metrics.estimate-num-keys",
];

/// The rule's thresholds, from the configuration.
struct Rule {
    rising_ratio: f64,
    min_span_s: f64,
    min_samples: u32,
    min_per_hour_ratio: f64,
}

impl Rule {
    fn of(ctx: &Context) -> Rule {
        let t = &ctx.cfg.thresholds;
        Rule {
            rising_ratio: t.state_growth_rising_ratio,
            min_span_s: t.state_growth_min_span.as_ms() as f64 / 1000.0,
            min_samples: t.state_growth_min_samples,
            min_per_hour_ratio: t.state_growth_min_per_hour_ratio,
        }
    }
}

impl Rule {
    /// Why `g` is not growth: with `short_of_s` when it rises as growth does but over less
    /// than the minimum span.
    fn not_growing(&self, vertex: String, g: Growth) -> StateGrowthFact {
        let rises = g.rising_ratio >= self.rising_ratio
            && g.samples >= self.min_samples
            && g.per_hour_ratio >= self.min_per_hour_ratio;
        let short_of_s = (rises && g.span_s < self.min_span_s).then_some(self.min_span_s);
        StateGrowthFact::NotGrowing { vertex, growth: g, short_of_s }
    }
}

/// How a series moves: its samples, its rises between consecutive samples (how many, and
/// by how much in all), how much it fell in all, and the least-squares slope (per s).
struct Moves {
    samples: u32,
    rises: u32,
    risen: f64,
    fallen: f64,
    slope_per_s: Option<f64>,
    last: f64,
    span_s: f64,
}

fn moves(points: &[Point]) -> Option<Moves> {
    let pts: Vec<Point> = points.iter().copied().filter(|p| p.1.is_finite()).collect();
    let last = pts.last()?.1;
    let (mut rises, mut risen, mut fallen) = (0, 0.0, 0.0);
    for w in pts.windows(2) {
        let d = w[1].1 - w[0].1;
        if d > 0.0 {
            rises += 1;
            risen += d;
        } else {
            fallen -= d;
        }
    }
    let span_s = (pts.last()?.0 - pts[0].0) as f64 / 1000.0;
    Some(Moves { samples: pts.len() as u32, rises, risen, fallen, slope_per_s: slope_per_s(&pts), last, span_s })
}

impl Moves {
    /// The share of its movement that was rises (by size, not by count: a sawtooth that
    /// climbs in nine small steps and is cleaned up in one fall has risen as much as it fell).
    fn rising_ratio(&self) -> f64 {
        let moved = self.risen + self.fallen;
        if moved > 0.0 { self.risen / moved } else { 0.0 }
    }

    /// Rises make up at least `rule.rising_ratio` of its movement, in `min_samples − 1`
    /// rises at least over `min_samples` samples, with a positive slope.
    fn only_rises(&self, rule: &Rule) -> bool {
        self.samples >= rule.min_samples
            && self.rises + 1 >= rule.min_samples
            && self.rising_ratio() >= rule.rising_ratio
            && self.slope_per_s.is_some_and(|s| s > 0.0)
    }
}

/// The growth of a size series, or why it has none: `Err(samples)` when too few samples.
fn growth(points: &[Point], source: SizeSource, rule: &Rule) -> Option<Result<Growth, u32>> {
    let m = moves(points)?;
    if m.samples < rule.min_samples {
        return Some(Err(m.samples));
    }
    let bytes_per_s = m.slope_per_s.unwrap_or(0.0);
    let per_hour_ratio = if m.last > 0.0 { bytes_per_s * 3600.0 / m.last } else { 0.0 };
    Some(Ok(Growth {
        source,
        bytes_now: m.last,
        bytes_per_s,
        per_hour_ratio,
        samples: m.samples,
        span_s: m.span_s,
        rising_ratio: m.rising_ratio(),
        only_grows: m.only_rises(rule) && per_hour_ratio >= rule.min_per_hour_ratio && m.span_s >= rule.min_span_s,
    }))
}

/// The sum over subtasks of one per-subtask series, at the times every subtask reports.
fn summed(series: &[&[Point]]) -> Vec<Point> {
    let Some((first, rest)) = series.split_first() else { return Vec::new() };
    first
        .iter()
        .filter_map(|&(t, v)| {
            rest.iter().try_fold(v, |sum, s| s.iter().find(|p| p.0 == t).map(|p| sum + p.1)).map(|sum| (t, sum))
        })
        .collect()
}

/// The culprit's RocksDB size over its subtasks: live data where every subtask reports it,
/// else SST files; with the sum of its keys.
fn culprit_size(rocks: &[&RocksDbSubtask]) -> Option<(Vec<Point>, SizeSource, Vec<Point>)> {
    let of = |f: fn(&RocksDbSubtask) -> &[Point]| -> Option<Vec<Point>> {
        let all: Vec<&[Point]> = rocks.iter().map(|r| f(r)).collect();
        (!all.is_empty() && all.iter().all(|s| !s.is_empty())).then(|| summed(&all))
    };
    let keys = of(|r| &r.num_keys).unwrap_or_default();
    if let Some(live) = of(|r| &r.live_data_bytes) {
        return Some((live, SizeSource::LiveData, keys));
    }
    of(|r| &r.sst_files_bytes).map(|sst| (sst, SizeSource::SstFiles, keys))
}

/// The job's checkpoint sizes: the full size where reported, else the checkpointed size.
fn checkpoint_size(ctx: &Context) -> Option<(Vec<Point>, SizeSource)> {
    let series = &ctx.snapshot.checkpoints.series;
    let full: Vec<Point> = series.iter().filter_map(|p| p.full_size_bytes.map(|b| (p.t_ms, b))).collect();
    if !full.is_empty() {
        return Some((full, SizeSource::CheckpointFullSize));
    }
    let size: Vec<Point> = series.iter().filter_map(|p| p.size_bytes.map(|b| (p.t_ms, b))).collect();
    (!size.is_empty()).then_some((size, SizeSource::CheckpointSize))
}

/// The job's checkpoint growth, when its sizes are there and enough.
pub fn job_growth(ctx: &Context) -> Option<Growth> {
    let (points, source) = checkpoint_size(ctx)?;
    growth(&points, source, &Rule::of(ctx))?.ok()
}

pub fn run(ctx: &Context, culprit: &VertexSignals) -> StepReport {
    let rule = Rule::of(ctx);
    let rocks: Vec<&RocksDbSubtask> = ctx.snapshot.rocksdb.iter().filter(|r| r.vertex_id == culprit.id).collect();
    let vertex = culprit.name.clone();
    let job = checkpoint_size(ctx).and_then(|(p, s)| growth(&p, s, &rule));
    if let Some((points, source, keys)) = culprit_size(&rocks) {
        return match growth(&points, source, &rule) {
            Some(Ok(g)) if g.only_grows => {
                let keys_per_s = (keys.len() >= 2).then(|| slope_per_s(&keys)).flatten();
                grows_report(ctx, culprit, g, keys_per_s, true)
            }
            Some(Ok(g)) => elsewhere(ctx, culprit, job, rule.not_growing(vertex, g)),
            Some(Err(samples)) => too_few(ctx, culprit, job, source, samples, &rule),
            None => elsewhere(ctx, culprit, job, StateGrowthFact::NoSizes { vertex }),
        };
    }
    let owns_job_state = !culprit.is_sink && (!rocks.is_empty() || only_stateful(ctx, culprit));
    match job {
        Some(Ok(g)) if g.only_grows && owns_job_state => grows_report(ctx, culprit, g, None, !rocks.is_empty()),
        Some(Ok(g)) if g.only_grows => advice(ctx, culprit, g, stateless_or(culprit, &rocks, None)),
        Some(Ok(g)) => StepReport::clear(stateless_or(culprit, &rocks, Some(g))),
        Some(Err(samples)) => StepReport::clear(StateGrowthFact::TooFewSamples {
            source: checkpoint_size(ctx).map_or(SizeSource::CheckpointSize, |c| c.1),
            samples,
            needed: rule.min_samples,
        }),
        None if culprit.is_stateful() || !rocks.is_empty() => no_sizes(culprit),
        None => StepReport::clear(StateGrowthFact::Stateless { vertex }),
    }
}

/// When nothing is backpressured (no culprit to examine): the first vertex whose own
/// RocksDB state only grows, else the job's checkpoints when they only grow and one vertex
/// alone is stateful, ends the summary, with the TTL as advice. State that only grows is
/// not slow yet; it is what makes checkpoints and restores slow later.
pub fn without_culprit(ctx: &Context) -> StepReport {
    let rule = Rule::of(ctx);
    let mut r = StepReport::clear(crate::model::facts::runbook::RunbookFact::NoCulpritToExamine { nothing_red: true });
    // Every vertex's own RocksDB size, then the job's checkpoints when one vertex alone is
    // stateful: the growths measured, in the graph's order.
    let mut measured: Vec<(&VertexSignals, Growth)> = ctx
        .signals
        .vertices
        .iter()
        .filter_map(|v| {
            let rocks: Vec<&RocksDbSubtask> = ctx.snapshot.rocksdb.iter().filter(|x| x.vertex_id == v.id).collect();
            let (points, source, _) = culprit_size(&rocks)?;
            Some((v, growth(&points, source, &rule)?.ok()?))
        })
        .collect();
    let stateful: Vec<&VertexSignals> = ctx.signals.vertices.iter().filter(|v| v.is_stateful()).collect();
    if let ([only], Some(g), true) = (stateful.as_slice(), job_growth(ctx), ctx.snapshot.rocksdb.is_empty()) {
        measured.push((only, g));
    }
    let Some(&(vertex, g)) = measured.iter().find(|(_, g)| g.only_grows) else {
        // Say what was measured and why it is not growth (too short, cleaned up, flat).
        if let Some((v, g)) = measured.first() {
            r.detail = rule.not_growing(v.name.clone(), *g).into();
        }
        return r;
    };
    r.summary = Some(StateGrowthFact::GrowsWithoutBackpressure { vertex: vertex.name.clone(), growth: g }.into());
    r.advice.push(StateGrowthFact::Ttl {
        bytes_per_hour: g.bytes_per_hour(),
        bytes_now: g.bytes_now,
        ttl_hours: ttl_hours(&g),
    });
    push_evidence(ctx, &mut r, if g.source.is_job_wide() { "job" } else { vertex.name.as_str() }, &g);
    r
}

/// The culprit is the job's only stateful vertex (by the graph's kinds and keyed inputs),
/// and no vertex has RocksDB metrics that would say otherwise.
fn only_stateful(ctx: &Context, culprit: &VertexSignals) -> bool {
    culprit.is_stateful()
        && ctx.snapshot.rocksdb.is_empty()
        && ctx.signals.vertices.iter().filter(|v| v.is_stateful()).all(|v| v.id == culprit.id)
}

/// What the step says of a culprit whose state is not shown growing: stateless, stateful
/// but not known to hold the job's state, or the job's growth `g` that does not only grow.
fn stateless_or(culprit: &VertexSignals, rocks: &[&RocksDbSubtask], g: Option<Growth>) -> StateGrowthFact {
    let vertex = culprit.name.clone();
    match g {
        Some(growth) => StateGrowthFact::NotGrowing { vertex, growth, short_of_s: None },
        None if culprit.is_stateful() || !rocks.is_empty() => StateGrowthFact::WhoseUnknown { vertex },
        None => StateGrowthFact::Stateless { vertex },
    }
}

/// Clear with `detail`, and advice when the job's state grows while the culprit's does not.
fn elsewhere(
    ctx: &Context,
    culprit: &VertexSignals,
    job: Option<Result<Growth, u32>>,
    detail: StateGrowthFact,
) -> StepReport {
    match job {
        Some(Ok(g)) if g.only_grows => advice(ctx, culprit, g, detail),
        _ => StepReport::clear(detail),
    }
}

fn too_few(
    ctx: &Context,
    culprit: &VertexSignals,
    job: Option<Result<Growth, u32>>,
    source: SizeSource,
    samples: u32,
    rule: &Rule,
) -> StepReport {
    elsewhere(ctx, culprit, job, StateGrowthFact::TooFewSamples { source, samples, needed: rule.min_samples })
}

/// Clear, with the advice that the job's state only grows though it does not explain the
/// culprit.
fn advice(ctx: &Context, culprit: &VertexSignals, g: Growth, detail: StateGrowthFact) -> StepReport {
    let mut r = StepReport::clear(detail);
    r.advice.push(StateGrowthFact::GrowsElsewhere { culprit: culprit.name.clone(), growth: g });
    push_evidence(ctx, &mut r, "job", &g);
    r
}

fn no_sizes(culprit: &VertexSignals) -> StepReport {
    let mut r = StepReport::no_data(
        StateGrowthFact::NoSizes { vertex: culprit.name.clone() },
        vec!["lastCheckpointFullSize".into(), "lastCheckpointSize".into()],
    );
    r.missing.extend(ROCKSDB_SIZE_OPTIONS[..2].iter().map(|o| o.to_string()));
    r
}

/// The evidence of a growth: the newest size (bytes) and its slope (bytes/s).
fn push_evidence(ctx: &Context, r: &mut StepReport, subject: &str, g: &Growth) {
    let (metric, rate, signal) = match g.source {
        SizeSource::LiveData => (
            "rocksdb estimate_live_data_size",
            "rocksdb estimate_live_data_size growth",
            "rocksdb_estimate_live_data_size",
        ),
        SizeSource::SstFiles => {
            ("rocksdb total_sst_files_size", "rocksdb total_sst_files_size growth", "rocksdb_total_sst_files_size")
        }
        SizeSource::CheckpointFullSize => ("lastCheckpointFullSize", "lastCheckpointFullSize growth", "checkpoints"),
        SizeSource::CheckpointSize => ("lastCheckpointSize", "lastCheckpointSize growth", "checkpoints"),
    };
    r.evidence.push(ctx.evidence(subject, metric, g.bytes_now, "bytes", None, signal));
    r.evidence.push(ctx.evidence(subject, rate, g.bytes_per_s, "bytes/s", Some(0.0), signal));
}

/// The culprit's state only grows: the finding, with TTL as the fix.
fn grows_report(
    ctx: &Context,
    culprit: &VertexSignals,
    g: Growth,
    keys_per_s: Option<f64>,
    rocksdb: bool,
) -> StepReport {
    let vertex = culprit.name.clone();
    let mut r =
        StepReport::hit(Finding::StateGrowth, StateGrowthFact::Grows { vertex: vertex.clone(), growth: g, keys_per_s });
    let subject = if g.source.is_job_wide() { "job" } else { vertex.as_str() };
    push_evidence(ctx, &mut r, subject, &g);
    if let Some(k) = keys_per_s {
        r.evidence.push(ctx.evidence(
            &vertex,
            "rocksdb estimate_num_keys growth",
            k,
            "keys/s",
            None,
            "rocksdb_estimate_num_keys",
        ));
    }
    r.cause.push(StateGrowthFact::GrowthCause { vertex: vertex.clone(), growth: g, rocksdb });
    r.fix.push(StateGrowthFact::Ttl {
        bytes_per_hour: g.bytes_per_hour(),
        bytes_now: g.bytes_now,
        ttl_hours: ttl_hours(&g),
    });
    if rocksdb {
        r.fix.push(StateGrowthFact::CompactionFilter);
    }
    r.not_the_fix.push(StateGrowthFact::NotMoreMemory { bytes_per_hour: g.bytes_per_hour() });
    r.summary = Some(StateGrowthFact::Summary { vertex, bytes_per_hour: g.bytes_per_hour() }.into());
    r
}

/// A TTL that holds the state near its size now: with every write a new key, state levels
/// off at growth × TTL, so TTL = size now ÷ growth, in whole hours (at least 1).
fn ttl_hours(g: &Growth) -> f64 {
    if g.bytes_per_s <= 0.0 {
        return 1.0;
    }
    (g.bytes_now / g.bytes_per_hour()).round().max(1.0)
}

/// How many times the fitted span a duration's growth is extrapolated at most.
pub const EXTRAPOLATION_SPANS: f64 = 3.0;

/// The hazard `checkpoint_timeout`: `lastCheckpointDuration` only grows (the same rule as
/// the state's, without the share per hour) and, extrapolated linearly, reaches the
/// checkpoint timeout within `checkpoint_timeout_horizon` and within
/// [`EXTRAPOLATION_SPANS`] × the span of the durations fitted. A warning: the checkpoints step
/// itself reports a checkpoint that already took half the timeout.
pub fn timeout_hazard(ctx: &Context) -> Option<HazardFacts> {
    let t = &ctx.cfg.thresholds;
    let series = &ctx.snapshot.checkpoints.series;
    let durations: Vec<Point> = series.iter().filter_map(|p| p.last_duration_ms.map(|d| (p.t_ms, d))).collect();
    let m = moves(&durations)?;
    if !m.only_rises(&Rule::of(ctx)) {
        return None;
    }
    let growth_ms_per_s = m.slope_per_s?;
    let timeout_ms =
        ctx.snapshot.checkpoints.config.as_ref().map(|c| c.timeout_ms).unwrap_or(t.checkpoint_default_timeout.as_ms());
    let time_to_timeout_s = (timeout_ms as f64 - m.last) / growth_ms_per_s;
    // A line is extrapolated no further than a few times the span it was fitted over.
    let horizon_s = (t.checkpoint_timeout_horizon.as_ms() as f64 / 1000.0).min(EXTRAPOLATION_SPANS * m.span_s);
    if !(time_to_timeout_s > 0.0 && time_to_timeout_s <= horizon_s) {
        return None;
    }
    let state_bytes_per_hour = job_growth(ctx).filter(|g| g.only_grows).map(|g| g.bytes_per_hour());
    Some(HazardFacts {
        kind: HazardKind::CheckpointTimeout,
        severity: Severity::Warning,
        time_to_loss_seconds: None,
        topic: None,
        time_to_timeout_seconds: Some(time_to_timeout_s.round() as i64),
        detail: StateGrowthFact::TimeoutAhead {
            duration_ms: m.last,
            growth_ms_per_s,
            timeout_ms,
            time_to_timeout_s,
            state_bytes_per_hour,
        }
        .into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::testkit::*;
    use crate::model::facts::Fact;
    use crate::model::snapshot::{CheckpointPoint, Snapshot};
    use crate::model::verdict::{Outcome, StepName};

    /// Bytes in a GB, as the words write them (decimal).
    const GB: f64 = 1e9;

    fn sg(f: &Fact) -> &StateGrowthFact {
        match f {
            Fact::StateGrowth(s) => s,
            other => panic!("not a state-growth fact: {other:?}"),
        }
    }

    /// Source → keyed score (HASH, 2 subtasks, busy 0.95, the culprit) → sink.
    fn job() -> SnapshotBuilder {
        keyed_score_job("stateful-score")
    }

    fn report(snap: &Snapshot, vertex: &str) -> StepReport {
        on_vertex(snap, vertex, run)
    }

    /// Each of score's two subtasks: live data from 5 GB rising 1 GB/h, every 60 s for the
    /// last 30 min; keys from 10 M rising 1 M/h.
    fn rising_live_data(b: SnapshotBuilder) -> SnapshotBuilder {
        (0..2).fold(b, |b, i| {
            b.rocksdb(RocksDbSubtask {
                live_data_bytes: line(-1800, 0, 60, 5.0 * GB, GB / 3600.0),
                num_keys: line(-1800, 0, 60, 10e6, 1e6 / 3600.0),
                ..rocks("score", i)
            })
        })
    }

    #[test]
    fn state_rising_two_gb_an_hour_on_a_rocksdb_culprit_is_state_growth_with_the_slope() {
        // Summed over the two subtasks: 10 GB at −30 min rising 2 GB/h → slope
        // 2e9 / 3600 = 555 555.6 bytes/s; now 10 GB + 2 GB × 0.5 h = 11 GB; per hour
        // 2 / 11 = 0.1818; 31 samples over 1800 s, every step a rise (ratio 1).
        // TTL: 11 GB ÷ 2 GB/h = 5.5 h → 6 h. Keys: 2 × 1 M/h = 555.6 keys/s.
        let snap = rising_live_data(job()).build();
        let r = report(&snap, "score");
        assert_eq!((r.outcome, r.finding), (Outcome::Hit, Some(Finding::StateGrowth)), "{}", r.detail);
        let StateGrowthFact::Grows { growth: g, keys_per_s, .. } = sg(&r.detail) else { panic!("{:?}", r.detail) };
        assert_eq!((g.source, g.samples, g.rising_ratio, g.only_grows), (SizeSource::LiveData, 31, 1.0, true));
        assert_close(g.bytes_per_s, 2.0 * GB / 3600.0, 1e-3);
        assert_close(g.bytes_now, 11.0 * GB, 1.0);
        assert_close(g.per_hour_ratio, 2.0 / 11.0, 1e-9);
        assert_close(keys_per_s.unwrap(), 2e6 / 3600.0, 1e-6);
        let Fact::StateGrowth(StateGrowthFact::Ttl { ttl_hours, .. }) = &r.fix[0] else { panic!("{:?}", r.fix) };
        assert_eq!(*ttl_hours, 6.0);
        assert_eq!(r.fix[1], Fact::StateGrowth(StateGrowthFact::CompactionFilter));
        assert!(matches!(sg(&r.not_the_fix[0]), StateGrowthFact::NotMoreMemory { .. }));
        let size = evidence(&r.evidence, "rocksdb estimate_live_data_size");
        assert_eq!((size.subject.as_str(), size.value, size.unit.as_str()), ("stateful-score", 11e9, "bytes"));
        let rate = evidence(&r.evidence, "rocksdb estimate_live_data_size growth");
        // 555 555.6 to 4 significant digits.
        assert_eq!((rate.value, rate.unit.as_str()), (555_600.0, "bytes/s"));
    }

    #[test]
    fn without_backpressure_state_that_only_grows_ends_the_summary_with_the_ttl_as_advice() {
        // Nothing red; score's RocksDB live data as above: 11 GB now, +2 GB/h → TTL 6 h.
        let calm = || {
            job()
                .all_subtasks("src", 0.05, 0.0, 0.95, None)
                .all_subtasks("score", 0.3, 0.0, 0.7, 1000.0)
                .all_subtasks("sink", 0.1, 0.0, 0.9, 1000.0)
        };
        let v = verdict(&rising_live_data(calm()).build());
        assert_eq!((v.status.as_str(), v.finding.as_str()), ("no_backpressure", "none"));
        assert!(v.culprit.is_none());
        assert!(
            v.summary.ends_with("But stateful-score's state only grows: 2.0 GB/h at 11.0 GB now; give it a TTL before its checkpoints and restores outgrow their time."),
            "{}",
            v.summary
        );
        assert!(v.advice.iter().any(|a| a.contains("6 h")), "{:?}", v.advice);
        // A flat state says nothing.
        let flat = calm()
            .rocksdb(RocksDbSubtask { live_data_bytes: line(-1800, 0, 60, 5.0 * GB, 0.0), ..rocks("score", 0) })
            .build();
        assert!(verdict(&flat).summary.ends_with("is 30% busy."), "{}", verdict(&flat).summary);
    }

    #[test]
    fn in_the_runbook_state_growth_comes_after_a_clear_state_backend_and_skips_checkpoints() {
        let v = verdict(&rising_live_data(job()).build());
        assert_eq!(v.finding, Finding::StateGrowth);
        let at = |s: StepName| v.steps.iter().find(|x| x.step == s).map(|x| x.outcome);
        assert_eq!(at(StepName::StateBackend), Some(Outcome::Clear));
        assert_eq!(at(StepName::StateGrowth), Some(Outcome::Hit));
        assert_eq!(at(StepName::Checkpoints), Some(Outcome::Skipped));
    }

    #[test]
    fn a_sawtooth_state_that_is_cleaned_up_is_not_growing() {
        // Per subtask: 5 GB, +0.2 GB a minute for 9 min, then back to 5 GB (compaction drops
        // expired entries), three times over 30 min. 27 of 30 steps rise (90 % by count),
        // but by size it rose 3 × 1.8 GB and fell 3 × 1.8 GB: 50 % upward < 90 %.
        let saw: Vec<_> = (0..=30).map(|i| (t(-1800 + 60 * i), 5.0 * GB + (i % 10) as f64 * 0.2 * GB)).collect();
        let b =
            (0..2).fold(job(), |b, i| b.rocksdb(RocksDbSubtask { live_data_bytes: saw.clone(), ..rocks("score", i) }));
        let r = report(&b.build(), "score");
        assert_eq!((r.outcome, r.finding), (Outcome::Clear, None), "{}", r.detail);
        let StateGrowthFact::NotGrowing { growth: g, .. } = sg(&r.detail) else { panic!("{:?}", r.detail) };
        assert_close(g.rising_ratio, 0.5, 1e-9);
        assert!(!g.only_grows);
        assert!(r.advice.is_empty());
    }

    /// Job-level `lastCheckpointFullSize` from 10 GB rising 2 GB/h, every 60 s for 30 min
    /// (Flink's `CheckpointStatsTracker` gauges; names as in the Flink docs' "Checkpointing"
    /// metrics).
    fn growing_checkpoints(mut b: SnapshotBuilder) -> SnapshotBuilder {
        for (t_ms, bytes) in line(-1800, 0, 60, 10.0 * GB, 2.0 * GB / 3600.0) {
            b = b.checkpoint_point(CheckpointPoint { full_size_bytes: Some(bytes), t_ms, ..cp(0) });
        }
        b
    }

    #[test]
    fn growing_checkpoints_with_a_sink_as_the_culprit_are_advice_not_the_finding() {
        // The sink is busy and the culprit; the job's checkpoints grow 2 GB/h, but a sink
        // holds no state the graph shows (FORWARD input): advice only.
        let snap = growing_checkpoints(job().all_subtasks("sink", 0.97, 0.0, 0.03, 1000.0)).build();
        let r = report(&snap, "sink");
        assert_eq!((r.outcome, r.finding), (Outcome::Clear, None), "{}", r.detail);
        assert_eq!(*sg(&r.detail), StateGrowthFact::Stateless { vertex: "Sink: out".into() });
        let [Fact::StateGrowth(StateGrowthFact::GrowsElsewhere { culprit, growth })] = &r.advice[..] else {
            panic!("{:?}", r.advice)
        };
        assert_eq!((culprit.as_str(), growth.source), ("Sink: out", SizeSource::CheckpointFullSize));
        assert_close(growth.bytes_per_s, 2.0 * GB / 3600.0, 1e-3);
    }

    #[test]
    fn growing_checkpoints_of_the_only_stateful_vertex_are_its_state_growth() {
        // score is the only stateful vertex (the one keyed input): the job's state is its.
        let r = report(&growing_checkpoints(job()).build(), "score");
        assert_eq!(r.finding, Some(Finding::StateGrowth), "{}", r.detail);
        // No RocksDB: no compaction filter among the fixes.
        assert_eq!(r.fix.len(), 1);
        assert_eq!(evidence(&r.evidence, "lastCheckpointFullSize").subject, "job");
    }

    #[test]
    fn growing_checkpoints_with_another_stateful_vertex_are_advice() {
        // A second keyed vertex after score: whose state grows, the job's sizes do not tell.
        let snap = growing_checkpoints(job().edge("score", "sink", "HASH")).build();
        let r = report(&snap, "score");
        assert_eq!((r.outcome, r.finding), (Outcome::Clear, None), "{}", r.detail);
        assert_eq!(*sg(&r.detail), StateGrowthFact::WhoseUnknown { vertex: "stateful-score".into() });
        assert_eq!(r.advice.len(), 1);
    }

    #[test]
    fn a_stateful_culprit_without_any_size_is_missing() {
        let r = report(&job().build(), "score");
        assert_eq!(r.outcome, Outcome::NoData);
        assert_eq!(*sg(&r.detail), StateGrowthFact::NoSizes { vertex: "stateful-score".into() });
        assert_eq!(
            r.missing,
            [
                "lastCheckpointFullSize",
                "lastCheckpointSize",
                "state.backend.rocksdb.metrics.estimate-live-data-size",
                "state.backend.rocksdb.metrics.total-sst-files-size"
            ]
        );
    }

    #[test]
    fn a_stateless_culprit_without_sizes_is_clear() {
        let snap = job().edge("src", "score", "FORWARD").build();
        let snap = Snapshot { graph: None, ..snap };
        let r = on_vertex(&snap, "sink", run);
        assert_eq!(r.outcome, Outcome::Clear);
    }

    #[test]
    fn a_single_sample_is_never_growing() {
        let snap = job().checkpoint_point(CheckpointPoint { full_size_bytes: Some(10.0 * GB), ..cp(0) }).build();
        let r = report(&snap, "score");
        assert_eq!((r.outcome, r.finding), (Outcome::Clear, None));
        assert_eq!(
            *sg(&r.detail),
            StateGrowthFact::TooFewSamples { source: SizeSource::CheckpointFullSize, samples: 1, needed: 4 }
        );
    }

    #[test]
    fn one_bump_of_a_flat_state_is_not_growth() {
        // 10 GB for 30 min, one rise of 1 MB: all upward, but only 1 rise (< 3) and
        // a tiny slope.
        let mut b = job();
        for s in (-1800..=0).step_by(60) {
            let bytes = if s >= -600 { 10.0 * GB + 1e6 } else { 10.0 * GB };
            b = b.checkpoint_point(CheckpointPoint { full_size_bytes: Some(bytes), ..cp(s) });
        }
        let r = report(&b.build(), "score");
        assert_eq!((r.outcome, r.finding), (Outcome::Clear, None), "{}", r.detail);
    }

    /// Durations 10, 20, 30, 40 s at −180, −120, −60, 0 s: rising 10 s a minute.
    fn lengthening(timeout_s: i64) -> Snapshot {
        let mut b = job().checkpoint_config(10, timeout_s, false, None);
        for (i, s) in (-180..=0).step_by(60).enumerate() {
            b = b.checkpoint_point(CheckpointPoint { last_duration_ms: Some(10_000.0 * (i + 1) as f64), ..cp(s) });
        }
        b.build()
    }

    #[test]
    fn checkpoints_forty_seconds_long_growing_ten_seconds_a_minute_reach_a_two_minute_timeout_in_eight_minutes() {
        // Slope 10 000 ms / 60 s = 166.67 ms/s; (120 000 − 40 000) ms / 166.67 ms/s = 480 s,
        // within 3 × the 180 s fitted (540 s) and the 1 h horizon.
        let h = with_context(&lengthening(120), timeout_hazard).expect("a hazard");
        assert_eq!(
            (h.kind, h.severity, h.time_to_timeout_seconds),
            (HazardKind::CheckpointTimeout, Severity::Warning, Some(480))
        );
        let StateGrowthFact::TimeoutAhead { duration_ms, growth_ms_per_s, timeout_ms, .. } = sg(&h.detail) else {
            panic!("{:?}", h.detail)
        };
        assert_eq!((*duration_ms, *timeout_ms), (40_000.0, 120_000));
        assert_close(*growth_ms_per_s, 10_000.0 / 60.0, 1e-9);
        // In the verdict, typed.
        let v = verdict(&lengthening(120));
        let h = v.hazards.iter().find(|h| h.kind == HazardKind::CheckpointTimeout).expect("in the verdict");
        assert_eq!(h.time_to_timeout_seconds, Some(480));
    }

    #[test]
    fn a_timeout_beyond_the_horizon_is_no_hazard() {
        // (3600 000 − 40 000) / 166.67 = 21 360 s > 1 h; (300 000 − 40 000) / 166.67 = 1560 s
        // > 3 × 180 s: too far beyond what was seen.
        assert!(with_context(&lengthening(300), timeout_hazard).is_none());
        assert!(with_context(&lengthening(3600), timeout_hazard).is_none());
    }
}
