//! `Builder::replicas(n, timeout)` on a primary with replicas (the Sentinel and replica
//! acknowledgement guide, `redismutex::guide::sentinel`): an acquisition, and each refresh,
//! counts only once `n` replicas have acknowledged it (`WAIT`). A frozen replica makes a
//! try fail with `Error::NotReplicated` within its timeout and leaves no lock, keeps a
//! waiting request waiting, and makes a held guard expire.

use std::future::IntoFuture;
use std::time::{Duration, Instant};

use crate::common;
use crate::common::{eventually, raw, RedisServer, LIVENESS};
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{Cmd, Pipeline, RedisFuture, Value};
use redismutex::{CancelReason, Error, RwMutex, Semaphore};

/// A primary and `n` replicas of it, each replicating (`master_link_status:up`).
pub(super) async fn replicated(n: usize) -> (RedisServer, Vec<RedisServer>) {
    // No 5 s wait before the full sync each replica starts with.
    let primary = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"]);
    let port = primary.port().to_string();
    let replicas: Vec<RedisServer> = (0..n)
        .map(|_| RedisServer::start_with(&["--replicaof", "127.0.0.1", &port]))
        .collect();
    for replica in &replicas {
        let conn = replica.conn().await;
        let up = eventually(|| async {
            let info: String = raw::cmd(&conn, "INFO", &["replication"]).await;
            info.contains("master_link_status:up")
        })
        .await;
        assert!(up, "replica never in sync:\n{}", replica.log());
    }
    (primary, replicas)
}

/// A connection to `server` whose response timeout (5 s) outlasts every `WAIT` here:
/// redis-rs's default 500 ms would cut a slow `WAIT` short on a loaded machine, which is
/// a failed request, not `NotReplicated` (see `Builder::replicas`).
pub(super) async fn patient(server: &RedisServer) -> MultiplexedConnection {
    let config =
        redis::AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(5)));
    server
        .client()
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .expect("connect to the primary")
}

fn acknowledged(
    conn: &MultiplexedConnection,
    name: &str,
    ttl: Duration,
    timeout: Duration,
) -> RwMutex<MultiplexedConnection> {
    RwMutex::builder(conn.clone(), name)
        .ttl(ttl)
        .replicas(1, timeout)
        .build()
        .unwrap()
}

#[tokio::test]
async fn an_acknowledged_lock_is_on_the_replica_when_its_request_returns() {
    let (primary, replicas) = replicated(1).await;
    let (conn, replica) = (patient(&primary).await, replicas[0].conn().await);
    // Timeouts generous enough for a loaded machine: these must be acknowledged.
    let mx = acknowledged(
        &conn,
        "acked",
        Duration::from_secs(4),
        Duration::from_secs(1),
    );

    let writer = mx.write().key("w").await.unwrap();
    assert_eq!(
        raw::get(&replica, "acked:w").await.as_deref(),
        Some(writer.id())
    );
    let reader = mx.try_read().key("r").await.unwrap().unwrap();
    assert_eq!(raw::members(&replica, "acked:r").await, vec![reader.id()]);
    let sem = Semaphore::builder(conn.clone(), "acked-sem", 2)
        .replicas(1, Duration::from_secs(1))
        .build()
        .unwrap();
    let permit = sem.acquire().await.unwrap();
    let score: Option<f64> = raw::cmd(&replica, "ZSCORE", &["acked-sem", permit.id()]).await;
    assert!(score.is_some(), "the permit is on the replica");

    // Renewals are acknowledged too: a guard keeps its lock for several TTLs.
    let short = acknowledged(
        &conn,
        "renewed",
        Duration::from_millis(800),
        Duration::from_millis(200),
    );
    let renewed = short.write().await.unwrap();
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    let refreshes = renewed.refreshes();
    assert!(!renewed.is_cancelled() && refreshes >= 3, "{refreshes}");
    assert_eq!(
        raw::get(&replica, "renewed").await.as_deref(),
        Some(renewed.id())
    );
    assert!(renewed.unlock().await.unwrap());
    assert!(writer.unlock().await.unwrap());
    assert!(reader.unlock().await.unwrap());
    assert!(permit.unlock().await.unwrap());
}

#[tokio::test]
async fn a_frozen_replica_makes_a_try_fail_within_its_timeout_and_leaves_no_lock() {
    let (primary, replicas) = replicated(1).await;
    let conn = patient(&primary).await;
    let timeout = Duration::from_millis(200);
    let mx = acknowledged(&conn, "frozen", Duration::from_secs(2), timeout);
    replicas[0].pause();

    let started = Instant::now();
    let refused = mx.try_write().await;
    let took = started.elapsed();
    let ok = matches!(
        refused,
        Err(Error::NotReplicated {
            ref key,
            acked: 0,
            wanted: 1,
            ..
        }) if key == "frozen"
    );
    assert!(ok, "{refused:?}");
    assert!(
        took >= timeout && took < timeout + Duration::from_secs(1),
        "{took:?}"
    );
    assert!(
        !raw::exists(&conn, "frozen").await,
        "the unacknowledged lock is released"
    );

    // A wait keeps trying until its own timeout, and leaves nothing either.
    let waited = mx.write().timeout(Duration::from_millis(700)).await;
    assert!(matches!(waited, Err(Error::Timeout)), "{waited:?}");
    assert!(
        eventually(|| async { !raw::exists(&conn, "frozen").await }).await,
        "the waiter's lock is released when it gives up"
    );

    // Once the replica answers again, the same request succeeds.
    replicas[0].resume();
    let guard = tokio::time::timeout(LIVENESS, mx.write())
        .await
        .unwrap()
        .unwrap();
    assert!(guard.unlock().await.unwrap());
}

