//! Waiting on keyspace notifications on a Redis Cluster (`Notifier::cluster(..)
//! .keyspace_events()`): each waited lock key's keyspace channel is subscribed on the
//! master that serves its slot, where Redis publishes the key's events, so a Go
//! holder's silent `DEL` or its readers' last `SREM` wakes the waiter at once on every
//! master; a master with them off is named by `check_keyspace_events`, and its waiters
//! still get in by their timers.

use std::time::Duration;

use crate::common::cluster::{slot, Cluster};
use crate::common::cluster_pubsub::{classic_subscribers, subscribed};
use crate::common::go_peer::GoPeer;
use crate::common::{eventually, LIVENESS};
use redis::cluster_async::ClusterConnection;
use redismutex::{Error, Notifier, RwMutex, WriteGuard};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// A 10 s TTL: the fallback timer is 5 s, and the first sleep on a key never heard from
/// 750 ms or more, so a wake-up within [`PROMPT`] of a release is the notification.
const TTL: Duration = Duration::from_secs(10);
const PROMPT: Duration = Duration::from_millis(150);
const GO_HOLDS: Duration = Duration::from_millis(300);

/// Sets `notify-keyspace-events` to `flags` on every node (the default is never relied on).
async fn set_keyspace_events(cluster: &Cluster, flags: &str) {
    for node in cluster.nodes() {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("notify-keyspace-events")
            .arg(flags)
            .query_async(&mut cluster.node_conn(node.port).await)
            .await
            .unwrap();
    }
}

fn spawn_writer(mx: &RwMutex<ClusterConnection>) -> JoinHandle<(Instant, WriteGuard)> {
    let mx = mx.clone();
    tokio::spawn(async move {
        let guard = mx.write().await.unwrap();
        (Instant::now(), guard)
    })
}

async fn joined(task: JoinHandle<(Instant, WriteGuard)>) -> (Instant, WriteGuard) {
    tokio::time::timeout(LIVENESS, task)
        .await
        .expect("acquired in time")
        .unwrap()
}

/// Waits until the master serving `lock_key` has the notifier on its release channel
/// and its keyspace channel.
async fn subscribed_on_its_master(cluster: &Cluster, lock_key: &str) {
    let master = cluster.master_of_slot(slot(lock_key));
    let (released, keyspace) = (
        format!("{lock_key}:released"),
        format!("__keyspace@0__:{lock_key}"),
    );
    assert!(
        eventually(|| async {
            subscribed(cluster, master, &released, 1).await
                && classic_subscribers(cluster, master, &keyspace).await == 1
        })
        .await,
        "{released} and {keyspace} subscribed on {master}"
    );
}

#[tokio::test]
async fn a_go_holders_del_or_last_srem_wakes_a_keyspace_waiter_on_every_master() {
    let cluster = Cluster::start();
    set_keyspace_events(&cluster, "Kgx").await;
    let conn = cluster.conn().await;
    let go = GoPeer::new(conn.clone(), 60_000);
    let notifier = Notifier::cluster(cluster.client()).keyspace_events();
    notifier.check_keyspace_events().await.unwrap();
    for master in 0..cluster.masters().len() {
        let name = cluster.name_on_master(master, "ks");
        let mx = RwMutex::builder(conn.clone(), &name)
            .ttl(TTL)
            .notifier(notifier.clone())
            .build()
            .unwrap();

        // A Go writer's DEL.
        let go_id = GoPeer::new_id();
        assert_eq!(go.write(&name, &go_id, false).await, None);
        let waiter = spawn_writer(&mx);
        subscribed_on_its_master(&cluster, &name).await;
        tokio::time::sleep(GO_HOLDS).await;
        go.unlock(&name, &go_id).await;
        let released = Instant::now();
        let (acquired, guard) = joined(waiter).await;
        let waited = acquired.saturating_duration_since(released);
        assert!(waited < PROMPT, "{name}: in {waited:?} after the Go DEL");
        assert!(guard.unlock().await.unwrap());

        // Go readers' last SREM.
        let (first, last) = (GoPeer::new_id(), GoPeer::new_id());
        assert_eq!(go.read(&name, &first).await, None);
        assert_eq!(go.read(&name, &last).await, None);
        let waiter = spawn_writer(&mx);
        subscribed_on_its_master(&cluster, &name).await;
        go.unlock(&name, &first).await;
        tokio::time::sleep(GO_HOLDS).await;
        assert!(
            !waiter.is_finished(),
            "{name}: one Go reader still holds it"
        );
        go.unlock(&name, &last).await;
        let released = Instant::now();
        let (acquired, guard) = joined(waiter).await;
        let waited = acquired.saturating_duration_since(released);
        assert!(waited < PROMPT, "{name}: in {waited:?} after the last SREM");
        assert!(guard.unlock().await.unwrap());
    }
}

#[tokio::test]
async fn a_master_with_keyspace_events_off_is_named_and_its_waiter_gets_in_by_its_timer() {
    let cluster = Cluster::start();
    set_keyspace_events(&cluster, "Kgx").await;
    let off = cluster.masters()[1].port;
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("notify-keyspace-events")
        .arg("")
        .query_async(&mut cluster.node_conn(off).await)
        .await
        .unwrap();
    let notifier = Notifier::cluster(cluster.client()).keyspace_events();
    match notifier.check_keyspace_events().await {
        Err(Error::KeyspaceEvents { node, reason, .. }) => {
            assert!(node.ends_with(&format!(":{off}")), "{node}, not {off}");
            assert!(reason.contains("notify-keyspace-events Kgx"), "{reason}");
        }
        other => panic!("expected KeyspaceEvents on {off}, got {other:?}"),
    }

    let conn = cluster.conn().await;
    let go = GoPeer::new(conn.clone(), 60_000);
    let name = cluster.name_on_master(1, "off");
    let mx = RwMutex::builder(conn.clone(), &name)
        .ttl(Duration::from_secs(2))
        .notifier(notifier)
        .build()
        .unwrap();
    let go_id = GoPeer::new_id();
    assert_eq!(go.write(&name, &go_id, false).await, None);
    let waiter = spawn_writer(&mx);
    tokio::time::sleep(GO_HOLDS).await;
    go.unlock(&name, &go_id).await;
    let (_, guard) = joined(waiter).await;
    assert!(guard.unlock().await.unwrap());
}
