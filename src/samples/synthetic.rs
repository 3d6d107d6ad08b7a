//! A synthetic Flink job, for benchmarks and scale tests: its job plan and a recording in
//! the reporter's metric and label names.
//!
//! The graph is a line of `vertices` vertices (a source, operators with a `HASH` input on
//! every other hop, a sink), `subtasks` subtasks each, sampled every 5 s. The vertex in the
//! middle is the bottleneck: every vertex before it is backpressured, it is busy, the ones
//! after it idle. Deterministic: the same sizes give the same bytes.

use std::fmt::Write as _;
use std::io::{self, Write};

use crate::collect::exposition::{MetricType, OpenMetricsWriter};

/// Sizes of the synthetic job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyntheticJob {
    pub vertices: usize,
    pub subtasks: usize,
    /// Samples per series, 5 s apart.
    pub samples: usize,
    /// Time of the first sample, Unix ms.
    pub start_ms: i64,
    /// Which job (several can share one recording): 0 is [`JOB_ID`] / [`JOB_NAME`].
    pub job: u32,
}

/// The job id of job 0.
pub const JOB_ID: &str = "5e1ec7ed000000000000000000000001";
/// The job name of job 0 (as Flink shows it; the reporter writes `synthetic_job`).
pub const JOB_NAME: &str = "synthetic-job";
/// Scrape interval, ms.
pub const INTERVAL_MS: i64 = 5_000;

/// The first sample time of [`SyntheticJob::parse_sizes`]' jobs: 2026-11-18T11:06:40Z, Unix ms.
const BENCH_START_MS: i64 = 1_795_000_000_000;

impl SyntheticJob {
    /// Jobs from a comma-separated list of `VxSxN` sizes (vertices × subtasks × samples per
    /// series), e.g. `1000x128x60,100x64x60`, each job 0 starting at a fixed time: the
    /// benches' `CULPRIT_BENCH_SIZES`. An error names the size that is not `VxSxN`.
    pub fn parse_sizes(spec: &str) -> Result<Vec<SyntheticJob>, String> {
        spec.split(',')
            .map(|size| {
                let n: Vec<usize> = size
                    .split('x')
                    .map(|x| x.trim().parse())
                    .collect::<Result<_, _>>()
                    .map_err(|e| format!("size `{size}` is not VxSxN: {e}"))?;
                let [vertices, subtasks, samples] = n[..] else {
                    return Err(format!("size `{size}` is not VxSxN"));
                };
                Ok(SyntheticJob { vertices, subtasks, samples, start_ms: BENCH_START_MS, job: 0 })
            })
            .collect()
    }

    /// This job's id (32 hex digits).
    pub fn job_id(&self) -> String {
        if self.job == 0 { JOB_ID.into() } else { format!("5e1ec7ed{:024x}", self.job as u64 + 1) }
    }

    /// This job's name as Flink shows it.
    pub fn job_name(&self) -> String {
        if self.job == 0 { JOB_NAME.into() } else { format!("{JOB_NAME}-{}", self.job) }
    }

    /// The vertex id of vertex `i` (32 hex digits, like Flink's).
    pub fn vertex_id(i: usize) -> String {
        format!("{:032x}", 0xfeed_0000_0000u64 + i as u64)
    }

    /// The vertex name of vertex `i`.
    pub fn vertex_name(&self, i: usize) -> String {
        if i == 0 {
            "Source: events".into()
        } else if i + 1 == self.vertices {
            "Sink: store".into()
        } else {
            format!("op-{i}")
        }
    }

    /// The bottleneck vertex.
    pub fn culprit(&self) -> usize {
        self.vertices / 2
    }

    /// The JSON of `GET /jobs/:id/plan`.
    pub fn plan_json(&self) -> String {
        let mut s = format!(
            "{{\"plan\":{{\"jid\":\"{}\",\"name\":\"{}\",\"type\":\"STREAMING\",\"nodes\":[",
            self.job_id(),
            self.job_name()
        );
        for i in 0..self.vertices {
            if i > 0 {
                s.push(',');
            }
            let _ = write!(
                s,
                "{{\"id\":\"{}\",\"parallelism\":{},\"description\":\"{}<br/>\"",
                Self::vertex_id(i),
                self.subtasks,
                self.vertex_name(i)
            );
            if i > 0 {
                let ship = if i % 2 == 0 { "HASH" } else { "FORWARD" };
                let _ = write!(
                    s,
                    ",\"inputs\":[{{\"num\":0,\"id\":\"{}\",\"ship_strategy\":\"{ship}\"}}]",
                    Self::vertex_id(i - 1)
                );
            }
            s.push('}');
        }
        s.push_str("]}}");
        s
    }

    /// Busy, backpressured and idle ms/s of vertex `i` at sample `k`.
    fn times(&self, i: usize, k: usize) -> (f64, f64, f64) {
        let wobble = (k % 7) as f64;
        match i.cmp(&self.culprit()) {
            std::cmp::Ordering::Less => (5.0 + wobble, 950.0 - wobble, 45.0),
            std::cmp::Ordering::Equal => (995.0 + (k % 3) as f64, 0.0, 5.0 - (k % 3) as f64),
            std::cmp::Ordering::Greater => (20.0 + wobble, 0.0, 980.0 - wobble),
        }
    }

