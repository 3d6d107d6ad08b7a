//! A generic webhook: `POST` of JSON to a configured URL.
//!
//! * [`NoticeKind::Verdict`]: the body is the verdict itself, `culprit.verdict/v1`.
//! * [`NoticeKind::Resolved`], [`NoticeKind::CouldNotDiagnose`], [`NoticeKind::Joined`]
//!   and [`NoticeKind::GroupResolved`]: the body is a `culprit.notice/v1` value (see
//!   [`notice_body`]).
//! * Either body has an `alert_links` object beside its fields when the alert source gave
//!   links (Grafana's `silence`, `dashboard`, `panel`: http(s) URLs, untrusted); the
//!   verdict's schema allows fields it does not name.
//!
//! Headers: `Content-Type: application/json`, `Idempotency-Key: <notice.idempotency_key>`
//! (the receiver drops repeats: the delivery loop may send a notice more than once; each
//! notice, each revision included, has its own),
//! `X-Culprit-Group-Key: <notice.group_key>` (the lead alert group of the job's episode),
//! `X-Culprit-Alert-Groups` (a JSON array of every alert group carrying the verdict, the
//! lead first), `X-Culprit-Verdict-Ref` (the idempotency key of the verdict's first post:
//! the same for each of its revisions) and `X-Culprit-Revision` (0 for the first post, then
//! 1, 2, … each time the same verdict comes back with other confidence or numbers: a
//! receiver keeps the highest revision per verdict ref), and `Authorization` when `auth` is
//! configured.
//! Header values keep printable ASCII as is; any other byte, and `%`, is written `%XX`.
//!
//! Answers: 2xx is delivered; 408, 429 and 5xx are retryable (with `Retry-After`); any
//! other status is final. Redirects are not followed (a 3xx is final).
//!
//! Rate limit: a generic receiver documents none culprit could know, so posts are not
//! paced; a receiver that limits answers 429 with `Retry-After`, which is waited.
//!
//! This module also holds the HTTP plumbing the PagerDuty and Alertmanager notifiers share:
//! the client, resolved credentials and reading a bounded excerpt of an answer.

mod config;

pub use config::WebhookConfig;

use std::fmt;
use std::time::Duration;

use futures::future::BoxFuture;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};

use crate::model::notice::{Notice, NoticeKind};
use crate::model::secret::Redactor;
use crate::notify::{Destination, NotifyError, Sent, status_error, transport_error};
use crate::settings::HttpAuth;

/// The schema id of the body of a [`NoticeKind::Resolved`] or
/// [`NoticeKind::CouldNotDiagnose`] notice.
pub const NOTICE_SCHEMA: &str = "culprit.notice/v1";

/// The header carrying [`Notice::idempotency_key`].
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// The header carrying [`Notice::group_key`].
pub const GROUP_KEY: &str = "x-culprit-group-key";

/// The header carrying the alert groups of the job's verdict, a JSON array.
pub const ALERT_GROUPS: &str = "x-culprit-alert-groups";

/// The header carrying the idempotency key of the verdict's first post.
pub const VERDICT_REF: &str = "x-culprit-verdict-ref";

/// The header carrying the verdict's revision (0 first).
pub const REVISION: &str = "x-culprit-revision";

/// Time one delivery may take, connection included.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Time to open the connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Most bytes of an answer read (the rest is dropped; errors quote at most 200 characters).
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// A generic webhook destination. `Debug` shows no secret.
pub struct Webhook {
    name: String,
    url: reqwest::Url,
    client: reqwest::Client,
    auth: Option<Auth>,
}

impl fmt::Debug for Webhook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The URL is left out: like a Slack incoming webhook, it may hold a token.
        f.debug_struct("Webhook").field("name", &self.name).field("auth", &self.auth).finish_non_exhaustive()
    }
}

