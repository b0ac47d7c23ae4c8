//! The one error type of the crate.

mod chain;

pub(crate) use chain::chain;

use std::fmt;

/// Everything that can go wrong when taking, keeping or releasing a lock.
///
/// Errors that concern a Redis key name the key. A wrapped [`redis::RedisError`] is
/// carried as [`std::error::Error::source`], not pasted into the message, so error-chain
/// printers show it once.
///
/// Every variant with named fields is `#[non_exhaustive]`, so that a later release can add
/// a field: match one with `..` (`Error::NotHeld { key, .. }`), and read its fields in
/// the pattern or through [`Error::key`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A Redis request on `key` failed: connection refused or dropped, response timeout,
    /// a server error not covered by [`Error::Refused`], or a script reply this crate did
    /// not expect.
    #[error("redis request on lock key {} failed", Preview(key))]
    #[non_exhaustive]
    Redis {
        /// The lock key the request was for.
        key: String,
        /// What redis-rs reported.
        #[source]
        source: redis::RedisError,
    },

    /// Redis refused a request on `key` for a reason of its own state or of this client's
    /// rights, which `refusal` names. Nothing was changed in Redis.
    #[error("redis refused a request on lock key {}: {refusal}", Preview(key))]
    #[non_exhaustive]
    Refused {
        /// The lock key the request was for.
        key: String,
        /// Why Redis refused.
        refusal: Refusal,
        /// The server's error reply.
        #[source]
        source: redis::RedisError,
    },

    /// [`Acquire::timeout`](crate::Acquire::timeout) ran out before the lock was acquired;
    /// or one request got no reply within its bound: a
    /// [`try_write`](crate::RwMutex::try_write)'s or
    /// [`try_read`](crate::RwMutex::try_read)'s attempt within the lock's validity, a
    /// release ([`Guard::unlock`](crate::Guard::unlock)) within the TTL, a
    /// [`WriteGuard::downgrade`](crate::WriteGuard::downgrade) within the guard's validity deadline,
    /// an inspection ([`RwMutex::inspect`](crate::RwMutex::inspect)) within the TTL.
    #[error("timed out waiting for the lock")]
    Timeout,

    /// The [`parent`](crate::Acquire::parent) token was cancelled before the lock was
    /// acquired; or [`Guard::unlock`](crate::Guard::unlock) (or
    /// [`Permit::unlock`](crate::Permit::unlock)) handed its release to the refresher's
    /// task and that task was stopped first (a runtime shutting down).
    #[error("cancelled while waiting for the lock")]
    Cancelled,

    /// `key` holds a Redis type this lock protocol does not use (a hash, list, zset,
    /// stream, ..., or a fence key that is not an integer), so it is somebody else's
    /// data. It was left untouched.
    #[error("key {} holds a {found}, which is not a lock", Preview(key))]
    #[non_exhaustive]
    WrongType {
        /// The lock key, the lock-intent key or the fence key.
        key: String,
        /// The Redis `TYPE` found at `key`, for example `hash`; for a fence key also
        /// `non-integer string`, or `exhausted counter` when it holds 2^53 - 1.
        found: String,
    },

    /// `key` (the lock key, the lock-intent key or the fence key) exists but has no TTL,
    /// so it would never free. It was left untouched.
    #[error("key {} has no TTL, so the lock would never free", Preview(key))]
    #[non_exhaustive]
    NoExpiry {
        /// The lock key, the lock-intent key or the fence key.
        key: String,
    },

    /// The lock key cannot be used; `reason` says why (for example, it is longer than
    /// [`MAX_KEY_BYTES`](crate::MAX_KEY_BYTES)). Nothing was sent to Redis.
    #[error("lock key {} is invalid: {reason}", Preview(key))]
    #[non_exhaustive]
    InvalidKey {
        /// The lock key, `<name>` or `<name>:<key>`.
        key: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A [`Lease`](crate::Lease) cannot be used: its text does not parse (another
    /// format version, a bad id, mode, token or key, no key, too many, a key twice), or
    /// it does not fit what it was given to (a read lease to
    /// [`attach_write`](crate::RwMutex::attach_write), a set's lease to a single guard's
    /// attach, a permit's lease to a mutex, a lock's lease to a semaphore). `key` is the
    /// lock key at fault when one is; `reason` says what is wrong. Nothing was sent to
    /// Redis.
    #[error("{}", lease_message(key.as_deref(), reason))]
    #[non_exhaustive]
    InvalidLease {
        /// The lock key at fault, when the fault is in one.
        key: Option<String>,
        /// What is wrong, for example "format version \"2\" is not known to this
        /// release; it reads version 1".
        reason: String,
    },

    /// The mutex's options are not usable; the message says which and why.
    #[error("invalid options: {0}")]
    InvalidOptions(String),

    /// With [`Builder::reentrant`](crate::Builder::reentrant), the task asking for a write
    /// lock on `key` already holds a read lock on it from the same mutex: the write lock
    /// would wait for the task's own read lock, so it is refused at once, without
    /// contacting Redis.
    #[error(
        "this task holds a read lock on {}; a write lock inside it would wait for itself",
        Preview(key)
    )]
    #[non_exhaustive]
    WouldDeadlock {
        /// The lock key the task holds a read lock on.
        key: String,
    },

    /// Quorum mode ([`Quorum`](crate::Quorum)): too few of the `nodes` answered a request
    /// on lock key `key` for a majority (`needed` of them) to be reached; `answered` of
    /// them did, within the per-node bound (a tenth of the TTL). What the attempt may have
    /// taken is released on every node (the releases are queued before this returns). `source` is one node's error, when a node
    /// failed rather than timed out. A waiting request keeps trying until its timeout; a
    /// try, an unlock or a downgrade reports it (a refresh retries it until the guard's
    /// deadline).
    #[error(
        "only {answered} of {nodes} nodes answered on lock key {}; a majority needs {needed}",
        Preview(key)
    )]
    #[non_exhaustive]
    NoQuorum {
        /// The lock key the request was for.
        key: String,
        /// How many nodes gave an answer (a yes or a no) within the per-node bound.
        answered: usize,
        /// How many nodes make a majority: `nodes / 2 + 1`.
        needed: usize,
        /// How many nodes the quorum has.
        nodes: usize,
        /// One node's error, when a node failed rather than timed out.
        #[source]
        source: Option<Box<Error>>,
    },

    /// [`Builder::replicas`](crate::Builder::replicas): fewer than `wanted` replicas
    /// acknowledged (`WAIT`) the writes of an acquire or a renewal of lock key `key`
    /// within the timeout; `acked` did. An acquire is released (a waiting request tries
    /// again until its timeout, a try reports it); a renewal counts as failed, and is
    /// retried until the guard's deadline.
    #[error(
        "only {acked} of {wanted} replicas acknowledged lock key {} in time",
        Preview(key)
    )]
    #[non_exhaustive]
    NotReplicated {
        /// The lock key the request was for.
        key: String,
        /// How many replicas acknowledged within the timeout.
        acked: usize,
        /// How many must: the `n` of `Builder::replicas`.
        wanted: usize,
    },

    /// Over a `SentinelConnection` (feature `sentinel`): no
    /// primary could be found for a request on lock key `key` (the Sentinels name none,
    /// or the one they name does not answer as a primary, as during a failover), within
    /// 1 s. A waiting request keeps trying until its timeout; a try, an unlock or a
    /// downgrade reports it; a refresh retries until the guard's deadline.
    #[error("no Redis primary found for lock key {}", Preview(key))]
    #[non_exhaustive]
    NoPrimary {
        /// The lock key the request was for.
        key: String,
        /// What finding the primary reported.
        #[source]
        source: redis::RedisError,
    },

    /// The guard's (or permit's) lock was no longer held, so what was asked of it did
    /// not happen: its token had fired (nothing was sent then), or Redis no longer had
    /// this id at `key` (the token then fires with
    /// [`CancelReason::Lost`](crate::CancelReason::Lost)). From
    /// [`WriteGuard::exec`](crate::WriteGuard::exec) and [`Permit::exec`](crate::Permit::exec) (no
    /// command of the pipeline ran), [`WriteGuard::downgrade`](crate::WriteGuard::downgrade) (the
    /// guard is gone, and so is the lock), and an election's
    /// [`Leadership::proclaim`](crate::Leadership::proclaim) and
    /// [`Campaign`](crate::Campaign) (this candidate no longer leads; the record was not
    /// written).
    #[error("the lock on key {} is no longer held", Preview(key))]
    #[non_exhaustive]
    NotHeld {
        /// The lock key.
        key: String,
    },

    /// [`WriteGuard::exec`](crate::WriteGuard::exec) on a Redis Cluster: the pipeline touches
    /// `foreign`, a key that does not hash to the slot of lock key `key`, so it cannot
    /// run in one step with the lock's check. Nothing was sent (but, at most, the
    /// `COMMAND INFO` or `COMMAND GETKEYS` that found the keys). Give the data keys the
    /// lock key's hash tag (see the [cluster guide](crate::guide::cluster)).
    #[error(
        "key {} of the pipeline is not in the slot of lock key {}",
        Preview(foreign),
        Preview(key)
    )]
    #[non_exhaustive]
    CrossSlot {
        /// The lock key.
        key: String,
        /// The first key of the pipeline in another slot.
        foreign: String,
    },

    /// [`WriteGuard::exec`](crate::WriteGuard::exec), [`ReadGuard::exec`](crate::ReadGuard::exec)
    /// or [`Permit::exec`](crate::Permit::exec): the pipeline cannot run as one guarded
    /// step; `reason` says why (a command the server does not know or that cannot run in
    /// a script, such as `MULTI`, `SUBSCRIBE` or `CONFIG GET`; an empty command; one with
    /// more than 7,000 arguments; a key of the lock itself; for a read guard, a command
    /// the server flags `write`). No command of it ran.
    #[error(
        "the pipeline guarded by lock key {} cannot run: {reason}",
        Preview(key)
    )]
    #[non_exhaustive]
    InvalidPipeline {
        /// The lock key.
        key: String,
        /// What is wrong with the pipeline.
        reason: String,
    },

    /// [`WriteGuard::exec`](crate::WriteGuard::exec) (or a read guard's, or a permit's): the
    /// lock was held and the pipeline ran until
    /// one of its commands failed: the `ran` commands before it ran and what they wrote
    /// stays (a Lua script has no rollback, as `MULTI` has none); it and the commands
    /// after it did not run. `source` is its error reply, with the server's code
    /// ([`redis::RedisError::code`], for example `WRONGTYPE`).
    #[error(
        "command {} of the pipeline guarded by lock key {} failed; the {ran} before it ran",
        ran + 1,
        Preview(key)
    )]
    #[non_exhaustive]
    CommandFailed {
        /// The lock key.
        key: String,
        /// How many commands ran, before the one that failed.
        ran: usize,
        /// The failed command's error reply.
        #[source]
        source: redis::RedisError,
    },

    /// A method of [`blocking`](crate::blocking) that waits for Redis was called on a
    /// thread with a Tokio runtime context: a runtime's worker thread, the future given
    /// to `block_on`, or a `spawn_blocking` task. Blocking there would stall the tasks
    /// that thread drives, so nothing was sent: use the async API
    /// ([`RwMutex`](crate::RwMutex), [`Semaphore`](crate::Semaphore)) there, or call the
    /// blocking one from a thread of your own (`std::thread::spawn`).
    #[cfg(feature = "blocking")]
    #[cfg_attr(docsrs, doc(cfg(feature = "blocking")))]
    #[error(
        "a blocking method of redismutex::blocking was called inside a Tokio runtime; \
         use the async API (redismutex::RwMutex, redismutex::Semaphore) there"
    )]
    InRuntime,

    /// A keyspace notifier ([`Notifier::keyspace_events`](crate::Notifier::keyspace_events))
    /// found a node without keyspace notifications for generic commands and expiries
    /// (`notify-keyspace-events` needs `K` and `g` and `x`, or `K` and `A`), or one
    /// that refused to say (`CONFIG` not allowed, as on most managed services).
    /// Returned by [`Notifier::check_keyspace_events`](crate::Notifier::check_keyspace_events).
    #[error("keyspace notifications unusable on {node}: {reason}")]
    #[non_exhaustive]
    KeyspaceEvents {
        /// The node, as `host:port`.
        node: String,
        /// What was found, and what to set.
        reason: String,
    },

    /// The background thread of a [`blocking`](crate::blocking) handle, which runs the
    /// Tokio runtime that refreshes its guards, could not be started (the operating
    /// system refused a thread, or the runtime's I/O driver); `source` says why.
    #[cfg(feature = "blocking")]
    #[cfg_attr(docsrs, doc(cfg(feature = "blocking")))]
    #[error("could not start the background thread of a blocking handle")]
    #[non_exhaustive]
    Background {
        /// What starting the thread or its runtime reported.
        #[source]
        source: std::io::Error,
    },
}

