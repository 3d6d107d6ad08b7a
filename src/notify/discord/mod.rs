//! Discord: a channel webhook; one message per job's episode, edited in place.
//!
//! Messages are built by the pure [`crate::render::discord`]; this module only sends them.
//! Every body carries `allowed_mentions: {parse: []}`: nothing in a message can ping
//! (the renderer escapes mentions too).
//! <https://discord.com/developers/docs/resources/webhook#execute-webhook>,
//! <https://discord.com/developers/docs/resources/message#allowed-mentions-object>
//!
//! * A verdict without a state is a new message: `POST <webhook_url>?wait=true` (and
//!   `thread_id` when configured), so that Discord answers with the message; its `id` and
//!   the embed sent are the state: `Sent { state: Some({"message_id": "…", "embed": {…}}) }`.
//! * A later revision or a changed verdict of the episode (state given) edits that message
//!   in place: `PATCH <webhook_url>/messages/<id>`
//!   (<https://discord.com/developers/docs/resources/webhook#edit-webhook-message>). A
//!   changed culprit also posts a short new message ([`changed_note`]) so that people
//!   notice; the state stays the verdict's message.
//! * [`NoticeKind::Resolved`] edits the message too: its embed turns green, titled
//!   "Resolved" ([`resolved_edit`]); without a state it is a new message.
//! * [`NoticeKind::CouldNotDiagnose`] is a new message (the verdict shown is not replaced);
//!   it becomes the state when there is none. [`NoticeKind::Joined`] and
//!   [`NoticeKind::GroupResolved`] are not sent.
//! * A message that is gone (404 with Discord's code 10008 `Unknown Message` on the edit)
//!   is posted anew, and the new message becomes the state.
//! * [`NoticeKind::Incident`] (many jobs held back by one cause) is one summary, posted
//!   once and edited in place as jobs join; each job's verdict after it is folded into it
//!   (nothing posted, the summary's id is the job's state) until the job has news of its
//!   own: a changed verdict or "could not diagnose" is posted (`incident`).
//!
//! # Repeats ([`Destination::already_sent`])
//!
//! A webhook can read a message only by its id (`GET …/messages/<id>`); it cannot list the
//! channel. So: an edit (the state holds the id) is idempotent, a repeat of it folds onto
//! the same message; a first post or a culprit-changed note whose outcome is unknown
//! cannot be found, and is sent again marked as a possible repeat
//! ([`Notice::maybe_repeat`], [`crate::render::discord::REPEAT_MARK`]). `already_sent` finds
//! an edit already made (the message's embed title and description are the ones this notice
//! renders) and says so without editing again; otherwise it cannot tell. An edit never
//! carries the repeat mark.
//!
//! # Answers (<https://discord.com/developers/docs/topics/opcodes-and-status-codes#json>)
//!
//! 2xx is delivered (a `POST` answer without an `id` is a bad answer: maybe delivered);
//! 400 with code 50035 `Invalid Form Body` (a limit passed, a bad embed) is sent again at
//! once, once, as [`fallback`] (text alone); 429 is retryable after the time Discord asks:
//! its JSON `retry_after` (seconds, a float), else `Retry-After`, the error saying whether
//! the limit is `global`
//! (<https://discord.com/developers/docs/topics/rate-limits>); 5xx is retryable; 401, 403,
//! 404 (10015 `Unknown Webhook`, 50027 `Invalid Webhook Token`) and other 4xx are final
//! with a hint. Errors name Discord's numeric code, never its message text or the URL.
//!
//! # Rate limits
//!
//! Discord documents no fixed numbers for webhooks ("rate limits should not be hard
//! coded"): each answer says what is left of its bucket, and the documented way is to
//! parse those headers to prevent hitting the limit
//! (<https://discord.com/developers/docs/topics/rate-limits>). So requests of one webhook
//! go one at a time, and after an answer with `X-RateLimit-Remaining: 0` the next waits
//! `X-RateLimit-Reset-After` ([`crate::notify::pace::Bucket`]). (The global limit, 50
//! requests a second, is far above one webhook's.)
//!
//! The webhook URL (it holds the token) is never in `Debug`, errors or logs.

mod config;

mod incident;

pub use config::DiscordConfig;

use std::fmt;
use std::time::Duration;

use futures::future::BoxFuture;
use reqwest::header::{CONTENT_TYPE, HeaderMap};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};

