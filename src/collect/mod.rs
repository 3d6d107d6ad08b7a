//! Collection: everything that turns a request into a [`Snapshot`](crate::model::snapshot::Snapshot).
//!
//! * [`exposition`]: the Prometheus text / OpenMetrics reader and writer (never drops a
//!   sample silently).
//! * [`store`]: an in-memory series store filled by the reader, its samples compressed
//!   in [`chunk`]s.
//! * [`query`]: the few query shapes the diagnosis needs, evaluated with PromQL semantics
//!   over the store (and, live, by Prometheus itself).
//! * [`identity`]: which series stand for the same thing (task attempts, one target
//!   scraped twice, two deployments under one job id).
//! * [`domain`]: which values each metric can take; every answer is held to it before
//!   anything reads it.
//! * [`degrade`]: a query a backend refuses as too large, asked again in smaller pieces
//!   that add up to the same answer.
//! * [`answer_budget`]: the bytes of backend answers held at once, across diagnoses.
//! * [`rest_load`]: the Flink REST requests in flight per JobManager, across diagnoses.
//! * [`naming`]: which naming scheme the data holds, when it is not the one configured.
//! * [`collector`]: request + metric source → snapshot.

pub mod answer_budget;
mod answer_read;
pub mod chunk;
pub mod collector;
pub mod degrade;
pub mod domain;
pub mod exposition;
pub mod flink_rest;
pub mod identity;
pub mod kafka;
pub mod naming;
pub mod prometheus;
pub mod query;
pub mod recorder;
pub mod rest_load;
pub mod store;

/// Drives a collection over a source that never waits on IO (the in-memory
/// [`store::SeriesStore`] answers at once) without an async runtime.
pub fn block_on<F: std::future::Future>(fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match fut.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => unreachable!("an in-memory metric source never waits"),
    }
}
