//! The MCP tools: their inputs (each with a JSON Schema), their structured outputs (the
//! `culprit.verdict/v1` schema where a verdict is returned) and their descriptions, written
//! for a model: when to call which, and what the answers' names mean.

use std::collections::BTreeMap;
use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::model::{Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ServerHandler, tool, tool_handler, tool_router};
use serde::{Deserialize, Serialize};

use super::errors::ToolError;
use super::explain::{VertexExplanation, explain, vertex_names};
use super::source::{Backend, time};
use crate::model::request::DiagnosisRequest;
use crate::model::verdict::Verdict;

/// Verdicts `list_recent_verdicts` gives at most.
const MAX_RECENT: i64 = 50;

/// What the server tells the model once, at initialization.
const INSTRUCTIONS: &str = "culprit diagnoses Apache Flink backpressure. When operators are red in the Flink UI, \
the red (backpressured) vertices are victims: the culprit is the vertex downstream of them that is busy by itself and \
not backpressured. Start with list_backpressured_jobs (which jobs have backpressure now), then diagnose_job for one of \
them (the verdict: culprit vertex, finding, cause with numbers, fix, evidence with PromQL). To dig into one vertex of a \
verdict (why it is the culprit, or why a red vertex is only a victim) call explain_vertex. Verdicts culprit stored when \
alerts fired: list_recent_verdicts (by job), get_verdict (by id). Verdict fields: status is culprit_found, \
no_single_culprit, no_backpressure or inconclusive; confidence high, medium or low; `missing` lists metrics that were \
absent. Findings (what is slow about the culprit): sink (the sink writes slowly: the external system), hot_key (one key \
carries a large share of records), slow_instance (one subtask slow though keys are even: its node or pod), \
state_backend (RocksDB stalls or is slow), state_growth (state only grows: no TTL), checkpoints (checkpointing slows \
the job), headroom (the vertex is at capacity: scale it), source (the source cannot read faster), network (the exchange, \
not a busy operator), async_io (an async lookup bounded by the service it calls), watermark_stall, gc_pressure, \
memory_limit (OOM-killed or at its memory limit), cpu_throttled (CPU quota), source_skew (partition skew in the topic), \
watermark_alignment (readers paused by watermark alignment), failing_over (the job restarts; the culprit task throws), \
unexplained (a vertex holds the job back for no reason in the metrics: profile it), none. A tool that fails answers \
`error (kind): …` with kind not_found (change the arguments; the closest job names are given), bad_request, \
backend_down (which backend and since when: retry later) or internal.";

/// The culprit MCP server: its tools over a [`Backend`].
#[derive(Clone)]
pub struct CulpritTools {
    backend: Arc<Backend>,
    tool_router: ToolRouter<Self>,
}

/// `diagnose_job`'s arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct DiagnoseArgs {
    /// The Flink job: its name as Flink shows it (`bp-lab-slow-sink`), as the metrics
    /// reporter writes it (`bp_lab_slow_sink`), or its 32-hex-digit job id.
    pub job: String,
    /// The time the verdict is about, RFC 3339 (`2026-11-29T10:36:00Z`). Omit for now.
    pub at: Option<String>,
    /// The window before `at` that the averages cover: `5m`, `90s`. Omit for the
    /// configured default (5m).
    pub window: Option<String>,
    /// Only when two deployments report the same job id (the error says so): label
    /// name to value that picks one, e.g. {"namespace": "flink-us"}.
    #[serde(default)]
    pub label: BTreeMap<String, String>,
    /// The configured Flink cluster to ask for the job graph, by name. Omit for the
    /// cluster the job's labels choose.
    pub cluster: Option<String>,
}

/// `list_backpressured_jobs`' arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct BackpressuredArgs {
    /// The time to look at, RFC 3339. Omit for now.
    pub at: Option<String>,
    /// The window averaged over: `5m`, `90s`. Omit for the configured default.
    pub window: Option<String>,
    /// Only series with these labels, e.g. {"namespace": "payments"}.
    #[serde(default)]
    pub label: BTreeMap<String, String>,
}

/// One backpressured job.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct BackpressuredJob {
    pub job_name: String,
    pub job_id: String,
    /// Max over the job's subtasks of the mean backpressured ratio over the window, 0–1.
    pub backpressured_max: f64,
}

/// The jobs backpressured at a time.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct BackpressuredJobs {
    /// RFC 3339.
    pub at: String,
    pub window_seconds: i64,
    /// A job is listed when its backpressured ratio exceeds this.
    pub threshold: f64,
    /// The one PromQL query asked.
    pub query: String,
    /// Most backpressured first; empty when no job is.
    pub jobs: Vec<BackpressuredJob>,
}

/// A number, or a number written as text (clients that pass every argument as a string,
/// such as the MCP inspector's command line): the schema says integer.
#[derive(Deserialize)]
#[serde(untagged)]
enum Lenient {
    Number(i64),
    Text(String),
}

