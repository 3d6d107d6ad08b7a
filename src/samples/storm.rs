//! A storm of synthetic Flink jobs for `benches/storm.sh`: many jobs backpressured at once,
//! most of them by their sinks writing to one system (a shared Elasticsearch cluster
//! slowing down), a few by something else (a hot key, a slow operator, a sink to another
//! system, a source that cannot keep up).
//!
//! Each job is a line of vertices (a source, operators, a sink) whose names read as Flink
//! shows them (`Source: Kafka clicks`, `Sink: Elasticsearch logs-*`), in the metric and
//! label names of Flink's Prometheus reporter, sampled every [`StormJob::interval_ms`].
//! Shapes (vertices, parallelism) and names vary from job to job; the same index always
//! gives the same job.

use std::fmt::Write as _;
use std::io::{self, Write};

use crate::collect::exposition::{MetricType, OpenMetricsWriter};
use crate::model::graph::sanitize_label_value;

/// What holds a storm job back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// Its sink (the last vertex) is busy writing to `system`'s `target` (an index, a
    /// table, a topic); every vertex before it is backpressured.
    Sink { system: &'static str, target: &'static str },
    /// One subtask of a keyed vertex (third in line, behind a `HASH` exchange) takes most
    /// of the records and is busy; the others idle.
    HotKey,
    /// An operator near the middle is busy on every subtask (it needs more parallelism).
    SlowOperator,
    /// Nothing is backpressured: the source is busy and its lag (`pendingRecords`) grows.
    Source,
}

impl Cause {
    /// The verdict's `finding` this cause gives.
    pub fn finding(&self) -> &'static str {
        match self {
            Cause::Sink { .. } => "sink",
            Cause::HotKey => "hot_key",
            Cause::SlowOperator => "headroom",
            Cause::Source => "source",
        }
    }

    /// A short name for reports (`sink:Elasticsearch logs-*`, `hot_key`, ...).
    pub fn label(&self) -> String {
        match self {
            Cause::Sink { system, target } => format!("sink:{system} {target}"),
            other => other.finding().to_string(),
        }
    }
}

/// The system most jobs of a storm write to (the shared cause).
pub const SHARED_SINK: Cause = Cause::Sink { system: "Elasticsearch", target: "logs-*" };

/// The causes of the jobs that do not share it, in turn.
const OTHER_CAUSES: [Cause; 5] = [
    Cause::HotKey,
    Cause::SlowOperator,
    Cause::Sink { system: "JDBC", target: "orders" },
    Cause::Source,
    Cause::Sink { system: "Kafka", target: "payments-enriched" },
];

const TEAMS: [&str; 12] = [
    "checkout",
    "search",
    "fraud",
    "ads",
    "payments",
    "logistics",
    "catalog",
    "billing",
    "growth",
    "ml",
    "risk",
    "iam",
];
const PURPOSES: [&str; 25] = [
    "clickstream-enrich",
    "audit-log-index",
    "session-rollup",
    "access-log-ship",
    "event-normalize",
    "trace-index",
    "order-events",
    "inventory-sync",
    "metrics-rollup",
    "user-activity",
    "error-digest",
    "geo-enrich",
    "dedup-events",
    "price-updates",
    "shipment-track",
    "login-events",
    "feature-log",
    "cart-events",
    "recs-feedback",
    "query-log",
    "cdn-logs",
    "api-gateway-logs",
    "ledger-events",
    "notification-log",
    "consent-events",
];
/// Operator names of the vertices between source and sink, in turn.
const OPERATORS: [&str; 6] = ["Filter", "Map", "enrich", "KeyedProcess", "parse-json", "Flat Map"];
const PARALLELISMS: [usize; 5] = [2, 3, 4, 6, 8];

/// One job of a storm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StormJob {
    /// Its index in the storm (names and ids follow from it).
    pub index: usize,
    pub vertices: usize,
    pub subtasks: usize,
    /// Samples per series, [`StormJob::interval_ms`] apart.
    pub samples: usize,
    /// Time of the first sample, Unix ms.
    pub start_ms: i64,
    /// Scrape interval, ms.
    pub interval_ms: i64,
    pub cause: Cause,
}

