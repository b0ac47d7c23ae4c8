//! The semaphore and fair mode on a real Redis Cluster (3 masters, 3 replicas) that each
//! test starts: every key of a semaphore or fair lock (the key, its fence, queue and
//! queue-deadline keys) hashes to one slot and lives on the master that owns it, with a
//! tagged name and with `hash_tag_keys`; the keys of different `.key(..)`s spread over the
//! masters; permit counts, exclusion and arrival order hold across connections; an
//! untagged name is refused for a semaphore as for a mutex; and reentrant guards nest on
//! a cluster as on one server.
#![cfg(feature = "cluster")]

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::cluster::{slot, Cluster};
use crate::common::lost_update::unguarded_increment;
use crate::common::{eventually, join_within, LIVENESS};
use redis::aio::MultiplexedConnection;
use redis::cluster_async::ClusterConnection;
use redismutex::{Error, Notifier, ReadGuard, RwMutex, Semaphore};
use tokio::task::JoinSet;

type CC = ClusterConnection;

/// A connection to each master, to read keys where they live (no redirect).
async fn master_conns(cluster: &Cluster) -> HashMap<u16, MultiplexedConnection> {
    let mut conns = HashMap::new();
    for master in cluster.masters() {
        conns.insert(master.port, cluster.node_conn(master.port).await);
    }
    conns
}

/// Whether `key` exists on the node behind `node`.
async fn exists_on(node: &MultiplexedConnection, key: &str) -> bool {
    redis::cmd("EXISTS")
        .arg(key)
        .query_async::<i64>(&mut node.clone())
        .await
        .unwrap()
        == 1
}

/// Checks that the semaphore or lock key `lock_key` and its fence, queue and
/// queue-deadline keys hash to one slot and all exist on the master that owns it, while a
/// fair waiter is queued; returns that master's port.
async fn all_on_one_master(
    cluster: &Cluster,
    masters: &HashMap<u16, MultiplexedConnection>,
    lock_key: &str,
) -> u16 {
    let owner = cluster.master_of_slot(slot(lock_key));
    let node = &masters[&owner];
    for suffix in ["", ":fence", ":queue", ":queue-deadline"] {
        let key = format!("{lock_key}{suffix}");
        assert_eq!(slot(&key), slot(lock_key), "{key} is in another slot");
        let here = eventually(|| exists_on(node, &key)).await;
        assert!(here, "{key} is not on {owner}, the master of its slot");
    }
    owner
}

#[tokio::test]
async fn semaphore_and_fair_mutex_keys_share_one_slot_on_its_master_and_spread_over_masters() {
    let cluster = Cluster::start();
    let conn = cluster.conn().await;
    let masters = master_conns(&cluster).await;
    let notifier = Notifier::cluster(cluster.client());
    let ttl = Duration::from_secs(10);
    let sem = Semaphore::builder(conn.clone(), "pool", 2)
        .hash_tag_keys(true)
        .fair(true)
        .ttl(ttl)
        .notifier(notifier.clone())
        .build()
        .unwrap();
    let mx = RwMutex::builder(conn.clone(), "line")
        .hash_tag_keys(true)
        .fair(true)
        .ttl(ttl)
        .notifier(notifier.clone())
        .build()
        .unwrap();
    // A tagged name needs no `hash_tag_keys`.
    let tagged = Semaphore::builder(conn.clone(), "{pool}", 2)
        .fair(true)
        .ttl(ttl)
        .build()
        .unwrap();

    let keys: Vec<String> = (0..9).map(|n| n.to_string()).collect();
    let mut used = BTreeSet::new();
    for key in &keys {
        let lock_key = format!("pool:{{{key}}}");
        let first = sem.acquire().key(key).await.unwrap();
        let second = sem.acquire().key(key).await.unwrap();
        assert_eq!(first.key(), lock_key);
        assert!(
            sem.try_acquire().key(key).await.unwrap().is_none(),
            "2 of 2 held"
        );
        let waiting = tokio::spawn({
            let (sem, key) = (sem.clone(), key.clone());
            async move { sem.acquire().key(key).await }
        });
        used.insert(all_on_one_master(&cluster, &masters, &lock_key).await);
        let first_token = first.fencing_token();
        assert!(first.unlock().await.unwrap());
        let third = tokio::time::timeout(LIVENESS, waiting)
            .await
            .expect("the queued waiter gets the freed permit")
            .unwrap()
            .unwrap();
        assert!(second.fencing_token() > first_token);
        assert!(third.fencing_token() > second.fencing_token());
        assert!(second.unlock().await.unwrap());
        assert!(third.unlock().await.unwrap());

        let lock_key = format!("line:{{{key}}}");
        let writer = mx.write().key(key).await.unwrap();
        assert_eq!(writer.key(), lock_key);
        let waiting = tokio::spawn({
            let (mx, key) = (mx.clone(), key.clone());
            async move { mx.read().key(key).await }
        });
        used.insert(all_on_one_master(&cluster, &masters, &lock_key).await);
        assert!(
            mx.try_read().key(key).await.unwrap().is_none(),
            "a reader waits"
        );
        assert!(writer.unlock().await.unwrap());
        let reader = tokio::time::timeout(LIVENESS, waiting)
            .await
            .expect("the queued reader gets the lock")
            .unwrap()
            .unwrap();
        assert!(reader.unlock().await.unwrap());
    }
    assert_eq!(used.len(), 3, "the keys landed on every master");

    let held = tagged.acquire().key("7").await.unwrap();
    assert_eq!(held.key(), "{pool}:7");
    assert_eq!(slot(held.key()), slot("{pool}"));
    let _second = tagged.acquire().key("7").await.unwrap();
    let waiting = tokio::spawn({
        let tagged = tagged.clone();
        async move { tagged.acquire().key("7").await }
    });
    all_on_one_master(&cluster, &masters, "{pool}:7").await;
    assert!(held.unlock().await.unwrap());
    let permit = tokio::time::timeout(LIVENESS, waiting)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(permit.unlock().await.unwrap());
}

