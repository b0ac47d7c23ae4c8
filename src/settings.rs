//! The validated options of one mutex.

use std::time::Duration;

use tokio_util::task::TaskTracker;

use crate::error::{Error, Preview};
use crate::keys::check_key;
use crate::notifier::Notifier;

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

/// What a mutex was configured with; shared by every lock it takes.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) name: String,
    pub(crate) ttl: Duration,
    pub(crate) lock_intent: bool,
    pub(crate) fence_retention: Duration,
    pub(crate) tracker: Option<TaskTracker>,
    pub(crate) notifier: Option<Notifier>,
}

impl Settings {
    pub(crate) fn new(name: String) -> Self {
        Self {
            name,
            ttl: DEFAULT_TTL,
            lock_intent: false,
            fence_retention: DEFAULT_FENCE_RETENTION,
            tracker: None,
            notifier: None,
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
    fn fence_retention_must_cover_the_ttl() {
        for retention in [Duration::from_millis(999), MAX_FENCE_RETENTION * 2] {
            let settings = Settings {
                fence_retention: retention,
                ..with_ttl(Duration::from_secs(1))
            };
            let err = settings.check().unwrap_err();
            assert!(err.to_string().contains("fence retention"), "{err}");
        }
    }

    #[test]
    fn ttl_is_rounded_down_to_whole_milliseconds() {
        assert_eq!(with_ttl(Duration::from_micros(10_999)).ttl_ms(), 10);
        assert_eq!(with_ttl(Duration::from_secs(4)).ttl_ms(), 4000);
    }
}
