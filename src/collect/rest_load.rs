//! The bound on Flink REST requests in flight at one JobManager (`flink.max_concurrency`),
//! shared by every diagnosis, and what each cluster has in flight and waiting now.
//!
//! The bound holds per REST base URL: a cluster's `rest_url`, or each URL its
//! `rest_url_template` fills in for a job (one JobManager per Kubernetes deployment). The
//! counts shown on `/metrics` are per configured cluster (its `name`), summed over its
//! URLs: the label's values are the configured names, never a URL built from a job's
//! labels (untrusted, one per job), so the series are as many as `[[flink.clusters]]`.
//!
//! A URL's slot count lives while a client for it does: entries of templated URLs no
//! diagnosis uses any more are dropped, so a fleet of jobs does not grow the map.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::{Semaphore, SemaphorePermit};
use tokio::time::Instant;

use crate::collect::prometheus::LoadNow;

/// The slots of every Flink REST base URL in use, and each cluster's counts.
#[derive(Debug)]
pub struct RestLoads {
    bound: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Base URL (parsed and written back, so that equal URLs share slots) → its slots.
    urls: HashMap<String, Weak<UrlLoad>>,
    /// Cluster name → its counts, kept for the life of the process (bounded by the
    /// configuration), so that `/metrics` shows a cluster at 0 once it is idle.
    clusters: BTreeMap<String, Arc<ClusterCounts>>,
}

/// What one cluster has in flight and waiting over all its URLs, and the most in flight
/// at one of its URLs at once.
#[derive(Debug, Default)]
struct ClusterCounts {
    in_flight: AtomicUsize,
    waiting: AtomicUsize,
    peak: AtomicUsize,
}

/// The slots of one REST base URL.
#[derive(Debug)]
pub struct UrlLoad {
    bound: usize,
    permits: Semaphore,
    in_flight: AtomicUsize,
    cluster: Arc<ClusterCounts>,
}

/// One request's slot: held until its answer is read.
pub struct Slot<'a> {
    _permit: SemaphorePermit<'a>,
    load: &'a UrlLoad,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.load.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.load.cluster.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Counts a request waiting for a slot while it waits (a wait ended by the deadline, or
/// a request cancelled, is uncounted too).
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl RestLoads {
    /// At most `bound` requests in flight per base URL (at least 1).
    pub fn new(bound: usize) -> RestLoads {
        RestLoads { bound: bound.clamp(1, Semaphore::MAX_PERMITS), inner: Mutex::new(Inner::default()) }
    }

    /// The bound per base URL.
    pub fn bound(&self) -> usize {
        self.bound
    }

    /// The slots of `base_url`, shared with every client of the same URL alive now;
    /// counted under `cluster` (the cluster that first asked, when two name one URL).
    pub fn for_url(&self, cluster: &str, base_url: &str) -> Arc<UrlLoad> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(load) = inner.urls.get(base_url).and_then(Weak::upgrade) {
            return load;
        }
        // Drop the URLs nobody uses any more before adding one.
        inner.urls.retain(|_, w| w.strong_count() > 0);
        let counts = inner.clusters.entry(cluster.to_string()).or_default().clone();
        let load = Arc::new(UrlLoad {
            bound: self.bound,
            permits: Semaphore::new(self.bound),
            in_flight: AtomicUsize::new(0),
            cluster: counts,
        });
        inner.urls.insert(base_url.to_string(), Arc::downgrade(&load));
        load
    }

    /// Each cluster that has had a client: its requests in flight and waiting now (over
    /// all its URLs), the most in flight at one of its URLs at once, and the bound per URL.
    pub fn now(&self) -> Vec<(String, LoadNow)> {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner
            .clusters
            .iter()
            .map(|(name, c)| {
                let load = LoadNow {
                    in_flight: c.in_flight.load(Ordering::Relaxed),
                    waiting: c.waiting.load(Ordering::Relaxed),
                    peak: c.peak.load(Ordering::Relaxed),
                    bound: self.bound,
                };
                (name.clone(), load)
            })
            .collect()
    }

    /// Base URLs with a client alive now (tests; the map's size).
    pub fn urls_in_use(&self) -> usize {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.urls.values().filter(|w| w.strong_count() > 0).count()
    }
}

