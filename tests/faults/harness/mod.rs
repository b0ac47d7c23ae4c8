//! The fault suite's own harness: fleets of worker processes on each deployment, their
//! fault mixes and checks, network namespaces, the fire leads' runs, and the report of a
//! run. Only `tests/faults` declares it, so the other test binaries do not compile it;
//! what it shares with them (a server, a cluster, Sentinel, a quorum, the worker
//! processes, the proxy, the referee and the events) is in `tests/common`, which it
//! reaches as `crate::common`.
#![allow(dead_code, unreachable_pub)]

#[cfg(feature = "cluster")]
pub mod cluster_clocks;
#[cfg(feature = "cluster")]
pub mod cluster_fleet;
pub mod expiry_watch;
pub mod fault_checks;
pub mod fleet;
pub mod guarded;
pub mod lead_run;
pub mod lead_table;
pub mod mixes;
pub mod needs_root;
pub mod netns;
pub mod netns_fleet;
pub mod netns_mix;
pub mod netns_server;
pub mod order;
pub mod paused_note;
pub mod quorum_fleet;
pub mod report;
pub mod sentinel_fleet;
pub mod server_fleet;
