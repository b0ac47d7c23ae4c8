//! What an application sees of the crate at work: its tracing spans, and with the
//! feature `metrics` the series it records (on a recorder local to each test's thread)
//! and `examples/metrics.rs` serving them. The global recorder has a binary of its own
//! (`tests/metrics_global.rs`).

#[path = "../common/mod.rs"]
mod common;

mod example;
mod metrics;
mod spans;
