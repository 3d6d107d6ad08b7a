//! A client for Flink's REST API (the JobManager's `rest_url`): the job list, job plans and
//! checkpoint configuration of one cluster.
//!
//! IO lives in [`FlinkRest`]; everything that can be decided without the network is a small
//! pure function next to it ([`parse_jobs_overview`], [`pick_job`], [`validate_job_id`],
//! [`endpoint_url`], [`error_detail`], [`FlinkError::is_retryable`]).
//!
//! An error answer's body is logged (redacted, first line, cut), never put in an error's
//! message: messages become verdict notes, posted to every destination, and the host
//! behind a URL may answer anything.
//!
//! Every call has a per-request timeout (`flink.timeout`, cut to the time left before the
//! deadline) and is retried with exponential backoff (100 ms doubling to 2 s, with jitter)
//! while `flink.deadline` allows, for the failures that pass by themselves: the statuses of
//! [`crate::retry_status`] (408, 429 from a proxy in front of the JobManager, 5xx but 501
//! and 505: young jobs answer 500 on some endpoints), connection failures and timeouts. Retries stop when
//! the next pause would end after the deadline, so a call never takes longer than the
//! deadline (plus scheduling slack). Other answers are final. Job ids come from alerts and are untrusted: they are checked to be 32
//! hexadecimal digits before they reach a URL.
//!
//! At most `flink.max_concurrency` requests are in flight at one REST base URL over every
//! client sharing its [`RestLoads`] (the service's: every diagnosis); an attempt waits for
//! a slot within the deadline, and holds none while it backs off.
//!
//! Credentials are resolved once, in [`FlinkRest::new`], and never appear in `Debug`
//! output, errors or logs.

use crate::model::failover::JobExceptions;
use crate::model::rescales::RescaleHistory;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use reqwest::Url;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use tokio::time::Instant;

use crate::collect::rest_load::{RestLoads, UrlLoad};
use crate::config::{FlinkCluster, FlinkConfig, HttpAuth, Millis};
use crate::model::flamegraph::{self, FlameGraph, ProfileKind};
use crate::model::graph::{JobGraph, sanitize_label_value};
use crate::model::secret::Redactor;
use crate::model::snapshot::CheckpointConfig;

/// The first pause between two attempts; it doubles (with jitter) up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(100);
/// The longest pause between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// Error details logged from Flink's answers are cut to this many characters.
const DETAIL_CHARS: usize = 200;
/// Most bytes of one Flink REST answer culprit reads (16 MiB). The largest answers it asks
/// for are `/jobs/:id/plan` of big SQL jobs, a few MB with their operator descriptions; a
/// host answering more (a wrong URL, a hostile one) is refused instead of held in memory.
pub const MAX_ANSWER_BYTES: usize = 16 << 20;
/// Most requests for one flame graph ([`FlinkRest::flamegraph_within`]).
pub const FLAMEGRAPH_POLLS: u32 = 5;
/// Untrusted job ids are quoted in errors up to this many characters.
const QUOTED_ID_CHARS: usize = 64;

/// One job as `GET /jobs/overview` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobOverview {
    /// Job id (`jid`): 32 hexadecimal digits.
    pub id: String,
    /// Job name as Flink shows it (`name`), e.g. `bp-lab-slow-sink`.
    pub name: String,
    /// Job status (`state`): `RUNNING`, `CANCELED`, `FAILED`, `FINISHED`, `RESTARTING`, …
    pub state: String,
    /// When the job was submitted (`start-time`), Unix ms.
    pub start_time_ms: i64,
}

