//! Notifiers: one module per destination, all of the same shape.
//!
//! A notifier renders a [`Notice`] with the pure renderers in [`crate::render`], sends it
//! once, and says whether a failure is worth retrying ([`NotifyError::retryable`], with the
//! destination's `Retry-After` when it gave one). Retrying, backoff and ordering live in one
//! place, the delivery loop of [`crate::service`]. Vendor limits are named constants with
//! the documentation link, in each module.

pub mod alertmanager;
pub mod pagerduty;
pub mod slack;
pub mod webhook;

use std::time::Duration;

use crate::model::notice::Notice;
use crate::model::secret::Redactor;

/// A delivery that succeeded, with the destination's per-group state to keep (e.g. the
/// Slack message to thread under and update).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Sent {
    pub state: Option<serde_json::Value>,
}

/// A failed delivery. The message names the destination and cause, never a secret.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct NotifyError {
    pub message: String,
    /// Whether trying again may succeed (rate limits, 5xx, network).
    pub retryable: bool,
    /// The destination's own `Retry-After`, when it gave one.
    pub retry_after: Option<Duration>,
}

impl NotifyError {
    pub fn fatal(message: impl Into<String>) -> Self {
        NotifyError { message: message.into(), retryable: false, retry_after: None }
    }

    pub fn retry(message: impl Into<String>, retry_after: Option<Duration>) -> Self {
        NotifyError { message: message.into(), retryable: true, retry_after }
    }
}

/// Whether an HTTP status from a destination is worth retrying: 408, 429 and 5xx.
pub fn retryable_status(status: u16) -> bool {
    status == 408 || status == 429 || (500..600).contains(&status)
}

/// `Retry-After` as seconds (`120`) or an HTTP date, relative to `now`.
pub fn retry_after(headers: &reqwest::header::HeaderMap, now: jiff::Timestamp) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let when = jiff::fmt::rfc2822::parse(value).ok()?.timestamp();
    let wait = when.as_millisecond() - now.as_millisecond();
    Some(Duration::from_millis(wait.max(0) as u64))
}

/// Characters of a destination's answer quoted in an error (after redaction).
pub const DETAIL_CHARS: usize = 200;

/// Classifies a non-2xx answer: retryable for 408/429/5xx (with `Retry-After`), final
/// otherwise. `what` names the destination; `detail` (the answer, or what it says) is
/// quoted with every form of the destination's secrets removed, then cut to
/// [`DETAIL_CHARS`] (in that order, so a secret across the cut cannot leak in part).
pub fn status_error(
    what: &str,
    status: u16,
    headers: &reqwest::header::HeaderMap,
    detail: &str,
    redactor: &Redactor,
) -> NotifyError {
    let detail = redactor.redact_cut(detail.trim(), DETAIL_CHARS);
    let message = format!("{what}: HTTP {status}: {}", detail.trim());
    if retryable_status(status) {
        NotifyError::retry(message, retry_after(headers, jiff::Timestamp::now()))
    } else {
        NotifyError::fatal(message)
    }
}

/// A transport failure (connect, timeout): retryable. The URL is left out (it may hold
/// a token, as Slack incoming webhooks do).
pub fn transport_error(what: &str, e: &reqwest::Error) -> NotifyError {
    let cause = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "cannot connect"
    } else {
        "request failed"
    };
    NotifyError::retry(format!("{what}: {cause}"), None)
}

/// A configured destination.
pub enum Notifier {
    Slack(slack::Slack),
    PagerDuty(pagerduty::PagerDuty),
    Alertmanager(alertmanager::Alertmanager),
    Webhook(webhook::Webhook),
}

