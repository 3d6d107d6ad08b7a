//! Local capture servers standing in for the SaaS destinations (Slack, PagerDuty) and for
//! any webhook receiver: they record what they receive and answer like the real API,
//! including its deduplication and, on demand, its failures.
//!
//! * Slack Web API: `chat.postMessage` (answers `{ok, channel, ts}`), `chat.update`,
//!   `conversations.history` (with message metadata, as `include_all_metadata=true` does).
//!   Both write methods refuse what Slack refuses ([`slack_refusal`]): `invalid_blocks`,
//!   `msg_too_long`, `msg_blocks_too_long`, `no_text`.
//! * PagerDuty Events API v2: `/v2/enqueue` (202); an event whose `dedup_key` and
//!   `custom_details.idempotency_key` repeat an earlier one is counted once, as
//!   PagerDuty folds a repeated trigger into the open alert.
//! * Anything else: recorded as a generic webhook.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};

/// One request received.
#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    pub headers: HeaderMap,
    pub body: serde_json::Value,
    pub at: std::time::Instant,
    /// The Slack error code it was refused with ([`slack_refusal`]), if it was.
    pub refused: Option<&'static str>,
}

/// Slack's documented block limits: <https://api.slack.com/reference/block-kit/blocks>.
pub const SLACK_MAX_BLOCKS: usize = 50;
pub const SLACK_MAX_HEADER: usize = 150;
pub const SLACK_MAX_SECTION: usize = 3000;
pub const SLACK_MAX_FIELDS: usize = 10;
pub const SLACK_MAX_FIELD: usize = 2000;
pub const SLACK_MAX_CONTEXT_ELEMENTS: usize = 10;
/// Observed: `msg_too_long` for a `text` of about 4,000 characters (seratch/ChatGPT-in-Slack#102).
pub const SLACK_MAX_TEXT: usize = 4000;
/// Observed: `msg_blocks_too_long` at 11,341 characters of text in all blocks
/// (slackapi/bolt-js#2867); refused here above 11,000.
pub const SLACK_MAX_BLOCKS_TEXT: usize = 11_000;

fn text_len(v: &serde_json::Value) -> usize {
    match v {
        serde_json::Value::Object(o) => o
            .iter()
            .map(|(k, x)| match x {
                serde_json::Value::String(s) if k == "text" => s.chars().count(),
                x => text_len(x),
            })
            .sum(),
        serde_json::Value::Array(a) => a.iter().map(text_len).sum(),
        _ => 0,
    }
}

/// What Slack answers a `chat.postMessage` / `chat.update` / incoming-webhook body with
/// when it refuses it: `invalid_blocks` (a block over its documented limit, an empty text,
/// an unknown block type), `msg_blocks_too_long`, `msg_too_long`, `no_text`; `None` when
/// Slack takes it. Independent of culprit's own renderer.
pub fn slack_refusal(body: &serde_json::Value) -> Option<&'static str> {
    let chars = |v: &serde_json::Value| v.as_str().map(|s| s.chars().count());
    let text = body.get("text").and_then(|t| t.as_str()).unwrap_or_default();
    let blocks = body.get("blocks").and_then(|b| b.as_array()).cloned().unwrap_or_default();
    if blocks.len() > SLACK_MAX_BLOCKS {
        return Some("invalid_blocks");
    }
    for b in &blocks {
        let ok = match b["type"].as_str() {
            Some("header") => {
                b["text"]["type"] == "plain_text"
                    && chars(&b["text"]["text"]).is_some_and(|n| (1..=SLACK_MAX_HEADER).contains(&n))
            }
            Some("section") => {
                let text_ok = b
                    .get("text")
                    .is_none_or(|t| chars(&t["text"]).is_some_and(|n| (1..=SLACK_MAX_SECTION).contains(&n)));
                let fields_ok = b.get("fields").is_none_or(|f| {
                    f.as_array().is_some_and(|f| {
                        f.len() <= SLACK_MAX_FIELDS
                            && f.iter().all(|x| chars(&x["text"]).is_some_and(|n| (1..=SLACK_MAX_FIELD).contains(&n)))
                    })
                });
                text_ok && fields_ok && (b.get("text").is_some() || b.get("fields").is_some())
            }
            Some("context") => b["elements"].as_array().is_some_and(|e| {
                !e.is_empty()
                    && e.len() <= SLACK_MAX_CONTEXT_ELEMENTS
                    && e.iter().all(|x| chars(&x["text"]).is_some_and(|n| (1..=SLACK_MAX_SECTION).contains(&n)))
            }),
            Some("divider") => true,
            Some("actions") => b["elements"].as_array().is_some_and(|e| {
                !e.is_empty()
                    && e.len() <= 25
                    && e.iter().all(|x| {
                        x["type"] == "button"
                            && chars(&x["text"]["text"]).is_some_and(|n| (1..=75).contains(&n))
                            && x.get("url").is_none_or(|u| chars(u).is_some_and(|n| n <= 3000))
                            && x.get("value").is_none_or(|v| chars(v).is_some_and(|n| n <= 2000))
                            && x.get("action_id").is_none_or(|a| chars(a).is_some_and(|n| (1..=255).contains(&n)))
                    })
            }),
            _ => false,
        };
        if !ok {
            return Some("invalid_blocks");
        }
    }
    if text_len(&serde_json::Value::Array(blocks.clone())) > SLACK_MAX_BLOCKS_TEXT {
        return Some("msg_blocks_too_long");
    }
    if text.chars().count() > SLACK_MAX_TEXT {
        return Some("msg_too_long");
    }
    if text.trim().is_empty() && blocks.is_empty() {
        return Some("no_text");
    }
    None
}

