//! `culprit serve`: the service, the one module that wires collection to notification.
//!
//! * [`server`]: the HTTP side (axum): webhook, API, health, metrics.
//! * [`intake`]: Alertmanager and Grafana Alerting webhooks in, per-job diagnosis requests out (pure).
//! * [`store`]: the durable queue and outbox (SQLite, WAL).
//! * [`pipeline`]: a live diagnosis: Prometheus and Flink REST, then the pure diagnosis.
//! * [`metrics`]: culprit's own metrics.
//!
//! * [`retry`]: every backoff and wait, in one place.
//!
//! Webhooks are planned into per-job intakes ([`intake`]) and stored durably
//! ([`store`]); the worker loop (`worker.rs`) claims due jobs, one running diagnosis per
//! job, diagnoses them ([`pipeline::Live`]) and turns each verdict into notices for every
//! destination in one transaction; one delivery loop per destination (`delivery.rs`)
//! sends them per job episode — an episode's notices in order, episodes independently, up to
//! `notify.concurrency` at once — with the retry, backoff and jitter of every destination
//! in one place ([`retry::delivery_delay`]), honouring `Retry-After`. A store operation
//! that fails (a full disk) is logged, counted and retried with backoff; nothing is
//! taken as done before its commit succeeded.
//!
//! What each destination gets of a diagnosis is decided in one place, [`episode`]: one
//! verdict per job per destination for one episode, however many alert groups carry it,
//! and the latest verdict shown in place.
//!
//! Delivery guarantee: each destination gets each (episode, verdict revision) **at least once**,
//! with an idempotency key that is the same on every attempt; a repeat notification with
//! an unchanged verdict posts nothing. A send interrupted by a crash (or a timeout) is
//! checked with the destination before it is sent again where the destination can tell
//! (Slack: exactly once); elsewhere it is sent again with the same key (PagerDuty's
//! `dedup_key` and `custom_details.idempotency_key`, the webhook's `Idempotency-Key`,
//! Alertmanager's identical labels), which the destination or receiver can fold.

mod delivery;
pub mod episode;
pub mod headers;
pub mod history;
pub mod incidents;
pub mod intake;
pub mod links;
pub mod listen;
pub mod metrics;
pub mod pipeline;
pub mod refusals;
pub mod retry;
pub mod server;
pub mod slack_actions;
pub mod store;
mod worker;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, watch};

use crate::config::Config;
use crate::model::verdict::{HazardKind, JobRef, Severity, Verdict};
use crate::notify::{Destination, Notifier};
use crate::service::intake::sha256_hex;
use crate::service::metrics::Metrics;
use crate::service::pipeline::Live;
use crate::service::retry::StoreBackoff;
use crate::service::store::{Enqueued, Prune, Pruned, Store, StoreError, WorkItem};

/// The decision a verdict carries: what has to change for a new post. Numbers that wobble
/// between diagnoses (busy 99.1% vs 99.3%) do not.
///
/// The key is persisted (each destination's `group_state.verdict_key`): a key that changed
/// across an upgrade would re-post every open verdict. So every name in it is fixed: status
/// and finding by their names in the verdict schema, hazards by [`hazard_kind_key`] and
/// [`severity_key`].
pub fn verdict_key(v: &Verdict) -> String {
    let culprit = v.culprit.as_ref().map(|c| (c.vertex_id.as_str(), c.subtasks.clone()));
    let hazards: Vec<(&str, &str, Option<&str>)> =
        v.hazards.iter().map(|h| (hazard_kind_key(h.kind), severity_key(h.severity), h.topic.as_deref())).collect();
    sha256_hex(
        &serde_json::json!({
            "status": v.status, "finding": v.finding, "culprit": culprit, "hazards": hazards
        })
        .to_string(),
    )
}

