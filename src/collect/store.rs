//! An in-memory series store filled from exposition text, and the evaluation of
//! [`Query`] shapes over it with Prometheus' semantics.
//!
//! Semantics (as Prometheus evaluates them, so a recording and a live backend agree):
//! * a range `[r]` at `t` holds the raw samples with timestamps in `(t - r, t]`;
//! * an instant selector at `t` takes each series' latest sample in `(t - lookback, t]`
//!   (lookback 5 min, Prometheus' default);
//! * `rate` extrapolates like Prometheus' `extrapolatedRate` and handles counter resets;
//! * `max`/`min` aggregations and `*_over_time` ignore NaN unless every value is NaN;
//!   `sum`/`avg` propagate it.
//!
//! Pure once filled: evaluation reads no clock and does no IO.
//!
//! Memory: the reader streams its input line by line, and the store keeps per series its
//! labels (interned) and its samples compressed in a [`Chunk`] (about two bytes a sample for
//! a regular scrape of Flink's gauges and counters), so a recording costs a fraction of its
//! text. Lines of one series usually follow each other (Prometheus and promtool write a
//! series at a time): the last line's series is remembered, and only a line of another
//! series has its labels parsed.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use crate::collect::chunk::{Chunk, Cursor};
use crate::collect::exposition::{self, Format, ReadError, ReadSummary, SampleLine, SampleSink, TimeUnit};
use crate::collect::identity::{self, AttemptRank, Row};
use crate::collect::query::{
    Agg, Aggregation, Hygiene, MatchOp, Matcher, OverTime, Query, QueryResult, ResultSeries, SUBTASK_LABELS, Selector,
};

/// Prometheus' default lookback delta for instant selectors, in ms.
pub const LOOKBACK_DELTA_MS: i64 = 5 * 60 * 1000;

/// Samples without a timestamp held back during one read (16 bytes each: 16 MiB), until
/// the input's newest timestamp is known. Beyond it a batch is stamped at the newest
/// timestamp read so far (else the default time), so memory stays bounded on any input.
pub const MAX_HELD_UNTIMED: usize = 1 << 20;

type Sym = u32;
/// Labels sorted by name.
type LabelSet = Box<[(Sym, Sym)]>;
/// A series' identity: metric name and label set.
type SeriesKey = (Sym, u32);

/// Each distinct string once (label values such as `task_attempt_id` are unique per
/// subtask: one copy, shared by the list and the index).
#[derive(Default)]
struct Interner {
    strings: Vec<Arc<str>>,
    index: HashMap<Arc<str>, Sym>,
}

impl Interner {
    fn intern(&mut self, s: &str) -> Sym {
        if let Some(&sym) = self.index.get(s) {
            return sym;
        }
        let sym = self.strings.len() as Sym;
        let shared: Arc<str> = s.into();
        self.strings.push(shared.clone());
        self.index.insert(shared, sym);
        sym
    }

    fn get(&self, s: &str) -> Option<Sym> {
        self.index.get(s).copied()
    }

    fn resolve(&self, sym: Sym) -> &str {
        &self.strings[sym as usize]
    }
}

/// One series: metric name, labels sorted by name, samples (sorted by time once the
/// store is finished).
struct Series {
    name: Sym,
    /// Index into the store's label sets (the metrics of one subtask share one).
    labels: u32,
    samples: Chunk,
}

/// Samples by series, as read from one or more exposition inputs.
#[derive(Default)]
pub struct SeriesStore {
    strings: Interner,
    series: Vec<Series>,
    label_sets: Vec<LabelSet>,
    label_set_index: HashMap<LabelSet, u32>,
    canonical_index: HashMap<SeriesKey, u32>,
    by_name: HashMap<Sym, Vec<usize>>,
    /// `name{labels as written` of the last sample line, and its series: the next line of
    /// the same series skips label parsing.
    last_raw: String,
    last_id: Option<usize>,
    key_buf: String,
    /// Timestamp given to samples that carry none in an input that has no timestamps at
    /// all (a plain scrape dump), Unix ms.
    default_t_ms: Option<i64>,
    /// Samples without a timestamp of the input being read (series, value), stamped when
    /// the read ends: at the input's newest timestamp when it has any, else the default.
    held_untimed: Vec<(u32, f64)>,
    /// At most this many held (tests lower it); None: [`MAX_HELD_UNTIMED`].
    held_limit: Option<usize>,
    /// The newest timestamp of the input being read, Unix ms.
    read_newest_ms: Option<i64>,
    untimed: UntimedStamps,
    samples: u64,
}

/// How the samples without a timestamp were stamped, over every read so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UntimedStamps {
    /// Taken at the newest timestamp of their input, which had timestamped samples too.
    pub at_newest: u64,
    /// The newest such stamp, Unix ms.
    pub newest_ms: Option<i64>,
    /// Taken at the default time given to the read (an input without timestamps).
    pub at_default: u64,
}

/// What the store holds, for messages and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreStats {
    pub series: usize,
    pub samples: u64,
}