#[tokio::test]
async fn a_waiting_request_gets_the_lock_once_the_replica_thaws() {
    let (primary, replicas) = replicated(1).await;
    let conn = patient(&primary).await;
    let mx = acknowledged(
        &conn,
        "thaw",
        Duration::from_secs(2),
        Duration::from_millis(100),
    );
    replicas[0].pause();
    let waiter = tokio::spawn(mx.write().timeout(LIVENESS).into_future());
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(
        !waiter.is_finished(),
        "no guard while the replica is frozen"
    );
    replicas[0].resume();
    let guard = waiter.await.unwrap().unwrap();
    let replica = replicas[0].conn().await;
    assert_eq!(
        raw::get(&replica, "thaw").await.as_deref(),
        Some(guard.id())
    );
    assert!(guard.unlock().await.unwrap());
}

#[tokio::test]
async fn a_guard_whose_refreshes_are_not_acknowledged_expires() {
    let (primary, replicas) = replicated(1).await;
    let conn = patient(&primary).await;
    let mx = acknowledged(
        &conn,
        "unacked",
        Duration::from_millis(800),
        Duration::from_millis(100),
    );
    let guard = mx.write().await.unwrap();
    replicas[0].pause();
    let fired = tokio::time::timeout(LIVENESS, guard.cancelled()).await;
    replicas[0].resume();
    assert!(fired.is_ok(), "the guard outlived its deadline");
    assert_eq!(guard.cancel_reason(), Some(CancelReason::Expired));
    assert!(guard.valid_until() <= tokio::time::Instant::now());
}

#[tokio::test]
async fn more_replicas_than_the_primary_has_never_acknowledge() {
    let (primary, _replicas) = replicated(1).await;
    let conn = patient(&primary).await;
    let mx = RwMutex::builder(conn.clone(), "two")
        .replicas(2, Duration::from_millis(300))
        .build()
        .unwrap();
    let refused = mx.try_write().await;
    assert!(
        matches!(
            refused,
            Err(Error::NotReplicated {
                acked: 0 | 1,
                wanted: 2,
                ..
            })
        ),
        "{refused:?}"
    );
    assert!(!raw::exists(&conn, "two").await);
}

#[tokio::test]
async fn unusable_acknowledgement_options_are_refused_when_built() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let ttl = Duration::from_secs(4);
    for (n, timeout) in [
        (0, Duration::from_millis(100)),
        (1, Duration::ZERO),
        (1, ttl / 4 + Duration::from_millis(1)),
    ] {
        let built = RwMutex::builder(conn.clone(), "opts")
            .ttl(ttl)
            .replicas(n, timeout)
            .build();
        assert!(
            matches!(built, Err(Error::InvalidOptions(ref why)) if why.contains("replica")),
            "{n} {timeout:?}: {built:?}"
        );
    }
    let nodes = common::quorum::Nodes::start(3);
    let built = RwMutex::builder(nodes.quorum().await, "opts")
        .replicas(1, Duration::from_millis(100))
        .build();
    assert!(matches!(built, Err(Error::InvalidOptions(ref why)) if why.contains("quorum")));
}

/// A connection that sends every request to `first`, but a `WAIT` sent as a request of
/// its own to `then`: what a reconnecting connection (a connection manager, or one that
/// follows Sentinel to a new primary and resends) may do between two requests.
#[derive(Clone)]
pub(super) struct Moving {
    pub(super) first: MultiplexedConnection,
    pub(super) then: MultiplexedConnection,
}

impl ConnectionLike for Moving {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let wait = cmd.args_iter().next().is_some_and(
            |arg| matches!(arg, redis::Arg::Simple(name) if name.eq_ignore_ascii_case(b"WAIT")),
        );
        if wait {
            self.then.req_packed_command(cmd)
        } else {
            self.first.req_packed_command(cmd)
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        self.first.req_packed_commands(pipeline, offset, count)
    }

    fn get_db(&self) -> i64 {
        0
    }
}

/// The `WAIT` goes with the writes it is about, in one request: a lock taken on a
/// primary whose replica is frozen is refused, even by a connection that would send a
/// `WAIT` of its own to another primary, whose replica has everything that connection
/// wrote there (nothing).
#[tokio::test]
async fn the_wait_reaches_the_server_that_took_the_lock() {
    let (primary, replicas) = replicated(1).await;
    let (other, _other_replicas) = replicated(1).await;
    let conn = Moving {
        first: patient(&primary).await,
        then: patient(&other).await,
    };
    replicas[0].pause();
    let timeout = Duration::from_millis(200);
    let mx = RwMutex::builder(conn, "moved")
        .ttl(Duration::from_secs(2))
        .replicas(1, timeout)
        .build()
        .unwrap();

    let refused = mx.try_write().await;
    assert!(
        matches!(refused, Err(Error::NotReplicated { acked: 0, .. })),
        "{refused:?}"
    );
    let reader = mx.try_read().key("r").await;
    assert!(
        matches!(reader, Err(Error::NotReplicated { acked: 0, .. })),
        "{reader:?}"
    );
    // Once the replica answers again, the same lock is acknowledged.
    replicas[0].resume();
    let guard = tokio::time::timeout(LIVENESS, mx.write())
        .await
        .unwrap()
        .unwrap();
    assert!(guard.unlock().await.unwrap());
}
