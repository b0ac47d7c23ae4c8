//! Upgradable reads on a real Redis Cluster, with hash-tagged keys on every master: the
//! upgrader key lives in the lock key's slot (on the master that serves it), a plain
//! reader shares the lock and writers stay out, and a waiting upgrade is woken by the
//! last other reader's release message (sharded Pub/Sub, or classic on Redis 6.2), not by
//! its fallback timer.
#![cfg(feature = "cluster")]

use std::time::{Duration, Instant};

use crate::common::cluster::{slot, Cluster};
use crate::common::cluster_pubsub::{self, subscribed};
use crate::common::{eventually, LIVENESS};
use redis::cluster_async::ClusterConnection;
use redismutex::{Notifier, RwMutex};

/// `cmd key` through the cluster connection (routed to the key's slot).
async fn query<T: redis::FromRedisValue>(conn: &ClusterConnection, cmd: &str, key: &str) -> T {
    redis::cmd(cmd)
        .arg(key)
        .query_async(&mut conn.clone())
        .await
        .unwrap_or_else(|err| panic!("{cmd} {key}: {err}"))
}

/// A mutex `up` on `cluster` with tagged keys, a 30 s TTL (its fallback timer, 15 s, is
/// past LIVENESS) and a cluster notifier, on a connection of its own.
async fn tagged(cluster: &Cluster) -> RwMutex<ClusterConnection> {
    RwMutex::builder(cluster.conn().await, "up")
        .hash_tag_keys(true)
        .ttl(Duration::from_secs(30))
        .notifier(Notifier::cluster(cluster.client()))
        .build()
        .unwrap()
}

#[tokio::test]
async fn an_upgrade_on_every_master_keeps_its_slot_and_is_woken_by_the_release_message() {
    eprintln!("release notifications by {}", cluster_pubsub::kind());
    let cluster = Cluster::start();
    let conn = cluster.conn().await;
    let mx = tagged(&cluster).await;
    let others = tagged(&cluster).await;
    let mut woken = Vec::new();
    for i in 0..3 {
        let name = cluster.name_on_master(i, "k");
        let tag = name.trim_matches(|c| c == '{' || c == '}').to_owned();
        let lock_key = format!("up:{{{tag}}}");
        let upgrader = format!("{lock_key}:upgrader");
        let intent = format!("{lock_key}:lock-intent");
        let channel = format!("{lock_key}:released");
        let master = cluster.master_of_slot(slot(&lock_key));
        assert_eq!(master, cluster.masters()[i].port);
        assert_eq!(slot(&upgrader), slot(&lock_key));

        let upgradable = mx.upgradable_read().key(&tag).await.unwrap();
        assert_eq!(upgradable.key(), lock_key);
        // On the master of the lock key's slot itself, beside the readers' set.
        let mut node = cluster.node_conn(master).await;
        let stored: Option<String> = redis::cmd("GET")
            .arg(&upgrader)
            .query_async(&mut node)
            .await
            .unwrap();
        assert_eq!(stored.as_deref(), Some(upgradable.id()));
        let pttl: i64 = query(&conn, "PTTL", &upgrader).await;
        assert!(pttl > 0 && pttl <= 30_000, "{pttl}");

        let reader = others
            .try_read()
            .key(&tag)
            .await
            .unwrap()
            .expect("a plain reader shares it");
        assert!(others.try_write().key(&tag).await.unwrap().is_none());
        assert!(others
            .try_upgradable_read()
            .key(&tag)
            .await
            .unwrap()
            .is_none());

        let upgrading = tokio::spawn(upgradable.upgrade());
        assert!(eventually(|| async { query::<i64>(&conn, "EXISTS", &intent).await == 1 }).await);
        let listening = eventually(|| subscribed(&cluster, master, &channel, 1)).await;
        assert!(listening, "no subscription to {channel} on {master}");
        assert!(
            others.try_read().key(&tag).await.unwrap().is_none(),
            "joined"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!upgrading.is_finished(), "upgraded beside a reader");

        let reader_token = reader.fencing_token();
        let released = Instant::now();
        assert!(reader.unlock().await.unwrap());
        let writer = tokio::time::timeout(LIVENESS, upgrading)
            .await
            .expect("woken by the reader's release message")
            .unwrap()
            .unwrap();
        woken.push(released.elapsed());
        assert!(writer.fencing_token() > reader_token);
        let holder: Option<String> = query(&conn, "GET", &lock_key).await;
        assert_eq!(holder.as_deref(), Some(writer.id()));
        for gone in [&upgrader, &intent] {
            assert_eq!(query::<i64>(&conn, "EXISTS", gone).await, 0, "{gone} left");
        }
        assert!(others.try_read().key(&tag).await.unwrap().is_none());
        assert!(writer.unlock().await.unwrap());
        assert_eq!(query::<i64>(&conn, "EXISTS", &lock_key).await, 0);
    }
    eprintln!("upgrades woken after the release by: {woken:?}");
}
