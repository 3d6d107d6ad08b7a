//! culprit: finds the operator that really slows a backpressured Apache Flink job.
//!
//! When one Flink operator is slower than the one before it, credit-based flow control
//! slows the source hop by hop and every vertex upstream of the bottleneck reports
//! backpressure. The red vertices are the victims; culprit names the vertex that holds
//! them back, why it is slow, and the fix that belongs to it.
//!
//! The modules follow the data, one way; every import points down this list:
//!
//! ```text
//! cli ─► mcp ─► service (serve: server, intake, store, pipeline, metrics) ─► samples
//!     ─► collect ─► diagnose ─► config ─► notify ─► render ─► settings, model
//!
//! CLI / HTTP / webhook ─► DiagnosisRequest ─► collect (recording | Prometheus | Flink REST)
//!        ─► Snapshot ─► diagnose (pure) ─► Verdict ─► render (pure) ─► notify
//! ```
//!
//! * [`model`]: the values every layer shares (request, job graph, metric names,
//!   snapshot, verdict, notice); pure data that imports no other module.
//! * [`settings`]: the vocabulary of the configuration (durations, secret references,
//!   HTTP auth).
//! * [`config`]: typed settings (thresholds at the spec's defaults); each destination's
//!   section comes from [`notify::registry`].
//! * [`diagnose`]: the pure runbook over a snapshot.
//! * [`collect`]: turns a request into a [`model::snapshot::Snapshot`]: the exposition
//!   reader, the in-memory series store, the query shapes, Prometheus, Flink REST, Kafka.
//! * [`render`]: pure renderers (json, text, markdown, Slack, PagerDuty, Alertmanager).
//! * [`notify`]: one unit per destination (its section, secrets, sender, probe), listed
//!   once in [`notify::registry`]; sends what the renderers build.
//! * [`samples`]: jobs to run without a cluster (the bundled real recordings of `demo`,
//!   synthetic jobs for benchmarks).
//! * [`service`]: `culprit serve`, the one module that wires collection to notification.
//! * [`mcp`]: the MCP server (`culprit mcp` over stdio, `POST /mcp` of serve): the
//!   diagnosis as tools an agent calls.
//! * [`cli`]: the `culprit` command line.
//! * [`retry_status`]: which HTTP statuses every backend and destination retries (imports
//!   nothing; used by `collect` and `notify`).
//!
//! `docs/architecture.md` draws the layers and says where new code goes.

pub mod cli;
pub mod collect;
pub mod config;
pub mod diagnose;
pub mod mcp;
pub mod model;
pub mod notify;
pub mod render;
pub mod retry_status;
pub mod samples;
pub mod service;
pub mod settings;
