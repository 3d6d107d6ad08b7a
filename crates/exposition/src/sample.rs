//! What the reader hands over: sample lines, metric types, and the sink that receives them.

use std::borrow::Cow;
use std::fmt;

use crate::labels::{Dialect, Escapes, Item, NAME_LABEL, name_text, scan_label_set, unescape, unescape_go};

/// One sample line, borrowed from its input line.
///
/// Produced by the reader for every sample line and handed to [`SampleSink::sample`]; it
/// lives only as long as that call (the reader reuses its line buffer).
#[derive(Debug, Clone, PartialEq)]
pub struct SampleLine<'a> {
    /// Metric name (may contain `:`). For a Prometheus 3 quoted name (`{"my.metric", …}`)
    /// it is the text between the quotes, unescaped (owned only when it held escapes).
    pub name: Cow<'a, str>,
    /// The text between `{` and `}` as written, without the braces; "" when there is no
    /// label set. For a Prometheus 3 quoted name it is the text after the name and its
    /// comma, so it only ever holds labels.
    pub labels_raw: &'a str,
    /// The sample value (NaN, +Inf, -Inf allowed).
    pub value: f64,
    /// How the line was written: exposition text, or `promtool tsdb dump` (the name as a
    /// `__name__` label inside `labels_raw`, values quoted the way Go's `strconv.Quote`
    /// writes them).
    pub form: LineForm,
}

/// The way a sample line was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LineForm {
    /// Prometheus text exposition or OpenMetrics: `name{labels} value [timestamp]`, or the
    /// Prometheus 3 quoted form `{"name", labels} value`.
    #[default]
    Exposition,
    /// `promtool tsdb dump` (Prometheus < 2.49): `{__name__="name", labels} value ts_ms`.
    /// The metric name is the `__name__` label, which stays in `labels_raw` and is left
    /// out by [`SampleLine::labels`]; label values are Go-quoted (`\t`, `\xHH`,
    /// `\uHHHH`, … besides `\\`, `\"` and `\n`).
    PromtoolDump,
    /// `promtool tsdb dump-openmetrics` of a Prometheus 3 with UTF-8 names:
    /// `my.metric{a.b="x"} 1 1795000000.000`, the metric name and the label names
    /// written raw, unquoted, whatever they hold (promtool prints the name, then each
    /// label as `name=` and the value Go-quoted, with `strconv.Quote`). Read only when the
    /// line is not valid exposition text.
    PromtoolOpenMetrics,
}

impl<'a> SampleLine<'a> {
    /// A sample line in the exposition form (tests and hand-made lines).
    pub fn new(name: &'a str, labels_raw: &'a str, value: f64) -> Self {
        SampleLine { name: Cow::Borrowed(name), labels_raw, value, form: LineForm::Exposition }
    }

    /// Parses `labels_raw` into (name, value) pairs in written order, unescaping values
    /// (`\\`, `\"`, `\n`).
    ///
    /// Tolerates a trailing comma, whitespace around tokens, an empty set. Label names are
    /// `[a-zA-Z_][a-zA-Z0-9_]*` or double-quoted with the values' escapes (Prometheus 3),
    /// or raw in [`LineForm::PromtoolOpenMetrics`]. Names and values without escapes are
    /// borrowed, others are owned.
    ///
    /// # Errors
    ///
    /// A one-sentence message for a duplicate label name or malformed label text. A line
    /// accepted by the reader can only fail here with a duplicate label name.
    pub fn labels(&self) -> Result<Vec<Label<'a>>, String> {
        let mut pairs: Vec<Label<'a>> = Vec::with_capacity(12);
        let dump = self.form == LineForm::PromtoolDump;
        let dialect = match self.form {
            LineForm::Exposition => Dialect::EXPOSITION,
            LineForm::PromtoolDump => Dialect::DUMP,
            LineForm::PromtoolOpenMetrics => Dialect::DUMP_OPENMETRICS,
        };
        scan_label_set(self.labels_raw, 0, false, dialect, |item, _, _| match item {
            Item::Label { name, name_escaped: false, .. } if dump && name == NAME_LABEL => Ok(()),
            Item::Label { name, value, escaped, name_escaped } => {
                let name = name_text(name, name_escaped);
                if pairs.iter().any(|(seen, _)| *seen == name) {
                    return Err(format!("duplicate label name {name:?} in the label set"));
                }
                let value = match escaped {
                    Escapes::None => Cow::Borrowed(value),
                    Escapes::Exposition => Cow::Owned(unescape(value)),
                    Escapes::Go => Cow::Owned(unescape_go(value)),
                };
                pairs.push((name, value));
                Ok(())
            }
            Item::QuotedName(name, _) => Err(format!("unexpected quoted metric name {name:?} among the labels")),
        })?;
        Ok(pairs)
    }
}

/// A label's name and value, each borrowed from the line unless it held escapes.
pub type Label<'a> = (Cow<'a, str>, Cow<'a, str>);

/// Receives every sample, in file order.
pub trait SampleSink {
    /// Receives one sample line.
    ///
    /// `t_ms` is the sample's timestamp in Unix milliseconds, or None when the line has
    /// none. An Err(String) (one sentence, no trailing period) aborts the read; the reader
    /// reports it with the file and line.
    fn sample(&mut self, line: &SampleLine<'_>, t_ms: Option<i64>) -> Result<(), String>;

    /// `# TYPE family kind` lines, in file order; default: ignore.
    fn metric_type(&mut self, _family: &str, _kind: MetricType) {}
}

/// The kind of a metric family, from a `# TYPE` line.
///
/// The text format's `untyped` reads as [`MetricType::Unknown`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetricType {
    /// `counter`: a monotonically increasing total.
    Counter,
    /// `gauge`: a value that goes up and down.
    Gauge,
    /// `histogram`: cumulative buckets, `_sum` and `_count`.
    Histogram,
    /// `gaugehistogram` (OpenMetrics): a histogram whose buckets may go down.
    GaugeHistogram,
    /// `summary`: quantiles, `_sum` and `_count`.
    Summary,
    /// `info` (OpenMetrics): constant labels, value 1.
    Info,
    /// `stateset` (OpenMetrics): one 0/1 sample per state.
    StateSet,
    /// `unknown` (OpenMetrics) or `untyped` (text format).
    Unknown,
}

impl MetricType {
    /// The OpenMetrics name of the kind, as written in a `# TYPE` line (`"counter"`, …,
    /// `"unknown"`).
    pub fn as_str(self) -> &'static str {
        match self {
            MetricType::Counter => "counter",
            MetricType::Gauge => "gauge",
            MetricType::Histogram => "histogram",
            MetricType::GaugeHistogram => "gaugehistogram",
            MetricType::Summary => "summary",
            MetricType::Info => "info",
            MetricType::StateSet => "stateset",
            MetricType::Unknown => "unknown",
        }
    }

    /// The kind named by a `# TYPE` line's last token (case-sensitive, as the formats
    /// require); `untyped` is [`MetricType::Unknown`]. None for any other word.
    pub fn from_name(name: &str) -> Option<MetricType> {
        Some(match name {
            "counter" => MetricType::Counter,
            "gauge" => MetricType::Gauge,
            "histogram" => MetricType::Histogram,
            "gaugehistogram" => MetricType::GaugeHistogram,
            "summary" => MetricType::Summary,
            "info" => MetricType::Info,
            "stateset" => MetricType::StateSet,
            "unknown" | "untyped" => MetricType::Unknown,
            _ => return None,
        })
    }
}

impl fmt::Display for MetricType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
