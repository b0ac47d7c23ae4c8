//! `Builder::max_hold`: a lock is renewed until, and not past, its cap; its token fires
//! with `CancelReason::MaxHold` then, and the lock is released so a waiter gets in.

use std::time::Duration;

use crate::common::{raw, RedisServer, LIVENESS};
use redismutex::{CancelReason, Error, RwMutex, Semaphore};
use tokio::time::Instant;

const TTL: Duration = Duration::from_millis(400);
const MAX_HOLD: Duration = Duration::from_millis(1500);

#[tokio::test]
async fn a_lock_is_renewed_until_its_cap_then_fires_max_hold_and_is_released() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::builder(conn.clone(), "capped")
        .ttl(TTL)
        .max_hold(MAX_HOLD)
        .build()
        .unwrap();
    let before = Instant::now();
    let guard = mx.write().await.unwrap();
    assert!(guard.valid_until() <= before + MAX_HOLD + Duration::from_millis(50));
    let waiter = {
        let mx = mx.clone();
        tokio::spawn(async move { mx.write().timeout(LIVENESS * 2).await })
    };
    guard.cancelled().await;
    let fired = before.elapsed();
    assert_eq!(guard.cancel_reason(), Some(CancelReason::MaxHold));
    // Held past several TTLs (so renewed), and ended at the cap, not before it.
    assert!(guard.refreshes() >= 2, "{} refreshes", guard.refreshes());
    assert!(
        fired >= MAX_HOLD - Duration::from_millis(50),
        "fired after {fired:?}"
    );
    assert!(fired < MAX_HOLD + LIVENESS, "fired after {fired:?}");
    // The refresher releases it, and the waiter gets in.
    let next = waiter.await.unwrap().unwrap();
    assert_ne!(next.id(), guard.id());
    assert!(next.fencing_token() > guard.fencing_token());
    assert_eq!(raw::get(&conn, "capped").await.as_deref(), Some(next.id()));
    // A guarded write of the capped guard is refused at once.
    let refused = guard.exec::<()>(&redis::pipe()).await;
    assert!(matches!(refused, Err(Error::NotHeld { .. })), "{refused:?}");
    // The refresher's release found the lock still ours: it ended before the server would
    // have let it expire.
    assert!(guard.unlock().await.unwrap());
    next.unlock().await.unwrap();
}

#[tokio::test]
async fn a_permit_and_a_downgraded_guard_keep_the_cap() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let sem = Semaphore::builder(conn.clone(), "capped-pool", 1)
        .ttl(TTL)
        .max_hold(MAX_HOLD)
        .build()
        .unwrap();
    let mx = RwMutex::builder(conn.clone(), "capped-doc")
        .ttl(TTL)
        .max_hold(MAX_HOLD)
        .build()
        .unwrap();
    let before = Instant::now();
    let permit = sem.acquire().await.unwrap();
    let reader = mx.write().await.unwrap().downgrade().await.unwrap();
    assert!(reader.valid_until() <= before + MAX_HOLD + Duration::from_millis(50));
    let (_, _) = tokio::join!(permit.cancelled(), reader.cancelled());
    assert_eq!(permit.cancel_reason(), Some(CancelReason::MaxHold));
    assert_eq!(reader.cancel_reason(), Some(CancelReason::MaxHold));
    // Both are released: the next permit and a writer get in within a bound.
    let next = tokio::time::timeout(LIVENESS, sem.acquire())
        .await
        .unwrap()
        .unwrap();
    let writer = mx.write().timeout(LIVENESS).await.unwrap();
    next.unlock().await.unwrap();
    writer.unlock().await.unwrap();
}

#[tokio::test]
async fn without_a_cap_a_lock_outlives_what_the_cap_would_be() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::builder(conn.clone(), "uncapped")
        .ttl(TTL)
        .build()
        .unwrap();
    let guard = mx.write().await.unwrap();
    tokio::time::sleep(MAX_HOLD + TTL).await;
    assert!(!guard.is_cancelled(), "{:?}", guard.cancel_reason());
    assert!(guard.unlock().await.unwrap());
}