impl SeriesStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads one exposition file (plain or gzip).
    ///
    /// Samples without a timestamp in an input whose other samples carry one are taken at
    /// the input's newest timestamp (a hand-added line must not move the diagnosis time
    /// past the job's data); in an input without any timestamp they get `default_t_ms`,
    /// and when that is None the read is an error. They are held back until the read ends,
    /// at most [`MAX_HELD_UNTIMED`] at a time (beyond that a batch is stamped at the newest
    /// timestamp read so far). [`Self::untimed`] says how they were stamped.
    ///
    /// An input with OpenMetrics timestamps (seconds) that does not end with `# EOF` is an
    /// error: it was cut short, and the samples after the cut are lost.
    pub fn read_path(&mut self, path: &Path, default_t_ms: Option<i64>) -> Result<ReadSummary, ReadError> {
        let source = path.display().to_string();
        self.begin_read(default_t_ms);
        let read = exposition::read_path(path, self);
        self.end_read(read, &source)
    }

    /// Same as [`Self::read_path`] over any reader; `source` names it in errors.
    pub fn read_from(
        &mut self,
        reader: impl std::io::Read,
        source: &str,
        default_t_ms: Option<i64>,
    ) -> Result<ReadSummary, ReadError> {
        self.begin_read(default_t_ms);
        let read = exposition::read_from(reader, source, self);
        self.end_read(read, source)
    }

    /// How the samples without a timestamp were stamped, over every read so far.
    pub fn untimed(&self) -> UntimedStamps {
        self.untimed
    }

    fn begin_read(&mut self, default_t_ms: Option<i64>) {
        self.default_t_ms = default_t_ms;
        self.read_newest_ms = None;
        self.held_untimed.clear();
    }

    /// Stamps the held samples without a timestamp, once the input's newest is known.
    fn end_read(&mut self, read: Result<ReadSummary, ReadError>, source: &str) -> Result<ReadSummary, ReadError> {
        let stamped = read.and_then(|summary| {
            let held = self.held_untimed.len();
            self.stamp_held().map_err(|m| ReadError::new(source, None, format!("{held} {m}")))?;
            Ok(summary)
        });
        self.held_untimed = Vec::new();
        check_complete(&stamped?, source)
    }

    /// Pushes the held samples at the newest timestamp read so far, else the default time.
    fn stamp_held(&mut self) -> Result<(), String> {
        if self.held_untimed.is_empty() {
            return Ok(());
        }
        let n = self.held_untimed.len() as u64;
        let t_ms = match (self.read_newest_ms, self.default_t_ms) {
            (Some(t), _) => {
                self.untimed.at_newest += n;
                self.untimed.newest_ms = self.untimed.newest_ms.max(Some(t));
                t
            }
            (None, Some(t)) => {
                self.untimed.at_default += n;
                t
            }
            (None, None) => {
                return Err(
                    "samples carry no timestamp, the input has none, and no time was given to take them at".into()
                );
            }
        };
        for (id, value) in std::mem::take(&mut self.held_untimed) {
            self.push_sample(id as usize, t_ms, value);
        }
        Ok(())
    }

    /// Adds one sample (tests and generators).
    pub fn push(&mut self, name: &str, labels: &[(&str, &str)], t_ms: i64, value: f64) {
        let name_sym = self.strings.intern(name);
        let mut sorted: Vec<(Sym, Sym)> =
            labels.iter().map(|(k, v)| (self.strings.intern(k), self.strings.intern(v))).collect();
        sorted.sort_by(|a, b| self.strings.resolve(a.0).cmp(self.strings.resolve(b.0)));
        let id = self.series_for(name_sym, sorted.into_boxed_slice());
        self.push_sample(id, t_ms, value);
    }

    fn series_for(&mut self, name: Sym, labels: LabelSet) -> usize {
        let set = match self.label_set_index.get(&labels) {
            Some(&set) => set,
            None => {
                let set = self.label_sets.len() as u32;
                self.label_sets.push(labels.clone());
                self.label_set_index.insert(labels, set);
                set
            }
        };
        if let Some(&id) = self.canonical_index.get(&(name, set)) {
            return id as usize;
        }
        let id = self.series.len();
        self.series.push(Series { name, labels: set, samples: Chunk::new() });
        self.canonical_index.insert((name, set), id as u32);
        self.by_name.entry(name).or_default().push(id);
        id
    }

    fn labels_of(&self, s: &Series) -> &[(Sym, Sym)] {
        &self.label_sets[s.labels as usize]
    }

    fn push_sample(&mut self, id: usize, t_ms: i64, value: f64) {
        self.series[id].samples.push(t_ms, value);
        self.samples += 1;
    }

    /// Sorts samples of series that were read out of order (stable: for equal
    /// timestamps the later line wins, as in a scrape that repeats a series), and gives
    /// back the memory reading reserved ahead. Call it before evaluating queries.
    pub fn finish(&mut self) {
        for s in &mut self.series {
            s.samples.sort();
        }
        self.last_raw = String::new();
        self.key_buf = String::new();
    }

    /// Bytes the compressed samples take (for benches and messages).
    pub fn sample_bytes(&self) -> usize {
        self.series.iter().map(|s| s.samples.encoded_bytes()).sum()
    }

    pub fn stats(&self) -> StoreStats {
        StoreStats { series: self.series.len(), samples: self.samples }
    }

    /// The newest sample time over all series, Unix ms.
    pub fn last_timestamp_ms(&self) -> Option<i64> {
        self.series.iter().filter_map(|s| s.samples.bounds()).map(|b| b.1).max()
    }

    /// The oldest sample time over all series, Unix ms.
    pub fn first_timestamp_ms(&self) -> Option<i64> {
        self.series.iter().filter_map(|s| s.samples.bounds()).map(|b| b.0).min()
    }

    /// The metric names of every series, sorted.
    pub fn metric_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.by_name.keys().map(|&n| self.strings.resolve(n)).collect();
        names.sort_unstable();
        names
    }

    /// Distinct values of `label` over the series of `metric` (e.g. every `job_id`).
    pub fn label_values(&self, metric: &str, label: &str) -> Vec<String> {
        let (Some(name), Some(label)) = (self.strings.get(metric), self.strings.get(label)) else {
            return Vec::new();
        };
        let mut out: Vec<String> = self
            .by_name
            .get(&name)
            .into_iter()
            .flatten()
            .filter_map(|&id| self.labels_of(&self.series[id]).iter().find(|(k, _)| *k == label))
            .map(|(_, v)| self.strings.resolve(*v).to_string())
            .collect();
        out.sort();
        out.dedup();
        out
    }

    fn label_of<'a>(&'a self, s: &'a Series, label: &str) -> Option<&'a str> {
        if label == "__name__" {
            return Some(self.strings.resolve(s.name));
        }
        self.labels_of(s).iter().find(|(k, _)| self.strings.resolve(*k) == label).map(|(_, v)| self.strings.resolve(*v))
    }

    fn labels_map(&self, s: &Series, with_name: bool) -> BTreeMap<String, String> {
        let mut m: BTreeMap<String, String> = self
            .labels_of(s)
            .iter()
            .map(|(k, v)| (self.strings.resolve(*k).to_string(), self.strings.resolve(*v).to_string()))
            .collect();
        if with_name {
            m.insert("__name__".into(), self.strings.resolve(s.name).to_string());
        }
        m
    }

    fn select(&self, selector: &Selector) -> Vec<&Series> {
        // A positive name matcher narrows the candidates; anything else scans every series.
        let by_name =
            |m: &&Matcher| m.label == "__name__" && !matches!(m.op, MatchOp::NotOneOf(_) | MatchOp::SanitizedOneOf(_));
        let names: Option<Vec<Sym>> = selector.matchers.iter().find(by_name).map(|m| match &m.op {
            MatchOp::Equal(v) => self.strings.get(v).into_iter().collect(),
            MatchOp::OneOf(vs) => vs.iter().filter_map(|v| self.strings.get(v)).collect(),
            MatchOp::NotOneOf(_) | MatchOp::SanitizedOneOf(_) => unreachable!("not a narrowing matcher"),
            MatchOp::EndsWith(suffix) => {
                let mut names: Vec<Sym> = self
                    .by_name
                    .keys()
                    .copied()
                    .filter(|&n| {
                        let name = self.strings.resolve(n);
                        name.len() > suffix.len() && name.ends_with(suffix.as_str())
                    })
                    .collect();
                names.sort_unstable();
                names
            }
        });
        let candidates: Box<dyn Iterator<Item = &Series>> = match names {
            Some(names) => Box::new(
                names.into_iter().filter_map(|sym| self.by_name.get(&sym)).flatten().map(|&id| &self.series[id]),
            ),
            None => Box::new(self.series.iter()),
        };
        candidates.filter(|s| selector.matches(|l| self.label_of(s, l))).collect()
    }

    /// How many series `selector` matches (its hygiene aside).
    pub fn count_matching(&self, selector: &Selector) -> usize {
        self.select(selector).len()
    }

    /// Evaluates a query with Prometheus' semantics (see the module doc).
    pub fn evaluate(&self, query: &Query) -> QueryResult {
        match query {
            Query::OverTime { selector, func, range_ms, at_ms, aggregation } => {
                self.over_time(selector, *func, at_ms.saturating_sub(*range_ms), *at_ms, aggregation.as_ref())
            }
            Query::Range { selector, aggregation, start_ms, end_ms, step_ms } => {
                self.range(selector, aggregation.as_ref(), *start_ms, *end_ms, *step_ms)
            }
            Query::Newest { selectors, at_ms } => {
                let newest = selectors
                    .iter()
                    .flat_map(|selector| self.select(selector))
                    .filter_map(|s| s.samples.last_at_or_before(*at_ms))
                    .map(|(t, _)| t)
                    .filter(|&t| t > at_ms.saturating_sub(LOOKBACK_DELTA_MS))
                    .max();
                newest
                    .map(|t| ResultSeries { labels: BTreeMap::new(), points: vec![(*at_ms, t as f64 / 1000.0)] })
                    .into_iter()
                    .collect()
            }
        }
    }

    /// `<aggregation> (<func>_over_time(selector[end - start]))` at `end`.
    fn over_time(
        &self,
        selector: &Selector,
        func: OverTime,
        start: i64,
        end: i64,
        aggregation: Option<&Aggregation>,
    ) -> QueryResult {
        let series = self.select(selector);
        let (mut ts, mut vs) = (Vec::new(), Vec::new());
        let mut out = Vec::new();
        for part in self.partitions(&series, selector, aggregation) {
            let mut rows: Vec<Row> = Vec::new();
            for s in part.iter().map(|&i| series[i]) {
                s.samples.range_into(start, end, &mut ts, &mut vs);
                if !ts.is_empty() {
                    let value = over_time(func, &ts, &vs, start, end);
                    rows.push(Row { labels: self.labels_map(s, false), value });
                }
            }
            let per_series = identity::reduce(&selector.hygiene, rows, true);
            out.extend(aggregate(per_series, aggregation));
        }
        if aggregation.is_some() {
            out.sort_by(|a, b| a.0.cmp(&b.0));
        }
        out.into_iter().map(|(labels, v)| ResultSeries { labels, points: vec![(end, v)] }).collect()
    }

    /// A range query: the instant vector of `<aggregation> (selector)` at every step.
    ///
    /// A group of series (see [`Self::partitions`]) is walked through every step before the
    /// next group: what its labels decide (which rows are one target, which group of the
    /// aggregation a row joins) is worked out once, not at every step.
    fn range(
        &self,
        selector: &Selector,
        aggregation: Option<&Aggregation>,
        start_ms: i64,
        end_ms: i64,
        step_ms: i64,
    ) -> QueryResult {
        let series = self.select(selector);
        let keep_name = aggregation.is_none();
        let mut out: BTreeMap<BTreeMap<String, String>, Vec<(i64, f64)>> = BTreeMap::new();
        let step = step_ms.max(1);
        let mut present: Vec<(usize, f64)> = Vec::new();
        let mut scratch = InstantScratch::default();
        for part in self.partitions(&series, selector, aggregation) {
            let plan = InstantPlan::new(
                part.iter().map(|&i| self.labels_map(series[i], keep_name)).collect(),
                &selector.hygiene,
                aggregation,
            );
            let mut cursors: Vec<Cursor<'_>> = part.iter().map(|&i| Cursor::new(&series[i].samples)).collect();
            let mut t = start_ms;
            while t <= end_ms {
                present.clear();
                for (j, cursor) in cursors.iter_mut().enumerate() {
                    if let Some((sample_t, value)) = cursor.at_or_before(t)
                        && sample_t > t.saturating_sub(LOOKBACK_DELTA_MS)
                    {
                        present.push((j, value));
                    }
                }
                plan.instant(&present, &mut scratch, |labels, v| match out.get_mut(labels) {
                    Some(points) => points.push((t, v)),
                    None => {
                        out.insert(labels.clone(), vec![(t, v)]);
                    }
                });
                // A range reaching the end of time ends there, never wraps around.
                match t.checked_add(step) {
                    Some(next) => t = next,
                    None => break,
                }
            }
        }
        // Groups never share a result series (each keeps its own grouping labels); were it
        // otherwise, the points would still be in time order, a step's in group order.
        for points in out.values_mut() {
            points.sort_by_key(|p| p.0);
        }
        out.into_iter().map(|(labels, points)| ResultSeries { labels, points }).collect()
    }

    /// Splits the selected series (by index, order kept) into groups that neither the
    /// hygiene nor the aggregation ever mixes, so their rows (labels as strings) are made
    /// a group at a time instead of all at once: on a recording of 128,000 subtasks that
    /// is what keeps a query from holding every subtask's labels.
    ///
    /// The groups are by the values of the subtask labels ([`SUBTASK_LABELS`]) that are
    /// also grouping labels of the aggregation and not scrape labels: superseded attempts
    /// are found per subtask, series merged once per target agree on every label but the
    /// scrape labels, and an aggregation never groups across its grouping labels. A label
    /// absent and a label empty are alike, as in the aggregation. Without an aggregation,
    /// or without such labels, there is one group.
    fn partitions(
        &self,
        series: &[&Series],
        selector: &Selector,
        aggregation: Option<&Aggregation>,
    ) -> Vec<Vec<usize>> {
        let whole = || vec![(0..series.len()).collect::<Vec<usize>>()];
        let Some(aggregation) = aggregation else { return whole() };
        let grouped = |l: &str| aggregation.by.iter().any(|b| b == l) != aggregation.without;
        let scrape = |l: &str| selector.hygiene.scrape_labels.iter().any(|s| s == l);
        let keys: Vec<Sym> =
            SUBTASK_LABELS.iter().filter(|l| grouped(l) && !scrape(l)).filter_map(|l| self.strings.get(l)).collect();
        if keys.is_empty() {
            return whole();
        }
        let empty = self.strings.get("");
        let value_of = |s: &Series, k: Sym| {
            self.labels_of(s).iter().find(|(name, _)| *name == k).map(|(_, v)| *v).filter(|v| Some(*v) != empty)
        };
        let mut keyed: Vec<(Vec<Option<Sym>>, usize)> =
            series.iter().enumerate().map(|(i, s)| (keys.iter().map(|&k| value_of(s, k)).collect(), i)).collect();
        keyed.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut parts: Vec<Vec<usize>> = Vec::new();
        for (n, (key, i)) in keyed.iter().enumerate() {
            if n == 0 || keyed[n - 1].0 != *key {
                parts.push(Vec::new());
            }
            parts.last_mut().expect("a group was started").push(*i);
        }
        parts
    }
}

