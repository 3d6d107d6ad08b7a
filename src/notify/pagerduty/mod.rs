//! PagerDuty Events API v2: one `trigger` event per verdict, on the incident the page opened.
//!
//! <https://developer.pagerduty.com/docs/events-api-v2/trigger-events/>
//!
//! The event (rendered by [`crate::render::pagerduty::event`]) carries as `dedup_key` the
//! SHA-256 of the Alertmanager group key, the key Alertmanager's own PagerDuty integration
//! uses: PagerDuty applies it to the open alert of that page instead of opening another.
//! culprit only triggers, only with a verdict, and only while the group fires; resolving is
//! Alertmanager's. "Could not diagnose" is never sent here: a trigger whose `dedup_key`
//! matches no open alert (the page was resolved, or routed to another service) would open
//! an incident, and an incident about culprit's own trouble pages nobody usefully; it goes
//! to Slack, the webhooks and Alertmanager.
//!
//! Answers (<https://developer.pagerduty.com/docs/events-api-v2/overview/>, "Response Codes
//! & Retry Logic"): 2xx (202) is delivered; 400 is final, with PagerDuty's `message` and
//! `errors` in the error; 429 and 5xx are retryable (with `Retry-After`); anything else is
//! final.
//!
//! # Rate limit
//!
//! The Events API takes about [`EVENTS_PER_MINUTE`] events per integration (routing) key,
//! counted over the 60 s before each, and answers 429 beyond them (PagerDuty's developer
//! docs, "Events API Rate Limits":
//! <https://github.com/PagerDuty/developer-docs/blob/main/docs/events-API-v2/05-Rate-Limits.md>).
//! Events of one routing key are sent [`MIN_EVENT_INTERVAL`] apart, whichever destination
//! of this process sends them ([`crate::notify::pace::shared`]) and, on PostgreSQL,
//! whichever replica (each event's slot is reserved in the database,
//! [`crate::notify::pace::across`]).
//!
//! The routing key is a secret: it is never in `Debug`, errors or logs.

mod config;

pub use config::PagerDutyConfig;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;

use crate::model::notice::{Notice, NoticeKind};
use crate::model::secret::Redactor;
use crate::notify::pace::{Pacer, scope_of_secret, shared};
use crate::notify::webhook::{http_client, parse_url, read_answer};
use crate::notify::{Destination, NotifyError, Sent, status_error, transport_error};
use crate::render::pagerduty::{dedup_key, event};

/// Events PagerDuty takes per routing key in any 60 s ("approximately 120 calls/minute per
/// integration key").
/// <https://github.com/PagerDuty/developer-docs/blob/main/docs/events-API-v2/05-Rate-Limits.md>
pub const EVENTS_PER_MINUTE: u32 = 120;

/// Events a minute culprit sends per routing key: 95 % of [`EVENTS_PER_MINUTE`], since
/// PagerDuty counts arrivals, which the network spreads a few ms around culprit's slots
/// (exactly 500 ms apart, three replicas on one database saw 2 of 300 refused).
pub const PACED_EVENTS_PER_MINUTE: u32 = EVENTS_PER_MINUTE * 95 / 100;

/// Least time between two events of one routing key: 60 s / [`PACED_EVENTS_PER_MINUTE`]
/// (114) = 526 ms, so no 60 s holds more than 114 of them.
pub const MIN_EVENT_INTERVAL: Duration = Duration::from_millis(60_000 / PACED_EVENTS_PER_MINUTE as u64);

/// The severities PagerDuty accepts in `payload.severity`.
pub const SEVERITIES: [&str; 4] = ["critical", "error", "warning", "info"];

/// PagerDuty Events API v2. `Debug` shows no secret.
pub struct PagerDuty {
    /// `pagerduty` or `pagerduty:<name>`.
    name: String,
    url: reqwest::Url,
    routing_key: SecretString,
    severity: String,
    client: reqwest::Client,
    /// The routing key's pace ([`MIN_EVENT_INTERVAL`]), shared by every destination with it.
    pacer: Arc<Pacer>,
}

