//! Prometheus text exposition (format 0.0.4) and OpenMetrics 1.0 text: a reader and a writer.
//!
//! The reader serves two kinds of input:
//!
//! * recordings exported from Prometheus (`*.om.gz`): OpenMetrics with timestamps in
//!   seconds, ending with `# EOF`;
//! * raw scrape dumps of Flink's Prometheus reporter (`*.prom`): no timestamps, no `# EOF`,
//!   label sets ending in `,}`, values such as `1.5156E10` or `NaN`.
//!
//! Its one hard rule: **it never drops a sample silently**. Every sample line reaches the
//! [`SampleSink`], in file order, and any line it cannot read stops the read with a
//! [`ReadError`] naming the input and the 1-based line number.
//!
//! The hot path does not allocate per line: one line buffer is reused, [`SampleLine`]
//! borrows from it, and label sets are only validated while reading; they are split into
//! pairs by [`SampleLine::labels`] when the sink asks for them.
//!
//! [`OpenMetricsWriter`] writes OpenMetrics text that this reader reads back bit-exactly.

use std::borrow::Cow;
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::Path;

/// Size of the read buffer: large, because recordings run to gigabytes.
const READ_BUFFER_BYTES: usize = 1 << 20;

/// Size of the writer's output buffer.
const WRITE_BUFFER_BYTES: usize = 1 << 16;

/// An integer timestamp with at least this absolute value is in milliseconds (text format
/// 0.0.4); a smaller one is in seconds (OpenMetrics). 1e11 ms is 1973; 1e11 s is year 5138.
const MILLISECONDS_THRESHOLD: i64 = 100_000_000_000;

/// The first two bytes of a gzip stream.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Longest piece of offending input quoted in an error message, in characters.
const SHOWN_CHARS: usize = 40;

// ---------------------------------------------------------------------------------------
// Public types
// ---------------------------------------------------------------------------------------

/// One sample line, borrowed from its input line.
///
/// Produced by the reader for every sample line and handed to [`SampleSink::sample`]; it
/// lives only as long as that call (the reader reuses its line buffer).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SampleLine<'a> {
    /// Metric name as written (may contain `:`). For a Prometheus 3 quoted name
    /// (`{"my.metric", …}`) it is the text between the quotes.
    pub name: &'a str,
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
}

impl<'a> SampleLine<'a> {
    /// A sample line in the exposition form (tests and hand-made lines).
    pub fn new(name: &'a str, labels_raw: &'a str, value: f64) -> Self {
        SampleLine { name, labels_raw, value, form: LineForm::Exposition }
    }

    /// Parses `labels_raw` into (name, value) pairs in written order, unescaping values
    /// (`\\`, `\"`, `\n`).
    ///
    /// Tolerates a trailing comma, whitespace around tokens, an empty set. Label names are
    /// `[a-zA-Z_][a-zA-Z0-9_]*` or double-quoted without escapes (Prometheus 3). Values
    /// without escapes are borrowed, others are owned.
    ///
    /// # Errors
    ///
    /// A one-sentence message for a duplicate label name or malformed label text. A line
    /// accepted by the reader can only fail here with a duplicate label name.
    pub fn labels(&self) -> Result<Vec<(&'a str, Cow<'a, str>)>, String> {
        let mut pairs: Vec<(&'a str, Cow<'a, str>)> = Vec::with_capacity(12);
        let dump = self.form == LineForm::PromtoolDump;
        scan_label_set(self.labels_raw, 0, false, dump, |item, _, _| match item {
            Item::Label { name, .. } if dump && name == NAME_LABEL => Ok(()),
            Item::Label { name, value, escaped } => {
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
            Item::QuotedName(name) => Err(format!("unexpected quoted metric name {name:?} among the labels")),
        })?;
        Ok(pairs)
    }
}

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

/// The format an input turned out to be in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Prometheus text exposition 0.0.4: the input did not end with `# EOF`.
    Text,
    /// OpenMetrics 1.0 text: the input ended with `# EOF` (blank lines after it allowed).
    OpenMetrics,
}

/// What one read saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadSummary {
    /// Lines read, all kinds (samples, comments, blank lines); a last line without a
    /// newline counts.
    pub lines: u64,
    /// Sample lines handed to the sink (every one in the input).
    pub samples: u64,
    /// Of those, the samples that carried a timestamp.
    pub with_timestamp: u64,
    /// [`Format::OpenMetrics`] when the input ended with `# EOF`, else [`Format::Text`].
    pub format: Format,
    /// The unit the input's timestamps were written in; None without timestamps.
    pub timestamp_unit: Option<TimeUnit>,
}

/// Error with the input name and, when it concerns a line, the 1-based line number.
///
/// Display is ONE sentence without a trailing period, e.g.
/// `examples/x.prom:12: expected a sample value after the label set, found "abc"` or
/// `missing.om.gz: cannot open: No such file or directory (os error 2)`.
#[derive(Debug, thiserror::Error)]
pub struct ReadError {
    /// The input's name: the path as given to [`read_path`], or `source` of [`read_from`].
    pub source_name: String,
    /// The 1-based line the error concerns; None when it concerns the whole input (for
    /// instance it cannot be opened). For a read or decompression failure it is the line
    /// being read.
    pub line: Option<u64>,
    /// What went wrong, one sentence starting in lower case, without a trailing period.
    pub message: String,
    /// The input is JSON (a job plan or an API answer given where metrics belong), so a
    /// caller can say which option takes it.
    pub json: bool,
}

impl ReadError {
    /// Builds an error about `source_name`, at `line` when given.
    pub fn new(source_name: &str, line: Option<u64>, message: impl Into<String>) -> ReadError {
        ReadError { source_name: source_name.to_owned(), line, message: message.into(), json: false }
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{}: {}", self.source_name, line, self.message),
            None => write!(f, "{}: {}", self.source_name, self.message),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------

/// Reads a file (plain, or gzip detected by its magic bytes 1f 8b, not by the extension)
/// and hands every sample to `sink`, in file order.
///
/// Errors name the file as `path.display()` shows it.
///
/// # Errors
///
/// A [`ReadError`] without a line when the file cannot be opened; otherwise as
/// [`read_from`].
pub fn read_path(path: &Path, sink: &mut impl SampleSink) -> Result<ReadSummary, ReadError> {
    let source = path.display().to_string();
    let file = File::open(path).map_err(|e| ReadError::new(&source, None, format!("cannot open: {e}")))?;
    read_from(file, &source, sink)
}

/// Same as [`read_path`] over any reader (plain, or gzip detected by its magic bytes);
/// `source` names the input in errors. The reader is wrapped in a 1 MiB buffer.
///
/// # Errors
///
/// A [`ReadError`] naming `source` and the 1-based line for: a line that is not a blank
/// line, a comment or a well-formed sample; invalid UTF-8; a `# TYPE` line with a missing
/// or unknown kind; anything but blank lines after `# EOF`; a timestamp whose unit
/// contradicts the input's first one; an I/O or gzip failure (at the line being read); an
/// error returned by the sink.
pub fn read_from(mut reader: impl Read, source: &str, sink: &mut impl SampleSink) -> Result<ReadSummary, ReadError> {
    // Peek at the first two bytes without assuming a single read returns both.
    let mut magic = [0u8; 2];
    let mut got = 0;
    while got < magic.len() {
        match reader.read(&mut magic[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ReadError::new(source, Some(1), format!("cannot read: {e}"))),
        }
    }
    let head = &magic[..got];
    let input = head.chain(reader);
    if head == GZIP_MAGIC {
        let decoder = flate2::read::MultiGzDecoder::new(input);
        read_lines(BufReader::with_capacity(READ_BUFFER_BYTES, decoder), source, "cannot read the gzip stream", sink)
    } else {
        read_lines(BufReader::with_capacity(READ_BUFFER_BYTES, input), source, "cannot read", sink)
    }
}

/// The unit of an input's timestamps, fixed by its first timestamped sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeUnit {
    Seconds,
    Milliseconds,
}

impl TimeUnit {
    /// `seconds` or `milliseconds`.
    pub fn name(self) -> &'static str {
        match self {
            TimeUnit::Seconds => "seconds",
            TimeUnit::Milliseconds => "milliseconds",
        }
    }
}