impl Webhook {
    /// A webhook from its configuration; resolves the auth secret now.
    ///
    /// Errors (naming the webhook, never a secret): the name is empty, the URL is not
    /// http(s) or carries credentials, the secret cannot be read, or the HTTP client cannot
    /// be built.
    pub fn new(cfg: &WebhookConfig) -> Result<Self, String> {
        if cfg.name.trim().is_empty() {
            return Err("webhook: `name` is empty".into());
        }
        let what = format!("webhook:{}", cfg.name);
        Ok(Webhook {
            name: cfg.name.clone(),
            url: parse_url(&what, &cfg.url)?,
            client: http_client(&what)?,
            auth: cfg.auth.as_ref().map(|a| Auth::resolve(a, &what)).transpose()?,
        })
    }

    /// The configured name (the destination is `webhook:<name>` in metrics and logs).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Every notice: verdicts (and their revisions), resolutions, failures to diagnose, and
    /// the alert groups that join or leave a job's verdict.
    pub fn wants(&self, notice: &Notice) -> bool {
        matches!(
            notice.kind,
            NoticeKind::Verdict
                | NoticeKind::Resolved
                | NoticeKind::CouldNotDiagnose
                | NoticeKind::Joined
                | NoticeKind::GroupResolved
        )
    }

    /// Posts the notice once (see the module docs for body, headers and classification).
    ///
    /// Errors: a [`NoticeKind::Verdict`] notice without a verdict (final); a non-2xx answer
    /// ([`status_error`]); a transport failure (retryable). Messages name `webhook:<name>`,
    /// never the URL or a secret. `state` is not used; nothing is kept.
    pub async fn send(&self, notice: &Notice, _state: Option<&Value>) -> Result<Sent, NotifyError> {
        let what = format!("webhook:{}", self.name);
        let body = match (notice.kind, &notice.verdict) {
            (NoticeKind::Verdict, Some(v)) => serde_json::to_value(v).expect("a verdict always serializes"),
            (NoticeKind::Verdict, None) => {
                return Err(NotifyError::fatal(format!("{what}: a verdict notice without a verdict")));
            }
            _ => notice_body(notice),
        };
        let body = with_incident(with_alert_links(body, notice), notice);
        let mut headers = HeaderMap::new();
        headers.insert(HeaderName::from_static(IDEMPOTENCY_KEY), header_value(&notice.idempotency_key));
        headers.insert(HeaderName::from_static(GROUP_KEY), header_value(&notice.group_key));
        let groups = if notice.episode.groups.is_empty() {
            vec![notice.group_key.clone()]
        } else {
            notice.episode.groups.clone()
        };
        let groups = serde_json::to_string(&groups).expect("strings always serialize");
        headers.insert(HeaderName::from_static(ALERT_GROUPS), header_value(&groups));
        let verdict_ref =
            if notice.episode.verdict_ref.is_empty() { &notice.idempotency_key } else { &notice.episode.verdict_ref };
        headers.insert(HeaderName::from_static(VERDICT_REF), header_value(verdict_ref));
        headers.insert(HeaderName::from_static(REVISION), HeaderValue::from(notice.episode.revision));
        let request = self.client.post(self.url.clone()).headers(headers).json(&body);
        let request = match &self.auth {
            Some(a) => a.apply(request),
            None => request,
        };
        let response = request.send().await.map_err(|e| transport_error(&what, &e))?;
        let (status, headers, answer) = read_answer(response).await;
        if (200..300).contains(&status) {
            tracing::debug!(destination = %what, status, kind = ?notice.kind, "webhook: delivered");
            return Ok(Sent::default());
        }
        let e =
            status_error(&what, status, &headers, &answer, &Auth::redactor(self.auth.as_ref())).hint(self.hint(status));
        tracing::debug!(destination = %what, status, retryable = e.retryable, "webhook: not delivered");
        Err(e)
    }
}

impl Webhook {
    /// What to do about a final answer, naming this webhook's settings.
    fn hint(&self, status: u16) -> Option<String> {
        let at = format!("the [[notify.webhook]] named {:?}", self.name);
        crate::notify::status_hint(status, &format!("the url of {at}"), &format!("the auth of {at}"))
    }

