//! Names and tokens: the byte classes of metric and label names, the blanks between
//! tokens, and how a piece of input is quoted in an error message.

/// Longest piece of offending input quoted in an error message, in characters.
const SHOWN_CHARS: usize = 40;

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
pub(crate) fn metric_name_len(b: &[u8]) -> usize {
    name_len(b, 1, 2)
}

/// Length of the label name (`[a-zA-Z_][a-zA-Z0-9_]*`) at the start of `b`; 0 if none.
#[inline]
pub(crate) fn label_name_len(b: &[u8]) -> usize {
    name_len(b, 4, 8)
}

/// Spaces and tabs: the whitespace that separates tokens.
#[inline]
pub(crate) fn is_blank(c: u8) -> bool {
    c == b' ' || c == b'\t'
}

#[inline]
pub(crate) fn is_blank_char(c: char) -> bool {
    c == ' ' || c == '\t'
}

/// Index of the first non-blank byte at or after `i` (or `b.len()`).
#[inline]
pub(crate) fn skip_blanks(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && is_blank(b[i]) {
        i += 1;
    }
    i
}

/// Index of the first blank byte at or after `i` (or `b.len()`).
#[inline]
pub(crate) fn token_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && !is_blank(b[i]) {
        i += 1;
    }
    i
}

/// Quotes a piece of input for an error message, shortened to [`SHOWN_CHARS`] characters.
pub(crate) fn show(text: &str) -> String {
    match text.char_indices().nth(SHOWN_CHARS) {
        Some((cut, _)) => format!("{:?}…", &text[..cut]),
        None => format!("{text:?}"),
    }
}

/// Quotes the input from byte `i` on, or says the line ended there.
pub(crate) fn show_at(s: &str, i: usize) -> String {
    match s.get(i..) {
        Some(rest) if !rest.is_empty() => show(rest),
        _ => "the end of the line".to_owned(),
    }
}

/// Quotes the character starting at byte `i`.
pub(crate) fn show_char(s: &str, i: usize) -> String {
    s[i..].chars().next().map_or_else(|| "the end of the line".to_owned(), |c| format!("{c:?}"))
}