impl fmt::Debug for PagerDuty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PagerDuty")
            .field("url", &self.url.as_str())
            .field("routing_key", &"[REDACTED]")
            .field("severity", &self.severity)
            .finish_non_exhaustive()
    }
}

impl PagerDuty {
    /// The notifier from its configuration; reads the routing key now.
    ///
    /// Errors (never showing the key): the routing key cannot be read or is empty, the
    /// severity is not one of [`SEVERITIES`], the URL is not http(s) or carries
    /// credentials, or the HTTP client cannot be built.
    pub fn new(cfg: &PagerDutyConfig) -> Result<Self, String> {
        let routing_key = cfg.routing_key.resolve().map_err(|e| format!("pagerduty: routing key: {e}"))?;
        if routing_key.expose_secret().trim().is_empty() {
            return Err("pagerduty: the routing key is empty".into());
        }
        if !SEVERITIES.contains(&cfg.severity.as_str()) {
            return Err(format!("pagerduty: severity `{}` is not one of {}", cfg.severity, SEVERITIES.join(", ")));
        }
        let pacer = shared(&scope_of_secret("pagerduty", routing_key.expose_secret().trim()), MIN_EVENT_INTERVAL);
        Ok(PagerDuty {
            pacer,
            name: cfg.destination_name(),
            url: parse_url("pagerduty", &cfg.url)?,
            routing_key,
            severity: cfg.severity.clone(),
            client: http_client("pagerduty")?,
        })
    }

    /// A verdict, while the group fires. Never a resolution, nothing for a group that no
    /// longer fires (culprit must not open or re-open an incident for a page that is
    /// over), and never "could not diagnose" (it must not open or escalate an incident by
    /// itself).
    pub fn wants(&self, notice: &Notice) -> bool {
        notice.firing && notice.kind == NoticeKind::Verdict
    }

    /// Sends the trigger event once.
    ///
    /// `Ok` carries the state `{"dedup_key": "<key>"}` (PagerDuty's answer, else the key
    /// sent). Errors: a notice [`PagerDuty::wants`] refuses, or a verdict notice without a
    /// verdict (final, nothing sent); a non-2xx answer, classified as in the module docs;
    /// a transport failure (retryable). `state` is not used.
    pub async fn send(&self, notice: &Notice, _state: Option<&Value>) -> Result<Sent, NotifyError> {
        if !self.wants(notice) {
            return Err(NotifyError::fatal(format!(
                "pagerduty: not sent: culprit triggers only for verdicts of a firing group (this notice: {:?}, firing: {})",
                notice.kind, notice.firing
            )));
        }
        if notice.kind == NoticeKind::Verdict && notice.verdict.is_none() {
            return Err(NotifyError::fatal("pagerduty: a verdict notice without a verdict"));
        }
        let key = self.routing_key.expose_secret();
        let body = event(notice, key, &self.severity);
        self.pacer.turn().await;
        let response = self
            .client
            .post(self.url.clone())
            .json(&body)
            .send()
            .await
            .map_err(|e| transport_error("pagerduty", &e))?;
        let (status, headers, answer) = read_answer(response).await;
        if (200..300).contains(&status) {
            let dedup = serde_json::from_str::<Value>(&answer)
                .ok()
                .and_then(|a| a.get("dedup_key").and_then(Value::as_str).map(str::to_string))
                .unwrap_or_else(|| dedup_key(&notice.group_key));
            tracing::debug!(destination = "pagerduty", status, dedup_key = %dedup, "pagerduty: event accepted");
            return Ok(Sent { state: Some(serde_json::json!({ "dedup_key": dedup })) });
        }
        let detail = error_detail(&answer);
        let e = status_error("pagerduty", status, &headers, &detail, &Redactor::of(key)).hint(hint(status, &detail));
        tracing::debug!(destination = "pagerduty", status, retryable = e.retryable, error = %e, "pagerduty: event refused");
        Err(e)
    }
}

