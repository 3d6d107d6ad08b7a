//! The worker loop: claims due diagnoses (one running per Flink job), runs them, and
//! stores each outcome with its notices in one transaction.
//!
//! The steps of one item are [`Service::process`] → [`Service::diagnose_item`] (live
//! collect and diagnose; what to do about a failure) → [`Service::finish`] (verdict and
//! notices stored) or a retry stored with [`crate::service::store::Store::retry_work`].
//! A store that fails is retried with backoff at every step; a diagnosis is never run
//! again because its outcome could not be stored (the outcome waits in memory).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use crate::collect::collector::CollectError;
use crate::model::notice::NoticeKind;
use crate::model::request::DiagnosisRequest;
use crate::model::verdict::{JobRef, Verdict};
use crate::service::pipeline::PipelineError;
use crate::service::retry::{StoreBackoff, diagnosis_delay, jitter};
use crate::service::store::{Completed, Completion, LastVerdicts, Plan, Planner, WorkItem};
use crate::service::{NoticePlan, Outcome, Service, episode, intake, plan_notices};

/// The longest the worker sleeps without looking at the queue (a safety net: intake and
/// completions wake it).
const IDLE_POLL: Duration = Duration::from_secs(1);

/// What a finished diagnosis hands to its planner.
struct Planned {
    verdict: Option<Verdict>,
    reason: Option<String>,
    job: JobRef,
    /// Filled by the planner: the resolved groups no destination heard a verdict of (they
    /// resolved before they were diagnosed).
    unseen: Arc<Mutex<Vec<String>>>,
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
    /// Claims and runs due diagnoses, `service.concurrency` at once, until `stop`.
    pub(super) async fn work_loop(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        let permits = Arc::new(Semaphore::new(self.config.service.concurrency.max(1)));
        let mut running = JoinSet::new();
        let mut backoff = StoreBackoff::default();
        loop {
            if *stop.borrow() {
                break;
            }
            while running.try_join_next().is_some() {}
            let permit = tokio::select! {
                p = permits.clone().acquire_owned() => p.expect("never closed"),
                _ = stop.changed() => continue,
            };
            self.work_wake_ms.store(i64::MAX, Ordering::SeqCst);
            let wait = match self.store.claim_work(self.clock.now_ms()).await {
                Ok(Some(item)) => {
                    backoff.reset();
                    let (me, stop) = (self.clone(), stop.clone());
                    running.spawn(async move {
                        me.process(item, stop).await;
                        drop(permit);
                    });
                    continue;
                }
                Ok(None) => {
                    backoff.reset();
                    drop(permit);
                    self.next_work_wait().await
                }
                Err(e) => {
                    drop(permit);
                    let wait = backoff.failed();
                    tracing::error!(error = %e, kind = e.kind.as_str(), retry_in_ms = wait.as_millis() as u64,
                        "cannot claim work from the store; retrying");
                    wait
                }
            };
            self.work_wake_ms.store(self.clock.now_ms() + wait.as_millis() as i64, Ordering::SeqCst);
            tokio::select! {
                _ = self.work_ready.notified() => {}
                _ = tokio::time::sleep(wait) => {}
                _ = stop.changed() => {}
            }
        }
        // Let the diagnoses in hand finish and store their outcome.
        while running.join_next().await.is_some() {}
    }

    /// How long to sleep until the next diagnosis is due.
    async fn next_work_wait(&self) -> Duration {
        match self.store.next_work_ms().await {
            Ok(Some(due)) => {
                Duration::from_millis((due - self.clock.now_ms()).clamp(5, IDLE_POLL.as_millis() as i64) as u64)
            }
            _ => IDLE_POLL,
        }
    }

