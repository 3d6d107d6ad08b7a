//! Opsgenie Alert API v2: one alert per job episode, the one Alertmanager's own Opsgenie
//! integration opened for the page, showing culprit's verdict.
//!
//! <https://docs.opsgenie.com/docs/alert-api>
//!
//! The alert's `alias` is the SHA-256 of the lead alert group's key, the alias
//! Alertmanager sends ([`crate::render::opsgenie::alias`]). Opsgenie keeps one open alert
//! per alias: a create with the alias of an open alert opens nothing (the alert's count
//! goes up), "there can be only one alert with open status with the same alias"
//! (<https://docs.opsgenie.com/docs/alert-deprecated>, `alias`).
//!
//! * The first verdict of an episode: Create Alert (`POST /v2/alerts`, opening the alert
//!   when the page did not, e.g. culprit is the only integration), then Update Alert
//!   Message and Update Alert Description (`PUT /v2/alerts/{alias}/message` and
//!   `…/description`, `identifierType=alias`): a create that the alias folds into
//!   Alertmanager's alert changes none of its fields, the two updates put the verdict on it.
//! * A later revision (same verdict, other numbers) or a changed verdict: the two updates,
//!   in place, never a second alert; a changed verdict also adds a note (`POST
//!   /v2/alerts/{alias}/notes`), which the alert's activity log keeps with its time and
//!   which Opsgenie notifies the responders of under their "alert note added" rule, so that
//!   the change is seen, not only read the next time someone opens the alert.
//! * The episode resolved: Close Alert (`POST /v2/alerts/{alias}/close`) with a note, for
//!   an alert culprit showed a verdict on (a state was kept); Alertmanager closes the same
//!   alert for its own page, and a second close is harmless. Without a state nothing is
//!   sent: an alert culprit never touched is Alertmanager's to close.
//! * Never "could not diagnose", nor anything while the group no longer fires but the close
//!   ([`crate::render::opsgenie::shown`]).
//!
//! **What "delivered" means.** Opsgenie answers these requests with 202 and a
//! `requestId`: "Alert creation, deletion, and action requests are processed
//! asynchronously … valid requests for those endpoints are responded to with HTTP status
//! 202 - Accepted" and, on <https://docs.opsgenie.com/docs/response>, "Unlike 200, it
//! does not guarantee that the request will be handled successfully". So a delivery here
//! is "accepted by Opsgenie" (the `requestId` is kept in the state and logged, to look up
//! at `GET /v2/alerts/requests/{requestId}`), not "shown on the alert": a request Opsgenie
//! later fails (an update for an alias with no alert) is not seen by culprit.
//!
//! Answers (<https://docs.opsgenie.com/docs/response>): 2xx is accepted; 429 (with
//! `Retry-After`, else `X-RateLimit-Period-In-Sec`, <https://docs.opsgenie.com/docs/api-rate-limiting>)
//! and 5xx are retryable; 400 (invalid JSON), 401 (the key is invalid or its integration
//! disabled), 402 (the plan), 403 (the key may not do this), 404, 409 and 422 (a field
//! Opsgenie refuses) are final, each with a hint naming the setting to check.
//!
//! `already_sent` reads the alert by alias (`GET /v2/alerts/{alias}?identifierType=alias`)
//! and, for a changed verdict, its notes: every description and note culprit writes ends
//! with `culprit notice <idempotency key>` ([`crate::render::opsgenie::marker`]).
//!
//! # Rate limit (not paced)
//!
//! Opsgenie limits the Alert domain per account with a token bucket checked per minute
//! and per second over rolling windows, at numbers that depend on the plan (and, on some
//! plans, on the number of users) (<https://docs.opsgenie.com/docs/api-rate-limiting>): no
//! one number holds for every account, so culprit does not pace its requests; a 429 waits
//! `Retry-After` or `X-RateLimit-Period-In-Sec` ([`RATE_LIMIT_PERIOD_HEADER`]). An
//! episode's requests are few (create, then a note or close per notice).
//!
//! The API key is a secret: it is never in `Debug`, errors or logs.
//!
//! The requests, the addressing and the answers are shared with Jira Service Management
//! Operations ([`crate::notify::jsm`]) through [`OpsApi`], which differs in how an alert is
//! addressed (by id, found by alias) and in its authentication.

