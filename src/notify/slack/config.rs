//! `[notify.slack]`: the Web API with a bot token, or an incoming webhook.

use serde::{Deserialize, Serialize};

use crate::notify::Destination;
use crate::notify::registry::{DestinationConfig, SecretField, SecretForm};
use crate::settings::SecretSource;

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

/// How a verdict's picture (the job graph with the culprit marked and the busy /
/// backpressured strip, `GET /verdicts/{id}.png`) goes to Slack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SlackImage {
    /// web_api mode: uploaded into the verdict's thread (`files.getUploadURLExternal`, the
    /// bytes, `files.completeUploadExternal`; the bot needs the `files:write` scope). No
    /// public URL is needed. A failed upload is logged and never holds up or repeats the
    /// verdict. incoming_webhook mode cannot upload: no picture.
    #[default]
    Upload,
    /// An image block in the message, by its signed HTTPS link: only when Slack can fetch
    /// `server.external_url` (public HTTPS) and `server.link_secret` is set. If Slack
    /// cannot fetch it, it refuses the blocks and the message goes as its text alone.
    Link,
    /// No picture.
    Off,
}

/// Slack.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SlackConfig {
    /// The destination's name in routes, metrics and logs: `slack:<name>`. Needed when
    /// `[[notify.slack]]` is written several times (a channel per team); unset: `slack`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `web_api` (default) or `incoming_webhook`.
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
    /// The verdict's picture (`GET /verdicts/{id}.png`): `upload` (default: shared in the
    /// verdict's thread, web_api mode, with the `files:write` scope; none in
    /// incoming_webhook mode), `link` (an image block by its signed HTTPS link: only when
    /// Slack can fetch `server.external_url`) or `off`. A failed upload is logged and never
    /// fails or repeats the verdict.
    #[serde(default)]
    pub image: SlackImage,
}

fn default_slack_api() -> String {
    "https://slack.com/api".into()
}

impl SlackConfig {
    /// Its destination name: `slack`, or `slack:<name>`.
    pub fn destination_name(&self) -> String {
        crate::notify::registry::destination_name("slack", self.name.as_deref())
    }
}

impl DestinationConfig for SlackConfig {
    fn label(&self) -> Option<&str> {
        self.name.as_deref()
    }

    fn secrets(&self) -> Vec<SecretField<'_>> {
        let token = self.token.iter().map(|t| SecretField { key: "token".into(), source: t, form: SecretForm::Plain });
        let url = self.webhook_url.iter().map(|u| SecretField {
            key: "webhook_url".into(),
            source: u,
            form: SecretForm::Url,
        });
        token.chain(url).collect()
    }

    fn urls(&self) -> Vec<(&'static str, &str)> {
        vec![("notify.slack.api_url", &self.api_url)]
    }

    fn validate(&self, problems: &mut Vec<String>) {
        if self.name.as_deref().is_some_and(|n| n.trim().is_empty()) {
            problems.push("notify.slack: a section has an empty name".into());
        }
        match self.mode {
            SlackMode::WebApi if self.token.is_none() || self.channel.is_none() => {
                problems.push("notify.slack: mode web_api needs `token` and `channel`".into())
            }
            SlackMode::IncomingWebhook if self.webhook_url.is_none() => {
                problems.push("notify.slack: mode incoming_webhook needs `webhook_url`".into())
            }
            _ => {}
        }
    }

    fn describe(&self) -> String {
        match self.mode {
            SlackMode::WebApi => format!(
                "{} (Web API at {}, channel {})",
                self.destination_name(),
                self.api_url,
                self.channel.as_deref().unwrap_or("?")
            ),
            SlackMode::IncomingWebhook => format!("{} (incoming webhook)", self.destination_name()),
        }
    }

    fn build(&self) -> Result<Box<dyn Destination>, String> {
        Ok(Box::new(super::Slack::new(self)?))
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}
