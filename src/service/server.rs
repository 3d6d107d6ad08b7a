//! `culprit serve`: the HTTP side (axum).
//!
//! | route | |
//! |---|---|
//! | `POST /webhook/alertmanager`, `POST /webhook/grafana` | an Alertmanager v4 webhook or a Grafana Alerting webhook contact point's (v1), either at either path ([`crate::service::intake`]) → 202 once durably stored; 400 not a payload culprit reads (the body says which are accepted; logged at INFO once per sender per interval); 401, 413 over the body limit, 415 not JSON (each logged at INFO once per peer per interval); 503 queue full or store failing (Alertmanager and Grafana retry 5xx and drop 4xx, so never 429) |
//! | `GET /api/v1/diagnose?job=&at=&window=&cluster=&format=` | a live verdict: JSON, or text/markdown by `Accept` or `format=` |
//! | `GET /api/v1/verdicts[?limit=]`, `GET /api/v1/verdicts/{id}` | recent verdicts |
//! | `GET /verdicts[?job=&finding=&since=&until=&limit=&compare=A,B]` | the history of verdicts: a page to a browser, JSON otherwise, behind the API's authentication ([`crate::service::history`]) |
//! | `GET /api/v1/incidents` | jobs whose culprits share a cause, within `[incidents] lookback`, newest first ([`crate::service::incidents`]) |
//! | `GET /api/v1/dead-letters[?limit=]` | stored rows that could not be decoded, moved aside |
//! | `GET /healthz` | the process answers |
//! | `GET /readyz` | the store is writable and not corrupt, and Prometheus answers; else 503 with the reasons; losses found in the store's files at start are listed as `warnings` (200) until acknowledged. On PostgreSQL it also gives the clock skew, with a warning above 2 s |
//! | `GET /metrics` | culprit's own metrics |
//! | `POST /mcp` | the MCP server's streamable HTTP endpoint ([`crate::mcp`], mounted by `cli` through [`Application::build_with`]), with the API's authentication |
//! | `POST /slack/interactivity` | the Slack buttons, verified by Slack's signature ([`crate::service::slack_actions`]) |
//!
//! Layers: the security headers ([`crate::service::headers`]), request ids
//! (`x-request-id`, generated or propagated), tracing, a request timeout, the body limit,
//! and authentication on `/webhook` and `/api` compared in constant time. Errors log their
//! detail and answer a safe message. Connections (header-read and idle timeouts, the
//! connection cap) are [`crate::service::listen`]'s.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, Path, Query, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use secrecy::ExposeSecret;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::sync::watch;
use tower_http::request_id::{MakeRequestId, PropagateRequestIdLayer, RequestId, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

use crate::config::{Config, HttpAuth, ServerAuth};
use crate::model::request::DiagnosisRequest;
use crate::render::Format;
use crate::service::store::CLOCK_SKEW_WARN_MS;
use crate::service::{Intake, Service};

/// The expected `Authorization` header, hashed (so comparing takes the same time
/// whatever the length of what was sent).
struct ExpectedAuth([u8; 32]);

fn digest(s: &[u8]) -> [u8; 32] {
    Sha256::digest(s).into()
}

impl ExpectedAuth {
    /// The credentials of `key` (`server.auth`, `server.webhook_auth`, `server.api_auth`);
    /// `None` for `{ type = "none" }` or when unset.
    fn from_server(auth: Option<&ServerAuth>, key: &str) -> Result<Option<Self>, String> {
        auth.and_then(ServerAuth::http).map(|a| Self::from_config(&a, key)).transpose()
    }

    fn from_config(auth: &HttpAuth, key: &str) -> Result<Self, String> {
        let resolve = |secret: &crate::config::SecretSource, what: &str| {
            secret.resolve().map_err(|e| format!("{key} {what}: {e}"))
        };
        let header = match auth {
            HttpAuth::Bearer { token } => format!("Bearer {}", resolve(token, "token")?.expose_secret()),
            HttpAuth::Basic { username, password } => {
                use base64::Engine as _;
                let pair = format!("{username}:{}", resolve(password, "password")?.expose_secret());
                format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(pair))
            }
        };
        Ok(ExpectedAuth(digest(header.as_bytes())))
    }

    fn accepts(&self, headers: &HeaderMap) -> bool {
        let given = headers.get(header::AUTHORIZATION).map(|v| v.as_bytes()).unwrap_or_default();
        digest(given).ct_eq(&self.0).into()
    }
}

/// What the handlers share.
pub struct AppState {
    pub service: Arc<Service>,
    /// What `/webhook/*` expects (`server.webhook_auth`, else `server.auth`).
    webhook_auth: Option<ExpectedAuth>,
    /// What `/api/*` expects (`server.api_auth`, else `server.auth`).
    api_auth: Option<ExpectedAuth>,
    /// `server.request_timeout`.
    request_timeout: Duration,
    /// The Slack destinations whose buttons `/slack/interactivity` answers.
    slack: Arc<crate::service::slack_actions::Interactivity>,
}

