//! The runbook's steps and hazards, one file each. The order they run in lives in
//! [`crate::diagnose::runbook`] and only there.

pub mod checkpoints;
pub mod failover;
pub mod headroom;
pub mod hot_key;
pub mod locate;
pub mod resources;
pub mod retention;
pub mod sink;
pub mod skew;
pub mod sources;
pub mod state_backend;
pub mod state_growth;
