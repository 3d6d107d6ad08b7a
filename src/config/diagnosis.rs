//! `[diagnosis]`: the window and the runbook's thresholds.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Millis;

/// Diagnosis settings: the window and the runbook's thresholds.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct DiagnosisConfig {
    /// The period the verdict looks at, ending at `at`. Default 5m.
    pub window: Millis,
    /// How far back trends (checkpoints, lag) look. Default 1h.
    pub trend_lookback: Millis,
    /// Samples whose averaging span reaches back over the job's start, a restart or a
    /// rescale are left out: Flink reports every task 1000 ms/s busy right after submit,
    /// and busy, idle, backpressured time and the `*PerSecond` rates are ~60 s moving
    /// averages, so a change shows fully only a minute later. Default 75s (60 s of
    /// averaging, plus the tasks' deployment and one scrape).
    pub startup_exclusion: Millis,
    /// Resolution of trend series (the `step` of range queries). Default 5s.
    pub step: Millis,
    /// Shorten the window to the current backpressure episode (or calm) when it began
    /// inside the window, so averages describe the present state. Default true.
    pub episode_window: bool,
    /// The window is never shortened below this (nor below two periods of a recurring
    /// backpressure). Default 1m.
    pub min_window: Millis,
    /// Parallelism advice includes the capacity to drain the current backlog within this
    /// (the Flink autoscaler's `job.autoscaler.catch-up.duration`); 0 leaves the backlog
    /// out. Default 30m.
    pub catch_up: Millis,
    pub thresholds: Thresholds,
    /// Operator kind by vertex or operator name (as Flink shows it), overriding the kind
    /// read from the name: `aggregate`, `join`, `window`, `order_dependent`, `async_io`,
    /// `stateless`, `unknown`.
    pub operator_kinds: BTreeMap<String, OperatorKind>,
}

impl Default for DiagnosisConfig {
    fn default() -> Self {
        DiagnosisConfig {
            window: Millis::from_secs(300),
            trend_lookback: Millis::from_secs(3600),
            startup_exclusion: Millis::from_secs(75),
            step: Millis::from_secs(5),
            episode_window: true,
            min_window: Millis::from_secs(60),
            catch_up: Millis::from_secs(1800),
            thresholds: Thresholds::default(),
            operator_kinds: BTreeMap::new(),
        }
    }
}

impl DiagnosisConfig {
    pub(super) fn validate(&self, problems: &mut Vec<String>) {
        // Windows below a second hold no scrape (as for --window and the API's window=).
        let at_least = [
            ("diagnosis.window", self.window, 1000),
            ("diagnosis.trend_lookback", self.trend_lookback, 1000),
            ("diagnosis.step", self.step, 1),
            ("diagnosis.min_window", self.min_window, 1000),
        ];
        for (key, value, min_ms) in at_least {
            if value.0 < min_ms {
                problems.push(if min_ms == 1 {
                    format!("{key} must be longer than 0")
                } else {
                    format!("{key} must be at least 1s")
                });
            }
        }
        if self.trend_lookback < self.window {
            problems.push("diagnosis.trend_lookback must be at least diagnosis.window".into());
        }
        self.thresholds.validate(problems);
    }
}

/// What an operator does, as far as the fix for a hot key is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OperatorKind {
    /// Associative and commutative aggregate (sum, count, min, max): salting applies.
    Aggregate,
    /// A join: salting is wrong.
    Join,
    /// A window operator whose logic may depend on order.
    Window,
    /// Anything whose result depends on record order (rank, deduplicate, over windows).
    OrderDependent,
    /// Async I/O or lookup: throughput bounded by the service it calls.
    AsyncIo,
    /// No state.
    Stateless,
    /// Not known from the name.
    Unknown,
}