fn json_error(status: StatusCode, message: &str) -> Response {
    (status, axum::Json(serde_json::json!({ "error": message }))).into_response()
}

/// Every request's guard, one layer: authentication on the webhook and the API (each
/// with its own credentials, when set apart), then `server.request_timeout`, answered 503
/// with a JSON body naming the limit (tower-http's timeout answers with an empty body).
/// One layer rather than two: each `from_fn` layer costs every request a clone of the
/// routes below it and a boxed future, measurable at webhook rates.
async fn guard(State(state): State<Arc<AppState>>, req: axum::extract::Request, next: Next) -> Response {
    // The webhook and the API are behind authentication; the verdict page carries its own
    // signature, health and metrics are open (as for any scrape target).
    let path = req.uri().path();
    let webhook = path.starts_with("/webhook/");
    let expected = if webhook {
        &state.webhook_auth
    } else if path.starts_with("/api/") || path == "/mcp" || path.starts_with("/mcp/") {
        // `/mcp` (mounted by the layer above, `Application::build_with`) is the API too.
        &state.api_auth
    } else {
        &None
    };
    // The request's own headers: a `HeaderMap` extractor would clone them all.
    if let Some(expected) = expected
        && !expected.accepts(req.headers())
    {
        if webhook {
            state.service.metrics.webhook("unauthorized");
            state.service.log_refused(crate::service::refusals::Refused::Unauthorized, peer_ip(&req));
        }
        let mut r = json_error(StatusCode::UNAUTHORIZED, "authentication required");
        r.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return r;
    }
    let limit = state.request_timeout;
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(r) => r,
        Err(_) => json_error(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!("the request took longer than server.request_timeout ({} s)", limit.as_secs()),
        ),
    }
}

/// The peer's address, as the listener gives it.
fn peer_ip(req: &axum::extract::Request) -> Option<std::net::IpAddr> {
    req.extensions().get::<axum::extract::ConnectInfo<std::net::SocketAddr>>().map(|c| c.0.ip())
}

/// Whether a `Content-Type` is `application/json` (parameters such as `charset` allowed).
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
}

/// The 202 answer to a webhook.
#[derive(serde::Serialize)]
struct Accepted {
    status: &'static str,
    /// Flink jobs whose diagnosis is queued.
    jobs: usize,
    /// Alerts left out (not culprit's business), with `why`.
    ignored: usize,
    why: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    jobs_dropped: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

async fn webhook(State(state): State<Arc<AppState>>, req: axum::extract::Request) -> Response {
    let started = Instant::now();
    let metrics = &state.service.metrics;
    // Only JSON, as Alertmanager sends it: a browser page may post `text/plain` cross-site
    // without a preflight, `application/json` it may not.
    let peer = peer_ip(&req);
    if !is_json(req.headers()) {
        metrics.webhook("unsupported_media_type");
        state.service.log_refused(crate::service::refusals::Refused::UnsupportedMediaType, peer);
        return json_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "the webhook takes Content-Type: application/json (as Alertmanager sends it)",
        );
    }
    // Read after the header checks (the extractor would clone every header); the body
    // limit is DefaultBodyLimit's, as for any `Bytes` extractor.
    let body = match Bytes::from_request(req, &()).await {
        Ok(b) => b,
        Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            metrics.webhook("too_large");
            state.service.log_refused(crate::service::refusals::Refused::TooLarge, peer);
            return json_error(StatusCode::PAYLOAD_TOO_LARGE, "the webhook is larger than server.body_limit_bytes");
        }
        Err(e) => {
            metrics.webhook("bad_request");
            return json_error(StatusCode::BAD_REQUEST, &e.body_text());
        }
    };
    let response = match state.service.accept_webhook_from(&body, peer).await {
        Intake::Accepted { jobs, ignored, why, dropped, note: version_note } => {
            metrics.webhook(if jobs == 0 { "ignored" } else { "accepted" });
            let dropped_note = (dropped > 0).then(|| format!(
                "the webhook names {} Flink jobs; only the first {jobs} (firing first) are diagnosed (service.max_jobs_per_webhook)",
                jobs + dropped
            ));
            let notes: Vec<String> = version_note.into_iter().chain(dropped_note).collect();
            let note = (!notes.is_empty()).then(|| notes.join("; "));
            let body = Accepted {
                status: "accepted",
                jobs,
                ignored,
                why,
                jobs_dropped: (dropped > 0).then_some(dropped),
                note,
            };
            (StatusCode::ACCEPTED, axum::Json(body)).into_response()
        }
        Intake::BadRequest(reason) => {
            metrics.webhook("bad_request");
            let body = serde_json::json!({
                "error": format!("{reason}. {}", crate::service::intake::ACCEPTED),
                "accepted": crate::service::intake::ACCEPTED_SOURCES,
            });
            (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
        }
        Intake::QueueFull => {
            metrics.webhook("queue_full");
            let mut r = json_error(StatusCode::SERVICE_UNAVAILABLE, "the diagnosis queue is full; retry later");
            r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("10"));
            r
        }
        Intake::TooManyUnknown { sender, waiting, limit } => {
            metrics.webhook("too_many_unknown");
            // The sender is quoted as JSON escapes it: it is the webhook's own, untrusted.
            let mut r = json_error(
                StatusCode::TOO_MANY_REQUESTS,
                &format!(
                    "{waiting} diagnoses of jobs culprit does not know wait already (at most {limit}, store.max_unknown_per_sender; sender {sender:?}); retry later"
                ),
            );
            r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("60"));
            r
        }
        Intake::Failed(detail) => {
            metrics.webhook("error");
            tracing::error!(error = %detail, "cannot store a webhook");
            // The store's message names SQLite's error (disk full, I/O), never a secret.
            json_error(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("the webhook could not be stored ({detail}); retry later"),
            )
        }
    };
    metrics.webhook_duration.observe(started.elapsed().as_secs_f64());
    response
}