/// A hazard kind's name in [`verdict_key`]: frozen. These are the names the keys of 0.1.0
/// were built from (the variants' Debug text then), kept as literals so that renaming a
/// variant cannot change a persisted key. A new kind gets a new name here.
const fn hazard_kind_key(kind: HazardKind) -> &'static str {
    match kind {
        HazardKind::Retention => "Retention",
        HazardKind::CheckpointsStalled => "CheckpointsStalled",
        HazardKind::CheckpointTimeout => "CheckpointTimeout",
    }
}

/// A severity's name in [`verdict_key`]: frozen, as [`hazard_kind_key`].
const fn severity_key(severity: Severity) -> &'static str {
    match severity {
        Severity::Warning => "Warning",
        Severity::Critical => "Critical",
    }
}

const RESOLVED: &str = "resolved";

/// What a diagnosis came to.
#[derive(Clone, Copy)]
pub enum Outcome<'a> {
    Verdict(&'a Verdict),
    CouldNotDiagnose(&'a str),
}

/// Everything a finished diagnosis hands to [`plan_notices`] besides the last verdicts.
pub struct NoticePlan<'a> {
    pub item: &'a WorkItem,
    pub outcome: Outcome<'a>,
    pub job: &'a JobRef,
    /// Destinations by name, with whether they re-post an unchanged verdict (Alertmanager).
    pub destinations: &'a [(String, bool)],
    pub verdict_id: Option<i64>,
    pub verdict_url: Option<String>,
    pub notify_resolved: bool,
    pub now_ms: i64,
}

pub use episode::{content_key, plan_notices};

/// How often finished rows are pruned ([`crate::config::StoreConfig::prune_after`],
/// `keep_rows`), the first time at start.
pub const PRUNE_EVERY: Duration = Duration::from_secs(600);

/// The service's clock. Scheduling (due times, backoff) and the notices' times read it.
#[derive(Debug, Clone, Copy)]
pub enum Clock {
    /// The system's wall clock.
    System,
    /// Wall time at start, then advancing with tokio's clock: tests pause and advance it
    /// (tokio's `test-util`), and every due time in the store follows.
    Tokio { base_ms: i64, start: tokio::time::Instant },
}

impl Clock {
    /// A clock that starts at the wall time now and then follows tokio's clock.
    pub fn tokio() -> Clock {
        Clock::Tokio { base_ms: jiff::Timestamp::now().as_millisecond(), start: tokio::time::Instant::now() }
    }

    /// Now, Unix ms.
    pub fn now_ms(&self) -> i64 {
        match self {
            Clock::System => jiff::Timestamp::now().as_millisecond(),
            Clock::Tokio { base_ms, start } => base_ms + start.elapsed().as_millis() as i64,
        }
    }
}

/// Everything the running service shares.
pub struct Service {
    pub config: Config,
    pub store: Store,
    pub live: Live,
    /// Where notices go, in the order of the configuration.
    pub destinations: Vec<Arc<dyn Destination>>,
    pub metrics: Arc<Metrics>,
    pub clock: Clock,
    /// Every configured secret in every wire form: removed from whatever the service
    /// stores, answers or posts (each client redacts its own as well).
    pub redactor: crate::model::secret::Redactor,
    /// The key of signed links to verdict pages (`server.link_secret`).
    pub link_key: Option<Vec<u8>>,
    work_ready: Notify,
    /// When the worker next looks at the queue by itself, Unix ms (`i64::MAX` while it
    /// is looking): intake wakes it only for work due before that.
    work_wake_ms: AtomicI64,
    /// The log of refused webhooks, one line per sender per interval.
    refused_log: refusals::OncePerSender,
    /// The log of webhooks read despite an unknown version, the same way.
    version_log: refusals::OncePerSender,
    /// The log of webhooks refused before their body is read (413, 401, 415), the same way.
    early_refused_log: refusals::RefusedLog,
    outbox_ready: Vec<Notify>,
}

