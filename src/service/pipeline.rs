//! The one place that wires collection to live systems: Prometheus for metrics, Flink REST
//! for the job graph and checkpoint configuration, then the pure diagnosis.
//!
//! Failures of Flink REST are outcomes, not errors: without a plan the diagnosis runs
//! graph-free (or with a plan file from configuration) and the verdict says why. Only a
//! missing or unreachable Prometheus, or a job nobody knows, stops a diagnosis.

use crate::model::failover::JobExceptions;
use crate::model::rescales::RescaleHistory;
use std::collections::BTreeMap;

use crate::collect::collector::{CollectError, CollectInput, JobLookup, MetricSource, Resolved, collect_after};
use crate::collect::flink_rest::{FlinkRest, pick_job};
use crate::collect::prometheus::{Attempts, PromSource, Prometheus};
use crate::collect::rest_load::RestLoads;
use crate::config::{CLUSTER_CHOICE, Config};
use crate::diagnose::diagnose;
use crate::model::graph::{JobGraph, sanitize_label_value};
use crate::model::request::DiagnosisRequest;
use crate::model::snapshot::{CheckpointConfig, Missing, MissingWhy};
use crate::model::verdict::Verdict;

/// Why a live diagnosis could not run. One sentence each, without credentials.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error("no Prometheus is configured: add a [prometheus] section with its url")]
    NoPrometheus,
    #[error("{0}")]
    Setup(String),
    #[error(transparent)]
    Collect(#[from] CollectError),
    #[error("no Flink cluster named `{0}` is configured ([[flink.clusters]] names: {1})")]
    UnknownCluster(String, String),
}

/// A Flink REST client: a configured cluster's, or one built for one job's labels.
pub enum Rest<'a> {
    Shared(&'a FlinkRest),
    Built(Box<FlinkRest>),
}

impl std::ops::Deref for Rest<'_> {
    type Target = FlinkRest;
    fn deref(&self) -> &FlinkRest {
        match self {
            Rest::Shared(r) => r,
            Rest::Built(r) => r,
        }
    }
}

/// What a caller knows better than Flink REST (files given on the command line).
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub graph: Option<JobGraph>,
    pub checkpoint_config: Option<CheckpointConfig>,
    pub exceptions: Option<JobExceptions>,
    pub rescales: Option<RescaleHistory>,
}

/// What Flink REST told about the job before its metrics are read ([`Live::job_context`]):
/// each part `None` when it did not answer, and notes that say why.
#[derive(Debug, Default)]
pub struct JobContext {
    /// The exact job id of the job the request named.
    pub job_id: Option<String>,
    pub graph: Option<JobGraph>,
    pub checkpoint_config: Option<CheckpointConfig>,
    pub exceptions: Option<JobExceptions>,
    /// Flink 2.3's rescale history (`/jobs/:id/rescales/history`); `None` when Flink has
    /// none for the job (not the Adaptive scheduler, the history off, an older Flink).
    pub rescales: Option<RescaleHistory>,
    pub notes: Vec<String>,
}

/// Live backends, built once from the configuration.
pub struct Live {
    config: Config,
    /// Every configured secret: no verdict carries one (a backend's warning or error
    /// quoted in a note is redacted again here).
    redactor: crate::model::secret::Redactor,
    prometheus: Option<Prometheus>,
    clusters: Vec<(String, FlinkRest)>,
    /// The slots of every JobManager (`flink.max_concurrency`), shared by the clusters'
    /// clients and those built per job.
    rest_loads: RestLoads,
}

