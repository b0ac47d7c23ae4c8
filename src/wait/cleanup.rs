//! Clean-up after a wait that ends without a guard.

use std::sync::Arc;
use std::time::Duration;

use crate::backend::Backend;
use crate::error::Error;
use crate::lease::HeldLease;
use crate::protocol::calls::Leftovers;
use crate::spawner::Spawner;

/// How long a wait that gives up waits for its clean-up before it returns; the clean-up
/// goes on in the background after that.
const GIVE_UP_GRACE: Duration = Duration::from_millis(100);

/// What an unfinished acquire may have left in Redis, as its attempts and their replies
/// tell: a lock taken by an attempt whose reply was never read or came too late, a lock
/// intent it set, and its place in the fair queue. Plain state; [`Cleanup`] acts on it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LeftBehind {
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

impl LeftBehind {
    /// What a request has left behind before its first attempt: nothing; `queues` when
    /// it is a fair request that waits, whose attempts join the queue.
    pub(crate) fn new(queues: bool) -> Self {
        Self {
            queues,
            ..Self::default()
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

    /// The attempt was answered, and changed nothing that is left to release (a lock
    /// taken late by an earlier attempt stays to be released).
    pub(crate) fn answered(&mut self) {
        self.in_flight = false;
        self.intent_in_flight = false;
    }

    /// The lock was acquired: nothing to clean up.
    pub(crate) fn disarm(&mut self) {
        *self = Self::new(self.queues);
    }

    /// What a release must remove besides the lease's id, or `None` when nothing may be
    /// left in Redis.
    pub(crate) fn leftovers(&self) -> Option<Leftovers> {
        if !self.in_flight && !self.intent_set && !self.held_late && !self.queued {
            return None;
        }
        Some(Leftovers {
            intent: self.intent_set || self.intent_in_flight,
            queue_place: self.queued,
        })
    }
}

/// The clean-up of one request: what it may have left behind ([`LeftBehind`]), and the
/// lease to release it with. Dropped while something may be left, it releases all of it
/// from a background task.
#[derive(Debug)]
pub(crate) struct Cleanup<B: Backend> {
    lease: Arc<HeldLease<B>>,
    spawner: Spawner,
    pub(crate) left_behind: LeftBehind,
}

impl<B: Backend> Cleanup<B> {
    /// The clean-up of a request for `lease`; `queues` when it is a fair request that
    /// waits, whose attempts join the queue.
    pub(crate) fn new(lease: Arc<HeldLease<B>>, spawner: Spawner, queues: bool) -> Self {
        Self {
            lease,
            spawner,
            left_behind: LeftBehind::new(queues),
        }
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
        let leftovers = self.left_behind.leftovers()?;
        self.left_behind.disarm();
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

#[cfg(test)]
mod tests {
    use super::*;

    const NOTHING: Option<Leftovers> = None;
    const LOCK: Option<Leftovers> = Some(Leftovers::NONE);
    const LOCK_AND_INTENT: Option<Leftovers> = Some(Leftovers {
        intent: true,
        queue_place: false,
    });

    #[test]
    fn an_attempt_in_flight_may_have_taken_the_lock_and_set_the_intent() {
        let mut left_behind = LeftBehind::new(false);
        assert_eq!(left_behind.leftovers(), NOTHING);
        left_behind.sending(false);
        assert_eq!(left_behind.leftovers(), LOCK, "it may take the lock unseen");
        left_behind.sending(true);
        assert_eq!(left_behind.leftovers(), LOCK_AND_INTENT);
        left_behind.answered();
        assert_eq!(left_behind.leftovers(), NOTHING, "answered: nothing taken");
    }

    #[test]
    fn a_blocked_writer_leaves_its_intent_until_it_acquires() {
        let mut left_behind = LeftBehind::new(false);
        left_behind.sending(true);
        left_behind.blocked();
        let intent = Some(Leftovers {
            intent: true,
            queue_place: false,
        });
        assert_eq!(left_behind.leftovers(), intent);
        left_behind.sending(false);
        left_behind.answered();
        assert_eq!(left_behind.leftovers(), intent, "a later attempt keeps it");
        left_behind.sending(true);
        left_behind.disarm();
        assert_eq!(left_behind.leftovers(), NOTHING, "acquired");
    }

    #[test]
    fn a_late_or_unanswered_attempt_holds_the_lock_until_released() {
        let mut late = LeftBehind::new(false);
        late.sending(false);
        late.late();
        assert_eq!(late.leftovers(), LOCK);
        late.sending(false);
        late.answered();
        assert_eq!(
            late.leftovers(),
            LOCK,
            "an error that changed nothing keeps it"
        );

        let mut unanswered = LeftBehind::new(false);
        unanswered.sending(true);
        unanswered.unanswered();
        assert_eq!(unanswered.leftovers(), LOCK_AND_INTENT);
    }

    #[test]
    fn a_fair_wait_leaves_its_queue_place_from_its_first_attempt() {
        let mut fair = LeftBehind::new(true);
        assert_eq!(fair.leftovers(), NOTHING, "not queued before an attempt");
        fair.sending(false);
        fair.blocked();
        let place = Some(Leftovers {
            intent: false,
            queue_place: true,
        });
        assert_eq!(fair.leftovers(), place);
        fair.disarm();
        assert_eq!(fair.leftovers(), NOTHING);
        fair.sending(false);
        assert!(
            fair.leftovers().is_some_and(|left| left.queue_place),
            "still fair"
        );
    }
}
