//! Step `state_backend`: a stateful culprit with a struggling RocksDB.
//!
//! Applies when the culprit is stateful (keyed input, a stateful kind, or RocksDB metrics
//! exist for it). Hits on write stalls in the window: `is_write_stopped` > 0,
//! `actual_delayed_write_rate` > 0, a rising `stall_micros`, `compaction_pending` or
//! `mem_table_flush_pending` set in most samples, or pending compaction bytes growing
//! toward the soft limit where RocksDB starts delaying writes. `no_data` when the native
//! metrics are off. Before blaming the backend, a stalled watermark (finding
//! `watermark_stall`) is ruled out: it makes state and timers grow by itself.

use crate::diagnose::signals::VertexSignals;
use crate::diagnose::{Context, StepReport, slope_per_s};
use crate::model::facts::state_backend::{StallSign, StateBackendFact, StateBackendFix};
use crate::model::snapshot::{RocksDbSubtask, Watermark};
use crate::model::verdict::Finding;

/// The options that enable the native metrics this step reads.
pub const ROCKSDB_METRIC_OPTIONS: [&str; 6] = [
    "state.backend.rocksdb.metrics.is-write-stopped",
    "state.backend.rocksdb.metrics.actual-delayed-write-rate",
    "state.backend.rocksdb.metrics.estimate-pending-compaction-bytes",
    "state.backend.rocksdb.metrics.compaction-pending",
    "state.backend.rocksdb.metrics.mem-table-flush-pending",
    "state.backend.rocksdb.metrics.stall-micros",
];

/// A flag is only "persistently" set when seen over at least this many samples.
pub const MIN_SAMPLES_FOR_PERSISTENCE: u32 = 3;

pub fn run(ctx: &Context, culprit: &VertexSignals) -> StepReport {
    let rocks: Vec<&RocksDbSubtask> = ctx.snapshot.rocksdb.iter().filter(|r| r.vertex_id == culprit.id).collect();
    if !culprit.is_stateful() && rocks.is_empty() {
        return StepReport::clear(StateBackendFact::Stateless { vertex: culprit.name.clone() });
    }
    if let Some(report) = watermark_stall(ctx, culprit) {
        return report;
    }
    if rocks.is_empty() {
        return without_rocksdb_metrics(ctx, culprit);
    }
    let readings = Readings::of(ctx, &rocks);
    let (signs, r) = stall_signs(ctx, culprit, &readings);
    if signs.is_empty() {
        return readings.clear_report(culprit);
    }
    stall_report(r, culprit, &signs)
}

/// A stateful culprit without RocksDB metrics: its state is on the heap (clear), or the
/// native metrics are off (`no_data`, with the options that turn them on).
fn without_rocksdb_metrics(ctx: &Context, culprit: &VertexSignals) -> StepReport {
    let heap = ctx
        .snapshot
        .checkpoints
        .config
        .as_ref()
        .and_then(|c| c.state_backend.as_deref())
        .filter(|b| !b.to_ascii_lowercase().contains("rocksdb"));
    if let Some(backend) = heap {
        return StepReport::clear(StateBackendFact::NotRocksDb {
            vertex: culprit.name.clone(),
            backend: backend.to_string(),
        });
    }
    let mut r = StepReport::no_data(
        StateBackendFact::NoNativeMetrics { vertex: culprit.name.clone(), options: &ROCKSDB_METRIC_OPTIONS },
        // One entry, not six: the verdict's `missing` list is read by a person.
        vec![format!(
            "RocksDB native metrics of {} (state.backend.rocksdb.metrics.{{{}}}: true)",
            culprit.name,
            ROCKSDB_METRIC_OPTIONS
                .iter()
                .map(|o| o.trim_start_matches("state.backend.rocksdb.metrics."))
                .collect::<Vec<_>>()
                .join(", ")
        )],
    );
    r.evidence.clear();
    r
}

/// The culprit's RocksDB readings over the window, the highest of its subtasks.
#[derive(Clone, Copy)]
struct Readings {
    stopped: Option<f64>,
    delayed: Option<f64>,
    stall: Option<f64>,
    compaction: Option<f64>,
    flush: Option<f64>,
    pending_now: Option<f64>,
    /// Pending compaction bytes `(now, growth per s)` of the subtask over, or heading for,
    /// the soft limit.
    pending_trouble: Option<(f64, f64)>,
    /// The soft limit of pending compaction bytes.
    limit: f64,
}