impl SampleSink for SeriesStore {
    fn sample(&mut self, line: &SampleLine<'_>, t_ms: Option<i64>) -> Result<(), String> {
        if t_ms.is_none() && self.held_untimed.len() >= self.held_limit.unwrap_or(MAX_HELD_UNTIMED) {
            let held = self.held_untimed.len();
            self.stamp_held().map_err(|m| format!("{held} {m}"))?;
        }
        self.key_buf.clear();
        self.key_buf.push_str(&line.name);
        self.key_buf.push('{');
        self.key_buf.push_str(line.labels_raw);
        let id = match self.last_id {
            Some(id) if self.last_raw == self.key_buf => id,
            _ => {
                let labels = line.labels()?;
                let name = self.strings.intern(&line.name);
                let mut sorted: Vec<(Sym, Sym)> =
                    labels.iter().map(|(k, v)| (self.strings.intern(k), self.strings.intern(v))).collect();
                sorted.sort_by(|a, b| self.strings.resolve(a.0).cmp(self.strings.resolve(b.0)));
                let id = self.series_for(name, sorted.into_boxed_slice());
                std::mem::swap(&mut self.last_raw, &mut self.key_buf);
                self.last_id = Some(id);
                id
            }
        };
        match t_ms {
            Some(t) => {
                self.read_newest_ms = self.read_newest_ms.max(Some(t));
                self.push_sample(id, t, line.value);
            }
            None => self.held_untimed.push((id as u32, line.value)),
        }
        Ok(())
    }
}