use crate::model::notice::{Notice, NoticeKind};
use crate::model::secret::Redactor;
use crate::notify::webhook::{http_client, read_answer};
use crate::notify::{Destination, FailureReason, NotifyError, Sent, status_error, transport_error};
use crate::render::discord::{DiscordMessage, changed_note, fallback, message, resolved_edit};

/// Discord's code for a message that does not exist (deleted).
/// <https://discord.com/developers/docs/topics/opcodes-and-status-codes#json>
pub const UNKNOWN_MESSAGE: i64 = 10008;

/// Discord's code for a webhook that does not exist.
pub const UNKNOWN_WEBHOOK: i64 = 10015;

/// Discord's code for a webhook token that is wrong.
pub const INVALID_WEBHOOK_TOKEN: i64 = 50027;

/// Discord's code for a body it refused (a limit passed, a bad field).
pub const INVALID_FORM_BODY: i64 = 50035;

/// Longest wait a 429 may ask that is honoured as asked (Discord asks seconds; a global
/// limit may ask more): longer asks are capped here and the delivery loop's backoff
/// applies.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// The Discord notifier. `Debug` shows no secret.
pub struct Discord {
    name: String,
    url: SecretString,
    username: Option<String>,
    thread_id: Option<String>,
    client: reqwest::Client,
    redactor: Redactor,
    /// The webhook's rate-limit bucket, as Discord's answers report it.
    bucket: crate::notify::pace::Bucket,
    /// Edits of each incident summary (by message id).
    summary_edits: crate::notify::pace::KeyedPacer,
}

impl fmt::Debug for Discord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Discord")
            .field("name", &self.name)
            .field("webhook_url", &"[REDACTED]")
            .field("thread_id", &self.thread_id)
            .finish_non_exhaustive()
    }
}

/// The message of an episode: the state.
#[derive(Debug, Clone, PartialEq)]
struct Posted {
    id: String,
    embed: Option<Value>,
}

impl Posted {
    fn from_state(state: Option<&Value>) -> Option<Posted> {
        let s = state?;
        let id = s.get("message_id")?.as_str()?;
        (!id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
            .then(|| Posted { id: id.to_string(), embed: s.get("embed").filter(|e| e.is_object()).cloned() })
    }

    fn state(&self) -> Value {
        let mut s = json!({ "message_id": self.id });
        if let Some(e) = &self.embed {
            s["embed"] = e.clone();
        }
        s
    }
}

/// A failed call, before classification.
enum Failure {
    /// 400 with code 50035: the body was refused.
    FormBody,
    /// 404 with code 10008 on an edit: the message is gone.
    Gone,
    Other(NotifyError),
}

impl Discord {
    /// A notifier from its section; the webhook URL is read now. Errors name
    /// `discord:<name>`, never the URL.
    pub fn new(cfg: &DiscordConfig) -> Result<Self, String> {
        if cfg.name.trim().is_empty() {
            return Err("discord: `name` is empty".into());
        }
        let what = format!("discord:{}", cfg.name);
        let url = cfg.webhook_url.resolve().map_err(|e| format!("{what}: webhook_url: {e}"))?;
        let url = url.expose_secret().trim().trim_end_matches('/').to_string();
        let summary_edits = crate::notify::pace::KeyedPacer::new(
            &format!("{}:edits", crate::notify::pace::scope_of_secret("discord", &url)),
            incident::SUMMARY_EDIT_INTERVAL,
        );
        let parsed = crate::notify::webhook::parse_url(&what, &url)?;
        if parsed.query().is_some() {
            return Err(format!(
                "{what}: webhook_url has a query string; give the URL alone (thread_id is its own key)"
            ));
        }
        let mut redactor = Redactor::new();
        redactor.add_url(&url);
        Ok(Discord {
            name: cfg.name.clone(),
            url: SecretString::from(url),
            username: cfg.username.clone(),
            thread_id: cfg.thread_id.clone(),
            client: http_client(&what)?,
            redactor,
            bucket: Default::default(),
            summary_edits,
        })
    }

    fn what(&self) -> String {
        format!("discord:{}", self.name)
    }

    /// Verdicts, resolutions and failures to diagnose.
    pub fn wants(&self, notice: &Notice) -> bool {
        matches!(
            notice.kind,
            NoticeKind::Verdict | NoticeKind::Resolved | NoticeKind::CouldNotDiagnose | NoticeKind::Incident
        )
    }

