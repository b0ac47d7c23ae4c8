//! Clean-up after a wait that ends without a guard.

use std::sync::Arc;
use std::time::Duration;

use super::Lease;
use crate::backend::Backend;
use crate::error::Error;
use crate::protocol::calls::Leftovers;
use crate::spawner::Spawner;

/// How long a wait that gives up waits for its clean-up before it returns; the clean-up
/// goes on in the background after that.
const GIVE_UP_GRACE: Duration = Duration::from_millis(100);

/// What an unfinished acquire may have left in Redis: a lock taken by an attempt whose
/// reply was never read or came too late, a lock intent it set, and its place in the fair
/// queue. Dropped while armed, it releases all of them from a background task.
#[derive(Debug)]
pub(crate) struct Cleanup<B: Backend> {
    lease: Arc<Lease<B>>,
    spawner: Spawner,
    /// An attempt was sent and its reply not yet read.
    in_flight: bool,
    /// The attempt in flight sets the lock intent if it finds the lock held.
    intent_in_flight: bool,
    /// A write attempt set the lock intent.
    intent_set: bool,
    /// An attempt took the lock, but its reply came too late to make a guard of it.
    held_late: bool,
    /// A fair waiting request: every attempt may put it in the queue.
    queues: bool,
    /// An attempt was sent that may have put this request in the fair queue.
    queued: bool,
}

impl<B: Backend> Cleanup<B> {
    /// The clean-up of a request for `lease`; `queues` when it is a fair request that
    /// waits, whose attempts join the queue.
    pub(crate) fn new(lease: Arc<Lease<B>>, spawner: Spawner, queues: bool) -> Self {
        Self {
            lease,
            spawner,
            in_flight: false,
            intent_in_flight: false,
            intent_set: false,
            held_late: false,
            queues,
            queued: false,
        }
    }

    /// An attempt is about to be sent: it may take the lock, set the intent when
    /// `set_intent`, or join the fair queue, without us seeing the reply.
    pub(crate) fn sending(&mut self, set_intent: bool) {
        self.in_flight = true;
        self.intent_in_flight = set_intent;
        self.queued |= self.queues;
    }

    /// The attempt's reply says others hold the lock (and so it set the intent, if asked).
    pub(crate) fn blocked(&mut self) {
        self.intent_set |= self.intent_in_flight;
        self.answered();
    }

    /// The attempt took the lock, too late to be valid: it is ours until released or
    /// renewed.
    pub(crate) fn late(&mut self) {
        self.held_late = true;
        self.answered();
    }

    /// The attempt got no reply in time: it may yet take the lock, or set the intent if
    /// asked to, so both are released on giving up.
    pub(crate) fn unanswered(&mut self) {
        self.held_late = true;
        self.intent_set |= self.intent_in_flight;
        self.answered();
    }

    /// The attempt was answered with an error that changed nothing in Redis (a lock
    /// taken late by an earlier attempt stays to be released).
    pub(crate) fn answered(&mut self) {
        self.in_flight = false;
        self.intent_in_flight = false;
    }

    /// The lock was acquired: nothing to clean up.
    pub(crate) fn disarm(&mut self) {
        self.answered();
        self.intent_set = false;
        self.held_late = false;
        self.queued = false;
    }

    /// Cleans up, waiting at most [`GIVE_UP_GRACE`] for it, and hands back `err`.
    pub(crate) async fn give_up(mut self, err: Error) -> Error {
        if let Some(cleanup) = self.spawn_cleanup() {
            // A late clean-up goes on in the background; its errors are logged there.
            let _ = tokio::time::timeout(GIVE_UP_GRACE, cleanup).await;
        }
        err
    }

    fn spawn_cleanup(&mut self) -> Option<tokio::task::JoinHandle<()>> {
        if !self.in_flight && !self.intent_set && !self.held_late && !self.queued {
            return None;
        }
        let leftovers = Leftovers {
            intent: self.intent_set || self.intent_in_flight,
            queue_place: self.queued,
        };
        self.disarm();
        let lease = Arc::clone(&self.lease);
        Some(self.spawner.spawn(async move {
            if let Err(err) = lease.release(leftovers).await {
                tracing::warn!(
                    key = %lease.key(),
                    id = %lease.id(),
                    error = %crate::error::chain(&err),
                    "release after giving up failed; the lock, its intent or the queue place expires by its TTL"
                );
            }
        }))
    }
}

impl<B: Backend> Drop for Cleanup<B> {
    fn drop(&mut self) {
        self.spawn_cleanup();
    }
}
