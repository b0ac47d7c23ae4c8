//! The names of one lock or semaphore in Redis: its lock key (`<name>:<key>`, tagged or
//! not) and the keys and channel named after it. Which lock keys are usable is
//! [`check`](super::check)'s; their Redis Cluster slots are [`slot`](super::slot)'s.

use std::cell::RefCell;
use std::fmt;
use std::sync::Arc;

use redis::{RedisWrite, ToRedisArgs};

use super::slot::hash_tag;
use crate::error::Error;

/// The three keys of one lock, `<lock key>`, `<lock key>:lock-intent` and
/// `<lock key>:fence`, its release channel `<lock key>:released`, and in fair mode its
/// queue `<lock key>:queue` and `<lock key>:queue-deadline`.
///
/// Only the lock key is stored, in one shared allocation; every other name is a
/// [`Name`]: the lock key and a suffix, written out where it is used (into a command's
/// buffer, by [`ToRedisArgs`]), so a held lock keeps one small allocation for its names.
/// A clone (a quorum round works on a clone of the call, a waiter keeps one) shares the
/// lock key and allocates nothing.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Keys {
    /// The lock key.
    lock: Arc<str>,
    /// Whether the lock is fair, so that it has a queue.
    fair: bool,
}

/// One name of a lock other than its lock key: `<lock key>:<suffix>`, not written out
/// until it is sent or shown.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Name<'a> {
    /// The lock key.
    lock: &'a str,
    /// What follows `<lock key>:`, one of the `*_SUFFIX` constants.
    suffix: &'static str,
}

impl Name<'_> {
    /// Its length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.lock.len() + 1 + self.suffix.len()
    }

    /// Whether `name` is this name.
    pub(crate) fn is(&self, name: &[u8]) -> bool {
        name.strip_prefix(self.lock.as_bytes())
            .and_then(|rest| rest.strip_prefix(b":"))
            == Some(self.suffix.as_bytes())
    }
}

impl fmt::Display for Name<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.lock, self.suffix)
    }
}

impl fmt::Debug for Name<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.to_string(), f)
    }
}

impl ToRedisArgs for Name<'_> {
    fn write_redis_args<W: ?Sized + RedisWrite>(&self, out: &mut W) {
        // A command writes it straight into its buffer (`Cmd::write_arg_fmt`).
        out.write_arg_fmt(self);
    }
}

/// The two keys of a fair queue (`lua/shared.lua`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Queue<'a> {
    /// `<lock key>:queue`: waiters by arrival.
    pub(crate) order: Name<'a>,
    /// `<lock key>:queue-deadline`: waiters by the deadline of their next attempt.
    pub(crate) deadline: Name<'a>,
}

impl Keys {
    /// The keys of the lock at `lock`, with its queue's keys when `fair`.
    #[cfg(test)]
    pub(crate) fn new(lock: &str, fair: bool) -> Self {
        Self {
            lock: Arc::from(lock),
            fair,
        }
    }

    /// The keys of the lock that a request for `key` (or none) on mutex `name` takes (its
    /// lock key is [`lock_key`]'s), with its queue's keys when `fair`, once `check` has
    /// accepted the lock key. The lock key is written in a buffer this thread keeps, so
    /// that the one allocation it takes is the one the keys hold.
    pub(crate) fn of_request(
        name: &str,
        key: Option<&str>,
        tag_key: bool,
        fair: bool,
        check: impl Fn(&str) -> Result<(), Error>,
    ) -> Result<Self, Error> {
        with_scratch(|lock| {
            write_lock_key(lock, name, key, tag_key);
            check(lock)?;
            Ok(Self {
                lock: Arc::from(lock.as_str()),
                fair,
            })
        })
    }

    /// The keys of the lock whose lock key is `lock` (a lease's, which names the full
    /// key), with its queue's keys when `fair`, once `check` has accepted it.
    pub(crate) fn of_lock(
        lock: &str,
        fair: bool,
        check: impl Fn(&str) -> Result<(), Error>,
    ) -> Result<Self, Error> {
        check(lock)?;
        Ok(Self {
            lock: Arc::from(lock),
            fair,
        })
    }

