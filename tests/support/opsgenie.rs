//! A local stand-in for Opsgenie's Alert API v2 and for Jira Service Management
//! Operations' alerts (the same alerts under `/jsm/ops/api/{cloudId}/v1/alerts`, by id),
//! behaving as their documentation says:
//!
//! * <https://docs.opsgenie.com/docs/alert-api>: create, update message and description,
//!   add and list notes, close, get, list; every write answers 202 with a `requestId` and
//!   is applied at once (the real API applies it a moment later).
//! * De-duplication: a create whose alias is that of an open alert opens nothing, the
//!   open alert's `count` goes up and its fields stay as they are.
//! * Limits: a `message` over 130 characters, an `alias` over 512, a `description` over
//!   15,000, a `note` over 25,000, more than 20 tags or a tag over 50 characters are refused
//!   with 422 and `{"message", "errors": {field: …}}`; a body that is not JSON with 400
//!   (<https://docs.opsgenie.com/docs/response>). A responder team the account does not
//!   have is refused with 422 too.
//! * Authentication: `Authorization: GenieKey <key>` (Opsgenie) or HTTP Basic (JSM);
//!   anything else is 401.
//! * Rate limits: on demand, 429 with `X-RateLimit-State: THROTTLED`,
//!   `X-RateLimit-Reason` and `X-RateLimit-Period-In-Sec`
//!   (<https://docs.opsgenie.com/docs/api-rate-limiting>), no `Retry-After`.
//! * Crashes: on demand, a request is applied and its connection dropped before any answer.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// One alert as the stand-in keeps it.
#[derive(Debug, Clone)]
pub struct Alert {
    pub id: String,
    pub alias: String,
    pub message: String,
    pub description: String,
    pub status: &'static str,
    pub count: u32,
    pub priority: String,
    pub tags: Vec<String>,
    pub notes: Vec<String>,
    /// The create body it was opened with.
    pub created_with: Value,
}

#[derive(Default)]
struct Inner {
    alerts: Vec<Alert>,
    /// (method, path and query) of every request, in order.
    requests: Vec<(String, String)>,
    /// Requests left to answer with 429.
    throttle: usize,
    /// A path suffix (`/alerts`, `/notes`, …) and method whose next request is applied and
    /// its connection dropped.
    crash: Option<(Method, String)>,
    teams: Vec<String>,
}

#[derive(Clone)]
pub struct OpsStandIn {
    pub url: String,
    /// The GenieKey (Opsgenie) or the `user:token` pair (JSM) accepted.
    key: String,
    inner: Arc<Mutex<Inner>>,
}

/// Documented limits (<https://docs.opsgenie.com/docs/alert-api>).
const LIMITS: [(&str, usize); 4] = [("message", 130), ("alias", 512), ("description", 15_000), ("note", 25_000)];