/// The line loop: one reused buffer, one line at a time.
fn read_lines<R: BufRead, S: SampleSink + ?Sized>(
    mut input: R,
    source: &str,
    io_context: &str,
    sink: &mut S,
) -> Result<ReadSummary, ReadError> {
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let mut summary =
        ReadSummary { lines: 0, samples: 0, with_timestamp: 0, format: Format::Text, timestamp_unit: None };
    // The unit of this input's timestamps and the line that decided it.
    let mut unit: Option<(TimeUnit, u64)> = None;
    // The line of `# EOF`, once seen.
    let mut eof_line: Option<u64> = None;
    let mut last_head = LastHead::default();

    loop {
        buf.clear();
        let read = input
            .read_until(b'\n', &mut buf)
            .map_err(|e| ReadError::new(source, Some(summary.lines + 1), format!("{io_context}: {e}")))?;
        if read == 0 {
            break;
        }
        summary.lines += 1;
        let line_no = summary.lines;
        let mut bytes = buf.as_slice();
        if let [rest @ .., b'\n'] = bytes {
            bytes = rest;
        }
        if let [rest @ .., b'\r'] = bytes {
            bytes = rest;
        }
        if line_no == 1
            && let Some(rest) = bytes.strip_prefix(b"\xEF\xBB\xBF")
        {
            bytes = rest;
        }
        let line = std::str::from_utf8(bytes).map_err(|e| {
            ReadError::new(
                source,
                Some(line_no),
                format!("the line is not valid UTF-8 (invalid byte at column {})", e.valid_up_to() + 1),
            )
        })?;
        let body = line.trim_matches(is_blank_char);
        if body.is_empty() {
            continue;
        }
        if let Some(eof) = eof_line {
            return Err(ReadError::new(
                source,
                Some(line_no),
                format!("unexpected content after \"# EOF\" on line {eof}: {}", show(body)),
            ));
        }
        if body.as_bytes()[0] == b'#' {
            match parse_comment(body) {
                Ok(Comment::Eof) => eof_line = Some(line_no),
                Ok(Comment::Type(family, kind)) => sink.metric_type(family, kind),
                Ok(Comment::Other) => {}
                Err(message) => return Err(ReadError::new(source, Some(line_no), message)),
            }
            continue;
        }
        let (sample, timestamp) = parse_sample_after(body, &mut last_head).map_err(|m| {
            if summary.samples == 0 && looks_like_json(body) {
                let mut e = ReadError::new(
                    source,
                    Some(line_no),
                    "this is JSON, not Prometheus text exposition or OpenMetrics",
                );
                e.json = true;
                e
            } else {
                ReadError::new(source, Some(line_no), m)
            }
        })?;
        let t_ms = match timestamp {
            None => None,
            Some(token) => {
                let (this_unit, ms) = parse_timestamp(token).map_err(|m| ReadError::new(source, Some(line_no), m))?;
                if !time_in_range(ms) {
                    return Err(ReadError::new(
                        source,
                        Some(line_no),
                        format!("timestamp {} is outside the years -9999 to 9999", show(token)),
                    ));
                }
                match unit {
                    None => unit = Some((this_unit, line_no)),
                    Some((first, first_line)) if first != this_unit => {
                        return Err(ReadError::new(
                            source,
                            Some(line_no),
                            format!(
                                "timestamp {} is in {} but the input's first timestamp (line {first_line}) was in {}",
                                show(token),
                                this_unit.name(),
                                first.name()
                            ),
                        ));
                    }
                    Some(_) => {}
                }
                summary.with_timestamp += 1;
                Some(ms)
            }
        };
        summary.samples += 1;
        sink.sample(&sample, t_ms).map_err(|m| ReadError::new(source, Some(line_no), m))?;
    }
    if eof_line.is_some() {
        summary.format = Format::OpenMetrics;
    }
    summary.timestamp_unit = unit.map(|(u, _)| u);
    Ok(summary)
}

/// Whether a line that is not a sample opens a JSON document: `[`, or `{` followed by the
/// end of the line, `}` ending it, or a `"key":` (no exposition line has a `:` after a quoted
/// string at the start of a label set).
fn looks_like_json(line: &str) -> bool {
    let b = line.as_bytes();
    match b.first() {
        Some(b'[') => true,
        Some(b'{') => {
            let i = skip_blanks(b, 1);
            match b.get(i) {
                None => true,
                Some(b'}') => skip_blanks(b, i + 1) == b.len(),
                Some(b'"') => {
                    let close = b[i + 1..].iter().position(|&c| c == b'"').map(|k| i + 1 + k);
                    close.is_some_and(|c| b.get(skip_blanks(b, c + 1)) == Some(&b':'))
                }
                _ => false,
            }
        }
        _ => false,
    }
}

/// What a `#` line is.
enum Comment<'a> {
    Eof,
    Type(&'a str, MetricType),
    Other,
}

/// Classifies a comment line (`line` starts with `#`, no surrounding blanks).
fn parse_comment(line: &str) -> Result<Comment<'_>, String> {
    let b = line.as_bytes();
    let start = skip_blanks(b, 1);
    let end = token_end(b, start);
    match &line[start..end] {
        "EOF" if end == b.len() => Ok(Comment::Eof),
        "TYPE" if start > 1 => parse_type(line, end).map(|(f, k)| Comment::Type(f, k)),
        _ => Ok(Comment::Other),
    }
}

/// Parses the rest of a `# TYPE` line from byte `i` (just after `TYPE`).
fn parse_type(line: &str, i: usize) -> Result<(&str, MetricType), String> {
    let b = line.as_bytes();
    let start = skip_blanks(b, i);
    let (family, end) = if b.get(start) == Some(&b'"') {
        quoted_name(line, start)?
    } else {
        let n = metric_name_len(&b[start..]);
        (&line[start..start + n], start + n)
    };
    if family.is_empty() || start == i {
        return Err(format!("expected a metric family name after \"# TYPE\", found {}", show_at(line, start)));
    }
    let kind_start = skip_blanks(b, end);
    let kind_end = token_end(b, kind_start);
    if kind_start == end || kind_start == kind_end {
        return Err(format!("expected a metric type after \"# TYPE {family}\", found {}", show_at(line, kind_start)));
    }
    let word = &line[kind_start..kind_end];
    let kind = MetricType::from_name(word)
        .ok_or_else(|| format!("unknown metric type {word:?} for {family:?} in the \"# TYPE\" line"))?;
    if kind_end != b.len() {
        return Err(format!(
            "unexpected text after the metric type in the \"# TYPE\" line: {}",
            show_at(line, skip_blanks(b, kind_end))
        ));
    }
    Ok((family, kind))
}

/// Parses the head of a sample line: the metric name and the label set, validated.
fn parse_head(line: &str) -> Result<Head<'_>, String> {
    let b = line.as_bytes();
    let name;
    let labels_raw;
    let after_name: usize;
    let what;
    let mut form = LineForm::Exposition;
    if b[0] == b'{' {
        let (n, raw, close, f) = parse_braced_name(line)?;
        name = n;
        labels_raw = raw;
        form = f;
        after_name = close + 1;
        what = "label set";
    } else {
        let n = metric_name_len(b);
        if n == 0 {
            return Err(format!("expected a metric name, found {}", show(line)));
        }
        name = &line[..n];
        let open = skip_blanks(b, n);
        if b.get(open) == Some(&b'{') {
            let close = scan_label_set(line, open + 1, true, false, |item, _, _| match item {
                Item::Label { name: NAME_LABEL, .. } => {
                    Err(format!("a {NAME_LABEL} label in the label set of {name:?}: the metric is named twice"))
                }
                Item::Label { .. } => Ok(()),
                Item::QuotedName(q) => Err(format!("unexpected quoted metric name {q:?} in the label set of {name:?}")),
            })?;
            labels_raw = &line[open + 1..close];
            after_name = close + 1;
            what = "label set";
        } else {
            if open == n && open < b.len() {
                return Err(format!(
                    "unexpected character {} after metric name {name:?} (names outside quotes are [a-zA-Z_:][a-zA-Z0-9_:]*)",
                    show_char(line, n)
                ));
            }
            labels_raw = "";
            after_name = n;
            what = "metric name";
        }
    }

    Ok((name, labels_raw, after_name, what, form))
}

/// Parses a sample line (no surrounding blanks, not a comment) into the sample and its
/// timestamp token, validating every part of the line.
#[cfg(test)]
fn parse_sample(line: &str) -> Result<(SampleLine<'_>, Option<&str>), String> {
    parse_sample_after(line, &mut LastHead::default())
}

/// The head (the name and the label set, through the closing brace) of the last sample
/// line that had a label set, and where its parts are. A line that starts with the same
/// bytes has the same name, labels and form, as parsing stops at that brace: its label set
/// is not scanned again (a recording writes a series' lines one after another).
#[derive(Debug, Default)]
struct LastHead {
    bytes: Vec<u8>,
    name: (usize, usize),
    labels: (usize, usize),
    form: LineForm,
}

/// The name, the label set as written, the index just past them, what they are (for
/// messages) and the form of a sample line's head.
type Head<'a> = (&'a str, &'a str, usize, &'static str, LineForm);

/// [`parse_sample`], taking the head from `last` when the line starts with it, and leaving
/// this line's head there.
fn parse_sample_after<'a>(line: &'a str, last: &mut LastHead) -> Result<(SampleLine<'a>, Option<&'a str>), String> {
    let b = line.as_bytes();
    let (name, labels_raw, after_name, what, form) = if !last.bytes.is_empty() && b.starts_with(&last.bytes) {
        let (name, labels) = (last.name, last.labels);
        (&line[name.0..name.1], &line[labels.0..labels.1], last.bytes.len(), "label set", last.form)
    } else {
        let head = parse_head(line)?;
        let (name, labels_raw, after_name, what, form) = head;
        // Every part is a slice of the line; its place is kept, not its address.
        let within = |part: &str| {
            let (start, end) = (line.as_ptr() as usize, line.as_ptr() as usize + line.len());
            (start..=end).contains(&(part.as_ptr() as usize)) && part.as_ptr() as usize + part.len() <= end
        };
        if what == "label set" && within(name) && within(labels_raw) {
            let offset = |part: &str| part.as_ptr() as usize - line.as_ptr() as usize;
            last.bytes.clear();
            last.bytes.extend_from_slice(&b[..after_name]);
            last.name = (offset(name), offset(name) + name.len());
            last.labels = (offset(labels_raw), offset(labels_raw) + labels_raw.len());
            last.form = form;
        }
        head
    };
    // The value.
    let value_start = skip_blanks(b, after_name);
    if value_start == b.len() {
        return Err(format!("expected a sample value after the {what}, found the end of the line"));
    }
    if value_start == after_name {
        return Err(format!(
            "expected whitespace and a sample value after the {what}, found {}",
            show_at(line, after_name)
        ));
    }
    let value_end = token_end(b, value_start);
    let token = &line[value_start..value_end];
    let value: f64 =
        token.parse().map_err(|_| format!("expected a sample value after the {what}, found {}", show(token)))?;

    // The timestamp and the exemplar, both optional.
    let mut i = skip_blanks(b, value_end);
    let mut timestamp = None;
    if i < b.len() && b[i] != b'#' {
        let end = token_end(b, i);
        timestamp = Some(&line[i..end]);
        i = skip_blanks(b, end);
        if i < b.len() && b[i] != b'#' {
            return Err(format!("unexpected text after the timestamp: {}", show_at(line, i)));
        }
    }
    if i < b.len() {
        check_exemplar(line, i)?;
    }
    Ok((SampleLine { name, labels_raw, value, form }, timestamp))
}

