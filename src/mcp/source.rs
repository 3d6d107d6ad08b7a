//! Where the MCP tools get their answers: the metrics (Prometheus through the service's
//! pipeline, or a bundled capture), the stored verdicts, and the clock; each answer by an
//! existing function of `service`, `collect` or `samples`, each failure as a [`ToolError`]
//! an agent can act on.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::collect::collector::{CollectError, MetricSource};
use crate::collect::query::{Agg, Aggregation, OverTime, Query, Selector};
use crate::config::{Config, StoreConfig};
use crate::model::catalog::labels::{JOB_ID, JOB_NAME};
use crate::model::request::DiagnosisRequest;
use crate::model::verdict::{Verdict, rfc3339};
use crate::samples::captures::Capture;
use crate::service::Service;
use crate::service::pipeline::{Live, PipelineError};
use crate::service::store::{Store, StoredVerdict};

use super::errors::ToolError;

/// How long a tool waits for Prometheus to answer a probe before saying it is down (as
/// `GET /api/v1/diagnose` does).
const PING: Duration = Duration::from_secs(2);

/// Stored verdicts a listing reads at most, newest first (`GET /api/v1/verdicts`' limit):
/// a job's recent verdicts are found among these.
pub const MAX_SCANNED: usize = 1000;

/// The metrics a diagnosis reads.
pub enum Metrics {
    /// Prometheus (and Flink REST) through the pipeline `culprit serve` runs.
    Service(Arc<Service>),
    /// The same pipeline, built from the configuration (`culprit mcp --config`).
    Live(Box<Live>),
    /// A recording bundled with culprit (`culprit mcp --capture NAME`): offline.
    Capture { capture: &'static Capture, store: Box<crate::collect::store::SeriesStore> },
}

/// Where stored verdicts are read.
pub enum Verdicts {
    /// The store of the running service.
    Service(Arc<Service>),
    /// The configured store, opened for each call and closed after it (a `culprit serve`
    /// of the same SQLite file holds it: then the tool says so).
    Configured(StoreConfig),
}

/// What the tools answer from.
pub struct Backend {
    pub config: Config,
    metrics: Metrics,
    verdicts: Verdicts,
    redactor: crate::model::secret::Redactor,
    /// When Prometheus was first seen down in a row of failures, Unix ms.
    down_since: Mutex<Option<i64>>,
}

/// One job with backpressure, from [`Backend::backpressured`].
pub struct Backpressured {
    pub job_name: String,
    pub job_id: String,
    /// Max over the job's subtasks of the window's mean backpressured ratio.
    pub ratio: f64,
}

/// The answer of [`Backend::backpressured`]: the jobs, and how they were found.
pub struct BackpressuredJobs {
    pub at_ms: i64,
    pub window_ms: i64,
    pub threshold: f64,
    pub query: String,
    pub jobs: Vec<Backpressured>,
}

impl Backend {
    /// The tools of `culprit serve`'s `POST /mcp`: its pipeline and its store.
    pub fn for_service(service: Arc<Service>) -> Backend {
        let config = service.config.clone();
        let redactor = service.redactor.clone();
        Backend {
            config,
            metrics: Metrics::Service(service.clone()),
            verdicts: Verdicts::Service(service),
            redactor,
            down_since: Mutex::new(None),
        }
    }

    /// The tools of `culprit mcp`: Prometheus from `config`, or the bundled `capture`.
    pub fn standalone(config: Config, capture: Option<&'static Capture>) -> Result<Backend, String> {
        let metrics = match capture {
            Some(capture) => {
                let store = crate::samples::captures::recording(capture)?;
                Metrics::Capture { capture, store: Box::new(store) }
            }
            None if config.prometheus.is_none() => {
                return Err(
                    "culprit mcp diagnoses live: give a --config with a [prometheus] section, or --capture NAME for a bundled recording"
                        .into(),
                );
            }
            None => Metrics::Live(Box::new(Live::new(config.clone()).map_err(|e| e.to_string())?)),
        };
        Ok(Backend {
            redactor: config.redactor(),
            verdicts: Verdicts::Configured(config.store.clone()),
            metrics,
            config,
            down_since: Mutex::new(None),
        })
    }

    fn live(&self) -> Option<&Live> {
        match &self.metrics {
            Metrics::Service(s) => Some(&s.live),
            Metrics::Live(l) => Some(l),
            Metrics::Capture { .. } => None,
        }
    }

    /// The time "now" stands for: the wall clock live, a recording's last sample.
    pub fn now_ms(&self) -> i64 {
        match &self.metrics {
            Metrics::Capture { store, .. } => store.latest_ms().unwrap_or(0),
            _ => jiff::Timestamp::now().as_millisecond(),
        }
    }

