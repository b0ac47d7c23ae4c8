//! A primary with replicas: replica acknowledgement (`replicas(n, ..)`), and, with the
//! feature `sentinel`, a mutex over `SentinelConnection` across failovers; with the
//! Sentinel deployment the tests start (`tests/common/sentinel.rs`) checked on its own.

#[path = "../common/mod.rs"]
mod common;

mod failovers;
mod harness;
mod replicas;
mod sentinel;
