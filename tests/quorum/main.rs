//! Quorum mode (Redlock) over independent `redis-server` nodes that each test starts
//! (`tests/common/quorum.rs`): the lock with every node up, the mutex's options, forced
//! release, leader election, the Go key layout on each node, and nodes frozen, killed or
//! taken over (in process).

#[path = "../common/mod.rs"]
mod common;

mod election;
mod force_unlock;
mod go;
mod lock;
mod node_faults;
mod options;
mod top_up;
