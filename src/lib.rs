#![doc = include_str!("../README.md")]
// Library code only: tests, examples and benches are separate crates and may panic.
#![warn(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod acquire;
mod builder;
mod cluster;
mod downgrade;
mod error;
mod fences;
mod guard;
mod hub;
mod id;
mod keys;
mod lease;
mod mode;
mod mutex;
mod notifier;
mod pending;
mod permit;
mod reason;
mod reentry;
mod refresh;
mod request;
mod scripts;
mod semaphore;
mod settings;
mod spawner;
mod status;
mod subscriber;

pub use builder::Builder;
pub use error::{Error, Refusal};
pub use guard::Guard;
pub use keys::MAX_KEY_BYTES;
pub use mode::Mode;
pub use mutex::RwMutex;
pub use notifier::Notifier;
pub use permit::Permit;
pub use reason::CancelReason;
pub use request::{Acquire, AcquireFuture, TryAcquire, TryAcquireFuture};
pub use semaphore::Semaphore;

/// The redis-rs version this crate is built on, so callers can name the same types.
pub use redis;
/// The tokio-util version whose `CancellationToken` guards carry.
pub use tokio_util;
