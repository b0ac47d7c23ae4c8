//! The lock keys on whose channels this process heard something: a release message, or a
//! keyspace event. A waiter on a key not heard from yet does not know that its holders
//! publish (a Go client publishes nothing), so it sleeps a short, doubling time instead
//! of its whole fallback timer (the wait's `PROBE_FIRST`); once a key was heard from,
//! its waiters sleep until a message wakes them, as before.

use std::collections::HashSet;
use std::sync::Mutex;

use crate::util::lock;

/// How many lock keys are remembered; past this all are forgotten, which only costs the
/// next waiter on each a few shorter sleeps.
const CAPACITY: usize = 4096;

/// The lock keys heard from.
#[derive(Debug, Default)]
pub(crate) struct Heard {
    keys: Mutex<HashSet<String>>,
}

impl Heard {
    /// A message came on a channel of the lock at `lock_key`.
    pub(crate) fn heard(&self, lock_key: &str) {
        let mut keys = lock(&self.keys);
        if keys.contains(lock_key) {
            return;
        }
        if keys.len() >= CAPACITY {
            keys.clear();
        }
        keys.insert(lock_key.to_owned());
    }

    /// Whether a message came on a channel of the lock at `lock_key`.
    pub(crate) fn knows(&self, lock_key: &str) -> bool {
        lock(&self.keys).contains(lock_key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_known_once_heard_and_past_the_capacity_all_are_forgotten() {
        let heard = Heard::default();
        assert!(!heard.knows("a"));
        heard.heard("a");
        assert!(heard.knows("a") && !heard.knows("b"));
        for n in 1..CAPACITY {
            heard.heard(&n.to_string());
        }
        assert!(heard.knows("a"));
        heard.heard("one more");
        assert!(!heard.knows("a") && heard.knows("one more"));
    }
}