/// Why Redis refused a request: the error codes a lock request can meet while the server
/// or this client is in a state that no retry by this crate would fix at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Refusal {
    /// `OOM`: `maxmemory` is reached and the policy evicts nothing (`noeviction`), so
    /// Redis refuses commands that need memory. Taking a lock needs it; refreshing and
    /// releasing one do not, and keep working.
    OutOfMemory,
    /// `READONLY`: the server is a read-only replica.
    ReadOnly,
    /// `NOAUTH` or `WRONGPASS`: the server requires a password this connection has not
    /// given, or the one given is wrong.
    NotAuthenticated,
    /// `NOPERM`: the ACL user lacks a right the lock needs (`EVALSHA`, `EVAL`, `SCRIPT
    /// LOAD`, or access to the lock's keys).
    NoPermission,
    /// `BUSY`: another client's script or function has run past `busy-reply-threshold`;
    /// Redis answers nothing else until it ends or `SCRIPT KILL` stops it.
    Busy,
    /// `LOADING`: the server is loading its dataset after a restart.
    Loading,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::OutOfMemory => "out of memory (OOM)",
            Self::ReadOnly => "read-only replica (READONLY)",
            Self::NotAuthenticated => "not authenticated (NOAUTH)",
            Self::NoPermission => "no ACL permission (NOPERM)",
            Self::Busy => "busy running a script (BUSY)",
            Self::Loading => "loading its dataset (LOADING)",
        })
    }
}

