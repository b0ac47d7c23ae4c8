//! A request's place in the queue of this process's waiters on one release channel.

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::hub::{Hub, Slot};
use crate::protocol::keys::Keys;
use crate::util::lock;

/// A request's place in its channel's queue. Dropping it leaves the queue (and passes an
/// unused wake-up on to the next waiter); the last waiter's drop unsubscribes.
pub(crate) struct Waiter {
    hub: Arc<Hub>,
    /// The keys of the lock waited for, whose release channel it is.
    keys: Keys,
    slot: Arc<Slot>,
    subscribed: watch::Receiver<bool>,
    acquired: bool,
}

impl Waiter {
    pub(super) fn new(
        hub: Arc<Hub>,
        keys: Keys,
        slot: Arc<Slot>,
        subscribed: watch::Receiver<bool>,
    ) -> Self {
        Self {
            hub,
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
        self.slot.woken.store(false, Ordering::Release);
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
        let notified = self.slot.notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if self.slot.woken.load(Ordering::Acquire) {
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
        let mut state = lock(&self.hub.state);
        let Some(channel) = state.channels.get_mut(self.keys.lock()) else {
            return;
        };
        channel
            .waiters
            .retain(|slot| !Arc::ptr_eq(slot, &self.slot));
        if channel.waiters.is_empty() {
            state.channels.remove(self.keys.lock());
            self.hub.changed();
        } else if !self.acquired && self.slot.woken.load(Ordering::Acquire) {
            // Woken but giving up: the release it was woken for goes to the next.
            channel.wake_next();
        }
    }
}

impl fmt::Debug for Waiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Waiter")
            .field("channel", &self.keys.channel())
            .field("mode", &self.slot.mode)
            .finish_non_exhaustive()
    }
}