/// The runbook's thresholds. Ratios are in [0, 1].
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Thresholds {
    /// A vertex is backpressured when its max subtask backpressured ratio exceeds this
    /// (Flink UI: OK ≤ 0.10 < LOW ≤ 0.50 < HIGH). Default 0.10.
    pub backpressured_ratio: f64,
    /// A culprit candidate is busy by itself at max subtask busy ratio ≥ this. Default 0.5.
    pub busy_ratio: f64,
    /// A source is source-bound at max busy ≥ this while its lag grows. Default 0.9.
    pub source_busy_ratio: f64,
    /// The hottest subtask of a skewed vertex is at least this busy. Default 0.9.
    pub hot_subtask_busy_ratio: f64,
    /// …while the median of the other subtasks is at most this busy. Default 0.5.
    pub others_busy_median_ratio: f64,
    /// A hot key gives the hot subtask a records share ≥ this / parallelism. Default 2.0.
    pub hot_key_share_factor: f64,
    /// …and ≥ this × the records of the next busiest subtask. Default 1.5.
    pub hot_key_next_ratio: f64,
    /// Headroom hits at utilisation (mean busy ratio) ≥ this. Default 0.9.
    pub headroom_utilisation: f64,
    /// Vertices at utilisation ≥ this are near capacity. Default 0.8.
    pub near_capacity_utilisation: f64,
    /// A culprit stands out from the near-capacity vertices when its utilisation exceeds
    /// theirs by more than this. Default 0.1.
    pub stand_out_margin: f64,
    /// The utilisation parallelism advice aims for. Default 0.7.
    pub target_utilisation: f64,
    /// The recovery point has stopped advancing when the last completed checkpoint is
    /// older than this many intervals. Default 3.
    pub checkpoint_stalled_intervals: f64,
    /// A checkpoint is in trouble when its duration reaches this share of the timeout.
    /// Default 0.5.
    pub checkpoint_timeout_share: f64,
    /// Checkpoint timeout when Flink REST does not say (Flink's default). Default 10m.
    pub checkpoint_default_timeout: Millis,
    /// Checkpoint failures in the job's first minute are start-up noise. Default 60s.
    pub checkpoint_startup_grace: Millis,
    /// A RocksDB pending flag (compaction, flush) is persistent when set in this share of
    /// samples. Default 0.8.
    pub rocksdb_flag_persistent_ratio: f64,
    /// RocksDB `soft_pending_compaction_bytes_limit`, where it starts delaying writes,
    /// bytes. Default 64 GiB (RocksDB's default).
    pub rocksdb_soft_pending_compaction_bytes: f64,
    /// Growing pending compaction bytes matter when they would reach the soft limit
    /// within this. Default 1h.
    pub rocksdb_pending_compaction_horizon: Millis,
    /// Write-stall time per wall-clock second (from `stall_micros`) above which RocksDB
    /// stalls, ratio. Default 0 (any stall).
    pub rocksdb_stall_ratio: f64,
    /// State "only grows" when rises make up at least this share of its size's movement
    /// between consecutive samples over the trend lookback (the sum of the rises over the
    /// sum of rises and falls), and the least-squares slope is positive: a state cleaned up
    /// by a TTL or by windows firing falls as much as it rose.
    /// AWS names "unbounded state growth" (`lastCheckpointSize` rising) as a cause of
    /// failing checkpoints and backpressure (Managed Service for Apache Flink, "Monitoring:
    /// checkpoint size"). Default 0.9.
    pub state_growth_rising_ratio: f64,
    /// …over at least this many samples of the size, with at least this many less one
    /// rises: one sample is never growing. Default 4.
    pub state_growth_min_samples: u32,
    /// Step `failover`: this many restarts or more inside the window (the rises of
    /// `numRestarts`, else the exception history's entries in it) is a job failing over,
    /// which leads the verdict. Default 2: it failed again after recovering (Alibaba Cloud's
    /// recommended P0 alert for realtime compute is "≥ 1 failover per minute"; one restart
    /// alone is a warm-up, already left out of the window). One restart is enough when the
    /// job is restarting at the end of the window.
    pub failover_restarts: u32,
    /// …and growing by at least this share of its size per hour (the fit's slope × 1 h ÷
    /// the newest size), so one bump of a flat state is not growth. Default 0.01 (1 %/h).
    pub state_growth_min_per_hour_ratio: f64,
    /// Checkpoint durations growing (by the same rule) towards the checkpoint timeout
    /// (`execution.checkpointing.timeout`) are a warning hazard when, extrapolated
    /// linearly, they reach it within this: no further than the trend lookback looks
    /// back. Default 1h.
    pub checkpoint_timeout_horizon: Millis,
    /// …and over a span of at least this: the state of a job that has just started always
    /// grows from empty while it fills (its first keys, its first windows). Default 10m.
    pub state_growth_min_span: Millis,
    /// Data loss less than this far away leads the verdict (critical). Default 1h.
    pub retention_critical: Millis,
    /// Data loss less than this far away is reported as a warning. Default 24h.
    pub retention_warning: Millis,
    /// An async I/O culprit waits on its service when the TaskManager CPU load stays
    /// below this. Default 0.5.
    pub async_io_cpu_load: f64,
    /// A watermark that has not advanced for this long, while records flow, is stalled.
    /// Default 2m.
    pub watermark_stall: Millis,
    /// Step `sources`: one source reader reading more than this many times the median
    /// reader (of those holding a split) is partition skew. Default 3 (AWS's subtask-skew
    /// rule for Managed Service for Apache Flink: max over 3 × median).
    pub source_skew_factor: f64,
    /// Step `sources`: a reader whose `sourceIdleTime` is at least this share of the window
    /// has emitted nothing all window. Default 0.9.
    pub source_idle_share: f64,
    /// Step `sources`: the `maxAllowedWatermarkDrift` of the job's
    /// `withWatermarkAlignment(group, maxAllowedWatermarkDrift, updateInterval)`: a reader
    /// whose `watermarkAlignmentDrift` reaches it is paused by alignment. Default 20s (the
    /// example of Flink's "Generating Watermarks → Watermark alignment" docs); set it to the
    /// job's value.
    pub watermark_alignment_max_drift: Millis,
    /// Step `sources`: one of fetch lag and in-reader lag (emit − fetch) this many times the
    /// other says where records wait: before Flink, or inside the reader. Default 10 (an
    /// order of magnitude; culprit's own choice).
    pub fetch_emit_lag_factor: f64,
    /// In the time-resolved reading, a vertex that holds the job back in at least this share
    /// of the window's samples is a bottleneck (two such: it alternates). Default 0.2.
    pub timeline_holder_share: f64,
    /// The samples overrule the window averages when their bottleneck holds the job back
    /// this much more often than the vertex the averages point to. Default 0.1.
    pub timeline_share_margin: f64,
    /// Backpressure in at least this share of the samples is steady. Default 0.9.
    pub timeline_steady_share: f64,
    /// Without busy time (a reporter older than Flink 1.13), a candidate is the culprit when
    /// its input buffer pool usage (`inPoolUsage`) reaches this: records wait in front of
    /// it. Default 0.9.
    pub in_pool_full_ratio: f64,
    /// …and its output buffer pool usage (`outPoolUsage`) is at most this: nothing after it
    /// holds it back. Default 0.5.
    pub out_pool_low_ratio: f64,
    /// A TaskManager of the culprit under GC pressure spends at least this share of the
    /// window in garbage collection (`Status.JVM.GarbageCollector.*.Time` rate ÷ 1000).
    /// Anchor: Tencent Cloud Oceanus' "Full GC too long" alarm, GC over 30 % of a 5-minute
    /// window. Default 0.3.
    pub gc_time_share: f64,
    /// Heap used over heap max (`Status.JVM.Memory.Heap.Used / .Max`) that supports a GC
    /// finding. Anchor: AWS Managed Service for Apache Flink's heap memory utilization
    /// alarm at 85 %. Default 0.85.
    pub heap_used_ratio: f64,
    /// A container's working set (`container_memory_working_set_bytes`) at this share of
    /// its memory limit is at the limit: the next allocation is an OOM kill. Default 0.95.
    pub memory_limit_ratio: f64,
    /// Share of CFS periods a TaskManager's container is throttled in
    /// (`container_cpu_cfs_throttled_periods_total / container_cpu_cfs_periods_total`) above
    /// which its CPU quota limits it. Anchor: kubernetes-mixin's `CPUThrottlingHigh` alert
    /// (`cpuThrottlingPercent: 25`). Default 0.25.
    pub cpu_throttled_ratio: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            backpressured_ratio: 0.10,
            busy_ratio: 0.5,
            source_busy_ratio: 0.9,
            hot_subtask_busy_ratio: 0.9,
            others_busy_median_ratio: 0.5,
            hot_key_share_factor: 2.0,
            hot_key_next_ratio: 1.5,
            headroom_utilisation: 0.9,
            near_capacity_utilisation: 0.8,
            stand_out_margin: 0.1,
            target_utilisation: 0.7,
            checkpoint_stalled_intervals: 3.0,
            checkpoint_timeout_share: 0.5,
            checkpoint_default_timeout: Millis::from_secs(600),
            checkpoint_startup_grace: Millis::from_secs(60),
            rocksdb_flag_persistent_ratio: 0.8,
            rocksdb_soft_pending_compaction_bytes: 64.0 * 1024.0 * 1024.0 * 1024.0,
            rocksdb_pending_compaction_horizon: Millis::from_secs(3600),
            rocksdb_stall_ratio: 0.0,
            state_growth_rising_ratio: 0.9,
            state_growth_min_samples: 4,
            failover_restarts: 2,
            state_growth_min_per_hour_ratio: 0.01,
            checkpoint_timeout_horizon: Millis::from_secs(3600),
            state_growth_min_span: Millis::from_secs(600),
            retention_critical: Millis::from_secs(3600),
            retention_warning: Millis::from_secs(24 * 3600),
            async_io_cpu_load: 0.5,
            watermark_stall: Millis::from_secs(120),
            source_skew_factor: 3.0,
            source_idle_share: 0.9,
            watermark_alignment_max_drift: Millis::from_secs(20),
            fetch_emit_lag_factor: 10.0,
            timeline_holder_share: 0.2,
            timeline_share_margin: 0.1,
            timeline_steady_share: 0.9,
            in_pool_full_ratio: 0.9,
            out_pool_low_ratio: 0.5,
            gc_time_share: 0.3,
            heap_used_ratio: 0.85,
            memory_limit_ratio: 0.95,
            cpu_throttled_ratio: 0.25,
        }
    }
}

