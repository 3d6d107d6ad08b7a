//! The few query shapes the diagnosis needs, as data.
//!
//! Every number a snapshot holds comes from one of these shapes, evaluated either by
//! Prometheus (rendered with [`Query::to_promql`]) or over an in-memory recording
//! ([`crate::collect::store::SeriesStore::evaluate`]) with the same semantics. Keeping the
//! shapes few and explicit is what makes a live verdict equal the verdict of its recording.
//!
//! Pure: no IO.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// How a label is matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MatchOp {
    /// `label="value"`
    Equal(String),
    /// `label=~"a|b|c"`: one of these literal values (rendered as an escaped alternation).
    OneOf(Vec<String>),
    /// `label=~".+suffix"`: a non-empty value ending with this literal suffix.
    EndsWith(String),
    /// `label!~"a|b|c"`: none of these literal values (a missing label is the empty string,
    /// so it matches unless "" is listed).
    NotOneOf(Vec<String>),
    /// `label=~"…"`: a value whose form after Flink's reporter filter
    /// ([`crate::model::graph::sanitize_label_value`]) is one of these: a `_` stands for any
    /// character the filter replaces. Joins a sanitized `tm_id` (`lab_tm_1`) to the pod name
    /// another exporter writes as it is (`lab-tm-1`).
    SanitizedOneOf(Vec<String>),
}

/// One label matcher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matcher {
    pub label: String,
    pub op: MatchOp,
}

/// A series selector: matchers, the metric name being the `__name__` matcher, and how
/// series that stand for the same thing are reduced to one ([`Hygiene`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    pub matchers: Vec<Matcher>,
    pub hygiene: Hygiene,
}

/// The label Flink's reporter gives every task and operator series: the attempt of the
/// subtask that reported it (0, then one more per restart of that subtask).
pub const ATTEMPT_LABEL: &str = "task_attempt_num";
/// The labels that say which subtask a series belongs to, within one job.
pub const SUBTASK_LABELS: [&str; 2] = ["task_id", "subtask_index"];

/// Series that stand for the same thing, reduced to one before any aggregation. Applied by
/// [`Query::to_promql`] and, over a recording, by [`crate::collect::identity::reduce`]:
/// both give the same series.
///
/// * `attempts`: the `task_attempt_num` values seen for the job, ascending by number. With
///   two or more, a series of a listed attempt is left out while a series of a higher
///   listed attempt of the same subtask (`task_id`, `subtask_index`) has samples: only the
///   newest attempt of each subtask counts (a restart, or a PushGateway that keeps serving
///   a dead TaskManager's last push). Series of unlisted attempts, or without the label
///   (JobManager, TaskManager), always count.
/// * `scrape_labels`: labels that only say how a series was scraped (`job`, `instance`,
///   `pod`, …). Non-empty: series equal but for these count once (`max without (…)`), so
///   one target scraped by two scrape jobs is not summed or counted twice. Not applied to
///   a range query without aggregation, whose series keep their metric names.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Hygiene {
    pub attempts: Vec<String>,
    pub scrape_labels: Vec<String>,
}

impl Hygiene {
    /// True when it changes nothing.
    pub fn is_empty(&self) -> bool {
        self.attempts.len() < 2 && self.scrape_labels.is_empty()
    }
}

impl Selector {
    /// All series of one metric.
    pub fn metric(name: &str) -> Self {
        Selector::of(vec![Matcher { label: "__name__".into(), op: MatchOp::Equal(name.into()) }])
    }

    fn of(matchers: Vec<Matcher>) -> Self {
        Selector { matchers, hygiene: Hygiene::default() }
    }

    /// All series of any of these metrics.
    pub fn metrics<S: AsRef<str>>(names: &[S]) -> Self {
        let names: Vec<String> = names.iter().map(|n| n.as_ref().to_string()).collect();
        let op = if names.len() == 1 { MatchOp::Equal(names[0].clone()) } else { MatchOp::OneOf(names) };
        Selector::of(vec![Matcher { label: "__name__".into(), op }])
    }

