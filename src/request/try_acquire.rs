//! [`TryAcquire`]: a single attempt, from `try_write`, `try_read` or `try_acquire`.

use std::fmt;
use std::future::IntoFuture;
use std::marker::PhantomData;

use tokio_util::sync::CancellationToken;

use super::granted::{grant, Granted};
use super::{Request, TryAcquireFuture};
use crate::error::Error;
use crate::wait::Patience;

/// A single attempt at a lock, from [`RwMutex::try_write`](crate::RwMutex::try_write)
/// (`G` = [`WriteGuard`](crate::WriteGuard)) or
/// [`RwMutex::try_read`](crate::RwMutex::try_read) (`G` = [`ReadGuard`](crate::ReadGuard)),
/// or at a permit, from [`Semaphore::try_acquire`](crate::Semaphore::try_acquire) (`G` =
/// [`Permit`](crate::Permit)). Set options, then `.await` it: `Ok(Some(guard))` when
/// acquired, `Ok(None)` when others hold
/// the lock (or, for a reader, a writer waits with its intent set; or all permits are
/// taken; or, in fair mode, others wait in the queue). It never sets the lock intent and
/// never queues. An attempt
/// answered only after the validity it would start has ended is retried once under the
/// same id; `Ok(None)` if that one is late too (the lock is then released).
///
/// # Errors
///
/// As [`Acquire`](crate::Acquire), except that there is no timeout to set:
/// [`Error::Cancelled`] when the parent token is already cancelled, [`Error::WrongType`], [`Error::NoExpiry`],
/// [`Error::InvalidKey`], [`Error::InvalidOptions`], [`Error::WouldDeadlock`],
/// [`Error::Refused`] and [`Error::Redis`]; and [`Error::Timeout`] when the attempt gets
/// no reply within the lock's validity (the TTL minus 1% and 2 ms; the reply could no
/// longer make a guard), even over a connection with no response timeout, such as
/// redis-rs's cluster client. A try therefore returns within the validity plus the 100 ms
/// it may wait for its clean-up. Over a [`Quorum`](crate::Quorum),
/// [`Error::NoQuorum`] when fewer than a majority of the nodes answered within the
/// per-node bound (a tenth of the TTL); `Ok(None)` only when a majority answered and a
/// node among them found the lock held.
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
pub struct TryAcquire<C, G> {
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

    /// Locks `<name>:<key>` instead of `<name>`; see
    /// [`Acquire::key`](crate::Acquire::key).
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.request.key = Some(key.into());
        self
    }

    /// Makes the guard's token a child of `token`; see
    /// [`Acquire::parent`](crate::Acquire::parent). An already cancelled `token` gives
    /// [`Error::Cancelled`] without contacting Redis.
    pub fn parent(mut self, token: CancellationToken) -> Self {
        self.request.parent = Some(token);
        self
    }
}

impl<C, G> IntoFuture for TryAcquire<C, G>
where
    C: Send + Sync + 'static,
    G: Granted,
{
    type Output = Result<Option<G>, Error>;
    type IntoFuture = TryAcquireFuture<G>;

    fn into_future(self) -> Self::IntoFuture {
        let run = self.request.run(Patience::Once);
        Box::pin(async move { Ok(run.await?.map(grant::<G>)) })
    }
}

impl<C, G> fmt::Debug for TryAcquire<C, G> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TryAcquire")
            .field("request", &self.request)
            .finish()
    }
}