/// Tasks on three cluster connections take permits of a fair semaphore of 2 on three
/// keys (one per master) and the write lock of a fair mutex with a non-atomic counter:
/// never more than 2 holders of a key, 2 reached, and no lost update.
#[tokio::test]
async fn permit_counts_and_exclusion_hold_across_cluster_connections() {
    const TASKS: usize = 12;
    const ROUNDS: usize = 8;
    let cluster = Cluster::start();
    let notifier = Notifier::cluster(cluster.client());
    let mut conns = Vec::new();
    for _ in 0..3 {
        conns.push(cluster.conn().await);
    }
    // One key per master.
    let keys: Vec<String> = (0..3).map(|i| cluster.name_on_master(i, "k")).collect();
    let inside: Arc<Vec<AtomicUsize>> = Arc::new((0..3).map(|_| AtomicUsize::new(0)).collect());
    let most: Arc<Vec<AtomicUsize>> = Arc::new((0..3).map(|_| AtomicUsize::new(0)).collect());
    let mut tasks = JoinSet::new();
    for task in 0..TASKS {
        let conn: CC = conns[task % 3].clone();
        let sem = Semaphore::builder(conn.clone(), "pool", 2)
            .hash_tag_keys(true)
            .fair(true)
            .notifier(notifier.clone())
            .build()
            .unwrap();
        let mx = RwMutex::builder(conn.clone(), "count")
            .hash_tag_keys(true)
            .fair(task % 2 == 0)
            .notifier(notifier.clone())
            .build()
            .unwrap();
        let (keys, inside, most) = (keys.clone(), Arc::clone(&inside), Arc::clone(&most));
        tasks.spawn(async move {
            for round in 0..ROUNDS {
                let k = (task + round) % 3;
                let permit = sem.acquire().key(&keys[k]).await.unwrap();
                most[k].fetch_max(
                    inside[k].fetch_add(1, Ordering::SeqCst) + 1,
                    Ordering::SeqCst,
                );
                tokio::time::sleep(Duration::from_millis(3)).await;
                inside[k].fetch_sub(1, Ordering::SeqCst);
                assert!(permit.unlock().await.unwrap());

                let guard = mx.write().key(&keys[k]).await.unwrap();
                unguarded_increment(&conn, &format!("counter:{}", keys[k])).await;
                assert!(guard.unlock().await.unwrap(), "held to the end");
            }
        });
    }
    join_within(&mut tasks, Duration::from_secs(60), "every task finishes").await;
    let most: Vec<usize> = most.iter().map(|n| n.load(Ordering::SeqCst)).collect();
    println!("most holders at once per key: {most:?}");
    assert!(most.iter().all(|&n| n <= 2), "{most:?}");
    assert!(
        most.contains(&2),
        "2 permits were never both in use: {most:?}"
    );
    let conn = cluster.conn().await;
    let mut total = 0;
    for key in &keys {
        let count: Option<usize> = redis::cmd("GET")
            .arg(format!("counter:{key}"))
            .query_async(&mut conn.clone())
            .await
            .unwrap();
        total += count.unwrap_or(0);
    }
    assert_eq!(total, TASKS * ROUNDS, "lost updates");
}