    /// A reachability check for `check-config --connect`: `HEAD` of the URL with the
    /// configured auth. A generic webhook has no dry run: nothing is posted, and any answer
    /// but 401/403 (credentials refused) and 5xx counts as reachable.
    pub async fn probe(&self) -> Result<String, NotifyError> {
        let what = format!("webhook:{}", self.name);
        let request = self.client.head(self.url.clone());
        let request = match &self.auth {
            Some(a) => a.apply(request),
            None => request,
        };
        let response = request.send().await.map_err(|e| transport_error(&what, &e))?;
        let (status, headers, answer) = read_answer(response).await;
        // 501: the server does not implement HEAD (Python's http.server): it answered.
        if status == 401 || status == 403 || (status >= 500 && status != 501) {
            return Err(status_error(&what, status, &headers, &answer, &Auth::redactor(self.auth.as_ref()))
                .hint(self.hint(status)));
        }
        Ok(format!("reachable (HEAD answered {status}); a generic webhook has no dry run, so nothing was posted"))
    }
}

/// The `culprit.notice/v1` body of a notice without a verdict:
///
/// ```json
/// { "schema": "culprit.notice/v1",
///   "kind": "resolved" | "could_not_diagnose" | "verdict" | "joined" | "group_resolved",
///   "group_key": "…", "job": { "name": "…", "id": "…" }, "reason": "…" | null,
///   "alert_groups": ["…"] }
/// ```
///
/// `group_key` is the group the notice is about (for `joined` and `group_resolved`, the
/// group that joined or resolved); `alert_groups` the groups that still carry the verdict.
pub fn notice_body(notice: &Notice) -> Value {
    json!({
        "schema": NOTICE_SCHEMA,
        "kind": notice.kind,
        "group_key": notice.group_key,
        "job": notice.job,
        "reason": notice.reason,
        "alert_groups": alert_groups(notice),
    })
}

/// The body with the notice's alert links as `alert_links`, when it has any.
pub fn with_alert_links(mut body: Value, notice: &Notice) -> Value {
    // Only what AlertLinks::keep keeps, as every destination forwards.
    let links = notice.links.kept();
    if let (false, Some(o)) = (links.is_empty(), body.as_object_mut()) {
        o.insert("alert_links".into(), serde_json::to_value(&links).expect("links serialize"));
    }
    body
}

/// The body with the incident the notice's job is counted in as `incident` (`id`, `cause`,
/// `shared_cause` in words, `jobs` counted when it was planned), when it is in one.
pub fn with_incident(mut body: Value, notice: &Notice) -> Value {
    if let (Some(tag), Some(o)) = (&notice.incident, body.as_object_mut()) {
        o.insert(
            "incident".into(),
            json!({
                "id": tag.id,
                "cause": tag.cause,
                "shared_cause": crate::render::incident::cause_phrase(&tag.cause),
                "jobs": tag.jobs,
            }),
        );
    }
    body
}

/// The alert groups that carry the notice's verdict, the lead first; a notice of no
/// episode (stored by an earlier build), its own group.
fn alert_groups(notice: &Notice) -> Vec<String> {
    if notice.episode.groups.is_empty() && notice.episode.thread.is_empty() {
        vec![notice.group_key.clone()]
    } else {
        notice.episode.groups.clone()
    }
}

/// A header value: printable ASCII (space to `~`) as is, except `%`; every other byte as
/// `%XX` (uppercase hex), so any string fits and the original can be recovered.
pub fn header_value(s: &str) -> HeaderValue {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if (b' '..=b'~').contains(&b) && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    HeaderValue::from_str(&out).expect("printable ASCII is a valid header value")
}

/// Credentials resolved from [`HttpAuth`]; `Debug` never shows the secret.
pub(crate) enum Auth {
    Bearer(SecretString),
    Basic { username: String, password: SecretString },
}

impl Auth {
    /// Reads the secret now. The error names `what` and the source, never the value.
    pub(crate) fn resolve(auth: &HttpAuth, what: &str) -> Result<Auth, String> {
        match auth {
            HttpAuth::Bearer { token } => {
                Ok(Auth::Bearer(token.resolve().map_err(|e| format!("{what}: bearer token: {e}"))?))
            }
            HttpAuth::Basic { username, password } => Ok(Auth::Basic {
                username: username.clone(),
                password: password.resolve().map_err(|e| format!("{what}: basic auth password: {e}"))?,
            }),
        }
    }