/// A scripted failure: answer `status` (with `Retry-After` when given) for the next
/// requests to `path`.
#[derive(Debug, Clone)]
pub struct Fault {
    pub path: String,
    pub status: u16,
    pub retry_after: Option<u64>,
    pub body: String,
}

#[derive(Default)]
pub struct Inner {
    pub received: Vec<Received>,
    /// Paths of requests as they arrive, before any delay (`received` is written after).
    arrived: Vec<String>,
    faults: VecDeque<Fault>,
    next_ts: u64,
    /// Slack messages by channel: (ts, body).
    messages: Vec<(String, String, serde_json::Value)>,
    /// Slack thread replies: (parent ts, ts, body).
    replies: Vec<(String, String, serde_json::Value)>,
    delay_ms: u64,
}

/// A running capture server.
#[derive(Clone)]
pub struct Capture {
    pub url: String,
    pub inner: Arc<Mutex<Inner>>,
}

impl Capture {
    pub async fn start() -> Capture {
        let inner = Arc::new(Mutex::new(Inner { next_ts: 1_795_000_000, ..Default::default() }));
        let app = Router::new().fallback(handle).with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Capture { url, inner }
    }

    /// Fails the next request to `path` with `status`.
    pub fn fail_next(&self, path: &str, status: u16, retry_after: Option<u64>, body: &str) {
        self.inner.lock().unwrap().faults.push_back(Fault {
            path: path.into(),
            status,
            retry_after,
            body: body.into(),
        });
    }

    /// Delays every answer (to widen the window a crash can hit).
    pub fn delay(&self, ms: u64) {
        self.inner.lock().unwrap().delay_ms = ms;
    }

    /// Requests to `path` that arrived and are not processed yet.
    pub fn in_flight(&self, path: &str) -> usize {
        let g = self.inner.lock().unwrap();
        let arrived = g.arrived.iter().filter(|p| *p == path).count();
        arrived - g.received.iter().filter(|r| r.path == path).count()
    }

    /// Requests to `path` that arrived, processed or not.
    pub fn arrived_on(&self, path: &str) -> usize {
        self.inner.lock().unwrap().arrived.iter().filter(|p| *p == path).count()
    }

    /// Requests that arrived, processed or not.
    pub fn arrived(&self) -> usize {
        self.inner.lock().unwrap().arrived.len()
    }

    /// Requests received on `path`.
    pub fn on(&self, path: &str) -> Vec<Received> {
        self.inner.lock().unwrap().received.iter().filter(|r| r.path == path).cloned().collect()
    }

    /// Every request.
    pub fn all(&self) -> Vec<Received> {
        self.inner.lock().unwrap().received.clone()
    }

    /// Slack messages that exist now (posted, not counting updates), with their metadata.
    pub fn slack_messages(&self) -> Vec<serde_json::Value> {
        self.inner.lock().unwrap().messages.iter().map(|m| m.2.clone()).collect()
    }

