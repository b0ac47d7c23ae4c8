//! What the blocking tests share: a server, a raw synchronous connection to look at its
//! keys, and a generous bound for liveness.

use std::time::{Duration, Instant};

use redismutex::blocking::RwMutex;

pub(crate) use crate::server::RedisServer;

/// How long a waiter may take to be woken or a lock to be released before a test fails
/// (a liveness bound, not a timing goal).
pub(crate) const LIVENESS: Duration = Duration::from_secs(5);

/// A synchronous connection to `server`, for looking at keys.
pub(crate) fn raw(server: &RedisServer) -> redis::Connection {
    server.client().get_connection().expect("connect")
}

/// Whether `key` exists on `conn`'s server.
pub(crate) fn exists(conn: &mut redis::Connection, key: &str) -> bool {
    redis::cmd("EXISTS")
        .arg(key)
        .query::<i64>(conn)
        .expect("EXISTS")
        == 1
}

/// `key`'s PTTL in milliseconds on `conn`'s server (-2 when it does not exist).
pub(crate) fn pttl(conn: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query(conn).expect("PTTL")
}

/// Polls `done` every 10 ms until it is true or [`LIVENESS`] passes; whether it became
/// true.
pub(crate) fn eventually(mut done: impl FnMut() -> bool) -> bool {
    let started = Instant::now();
    while started.elapsed() < LIVENESS {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    done()
}

/// A blocking mutex named `name` on `server` with `ttl`.
pub(crate) fn mutex(server: &RedisServer, name: &str, ttl: Duration) -> RwMutex {
    RwMutex::builder(server.client(), name)
        .ttl(ttl)
        .build()
        .expect("build a blocking mutex")
}
