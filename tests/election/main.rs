//! Leader election (`Election`, `Leadership`) on each deployment, one module per
//! deployment: one server (`single`: candidates taking turns, terms, `proclaim`, `leader`,
//! the observer, bad input), a Redis Cluster (feature `cluster`), a quorum of independent
//! servers, and Sentinel (feature `sentinel`). The election's scripts run directly are
//! `protocol::leader_scripts`; candidates as worker processes, killed and frozen, are the
//! fault suite's (`faults::election`).

#[path = "../common/mod.rs"]
mod common;

mod cluster;
mod quorum;
mod sentinel;
mod single;
