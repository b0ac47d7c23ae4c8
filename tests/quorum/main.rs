//! Quorum mode (Redlock) over independent `redis-server` nodes that each test starts
//! (`tests/common/quorum.rs`): the lock with every node up, the mutex's options, forced
//! release, the Go key layout on each node, keyspace notifications behind a Go holder on
//! a majority, sets of keys (`lock_all`), upgradable reads and their upgrade, and nodes
//! frozen, killed or taken over (in process). Leader election on a quorum is
//! `election::quorum`.

#[path = "../common/mod.rs"]
mod common;

mod force_unlock;
mod go;
mod holders;
mod keyspace;
mod leases;
mod lock;
mod node_faults;
mod options;
mod sets;
mod top_up;
mod upgradable;
