//! The delivery loop of one destination: claims notices per job episode (an episode's in
//! order, one at a time; episodes independently, up to `notify.concurrency` at once),
//! sends each once, and records the outcome — sent, another attempt later (backoff with
//! jitter, or the destination's `Retry-After`), or given up — with its reason.
//!
//! A notice that may already have arrived (a crash mid-send, a timeout) is first checked
//! with the destination where it can tell; when the check itself fails in a way worth
//! retrying, the notice is rescheduled, never sent blind.
//!
//! Fencing: right before each call to the destination (the check, the send) the claim is
//! checked in the store under its token ([`crate::service::store::Store::fence`]): a
//! replica that lost its lease (paused, or cut off from PostgreSQL, past `store.lease`
//! while another replica took the send over) drops the notice instead of sending it; the
//! lease is renewed then to cover [`SEND_LEASE_MARGIN`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::notify::{NotifyError, Sent, fence};
use crate::service::Service;
use crate::service::metrics::Destination as DestinationLabel;
use crate::service::retry::{StoreBackoff, delivery_delay, jitter};
use crate::service::store::OutboxRow;

/// The longest a delivery loop sleeps without looking at its outbox (a safety net:
/// completions and finished deliveries wake it).
const IDLE_POLL: Duration = Duration::from_secs(1);

/// The least lease a send starts with: the longest one request to a destination may take
/// (every notifier's client times out after `REQUEST_TIMEOUT`, 10 s), so that the lease
/// cannot expire while the request is on the wire unless its renewals stop meanwhile.
pub const SEND_LEASE_MARGIN: Duration = crate::notify::webhook::REQUEST_TIMEOUT;

impl Service {
    /// Delivers destination `index`'s outbox until `stop`, then lets sends in flight end.
    pub(super) async fn delivery_loop(self: Arc<Self>, index: usize, mut stop: watch::Receiver<bool>) {
        let name = self.destinations[index].name();
        let mut in_flight = JoinSet::new();
        let mut backoff = StoreBackoff::default();
        let concurrency = self.config.notify.concurrency.max(1);
        loop {
            if *stop.borrow() || stop.has_changed().is_err() {
                break;
            }
            while in_flight.try_join_next().is_some() {}
            let mut wait = None;
            while in_flight.len() < concurrency {
                match self.store.claim_delivery(&name, self.clock.now_ms()).await {
                    Ok(Some(row)) => {
                        backoff.reset();
                        let (me, stop) = (self.clone(), stop.clone());
                        in_flight.spawn(async move { me.deliver(index, row, stop).await });
                    }
                    Ok(None) => {
                        backoff.reset();
                        break;
                    }
                    Err(e) => {
                        let d = backoff.failed();
                        tracing::error!(destination = %name, error = %e, kind = e.kind.as_str(),
                            retry_in_ms = d.as_millis() as u64, "cannot claim a delivery from the store; retrying");
                        wait = Some(d);
                        break;
                    }
                }
            }
            let wait = match wait {
                Some(d) => d,
                None if in_flight.len() >= concurrency => IDLE_POLL,
                None => self.next_delivery_wait(&name).await,
            };
            tokio::select! {
                _ = self.outbox_ready[index].notified() => {}
                _ = tokio::time::sleep(wait) => {}
                Some(_) = in_flight.join_next(), if !in_flight.is_empty() => {}
                _ = stop.changed() => {}
            }
        }
        while in_flight.join_next().await.is_some() {}
    }

    async fn next_delivery_wait(&self, destination: &str) -> Duration {
        match self.store.next_delivery_ms(destination).await {
            Ok(Some(due)) => {
                Duration::from_millis((due - self.clock.now_ms()).clamp(5, IDLE_POLL.as_millis() as i64) as u64)
            }
            _ => IDLE_POLL,
        }
    }

