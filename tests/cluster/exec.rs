//! `WriteGuard::exec` and `Permit::exec` on a real Redis Cluster (3 masters, 3 replicas) that
//! each test starts: a pipeline whose keys are all in the lock key's slot runs on the
//! master serving that slot, on every master, whether its keys are found by `COMMAND
//! INFO` or `COMMAND GETKEYS`; a key of another slot is refused with `Error::CrossSlot`
//! naming it before the script is sent anywhere; a stale holder is refused and nothing of
//! its pipeline runs; a permit of a cluster semaphore execs while it holds.
#![cfg(feature = "cluster")]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use crate::common::cluster::{slot, Cluster};
use crate::common::{raw, scripts};
use redis::aio::MultiplexedConnection;
use redis::cluster_async::ClusterConnection;
use redismutex::{CancelReason, Error, RwMutex, Semaphore};

/// Long enough that no refresh runs during a test.
const TTL: Duration = Duration::from_secs(30);
/// A mutex `orders` whose lock keys are tagged: key `42` locks `orders:{42}`, which
/// shares its slot with every key tagged `{42}`.
fn tagged(conn: &ClusterConnection) -> RwMutex<ClusterConnection> {
    RwMutex::builder(conn.clone(), "orders")
        .hash_tag_keys(true)
        .ttl(TTL)
        .build()
        .unwrap()
}

/// A plain connection to each master, to read keys where they live (no redirect).
async fn master_conns(cluster: &Cluster) -> HashMap<u16, MultiplexedConnection> {
    let mut conns = HashMap::new();
    for master in cluster.masters() {
        conns.insert(master.port, cluster.node_conn(master.port).await);
    }
    conns
}

/// The ports of the masters whose script cache holds `exec.lua` (a server caches every
/// script it was sent by `EVAL`; an `EVALSHA` it does not know runs nothing).
async fn masters_that_ran_exec(masters: &HashMap<u16, MultiplexedConnection>) -> Vec<u16> {
    let mut ran = Vec::new();
    for (port, conn) in masters {
        if scripts::cached(&mut conn.clone(), "exec.lua").await {
            ran.push(*port);
        }
    }
    ran.sort_unstable();
    ran
}

/// For each master, how many `EVALSHA`s and `EVAL`s it was sent: run, failed, or
/// rejected before running (`CROSSSLOT`, `MOVED`), from `INFO commandstats`.
async fn scripts_sent(masters: &HashMap<u16, MultiplexedConnection>) -> BTreeMap<u16, u64> {
    let mut sent = BTreeMap::new();
    for (port, conn) in masters {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut conn.clone())
            .await
            .unwrap();
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
        sent.insert(*port, total);
    }
    sent
}

/// Whether `key` exists anywhere in the cluster (routed to its slot's master).
async fn exists(conn: &ClusterConnection, key: &str) -> bool {
    redis::cmd("EXISTS")
        .arg(key)
        .query_async::<i64>(&mut conn.clone())
        .await
        .unwrap()
        == 1
}

/// For each master, in [`Cluster::masters`]'s order, the smallest key `n` of the mutex
/// whose lock key `orders:{n}` it serves.
fn a_key_on_each_master(cluster: &Cluster) -> Vec<(u16, String)> {
    cluster
        .masters()
        .iter()
        .map(|master| {
            let key = (0u32..)
                .map(|n| n.to_string())
                .find(|key| master.serves(slot(&format!("orders:{{{key}}}"))))
                .expect("some key lands on every master");
            (master.port, key)
        })
        .collect()
}