/// A Flink REST call that gave no usable answer. Every message is one sentence naming the
/// cluster and the request path; none contains a credential.
#[derive(Debug, thiserror::Error)]
pub enum FlinkError {
    /// The cluster's settings cannot be used: `rest_url` is not an http(s) URL or carries
    /// credentials, an auth secret cannot be read, or a timeout is not positive. Nothing
    /// was sent.
    #[error("Flink cluster `{cluster}` cannot be used: {reason}")]
    Config {
        /// Cluster name (`flink.clusters[].name`).
        cluster: String,
        /// What is wrong; names the setting, variable or file, never a secret value.
        reason: String,
    },
    /// A job id that is not 32 hexadecimal digits; nothing was sent.
    #[error(
        "Flink cluster `{cluster}`: {job_id:?} is not a Flink job id (32 hexadecimal digits), so no request was sent"
    )]
    InvalidJobId {
        /// Cluster name.
        cluster: String,
        /// The id as given, cut to 64 characters.
        job_id: String,
    },
    /// `GET /jobs/:id/plan` answered 404: the cluster does not know the job.
    #[error("there is no job {job_id} on Flink cluster `{cluster}` (GET {path} answered 404 Not Found)")]
    NoSuchJob {
        /// Cluster name.
        cluster: String,
        /// The (valid) job id asked for.
        job_id: String,
        /// The URL path requested, with any path prefix of `rest_url`.
        path: String,
    },
    /// A non-2xx HTTP answer. Retryable as [`crate::retry_status`] says (408, 429, 5xx but
    /// 501 and 505); every other status is final. The message names the
    /// status as HTTP does, never the body: whatever the host behind the URL answered
    /// (Flink's exception, a metadata service's credentials) is logged, not posted.
    #[error("Flink cluster `{cluster}` answered HTTP {} to GET {path}", status_words(*.status))]
    Status {
        /// Cluster name.
        cluster: String,
        /// The URL path requested, with any path prefix of `rest_url`.
        path: String,
        /// HTTP status code.
        status: u16,
        /// Flink's own message (`errors[0]`, first line), or the start of the body,
        /// redacted and cut; may be empty. For the log only: not in the message.
        detail: String,
    },
    /// One attempt took longer than the per-request timeout (or the time left before the
    /// deadline). Retryable.
    #[error("Flink cluster `{cluster}` did not answer GET {path} within {timeout}")]
    Timeout {
        /// Cluster name.
        cluster: String,
        /// The URL path requested, with any path prefix of `rest_url`.
        path: String,
        /// The time the attempt was given.
        timeout: Millis,
    },
    /// The connection failed: refused, reset, closed before the answer was complete, DNS.
    /// Retryable.
    #[error("Flink cluster `{cluster}` could not be reached for GET {path}: {reason}")]
    Network {
        /// Cluster name.
        cluster: String,
        /// The URL path requested, with any path prefix of `rest_url`.
        path: String,
        /// The transport error, without the URL.
        reason: String,
    },
    /// The request could not be made at all (too many redirects, a client error). Final.
    #[error("GET {path} toward Flink cluster `{cluster}` failed: {reason}")]
    Request {
        /// Cluster name.
        cluster: String,
        /// The URL path requested, with any path prefix of `rest_url`.
        path: String,
        /// The client error, without the URL.
        reason: String,
    },
    /// A 2xx answer whose body is not what the endpoint returns. Final.
    #[error("Flink cluster `{cluster}` answered GET {path} with a body that cannot be read: {reason}")]
    Parse {
        /// Cluster name.
        cluster: String,
        /// The URL path requested, with any path prefix of `rest_url`.
        path: String,
        /// Why the body was rejected.
        reason: String,
    },
    /// No slot came free before the deadline: culprit had `flink.max_concurrency` requests
    /// in flight at this REST URL all along (a storm of diagnoses). Nothing was sent. Final.
    #[error(
        "GET {path} was not sent to Flink cluster `{cluster}`: culprit had flink.max_concurrency ({bound}) requests in flight there until the deadline"
    )]
    NoSlot {
        /// Cluster name.
        cluster: String,
        /// The URL path that would have been requested.
        path: String,
        /// `flink.max_concurrency`.
        bound: usize,
    },
    /// Every attempt within `flink.deadline` failed with a retryable error; `last` is the
    /// last of them.
    #[error(
        "Flink cluster `{cluster}` gave no usable answer to GET {path} in {attempts} attempt(s) within the {deadline} deadline; the last: {last}"
    )]
    GaveUp {
        /// Cluster name.
        cluster: String,
        /// The URL path requested, with any path prefix of `rest_url`.
        path: String,
        /// Requests sent.
        attempts: u32,
        /// `flink.deadline`.
        deadline: Millis,
        /// The last (retryable) error.
        last: Box<FlinkError>,
    },
}

/// `404 Not Found`: the status and its standard name.
fn status_words(status: u16) -> String {
    let name = reqwest::StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason());
    crate::model::foreign::status_words(status, name)
}

impl FlinkError {
    /// Whether another attempt may succeed: the statuses of [`crate::retry_status`] (408,
    /// 429, 5xx but 501 and 505), timeouts and network failures are retryable; 404 and
    /// every other status, bad ids, bad settings, unreadable bodies and an
    /// exhausted deadline are final. The one place that decides retries.
    pub fn is_retryable(&self) -> bool {
        match self {
            FlinkError::Status { status, .. } => crate::retry_status::retryable_status(*status),
            FlinkError::Timeout { .. } | FlinkError::Network { .. } => true,
            FlinkError::Config { .. }
            | FlinkError::InvalidJobId { .. }
            | FlinkError::NoSuchJob { .. }
            | FlinkError::Request { .. }
            | FlinkError::Parse { .. }
            | FlinkError::NoSlot { .. }
            | FlinkError::GaveUp { .. } => false,
        }
    }

    /// Whether the cluster could not be reached: the connection failed or timed out, or it
    /// kept answering 5xx until the deadline.
    pub fn is_unreachable(&self) -> bool {
        match self {
            FlinkError::GaveUp { .. } => true,
            other => other.is_retryable(),
        }
    }

    /// The HTTP status of the answer behind this error (404 for [`FlinkError::NoSuchJob`];
    /// the last attempt's status for [`FlinkError::GaveUp`]), `None` when there was no
    /// HTTP answer. E.g. `checkpoint_config` of a job without checkpointing gives 404.
    pub fn status(&self) -> Option<u16> {
        match self {
            FlinkError::Status { status, .. } => Some(*status),
            FlinkError::NoSuchJob { .. } => Some(404),
            FlinkError::GaveUp { last, .. } => last.status(),
            _ => None,
        }
    }
}

