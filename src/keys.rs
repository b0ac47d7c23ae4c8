//! The keys of one lock in Redis, and which lock keys are usable.

use crate::error::{Error, Preview};

/// The three keys of one lock, `<lock key>`, `<lock key>:lock-intent` and
/// `<lock key>:fence`, and its release channel `<lock key>:released`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Keys {
    pub(crate) lock: String,
    pub(crate) intent: String,
    pub(crate) fence: String,
    pub(crate) channel: String,
}

impl Keys {
    pub(crate) fn new(lock: String) -> Self {
        Self {
            intent: format!("{lock}:{INTENT_SUFFIX}"),
            fence: format!("{lock}:{FENCE_SUFFIX}"),
            channel: format!("{lock}:{CHANNEL_SUFFIX}"),
            lock,
        }
    }
}

/// What follows `<lock key>:` in the lock-intent key, as in the Go package.
pub(crate) const INTENT_SUFFIX: &str = "lock-intent";
/// What follows `<lock key>:` in the fence key.
pub(crate) const FENCE_SUFFIX: &str = "fence";
/// What follows `<lock key>:` in the Pub/Sub channel a release is published on. A
/// channel is not a key, so no lock key collides with it.
pub(crate) const CHANNEL_SUFFIX: &str = "released";

/// The longest lock key accepted, in bytes: 1 MiB (1,048,576 bytes, the smallest
/// `proto-max-bulk-len` a Redis server can be configured with) minus the 12 bytes of
/// `:lock-intent`, so that every key of a lock fits in one bulk string on any server.
/// A longer key would make the server drop the connection, and with it every other
/// request on a shared connection; it gets [`Error::InvalidKey`] before anything is sent.
pub const MAX_KEY_BYTES: usize = 1024 * 1024 - 1 - INTENT_SUFFIX.len();

/// Checks a lock key (`<name>` or `<name>:<key>`) before anything is sent: it must fit
/// in [`MAX_KEY_BYTES`], and must not end like the intent or fence key of another lock
/// (`:lock-intent`, `:fence`), which it would collide with.
pub(crate) fn check_key(key: &str) -> Result<(), Error> {
    if let Some(suffix) = [INTENT_SUFFIX, FENCE_SUFFIX].into_iter().find(|suffix| {
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
    use crate::settings::Settings;

    #[test]
    fn lock_keys_fit_the_bulk_limit_and_never_name_another_locks_keys() {
        let long = Settings::new("n".repeat(MAX_KEY_BYTES + 1))
            .check()
            .unwrap_err();
        assert!(long.to_string().contains("MAX_KEY_BYTES"), "{long}");
        let fence = Settings::new("garden:fence".into()).check().unwrap_err();
        assert!(fence.to_string().contains("\"garden\""), "{fence}");
        assert!(Settings::new("n".repeat(MAX_KEY_BYTES)).check().is_ok());
        assert!(check_key(&"k".repeat(MAX_KEY_BYTES)).is_ok());
        let err = check_key(&"k".repeat(MAX_KEY_BYTES + 1)).unwrap_err();
        assert!(matches!(err, Error::InvalidKey { ref key, .. } if key.len() == MAX_KEY_BYTES + 1));
        for reserved in ["a:fence", "a:b:lock-intent", ":fence"] {
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
}
