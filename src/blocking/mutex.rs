//! The blocking [`RwMutex`]: the async mutex run on its handle's background thread.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionManager;

use super::background::Background;
use super::builder::Builder;
use super::guards::{ReadGuard, WriteGuard};
use super::multi::MultiGuard;
use super::upgradable::UpgradableReadGuard;
use crate::error::Error;
use crate::lease::Lease;
use crate::lock_state::LockState;
use crate::settings::Product;

/// A distributed read-write mutex for code without an async runtime: the blocking form
/// of [`crate::RwMutex`], with the same locks, keys and protocol (a lock taken here and
/// one taken by the async API or a Go client of the same name exclude each other).
///
/// Each method that talks to Redis blocks the calling thread until it is answered. The
/// handle owns one background thread running a Tokio runtime, shared by its clones and
/// its guards: it drives the requests' I/O, wakes waiters by Pub/Sub, refreshes every
/// held guard every `ttl / 2` and releases the guards that are dropped. See the
/// [module docs](super) for the threads, what `Drop` does and when the thread stops.
///
/// `key` is what [`Acquire::key`](crate::Acquire::key) takes: the lock key is
/// `<name>:<key>`, or `<name>` for `""`.
///
/// # Errors
///
/// Every method that talks to Redis fails with [`Error::InRuntime`] on a thread with a
/// Tokio runtime context (nothing is sent); the others are those of the async method it
/// runs, named on each.
#[derive(Clone)]
pub struct RwMutex {
    mutex: crate::RwMutex<ConnectionManager>,
    background: Arc<Background>,
}

impl RwMutex {
    /// A [`Builder`] for a mutex named `name` over `client`'s server.
    pub fn builder(client: redis::Client, name: impl Into<String>) -> Builder<RwMutex> {
        Builder::new(client, name.into(), Product::default())
    }

    pub(super) fn new(
        mutex: crate::RwMutex<ConnectionManager>,
        background: Arc<Background>,
    ) -> Self {
        Self { mutex, background }
    }

    /// Waits for the exclusive (write) lock on `key`, with no time limit, as
    /// [`RwMutex::write`](crate::RwMutex::write) does: woken by the release, or by its
    /// fallback timer.
    ///
    /// # Errors
    ///
    /// As [`Acquire`](crate::Acquire)'s, but never [`Error::Timeout`] nor
    /// [`Error::Cancelled`]; and [`Error::InRuntime`] on a thread with a Tokio runtime
    /// context, with nothing sent.
    pub fn write(&self, key: &str) -> Result<WriteGuard, Error> {
        let request = self.mutex.write().key(key);
        self.background.acquire(request, WriteGuard::new)
    }

    /// Waits at most `timeout` for the exclusive (write) lock on `key`.
    ///
    /// # Errors
    ///
    /// As [`Acquire`](crate::Acquire)'s ([`Error::Timeout`] when `timeout` runs out
    /// first), and [`Error::InRuntime`].
    pub fn write_timeout(&self, key: &str, timeout: Duration) -> Result<WriteGuard, Error> {
        let request = self.mutex.write().key(key).timeout(timeout);
        self.background.acquire(request, WriteGuard::new)
    }

    /// Waits for a shared (read) lock on `key`, with no time limit.
    ///
    /// # Errors
    ///
    /// As [`write`](Self::write).
    pub fn read(&self, key: &str) -> Result<ReadGuard, Error> {
        let request = self.mutex.read().key(key);
        self.background.acquire(request, ReadGuard::new)
    }

    /// Waits at most `timeout` for a shared (read) lock on `key`.
    ///
    /// # Errors
    ///
    /// As [`write_timeout`](Self::write_timeout).
    pub fn read_timeout(&self, key: &str, timeout: Duration) -> Result<ReadGuard, Error> {
        let request = self.mutex.read().key(key).timeout(timeout);
        self.background.acquire(request, ReadGuard::new)
    }

    /// Makes one attempt at the exclusive (write) lock on `key`: `Ok(None)` when others
    /// hold it.
    ///
    /// # Errors
    ///
    /// As [`TryAcquire`](crate::TryAcquire)'s, and [`Error::InRuntime`].
    pub fn try_write(&self, key: &str) -> Result<Option<WriteGuard>, Error> {
        let attempt = self.mutex.try_write().key(key);
        self.background.try_acquire(attempt, WriteGuard::new)
    }

