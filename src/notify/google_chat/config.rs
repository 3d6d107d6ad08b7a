//! `[[notify.google_chat]]`: a Google Chat space's incoming webhook, any number, each with
//! its `name`.

use serde::{Deserialize, Serialize};

use crate::notify::Destination;
use crate::notify::registry::{DestinationConfig, SecretField, SecretForm};
use crate::settings::SecretSource;

/// One Google Chat space posted to through its incoming webhook.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GoogleChatConfig {
    /// The destination's name: `google_chat:<name>` in metrics, logs and routing.
    pub name: String,
    /// The webhook's whole URL,
    /// `https://chat.googleapis.com/v1/spaces/…/messages?key=…&token=…` (a secret: its
    /// `key` and `token` are the credential).
    pub webhook_url: SecretSource,
}

impl DestinationConfig for GoogleChatConfig {
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
            problems.push("notify.google_chat: `name` is empty".into());
        }
    }

    fn describe(&self) -> String {
        format!("google_chat:{} (space incoming webhook)", self.name)
    }

    fn build(&self) -> Result<Box<dyn Destination>, String> {
        Ok(Box::new(super::GoogleChat::new(self)?))
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}
