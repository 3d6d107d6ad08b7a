//! `[[notify.discord]]`: one Discord channel webhook (a list: several may be configured).

use serde::{Deserialize, Serialize};

use crate::notify::Destination;
use crate::notify::registry::{DestinationConfig, SecretField, SecretForm};
use crate::settings::SecretSource;

/// A Discord webhook.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiscordConfig {
    /// A name for metrics, logs and routing (the destination is `discord:<name>`).
    pub name: String,
    /// The webhook URL, `https://discord.com/api/webhooks/<id>/<token>` (a secret: it
    /// holds the webhook's token).
    pub webhook_url: SecretSource,
    /// Name shown on the messages instead of the webhook's.
    #[serde(default)]
    pub username: Option<String>,
    /// Post in this thread of the webhook's channel (a forum or text channel thread id).
    #[serde(default)]
    pub thread_id: Option<String>,
}

impl DestinationConfig for DiscordConfig {
    fn label(&self) -> Option<&str> {
        Some(&self.name)
    }

    fn secrets(&self) -> Vec<SecretField<'_>> {
        vec![SecretField { key: "webhook_url".into(), source: &self.webhook_url, form: SecretForm::Url }]
    }

    /// The webhook URL is a secret, checked when it is read.
    fn urls(&self) -> Vec<(&'static str, &str)> {
        Vec::new()
    }

    fn validate(&self, problems: &mut Vec<String>) {
        if self.name.trim().is_empty() {
            problems.push("notify.discord: `name` is empty".into());
        }
        if let Some(t) = &self.thread_id
            && (t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()))
        {
            problems.push(format!("notify.discord ({}): `thread_id` must be a Discord id (digits)", self.name));
        }
        if let Some(u) = &self.username
            && !(1..=80).contains(&u.chars().count())
        {
            problems.push(format!("notify.discord ({}): `username` must be 1 to 80 characters", self.name));
        }
    }

    fn describe(&self) -> String {
        let thread = self.thread_id.as_deref().map(|t| format!(", thread {t}")).unwrap_or_default();
        format!("discord:{} (webhook{thread})", self.name)
    }

    fn build(&self) -> Result<Box<dyn Destination>, String> {
        Ok(Box::new(super::Discord::new(self)?))
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}
