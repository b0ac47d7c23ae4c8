//! The exit codes of `redismutex` that are its own (a child's exit code passes through),
//! and the help that lists them.

use crate::chain::chain;

/// `lock --no-wait` found the lock busy (`EX_TEMPFAIL`; `--conflict-exit-code`
/// changes it, as `flock -E` does).
pub(crate) const BUSY: u8 = 75;
/// `unlock --force` found nothing held: the lock was free (as `grep` finding nothing); or
/// `unlock --lease` and `renew --lease` found the lease's hold gone.
pub(crate) const NOT_HELD: u8 = 1;
/// `lock --timeout` ran out before the lock was acquired (as `timeout(1)`).
pub(crate) const TIMEOUT: u8 = 124;
/// A Redis error: the server unreachable, refused, or a key that is not a lock
/// (`EX_UNAVAILABLE`). A one-line message on stderr names the server and the key.
pub(crate) const REDIS: u8 = 69;
/// The operating system refused what the command needs of it: the async runtime or the
/// signal handlers could not be set up (`EX_OSERR`).
pub(crate) const OS: u8 = 71;
/// The lock was lost while held: the child was sent SIGTERM (then SIGKILL after
/// `--grace`) (`EX_SOFTWARE`).
pub(crate) const LOST: u8 = 70;
/// CMD could not be started: not found (as a shell's 127).
pub(crate) const NOT_FOUND: u8 = 127;
/// CMD could not be started otherwise: not executable (as a shell's 126).
pub(crate) const NOT_RUNNABLE: u8 = 126;

/// What the exit code of a child killed by a signal, or of a wait a signal ended, adds
/// the signal's number to, as shells do.
pub(crate) const SIGNALLED: u8 = 128;

/// The exit code for a child killed by signal `signal`: [`SIGNALLED`] + its number.
pub(crate) fn signalled(signal: i32) -> u8 {
    u8::try_from(i32::from(SIGNALLED) + signal).unwrap_or(u8::MAX)
}

/// Options that cannot be used (clap's own usage errors exit with 2 as well).
pub(crate) const USAGE: u8 = 2;

/// The exit codes of `lock`, for its `--help`: made from the constants above.
pub(crate) fn lock_help() -> String {
    format!(
        "Exit codes: CMD's own ({SIGNALLED}+N if signal N killed it); 0 when holding \
         without CMD until SIGINT/SIGTERM; {BUSY} busy with --no-wait (or -E N); {TIMEOUT} \
         --timeout ran out; {LOST} the lock was lost while held; {REDIS} a Redis error \
         (with several --url: no majority of the nodes reachable or answering); \
         {NOT_FOUND}/{NOT_RUNNABLE} CMD not found/not runnable; {SIGNALLED}+N a signal N \
         ended the wait; {OS} the runtime or the signal handlers could not be set up; \
         {USAGE} bad arguments."
    )
}

/// The exit codes of `unlock`, for its `--help`: made from the constants above.
pub(crate) fn unlock_help() -> String {
    format!(
        "Exit codes: 0 something was held and is released; {NOT_HELD} nothing was held \
         (the lock was free; with --lease: the lease's hold was gone); {REDIS} a Redis error (a key that is not a lock, or one with \
         no TTL, is left untouched; with several --url: fewer than a majority of the \
         nodes answering); {OS} the runtime could not be set up; {USAGE} bad arguments, a \
         bad name, key or lease, or neither --force nor --lease."
    )
}

/// The exit codes of `renew`, for its `--help`: made from the constants above.
pub(crate) fn renew_help() -> String {
    format!(
        "Exit codes: 0 the hold is extended; {NOT_HELD} the lease's hold is gone (expired, \
         released, or attached elsewhere); {REDIS} a Redis error (with several --url: \
         fewer than a majority of the nodes answering); {OS} the runtime could not be set \
         up; {USAGE} bad arguments or a lease that does not parse."
    )
}

/// Prints the one-line message of a Redis error, naming the server and the key, and
/// gives [`REDIS`].
pub(crate) fn redis_error(url: &str, key: &str, err: &dyn std::error::Error) -> u8 {
    redis_error_at(&server(url), key, err)
}

/// As [`redis_error`], for the servers named `label` (a password-free name, such as the
/// list of a quorum's nodes).
pub(crate) fn redis_error_at(label: &str, key: &str, err: &dyn std::error::Error) -> u8 {
    eprintln!("redismutex: {label} lock key {key:?}: {}", chain(err));
    REDIS
}

/// The server part of `url`, without a password.
pub(crate) fn server(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
            format!("{scheme}://{}", host.trim_end_matches('/'))
        }
        None => url.to_owned(),
    }
}