impl UrlLoad {
    /// A slot, waiting (first come, first served) until `deadline` at most; `None` when
    /// none came free in time. The request waits here, not at the JobManager.
    pub async fn slot(&self, deadline: Instant) -> Option<Slot<'_>> {
        let permit = {
            self.cluster.waiting.fetch_add(1, Ordering::Relaxed);
            let _waiting = Waiting(&self.cluster.waiting);
            match tokio::time::timeout_at(deadline, self.permits.acquire()).await {
                Ok(Ok(permit)) => permit,
                // The semaphore is never closed; a closed one is no slot either.
                Ok(Err(_)) | Err(_) => return None,
            }
        };
        let now = self.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        self.cluster.in_flight.fetch_add(1, Ordering::Relaxed);
        self.cluster.peak.fetch_max(now, Ordering::Relaxed);
        Some(Slot { _permit: permit, load: self })
    }

    /// The bound of this URL.
    pub fn bound(&self) -> usize {
        self.bound
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn two_clients_of_one_url_share_its_slots_and_another_url_has_its_own() {
        let loads = RestLoads::new(2);
        let (a1, a2, b) = (
            loads.for_url("k8s", "http://a-rest:8081/"),
            loads.for_url("k8s", "http://a-rest:8081/"),
            loads.for_url("k8s", "http://b-rest:8081/"),
        );
        let far = Instant::now() + Duration::from_secs(5);
        let _s1 = a1.slot(far).await.unwrap();
        let _s2 = a2.slot(far).await.unwrap();
        // a's two slots are taken: a third waits until the deadline and gets none.
        assert!(a1.slot(Instant::now() + Duration::from_millis(20)).await.is_none());
        let _s3 = b.slot(far).await.unwrap();
        // 2 at a + 1 at b in flight, summed under the cluster; the peak is a's 2.
        let now = loads.now();
        assert_eq!(now, vec![("k8s".to_string(), LoadNow { in_flight: 3, waiting: 0, peak: 2, bound: 2 })]);
    }

    #[tokio::test]
    async fn a_url_no_client_uses_is_forgotten_and_its_cluster_stays_at_zero() {
        let loads = RestLoads::new(4);
        for job in 0..100 {
            let load = loads.for_url("k8s", &format!("http://job-{job}-rest:8081/"));
            let _slot = load.slot(Instant::now() + Duration::from_secs(1)).await.unwrap();
        }
        // Each URL was forgotten when the next was added; the 100th stays in the map until
        // then, unused.
        assert_eq!(loads.urls_in_use(), 0);
        assert_eq!(loads.inner.lock().unwrap().urls.len(), 1);
        assert_eq!(loads.now(), vec![("k8s".to_string(), LoadNow { in_flight: 0, waiting: 0, peak: 1, bound: 4 })]);
    }

    #[tokio::test]
    async fn a_request_waiting_for_a_slot_is_counted_until_it_gets_one() {
        let loads = Arc::new(RestLoads::new(1));
        let load = loads.for_url("lab", "http://jm:8081/");
        let held = load.slot(Instant::now() + Duration::from_secs(5)).await.unwrap();
        let waiter = {
            let load = load.clone();
            tokio::spawn(async move { load.slot(Instant::now() + Duration::from_secs(30)).await.is_some() })
        };
        // Until the waiter counts itself (it runs on this runtime's one thread meanwhile).
        while loads.now()[0].1.waiting == 0 {
            tokio::task::yield_now().await;
        }
        assert_eq!(loads.now()[0].1, LoadNow { in_flight: 1, waiting: 1, peak: 1, bound: 1 });
        drop(held);
        assert!(waiter.await.unwrap());
        assert_eq!(loads.now()[0].1, LoadNow { in_flight: 0, waiting: 0, peak: 1, bound: 1 });
    }
}
