//! The queue of this process's waiters on one release channel, and its decisions: who
//! joins (at the back), whom a release wakes, and what a waiter that leaves hands on.
//!
//! A pure core: no I/O and no task. A waiter's [`Slot`] is a flag and a [`Notify`] that
//! its request sleeps on; the hub keeps one [`Queue`] per channel and calls it under its
//! lock, and a [`Waiter`](super::waiter::Waiter) leaves it when dropped.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::futures::Notified;
use tokio::sync::Notify;

use crate::mode::Mode;

/// One waiting request's place: its mode, and whether it was woken.
#[derive(Debug)]
pub(super) struct Slot {
    mode: Mode,
    /// Set by a wake-up, cleared before each attempt.
    woken: AtomicBool,
    notify: Notify,
}

impl Slot {
    fn new(mode: Mode) -> Self {
        Self {
            mode,
            woken: AtomicBool::new(false),
            notify: Notify::new(),
        }
    }

    /// The mode the request waits for: a writer is woken alone, readers together.
    pub(super) fn mode(&self) -> Mode {
        self.mode
    }

    /// Marks the slot woken and wakes its sleeping request, if any.
    fn wake(&self) {
        self.woken.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }

    /// Whether a wake-up came since the last [`clear`](Self::clear).
    pub(super) fn is_woken(&self) -> bool {
        self.woken.load(Ordering::Acquire)
    }

    /// Forgets earlier wake-ups: an attempt is about to be sent, and sees any release
    /// made before it.
    pub(super) fn clear(&self) {
        self.woken.store(false, Ordering::Release);
    }

    /// A future that completes at the next wake-up (once
    /// [`enable`](Notified::enable)d or polled); check [`is_woken`](Self::is_woken)
    /// after enabling it, for a wake-up that came before.
    pub(super) fn notified(&self) -> Notified<'_> {
        self.notify.notified()
    }
}

/// What a waiter's leaving did to its queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Left {
    /// It was the last: the queue is empty, and its channel is wanted no more.
    Empty,
    /// It had been woken and gave up: the release it was woken for went to the next.
    HandedOn,
    /// Nothing more: it had not been woken, or it took the lock (whose release wakes the
    /// next).
    Quietly,
}

/// The waiters on one release channel, in arrival order.
#[derive(Debug, Default)]
pub(super) struct Queue {
    waiters: VecDeque<Arc<Slot>>,
}

impl Queue {
    /// A new waiter for `mode` joins at the back; its slot is its place.
    pub(super) fn join(&mut self, mode: Mode) -> Arc<Slot> {
        let slot = Arc::new(Slot::new(mode));
        self.waiters.push_back(Arc::clone(&slot));
        slot
    }

    /// Queues a waiter at the front, woken by the next release before anyone else: an
    /// upgradable reader waiting to upgrade, whom no other waiter can go before anyway
    /// (it holds a read lock, and keeps new readers out).
    pub(super) fn join_first(&mut self) -> Arc<Slot> {
        let slot = Arc::new(Slot::new(Mode::Write));
        self.waiters.push_front(Arc::clone(&slot));
        slot
    }

    /// Whether nobody waits.
    pub(super) fn is_empty(&self) -> bool {
        self.waiters.is_empty()
    }

    /// Whom a release wakes: the first waiter if it is a writer, or every waiting reader
    /// if a reader is first (readers share the lock, writers take it one at a time).
    pub(super) fn next(&self) -> impl Iterator<Item = &Slot> {
        let readers = self
            .waiters
            .front()
            .is_some_and(|first| first.mode == Mode::Read);
        let count = if readers { self.waiters.len() } else { 1 };
        self.waiters
            .iter()
            .map(Arc::as_ref)
            .filter(move |slot| !readers || slot.mode == Mode::Read)
            .take(count)
    }

    /// A release: wakes the [`next`](Self::next) waiters.
    pub(super) fn wake_next(&self) {
        self.next().for_each(Slot::wake);
    }

    /// Wakes every waiter: a release may have gone unheard.
    pub(super) fn wake_all(&self) {
        self.waiters.iter().for_each(|slot| slot.wake());
    }