/// Credentials resolved from [`HttpAuth`]; `Debug` never shows the secret.
enum Auth {
    Bearer(SecretString),
    Basic { username: String, password: SecretString },
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Auth::Bearer(_) => f.write_str("Bearer([REDACTED])"),
            Auth::Basic { username, .. } => write!(f, "Basic({username:?}, [REDACTED])"),
        }
    }
}

/// The REST API of one Flink cluster: base URL (with any path prefix), an HTTP client, the
/// per-request timeout, the per-call deadline and resolved credentials.
///
/// Cheap to share by reference; every method takes `&self`. `Debug` shows no secret.
pub struct FlinkRest {
    cluster: String,
    base: Url,
    client: reqwest::Client,
    timeout: Duration,
    deadline: Duration,
    auth: Option<Auth>,
    /// Every wire form of the credentials, removed from anything quoted back.
    redactor: Redactor,
    requests: AtomicU64,
    /// Told once, in a sentence, when retrying first starts (the CLI prints it).
    announce: Option<crate::collect::prometheus::Announce>,
    announced: std::sync::atomic::AtomicBool,
    /// The slots of this base URL (`flink.max_concurrency`), shared with every client of
    /// the same URL built from the same [`RestLoads`].
    load: Arc<UrlLoad>,
}

impl fmt::Debug for FlinkRest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FlinkRest")
            .field("cluster", &self.cluster)
            .field("base", &self.base.as_str())
            .field("timeout", &self.timeout)
            .field("deadline", &self.deadline)
            .field("auth", &self.auth)
            .field("requests", &self.requests())
            .finish()
    }
}

impl FlinkRest {
    /// A client for `cluster` with the timeout and deadline of `flink` (`flink.clusters` is
    /// not read). Resolves the auth secret now (environment variable or file).
    ///
    /// Errors ([`FlinkError::Config`]): `rest_url` is not an http(s) URL or carries
    /// credentials (they belong in `auth`), the secret cannot be read, `flink.timeout` or
    /// `flink.deadline` is not positive, or the HTTP client cannot be built.
    pub fn new(cluster: &FlinkCluster, flink: &FlinkConfig) -> Result<FlinkRest, FlinkError> {
        Self::at(cluster, flink, &cluster.rest_url)
    }

    /// [`Self::new`] at `rest_url` instead of the cluster's own (one built from a job's
    /// labels by the cluster's `rest_url_template`), with slots of its own.
    pub fn at(cluster: &FlinkCluster, flink: &FlinkConfig, rest_url: &str) -> Result<FlinkRest, FlinkError> {
        Self::sharing(cluster, flink, rest_url, &RestLoads::new(flink.max_concurrency))
    }