impl Live {
    /// Clients for the configured backends; credentials are resolved now.
    pub fn new(config: Config) -> Result<Live, PipelineError> {
        let prometheus = match &config.prometheus {
            Some(p) => Some(Prometheus::new(p).map_err(|e| PipelineError::Setup(e.message))?),
            None => None,
        };
        let mut clusters = Vec::new();
        let rest_loads = RestLoads::new(config.flink.max_concurrency);
        // A cluster with `rest_url_template` gets its client per job (`rest_for`).
        for c in config.flink.clusters.iter().filter(|c| c.rest_url_template.is_none()) {
            let rest = FlinkRest::sharing(c, &config.flink, &c.rest_url, &rest_loads)
                .map_err(|e| PipelineError::Setup(e.to_string()))?;
            clusters.push((c.name.clone(), rest));
        }
        Ok(Live { redactor: config.redactor(), config, prometheus, clusters, rest_loads })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Says once per backend, through `announce`, when retrying it first starts (the CLI
    /// prints it on stderr).
    pub fn announce_retries(&mut self, announce: crate::collect::prometheus::Announce) {
        if let Some(p) = &mut self.prometheus {
            p.announce_retries(announce.clone());
        }
        for (_, rest) in &mut self.clusters {
            rest.announce_retries(announce.clone());
        }
    }

    /// The Prometheus client, when configured.
    pub fn prometheus(&self) -> Option<&Prometheus> {
        self.prometheus.as_ref()
    }

    /// Each Flink cluster asked so far: its REST requests in flight and waiting now, the
    /// most in flight at one of its JobManagers at once, and `flink.max_concurrency`.
    pub fn flink_load(&self) -> Vec<(String, crate::collect::prometheus::LoadNow)> {
        self.rest_loads.now()
    }

    /// The Flink REST client for a request with these labels (`cluster` names one), when
    /// the chosen cluster has a fixed `rest_url`.
    pub fn flink_for(&self, labels: &BTreeMap<String, String>) -> Option<&FlinkRest> {
        let cluster = self.config.flink.cluster_for(labels)?;
        self.clusters.iter().find(|(name, _)| *name == cluster.name).map(|(_, r)| r)
    }

    /// The Flink REST client for a request whose `labels` choose the cluster: the
    /// cluster's own, or, for a cluster with `rest_url_template`, one at the URL the job's
    /// labels (`job_labels`) fill in. `Err`: why no URL could be built, one sentence.
    pub fn rest_for(
        &self,
        labels: &BTreeMap<String, String>,
        job_labels: &BTreeMap<String, String>,
    ) -> Option<Result<Rest<'_>, String>> {
        let cluster = self.config.flink.cluster_for(labels)?;
        let Some(template) = &cluster.rest_url_template else {
            return self.flink_for(labels).map(|r| Ok(Rest::Shared(r)));
        };
        let refused = |e: String| {
            format!("Flink cluster {}: no REST URL for this job ({e}); diagnosing without Flink REST", cluster.name)
        };
        Some(
            crate::model::rest_template::fill(
                template,
                &cluster.template_labels,
                job_labels,
                &cluster.allowed_host_suffixes,
            )
            .map_err(refused)
            .and_then(|url| {
                FlinkRest::sharing(cluster, &self.config.flink, &url, &self.rest_loads)
                    .map(|r| Rest::Built(Box::new(r)))
                    .map_err(|e| e.to_string())
            }),
        )
    }

    /// `labels` completed for a cluster with `rest_url_template`: by the request's
    /// deployment labels, then by the labels of the job's JobManager series in Prometheus,
    /// when the alert lacks one the template needs. The alert's own labels win.
    pub fn job_labels(
        &self,
        lookup: &JobLookup,
        request: &DiagnosisRequest,
        labels: &BTreeMap<String, String>,
    ) -> BTreeMap<String, String> {
        let mut out = labels.clone();
        let Some(cluster) = self.config.flink.cluster_for(labels) else { return out };
        let Some(template) = &cluster.rest_url_template else { return out };
        for (k, v) in &request.labels {
            out.entry(k.clone()).or_insert_with(|| v.clone());
        }
        let placeholders = crate::model::rest_template::placeholders(template).unwrap_or_default();
        let complete = placeholders.iter().all(|p| {
            crate::model::rest_template::label_for(p, &cluster.template_labels).is_some_and(|l| out.contains_key(l))
        });
        let Some(wanted) = request.job.as_deref().filter(|_| !complete) else { return out };
        if let Ok(resolved) = lookup.resolve(Some(wanted), None) {
            for (k, v) in resolved.run.labels {
                out.entry(k).or_insert(v);
            }
        }
        out
    }

    /// The job lookup at `at_ms` (every job's runs), asked once per diagnosis and handed to
    /// [`Self::job_labels`], [`Self::configured_plan`] and the collector.
    pub async fn look_up<S: MetricSource>(&self, source: &S, at_ms: i64) -> JobLookup {
        let d = &self.config.diagnosis;
        JobLookup::find(source, &self.config.metrics, at_ms, d.trend_lookback.as_ms(), d.step.as_ms()).await
    }

    /// The metric names to read the store with, the job lookup made with them, and a note
    /// when they are not the configured ones. Under `[metrics] scheme = "auto"`, when the
    /// configured names find no job, one query asks which scheme's names the store holds
    /// ([`crate::collect::naming::lookup_query`]) and the lookup is made again with those.
    async fn naming_and_lookup<S: MetricSource>(
        &self,
        source: &S,
        at_ms: i64,
    ) -> (crate::model::catalog::MetricCatalog, JobLookup, Option<String>) {
        use crate::collect::naming::{Detection, detect_in_answer, lookup_query};
        let configured = &self.config.metrics;
        let d = &self.config.diagnosis;
        let find = |catalog| JobLookup::find(source, catalog, at_ms, d.trend_lookback.as_ms(), d.step.as_ms());
        let lookup = find(configured).await;
        let found_none = matches!(&lookup.runs, Err(CollectError::NoJobs { .. }));
        if configured.scheme != crate::model::naming::NamingScheme::Auto || !found_none {
            return (configured.clone(), lookup, None);
        }
        let query = lookup_query(configured, at_ms, d.trend_lookback.as_ms(), d.step.as_ms());
        match source.run(std::slice::from_ref(&query)).await.pop() {
            Some(Ok(answer)) => match detect_in_answer(&answer, configured) {
                Detection::Other { catalog, note } => {
                    let lookup = find(&catalog).await;
                    (*catalog, lookup, Some(note))
                }
                _ => (configured.clone(), lookup, None),
            },
            _ => (configured.clone(), lookup, None),
        }
    }

    /// Graph, checkpoint configuration, exception history and the exact job id from Flink
    /// REST, as far as it answers; notes say what failed.
    /// `labels` choose the cluster, `job_labels` fill its `rest_url_template`.
    pub async fn job_context(
        &self,
        wanted: Option<&str>,
        labels: &BTreeMap<String, String>,
        job_labels: &BTreeMap<String, String>,
    ) -> JobContext {
        let mut cx = JobContext::default();
        let rest = match self.rest_for(labels, job_labels) {
            Some(Ok(rest)) => Some(rest),
            Some(Err(why)) => {
                cx.notes.push(why);
                return cx;
            }
            None => None,
        };
        let JobContext { job_id, graph, checkpoint_config, exceptions, rescales, notes } = &mut cx;
        match (rest.as_deref(), wanted) {
            (Some(rest), Some(wanted)) => {
                match rest.jobs().await {
                    Ok(jobs) => match pick_job(&jobs, wanted) {
                        Some(job) => {
                            *job_id = Some(job.id.clone());
                            if jobs
                                .iter()
                                .filter(|j| sanitize_label_value(&j.name) == sanitize_label_value(&job.name))
                                .count()
                                > 1
                            {
                                notes.push(format!(
                                    "several runs of {} on Flink cluster {}; using job_id {} ({})",
                                    job.name,
                                    rest.cluster(),
                                    job.id,
                                    job.state
                                ));
                            }
                        }
                        None => {
                            notes.push(format!("Flink cluster {} has no job named or with id {wanted}", rest.cluster()))
                        }
                    },
                    Err(e) => notes.push(format!("Flink REST did not list the jobs: {e}")),
                }
                if let Some(id) = job_id.as_deref() {
                    let (plan, config, history, rescaled) = futures::join!(
                        rest.plan(id),
                        rest.checkpoint_config(id),
                        rest.exceptions(id),
                        rest.rescales(id)
                    );
                    match plan {
                        Ok(g) => *graph = Some(g),
                        Err(e) => notes.push(format!("no job graph from Flink REST: {e}")),
                    }
                    match config {
                        Ok(c) => *checkpoint_config = Some(c),
                        Err(e) => notes.push(format!("no checkpoint configuration from Flink REST: {e}")),
                    }
                    match history {
                        Ok(x) => *exceptions = Some(x),
                        Err(e) => notes.push(format!("no exception history from Flink REST: {e}")),
                    }
                    match rescaled {
                        Ok(r) => *rescales = Some(r),
                        // Flink answers 404 for a job without it: not the Adaptive scheduler,
                        // web.adaptive-scheduler.rescale-history.size 0, or before 2.3. That
                        // is most jobs: no note in their verdicts, only the log says it.
                        Err(e) if e.status() == Some(404) => {
                            tracing::debug!(error = %e, "no rescale history from Flink REST")
                        }
                        Err(e) => notes.push(format!("no rescale history from Flink REST: {e}")),
                    }
                }
            }
            (None, _) if !self.config.flink.clusters.is_empty() => {
                notes.push("no Flink cluster matches this request's labels; diagnosing without Flink REST".into())
            }
            _ => {}
        }
        cx
    }

    /// Notes about how the request's labels chose (or did not choose) a Flink cluster,
    /// beyond what [`Self::job_context`] says: a cluster label naming no configured cluster.
    fn cluster_notes(&self, labels: &BTreeMap<String, String>) -> Vec<String> {
        let flink = &self.config.flink;
        match flink.cluster_label.as_ref().and_then(|l| labels.get(l).map(|v| (l, v))) {
            Some((label, value)) if !flink.clusters.is_empty() && !flink.clusters.iter().any(|c| c.name == *value) => {
                vec![format!(
                    "the alert's {label}=\"{value}\" names no configured Flink cluster ({}); chose by `match` instead",
                    flink.clusters.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", ")
                )]
            }
            _ => Vec::new(),
        }
    }

