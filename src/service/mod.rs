//! `culprit serve`: the service, the one module that wires collection to notification.
//!
//! * [`server`]: the HTTP side (axum): webhook, API, health, metrics.
//! * [`intake`]: Alertmanager webhooks in, per-job diagnosis requests out (pure).
//! * [`store`]: the durable queue and outbox (SQLite, WAL).
//! * [`pipeline`]: a live diagnosis: Prometheus and Flink REST, then the pure diagnosis.
//! * [`metrics`]: culprit's own metrics.
//!
//! Webhooks are planned into per-job intakes ([`intake`]) and stored durably
//! ([`store`]); a worker loop diagnoses due jobs ([`pipeline::Live`]) and
//! turns each verdict into notices for every destination in one transaction; one delivery
//! loop per destination sends them in order, with the retry and backoff of every
//! destination in one place ([`delivery_delay`]), honouring `Retry-After`.
//!
//! Once-only: notices carry an idempotency key per (destination, group, verdict); the
//! outbox stores each key once; a repeat notification with an unchanged verdict posts
//! nothing; a send interrupted by a crash is checked with the destination before it is
//! sent again.

pub mod intake;
pub mod metrics;
pub mod pipeline;
pub mod server;
pub mod store;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{Notify, Semaphore, watch};

use crate::collect::collector::CollectError;
use crate::config::Config;
use crate::model::notice::{Notice, NoticeKind};
use crate::model::request::DiagnosisRequest;
use crate::model::verdict::{JobRef, Verdict};
use crate::notify::Notifier;
use crate::service::intake::sha256_hex;
use crate::service::pipeline::{Live, PipelineError};
use crate::service::store::{NewNotice, Store, WorkItem};

fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// The decision a verdict carries: what has to change for a new post. Numbers that wobble
/// between diagnoses (busy 99.1% vs 99.3%) do not.
pub fn verdict_key(v: &Verdict) -> String {
    let culprit = v.culprit.as_ref().map(|c| (c.vertex_id.as_str(), c.subtasks.clone()));
    let hazards: Vec<(String, String, Option<&str>)> =
        v.hazards.iter().map(|h| (format!("{:?}", h.kind), format!("{:?}", h.severity), h.topic.as_deref())).collect();
    sha256_hex(
        &serde_json::json!({
            "status": v.status, "finding": v.finding, "culprit": culprit, "hazards": hazards
        })
        .to_string(),
    )
}

const RESOLVED: &str = "resolved";

/// What a diagnosis came to.
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