#[derive(Deserialize)]
struct DiagnoseParams {
    job: Option<String>,
    at: Option<String>,
    window: Option<String>,
    cluster: Option<String>,
    format: Option<String>,
}

/// The format asked for by `format=` or else `Accept`.
fn negotiate(format: Option<&str>, headers: &HeaderMap) -> Result<Format, String> {
    match format {
        Some("json") => return Ok(Format::Json),
        Some("text") => return Ok(Format::Text),
        Some("markdown") | Some("md") => return Ok(Format::Markdown),
        Some("html") => return Ok(Format::Html),
        Some(other) => return Err(format!("format `{other}` is not json, text, markdown or html")),
        None => {}
    }
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
    Ok(if accept.contains("text/html") {
        Format::Html
    } else if accept.contains("text/markdown") {
        Format::Markdown
    } else if accept.contains("text/plain") {
        Format::Text
    } else {
        Format::Json
    })
}

fn render_response(v: &serde_json::Value, format: Format) -> Response {
    let content_type = match format {
        Format::Json => "application/json",
        Format::Text => "text/plain; charset=utf-8",
        Format::Markdown => "text/markdown; charset=utf-8",
        Format::Html => "text/html; charset=utf-8",
    };
    let body = match format {
        Format::Json => serde_json::to_string_pretty(v).expect("json"),
        _ => match serde_json::from_value::<crate::model::verdict::Verdict>(v.clone()) {
            Ok(verdict) => crate::render::render(&verdict, format),
            Err(_) => serde_json::to_string_pretty(v).expect("json"),
        },
    };
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

/// The `label=name=value` parameters (repeatable), which `Query` cannot gather.
fn label_params(raw: Option<&str>) -> Result<std::collections::BTreeMap<String, String>, String> {
    let Some(raw) = raw else { return Ok(Default::default()) };
    let url = reqwest::Url::parse(&format!("http://query/?{raw}")).map_err(|e| format!("bad query string: {e}"))?;
    url.query_pairs()
        .filter(|(k, _)| k == "label")
        .map(|(_, v)| match v.split_once('=') {
            Some((k, v)) if !k.is_empty() && !v.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(format!("`label={v}` is not label=NAME=VALUE, such as label=namespace=flink-us")),
        })
        .collect()
}

async fn diagnose(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Query(p): Query<DiagnoseParams>,
    RawQuery(raw): RawQuery,
) -> Response {
    let format = match negotiate(p.format.as_deref(), &headers) {
        Ok(f) => f,
        Err(e) => return json_error(StatusCode::BAD_REQUEST, &e),
    };
    let Some(job) = p.job.filter(|j| !j.is_empty()) else {
        return json_error(StatusCode::BAD_REQUEST, "give the job: ?job=NAME_OR_ID");
    };
    let at_ms = match p.at.as_deref().map(crate::config::parse_time).transpose() {
        Ok(at) => at,
        Err(e) => return json_error(StatusCode::BAD_REQUEST, &format!("`at` {e}")),
    };
    let window_ms = match p.window.as_deref().map(crate::config::parse_window).transpose() {
        Ok(w) => w.map(|m| m.as_ms()),
        Err(e) => return json_error(StatusCode::BAD_REQUEST, &format!("`window` {e}")),
    };
    let labels = match label_params(raw.as_deref()) {
        Ok(l) => l,
        Err(e) => return json_error(StatusCode::BAD_REQUEST, &e),
    };
    let request = DiagnosisRequest { job: Some(job), at_ms, window_ms, labels };
    let labels = Service::request_labels(p.cluster.as_deref());
    if let Some(down) = prometheus_down(&state).await {
        return down;
    }
    let now = jiff::Timestamp::now().as_millisecond();
    let started = std::time::Instant::now();
    let budget = api_budget(&state.service.config);
    match tokio::time::timeout(budget, state.service.live.diagnose(&request, &labels, now)).await {
        Ok(Ok(v)) => {
            state.service.metrics.diagnosis_duration.observe(started.elapsed().as_secs_f64());
            state.service.metrics.diagnosis("api", &v);
            render_response(&serde_json::to_value(&v).expect("json"), format)
        }
        Ok(Err(e)) => diagnose_error(&state, e),
        Err(_) => {
            state.service.metrics.diagnosis_failure("api_backend");
            let base = state.service.live.prometheus().map(|p| p.base().to_string()).unwrap_or_default();
            backend_error(
                &state,
                &format!(
                    "no verdict within {} s (server.request_timeout): Prometheus at {base} answers slowly or a query keeps failing (the log names it)",
                    budget.as_secs()
                ),
                None,
            )
        }
    }
}

/// How long the API's live diagnosis may take: a second less than the request timeout,
/// so that the answer is this handler's JSON, not the timeout's.
fn api_budget(config: &Config) -> Duration {
    Duration::from_millis(config.server.request_timeout.as_ms().saturating_sub(1000).max(1000) as u64)
}

/// How long the API waits for Prometheus to answer a probe before saying it is down.
const API_PING: Duration = Duration::from_secs(2);

/// A 503 naming Prometheus and why, at once, when it does not answer a probe (no
/// diagnosis is tried: retrying a refused connection until the deadline would hang the
/// caller for nothing).
async fn prometheus_down(state: &AppState) -> Option<Response> {
    let p = state.service.live.prometheus()?;
    let e = p.ping(API_PING).await.err()?;
    state.service.metrics.diagnosis_failure("api_backend");
    let what = crate::collect::prometheus::what_went_wrong(p.base(), &e);
    let cause = e.message.strip_prefix(p.base()).map(|m| m.trim_start_matches(": ")).unwrap_or(&e.message);
    let message = format!("Prometheus at {} {what}; no diagnosis was tried", p.base());
    Some(backend_error(state, &message, Some(cause)))
}

/// 503 `{"error": …, "backend": "prometheus", "cause": …}`, redacted, with `Retry-After`.
fn backend_error(state: &AppState, message: &str, cause: Option<&str>) -> Response {
    let redact = |s: &str| state.service.redactor.redact(s);
    let mut body = serde_json::json!({ "error": redact(message), "backend": "prometheus" });
    if let Some(cause) = cause {
        body["cause"] = redact(cause).into();
    }
    let mut r = (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response();
    r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("10"));
    r
}

/// A failed API diagnosis: 404 when there is nothing to diagnose, 400 for a bad request,
/// 503 naming the backend when it failed.
fn diagnose_error(state: &AppState, e: crate::service::pipeline::PipelineError) -> Response {
    use crate::collect::collector::CollectError;
    use crate::service::pipeline::PipelineError;
    let status = match &e {
        // Nothing to diagnose at that time is the answer, not an outage.
        PipelineError::Collect(
            CollectError::JobNotFound { .. } | CollectError::NoJobs { .. } | CollectError::NoData,
        ) => StatusCode::NOT_FOUND,
        PipelineError::UnknownCluster(..) => StatusCode::BAD_REQUEST,
        PipelineError::Collect(
            CollectError::AmbiguousJob { .. }
            | CollectError::AmbiguousDeployment { .. }
            | CollectError::InseparableDeployments { .. },
        ) => StatusCode::BAD_REQUEST,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    };
    if status == StatusCode::SERVICE_UNAVAILABLE {
        state.service.metrics.diagnosis_failure("api_backend");
        return backend_error(state, &e.to_string(), None);
    }
    state.service.metrics.diagnosis_failure("api_request");
    json_error(status, &state.service.redactor.redact(&e.to_string()))
}

#[derive(Deserialize)]
struct ListParams {
    limit: Option<String>,
}

/// Verdicts `GET /api/v1/verdicts` lists at most.
const MAX_LIST: usize = 1000;

async fn verdicts(State(state): State<Arc<AppState>>, Query(p): Query<ListParams>) -> Response {
    let limit = match p.limit.as_deref().map(str::parse::<usize>) {
        None => 50,
        Some(Ok(n)) if (1..=MAX_LIST).contains(&n) => n,
        _ => return json_error(StatusCode::BAD_REQUEST, "`limit` is a number from 1 to 1000"),
    };
    match state.service.store.verdicts(limit).await {
        Ok(list) => axum::Json(serde_json::json!({ "verdicts": list })).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "cannot list verdicts");
            json_error(StatusCode::SERVICE_UNAVAILABLE, "the store is unavailable")
        }
    }
}

