//! Notifiers: one unit per destination, `notify/<name>/`, all of the same shape, listed
//! once in [`registry`] (whose docs say what adding a destination touches).
//!
//! A notifier renders a [`Notice`] with the pure renderers in [`crate::render`], sends it
//! once, and says whether a failure is worth retrying ([`NotifyError::retryable`], with the
//! destination's `Retry-After` when it gave one). Retrying, backoff and ordering live in one
//! place, the delivery loop of [`crate::service`]. Vendor limits are named constants with
//! the documentation link, in each module; a documented rate limit is kept before sending
//! ([`pace`]), so that 429 is the exception.

pub mod alertmanager;
pub mod digest;
pub mod discord;
pub mod email;
pub mod fence;
pub mod google_chat;
pub mod grafana;
pub mod jsm;
pub mod mattermost;
pub mod opsgenie;
pub mod pace;
pub mod pagerduty;
pub mod registry;
pub mod route;
pub mod sections;
pub mod slack;
pub mod teams;
pub mod webhook;

pub use registry::{DestinationConfig, NotifyConfig, RetryConfig};

use std::time::Duration;

use futures::future::BoxFuture;

use crate::model::notice::Notice;
use crate::model::secret::Redactor;

/// A delivery that succeeded, with the destination's per-group state to keep (e.g. the
/// Slack message to thread under and update).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Sent {
    pub state: Option<serde_json::Value>,
}

/// Why a delivery failed, in a few words fit for a metric label and a log field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureReason {
    /// HTTP 429, Slack's `ratelimited`.
    RateLimited,
    /// 5xx, or the destination's own "internal error".
    ServerError,
    /// No answer in time (the request may have arrived).
    Timeout,
    /// The connection could not be made (nothing was sent).
    Connect,
    /// The connection broke mid-request (the request may have arrived).
    Transport,
    /// An answer that cannot be read (not JSON where JSON belongs).
    BadAnswer,
    /// The destination refused the notice (4xx, a final API error): retrying cannot help.
    Refused,
    /// The notice's message arrived but a part sent after it (a reply in its thread) failed
    /// in a way worth retrying: the next attempt asks first and sends only what is missing.
    PartlyDelivered,
    /// Not a failure: the destination takes the notice later, at its `retry_after` (an
    /// incident's digest gathering the jobs of the next minute, [`digest`]).
    Deferred,
}

impl FailureReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureReason::RateLimited => "rate_limited",
            FailureReason::ServerError => "server_error",
            FailureReason::Timeout => "timeout",
            FailureReason::Connect => "connect",
            FailureReason::Transport => "transport",
            FailureReason::BadAnswer => "bad_answer",
            FailureReason::Refused => "refused",
            FailureReason::PartlyDelivered => "partly_delivered",
            FailureReason::Deferred => "deferred",
        }
    }

    /// Whether the failed request may nevertheless have been delivered: the next attempt
    /// first asks the destination, where it can tell.
    pub fn maybe_delivered(self) -> bool {
        matches!(
            self,
            FailureReason::Timeout
                | FailureReason::Transport
                | FailureReason::BadAnswer
                | FailureReason::PartlyDelivered
        )
    }
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
    /// Why, for logs and `culprit_notification_failures_total{reason}`.
    pub reason: FailureReason,
    /// What to do about a final error, chosen by the notifier's classification (the
    /// vendor's error code or status): also at the end of `message` ([`Self::hint`]), so
    /// that it reaches every place the error does (logs, dead letters, `check-config
    /// --connect`). Names configuration keys, never a secret.
    pub hint: Option<String>,
}

impl NotifyError {
    /// Not a failure: the notice is to be given again after `after` ([`FailureReason::Deferred`]).
    pub fn later(message: impl Into<String>, after: Duration) -> Self {
        NotifyError {
            message: message.into(),
            retryable: true,
            retry_after: Some(after),
            reason: FailureReason::Deferred,
            hint: None,
        }
    }

