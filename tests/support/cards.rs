//! Stand-ins for chat webhooks that behave as their vendors document: Microsoft Teams'
//! Workflows trigger (202 Accepted, Logic Apps' `{"error": {"code", "message"}}`, 413 above
//! about 28 KB) and a Google Chat space webhook (200 with the message, threads by
//! `thread.threadKey`, `{"error": {"code", "message", "status"}}`, 32,000 bytes at most,
//! `key` and `token` checked). A raw HTTP/1.1 server, so that it can also take a whole
//! request and drop the connection without answering (a crash mid-send).

#![allow(dead_code)]

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Which vendor the stand-in plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vendor {
    Teams,
    GoogleChat,
}

/// What the stand-in does with the next request instead of its vendor's own answer.
#[derive(Debug, Clone)]
pub enum Reply {
    /// This status, `Retry-After` when given, and this body.
    Answer { status: u16, retry_after: Option<u64>, body: String },
    /// Reads the whole request, counts it as arrived, and closes the connection unanswered.
    Drop,
}

/// One request that arrived whole.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    /// Path and query, as sent.
    pub target: String,
    pub bytes: usize,
    pub body: Value,
}

#[derive(Default)]
struct Inner {
    replies: VecDeque<Reply>,
    received: Vec<Received>,
    /// Google Chat: thread key → thread name.
    threads: BTreeMap<String, String>,
    messages: usize,
}

#[derive(Clone)]
pub struct ChatStandIn {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    pub vendor: Vendor,
    inner: Arc<Mutex<Inner>>,
}

/// Teams' limit: "about 28 KB" (learn.microsoft.com/en-us/connectors/teams, known issues).
pub const TEAMS_MAX_BYTES: usize = 28 * 1024;
/// Google Chat's limit: 32,000 bytes (spaces.messages.create).
pub const GOOGLE_MAX_BYTES: usize = 32_000;

pub const TEAMS_PATH: &str = "/workflows/0a1b2c3d/triggers/manual/paths/invoke";
pub const TEAMS_SIG: &str = "S1GS3CR3TsigValue0123456789abcdef";
pub const GOOGLE_PATH: &str = "/v1/spaces/AAAAspace/messages";
pub const GOOGLE_KEY: &str = "AIzaSyK3YS3CR3T0123456789";
pub const GOOGLE_TOKEN: &str = "T0K3NS3CR3T0123456789abcdef";

impl ChatStandIn {
    pub async fn start(vendor: Vendor) -> ChatStandIn {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let stand_in = ChatStandIn { base, vendor, inner: Arc::default() };
        let s = stand_in.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let s = s.clone();
                tokio::spawn(async move { s.serve(socket).await });
            }
        });
        stand_in
    }

    /// The webhook URL a user copies (the secret).
    pub fn webhook_url(&self) -> String {
        match self.vendor {
            Vendor::Teams => format!(
                "{}{TEAMS_PATH}?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig={TEAMS_SIG}",
                self.base
            ),
            Vendor::GoogleChat => format!("{}{GOOGLE_PATH}?key={GOOGLE_KEY}&token={GOOGLE_TOKEN}", self.base),
        }
    }

    /// The next request gets `reply` instead of the vendor's answer.
    pub fn then(&self, reply: Reply) {
        self.inner.lock().unwrap().replies.push_back(reply);
    }

    pub fn received(&self) -> Vec<Received> {
        self.inner.lock().unwrap().received.clone()
    }

    /// The posts (POST requests) that arrived whole, answered or not.
    pub fn posts(&self) -> Vec<Received> {
        self.received().into_iter().filter(|r| r.method == "POST").collect()
    }

    async fn serve(&self, mut socket: TcpStream) {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 16 * 1024];
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            match socket.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
        let mut lines = head.lines();
        let request_line = lines.next().unwrap_or_default().to_string();
        let mut parts = request_line.split(' ');
        let method = parts.next().unwrap_or_default().to_string();
        let target = parts.next().unwrap_or_default().to_string();
        let length: usize = lines
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.trim().parse().ok())
            .unwrap_or(0);
        while buf.len() < head_end + length {
            match socket.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let raw = &buf[head_end..head_end + length];
        let body: Value = serde_json::from_slice(raw).unwrap_or(Value::Null);
        let received = Received { method: method.clone(), target: target.clone(), bytes: length, body: body.clone() };
        let reply = {
            let mut inner = self.inner.lock().unwrap();
            inner.received.push(received);
            match inner.replies.pop_front() {
                Some(r) => r,
                None => match self.vendor {
                    Vendor::Teams => teams_answer(&method, &target, length, &body),
                    Vendor::GoogleChat => google_answer(&mut inner, &method, &target, length, &body),
                },
            }
        };
        match reply {
            Reply::Drop => drop(socket),
            Reply::Answer { status, retry_after, body } => {
                let reason = match status {
                    200 => "OK",
                    202 => "Accepted",
                    400 => "Bad Request",
                    401 => "Unauthorized",
                    404 => "Not Found",
                    413 => "Request Entity Too Large",
                    429 => "Too Many Requests",
                    _ => "Status",
                };
                let retry = retry_after.map(|s| format!("Retry-After: {s}\r\n")).unwrap_or_default();
                let out = format!(
                    "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json; charset=utf-8\r\n{retry}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(out.as_bytes()).await;
                let _ = socket.shutdown().await;
            }
        }
    }
}