    /// Makes one attempt at a shared (read) lock on `key`: `Ok(None)` when a writer holds
    /// it or waits for it with its intent set.
    ///
    /// # Errors
    ///
    /// As [`TryAcquire`](crate::TryAcquire)'s, and [`Error::InRuntime`].
    pub fn try_read(&self, key: &str) -> Result<Option<ReadGuard>, Error> {
        let attempt = self.mutex.try_read().key(key);
        self.background.try_acquire(attempt, ReadGuard::new)
    }

    /// Waits for write locks on the keys of `write` and read locks on those of `read`, all
    /// taken in one step, with no time limit; see
    /// [`RwMutex::lock_all`](crate::RwMutex::lock_all) and the
    /// [multiple keys guide](crate::guide::multiple_keys).
    ///
    /// # Errors
    ///
    /// As [`LockAll`](crate::LockAll)'s, but never [`Error::Timeout`] nor
    /// [`Error::Cancelled`]; and [`Error::InRuntime`] on a thread with a Tokio runtime
    /// context, with nothing sent.
    pub fn lock_all(&self, write: &[&str], read: &[&str]) -> Result<MultiGuard, Error> {
        let request = self
            .mutex
            .lock_all()
            .write(write.iter().copied())
            .read(read.iter().copied());
        self.background.acquire(request, MultiGuard::new)
    }

    /// Waits at most `timeout` for the set [`lock_all`](Self::lock_all) takes.
    ///
    /// # Errors
    ///
    /// As [`LockAll`](crate::LockAll)'s ([`Error::Timeout`] when `timeout` runs out
    /// first), and [`Error::InRuntime`].
    pub fn lock_all_timeout(
        &self,
        write: &[&str],
        read: &[&str],
        timeout: Duration,
    ) -> Result<MultiGuard, Error> {
        let request = self
            .mutex
            .lock_all()
            .write(write.iter().copied())
            .read(read.iter().copied())
            .timeout(timeout);
        self.background.acquire(request, MultiGuard::new)
    }

    /// Makes one attempt at the set [`lock_all`](Self::lock_all) takes: `Ok(None)` when
    /// others hold a key of it.
    ///
    /// # Errors
    ///
    /// As [`TryLockAll`](crate::TryLockAll)'s, and [`Error::InRuntime`].
    pub fn try_lock_all(&self, write: &[&str], read: &[&str]) -> Result<Option<MultiGuard>, Error> {
        let attempt = self
            .mutex
            .try_lock_all()
            .write(write.iter().copied())
            .read(read.iter().copied());
        self.background.try_acquire(attempt, MultiGuard::new)
    }

    /// Waits for an upgradable read lock on `key`, with no time limit; see
    /// [`RwMutex::upgradable_read`](crate::RwMutex::upgradable_read).
    ///
    /// # Errors
    ///
    /// As [`write`](Self::write); [`Error::InvalidOptions`] on a fair mutex.
    pub fn upgradable_read(&self, key: &str) -> Result<UpgradableReadGuard, Error> {
        let request = self.mutex.upgradable_read().key(key);
        self.background.acquire(request, UpgradableReadGuard::new)
    }

    /// Waits at most `timeout` for an upgradable read lock on `key`.
    ///
    /// # Errors
    ///
    /// As [`write_timeout`](Self::write_timeout); [`Error::InvalidOptions`] on a fair
    /// mutex.
    pub fn upgradable_read_timeout(
        &self,
        key: &str,
        timeout: Duration,
    ) -> Result<UpgradableReadGuard, Error> {
        let request = self.mutex.upgradable_read().key(key).timeout(timeout);
        self.background.acquire(request, UpgradableReadGuard::new)
    }

