//! `POST /slack/interactivity`: the buttons of culprit's Slack verdicts ("Re-diagnose now",
//! "Silence 2 h", [`crate::render::slack::with_actions`]).
//!
//! Every request is verified by its Slack signature ([`signature`]) against the
//! `signing_secret` of each `[notify.slack]` that has one; the one that verifies it is the
//! destination the button belongs to. Anything else is refused (401), and the route
//! answers 404 when no Slack destination has a signing secret. A verified request is
//! answered 200 at once (Slack wants an answer within 3 s) and its work runs in a spawned
//! task, whose result is a reply in the verdict's thread (`chat.postMessage` with the
//! destination's token):
//!
//! * "Re-diagnose now": a live diagnosis of the verdict's job (as `/api/v1/diagnose`),
//!   compared with the stored verdict by its decision (culprit, finding, status, hazards):
//!   "re-diagnosed: unchanged" or what it says now.
//! * "Silence 2 h": an Alertmanager silence (API v2, `[notify.slack] alertmanager_url`) on
//!   the alert group's labels as the store keeps them with the verdict's notice, created
//!   by the user who pressed, with the verdict's link as its comment: "silenced by @x until
//!   14:00".
//!
//! A button's `value` is the stored verdict's id and nothing else is taken from the
//! payload but who pressed: the job, the labels and the thread are the store's.

pub mod payload;
pub mod signature;

use std::sync::Arc;

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use secrecy::{ExposeSecret, SecretString};

use crate::config::Config;
use crate::model::notice::Notice;
use crate::model::request::DiagnosisRequest;
use crate::model::verdict::Verdict;
use crate::notify::alertmanager::silence::{Silencer, silence};
use crate::notify::slack::{Slack, SlackMode};
use crate::render::slack::{
    REDIAGNOSE_ACTION, SILENCE_ACTION, action_failed_reply, rediagnosed_reply, silenced_reply, who,
};
use crate::service::Service;
use payload::{Action, User};
use signature::Refused;

/// The host of the `response_url`s culprit answers on: Slack's.
/// <https://api.slack.com/interactivity/handling#message_responses>
pub const RESPONSE_HOST: &str = "hooks.slack.com";

/// How long "Silence 2 h" silences.
pub const SILENCE_FOR_MS: i64 = 2 * 3600 * 1000;

/// One Slack destination whose buttons culprit answers.
struct App {
    /// `slack` or `slack:<name>`: the outbox's destination.
    destination: String,
    secret: SecretString,
    /// Posts the replies (its own client and pacing).
    slack: Slack,
    /// Creates the silences (`alertmanager_url`).
    silencer: Option<Silencer>,
    /// Hosts a `response_url` may be on: [`RESPONSE_HOST`] and `api_url`'s (a Slack
    /// stand-in's); any other is not posted to.
    response_hosts: Vec<String>,
    /// Posts to `response_url`.
    client: reqwest::Client,
    /// The verdicts whose re-diagnosis runs: a press while one runs starts no second.
    rediagnosing: InFlight,
}

/// Verdict ids with an action running.
#[derive(Default)]
struct InFlight(std::sync::Mutex<std::collections::HashSet<i64>>);

/// One id marked running until dropped.
struct Running<'a>(&'a InFlight, i64);

impl InFlight {
    /// Marks `id` running; `None` when it runs already.
    fn start(&self, id: i64) -> Option<Running<'_>> {
        let mut set = self.0.lock().unwrap_or_else(|e| e.into_inner());
        set.insert(id).then(|| Running(self, id))
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        (self.0).0.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.1);
    }
}

/// The Slack destinations with interactivity (`signing_secret`), secrets read at start.
#[derive(Default)]
pub struct Interactivity {
    apps: Vec<Arc<App>>,
    /// The signatures of the requests acted on within the replay window, with their
    /// timestamps: the same request again (a replay, or Slack sending it twice) is
    /// acknowledged and not acted on twice.
    seen: std::sync::Mutex<std::collections::HashMap<String, i64>>,
}