async fn incidents(State(state): State<Arc<AppState>>) -> Response {
    let cfg = &state.service.config.incidents;
    let now = state.service.clock.now_ms();
    match crate::service::incidents::recent(&state.service.store, &cfg.rules(), now, cfg.lookback.as_ms()).await {
        Ok(list) => axum::Json(crate::service::incidents::listing(&list, cfg.enabled)).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "cannot list incidents");
            json_error(StatusCode::SERVICE_UNAVAILABLE, "the store is unavailable")
        }
    }
}

async fn verdict(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(p): Query<DiagnoseParams>,
) -> Response {
    let Ok(id) = id.parse::<i64>() else {
        return json_error(StatusCode::NOT_FOUND, "no such verdict (ids are numbers, as /api/v1/verdicts lists them)");
    };
    let format = match negotiate(p.format.as_deref(), &headers) {
        Ok(f) => f,
        Err(e) => return json_error(StatusCode::BAD_REQUEST, &e),
    };
    match state.service.store.verdict(id).await {
        Ok(Some(v)) => render_response(&v.verdict, format),
        Ok(None) => json_error(StatusCode::NOT_FOUND, "no such verdict"),
        Err(e) => {
            tracing::error!(error = %e, "cannot read a verdict");
            json_error(StatusCode::SERVICE_UNAVAILABLE, "the store is unavailable")
        }
    }
}

