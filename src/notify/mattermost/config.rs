//! `[[notify.mattermost]]`: one Mattermost incoming webhook (a list: several may be
//! configured).

use serde::{Deserialize, Serialize};

use crate::notify::Destination;
use crate::notify::registry::{DestinationConfig, SecretField, SecretForm};
use crate::settings::SecretSource;

/// A Mattermost incoming webhook.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MattermostConfig {
    /// A name for metrics, logs and routing (the destination is `mattermost:<name>`).
    pub name: String,
    /// The incoming webhook URL, `https://<server>/hooks/<key>` (a secret: its key is the
    /// credential).
    pub webhook_url: SecretSource,
    /// Channel to post in instead of the webhook's own (its name, e.g. `town-square`), when
    /// the webhook allows it.
    #[serde(default)]
    pub channel: Option<String>,
    /// Name shown on the posts instead of the webhook's, when the server allows it.
    #[serde(default)]
    pub username: Option<String>,
    /// Picture shown on the posts instead of the webhook's, when the server allows it.
    #[serde(default)]
    pub icon_url: Option<String>,
}

impl DestinationConfig for MattermostConfig {
    fn label(&self) -> Option<&str> {
        Some(&self.name)
    }

    fn secrets(&self) -> Vec<SecretField<'_>> {
        vec![SecretField { key: "webhook_url".into(), source: &self.webhook_url, form: SecretForm::Url }]
    }

    /// The webhook URL is a secret, checked when it is read; `icon_url` is shown, not
    /// posted to.
    fn urls(&self) -> Vec<(&'static str, &str)> {
        Vec::new()
    }

    fn validate(&self, problems: &mut Vec<String>) {
        if self.name.trim().is_empty() {
            problems.push("notify.mattermost: `name` is empty".into());
        }
        if let Some(u) = &self.icon_url
            && !(u.starts_with("https://") || u.starts_with("http://"))
        {
            problems.push(format!("notify.mattermost ({}): `icon_url` must be an http(s) URL", self.name));
        }
    }

    fn describe(&self) -> String {
        let channel = self.channel.as_deref().map(|c| format!(", channel {c}")).unwrap_or_default();
        format!("mattermost:{} (incoming webhook{channel})", self.name)
    }

    fn build(&self) -> Result<Box<dyn Destination>, String> {
        Ok(Box::new(super::Mattermost::new(self)?))
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}
