//! The time-resolved reading: window averages hide a bottleneck that comes and goes, so
//! every sample of the window is classified on its own — which vertex held the job back at
//! that evaluation step, by the rules of `locate` applied to that step's values (max over
//! subtasks of Flink's ~60 s busy and backpressured averages).
//!
//! From the classified samples: each vertex's share of the time as the bottleneck and as
//! backpressured; whether the backpressure recurs with a period, and whether that period
//! is the checkpoints' (a sink flushing in `snapshotState`, a slow synchronous checkpoint
//! phase); whether the bottleneck alternates between vertices. `locate` decides with these
//! shares when the averages disagree with them ([`refine_target`]), so the finding does not
//! depend on where `at` falls within one period.
//!
//! Pure.

use std::collections::BTreeMap;

use crate::config::DiagnosisConfig;
use crate::diagnose::plan::period_of;
use crate::diagnose::signals::JobSignals;
use crate::model::snapshot::Snapshot;
use crate::model::verdict::{Pattern, Timeline, TimelineVertex};

/// What held the job back at one sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    /// This vertex (index into the signals' vertices) was the bottleneck.
    Vertex(usize),
    /// The backpressure stopped at an exchange whose receiver was not busy.
    Network,
    /// Nothing was backpressured.
    Calm,
    /// The metrics of that sample do not decide.
    Unknown,
}

/// The window read sample by sample.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Reading {
    /// Evaluation times in the window, Unix ms.
    pub steps: Vec<i64>,
    pub holders: Vec<Holder>,
    /// Per vertex (signals order): max busy and backpressured per step (None: unknown).
    pub busy: Vec<Vec<Option<f64>>>,
    pub backpressured: Vec<Vec<Option<f64>>>,
    /// Samples in which each vertex was the bottleneck, and was backpressured.
    pub bottleneck_count: Vec<usize>,
    pub backpressured_count: Vec<usize>,
    /// Spacing of the recurring backpressure, ms, when it recurs regularly.
    pub period_ms: Option<i64>,
    /// Median spacing of checkpoint completions around the window, ms.
    pub checkpoint_spacing_ms: Option<i64>,
    /// The period is the checkpoints' (within a quarter).
    pub with_checkpoints: bool,
}

