//! `GET /verdicts`: the history of verdicts, to a browser as a page
//! ([`crate::render::history`]) and as JSON otherwise, behind the API's authentication.
//!
//! Parameters: `job` (a job's name or id, exactly), `finding` (`sink`, `hot_key`, …),
//! `since` (RFC 3339, or a span back from now: `1h`, `7d`), `until` (RFC 3339), `limit`
//! (1–1000, default 50); `compare=A,B` shows two verdicts of one job side by side instead.
//! Each row links to its verdict page (signed, when `server.link_secret` is set, so that it
//! opens in the browser) and says what changed from the job's verdict before it, among the
//! [`MAX_SCANNED`] newest the store keeps.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::model::verdict::Verdict;
use crate::render::history::{Filters, Row, changes, compare, page};
use crate::service::Service;

/// Stored verdicts read for one answer (the store keeps `store.verdicts_kept`, 1,000 by
/// default): filters and "what changed" look among these.
pub const MAX_SCANNED: usize = 1000;

/// Rows shown unless `limit` says otherwise.
const DEFAULT_LIMIT: usize = 50;

/// The query of `GET /verdicts`.
#[derive(Debug, Default, Deserialize)]
pub struct Params {
    pub job: Option<String>,
    pub finding: Option<String>,
    pub since: Option<String>,
    pub until: Option<String>,
    pub limit: Option<String>,
    pub compare: Option<String>,
    pub format: Option<String>,
}

fn error(status: StatusCode, message: &str) -> Response {
    (status, axum::Json(serde_json::json!({ "error": message }))).into_response()
}

fn html(body: String) -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response()
}

/// `since`: RFC 3339, or a span back from `now_ms`.
fn since_ms(s: &str, now_ms: i64) -> Result<i64, String> {
    crate::config::parse_time(s)
        .or_else(|_| crate::config::parse_window(s).map(|w| now_ms.saturating_sub(w.as_ms())))
        .map_err(|e| format!("`since` is neither RFC 3339 nor a span such as 1h: {e}"))
}

/// The identity "what changed" follows: the job's id, else its name.
fn job_key(v: &Verdict) -> &str {
    if v.job.id.is_empty() { &v.job.name } else { &v.job.id }
}

/// The stored verdicts as rows, newest first, each with its job's verdict before it.
async fn rows(service: &Service, now_ms: i64) -> Result<Vec<Row>, Response> {
    let stored = service.store.verdicts(MAX_SCANNED).await.map_err(|e| {
        tracing::error!(error = %e, "cannot list verdicts");
        error(StatusCode::SERVICE_UNAVAILABLE, "the store is unavailable")
    })?;
    let base = service.config.server.external_url.as_deref().unwrap_or("").trim_end_matches('/');
    let link = |id: i64, json: &serde_json::Value| match &service.link_key {
        Some(key) => crate::service::links::signed_url(
            base,
            key,
            id,
            &crate::service::links::binding(json),
            now_ms,
            service.config.server.link_expiry.as_ms(),
        ),
        None => format!("{base}/verdicts/{id}"),
    };
    let mut rows: Vec<Row> = stored
        .into_iter()
        .filter_map(|s| {
            let url = link(s.id, &s.verdict);
            let verdict = serde_json::from_value::<Verdict>(s.verdict).ok()?;
            Some(Row { id: s.id, created_ms: s.created_ms, verdict, url, previous: None, changes: None })
        })
        .collect();
    // Oldest first: each row's predecessor is the last one seen of its job.
    let mut last: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for i in (0..rows.len()).rev() {
        let key = job_key(&rows[i].verdict).to_string();
        if let Some(&p) = last.get(&key) {
            let c = changes(&rows[p].verdict, &rows[i].verdict);
            rows[i].previous = Some(rows[p].id);
            rows[i].changes = Some(c);
        }
        last.insert(key, i);
    }
    Ok(rows)
}

/// The answer to `GET /verdicts` (authentication checked by the caller); `html` for a
/// browser.
pub async fn answer(service: &Service, p: Params, html_wanted: bool) -> Response {
    let html_wanted = match p.format.as_deref() {
        Some("html") => true,
        Some("json") => false,
        None => html_wanted,
        Some(other) => return error(StatusCode::BAD_REQUEST, &format!("format `{other}` is not json or html")),
    };
    let now = service.clock.now_ms();
    let limit = match p.limit.as_deref().map(str::parse::<usize>) {
        None => DEFAULT_LIMIT,
        Some(Ok(n)) if (1..=MAX_SCANNED).contains(&n) => n,
        _ => return error(StatusCode::BAD_REQUEST, "`limit` is a number from 1 to 1000"),
    };
    let since = match p.since.as_deref().map(|s| since_ms(s, now)).transpose() {
        Ok(s) => s,
        Err(e) => return error(StatusCode::BAD_REQUEST, &e),
    };
    let until = match p.until.as_deref().map(crate::config::parse_time).transpose() {
        Ok(u) => u,
        Err(e) => return error(StatusCode::BAD_REQUEST, &format!("`until` {e}")),
    };
    let all = match rows(service, now).await {
        Ok(r) => r,
        Err(r) => return r,
    };
    if let Some(pair) = p.compare.as_deref() {
        return compared(&all, pair, html_wanted);
    }
    let job = p.job.as_deref().filter(|j| !j.is_empty());
    let finding = p.finding.as_deref().filter(|f| !f.is_empty());
    let shown: Vec<Row> = all
        .into_iter()
        .filter(|r| job.is_none_or(|j| r.verdict.job.name == j || r.verdict.job.id == j))
        .filter(|r| finding.is_none_or(|f| r.verdict.finding.as_str() == f))
        .filter(|r| since.is_none_or(|s| r.created_ms >= s) && until.is_none_or(|u| r.created_ms <= u))
        .take(limit)
        .collect();
    let filters = Filters { job: p.job, finding: p.finding, since: p.since, until: p.until };
    if html_wanted {
        return html(page(&shown, &filters));
    }
    axum::Json(serde_json::json!({ "verdicts": shown, "filters": filters })).into_response()
}

/// `compare=A,B`: two verdicts of one job, older first.
fn compared(all: &[Row], pair: &str, html_wanted: bool) -> Response {
    let ids: Vec<Option<i64>> = pair.split(',').map(|x| x.trim().parse().ok()).collect();
    let [Some(a), Some(b)] = ids[..] else {
        return error(StatusCode::BAD_REQUEST, "`compare` is two verdict ids: compare=41,42");
    };
    let find = |id: i64| all.iter().find(|r| r.id == id);
    let (Some(x), Some(y)) = (find(a.min(b)), find(a.max(b))) else {
        return error(StatusCode::NOT_FOUND, "no such verdict among the recent ones");
    };
    if job_key(&x.verdict) != job_key(&y.verdict) {
        return error(StatusCode::BAD_REQUEST, "the two verdicts are of different jobs");
    }
    if html_wanted {
        return html(compare(x, y));
    }
    let body = serde_json::json!({ "older": x, "newer": y, "changes": changes(&x.verdict, &y.verdict) });
    axum::Json(body).into_response()
}