    /// Diagnoses one job and stores the outcome with its notices, or a retry.
    async fn process(self: Arc<Self>, item: WorkItem, stop: watch::Receiver<bool>) {
        let now = self.clock.now_ms();
        match self.diagnose_item(&item, now).await {
            Diagnosed::Retry(why) => {
                self.metrics.diagnosis_failure("backend");
                let backoff = diagnosis_delay(item.attempts, jitter());
                tracing::warn!(job = ?item.job, attempt = item.attempts + 1, error = %why,
                    retry_in_ms = backoff.as_millis() as u64, "diagnosis failed; retrying");
                let first_failure = item.first_failure_ms.unwrap_or(now);
                let due = now + backoff.as_millis() as i64;
                let stored =
                    self.until_stored("retry_work", &stop, || self.store.retry_work(&item, due, first_failure)).await;
                if stored.is_some() {
                    self.work_ready.notify_one();
                }
            }
            Diagnosed::GaveUp(reason) => {
                self.metrics.diagnosis_failure("gave_up");
                tracing::warn!(job = ?item.job, error = %reason, "could not diagnose");
                let reason = if reason.is_empty() {
                    "the metrics backend did not answer".to_string()
                } else {
                    self.redactor.redact(&reason)
                };
                self.finish(&item, None, Some(reason), now, &stop, None).await;
            }
            Diagnosed::Verdict(v) => {
                self.metrics.diagnosis("alert", &v);
                tracing::info!(job = ?v.job.name, status = v.status.as_str(), finding = v.finding.as_str(),
                    culprit = ?v.culprit.as_ref().map(|c| crate::render::names::vertex_name(&c.vertex_name)).unwrap_or_default(),
                    "verdict");
                let again = self.rediagnose_at(&item, &v, now);
                self.finish(&item, Some(*v), None, now, &stop, again).await;
            }
            Diagnosed::Resolved => self.finish(&item, None, None, now, &stop, None).await,
        }
    }

    /// Says so when groups resolved before any verdict was posted for them: nothing is
    /// posted for them (there is nothing to resolve), and that is a decision, not a loss.
    fn report_resolved_before_diagnosis(&self, item: &WorkItem, groups: &[String]) {
        for group in groups {
            self.metrics.groups_resolved_before_diagnosis.inc();
            tracing::info!(job = ?item.job, group = ?group,
                "the alert group resolved before it was diagnosed; nothing posted");
        }
    }

    /// When to diagnose again after this verdict: once, `service.rediagnose_weak_after`
    /// later, when the verdict is weak and came from a webhook (a follow-up's verdict,
    /// weak or not, is the last word until the next webhook: never a loop).
    fn rediagnose_at(&self, item: &WorkItem, v: &Verdict, now: i64) -> Option<i64> {
        let after = self.config.service.rediagnose_weak_after.as_ms();
        if after <= 0 || item.is_rediagnosis() {
            return None;
        }
        let why = v.weak()?;
        tracing::info!(job = ?v.job.name, weak = %why, again_in_ms = after, "weak verdict; diagnosing it again");
        self.metrics.rediagnoses.inc();
        Some(now + after)
    }

    /// Diagnoses a work item whose groups still fire. A failure is worth retrying while
    /// the retry window (`diagnose_retry_for`) lasts: a source that does not answer, or a
    /// verdict some of whose queries failed; past it, the verdict as it is, or none.
    async fn diagnose_item(&self, item: &WorkItem, now: i64) -> Diagnosed {
        if !item.groups.values().any(|g| g.firing) {
            return Diagnosed::Resolved;
        }
        let started = Instant::now();
        // The alert's labels say which deployment is meant when two share the job id.
        let request =
            DiagnosisRequest { job: Some(item.job.clone()), labels: item.labels.clone(), ..Default::default() };
        let mut result = self.live.diagnosis(&request, &item.labels, now).await;
        // A job_id with no metrics (an alert from an earlier run, a relabelled id) does not
        // keep the alert's job_name from being diagnosed; the verdict says so.
        if let Err(PipelineError::Collect(CollectError::JobNotFound { .. })) = &result
            && let Some(name) = item.labels.get(&self.config.service.job_name_label).filter(|n| **n != item.job)
            && !name.is_empty()
        {
            let by_name = DiagnosisRequest { job: Some(name.clone()), ..request.clone() };
            if let Ok(mut d) = self.live.diagnosis(&by_name, &item.labels, now).await {
                d.verdict.notes.push(format!(
                    "The alert's {} `{}` has no metrics; the job it names, `{name}`, was diagnosed by its name instead",
                    self.config.service.job_id_label, item.job
                ));
                result = Ok(d);
            }
        }
        let retry_for = self.config.service.diagnose_retry_for.as_ms();
        let give_up = now - item.first_failure_ms.unwrap_or(now) >= retry_for;
        match result {
            Ok(d) => {
                self.metrics.diagnosis_duration.observe(started.elapsed().as_secs_f64());
                match failed_queries(&d.missing) {
                    Some(why) if !give_up => Diagnosed::Retry(why),
                    _ => Diagnosed::Verdict(Box::new(d.verdict)),
                }
            }
            Err(e) => {
                let transient = matches!(e, PipelineError::Collect(CollectError::Source(_)));
                if transient && !give_up { Diagnosed::Retry(e.to_string()) } else { Diagnosed::GaveUp(e.to_string()) }
            }
        }
    }

