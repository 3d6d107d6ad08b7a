//! Typed settings, read from TOML (`culprit.toml`). Unknown keys are rejected; every
//! value has a default (the spec's), documented in `config/culprit.example.toml`.
//!
//! Durations are strings such as `"5m"`, `"20s"`, `"1h30m"`, `"7d"` (a day is 24 h).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The vocabulary settings are written in, re-exported where they were first defined.
pub use crate::settings::{HttpAuth, MAX_DURATION_DAYS, Millis, SecretSource, check_backend_url, secret_file};

/// Each destination's section lives with its destination (`crate::notify::registry`).
pub use crate::notify::alertmanager::AlertmanagerConfig;
pub use crate::notify::pagerduty::PagerDutyConfig;
use crate::notify::registry::SecretForm;
pub use crate::notify::slack::{SlackConfig, SlackMode};
pub use crate::notify::webhook::WebhookConfig;
pub use crate::notify::{NotifyConfig, RetryConfig};

/// The shortest diagnosis window (`--window`, the API's `window=`): below a second no
/// scrape can land in it, and `0.5ms` is a typo.
pub const MIN_WINDOW: Millis = Millis::from_secs(1);

/// The longest diagnosis window: 100 years (36,525 days). No metrics store keeps a
/// century, and it keeps `at − window` a time every part writes (jiff's range starts at
/// year −9999); a long window is narrowed to the current backpressure episode anyway.
pub const MAX_WINDOW: Millis = Millis::from_secs(36_525 * 24 * 3600);

/// A diagnosis window, from [`MIN_WINDOW`] to [`MAX_WINDOW`]; the error says which bound
/// it crosses (the caller names the flag or parameter).
pub fn parse_window(s: &str) -> Result<Millis, String> {
    let w = s.parse::<Millis>().map_err(|e| if e.contains("too long") { too_long_window(s) } else { e })?;
    if w < MIN_WINDOW {
        return Err(format!("`{s}` is shorter than {MIN_WINDOW}, the shortest window (e.g. 5m)"));
    }
    if w > MAX_WINDOW {
        return Err(too_long_window(s));
    }
    Ok(w)
}

fn too_long_window(s: &str) -> String {
    format!("`{s}` is longer than {}d (100 years), the longest window", MAX_WINDOW.as_ms() / 86_400_000)
}

/// A time as RFC 3339 (`2026-11-29T10:36:00Z`), in ms since the epoch. The error tells a
/// time that is no RFC 3339 from one outside the range culprit takes (jiff's,
/// -009999-01-02T01:59:59Z to 9999-12-30T22:00:00Z) and from one without an offset.
pub fn parse_time(s: &str) -> Result<i64, String> {
    if let Ok(t) = s.parse::<jiff::Timestamp>() {
        return Ok(t.as_millisecond());
    }
    match jiff::fmt::temporal::Pieces::parse(s) {
        Ok(p) if p.offset().is_none() => {
            Err(format!("`{s}` has no offset: add Z for UTC or one such as +01:00 (RFC 3339)"))
        }
        Ok(p) if p.date().year() > 0 => Err(format!(
            "`{s}` is after {}, the latest time culprit takes",
            jiff::Timestamp::from_second(jiff::Timestamp::MAX.as_second()).unwrap_or(jiff::Timestamp::MAX)
        )),
        Ok(_) => Err(format!("`{s}` is before {}, the earliest time culprit takes", jiff::Timestamp::MIN)),
        Err(_) => Err(format!("`{s}` is not an RFC 3339 time such as 2026-11-29T10:36:00Z")),
    }
}

/// The whole configuration file.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub diagnosis: DiagnosisConfig,
    pub kafka: KafkaConfig,
    /// The PromQL-compatible backend for live diagnoses; absent: recordings only.
    pub prometheus: Option<PrometheusConfig>,
    pub flink: FlinkConfig,
    /// Metric names, overriding the Flink 1.15+/2.x reporter defaults.
    pub metrics: crate::model::catalog::MetricCatalog,
    /// `culprit serve`: HTTP listener and its protection.
    pub server: ServerConfig,
    /// The durable queue and outbox.
    pub store: StoreConfig,
    /// From alerts to diagnoses.
    pub service: ServiceConfig,
    /// Where verdicts go.
    pub notify: NotifyConfig,
}

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
        let config: Config = toml::from_str(text).map_err(|e| ConfigError {
            source_name: source_name.to_string(),
            problems: vec![toml_problem(text, e.message(), e.span())],
        })?;
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

    /// Every secret reference the configuration holds that `serve` reads, with its key
    /// (`notify.webhook[0].auth.token`). The store's password only with `store.url`.
    pub fn secrets(&self) -> Vec<(String, &SecretSource)> {
        fn auth<'a>(key: String, a: Option<&'a HttpAuth>, out: &mut Vec<(String, &'a SecretSource)>) {
            match a {
                Some(HttpAuth::Bearer { token }) => out.push((format!("{key}.token"), token)),
                Some(HttpAuth::Basic { password, .. }) => out.push((format!("{key}.password"), password)),
                None => {}
            }
        }
        let mut out: Vec<(String, &SecretSource)> = Vec::new();
        for (key, a) in [
            ("server.auth", &self.server.auth),
            ("server.webhook_auth", &self.server.webhook_auth),
            ("server.api_auth", &self.server.api_auth),
        ] {
            match a {
                Some(ServerAuth::Bearer { token }) => out.push((format!("{key}.token"), token)),
                Some(ServerAuth::Basic { password, .. }) => out.push((format!("{key}.password"), password)),
                _ => {}
            }
        }
        if let Some(k) = &self.server.link_secret {
            out.push(("server.link_secret".into(), k));
        }
        if self.store.url.is_some()
            && let Some(p) = &self.store.password
        {
            out.push(("store.password".into(), p));
        }
        auth("prometheus.auth".into(), self.prometheus.as_ref().and_then(|p| p.auth.as_ref()), &mut out);
        for (i, c) in self.flink.clusters.iter().enumerate() {
            auth(format!("flink.clusters[{i}] ({}).auth", c.name), c.auth.as_ref(), &mut out);
        }
        // Each destination reports its own secrets (`crate::notify::registry`).
        out.extend(self.notify.secrets().into_iter().map(|(key, f)| (key, f.source)));
        out
    }

    /// Every configured secret that can be read, in every wire form: what logs, API
    /// answers, stored errors and posts must never show. Secrets that cannot be read are
    /// left out (nothing was sent with them).
    pub fn redactor(&self) -> crate::model::secret::Redactor {
        let mut r = crate::model::secret::Redactor::new();
        let add_auth = |auth: Option<&HttpAuth>, r: &mut crate::model::secret::Redactor| match auth {
            Some(HttpAuth::Bearer { token }) => {
                if let Ok(t) = token.resolve() {
                    r.add(secrecy::ExposeSecret::expose_secret(&t));
                }
            }
            Some(HttpAuth::Basic { username, password }) => {
                if let Ok(p) = password.resolve() {
                    r.add_basic(username, secrecy::ExposeSecret::expose_secret(&p));
                }
            }
            None => {}
        };
        add_auth(self.prometheus.as_ref().and_then(|p| p.auth.as_ref()), &mut r);
        for c in &self.flink.clusters {
            add_auth(c.auth.as_ref(), &mut r);
        }
        for a in [&self.server.auth, &self.server.webhook_auth, &self.server.api_auth] {
            add_auth(a.as_ref().and_then(ServerAuth::http).as_ref(), &mut r);
        }
        let resolved = |s: Option<&SecretSource>| s.and_then(|s| s.resolve().ok());
        if let Some(k) = resolved(self.server.link_secret.as_ref()) {
            r.add(secrecy::ExposeSecret::expose_secret(&k));
        }
        for (_, f) in self.notify.secrets() {
            let Ok(secret) = f.source.resolve() else { continue };
            let secret = secrecy::ExposeSecret::expose_secret(&secret);
            match f.form {
                SecretForm::Plain => r.add(secret),
                SecretForm::Url => r.add_url(secret),
                SecretForm::Basic { username } => r.add_basic(username, secret),
            }
        }
        r
    }

    /// Every value out of its range, in one pass.
    pub fn validate(&self) -> Vec<String> {
        let mut problems = Vec::new();
        self.diagnosis.validate(&mut problems);
        if let Some(p) = &self.prometheus {
            p.validate(&mut problems);
        }
        self.flink.validate(&mut problems);
        self.metrics.validate(&mut problems);
        self.server.validate(&mut problems);
        self.notify.validate(&mut problems);
        if let Some(url) = &self.store.url {
            problems.extend(store_url_problems(url));
        }
        if self.store.lease.as_ms() < 3000 {
            problems.push("store.lease must be at least 3s (renewed every third of it)".into());
        }
        if self.store.max_queue == 0 {
            problems.push("store.max_queue must be at least 1 (0 would answer every webhook with 503)".into());
        }
        if self.store.max_unknown_per_sender == 0 {
            problems.push(
                "store.max_unknown_per_sender must be at least 1 (0 would refuse every job never diagnosed)".into(),
            );
        }
        if self.store.verdicts_kept == 0 {
            problems.push("store.verdicts_kept must be at least 1 (verdict links would lead nowhere)".into());
        }
        if self.store.prune_after.as_ms() < 3_600_000 || self.store.keep_rows == 0 {
            problems.push(
                "store.prune_after must be at least 1h and store.keep_rows at least 1 (a replayed notice must still find its twin)"
                    .into(),
            );
        }
        if self.service.max_jobs_per_webhook == 0 {
            problems.push("service.max_jobs_per_webhook must be at least 1".into());
        }
        problems
    }
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