    /// What the metrics come from, for the server's instructions.
    pub fn describe(&self) -> String {
        match (&self.metrics, self.live().and_then(Live::prometheus)) {
            (Metrics::Capture { capture, .. }, _) => {
                format!(
                    "the bundled recording `{}` ({}), offline; its last sample is \"now\"",
                    capture.name, capture.what
                )
            }
            (_, Some(p)) => format!("Prometheus at {}", p.base()),
            _ => "no metrics".into(),
        }
    }

    /// A sentence for an agent, without secrets.
    fn redact(&self, e: ToolError) -> ToolError {
        ToolError { message: self.redactor.redact(&e.message), ..e }
    }

    /// How long a live diagnosis may take: a second less than `server.request_timeout`, so
    /// that the answer is the tool's, not the HTTP timeout's.
    fn budget(&self) -> Duration {
        Duration::from_millis(self.config.server.request_timeout.as_ms().saturating_sub(1000).max(1000) as u64)
    }

    /// Diagnoses one job as `request` says; `cluster` names the Flink cluster to ask.
    pub async fn diagnose(&self, request: &DiagnosisRequest, cluster: Option<&str>) -> Result<Verdict, ToolError> {
        let result = match &self.metrics {
            Metrics::Capture { capture, store } => {
                crate::samples::captures::verdict_for(capture, store, request, &self.config).map_err(|e| match e {
                    crate::samples::captures::CaptureError::Collect(e) => ToolError::collect(&e),
                    crate::samples::captures::CaptureError::Bundle(m) => ToolError::internal(m),
                })
            }
            _ => self.diagnose_live(request, cluster).await,
        };
        result.map(|v| crate::service::pipeline::redact_verdict(&self.redactor, v)).map_err(|e| self.redact(e))
    }

    async fn diagnose_live(&self, request: &DiagnosisRequest, cluster: Option<&str>) -> Result<Verdict, ToolError> {
        let live = self.live().ok_or_else(|| ToolError::internal("no live pipeline"))?;
        self.check_prometheus(live).await?;
        let labels = Service::request_labels(cluster);
        let budget = self.budget();
        match tokio::time::timeout(budget, live.diagnose(request, &labels, jiff::Timestamp::now().as_millisecond()))
            .await
        {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(PipelineError::Collect(e @ CollectError::Source(_)))) => {
                Err(self.prometheus_failed(live, &e.to_string()))
            }
            Ok(Err(PipelineError::Collect(e))) => Err(ToolError::collect(&e)),
            Ok(Err(e)) => Err(ToolError::request(e.to_string())),
            Err(_) => Err(self.prometheus_failed(
                live,
                &format!(
                    "no verdict within {} s (server.request_timeout): it answers slowly or a query keeps failing",
                    budget.as_secs()
                ),
            )),
        }
    }

    /// A probe of Prometheus before a live tool runs: down, the tool says which backend,
    /// what it did and since when, and tries nothing.
    async fn check_prometheus(&self, live: &Live) -> Result<(), ToolError> {
        let Some(p) = live.prometheus() else {
            return Err(ToolError::request(PipelineError::NoPrometheus.to_string()));
        };
        match p.ping(PING).await {
            Ok(()) => {
                *self.down_since.lock().unwrap_or_else(|e| e.into_inner()) = None;
                Ok(())
            }
            Err(e) => {
                let what = crate::collect::prometheus::what_went_wrong(p.base(), &e);
                Err(self.prometheus_failed(live, &format!("{what}; nothing was tried")))
            }
        }
    }

    /// Prometheus failed now: the error names it and since when it fails.
    fn prometheus_failed(&self, live: &Live, what: &str) -> ToolError {
        let now = jiff::Timestamp::now().as_millisecond();
        let since = *self.down_since.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(now);
        let base = live.prometheus().map(|p| p.base().to_string()).unwrap_or_default();
        self.redact(ToolError::backend("prometheus", &base, what, since, now))
    }