    /// The webhook URL with `path` appended and the query.
    fn url(&self, path: &str, wait: bool) -> reqwest::Url {
        let mut u = reqwest::Url::parse(&format!("{}{path}", self.url.expose_secret())).expect("checked in new");
        {
            let mut q = u.query_pairs_mut();
            if wait {
                q.append_pair("wait", "true");
            }
            if let Some(t) = &self.thread_id {
                q.append_pair("thread_id", t);
            }
        }
        if u.query() == Some("") {
            u.set_query(None);
        }
        u
    }

    fn body(&self, m: &DiscordMessage, post: bool) -> Value {
        let mut b = json!({ "content": m.content, "embeds": m.embeds, "allowed_mentions": { "parse": [] } });
        if post && let Some(u) = &self.username {
            b["username"] = json!(u);
        }
        b
    }

    /// Sends the notice once (see the module docs).
    pub async fn send(&self, notice: &Notice, state: Option<&Value>) -> Result<Sent, NotifyError> {
        if notice.kind == NoticeKind::Incident {
            return self.send_incident(notice, state).await;
        }
        if Discord::stays_folded(notice, state) {
            return Ok(Sent { state: state.cloned() });
        }
        if state.is_none()
            && let Some(folded) = Discord::fold_into_incident(notice)
        {
            return Ok(folded);
        }
        let posted = Posted::from_state(state);
        // An edit of a known message folds a repeat: it carries no repeat mark (the note
        // and new posts do).
        let edit = Notice { maybe_repeat: false, ..notice.clone() };
        match (notice.kind, posted) {
            (NoticeKind::Verdict, Some(p)) => {
                let m = message(&edit);
                let p = self.edit_or_post(&p, &m, &edit).await?;
                if notice.changed {
                    // The note is a plain new post: a failure after the edit is worth
                    // retrying (the edit folds, the note is marked when unsure).
                    self.post(&changed_note(notice), notice).await.map_err(|e| {
                        NotifyError {
                            message: format!("{} (the message was edited; its note is sent again)", e.message),
                            ..e
                        }
                        .because(FailureReason::PartlyDelivered)
                    })?;
                }
                Ok(Sent { state: Some(p.state()) })
            }
            (NoticeKind::Resolved, Some(p)) => {
                let m = resolved_edit(&edit, p.embed.as_ref());
                let p = self.edit_or_post(&p, &m, &edit).await?;
                Ok(Sent { state: Some(p.state()) })
            }
            (NoticeKind::CouldNotDiagnose, Some(p)) => {
                self.post(&message(notice), notice).await?;
                Ok(Sent { state: Some(p.state()) })
            }
            (_, None) => {
                let m = message(notice);
                let id = self.post(&m, notice).await?;
                Ok(Sent { state: Some(Posted { id, embed: m.embeds.first().cloned() }.state()) })
            }
            (_, Some(p)) => Ok(Sent { state: Some(p.state()) }),
        }
    }

    /// Edits the episode's message; a message that is gone is posted anew.
    async fn edit_or_post(&self, p: &Posted, m: &DiscordMessage, notice: &Notice) -> Result<Posted, NotifyError> {
        let url = self.url(&format!("/messages/{}", p.id), false);
        let first = self.call(reqwest::Method::PATCH, url.clone(), &self.body(m, false)).await;
        let result = match first {
            Err(Failure::FormBody) => {
                tracing::warn!(destination = %self.what(), "discord: the edit was refused; sending the text alone");
                let short = fallback(notice);
                self.call(reqwest::Method::PATCH, url, &self.body(&short, false)).await.map(|a| (a, short))
            }
            other => other.map(|a| (a, m.clone())),
        };
        match result {
            Ok((_, sent)) => {
                tracing::info!(destination = %self.what(), message_id = %p.id, kind = ?notice.kind, "discord: message edited");
                Ok(Posted { id: p.id.clone(), embed: sent.embeds.first().cloned().or(p.embed.clone()) })
            }
            Err(Failure::Gone) => {
                tracing::info!(destination = %self.what(), message_id = %p.id, "discord: the message is gone; posting it anew");
                let fresh = if notice.kind == NoticeKind::Resolved { message(notice) } else { m.clone() };
                let id = self.post(&fresh, notice).await?;
                Ok(Posted { id, embed: fresh.embeds.first().cloned() })
            }
            Err(f) => Err(self.classify(f)),
        }
    }