/// The name of a line that starts with `{`: either the Prometheus 3 quoted form
/// (`{"my.metric", "a.b"="x"}`: the name first, then the labels) or the form of
/// `promtool tsdb dump` before Prometheus 2.49 (`{__name__="my_metric", a="x"}`: the name
/// is a label, values are Go-quoted). Returns the name, the labels as written, the index
/// of the closing `}` and the form.
fn parse_braced_name(line: &str) -> Result<(&str, &str, usize, LineForm), String> {
    let mut quoted: Option<(&str, usize)> = None;
    let mut dump_name: Option<&str> = None;
    let mut first_label: Option<&str> = None;
    let mut go_escapes = false;
    // Go's escapes are accepted while scanning; they are an error below unless this is
    // promtool's form.
    let close = scan_label_set(line, 1, true, true, |item, index, end| match (item, index) {
        (Item::QuotedName(n), 0) => {
            quoted = Some((n, end));
            Ok(())
        }
        (Item::QuotedName(n), _) => Err(format!("the quoted metric name {n:?} must come first in the label set")),
        (Item::Label { name, value, escaped }, _) => {
            first_label.get_or_insert(name);
            go_escapes |= escaped == Escapes::Go;
            if name == NAME_LABEL {
                if escaped != Escapes::None {
                    return Err(format!(
                        "escape sequences in the {NAME_LABEL} label are not supported, found {value:?}"
                    ));
                }
                if dump_name.replace(value).is_some() {
                    return Err(format!("duplicate label name {NAME_LABEL:?} in the label set"));
                }
            }
            Ok(())
        }
    })?;
    match (quoted, dump_name) {
        (Some((n, _)), Some(_)) => {
            Err(format!("the metric {n:?} is named twice: as a quoted name and as a {NAME_LABEL} label"))
        }
        (Some((n, name_end)), None) => {
            if go_escapes {
                // Re-scan with the exposition's escapes only, for the exact error.
                scan_label_set(line, 1, true, false, |_, _, _| Ok(()))?;
            }
            let rest = line[name_end..close].trim_start_matches(is_blank_char);
            Ok((n, rest.strip_prefix(',').unwrap_or(rest), close, LineForm::Exposition))
        }
        (None, Some("")) => Err(format!("the {NAME_LABEL} label is empty")),
        (None, Some(n)) => Ok((n, &line[1..close], close, LineForm::PromtoolDump)),
        (None, None) => Err(match first_label {
            Some(label) => format!(
                "expected a metric name (a quoted name first in the label set, or a {NAME_LABEL} label), found label {label:?}"
            ),
            None => "expected a metric name, found an empty label set at the start of the line".to_owned(),
        }),
    }
}

/// Validates an OpenMetrics exemplar (` # {labels} value [timestamp]`) starting at the `#`
/// at byte `i`; its content is ignored.
fn check_exemplar(line: &str, i: usize) -> Result<(), String> {
    let b = line.as_bytes();
    let open = skip_blanks(b, i + 1);
    if open == i + 1 || b.get(open) != Some(&b'{') {
        return Err(format!(
            "expected an exemplar (\"# {{labels}} value\") after the sample, found {}",
            show_at(line, i)
        ));
    }
    let close = scan_label_set(line, open + 1, true, false, |item, _, _| match item {
        Item::Label { .. } => Ok(()),
        Item::QuotedName(q) => Err(format!("unexpected quoted metric name {q:?} in the exemplar's label set")),
    })
    .map_err(|m| format!("malformed exemplar: {m}"))?;
    let value_start = skip_blanks(b, close + 1);
    let value_end = token_end(b, value_start);
    if value_start == close + 1 || value_start == value_end {
        return Err(format!("expected a value after the exemplar's label set, found {}", show_at(line, close + 1)));
    }
    let token = &line[value_start..value_end];
    if token.parse::<f64>().is_err() {
        return Err(format!("expected a value after the exemplar's label set, found {}", show(token)));
    }
    let ts_start = skip_blanks(b, value_end);
    if ts_start == b.len() {
        return Ok(());
    }
    let ts_end = token_end(b, ts_start);
    let token = &line[ts_start..ts_end];
    if !token.parse::<f64>().is_ok_and(f64::is_finite) {
        return Err(format!("expected a timestamp after the exemplar's value, found {}", show(token)));
    }
    if ts_end != b.len() {
        return Err(format!("unexpected text after the exemplar: {}", show_at(line, skip_blanks(b, ts_end))));
    }
    Ok(())
}

/// Whether a time (Unix ms) is one culprit reasons with: within the years -9999 to 9999,
/// what jiff (and RFC 3339) can name. Any time from a recording or a backend is checked, so
/// window and step arithmetic on it (± hours, + steps) can never overflow.
pub fn time_in_range(ms: i64) -> bool {
    jiff::Timestamp::from_millisecond(ms).is_ok()
}

/// Parses a timestamp token into its unit and Unix milliseconds, rounding to the nearest
/// millisecond: a token with `.`, `e` or `E` is seconds; an integer with absolute value
/// ≥ 1e11 is milliseconds; a smaller integer is seconds.
fn parse_timestamp(token: &str) -> Result<(TimeUnit, i64), String> {
    if let Some(parsed) = parse_plain_timestamp(token.as_bytes()) {
        return Ok(parsed);
    }
    let bad = || format!("expected a timestamp after the sample value, found {}", show(token));
    if token.bytes().any(|c| matches!(c, b'.' | b'e' | b'E')) {
        let seconds: f64 = token.parse().map_err(|_| bad())?;
        if !seconds.is_finite() {
            return Err(bad());
        }
        let ms = (seconds * 1000.0).round();
        // Both bounds are just inside the i64 range (i64::MAX as f64 would round up to 2^63).
        if !(-9.223_372_036_854_775e18..9.223_372_036_854_775e18).contains(&ms) {
            return Err(format!("timestamp {} is out of range", show(token)));
        }
        Ok((TimeUnit::Seconds, ms as i64))
    } else {
        let value: i64 = token.parse().map_err(|_| bad())?;
        if value.unsigned_abs() >= MILLISECONDS_THRESHOLD as u64 {
            Ok((TimeUnit::Milliseconds, value))
        } else {
            // |value| < 1e11, so the product fits.
            Ok((TimeUnit::Seconds, value * 1000))
        }
    }
}

/// The common shapes in one pass, exactly: `[+-]digits` and `[+-]digits.digits` with at
/// most 15 integer digits, decimal seconds rounded half away from zero to the millisecond.
/// None for anything else (exponents, longer numbers, errors): the caller takes the slow
/// path.
#[inline]
fn parse_plain_timestamp(b: &[u8]) -> Option<(TimeUnit, i64)> {
    let (negative, digits) = match b.first()? {
        b'-' => (true, &b[1..]),
        b'+' => (false, &b[1..]),
        _ => (false, b),
    };
    let mut i = 0;
    let mut int: i64 = 0;
    while let Some(&c) = digits.get(i) {
        if !c.is_ascii_digit() {
            break;
        }
        if i == 15 {
            return None;
        }
        int = int * 10 + i64::from(c - b'0');
        i += 1;
    }
    let (unit, ms) = match digits.get(i) {
        None if i == 0 => return None,
        None if int >= MILLISECONDS_THRESHOLD => (TimeUnit::Milliseconds, int),
        None => (TimeUnit::Seconds, int * 1000),
        Some(b'.') => {
            let fraction = &digits[i + 1..];
            if (i == 0 && fraction.is_empty()) || !fraction.iter().all(u8::is_ascii_digit) {
                return None;
            }
            let mut ms = int;
            for k in 0..3 {
                ms = ms * 10 + fraction.get(k).map_or(0, |c| i64::from(c - b'0'));
            }
            if fraction.get(3).is_some_and(|&c| c >= b'5') {
                ms += 1;
            }
            (TimeUnit::Seconds, ms)
        }
        Some(_) => return None,
    };
    Some((unit, if negative { -ms } else { ms }))
}

// ---------------------------------------------------------------------------------------
// Label sets
// ---------------------------------------------------------------------------------------

/// One item of a label set.
enum Item<'a> {
    /// `name="value"`; `value` is as written (escapes intact), `escaped` says which
    /// escapes it holds.
    Label { name: &'a str, value: &'a str, escaped: Escapes },
    /// A bare double-quoted string: a Prometheus 3 metric name.
    QuotedName(&'a str),
}

/// The escapes a label value holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Escapes {
    None,
    /// Only `\\`, `\"` and `\n`, the exposition formats' escapes.
    Exposition,
    /// At least one of the other escapes of Go's `strconv.Quote` (`\t`, `\xHH`, …).
    Go,
}

/// The metric name as a label (`promtool tsdb dump`, PromQL).
const NAME_LABEL: &str = "__name__";

/// Scans the items of a label set in `s` from byte `start`.
///
/// With `go`, label values may hold every escape of Go's `strconv.Quote`; without it,
/// only `\\`, `\"` and `\n`.
///
/// With `closed`, the set must end with an unquoted `}`, whose index is returned; without
/// it, the set runs to the end of `s` (a `}` is an error) and `s.len()` is returned.
/// `on_item(item, index, end)` receives each item in written order with its 0-based
/// position and the byte index just past it; its error stops the scan.
fn scan_label_set<'a>(
    s: &'a str,
    start: usize,
    closed: bool,
    go: bool,
    mut on_item: impl FnMut(Item<'a>, usize, usize) -> Result<(), String>,
) -> Result<usize, String> {
    let b = s.as_bytes();
    let mut i = start;
    let mut index = 0;
    loop {
        i = skip_blanks(b, i);
        match b.get(i) {
            None if closed => return Err("the label set is not closed with '}'".to_owned()),
            None => return Ok(i),
            Some(b'}') if closed => return Ok(i),
            Some(b'}') => return Err("unexpected '}' in the label set".to_owned()),
            Some(_) => {}
        }
        let (name, quoted) = if b[i] == b'"' {
            let (name, end) = quoted_name(s, i)?;
            i = end;
            (name, true)
        } else {
            let n = label_name_len(&b[i..]);
            if n == 0 {
                return Err(format!("expected a label name in the label set, found {}", show_at(s, i)));
            }
            i += n;
            (&s[i - n..i], false)
        };
        let name_end = i;
        i = skip_blanks(b, i);
        if b.get(i) == Some(&b'=') {
            i = skip_blanks(b, i + 1);
            if b.get(i) != Some(&b'"') {
                return Err(format!("expected a double-quoted value for label {name:?}, found {}", show_at(s, i)));
            }
            let (value, escaped, end) = quoted_value(s, i, name, go)?;
            on_item(Item::Label { name, value, escaped }, index, end)?;
            i = end;
        } else if quoted {
            on_item(Item::QuotedName(name), index, name_end)?;
        } else {
            return Err(format!("expected '=' after label name {name:?}, found {}", show_at(s, i)));
        }
        index += 1;
        i = skip_blanks(b, i);
        match b.get(i) {
            Some(b',') => i += 1,
            Some(b'}') | None => {}
            Some(_) => {
                return Err(format!("expected ',' or '}}' after {name:?} in the label set, found {}", show_at(s, i)));
            }
        }
    }
}