fn number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    match Lenient::deserialize(d)? {
        Lenient::Number(n) => Ok(n),
        Lenient::Text(t) => t.trim().parse().map_err(|_| serde::de::Error::custom(format!("{t:?} is not a number"))),
    }
}

fn some_number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    number(d).map(Some)
}

/// `get_verdict`'s arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct VerdictArgs {
    /// The stored verdict's id, as list_recent_verdicts gives it.
    #[serde(deserialize_with = "number")]
    pub id: i64,
}

/// `list_recent_verdicts`' arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct RecentArgs {
    /// The Flink job: its name as Flink shows it, as the reporter writes it, or its id.
    pub job: String,
    /// How many verdicts, newest first (1–50). Default 10.
    #[serde(default, deserialize_with = "some_number")]
    #[schemars(range(min = 1, max = 50))]
    pub limit: Option<i64>,
}

/// One stored verdict, in brief.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct VerdictBrief {
    /// For get_verdict and explain_vertex.
    pub id: i64,
    /// When culprit stored it, RFC 3339.
    pub stored: String,
    /// The time it is about, RFC 3339.
    pub at: String,
    pub status: String,
    pub finding: String,
    /// The culprit vertex's name; absent when there is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub culprit: Option<String>,
    pub confidence: String,
    pub summary: String,
}

/// A job's recent stored verdicts.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct RecentVerdicts {
    pub job: String,
    /// Newest first; empty when culprit stored none about the job.
    pub verdicts: Vec<VerdictBrief>,
}

/// `explain_vertex`'s arguments: a vertex of a stored verdict, or of a verdict diagnosed
/// now for `job`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ExplainArgs {
    /// The vertex: its name as the verdict's graph shows it (`fraud-score`) or its id.
    pub vertex: String,
    /// A stored verdict's id. Give this or `job`.
    #[serde(default, deserialize_with = "some_number")]
    pub verdict_id: Option<i64>,
    /// Without verdict_id: the job to diagnose now (or at `at`) and explain.
    pub job: Option<String>,
    /// With `job`: the time, RFC 3339. Omit for now.
    pub at: Option<String>,
    /// With `job`: the window (`5m`). Omit for the default.
    pub window: Option<String>,
    /// With `job`: labels that pick one deployment, as for diagnose_job.
    #[serde(default)]
    pub label: BTreeMap<String, String>,
}

fn parse_at(at: Option<&str>) -> Result<Option<i64>, ToolError> {
    at.map(|a| crate::config::parse_time(a).map_err(|e| ToolError::request(format!("`at` {e}")))).transpose()
}

fn parse_window(window: Option<&str>) -> Result<Option<i64>, ToolError> {
    window
        .map(|w| {
            crate::config::parse_window(w).map(|m| m.as_ms()).map_err(|e| ToolError::request(format!("`window` {e}")))
        })
        .transpose()
}

/// Label names as Prometheus allows them and non-empty values; the values are escaped
/// where queries are built.
fn check_labels(labels: &BTreeMap<String, String>) -> Result<(), ToolError> {
    for (k, v) in labels {
        let valid = k.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid || v.is_empty() {
            return Err(ToolError::request(format!(
                "label {k:?}={v:?} is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*) with a value, such as {{\"namespace\": \"flink-us\"}}"
            )));
        }
    }
    Ok(())
}

fn request(
    job: &str,
    at: Option<&str>,
    window: Option<&str>,
    label: &BTreeMap<String, String>,
) -> Result<DiagnosisRequest, ToolError> {
    if job.trim().is_empty() {
        return Err(ToolError::request(
            "`job` is empty: give the job's name or id (list_backpressured_jobs lists them)",
        ));
    }
    check_labels(label)?;
    Ok(DiagnosisRequest {
        job: Some(job.to_string()),
        at_ms: parse_at(at)?,
        window_ms: parse_window(window)?,
        labels: label.clone(),
    })
}

fn verdict_of(stored: &crate::service::store::StoredVerdict) -> Result<Verdict, ToolError> {
    serde_json::from_value(stored.verdict.clone()).map_err(|e| {
        ToolError::internal(format!("stored verdict {} does not read as culprit.verdict/v1: {e}", stored.id))
    })
}

fn brief(stored: &crate::service::store::StoredVerdict) -> Result<VerdictBrief, ToolError> {
    let v = verdict_of(stored)?;
    Ok(VerdictBrief {
        id: stored.id,
        stored: time(stored.created_ms),
        at: v.at,
        status: v.status.as_str().into(),
        finding: v.finding.as_str().into(),
        culprit: v.culprit.map(|c| c.vertex_name),
        confidence: v.confidence.as_str().into(),
        summary: v.summary,
    })
}

#[tool_router]
impl CulpritTools {
    pub fn new(backend: Arc<Backend>) -> CulpritTools {
        CulpritTools { backend, tool_router: Self::tool_router() }
    }

