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
mod incidents;
mod kafka;
mod load;
mod prometheus;
pub mod reference;
mod server;
mod service;
mod store;

pub use diagnosis::{DiagnosisConfig, OperatorKind, Thresholds};
pub use duration::{MAX_WINDOW, MIN_WINDOW, parse_time, parse_window};
pub use flink::{CLUSTER_CHOICE, FLINK_MAX_CONCURRENCY, FlinkCluster, FlinkConfig};
pub use incidents::IncidentsConfig;
pub use kafka::{BrokerDefaults, KafkaConfig, KafkaJob, RetentionMs};
pub use load::ConfigError;
pub use prometheus::{
    PROMETHEUS_MAX_ANSWER_BYTES, PROMETHEUS_MAX_ANSWER_BYTES_IN_FLIGHT, PROMETHEUS_MAX_CONCURRENCY, PrometheusConfig,
};
pub use server::{ServerAuth, ServerConfig};
pub use service::{SHIPPED_ALERTNAMES, ServiceConfig};
pub use store::{StoreConfig, Synchronous};

/// The vocabulary settings are written in (durations, secret references, HTTP
/// authentication, the backend URL check), below both this module and `crate::notify`.
pub use crate::settings::{HttpAuth, MAX_DURATION_DAYS, Millis, SecretSource, check_backend_url, secret_file};

/// Each destination's section lives with its destination (`crate::notify::registry`).
pub use crate::notify::alertmanager::AlertmanagerConfig;
pub use crate::notify::pagerduty::PagerDutyConfig;
use crate::notify::registry::SecretForm;
pub use crate::notify::slack::{SlackConfig, SlackMode};
pub use crate::notify::webhook::WebhookConfig;
pub use crate::notify::{NotifyConfig, RetryConfig};

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
    /// One message for a shared cause when many jobs go red together.
    pub incidents: IncidentsConfig,
    /// Which destinations a job's notices go to, by its alerts' labels: a tree like
    /// Alertmanager's. Unset: every destination gets every notice it takes.
    pub route: crate::notify::route::RouteConfig,
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
        self.route.validate(&crate::notify::registry::names(&self.notify), &mut problems);
        self.store.validate(&mut problems);
        self.service.validate(&mut problems);
        self.incidents.validate(&mut problems);
        problems
    }
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
