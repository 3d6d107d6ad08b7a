//! Grafana annotations: one region per job episode, from the verdict to the resolution.
//!
//! <https://grafana.com/docs/grafana/latest/developers/http_api/annotations/> (the
//! `/api/annotations` API), bodies in [`crate::render::grafana`]:
//!
//! * a verdict without state: `POST /api/annotations` at the notice's time (a notice
//!   carries no alert's `startsAt`, so the verdict's time stands for the incident's start),
//!   answered `200 {"id": …, "message": "Annotation added"}`; the id is kept in the state;
//! * a verdict with state (a revision or a changed verdict): `PATCH /api/annotations/{id}`
//!   with the new `text`;
//! * a resolution with state: `PATCH` with `timeEnd`, which closes the region; without
//!   state there is no annotation to close and nothing is sent.
//!
//! "Could not diagnose" and the notices of alert groups joining or leaving are not
//! annotated: a dashboard shows the job's incidents, not culprit's own trouble.
//!
//! A repeat: each annotation carries the tag `culprit-key:<hash of the idempotency key>`;
//! after an unknown outcome [`Grafana::already_sent`] finds it with `GET
//! /api/annotations?tags=…`, so a create is never repeated unmarked; a PATCH is the same
//! edit twice.
//!
//! Answers: 2xx is done; 400 (the body), 401 (the token), 403 (the service account's
//! permissions), 404 (the dashboard or annotation) are final with a hint naming the key;
//! 408, 429 and 5xx are retryable with `Retry-After`.
//!
//! Rate limit: none documented for the annotations API
//! (<https://grafana.com/docs/grafana/latest/developer-resources/api-reference/http-api/annotations/>),
//! so requests are not paced; a 429 (a proxy's) waits its `Retry-After`.
//!
//! The token is a secret: never in `Debug`, errors or logs.

mod config;

pub use config::GrafanaConfig;

use std::fmt;

use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::model::notice::{Notice, NoticeKind};
use crate::notify::webhook::{Auth, http_client, parse_url, read_answer};
use crate::notify::{Destination, FailureReason, NotifyError, Sent, status_error, transport_error};
use crate::render::grafana::{create, key_tag, patch};

/// A Grafana destination. `Debug` shows no secret.
pub struct Grafana {
    name: String,
    url: reqwest::Url,
    token: Auth,
    dashboard_uid: Option<String>,
    tags: Vec<String>,
    client: reqwest::Client,
}

impl fmt::Debug for Grafana {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Grafana")
            .field("name", &self.name)
            .field("url", &self.url.as_str())
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

impl Grafana {
    /// The notifier from its configuration; reads the token now.
    pub fn new(cfg: &GrafanaConfig) -> Result<Self, String> {
        if cfg.name.trim().is_empty() {
            return Err("grafana: `name` is empty".into());
        }
        let what = format!("grafana:{}", cfg.name);
        let token = cfg.token.resolve().map_err(|e| format!("{what}: token: {e}"))?;
        let mut url = parse_url(&what, &cfg.url)?;
        if !url.path().ends_with('/') {
            url.set_path(&format!("{}/", url.path()));
        }
        Ok(Grafana {
            name: cfg.name.clone(),
            url,
            token: Auth::Bearer(token),
            dashboard_uid: cfg.dashboard_uid.clone(),
            tags: cfg.tags.clone(),
            client: http_client(&what)?,
        })
    }

    fn what(&self) -> String {
        format!("grafana:{}", self.name)
    }

    fn endpoint(&self, path: &str) -> reqwest::Url {
        self.url.join(path).expect("a relative path joins")
    }

    /// Verdicts (first, revised, changed) and resolutions.
    pub fn wants(&self, notice: &Notice) -> bool {
        matches!(notice.kind, NoticeKind::Verdict | NoticeKind::Resolved)
    }

    /// The annotation id kept in `state`.
    fn id(state: Option<&Value>) -> Option<i64> {
        state.and_then(|s| s.get("id")).and_then(Value::as_i64)
    }

    /// Creates, updates or closes the episode's annotation once (see the module docs).
    pub async fn send(&self, notice: &Notice, state: Option<&Value>) -> Result<Sent, NotifyError> {
        let what = self.what();
        if notice.kind == NoticeKind::Verdict && notice.verdict.is_none() {
            return Err(NotifyError::fatal(format!("{what}: a verdict notice without a verdict")));
        }
        match (Self::id(state), notice.kind) {
            (Some(id), _) => {
                let body = patch(notice);
                let request = self.client.patch(self.endpoint(&format!("api/annotations/{id}"))).json(&body);
                self.call(request, "patch").await?;
                Ok(Sent { state: state.cloned() })
            }
            (None, NoticeKind::Resolved) => {
                tracing::debug!(destination = %what, "grafana: no annotation of this episode to close");
                Ok(Sent::default())
            }
            (None, _) => {
                let body = create(notice, &self.tags, self.dashboard_uid.as_deref(), notice.at_ms);
                let request = self.client.post(self.endpoint("api/annotations")).json(&body);
                let answer = self.call(request, "post").await?;
                let id = serde_json::from_str::<Value>(&answer).ok().and_then(|a| a.get("id").and_then(Value::as_i64));
                let Some(id) = id else {
                    return Err(NotifyError::retry(format!("{what}: the answer carries no annotation id"), None)
                        .because(FailureReason::BadAnswer));
                };
                Ok(Sent { state: Some(json!({ "id": id })) })
            }
        }
    }

