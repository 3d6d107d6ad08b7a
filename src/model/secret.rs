//! The one redaction mechanism: every form in which a secret travels on the wire, removed
//! from anything quoted back (error bodies, transport errors, log fields, API answers,
//! stored errors, "could not diagnose" posts). Pure.
//!
//! A backend or destination may echo what it was sent: the `Authorization` header
//! (`Bearer <token>`, `Basic base64(user:password)`), a form or URL parameter
//! (percent-encoded), a JSON body (JSON-escaped), an HTML error page (HTML-escaped).
//! [`Redactor`] knows every one of these forms of each secret it is given and replaces
//! each with [`REDACTED`]. It redacts **before** anything is cut ([`Redactor::redact_cut`]):
//! a secret across a cut would otherwise escape in part. Text that already ends (or
//! begins) with part of a secret — cut by the backend itself, or by a bounded read — has
//! that part removed too (at least [`MIN_PARTIAL`] characters of it).

use std::fmt;

use base64::Engine as _;

/// What a secret is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// The shortest part of a secret form removed at the very end or start of a text (shorter
/// pieces are too likely to be ordinary text; `Bearer ab` ends in `ab`).
pub const MIN_PARTIAL: usize = 6;

/// The wire forms of some secrets. `Debug` shows how many, never what.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Redactor {
    /// Every form of every secret, longest first (a form that contains another is
    /// replaced whole).
    forms: Vec<String>,
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Redactor({} forms)", self.forms.len())
    }
}

impl Redactor {
    /// Redacts nothing.
    pub fn new() -> Redactor {
        Redactor::default()
    }

    /// A redactor for one secret (a token, a routing key, a URL that holds a token).
    pub fn of(secret: &str) -> Redactor {
        let mut r = Redactor::new();
        r.add(secret);
        r
    }

    /// True when there is nothing to redact.
    pub fn is_empty(&self) -> bool {
        self.forms.is_empty()
    }

    /// Adds a secret in all its forms. A blank secret is ignored.
    pub fn add(&mut self, secret: &str) {
        if secret.trim().is_empty() {
            return;
        }
        let mut bases = vec![secret.to_string()];
        bases.extend(base64_forms(secret.as_bytes()));
        self.add_encoded(bases);
    }

    /// Adds each of `bases` and its URL, form, JSON and HTML encodings.
    fn add_encoded(&mut self, bases: Vec<String>) {
        let mut forms = Vec::new();
        for b in bases {
            forms.extend(encoded_forms(&b));
            forms.push(b);
        }
        self.extend(forms);
    }

    /// Adds the credentials of HTTP Basic authentication: the password in all its forms,
    /// and `base64(user:password)` as the `Authorization` header carries it.
    pub fn add_basic(&mut self, username: &str, password: &str) {
        self.add(password);
        if password.trim().is_empty() {
            return;
        }
        // A server that decodes the header and quotes `user:password` shows the password
        // in one of its forms: added above. The user name alone is no secret.
        self.add_encoded(base64_forms(format!("{username}:{password}").as_bytes()));
    }

    /// Adds a URL that holds a secret (a Slack incoming webhook): the URL, its path and its
    /// last path segment (of 8 characters or more), each in all its forms.
    pub fn add_url(&mut self, url: &str) {
        let url = url.trim();
        self.add(url);
        let after_host = url.find("://").map(|i| i + 3).and_then(|i| url[i..].find('/').map(|j| i + j));
        if let Some(path_start) = after_host {
            let path = &url[path_start..];
            if path.len() > 1 {
                self.add(path);
            }
            if let Some(last) = path.rsplit('/').next().filter(|s| s.len() >= 8) {
                self.add(last);
            }
        }
    }

    /// Adds every secret of `other`.
    pub fn merge(&mut self, other: &Redactor) {
        self.extend(other.forms.iter().cloned());
    }

    fn extend(&mut self, forms: impl IntoIterator<Item = String>) {
        self.forms.extend(forms.into_iter().filter(|f| !f.is_empty()));
        self.forms.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        self.forms.dedup();
    }

