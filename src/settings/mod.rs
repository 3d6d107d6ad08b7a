//! The vocabulary every section of the configuration is written in: durations
//! ([`Millis`]), secret references ([`SecretSource`], read from the environment or a file,
//! never written inline), HTTP authentication ([`HttpAuth`]) and the check every backend
//! or destination URL passes ([`check_backend_url`]).
//!
//! Below both `config` (the file's sections) and `notify` (each destination's own
//! section): a destination's config struct is written in these types without importing
//! the configuration that holds it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub mod secret_file;

/// A duration in whole milliseconds, written as `"5m"`, `"20s"`, `"7d"`, `"1h30m"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Millis(pub i64);

impl Millis {
    pub const fn from_secs(s: i64) -> Self {
        Millis(s * 1000)
    }
    pub fn as_ms(self) -> i64 {
        self.0
    }
}

impl FromStr for Millis {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("`{s}` is not a duration (examples: \"20s\", \"5m\", \"1h30m\", \"7d\")");
        let too_long = || format!("`{s}` is too long: a duration is at most {MAX_DURATION_DAYS}d (about 20,000 years)");
        let span: jiff::Span = s.trim().parse().map_err(|_| if too_large_number(s) { too_long() } else { bad() })?;
        let d = span.to_duration(jiff::SpanRelativeTo::days_are_24_hours()).map_err(|_| too_long())?;
        if d.is_negative() {
            return Err(format!("`{s}` is negative; durations here are positive"));
        }
        Ok(Millis(d.as_millis() as i64))
    }
}

/// The longest duration jiff (the parser) represents, in days; other units have their own
/// limit of about the same span (<https://docs.rs/jiff/latest/jiff/struct.Span.html>).
pub const MAX_DURATION_DAYS: i64 = 7_304_484;

/// Whether `s` is a duration of valid syntax whose numbers are too large: it parses once
/// every run of digits is `1` (`1000000000d` → `1d`; `5x` → `1x` is still no duration).
fn too_large_number(s: &str) -> bool {
    let mut ones = String::with_capacity(s.len());
    let mut in_digits = false;
    for c in s.trim().chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                ones.push('1');
            }
            in_digits = true;
        } else {
            ones.push(c);
            in_digits = false;
        }
    }
    ones.parse::<jiff::Span>().is_ok()
}

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#}", jiff::SignedDuration::from_millis(self.0))
    }
}

impl<'de> Deserialize<'de> for Millis {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl Serialize for Millis {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

/// A duration string in the schema (`format: duration`, culprit's own forms, not ISO 8601),
/// written in place where a key uses it.
impl schemars::JsonSchema for Millis {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string", "format": "duration" })
    }
}

/// Where a secret comes from: an environment variable or a file (trailing newline
/// trimmed). Never the configuration file itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SecretSource {
    /// The name of an environment variable.
    Env(String),
    /// A file path (e.g. a mounted Kubernetes Secret).
    File(std::path::PathBuf),
}

/// By hand rather than derived: serde's errors quote the offending value, and a secret
/// written inline (`token = "xoxb-…"`) must not reach an error message or a log.
impl<'de> Deserialize<'de> for SecretSource {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        const EXPECTED: &str = "a secret reference: { env = \"VARIABLE\" } or { file = \"/path\" }";
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = SecretSource;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(EXPECTED)
            }
            fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<SecretSource, E> {
                Err(E::custom(format!(
                    "a secret is never written inline in the configuration; give {EXPECTED} (the value is not shown)"
                )))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<SecretSource, A::Error> {
                use serde::de::Error;
                let mut found = None;
                while let Some(key) = map.next_key::<String>()? {
                    if found.is_some() {
                        return Err(A::Error::custom(format!("give exactly one of `env` or `file`: {EXPECTED}")));
                    }
                    found = Some(match key.as_str() {
                        "env" => SecretSource::Env(map.next_value()?),
                        "file" => SecretSource::File(map.next_value()?),
                        _ => return Err(A::Error::custom(format!("unknown key `{key}`; expected {EXPECTED}"))),
                    });
                }
                found.ok_or_else(|| A::Error::custom(format!("empty; expected {EXPECTED}")))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

impl SecretSource {
    /// Reads the secret. The error names the variable or file, never the value. A file
    /// must be a regular one of at most 64 KiB that no other user can write; one every
    /// user can read is read with a warning ([`secret_file`]).
    /// An empty (or blank) secret is an error: it would send, or accept, `Bearer ` alone.
    pub fn resolve(&self) -> Result<secrecy::SecretString, String> {
        let (value, origin) = match self {
            SecretSource::Env(name) => (
                std::env::var(name).map_err(|_| format!("the environment variable {name} is not set"))?,
                format!("the environment variable {name}"),
            ),
            SecretSource::File(path) => {
                let file = secret_file::read(path)?;
                if let Some(warning) = &file.warning {
                    secret_file::warn_once(warning);
                }
                (file.text.trim_end_matches(['\n', '\r']).to_string(), format!("the secret file {}", path.display()))
            }
        };
        if value.trim().is_empty() {
            return Err(format!("{origin} is empty"));
        }
        Ok(secrecy::SecretString::from(value))
    }
}

/// HTTP authentication toward a backend.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "snake_case", tag = "type")]
pub enum HttpAuth {
    /// `Authorization: Bearer <token>`.
    Bearer { token: SecretSource },
    /// `Authorization: Basic …`.
    Basic { username: String, password: SecretSource },
}

/// A backend URL as it may be shown (check-config, errors): a user or password becomes
/// `***@` and a query string or fragment `?…`, since either may hold a credential. A URL
/// that does not parse is not shown at all. Such URLs are refused at load
/// ([`check_backend_url`]), but the description of a refused configuration still names them.
pub fn shown_url(url: &str) -> String {
    let Ok(mut u) = reqwest::Url::parse(url) else { return "(not an URL; not shown)".to_string() };
    let hidden = !u.username().is_empty() || u.password().is_some();
    let tail = u.query().is_some() || u.fragment().is_some();
    if !hidden && !tail {
        // Nothing to hide: the URL as the user wrote it.
        return url.to_string();
    }
    let _ = u.set_username("");
    let _ = u.set_password(None);
    u.set_query(None);
    u.set_fragment(None);
    let mut shown = u.to_string();
    if hidden && let Some(at) = shown.find("://").map(|i| i + 3) {
        shown.insert_str(at, "***@");
    }
    if tail {
        shown.push_str("?…");
    }
    shown
}

/// A backend URL must be http(s) and carry no credentials: userinfo and query strings end
/// up in logs and error messages, so they are refused (and not echoed); auth has its own key.
pub fn check_backend_url(key: &str, url: &str, auth_key: &str, problems: &mut Vec<String>) {
    match reqwest::Url::parse(url) {
        Ok(u) if u.scheme() == "http" || u.scheme() == "https" => {
            if !u.username().is_empty() || u.password().is_some() {
                problems.push(format!(
                    "{key} holds a user or password: remove it and use {auth_key} with a secret reference (the URL is not shown)"
                ));
            } else if u.query().is_some() || u.fragment().is_some() {
                problems.push(format!(
                    "{key} has a query string or fragment: give the base URL only (path prefix allowed; the URL is not shown)"
                ));
            }
        }
        _ => problems
            .push(format!("{key} is not an http(s) URL such as http://prometheus:9090 (the value is not shown)")),
    }
}