/// Diagnosis settings: the window and the runbook's thresholds.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct DiagnosisConfig {
    /// The period the verdict looks at, ending at `at`. Default 5m.
    pub window: Millis,
    /// How far back trends (checkpoints, lag) look. Default 1h.
    pub trend_lookback: Millis,
    /// Samples whose averaging span reaches back over the job's start, a restart or a
    /// rescale are left out: Flink reports every task 1000 ms/s busy right after submit,
    /// and busy, idle, backpressured time and the `*PerSecond` rates are ~60 s moving
    /// averages, so a change shows fully only a minute later. Default 75s (60 s of
    /// averaging, plus the tasks' deployment and one scrape).
    pub startup_exclusion: Millis,
    /// Resolution of trend series (the `step` of range queries). Default 5s.
    pub step: Millis,
    /// Shorten the window to the current backpressure episode (or calm) when it began
    /// inside the window, so averages describe the present state. Default true.
    pub episode_window: bool,
    /// The window is never shortened below this (nor below two periods of a recurring
    /// backpressure). Default 1m.
    pub min_window: Millis,
    /// Parallelism advice includes the capacity to drain the current backlog within this
    /// (the Flink autoscaler's `job.autoscaler.catch-up.duration`); 0 leaves the backlog
    /// out. Default 30m.
    pub catch_up: Millis,
    pub thresholds: Thresholds,
    /// Operator kind by vertex or operator name (as Flink shows it), overriding the kind
    /// read from the name: `aggregate`, `join`, `window`, `order_dependent`, `async_io`,
    /// `stateless`, `unknown`.
    pub operator_kinds: BTreeMap<String, OperatorKind>,
}

impl Default for DiagnosisConfig {
    fn default() -> Self {
        DiagnosisConfig {
            window: Millis::from_secs(300),
            trend_lookback: Millis::from_secs(3600),
            startup_exclusion: Millis::from_secs(75),
            step: Millis::from_secs(5),
            episode_window: true,
            min_window: Millis::from_secs(60),
            catch_up: Millis::from_secs(1800),
            thresholds: Thresholds::default(),
            operator_kinds: BTreeMap::new(),
        }
    }
}

impl DiagnosisConfig {
    fn validate(&self, problems: &mut Vec<String>) {
        // Windows below a second hold no scrape (as for --window and the API's window=).
        let at_least = [
            ("diagnosis.window", self.window, 1000),
            ("diagnosis.trend_lookback", self.trend_lookback, 1000),
            ("diagnosis.step", self.step, 1),
            ("diagnosis.min_window", self.min_window, 1000),
        ];
        for (key, value, min_ms) in at_least {
            if value.0 < min_ms {
                problems.push(if min_ms == 1 {
                    format!("{key} must be longer than 0")
                } else {
                    format!("{key} must be at least 1s")
                });
            }
        }
        if self.trend_lookback < self.window {
            problems.push("diagnosis.trend_lookback must be at least diagnosis.window".into());
        }
        self.thresholds.validate(problems);
    }
}

/// What an operator does, as far as the fix for a hot key is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OperatorKind {
    /// Associative and commutative aggregate (sum, count, min, max): salting applies.
    Aggregate,
    /// A join: salting is wrong.
    Join,
    /// A window operator whose logic may depend on order.
    Window,
    /// Anything whose result depends on record order (rank, deduplicate, over windows).
    OrderDependent,
    /// Async I/O or lookup: throughput bounded by the service it calls.
    AsyncIo,
    /// No state.
    Stateless,
    /// Not known from the name.
    Unknown,
}

