//! How write() and read() wait: until released, until a timeout, until cancelled.

use std::time::{Duration, Instant};

use crate::common;
use crate::common::{raw, RedisServer, LIVENESS};
use redismutex::{Error, RwMutex};
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn a_waiter_acquires_soon_after_an_early_release_not_after_the_ttl() {
    let server = RedisServer::start();
    let mx = RwMutex::builder(server.conn().await, "job")
        .ttl(Duration::from_secs(30))
        .build()
        .unwrap();

    let holder = mx.write().await.unwrap();
    let waiter = tokio::spawn({
        let mx = mx.clone();
        async move { mx.write().await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !waiter.is_finished(),
        "the waiter must wait while the lock is held"
    );
    let released = Instant::now();
    assert!(holder.unlock().await.unwrap());
    let guard = tokio::time::timeout(LIVENESS, waiter)
        .await
        .expect("acquired within 5 s, far below the 30 s TTL")
        .unwrap()
        .unwrap();
    assert!(released.elapsed() < LIVENESS);
    assert!(!guard.is_cancelled());
}

#[tokio::test]
async fn a_reader_waits_for_the_writer() {
    let server = RedisServer::start();
    let mx = RwMutex::new(server.conn().await, "job");
    let writer = mx.write().await.unwrap();
    let reader = tokio::spawn({
        let mx = mx.clone();
        async move { mx.read().await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!reader.is_finished());
    writer.unlock().await.unwrap();
    let guard = tokio::time::timeout(LIVENESS, reader)
        .await
        .unwrap()
        .unwrap();
    assert!(guard.is_ok(), "{guard:?}");
}

#[tokio::test]
async fn timeout_bounds_the_wait() {
    let server = RedisServer::start();
    let mx = RwMutex::new(server.conn().await, "job");
    let _holder = mx.write().await.unwrap();

    let started = Instant::now();
    let result = mx.write().timeout(Duration::from_millis(300)).await;
    let waited = started.elapsed();
    assert!(matches!(result, Err(Error::Timeout)), "{result:?}");
    assert!(
        waited >= Duration::from_millis(300),
        "gave up early: {waited:?}"
    );
    assert!(waited < LIVENESS, "gave up late: {waited:?}");
}

#[tokio::test]
async fn timeout_never_shortens_a_held_lock() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, "job", Duration::from_millis(200));

    let guard = mx.write().timeout(Duration::from_millis(50)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await; // 16 timeouts, 4 TTLs
    assert!(!guard.is_cancelled(), "{:?}", guard.cancel_reason());
    assert_eq!(raw::get(&conn, "job").await.as_deref(), Some(guard.id()));
    assert!(guard.unlock().await.unwrap());
}

#[tokio::test]
async fn cancelling_the_parent_ends_the_wait() {
    let server = RedisServer::start();
    let mx = RwMutex::new(server.conn().await, "job");
    let _holder = mx.write().await.unwrap();

    let parent = CancellationToken::new();
    let waiter = tokio::spawn({
        let (mx, parent) = (mx.clone(), parent.clone());
        async move { mx.read().parent(parent).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    parent.cancel();
    let result = tokio::time::timeout(LIVENESS, waiter)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(result, Err(Error::Cancelled)), "{result:?}");
}

#[tokio::test]
async fn an_already_cancelled_parent_sends_nothing() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::builder(conn.clone(), "job")
        .lock_intent(true)
        .build()
        .unwrap();
    let parent = CancellationToken::new();
    parent.cancel();

    let write = mx.write().parent(parent.clone()).await;
    let try_read = mx.try_read().parent(parent.clone()).await;
    assert!(matches!(write, Err(Error::Cancelled)), "{write:?}");
    assert!(matches!(try_read, Err(Error::Cancelled)), "{try_read:?}");
    assert_eq!(raw::cmd::<i64>(&conn, "DBSIZE", &[]).await, 0);
}

/// An attempt answered after the validity it would start has ended (here: the server is
/// frozen while the request is in flight) gives no expired guard: a wait attempts again
/// under the same id, which renews the lock.
#[tokio::test]
async fn an_acquisition_answered_too_late_is_renewed_not_handed_out_expired() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, "late", Duration::from_millis(100));

    server.pause();
    let attempt = tokio::spawn({
        let mx = mx.clone();
        async move { mx.write().await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await; // below the 500 ms reply timeout
    server.resume();
    let guard = tokio::time::timeout(LIVENESS, attempt)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        !guard.is_cancelled(),
        "handed out expired: {:?}",
        guard.cancel_reason()
    );
    assert_eq!(raw::get(&conn, "late").await.as_deref(), Some(guard.id()));
    assert!(guard.unlock().await.unwrap());
}

/// A try whose attempt gets no reply within the lock's validity returns `Timeout` then,
/// even over a connection with no response timeout, and releases what the attempt may
/// take once the server answers, long before the TTL would.
#[tokio::test]
async fn a_try_unanswered_within_the_validity_times_out_and_cleans_up() {
    let server = RedisServer::start();
    let admin = server.conn().await;
    let conn = server
        .client()
        .get_multiplexed_async_connection_with_config(
            &redis::AsyncConnectionConfig::new().set_response_timeout(None),
        )
        .await
        .unwrap();
    let ttl = Duration::from_secs(1);
    let mx = RwMutex::builder(conn, "late").ttl(ttl).build().unwrap();

    server.pause();
    let started = std::time::Instant::now();
    let result = tokio::time::timeout(LIVENESS, mx.try_write())
        .await
        .unwrap();
    let took = started.elapsed();
    server.resume();
    assert!(matches!(result, Err(Error::Timeout)), "{result:?}");
    // The validity (1 s - 12 ms), plus at most 100 ms waiting for the clean-up.
    assert!(
        took >= Duration::from_millis(980) && took < Duration::from_millis(1400),
        "{took:?}"
    );
    // Once the server runs the attempt (which takes the lock), the clean-up queued
    // behind it removes it, well before its 1 s TTL.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!raw::exists(&admin, "late").await, "left for its TTL");
}
