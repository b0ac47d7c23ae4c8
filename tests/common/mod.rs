//! Test support: a throwaway `redis-server` (or Redis Cluster, or a primary with replicas
//! under Sentinel, or a quorum of servers) per test, a fault-injecting proxy in front of
//! it, a peer speaking the Go package's protocol, the fault workers with their referee,
//! and the scripts as the crate sends them (`docs/testing.md` says what each starts). The
//! fault suite's fleets, mixes and reports are its own (`tests/faults/harness/`).
//!
//! Each test binary that needs it declares it once (`#[path = "../common/mod.rs"] mod
//! common;` in `tests/<area>/main.rs`); the benches and examples include single files of
//! it with `#[path]` (`server.rs`, `cluster.rs`, `blocking.rs`, `events.rs`,
//! `referee.rs`).
#![allow(dead_code, unreachable_pub)]

pub mod blocking;
#[cfg(feature = "cli")]
pub mod cli_run;
pub mod clock;
#[cfg(feature = "cluster")]
pub mod cluster;
#[cfg(feature = "cluster")]
pub mod cluster_pubsub;
pub mod crew;
pub mod either;
pub mod election;
pub mod events;
pub mod go_peer;
pub mod hostile;
pub mod lone_worker;
pub mod lost_update;
pub mod proxy;
pub mod quorum;
pub mod record;
#[cfg(feature = "metrics")]
pub mod recorded;
pub mod referee;
pub mod scripts;
pub mod sentinel;
pub mod server;
pub mod trap_child;
pub mod worker_bin;
pub mod wrong_type;

use std::future::Future;
use std::time::Duration;

// The server binary and its version (`binaries.rs`, which `server.rs` includes so that
// the benches and examples have it too).
#[allow(unused_imports)]
pub use server::binaries;
pub use server::RedisServer;

/// Runs `body` on a current-thread runtime of its own, on a thread of its own, whose
/// clock stands still unless the body advances it: a pending blocking task keeps tokio
/// from advancing the paused clock by itself while the runtime waits for Redis.
pub fn on_a_stopped_clock<F, Fut, T>(body: F) -> std::thread::JoinHandle<T>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = T>,
    T: Send + 'static,
{
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .expect("a current-thread runtime");
        runtime.block_on(async move {
            let (release, inhibit) = std::sync::mpsc::channel::<()>();
            let inhibitor = tokio::task::spawn_blocking(move || inhibit.recv());
            let out = body().await;
            drop(release);
            let _ = inhibitor.await;
            out
        })
    })
}

/// Generous bound for liveness assertions: "happens within 5 s".
pub const LIVENESS: Duration = Duration::from_secs(5);

/// Polls `check` every 10 ms until it returns true, for at most [`LIVENESS`]; returns
/// whether it did.
pub async fn eventually<F, Fut>(mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + LIVENESS;
    while tokio::time::Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

/// Awaits `fut`, failing the test if it takes longer than [`LIVENESS`].
pub async fn at_once<T>(fut: impl std::future::IntoFuture<Output = T>) -> T {
    tokio::time::timeout(LIVENESS, fut)
        .await
        .expect("an error must come at once, not after waiting")
}

/// Joins every task of `tasks`, failing the test with `what` if the next one takes longer
/// than `bound`, or if one panicked.
pub async fn join_within<T: 'static>(
    tasks: &mut tokio::task::JoinSet<T>,
    bound: Duration,
    what: &str,
) {
    while let Some(done) = tokio::time::timeout(bound, tasks.join_next())
        .await
        .expect(what)
    {
        done.unwrap();
    }
}

/// What one way of taking a lock gave: its name, how long it took, and its result.
pub type Outcome = (
    &'static str,
    Duration,
    Result<Option<either::Either>, redismutex::Error>,
);

/// Every way to take the lock at `<name>:<key>` (`<name>` for an empty key), each with
/// how long it took.
pub async fn every_acquire(
    mx: &redismutex::RwMutex<redis::aio::MultiplexedConnection>,
    key: &str,
) -> Vec<Outcome> {
    let mut outcomes = Vec::new();
    let started = std::time::Instant::now();
    let result = at_once(mx.write().key(key)).await.map(|g| Some(g.into()));
    outcomes.push(("write", started.elapsed(), result));
    let started = std::time::Instant::now();
    let result = at_once(mx.read().key(key)).await.map(|g| Some(g.into()));
    outcomes.push(("read", started.elapsed(), result));
    let started = std::time::Instant::now();
    let result = at_once(mx.try_write().key(key))
        .await
        .map(|g| g.map(Into::into));
    outcomes.push(("try_write", started.elapsed(), result));
    let started = std::time::Instant::now();
    let result = at_once(mx.try_read().key(key))
        .await
        .map(|g| g.map(Into::into));
    outcomes.push(("try_read", started.elapsed(), result));
    outcomes
}

