//! The Prometheus HTTP API client (`/api/v1/query`, `/api/v1/query_range`), and the live
//! [`MetricSource`] over it.
//!
//! Works with any PromQL-compatible store that speaks this API: Prometheus, Thanos, Mimir,
//! Cortex, VictoriaMetrics. Requests are `POST` forms with the `timeout` parameter. An
//! answer is read up to `prometheus.max_answer_bytes` (default [`MAX_ANSWER_BYTES`]) and
//! deserialized as its chunks arrive straight into typed series (labels and
//! `(t_ms, value)` points, no JSON tree, the raw body never held whole); values may be
//! `NaN` or `±Inf`. A larger answer is refused as too large, and the collector asks for it
//! in smaller pieces (by vertex, then by steps) as it does when the backend refuses a
//! query. The bytes of the answers being read, across every diagnosis of the process, stay
//! within `prometheus.max_answer_bytes_in_flight` ([`AnswerBudget`]); an answer that cannot
//! get its bytes within its request's timeout is refused as too large for now (asked again
//! in pieces). Errors are classified once, in [`PromError::retryable`]:
//! 400 and 422 (a bad or unprocessable query) and other 4xx are final; 429, 503, other 5xx,
//! timeouts and network errors are retried with backoff until the deadline.
//!
//! [`PromSource`] answers the collector's [`Query`] batches in as few requests as it can:
//! queries evaluated at the same time (or over the same range) are merged into one
//! expression, `label_replace(q0, "culprit_query", "0", "", "") or …`, and split again by
//! that label. So the number of requests of a diagnosis does not grow with the job graph.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use backon::{ExponentialBuilder, Retryable};
use reqwest::StatusCode;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use crate::collect::answer_budget::AnswerBudget;
use crate::collect::answer_read::Reading;
use crate::collect::collector::{MetricSource, QueryError, TooLarge};
use crate::collect::query::{Query, QueryResult, ResultSeries};
use crate::config::{HttpAuth, PrometheusConfig};
use crate::model::secret::Redactor;

/// The label that tags each part of a merged query.
pub const MERGE_LABEL: &str = "culprit_query";

/// The largest answer read, bytes, unless `prometheus.max_answer_bytes` says otherwise
/// (64 MiB).
pub const MAX_ANSWER_BYTES: usize = crate::config::PROMETHEUS_MAX_ANSWER_BYTES;

/// Evaluations one range query may ask for. Prometheus refuses more than 11,000 points per
/// series ("exceeded maximum resolution of 11,000 points per timeseries. Try decreasing
/// the query resolution (?step=XX)"; `web/api/v1/api.go`,
/// <https://prometheus.io/docs/prometheus/latest/querying/api/#range-queries>); a margin
/// below it keeps a long `trend_lookback` at a short `step` answerable.
pub const MAX_RANGE_POINTS: i64 = 10_000;

/// The step for a range query: the one asked for, or wider so that the range holds at
/// most [`MAX_RANGE_POINTS`] evaluations. At least 1 ms.
pub fn range_step_ms(start_ms: i64, end_ms: i64, step_ms: i64) -> i64 {
    let span = (end_ms - start_ms).max(0);
    step_ms.max(1).max((span + MAX_RANGE_POINTS - 1) / MAX_RANGE_POINTS)
}

/// A failed request. The message names the backend and the cause, never a credential.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct PromError {
    pub message: String,
    /// HTTP status, when the backend answered.
    pub status: Option<u16>,
    /// Whether trying again may succeed.
    pub retryable: bool,
    /// The backend refused the query as too large ([`TOO_LARGE`]): not worth retrying as
    /// it is, but smaller queries may be answered.
    pub too_large: Option<TooLarge>,
}

impl PromError {
    pub(crate) fn new(message: impl Into<String>, status: Option<u16>, retryable: bool) -> Self {
        PromError { message: message.into(), status, retryable, too_large: None }
    }
}

impl From<PromError> for QueryError {
    fn from(e: PromError) -> Self {
        QueryError { message: e.message, too_large: e.too_large }
    }
}