/// Scans the double-quoted label value whose opening quote is at byte `i`: returns the text
/// between the quotes as written, which escapes it holds, and the index past the closing
/// quote. Only `\\`, `\"` and `\n` are valid escapes; with `go`, also the others of
/// Go's `strconv.Quote` (`\a \b \f \r \t \v`, `\xHH`, `\uHHHH`, `\UHHHHHHHH`).
fn quoted_value<'a>(s: &'a str, i: usize, label: &str, go: bool) -> Result<(&'a str, Escapes, usize), String> {
    let b = s.as_bytes();
    let mut j = i + 1;
    let mut escaped = Escapes::None;
    loop {
        j = find_quote_or_backslash(b, j);
        match b.get(j) {
            None => {
                return Err(format!("the value of label {label:?} is not closed with '\"'"));
            }
            Some(b'"') => return Ok((&s[i + 1..j], escaped, j + 1)),
            Some(b'\\') => match b.get(j + 1) {
                Some(b'\\' | b'"' | b'n') => {
                    if escaped == Escapes::None {
                        escaped = Escapes::Exposition;
                    }
                    j += 2;
                }
                Some(_) if go && let Some((n, _)) = go_escape(&b[j + 1..]) => {
                    escaped = Escapes::Go;
                    j += 1 + n;
                }
                Some(_) => {
                    let sequence: String = s[j..].chars().take(2).collect();
                    return Err(format!(
                        "invalid escape sequence {sequence:?} in the value of label {label:?} (only \\\\, \\\" and \\n are allowed)"
                    ));
                }
                None => {
                    return Err(format!("the value of label {label:?} is not closed with '\"'"));
                }
            },
            Some(_) => j += 1,
        }
    }
}

/// The Go escape after a backslash at the start of `b` (`t`, `x41`, `u00e9`, …): its
/// length and the character it stands for. None when `b` does not start with one, or with
/// one that is no character (`\xHH` above 7F is a byte of invalid UTF-8; a surrogate).
fn go_escape(b: &[u8]) -> Option<(usize, char)> {
    let hex = |n: usize| {
        let digits = b.get(1..=n)?;
        let text = std::str::from_utf8(digits).ok()?;
        u32::from_str_radix(text, 16).ok().filter(|_| digits.iter().all(u8::is_ascii_hexdigit))
    };
    Some(match b.first()? {
        b'a' => (1, '\u{7}'),
        b'b' => (1, '\u{8}'),
        b'f' => (1, '\u{c}'),
        b'n' => (1, '\n'),
        b'r' => (1, '\r'),
        b't' => (1, '\t'),
        b'v' => (1, '\u{b}'),
        b'\\' => (1, '\\'),
        b'"' => (1, '"'),
        b'x' => (3, char::from_u32(hex(2).filter(|&v| v < 0x80)?)?),
        b'u' => (5, char::from_u32(hex(4)?)?),
        b'U' => (9, char::from_u32(hex(8)?)?),
        _ => return None,
    })
}

/// Index of the first `"` or `\\` in `b` at or after `j` (or `b.len()`), eight bytes at a
/// time: label values are the longest part of a Flink line.
#[inline]
fn find_quote_or_backslash(b: &[u8], mut j: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    const QUOTES: u64 = ONES * b'"' as u64;
    const BACKSLASHES: u64 = ONES * b'\\' as u64;
    while let Some(chunk) = b.get(j..j + 8) {
        let word = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        let (q, s) = (word ^ QUOTES, word ^ BACKSLASHES);
        // A byte of q or s is zero where the word holds a quote or a backslash. The lowest
        // flagged byte is always a true match (false flags only appear above a true one).
        let found = ((q.wrapping_sub(ONES) & !q) | (s.wrapping_sub(ONES) & !s)) & HIGHS;
        if found != 0 {
            return j + (found.trailing_zeros() / 8) as usize;
        }
        j += 8;
    }
    while j < b.len() && b[j] != b'"' && b[j] != b'\\' {
        j += 1;
    }
    j
}

/// Scans a double-quoted name (Prometheus 3 metric or label name) whose opening quote is
/// at byte `i`: returns the name and the index past the closing quote. Escapes are not
/// supported (the name is borrowed) and an empty name is an error.
fn quoted_name(s: &str, i: usize) -> Result<(&str, usize), String> {
    let b = s.as_bytes();
    let mut j = i + 1;
    loop {
        match b.get(j) {
            None => return Err("a quoted name is not closed with '\"'".to_owned()),
            Some(b'"') => break,
            Some(b'\\') => {
                return Err(format!("escape sequences in quoted names are not supported, found {}", show_at(s, i)));
            }
            Some(_) => j += 1,
        }
    }
    if j == i + 1 {
        return Err("a quoted name is empty".to_owned());
    }
    Ok((&s[i + 1..j], j + 1))
}

/// Undoes the label value escapes `\\`, `\"` and `\n`.
fn unescape(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some(other) => out.push(other),
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Undoes Go's `strconv.Quote` escapes (validated by [`quoted_value`]).
fn unescape_go(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(k) = rest.find('\\') {
        out.push_str(&rest[..k]);
        let seq = &rest[k + 1..];
        // Validated while reading; a hand-made line with a bad escape keeps it as written.
        let (len, c) = go_escape(seq.as_bytes()).unwrap_or((0, '\\'));
        out.push(c);
        rest = &seq[len..];
    }
    out.push_str(rest);
    out
}

// ---------------------------------------------------------------------------------------
// Names and tokens
// ---------------------------------------------------------------------------------------

/// Whether `name` is a metric name that needs no quotes: `[a-zA-Z_:][a-zA-Z0-9_:]*`.
pub fn is_valid_metric_name(name: &str) -> bool {
    !name.is_empty() && metric_name_len(name.as_bytes()) == name.len()
}

/// Whether `name` is a label name that needs no quotes: `[a-zA-Z_][a-zA-Z0-9_]*`.
pub fn is_valid_label_name(name: &str) -> bool {
    !name.is_empty() && label_name_len(name.as_bytes()) == name.len()
}

/// Byte classes for names: bit 0 starts a metric name, bit 1 continues one, bit 2 starts a
/// label name, bit 3 continues one.
static NAME_BYTES: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut c = 0;
    while c < 256 {
        let byte = c as u8;
        let alpha = byte.is_ascii_alphabetic() || byte == b'_';
        let digit = byte.is_ascii_digit();
        let colon = byte == b':';
        table[c] = (alpha || colon) as u8
            | (((alpha || colon || digit) as u8) << 1)
            | ((alpha as u8) << 2)
            | (((alpha || digit) as u8) << 3);
        c += 1;
    }
    table
};

/// Length of the name at the start of `b` whose first byte has class bit `first` and whose
/// other bytes have class bit `rest`; 0 if none.
#[inline]
fn name_len(b: &[u8], first: u8, rest: u8) -> usize {
    match b.first() {
        Some(&c) if NAME_BYTES[usize::from(c)] & first != 0 => {
            let mut i = 1;
            while i < b.len() && NAME_BYTES[usize::from(b[i])] & rest != 0 {
                i += 1;
            }
            i
        }
        _ => 0,
    }
}

/// Length of the metric name (`[a-zA-Z_:][a-zA-Z0-9_:]*`) at the start of `b`; 0 if none.
#[inline]
fn metric_name_len(b: &[u8]) -> usize {
    name_len(b, 1, 2)
}

/// Length of the label name (`[a-zA-Z_][a-zA-Z0-9_]*`) at the start of `b`; 0 if none.
#[inline]
fn label_name_len(b: &[u8]) -> usize {
    name_len(b, 4, 8)
}

/// Spaces and tabs: the whitespace that separates tokens.
#[inline]
fn is_blank(c: u8) -> bool {
    c == b' ' || c == b'\t'
}

#[inline]
fn is_blank_char(c: char) -> bool {
    c == ' ' || c == '\t'
}

/// Index of the first non-blank byte at or after `i` (or `b.len()`).
#[inline]
fn skip_blanks(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && is_blank(b[i]) {
        i += 1;
    }
    i
}

/// Index of the first blank byte at or after `i` (or `b.len()`).
#[inline]
fn token_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && !is_blank(b[i]) {
        i += 1;
    }
    i
}

/// Quotes a piece of input for an error message, shortened to [`SHOWN_CHARS`] characters.
fn show(text: &str) -> String {
    match text.char_indices().nth(SHOWN_CHARS) {
        Some((cut, _)) => format!("{:?}…", &text[..cut]),
        None => format!("{text:?}"),
    }
}

/// Quotes the input from byte `i` on, or says the line ended there.
fn show_at(s: &str, i: usize) -> String {
    match s.get(i..) {
        Some(rest) if !rest.is_empty() => show(rest),
        _ => "the end of the line".to_owned(),
    }
}

/// Quotes the character starting at byte `i`.
fn show_char(s: &str, i: usize) -> String {
    s[i..].chars().next().map_or_else(|| "the end of the line".to_owned(), |c| format!("{c:?}"))
}