impl Refusal {
    /// The refusal behind a Redis error code, if it is one.
    fn from_code(code: &str) -> Option<Self> {
        Some(match code {
            "OOM" => Self::OutOfMemory,
            "READONLY" => Self::ReadOnly,
            "NOAUTH" | "WRONGPASS" => Self::NotAuthenticated,
            "NOPERM" => Self::NoPermission,
            "BUSY" => Self::Busy,
            "LOADING" => Self::Loading,
            _ => return None,
        })
    }

    /// The refusal inside the error of a script that called a refused command, as
    /// servers before Redis 7.0 report it: code `ERR`, detail `Error running script
    /// (call to f_...): @user_script:N: @user_script: N: -OOM command not allowed ...`
    /// (Redis 7.0 and newer give the inner code itself).
    fn in_script_error(code: Option<&str>, detail: Option<&str>) -> Option<Self> {
        let detail = detail.filter(|_| code == Some("ERR"))?;
        if !detail.starts_with("Error running script") {
            return None;
        }
        detail
            .split_whitespace()
            .filter_map(|word| word.strip_prefix('-'))
            .find_map(Self::from_code)
    }

    /// The refusal `source` carries: its own code, or the code inside a script's error.
    fn of(source: &redis::RedisError) -> Option<Self> {
        let code = source.code();
        code.and_then(Self::from_code)
            .or_else(|| Self::in_script_error(code, source.detail()))
    }
}

