//! Reading the file: TOML parsing, errors that name the key and line, and keys that must
//! not be set together.

use std::path::Path;

use super::Config;

/// A configuration that cannot be used: every problem found, one per line.
#[derive(Debug, thiserror::Error)]
#[error("{source_name}: {}", problems.join("; "))]
pub struct ConfigError {
    pub source_name: String,
    pub problems: Vec<String>,
}

impl Config {
    /// Reads and validates a TOML file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError { source_name: name.clone(), problems: vec![format!("cannot read: {e}")] })?;
        Self::from_toml(&text, &name)
    }

    /// Parses and validates TOML text; `source_name` names it in errors.
    pub fn from_toml(text: &str, source_name: &str) -> Result<Config, ConfigError> {
        let (config, problems) = Self::parse(text, source_name)?;
        if problems.is_empty() {
            Ok(config)
        } else {
            Err(ConfigError { source_name: source_name.to_string(), problems })
        }
    }

    /// Parses TOML text and returns it with every problem validation finds (out-of-range
    /// values, keys that must not be set together), so that one run can report them all;
    /// only text that does not parse is an error.
    pub fn parse(text: &str, source_name: &str) -> Result<(Config, Vec<String>), ConfigError> {
        let mut config: Config = toml::from_str(text).map_err(|e| ConfigError {
            source_name: source_name.to_string(),
            problems: vec![toml_problem(text, e.message(), e.span())],
        })?;
        config.metrics = config.metrics.apply_scheme(&metrics_keys(text));
        let mut problems = config.validate();
        problems.extend(conflicting_keys(text));
        Ok((config, problems))
    }

    /// [`Config::parse`] of a file.
    pub fn read(path: &Path) -> Result<(Config, Vec<String>), ConfigError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError { source_name: name.clone(), problems: vec![format!("cannot read: {e}")] })?;
        Self::parse(&text, &name)
    }
}

/// The `[metrics]` keys the file sets: they override the names of `[metrics] scheme`.
fn metrics_keys(text: &str) -> Vec<String> {
    let Ok(table) = toml::from_str::<toml::Table>(text) else { return Vec::new() };
    let metrics = table.get("metrics").and_then(toml::Value::as_table);
    metrics.map(|t| t.keys().filter(|k| *k != "scheme").cloned().collect()).unwrap_or_default()
}

/// Keys that must not be set together, as the file writes them (a default does not
/// count): each problem names both keys and which to keep.
fn conflicting_keys(text: &str) -> Vec<String> {
    let Ok(table) = toml::from_str::<toml::Table>(text) else { return Vec::new() };
    let has = |section: &str, key: &str| {
        table.get(section).and_then(toml::Value::as_table).is_some_and(|t| t.contains_key(key))
    };
    let mut problems = Vec::new();
    if has("store", "path") && has("store", "url") {
        problems.push(
            "store.path and store.url are both set: with store.url culprit uses PostgreSQL and never the SQLite file at store.path; keep store.url (and store.password) for PostgreSQL, or remove it to use the SQLite file"
                .to_string(),
        );
    }
    let sides: Vec<&str> = ["webhook_auth", "api_auth"].into_iter().filter(|k| has("server", k)).collect();
    if has("server", "auth") && !sides.is_empty() {
        let named = sides.iter().map(|k| format!("server.{k}")).collect::<Vec<_>>().join(" and ");
        problems.push(format!(
            "server.auth and {named} are both set: {named} replace{} server.auth for {}, so one of them is not what is used; keep server.webhook_auth and server.api_auth (one per side) and remove server.auth, or keep only server.auth for both",
            if sides.len() == 1 { "s" } else { "" },
            if sides.len() == 2 { "both sides, and server.auth is never used".to_string() } else { format!("its side ({})", if sides[0] == "webhook_auth" { "/webhook/*" } else { "/api/*" }) }
        ));
    }
    problems
}

/// A TOML error as one sentence naming the key (as a dotted path), the line, and for a
/// key given twice both lines and the fix.
fn toml_problem(text: &str, message: &str, span: Option<std::ops::Range<usize>>) -> String {
    let Some(span) = span else { return message.to_string() };
    let line = text.as_bytes()[..span.start.min(text.len())].iter().filter(|b| **b == b'\n').count() + 1;
    let Some(path) = key_path_at(text, line) else { return format!("{message} (line {line})") };
    if message.starts_with("duplicate key") {
        let earlier = (1..line).rev().find(|l| key_path_at(text, *l).as_deref() == Some(path.as_str()));
        let definition = |l: usize| text.lines().nth(l - 1).unwrap_or("").trim().to_string();
        return match earlier {
            Some(first) if definition(first).ends_with("[]") => format!(
                "`{path}` is given twice, as `{}` (line {first}) and as `{}` (line {line}): remove the empty `{}`, the tables below it make the list",
                definition(first),
                definition(line),
                definition(first)
            ),
            Some(first) => format!(
                "`{path}` is given twice (line {first} and line {line}): keep one of `{}` and `{}`",
                definition(first),
                definition(line)
            ),
            None => format!("`{path}` is given twice (line {line}): keep one"),
        };
    }
    format!("`{path}`: {message} (line {line})")
}

