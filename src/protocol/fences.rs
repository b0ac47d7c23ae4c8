//! Which fence keys a mutex has seen hold a token, so that its fast paths may take them
//! as counters without reading them first.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use super::replies::TOKEN_MAX;
use crate::util;

/// How many lock keys a mutex remembers; past this it forgets them all and checks each
/// fence key once more. A miss only costs the checked (slower) path.
const CAPACITY: usize = 4096;

/// The lock keys whose fence key held a token at this mutex's last acquisition of them,
/// with when a script last gave that fence key its full TTL (the fence retention).
///
/// `INCR` on a fence key that holds any other integer would change it, and an integer
/// there that is not a token (negative, no TTL, too large) must be refused untouched. So
/// a lock key takes the fast paths only after a script has checked its fence key once,
/// and leaves them on any sign that the fence key changed. The write fast path does not
/// renew the counter's TTL: it is taken only while at least half the retention is surely
/// left since a script set it, and a script mints (and renews it) otherwise.
#[derive(Debug, Default)]
pub(crate) struct Fences {
    checked: Mutex<HashMap<String, Instant>>,
}

impl Fences {
    /// Whether `lock_key`'s fence key was checked: `rlock` may count on it.
    pub(crate) fn checked(&self, lock_key: &str) -> bool {
        self.lock().contains_key(lock_key)
    }

    /// Whether the write fast path may count on `lock_key`'s fence key: checked, and
    /// given its full `retention` by a script less than half of it ago.
    pub(crate) fn countable(&self, lock_key: &str, retention: Duration) -> bool {
        self.lock()
            .get(lock_key)
            .is_some_and(|renewed| renewed.elapsed() < retention / 2)
    }

    /// A script checked `lock_key`'s fence key, minted `token` and set the key's TTL to
    /// the retention, in a request sent at `sent`.
    pub(crate) fn minted(&self, lock_key: &str, token: u64, sent: Instant) {
        if token >= TOKEN_MAX {
            // The last token: nothing is left to count; the script refuses the next.
            self.forget(lock_key);
            return;
        }
        let mut checked = self.lock();
        if checked.len() >= CAPACITY && !checked.contains_key(lock_key) {
            checked.clear();
        }
        match checked.get_mut(lock_key) {
            Some(renewed) => *renewed = sent,
            None => {
                checked.insert(lock_key.to_owned(), sent);
            }
        }
    }

    /// A fast path counted `token` on `lock_key`'s checked fence key (its TTL unchanged).
    pub(crate) fn counted(&self, lock_key: &str, token: u64) {
        if token >= TOKEN_MAX {
            self.forget(lock_key);
        }
    }

    /// The fence key of `lock_key` gave no usable token: check it again next time.
    pub(crate) fn forget(&self, lock_key: &str) {
        self.lock().remove(lock_key);
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Instant>> {
        util::lock(&self.checked)
    }
}
