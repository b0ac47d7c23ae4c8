//! Which fence keys a mutex has seen hold a token, so that its fast paths may take them
//! as counters without reading them first.

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

use crate::scripts::TOKEN_MAX;

/// How many lock keys a mutex remembers; past this it forgets them all and checks each
/// fence key once more. A miss only costs the checked (slower) path.
const CAPACITY: usize = 4096;

/// The lock keys whose fence key held a token at this mutex's last acquisition of them.
///
/// `INCR` on a fence key that holds any other integer would change it, and an integer
/// there that is not a token (negative, no TTL, too large) must be refused untouched. So
/// a lock key takes the fast paths only after a script has checked its fence key once,
/// and leaves them on any sign that the fence key changed.
#[derive(Debug, Default)]
pub(crate) struct Fences {
    checked: Mutex<HashSet<String>>,
}

impl Fences {
    pub(crate) fn checked(&self, lock_key: &str) -> bool {
        self.lock().contains(lock_key)
    }

    /// An acquisition of `lock_key` minted `token` (a script checked the fence key, or
    /// the fast path counted on from a checked one). The last token, `TOKEN_MAX`, leaves
    /// nothing to count: the next acquisition goes to the script, which refuses it.
    pub(crate) fn mark(&self, lock_key: &str, token: u64) {
        if token >= TOKEN_MAX {
            self.forget(lock_key);
            return;
        }
        let mut checked = self.lock();
        if checked.len() >= CAPACITY {
            checked.clear();
        }
        if !checked.contains(lock_key) {
            checked.insert(lock_key.to_owned());
        }
    }

    /// The fence key of `lock_key` gave no usable token: check it again next time.
    pub(crate) fn forget(&self, lock_key: &str) {
        self.lock().remove(lock_key);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        // Nothing panics while holding it; a poisoned set is still a valid set.
        self.checked.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
