//! Secret references (`{ env = "…" }`, `{ file = "…" }`) and HTTP authentication toward a
//! backend.

use serde::{Deserialize, Serialize};

use super::secret_file;

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

#[cfg(test)]
mod tests {
    use super::super::*;

    #[test]
    fn a_secret_written_inline_is_refused_without_echoing_it() {
        for text in [
            "[notify.slack]\nmode = \"web_api\"\nchannel = \"#c\"\ntoken = \"xoxb-SECRET-1\"\n",
            "[prometheus]\nurl = \"http://p:9090\"\nauth = { type = \"bearer\", token = \"SECRET-2\" }\n",
            "[prometheus]\nurl = \"http://p:9090\"\nauth = { type = \"bearer\", token = { value = \"SECRET-3\" } }\n",
        ] {
            let err = Config::from_toml(text, "c.toml").unwrap_err().to_string();
            assert!(!err.contains("SECRET"), "{err}");
            assert!(err.contains("env = ") || err.contains("unknown key `value`"), "{err}");
        }
        let ok = Config::from_toml(
            "[prometheus]\nurl = \"http://p:9090\"\nauth = { type = \"basic\", username = \"u\", password = { file = \"/run/secrets/p\" } }\n",
            "c.toml",
        )
        .unwrap();
        let auth = ok.prometheus.unwrap().auth.unwrap();
        assert_eq!(
            auth,
            HttpAuth::Basic { username: "u".into(), password: SecretSource::File("/run/secrets/p".into()) }
        );
    }
}