impl std::fmt::Debug for Interactivity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.apps.iter().map(|a| a.destination.as_str()).collect();
        f.debug_struct("Interactivity").field("destinations", &names).finish_non_exhaustive()
    }
}

impl Interactivity {
    /// From `[notify.slack]` (every one in web_api mode with a `signing_secret`). Errors
    /// name the key, never a secret.
    pub fn from_config(config: &Config) -> Result<Interactivity, String> {
        let mut apps = Vec::new();
        for cfg in config.notify.slack.iter().flat_map(|s| s.as_slice()) {
            let (Some(secret), SlackMode::WebApi) = (&cfg.signing_secret, cfg.mode) else { continue };
            let destination = cfg.destination_name();
            let secret = secret.resolve().map_err(|e| format!("{destination}: signing_secret: {e}"))?;
            if secret.expose_secret().trim().is_empty() {
                return Err(format!("{destination}: signing_secret is empty"));
            }
            let silencer = cfg
                .alertmanager_url
                .as_deref()
                .map(|u| Silencer::new(u, cfg.alertmanager_auth.as_ref()))
                .transpose()
                .map_err(|e| format!("{destination}: alertmanager_url: {e}"))?;
            let api_host = reqwest::Url::parse(&cfg.api_url).ok().and_then(|u| u.host_str().map(str::to_string));
            let response_hosts = std::iter::once(RESPONSE_HOST.to_string()).chain(api_host).collect();
            let client = crate::notify::webhook::http_client("slack: response_url")?;
            let slack = Slack::new(cfg)?;
            let rediagnosing = Default::default();
            apps.push(Arc::new(App { destination, secret, slack, silencer, response_hosts, client, rediagnosing }));
        }
        Ok(Interactivity { apps, seen: Default::default() })
    }

    /// Whether a verified request (by its signature, at `ts`) is new; forgets those older
    /// than the replay window, which could not verify again anyway.
    fn first_time(&self, headers: &HeaderMap, now_s: i64) -> bool {
        let header = |k: &str| headers.get(k).and_then(|v| v.to_str().ok()).unwrap_or_default();
        let ts = header("x-slack-request-timestamp").trim().parse::<i64>().unwrap_or(now_s);
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.retain(|_, t| (now_s - *t).abs() <= signature::MAX_AGE_S);
        // Hex is read in either case: the key is the signature as it verifies, lowercase.
        seen.insert(header("x-slack-signature").trim().to_ascii_lowercase(), ts).is_none()
    }

    /// The app whose secret verifies the request; else the refusal that says most (a
    /// stale request before a wrong signature before none).
    fn verify(&self, headers: &HeaderMap, body: &[u8], now_s: i64) -> Result<Arc<App>, Refused> {
        let header = |k: &str| headers.get(k).and_then(|v| v.to_str().ok());
        let (ts, sig) = (header("x-slack-request-timestamp"), header("x-slack-signature"));
        let mut worst = Refused::Unsigned;
        for app in &self.apps {
            match signature::verify(app.secret.expose_secret().as_bytes(), ts, sig, body, now_s) {
                Ok(()) => return Ok(app.clone()),
                Err(Refused::Stale) => worst = Refused::Stale,
                Err(Refused::Invalid) if worst != Refused::Stale => worst = Refused::Invalid,
                Err(_) => {}
            }
        }
        Err(worst)
    }
}

fn refuse(status: StatusCode, message: &str) -> Response {
    (status, axum::Json(serde_json::json!({ "error": message }))).into_response()
}

