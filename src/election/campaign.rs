//! [`Campaign`]: a candidate's wait to lead, from [`Election::campaign`]; and
//! [`TryCampaign`], its single attempt, from [`Election::try_campaign`].
//!
//! [`Election::campaign`]: crate::Election::campaign
//! [`Election::try_campaign`]: crate::Election::try_campaign

use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::leadership::Keeping;
use super::Leadership;
use crate::error::Error;
use crate::guard::WriteGuard;
use crate::request::{Acquire, TryAcquire};

/// A candidate's wait to lead, from [`Election::campaign`](crate::Election::campaign). Set
/// options, then `.await` it for a [`Leadership`].
///
/// It waits for the election's lock as [`RwMutex::write`](crate::RwMutex::write) does (see
/// [`Acquire`] for how: by Pub/Sub with a [notifier](crate::Builder::notifier), else by
/// polling; in arrival order across processes when the election is
/// [fair](crate::Builder::fair)), then writes the leader's record with the value, in one
/// step that checks the lock is still its own (`lua/proclaim.lua`), and publishes it to
/// the observers.
///
/// # Errors
///
/// Those of [`Acquire`] ([`Error::Timeout`], [`Error::Cancelled`], [`Error::WrongType`],
/// [`Error::InvalidOptions`], [`Error::Refused`], [`Error::Redis`]), and, once the lock is
/// taken, those of the record's write: [`Error::NotHeld`] when the lock was lost before
/// the record was written, [`Error::WrongType`] when the record key holds another type
/// than a string, [`Error::NotReplicated`] with [replicas](crate::Builder::replicas) when
/// too few acknowledged it, [`Error::NoQuorum`] over a quorum when too few nodes
/// answered. After such an error the lock is released (in the background): the
/// candidate does not lead.
///
/// # Cancel safety
///
/// Dropping the future before it completes is safe: a wait is cleaned up as
/// [`Acquire`]'s is, and a lock taken before the record was written is released in the
/// background.
#[must_use = "a campaign does nothing until it is awaited"]
pub struct Campaign<C> {
    acquire: Acquire<C, WriteGuard>,
    value: String,
    keeping: Keeping,
}

impl<C> Campaign<C> {
    pub(super) fn new(acquire: Acquire<C, WriteGuard>, value: String, keeping: Keeping) -> Self {
        Self {
            acquire,
            value,
            keeping,
        }
    }

    /// Ties the wait and the leadership to `token`, as [`Acquire::parent`] does: cancelling
    /// it while waiting ends the wait with [`Error::Cancelled`]; once leading, the
    /// leadership's token is its child, so cancelling `token` ends the leadership.
    pub fn parent(mut self, token: CancellationToken) -> Self {
        self.acquire = self.acquire.parent(token);
        self
    }

    /// Stops waiting after `timeout` with [`Error::Timeout`], as [`Acquire::timeout`]
    /// does. It bounds the wait only, never the leadership.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.acquire = self.acquire.timeout(timeout);
        self
    }
}

impl<C> IntoFuture for Campaign<C>
where
    C: Send + Sync + 'static,
{
    type Output = Result<Leadership, Error>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<Leadership, Error>> + Send + 'static>>;

    fn into_future(self) -> Self::IntoFuture {
        let Self {
            acquire,
            value,
            keeping,
        } = self;
        Box::pin(async move {
            let guard = acquire.await?;
            Leadership::start(guard, value, keeping).await
        })
    }
}

impl<C> fmt::Debug for Campaign<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Campaign")
            .field("acquire", &self.acquire)
            .field("value", &self.value)
            .finish_non_exhaustive()
    }
}

/// A candidate's single attempt to lead, from
/// [`Election::try_campaign`](crate::Election::try_campaign). Set options, then `.await`
/// it: `Ok(Some(leadership))` when this candidate now leads, `Ok(None)` when another
/// candidate leads. One round trip to take the lock (as
/// [`RwMutex::try_write`](crate::RwMutex::try_write) does), and one to publish the value.
///
/// # Errors
///
/// As [`Campaign`]'s, but never [`Error::Timeout`] for waiting (there is no wait):
/// [`Error::Timeout`] only when the attempt gets no reply within the lock's validity, as
/// for [`TryAcquire`](crate::TryAcquire); [`Error::Cancelled`] when the
/// [`parent`](Self::parent) token is cancelled before the attempt completes (nothing is
/// sent when it already was).
///
/// # Cancel safety
///
/// As [`Campaign`]'s: dropping the future never leaves a lock held.
#[must_use = "a campaign does nothing until it is awaited"]
pub struct TryCampaign<C> {
    attempt: TryAcquire<C, WriteGuard>,
    value: String,
    keeping: Keeping,
}

impl<C> TryCampaign<C> {
    pub(super) fn new(attempt: TryAcquire<C, WriteGuard>, value: String, keeping: Keeping) -> Self {
        Self {
            attempt,
            value,
            keeping,
        }
    }

    /// Ties the leadership to `token`, as [`Campaign::parent`] does: once leading, the
    /// leadership's cancellation token is its child. An already cancelled `token` gives
    /// [`Error::Cancelled`] without contacting Redis.
    pub fn parent(mut self, token: CancellationToken) -> Self {
        self.attempt = self.attempt.parent(token);
        self
    }
}

impl<C> IntoFuture for TryCampaign<C>
where
    C: Send + Sync + 'static,
{
    type Output = Result<Option<Leadership>, Error>;
    type IntoFuture =
        Pin<Box<dyn Future<Output = Result<Option<Leadership>, Error>> + Send + 'static>>;

    fn into_future(self) -> Self::IntoFuture {
        let Self {
            attempt,
            value,
            keeping,
        } = self;
        Box::pin(async move {
            let Some(guard) = attempt.await? else {
                return Ok(None);
            };
            Leadership::start(guard, value, keeping).await.map(Some)
        })
    }
}

impl<C> fmt::Debug for TryCampaign<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TryCampaign")
            .field("attempt", &self.attempt)
            .field("value", &self.value)
            .finish_non_exhaustive()
    }
}