impl Error {
    /// `source`, from a request on lock key `key`: [`Error::Refused`] when its code is a
    /// [`Refusal`], else [`Error::Redis`].
    pub(crate) fn redis(key: &str, source: redis::RedisError) -> Self {
        let key = key.to_owned();
        if matches!(
            source.kind(),
            redis::ErrorKind::MasterNameNotFoundBySentinel | redis::ErrorKind::EmptySentinelList
        ) {
            return Self::NoPrimary { key, source };
        }
        match Refusal::of(&source) {
            Some(refusal) => Self::Refused {
                key,
                refusal,
                source,
            },
            None => Self::Redis { key, source },
        }
    }

    /// A guarded pipeline's command on lock key `key` failed with `source` after `ran`
    /// commands ran: [`Error::Refused`] when none ran and the code is a [`Refusal`] (the
    /// server refused the write, so nothing changed), else [`Error::CommandFailed`].
    pub(crate) fn command_failed(key: &str, ran: usize, source: redis::RedisError) -> Self {
        match Refusal::of(&source) {
            Some(refusal) if ran == 0 => Self::Refused {
                key: key.to_owned(),
                refusal,
                source,
            },
            _ => Self::CommandFailed {
                key: key.to_owned(),
                ran,
                source,
            },
        }
    }

