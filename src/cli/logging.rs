//! Logs on stderr that untrusted values cannot forge or garble, and that never show a
//! configured secret.
//!
//! Label values, group keys and job names come from alerts and from the backends; a
//! groupKey holding `\n` would write a line of its own, an ESC would recolour the terminal.
//! Every field value (and the message) is written through [`SafeFields`]:
//!
//! * every configured secret, in every wire form, is replaced ([`Redactor`]);
//! * control characters (C0, DEL, C1) and Unicode line separators and direction overrides
//!   are written escaped (`\n`, `\r`, `\t`, `\0`, `\u{1b}`, …), so one event is one line;
//! * a value holding a space, `=`, `"`, `\` or an escaped character (or an empty one) is
//!   quoted (`job="a b=c"`, with `\` and `"` escaped), so it cannot pass for another
//!   field.

use std::borrow::Cow;
use std::fmt::{self, Write as _};
use std::sync::Arc;

use tracing::field::{Field, Visit};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::format::Writer;

use crate::model::secret::Redactor;

/// `text` with control characters, Unicode line and paragraph separators and direction
/// overrides escaped; other text unchanged.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\0' => out.push_str("\\0"),
            c if needs_escape(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Whether `s` is one quoted token: `"…"` whose inner quotes are all escaped (as Rust's
/// `Debug` writes a string).
fn is_quoted(s: &str) -> bool {
    let Some(inner) = s.strip_prefix('"').and_then(|r| r.strip_suffix('"')) else { return false };
    let mut escaped = false;
    for c in inner.chars() {
        match (escaped, c) {
            (true, _) => escaped = false,
            (false, '\\') => escaped = true,
            (false, '"') => return false,
            _ => {}
        }
    }
    !escaped
}

fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// The field formatter of culprit's logs (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct SafeFields {
    redactor: Arc<Redactor>,
}

impl SafeFields {
    /// Fields with these secrets removed.
    pub fn new(redactor: Redactor) -> SafeFields {
        SafeFields { redactor: Arc::new(redactor) }
    }
}

impl<'writer> FormatFields<'writer> for SafeFields {
    fn format_fields<R: RecordFields>(&self, mut writer: Writer<'writer>, fields: R) -> fmt::Result {
        let mut visitor = SafeVisitor { writer: &mut writer, redactor: &self.redactor, first: true, result: Ok(()) };
        fields.record(&mut visitor);
        visitor.result
    }
}

struct SafeVisitor<'a, 'w> {
    writer: &'a mut Writer<'w>,
    redactor: &'a Redactor,
    first: bool,
    result: fmt::Result,
}

impl SafeVisitor<'_, '_> {
    fn write(&mut self, field: &Field, value: &str) {
        if self.result.is_err() {
            return;
        }
        let value = self.redactor.redact(value);
        let sep = if self.first { "" } else { " " };
        self.first = false;
        self.result = if field.name() == "message" {
            write!(self.writer, "{sep}{}", escape_controls(&value))
        } else if is_quoted(&value) {
            // Already a quoted, escaped token (`?value` of a string): it cannot end early.
            write!(self.writer, "{sep}{}={}", field.name(), escape_controls(&value))
        } else if value.is_empty() || value.contains([' ', '=', '"', '\\']) || value.chars().any(needs_escape) {
            let quoted = value.replace('\\', "\\\\").replace('"', "\\\"");
            write!(self.writer, "{sep}{}=\"{}\"", field.name(), escape_controls(&quoted))
        } else {
            write!(self.writer, "{sep}{}={value}", field.name())
        };
    }
}

impl Visit for SafeVisitor<'_, '_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.write(field, value);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.write(field, &format!("{value:?}"));
    }
}

/// Logs to stderr through [`SafeFields`]; `RUST_LOG` filters (default `info`). Colour
/// codes only on a terminal: a log file or journald would store them as noise.
pub fn init(redactor: Redactor) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .fmt_fields(SafeFields::new(redactor))
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn logged(redactor: Redactor, emit: impl FnOnce()) -> String {
        let buffer = Buffer::default();
        let out = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || out.clone())
            .with_ansi(false)
            .without_time()
            .fmt_fields(SafeFields::new(redactor))
            .finish();
        tracing::subscriber::with_default(subscriber, emit);
        String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn a_group_key_with_a_newline_cannot_forge_a_log_line() {
        let group = "{}:{job=\"x\"}\n2026-01-01T00:00:00Z  INFO culprit: forged line";
        let out = logged(Redactor::new(), || tracing::info!(group = %group, "notified"));
        assert_eq!(out.lines().count(), 1, "{out}");
        assert!(out.contains(r#"group="{}:{job=\"x\"}\n2026-01-01T00:00:00Z  INFO culprit: forged line""#), "{out}");
    }

    #[test]
    fn esc_nul_bel_and_cr_in_a_job_name_are_escaped_in_fields_and_messages() {
        let job = "bp\u{1b}[31mred\u{7}\0\r\u{2028}";
        let out = logged(Redactor::new(), || {
            tracing::warn!(job = %job, "could not diagnose {job}");
            tracing::warn!(job = ?job, "debug form");
        });
        for c in ['\u{1b}', '\u{7}', '\0', '\r', '\u{2028}'] {
            assert!(!out.contains(c), "{c:?} in {out:?}");
        }
        assert!(out.contains(r#"job="bp\u{1b}[31mred\u{7}\0\r\u{2028}""#), "{out}");
        assert!(out.contains(r"could not diagnose bp\u{1b}[31mred"), "{out}");
        assert_eq!(out.lines().count(), 2, "{out}");
    }

    #[test]
    fn a_value_with_spaces_or_equals_is_quoted_so_it_cannot_pass_for_another_field() {
        let out = logged(Redactor::new(), || tracing::info!(job = %"a destination=slack", "x"));
        assert!(out.contains(r#"job="a destination=slack""#), "{out}");
        // A value that only looks quoted is quoted again.
        let out = logged(Redactor::new(), || tracing::info!(job = %r#""a" forged=1 "b""#, "x"));
        assert!(out.contains(r#"job="\"a\" forged=1 \"b\"""#), "{out}");
        // A string's Debug form is one quoted token already: kept as it is.
        let out = logged(Redactor::new(), || tracing::info!(job = ?"a \"b\"", "x"));
        assert!(out.contains(r#"job="a \"b\"""#), "{out}");
    }

    #[test]
    fn configured_secrets_never_reach_a_log_line_in_any_form() {
        let mut r = Redactor::new();
        r.add("xoxb-SECRET-token");
        r.add_basic("culprit", "pa ss/word");
        let out = logged(r, || {
            tracing::error!(error = %"HTTP 401: got Bearer xoxb-SECRET-token", "failed");
            tracing::error!(error = %"echo: Basic Y3VscHJpdDpwYSBzcy93b3Jk and pa%20ss%2Fword", "failed");
        });
        assert!(
            !out.contains("SECRET") && !out.contains("Y3VscHJpdDpwYSBzcy93b3Jk") && !out.contains("ss%2F"),
            "{out}"
        );
        assert_eq!(out.matches("[REDACTED]").count(), 3, "{out}");
    }
}
