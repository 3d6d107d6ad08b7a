//! Collection: everything that turns a request into a [`snapshot::Snapshot`].
//!
//! * [`exposition`]: the Prometheus text / OpenMetrics reader and writer (never drops a
//!   sample silently).
//! * [`store`]: an in-memory series store filled by the reader.
//! * [`query`]: the few query shapes the diagnosis needs, evaluated with PromQL semantics
//!   over the store (and, live, by Prometheus itself).
//! * [`snapshot`]: the pure, serializable value the diagnosis reads.
//! * [`collector`]: request + metric source → snapshot.

pub mod catalog;
pub mod collector;
pub mod exposition;
pub mod flink_rest;
pub mod kafka;
pub mod prometheus;
pub mod query;
pub mod recorder;
pub mod snapshot;
pub mod store;