    /// Posts a new message (`?wait=true`) and returns its id; a refused body is sent again
    /// once as the text alone.
    async fn post(&self, m: &DiscordMessage, notice: &Notice) -> Result<String, NotifyError> {
        let url = self.url("", true);
        let answer = match self.call(reqwest::Method::POST, url.clone(), &self.body(m, true)).await {
            Err(Failure::FormBody) => {
                tracing::warn!(destination = %self.what(), "discord: the message was refused; sending the text alone");
                self.call(reqwest::Method::POST, url, &self.body(&fallback(notice), true)).await
            }
            other => other,
        }
        .map_err(|f| self.classify(f))?;
        let id =
            answer.get("id").and_then(Value::as_str).filter(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()));
        match id {
            Some(id) => {
                tracing::info!(destination = %self.what(), message_id = %id, kind = ?notice.kind, "discord: posted");
                Ok(id.to_string())
            }
            None => Err(NotifyError::retry(format!("{}: the answer carries no message id", self.what()), None)
                .because(FailureReason::BadAnswer)),
        }
    }

    fn classify(&self, f: Failure) -> NotifyError {
        match f {
            Failure::Other(e) => e,
            Failure::FormBody => NotifyError::fatal(format!(
                "{}: HTTP 400 Bad Request: code {INVALID_FORM_BODY} (Invalid Form Body), also for the text alone",
                self.what()
            )),
            Failure::Gone => NotifyError::fatal(format!("{}: code {UNKNOWN_MESSAGE} (Unknown Message)", self.what())),
        }
    }

    /// One request; `Ok` is the answer's JSON (`null` when it has none).
    async fn call(&self, method: reqwest::Method, url: reqwest::Url, body: &Value) -> Result<Value, Failure> {
        let what = self.what();
        let turn = self.bucket.enter().await;
        let response = self
            .client
            .request(method, url)
            .header(CONTENT_TYPE, "application/json")
            .body(serde_json::to_vec(body).expect("a JSON value serializes"))
            .send()
            .await
            .map_err(|e| Failure::Other(transport_error(&what, &e)))?;
        let (status, headers, answer) = read_answer(response).await;
        turn.answered(&headers);
        let json: Value = serde_json::from_str(&answer).unwrap_or(Value::Null);
        if (200..300).contains(&status) {
            return Ok(json);
        }
        let code = json.get("code").and_then(Value::as_i64);
        match (status, code) {
            (400, Some(INVALID_FORM_BODY)) => return Err(Failure::FormBody),
            (404, Some(UNKNOWN_MESSAGE)) => return Err(Failure::Gone),
            _ => {}
        }
        Err(Failure::Other(self.error(status, &headers, &json, &answer)))
    }

    fn error(&self, status: u16, headers: &HeaderMap, json: &Value, answer: &str) -> NotifyError {
        let e = status_error(&self.what(), status, headers, answer, &self.redactor);
        if status == 429 {
            let asked = json.get("retry_after").and_then(Value::as_f64).filter(|s| s.is_finite() && *s >= 0.0);
            let wait = asked.map(|s| Duration::from_secs_f64(s).min(MAX_RETRY_AFTER)).or(e.retry_after);
            let global = json.get("global").and_then(Value::as_bool) == Some(true)
                || headers.get("x-ratelimit-global").is_some();
            let scope = if global { "the global rate limit" } else { "the webhook's rate limit" };
            return NotifyError { message: format!("{}: {scope}", e.message), retry_after: wait, ..e };
        }
        let code = json.get("code").and_then(Value::as_i64);
        let e = match code {
            Some(c) => NotifyError { message: format!("{}: code {c}{}", e.message, code_name(c)), ..e },
            None => e,
        };
        if e.retryable {
            return e;
        }
        let at = format!("the [[notify.discord]] named {:?}", self.name);
        let hint = match code {
            Some(UNKNOWN_WEBHOOK) | Some(INVALID_WEBHOOK_TOKEN) => Some(format!(
                "Discord does not know this webhook (deleted, or its token reset): copy its URL again into webhook_url of {at}"
            )),
            Some(10003) => Some(format!("no such thread in the webhook's channel: check thread_id of {at}")),
            _ => crate::notify::status_hint(status, &format!("webhook_url of {at}"), &format!("webhook_url of {at}")),
        };
        e.hint(hint)
    }