pub(crate) mod config;

pub use config::{OpsgenieConfig, OpsgenieRegion};

use std::fmt;
use std::time::Duration;

use futures::future::BoxFuture;
use reqwest::Method;
use reqwest::header::HeaderMap;
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};

use crate::model::notice::{Notice, NoticeKind};
use crate::model::secret::Redactor;
use crate::notify::webhook::{http_client, parse_url, read_answer};
use crate::notify::{Destination, FailureReason, NotifyError, Sent, status_error, transport_error};
use crate::render::opsgenie::{self as render, AlertOptions, Flavor};

/// Opsgenie's rate limit header with the period to wait, in seconds, when a 429 carries no
/// `Retry-After` (<https://docs.opsgenie.com/docs/api-rate-limiting>).
pub const RATE_LIMIT_PERIOD_HEADER: &str = "x-ratelimit-period-in-sec";

/// How a request authenticates.
pub(crate) enum Auth {
    /// `Authorization: GenieKey <key>` (Opsgenie).
    GenieKey(SecretString),
    /// HTTP Basic with an Atlassian account's email and API token (JSM Operations).
    Basic { user: String, token: SecretString },
}

impl Auth {
    fn apply(&self, r: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match self {
            Auth::GenieKey(k) => r.header(reqwest::header::AUTHORIZATION, format!("GenieKey {}", k.expose_secret())),
            Auth::Basic { user, token } => r.basic_auth(user, Some(token.expose_secret())),
        }
    }

    fn redactor(&self) -> Redactor {
        match self {
            Auth::GenieKey(k) => Redactor::of(k.expose_secret()),
            Auth::Basic { user, token } => {
                let mut r = Redactor::new();
                r.add_basic(user, token.expose_secret());
                r
            }
        }
    }
}

/// Where one alert is: by alias (Opsgenie's `identifierType=alias`) or by id (JSM).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Addr {
    Alias(String),
    Id(String),
}

/// The alert API shared by Opsgenie and JSM Operations: the requests of one destination.
pub(crate) struct OpsApi {
    /// The destination's name (`opsgenie:payments`), in errors and logs.
    pub what: String,
    /// The section's key in hints (`notify.opsgenie[payments]`).
    pub section: String,
    /// The alerts' collection, ending in `/alerts`.
    pub alerts: reqwest::Url,
    pub auth: Auth,
    pub flavor: Flavor,
    pub options: AlertOptions,
    pub client: reqwest::Client,
}

/// The state kept per episode: the alias, the alert's id once known, the last `requestId`.
fn state(alias: &str, id: Option<&str>, request_id: Option<&str>) -> Value {
    let mut s = json!({ "alias": alias });
    if let Some(id) = id {
        s["id"] = id.into();
    }
    if let Some(r) = request_id {
        s["request_id"] = r.into();
    }
    s
}

fn field<'a>(v: Option<&'a Value>, key: &str) -> Option<&'a str> {
    v.and_then(|s| s.get(key)).and_then(Value::as_str).filter(|s| !s.is_empty())
}

impl OpsApi {
    /// `…/alerts/{alert}/{action}` (`action` empty: the alert itself).
    pub fn url(&self, addr: &Addr, action: &str) -> reqwest::Url {
        let mut u = self.alerts.clone();
        {
            let mut p = u.path_segments_mut().expect("an http(s) URL has a path");
            p.pop_if_empty();
            p.push(match addr {
                Addr::Alias(a) | Addr::Id(a) => a,
            });
            if !action.is_empty() {
                p.push(action);
            }
        }
        if let Addr::Alias(_) = addr {
            u.set_query(Some("identifierType=alias"));
        }
        u
    }

    /// Sends one request; `Ok` with the JSON answer (`Null` when there is none) on 2xx.
    pub async fn call(&self, method: Method, url: reqwest::Url, body: Option<&Value>) -> Result<Value, NotifyError> {
        let (status, headers, answer) = self.raw(method, url, body).await?;
        if (200..300).contains(&status) {
            return Ok(serde_json::from_str(&answer).unwrap_or(Value::Null));
        }
        Err(self.refused(status, &headers, &answer))
    }

