//! `WriteGuard::exec` on a primary with replicas and under Sentinel. With `replicas(n, ..)`
//! the `WAIT` goes in the same request as the script: an exec that returns is on `n`
//! replicas; one that too few replicas acknowledged fails with `Error::NotReplicated`
//! although its commands ran on the primary, even over a connection that would send a
//! `WAIT` of its own elsewhere; a stale holder is refused, and sends no `WAIT`'s worth of
//! writes. With the feature `sentinel`: exec over a `SentinelConnection` runs on the
//! primary the Sentinels name, is refused when stale, and reports unacknowledged writes.

use std::time::Duration;

use super::replicas::{patient, replicated, Moving};
use crate::common::{eventually, raw};
use redis::aio::ConnectionLike;
use redismutex::{CancelReason, Error, RwMutex};

/// Long enough that no refresh runs during a test (a refresh with a frozen replica would
/// fail and fire the guard).
const TTL: Duration = Duration::from_secs(30);

fn acknowledged<C>(conn: C, name: &str, n: usize, timeout: Duration) -> RwMutex<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    RwMutex::builder(conn, name)
        .ttl(TTL)
        .replicas(n, timeout)
        .build()
        .unwrap()
}

fn write_data(value: &str) -> redis::Pipeline {
    let mut pipe = redis::pipe();
    pipe.set("data", value).ignore().incr("data:writes", 1);
    pipe
}

#[tokio::test]
async fn an_acknowledged_exec_is_on_the_replica_when_it_returns() {
    let (primary, replicas) = replicated(1).await;
    let (conn, replica) = (patient(&primary).await, replicas[0].conn().await);
    // A timeout generous enough for a loaded machine: this must be acknowledged.
    let mx = acknowledged(conn.clone(), "entry", 1, Duration::from_secs(1));
    let guard = mx.write().await.unwrap();
    let (writes,): (i64,) = guard.exec(&write_data("acked")).await.unwrap();
    assert_eq!(writes, 1);
    // Read at once: acknowledged means the replica has it now.
    assert_eq!(raw::get(&replica, "data").await.as_deref(), Some("acked"));
    assert_eq!(
        raw::get(&replica, "data:writes").await.as_deref(),
        Some("1")
    );
    assert!(!guard.is_cancelled());
    assert!(guard.unlock().await.unwrap());
}

#[tokio::test]
async fn an_exec_a_frozen_replica_does_not_acknowledge_is_not_replicated_but_ran() {
    let (primary, replicas) = replicated(1).await;
    let conn = patient(&primary).await;
    let mx = acknowledged(conn.clone(), "entry", 1, Duration::from_millis(200));
    let guard = mx.write().await.unwrap();
    replicas[0].pause();

    let unacked = guard.exec::<(i64,)>(&write_data("unacked")).await;
    assert!(
        matches!(
            &unacked,
            Err(Error::NotReplicated { key, acked: 0, wanted: 1, .. }) if key == "entry"
        ),
        "{unacked:?}"
    );
    // It ran on the primary all the same.
    assert_eq!(raw::get(&conn, "data").await.as_deref(), Some("unacked"));
    assert_eq!(raw::get(&conn, "data:writes").await.as_deref(), Some("1"));

    // A stale holder is refused as such, replica or not: nothing of it runs.
    let _: () = raw::cmd(&conn, "DEL", &["entry"]).await;
    let refused = guard.exec::<(i64,)>(&write_data("stale")).await;
    assert!(
        matches!(&refused, Err(Error::NotHeld { key, .. }) if key == "entry"),
        "{refused:?}"
    );
    assert_eq!(guard.cancel_reason(), Some(CancelReason::Lost));
    assert_eq!(raw::get(&conn, "data").await.as_deref(), Some("unacked"));
    assert_eq!(raw::get(&conn, "data:writes").await.as_deref(), Some("1"));

    // Thawed, the replica catches up with what ran.
    replicas[0].resume();
    let replica = replicas[0].conn().await;
    let caught_up =
        eventually(|| async { raw::get(&replica, "data").await.as_deref() == Some("unacked") })
            .await;
    assert!(caught_up, "the replica never got the exec's writes");
}

#[tokio::test]
async fn an_exec_fewer_replicas_than_asked_acknowledge_says_how_many_did() {
    let (primary, replicas) = replicated(2).await;
    let conn = patient(&primary).await;
    // Generous: the thawed replica must acknowledge the last exec in time.
    let mx = acknowledged(conn.clone(), "entry", 2, Duration::from_secs(1));
    let guard = mx.write().await.unwrap();
    replicas[1].pause();

    let unacked = guard.exec::<(i64,)>(&write_data("once")).await;
    assert!(
        matches!(
            &unacked,
            Err(Error::NotReplicated {
                acked: 1,
                wanted: 2,
                ..
            })
        ),
        "{unacked:?}"
    );
    assert_eq!(raw::get(&conn, "data").await.as_deref(), Some("once"));
    // The replica that acknowledged has it.
    let live = replicas[0].conn().await;
    assert_eq!(raw::get(&live, "data").await.as_deref(), Some("once"));
    replicas[1].resume();
    let (writes,): (i64,) = guard.exec(&write_data("twice")).await.unwrap();
    assert_eq!(writes, 2);
    assert!(guard.unlock().await.unwrap());
}

