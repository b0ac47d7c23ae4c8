//! Feature `cluster`: the mutex, the semaphore and fair mode on a real Redis Cluster
//! (three masters with a replica each) that each test starts (`tests/common/cluster.rs`),
//! guarded pipelines (`exec`) in the lock key's slot, the masters'
//! faults under held guards (in process), and the cluster harness itself. Leader election on a
//! cluster is `election::cluster`.
#![cfg(feature = "cluster")]

#[path = "../common/mod.rs"]
mod common;

mod exec;
mod failover;
mod harness;
mod holders;
mod keyspace;
mod leases;
mod lock;
mod primitives;
mod sets;
mod upgradable;
