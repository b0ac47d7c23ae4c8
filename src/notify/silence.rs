//! The lock keys whose holders were seen to release without a message: a Go client (the
//! Go package publishes nothing) keeps its key alive and deletes it silently. A waiter
//! behind such a holder sleeps until its fallback timer (half the TTL, short of the
//! blocker's PTTL) and comes late; once one such release was seen on a channel, the
//! waiters there poll as a waiter without a notifier does, and a message still wakes them
//! at once. A key that expires (a holder that crashed) marks nothing: the waiter sleeps
//! to its PTTL and is on time.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::util::lock;

/// How long a release without a message marks its channel: ten minutes, long enough to
/// cover a Go service's steady use of a key, short enough that a key that moved to
/// holders who publish goes back to sleeping for its messages.
pub(crate) const SILENT_FOR: Duration = Duration::from_secs(600);

/// How many lock keys are remembered; past this all are forgotten, which only costs the
/// next waiter on each a late wake-up.
const CAPACITY: usize = 4096;

/// When a release without a message was last seen, per lock key (one per release
/// channel).
#[derive(Debug, Default)]
pub(crate) struct Silence {
    seen: Mutex<HashMap<String, Instant>>,
}

impl Silence {
    /// A waiter on the lock at `lock_key` found it free after a sleep that no message
    /// ended.
    pub(crate) fn seen(&self, lock_key: &str) {
        let mut seen = lock(&self.seen);
        if seen.len() >= CAPACITY && !seen.contains_key(lock_key) {
            seen.clear();
        }
        match seen.get_mut(lock_key) {
            Some(at) => *at = Instant::now(),
            None => {
                seen.insert(lock_key.to_owned(), Instant::now());
            }
        }
    }

    /// Whether a release without a message of the lock at `lock_key` was seen in the last
    /// [`SILENT_FOR`].
    pub(crate) fn silent(&self, lock_key: &str) -> bool {
        let mut seen = lock(&self.seen);
        match seen.get(lock_key) {
            Some(at) if at.elapsed() < SILENT_FOR => true,
            Some(_) => {
                seen.remove(lock_key);
                false
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_silent_release_marks_its_channel_for_a_while() {
        let silence = Silence::default();
        assert!(!silence.silent("a"));
        silence.seen("a");
        assert!(silence.silent("a") && !silence.silent("b"));
        tokio::time::advance(SILENT_FOR - Duration::from_secs(1)).await;
        assert!(silence.silent("a"));
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(!silence.silent("a"), "forgotten after SILENT_FOR");
    }

    #[test]
    fn past_its_capacity_it_forgets_all() {
        let silence = Silence::default();
        for n in 0..CAPACITY {
            silence.seen(&n.to_string());
        }
        assert!(silence.silent("0"));
        silence.seen("one more");
        assert!(!silence.silent("0") && silence.silent("one more"));
    }
}
