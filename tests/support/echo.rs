//! An echoing backend: every answer quotes what the request carried — its `Authorization`
//! header, its path and query, a PagerDuty `routing_key` — raw, percent-encoded and
//! JSON-escaped, after `pad` filler characters, so that a test can slide the secrets across
//! every truncation offset. It records what it receives (posts are checked too).

#![allow(dead_code)]

use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};

/// How the echo is wrapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// The echo as a plain text body.
    Plain,
    /// Prometheus' error envelope: `{"status":"error","errorType":"bad_data","error":echo}`.
    Prometheus,
    /// Flink REST's error answer: `{"errors":[echo]}`.
    Flink,
    /// Slack's `{"ok":false,"error":echo}` with HTTP 200.
    SlackNotOk,
    /// Slack's 200 answer that is not JSON.
    SlackNotJson,
    /// PagerDuty's error answer: `{"status":"invalid event","message":echo,"errors":[]}`.
    PagerDuty,
}

#[derive(Clone)]
pub struct Echo {
    pub url: String,
    state: Arc<EchoState>,
}

struct EchoState {
    /// Filler before the echo; `usize::MAX`: cycle through `cycle` per request.
    pad: AtomicUsize,
    cycle: Mutex<(usize, usize)>,
    requests: AtomicUsize,
    status: AtomicU16,
    style: Mutex<Style>,
    received: Mutex<Vec<(String, String)>>,
}

/// Percent-encoding of every byte but the unreserved ones (as a form or URL would carry it).
pub fn pct(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The inside of a JSON string.
pub fn json_escaped(s: &str) -> String {
    let j = serde_json::to_string(s).unwrap();
    j[1..j.len() - 1].to_string()
}

impl Echo {
    pub async fn start(status: u16, style: Style) -> Echo {
        let state = Arc::new(EchoState {
            pad: AtomicUsize::new(0),
            cycle: Mutex::new((0, 1)),
            requests: AtomicUsize::new(0),
            status: AtomicU16::new(status),
            style: Mutex::new(style),
            received: Mutex::new(Vec::new()),
        });
        let app = Router::new().fallback(handle).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Echo { url, state }
    }

    /// The filler before the echo of the next requests.
    pub fn pad(&self, pad: usize) {
        self.state.pad.store(pad, Ordering::SeqCst);
    }

    /// Each request takes the next filler length of `from..from + len`, round and round.
    pub fn cycle(&self, from: usize, len: usize) {
        *self.state.cycle.lock().unwrap() = (from, len);
        self.state.pad.store(usize::MAX, Ordering::SeqCst);
    }

    pub fn style(&self, style: Style) {
        *self.state.style.lock().unwrap() = style;
    }

    pub fn status(&self, status: u16) {
        self.state.status.store(status, Ordering::SeqCst);
    }

    pub fn requests(&self) -> usize {
        self.state.requests.load(Ordering::SeqCst)
    }

    /// (path, body) of every request received.
    pub fn received(&self) -> Vec<(String, String)> {
        self.state.received.lock().unwrap().clone()
    }
}

async fn handle(State(state): State<Arc<EchoState>>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let n = state.requests.fetch_add(1, Ordering::SeqCst);
    let body = String::from_utf8_lossy(&body).to_string();
    state.received.lock().unwrap().push((uri.path().to_string(), body.clone()));
    let auth = headers.get("authorization").map(|v| v.to_str().unwrap_or_default().to_string()).unwrap_or_default();
    let routing_key = serde_json::from_str::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v["routing_key"].as_str().map(str::to_string))
        .unwrap_or_default();
    let path = uri.to_string();
    // What was sent, in the forms a server might quote it.
    let echo = format!(
        "Authorization: {auth} key={routing_key} path={path} | {} {} {} | {} {}",
        pct(&auth),
        pct(&routing_key),
        pct(&path),
        json_escaped(&auth),
        json_escaped(&routing_key)
    );
    let pad = match state.pad.load(Ordering::SeqCst) {
        usize::MAX => {
            let (from, len) = *state.cycle.lock().unwrap();
            from + n % len.max(1)
        }
        p => p,
    };
    let text = format!("{}{echo}", "x".repeat(pad));
    let status = StatusCode::from_u16(state.status.load(Ordering::SeqCst)).unwrap();
    let style = *state.style.lock().unwrap();
    let json = |v: serde_json::Value| (status, axum::Json(v)).into_response();
    match style {
        Style::Plain => (status, text).into_response(),
        Style::Prometheus => json(serde_json::json!({"status": "error", "errorType": "bad_data", "error": text})),
        Style::Flink => json(serde_json::json!({"errors": [text]})),
        Style::SlackNotOk => {
            (StatusCode::OK, axum::Json(serde_json::json!({"ok": false, "error": text}))).into_response()
        }
        Style::SlackNotJson => (StatusCode::OK, text).into_response(),
        Style::PagerDuty => json(serde_json::json!({"status": "invalid event", "message": text, "errors": []})),
    }
}
