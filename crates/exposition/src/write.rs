//! The OpenMetrics writer: text that the reader reads back bit-exactly.

use std::io::{self, BufWriter, Write};

use crate::MetricType;
use crate::lex::{is_valid_label_name, is_valid_metric_name};

/// Size of the writer's output buffer.
const WRITE_BUFFER_BYTES: usize = 1 << 16;

/// Writes OpenMetrics text: `# TYPE` lines, samples with timestamps in seconds with
/// millisecond precision, and `# EOF` on finish.
///
/// Values are written so that they read back bit-exactly (shortest round-trip decimal;
/// `NaN`, `+Inf`, `-Inf`). Label values are escaped (`\\`, `\"`, `\n`). Names that are
/// not `[a-zA-Z_:][a-zA-Z0-9_:]*` (metrics) or `[a-zA-Z_][a-zA-Z0-9_]*` (labels) are
/// written in the Prometheus 3 quoted form (`{"my.metric","a.b"="x"}`), escaped the same
/// way, as the [escaping schemes] of Prometheus 3 say for `allow-utf-8`; the reader
/// accepts it.
///
/// [escaping schemes]: https://prometheus.io/docs/instrumenting/escaping_schemes/ Output is buffered
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
    /// I/O errors, and `InvalidInput` for an empty family name.
    pub fn metric_type(&mut self, family: &str, kind: MetricType) -> io::Result<()> {
        if is_valid_metric_name(family) {
            self.out.write_all(b"# TYPE ")?;
            self.out.write_all(family.as_bytes())?;
        } else {
            check_quotable("metric family", family)?;
            self.out.write_all(b"# TYPE \"")?;
            write_escaped(&mut self.out, family)?;
            self.out.write_all(b"\"")?;
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
    /// I/O errors, and `InvalidInput` for an empty name or a duplicate label name.
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
            out.write_all(b"{\"")?;
            write_escaped(out, name)?;
            out.write_all(b"\"")?;
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
                out.write_all(b"\"")?;
                write_escaped(out, label)?;
                out.write_all(b"\"")?;
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

/// Rejects a name that cannot be written: an empty one (any other is written quoted,
/// with escapes).
fn check_quotable(what: &str, name: &str) -> io::Result<()> {
    if name.is_empty() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("a {what} name cannot be empty")));
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