    /// All series of metrics whose name ends with `suffix` (one RocksDB metric in every
    /// column family, whichever way the reporter names them).
    pub fn metric_suffix(suffix: &str) -> Self {
        Selector::of(vec![Matcher { label: "__name__".into(), op: MatchOp::EndsWith(suffix.into()) }])
    }

    /// Adds `label="value"`.
    pub fn with(mut self, label: &str, value: &str) -> Self {
        self.matchers.push(Matcher { label: label.into(), op: MatchOp::Equal(value.into()) });
        self
    }

    /// Adds `label=~"v1|v2|…"` (literal values).
    pub fn with_one_of(mut self, label: &str, values: &[String]) -> Self {
        self.matchers.push(Matcher { label: label.into(), op: MatchOp::OneOf(values.to_vec()) });
        self
    }

    /// Adds a matcher for values whose reporter-sanitized form is one of `values`
    /// ([`MatchOp::SanitizedOneOf`]).
    pub fn with_sanitized_one_of(mut self, label: &str, values: &[String]) -> Self {
        self.matchers.push(Matcher { label: label.into(), op: MatchOp::SanitizedOneOf(values.to_vec()) });
        self
    }

    /// Adds `label!~"v1|v2|…"` (literal values).
    pub fn without_any_of(mut self, label: &str, values: &[String]) -> Self {
        self.matchers.push(Matcher { label: label.into(), op: MatchOp::NotOneOf(values.to_vec()) });
        self
    }

    /// The same selector, reducing duplicate series as `hygiene` says.
    pub fn with_hygiene(mut self, hygiene: Hygiene) -> Self {
        self.hygiene = hygiene;
        self
    }

    /// True when the label set matches (a missing label matches only the empty string).
    pub fn matches<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.matchers.iter().all(|m| {
            let value = get(&m.label).unwrap_or("");
            match &m.op {
                MatchOp::Equal(v) => value == v,
                MatchOp::OneOf(vs) => vs.iter().any(|v| v == value),
                MatchOp::EndsWith(suffix) => value.len() > suffix.len() && value.ends_with(suffix.as_str()),
                MatchOp::NotOneOf(vs) => !vs.iter().any(|v| v == value),
                MatchOp::SanitizedOneOf(vs) => {
                    let clean = crate::model::graph::sanitize_label_value(value);
                    vs.contains(&clean)
                }
            }
        })
    }

    /// PromQL text of the matchers (the [`Hygiene`] is rendered by [`Query::to_promql`]),
    /// every value escaped for a PromQL double-quoted string (`\`, `"`, newline) and,
    /// inside `=~` and `!~`, for RE2.
    ///
    /// A metric name that is not `[a-zA-Z_:][a-zA-Z0-9_:]*` (a Prometheus 3 UTF-8 name such
    /// as `flink.taskmanager.job.task.busyTimeMsPerSecond`) is written first and quoted,
    /// `{"flink.…", job_id="…"}`, and a label name that is not `[a-zA-Z_][a-zA-Z0-9_]*` is
    /// quoted too (`"a.b"="x"`), as the [UTF-8 guide](https://prometheus.io/docs/guides/utf8/)
    /// of Prometheus 3 writes them; legacy names keep the form every store reads,
    /// `{__name__="m", a="x"}`.
    pub fn to_promql(&self) -> String {
        let mut out = String::from("{");
        let quoted_name = self.matchers.first().and_then(|m| match &m.op {
            MatchOp::Equal(v) if m.label == "__name__" && !is_legacy_metric_name(v) => Some(v),
            _ => None,
        });
        let rest = match quoted_name {
            Some(name) => {
                let _ = write!(out, "\"{}\"", escape_promql_string(name));
                &self.matchers[1..]
            }
            None => &self.matchers[..],
        };
        for (i, m) in rest.iter().enumerate() {
            if i > 0 || quoted_name.is_some() {
                out.push_str(", ");
            }
            let label = promql_label(&m.label);
            match &m.op {
                MatchOp::Equal(v) => {
                    let _ = write!(out, "{label}=\"{}\"", escape_promql_string(v));
                }
                MatchOp::OneOf(vs) => {
                    let alternation = vs.iter().map(|v| escape_regex(v)).collect::<Vec<_>>().join("|");
                    let _ = write!(out, "{label}=~\"{}\"", escape_promql_string(&alternation));
                }
                MatchOp::EndsWith(suffix) => {
                    let _ = write!(out, "{label}=~\".+{}\"", escape_promql_string(&escape_regex(suffix)));
                }
                MatchOp::NotOneOf(vs) => {
                    let alternation = vs.iter().map(|v| escape_regex(v)).collect::<Vec<_>>().join("|");
                    let _ = write!(out, "{label}!~\"{}\"", escape_promql_string(&alternation));
                }
                MatchOp::SanitizedOneOf(vs) => {
                    let alternation = vs.iter().map(|v| sanitized_regex(v)).collect::<Vec<_>>().join("|");
                    let _ = write!(out, "{label}=~\"{}\"", escape_promql_string(&alternation));
                }
            }
        }
        out.push('}');
        out
    }
}