fn answer(status: u16, body: Value) -> Reply {
    Reply::Answer { status, retry_after: None, body: if body.is_null() { String::new() } else { body.to_string() } }
}

/// Logic Apps' error body.
pub fn logic_apps_error(code: &str, message: &str) -> String {
    json!({ "error": { "code": code, "message": message } }).to_string()
}

/// Google's error body.
pub fn google_error(code: u16, status: &str, message: &str) -> String {
    json!({ "error": { "code": code, "message": message, "status": status } }).to_string()
}

fn teams_answer(method: &str, target: &str, length: usize, body: &Value) -> Reply {
    if method != "POST" {
        // The host's root answers; only the trigger's path takes posts.
        return answer(404, Value::Null);
    }
    if !target.starts_with(TEAMS_PATH) {
        return answer(404, json!({"error": {"code": "WorkflowNotFound", "message": "not found"}}));
    }
    if !target.contains(&format!("sig={TEAMS_SIG}")) {
        return answer(401, json!({"error": {"code": "DirectApiInvalidAuthorizationScheme", "message": "bad sig"}}));
    }
    if length > TEAMS_MAX_BYTES {
        return answer(413, json!({"error": {"code": "MessageTooLarge", "message": "Request Entity too large"}}));
    }
    let ok = body["type"] == "message"
        && body["attachments"][0]["contentType"] == "application/vnd.microsoft.card.adaptive"
        && body["attachments"][0]["content"]["type"] == "AdaptiveCard";
    if !ok {
        return answer(400, json!({"error": {"code": "InvalidRequestContent", "message": "not a card"}}));
    }
    answer(202, Value::Null)
}

fn google_answer(inner: &mut Inner, method: &str, target: &str, length: usize, body: &Value) -> Reply {
    if method != "POST" || !target.starts_with(GOOGLE_PATH) {
        return answer(
            404,
            json!({"error": {"code": 404, "message": "Requested entity was not found.", "status": "NOT_FOUND"}}),
        );
    }
    if !target.contains(&format!("key={GOOGLE_KEY}")) || !target.contains(&format!("token={GOOGLE_TOKEN}")) {
        return answer(
            401,
            json!({"error": {"code": 401, "message": "Request had invalid authentication credentials.", "status": "UNAUTHENTICATED"}}),
        );
    }
    if length > GOOGLE_MAX_BYTES {
        return answer(
            400,
            json!({"error": {"code": 400, "message": "Message too large", "status": "INVALID_ARGUMENT"}}),
        );
    }
    let has_text = body["text"].as_str().is_some_and(|t| !t.is_empty());
    let has_card = body["cardsV2"].as_array().is_some_and(|c| !c.is_empty());
    if !has_text && !has_card {
        return answer(
            400,
            json!({"error": {"code": 400, "message": "Message cannot be empty.", "status": "INVALID_ARGUMENT"}}),
        );
    }
    inner.messages += 1;
    let threaded = target.contains("messageReplyOption=REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD");
    let n = inner.threads.len();
    let thread = match body["thread"]["threadKey"].as_str() {
        Some(key) if threaded => {
            inner.threads.entry(key.to_string()).or_insert_with(|| format!("spaces/AAAAspace/threads/T{n}")).clone()
        }
        _ => format!("spaces/AAAAspace/threads/new{}", inner.messages),
    };
    answer(
        200,
        json!({ "name": format!("spaces/AAAAspace/messages/M{}", inner.messages), "thread": { "name": thread } }),
    )
}