// ---------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------

/// Writes OpenMetrics text: `# TYPE` lines, samples with timestamps in seconds with
/// millisecond precision, and `# EOF` on finish.
///
/// Values are written so that they read back bit-exactly (shortest round-trip decimal;
/// `NaN`, `+Inf`, `-Inf`). Label values are escaped (`\\`, `\"`, `\n`). Names that are
/// not `[a-zA-Z_:][a-zA-Z0-9_:]*` (metrics) or `[a-zA-Z_][a-zA-Z0-9_]*` (labels) are
/// written in the Prometheus 3 quoted form, which the reader accepts. Output is buffered
/// internally; [`OpenMetricsWriter::finish`] flushes it.
pub struct OpenMetricsWriter<W: Write> {
    out: BufWriter<W>,
}

impl<W: Write> OpenMetricsWriter<W> {
    /// A writer over `out`, which needs no buffering of its own.
    pub fn new(out: W) -> Self {
        OpenMetricsWriter { out: BufWriter::with_capacity(WRITE_BUFFER_BYTES, out) }
    }

    /// Writes `# TYPE family kind`.
    ///
    /// # Errors
    ///
    /// I/O errors, and `InvalidInput` for a family name the reader could not read back
    /// (empty, or holding `"`, `\` or a newline).
    pub fn metric_type(&mut self, family: &str, kind: MetricType) -> io::Result<()> {
        if is_valid_metric_name(family) {
            self.out.write_all(b"# TYPE ")?;
            self.out.write_all(family.as_bytes())?;
        } else {
            check_quotable("metric family", family)?;
            write!(self.out, "# TYPE \"{family}\"")?;
        }
        writeln!(self.out, " {}", kind.as_str())
    }

    /// Writes one sample: `name{labels} value [timestamp]`.
    ///
    /// `labels` are written in the given order; `value` in shortest round-trip form;
    /// `t_ms` (Unix milliseconds) as seconds with exactly three decimals, or nothing.
    ///
    /// # Errors
    ///
    /// I/O errors, and `InvalidInput` for names the reader could not read back (empty, or
    /// needing quotes and holding `"`, `\` or a newline) or a duplicate label name.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64, t_ms: Option<i64>) -> io::Result<()> {
        for (k, (label, _)) in labels.iter().enumerate() {
            if !is_valid_label_name(label) {
                check_quotable("label", label)?;
            }
            if labels[..k].iter().any(|(seen, _)| seen == label) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("duplicate label name {label:?} for metric {name:?}"),
                ));
            }
        }
        let out = &mut self.out;
        let mut first = true;
        if is_valid_metric_name(name) {
            out.write_all(name.as_bytes())?;
            if !labels.is_empty() {
                out.write_all(b"{")?;
            }
        } else {
            check_quotable("metric", name)?;
            write!(out, "{{\"{name}\"")?;
            first = false;
        }
        for (label, label_value) in labels {
            if !first {
                out.write_all(b",")?;
            }
            first = false;
            if is_valid_label_name(label) {
                out.write_all(label.as_bytes())?;
            } else {
                write!(out, "\"{label}\"")?;
            }
            out.write_all(b"=\"")?;
            write_escaped(out, label_value)?;
            out.write_all(b"\"")?;
        }
        if !labels.is_empty() || !is_valid_metric_name(name) {
            out.write_all(b"}")?;
        }
        out.write_all(b" ")?;
        write_value(out, value)?;
        if let Some(t) = t_ms {
            let sign = if t < 0 { "-" } else { "" };
            let abs = t.unsigned_abs();
            write!(out, " {sign}{}.{:03}", abs / 1000, abs % 1000)?;
        }
        out.write_all(b"\n")
    }

    /// Writes `# EOF`, flushes, and returns the underlying writer.
    ///
    /// # Errors
    ///
    /// I/O errors while writing or flushing.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.write_all(b"# EOF\n")?;
        self.out.into_inner().map_err(io::IntoInnerError::into_error)
    }
}

/// Rejects a name that cannot be written quoted without escapes.
fn check_quotable(what: &str, name: &str) -> io::Result<()> {
    if name.is_empty() || name.contains(['"', '\\', '\n']) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what} name {name:?} cannot be written: it is empty or holds '\"', '\\' or a newline"),
        ));
    }
    Ok(())
}

/// Writes a label value with `\`, `"` and newline escaped.
fn write_escaped(out: &mut impl Write, value: &str) -> io::Result<()> {
    let mut rest = value;
    while let Some(k) = rest.find(['\\', '"', '\n']) {
        out.write_all(&rest.as_bytes()[..k])?;
        out.write_all(match rest.as_bytes()[k] {
            b'\\' => b"\\\\",
            b'"' => b"\\\"",
            _ => b"\\n",
        })?;
        rest = &rest[k + 1..];
    }
    out.write_all(rest.as_bytes())
}

/// Writes a value so that it parses back to the same bits: `NaN`, `+Inf`, `-Inf`, else the
/// shortest round-trip decimal (plain for ordinary magnitudes, with an exponent otherwise).
fn write_value(out: &mut impl Write, value: f64) -> io::Result<()> {
    if value.is_nan() {
        out.write_all(b"NaN")
    } else if value == f64::INFINITY {
        out.write_all(b"+Inf")
    } else if value == f64::NEG_INFINITY {
        out.write_all(b"-Inf")
    } else {
        let magnitude = value.abs();
        if magnitude == 0.0 || (1e-5..1e16).contains(&magnitude) {
            write!(out, "{value}")
        } else {
            write!(out, "{value:e}")
        }
    }
}

