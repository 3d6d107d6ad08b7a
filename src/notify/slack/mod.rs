//! Slack: one message per job's episode (however many alert groups carry it), updated and
//! threaded in `web_api` mode.
//!
//! Messages are built by the pure [`crate::render::slack`]; this module only sends them.
//!
//! # `web_api` mode (a bot token)
//!
//! * The first notice of a group is a new message: `POST {api_url}/chat.postMessage` with
//!   `Authorization: Bearer <token>` and the JSON body
//!   `{channel, text, blocks, metadata, unfurl_links: false, unfurl_media: false, parse:
//!   "none", link_names: false}` (no previews, no mentions made from names) where
//!   `metadata` is `{event_type: "culprit_verdict", event_payload: {idempotency_key,
//!   group_key}}`. Slack's answer (`channel`, `ts`) is the group's state:
//!   `Sent { state: Some({"channel": "C…", "ts": "1700000000.000100"}) }`.
//! * A later verdict of the group (state given) updates that message (`chat.update`, same
//!   `channel` and `ts`, new metadata) and posts a short reply in its thread (`thread_ts`)
//!   saying what it says now. After a verdict (first or changed) a second reply in the
//!   thread carries the details the message leaves out ([`crate::render::slack::details`]:
//!   the cause, numbers, runbook steps, notes), with its own metadata
//!   ([`DETAILS_EVENT_TYPE`]); refused blocks or size fall back to its text alone, as the
//!   message does. When it fails right after the message in a way worth retrying, the
//!   notice fails as [`FailureReason::PartlyDelivered`] (with Slack's `Retry-After`), so the
//!   outbox tries again later; that attempt, as after a crash that left the message posted
//!   but not recorded, first calls [`Slack::already_sent`], which finds the message and
//!   then the replies it lacks in its thread (by their metadata) and sends those, once. A
//!   message that could not be found that way (a new one in a channel configured by name,
//!   not by id) keeps the details best-effort: the failure is logged, since a retry would
//!   post the message again. If the message is gone (`message_not_found`,
//!   `cant_update_message`) the verdict is posted as a new message, which becomes the state.
//! * A revision of the verdict ([`Notice::is_revision`]: the same decision with other
//!   confidence or numbers) is `chat.update` of that message alone: no reply, no new
//!   message (a message that is gone is posted anew).
//! * [`NoticeKind::Resolved`] and [`NoticeKind::CouldNotDiagnose`] are replies in the
//!   thread; without a state they are new messages (and their message becomes the state).
//!   [`NoticeKind::Joined`] and [`NoticeKind::GroupResolved`] (another alert group carries
//!   the job's verdict, or stopped carrying it) are replies in the thread, and nothing
//!   without one.
//! * The state is the job's episode's ([`Notice::thread_key`]), whichever alert group a
//!   notice is about: one message per job however many groups carry its verdict.
//! * Posts to one channel are at least [`MIN_POST_INTERVAL`] apart, counted from the last
//!   answer: the sections posting with one token (or one incoming webhook) share one
//!   pacer in the process, and replicas take each post's slot from the shared ledger
//!   (`pacing`, [`crate::notify::pace`]).
//!
//! Slack answers most failures with HTTP 200 and `{"ok": false, "error": "<code>"}`:
//!
//! * [`FINAL_ERRORS`] (token, scopes, channel): final, logged as such;
//! * [`RETRYABLE_ERRORS`] (`ratelimited`, Slack-side failures): retryable, with
//!   `Retry-After` when given;
//! * [`BLOCK_ERRORS`] (`invalid_blocks`, `msg_too_long`, `msg_blocks_too_long`, …): sent
//!   again at once, once, as [`crate::render::slack::fallback`] (text alone, short enough
//!   to surely fit); only that failing fails;
//! * anything else: final.
//!
//! HTTP 429 (with `Retry-After`) and 5xx are retryable, other non-2xx final
//! ([`crate::notify::status_error`]); transport failures are retryable
//! ([`crate::notify::transport_error`]).
//!
//! # `incoming_webhook` mode (a webhook URL)
//!
//! Every notice is a new message (`POST <url>` of `{text, blocks}`): no threads, no
//! updates, no state, no details reply. Slack answers `ok` on 200; 400 with `invalid_blocks`
//! (or another of [`BLOCK_ERRORS`]) is sent again once as the fallback text alone; 429 and
//! 5xx are retryable; anything
//! else (403 `invalid_token`, 404 `no_service`, `channel_not_found`, …) final.
//!
//! # Secrets
//!
//! The token and the webhook URL (it holds a token) are never in `Debug`, errors or logs:
//! errors quote Slack's answer with them removed, and never a URL.

mod config;
mod hints;
mod history;
mod incident;
mod pacing;
mod picture;

pub use config::{SlackConfig, SlackImage, SlackMode};

use std::fmt;
use std::time::Duration;

use futures::future::BoxFuture;
use reqwest::header::{CONTENT_TYPE, HeaderMap};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};

use crate::model::notice::{Notice, NoticeKind};
use crate::model::secret::Redactor;
use crate::notify::{Destination, FailureReason, NotifyError, Sent, retry_after, status_error, transport_error};
use crate::render::slack::{
    Actions, INCIDENT_EVENT_TYPE, SlackMessage, changed_reply, details, details_fallback, fallback, message,
    with_actions,
};

/// Least time between two posts to one channel: Slack allows about one message per second
/// per channel.
/// <https://api.slack.com/docs/rate-limits#rate-limits__limits-when-posting-messages>
pub const MIN_POST_INTERVAL: Duration = Duration::from_secs(1);