    /// The jobs backpressured at `at_ms` (else now), in one query: the max over each job's
    /// subtasks of the mean `backPressuredTimeMsPerSecond` over the window, above the
    /// configured `backpressured_ratio`; `labels` narrow the series (escaped by the query
    /// shapes, as every selector is).
    pub async fn backpressured(
        &self,
        at_ms: Option<i64>,
        window_ms: Option<i64>,
        labels: &BTreeMap<String, String>,
    ) -> Result<BackpressuredJobs, ToolError> {
        let at_ms = at_ms.unwrap_or_else(|| self.now_ms());
        let window_ms = window_ms.unwrap_or(self.config.diagnosis.window.as_ms());
        let mut selector = Selector::metric(&self.config.metrics.backpressured);
        for (k, v) in labels {
            selector = selector.with(k, v);
        }
        let query = Query::OverTime {
            selector,
            func: OverTime::Avg,
            range_ms: window_ms,
            at_ms,
            aggregation: Some(Aggregation::new(Agg::Max, &[JOB_ID, JOB_NAME])),
        };
        let answer = match &self.metrics {
            Metrics::Capture { store, .. } => store.run(std::slice::from_ref(&query)).await,
            _ => {
                let live = self.live().ok_or_else(|| ToolError::internal("no live pipeline"))?;
                self.check_prometheus(live).await?;
                let p = live.prometheus().ok_or_else(|| ToolError::request(PipelineError::NoPrometheus.to_string()))?;
                crate::collect::prometheus::PromSource::new(p, at_ms).run(std::slice::from_ref(&query)).await
            }
        };
        let series = match answer.into_iter().next() {
            Some(Ok(series)) => series,
            Some(Err(e)) => {
                let live = self.live().ok_or_else(|| ToolError::internal(e.to_string()))?;
                return Err(self.prometheus_failed(live, &e.to_string()));
            }
            None => Vec::new(),
        };
        let threshold = self.config.diagnosis.thresholds.backpressured_ratio;
        // Flink's backpressured time is in ms per second: 1000 is always backpressured.
        let mut jobs: Vec<Backpressured> = series
            .iter()
            .filter_map(|s| {
                let ratio = s.last_value()? / 1000.0;
                (ratio > threshold).then(|| Backpressured {
                    job_name: s.label(JOB_NAME).to_string(),
                    job_id: s.label(JOB_ID).to_string(),
                    ratio: crate::model::verdict::round_sig(ratio),
                })
            })
            .collect();
        jobs.sort_by(|a, b| b.ratio.total_cmp(&a.ratio).then_with(|| a.job_name.cmp(&b.job_name)));
        Ok(BackpressuredJobs { at_ms, window_ms, threshold, query: query.to_promql(), jobs })
    }

    /// One stored verdict.
    pub async fn stored(&self, id: i64) -> Result<StoredVerdict, ToolError> {
        let found = self.with_store(async |store: &Store| store.verdict(id).await).await?;
        found.ok_or_else(|| {
            ToolError::not_found(format!(
                "no stored verdict has id {id}: list_recent_verdicts gives the ids of a job's verdicts"
            ))
        })
    }

    /// The newest stored verdicts about `job` (its name as Flink shows it, as the reporter
    /// writes it, or its id), newest first, among the last [`MAX_SCANNED`]; the known job
    /// names when none is about it.
    pub async fn recent(&self, job: &str, limit: usize) -> Result<Vec<StoredVerdict>, ToolError> {
        let all = self.with_store(async |store: &Store| store.verdicts(MAX_SCANNED).await).await?;
        let about = |v: &StoredVerdict| {
            let name = v.verdict["job"]["name"].as_str().unwrap_or_default();
            let id = v.verdict["job"]["id"].as_str().unwrap_or_default();
            name == job || id == job || crate::model::graph::sanitize_label_value(name) == job
        };
        let mine: Vec<StoredVerdict> = all.iter().filter(|v| about(v)).take(limit).cloned().collect();
        if mine.is_empty() && !all.is_empty() {
            let mut known: Vec<String> =
                all.iter().filter_map(|v| v.verdict["job"]["name"].as_str().map(str::to_string)).collect();
            known.sort();
            known.dedup();
            return Err(ToolError::unknown_job(job, &known, "among the stored verdicts"));
        }
        Ok(mine)
    }

    /// Runs `f` on the store: the service's, or the configured one opened for the call.
    async fn with_store<T>(
        &self,
        f: impl AsyncFnOnce(&Store) -> Result<T, crate::service::store::StoreError>,
    ) -> Result<T, ToolError> {
        let unavailable = |e: crate::service::store::StoreError| {
            ToolError::backend_now("store", &e.to_string(), jiff::Timestamp::now().as_millisecond())
        };
        match &self.verdicts {
            Verdicts::Service(s) => f(&s.store).await.map_err(unavailable),
            Verdicts::Configured(cfg) => {
                if cfg.url.is_none() && !cfg.path.exists() {
                    return Err(ToolError::not_found(format!(
                        "no store at {}: `culprit serve` keeps its verdicts there (store.path); none was written yet, or this configuration names another file",
                        cfg.path.display()
                    )));
                }
                let metrics = Arc::new(crate::service::metrics::Metrics::new());
                let store = Store::open(cfg, metrics).map_err(|e| {
                    ToolError::backend_now(
                        "store",
                        &format!("{e} (a running `culprit serve` holds its SQLite store: ask its POST /mcp instead)"),
                        jiff::Timestamp::now().as_millisecond(),
                    )
                })?;
                let answer = f(&store).await.map_err(unavailable);
                let _ = store.close().await;
                answer
            }
        }
        .map_err(|e| self.redact(e))
    }
}

/// Unix ms as RFC 3339, as verdicts write times.
pub fn time(ms: i64) -> String {
    rfc3339(ms)
}