    /// One attempt at one notice, and its outcome stored.
    async fn deliver(self: Arc<Self>, index: usize, row: OutboxRow, stop: watch::Receiver<bool>) {
        let destination = self.destinations[index].clone();
        let name = row.destination.as_str();
        if !self.still_held(&row, &stop).await {
            return;
        }
        let check = self.fence_check(&row);
        let mut incident_notice = row.notice.clone();
        // An incident's summary shows the incident as the store has it now; a verdict that
        // goes into its thread needs the summary's message (also to be looked for there).
        if incident_notice.incident.is_some() {
            let inc = &self.config.incidents;
            let (now, lookback) = (self.clock.now_ms(), inc.lookback.as_ms());
            let filled = crate::service::incidents::fill_for_delivery(
                &self.store,
                name,
                row.group_state.is_some(),
                &mut incident_notice,
                &inc.rules(),
                now,
                lookback,
            )
            .await;
            match filled {
                // A summary shows what the store holds: without it, it is tried again later.
                Err(e) if incident_notice.kind == crate::model::notice::NoticeKind::Incident => {
                    let why = format!("cannot read the incident from the store: {e}");
                    self.record_failure(index, &row, NotifyError::retry(why, None), false, &stop).await;
                    return;
                }
                Err(e) => {
                    tracing::warn!(destination = %name, error = %e, "cannot read the incident's summary from the store; posting the verdict on its own");
                }
                Ok(()) => {}
            }
        }
        if row.unsure {
            let asked = destination.already_sent(&incident_notice, row.group_state.as_ref());
            match self.paced(fence::scoped(check.clone(), asked)).await {
                Ok(Some(sent)) => {
                    self.metrics.notification(name, "recovered");
                    tracing::info!(destination = %name, group = ?row.notice.group_key, "found already delivered; not sent again");
                    self.record_sent(index, &row, sent, &stop).await;
                    return;
                }
                Ok(None) => {}
                Err(e) if e.retryable => {
                    // Sending now could post it twice: ask again later instead.
                    self.record_failure(index, &row, e, true, &stop).await;
                    return;
                }
                Err(e) => {
                    tracing::warn!(destination = %name, group = ?row.notice.group_key, error = %e,
                        "cannot tell whether the notice already arrived; sending it again");
                }
            }
        }
        if row.unsure && !self.still_held(&row, &stop).await {
            return;
        }
        // Still unsure here: the destination could not say whether the earlier attempt
        // arrived, so the notice goes out marked as a possible repeat (a destination
        // without a dedup key of its own shows the mark; the others fold it by their key).
        let notice = crate::model::notice::Notice { maybe_repeat: row.unsure, ..incident_notice };
        let started = Instant::now();
        let result = self.paced(fence::scoped(check, destination.send(&notice, row.group_state.as_ref()))).await;
        self.metrics
            .notification_duration
            .get_or_create(&DestinationLabel { destination: name.to_string() })
            .observe(started.elapsed().as_secs_f64());
        match result {
            Ok(sent) => {
                self.metrics.notification(name, "sent");
                tracing::info!(destination = %name, group = ?row.notice.group_key, kind = ?row.notice.kind,
                    attempt = row.attempts, "notified");
                self.record_sent(index, &row, sent, &stop).await;
            }
            Err(e) => {
                let unsure = e.reason.maybe_delivered();
                self.record_failure(index, &row, e, unsure, &stop).await;
            }
        }
    }

    /// Whether this process still holds the claim on `row` (its fencing token, a lease
    /// not expired by the database's clock), renewed to cover a send. The store is asked
    /// until it answers: a send is never made on a claim that could not be checked.
    async fn still_held(&self, row: &OutboxRow, stop: &watch::Receiver<bool>) -> bool {
        let margin = SEND_LEASE_MARGIN.as_millis() as i64;
        let held = self.until_stored("fence", stop, || self.store.fence(row, self.clock.now_ms(), margin)).await;
        match held {
            Some(true) => true,
            Some(false) => {
                self.metrics.notification(&row.destination, "fenced");
                tracing::warn!(destination = %row.destination, group = ?row.notice.group_key, outbox = row.id,
                    "the lease on this send was lost (another replica takes it over); not sent from here");
                false
            }
            // Stopping: the claim expires and the send is checked or made after a restart.
            None => false,
        }
    }