/// The results of [`every_acquire`] on the mutex's whole lock.
pub async fn every_result(
    mx: &redismutex::RwMutex<redis::aio::MultiplexedConnection>,
) -> Vec<Result<Option<either::Either>, redismutex::Error>> {
    every_acquire(mx, "")
        .await
        .into_iter()
        .map(|(_, _, result)| result)
        .collect()
}

/// Logs from the crate to the test output when `RUST_LOG` is set.
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// Raw Redis commands for assertions about what is stored.
pub mod raw {
    use redis::aio::MultiplexedConnection;

    pub async fn cmd<T: redis::FromRedisValue>(
        conn: &MultiplexedConnection,
        name: &str,
        args: &[&str],
    ) -> T {
        let mut command = redis::cmd(name);
        for arg in args {
            command.arg(*arg);
        }
        command
            .query_async(&mut conn.clone())
            .await
            .unwrap_or_else(|err| panic!("{name} {args:?}: {err}"))
    }

    pub async fn key_type(conn: &MultiplexedConnection, key: &str) -> String {
        let kind: redis::Value = cmd(conn, "TYPE", &[key]).await;
        match kind {
            redis::Value::SimpleString(kind) => kind,
            redis::Value::Okay => "ok".into(),
            other => format!("{other:?}"),
        }
    }

    /// How many times the server ran `command` (also from scripts) and how many of those
    /// failed, from `INFO commandstats`.
    pub async fn calls(conn: &MultiplexedConnection, command: &str) -> (u64, u64) {
        let info: String = cmd(conn, "INFO", &["commandstats"]).await;
        let prefix = format!("cmdstat_{command}:");
        let Some(line) = info.lines().find_map(|line| line.strip_prefix(&prefix)) else {
            return (0, 0);
        };
        let field = |name: &str| {
            line.split(',')
                .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
                .map_or(0, |n| n.parse().unwrap())
        };
        (field("calls"), field("failed_calls"))
    }

    /// The server's clock in milliseconds, as the scripts read it (`TIME`).
    pub async fn server_ms(conn: &MultiplexedConnection) -> i64 {
        let (secs, micros): (i64, i64) = cmd(conn, "TIME", &[]).await;
        secs * 1000 + micros / 1000
    }

    /// The server's clock in microseconds, as the scripts read it (`TIME`).
    pub async fn server_us(conn: &MultiplexedConnection) -> u64 {
        let (secs, micros): (u64, u64) = cmd(conn, "TIME", &[]).await;
        secs * 1_000_000 + micros
    }

    pub async fn pttl(conn: &MultiplexedConnection, key: &str) -> i64 {
        cmd(conn, "PTTL", &[key]).await
    }

    pub async fn exists(conn: &MultiplexedConnection, key: &str) -> bool {
        cmd::<i64>(conn, "EXISTS", &[key]).await == 1
    }

    pub async fn get(conn: &MultiplexedConnection, key: &str) -> Option<String> {
        cmd(conn, "GET", &[key]).await
    }

    pub async fn members(conn: &MultiplexedConnection, key: &str) -> Vec<String> {
        let mut members: Vec<String> = cmd(conn, "SMEMBERS", &[key]).await;
        members.sort();
        members
    }

    /// How many clients are subscribed to `channel` (`PUBSUB NUMSUB`).
    pub async fn subscribers(conn: &MultiplexedConnection, channel: &str) -> i64 {
        let reply: Vec<redis::Value> = cmd(conn, "PUBSUB", &["NUMSUB", channel]).await;
        match reply.get(1) {
            Some(redis::Value::Int(n)) => *n,
            other => panic!("PUBSUB NUMSUB: {other:?}"),
        }
    }

    /// The counter stored at `fence`, parsed.
    pub async fn stored_token(conn: &MultiplexedConnection, fence: &str) -> u64 {
        get(conn, fence)
            .await
            .unwrap_or_else(|| panic!("{fence} is missing"))
            .parse()
            .unwrap_or_else(|err| panic!("{fence} is not an integer: {err}"))
    }
}

/// A mutex named `name` on `conn` with the given TTL and the lock intent off.
pub fn mutex(
    conn: &redis::aio::MultiplexedConnection,
    name: &str,
    ttl: Duration,
) -> redismutex::RwMutex<redis::aio::MultiplexedConnection> {
    redismutex::RwMutex::builder(conn.clone(), name)
        .ttl(ttl)
        .build()
        .expect("valid options")
}

/// A mutex named `name` on `conn` with the default TTL and the lock intent on.
pub fn intent_mutex(
    conn: &redis::aio::MultiplexedConnection,
    name: &str,
) -> redismutex::RwMutex<redis::aio::MultiplexedConnection> {
    redismutex::RwMutex::builder(conn.clone(), name)
        .lock_intent(true)
        .build()
        .expect("valid options")
}
