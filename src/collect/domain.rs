//! Which values are possible, per metric, and the one place where every sample is held
//! to it: [`Screening`], a [`MetricSource`] in front of every other.
//!
//! A number outside its metric's domain is no value Flink writes: ±Inf, ±1e308 from a
//! broken proxy or store, a negative count or uptime, a busy time of 10⁹ ms per second. It
//! becomes unknown (NaN, as a value the reporter could not measure is) before any step or
//! sentence sees it, and one note says how many were left out, of which metric. So no
//! finding is built on such a value, and no sentence prints one.
//!
//! Flink's own "no value" sentinels (−1 for an uptime once the job stops, for a CPU load
//! the JVM cannot read; −Inf for Kafka's `records-lag-max` before the first fetch) become
//! unknown too, without a note: they are what the reporter says when it has nothing. NaN is
//! unknown as it is, and not counted. Sentinels that stand for a state the diagnosis reads
//! pass through exactly, for the collector to type: a watermark's `Long.MIN_VALUE` ("No
//! Watermark") and `Long.MAX_VALUE` (the input finished), read as
//! [`crate::model::snapshot::Watermark`]; the −1 of the checkpoint gauges before the
//! first completed checkpoint (Flink's `CheckpointStatsTracker`), read as
//! [`crate::model::snapshot::LastCheckpoint::NoneCompletedYet`]; an uptime of 0 (Flink's
//! `UpTimeGauge`: "not yet running or not up at the moment") is a possible value and is
//! typed by the collector too ([`crate::model::snapshot::JobRunning`]).

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::collect::collector::{MetricSource, QueryError};
use crate::collect::query::{Agg, MatchOp, OverTime, Query, QueryResult, ResultSeries};
use crate::model::catalog::MetricCatalog;

/// The largest magnitude any value may have: 2⁵³. Flink's counters are Java longs and a
/// float64 cannot count past 2⁵³ by ones; no rate, size or time a job reports comes near it
/// (2⁵³ ms is 285,000 years, 2⁵³ bytes 8 PiB). Beyond it a value is a broken store's, and
/// sums of such values overflow to infinity.
pub const MAX_MAGNITUDE: f64 = 9_007_199_254_740_992.0;

/// Slack above the top of a time-per-second or share a value may show from measuring and
/// averaging noise (Flink's busy time is 1000 − idle − backpressured, each measured apart).
pub const RATIO_SLACK: f64 = 0.05;
/// Slack below 0 of a time per second: rounding, 1 ms per second.
pub const RATIO_SLACK_BELOW_0: f64 = 0.001;

/// The earliest plausible epoch-millisecond timestamp a Flink job reports: 2014-01-01, the
/// year of Flink's first release.
pub const EARLIEST_TIMESTAMP_MS: f64 = 1_388_534_400_000.0;
/// How far a JobManager's clock may run ahead of the metric store's: a timestamp later than
/// its sample's time by more than this is impossible (1 h covers any NTP-less drift).
pub const MAX_CLOCK_AHEAD_MS: f64 = 3_600_000.0;

/// The values one metric can take.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Domain {
    /// What the values are, for the note (`0–1000 ms per second`).
    pub what: &'static str,
    pub bounds: Bounds,
    /// Values the reporter writes for "no value": unknown, without a note.
    pub sentinels: &'static [f64],
}

/// The range of a [`Domain`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bounds {
    /// `min ≤ v ≤ max`.
    Fixed { min: f64, max: f64 },
    /// An epoch-ms timestamp: not before [`EARLIEST_TIMESTAMP_MS`], not after its sample's
    /// time by more than [`MAX_CLOCK_AHEAD_MS`].
    TimestampMs,
    /// A watermark: an event time of magnitude at most [`MAX_MAGNITUDE`], or
    /// `Long.MIN_VALUE` / `Long.MAX_VALUE` (kept as exactly ±2⁶³, see
    /// [`crate::model::snapshot::Watermark::from_reported`]).
    Watermark,
}

