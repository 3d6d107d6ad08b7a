//! Mattermost: an incoming webhook, one post per notice.
//!
//! Posts are built by the pure [`crate::render::mattermost`] (Markdown `text`, no
//! attachments: see there why); this module only sends them: `POST <webhook_url>` of
//! `{text, channel?, username?, icon_url?}`.
//! <https://developers.mattermost.com/integrate/webhooks/incoming/>
//!
//! * Which notices: verdicts (the first post and a changed verdict), resolutions and
//!   failures to diagnose. An incoming webhook answers `ok` and no post id, so it can
//!   neither edit a post nor reply in its thread: a *revision* (the same decision with other
//!   confidence or numbers, [`Notice::is_revision`]), which other destinations show in
//!   place, is not posted at all (a new post per changed number would bury the verdict; the
//!   verdict page behind its link shows the latest), nor are [`NoticeKind::Joined`] and
//!   [`NoticeKind::GroupResolved`] (a post each would only be noise).
//! * A changed verdict and the resolution are new posts that say what they update; no state
//!   is kept.
//! * Repeats: Mattermost has no idempotency key and no way for a webhook to look up its
//!   posts ([`Destination::already_sent`] cannot tell), so a notice sent again after an
//!   attempt whose outcome is unknown ([`Notice::maybe_repeat`]) carries the mark
//!   [`crate::render::mattermost::REPEAT_MARK`]: never an unmarked duplicate.
//!
//! Answers (<https://developers.mattermost.com/integrate/webhooks/incoming/>,
//! <https://api.mattermost.com/#tag/errors>): 200 `ok` is delivered; an error is Mattermost's
//! JSON `{id, message, detailed_error, request_id, status_code}`, whose `id` (such as
//! `web.incoming_webhook.invalid.app_error`) the error names; 400, 403, 404 and other 4xx
//! are final, with a hint naming the key to fix; 429 (Mattermost's rate limiting, with
//! `X-Ratelimit-Limit`, `X-Ratelimit-Remaining`, `X-Ratelimit-Reset` and `Retry-After`,
//! <https://docs.mattermost.com/configure/environment-configuration-settings.html#rate-limiting>)
//! and 5xx are retryable, with `Retry-After` (or, without it, `X-Ratelimit-Reset`, the
//! seconds until the limit resets). Transport failures are retryable, maybe delivered.
//!
//! # Rate limit
//!
//! A server with rate limiting on (off by default) takes [`RATE_LIMIT_PER_SECOND`]
//! requests a second by default, per client address, with a burst of 100 beyond them
//! (<https://docs.mattermost.com/administration-guide/configure/rate-limiting-configuration-settings.html>):
//! posts to one server, whichever webhook of this process they go to, are
//! [`MIN_POST_INTERVAL`] apart, within the default whether it is on or not.
//!
//! The webhook URL (its key is the credential) is never in `Debug`, errors or logs.

mod config;

pub use config::MattermostConfig;

use std::fmt;
use std::time::Duration;

use futures::future::BoxFuture;
use reqwest::header::{CONTENT_TYPE, HeaderMap};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};

use crate::model::notice::{Notice, NoticeKind};
use crate::model::secret::Redactor;
use crate::notify::digest;
use crate::notify::webhook::{http_client, read_answer};
use crate::notify::{Destination, NotifyError, Sent, status_error, transport_error};
use crate::render::mattermost::{incident_message, message};

/// Requests a second Mattermost's rate limiting takes by default ("Maximum queries per
/// second", `RateLimitSettings.PerSec`: 10).
/// <https://docs.mattermost.com/administration-guide/configure/rate-limiting-configuration-settings.html>
pub const RATE_LIMIT_PER_SECOND: u32 = 10;

/// Least time between two posts to one server: 1 s / [`RATE_LIMIT_PER_SECOND`] = 100 ms
/// (the burst of 100 is left for the server's other clients behind the same address).
pub const MIN_POST_INTERVAL: Duration = Duration::from_millis(1_000 / RATE_LIMIT_PER_SECOND as u64);

/// The Mattermost notifier. `Debug` shows no secret.
pub struct Mattermost {
    name: String,
    url: SecretString,
    channel: Option<String>,
    username: Option<String>,
    icon_url: Option<String>,
    client: reqwest::Client,
    redactor: Redactor,
    /// The server's pace ([`MIN_POST_INTERVAL`]), shared by every webhook on it.
    pacer: std::sync::Arc<crate::notify::pace::Pacer>,
}