impl Readings {
    fn of(ctx: &Context, rocks: &[&RocksDbSubtask]) -> Readings {
        let t = &ctx.cfg.thresholds;
        let max = |f: &dyn Fn(&RocksDbSubtask) -> Option<f64>| rocks.iter().filter_map(|r| f(r)).reduce(f64::max);
        let stopped = max(&|r| r.write_stopped_max);
        let delayed = max(&|r| r.delayed_write_rate_max);
        let stall = max(&|r| r.stall_micros_per_s);
        // "Persistently set" needs several samples; a single scrape shows a moment.
        let several = ctx.snapshot.samples_in_window.is_some_and(|n| n >= MIN_SAMPLES_FOR_PERSISTENCE);
        let compaction = max(&|r| r.compaction_pending_ratio).filter(|_| several);
        let flush = max(&|r| r.flush_pending_ratio).filter(|_| several);
        // Judged per subtask: one instance's level with its own growth.
        let limit = t.rocksdb_soft_pending_compaction_bytes;
        let horizon_s = t.rocksdb_pending_compaction_horizon.as_ms() as f64 / 1000.0;
        let pending_now = max(&|r| r.pending_compaction_bytes.last().map(|p| p.1));
        let pending_trouble: Option<(f64, f64)> = rocks
            .iter()
            .filter_map(|r| {
                let now = r.pending_compaction_bytes.last().map(|p| p.1)?;
                let growth = slope_per_s(&r.pending_compaction_bytes).unwrap_or(0.0);
                (now >= limit || (growth > 0.0 && (limit - now) / growth <= horizon_s)).then_some((now, growth))
            })
            .max_by(|a, b| a.0.total_cmp(&b.0));
        Readings { stopped, delayed, stall, compaction, flush, pending_now, pending_trouble, limit }
    }

    /// No sign of a stall: the readings, for the record.
    fn clear_report(&self, culprit: &VertexSignals) -> StepReport {
        let Readings { stopped, delayed, stall, compaction, pending_now, .. } = *self;
        StepReport::clear(StateBackendFact::NoStall {
            vertex: culprit.name.clone(),
            write_stopped: stopped,
            delayed_write_bytes_per_s: delayed,
            stall_micros_per_s: stall,
            compaction_pending_ratio: compaction,
            pending_compaction_bytes: pending_now,
        })
    }
}

/// The signs of write stalls among `readings`, with a hit report carrying the evidence.
fn stall_signs(ctx: &Context, culprit: &VertexSignals, readings: &Readings) -> (Vec<StallSign>, StepReport) {
    let t = &ctx.cfg.thresholds;
    let Readings { stopped, delayed, stall, compaction, flush, pending_trouble, limit, .. } = *readings;
    let mut signs: Vec<StallSign> = Vec::new();
    let mut r = StepReport::hit(Finding::StateBackend, "");
    if let Some(v) = stopped.filter(|v| *v > 0.0) {
        signs.push(StallSign::WriteStopped);
        r.evidence.push(ctx.evidence(
            &culprit.name,
            "rocksdb is_write_stopped",
            v,
            "count",
            Some(0.0),
            "rocksdb_is_write_stopped",
        ));
    }
    if let Some(v) = delayed.filter(|v| *v > 0.0) {
        signs.push(StallSign::DelayedWrites { bytes_per_s: v });
        r.evidence.push(ctx.evidence(
            &culprit.name,
            "rocksdb actual_delayed_write_rate",
            v,
            "bytes/s",
            Some(0.0),
            "rocksdb_actual_delayed_write_rate",
        ));
    }
    if let Some(v) = stall.filter(|v| *v / 1e6 > t.rocksdb_stall_ratio) {
        signs.push(StallSign::Stalled { stall_micros_per_s: v });
        r.evidence.push(ctx.evidence(
            &culprit.name,
            "rocksdb stall_micros rate",
            v / 1e6,
            "ratio",
            Some(t.rocksdb_stall_ratio),
            "rocksdb_stall_micros",
        ));
    }
    if let Some(v) = compaction.filter(|v| *v >= t.rocksdb_flag_persistent_ratio) {
        signs.push(StallSign::CompactionPending { samples_ratio: v });
        r.evidence.push(ctx.evidence(
            &culprit.name,
            "rocksdb compaction_pending share",
            v,
            "ratio",
            Some(t.rocksdb_flag_persistent_ratio),
            "rocksdb_compaction_pending",
        ));
    }
    if let Some(v) = flush.filter(|v| *v >= t.rocksdb_flag_persistent_ratio) {
        signs.push(StallSign::FlushPending { samples_ratio: v });
        r.evidence.push(ctx.evidence(
            &culprit.name,
            "rocksdb mem_table_flush_pending share",
            v,
            "ratio",
            Some(t.rocksdb_flag_persistent_ratio),
            "rocksdb_mem_table_flush_pending",
        ));
    }
    // Pending compaction bytes matter when they are over, or heading for, the soft limit
    // within the horizon; growth far below it is normal compaction debt.
    if let Some((now, growth)) = pending_trouble {
        signs.push(StallSign::PendingCompaction { bytes: now, growth_bytes_per_s: growth, soft_limit_bytes: limit });
        r.evidence.push(ctx.evidence(
            &culprit.name,
            "rocksdb estimate_pending_compaction_bytes",
            now,
            "bytes",
            Some(limit),
            "rocksdb_estimate_pending_compaction_bytes",
        ));
    }
    (signs, r)
}