    /// The same failure of a request that carried several lock keys (a batched renewal),
    /// as seen by the lock at `key`. Only a failed request ([`Error::Redis`],
    /// [`Error::Refused`]) is shared that way; any other error becomes an
    /// [`Error::Redis`] on `key` that quotes it.
    pub(crate) fn for_key(&self, key: &str) -> Self {
        match self {
            Self::Redis { source, .. }
            | Self::Refused { source, .. }
            | Self::NoPrimary { source, .. } => Self::redis(key, source.clone()),
            Self::NotReplicated { acked, wanted, .. } => Self::NotReplicated {
                key: key.to_owned(),
                acked: *acked,
                wanted: *wanted,
            },
            other => Self::redis(
                key,
                redis::RedisError::from((
                    redis::ErrorKind::Io,
                    "a batched request failed",
                    chain(other),
                )),
            ),
        }
    }

    /// Whether a waiting request tries again after this error rather than failing: a
    /// quorum that could not be reached may be reachable on the next attempt, and
    /// replicas that did not acknowledge in time may on the next.
    pub(crate) fn passing(&self) -> bool {
        matches!(
            self,
            Self::NoQuorum { .. } | Self::NotReplicated { .. } | Self::NoPrimary { .. }
        )
    }

    /// Whether this is an answer from Redis that says the request changed nothing: a
    /// script that found a key not ours, or a refusal (which comes before the script's
    /// first write, since every check precedes it).
    pub(crate) fn changed_nothing(&self) -> bool {
        matches!(
            self,
            Self::WrongType { .. } | Self::NoExpiry { .. } | Self::Refused { .. }
        )
    }

