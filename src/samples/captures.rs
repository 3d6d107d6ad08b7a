//! `culprit demo`: real Flink recordings (2.3, and two of 1.x) bundled into the binary,
//! replayed offline.
//!
//! Each capture is one run of a real cluster with one operator made slow on purpose
//! (see `examples/captures/README.md`): the recording Prometheus exported, the job plan
//! and the checkpoint configuration from Flink REST (and, for a job that fails, its
//! exception history; for one, the culprit vertex's flame graph, which the demo shows as the
//! verdict's profile).

use crate::collect::collector::{CollectInput, collect};
use crate::collect::store::SeriesStore;
use crate::config::Config;
use crate::diagnose::diagnose;
use crate::model::catalog::MetricCatalog;
use crate::model::failover::JobExceptions;
use crate::model::graph::JobGraph;
use crate::model::request::DiagnosisRequest;
use crate::model::rescales::RescaleHistory;
use crate::model::snapshot::CheckpointConfig;
use crate::model::verdict::Verdict;

/// One bundled capture.
pub struct Capture {
    /// Folder name under `examples/captures/`.
    pub name: &'static str,
    /// What happens in it.
    pub what: &'static str,
    /// `recording.om.gz`: OpenMetrics with timestamps, gzip.
    pub recording: &'static [u8],
    /// `plan.json`: Flink REST `GET /jobs/:id/plan`.
    pub plan: &'static str,
    /// `rest/checkpoints-config.json`: Flink REST `GET /jobs/:id/checkpoints/config`.
    pub checkpoint_config: &'static str,
    /// `rest/exceptions.json`: Flink REST `GET /jobs/:id/exceptions`, for the captures
    /// whose story is a failure.
    pub exceptions: Option<&'static str>,
    /// `rest/rescales-history.json`: Flink REST `GET /jobs/:id/rescales/history`, for the
    /// captures of a job on the Adaptive scheduler that rescaled.
    pub rescales: Option<&'static str>,
    /// `rest/vertex-*-flamegraph-off_cpu.json`: the culprit vertex's off-CPU flame graph,
    /// when the run recorded one; the demo shows its profile.
    pub flamegraph: Option<&'static str>,
}

macro_rules! capture {
    ($name:literal, $what:literal, flamegraph: $file:literal) => {
        Capture {
            flamegraph: Some(include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/examples/captures/",
                $name,
                "/rest/",
                $file
            ))),
            ..capture!($name, $what)
        }
    };
    ($name:literal, $what:literal) => {
        Capture {
            flamegraph: None,
            name: $name,
            what: $what,
            recording: include_bytes!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/examples/captures/",
                $name,
                "/recording.om.gz"
            )),
            plan: include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/captures/", $name, "/plan.json")),
            checkpoint_config: include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/examples/captures/",
                $name,
                "/rest/checkpoints-config.json"
            )),
            exceptions: None,
            rescales: None,
        }
    };
    ($name:literal, $what:literal, with_rescales) => {
        Capture {
            rescales: Some(include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/examples/captures/",
                $name,
                "/rest/rescales-history.json"
            ))),
            ..capture!($name, $what)
        }
    };
    ($name:literal, $what:literal, with_exceptions) => {
        Capture {
            exceptions: Some(include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/examples/captures/",
                $name,
                "/rest/exceptions.json"
            ))),
            ..capture!($name, $what)
        }
    };
}

