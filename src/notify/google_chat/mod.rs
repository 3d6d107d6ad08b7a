//! Google Chat through a space's incoming webhook.
//! <https://developers.google.com/workspace/chat/quickstart/webhooks>
//!
//! Messages are built by the pure [`crate::render::google_chat`]; this module only sends
//! them.
//!
//! # What is posted
//!
//! `POST <webhook_url>&messageReplyOption=REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD` of
//! `{text, cardsV2, thread: {threadKey}}` for every notice. Every notice of a job's
//! episode carries the same thread key, so a verdict's updates, its resolution and the
//! alert groups that join or leave it are replies in the thread of its first message (a
//! thread that cannot be found starts a new one). A webhook cannot edit a message
//! (a webhook only creates messages; `spaces.messages.patch` takes a Chat app's
//! credentials, <https://developers.google.com/workspace/chat/update-messages>): each later
//! post says what it updates, and a *revision* (the same decision with other confidence or
//! numbers, [`Notice::is_revision`]), which other destinations show in place, is a short
//! reply in the thread (the confidence now and the summary), never the whole verdict
//! again. The state kept per episode is the time of its first post, Google's thread
//! name and the key posted under (`{"first_post_ms": …, "thread": "spaces/…/threads/…",
//! "thread_key": "culprit-…"}`); later posts of the episode take that key.
//!
//! An incident ([`NoticeKind::Incident`], many jobs held back by one cause) is a summary
//! posted once under the incident's own key, when it forms
//! ([`crate::render::google_chat::incident_message`]); each job whose verdict comes after
//! it replies in that thread instead of starting its own, and the job's later posts follow
//! it there. Later summaries of the incident post nothing (a webhook cannot edit).
//!
//! # Answers
//!
//! 200 with the message created: delivered. Errors are Google's
//! `{"error": {"code", "message", "status"}}`
//! (<https://cloud.google.com/apis/design/errors#http_mapping>):
//!
//! * 429 `RESOURCE_EXHAUSTED` (the space's write quota, [`MIN_POST_INTERVAL`]), 408 and
//!   5xx (`UNAVAILABLE`, `INTERNAL`): retryable, with `Retry-After` when given;
//! * 400 `INVALID_ARGUMENT` (a card Chat refuses): final;
//! * 401 `UNAUTHENTICATED`, 403 `PERMISSION_DENIED` (the key or token refused, webhooks
//!   turned off for the space or the organisation), 404 `NOT_FOUND` (the space or the
//!   webhook deleted): final;
//! * a transport failure: retryable, maybe delivered when the request was sent.
//!
//! Final errors name `error.status` (when it has the shape of one), never `message`, and
//! end with a hint naming `notify.google_chat[i] (name).webhook_url`.
//!
//! # Repeats
//!
//! A client-assigned `messageId` (`client-…`, whose reuse Chat refuses with 409
//! `ALREADY_EXISTS`) would fold a repeat, but Google documents it for Chat apps calling
//! `spaces.messages.create`, not for incoming webhooks
//! (<https://developers.google.com/workspace/chat/create-messages#name_a_created_message>),
//! so it is not sent: a request carrying a parameter the webhook refuses would lose every
//! post. A notice sent again after an attempt whose outcome is unknown
//! ([`Notice::maybe_repeat`]) is marked in its text and card instead.
//!
//! # Secrets
//!
//! The webhook URL (`key` and `token`) is never in `Debug`, errors or logs.

mod config;

pub use config::GoogleChatConfig;

use std::fmt;
use std::time::Duration;

use futures::future::BoxFuture;
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};

use crate::model::notice::{Notice, NoticeKind};
use crate::model::secret::Redactor;
use crate::notify::teams::{error_code, resolve_url, url_redactor};
use crate::notify::webhook::{http_client, read_answer};
use crate::notify::{Destination, NotifyError, Sent, status_error, transport_error};
use crate::render::google_chat::{incident_message, message};

pub use crate::render::google_chat::{MAX_MESSAGE_BYTES, MAX_WIDGETS};

/// Least time between two posts to one space: Chat allows 60 writes a minute per space,
/// shared by every app and webhook in it.
/// <https://developers.google.com/workspace/chat/limits>
pub const MIN_POST_INTERVAL: Duration = Duration::from_secs(1);

