//! The blocking [`MultiGuard`]: an async set guard with its handle's [`Background`],
//! whose thread refreshes every key of it.

use std::fmt;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use redis::{FromRedisValue, Pipeline};
use tokio_util::sync::CancellationToken;

use super::background::Background;
use crate::error::Error;
use crate::mode::Mode;
use crate::reason::CancelReason;

/// The read and write locks on several keys of a blocking [`RwMutex`](super::RwMutex),
/// taken in one step by [`RwMutex::lock_all`](super::RwMutex::lock_all): the blocking
/// form of [`crate::MultiGuard`] (see it, and the
/// [multiple keys guide](crate::guide::multiple_keys)).
///
/// Dropping it fires its cancellation token and hands the release of every key to the
/// background thread, returning at once, with the one exception a
/// [`WriteGuard`](super::WriteGuard)'s drop has.
#[must_use = "dropping the guard releases every key at once"]
#[clippy::has_significant_drop]
pub struct MultiGuard {
    guard: crate::MultiGuard,
    background: Arc<Background>,
}

impl MultiGuard {
    pub(super) fn new(guard: crate::MultiGuard, background: Arc<Background>) -> Self {
        Self { guard, background }
    }

    /// The fencing token of `key`, as the request named it (or as its lock key); `None`
    /// for a key not in the set. See
    /// [`MultiGuard::fencing_token`](crate::MultiGuard::fencing_token).
    pub fn fencing_token(&self, key: &str) -> Option<u64> {
        self.guard.fencing_token(key)
    }

    /// How the set holds `key`; `None` for a key not in the set.
    pub fn mode(&self, key: &str) -> Option<Mode> {
        self.guard.mode(key)
    }

    /// The keys of the set, as the request named them, in that order.
    pub fn keys(&self) -> impl Iterator<Item = &str> + '_ {
        self.guard.keys()
    }

    /// The Redis lock key of each key of the set, in the set's order.
    pub fn lock_keys(&self) -> impl Iterator<Item = &str> + '_ {
        self.guard.lock_keys()
    }

    /// The set's id, which every key holds: 32 lowercase hex characters.
    pub fn id(&self) -> &str {
        self.guard.id()
    }

    /// The cancellation token that fires when any key is lost or expires, when the set
    /// is released, or when it is cancelled; cancelling it releases every key.
    pub fn cancellation_token(&self) -> &CancellationToken {
        self.guard.cancellation_token()
    }

    /// Whether the set must be taken as not held; see
    /// [`MultiGuard::is_cancelled`](crate::MultiGuard::is_cancelled). It never blocks.
    pub fn is_cancelled(&self) -> bool {
        self.guard.is_cancelled()
    }

    /// Why the set's token fired, or `None` while it has not; see
    /// [`MultiGuard::cancel_reason`](crate::MultiGuard::cancel_reason).
    pub fn cancel_reason(&self) -> Option<CancelReason> {
        self.guard.cancel_reason()
    }

    /// The key whose loss, expiry or `max_hold` ended the set, if one did.
    pub fn lost_key(&self) -> Option<&str> {
        self.guard.lost_key()
    }

    /// The earliest validity deadline of the set's keys, by this process's monotonic
    /// clock (each: the last successful acquire or refresh's send time plus the TTL minus
    /// the Redlock drift margin, 1% of the TTL + 2 ms).
    pub fn valid_until(&self) -> Instant {
        self.guard.valid_until().into_std()
    }

    /// When this set was acquired: the moment its request completed, by the system clock.
    pub fn acquired_at(&self) -> SystemTime {
        self.guard.acquired_at()
    }

    /// How many times every key's TTL has been renewed since the set was acquired: the
    /// fewest renewals of any key.
    pub fn refreshes(&self) -> u64 {
        self.guard.refreshes()
    }

    /// Runs the commands of `pipe` only while the set's id holds every key, in one atomic
    /// step with that check, and parses their replies into `T`; see
    /// [`MultiGuard::exec`](crate::MultiGuard::exec).
    ///
    /// # Errors
    ///
    /// As [`MultiGuard::exec`](crate::MultiGuard::exec), and [`Error::InRuntime`] on a
    /// thread with a Tokio runtime context (nothing was sent).
    pub fn exec<T: FromRedisValue>(&self, pipe: &Pipeline) -> Result<T, Error> {
        self.background.block_on(self.guard.exec(pipe))?
    }

    /// The set's hold as one [`Lease`](crate::Lease), while the set stays held and
    /// refreshed; nothing is sent. See [`MultiGuard::lease`](crate::MultiGuard::lease).
    pub fn lease(&self) -> crate::Lease {
        self.guard.lease()
    }

    /// Lets go of the set without releasing it, and gives its hold as one
    /// [`Lease`](crate::Lease), which another handle attaches with `attach_all`; nothing
    /// is sent. See [`MultiGuard::detach`](crate::MultiGuard::detach).
    pub fn detach(self) -> crate::Lease {
        self.guard.detach()
    }

    /// Releases every key and waits for the answers: `Ok(true)` when every key was still
    /// held. The cancellation token fires at once.
    ///
    /// # Errors
    ///
    /// As [`MultiGuard::unlock`](crate::MultiGuard::unlock), and [`Error::InRuntime`] on
    /// a thread with a Tokio runtime context, where the releases are handed to the
    /// background thread instead, as a drop does.
    pub fn unlock(self) -> Result<bool, Error> {
        let Self { guard, background } = self;
        background.block_on(guard.unlock())?
    }
}

impl fmt::Debug for MultiGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.guard.fmt(f)
    }
}
