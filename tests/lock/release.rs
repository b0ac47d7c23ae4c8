//! Releasing: unlock, drop, cancellation, and waiting for pending releases.

use std::time::Duration;

use crate::common;
use crate::common::{eventually, raw, RedisServer, LIVENESS};
use redismutex::{CancelReason, RwMutex};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

#[tokio::test]
async fn unlock_releases_and_fires_the_token() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::new(conn.clone(), "res");

    let guard = mx.write().await.unwrap();
    let token = guard.cancellation_token().clone();
    assert!(!token.is_cancelled());
    assert!(guard.unlock().await.unwrap());
    assert!(token.is_cancelled());
    assert!(!raw::exists(&conn, "res").await);
}

#[tokio::test]
async fn unlock_after_the_key_is_gone_reports_false() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::new(conn.clone(), "res");

    let guard = mx.write().await.unwrap();
    raw::cmd::<i64>(&conn, "DEL", &["res"]).await;
    assert!(!guard.unlock().await.unwrap());
}

#[tokio::test]
async fn a_reader_unlock_leaves_the_other_readers() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::new(conn.clone(), "res");

    let a = mx.read().await.unwrap();
    let b = mx.read().await.unwrap();
    assert!(a.unlock().await.unwrap());
    assert_eq!(raw::members(&conn, "res").await, vec![b.id().to_string()]);
    assert!(b.unlock().await.unwrap());
    assert!(
        !raw::exists(&conn, "res").await,
        "the last reader removes the set"
    );
}

#[tokio::test]
async fn dropping_a_guard_releases_the_lock() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, "res", Duration::from_secs(60));

    let guard = mx.write().await.unwrap();
    let token = guard.cancellation_token().clone();
    drop(guard);
    assert!(token.is_cancelled());
    // The TTL is 60 s: only the release can remove the key this soon.
    assert!(eventually(|| async { !raw::exists(&conn, "res").await }).await);
    assert!(mx.try_write().await.unwrap().is_some());
}

#[tokio::test]
async fn cancelling_the_parent_cancels_the_guard_and_releases() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, "res", Duration::from_secs(60));

    let parent = CancellationToken::new();
    let guard = mx.read().parent(parent.clone()).await.unwrap();
    parent.cancel();
    tokio::time::timeout(LIVENESS, guard.cancelled())
        .await
        .unwrap();
    assert_eq!(guard.cancel_reason(), Some(CancelReason::ParentCancelled));
    assert!(eventually(|| async { !raw::exists(&conn, "res").await }).await);
    assert!(
        guard.unlock().await.unwrap(),
        "unlock reports the background release"
    );
}

#[tokio::test]
async fn cancelling_the_guard_token_releases_but_spares_the_parent() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, "res", Duration::from_secs(60));

    let parent = CancellationToken::new();
    let guard = mx.write().parent(parent.clone()).await.unwrap();
    guard.cancellation_token().cancel();
    assert_eq!(guard.cancel_reason(), Some(CancelReason::Cancelled));
    assert!(!parent.is_cancelled());
    assert!(eventually(|| async { !raw::exists(&conn, "res").await }).await);
}

#[tokio::test]
async fn a_task_tracker_waits_for_pending_releases() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let tracker = TaskTracker::new();
    let mx = RwMutex::builder(conn.clone(), "res")
        .ttl(Duration::from_secs(60))
        .task_tracker(tracker.clone())
        .build()
        .unwrap();

    let guards = [mx.read().await.unwrap(), mx.read().await.unwrap()];
    assert_eq!(tracker.len(), 2, "one refresh task per guard");
    drop(guards);
    tracker.close();
    tokio::time::timeout(LIVENESS, tracker.wait())
        .await
        .unwrap();
    assert!(
        !raw::exists(&conn, "res").await,
        "released before the tracker finished"
    );
}

#[tokio::test]
async fn an_unlock_dropped_before_its_reply_still_releases() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::builder(conn.clone(), "res")
        .ttl(Duration::from_secs(30))
        .build()
        .unwrap();
    let guard = mx.write().await.unwrap();
    let token = guard.cancellation_token().clone();
    // The unlock script must be loaded again: its first request gets NOSCRIPT and the
    // resend would come from the dropped future.
    raw::cmd::<()>(&conn, "SCRIPT", &["FLUSH"]).await;
    let mut unlock = Box::pin(guard.unlock());
    assert!(futures_util::poll!(unlock.as_mut()).is_pending());
    drop(unlock);
    assert!(token.is_cancelled());
    assert!(
        eventually(|| async { !raw::exists(&conn, "res").await }).await,
        "released in the background, not left for the 30 s TTL"
    );
}