/// `POST /slack/interactivity` (see the module docs): 200 with an empty body once the
/// signature holds and the payload reads (its work spawned, once per request: the same
/// signed request again within the window is acknowledged and not acted on); 401
/// unsigned, stale or forged; 400 not an interaction payload; 404 interactivity not
/// configured.
pub fn interactivity(service: &Arc<Service>, apps: &Interactivity, headers: &HeaderMap, body: &[u8]) -> Response {
    if apps.apps.is_empty() {
        return refuse(StatusCode::NOT_FOUND, "Slack interactivity is not configured ([notify.slack] signing_secret)");
    }
    let now_s = service.clock.now_ms().div_euclid(1000);
    let app = match apps.verify(headers, body, now_s) {
        Ok(app) => app,
        Err(why) => {
            tracing::info!(reason = why.explain(), "slack interactivity: request refused (401)");
            return refuse(StatusCode::UNAUTHORIZED, why.explain());
        }
    };
    let payload = match payload::parse(body) {
        Ok(p) => p,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, &e),
    };
    if !apps.first_time(headers, now_s) {
        tracing::info!(destination = %app.destination, "slack interactivity: the same request again; acknowledged, not acted on twice");
        return StatusCode::OK.into_response();
    }
    if payload.kind == "block_actions" {
        for action in payload.actions {
            if action.action_id == REDIAGNOSE_ACTION || action.action_id == SILENCE_ACTION {
                let respond = payload.response_url.clone();
                tokio::spawn(act(service.clone(), app.clone(), payload.user.clone(), action, respond));
            }
        }
    }
    StatusCode::OK.into_response()
}

/// What the store holds about the verdict a button names.
struct Target {
    id: i64,
    notice: Notice,
    verdict: Verdict,
    /// The Slack message (`{"channel", "ts"}`) the replies go under.
    thread: serde_json::Value,
}

/// Looks the verdict up, does what the button asks and replies in the thread; failures
/// that leave no thread to reply in are logged.
async fn act(service: Arc<Service>, app: Arc<App>, user: User, action: Action, response_url: Option<String>) {
    let what = if action.action_id == SILENCE_ACTION { "Silence" } else { "Re-diagnose" };
    let by = who(&user.id, user.handle());
    let target = match target(&service, &app, action.value.as_deref()).await {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(destination = %app.destination, action = what, error = %e, "slack button: nothing to act on");
            // No thread to reply in: the presser alone is told, where Slack takes answers.
            if let Some(url) = response_url {
                respond(&app, &url, &action_failed_reply(&by, what, &e)).await;
            }
            return;
        }
    };
    let result = if action.action_id == SILENCE_ACTION {
        silence_group(&service, &app, &target, &user, &by).await
    } else {
        let Some(_running) = app.rediagnosing.start(target.id) else {
            if let Some(url) = response_url {
                let why = format!(
                    "a re-diagnosis of verdict {} is running already; its answer comes in the thread",
                    target.id
                );
                respond(&app, &url, &action_failed_reply(&by, what, &why)).await;
            }
            return;
        };
        rediagnose(&service, &target, &by).await
    };
    let text = result.unwrap_or_else(|e| {
        tracing::warn!(destination = %app.destination, action = what, verdict = target.id, error = %e, "slack button: the action failed");
        action_failed_reply(&by, what, &e)
    });
    if let Err(e) = app.slack.reply_text(&target.thread, &text).await {
        tracing::warn!(destination = %app.destination, action = what, error = %e, "slack button: cannot reply in the thread");
    }
}

/// An ephemeral answer (only the presser sees it) on the interaction's `response_url`,
/// when it is on one of the app's [`App::response_hosts`]; failures are logged.
async fn respond(app: &App, url: &str, text: &str) {
    let allowed = reqwest::Url::parse(url)
        .ok()
        .filter(|u| matches!(u.scheme(), "https" | "http"))
        .and_then(|u| u.host_str().map(str::to_string))
        .is_some_and(|h| app.response_hosts.contains(&h));
    if !allowed {
        tracing::warn!(destination = %app.destination, "slack button: the response_url is not Slack's; not answered");
        return;
    }
    let body = serde_json::json!({ "response_type": "ephemeral", "replace_original": false, "text": text });
    match app.client.post(url).json(&body).send().await {
        Ok(r) if r.status().is_success() => {}
        Ok(r) => {
            tracing::warn!(destination = %app.destination, status = r.status().as_u16(), "slack button: response_url refused the answer")
        }
        Err(e) => {
            tracing::warn!(destination = %app.destination, error = %e.without_url(), "slack button: cannot answer on response_url")
        }
    }
}

