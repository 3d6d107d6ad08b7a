//! The lines that are not samples: comments, `# TYPE`, `# EOF`, and JSON given where
//! metrics belong.

use std::borrow::Cow;

use crate::MetricType;
use crate::labels::{name_text, quoted_name};
use crate::lex::{metric_name_len, show_at, skip_blanks, token_end};

/// Whether a line that is not a sample opens a JSON document: `[`, or `{` followed by the
/// end of the line, `}` ending it, or a `"key":` (no exposition line has a `:` after a quoted
/// string at the start of a label set).
pub(crate) fn looks_like_json(line: &str) -> bool {
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
pub(crate) enum Comment<'a> {
    Eof,
    Type(Cow<'a, str>, MetricType),
    Other,
}

/// Classifies a comment line (`line` starts with `#`, no surrounding blanks).
pub(crate) fn parse_comment(line: &str) -> Result<Comment<'_>, String> {
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
fn parse_type(line: &str, i: usize) -> Result<(Cow<'_, str>, MetricType), String> {
    let b = line.as_bytes();
    let start = skip_blanks(b, i);
    let (family, end) = if b.get(start) == Some(&b'"') {
        let (raw, escaped, end) = quoted_name(line, start)?;
        (name_text(raw, escaped), end)
    } else {
        let n = metric_name_len(&b[start..]);
        (Cow::Borrowed(&line[start..start + n]), start + n)
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