    /// The configured plan (`[flink.plans]`) of the run the request names: [`configured_plan`].
    pub fn configured_plan(&self, lookup: &JobLookup, wanted: &str) -> Option<ConfiguredPlan> {
        configured_plan(&self.config.flink.plans, lookup, Some(wanted))
    }

    /// Fails when the request chooses a cluster by name (the API's `cluster=`, the CLI's
    /// `--cluster`) that is not configured. An alert's labels never fail a diagnosis.
    pub fn check_cluster(&self, labels: &BTreeMap<String, String>) -> Result<(), PipelineError> {
        match labels.get(CLUSTER_CHOICE) {
            Some(name) if !self.config.flink.clusters.iter().any(|c| &c.name == name) => {
                Err(PipelineError::UnknownCluster(
                    name.clone(),
                    match self.config.flink.clusters.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", ") {
                        names if names.is_empty() => "none".into(),
                        names => names,
                    },
                ))
            }
            _ => Ok(()),
        }
    }

    /// Diagnoses one job live. `labels` choose the Flink cluster; `now_ms` is the time the
    /// request's "now" stands for.
    pub async fn diagnose(
        &self,
        request: &DiagnosisRequest,
        labels: &BTreeMap<String, String>,
        now_ms: i64,
    ) -> Result<Verdict, PipelineError> {
        self.diagnose_with(request, labels, now_ms, Overrides::default()).await
    }

    /// [`Self::diagnose`] with a job graph or checkpoint configuration given by the caller,
    /// which win over Flink REST's.
    pub async fn diagnose_with(
        &self,
        request: &DiagnosisRequest,
        labels: &BTreeMap<String, String>,
        now_ms: i64,
        overrides: Overrides,
    ) -> Result<Verdict, PipelineError> {
        self.diagnosis_with(request, labels, now_ms, overrides, Attempts::UntilDeadline).await.map(|d| d.verdict)
    }

    /// One attempt at a diagnosis for a caller that retries whole diagnoses (the service's
    /// worker): each Prometheus request is tried once ([`Attempts::Once`]), so that a
    /// failure is retried in one place, and what was missing and why comes beside the
    /// verdict (the caller decides on the reasons whether to diagnose again).
    pub async fn diagnosis(
        &self,
        request: &DiagnosisRequest,
        labels: &BTreeMap<String, String>,
        now_ms: i64,
    ) -> Result<Diagnosis, PipelineError> {
        self.diagnosis_with(request, labels, now_ms, Overrides::default(), Attempts::Once).await
    }

    async fn diagnosis_with(
        &self,
        request: &DiagnosisRequest,
        labels: &BTreeMap<String, String>,
        now_ms: i64,
        overrides: Overrides,
        attempts: Attempts,
    ) -> Result<Diagnosis, PipelineError> {
        let prometheus = self.prometheus.as_ref().ok_or(PipelineError::NoPrometheus)?;
        self.check_cluster(labels)?;
        let source = PromSource::new(prometheus, now_ms).attempts(attempts);
        // The job's runs, looked up once: for the REST URL's labels, the configured plan
        // and the collector's round 1; under `[metrics] scheme = "auto"` with the scheme
        // the store holds.
        let (catalog, lookup, naming_note) = self.naming_and_lookup(&source, request.at_ms.unwrap_or(now_ms)).await;
        let job_labels = self.job_labels(&lookup, request, labels);
        // A run that stopped while a newer run of the job took over (a redeploy under a new
        // job id): Flink REST is asked about the run that took over, whose plan is current.
        let plan_id = overrides.graph.as_ref().and_then(|g| g.job_id.as_deref());
        let (wanted, replaced) = match lookup.resolve(request.job.as_deref(), plan_id) {
            Ok(Resolved { run, replaced: Some(_), .. }) => (Some(run.id), true),
            _ => (request.job.clone(), false),
        };
        let JobContext { job_id, graph, checkpoint_config, exceptions, rescales, mut notes } =
            self.job_context(wanted.as_deref(), labels, &job_labels).await;
        notes.extend(self.cluster_notes(labels));
        notes.extend(naming_note);
        let plan_given = overrides.graph.is_some();
        let mut graph = overrides.graph.or(graph);
        let checkpoint_config = overrides.checkpoint_config.or(checkpoint_config);
        let exceptions = overrides.exceptions.or(exceptions);
        let rescales = overrides.rescales.or(rescales);
        // The request keeps naming the run asked about when another took over from it: the
        // collector finds the same successor and the verdict says which replaced which.
        let job = if replaced { request.job.clone() } else { job_id.or_else(|| request.job.clone()) };
        let mut request = DiagnosisRequest { job, ..request.clone() };
        if graph.is_none()
            && let Some(wanted) = request.job.clone()
            && let Some((run_id, plan, plan_notes)) = self.configured_plan(&lookup, &wanted)
        {
            notes.extend(plan_notes);
            graph = plan.ok();
            request.job = run_id.or(request.job);
        }
        let mut snapshot = collect_after(
            &source,
            CollectInput {
                request: &request,
                graph,
                checkpoint_config,
                exceptions,
                rescales,
                config: &self.config,
                catalog: &catalog,
            },
            Some(lookup),
        )
        .await?;
        if let (true, Some(why)) = (plan_given, &snapshot.plan_mismatch) {
            return Err(PipelineError::Setup(why.clone()));
        }
        notes.extend(source.warnings().into_iter().map(|w| format!("Prometheus warning: {w}")));
        snapshot.notes.extend(notes);
        let verdict = crate::render::words::verdict(&diagnose(&snapshot, &self.config.diagnosis));
        let verdict = self.with_profile(verdict, labels, &job_labels).await;
        let verdict = redact_verdict(&self.redactor, verdict);
        let missing = snapshot.missing.into_iter().map(|m| redact_missing(&self.redactor, m)).collect();
        Ok(Diagnosis { verdict, missing })
    }
}