    /// A failure retrying cannot fix (reason `refused` unless set with [`Self::because`]).
    pub fn fatal(message: impl Into<String>) -> Self {
        NotifyError {
            message: message.into(),
            retryable: false,
            retry_after: None,
            reason: FailureReason::Refused,
            hint: None,
        }
    }

    /// A failure worth retrying (reason `server_error` unless set with [`Self::because`]).
    pub fn retry(message: impl Into<String>, retry_after: Option<Duration>) -> Self {
        NotifyError {
            message: message.into(),
            retryable: true,
            retry_after,
            reason: FailureReason::ServerError,
            hint: None,
        }
    }

    /// The same failure with another reason.
    pub fn because(mut self, reason: FailureReason) -> Self {
        self.reason = reason;
        self
    }

    /// The same failure with what to do about it: kept in [`Self::hint`] and added to the
    /// message (`…: is_archived. To fix: unarchive …`). `None` changes nothing.
    pub fn hint(mut self, hint: Option<String>) -> Self {
        if let Some(h) = hint.filter(|h| !h.is_empty()) {
            self.message = format!("{}. To fix: {h}", self.message);
            self.hint = Some(h);
        }
        self
    }
}

/// What a final HTTP status of an endpoint culprit posts to usually means, and what to
/// check, for destinations without codes of their own (the webhook, Alertmanager) and for
/// the statuses a vendor's error body does not name. `url_key` and `auth_key` are the
/// configuration keys of the URL and the credentials.
pub fn status_hint(status: u16, url_key: &str, auth_key: &str) -> Option<String> {
    match status {
        401 => Some(format!("the endpoint wants credentials: set or correct {auth_key}")),
        403 => Some(format!(
            "the endpoint refused these credentials or this client: check {auth_key} and what the receiver (or a proxy in front of it) allows"
        )),
        404 | 410 => Some(format!("nothing takes posts at {url_key}: check its host and path")),
        405 => Some(format!("{url_key} does not take POST: it is probably not the receiver's endpoint")),
        413 => Some(format!("the receiver at {url_key} takes smaller bodies: raise its limit")),
        _ => None,
    }
}

/// Which statuses a destination retries: the one table every backend and destination
/// shares ([`crate::retry_status`]).
pub use crate::retry_status::{FINAL_5XX, retryable_status};

/// The reason label of a non-2xx status.
fn status_reason(status: u16) -> FailureReason {
    match status {
        429 => FailureReason::RateLimited,
        408 => FailureReason::Timeout,
        s if retryable_status(s) => FailureReason::ServerError,
        _ => FailureReason::Refused,
    }
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

/// Characters of a destination's answer logged (after redaction).
pub const DETAIL_CHARS: usize = 200;

/// Classifies a non-2xx answer: retryable for 408/429/5xx (with `Retry-After`), final
/// otherwise. `what` names the destination. The error says the status as HTTP names it;
/// `detail` (the answer, or what it says) is logged with every form of the destination's
/// secrets removed, then cut to [`DETAIL_CHARS`] (in that order, so a secret across the
/// cut cannot leak in part), and never put in the error: errors are stored and served by
/// the API (dead letters), and a destination may answer anything.
pub fn status_error(
    what: &str,
    status: u16,
    headers: &reqwest::header::HeaderMap,
    detail: &str,
    redactor: &Redactor,
) -> NotifyError {
    let detail = redactor.redact_cut(detail.trim(), DETAIL_CHARS);
    tracing::warn!(destination = %what, status, detail = %detail.trim(), "the destination answered an error");
    let name = reqwest::StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason());
    let message = format!("{what}: HTTP {}", crate::model::foreign::status_words(status, name));
    let reason = status_reason(status);
    if retryable_status(status) {
        NotifyError::retry(message, retry_after(headers, jiff::Timestamp::now())).because(reason)
    } else {
        NotifyError::fatal(message).because(reason)
    }
}