/// A webhook's fate, for the HTTP answer.
#[derive(Debug)]
pub enum Intake {
    /// Stored; `jobs` diagnoses asked (0 when no alert is culprit's to diagnose); `ignored`
    /// alerts left out, and why (one sentence per reason); `dropped` jobs beyond
    /// `service.max_jobs_per_webhook` were left out.
    /// `note` says what was read with a doubt (a version culprit does not know).
    Accepted { jobs: usize, ignored: usize, why: Vec<String>, dropped: usize, note: Option<String> },
    /// The body is not a webhook culprit can read: why (the answer adds what is accepted).
    BadRequest(String),
    /// The queue is full: try later (Alertmanager retries 5xx).
    QueueFull,
    /// The sender has as many diagnoses of unknown jobs waiting as it may (or unknown jobs
    /// hold their whole share of the queue): `waiting` of `limit`. Try later (429).
    TooManyUnknown { sender: String, waiting: i64, limit: i64 },
    /// The store failed; why.
    Failed(String),
}

impl Service {
    /// Builds the service: store, live backends, the configured notifiers.
    pub fn new(config: Config) -> Result<Service, String> {
        let destinations =
            Notifier::from_config(&config.notify)?.into_iter().map(|n| Arc::new(n) as Arc<dyn Destination>).collect();
        Service::with_destinations(config, destinations, Clock::System)
    }

    /// Builds the service with these destinations and clock (tests inject their own).
    pub fn with_destinations(
        config: Config,
        destinations: Vec<Arc<dyn Destination>>,
        clock: Clock,
    ) -> Result<Service, String> {
        let metrics = Arc::new(Metrics::new());
        let local: crate::service::store::LocalClock = Arc::new(move || clock.now_ms());
        let store = Store::open_with_clock(&config.store, metrics.clone(), local).map_err(|e| e.to_string())?;
        store.fold_could_not_diagnose_every(config.notify.could_not_diagnose_every.as_ms());
        if config.incidents.enabled {
            store.read_incidents_within(config.incidents.lookback.as_ms());
        }
        store.deep_queue_beyond(config.service.concurrency);
        let live = Live::new(config.clone()).map_err(|e| e.to_string())?;
        let outbox_ready = destinations.iter().map(|_| Notify::new()).collect();
        let link_key = match &config.server.link_secret {
            Some(s) => {
                let key = s.resolve().map_err(|e| format!("server.link_secret: {e}"))?;
                let key = secrecy::ExposeSecret::expose_secret(&key).as_bytes().to_vec();
                if key.is_empty() {
                    return Err("server.link_secret is empty".into());
                }
                Some(key)
            }
            None => None,
        };
        Ok(Service {
            link_key,
            redactor: config.redactor(),
            config,
            store,
            live,
            destinations,
            metrics,
            clock,
            work_ready: Notify::new(),
            work_wake_ms: AtomicI64::new(i64::MAX),
            outbox_ready,
            refused_log: Default::default(),
            early_refused_log: Default::default(),
            version_log: Default::default(),
        })
    }

    /// Parses, plans and durably stores a webhook (its sender unknown but for its
    /// `externalURL`).
    pub async fn accept_webhook(&self, body: &[u8]) -> Intake {
        self.accept_webhook_from(body, None).await
    }

    /// Logs a webhook refused before its body is read (413, 401, 415) at INFO, once per
    /// peer and kind per interval: the sender drops a 4xx, so the log is the only trace.
    pub fn log_refused(&self, kind: refusals::Refused, peer: Option<std::net::IpAddr>) {
        let sender = intake::sender("", peer);
        if let Some(due) = self.early_refused_log.due(kind, &sender, self.clock.now_ms()) {
            tracing::info!(sender = %due.sender, status = kind.status(), refused_since_last_line = due.left_out,
                reason = kind.reason(), "webhook refused ({}): the sender drops it, so its alerts are not diagnosed",
                kind.status());
        }
    }