/// Fair writers on three cluster connections, arriving one by one on a key of each
/// master, acquire in arrival order.
#[tokio::test]
async fn fair_writers_on_a_cluster_acquire_in_arrival_order() {
    const WAITERS: usize = 6;
    let cluster = Cluster::start();
    let notifier = Notifier::cluster(cluster.client());
    let mut conns = Vec::new();
    for _ in 0..3 {
        conns.push(cluster.conn().await);
    }
    let made = |i: usize| {
        RwMutex::builder(conns[i % 3].clone(), "line")
            .hash_tag_keys(true)
            .fair(true)
            .notifier(notifier.clone())
            .build()
            .unwrap()
    };
    for master in 0..3 {
        let key = cluster.name_on_master(master, "q");
        let queue = format!("line:{key}:queue");
        let holder = made(0).write().key(&key).await.unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = JoinSet::new();
        for i in 0..WAITERS {
            let (mx, key, order) = (made(i), key.clone(), Arc::clone(&order));
            tasks.spawn(async move {
                let guard = mx.write().key(key).await.unwrap();
                order.lock().unwrap().push(i);
                tokio::time::sleep(Duration::from_millis(5)).await;
                assert!(guard.unlock().await.unwrap());
            });
            let queued = eventually(|| async {
                redis::cmd("ZCARD")
                    .arg(&queue)
                    .query_async::<usize>(&mut conns[0].clone())
                    .await
                    .unwrap()
                    == i + 1
            })
            .await;
            assert!(queued, "{queue}: waiter {i} did not queue");
        }
        assert!(holder.unlock().await.unwrap());
        join_within(&mut tasks, Duration::from_secs(30), "every waiter acquires").await;
        let order = order.lock().unwrap().clone();
        assert_eq!(order, (0..WAITERS).collect::<Vec<_>>(), "{key}");
    }
}

#[tokio::test]
async fn an_untagged_name_is_refused_for_a_semaphore_and_a_fair_mutex() {
    let cluster = Cluster::start();
    let conn = cluster.conn().await;

    let err = Semaphore::builder(conn.clone(), "pool", 2)
        .build()
        .unwrap_err();
    assert!(
        matches!(err, Error::InvalidOptions(ref m) if m.contains("\"pool\"") && m.contains("CROSSSLOT")),
        "{err}"
    );
    let err = Semaphore::builder(conn.clone(), "pool", 2)
        .fair(true)
        .build()
        .unwrap_err();
    assert!(matches!(err, Error::InvalidOptions(_)), "{err}");
    let err = RwMutex::builder(conn.clone(), "line")
        .fair(true)
        .build()
        .unwrap_err();
    assert!(matches!(err, Error::InvalidOptions(_)), "{err}");
    // `new` cannot fail: every acquire reports it, at once.
    let sem = Semaphore::new(conn.clone(), "pool", 2);
    for result in [
        tokio::time::timeout(LIVENESS, sem.acquire().key("42"))
            .await
            .unwrap()
            .map(drop),
        tokio::time::timeout(LIVENESS, sem.try_acquire().key("42"))
            .await
            .unwrap()
            .map(drop),
    ] {
        assert!(
            matches!(result, Err(Error::InvalidOptions(_))),
            "{result:?}"
        );
    }
    // A key that defeats the tag that tagging would add is refused by name.
    let tagging = Semaphore::builder(conn.clone(), "pool", 2)
        .hash_tag_keys(true)
        .build()
        .unwrap();
    match tagging.try_acquire().key("}x").await {
        Err(Error::InvalidKey { key, reason, .. }) => {
            assert_eq!(key, "pool:{}x}");
            assert!(reason.contains("no hash tag"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(cluster.key_count().await, 0, "nothing was sent");
}

#[tokio::test]
async fn reentrant_guards_nest_on_a_cluster_and_a_write_in_a_read_is_refused() {
    let cluster = Cluster::start();
    let conn = cluster.conn().await;
    let mx = RwMutex::builder(conn.clone(), "nest")
        .hash_tag_keys(true)
        .reentrant(true)
        .build()
        .unwrap();
    let stranger = RwMutex::builder(conn.clone(), "nest")
        .hash_tag_keys(true)
        .build()
        .unwrap();

    let outer = mx.write().key("a").await.unwrap();
    let nested_write = tokio::time::timeout(LIVENESS, mx.write().key("a"))
        .await
        .expect("a write nests in the task's write at once")
        .unwrap();
    let nested_read: ReadGuard = mx.try_read().key("a").await.unwrap().expect("nested");
    let nested = [
        (
            nested_write.key(),
            nested_write.id(),
            nested_write.fencing_token(),
        ),
        (
            nested_read.key(),
            nested_read.id(),
            nested_read.fencing_token(),
        ),
    ];
    for (key, id, fencing_token) in nested {
        assert_eq!(key, "nest:{a}");
        assert_eq!(id, outer.id());
        assert_eq!(fencing_token, outer.fencing_token());
    }
    drop(nested_write);
    drop(nested_read);
    assert!(
        stranger.try_write().key("a").await.unwrap().is_none(),
        "the nested guards going left the outer lock held"
    );
    assert!(outer.unlock().await.unwrap());
    assert!(stranger.try_write().key("a").await.unwrap().is_some());

    let reader = mx.read().key("b").await.unwrap();
    match mx.try_write().key("b").await {
        Err(Error::WouldDeadlock { key, .. }) => assert_eq!(key, "nest:{b}"),
        other => panic!("a write in the task's read: {other:?}"),
    }
    drop(reader);
}