#[derive(Deserialize)]
struct LinkParams {
    expires: Option<String>,
    sig: Option<String>,
}

/// A page saying why a verdict link does not open (401 unsigned, 403 expired or invalid).
fn link_denied(status: StatusCode, why: &str, html: bool) -> Response {
    if !html {
        return json_error(status, why);
    }
    let page = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>culprit: the link does not open</title><style>{}</style></head>\
         <body><h1>The verdict cannot be shown</h1><p>{}</p></body></html>\n",
        crate::service::headers::DENIED_CSS,
        crate::render::html::escape(why)
    );
    (status, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], page).into_response()
}

/// `GET /verdicts/{id}`: the verdict page to a browser (`Accept: text/html`), its JSON
/// otherwise; `GET /verdicts/{id}.png`: its picture ([`crate::render::png`]), under the
/// same link (the page's query string opens its picture). A signed link (`expires`, `sig`)
/// opens it without credentials until it expires; without a signature the API's
/// authentication applies. 401 unsigned (when the API needs credentials), 403 expired or
/// invalid; 404 no such verdict.
async fn verdict_link(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(p): Query<LinkParams>,
) -> Response {
    use crate::service::links::{LinkError, check};
    let html = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("text/html"));
    let (id, picture) = match id.strip_suffix(".png") {
        Some(id) => (id, true),
        None => (id.as_str(), false),
    };
    let html = html && !picture;
    let Ok(id) = id.parse::<i64>() else {
        return link_denied(StatusCode::NOT_FOUND, "There is no such verdict.", html);
    };
    let signed = p.expires.is_some() || p.sig.is_some();
    // Refusals that need no store first; then the stored verdict, since a signature holds
    // only for the verdict it was made for.
    let key = match (&state.service.link_key, signed) {
        (None, true) => {
            return link_denied(
                StatusCode::FORBIDDEN,
                "This culprit signs no links (server.link_secret is not set).",
                html,
            );
        }
        (_, false) => {
            if let Some(expected) = &state.api_auth
                && !expected.accepts(&headers)
            {
                return link_denied(StatusCode::UNAUTHORIZED, LinkError::Unsigned.explain(), html);
            }
            None
        }
        (Some(key), true) => Some(key),
    };
    let stored = match state.service.store.verdict(id).await {
        Ok(v) => v,
        Err(e) => {
            tracing::error!(error = %e, "cannot read a verdict");
            return link_denied(StatusCode::SERVICE_UNAVAILABLE, "The store is unavailable.", html);
        }
    };
    if let Some(key) = key {
        let now = jiff::Timestamp::now().as_millisecond();
        let binding = stored.as_ref().map(|s| crate::service::links::binding(&s.verdict));
        match check(key, id, binding.as_deref(), p.expires.as_deref(), p.sig.as_deref(), now) {
            Ok(()) => {}
            Err(e @ (LinkError::Expired | LinkError::Invalid)) => {
                return link_denied(StatusCode::FORBIDDEN, e.explain(), html);
            }
            Err(LinkError::Unsigned) => {
                return link_denied(StatusCode::UNAUTHORIZED, LinkError::Unsigned.explain(), html);
            }
        }
    }
    let format = if html { Format::Html } else { Format::Json };
    match stored {
        Some(v) if picture => picture_response(v.verdict).await,
        Some(v) => render_response(&v.verdict, format),
        None => link_denied(StatusCode::NOT_FOUND, "There is no such verdict.", html),
    }
}

/// The verdict's picture as `image/png`, drawn off the async workers (tens of ms of CPU).
async fn picture_response(stored: serde_json::Value) -> Response {
    let drawn = tokio::task::spawn_blocking(move || {
        let verdict: crate::model::verdict::Verdict = serde_json::from_value(stored).map_err(|e| e.to_string())?;
        crate::render::png::png(&verdict).map_err(|e| e.to_string())
    })
    .await;
    match drawn {
        Ok(Ok(bytes)) => ([(header::CONTENT_TYPE, "image/png")], bytes).into_response(),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "cannot draw a verdict's picture");
            json_error(StatusCode::INTERNAL_SERVER_ERROR, "the picture could not be drawn")
        }
        Err(_) => json_error(StatusCode::INTERNAL_SERVER_ERROR, "the picture could not be drawn"),
    }
}