    /// Diagnose one Flink job's backpressure now (or at `at`): which vertex is the culprit
    /// (busy by itself, not backpressured) and which are only backpressured victims upstream
    /// of it, the finding (what is slow about the culprit: sink, hot_key, slow_instance,
    /// state_backend, checkpoints, headroom, …), the cause with its numbers, the fix, and the
    /// evidence with the PromQL behind each number. Returns a culprit.verdict/v1 verdict. Call
    /// it for a job an alert or list_backpressured_jobs names; a job that is not found comes
    /// back with the closest job names.
    #[tool(annotations(read_only_hint = true, open_world_hint = true))]
    async fn diagnose_job(&self, Parameters(a): Parameters<DiagnoseArgs>) -> Result<Json<Verdict>, ToolError> {
        let request = request(&a.job, a.at.as_deref(), a.window.as_deref(), &a.label)?;
        self.backend.diagnose(&request, a.cluster.as_deref()).await.map(Json)
    }

    /// List the Flink jobs that are backpressured now (or at `at`), most backpressured
    /// first, with one PromQL query: each job's max over its subtasks of the mean
    /// backpressured ratio over the window, above the configured threshold (0.10). Call it
    /// first to see which jobs need a diagnosis; then diagnose_job each. It names jobs, not
    /// culprits: every job listed has victims, its culprit may not be red at all.
    #[tool(annotations(read_only_hint = true, open_world_hint = true))]
    async fn list_backpressured_jobs(
        &self,
        Parameters(a): Parameters<BackpressuredArgs>,
    ) -> Result<Json<BackpressuredJobs>, ToolError> {
        check_labels(&a.label)?;
        let found = self
            .backend
            .backpressured(parse_at(a.at.as_deref())?, parse_window(a.window.as_deref())?, &a.label)
            .await?;
        Ok(Json(BackpressuredJobs {
            at: time(found.at_ms),
            window_seconds: found.window_ms / 1000,
            threshold: found.threshold,
            query: found.query,
            jobs: found
                .jobs
                .into_iter()
                .map(|j| BackpressuredJob { job_name: j.job_name, job_id: j.job_id, backpressured_max: j.ratio })
                .collect(),
        }))
    }

    /// Fetch one verdict culprit stored (when an alert fired, it diagnosed the job and kept
    /// the verdict), by its id from list_recent_verdicts. Returns a culprit.verdict/v1
    /// verdict, as it was then.
    #[tool(annotations(read_only_hint = true))]
    async fn get_verdict(&self, Parameters(a): Parameters<VerdictArgs>) -> Result<Json<Verdict>, ToolError> {
        let stored = self.backend.stored(a.id).await?;
        verdict_of(&stored).map(Json)
    }

    /// List a job's recent stored verdicts, newest first, in brief (id, time, status,
    /// finding, culprit, summary): what culprit said about the job when its alerts fired,
    /// to see whether the culprit or the finding changed. get_verdict gives one in full.
    #[tool(annotations(read_only_hint = true))]
    async fn list_recent_verdicts(
        &self,
        Parameters(a): Parameters<RecentArgs>,
    ) -> Result<Json<RecentVerdicts>, ToolError> {
        let limit = a.limit.unwrap_or(10);
        if !(1..=MAX_RECENT).contains(&limit) {
            return Err(ToolError::request(format!("`limit` is a number from 1 to {MAX_RECENT}")));
        }
        let stored = self.backend.recent(&a.job, limit as usize).await?;
        let verdicts = stored.iter().map(brief).collect::<Result<Vec<_>, _>>()?;
        Ok(Json(RecentVerdicts { job: a.job, verdicts }))
    }

    /// Explain one vertex of a verdict: its numbers (parallelism, busy, backpressured and
    /// idle ratios), whether it is the culprit or a backpressured victim and why, the
    /// vertices around it, the runbook steps that judged it, and every number about it with
    /// its threshold and the PromQL that gives it. Give a stored verdict's `verdict_id`, or
    /// a `job` to diagnose now. Call it when asked why a vertex is (or is not) to blame.
    #[tool(annotations(read_only_hint = true, open_world_hint = true))]
    async fn explain_vertex(
        &self,
        Parameters(a): Parameters<ExplainArgs>,
    ) -> Result<Json<VertexExplanation>, ToolError> {
        let verdict = match (a.verdict_id, &a.job) {
            (Some(id), _) => verdict_of(&self.backend.stored(id).await?)?,
            (None, Some(job)) => {
                let request = request(job, a.at.as_deref(), a.window.as_deref(), &a.label)?;
                self.backend.diagnose(&request, None).await?
            }
            (None, None) => {
                return Err(ToolError::request("give `verdict_id` (a stored verdict) or `job` (diagnosed now)"));
            }
        };
        explain(&verdict, &a.vertex, a.verdict_id).map(Json).ok_or_else(|| {
            ToolError::not_found(format!(
                "the verdict of {} has no vertex named or with id `{}`; its vertices: {}",
                verdict.job.name,
                a.vertex,
                vertex_names(&verdict).join(", ")
            ))
        })
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for CulpritTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("culprit", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!("{INSTRUCTIONS} Metrics come from {}.", self.backend.describe()))
    }
}