/// The runbook's thresholds. Ratios are in [0, 1].
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Thresholds {
    /// A vertex is backpressured when its max subtask backpressured ratio exceeds this
    /// (Flink UI: OK ≤ 0.10 < LOW ≤ 0.50 < HIGH). Default 0.10.
    pub backpressured_ratio: f64,
    /// A culprit candidate is busy by itself at max subtask busy ratio ≥ this. Default 0.5.
    pub busy_ratio: f64,
    /// A source is source-bound at max busy ≥ this while its lag grows. Default 0.9.
    pub source_busy_ratio: f64,
    /// The hottest subtask of a skewed vertex is at least this busy. Default 0.9.
    pub hot_subtask_busy_ratio: f64,
    /// …while the median of the other subtasks is at most this busy. Default 0.5.
    pub others_busy_median_ratio: f64,
    /// A hot key gives the hot subtask a records share ≥ this / parallelism. Default 2.0.
    pub hot_key_share_factor: f64,
    /// …and ≥ this × the records of the next busiest subtask. Default 1.5.
    pub hot_key_next_ratio: f64,
    /// Headroom hits at utilisation (mean busy ratio) ≥ this. Default 0.9.
    pub headroom_utilisation: f64,
    /// Vertices at utilisation ≥ this are near capacity. Default 0.8.
    pub near_capacity_utilisation: f64,
    /// A culprit stands out from the near-capacity vertices when its utilisation exceeds
    /// theirs by more than this. Default 0.1.
    pub stand_out_margin: f64,
    /// The utilisation parallelism advice aims for. Default 0.7.
    pub target_utilisation: f64,
    /// The recovery point has stopped advancing when the last completed checkpoint is
    /// older than this many intervals. Default 3.
    pub checkpoint_stalled_intervals: f64,
    /// A checkpoint is in trouble when its duration reaches this share of the timeout.
    /// Default 0.5.
    pub checkpoint_timeout_share: f64,
    /// Checkpoint timeout when Flink REST does not say (Flink's default). Default 10m.
    pub checkpoint_default_timeout: Millis,
    /// Checkpoint failures in the job's first minute are start-up noise. Default 60s.
    pub checkpoint_startup_grace: Millis,
    /// A RocksDB pending flag (compaction, flush) is persistent when set in this share of
    /// samples. Default 0.8.
    pub rocksdb_flag_persistent_ratio: f64,
    /// RocksDB `soft_pending_compaction_bytes_limit`, where it starts delaying writes,
    /// bytes. Default 64 GiB (RocksDB's default).
    pub rocksdb_soft_pending_compaction_bytes: f64,
    /// Growing pending compaction bytes matter when they would reach the soft limit
    /// within this. Default 1h.
    pub rocksdb_pending_compaction_horizon: Millis,
    /// Write-stall time per wall-clock second (from `stall_micros`) above which RocksDB
    /// stalls, ratio. Default 0 (any stall).
    pub rocksdb_stall_ratio: f64,
    /// Data loss less than this far away leads the verdict (critical). Default 1h.
    pub retention_critical: Millis,
    /// Data loss less than this far away is reported as a warning. Default 24h.
    pub retention_warning: Millis,
    /// An async I/O culprit waits on its service when the TaskManager CPU load stays
    /// below this. Default 0.5.
    pub async_io_cpu_load: f64,
    /// A watermark that has not advanced for this long, while records flow, is stalled.
    /// Default 2m.
    pub watermark_stall: Millis,
    /// In the time-resolved reading, a vertex that holds the job back in at least this share
    /// of the window's samples is a bottleneck (two such: it alternates). Default 0.2.
    pub timeline_holder_share: f64,
    /// The samples overrule the window averages when their bottleneck holds the job back
    /// this much more often than the vertex the averages point to. Default 0.1.
    pub timeline_share_margin: f64,
    /// Backpressure in at least this share of the samples is steady. Default 0.9.
    pub timeline_steady_share: f64,
    /// Without busy time (a reporter older than Flink 1.13), a candidate is the culprit when
    /// its input buffer pool usage (`inPoolUsage`) reaches this: records wait in front of
    /// it. Default 0.9.
    pub in_pool_full_ratio: f64,
    /// …and its output buffer pool usage (`outPoolUsage`) is at most this: nothing after it
    /// holds it back. Default 0.5.
    pub out_pool_low_ratio: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            backpressured_ratio: 0.10,
            busy_ratio: 0.5,
            source_busy_ratio: 0.9,
            hot_subtask_busy_ratio: 0.9,
            others_busy_median_ratio: 0.5,
            hot_key_share_factor: 2.0,
            hot_key_next_ratio: 1.5,
            headroom_utilisation: 0.9,
            near_capacity_utilisation: 0.8,
            stand_out_margin: 0.1,
            target_utilisation: 0.7,
            checkpoint_stalled_intervals: 3.0,
            checkpoint_timeout_share: 0.5,
            checkpoint_default_timeout: Millis::from_secs(600),
            checkpoint_startup_grace: Millis::from_secs(60),
            rocksdb_flag_persistent_ratio: 0.8,
            rocksdb_soft_pending_compaction_bytes: 64.0 * 1024.0 * 1024.0 * 1024.0,
            rocksdb_pending_compaction_horizon: Millis::from_secs(3600),
            rocksdb_stall_ratio: 0.0,
            retention_critical: Millis::from_secs(3600),
            retention_warning: Millis::from_secs(24 * 3600),
            async_io_cpu_load: 0.5,
            watermark_stall: Millis::from_secs(120),
            timeline_holder_share: 0.2,
            timeline_share_margin: 0.1,
            timeline_steady_share: 0.9,
            in_pool_full_ratio: 0.9,
            out_pool_low_ratio: 0.5,
        }
    }
}

impl Thresholds {
    fn validate(&self, problems: &mut Vec<String>) {
        let ratios = [
            ("backpressured_ratio", self.backpressured_ratio),
            ("busy_ratio", self.busy_ratio),
            ("source_busy_ratio", self.source_busy_ratio),
            ("hot_subtask_busy_ratio", self.hot_subtask_busy_ratio),
            ("others_busy_median_ratio", self.others_busy_median_ratio),
            ("headroom_utilisation", self.headroom_utilisation),
            ("near_capacity_utilisation", self.near_capacity_utilisation),
            ("stand_out_margin", self.stand_out_margin),
            ("checkpoint_timeout_share", self.checkpoint_timeout_share),
            ("rocksdb_flag_persistent_ratio", self.rocksdb_flag_persistent_ratio),
            ("rocksdb_stall_ratio", self.rocksdb_stall_ratio),
            ("async_io_cpu_load", self.async_io_cpu_load),
            ("timeline_holder_share", self.timeline_holder_share),
            ("timeline_share_margin", self.timeline_share_margin),
            ("timeline_steady_share", self.timeline_steady_share),
            ("in_pool_full_ratio", self.in_pool_full_ratio),
            ("out_pool_low_ratio", self.out_pool_low_ratio),
        ];
        for (key, v) in ratios {
            if !(0.0..=1.0).contains(&v) {
                problems.push(format!("diagnosis.thresholds.{key} = {v} is not a ratio in [0, 1]"));
            }
        }
        if !(self.target_utilisation > 0.0 && self.target_utilisation <= 1.0) {
            problems.push(format!(
                "diagnosis.thresholds.target_utilisation = {} must be in (0, 1]",
                self.target_utilisation
            ));
        }
        for (key, v) in [
            ("hot_key_share_factor", self.hot_key_share_factor),
            ("hot_key_next_ratio", self.hot_key_next_ratio),
            ("checkpoint_stalled_intervals", self.checkpoint_stalled_intervals),
            ("rocksdb_soft_pending_compaction_bytes", self.rocksdb_soft_pending_compaction_bytes),
        ] {
            if !(v > 0.0 && v.is_finite()) {
                problems.push(format!("diagnosis.thresholds.{key} = {v} must be a positive number"));
            }
        }
        if self.retention_warning < self.retention_critical {
            problems.push("diagnosis.thresholds.retention_warning must be at least retention_critical".into());
        }
    }
}