/// `GET /verdicts`: the history, behind the API's authentication (a 401 page to a browser).
async fn history(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Query(p): Query<crate::service::history::Params>,
) -> Response {
    let html = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("text/html"));
    if let Some(expected) = &state.api_auth
        && !expected.accepts(&headers)
    {
        let mut r = link_denied(StatusCode::UNAUTHORIZED, "The history needs the API's credentials.", html);
        // A browser asks for a password when the API takes basic authentication.
        let scheme = if matches!(state.service.config.server.api(), Some(ServerAuth::Basic { .. })) {
            "Basic realm=\"culprit\""
        } else {
            "Bearer"
        };
        r.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(scheme));
        return r;
    }
    crate::service::history::answer(&state.service, p, html).await
}

/// `POST /slack/interactivity`: Slack's own signature is its authentication.
async fn slack_interactivity(State(state): State<Arc<AppState>>, headers: HeaderMap, body: Bytes) -> Response {
    crate::service::slack_actions::interactivity(&state.service, &state.slack, &headers, &body)
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    let mut problems = Vec::new();
    if let Err(reason) = state.service.store.ready(state.service.clock.now_ms()).await {
        problems.push(reason);
    }
    if let Some(p) = state.service.live.prometheus()
        && let Err(e) = p.ping(Duration::from_secs(2)).await
    {
        problems.push(format!("prometheus: {e}"));
    }
    // Losses a start found in the store's files: said until acknowledged, without holding
    // readiness (the store works; refusing would miss new pages too).
    let warnings = state.service.store.problems().await;
    // /readyz is unauthenticated: whatever a backend said comes without a secret.
    let problems: Vec<String> = problems.iter().map(|p| state.service.redactor.redact(p)).collect();
    let skew = state.service.store.clock_skew_ms().map(clock_line);
    let clock = skew.as_deref().map(str::trim_end);
    match (problems.is_empty(), warnings.is_empty()) {
        (true, true) => (StatusCode::OK, format!("ready\n{}", skew.as_deref().unwrap_or_default())).into_response(),
        (true, false) => {
            let body = serde_json::json!({ "ready": true, "warnings": warnings, "clock": clock });
            (StatusCode::OK, axum::Json(body)).into_response()
        }
        (false, _) => {
            let body =
                serde_json::json!({ "ready": false, "problems": problems, "warnings": warnings, "clock": clock });
            (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response()
        }
    }
}

/// The `/readyz` line about the store's clock on PostgreSQL (its clock decides leases and
/// due times): the skew, and a warning above [`CLOCK_SKEW_WARN_MS`]; still ready, since
/// scheduling does not depend on this replica's clock, but its notices' and logs' times do.
fn clock_line(skew_ms: i64) -> String {
    let s = skew_ms as f64 / 1000.0;
    if skew_ms.abs() > CLOCK_SKEW_WARN_MS {
        let way = if skew_ms > 0 { "behind" } else { "ahead of" };
        format!(
            "warning: this replica's clock is {:.1} s {way} PostgreSQL's (leases and due times follow PostgreSQL's clock; times in notices and logs are off by as much: check NTP)\n",
            s.abs()
        )
    } else {
        format!("clock: PostgreSQL's minus this replica's {s:+.3} s\n")
    }
}

/// `GET /api/v1/dead-letters[?limit=1..1000]`: rows that could not be decoded, newest first.
async fn dead_letters(State(state): State<Arc<AppState>>, Query(p): Query<ListParams>) -> Response {
    let limit = match p.limit.as_deref().map(str::parse::<usize>) {
        None => 50,
        Some(Ok(n)) if (1..=MAX_LIST).contains(&n) => n,
        _ => return json_error(StatusCode::BAD_REQUEST, "`limit` is a number from 1 to 1000"),
    };
    match state.service.store.dead_letters(limit).await {
        Ok(list) => axum::Json(serde_json::json!({ "dead_letters": list })).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "cannot list dead letters");
            json_error(StatusCode::SERVICE_UNAVAILABLE, "the store is unavailable")
        }
    }
}

async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    match state.service.store.depths().await {
        Ok(d) => {
            state.service.metrics.set_queue("work", d.work);
            state.service.metrics.set_queue("outbox", d.outbox);
            state.service.metrics.set_queue("dead_letter", d.dead_letters);
        }
        Err(e) => tracing::error!(error = %e, "cannot count the queues"),
    }
    state.service.store.problems().await;
    if let Some(p) = state.service.live.prometheus() {
        state.service.metrics.set_prometheus_load(p.load());
    }
    let live = &state.service.live;
    state.service.metrics.set_flink_load(live.config().flink.max_concurrency, &live.flink_load());
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], state.service.metrics.encode())
        .into_response()
}