    /// Sends one request; any status.
    pub async fn raw(
        &self,
        method: Method,
        url: reqwest::Url,
        body: Option<&Value>,
    ) -> Result<(u16, HeaderMap, String), NotifyError> {
        let mut r = self.auth.apply(self.client.request(method, url));
        if let Some(b) = body {
            r = r.json(b);
        }
        let response = r.send().await.map_err(|e| transport_error(&self.what, &e))?;
        Ok(read_answer(response).await)
    }

    /// The error of a non-2xx answer: classified by [`status_error`], with the rate limit
    /// period of a 429 that has no `Retry-After`, and a hint.
    pub fn refused(&self, status: u16, headers: &HeaderMap, answer: &str) -> NotifyError {
        let detail = error_detail(answer);
        let mut e = status_error(&self.what, status, headers, &detail, &self.auth.redactor());
        if status == 429 && e.retry_after.is_none() {
            e.retry_after = headers
                .get(RATE_LIMIT_PERIOD_HEADER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
        }
        tracing::debug!(destination = %self.what, status, retryable = e.retryable, error = %e, "alert request refused");
        e.hint(self.hint(status))
    }

    /// What to do about a final answer (<https://docs.opsgenie.com/docs/response>), naming
    /// the settings to check, never their values.
    fn hint(&self, status: u16) -> Option<String> {
        let s = &self.section;
        let (key, place, what, may) = match self.flavor {
            Flavor::Opsgenie => (
                format!("{s}.api_key"),
                format!("{s}.region (a key of an EU account is unknown at api.opsgenie.com, and the other way round)"),
                "the API key of an Opsgenie API integration (Settings, Integrations, API; not a key of API Key Management)",
                "the API integration needs Read Access and Create and Update Access",
            ),
            Flavor::Jsm => (
                format!("{s}.user and {s}.api_token"),
                format!("{s}.cloud_id"),
                "an Atlassian account's email and one of its API tokens (id.atlassian.com, Security, API tokens)",
                "the account needs access to the site's Operations alerts",
            ),
        };
        match status {
            // The answer is logged (redacted), never quoted here: it may echo the key.
            400 => Some("the request was refused as invalid JSON: culprit sent something the API cannot parse; please report it (the answer is in the log)".into()),
            401 => Some(format!(
                "the credentials of {key} are not accepted (invalid, or the integration is disabled): configure {what}, and check {place}"
            )),
            402 => Some("the account's plan does not allow this request".into()),
            403 => Some(format!("the credentials of {key} are valid but may not do this: {may}")),
            404 => Some(format!("nothing answers alert requests there: check {place} and {s}.url, if set")),
            409 => Some("the request conflicts with the alert's state; it is not sent again".into()),
            422 => Some(format!(
                "a field was refused: check {s}.priority (P1 to P5) and that every team of {s}.responders exists"
            )),
            _ => crate::notify::status_hint(status, &format!("{s}.url"), &key),
        }
    }
}

/// The error answer `{"message": …, "errors": {…}}` as `message: error; error`, else the
/// answer as it is.
pub(crate) fn error_detail(answer: &str) -> String {
    let Ok(v) = serde_json::from_str::<Value>(answer) else {
        return answer.to_string();
    };
    let message = v.get("message").and_then(Value::as_str).unwrap_or_default();
    let errors: Vec<String> = match v.get("errors") {
        Some(Value::Object(m)) => m.values().map(|x| x.as_str().map_or(x.to_string(), str::to_string)).collect(),
        Some(Value::Array(a)) => a.iter().map(|x| x.as_str().map_or(x.to_string(), str::to_string)).collect(),
        _ => Vec::new(),
    };
    match (message.is_empty(), errors.is_empty()) {
        (true, true) => answer.to_string(),
        (false, true) => message.to_string(),
        (true, false) => errors.join("; "),
        (false, false) => format!("{message}: {}", errors.join("; ")),
    }
}

/// How a destination finds the alert of an alias to update or close.
pub(crate) trait Locate: Send + Sync {
    /// The open alert of `alias` (`known`: the id kept in the state), `None` when there is
    /// none (as far as the API can tell).
    fn locate<'a>(
        &'a self,
        api: &'a OpsApi,
        alias: &'a str,
        known: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Option<Addr>, NotifyError>>;
    /// The alert of `alias` (`known`: its id), open or closed, as the API shows it.
    fn read<'a>(
        &'a self,
        api: &'a OpsApi,
        alias: &'a str,
        known: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Option<(Addr, Value)>, NotifyError>>;
}

impl OpsApi {
    /// Sends a notice ([`render::shown`]) as the module docs say.
    pub async fn send(&self, locate: &dyn Locate, notice: &Notice, st: Option<&Value>) -> Result<Sent, NotifyError> {
        if !render::shown(notice) {
            return Err(NotifyError::fatal(format!(
                "{}: not sent: culprit opens an alert only for a verdict of a firing group and closes it when the job resolves (this notice: {:?}, firing: {})",
                self.what, notice.kind, notice.firing
            )));
        }
        let alias = field(st, "alias").map_or_else(|| render::alias(notice), str::to_string);
        let known = field(st, "id");
        let mut request_id = field(st, "request_id").map(str::to_string);
        let mut note_id = |a: &Value| {
            if let Some(r) = a.get("requestId").and_then(Value::as_str) {
                request_id = Some(r.to_string());
            }
        };
        let mut id = known.map(str::to_string);
        match notice.kind {
            NoticeKind::Verdict => {
                let first = st.is_none();
                if first {
                    let a = self
                        .call(
                            Method::POST,
                            self.alerts.clone(),
                            Some(&render::create(notice, &self.options, self.flavor)),
                        )
                        .await?;
                    note_id(&a);
                }
                match locate.locate(self, &alias, known).await? {
                    Some(addr) => {
                        if let Addr::Id(i) = &addr {
                            id = Some(i.clone());
                        }
                        note_id(
                            &self
                                .call(Method::PUT, self.url(&addr, "message"), Some(&render::update_message(notice)))
                                .await?,
                        );
                        note_id(
                            &self
                                .call(
                                    Method::PUT,
                                    self.url(&addr, "description"),
                                    Some(&render::update_description(notice)),
                                )
                                .await?,
                        );
                        if !first && notice.changed {
                            note_id(
                                &self.call(Method::POST, self.url(&addr, "notes"), Some(&render::note(notice))).await?,
                            );
                        }
                    }
                    // No open alert of the alias (a responder closed it): a verdict of a
                    // firing group opens one.
                    None if !first => {
                        id = None;
                        note_id(
                            &self
                                .call(
                                    Method::POST,
                                    self.alerts.clone(),
                                    Some(&render::create(notice, &self.options, self.flavor)),
                                )
                                .await?,
                        );
                    }
                    // Just created, not yet processed (JSM): it carries the verdict.
                    None => {}
                }
            }
            // Only an alert culprit showed a verdict on is closed: without a state, the
            // alert (if any) is Alertmanager's alone, and closing it is Alertmanager's.
            _ if st.is_none() => return Ok(Sent { state: None }),
            _ => {
                if let Some(addr) = locate.locate(self, &alias, known).await? {
                    note_id(&self.call(Method::POST, self.url(&addr, "close"), Some(&render::close(notice))).await?);
                }
            }
        }
        tracing::debug!(destination = %self.what, alias = %alias, request_id = request_id.as_deref().unwrap_or(""), "alert request accepted");
        Ok(Sent { state: Some(state(&alias, id.as_deref(), request_id.as_deref())) })
    }