fn check_complete(summary: &ReadSummary, source: &str) -> Result<ReadSummary, ReadError> {
    if summary.timestamp_unit == Some(TimeUnit::Seconds) && summary.format == Format::Text {
        return Err(ReadError::new(
            source,
            Some(summary.lines),
            "the OpenMetrics recording ends without `# EOF`: it was cut short here, and what followed is missing",
        ));
    }
    Ok(*summary)
}

/// Applies an `*_over_time` function to the samples of one series inside `(start, end]`.
fn over_time(func: OverTime, ts: &[i64], vs: &[f64], start: i64, end: i64) -> Option<f64> {
    if vs.is_empty() {
        return None;
    }
    match func {
        OverTime::Avg => Some(vs.iter().sum::<f64>() / vs.len() as f64),
        OverTime::Max => Some(vs.iter().copied().fold(f64::NAN, |m, v| if v > m || m.is_nan() { v } else { m })),
        OverTime::Min => Some(vs.iter().copied().fold(f64::NAN, |m, v| if v < m || m.is_nan() { v } else { m })),
        OverTime::Last => vs.last().copied(),
        OverTime::Count => Some(vs.len() as f64),
        OverTime::Rate => extrapolated_rate(ts, vs, start, end),
    }
}

/// Prometheus' `rate()`: the increase between the first and last sample in the range,
/// corrected for counter resets and extrapolated toward the range edges (by at most half
/// an average sample interval beyond a sample, never below zero), per second.
fn extrapolated_rate(ts: &[i64], vs: &[f64], range_start: i64, range_end: i64) -> Option<f64> {
    if vs.len() < 2 {
        return None;
    }
    let (first_t, last_t) = (ts[0], ts[ts.len() - 1]);
    let mut increase = vs[vs.len() - 1] - vs[0];
    let mut prev = vs[0];
    for &v in &vs[1..] {
        if v < prev {
            increase += prev;
        }
        prev = v;
    }
    let sampled = (last_t - first_t) as f64 / 1000.0;
    if sampled <= 0.0 {
        return None;
    }
    let mut to_start = (first_t - range_start) as f64 / 1000.0;
    let mut to_end = (range_end - last_t) as f64 / 1000.0;
    let average_interval = sampled / (vs.len() - 1) as f64;
    let threshold = average_interval * 1.1;
    let mut extrapolate_to = sampled;
    if to_start >= threshold {
        to_start = average_interval / 2.0;
    }
    if increase > 0.0 && vs[0] >= 0.0 {
        // A counter cannot go below zero: do not extrapolate past the point where it was 0.
        let to_zero = sampled * (vs[0] / increase);
        if to_zero < to_start {
            to_start = to_zero;
        }
    }
    extrapolate_to += to_start;
    if to_end >= threshold {
        to_end = average_interval / 2.0;
    }
    extrapolate_to += to_end;
    let range_s = (range_end - range_start) as f64 / 1000.0;
    Some(increase * (extrapolate_to / sampled) / range_s)
}