impl Notifier {
    /// Builds every configured destination; secrets are resolved now.
    pub fn from_config(cfg: &crate::config::NotifyConfig) -> Result<Vec<Notifier>, String> {
        let mut out = Vec::new();
        if let Some(c) = &cfg.slack {
            out.push(Notifier::Slack(slack::Slack::new(c)?));
        }
        if let Some(c) = &cfg.pagerduty {
            out.push(Notifier::PagerDuty(pagerduty::PagerDuty::new(c)?));
        }
        if let Some(c) = &cfg.alertmanager {
            out.push(Notifier::Alertmanager(alertmanager::Alertmanager::new(c)?));
        }
        for c in &cfg.webhook {
            out.push(Notifier::Webhook(webhook::Webhook::new(c)?));
        }
        Ok(out)
    }

    /// The destination's name in metrics, logs and the outbox: `slack`, `pagerduty`,
    /// `alertmanager`, `webhook:<name>`.
    pub fn name(&self) -> String {
        match self {
            Notifier::Slack(_) => "slack".into(),
            Notifier::PagerDuty(_) => "pagerduty".into(),
            Notifier::Alertmanager(_) => "alertmanager".into(),
            Notifier::Webhook(w) => format!("webhook:{}", w.name()),
        }
    }

    /// Whether this destination wants the notice at all (PagerDuty only while the group
    /// fires, for instance).
    pub fn wants(&self, notice: &Notice) -> bool {
        match self {
            Notifier::Slack(n) => n.wants(notice),
            Notifier::PagerDuty(n) => n.wants(notice),
            Notifier::Alertmanager(n) => n.wants(notice),
            Notifier::Webhook(n) => n.wants(notice),
        }
    }

    /// Sends once. `state` is what the last successful delivery for this group returned.
    pub async fn send(&self, notice: &Notice, state: Option<&serde_json::Value>) -> Result<Sent, NotifyError> {
        match self {
            Notifier::Slack(n) => n.send(notice, state).await,
            Notifier::PagerDuty(n) => n.send(notice, state).await,
            Notifier::Alertmanager(n) => n.send(notice, state).await,
            Notifier::Webhook(n) => n.send(notice, state).await,
        }
    }

    /// After a crash between sending and recording it: asks the destination whether the
    /// notice arrived, when it can tell (Slack's message metadata). `Ok(None)`: unknown or
    /// not there; the notice is sent again, which is safe where the destination
    /// deduplicates (PagerDuty's `dedup_key`, Alertmanager's label identity, the webhook's
    /// `Idempotency-Key`).
    pub async fn already_sent(
        &self,
        notice: &Notice,
        state: Option<&serde_json::Value>,
    ) -> Result<Option<Sent>, NotifyError> {
        match self {
            Notifier::Slack(n) => n.already_sent(notice, state).await,
            _ => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        let now: jiff::Timestamp = "2026-11-29T10:00:00Z".parse().unwrap();
        let mut h = reqwest::header::HeaderMap::new();
        h.insert(reqwest::header::RETRY_AFTER, "3".parse().unwrap());
        assert_eq!(retry_after(&h, now), Some(Duration::from_secs(3)));
        h.insert(reqwest::header::RETRY_AFTER, "Sun, 29 Nov 2026 10:00:07 GMT".parse().unwrap());
        assert_eq!(retry_after(&h, now), Some(Duration::from_secs(7)));
    }

    #[test]
    fn statuses_408_429_and_5xx_are_retryable_and_secrets_are_removed() {
        let h = reqwest::header::HeaderMap::new();
        let none = Redactor::new();
        assert!(status_error("x", 429, &h, "", &none).retryable);
        assert!(status_error("x", 503, &h, "", &none).retryable);
        let e = status_error("pagerduty", 400, &h, "bad routing key R0UT1NG", &Redactor::of("R0UT1NG"));
        assert!(!e.retryable);
        assert_eq!(e.message, "pagerduty: HTTP 400: bad routing key [REDACTED]");
        // A secret across the 200-character cut is still removed whole.
        let body = format!("{}SECRETVALUE", "x".repeat(195));
        let e = status_error("x", 400, &h, &body, &Redactor::of("SECRETVALUE"));
        assert!(!e.message.contains("SECR"), "{}", e.message);
    }
}
