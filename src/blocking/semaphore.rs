//! The blocking [`Semaphore`]: the async semaphore run on its handle's background thread.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionManager;

use super::background::Background;
use super::builder::Builder;
use super::guards::Permit;
use crate::error::Error;
use crate::lease::Lease;
use crate::lock_state::LockState;
use crate::settings::Product;

/// A distributed counting semaphore for code without an async runtime: the blocking form
/// of [`crate::Semaphore`], with the same keys and protocol. Threads, `Drop` and errors
/// are as for the blocking [`RwMutex`](super::RwMutex).
#[derive(Clone)]
pub struct Semaphore {
    semaphore: crate::Semaphore<ConnectionManager>,
    background: Arc<Background>,
}

impl Semaphore {
    /// A [`Builder`] for a semaphore named `name` with `permits` permits over `client`'s
    /// server.
    pub fn builder(
        client: redis::Client,
        name: impl Into<String>,
        permits: u32,
    ) -> Builder<Semaphore> {
        Builder::new(client, name.into(), Product::Semaphore { permits })
    }

    pub(super) fn new(
        semaphore: crate::Semaphore<ConnectionManager>,
        background: Arc<Background>,
    ) -> Self {
        Self {
            semaphore,
            background,
        }
    }

    /// Waits for a permit of `key` (`""` for the semaphore name itself), with no time
    /// limit.
    ///
    /// # Errors
    ///
    /// As [`Acquire`](crate::Acquire)'s, but never [`Error::Timeout`] nor
    /// [`Error::Cancelled`]; and [`Error::InRuntime`].
    pub fn acquire(&self, key: &str) -> Result<Permit, Error> {
        let request = self.semaphore.acquire().key(key);
        self.background.acquire(request, Permit::new)
    }

    /// Waits at most `timeout` for a permit of `key`.
    ///
    /// # Errors
    ///
    /// As [`Acquire`](crate::Acquire)'s ([`Error::Timeout`] when `timeout` runs out
    /// first), and [`Error::InRuntime`].
    pub fn acquire_timeout(&self, key: &str, timeout: Duration) -> Result<Permit, Error> {
        let request = self.semaphore.acquire().key(key).timeout(timeout);
        self.background.acquire(request, Permit::new)
    }

    /// Makes one attempt at a permit of `key`: `Ok(None)` when all are taken (or, in
    /// fair mode, others wait for one).
    ///
    /// # Errors
    ///
    /// As [`TryAcquire`](crate::TryAcquire)'s, and [`Error::InRuntime`].
    pub fn try_acquire(&self, key: &str) -> Result<Option<Permit>, Error> {
        let attempt = self.semaphore.try_acquire().key(key);
        self.background.try_acquire(attempt, Permit::new)
    }

    /// Reads who holds permits of `key`, who waits and the last fencing token, as one
    /// snapshot; see [`Semaphore::inspect`](crate::Semaphore::inspect).
    ///
    /// # Errors
    ///
    /// As [`Semaphore::inspect`](crate::Semaphore::inspect)'s, and [`Error::InRuntime`].
    pub fn inspect(&self, key: &str) -> Result<LockState, Error> {
        self.background.block_on(self.semaphore.inspect(key))?
    }

    /// Takes over the permit a [`Lease`] names; see
    /// [`Semaphore::attach`](crate::Semaphore::attach). The permit is refreshed by this
    /// handle's background thread.
    ///
    /// # Errors
    ///
    /// As [`Semaphore::attach`](crate::Semaphore::attach)'s, and [`Error::InRuntime`].
    pub fn attach(&self, lease: &Lease) -> Result<Permit, Error> {
        self.background
            .acquire(self.semaphore.attach(lease), Permit::new)
    }

    /// Returns the permit a [`Lease`] names, under its own id; see
    /// [`Semaphore::release`](crate::Semaphore::release).
    ///
    /// # Errors
    ///
    /// As [`Semaphore::release`](crate::Semaphore::release)'s, and [`Error::InRuntime`].
    pub fn release(&self, lease: &Lease) -> Result<bool, Error> {
        self.background.block_on(self.semaphore.release(lease))?
    }

    /// Extends the permit a [`Lease`] names by this semaphore's TTL; see
    /// [`Semaphore::renew`](crate::Semaphore::renew).
    ///
    /// # Errors
    ///
    /// As [`Semaphore::renew`](crate::Semaphore::renew)'s, and [`Error::InRuntime`].
    pub fn renew(&self, lease: &Lease) -> Result<bool, Error> {
        self.background.block_on(self.semaphore.renew(lease))?
    }

    /// Returns every permit of `key` by force; see
    /// [`Semaphore::force_unlock`](crate::Semaphore::force_unlock).
    ///
    /// # Errors
    ///
    /// As [`Semaphore::force_unlock`](crate::Semaphore::force_unlock)'s, and
    /// [`Error::InRuntime`].
    pub fn force_unlock(&self, key: &str) -> Result<bool, Error> {
        self.background.block_on(self.semaphore.force_unlock(key))?
    }

    /// The semaphore name: the semaphore key, or its prefix when a request sets a key.
    pub fn name(&self) -> &str {
        self.semaphore.name()
    }

    /// How many holders this semaphore's requests allow at once.
    pub fn permits(&self) -> u32 {
        self.semaphore.permits()
    }

    /// How long a permit lives in Redis without a refresh.
    pub fn ttl(&self) -> Duration {
        self.semaphore.ttl()
    }
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("semaphore", &self.semaphore)
            .finish_non_exhaustive()
    }
}
