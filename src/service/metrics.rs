//! culprit's own metrics, in Prometheus text format on `GET /metrics`.
//!
//! * `culprit_webhooks_total{outcome}`: accepted, ignored, bad_request, unauthorized,
//!   too_large, queue_full, error.
//! * `culprit_alerts_ignored_total{reason}`: alerts of accepted webhooks that culprit does
//!   not diagnose: own, alertname, no_job_label, not_a_flink_job_id.
//! * `culprit_diagnoses_total{status, finding}` and `culprit_diagnosis_failures_total{reason}`.
//! * `culprit_notifications_total{destination, outcome}`: sent, retry, deferred (an
//!   incident's digest waiting to gather more jobs), failed, recovered
//!   (found already delivered after a crash or timeout), fenced (not sent: this replica
//!   lost the send's lease to another).
//! * `culprit_notification_failures_total{destination, reason, outcome}`: failed attempts
//!   by reason (`rate_limited`, `server_error`, `timeout`, `connect`, `transport`,
//!   `bad_answer`, `refused`, `partly_delivered`) and outcome (`retry` or `failed`).
//! * `culprit_queue_depth{queue}`: work (diagnoses waiting or running), outbox (notices
//!   waiting or being sent) and dead_letter, counted in the store.
//! * `culprit_store_errors_total{operation, kind}`: store operations that failed (`kind`:
//!   full, corrupt, busy, io, decode, in_use, other); each is retried with backoff.
//! * `culprit_dead_letters_total{table}`: undecodable rows moved to the dead-letter table.
//! * `culprit_store_recovered_total{table}`: rows found in flight at start (a crash).
//! * `culprit_store_integrity_problems_total{kind}`: losses this process's start found in
//!   the SQLite files (`lost`, `replaced`, `wal_missing`, `wal_damaged`), and the gauge
//!   `culprit_store_integrity_problems_unacknowledged`: those not yet acknowledged (`culprit store
//!   acknowledge`).
//! * `culprit_store_pruned_total{table}`: finished rows removed by age or count.
//! * `culprit_webhook_jobs_dropped_total`: jobs beyond `service.max_jobs_per_webhook`.
//! * `culprit_store_intake_commits_total`: SQLite transactions that stored webhooks (group
//!   commit: webhooks accepted ÷ commits = webhooks per commit; with
//!   `store.synchronous = "full"` each commit that wrote is one sync of the WAL).
//! * `culprit_store_clock_skew_seconds`: on PostgreSQL, the database's clock minus this
//!   replica's, as last measured (the database's clock decides leases and due times; 0 on
//!   SQLite).
//! * `culprit_groups_resolved_before_diagnosis_total`: alert groups that resolved before
//!   any verdict was posted for them: nothing is posted.
//! * `culprit_rediagnoses_total`: weak verdicts scheduled to be diagnosed once more
//!   (`service.rediagnose_weak_after`).
//! * `culprit_prometheus_queries{state}`: queries at Prometheus `in_flight` and `waiting`
//!   for a slot, now (at most `prometheus.max_concurrency` in flight, the gauge
//!   `culprit_prometheus_queries_max`), and `culprit_prometheus_queries_peak`: the most in
//!   flight at once since start.
//! * `culprit_flink_rest_requests{cluster, state}`: Flink REST requests `in_flight` and
//!   `waiting` for a slot now, per configured cluster (summed over the JobManagers a
//!   `rest_url_template` fills in: `cluster` takes only `[[flink.clusters]]` names, so the
//!   series are as many as the configuration has clusters, never one per job);
//!   `culprit_flink_rest_requests_max`: the bound per JobManager (`flink.max_concurrency`);
//!   `culprit_flink_rest_requests_peak{cluster}`: the most in flight at one of the
//!   cluster's JobManagers at once since start.
//! * Latency histograms, seconds: `culprit_webhook_duration_seconds`,
//!   `culprit_diagnosis_duration_seconds`, `culprit_notification_duration_seconds{destination}`.

