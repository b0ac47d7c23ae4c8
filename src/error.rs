//! The one error type of the crate.

/// Everything that can go wrong when taking, keeping or releasing a lock.
///
/// Errors that concern a Redis key name the key. A wrapped [`redis::RedisError`] is
/// carried as [`std::error::Error::source`], not pasted into the message, so error-chain
/// printers show it once.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A Redis request failed: connection refused or dropped, response timeout, a server
    /// error, or a script reply this crate did not expect.
    #[error("redis request failed")]
    Redis(#[from] redis::RedisError),

    /// [`Acquire::timeout`](crate::Acquire::timeout) ran out before the lock was acquired.
    #[error("timed out waiting for the lock")]
    Timeout,

    /// The [`parent`](crate::Acquire::parent) token was cancelled before the lock was
    /// acquired.
    #[error("cancelled while waiting for the lock")]
    Cancelled,

    /// `key` holds a Redis type this lock protocol does not use (a hash, list, zset,
    /// stream, ...), so it is somebody else's data. It was left untouched.
    #[error("key {key:?} holds a {found}, which is not a lock")]
    WrongType {
        /// The lock key or the lock-intent key.
        key: String,
        /// The Redis `TYPE` found at `key`, for example `hash`.
        found: String,
    },

    /// `key` (the lock key or the lock-intent key) exists but has no TTL, so it would
    /// never free. It was left untouched.
    #[error("key {key:?} has no TTL, so the lock would never free")]
    NoExpiry {
        /// The lock key or the lock-intent key.
        key: String,
    },

    /// The mutex's options are not usable; the message says which and why.
    #[error("invalid options: {0}")]
    InvalidOptions(String),
}

/// `err` and its sources, joined with `: `, for log fields.
pub(crate) fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}