/// Whether a metric name needs no quotes in PromQL: `[a-zA-Z_:][a-zA-Z0-9_:]*`.
fn is_legacy_metric_name(name: &str) -> bool {
    crate::collect::exposition::is_valid_metric_name(name)
}

/// A label name as PromQL writes it: bare when it is `[a-zA-Z_][a-zA-Z0-9_]*`, else
/// double-quoted and escaped (Prometheus 3), in matchers and in `by`, `without` and `on`
/// lists alike.
pub fn promql_label(name: &str) -> std::borrow::Cow<'_, str> {
    if crate::collect::exposition::is_valid_label_name(name) {
        std::borrow::Cow::Borrowed(name)
    } else {
        std::borrow::Cow::Owned(format!("\"{}\"", escape_promql_string(name)))
    }
}

/// A list of label names for `by (…)`, `without (…)` or `on(…)`, each as [`promql_label`].
fn promql_labels<S: AsRef<str>>(names: &[S]) -> String {
    names.iter().map(|n| promql_label(n.as_ref())).collect::<Vec<_>>().join(", ")
}

/// Escapes a value for a PromQL double-quoted string literal.
pub fn escape_promql_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out
}

/// Escapes RE2 metacharacters so a literal matches only itself.
/// The regex of the values whose reporter-sanitized form is `v`: each `_` any character
/// the filter replaces (anything but an ASCII letter, digit or `:`), the rest literal.
fn sanitized_regex(v: &str) -> String {
    v.split('_').map(escape_regex).collect::<Vec<_>>().join("[^a-zA-Z0-9:]")
}

pub fn escape_regex(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A function over each series' raw samples in a range `(at - range, at]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverTime {
    Avg,
    Max,
    Min,
    Last,
    /// The number of samples.
    Count,
    /// Per-second rate of a counter, with Prometheus' extrapolation and reset handling.
    Rate,
}

/// Aggregation across series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agg {
    Sum,
    Max,
    Min,
    Avg,
    /// The number of series.
    Count,
    /// `quantile(0.5, …)`: the median, interpolated between the two middle values.
    Median,
}

/// An aggregation and the labels it keeps (`<agg> by (<by>)`), or drops
/// (`<agg> without (<by>)`, when `without`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Aggregation {
    pub agg: Agg,
    pub by: Vec<String>,
    pub without: bool,
}

impl Aggregation {
    pub fn new(agg: Agg, by: &[&str]) -> Self {
        Aggregation { agg, by: by.iter().map(|s| s.to_string()).collect(), without: false }
    }

    /// `<agg> without (<labels>)`: every label but these (and the metric name) is kept.
    pub fn without(agg: Agg, labels: &[String]) -> Self {
        Aggregation { agg, by: labels.to_vec(), without: true }
    }
}

