//! [`Acquire`]: a request that waits, from `write`, `read` or `acquire`.

use std::fmt;
use std::future::IntoFuture;
use std::marker::PhantomData;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::granted::{grant, Granted};
use super::{AcquireFuture, Request};
use crate::error::Error;
use crate::wait::Patience;

/// A request to wait for a lock, from [`RwMutex::write`](crate::RwMutex::write) (`G` =
/// [`WriteGuard`](crate::WriteGuard)) or [`RwMutex::read`](crate::RwMutex::read) (`G` =
/// [`ReadGuard`](crate::ReadGuard)), or for a permit, from
/// [`Semaphore::acquire`](crate::Semaphore::acquire) (`G` = [`Permit`](crate::Permit)).
/// Set options, then `.await` it for a `G`.
///
/// A permit is waited for as a writer waits for the lock (with no lock intent and no
/// fast path); what follows says "lock" for both.
///
/// # How it waits
///
/// The first attempt is one round trip: a script, or for a writer on a lock key this
/// mutex has taken before, a pipeline of `SET NX PX` and the fencing counter's `INCR`.
/// While others hold the lock:
///
/// - With a [`Notifier`](crate::Notifier) ([`Builder::notifier`](crate::Builder::notifier)),
///   the request joins this process's queue for the lock key, subscribes to its release
///   channel, and sleeps until a release wakes it: the first waiter if it is a writer,
///   every waiting reader if a reader is first, in arrival order. A fallback timer (the
///   PTTL of whatever blocks it, and at most half the TTL) covers holders that publish
///   nothing, such as Go clients or a crashed holder whose key expires.
/// - Without one, it polls with a capped, jittered exponential backoff: about 1–2 ms at
///   first, doubling up to 25–50 ms, and never longer than the PTTL of whatever blocks it
///   (the lock key, or for readers the lock-intent key).
///
/// Waiters in different processes are not queued against each other, unless the mutex or
/// semaphore is [fair](crate::Builder::fair): each waiter then takes a place in a queue
/// in Redis on its first attempt, and every release wakes all local waiters, who attempt
/// again and find out whose turn it is. An attempt answered only after the validity it
/// would start has ended (the server or the connection stalled) gives no guard: the next
/// attempt, under the same id, renews the lock if it is still ours. No attempt waits
/// longer than that validity for its reply, even over a connection with no response
/// timeout (redis-rs's cluster client, which keeps retrying through a failover): the
/// request attempts again. On a Redis Cluster the first attempt is always a script, since
/// every token is floored at the server clock there (see the
/// [fencing guide](crate::guide::fencing)). With the lock intent on, a waiting writer
/// keeps new readers out (see [`Builder::lock_intent`](crate::Builder::lock_intent)); it
/// renews the intent (which holds its id) while it waits, and clears it when it gives up.
///
/// # Errors
///
/// - [`Error::Timeout`] when [`timeout`](Self::timeout) runs out first.
/// - [`Error::Cancelled`] when the [`parent`](Self::parent) token is cancelled first.
/// - [`Error::WrongType`] at once when the lock key, the lock-intent key or the fence key
///   holds another Redis type (or, for the fence key, anything but a decimal integer below
///   2^53 - 1); [`Error::NoExpiry`] at once when one exists with no TTL. The key is left
///   untouched.
/// - [`Error::InvalidKey`] before anything is sent when the lock key is longer than
///   [`MAX_KEY_BYTES`](crate::MAX_KEY_BYTES) or ends in `:fence`, `:lock-intent`,
///   `:queue` or `:queue-deadline` (another lock's keys), or,
///   on a Redis Cluster (or with
///   [`Builder::hash_tag_keys`](crate::Builder::hash_tag_keys)), has no hash tag.
/// - [`Error::InvalidOptions`] when the mutex's options are not usable (see
///   [`Builder::build`](crate::Builder::build)); only a mutex made with
///   [`RwMutex::new`](crate::RwMutex::new) can have such options.
/// - [`Error::WouldDeadlock`] at once, for a write on a
///   [reentrant](crate::Builder::reentrant) mutex from the task that holds a read lock on
///   the key.
/// - [`Error::Refused`] when Redis refuses the request (out of memory, read-only replica,
///   not authenticated, no ACL permission, busy with a script, loading); nothing was
///   changed.
/// - [`Error::Redis`] when a request fails otherwise (connection, response timeout); the
///   wait ends there (no retry).
/// - Over a [`Quorum`](crate::Quorum), never [`Error::NoQuorum`]: a wait whose attempt
///   reaches too few nodes polls on until its timeout ([`Error::Timeout`]).
///
/// On every error a writer clears the lock intent it set, and an attempt that may have
/// succeeded unseen (its reply was lost) is released, in a background task; the error is
/// returned once that clean-up is done, or after at most 100 ms more if Redis does not
/// answer.
///
/// # Cancel safety
///
/// Dropping the future before it completes is safe: the same clean-up runs in a
/// background task, so neither an intent nor a lock is left behind for a TTL (over a
/// quorum, but on a node that does not answer the release, which keeps it until its
/// TTL).
///
/// # Panics
///
/// When polled outside a Tokio runtime with the time driver enabled, like
/// `tokio::time::sleep`.
#[must_use = "a request does nothing until it is awaited"]
pub struct Acquire<C, G> {
    request: Request<C>,
    timeout: Option<Duration>,
    output: PhantomData<fn() -> G>,
}

impl<C, G> Acquire<C, G> {
    pub(crate) fn new(request: Request<C>) -> Self {
        Self {
            request,
            timeout: None,
            output: PhantomData,
        }
    }

    /// Locks `<name>:<key>` instead of `<name>` (the Go package's `WithKey`). An empty
    /// key is ignored, as in Go. With
    /// [`Builder::hash_tag_keys`](crate::Builder::hash_tag_keys) an untagged lock key is
    /// `<name>:{<key>}` instead (see the [Redis Cluster guide](crate::guide::cluster)).
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.request.key = Some(key.into());
        self
    }

    /// Ties the wait and the lock to `token` (the Go package's `WithContext`).
    ///
    /// Cancelling `token` while waiting ends the wait with [`Error::Cancelled`]. Once the
    /// lock is held, the guard's token is a child of `token`: cancelling `token` cancels
    /// the guard, whose refresher then releases the lock. Cancelling the guard does
    /// not cancel `token`.
    pub fn parent(mut self, token: CancellationToken) -> Self {
        self.request.parent = Some(token);
        self
    }

    /// Stops waiting after `timeout` with [`Error::Timeout`]. It bounds the wait only,
    /// never the hold: a lock acquired in time is kept and refreshed as usual. A zero
    /// timeout gives up at once; use `try_write`/`try_read` for a single attempt.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
}

impl<C, G> IntoFuture for Acquire<C, G>
where
    C: Send + Sync + 'static,
    G: Granted,
{
    type Output = Result<G, Error>;
    type IntoFuture = AcquireFuture<G>;

    fn into_future(self) -> Self::IntoFuture {
        let run = self.request.run(Patience::Wait(self.timeout));
        // Waiting ends with a guard or an error; `None` comes only from a single attempt.
        Box::pin(async move { run.await?.map(grant::<G>).ok_or(Error::Timeout) })
    }
}

impl<C, G> fmt::Debug for Acquire<C, G> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Acquire")
            .field("request", &self.request)
            .field("timeout", &self.timeout)
            .finish()
    }
}