impl fmt::Debug for Mattermost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mattermost")
            .field("name", &self.name)
            .field("webhook_url", &"[REDACTED]")
            .field("channel", &self.channel)
            .finish_non_exhaustive()
    }
}

impl Mattermost {
    /// A notifier from its section; the webhook URL is read now. Errors name
    /// `mattermost:<name>`, never the URL.
    pub fn new(cfg: &MattermostConfig) -> Result<Self, String> {
        if cfg.name.trim().is_empty() {
            return Err("mattermost: `name` is empty".into());
        }
        let what = format!("mattermost:{}", cfg.name);
        let url = cfg.webhook_url.resolve().map_err(|e| format!("{what}: webhook_url: {e}"))?;
        let parsed = crate::notify::webhook::parse_url(&what, url.expose_secret().trim())?;
        // The limit is the server's (per client address): scoped by its origin, which
        // holds no part of the webhook's key.
        let pacer = crate::notify::pace::shared(
            &format!("mattermost:{}", parsed.origin().ascii_serialization()),
            MIN_POST_INTERVAL,
        );
        let url = SecretString::from(url.expose_secret().trim().to_string());
        let mut redactor = Redactor::new();
        redactor.add_url(url.expose_secret());
        Ok(Mattermost {
            pacer,
            name: cfg.name.clone(),
            url,
            channel: cfg.channel.clone(),
            username: cfg.username.clone(),
            icon_url: cfg.icon_url.clone(),
            client: http_client(&what)?,
            redactor,
        })
    }

    fn what(&self) -> String {
        format!("mattermost:{}", self.name)
    }

    /// Verdicts, resolutions and failures to diagnose (see the module docs).
    pub fn wants(&self, notice: &Notice) -> bool {
        match notice.kind {
            NoticeKind::Verdict => !notice.is_revision(),
            NoticeKind::Resolved | NoticeKind::CouldNotDiagnose | NoticeKind::Incident => true,
            NoticeKind::Joined | NoticeKind::GroupResolved => false,
        }
    }

    /// The JSON body of a notice's post.
    pub fn body(&self, notice: &Notice) -> Value {
        self.text_body(message(notice))
    }

    /// The JSON body of a post of `text`, with the section's channel and name.
    fn text_body(&self, text: String) -> Value {
        let mut b = json!({ "text": text });
        for (key, value) in [("channel", &self.channel), ("username", &self.username), ("icon_url", &self.icon_url)] {
            if let Some(v) = value {
                b[key] = json!(v);
            }
        }
        b
    }

    /// Posts the notice once. No state is kept (see the module docs), but for an
    /// incident's summary and the jobs counted in it ([`digest`]).
    pub async fn send(&self, notice: &Notice, state: Option<&Value>) -> Result<Sent, NotifyError> {
        if notice.kind == NoticeKind::Incident {
            let post = |incident: &_, range| self.post_owned(self.text_body(incident_message(incident, range)));
            return digest::send_step(notice, state, "mattermost", post).await;
        }
        if digest::stays_folded(notice, state) {
            return Ok(Sent { state: state.cloned() });
        }
        if let Some(folded) = digest::fold(notice, state) {
            return Ok(folded);
        }
        self.post(&self.body(notice)).await?;
        tracing::info!(destination = %self.what(), kind = ?notice.kind, repeat = notice.maybe_repeat, "mattermost: posted");
        Ok(Sent { state: None })
    }

    async fn post_owned(&self, body: Value) -> Result<(), NotifyError> {
        self.post(&body).await
    }

    async fn post(&self, body: &Value) -> Result<(), NotifyError> {
        let what = self.what();
        self.pacer.turn().await;
        let response = self
            .client
            .post(self.url.expose_secret())
            .header(CONTENT_TYPE, "application/json")
            .body(serde_json::to_vec(body).expect("a JSON value serializes"))
            .send()
            .await
            .map_err(|e| transport_error(&what, &e))?;
        let (status, headers, answer) = read_answer(response).await;
        if (200..300).contains(&status) {
            return Ok(());
        }
        Err(self.error(status, &headers, &answer))
    }

    /// Classifies an error answer (see the module docs).
    fn error(&self, status: u16, headers: &HeaderMap, answer: &str) -> NotifyError {
        let e = status_error(&self.what(), status, headers, answer, &self.redactor);
        let id = error_id(answer);
        let e = match &id {
            Some(id) => NotifyError { message: format!("{}: {id}", e.message), ..e },
            None => e,
        };
        if e.retryable {
            let wait = e.retry_after.or_else(|| reset_after(headers));
            return NotifyError { retry_after: wait, ..e };
        }
        let hint = self.hint(status, id.as_deref());
        e.hint(hint)
    }

