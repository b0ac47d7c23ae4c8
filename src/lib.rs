#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
// Library code only: tests, examples and benches are separate crates and may panic.
#![warn(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

// The layers, from the bottom; each imports only those above it in this list (checked
// by tests/layers.rs; described in docs/architecture.md).
mod error;
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

mod acquire;

mod guard;

mod shared;

mod request;

mod builder;
mod mutex;
mod semaphore;

pub mod guide;

pub use backend::Quorum;
pub use builder::Builder;
pub use error::{Error, Refusal};
pub use guard::{Guard, Permit};
pub use mode::Mode;
pub use mutex::RwMutex;
pub use notify::Notifier;
#[cfg(feature = "metrics")]
pub use observe::describe as describe_metrics;
pub use protocol::keys::MAX_KEY_BYTES;
pub use reason::CancelReason;
pub use request::{Acquire, AcquireFuture, Granted, TryAcquire, TryAcquireFuture};
pub use semaphore::Semaphore;
#[cfg(feature = "sentinel")]
pub use sentinel::SentinelConnection;
pub use shared::Deployment;

/// The redis-rs version this crate is built on, so callers can name the same types.
pub use redis;
/// The tokio-util version whose `CancellationToken` guards carry.
pub use tokio_util;