/// Busy, idle and backpressured time: ms per second.
pub const MS_PER_S: Domain = Domain {
    what: "0–1000 ms per second",
    bounds: Bounds::Fixed { min: -1000.0 * RATIO_SLACK_BELOW_0, max: 1000.0 * (1.0 + RATIO_SLACK) },
    sentinels: &[],
};
/// A 0/1 gauge's share or a usage ratio (`isBackPressured`, buffer pool usage).
pub const SHARE: Domain = Domain {
    what: "a share, 0–1",
    bounds: Bounds::Fixed { min: -RATIO_SLACK_BELOW_0, max: 1.0 + RATIO_SLACK },
    sentinels: &[],
};
/// A number of things: checkpoints, restarts, series, samples.
pub const COUNT: Domain =
    Domain { what: "a count, 0 or more", bounds: Bounds::Fixed { min: 0.0, max: MAX_MAGNITUDE }, sentinels: &[] };
/// Rates, sizes and durations.
pub const NON_NEGATIVE: Domain =
    Domain { what: "0 or more", bounds: Bounds::Fixed { min: 0.0, max: MAX_MAGNITUDE }, sentinels: &[] };
/// A duration Flink writes as −1 when there is none: the job's `uptime` once it is no
/// longer running (`UpTimeGauge`'s `NO_LONGER_RUNNING`). Unknown, so the run ends at its
/// last running sample and the verdict says the job stopped reporting (its 0, "not yet
/// running or not up at the moment", is kept and typed by the collector).
pub const DURATION: Domain = Domain {
    what: "a duration, 0 or more",
    bounds: Bounds::Fixed { min: 0.0, max: MAX_MAGNITUDE },
    sentinels: &[-1.0],
};
/// The JVM's process CPU load, negative when the JVM cannot read it
/// (`OperatingSystemMXBean.getProcessCpuLoad`).
pub const CPU_LOAD: Domain =
    Domain { what: "0 or more", bounds: Bounds::Fixed { min: 0.0, max: MAX_MAGNITUDE }, sentinels: &[-1.0] };
/// Kafka's `records-lag-max`: −Inf before the first fetch (its `Max` stat's start).
pub const KAFKA_LAG: Domain = Domain {
    what: "a number of records, 0 or more",
    bounds: Bounds::Fixed { min: 0.0, max: MAX_MAGNITUDE },
    sentinels: &[f64::NEG_INFINITY],
};
/// An epoch-ms timestamp; −1 or 0 before there is one.
pub const TIMESTAMP: Domain =
    Domain { what: "a time since 2014, not in the future", bounds: Bounds::TimestampMs, sentinels: &[-1.0, 0.0] };
/// A watermark: an event time, or Long.MIN_VALUE before the first one and Long.MAX_VALUE
/// once the input finished (both kept, as states).
pub const WATERMARK: Domain =
    Domain { what: "an event time, Long.MIN_VALUE or Long.MAX_VALUE", bounds: Bounds::Watermark, sentinels: &[] };
/// A checkpoint gauge that is −1 before the first completed checkpoint (kept: a state).
pub const CHECKPOINT_GAUGE: Domain = Domain {
    what: "0 or more, or -1 before the first completed checkpoint",
    bounds: Bounds::Fixed { min: -1.0, max: MAX_MAGNITUDE },
    sentinels: &[],
};
/// A FLIP-33 source's `currentEmitEventTimeLag`: −1 (`UNDEFINED` in Flink's
/// `InternalSourceReaderMetricGroup`) while the records it emitted carry no timestamp.
pub const EMIT_LAG: Domain = Domain {
    what: "a lag in ms, or -1 when undefined",
    bounds: Bounds::Fixed { min: -MAX_MAGNITUDE, max: MAX_MAGNITUDE },
    sentinels: &[-1.0],
};
/// Anything finite of sensible magnitude (event-time lags, exporters' offsets).
pub const FINITE: Domain = Domain {
    what: "a finite number",
    bounds: Bounds::Fixed { min: -MAX_MAGNITUDE, max: MAX_MAGNITUDE },
    sentinels: &[],
};

/// What became of one value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    /// Possible: kept (−0 written as 0).
    Keep(f64),
    /// NaN or a sentinel: unknown, not counted.
    Unknown,
    /// Impossible: unknown, counted in the note.
    Impossible,
}