impl PagerDuty {
    /// A reachability check for `check-config --connect`. PagerDuty's Events API has no
    /// dry run: any valid event with the routing key triggers (or joins) an incident. So an
    /// event without a routing key is posted, which PagerDuty refuses with 400 and which
    /// opens nothing: the endpoint answers; the routing key itself is not verified.
    pub async fn probe(&self) -> Result<String, NotifyError> {
        let response = self
            .client
            .post(self.url.clone())
            .json(&serde_json::json!({}))
            .send()
            .await
            .map_err(|e| transport_error("pagerduty", &e))?;
        let (status, headers, answer) = read_answer(response).await;
        if (200..300).contains(&status) {
            return Ok(format!(
                "{} answers, but accepted an event without a routing key ({status}), which PagerDuty's Events API v2 refuses with 400: a proxy or another service is behind this URL; the routing key is not verified",
                self.url
            ));
        }
        if status == 400 {
            return Ok(format!(
                "{} answers (an event without a routing key was refused with 400, so nothing was opened); PagerDuty has no dry run, so the routing key is not verified",
                self.url
            ));
        }
        let detail = error_detail(&answer);
        Err(status_error("pagerduty", status, &headers, &detail, &Redactor::of(self.routing_key.expose_secret()))
            .hint(hint(status, &detail)))
    }
}

/// What to do about a final answer of the Events API, by its status and what its
/// `message` and `errors` say (<https://developer.pagerduty.com/docs/events-api-v2-overview#response-codes--retry-logic>):
/// a 400 about the routing key names the key's setting (never its value) and where the
/// key is found; a 404 the URL.
fn hint(status: u16, detail: &str) -> Option<String> {
    let detail = detail.to_ascii_lowercase();
    match status {
        400 if detail.contains("routing") && detail.contains("key") => Some(
            "PagerDuty does not know the routing key of notify.pagerduty.routing_key: in PagerDuty open the service, Integrations, its Events API v2 integration (add one if there is none), and configure that integration's Integration Key (32 characters; a REST API key or an Events API v1 service key is not one)".into(),
        ),
        404 => Some(
            "notify.pagerduty.url is not the Events API v2 endpoint: leave it unset (https://events.pagerduty.com/v2/enqueue) or use https://events.eu.pagerduty.com/v2/enqueue for an EU account".into(),
        ),
        _ => crate::notify::status_hint(status, "notify.pagerduty.url", "notify.pagerduty.routing_key"),
    }
}

/// PagerDuty's error answer `{"status", "message", "errors": [..]}` as `message: error; error`,
/// else the answer as it is.
fn error_detail(answer: &str) -> String {
    let Ok(v) = serde_json::from_str::<Value>(answer) else {
        return answer.to_string();
    };
    let message = v.get("message").and_then(Value::as_str).unwrap_or_default();
    let errors: Vec<&str> = v
        .get("errors")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    match (message.is_empty(), errors.is_empty()) {
        (true, true) => answer.to_string(),
        (false, true) => message.to_string(),
        (true, false) => errors.join("; "),
        (false, false) => format!("{message}: {}", errors.join("; ")),
    }
}

impl Destination for PagerDuty {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn wants(&self, notice: &Notice) -> bool {
        PagerDuty::wants(self, notice)
    }
    fn send<'a>(&'a self, notice: &'a Notice, state: Option<&'a Value>) -> BoxFuture<'a, Result<Sent, NotifyError>> {
        Box::pin(PagerDuty::send(self, notice, state))
    }
    fn probe(&self) -> BoxFuture<'_, Result<String, NotifyError>> {
        Box::pin(PagerDuty::probe(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pagerduty_errors_read_message_and_errors() {
        let a = r#"{"status":"invalid event","message":"Event object is invalid","errors":["Length of 'routing_key' is incorrect (should be 32 characters)"]}"#;
        assert_eq!(
            error_detail(a),
            "Event object is invalid: Length of 'routing_key' is incorrect (should be 32 characters)"
        );
        assert_eq!(error_detail("<html>bad gateway</html>"), "<html>bad gateway</html>");
    }
}
