//! culprit: finds the operator that really slows a backpressured Apache Flink job.
//!
//! When one Flink operator is slower than the one before it, credit-based flow control
//! slows the source hop by hop and every vertex upstream of the bottleneck reports
//! backpressure. The red vertices are the victims; culprit names the vertex that holds
//! them back, why it is slow, and the fix that belongs to it.
//!
//! The modules follow the data, one way:
//!
//! ```text
//! CLI / HTTP / webhook ─► request ─► collect (recording | Prometheus) ─► Snapshot
//!        ─► diagnose (pure) ─► Verdict ─► render (pure: json, text, markdown, …) ─► notify
//! ```
//!
//! * [`config`]: typed settings (thresholds at the spec's defaults).
//! * [`request`]: the one input every entry point builds.
//! * [`collect`]: turns a request into a [`collect::snapshot::Snapshot`]: the exposition
//!   reader, the in-memory series store and the query evaluation over it.
//! * [`diagnose`]: the pure runbook over a snapshot.
//! * [`verdict`]: the `culprit.verdict/v1` value every interface renders.
//! * [`render`]: pure renderers.
//! * [`cli`]: the `culprit` command line.

pub mod cli;
pub mod collect;
pub mod config;
pub mod demo;
pub mod diagnose;
pub mod ingest;
pub mod metrics;
pub mod notify;
pub mod pipeline;
pub mod render;
pub mod request;
pub mod server;
pub mod service;
pub mod store;
pub mod synthetic;
pub mod verdict;
