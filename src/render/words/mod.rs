//! Words for facts: what the diagnosis and the collector found, as people read it.

pub mod missing;
