//! `[[notify.webhook]]`: one generic webhook (a list: several may be configured).

use serde::{Deserialize, Serialize};

use crate::notify::Destination;
use crate::notify::registry::{DestinationConfig, SecretField, auth_secrets};
use crate::settings::HttpAuth;

/// A generic webhook receiving the verdict JSON.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookConfig {
    /// A name for metrics and logs.
    pub name: String,
    /// Where the JSON is posted: an http(s) URL without credentials or a query string.
    pub url: String,
    /// Optional authentication (`Authorization: Bearer …` or `Basic …`).
    #[serde(default)]
    pub auth: Option<HttpAuth>,
}

impl DestinationConfig for WebhookConfig {
    fn label(&self) -> Option<&str> {
        Some(&self.name)
    }

    fn secrets(&self) -> Vec<SecretField<'_>> {
        auth_secrets("auth", self.auth.as_ref())
    }

    fn urls(&self) -> Vec<(&'static str, &str)> {
        vec![("notify.webhook.url", &self.url)]
    }

    /// Only the URL's scheme, host and port: a path may hold a token.
    fn describe(&self) -> String {
        let origin = reqwest::Url::parse(&self.url)
            .map(|u| u.origin().ascii_serialization())
            .unwrap_or_else(|_| "an invalid URL".into());
        format!("webhook:{} ({origin})", self.name)
    }

    fn build(&self) -> Result<Box<dyn Destination>, String> {
        Ok(Box::new(super::Webhook::new(self)?))
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}