/// The jobs of a storm of `n`: all but `max(4, n / 30)` (at most `n`) with the
/// [`SHARED_SINK`] cause, the others spread evenly through the list with the other causes
/// in turn (300 jobs: 290 and 10, jobs 15, 45, ... 285).
pub fn storm(n: usize, start_ms: i64, samples: usize, interval_ms: i64) -> Vec<StormJob> {
    let others = (n / 30).max(4).min(n);
    let stride = n.checked_div(others).unwrap_or(1);
    (0..n)
        .map(|index| {
            let slot = (index % stride == stride / 2).then_some(index / stride).filter(|s| *s < others);
            let cause = slot.map_or(SHARED_SINK, |s| OTHER_CAUSES[s % OTHER_CAUSES.len()].clone());
            StormJob::new(index, cause, start_ms, samples, interval_ms)
        })
        .collect()
}

impl StormJob {
    /// Job `index` with `cause`, its shape chosen by its index (3 to 7 vertices, 2 to 8
    /// subtasks; at least 4 of each for a hot key, which needs a keyed vertex before the
    /// sink and a parallelism that lets one subtask stand out).
    pub fn new(index: usize, cause: Cause, start_ms: i64, samples: usize, interval_ms: i64) -> StormJob {
        let mut vertices = 3 + (index * 7) % 5;
        // Over 25 jobs in a row every vertex count meets every parallelism.
        let mut subtasks = PARALLELISMS[(index + index / 5) % PARALLELISMS.len()];
        if cause == Cause::HotKey {
            vertices = vertices.max(4);
            subtasks = subtasks.max(4);
        }
        StormJob { index, vertices, subtasks, samples, start_ms, interval_ms, cause }
    }

    /// This job's id (32 hex digits).
    pub fn job_id(&self) -> String {
        format!("5707e000{:024x}", self.index as u64 + 1)
    }

    /// This job's name as Flink shows it: `<team>-<purpose>`, unique for the first 300
    /// jobs, then with `-<n>` after it.
    pub fn job_name(&self) -> String {
        let base =
            format!("{}-{}", TEAMS[self.index % TEAMS.len()], PURPOSES[(self.index / TEAMS.len()) % PURPOSES.len()]);
        match self.index / (TEAMS.len() * PURPOSES.len()) {
            0 => base,
            round => format!("{base}-{round}"),
        }
    }

    /// The vertex id of vertex `i` (32 hex digits, like Flink's).
    pub fn vertex_id(&self, i: usize) -> String {
        format!("{:016x}{:016x}", 0x5707_0000_0000_0000u64 + self.index as u64, i as u64)
    }

    /// The vertex name of vertex `i`. Every third job chains a `Map` into its sink
    /// (`Map -> Sink: ...`), as Flink names a chained vertex.
    pub fn vertex_name(&self, i: usize) -> String {
        let topic = PURPOSES[(self.index / TEAMS.len()) % PURPOSES.len()];
        if i == 0 {
            format!("Source: Kafka {topic}")
        } else if i + 1 == self.vertices {
            let (system, target) = match &self.cause {
                Cause::Sink { system, target } => (*system, *target),
                _ => ("Elasticsearch", "logs-*"),
            };
            let sink = format!("Sink: {system} {target}");
            if self.index % 3 == 2 { format!("Map -> {sink}") } else { sink }
        } else if self.cause == Cause::HotKey && i == self.culprit() {
            "KeyedProcess -> count-per-user".into()
        } else if self.cause == Cause::SlowOperator && i == self.culprit() {
            "parse-json".into()
        } else {
            OPERATORS[(self.index + i) % OPERATORS.len()].into()
        }
    }

    /// The vertex holding the job back.
    pub fn culprit(&self) -> usize {
        match self.cause {
            Cause::Sink { .. } => self.vertices - 1,
            // Vertex 2 has a HASH input (every even vertex has).
            Cause::HotKey => 2,
            // An odd vertex (a FORWARD input): behind a HASH exchange it would be keyed,
            // stateful, and want RocksDB metrics for a verdict of high confidence.
            Cause::SlowOperator => self.vertices / 2 - (1 - (self.vertices / 2) % 2),
            Cause::Source => 0,
        }
    }

