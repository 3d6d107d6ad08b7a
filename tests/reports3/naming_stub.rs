//! A stand-in for Prometheus 3's UTF-8 query syntax where no Prometheus 3 is at hand (Debian
//! ships 2.42). It sits in front of a real Prometheus 2 that holds the same data under
//! legacy names (dots as `_`) and does only what Prometheus 3 adds, as its UTF-8 guide
//! (<https://prometheus.io/docs/guides/utf8/>) documents it: a selector may start with a
//! quoted metric name (`{"flink.x", job_id="j"}`) and a label name in a matcher may be quoted
//! (`{"a.b"="v"}`), escaped like any PromQL string. It rewrites each such name to the legacy
//! form (`{__name__="flink_x", job_id="j"}`), maps `__name__` matchers' values the same way,
//! asks the Prometheus 2 with the rest of the request unchanged, and writes the UTF-8 names
//! back into the answer's `__name__` labels. Every query it received is kept, so a test can
//! see what culprit sent (and an upstream error, after it). A quoted name the data does not
//! hold selects nothing, as in Prometheus 3; a string not closed is answered `bad_data`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};

#[derive(Clone)]
struct Stub {
    upstream: String,
    /// UTF-8 name → the name the Prometheus 2 holds.
    names: Arc<BTreeMap<String, String>>,
    queries: Arc<Mutex<Vec<String>>>,
    client: reqwest::Client,
}

/// The running stub: its URL and the queries it received.
pub struct Prometheus3 {
    pub url: String,
    queries: Arc<Mutex<Vec<String>>>,
}

impl Prometheus3 {
    pub fn queries(&self) -> Vec<String> {
        self.queries.lock().unwrap().clone()
    }
}

/// Starts the stub in front of `upstream`, mapping each UTF-8 name of `names` to the legacy
/// name it stands for there.
pub async fn start(upstream: &str, names: BTreeMap<String, String>) -> Prometheus3 {
    let stub = Stub {
        upstream: upstream.trim_end_matches('/').to_string(),
        names: Arc::new(names),
        queries: Arc::default(),
        client: reqwest::Client::new(),
    };
    let queries = stub.queries.clone();
    let app = Router::new().fallback(handle).with_state(stub);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Prometheus3 { url, queries }
}

async fn handle(State(stub): State<Stub>, uri: Uri, body: Bytes) -> Response {
    let mut form: Vec<(String, String)> = url::form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
        .chain(url::form_urlencoded::parse(&body))
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    for (k, v) in form.iter_mut() {
        if k == "query" || k == "match[]" {
            stub.queries.lock().unwrap().push(v.clone());
            match to_legacy(v, &stub.names) {
                Ok(legacy) => *v = legacy,
                Err(e) => {
                    let body = serde_json::json!({"status": "error", "errorType": "bad_data", "error": e});
                    return (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
                }
            }
        }
    }
    let answer = stub.client.post(format!("{}{}", stub.upstream, uri.path())).form(&form).send().await.unwrap();
    let status = StatusCode::from_u16(answer.status().as_u16()).unwrap();
    let mut json: serde_json::Value = answer.json().await.unwrap();
    if !status.is_success() {
        stub.queries.lock().unwrap().push(format!("upstream {status}: {json} for {form:?}"));
    }
    let back: BTreeMap<&str, &str> = stub.names.iter().map(|(k, v)| (v.as_str(), k.as_str())).collect();
    if let Some(result) = json.pointer_mut("/data/result").and_then(|r| r.as_array_mut()) {
        for series in result {
            if let Some(name) = series.pointer_mut("/metric/__name__")
                && let Some(utf8) = name.as_str().and_then(|n| back.get(n))
            {
                *name = serde_json::Value::from(*utf8);
            }
        }
    }
    (status, axum::Json(json)).into_response()
}

/// A PromQL double-quoted string at `i` (the opening quote): its value and the index past it.
fn string_at(q: &[char], i: usize) -> Result<(String, usize), String> {
    let mut out = String::new();
    let mut j = i + 1;
    while j < q.len() {
        match q[j] {
            '"' => return Ok((out, j + 1)),
            '\\' => {
                let c = *q.get(j + 1).ok_or("an escape at the end")?;
                out.push(match c {
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    other => other,
                });
                j += 2;
            }
            c => {
                out.push(c);
                j += 1;
            }
        }
    }
    Err("a string is not closed".into())
}

fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n"))
}