impl Reading {
    /// Samples classified.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    fn share(&self, n: usize) -> f64 {
        if self.steps.is_empty() { 0.0 } else { n as f64 / self.steps.len() as f64 }
    }

    /// Share of samples in which vertex `i` was the bottleneck.
    pub fn bottleneck_share(&self, i: usize) -> f64 {
        self.share(self.bottleneck_count.get(i).copied().unwrap_or(0))
    }

    /// Share of samples in which vertex `i` was backpressured.
    pub fn backpressured_share(&self, i: usize) -> f64 {
        self.share(self.backpressured_count.get(i).copied().unwrap_or(0))
    }

    /// Share of samples of one kind of holder.
    pub fn share_of(&self, holder: Holder) -> f64 {
        self.share(self.holders.iter().filter(|h| **h == holder).count())
    }

    /// Vertices that held the job back, by share, largest first (ties: graph order).
    pub fn ranked(&self) -> Vec<(usize, f64)> {
        let mut v: Vec<(usize, f64)> = (0..self.bottleneck_count.len())
            .filter(|i| self.bottleneck_count[*i] > 0)
            .map(|i| (i, self.bottleneck_share(i)))
            .collect();
        v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        v
    }

    /// The vertices holding the job back at least `min_share` of the time.
    pub fn holders_over(&self, min_share: f64) -> Vec<(usize, f64)> {
        self.ranked().into_iter().filter(|(_, s)| *s >= min_share).collect()
    }

    /// Max and min of vertex `i`'s busy ratio over the samples where it held the job
    /// back, and its max busy over the other samples.
    pub fn busy_when_holding(&self, i: usize) -> (Option<f64>, Option<f64>) {
        let mut holding: Option<f64> = None;
        let mut other: Option<f64> = None;
        for (k, h) in self.holders.iter().enumerate() {
            let Some(b) = self.busy.get(i).and_then(|s| s[k]) else { continue };
            let slot = if *h == Holder::Vertex(i) { &mut holding } else { &mut other };
            *slot = Some(slot.map_or(b, |x: f64| if *h == Holder::Vertex(i) { x.max(b) } else { x.min(b) }));
        }
        (holding, other)
    }

    /// Max backpressured ratio of vertex `i` over the samples where `holder` held the job
    /// back.
    pub fn backpressured_during(&self, i: usize, holder: usize) -> Option<f64> {
        self.holders
            .iter()
            .enumerate()
            .filter(|(_, h)| **h == Holder::Vertex(holder))
            .filter_map(|(k, _)| self.backpressured.get(i).and_then(|s| s[k]))
            .reduce(f64::max)
    }

    /// How the backpressure behaved.
    pub fn pattern(&self, cfg: &DiagnosisConfig) -> Pattern {
        let calm = self.share_of(Holder::Calm);
        if calm >= 1.0 || self.is_empty() {
            return Pattern::Calm;
        }
        if self.holders_over(cfg.thresholds.timeline_holder_share).len() >= 2 {
            return Pattern::Alternating;
        }
        if self.period_ms.is_some() {
            return Pattern::Periodic;
        }
        if calm <= 1.0 - cfg.thresholds.timeline_steady_share { Pattern::Steady } else { Pattern::Intermittent }
    }

    /// The verdict's `timeline` field.
    pub fn view(&self, signals: &JobSignals, cfg: &DiagnosisConfig, step_ms: i64) -> Option<Timeline> {
        if self.is_empty() {
            return None;
        }
        let r = |v: f64| crate::model::verdict::round_sig(v);
        Some(Timeline {
            samples: self.len() as u32,
            step_seconds: step_ms as f64 / 1000.0,
            pattern: self.pattern(cfg),
            period_seconds: self.period_ms.map(|p| (p as f64 / 1000.0).round()),
            with_checkpoints: self.with_checkpoints,
            calm_share: r(self.share_of(Holder::Calm)),
            network_share: r(self.share_of(Holder::Network)),
            unknown_share: r(self.share_of(Holder::Unknown)),
            vertices: signals
                .vertices
                .iter()
                .enumerate()
                .map(|(i, v)| TimelineVertex {
                    id: v.id.clone(),
                    name: v.name.clone(),
                    bottleneck_share: r(self.bottleneck_share(i)),
                    backpressured_share: r(self.backpressured_share(i)),
                })
                .collect(),
        })
    }
}

fn finite(v: f64) -> Option<f64> {
    v.is_finite().then_some(v.clamp(0.0, 1.0))
}

/// Reads the snapshot's per-step values sample by sample.
pub fn read(snapshot: &Snapshot, signals: &JobSignals, cfg: &DiagnosisConfig) -> Reading {
    let window = &snapshot.window;
    let by_id: BTreeMap<&str, &crate::model::snapshot::VertexTimeline> =
        snapshot.timeline.iter().map(|s| (s.vertex_id.as_str(), s)).collect();
    // Every series' timestamps in the window, ascending and once: a series adds only the
    // times not seen yet (series mostly share their steps; sorting them all together cost a
    // quarter of this reading).
    let mut steps: Vec<i64> = Vec::new();
    let mut times: Vec<i64> = Vec::new();
    for points in snapshot.timeline.iter().flat_map(|s| [&s.busy_max, &s.backpressured_max]) {
        times.clear();
        times.extend(points.iter().map(|p| p.0).filter(|t| *t > window.start_ms && *t <= window.end_ms));
        if !times.is_sorted() {
            times.sort_unstable();
        }
        times.dedup();
        union_into(&mut steps, &times);
    }
    if steps.is_empty() {
        return Reading::default();
    }
    // The value at each step: one walk over both ascending lists (a map per series cost
    // more than the rest of the diagnosis). Of equal timestamps the last counts.
    let at = |points: &[(i64, f64)]| -> Vec<Option<f64>> {
        let sorted;
        let points = if points.windows(2).all(|w| w[0].0 <= w[1].0) {
            points
        } else {
            let mut copy = points.to_vec();
            copy.sort_by_key(|p| p.0);
            sorted = copy;
            &sorted[..]
        };
        let mut j = 0;
        steps
            .iter()
            .map(|&t| {
                while j < points.len() && points[j].0 < t {
                    j += 1;
                }
                while j + 1 < points.len() && points[j + 1].0 == t {
                    j += 1;
                }
                points.get(j).filter(|p| p.0 == t).and_then(|p| finite(p.1))
            })
            .collect()
    };
    let n = signals.vertices.len();
    let mut busy = Vec::with_capacity(n);
    let mut backpressured = Vec::with_capacity(n);
    for v in &signals.vertices {
        match by_id.get(v.id.as_str()) {
            Some(s) => {
                busy.push(at(&s.busy_max));
                backpressured.push(at(&s.backpressured_max));
            }
            None => {
                busy.push(vec![None; steps.len()]);
                backpressured.push(vec![None; steps.len()]);
            }
        }
    }
    // Each vertex's upstream vertices by index, in one pass over the edges (looking each
    // edge's ends up per vertex scanned the edges per vertex and the vertices per edge).
    let index: BTreeMap<&str, usize> = signals.vertices.iter().enumerate().map(|(i, v)| (v.id.as_str(), i)).collect();
    let mut upstream: Vec<Vec<usize>> = vec![Vec::new(); n];
    for e in &signals.edges {
        if let (Some(&from), Some(&to)) = (index.get(e.from.as_str()), index.get(e.to.as_str())) {
            upstream[to].push(from);
        }
    }
    let t = &cfg.thresholds;
    let mut holders = Vec::with_capacity(steps.len());
    let mut bottleneck_count = vec![0; n];
    let mut backpressured_count = vec![0; n];
    for k in 0..steps.len() {
        let red: Vec<bool> = (0..n).map(|i| backpressured[i][k].is_some_and(|p| p > t.backpressured_ratio)).collect();
        for (i, r) in red.iter().enumerate() {
            backpressured_count[i] += usize::from(*r);
        }
        let h = classify(k, &red, &busy, &backpressured, &upstream, signals.graph_free, cfg);
        if let Holder::Vertex(i) = h {
            bottleneck_count[i] += 1;
        }
        holders.push(h);
    }
    let mut reading = Reading {
        steps,
        holders,
        busy,
        backpressured,
        bottleneck_count,
        backpressured_count,
        period_ms: None,
        checkpoint_spacing_ms: None,
        with_checkpoints: false,
    };
    periodicity(&mut reading, snapshot);
    reading
}