impl OpsStandIn {
    /// A stand-in accepting `key` (`GenieKey <key>`, or Basic `user:token` as `key`).
    pub async fn start(key: &str) -> OpsStandIn {
        let inner = Arc::new(Mutex::new(Inner { teams: vec!["flink-oncall".into()], ..Default::default() }));
        let s = OpsStandIn { url: String::new(), key: key.to_string(), inner };
        let app = Router::new().fallback(handle).with_state(s.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        OpsStandIn { url, ..s }
    }

    pub fn alerts(&self) -> Vec<Alert> {
        self.inner.lock().unwrap().alerts.clone()
    }

    /// (method, path?query) of every request received.
    pub fn requests(&self) -> Vec<(String, String)> {
        self.inner.lock().unwrap().requests.clone()
    }

    /// The next `n` requests are answered 429.
    pub fn throttle(&self, n: usize) {
        self.inner.lock().unwrap().throttle = n;
    }

    /// The next `method` request whose path ends with `suffix` is applied, then its
    /// connection is dropped without an answer.
    pub fn crash_next(&self, method: Method, suffix: &str) {
        self.inner.lock().unwrap().crash = Some((method, suffix.to_string()));
    }

    /// An alert opened by someone else (Alertmanager's own integration) with `alias`.
    pub fn open(&self, alias: &str, message: &str) {
        let mut i = self.inner.lock().unwrap();
        let id = format!("alert-{}", i.alerts.len() + 1);
        i.alerts.push(Alert {
            id,
            alias: alias.into(),
            message: message.into(),
            description: "opened by Alertmanager".into(),
            status: "open",
            count: 1,
            priority: "P3".into(),
            tags: vec![],
            notes: vec![],
            created_with: Value::Null,
        });
    }
}

fn answer(status: StatusCode, body: Value) -> Response {
    (status, [("content-type", "application/json"), ("x-request-id", "req-1")], body.to_string()).into_response()
}

fn accepted(n: usize) -> Response {
    answer(
        StatusCode::ACCEPTED,
        json!({ "result": "Request will be processed", "took": 0.01, "requestId": format!("req-{n}") }),
    )
}

fn unprocessable(field: &str, why: String) -> Response {
    answer(
        StatusCode::UNPROCESSABLE_ENTITY,
        json!({ "message": "Request body is not processable. Please check the errors.", "errors": { field: why }, "took": 0.0, "requestId": "req-x" }),
    )
}

/// The first refusal a body earns by the documented limits, if any.
fn over_limit(body: &Value, teams: &[String]) -> Option<Response> {
    for (field, max) in LIMITS {
        if let Some(s) = body.get(field).and_then(Value::as_str)
            && s.chars().count() > max
        {
            return Some(unprocessable(field, format!("{field} can not be longer than {max} characters")));
        }
    }
    if let Some(tags) = body.get("tags").and_then(Value::as_array)
        && (tags.len() > 20 || tags.iter().any(|t| t.as_str().unwrap_or_default().chars().count() > 50))
    {
        return Some(unprocessable("tags", "at most 20 tags of at most 50 characters".into()));
    }
    for r in body.get("responders").and_then(Value::as_array).into_iter().flatten() {
        let name = r["name"].as_str().unwrap_or_default();
        if !teams.iter().any(|t| t == name) {
            return Some(unprocessable("responders", format!("No team exists with name [{name}]")));
        }
    }
    None
}

async fn handle(State(s): State<OpsStandIn>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let path = uri.path().to_string();
    let query = uri.query().unwrap_or_default().to_string();
    let n = {
        let mut i = s.inner.lock().unwrap();
        i.requests.push((method.to_string(), format!("{path}?{query}")));
        i.requests.len()
    };
    // Authentication first, as the real API does.
    let auth = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default();
    use base64::Engine as _;
    let basic = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(&s.key));
    if auth != format!("GenieKey {}", s.key) && auth != basic {
        return answer(
            StatusCode::UNAUTHORIZED,
            json!({ "message": "Could not authenticate", "took": 0.0, "requestId": format!("req-{n}") }),
        );
    }
    {
        let mut i = s.inner.lock().unwrap();
        if i.throttle > 0 {
            i.throttle -= 1;
            return (
                StatusCode::TOO_MANY_REQUESTS,
                [
                    ("content-type", "application/json"),
                    ("x-ratelimit-state", "THROTTLED"),
                    ("x-ratelimit-reason", "INTEGRATION"),
                    ("x-ratelimit-period-in-sec", "1"),
                ],
                json!({ "message": "You are making too many requests! To avoid errors, we recommend you limit requests.", "took": 0.0, "requestId": format!("req-{n}") }).to_string(),
            )
                .into_response();
        }
    }
    let jsm = path.starts_with("/jsm/ops/api/");
    let Some(rest) = path.split_once(if jsm { "/v1/alerts" } else { "/v2/alerts" }).map(|(_, r)| r.to_string()) else {
        return answer(StatusCode::NOT_FOUND, json!({ "message": "Resource not found" }));
    };
    let parsed: Option<Value> = if body.is_empty() { Some(Value::Null) } else { serde_json::from_slice(&body).ok() };
    let Some(body) = parsed else {
        return answer(
            StatusCode::BAD_REQUEST,
            json!({ "message": "Invalid JSON body", "requestId": format!("req-{n}") }),
        );
    };
    let crash = {
        let mut i = s.inner.lock().unwrap();
        let hit = i.crash.as_ref().is_some_and(|(m, suffix)| *m == method && path.ends_with(suffix.as_str()));
        if hit {
            i.crash = None;
        }
        hit
    };
    let response = apply(&s, &method, &rest, &query, &body, jsm, n);
    if crash {
        // Applied, then the connection drops before the answer: the panic ends this
        // connection's task and closes its socket.
        panic!("stand-in: connection dropped after applying {method} {path}");
    }
    response
}

