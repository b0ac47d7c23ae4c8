//! The keys of one lock or semaphore in Redis, and which lock keys are usable.

use crate::error::{Error, Preview};

/// The three keys of one lock, `<lock key>`, `<lock key>:lock-intent` and
/// `<lock key>:fence`, its release channel `<lock key>:released`, and in fair mode its
/// queue `<lock key>:queue` and `<lock key>:queue-deadline`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Keys {
    pub(crate) lock: String,
    pub(crate) intent: String,
    pub(crate) fence: String,
    pub(crate) channel: String,
    /// The fair queue's two keys; `None` when the lock is not fair.
    pub(crate) queue: Option<Queue>,
}

/// The two keys of a fair queue (`lua/shared.lua`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Queue {
    /// `<lock key>:queue`: waiters by arrival.
    pub(crate) order: String,
    /// `<lock key>:queue-deadline`: waiters by the deadline of their next attempt.
    pub(crate) deadline: String,
}

impl Keys {
    /// The keys of the lock at `lock`, with its queue's keys when `fair`.
    pub(crate) fn new(lock: String, fair: bool) -> Self {
        Self {
            intent: format!("{lock}:{INTENT_SUFFIX}"),
            fence: format!("{lock}:{FENCE_SUFFIX}"),
            channel: format!("{lock}:{CHANNEL_SUFFIX}"),
            queue: fair.then(|| Queue {
                order: format!("{lock}:{QUEUE_SUFFIX}"),
                deadline: format!("{lock}:{DEADLINE_SUFFIX}"),
            }),
            lock,
        }
    }
}

/// What follows `<lock key>:` in the lock-intent key, as in the Go package.
pub(crate) const INTENT_SUFFIX: &str = "lock-intent";
/// What follows `<lock key>:` in the fence key.
pub(crate) const FENCE_SUFFIX: &str = "fence";
/// What follows `<lock key>:` in the fair queue's key.
pub(crate) const QUEUE_SUFFIX: &str = "queue";
/// What follows `<lock key>:` in the key of the fair queue's deadlines.
pub(crate) const DEADLINE_SUFFIX: &str = "queue-deadline";
/// What follows `<lock key>:` in the Pub/Sub channel a release is published on. A
/// channel is not a key, so no lock key collides with it.
pub(crate) const CHANNEL_SUFFIX: &str = "released";

/// The longest lock key accepted, in bytes: 1 MiB (1,048,576 bytes, the smallest
/// `proto-max-bulk-len` a Redis server can be configured with) minus the 15 bytes of
/// `:queue-deadline`, so that every key of a lock fits in one bulk string on any server.
/// A longer key would make the server drop the connection, and with it every other
/// request on a shared connection; it gets [`Error::InvalidKey`] before anything is sent.
pub const MAX_KEY_BYTES: usize = 1024 * 1024 - 1 - DEADLINE_SUFFIX.len();

/// The hash tag of `key` as Redis Cluster reads it (Redis Cluster specification, "Hash
/// tags"): the text between the first `{` and the first `}` after it, when that text is
/// not empty. Every key that carries the same tag hashes to the same slot, so a lock key
/// with a tag shares its slot with its intent and fence keys and its release channel,
/// which only append to it.
pub(crate) fn hash_tag(key: &str) -> Option<&str> {
    let open = key.find('{')?;
    let rest = &key[open + 1..];
    let close = rest.find('}')?;
    (close > 0).then(|| &rest[..close])
}

/// The lock key of a request for `key` (or none) on mutex `name`: `<name>:<key>`, or
/// `<name>` without a key, as in the Go package. With `tag_key`, a lock key that carries
/// no hash tag gets one around its varying part instead: `<name>:{<key>}`, or `{<name>}`
/// without a key, so that its keys share one slot while each key of the mutex may land
/// in a slot of its own.
pub(crate) fn lock_key(name: &str, key: Option<&str>, tag_key: bool) -> String {
    let plain = match key {
        None | Some("") => name.to_owned(),
        Some(key) => format!("{name}:{key}"),
    };
    if !tag_key || hash_tag(&plain).is_some() {
        return plain;
    }
    match key {
        None | Some("") => format!("{{{name}}}"),
        Some(key) => format!("{name}:{{{key}}}"),
    }
}

