//! A held permit of a [`Semaphore`](crate::Semaphore).

use std::fmt;
use std::future::Future;
use std::time::SystemTime;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Guard;
use crate::error::Error;
use crate::reason::CancelReason;

/// One permit of a [`Semaphore`](crate::Semaphore), and the cancellation token that says
/// whether it is still held.
///
/// It behaves as a [`Guard`] does: its semaphore's refresher renews the permit every
/// `ttl / 2` while it lives; the token fires when the permit is returned ([`unlock`](Self::unlock)
/// or drop), when the [`parent`](crate::Acquire::parent) token or the permit's own token
/// is cancelled, when a refresh finds the permit gone (its deadline passed by the
/// server's clock, so others may have taken it), or when no refresh succeeds within the
/// TTL minus the Redlock drift margin. Every look through the permit compares the clock
/// with the validity deadline first, as [`Guard::is_cancelled`] does.
///
/// Dropping the permit cancels its token and returns the permit from the refresher.
#[must_use = "dropping the permit returns it at once"]
#[clippy::has_significant_drop]
pub struct Permit {
    guard: Guard,
}

impl Permit {
    pub(crate) fn new(guard: Guard) -> Self {
        Self { guard }
    }

    /// The Redis semaphore key: `<name>` or `<name>:<key>`, a sorted set of the holders'
    /// ids scored by their deadlines.
    pub fn key(&self) -> &str {
        self.guard.key()
    }

    /// This permit's id: 32 lowercase hex characters from 16 CSPRNG bytes, its member in
    /// the sorted set at the semaphore key.
    pub fn id(&self) -> &str {
        self.guard.id()
    }

    /// This acquisition's fencing token: strictly larger than the token of every earlier
    /// permit of the same semaphore key, minted from `<semaphore key>:fence` as a lock's
    /// is (see the [fencing guide](crate::guide::fencing)). With N permits, up to N
    /// holders share the resource, so a resource that fences them keeps the tokens it
    /// accepts (or their largest per holder) rather than only the largest.
    pub fn fencing_token(&self) -> u64 {
        self.guard.fencing_token()
    }

    /// The token that fires when the permit is returned, lost or cancelled. Cancelling it
    /// returns the permit (with [`CancelReason::Cancelled`]). See [`Guard::token`].
    pub fn token(&self) -> &CancellationToken {
        self.guard.token()
    }

    /// Completes when the token fires or the validity deadline passes, whichever is
    /// first.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future has no effect on the permit.
    pub fn cancelled(&self) -> impl Future<Output = ()> + Send + '_ {
        self.guard.cancelled()
    }

    /// Whether the permit must be taken as not held: the token has fired, or the
    /// validity deadline has passed (which fires the token with
    /// [`CancelReason::Expired`] now).
    pub fn is_cancelled(&self) -> bool {
        self.guard.is_cancelled()
    }

    /// Why the token fired, or `None` while it has not; see [`Guard::cancel_reason`].
    pub fn cancel_reason(&self) -> Option<CancelReason> {
        self.guard.cancel_reason()
    }

    /// The validity deadline: the send time of the last successful acquire or refresh
    /// plus the TTL minus the Redlock drift margin (1% of the TTL + 2 ms); see
    /// [`Guard::valid_until`].
    pub fn valid_until(&self) -> Instant {
        self.guard.valid_until()
    }

    /// When this permit was acquired, by the system clock; see [`Guard::acquired_at`].
    pub fn acquired_at(&self) -> SystemTime {
        self.guard.acquired_at()
    }

    /// How many times the permit's TTL has been renewed since it was acquired; see
    /// [`Guard::refreshes`].
    pub fn refreshes(&self) -> u64 {
        self.guard.refreshes()
    }

    /// Runs the commands of `pipe` only while this permit is still held (its entry in the
    /// semaphore's sorted set, with a deadline after the server's `TIME`), in one atomic
    /// step with that check, and parses their replies into `T` as
    /// [`pipe.query_async::<T>`](redis::Pipeline::query_async) would. See
    /// [`Guard::exec`], which this is, and the
    /// [guarded writes guide](crate::guide::guarded_writes).
    ///
    /// # Errors
    ///
    /// As [`Guard::exec`]: [`Error::NotHeld`] when the permit is not held any more (no
    /// command ran), [`Error::CommandFailed`], [`Error::InvalidPipeline`],
    /// [`Error::CrossSlot`], [`Error::InvalidOptions`] over a quorum,
    /// [`Error::NotReplicated`], [`Error::Timeout`], [`Error::Refused`] and
    /// [`Error::Redis`].
    ///
    /// # Cancel safety
    ///
    /// As [`Guard::exec`]: dropping the future leaves the pipeline run or not; the permit
    /// is unaffected.
    pub async fn exec<T: redis::FromRedisValue>(&self, pipe: &redis::Pipeline) -> Result<T, Error> {
        self.guard.exec(pipe).await
    }

    /// Returns the permit and reports whether it was still held: `Ok(true)` when this id
    /// held an unexpired permit and is now removed, `Ok(false)` when it had been lost
    /// (its deadline passed, or its entry was removed).
    ///
    /// # Errors
    ///
    /// As [`Guard::unlock`]: [`Error::Refused`], [`Error::Redis`], [`Error::Timeout`]
    /// after one TTL without a reply (the permit then runs out by its deadline), and
    /// [`Error::Cancelled`] when the refresher's task was stopped first.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping this future before the reply hands the release to the
    /// refresher, as dropping the permit does.
    pub async fn unlock(self) -> Result<bool, Error> {
        self.guard.unlock().await
    }
}

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("key", &self.key())
            .field("id", &self.id())
            .field("fencing_token", &self.fencing_token())
            .field("cancel_reason", &self.guard.recorded_reason())
            .finish()
    }
}