async fn target(service: &Service, app: &App, value: Option<&str>) -> Result<Target, String> {
    let id: i64 = value.and_then(|v| v.parse().ok()).ok_or("the button carries no verdict id")?;
    let store = &service.store;
    let notice = store.verdict_notice(&app.destination, id).await.map_err(|e| e.to_string())?;
    let notice = notice.ok_or_else(|| format!("no notice of verdict {id} is kept for {}", app.destination))?;
    let stored = store.verdict(id).await.map_err(|e| e.to_string())?.ok_or(format!("verdict {id} is not stored"))?;
    let verdict: Verdict = serde_json::from_value(stored.verdict).map_err(|e| format!("verdict {id}: {e}"))?;
    let thread = store.thread_state(&app.destination, notice.thread_key()).await.map_err(|e| e.to_string())?;
    let thread = thread.ok_or(format!("no Slack message of verdict {id} is known"))?;
    Ok(Target { id, notice, verdict, thread })
}

/// The link a silence's comment gives: the verdict's page (signed when links are), else
/// its id.
fn verdict_link(service: &Service, t: &Target, now_ms: i64) -> String {
    let server = &service.config.server;
    let verdict = serde_json::to_value(&t.verdict).unwrap_or_default();
    match (&server.external_url, &service.link_key) {
        (Some(base), Some(key)) => crate::service::links::signed_url(
            base,
            key,
            t.id,
            &crate::service::links::binding(&verdict),
            now_ms,
            server.link_expiry.as_ms(),
        ),
        (Some(base), None) => format!("{}/api/v1/verdicts/{}", base.trim_end_matches('/'), t.id),
        _ => format!("culprit verdict {}", t.id),
    }
}

async fn silence_group(service: &Service, app: &App, t: &Target, user: &User, by: &str) -> Result<String, String> {
    let silencer = app.silencer.as_ref().ok_or("no alertmanager_url is configured")?;
    let now = service.clock.now_ms();
    let comment = format!("culprit verdict #{}: {}", t.id, verdict_link(service, t, now));
    let s = silence(&t.notice.labels, now, SILENCE_FOR_MS, user.handle(), &comment)
        .ok_or("the alert group has no labels to silence")?;
    let id = silencer.create(&s).await.map_err(|e| e.message)?;
    tracing::info!(destination = %app.destination, verdict = t.id, silence = %id, user = %user.id, "slack button: silenced");
    Ok(silenced_reply(by, now + SILENCE_FOR_MS, &id))
}

async fn rediagnose(service: &Service, t: &Target, by: &str) -> Result<String, String> {
    let job = [&t.verdict.job.id, &t.verdict.job.name].into_iter().find(|j| !j.is_empty()).cloned();
    let labels = &t.notice.labels;
    let request = DiagnosisRequest { job, labels: labels.clone(), ..Default::default() };
    let now = service.clock.now_ms();
    let new =
        service.live.diagnose(&request, labels, now).await.map_err(|e| service.redactor.redact(&e.to_string()))?;
    service.metrics.diagnosis("slack_button", &new);
    let unchanged = crate::service::verdict_key(&new) == crate::service::verdict_key(&t.verdict);
    Ok(rediagnosed_reply(by, unchanged, &new))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verdict_runs_one_re_diagnosis_at_a_time_and_another_verdict_is_not_held() {
        let running = InFlight::default();
        let first = running.start(42).expect("nothing runs");
        assert!(running.start(42).is_none(), "42 runs already");
        assert!(running.start(43).is_some(), "another verdict is not held");
        drop(first);
        assert!(running.start(42).is_some(), "done: 42 may run again");
    }
}
