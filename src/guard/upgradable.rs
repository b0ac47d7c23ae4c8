//! [`UpgradableReadGuard`]: a held shared lock that can become the exclusive one.

use std::fmt;

use redis::{FromRedisValue, Pipeline};

use super::any::AnyGuard;
use super::common::{guard_methods, impl_guard};
use super::read::ReadGuard;
use super::write::WriteGuard;
use crate::error::Error;

/// A held upgradable read lock of a [`RwMutex`](crate::RwMutex), from
/// [`upgradable_read`](crate::RwMutex::upgradable_read) or
/// [`try_upgradable_read`](crate::RwMutex::try_upgradable_read): a shared lock that
/// [`upgrade`](Self::upgrade) turns into the exclusive one with no writer in between, as
/// parking_lot's `RwLockUpgradableReadGuard` does in memory.
///
/// It reads as a [`ReadGuard`] does: its [`id`](Self::id) is a member of the readers'
/// set at the lock key, so plain readers (this crate's and the Go package's) share the
/// lock with it, and writers (Go's too) are kept out. At most one upgradable reader
/// holds a key at a time: the upgrader key `<lock key>:upgrader` holds its id while it
/// is one of the readers (renewed with it), and a second `upgradable_read` waits. What
/// every guard shares (the cancellation token, the refresher, dropping) is on the
/// [`Guard`](crate::Guard) trait, whose methods this type has of its own.
///
/// It is never nested: on a [reentrant](crate::Builder::reentrant) mutex it is a lock of
/// its own, and a task that also holds a plain read lock of the key waits for itself in
/// [`upgrade`](Self::upgrade) (a [`timeout`](crate::Acquire::timeout) ends that).
///
/// It has no `detach`: its upgrader key and an upgrade that may be in flight are a state
/// no [`Lease`](crate::Lease) carries. Detach the [`ReadGuard`] that
/// [`downgrade`](Self::downgrade) makes of it, or the [`WriteGuard`] that
/// [`upgrade`](Self::upgrade) makes.
///
/// See the [reentrancy guide](crate::guide::reentrancy) for the protocol and its
/// guarantees.
#[must_use = "dropping the guard releases the lock at once"]
#[clippy::has_significant_drop]
pub struct UpgradableReadGuard {
    inner: AnyGuard,
}

impl UpgradableReadGuard {
    pub(crate) fn new(inner: AnyGuard) -> Self {
        Self { inner }
    }

    guard_methods!("lock");

    /// Turns this upgradable read lock into the write lock held by the same id, once no
    /// other reader is left: a [`WriteGuard`] whose fencing token is larger than every
    /// earlier token of the key (this guard's included), minted in the same step.
    ///
    /// While other readers hold the lock, it sets the lock intent (`<lock key>:lock-intent`,
    /// as a waiting writer does, whatever [`Builder::lock_intent`](crate::Builder::lock_intent)
    /// says), so that no new reader joins, and waits for the readers present to leave:
    /// woken by their releases (with a [`Notifier`](crate::Notifier); every release of a
    /// reader that leaves one reader publishes), polling otherwise, and re-attempting at
    /// least every `ttl / 2` to keep the intent alive. No writer can take the lock in
    /// between: the lock stays a readers' set holding this id until the step that makes
    /// it this id's string. The guard is renewed all along.
    ///
    /// It waits as long as the readers stay, and a reader whose process froze or died
    /// without releasing stays as long as the set lives, which this guard's renewals
    /// keep alive (the [reentrancy guide](crate::guide::reentrancy#upgradable-reads)):
    /// bound it with [`tokio::time::timeout`] (dropping the future releases the lock,
    /// below), or use [`try_upgrade`](Self::try_upgrade).
    ///
    /// # Errors
    ///
    /// [`Error::NotHeld`] when the lock is no longer held by this id (lost, expired, its
    /// token fired): the token fires with [`CancelReason::Lost`](crate::CancelReason::Lost)
    /// when the upgrade found it gone. Also [`Error::NotHeld`] when the id still reads but
    /// is no longer the upgradable reader (its upgrader key was lost and another took it):
    /// the guard is released. [`Error::Timeout`] when an attempt got no reply
    /// before the guard's validity deadline. [`Error::Redis`], [`Error::Refused`],
    /// [`Error::WrongType`] and [`Error::NoExpiry`] as for [`Acquire`](crate::Acquire).
    /// On every error the guard is gone: its lock is released as dropping it does.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future drops the guard, which releases the lock from the background
    /// task, with the lock intent the upgrade set. An upgrade sent and not yet answered
    /// may still run: the release then removes the id as the writer's and, if that finds
    /// nothing, as the upgradable reader's.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(mx: redismutex::RwMutex<redis::aio::MultiplexedConnection>)
    /// # -> Result<(), redismutex::Error> {
    /// let entry = mx.upgradable_read().key("entry:42").await?;
    /// let mut get = redis::pipe();
    /// get.get("cache:entry:42");
    /// let (cached,): (Option<String>,) = entry.exec(&get).await?;
    /// if cached.is_none() {
    ///     // Stale: rebuild it. No writer got in since the read.
    ///     let entry = entry.upgrade().await?;
    ///     let mut set = redis::pipe();
    ///     set.set("cache:entry:42", "rebuilt").ignore();
    ///     let () = entry.exec(&set).await?;
    ///     entry.unlock().await?;
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn upgrade(self) -> Result<WriteGuard, Error> {
        match self.inner.upgrade(true).await? {
            Ok(upgraded) => Ok(WriteGuard::new(upgraded)),
            // A waiting upgrade is never refused for others reading.
            Err(guard) => Ok(WriteGuard::new(guard)),
        }
    }