    /// Whether the notice arrived: its alert shows its marker (in the description; in a
    /// note, for a changed verdict), or is closed, for a resolution.
    pub async fn already_sent(
        &self,
        locate: &dyn Locate,
        notice: &Notice,
        st: Option<&Value>,
    ) -> Result<Option<Sent>, NotifyError> {
        if !render::shown(notice) {
            return Ok(None);
        }
        let alias = field(st, "alias").map_or_else(|| render::alias(notice), str::to_string);
        let Some((addr, alert)) = locate.read(self, &alias, field(st, "id")).await? else {
            return Ok(None);
        };
        let id = match &addr {
            Addr::Id(i) => Some(i.as_str()),
            Addr::Alias(_) => field(st, "id"),
        };
        let sent = Some(Sent { state: Some(state(&alias, id, field(st, "request_id"))) });
        let marker = render::marker(notice);
        if notice.kind == NoticeKind::Resolved {
            return Ok(if alert.get("status").and_then(Value::as_str) == Some("closed") { sent } else { None });
        }
        let described = alert.get("description").and_then(Value::as_str).is_some_and(|d| d.ends_with(&marker));
        if !described {
            return Ok(None);
        }
        if st.is_some() && notice.changed {
            let notes = self.call(Method::GET, self.url(&addr, "notes"), None).await?;
            let list = notes.get("data").or_else(|| notes.get("values")).and_then(Value::as_array);
            let noted = list.is_some_and(|l| {
                l.iter().any(|n| n.get("note").and_then(Value::as_str).is_some_and(|t| t.ends_with(&marker)))
            });
            return Ok(if noted { sent } else { None });
        }
        Ok(sent)
    }
}

/// Opsgenie addresses an alert by its alias: nothing to look up.
struct ByAlias;

impl Locate for ByAlias {
    fn locate<'a>(
        &'a self,
        _api: &'a OpsApi,
        alias: &'a str,
        _known: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Option<Addr>, NotifyError>> {
        Box::pin(async move { Ok(Some(Addr::Alias(alias.to_string()))) })
    }

