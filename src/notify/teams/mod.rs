//! Microsoft Teams through a Workflows (Power Automate) webhook: the "When a Teams webhook
//! request is received" trigger of a flow that posts the card to a channel or chat. (The
//! Office 365 connectors' incoming webhooks are retired:
//! <https://devblogs.microsoft.com/microsoft365dev/retirement-of-office-365-connectors-within-microsoft-teams/>.)
//!
//! Messages are built by the pure [`crate::render::teams`]; this module only sends them.
//!
//! # What is posted
//!
//! `POST <webhook_url>` of `{type: "message", attachments: [{contentType:
//! "application/vnd.microsoft.card.adaptive", content: <card>}]}` for every notice.
//! A Workflows webhook cannot edit or thread a message (the trigger answers `202` and no
//! message id; the flow's "Post card" action posts a new message each time), so a changed
//! verdict, a resolution and "could not diagnose" are new posts that say what they update
//! ("Changed: replaces the verdict posted at 09:46 UTC", "Resolved"). A *revision* (the
//! same decision with other confidence or numbers, [`Notice::is_revision`]), which other
//! destinations show in place, is not posted: a new card per changed number would bury the
//! verdict, and the verdict page behind its link shows the latest. The notices about one alert group
//! among the several that carry the job's verdict ([`NoticeKind::Joined`],
//! [`NoticeKind::GroupResolved`]) are not posted: without a thread to put them in they would
//! be top-level cards in the channel, one per group, which is what one verdict per job
//! avoids (as Slack's incoming webhook, which cannot thread either, posts nothing for them).
//! The state kept per episode is the time of its first post (`{"first_post_ms": …}`),
//! which later posts name.
//!
//! # Answers
//!
//! The trigger answers `202 Accepted` once it has taken the request; the flow posts the
//! card afterwards, so a card the flow's "Post card" action cannot post fails in the flow's
//! run history, not here. The answers culprit classifies (the trigger is an Azure Logic
//! Apps request trigger, whose errors are `{"error": {"code", "message"}}`):
//!
//! * 2xx: delivered;
//! * 400: the trigger refused the body (a request schema set on the trigger, or a body it
//!   cannot read): final;
//! * 401, 403: the `sig` of the URL was refused (the URL was regenerated, or the trigger
//!   now requires tenant authentication): final;
//! * 404: no such flow or trigger (the flow was deleted, or its owner left): final;
//! * 413: the message is larger than Teams takes ([`MAX_MESSAGE_BYTES`]): final (the
//!   renderer cuts the card below it, so this is a bug to report);
//! * 408, 429 (throttled, with `Retry-After`) and 5xx: retryable; a flow turned off answers
//!   an error too, final unless 5xx, with its code named;
//! * a transport failure: retryable, maybe delivered when the request was sent.
//!
//! Every final error names the Logic Apps error code when the body carries one (letters and
//! digits only), never the body, and ends with a hint naming
//! `notify.teams[i] (name).webhook_url`.
//!
//! # Repeats
//!
//! Teams has no idempotency key and the webhook cannot list what was posted: a repeat
//! cannot be folded or found. A notice sent again after an attempt whose outcome is unknown
//! ([`Notice::maybe_repeat`]) is marked in the card ([`crate::render::teams::REPEAT_MARK`]).
//!
//! # Rate limits
//!
//! Teams throttles webhooks posting more than four requests a second (HTTP 429, with
//! `Retry-After`): posts of one destination are at least [`MIN_POST_INTERVAL`] apart.
//! <https://learn.microsoft.com/en-us/microsoftteams/platform/webhooks-and-connectors/how-to/add-incoming-webhook>
//!
//! # Secrets
//!
//! The webhook URL (its `sig` parameter is the credential) is never in `Debug`, errors or
//! logs: errors never quote a URL, and what is logged of an answer has every form of the
//! URL, its path and each long query value removed.

mod config;

pub use config::TeamsConfig;

use std::fmt;
use std::time::Duration;

use futures::future::BoxFuture;
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};

use crate::model::notice::{Notice, NoticeKind};
use crate::model::secret::Redactor;
use crate::notify::digest;
use crate::notify::webhook::{http_client, read_answer};
use crate::notify::{Destination, NotifyError, Sent, status_error, transport_error};
use crate::render::teams::{incident_message, message};

pub use crate::render::teams::MAX_MESSAGE_BYTES;

/// Least time between two posts of one destination: Teams throttles more than four
/// requests a second.
/// <https://learn.microsoft.com/en-us/microsoftteams/platform/webhooks-and-connectors/how-to/add-incoming-webhook>
pub const MIN_POST_INTERVAL: Duration = Duration::from_millis(250);

/// The key of the state that holds the time of the episode's first post, Unix ms.
pub const FIRST_POST: &str = "first_post_ms";

