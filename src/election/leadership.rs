//! [`Leadership`]: the guard of a leader's lock, with the record it published.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio_util::task::TaskTracker;

use crate::error::Error;
use crate::guard::{guard_methods, Proclaimer, WriteGuard};
use crate::protocol::leader::record;
use crate::spawner::Spawner;

/// How a leader keeps its record alive: written again every `every` (half its `PX`, the
/// fence retention), by a task on `tracker` if set.
#[derive(Debug, Clone)]
pub(crate) struct Keeping {
    pub(crate) every: Duration,
    pub(crate) tracker: Option<TaskTracker>,
}

/// This process leads an [`Election`](crate::Election): the guard of the election's lock,
/// held as its writer, with the record it published. From
/// [`Election::campaign`](crate::Election::campaign) or
/// [`Election::try_campaign`](crate::Election::try_campaign).
///
/// Like a [`WriteGuard`] it is a cancellation token: it fires when the leadership ends (the
/// lock is released, lost, cancelled, or past its validity deadline), and the lock is
/// renewed every `ttl / 2` until then. Do the leader's work under
/// [`cancelled`](Self::cancelled), check [`is_cancelled`](Self::is_cancelled) right before
/// each write, and send the term ([`fencing_token`](Self::fencing_token)) with every
/// write so that the resource refuses a former leader's (see the
/// [election guide](crate::guide::election)). Its accessors are its guard's, forwarded by
/// the same names: [`key`](Self::key), [`id`](Self::id),
/// [`acquired_at`](Self::acquired_at), [`refreshes`](Self::refreshes) and the rest.
///
/// Dropping it resigns in the background: the lock is released as a dropped guard's is
/// (waiting candidates are woken at once with a notifier) and observers see the change.
/// [`resign`](Self::resign) does it and waits for the answer.
#[must_use = "dropping the leadership resigns at once"]
#[clippy::has_significant_drop]
pub struct Leadership {
    guard: WriteGuard,
    /// The record as last written; held while a write is in flight, so that writes of
    /// the record (a proclaim, the renewal of the record) go out in turn.
    record: Arc<Mutex<String>>,
    proclaimer: Arc<Proclaimer>,
}

impl Leadership {
    /// The leadership of `guard`'s lock: publishes `value` in the record, then starts the
    /// task that writes it again every `keeping.every`. On an error the guard is dropped
    /// (its lock released).
    pub(crate) async fn start(
        guard: WriteGuard,
        value: String,
        keeping: Keeping,
    ) -> Result<Self, Error> {
        let first = record(guard.fencing_token(), guard.id(), &value);
        let proclaimer = Arc::new(guard.inner().proclaimer());
        proclaimer.proclaim(&first).await?;
        let leadership = Self {
            guard,
            record: Arc::new(Mutex::new(first)),
            proclaimer,
        };
        let spawner = Spawner::current(keeping.tracker);
        spawner.spawn(keep_record(
            Arc::clone(&leadership.proclaimer),
            Arc::clone(&leadership.record),
            keeping.every,
        ));
        Ok(leadership)
    }

    /// Publishes `value` as the leader's from now on, while this candidate still leads:
    /// the record is written in one step that checks the lock is still its own
    /// (`lua/proclaim.lua`), and the observers are told. The term does not change.
    ///
    /// # Errors
    ///
    /// [`Error::NotHeld`] when this candidate no longer leads (the cancellation token has
    /// fired, its validity has ended, or the server found the lock not its own: the
    /// cancellation token then fires with [`CancelReason::Lost`](crate::CancelReason::Lost));
    /// nothing was written. [`Error::Timeout`] when no
    /// answer came within the validity; [`Error::NotReplicated`] with
    /// [replicas](crate::Builder::replicas) when too few acknowledged it;
    /// [`Error::NoQuorum`] over a quorum when too few nodes answered;
    /// [`Error::Refused`] and [`Error::Redis`] when the request fails.
    ///
    /// After any error but `NotHeld` the value may have been written all the same (a
    /// reply lost, too few acknowledgements): the value is kept as this leader's, and the
    /// leader's renewal of its record writes it.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before its answer leaves the record written or not, as with
    /// any request whose reply is lost; the value is kept as this leader's all the same.
    /// The leadership is unaffected.
    pub async fn proclaim(&self, value: impl Into<String>) -> Result<(), Error> {
        let mut current = self.record.lock().await;
        // Kept before it is sent: a write whose answer says nothing sure (a timeout, too
        // few replicas or nodes) may have landed, and the record's renewal must not put
        // the older value back.
        *current = record(self.fencing_token(), self.guard.id(), &value.into());
        self.proclaimer.proclaim(&current).await
    }

    /// Stops leading: releases the lock and waits for the answer. `Ok(true)` when this
    /// candidate still led, `Ok(false)` when the lead was already lost. Waiting candidates
    /// are woken at once (with a notifier), and observers see the change.
    ///
    /// # Errors
    ///
    /// As [`WriteGuard::unlock`]'s; the cancellation token has fired either way.
    ///
    /// # Cancel safety
    ///
    /// As [`WriteGuard::unlock`]'s: the release is finished in the background.
    pub async fn resign(self) -> Result<bool, Error> {
        self.guard.unlock().await
    }

    guard_methods!("leader's lock", guard);

    /// The guard of the leader's lock: for [`WriteGuard::exec`] (writes that run only
    /// while this candidate still leads) and the lock's details.
    pub fn guard(&self) -> &WriteGuard {
        &self.guard
    }
}

/// Writes the record again every `every` while the leadership lasts, so that it lives as
/// long as the lock does; ends with the leadership or when the lock is found not held.
async fn keep_record(proclaimer: Arc<Proclaimer>, record: Arc<Mutex<String>>, every: Duration) {
    loop {
        tokio::select! {
            () = proclaimer.ended() => return,
            () = tokio::time::sleep(every) => {}
        }
        let current = record.lock().await;
        match proclaimer.proclaim(&current).await {
            Ok(()) => {}
            Err(Error::NotHeld { .. }) => return,
            Err(err) => {
                tracing::warn!(error = %err, "the leader's record was not written again; it is tried again later")
            }
        }
    }
}

impl fmt::Debug for Leadership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Leadership")
            .field("guard", &self.guard)
            .finish_non_exhaustive()
    }
}
