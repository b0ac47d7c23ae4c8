//! [`ReadGuard`]: a held shared lock.

use std::fmt;

use redis::{FromRedisValue, Pipeline};

use super::any::AnyGuard;
use super::common::{guard_methods, impl_guard};
use crate::error::Error;

/// A held shared (read) lock of a [`RwMutex`](crate::RwMutex), from
/// [`read`](crate::RwMutex::read), [`try_read`](crate::RwMutex::try_read) or
/// [`WriteGuard::downgrade`](crate::WriteGuard::downgrade), and the cancellation token
/// that says whether it is still held.
///
/// Any number of readers hold the lock together: the lock key is a Redis set, and this
/// guard's [`id`](Self::id) is one of its members. While the guard lives, its mutex's
/// refresher renews it every `ttl / 2`; its cancellation token fires when the lock is
/// released, lost, cancelled or past its validity deadline, and dropping the guard
/// releases it from a background task, never blocking. What every guard shares is on
/// the [`Guard`](crate::Guard) trait, whose methods this type has of its own; nested
/// read guards of a [reentrant](crate::Builder::reentrant) mutex behave as
/// [`WriteGuard`'s](crate::WriteGuard#nested-guards) do.
///
/// A read guard cannot become a writer (a write inside it, in the same task of a
/// reentrant mutex, is [`Error::WouldDeadlock`](crate::Error::WouldDeadlock)), and its
/// [`exec`](Self::exec) runs read-only commands.
#[must_use = "dropping the guard releases the lock at once"]
#[clippy::has_significant_drop]
pub struct ReadGuard {
    inner: AnyGuard,
}

impl ReadGuard {
    pub(crate) fn new(inner: AnyGuard) -> Self {
        Self { inner }
    }

    guard_methods!("lock");

    /// Runs the read-only commands of `pipe` only while this reader still holds the lock,
    /// in one atomic step with that check, and parses their replies into `T` as
    /// [`pipe.query_async::<T>`](redis::Pipeline::query_async) would: a consistent read of
    /// data the lock protects, proven to happen while the lock was held. It runs as
    /// [`WriteGuard::exec`](crate::WriteGuard::exec) does (one `lua/exec.lua`), but refuses
    /// writes: other readers hold the same lock, so a write under it would race theirs.
    ///
    /// A pipeline holding any command the server flags `write` in its `COMMAND INFO`
    /// (`SET`, `DEL`, `INCR`, `EXPIRE`, ...; for a command with subcommands, such as
    /// `XGROUP CREATE` on Redis 7, the subcommand's flags) is refused with
    /// [`Error::InvalidPipeline`] before it is sent. The flags are asked once per command
    /// name and kept, with the command's keys.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(mx: redismutex::RwMutex<redis::aio::MultiplexedConnection>)
    /// # -> Result<(), redismutex::Error> {
    /// let guard = mx.read().key("users:42").await?;
    /// let mut pipe = redis::pipe();
    /// pipe.get("cache:users:42").get("cache:users:42:version");
    /// let (body, version): (Option<String>, Option<i64>) = guard.exec(&pipe).await?;
    /// # let _ = (body, version);
    /// guard.unlock().await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`WriteGuard::exec`](crate::WriteGuard::exec), and
    /// [`Error::InvalidPipeline`] when a command of the pipeline is flagged `write` (its
    /// reason names the command and its place); no command ran, nothing was sent but, at
    /// most, the `COMMAND INFO` that found the flags.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before its reply leaves the commands run or not; the lock and
    /// the guard are unaffected.
    pub async fn exec<T: FromRedisValue>(&self, pipe: &Pipeline) -> Result<T, Error> {
        self.inner.exec(pipe).await
    }

    /// This guard's hold as a [`Lease`](crate::Lease), while the guard goes on holding and
    /// refreshing it: nothing is sent. For a process that writes the lease down (a file,
    /// say) to take its lock back after a crash or restart within the TTL, by
    /// [`RwMutex::attach_write`](crate::RwMutex::attach_write) and the like, instead of
    /// waiting the TTL out. An attach moves the hold to a new id, so if this guard is
    /// still alive then, its next refresh finds its id gone and its token fires with
    /// [`CancelReason::Lost`](crate::CancelReason::Lost): two holders never both keep
    /// it. See the [leases guide](crate::guide::leases#the-restart-pattern).
    pub fn lease(&self) -> crate::Lease {
        self.inner.lease()
    }

    /// Lets go of this lock without releasing it, and gives its hold as a
    /// [`Lease`](crate::Lease), which another handle (in this process or another)
    /// attaches with [`RwMutex::attach_read`](crate::RwMutex::attach_read), releases with [`RwMutex::release`](crate::RwMutex::release) or keeps alive with its `renew`.
    /// Nothing is sent: the lock stays held in Redis until its TTL runs out, or until
    /// the lease is attached or released; the cancellation token fires with
    /// [`CancelReason::Detached`](crate::CancelReason::Detached). As
    /// [`WriteGuard::detach`](crate::WriteGuard::detach), which says more.
    pub fn detach(self) -> crate::Lease {
        self.inner.detach()
    }

    /// Releases the lock (removes this id from the readers' set) and reports whether it
    /// was still held: `Ok(true)` when this id held it and is now removed, `Ok(false)`
    /// when it had been lost. The cancellation token fires at once, before the release is
    /// sent. The last reader to leave frees the lock, and waiting writers are told.
    ///
    /// # Errors
    ///
    /// As [`WriteGuard::unlock`](crate::WriteGuard::unlock): [`Error::Refused`],
    /// [`Error::Redis`], [`Error::Timeout`], [`Error::Cancelled`], and over a
    /// [`Quorum`](crate::Quorum) [`Error::NoQuorum`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping this future before the release is answered hands the
    /// release to the refresher, as dropping the guard does.
    pub async fn unlock(self) -> Result<bool, Error> {
        self.inner.unlock().await
    }
}

impl_guard!(ReadGuard);

impl fmt::Debug for ReadGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.debug("ReadGuard", f)
    }
}