/// One query.
#[derive(Debug, Clone, PartialEq)]
pub enum Query {
    /// `<agg> by (…) (<fn>_over_time(<selector>[<range_ms>ms]))` at `at_ms`: one value per
    /// result series.
    OverTime { selector: Selector, func: OverTime, range_ms: i64, at_ms: i64, aggregation: Option<Aggregation> },
    /// `<agg> by (…) (<selector>)` evaluated at `start_ms, start_ms + step_ms, … ≤ end_ms`.
    Range { selector: Selector, aggregation: Option<Aggregation>, start_ms: i64, end_ms: i64, step_ms: i64 },
    /// `max(timestamp(<s1>) or timestamp(<s2>) …)` at `at_ms`: the time of the newest sample
    /// the store shows at `at_ms` (within the lookback delta) among these series, in
    /// seconds; no series when none has one. Staleness is judged against it, not against
    /// the wall clock: a store may hide its newest samples (VictoriaMetrics'
    /// `-search.latencyOffset`, 30 s by default) or receive them late (remote write).
    Newest { selectors: Vec<Selector>, at_ms: i64 },
}

impl Query {
    /// The PromQL expression (without the evaluation time or range parameters).
    pub fn to_promql(&self) -> String {
        match self {
            Query::OverTime { selector, func, range_ms, aggregation, .. } => {
                let name = match func {
                    OverTime::Avg => "avg_over_time",
                    OverTime::Max => "max_over_time",
                    OverTime::Min => "min_over_time",
                    OverTime::Last => "last_over_time",
                    OverTime::Count => "count_over_time",
                    OverTime::Rate => "rate",
                };
                let inner = newest_attempts(
                    selector,
                    |s| format!("{name}({}[{range_ms}ms])", s.to_promql()),
                    |s| format!("count_over_time({}[{range_ms}ms])", s.to_promql()),
                );
                wrap_aggregation(aggregation.as_ref(), once_per_target(&selector.hygiene, inner))
            }
            Query::Range { selector, aggregation, .. } => {
                let inner = newest_attempts(selector, |s| s.to_promql(), |s| s.to_promql());
                let inner = if aggregation.is_some() { once_per_target(&selector.hygiene, inner) } else { inner };
                wrap_aggregation(aggregation.as_ref(), inner)
            }
            Query::Newest { selectors, .. } => {
                let parts: Vec<String> = selectors.iter().map(|s| format!("timestamp({})", s.to_promql())).collect();
                format!("max({})", parts.join(" or "))
            }
        }
    }
}

/// The series of `selector` with only the newest listed attempt of each subtask:
/// `(f(s{a="0"}) unless on(task_id, subtask_index) present(s{a=~"1|2"})) or (f(s{a="1"})
/// unless on(…) present(s{a=~"2"})) or f(s{a!~"0|1"})` for attempts 0, 1, 2. `f` gives the
/// values, `present` the series that have samples.
fn newest_attempts(
    selector: &Selector,
    f: impl Fn(&Selector) -> String,
    present: impl Fn(&Selector) -> String,
) -> String {
    let attempts = &selector.hygiene.attempts;
    if attempts.len() < 2 {
        return f(selector);
    }
    let older = &attempts[..attempts.len() - 1];
    let mut parts: Vec<String> = older
        .iter()
        .enumerate()
        .map(|(i, a)| {
            format!(
                "({} unless on({}) {})",
                f(&selector.clone().with(ATTEMPT_LABEL, a)),
                promql_labels(&SUBTASK_LABELS),
                present(&selector.clone().with_one_of(ATTEMPT_LABEL, &attempts[i + 1..]))
            )
        })
        .collect();
    parts.push(f(&selector.clone().without_any_of(ATTEMPT_LABEL, older)));
    parts.join(" or ")
}

/// `max without (<scrape labels>) (inner)`: one series per scraped series, however many
/// scrape jobs read it.
fn once_per_target(hygiene: &Hygiene, inner: String) -> String {
    if hygiene.scrape_labels.is_empty() {
        inner
    } else {
        format!("max without ({}) ({inner})", promql_labels(&hygiene.scrape_labels))
    }
}