impl Domain {
    /// Judges value `v` sampled at `t_ms`.
    pub fn judge(&self, t_ms: i64, v: f64) -> Verdict {
        if v.is_nan() || self.sentinels.contains(&v) {
            return Verdict::Unknown;
        }
        let (min, max) = match self.bounds {
            Bounds::Fixed { min, max } => (min, max),
            Bounds::TimestampMs => (EARLIEST_TIMESTAMP_MS, t_ms as f64 + MAX_CLOCK_AHEAD_MS),
            Bounds::Watermark => {
                use crate::model::snapshot::{LONG_MAX_AS_F64, LONG_MIN_AS_F64, Watermark};
                match Watermark::from_reported(v) {
                    Watermark::NoWatermark => return Verdict::Keep(LONG_MIN_AS_F64),
                    Watermark::InputFinished => return Verdict::Keep(LONG_MAX_AS_F64),
                    _ => (-MAX_MAGNITUDE, MAX_MAGNITUDE),
                }
            }
        };
        if v.is_finite() && (min..=max).contains(&v) {
            // `+ 0.0` turns −0 into 0, so no sentence prints "-0".
            Verdict::Keep(v + 0.0)
        } else {
            Verdict::Impossible
        }
    }

    /// The union of two domains (a selector over several metrics whose answer lost the
    /// names): the wider range, the sentinels of the first.
    fn widen(self, other: Domain) -> Domain {
        match (self.bounds, other.bounds) {
            (Bounds::Fixed { min: a, max: b }, Bounds::Fixed { min: c, max: d }) if self != other => Domain {
                what: if b >= d { self.what } else { other.what },
                bounds: Bounds::Fixed { min: a.min(c), max: b.max(d) },
                sentinels: self.sentinels,
            },
            (Bounds::Fixed { .. }, Bounds::TimestampMs) | (Bounds::TimestampMs, Bounds::Fixed { .. }) => FINITE,
            (Bounds::Watermark, b) | (b, Bounds::Watermark) if b != Bounds::Watermark => FINITE,
            _ => self,
        }
    }

    /// The domain of a sum of such values: no upper bound but the magnitude.
    fn summed(self) -> Domain {
        match self.bounds {
            Bounds::Fixed { min, .. } => Domain {
                what: if min >= 0.0 { "0 or more" } else { "a finite number" },
                bounds: Bounds::Fixed { min: min.min(0.0), max: MAX_MAGNITUDE },
                sentinels: self.sentinels,
            },
            Bounds::TimestampMs | Bounds::Watermark => FINITE,
        }
    }
}

/// The domain of a raw metric by its name.
pub fn of_metric(cat: &MetricCatalog, name: &str) -> Domain {
    signal_of(cat, name).1
}