    /// PagerDuty events counted as PagerDuty would: one per (dedup_key, idempotency_key).
    pub fn pagerduty_events(&self) -> Vec<serde_json::Value> {
        let mut seen = std::collections::BTreeSet::new();
        self.on("/v2/enqueue")
            .into_iter()
            .map(|r| r.body)
            .filter(|b| {
                seen.insert((
                    b["dedup_key"].as_str().unwrap_or_default().to_string(),
                    b["payload"]["custom_details"]["idempotency_key"].as_str().unwrap_or_default().to_string(),
                ))
            })
            .collect()
    }
}

async fn handle(
    State(inner): State<Arc<Mutex<Inner>>>,
    uri: Uri,
    headers: HeaderMap,
    Query(query): Query<std::collections::BTreeMap<String, String>>,
    body: Bytes,
) -> Response {
    // Like a real server, a request that arrived is processed even when the client goes
    // away before the answer (a crash mid-send): it is recorded all the same.
    tokio::spawn(process(inner, uri, headers, query, body)).await.unwrap()
}

async fn process(
    inner: Arc<Mutex<Inner>>,
    uri: Uri,
    headers: HeaderMap,
    query: std::collections::BTreeMap<String, String>,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
    let delay = {
        let mut g = inner.lock().unwrap();
        g.arrived.push(path.clone());
        g.delay_ms
    };
    if delay > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
    }
    let mut g = inner.lock().unwrap();
    let refused =
        (path.ends_with("/chat.postMessage") || path.ends_with("/chat.update") || path.starts_with("/services/"))
            .then(|| slack_refusal(&body))
            .flatten();
    g.received.push(Received {
        path: path.clone(),
        headers,
        body: body.clone(),
        at: std::time::Instant::now(),
        refused,
    });
    if let Some(pos) = g.faults.iter().position(|f| f.path == path) {
        let f = g.faults.remove(pos).unwrap();
        let mut r = (StatusCode::from_u16(f.status).unwrap(), f.body).into_response();
        if let Some(s) = f.retry_after {
            r.headers_mut().insert("retry-after", s.to_string().parse().unwrap());
        }
        return r;
    }
    let ok = |v: serde_json::Value| (StatusCode::OK, axum::Json(v)).into_response();
    if let Some(code) = refused {
        return if path.starts_with("/services/") {
            (StatusCode::BAD_REQUEST, code).into_response()
        } else {
            ok(serde_json::json!({"ok": false, "error": code}))
        };
    }
    match path.as_str() {
        p if p.ends_with("/chat.postMessage") => {
            g.next_ts += 1;
            let ts = format!("{}.000100", g.next_ts);
            let channel = body["channel"].as_str().unwrap_or("C1").to_string();
            match body.get("thread_ts").and_then(|t| t.as_str()) {
                None => g.messages.push((channel.clone(), ts.clone(), body.clone())),
                Some(parent) => {
                    let parent = parent.to_string();
                    g.replies.push((parent, ts.clone(), body.clone()));
                }
            }
            ok(serde_json::json!({"ok": true, "channel": channel, "ts": ts}))
        }
        p if p.ends_with("/conversations.replies") => {
            let ts = query.get("ts").cloned().unwrap_or_default();
            let messages: Vec<serde_json::Value> = g
                .replies
                .iter()
                .filter(|r| r.0 == ts)
                .map(
                    |r| serde_json::json!({"type": "message", "ts": r.1, "thread_ts": ts, "metadata": r.2["metadata"]}),
                )
                .collect();
            ok(serde_json::json!({"ok": true, "messages": messages}))
        }
        p if p.ends_with("/chat.update") => {
            ok(serde_json::json!({"ok": true, "channel": body["channel"], "ts": body["ts"]}))
        }
        p if p.ends_with("/conversations.history") => {
            let channel = query.get("channel").cloned().unwrap_or_default();
            let messages: Vec<serde_json::Value> = g
                .messages
                .iter()
                .filter(|m| m.0 == channel || channel.is_empty())
                .map(|m| serde_json::json!({"type": "message", "ts": m.1, "text": m.2["text"], "metadata": m.2["metadata"]}))
                .collect();
            ok(serde_json::json!({"ok": true, "messages": messages}))
        }
        "/v2/enqueue" => (
            StatusCode::ACCEPTED,
            axum::Json(
                serde_json::json!({"status": "success", "message": "Event processed", "dedup_key": body["dedup_key"]}),
            ),
        )
            .into_response(),
        _ => (StatusCode::OK, "ok").into_response(),
    }
}
