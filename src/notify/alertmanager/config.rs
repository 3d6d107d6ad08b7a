//! `[notify.alertmanager]`: culprit's own alert, posted to Alertmanager's API v2.

use serde::{Deserialize, Serialize};

use crate::notify::Destination;
use crate::notify::registry::{DestinationConfig, SecretField, auth_secrets};
use crate::settings::{HttpAuth, Millis};

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

impl DestinationConfig for AlertmanagerConfig {
    fn secrets(&self) -> Vec<SecretField<'_>> {
        auth_secrets("auth", self.auth.as_ref())
    }

    fn urls(&self) -> Vec<(&'static str, &str)> {
        vec![("notify.alertmanager.url", &self.url)]
    }

    fn describe(&self) -> String {
        format!("alertmanager ({}, alert {})", self.url, self.alertname)
    }

    fn build(&self) -> Result<Box<dyn Destination>, String> {
        Ok(Box::new(super::Alertmanager::new(self)?))
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}
