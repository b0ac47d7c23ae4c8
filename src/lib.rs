//! A distributed read-write mutex on Redis for async Rust: many readers or one writer per
//! lock key, across processes and machines, whose guards are cancellation tokens.
//!
//! A [`WriteGuard`] (one writer) or a [`ReadGuard`] (many readers) is held until it is
//! unlocked or dropped, and its
//! [`CancellationToken`](tokio_util::sync::CancellationToken) fires the moment the lock
//! is released, lost, cancelled or past its validity deadline, so the work the lock
//! protects can stop in time. Every acquisition carries a
//! [fencing token](Guard::fencing_token) the protected resource can check. What every
//! guard shares is the [`Guard`] trait. On the same
//! machinery the crate offers a counting [`Semaphore`], a fair mode and leader
//! [`Election`], and it speaks the
//! wire protocol of the Go package `itcomusic/redismutex`, so Go and Rust services can
//! share a lock.
//!
//! # Example
//!
//! ```rust,no_run
//! use std::time::Duration;
//! use redismutex::RwMutex;
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let client = redis::Client::open("redis://127.0.0.1/")?;
//! let conn = client.get_multiplexed_async_connection().await?;
//! let mx = RwMutex::builder(conn, "orders")
//!     .notifier(client.clone()) // waiters are woken by the release, not by polling
//!     .build()?;
//!
//! let guard = mx.write().key("42").timeout(Duration::from_secs(2)).await?;
//! if !guard.is_cancelled() {
//!     // ... write, sending guard.fencing_token() along ...
//! }
//! guard.unlock().await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Where it runs
//!
//! A [`RwMutex`] or [`Semaphore`] is made over any redis-rs async connection that can be
//! cloned and shared (tested with those named here): [`redis::aio::MultiplexedConnection`] or
//! [`redis::aio::ConnectionManager`] for one server, `redis::cluster_async::ClusterConnection`
//! for a Redis Cluster (feature `cluster`), `SentinelConnection` for a primary under Redis
//! Sentinel (feature `sentinel`); or over a [`Quorum`] of independent masters. The crate
//! re-exports [`redis`] and [`tokio_util`], so you can name the versions it is built on.
//!
//! # The guides
//!
//! The [`guide`] module holds one guide per topic: [waiting](guide::waiting),
//! [refresh and the cancellation token](guide::refresh), [fencing](guide::fencing),
//! [guarded writes](guide::guarded_writes),
//! [semaphore and fair mode](guide::semaphore), [reentrancy and downgrade](guide::reentrancy),
//! [leases that travel between processes](guide::leases),
//! [leader election](guide::election),
//! [Redis Cluster](guide::cluster), [quorum mode](guide::quorum),
//! [Sentinel and replica acknowledgement](guide::sentinel), [metrics and tracing](guide::metrics),
//! [inspection](guide::inspection), [errors](guide::errors), [guarantees and limits](guide::guarantees),
//! [Go compatibility and the protocol](guide::protocol), and the
//! [`redismutex` command](guide::command_line). Each opens with when to use what it
//! describes.
#![cfg_attr(docsrs, feature(doc_cfg))]
// Library code only: tests, examples and benches are separate crates and may panic.
#![warn(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

// The layers, from the bottom; each imports only those above it in this list (checked
// by tests/layers.rs; described in docs/architecture.md).
mod drift;
mod error;
pub mod guide;
mod leader;
mod lock_state;
mod mode;
mod reason;
mod spawner;
mod util;

mod observe;

mod protocol;
#[cfg(feature = "sentinel")]
mod sentinel;

mod notify;

mod settings;

mod backend;

mod lease;

mod wait;

mod engine;

mod guard;

mod request;

mod mutex;
mod semaphore;

mod builder;

mod election;

#[cfg(feature = "blocking")]
#[cfg_attr(docsrs, doc(cfg(feature = "blocking")))]
pub mod blocking;

// README.md's examples, compiled as doctests (README is not the crate's docs); with the
// feature `blocking`, which its blocking example needs (`.ci/run` tests all features).
#[cfg(all(doctest, feature = "blocking"))]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

pub use backend::Quorum;
pub use builder::Builder;
pub use election::{Campaign, Election, Leadership, TryCampaign};
pub use engine::Deployment;
pub use error::{Error, Refusal};
pub use guard::{Guard, MultiGuard, Permit, ReadGuard, UpgradableReadGuard, WriteGuard};
pub use leader::Leader;
pub use lease::Lease;
pub use lock_state::{HolderInfo, LockState, QueueEntry};
pub use mode::Mode;
pub use mutex::RwMutex;
pub use notify::Notifier;
#[cfg(feature = "metrics")]
pub use observe::describe as describe_metrics;
pub use protocol::check::MAX_KEY_BYTES;
pub use reason::CancelReason;
pub use request::{
    Acquire, AcquireFuture, Granted, LockAll, LockAllFuture, TryAcquire, TryAcquireFuture,
    TryLockAll, TryLockAllFuture, MAX_SET_KEYS,
};
pub use semaphore::Semaphore;
#[cfg(feature = "sentinel")]
pub use sentinel::SentinelConnection;

/// The redis-rs version this crate is built on, so callers can name the same types.
pub use redis;
/// The tokio-util version whose `CancellationToken` guards carry.
pub use tokio_util;
