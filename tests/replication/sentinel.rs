//! Feature `sentinel`: a mutex over a [`SentinelConnection`] on a primary with 2 replicas
//! and 3 Sentinels (`tests/common/sentinel.rs`) follows a failover. After the primary is
//! killed and Sentinel promotes a replica, new requests, the held guard's release and the
//! release notifications reach the new primary without a new mutex; a lock acknowledged by
//! a replica (`replicas(1)`) survives the failover; a request made while no primary is
//! known fails with `Error::NoPrimary` (a try) or keeps trying (a wait); refreshes go on
//! across a forced failover.
#![cfg(feature = "sentinel")]

use std::future::IntoFuture;
use std::time::{Duration, Instant};

use crate::common::sentinel::Sentinels;
use crate::common::{raw, LIVENESS};
use redismutex::{Error, Notifier, RwMutex, SentinelConnection};

/// A mutex named `name` over `SentinelConnection` with `ttl`, acknowledged by a replica
/// and woken by release notifications through the Sentinels.
pub(crate) fn acked_and_notified(
    deployment: &Sentinels,
    name: &str,
    ttl: Duration,
) -> RwMutex<SentinelConnection> {
    RwMutex::builder(SentinelConnection::new(deployment.sentinel_client()), name)
        .ttl(ttl)
        .replicas(1, Duration::from_millis(500))
        .notifier(Notifier::sentinel(deployment.sentinel_client()))
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_primary_is_followed_by_requests_releases_and_notifications() {
    let mut deployment = Sentinels::start();
    // Long enough that the held lock needs no renewal across the failover (4–15 s).
    let mx = acked_and_notified(&deployment, "followed", Duration::from_secs(40));
    let held = mx.write().key("held").await.unwrap();

    let old = deployment.kill_primary();
    // Killed, and no failover yet: a try finds no primary (the Sentinels still name the
    // dead one), within its bound; a wait keeps trying through the failover.
    let started = Instant::now();
    let tried = mx.try_write().key("during").await;
    assert!(matches!(tried, Err(Error::NoPrimary { .. })), "{tried:?}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let waiting = tokio::spawn(
        mx.write()
            .key("during")
            .timeout(Duration::from_secs(40))
            .into_future(),
    );

    let new = deployment.failover().await;
    assert_ne!(new, old);
    let primary = deployment.server(new).conn().await;
    let during = tokio::time::timeout(Duration::from_secs(40), waiting)
        .await
        .expect("the waiting request ends")
        .unwrap()
        .expect("a waiting request keeps trying until a primary is found");
    assert_eq!(
        raw::get(&primary, "followed:during").await.as_deref(),
        Some(during.id())
    );

    // The held lock was acknowledged by a replica, so the new primary has it, and its
    // release reaches the new primary.
    assert_eq!(
        raw::get(&primary, "followed:held").await.as_deref(),
        Some(held.id())
    );
    assert!(!held.is_cancelled());
    assert!(held.unlock().await.unwrap(), "released on the new primary");
    assert!(!raw::exists(&primary, "followed:held").await);

    // A waiter is woken by the release on the new primary, not by its fallback timer
    // (the blocker's PTTL: about 40 s).
    let waiter = tokio::spawn(mx.write().key("during").into_future());
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let released = Instant::now();
    assert!(during.unlock().await.unwrap());
    let woken = tokio::time::timeout(LIVENESS, waiter)
        .await
        .expect("woken")
        .unwrap()
        .unwrap();
    assert!(
        released.elapsed() < Duration::from_secs(2),
        "{:?}",
        released.elapsed()
    );
    assert!(woken.unlock().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_guard_keeps_refreshing_across_forced_failovers() {
    let mut deployment = Sentinels::start();
    let ttl = Duration::from_secs(6);
    let mx = acked_and_notified(&deployment, "refreshed", ttl);
    let guard = mx.write().await.unwrap();
    for failover in 0..2 {
        let new = deployment.fast_sentinel_failover().await;
        let before = guard.refreshes();
        let renewed = async {
            while guard.refreshes() < before + 2 && !guard.is_cancelled() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        };
        tokio::time::timeout(ttl * 2, renewed)
            .await
            .expect("two renewals");
        assert!(
            !guard.is_cancelled(),
            "failover {failover}: {:?}",
            guard.cancel_reason()
        );
        let primary = deployment.server(new).conn().await;
        assert_eq!(
            raw::get(&primary, "refreshed").await.as_deref(),
            Some(guard.id())
        );
        let pttl = raw::pttl(&primary, "refreshed").await;
        assert!(
            pttl > 0 && pttl <= 6_000,
            "renewed on the new primary: {pttl}"
        );
    }
    assert!(guard.unlock().await.unwrap());
}

/// A lease over `SentinelConnection`: a detached write lock attaches on the primary under
/// a new id, is kept past several TTLs by the attaching
/// handle, and the old lease then releases nothing.
#[tokio::test]
async fn a_detached_lock_attaches_through_the_sentinels() {
    let deployment = Sentinels::start();
    let here = acked_and_notified(&deployment, "leased", LIVENESS);
    let ttl = Duration::from_millis(400);
    let there = RwMutex::builder(
        SentinelConnection::new(deployment.sentinel_client()),
        "leased",
    )
    .ttl(ttl)
    .build()
    .unwrap();
    let lease = here.write().key("1").await.unwrap().detach();
    let guard = there.attach_write(&lease).await.unwrap();
    let primary = deployment.server(deployment.primary()).conn().await;
    assert_eq!(
        raw::get(&primary, "leased:1").await.as_deref(),
        Some(guard.id())
    );
    tokio::time::sleep(ttl * 3).await;
    assert!(!guard.is_cancelled(), "{:?}", guard.cancel_reason());
    assert!(
        !there.release(&lease).await.unwrap(),
        "the old id holds nothing"
    );
    assert!(guard.unlock().await.unwrap());
    assert!(!raw::exists(&primary, "leased:1").await);
}

/// Holder identity over `SentinelConnection`: a describing handle's writer is described on
/// the primary, `inspect` through the Sentinels reads it, and the release takes it away.
#[tokio::test]
async fn a_holder_is_described_on_the_primary_through_the_sentinels() {
    let deployment = Sentinels::start();
    let mx = RwMutex::builder(
        SentinelConnection::new(deployment.sentinel_client()),
        "described",
    )
    .ttl(LIVENESS)
    .holder_label("sentinel")
    .build()
    .unwrap();
    let guard = mx.write().key("1").await.unwrap();
    let state = mx.inspect("1").await.unwrap();
    let info = state.holder_info(guard.id()).expect("described");
    assert_eq!(info.label(), Some("sentinel"));
    assert_eq!(info.pid(), std::process::id());
    let primary = deployment.server(deployment.primary()).conn().await;
    assert!(raw::exists(&primary, "described:1:holders").await);
    assert!(guard.unlock().await.unwrap());
    assert!(!raw::exists(&primary, "described:1:holders").await);
}
