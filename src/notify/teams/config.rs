//! `[[notify.teams]]`: a Microsoft Teams channel through a Workflows (Power Automate)
//! webhook, any number, each with its `name`.

use serde::{Deserialize, Serialize};

use crate::notify::Destination;
use crate::notify::registry::{DestinationConfig, SecretField, SecretForm};
use crate::settings::SecretSource;

/// One Teams channel (or chat) a Workflows flow posts to.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TeamsConfig {
    /// The destination's name: `teams:<name>` in metrics, logs and routing.
    pub name: String,
    /// The HTTP POST URL of the flow's "When a Teams webhook request is received" trigger
    /// (a secret: its `sig` parameter is the credential).
    pub webhook_url: SecretSource,
}

impl DestinationConfig for TeamsConfig {
    fn label(&self) -> Option<&str> {
        Some(&self.name)
    }

    fn secrets(&self) -> Vec<SecretField<'_>> {
        vec![SecretField { key: "webhook_url".into(), source: &self.webhook_url, form: SecretForm::Url }]
    }

    fn urls(&self) -> Vec<(&'static str, &str)> {
        // The only URL is the secret one, checked when it is resolved (`build`).
        Vec::new()
    }

    fn validate(&self, problems: &mut Vec<String>) {
        if self.name.trim().is_empty() {
            problems.push("notify.teams: `name` is empty".into());
        }
    }

    fn describe(&self) -> String {
        format!("teams:{} (Workflows webhook)", self.name)
    }

    fn build(&self) -> Result<Box<dyn Destination>, String> {
        Ok(Box::new(super::Teams::new(self)?))
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}