impl Live {
    /// The verdict with the profile of its culprit's vertex
    /// ([`crate::model::flamegraph::wants_profile`]) when `[flink] flamegraph` is on: one
    /// flame graph (`type=full`) asked of the job's cluster within
    /// `flink.flamegraph_deadline` ([`FlinkRest::flamegraph_within`]). Without one (no
    /// cluster, flame graphs disabled, no samples in time) the verdict is unchanged but for
    /// a note saying why; never an error.
    async fn with_profile(
        &self,
        mut verdict: Verdict,
        labels: &BTreeMap<String, String>,
        job_labels: &BTreeMap<String, String>,
    ) -> Verdict {
        use crate::model::flamegraph::{ProfileKind, profile, wants_profile};
        if !self.config.flink.flamegraph {
            return verdict;
        }
        let Some(culprit) = wants_profile(&verdict) else { return verdict };
        let culprit = culprit.clone();
        let Some(Ok(rest)) = self.rest_for(labels, job_labels) else {
            verdict.notes.push("no profile of the culprit's vertex: no Flink REST for this job".into());
            return verdict;
        };
        let within = std::time::Duration::from_millis(self.config.flink.flamegraph_deadline.as_ms().max(0) as u64);
        match rest.flamegraph_within(&verdict.job.id, &culprit.vertex_id, ProfileKind::Full, within).await {
            Ok(graph) => verdict.profile = profile(&culprit, ProfileKind::Full, &graph, crate::model::verdict::rfc3339),
            Err(why) => verdict.notes.push(format!("no profile of the culprit's vertex: {why}")),
        }
        verdict
    }
}

