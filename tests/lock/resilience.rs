//! Script cache loss, a server that goes away, ConnectionManager, and many contenders.

use std::sync::Arc;
use std::time::Duration;

use crate::common;
use crate::common::either::Either;
use crate::common::{raw, RedisServer, LIVENESS};
use redismutex::{CancelReason, Error, RwMutex};

#[tokio::test]
async fn locks_work_across_script_flush() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    // A TTL of 1 s: renewals every 500 ms, each with 490 ms to spare on a loaded machine.
    let mx = common::mutex(&conn, "sf", Duration::from_millis(1_000));

    let held = mx.write().await.unwrap();
    let refreshes = held.refreshes();
    raw::cmd::<()>(&conn, "SCRIPT", &["FLUSH"]).await;
    tokio::time::sleep(Duration::from_millis(1_600)).await; // refreshes after the flush
    assert!(
        held.refreshes() >= refreshes + 2,
        "no refresh after the flush"
    );
    assert!(!held.is_cancelled(), "{:?}", held.cancel_reason());
    raw::cmd::<()>(&conn, "SCRIPT", &["FLUSH"]).await;
    assert!(held.unlock().await.unwrap());
    raw::cmd::<()>(&conn, "SCRIPT", &["FLUSH"]).await;
    let again = mx
        .try_read()
        .await
        .unwrap()
        .expect("rlock reloads its script");
    assert_eq!(
        raw::members(&conn, "sf").await,
        vec![again.id().to_string()]
    );
}

#[tokio::test]
async fn a_server_that_goes_away_gives_errors_and_fires_tokens() {
    let mut server = RedisServer::start();
    let mx = RwMutex::builder(server.conn().await, "gone")
        .ttl(Duration::from_millis(400))
        .build()
        .unwrap();
    let guard = mx.write().key("held").await.unwrap();

    server.stop();
    tokio::time::timeout(LIVENESS, guard.cancelled())
        .await
        .unwrap();
    assert!(
        matches!(guard.cancel_reason(), Some(CancelReason::Expired)),
        "{:?}",
        guard.cancel_reason()
    );
    for result in [
        tokio::time::timeout(LIVENESS, mx.write())
            .await
            .unwrap()
            .map(|guard| Some(Either::from(guard))),
        tokio::time::timeout(LIVENESS, mx.read())
            .await
            .unwrap()
            .map(|guard| Some(Either::from(guard))),
        tokio::time::timeout(LIVENESS, mx.try_write())
            .await
            .unwrap()
            .map(|guard| guard.map(Either::from)),
        tokio::time::timeout(LIVENESS, mx.try_read())
            .await
            .unwrap()
            .map(|guard| guard.map(Either::from)),
    ] {
        match result {
            Err(Error::Redis { key, .. }) => assert_eq!(key, "gone"),
            other => panic!("expected a Redis error naming the key, got {other:?}"),
        }
    }
    let unlocked = tokio::time::timeout(LIVENESS, guard.unlock())
        .await
        .unwrap();
    assert!(unlocked.is_err(), "nothing could be released: {unlocked:?}");
}

#[tokio::test]
async fn works_with_connection_manager() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::builder(server.manager().await, "cm")
        .ttl(Duration::from_millis(400))
        .lock_intent(true)
        .build()
        .unwrap();

    let reader = mx.read().await.unwrap();
    assert!(mx.try_write().await.unwrap().is_none());
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(!reader.is_cancelled());
    assert!(reader.unlock().await.unwrap());
    let writer = mx.write().await.unwrap();
    assert_eq!(raw::get(&conn, "cm").await.as_deref(), Some(writer.id()));
    assert!(mx.try_read().await.unwrap().is_none());
    assert!(writer.unlock().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_update_is_lost_under_the_write_lock() {
    const CONNECTIONS: usize = 4;
    const TASKS: usize = 16;
    const INCREMENTS: usize = 25;
    let server = RedisServer::start();
    let check = server.conn().await;
    let mut mutexes = Vec::new();
    for _ in 0..CONNECTIONS {
        mutexes.push(Arc::new(RwMutex::new(server.conn().await, "counter-lock")));
    }

    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let mx = Arc::clone(&mutexes[task % CONNECTIONS]);
        tasks.push(tokio::spawn(async move {
            let mut conn = server_conn(&mx);
            for _ in 0..INCREMENTS {
                let guard = mx.write().timeout(Duration::from_secs(60)).await.unwrap();
                // A read-modify-write that loses updates unless writers exclude each other.
                let value: i64 = redis::cmd("GET")
                    .arg("counter")
                    .query_async(&mut conn)
                    .await
                    .unwrap_or(0);
                tokio::task::yield_now().await;
                let _: () = redis::cmd("SET")
                    .arg("counter")
                    .arg(value + 1)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                assert!(!guard.is_cancelled());
                assert!(guard.unlock().await.unwrap());
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let total: i64 = raw::cmd(&check, "GET", &["counter"]).await;
    assert_eq!(total, (TASKS * INCREMENTS) as i64);
}

/// The connection a mutex was made with, for the protected work.
fn server_conn(
    mx: &RwMutex<redis::aio::MultiplexedConnection>,
) -> redis::aio::MultiplexedConnection {
    mx.connection().clone()
}
