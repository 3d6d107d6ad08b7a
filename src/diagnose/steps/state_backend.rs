//! Step `state_backend`: a stateful culprit with a struggling RocksDB.
//!
//! Applies when the culprit is stateful (keyed input, a stateful kind, or RocksDB metrics
//! exist for it). Hits on write stalls in the window: `is_write_stopped` > 0,
//! `actual_delayed_write_rate` > 0, a rising `stall_micros`, `compaction_pending` or
//! `mem_table_flush_pending` set in most samples, or pending compaction bytes growing
//! toward the soft limit where RocksDB starts delaying writes. `no_data` when the native
//! metrics are off. Before blaming the backend, a stalled watermark (finding
//! `watermark_stall`) is ruled out: it makes state and timers grow by itself.

use crate::collect::snapshot::RocksDbSubtask;
use crate::diagnose::signals::VertexSignals;
use crate::diagnose::{Context, StepReport, human_bytes, human_secs, pct, slope_per_s};
use crate::verdict::Finding;

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
    let t = &ctx.cfg.thresholds;
    let rocks: Vec<&RocksDbSubtask> = ctx.snapshot.rocksdb.iter().filter(|r| r.vertex_id == culprit.id).collect();
    if !culprit.is_stateful() && rocks.is_empty() {
        return StepReport::clear(format!(
            "{} is stateless as far as the metrics and the graph tell (no keyed input, no RocksDB metrics).",
            culprit.name
        ));
    }
    if let Some(report) = watermark_stall(ctx, culprit) {
        return report;
    }
    if rocks.is_empty() {
        let heap = ctx
            .snapshot
            .checkpoints
            .config
            .as_ref()
            .and_then(|c| c.state_backend.as_deref())
            .filter(|b| !b.to_ascii_lowercase().contains("rocksdb"));
        if let Some(backend) = heap {
            return StepReport::clear(format!("{} keeps its state in {backend}, not RocksDB.", culprit.name));
        }
        let mut r = StepReport::no_data(
            format!(
                "{} is stateful, but there are no RocksDB native metrics for it (off by default, or a heap state backend). To see write stalls, set: {}: true.",
                culprit.name,
                ROCKSDB_METRIC_OPTIONS.join(": true, ")
            ),
            ROCKSDB_METRIC_OPTIONS.iter().map(|s| s.to_string()).collect(),
        );
        r.evidence.clear();
        return r;
    }

    let max = |f: &dyn Fn(&RocksDbSubtask) -> Option<f64>| rocks.iter().filter_map(|r| f(r)).reduce(f64::max);
    let stopped = max(&|r| r.write_stopped_max);
    let delayed = max(&|r| r.delayed_write_rate_max);
    let stall = max(&|r| r.stall_micros_per_s);
    // "Persistently set" needs several samples; a single scrape shows a moment.
    let several = ctx.snapshot.samples_in_window.is_some_and(|n| n >= MIN_SAMPLES_FOR_PERSISTENCE);
    let compaction = max(&|r| r.compaction_pending_ratio).filter(|_| several);
    let flush = max(&|r| r.flush_pending_ratio).filter(|_| several);
    let pending_now = max(&|r| r.pending_compaction_bytes.last().map(|p| p.1));
    let pending_growth = max(&|r| slope_per_s(&r.pending_compaction_bytes));

    let mut signs: Vec<String> = Vec::new();
    let mut r = StepReport::hit(Finding::StateBackend, String::new());
    if let Some(v) = stopped.filter(|v| *v > 0.0) {
        signs.push("is_write_stopped reached 1".into());
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
        signs.push(format!("actual_delayed_write_rate up to {}/s", human_bytes(v)));
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
        signs.push(format!("writes stalled {:.0} ms of every second (stall_micros)", v / 1000.0));
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
        signs.push(format!("compaction_pending set in {} of samples", pct(v)));
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
        signs.push(format!("mem_table_flush_pending set in {} of samples", pct(v)));
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
    if let (Some(now), Some(growth)) = (pending_now, pending_growth) {
        let limit = t.rocksdb_soft_pending_compaction_bytes;
        let horizon_s = t.rocksdb_pending_compaction_horizon.as_ms() as f64 / 1000.0;
        if now >= limit || (growth > 0.0 && (limit - now) / growth <= horizon_s) {
            signs.push(format!(
                "pending compaction bytes at {} growing {}/s toward the {} soft limit",
                human_bytes(now),
                human_bytes(growth),
                human_bytes(limit)
            ));
            r.evidence.push(ctx.evidence(
                &culprit.name,
                "rocksdb estimate_pending_compaction_bytes",
                now,
                "bytes",
                Some(limit),
                "rocksdb_estimate_pending_compaction_bytes",
            ));
        }
    }
    if signs.is_empty() {
        return StepReport::clear(format!(
            "RocksDB of {} does not stall: is_write_stopped {}, actual_delayed_write_rate {}, stall_micros {}, compaction_pending {}, pending compaction bytes {}.",
            culprit.name,
            stopped.map(|v| format!("{v:.0}")).unwrap_or_else(|| "n/a".into()),
            delayed.map(|v| format!("{}/s", human_bytes(v))).unwrap_or_else(|| "n/a".into()),
            stall.map(|v| format!("{:.0} ms/s", v / 1000.0)).unwrap_or_else(|| "n/a".into()),
            compaction.map(pct).unwrap_or_else(|| "n/a".into()),
            pending_now.map(human_bytes).unwrap_or_else(|| "n/a".into())
        ));
    }
    r.detail = format!("RocksDB of {} stalls writes: {}.", culprit.name, signs.join(", "));
    r.cause.push(format!(
        "{} is stateful and its RocksDB cannot keep up with the writes: {}. Write stalls block the task thread, which shows upstream as backpressure.",
        culprit.name,
        signs.join(", ")
    ));
    r.fix.extend([
        "More background threads for flushes and compaction: state.backend.rocksdb.thread.num: 4 (or the number of cores the TaskManager can spare).".to_string(),
        "More memory for write buffers, so flushes keep pace: raise taskmanager.memory.managed.fraction (default 0.4) and state.backend.rocksdb.memory.write-buffer-ratio (default 0.5); with unmanaged memory, state.backend.rocksdb.writebuffer.size and state.backend.rocksdb.writebuffer.count.".to_string(),
        "A faster local disk for RocksDB: point state.backend.rocksdb.localdir at local SSD/NVMe, not network storage or the container's overlay filesystem.".to_string(),
        "Less state to write: a state TTL (StateTtlConfig, or table.exec.state.ttl in SQL) and incremental checkpoints (execution.checkpointing.incremental: true).".to_string(),
    ]);
    r.summary = Some(format!("{} is the culprit: its RocksDB state backend stalls writes.", culprit.name));
    r
}