    /// Sends with the token; the answer's body on 2xx, else the classified error.
    async fn call(&self, request: reqwest::RequestBuilder, doing: &str) -> Result<String, NotifyError> {
        let what = self.what();
        let response = self.token.apply(request).send().await.map_err(|e| transport_error(&what, &e))?;
        let (status, headers, answer) = read_answer(response).await;
        if (200..300).contains(&status) {
            tracing::debug!(destination = %what, status, doing, "grafana: done");
            return Ok(answer);
        }
        let detail = serde_json::from_str::<Value>(&answer)
            .ok()
            .and_then(|a| a.get("message").and_then(Value::as_str).map(str::to_string))
            .unwrap_or(answer);
        Err(status_error(&what, status, &headers, &detail, &Auth::redactor(Some(&self.token)))
            .hint(self.hint(status, doing)))
    }

    /// What to do about a final answer, naming this section's keys.
    fn hint(&self, status: u16, doing: &str) -> Option<String> {
        let at = format!("the [[notify.grafana]] named {:?}", self.name);
        match status {
            400 => Some(format!(
                "Grafana refused the annotation (its message is logged): check dashboard_uid and tags of {at}"
            )),
            401 => Some(format!(
                "Grafana does not accept the token of {at}: use a service account token (glsa_…) that has not expired"
            )),
            403 => Some(format!(
                "the service account of the token of {at} may not write annotations: give it annotations:write and annotations:read (the Editor role)"
            )),
            404 if doing == "patch" => Some(format!(
                "the annotation was deleted in Grafana; the next verdict of the job creates a new one ({at})"
            )),
            404 if self.dashboard_uid.is_some() => Some(format!(
                "Grafana knows no dashboard with the dashboard_uid of {at}, or url is not Grafana's base URL"
            )),
            _ => crate::notify::status_hint(status, &format!("the url of {at}"), &format!("the token of {at}")),
        }
    }

    /// After an unknown outcome: the annotation the notice would create, found by its
    /// idempotency tag. With state (an update) the PATCH is repeated as it is.
    pub async fn already_sent(&self, notice: &Notice, state: Option<&Value>) -> Result<Option<Sent>, NotifyError> {
        if state.is_some() || notice.kind != NoticeKind::Verdict {
            return Ok(None);
        }
        let mut url = self.endpoint("api/annotations");
        url.query_pairs_mut().append_pair("tags", &key_tag(&notice.idempotency_key)).append_pair("limit", "1");
        let answer = self.call(self.client.get(url), "find").await?;
        let found = serde_json::from_str::<Value>(&answer)
            .ok()
            .and_then(|a| a.as_array().and_then(|a| a.first()).and_then(|x| x.get("id")).and_then(Value::as_i64));
        Ok(found.map(|id| Sent { state: Some(json!({ "id": id })) }))
    }

    /// For `check-config --connect`: `GET /api/health` (Grafana answers, its database is
    /// up), then `GET /api/annotations?limit=1` with the token (it is accepted and may
    /// read annotations). Nothing is written, so the write permission is not verified.
    pub async fn probe(&self) -> Result<String, NotifyError> {
        let what = self.what();
        let response =
            self.client.get(self.endpoint("api/health")).send().await.map_err(|e| transport_error(&what, &e))?;
        let (status, headers, answer) = read_answer(response).await;
        if !(200..300).contains(&status) {
            return Err(status_error(&what, status, &headers, &answer, &Auth::redactor(Some(&self.token)))
                .hint(self.hint(status, "health")));
        }
        let mut url = self.endpoint("api/annotations");
        url.query_pairs_mut().append_pair("limit", "1");
        self.call(self.client.get(url), "read").await?;
        Ok(format!(
            "{} answers /api/health and the token reads annotations; nothing was written, so annotations:write is not verified",
            self.url.origin().ascii_serialization()
        ))
    }
}

impl Destination for Grafana {
    fn name(&self) -> String {
        self.what()
    }
    fn wants(&self, notice: &Notice) -> bool {
        Grafana::wants(self, notice)
    }
    fn send<'a>(&'a self, notice: &'a Notice, state: Option<&'a Value>) -> BoxFuture<'a, Result<Sent, NotifyError>> {
        Box::pin(Grafana::send(self, notice, state))
    }
    fn already_sent<'a>(
        &'a self,
        notice: &'a Notice,
        state: Option<&'a Value>,
    ) -> BoxFuture<'a, Result<Option<Sent>, NotifyError>> {
        Box::pin(Grafana::already_sent(self, notice, state))
    }
    fn probe(&self) -> BoxFuture<'_, Result<String, NotifyError>> {
        Box::pin(Grafana::probe(self))
    }
}