/// A Teams Workflows webhook destination. `Debug` shows no secret.
pub struct Teams {
    name: String,
    url: SecretString,
    client: reqwest::Client,
    redactor: Redactor,
    /// Posts of this webhook, shared by the sections that post to it and (through the
    /// ledger) by the replicas.
    pacer: std::sync::Arc<crate::notify::pace::Pacer>,
}

impl fmt::Debug for Teams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Teams").field("name", &self.name).field("webhook_url", &"[REDACTED]").finish_non_exhaustive()
    }
}

/// Every form of a URL that holds a secret, for the redactor: the URL, its path and query,
/// and each query value of 8 characters or more (the `sig`).
pub(crate) fn url_redactor(url: &str) -> Redactor {
    let mut r = Redactor::new();
    r.add_url(url);
    if let Ok(u) = reqwest::Url::parse(url) {
        if let Some(q) = u.query() {
            r.add(q);
        }
        for (_, v) in u.query_pairs() {
            if v.len() >= 8 {
                r.add(&v);
            }
        }
        for (raw, _) in
            u.query().unwrap_or_default().split('&').filter_map(|kv| kv.split_once('=').map(|(_, v)| (v, ())))
        {
            if raw.len() >= 8 {
                r.add(raw);
            }
        }
    }
    r
}

