//! Holder identity on a real Redis Cluster: a writer's, each reader's, a permit's and a
//! set's descriptions in `<lock key>:holders`, on the master of the lock key's slot (the
//! same hash tag), written in the same request as the attempt also after every node's
//! script cache was flushed (`NOSCRIPT` inside the pipeline), and gone after a release
//! and a forced release.
#![cfg(feature = "cluster")]

use std::time::Duration;

use crate::common::cluster::{slot, Cluster};
use redis::cluster_async::ClusterConnection;
use redismutex::{LockState, RwMutex, Semaphore};

const TTL: Duration = Duration::from_secs(30);

/// How many descriptions `<lock>:holders` holds, read on the master serving `lock`.
async fn described(cluster: &Cluster, lock: &str) -> i64 {
    let holders = format!("{lock}:holders");
    assert_eq!(slot(&holders), slot(lock), "one slot");
    let mut node = cluster.node_conn(cluster.master_of_slot(slot(lock))).await;
    redis::cmd("HLEN")
        .arg(&holders)
        .query_async(&mut node)
        .await
        .unwrap()
}

#[track_caller]
fn assert_ours(state: &LockState, id: &str) {
    let info = state
        .holder_info(id)
        .unwrap_or_else(|| panic!("no description of {id}: {state:?}"));
    assert_eq!(info.pid(), std::process::id());
    assert_eq!(info.label(), Some("cluster"));
}

#[tokio::test]
async fn holders_are_described_on_the_slots_master_and_leave_with_their_holds() {
    let cluster = Cluster::start();
    let conn: ClusterConnection = cluster.conn().await;
    let mx = RwMutex::builder(conn.clone(), "{desc}")
        .ttl(TTL)
        .holder_label("cluster")
        .build()
        .unwrap();
    // A flushed script cache: the attempt and the description both get NOSCRIPT in the
    // pipeline, and are sent again.
    cluster.script_flush_all().await;
    for round in ["after a flush", "cached", "fast path"] {
        let writer = mx.write().key("w").await.unwrap();
        assert_ours(&mx.inspect("w").await.unwrap(), writer.id());
        assert_eq!(described(&cluster, "{desc}:w").await, 1, "{round}");
        writer.unlock().await.unwrap();
        assert_eq!(described(&cluster, "{desc}:w").await, 0, "{round}");
    }

    let readers = [
        mx.read().key("r").await.unwrap(),
        mx.read().key("r").await.unwrap(),
    ];
    let state = mx.inspect("r").await.unwrap();
    for reader in &readers {
        assert_ours(&state, reader.id());
    }
    assert_eq!(described(&cluster, "{desc}:r").await, 2);
    assert!(mx.force_unlock("r").await.unwrap());
    assert_eq!(described(&cluster, "{desc}:r").await, 0);
    drop(readers);

    let set = mx.lock_all().write(["a"]).read(["b"]).await.unwrap();
    for key in ["a", "b"] {
        assert_ours(&mx.inspect(key).await.unwrap(), set.id());
    }
    set.unlock().await.unwrap();
    assert_eq!(described(&cluster, "{desc}:a").await, 0);

    let sem = Semaphore::builder(conn, "{pool}", 2)
        .ttl(TTL)
        .holder_label("cluster")
        .build()
        .unwrap();
    let permit = sem.acquire().await.unwrap();
    assert_ours(&sem.inspect("").await.unwrap(), permit.id());
    permit.unlock().await.unwrap();
    assert_eq!(described(&cluster, "{pool}").await, 0);
}