    /// One attempt to upgrade: `Ok(Ok(WriteGuard))` as [`upgrade`](Self::upgrade) gives
    /// it when no other reader is left, `Ok(Err(self))` when others still read (nothing
    /// was set: no lock intent). Never waits.
    ///
    /// # Errors
    ///
    /// As [`upgrade`](Self::upgrade); on an error the guard is gone.
    ///
    /// # Cancel safety
    ///
    /// As [`upgrade`](Self::upgrade)'s.
    pub async fn try_upgrade(self) -> Result<Result<WriteGuard, UpgradableReadGuard>, Error> {
        Ok(match self.inner.upgrade(false).await? {
            Ok(upgraded) => Ok(WriteGuard::new(upgraded)),
            Err(guard) => Err(Self::new(guard)),
        })
    }

    /// Gives up the right to upgrade: the same id stays a plain reader (a [`ReadGuard`]
    /// with the same fencing token), and another upgradable reader may go in (waiters are
    /// told). The upgrader key is deleted in one step that checks the id still reads.
    ///
    /// # Errors
    ///
    /// [`Error::NotHeld`] when the id no longer holds the lock (the token fires with
    /// [`CancelReason::Lost`](crate::CancelReason::Lost)); [`Error::Timeout`],
    /// [`Error::Redis`], [`Error::Refused`], [`Error::WrongType`] and [`Error::NoExpiry`]
    /// as for [`upgrade`](Self::upgrade). On an error the guard is gone.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future drops the guard, which releases the lock (and the upgrader
    /// key, if still this id's) from the background task.
    pub async fn downgrade(self) -> Result<ReadGuard, Error> {
        self.inner.plain().await.map(ReadGuard::new)
    }

    /// Runs the read-only commands of `pipe` only while this reader still holds the lock,
    /// in one atomic step with that check, as [`ReadGuard::exec`] does (writes are
    /// refused with [`Error::InvalidPipeline`]: plain readers share the lock).
    ///
    /// # Errors
    ///
    /// As [`ReadGuard::exec`].
    ///
    /// # Cancel safety
    ///
    /// As [`ReadGuard::exec`]'s.
    pub async fn exec<T: FromRedisValue>(&self, pipe: &Pipeline) -> Result<T, Error> {
        self.inner.exec(pipe).await
    }

    /// Releases the lock (removes this id from the readers' set, and the upgrader key and
    /// any lock intent that hold it) and reports whether it was still held, as
    /// [`ReadGuard::unlock`] does. Waiting upgradable readers are told.
    ///
    /// # Errors
    ///
    /// As [`ReadGuard::unlock`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`ReadGuard::unlock`].
    pub async fn unlock(self) -> Result<bool, Error> {
        self.inner.unlock().await
    }
}

impl_guard!(UpgradableReadGuard);

impl fmt::Debug for UpgradableReadGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.debug("UpgradableReadGuard", f)
    }
}