    /// The waiter at `slot` leaves, having taken the lock (`acquired`) or not. A waiter
    /// that was woken and gives up hands the wake-up on to the next waiters.
    pub(super) fn leave(&mut self, slot: &Arc<Slot>, acquired: bool) -> Left {
        self.waiters.retain(|waiter| !Arc::ptr_eq(waiter, slot));
        if self.waiters.is_empty() {
            Left::Empty
        } else if !acquired && slot.is_woken() {
            self.wake_next();
            Left::HandedOn
        } else {
            Left::Quietly
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Mode::{Read, Write};

    /// A queue of waiters for `modes`, in this order, and their slots.
    fn queue(modes: &[Mode]) -> (Queue, Vec<Arc<Slot>>) {
        let mut queue = Queue::default();
        let slots = modes.iter().map(|mode| queue.join(*mode)).collect();
        (queue, slots)
    }

    /// Which of `slots` have been woken.
    fn woken(slots: &[Arc<Slot>]) -> Vec<bool> {
        slots.iter().map(|slot| slot.is_woken()).collect()
    }

    /// The positions in `slots` of the waiters a release wakes.
    fn next(queue: &Queue, slots: &[Arc<Slot>]) -> Vec<usize> {
        queue
            .next()
            .map(|next| {
                slots
                    .iter()
                    .position(|slot| std::ptr::eq(slot.as_ref(), next))
                    .unwrap()
            })
            .collect()
    }

    #[test]
    fn a_release_wakes_the_first_writer_alone_or_every_reader() {
        let cases: &[(&[Mode], &[usize])] = &[
            (&[], &[]),
            (&[Write], &[0]),
            (&[Write, Read, Write], &[0]),
            (&[Write, Write], &[0]),
            (&[Read], &[0]),
            // Every reader, also those behind a writer: they share the lock.
            (&[Read, Write, Read], &[0, 2]),
            (&[Read, Read, Write], &[0, 1]),
        ];
        for (modes, expected) in cases {
            let (queue, slots) = queue(modes);
            assert_eq!(next(&queue, &slots), *expected, "{modes:?}");
            queue.wake_next();
            let woken = woken(&slots);
            let expected: Vec<bool> = (0..slots.len()).map(|at| expected.contains(&at)).collect();
            assert_eq!(woken, expected, "{modes:?}");
        }
    }

    #[test]
    fn waiters_are_woken_in_arrival_order() {
        let (mut queue, slots) = queue(&[Write, Read, Write]);
        assert_eq!(queue.leave(&slots[0], true), Left::Quietly);
        assert_eq!(next(&queue, &slots), [1]);
        assert_eq!(queue.leave(&slots[1], true), Left::Quietly);
        assert_eq!(next(&queue, &slots), [2]);
        let late = queue.join(Read);
        assert!(!queue.next().any(|slot| std::ptr::eq(slot, late.as_ref())));
    }

    #[test]
    fn a_woken_waiter_that_gives_up_hands_the_release_on() {
        let (mut queue, slots) = queue(&[Write, Write, Read]);
        queue.wake_next();
        assert_eq!(woken(&slots), [true, false, false]);
        assert_eq!(queue.leave(&slots[0], false), Left::HandedOn);
        assert_eq!(woken(&slots[1..]), [true, false]);
    }

    #[test]
    fn a_waiter_that_took_the_lock_or_was_not_woken_hands_nothing_on() {
        let (mut queue, slots) = queue(&[Write, Write, Write]);
        queue.wake_next();
        assert_eq!(queue.leave(&slots[0], true), Left::Quietly);
        assert_eq!(woken(&slots[1..]), [false, false]);
        // Not woken: its leaving says nothing about a release.
        assert_eq!(queue.leave(&slots[2], false), Left::Quietly);
        assert_eq!(woken(&slots[1..2]), [false]);
    }

    #[test]
    fn the_last_waiter_to_leave_empties_the_queue() {
        let (mut queue, slots) = queue(&[Read, Write]);
        queue.wake_all();
        assert_eq!(woken(&slots), [true, true]);
        assert_eq!(queue.leave(&slots[0], false), Left::HandedOn);
        assert!(!queue.is_empty());
        // Woken and giving up, but nobody is left to hand on to.
        assert_eq!(queue.leave(&slots[1], false), Left::Empty);
        assert!(queue.is_empty());
        assert_eq!(queue.next().count(), 0);
    }

    #[test]
    fn an_attempt_forgets_earlier_wake_ups() {
        let (queue, slots) = queue(&[Read, Read]);
        queue.wake_all();
        slots[0].clear();
        assert_eq!(woken(&slots), [false, true]);
        assert_eq!(slots[1].mode(), Read);
    }
}