/// Makes `into` (ascending, no repeats) the union of itself and `more` (the same).
fn union_into(into: &mut Vec<i64>, more: &[i64]) {
    let mut i = 0;
    if more.iter().all(|t| {
        while i < into.len() && into[i] < *t {
            i += 1;
        }
        into.get(i) == Some(t)
    }) {
        return;
    }
    let mut merged = Vec::with_capacity(into.len() + more.len());
    let (mut a, mut b) = (into.iter().peekable(), more.iter().peekable());
    loop {
        let next = match (a.peek(), b.peek()) {
            (Some(&&x), Some(&&y)) if x < y => a.next(),
            (Some(&&x), Some(&&y)) if y < x => b.next(),
            (Some(_), Some(_)) => {
                b.next();
                a.next()
            }
            (Some(_), None) => a.next(),
            (None, Some(_)) => b.next(),
            (None, None) => break,
        };
        merged.extend(next);
    }
    *into = merged;
}

/// One sample: `locate`'s rules on that step's values.
fn classify(
    k: usize,
    red: &[bool],
    busy: &[Vec<Option<f64>>],
    backpressured: &[Vec<Option<f64>>],
    upstream: &[Vec<usize>],
    graph_free: bool,
    cfg: &DiagnosisConfig,
) -> Holder {
    let t = &cfg.thresholds;
    if backpressured.iter().all(|s| s[k].is_none()) {
        return Holder::Unknown;
    }
    if !red.iter().any(|r| *r) {
        return Holder::Calm;
    }
    // Vertices without any series over the window.
    let unseen: Vec<bool> =
        (0..red.len()).map(|i| busy[i].iter().chain(&backpressured[i]).all(Option::is_none)).collect();
    // (region size, busy, index) of each busy candidate.
    let mut best: Option<(usize, f64, usize)> = None;
    let mut network = false;
    let mut unknown = false;
    for i in 0..red.len() {
        if red[i] {
            continue;
        }
        if graph_free {
            if let Some(b) = busy[i][k].filter(|b| *b >= t.busy_ratio) {
                let c = (0, b, i);
                if best.is_none_or(|x| b > x.1) {
                    best = Some(c);
                }
            }
            continue;
        }
        if !upstream[i].iter().any(|u| red[*u]) {
            // Backpressure passes unseen through a vertex without series (as in `locate`):
            // a busy vertex after one, with red vertices before it, is a candidate.
            let through = upstream[i].iter().any(|u| unseen[*u]) && red_region(i, red, upstream, &unseen) > 0;
            if let (true, Some(_), Some(b)) = (through, backpressured[i][k], busy[i][k])
                && b >= t.busy_ratio
            {
                let region = red_region(i, red, upstream, &unseen);
                if best.is_none_or(|x| (region, b) > (x.0, x.1)) {
                    best = Some((region, b, i));
                }
            }
            continue;
        }
        match (backpressured[i][k], busy[i][k]) {
            (None, _) | (_, None) => unknown = true,
            (Some(_), Some(b)) if b >= t.busy_ratio => {
                let region = red_region(i, red, upstream, &unseen);
                if best.is_none_or(|x| (region, b) > (x.0, x.1)) {
                    best = Some((region, b, i));
                }
            }
            (Some(_), Some(_)) => network = true,
        }
    }
    match best {
        Some((_, _, i)) => Holder::Vertex(i),
        None if network => Holder::Network,
        None if unknown || graph_free => Holder::Unknown,
        None => Holder::Unknown,
    }
}