    fn read<'a>(
        &'a self,
        api: &'a OpsApi,
        alias: &'a str,
        _known: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Option<(Addr, Value)>, NotifyError>> {
        Box::pin(async move {
            let addr = Addr::Alias(alias.to_string());
            let (status, headers, answer) = api.raw(Method::GET, api.url(&addr, ""), None).await?;
            match status {
                200..=299 => {
                    let v: Value = serde_json::from_str(&answer).map_err(|_| {
                        NotifyError::retry(format!("{}: the alert's answer is not JSON", api.what), None)
                            .because(FailureReason::BadAnswer)
                    })?;
                    Ok(Some((addr, v.get("data").cloned().unwrap_or(v))))
                }
                // "Alert does not exist": nothing arrived (or it is not processed yet).
                404 => Ok(None),
                _ => Err(api.refused(status, &headers, &answer)),
            }
        })
    }
}

/// Opsgenie Alert API v2. `Debug` shows no secret.
pub struct Opsgenie {
    name: String,
    api: OpsApi,
}

impl fmt::Debug for Opsgenie {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Opsgenie")
            .field("name", &self.name)
            .field("alerts", &self.api.alerts.as_str())
            .field("api_key", &"[REDACTED]")
            .field("options", &self.api.options)
            .finish_non_exhaustive()
    }
}

impl Opsgenie {
    /// The notifier from its configuration; reads the API key now.
    ///
    /// Errors (never showing the key): the key cannot be read or is empty, the priority is
    /// not one of P1 … P5, the URL is not http(s) or carries credentials, or the HTTP
    /// client cannot be built.
    pub fn new(cfg: &OpsgenieConfig) -> Result<Self, String> {
        let what = format!("opsgenie:{}", cfg.name);
        let key = cfg.api_key.resolve().map_err(|e| format!("{what}: api key: {e}"))?;
        if key.expose_secret().trim().is_empty() {
            return Err(format!("{what}: the api key is empty"));
        }
        let mut problems = Vec::new();
        config::validate_alert(
            &format!("notify.opsgenie[{}]", cfg.name),
            &cfg.priority,
            &cfg.responders,
            &mut problems,
        );
        if let Some(p) = problems.first() {
            return Err(format!("{what}: {p}"));
        }
        let mut alerts = parse_url(&what, cfg.base_url())?;
        alerts
            .path_segments_mut()
            .map_err(|_| format!("{what}: the URL cannot have a path"))?
            .pop_if_empty()
            .extend(["v2", "alerts"]);
        Ok(Opsgenie {
            name: cfg.name.clone(),
            api: OpsApi {
                section: format!("notify.opsgenie[{}]", cfg.name),
                alerts,
                auth: Auth::GenieKey(key),
                flavor: Flavor::Opsgenie,
                options: AlertOptions {
                    priority: cfg.priority.clone(),
                    responders: cfg.responders.clone(),
                    tags: cfg.tags.clone(),
                },
                client: http_client(&what)?,
                what,
            },
        })
    }

