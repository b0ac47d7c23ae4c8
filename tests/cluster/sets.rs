//! Sets (`lock_all`) on a real Redis Cluster (3 masters, 3 replicas): a set whose keys
//! share a hash tag is taken in one script on the master serving that slot, on every
//! master, whether the tag is in the keys (with `hash_tag_keys`) or in the mutex's name;
//! its `exec` runs there; a waiting set is woken by a release message; a set across slots
//! is refused with `Error::CrossSlot` before any script is sent anywhere.
#![cfg(feature = "cluster")]

use std::collections::BTreeMap;
use std::time::Duration;

use crate::common::cluster::{slot, Cluster};
use crate::common::LIVENESS;
use redis::aio::MultiplexedConnection;
use redis::cluster_async::ClusterConnection;
use redismutex::{Error, Notifier, RwMutex};

/// Long enough that no renewal runs during a test, and that the fallback timer of a
/// waiter (half of it) is past [`LIVENESS`].
const TTL: Duration = Duration::from_secs(30);

/// A mutex `name` on `cluster`, with `hash_tag_keys` as `tagging` says, a 30 s TTL and
/// a cluster notifier, on a connection of its own.
async fn mutex(cluster: &Cluster, name: &str, tagging: bool) -> RwMutex<ClusterConnection> {
    RwMutex::builder(cluster.conn().await, name)
        .hash_tag_keys(tagging)
        .ttl(TTL)
        .notifier(Notifier::cluster(cluster.client()))
        .build()
        .unwrap()
}

/// `cmd key` on `node` (a plain connection: no redirect).
async fn on_node<T: redis::FromRedisValue>(
    node: &MultiplexedConnection,
    cmd: &str,
    key: &str,
) -> T {
    redis::cmd(cmd)
        .arg(key)
        .query_async(&mut node.clone())
        .await
        .unwrap_or_else(|err| panic!("{cmd} {key}: {err}"))
}

/// How many `EVALSHA`s and `EVAL`s each master was sent (run, failed or rejected), from
/// `INFO commandstats`.
async fn scripts_sent(cluster: &Cluster) -> BTreeMap<u16, u64> {
    let mut sent = BTreeMap::new();
    for master in cluster.masters() {
        let node = cluster.node_conn(master.port).await;
        let info: String = on_node(&node, "INFO", "commandstats").await;
        let mut total = 0;
        for command in ["evalsha", "eval"] {
            let prefix = format!("cmdstat_{command}:");
            let Some(line) = info.lines().find_map(|line| line.strip_prefix(&prefix)) else {
                continue;
            };
            for field in ["calls", "rejected_calls"] {
                total += line
                    .split(',')
                    .find_map(|pair| pair.strip_prefix(field)?.strip_prefix('='))
                    .map_or(0, |n| n.parse::<u64>().unwrap());
            }
        }
        sent.insert(master.port, total);
    }
    sent
}

/// On each master, a set of two write keys and a read key tagged `{acctN}` (a tag the
/// master serves): every key is stored on that master, as a single lock stores it;
/// single locks elsewhere see it; `exec` runs on the tag's data there; release clears
/// every key.
#[tokio::test]
async fn a_set_of_tagged_keys_lives_on_its_slots_master_and_execs_there() {
    let cluster = Cluster::start();
    let mx = mutex(&cluster, "bank", true).await;
    let others = mutex(&cluster, "bank", true).await;
    for (i, master) in cluster.masters().into_iter().enumerate() {
        let tag = cluster.name_on_master(i, "acct");
        let (one, two, rates) = (
            format!("{tag}:1"),
            format!("{tag}:2"),
            format!("{tag}:rates"),
        );
        let set = mx
            .lock_all()
            .write([one.as_str(), two.as_str()])
            .read([rates.as_str()])
            .await
            .unwrap();
        let lock_keys: Vec<&str> = set.lock_keys().collect();
        let expected = [
            format!("bank:{one}"),
            format!("bank:{two}"),
            format!("bank:{rates}"),
        ];
        assert_eq!(
            lock_keys, expected,
            "keys already tagged are used as they are"
        );
        for key in &expected {
            assert_eq!(cluster.master_of_slot(slot(key)), master.port, "{key}");
        }
        let node = cluster.node_conn(master.port).await;
        for key in &expected[..2] {
            let holder: Option<String> = on_node(&node, "GET", key).await;
            assert_eq!(holder.as_deref(), Some(set.id()), "{key}");
        }
        let readers: Vec<String> = on_node(&node, "SMEMBERS", &expected[2]).await;
        assert_eq!(readers, [set.id()]);
        let fence: Option<u64> = on_node(&node, "GET", &format!("{}:fence", expected[0])).await;
        assert_eq!(fence, set.fencing_token(&one));

        assert!(others.try_write().key(&one).await.unwrap().is_none());
        assert!(others.try_read().key(&two).await.unwrap().is_none());
        let reader = others.try_read().key(&rates).await.unwrap();
        assert!(reader.expect("shares the read key").unlock().await.unwrap());

        let data = format!("{tag}:balance");
        let mut pipe = redis::pipe();
        pipe.cmd("INCR").arg(&data).cmd("INCR").arg(&data);
        let (first, second): (i64, i64) = set.exec(&pipe).await.unwrap();
        assert_eq!((first, second), (1, 2));
        let stored: Option<i64> = on_node(&node, "GET", &data).await;
        assert_eq!(stored, Some(2), "exec ran on the slot's master");

        assert!(set.unlock().await.unwrap());
        for key in &expected {
            assert_eq!(on_node::<i64>(&node, "EXISTS", key).await, 0, "{key} left");
        }
    }
}