/// A Prometheus-compatible query API (Prometheus, Thanos, Mimir, Cortex, VictoriaMetrics).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PrometheusConfig {
    /// Base URL including any path prefix, without `/api/v1`:
    /// `http://prometheus:9090`, `https://mimir.example.com/prometheus`.
    pub url: String,
    /// Per-request timeout, also sent as the `timeout` parameter. Default 10s.
    #[serde(default = "default_prometheus_timeout")]
    pub timeout: Millis,
    /// Total time one query may take with its retries (503, other 5xx, network errors).
    /// Default 30s.
    #[serde(default = "default_prometheus_deadline")]
    pub deadline: Millis,
    /// Optional authentication.
    #[serde(default)]
    pub auth: Option<HttpAuth>,
    /// Tenant for multi-tenant stores, sent as `X-Scope-OrgID` (Mimir, Cortex, Loki-style).
    #[serde(default)]
    pub tenant: Option<String>,
    /// The largest answer read, bytes; a larger one is asked again in smaller pieces.
    /// Default [`PROMETHEUS_MAX_ANSWER_BYTES`] (64 MiB).
    #[serde(default = "default_prometheus_max_answer_bytes")]
    pub max_answer_bytes: usize,
    /// The bytes of answers the process reads at once, across every diagnosis: an answer
    /// takes its bytes as they arrive (at once by its `Content-Length`) and gives them back
    /// when parsed; one that cannot get them within `timeout` is asked again in smaller
    /// pieces. At least `max_answer_bytes`. Default
    /// [`PROMETHEUS_MAX_ANSWER_BYTES_IN_FLIGHT`] (128 MiB).
    #[serde(default = "default_prometheus_max_answer_bytes_in_flight")]
    pub max_answer_bytes_in_flight: usize,
}

/// The default of `prometheus.max_answer_bytes_in_flight`: 128 MiB, two answers at the
/// default cap at once. What they take parsed is about their size again or less (typed
/// series; `examples/prom_answer_bench.rs`), so with the process' own some 60 MB this fits
/// the shipped Deployment's 512 MiB limit with room for the diagnoses' snapshots
/// (`deploy/kubernetes/deployment.yaml` gives the arithmetic).
pub const PROMETHEUS_MAX_ANSWER_BYTES_IN_FLIGHT: usize = 128 * 1024 * 1024;

fn default_prometheus_max_answer_bytes_in_flight() -> usize {
    PROMETHEUS_MAX_ANSWER_BYTES_IN_FLIGHT
}

/// The default of `prometheus.max_answer_bytes`: 64 MiB, some 30,000 series of 60 points
/// with Flink's labels. A diagnosis' answers are far smaller (its queries aggregate); one
/// this large is a query that selects too much.
pub const PROMETHEUS_MAX_ANSWER_BYTES: usize = 64 * 1024 * 1024;

fn default_prometheus_max_answer_bytes() -> usize {
    PROMETHEUS_MAX_ANSWER_BYTES
}

fn default_prometheus_timeout() -> Millis {
    Millis::from_secs(10)
}

fn default_prometheus_deadline() -> Millis {
    Millis::from_secs(30)
}

impl PrometheusConfig {
    fn validate(&self, problems: &mut Vec<String>) {
        check_backend_url("prometheus.url", &self.url, "[prometheus.auth]", problems);
        if self.timeout.0 <= 0 || self.deadline < self.timeout {
            problems.push(format!(
                "prometheus.timeout ({} s) must be positive and at most prometheus.deadline ({} s); the defaults are 10 s and 30 s: set both when lowering the deadline",
                self.timeout.0 as f64 / 1000.0,
                self.deadline.0 as f64 / 1000.0
            ));
        }
        if self.max_answer_bytes < 1024 {
            problems.push(format!(
                "prometheus.max_answer_bytes ({}) must be at least 1024: no answer would fit",
                self.max_answer_bytes
            ));
        }
        if self.max_answer_bytes_in_flight < self.max_answer_bytes {
            problems.push(format!(
                "prometheus.max_answer_bytes_in_flight ({}) must be at least prometheus.max_answer_bytes ({}): an answer that size could never be held",
                self.max_answer_bytes_in_flight, self.max_answer_bytes
            ));
        }
    }
}

/// Flink clusters whose REST API gives job graphs and checkpoint configuration.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct FlinkConfig {
    /// Per-request timeout toward Flink REST. Default 5s.
    pub timeout: Millis,
    /// Total time one REST call may take with retries (young jobs answer 500 on some
    /// endpoints). Default 15s.
    pub deadline: Millis,
    /// The clusters. A request or alert picks the first cluster whose `match` labels all
    /// equal its labels; a cluster without `match` is the default.
    pub clusters: Vec<FlinkCluster>,
    /// Job plans to use when Flink REST is not reachable: job name (as Flink shows it, or
    /// as the reporter writes it) or job id → file holding the JSON of `GET /jobs/:id/plan`.
    /// Used however the request or alert names the job; never chooses which run is
    /// diagnosed.
    pub plans: BTreeMap<String, std::path::PathBuf>,
    /// The alert label whose value names the cluster (by its `name`) that an alert's job
    /// runs on, e.g. `flink_cluster`. Unset (the default): alert labels choose a cluster
    /// only through `match`, so a `cluster` label added by Prometheus (kube-prometheus'
    /// external label) never fails a diagnosis. A value naming no configured cluster falls
    /// back to `match` and the default, with a note.
    pub cluster_label: Option<String>,
}

/// The key under which a request chooses a Flink cluster by name (the API's `cluster=`,
/// the CLI's `--cluster`): not a valid label name, so no alert label can be mistaken for it.
pub const CLUSTER_CHOICE: &str = "@cluster";

impl Default for FlinkConfig {
    fn default() -> Self {
        FlinkConfig {
            timeout: Millis::from_secs(5),
            deadline: Millis::from_secs(15),
            clusters: Vec::new(),
            plans: BTreeMap::new(),
            cluster_label: None,
        }
    }
}