/// Checks that every key of the lock at `lock` hashes to one slot, as Redis Cluster
/// requires of a script's keys: the lock key must carry a hash tag.
pub(crate) fn check_slot(lock: &str) -> Result<(), Error> {
    if hash_tag(lock).is_some() {
        return Ok(());
    }
    Err(Error::InvalidKey {
        key: lock.to_owned(),
        reason: format!(
            "it has no hash tag, so on Redis Cluster {} and its intent key {} hash to \
             different slots (CROSSSLOT); name the mutex with a tag, like \"{{orders}}\", or \
             turn on Builder::hash_tag_keys (README, \"Redis Cluster\")",
            Preview(lock),
            Preview(&format!("{lock}:{INTENT_SUFFIX}")),
        ),
    })
}

/// Checks a lock key (`<name>` or `<name>:<key>`) before anything is sent: it must fit
/// in [`MAX_KEY_BYTES`], and must not end like the intent, fence or queue keys of another
/// lock (`:lock-intent`, `:fence`, `:queue`, `:queue-deadline`), which it would collide
/// with.
pub(crate) fn check_key(key: &str) -> Result<(), Error> {
    let reserved = [INTENT_SUFFIX, FENCE_SUFFIX, QUEUE_SUFFIX, DEADLINE_SUFFIX];
    if let Some(suffix) = reserved.into_iter().find(|suffix| {
        key.strip_suffix(suffix)
            .is_some_and(|rest| rest.ends_with(':'))
    }) {
        return Err(Error::InvalidKey {
            key: key.to_owned(),
            reason: format!(
                "it ends with \":{suffix}\", so it is the {suffix} key of lock {}",
                Preview(&key[..key.len() - suffix.len() - 1])
            ),
        });
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(Error::InvalidKey {
            key: key.to_owned(),
            reason: format!(
                "it is {} bytes, more than MAX_KEY_BYTES ({MAX_KEY_BYTES})",
                key.len()
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_keys_fit_the_bulk_limit_and_never_name_another_locks_keys() {
        assert!(check_key(&"k".repeat(MAX_KEY_BYTES)).is_ok());
        let err = check_key(&"k".repeat(MAX_KEY_BYTES + 1)).unwrap_err();
        assert!(matches!(err, Error::InvalidKey { ref key, .. } if key.len() == MAX_KEY_BYTES + 1));
        for reserved in [
            "a:fence",
            "a:b:lock-intent",
            ":fence",
            "a:queue",
            "a:queue-deadline",
        ] {
            assert!(check_key(reserved).is_err(), "{reserved}");
        }
        for fine in [
            "fence",
            "a:fences",
            "a-fence",
            "lock-intent",
            "a:lock-intents",
        ] {
            assert!(check_key(fine).is_ok(), "{fine}");
        }
    }

    #[test]
    fn hash_tags_are_read_as_redis_cluster_reads_them() {
        for (key, tag) in [
            ("{orders}:42", Some("orders")),
            ("orders:{42}", Some("42")),
            ("a{b}c{d}", Some("b")),
            ("}{x}", Some("x")),
            ("a{}b", None),
            ("{}{x}", None),
            ("{", None),
            ("orders:42", None),
            ("a{b{c}", Some("b{c")),
        ] {
            assert_eq!(hash_tag(key), tag, "{key}");
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
        assert!(check_slot(&stuck).is_err());
        let err = check_slot("orders:42").unwrap_err();
        assert!(
            matches!(err, Error::InvalidKey { ref key, ref reason } if key == "orders:42"
                && reason.contains("CROSSSLOT") && reason.contains("orders:42:lock-intent")),
            "{err}"
        );
        assert!(check_slot("orders:{42}").is_ok());
    }
}
