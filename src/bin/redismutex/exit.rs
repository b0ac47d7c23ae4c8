//! The exit codes of `redismutex` that are its own (a child's exit code passes through).

/// `lock --no-wait` found the lock busy (`EX_TEMPFAIL`; `--conflict-exit-code`
/// changes it, as `flock -E` does).
pub(crate) const BUSY: u8 = 75;
/// `unlock --force` found nothing held: the lock was free (as `grep` finding nothing).
pub(crate) const NOT_HELD: u8 = 1;
/// `lock --timeout` ran out before the lock was acquired (as `timeout(1)`).
pub(crate) const TIMEOUT: u8 = 124;
/// A Redis error: the server unreachable, refused, or a key that is not a lock
/// (`EX_UNAVAILABLE`). A one-line message on stderr names the server and the key.
pub(crate) const REDIS: u8 = 69;
/// The lock was lost while held: the child was sent SIGTERM (then SIGKILL after
/// `--grace`) (`EX_SOFTWARE`).
pub(crate) const LOST: u8 = 70;
/// CMD could not be started: not found (as a shell's 127).
pub(crate) const NOT_FOUND: u8 = 127;
/// CMD could not be started otherwise: not executable (as a shell's 126).
pub(crate) const NOT_RUNNABLE: u8 = 126;

/// The exit code for a child killed by signal `signal`: 128 + its number, as shells do.
pub(crate) fn signalled(signal: i32) -> u8 {
    u8::try_from(128 + signal).unwrap_or(u8::MAX)
}

/// Options that cannot be used (clap's own usage errors exit with 2 as well).
pub(crate) const USAGE: u8 = 2;

/// Prints the one-line message of a Redis error, naming the server and the key, and
/// gives [`REDIS`].
pub(crate) fn redis_error(url: &str, key: &str, err: &dyn std::error::Error) -> u8 {
    redis_error_at(&server(url), key, err)
}

/// As [`redis_error`], for the servers named `label` (a password-free name, such as the
/// list of a quorum's nodes).
pub(crate) fn redis_error_at(label: &str, key: &str, err: &dyn std::error::Error) -> u8 {
    eprintln!("redismutex: {label} lock key {key:?}: {}", message(err));
    REDIS
}

/// The message of `err` and of its sources, each once, on one line.
pub(crate) fn message(err: &dyn std::error::Error) -> String {
    let mut message = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !message.contains(&cause_text) {
            message.push_str(": ");
            message.push_str(&cause_text);
        }
        source = cause.source();
    }
    message
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