/// The notices a finished diagnosis gives, per group and destination (pure).
///
/// * firing group, verdict unchanged since the last post to that destination: nothing
///   (Alertmanager excepted: culprit's alert is re-posted to stay alive while the source
///   fires);
/// * firing group, new or changed verdict: a `Verdict` notice;
/// * resolved group that had a verdict: a `Resolved` notice (when configured).
pub fn plan_notices(plan: &NoticePlan<'_>, last_verdict: &dyn Fn(&str, &str) -> Option<String>) -> Vec<NewNotice> {
    let (item, outcome, job, destinations) = (plan.item, &plan.outcome, plan.job, plan.destinations);
    let (verdict_id, verdict_url, notify_resolved, now_ms) =
        (plan.verdict_id, &plan.verdict_url, plan.notify_resolved, plan.now_ms);
    let mut out = Vec::new();
    let key = match outcome {
        Outcome::Verdict(v) => verdict_key(v),
        Outcome::CouldNotDiagnose(reason) => format!("could-not-diagnose:{}", sha256_hex(reason)),
    };
    for (group_key, info) in &item.groups {
        for (dest, refreshes) in destinations {
            let prev = last_verdict(dest, group_key);
            let had_verdict = prev.as_deref().is_some_and(|p| p != RESOLVED);
            let base = Notice {
                kind: NoticeKind::Verdict,
                group_key: group_key.clone(),
                labels: info.labels.clone(),
                job: job.clone(),
                verdict: None,
                verdict_id,
                verdict_url: verdict_url.clone(),
                reason: None,
                firing: info.firing,
                changed: false,
                idempotency_key: String::new(),
                at_ms: now_ms,
            };
            if info.firing {
                let unchanged = prev.as_deref() == Some(key.as_str());
                if unchanged && !refreshes {
                    continue;
                }
                let mut n = base;
                match outcome {
                    Outcome::Verdict(v) => n.verdict = Some((*v).clone()),
                    Outcome::CouldNotDiagnose(reason) => {
                        n.kind = NoticeKind::CouldNotDiagnose;
                        n.reason = Some(reason.to_string());
                    }
                }
                n.changed = had_verdict && !unchanged;
                // A re-post of an unchanged verdict is new each processing; otherwise the
                // key is the same however often this diagnosis is replayed.
                let salt = if unchanged { item.id.to_string() } else { prev.clone().unwrap_or_default() };
                n.idempotency_key = sha256_hex(&format!("{dest}\u{1f}{group_key}\u{1f}{key}\u{1f}{salt}"));
                out.push(NewNotice { destination: dest.clone(), notice: n, remember_verdict: Some(key.clone()) });
            } else if notify_resolved && had_verdict {
                let mut n = base;
                n.kind = NoticeKind::Resolved;
                n.verdict_id = None;
                n.verdict_url = None;
                let prev = prev.unwrap_or_default();
                n.idempotency_key = sha256_hex(&format!("{dest}\u{1f}{group_key}\u{1f}{RESOLVED}\u{1f}{prev}"));
                out.push(NewNotice { destination: dest.clone(), notice: n, remember_verdict: Some(RESOLVED.into()) });
            }
        }
    }
    out
}

/// Retry and backoff of deliveries, for every destination: the destination's
/// `Retry-After` when given, else `min · 2^(attempts−1)` capped at `max`.
pub fn delivery_delay(attempts: i64, retry_after: Option<Duration>, min: Duration, max: Duration) -> Duration {
    if let Some(d) = retry_after {
        // The destination knows best, within reason: at most an hour.
        return d.min(Duration::from_secs(3600));
    }
    let exp = min.saturating_mul(1u32 << attempts.clamp(1, 20).saturating_sub(1) as u32);
    exp.min(max)
}

/// Everything the running service shares.
pub struct Service {
    pub config: Config,
    pub store: Store,
    pub live: Live,
    pub notifiers: Vec<Notifier>,
    pub metrics: crate::service::metrics::Metrics,
    /// Every configured secret in every wire form: removed from whatever the service
    /// stores, answers or posts (each client redacts its own as well).
    pub redactor: crate::model::secret::Redactor,
    work_ready: Notify,
    outbox_ready: Vec<Notify>,
}

/// A webhook's fate, for the HTTP answer.
#[derive(Debug)]
pub enum Intake {
    /// Stored; `jobs` diagnoses asked (0 when no alert named a Flink job).
    Accepted { jobs: usize },
    /// The body is not a webhook.
    BadRequest(String),
    /// The queue is full: try later (Alertmanager retries 5xx).
    QueueFull,
    /// The store failed.
    Failed(String),
}

/// What diagnosing a work item came to.
enum Diagnosed {
    /// A verdict to post.
    Verdict(Box<Verdict>),
    /// A failure worth retrying later; why.
    Retry(String),
    /// No verdict, for good; why (empty when unknown).
    GaveUp(String),
    /// Every group of the item resolved: nothing to diagnose.
    Resolved,
}

impl Service {
    /// Builds the service: store, live backends, notifiers.
    pub fn new(config: Config) -> Result<Service, String> {
        let store = Store::open(&config.store).map_err(|e| e.to_string())?;
        let notifiers = Notifier::from_config(&config.notify)?;
        let live = Live::new(config.clone()).map_err(|e| e.to_string())?;
        let outbox_ready = notifiers.iter().map(|_| Notify::new()).collect();
        Ok(Service {
            redactor: config.redactor(),
            config,
            store,
            live,
            notifiers,
            metrics: crate::service::metrics::Metrics::new(),
            work_ready: Notify::new(),
            outbox_ready,
        })
    }

