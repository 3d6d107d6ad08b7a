//! The delivery loop against scripted destinations, on paused time (tokio `test-util`):
//! retries, backoff and jitter, `Retry-After`, per-group order, priorities, and the check
//! before re-sending a notice that may have arrived. The store is a real SQLite file.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::time::Instant;

use crate::config::{Config, Millis};
use crate::model::notice::{Notice, NoticeKind};
use crate::model::verdict::JobRef;
use crate::notify::{Destination, FailureReason, NotifyError, Sent};
use crate::service::intake::Intake as JobIntake;
use crate::service::store::{Completion, NewNotice};
use crate::service::{Clock, Service};

/// What a scripted send does.
#[derive(Clone)]
enum Step {
    Ok,
    Fail(NotifyError),
    /// Answers after this long (a slow destination).
    Slow(Duration),
}

/// A destination that answers from a script per group (default: delivered at once) and
/// records every call with the (paused) time it was made.
#[derive(Default)]
struct Scripted {
    sends: Mutex<HashMap<String, VecDeque<Step>>>,
    checks: Mutex<VecDeque<Result<Option<Sent>, NotifyError>>>,
    sent: Mutex<Vec<(Duration, String)>>,
    checked: Mutex<Vec<String>>,
    /// `maybe_repeat` of each send, in order.
    repeats: Mutex<Vec<bool>>,
    start: Mutex<Option<Instant>>,
}

impl Scripted {
    fn script(&self, group: &str, steps: Vec<Step>) {
        self.sends.lock().unwrap().insert(group.into(), steps.into());
    }
    fn elapsed(&self) -> Duration {
        self.start.lock().unwrap().get_or_insert_with(Instant::now).elapsed()
    }
    /// Idempotency keys in the order sent, with the time since the start.
    fn sent(&self) -> Vec<(Duration, String)> {
        self.sent.lock().unwrap().clone()
    }
    fn keys(&self) -> Vec<String> {
        self.sent().into_iter().map(|(_, k)| k).collect()
    }
}

impl Destination for Scripted {
    fn name(&self) -> String {
        "scripted".into()
    }
    fn wants(&self, _: &Notice) -> bool {
        true
    }
    fn send<'a>(&'a self, n: &'a Notice, _: Option<&'a serde_json::Value>) -> BoxFuture<'a, Result<Sent, NotifyError>> {
        Box::pin(async move {
            let at = self.elapsed();
            self.sent.lock().unwrap().push((at, n.idempotency_key.clone()));
            self.repeats.lock().unwrap().push(n.maybe_repeat);
            let step = self.sends.lock().unwrap().get_mut(&n.group_key).and_then(VecDeque::pop_front);
            match step.unwrap_or(Step::Ok) {
                Step::Ok => Ok(Sent::default()),
                Step::Fail(e) => Err(e),
                Step::Slow(d) => {
                    tokio::time::sleep(d).await;
                    Ok(Sent::default())
                }
            }
        })
    }
    fn already_sent<'a>(
        &'a self,
        n: &'a Notice,
        _: Option<&'a serde_json::Value>,
    ) -> BoxFuture<'a, Result<Option<Sent>, NotifyError>> {
        Box::pin(async move {
            self.checked.lock().unwrap().push(n.idempotency_key.clone());
            self.checks.lock().unwrap().pop_front().unwrap_or(Ok(None))
        })
    }
    /// The delivery loop never probes (that is `check-config --connect`).
    fn probe(&self) -> BoxFuture<'_, Result<String, NotifyError>> {
        Box::pin(async { Ok("scripted".to_string()) })
    }
}

fn notice(kind: NoticeKind, group: &str, key: &str) -> Notice {
    Notice {
        links: Default::default(),
        kind,
        group_key: group.into(),
        labels: BTreeMap::new(),
        job: JobRef { name: "j".into(), id: "i".into() },
        verdict: None,
        verdict_id: None,
        verdict_url: None,
        reason: None,
        firing: true,
        changed: false,
        idempotency_key: key.into(),
        at_ms: 0,
        episode: Default::default(),
        maybe_repeat: false,
        incident: None,
        incident_view: None,
        incident_parent: None,
    }
}

struct Harness {
    service: Arc<Service>,
    dest: Arc<Scripted>,
    stop: tokio::sync::watch::Sender<bool>,
    _dir: tempfile::TempDir,
}