/// The reply option every post carries: a reply in the thread of its `threadKey`, or a new
/// thread when there is none.
/// <https://developers.google.com/workspace/chat/api/reference/rest/v1/spaces.messages/create#messagereplyoption>
pub const REPLY_OPTION: &str = "REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD";

/// The state's key of the episode's first post time, Unix ms.
pub const FIRST_POST: &str = "first_post_ms";

/// The key of the state that holds the `threadKey` of the episode's first post.
pub const THREAD_KEY: &str = "thread_key";

/// A Google Chat incoming webhook destination. `Debug` shows no secret.
pub struct GoogleChat {
    name: String,
    url: SecretString,
    client: reqwest::Client,
    redactor: Redactor,
    /// Posts of this webhook, shared by the sections that post to it and (through the
    /// ledger) by the replicas.
    pacer: std::sync::Arc<crate::notify::pace::Pacer>,
}

impl fmt::Debug for GoogleChat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GoogleChat")
            .field("name", &self.name)
            .field("webhook_url", &"[REDACTED]")
            .finish_non_exhaustive()
    }
}

impl GoogleChat {
    /// A Google Chat destination from its configuration; resolves the webhook URL now.
    ///
    /// Errors (naming `google_chat:<name>`, never the URL): the name is empty, the secret
    /// cannot be read, the URL is not an http(s) URL with a host, or the client cannot be
    /// built.
    pub fn new(cfg: &GoogleChatConfig) -> Result<GoogleChat, String> {
        if cfg.name.trim().is_empty() {
            return Err("google_chat: `name` is empty".into());
        }
        let what = format!("google_chat:{}", cfg.name);
        let url = resolve_url(&what, &cfg.webhook_url)?;
        let redactor = url_redactor(url.expose_secret());
        let pacer = crate::notify::pace::shared(
            &crate::notify::pace::scope_of_secret("google_chat", url.expose_secret()),
            MIN_POST_INTERVAL,
        );
        Ok(GoogleChat { name: cfg.name.clone(), url, client: http_client(&what)?, redactor, pacer })
    }

    fn what(&self) -> String {
        format!("google_chat:{}", self.name)
    }

    /// The webhook URL with the reply option appended (the URL's own query kept as it is,
    /// byte for byte; an option it already carries is left alone).
    fn post_url(&self) -> Result<reqwest::Url, NotifyError> {
        let mut u = reqwest::Url::parse(self.url.expose_secret())
            .map_err(|_| NotifyError::fatal(format!("{}: webhook_url is not a valid URL", self.what())))?;
        let query = u.query().unwrap_or_default().to_string();
        if !query.split('&').any(|kv| kv.starts_with("messageReplyOption=")) {
            let option = format!("messageReplyOption={REPLY_OPTION}");
            u.set_query(Some(&if query.is_empty() { option } else { format!("{query}&{option}") }));
        }
        Ok(u)
    }

    fn hint(&self, status: u16, code: Option<&str>) -> Option<String> {
        let key = format!("notify.google_chat (name {:?}).webhook_url", self.name);
        match (status, code) {
            (400, _) | (_, Some("INVALID_ARGUMENT")) => Some(format!(
                "Google Chat refused the message (a card it cannot read): report it with the verdict; the webhook at {key} itself was accepted"
            )),
            (401 | 403, _) | (_, Some("UNAUTHENTICATED" | "PERMISSION_DENIED")) => Some(format!(
                "Google refused the key or token of {key}: the webhook was deleted or recreated, or the space's or organisation's settings no longer allow incoming webhooks; copy the current URL from the space's Apps & integrations > Webhooks"
            )),
            (404, _) | (_, Some("NOT_FOUND")) => Some(format!(
                "no space or webhook answers at {key}: the space or the webhook was deleted; create the webhook again"
            )),
            (413, _) => Some(format!(
                "the message is larger than Chat takes ({MAX_MESSAGE_BYTES} bytes); culprit cuts it below that, so report this"
            )),
            _ => None,
        }
    }

