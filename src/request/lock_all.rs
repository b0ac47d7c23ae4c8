//! [`LockAll`] and [`TryLockAll`]: the set requests of
//! [`RwMutex::lock_all`](crate::RwMutex::lock_all) and
//! [`RwMutex::try_lock_all`](crate::RwMutex::try_lock_all).

use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::set::KeySet;
use crate::engine::Shared;
use crate::error::Error;
use crate::guard::MultiGuard;
use crate::mode::Mode;
use crate::wait::Patience;

/// The future of a [`LockAll`].
pub type LockAllFuture = Pin<Box<dyn Future<Output = Result<MultiGuard, Error>> + Send + 'static>>;

/// The future of a [`TryLockAll`].
pub type TryLockAllFuture =
    Pin<Box<dyn Future<Output = Result<Option<MultiGuard>, Error>> + Send + 'static>>;

/// The methods both set requests have, on their field `set`: the keys and the parent.
macro_rules! set_methods {
    () => {
        /// Adds `keys` to the set, each to be taken as its writer: the lock key
        /// `<name>:<key>`, as [`Acquire::key`](crate::Acquire::key) names it (an empty key
        /// names the mutex itself).
        pub fn write<K: Into<String>>(mut self, keys: impl IntoIterator<Item = K>) -> Self {
            self.set.add(keys, Mode::Write);
            self
        }

        /// Adds `keys` to the set, each to be taken as one of its readers.
        pub fn read<K: Into<String>>(mut self, keys: impl IntoIterator<Item = K>) -> Self {
            self.set.add(keys, Mode::Read);
            self
        }

        /// Ties the wait and the set to `token`, as
        /// [`Acquire::parent`](crate::Acquire::parent) does: cancelling it ends the wait
        /// with [`Error::Cancelled`], or, once the set is held, cancels the guard, whose
        /// keys are then released.
        pub fn parent(mut self, token: CancellationToken) -> Self {
            self.set.parent = Some(token);
            self
        }
    };
}

/// A request to wait for read and write locks on several keys of one mutex, all at once,
/// from [`RwMutex::lock_all`](crate::RwMutex::lock_all). Name the keys with
/// [`write`](Self::write) and [`read`](Self::read), set options, then `.await` it for a
/// [`MultiGuard`].
///
/// # How it waits
///
/// Each attempt is one script (`lua/lock_all.lua`) that takes every key of the set under
/// one id, or changes nothing: no caller ever holds part of a set, and since no set
/// holds a key while it waits for another, no order of keys can deadlock two sets.
/// While a key is held by others, the request waits as a single lock's request does
/// (see [`Acquire`](crate::Acquire)): with a [`Notifier`](crate::Notifier) it sleeps in
/// this process's queue on that key's release channel until a release wakes it (or the
/// blocker's PTTL, at most half the TTL, passes), then attempts the whole set again;
/// without one it polls with the same capped backoff.
///
/// With [`Builder::lock_intent`](crate::Builder::lock_intent) (off by default), a waiting
/// set that a holder blocks sets the lock intent on each of its write keys, so new
/// readers stay out of them, and renews it while it waits. A set that another waiter's
/// intent keeps out of one of its read keys sets none, and removes those it set: so two
/// waiting sets never keep each other out. Giving up removes the intents it set.
///
/// # Errors
///
/// - [`Error::Timeout`], [`Error::Cancelled`], [`Error::WrongType`],
///   [`Error::NoExpiry`] (naming the key), [`Error::Refused`], [`Error::Redis`]: as for
///   [`Acquire`](crate::Acquire).
/// - [`Error::InvalidKey`] before anything is sent: a lock key is unusable (as for
///   [`Acquire`](crate::Acquire)), the set is empty, it has more than
///   [`MAX_SET_KEYS`](crate::MAX_SET_KEYS) keys, or it names a key twice (also once to
///   read and once to write: take such a key to write).
/// - [`Error::CrossSlot`] before anything is sent, on a Redis Cluster (or with
///   [`Builder::hash_tag_keys`](crate::Builder::hash_tag_keys)), when the lock keys are
///   not all in one slot: give them one hash tag (`"{acct}:1"`, `"{acct}:2"`), or name
///   the mutex with one (`"{bank}"`).
/// - [`Error::InvalidOptions`] on a [fair](crate::Builder::fair) mutex (see the
///   [multiple keys guide](crate::guide::multiple_keys)).
/// - Over a [`Quorum`](crate::Quorum), never [`Error::NoQuorum`]: a wait whose attempt
///   reaches too few nodes polls on until its timeout ([`Error::Timeout`]); see the
///   [quorum guide](crate::guide::quorum#sets-of-keys).
/// - [`Error::WouldDeadlock`] at once on a [reentrant](crate::Builder::reentrant) mutex
///   whose task holds a key of the set as a writer, or as a reader when the set writes
///   it.
///
/// On every error the set's intents are removed, and an attempt that may have taken the
/// set unseen is released, in background tasks, as for [`Acquire`](crate::Acquire).
///
/// # Cancel safety
///
/// Dropping the future before it completes is safe: the same clean-up runs in background
/// tasks.
#[must_use = "a request does nothing until it is awaited"]
pub struct LockAll<C> {
    set: KeySet<C>,
    timeout: Option<Duration>,
}

impl<C> LockAll<C> {
    pub(crate) fn new(shared: Arc<Shared<C>>) -> Self {
        Self {
            set: KeySet::new(shared),
            timeout: None,
        }
    }

    set_methods!();

    /// Stops waiting after `timeout` with [`Error::Timeout`]. It bounds the wait only,
    /// never the hold.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
}

impl<C: Send + Sync + 'static> IntoFuture for LockAll<C> {
    type Output = Result<MultiGuard, Error>;
    type IntoFuture = LockAllFuture;

    fn into_future(self) -> Self::IntoFuture {
        let run = self.set.run(Patience::Wait(self.timeout));
        Box::pin(async move { run.await?.ok_or(Error::Timeout) })
    }
}

/// A single attempt at read and write locks on several keys of one mutex, all at once,
/// from [`RwMutex::try_lock_all`](crate::RwMutex::try_lock_all): `.await` it for
/// `Ok(Some(MultiGuard))`, or `Ok(None)` when others hold a key of the set (or, for a
/// read key, a writer waits with its intent set). It never sets the lock intent. Errors
/// and cancel safety are [`LockAll`]'s, with no timeout; and [`Error::Timeout`] when the
/// attempt gets no reply within the lock's validity. Over a [`Quorum`](crate::Quorum),
/// [`Error::NoQuorum`] when fewer than a majority of the nodes answered within the
/// per-node bound; `Ok(None)` only when a majority answered and a node among them found
/// a key held.
#[must_use = "a request does nothing until it is awaited"]
pub struct TryLockAll<C> {
    set: KeySet<C>,
}

impl<C> TryLockAll<C> {
    pub(crate) fn new(shared: Arc<Shared<C>>) -> Self {
        Self {
            set: KeySet::new(shared),
        }
    }

    set_methods!();
}

impl<C: Send + Sync + 'static> IntoFuture for TryLockAll<C> {
    type Output = Result<Option<MultiGuard>, Error>;
    type IntoFuture = TryLockAllFuture;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.set.run(Patience::Once))
    }
}

impl<C> fmt::Debug for LockAll<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockAll")
            .field("keys", &self.set.parts)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl<C> fmt::Debug for TryLockAll<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TryLockAll")
            .field("keys", &self.set.parts)
            .finish_non_exhaustive()
    }
}