/// How backends say a query is too large: a piece of the error message, what was too
/// large, and where the limit is documented. Matched case-insensitively in a 4xx answer's
/// error.
pub const TOO_LARGE: &[(&str, TooLarge, &str)] = &[
    // Prometheus: `query.max-samples` (422) and the points per series of a range query (400).
    (
        "query processing would load too many samples into memory",
        TooLarge::Series,
        "https://prometheus.io/docs/prometheus/latest/command-line/prometheus/ (--query.max-samples)",
    ),
    (
        "exceeded maximum resolution of",
        TooLarge::Steps,
        "https://prometheus.io/docs/prometheus/latest/querying/api/#range-queries",
    ),
    // Grafana Mimir: the per-query limits (422), each with its error id.
    (
        "err-mimir-max-series-per-query",
        TooLarge::Series,
        "https://grafana.com/docs/mimir/latest/manage/mimir-runbooks/#err-mimir-max-series-per-query",
    ),
    (
        "err-mimir-max-chunks-per-query",
        TooLarge::Series,
        "https://grafana.com/docs/mimir/latest/manage/mimir-runbooks/#err-mimir-max-chunks-per-query",
    ),
    (
        "err-mimir-max-chunks-bytes-per-query",
        TooLarge::Series,
        "https://grafana.com/docs/mimir/latest/manage/mimir-runbooks/#err-mimir-max-chunks-bytes-per-query",
    ),
    (
        "err-mimir-max-estimated-chunks-per-query",
        TooLarge::Series,
        "https://grafana.com/docs/mimir/latest/manage/mimir-runbooks/#err-mimir-max-estimated-chunks-per-query",
    ),
    (
        "err-mimir-max-estimated-memory-consumption-per-query",
        TooLarge::Series,
        "https://grafana.com/docs/mimir/latest/manage/mimir-runbooks/#err-mimir-max-estimated-memory-consumption-per-query",
    ),
    (
        "err-mimir-max-query-length",
        TooLarge::Steps,
        "https://grafana.com/docs/mimir/latest/manage/mimir-runbooks/#err-mimir-max-query-length",
    ),
    // Cortex: the querier's limits (422).
    (
        "the query hit the max number of series limit",
        TooLarge::Series,
        "https://cortexmetrics.io/docs/configuration/configuration-file/#limits_config",
    ),
    (
        "the query hit the max number of chunks limit",
        TooLarge::Series,
        "https://cortexmetrics.io/docs/configuration/configuration-file/#limits_config",
    ),
    (
        "the query hit the aggregated chunks size limit",
        TooLarge::Series,
        "https://cortexmetrics.io/docs/configuration/configuration-file/#limits_config",
    ),
    (
        "the query time range exceeds the limit",
        TooLarge::Steps,
        "https://cortexmetrics.io/docs/configuration/configuration-file/#limits_config",
    ),
    // Thanos Store: series and sample limits.
    ("exceeded series limit", TooLarge::Series, "https://thanos.io/tip/components/store.md/#series-limits"),
    ("exceeded samples limit", TooLarge::Series, "https://thanos.io/tip/components/store.md/#series-limits"),
    ("exceeded chunks limit", TooLarge::Series, "https://thanos.io/tip/components/store.md/#series-limits"),
    // VictoriaMetrics: `-search.max*` flags (422).
    (
        "-search.maxSamplesPerQuery",
        TooLarge::Series,
        "https://docs.victoriametrics.com/victoriametrics/single-server-victoriametrics/#resource-usage-limits",
    ),
    (
        "-search.maxUniqueTimeseries",
        TooLarge::Series,
        "https://docs.victoriametrics.com/victoriametrics/single-server-victoriametrics/#resource-usage-limits",
    ),
    (
        "-search.maxSeries",
        TooLarge::Series,
        "https://docs.victoriametrics.com/victoriametrics/single-server-victoriametrics/#resource-usage-limits",
    ),
    (
        "-search.maxSamplesPerSeries",
        TooLarge::Series,
        "https://docs.victoriametrics.com/victoriametrics/single-server-victoriametrics/#resource-usage-limits",
    ),
    (
        "-search.maxPointsPerTimeseries",
        TooLarge::Steps,
        "https://docs.victoriametrics.com/victoriametrics/single-server-victoriametrics/#resource-usage-limits",
    ),
];

/// What a refused query's error says was too large ([`TOO_LARGE`]); None for any other
/// refusal.
pub fn too_large(status: u16, error: &str) -> Option<TooLarge> {
    too_large_entry(status, error).map(|(_, kind, _)| *kind)
}

/// The marker of [`TOO_LARGE`] a refused query's error carries (culprit's own text).
fn too_large_marker(status: u16, error: &str) -> Option<&'static str> {
    too_large_entry(status, error).map(|(marker, _, _)| *marker)
}

fn too_large_entry(status: u16, error: &str) -> Option<&'static (&'static str, TooLarge, &'static str)> {
    let error = error.to_ascii_lowercase();
    if !(400..500).contains(&status) {
        return None;
    }
    TOO_LARGE.iter().find(|(marker, _, _)| error.contains(&marker.to_ascii_lowercase()))
}

/// Whether an HTTP status is worth retrying: the table every backend and destination
/// shares ([`crate::retry_status`]: 408, 429, 5xx but 501 and 505). 400 and 422 mean the
/// query is wrong and other 4xx mean the request is; retrying changes nothing.
pub use crate::retry_status::retryable_status;

enum Auth {
    Bearer(SecretString),
    Basic(String, SecretString),
}

/// A Prometheus API client.
pub struct Prometheus {
    client: reqwest::Client,
    base: String,
    timeout: Duration,
    deadline: Duration,
    auth: Option<Auth>,
    /// Every wire form of the credentials, removed from anything quoted back.
    redactor: Redactor,
    tenant: Option<String>,
    max_answer_bytes: usize,
    /// The bytes of answers being read, shared by every diagnosis using this client.
    budget: AnswerBudget,
    requests: AtomicU64,
    durations: Mutex<Vec<Duration>>,
    /// Told once, in a sentence, when retrying first starts (the CLI prints it).
    announce: Option<Announce>,
    announced: std::sync::atomic::AtomicBool,
    /// At most `prometheus.max_concurrency` requests at once, over every diagnosis.
    load: QueryLoad,
}

/// The bound on requests in flight at one backend, and what it holds now.
struct QueryLoad {
    bound: usize,
    permits: tokio::sync::Semaphore,
    in_flight: std::sync::atomic::AtomicUsize,
    waiting: std::sync::atomic::AtomicUsize,
    peak: std::sync::atomic::AtomicUsize,
}

/// The requests of one client in flight and waiting for a slot, now, and the most ever in
/// flight at once (`/metrics`; the storm bench's "peak of queries in flight").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadNow {
    pub in_flight: usize,
    pub waiting: usize,
    pub peak: usize,
    pub bound: usize,
}

