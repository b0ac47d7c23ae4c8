//! A primary with replicas: replica acknowledgement (`replicas(n, ..)`), of locks and of
//! guarded pipelines (`exec`), and, with the feature `sentinel`, a mutex and its `exec`
//! over `SentinelConnection` and across failovers, and waiting on keyspace notifications
//! behind a Go writer on the primary; with the Sentinel deployment the tests start
//! (`tests/common/sentinel.rs`) checked on its own. Leader election over Sentinel is
//! `election::sentinel`.

#[path = "../common/mod.rs"]
mod common;

mod exec;
mod failovers;
mod harness;
mod keyspace;
mod replicas;
mod sentinel;
mod sets;
mod upgradable;