/// The signal a raw metric is (the catalog's field name: `busy`, `failed_checkpoints`;
/// `""` for metrics of other sources) and its domain.
pub fn signal_of(cat: &MetricCatalog, name: &str) -> (&'static str, Domain) {
    let table: [(&String, &'static str, Domain); 30] = [
        (&cat.busy, "busy", MS_PER_S),
        (&cat.idle, "idle", MS_PER_S),
        (&cat.backpressured, "backpressured", MS_PER_S),
        (&cat.is_backpressured, "is_backpressured", SHARE),
        (&cat.in_pool_usage, "in_pool_usage", SHARE),
        (&cat.out_pool_usage, "out_pool_usage", SHARE),
        (&cat.completed_checkpoints, "completed_checkpoints", COUNT),
        (&cat.failed_checkpoints, "failed_checkpoints", COUNT),
        (&cat.in_progress_checkpoints, "in_progress_checkpoints", COUNT),
        (&cat.num_restarts, "num_restarts", COUNT),
        (&cat.num_rescales, "num_rescales", COUNT),
        (&cat.uptime, "uptime", DURATION),
        (&cat.last_checkpoint_duration, "last_checkpoint_duration", CHECKPOINT_GAUGE),
        (&cat.last_checkpoint_size, "last_checkpoint_size", CHECKPOINT_GAUGE),
        (&cat.last_checkpoint_full_size, "last_checkpoint_full_size", CHECKPOINT_GAUGE),
        (&cat.last_checkpoint_completed_timestamp, "last_checkpoint_completed_timestamp", TIMESTAMP),
        (&cat.records_lag_max, "records_lag_max", KAFKA_LAG),
        (&cat.legacy_records_lag_max, "records_lag_max", KAFKA_LAG),
        (&cat.cpu_load, "cpu_load", CPU_LOAD),
        (&cat.input_watermark, "input_watermark", WATERMARK),
        (&cat.emit_event_time_lag, "emit_event_time_lag", EMIT_LAG),
        (&cat.records_in, "records_in", NON_NEGATIVE),
        (&cat.records_in_per_second, "records_in", NON_NEGATIVE),
        (&cat.records_out, "records_out", NON_NEGATIVE),
        (&cat.records_out_per_second, "records_out", NON_NEGATIVE),
        (&cat.operator_records_in, "operator_records_in", NON_NEGATIVE),
        (&cat.operator_records_in_per_second, "operator_records_in", NON_NEGATIVE),
        (&cat.operator_records_out_per_second, "operator_records_out", NON_NEGATIVE),
        (&cat.checkpoint_start_delay, "checkpoint_start_delay", NON_NEGATIVE),
        (&cat.checkpoint_alignment, "checkpoint_alignment", NON_NEGATIVE),
    ];
    if let Some((_, signal, domain)) = table.iter().find(|(m, _, _)| *m == name) {
        return (signal, *domain);
    }
    if name == cat.pending_records {
        ("pending_records", NON_NEGATIVE)
    } else if name == cat.gc_time || cat.gc_collector_times.iter().any(|m| m == name) {
        ("gc_time", NON_NEGATIVE)
    } else if rocksdb_suffixes(cat).any(|s| name.len() > s.len() && name.ends_with(s)) {
        ("rocksdb", NON_NEGATIVE)
    } else if name == crate::collect::collector::UP {
        ("", SHARE)
    } else {
        ("", FINITE)
    }
}

fn rocksdb_suffixes(cat: &MetricCatalog) -> impl Iterator<Item = &str> {
    [
        &cat.rocksdb_is_write_stopped_suffix,
        &cat.rocksdb_actual_delayed_write_rate_suffix,
        &cat.rocksdb_compaction_pending_suffix,
        &cat.rocksdb_mem_table_flush_pending_suffix,
        &cat.rocksdb_estimate_pending_compaction_bytes_suffix,
        &cat.rocksdb_stall_micros_suffix,
        &cat.rocksdb_estimate_live_data_size_suffix,
        &cat.rocksdb_total_sst_files_size_suffix,
        &cat.rocksdb_estimate_num_keys_suffix,
    ]
    .into_iter()
    .map(String::as_str)
}

/// The metric names a query selects (its `__name__` matcher), for a series whose answer
/// dropped the name; a suffix stands as itself.
fn selected_names(q: &Query) -> Vec<String> {
    let selector = match q {
        Query::OverTime { selector, .. } | Query::Range { selector, .. } => selector,
        Query::Newest { .. } => return Vec::new(),
    };
    let Some(m) = selector.matchers.iter().find(|m| m.label == "__name__") else { return Vec::new() };
    match &m.op {
        MatchOp::Equal(n) => vec![n.clone()],
        MatchOp::OneOf(ns) => ns.clone(),
        // A metric named like the suffix has its domain.
        MatchOp::EndsWith(s) => vec![format!("_{s}")],
        MatchOp::NotOneOf(_) | MatchOp::SanitizedOneOf(_) => Vec::new(),
    }
}

/// The domain of `series` in the answer to `q`, and the metric it is named by in the note.
pub fn of_series(cat: &MetricCatalog, q: &Query, series: &ResultSeries) -> (Domain, String) {
    let names = selected_names(q);
    let named = series.labels.get("__name__").cloned();
    let metric = named.clone().or_else(|| names.first().cloned()).unwrap_or_else(|| "timestamp()".into());
    let (func, aggregation) = match q {
        Query::OverTime { func, aggregation, .. } => (Some(*func), aggregation.as_ref()),
        Query::Range { aggregation, .. } => (None, aggregation.as_ref()),
        // The time of the newest sample, in seconds.
        Query::Newest { .. } => return (NON_NEGATIVE, metric),
    };
    if aggregation.is_some_and(|a| a.agg == Agg::Count) || func == Some(OverTime::Count) {
        return (COUNT, metric);
    }
    let raw = match named {
        Some(n) => of_metric(cat, &n),
        None => names.iter().map(|n| of_metric(cat, n)).reduce(Domain::widen).unwrap_or(FINITE),
    };
    // A counter's rate is never negative, whatever its unit.
    let domain = if func == Some(OverTime::Rate) { NON_NEGATIVE } else { raw };
    let domain = if aggregation.is_some_and(|a| a.agg == Agg::Sum) { domain.summed() } else { domain };
    (domain, metric)
}

/// Values left out of one metric.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    pub what: &'static str,
    /// The signal ([`signal_of`]).
    pub signal: &'static str,
    /// Non-finite values (±Inf).
    pub non_finite: usize,
    /// Finite values outside the domain, the first few with their series' labels.
    pub out_of_range: usize,
    pub examples: Vec<Example>,
}

