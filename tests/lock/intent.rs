//! The lock intent: a waiting writer keeps new readers out, and never longer than it waits.

use std::time::Duration;

use crate::common::{eventually, raw, RedisServer, LIVENESS};
use redis::aio::MultiplexedConnection;
use redismutex::{Error, RwMutex};
use tokio_util::sync::CancellationToken;

const INTENT: &str = "feed:lock-intent";

/// The mutex `feed` with `ttl`, its lock intent on or off by `intent`.
fn with_intent(
    conn: &MultiplexedConnection,
    ttl: Duration,
    intent: bool,
) -> RwMutex<MultiplexedConnection> {
    RwMutex::builder(conn.clone(), "feed")
        .ttl(ttl)
        .lock_intent(intent)
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_waiting_writer_keeps_new_readers_out_and_clears_its_intent_on_acquiring() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = with_intent(&conn, Duration::from_secs(30), true);

    let reader = mx.read().await.unwrap();
    let writer = tokio::spawn({
        let mx = mx.clone();
        async move { mx.write().await }
    });
    assert!(
        eventually(|| raw::exists(&conn, INTENT)).await,
        "intent set while waiting"
    );
    let intent = raw::get(&conn, INTENT).await.unwrap();
    assert!(
        mx.try_read().await.unwrap().is_none(),
        "new readers stay out"
    );
    let late = mx.read().timeout(Duration::from_millis(200)).await;
    assert!(matches!(late, Err(Error::Timeout)), "{late:?}");

    assert!(reader.unlock().await.unwrap());
    let writer = tokio::time::timeout(LIVENESS, writer)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(
        intent,
        writer.id(),
        "the intent holds the waiting writer's id"
    );
    assert!(
        !raw::exists(&conn, INTENT).await,
        "acquiring deletes the intent"
    );
    writer.unlock().await.unwrap();
    assert!(mx.try_read().await.unwrap().is_some());
}

#[tokio::test]
async fn a_waiting_writer_keeps_its_intent_alive_past_its_ttl() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = with_intent(&conn, Duration::from_millis(200), true);

    let reader = mx.read().await.unwrap();
    let writer = tokio::spawn({
        let mx = mx.clone();
        async move { mx.write().await }
    });
    assert!(eventually(|| raw::exists(&conn, INTENT)).await);
    for _ in 0..50 {
        // 1 s, five intent TTLs: it must never lapse while the writer waits.
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(
            raw::exists(&conn, INTENT).await,
            "the intent lapsed while the writer waited"
        );
    }
    assert!(mx.try_read().await.unwrap().is_none());
    reader.unlock().await.unwrap();
    let writer = tokio::time::timeout(LIVENESS, writer)
        .await
        .unwrap()
        .unwrap();
    assert!(writer.is_ok(), "{writer:?}");
    assert!(!raw::exists(&conn, INTENT).await);
}

#[tokio::test]
async fn a_writer_that_times_out_clears_its_intent() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = with_intent(&conn, Duration::from_secs(30), true);
    let reader = mx.read().await.unwrap();

    let result = mx.write().timeout(Duration::from_millis(200)).await;
    assert!(matches!(result, Err(Error::Timeout)), "{result:?}");
    // The intent's TTL is 30 s: only the writer giving up can remove it this soon.
    assert!(eventually(|| async { !raw::exists(&conn, INTENT).await }).await);
    assert!(
        mx.try_read().await.unwrap().is_some(),
        "readers are let in again"
    );
    assert!(!reader.is_cancelled(), "the reader's lock was not touched");
}

#[tokio::test]
async fn a_writer_whose_parent_is_cancelled_clears_its_intent() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = with_intent(&conn, Duration::from_secs(30), true);
    let _reader = mx.read().await.unwrap();

    let parent = CancellationToken::new();
    let writer = tokio::spawn({
        let (mx, parent) = (mx.clone(), parent.clone());
        async move { mx.write().parent(parent).await }
    });
    assert!(eventually(|| raw::exists(&conn, INTENT)).await);
    parent.cancel();
    let result = tokio::time::timeout(LIVENESS, writer)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(result, Err(Error::Cancelled)), "{result:?}");
    assert!(eventually(|| async { !raw::exists(&conn, INTENT).await }).await);
}

#[tokio::test]
async fn dropping_a_waiting_writer_clears_its_intent() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = with_intent(&conn, Duration::from_secs(30), true);
    let _reader = mx.read().await.unwrap();

    let writer = tokio::spawn({
        let mx = mx.clone();
        async move { mx.write().await }
    });
    assert!(eventually(|| raw::exists(&conn, INTENT)).await);
    writer.abort();
    assert!(writer.await.unwrap_err().is_cancelled());
    assert!(eventually(|| async { !raw::exists(&conn, INTENT).await }).await);
}

#[tokio::test]
async fn try_write_never_sets_the_intent() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = with_intent(&conn, Duration::from_secs(30), true);
    let _reader = mx.read().await.unwrap();

    assert!(mx.try_write().await.unwrap().is_none());
    assert!(!raw::exists(&conn, INTENT).await);
    assert!(mx.try_read().await.unwrap().is_some());
}

#[tokio::test]
async fn without_intent_a_waiting_writer_lets_readers_in() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = with_intent(&conn, Duration::from_secs(30), false);
    let _reader = mx.read().await.unwrap();

    let writer = tokio::spawn({
        let mx = mx.clone();
        async move { mx.write().timeout(Duration::from_millis(300)).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!raw::exists(&conn, INTENT).await);
    assert!(mx.try_read().await.unwrap().is_some());
    let result = writer.await.unwrap();
    assert!(matches!(result, Err(Error::Timeout)), "{result:?}");
}
