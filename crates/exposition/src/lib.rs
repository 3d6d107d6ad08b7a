//! Prometheus text exposition (format 0.0.4) and OpenMetrics 1.0 text: a reader that never
//! drops a sample silently, and a writer whose output it reads back bit-exactly.
//!
//! # The formats
//!
//! * [Prometheus text exposition 0.0.4][text]: `name{label="value",…} value [timestamp]`,
//!   one sample a line, timestamps in milliseconds, `# HELP` and `# TYPE` comments;
//! * [OpenMetrics 1.0 text][om]: the same lines with timestamps in seconds, exemplars after
//!   ` # `, and a closing `# EOF`;
//! * the [Prometheus 3 quoted names][utf8]: `{"my.metric", "a.b"="x"} 1`, names that are not
//!   `[a-zA-Z_:][a-zA-Z0-9_:]*` written in double quotes inside the braces, with the
//!   [escapes][escaping] of label values (`\\`, `\"`, `\n`);
//! * the lines of `promtool tsdb dump`: `{__name__="m", a="x"} 1 1795948512780`, the metric
//!   name as a label and values quoted the way Go's `strconv.Quote` writes them;
//! * the lines of Prometheus 3's `promtool tsdb dump-openmetrics`, which prints a UTF-8
//!   metric name and label names raw, unquoted (`my.metric{a.b="x"} 1 1795948512.780`,
//!   values `strconv.Quote`d): read so when the text before the `{` is not a legacy name.
//!   This form was checked against promtool's source (`cmd/promtool/tsdb.go`,
//!   `formatSeriesSetOpenMetrics` and `CondensedString`), not against a running promtool 3:
//!   Debian ships Prometheus 2.
//!
//! The inputs it serves are recordings exported from Prometheus (`*.om.gz`: OpenMetrics
//! with timestamps in seconds, ending with `# EOF`) and raw scrapes of Flink's Prometheus
//! reporter (`*.prom`: no timestamps, no `# EOF`, label sets ending in `,}`, values such as
//! `1.5156E10` or `NaN`). Both are read as written:
//!
//! * a label set may end with a comma (`{host="h",}`), as Flink writes it and the text
//!   format's grammar allows;
//! * a value is any number Go's `strconv.ParseFloat` reads (`1.5156E10`, `NaN`, `+Inf`,
//!   `-Inf`, `-0`, `5e-324`);
//! * metric names may hold `:`, label values any text: `,` `=` `"` `}` and `#` inside
//!   quotes are part of the value, and `\\`, `\"`, `\n` are unescaped by
//!   [`SampleLine::labels`];
//! * a timestamp with `.`, `e` or `E`, or an integer below 1e11, is in seconds; a larger
//!   integer in milliseconds (1e11 ms is 1973, 1e11 s the year 5138), and the unit of an
//!   input's first timestamp holds for the whole input.
//!
//! # What is refused, and why
//!
//! The one hard rule: **no sample is dropped silently**. Every sample line reaches the
//! [`SampleSink`] in input order, and a line that cannot be read whole stops the read with
//! a [`ReadError`] naming the input and the 1-based line. A line the reader half
//! understood is never skipped: a reader that skips what it cannot parse (as the
//! `prometheus-parse` crate does with label values holding `,` `=` `"` or `}`, and with
//! names holding `:`) turns a scrape into a diagnosis of less than what was measured.
//!
//! Refused, each with a one-sentence error:
//!
//! * a malformed line: a name that is not `[a-zA-Z_:][a-zA-Z0-9_:]*` outside quotes, a
//!   label set not closed, a label value not quoted, a value or timestamp that is no
//!   number, text after the timestamp, a malformed exemplar;
//! * an escape other than `\\`, `\"` and `\n` in a label value (the only ones the
//!   [formats define][text]; Prometheus keeps an unknown one as two characters), except in
//!   `promtool` lines, whose Go escapes are read; the same in quoted names;
//! * a `# TYPE` line with a missing or unknown kind, anything but blank lines after
//!   `# EOF`;
//! * a timestamp outside the years -9999 to 9999 (what RFC 3339 names), or in another unit
//!   than the input's first timestamp;
//! * a duplicate label name, when the sink asks for the labels ([`SampleLine::labels`]);
//! * JSON given where metrics belong, named as JSON ([`ReadError::json`]) so a caller can
//!   say which option takes it.
//!
//! The reader is lenient where leniency loses nothing: CRLF line endings, a byte order
//! mark, tabs and repeated spaces between tokens, `# HELP`, `# UNIT` and other comments
//! (ignored), an empty label set `{}`.
//!
//! # Purity and speed
//!
//! The crate does no IO: [`Reader`] takes lines the caller read (from a file, a gzip
//! stream, an HTTP answer), [`read_bytes`] text already in memory, and [`OpenMetricsWriter`]
//! writes to any [`std::io::Write`] it is given. The reader does not allocate per line:
//! [`SampleLine`] borrows from the line, and label sets are only validated while reading;
//! they are split into pairs by [`SampleLine::labels`] when the sink asks for them.
//!
//! The parser is checked against Prometheus itself: `tests/prometheus_reference.rs` has a
//! real Prometheus scrape real Flink captures and hard cases and compares every series it
//! stored with what this reader gives.
//!
//! [text]: https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format
//! [om]: https://github.com/prometheus/OpenMetrics/blob/v1.0.0/specification/OpenMetrics.md
//! [utf8]: https://prometheus.io/docs/guides/utf8/
//! [escaping]: https://prometheus.io/docs/instrumenting/escaping_schemes/

mod comment;
mod labels;
mod lex;
mod line;
mod read;
mod sample;
mod timestamp;
mod write;

pub use lex::{is_valid_label_name, is_valid_metric_name};
pub use read::{Format, ReadError, ReadSummary, Reader, TimeUnit, read_bytes};
pub use sample::{Label, LineForm, MetricType, SampleLine, SampleSink};
pub use timestamp::time_in_range;
pub use write::OpenMetricsWriter;

#[cfg(test)]
mod tests;