    /// The JSON of `GET /jobs/:id/plan`.
    pub fn plan_json(&self) -> String {
        let mut s = format!(
            "{{\"plan\":{{\"jid\":\"{}\",\"name\":{},\"type\":\"STREAMING\",\"nodes\":[",
            self.job_id(),
            serde_json::Value::from(self.job_name())
        );
        for i in 0..self.vertices {
            if i > 0 {
                s.push(',');
            }
            // Flink's description escapes `>` of a chain (`Map -&gt; Sink: ...`).
            let description = format!("{}<br/>", self.vertex_name(i).replace('>', "&gt;"));
            let _ = write!(
                s,
                "{{\"id\":\"{}\",\"parallelism\":{},\"description\":{}",
                self.vertex_id(i),
                self.subtasks,
                serde_json::Value::from(description)
            );
            if i > 0 {
                let ship = if i % 2 == 0 { "HASH" } else { "FORWARD" };
                let _ = write!(
                    s,
                    ",\"inputs\":[{{\"num\":0,\"id\":\"{}\",\"ship_strategy\":\"{ship}\"}}]",
                    self.vertex_id(i - 1)
                );
            }
            s.push('}');
        }
        s.push_str("]}}");
        s
    }

    /// Busy, backpressured and idle ms/s of subtask `sub` of vertex `i` at sample `k`.
    fn times(&self, i: usize, sub: usize, k: usize) -> (f64, f64, f64) {
        let wobble = (k % 7) as f64;
        let backpressured = (5.0 + wobble, 950.0 - wobble, 45.0);
        let busy = (995.0 + (k % 3) as f64, 0.0, 5.0 - (k % 3) as f64);
        let idle = (20.0 + wobble, 0.0, 980.0 - wobble);
        let c = self.culprit();
        match self.cause {
            Cause::Source if i == 0 => busy,
            Cause::Source => idle,
            Cause::HotKey if i == c && sub != 0 => (150.0 + wobble, 0.0, 850.0 - wobble),
            _ if i < c => backpressured,
            _ if i == c => busy,
            _ => idle,
        }
    }

    /// Records per second into subtask `sub` of vertex `i`: 500, but for a hot key's
    /// vertex, where subtask 0 takes 3000 and each other 300.
    fn records_in_per_s(&self, i: usize, sub: usize) -> f64 {
        match (self.cause == Cause::HotKey && i == self.culprit(), sub) {
            (true, 0) => 3_000.0,
            (true, _) => 300.0,
            _ => 500.0,
        }
    }

    fn t(&self, k: usize) -> i64 {
        self.start_ms + k as i64 * self.interval_ms
    }

    /// Writes this job's samples of `family` (one of [`FAMILIES`]; no `# TYPE` line).
    fn write_family<W: Write>(&self, w: &mut OpenMetricsWriter<W>, family: &str) -> io::Result<()> {
        let elapsed_s = |k: usize| (self.t(k) - self.start_ms) as f64 / 1000.0;
        if let Some(m) = TASK_FAMILIES.iter().position(|f| *f == family) {
            for i in 0..self.vertices {
                for sub in 0..self.subtasks {
                    let labels = self.task_labels(i, sub);
                    let labels: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
                    for k in 0..self.samples {
                        let (busy, bp, idle) = self.times(i, sub, k);
                        let value = [busy, bp, idle, 1_000_000.0 + self.records_in_per_s(i, sub) * elapsed_s(k)][m];
                        w.sample(family, &labels, value, Some(self.t(k)))?;
                    }
                }
            }
            return Ok(());
        }
        if let Some((_, start, per_s)) = self.source_series().into_iter().find(|s| s.0 == family) {
            for sub in 0..self.subtasks {
                let mut labels = self.task_labels(0, sub);
                if family.contains("_operator_") {
                    labels.push(("operator_id", format!("{:032x}", 0x00c0_ffee_0000_u64 + self.index as u64)));
                    labels.push(("operator_name", sanitize_label_value(&self.vertex_name(0))));
                    labels.sort();
                }
                let labels: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
                for k in 0..self.samples {
                    w.sample(family, &labels, start + per_s * elapsed_s(k), Some(self.t(k)))?;
                }
            }
            return Ok(());
        }
        let job_id = self.job_id();
        let job_name = sanitize_label_value(&self.job_name());
        let jm = [("job", "flink"), ("job_id", job_id.as_str()), ("job_name", job_name.as_str())];
        for k in 0..self.samples {
            let t = self.t(k);
            let value = match family {
                // Started a minute before the first sample.
                "flink_jobmanager_job_uptime" => (60_000 + t - self.start_ms) as f64,
                "flink_jobmanager_job_lastCheckpointDuration" => 1_500.0,
                "flink_jobmanager_job_lastCheckpointCompletedTimestamp" => (t - t % 10_000) as f64,
                "flink_jobmanager_job_numberOfFailedCheckpoints" => 0.0,
                _ => return Ok(()),
            };
            w.sample(family, &jm, value, Some(t))?;
        }
        Ok(())
    }

