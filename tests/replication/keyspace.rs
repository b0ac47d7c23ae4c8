//! Feature `sentinel`: waiting on keyspace notifications behind Sentinel
//! (`Notifier::sentinel(..).keyspace_events()`), on a primary with 2 replicas and 3
//! Sentinels (`tests/common/sentinel.rs`): a Go writer's silent `DEL` on the primary
//! wakes a waiter at once, well before a probe or its fallback timer; a primary with
//! them off is named by `check_keyspace_events`.
#![cfg(feature = "sentinel")]

use std::time::Duration;

use crate::common::go_peer::GoPeer;
use crate::common::raw::{self, subscribers};
use crate::common::sentinel::Sentinels;
use crate::common::{eventually, LIVENESS};
use redismutex::{Error, Notifier, RwMutex, SentinelConnection};
use tokio::time::Instant;

/// A 10 s TTL: a waiter's fallback timer is then 5 s, and the first sleep on a key never
/// heard from is 750 ms or more, so a wake-up within [`PROMPT`] of the release is the
/// keyspace notification.
const TTL: Duration = Duration::from_secs(10);
/// How soon after the Go holder's release a waiter woken by its notification has the lock.
const PROMPT: Duration = Duration::from_millis(150);
/// How long the Go holder holds once the waiter is subscribed.
const GO_HOLDS: Duration = Duration::from_millis(300);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_go_writers_silent_del_on_the_primary_wakes_a_sentinel_keyspace_waiter_at_once() {
    let deployment = Sentinels::start();
    let primary = deployment.server(deployment.primary()).conn().await;
    raw::cmd::<()>(
        &primary,
        "CONFIG",
        &["SET", "notify-keyspace-events", "Kgx"],
    )
    .await;
    let go = GoPeer::new(primary.clone(), 60_000);
    let go_id = GoPeer::new_id();
    assert_eq!(go.write("jobs", &go_id, false).await, None);

    let notifier = Notifier::sentinel(deployment.sentinel_client()).keyspace_events();
    notifier.check_keyspace_events().await.unwrap();
    let mx = RwMutex::builder(
        SentinelConnection::new(deployment.sentinel_client()),
        "jobs",
    )
    .ttl(TTL)
    .notifier(notifier)
    .build()
    .unwrap();
    let waiter = tokio::spawn(async move {
        let guard = mx.write().await.unwrap();
        (Instant::now(), guard)
    });
    assert!(
        eventually(|| async {
            subscribers(&primary, "jobs:released").await == 1
                && subscribers(&primary, "__keyspace@0__:jobs").await == 1
        })
        .await,
        "jobs:released and __keyspace@0__:jobs subscribed on the primary"
    );

    tokio::time::sleep(GO_HOLDS).await;
    assert!(!waiter.is_finished(), "the Go writer holds the lock");
    let released = Instant::now();
    go.unlock("jobs", &go_id).await;
    let (acquired, guard) = tokio::time::timeout(LIVENESS, waiter)
        .await
        .expect("acquired in time")
        .unwrap();
    let waited = acquired.saturating_duration_since(released);
    assert!(waited < PROMPT, "in {waited:?} after the Go DEL");
    assert!(guard.unlock().await.unwrap());
}

#[tokio::test]
async fn a_primary_with_keyspace_events_off_is_named_by_the_check() {
    let deployment = Sentinels::start();
    let server = deployment.server(deployment.primary());
    raw::cmd::<()>(
        &server.conn().await,
        "CONFIG",
        &["SET", "notify-keyspace-events", ""],
    )
    .await;
    let off = server.port();
    let notifier = Notifier::sentinel(deployment.sentinel_client()).keyspace_events();
    match notifier.check_keyspace_events().await {
        Err(Error::KeyspaceEvents { node, reason, .. }) => {
            assert!(node.ends_with(&format!(":{off}")), "{node}, not {off}");
            assert!(reason.contains("notify-keyspace-events Kgx"), "{reason}");
        }
        other => panic!("expected KeyspaceEvents on {off}, got {other:?}"),
    }
}