/// What [`configured_plan`] found: the run's id to pin the request to (none when the run
/// named was replaced), the plan or why it is unusable, and notes.
pub type ConfiguredPlan = (Option<String>, Result<JobGraph, String>, Vec<String>);

/// The configured plan (`[flink.plans]`) of the run a request names, however it names the
/// job (Flink's name, the reporter's, or the id; `None`: the only job there is): the run is
/// resolved from the metrics first (as a diagnosis without a plan would choose it: the
/// given id, else the newest run of the name, or the run that took over from a stopped
/// one), then its plan is found by [`plan_key`]. So a plan never chooses the run (a plan
/// of an older run is used only when its vertices are those of the diagnosed run; the
/// collector checks). `Some` with the run's id to pin the request to (none when the run
/// named stopped and another took over: the request keeps naming it, so that the verdict
/// says so), the plan, and notes; `None` when no plan is configured. A configured plan
/// that is not used says why in the notes.
pub fn configured_plan(
    plans: &BTreeMap<String, std::path::PathBuf>,
    lookup: &JobLookup,
    wanted: Option<&str>,
) -> Option<ConfiguredPlan> {
    if plans.is_empty() {
        return None;
    }
    let Resolved { run, mut notes, replaced } = lookup.resolve(wanted, None).ok()?;
    let pin = replaced.is_none().then(|| run.id.clone());
    // Older runs of the job (same name): a plan kept under the id of the run an alert
    // named is theirs.
    let older: Vec<String> = match &lookup.runs {
        Ok((runs, _)) => runs
            .iter()
            .filter(|r| r.id != run.id && !r.name_label.is_empty() && r.name_label == run.name_label)
            .map(|r| r.id.clone())
            .collect(),
        Err(_) => Vec::new(),
    };
    let Some((name, path)) = plan_key(plans, &run, wanted, &older) else {
        let keys: Vec<&str> = plans.keys().map(String::as_str).collect();
        notes.push(format!(
            "no configured plan [flink.plans] is for job {} (job_id {}): the keys are {}; a key is the job's name as Flink shows it, as the reporter writes it, or its job id",
            run.name_label,
            run.id,
            crate::render::words::numbers::limited_list(&keys.iter().map(|k| format!("\"{k}\"")).collect::<Vec<_>>(), 5)
        ));
        return Some((pin, Err("no configured plan for this job".into()), notes));
    };
    // Notes are posted: they name the plan by its key, never the server's file path (the
    // log has it).
    let graph = std::fs::read_to_string(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => "its file does not exist".to_string(),
            std::io::ErrorKind::PermissionDenied => "its file cannot be read (permission denied)".to_string(),
            kind => format!("its file cannot be read ({kind})"),
        })
        .and_then(|t| JobGraph::from_plan_json(&t).map_err(|e| e.to_string()))
        .map_err(|e| {
            tracing::warn!(plan = %name, path = %path.display(), error = %e, "the configured plan is unusable");
            format!("the configured plan [flink.plans] \"{name}\" is unusable: {e}")
        });
    match &graph {
        Ok(_) => notes.push(format!("read the configured plan [flink.plans] \"{name}\"")),
        Err(e) => notes.push(e.clone()),
    }
    Some((pin, graph, notes))
}

