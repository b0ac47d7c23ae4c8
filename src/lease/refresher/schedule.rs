//! When the refresher renews each lock: three queues in time order.
//!
//! Every lock of one mutex has the same TTL, so a renewal comes due a fixed time after
//! the acquire or renewal before it (ttl/2), and a retry a fixed time after a failure
//! (ttl/8, or the validity deadline if sooner): pushed in the order they happen, each
//! queue stays in time order without a heap or a wheel, and a lock costs one slot. The
//! locks a sweep admits (up to two sweep periods after their acquire) have their first
//! renewal due at their acquire plus ttl/2, earlier than renewals pushed meanwhile: they
//! have a queue of their own, pushed one sweep at a time in time order. The locks due by
//! the time the refresher looks (tokio's timer has millisecond resolution) are renewed
//! together.

use std::collections::VecDeque;
use tokio::time::Instant;

/// The locks waiting for their next renewal or retry, as `T` (a weak reference).
#[derive(Debug)]
pub(super) struct Schedule<T> {
    renew: VecDeque<(Instant, T)>,
    retry: VecDeque<(Instant, T)>,
    /// The first renewals of the locks sweeps admitted.
    first: VecDeque<(Instant, T)>,
}

impl<T> Schedule<T> {
    pub(super) fn new() -> Self {
        Self {
            renew: VecDeque::new(),
            retry: VecDeque::new(),
            first: VecDeque::new(),
        }
    }

    /// `item` is renewed at `at`.
    pub(super) fn renew_at(&mut self, at: Instant, item: T) {
        self.renew.push_back((at, item));
    }

    /// `item`, admitted by a sweep, is first renewed at `at`: no earlier than the first
    /// renewal of the items swept before it.
    pub(super) fn first_at(&mut self, at: Instant, item: T) {
        self.first.push_back((at, item));
    }

    /// `item`'s renewal failed: it is tried again at `at`.
    pub(super) fn retry_at(&mut self, at: Instant, item: T) {
        self.retry.push_back((at, item));
    }

    /// Takes every item due at `now`, in time order per queue.
    pub(super) fn due(&mut self, now: Instant) -> Vec<T> {
        let mut due = Vec::new();
        for queue in [&mut self.renew, &mut self.retry, &mut self.first] {
            while queue.front().is_some_and(|(at, _)| *at <= now) {
                if let Some((_, item)) = queue.pop_front() {
                    due.push(item);
                }
            }
        }
        due
    }

    /// When the refresher must look next: the first renewal or retry.
    pub(super) fn next(&self) -> Option<Instant> {
        [&self.renew, &self.retry, &self.first]
            .into_iter()
            .filter_map(|queue| queue.front().map(|(at, _)| *at))
            .min()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.renew.is_empty() && self.retry.is_empty() && self.first.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_items_due_go_together_in_time_order() {
        let start = Instant::now();
        let ms = std::time::Duration::from_millis;
        let mut schedule = Schedule::new();
        assert_eq!(schedule.next(), None);
        schedule.renew_at(start + ms(100), "a");
        schedule.renew_at(start + ms(100), "b");
        schedule.renew_at(start + ms(120), "c");
        assert_eq!(schedule.next(), Some(start + ms(100)));
        assert!(schedule.due(start + ms(99)).is_empty());
        assert_eq!(schedule.due(start + ms(100)), ["a", "b"]);
        schedule.retry_at(start + ms(112), "d");
        assert_eq!(
            schedule.next(),
            Some(start + ms(112)),
            "the retry comes first"
        );
        assert_eq!(schedule.due(start + ms(130)), ["c", "d"]);
        assert!(schedule.is_empty() && schedule.next().is_none());
        // A swept item's first renewal comes before a renewal pushed earlier.
        schedule.renew_at(start + ms(200), "e");
        schedule.first_at(start + ms(180), "f");
        assert_eq!(schedule.next(), Some(start + ms(180)));
        assert_eq!(schedule.due(start + ms(190)), ["f"]);
        assert_eq!(schedule.due(start + ms(200)), ["e"]);
        assert!(schedule.is_empty());
    }
}