    /// Makes one attempt at an upgradable read lock on `key`: `Ok(None)` when a writer
    /// holds it or waits with its intent set, or another upgradable reader holds it.
    ///
    /// # Errors
    ///
    /// As [`try_read`](Self::try_read); [`Error::InvalidOptions`] on a fair mutex.
    pub fn try_upgradable_read(&self, key: &str) -> Result<Option<UpgradableReadGuard>, Error> {
        let attempt = self.mutex.try_upgradable_read().key(key);
        self.background
            .try_acquire(attempt, UpgradableReadGuard::new)
    }

    /// Reads who holds the lock at `key`, who waits and its last fencing token, as one
    /// snapshot; see [`RwMutex::inspect`](crate::RwMutex::inspect).
    ///
    /// # Errors
    ///
    /// As [`RwMutex::inspect`](crate::RwMutex::inspect)'s, and [`Error::InRuntime`].
    pub fn inspect(&self, key: &str) -> Result<LockState, Error> {
        self.background.block_on(self.mutex.inspect(key))?
    }

    /// Releases the lock at `key` by force, whoever holds it; see
    /// [`RwMutex::force_unlock`](crate::RwMutex::force_unlock).
    ///
    /// # Errors
    ///
    /// As [`RwMutex::force_unlock`](crate::RwMutex::force_unlock)'s, and
    /// [`Error::InRuntime`].
    pub fn force_unlock(&self, key: &str) -> Result<bool, Error> {
        self.background.block_on(self.mutex.force_unlock(key))?
    }

    /// Takes over the write lock a [`Lease`] names; see
    /// [`RwMutex::attach_write`](crate::RwMutex::attach_write). The guard is refreshed by
    /// this handle's background thread.
    ///
    /// # Errors
    ///
    /// As [`RwMutex::attach_write`](crate::RwMutex::attach_write)'s, and
    /// [`Error::InRuntime`] (nothing sent).
    pub fn attach_write(&self, lease: &Lease) -> Result<WriteGuard, Error> {
        self.background
            .acquire(self.mutex.attach_write(lease), WriteGuard::new)
    }

    /// Takes over the read lock a [`Lease`] names; see
    /// [`RwMutex::attach_read`](crate::RwMutex::attach_read).
    ///
    /// # Errors
    ///
    /// As [`RwMutex::attach_read`](crate::RwMutex::attach_read)'s, and
    /// [`Error::InRuntime`].
    pub fn attach_read(&self, lease: &Lease) -> Result<ReadGuard, Error> {
        self.background
            .acquire(self.mutex.attach_read(lease), ReadGuard::new)
    }

    /// Takes over every lock a [`Lease`] names at once; see
    /// [`RwMutex::attach_all`](crate::RwMutex::attach_all).
    ///
    /// # Errors
    ///
    /// As [`RwMutex::attach_all`](crate::RwMutex::attach_all)'s, and
    /// [`Error::InRuntime`].
    pub fn attach_all(&self, lease: &Lease) -> Result<MultiGuard, Error> {
        self.background
            .acquire(self.mutex.attach_all(lease), MultiGuard::new)
    }

    /// Releases the hold a [`Lease`] names, under its own id; see
    /// [`RwMutex::release`](crate::RwMutex::release).
    ///
    /// # Errors
    ///
    /// As [`RwMutex::release`](crate::RwMutex::release)'s, and [`Error::InRuntime`].
    pub fn release(&self, lease: &Lease) -> Result<bool, Error> {
        self.background.block_on(self.mutex.release(lease))?
    }

    /// Extends the hold a [`Lease`] names by this mutex's TTL, under its own id; see
    /// [`RwMutex::renew`](crate::RwMutex::renew).
    ///
    /// # Errors
    ///
    /// As [`RwMutex::renew`](crate::RwMutex::renew)'s, and [`Error::InRuntime`].
    pub fn renew(&self, lease: &Lease) -> Result<bool, Error> {
        self.background.block_on(self.mutex.renew(lease))?
    }

    /// The mutex name: the lock key, or its prefix when a request sets a key.
    pub fn name(&self) -> &str {
        self.mutex.name()
    }

    /// How long a lock lives in Redis without a refresh.
    pub fn ttl(&self) -> Duration {
        self.mutex.ttl()
    }
}

impl fmt::Debug for RwMutex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RwMutex")
            .field("mutex", &self.mutex)
            .finish_non_exhaustive()
    }
}
