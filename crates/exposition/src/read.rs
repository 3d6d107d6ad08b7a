//! The reader: lines in, samples out, and what a read saw.

use std::fmt;

use crate::SampleSink;
use crate::comment::{Comment, looks_like_json, parse_comment};
use crate::lex::{is_blank_char, show};
use crate::line::{LastHead, parse_sample_after};
use crate::timestamp::{parse_timestamp, time_in_range};

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
#[derive(Debug)]
pub struct ReadError {
    /// The input's name, as given to [`Reader::new`] or [`read_bytes`].
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

impl std::error::Error for ReadError {}

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

/// Reads exposition text one line at a time and hands every sample to a sink, in order.
///
/// The reader does no IO: the caller reads the input (a file, a gzip stream, an HTTP
/// answer) and gives it [`Reader::line`] by line; [`read_bytes`] does it for text already
/// in memory. Each line is checked whole before its sample reaches the sink, and the
/// reader keeps what spans lines: the line count, the unit of the first timestamp, a
/// `# EOF` seen, and the head of the last sample line (a line starting with the same
/// bytes is not scanned again).
///
/// ```
/// use exposition_text::{Reader, SampleLine, SampleSink};
///
/// struct Names(Vec<String>);
/// impl SampleSink for Names {
///     fn sample(&mut self, line: &SampleLine<'_>, _t_ms: Option<i64>) -> Result<(), String> {
///         self.0.push(line.name.to_string());
///         Ok(())
///     }
/// }
///
/// let mut reader = Reader::new("tm1.prom");
/// let mut names = Names(Vec::new());
/// reader.line(b"flink_taskmanager_job_task_busyTimeMsPerSecond{subtask_index=\"0\",} 1.5156E10\n", &mut names)?;
/// let summary = reader.finish();
/// assert_eq!((summary.samples, names.0.len()), (1, 1));
/// # Ok::<(), exposition_text::ReadError>(())
/// ```
#[derive(Debug)]
pub struct Reader {
    source: String,
    summary: ReadSummary,
    /// The unit of this input's timestamps and the line that decided it.
    unit: Option<(TimeUnit, u64)>,
    /// The line of `# EOF`, once seen.
    eof_line: Option<u64>,
    last_head: LastHead,
}

impl Reader {
    /// A reader of the input named `source` in errors (a path, an URL, `"-"`).
    pub fn new(source: &str) -> Reader {
        Reader {
            source: source.to_owned(),
            summary: ReadSummary {
                lines: 0,
                samples: 0,
                with_timestamp: 0,
                format: Format::Text,
                timestamp_unit: None,
            },
            unit: None,
            eof_line: None,
            last_head: LastHead::default(),
        }
    }

    /// Lines read so far.
    pub fn lines(&self) -> u64 {
        self.summary.lines
    }

    /// An error about the line being read (the one after the last line given), for a
    /// failure of the caller's input such as an I/O or a gzip error.
    pub fn error_reading(&self, message: impl Into<String>) -> ReadError {
        ReadError::new(&self.source, Some(self.summary.lines + 1), message)
    }

    /// Reads the next line (with or without its `\n` or `\r\n`): a blank line, a comment, a
    /// `# TYPE` line (handed to [`SampleSink::metric_type`]), `# EOF`, or a sample (handed
    /// to [`SampleSink::sample`]). A byte order mark at the start of the first line is
    /// skipped. After an error the read is over: the reader must not be given more lines.
    ///
    /// # Errors
    ///
    /// A [`ReadError`] naming the source and this line's 1-based number for: a line that
    /// is not a blank line, a comment or a well-formed sample; invalid UTF-8; a `# TYPE`
    /// line with a missing or unknown kind; anything but blank lines after `# EOF`; a
    /// timestamp outside the years -9999 to 9999 or whose unit contradicts the input's
    /// first one; an error returned by the sink.
    pub fn line<S: SampleSink + ?Sized>(&mut self, bytes: &[u8], sink: &mut S) -> Result<(), ReadError> {
        self.summary.lines += 1;
        let line_no = self.summary.lines;
        let mut bytes = bytes;
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
            self.error(format!("the line is not valid UTF-8 (invalid byte at column {})", e.valid_up_to() + 1))
        })?;
        let body = line.trim_matches(is_blank_char);
        if body.is_empty() {
            return Ok(());
        }
        if let Some(eof) = self.eof_line {
            return Err(self.error(format!("unexpected content after \"# EOF\" on line {eof}: {}", show(body))));
        }
        if body.as_bytes()[0] == b'#' {
            match parse_comment(body) {
                Ok(Comment::Eof) => self.eof_line = Some(line_no),
                Ok(Comment::Type(family, kind)) => sink.metric_type(&family, kind),
                Ok(Comment::Other) => {}
                Err(message) => return Err(self.error(message)),
            }
            return Ok(());
        }
        let (sample, timestamp) = parse_sample_after(body, &mut self.last_head).map_err(|m| {
            if self.summary.samples == 0 && looks_like_json(body) {
                let mut e = self.error("this is JSON, not Prometheus text exposition or OpenMetrics");
                e.json = true;
                e
            } else {
                self.error(m)
            }
        })?;
        let t_ms = match timestamp {
            None => None,
            Some(token) => Some(self.timestamp(token)?),
        };
        self.summary.samples += 1;
        sink.sample(&sample, t_ms).map_err(|m| self.error(m))
    }

    /// What the read saw; call it after the last line.
    pub fn finish(mut self) -> ReadSummary {
        if self.eof_line.is_some() {
            self.summary.format = Format::OpenMetrics;
        }
        self.summary.timestamp_unit = self.unit.map(|(u, _)| u);
        self.summary
    }

    /// The timestamp token of the current line in Unix milliseconds, held to the range
    /// and to the unit of the input's first timestamp.
    fn timestamp(&mut self, token: &str) -> Result<i64, ReadError> {
        let line_no = self.summary.lines;
        let (this_unit, ms) = parse_timestamp(token).map_err(|m| self.error(m))?;
        if !time_in_range(ms) {
            return Err(self.error(format!("timestamp {} is outside the years -9999 to 9999", show(token))));
        }
        match self.unit {
            None => self.unit = Some((this_unit, line_no)),
            Some((first, first_line)) if first != this_unit => {
                return Err(self.error(format!(
                    "timestamp {} is in {} but the input's first timestamp (line {first_line}) was in {}",
                    show(token),
                    this_unit.name(),
                    first.name()
                )));
            }
            Some(_) => {}
        }
        self.summary.with_timestamp += 1;
        Ok(ms)
    }

    /// An error about the current line.
    fn error(&self, message: impl Into<String>) -> ReadError {
        ReadError::new(&self.source, Some(self.summary.lines), message)
    }
}

/// Reads exposition text held in memory, line by line as [`Reader::line`] does, and
/// hands every sample to `sink`, in order. A last line without a newline is read.
///
/// # Errors
///
/// As [`Reader::line`], naming `source` and the 1-based line.
pub fn read_bytes<S: SampleSink + ?Sized>(text: &[u8], source: &str, sink: &mut S) -> Result<ReadSummary, ReadError> {
    let mut reader = Reader::new(source);
    for line in text.split_inclusive(|&b| b == b'\n') {
        reader.line(line, sink)?;
    }
    Ok(reader.finish())
}