    /// Stores the verdict (or why there is none) and the notices it gives, in one
    /// transaction, retried until it commits, with the follow-up diagnosis due at `again`
    /// if any; then wakes the delivery loops and the worker (the job's next diagnosis may
    /// wait for this one).
    async fn finish(
        self: &Arc<Self>,
        item: &WorkItem,
        verdict: Option<Verdict>,
        reason: Option<String>,
        now: i64,
        stop: &watch::Receiver<bool>,
        again: Option<i64>,
    ) {
        let verdict_json = verdict
            .as_ref()
            .map(|v| (v.job.name.clone(), serde_json::to_string(v).expect("a verdict always serializes")));
        let job = match &verdict {
            Some(v) => v.job.clone(),
            None => self.job_without_verdict(item).await,
        };
        let unseen = Arc::new(Mutex::new(Vec::new()));
        let completed: Option<Completed> = self
            .until_stored("complete", stop, || {
                let completion = Completion {
                    verdict: verdict_json.clone(),
                    plan: self.planner(
                        item,
                        Planned {
                            verdict: verdict.clone(),
                            reason: reason.clone(),
                            job: job.clone(),
                            unseen: unseen.clone(),
                        },
                        now,
                    ),
                    now_ms: now,
                };
                self.store.complete_rediagnosing(item, completion, again)
            })
            .await;
        let Some(completed) = completed else {
            tracing::warn!(job = ?item.job, "stopped before the outcome could be stored; the diagnosis runs again at start");
            return;
        };
        let unseen = std::mem::take(&mut *unseen.lock().unwrap_or_else(|p| p.into_inner()));
        self.report_resolved_before_diagnosis(item, &unseen);
        if completed.notices > 0 {
            for n in &self.outbox_ready {
                n.notify_one();
            }
        }
        self.work_ready.notify_one();
    }

    /// The job of a notice without a verdict (resolved, could not diagnose), named as its
    /// last verdict named it (Flink's name), so that every notice of one job names it the
    /// same way; without an earlier verdict, as the alert's labels do.
    async fn job_without_verdict(&self, item: &WorkItem) -> JobRef {
        let svc = &self.config.service;
        let id = item.labels.get(&svc.job_id_label).filter(|i| intake::is_flink_job_id(i)).cloned();
        let name = item.labels.get(&svc.job_name_label).filter(|n| !n.is_empty()).cloned();
        match self.store.last_verdict_job(id.clone(), name.clone()).await {
            Ok(Some(job)) => job,
            result => {
                if let Err(e) = result {
                    tracing::warn!(error = %e, "cannot read the last verdict of a job");
                }
                JobRef { name: name.unwrap_or_else(|| item.job.clone()), id: id.unwrap_or_default() }
            }
        }
    }