/// The bundled captures, in the order the demo shows them.
pub static CAPTURES: &[Capture] = &[
    capture!("slow-sink", "the sink writes slowly"),
    capture!("hard-backpressure", "a fan-out operator feeds a slow sink"),
    capture!("slow-middle", "a stateless map in the middle is slow on every subtask"),
    capture!("checkpoint-slowdown", "healthy for 3 min, then a middle map slows; checkpoints grow"),
    capture!("chained-culprit", "the slow operator sits inside the chain enrich -> score"),
    capture!(
        "chained-culprit-flamegraph",
        "as chained-culprit, with the chain's recorded off-CPU flame graph as the verdict's profile",
        flamegraph: "vertex-1-enrich_-_score-flamegraph-off_cpu.json"
    ),
    capture!("hot-key", "~40% of records share one key of a keyed operator"),
    capture!("slow-instance", "keys are even, but one subtask of a keyed operator is slow"),
    capture!("rocksdb-stall", "a RocksDB-backed keyed operator whose backend stalls writes"),
    capture!("rocksdb-bound", "a RocksDB-backed keyed operator at capacity, backend healthy"),
    capture!("rocksdb", "a healthy RocksDB job"),
    capture!("healthy", "a healthy job"),
    capture!("failover", "validate throws every ~30 s; the job fails over and restarts", with_exceptions),
    capture!(
        "adaptive-rescale",
        "a slow sink on the Adaptive scheduler, cut from 4 to 2 subtasks by new resource requirements",
        with_rescales
    ),
    capture!("state-growth-long", "13 min of keyed RocksDB state with a new key per record and no TTL"),
    capture!("cpu-quota", "one TaskManager in a 0.2-CPU CFS quota; fraud-score's subtasks on it are slow"),
    capture!(
        "flink-1.18-chained-culprit",
        "Flink 1.18: the slow operator inside a chain; 1.x reports no checkpoint completion time"
    ),
    capture!(
        "flink-1.20-failover",
        "Flink 1.20: validate throws every ~30 s; the same failover as on 2.3, read from 1.20's exception history",
        with_exceptions
    ),
    capture!(
        "flink-1.20-slow-sink-legacy-source",
        "Flink 1.20: a slow sink behind a legacy SourceFunction, whose busy time is NaN"
    ),
];

/// Diagnoses a bundled capture with the default configuration.
pub fn verdict(capture: &Capture) -> Result<Verdict, String> {
    verdict_for(capture, &recording(capture)?, &DiagnosisRequest::default(), &Config::default())
        .map_err(|e| e.to_string())
}

/// The capture's recording, read into a store (for [`verdict_for`] and queries of its own).
pub fn recording(capture: &Capture) -> Result<SeriesStore, String> {
    let mut store = SeriesStore::new();
    store.read_from(capture.recording, capture.name, None).map_err(|e| e.to_string())?;
    store.finish();
    Ok(store)
}

/// Why a capture gave no verdict: the request does not fit it (no such job, no data at
/// that time), or the bundled files do not read (a bug of the build).
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error(transparent)]
    Collect(#[from] crate::collect::collector::CollectError),
    #[error("{0}")]
    Bundle(String),
}

/// Diagnoses a bundled capture (its recording in `store`, from [`recording`]) as `request`
/// asks (job, time, window, labels), with `config`'s thresholds: what `culprit mcp
/// --capture` answers.
pub fn verdict_for(
    capture: &Capture,
    store: &SeriesStore,
    request: &DiagnosisRequest,
    config: &Config,
) -> Result<Verdict, CaptureError> {
    let graph = JobGraph::from_plan_json(capture.plan).map_err(|e| CaptureError::Bundle(e.to_string()))?;
    let snapshot = crate::collect::block_on(collect(
        store,
        CollectInput {
            request,
            graph: Some(graph),
            checkpoint_config: CheckpointConfig::from_rest_json(capture.checkpoint_config),
            exceptions: capture.exceptions.and_then(|t| JobExceptions::from_rest_json(t).ok()),
            rescales: capture.rescales.and_then(|t| RescaleHistory::from_rest_json(t).ok()),
            config,
            catalog: &MetricCatalog::default(),
        },
    ))?;
    let mut verdict = crate::render::words::verdict(&diagnose(&snapshot, &config.diagnosis));
    if let (Some(text), Some(culprit)) = (capture.flamegraph, crate::model::flamegraph::wants_profile(&verdict)) {
        use crate::model::flamegraph::{ProfileKind, parse, profile};
        let graph = parse(text).map_err(CaptureError::Bundle)?;
        verdict.profile = profile(&culprit.clone(), ProfileKind::OffCpu, &graph, crate::model::verdict::rfc3339);
    }
    Ok(verdict)
}