impl FlinkConfig {
    fn validate(&self, problems: &mut Vec<String>) {
        for c in &self.clusters {
            match (&c.rest_url_template, c.rest_url.is_empty()) {
                (None, _) => check_backend_url(
                    &format!("flink.clusters `{}`: rest_url", c.name),
                    &c.rest_url,
                    "`auth`",
                    problems,
                ),
                (Some(template), true) => match crate::model::rest_template::check(template, &c.template_labels) {
                    Ok(sample) => check_backend_url(
                        &format!("flink.clusters `{}`: rest_url_template", c.name),
                        &sample,
                        "`auth`",
                        problems,
                    ),
                    Err(e) => problems.push(format!("flink.clusters `{}`: rest_url_template: {e}", c.name)),
                },
                (Some(_), false) => {
                    problems.push(format!("flink.clusters `{}`: give rest_url or rest_url_template, not both", c.name))
                }
            }
            if !c.allowed_host_suffixes.is_empty() && c.rest_url_template.is_none() {
                problems.push(format!(
                    "flink.clusters `{}`: allowed_host_suffixes limits rest_url_template, which is not set",
                    c.name
                ));
            }
            for suffix in c.allowed_host_suffixes.iter().filter(|s| !crate::model::rest_template::is_host_suffix(s)) {
                problems.push(format!(
                    "flink.clusters `{}`: allowed_host_suffixes entry {suffix:?} is not a DNS name's end (labels of a-z, 0-9 and -, joined by dots)",
                    c.name
                ));
            }
        }
        let defaults = self.clusters.iter().filter(|c| c.r#match.is_empty()).count();
        if defaults > 1 {
            problems.push("flink.clusters: at most one cluster may have no `match` (the default)".into());
        }
        if let Some(label) = &self.cluster_label
            && !is_label_name(label)
        {
            problems.push(format!(
                "flink.cluster_label `{label}` is not a label name ([a-zA-Z_][a-zA-Z0-9_]*), e.g. \"flink_cluster\""
            ));
        }
    }

    /// The cluster for a request with these labels: the one chosen by name
    /// ([`CLUSTER_CHOICE`], from the API or CLI); else the one the alert's
    /// `cluster_label` names, when that is configured and names one; else the first whose
    /// `match` labels all equal the alert's; else the default (no `match`).
    pub fn cluster_for(&self, labels: &BTreeMap<String, String>) -> Option<&FlinkCluster> {
        if let Some(name) = labels.get(CLUSTER_CHOICE) {
            return self.clusters.iter().find(|c| &c.name == name);
        }
        if let Some(name) = self.cluster_label.as_ref().and_then(|l| labels.get(l))
            && let Some(c) = self.clusters.iter().find(|c| &c.name == name)
        {
            return Some(c);
        }
        self.clusters
            .iter()
            .find(|c| !c.r#match.is_empty() && c.r#match.iter().all(|(k, v)| labels.get(k) == Some(v)))
            .or_else(|| self.clusters.iter().find(|c| c.r#match.is_empty()))
    }
}

/// Whether `s` is a Prometheus label name.
fn is_label_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// One Flink cluster.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FlinkCluster {
    /// A name for messages and `cluster=` selection.
    pub name: String,
    /// The REST endpoint (JobManager), e.g. `http://flink-jobmanager:8081`. Either this or
    /// `rest_url_template`.
    #[serde(default)]
    pub rest_url: String,
    /// The REST endpoint of each job from its labels (the alert's, else its series'), e.g.
    /// `http://{deployment}-rest.{namespace}:8081`, the Flink Kubernetes Operator's REST
    /// service. Each value must be a DNS label, else Flink REST is not asked and the
    /// verdict says why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rest_url_template: Option<String>,
    /// Placeholder → the label that fills it. Defaults: `deployment` ← `app` (the label
    /// Flink's native Kubernetes integration puts on its pods: the FlinkDeployment's name),
    /// `namespace` ← `namespace`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub template_labels: BTreeMap<String, String>,
    /// With `rest_url_template`: the hosts it may give, by their end (whole labels), e.g.
    /// `["payments", "svc.cluster.local"]`; a job whose host ends in none of them is not
    /// asked. Empty (the default): any DNS name the template's shape allows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_host_suffixes: Vec<String>,
    /// Labels (on the alert or request) that select this cluster, e.g.
    /// `{ flink_cluster = "prod" }` or `{ namespace = "payments" }`.
    #[serde(default)]
    pub r#match: BTreeMap<String, String>,
    /// Optional authentication (e.g. behind an ingress).
    #[serde(default)]
    pub auth: Option<HttpAuth>,
}

/// `culprit serve`'s HTTP side.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Address to listen on. Default `127.0.0.1:9187` (this host only); another address
    /// (`0.0.0.0:9187` in a container) needs `auth`.
    pub listen: String,
    /// Base URL users reach culprit at, for links to verdicts (`https://culprit.example.com`).
    pub external_url: Option<String>,
    /// Largest request body accepted, bytes; larger bodies get 413. Default 1 MiB.
    pub body_limit_bytes: usize,
    /// Time a request may take before 408/503. Default 30s (a live `/api/v1/diagnose`
    /// runs a whole diagnosis).
    pub request_timeout: Millis,
    /// A connection that has not sent a whole request head this long after it opened, or
    /// after the first byte of its next request, is closed (slowloris). Default 10s.
    pub header_read_timeout: Millis,
    /// A kept-alive connection that sends nothing this long after an answer is closed.
    /// Default 75s (nginx's own default): above the idle timeout of the proxies that keep
    /// connections to culprit (ingress-nginx's upstream keep-alive and AWS ALB, 60 s), so
    /// that the proxy, not culprit, closes an idle connection and no request races a close.
    pub idle_timeout: Millis,
    /// Connections served at once. When reached, a new connection closes the oldest one
    /// with no request in flight; it is refused only while every one has a request in
    /// flight. Lowered at start to the open-file limit (raised to its hard limit where
    /// allowed) minus what the store, outgoing HTTP and files need. Default 1024.
    pub max_connections: usize,
    /// Authentication required on `/webhook/*` and `/api/*` (bearer or basic, compared in
    /// constant time), or `{ type = "none" }` to accept anyone on purpose. `/healthz`,
    /// `/readyz` and `/metrics` stay open. Unset: allowed only while `listen` is a loopback
    /// address (`serve` refuses to start otherwise).
    pub auth: Option<ServerAuth>,
    /// Credentials for `/webhook/*` only (Alertmanager's), instead of `auth`.
    pub webhook_auth: Option<ServerAuth>,
    /// Credentials for `/api/*` only (people and bots reading verdicts), instead of `auth`.
    pub api_auth: Option<ServerAuth>,
    /// The key that signs links to verdict pages (`{external_url}/verdicts/{id}?expires=…&sig=…`,
    /// HMAC-SHA256), a secret reference. A browser cannot send the API's token: with a key,
    /// a signed link opens its page until it expires; without one, links point at the API.
    pub link_secret: Option<SecretSource>,
    /// How long a signed link opens its page. Default 7d.
    pub link_expiry: Millis,
}

/// How `culprit serve` authenticates requests.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case", tag = "type")]
pub enum ServerAuth {
    /// No authentication: whoever reaches the port may post alerts and read verdicts.
    /// Only when chosen explicitly.
    None,
    /// `Authorization: Bearer <token>`.
    Bearer { token: SecretSource },
    /// `Authorization: Basic …`.
    Basic { username: String, password: SecretSource },
}

impl ServerAuth {
    /// The credentials to expect, `None` for [`ServerAuth::None`].
    pub fn http(&self) -> Option<HttpAuth> {
        match self {
            ServerAuth::None => None,
            ServerAuth::Bearer { token } => Some(HttpAuth::Bearer { token: token.clone() }),
            ServerAuth::Basic { username, password } => {
                Some(HttpAuth::Basic { username: username.clone(), password: password.clone() })
            }
        }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: "127.0.0.1:9187".into(),
            external_url: None,
            body_limit_bytes: 1024 * 1024,
            request_timeout: Millis::from_secs(30),
            header_read_timeout: Millis::from_secs(10),
            idle_timeout: Millis::from_secs(75),
            max_connections: 1024,
            auth: None,
            link_secret: None,
            link_expiry: Millis::from_secs(7 * 24 * 3600),
            webhook_auth: None,
            api_auth: None,
        }
    }
}

impl ServerConfig {
    /// The authentication of `/webhook/*`: `webhook_auth`, else `auth`.
    pub fn webhook(&self) -> Option<&ServerAuth> {
        self.webhook_auth.as_ref().or(self.auth.as_ref())
    }