/// A transport failure (connect, timeout, a connection that broke): retryable, with its
/// cause — the chain of underlying errors, e.g. `cannot connect: client error (Connect):
/// tcp connect error: Connection refused (os error 111)` — but never the URL (it may
/// hold a token, as Slack incoming webhooks do): reqwest's own message names it, its
/// sources do not, and any trace of the URL left in them is removed.
pub fn transport_error(what: &str, e: &reqwest::Error) -> NotifyError {
    let (kind, reason) = if e.is_timeout() {
        ("timed out", FailureReason::Timeout)
    } else if e.is_connect() {
        ("cannot connect", FailureReason::Connect)
    } else if e.is_decode() || e.is_body() {
        ("cannot read the answer", FailureReason::Transport)
    } else {
        ("request failed", FailureReason::Transport)
    };
    let mut causes: Vec<String> = Vec::new();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let text = s.to_string();
        // Wrappers often repeat their source's text; keep each piece once.
        if !causes.last().is_some_and(|last| last.contains(&text)) {
            causes.push(text);
        }
        source = s.source();
    }
    let mut cause = causes.join(": ");
    if let Some(url) = e.url() {
        let whole = url.as_str();
        let path = &whole[whole.find(url.path()).unwrap_or(whole.len())..];
        for secretish in [whole, path] {
            if secretish.len() > 1 {
                cause = cause.replace(secretish, "[URL]");
            }
        }
    }
    let cause: String = cause.chars().take(300).collect();
    let message = if cause.is_empty() { format!("{what}: {kind}") } else { format!("{what}: {kind}: {cause}") };
    NotifyError::retry(message, None).because(reason)
}

/// One destination as the delivery loop sees it: what it wants, sending once, reaching it
/// for `check-config --connect`, and asking whether a notice arrived. Each destination's
/// sender implements it (`src/notify/<name>/mod.rs`); [`Notifier`] holds one. Tests give
/// their own to check retries, ordering and `Retry-After` without servers.
pub trait Destination: Send + Sync {
    /// The name in metrics, logs and the outbox: `slack`, `pagerduty`, `alertmanager`,
    /// `webhook:<name>`.
    fn name(&self) -> String;
    /// Whether this destination wants the notice at all (PagerDuty only while the group
    /// fires, for instance).
    fn wants(&self, notice: &Notice) -> bool;
    /// Whether an unchanged verdict is posted again at every repeat (Alertmanager: its
    /// alert must be refreshed to stay active).
    fn refreshes(&self) -> bool {
        false
    }
    /// Sends once. `state` is what the last successful delivery for this group returned.
    fn send<'a>(
        &'a self,
        notice: &'a Notice,
        state: Option<&'a serde_json::Value>,
    ) -> BoxFuture<'a, Result<Sent, NotifyError>>;
    /// After a crash between sending and recording it, or a timeout: whether the notice
    /// already arrived, when the destination can tell (Slack's message metadata).
    /// `Ok(None)`: unknown or not there; the notice is sent again with the same
    /// idempotency key, which the destination can fold (PagerDuty's `dedup_key` onto the
    /// open alert, Alertmanager's label identity, the webhook's `Idempotency-Key`): at
    /// least once. By default the destination cannot tell.
    fn already_sent<'a>(
        &'a self,
        _notice: &'a Notice,
        _state: Option<&'a serde_json::Value>,
    ) -> BoxFuture<'a, Result<Option<Sent>, NotifyError>> {
        Box::pin(async { Ok(None) })
    }
    /// Reaches the destination without posting anything where it can (see each sender's
    /// `probe`): for `check-config --connect`. `Ok` says what was checked.
    fn probe(&self) -> BoxFuture<'_, Result<String, NotifyError>>;
}

/// A configured destination: one sender of the registry ([`registry::sections`]).
pub struct Notifier(Box<dyn Destination>);

impl Notifier {
    /// A notifier sending with `destination`.
    pub fn new(destination: impl Destination + 'static) -> Notifier {
        Notifier(Box::new(destination))
    }