/// The `WAIT` goes with the script it is about, in one request: over a connection that
/// would send a `WAIT` of its own to another primary (whose replica is live, and which
/// has nothing of this connection's to wait for), an exec on a primary whose replica is
/// frozen is still not acknowledged.
#[tokio::test]
async fn the_wait_of_an_exec_reaches_the_server_that_ran_it() {
    let (primary, replicas) = replicated(1).await;
    let (other, _other_replicas) = replicated(1).await;
    let conn = Moving {
        first: patient(&primary).await,
        then: patient(&other).await,
    };
    let mx = acknowledged(conn, "moved", 1, Duration::from_millis(200));
    let guard = mx.write().await.unwrap();
    replicas[0].pause();
    let unacked = guard.exec::<(i64,)>(&write_data("moved")).await;
    replicas[0].resume();
    assert!(
        matches!(&unacked, Err(Error::NotReplicated { acked: 0, .. })),
        "{unacked:?}"
    );
    let primary_conn = primary.conn().await;
    assert_eq!(
        raw::get(&primary_conn, "data").await.as_deref(),
        Some("moved")
    );
    assert!(!raw::exists(&other.conn().await, "data").await);
    assert!(guard.unlock().await.unwrap());
}

#[cfg(feature = "sentinel")]
mod sentinel {
    use std::time::Duration;

    use super::{write_data, TTL};
    use crate::common::raw;
    use crate::common::sentinel::Sentinels;
    use redismutex::{CancelReason, Error, RwMutex, SentinelConnection};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn exec_over_sentinel_runs_on_the_primary_and_is_refused_when_stale() {
        let mut deployment = Sentinels::start();
        let mx = RwMutex::builder(
            SentinelConnection::new(deployment.sentinel_client()),
            "entry",
        )
        .ttl(TTL)
        .replicas(1, Duration::from_millis(500))
        .build()
        .unwrap();
        let primary_index = deployment.primary();
        let primary = deployment.server(primary_index).conn().await;
        let mut replicas = Vec::new();
        for i in deployment.replicas() {
            replicas.push((i, deployment.server(i).conn().await));
        }

        let stale = mx.write().await.unwrap();
        let (writes,): (i64,) = stale.exec(&write_data("from A")).await.unwrap();
        assert_eq!(writes, 1);
        assert_eq!(raw::get(&primary, "data").await.as_deref(), Some("from A"));
        let mut on_replicas = 0;
        for (_, replica) in &replicas {
            if raw::get(replica, "data").await.as_deref() == Some("from A") {
                on_replicas += 1;
            }
        }
        assert!(on_replicas >= 1, "acknowledged, yet on no replica");

        // The lock goes behind A's back and B takes it: A is refused, nothing runs.
        let _: () = raw::cmd(&primary, "DEL", &["entry"]).await;
        let fresh = mx.write().await.unwrap();
        let refused = stale.exec::<(i64,)>(&write_data("stale A")).await;
        assert!(
            matches!(&refused, Err(Error::NotHeld { key, .. }) if key == "entry"),
            "{refused:?}"
        );
        assert_eq!(stale.cancel_reason(), Some(CancelReason::Lost));
        assert_eq!(raw::get(&primary, "data").await.as_deref(), Some("from A"));
        let (writes,): (i64,) = fresh.exec(&write_data("from B")).await.unwrap();
        assert_eq!(writes, 2);

        // Both replicas frozen: B's exec runs on the primary and is not acknowledged.
        for (i, _) in &replicas {
            deployment.freeze_replica(*i);
        }
        let unacked = fresh.exec::<(i64,)>(&write_data("unacked B")).await;
        for (i, _) in &replicas {
            deployment.thaw(*i);
        }
        assert!(
            matches!(
                &unacked,
                Err(Error::NotReplicated {
                    acked: 0,
                    wanted: 1,
                    ..
                })
            ),
            "{unacked:?}"
        );
        assert_eq!(
            raw::get(&primary, "data").await.as_deref(),
            Some("unacked B")
        );
        assert_eq!(deployment.primary(), primary_index, "no failover meanwhile");
        assert!(fresh.unlock().await.unwrap());
        assert!(!stale.unlock().await.unwrap(), "A's lock was lost");
    }
}
