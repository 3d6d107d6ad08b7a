//! Label sets: `{name="value", …}` scanned in place, values unescaped on demand.
//!
//! A label set is validated while a line is read and split into pairs only when a sink
//! asks ([`crate::SampleLine::labels`]). Label values and quoted names hold the
//! exposition's escapes (`\\`, `\"`, `\n`; the [escaping schemes] of Prometheus 3 give
//! quoted names the same ones as label values); in `promtool tsdb dump` lines, Go's
//! `strconv.Quote` escapes.
//!
//! [escaping schemes]: https://prometheus.io/docs/instrumenting/escaping_schemes/

use std::borrow::Cow;

use crate::lex::{label_name_len, show_at, skip_blanks};

/// One item of a label set.
pub(crate) enum Item<'a> {
    /// `name="value"`; `name` and `value` are as written (escapes intact), `escaped`
    /// says which escapes the value holds, `name_escaped` whether the (quoted) name holds
    /// any.
    Label { name: &'a str, value: &'a str, escaped: Escapes, name_escaped: bool },
    /// A bare double-quoted string: a Prometheus 3 metric name, as written, and whether
    /// it holds escapes.
    QuotedName(&'a str, bool),
}

/// How the names of a label set are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Dialect {
    /// Label values may hold every escape of Go's `strconv.Quote` (`promtool`'s output);
    /// without it, only `\\`, `\"` and `\n`.
    pub go: bool,
    /// Label names are written raw, whatever they hold, up to the `=`: `promtool tsdb
    /// dump-openmetrics` writes a Prometheus 3 name such as `a.b` unquoted (`{a.b="x"}`).
    pub raw_names: bool,
}

impl Dialect {
    /// The exposition formats: quoted names and the exposition's escapes.
    pub const EXPOSITION: Dialect = Dialect { go: false, raw_names: false };
    /// `promtool tsdb dump`: quoted names, Go-quoted values.
    pub const DUMP: Dialect = Dialect { go: true, raw_names: false };
    /// `promtool tsdb dump-openmetrics`: raw names, Go-quoted values.
    pub const DUMP_OPENMETRICS: Dialect = Dialect { go: true, raw_names: true };
}

/// A name as written, unescaped when it holds escapes.
pub(crate) fn name_text(raw: &str, escaped: bool) -> Cow<'_, str> {
    if escaped { Cow::Owned(unescape(raw)) } else { Cow::Borrowed(raw) }
}

/// The escapes a label value holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Escapes {
    None,
    /// Only `\\`, `\"` and `\n`, the exposition formats' escapes.
    Exposition,
    /// At least one of the other escapes of Go's `strconv.Quote` (`\t`, `\xHH`, …).
    Go,
}

/// The metric name as a label (`promtool tsdb dump`, PromQL).
pub(crate) const NAME_LABEL: &str = "__name__";

/// Scans the items of a label set in `s` from byte `start`, written in `dialect`.
///
/// With `closed`, the set must end with an unquoted `}`, whose index is returned; without
/// it, the set runs to the end of `s` (a `}` is an error) and `s.len()` is returned.
/// `on_item(item, index, end)` receives each item in written order with its 0-based
/// position and the byte index just past it; its error stops the scan.
pub(crate) fn scan_label_set<'a>(
    s: &'a str,
    start: usize,
    closed: bool,
    dialect: Dialect,
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
        let (name, quoted, name_escaped) = if b[i] == b'"' {
            let (name, escaped, end) = quoted_name(s, i)?;
            i = end;
            (name, true, escaped)
        } else if dialect.raw_names {
            let n = raw_label_name_len(&b[i..]);
            if n == 0 {
                return Err(format!("expected a label name in the label set, found {}", show_at(s, i)));
            }
            i += n;
            (&s[i - n..i], false, false)
        } else {
            let n = label_name_len(&b[i..]);
            if n == 0 {
                return Err(format!("expected a label name in the label set, found {}", show_at(s, i)));
            }
            i += n;
            (&s[i - n..i], false, false)
        };
        let name_end = i;
        i = skip_blanks(b, i);
        if b.get(i) == Some(&b'=') {
            i = skip_blanks(b, i + 1);
            if b.get(i) != Some(&b'"') {
                return Err(format!("expected a double-quoted value for label {name:?}, found {}", show_at(s, i)));
            }
            let (value, escaped, end) = quoted_value(s, i, name, dialect.go)?;
            on_item(Item::Label { name, value, escaped, name_escaped }, index, end)?;
            i = end;
        } else if quoted {
            on_item(Item::QuotedName(name, name_escaped), index, name_end)?;
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
pub(crate) fn go_escape(b: &[u8]) -> Option<(usize, char)> {
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

/// Length of a label name written raw (`promtool tsdb dump-openmetrics`) at the start of
/// `b`: every byte up to the `=`, none of them a blank, `"`, `,`, `{` or `}`; 0 if none.
fn raw_label_name_len(b: &[u8]) -> usize {
    b.iter().position(|&c| matches!(c, b'=' | b' ' | b'\t' | b'"' | b',' | b'{' | b'}')).unwrap_or(b.len())
}

/// Scans a double-quoted name (Prometheus 3 metric or label name) whose opening quote is
/// at byte `i`: returns the name as written, whether it holds escapes, and the index past
/// the closing quote. The escapes are those of label values (`\\`, `\"`, `\n`); an empty
/// name is an error.
pub(crate) fn quoted_name(s: &str, i: usize) -> Result<(&str, bool, usize), String> {
    let b = s.as_bytes();
    let mut j = i + 1;
    let mut escaped = false;
    loop {
        match b.get(j) {
            None => return Err("a quoted name is not closed with '\"'".to_owned()),
            Some(b'"') => break,
            Some(b'\\') => match b.get(j + 1) {
                Some(b'\\' | b'"' | b'n') => {
                    escaped = true;
                    j += 2;
                }
                _ => {
                    let sequence: String = s[j..].chars().take(2).collect();
                    return Err(format!(
                        "invalid escape sequence {sequence:?} in a quoted name (only \\\\, \\\" and \\n are allowed)"
                    ));
                }
            },
            Some(_) => j += 1,
        }
    }
    if j == i + 1 {
        return Err("a quoted name is empty".to_owned());
    }
    Ok((&s[i + 1..j], escaped, j + 1))
}

/// Undoes the label value escapes `\\`, `\"` and `\n`.
pub(crate) fn unescape(raw: &str) -> String {
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
pub(crate) fn unescape_go(raw: &str) -> String {
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