    /// Every wire form of the credentials (none without auth), to remove them from
    /// anything quoted back.
    pub(crate) fn redactor(auth: Option<&Auth>) -> Redactor {
        let mut r = Redactor::new();
        match auth {
            Some(Auth::Bearer(token)) => r.add(token.expose_secret()),
            Some(Auth::Basic { username, password }) => r.add_basic(username, password.expose_secret()),
            None => {}
        }
        r
    }

    /// Adds `Authorization` (reqwest marks it sensitive).
    pub(crate) fn apply(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match self {
            Auth::Bearer(token) => request.bearer_auth(token.expose_secret()),
            Auth::Basic { username, password } => request.basic_auth(username, Some(password.expose_secret())),
        }
    }
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Auth::Bearer(_) => f.write_str("Bearer([REDACTED])"),
            Auth::Basic { username, .. } => write!(f, "Basic({username:?}, [REDACTED])"),
        }
    }
}

/// The HTTP client of a notifier: [`REQUEST_TIMEOUT`], [`CONNECT_TIMEOUT`], no redirects,
/// `User-Agent: culprit/<version>`.
pub(crate) fn http_client(what: &str) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .user_agent(concat!("culprit/", env!("CARGO_PKG_VERSION")))
        .timeout(REQUEST_TIMEOUT)
        .connect_timeout(CONNECT_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| format!("{what}: the HTTP client cannot be built: {e}"))
}

/// An http(s) URL without credentials (they belong in `auth`). The error does not repeat
/// the URL (it may hold a token).
pub(crate) fn parse_url(what: &str, url: &str) -> Result<reqwest::Url, String> {
    let u = reqwest::Url::parse(url).map_err(|_| format!("{what}: the URL is not a valid URL"))?;
    if u.scheme() != "http" && u.scheme() != "https" {
        return Err(format!("{what}: the URL is not http(s)"));
    }
    if !u.username().is_empty() || u.password().is_some() {
        return Err(format!("{what}: the URL carries credentials; put them in `auth` instead"));
    }
    Ok(u)
}

/// Status, headers and the first [`MAX_ANSWER_BYTES`] of the body (lossy UTF-8; empty when
/// the body cannot be read).
pub(crate) async fn read_answer(mut response: reqwest::Response) -> (u16, HeaderMap, String) {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let mut body = Vec::new();
    while body.len() < MAX_ANSWER_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            _ => break,
        }
    }
    body.truncate(MAX_ANSWER_BYTES);
    (status, headers, String::from_utf8_lossy(&body).into_owned())
}

impl Destination for Webhook {
    fn name(&self) -> String {
        format!("webhook:{}", Webhook::name(self))
    }
    fn wants(&self, notice: &Notice) -> bool {
        Webhook::wants(self, notice)
    }
    fn send<'a>(&'a self, notice: &'a Notice, state: Option<&'a Value>) -> BoxFuture<'a, Result<Sent, NotifyError>> {
        Box::pin(Webhook::send(self, notice, state))
    }
    fn probe(&self) -> BoxFuture<'_, Result<String, NotifyError>> {
        Box::pin(Webhook::probe(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_keep_printable_ascii_and_escape_the_rest() {
        let g = "{}:{alertname=\"FlinkJobBackpressured\", job_name=\"bp_lab_slow_sink\"}";
        assert_eq!(header_value(g).to_str().unwrap(), g);
        assert_eq!(header_value("a%b\nç").to_str().unwrap(), "a%25b%0A%C3%A7");
    }

    #[test]
    fn urls_with_credentials_or_other_schemes_are_refused_without_being_repeated() {
        let e = parse_url("webhook:x", "https://user:s3cret@example.com/hook").unwrap_err();
        assert!(e.contains("credentials") && !e.contains("s3cret"));
        assert!(parse_url("webhook:x", "ftp://example.com").is_err());
        assert!(parse_url("webhook:x", "http://example.com/hook?token=t").is_ok());
    }
}