    /// The planning of a finished diagnosis's notices, run inside the completing
    /// transaction with the groups' last verdicts as it sees them.
    fn planner(self: &Arc<Self>, item: &WorkItem, planned: Planned, now: i64) -> Planner {
        let me = self.clone();
        let item = item.clone();
        let Planned { verdict, reason, job, unseen } = planned;
        Box::new(move |verdict_id: Option<i64>, last: &LastVerdicts| -> Plan {
            let job = match &verdict {
                Some(v) => v.job.clone(),
                None => job.clone(),
            };
            let configured: Vec<(String, bool)> = me.destinations.iter().map(|d| (d.name(), d.refreshes())).collect();
            let names: Vec<String> = configured.iter().map(|(d, _)| d.clone()).collect();
            let route = me.config.route.decide(&crate::notify::route::labels_of(&item.labels, &job), &names);
            let outcome = match (&verdict, &reason) {
                (Some(v), _) => Outcome::Verdict(v),
                (None, Some(r)) => Outcome::CouldNotDiagnose(r),
                (None, None) => Outcome::CouldNotDiagnose(""),
            };
            // A signed link to the verdict page when links are signed, else the API's URL.
            let url = match (&me.config.server.external_url, verdict_id, &me.link_key) {
                (Some(base), Some(id), Some(key)) => verdict.as_ref().map(|v| {
                    let binding = crate::service::links::binding(&serde_json::to_value(v).unwrap_or_default());
                    crate::service::links::signed_url(
                        base,
                        key,
                        id,
                        &binding,
                        now,
                        me.config.server.link_expiry.as_ms(),
                    )
                }),
                (Some(base), Some(id), None) => Some(format!("{}/api/v1/verdicts/{id}", base.trim_end_matches('/'))),
                _ => None,
            };
            let recent = last.recent();
            let last = |d: &str, g: &str| last.get(d, g);
            // The route tree picks this job's destinations by its alerts' labels; a
            // destination it no longer picks (the labels changed, another group) but that
            // shows an open episode of the job keeps it, so that its updates and its
            // resolution go where the verdict went. The others plan nothing for it.
            let destinations: Vec<(String, bool)> = {
                let every = NoticePlan {
                    item: &item,
                    outcome,
                    job: &job,
                    destinations: &configured,
                    verdict_id,
                    verdict_url: url.clone(),
                    notify_resolved: me.config.service.notify_resolved,
                    now_ms: now,
                };
                configured
                    .iter()
                    .filter(|(d, _)| route.routes_to(d) || episode::open_episode(&every, d, &last).is_some())
                    .cloned()
                    .collect()
            };
            let plan = NoticePlan {
                item: &item,
                outcome,
                job: &job,
                destinations: &destinations,
                verdict_id,
                verdict_url: url,
                notify_resolved: me.config.service.notify_resolved,
                now_ms: now,
            };
            // Resolved groups no destination was shown anything for (since they last
            // resolved) resolved before their diagnosis (within the coalescing window).
            *unseen.lock().unwrap_or_else(|p| p.into_inner()) = item
                .groups
                .iter()
                .filter(|(g, info)| {
                    !info.firing && destinations.iter().all(|(d, _)| !episode::heard(&plan, d, g, &last))
                })
                .map(|(g, _)| g.clone())
                .collect();
            let mut planned = plan_notices(&plan, &last);
            // Counted with the recent verdicts it may share a cause with (`[incidents]`).
            if me.config.incidents.enabled
                && let (Some(v), Some(id)) = (&verdict, verdict_id)
            {
                // Counted as of now, inside the transaction: verdicts stored one after the other
                // are counted in that order, whenever their diagnoses started.
                let counted_at = me.clock.now_ms().max(now);
                crate::service::incidents::plan(&mut planned, v, id, recent, &me.config.incidents.rules(), counted_at);
            }
            // Resolved-only work has no outcome: it cannot have firing notices.
            if verdict.is_none() && reason.is_none() {
                planned.notices.retain(|n| matches!(n.notice.kind, NoticeKind::Resolved | NoticeKind::GroupResolved));
            }
            // What its routes hold back (a verdict under a confidence floor, "could not
            // diagnose" where a route refuses it) leaves the destination as it was: none of
            // this diagnosis's notices and nothing remembered, so that it is never told of
            // an update or a resolution of a verdict it was not shown, and a verdict it is
            // shown later is a first post. A destination kept only for its open episode
            // takes what the episode brings.
            let held: std::collections::BTreeSet<String> = planned
                .notices
                .iter()
                .filter(|n| route.routes_to(&n.destination) && !route.lets_through(&n.destination, &n.notice))
                .map(|n| n.destination.clone())
                .collect();
            planned.notices.retain(|n| !held.contains(&n.destination));
            planned.remember.retain(|r| !held.contains(&r.destination));
            // What each destination gets is decided above; here, what it takes of it.
            planned.notices.retain(|n| {
                me.destinations.iter().find(|d| d.name() == n.destination).is_some_and(|d| d.wants(&n.notice))
            });
            crate::service::incidents::mark_summaries(&mut planned);
            planned
        })
    }
}

/// Why a verdict is worth diagnosing again: the first signal missing because its query
/// failed (by its reason, never its words), as the retry's reason says it.
fn failed_queries(missing: &[crate::model::snapshot::Missing]) -> Option<String> {
    let failed = missing.iter().find(|m| m.why.is_query_failure())?;
    Some(format!("metrics queries failed: {}", crate::render::words::missing::missing(failed)))
}

#[cfg(test)]
mod failed_query_tests {
    use super::failed_queries;
    use crate::model::snapshot::{Missing, MissingWhy};

    #[test]
    fn a_verdict_is_diagnosed_again_for_a_failed_query_by_its_reason_not_its_words() {
        let said = |detail: &str| Missing { metric: "m".into(), why: MissingWhy::Said { detail: detail.into() } };
        // Words that read like a failure are no failure: nothing to retry.
        assert_eq!(failed_queries(&[said("query failed: as the plan says")]), None);
        assert_eq!(failed_queries(&[Missing { metric: "m".into(), why: MissingWhy::NoSamples }]), None);
        let failed = Missing {
            metric: "busyTimeMsPerSecond".into(),
            why: MissingWhy::query_failed("http://p: HTTP 503 unavailable", None, false),
        };
        // The reason the retry gives is the verdict's words for the entry.
        assert_eq!(
            failed_queries(&[said("x"), failed]).as_deref(),
            Some("metrics queries failed: busyTimeMsPerSecond (query failed: http://p: HTTP 503 unavailable)")
        );
    }
}