/// The dotted path of the key or table defined on line `line` (1-based): a table header
/// names itself, `key = …` is the key in the table of the last header before it.
fn key_path_at(text: &str, line: usize) -> Option<String> {
    let mut table = String::new();
    for (i, l) in text.lines().enumerate().take(line) {
        let l = l.trim();
        let header = l
            .strip_prefix("[[")
            .and_then(|h| h.split("]]").next())
            .or_else(|| l.strip_prefix('[').and_then(|h| h.split(']').next()));
        if let Some(h) = header {
            table = h.trim().to_string();
            if i + 1 == line {
                return Some(table);
            }
        } else if i + 1 == line {
            let key = l.split('=').next()?.trim().trim_matches('"');
            if key.is_empty() || key.starts_with('#') {
                return None;
            }
            return Some(if table.is_empty() { key.to_string() } else { format!("{table}.{key}") });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::*;

    #[test]
    fn a_metric_name_override_is_validated_at_load() {
        let err = Config::from_toml("[metrics]\nbusy = \"\"\n", "c.toml").unwrap_err();
        assert!(err.to_string().contains("metrics.busy"), "{err}");
        let ok = Config::from_toml("[metrics]\nbusy = \"my_flink_busy\"\n", "c.toml").unwrap();
        assert_eq!(ok.metrics.busy, "my_flink_busy");
        assert_eq!(ok.metrics.idle, crate::model::catalog::MetricCatalog::default().idle);
    }

    #[test]
    fn one_scheme_setting_maps_every_name_and_a_key_set_beside_it_overrides_one() {
        let c = Config::from_toml("[metrics]\nscheme = \"otlp_utf8\"\nidle = \"my.idle\"\n", "c.toml").unwrap();
        assert_eq!(c.metrics.scheme, crate::model::naming::NamingScheme::OtlpUtf8);
        assert_eq!(c.metrics.busy, "flink.taskmanager.job.task.busyTimeMsPerSecond");
        assert_eq!(c.metrics.records_in, "flink.taskmanager.job.task.numRecordsIn_total");
        assert_eq!(c.metrics.idle, "my.idle");
        // A key holding the Prometheus reporter's name (as the example file writes every
        // key) stands for the scheme's name: changing the scheme alone is enough.
        let c = Config::from_toml(
            "[metrics]\nscheme = \"otel_collector\"\nrecords_in = \"flink_taskmanager_job_task_numRecordsIn\"\n",
            "c.toml",
        )
        .unwrap();
        assert_eq!(c.metrics.records_in, "flink_taskmanager_job_task_numRecordsIn_total");
        let example = include_str!("../../config/culprit.example.toml")
            .replace("scheme = \"flink_prometheus\"", "scheme = \"otlp_utf8\"");
        let c = Config::from_toml(&example, "culprit.example.toml").unwrap();
        assert_eq!(c.metrics.busy, "flink.taskmanager.job.task.busyTimeMsPerSecond");
        let err = Config::from_toml("[metrics]\nscheme = \"otel\"\n", "c.toml").unwrap_err().to_string();
        assert!(err.contains("metrics.scheme") && err.contains("otlp_utf8"), "{err}");
    }

    #[test]
    fn dotted_utf8_metric_names_are_accepted_in_metrics() {
        let text = include_str!("../../tests/data/reports3/04-prometheus3-otlp-utf8-names/culprit-utf8.toml");
        let c = Config::from_toml(text, "culprit-utf8.toml").unwrap();
        assert_eq!(c.metrics.busy, "flink.taskmanager.job.task.busyTimeMsPerSecond");
    }

    #[test]
    fn a_key_given_twice_names_the_key_both_lines_and_the_fix() {
        let err = Config::from_toml(
            "[notify]\nwebhook = []\n\n[[notify.webhook]]\nname = \"a\"\nurl = \"http://x\"\n",
            "c.toml",
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            err,
            "c.toml: `notify.webhook` is given twice, as `webhook = []` (line 2) and as `[[notify.webhook]]` (line 4): remove the empty `webhook = []`, the tables below it make the list"
        );
        let err = Config::from_toml(
            "[prometheus]\nurl = \"http://a\"\nauth = { type = \"bearer\", token = { env = \"A\" } }\nauth = { type = \"bearer\", token = { env = \"B\" } }\n",
            "c.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(err.starts_with("c.toml: `prometheus.auth` is given twice (line 3 and line 4): keep one of"), "{err}");
        let err = Config::from_toml("[server]\nlisten = 9187\n", "c.toml").unwrap_err().to_string();
        assert_eq!(err, "c.toml: `server.listen`: invalid type: integer `9187`, expected a string (line 2)");
    }

    #[test]
    fn unknown_keys_are_rejected_with_their_line() {
        let err = Config::from_toml("[diagnosis]\nwindow = \"5m\"\nwindwo = \"1m\"\n", "c.toml").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("windwo") && text.contains("line 3") && text.starts_with("c.toml"), "{text}");
    }

    #[test]
    fn an_empty_file_gives_the_spec_defaults() {
        let c = Config::from_toml("", "t").unwrap();
        assert_eq!(c, Config::default());
        assert_eq!(c.diagnosis.thresholds.backpressured_ratio, 0.10);
        assert_eq!(c.diagnosis.window, Millis(300_000));
    }
}