/// A mutex whose name carries the tag (`{acct}`, no `hash_tag_keys`): its lock keys
/// `{acct}:1`, `{acct}:2` share a slot, and a set over them is taken and released.
#[tokio::test]
async fn a_set_under_a_tagged_mutex_name_is_taken_whole() {
    let cluster = Cluster::start();
    let conn = cluster.conn().await;
    let mx = mutex(&cluster, "{acct}", false).await;
    let set = mx.lock_all().write(["1", "2"]).read(["3"]).await.unwrap();
    assert_eq!(
        set.lock_keys().collect::<Vec<_>>(),
        ["{acct}:1", "{acct}:2", "{acct}:3"]
    );
    let holder: Option<String> = redis::cmd("GET")
        .arg("{acct}:2")
        .query_async(&mut conn.clone())
        .await
        .unwrap();
    assert_eq!(holder.as_deref(), Some(set.id()));
    assert!(mx.try_lock_all().write(["2"]).await.unwrap().is_none());
    assert!(set.unlock().await.unwrap());
    let left: i64 = redis::cmd("EXISTS")
        .arg("{acct}:1")
        .arg("{acct}:2")
        .arg("{acct}:3")
        .query_async(&mut conn.clone())
        .await
        .unwrap();
    assert_eq!(left, 0);
    let again = mx.try_lock_all().write(["2", "1"]).await.unwrap();
    assert!(again.expect("free again").unlock().await.unwrap());
}

/// A writer holds one key of a tagged set; the set waits (taking nothing) and is woken by
/// the writer's release message (sharded Pub/Sub, or classic on Redis 6.2): with a 30 s
/// TTL its fallback timer would be too late.
#[tokio::test]
async fn a_waiting_set_is_woken_by_a_release_on_the_cluster() {
    let cluster = Cluster::start();
    let conn = cluster.conn().await;
    let mx = mutex(&cluster, "bank", true).await;
    let writer = mutex(&cluster, "bank", true).await;
    let held = writer.write().key("{acct}:2").await.unwrap();

    let waiting = tokio::spawn({
        let mx = mx.clone();
        async move { mx.lock_all().write(["{acct}:1", "{acct}:2"]).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "taken beside a writer");
    let exists: i64 = redis::cmd("EXISTS")
        .arg("bank:{acct}:1")
        .query_async(&mut conn.clone())
        .await
        .unwrap();
    assert_eq!(exists, 0, "a key of the set was taken alone");

    assert!(held.unlock().await.unwrap());
    let set = tokio::time::timeout(LIVENESS, waiting)
        .await
        .expect("woken by the release message")
        .unwrap()
        .unwrap();
    assert!(set.fencing_token("{acct}:2").unwrap() > 0);
    assert!(set.unlock().await.unwrap());
}

/// Keys of different slots, whatever the order, modes or way of asking, are refused with
/// `Error::CrossSlot` naming the first lock key and the first key of another slot, and
/// no master is sent a script.
#[tokio::test]
async fn a_set_across_slots_is_refused_before_anything_is_sent() {
    let cluster = Cluster::start();
    let tagging = mutex(&cluster, "bank", true).await;
    let (a, b) = (
        cluster.name_on_master(0, "k"),
        cluster.name_on_master(1, "k"),
    );
    let (lock_a, lock_b) = (format!("bank:{a}"), format!("bank:{b}"));
    assert_ne!(slot(&lock_a), slot(&lock_b));
    // Two untagged keys whose tagged lock keys fall in different slots.
    let (c, d) = (
        "c",
        (0u32..)
            .map(|n| format!("d{n}"))
            .find(|d| slot(&format!("bank:{{{d}}}")) != slot("bank:{c}"))
            .unwrap(),
    );

    let before = scripts_sent(&cluster).await;
    let refusals = [
        tagging
            .lock_all()
            .write([a.as_str(), b.as_str()])
            .await
            .err(),
        tagging
            .lock_all()
            .write([a.as_str()])
            .read([b.as_str()])
            .await
            .err(),
        tagging
            .try_lock_all()
            .read([a.as_str(), b.as_str()])
            .await
            .err(),
        tagging.lock_all().write([c, d.as_str()]).await.err(),
    ];
    let expected = [
        (lock_a.clone(), lock_b.clone()),
        (lock_a.clone(), lock_b.clone()),
        (lock_a.clone(), lock_b.clone()),
        ("bank:{c}".to_owned(), format!("bank:{{{d}}}")),
    ];
    for (refused, (first, other)) in refusals.into_iter().zip(expected) {
        match refused {
            Some(Error::CrossSlot { key, foreign, .. }) => {
                assert_eq!((key, foreign), (first, other));
            }
            other => panic!("{other:?}"),
        }
    }
    // The reverse order names the other key first.
    let reversed = tagging.lock_all().write([b.as_str(), a.as_str()]).await;
    assert!(
        matches!(&reversed, Err(Error::CrossSlot { key, foreign, .. }) if *key == lock_b && *foreign == lock_a),
        "{reversed:?}"
    );
    assert_eq!(
        scripts_sent(&cluster).await,
        before,
        "a refused set sent a script"
    );
    assert_eq!(cluster.key_count().await, 0, "something was stored");
}