/// `x-request-id` for requests that come without one: UUIDs (version 4 layout) made of a
/// random part drawn once per process and a counter. tower-http's `MakeRequestUuid` asks
/// the kernel for randomness on every request (a `getrandom` call per webhook); an id only
/// has to be unique.
#[derive(Clone)]
struct RequestIds {
    process: u64,
    next: Arc<std::sync::atomic::AtomicU64>,
}

impl RequestIds {
    fn new() -> RequestIds {
        RequestIds { process: uuid::Uuid::new_v4().as_u64_pair().0, next: Arc::default() }
    }
}

impl MakeRequestId for RequestIds {
    fn make_request_id<B>(&mut self, _: &axum::http::Request<B>) -> Option<RequestId> {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let bits = (u128::from(self.process) << 64) | u128::from(n);
        let id = uuid::Builder::from_random_bytes(bits.to_be_bytes()).into_uuid();
        let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
        HeaderValue::from_str(id.hyphenated().encode_lower(&mut text)).ok().map(RequestId::new)
    }
}

/// The routes.
pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/webhook/alertmanager", post(webhook))
        .route("/webhook/grafana", post(webhook))
        .route("/api/v1/diagnose", get(diagnose))
        .route("/api/v1/verdicts", get(verdicts))
        .route("/api/v1/verdicts/{id}", get(verdict))
        .route("/api/v1/incidents", get(incidents))
        .route("/api/v1/dead-letters", get(dead_letters))
        .route("/verdicts", get(history))
        .route("/verdicts/{id}", get(verdict_link))
        .route("/slack/interactivity", post(slack_interactivity))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(state)
}

/// The key that sets the webhook's (or the API's) credentials, for messages.
fn auth_key(config: &Config, webhook: bool) -> &'static str {
    match (webhook, &config.server.webhook_auth, &config.server.api_auth) {
        (true, Some(_), _) => "server.webhook_auth",
        (false, _, Some(_)) => "server.api_auth",
        _ => "server.auth",
    }
}

/// One line saying where culprit listens, how requests are authenticated and where
/// verdicts go; a warning when they go nowhere.
fn log_startup(config: &Config, addr: SocketAddr, limits: &crate::service::listen::Limits) {
    let kind = |a: Option<&ServerAuth>| match a {
        None => "none (loopback only)",
        Some(ServerAuth::None) => "none (explicit)",
        Some(ServerAuth::Bearer { .. }) => "bearer",
        Some(ServerAuth::Basic { .. }) => "basic",
    };
    let destinations = crate::notify::describe(&config.notify);
    tracing::info!(%addr, webhook_auth = kind(config.server.webhook()), api_auth = kind(config.server.api()),
        max_connections = limits.max_connections, header_read_timeout = %config.server.header_read_timeout,
        idle_timeout = %config.server.idle_timeout,
        destinations = %if destinations.is_empty() { "none".to_string() } else { destinations.join(", ") },
        "culprit listening");
    if destinations.is_empty() {
        let sections = crate::notify::registry::headers().join(", ");
        tracing::warn!(
            "no destination is configured ({sections}): verdicts are stored and served by the API, and go nowhere else"
        );
    }
}

/// The listener's limits (`[server]`), the connection cap lowered below the open-file
/// limit (raised first where allowed), and logged when it was.
fn listen_limits(config: &Config) -> crate::service::listen::Limits {
    use crate::service::listen::{FD_RESERVE, Limits, connection_cap, raise_file_limit};
    let pool = if config.store.url.is_some() { config.store.pool_size as u64 } else { 0 };
    let (max_connections, lowered) =
        connection_cap(config.server.max_connections, raise_file_limit(), FD_RESERVE + pool);
    if let Some(why) = lowered {
        tracing::warn!("{why}");
    }
    let ms = |m: crate::config::Millis| Duration::from_millis(m.as_ms() as u64);
    Limits {
        header_read_timeout: ms(config.server.header_read_timeout),
        idle_timeout: ms(config.server.idle_timeout),
        max_connections,
    }
}

/// Routes made from the service, merged into serve's ([`Application::build_with`]).
pub type Mount = Box<dyn FnOnce(Arc<Service>) -> Router + Send>;

/// A running culprit service.
pub struct Application {
    addr: SocketAddr,
    pub service: Arc<Service>,
    stop: watch::Sender<bool>,
    server: tokio::task::JoinHandle<()>,
    workers: Vec<tokio::task::JoinHandle<()>>,
}

impl Application {
    /// Builds everything and starts listening (`server.listen`; port 0 picks a free port).
    pub async fn build(config: Config) -> Result<Application, String> {
        Application::build_with(config, None).await
    }

