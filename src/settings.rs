//! The validated options of one mutex.

use std::time::Duration;

use tokio_util::task::TaskTracker;

use crate::error::{Error, Preview};
use crate::scripts::{FENCE_SUFFIX, INTENT_SUFFIX};

/// The lock TTL when none is set: 4 s, as in the Go package.
pub(crate) const DEFAULT_TTL: Duration = Duration::from_secs(4);
/// The shortest TTL accepted. Below it the Redlock drift margin (1% + 2 ms) leaves too
/// little of the TTL for a refresh to land in time.
pub(crate) const MIN_TTL: Duration = Duration::from_millis(10);
/// The longest TTL accepted: a day.
pub(crate) const MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// How long a fence key outlives the last acquisition of its lock when none is set: a day.
pub(crate) const DEFAULT_FENCE_RETENTION: Duration = Duration::from_secs(24 * 60 * 60);
/// The longest fence retention accepted: 365 days.
pub(crate) const MAX_FENCE_RETENTION: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// The longest lock key accepted, in bytes: 1 MiB (1,048,576 bytes, the smallest
/// `proto-max-bulk-len` a Redis server can be configured with) minus the 12 bytes of
/// `:lock-intent`, so that every key of a lock fits in one bulk string on any server.
/// A longer key would make the server drop the connection, and with it every other
/// request on a shared connection; it gets [`Error::InvalidKey`] before anything is sent.
pub const MAX_KEY_BYTES: usize = 1024 * 1024 - ":lock-intent".len();

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
                "it ends with \":{suffix}\", so it is the {suffix} key of lock {:?}",
                &key[..key.len() - suffix.len() - 1]
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

/// What a mutex was configured with; shared by every lock it takes.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) name: String,
    pub(crate) ttl: Duration,
    pub(crate) lock_intent: bool,
    pub(crate) fence_retention: Duration,
    pub(crate) tracker: Option<TaskTracker>,
}

impl Settings {
    pub(crate) fn new(name: String) -> Self {
        Self {
            name,
            ttl: DEFAULT_TTL,
            lock_intent: false,
            fence_retention: DEFAULT_FENCE_RETENTION,
            tracker: None,
        }
    }

    /// Checks the options; every acquire calls this, since [`RwMutex::new`] cannot fail.
    ///
    /// [`RwMutex::new`]: crate::RwMutex::new
    pub(crate) fn check(&self) -> Result<(), Error> {
        let name = Preview(&self.name);
        if self.name.is_empty() {
            return Err(Error::InvalidOptions("the mutex name is empty".into()));
        }
        if let Err(Error::InvalidKey { reason, .. }) = check_key(&self.name) {
            return Err(Error::InvalidOptions(format!(
                "mutex name {name} cannot be a lock key: {reason}"
            )));
        }
        if self.ttl < MIN_TTL || self.ttl > MAX_TTL {
            return Err(Error::InvalidOptions(format!(
                "ttl {:?} of mutex {name} is outside {MIN_TTL:?}..={MAX_TTL:?}",
                self.ttl
            )));
        }
        if self.fence_retention < self.ttl || self.fence_retention > MAX_FENCE_RETENTION {
            return Err(Error::InvalidOptions(format!(
                "fence retention {:?} of mutex {name} is outside its ttl..={MAX_FENCE_RETENTION:?}",
                self.fence_retention
            )));
        }
        Ok(())
    }

    /// The TTL in whole milliseconds, rounded down: the unit of `PX` and `PEXPIRE`.
    pub(crate) fn ttl_ms(&self) -> u64 {
        u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX)
    }

    /// The fence retention in whole milliseconds, rounded down: the `PX` of the fence key.
    pub(crate) fn fence_ms(&self) -> u64 {
        u64::try_from(self.fence_retention.as_millis()).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_ttl(ttl: Duration) -> Settings {
        Settings {
            ttl,
            ..Settings::new("jobs".into())
        }
    }

    #[test]
    fn rejects_empty_names_and_ttls_out_of_range() {
        assert!(Settings::new("jobs".into()).check().is_ok());
        let empty = Settings::new(String::new()).check().unwrap_err();
        assert!(empty.to_string().contains("name is empty"), "{empty}");
        for ttl in [
            Duration::ZERO,
            Duration::from_micros(500),
            Duration::from_millis(9),
            MAX_TTL + Duration::from_millis(1),
            Duration::MAX,
        ] {
            let err = with_ttl(ttl).check().unwrap_err();
            assert!(
                matches!(err, Error::InvalidOptions(ref m) if m.contains("\"jobs\"")),
                "{err}"
            );
        }
        assert!(with_ttl(MIN_TTL).check().is_ok());
        let long_day = Settings {
            fence_retention: MAX_TTL,
            ..with_ttl(MAX_TTL)
        };
        assert!(long_day.check().is_ok());
        assert!(
            with_ttl(MAX_TTL).check().is_ok(),
            "the default retention is a day"
        );
    }

    #[test]
    fn fence_retention_must_cover_the_ttl_and_names_stay_under_the_bulk_limit() {
        for retention in [Duration::from_millis(999), MAX_FENCE_RETENTION * 2] {
            let settings = Settings {
                fence_retention: retention,
                ..with_ttl(Duration::from_secs(1))
            };
            let err = settings.check().unwrap_err();
            assert!(err.to_string().contains("fence retention"), "{err}");
        }
        let long = Settings::new("n".repeat(MAX_KEY_BYTES + 1))
            .check()
            .unwrap_err();
        assert!(long.to_string().contains("MAX_KEY_BYTES"), "{long}");
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

    #[test]
    fn ttl_is_rounded_down_to_whole_milliseconds() {
        assert_eq!(with_ttl(Duration::from_micros(10_999)).ttl_ms(), 10);
        assert_eq!(with_ttl(Duration::from_secs(4)).ttl_ms(), 4000);
    }
}