/// A service with one scripted destination; `retry` is (min, max, give_up_after).
fn harness(concurrency: usize, retry: (i64, i64, i64)) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.store.path = dir.path().join("culprit.db");
    config.notify.concurrency = concurrency;
    config.notify.retry.min = Millis(retry.0);
    config.notify.retry.max = Millis(retry.1);
    config.notify.retry.give_up_after = Millis(retry.2);
    let dest = Arc::new(Scripted::default());
    let service =
        Service::with_destinations(config, vec![dest.clone() as Arc<dyn Destination>], Clock::tokio()).unwrap();
    let (stop, _) = tokio::sync::watch::channel(false);
    Harness { service: Arc::new(service), dest, stop, _dir: dir }
}

impl Harness {
    /// Puts notices in the outbox as a finished diagnosis does.
    async fn enqueue(&self, notices: Vec<Notice>) {
        let store = &self.service.store;
        let now = self.service.clock.now_ms();
        let intake = JobIntake {
            links: Default::default(),
            job_key: "id:j".into(),
            job: "j".into(),
            group_key: "g".into(),
            firing: true,
            firing_set: String::new(),
            labels: BTreeMap::new(),
            sender: String::new(),
            known: true,
        };
        store.enqueue(vec![intake], now, 0, 10).await.unwrap();
        let item = store.claim_work(now).await.unwrap().unwrap();
        let notices: Vec<NewNotice> = notices
            .into_iter()
            .map(|n| NewNotice { destination: "scripted".into(), notice: n, remember_verdict: None })
            .collect();
        store
            .complete(&item, Completion { verdict: None, plan: Box::new(move |_, _| notices.into()), now_ms: now })
            .await
            .unwrap();
    }

    fn start(&self) {
        self.dest.elapsed();
        tokio::spawn(self.service.clone().delivery_loop(0, self.stop.subscribe()));
    }