    /// `text` with every form of every secret replaced by [`REDACTED`], and any part of a
    /// form (at least [`MIN_PARTIAL`] characters) at the very end or start removed.
    pub fn redact(&self, text: &str) -> String {
        if self.forms.is_empty() {
            return text.to_string();
        }
        let mut out = text.to_string();
        for form in &self.forms {
            if out.contains(form.as_str()) {
                out = out.replace(form.as_str(), REDACTED);
            }
        }
        self.redact_partial_ends(out)
    }

    /// Redacts, then keeps at most `max_chars` characters (an ellipsis marks a cut).
    pub fn redact_cut(&self, text: &str, max_chars: usize) -> String {
        cut(&self.redact(text), max_chars)
    }

    fn redact_partial_ends(&self, mut out: String) -> String {
        // The longest prefix of a form that the text ends with.
        let tail = self.forms.iter().filter_map(|f| longest_prefix_at_end(&out, f)).filter(|n| *n >= MIN_PARTIAL).max();
        if let Some(n) = tail {
            out.truncate(out.len() - n);
            out.push_str(REDACTED);
        }
        let head =
            self.forms.iter().filter_map(|f| longest_suffix_at_start(&out, f)).filter(|n| *n >= MIN_PARTIAL).max();
        if let Some(n) = head {
            out.replace_range(..n, REDACTED);
        }
        out
    }
}

/// At most `max_chars` characters of `text`; an ellipsis marks a cut.
pub fn cut(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        None => text.to_string(),
        Some((at, _)) => {
            let mut s = text[..at].to_string();
            s.push('…');
            s
        }
    }
}

/// Length in bytes of the longest proper prefix of `form` that `text` ends with.
fn longest_prefix_at_end(text: &str, form: &str) -> Option<usize> {
    let start = text.len().saturating_sub(form.len() - 1);
    (start..text.len())
        .filter(|i| text.is_char_boundary(*i))
        .map(|i| &text[i..])
        .find(|tail| form.as_bytes()[0] == tail.as_bytes()[0] && form.starts_with(tail))
        .map(str::len)
}

/// Length in bytes of the longest proper suffix of `form` that `text` starts with.
fn longest_suffix_at_start(text: &str, form: &str) -> Option<usize> {
    let first = *text.as_bytes().first()?;
    (1..form.len().min(text.len() + 1))
        .rev()
        .filter(|n| text.is_char_boundary(*n) && form.as_bytes()[form.len() - n] == first)
        .find(|n| form.ends_with(&text[..*n]))
}

