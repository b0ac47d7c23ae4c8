//! The mutex and the semaphore for code without an async runtime (feature `blocking`):
//! batch jobs, command-line tools and services on threads.
//!
//! [`RwMutex`] and [`Semaphore`] take the same locks and permits as the async
//! [`crate::RwMutex`] and [`crate::Semaphore`], over the same protocol, so blocking code,
//! async code and Go clients of one name exclude each other. They are built from a
//! [`redis::Client`] for one server; for a Redis Cluster, a quorum or Sentinel, use the
//! async API.
//!
//! ```no_run
//! use std::time::Duration;
//! use redismutex::blocking::{RwMutex, Semaphore};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let client = redis::Client::open("redis://127.0.0.1/")?;
//! let mx = RwMutex::builder(client.clone(), "jobs").ttl(Duration::from_secs(4)).build()?;
//!
//! let guard = mx.write_timeout("nightly", Duration::from_secs(2))?; // Error::Timeout
//! println!("fencing token {}", guard.fencing_token());
//! if !guard.is_cancelled() {
//!     let mut pipe = redis::pipe();
//!     pipe.set("jobs:nightly:last-run", "2026-12-06").ignore();
//!     let () = guard.exec(&pipe)?; // only while the lock is still this guard's
//! }
//! guard.unlock()?;
//!
//! if let Some(reader) = mx.try_read("nightly")? {
//!     drop(reader); // released by the background thread; drop returns at once
//! }
//!
//! let pool = Semaphore::builder(client, "pool", 2).build()?;
//! let permit = pool.acquire("exports")?;
//! permit.unlock()?;
//! # Ok(())
//! # }
//! ```
//!
//! # Threads
//!
//! A handle starts one thread, which runs a current-thread Tokio runtime; its clones and
//! its guards share it. A blocking method runs its request on the calling thread while
//! that thread drives the runtime's timers and I/O, so waiting is event-driven as in the
//! async API: a waiter subscribes to the lock's release channel (the handle has a
//! notifier of its own, as a [`Notifier`](crate::Notifier) is for the async API, with one
//! subscriber connection opened when a request first waits) and sleeps until a release
//! wakes it, or its fallback timer does. The same thread refreshes every held
//! guard every `ttl / 2`, and fires a guard's cancellation token when its lock is lost
//! or its validity deadline passes: ask [`WriteGuard::is_cancelled`] before each write,
//! or hand [`WriteGuard::cancellation_token`] to work that can watch it.
//!
//! A blocking method never blocks inside a Tokio runtime: on a thread with a runtime
//! context (a worker thread, a `block_on` future, a `spawn_blocking` task) it returns
//! [`Error::InRuntime`](crate::Error::InRuntime) without sending anything. Use the async
//! API there, or call the blocking one from a thread of your own.
//!
//! # Drop
//!
//! Dropping a guard fires its cancellation token and hands the release to the
//! background thread: `Drop` returns at once and never waits for Redis, while its handle
//! (or a clone, or another of its guards) lives. [`unlock`](WriteGuard::unlock) releases
//! and waits for the answer. The thread stops when the handle, its clones and its guards
//! are all gone; whichever of them goes last waits there for the releases still in
//! flight (at most 5 s, on a server that does not answer), so a program that drops its
//! handle before it exits leaves no lock behind. Inside a Tokio runtime that last drop
//! does not wait.
//!
//! # Timeouts and a dead server
//!
//! The connection is a [`ConnectionManager`](redis::aio::ConnectionManager) with
//! redis-rs's timeouts (1 s to connect, 500 ms for a response) and one retry: a server
//! that is down is an [`Error::Redis`](crate::Error::Redis) from
//! [`build`](Builder::build) within about two seconds, and from a request within the
//! response timeout, never a hang. After a dropped connection the next request
//! reconnects. A waiting request whose connection fails returns that error (it does not
//! retry); a refresh that fails is retried every `ttl / 8` until the guard's deadline.

mod background;
mod builder;
mod guards;
mod multi;
mod mutex;
mod semaphore;
mod upgradable;

pub use builder::Builder;
pub use guards::{Permit, ReadGuard, WriteGuard};
pub use multi::MultiGuard;
pub use mutex::RwMutex;
pub use semaphore::Semaphore;
pub use upgradable::UpgradableReadGuard;