/// Messages per page `already_sent` reads from the channel's history
/// (`conversations.history` `limit`; Slack recommends at most 200), paged back to the
/// notice's time ([`history`]).
/// <https://api.slack.com/methods/conversations.history>
pub const HISTORY_LIMIT: u32 = 100;

/// `metadata.event_type` of every message culprit posts.
/// <https://api.slack.com/metadata/using>
pub const EVENT_TYPE: &str = "culprit_verdict";

/// `metadata.event_type` of the details reply in a verdict's thread: its own type, so the
/// reply is never taken for the notice itself, and its own find after a crash
/// ([`Slack::already_sent`] sends it when it is missing).
pub const DETAILS_EVENT_TYPE: &str = "culprit_verdict_details";

/// Time one request may take, connection included.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Time to open the connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Most bytes of an answer read; the rest is dropped (history pages are the largest).
pub const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;

/// `ok: false` errors that trying again cannot fix: the token, its scopes or the channel
/// must change. <https://api.slack.com/methods/chat.postMessage#errors>
pub const FINAL_ERRORS: &[&str] = &[
    "invalid_auth",
    "not_authed",
    "account_inactive",
    "token_revoked",
    "token_expired",
    "no_permission",
    "missing_scope",
    "not_in_channel",
    "channel_not_found",
    "is_archived",
];

/// `ok: false` errors worth retrying (with `Retry-After` when Slack gives one).
/// <https://api.slack.com/methods/chat.postMessage#errors>
pub const RETRYABLE_ERRORS: &[&str] =
    &["ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"];

/// Errors about the blocks or the size of a message: it is sent again once, as the short
/// fallback text alone. <https://api.slack.com/methods/chat.postMessage#errors>;
/// `msg_blocks_too_long` is Slack's answer to blocks with too much text in all
/// (slackapi/bolt-js#2509).
pub const BLOCK_ERRORS: &[&str] =
    &["invalid_blocks", "invalid_blocks_format", "msg_too_long", "msg_blocks_too_long", "too_many_blocks"];

/// `chat.update` errors meaning the message to update is gone: a new one is posted.
/// <https://api.slack.com/methods/chat.update#errors>
const GONE_ERRORS: &[&str] = &["message_not_found", "cant_update_message"];

/// The pacing key of the incoming webhook's (single) channel.
const WEBHOOK_CHANNEL: &str = "incoming_webhook";

/// The Slack notifier. `Debug` shows no secret.
pub struct Slack {
    /// `slack` or `slack:<name>` ([`SlackConfig::destination_name`]).
    name: String,
    mode: Mode,
    client: reqwest::Client,
    /// Posts per channel, shared by every section with this token (or webhook).
    pacer: std::sync::Arc<pacing::Pacer>,
    /// Spaces history reads (Tier 3).
    reads: history::ReadPacer,
    /// Every wire form of the token or webhook URL, removed from anything quoted back.
    redactor: Redactor,
    /// When each incident summary (by `ts`) may next be updated.
    incident_updates: crate::notify::pace::KeyedPacer,
    /// How the verdict's picture goes ([`picture`]).
    image: SlackImage,
    /// The buttons that act its verdict messages carry (`signing_secret` set, web_api).
    actions: Actions,
}

enum Mode {
    WebApi { api_url: String, token: SecretString, channel: String },
    Webhook { url: SecretString },
}

impl fmt::Debug for Slack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.mode {
            Mode::WebApi { api_url, channel, .. } => f
                .debug_struct("Slack")
                .field("mode", &"web_api")
                .field("api_url", api_url)
                .field("channel", channel)
                .field("token", &"[REDACTED]")
                .finish_non_exhaustive(),
            Mode::Webhook { .. } => f
                .debug_struct("Slack")
                .field("mode", &"incoming_webhook")
                .field("webhook_url", &"[REDACTED]")
                .finish_non_exhaustive(),
        }
    }
}

/// The message a group's notices thread under: the state of `web_api` mode.
#[derive(Debug, Clone, PartialEq)]
struct Parent {
    channel: String,
    ts: String,
    /// The thread the message is itself a reply in (a job's verdict in an incident's
    /// thread): replies about it go there too, as Slack asks for the parent's `ts`.
    thread_ts: Option<String>,
}

impl Parent {
    fn from_state(state: Option<&Value>) -> Option<Parent> {
        let s = state?;
        let channel = s.get("channel")?.as_str()?.to_string();
        let ts = s.get("ts")?.as_str()?.to_string();
        let thread_ts = s.get("thread_ts").and_then(Value::as_str).filter(|t| !t.is_empty()).map(str::to_string);
        (!channel.is_empty() && !ts.is_empty()).then_some(Parent { channel, ts, thread_ts })
    }

    fn from_answer(answer: &Value) -> Option<Parent> {
        Parent::from_state(Some(answer))
    }

    fn state(&self) -> Value {
        match &self.thread_ts {
            Some(t) => json!({ "channel": self.channel, "ts": self.ts, "thread_ts": t }),
            None => json!({ "channel": self.channel, "ts": self.ts }),
        }
    }

    /// The `thread_ts` of a reply about this message.
    fn thread(&self) -> &str {
        self.thread_ts.as_deref().unwrap_or(&self.ts)
    }
}

/// One read of [`Slack::already_sent`]: the method and its query, whether it reads back to
/// the notice's time (`oldest`), and whether what it finds is a reply in the group's thread.
struct Lookup<'a> {
    method: &'static str,
    query: Vec<(&'a str, &'a str)>,
    back: bool,
    reply: bool,
}

/// Why a Slack call failed, before classification.
enum Failure {
    /// HTTP 200 with `ok: false`.
    /// `needed`: the scope a `missing_scope` answer names ([`hints::scopes`]).
    Api { code: String, needed: Option<String>, retry_after: Option<Duration> },
    /// Anything else, already classified.
    Other(NotifyError),
}

