//! A local stand-in of Grafana's annotations HTTP API (a real Grafana is not in Debian's
//! archive): it keeps annotations as Grafana does, answers `POST /api/annotations` with
//! `{"id", "message"}`, `PATCH /api/annotations/{id}`, `GET /api/annotations?tags=…&limit=…`
//! and `GET /api/health`, checks the bearer token [`TOKEN`] (401), answers 404 for a
//! dashboard UID other than `flink-jobs`, and can be told to rate-limit (429 with
//! `Retry-After`) or to take a request and drop the connection without answering.

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch};
use axum::{Json, Router};
use serde_json::{Value, json};

pub const TOKEN: &str = "glsa_StandInT0ken_0123456789abcdef";

#[derive(Default)]
pub struct Inner {
    pub annotations: Vec<Value>,
    /// The next write is stored, then the connection dropped without an answer.
    pub crash_next: bool,
    /// The next request is answered 429 with `Retry-After: 3`.
    pub limit_next: bool,
    pub requests: Vec<String>,
}

#[derive(Clone, Default)]
pub struct Stand(pub Arc<Mutex<Inner>>);

fn authorized(h: &HeaderMap) -> bool {
    h.get("authorization").and_then(|v| v.to_str().ok()) == Some(&format!("Bearer {TOKEN}"))
}

fn gate(s: &Stand, h: &HeaderMap, what: String) -> Option<Response> {
    let mut i = s.0.lock().unwrap();
    i.requests.push(what);
    if i.limit_next {
        i.limit_next = false;
        return Some(
            (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "3")], Json(json!({"message": "Too many requests"})))
                .into_response(),
        );
    }
    if !authorized(h) {
        return Some((StatusCode::UNAUTHORIZED, Json(json!({"message": "Unauthorized"}))).into_response());
    }
    None
}

/// Drops the connection: the handler's task ends without an answer.
fn crash(s: &Stand) {
    let mut i = s.0.lock().unwrap();
    if i.crash_next {
        i.crash_next = false;
        drop(i);
        panic!("the stand-in drops the connection after taking the request");
    }
}

async fn create(State(s): State<Stand>, h: HeaderMap, Json(body): Json<Value>) -> Response {
    if let Some(r) = gate(&s, &h, "POST".into()) {
        return r;
    }
    if body.get("dashboardUID").and_then(Value::as_str).is_some_and(|u| u != "flink-jobs") {
        return (StatusCode::NOT_FOUND, Json(json!({"message": "Dashboard not found"}))).into_response();
    }
    if !body["time"].is_i64() || !body["text"].is_string() {
        return (StatusCode::BAD_REQUEST, Json(json!({"message": "bad request data"}))).into_response();
    }
    let id = {
        let mut i = s.0.lock().unwrap();
        let id = i.annotations.len() as i64 + 1;
        let mut a = body.clone();
        a["id"] = json!(id);
        i.annotations.push(a);
        id
    };
    crash(&s);
    Json(json!({"message": "Annotation added", "id": id})).into_response()
}

async fn update(State(s): State<Stand>, h: HeaderMap, Path(id): Path<i64>, Json(body): Json<Value>) -> Response {
    if let Some(r) = gate(&s, &h, format!("PATCH {id}")) {
        return r;
    }
    {
        let mut i = s.0.lock().unwrap();
        let Some(a) = i.annotations.iter_mut().find(|a| a["id"] == id) else {
            return (StatusCode::NOT_FOUND, Json(json!({"message": "Could not find annotation to update"})))
                .into_response();
        };
        for (k, v) in body.as_object().unwrap() {
            a[k] = v.clone();
        }
    }
    crash(&s);
    Json(json!({"message": "Annotation patched"})).into_response()
}

async fn find(State(s): State<Stand>, h: HeaderMap, Query(q): Query<HashMap<String, String>>) -> Response {
    if let Some(r) = gate(&s, &h, "GET".into()) {
        return r;
    }
    let i = s.0.lock().unwrap();
    let limit: usize = q.get("limit").and_then(|l| l.parse().ok()).unwrap_or(100);
    let found: Vec<Value> = i
        .annotations
        .iter()
        .filter(|a| q.get("tags").is_none_or(|t| a["tags"].as_array().unwrap().iter().any(|x| x == t.as_str())))
        .take(limit)
        .cloned()
        .collect();
    Json(Value::Array(found)).into_response()
}

/// The stand-in on a free loopback port: its state and its base URL.
pub async fn start() -> (Stand, String) {
    let stand = Stand::default();
    let app = Router::new()
        .route("/api/health", get(|| async { Json(json!({"database": "ok", "version": "12.0.0"})) }))
        .route("/api/annotations", get(find).post(create))
        .route("/api/annotations/{id}", patch(update))
        .with_state(stand.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (stand, url)
}