/// Groups `(labels, value)` pairs by the aggregation's labels; without an aggregation the
/// pairs pass through.
fn aggregate(
    values: Vec<(BTreeMap<String, String>, f64)>,
    aggregation: Option<&Aggregation>,
) -> Vec<(BTreeMap<String, String>, f64)> {
    let Some(aggregation) = aggregation else { return values };
    let mut groups: BTreeMap<BTreeMap<String, String>, Vec<f64>> = BTreeMap::new();
    for (labels, v) in values {
        groups.entry(group_key(labels, aggregation)).or_default().push(v);
    }
    groups.into_iter().map(|(k, mut vs)| (k, aggregate_values(aggregation.agg, &mut vs))).collect()
}

/// The labels of the aggregation's group a series with `labels` joins (empty values are
/// absent labels).
fn group_key(mut labels: BTreeMap<String, String>, aggregation: &Aggregation) -> BTreeMap<String, String> {
    if aggregation.without {
        labels.retain(|k, v| k != "__name__" && !v.is_empty() && !aggregation.by.contains(k));
        labels
    } else {
        aggregation
            .by
            .iter()
            .filter_map(|l| labels.get(l).filter(|v| !v.is_empty()).map(|v| (l.clone(), v.clone())))
            .collect()
    }
}

/// What the labels of a group of series decide for every instant of a range query, as
/// indices: the newest-attempt rank of each series, which target (series equal but for the
/// scrape labels) it belongs to, and the aggregation group of each series or target. An
/// instant then gives what [`identity::reduce`] and [`aggregate`] give on rows holding
/// these labels, in the same order and with the same arithmetic.
struct InstantPlan<'a> {
    hygiene: &'a Hygiene,
    aggregation: Option<&'a Aggregation>,
    /// Each series' labels, as its row has them.
    labels: Vec<BTreeMap<String, String>>,
    /// Each series' place in the newest-attempt rule; empty when the rule keeps every row.
    ranks: Vec<AttemptRank>,
    /// When rows are merged once per target: each series' target.
    merge: Option<SortedIds>,
    /// With an aggregation: the group of each unit (a target when merged, else a series).
    groups: Option<SortedIds>,
}

/// Buffers an [`InstantPlan`] reuses from one instant to the next.
#[derive(Default)]
struct InstantScratch {
    kept: Vec<(usize, f64)>,
    targets: Vec<Option<f64>>,
    units: Vec<(usize, f64)>,
    groups: Vec<Vec<f64>>,
}

/// Each item's key as an index into the distinct keys, which are in ascending order.
struct SortedIds {
    of: Vec<usize>,
    keys: Vec<BTreeMap<String, String>>,
}

impl SortedIds {
    fn new(keys: Vec<BTreeMap<String, String>>) -> Self {
        let mut distinct = keys.clone();
        distinct.sort();
        distinct.dedup();
        let of = keys.iter().map(|k| distinct.binary_search(k).expect("a key of the list")).collect();
        SortedIds { of, keys: distinct }
    }
}

impl<'a> InstantPlan<'a> {
    fn new(labels: Vec<BTreeMap<String, String>>, hygiene: &'a Hygiene, aggregation: Option<&'a Aggregation>) -> Self {
        let ranks = if hygiene.attempts.len() < 2 {
            Vec::new()
        } else {
            labels.iter().map(|l| AttemptRank::of(&hygiene.attempts, l)).collect()
        };
        // As in `identity::reduce`: rows are merged once per target under an aggregation.
        let merge = (aggregation.is_some() && !hygiene.scrape_labels.is_empty())
            .then(|| SortedIds::new(labels.iter().map(|l| identity::target_identity(hygiene, l.clone())).collect()));
        let groups = aggregation.map(|a| {
            let units = merge.as_ref().map_or(&labels, |targets| &targets.keys);
            SortedIds::new(units.iter().map(|l| group_key(l.clone(), a)).collect())
        });
        InstantPlan { hygiene, aggregation, labels, ranks, merge, groups }
    }

    /// Hands `emit` each result series' labels and value at one instant, in the order
    /// [`aggregate`] (after [`identity::reduce`]) gives them; `present` holds the series
    /// with a sample (index, value), in index order.
    fn instant(
        &self,
        present: &[(usize, f64)],
        scratch: &mut InstantScratch,
        mut emit: impl FnMut(&BTreeMap<String, String>, f64),
    ) {
        let kept: &[(usize, f64)] = if self.ranks.is_empty() {
            present
        } else {
            let ranks: Vec<&AttemptRank> = present.iter().map(|&(j, _)| &self.ranks[j]).collect();
            let keep = identity::newest_attempts_kept(self.hygiene.attempts.len(), &ranks);
            scratch.kept.clear();
            scratch.kept.extend(present.iter().zip(keep).filter_map(|(&row, k)| k.then_some(row)));
            &scratch.kept
        };
        let (units, unit_labels) = match &self.merge {
            None => (kept, &self.labels),
            Some(targets) => {
                scratch.targets.clear();
                scratch.targets.resize(targets.keys.len(), None);
                for &(j, v) in kept {
                    let m = &mut scratch.targets[targets.of[j]];
                    *m = Some(m.map_or(v, |m| identity::merge_max(m, v)));
                }
                scratch.units.clear();
                scratch.units.extend(scratch.targets.iter().enumerate().filter_map(|(u, v)| Some((u, (*v)?))));
                (&scratch.units[..], &targets.keys)
            }
        };
        let (Some(aggregation), Some(groups)) = (self.aggregation, &self.groups) else {
            for &(u, v) in units {
                emit(&unit_labels[u], v);
            }
            return;
        };
        scratch.groups.resize_with(groups.keys.len(), Vec::new);
        for vs in &mut scratch.groups {
            vs.clear();
        }
        for &(u, v) in units {
            scratch.groups[groups.of[u]].push(v);
        }
        for (key, vs) in groups.keys.iter().zip(&mut scratch.groups) {
            if !vs.is_empty() {
                emit(key, aggregate_values(aggregation.agg, vs));
            }
        }
    }
}