/// Counts one request in `counter` while it lives (a request cancelled by the deadline
/// is uncounted too).
struct Counted<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> Counted<'a> {
    fn new(counter: &'a std::sync::atomic::AtomicUsize) -> (Counted<'a>, usize) {
        let now = counter.fetch_add(1, Ordering::Relaxed) + 1;
        (Counted(counter), now)
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Receives one sentence when a client starts retrying a backend that does not answer
/// (`Prometheus at http://… refused the connection; retrying for 30 s`).
pub type Announce = std::sync::Arc<dyn Fn(String) + Send + Sync>;

impl std::fmt::Debug for Prometheus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prometheus")
            .field("base", &self.base)
            .field("auth", &self.auth.as_ref().map(|_| "***"))
            .finish()
    }
}

#[derive(Deserialize)]
struct Envelope {
    status: String,
    #[serde(default)]
    data: Option<Data>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    warnings: Vec<String>,
}

#[derive(Deserialize)]
struct Data {
    #[serde(rename = "resultType")]
    result_type: String,
    result: Vec<Element>,
}

/// One element of `result`: a series (vector, matrix), or a part of a scalar's
/// `[time, "value"]`. Read as it comes: `resultType` may follow `result`.
enum Element {
    Series(ResultSeries),
    Number(f64),
    Text(String),
}

impl<'de> Deserialize<'de> for Element {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Element;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a series, a time or a value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Element, A::Error> {
                let w = WireSeries::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                let points = match (w.value, w.values) {
                    (Some(p), _) => vec![(p.0, p.1)],
                    (None, Some(vs)) => vs.into_iter().map(|p| (p.0, p.1)).collect(),
                    (None, None) => Vec::new(),
                };
                Ok(Element::Series(ResultSeries { labels: w.metric, points }))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Element, E> {
                Ok(Element::Number(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Element, E> {
                Ok(Element::Number(v as f64))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Element, E> {
                Ok(Element::Number(v as f64))
            }
            fn visit_str<E>(self, v: &str) -> Result<Element, E> {
                Ok(Element::Text(v.to_string()))
            }
        }
        d.deserialize_any(Visit)
    }
}

#[derive(Deserialize)]
struct WireSeries {
    #[serde(default)]
    metric: BTreeMap<String, String>,
    #[serde(default)]
    value: Option<WirePoint>,
    #[serde(default)]
    values: Option<Vec<WirePoint>>,
}

/// `[1795000000.123, "0.5"]` as `(t_ms, value)`, the value parsed where it is read (no
/// string kept per point).
struct WirePoint(i64, f64);

impl<'de> Deserialize<'de> for WirePoint {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = WirePoint;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a [time, \"value\"] pair")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<WirePoint, A::Error> {
                use serde::de::Error;
                let t: f64 = seq.next_element()?.ok_or_else(|| A::Error::invalid_length(0, &self))?;
                let v: WireValue = seq.next_element()?.ok_or_else(|| A::Error::invalid_length(1, &self))?;
                if seq.next_element::<serde::de::IgnoredAny>()?.is_some() {
                    return Err(A::Error::invalid_length(3, &self));
                }
                let t_ms = seconds_to_ms(t);
                if !crate::collect::exposition::time_in_range(t_ms) {
                    return Err(A::Error::custom(format_args!("time {t:e} is outside the years -9999 to 9999")));
                }
                Ok(WirePoint(t_ms, v.0))
            }
        }
        d.deserialize_seq(Visit)
    }
}

/// A sample value as the API writes it: a string (`"0.5"`, `"NaN"`, `"+Inf"`).
struct WireValue(f64);

impl<'de> Deserialize<'de> for WireValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl serde::de::Visitor<'_> for Visit {
            type Value = WireValue;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a sample value as a string")
            }
            fn visit_str<E>(self, v: &str) -> Result<WireValue, E> {
                Ok(WireValue(parse_value(v)))
            }
        }
        d.deserialize_str(Visit)
    }
}

/// An answer: the series and the backend's warnings.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Answer {
    pub series: QueryResult,
    pub warnings: Vec<String>,
}

fn parse_value(s: &str) -> f64 {
    match s {
        "NaN" => f64::NAN,
        "+Inf" | "Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        other => other.parse().unwrap_or(f64::NAN),
    }
}

fn seconds_to_ms(t: f64) -> i64 {
    (t * 1000.0).round() as i64
}

fn ms_to_seconds(ms: i64) -> String {
    format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000))
}

/// Parses an API answer body (pure; used by tests). The client reads answers through
/// [`parse_answer_reader`], which gives the same.
pub fn parse_answer(body: &[u8], what: &str) -> Result<Answer, PromError> {
    answer_of(serde_json::from_slice(body), what)
}

/// Parses an API answer as `reader` gives it, building the typed series as it goes.
pub fn parse_answer_reader(reader: impl std::io::Read, what: &str) -> Result<Answer, PromError> {
    answer_of(serde_json::from_reader(reader), what)
}