    /// Waits (in paused time) until the outbox is empty.
    async fn drained(&self) {
        for _ in 0..100_000 {
            if self.service.store.depths().await.unwrap().outbox == 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the outbox never drained: sent {:?}", self.dest.sent());
    }

    fn metrics(&self) -> String {
        self.service.metrics.encode()
    }
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_holds_its_own_group_only_and_the_group_keeps_its_order() {
    let h = harness(4, (1_000, 60_000, 3_600_000));
    h.dest.script(
        "a",
        vec![Step::Fail(NotifyError::retry("429", Some(Duration::from_secs(30))).because(FailureReason::RateLimited))],
    );
    h.enqueue(vec![
        notice(NoticeKind::Verdict, "a", "a1"),
        notice(NoticeKind::Resolved, "a", "a2"),
        notice(NoticeKind::Verdict, "b", "b1"),
    ])
    .await;
    h.start();
    h.drained().await;
    let sent = h.dest.sent();
    let at = |k: &str| sent.iter().filter(|(_, x)| x == k).map(|(t, _)| secs(*t)).collect::<Vec<_>>();
    // b1 goes at once, untouched by a's Retry-After.
    assert!(at("b1")[0] < 1.0, "{sent:?}");
    // a1: refused at 0 s, sent again after 30 s (+ at most 10 %: 33 s); a2 only after it.
    let a1 = at("a1");
    assert_eq!(a1.len(), 2, "{sent:?}");
    assert!(a1[1] >= 30.0 && a1[1] <= 33.1, "{sent:?}");
    assert!(at("a2")[0] >= a1[1], "{sent:?}");
    assert!(h.metrics().contains(
        "culprit_notification_failures_total{destination=\"scripted\",reason=\"rate_limited\",outcome=\"retry\"} 1"
    ));
}

#[tokio::test(start_paused = true)]
async fn failures_back_off_with_jitter_until_the_give_up_time_and_say_why() {
    // min 1 s, max 4 s, give up 20 s after the first attempt.
    let h = harness(4, (1_000, 4_000, 20_000));
    let fail = || Step::Fail(NotifyError::retry("HTTP 503", None));
    h.dest.script("a", (0..100).map(|_| fail()).collect());
    h.enqueue(vec![notice(NoticeKind::Verdict, "a", "a1")]).await;
    h.start();
    h.drained().await;
    let times: Vec<f64> = h.dest.sent().into_iter().map(|(t, _)| secs(t)).collect();
    let gaps: Vec<f64> = times.windows(2).map(|w| w[1] - w[0]).collect();
    // Attempt n waits min·2^(n−1) capped at max, jittered into its upper half:
    // [0.5, 1), [1, 2), [2, 4), then [2, 4) until 20 s have passed.
    let bounds = [(0.5, 1.0), (1.0, 2.0), (2.0, 4.0)];
    for (i, g) in gaps.iter().enumerate() {
        let (lo, hi) = bounds[i.min(2)];
        assert!(*g >= lo - 0.01 && *g < hi + 0.06, "gap {i} = {g}: {times:?}");
    }
    assert!(times.last().unwrap() >= &20.0 && *times.last().unwrap() < 24.1, "{times:?}");
    // Not every gap the same: jitter.
    assert!(gaps[2..].windows(2).any(|w| (w[0] - w[1]).abs() > 1e-3), "{gaps:?}");
    let m = h.metrics();
    let retries = times.len() - 1;
    assert!(m.contains(&format!(
        "culprit_notification_failures_total{{destination=\"scripted\",reason=\"server_error\",outcome=\"retry\"}} {retries}"
    )), "{m}");
    assert!(
        m.contains(
            "culprit_notification_failures_total{destination=\"scripted\",reason=\"server_error\",outcome=\"failed\"} 1"
        ),
        "{m}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_deferred_notice_goes_again_at_the_time_asked_past_the_give_up_time_and_counts_no_failure() {
    // Give up 20 s after the first attempt; a digest deferred by 45 s twice still goes.
    let h = harness(4, (1_000, 4_000, 20_000));
    let later = || Step::Fail(NotifyError::later("the next digest is not due", Duration::from_secs(45)));
    h.dest.script("a", vec![later(), later()]);
    h.enqueue(vec![notice(NoticeKind::Incident, "a", "a1"), notice(NoticeKind::Incident, "a", "a2")]).await;
    h.start();
    h.drained().await;
    let sent = h.dest.sent();
    let times: Vec<f64> = sent.iter().map(|(t, _)| secs(*t)).collect();
    // a1 at 0 s, 45 s (deferred twice: exactly as asked, no jitter), 90 s (sent); a2 after.
    assert_eq!(sent.iter().filter(|(_, k)| k == "a1").count(), 3, "{sent:?}");
    assert!((times[1] - 45.0).abs() < 0.2 && (times[2] - 90.0).abs() < 0.3, "{times:?}");
    assert_eq!(sent.last().unwrap().1, "a2");
    let m = h.metrics();
    assert!(m.contains("culprit_notifications_total{destination=\"scripted\",outcome=\"deferred\"} 2"), "{m}");
    assert!(!m.contains("reason=\"deferred\""), "not a failure: {m}");
}

#[tokio::test(start_paused = true)]
async fn a_501_is_final_at_once() {
    let h = harness(4, (1_000, 4_000, 3_600_000));
    let e = crate::notify::status_error(
        "webhook:x",
        501,
        &reqwest::header::HeaderMap::new(),
        "Not Implemented",
        &crate::model::secret::Redactor::new(),
    );
    h.dest.script("a", vec![Step::Fail(e)]);
    h.enqueue(vec![notice(NoticeKind::Verdict, "a", "a1"), notice(NoticeKind::Resolved, "a", "a2")]).await;
    h.start();
    h.drained().await;
    assert_eq!(h.dest.keys(), ["a1", "a2"], "one attempt, then the group goes on");
    assert!(h.metrics().contains(
        "culprit_notification_failures_total{destination=\"scripted\",reason=\"refused\",outcome=\"failed\"} 1"
    ));
}

#[tokio::test(start_paused = true)]
async fn a_notice_that_may_have_arrived_is_checked_first_and_a_failed_check_reschedules_it_unsent() {
    let h = harness(4, (1_000, 4_000, 3_600_000));
    h.enqueue(vec![notice(NoticeKind::Verdict, "a", "a1")]).await;
    // As a crash leaves it: claimed, then back to pending, unsure.
    let now = h.service.clock.now_ms();
    let row = h.service.store.claim_delivery("scripted", now).await.unwrap().unwrap();
    h.service.store.retry_delivery(&row, now, "crashed", true).await.unwrap();
    h.dest.checks.lock().unwrap().extend([
        Err(NotifyError::retry("slack: conversations.history: ratelimited", Some(Duration::from_secs(5)))),
        Ok(Some(Sent { state: Some(serde_json::json!({"channel": "C1", "ts": "1.2"})) })),
    ]);
    h.start();
    h.drained().await;
    assert_eq!(h.dest.checked.lock().unwrap().len(), 2, "asked twice");
    assert!(h.dest.sent().is_empty(), "never sent blind: {:?}", h.dest.sent());
    assert!(h.metrics().contains("culprit_notifications_total{destination=\"scripted\",outcome=\"recovered\"} 1"));
}

#[tokio::test(start_paused = true)]
async fn after_a_timeout_the_next_attempt_asks_before_sending() {
    let h = harness(4, (1_000, 4_000, 3_600_000));
    let timeout = NotifyError::retry("slack: chat.postMessage: timed out", None).because(FailureReason::Timeout);
    let refused = NotifyError::retry("HTTP 503", None);
    h.dest.script("a", vec![Step::Fail(refused), Step::Fail(timeout)]);
    h.enqueue(vec![notice(NoticeKind::Verdict, "a", "a1")]).await;
    h.start();
    h.drained().await;
    // 503 (nothing arrived): sent again without asking; timeout (may have arrived): asked
    // (not there), then sent.
    assert_eq!(h.dest.keys(), ["a1", "a1", "a1"]);
    assert_eq!(*h.dest.checked.lock().unwrap(), ["a1"]);
    // Only the send after the unanswered check is marked as a possible repeat.
    assert_eq!(*h.dest.repeats.lock().unwrap(), [false, false, true]);
}

#[tokio::test(start_paused = true)]
async fn a_slow_group_does_not_hold_the_others() {
    let h = harness(4, (1_000, 4_000, 3_600_000));
    h.dest.script("slow", vec![Step::Slow(Duration::from_secs(60))]);
    h.enqueue(vec![
        notice(NoticeKind::Verdict, "slow", "s1"),
        notice(NoticeKind::Resolved, "slow", "s2"),
        notice(NoticeKind::Verdict, "b", "b1"),
        notice(NoticeKind::Verdict, "c", "c1"),
    ])
    .await;
    h.start();
    h.drained().await;
    let sent = h.dest.sent();
    let at = |k: &str| sent.iter().find(|(_, x)| x == k).map(|(t, _)| secs(*t)).unwrap();
    assert!(at("b1") < 1.0 && at("c1") < 1.0, "{sent:?}");
    assert!(at("s2") >= 60.0, "the slow group's next notice waits for its first: {sent:?}");
}

#[tokio::test(start_paused = true)]
async fn could_not_diagnose_notices_never_go_before_a_waiting_verdict() {
    // One at a time: the order is the queue's.
    let h = harness(1, (1_000, 4_000, 3_600_000));
    let mut notices: Vec<Notice> =
        (0..20).map(|i| notice(NoticeKind::CouldNotDiagnose, &format!("f{i}"), &format!("f{i}"))).collect();
    notices.push(notice(NoticeKind::Verdict, "v", "v"));
    h.enqueue(notices).await;
    h.start();
    h.drained().await;
    assert_eq!(h.dest.keys()[0], "v");
}

/// Two replicas on one real PostgreSQL (the store tests' shared server), on real time,
/// each with its own scripted destination standing in for the same PagerDuty.
#[tokio::test]
async fn a_replica_that_lost_its_lease_never_sends_after_another_took_the_send_over() {
    use crate::service::store::tests::pg_server::{PASSWORD, PgServer};
    let Some(server) = PgServer::shared() else { return };
    let db = "fence_delivery";
    server.database(db);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pw"), PASSWORD).unwrap();
    let replica = || {
        let mut config = Config::default();
        config.store.url = Some(server.url(db));
        config.store.password = Some(crate::config::SecretSource::File(dir.path().join("pw")));
        config.store.lease = Millis(10_000);
        let dest = Arc::new(Scripted::default());
        let service =
            Service::with_destinations(config, vec![dest.clone() as Arc<dyn Destination>], Clock::System).unwrap();
        let (stop, _) = tokio::sync::watch::channel(false);
        Harness { service: Arc::new(service), dest, stop, _dir: tempfile::tempdir().unwrap() }
    };
    let (a, b) = (replica(), replica());
    a.enqueue(vec![notice(NoticeKind::Verdict, "g", "k1")]).await;
    // `a` claims the send and stalls before making it (SIGSTOP, a frozen VM): its renewals
    // stop, and its lease (10 s) runs out in the database, as a minute without renewals
    // leaves it.
    let row = a.service.store.claim_delivery("scripted", a.service.clock.now_ms()).await.unwrap().unwrap();
    server.psql(db, "UPDATE outbox SET lease_until_ms = lease_until_ms - 60000");
    // `b` takes it over: asks first (unsure), then sends it, once.
    b.start();
    b.drained().await;
    assert_eq!(b.dest.keys(), ["k1"]);
    assert_eq!(*b.dest.checked.lock().unwrap(), ["k1"]);
    // `a` resumes where it stopped: the check before the send refuses, nothing is sent.
    a.service.clone().deliver(0, row, a.stop.subscribe()).await;
    assert!(a.dest.sent().is_empty(), "sent after losing the lease: {:?}", a.dest.sent());
    assert!(a.metrics().contains("culprit_notifications_total{destination=\"scripted\",outcome=\"fenced\"} 1"));
    assert_eq!(server.psql(db, "SELECT state || ' ' || attempts FROM outbox").trim(), "sent 2");
}