/// (the alert's identifier, the action) of `/{identifier}/{action}`.
fn split(rest: &str) -> (Option<String>, String) {
    let mut parts = rest.trim_start_matches('/').splitn(2, '/');
    let id = parts.next().filter(|p| !p.is_empty()).map(percent_decode);
    (id, parts.next().unwrap_or_default().to_string())
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(x) = u8::from_str_radix(&s[i + 1..i + 3], 16)
        {
            out.push(x);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn alert_json(a: &Alert) -> Value {
    json!({
        "id": a.id, "tinyId": a.id.trim_start_matches("alert-"), "alias": a.alias, "message": a.message,
        "description": a.description, "status": a.status, "count": a.count, "priority": a.priority, "tags": a.tags,
    })
}

fn apply(s: &OpsStandIn, method: &Method, rest: &str, query: &str, body: &Value, jsm: bool, n: usize) -> Response {
    let mut i = s.inner.lock().unwrap();
    let (ident, action) = split(rest);
    let by_alias = query.contains("identifierType=alias");
    // The open alert of an alias, else its newest; by id for JSM or identifierType=id.
    let find = |alerts: &[Alert], ident: &str| -> Option<usize> {
        if by_alias {
            alerts
                .iter()
                .rposition(|a| a.alias == ident && a.status == "open")
                .or_else(|| alerts.iter().rposition(|a| a.alias == ident))
        } else {
            alerts.iter().position(|a| a.id == ident)
        }
    };
    let list = |items: Vec<Value>| {
        if jsm { json!({ "values": items, "count": 0 }) } else { json!({ "data": items, "took": 0.0 }) }
    };
    match (method.clone(), ident, action.as_str()) {
        (Method::POST, None, "") => {
            if let Some(refusal) = over_limit(body, &i.teams) {
                return refusal;
            }
            let Some(message) = body.get("message").and_then(Value::as_str).filter(|m| !m.is_empty()) else {
                return unprocessable("message", "Message can not be empty.".into());
            };
            let alias = body.get("alias").and_then(Value::as_str).unwrap_or(message).to_string();
            if let Some(open) = i.alerts.iter_mut().find(|a| a.alias == alias && a.status == "open") {
                open.count += 1;
            } else {
                let id = format!("alert-{}", i.alerts.len() + 1);
                let strings = |k: &str| -> Vec<String> {
                    body.get(k)
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                };
                i.alerts.push(Alert {
                    id,
                    alias,
                    message: message.into(),
                    description: body.get("description").and_then(Value::as_str).unwrap_or_default().into(),
                    status: "open",
                    count: 1,
                    priority: body.get("priority").and_then(Value::as_str).unwrap_or("P3").into(),
                    tags: strings("tags"),
                    notes: vec![],
                    created_with: body.clone(),
                });
            }
            accepted(n)
        }
        (Method::GET, None, "") => {
            // List: JSM's `query=alias:… AND status:open`; Opsgenie's `limit`.
            let q = query.replace('+', " ").replace("%3A", ":").replace("%20", " ");
            let alias = q.split("alias:").nth(1).map(|a| a.split([' ', '&']).next().unwrap_or_default().to_string());
            let open_only = q.contains("status:open");
            let items: Vec<Value> = i
                .alerts
                .iter()
                .rev()
                .filter(|a| alias.as_ref().is_none_or(|x| *x == a.alias))
                .filter(|a| !open_only || a.status == "open")
                .map(alert_json)
                .collect();
            answer(StatusCode::OK, list(items))
        }
        (m, Some(ident), action) => {
            if let Some(refusal) = over_limit(body, &i.teams) {
                return refusal;
            }
            let found = find(&i.alerts, &ident);
            match (m, action) {
                (Method::GET, "") => match found {
                    Some(k) => answer(
                        StatusCode::OK,
                        json!({ "data": alert_json(&i.alerts[k]), "took": 0.0, "requestId": format!("req-{n}") }),
                    ),
                    None => answer(
                        StatusCode::NOT_FOUND,
                        json!({ "message": "Alert does not exist", "took": 0.0, "requestId": format!("req-{n}") }),
                    ),
                },
                (Method::GET, "notes") => match found {
                    Some(k) => {
                        let notes =
                            i.alerts[k].notes.iter().rev().map(|t| json!({ "note": t, "owner": "culprit" })).collect();
                        answer(StatusCode::OK, list(notes))
                    }
                    None => answer(StatusCode::NOT_FOUND, json!({ "message": "Alert does not exist" })),
                },
                // Writes are accepted whatever happens later (asynchronous processing):
                // one for an alert that does not exist is accepted and does nothing.
                (Method::PUT, "message") => {
                    if let Some(k) = found {
                        i.alerts[k].message = body["message"].as_str().unwrap_or_default().into();
                    }
                    accepted(n)
                }
                (Method::PUT, "description") => {
                    if let Some(k) = found {
                        i.alerts[k].description = body["description"].as_str().unwrap_or_default().into();
                    }
                    accepted(n)
                }
                (Method::POST, "notes") => {
                    if let Some(k) = found {
                        i.alerts[k].notes.push(body["note"].as_str().unwrap_or_default().into());
                    }
                    accepted(n)
                }
                (Method::POST, "close") => {
                    if let Some(k) = found {
                        i.alerts[k].status = "closed";
                        if let Some(note) = body.get("note").and_then(Value::as_str) {
                            i.alerts[k].notes.push(note.into());
                        }
                    }
                    accepted(n)
                }
                _ => answer(StatusCode::METHOD_NOT_ALLOWED, json!({ "message": "Method not allowed" })),
            }
        }
        _ => answer(StatusCode::NOT_FOUND, json!({ "message": "Resource not found" })),
    }
}

/// Every alert by alias, for assertions: alias → (count, status).
pub fn by_alias(alerts: &[Alert]) -> BTreeMap<String, Vec<(u32, &'static str)>> {
    let mut out: BTreeMap<String, Vec<(u32, &'static str)>> = BTreeMap::new();
    for a in alerts {
        out.entry(a.alias.clone()).or_default().push((a.count, a.status));
    }
    out
}