    /// See [`render::shown`].
    pub fn wants(&self, notice: &Notice) -> bool {
        render::shown(notice)
    }

    /// Sends the notice once (module docs). `Ok` carries the state `{"alias", "request_id"}`.
    pub async fn send(&self, notice: &Notice, state: Option<&Value>) -> Result<Sent, NotifyError> {
        self.api.send(&ByAlias, notice, state).await
    }

    /// Whether the notice already arrived (module docs).
    pub async fn already_sent(&self, notice: &Notice, state: Option<&Value>) -> Result<Option<Sent>, NotifyError> {
        self.api.already_sent(&ByAlias, notice, state).await
    }

    /// For `check-config --connect`: lists one alert (`GET /v2/alerts?limit=1`), which
    /// posts nothing. A 200 verifies the region (or URL) and that the key is valid and may
    /// read alerts (which `already_sent` needs); whether it may also create and close them
    /// (the integration's "Create and Update Access") is not verified.
    pub async fn probe(&self) -> Result<String, NotifyError> {
        let mut u = self.api.alerts.clone();
        u.set_query(Some("limit=1"));
        self.api.call(Method::GET, u, None).await?;
        Ok(format!(
            "{} answers and the API key may read alerts (1 listed, nothing posted); whether it may create and close alerts is not verified",
            self.api.alerts
        ))
    }
}

impl Destination for Opsgenie {
    fn name(&self) -> String {
        format!("opsgenie:{}", self.name)
    }
    fn wants(&self, notice: &Notice) -> bool {
        Opsgenie::wants(self, notice)
    }
    fn send<'a>(&'a self, notice: &'a Notice, state: Option<&'a Value>) -> BoxFuture<'a, Result<Sent, NotifyError>> {
        Box::pin(Opsgenie::send(self, notice, state))
    }
    fn already_sent<'a>(
        &'a self,
        notice: &'a Notice,
        state: Option<&'a Value>,
    ) -> BoxFuture<'a, Result<Option<Sent>, NotifyError>> {
        Box::pin(Opsgenie::already_sent(self, notice, state))
    }
    fn probe(&self) -> BoxFuture<'_, Result<String, NotifyError>> {
        Box::pin(Opsgenie::probe(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opsgenie_errors_read_message_and_errors() {
        let a = r#"{"message":"Request body is not processable. Please check the errors.","errors":{"message":"Message can not be empty."},"took":0.002,"requestId":"r"}"#;
        assert_eq!(
            error_detail(a),
            "Request body is not processable. Please check the errors.: Message can not be empty."
        );
        assert_eq!(error_detail("<html>bad gateway</html>"), "<html>bad gateway</html>");
    }

    #[test]
    fn an_alert_is_addressed_by_alias_with_its_identifier_type_or_by_id() {
        let cfg: OpsgenieConfig = toml::from_str("name = \"p\"\napi_key = { env = \"X\" }\nregion = \"eu\"\n").unwrap();
        assert_eq!(cfg.base_url(), "https://api.eu.opsgenie.com");
        let mut alerts = reqwest::Url::parse(cfg.base_url()).unwrap();
        alerts.path_segments_mut().unwrap().pop_if_empty().extend(["v2", "alerts"]);
        let api = OpsApi {
            what: "opsgenie:p".into(),
            section: "notify.opsgenie[p]".into(),
            alerts,
            auth: Auth::GenieKey("k".to_string().into()),
            flavor: Flavor::Opsgenie,
            options: AlertOptions::default(),
            client: reqwest::Client::new(),
        };
        assert_eq!(
            api.url(&Addr::Alias("ab12".into()), "close").as_str(),
            "https://api.eu.opsgenie.com/v2/alerts/ab12/close?identifierType=alias"
        );
        assert_eq!(api.url(&Addr::Id("a/b".into()), "").as_str(), "https://api.eu.opsgenie.com/v2/alerts/a%2Fb");
    }
}