    /// [`Self::build`] with more routes, made from the service by the layer above (the MCP
    /// endpoint `POST /mcp`, which this module does not import), behind the same layers;
    /// `/mcp` needs the API's credentials.
    pub async fn build_with(config: Config, mount: Option<Mount>) -> Result<Application, String> {
        if config.prometheus.is_none() {
            return Err("the service diagnoses live: the configuration needs a [prometheus] section with `url`".into());
        }
        if let Some(problem) = config.server.exposure_problem() {
            return Err(problem);
        }
        let webhook_auth = ExpectedAuth::from_server(config.server.webhook(), auth_key(&config, true))?;
        let api_auth = ExpectedAuth::from_server(config.server.api(), auth_key(&config, false))?;
        let listener = tokio::net::TcpListener::bind(&config.server.listen)
            .await
            .map_err(|e| format!("cannot listen on {}: {e}", config.server.listen))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let service = Arc::new(Service::new(config.clone())?);
        let (stop, stop_rx) = watch::channel(false);
        let workers = service.spawn(stop_rx.clone());
        let request_timeout = Duration::from_millis(config.server.request_timeout.as_ms() as u64);
        let slack = Arc::new(crate::service::slack_actions::Interactivity::from_config(&config)?);
        let state = Arc::new(AppState { service: service.clone(), webhook_auth, api_auth, request_timeout, slack });
        // The layers every request passes (outermost first): the security headers, a request
        // id, tracing, the id copied to the response, `guard` (authentication and the timeout), the body limit.
        // They wrap the router once, not each route (as `Router::layer` does): wrapped per
        // route, each layer cloned its boxed inner service on every request.
        let app = tower::ServiceBuilder::new()
            .map_response(|r| crate::service::headers::secure(IntoResponse::into_response(r)))
            .layer(SetRequestIdLayer::x_request_id(RequestIds::new()))
            .layer(TraceLayer::new_for_http())
            .layer(PropagateRequestIdLayer::x_request_id())
            .layer(middleware::from_fn_with_state(state.clone(), guard))
            .layer(DefaultBodyLimit::max(config.server.body_limit_bytes))
            .service(match mount {
                Some(mount) => router(state).merge(mount(service.clone())),
                None => router(state),
            });
        let limits = listen_limits(&config);
        log_startup(&config, addr, &limits);
        let server = tokio::spawn(crate::service::listen::serve(listener, app, limits, stop_rx));
        Ok(Application { addr, service, stop, server, workers })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://host:port`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops accepting, lets requests in flight finish, stops the loops, then closes the
    /// store (SQLite: everything checkpointed into the database file).
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.server.await;
        for w in self.workers {
            let _ = tokio::time::timeout(Duration::from_secs(10), w).await;
        }
        match self.service.store.close().await {
            Ok(()) => tracing::info!("store closed"),
            Err(e) => tracing::error!(error = %e, "the store did not close cleanly"),
        }
    }

    /// Runs until SIGTERM or SIGINT, then stops gracefully.
    pub async fn run_until_stopped(self) {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("signal handler");
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
        }
        #[cfg(not(unix))]
        let _ = ctrl_c.await;
        tracing::info!("shutting down");
        self.stop().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_are_version_4_uuids_unique_within_a_process_and_between_processes() {
        let req = axum::http::Request::new(());
        let mut ids = RequestIds::new();
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..1000 {
            let id = ids.make_request_id(&req).unwrap();
            let u = uuid::Uuid::parse_str(id.header_value().to_str().unwrap()).unwrap();
            assert_eq!((u.get_version_num(), u.get_variant()), (4, uuid::Variant::RFC4122));
            assert!(seen.insert(u), "{u} twice");
        }
        // Clones (one per connection) share the counter.
        let mut clone = ids.clone();
        assert!(seen.insert(
            uuid::Uuid::parse_str(clone.make_request_id(&req).unwrap().header_value().to_str().unwrap()).unwrap()
        ));
        // Another process draws another random part.
        let other = RequestIds::new().make_request_id(&req).unwrap();
        assert!(!seen.contains(&uuid::Uuid::parse_str(other.header_value().to_str().unwrap()).unwrap()));
    }

    #[test]
    fn auth_compares_the_whole_header() {
        let e = ExpectedAuth(digest(b"Bearer abc"));
        assert!(ExpectedAuth::from_server(Some(&ServerAuth::None), "server.auth").unwrap().is_none());
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer abc"));
        assert!(e.accepts(&h));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer abcd"));
        assert!(!e.accepts(&h));
        assert!(!e.accepts(&HeaderMap::new()));
    }

    #[test]
    fn label_parameters_name_a_deployment_and_may_repeat() {
        let labels = label_params(Some("job=x&label=namespace%3Dflink-us&label=cluster=eu-1&at=now")).unwrap();
        let expected: std::collections::BTreeMap<String, String> = [("cluster", "eu-1"), ("namespace", "flink-us")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(labels, expected);
        assert!(label_params(None).unwrap().is_empty());
        let err = label_params(Some("label=namespace")).unwrap_err();
        assert_eq!(err, "`label=namespace` is not label=NAME=VALUE, such as label=namespace=flink-us");
    }
}