    /// Whether the notice already arrived (see the module docs): an edit whose message
    /// already shows what this notice renders. Anything else: cannot tell (`None`).
    pub async fn already_sent(&self, notice: &Notice, state: Option<&Value>) -> Result<Option<Sent>, NotifyError> {
        let Some(p) = Posted::from_state(state) else { return Ok(None) };
        let m = match notice.kind {
            NoticeKind::Verdict if !notice.changed => message(notice),
            NoticeKind::Resolved => resolved_edit(notice, p.embed.as_ref()),
            _ => return Ok(None),
        };
        let what = self.what();
        let url = self.url(&format!("/messages/{}", p.id), false);
        let turn = self.bucket.enter().await;
        let response = self.client.get(url).send().await.map_err(|e| transport_error(&what, &e))?;
        let (status, headers, answer) = read_answer(response).await;
        turn.answered(&headers);
        if status == 404 {
            return Ok(None);
        }
        if !(200..300).contains(&status) {
            let json: Value = serde_json::from_str(&answer).unwrap_or(Value::Null);
            return Err(self.error(status, &headers, &json, &answer));
        }
        let shown: Value = serde_json::from_str(&answer).unwrap_or(Value::Null);
        let want = m.embeds.first();
        let same = |k: &str| shown["embeds"][0][k] == want.map_or(Value::Null, |w| w[k].clone());
        if want.is_some() && same("title") && same("description") {
            let embed = want.cloned();
            return Ok(Some(Sent { state: Some(Posted { id: p.id, embed }.state()) }));
        }
        Ok(None)
    }

    /// `check-config --connect`: `GET <webhook_url>`, which Discord answers with the
    /// webhook (its name and channel) without posting; 401/404 mean a wrong URL or token.
    /// Not verified: `thread_id` and `username` (checked on a real post).
    pub async fn probe(&self) -> Result<String, NotifyError> {
        let what = self.what();
        let response =
            self.client.get(self.url.expose_secret()).send().await.map_err(|e| transport_error(&what, &e))?;
        let (status, headers, answer) = read_answer(response).await;
        let json: Value = serde_json::from_str(&answer).unwrap_or(Value::Null);
        if (200..300).contains(&status) {
            let channel = json.get("channel_id").and_then(Value::as_str).unwrap_or("?");
            let channel: String = channel.chars().filter(char::is_ascii_digit).take(24).collect();
            return Ok(format!(
                "the webhook is known (GET answered it, for channel {channel}); nothing was posted; thread_id and username are not verified"
            ));
        }
        Err(self.error(status, &headers, &json, &answer))
    }
}

/// Discord's name of a JSON error code this notifier knows, as ` (Name)`.
fn code_name(code: i64) -> &'static str {
    match code {
        UNKNOWN_MESSAGE => " (Unknown Message)",
        UNKNOWN_WEBHOOK => " (Unknown Webhook)",
        INVALID_WEBHOOK_TOKEN => " (Invalid Webhook Token)",
        INVALID_FORM_BODY => " (Invalid Form Body)",
        10003 => " (Unknown Channel)",
        50006 => " (Cannot send an empty message)",
        40005 => " (Request entity too large)",
        _ => "",
    }
}

impl Destination for Discord {
    fn name(&self) -> String {
        self.what()
    }
    fn wants(&self, notice: &Notice) -> bool {
        Discord::wants(self, notice)
    }
    fn send<'a>(&'a self, notice: &'a Notice, state: Option<&'a Value>) -> BoxFuture<'a, Result<Sent, NotifyError>> {
        Box::pin(Discord::send(self, notice, state))
    }
    fn already_sent<'a>(
        &'a self,
        notice: &'a Notice,
        state: Option<&'a Value>,
    ) -> BoxFuture<'a, Result<Option<Sent>, NotifyError>> {
        Box::pin(Discord::already_sent(self, notice, state))
    }
    fn probe(&self) -> BoxFuture<'_, Result<String, NotifyError>> {
        Box::pin(Discord::probe(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_is_read_only_with_a_numeric_message_id() {
        let p = Posted::from_state(Some(&json!({"message_id": "123", "embed": {"title": "t"}}))).unwrap();
        assert_eq!(p.state(), json!({"message_id": "123", "embed": {"title": "t"}}));
        assert_eq!(Posted::from_state(Some(&json!({"message_id": "../x"}))), None);
        assert_eq!(Posted::from_state(Some(&json!({"channel": "C1", "ts": "1.2"}))), None);
        assert_eq!(Posted::from_state(None), None);
    }
}