/// Red vertices upstream of `i` reachable through red vertices and vertices without series
/// (`unseen`).
fn red_region(i: usize, red: &[bool], upstream: &[Vec<usize>], unseen: &[bool]) -> usize {
    let mut seen = vec![false; red.len()];
    let pass = |u: &usize| red[*u] || unseen[*u];
    let mut stack: Vec<usize> = upstream[i].iter().copied().filter(pass).collect();
    let mut n = 0;
    while let Some(v) = stack.pop() {
        if std::mem::replace(&mut seen[v], true) {
            continue;
        }
        n += usize::from(red[v]);
        stack.extend(upstream[v].iter().copied().filter(pass));
    }
    n
}

/// Times at which backpressure began (a calm sample followed by a backpressured one).
pub fn onsets(holders: &[Holder], steps: &[i64]) -> Vec<i64> {
    let busy = |h: &Holder| !matches!(h, Holder::Calm | Holder::Unknown);
    holders.windows(2).zip(steps.windows(2)).filter(|(h, _)| !busy(&h[0]) && busy(&h[1])).map(|(_, t)| t[1]).collect()
}

/// Sets the period of the backpressure and whether it is the checkpoints'. With a single
/// spacing of onsets, a period equal to the checkpoints' spacing counts (two stalls, each
/// with a checkpoint).
fn periodicity(reading: &mut Reading, snapshot: &Snapshot) {
    let onsets = onsets(&reading.holders, &reading.steps);
    let mut completions: Vec<i64> = snapshot
        .checkpoints
        .series
        .iter()
        .filter(|p| p.t_ms <= snapshot.window.end_ms)
        .filter_map(|p| p.last_completed_at_ms)
        .filter(|t| *t > 0.0)
        .map(|t| t as i64)
        .collect();
    completions.sort_unstable();
    completions.dedup();
    // Completions during the window and the spacing before it, to know the interval.
    let span_start = snapshot.window.start_ms - (snapshot.window.len_ms());
    completions.retain(|c| *c > span_start);
    let mut spacings: Vec<i64> = completions.windows(2).map(|w| w[1] - w[0]).filter(|d| *d > 0).collect();
    spacings.sort_unstable();
    let ckpt = spacings.get(spacings.len() / 2).copied();
    reading.checkpoint_spacing_ms = ckpt;
    let close = |a: i64, b: i64| (a - b).abs() as f64 <= 0.25 * b as f64;
    let period = period_of(&onsets);
    let single = match onsets.as_slice() {
        [a, b] => Some(b - a),
        _ => None,
    };
    match (period, single, ckpt) {
        (Some(p), _, Some(c)) => {
            reading.period_ms = Some(p);
            reading.with_checkpoints = close(p, c);
        }
        (Some(p), _, None) => reading.period_ms = Some(p),
        (None, Some(p), Some(c)) if close(p, c) => {
            reading.period_ms = Some(p);
            reading.with_checkpoints = true;
        }
        _ => {}
    }
}

