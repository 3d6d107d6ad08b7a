//! Alertmanager API v2: culprit's own alert (`FlinkBackpressureCulprit` by default), next to
//! the source alert, never replacing it.
//!
//! `POST {url}/api/v2/alerts` with a JSON array of alerts rendered by
//! [`crate::render::alertmanager`]:
//!
//! * [`NoticeKind::Verdict`], [`NoticeKind::CouldNotDiagnose`]: the alert with `startsAt`
//!   the notice time and an explicit `endsAt` = notice time + `ends_after` (the service
//!   re-posts while the source alert fires; if culprit stops, the alert ends by itself). A
//!   notice for a group that no longer fires posts the alert already ended. When the labels
//!   differ from the alert posted last for the group (the culprit or finding changed), that
//!   earlier alert is resolved in the same request, so one group never leaves two culprit
//!   alerts firing.
//! * [`NoticeKind::Resolved`]: the alert posted last for the group (same labels), with
//!   `endsAt` = notice time, which resolves it. Without such an alert (no state and no
//!   verdict in the notice) nothing is posted: no label set would match.
//!
//! `Ok` keeps `{"alert": <the alert posted>}` as the group's state (none after a
//! resolution). Answers: 2xx (200) is delivered; 408, 429 and 5xx are retryable (with
//! `Retry-After`); 400 and any other status are final. Optional bearer or basic auth.
//!
//! Rate limit: Alertmanager documents none for `POST /api/v2/alerts` (Prometheus posts
//! every alert there on each evaluation,
//! <https://prometheus.io/docs/alerting/latest/clients/>), so re-posts are not paced.

mod config;
pub mod silence;

pub use config::AlertmanagerConfig;

use std::fmt;

use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::model::notice::{Notice, NoticeKind};
use crate::notify::webhook::{Auth, http_client, parse_url, read_answer};
use crate::notify::{Destination, NotifyError, Sent, status_error, transport_error};
use crate::render::alertmanager::{culprit_alert, ended};

/// The path of the alerts endpoint, after the configured base URL (and any path prefix).
pub const ALERTS_PATH: &str = "api/v2/alerts";

/// Alertmanager API v2. `Debug` shows no secret.
pub struct Alertmanager {
    alerts_url: reqwest::Url,
    alertname: String,
    ends_after_ms: i64,
    auth: Option<Auth>,
    client: reqwest::Client,
}

impl fmt::Debug for Alertmanager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Alertmanager")
            .field("alerts_url", &self.alerts_url.as_str())
            .field("alertname", &self.alertname)
            .field("ends_after_ms", &self.ends_after_ms)
            .field("auth", &self.auth)
            .finish_non_exhaustive()
    }
}

impl Alertmanager {
    /// The notifier from its configuration; resolves the auth secret now. The alerts URL is
    /// `{url}/api/v2/alerts` (a trailing `/` in `url` is fine; a path prefix is kept).
    ///
    /// Errors (never showing a secret): the URL is not http(s) or carries credentials,
    /// `alertname` is empty, `ends_after` is not positive, the secret cannot be read, or the
    /// HTTP client cannot be built.
    pub fn new(cfg: &AlertmanagerConfig) -> Result<Self, String> {
        let base = parse_url("alertmanager", &cfg.url)?;
        let alerts_url = parse_url("alertmanager", &format!("{}/{ALERTS_PATH}", base.as_str().trim_end_matches('/')))?;
        if cfg.alertname.trim().is_empty() {
            return Err("alertmanager: `alertname` is empty".into());
        }
        if cfg.ends_after.as_ms() <= 0 {
            return Err("alertmanager: `ends_after` must be longer than 0".into());
        }
        Ok(Alertmanager {
            alerts_url,
            alertname: cfg.alertname.clone(),
            ends_after_ms: cfg.ends_after.as_ms(),
            auth: cfg.auth.as_ref().map(|a| Auth::resolve(a, "alertmanager")).transpose()?,
            client: http_client("alertmanager")?,
        })
    }

    /// Verdicts, resolutions and failures to diagnose; not the groups that join or leave a
    /// job's verdict (its alert lists them).
    pub fn wants(&self, notice: &Notice) -> bool {
        matches!(notice.kind, NoticeKind::Verdict | NoticeKind::Resolved | NoticeKind::CouldNotDiagnose)
    }

