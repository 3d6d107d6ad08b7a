//! Typed settings, read from TOML (`culprit.toml`). Unknown keys are rejected; every
//! value has a default (the spec's), documented in `config/culprit.example.toml`.
//!
//! Durations are strings such as `"5m"`, `"20s"`, `"1h30m"`, `"7d"` (a day is 24 h).
//!
//! One module a section (`diagnosis`, `prometheus`, `flink`, `server`, `store`, `service`,
//! `kafka`), `duration` and `secret` for the value types, `load` for reading the file,
//! `reference` for the reference derived from the types (`docs/config-reference.md`).
//! The destinations' settings are here, below `[notify]`.

use serde::{Deserialize, Serialize};

mod diagnosis;
mod duration;
mod flink;
mod kafka;
mod load;
mod prometheus;
pub mod reference;
mod secret;
pub mod secret_file;
mod server;
mod service;
mod store;

pub use diagnosis::{DiagnosisConfig, OperatorKind, Thresholds};
pub use duration::{MAX_DURATION_DAYS, MAX_WINDOW, MIN_WINDOW, Millis, parse_time, parse_window};
pub use flink::{CLUSTER_CHOICE, FlinkCluster, FlinkConfig};
pub use kafka::{KafkaConfig, KafkaJob};
pub use load::ConfigError;
pub use prometheus::{PROMETHEUS_MAX_ANSWER_BYTES, PROMETHEUS_MAX_ANSWER_BYTES_IN_FLIGHT, PrometheusConfig};
pub use secret::{HttpAuth, SecretSource};
pub use server::{ServerAuth, ServerConfig};
pub use service::{SHIPPED_ALERTNAMES, ServiceConfig};
pub use store::{StoreConfig, Synchronous};

use prometheus::check_backend_url;

/// The whole configuration file.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize, schemars::JsonSchema)]
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

impl Config {
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
        if let Some(slack) = &self.notify.slack {
            if let Some(t) = &slack.token {
                out.push(("notify.slack.token".into(), t));
            }
            if let Some(u) = &slack.webhook_url {
                out.push(("notify.slack.webhook_url".into(), u));
            }
        }
        if let Some(pd) = &self.notify.pagerduty {
            out.push(("notify.pagerduty.routing_key".into(), &pd.routing_key));
        }
        auth(
            "notify.alertmanager.auth".into(),
            self.notify.alertmanager.as_ref().and_then(|a| a.auth.as_ref()),
            &mut out,
        );
        for (i, w) in self.notify.webhook.iter().enumerate() {
            auth(format!("notify.webhook[{i}] ({}).auth", w.name), w.auth.as_ref(), &mut out);
        }
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
        add_auth(self.notify.alertmanager.as_ref().and_then(|a| a.auth.as_ref()), &mut r);
        for w in &self.notify.webhook {
            add_auth(w.auth.as_ref(), &mut r);
        }
        for a in [&self.server.auth, &self.server.webhook_auth, &self.server.api_auth] {
            add_auth(a.as_ref().and_then(ServerAuth::http).as_ref(), &mut r);
        }
        let resolved = |s: Option<&SecretSource>| s.and_then(|s| s.resolve().ok());
        if let Some(k) = resolved(self.server.link_secret.as_ref()) {
            r.add(secrecy::ExposeSecret::expose_secret(&k));
        }
        if let Some(slack) = &self.notify.slack {
            if let Some(t) = resolved(slack.token.as_ref()) {
                r.add(secrecy::ExposeSecret::expose_secret(&t));
            }
            if let Some(u) = resolved(slack.webhook_url.as_ref()) {
                r.add_url(secrecy::ExposeSecret::expose_secret(&u));
            }
        }
        if let Some(k) = resolved(self.notify.pagerduty.as_ref().map(|p| &p.routing_key)) {
            r.add(secrecy::ExposeSecret::expose_secret(&k));
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
        self.store.validate(&mut problems);
        self.service.validate(&mut problems);
        problems
    }
}

/// Where verdicts are posted. Every destination is optional.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct NotifyConfig {
    pub slack: Option<SlackConfig>,
    pub pagerduty: Option<PagerDutyConfig>,
    pub alertmanager: Option<AlertmanagerConfig>,
    pub webhook: Vec<WebhookConfig>,
    /// Retry of failed deliveries (one place for every destination).
    pub retry: RetryConfig,
    /// Alert groups delivered at once per destination; each group's notices stay in
    /// order. Default 4.
    pub concurrency: usize,
    /// At most one "could not diagnose" notice per destination within this window: the
    /// one sent after it names every job that failed meanwhile (10, and counts the rest),
    /// whatever its alert group. `0s`: only the notices waiting at once are folded.
    /// Default 10m.
    pub could_not_diagnose_every: Millis,
}

impl Default for NotifyConfig {
    fn default() -> Self {
        NotifyConfig {
            slack: None,
            pagerduty: None,
            alertmanager: None,
            webhook: Vec::new(),
            retry: RetryConfig::default(),
            concurrency: 4,
            could_not_diagnose_every: Millis::from_secs(600),
        }
    }
}

