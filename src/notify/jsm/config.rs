//! `[[notify.jsm]]`: Jira Service Management Operations, Opsgenie's successor (a list:
//! several may be configured).

use serde::{Deserialize, Serialize};

use crate::notify::Destination;
use crate::notify::opsgenie::config::{default_priority, validate_alert};
use crate::notify::registry::{DestinationConfig, SecretField, SecretForm};
use crate::settings::SecretSource;

/// Jira Service Management Operations REST API (alerts).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JsmConfig {
    /// A name for metrics, logs and routing: the destination is `jsm:<name>`.
    pub name: String,
    /// The site's cloud id (`https://<site>.atlassian.net/_edge/tenant_info` shows it).
    pub cloud_id: String,
    /// The Atlassian account's email address (the user of HTTP Basic authentication).
    pub user: String,
    /// That account's API token (<https://id.atlassian.com/manage-profile/security/api-tokens>),
    /// the password of HTTP Basic authentication.
    pub api_token: SecretSource,
    /// Default `https://api.atlassian.com` (a proxy, or a test's stand-in, instead); the
    /// alerts are under `{url}/jsm/ops/api/{cloud_id}/v1/alerts`.
    #[serde(default = "default_jsm_url")]
    pub url: String,
    /// The priority of an alert culprit opens: `P1` … `P5`. Default `P3`.
    #[serde(default = "default_priority")]
    pub priority: String,
    /// Teams (by name) notified of an alert culprit opens. Default `[]`.
    #[serde(default)]
    pub responders: Vec<String>,
    /// Tags of an alert culprit opens, besides `culprit`, `flink` and the finding.
    #[serde(default)]
    pub tags: Vec<String>,
}

fn default_jsm_url() -> String {
    "https://api.atlassian.com".into()
}

impl DestinationConfig for JsmConfig {
    fn label(&self) -> Option<&str> {
        Some(&self.name)
    }

    fn secrets(&self) -> Vec<SecretField<'_>> {
        vec![SecretField {
            key: "api_token".into(),
            source: &self.api_token,
            form: SecretForm::Basic { username: &self.user },
        }]
    }

    fn urls(&self) -> Vec<(&'static str, &str)> {
        vec![("notify.jsm.url", &self.url)]
    }

    fn validate(&self, problems: &mut Vec<String>) {
        let key = format!("notify.jsm[{}]", self.name);
        if self.name.trim().is_empty() {
            problems.push("notify.jsm: a section has an empty name".into());
        }
        // The cloud id is a path segment: a UUID, letters, digits and `-` only.
        if self.cloud_id.is_empty() || !self.cloud_id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            problems.push(format!("{key}.cloud_id must be the site's cloud id (letters, digits and `-`)"));
        }
        if !self.user.contains('@') {
            problems.push(format!("{key}.user must be the Atlassian account's email address"));
        }
        validate_alert(&key, &self.priority, &self.responders, problems);
    }

    fn describe(&self) -> String {
        format!(
            "jsm:{} (JSM Operations at {}, cloud {}, priority {})",
            self.name, self.url, self.cloud_id, self.priority
        )
    }

    fn build(&self) -> Result<Box<dyn Destination>, String> {
        Ok(Box::new(super::Jsm::new(self)?))
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}