/// The vertex the samples say holds the job back, when the window averages say otherwise:
/// the vertex with the largest share of samples as the bottleneck, when that share is at
/// least `timeline_holder_share`, exceeds the share of samples pointing at an exchange,
/// and exceeds by `timeline_share_margin` the share of `averaged` (the culprit the averages
/// give, if any). `None` when the averages and the samples agree or the samples do not
/// decide.
pub fn refine_target(reading: &Reading, averaged: Option<usize>, cfg: &DiagnosisConfig) -> Option<usize> {
    let t = &cfg.thresholds;
    let (top, share) = reading.ranked().first().copied()?;
    if Some(top) == averaged || share < t.timeline_holder_share || share <= reading.share_of(Holder::Network) {
        return None;
    }
    let theirs = averaged.map_or(0.0, |a| reading.bottleneck_share(a));
    (share >= theirs + t.timeline_share_margin).then_some(top)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::testkit::*;
    use crate::model::snapshot::CheckpointPoint;

    #[test]
    fn the_union_of_ascending_times_keeps_each_time_once_in_order() {
        let mut steps = Vec::new();
        for more in [&[10, 20, 30][..], &[20, 30], &[], &[5, 25, 40], &[5, 10, 20, 25, 30, 40, 50]] {
            union_into(&mut steps, more);
        }
        assert_eq!(steps, vec![5, 10, 20, 25, 30, 40, 50]);
    }

    /// Source (red during stalls) → sink, sampled every 15 s over the 5 minutes before
    /// `at`: a stall of 4 samples every 8 (120 s), with checkpoints completing every 120 s.
    fn flushing_sink(phase: i64) -> SnapshotBuilder {
        let mut src = Vec::new();
        let mut sink = Vec::new();
        for k in 0..20 {
            let s = -300 + 15 * (k + 1);
            let stalled = (k + phase).rem_euclid(8) < 4;
            src.push((s, 0.3, if stalled { 0.55 } else { 0.0 }));
            sink.push((s, if stalled { 0.7 } else { 0.2 }, 0.0));
        }
        let mut b = SnapshotBuilder::new()
            .vertex("src", "Source: in", 2)
            .vertex("sink", "Sink: hbase", 2)
            .edge("src", "sink", "REBALANCE")
            .all_subtasks("src", 0.3, 0.25, 0.45, None)
            .all_subtasks("sink", 0.41, 0.0, 0.59, 500.0)
            .timeline("src", &src)
            .timeline("sink", &sink);
        for c in [-600, -480, -360, -240, -120, 0] {
            b = b.checkpoint_point(CheckpointPoint { last_completed_at_ms: Some(t(c) as f64), ..cp(c) });
        }
        b
    }

    #[test]
    fn a_stall_that_recurs_with_the_checkpoints_is_periodic_and_names_the_vertex_busy_during_it() {
        // 20 samples, stalled when k mod 8 < 4: k = 0–3, 8–11, 16–19, 12 of 20 (60 %); the
        // sink holds the job back in those, the rest are calm. Onsets (calm → stalled) at
        // k = 8 and 16: 8 samples × 15 s = 120 s apart = the checkpoints' spacing.
        let snap = flushing_sink(0).build();
        let r = with_context(&snap, |ctx| read(ctx.snapshot, ctx.signals, ctx.cfg));
        assert_eq!(r.len(), 20);
        assert_close(r.bottleneck_share(1), 0.6, 1e-9);
        assert_close(r.backpressured_share(0), 0.6, 1e-9);
        assert_close(r.share_of(Holder::Calm), 0.4, 1e-9);
        assert_eq!(r.period_ms, Some(120_000));
        assert!(r.with_checkpoints);
        assert_eq!(r.pattern(&DiagnosisConfig::default()), Pattern::Periodic);
        // The averages say "network" (sink 0.41 < 0.5 busy); the samples say the sink.
        assert_eq!(refine_target(&r, None, &DiagnosisConfig::default()), Some(1));
        assert_eq!(r.busy_when_holding(1), (Some(0.7), Some(0.2)));
    }

    #[test]
    fn a_sink_flushing_on_checkpoints_is_the_culprit_whatever_the_phase_at_falls_in() {
        // Sweep the phase of the stalls over a whole period (8 samples = 120 s): the
        // averages say "network" every time (sink 0.41 < 0.5 busy, src 0.25 backpressured);
        // the samples say the sink, the sink step explains the flush.
        for phase in 0..8 {
            let v = crate::diagnose::testkit::verdict(&flushing_sink(phase).build());
            assert_eq!(
                (v.status, v.finding, v.culprit.as_ref().map(|c| c.vertex_id.as_str())),
                (crate::model::verdict::Status::CulpritFound, crate::model::verdict::Finding::Sink, Some("sink")),
                "phase {phase}: {}",
                v.summary
            );
            assert!(v.cause.contains("in phase with the checkpoints"), "phase {phase}: {}", v.cause);
            let tl = v.timeline.unwrap();
            assert_eq!((tl.pattern, tl.period_seconds, tl.with_checkpoints), (Pattern::Periodic, Some(120.0), true));
        }
    }

    #[test]
    fn a_bottleneck_that_moves_between_two_vertices_is_alternating_and_ranked_by_share() {
        // src → a → b; in 12 of 20 samples a is busy (b idle, src red), in 8 b is busy
        // (a red): a 60 %, b 40 %.
        let mut s = Vec::new();
        let mut a = Vec::new();
        let mut b = Vec::new();
        for k in 0..20 {
            let at = -300 + 15 * (k + 1);
            let a_holds = k % 5 < 3;
            s.push((at, 0.1, 0.8));
            a.push((at, if a_holds { 0.95 } else { 0.1 }, if a_holds { 0.0 } else { 0.8 }));
            b.push((at, if a_holds { 0.2 } else { 0.97 }, 0.0));
        }
        let snap = SnapshotBuilder::new()
            .vertex("src", "Source: s", 1)
            .vertex("a", "window-a", 1)
            .vertex("b", "window-b", 1)
            .edge("src", "a", "HASH")
            .edge("a", "b", "HASH")
            .all_subtasks("src", 0.1, 0.8, 0.1, None)
            .all_subtasks("a", 0.61, 0.32, 0.07, 100.0)
            .all_subtasks("b", 0.51, 0.0, 0.49, 100.0)
            .timeline("src", &s)
            .timeline("a", &a)
            .timeline("b", &b)
            .build();
        let r = with_context(&snap, |ctx| read(ctx.snapshot, ctx.signals, ctx.cfg));
        assert_eq!(r.ranked(), [(1, 0.6), (2, 0.4)]);
        assert_eq!(r.pattern(&DiagnosisConfig::default()), Pattern::Alternating);
    }

    #[test]
    fn in_the_samples_backpressure_passes_unseen_through_a_vertex_without_series() {
        // src red (0.9) in all 20 samples → a with no series at all → b busy 0.95, not red:
        // b holds the job back in 20 of 20 samples (share 1.0), as `locate` says.
        let s: Vec<(i64, f64, f64)> = (1..=20).map(|k| (-300 + 15 * k, 0.1, 0.9)).collect();
        let b: Vec<(i64, f64, f64)> = (1..=20).map(|k| (-300 + 15 * k, 0.95, 0.0)).collect();
        let snap = SnapshotBuilder::new()
            .vertex("src", "Source: s", 1)
            .vertex("a", "parse", 1)
            .vertex("b", "enrich", 1)
            .edge("src", "a", "FORWARD")
            .edge("a", "b", "HASH")
            .all_subtasks("src", 0.1, 0.9, 0.0, None)
            .all_subtasks("b", 0.95, 0.0, 0.05, 100.0)
            .timeline("src", &s)
            .timeline("b", &b)
            .build();
        let r = with_context(&snap, |ctx| read(ctx.snapshot, ctx.signals, ctx.cfg));
        assert_eq!(r.ranked(), [(2, 1.0)]);
    }

    #[test]
    fn a_steady_bottleneck_agrees_with_the_averages_and_changes_nothing() {
        let samples: Vec<(i64, f64, f64)> = (1..=20).map(|k| (-300 + 15 * k, 0.1, 0.9)).collect();
        let sink: Vec<(i64, f64, f64)> = (1..=20).map(|k| (-300 + 15 * k, 0.95, 0.0)).collect();
        let snap = SnapshotBuilder::new()
            .vertex("src", "Source: in", 1)
            .vertex("sink", "Sink: db", 1)
            .edge("src", "sink", "FORWARD")
            .all_subtasks("src", 0.1, 0.9, 0.0, None)
            .all_subtasks("sink", 0.95, 0.0, 0.05, 10.0)
            .timeline("src", &samples)
            .timeline("sink", &sink)
            .build();
        let r = with_context(&snap, |ctx| read(ctx.snapshot, ctx.signals, ctx.cfg));
        assert_eq!(r.pattern(&DiagnosisConfig::default()), Pattern::Steady);
        assert_eq!(refine_target(&r, Some(1), &DiagnosisConfig::default()), None);
    }
}