impl Thresholds {
    pub(super) fn validate(&self, problems: &mut Vec<String>) {
        let ratios = [
            ("backpressured_ratio", self.backpressured_ratio),
            ("busy_ratio", self.busy_ratio),
            ("source_busy_ratio", self.source_busy_ratio),
            ("hot_subtask_busy_ratio", self.hot_subtask_busy_ratio),
            ("others_busy_median_ratio", self.others_busy_median_ratio),
            ("headroom_utilisation", self.headroom_utilisation),
            ("near_capacity_utilisation", self.near_capacity_utilisation),
            ("stand_out_margin", self.stand_out_margin),
            ("checkpoint_timeout_share", self.checkpoint_timeout_share),
            ("rocksdb_flag_persistent_ratio", self.rocksdb_flag_persistent_ratio),
            ("rocksdb_stall_ratio", self.rocksdb_stall_ratio),
            ("state_growth_rising_ratio", self.state_growth_rising_ratio),
            ("state_growth_min_per_hour_ratio", self.state_growth_min_per_hour_ratio),
            ("async_io_cpu_load", self.async_io_cpu_load),
            ("timeline_holder_share", self.timeline_holder_share),
            ("timeline_share_margin", self.timeline_share_margin),
            ("timeline_steady_share", self.timeline_steady_share),
            ("in_pool_full_ratio", self.in_pool_full_ratio),
            ("out_pool_low_ratio", self.out_pool_low_ratio),
            ("gc_time_share", self.gc_time_share),
            ("heap_used_ratio", self.heap_used_ratio),
            ("memory_limit_ratio", self.memory_limit_ratio),
            ("cpu_throttled_ratio", self.cpu_throttled_ratio),
        ];
        for (key, v) in ratios {
            if !(0.0..=1.0).contains(&v) {
                problems.push(format!("diagnosis.thresholds.{key} = {v} is not a ratio in [0, 1]"));
            }
        }
        if !(self.target_utilisation > 0.0 && self.target_utilisation <= 1.0) {
            problems.push(format!(
                "diagnosis.thresholds.target_utilisation = {} must be in (0, 1]",
                self.target_utilisation
            ));
        }
        for (key, v) in [
            ("hot_key_share_factor", self.hot_key_share_factor),
            ("hot_key_next_ratio", self.hot_key_next_ratio),
            ("checkpoint_stalled_intervals", self.checkpoint_stalled_intervals),
            ("rocksdb_soft_pending_compaction_bytes", self.rocksdb_soft_pending_compaction_bytes),
        ] {
            if !(v > 0.0 && v.is_finite()) {
                problems.push(format!("diagnosis.thresholds.{key} = {v} must be a positive number"));
            }
        }
        if self.failover_restarts < 1 {
            problems.push("diagnosis.thresholds.failover_restarts must be at least 1".into());
        }
        if self.state_growth_min_samples < 2 {
            problems.push(
                "diagnosis.thresholds.state_growth_min_samples must be at least 2: one sample is never growing".into(),
            );
        }
        if self.retention_warning < self.retention_critical {
            problems.push("diagnosis.thresholds.retention_warning must be at least retention_critical".into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::*;

    #[test]
    fn every_out_of_range_value_is_reported_in_one_pass() {
        let err = Config::from_toml("[diagnosis.thresholds]\nbusy_ratio = 1.5\nbackpressured_ratio = -0.1\n", "c.toml")
            .unwrap_err();
        assert_eq!(err.problems.len(), 2, "{err}");
    }
}
