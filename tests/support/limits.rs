//! A proxy in front of a real Prometheus that refuses queries the way stores with query
//! limits do: Mimir's `max_fetched_series_per_query` (422, `err-mimir-max-series-per-query`)
//! and Prometheus' points per series of a range query (400, "exceeded maximum resolution").
//!
//! The series a query fetches are counted by asking the backend `count(<selector>)` for
//! every selector in the query, at the query's time (a range query's end): what Mimir's
//! querier counts, for the selectors culprit writes. Every query is logged.

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Form, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};

/// One query the proxy was asked, and whether it refused it.
#[derive(Debug, Clone)]
pub struct Asked {
    pub path: String,
    pub query: String,
    pub refused: Option<u16>,
}

#[derive(Clone)]
struct Proxy {
    upstream: String,
    max_series: usize,
    max_points: i64,
    client: reqwest::Client,
    log: Arc<Mutex<Vec<Asked>>>,
}

/// The running proxy: its URL and what it was asked.
pub struct Limits {
    pub url: String,
    log: Arc<Mutex<Vec<Asked>>>,
}

impl Limits {
    pub fn asked(&self) -> Vec<Asked> {
        self.log.lock().unwrap().clone()
    }
}

/// Starts the proxy on a free port in front of `upstream`.
pub async fn start(upstream: &str, max_series: usize, max_points: i64) -> Limits {
    let log = Arc::new(Mutex::new(Vec::new()));
    let proxy = Proxy {
        upstream: upstream.to_string(),
        max_series,
        max_points,
        client: reqwest::Client::new(),
        log: log.clone(),
    };
    let app = Router::new().fallback(handle).with_state(proxy);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Limits { url, log }
}

/// The selectors culprit writes: `{__name__…}` up to the closing brace.
fn selectors(query: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = query;
    while let Some(start) = rest.find("{__name__") {
        let Some(len) = rest[start..].find('}') else { break };
        out.push(&rest[start..=start + len]);
        rest = &rest[start + len + 1..];
    }
    out
}

async fn handle(State(p): State<Proxy>, uri: Uri, Form(form): Form<HashMap<String, String>>) -> Response {
    let query = form.get("query").cloned().unwrap_or_default();
    let path = uri.path().to_string();
    let refuse = |status: u16, error_type: &str, error: String| {
        let body = serde_json::json!({"status": "error", "errorType": error_type, "error": error});
        (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response()
    };
    let seconds = |k: &str| form.get(k).and_then(|v| v.parse::<f64>().ok());
    let mut refused = None;
    let mut answer = None;
    if let (Some(start), Some(end), Some(step)) = (seconds("start"), seconds("end"), seconds("step")) {
        let points = ((end - start) / step).floor() as i64 + 1;
        if points > p.max_points {
            refused = Some(400);
            answer = Some(refuse(
                400,
                "bad_data",
                "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)"
                    .into(),
            ));
        }
    }
    if answer.is_none() {
        let at = form.get("time").or_else(|| form.get("end")).cloned().unwrap_or_default();
        let mut fetched = 0;
        for selector in selectors(&query) {
            let counted = p
                .client
                .post(format!("{}/api/v1/query", p.upstream))
                .form(&[("query", format!("count({selector})")), ("time", at.clone())])
                .send()
                .await
                .unwrap()
                .json::<serde_json::Value>()
                .await
                .unwrap();
            fetched +=
                counted["data"]["result"][0]["value"][1].as_str().and_then(|v| v.parse::<usize>().ok()).unwrap_or(0);
        }
        if fetched > p.max_series {
            refused = Some(422);
            answer = Some(refuse(
                422,
                "execution",
                format!(
                    "expanding series: the query exceeded the maximum number of series (limit: {} series) (err-mimir-max-series-per-query). To adjust the related per-tenant limit, configure -querier.max-fetched-series-per-query, or contact your service administrator.",
                    p.max_series
                ),
            ));
        }
    }
    p.log.lock().unwrap().push(Asked { path: path.clone(), query, refused });
    if let Some(answer) = answer {
        return answer;
    }
    let upstream = p.client.post(format!("{}{path}", p.upstream)).form(&form).send().await.unwrap();
    let status = StatusCode::from_u16(upstream.status().as_u16()).unwrap();
    let body = upstream.bytes().await.unwrap();
    (status, [("content-type", "application/json")], body).into_response()
}