/// The `[flink.plans]` entry of `run`: a key equal to its job id, to its `job_name` label
/// or to the name the request gave; else one equal to the id of an `older` run of the
/// job; else a key equal to its name once both pass the
/// reporter's default label filter (characters outside `[A-Za-z0-9:_]` become `_`, as
/// Flink's `AbstractPrometheusReporter` writes them). So `orders enricher.v2` finds the
/// job whether the reporter filters label values (`orders_enricher_v2`, the default) or
/// keeps them (`filterLabelValueCharacters: false`: spaces, dots, quotes and CJK
/// characters as Flink shows them).
pub fn plan_key<'a>(
    plans: &'a BTreeMap<String, std::path::PathBuf>,
    run: &crate::collect::collector::JobRun,
    wanted: Option<&str>,
    older: &[String],
) -> Option<(&'a String, &'a std::path::PathBuf)> {
    let exact = |k: &str| k == run.id || (!run.name_label.is_empty() && k == run.name_label) || Some(k) == wanted;
    plans
        .iter()
        .find(|(k, _)| exact(k))
        .or_else(|| plans.iter().find(|(k, _)| older.iter().any(|id| id == *k)))
        .or_else(|| {
            plans.iter().find(|(k, _)| !run.name_label.is_empty() && crate::model::graph::same_name(k, &run.name_label))
        })
}

