//! Local capture servers standing in for the SaaS destinations (Slack, PagerDuty) and for
//! any webhook receiver: they record what they receive and answer like the real API,
//! including its deduplication and, on demand, its failures.
//!
//! * Slack Web API: `chat.postMessage` (answers `{ok, channel, ts}`), `chat.update`,
//!   `conversations.history` (with message metadata, as `include_all_metadata=true` does).
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
    let path = uri.path().to_string();
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
    let delay = inner.lock().unwrap().delay_ms;
    if delay > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
    }
    let mut g = inner.lock().unwrap();
    g.received.push(Received { path: path.clone(), headers, body: body.clone(), at: std::time::Instant::now() });
    if let Some(pos) = g.faults.iter().position(|f| f.path == path) {
        let f = g.faults.remove(pos).unwrap();
        let mut r = (StatusCode::from_u16(f.status).unwrap(), f.body).into_response();
        if let Some(s) = f.retry_after {
            r.headers_mut().insert("retry-after", s.to_string().parse().unwrap());
        }
        return r;
    }
    let ok = |v: serde_json::Value| (StatusCode::OK, axum::Json(v)).into_response();
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