    /// The authentication of `/api/*`: `api_auth`, else `auth`.
    pub fn api(&self) -> Option<&ServerAuth> {
        self.api_auth.as_ref().or(self.auth.as_ref())
    }

    /// Why `serve` must not start as configured: a `listen` address other hosts can reach
    /// while `/webhook/*` or `/api/*` has no authentication and none was chosen explicitly
    /// (`{ type = "none" }`). A browser page can post to an open webhook cross-site.
    pub fn exposure_problem(&self) -> Option<String> {
        let addr: std::net::SocketAddr = self.listen.parse().ok()?;
        if addr.ip().is_loopback() {
            return None;
        }
        let open: Vec<&str> = [("/webhook/*", self.webhook()), ("/api/*", self.api())]
            .into_iter()
            .filter(|(_, auth)| auth.is_none())
            .map(|(route, _)| route)
            .collect();
        (!open.is_empty()).then(|| {
            format!(
                "server.listen {} is reachable from other hosts and {} would accept anyone: set server.auth = {{ type = \"bearer\", token = {{ file = \"/run/secrets/culprit/webhook-token\" }} }} (Alertmanager sends the same token), or server.auth = {{ type = \"none\" }} to accept unauthenticated requests on purpose, or listen on 127.0.0.1",
                self.listen,
                open.join(" and ")
            )
        })
    }

    fn validate(&self, problems: &mut Vec<String>) {
        if self.listen.parse::<std::net::SocketAddr>().is_err() {
            problems.push(format!("server.listen `{}` is not an address such as 0.0.0.0:9187", self.listen));
        }
        if let Some(u) = &self.external_url
            && reqwest::Url::parse(u).is_err()
        {
            problems.push(format!("server.external_url `{u}` is not a URL"));
        }
        if self.body_limit_bytes < 1024 {
            problems.push("server.body_limit_bytes must be at least 1024".into());
        }
        for (key, value) in [("header_read_timeout", self.header_read_timeout), ("idle_timeout", self.idle_timeout)] {
            if value.as_ms() < 100 {
                problems.push(format!(
                    "server.{key} must be at least 100ms (it is {value}; a client on another continent needs that for a round trip)"
                ));
            }
        }
        if self.max_connections == 0 {
            problems.push("server.max_connections must be at least 1 (0 would serve nobody)".into());
        }
    }
}

/// How hard the store syncs to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Synchronous {
    /// Every commit reaches the disk: survives power loss (SQLite `synchronous=FULL`; webhook
    /// intake gets it by syncing the WAL once per batch before answering, see the SQLite store).
    Full,
    /// Commits survive a crash of the process, not of the machine (`synchronous=NORMAL`).
    Normal,
}

/// The embedded SQLite store (WAL) of accepted work and pending notifications.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    /// PostgreSQL (`postgres://user@host:5432/db`), shared by any number of replicas.
    /// Unset: the SQLite file at `path` (one replica). Never holds the password.
    pub url: Option<String>,
    /// The PostgreSQL password (a secret reference).
    pub password: Option<SecretSource>,
    /// PostgreSQL connections per replica. Default 16.
    pub pool_size: usize,
    /// How long a replica's claim on a diagnosis or a send lasts without renewal (by
    /// PostgreSQL's clock): after it dies, another replica takes its diagnoses this much
    /// later and its sends 10 s after that; a replica paused or cut off from the database
    /// for longer has lost its claims and does not send them. Default 30s.
    pub lease: Millis,
    /// Database file. Default `culprit.db` in the working directory.
    pub path: std::path::PathBuf,
    /// Default `full`.
    pub synchronous: Synchronous,
    /// Most diagnoses waiting; beyond it webhooks get 503 (Alertmanager retries). Default
    /// 10000.
    pub max_queue: usize,
    /// Verdicts kept for `/api/v1/verdicts`. Default 1000.
    pub verdicts_kept: usize,
    /// Delivered and failed notices, dead letters, verdicts, and the state of groups not
    /// heard of for this long are removed. Default 7d.
    pub prune_after: Millis,
    /// At most this many delivered or failed notices, and dead letters, are kept (the
    /// newest). Default 100000.
    pub keep_rows: usize,
    /// Most diagnoses of unknown jobs (never diagnosed with a verdict, not in
    /// `[flink.plans]`) waiting per sender (the Alertmanager: its `externalURL`, else the
    /// peer address); beyond it that sender's webhooks for more unknown jobs get 429
    /// (Alertmanager retries), other senders and known jobs are not held. Default 1000.
    pub max_unknown_per_sender: usize,
    /// Known jobs are claimed first; a due diagnosis of an unknown job that waited this
    /// long ranks with them, so unknown jobs are never starved for good. Default 10m.
    pub unknown_max_wait: Millis,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            url: None,
            password: None,
            pool_size: 16,
            lease: Millis::from_secs(30),
            path: "culprit.db".into(),
            synchronous: Synchronous::Full,
            max_queue: 10_000,
            verdicts_kept: 1000,
            prune_after: Millis::from_secs(7 * 24 * 3600),
            keep_rows: 100_000,
            max_unknown_per_sender: 1000,
            unknown_max_wait: Millis::from_secs(600),
        }
    }
}

/// What is wrong with `store.url`: not PostgreSQL, or a password written in it.
fn store_url_problems(url: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let Some(rest) = url.strip_prefix("postgres://").or_else(|| url.strip_prefix("postgresql://")) else {
        problems.push(
            "store.url must be a PostgreSQL URL (postgres://user@host:5432/database); for SQLite set store.path".into(),
        );
        return problems;
    };
    let authority = rest.split(['/', '?']).next().unwrap_or("");
    // In the user info (`user:pw@`) or as libpq's `?password=` parameter, which
    // tokio-postgres takes too.
    let in_query = rest.split_once('?').is_some_and(|(_, q)| {
        q.split('&').any(|kv| kv.split('=').next().is_some_and(|k| k.eq_ignore_ascii_case("password")))
    });
    if authority.rsplit_once('@').is_some_and(|(user, _)| user.contains(':')) || in_query {
        problems.push("store.url holds a password: give it as store.password = { env = \"…\" } or { file = \"…\" } (the value is not shown)".into());
    }
    problems
}