#[tokio::test]
async fn keys_of_the_lock_keys_slot_run_on_the_master_serving_it_on_every_master() {
    let cluster = Cluster::start();
    let conn = cluster.conn().await;
    let masters = master_conns(&cluster).await;
    let mx = tagged(&conn);
    let placed = a_key_on_each_master(&cluster);
    let ports: BTreeSet<u16> = placed.iter().map(|(port, _)| *port).collect();
    assert_eq!(ports.len(), 3, "a lock on every master: {placed:?}");

    for (port, key) in &placed {
        let guard = mx.write().key(key).await.unwrap();
        let lock_key = format!("orders:{{{key}}}");
        assert_eq!(guard.key(), lock_key);
        let (data, count, hash, set, scores, union) = (
            format!("{{{key}}}:data"),
            format!("{{{key}}}:count"),
            format!("{{{key}}}:hash"),
            format!("{{{key}}}:set"),
            format!("{{{key}}}:scores"),
            format!("{{{key}}}:union"),
        );
        let mut pipe = redis::pipe();
        pipe.set(&data, format!("written under {lock_key}"))
            .ignore()
            .incr(&count, 5)
            .hset(&hash, "f", "v")
            .ignore()
            .hgetall(&hash)
            .zadd(&scores, "m", 2)
            .ignore()
            .sadd(&set, "s")
            .ignore()
            // Its keys move with its arguments: found by COMMAND GETKEYS.
            .zunionstore(&union, &[&scores, &set])
            .get(&data);
        type Replies = (i64, HashMap<String, String>, i64, String);
        let (incremented, fields, union_size, value): Replies = guard.exec(&pipe).await.unwrap();
        assert_eq!(incremented, 5);
        assert_eq!(fields.get("f").map(String::as_str), Some("v"));
        assert_eq!(union_size, 2, "the sorted set's member and the set's");
        assert_eq!(value, format!("written under {lock_key}"));

        // Every key is on the master of the lock key's slot.
        assert_eq!(cluster.master_of_slot(slot(&lock_key)), *port);
        let node = &masters[port];
        assert_eq!(
            raw::get(node, &data).await.as_deref(),
            Some(value.as_str()),
            "{data} is not on {port}"
        );
        assert_eq!(raw::get(node, &count).await.as_deref(), Some("5"));
        assert!(raw::exists(node, &union).await, "{union} is not on {port}");
        assert!(!guard.is_cancelled());

        // A reader of the same lock reads there too, and is refused writes.
        assert!(guard.unlock().await.unwrap());
        let reader = mx.read().key(key).await.unwrap();
        let mut read = redis::pipe();
        read.get(&count).get(&data);
        let (count_now, value): (i64, String) = reader.exec(&read).await.unwrap();
        assert_eq!(count_now, 5);
        assert_eq!(value, format!("written under {lock_key}"));
        let mut incr = redis::pipe();
        incr.incr(&count, 1);
        let refused = reader.exec::<(i64,)>(&incr).await;
        assert!(
            matches!(refused, Err(Error::InvalidPipeline { .. })),
            "{refused:?}"
        );
        assert_eq!(raw::get(node, &count).await.as_deref(), Some("5"));
        assert!(reader.unlock().await.unwrap());
    }
    let ran: BTreeSet<u16> = masters_that_ran_exec(&masters).await.into_iter().collect();
    assert_eq!(
        ran, ports,
        "exec ran on each master once its lock was there"
    );
}

#[tokio::test]
async fn a_key_of_another_slot_is_refused_by_name_before_the_script_is_sent() {
    let cluster = Cluster::start();
    let conn = cluster.conn().await;
    let masters = master_conns(&cluster).await;
    let mx = tagged(&conn);
    let guard = mx.write().key("42").await.unwrap();
    let lock_slot = slot("orders:{42}");
    let lock_master = cluster.master_of_slot(lock_slot);

    // Foreign keys: one on another master; one in another slot of the same master
    // (Redis Cluster refuses a script whose keys cross slots even on one node).
    let elsewhere = (0u32..)
        .map(|n| format!("{{other{n}}}:data"))
        .find(|key| cluster.master_of_slot(slot(key)) != lock_master)
        .unwrap();
    let same_master = (0u32..)
        .map(|n| format!("{{other{n}}}:data"))
        .find(|key| slot(key) != lock_slot && cluster.master_of_slot(slot(key)) == lock_master)
        .unwrap();
    // An untagged key in the lock key's slot: the check is by slot, not by tag.
    let untagged = (0u32..)
        .map(|n| format!("untagged-{n}"))
        .find(|key| slot(key) == lock_slot)
        .unwrap();

    // From here on, until the guard's next exec, nothing should send a script: the TTL is
    // too long for a refresh.
    let sent_before = scripts_sent(&masters).await;
    for foreign in [&elsewhere, &same_master] {
        // Keys of the right slot first, the foreign key after them, then another one.
        let mut pipe = redis::pipe();
        pipe.set("{42}:data", "must not be written")
            .ignore()
            .incr(&untagged, 1)
            .ignore()
            .set(foreign, "must not be written")
            .ignore()
            .set("{unnamed}:data", "must not be written")
            .ignore();
        let refused = guard.exec::<()>(&pipe).await;
        match &refused {
            Err(Error::CrossSlot {
                key,
                foreign: named,
                ..
            }) => {
                assert_eq!(
                    (key.as_str(), named.as_str()),
                    ("orders:{42}", foreign.as_str())
                );
            }
            other => panic!("{other:?}"),
        }
        // The same in a command whose keys are found by COMMAND GETKEYS.
        let mut union = redis::pipe();
        union
            .set("{42}:data", "must not be written")
            .ignore()
            .zunionstore("{42}:union", &["{42}:scores", foreign.as_str()])
            .ignore();
        let refused = guard.exec::<()>(&union).await;
        assert!(
            matches!(&refused, Err(Error::CrossSlot { foreign: named, .. }) if named == foreign),
            "{refused:?}"
        );
    }
    for key in [
        "{42}:data",
        untagged.as_str(),
        elsewhere.as_str(),
        same_master.as_str(),
        "{unnamed}:data",
        "{42}:union",
    ] {
        assert!(!exists(&conn, key).await, "{key} was written");
    }
    assert_eq!(
        scripts_sent(&masters).await,
        sent_before,
        "a master was sent a script"
    );
    assert_eq!(
        masters_that_ran_exec(&masters).await,
        Vec::<u16>::new(),
        "exec.lua ran"
    );
    assert!(!guard.is_cancelled(), "a refusal is no loss");

    // The guard execs once its keys are in its slot, the untagged one too; only the lock
    // key's master ran the script.
    let mut pipe = redis::pipe();
    pipe.set("{42}:data", "written").ignore().incr(&untagged, 1);
    let (incremented,): (i64,) = guard.exec(&pipe).await.unwrap();
    assert_eq!(incremented, 1);
    assert_eq!(
        raw::get(&masters[&lock_master], &untagged).await.as_deref(),
        Some("1")
    );
    assert_eq!(masters_that_ran_exec(&masters).await, vec![lock_master]);
    let sent_after = scripts_sent(&masters).await;
    for (port, sent) in &sent_after {
        if *port == lock_master {
            assert!(*sent > sent_before[port], "the count did not move");
        } else {
            assert_eq!(*sent, sent_before[port], "{port} was sent a script");
        }
    }
    assert!(guard.unlock().await.unwrap());
}

