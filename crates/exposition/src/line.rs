//! One sample line: `name{labels} value [timestamp] [# exemplar]`, the Prometheus 3 quoted
//! form `{"name", labels} value`, `promtool tsdb dump`'s `{__name__="name", …} value ts`, and
//! `promtool tsdb dump-openmetrics`' `my.name{a.b="x"} value ts` (Prometheus 3 names raw).

use std::borrow::Cow;

use crate::labels::{Dialect, Escapes, Item, NAME_LABEL, scan_label_set, unescape, unescape_go};
use crate::lex::{is_blank_char, metric_name_len, show, show_at, show_char, skip_blanks, token_end};
use crate::{LineForm, SampleLine};

/// The head of a sample line: the metric name as written and the escapes it holds, the
/// label set as written, the index just past them, what they are (for messages) and the
/// form of the line.
#[derive(Debug, Clone, Copy)]
struct Head<'a> {
    name: &'a str,
    name_escapes: Escapes,
    labels_raw: &'a str,
    after: usize,
    what: &'static str,
    form: LineForm,
}

/// A name as written, unescaped as its escapes say.
fn decode(raw: &str, escapes: Escapes) -> Cow<'_, str> {
    match escapes {
        Escapes::None => Cow::Borrowed(raw),
        Escapes::Exposition => Cow::Owned(unescape(raw)),
        Escapes::Go => Cow::Owned(unescape_go(raw)),
    }
}

/// Parses the head of a sample line: the metric name and the label set, validated. A
/// line that is not exposition text is read as `promtool tsdb dump-openmetrics` writes
/// Prometheus 3 names (raw, before the braces and in them) when it is that; otherwise the
/// exposition's error stands.
fn parse_head(line: &str) -> Result<Head<'_>, String> {
    if line.as_bytes()[0] == b'{' {
        return parse_braced_name(line);
    }
    parse_exposition_head(line).or_else(|error| parse_promtool_openmetrics_head(line).map_err(|_| error))
}

/// Whether the text before the first `{` of a line is a metric name that needs quotes
/// (not `[a-zA-Z_:][a-zA-Z0-9_:]*`): only then is a line read as promtool's raw form, so
/// that exposition text keeps its strict rules (no unknown escapes, valid label names).
fn raw_name_before_brace(line: &str) -> Option<usize> {
    let open = line.find('{')?;
    (metric_name_len(line.as_bytes()) != open).then_some(open)
}

/// `name{labels}` or `name`, the name `[a-zA-Z_:][a-zA-Z0-9_:]*`.
fn parse_exposition_head(line: &str) -> Result<Head<'_>, String> {
    let b = line.as_bytes();
    let n = metric_name_len(b);
    if n == 0 {
        return Err(format!("expected a metric name, found {}", show(line)));
    }
    let name = &line[..n];
    let open = skip_blanks(b, n);
    let head = |labels_raw, after, what| Head {
        name,
        name_escapes: Escapes::None,
        labels_raw,
        after,
        what,
        form: LineForm::Exposition,
    };
    if b.get(open) == Some(&b'{') {
        let close = scan_label_set(line, open + 1, true, Dialect::EXPOSITION, |item, _, _| match item {
            Item::Label { name: NAME_LABEL, .. } => {
                Err(format!("a {NAME_LABEL} label in the label set of {name:?}: the metric is named twice"))
            }
            Item::Label { .. } => Ok(()),
            Item::QuotedName(q, _) => Err(format!("unexpected quoted metric name {q:?} in the label set of {name:?}")),
        })?;
        return Ok(head(&line[open + 1..close], close + 1, "label set"));
    }
    if open == n && open < b.len() {
        return Err(format!(
            "unexpected character {} after metric name {name:?} (names outside quotes are [a-zA-Z_:][a-zA-Z0-9_:]*)",
            show_char(line, n)
        ));
    }
    Ok(head("", n, "metric name"))
}

/// `my.metric{a.b="x"}` as `promtool tsdb dump-openmetrics` prints it: the name raw up to
/// the `{` (no blank, quote, comma, `=` or `}` in it), label names raw, values Go-quoted.
fn parse_promtool_openmetrics_head(line: &str) -> Result<Head<'_>, String> {
    let open = raw_name_before_brace(line).ok_or("not a raw metric name")?;
    let name = &line[..open];
    if name.is_empty() || name.contains([' ', '\t', '"', ',', '=', '}']) {
        return Err("not a raw metric name".to_owned());
    }
    let close = scan_label_set(line, open + 1, true, Dialect::DUMP_OPENMETRICS, |item, _, _| match item {
        Item::Label { name: NAME_LABEL, .. } => Err("a __name__ label".to_owned()),
        Item::Label { .. } => Ok(()),
        Item::QuotedName(..) => Err("a quoted name".to_owned()),
    })?;
    Ok(Head {
        name,
        name_escapes: Escapes::None,
        labels_raw: &line[open + 1..close],
        after: close + 1,
        what: "label set",
        form: LineForm::PromtoolOpenMetrics,
    })
}