    pub(crate) fn from_box(destination: Box<dyn Destination>) -> Notifier {
        Notifier(destination)
    }

    /// Builds every configured destination; secrets are resolved now.
    pub fn from_config(cfg: &NotifyConfig) -> Result<Vec<Notifier>, String> {
        cfg.build()
    }

    /// See [`Destination::name`].
    pub fn name(&self) -> String {
        self.0.name()
    }

    /// See [`Destination::wants`].
    pub fn wants(&self, notice: &Notice) -> bool {
        self.0.wants(notice)
    }

    /// See [`Destination::send`].
    pub async fn send(&self, notice: &Notice, state: Option<&serde_json::Value>) -> Result<Sent, NotifyError> {
        self.0.send(notice, state).await
    }

    /// See [`Destination::probe`].
    pub async fn probe(&self) -> Result<String, NotifyError> {
        self.0.probe().await
    }

    /// See [`Destination::already_sent`].
    pub async fn already_sent(
        &self,
        notice: &Notice,
        state: Option<&serde_json::Value>,
    ) -> Result<Option<Sent>, NotifyError> {
        self.0.already_sent(notice, state).await
    }
}

impl Destination for Notifier {
    fn name(&self) -> String {
        self.0.name()
    }
    fn wants(&self, notice: &Notice) -> bool {
        self.0.wants(notice)
    }
    fn refreshes(&self) -> bool {
        self.0.refreshes()
    }
    fn send<'a>(
        &'a self,
        notice: &'a Notice,
        state: Option<&'a serde_json::Value>,
    ) -> BoxFuture<'a, Result<Sent, NotifyError>> {
        self.0.send(notice, state)
    }
    fn already_sent<'a>(
        &'a self,
        notice: &'a Notice,
        state: Option<&'a serde_json::Value>,
    ) -> BoxFuture<'a, Result<Option<Sent>, NotifyError>> {
        self.0.already_sent(notice, state)
    }
    fn probe(&self) -> BoxFuture<'_, Result<String, NotifyError>> {
        self.0.probe()
    }
}

/// One line per configured destination, without a secret (a webhook shows only its
/// scheme, host and port: a path may hold a token): what `serve` logs at start and
/// `check-config` prints.
pub fn describe(cfg: &NotifyConfig) -> Vec<String> {
    cfg.describe()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_transport_error_keeps_its_cause_and_never_the_url() {
        // A closed port on loopback: connection refused.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let url = format!("http://127.0.0.1:{port}/services/T000/B000/XXXXSECRETXXXX");
        let e = reqwest::Client::new().post(&url).send().await.unwrap_err();
        let n = transport_error("slack: incoming webhook", &e);
        assert!(n.retryable && n.reason == FailureReason::Connect, "{n:?}");
        assert!(n.message.starts_with("slack: incoming webhook: cannot connect: "), "{}", n.message);
        assert!(n.message.to_lowercase().contains("connection refused"), "the cause: {}", n.message);
        assert!(!n.message.contains("XXXXSECRETXXXX") && !n.message.contains("/services/"), "{}", n.message);
    }

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
        assert_eq!(status_error("x", 429, &h, "", &none).reason, FailureReason::RateLimited);
        assert_eq!(status_error("x", 502, &h, "", &none).reason, FailureReason::ServerError);
        // 501 Not Implemented and 505 will not change by retrying.
        for s in FINAL_5XX {
            let e = status_error("x", s, &h, "", &none);
            assert!(!e.retryable && e.reason == FailureReason::Refused, "{s}");
        }
        // The answer is logged, not quoted: the error says the status.
        let e = status_error("pagerduty", 400, &h, "bad routing key R0UT1NG", &Redactor::of("R0UT1NG"));
        assert!(!e.retryable);
        assert_eq!(e.message, "pagerduty: HTTP 400 Bad Request");
        let e = status_error("x", 599, &h, "SECRET-METADATA-TOKEN", &none);
        assert_eq!(e.message, "x: HTTP 599");
    }
}
