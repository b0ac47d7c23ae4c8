//! Feature `sentinel`: upgradable reads over a `SentinelConnection` on a primary with 2
//! replicas and 3 Sentinels (`tests/common/sentinel.rs`): the upgradable reader and its
//! upgrader key land on the primary, a waiting upgrade is woken by a reader's release
//! through `Notifier::sentinel`, and an upgradable reader acknowledged by a replica
//! (`replicas(1)`) survives a forced failover, then upgrades on the new primary.
#![cfg(feature = "sentinel")]

use std::time::Duration;

use crate::common::sentinel::Sentinels;
use crate::common::{eventually, raw, LIVENESS};
use crate::sentinel::acked_and_notified;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgradable_read_and_its_upgrade_go_through_sentinel() {
    let deployment = Sentinels::start();
    // The fallback timer is 15 s, past LIVENESS: only the release message wakes it.
    let ttl = Duration::from_secs(30);
    let mx = acked_and_notified(&deployment, "up", ttl);
    let others = acked_and_notified(&deployment, "up", ttl);
    let primary = deployment.server(deployment.primary()).conn().await;

    let upgradable = mx.upgradable_read().key("doc").await.unwrap();
    assert_eq!(raw::members(&primary, "up:doc").await, [upgradable.id()]);
    assert_eq!(
        raw::get(&primary, "up:doc:upgrader").await.as_deref(),
        Some(upgradable.id())
    );
    let reader = others.read().key("doc").await.unwrap();
    assert!(others.try_write().key("doc").await.unwrap().is_none());
    assert!(others
        .try_upgradable_read()
        .key("doc")
        .await
        .unwrap()
        .is_none());

    let upgrading = tokio::spawn(upgradable.upgrade());
    assert!(eventually(|| async { raw::exists(&primary, "up:doc:lock-intent").await }).await);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!upgrading.is_finished(), "upgraded beside a reader");
    let reader_token = reader.fencing_token();
    assert!(reader.unlock().await.unwrap());
    let writer = tokio::time::timeout(LIVENESS, upgrading)
        .await
        .expect("woken by the reader's release through the Sentinels")
        .unwrap()
        .unwrap();
    assert!(writer.fencing_token() > reader_token);
    assert_eq!(
        raw::get(&primary, "up:doc").await.as_deref(),
        Some(writer.id())
    );
    assert!(!raw::exists(&primary, "up:doc:upgrader").await);
    assert!(!raw::exists(&primary, "up:doc:lock-intent").await);
    assert!(writer.unlock().await.unwrap());
    assert!(!raw::exists(&primary, "up:doc").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgradable_reader_survives_a_failover_and_upgrades_on_the_new_primary() {
    let mut deployment = Sentinels::start();
    let ttl = Duration::from_secs(6);
    let mx = acked_and_notified(&deployment, "moved", ttl);
    let upgradable = mx.upgradable_read().await.unwrap();
    let read_token = upgradable.fencing_token();

    let old = deployment.primary();
    let new = deployment.fast_sentinel_failover().await;
    assert_ne!(new, old);
    let primary = deployment.server(new).conn().await;
    // Acknowledged by a replica, the readers' set and the upgrader key are on the new
    // primary; the refresher renews both there.
    assert_eq!(raw::members(&primary, "moved").await, [upgradable.id()]);
    assert_eq!(
        raw::get(&primary, "moved:upgrader").await.as_deref(),
        Some(upgradable.id())
    );
    let before = upgradable.refreshes();
    let renewed = async {
        while upgradable.refreshes() < before + 2 && !upgradable.is_cancelled() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(ttl * 2, renewed)
        .await
        .expect("two renewals after the failover");
    assert!(
        !upgradable.is_cancelled(),
        "{:?}",
        upgradable.cancel_reason()
    );
    let pttl = raw::pttl(&primary, "moved:upgrader").await;
    assert!(
        pttl > 0 && pttl <= 6_000,
        "renewed on the new primary: {pttl}"
    );

    let writer = tokio::time::timeout(LIVENESS, upgradable.upgrade())
        .await
        .expect("alone, it upgrades at once")
        .unwrap();
    assert!(writer.fencing_token() > read_token);
    assert_eq!(
        raw::get(&primary, "moved").await.as_deref(),
        Some(writer.id())
    );
    assert!(!raw::exists(&primary, "moved:upgrader").await);
    assert!(writer.unlock().await.unwrap());
    assert!(!raw::exists(&primary, "moved").await);
}