    /// Parses, plans and durably stores a webhook.
    pub async fn accept_webhook(&self, body: &[u8]) -> Intake {
        let webhook = match intake::parse(body) {
            Ok(w) => w,
            Err(e) => return Intake::BadRequest(e.0),
        };
        let intakes = intake::intakes(&webhook, &self.config.service);
        if intakes.is_empty() {
            return Intake::Accepted { jobs: 0 };
        }
        if self.store.queue_full() {
            return Intake::QueueFull;
        }
        match self.store.enqueue(intakes, now_ms(), self.config.service.coalesce.as_ms()).await {
            Ok(jobs) => {
                self.work_ready.notify_one();
                Intake::Accepted { jobs }
            }
            Err(e) => Intake::Failed(e.0),
        }
    }

    /// Starts the worker and one delivery loop per destination; they stop when `stop`
    /// turns true (after finishing the item in hand).
    pub fn spawn(self: &Arc<Self>, stop: watch::Receiver<bool>) -> Vec<tokio::task::JoinHandle<()>> {
        let mut handles = vec![tokio::spawn(self.clone().work_loop(stop.clone()))];
        for i in 0..self.notifiers.len() {
            handles.push(tokio::spawn(self.clone().delivery_loop(i, stop.clone())));
        }
        handles
    }

    async fn work_loop(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        let permits = Arc::new(Semaphore::new(self.config.service.concurrency.max(1)));
        loop {
            if *stop.borrow() {
                break;
            }
            self.metrics.set_queue("work", self.store.queue_depth() as i64);
            let permit = permits.clone().acquire_owned().await.expect("never closed");
            match self.store.claim_due(now_ms()) {
                Ok(Some(item)) => {
                    let me = self.clone();
                    tokio::spawn(async move {
                        me.process(item).await;
                        drop(permit);
                    });
                    continue;
                }
                Ok(None) => drop(permit),
                Err(e) => {
                    drop(permit);
                    tracing::error!(error = %e, "cannot read the work queue");
                }
            }
            let wait = match self.store.next_due_ms() {
                Ok(Some(due)) => Duration::from_millis((due - now_ms()).clamp(5, 1000) as u64),
                _ => Duration::from_secs(1),
            };
            tokio::select! {
                _ = self.work_ready.notified() => {}
                _ = tokio::time::sleep(wait) => {}
                _ = stop.changed() => {}
            }
        }
    }

    /// Diagnoses one job and enqueues the notices, or schedules a retry.
    async fn process(&self, item: WorkItem) {
        let now = now_ms();
        match self.diagnose_item(&item, now).await {
            Diagnosed::Retry(why) => {
                self.metrics.diagnosis_failure("backend");
                let backoff = (1_000i64 << item.attempts.clamp(0, 5)).min(30_000);
                tracing::warn!(job = %item.job, attempt = item.attempts + 1, error = %why, retry_in_ms = backoff, "diagnosis failed; retrying");
                let first_failure = item.first_failure_ms.unwrap_or(now);
                if let Err(e) = self.store.retry_later(&item, now + backoff, first_failure) {
                    tracing::error!(error = %e, "cannot reschedule a diagnosis");
                }
            }
            Diagnosed::GaveUp(reason) => {
                self.metrics.diagnosis_failure("gave_up");
                tracing::warn!(job = %item.job, error = %reason, "could not diagnose");
                let reason = if reason.is_empty() {
                    "the metrics backend did not answer".to_string()
                } else {
                    self.redactor.redact(&reason)
                };
                self.complete(&item, None, Some(reason), now);
            }
            Diagnosed::Verdict(v) => {
                self.metrics.diagnosis("alert", &v);
                tracing::info!(job = %v.job.name, status = v.status.as_str(), finding = v.finding.as_str(),
                    culprit = v.culprit.as_ref().map(|c| c.vertex_name.as_str()).unwrap_or(""), "verdict");
                self.complete(&item, Some(*v), None, now);
            }
            Diagnosed::Resolved => self.complete(&item, None, None, now),
        }
    }

