//! Jira Service Management Operations, Opsgenie's successor (Opsgenie's support ends on
//! 2027-04-05): the same alert as [`crate::notify::opsgenie`], through the Operations REST
//! API at `https://api.atlassian.com/jsm/ops/api/{cloudId}/v1/alerts`.
//!
//! <https://developer.atlassian.com/cloud/jira/service-desk-ops/rest/v2/api-group-alerts/>
//!
//! The requests and their order, the bodies ([`crate::render::opsgenie`], with
//! `extraProperties` for Opsgenie's `details`), the alias (the SHA-256 of the lead group's
//! key, Alertmanager's), the answers (202 with a `requestId`, processed asynchronously:
//! "delivered" means accepted, as for Opsgenie) and their classification are Opsgenie's.
//! Two things differ:
//!
//! * authentication: HTTP Basic with an Atlassian account's email (`user`) and API token
//!   (`api_token`, a secret);
//! * addressing: this API takes an alert's id only, not its alias ("JSM API
//!   'https://api.atlassian.com/jsm/ops/api/{cloudId}/v1/alerts/{id}'" supports "only alert
//!   ID", <https://jira.atlassian.com/browse/JSDCLOUD-14179>), so the alert of an alias is
//!   found by List Alerts (`GET …/v1/alerts` with a Lucene `query`, `sort`, `order`, the
//!   list in `values`) with `query=alias:<alias> AND status:open` (the workaround that
//!   issue gives), and its id is kept in the state (`{"alias", "id", "request_id"}`) for
//!   the next notices of the episode. Right after a create, the alert may not be listed yet
//!   (asynchronous processing): the create carries the verdict, and the next notice looks
//!   again.
//!
//! `already_sent` finds the alert the same way and reads it (`GET …/alerts/{id}`, and its
//! notes for a changed verdict) for culprit's `culprit notice <key>` line.
//!
//! Rate limits: as Opsgenie's (not paced; see [`crate::notify::opsgenie`]): the Operations
//! API documents no number of its own for alerts
//! (<https://developer.atlassian.com/cloud/jira/service-desk-ops/rest/v2/api-group-alerts/>).
//!
//! The API token is a secret: it is never in `Debug`, errors or logs.

mod config;

pub use config::JsmConfig;

use std::fmt;

use futures::future::BoxFuture;
use reqwest::Method;
use secrecy::ExposeSecret;
use serde_json::Value;

use crate::model::notice::Notice;
use crate::notify::opsgenie::{Addr, Auth, Locate, OpsApi};
use crate::notify::webhook::{http_client, parse_url};
use crate::notify::{Destination, NotifyError, Sent};
use crate::render::opsgenie::{self as render, AlertOptions, Flavor};

/// Finds an alert's id by its alias with List Alerts.
struct ById;

impl ById {
    /// The id of the newest alert of `alias` (`open`: only an open one), from List Alerts.
    async fn find(api: &OpsApi, alias: &str, open: bool) -> Result<Option<String>, NotifyError> {
        let mut u = api.alerts.clone();
        let query = if open { format!("alias:{alias} AND status:open") } else { format!("alias:{alias}") };
        u.query_pairs_mut().append_pair("query", &query).append_pair("sort", "createdAt").append_pair("order", "desc");
        let answer = api.call(Method::GET, u, None).await?;
        let list = answer.get("values").or_else(|| answer.get("data")).and_then(Value::as_array);
        Ok(list.and_then(|l| {
            l.iter()
                .filter(|a| a.get("alias").and_then(Value::as_str).is_none_or(|x| x == alias))
                .find_map(|a| a.get("id").and_then(Value::as_str).map(str::to_string))
        }))
    }
}

impl Locate for ById {
    fn locate<'a>(
        &'a self,
        api: &'a OpsApi,
        alias: &'a str,
        known: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Option<Addr>, NotifyError>> {
        Box::pin(async move {
            if let Some(id) = known {
                return Ok(Some(Addr::Id(id.to_string())));
            }
            Ok(ById::find(api, alias, true).await?.map(Addr::Id))
        })
    }