    /// Parses, plans and durably stores a webhook that came from `peer`: the sender
    /// ([`intake::sender`]) is its `externalURL`, else the peer address.
    pub async fn accept_webhook_from(&self, body: &[u8], peer: Option<std::net::IpAddr>) -> Intake {
        let webhook = match intake::parse(body) {
            Ok(w) => w,
            Err(e) => {
                let sender = intake::claimed_sender(body, peer);
                if let Some(due) = self.refused_log.due(&sender, self.clock.now_ms()) {
                    tracing::info!(sender = %due.sender, refused_since_last_line = due.left_out,
                        reason = %self.redactor.redact(&e.0), accepted = intake::ACCEPTED,
                        "webhook refused (400): the sender drops it, so its alerts are not diagnosed");
                }
                return Intake::BadRequest(e.0);
            }
        };
        let mut plan = intake::plan(&webhook, &self.config.service);
        let sender = intake::sender(&webhook.external_url, peer);
        let note = webhook.unknown_version().map(|v| {
            // The sender's own string: quoted as JSON escapes it, at most 32 characters.
            let v = serde_json::Value::from(v.chars().take(32).collect::<String>()).to_string();
            let source = webhook.source();
            let note = format!(
                "version {v} is not the version {} {} sends; the payload was read by its shape as that",
                source.version(),
                source.name()
            );
            if let Some(due) = self.version_log.due(&sender, self.clock.now_ms()) {
                tracing::info!(sender = %due.sender, since_last_line = due.left_out, version = %self.redactor.redact(&v),
                    read_as = source.name(), "webhook of an unknown version accepted, read by its shape");
            }
            note
        });
        for i in &mut plan.intakes {
            i.sender = sender.clone();
            i.known = self.in_plans(i);
        }
        let mut why = plan.why_ignored(&self.config.service);
        for (reason, _) in &plan.ignored {
            self.metrics.alert_ignored(reason.as_str());
        }
        if webhook.alerts.is_empty() {
            why.push("the webhook carries no alert".into());
        }
        if !why.is_empty() {
            tracing::info!(group = %webhook.group_key(), receiver = %webhook.receiver, alerts = webhook.alerts.len(),
                jobs = plan.intakes.len(), why = %why.join("; "), "webhook: alerts not diagnosed");
        }
        let (mut intakes, ignored) = (plan.intakes, plan.ignored.len());
        if intakes.is_empty() {
            return Intake::Accepted { jobs: 0, ignored, why, dropped: 0, note };
        }
        let cap = self.config.service.max_jobs_per_webhook;
        let dropped = intakes.len().saturating_sub(cap);
        if dropped > 0 {
            // Firing jobs first (they get verdicts), then as the webhook lists them.
            intakes.sort_by_key(|i| !i.firing);
            intakes.truncate(cap);
            self.metrics.webhook_jobs_dropped.inc_by(dropped as u64);
            tracing::warn!(group_key = %webhook.group_key, jobs = cap + dropped, dropped, max_jobs_per_webhook = cap,
                "a webhook names more Flink jobs than service.max_jobs_per_webhook; the rest are not diagnosed");
        }
        let (now, coalesce) = (self.clock.now_ms(), self.config.service.coalesce.as_ms());
        match self.store.enqueue(intakes, now, coalesce, self.config.store.max_queue).await {
            Ok(Enqueued::Stored { jobs, depth, .. }) => {
                self.metrics.set_queue("work", depth);
                // Waking the worker at every webhook would have it look at the queue (and
                // contend with intake) for work due only after the window.
                if now + coalesce < self.work_wake_ms.load(Ordering::SeqCst) {
                    self.work_ready.notify_one();
                }
                Intake::Accepted { jobs, ignored, why, dropped, note }
            }
            Ok(Enqueued::QueueFull { depth }) => {
                self.metrics.set_queue("work", depth);
                Intake::QueueFull
            }
            Ok(Enqueued::TooManyUnknown { waiting, limit }) => {
                tracing::warn!(sender = ?sender, waiting, limit,
                    "a webhook for jobs culprit does not know refused: too many of them wait (store.max_unknown_per_sender)");
                Intake::TooManyUnknown { sender, waiting, limit }
            }
            Err(e) => Intake::Failed(e.message),
        }
    }