/// A live diagnosis: the verdict, and the snapshot's missing signals with their reasons
/// (redacted as the verdict is), for decisions that must not read the verdict's words.
#[derive(Debug, Clone)]
pub struct Diagnosis {
    pub verdict: Verdict,
    pub missing: Vec<Missing>,
}

/// A missing signal with every form of every secret removed from its text (a failed
/// query's error quotes what the backend said).
fn redact_missing(redactor: &crate::model::secret::Redactor, mut m: Missing) -> Missing {
    if redactor.is_empty() {
        return m;
    }
    m.metric = redactor.redact(&m.metric);
    match &mut m.why {
        MissingWhy::QueryFailed { error, .. } => *error = redactor.redact(error),
        MissingWhy::Said { detail } => *detail = redactor.redact(detail),
        _ => {}
    }
    m
}

/// The verdict with every form of every secret removed from its text (notes and missing
/// entries quote what backends said).
pub fn redact_verdict(redactor: &crate::model::secret::Redactor, verdict: Verdict) -> Verdict {
    if redactor.is_empty() {
        return verdict;
    }
    let json = serde_json::to_string(&verdict).expect("a verdict serializes");
    let redacted = redactor.redact(&json);
    if redacted == json {
        return verdict;
    }
    // A JSON-escaped form is replaced by `[REDACTED]`, which is JSON-safe: the text stays
    // a verdict.
    serde_json::from_str(&redacted).unwrap_or(verdict)
}