fn answer_of(env: Result<Envelope, serde_json::Error>, what: &str) -> Result<Answer, PromError> {
    let env = env.map_err(|e| {
        PromError::new(
            format!("{what}: the answer is not a Prometheus API response: {}", crate::model::foreign::json_error(&e)),
            None,
            false,
        )
    })?;
    if env.status != "success" {
        // The backend's own message goes to the log; the error says its kind.
        tracing::warn!(backend = %what, error_type = ?env.error_type, error = ?env.error.as_deref().map(|m| cut(m, DETAIL_CHARS)), "Prometheus answered an error");
        return Err(PromError::new(format!("{what}: {}", error_kind(env.error_type.as_deref())), None, false));
    }
    let data = env.data.ok_or_else(|| PromError::new(format!("{what}: a success without data"), None, false))?;
    let shape = |kind: &str| PromError::new(format!("{what}: unexpected {kind} shape"), None, false);
    let series = match data.result_type.as_str() {
        "vector" | "matrix" => data
            .result
            .into_iter()
            .map(|e| match e {
                Element::Series(s) => Ok(s),
                _ => Err(shape(&data.result_type)),
            })
            .collect::<Result<QueryResult, PromError>>()?,
        "scalar" => match data.result.as_slice() {
            [Element::Number(t), Element::Text(v)] => {
                vec![ResultSeries { labels: BTreeMap::new(), points: vec![(seconds_to_ms(*t), parse_value(v))] }]
            }
            _ => return Err(shape("scalar")),
        },
        other => return Err(PromError::new(format!("{what}: unsupported result type {other}"), None, false)),
    };
    Ok(Answer { series, warnings: env.warnings })
}