    /// Writes the recording as OpenMetrics text with timestamps, ending with `# EOF`.
    pub fn write_openmetrics<W: Write>(&self, out: W) -> io::Result<W> {
        let mut w = OpenMetricsWriter::new(io::BufWriter::with_capacity(1 << 20, out));
        let job_id = self.job_id();
        let job_name_owned = crate::model::graph::sanitize_label_value(&self.job_name());
        let job_name = job_name_owned.as_str();
        let t = |k: usize| self.start_ms + k as i64 * INTERVAL_MS;

        let jm = [("job", "flink"), ("job_id", job_id.as_str()), ("job_name", job_name)];
        w.metric_type("flink_jobmanager_job_uptime", MetricType::Gauge)?;
        for k in 0..self.samples {
            w.sample("flink_jobmanager_job_uptime", &jm, 60_000.0 + (k as i64 * INTERVAL_MS) as f64, Some(t(k)))?;
        }
        for (name, value) in [
            ("flink_jobmanager_job_lastCheckpointDuration", 1_500.0),
            ("flink_jobmanager_job_numberOfFailedCheckpoints", 0.0),
        ] {
            w.metric_type(name, MetricType::Gauge)?;
            for k in 0..self.samples {
                w.sample(name, &jm, value, Some(t(k)))?;
            }
        }
        w.metric_type("flink_jobmanager_job_lastCheckpointCompletedTimestamp", MetricType::Gauge)?;
        for k in 0..self.samples {
            w.sample(
                "flink_jobmanager_job_lastCheckpointCompletedTimestamp",
                &jm,
                (t(k) - t(k) % 10_000) as f64,
                Some(t(k)),
            )?;
        }

        let metrics: [(&str, MetricType); 4] = [
            ("flink_taskmanager_job_task_busyTimeMsPerSecond", MetricType::Gauge),
            ("flink_taskmanager_job_task_backPressuredTimeMsPerSecond", MetricType::Gauge),
            ("flink_taskmanager_job_task_idleTimeMsPerSecond", MetricType::Gauge),
            ("flink_taskmanager_job_task_numRecordsIn", MetricType::Gauge),
        ];
        for (m, (name, kind)) in metrics.iter().enumerate() {
            w.metric_type(name, *kind)?;
            for i in 0..self.vertices {
                let task_id = Self::vertex_id(i);
                let task_name = crate::model::graph::sanitize_label_value(&self.vertex_name(i));
                for sub in 0..self.subtasks {
                    let subtask = sub.to_string();
                    let tm = format!("10_0_{}_{}:6122_{:06x}", sub / 250, sub % 250, sub);
                    let host = format!("10_0_{}_{}", sub / 250, sub % 250);
                    let attempt = format!("{job_id}_{task_id}_{sub}_0");
                    let labels = [
                        ("host", host.as_str()),
                        ("job", "flink"),
                        ("job_id", job_id.as_str()),
                        ("job_name", job_name),
                        ("subtask_index", subtask.as_str()),
                        ("task_attempt_id", attempt.as_str()),
                        ("task_attempt_num", "0"),
                        ("task_id", task_id.as_str()),
                        ("task_name", task_name.as_str()),
                        ("tm_id", tm.as_str()),
                    ];
                    for k in 0..self.samples {
                        let (busy, bp, idle) = self.times(i, k);
                        let value = match m {
                            0 => busy,
                            1 => bp,
                            2 => idle,
                            // 500 records/s into every subtask.
                            _ => 1_000_000.0 + 2_500.0 * k as f64,
                        };
                        w.sample(name, &labels, value, Some(t(k)))?;
                    }
                }
            }
        }
        let mut out = w.finish()?;
        out.flush()?;
        out.into_inner().map_err(|e| e.into_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bench_sizes_read_as_vertices_subtasks_samples_and_a_bad_size_is_named() {
        let jobs = SyntheticJob::parse_sizes("1000x128x60, 2x3x4").unwrap();
        assert_eq!(
            jobs.iter().map(|j| (j.vertices, j.subtasks, j.samples)).collect::<Vec<_>>(),
            [(1000, 128, 60), (2, 3, 4)]
        );
        assert_eq!(SyntheticJob::parse_sizes("2x3").unwrap_err(), "size `2x3` is not VxSxN");
        assert!(SyntheticJob::parse_sizes("2xax4").unwrap_err().starts_with("size `2xax4` is not VxSxN: "));
    }
    use crate::collect::block_on;
    use crate::collect::collector::{CollectInput, collect};
    use crate::collect::store::SeriesStore;
    use crate::config::Config;
    use crate::diagnose::diagnose;
    use crate::model::catalog::MetricCatalog;
    use crate::model::graph::JobGraph;
    use crate::model::request::DiagnosisRequest;

    #[test]
    fn the_synthetic_bottleneck_is_found_in_the_middle() {
        let job = SyntheticJob { vertices: 9, subtasks: 3, samples: 30, start_ms: 1_795_000_000_000, job: 0 };
        let text = job.write_openmetrics(Vec::new()).unwrap();
        let mut store = SeriesStore::new();
        store.read_from(&text[..], "synthetic", None).unwrap();
        store.finish();
        let config = Config::default();
        let snapshot = block_on(collect(
            &store,
            CollectInput {
                request: &DiagnosisRequest::default(),
                graph: Some(JobGraph::from_plan_json(&job.plan_json()).unwrap()),
                checkpoint_config: None,
                exceptions: None,
                rescales: None,
                config: &config,
                catalog: &MetricCatalog::default(),
            },
        ))
        .unwrap();
        let v = crate::render::words::verdict(&diagnose(&snapshot, &config.diagnosis));
        assert_eq!(v.culprit.unwrap().vertex_id, SyntheticJob::vertex_id(4));
        assert_eq!(v.finding.as_str(), "headroom");
        // 3 subtasks × 500 records/s = 1500 records/s into the culprit.
        let rate = v.evidence.iter().find(|e| e.metric.starts_with("capacity")).unwrap().value;
        assert!((rate - 1500.0 / 0.996).abs() < 10.0, "{rate}");
    }
}