/// One impossible finite value and where it was.
#[derive(Debug, Clone, PartialEq)]
pub struct Example {
    pub value: f64,
    pub task_id: String,
    pub task_name: String,
    pub subtask: Option<String>,
}

/// Examples a note quotes per metric.
const EXAMPLES: usize = 3;

/// Holds every value of `result` (the answer to `q`) to its domain: impossible values and
/// sentinels become NaN; what was impossible is added to `tallies` by metric.
pub fn screen(cat: &MetricCatalog, q: &Query, result: &mut QueryResult, tallies: &mut BTreeMap<String, Tally>) {
    for series in result.iter_mut() {
        let (domain, metric) = of_series(cat, q, series);
        let signal = signal_of(cat, &metric).0;
        let mut bad: Vec<f64> = Vec::new();
        for p in series.points.iter_mut() {
            match domain.judge(p.0, p.1) {
                Verdict::Keep(v) => p.1 = v,
                Verdict::Unknown => p.1 = f64::NAN,
                Verdict::Impossible => {
                    bad.push(p.1);
                    p.1 = f64::NAN;
                }
            }
        }
        if bad.is_empty() {
            continue;
        }
        let tally = tallies.entry(metric).or_insert_with(|| Tally { what: domain.what, signal, ..Tally::default() });
        for v in bad {
            if !v.is_finite() {
                tally.non_finite += 1;
                continue;
            }
            tally.out_of_range += 1;
            if tally.examples.len() < EXAMPLES {
                tally.examples.push(Example {
                    value: v,
                    task_id: series.label("task_id").to_string(),
                    task_name: series.label("task_name").to_string(),
                    subtask: series.labels.get("subtask_index").cloned(),
                });
            }
        }
    }
}

/// A value for a note: plain up to a million, else in scientific notation (`1.0e308`,
/// not 309 digits).
pub fn show(v: f64) -> String {
    let a = v.abs();
    if a != 0.0 && !(1e-3..1e6).contains(&a) { format!("{v:.1e}") } else { format!("{}", v + 0.0) }
}

/// The note naming what was left out, or None. `vertex_name(task_id, task_name)` names a
/// vertex as the verdict does.
pub fn note(tallies: &BTreeMap<String, Tally>, vertex_name: &dyn Fn(&str, &str) -> String) -> Option<String> {
    let total: usize = tallies.values().map(|t| t.non_finite + t.out_of_range).sum();
    if total == 0 {
        return None;
    }
    let parts: Vec<String> = tallies
        .iter()
        .map(|(metric, t)| {
            let mut said = Vec::new();
            if t.non_finite > 0 {
                said.push(format!("{} non-finite", t.non_finite));
            }
            if t.out_of_range > 0 {
                let examples: Vec<String> = t
                    .examples
                    .iter()
                    .map(|e| {
                        let at = if e.task_id.is_empty() && e.task_name.is_empty() {
                            String::new()
                        } else {
                            format!(" of `{}`", vertex_name(&e.task_id, &e.task_name))
                        };
                        let subtask = e.subtask.as_deref().map(|i| format!(" subtask {i}")).unwrap_or_default();
                        format!("{}{at}{subtask}", show(e.value))
                    })
                    .collect();
                said.push(format!("{} out of range, e.g. {}", t.out_of_range, examples.join(", ")));
            }
            format!("`{metric}` ({}): {}", t.what, said.join("; "))
        })
        .collect();
    Some(format!(
        "The metric source returned {total} non-finite or impossible value{}, left out as unknown (no finding rests on them): {}. Is the reporter, the metric store or the recording broken?",
        if total == 1 { "" } else { "s" },
        parts.join("; ")
    ))
}

/// A [`MetricSource`] whose answers hold only possible values (see the module doc); it
/// counts what it left out for [`Screening::note`].
pub struct Screening<'a, S> {
    inner: &'a S,
    catalog: &'a MetricCatalog,
    tallies: Mutex<BTreeMap<String, Tally>>,
}

impl<'a, S: MetricSource> Screening<'a, S> {
    pub fn new(inner: &'a S, catalog: &'a MetricCatalog) -> Self {
        Screening { inner, catalog, tallies: Mutex::new(BTreeMap::new()) }
    }