#[tokio::test]
async fn a_stale_holder_on_a_cluster_is_refused_and_nothing_of_it_runs() {
    let cluster = Cluster::start();
    let conn = cluster.conn().await;
    let masters = master_conns(&cluster).await;
    let mx = tagged(&conn);
    let stale = mx.write().key("42").await.unwrap();
    // The lock goes behind A's back and B takes it.
    let _: i64 = redis::cmd("DEL")
        .arg("orders:{42}")
        .query_async(&mut conn.clone())
        .await
        .unwrap();
    let fresh = mx.write().key("42").await.unwrap();
    assert!(!stale.is_cancelled(), "A has not noticed yet");

    let write = |value: &str| {
        let mut pipe = redis::pipe();
        pipe.set("{42}:data", value).ignore().incr("{42}:writes", 1);
        pipe
    };
    let refused = stale.exec::<(i64,)>(&write("from A")).await;
    assert!(
        matches!(&refused, Err(Error::NotHeld { key, .. }) if key == "orders:{42}"),
        "{refused:?}"
    );
    assert!(!exists(&conn, "{42}:data").await, "nothing of A's ran");
    assert!(!exists(&conn, "{42}:writes").await);
    assert_eq!(stale.cancel_reason(), Some(CancelReason::Lost));

    let (writes,): (i64,) = fresh.exec(&write("from B")).await.unwrap();
    assert_eq!(writes, 1);
    let node = &masters[&cluster.master_of_slot(slot("orders:{42}"))];
    assert_eq!(raw::get(node, "{42}:data").await.as_deref(), Some("from B"));
    assert!(fresh.unlock().await.unwrap());
    assert!(!stale.unlock().await.unwrap(), "A's lock was lost");
}

#[tokio::test]
async fn a_permit_of_a_cluster_semaphore_execs_in_its_slot_while_it_holds() {
    let cluster = Cluster::start();
    let conn = cluster.conn().await;
    let masters = master_conns(&cluster).await;
    let sem = Semaphore::builder(conn.clone(), "pool", 2)
        .hash_tag_keys(true)
        .ttl(TTL)
        .build()
        .unwrap();
    let (first, second) = (
        sem.acquire().key("7").await.unwrap(),
        sem.acquire().key("7").await.unwrap(),
    );
    assert_eq!(first.key(), "pool:{7}");
    let mut pipe = redis::pipe();
    pipe.incr("{7}:jobs", 1);
    let (jobs,): (i64,) = first.exec(&pipe).await.unwrap();
    assert_eq!(jobs, 1);
    let node = &masters[&cluster.master_of_slot(slot("pool:{7}"))];
    assert_eq!(raw::get(node, "{7}:jobs").await.as_deref(), Some("1"));

    // A key of another slot is refused for a permit as for a guard.
    let mut foreign = redis::pipe();
    foreign.incr("{7}:jobs", 1).incr("{8}:jobs", 1);
    assert_ne!(slot("{8}:jobs"), slot("pool:{7}"));
    let refused = first.exec::<(i64, i64)>(&foreign).await;
    assert!(
        matches!(&refused, Err(Error::CrossSlot { key, foreign, .. }) if key == "pool:{7}" && foreign == "{8}:jobs"),
        "{refused:?}"
    );

    // The first permit's deadline is in the past by the server's clock: not held.
    let _: i64 = redis::cmd("ZADD")
        .arg("pool:{7}")
        .arg(1)
        .arg(first.id())
        .query_async(&mut conn.clone())
        .await
        .unwrap();
    let refused = first.exec::<(i64,)>(&pipe).await;
    assert!(matches!(refused, Err(Error::NotHeld { .. })), "{refused:?}");
    assert_eq!(first.cancel_reason(), Some(CancelReason::Lost));
    let (jobs,): (i64,) = second.exec(&pipe).await.unwrap();
    assert_eq!(jobs, 2, "neither refused exec ran anything");
    assert!(!exists(&conn, "{8}:jobs").await);
    assert!(second.unlock().await.unwrap());
    let _ = first.unlock().await;
}