/// From Alertmanager alerts to diagnoses.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServiceConfig {
    /// Alert label naming the Flink job id (preferred). Default `job_id`.
    pub job_id_label: String,
    /// Alert label naming the Flink job (as the reporter writes it). Default `job_name`.
    pub job_name_label: String,
    /// Alerts and webhooks for one job within this window give one diagnosis. Default 10s.
    pub coalesce: Millis,
    /// While the metrics backend fails, retry for this long, then post "could not
    /// diagnose". Default 5m.
    pub diagnose_retry_for: Millis,
    /// Diagnoses run at once. Default 4.
    pub concurrency: usize,
    /// A weak verdict (no finding, confidence below high, a ratio within 4 points of its
    /// threshold) is diagnosed once more this long after, and the posted messages are
    /// updated in place if it changed (an alert often arrives while Flink's 60 s averages
    /// still settle). `0s`: never. Default 1m.
    pub rediagnose_weak_after: Millis,
    /// Post a short "resolved" follow-up when a group resolves. Default true.
    pub notify_resolved: bool,
    /// Alerts with these alertnames are culprit's own and are ignored (no loops). Default
    /// `["FlinkBackpressureCulprit"]`.
    pub ignore_alertnames: Vec<String>,
    /// Most Flink jobs one webhook may ask to diagnose; the others are left out (logged,
    /// counted, and said in the answer). Default 50.
    pub max_jobs_per_webhook: usize,
    /// The alerts culprit diagnoses, by alertname; any other alert in a webhook is
    /// answered 2xx, counted and logged, and never diagnosed or posted (a route by
    /// namespace also brings Kubernetes alerts with a `job_name` label). Empty: every
    /// alert with a job label. Default: the alerts of the shipped rules
    /// (`deploy/prometheus/flink-backpressure.rules.yml`).
    pub alertnames: Vec<String>,
}

/// The alertnames of the shipped Prometheus rules (`deploy/prometheus/`).
pub const SHIPPED_ALERTNAMES: [&str; 3] = ["FlinkJobBackpressured", "FlinkTaskBackpressured", "FlinkCheckpointSlow"];

impl Default for ServiceConfig {
    fn default() -> Self {
        ServiceConfig {
            job_id_label: "job_id".into(),
            job_name_label: "job_name".into(),
            coalesce: Millis::from_secs(10),
            diagnose_retry_for: Millis::from_secs(300),
            concurrency: 4,
            rediagnose_weak_after: Millis::from_secs(60),
            notify_resolved: true,
            ignore_alertnames: vec!["FlinkBackpressureCulprit".into()],
            max_jobs_per_webhook: 50,
            alertnames: SHIPPED_ALERTNAMES.iter().map(|s| s.to_string()).collect(),
        }
    }
}

/// Which Kafka consumer group and topics belong to which Flink job, and topic retention.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct KafkaConfig {
    /// Job → consumer group and topics. Without an entry, a consumer group named like
    /// the job is taken as the job's.
    pub jobs: Vec<KafkaJob>,
    /// `retention.ms` per topic, e.g. `payments = "7d"`. KMinion's `retention_ms` label
    /// is used for topics not listed.
    pub retention: BTreeMap<String, Millis>,
}

/// One job's Kafka inputs.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaJob {
    /// Job name as Flink shows it, or the job id.
    pub job: String,
    /// Consumer group id the job's Kafka source uses.
    pub consumer_group: Option<String>,
    /// Topics the job reads.
    #[serde(default)]
    pub topics: Vec<String>,
}

impl KafkaConfig {
    /// The entry for a job, by Flink name, sanitized name or id.
    pub fn job(&self, name: &str, id: &str) -> Option<&KafkaJob> {
        let sanitized = crate::model::graph::sanitize_label_value(name);
        self.jobs
            .iter()
            .find(|j| j.job == name || j.job == id || crate::model::graph::sanitize_label_value(&j.job) == sanitized)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_or_time_out_of_range_says_the_limit_it_crosses_not_that_it_is_malformed() {
        assert_eq!(parse_window("5m"), Ok(Millis::from_secs(300)));
        // 36,525 days × 86,400 s = 3,155,760,000 s: the longest window is accepted.
        assert_eq!(parse_window("36525d"), Ok(Millis::from_secs(3_155_760_000)));
        assert_eq!(
            parse_window("36526d").unwrap_err(),
            "`36526d` is longer than 36525d (100 years), the longest window"
        );
        // Past jiff's 7,304,484 days the number cannot even be read: still "too long".
        assert_eq!(
            parse_window("1000000000d").unwrap_err(),
            "`1000000000d` is longer than 36525d (100 years), the longest window"
        );
        assert_eq!(parse_window("0.5ms").unwrap_err(), "`0.5ms` is shorter than 1s, the shortest window (e.g. 5m)");
        assert!(parse_window("5x").unwrap_err().contains("is not a duration"));
        assert!(parse_window("soon").unwrap_err().contains("is not a duration"));
        assert!("1000000000d".parse::<Millis>().unwrap_err().contains("is too long: a duration is at most 7304484d"));
        assert!("99999999999999s".parse::<Millis>().unwrap_err().contains("is too long"));

        assert_eq!(parse_time("2026-11-29T10:36:00Z"), Ok(1_795_948_560_000));
        assert_eq!(parse_time("9999-12-30T22:00:00Z"), Ok(253_402_207_200_000));
        assert_eq!(
            parse_time("9999-12-31T23:59:59Z").unwrap_err(),
            "`9999-12-31T23:59:59Z` is after 9999-12-30T22:00:00Z, the latest time culprit takes"
        );
        assert!(parse_time("-009999-01-01T00:00:00Z").unwrap_err().contains("is before -009999-01-02T01:59:59Z"));
        assert!(parse_time("2026-11-29T10:36:00").unwrap_err().contains("has no offset"));
        assert!(parse_time("yesterday").unwrap_err().contains("is not an RFC 3339 time"));
        assert!(parse_time("2026-13-01T00:00:00Z").unwrap_err().contains("is not an RFC 3339 time"));
    }

    #[test]
    fn the_example_file_documents_exactly_the_defaults() {
        let text = include_str!("../config/culprit.example.toml");
        assert_eq!(Config::from_toml(text, "culprit.example.toml").unwrap(), Config::default());
    }

    #[test]
    fn a_metric_name_override_is_validated_at_load() {
        let err = Config::from_toml("[metrics]\nbusy = \"busy time{x}\"\n", "c.toml").unwrap_err();
        assert!(err.to_string().contains("metrics.busy"), "{err}");
        let ok = Config::from_toml("[metrics]\nbusy = \"my_flink_busy\"\n", "c.toml").unwrap();
        assert_eq!(ok.metrics.busy, "my_flink_busy");
        assert_eq!(ok.metrics.idle, crate::model::catalog::MetricCatalog::default().idle);
    }

    #[test]
    fn a_cluster_has_a_rest_url_or_a_rest_url_template_whose_placeholders_are_filled_by_labels() {
        let problems = |toml: &str| match Config::from_toml(toml, "t.toml") {
            Ok(_) => String::new(),
            Err(e) => e.to_string(),
        };
        let ok =
            "[[flink.clusters]]\nname = \"k8s\"\nrest_url_template = \"http://{deployment}-rest.{namespace}:8081\"\n";
        assert_eq!(problems(ok), "");
        let c = &Config::from_toml(ok, "t.toml").unwrap().flink.clusters[0];
        let labels: BTreeMap<String, String> =
            [("app", "orders"), ("namespace", "shop")].map(|(k, v)| (k.to_string(), v.to_string())).into();
        assert_eq!(
            crate::model::rest_template::fill(c.rest_url_template.as_ref().unwrap(), &c.template_labels, &labels, &[]),
            Ok("http://orders-rest.shop:8081".to_string())
        );
        let both = "[[flink.clusters]]\nname = \"k8s\"\nrest_url = \"http://jm:8081\"\nrest_url_template = \"http://{deployment}-rest.{namespace}:8081\"\n";
        assert!(problems(both).contains("give rest_url or rest_url_template, not both"), "{}", problems(both));
        let unmapped = "[[flink.clusters]]\nname = \"k8s\"\nrest_url_template = \"http://{cluster}:8081\"\n";
        assert!(problems(unmapped).contains("set template_labels.cluster"), "{}", problems(unmapped));
        let neither = "[[flink.clusters]]\nname = \"k8s\"\n";
        assert!(problems(neither).contains("rest_url"), "{}", problems(neither));
        let not_http = "[[flink.clusters]]\nname = \"k8s\"\nrest_url_template = \"{deployment}:8081\"\n";
        assert!(problems(not_http).contains("rest_url_template"), "{}", problems(not_http));
    }

    #[test]
    fn answer_bytes_in_flight_default_to_two_capped_answers_and_are_at_least_one() {
        let c = Config::from_toml("[prometheus]\nurl = \"http://p:9090\"\n", "c.toml").unwrap();
        let p = c.prometheus.as_ref().unwrap();
        // 128 MiB = 2 × 64 MiB.
        assert_eq!((p.max_answer_bytes, p.max_answer_bytes_in_flight), (67_108_864, 134_217_728));
        let e = Config::from_toml(
            "[prometheus]\nurl = \"http://p:9090\"\nmax_answer_bytes = 2048\nmax_answer_bytes_in_flight = 2047\n",
            "c.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains(
                "prometheus.max_answer_bytes_in_flight (2047) must be at least prometheus.max_answer_bytes (2048)"
            ),
            "{e}"
        );
    }

