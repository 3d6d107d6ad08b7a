//! `[notify.pagerduty]`: the Events API v2 integration.

use serde::{Deserialize, Serialize};

use crate::notify::Destination;
use crate::notify::registry::{DestinationConfig, SecretField, SecretForm};
use crate::settings::SecretSource;

/// PagerDuty Events API v2.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PagerDutyConfig {
    /// The destination's name in routes, metrics and logs: `pagerduty:<name>`. Needed when
    /// `[[notify.pagerduty]]` is written several times (a service per team); unset:
    /// `pagerduty`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
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

impl PagerDutyConfig {
    /// Its destination name: `pagerduty`, or `pagerduty:<name>`.
    pub fn destination_name(&self) -> String {
        crate::notify::registry::destination_name("pagerduty", self.name.as_deref())
    }
}

impl DestinationConfig for PagerDutyConfig {
    fn label(&self) -> Option<&str> {
        self.name.as_deref()
    }

    fn secrets(&self) -> Vec<SecretField<'_>> {
        vec![SecretField { key: "routing_key".into(), source: &self.routing_key, form: SecretForm::Plain }]
    }

    fn urls(&self) -> Vec<(&'static str, &str)> {
        vec![("notify.pagerduty.url", &self.url)]
    }

    fn validate(&self, problems: &mut Vec<String>) {
        if self.name.as_deref().is_some_and(|n| n.trim().is_empty()) {
            problems.push("notify.pagerduty: a section has an empty name".into());
        }
    }

    fn describe(&self) -> String {
        format!("{} (Events API v2 at {}, severity {})", self.destination_name(), self.url, self.severity)
    }

    fn build(&self) -> Result<Box<dyn Destination>, String> {
        Ok(Box::new(super::PagerDuty::new(self)?))
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}
