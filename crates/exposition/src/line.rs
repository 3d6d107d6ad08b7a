//! One sample line: `name{labels} value [timestamp] [# exemplar]`, the Prometheus 3 quoted
//! form `{"name", labels} value`, and `promtool tsdb dump`'s `{__name__="name", …} value ts`.

use crate::labels::{Escapes, Item, NAME_LABEL, scan_label_set};
use crate::lex::{is_blank_char, metric_name_len, show, show_at, show_char, skip_blanks, token_end};
use crate::{LineForm, SampleLine};

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
    labels: (usize, usize),
    form: LineForm,
}

/// The name, the label set as written, the index just past them, what they are (for
/// messages) and the form of a sample line's head.
type Head<'a> = (&'a str, &'a str, usize, &'static str, LineForm);

/// [`parse_sample`], taking the head from `last` when the line starts with it, and leaving
/// this line's head there.
pub(crate) fn parse_sample_after<'a>(
    line: &'a str,
    last: &mut LastHead,
) -> Result<(SampleLine<'a>, Option<&'a str>), String> {
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