    /// The Redis key this error is about, when it is about one.
    pub fn key(&self) -> Option<&str> {
        match self {
            Self::Redis { key, .. }
            | Self::Refused { key, .. }
            | Self::WrongType { key, .. }
            | Self::NoExpiry { key }
            | Self::InvalidKey { key, .. }
            | Self::WouldDeadlock { key }
            | Self::NotHeld { key }
            | Self::CrossSlot { key, .. }
            | Self::InvalidPipeline { key, .. }
            | Self::CommandFailed { key, .. }
            | Self::NoQuorum { key, .. }
            | Self::NotReplicated { key, .. }
            | Self::NoPrimary { key, .. } => Some(key),
            Self::InvalidLease { key, .. } => key.as_deref(),
            Self::Timeout
            | Self::Cancelled
            | Self::InvalidOptions(_)
            | Self::KeyspaceEvents { .. } => None,
            #[cfg(feature = "blocking")]
            Self::InRuntime | Self::Background { .. } => None,
        }
    }
}

/// The message of [`Error::InvalidLease`]: what is wrong, and the key when known.
fn lease_message(key: Option<&str>, reason: &str) -> String {
    match key {
        Some(key) => format!("lease of lock key {} is invalid: {reason}", Preview(key)),
        None => format!("lease is invalid: {reason}"),
    }
}

/// The longest key text an error message shows; longer keys are cut, with their length.
const PREVIEW_CHARS: usize = 128;

/// A key as error messages show it: quoted, escaped, and cut after [`PREVIEW_CHARS`].
pub(crate) struct Preview<'a>(pub(crate) &'a str);

impl fmt::Display for Preview<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.char_indices().nth(PREVIEW_CHARS) {
            None => write!(f, "{:?}", self.0),
            Some((cut, _)) => write!(f, "{:?}... ({} bytes)", &self.0[..cut], self.0.len()),
        }
    }
}

#[cfg(test)]
mod script_error_tests {
    use super::Refusal;

    #[test]
    fn a_refusal_inside_a_script_error_of_an_older_server_is_found() {
        let oom = "Error running script (call to f_8178a6529aa2953973046b2521e43dfe3f5f3eb1): \
                   @user_script:6: @user_script: 6: -OOM command not allowed when used memory \
                   > 'maxmemory'.";
        assert_eq!(
            Refusal::in_script_error(Some("ERR"), Some(oom)),
            Some(Refusal::OutOfMemory)
        );
        let readonly = "Error running script (call to f_1): @user_script:1: @user_script: 1: \
                        -READONLY You can't write against a read only replica.";
        assert_eq!(
            Refusal::in_script_error(Some("ERR"), Some(readonly)),
            Some(Refusal::ReadOnly)
        );
        // Another code, another message, or no refusal inside: nothing.
        assert_eq!(Refusal::in_script_error(Some("NOSCRIPT"), Some(oom)), None);
        assert_eq!(
            Refusal::in_script_error(Some("ERR"), Some("unknown command -OOM")),
            None
        );
        let plain = "Error running script (call to f_1): @user_script:1: user_script:1: \
                     attempt to compare nil with number";
        assert_eq!(Refusal::in_script_error(Some("ERR"), Some(plain)), None);
        assert_eq!(Refusal::in_script_error(Some("ERR"), None), None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_codes_become_refusals_and_long_keys_are_cut() {
        let long = "k".repeat(1000);
        let shown = Preview(&long).to_string();
        assert!(
            shown.len() < 200 && shown.ends_with("(1000 bytes)"),
            "{shown}"
        );
        assert_eq!(Preview("a\nb").to_string(), "\"a\\nb\"");
        assert_eq!(Refusal::from_code("OOM"), Some(Refusal::OutOfMemory));
        assert_eq!(
            Refusal::from_code("WRONGPASS"),
            Some(Refusal::NotAuthenticated)
        );
        assert_eq!(Refusal::from_code("ERR"), None);
        let io = redis::RedisError::from((redis::ErrorKind::Io, "gone"));
        let err = Error::redis("jobs:1", io);
        assert!(matches!(err, Error::Redis { .. }), "{err:?}");
        assert_eq!(err.key(), Some("jobs:1"));
        assert!(err.to_string().contains("\"jobs:1\""), "{err}");
    }
}