/// One group's value, with Prometheus' NaN rules: `max`/`min` take a number over NaN,
/// `sum`/`avg` propagate NaN, `quantile` sorts NaN first.
fn aggregate_values(agg: Agg, vs: &mut [f64]) -> f64 {
    let pick = |better: fn(f64, f64) -> bool| {
        vs.iter().copied().fold(f64::NAN, |m, v| if m.is_nan() || better(v, m) { v } else { m })
    };
    match agg {
        Agg::Sum => vs.iter().sum(),
        Agg::Avg => vs.iter().sum::<f64>() / vs.len() as f64,
        Agg::Max => pick(|v, m| v > m),
        Agg::Min => pick(|v, m| v < m),
        Agg::Count => vs.len() as f64,
        Agg::Median => {
            // Prometheus' quantile: rank φ·(n−1), linear interpolation between neighbours.
            vs.sort_by(|a, b| match (a.is_nan(), b.is_nan()) {
                (true, true) => std::cmp::Ordering::Equal,
                (true, false) => std::cmp::Ordering::Less,
                (false, true) => std::cmp::Ordering::Greater,
                _ => a.total_cmp(b),
            });
            let rank = 0.5 * (vs.len() - 1) as f64;
            let lower = rank.floor() as usize;
            let upper = (lower + 1).min(vs.len() - 1);
            let weight = rank - rank.floor();
            vs[lower] * (1.0 - weight) + vs[upper] * weight
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::query::Selector;

    fn store() -> SeriesStore {
        let mut s = SeriesStore::new();
        // Two subtasks of one vertex, scraped every 5 s from t = 0 to t = 30 s.
        for i in 0..=6 {
            let t = i * 5_000;
            s.push("busy", &[("task_id", "v1"), ("subtask_index", "0")], t, 1000.0);
            s.push("busy", &[("task_id", "v1"), ("subtask_index", "1")], t, 250.0 + 50.0 * i as f64);
            s.push("count", &[("task_id", "v1"), ("subtask_index", "0")], t, 100.0 * i as f64);
        }
        s.finish();
        s
    }

    #[test]
    fn avg_over_time_takes_samples_in_the_left_open_range() {
        // (10 s, 30 s] holds t = 15, 20, 25, 30 s: subtask 1 is 250 + 50·i for i = 3..=6
        // → (400 + 450 + 500 + 550) / 4 = 475.
        let q = Query::OverTime {
            selector: Selector::metric("busy").with("subtask_index", "1"),
            func: OverTime::Avg,
            range_ms: 20_000,
            at_ms: 30_000,
            aggregation: None,
        };
        let r = store().evaluate(&q);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].points, vec![(30_000, 475.0)]);
        assert_eq!(r[0].label("task_id"), "v1");
    }

    #[test]
    fn rate_inside_the_samples_is_the_slope() {
        // Samples 0, 100, …, 600 every 5 s. The range (0, 30 s] holds t = 5 … 30 s (values
        // 100 … 600): increase 500 over 25 s sampled. The first sample is 5 s from the range
        // start, under the 5.5 s threshold (1.1 × the 5 s interval), so the start extends by
        // the full 5 s; the end is on the last sample: 500 × 30/25 / 30 s = 20/s.
        let q = Query::OverTime {
            selector: Selector::metric("count"),
            func: OverTime::Rate,
            range_ms: 30_000,
            at_ms: 30_000,
            aggregation: None,
        };
        let v = store().evaluate(&q)[0].points[0].1;
        assert!((v - 20.0).abs() < 1e-9, "{v}");
    }

    #[test]
    fn rate_counts_a_counter_reset_as_continuing_growth() {
        // 0, 10, 20, reset to 5, 15 at 1 s spacing: increase = 15 - 0 + 20 = 35 over 4 s
        // sampled; the range (−0.5 s, 4.5 s] reaches 0.5 s past both ends; the start cannot
        // extrapolate below the counter's zero (first value 0 → 0 s), the end adds 0.5 s:
        // 35 × 4.5/4 / 5 = 7.875/s.
        let ts = [0, 1000, 2000, 3000, 4000];
        let vs = [0.0, 10.0, 20.0, 5.0, 15.0];
        let v = extrapolated_rate(&ts, &vs, -500, 4500).unwrap();
        assert!((v - 7.875).abs() < 1e-12, "{v}");
    }

    #[test]
    fn a_range_query_takes_the_latest_sample_within_the_lookback() {
        // max over subtasks at 0, 10, 20 s: subtask 0 is always 1000.
        let q = Query::Range {
            selector: Selector::metric("busy"),
            aggregation: Some(Aggregation::new(Agg::Max, &[])),
            start_ms: 0,
            end_ms: 20_000,
            step_ms: 10_000,
        };
        let r = store().evaluate(&q);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].points, vec![(0, 1000.0), (10_000, 1000.0), (20_000, 1000.0)]);
        assert!(r[0].labels.is_empty());
    }

    #[test]
    fn a_range_query_reaching_the_end_of_time_stops_there_and_never_wraps() {
        // Steps at i64::MAX - 20 s, - 10 s, - 0 s; the next would overflow: three points,
        // then the end (it used to overflow: a panic with overflow checks, else a wrap to
        // the far past and steps without end). The sample is in the lookback of all three.
        let mut s = SeriesStore::new();
        s.push("busy", &[("subtask_index", "0")], i64::MAX - 30_000, 7.0);
        s.finish();
        let q = Query::Range {
            selector: Selector::metric("busy"),
            aggregation: None,
            start_ms: i64::MAX - 20_000,
            end_ms: i64::MAX,
            step_ms: 10_000,
        };
        let r = s.evaluate(&q);
        assert_eq!(r[0].points.len(), 3, "{:?}", r[0].points);
        assert_eq!(r[0].points[2], (i64::MAX, 7.0));
    }

    #[test]
    fn a_sample_older_than_the_lookback_is_not_seen() {
        let mut s = SeriesStore::new();
        s.push("m", &[], 0, 1.0);
        let q =
            |t| Query::Range { selector: Selector::metric("m"), aggregation: None, start_ms: t, end_ms: t, step_ms: 1 };
        assert_eq!(s.evaluate(&q(LOOKBACK_DELTA_MS - 1)).len(), 1);
        assert!(s.evaluate(&q(LOOKBACK_DELTA_MS)).is_empty());
    }

    #[test]
    fn max_ignores_nan_unless_all_values_are_nan() {
        let v = vec![(BTreeMap::new(), f64::NAN), (BTreeMap::new(), 3.0)];
        assert_eq!(aggregate(v, Some(&Aggregation::new(Agg::Max, &[])))[0].1, 3.0);
        let v = vec![(BTreeMap::new(), f64::NAN), (BTreeMap::new(), 3.0)];
        assert!(aggregate(v, Some(&Aggregation::new(Agg::Sum, &[])))[0].1.is_nan());
    }

    #[test]
    fn an_openmetrics_recording_cut_before_eof_is_an_error_naming_the_last_line() {
        let text = "# TYPE m gauge\nm 1 1795948507.780\nm 2 1795948512.780\n";
        let err = SeriesStore::new().read_from(text.as_bytes(), "cut.om", None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cut.om:3: the OpenMetrics recording ends without `# EOF`: it was cut short here, and what followed is missing"
        );
        let whole = format!("{text}# EOF\n");
        assert!(SeriesStore::new().read_from(whole.as_bytes(), "whole.om", None).is_ok());
    }

    /// Every sample of metric `m`, in time order.
    fn samples_of(s: &SeriesStore, metric: &str) -> Vec<(i64, f64)> {
        let q = Query::Range {
            selector: Selector::metric(metric),
            aggregation: None,
            start_ms: s.first_timestamp_ms().unwrap(),
            end_ms: s.last_timestamp_ms().unwrap(),
            step_ms: 1_000,
        };
        s.evaluate(&q).into_iter().flat_map(|r| r.points).collect()
    }

    #[test]
    fn an_untimed_sample_in_a_timestamped_recording_is_taken_at_the_recordings_newest_timestamp() {
        // Timestamps 1795948500 s and 1795948510 s; the untimed `up` line comes first and
        // the default ("now") is a day later: it must land at 1795948510 s, not the day after.
        let text = "up 1\nm 1 1795948500.000\nm 2 1795948510.000\n# EOF\n";
        let now = 1_795_948_510_000 + 86_400_000;
        let mut s = SeriesStore::new();
        s.read_from(text.as_bytes(), "mixed.om", Some(now)).unwrap();
        s.finish();
        assert_eq!(s.last_timestamp_ms(), Some(1_795_948_510_000));
        assert_eq!(samples_of(&s, "up").last(), Some(&(1_795_948_510_000, 1.0)));
        assert_eq!(s.untimed(), UntimedStamps { at_newest: 1, newest_ms: Some(1_795_948_510_000), at_default: 0 });
        assert_eq!(s.stats().samples, 3);
    }

    #[test]
    fn an_untimed_sample_needs_no_default_time_when_its_recording_has_timestamps() {
        let text = "m 1 1795948500.000\nup 1\n# EOF\n";
        let mut s = SeriesStore::new();
        s.read_from(text.as_bytes(), "mixed.om", None).unwrap();
        assert_eq!(s.untimed().at_newest, 1);
    }

    #[test]
    fn a_scrape_dump_without_timestamps_is_taken_at_the_default_time_or_refused_without_one() {
        let text = "m 1\nm 2\n";
        let mut s = SeriesStore::new();
        s.read_from(text.as_bytes(), "dump.prom", Some(7_000)).unwrap();
        s.finish();
        assert_eq!(s.last_timestamp_ms(), Some(7_000));
        assert_eq!(s.untimed(), UntimedStamps { at_newest: 0, newest_ms: None, at_default: 2 });
        let err = SeriesStore::new().read_from(text.as_bytes(), "dump.prom", None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "dump.prom: 2 samples carry no timestamp, the input has none, and no time was given to take them at"
        );
    }

    #[test]
    fn untimed_samples_beyond_the_held_limit_are_stamped_at_the_newest_timestamp_read_so_far() {
        // Limit 2 (text format, ms timestamps T+10 s and T+20 s): lines 1-2 are held; at
        // line 4 (the third untimed) the held two are stamped at the newest so far (T+10 s);
        // lines 4 and 6 are held to the end and stamped at the input's newest (T+20 s).
        const T: i64 = 1_795_948_500_000;
        let text = format!("a 1\nb 1\nm 1 {}\nc 1\nm 2 {}\nd 1\n", T + 10_000, T + 20_000);
        let mut s = SeriesStore { held_limit: Some(2), ..SeriesStore::default() };
        s.read_from(text.as_bytes(), "mixed.prom", Some(T + 99_000)).unwrap();
        s.finish();
        assert_eq!(samples_of(&s, "a").first(), Some(&(T + 10_000, 1.0)));
        assert_eq!(samples_of(&s, "c").first(), Some(&(T + 20_000, 1.0)));
        assert_eq!(samples_of(&s, "d").first(), Some(&(T + 20_000, 1.0)));
        assert_eq!(s.untimed(), UntimedStamps { at_newest: 4, newest_ms: Some(T + 20_000), at_default: 0 });
        // Before any timestamp, a full batch goes to the default time.
        let text = format!("a 1\nb 1\nc 1\nm 1 {}\n", T + 10_000);
        let mut s = SeriesStore { held_limit: Some(2), ..SeriesStore::default() };
        s.read_from(text.as_bytes(), "late.prom", Some(T)).unwrap();
        assert_eq!(s.untimed(), UntimedStamps { at_newest: 1, newest_ms: Some(T + 10_000), at_default: 2 });
    }

    #[test]
    fn the_median_interpolates_like_prometheus_quantile() {
        // Sorted 1, 2, 4, 10: rank 0.5 × 3 = 1.5 → halfway between 2 and 4 = 3.
        assert_eq!(aggregate_values(Agg::Median, &mut [10.0, 1.0, 4.0, 2.0]), 3.0);
        // Odd count: the middle value.
        assert_eq!(aggregate_values(Agg::Median, &mut [5.0, 1.0, 3.0]), 3.0);
        assert_eq!(aggregate_values(Agg::Count, &mut [5.0, f64::NAN]), 2.0);
    }

    #[test]
    fn out_of_order_samples_are_sorted_on_finish() {
        let mut s = SeriesStore::new();
        s.push("m", &[], 2000, 2.0);
        s.push("m", &[], 1000, 1.0);
        s.finish();
        let q = Query::OverTime {
            selector: Selector::metric("m"),
            func: OverTime::Last,
            range_ms: 5000,
            at_ms: 2000,
            aggregation: None,
        };
        assert_eq!(s.evaluate(&q)[0].points[0].1, 2.0);
    }

    /// The instant vector at `t` as rows of labels, reduced and aggregated one instant at
    /// a time: what a range query gives at each step.
    fn instant_by_rows(
        s: &SeriesStore,
        selector: &Selector,
        aggregation: Option<&Aggregation>,
        t: i64,
    ) -> Vec<(BTreeMap<String, String>, f64)> {
        let keep_name = aggregation.is_none();
        let rows: Vec<Row> = s
            .select(selector)
            .into_iter()
            .filter_map(|series| {
                let (sample_t, value) = series.samples.last_at_or_before(t)?;
                (sample_t > t - LOOKBACK_DELTA_MS)
                    .then(|| Row { labels: s.labels_map(series, keep_name), value: Some(value) })
            })
            .collect();
        aggregate(identity::reduce(&selector.hygiene, rows, !keep_name), aggregation)
    }

    #[test]
    fn a_range_query_gives_at_every_step_what_the_rows_of_that_instant_give() {
        // Two vertices × two subtasks; subtask 1 of v1 restarted (attempt 0 stops at 40 s,
        // attempt 1 starts at 30 s), subtask 0 of v2 is scraped by two jobs (`job` a, b)
        // with different values, one series ends at 20 s (then drops out of the lookback),
        // one holds NaN; steps 10 s apart from 0 to 60 s, 5 s scrapes.
        let mut s = SeriesStore::new();
        let series: [(&str, &str, &str, &str, i64, i64); 7] = [
            ("v1", "0", "0", "a", 0, 60),
            ("v1", "1", "0", "a", 0, 40),
            ("v1", "1", "1", "a", 30, 60),
            ("v2", "0", "0", "a", 0, 60),
            ("v2", "0", "0", "b", 0, 60),
            ("v2", "1", "0", "a", 0, 20),
            ("v3", "0", "0", "a", 0, 60),
        ];
        for (n, (task, sub, attempt, job, from_s, to_s)) in series.iter().enumerate() {
            for t_s in (*from_s..=*to_s).step_by(5) {
                let v = if *task == "v3" && t_s == 25 { f64::NAN } else { (n as i64 * 100 + t_s) as f64 };
                let labels =
                    [("task_id", *task), ("subtask_index", *sub), ("task_attempt_num", *attempt), ("job", *job)];
                s.push("busy", &labels, t_s * 1000 + n as i64, v);
            }
        }
        s.finish();
        let hygienes = [
            Hygiene::default(),
            Hygiene { attempts: vec!["0".into(), "1".into()], scrape_labels: vec![] },
            Hygiene { attempts: vec!["0".into(), "1".into()], scrape_labels: vec!["job".into()] },
        ];
        let aggregations = [
            None,
            Some(Aggregation::new(Agg::Max, &["task_id"])),
            Some(Aggregation::new(Agg::Sum, &["task_id", "subtask_index"])),
            Some(Aggregation::new(Agg::Median, &[])),
            Some(Aggregation::without(Agg::Avg, &["job".to_string()])),
        ];
        for hygiene in &hygienes {
            for aggregation in &aggregations {
                let selector = Selector::metric("busy").with_hygiene(hygiene.clone());
                let q = Query::Range {
                    selector: selector.clone(),
                    aggregation: aggregation.clone(),
                    start_ms: 0,
                    end_ms: 60_000,
                    step_ms: 10_000,
                };
                let mut expected: BTreeMap<BTreeMap<String, String>, Vec<(i64, f64)>> = BTreeMap::new();
                for t in (0..=60_000).step_by(10_000) {
                    for (labels, v) in instant_by_rows(&s, &selector, aggregation.as_ref(), t) {
                        expected.entry(labels).or_default().push((t, v));
                    }
                }
                let got = s.evaluate(&q);
                let bits = |points: &[(i64, f64)]| points.iter().map(|p| (p.0, p.1.to_bits())).collect::<Vec<_>>();
                assert_eq!(got.len(), expected.len(), "{hygiene:?} {aggregation:?}");
                for (r, (labels, points)) in got.iter().zip(&expected) {
                    assert_eq!(&r.labels, labels, "{hygiene:?} {aggregation:?}");
                    assert_eq!(bits(&r.points), bits(points), "{hygiene:?} {aggregation:?} {labels:?}");
                }
            }
        }
    }

    #[test]
    fn a_recording_read_line_by_line_keeps_its_samples_in_a_few_bytes_each() {
        let job = crate::samples::synthetic::SyntheticJob {
            vertices: 4,
            subtasks: 8,
            samples: 60,
            start_ms: 1_795_000_000_000,
            job: 0,
        };
        let text = job.write_openmetrics(Vec::new()).unwrap();
        let mut s = SeriesStore::new();
        s.read_from(&text[..], "synthetic", None).unwrap();
        s.finish();
        // 4 job series + 4 metrics × 4 vertices × 8 subtasks = 132 series of 60 samples.
        assert_eq!(s.stats(), StoreStats { series: 132, samples: 132 * 60 });
        // A regular scrape costs a header byte and at most a two-byte delta (first samples
        // of a series aside): well under the 16 bytes of a raw (i64, f64).
        let per_sample = s.sample_bytes() as f64 / (132.0 * 60.0);
        assert!(per_sample < 3.5, "{per_sample} bytes a sample");
        // Every sample is still there, exactly: the last busy value of subtask 0 of
        // vertex 2 (the culprit: 995 + (59 % 3) = 997).
        let q = Query::OverTime {
            selector: Selector::metric("flink_taskmanager_job_task_busyTimeMsPerSecond")
                .with("task_id", &crate::samples::synthetic::SyntheticJob::vertex_id(2))
                .with("subtask_index", "0"),
            func: OverTime::Last,
            range_ms: 60_000,
            at_ms: 1_795_000_000_000 + 59 * 5_000,
            aggregation: None,
        };
        assert_eq!(s.evaluate(&q)[0].points[0].1, 997.0);
    }
}