fn next_non_blank(q: &[char], mut i: usize) -> Option<char> {
    while i < q.len() && q[i] == ' ' {
        i += 1;
    }
    q.get(i).copied()
}

fn prev_non_blank(out: &str) -> Option<char> {
    out.trim_end().chars().last()
}

/// The query with Prometheus 3's quoted names in the legacy form.
fn to_legacy(query: &str, names: &BTreeMap<String, String>) -> Result<String, String> {
    let q: Vec<char> = query.chars().collect();
    let map = |n: &str| names.get(n).cloned().unwrap_or_else(|| n.to_string());
    let legacy_ok = |n: &str| culprit::collect::exposition::is_valid_metric_name(n);
    let mut out = String::new();
    let mut i = 0;
    // The label name of the matcher being written, and its operator.
    let mut last_label = String::new();
    while i < q.len() {
        if q[i] != '"' {
            if q[i].is_alphanumeric() || q[i] == '_' {
                let start = i;
                while i < q.len() && (q[i].is_alphanumeric() || q[i] == '_') {
                    i += 1;
                }
                last_label = q[start..i].iter().collect();
                out.push_str(&last_label);
                continue;
            }
            out.push(q[i]);
            i += 1;
            continue;
        }
        let (value, end) = string_at(&q, i)?;
        let before = prev_non_blank(&out);
        let after = next_non_blank(&q, end);
        if before == Some('{') && matches!(after, Some(',') | Some('}')) {
            // `{"flink.x", …}`: the metric name. One the data does not hold selects nothing,
            // as in Prometheus 3.
            let legacy = names.get(&value).cloned().unwrap_or_else(|| {
                let safe: String = value.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
                format!("stub_absent_{safe}")
            });
            if !legacy_ok(&legacy) {
                return Err(format!("no legacy stand-in for {value:?}"));
            }
            out.push_str(&format!("__name__={}", quote(&legacy)));
        } else if matches!(before, Some('{') | Some(',')) && matches!(after, Some('=') | Some('!')) {
            // `"a.b"="v"`: a quoted label name; the data's label names are legacy.
            out.push_str(&value.replace('.', "_"));
            last_label = String::new();
        } else if last_label == "__name__" && out.trim_end().ends_with("=~") {
            let alternation: Vec<String> = value
                .split('|')
                .map(|n| {
                    let plain = n.replace('\\', "");
                    culprit::collect::query::escape_regex(&map(&plain))
                })
                .collect();
            out.push_str(&quote(&alternation.join("|")));
        } else if last_label == "__name__" && out.trim_end().ends_with('=') {
            out.push_str(&quote(&map(&value)));
        } else {
            out.push_str(&quote(&value));
        }
        i = end;
    }
    Ok(out)
}

#[test]
fn the_stub_rewrites_quoted_names_and_leaves_label_values_alone() {
    let names: BTreeMap<String, String> = [("a.b".to_string(), "a_b".to_string())].into();
    assert_eq!(
        to_legacy(r#"sum by (x) (rate({"a.b", job="\"a.b\""}[5m]))"#, &names).unwrap(),
        r#"sum by (x) (rate({__name__="a_b", job="\"a.b\""}[5m]))"#
    );
    assert_eq!(to_legacy(r#"{__name__=~"a\\.b|c"}"#, &names).unwrap(), r#"{__name__=~"a_b|c"}"#);
    assert_eq!(to_legacy(r#"{"x.y"="1"}"#, &names).unwrap(), r#"{x_y="1"}"#);
    assert_eq!(to_legacy(r#"{"z.z"}"#, &names).unwrap(), r#"{__name__="stub_absent_z_z"}"#);
}