/// RocksDB stalls writes: the cause and the fixes.
fn stall_report(mut r: StepReport, culprit: &VertexSignals, signs: &[StallSign]) -> StepReport {
    r.detail = StateBackendFact::Stalls { vertex: culprit.name.clone(), signs: signs.to_vec() }.into();
    r.cause.push(StateBackendFact::StallCause { vertex: culprit.name.clone(), signs: signs.to_vec() });
    r.fix.extend(
        [
            StateBackendFix::MoreThreads,
            StateBackendFix::MoreWriteBuffers,
            StateBackendFix::FasterDisk,
            StateBackendFix::LessState,
        ]
        .map(StateBackendFact::Fix),
    );
    r.summary = Some(StateBackendFact::StallSummary { vertex: culprit.name.clone() }.into());
    r
}

/// A watermark that never arrived, or stopped advancing, while records flow: state and
/// timers grow, and the state backend would be blamed wrongly. The readings are states
/// ([`Watermark`]): `Long.MIN_VALUE` is "no watermark yet", never an event time 292 million
/// years ago; `Long.MAX_VALUE` is a finished input, never a stall.
fn watermark_stall(ctx: &Context, culprit: &VertexSignals) -> Option<StepReport> {
    let wm = ctx.snapshot.watermarks.iter().find(|w| w.vertex_id == culprit.id)?;
    let known: Vec<(i64, Watermark)> =
        wm.input_watermark.iter().copied().filter(|p| p.1 != Watermark::Unknown).collect();
    let last = *known.last()?;
    let flowing = culprit.throughput().is_some_and(|r| r > 0.0);
    let stall_ms = ctx.cfg.thresholds.watermark_stall.as_ms();
    match last.1 {
        Watermark::NoWatermark => {
            // Since the last reading that was not "no watermark" (or the first one).
            let since = known.iter().rev().find(|p| p.1 != Watermark::NoWatermark).map_or(known[0].0, |p| p.0);
            let span_ms = last.0 - since;
            (span_ms >= stall_ms && flowing).then(|| never_arrived(ctx, culprit, span_ms))
        }
        // Every input finished: windows fired at the final watermark; nothing is stuck.
        Watermark::InputFinished | Watermark::Unknown => None,
        Watermark::EventTime { ms } => {
            let since = known.iter().rev().find(|p| p.1 != last.1).map_or(known[0].0, |p| p.0);
            let span_ms = last.0 - since;
            (span_ms >= stall_ms && flowing).then(|| stuck(ctx, culprit, ms, span_ms))
        }
    }
}

/// The report of an input watermark flat at event time `wm_ms` for `span_ms`.
fn stuck(ctx: &Context, culprit: &VertexSignals, wm_ms: f64, span_ms: i64) -> StepReport {
    let behind_s = (ctx.snapshot.at_ms as f64 - wm_ms) / 1000.0;
    let flat_s = span_ms as f64 / 1000.0;
    let mut r = StepReport::hit(
        Finding::WatermarkStall,
        StateBackendFact::WatermarkStuck { vertex: culprit.name.clone(), flat_s },
    );
    r.cause.push(StateBackendFact::WatermarkBehind {
        vertex: culprit.name.clone(),
        behind_s: behind_s.max(0.0),
        flat_s,
    });
    r.fix.push(StateBackendFact::MarkIdleInputs);
    r.not_the_fix.push(StateBackendFact::NotTheStateBackend);
    r.evidence.push(ctx.evidence(&culprit.name, "currentInputWatermark lag", behind_s, "s", None, "input_watermark"));
    r.summary = Some(StateBackendFact::WatermarkSummary { vertex: culprit.name.clone() }.into());
    r
}

