//! The values every layer shares: pure data, no IO, and no import from any other module of
//! the crate. Collection builds them, the diagnosis reads and makes them, the renderers and
//! notifiers read them.
//!
//! * [`request`]: the one input every entry point builds.
//! * [`graph`]: the job graph (Flink's plan) and the reporter's label sanitizing.
//! * [`catalog`]: the raw metric and label names of Flink's reporter and Kafka exporters.
//! * [`snapshot`]: everything the diagnosis sees about one job.
//! * [`failover`]: the job's restarts and Flink REST's exception history.
//! * [`resources`]: the Kubernetes containers of the job's TaskManagers (memory, CPU quota).
//! * [`flamegraph`]: a vertex's flame graph from Flink REST and the profile a verdict carries.
//! * [`autoscaler`]: the Flink Kubernetes Operator autoscaler's gauges per vertex, and the
//!   verdict's view of them.
//! * [`verdict`]: the `culprit.verdict/v1` value every interface renders.
//! * [`notice`]: one thing to tell one destination about one alert group.
//! * [`secret`]: the one redaction mechanism (every wire form of a secret).
//! * [`foreign`]: what a message may say about another system's answer (never its body).
//! * [`rest_template`]: a Flink REST URL from a job's labels (Kubernetes), values checked.

pub mod attribution;
pub mod autoscaler;
pub mod catalog;
pub mod facts;
pub mod failover;
pub mod flamegraph;
pub mod foreign;
pub mod graph;
pub mod incident;
pub mod naming;
pub mod notice;
pub mod request;
pub mod rescales;
pub mod resources;
pub mod rest_template;
pub mod secret;
pub mod snapshot;
pub mod verdict;