/// The forms a string takes in URLs and forms, JSON and HTML (those that differ from it).
fn encoded_forms(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    // Percent-encoding of everything but the unreserved characters (RFC 3986), with
    // upper- and lowercase hex digits; and the form encoding (`+` for a space).
    let pct = |upper: bool, plus: bool| {
        let mut o = String::with_capacity(s.len() * 3);
        for b in s.bytes() {
            match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => o.push(b as char),
                b' ' if plus => o.push('+'),
                _ if upper => o.push_str(&format!("%{b:02X}")),
                _ => o.push_str(&format!("%{b:02x}")),
            }
        }
        o
    };
    out.extend([pct(true, false), pct(false, false), pct(true, true), pct(false, true)]);
    // JSON string escapes: as serde writes them, with `\/`, and ASCII-only (`\u00e9`).
    let json = serde_json::to_string(s).expect("a string serializes");
    let json = json[1..json.len() - 1].to_string();
    out.push(json.replace('/', "\\/"));
    let mut ascii = String::new();
    for c in json.chars() {
        if c.is_ascii() {
            ascii.push(c);
        } else {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                ascii.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    out.push(ascii.to_uppercase().replace("\\U", "\\u"));
    out.push(ascii);
    out.push(json);
    // HTML escapes (an error page quoting the request).
    out.push(
        s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&#39;"),
    );
    out.retain(|f| f != s);
    out
}

/// Base64 of `bytes`: standard and URL-safe alphabets, with and without padding.
fn base64_forms(bytes: &[u8]) -> Vec<String> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    let mut out: Vec<String> =
        [STANDARD.encode(bytes), STANDARD_NO_PAD.encode(bytes), URL_SAFE.encode(bytes), URL_SAFE_NO_PAD.encode(bytes)]
            .into_iter()
            .collect();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "s3cr3t/t0ken+with spaces&\"quotes\"é";

    #[test]
    fn every_wire_form_of_a_token_is_redacted() {
        let r = Redactor::of(TOKEN);
        let forms = [
            TOKEN.to_string(),
            format!("Bearer {TOKEN}"),
            "s3cr3t%2Ft0ken%2Bwith%20spaces%26%22quotes%22%C3%A9".to_string(),
            "s3cr3t%2ft0ken%2bwith%20spaces%26%22quotes%22%c3%a9".to_string(),
            "s3cr3t%2Ft0ken%2Bwith+spaces%26%22quotes%22%C3%A9".to_string(),
            r#"s3cr3t/t0ken+with spaces&\"quotes\"é"#.to_string(),
            r#"s3cr3t\/t0ken+with spaces&\"quotes\"é"#.to_string(),
            r#"s3cr3t/t0ken+with spaces&\"quotes\"\u00e9"#.to_string(),
            "s3cr3t/t0ken+with spaces&amp;&quot;quotes&quot;é".to_string(),
            base64::engine::general_purpose::STANDARD.encode(TOKEN),
        ];
        for form in forms {
            let text = format!("the server said: {form} (end)");
            let out = r.redact(&text);
            assert!(out.starts_with("the server said: ") && out.ends_with(&format!("{REDACTED} (end)")), "{out}");
            for piece in ["s3cr3t", "t0ken", "quotes", "czNjcjN0"] {
                assert!(!out.contains(piece), "{form} → {out}");
            }
        }
    }

    #[test]
    fn basic_auth_is_redacted_as_the_header_carries_it() {
        let mut r = Redactor::new();
        r.add_basic("culprit", "hunter2-password");
        // Authorization: Basic base64("culprit:hunter2-password")
        let header = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode("culprit:hunter2-password"));
        assert_eq!(r.redact(&header), format!("Basic {REDACTED}"));
        assert_eq!(r.redact("user culprit:hunter2-password"), format!("user culprit:{REDACTED}"));
        assert_eq!(r.redact("pw=hunter2-password"), format!("pw={REDACTED}"));
        // The user name alone is not a secret.
        assert_eq!(r.redact("user culprit"), "user culprit");
    }

    #[test]
    fn a_cut_after_redaction_never_leaves_part_of_a_secret_at_any_offset() {
        let r = Redactor::of("xoxb-1234567890-SECRET");
        for pad in 0..80 {
            let text = format!("{}Bearer xoxb-1234567890-SECRET trailing", "x".repeat(pad));
            for max in 0..text.len() {
                let out = r.redact_cut(&text, max);
                assert!(!out.contains("SECRET") && !out.contains("xoxb-1"), "pad {pad} cut {max}: {out}");
            }
        }
    }

    #[test]
    fn text_cut_by_someone_else_loses_the_part_of_a_secret_at_its_end_or_start() {
        let r = Redactor::of("xoxb-1234567890-SECRET");
        assert_eq!(r.redact("Authorization: Bearer xoxb-1234567"), format!("Authorization: Bearer {REDACTED}"));
        assert_eq!(r.redact("67890-SECRET was sent"), format!("{REDACTED} was sent"));
        // Short pieces are ordinary text.
        assert_eq!(r.redact("index xoxb"), "index xoxb");
    }

    #[test]
    fn a_blank_secret_redacts_nothing_and_debug_shows_no_value() {
        let mut r = Redactor::new();
        r.add("  ");
        assert!(r.is_empty());
        assert_eq!(r.redact("a b"), "a b");
        let r = Redactor::of("topsecret-value");
        assert!(!format!("{r:?}").contains("topsecret"));
    }

    #[test]
    fn cut_marks_the_cut_and_keeps_whole_characters() {
        assert_eq!(cut("héllo", 2), "hé…");
        assert_eq!(cut("hé", 2), "hé");
    }
}