    /// The source's series beyond the task metrics, as (family, value at the first
    /// sample, growth per second): records out, 500/s per subtask, and its readers'
    /// `pendingRecords` (the lag), growing 200 records/s per subtask: a job held back falls
    /// behind, and without the demand a verdict on headroom is only of medium confidence.
    fn source_series(&self) -> [(&'static str, f64, f64); 2] {
        [
            ("flink_taskmanager_job_task_numRecordsOut", 1_000_000.0, 500.0),
            ("flink_taskmanager_job_task_operator_pendingRecords", 200_000.0, 200.0),
        ]
    }

    /// The reporter's labels of subtask `sub` of vertex `i`, sorted by name.
    fn task_labels(&self, i: usize, sub: usize) -> Vec<(&'static str, String)> {
        let job_id = self.job_id();
        let task_id = self.vertex_id(i);
        // Each job on its own TaskManagers: 10.<job>.<subtask> (two octets for the job).
        let host = format!("10_{}_{}_{}", self.index / 250, self.index % 250, sub);
        vec![
            ("host", host.clone()),
            ("job", "flink".into()),
            ("job_id", job_id.clone()),
            ("job_name", sanitize_label_value(&self.job_name())),
            ("subtask_index", sub.to_string()),
            ("task_attempt_id", format!("{job_id}_{task_id}_{sub}_0")),
            ("task_attempt_num", "0".into()),
            ("task_id", task_id),
            ("task_name", sanitize_label_value(&self.vertex_name(i))),
            ("tm_id", format!("{host}:6122_{sub:06x}")),
        ]
    }
}

/// The task metrics each subtask reports, in the order of [`StormJob::times`]' triple and
/// then records in.
const TASK_FAMILIES: [&str; 4] = [
    "flink_taskmanager_job_task_busyTimeMsPerSecond",
    "flink_taskmanager_job_task_backPressuredTimeMsPerSecond",
    "flink_taskmanager_job_task_idleTimeMsPerSecond",
    "flink_taskmanager_job_task_numRecordsIn",
];

/// Every family a storm's recording holds.
pub const FAMILIES: [&str; 10] = [
    "flink_jobmanager_job_uptime",
    "flink_jobmanager_job_lastCheckpointDuration",
    "flink_jobmanager_job_lastCheckpointCompletedTimestamp",
    "flink_jobmanager_job_numberOfFailedCheckpoints",
    TASK_FAMILIES[0],
    TASK_FAMILIES[1],
    TASK_FAMILIES[2],
    TASK_FAMILIES[3],
    "flink_taskmanager_job_task_numRecordsOut",
    "flink_taskmanager_job_task_operator_pendingRecords",
];

/// Writes every job's series as one OpenMetrics text ending with `# EOF`: family by family
/// (OpenMetrics does not interleave families), each family job after job.
pub fn write_openmetrics<W: Write>(jobs: &[StormJob], out: W) -> io::Result<W> {
    let mut w = OpenMetricsWriter::new(out);
    for family in FAMILIES {
        w.metric_type(family, MetricType::Gauge)?;
        for job in jobs {
            job.write_family(&mut w, family)?;
        }
    }
    let mut out = w.finish()?;
    out.flush()?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::block_on;
    use crate::collect::collector::{CollectInput, collect};
    use crate::collect::store::SeriesStore;
    use crate::config::Config;
    use crate::diagnose::diagnose;
    use crate::model::catalog::MetricCatalog;
    use crate::model::graph::JobGraph;
    use crate::model::request::DiagnosisRequest;

    #[test]
    fn a_storm_of_300_has_290_jobs_sharing_the_sink_and_10_others_spread_through_it() {
        let jobs = storm(300, 0, 2, 15_000);
        let others: Vec<usize> = jobs.iter().filter(|j| j.cause != SHARED_SINK).map(|j| j.index).collect();
        // Stride 300 / 10 = 30, each in the middle of its 30: 15, 45, ..., 285.
        assert_eq!(others, (0..10).map(|s| 15 + 30 * s).collect::<Vec<_>>());
        assert_eq!(jobs[15].cause, Cause::HotKey);
        assert_eq!(jobs[105].cause, Cause::Source);
        let names: std::collections::BTreeSet<String> = jobs.iter().map(StormJob::job_name).collect();
        assert_eq!(names.len(), 300, "every job has its own name");
        // A quick storm of 30 still has one job of each other kind but the last: 4 others.
        let quick = storm(30, 0, 2, 15_000);
        assert_eq!(quick.iter().filter(|j| j.cause != SHARED_SINK).count(), 4);
    }

    /// Diagnoses `job` from its own recording and plan, as of its last sample.
    fn verdict_of(job: &StormJob) -> crate::model::verdict::Verdict {
        let text = write_openmetrics(std::slice::from_ref(job), Vec::new()).unwrap();
        let text = String::from_utf8(text).unwrap();
        let mut store = SeriesStore::new();
        store.read_from(text.as_bytes(), "storm", None).unwrap();
        store.finish();
        let config = Config::default();
        let request = DiagnosisRequest { job: Some(job.job_name()), ..Default::default() };
        let snapshot = block_on(collect(
            &store,
            CollectInput {
                request: &request,
                graph: Some(JobGraph::from_plan_json(&job.plan_json()).unwrap()),
                checkpoint_config: None,
                exceptions: None,
                rescales: None,
                config: &config,
                catalog: &MetricCatalog::default(),
            },
        ))
        .unwrap();
        crate::render::words::verdict(&diagnose(&snapshot, &config.diagnosis))
    }

    #[test]
    fn every_job_of_a_storm_is_diagnosed_with_its_causes_finding_at_its_vertex_and_high_confidence() {
        // 40 samples 15 s apart: 10 minutes, past the 5-minute window. A storm of 50 holds
        // every shape (25 in a row) and the first four other causes; the fifth is added.
        let start = 1_795_000_000_000;
        let mut jobs = storm(50, start, 40, 15_000);
        jobs.push(StormJob::new(50, OTHER_CAUSES[4].clone(), start, 40, 15_000));
        let shapes: std::collections::BTreeSet<(usize, usize)> =
            jobs.iter().map(|j| (j.vertices, j.subtasks)).collect();
        assert_eq!(shapes.len(), 25, "{shapes:?}");
        for job in &jobs {
            let v = verdict_of(job);
            assert_eq!(v.finding.as_str(), job.cause.finding(), "{job:?}: {}", v.summary);
            let culprit = v.culprit.as_ref().unwrap_or_else(|| panic!("{job:?} has a culprit: {}", v.summary));
            assert_eq!(culprit.vertex_id, job.vertex_id(job.culprit()), "{job:?}: {}", v.summary);
            // High: a weak verdict would be diagnosed again a minute later, a second verdict
            // of the job in the bench.
            assert_eq!(v.confidence, crate::model::verdict::Confidence::High, "{job:?}: {:?}", v.steps);
        }
    }
}