    /// Diagnoses a work item whose groups still fire. A failure is worth retrying while
    /// the retry window (`diagnose_retry_for`) lasts: a source that does not answer, or a
    /// verdict some of whose queries failed; past it, the verdict as it is, or none.
    async fn diagnose_item(&self, item: &WorkItem, now: i64) -> Diagnosed {
        if !item.groups.values().any(|g| g.firing) {
            return Diagnosed::Resolved;
        }
        let started = Instant::now();
        let request = DiagnosisRequest { job: Some(item.job.clone()), at_ms: None, window_ms: None };
        let result = self.live.diagnose(&request, &item.labels, now).await;
        let retry_for = self.config.service.diagnose_retry_for.as_ms();
        let give_up = now - item.first_failure_ms.unwrap_or(now) >= retry_for;
        match result {
            Ok(v) => {
                self.metrics.diagnosis_duration.observe(started.elapsed().as_secs_f64());
                match v.missing.iter().find(|m| m.contains("query failed")) {
                    Some(failed) if !give_up => Diagnosed::Retry(format!("metrics queries failed: {failed}")),
                    _ => Diagnosed::Verdict(Box::new(v)),
                }
            }
            Err(e) => {
                let transient = matches!(e, PipelineError::Collect(CollectError::Source(_)));
                if transient && !give_up { Diagnosed::Retry(e.to_string()) } else { Diagnosed::GaveUp(e.to_string()) }
            }
        }
    }

    /// Stores the verdict (or why there is none) and the notices it gives, in one
    /// transaction, and wakes the delivery loops.
    fn complete(&self, item: &WorkItem, verdict: Option<Verdict>, reason: Option<String>, now: i64) {
        let job = match &verdict {
            Some(v) => v.job.clone(),
            None => JobRef {
                name: item.labels.get(&self.config.service.job_name_label).cloned().unwrap_or_else(|| item.job.clone()),
                id: item.labels.get(&self.config.service.job_id_label).cloned().unwrap_or_default(),
            },
        };
        let destinations: Vec<(String, bool)> =
            self.notifiers.iter().map(|n| (n.name(), matches!(n, Notifier::Alertmanager(_)))).collect();
        let external = self.config.server.external_url.clone();
        let notify_resolved = self.config.service.notify_resolved;
        let notifiers = &self.notifiers;
        let result = self.store.complete(
            item,
            verdict.as_ref(),
            |verdict_id, last| {
                let outcome = match (&verdict, &reason) {
                    (Some(v), _) => Outcome::Verdict(v),
                    (None, Some(r)) => Outcome::CouldNotDiagnose(r),
                    (None, None) => Outcome::CouldNotDiagnose(""),
                };
                let url = match (&external, verdict_id) {
                    (Some(base), Some(id)) => Some(format!("{}/api/v1/verdicts/{id}", base.trim_end_matches('/'))),
                    _ => None,
                };
                let plan = NoticePlan {
                    item,
                    outcome,
                    job: &job,
                    destinations: &destinations,
                    verdict_id,
                    verdict_url: url,
                    notify_resolved,
                    now_ms: now,
                };
                let mut planned = plan_notices(&plan, last);
                // Resolved-only work has no outcome: drop the firing notices it cannot have.
                if verdict.is_none() && reason.is_none() {
                    planned.retain(|n| n.notice.kind == NoticeKind::Resolved);
                }
                planned.retain(|n| {
                    notifiers.iter().find(|x| x.name() == n.destination).is_some_and(|x| x.wants(&n.notice))
                });
                planned
            },
            now,
        );
        match result {
            Ok((_, added)) => {
                if added > 0 {
                    for n in &self.outbox_ready {
                        n.notify_one();
                    }
                }
            }
            Err(e) => tracing::error!(error = %e, job = %item.job, "cannot store the verdict"),
        }
    }