    /// The alerts one send posts, first the notice's own, then an earlier alert it ends;
    /// empty when there is nothing to post (see the module docs). Pure.
    pub fn alerts(&self, notice: &Notice, state: Option<&Value>) -> Vec<Value> {
        let previous = state.and_then(|s| s.get("alert")).filter(|a| a.get("labels").is_some_and(Value::is_object));
        match notice.kind {
            NoticeKind::Resolved => match previous {
                Some(p) => vec![ended(p, notice.at_ms)],
                None if notice.verdict.is_some() => vec![culprit_alert(notice, &self.alertname, notice.at_ms)],
                None => vec![],
            },
            NoticeKind::Verdict | NoticeKind::CouldNotDiagnose => {
                let ends_at =
                    if notice.firing { notice.at_ms.saturating_add(self.ends_after_ms) } else { notice.at_ms };
                let alert = culprit_alert(notice, &self.alertname, ends_at);
                let mut alerts = vec![];
                if let Some(p) = previous.filter(|p| p["labels"] != alert["labels"]) {
                    alerts.push(ended(p, notice.at_ms));
                }
                alerts.insert(0, alert);
                alerts
            }
            NoticeKind::Joined | NoticeKind::GroupResolved | NoticeKind::Incident => vec![],
        }
    }

    /// A dry run for `check-config --connect`: `GET {url}/api/v2/status` with the
    /// configured auth (Alertmanager's version); nothing is posted.
    pub async fn probe(&self) -> Result<String, NotifyError> {
        let url = self.alerts_url.as_str().trim_end_matches(ALERTS_PATH).to_string() + "api/v2/status";
        let request = self.client.get(&url);
        let request = match &self.auth {
            Some(a) => a.apply(request),
            None => request,
        };
        let response = request.send().await.map_err(|e| transport_error("alertmanager", &e))?;
        let (status, headers, answer) = read_answer(response).await;
        if (200..300).contains(&status) {
            let version = serde_json::from_str::<Value>(&answer)
                .ok()
                .and_then(|v| v["versionInfo"]["version"].as_str().map(str::to_string))
                .unwrap_or_else(|| "?".into());
            return Ok(format!("Alertmanager {version} answers (GET /api/v2/status); nothing was posted"));
        }
        Err(status_error("alertmanager", status, &headers, &answer, &Auth::redactor(self.auth.as_ref()))
            .hint(hint(status)))
    }

    /// Posts once (see the module docs).
    ///
    /// Errors: a verdict notice without a verdict (final, nothing sent); a non-2xx answer
    /// ([`status_error`]: 408/429/5xx retryable, others final); a transport failure
    /// (retryable). `state` is what the last successful send for the group returned.
    pub async fn send(&self, notice: &Notice, state: Option<&Value>) -> Result<Sent, NotifyError> {
        if notice.kind == NoticeKind::Verdict && notice.verdict.is_none() {
            return Err(NotifyError::fatal("alertmanager: a verdict notice without a verdict"));
        }
        let alerts = self.alerts(notice, state);
        if alerts.is_empty() {
            tracing::debug!(destination = "alertmanager", group_key = %notice.group_key, "alertmanager: nothing of culprit's to resolve");
            return Ok(Sent::default());
        }
        let request = self.client.post(self.alerts_url.clone()).json(&alerts);
        let request = match &self.auth {
            Some(a) => a.apply(request),
            None => request,
        };
        let response = request.send().await.map_err(|e| transport_error("alertmanager", &e))?;
        let (status, headers, answer) = read_answer(response).await;
        if (200..300).contains(&status) {
            tracing::debug!(destination = "alertmanager", status, alerts = alerts.len(), kind = ?notice.kind, "alertmanager: posted");
            let state = match notice.kind {
                NoticeKind::Resolved => None,
                _ => Some(json!({ "alert": alerts[0] })),
            };
            return Ok(Sent { state });
        }
        let e = status_error("alertmanager", status, &headers, &answer, &Auth::redactor(self.auth.as_ref()))
            .hint(hint(status));
        tracing::debug!(destination = "alertmanager", status, retryable = e.retryable, "alertmanager: refused");
        Err(e)
    }
}

/// What to do about a final answer of Alertmanager's API: a 404 or 405 is a URL that is
/// not Alertmanager's base (culprit adds `/api/v2/alerts`, which Alertmanager has served
/// since 0.16; its v1 API is gone since 0.27), the others as [`crate::notify::status_hint`].
fn hint(status: u16) -> Option<String> {
    match status {
        404 | 405 => Some(format!(
            "culprit posts to {{notify.alertmanager.url}}/{ALERTS_PATH}: set notify.alertmanager.url to Alertmanager's base URL (http://alertmanager:9093, with its --web.route-prefix if it has one), of an Alertmanager 0.16 or newer"
        )),
        _ => crate::notify::status_hint(status, "notify.alertmanager.url", "notify.alertmanager.auth"),
    }
}

impl Destination for Alertmanager {
    fn name(&self) -> String {
        "alertmanager".into()
    }
    fn wants(&self, notice: &Notice) -> bool {
        Alertmanager::wants(self, notice)
    }
    fn refreshes(&self) -> bool {
        true
    }
    fn send<'a>(&'a self, notice: &'a Notice, state: Option<&'a Value>) -> BoxFuture<'a, Result<Sent, NotifyError>> {
        Box::pin(Alertmanager::send(self, notice, state))
    }
    fn probe(&self) -> BoxFuture<'_, Result<String, NotifyError>> {
        Box::pin(Alertmanager::probe(self))
    }
}