/// Resolves a webhook URL secret: trimmed, https (or http, for a local stand-in) with a host
/// and no credentials. The error names `what`, never the URL.
pub(crate) fn resolve_url(what: &str, source: &crate::settings::SecretSource) -> Result<SecretString, String> {
    let url = source.resolve().map_err(|e| format!("{what}: webhook_url: {e}"))?;
    let url = url.expose_secret().trim().to_string();
    let parsed = reqwest::Url::parse(&url).map_err(|_| format!("{what}: webhook_url is not a valid URL"))?;
    if parsed.scheme() != "https" && parsed.scheme() != "http" {
        return Err(format!("{what}: webhook_url is not http(s)"));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(format!("{what}: webhook_url has no host"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(format!("{what}: webhook_url carries credentials"));
    }
    Ok(SecretString::from(url))
}

/// An error code of a JSON error answer at `pointer` when it has the shape of one (1–64
/// ASCII letters, digits and `_`): safe to name in an error.
pub(crate) fn error_code(answer: &str, pointer: &str) -> Option<String> {
    let v: Value = serde_json::from_str(answer).ok()?;
    let code = v.pointer(pointer)?.as_str()?;
    ((1..=64).contains(&code.len()) && code.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
        .then(|| code.to_string())
}

impl Teams {
    /// A Teams destination from its configuration; resolves the webhook URL now.
    ///
    /// Errors (naming `teams:<name>`, never the URL): the name is empty, the secret cannot
    /// be read, the URL is not an http(s) URL with a host, or the client cannot be built.
    pub fn new(cfg: &TeamsConfig) -> Result<Teams, String> {
        if cfg.name.trim().is_empty() {
            return Err("teams: `name` is empty".into());
        }
        let what = format!("teams:{}", cfg.name);
        let url = resolve_url(&what, &cfg.webhook_url)?;
        let redactor = url_redactor(url.expose_secret());
        let pacer = crate::notify::pace::shared(
            &crate::notify::pace::scope_of_secret("teams", url.expose_secret()),
            MIN_POST_INTERVAL,
        );
        Ok(Teams { name: cfg.name.clone(), url, client: http_client(&what)?, redactor, pacer })
    }

    fn what(&self) -> String {
        format!("teams:{}", self.name)
    }

    fn key(&self) -> String {
        format!("notify.teams (name {:?}).webhook_url", self.name)
    }

    /// What to do about a final answer, naming this destination's webhook_url.
    fn hint(&self, status: u16, code: Option<&str>) -> Option<String> {
        let key = self.key();
        if code.is_some_and(|c| c.to_ascii_lowercase().contains("disabled")) {
            return Some(format!(
                "the flow behind {key} is turned off: turn it on in Power Automate (Teams > Workflows)"
            ));
        }
        match status {
            400 => Some(format!(
                "the flow's trigger refused the card: remove a request body schema from the trigger behind {key}, or check that the flow posts `attachments` as an Adaptive Card"
            )),
            401 | 403 => Some(format!(
                "the flow refused the URL's signature (sig): the URL was regenerated or the trigger now requires authentication; set {key} to the trigger's current HTTP POST URL with \"Anyone\" allowed to trigger"
            )),
            404 => Some(format!(
                "no flow answers at {key}: the flow or its trigger was deleted (or its owner left); create the workflow again and set {key} to its URL"
            )),
            413 => Some(format!(
                "the card is larger than Teams takes ({MAX_MESSAGE_BYTES} bytes); culprit cuts it below that, so report this with the verdict"
            )),
            _ => None,
        }
    }

    /// Posts the notice once (see the module docs). `state` is the episode's first post
    /// time, kept unchanged by later posts. An incident's summary and the verdicts of the
    /// jobs counted in it go by [`digest`].
    pub async fn send(&self, notice: &Notice, state: Option<&Value>) -> Result<Sent, NotifyError> {
        if notice.kind == NoticeKind::Incident {
            let post = |incident: &_, range| self.post_owned(incident_message(incident, range), notice.kind);
            return digest::send_step(notice, state, "teams", post).await;
        }
        if digest::stays_folded(notice, state) {
            return Ok(Sent { state: state.cloned() });
        }
        if let Some(folded) = digest::fold(notice, state) {
            return Ok(folded);
        }
        let first = state.and_then(|s| s.get(FIRST_POST)).and_then(Value::as_i64);
        self.post(&message(notice, first), notice.kind).await?;
        Ok(Sent { state: Some(json!({ FIRST_POST: first.unwrap_or(notice.at_ms) })) })
    }

    async fn post_owned(&self, body: Value, kind: NoticeKind) -> Result<(), NotifyError> {
        self.post(&body, kind).await
    }

    async fn post(&self, body: &Value, kind: NoticeKind) -> Result<(), NotifyError> {
        let what = self.what();
        self.pacer.turn().await;
        let response = self
            .client
            .post(self.url.expose_secret())
            .json(body)
            .send()
            .await
            .map_err(|e| transport_error(&what, &e))?;
        let (status, headers, answer) = read_answer(response).await;
        if (200..300).contains(&status) {
            tracing::info!(destination = %what, status, kind = ?kind, "teams: posted");
            return Ok(());
        }
        let e = status_error(&what, status, &headers, &answer, &self.redactor);
        if e.retryable {
            return Err(e);
        }
        let code = error_code(&answer, "/error/code");
        let hint = self.hint(status, code.as_deref());
        let e = match code {
            Some(c) => NotifyError { message: format!("{}: {c}", e.message), ..e },
            None => e,
        };
        Err(e.hint(hint))
    }

    /// For `check-config --connect`, without posting: the URL is well-formed (at build) and
    /// its host answers `HEAD /` (no path, no query: the signature is not sent). A Workflows
    /// webhook has no dry run, so the flow and its signature are not verified.
    pub async fn probe(&self) -> Result<String, NotifyError> {
        let what = self.what();
        let mut origin = reqwest::Url::parse(self.url.expose_secret())
            .map_err(|_| NotifyError::fatal(format!("{what}: webhook_url is not a valid URL")))?;
        origin.set_path("/");
        origin.set_query(None);
        origin.set_fragment(None);
        let response = self.client.head(origin).send().await.map_err(|e| transport_error(&what, &e))?;
        let status = response.status().as_u16();
        let scheme = if self.url.expose_secret().starts_with("https") { "over TLS " } else { "" };
        Ok(format!(
            "the webhook's host answered {scheme}(HEAD / answered {status}); the flow and its signature are not verified: a Workflows webhook has no dry run, and nothing was posted"
        ))
    }
}

impl Destination for Teams {
    fn name(&self) -> String {
        self.what()
    }
    /// Verdicts (the first post and a changed one), resolutions and failures to diagnose;
    /// never a revision, nor the notices of one alert group among several (see the module
    /// docs).
    fn wants(&self, notice: &Notice) -> bool {
        match notice.kind {
            NoticeKind::Verdict => !notice.is_revision(),
            NoticeKind::Resolved | NoticeKind::CouldNotDiagnose | NoticeKind::Incident => true,
            NoticeKind::Joined | NoticeKind::GroupResolved => false,
        }
    }
    fn send<'a>(&'a self, notice: &'a Notice, state: Option<&'a Value>) -> BoxFuture<'a, Result<Sent, NotifyError>> {
        Box::pin(Teams::send(self, notice, state))
    }
    fn probe(&self) -> BoxFuture<'_, Result<String, NotifyError>> {
        Box::pin(Teams::probe(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_redactor_removes_the_signature_alone_and_the_url() {
        let url = "https://prod-01.westeurope.logic.azure.com:443/workflows/0a1b/triggers/manual/paths/invoke?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig=S1GS3CR3TvalueAbc";
        let r = url_redactor(url);
        for text in [url.to_string(), "sig=S1GS3CR3TvalueAbc".to_string(), "S1GS3CR3TvalueAbc".to_string()] {
            assert!(!r.redact(&text).contains("S1GS3CR3T"), "{text}");
        }
    }

    #[test]
    fn only_code_shaped_error_codes_are_named() {
        assert_eq!(
            error_code(r#"{"error":{"code":"WorkflowNotFound","message":"m"}}"#, "/error/code").as_deref(),
            Some("WorkflowNotFound")
        );
        assert_eq!(error_code(r#"{"error":{"code":"sig=abc def"}}"#, "/error/code"), None);
        assert_eq!(error_code("not json", "/error/code"), None);
    }
}