impl NotifyConfig {
    fn validate(&self, problems: &mut Vec<String>) {
        if self.concurrency == 0 {
            problems.push("notify.concurrency must be at least 1 (0 would deliver nothing)".into());
        }
        if self.retry.min.as_ms() <= 0 || self.retry.max < self.retry.min {
            problems.push("notify.retry.min must be positive and at most notify.retry.max".into());
        }
        let urls = self
            .slack
            .iter()
            .map(|s| ("notify.slack.api_url", s.api_url.clone()))
            .chain(self.pagerduty.iter().map(|p| ("notify.pagerduty.url", p.url.clone())))
            .chain(self.alertmanager.iter().map(|a| ("notify.alertmanager.url", a.url.clone())))
            .chain(self.webhook.iter().map(|w| ("notify.webhook.url", w.url.clone())));
        for (key, url) in urls {
            // A notification URL may carry a token: refused, never echoed.
            check_backend_url(key, &url, "its `auth`", problems);
        }
        if let Some(s) = &self.slack {
            match s.mode {
                SlackMode::WebApi if s.token.is_none() || s.channel.is_none() => {
                    problems.push("notify.slack: mode web_api needs `token` and `channel`".into())
                }
                SlackMode::IncomingWebhook if s.webhook_url.is_none() => {
                    problems.push("notify.slack: mode incoming_webhook needs `webhook_url`".into())
                }
                _ => {}
            }
        }
        let mut names = std::collections::BTreeSet::new();
        for w in &self.webhook {
            if !names.insert(&w.name) {
                problems.push(format!("notify.webhook: the name `{}` is used twice", w.name));
            }
        }
    }
}

/// Backoff of failed deliveries: `min` doubling to `max`, honouring `Retry-After`, until
/// `give_up_after` since the first attempt.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RetryConfig {
    /// The first wait after a failed delivery, doubled after each failure. Default 1s.
    pub min: Millis,
    /// The longest wait between two attempts (a `Retry-After` may ask more). Default 60s.
    pub max: Millis,
    /// A delivery still failing this long after its first attempt is given up (a dead
    /// letter). Default 1h.
    pub give_up_after: Millis,
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig { min: Millis::from_secs(1), max: Millis::from_secs(60), give_up_after: Millis::from_secs(3600) }
    }
}

/// How culprit posts to Slack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SlackMode {
    /// `chat.postMessage` with a bot token: threads and updates.
    #[default]
    WebApi,
    /// An incoming webhook URL: plain posts, no threads.
    IncomingWebhook,
}

/// Slack.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SlackConfig {
    #[serde(default)]
    pub mode: SlackMode,
    /// Bot token (`xoxb-…`), web_api mode.
    #[serde(default)]
    pub token: Option<SecretSource>,
    /// Channel id or name, web_api mode.
    #[serde(default)]
    pub channel: Option<String>,
    /// Incoming webhook URL (a secret: it holds a token), incoming_webhook mode.
    #[serde(default)]
    pub webhook_url: Option<SecretSource>,
    /// Web API base URL. Default `https://slack.com/api`.
    #[serde(default = "default_slack_api")]
    pub api_url: String,
}

fn default_slack_api() -> String {
    "https://slack.com/api".into()
}

/// PagerDuty Events API v2.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PagerDutyConfig {
    /// The integration's routing key (the same service Alertmanager pages).
    pub routing_key: SecretSource,
    /// Default `https://events.pagerduty.com/v2/enqueue`.
    #[serde(default = "default_pagerduty_url")]
    pub url: String,
    /// Event severity: `critical`, `error`, `warning` or `info`. Default `error`.
    #[serde(default = "default_pagerduty_severity")]
    pub severity: String,
}

fn default_pagerduty_url() -> String {
    "https://events.pagerduty.com/v2/enqueue".into()
}

fn default_pagerduty_severity() -> String {
    "error".into()
}

/// Alertmanager API v2, for culprit's own `FlinkBackpressureCulprit` alert.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AlertmanagerConfig {
    /// Alertmanager base URL (`http://alertmanager:9093`).
    pub url: String,
    /// The alert's `endsAt` is this far after each (re-)post; it is re-posted while the
    /// source alert fires. Default 15m.
    #[serde(default = "default_am_ends_after")]
    pub ends_after: Millis,
    /// Default `FlinkBackpressureCulprit`.
    #[serde(default = "default_am_alertname")]
    pub alertname: String,
    /// Optional authentication (an Alertmanager behind a proxy).
    #[serde(default)]
    pub auth: Option<HttpAuth>,
}

fn default_am_ends_after() -> Millis {
    Millis::from_secs(900)
}

fn default_am_alertname() -> String {
    "FlinkBackpressureCulprit".into()
}

/// A generic webhook receiving the verdict JSON.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookConfig {
    /// A name for metrics and logs.
    pub name: String,
    /// The URL the verdict JSON is posted to (with an `Idempotency-Key` header).
    pub url: String,
    #[serde(default)]
    pub auth: Option<HttpAuth>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_file_documents_exactly_the_defaults() {
        let text = include_str!("../config/culprit.example.toml");
        assert_eq!(Config::from_toml(text, "culprit.example.toml").unwrap(), Config::default());
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
}