    fn read<'a>(
        &'a self,
        api: &'a OpsApi,
        alias: &'a str,
        known: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Option<(Addr, Value)>, NotifyError>> {
        Box::pin(async move {
            let id = match known {
                Some(id) => id.to_string(),
                None => match ById::find(api, alias, false).await? {
                    Some(id) => id,
                    None => return Ok(None),
                },
            };
            let addr = Addr::Id(id);
            let (status, headers, answer) = api.raw(Method::GET, api.url(&addr, ""), None).await?;
            match status {
                200..=299 => {
                    let v: Value = serde_json::from_str(&answer).unwrap_or(Value::Null);
                    Ok(Some((addr, v.get("data").cloned().unwrap_or(v))))
                }
                404 => Ok(None),
                _ => Err(api.refused(status, &headers, &answer)),
            }
        })
    }
}

/// Jira Service Management Operations. `Debug` shows no secret.
pub struct Jsm {
    name: String,
    api: OpsApi,
}

impl fmt::Debug for Jsm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Jsm")
            .field("name", &self.name)
            .field("alerts", &self.api.alerts.as_str())
            .field("api_token", &"[REDACTED]")
            .field("options", &self.api.options)
            .finish_non_exhaustive()
    }
}

impl Jsm {
    /// The notifier from its configuration; reads the API token now.
    ///
    /// Errors (never showing the token): it cannot be read or is empty, the priority is
    /// not one of P1 … P5, the cloud id is not one, the URL is not http(s) or carries
    /// credentials, or the HTTP client cannot be built.
    pub fn new(cfg: &JsmConfig) -> Result<Self, String> {
        let what = format!("jsm:{}", cfg.name);
        let token = cfg.api_token.resolve().map_err(|e| format!("{what}: api token: {e}"))?;
        if token.expose_secret().trim().is_empty() {
            return Err(format!("{what}: the api token is empty"));
        }
        let mut problems = Vec::new();
        crate::notify::registry::DestinationConfig::validate(cfg, &mut problems);
        if let Some(p) = problems.first() {
            return Err(format!("{what}: {p}"));
        }
        let mut alerts = parse_url(&what, &cfg.url)?;
        alerts.path_segments_mut().map_err(|_| format!("{what}: the URL cannot have a path"))?.pop_if_empty().extend([
            "jsm",
            "ops",
            "api",
            &cfg.cloud_id,
            "v1",
            "alerts",
        ]);
        Ok(Jsm {
            name: cfg.name.clone(),
            api: OpsApi {
                section: format!("notify.jsm[{}]", cfg.name),
                alerts,
                auth: Auth::Basic { user: cfg.user.clone(), token },
                flavor: Flavor::Jsm,
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

    /// Sends the notice once (module docs).
    pub async fn send(&self, notice: &Notice, state: Option<&Value>) -> Result<Sent, NotifyError> {
        self.api.send(&ById, notice, state).await
    }

    /// Whether the notice already arrived (module docs).
    pub async fn already_sent(&self, notice: &Notice, state: Option<&Value>) -> Result<Option<Sent>, NotifyError> {
        self.api.already_sent(&ById, notice, state).await
    }

    /// For `check-config --connect`: lists one alert (`GET …/v1/alerts?size=1`), which
    /// posts nothing. A 200 verifies the URL, the cloud id and that the user and token may read
    /// the site's alerts (which `already_sent` needs); whether they may create and close
    /// them is not verified.
    pub async fn probe(&self) -> Result<String, NotifyError> {
        let mut u = self.api.alerts.clone();
        u.query_pairs_mut().append_pair("size", "1");
        self.api.call(Method::GET, u, None).await?;
        Ok(format!(
            "{} answers and the user and API token may read alerts (1 listed, nothing posted); whether they may create and close alerts is not verified",
            self.api.alerts
        ))
    }
}

impl Destination for Jsm {
    fn name(&self) -> String {
        format!("jsm:{}", self.name)
    }
    fn wants(&self, notice: &Notice) -> bool {
        Jsm::wants(self, notice)
    }
    fn send<'a>(&'a self, notice: &'a Notice, state: Option<&'a Value>) -> BoxFuture<'a, Result<Sent, NotifyError>> {
        Box::pin(Jsm::send(self, notice, state))
    }
    fn already_sent<'a>(
        &'a self,
        notice: &'a Notice,
        state: Option<&'a Value>,
    ) -> BoxFuture<'a, Result<Option<Sent>, NotifyError>> {
        Box::pin(Jsm::already_sent(self, notice, state))
    }
    fn probe(&self) -> BoxFuture<'_, Result<String, NotifyError>> {
        Box::pin(Jsm::probe(self))
    }
}