    /// Classifies a non-2xx answer: [`status_error`], with Google's `error.status` named in
    /// a final error and its hint.
    fn refusal(&self, status: u16, headers: &reqwest::header::HeaderMap, answer: &str) -> NotifyError {
        let e = status_error(&self.what(), status, headers, answer, &self.redactor);
        if e.retryable {
            return e;
        }
        let code = error_code(answer, "/error/status");
        let hint = self.hint(status, code.as_deref());
        let e = match code {
            Some(c) => NotifyError { message: format!("{}: {c}", e.message), ..e },
            None => e,
        };
        e.hint(hint)
    }

    /// Posts the notice once in its episode's thread (see the module docs).
    pub async fn send(&self, notice: &Notice, state: Option<&Value>) -> Result<Sent, NotifyError> {
        let what = self.what();
        let first = state.and_then(|s| s.get(FIRST_POST)).and_then(Value::as_i64);
        let mut body = match (notice.kind, &notice.incident_view, &notice.incident) {
            // A webhook cannot edit the summary: posted once; later jobs reply under it.
            (NoticeKind::Incident, _, _) if state.is_some() => return Ok(Sent { state: state.cloned() }),
            (NoticeKind::Incident, Some(view), Some(tag)) => incident_message(view, &tag.thread),
            (NoticeKind::Incident, _, _) => {
                tracing::info!(destination = %what, "google_chat: the incident is no longer in the store; no summary");
                return Ok(Sent { state: None });
            }
            _ => message(notice, first),
        };
        // The thread the episode's first post went to (an incident's, for a job whose
        // verdict replied under its summary) keeps every later post of the episode.
        if let Some(key) = state.and_then(|s| s.get(THREAD_KEY)).and_then(Value::as_str) {
            body["thread"] = json!({ "threadKey": key });
        }
        let key = body.pointer("/thread/threadKey").cloned().unwrap_or(Value::Null);
        let url = self.post_url()?;
        self.pacer.turn().await;
        let response = self
            .client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json; charset=UTF-8")
            .json(&body)
            .send()
            .await
            .map_err(|e| transport_error(&what, &e))?;
        let (status, headers, answer) = read_answer(response).await;
        if !(200..300).contains(&status) {
            return Err(self.refusal(status, &headers, &answer));
        }
        let thread = serde_json::from_str::<Value>(&answer)
            .ok()
            .and_then(|v| v.pointer("/thread/name").and_then(Value::as_str).map(str::to_string))
            .or_else(|| state.and_then(|s| s.get("thread")).and_then(Value::as_str).map(str::to_string));
        tracing::info!(destination = %what, kind = ?notice.kind, "google_chat: posted");
        Ok(Sent {
            state: Some(json!({ FIRST_POST: first.unwrap_or(notice.at_ms), "thread": thread, THREAD_KEY: key })),
        })
    }

    /// For `check-config --connect`: posts an empty message, which Chat refuses (a message
    /// needs text or a card), so nothing appears in the space. A 400 `INVALID_ARGUMENT`
    /// is taken as the space, key and token accepted (Google checks the credentials before
    /// the body, as its API front end does; not documented for webhooks); 401, 403 and
    /// 404 are errors with their hint.
    pub async fn probe(&self) -> Result<String, NotifyError> {
        let what = self.what();
        let url = self.post_url()?;
        let response = self.client.post(url).json(&json!({})).send().await.map_err(|e| transport_error(&what, &e))?;
        let (status, headers, answer) = read_answer(response).await;
        match status {
            400 => Ok(
                "the webhook answered 400 to an empty message (nothing was posted): the space, key and token were accepted as far as Google tells before reading a message; cards are not verified"
                .to_string()),
            s if (200..300).contains(&s) => Ok(format!("the webhook answered {s} to an empty message")),
            _ => Err(self.refusal(status, &headers, &answer)),
        }
    }
}

impl Destination for GoogleChat {
    fn name(&self) -> String {
        self.what()
    }
    /// Every notice: each is a message in its episode's thread (an incident's summary
    /// in the incident's).
    fn wants(&self, _notice: &Notice) -> bool {
        true
    }
    fn send<'a>(&'a self, notice: &'a Notice, state: Option<&'a Value>) -> BoxFuture<'a, Result<Sent, NotifyError>> {
        Box::pin(GoogleChat::send(self, notice, state))
    }
    fn probe(&self) -> BoxFuture<'_, Result<String, NotifyError>> {
        Box::pin(GoogleChat::probe(self))
    }
}