    /// Whether `[flink.plans]` names an intake's job (by id, name, or the alert's job
    /// name, as Flink shows it or as the reporter writes it): such a job is known.
    fn in_plans(&self, i: &intake::Intake) -> bool {
        use crate::model::graph::sanitize_label_value;
        let plans = &self.config.flink.plans;
        if plans.is_empty() {
            return false;
        }
        let name = i.labels.get(&self.config.service.job_name_label);
        [Some(&i.job), name]
            .into_iter()
            .flatten()
            .any(|n| plans.contains_key(n) || plans.keys().any(|k| sanitize_label_value(k) == sanitize_label_value(n)))
    }

    /// Starts the worker, one delivery loop per destination and the pruning; they stop
    /// when `stop` turns true (after finishing what is in hand).
    pub fn spawn(self: &Arc<Self>, stop: watch::Receiver<bool>) -> Vec<tokio::task::JoinHandle<()>> {
        let mut handles = vec![tokio::spawn(self.clone().work_loop(stop.clone()))];
        for i in 0..self.destinations.len() {
            handles.push(tokio::spawn(self.clone().delivery_loop(i, stop.clone())));
        }
        handles.push(tokio::spawn(self.clone().prune_loop(stop)));
        handles
    }

    /// Runs a store operation until it works, waiting with [`StoreBackoff`] between
    /// attempts; `None` when the service stops first. Every failure is logged here and
    /// counted by the store.
    async fn until_stored<T, F, Fut>(&self, what: &str, stop: &watch::Receiver<bool>, mut op: F) -> Option<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        let mut backoff = StoreBackoff::default();
        let mut stop = stop.clone();
        loop {
            match op().await {
                Ok(v) => return Some(v),
                Err(e) => {
                    let wait = backoff.failed();
                    tracing::error!(operation = what, error = %e, kind = e.kind.as_str(), retry_in_ms = wait.as_millis() as u64,
                        "store operation failed; retrying");
                    if *stop.borrow() {
                        return None;
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = stop.changed() => return None,
                    }
                }
            }
        }
    }

    /// Prunes finished rows every [`PRUNE_EVERY`].
    async fn prune_loop(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        loop {
            let cfg = &self.config.store;
            let policy = Prune {
                now_ms: self.clock.now_ms(),
                older_than_ms: cfg.prune_after.as_ms(),
                keep_rows: i64::try_from(cfg.keep_rows).unwrap_or(i64::MAX),
                verdicts_kept: i64::try_from(cfg.verdicts_kept).unwrap_or(i64::MAX),
            };
            match self.store.prune(policy).await {
                Ok(p) => {
                    for (table, n) in [
                        ("outbox", p.outbox),
                        ("group_state", p.group_state),
                        ("verdicts", p.verdicts),
                        ("dead_letter", p.dead_letters),
                    ] {
                        self.metrics.store_pruned(table, n as u64);
                    }
                    if p != Pruned::default() {
                        tracing::info!(
                            outbox = p.outbox,
                            group_state = p.group_state,
                            verdicts = p.verdicts,
                            dead_letters = p.dead_letters,
                            "pruned finished rows"
                        );
                    }
                }
                Err(e) => tracing::error!(error = %e, "cannot prune the store; trying again later"),
            }
            tokio::select! {
                _ = tokio::time::sleep(PRUNE_EVERY) => {}
                _ = stop.changed() => {}
            }
            // A dropped sender (the application gone without `stop`) ends it too, or
            // `changed()` would return at once, forever.
            if *stop.borrow() || stop.has_changed().is_err() {
                break;
            }
        }
    }

    /// Labels of a request: `cluster=` chooses the Flink cluster by name.
    pub fn request_labels(cluster: Option<&str>) -> BTreeMap<String, String> {
        cluster
            .map(|c| [(crate::config::CLUSTER_CHOICE.to_string(), c.to_string())].into_iter().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict() -> Verdict {
        crate::samples::captures::verdict(&crate::samples::captures::CAPTURES[0]).unwrap()
    }

    /// A verdict with every hazard kind at every severity, one with a topic, and a culprit
    /// with subtasks: each part of the key.
    fn verdict_with_every_hazard() -> Verdict {
        use crate::model::verdict::Hazard;
        let mut v = verdict();
        v.status = crate::model::verdict::Status::CulpritFound;
        v.finding = crate::model::verdict::Finding::Sink;
        let c = v.culprit.as_mut().expect("the first capture has a culprit");
        c.vertex_id = "d8a5e28bc4dd8a0bfa2c0b5eb5d6be20".into();
        c.subtasks = vec![0, 3];
        let hazard = |kind, severity, topic: Option<&str>| Hazard {
            kind,
            severity,
            time_to_loss_seconds: Some(60),
            topic: topic.map(str::to_string),
            time_to_timeout_seconds: None,
            detail: "d".into(),
        };
        v.hazards = vec![
            hazard(HazardKind::Retention, Severity::Critical, Some("orders")),
            hazard(HazardKind::Retention, Severity::Warning, None),
            hazard(HazardKind::CheckpointsStalled, Severity::Warning, None),
            hazard(HazardKind::CheckpointsStalled, Severity::Critical, None),
        ];
        v
    }

    #[test]
    fn the_verdict_key_of_a_fixed_verdict_is_the_key_persisted_before_and_never_changes() {
        // The key 0.1.x computed (from the variants' Debug text) and stored in every
        // destination's group_state: a different key here re-posts every open verdict after
        // an upgrade. By hand: sha256 of the compact JSON, keys sorted,
        // {"culprit":["d8a5e28bc4dd8a0bfa2c0b5eb5d6be20",[0,3]],"finding":"sink","hazards":
        // [["Retention","Critical","orders"],["Retention","Warning",null],
        // ["CheckpointsStalled","Warning",null],["CheckpointsStalled","Critical",null]],
        // "status":"culprit_found"} (python3 hashlib gives the same).
        assert_eq!(
            verdict_key(&verdict_with_every_hazard()),
            "c97afacd9bcc5eff46d483862d5c85aec0372bd710aa47406a78e15999c08451"
        );
    }

    #[test]
    fn the_verdict_key_names_are_what_debug_text_gave_for_every_variant_today() {
        // The key as it was built before the names were frozen, for each variant: equal, so
        // the frozen names changed no key. (Should a variant be renamed, its old name stays in
        // hazard_kind_key / severity_key and the Debug text here gives way to that literal.)
        let old_key = |v: &Verdict| {
            let culprit = v.culprit.as_ref().map(|c| (c.vertex_id.as_str(), c.subtasks.clone()));
            let hazards: Vec<(String, String, Option<&str>)> = v
                .hazards
                .iter()
                .map(|h| (format!("{:?}", h.kind), format!("{:?}", h.severity), h.topic.as_deref()))
                .collect();
            sha256_hex(
                &serde_json::json!({
                    "status": v.status, "finding": v.finding, "culprit": culprit, "hazards": hazards
                })
                .to_string(),
            )
        };
        for kind in [HazardKind::Retention, HazardKind::CheckpointsStalled] {
            assert_eq!(hazard_kind_key(kind), format!("{kind:?}"));
        }
        for severity in [Severity::Warning, Severity::Critical] {
            assert_eq!(severity_key(severity), format!("{severity:?}"));
        }
        let v = verdict_with_every_hazard();
        assert_eq!(verdict_key(&v), old_key(&v));
        for h in &v.hazards {
            let mut one = v.clone();
            one.hazards = vec![h.clone()];
            assert_eq!(verdict_key(&one), old_key(&one), "{h:?}");
        }
        let mut none = v.clone();
        none.hazards.clear();
        none.culprit = None;
        assert_eq!(verdict_key(&none), old_key(&none));
    }

    #[test]
    fn the_verdict_key_ignores_numbers_that_wobble() {
        let a = verdict();
        let mut b = a.clone();
        b.summary.push_str(" (busy 99.3%)");
        b.evidence.clear();
        assert_eq!(verdict_key(&a), verdict_key(&b));
        b.finding = crate::model::verdict::Finding::Headroom;
        assert_ne!(verdict_key(&a), verdict_key(&b));
    }
}