    /// [`Self::at`], sharing the slots of `rest_url` with every other client `loads` gave
    /// them to (the service: at most `flink.max_concurrency` requests in flight at one
    /// JobManager over all diagnoses).
    pub fn sharing(
        cluster: &FlinkCluster,
        flink: &FlinkConfig,
        rest_url: &str,
        loads: &RestLoads,
    ) -> Result<FlinkRest, FlinkError> {
        let config_error = |reason: String| FlinkError::Config { cluster: cluster.name.clone(), reason };
        // The key the URL came from, as messages name it.
        let key = if cluster.rest_url_template.is_some() { "the URL rest_url_template gave" } else { "rest_url" };
        let base = Url::parse(rest_url)
            .ok()
            .filter(|u| u.scheme() == "http" || u.scheme() == "https")
            .ok_or_else(|| config_error(format!("{key} is not an http(s) URL")))?;
        if !base.username().is_empty() || base.password().is_some() {
            return Err(config_error(format!("{key} carries credentials; put them in `auth` instead")));
        }
        if flink.timeout.as_ms() <= 0 || flink.deadline.as_ms() <= 0 {
            return Err(config_error("flink.timeout and flink.deadline must be longer than 0".into()));
        }
        let auth = match &cluster.auth {
            None => None,
            Some(HttpAuth::Bearer { token }) => {
                Some(Auth::Bearer(token.resolve().map_err(|e| config_error(format!("bearer token: {e}")))?))
            }
            Some(HttpAuth::Basic { username, password }) => Some(Auth::Basic {
                username: username.clone(),
                password: password.resolve().map_err(|e| config_error(format!("basic auth password: {e}")))?,
            }),
        };
        let client = reqwest::Client::builder()
            .user_agent(concat!("culprit/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| config_error(format!("the HTTP client cannot be built: {}", error_chain(&e))))?;
        let mut redactor = Redactor::new();
        match &auth {
            Some(Auth::Bearer(token)) => redactor.add(token.expose_secret()),
            Some(Auth::Basic { username, password }) => redactor.add_basic(username, password.expose_secret()),
            None => {}
        }
        Ok(FlinkRest {
            redactor,
            announce: None,
            announced: std::sync::atomic::AtomicBool::new(false),
            cluster: cluster.name.clone(),
            client,
            timeout: millis_to_duration(flink.timeout),
            deadline: millis_to_duration(flink.deadline),
            auth,
            requests: AtomicU64::new(0),
            load: loads.for_url(&cluster.name, base.as_str()),
            base,
        })
    }

    /// Says once, through `announce`, when retrying first starts and for how long it goes
    /// on (the CLI prints it on stderr).
    pub fn announce_retries(&mut self, announce: crate::collect::prometheus::Announce) {
        self.announce = Some(announce);
    }

    /// The cluster's name, as in messages.
    pub fn cluster(&self) -> &str {
        &self.cluster
    }

    /// `GET /jobs/overview`: every job the cluster knows (running and finished), in Flink's
    /// order.
    ///
    /// Errors: see [`FlinkError`]; a body without `jobs[].jid`, `name`, `state` and
    /// `start-time` is [`FlinkError::Parse`].
    pub async fn jobs(&self) -> Result<Vec<JobOverview>, FlinkError> {
        let segments = ["jobs", "overview"];
        let body = self.get(&segments).await?;
        parse_jobs_overview(&body).map_err(|reason| self.parse_error(&self.request_path(&segments), reason))
    }

    /// `GET /jobs/:id/plan`: the job graph, via [`JobGraph::from_plan_json`].
    ///
    /// Errors: [`FlinkError::InvalidJobId`] (no request sent), [`FlinkError::NoSuchJob`] on
    /// 404, [`FlinkError::Parse`] when the plan cannot be read, else see [`FlinkError`].
    pub async fn plan(&self, job_id: &str) -> Result<JobGraph, FlinkError> {
        self.check_job_id(job_id)?;
        let segments = ["jobs", job_id, "plan"];
        let body = self.get(&segments).await.map_err(|e| match e {
            FlinkError::Status { status: 404, cluster, path, .. } => {
                FlinkError::NoSuchJob { cluster, job_id: job_id.to_string(), path }
            }
            other => other,
        })?;
        JobGraph::from_plan_json(&body).map_err(|e| self.parse_error(&self.request_path(&segments), e.to_string()))
    }

    /// `GET /jobs/:id/checkpoints/config`: interval and timeout (ms), unaligned, state
    /// backend, via [`CheckpointConfig::from_rest_json`].
    ///
    /// Errors: [`FlinkError::InvalidJobId`] (no request sent); [`FlinkError::Status`] with
    /// 404 when the job is unknown or has checkpointing disabled (Flink's message is in
    /// `detail`); [`FlinkError::Parse`] when `interval` or `timeout` is missing; else see
    /// [`FlinkError`].
    pub async fn checkpoint_config(&self, job_id: &str) -> Result<CheckpointConfig, FlinkError> {
        self.check_job_id(job_id)?;
        let segments = ["jobs", job_id, "checkpoints", "config"];
        let body = self.get(&segments).await?;
        CheckpointConfig::from_rest_json(&body).ok_or_else(|| {
            self.parse_error(
                &self.request_path(&segments),
                "not a checkpoint configuration (no numeric `interval` and `timeout`)".into(),
            )
        })
    }

    /// `GET /jobs/:id/exceptions`: the job's exception history (root exceptions, the task
    /// and TaskManager each hit, when), via [`JobExceptions::from_rest_json`]; credentials
    /// in a stack trace are redacted before it is read.
    ///
    /// Errors: [`FlinkError::InvalidJobId`] (no request sent), [`FlinkError::NoSuchJob`] on
    /// 404, [`FlinkError::Parse`] when the answer is no exception history, else see
    /// [`FlinkError`].
    pub async fn exceptions(&self, job_id: &str) -> Result<JobExceptions, FlinkError> {
        self.check_job_id(job_id)?;
        let segments = ["jobs", job_id, "exceptions"];
        let body = self.get(&segments).await.map_err(|e| match e {
            FlinkError::Status { status: 404, cluster, path, .. } => {
                FlinkError::NoSuchJob { cluster, job_id: job_id.to_string(), path }
            }
            other => other,
        })?;
        JobExceptions::from_rest_json(&self.redact(body))
            .map_err(|e| self.parse_error(&self.request_path(&segments), e))
    }

    /// `GET /jobs/:id/rescales/history` (Flink 2.3, the Adaptive scheduler with
    /// `web.adaptive-scheduler.rescale-history.size` > 0), via
    /// [`RescaleHistory::from_rest_json`]; then, when it holds a rescale of the running job,
    /// `GET /jobs/:id/rescales/details/:uuid` of the newest one for its per-vertex
    /// parallelism before and after (at most two requests). Text from Flink is redacted
    /// before it is read; details that do not answer leave the history without them.
    ///
    /// Errors: [`FlinkError::InvalidJobId`] (no request sent); [`FlinkError::Status`] with
    /// 404 when the job has no history (Flink's `RescalesUnavailableException`, or a version
    /// before 2.3); [`FlinkError::Parse`] when the answer is no rescale history; else see
    /// [`FlinkError`]. Callers treat every error as "no history".
    pub async fn rescales(&self, job_id: &str) -> Result<RescaleHistory, FlinkError> {
        self.check_job_id(job_id)?;
        let segments = ["jobs", job_id, "rescales", "history"];
        let body = self.get(&segments).await?;
        let mut history = RescaleHistory::from_rest_json(&self.redact(body))
            .map_err(|e| self.parse_error(&self.request_path(&segments), e))?;
        if let Some(uuid) = history.newest_rescale().and_then(|e| e.uuid.clone())
            && let Ok(details) = self.get(&["jobs", job_id, "rescales", "details", &uuid]).await
        {
            // The history stands without the details (an older entry evicted meanwhile).
            let _ = history.add_details(&self.redact(details));
        }
        Ok(history)
    }

    /// `GET /jobs/:id/vertices/:vid/flamegraph?type=…` once, with retries until `deadline`
    /// (at most `flink.deadline` from now): what the answer says, via
    /// [`flamegraph::parse`].
    ///
    /// Errors: [`FlinkError::InvalidJobId`] when the job or vertex id is not 32 hexadecimal
    /// digits (no request sent); [`FlinkError::Parse`] when the body is not a flame graph;
    /// else see [`FlinkError`].
    pub async fn flamegraph(
        &self,
        job_id: &str,
        vertex_id: &str,
        kind: ProfileKind,
        deadline: Instant,
    ) -> Result<FlameGraph, FlinkError> {
        self.check_job_id(job_id)?;
        self.check_job_id(vertex_id)?;
        let segments = ["jobs", job_id, "vertices", vertex_id, "flamegraph"];
        let mut url = endpoint_url(&self.base, &segments);
        url.query_pairs_mut().append_pair("type", kind.as_str());
        let body = self.get_url(url, deadline.min(Instant::now() + self.deadline)).await?;
        flamegraph::parse(&body).map_err(|reason| self.parse_error(&self.request_path(&segments), reason))
    }

    /// The flame graph of a vertex within `within`: asked at most [`FLAMEGRAPH_POLLS`]
    /// times, every `within / FLAMEGRAPH_POLLS`, while Flink answers that it has no samples
    /// yet (it starts sampling at the first request). `Ok` with samples, `Err` with one
    /// sentence saying why there is none: flame graphs disabled, the tasks ended, no
    /// samples in time, or the request failed.
    pub async fn flamegraph_within(
        &self,
        job_id: &str,
        vertex_id: &str,
        kind: ProfileKind,
        within: Duration,
    ) -> Result<FlameGraph, String> {
        let start = Instant::now();
        let deadline = start + within;
        let interval = within / FLAMEGRAPH_POLLS;
        let secs = within.as_secs_f64();
        for poll in 0..FLAMEGRAPH_POLLS {
            if poll > 0 {
                let next = start + interval * poll;
                if next >= deadline {
                    break;
                }
                tokio::time::sleep_until(next).await;
            }
            match self.flamegraph(job_id, vertex_id, kind, deadline).await {
                Ok(graph @ FlameGraph::Ready { .. }) => return Ok(graph),
                Ok(FlameGraph::Waiting) => continue,
                Ok(FlameGraph::Disabled) => {
                    return Err(format!(
                        "Flink cluster {} has flame graphs disabled (rest.flamegraph.enabled: false)",
                        self.cluster
                    ));
                }
                Ok(FlameGraph::Terminated) => return Err("the vertex's tasks are no longer running".into()),
                Err(e) => return Err(e.to_string()),
            }
        }
        Err(format!("Flink REST had no samples within {secs} s (flink.flamegraph_deadline)"))
    }

    /// Number of HTTP requests sent so far by this client, retries included.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    fn check_job_id(&self, job_id: &str) -> Result<(), FlinkError> {
        if validate_job_id(job_id) {
            Ok(())
        } else {
            Err(FlinkError::InvalidJobId {
                cluster: self.cluster.clone(),
                job_id: job_id.chars().take(QUOTED_ID_CHARS).collect(),
            })
        }
    }

    /// The URL path of `segments` below the base, as messages show it.
    fn request_path(&self, segments: &[&str]) -> String {
        endpoint_url(&self.base, segments).path().to_string()
    }

    fn parse_error(&self, path: &str, reason: String) -> FlinkError {
        FlinkError::Parse { cluster: self.cluster.clone(), path: path.to_string(), reason: self.redact(reason) }
    }

    /// Removes the credentials, in every wire form, from text that came from outside
    /// (bodies, transport errors).
    fn redact(&self, text: String) -> String {
        self.redactor.redact(&text)
    }

    /// The wire forms of this client's credentials (to redact what it quotes).
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// GET of `segments` below the base URL, with retries until the deadline; the body of
    /// the 2xx answer.
    async fn get(&self, segments: &[&str]) -> Result<String, FlinkError> {
        self.get_url(endpoint_url(&self.base, segments), Instant::now() + self.deadline).await
    }

    /// GET of `url` with retries until `deadline`; the body of the 2xx answer.
    async fn get_url(&self, url: Url, deadline: Instant) -> Result<String, FlinkError> {
        let path = url.path().to_string();
        let attempts = AtomicU32::new(0);
        let backoff = ExponentialBuilder::default()
            .with_min_delay(MIN_BACKOFF)
            .with_max_delay(MAX_BACKOFF)
            .with_factor(2.0)
            .with_jitter()
            .without_max_times();
        let result = (|| async {
            let attempt = attempts.fetch_add(1, Ordering::Relaxed) + 1;
            self.attempt(&url, &path, deadline, attempt).await
        })
        .retry(backoff)
        .sleep(tokio::time::sleep)
        .when(FlinkError::is_retryable)
        .adjust(|_, delay| {
            // Sleep only when an attempt can still start before the deadline.
            let left = deadline.saturating_duration_since(Instant::now());
            delay.filter(|d| *d < left)
        })
        .notify(|err, delay| {
            if let Some(announce) = &self.announce
                && !self.announced.swap(true, Ordering::Relaxed)
            {
                let what = match err {
                    FlinkError::Network { reason, .. } if reason.contains("Connection refused") => {
                        "refused the connection".to_string()
                    }
                    FlinkError::Timeout { .. } => "did not answer in time".to_string(),
                    FlinkError::Status { status, .. } => format!("answered HTTP {status}"),
                    other => format!("failed ({other})"),
                };
                announce(format!(
                    "Flink REST at {} {what}; retrying for {} s (flink.deadline)",
                    self.base.as_str().trim_end_matches('/'),
                    self.deadline.as_secs()
                ));
            }
            tracing::warn!(
                cluster = %self.cluster,
                path = %path,
                attempt = attempts.load(Ordering::Relaxed),
                retry_in_ms = delay.as_millis() as u64,
                error = %err,
                "Flink REST request failed; retrying"
            );
        })
        .await;
        result.map_err(|err| {
            if err.is_retryable() {
                FlinkError::GaveUp {
                    cluster: self.cluster.clone(),
                    path: path.clone(),
                    attempts: attempts.load(Ordering::Relaxed),
                    deadline: duration_to_millis(self.deadline),
                    last: Box::new(err),
                }
            } else {
                err
            }
        })
    }

    /// One request, bounded by the per-request timeout and the time left before `deadline`,
    /// sent once a slot is free (`flink.max_concurrency`); the slot is held until the answer
    /// is read and is not held between attempts.
    async fn attempt(&self, url: &Url, path: &str, deadline: Instant, attempt: u32) -> Result<String, FlinkError> {
        let Some(_slot) = self.load.slot(deadline).await else {
            return Err(FlinkError::NoSlot {
                cluster: self.cluster.clone(),
                path: path.to_string(),
                bound: self.load.bound(),
            });
        };
        let timeout = self.timeout.min(deadline.saturating_duration_since(Instant::now()));
        let timeout_error = || FlinkError::Timeout {
            cluster: self.cluster.clone(),
            path: path.to_string(),
            timeout: duration_to_millis(timeout),
        };
        if timeout.is_zero() {
            return Err(timeout_error());
        }
        let mut request = self.client.get(url.clone()).header(reqwest::header::ACCEPT, "application/json");
        request = match &self.auth {
            None => request,
            Some(Auth::Bearer(token)) => request.bearer_auth(token.expose_secret()),
            Some(Auth::Basic { username, password }) => request.basic_auth(username, Some(password.expose_secret())),
        };
        self.requests.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(
            cluster = %self.cluster,
            path = %path,
            attempt,
            timeout_ms = timeout.as_millis() as u64,
            "Flink REST request"
        );
        let started = Instant::now();
        let exchange = async {
            let response = request.send().await?;
            let status = response.status();
            let body = read_bounded(response).await?;
            Ok::<_, reqwest::Error>((status, body))
        };
        let (status, body) = match tokio::time::timeout(timeout, exchange).await {
            Err(_) => return Err(timeout_error()),
            Ok(Err(e)) if e.is_timeout() => return Err(timeout_error()),
            Ok(Err(e)) => return Err(self.transport_error(path, e)),
            Ok(Ok((_, None))) => {
                let reason =
                    format!("the answer is larger than {} MiB, more than culprit reads", MAX_ANSWER_BYTES >> 20);
                return Err(FlinkError::Parse { cluster: self.cluster.clone(), path: path.to_string(), reason });
            }
            Ok(Ok((status, Some(body)))) => (status, body),
        };
        tracing::debug!(
            cluster = %self.cluster,
            path = %path,
            attempt,
            status = status.as_u16(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "Flink REST answer"
        );
        if status.is_success() {
            Ok(body)
        } else {
            let detail = error_detail(&body, &self.redactor);
            // The body stays here, in the log: the error (and so every note) says the status.
            tracing::warn!(
                cluster = %self.cluster,
                path = %path,
                attempt,
                status = status.as_u16(),
                detail = %detail,
                "Flink REST answered an error"
            );
            Err(FlinkError::Status {
                cluster: self.cluster.clone(),
                path: path.to_string(),
                status: status.as_u16(),
                detail,
            })
        }
    }

    fn transport_error(&self, path: &str, e: reqwest::Error) -> FlinkError {
        let e = e.without_url();
        let cluster = self.cluster.clone();
        let path = path.to_string();
        let reason = self.redact(error_chain(&e));
        if e.is_decode() {
            FlinkError::Parse { cluster, path, reason }
        } else if e.is_connect() || e.is_request() || e.is_body() {
            FlinkError::Network { cluster, path, reason }
        } else {
            FlinkError::Request { cluster, path, reason }
        }
    }
}

/// An error and its sources joined by `: `, repeats left out. Callers strip URLs first
/// (`reqwest::Error::without_url`).
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = Some(e);
    while let Some(err) = next {
        let text = err.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        next = err.source();
    }
    parts.join(": ")
}

fn millis_to_duration(m: Millis) -> Duration {
    Duration::from_millis(m.as_ms().max(0) as u64)
}

fn duration_to_millis(d: Duration) -> Millis {
    Millis(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Whether `job_id` is a Flink job id: exactly 32 ASCII hexadecimal digits (either case).
/// Ids from alerts are untrusted; only these reach a URL.
pub fn validate_job_id(job_id: &str) -> bool {
    job_id.len() == 32 && job_id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `base` with `segments` appended as path segments (each percent-encoded), keeping any
/// path prefix of `base` whether or not it ends with `/`: `http://h/flink` and
/// `http://h/flink/` with `["jobs", "overview"]` both give `http://h/flink/jobs/overview`.
/// The query of `base` is kept; its fragment is dropped.
pub fn endpoint_url(base: &Url, segments: &[&str]) -> Url {
    let mut url = base.clone();
    url.set_fragment(None);
    if let Ok(mut path) = url.path_segments_mut() {
        path.pop_if_empty().extend(segments);
    }
    url
}

/// Parses the body of `GET /jobs/overview` (`{"jobs": [{"jid", "name", "state",
/// "start-time", …}]}`) into jobs in Flink's order; other fields are ignored.
///
/// Errors: a one-sentence reason when the body is not JSON or a job lacks one of the four
/// fields (or `start-time` is not an integer).
pub fn parse_jobs_overview(text: &str) -> Result<Vec<JobOverview>, String> {
    #[derive(Deserialize)]
    struct Wire {
        jobs: Vec<WireJob>,
    }
    #[derive(Deserialize)]
    struct WireJob {
        jid: String,
        name: String,
        state: String,
        #[serde(rename = "start-time")]
        start_time: i64,
    }
    let wire: Wire = serde_json::from_str(text).map_err(|e| {
        format!(
            "not a Flink job overview (expected `jobs` with `jid`, `name`, `state`, `start-time`): {}",
            crate::model::foreign::json_error(&e)
        )
    })?;
    Ok(wire
        .jobs
        .into_iter()
        .map(|j| JobOverview { id: j.jid, name: j.name, state: j.state, start_time_ms: j.start_time })
        .collect())
}

/// The job `wanted` designates: a job id, a Flink job name (`bp-lab-slow-sink`) or the name
/// as the Prometheus reporter sanitizes it (`bp_lab_slow_sink`, see
/// [`sanitize_label_value`]).
///
/// An exact id wins (case-insensitive). Otherwise the jobs whose name equals `wanted`, or,
/// when none does, whose sanitized name equals the sanitized `wanted`; among them the
/// `RUNNING` one, else the newest `start_time_ms` (newest first among several running).
/// `None` when nothing matches. Pure.
pub fn pick_job<'a>(jobs: &'a [JobOverview], wanted: &str) -> Option<&'a JobOverview> {
    if let Some(job) = jobs.iter().find(|j| j.id.eq_ignore_ascii_case(wanted)) {
        return Some(job);
    }
    let exact: Vec<&JobOverview> = jobs.iter().filter(|j| j.name == wanted).collect();
    let candidates = if exact.is_empty() {
        let sanitized = sanitize_label_value(wanted);
        jobs.iter().filter(|j| sanitize_label_value(&j.name) == sanitized).collect()
    } else {
        exact
    };
    candidates.into_iter().max_by_key(|j| (j.state == "RUNNING", j.start_time_ms))
}

/// Flink's explanation in an error answer, for the log: the first line of `errors[0]` of
/// `{"errors": ["…"]}`, else the first non-empty line of the body; with the credentials
/// removed in every form (the body, then the decoded message), whitespace collapsed, and
/// then cut to 200 characters. Empty for an empty body.
pub fn error_detail(body: &str, redactor: &Redactor) -> String {
    let body = &redactor.redact(body);
    let from_json = serde_json::from_str::<serde_json::Value>(body).ok().and_then(|v| {
        v.get("errors")?
            .as_array()?
            .iter()
            .filter_map(|e| e.as_str())
            .find(|s| !s.trim().is_empty())
            .map(str::to_string)
    });
    let text = redactor.redact(&from_json.unwrap_or_else(|| body.to_string()));
    let line = text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    let collapsed = line.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.chars().count() > DETAIL_CHARS {
        collapsed.chars().take(DETAIL_CHARS).collect::<String>() + "…"
    } else {
        collapsed
    }
}

/// The answer's body as text, lossy UTF-8 as reqwest's `text()` reads it, or `None` once it
/// passes [`MAX_ANSWER_BYTES`] (read no further: a `Content-Length` over it is not read at all).
async fn read_bounded(mut response: reqwest::Response) -> Result<Option<String>, reqwest::Error> {
    if response.content_length().is_some_and(|n| n > MAX_ANSWER_BYTES as u64) {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if bytes.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Ok(None);
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16) -> FlinkError {
        FlinkError::Status { cluster: "c".into(), path: "/p".into(), status: code, detail: String::new() }
    }

    #[test]
    fn server_errors_timeouts_and_network_failures_are_retryable() {
        // 408 and 429 as every backend and destination retries them (crate::retry_status).
        for code in [408, 429, 500, 502, 503, 504] {
            assert!(status(code).is_retryable(), "{code}");
        }
        assert!(FlinkError::Timeout { cluster: "c".into(), path: "/p".into(), timeout: Millis(5) }.is_retryable());
        assert!(
            FlinkError::Network { cluster: "c".into(), path: "/p".into(), reason: "refused".into() }.is_retryable()
        );
    }

    #[test]
    fn client_errors_and_local_failures_are_final() {
        for code in [400, 401, 403, 404, 405, 501, 505] {
            assert!(!status(code).is_retryable(), "{code}");
        }
        let finals = [
            FlinkError::Config { cluster: "c".into(), reason: "r".into() },
            FlinkError::InvalidJobId { cluster: "c".into(), job_id: "x".into() },
            FlinkError::NoSuchJob { cluster: "c".into(), job_id: "a".repeat(32), path: "/p".into() },
            FlinkError::Request { cluster: "c".into(), path: "/p".into(), reason: "r".into() },
            FlinkError::Parse { cluster: "c".into(), path: "/p".into(), reason: "r".into() },
            FlinkError::GaveUp {
                cluster: "c".into(),
                path: "/p".into(),
                attempts: 3,
                deadline: Millis(1000),
                last: Box::new(status(500)),
            },
        ];
        for e in finals {
            assert!(!e.is_retryable(), "{e}");
        }
    }

    #[test]
    fn only_32_hex_digits_make_a_job_id() {
        assert!(validate_job_id("da23ad9af4e7326542c9a70eac958f42"));
        assert!(validate_job_id("DA23AD9AF4E7326542C9A70EAC958F42"));
        for bad in [
            "",
            "../../x",
            "a b",
            "da23ad9af4e7326542c9a70eac958f4",
            "da23ad9af4e7326542c9a70eac958f42/",
            "g".repeat(32).as_str(),
        ] {
            assert!(!validate_job_id(bad), "{bad:?}");
        }
        assert!(!validate_job_id("da23ad9af4e7326542c9a70eac958f4é"));
    }

    #[test]
    fn endpoint_paths_join_below_the_base_with_or_without_trailing_slash() {
        let cases = [
            ("http://jm:8081", "http://jm:8081/jobs/overview"),
            ("http://jm:8081/", "http://jm:8081/jobs/overview"),
            ("http://host/flink", "http://host/flink/jobs/overview"),
            ("http://host/flink/", "http://host/flink/jobs/overview"),
            ("https://host/a/b/#frag", "https://host/a/b/jobs/overview"),
        ];
        for (base, want) in cases {
            let url = endpoint_url(&Url::parse(base).unwrap(), &["jobs", "overview"]);
            assert_eq!(url.as_str(), want, "{base}");
        }
    }

    #[test]
    fn a_job_overview_gives_id_name_state_and_start_time() {
        let jobs = parse_jobs_overview(
            r#"{"jobs":[{"jid":"da23ad9af4e7326542c9a70eac958f42","name":"bp-lab-slow-sink","state":"RUNNING","start-time":1795948509664,"end-time":-1}]}"#,
        )
        .unwrap();
        assert_eq!(
            jobs,
            [JobOverview {
                id: "da23ad9af4e7326542c9a70eac958f42".into(),
                name: "bp-lab-slow-sink".into(),
                state: "RUNNING".into(),
                start_time_ms: 1795948509664,
            }]
        );
        assert!(parse_jobs_overview(r#"{"jobs":[{"jid":"x","name":"n"}]}"#).is_err());
        assert!(parse_jobs_overview("<html>").is_err());
    }

    #[test]
    fn flink_error_bodies_give_their_first_line() {
        let body =
            r#"{"errors":["org.apache.flink.runtime.rest.NotFoundException: Job 1 not found\n\tat x.y(Z.java:1)"]}"#;
        let none = Redactor::new();
        assert_eq!(error_detail(body, &none), "org.apache.flink.runtime.rest.NotFoundException: Job 1 not found");
        assert_eq!(error_detail("\n  Bad   gateway \nmore", &none), "Bad gateway");
        assert_eq!(error_detail("", &none), "");
        assert_eq!(error_detail(&"x".repeat(500), &none).chars().count(), DETAIL_CHARS + 1);
    }
}