    async fn delivery_loop(self: Arc<Self>, index: usize, mut stop: watch::Receiver<bool>) {
        let notifier = &self.notifiers[index];
        let dest = notifier.name();
        let retry = &self.config.notify.retry;
        let (min, max) =
            (Duration::from_millis(retry.min.as_ms() as u64), Duration::from_millis(retry.max.as_ms() as u64));
        loop {
            if *stop.borrow() {
                break;
            }
            if let Ok(depth) = self.store.outbox_depth() {
                self.metrics.set_queue("outbox", depth);
            }
            let row = match self.store.outbox_head(&dest) {
                Ok(r) => r,
                Err(e) => {
                    tracing::error!(error = %e, destination = %dest, "cannot read the outbox");
                    None
                }
            };
            let Some(row) = row else {
                tokio::select! {
                    _ = self.outbox_ready[index].notified() => {}
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    _ = stop.changed() => {}
                }
                continue;
            };
            let now = now_ms();
            if row.next_ms > now {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis((row.next_ms - now) as u64)) => {}
                    _ = stop.changed() => {}
                }
                continue;
            }
            let group = self.store.group_state(&dest, &row.notice.group_key).unwrap_or_default();
            if row.sending {
                // A crash interrupted this send: ask the destination before sending again.
                if let Ok(Some(sent)) = notifier.already_sent(&row.notice, group.state.as_ref()).await {
                    self.metrics.notification(&dest, "recovered");
                    if let Err(e) = self.store.mark_sent(&row, sent.state.as_ref()) {
                        tracing::error!(error = %e, "cannot record a delivery");
                    }
                    continue;
                }
            }
            if let Err(e) = self.store.mark_sending(row.id) {
                tracing::error!(error = %e, "cannot mark a delivery");
                continue;
            }
            let started = Instant::now();
            let result = notifier.send(&row.notice, group.state.as_ref()).await;
            self.metrics
                .notification_duration
                .get_or_create(&crate::service::metrics::Destination { destination: dest.clone() })
                .observe(started.elapsed().as_secs_f64());
            match result {
                Ok(sent) => {
                    self.metrics.notification(&dest, "sent");
                    tracing::info!(destination = %dest, group = %row.notice.group_key, kind = ?row.notice.kind, "notified");
                    if let Err(e) = self.store.mark_sent(&row, sent.state.as_ref()) {
                        tracing::error!(error = %e, "cannot record a delivery");
                    }
                }
                Err(e) => {
                    let elapsed = now_ms() - row.first_ms;
                    let give_up = elapsed >= retry.give_up_after.as_ms();
                    if e.retryable && !give_up {
                        let delay = delivery_delay(row.attempts + 1, e.retry_after, min, max);
                        self.metrics.notification(&dest, "retry");
                        tracing::warn!(destination = %dest, error = %e, retry_in_ms = delay.as_millis() as u64, "delivery failed; retrying");
                        let error = self.redactor.redact(&e.message);
                        let _ = self.store.mark_retry(row.id, now_ms() + delay.as_millis() as i64, &error);
                    } else {
                        self.metrics.notification(&dest, "failed");
                        tracing::error!(destination = %dest, error = %e, "delivery failed for good");
                        let _ = self.store.mark_failed(row.id, &self.redactor.redact(&e.message));
                    }
                }
            }
        }
    }

    /// Labels of a request (`cluster` picks the Flink cluster).
    pub fn request_labels(cluster: Option<&str>) -> BTreeMap<String, String> {
        cluster.map(|c| [("cluster".to_string(), c.to_string())].into_iter().collect()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::store::GroupInfo;

    fn verdict() -> Verdict {
        crate::samples::captures::verdict(&crate::samples::captures::CAPTURES[0]).unwrap()
    }

    fn item(groups: &[(&str, bool)]) -> WorkItem {
        WorkItem {
            id: 7,
            job_key: "id:j".into(),
            job: "j".into(),
            labels: BTreeMap::new(),
            groups: groups
                .iter()
                .map(|(g, f)| {
                    (g.to_string(), GroupInfo { firing: *f, firing_set: "s".into(), labels: BTreeMap::new() })
                })
                .collect(),
            created_ms: 0,
            attempts: 0,
            first_failure_ms: None,
        }
    }

    fn dests() -> Vec<(String, bool)> {
        vec![("slack".into(), false), ("alertmanager".into(), true)]
    }

    fn job() -> JobRef {
        JobRef { name: "j".into(), id: "i".into() }
    }

    /// Plans the notices of verdict `v` for one group `g` (firing or not), given the
    /// last verdict each destination holds.
    fn plan(
        v: &Verdict,
        firing: bool,
        verdict_id: Option<i64>,
        last: &dyn Fn(&str, &str) -> Option<String>,
    ) -> Vec<NewNotice> {
        let (item, job, dests) = (item(&[("g", firing)]), job(), dests());
        let plan = NoticePlan {
            item: &item,
            outcome: Outcome::Verdict(v),
            job: &job,
            destinations: &dests,
            verdict_id,
            verdict_url: None,
            notify_resolved: true,
            now_ms: 5,
        };
        plan_notices(&plan, last)
    }

    #[test]
    fn a_first_verdict_goes_to_every_destination_and_is_remembered() {
        let v = verdict();
        let n = plan(&v, true, Some(1), &|_, _| None);
        assert_eq!(n.len(), 2);
        assert!(n.iter().all(|x| x.notice.kind == NoticeKind::Verdict && !x.notice.changed));
        assert_eq!(n[0].remember_verdict.as_deref(), Some(verdict_key(&v).as_str()));
    }

    #[test]
    fn a_repeat_with_an_unchanged_verdict_posts_nothing_but_refreshes_the_alertmanager_alert() {
        let v = verdict();
        let key = verdict_key(&v);
        let n = plan(&v, true, None, &|_, _| Some(key.clone()));
        let d: Vec<&str> = n.iter().map(|x| x.destination.as_str()).collect();
        assert_eq!(d, ["alertmanager"]);
    }

    #[test]
    fn a_changed_verdict_is_posted_as_changed_with_a_new_idempotency_key() {
        let v = verdict();
        let first = plan(&v, true, None, &|_, _| None);
        let changed = plan(&v, true, None, &|_, _| Some("older".into()));
        assert!(changed[0].notice.changed);
        assert_ne!(first[0].notice.idempotency_key, changed[0].notice.idempotency_key);
    }

    #[test]
    fn replaying_the_same_diagnosis_gives_the_same_idempotency_keys() {
        let v = verdict();
        let plan = || plan(&v, true, Some(3), &|_, _| None);
        let keys = |n: Vec<NewNotice>| n.into_iter().map(|x| x.notice.idempotency_key).collect::<Vec<_>>();
        assert_eq!(keys(plan()), keys(plan()));
    }

    #[test]
    fn a_resolved_group_gets_one_resolved_notice_only_if_it_had_a_verdict() {
        let v = verdict();
        let n = plan(&v, false, None, &|_, _| Some("k".into()));
        assert!(n.iter().all(|x| x.notice.kind == NoticeKind::Resolved) && n.len() == 2);
        let none = plan(&v, false, None, &|_, _| None);
        assert!(none.is_empty());
        let again = plan(&v, false, None, &|_, _| Some(RESOLVED.into()));
        assert!(again.is_empty());
    }

    #[test]
    fn backoff_doubles_to_the_cap_and_retry_after_wins() {
        let (min, max) = (Duration::from_secs(1), Duration::from_secs(60));
        // 1, 2, 4, …, capped at 60.
        assert_eq!(delivery_delay(1, None, min, max), Duration::from_secs(1));
        assert_eq!(delivery_delay(3, None, min, max), Duration::from_secs(4));
        assert_eq!(delivery_delay(10, None, min, max), Duration::from_secs(60));
        assert_eq!(delivery_delay(1, Some(Duration::from_secs(7)), min, max), Duration::from_secs(7));
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