    /// The name `<lock key>:<suffix>`.
    fn name(&self, suffix: &'static str) -> Name<'_> {
        Name {
            lock: &self.lock,
            suffix,
        }
    }

    /// How many bytes every name but the lock key takes, written out.
    pub(crate) fn names_len(&self) -> usize {
        let count = if self.fair {
            SUFFIXES.len()
        } else {
            PLAIN_NAMES
        };
        SUFFIXES[..count]
            .iter()
            .map(|suffix| self.name(suffix).len())
            .sum()
    }

    /// The lock key: `<lock key>`.
    pub(crate) fn lock(&self) -> &str {
        &self.lock
    }

    /// The lock-intent key: `<lock key>:lock-intent`.
    pub(crate) fn intent(&self) -> Name<'_> {
        self.name(INTENT_SUFFIX)
    }

    /// The fence key: `<lock key>:fence`.
    pub(crate) fn fence(&self) -> Name<'_> {
        self.name(FENCE_SUFFIX)
    }

    /// The granted key, `<lock key>:fence-granted`: the last fencing token a quorum node
    /// granted to a holder, or the mark of a forced release (`lua/fence.lua`,
    /// `lua/retake.lua`, `lua/force_unlock.lua`). Written only by quorum mode's rounds
    /// and forced releases.
    pub(crate) fn granted(&self) -> Name<'_> {
        self.name(GRANTED_SUFFIX)
    }

    /// The upgrader key, `<lock key>:upgrader`: the id of the lock's upgradable reader,
    /// which counts only while that id is one of the readers (`lua/upgradable.lua`).
    pub(crate) fn upgrader(&self) -> Name<'_> {
        self.name(UPGRADER_SUFFIX)
    }

    /// The holders key, `<lock key>:holders`: a hash of each described holder's id to its
    /// description (`lua/describe.lua`), living as long as the holds it describes.
    pub(crate) fn holders(&self) -> Name<'_> {
        self.name(HOLDERS_SUFFIX)
    }

    /// The release channel: `<lock key>:released`.
    pub(crate) fn channel(&self) -> Name<'_> {
        self.name(CHANNEL_SUFFIX)
    }

    /// Whether `name` is one of the lock's own keys: the lock key, its intent, its fence,
    /// its granted key, its upgrader key, its holders key, or its fair queue's two keys
    /// (whether or not the lock is fair).
    pub(crate) fn is_own(&self, name: &[u8]) -> bool {
        name == self.lock.as_bytes()
            || [GRANTED_SUFFIX, UPGRADER_SUFFIX, HOLDERS_SUFFIX]
                .iter()
                .chain(&SUFFIXES)
                .any(|own| *own != CHANNEL_SUFFIX && self.name(own).is(name))
    }

    /// The fair queue's two keys; `None` when the lock is not fair.
    pub(crate) fn queue(&self) -> Option<Queue<'_>> {
        self.fair.then(|| Queue {
            order: self.name(QUEUE_SUFFIX),
            deadline: self.name(DEADLINE_SUFFIX),
        })
    }
}

/// What follows `<lock key>:` in each name of [`Keys`] after the lock key; the queue's
/// two come only in fair mode.
const SUFFIXES: [&str; 5] = [
    INTENT_SUFFIX,
    FENCE_SUFFIX,
    CHANNEL_SUFFIX,
    QUEUE_SUFFIX,
    DEADLINE_SUFFIX,
];

/// How many of [`SUFFIXES`] a lock that is not fair has names for.
const PLAIN_NAMES: usize = 3;

/// The lock key of a release channel's name: `<lock key>` of `<lock key>:released`, or
/// `None` for a channel not named so.
pub(crate) fn lock_of_channel(channel: &str) -> Option<&str> {
    channel
        .strip_suffix(CHANNEL_SUFFIX)
        .and_then(|rest| rest.strip_suffix(':'))
}

impl fmt::Debug for Keys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keys")
            .field("lock", &self.lock())
            .field("intent", &self.intent())
            .field("fence", &self.fence())
            .field("channel", &self.channel())
            .field("queue", &self.queue())
            .finish()
    }
}

