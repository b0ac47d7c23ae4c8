//! The values returned by `write`, `read`, `try_write` and `try_read`: options, then await.

use std::fmt;
use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionLike;
use tokio_util::sync::CancellationToken;

use crate::acquire::{self, Patience};
use crate::error::Error;
use crate::guard::Guard;
use crate::mode::Mode;
use crate::mutex::Inner;
use crate::permit::Permit;

/// The future of an [`Acquire`]: a [`Guard`], or with `G` = [`Permit`] a semaphore's
/// permit.
pub type AcquireFuture<G = Guard> =
    Pin<Box<dyn Future<Output = Result<G, Error>> + Send + 'static>>;

/// The future of a [`TryAcquire`]: a [`Guard`], or with `G` = [`Permit`] a semaphore's
/// permit, if one was free.
pub type TryAcquireFuture<G = Guard> =
    Pin<Box<dyn Future<Output = Result<Option<G>, Error>> + Send + 'static>>;

/// What both kinds of request share: the mutex, the mode and the options.
pub(crate) struct Request<C> {
    pub(crate) inner: Arc<Inner<C>>,
    pub(crate) mode: Mode,
    pub(crate) key: Option<String>,
    pub(crate) parent: Option<CancellationToken>,
}

impl<C> Request<C> {
    pub(crate) fn new(inner: Arc<Inner<C>>, mode: Mode) -> Self {
        Self {
            inner,
            mode,
            key: None,
            parent: None,
        }
    }

    /// The lock key: the mutex name, or `<name>:<key>` for a non-empty key; with
    /// [`Builder::hash_tag_keys`](crate::Builder::hash_tag_keys), `{<name>}` or
    /// `<name>:{<key>}` when that has no hash tag of its own.
    pub(crate) fn lock_key(&self) -> String {
        let settings = &self.inner.settings;
        crate::keys::lock_key(&settings.name, self.key.as_deref(), settings.hash_tag_keys)
    }
}

impl<C> fmt::Debug for Request<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Request")
            .field("key", &self.lock_key())
            .field("mode", &self.mode)
            .field("parent", &self.parent.is_some())
            .finish_non_exhaustive()
    }
}

/// A request to wait for a lock, from [`RwMutex::write`](crate::RwMutex::write) or
/// [`RwMutex::read`](crate::RwMutex::read), or for a permit, from
/// [`Semaphore::acquire`](crate::Semaphore::acquire) (`G` = [`Permit`]). Set options, then
/// `.await` it for a [`Guard`] (or a [`Permit`]).
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
/// semaphore is [fair](crate::Builder::fair): each waiter then takes a place in a queue in
/// Redis on its first attempt, and every release wakes all local waiters, who attempt
/// again and find out whose turn it is. An attempt
/// answered only after the validity it would start has ended (the server or the
/// connection stalled) gives no guard: the next attempt, under the same id, renews the
/// lock if it is still ours. No attempt waits longer than that validity for its reply,
/// even over a connection with no response timeout (redis-rs's cluster client, which
/// keeps retrying through a failover): the request attempts again. On a Redis Cluster
/// the first attempt is always a script, since every token is floored at the server
/// clock there (README, "Fencing tokens"). With the lock intent on, a waiting writer keeps new readers
/// out (see [`Builder::lock_intent`](crate::Builder::lock_intent)); it renews the intent
/// (which holds its id) while it waits, and clears it when it gives up.
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
///   [`MAX_KEY_BYTES`](crate::MAX_KEY_BYTES) or ends in `:fence` or `:lock-intent`, or,
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
///
/// On every error a writer clears the lock intent it set, and an attempt that may have
/// succeeded unseen (its reply was lost) is released, in a background task; the error is
/// returned once that clean-up is done, or after at most 100 ms more if Redis does not
/// answer.
///
/// # Cancel safety
///
/// Dropping the future before it completes is safe: the same clean-up runs in a
/// background task, so neither an intent nor a lock is left behind for a TTL.
///
/// # Panics
///
/// When polled outside a Tokio runtime with the time driver enabled, like
/// `tokio::time::sleep`.
#[must_use = "a request does nothing until it is awaited"]
pub struct Acquire<C, G = Guard> {
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
    /// `<name>:{<key>}` instead (README, "Redis Cluster").
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.request.key = Some(key.into());
        self
    }

    /// Ties the wait and the lock to `token` (the Go package's `WithContext`).
    ///
    /// Cancelling `token` while waiting ends the wait with [`Error::Cancelled`]. Once the
    /// lock is held, the guard's token is a child of `token`: cancelling `token` cancels
    /// the guard, whose background task then releases the lock. Cancelling the guard does
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

