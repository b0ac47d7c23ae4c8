//! A held permit of a [`Semaphore`](crate::Semaphore).

use std::fmt;

use super::any::AnyGuard;
use super::common::{guard_methods, impl_guard};
use crate::error::Error;

/// One permit of a [`Semaphore`](crate::Semaphore), and the cancellation token that says
/// whether it is still held.
///
/// It is a [`Guard`](crate::Guard), as a lock's guards are: its semaphore's refresher
/// renews the permit every `ttl / 2` while it lives; the cancellation token fires when
/// the permit is returned ([`unlock`](Self::unlock) or drop), when the
/// [`parent`](crate::Acquire::parent) token or the permit's own cancellation token is
/// cancelled, when a refresh finds the permit gone (its deadline passed by the server's
/// clock, so others may have taken it), or when no refresh succeeds within the TTL minus
/// the Redlock drift margin. Every look through the permit compares the clock with the
/// validity deadline first, as [`Guard::is_cancelled`](crate::Guard::is_cancelled)
/// describes.
///
/// Its [`key`](Self::key) is the semaphore key, a sorted set of the holders' ids scored
/// by their deadlines; its [`id`](Self::id) is its member there. Its
/// [`fencing_token`](Self::fencing_token) is minted from `<semaphore key>:fence` as a
/// lock's is: with N permits, up to N holders share the resource, so a resource that
/// fences them keeps the tokens it accepts (or their largest per holder) rather than only
/// the largest.
///
/// Dropping the permit fires its cancellation token and returns the permit from the
/// refresher, never blocking.
#[must_use = "dropping the permit returns it at once"]
#[clippy::has_significant_drop]
pub struct Permit {
    inner: AnyGuard,
}

impl Permit {
    pub(crate) fn new(inner: AnyGuard) -> Self {
        Self { inner }
    }

    guard_methods!("permit");

    /// Runs the commands of `pipe` only while this permit is still held (its entry in the
    /// semaphore's sorted set, with a deadline after the server's `TIME`), in one atomic
    /// step with that check, and parses their replies into `T` as
    /// [`pipe.query_async::<T>`](redis::Pipeline::query_async) would. See
    /// [`WriteGuard::exec`](crate::WriteGuard::exec), which this is, and the
    /// [guarded writes guide](crate::guide::guarded_writes).
    ///
    /// # Errors
    ///
    /// As [`WriteGuard::exec`](crate::WriteGuard::exec): [`Error::NotHeld`] when the permit is not held any more (no
    /// command ran), [`Error::CommandFailed`], [`Error::InvalidPipeline`],
    /// [`Error::CrossSlot`], [`Error::InvalidOptions`] over a quorum,
    /// [`Error::NotReplicated`], [`Error::Timeout`], [`Error::Refused`] and
    /// [`Error::Redis`].
    ///
    /// # Cancel safety
    ///
    /// As [`WriteGuard::exec`](crate::WriteGuard::exec): dropping the future leaves the pipeline run or not; the permit
    /// is unaffected.
    pub async fn exec<T: redis::FromRedisValue>(&self, pipe: &redis::Pipeline) -> Result<T, Error> {
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

    /// Lets go of this permit without releasing it, and gives its hold as a
    /// [`Lease`](crate::Lease), which another handle (in this process or another)
    /// attaches with [`Semaphore::attach`](crate::Semaphore::attach), releases with [`Semaphore::release`](crate::Semaphore::release) or keeps alive with its `renew`.
    /// Nothing is sent: the permit stays held in Redis until its TTL runs out, or until
    /// the lease is attached or released; the cancellation token fires with
    /// [`CancelReason::Detached`](crate::CancelReason::Detached). As
    /// [`WriteGuard::detach`](crate::WriteGuard::detach), which says more.
    pub fn detach(self) -> crate::Lease {
        self.inner.detach()
    }

    /// Returns the permit and reports whether it was still held: `Ok(true)` when this id
    /// held an unexpired permit and is now removed, `Ok(false)` when it had been lost
    /// (its deadline passed, or its entry was removed).
    ///
    /// # Errors
    ///
    /// As [`WriteGuard::unlock`](crate::WriteGuard::unlock): [`Error::Refused`], [`Error::Redis`], [`Error::Timeout`]
    /// after one TTL without a reply (the permit then runs out by its deadline), and
    /// [`Error::Cancelled`] when the refresher's task was stopped first.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping this future before the reply hands the release to the
    /// refresher, as dropping the permit does.
    pub async fn unlock(self) -> Result<bool, Error> {
        self.inner.unlock().await
    }
}

impl_guard!(Permit);

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.debug("Permit", f)
    }
}
