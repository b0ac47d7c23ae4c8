//! Checks shared by the hostile-condition tests (`tests/protocol/hostile/names.rs`,
//! `tests/protocol/hostile/server.rs`, `tests/protocol/hostile/busy.rs`): typed refusals
//! that name their key, and what the keyspace holds.

use std::collections::BTreeSet;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redismutex::{Error, Refusal, RwMutex};

use super::{every_acquire, raw};

/// How soon a refusal must come back: one round trip and the clean-up grace of 100 ms,
/// with plenty of slack for a loaded machine.
pub const PROMPT: Duration = Duration::from_secs(1);

/// Checks that `err` is `Refused { key, refusal }` whose server reply had error code
/// `code` (or, from a server before Redis 7.0, a script error with `code` inside), and
/// that it names the key (`err.key()` and its message).
pub fn assert_refused(err: &Error, key: &str, refusal: Refusal, code: &str) {
    match err {
        Error::Refused {
            key: found,
            refusal: found_refusal,
            source,
            ..
        } => {
            assert_eq!(found, key, "{err:?}");
            assert_eq!(*found_refusal, refusal, "{err:?}");
            // Before Redis 7.0 a script's refused call comes back as `ERR Error running
            // script ...: -<code> ...`; the crate finds the refusal inside.
            let inside = source.code() == Some("ERR")
                && source
                    .detail()
                    .is_some_and(|detail| detail.contains(&format!("-{code} ")));
            assert!(source.code() == Some(code) || inside, "{source:?}");
        }
        other => panic!("expected Refused({refusal:?}) on {key:?}, got {other:?}"),
    }
    assert_names_key(err, key);
    assert!(err.to_string().contains(&refusal.to_string()), "{err}");
}

/// `err.key()` is `key`, and the message shows it (quoted and escaped).
pub fn assert_names_key(err: &Error, key: &str) {
    assert_eq!(err.key(), Some(key), "{err:?}");
    assert!(err.to_string().contains(&format!("{key:?}")), "{err}");
}

/// Every acquire on `<mx name>:<key>` is refused promptly with `refusal`.
pub async fn assert_every_acquire_refused(
    mx: &RwMutex<MultiplexedConnection>,
    key: &str,
    refusal: Refusal,
    code: &str,
) {
    let lock_key = format!("{}:{key}", mx.name());
    for (how, took, result) in every_acquire(mx, key).await {
        let err = result.expect_err(how);
        assert_refused(&err, &lock_key, refusal, code);
        assert!(took < PROMPT, "{how} took {took:?}");
    }
}

/// A raw command that may fail.
pub async fn try_cmd<T: redis::FromRedisValue>(
    conn: &MultiplexedConnection,
    name: &str,
    args: &[&str],
) -> redis::RedisResult<T> {
    let mut command = redis::cmd(name);
    for arg in args {
        command.arg(*arg);
    }
    command.query_async(&mut conn.clone()).await
}

/// Every key in the database, byte for byte.
pub async fn all_keys(conn: &MultiplexedConnection) -> BTreeSet<Vec<u8>> {
    raw::cmd::<Vec<Vec<u8>>>(conn, "KEYS", &["*"])
        .await
        .into_iter()
        .collect()
}

pub fn key_set<'a>(keys: impl IntoIterator<Item = &'a String>) -> BTreeSet<Vec<u8>> {
    keys.into_iter()
        .map(|key| key.as_bytes().to_vec())
        .collect()
}

pub async fn dbsize(conn: &MultiplexedConnection) -> i64 {
    raw::cmd(conn, "DBSIZE", &[]).await
}