    /// What was left out so far, by metric.
    pub fn tallies(&self) -> BTreeMap<String, Tally> {
        self.tallies.lock().expect("not poisoned").clone()
    }

    /// What was left out, by metric, for the snapshot.
    pub fn left_out(&self) -> Vec<crate::model::snapshot::LeftOut> {
        self.tallies()
            .into_iter()
            .map(|(metric, t)| crate::model::snapshot::LeftOut {
                metric,
                signal: t.signal.to_string(),
                count: (t.non_finite + t.out_of_range) as u64,
            })
            .collect()
    }

    /// The note for the verdict, or None when every value was possible.
    pub fn note(&self, vertex_name: &dyn Fn(&str, &str) -> String) -> Option<String> {
        note(&self.tallies(), vertex_name)
    }
}

impl<S: MetricSource> MetricSource for Screening<'_, S> {
    async fn run(&self, queries: &[Query]) -> Vec<Result<QueryResult, QueryError>> {
        let mut answers = self.inner.run(queries).await;
        let mut tallies = self.tallies.lock().expect("not poisoned");
        for (q, answer) in queries.iter().zip(answers.iter_mut()) {
            if let Ok(result) = answer {
                screen(self.catalog, q, result, &mut tallies);
            }
        }
        answers
    }

    fn latest_ms(&self) -> Option<i64> {
        self.inner.latest_ms()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::query::{Aggregation, Selector};

    fn series(labels: &[(&str, &str)], points: &[(i64, f64)]) -> ResultSeries {
        ResultSeries {
            labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            points: points.to_vec(),
        }
    }

    fn over(metric: &str, func: OverTime, agg: Agg) -> Query {
        Query::OverTime {
            selector: Selector::metric(metric),
            func,
            range_ms: 60_000,
            at_ms: 0,
            aggregation: Some(Aggregation::new(agg, &["task_id"])),
        }
    }

    #[test]
    fn watermark_sentinels_pass_the_screening_exactly_and_are_not_counted_as_impossible() {
        let cat = MetricCatalog::default();
        let q = Query::Range {
            selector: Selector::metric(&cat.input_watermark),
            aggregation: Some(Aggregation::new(Agg::Min, &["task_id"])),
            start_ms: 0,
            end_ms: 40_000,
            step_ms: 10_000,
        };
        // Long.MIN as the reporter writes it, as a decimal store may round it (12 digits),
        // an event time, Long.MAX, and 1e300 (no watermark Flink writes).
        let points = [
            (0, -9.223372036854776e18),
            (10_000, -9.22337203685e18),
            (20_000, 1.7e12),
            (30_000, 9.223372036854776e18),
            (40_000, 1e300),
        ];
        let mut result = vec![series(&[("task_id", "w")], &points)];
        let mut tallies = BTreeMap::new();
        screen(&cat, &q, &mut result, &mut tallies);
        let got: Vec<f64> = result[0].points.iter().map(|p| p.1).collect();
        assert_eq!(got[..4], [i64::MIN as f64, i64::MIN as f64, 1.7e12, i64::MAX as f64]);
        assert!(got[4].is_nan());
        // Only 1e300 is impossible.
        assert_eq!(tallies[&cat.input_watermark].out_of_range, 1);
    }

    #[test]
    fn an_undefined_emit_event_time_lag_is_unknown_not_a_lag_of_minus_one_ms() {
        let cat = MetricCatalog::default();
        let d = of_metric(&cat, &cat.emit_event_time_lag);
        assert_eq!(d.judge(0, -1.0), Verdict::Unknown);
        assert_eq!(d.judge(0, 2500.0), Verdict::Keep(2500.0));
    }

    #[test]
    fn the_minus_one_of_a_checkpoint_gauge_before_the_first_checkpoint_is_kept_for_the_collector() {
        let cat = MetricCatalog::default();
        let d = of_metric(&cat, &cat.last_checkpoint_duration);
        // −1 is a state (no checkpoint completed yet), kept; −2 is no value Flink writes.
        assert_eq!(d.judge(0, -1.0), Verdict::Keep(-1.0));
        assert_eq!(d.judge(0, -2.0), Verdict::Impossible);
        assert_eq!(d.judge(0, 1200.0), Verdict::Keep(1200.0));
    }

    #[test]
    fn non_finite_huge_and_negative_counts_become_unknown_and_are_counted() {
        let cat = MetricCatalog::default();
        let q = Query::Range {
            selector: Selector::metrics(&[&cat.failed_checkpoints, &cat.uptime]),
            aggregation: None,
            start_ms: 0,
            end_ms: 40_000,
            step_ms: 10_000,
        };
        let failed = cat.failed_checkpoints.as_str();
        let mut result = vec![
            series(
                &[("__name__", failed)],
                &[(0, 2.0), (10_000, f64::INFINITY), (20_000, -1e308), (30_000, 1e308), (40_000, -0.0)],
            ),
            // Uptime −1 is Flink's "not running": unknown, not counted; −77 000 is impossible.
            series(&[("__name__", cat.uptime.as_str())], &[(0, -1.0), (10_000, -77_000.0), (20_000, f64::NAN)]),
        ];
        let mut tallies = BTreeMap::new();
        screen(&cat, &q, &mut result, &mut tallies);
        let values: Vec<String> = result[0].points.iter().map(|p| format!("{}", p.1)).collect();
        assert_eq!(values, ["2", "NaN", "NaN", "NaN", "0"]);
        assert!(result[1].points.iter().all(|p| p.1.is_nan()));
        // Failed: +Inf (non-finite), −1e308 and 1e308 (beyond 2⁵³) → 1 + 2; uptime: 1.
        assert_eq!((tallies[failed].non_finite, tallies[failed].out_of_range), (1, 2));
        assert_eq!((tallies[&cat.uptime].non_finite, tallies[&cat.uptime].out_of_range), (0, 1));
        let note = note(&tallies, &|_, _| String::new()).unwrap();
        assert!(note.starts_with("The metric source returned 4 non-finite or impossible values"), "{note}");
        assert!(note.contains("1 non-finite; 2 out of range, e.g. -1.0e308, 1.0e308"), "{note}");
        assert!(!note.to_lowercase().contains("inf "), "{note}");
    }

    #[test]
    fn a_busy_time_is_held_to_0_to_1000_ms_per_second_but_its_count_and_its_sum_are_not() {
        let cat = MetricCatalog::default();
        let row = |v: f64| vec![series(&[("task_id", "v1"), ("task_name", "sink")], &[(0, v)])];
        let judge = |q: &Query, v: f64| {
            let mut r = row(v);
            screen(&cat, q, &mut r, &mut BTreeMap::new());
            r[0].points[0].1
        };
        let avg = over(&cat.busy, OverTime::Avg, Agg::Max);
        // 1050 is the top with 5 % slack; −1 the bottom with 1 ms/s.
        assert_eq!((judge(&avg, 1050.0), judge(&avg, -1.0)), (1050.0, -1.0));
        assert!(judge(&avg, 1051.0).is_nan() && judge(&avg, -5.0).is_nan());
        // count(...) of busy series: a count; sum(...) of busy time: any non-negative size.
        assert_eq!(judge(&over(&cat.busy, OverTime::Avg, Agg::Count), 64.0), 64.0);
        assert!(judge(&over(&cat.busy, OverTime::Avg, Agg::Count), -64.0).is_nan());
        assert_eq!(judge(&over(&cat.busy, OverTime::Avg, Agg::Sum), 64_000.0), 64_000.0);
        // A records rate: 0 or more; negated, impossible.
        assert!(judge(&over(&cat.records_in, OverTime::Rate, Agg::Sum), -3.0).is_nan());
    }

    #[test]
    fn a_checkpoint_timestamp_must_be_after_2014_and_not_ahead_of_its_sample() {
        let t = 1_800_000_000_000;
        assert_eq!(TIMESTAMP.judge(t, (t - 5_000) as f64), Verdict::Keep((t - 5_000) as f64));
        assert_eq!(TIMESTAMP.judge(t, (t + 2 * 3_600_000) as f64), Verdict::Impossible);
        assert_eq!(TIMESTAMP.judge(t, 5.0), Verdict::Impossible);
        assert_eq!(TIMESTAMP.judge(t, -1.0), Verdict::Unknown);
    }

    #[test]
    fn huge_values_are_shown_in_scientific_notation_and_negative_zero_as_zero() {
        assert_eq!(
            (show(1e308), show(-5.0), show(-0.0), show(1e9)),
            ("1.0e308".into(), "-5".into(), "0".into(), "1.0e9".into())
        );
    }
}