/// The report of an input watermark that has been `Long.MIN_VALUE` ("No Watermark") for
/// `span_ms`: one of the culprit's inputs never sent one. Its origin is upstream, in the
/// sources that feed it; the finding stays on the culprit, where the windows wait and the
/// state grows, and the fix names the sources.
fn never_arrived(ctx: &Context, culprit: &VertexSignals, span_ms: i64) -> StepReport {
    let for_s = span_ms as f64 / 1000.0;
    let sources: Vec<String> = ctx
        .signals
        .upstream_region(&culprit.id, |_| true)
        .into_iter()
        .filter(|v| ctx.signals.upstream(&v.id).is_empty())
        .map(|v| v.name.clone())
        .collect();
    let vertex = culprit.name.clone();
    let mut r =
        StepReport::hit(Finding::WatermarkStall, StateBackendFact::NoWatermark { vertex: vertex.clone(), for_s });
    r.cause.push(StateBackendFact::NoWatermarkCause { vertex: vertex.clone(), sources: sources.clone() });
    // The readers without a split that hold it (step `sources` reads them), by source.
    let (without_splits, split_fixes) = super::sources::without_splits_feeding(ctx, culprit);
    r.cause.extend(without_splits);
    r.fix.push(StateBackendFact::MarkIdleInputs);
    r.fix.push(StateBackendFact::SourceSubtasksToPartitions { sources });
    r.fix.extend(split_fixes);
    r.not_the_fix.push(StateBackendFact::NotTheStateBackend);
    // RocksDB's own stalls, if any, come from the state the unfired windows pile up.
    let rocks: Vec<&RocksDbSubtask> = ctx.snapshot.rocksdb.iter().filter(|x| x.vertex_id == culprit.id).collect();
    if !rocks.is_empty() {
        let (signs, _) = stall_signs(ctx, culprit, &Readings::of(ctx, &rocks));
        if !signs.is_empty() {
            r.not_the_fix.push(StateBackendFact::StallsAreASymptom { vertex: vertex.clone(), signs });
        }
    }
    let threshold_s = ctx.cfg.thresholds.watermark_stall.as_ms() as f64 / 1000.0;
    r.evidence.push(ctx.evidence(
        &vertex,
        "time at Long.MIN_VALUE (currentInputWatermark)",
        for_s,
        "s",
        Some(threshold_s),
        "input_watermark",
    ));
    r.summary = Some(StateBackendFact::NoWatermarkSummary { vertex }.into());
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::testkit::*;
    use crate::model::facts::Fact;
    use crate::model::verdict::Outcome;

    const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

    /// The state-backend fact a fact is, or a panic saying what it is instead.
    fn sb(f: &Fact) -> &StateBackendFact {
        match f {
            Fact::StateBackend(s) => s,
            other => panic!("not a state-backend fact: {other:?}"),
        }
    }

    /// The signs of write stalls a hit's detail names.
    fn signs(r: &StepReport) -> &[StallSign] {
        match sb(&r.detail) {
            StateBackendFact::Stalls { signs, .. } => signs,
            other => panic!("not a stall: {other:?}"),
        }
    }

    /// Source → stateful-score (ship `ship`) → sink; score 0.95 busy at 1000 records/s.
    fn job(ship: &str) -> SnapshotBuilder {
        SnapshotBuilder::new()
            .vertex("src", "Source: txn", 2)
            .vertex("score", "stateful-score", 2)
            .vertex("sink", "Sink: out", 2)
            .edge("src", "score", ship)
            .edge("score", "sink", "FORWARD")
            .all_subtasks("src", 0.0, 0.9, 0.1, None)
            .all_subtasks("score", 0.95, 0.0, 0.05, 1000.0)
            .all_subtasks("sink", 0.1, 0.0, 0.9, 1000.0)
    }

    fn report(snap: &crate::model::snapshot::Snapshot) -> StepReport {
        on_vertex(snap, "score", run)
    }

    #[test]
    fn a_stateless_culprit_is_clear() {
        let r = report(&job("FORWARD").build());
        assert_eq!((r.outcome, r.finding), (Outcome::Clear, None));
        assert_eq!(*sb(&r.detail), StateBackendFact::Stateless { vertex: "stateful-score".into() });
        assert!(r.detail.to_string().contains("stateless"), "{}", r.detail);
    }

    #[test]
    fn a_stateful_culprit_without_rocksdb_metrics_is_no_data_listing_the_options() {
        let r = report(&job("HASH").build());
        assert_eq!(r.outcome, Outcome::NoData);
        assert_eq!(
            r.missing,
            [
                "RocksDB native metrics of stateful-score (state.backend.rocksdb.metrics.{is-write-stopped, actual-delayed-write-rate, estimate-pending-compaction-bytes, compaction-pending, mem-table-flush-pending, stall-micros}: true)"
            ]
        );
        assert_eq!(
            *sb(&r.detail),
            StateBackendFact::NoNativeMetrics { vertex: "stateful-score".into(), options: &ROCKSDB_METRIC_OPTIONS }
        );
        assert!(r.detail.to_string().contains("state.backend.rocksdb.metrics.is-write-stopped: true"), "{}", r.detail);
    }

    #[test]
    fn a_heap_state_backend_from_the_checkpoint_config_is_clear() {
        let snap = job("HASH").checkpoint_config(10, 600, false, Some("HashMapStateBackend")).build();
        let r = report(&snap);
        assert_eq!(r.outcome, Outcome::Clear);
        assert_eq!(
            *sb(&r.detail),
            StateBackendFact::NotRocksDb { vertex: "stateful-score".into(), backend: "HashMapStateBackend".into() }
        );
        assert!(r.detail.to_string().contains("HashMapStateBackend"), "{}", r.detail);
    }

    #[test]
    fn a_rocksdb_backend_in_the_config_without_metrics_is_still_no_data() {
        let snap = job("HASH").checkpoint_config(10, 600, false, Some("EmbeddedRocksDBStateBackend")).build();
        assert_eq!(report(&snap).outcome, Outcome::NoData);
    }

    #[test]
    fn rocksdb_metrics_make_a_vertex_stateful_even_without_a_keyed_input() {
        // FORWARD input, unknown kind, but RocksDB reports a write stop for it.
        let snap = job("FORWARD").rocksdb(RocksDbSubtask { write_stopped_max: Some(1.0), ..rocks("score", 0) }).build();
        assert_eq!(report(&snap).finding, Some(Finding::StateBackend));
    }

    #[test]
    fn a_write_stop_is_a_hit() {
        let snap = job("HASH")
            .rocksdb(RocksDbSubtask { write_stopped_max: Some(0.0), ..rocks("score", 0) })
            .rocksdb(RocksDbSubtask { write_stopped_max: Some(1.0), ..rocks("score", 1) })
            .build();
        let r = report(&snap);
        assert_eq!((r.outcome, r.finding), (Outcome::Hit, Some(Finding::StateBackend)));
        assert_eq!(signs(&r), [StallSign::WriteStopped]);
        assert_eq!(
            *sb(&r.cause[0]),
            StateBackendFact::StallCause { vertex: "stateful-score".into(), signs: vec![StallSign::WriteStopped] }
        );
        assert!(r.detail.to_string().contains("is_write_stopped reached 1"), "{}", r.detail);
        assert_eq!(evidence(&r.evidence, "rocksdb is_write_stopped").value, 1.0);
        assert!(r.fix.contains(&StateBackendFact::Fix(StateBackendFix::MoreThreads).into()), "{:?}", r.fix);
        assert!(r.fix.iter().any(|f| f.to_string().contains("state.backend.rocksdb.thread.num")), "{:?}", r.fix);
    }

    #[test]
    fn a_delayed_write_rate_is_a_hit() {
        // 16 MiB/s = 16 777 216 bytes/s; shown as 16.8 MB/s.
        let snap = job("HASH")
            .rocksdb(RocksDbSubtask { delayed_write_rate_max: Some(16_777_216.0), ..rocks("score", 0) })
            .build();
        let r = report(&snap);
        assert_eq!(r.finding, Some(Finding::StateBackend));
        assert_eq!(signs(&r), [StallSign::DelayedWrites { bytes_per_s: 16_777_216.0 }]);
        assert!(r.detail.to_string().contains("actual_delayed_write_rate up to 16.8 MB/s"), "{}", r.detail);
        assert_close(evidence(&r.evidence, "rocksdb actual_delayed_write_rate").value, 16_780_000.0, 1.0);
    }

    #[test]
    fn rising_stall_micros_is_a_hit() {
        // 250 000 µs of stall per second = 250 ms/s = ratio 0.25 > 0.
        let snap =
            job("HASH").rocksdb(RocksDbSubtask { stall_micros_per_s: Some(250_000.0), ..rocks("score", 1) }).build();
        let r = report(&snap);
        assert_eq!(r.finding, Some(Finding::StateBackend));
        assert_eq!(signs(&r), [StallSign::Stalled { stall_micros_per_s: 250_000.0 }]);
        assert!(r.detail.to_string().contains("writes stalled 250 ms of every second"), "{}", r.detail);
        assert_close(evidence(&r.evidence, "rocksdb stall_micros rate").value, 0.25, 1e-12);
    }

    #[test]
    fn zero_stall_metrics_are_clear() {
        let snap = job("HASH")
            .rocksdb(RocksDbSubtask {
                write_stopped_max: Some(0.0),
                delayed_write_rate_max: Some(0.0),
                stall_micros_per_s: Some(0.0),
                compaction_pending_ratio: Some(0.0),
                flush_pending_ratio: Some(0.0),
                ..rocks("score", 0)
            })
            .build();
        let r = report(&snap);
        assert_eq!((r.outcome, r.finding), (Outcome::Clear, None));
    }

    #[test]
    fn pending_compaction_bytes_growing_far_below_the_soft_limit_are_clear() {
        // The real rocksdb-bound capture: pending compaction bytes grow ~1.3 MB/s. From
        // 20 MB over 300 s: now 20e6 + 300 × 1.3e6 = 410 MB. To the 64 GiB soft limit
        // (68 719 476 736 bytes): (68 719 476 736 − 410 000 000) / 1.3e6 ≈ 52 546 s
        // ≈ 14.6 h, beyond the 1 h horizon → normal compaction debt, not a stall.
        let snap = job("HASH")
            .rocksdb(RocksDbSubtask {
                write_stopped_max: Some(0.0),
                delayed_write_rate_max: Some(0.0),
                pending_compaction_bytes: line(-300, 0, 5, 20e6, 1.3e6),
                ..rocks("score", 0)
            })
            .build();
        let r = report(&snap);
        assert_eq!((r.outcome, r.finding), (Outcome::Clear, None));
        let StateBackendFact::NoStall { write_stopped, delayed_write_bytes_per_s, pending_compaction_bytes, .. } =
            sb(&r.detail)
        else {
            panic!("{:?}", r.detail)
        };
        assert_eq!((*write_stopped, *delayed_write_bytes_per_s), (Some(0.0), Some(0.0)));
        assert_close(pending_compaction_bytes.unwrap(), 410e6, 1.0);
        assert!(r.detail.to_string().contains("pending compaction bytes 410.0 MB"), "{}", r.detail);
    }

    #[test]
    fn pending_compaction_bytes_reaching_the_soft_limit_within_the_hour_are_a_hit() {
        // Now 64 GiB − 2e9 bytes, growing 1e6 bytes/s: (2e9) / 1e6 = 2000 s ≤ 3600 s.
        let now = 64.0 * GIB - 2e9;
        let snap = job("HASH")
            .rocksdb(RocksDbSubtask {
                pending_compaction_bytes: line(-300, 0, 5, now - 300.0 * 1e6, 1e6),
                ..rocks("score", 0)
            })
            .build();
        let r = report(&snap);
        assert_eq!(r.finding, Some(Finding::StateBackend));
        let e = evidence(&r.evidence, "rocksdb estimate_pending_compaction_bytes");
        assert_close(e.value, now, now * 1e-3);
        assert_close(e.threshold.unwrap(), 64.0 * GIB, 1.0);
        let [StallSign::PendingCompaction { bytes, growth_bytes_per_s, soft_limit_bytes }] = signs(&r) else {
            panic!("{:?}", r.detail)
        };
        assert_close(*bytes, now, now * 1e-3);
        assert_close(*growth_bytes_per_s, 1e6, 1.0);
        assert_eq!(*soft_limit_bytes, 64.0 * GIB);
    }

    #[test]
    fn pending_compaction_bytes_are_judged_per_subtask_not_by_mixing_subtasks() {
        // Subtask 0: 60 GiB, flat (never reaches 64 GiB). Subtask 1: 601 MB growing 2 MB/s:
        // (68 719 476 736 − 601 000 000) / 2e6 ≈ 34 059 s ≈ 9.5 h > 1 h. Neither stalls
        // within the horizon. Mixed: (64 GiB − 60 GiB) / 2e6 = 4 294 967 296 / 2e6 ≈ 2147 s
        // ≤ 3600 s — a hit no RocksDB instance justifies (the soft limit is per instance).
        let snap = job("HASH")
            .rocksdb(RocksDbSubtask {
                pending_compaction_bytes: line(-300, 0, 5, 60.0 * GIB, 0.0),
                ..rocks("score", 0)
            })
            .rocksdb(RocksDbSubtask { pending_compaction_bytes: line(-300, 0, 5, 1e6, 2e6), ..rocks("score", 1) })
            .build();
        assert_eq!(report(&snap).outcome, Outcome::Clear);
    }

    #[test]
    fn a_persistently_set_compaction_pending_flag_is_a_hit() {
        // Set in 90 % of 60 samples ≥ 80 %.
        let snap =
            job("HASH").rocksdb(RocksDbSubtask { compaction_pending_ratio: Some(0.9), ..rocks("score", 0) }).build();
        let r = report(&snap);
        assert_eq!(r.finding, Some(Finding::StateBackend));
        assert_eq!(signs(&r), [StallSign::CompactionPending { samples_ratio: 0.9 }]);
        assert!(r.detail.to_string().contains("compaction_pending set in 90% of samples"), "{}", r.detail);
    }

    #[test]
    fn a_flush_pending_flag_set_in_fewer_than_most_samples_is_clear() {
        // 0.5 < 0.8.
        let snap = job("HASH").rocksdb(RocksDbSubtask { flush_pending_ratio: Some(0.5), ..rocks("score", 0) }).build();
        assert_eq!(report(&snap).outcome, Outcome::Clear);
    }

    #[test]
    fn a_pending_flag_in_a_single_scrape_is_not_persistent() {
        // One sample with both flags set: a moment, not a persistent state.
        let snap = job("HASH")
            .samples_in_window(Some(1))
            .rocksdb(RocksDbSubtask {
                compaction_pending_ratio: Some(1.0),
                flush_pending_ratio: Some(1.0),
                write_stopped_max: Some(0.0),
                ..rocks("score", 0)
            })
            .build();
        let r = report(&snap);
        assert_eq!((r.outcome, r.finding), (Outcome::Clear, None));
    }

    #[test]
    fn a_watermark_flat_for_longer_than_the_threshold_while_records_flow_is_a_watermark_stall() {
        // Input watermark stuck at 10 min before `at` for the whole 300 s window (≥ 120 s),
        // records flow at 2 × 1000 records/s: event time stands still, 600 s behind.
        let stuck = t(-600) as f64;
        let snap = job("HASH")
            .rocksdb(RocksDbSubtask { write_stopped_max: Some(1.0), ..rocks("score", 0) })
            .watermark("score", line(-300, 0, 5, stuck, 0.0))
            .build();
        let r = report(&snap);
        // It wins over the RocksDB write stop: blaming the backend would be wrong.
        assert_eq!(r.finding, Some(Finding::WatermarkStall));
        assert_close(evidence(&r.evidence, "currentInputWatermark lag").value, 600.0, 1e-9);
        // 300 s reads as "5 min".
        assert_eq!(*sb(&r.detail), StateBackendFact::WatermarkStuck { vertex: "stateful-score".into(), flat_s: 300.0 });
        let StateBackendFact::WatermarkBehind { behind_s, flat_s, .. } = *sb(&r.cause[0]) else {
            panic!("{:?}", r.cause)
        };
        assert_close(behind_s, 600.0, 1e-9);
        assert_eq!(flat_s, 300.0);
        assert!(r.detail.to_string().contains("has not advanced for 5 min"), "{}", r.detail);
        assert_eq!(*sb(&r.fix[0]), StateBackendFact::MarkIdleInputs);
        assert!(r.fix[0].to_string().contains("withIdleness"), "{:?}", r.fix);
    }

    #[test]
    fn a_watermark_flat_for_less_than_the_threshold_is_no_stall() {
        // Flat for 100 s < 120 s.
        let stuck = t(-600) as f64;
        let snap = job("HASH").watermark("score", line(-100, 0, 5, stuck, 0.0)).build();
        assert_eq!(report(&snap).outcome, Outcome::NoData);
    }

    #[test]
    fn an_advancing_watermark_is_no_stall() {
        // Advancing 1 s per s.
        let snap = job("HASH").watermark("score", line(-300, 0, 5, t(-310) as f64, 1000.0)).build();
        assert_ne!(report(&snap).finding, Some(Finding::WatermarkStall));
    }

    #[test]
    fn an_input_watermark_at_long_min_for_the_whole_window_is_a_watermark_that_never_arrived() {
        // Long.MIN_VALUE (−9.223372036854776e18, what the reporter writes) for the 300 s
        // window (≥ the 120 s threshold) while 1000 records/s flow; RocksDB stalls too.
        let snap = job("HASH")
            .watermark("score", line(-300, 0, 5, -9.223372036854776e18, 0.0))
            .rocksdb(RocksDbSubtask { delayed_write_rate_max: Some(16e6), ..rocks("score", 0) })
            .build();
        let r = report(&snap);
        assert_eq!(r.finding, Some(Finding::WatermarkStall));
        assert_eq!(*sb(&r.detail), StateBackendFact::NoWatermark { vertex: "stateful-score".into(), for_s: 300.0 });
        assert!(r.fix.iter().any(|f| *sb(f) == StateBackendFact::MarkIdleInputs));
        assert!(r.fix.iter().any(|f| *sb(f)
            == StateBackendFact::SourceSubtasksToPartitions { sources: vec!["Source: txn".into()] }));
        // No RocksDB fix; its stalls are named as a symptom.
        assert!(!r.fix.iter().any(|f| matches!(sb(f), StateBackendFact::Fix(_))));
        assert!(r.not_the_fix.iter().any(|f| matches!(sb(f), StateBackendFact::StallsAreASymptom { .. })));
        // The evidence is how long it has been so, never the sentinel itself.
        assert_close(evidence(&r.evidence, "time at Long.MIN_VALUE (currentInputWatermark)").value, 300.0, 1e-9);
        assert!(r.evidence.iter().all(|e| e.value.abs() < 1e15));
    }

    #[test]
    fn a_long_min_watermark_for_less_than_the_threshold_is_no_stall_and_no_event_time() {
        // 100 s of "no watermark" (< 120 s): a job just started; nothing is stuck yet.
        let snap = job("HASH").watermark("score", line(-100, 0, 5, i64::MIN as f64, 0.0)).build();
        assert_ne!(report(&snap).finding, Some(Finding::WatermarkStall));
    }

    #[test]
    fn a_watermark_at_long_max_is_a_finished_input_and_no_stall() {
        // Long.MAX_VALUE (the final watermark) flat for 300 s: the input finished, the
        // windows fired; not "stuck 292 million years ahead".
        let snap = job("HASH").watermark("score", line(-300, 0, 5, 9.223372036854776e18, 0.0)).build();
        let w = &snap.watermarks[0].input_watermark;
        assert!(w.iter().all(|p| p.1 == Watermark::InputFinished));
        assert_ne!(report(&snap).finding, Some(Finding::WatermarkStall));
    }

    #[test]
    fn a_watermark_that_advanced_and_then_fell_back_to_long_min_counts_from_the_fall() {
        // Event time advancing until −200 s, then Long.MIN_VALUE (a restart resets the
        // gauge): "no watermark" for 200 s ≥ 120 s.
        let mut points = line(-300, -205, 5, t(-310) as f64, 1000.0);
        points.extend(line(-200, 0, 5, i64::MIN as f64, 0.0));
        let snap = job("HASH").watermark("score", points).build();
        let r = report(&snap);
        // From the last event-time reading at −205 s to 0: 205 s.
        assert_eq!(*sb(&r.detail), StateBackendFact::NoWatermark { vertex: "stateful-score".into(), for_s: 205.0 });
    }

    #[test]
    fn a_flat_watermark_without_records_flowing_is_no_stall() {
        let snap = job("HASH")
            .all_subtasks("score", 0.95, 0.0, 0.05, 0.0)
            .watermark("score", line(-300, 0, 5, t(-600) as f64, 0.0))
            .build();
        assert_ne!(report(&snap).finding, Some(Finding::WatermarkStall));
    }

    #[test]
    fn a_watermark_that_stopped_advancing_inside_the_window_is_a_stall() {
        // Advancing 1 s/s from −300 s to −200 s, then flat for 200 s ≥ 120 s while records
        // flow: "has not advanced for this long" (diagnosis.thresholds.watermark_stall).
        let mut points = line(-300, -200, 5, t(-900) as f64, 1000.0);
        let stuck = points.last().unwrap().1;
        points.extend(line(-195, 0, 5, stuck, 0.0));
        let snap = job("HASH").watermark("score", points).build();
        assert_eq!(report(&snap).finding, Some(Finding::WatermarkStall));
    }
}
