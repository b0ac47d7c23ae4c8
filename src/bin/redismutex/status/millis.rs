//! The snapshot's times and TTLs in milliseconds, as `status` shows them: the server's
//! clock and every deadline as milliseconds since the Unix epoch (the scores the scripts
//! store), a TTL as a PTTL.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redismutex::LockState;

/// `time` in milliseconds since the Unix epoch, negative before it.
pub(super) fn since_epoch(time: SystemTime) -> i64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => of(after),
        Err(before) => of(before.duration()).saturating_neg(),
    }
}

/// `duration` in whole milliseconds.
pub(super) fn of(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// The PTTL in milliseconds of the lock's key `key` in the snapshot `state`; `None`
/// when that key does not exist.
pub(super) fn pttl(state: &LockState, key: &str) -> Option<i64> {
    state
        .key_ttls()
        .iter()
        .find(|(name, _)| name == key)
        .map(|(_, ttl)| of(*ttl))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_signed_milliseconds_since_the_epoch() {
        let ms = |ms| Duration::from_millis(ms);
        assert_eq!(
            since_epoch(UNIX_EPOCH + ms(1_718_000_000_123)),
            1_718_000_000_123
        );
        assert_eq!(since_epoch(UNIX_EPOCH - ms(5)), -5);
        assert_eq!(since_epoch(UNIX_EPOCH + Duration::from_micros(1999)), 1);
        assert_eq!(of(Duration::MAX), i64::MAX);
    }
}