// ---------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;

    /// One sample as read: name, labels, value, timestamp.
    type Owned = (String, Vec<(String, String)>, f64, Option<i64>);

    /// One sample to write: name, labels, value, timestamp.
    type ToWrite<'a> = (&'a str, Vec<(&'a str, &'a str)>, f64, Option<i64>);

    /// Everything the reader handed over, owned.
    #[derive(Debug, Default)]
    struct Collect {
        samples: Vec<Owned>,
        types: Vec<(String, MetricType)>,
    }

    impl SampleSink for Collect {
        fn sample(&mut self, line: &SampleLine<'_>, t_ms: Option<i64>) -> Result<(), String> {
            let labels = line.labels()?.into_iter().map(|(k, v)| (k.to_owned(), v.into_owned())).collect();
            self.samples.push((line.name.to_owned(), labels, line.value, t_ms));
            Ok(())
        }

        fn metric_type(&mut self, family: &str, kind: MetricType) {
            self.types.push((family.to_owned(), kind));
        }
    }

    fn read(text: &str) -> Result<(Collect, ReadSummary), ReadError> {
        let mut sink = Collect::default();
        let summary = read_from(text.as_bytes(), "test.prom", &mut sink)?;
        Ok((sink, summary))
    }

    #[test]
    fn a_timestamp_past_the_year_9999_is_refused_with_its_line() {
        // The fuzzer's input (fuzz/recording): 8887166017908759.501 s is ~2.8e8 years out;
        // 253402300800 s is 10000-01-01T00:00:00Z, past the last time jiff names
        // (9999-12-30T22:00:00Z = 253402207200 s); 253402000000 s is before it.
        let fuzzed = "flink_up{a=\"b\"} 1 1796068789.501\nflink_up{a=\"c\"} 616 8887166017908759.501\n# EOF\n";
        let m = error_at(fuzzed, 2);
        assert_eq!(m, "timestamp \"8887166017908759.501\" is outside the years -9999 to 9999");
        assert!(error_at("m 1 253402300800.0\n", 1).contains("outside the years"));
        assert_eq!(read_ok("m 1 253402000000.0\n").samples.len(), 1);
        assert!(error_at("m 1 -9223372036854775808\n", 1).contains("outside the years"));
    }

    fn read_ok(text: &str) -> Collect {
        read(text).unwrap_or_else(|e| panic!("{e}")).0
    }

    /// Reads `text`, expects an error on `line`, and returns its message.
    fn error_at(text: &str, line: u64) -> String {
        let error = read(text).expect_err("the input should not read");
        assert_eq!(error.line, Some(line), "{error}");
        assert_eq!(error.source_name, "test.prom");
        let shown = error.to_string();
        assert!(shown.starts_with(&format!("test.prom:{line}: ")), "{shown}");
        assert!(!shown.contains('\n'), "{shown}");
        error.message
    }

    fn pairs(labels: &[(&str, &str)]) -> Vec<(String, String)> {
        labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn lines_sharing_the_last_lines_label_set_read_as_each_line_alone() {
        // Repeated heads in every form (escapes, a quoted name, promtool's dump form), a
        // label set that starts like the last one, and a repeated head with a bad value.
        let lines = [
            "m{a=\"x\\\"y\",b=\"2\",} 1 1795000000000",
            "m{a=\"x\\\"y\",b=\"2\",} 2 1795000005000",
            "m{a=\"x\\\"y\",b=\"2\",c=\"3\"} 3 1795000005000",
            "m{a=\"x\\\"y\",b=\"2\",} 4 1795000010000",
            "{\"my.metric\", \"a.b\"=\"x\"} 5 1795000010000",
            "{\"my.metric\", \"a.b\"=\"x\"} 6 1795000015000",
            "{__name__=\"d\", a=\"\\t\"} 7 1795000015000",
            "{__name__=\"d\", a=\"\\t\"} 8 1795000020000",
            "n 9 1795000020000",
        ];
        let alone: Vec<Owned> = lines.iter().map(|l| read_ok(l).samples.remove(0)).collect();
        assert_eq!(read_ok(&lines.join("\n")).samples, alone);
        assert_eq!(alone[1].1, pairs(&[("a", "x\"y"), ("b", "2")]));
        assert_eq!(alone[5].0, "my.metric");
        assert_eq!(alone[7], ("d".to_owned(), pairs(&[("a", "\t")]), 8.0, Some(1_795_000_020_000)));
        let bad = format!("{}\nm{{a=\"x\\\"y\",b=\"2\",}} x", lines[0]);
        assert_eq!(error_at(&bad, 2), error_at(&bad[lines[0].len() + 1..], 1));
    }

    #[test]
    fn a_flink_scrape_with_trailing_commas_reads_every_sample() {
        let text = "\
# HELP flink_taskmanager_Status_JVM_Memory_Metaspace_Used Used (scope: taskmanager_Status_JVM_Memory_Metaspace)
# TYPE flink_taskmanager_Status_JVM_Memory_Metaspace_Used gauge
flink_taskmanager_Status_JVM_Memory_Metaspace_Used{host=\"127_0_0_1\",tm_id=\"127_0_0_1:46717_23536e\",} 5.892944E7
flink_taskmanager_job_task_busyTimeMsPerSecond{task_name=\"Source:_txn_source\",subtask_index=\"0\",} NaN
flink_jobmanager_numRunningJobs{host=\"127_0_0_1\",} 1.0
";
        let (sink, summary) = read(text).unwrap();
        assert_eq!(summary.samples, 3);
        assert_eq!(summary.lines, 5);
        assert_eq!(summary.with_timestamp, 0);
        assert_eq!(summary.format, Format::Text);
        assert_eq!(sink.samples[0].1, pairs(&[("host", "127_0_0_1"), ("tm_id", "127_0_0_1:46717_23536e")]));
        assert_eq!(sink.samples[0].2, 5.892944e7);
        assert!(sink.samples[1].2.is_nan());
        assert_eq!(sink.samples[1].1[0], ("task_name".to_owned(), "Source:_txn_source".to_owned()));
        assert_eq!(sink.samples[2].2, 1.0);
        assert!(sink.samples.iter().all(|s| s.3.is_none()));
    }

    #[test]
    fn an_openmetrics_recording_with_timestamps_in_seconds_reads_as_milliseconds() {
        let text = "\
# TYPE up gauge
up{instance=\"127.0.0.1:9251\",job=\"flink\"} 1 1795949325.765
up{instance=\"127.0.0.1:9251\",job=\"flink\"} 0 1795949330
# EOF
";
        let (sink, summary) = read(text).unwrap();
        assert_eq!(summary.format, Format::OpenMetrics);
        assert_eq!(summary.with_timestamp, 2);
        assert_eq!(sink.samples[0].3, Some(1_795_949_325_765));
        assert_eq!(sink.samples[1].3, Some(1_795_949_330_000));
    }

    #[test]
    fn text_format_timestamps_in_milliseconds_are_kept_as_milliseconds() {
        let sink = read_ok("a 1 1795949325765\na 2 -1795949325765\n");
        assert_eq!(sink.samples[0].3, Some(1_795_949_325_765));
        assert_eq!(sink.samples[1].3, Some(-1_795_949_325_765));
    }

    #[test]
    fn a_timestamp_contradicting_the_first_unit_is_an_error_naming_its_line() {
        let message = error_at("a 1 1795949325.765\nb 1\na 2 1795949330765\n", 3);
        assert!(message.contains("milliseconds"), "{message}");
        assert!(message.contains("(line 1) was in seconds"), "{message}");
        let message = error_at("# c\na 1 1795949325765\na 2 1795949330.5\n", 3);
        assert!(message.contains("(line 2) was in milliseconds"), "{message}");
        error_at("a 1 1795949325765\na 2 1795949330\n", 2);
    }

    #[test]
    fn seconds_timestamps_round_to_the_nearest_millisecond() {
        let sink = read_ok(
            "a 1 1795948507.780\na 1 1795948507.7804\na 1 1795948507.7805\na 1 1.7959485077806e9\na 1 -1.0005\na 1 12\na 1 .5\n",
        );
        let ts: Vec<_> = sink.samples.iter().map(|s| s.3.unwrap()).collect();
        assert_eq!(
            ts,
            [1_795_948_507_780, 1_795_948_507_780, 1_795_948_507_781, 1_795_948_507_781, -1001, 12_000, 500]
        );
    }

    #[test]
    fn a_timestamp_that_is_not_a_number_is_an_error_naming_its_line() {
        let message = error_at("a 1 1\na 1 NaN\n", 2);
        assert_eq!(message, "expected a timestamp after the sample value, found \"NaN\"");
        error_at("a 1 1e400\n", 1);
        error_at("a 1 99999999999999999999\n", 1);
        error_at("a 1 1.5x\n", 1);
    }

    #[test]
    fn values_accept_nan_infinities_exponents_negative_zero_and_tiny_numbers() {
        let sink = read_ok("a NaN\na +Inf\na -Inf\na 1.5156E10\na -0\na 1e-300\na 5e-324\na +3\n");
        let v: Vec<f64> = sink.samples.iter().map(|s| s.2).collect();
        assert!(v[0].is_nan());
        assert_eq!(v[1], f64::INFINITY);
        assert_eq!(v[2], f64::NEG_INFINITY);
        assert_eq!(v[3], 1.5156e10);
        assert_eq!(v[4].to_bits(), (-0.0f64).to_bits());
        assert_eq!(v[5], 1e-300);
        assert_eq!(v[6].to_bits(), 1);
        assert_eq!(v[7], 3.0);
    }

    #[test]
    fn a_bad_value_is_a_one_sentence_error_naming_file_and_line() {
        let error = read("# HELP x y\nx{a=\"b\"} 1\n\nx{a=\"b\"} abc\n").unwrap_err();
        assert_eq!(error.to_string(), "test.prom:4: expected a sample value after the label set, found \"abc\"");
        let message = error_at("x\n", 1);
        assert_eq!(message, "expected a sample value after the metric name, found the end of the line");
        error_at("x{}\n", 1);
        error_at("x{a=\"b\"}1\n", 1);
    }

    #[test]
    fn help_unit_and_other_comments_are_ignored_and_type_lines_reach_the_sink() {
        let sink = read_ok(
            "# HELP a some \"help\" {text\n# UNIT a seconds\n#just a comment\n# TYPE a counter\n#\ta\n# TYPE b untyped\n#TYPE c gauge\n# TYPE \"my.metric\" stateset\na 1\n",
        );
        assert_eq!(
            sink.types,
            [
                ("a".to_owned(), MetricType::Counter),
                ("b".to_owned(), MetricType::Unknown),
                ("my.metric".to_owned(), MetricType::StateSet),
            ]
        );
        assert_eq!(sink.samples.len(), 1);
    }

    #[test]
    fn every_metric_type_name_is_read() {
        for kind in [
            MetricType::Counter,
            MetricType::Gauge,
            MetricType::Histogram,
            MetricType::GaugeHistogram,
            MetricType::Summary,
            MetricType::Info,
            MetricType::StateSet,
            MetricType::Unknown,
        ] {
            assert_eq!(MetricType::from_name(kind.as_str()), Some(kind));
        }
    }

    #[test]
    fn a_malformed_type_line_is_an_error_naming_its_line() {
        let message = error_at("a 1\n# TYPE a colour\n", 2);
        assert!(message.contains("unknown metric type \"colour\""), "{message}");
        error_at("# TYPE a\n", 1);
        error_at("# TYPE\n", 1);
        error_at("# TYPE a gauge extra\n", 1);
        error_at("# TYPE a.b gauge\n", 1);
    }

    #[test]
    fn content_after_eof_is_an_error_but_blank_lines_are_not() {
        let (_, summary) = read("a 1\n# EOF\n\n  \n").unwrap();
        assert_eq!(summary.format, Format::OpenMetrics);
        assert_eq!(summary.lines, 4);
        let message = error_at("a 1\n# EOF\n\na 2\n", 4);
        assert!(message.contains("after \"# EOF\" on line 2"), "{message}");
        error_at("# EOF\n# EOF\n", 2);
        error_at("# EOF\n# HELP a b\n", 2);
    }

    #[test]
    fn input_ending_with_eof_is_openmetrics_and_other_input_is_text() {
        assert_eq!(read("a 1\n# EOF").unwrap().1.format, Format::OpenMetrics);
        assert_eq!(read("a 1\n# EOF\r\n").unwrap().1.format, Format::OpenMetrics);
        assert_eq!(read("a 1\n").unwrap().1.format, Format::Text);
        assert_eq!(read("").unwrap().1.format, Format::Text);
        assert_eq!(read("# EOFX\na 1\n").unwrap().1.format, Format::Text);
    }

    #[test]
    fn crlf_line_endings_are_tolerated() {
        let (sink, summary) = read("# TYPE a gauge\r\na{b=\"c\"} 1 1000\r\n\r\na 2\r\n# EOF\r\n").unwrap();
        assert_eq!(summary.samples, 2);
        assert_eq!(sink.samples[0].1, pairs(&[("b", "c")]));
        assert_eq!(sink.samples[0].3, Some(1_000_000));
        assert_eq!(sink.samples[1].2, 2.0);
        assert_eq!(sink.types.len(), 1);
    }

    #[test]
    fn invalid_utf8_is_an_error_naming_its_line() {
        let mut sink = Collect::default();
        let error = read_from(&b"a 1\na{b=\"\xff\"} 2\n"[..], "x.prom", &mut sink).unwrap_err();
        assert_eq!(error.line, Some(2));
        assert_eq!(error.to_string(), "x.prom:2: the line is not valid UTF-8 (invalid byte at column 6)");
    }

    #[test]
    fn tabs_and_repeated_spaces_separate_tokens() {
        let sink = read_ok("a\t1\t1000\na  {b=\"c\"}   2    2000   \n  c 3\n");
        assert_eq!(sink.samples.len(), 3);
        assert_eq!(sink.samples[1].1, pairs(&[("b", "c")]));
        assert_eq!(sink.samples[1].3, Some(2_000_000));
        assert_eq!(sink.samples[2].0, "c");
    }

    #[test]
    fn an_exemplar_is_accepted_and_ignored() {
        let sink = read_ok("a_bucket{le=\"1\"} 3 1000 # {trace_id=\"abc\"} 0.5 999.5\na_bucket{le=\"2\"} 4 # {} 1\n");
        assert_eq!(sink.samples.len(), 2);
        assert_eq!(sink.samples[0].3, Some(1_000_000));
        assert_eq!(sink.samples[1].3, None);
        assert_eq!(sink.samples[1].2, 4.0);
    }

    #[test]
    fn a_malformed_exemplar_is_an_error_naming_its_line() {
        error_at("a 1\na 1 # trace\n", 2);
        error_at("a 1 # {a=\"b\"}\n", 1);
        error_at("a 1 # {a=\"b\"} x\n", 1);
        error_at("a 1 # {a=\"b\"} 1 2 3\n", 1);
        error_at("a 1 # {a=b} 1\n", 1);
        error_at("a 1 #{a=\"b\"} 1\n", 1);
    }

    #[test]
    fn text_after_the_timestamp_is_an_error_naming_its_line() {
        let message = error_at("a 1\n\na 1 2 3\n", 3);
        assert_eq!(message, "unexpected text after the timestamp: \"3\"");
    }

    #[test]
    fn metric_names_may_contain_colons_but_not_dots() {
        let sink = read_ok("job:rate5m:sum 1\n_x 2\n:y 3\n");
        assert_eq!(sink.samples[0].0, "job:rate5m:sum");
        let message = error_at("a 1\nmy.metric 1\n", 2);
        assert!(message.starts_with("unexpected character '.' after metric name \"my\""), "{message}");
        let message = error_at("1abc 1\n", 1);
        assert_eq!(message, "expected a metric name, found \"1abc 1\"");
    }

    #[test]
    fn label_values_are_unescaped_in_labels() {
        let sink = read_ok(r#"a{b="x\\y\"z\nw",c="},=#"} 1"#);
        assert_eq!(sink.samples[0].1, pairs(&[("b", "x\\y\"z\nw"), ("c", "},=#")]));
        let text = r#"a{b="plain",c="x\"y"} 1"#;
        let (sample, _) = parse_sample(text).unwrap();
        let labels = sample.labels().unwrap();
        assert!(matches!(labels[0].1, Cow::Borrowed("plain")));
        assert!(matches!(&labels[1].1, Cow::Owned(v) if v == "x\"y"));
    }

    #[test]
    fn an_unknown_escape_in_a_label_value_is_an_error_naming_its_line() {
        let message = error_at("a 1\na{b=\"x\\ty\"} 1\n", 2);
        assert!(message.starts_with("invalid escape sequence \"\\\\t\""), "{message}");
    }

    #[test]
    fn labels_tolerate_trailing_comma_whitespace_and_empty_sets() {
        let sink = read_ok("a{} 1\na{ } 1\na{b=\"c\",} 1\na{ b = \"c\" , d=\"e\" , } 1\n");
        assert!(sink.samples[0].1.is_empty());
        assert!(sink.samples[1].1.is_empty());
        assert_eq!(sink.samples[2].1, pairs(&[("b", "c")]));
        assert_eq!(sink.samples[3].1, pairs(&[("b", "c"), ("d", "e")]));
        let (sample, _) = parse_sample("a{ b = \"c\" , } 1").unwrap();
        assert_eq!(sample.labels_raw, " b = \"c\" , ");
    }

    #[test]
    fn labels_keep_their_written_order() {
        let sink = read_ok("a{z=\"1\",a=\"2\",m=\"3\"} 1\n");
        assert_eq!(sink.samples[0].1, pairs(&[("z", "1"), ("a", "2"), ("m", "3")]));
    }

    #[test]
    fn duplicate_label_names_are_an_error_from_labels() {
        let line = SampleLine::new("a", "b=\"1\",c=\"2\",b=\"3\"", 1.0);
        assert_eq!(line.labels().unwrap_err(), "duplicate label name \"b\" in the label set");
        let message = error_at("a 1\na{b=\"1\",b=\"2\"} 1\n", 2);
        assert!(message.contains("duplicate label name"), "{message}");
    }

    #[test]
    fn labels_of_a_hand_made_sample_line_report_syntax_errors() {
        for raw in ["b=\"1\"}", "b=1", "b", "=\"1\"", "b=\"1\" c=\"2\"", "b=\"1", ",", "\"q\""] {
            let line = SampleLine::new("a", raw, 1.0);
            assert!(line.labels().is_err(), "{raw}");
        }
    }

    #[test]
    fn malformed_label_sets_are_errors_naming_their_line() {
        let cases = [
            ("a{b=\"c\" 1", "expected ',' or '}' after \"b\" in the label set, found \"1\""),
            ("a{b=\"c\",", "the label set is not closed with '}'"),
            ("a{b=\"c} 1", "the value of label \"b\" is not closed with '\"'"),
            ("a{b} 1", "expected '=' after label name \"b\", found \"} 1\""),
            ("a{b=c} 1", "expected a double-quoted value for label \"b\", found \"c} 1\""),
            ("a{b=\"c\" d=\"e\"} 1", "expected ',' or '}' after \"b\" in the label set, found \"d=\\\"e\\\"} 1\""),
            ("a{,} 1", "expected a label name in the label set, found \",} 1\""),
            ("a{b=\"c\",,} 1", "expected a label name in the label set, found \",} 1\""),
            ("a{1b=\"c\"} 1", "expected a label name in the label set, found \"1b=\\\"c\\\"} 1\""),
            ("a{b:c=\"d\"} 1", "expected '=' after label name \"b\", found \":c=\\\"d\\\"} 1\""),
        ];
        for (line, expected) in cases {
            let message = error_at(&format!("ok 1\n# c\n{line}\n"), 3);
            assert_eq!(message, expected, "{line}");
        }
    }

    #[test]
    fn prometheus_3_quoted_names_are_read() {
        let sink = read_ok(
            "{\"my.metric\", \"a.b\"=\"x\", c=\"y\"} 1\n{\"only.name\"} 2\n{\"n\",} 3\nplain{\"dotted.label\"=\"v\"} 4\n",
        );
        assert_eq!(sink.samples[0].0, "my.metric");
        assert_eq!(sink.samples[0].1, pairs(&[("a.b", "x"), ("c", "y")]));
        assert_eq!(sink.samples[1].0, "only.name");
        assert!(sink.samples[1].1.is_empty());
        assert_eq!(sink.samples[2].0, "n");
        assert_eq!(sink.samples[3].1, pairs(&[("dotted.label", "v")]));
        let (sample, _) = parse_sample("{\"my.metric\", \"a.b\"=\"x\"} 1").unwrap();
        assert_eq!(sample.labels_raw, " \"a.b\"=\"x\"");
    }

    #[test]
    fn quoted_names_with_escapes_or_out_of_place_are_rejected_with_a_clear_error() {
        let message = error_at("{\"my\\\"metric\"} 1\n", 1);
        assert!(message.starts_with("escape sequences in quoted names are not supported"), "{message}");
        let message = error_at("a{\"q\"} 1\n", 1);
        assert_eq!(message, "unexpected quoted metric name \"q\" in the label set of \"a\"");
        let message = error_at("{a=\"b\", \"q\"} 1\n", 1);
        assert_eq!(message, "the quoted metric name \"q\" must come first in the label set");
        let message = error_at("{a=\"b\"} 1\n", 1);
        assert_eq!(
            message,
            "expected a metric name (a quoted name first in the label set, or a __name__ label), found label \"a\""
        );
        // The exposition's escapes only, in the quoted form.
        let message = error_at("{\"q\", a=\"x\\ty\"} 1\n", 1);
        assert!(message.starts_with("invalid escape sequence \"\\\\t\""), "{message}");
        let message = error_at("{\"q\", \"r\"} 1\n", 1);
        assert_eq!(message, "the quoted metric name \"r\" must come first in the label set");
        error_at("{} 1\n", 1);
        error_at("{\"\"} 1\n", 1);
    }

    #[test]
    fn promtool_tsdb_dump_lines_are_read_with_the_name_from_the_name_label() {
        // `promtool tsdb dump` before Prometheus 2.49: labels sorted (an upper-case label
        // before `__name__`), `", "` separators, Go-quoted values, `%g` values, ms times.
        let text = "{__name__=\"flink_uptime\", host=\"127_0_0_1\", job=\"flink\"} 998 1795948512780\n\
                    {A=\"x\\ty\\u00e9\\x41\", __name__=\"m\"} 1.795948507e+09 1795948517780\n\
                    {__name__=\"m\"} NaN 1795948522780\n";
        let (sink, summary) = read(text).unwrap();
        assert_eq!(summary.samples, 3);
        assert_eq!(summary.timestamp_unit, Some(TimeUnit::Milliseconds));
        assert_eq!(sink.samples[0].0, "flink_uptime");
        assert_eq!(sink.samples[0].1, pairs(&[("host", "127_0_0_1"), ("job", "flink")]));
        assert_eq!(sink.samples[0].2, 998.0);
        assert_eq!(sink.samples[0].3, Some(1_795_948_512_780));
        assert_eq!(sink.samples[1].0, "m");
        assert_eq!(sink.samples[1].1, pairs(&[("A", "x\tyéA")]));
        assert_eq!(sink.samples[1].2, 1_795_948_507.0);
        assert!(sink.samples[2].2.is_nan() && sink.samples[2].1.is_empty());
        let (sample, _) = parse_sample("{__name__=\"m\", a=\"b\"} 1 2").unwrap();
        assert_eq!(sample.form, LineForm::PromtoolDump);
    }

    #[test]
    fn a_name_label_that_is_empty_doubled_escaped_or_beside_another_name_is_an_error() {
        assert_eq!(error_at("{__name__=\"\"} 1\n", 1), "the __name__ label is empty");
        assert!(error_at("{__name__=\"a\", __name__=\"b\"} 1\n", 1).starts_with("duplicate label name"));
        assert!(error_at("{__name__=\"a\\tb\"} 1\n", 1).starts_with("escape sequences in the __name__ label"));
        assert_eq!(
            error_at("{\"q\", __name__=\"a\"} 1\n", 1),
            "the metric \"q\" is named twice: as a quoted name and as a __name__ label"
        );
        assert_eq!(
            error_at("m{__name__=\"a\"} 1\n", 1),
            "a __name__ label in the label set of \"m\": the metric is named twice"
        );
        // A byte of invalid UTF-8 or a surrogate cannot be a label value.
        assert!(error_at("{__name__=\"a\", b=\"\\xff\"} 1\n", 1).starts_with("invalid escape sequence"));
        assert!(error_at("{__name__=\"a\", b=\"\\ud800\"} 1\n", 1).starts_with("invalid escape sequence"));
    }

    #[test]
    fn promtool_dump_openmetrics_lines_are_read() {
        // `promtool tsdb dump-openmetrics` (2.49+): `%s%s %g %.3f`, condensed label sets,
        // `{}` for a series without labels, `# EOF`.
        let text = "flink_uptime{host=\"h\",job=\"flink\"} 998 1795948512.780\nup{} 1 1795948512.780\n# EOF\n";
        let (sink, summary) = read(text).unwrap();
        assert_eq!(summary.format, Format::OpenMetrics);
        assert_eq!(sink.samples[0].1, pairs(&[("host", "h"), ("job", "flink")]));
        assert_eq!(sink.samples[1].3, Some(1_795_948_512_780));
    }

    #[test]
    fn json_where_metrics_belong_is_named_as_json() {
        for text in
            ["{\"plan\": {\"jid\": \"x\"}}\n", "{\n  \"plan\": 1\n}\n", "[1, 2]\n", "{ \"status\" : \"success\" }"]
        {
            let error = read_from(text.as_bytes(), "plan.json", &mut Collect::default()).unwrap_err();
            assert!(error.json, "{text}: {error}");
            assert_eq!(error.to_string(), "plan.json:1: this is JSON, not Prometheus text exposition or OpenMetrics");
        }
        // Lines that open with a brace but are exposition text are not JSON.
        for text in ["{\"q\", a=\"b\"} x\n", "{__name__=\"m\"} x\n", "{} 1\n"] {
            let error = read_from(text.as_bytes(), "x.prom", &mut Collect::default()).unwrap_err();
            assert!(!error.json, "{text}: {error}");
        }
    }

    struct Refuse;

    impl SampleSink for Refuse {
        fn sample(&mut self, line: &SampleLine<'_>, _t_ms: Option<i64>) -> Result<(), String> {
            if line.name == "bad" { Err("the sink refuses metric \"bad\"".to_owned()) } else { Ok(()) }
        }
    }

    #[test]
    fn a_sink_error_aborts_the_read_with_file_and_line() {
        let error = read_from(&b"good 1\n\nbad 2\ngood 3\n"[..], "in.prom", &mut Refuse).unwrap_err();
        assert_eq!(error.to_string(), "in.prom:3: the sink refuses metric \"bad\"");
    }

    fn gzip(text: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(text).unwrap();
        encoder.finish().unwrap()
    }

    #[test]
    fn gzip_input_is_detected_by_its_magic_bytes_not_by_the_extension() {
        let dir = tempfile::tempdir().unwrap();
        let text = b"a 1 1000.5\nb{c=\"d\"} 2 1001\n# EOF\n";
        let gz_named_prom = dir.path().join("looks-plain.prom");
        std::fs::write(&gz_named_prom, gzip(text)).unwrap();
        let plain_named_gz = dir.path().join("looks-compressed.om.gz");
        std::fs::write(&plain_named_gz, text).unwrap();
        for path in [&gz_named_prom, &plain_named_gz] {
            let mut sink = Collect::default();
            let summary = read_path(path, &mut sink).unwrap();
            assert_eq!(summary.samples, 2);
            assert_eq!(summary.format, Format::OpenMetrics);
            assert_eq!(sink.samples[1].3, Some(1_001_000));
        }
    }

    #[test]
    fn concatenated_gzip_members_are_read_as_one_input() {
        let mut bytes = gzip(b"a 1\n");
        bytes.extend(gzip(b"a 2\n# EOF\n"));
        let mut sink = Collect::default();
        let summary = read_from(bytes.as_slice(), "two.gz", &mut sink).unwrap();
        assert_eq!(summary.samples, 2);
    }

    #[test]
    fn a_truncated_gzip_is_an_error_naming_the_line_being_read() {
        let text: String = (0..5000).map(|k| format!("a{{k=\"{k}\"}} {k} {k}.5\n")).collect();
        let bytes = gzip(text.as_bytes());
        let truncated = &bytes[..bytes.len() / 2];
        let mut sink = Collect::default();
        let error = read_from(truncated, "cut.om.gz", &mut sink).unwrap_err();
        let line = error.line.expect("a line number");
        assert!(line > 1 && line <= 5000, "{error}");
        assert_eq!(sink.samples.len() as u64, line - 1, "{error}");
        assert!(error.to_string().starts_with(&format!("cut.om.gz:{line}: cannot read the gzip stream: ")), "{error}");
    }

    #[test]
    fn a_missing_file_is_a_one_sentence_error_without_a_line() {
        let error = read_path(Path::new("missing.om.gz"), &mut Collect::default()).unwrap_err();
        assert_eq!(error.line, None);
        assert!(error.to_string().starts_with("missing.om.gz: cannot open: "), "{error}");
    }

    #[test]
    fn a_last_line_without_newline_is_read() {
        let (sink, summary) = read("a 1\nb 2").unwrap();
        assert_eq!(summary.lines, 2);
        assert_eq!(sink.samples[1].0, "b");
    }

    #[test]
    fn the_summary_counts_lines_samples_and_timestamps() {
        let (_, summary) = read("# TYPE a gauge\na 1 1\n\na 2\n# EOF\n").unwrap();
        assert_eq!(
            summary,
            ReadSummary {
                lines: 5,
                samples: 2,
                with_timestamp: 1,
                format: Format::OpenMetrics,
                timestamp_unit: Some(TimeUnit::Seconds),
            }
        );
    }

    #[test]
    fn a_byte_order_mark_at_the_start_is_skipped() {
        let sink = read_ok("\u{feff}a 1\n");
        assert_eq!(sink.samples[0].0, "a");
    }

    fn write_all_samples(samples: &[ToWrite<'_>]) -> String {
        let mut writer = OpenMetricsWriter::new(Vec::new());
        writer.metric_type("a", MetricType::Gauge).unwrap();
        for (name, labels, value, t) in samples {
            writer.sample(name, labels, *value, *t).unwrap();
        }
        String::from_utf8(writer.finish().unwrap()).unwrap()
    }

    #[test]
    fn the_writer_writes_seconds_with_millisecond_precision_and_eof() {
        let text = write_all_samples(&[
            ("a", vec![("b", "c")], 1.5, Some(1_795_948_507_780)),
            ("a", vec![], 2.0, Some(-1500)),
            ("a", vec![], 1e-300, Some(7)),
            ("a", vec![], f64::NAN, None),
            ("a", vec![], f64::NEG_INFINITY, Some(0)),
        ]);
        assert_eq!(
            text,
            "# TYPE a gauge\na{b=\"c\"} 1.5 1795948507.780\na 2 -1.500\na 1e-300 0.007\na NaN\na -Inf 0.000\n# EOF\n"
        );
        let (sink, summary) = read(&text).unwrap();
        assert_eq!(summary.format, Format::OpenMetrics);
        let ts: Vec<_> = sink.samples.iter().map(|s| s.3).collect();
        assert_eq!(ts, [Some(1_795_948_507_780), Some(-1500), Some(7), None, Some(0)]);
    }

    #[test]
    fn the_writer_escapes_label_values_and_quotes_other_names() {
        let text = write_all_samples(&[
            ("my.metric", vec![("a.b", "x\\y\"z\nw"), ("c", "},=")], 1.0, None),
            ("dotted.only", vec![], 2.0, None),
        ]);
        assert!(text.contains("{\"my.metric\",\"a.b\"=\"x\\\\y\\\"z\\nw\",c=\"},=\"} 1\n"), "{text}");
        assert!(text.contains("{\"dotted.only\"} 2\n"), "{text}");
        let sink = read_ok(&text);
        assert_eq!(sink.samples[0].0, "my.metric");
        assert_eq!(sink.samples[0].1, pairs(&[("a.b", "x\\y\"z\nw"), ("c", "},=")]));
        assert_eq!(sink.samples[1].0, "dotted.only");
    }

    #[test]
    fn the_writer_rejects_names_it_could_not_read_back() {
        let mut writer = OpenMetricsWriter::new(Vec::new());
        for (name, labels) in [
            ("", vec![]),
            ("a\"b", vec![]),
            ("a", vec![("", "x")]),
            ("a", vec![("b\\c", "x")]),
            ("a", vec![("b", "x"), ("b", "y")]),
        ] {
            let error = writer.sample(name, &labels, 1.0, None).unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
        }
        assert!(writer.metric_type("a\nb", MetricType::Gauge).is_err());
        // Nothing of a rejected line reaches the output.
        assert_eq!(writer.finish().unwrap(), b"# EOF\n");
    }

    #[test]
    fn written_values_read_back_bit_exactly() {
        let values = [
            0.0,
            -0.0,
            1.0,
            0.1,
            1.0 / 3.0,
            123_456_789.123_456_78,
            1e15,
            1e16,
            9_007_199_254_740_993.0,
            1e-5,
            9.999_999e-6,
            f64::MIN_POSITIVE,
            f64::MIN_POSITIVE / 3.0,
            f64::MAX,
            f64::MIN,
            f64::EPSILON,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ];
        let mut writer = OpenMetricsWriter::new(Vec::new());
        for v in values {
            writer.sample("v", &[], v, None).unwrap();
        }
        let text = String::from_utf8(writer.finish().unwrap()).unwrap();
        let sink = read_ok(&text);
        for (written, (_, _, read, _)) in values.iter().zip(&sink.samples) {
            assert_eq!(written.to_bits(), read.to_bits(), "{written:e} in {text}");
        }
    }
}