/// Parses a sample line (no surrounding blanks, not a comment) into the sample and its
/// timestamp token, validating every part of the line.
#[cfg(test)]
pub(crate) fn parse_sample(line: &str) -> Result<(SampleLine<'_>, Option<&str>), String> {
    parse_sample_after(line, &mut LastHead::default())
}

/// The head (the name and the label set, through the closing brace) of the last sample
/// line that had a label set, and where its parts are. A line that starts with the same
/// bytes has the same name, labels and form, as parsing stops at that brace: its label set
/// is not scanned again (a recording writes a series' lines one after another).
#[derive(Debug, Default)]
pub(crate) struct LastHead {
    bytes: Vec<u8>,
    name: (usize, usize),
    name_escapes: Option<Escapes>,
    labels: (usize, usize),
    form: LineForm,
}

/// [`parse_sample`], taking the head from `last` when the line starts with it, and leaving
/// this line's head there.
pub(crate) fn parse_sample_after<'a>(
    line: &'a str,
    last: &mut LastHead,
) -> Result<(SampleLine<'a>, Option<&'a str>), String> {
    let b = line.as_bytes();
    let head = match last.name_escapes {
        Some(name_escapes) if !last.bytes.is_empty() && b.starts_with(&last.bytes) => Head {
            name: &line[last.name.0..last.name.1],
            name_escapes,
            labels_raw: &line[last.labels.0..last.labels.1],
            after: last.bytes.len(),
            what: "label set",
            form: last.form,
        },
        _ => {
            let head = parse_head(line)?;
            // Every part is a slice of the line; its place is kept, not its address.
            let within = |part: &str| {
                let (start, end) = (line.as_ptr() as usize, line.as_ptr() as usize + line.len());
                (start..=end).contains(&(part.as_ptr() as usize)) && part.as_ptr() as usize + part.len() <= end
            };
            if head.what == "label set" && within(head.name) && within(head.labels_raw) {
                let offset = |part: &str| part.as_ptr() as usize - line.as_ptr() as usize;
                last.bytes.clear();
                last.bytes.extend_from_slice(&b[..head.after]);
                last.name = (offset(head.name), offset(head.name) + head.name.len());
                last.name_escapes = Some(head.name_escapes);
                last.labels = (offset(head.labels_raw), offset(head.labels_raw) + head.labels_raw.len());
                last.form = head.form;
            }
            head
        }
    };
    let Head { name, name_escapes, labels_raw, after: after_name, what, form } = head;
    let name = decode(name, name_escapes);
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
/// `promtool tsdb dump` (`{__name__="my.metric", "a.b"="x"}`: the name is a label, values
/// are Go-quoted).
fn parse_braced_name(line: &str) -> Result<Head<'_>, String> {
    let mut quoted: Option<(&str, bool, usize)> = None;
    let mut dump_name: Option<(&str, Escapes)> = None;
    let mut first_label: Option<&str> = None;
    let mut go_escapes = false;
    // Go's escapes are accepted while scanning; they are an error below unless this is
    // promtool's form.
    let close = scan_label_set(line, 1, true, Dialect::DUMP, |item, index, end| match (item, index) {
        (Item::QuotedName(n, escaped), 0) => {
            quoted = Some((n, escaped, end));
            Ok(())
        }
        (Item::QuotedName(n, _), _) => Err(format!("the quoted metric name {n:?} must come first in the label set")),
        (Item::Label { name, value, escaped, name_escaped }, _) => {
            first_label.get_or_insert(name);
            go_escapes |= escaped == Escapes::Go;
            if name == NAME_LABEL && !name_escaped && dump_name.replace((value, escaped)).is_some() {
                return Err(format!("duplicate label name {NAME_LABEL:?} in the label set"));
            }
            Ok(())
        }
    })?;
    let head = |name, name_escapes, labels_raw, form| Head {
        name,
        name_escapes,
        labels_raw,
        after: close + 1,
        what: "label set",
        form,
    };
    match (quoted, dump_name) {
        (Some((n, _, _)), Some(_)) => {
            Err(format!("the metric {n:?} is named twice: as a quoted name and as a {NAME_LABEL} label"))
        }
        (Some((n, escaped, name_end)), None) => {
            if go_escapes {
                // Re-scan with the exposition's escapes only, for the exact error.
                scan_label_set(line, 1, true, Dialect::EXPOSITION, |_, _, _| Ok(()))?;
            }
            let rest = line[name_end..close].trim_start_matches(is_blank_char);
            let escapes = if escaped { Escapes::Exposition } else { Escapes::None };
            Ok(head(n, escapes, rest.strip_prefix(',').unwrap_or(rest), LineForm::Exposition))
        }
        (None, Some(("", _))) => Err(format!("the {NAME_LABEL} label is empty")),
        (None, Some((n, escapes))) => Ok(head(n, escapes, &line[1..close], LineForm::PromtoolDump)),
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
    let close = scan_label_set(line, open + 1, true, Dialect::EXPOSITION, |item, _, _| match item {
        Item::Label { .. } => Ok(()),
        Item::QuotedName(q, _) => Err(format!("unexpected quoted metric name {q:?} in the exemplar's label set")),
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