impl<C> IntoFuture for Acquire<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    type Output = Result<Guard, Error>;
    type IntoFuture = AcquireFuture;

    fn into_future(self) -> Self::IntoFuture {
        if self.request.inner.settings.reentrant {
            return crate::reentry::wait(self.request, Patience::Wait(self.timeout));
        }
        Box::pin(wait(self.request, self.timeout))
    }
}

impl<C> IntoFuture for Acquire<C, Permit>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    type Output = Result<Permit, Error>;
    type IntoFuture = AcquireFuture<Permit>;

    fn into_future(self) -> Self::IntoFuture {
        let waited = wait(self.request, self.timeout);
        Box::pin(async move { waited.await.map(Permit::new) })
    }
}

/// Waits for the lock or permit `request` describes, for at most `timeout`.
async fn wait<C>(request: Request<C>, timeout: Option<Duration>) -> Result<Guard, Error>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    match acquire::run(request, Patience::Wait(timeout)).await {
        Ok(Some(guard)) => Ok(guard),
        // `run` gives `None` only for a single attempt; waiting ends with a guard or an
        // error.
        Ok(None) => Err(Error::Timeout),
        Err(err) => Err(err),
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

/// A single attempt at a lock, from [`RwMutex::try_write`](crate::RwMutex::try_write) or
/// [`RwMutex::try_read`](crate::RwMutex::try_read), or at a permit, from
/// [`Semaphore::try_acquire`](crate::Semaphore::try_acquire) (`G` = [`Permit`]). Set
/// options, then `.await` it: `Ok(Some(guard))` when acquired, `Ok(None)` when others hold
/// the lock (or, for a reader, a writer waits with its intent set; or all permits are
/// taken; or, in fair mode, others wait in the queue). It never sets the lock intent and
/// never queues. An attempt
/// answered only after the validity it would start has ended is retried once under the
/// same id; `Ok(None)` if that one is late too (the lock is then released).
///
/// # Errors
///
/// As [`Acquire`], except that there is no timeout to set: [`Error::Cancelled`] when the
/// parent token is already cancelled, [`Error::WrongType`], [`Error::NoExpiry`],
/// [`Error::InvalidKey`], [`Error::InvalidOptions`], [`Error::WouldDeadlock`],
/// [`Error::Refused`] and [`Error::Redis`]; and [`Error::Timeout`] when the attempt gets
/// no reply within the lock's validity (the TTL minus 1% and 2 ms; the reply could no
/// longer make a guard), even over a connection with no response timeout, such as
/// redis-rs's cluster client. A try therefore returns within the validity plus the 100 ms
/// it may wait for its clean-up.
///
/// # Cancel safety
///
/// Dropping the future while its attempt is in flight is safe: a background task
/// releases the lock in case the attempt succeeded.
///
/// # Panics
///
/// When polled outside a Tokio runtime with the time driver enabled.
#[must_use = "a request does nothing until it is awaited"]
pub struct TryAcquire<C, G = Guard> {
    request: Request<C>,
    output: PhantomData<fn() -> G>,
}

impl<C, G> TryAcquire<C, G> {
    pub(crate) fn new(request: Request<C>) -> Self {
        Self {
            request,
            output: PhantomData,
        }
    }

    /// Locks `<name>:<key>` instead of `<name>`; see [`Acquire::key`].
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.request.key = Some(key.into());
        self
    }

    /// Makes the guard's token a child of `token`; see [`Acquire::parent`]. An already
    /// cancelled `token` gives [`Error::Cancelled`] without contacting Redis.
    pub fn parent(mut self, token: CancellationToken) -> Self {
        self.request.parent = Some(token);
        self
    }
}

impl<C> IntoFuture for TryAcquire<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    type Output = Result<Option<Guard>, Error>;
    type IntoFuture = TryAcquireFuture;

    fn into_future(self) -> Self::IntoFuture {
        if self.request.inner.settings.reentrant {
            return crate::reentry::attempt(self.request);
        }
        Box::pin(acquire::run(self.request, Patience::Once))
    }
}

impl<C> IntoFuture for TryAcquire<C, Permit>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    type Output = Result<Option<Permit>, Error>;
    type IntoFuture = TryAcquireFuture<Permit>;

    fn into_future(self) -> Self::IntoFuture {
        let tried = acquire::run(self.request, Patience::Once);
        Box::pin(async move { tried.await.map(|guard| guard.map(Permit::new)) })
    }
}

impl<C, G> fmt::Debug for TryAcquire<C, G> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TryAcquire")
            .field("request", &self.request)
            .finish()
    }
}