use std::sync::atomic::{AtomicI64, AtomicU64};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Outcome {
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DiagnosisLabels {
    /// `alert` (a webhook) or `api` (`GET /api/v1/diagnose`).
    pub trigger: String,
    pub status: String,
    pub finding: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Reason {
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Notification {
    pub destination: String,
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Destination {
    pub destination: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueryState {
    pub state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClusterState {
    /// A `[[flink.clusters]]` name, escaped for the text format.
    pub cluster: String,
    pub state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Cluster {
    /// A `[[flink.clusters]]` name, escaped for the text format.
    pub cluster: String,
}

/// `culprit_flink_rest_requests{cluster, state}`, `_max` and `_peak{cluster}`.
pub struct FlinkRestLoad {
    pub requests: Family<ClusterState, Gauge<i64, AtomicI64>>,
    pub max: Gauge<i64, AtomicI64>,
    pub peak: Family<Cluster, Gauge<i64, AtomicI64>>,
}

impl FlinkRestLoad {
    fn register(registry: &mut Registry) -> FlinkRestLoad {
        FlinkRestLoad {
            requests: registered(
                registry,
                "flink_rest_requests",
                "Flink REST requests now, by cluster and state (in_flight, waiting for a slot)",
            ),
            max: registered(
                registry,
                "flink_rest_requests_max",
                "The bound on Flink REST requests in flight at one JobManager (flink.max_concurrency)",
            ),
            peak: registered(
                registry,
                "flink_rest_requests_peak",
                "The most Flink REST requests in flight at one of the cluster's JobManagers at once since start",
            ),
        }
    }
}

/// A label value as the text format writes it (`\\`, `\"`, `\n`): the client library
/// writes label values as given, and a cluster's name is free text.
fn label_value(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Queue {
    pub queue: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NotificationFailure {
    pub destination: String,
    pub reason: String,
    /// `retry` (another attempt is scheduled) or `failed` (given up).
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StoreErrorLabels {
    pub operation: String,
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Kind {
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Table {
    pub table: String,
}

/// Every metric culprit exports.
pub struct Metrics {
    registry: Registry,
    pub webhooks: Family<Outcome, Counter>,
    pub alerts_ignored: Family<Reason, Counter>,
    pub diagnoses: Family<DiagnosisLabels, Counter>,
    pub diagnosis_failures: Family<Reason, Counter>,
    pub notifications: Family<Notification, Counter>,
    pub queue_depth: Family<Queue, Gauge<i64, AtomicI64>>,
    pub webhook_duration: Histogram,
    pub diagnosis_duration: Histogram,
    pub notification_duration: Family<Destination, Histogram>,
    pub notification_failures: Family<NotificationFailure, Counter>,
    pub store_errors: Family<StoreErrorLabels, Counter>,
    pub dead_letters: Family<Table, Counter>,
    pub store_recovered: Family<Table, Counter>,
    pub store_integrity: StoreIntegrity,
    pub store_pruned: Family<Table, Counter>,
    pub webhook_jobs_dropped: Counter,
    pub store_intake_commits: Counter,
    pub store_clock_skew: Gauge<f64, AtomicU64>,
    pub groups_resolved_before_diagnosis: Counter,
    pub rediagnoses: Counter,
    /// `culprit_prometheus_queries{state}`, `_max` and `_peak`, set at each scrape.
    pub prometheus_queries: Family<QueryState, Gauge<i64, AtomicI64>>,
    pub prometheus_queries_max: Gauge<i64, AtomicI64>,
    pub prometheus_queries_peak: Gauge<i64, AtomicI64>,
    /// `culprit_flink_rest_requests{cluster, state}`, `_max` and `_peak`, set at each scrape.
    pub flink_rest: FlinkRestLoad,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// Losses a start found in the SQLite files.
pub struct StoreIntegrity {
    /// `culprit_store_integrity_problems_total{kind}`.
    pub total: Family<Kind, Counter>,
    /// `culprit_store_integrity_problems_unacknowledged`.
    pub unacknowledged: Gauge<i64, AtomicI64>,
}

impl StoreIntegrity {
    fn register(registry: &mut Registry) -> StoreIntegrity {
        let total = Family::<Kind, Counter>::default();
        registry.register(
            "store_integrity_problems",
            "Losses the start found in the SQLite files, by kind (lost, replaced, wal_missing, wal_damaged)",
            total.clone(),
        );
        let unacknowledged = Gauge::<i64, AtomicI64>::default();
        registry.register(
            "store_integrity_problems_unacknowledged",
            "Losses found in the SQLite files at starts and not yet acknowledged (culprit store acknowledge)",
            unacknowledged.clone(),
        );
        StoreIntegrity { total, unacknowledged }
    }
}

/// `culprit_store_clock_skew_seconds`.
fn register_clock_skew(registry: &mut Registry) -> Gauge<f64, AtomicU64> {
    let gauge = Gauge::<f64, AtomicU64>::default();
    registry.register(
        "store_clock_skew_seconds",
        "PostgreSQL's clock minus this replica's, as last measured (the database's clock decides leases and due times)",
        gauge.clone(),
    );
    gauge
}

/// `culprit_prometheus_queries{state}`, `_max` and `_peak`.
#[allow(clippy::type_complexity)]
fn register_prometheus_load(
    registry: &mut Registry,
) -> (Family<QueryState, Gauge<i64, AtomicI64>>, Gauge<i64, AtomicI64>, Gauge<i64, AtomicI64>) {
    let prometheus_queries: Family<QueryState, Gauge<i64, AtomicI64>> = registered(
        registry,
        "prometheus_queries",
        "Queries at Prometheus now, by state (in_flight, waiting for a slot)",
    );
    let prometheus_queries_max: Gauge<i64, AtomicI64> = registered(
        registry,
        "prometheus_queries_max",
        "The bound on queries in flight at Prometheus (prometheus.max_concurrency)",
    );
    let prometheus_queries_peak: Gauge<i64, AtomicI64> =
        registered(registry, "prometheus_queries_peak", "The most queries in flight at Prometheus at once since start");
    (prometheus_queries, prometheus_queries_max, prometheus_queries_peak)
}

/// Registers a new metric under `name` (after the `culprit_` prefix) with its help text and
/// returns the handle that updates it.
fn registered<M: Default + Clone + prometheus_client::registry::Metric>(
    registry: &mut Registry,
    name: &str,
    help: &str,
) -> M {
    let metric = M::default();
    registry.register(name, help, metric.clone());
    metric
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("culprit");
        let webhooks: Family<Outcome, Counter> =
            registered(&mut registry, "webhooks", "Alertmanager and Grafana webhooks received, by outcome");
        let alerts_ignored: Family<Reason, Counter> = registered(
            &mut registry,
            "alerts_ignored",
            "Alerts of accepted webhooks that are not diagnosed, by reason (own, alertname, no_job_label, not_a_flink_job_id)",
        );
        let diagnoses: Family<DiagnosisLabels, Counter> = registered(
            &mut registry,
            "diagnoses",
            "Diagnoses completed, by trigger (alert, api), verdict status and finding",
        );
        let diagnosis_failures: Family<Reason, Counter> =
            registered(&mut registry, "diagnosis_failures", "Diagnosis attempts that failed, by reason");
        let notifications: Family<Notification, Counter> =
            registered(&mut registry, "notifications", "Notification attempts, by destination and outcome");
        let queue_depth: Family<Queue, Gauge<i64, AtomicI64>> = registered(
            &mut registry,
            "queue_depth",
            "Items waiting, counted in the store: diagnoses waiting or running (work), notices waiting or being sent (outbox), rows in the dead-letter table (dead_letter)",
        );
        let webhook_duration = Histogram::new(exponential_buckets(0.0005, 2.0, 14));
        registry.register(
            "webhook_duration_seconds",
            "Time to answer a webhook (parse, durable enqueue), seconds",
            webhook_duration.clone(),
        );
        let diagnosis_duration = Histogram::new(exponential_buckets(0.01, 2.0, 14));
        registry.register(
            "diagnosis_duration_seconds",
            "Time to diagnose one job live, seconds",
            diagnosis_duration.clone(),
        );
        let notification_duration = Family::<Destination, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.005, 2.0, 14))
        });
        registry.register(
            "notification_duration_seconds",
            "Time of one delivery attempt, seconds",
            notification_duration.clone(),
        );
        let notification_failures: Family<NotificationFailure, Counter> = registered(
            &mut registry,
            "notification_failures",
            "Failed delivery attempts, by destination, reason and outcome (retry, failed)",
        );
        let store_errors: Family<StoreErrorLabels, Counter> = registered(
            &mut registry,
            "store_errors",
            "Store operations that failed, by operation and kind; each is retried with backoff",
        );
        let dead_letters: Family<Table, Counter> =
            registered(&mut registry, "dead_letters", "Undecodable rows moved to the dead-letter table, by table");
        let store_recovered: Family<Table, Counter> = registered(
            &mut registry,
            "store_recovered",
            "Rows found in flight when the store opened (after a crash), by table",
        );
        let store_integrity = StoreIntegrity::register(&mut registry);
        let store_pruned: Family<Table, Counter> =
            registered(&mut registry, "store_pruned", "Finished rows removed by age or count, by table");
        let webhook_jobs_dropped: Counter = registered(
            &mut registry,
            "webhook_jobs_dropped",
            "Jobs named by a webhook beyond service.max_jobs_per_webhook, not diagnosed",
        );
        let store_intake_commits: Counter = registered(
            &mut registry,
            "store_intake_commits",
            "SQLite transactions that stored webhooks (group commit; with store.synchronous = full, one sync of the WAL each that wrote)",
        );
        let store_clock_skew = register_clock_skew(&mut registry);
        let groups_resolved_before_diagnosis: Counter = registered(
            &mut registry,
            "groups_resolved_before_diagnosis",
            "Alert groups that resolved before a verdict was posted for them (within the coalescing window): nothing posted",
        );
        let rediagnoses: Counter = registered(
            &mut registry,
            "rediagnoses",
            "Weak verdicts scheduled to be diagnosed once more (service.rediagnose_weak_after)",
        );
        let (prometheus_queries, prometheus_queries_max, prometheus_queries_peak) =
            register_prometheus_load(&mut registry);
        let flink_rest = FlinkRestLoad::register(&mut registry);
        Metrics {
            registry,
            flink_rest,
            prometheus_queries,
            prometheus_queries_max,
            prometheus_queries_peak,
            notification_failures,
            store_errors,
            dead_letters,
            store_recovered,
            store_integrity,
            store_pruned,
            webhook_jobs_dropped,
            store_intake_commits,
            store_clock_skew,
            groups_resolved_before_diagnosis,
            rediagnoses,
            webhooks,
            alerts_ignored,
            diagnoses,
            diagnosis_failures,
            notifications,
            queue_depth,
            webhook_duration,
            diagnosis_duration,
            notification_duration,
        }
    }

    pub fn webhook(&self, outcome: &str) {
        self.webhooks.get_or_create(&Outcome { outcome: outcome.into() }).inc();
    }

    /// Counts an alert left out of a webhook, by reason.
    pub fn alert_ignored(&self, reason: &str) {
        self.alerts_ignored.get_or_create(&Reason { reason: reason.into() }).inc();
    }

    /// Counts a verdict produced for `trigger` (`alert` or `api`).
    pub fn diagnosis(&self, trigger: &str, v: &crate::model::verdict::Verdict) {
        self.diagnoses
            .get_or_create(&DiagnosisLabels {
                trigger: trigger.into(),
                status: v.status.as_str().into(),
                finding: v.finding.as_str().into(),
            })
            .inc();
    }

    /// Counts a failed diagnosis: `backend`, `gave_up` (alerts), `api_request`, `api_backend`.
    pub fn diagnosis_failure(&self, reason: &str) {
        self.diagnosis_failures.get_or_create(&Reason { reason: reason.into() }).inc();
    }

    pub fn notification(&self, destination: &str, outcome: &str) {
        self.notifications
            .get_or_create(&Notification { destination: destination.into(), outcome: outcome.into() })
            .inc();
    }

    /// Counts a failed delivery attempt.
    pub fn notification_failure(&self, destination: &str, reason: &str, is_final: bool) {
        self.notification_failures
            .get_or_create(&NotificationFailure {
                destination: destination.into(),
                reason: reason.into(),
                outcome: if is_final { "failed" } else { "retry" }.into(),
            })
            .inc();
    }

    /// Counts a failed store operation.
    pub fn store_error(&self, operation: &str, kind: &str) {
        self.store_errors.get_or_create(&StoreErrorLabels { operation: operation.into(), kind: kind.into() }).inc();
    }

    /// Counts a row moved to the dead-letter table.
    pub fn dead_letter(&self, table: &str) {
        self.dead_letters.get_or_create(&Table { table: table.into() }).inc();
    }

    /// Counts rows recovered at start (the series exists, at 0, after a clean start).
    pub fn store_recovered(&self, table: &str, n: u64) {
        self.store_recovered.get_or_create(&Table { table: table.into() }).inc_by(n);
    }

    /// Counts rows pruned.
    pub fn store_pruned(&self, table: &str, n: u64) {
        self.store_pruned.get_or_create(&Table { table: table.into() }).inc_by(n);
    }

    /// The Prometheus client's load now.
    pub fn set_prometheus_load(&self, load: crate::collect::prometheus::LoadNow) {
        let set = |state: &str, n: usize| {
            self.prometheus_queries.get_or_create(&QueryState { state: state.into() }).set(n as i64);
        };
        set("in_flight", load.in_flight);
        set("waiting", load.waiting);
        self.prometheus_queries_max.set(load.bound as i64);
        self.prometheus_queries_peak.set(load.peak as i64);
    }

    /// The Flink REST load now, per cluster ([`crate::service::pipeline::Live::flink_load`]).
    pub fn set_flink_load(&self, bound: usize, clusters: &[(String, crate::collect::prometheus::LoadNow)]) {
        self.flink_rest.max.set(bound as i64);
        for (name, load) in clusters {
            let cluster = label_value(name);
            let set = |state: &str, n: usize| {
                let labels = ClusterState { cluster: cluster.clone(), state: state.into() };
                self.flink_rest.requests.get_or_create(&labels).set(n as i64);
            };
            set("in_flight", load.in_flight);
            set("waiting", load.waiting);
            self.flink_rest.peak.get_or_create(&Cluster { cluster: cluster.clone() }).set(load.peak as i64);
        }
    }

    pub fn set_queue(&self, queue: &str, depth: i64) {
        self.queue_depth.get_or_create(&Queue { queue: queue.into() }).set(depth);
    }

    /// The Prometheus text exposition (format 0.0.4), which every scraper and
    /// `promtool check metrics` read.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).expect("writing to a String");
        openmetrics_to_text(&out)
    }
}

/// OpenMetrics names a counter family without `_total` (its samples carry it); the text
/// format 0.0.4 names the family like its samples. This renames counter families, and
/// drops `# EOF` and `# UNIT`, which the text format does not have.
pub fn openmetrics_to_text(om: &str) -> String {
    let counters: std::collections::BTreeSet<&str> =
        om.lines().filter_map(|l| l.strip_prefix("# TYPE ")).filter_map(|l| l.strip_suffix(" counter")).collect();
    let mut out = String::with_capacity(om.len());
    for line in om.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ')?;
            counters.contains(name).then(|| format!("{prefix}{name}_total {tail}"))
        });
        out.push_str(renamed.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_families_take_their_samples_name_in_the_text_format() {
        let m = Metrics::new();
        m.webhook("accepted");
        m.set_queue("work", 3);
        let text = m.encode();
        assert!(
            text.contains("# HELP culprit_webhooks_total Alertmanager and Grafana webhooks received, by outcome"),
            "{text}"
        );
        assert!(text.contains("# TYPE culprit_webhooks_total counter"), "{text}");
        assert!(text.contains("culprit_webhooks_total{outcome=\"accepted\"} 1"), "{text}");
        assert!(text.contains("# TYPE culprit_queue_depth gauge"), "{text}");
        assert!(!text.contains("# EOF"));
    }

    #[test]
    fn flink_rest_load_is_one_series_per_configured_cluster_and_state_with_names_escaped() {
        use crate::collect::prometheus::LoadNow;
        let m = Metrics::new();
        let clusters = [
            ("k8s".to_string(), LoadNow { in_flight: 7, waiting: 12, peak: 4, bound: 4 }),
            ("lab \"eu\"".to_string(), LoadNow { in_flight: 0, waiting: 0, peak: 1, bound: 4 }),
        ];
        m.set_flink_load(4, &clusters);
        let text = m.encode();
        for line in [
            "culprit_flink_rest_requests_max 4",
            "culprit_flink_rest_requests{cluster=\"k8s\",state=\"in_flight\"} 7",
            "culprit_flink_rest_requests{cluster=\"k8s\",state=\"waiting\"} 12",
            "culprit_flink_rest_requests_peak{cluster=\"k8s\"} 4",
            "culprit_flink_rest_requests{cluster=\"lab \\\"eu\\\"\",state=\"in_flight\"} 0",
            "culprit_flink_rest_requests_peak{cluster=\"lab \\\"eu\\\"\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in {text}");
        }
        // Two clusters × two states, and one peak each.
        assert_eq!(text.lines().filter(|l| l.starts_with("culprit_flink_rest_requests{")).count(), 4);
        assert_eq!(text.lines().filter(|l| l.starts_with("culprit_flink_rest_requests_peak{")).count(), 2);
    }
}