impl Prometheus {
    /// A client for one backend; resolves the credentials (env or file) now.
    pub fn new(cfg: &PrometheusConfig) -> Result<Self, PromError> {
        let auth = match &cfg.auth {
            None => None,
            Some(HttpAuth::Bearer { token }) => Some(Auth::Bearer(
                token.resolve().map_err(|e| PromError::new(format!("prometheus auth: {e}"), None, false))?,
            )),
            Some(HttpAuth::Basic { username, password }) => Some(Auth::Basic(
                username.clone(),
                password.resolve().map_err(|e| PromError::new(format!("prometheus auth: {e}"), None, false))?,
            )),
        };
        let timeout = Duration::from_millis(cfg.timeout.as_ms() as u64);
        let client = reqwest::Client::builder()
            .timeout(timeout + Duration::from_secs(1))
            .connect_timeout(timeout)
            .user_agent(concat!("culprit/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| PromError::new(format!("cannot build the HTTP client: {e}"), None, false))?;
        let base = cfg.url.trim_end_matches('/').to_string();
        let mut redactor = Redactor::new();
        match &auth {
            Some(Auth::Bearer(token)) => redactor.add(token.expose_secret()),
            Some(Auth::Basic(user, password)) => redactor.add_basic(user, password.expose_secret()),
            None => {}
        }
        Ok(Prometheus {
            client,
            base,
            timeout,
            deadline: Duration::from_millis(cfg.deadline.as_ms() as u64),
            auth,
            redactor,
            tenant: cfg.tenant.clone(),
            max_answer_bytes: cfg.max_answer_bytes,
            budget: AnswerBudget::new(cfg.max_answer_bytes_in_flight),
            requests: AtomicU64::new(0),
            durations: Mutex::new(Vec::new()),
            announce: None,
            announced: std::sync::atomic::AtomicBool::new(false),
            load: QueryLoad {
                bound: cfg.max_concurrency.clamp(1, tokio::sync::Semaphore::MAX_PERMITS),
                permits: tokio::sync::Semaphore::new(cfg.max_concurrency.clamp(1, tokio::sync::Semaphore::MAX_PERMITS)),
                in_flight: Default::default(),
                waiting: Default::default(),
                peak: Default::default(),
            },
        })
    }

    /// Says once, through `announce`, when retrying first starts and for how long it goes
    /// on (the CLI prints it on stderr, so that a backend that is down is not silence).
    pub fn announce_retries(&mut self, announce: Announce) {
        self.announce = Some(announce);
    }

    /// The base URL, as messages name the backend.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// HTTP requests sent so far (retries count).
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// The bytes of answers being read now and at most so far
    /// (`prometheus.max_answer_bytes_in_flight`).
    pub fn answer_budget(&self) -> &AnswerBudget {
        &self.budget
    }

    /// How long each request took, in order sent.
    pub fn request_durations(&self) -> Vec<Duration> {
        self.durations.lock().expect("not poisoned").clone()
    }

    /// One quick request (no retries) that proves the backend answers queries, within
    /// `timeout`: for readiness probes, which must answer fast.
    pub async fn ping(&self, timeout: Duration) -> Result<(), PromError> {
        let form = vec![("query", "vector(1)".to_string()), ("timeout", format!("{}ms", timeout.as_millis()))];
        match tokio::time::timeout(timeout, self.send_once(&format!("{}/api/v1/query", self.base), &form)).await {
            Ok(r) => r.map(|_| ()),
            Err(_) => {
                Err(PromError::new(format!("{}: no answer within {} ms", self.base, timeout.as_millis()), None, true))
            }
        }
    }

    /// `POST /api/v1/query`: an instant query at `at_ms`, retried until the deadline.
    pub async fn instant(&self, expr: &str, at_ms: i64) -> Result<Answer, PromError> {
        self.instant_with(expr, at_ms, Attempts::UntilDeadline).await
    }

    /// [`Self::instant`], tried as `attempts` says.
    pub async fn instant_with(&self, expr: &str, at_ms: i64, attempts: Attempts) -> Result<Answer, PromError> {
        let form = vec![("query", expr.to_string()), ("time", ms_to_seconds(at_ms))];
        self.call("api/v1/query", form, attempts).await
    }

    /// `POST /api/v1/query_range`: evaluations at `start_ms, start_ms + step_ms, … ≤ end_ms`.
    /// The step is widened when the range would exceed [`MAX_RANGE_POINTS`] evaluations.
    pub async fn range(&self, expr: &str, start_ms: i64, end_ms: i64, step_ms: i64) -> Result<Answer, PromError> {
        self.range_with(expr, start_ms, end_ms, step_ms, Attempts::UntilDeadline).await
    }

    /// [`Self::range`], tried as `attempts` says.
    pub async fn range_with(
        &self,
        expr: &str,
        start_ms: i64,
        end_ms: i64,
        step_ms: i64,
        attempts: Attempts,
    ) -> Result<Answer, PromError> {
        let form = vec![
            ("query", expr.to_string()),
            ("start", ms_to_seconds(start_ms)),
            ("end", ms_to_seconds(end_ms)),
            ("step", ms_to_seconds(range_step_ms(start_ms, end_ms, step_ms))),
        ];
        self.call("api/v1/query_range", form, attempts).await
    }

    async fn call(
        &self,
        path: &str,
        mut form: Vec<(&'static str, String)>,
        attempts: Attempts,
    ) -> Result<Answer, PromError> {
        form.push(("timeout", format!("{}ms", self.timeout.as_millis())));
        let form = form;
        let url = format!("{}/{path}", self.base);
        if attempts == Attempts::Once {
            return self.send_once(&url, &form).await;
        }
        // The last failure, so that running out of time still says why (refused, 503, …).
        let last_error: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
        let attempt = || async { self.send_once(&url, &form).await };
        let retried = attempt
            .retry(
                ExponentialBuilder::default()
                    .with_min_delay(Duration::from_millis(100))
                    .with_max_delay(Duration::from_secs(2))
                    .with_max_times(usize::MAX)
                    .with_jitter(),
            )
            .sleep(tokio::time::sleep)
            .when(|e: &PromError| e.retryable)
            .notify(|e: &PromError, wait: Duration| {
                *last_error.lock().expect("not poisoned") = Some(e.message.clone());
                if let Some(announce) = &self.announce
                    && !self.announced.swap(true, Ordering::Relaxed)
                {
                    announce(format!(
                        "Prometheus at {} {}; retrying for {} s (prometheus.deadline)",
                        self.base,
                        what_went_wrong(&self.base, e),
                        self.deadline.as_secs()
                    ));
                }
                tracing::warn!(backend = %self.base, error = %e, retry_in_ms = wait.as_millis() as u64, "prometheus query failed; retrying");
            });
        match tokio::time::timeout(self.deadline, retried).await {
            Ok(result) => result,
            Err(_) => Err(PromError::new(
                match last_error.lock().expect("not poisoned").take() {
                    Some(last) => format!("{last} (retried for the {} s deadline)", self.deadline.as_secs()),
                    None => format!("{}: no answer within the {} s deadline", self.base, self.deadline.as_secs()),
                },
                None,
                true,
            )),
        }
    }

    /// Its requests in flight and waiting now, the most in flight at once so far, and the
    /// bound (`prometheus.max_concurrency`).
    pub fn load(&self) -> LoadNow {
        LoadNow {
            in_flight: self.load.in_flight.load(Ordering::Relaxed),
            waiting: self.load.waiting.load(Ordering::Relaxed),
            peak: self.load.peak.load(Ordering::Relaxed),
            bound: self.load.bound,
        }
    }

    /// The wire forms of this client's credentials (to redact what it quotes).
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    async fn send_once(&self, url: &str, form: &[(&'static str, String)]) -> Result<Answer, PromError> {
        // A slot first: in a storm the request waits here (within the deadline), never at
        // the backend. The permit and the count live until the answer is read.
        let _permit = {
            let _waiting = Counted::new(&self.load.waiting);
            self.load.permits.acquire().await.expect("the semaphore is never closed")
        };
        let (_in_flight, now) = Counted::new(&self.load.in_flight);
        self.load.peak.fetch_max(now, Ordering::Relaxed);
        self.requests.fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        let mut req = self.client.post(url).form(form);
        match &self.auth {
            Some(Auth::Bearer(token)) => req = req.bearer_auth(token.expose_secret()),
            Some(Auth::Basic(user, password)) => req = req.basic_auth(user, Some(password.expose_secret())),
            None => {}
        }
        if let Some(tenant) = &self.tenant {
            req = req.header("X-Scope-OrgID", tenant);
        }
        let result = req.send().await;
        let outcome = match result {
            Err(e) => Err(PromError::new(
                format!("{}: {}", self.base, if e.is_timeout() { "timed out".to_string() } else { without_url(&e) }),
                None,
                true,
            )),
            Ok(resp) => {
                let status = resp.status();
                let reading = Reading {
                    base: &self.base,
                    limit: self.max_answer_bytes,
                    budget: &self.budget,
                    until: started + self.timeout,
                };
                if status.is_success() {
                    // Warnings (Prometheus' API field of a successful answer) are quoted in
                    // verdicts: redacted as errors are, and cut.
                    reading.answer(resp).await.map(|mut a| {
                        a.warnings = a.warnings.iter().map(|w| self.redactor.redact_cut(w, DETAIL_CHARS)).collect();
                        a
                    })
                } else {
                    reading
                        .body(resp)
                        .await
                        .and_then(|(body, _held)| Err(status_error(&self.base, status, &body, &self.redactor)))
                }
            }
        };
        // A backend may echo credentials back in an error body: never pass them on.
        let outcome = outcome.map_err(|mut e| {
            e.message = self.redactor.redact(&e.message);
            e
        });
        self.durations.lock().expect("not poisoned").push(started.elapsed());
        tracing::debug!(backend = %self.base, elapsed_ms = started.elapsed().as_millis() as u64, ok = outcome.is_ok(), "prometheus request");
        outcome
    }
}

/// What a failed request came to, in words (after "Prometheus at <url>"): `refused the
/// connection`, `answered HTTP 503 …`, `did not answer in time`, `answered more than
/// culprit may read or hold (…)`, or the error itself.
pub fn what_went_wrong(base: &str, e: &PromError) -> String {
    let detail = e.message.strip_prefix(base).map(|m| m.trim_start_matches(": ")).unwrap_or(&e.message);
    if detail.contains("Connection refused") {
        "refused the connection".into()
    } else if detail.contains("timed out") || detail.contains("no answer within") {
        "did not answer in time".into()
    } else if e.status.is_some() {
        format!("answered {detail}")
    } else if e.too_large.is_some() {
        // Over prometheus.max_answer_bytes, or no room in max_answer_bytes_in_flight: it
        // was reached, and it answered.
        format!("answered more than culprit may read or hold ({detail})")
    } else {
        format!("could not be reached ({detail})")
    }
}

/// reqwest errors print the URL, which may carry credentials in its user info; ours names
/// the backend already. The cause chain says what happened (connection refused, …).
/// A reqwest error as one line with its root cause (e.g. "cannot connect: Connection
/// refused"), without the URL (which may carry credentials).
pub(crate) fn without_url(e: &reqwest::Error) -> String {
    let mut parts = Vec::new();
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(e);
    while let Some(s) = source {
        parts.push(s.to_string());
        source = s.source();
    }
    let head = if e.is_connect() {
        "cannot connect"
    } else if e.is_decode() {
        "cannot read the answer"
    } else {
        "request failed"
    };
    match parts.last() {
        Some(cause) => format!("{head}: {cause}"),
        None => head.to_string(),
    }
}

/// Characters of an error body logged (after redaction).
pub const DETAIL_CHARS: usize = 200;

/// The `errorType` values of Prometheus' HTTP API (`web/api/v1/api.go`, "errorType":
/// <https://prometheus.io/docs/prometheus/latest/querying/api/#format-overview>). An error
/// names its type only when it is one of these: a word of Prometheus' API contract, not
/// text the backend chose.
pub const ERROR_TYPES: [&str; 8] =
    ["timeout", "canceled", "execution", "bad_data", "internal", "unavailable", "not_found", "not_acceptable"];

/// `the answer is an error (bad_data)`: the kind of an error envelope in culprit's words,
/// its `errorType` only when Prometheus documents it.
fn error_kind(error_type: Option<&str>) -> String {
    match error_type.filter(|t| ERROR_TYPES.contains(t)) {
        Some(t) => format!("the answer is an error ({t})"),
        None => "the answer is an error".to_string(),
    }
}

/// The first `n` characters of `s`, `…` when cut.
fn cut(s: &str, n: usize) -> String {
    if s.chars().count() > n { s.chars().take(n).collect::<String>() + "…" } else { s.to_string() }
}

/// A non-2xx answer as an error: the status, culprit's words for it, the documented
/// `errorType` and, when the backend's message shows it refused a query as too large, which
/// limit (culprit's marker). The message itself (`error`, else the start of the body) is
/// logged, redacted before it is cut (a secret across the cut would escape in part), and
/// never put in the error: errors become verdict notes and API answers.
fn status_error(base: &str, status: StatusCode, body: &[u8], redactor: &Redactor) -> PromError {
    let envelope = serde_json::from_slice::<Envelope>(body).ok();
    let error_type = envelope.as_ref().and_then(|e| e.error_type.clone()).filter(|t| ERROR_TYPES.contains(&t.as_str()));
    let detail = envelope.and_then(|e| e.error).unwrap_or_else(|| String::from_utf8_lossy(body).trim().to_string());
    let detail = redactor.redact_cut(&detail, DETAIL_CHARS);
    let code = status.as_u16();
    let what = match code {
        400 => "bad query",
        401 | 403 => "not authorized (check prometheus.auth)",
        404 => "no Prometheus API at this URL (check prometheus.url and its path prefix)",
        422 => "the query cannot be executed",
        429 => "rate limited",
        503 => "unavailable",
        _ => "error",
    };
    tracing::warn!(backend = %base, status = code, error_type = ?error_type, detail = %detail, "Prometheus answered an error");
    let kind = error_type.map(|t| format!(" ({t})")).unwrap_or_default();
    let limit =
        too_large_marker(code, &detail).map(|m| format!(": over a limit of the backend (`{m}`)")).unwrap_or_default();
    let mut e = PromError::new(format!("{base}: HTTP {code} {what}{kind}{limit}"), Some(code), retryable_status(code));
    e.too_large = too_large(code, &detail);
    e
}

/// How often a request is tried.
///
/// Retrying lives in one place per caller: where nothing retries the whole diagnosis (the
/// command line, the HTTP API's `diagnose`), each request is retried with backoff until
/// `prometheus.deadline`; the service's worker retries whole diagnoses
/// (`service.diagnose_retry_for`, with its own backoff), so its requests are tried once
/// and a failure becomes that diagnosis's outcome (a missing signal, or no job lookup)
/// instead of a retry inside a retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempts {
    /// Retried with exponential backoff and jitter while `prometheus.deadline` lasts.
    UntilDeadline,
    /// One attempt (within `prometheus.timeout`).
    Once,
}

/// The live metric source: a client and the time "now" stands for.
pub struct PromSource<'a> {
    pub client: &'a Prometheus,
    /// Unix ms used when a request gives no time.
    pub now_ms: i64,
    /// How often each request is tried ([`Attempts::UntilDeadline`] unless told).
    pub attempts: Attempts,
    warnings: Mutex<Vec<String>>,
}

impl<'a> PromSource<'a> {
    pub fn new(client: &'a Prometheus, now_ms: i64) -> Self {
        PromSource { client, now_ms, attempts: Attempts::UntilDeadline, warnings: Mutex::new(Vec::new()) }
    }

    /// The same source, trying each request as `attempts` says.
    pub fn attempts(mut self, attempts: Attempts) -> Self {
        self.attempts = attempts;
        self
    }

    /// Warnings the backend attached to its answers (deduplicated).
    pub fn warnings(&self) -> Vec<String> {
        let mut w = self.warnings.lock().expect("not poisoned").clone();
        w.sort();
        w.dedup();
        w
    }
}

/// Ranges as sent to the backend: Prometheus 2 selects `[t − r, t]` (closed), Prometheus 3
/// and VictoriaMetrics `(t − r, t]`. Asking for `r − 1 ms` makes both select what the
/// recording store does, `(t − r, t]` in whole milliseconds.
fn for_backend(q: &Query) -> Query {
    match q {
        Query::OverTime { selector, func, range_ms, at_ms, aggregation } => Query::OverTime {
            selector: selector.clone(),
            func: *func,
            range_ms: (range_ms - 1).max(1),
            at_ms: *at_ms,
            aggregation: aggregation.clone(),
        },
        other => other.clone(),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Eval {
    Instant(i64),
    Range(i64, i64, i64),
}

fn eval_of(q: &Query) -> Eval {
    match q {
        Query::OverTime { at_ms, .. } | Query::Newest { at_ms, .. } => Eval::Instant(*at_ms),
        Query::Range { start_ms, end_ms, step_ms, .. } => Eval::Range(*start_ms, *end_ms, *step_ms),
    }
}

/// One expression for several queries evaluated alike, each part tagged with its index.
pub fn merged_expr(parts: &[(usize, &Query)]) -> String {
    parts
        .iter()
        .map(|(i, q)| format!("label_replace({}, \"{MERGE_LABEL}\", \"{i}\", \"\", \"\")", for_backend(q).to_promql()))
        .collect::<Vec<_>>()
        .join(" or ")
}

impl MetricSource for PromSource<'_> {
    async fn run(&self, queries: &[Query]) -> Vec<Result<QueryResult, QueryError>> {
        let mut groups: BTreeMap<Eval, Vec<usize>> = BTreeMap::new();
        for (i, q) in queries.iter().enumerate() {
            groups.entry(eval_of(q)).or_default().push(i);
        }
        let runs = groups
            .into_iter()
            .map(|(eval, idx)| async move { (idx.clone(), self.run_group(eval, queries, &idx).await) });
        let mut out: Vec<Option<Result<QueryResult, QueryError>>> = vec![None; queries.len()];
        for (idx, results) in futures::future::join_all(runs).await {
            for (i, r) in idx.into_iter().zip(results) {
                out[i] = Some(r);
            }
        }
        out.into_iter().map(|r| r.expect("every query answered")).collect()
    }

    fn latest_ms(&self) -> Option<i64> {
        Some(self.now_ms)
    }
}

impl PromSource<'_> {
    async fn request(&self, eval: Eval, expr: &str) -> Result<Answer, PromError> {
        let answer = match eval {
            Eval::Instant(at) => self.client.instant_with(expr, at, self.attempts).await,
            Eval::Range(start, end, step) => self.client.range_with(expr, start, end, step, self.attempts).await,
        }?;
        if !answer.warnings.is_empty() {
            self.warnings.lock().expect("not poisoned").extend(answer.warnings.iter().cloned());
        }
        Ok(answer)
    }

    async fn run_group(&self, eval: Eval, queries: &[Query], idx: &[usize]) -> Vec<Result<QueryResult, QueryError>> {
        if idx.len() == 1 {
            let q = for_backend(&queries[idx[0]]);
            return vec![self.request(eval, &q.to_promql()).await.map(|a| a.series).map_err(QueryError::from)];
        }
        let parts: Vec<(usize, &Query)> = idx.iter().map(|i| (*i, &queries[*i])).collect();
        match self.request(eval, &merged_expr(&parts)).await {
            Ok(answer) => {
                let mut by_part: BTreeMap<usize, QueryResult> = idx.iter().map(|i| (*i, Vec::new())).collect();
                for mut s in answer.series {
                    let Some(tag) = s.labels.remove(MERGE_LABEL).and_then(|t| t.parse::<usize>().ok()) else {
                        continue;
                    };
                    if let Some(v) = by_part.get_mut(&tag) {
                        v.push(s);
                    }
                }
                idx.iter().map(|i| Ok(by_part.remove(i).unwrap_or_default())).collect()
            }
            // One bad part fails the whole merged query: ask each part alone.
            Err(e) if !e.retryable => {
                let singles = idx.iter().map(|i| {
                    let q = for_backend(&queries[*i]);
                    async move { self.request(eval, &q.to_promql()).await.map(|a| a.series).map_err(QueryError::from) }
                });
                futures::future::join_all(singles).await
            }
            Err(e) => idx.iter().map(|_| Err(QueryError::from(e.clone()))).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::query::{OverTime, Selector};

    #[test]
    fn a_long_range_widens_the_step_to_stay_under_the_point_limit() {
        // 1 h at 5 s = 721 evaluations: the step stays 5 s.
        assert_eq!(range_step_ms(0, 3_600_000, 5_000), 5_000);
        // 30 days at 5 s would be 518,401: the step becomes ceil(2,592,000,000 / 10,000)
        // = 259,200 ms, i.e. 10,001 evaluations, under Prometheus' 11,000.
        let step = range_step_ms(0, 30 * 86_400_000, 5_000);
        assert_eq!(step, 259_200);
        let evaluations = 30 * 86_400_000 / step + 1;
        assert!(evaluations < 11_000, "{evaluations}");
        // A step of 0 is 1 ms; an empty range keeps the step.
        assert_eq!(range_step_ms(10, 10, 0), 1);
    }

    #[test]
    fn vector_and_matrix_answers_parse_with_nan_and_infinities() {
        let body = br#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"task_id":"a"},"value":[1795948672.771,"NaN"]},
            {"metric":{"task_id":"b"},"value":[1795948672.771,"+Inf"]},
            {"metric":{"task_id":"c"},"value":[1795948672.771,"1.5156E10"]}]},"warnings":["partial"]}"#;
        let a = parse_answer(body, "p").unwrap();
        assert!(a.series[0].points[0].1.is_nan());
        assert_eq!(a.series[1].points[0].1, f64::INFINITY);
        assert_eq!(a.series[2].points[0], (1_795_948_672_771, 1.5156e10));
        assert_eq!(a.warnings, ["partial"]);
        let body = br#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{},"values":[[1.5,"1"],[2.5,"-Inf"]]}]}}"#;
        assert_eq!(parse_answer(body, "p").unwrap().series[0].points, vec![(1500, 1.0), (2500, f64::NEG_INFINITY)]);
    }

    #[test]
    fn a_point_time_outside_the_years_9999_is_a_bad_answer_not_a_time_to_reason_with() {
        // 1e300 s (and NaN, read as 0 no more) would overflow the window arithmetic.
        let body = br#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{},"values":[[1795948672.5,"1"],[1e300,"2"]]}]}}"#;
        let e = parse_answer(body, "p").unwrap_err().to_string();
        assert!(e.contains("is outside the years -9999 to 9999"), "{e}");
        let body = br#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{},"value":[253402000000.5,"1"]}]}}"#;
        assert_eq!(parse_answer(body, "p").unwrap().series[0].points[0].0, 253_402_000_000_500);
    }

    #[test]
    fn typed_reading_takes_scalars_escapes_and_result_before_result_type() {
        let body = br#"{"status":"success","data":{"resultType":"scalar","result":[1795948672.5,"3"]}}"#;
        assert_eq!(parse_answer(body, "p").unwrap().series[0].points, vec![(1_795_948_672_500, 3.0)]);
        // `result` first (key order is free in JSON), an escaped label value, an integer time.
        let body = br#"{"data":{"result":[{"metric":{"task_name":"a\"b\u00e9"},"value":[2,"1"]}],
            "resultType":"vector"},"status":"success"}"#;
        let a = parse_answer(body, "p").unwrap();
        assert_eq!((a.series[0].label("task_name"), a.series[0].points[0]), ("a\"bé", (2000, 1.0)));
        // A number where a series belongs, or a point of three parts: errors, not guesses.
        let body = br#"{"status":"success","data":{"resultType":"vector","result":[1]}}"#;
        assert_eq!(parse_answer(body, "p").unwrap_err().message, "p: unexpected vector shape");
        let body = br#"{"status":"success","data":{"resultType":"vector","result":[{"value":[1,"2",3]}]}}"#;
        assert!(
            parse_answer(body, "p").unwrap_err().message.starts_with("p: the answer is not a Prometheus API response")
        );
    }

