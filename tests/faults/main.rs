//! The fault suite: lock holders run as worker processes (`examples/fault_worker.rs`),
//! checked by a referee server, while the harness kills, freezes, cuts off and slows
//! them, their servers and their proxies: on one server (holders, server, and exec:
//! guarded writes of writers frozen past their TTL, and of a holder whose lock key was
//! deleted), a quorum, a Redis Cluster (feature `cluster`) and Sentinel (feature
//! `sentinel`); leader election (candidates killed, frozen and taking turns); real
//! partitions made by the kernel in network namespaces (netns); the proxy itself; the
//! soaks and the long run (ignored; the short versions run every time). The harness
//! shared with the other binaries is `tests/common`; the fault suite's own (fleets,
//! fault mixes, network namespaces, reports) is `harness`.

#[path = "../common/mod.rs"]
mod common;
mod harness;

mod clock;
mod cluster;
mod election;
mod exec;
mod holders;
mod leads;
mod long_run;
mod long_run_sets;
mod netns;
mod proxy;
mod quorum;
mod sentinel;
mod server;
mod soak;