/// Before a later request of one send ([`crate::notify::fence`]): an error when this
/// replica lost the send's lease meanwhile (the replica that took it over completes the
/// thread from what it finds posted).
async fn still_held(next: &str) -> Result<(), NotifyError> {
    if crate::notify::fence::held().await {
        return Ok(());
    }
    tracing::warn!(
        destination = "slack",
        next,
        "slack: the lease on this send was lost; the rest of it is left to the replica that took it over"
    );
    Err(NotifyError::retry(format!("slack: the lease on this send was lost before {next}"), None)
        .because(FailureReason::PartlyDelivered))
}

fn metadata(notice: &Notice) -> Value {
    metadata_of(EVENT_TYPE, notice)
}

fn metadata_of(event_type: &str, notice: &Notice) -> Value {
    json!({
        "event_type": event_type,
        "event_payload": { "idempotency_key": notice.idempotency_key, "group_key": notice.group_key }
    })
}

/// Whether a message of a history or thread carries `event_type` metadata for `notice`.
fn carries(m: &Value, event_type: &str, notice: &Notice) -> bool {
    let md = &m["metadata"];
    md["event_type"] == event_type
        && md["event_payload"]["idempotency_key"].as_str() == Some(notice.idempotency_key.as_str())
}

/// A bounded, lossy UTF-8 read of an answer.
async fn read_answer(mut response: reqwest::Response) -> Result<String, reqwest::Error> {
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = MAX_ANSWER_BYTES - bytes.len();
        bytes.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if bytes.len() >= MAX_ANSWER_BYTES {
            break;
        }
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Classifies an `ok: false` code (see the module docs). Block errors are final here: they
/// reach this point only when the text-only retry failed too.
/// A final error carries what to do about it ([`hints`]).
fn classify(what: &str, code: &str, needed: Option<&str>, retry_after: Option<Duration>) -> NotifyError {
    if code == "ratelimited" {
        NotifyError::retry(format!("{what}: {code}"), retry_after).because(FailureReason::RateLimited)
    } else if RETRYABLE_ERRORS.contains(&code) {
        NotifyError::retry(format!("{what}: {code}"), retry_after)
    } else {
        let needed_text = needed.map(|n| format!(" (needed: {n})")).unwrap_or_default();
        NotifyError::fatal(format!("{what}: {code}{needed_text}")).hint(hints::hint(code, needed))
    }
}

fn classify_failure(method: &str, failure: Failure) -> NotifyError {
    match failure {
        Failure::Api { code, needed, retry_after } => {
            classify(&format!("slack: {method}"), &code, needed.as_deref(), retry_after)
        }
        Failure::Other(e) => e,
    }
}

impl Slack {
    /// The notifier from its configuration; reads the secret now.
    ///
    /// Errors (never showing a secret): `web_api` without `token` or `channel`, an empty
    /// token, `api_url` not http(s); `incoming_webhook` without `webhook_url`, or one that
    /// is not an http(s) URL; a secret that cannot be read; an HTTP client that cannot be
    /// built.
    pub fn new(cfg: &SlackConfig) -> Result<Slack, String> {
        let http = |u: &str| reqwest::Url::parse(u).is_ok_and(|u| matches!(u.scheme(), "http" | "https"));
        let mode = match cfg.mode {
            SlackMode::WebApi => {
                let token = cfg.token.as_ref().ok_or("slack: mode web_api needs `token`")?;
                let token = token.resolve().map_err(|e| format!("slack: token: {e}"))?;
                if token.expose_secret().trim().is_empty() {
                    return Err("slack: the token is empty".into());
                }
                let channel = cfg.channel.as_deref().map(str::trim).unwrap_or_default();
                if channel.is_empty() {
                    return Err("slack: mode web_api needs `channel`".into());
                }
                if !http(&cfg.api_url) {
                    return Err(format!("slack: api_url `{}` is not an http(s) URL", cfg.api_url));
                }
                Mode::WebApi {
                    api_url: cfg.api_url.trim_end_matches('/').to_string(),
                    token,
                    channel: channel.to_string(),
                }
            }
            SlackMode::IncomingWebhook => {
                let url = cfg.webhook_url.as_ref().ok_or("slack: mode incoming_webhook needs `webhook_url`")?;
                let url = url.resolve().map_err(|e| format!("slack: webhook_url: {e}"))?;
                if !http(url.expose_secret().trim()) {
                    return Err("slack: webhook_url is not an http(s) URL".into());
                }
                Mode::Webhook { url: SecretString::from(url.expose_secret().trim().to_string()) }
            }
        };
        let client = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("culprit/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|_| "slack: cannot build the HTTP client".to_string())?;
        let redactor = redactor_of(&mode);
        let scope = pacing::scope_of(&mode);
        Ok(Slack {
            name: cfg.destination_name(),
            pacer: pacing::Pacer::of(&scope),
            reads: history::ReadPacer::new(&scope),
            mode,
            client,
            redactor,
            incident_updates: crate::notify::pace::KeyedPacer::new(
                &format!("{scope}:update"),
                incident::INCIDENT_UPDATE_INTERVAL,
            ),
            image: cfg.image,
            actions: Actions {
                rediagnose: cfg.signing_secret.is_some() && cfg.mode == SlackMode::WebApi,
                silence: cfg.signing_secret.is_some()
                    && cfg.mode == SlackMode::WebApi
                    && cfg.alertmanager_url.is_some(),
            },
        })
    }

    /// `web_api` wants every notice: verdicts (first, changed and revised in place),
    /// resolutions, failures to diagnose, and the alert groups that join or leave a job's
    /// verdict (replies in its thread). `incoming_webhook` can neither update nor thread:
    /// it takes no revision and no group's joining or leaving (each would be a new message
    /// in the channel).
    pub fn wants(&self, notice: &Notice) -> bool {
        match self.mode {
            Mode::WebApi { .. } => true,
            Mode::Webhook { .. } => {
                !notice.is_revision()
                    && !matches!(notice.kind, NoticeKind::Joined | NoticeKind::GroupResolved | NoticeKind::Incident)
            }
        }
    }

    /// Sends the notice once (see the module docs for what each mode and kind does).
    ///
    /// `state` is what the last delivery for the group returned. `Ok` carries the group's
    /// state in `web_api` mode (`{"channel", "ts"}` of the message to update and thread
    /// under; `None` when Slack's answer lacked them) and `None` in `incoming_webhook` mode.
    /// Errors are classified as in the module docs; their messages never hold a secret.
    pub async fn send(&self, notice: &Notice, state: Option<&Value>) -> Result<Sent, NotifyError> {
        match &self.mode {
            Mode::WebApi { channel, .. } => self.send_web_api(channel, notice, state).await,
            Mode::Webhook { url } => self.send_webhook(url, notice).await,
        }
    }

    /// After a crash between a post and recording it: looks for the notice's message in
    /// the channel (the state's, else the configured one) by
    /// `metadata.event_payload.idempotency_key` (`include_all_metadata=true`): the group's
    /// own message (an update keeps its `ts`), then `conversations.history` paged back to
    /// the notice's own time ([`history`]: however busy the channel), then the group's
    /// thread (`conversations.replies`: replies are not in the channel history).
    ///
    /// `Ok(Some)` with the found message as state (`{"channel", "ts"}`); `Ok(None)` when it
    /// is not there, in `incoming_webhook` mode, or when the history cannot be read for a
    /// reason retrying will not fix (a missing `channels:history` scope, a channel given by
    /// name: logged). A verdict found posted gets the replies it may lack
    /// (`complete_thread`). Errors: retryable failures only (rate limits, 5xx, transport).
    pub async fn already_sent(&self, notice: &Notice, state: Option<&Value>) -> Result<Option<Sent>, NotifyError> {
        let Mode::WebApi { channel, .. } = &self.mode else {
            return Ok(None);
        };
        // A job's first verdict in an incident went into the summary's thread: look there.
        let in_incident = Parent::from_state(notice.incident_parent.as_ref()).filter(|_| state.is_none());
        let under_summary = in_incident.is_some();
        let parent = Parent::from_state(state).or(in_incident);
        let channel = parent.as_ref().map_or_else(|| channel.clone(), |p| p.channel.clone());
        let oldest = history::oldest(notice.at_ms);
        // A summary carries its own event type.
        let event_type = if notice.kind == NoticeKind::Incident { INCIDENT_EVENT_TYPE } else { EVENT_TYPE };
        let ch = ("channel", channel.as_str());
        let mut lookups: Vec<Lookup> = Vec::new();
        if let Some(p) = &parent {
            let one = vec![ch, ("latest", p.ts.as_str()), ("oldest", p.ts.as_str()), ("inclusive", "true")];
            lookups.push(Lookup { method: "conversations.history", query: one, back: false, reply: false });
        }
        lookups.push(Lookup { method: "conversations.history", query: vec![ch], back: true, reply: false });
        if let Some(p) = &parent {
            // The thread the message replies in (an incident's), else its own.
            let query = vec![ch, ("ts", p.thread())];
            lookups.push(Lookup { method: "conversations.replies", query, back: true, reply: true });
        }
        for Lookup { method, query, back, reply } in lookups {
            let mut ts = None;
            let scanned = self
                .scan(method, &query, oldest.as_deref().filter(|_| back), |m| {
                    ts = m["ts"].as_str().filter(|_| carries(m, event_type, notice)).map(str::to_string);
                    ts.is_some()
                })
                .await;
            if let Err(f) = scanned {
                let e = classify_failure(method, f);
                if e.retryable {
                    return Err(e);
                }
                tracing::warn!(destination = "slack", error = %e, "slack: cannot read the channel history; the notice is sent again");
                return Ok(None);
            }
            let Some(ts) = ts else { continue };
            tracing::info!(destination = "slack", channel = %channel, ts, "slack: the notice was already posted");
            // Found in the summary's thread: the reply is the job's message (it has no
            // details reply to complete).
            if let (true, true, Some(summary)) = (under_summary, reply, &parent) {
                let own = Parent { channel: channel.clone(), ts, thread_ts: Some(summary.thread().to_string()) };
                return Ok(Some(Sent { state: Some(own.state()) }));
            }
            // A reply leaves the group's message (the state) as it was. A verdict found as
            // the group's own message was an update: its "changed" reply may be missing.
            let (thread, updated) = match (&parent, reply) {
                (Some(p), true) => (p.clone(), false),
                _ => {
                    let found = Parent { channel: channel.clone(), ts, thread_ts: None };
                    let updated = parent.as_ref() == Some(&found);
                    (found, updated)
                }
            };
            self.complete_thread(&thread, notice, updated).await?;
            return Ok(Some(Sent { state: Some(thread.state()) }));
        }
        Ok(None)
    }

    /// After a crash: the replies a verdict's message found already posted may still lack
    /// (the "changed" reply of an update, the details), each found by its own metadata in
    /// the thread (paged back to the notice's time), else sent now, so that each arrives
    /// once. Errors: retryable failures only (the notice is asked about again later);
    /// anything else is logged.
    async fn complete_thread(&self, thread: &Parent, notice: &Notice, updated: bool) -> Result<(), NotifyError> {
        let want_details = details(notice).is_some();
        // A revision is the message updated alone: no reply goes with it.
        if notice.kind != NoticeKind::Verdict || notice.is_revision() || !(want_details || updated) {
            return Ok(());
        }
        let method = "conversations.replies";
        let query = [("channel", thread.channel.as_str()), ("ts", thread.thread())];
        let (mut has_changed, mut has_details) = (false, false);
        let oldest = history::oldest(notice.at_ms);
        // Slack lists the thread's own message first: it is not a reply.
        let scanned = self
            .scan(method, &query, oldest.as_deref(), |m| {
                let reply = m["ts"] != thread.ts;
                has_changed |= reply && carries(m, EVENT_TYPE, notice);
                has_details |= reply && carries(m, DETAILS_EVENT_TYPE, notice);
                (has_changed || !updated) && (has_details || !want_details)
            })
            .await;
        if let Err(f) = scanned {
            match classify_failure(method, f) {
                e if e.retryable => return Err(e),
                e => {
                    tracing::warn!(destination = "slack", error = %e, "slack: cannot read the thread; its replies are sent again")
                }
            }
        }
        let result = async {
            if updated && !has_changed {
                still_held("its \"changed\" reply").await?;
                self.post_reply(thread, notice, &changed_reply(notice)).await?;
            }
            if want_details && !has_details {
                self.post_details(thread, notice).await?;
            }
            Ok::<_, NotifyError>(())
        }
        .await;
        match result {
            Err(e) if e.retryable => Err(e),
            Err(e) => {
                tracing::warn!(destination = "slack", error = %e, "slack: a reply to the recovered message failed for good");
                Ok(())
            }
            Ok(()) => Ok(()),
        }
    }

    /// A dry run that posts nothing, for `check-config --connect`. `web_api`:
    /// [`auth.test`](https://api.slack.com/methods/auth.test) with the token (the bot and
    /// team it belongs to). `incoming_webhook`: an empty post, which Slack refuses with 400
    /// `no_text` (or `invalid_payload`) when the webhook exists and posts nothing; 403/404
    /// (`invalid_token`, `no_service`) say it is revoked or wrong.
    pub async fn probe(&self) -> Result<String, NotifyError> {
        match &self.mode {
            Mode::WebApi { api_url, channel, .. } => {
                let answer =
                    self.call_json("auth.test", &json!({})).await.map_err(|f| classify_failure("auth.test", f))?;
                let field = |k: &str| answer.get(k).and_then(Value::as_str).unwrap_or("?").to_string();
                Ok(format!(
                    "the token is valid (auth.test at {api_url}: bot {} in team {}); posts go to channel {channel}; nothing was posted",
                    field("user"),
                    field("team")
                ))
            }
            Mode::Webhook { url } => {
                let what = "slack: incoming webhook";
                let response = self
                    .client
                    .post(url.expose_secret())
                    .header(CONTENT_TYPE, "application/json; charset=utf-8")
                    .body("{}")
                    .send()
                    .await
                    .map_err(|e| transport_error(what, &e))?;
                let status = response.status().as_u16();
                let headers = response.headers().clone();
                let answer = read_answer(response).await.unwrap_or_default();
                match (status, answer.trim()) {
                    (400, "no_text" | "invalid_payload" | "missing_text_or_fallback_or_attachments") => Ok(format!(
                        "the webhook exists (an empty post was refused with 400 {}, so nothing was posted)",
                        answer.trim()
                    )),
                    _ => Err(status_error(what, status, &headers, &answer, &self.redactor)),
                }
            }
        }
    }

    async fn send_web_api(&self, channel: &str, notice: &Notice, state: Option<&Value>) -> Result<Sent, NotifyError> {
        if notice.kind == NoticeKind::Incident {
            return self.send_incident(channel, notice, state).await;
        }
        let msg = with_actions(self.message(notice), notice, self.actions);
        let parent = Parent::from_state(state);
        if state.is_some() && parent.is_none() {
            tracing::warn!(
                destination = "slack",
                "slack: the group's state has no channel and ts; posting a new message"
            );
        }
        let Some(parent) = parent else {
            if matches!(notice.kind, NoticeKind::Joined | NoticeKind::GroupResolved) {
                // Its verdict's message is not known (it failed for good): a reply about a
                // group has nothing to reply to, and is no top-level post of its own.
                tracing::warn!(destination = "slack", kind = ?notice.kind,
                    "slack: no message of the job's verdict to reply under; the alert group's note is left out");
                return Ok(Sent { state: None });
            }
            // A job counted in an incident: its verdict goes into the summary's thread.
            if notice.kind == NoticeKind::Verdict
                && let Some(summary) = Parent::from_state(notice.incident_parent.as_ref())
            {
                return self.post_in_incident(&summary, notice, &msg).await;
            }
            return self.post_new(channel, notice, &msg).await;
        };
        if notice.is_revision() {
            // The same decision with other confidence or numbers: the message shows the
            // latest in place, and nothing new is posted.
            if !self.update(&parent, notice, &msg).await? {
                return self.post_new(channel, notice, &msg).await;
            }
        } else if notice.kind == NoticeKind::Verdict {
            if !self.update(&parent, notice, &msg).await? {
                return self.post_new(channel, notice, &msg).await;
            }
            still_held("its \"changed\" reply").await?;
            self.post_reply(&parent, notice, &changed_reply(notice)).await?;
            // The state names the message: the next attempt finds it in its channel.
            self.post_details_after(&parent, notice, true).await?;
            self.share_picture(&parent, notice).await;
        } else {
            self.post_reply(&parent, notice, &msg).await?;
        }
        Ok(Sent { state: Some(parent.state()) })
    }

    /// `chat.update` of the group's message with `msg`; `false` when the message is gone
    /// (`message_not_found`, `cant_update_message`: the caller posts a new one).
    async fn update(&self, parent: &Parent, notice: &Notice, msg: &SlackMessage) -> Result<bool, NotifyError> {
        let body = |text: &str, blocks: &[Value]| {
            json!({
                "channel": parent.channel,
                "ts": parent.ts,
                "text": text,
                "blocks": blocks,
                "metadata": metadata(notice),
                "parse": "none",
                "link_names": false,
            })
        };
        // `blocks: []` clears the old blocks; leaving them out would keep them.
        let full = body(&msg.text, &msg.blocks);
        match self.write("chat.update", None, full, body(&fallback(notice).text, &[])).await {
            Ok(_) => Ok(true),
            Err(Failure::Api { code, .. }) if GONE_ERRORS.contains(&code.as_str()) => {
                tracing::warn!(destination = "slack", error = %code, "slack: the group's message is gone; posting a new one");
                Ok(false)
            }
            Err(f) => Err(self.error("chat.update", f)),
        }
    }

    /// A new top-level message; its `channel` and `ts` are the state.
    async fn post_new(&self, channel: &str, notice: &Notice, msg: &SlackMessage) -> Result<Sent, NotifyError> {
        let answer = self.post(channel, None, notice, msg).await?;
        let Some(parent) = Parent::from_answer(&answer) else {
            tracing::warn!(
                destination = "slack",
                "slack: chat.postMessage answered ok without channel and ts; later notices cannot thread"
            );
            return Ok(Sent { state: None });
        };
        self.pacer.learn(channel, &parent.channel);
        tracing::info!(destination = "slack", channel = %parent.channel, ts = %parent.ts, kind = ?notice.kind, "slack: posted");
        // Without a state, the next attempt looks in the configured channel: only an id
        // (what Slack answers with) can be read there.
        self.post_details_after(&parent, notice, channel == parent.channel).await?;
        self.share_picture(&parent, notice).await;
        Ok(Sent { state: Some(parent.state()) })
    }

    /// [`Self::post_details`] right after the verdict's message. A failure worth retrying
    /// fails the notice as [`FailureReason::PartlyDelivered`] when the next attempt can
    /// find the message (`findable`) and so send only the details; otherwise, and for a
    /// final failure, it is logged (a retry would post the message again).
    async fn post_details_after(&self, parent: &Parent, notice: &Notice, findable: bool) -> Result<(), NotifyError> {
        match self.post_details(parent, notice).await {
            Ok(()) => Ok(()),
            Err(e) if e.retryable && findable => Err(NotifyError {
                message: format!("{} (the verdict's message was posted; its details reply is sent again)", e.message),
                ..e
            }
            .because(FailureReason::PartlyDelivered)),
            Err(e) => {
                tracing::warn!(destination = "slack", error = %e, "slack: the details reply failed; the verdict itself was posted");
                Ok(())
            }
        }
    }

    /// The verdict's details in its thread, with their own metadata type
    /// ([`DETAILS_EVENT_TYPE`]). Refused blocks or size ([`BLOCK_ERRORS`]) are sent again
    /// once as [`details_fallback`] (text alone, short enough to surely fit), as the
    /// message itself is.
    async fn post_details(&self, parent: &Parent, notice: &Notice) -> Result<(), NotifyError> {
        let (Some(d), Some(short)) = (details(notice), details_fallback(notice)) else { return Ok(()) };
        still_held("its details reply").await?;
        let body = |text: &str, blocks: &[Value]| {
            let mut b = json!({
                "channel": parent.channel,
                "thread_ts": parent.thread(),
                "text": text,
                "metadata": metadata_of(DETAILS_EVENT_TYPE, notice),
                "unfurl_links": false,
                "unfurl_media": false,
                "parse": "none",
                "link_names": false,
            });
            if !blocks.is_empty() {
                b["blocks"] = json!(blocks);
            }
            b
        };
        let method = "chat.postMessage";
        let (full, short) = (body(&d.text, &d.blocks), body(&short.text, &[]));
        self.write(method, Some(&parent.channel), full, short).await.map_err(|f| classify_failure(method, f))?;
        tracing::info!(destination = "slack", channel = %parent.channel, thread_ts = %parent.thread(), "slack: details replied in the thread");
        Ok(())
    }

    async fn post_reply(&self, parent: &Parent, notice: &Notice, msg: &SlackMessage) -> Result<(), NotifyError> {
        self.post(&parent.channel, Some(parent.thread()), notice, msg).await?;
        tracing::info!(destination = "slack", channel = %parent.channel, thread_ts = %parent.thread(), kind = ?notice.kind, "slack: replied in the thread");
        Ok(())
    }

    /// A plain reply (`mrkdwn` `text`, already escaped by the caller) in the thread of the
    /// message a group's state names (`{"channel", "ts"}`), paced: what a button did
    /// (`POST /slack/interactivity`). web_api mode only; no metadata (it is no notice).
    pub async fn reply_text(&self, state: &Value, text: &str) -> Result<(), NotifyError> {
        let Mode::WebApi { .. } = &self.mode else {
            return Err(NotifyError::fatal("slack: replies need mode web_api".to_string()));
        };
        let parent = Parent::from_state(Some(state))
            .ok_or_else(|| NotifyError::fatal("slack: the state names no message".to_string()))?;
        let body = json!({
            "channel": parent.channel, "thread_ts": parent.thread(), "text": text,
            "unfurl_links": false, "unfurl_media": false, "parse": "none", "link_names": false,
        });
        self.paced_call("chat.postMessage", Some(&parent.channel), &body)
            .await
            .map(|_| ())
            .map_err(|f| self.error("chat.postMessage", f))
    }

    /// `chat.postMessage`, paced, with the text-only retry.
    async fn post(
        &self,
        channel: &str,
        thread_ts: Option<&str>,
        notice: &Notice,
        msg: &SlackMessage,
    ) -> Result<Value, NotifyError> {
        let body = |text: &str, blocks: Option<&[Value]>| {
            let mut b = json!({
                "channel": channel,
                "text": text,
                "metadata": metadata(notice),
                "unfurl_links": false,
                "unfurl_media": false,
                "parse": "none",
                "link_names": false,
            });
            if let Some(blocks) = blocks {
                b["blocks"] = json!(blocks);
            }
            if let Some(ts) = thread_ts {
                b["thread_ts"] = json!(ts);
            }
            b
        };
        let method = "chat.postMessage";
        let full = body(&msg.text, Some(&msg.blocks));
        let short = body(&fallback(notice).text, None);
        self.write(method, Some(channel), full, short).await.map_err(|f| self.error(method, f))
    }

    /// Calls a write method with `full`; when Slack refuses the blocks or the size, once
    /// more with `short` (the fallback text alone). Posts (`pace` given) wait for the
    /// channel's slot each time.
    async fn write(&self, method: &str, pace: Option<&str>, full: Value, short: Value) -> Result<Value, Failure> {
        match self.paced_call(method, pace, &full).await {
            Err(Failure::Api { code, .. }) if BLOCK_ERRORS.contains(&code.as_str()) => {
                tracing::warn!(destination = "slack", method, error = %code, "slack: message refused; sending the short fallback text alone");
                self.paced_call(method, pace, &short).await
            }
            other => other,
        }
    }

    async fn paced_call(&self, method: &str, pace: Option<&str>, body: &Value) -> Result<Value, Failure> {
        let Some(channel) = pace else {
            return self.call_json(method, body).await;
        };
        self.pacer.wait(channel, self.home()).await;
        let result = self.call_json(method, body).await;
        self.pacer.done(channel);
        result
    }

    /// The configured channel (every post of this destination goes there or into its
    /// threads); the incoming webhook's own channel otherwise.
    fn home(&self) -> &str {
        match &self.mode {
            Mode::WebApi { channel, .. } => channel,
            Mode::Webhook { .. } => WEBHOOK_CHANNEL,
        }
    }

    fn request(&self, method: &str, verb: reqwest::Method) -> reqwest::RequestBuilder {
        let Mode::WebApi { api_url, token, .. } = &self.mode else {
            unreachable!("web API calls are made in web_api mode only")
        };
        self.client.request(verb, format!("{api_url}/{method}")).bearer_auth(token.expose_secret())
    }

    async fn call_json(&self, method: &str, body: &Value) -> Result<Value, Failure> {
        let body = serde_json::to_vec(body).expect("a JSON value serializes");
        let request = self
            .request(method, reqwest::Method::POST)
            .header(CONTENT_TYPE, "application/json; charset=utf-8")
            .body(body);
        self.call(method, request).await
    }

    /// Sends one Web API request; `Ok` is an answer with `ok: true`.
    async fn call(&self, method: &str, request: reqwest::RequestBuilder) -> Result<Value, Failure> {
        let what = format!("slack: {method}");
        let response = request.send().await.map_err(|e| Failure::Other(transport_error(&what, &e)))?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let answer = read_answer(response).await.map_err(|e| Failure::Other(transport_error(&what, &e)))?;
        if !(200..300).contains(&status) {
            return Err(Failure::Other(status_error(&what, status, &headers, &answer, &self.redactor)));
        }
        let Ok(answer) = serde_json::from_str::<Value>(&answer) else {
            // The answer goes to the log; the error is stored and served by the API.
            let excerpt = self.redactor.redact_cut(&answer, crate::notify::DETAIL_CHARS);
            tracing::warn!(destination = "slack", method, status, answer = %excerpt.trim(), "slack: the answer is not JSON");
            return Err(Failure::Other(
                NotifyError::retry(format!("{what}: HTTP {status}: the answer is not JSON"), None)
                    .because(FailureReason::BadAnswer),
            ));
        };
        if answer.get("ok").and_then(Value::as_bool) == Some(true) {
            return Ok(answer);
        }
        let code = answer.get("error").and_then(Value::as_str).unwrap_or("unknown_error");
        // Slack's error codes are snake_case words (<https://api.slack.com/web#errors>);
        // anything else is the answer's own text, which goes to the log only.
        let code = self.redactor.redact_cut(code, 100);
        let code = if is_error_code(&code) {
            code
        } else {
            tracing::warn!(destination = "slack", method, error = %code, "slack: `error` is not an error code");
            "not_an_error_code".to_string()
        };
        let needed = answer.get("needed").and_then(Value::as_str).and_then(hints::scopes);
        Err(Failure::Api { code, needed, retry_after: retry_after(&headers, jiff::Timestamp::now()) })
    }

    /// Classifies a failure, logging final ones.
    fn error(&self, method: &str, failure: Failure) -> NotifyError {
        let e = classify_failure(method, failure);
        if !e.retryable {
            tracing::error!(destination = "slack", method, error = %e, "slack: final error, not retrying");
        }
        e
    }

    /// The notice's message, with the picture's image block in [`SlackImage::Link`].
    fn message(&self, notice: &Notice) -> SlackMessage {
        match self.image {
            SlackImage::Link => crate::render::slack::with_picture(message(notice), notice),
            _ => message(notice),
        }
    }

    async fn send_webhook(&self, url: &SecretString, notice: &Notice) -> Result<Sent, NotifyError> {
        let msg = self.message(notice);
        let full = json!({ "text": msg.text, "blocks": msg.blocks, "unfurl_links": false, "unfurl_media": false, "parse": "none", "link_names": false });
        let result = match self.webhook_post(url, &full).await {
            Err(Failure::Api { code, .. }) => {
                tracing::warn!(destination = "slack", error = %code, "slack: incoming webhook refused the blocks; sending the text alone");
                let text = json!({ "text": fallback(notice).text, "unfurl_links": false, "unfurl_media": false, "parse": "none", "link_names": false });
                self.webhook_post(url, &text).await
            }
            other => other,
        };
        match result {
            Ok(()) => {
                tracing::info!(destination = "slack", kind = ?notice.kind, "slack: posted to the incoming webhook");
                Ok(Sent { state: None })
            }
            Err(f) => Err(self.error("incoming webhook", f)),
        }
    }

    /// One incoming-webhook post. `Failure::Api` is a 400 naming one of [`BLOCK_ERRORS`].
    async fn webhook_post(&self, url: &SecretString, body: &Value) -> Result<(), Failure> {
        self.pacer.wait(WEBHOOK_CHANNEL, WEBHOOK_CHANNEL).await;
        let result = self.webhook_post_now(url, body).await;
        self.pacer.done(WEBHOOK_CHANNEL);
        result
    }

    async fn webhook_post_now(&self, url: &SecretString, body: &Value) -> Result<(), Failure> {
        let what = "slack: incoming webhook";
        let response = self
            .client
            .post(url.expose_secret())
            .header(CONTENT_TYPE, "application/json; charset=utf-8")
            .body(serde_json::to_vec(body).expect("a JSON value serializes"))
            .send()
            .await
            .map_err(|e| Failure::Other(transport_error(what, &e)))?;
        let status = response.status().as_u16();
        let headers: HeaderMap = response.headers().clone();
        let answer = read_answer(response).await.map_err(|e| Failure::Other(transport_error(what, &e)))?;
        if (200..300).contains(&status) {
            return Ok(());
        }
        let code = answer.trim();
        if status == 400 && BLOCK_ERRORS.contains(&code) {
            return Err(Failure::Api { code: code.to_string(), needed: None, retry_after: None });
        }
        let e = status_error(what, status, &headers, &answer, &self.redactor);
        // Incoming webhooks answer their error as a bare code (`channel_is_archived`,
        // `invalid_token`, `no_service`, …): named in the error, with its hint when final.
        if e.retryable || !is_error_code(code) {
            return Err(Failure::Other(e));
        }
        let e = NotifyError { message: format!("{}: {code}", e.message), ..e };
        Err(Failure::Other(e.hint(hints::hint(code, None))))
    }
}

/// Whether `code` has the shape of a Slack error code: 1–64 of `a-z`, `0-9`, `_`.
fn is_error_code(code: &str) -> bool {
    (1..=64).contains(&code.len()) && code.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// The secrets of a mode, in every wire form: the token; the webhook URL, its path and
/// its last segment (Slack may echo any of them).
fn redactor_of(mode: &Mode) -> Redactor {
    let mut r = Redactor::new();
    match mode {
        Mode::WebApi { token, .. } => r.add(token.expose_secret()),
        Mode::Webhook { url } => r.add_url(url.expose_secret()),
    }
    r
}

impl Destination for Slack {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn wants(&self, notice: &Notice) -> bool {
        Slack::wants(self, notice)
    }
    fn send<'a>(&'a self, notice: &'a Notice, state: Option<&'a Value>) -> BoxFuture<'a, Result<Sent, NotifyError>> {
        Box::pin(Slack::send(self, notice, state))
    }
    fn already_sent<'a>(
        &'a self,
        notice: &'a Notice,
        state: Option<&'a Value>,
    ) -> BoxFuture<'a, Result<Option<Sent>, NotifyError>> {
        Box::pin(Slack::already_sent(self, notice, state))
    }
    fn probe(&self) -> BoxFuture<'_, Result<String, NotifyError>> {
        Box::pin(Slack::probe(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_is_read_only_when_it_has_a_channel_and_a_ts() {
        let p = Parent::from_state(Some(&json!({"channel": "C1", "ts": "1.2"}))).unwrap();
        assert_eq!(p.state(), json!({"channel": "C1", "ts": "1.2"}));
        assert_eq!(Parent::from_state(Some(&json!({"channel": "C1"}))), None);
        assert_eq!(Parent::from_state(Some(&json!({"dedup_key": "x"}))), None);
        assert_eq!(Parent::from_state(None), None);
    }

    #[test]
    fn slack_error_codes_are_classified_as_documented() {
        let e = classify("slack: chat.postMessage", "invalid_auth", None, None);
        assert!(!e.retryable && e.hint.as_deref().is_some_and(|h| h.contains("reinstall the app")), "{e}");
        let e = classify("slack: chat.postMessage", "ratelimited", None, Some(Duration::from_secs(3)));
        assert!(e.retryable && e.retry_after == Some(Duration::from_secs(3)) && e.hint.is_none());
        assert!(classify("x", "internal_error", None, None).retryable);
        assert!(classify("x", "service_unavailable", None, None).retryable);
        assert!(!classify("x", "invalid_arguments", None, None).retryable);
        assert!(!classify("x", "invalid_blocks", None, None).retryable);
        let e = classify("slack: chat.postMessage", "missing_scope", Some("chat:write"), None);
        assert_eq!(
            e.message,
            format!("slack: chat.postMessage: missing_scope (needed: chat:write). To fix: {}", e.hint.clone().unwrap())
        );
    }
}
