//! Jobs to run culprit on without a cluster.
//!
//! * [`captures`]: real Flink 2.3 recordings bundled into the binary (`culprit demo`).
//! * [`synthetic`]: a generated job of any size, for benchmarks and scale tests.

pub mod captures;
pub mod synthetic;