/// The longest buffer [`with_scratch`] keeps for the next keys of its thread; a longer
/// one (a lock key of some kilobytes) is freed after use.
const SCRATCH_KEPT: usize = 4096;

thread_local! {
    /// Where this thread writes a lock key before it is copied into its allocation.
    static SCRATCH: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Runs `write` on this thread's empty scratch buffer, or on a new one when that is not
/// available (the thread is ending).
fn with_scratch<R>(mut write: impl FnMut(&mut String) -> R) -> R {
    SCRATCH
        .try_with(|scratch| {
            let mut buf = scratch.try_borrow_mut().ok()?;
            buf.clear();
            let out = write(&mut buf);
            if buf.capacity() > SCRATCH_KEPT {
                *buf = String::new();
            }
            Some(out)
        })
        .ok()
        .flatten()
        .unwrap_or_else(|| write(&mut String::new()))
}

/// What follows `<lock key>:` in the lock-intent key, as in the Go package.
pub(crate) const INTENT_SUFFIX: &str = "lock-intent";
/// What follows `<lock key>:` in the fence key.
pub(crate) const FENCE_SUFFIX: &str = "fence";
/// What follows `<lock key>:` in the granted key ([`Keys::granted`]).
pub(crate) const GRANTED_SUFFIX: &str = "fence-granted";
/// What follows `<lock key>:` in the upgrader key ([`Keys::upgrader`]).
pub(crate) const UPGRADER_SUFFIX: &str = "upgrader";
/// What follows `<lock key>:` in the holders key ([`Keys::holders`]).
pub(crate) const HOLDERS_SUFFIX: &str = "holders";
/// What follows `<lock key>:` in the fair queue's key.
pub(crate) const QUEUE_SUFFIX: &str = "queue";
/// What follows `<lock key>:` in the key of the fair queue's deadlines.
pub(crate) const DEADLINE_SUFFIX: &str = "queue-deadline";
/// What follows `<lock key>:` in the Pub/Sub channel a release is published on. A
/// channel is not a key, so no lock key collides with it.
pub(crate) const CHANNEL_SUFFIX: &str = "released";

/// The lock key of a request for `key` (or none) on mutex `name`: `<name>:<key>`, or
/// `<name>` without a key, as in the Go package. With `tag_key`, a lock key that carries
/// no hash tag gets one around its varying part instead: `<name>:{<key>}`, or `{<name>}`
/// without a key, so that its keys share one slot while each key of the mutex may land
/// in a slot of its own.
pub(crate) fn lock_key(name: &str, key: Option<&str>, tag_key: bool) -> String {
    // Room for the name, the key, a `:` and a hash tag's braces.
    let mut lock = String::with_capacity(name.len() + key.map_or(0, str::len) + 3);
    write_lock_key(&mut lock, name, key, tag_key);
    lock
}

/// Writes [`lock_key`] into the empty `buf`.
fn write_lock_key(buf: &mut String, name: &str, key: Option<&str>, tag_key: bool) {
    let key = key.filter(|key| !key.is_empty());
    buf.push_str(name);
    if let Some(key) = key {
        buf.push(':');
        buf.push_str(key);
    }
    if !tag_key || hash_tag(buf).is_some() {
        return;
    }
    buf.clear();
    match key {
        None => {
            buf.push('{');
            buf.push_str(name);
            buf.push('}');
        }
        Some(key) => {
            buf.push_str(name);
            buf.push_str(":{");
            buf.push_str(key);
            buf.push('}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Preview;
    use crate::protocol::check::{check_key, check_slot, MAX_KEY_BYTES};

    /// The names of the lock at `lock` as they were first written, one `format!` each:
    /// what Redis and the Go package see.
    fn formatted(lock: &str, fair: bool) -> Vec<String> {
        let mut names = vec![
            lock.to_owned(),
            format!("{lock}:lock-intent"),
            format!("{lock}:fence"),
            format!("{lock}:released"),
        ];
        if fair {
            names.push(format!("{lock}:queue"));
            names.push(format!("{lock}:queue-deadline"));
        }
        names
    }

    fn names(keys: &Keys) -> Vec<String> {
        let mut names = vec![
            keys.lock().to_owned(),
            keys.intent().to_string(),
            keys.fence().to_string(),
            keys.channel().to_string(),
        ];
        if let Some(queue) = keys.queue() {
            names.push(queue.order.to_string());
            names.push(queue.deadline.to_string());
        }
        names
    }

    /// Lock keys of every shape: empty, made of separators or of suffixes, with
    /// control characters, with multi-byte characters at either end, and the longest (of
    /// one-byte characters, and as long as two-byte characters make it).
    fn odd_locks() -> Vec<String> {
        let mut locks: Vec<String> = [
            "",
            "k",
            "orders:42",
            "{orders}:42",
            "orders:{42}",
            ":",
            "::",
            "a:",
            "lock-intent",
            "fence:queue",
            "with space\r\n\t\0nul",
            "ключ",
            "日本語:🔒",
            "é",
            "🔒",
            "\u{10FFFF}",
            "{}",
        ]
        .map(str::to_owned)
        .into();
        locks.push("k".repeat(MAX_KEY_BYTES));
        locks.push("é".repeat(MAX_KEY_BYTES / 2));
        locks
    }

    #[test]
    fn every_name_is_the_lock_key_and_its_suffix() {
        for lock in odd_locks() {
            for fair in [false, true] {
                let keys = Keys::new(&lock, fair);
                assert!(names(&keys) == formatted(&lock, fair), "{}", Preview(&lock));
                assert_eq!(keys.queue().is_some(), fair);
                let all: usize = formatted(&lock, fair)[1..].iter().map(String::len).sum();
                assert_eq!(keys.names_len(), all);
                // Each name is itself and no other, and a channel gives back its lock.
                let written = formatted(&lock, fair);
                for (at, name) in [keys.intent(), keys.fence(), keys.channel()]
                    .into_iter()
                    .enumerate()
                {
                    for (other, text) in written.iter().enumerate() {
                        assert_eq!(name.is(text.as_bytes()), other == at + 1, "{text}");
                    }
                }
                assert_eq!(lock_of_channel(&written[3]), Some(lock.as_str()));
                assert_eq!(lock_of_channel(&written[2]), None);
            }
        }
        // The longest lock key's names all fit in a bulk string of the smallest limit.
        let longest = Keys::new(&"k".repeat(MAX_KEY_BYTES), true);
        let deadline = longest.queue().unwrap().deadline;
        assert_eq!(deadline.to_string().len(), 1024 * 1024);
        assert_eq!(deadline.len(), MAX_KEY_BYTES + ":queue-deadline".len());
    }

    #[test]
    fn keys_are_small_and_their_clones_share_the_lock_key() {
        assert!(std::mem::size_of::<Keys>() <= 3 * std::mem::size_of::<usize>());
        let keys = Keys::new("orders:42", true);
        let clone = keys.clone();
        assert!(Arc::ptr_eq(&keys.lock, &clone.lock));
        assert_eq!(names(&keys), names(&clone));
        assert_eq!(keys, clone);
        assert_ne!(keys, Keys::new("orders:42", false));
        assert_ne!(keys, Keys::new("orders:43", true));
        let debug = format!("{keys:?}");
        assert!(
            debug.contains("\"orders:42\"") && debug.contains("\"orders:42:queue-deadline\""),
            "{debug}"
        );
    }

    #[test]
    fn a_request_builds_its_lock_key_and_the_other_names_at_once() {
        let accept = |_: &str| Ok(());
        for (name, key) in [
            ("orders", None),
            ("orders", Some("")),
            ("orders", Some("42")),
            ("{orders}", Some("42")),
            ("orders", Some("{42}")),
            ("a{}b", Some("42")),
            ("日本", Some("🔒")),
            ("", None),
        ] {
            for (tag, fair) in [(false, false), (true, false), (false, true), (true, true)] {
                let lock = lock_key(name, key, tag);
                let keys = Keys::of_request(name, key, tag, fair, accept).unwrap();
                assert_eq!(names(&keys), formatted(&lock, fair), "{name} {key:?} {tag}");
            }
        }
        // The check sees the lock key alone, and its error is the request's.
        let seen = std::cell::RefCell::new(Vec::new());
        let keys = Keys::of_request("orders", Some("42"), true, false, |lock| {
            seen.borrow_mut().push(lock.to_owned());
            Ok(())
        })
        .unwrap();
        assert_eq!(seen.into_inner(), ["orders:{42}"]);
        assert_eq!(keys.lock(), "orders:{42}");
        let refuse = |lock: &str| {
            check_key(lock)?;
            check_slot(lock)
        };
        let err = Keys::of_request("orders", Some("42"), false, false, refuse).unwrap_err();
        assert!(
            matches!(err, Error::InvalidKey { ref key, .. } if key == "orders:42"),
            "{err}"
        );
        let err = Keys::of_request("orders", Some("a:fence"), false, true, check_key).unwrap_err();
        assert!(matches!(err, Error::InvalidKey { ref key, .. } if key == "orders:a:fence"));
        let long = "k".repeat(MAX_KEY_BYTES - "orders:".len() + 1);
        let err = Keys::of_request("orders", Some(&long), false, false, check_key).unwrap_err();
        assert!(matches!(err, Error::InvalidKey { ref key, .. } if key.len() == MAX_KEY_BYTES + 1));
        // A failed request leaves nothing behind for the next.
        let next = Keys::of_request("orders", Some("43"), false, false, accept).unwrap();
        assert_eq!(names(&next), formatted("orders:43", false));
    }

    #[test]
    fn the_scratch_buffer_is_kept_small_and_reused() {
        let request = |key: &str| Keys::of_request("orders", Some(key), false, true, |_| Ok(()));
        let first = request("42").unwrap();
        let kept = SCRATCH.with_borrow(String::capacity);
        assert!(kept > 0 && kept <= SCRATCH_KEPT, "{kept}");
        let _second = request("43").unwrap();
        assert_eq!(
            SCRATCH.with_borrow(String::capacity),
            kept,
            "reused as it was"
        );
        let _long = request(&"k".repeat(SCRATCH_KEPT)).unwrap();
        assert!(
            SCRATCH.with_borrow(String::capacity) <= SCRATCH_KEPT,
            "freed when large"
        );
        // A thread whose buffer is taken (as it would be while it is written) makes one.
        let keys = SCRATCH.with_borrow_mut(|_| request("42").unwrap());
        assert_eq!(keys, first);
    }

    #[test]
    fn a_locks_own_keys_are_told_from_others() {
        let keys = Keys::new("orders:42", false);
        for own in [
            "orders:42",
            "orders:42:lock-intent",
            "orders:42:fence",
            "orders:42:queue",
            "orders:42:queue-deadline",
        ] {
            assert!(keys.is_own(own.as_bytes()), "{own}");
        }
        for other in [
            "orders:42:released",
            "orders:42:data",
            "orders:4",
            "orders:420",
            "x",
        ] {
            assert!(!keys.is_own(other.as_bytes()), "{other}");
        }
    }

    #[test]
    fn tagging_wraps_only_the_varying_part_of_an_untagged_lock_key() {
        assert_eq!(lock_key("orders", Some("42"), false), "orders:42");
        assert_eq!(lock_key("orders", None, false), "orders");
        assert_eq!(lock_key("orders", Some("42"), true), "orders:{42}");
        assert_eq!(lock_key("orders", Some(""), true), "{orders}");
        assert_eq!(lock_key("orders", None, true), "{orders}");
        // Already tagged by the name or the key: the Go layout, unchanged.
        assert_eq!(lock_key("{orders}", Some("42"), true), "{orders}:42");
        assert_eq!(lock_key("orders", Some("{42}"), true), "orders:{42}");
        assert_eq!(lock_key("orders", Some("a{b}"), true), "orders:a{b}");
        // A tag cannot always be made: the first `{` is in the name and closes empty.
        let stuck = lock_key("a{}b", Some("42"), true);
        assert_eq!(stuck, "a{}b:{42}");
        assert_eq!(hash_tag(&stuck), None);
        assert!(check_slot(&stuck).is_err());
    }
}
