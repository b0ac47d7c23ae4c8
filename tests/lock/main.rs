//! The lock on one `redis-server`: exclusion, waiting and the lock intent, release
//! notifications, release, forced release, the refresher, downgrade, reentrancy, the
//! semaphore and fair mode, random cancels, a server that goes away, and the `Send`/`Sync` promises. Each
//! test starts its own server on a free loopback port (`tests/common/server.rs`).

#[path = "../common/mod.rs"]
mod common;

mod churn;
mod downgrade;
mod exclusion;
mod exec;
mod fair;
mod force_unlock;
mod harness;
mod holders;
mod inspect;
mod intent;
mod keyspace;
mod leases;
mod max_hold;
mod notify;
mod reentrant;
mod refresh;
mod release;
mod resilience;
mod semaphore;
mod send_sync;
mod sets;
mod sets_races;
mod upgradable;
mod upgradable_races;
mod waiting;
