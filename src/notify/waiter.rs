//! A request's place in the queue of this process's waiters on one release channel.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::queue::Slot;
use crate::protocol::keys::Keys;

/// What a waiter leaves when it goes: the queues of a process's waiters (the hub), which
/// it holds alive while it waits.
pub(super) trait Queues: Send + Sync + 'static {
    /// The waiter at `slot` leaves the queue of the lock at `lock_key`, having taken the
    /// lock (`acquired`) or not; the queue decides what it hands on (see
    /// [`Queue::leave`](super::queue::Queue::leave)).
    fn leave(&self, lock_key: &str, slot: &Arc<Slot>, acquired: bool);
}

/// A request's place in its channel's queue. Dropping it leaves the queue (and passes an
/// unused wake-up on to the next waiter); the last waiter's drop unsubscribes.
pub(crate) struct Waiter {
    queues: Arc<dyn Queues>,
    /// The keys of the lock waited for, whose release channel it is.
    keys: Keys,
    slot: Arc<Slot>,
    subscribed: watch::Receiver<bool>,
    acquired: bool,
}

impl Waiter {
    pub(super) fn new(
        queues: Arc<dyn Queues>,
        keys: Keys,
        slot: Arc<Slot>,
        subscribed: watch::Receiver<bool>,
    ) -> Self {
        Self {
            queues,
            keys,
            slot,
            subscribed,
            acquired: false,
        }
    }

    /// Waits until the connection is subscribed to the channel, for at most `bound`;
    /// true if it is.
    pub(crate) async fn subscribed_within(&mut self, bound: Duration) -> bool {
        let ready = self.subscribed.wait_for(|subscribed| *subscribed);
        matches!(tokio::time::timeout(bound, ready).await, Ok(Ok(_)))
    }

    /// An attempt is about to be sent: forget earlier wake-ups, and report whether a
    /// release published from now on will reach this waiter.
    pub(crate) fn attempting(&self) -> bool {
        self.slot.clear();
        *self.subscribed.borrow()
    }

    /// Whether a release published now would reach this waiter.
    pub(crate) fn notifies(&self) -> bool {
        *self.subscribed.borrow()
    }

    /// Sleeps for `pause`, or less if woken (also by a wake-up since [`attempting`]);
    /// true when woken.
    ///
    /// [`attempting`]: Self::attempting
    pub(crate) async fn sleep(&self, pause: Duration) -> bool {
        let notified = self.slot.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if self.slot.is_woken() {
            return true;
        }
        tokio::select! {
            () = notified => true,
            () = tokio::time::sleep(pause) => false,
        }
    }

    /// The request took the lock: leave the queue without waking anyone (the next
    /// waiters are woken when this holder releases).
    pub(crate) fn acquired(mut self) {
        self.acquired = true;
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        self.queues
            .leave(self.keys.lock(), &self.slot, self.acquired);
    }
}

impl fmt::Debug for Waiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Waiter")
            .field("channel", &self.keys.channel())
            .field("mode", &self.slot.mode())
            .finish_non_exhaustive()
    }
}