    #[test]
    fn prometheus_and_flink_sections_read_urls_auth_and_clusters() {
        let c = Config::from_toml(
            r#"
            [prometheus]
            url = "https://mimir.example.com/prometheus"
            tenant = "team-a"
            auth = { type = "bearer", token = { env = "PROM_TOKEN" } }
            [[flink.clusters]]
            name = "prod"
            rest_url = "http://jm:8081"
            match = { flink_cluster = "prod" }
            [[flink.clusters]]
            name = "default"
            rest_url = "http://jm-default:8081"
            "#,
            "c.toml",
        )
        .unwrap();
        let p = c.prometheus.as_ref().unwrap();
        assert_eq!(p.tenant.as_deref(), Some("team-a"));
        assert_eq!(p.auth, Some(HttpAuth::Bearer { token: SecretSource::Env("PROM_TOKEN".into()) }));
        let labels = |k: &str, v: &str| [(k.to_string(), v.to_string())].into_iter().collect::<BTreeMap<_, _>>();
        assert_eq!(c.flink.cluster_for(&labels("flink_cluster", "prod")).unwrap().name, "prod");
        assert_eq!(c.flink.cluster_for(&labels("flink_cluster", "dev")).unwrap().name, "default");
        // A `cluster` label (an external label of kube-prometheus) chooses nothing by
        // itself: the default cluster.
        assert_eq!(c.flink.cluster_for(&labels("cluster", "prod")).unwrap().name, "default");
        // The API's `cluster=` and the CLI's `--cluster` choose by name.
        assert_eq!(c.flink.cluster_for(&labels(CLUSTER_CHOICE, "prod")).unwrap().name, "prod");
        assert!(c.flink.cluster_for(&labels(CLUSTER_CHOICE, "prod-eu")).is_none());
        // With `cluster_label`, the alert's label chooses by name when it names a cluster.
        let mut flink = c.flink.clone();
        flink.cluster_label = Some("cluster".into());
        assert_eq!(flink.cluster_for(&labels("cluster", "prod")).unwrap().name, "prod");
        assert_eq!(flink.cluster_for(&labels("cluster", "prod-eu")).unwrap().name, "default");
    }

    #[test]
    fn a_bad_url_and_a_second_default_cluster_are_both_reported() {
        let err = Config::from_toml(
            "[prometheus]\nurl = \"prometheus:9090\"\n[[flink.clusters]]\nname = \"a\"\nrest_url = \"http://a\"\n[[flink.clusters]]\nname = \"b\"\nrest_url = \"http://b\"\n",
            "c.toml",
        )
        .unwrap_err();
        assert_eq!(err.problems.len(), 2, "{err}");
    }

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

    #[test]
    fn backend_urls_with_credentials_or_a_query_are_refused_without_echoing_them() {
        for (url, why) in [
            ("http://admin:hunter2@p:9090", "user or password"),
            ("http://p:9090/?token=hunter2", "query string"),
            ("p:hunter2@9090", "not an http(s) URL"),
        ] {
            let text = format!(
                "[prometheus]\nurl = \"{url}\"\n[[flink.clusters]]\nname = \"a\"\nrest_url = \"{url}\"\n[[notify.webhook]]\nname = \"w\"\nurl = \"{url}\"\n[notify.alertmanager]\nurl = \"{url}\"\n"
            );
            let err = Config::from_toml(&text, "c.toml").unwrap_err();
            assert_eq!(err.problems.len(), 4, "{err}");
            let err = err.to_string();
            assert!(!err.contains("hunter2") && err.contains(why), "{err}");
        }
        // A path prefix is fine (Mimir, Thanos behind a proxy).
        assert!(Config::from_toml("[prometheus]\nurl = \"https://mimir/prometheus\"\n", "c.toml").is_ok());
    }

    #[test]
    fn durations_read_the_friendly_forms_and_days() {
        assert_eq!("5m".parse::<Millis>().unwrap(), Millis(300_000));
        assert_eq!("7d".parse::<Millis>().unwrap(), Millis(7 * 86_400_000));
        assert_eq!("1h30m".parse::<Millis>().unwrap(), Millis(5_400_000));
        assert_eq!("250ms".parse::<Millis>().unwrap(), Millis(250));
        assert!("soon".parse::<Millis>().is_err());
    }

    #[test]
    fn an_empty_file_gives_the_spec_defaults() {
        let c = Config::from_toml("", "t").unwrap();
        assert_eq!(c, Config::default());
        assert_eq!(c.diagnosis.thresholds.backpressured_ratio, 0.10);
        assert_eq!(c.diagnosis.window, Millis(300_000));
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
    fn every_out_of_range_value_is_reported_in_one_pass() {
        let err = Config::from_toml("[diagnosis.thresholds]\nbusy_ratio = 1.5\nbackpressured_ratio = -0.1\n", "c.toml")
            .unwrap_err();
        assert_eq!(err.problems.len(), 2, "{err}");
    }
}
