//! The refresher and one guard: it keeps the guard's lock, notices a lost one, and
//! fires the token of one it cannot renew in time.

use std::time::Duration;

use crate::common;
use crate::common::{raw, RedisServer, LIVENESS};
use redismutex::CancelReason;

#[tokio::test]
async fn refresh_keeps_a_400ms_lock_for_several_ttls() {
    common::init_tracing();
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, "lease", Duration::from_millis(400));

    let writer = mx.write().await.unwrap();
    tokio::time::sleep(Duration::from_millis(2000)).await; // five TTLs
    assert!(!writer.is_cancelled(), "{:?}", writer.cancel_reason());
    assert_eq!(raw::get(&conn, "lease").await.as_deref(), Some(writer.id()));
    assert!(raw::pttl(&conn, "lease").await > 0);
    assert!(writer.unlock().await.unwrap());

    let reader = mx.read().key("r").await.unwrap();
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert!(!reader.is_cancelled(), "{:?}", reader.cancel_reason());
    assert_eq!(
        raw::members(&conn, "lease:r").await,
        vec![reader.id().to_string()]
    );
    assert!(reader.unlock().await.unwrap());
}

#[tokio::test]
async fn loss_is_detected_after_the_key_is_deleted() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, "lease", Duration::from_millis(400));

    let guard = mx.write().await.unwrap();
    assert_eq!(guard.cancel_reason(), None);
    raw::cmd::<i64>(&conn, "DEL", &["lease"]).await;
    tokio::time::timeout(LIVENESS, guard.cancelled())
        .await
        .unwrap();
    assert_eq!(guard.cancel_reason(), Some(CancelReason::Lost));
    assert!(!guard.unlock().await.unwrap(), "a lost lock reports false");
}

#[tokio::test]
async fn loss_is_detected_when_another_holder_took_over() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, "lease", Duration::from_millis(400));

    let guard = mx.write().await.unwrap();
    raw::cmd::<()>(&conn, "SET", &["lease", "someone-else", "PX", "60000"]).await;
    tokio::time::timeout(LIVENESS, guard.cancelled())
        .await
        .unwrap();
    assert_eq!(guard.cancel_reason(), Some(CancelReason::Lost));
    assert!(!guard.unlock().await.unwrap());
    assert_eq!(
        raw::get(&conn, "lease").await.as_deref(),
        Some("someone-else")
    );
}

#[tokio::test]
async fn the_token_fires_while_the_server_is_paused() {
    common::init_tracing();
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, "lease", Duration::from_millis(400));

    let guard = mx.write().await.unwrap();
    let child = guard.cancellation_token().child_token();
    server.pause();
    let fired = tokio::time::timeout(LIVENESS, child.cancelled()).await;
    server.resume();
    assert!(
        fired.is_ok(),
        "the token did not fire while Redis was unreachable"
    );
    assert_eq!(guard.cancel_reason(), Some(CancelReason::Expired));
}

#[tokio::test]
async fn a_reader_never_shortens_the_set_ttl() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let long = common::mutex(&conn, "lease", Duration::from_millis(10_000));
    let short = common::mutex(&conn, "lease", Duration::from_millis(1_000));

    let _a = long.read().await.unwrap();
    let _b = short.read().await.unwrap();
    assert!(
        raw::pttl(&conn, "lease").await > 8_000,
        "rlock shortened the TTL"
    );
    tokio::time::sleep(Duration::from_millis(700)).await; // the short reader refreshed
    assert!(
        raw::pttl(&conn, "lease").await > 8_000,
        "refresh shortened the TTL"
    );
    assert_eq!(raw::members(&conn, "lease").await.len(), 2);
}

#[tokio::test]
async fn refresh_leaves_a_key_of_a_foreign_type_untouched() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, "lease", Duration::from_millis(400));

    let guard = mx.write().await.unwrap();
    raw::cmd::<i64>(&conn, "DEL", &["lease"]).await;
    raw::cmd::<i64>(&conn, "HSET", &["lease", "field", "value"]).await;
    tokio::time::timeout(LIVENESS, guard.cancelled())
        .await
        .unwrap();
    assert_eq!(guard.cancel_reason(), Some(CancelReason::Lost));
    assert_eq!(raw::key_type(&conn, "lease").await, "hash");
    assert_eq!(
        raw::pttl(&conn, "lease").await,
        -1,
        "refresh put a TTL on a foreign key"
    );
    let value: String = raw::cmd(&conn, "HGET", &["lease", "field"]).await;
    assert_eq!(value, "value");
}

/// A frozen process (here: the runtime's only thread blocked past the deadline, so the
/// guard's background task cannot run) must not see its lock as held when it wakes.
#[tokio::test(flavor = "current_thread")]
async fn a_look_right_after_a_freeze_sees_the_deadline_passed() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, "lease", Duration::from_millis(200));

    let guard = mx.write().await.unwrap();
    let token = guard.cancellation_token().child_token();
    assert!(!guard.is_cancelled());
    let deadline = guard.valid_until();
    std::thread::sleep(Duration::from_millis(400)); // two TTLs; nothing else runs
    assert!(tokio::time::Instant::now() > deadline);
    assert!(
        guard.is_cancelled(),
        "a frozen holder reported the lock held past its deadline"
    );
    assert_eq!(guard.cancel_reason(), Some(CancelReason::Expired));
    assert!(token.is_cancelled(), "children fire with the token");
    tokio::time::timeout(LIVENESS, guard.cancelled())
        .await
        .unwrap();
}

#[tokio::test]
async fn valid_until_moves_forward_with_each_refresh() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, "lease", Duration::from_millis(400));

    let guard = mx.write().await.unwrap();
    let first = guard.valid_until();
    let ahead = first - tokio::time::Instant::now();
    assert!(ahead <= Duration::from_millis(394), "{ahead:?}");
    tokio::time::sleep(Duration::from_millis(700)).await; // refreshed at 200 and 400 ms
    assert!(guard.valid_until() > first + Duration::from_millis(300));
    assert!(!guard.is_cancelled());
}
