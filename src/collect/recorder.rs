//! `culprit record`: a live diagnosis that remembers which series it read, then fetches
//! their raw samples and writes them as an OpenMetrics recording (a bug-report bundle).
//!
//! Because the recording holds the raw samples of exactly the series and time ranges the
//! collector asked about, `culprit diagnose --recording` evaluates the same queries over
//! the same samples and gives the same verdict. A marker sample `culprit_recording` at the
//! diagnosis time makes that time the recording's last sample, the default `--at`; a
//! marker `culprit_store_newest` at the time of the store's newest data (which may lag the
//! diagnosis time: VictoriaMetrics' latency offset, remote write) makes the replay judge
//! staleness as the live diagnosis did.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Mutex;

use crate::collect::collector::{MetricSource, QueryError, STORE_NEWEST};
use crate::collect::exposition::{MetricType, OpenMetricsWriter};
use crate::collect::prometheus::{PromError, PromSource};
use crate::collect::query::{Query, QueryResult, Selector};
use crate::collect::store::LOOKBACK_DELTA_MS;

/// The name of the marker series written at the diagnosis time.
pub const MARKER: &str = "culprit_recording";

/// A [`MetricSource`] that answers through Prometheus and remembers what it was asked.
pub struct RecordingSource<'a> {
    pub inner: PromSource<'a>,
    /// PromQL selector → (selector, earliest, latest) sample time needed, Unix ms.
    seen: Mutex<BTreeMap<String, (Selector, i64, i64)>>,
    /// The store's newest data as the diagnosis saw it (the answer of its
    /// [`Query::Newest`]), Unix ms.
    store_newest: Mutex<Option<i64>>,
}

impl<'a> RecordingSource<'a> {
    pub fn new(inner: PromSource<'a>) -> Self {
        RecordingSource { inner, seen: Mutex::new(BTreeMap::new()), store_newest: Mutex::new(None) }
    }

    fn remember(&self, q: &Query) {
        let (selector, start, end) = match q {
            Query::OverTime { selector, range_ms, at_ms, .. } => (selector, at_ms - range_ms, *at_ms),
            Query::Range { selector, start_ms, end_ms, .. } => (selector, start_ms - LOOKBACK_DELTA_MS, *end_ms),
            // Its series (every target's `up`) are not this job's; its answer is written
            // as the STORE_NEWEST marker instead.
            Query::Newest { .. } => return,
        };
        let mut seen = self.seen.lock().expect("not poisoned");
        let entry = seen.entry(selector.to_promql()).or_insert((selector.clone(), start, end));
        entry.1 = entry.1.min(start);
        entry.2 = entry.2.max(end);
    }

    /// Fetches the raw samples of every remembered selector over the span it needed and
    /// writes them, with the marker at `at_ms`, as gzip OpenMetrics. Series of other jobs
    /// (a `job_id` other than the marker's) are left out, and so are series of other
    /// deployments under the same job id (a marker label besides `job_id` and `job_name`,
    /// such as `namespace`, with another value); series without `job_id` (TaskManager,
    /// Kafka) are kept; so are samples after `data_end_ms`, the end of the diagnosis'
    /// window: a store that hid its newest samples from the diagnosis (VictoriaMetrics'
    /// latency offset) may still return them raw, and the replay must see what the
    /// diagnosis saw. Returns the number of series and samples written.
    pub async fn write_recording<W: Write>(
        &self,
        out: W,
        at_ms: i64,
        data_end_ms: i64,
        marker_labels: &[(&str, &str)],
    ) -> Result<(usize, usize), PromError> {
        let job_id = marker_labels.iter().find(|(k, _)| *k == "job_id").map(|(_, v)| *v);
        let deployment: Vec<(&str, &str)> =
            marker_labels.iter().filter(|(k, _)| *k != "job_id" && *k != "job_name").copied().collect();
        let wanted: Vec<(Selector, i64, i64)> = self.seen.lock().expect("not poisoned").values().cloned().collect();
        let fetches = wanted.iter().map(|(selector, start, end)| async move {
            let span = (end - start).max(1);
            // A range selector in an instant query returns the raw samples in the range.
            self.inner.client.instant(&format!("{}[{span}ms]", selector.to_promql()), *end).await
        });
        // (metric name, labels) → samples by time.
        type SeriesSamples = BTreeMap<(String, Vec<(String, String)>), BTreeMap<i64, f64>>;
        let mut series: SeriesSamples = BTreeMap::new();
        for answer in futures::future::join_all(fetches).await {
            for s in answer?.series {
                // The job lookup saw every job: another job's series do not belong in this
                // job's bug-report bundle (they may be someone else's data).
                if s.labels.get("job_id").is_some_and(|id| Some(id.as_str()) != job_id) {
                    continue;
                }
                // Nor do another deployment's that share the job id.
                if deployment.iter().any(|(k, v)| s.labels.get(*k).is_some_and(|x| x != v)) {
                    continue;
                }
                let mut labels = s.labels.clone();
                let name = labels.remove("__name__").unwrap_or_default();
                let samples = series.entry((name, labels.into_iter().collect())).or_default();
                samples.extend(s.points.iter().copied().filter(|p| p.0 <= data_end_ms));
            }
        }
        series.retain(|_, samples| !samples.is_empty());
        let gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
        let mut w = OpenMetricsWriter::new(gz);
        let io = |e: std::io::Error| PromError {
            message: format!("cannot write the recording: {e}"),
            status: None,
            retryable: false,
            too_large: None,
        };
        let mut samples = 0;
        let mut last_name = String::new();
        for ((name, labels), points) in &series {
            if *name != last_name {
                w.metric_type(name, MetricType::Gauge).map_err(io)?;
                last_name = name.clone();
            }
            let labels: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            for (t, v) in points {
                w.sample(name, &labels, *v, Some(*t)).map_err(io)?;
                samples += 1;
            }
        }
        if let Some(t) = *self.store_newest.lock().expect("not poisoned") {
            w.metric_type(STORE_NEWEST, MetricType::Gauge).map_err(io)?;
            w.sample(STORE_NEWEST, marker_labels, 1.0, Some(t)).map_err(io)?;
        }
        w.metric_type(MARKER, MetricType::Gauge).map_err(io)?;
        w.sample(MARKER, marker_labels, 1.0, Some(at_ms)).map_err(io)?;
        w.finish().map_err(io)?.finish().map_err(io)?;
        Ok((series.len(), samples))
    }
}

impl MetricSource for RecordingSource<'_> {
    async fn run(&self, queries: &[Query]) -> Vec<Result<QueryResult, QueryError>> {
        for q in queries {
            self.remember(q);
        }
        let answers = self.inner.run(queries).await;
        for (q, answer) in queries.iter().zip(&answers) {
            if let (Query::Newest { .. }, Ok(series)) = (q, answer) {
                let newest = series.first().and_then(|s| s.last_value()).filter(|v| v.is_finite());
                if let Some(seconds) = newest {
                    *self.store_newest.lock().expect("not poisoned") = Some((seconds * 1000.0).round() as i64);
                }
            }
        }
        answers
    }

    fn latest_ms(&self) -> Option<i64> {
        self.inner.latest_ms()
    }
}