    #[test]
    fn an_error_envelope_is_a_final_error_with_its_type_and_message() {
        let body = br#"{"status":"error","errorType":"bad_data","error":"parse error at char 4"}"#;
        let e = parse_answer(body, "http://p").unwrap_err();
        // The backend's message is logged; the error names the documented type only.
        assert_eq!(e.message, "http://p: the answer is an error (bad_data)");
        let body = br#"{"status":"error","errorType":"SECRET-TYPE","error":"SECRET-METADATA-TOKEN"}"#;
        let e = parse_answer(body, "http://p").unwrap_err();
        assert_eq!(e.message, "http://p: the answer is an error");
        assert!(!e.retryable);
    }

    #[test]
    fn statuses_are_classified_once() {
        for (code, retry) in
            [(400, false), (401, false), (404, false), (422, false), (429, true), (500, true), (502, true), (503, true)]
        {
            assert_eq!(retryable_status(code), retry, "{code}");
        }
    }

    #[test]
    fn merged_queries_tag_each_part_and_ask_for_a_range_one_millisecond_shorter() {
        let q = Query::OverTime {
            selector: Selector::metric("m").with("job_id", "j"),
            func: OverTime::Avg,
            range_ms: 300_000,
            at_ms: 0,
            aggregation: None,
        };
        assert_eq!(
            merged_expr(&[(0, &q), (3, &q)]),
            r#"label_replace(avg_over_time({__name__="m", job_id="j"}[299999ms]), "culprit_query", "0", "", "") or label_replace(avg_over_time({__name__="m", job_id="j"}[299999ms]), "culprit_query", "3", "", "")"#
        );
    }

    #[test]
    fn times_go_out_as_seconds_with_milliseconds() {
        assert_eq!(ms_to_seconds(1_795_948_587_780), "1795948587.780");
        assert_eq!(ms_to_seconds(5), "0.005");
    }
}
