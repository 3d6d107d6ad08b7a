//! `[[notify.opsgenie]]`: one Opsgenie API integration (a list: several may be configured).

use serde::{Deserialize, Serialize};

use crate::notify::Destination;
use crate::notify::registry::{DestinationConfig, SecretField, SecretForm};
use crate::render::opsgenie::PRIORITIES;
use crate::settings::SecretSource;

/// Opsgenie Alert API v2.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OpsgenieConfig {
    /// A name for metrics, logs and routing: the destination is `opsgenie:<name>`.
    pub name: String,
    /// The API key of an Opsgenie API integration, sent as `Authorization: GenieKey …`
    /// (the integration Alertmanager pages through, so that the verdict lands on its alert).
    pub api_key: SecretSource,
    /// The account's region: `us` (api.opsgenie.com) or `eu` (api.eu.opsgenie.com).
    /// Default `us`.
    #[serde(default)]
    pub region: OpsgenieRegion,
    /// The API's base URL instead of the region's (a proxy, or a test's stand-in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The priority of an alert culprit opens: `P1` … `P5`. Default `P3`.
    #[serde(default = "default_priority")]
    pub priority: String,
    /// Teams (by name) notified of an alert culprit opens. Default `[]`: the
    /// integration's own routing.
    #[serde(default)]
    pub responders: Vec<String>,
    /// Tags of an alert culprit opens, besides `culprit`, `flink` and the finding.
    #[serde(default)]
    pub tags: Vec<String>,
}

/// Where an Opsgenie account lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OpsgenieRegion {
    /// `https://api.opsgenie.com`.
    #[default]
    Us,
    /// `https://api.eu.opsgenie.com`: "If using the EU instance of Opsgenie, the URL needs
    /// to be https://api.eu.opsgenie.com" (<https://docs.opsgenie.com/docs/alert-api>).
    Eu,
}

impl OpsgenieRegion {
    pub fn url(self) -> &'static str {
        match self {
            OpsgenieRegion::Us => "https://api.opsgenie.com",
            OpsgenieRegion::Eu => "https://api.eu.opsgenie.com",
        }
    }
}

pub(crate) fn default_priority() -> String {
    "P3".into()
}

impl OpsgenieConfig {
    /// The API's base URL: `url`, else the region's.
    pub fn base_url(&self) -> &str {
        self.url.as_deref().unwrap_or(self.region.url())
    }
}

/// The problems of `priority` and `responders`, named under `key`.
pub(crate) fn validate_alert(key: &str, priority: &str, responders: &[String], problems: &mut Vec<String>) {
    if !PRIORITIES.contains(&priority) {
        problems.push(format!("{key}.priority must be one of {} (not `{priority}`)", PRIORITIES.join(", ")));
    }
    if responders.iter().any(|r| r.trim().is_empty()) {
        problems.push(format!("{key}.responders: a team name is empty"));
    }
}

impl DestinationConfig for OpsgenieConfig {
    fn label(&self) -> Option<&str> {
        Some(&self.name)
    }

    fn secrets(&self) -> Vec<SecretField<'_>> {
        vec![SecretField { key: "api_key".into(), source: &self.api_key, form: SecretForm::Plain }]
    }

    fn urls(&self) -> Vec<(&'static str, &str)> {
        vec![("notify.opsgenie.url", self.base_url())]
    }

    fn validate(&self, problems: &mut Vec<String>) {
        if self.name.trim().is_empty() {
            problems.push("notify.opsgenie: a section has an empty name".into());
        }
        validate_alert(&format!("notify.opsgenie[{}]", self.name), &self.priority, &self.responders, problems);
    }

    fn describe(&self) -> String {
        format!("opsgenie:{} (Alert API v2 at {}, priority {})", self.name, self.base_url(), self.priority)
    }

    fn build(&self) -> Result<Box<dyn Destination>, String> {
        Ok(Box::new(super::Opsgenie::new(self)?))
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}