    fn hint(&self, status: u16, id: Option<&str>) -> Option<String> {
        let at = format!("the [[notify.mattermost]] named {:?}", self.name);
        match (status, id.unwrap_or_default()) {
            (_, i) if i.contains("incoming_webhook.invalid") || i.contains("incoming_webhook.app_error") => {
                Some(format!("Mattermost does not know this webhook: copy its URL again into webhook_url of {at}"))
            }
            (_, i) if i.contains("channel_locked") || i.contains("permissions") => Some(format!(
                "the webhook may post only to its own channel: remove `channel` from {at} or unlock the webhook"
            )),
            (_, i) if i.contains("incoming_webhook.channel") || i.contains("channel") => {
                Some(format!("no channel by that name: check `channel` of {at}"))
            }
            (_, i) if i.contains("disabled") => {
                Some("incoming webhooks are disabled on the server: enable them in the System Console".into())
            }
            (413, _) => Some(format!("the server (or a proxy in front of it) takes smaller posts than {at} sends")),
            _ => crate::notify::status_hint(status, &format!("webhook_url of {at}"), &format!("webhook_url of {at}")),
        }
    }

    /// `check-config --connect`: posts `{"text": ""}`, which Mattermost refuses without
    /// posting. It reads the webhook's key before the text: `web.incoming_webhook.text.app_error`
    /// (no text) means the key is known; `…invalid.app_error`, 404 or 403 that it is not.
    /// Not verified: `channel`, `username` and `icon_url` (they are checked on a real post).
    pub async fn probe(&self) -> Result<String, NotifyError> {
        let what = self.what();
        let response = self
            .client
            .post(self.url.expose_secret())
            .header(CONTENT_TYPE, "application/json")
            .body(r#"{"text":""}"#)
            .send()
            .await
            .map_err(|e| transport_error(&what, &e))?;
        let (status, headers, answer) = read_answer(response).await;
        let id = error_id(&answer).unwrap_or_default();
        if status == 400 && (id.contains(".text.") || id.contains("text.app_error")) {
            return Ok("the webhook is known (an empty post was refused for its missing text, nothing was posted); channel, username and icon_url are not verified".into());
        }
        if (200..300).contains(&status) {
            return Ok(format!("the webhook answered {status} to an empty post (nothing should have been posted)"));
        }
        Err(self.error(status, &headers, &answer))
    }
}

/// Mattermost's error `id` (`web.incoming_webhook.invalid.app_error`): its own words, kept
/// when it has their shape (lower case, digits, `.` and `_`, at most 100), else `None`.
fn error_id(answer: &str) -> Option<String> {
    let v: Value = serde_json::from_str(answer).ok()?;
    let id = v.get("id")?.as_str()?;
    let ok = (1..=100).contains(&id.len())
        && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'_');
    ok.then(|| id.to_string())
}

/// `X-Ratelimit-Reset`: the seconds until Mattermost's limit resets.
fn reset_after(headers: &HeaderMap) -> Option<Duration> {
    let v = headers.get("x-ratelimit-reset")?.to_str().ok()?.trim().parse::<u64>().ok()?;
    Some(Duration::from_secs(v.max(1)))
}

impl Destination for Mattermost {
    fn name(&self) -> String {
        self.what()
    }
    fn wants(&self, notice: &Notice) -> bool {
        Mattermost::wants(self, notice)
    }
    fn send<'a>(&'a self, notice: &'a Notice, state: Option<&'a Value>) -> BoxFuture<'a, Result<Sent, NotifyError>> {
        Box::pin(Mattermost::send(self, notice, state))
    }
    fn probe(&self) -> BoxFuture<'_, Result<String, NotifyError>> {
        Box::pin(Mattermost::probe(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mattermost_error_ids_are_kept_only_with_their_shape() {
        let body = r#"{"id":"web.incoming_webhook.invalid.app_error","message":"Invalid webhook.","status_code":400}"#;
        assert_eq!(error_id(body).as_deref(), Some("web.incoming_webhook.invalid.app_error"));
        assert_eq!(error_id(r#"{"id":"<b>hi</b>"}"#), None);
        assert_eq!(error_id("ok"), None);
    }
}
