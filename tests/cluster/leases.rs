//! Leases on a real Redis Cluster: a detached lock and a detached set attach on the
//! master of their slot under a new id, kept by the attaching handle past several TTLs,
//! and release by lease; a lease this handle cannot use (no hash tag, keys in two slots)
//! is refused before anything is sent.
#![cfg(feature = "cluster")]

use std::time::Duration;

use crate::common::cluster::{slot, Cluster};
use redis::cluster_async::ClusterConnection;
use redismutex::{Error, Lease, RwMutex};

/// A renewal every 200 ms.
const TTL: Duration = Duration::from_millis(400);

async fn mutex(cluster: &Cluster, ttl: Duration) -> RwMutex<ClusterConnection> {
    RwMutex::builder(cluster.conn().await, "job")
        .hash_tag_keys(true)
        .ttl(ttl)
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_lease_attaches_on_its_slots_master_and_an_unusable_one_is_refused() {
    let cluster = Cluster::start();
    let here = mutex(&cluster, Duration::from_secs(10)).await;
    let there = mutex(&cluster, TTL).await;
    let tag = cluster.name_on_master(1, "acct");
    let (one, two) = (format!("{tag}:1"), format!("{tag}:2"));
    let key = format!("job:{one}");
    let node = cluster.node_conn(cluster.master_of_slot(slot(&key))).await;
    let get = |key: String| {
        let mut node = node.clone();
        async move {
            let value: Option<String> = redis::cmd("GET")
                .arg(&key)
                .query_async(&mut node)
                .await
                .unwrap();
            value
        }
    };

    let lease = here.write().key(&one).await.unwrap().detach();
    let guard = there
        .attach_write(&lease.to_string().parse().unwrap())
        .await
        .unwrap();
    assert_ne!(guard.id(), lease.id());
    assert_eq!(get(key.clone()).await.as_deref(), Some(guard.id()));
    let set = here
        .lock_all()
        .write([two.as_str()])
        .await
        .unwrap()
        .detach();
    let attached_set = there.attach_all(&set).await.unwrap();
    tokio::time::sleep(TTL * 3).await;
    assert!(!guard.is_cancelled() && !attached_set.is_cancelled());
    assert!(guard.refreshes() >= 3, "{}", guard.refreshes());
    assert!(guard.unlock().await.unwrap());
    assert!(attached_set.unlock().await.unwrap());
    assert_eq!(get(key).await, None);

    let held = here.read().key(&one).await.unwrap().detach();
    assert!(there.renew(&held).await.unwrap());
    assert!(there.release(&held).await.unwrap());
    assert!(!there.release(&held).await.unwrap());

    let id = "0123456789abcdef0123456789abcdef";
    let untagged: Lease = format!("redismutex-lease:1:{id}:w:1:{}", hex::encode("job:1"))
        .parse()
        .unwrap();
    let err = there.attach_write(&untagged).await.unwrap_err();
    assert!(
        matches!(err, Error::InvalidKey { ref key, .. } if key == "job:1"),
        "{err}"
    );
    let (a, b) = (
        cluster.name_on_master(0, "a"),
        cluster.name_on_master(2, "b"),
    );
    let across: Lease = format!(
        "redismutex-lease:1:{id}:w:1:{},w:1:{}",
        hex::encode(format!("job:{a}")),
        hex::encode(format!("job:{b}"))
    )
    .parse()
    .unwrap();
    let err = there.attach_all(&across).await.unwrap_err();
    assert!(matches!(err, Error::CrossSlot { .. }), "{err}");
}