/// A watermark that stopped advancing while records flow: state and timers grow, and the
/// state backend would be blamed wrongly.
fn watermark_stall(ctx: &Context, culprit: &VertexSignals) -> Option<StepReport> {
    let wm = ctx.snapshot.watermarks.iter().find(|w| w.vertex_id == culprit.id)?;
    let points: Vec<(i64, f64)> = wm.input_watermark.iter().copied().filter(|p| p.1.is_finite() && p.1 > 0.0).collect();
    let (first, last) = (points.first()?, points.last()?);
    let span_ms = last.0 - first.0;
    let stall_ms = ctx.cfg.thresholds.watermark_stall.as_ms();
    let flowing = culprit.throughput().is_some_and(|r| r > 0.0);
    if span_ms < stall_ms || last.1 > first.1 || !flowing {
        return None;
    }
    let behind_s = (ctx.snapshot.at_ms as f64 - last.1) / 1000.0;
    let mut r = StepReport::hit(
        Finding::WatermarkStall,
        format!(
            "The input watermark of {} has not advanced for {} while records flow: its state and timers grow; the state backend is not the cause.",
            culprit.name,
            human_secs(span_ms as f64 / 1000.0)
        ),
    );
    r.cause.push(format!(
        "{}'s input watermark is stuck (event time {} behind wall time, flat for {}), so windows and timers never fire and state only grows — often one idle input or source partition holds back the minimum.",
        culprit.name,
        human_secs(behind_s.max(0.0)),
        human_secs(span_ms as f64 / 1000.0)
    ));
    r.fix.push("Mark idle inputs idle: WatermarkStrategy.withIdleness(Duration.ofMinutes(1)) on the sources (SQL: table.exec.source.idle-timeout: 1 min), or fix the input that stopped (an empty partition, a stalled upstream).".into());
    r.not_the_fix.push("Tuning the state backend: the state grows because event time stands still.".into());
    r.evidence.push(ctx.evidence(&culprit.name, "currentInputWatermark lag", behind_s, "s", None, "input_watermark"));
    r.summary =
        Some(format!("{} is the culprit: its watermark is stuck, so its state and timers pile up.", culprit.name));
    Some(r)
}
