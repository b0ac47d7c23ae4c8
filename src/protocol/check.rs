//! Which lock keys are usable, checked before anything is sent: one that fits in a bulk
//! string on any server and names no other lock's keys ([`check_key`]), and on Redis
//! Cluster one whose keys share a slot ([`check_slot`]).

use super::keys::{
    DEADLINE_SUFFIX, FENCE_SUFFIX, HOLDERS_SUFFIX, INTENT_SUFFIX, QUEUE_SUFFIX, UPGRADER_SUFFIX,
};
use super::slot::hash_tag;
use crate::error::{Error, Preview};

/// The longest lock key accepted, in bytes: 1 MiB (1,048,576 bytes, the smallest
/// `proto-max-bulk-len` a Redis server can be configured with) minus the 15 bytes of
/// `:queue-deadline`, so that every key of a lock fits in one bulk string on any server.
/// A longer key would make the server drop the connection, and with it every other
/// request on a shared connection; it gets [`Error::InvalidKey`] before anything is sent.
pub const MAX_KEY_BYTES: usize = 1024 * 1024 - 1 - DEADLINE_SUFFIX.len();

/// The most keys one set ([`RwMutex::lock_all`](crate::RwMutex::lock_all)) may have, and
/// so one [`Lease`](crate::Lease).
/// `lua/lock_all.lua` takes three Redis keys per lock key in one script, which blocks the
/// server while it runs. No server refuses a larger set, so the bound is time: measured
/// with `examples/perf` (`perf -- set-limit`, `docs/performance.md`, "Sets of keys"), a set
/// of 1,000 keys took about 8 ms of server time and one of 10,000 about 100 ms, during
/// which every other client waits. `tests/lock/sets.rs` takes a set of this size.
pub const MAX_SET_KEYS: usize = 1_000;

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
             turn on Builder::hash_tag_keys (see the guide redismutex::guide::cluster)",
            Preview(lock),
            Preview(&format!("{lock}:{INTENT_SUFFIX}")),
        ),
    })
}

/// Checks a lock key (`<name>` or `<name>:<key>`) before anything is sent: it must fit
/// in [`MAX_KEY_BYTES`], and must not end like the intent, fence, queue, upgrader or
/// holders keys of another lock (`:lock-intent`, `:fence`, `:queue`, `:queue-deadline`,
/// `:upgrader`, `:holders`), which it would collide with.
pub(crate) fn check_key(key: &str) -> Result<(), Error> {
    let reserved = [
        INTENT_SUFFIX,
        FENCE_SUFFIX,
        QUEUE_SUFFIX,
        DEADLINE_SUFFIX,
        UPGRADER_SUFFIX,
        HOLDERS_SUFFIX,
    ];
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
            "a:upgrader",
            "a:holders",
        ] {
            assert!(check_key(reserved).is_err(), "{reserved}");
        }
        for fine in [
            "fence",
            "a:fences",
            "a-fence",
            "lock-intent",
            "a:lock-intents",
            "upgrader",
            "holders",
            "a:holder",
        ] {
            assert!(check_key(fine).is_ok(), "{fine}");
        }
    }

    #[test]
    fn a_cluster_lock_key_needs_a_hash_tag() {
        let err = check_slot("orders:42").unwrap_err();
        assert!(
            matches!(err, Error::InvalidKey { ref key, ref reason } if key == "orders:42"
                && reason.contains("CROSSSLOT") && reason.contains("orders:42:lock-intent")),
            "{err}"
        );
        assert!(check_slot("orders:{42}").is_ok());
        assert!(check_slot("{orders}:42").is_ok());
        assert!(check_slot("a{}b:{42}").is_err(), "an empty tag is no tag");
    }
}