fn wrap_aggregation(aggregation: Option<&Aggregation>, inner: String) -> String {
    match aggregation {
        None => inner,
        Some(a) => {
            let name = match a.agg {
                Agg::Sum => "sum",
                Agg::Max => "max",
                Agg::Min => "min",
                Agg::Avg => "avg",
                Agg::Count => "count",
                Agg::Median => "quantile",
            };
            let param = if a.agg == Agg::Median { "0.5, " } else { "" };
            let keyword = if a.without { "without" } else { "by" };
            format!("{name} {keyword} ({}) ({param}{inner})", promql_labels(&a.by))
        }
    }
}

/// One result series: its labels (after aggregation) and its points `(t_ms, value)`,
/// oldest first. An `OverTime` result has exactly one point, at `at_ms`.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultSeries {
    pub labels: BTreeMap<String, String>,
    pub points: Vec<(i64, f64)>,
}

impl ResultSeries {
    /// The value of a label, "" when absent.
    pub fn label(&self, name: &str) -> &str {
        self.labels.get(name).map(String::as_str).unwrap_or("")
    }

    /// The last point's value.
    pub fn last_value(&self) -> Option<f64> {
        self.points.last().map(|p| p.1)
    }
}

/// A query's answer: zero or more series.
pub type QueryResult = Vec<ResultSeries>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sanitized_value_matches_every_name_the_reporter_filter_maps_to_it_and_no_other() {
        // tm_id `lab_tm_1` is pod `lab-tm-1` (or `lab.tm.1`, or `lab_tm_1` itself).
        let sel =
            Selector::metric("container_cpu_cfs_periods_total").with_sanitized_one_of("pod", &["lab_tm_1".into()]);
        assert_eq!(
            sel.to_promql(),
            r#"{__name__="container_cpu_cfs_periods_total", pod=~"lab[^a-zA-Z0-9:]tm[^a-zA-Z0-9:]1"}"#
        );
        let has = |pod: &'static str| {
            sel.matches(|l| match l {
                "__name__" => Some("container_cpu_cfs_periods_total"),
                "pod" => Some(pod),
                _ => None,
            })
        };
        assert!(has("lab-tm-1") && has("lab.tm.1") && has("lab_tm_1"));
        assert!(!has("labxtm1") && !has("lab-tm-10") && !has("lab-tm-2"));
    }

    #[test]
    fn hostile_label_values_are_escaped_in_promql() {
        let s = Selector::metric("flink_jobmanager_job_uptime").with("job_name", "a\"} or vector(1) or {\"\\\n");
        assert_eq!(
            s.to_promql(),
            r#"{__name__="flink_jobmanager_job_uptime", job_name="a\"} or vector(1) or {\"\\\n"}"#
        );
    }

    #[test]
    fn one_of_matchers_escape_regex_metacharacters() {
        let s = Selector::metrics(&["a.b", "c|d"]);
        assert_eq!(s.to_promql(), r#"{__name__=~"a\\.b|c\\|d"}"#);
    }

    #[test]
    fn aggregations_wrap_the_function() {
        let q = Query::OverTime {
            selector: Selector::metric("m").with("job_id", "j"),
            func: OverTime::Rate,
            range_ms: 300_000,
            at_ms: 0,
            aggregation: Some(Aggregation::new(Agg::Sum, &["task_id", "subtask_index"])),
        };
        assert_eq!(q.to_promql(), r#"sum by (task_id, subtask_index) (rate({__name__="m", job_id="j"}[300000ms]))"#);
    }

    #[test]
    fn only_the_newest_attempt_counts_in_promql_too() {
        let hygiene = Hygiene { attempts: vec!["0".into(), "1".into(), "2".into()], scrape_labels: vec![] };
        let q = Query::OverTime {
            selector: Selector::metric("m").with("job_id", "j").with_hygiene(hygiene),
            func: OverTime::Avg,
            range_ms: 60_000,
            at_ms: 0,
            aggregation: Some(Aggregation::new(Agg::Max, &["task_id"])),
        };
        assert_eq!(
            q.to_promql(),
            concat!(
                r#"max by (task_id) ("#,
                r#"(avg_over_time({__name__="m", job_id="j", task_attempt_num="0"}[60000ms]) unless on(task_id, subtask_index) count_over_time({__name__="m", job_id="j", task_attempt_num=~"1|2"}[60000ms]))"#,
                r#" or (avg_over_time({__name__="m", job_id="j", task_attempt_num="1"}[60000ms]) unless on(task_id, subtask_index) count_over_time({__name__="m", job_id="j", task_attempt_num=~"2"}[60000ms]))"#,
                r#" or avg_over_time({__name__="m", job_id="j", task_attempt_num!~"0|1"}[60000ms]))"#
            )
        );
    }

    #[test]
    fn each_target_counts_once_before_the_aggregation_but_not_in_a_raw_range() {
        let hygiene = Hygiene { attempts: vec![], scrape_labels: vec!["job".into(), "instance".into()] };
        let selector = Selector::metric("m").with_hygiene(hygiene);
        let range =
            |aggregation| Query::Range { selector: selector.clone(), aggregation, start_ms: 0, end_ms: 0, step_ms: 1 };
        assert_eq!(
            range(Some(Aggregation::new(Agg::Sum, &["task_id"]))).to_promql(),
            r#"sum by (task_id) (max without (job, instance) ({__name__="m"}))"#
        );
        // A raw range keeps metric names (max would drop them): the series stay apart.
        assert_eq!(range(None).to_promql(), r#"{__name__="m"}"#);
    }

    #[test]
    fn a_utf8_metric_name_is_written_first_and_quoted_as_prometheus_3_reads_it() {
        let s = Selector::metric("flink.taskmanager.job.task.busyTimeMsPerSecond").with("job_id", "j");
        assert_eq!(s.to_promql(), r#"{"flink.taskmanager.job.task.busyTimeMsPerSecond", job_id="j"}"#);
        // Only the name: nothing after it.
        assert_eq!(Selector::metric("a.b").to_promql(), r#"{"a.b"}"#);
        // A legacy name keeps the __name__ form every store reads.
        assert_eq!(Selector::metric("flink_x").with("a", "b").to_promql(), r#"{__name__="flink_x", a="b"}"#);
        // Several names, or a suffix, stay a regex on __name__, dots escaped for RE2.
        assert_eq!(Selector::metrics(&["a.b", "c.d"]).to_promql(), r#"{__name__=~"a\\.b|c\\.d"}"#);
    }

    #[test]
    fn a_hostile_utf8_metric_name_and_label_values_are_escaped_inside_their_quotes() {
        let s = Selector::metric("a\"} or vector(1) or {\"b").with("job_name", "x\"}\n");
        assert_eq!(s.to_promql(), r#"{"a\"} or vector(1) or {\"b", job_name="x\"}\n"}"#);
    }

    #[test]
    fn utf8_label_names_are_quoted_in_matchers_and_in_by_without_and_on() {
        let hygiene =
            Hygiene { attempts: vec!["0".into(), "1".into()], scrape_labels: vec!["service.instance.id".into()] };
        let q = Query::OverTime {
            selector: Selector::metric("m.x").with("job.id", "j\"").with_hygiene(hygiene),
            func: OverTime::Avg,
            range_ms: 60_000,
            at_ms: 0,
            aggregation: Some(Aggregation::new(Agg::Max, &["task.id", "subtask_index"])),
        };
        assert_eq!(
            q.to_promql(),
            concat!(
                r#"max by ("task.id", subtask_index) (max without ("service.instance.id") ("#,
                r#"(avg_over_time({"m.x", "job.id"="j\"", task_attempt_num="0"}[60000ms]) unless on(task_id, subtask_index) count_over_time({"m.x", "job.id"="j\"", task_attempt_num=~"1"}[60000ms]))"#,
                r#" or avg_over_time({"m.x", "job.id"="j\"", task_attempt_num!~"0"}[60000ms])))"#
            )
        );
    }

    #[test]
    fn matching_treats_a_missing_label_as_empty() {
        let s = Selector::metric("m").with("x", "");
        assert!(s.matches(|l| if l == "__name__" { Some("m") } else { None }));
        assert!(!s.matches(|l| if l == "__name__" { Some("n") } else { None }));
    }
}
