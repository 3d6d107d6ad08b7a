//! `[[notify.grafana]]`: annotations on a Grafana (a list: several may be configured).

use serde::{Deserialize, Serialize};

use crate::notify::Destination;
use crate::notify::registry::{DestinationConfig, SecretField, SecretForm};
use crate::settings::SecretSource;

/// Verdicts as Grafana annotations: a region from the incident's start to its resolution.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrafanaConfig {
    /// A name for metrics and logs (the destination is `grafana:<name>`).
    pub name: String,
    /// Grafana's base URL (`https://grafana.example.com`, or with its sub-path).
    pub url: String,
    /// A service account token (`Authorization: Bearer …`) with `annotations:write`
    /// and `annotations:read` (the Editor role has both).
    pub token: SecretSource,
    /// The dashboard the annotations belong to; without it they are organization
    /// annotations, shown where an annotation query asks for their tags.
    #[serde(default)]
    pub dashboard_uid: Option<String>,
    /// Tags of every annotation, besides `culprit`, the job name and the finding.
    #[serde(default)]
    pub tags: Vec<String>,
}

impl DestinationConfig for GrafanaConfig {
    fn label(&self) -> Option<&str> {
        Some(&self.name)
    }

    fn secrets(&self) -> Vec<SecretField<'_>> {
        vec![SecretField { key: "token".into(), source: &self.token, form: SecretForm::Plain }]
    }

    fn urls(&self) -> Vec<(&'static str, &str)> {
        vec![("notify.grafana.url", &self.url)]
    }

    fn validate(&self, problems: &mut Vec<String>) {
        if self.name.trim().is_empty() {
            problems.push("notify.grafana: `name` is empty".into());
        }
        if self.dashboard_uid.as_deref().is_some_and(|u| u.trim().is_empty()) {
            problems.push(format!("notify.grafana ({}): dashboard_uid is empty; leave it out instead", self.name));
        }
    }

    fn describe(&self) -> String {
        let origin = reqwest::Url::parse(&self.url)
            .map(|u| u.origin().ascii_serialization())
            .unwrap_or_else(|_| "an invalid URL".into());
        let on = match &self.dashboard_uid {
            Some(uid) => format!("dashboard {uid}"),
            None => "organization annotations".into(),
        };
        format!("grafana:{} ({origin}, {on})", self.name)
    }

    fn build(&self) -> Result<Box<dyn Destination>, String> {
        Ok(Box::new(super::Grafana::new(self)?))
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}