    /// Runs a send with the replicas' pacing ledger ([`crate::notify::pace`]) when the
    /// store is shared (PostgreSQL): each paced request of it takes its slot there.
    async fn paced<F: std::future::Future>(self: &Arc<Self>, send: F) -> F::Output {
        if !self.store.paces_replicas() {
            return send.await;
        }
        let me = self.clone();
        let ledger: crate::notify::pace::Ledger = Arc::new(move |scope, interval| {
            let me = me.clone();
            Box::pin(async move {
                let wait = me.store.reserve_pace(&scope, interval.as_millis() as i64).await.ok().flatten()?;
                Some(std::time::Duration::from_millis(wait.max(0) as u64))
            })
        });
        crate::notify::pace::scoped(ledger, send).await
    }

    /// The check a send's later requests make ([`crate::notify::fence`]): one look at the
    /// store, no retry (a store that cannot answer stops the send where it is; the next
    /// attempt asks the destination first).
    fn fence_check(self: &Arc<Self>, row: &OutboxRow) -> fence::Check {
        let (me, row) = (self.clone(), row.clone());
        Arc::new(move || {
            let (me, row) = (me.clone(), row.clone());
            Box::pin(async move {
                let margin = SEND_LEASE_MARGIN.as_millis() as i64;
                me.store.fence(&row, me.clock.now_ms(), margin).await.unwrap_or(false)
            })
        })
    }

    async fn record_sent(&self, index: usize, row: &OutboxRow, sent: Sent, stop: &watch::Receiver<bool>) {
        let now = self.clock.now_ms();
        self.until_stored("record_delivery", stop, || self.store.delivered(row, sent.state.clone(), now)).await;
        // The group's next notice may be claimed now.
        self.outbox_ready[index].notify_one();
    }

    /// Another attempt later, or none: retryable failures are retried until
    /// `notify.retry.give_up_after` since the first attempt. `unsure`: the attempt may
    /// have arrived, so the next one asks first.
    async fn record_failure(
        &self,
        index: usize,
        row: &OutboxRow,
        e: NotifyError,
        unsure: bool,
        stop: &watch::Receiver<bool>,
    ) {
        let retry = &self.config.notify.retry;
        let (min, max) =
            (Duration::from_millis(retry.min.as_ms() as u64), Duration::from_millis(retry.max.as_ms() as u64));
        let now = self.clock.now_ms();
        let name = row.destination.as_str();
        let reason = e.reason.as_str();
        if e.reason == crate::notify::FailureReason::Deferred {
            // Asked for later, not failed: no backoff, no failure counted, no give-up.
            let after = e.retry_after.unwrap_or(min);
            self.metrics.notification(name, "deferred");
            tracing::debug!(destination = %name, group = ?row.notice.group_key, after_ms = after.as_millis() as u64,
                why = %e.message, "delivery deferred");
            let next = now + after.as_millis() as i64;
            self.until_stored("record_delivery", stop, || self.store.retry_delivery(row, next, "", unsure)).await;
            self.outbox_ready[index].notify_one();
            return;
        }
        let give_up = now - row.first_ms >= retry.give_up_after.as_ms();
        if e.retryable && !give_up {
            let delay = delivery_delay(row.attempts, e.retry_after, min, max, jitter());
            self.metrics.notification(name, "retry");
            self.metrics.notification_failure(name, reason, false);
            tracing::warn!(destination = %name, group = ?row.notice.group_key, attempt = row.attempts, reason,
                retry_after_ms = e.retry_after.map(|d| d.as_millis() as u64), retry_in_ms = delay.as_millis() as u64,
                error = %e, "delivery failed; retrying");
            let next = now + delay.as_millis() as i64;
            let error = self.redactor.redact(&e.message);
            self.until_stored("record_delivery", stop, || self.store.retry_delivery(row, next, &error, unsure)).await;
        } else {
            self.metrics.notification(name, "failed");
            self.metrics.notification_failure(name, reason, true);
            let why = if e.retryable { "retried for notify.retry.give_up_after" } else { "not retryable" };
            tracing::error!(destination = %name, group = ?row.notice.group_key, attempt = row.attempts, reason,
                error = %e, why, "delivery failed for good");
            let error = self.redactor.redact(&e.message);
            self.until_stored("record_delivery", stop, || self.store.fail_delivery(row, &error, now)).await;
        }
        self.outbox_ready[index].notify_one();
    }
}

#[cfg(test)]
#[path = "delivery_tests.rs"]
mod tests;
