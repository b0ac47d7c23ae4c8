//! The mutex on a real Redis Cluster (3 masters, 3 replicas) that each test starts:
//! naming rules checked before anything is sent, locks spread over every master with
//! exclusion, shared reads and intent, no lost updates across connections, `SCRIPT
//! FLUSH` under held guards, release notification (of a forced release too) by sharded
//! Pub/Sub, or by classic Pub/Sub on Redis 6.2,
//! clock-floored tokens, a Go-protocol peer sharing a tagged lock, and inspection on the
//! master of each slot.
#![cfg(feature = "cluster")]

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::common::cluster::{slot, Cluster};
use crate::common::cluster_pubsub::{self, subscribed, subscribed_anywhere};
use crate::common::either::Either;
use crate::common::go_peer::GoPeer;
use crate::common::lost_update::unguarded_increment;
use crate::common::{eventually, join_within, LIVENESS};
use redis::cluster_async::ClusterConnection;
use redismutex::{Error, Guard, Notifier, RwMutex, WriteGuard};
use tokio::task::{JoinHandle, JoinSet};

/// `GET key` through the cluster connection (routed to the key's slot).
async fn get(conn: &ClusterConnection, key: &str) -> Option<String> {
    redis::cmd("GET")
        .arg(key)
        .query_async(&mut conn.clone())
        .await
        .unwrap()
}

async fn exists(conn: &ClusterConnection, key: &str) -> bool {
    redis::cmd("EXISTS")
        .arg(key)
        .query_async::<i64>(&mut conn.clone())
        .await
        .unwrap()
        == 1
}

#[tokio::test]
async fn names_whose_keys_would_cross_slots_are_refused_before_anything_is_sent() {
    let cluster = Cluster::start();
    let conn = cluster.conn().await;

    // The Go layout of an untagged name puts the lock and intent keys in two slots.
    assert_ne!(slot("orders:42"), slot("orders:42:lock-intent"));
    let err = RwMutex::builder(conn.clone(), "orders")
        .build()
        .unwrap_err();
    assert!(
        matches!(err, Error::InvalidOptions(ref m) if m.contains("\"orders\"") && m.contains("CROSSSLOT")),
        "{err}"
    );
    // A mutex from `new` cannot fail: every acquire reports it, at once.
    let mx = RwMutex::new(conn.clone(), "orders");
    for result in [
        mx.write().key("42").await.map(drop),
        mx.read().key("42").await.map(drop),
        mx.try_write().key("42").await.map(drop),
        mx.try_read().key("42").await.map(drop),
    ] {
        assert!(
            matches!(result, Err(Error::InvalidOptions(_))),
            "{result:?}"
        );
    }
    // A key that defeats the tag that tagging would add is refused by name.
    let tagging = RwMutex::builder(conn.clone(), "orders")
        .hash_tag_keys(true)
        .build()
        .unwrap();
    match tagging.try_write().key("}x").await {
        Err(Error::InvalidKey { key, reason, .. }) => {
            assert_eq!(key, "orders:{}x}");
            assert!(reason.contains("no hash tag"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    // A single-server notifier cannot hear SPUBLISH: refused too.
    let single = redis::Client::open(cluster.url(cluster.masters()[0].port)).unwrap();
    let err = RwMutex::builder(conn.clone(), "{orders}")
        .notifier(single)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("Notifier::cluster"), "{err}");
    // And the other way round: a single-server mutex cannot hear SSUBSCRIBE.
    let node = cluster.node_conn(cluster.masters()[0].port).await;
    let err = RwMutex::builder(node, "{orders}")
        .notifier(Notifier::cluster(cluster.client()))
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("Notifier::new"), "{err}");
    // A connection type that wraps the cluster connection is not recognised; it says so.
    let wrapped = Wrapped(conn.clone());
    assert!(RwMutex::builder(wrapped.clone(), "orders").build().is_ok());
    let err = RwMutex::builder(wrapped.clone(), "orders")
        .cluster(true)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("CROSSSLOT"), "{err}");
    assert_eq!(cluster.key_count().await, 0, "nothing was sent");
    // Declared a cluster, it publishes by SPUBLISH (by PUBLISH on Redis 6.2): a cluster
    // notifier hears it.
    let declared = RwMutex::builder(wrapped, "{orders}")
        .cluster(true)
        .notifier(Notifier::cluster(cluster.client()))
        .build()
        .unwrap();
    let held = declared.write().await.unwrap();
    let waiting = spawn_writer(&declared, "");
    let channel = "{orders}:released";
    let master = cluster.master_of_slot(slot(channel));
    assert!(eventually(|| subscribed(&cluster, master, channel, 1)).await);
    let (waited, guard) = hand_over(held, waiting).await;
    assert!(waited < Duration::from_millis(500), "{waited:?}");
    guard.unlock().await.unwrap();
}

/// A `write()` on `key` of `mx` (the name for `""`) waiting in a task of its own, which
/// gives the moment it acquired.
fn spawn_writer<C>(mx: &RwMutex<C>, key: &str) -> JoinHandle<(Instant, WriteGuard)>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    let (mx, key) = (mx.clone(), key.to_owned());
    tokio::spawn(async move {
        let guard = mx.write().key(key).await.unwrap();
        (Instant::now(), guard)
    })
}

/// Releases `held`; how long after the release `waiting` acquired, and its guard.
async fn hand_over(
    held: impl Guard,
    waiting: JoinHandle<(Instant, WriteGuard)>,
) -> (Duration, WriteGuard) {
    let released = Instant::now();
    assert!(held.unlock().await.unwrap());
    let (acquired, guard) = tokio::time::timeout(LIVENESS, waiting)
        .await
        .expect("the waiter acquires")
        .unwrap();
    (acquired.saturating_duration_since(released), guard)
}

/// A connection type of the application's that wraps the cluster connection.
#[derive(Clone)]
struct Wrapped(ClusterConnection);

impl redis::aio::ConnectionLike for Wrapped {
    fn req_packed_command<'a>(
        &'a mut self,
        cmd: &'a redis::Cmd,
    ) -> redis::RedisFuture<'a, redis::Value> {
        self.0.req_packed_command(cmd)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
        self.0.req_packed_commands(pipeline, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.0.get_db()
    }
}

#[tokio::test]
async fn tagged_keys_spread_over_every_master_and_exclude_share_and_keep_intent() {
    let cluster = Cluster::start();
    let client = cluster.client();
    let conn = cluster.conn().await;
    let mx = RwMutex::builder(conn.clone(), "orders")
        .hash_tag_keys(true)
        .lock_intent(true)
        .notifier(Notifier::cluster(client))
        .build()
        .unwrap();

    let keys: Vec<String> = (0..30).map(|n| n.to_string()).collect();
    let masters: BTreeSet<u16> = keys
        .iter()
        .map(|key| cluster.master_of_slot(slot(&format!("orders:{{{key}}}"))))
        .collect();
    assert_eq!(masters.len(), 3, "the keys land on every master");

    for key in &keys {
        let lock_key = format!("orders:{{{key}}}");
        let writer = mx.write().key(key).await.unwrap();
        assert_eq!(writer.key(), lock_key);
        assert_eq!(get(&conn, &lock_key).await.as_deref(), Some(writer.id()));
        assert!(mx.try_write().key(key).await.unwrap().is_none());
        assert!(mx.try_read().key(key).await.unwrap().is_none());
        assert!(writer.unlock().await.unwrap());

        let first = mx.read().key(key).await.unwrap();
        let second = mx
            .try_read()
            .key(key)
            .await
            .unwrap()
            .expect("readers share");
        assert!(mx.try_write().key(key).await.unwrap().is_none());
        assert!(second.fencing_token() > first.fencing_token());

        // A waiting writer's intent keeps new readers out, then it gets the lock.
        let waiting = tokio::spawn({
            let mx = mx.clone();
            let key = key.clone();
            async move { mx.write().key(key).await }
        });
        let intent = format!("{lock_key}:lock-intent");
        assert!(eventually(|| exists(&conn, &intent)).await, "{intent}");
        assert!(mx.try_read().key(key).await.unwrap().is_none());
        assert!(first.unlock().await.unwrap());
        assert!(second.unlock().await.unwrap());
        let writer = tokio::time::timeout(LIVENESS, waiting)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert!(
            !exists(&conn, &intent).await,
            "the intent goes with the wait"
        );
        assert!(writer.unlock().await.unwrap());
        assert!(!exists(&conn, &lock_key).await);
    }
}

/// Tasks on three cluster connections increment per-lock counters with a GET and a
/// SET: any overlap of two writers loses an update.
#[tokio::test]
async fn no_lost_updates_with_tasks_on_several_connections() {
    const TASKS: usize = 12;
    const ROUNDS: usize = 25;
    const LOCKS: usize = 6;
    let cluster = Cluster::start();
    let client = cluster.client();
    let notifier = Notifier::cluster(client);
    let mut conns = Vec::new();
    for _ in 0..3 {
        conns.push(cluster.conn().await);
    }
    let mut tasks = JoinSet::new();
    for task in 0..TASKS {
        // Three connections, each shared by a third of the tasks.
        let conn = conns[task % 3].clone();
        let mx = RwMutex::builder(conn.clone(), "counter")
            .hash_tag_keys(true)
            .notifier(notifier.clone())
            .build()
            .unwrap();
        tasks.spawn(async move {
            for round in 0..ROUNDS {
                let lock = (task + round) % LOCKS;
                let guard = mx.write().key(lock.to_string()).await.unwrap();
                unguarded_increment(&conn, &format!("count:{{{lock}}}")).await;
                assert!(guard.unlock().await.unwrap(), "held to the end");
            }
        });
    }
    join_within(&mut tasks, Duration::from_secs(60), "the tasks finish").await;
    let conn = cluster.conn().await;
    let mut total = 0;
    for lock in 0..LOCKS {
        total += get(&conn, &format!("count:{{{lock}}}"))
            .await
            .map_or(0, |n| n.parse::<usize>().unwrap());
    }
    assert_eq!(total, TASKS * ROUNDS, "lost updates");
}

#[tokio::test]
async fn script_flush_on_every_node_while_guards_are_held_changes_nothing() {
    let cluster = Cluster::start();
    let conn = cluster.conn().await;
    let ttl = Duration::from_secs(1);
    let mx = RwMutex::builder(conn.clone(), "flush")
        .hash_tag_keys(true)
        .ttl(ttl)
        .build()
        .unwrap();
    let mut guards = Vec::new();
    for key in 0..12 {
        let writer = mx.write().key(key.to_string()).await.unwrap();
        guards.push(Either::from(writer));
        guards.push(mx.read().key(format!("r{key}")).await.unwrap().into());
    }
    let masters: BTreeSet<u16> = guards
        .iter()
        .map(|guard| cluster.master_of_slot(slot(guard.key())))
        .collect();
    assert_eq!(masters.len(), 3);

    cluster.script_flush_all().await;
    // Two refreshes (every ttl/2) must find their scripts gone and send them again.
    tokio::time::sleep(ttl * 3 / 2).await;
    for guard in &guards {
        assert!(
            !guard.is_cancelled(),
            "{}: {:?}",
            guard.key(),
            guard.cancel_reason()
        );
    }
    cluster.script_flush_all().await;
    let before: Vec<u64> = guards.iter().map(|guard| guard.fencing_token()).collect();
    for guard in guards {
        assert!(guard.unlock().await.unwrap());
    }
    cluster.script_flush_all().await;
    for (key, before) in (0..12).zip(before.iter().step_by(2)) {
        let guard = mx.try_write().key(key.to_string()).await.unwrap().unwrap();
        assert!(guard.fencing_token() > *before);
        assert!(guard.unlock().await.unwrap());
    }
}

/// A waiter in another process (its own connection and notifier) is woken by the
/// release's message, on each master, in about a round trip: far sooner than its
/// fallback timer (half its 10 s TTL). By sharded Pub/Sub (subscribed on the master that
/// serves the channel's slot, nobody by `SUBSCRIBE`); on Redis 6.2, which has none, by
/// classic Pub/Sub (subscribed by `SUBSCRIBE` there).
#[tokio::test]
async fn a_release_wakes_a_waiter_elsewhere_by_its_message_on_every_master() {
    eprintln!("release notifications by {}", cluster_pubsub::kind());
    let cluster = Cluster::start();
    let ttl = Duration::from_secs(10);
    let holder = RwMutex::builder(cluster.conn().await, "wake")
        .hash_tag_keys(true)
        .ttl(ttl)
        .notifier(Notifier::cluster(cluster.client()))
        .build()
        .unwrap();
    let waiter = RwMutex::builder(cluster.conn().await, "wake")
        .hash_tag_keys(true)
        .ttl(ttl)
        .notifier(Notifier::cluster(cluster.client()))
        .build()
        .unwrap();
    let mut woken = Vec::new();
    for i in 0..3 {
        let name = cluster.name_on_master(i, "k");
        let tag = name.trim_matches(|c| c == '{' || c == '}').to_owned();
        let channel = format!("wake:{{{tag}}}:released");
        let master = cluster.master_of_slot(slot(&channel));
        assert_eq!(master, cluster.masters()[i].port);

        let held = holder.write().key(&tag).await.unwrap();
        let waiting = spawn_writer(&waiter, &tag);
        // Subscribed on the master that serves the channel's slot.
        let subscribed = eventually(|| subscribed(&cluster, master, &channel, 1)).await;
        assert!(subscribed, "no subscription to {channel} on {master}");
        tokio::time::sleep(Duration::from_millis(50)).await; // the waiter sleeps
        let (waited, guard) = hand_over(held, waiting).await;
        woken.push(waited);
        guard.unlock().await.unwrap();
    }
    eprintln!("woken after the release by: {woken:?}");
    for wait in woken {
        assert!(
            wait < Duration::from_millis(500),
            "{wait:?}: not woken by the release"
        );
    }
}

/// Every token on a cluster is floored at the server clock: a counter that a failover
/// brought back older (here: set back by hand) still gives a larger token.
#[tokio::test]
async fn tokens_stay_above_earlier_ones_when_the_counter_comes_back_older() {
    let cluster = Cluster::start();
    let conn = cluster.conn().await;
    let mx = RwMutex::new(conn.clone(), "{fence}");
    for read in [false, true] {
        let first = if read {
            Either::from(mx.read().key("k").await.unwrap())
        } else {
            Either::from(mx.write().key("k").await.unwrap())
        };
        let token = first.fencing_token();
        first.unlock().await.unwrap();
        // A replica that missed the last 1000 increments.
        let _: () = redis::cmd("SET")
            .arg("{fence}:k:fence")
            .arg(token - 1000)
            .arg("PX")
            .arg(60_000)
            .query_async(&mut conn.clone())
            .await
            .unwrap();
        for _ in 0..3 {
            let next = if read {
                Either::from(mx.read().key("k").await.unwrap())
            } else {
                Either::from(mx.write().key("k").await.unwrap())
            };
            assert!(
                next.fencing_token() > token,
                "read {read}: {} <= {token}",
                next.fencing_token()
            );
            next.unlock().await.unwrap();
        }
    }
}

/// A peer speaking the Go package's protocol and this crate share a `{tagged}` lock on
/// the cluster: same keys, exclusion both ways, one reader set, and the Go writer's
/// intent keeps our readers out.
#[tokio::test]
async fn a_go_peer_shares_a_tagged_lock_on_the_cluster() {
    let cluster = Cluster::start();
    let conn = cluster.conn().await;
    let go = GoPeer::new(conn.clone(), 4000);
    let mx = RwMutex::builder(conn.clone(), "{jobs}")
        .lock_intent(true)
        .build()
        .unwrap();
    let key = "{jobs}:7";

    let go_writer = GoPeer::new_id();
    assert_eq!(go.write(key, &go_writer, false).await, None);
    assert!(mx.try_write().key("7").await.unwrap().is_none());
    assert!(mx.try_read().key("7").await.unwrap().is_none());
    go.unlock(key, &go_writer).await;

    let ours = mx.write().key("7").await.unwrap();
    assert_eq!(ours.key(), key);
    assert!(go.write(key, &GoPeer::new_id(), false).await.is_some());
    assert!(go.read(key, &GoPeer::new_id()).await.is_some());
    assert!(ours.unlock().await.unwrap());

    let reader = mx.read().key("7").await.unwrap();
    let go_reader = GoPeer::new_id();
    assert_eq!(go.read(key, &go_reader).await, None, "one reader set");
    go.unlock(key, &go_reader).await;
    assert!(reader.unlock().await.unwrap());

    // A Go writer's intent ("1") keeps our readers out.
    let blocker = mx.read().key("7").await.unwrap();
    assert!(go.write(key, &GoPeer::new_id(), true).await.is_some());
    assert_eq!(
        get(&conn, "{jobs}:7:lock-intent").await.as_deref(),
        Some("1")
    );
    assert!(mx.try_read().key("7").await.unwrap().is_none());
    assert!(blocker.unlock().await.unwrap());
}

/// A cluster notifier whose client speaks RESP2 cannot receive sharded messages (they
/// are RESP3 pushes): it never subscribes, and its waiters poll instead of hanging.
#[tokio::test]
async fn a_resp2_cluster_notifier_falls_back_to_polling() {
    let cluster = Cluster::start();
    let conn = cluster.conn().await;
    let mx = RwMutex::builder(conn.clone(), "{poll}")
        .ttl(Duration::from_secs(10))
        .notifier(Notifier::cluster(cluster.client_resp2()))
        .build()
        .unwrap();
    let held = mx.write().await.unwrap();
    let waiting = spawn_writer(&mx, "");
    // No reconnection storm: once its backoff has grown (10 ms doubling to 1 s), the
    // notifier tries about once a second (three or four tries in the window), and a try
    // opens a few connections per node at most (the cluster client's own, and those of
    // its slot refresh); 13 to 25 were seen. Without the backoff it would be hundreds.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = connections_received(&cluster).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let opened = connections_received(&cluster).await - before;
    eprintln!("{opened} connections in 3 s");
    assert!(opened <= 8 * 6, "{opened} connections in 3 s");
    let (waited, guard) = hand_over(held, waiting).await;
    // Polling: within its 50 ms backoff cap, far below the 5 s fallback timer.
    assert!(waited < Duration::from_millis(500), "{waited:?}");
    assert!(guard.unlock().await.unwrap());
}

/// Connections every node has accepted so far (`INFO stats`).
async fn connections_received(cluster: &Cluster) -> i64 {
    let mut total = 0;
    for node in cluster.nodes() {
        let info: String = redis::cmd("INFO")
            .arg("stats")
            .query_async(&mut cluster.node_conn(node.port).await)
            .await
            .unwrap();
        total += info
            .lines()
            .find_map(|line| line.strip_prefix("total_connections_received:"))
            .and_then(|n| n.trim().parse::<i64>().ok())
            .unwrap();
        total -= 1; // our own INFO connection
    }
    total
}

async fn node_id(node: &mut redis::aio::MultiplexedConnection) -> String {
    redis::cmd("CLUSTER")
        .arg("MYID")
        .query_async(node)
        .await
        .unwrap()
}

/// `CLUSTER SETSLOT` on every master, as `redis-cli --cluster reshard` finishes a move.
async fn assign_slot(cluster: &Cluster, slot: u16, owner: &str) {
    for master in cluster.masters() {
        let _: () = redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg("NODE")
            .arg(owner)
            .query_async(&mut cluster.node_conn(master.port).await)
            .await
            .unwrap();
    }
}

/// A slot moved to another master (the steps of `redis-cli --cluster reshard`) while a
/// guard holds a lock in it: the lock moves with its keys, the guard's refreshes follow
/// the redirects and keep it, others stay excluded, and the unlock finds it held.
#[tokio::test]
async fn a_slot_migrated_under_a_held_guard_keeps_the_lock() {
    let cluster = Cluster::start();
    let conn = cluster.conn().await;
    let ttl = Duration::from_secs(1);
    let mx = RwMutex::builder(conn.clone(), "{moving}")
        .ttl(ttl)
        .build()
        .unwrap();
    let held = mx.write().key("1").await.unwrap();
    let target = migrate(&cluster, slot("{moving}"), ttl / 2).await;
    assert_eq!(cluster.master_of_slot(slot("{moving}")), target);

    tokio::time::sleep(ttl * 2).await; // four refreshes on the new owner
    assert!(!held.is_cancelled(), "{:?}", held.cancel_reason());
    assert_eq!(get(&conn, "{moving}:1").await.as_deref(), Some(held.id()));
    assert!(mx.try_write().key("1").await.unwrap().is_none());
    let token = held.fencing_token();
    assert!(held.unlock().await.unwrap());
    let next = mx.write().key("1").await.unwrap();
    assert!(next.fencing_token() > token);
    assert!(next.unlock().await.unwrap());
}

/// A waiter subscribed to a release channel whose slot then moves to another master
/// (the old node ends a sharded subscription) follows it: a release after the move
/// wakes it far sooner than its fallback timer (half its 10 s TTL). On Redis 6.2 the
/// subscription is classic, which no node ends and every node hears: it stays
/// subscribed somewhere, and the release after the move wakes it as soon.
#[tokio::test]
async fn a_waiter_follows_its_release_channel_when_the_slot_moves() {
    let cluster = Cluster::start();
    let ttl = Duration::from_secs(10);
    let made = |conn| {
        RwMutex::builder(conn, "{moving}")
            .ttl(ttl)
            .notifier(Notifier::cluster(cluster.client()))
            .build()
            .unwrap()
    };
    let holder = made(cluster.conn().await);
    let waiter = made(cluster.conn().await);
    let held = holder.write().await.unwrap();
    let waiting = spawn_writer(&waiter, "");
    let channel = "{moving}:released";
    let source = cluster.master_of_slot(slot(channel));
    assert!(eventually(|| subscribed(&cluster, source, channel, 1)).await);

    let target = migrate(&cluster, slot(channel), Duration::ZERO).await;
    if cluster_pubsub::sharded() {
        assert!(
            eventually(|| subscribed(&cluster, target, channel, 1)).await,
            "not subscribed on the new owner {target}"
        );
    } else {
        assert!(subscribed_anywhere(&cluster, channel).await >= 1);
    }
    tokio::time::sleep(Duration::from_millis(100)).await; // the waiter sleeps again
    let (waited, guard) = hand_over(held, waiting).await;
    assert!(waited < Duration::from_millis(500), "{waited:?}");
    assert!(guard.unlock().await.unwrap());
}

/// Moves `slot` to another master as `redis-cli --cluster reshard` does (IMPORTING,
/// MIGRATING, `MIGRATE` key by key with `pause` between keys, then SETSLOT NODE on
/// every master); returns the new owner's port.
async fn migrate(cluster: &Cluster, slot: u16, pause: Duration) -> u16 {
    let source = cluster.master_of_slot(slot);
    let target = cluster
        .masters()
        .iter()
        .map(|master| master.port)
        .find(|port| *port != source)
        .unwrap();
    let mut source_conn = cluster.node_conn(source).await;
    let mut target_conn = cluster.node_conn(target).await;
    let source_id = node_id(&mut source_conn).await;
    let target_id = node_id(&mut target_conn).await;
    let setslot = |state: &str, node: &str| {
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("SETSLOT").arg(slot).arg(state).arg(node);
        cmd
    };
    let _: () = setslot("IMPORTING", &source_id)
        .query_async(&mut target_conn)
        .await
        .unwrap();
    let _: () = setslot("MIGRATING", &target_id)
        .query_async(&mut source_conn)
        .await
        .unwrap();
    loop {
        let keys: Vec<String> = redis::cmd("CLUSTER")
            .arg("GETKEYSINSLOT")
            .arg(slot)
            .arg(1)
            .query_async(&mut source_conn)
            .await
            .unwrap();
        let Some(key) = keys.first() else { break };
        let _: () = redis::cmd("MIGRATE")
            .arg("127.0.0.1")
            .arg(target)
            .arg(key)
            .arg(0)
            .arg(5000)
            .query_async(&mut source_conn)
            .await
            .unwrap();
        tokio::time::sleep(pause).await;
    }
    assign_slot(cluster, slot, &target_id).await;
    target
}

#[tokio::test]
async fn inspection_reads_each_lock_on_the_master_of_its_slot() {
    let cluster = Cluster::start();
    let conn = cluster.conn().await;
    let masters = cluster.masters().len();
    for i in 0..masters {
        let name = cluster.name_on_master(i, "inspect");
        let mx = RwMutex::builder(conn.clone(), name.as_str())
            .fair(true)
            .build()
            .unwrap();
        assert_eq!(mx.inspect("42").await.unwrap().mode(), None);
        let guard = mx.write().key("42").await.unwrap();
        let waiter = tokio::spawn({
            let mx = mx.clone();
            async move { mx.read().key("42").await }
        });
        let queue = format!("{name}:42:queue");
        assert!(
            eventually(|| async {
                let n: i64 = redis::cmd("ZCARD")
                    .arg(&queue)
                    .query_async(&mut conn.clone())
                    .await
                    .unwrap();
                n == 1
            })
            .await,
            "the reader queued"
        );
        let state = mx.inspect("42").await.unwrap();
        assert_eq!(state.holders(), [guard.id()]);
        assert_eq!(state.last_fencing_token(), Some(guard.fencing_token()));
        assert_eq!(state.queue().len(), 1);
        assert!(
            state.queue()[0].to_string().starts_with("r:"),
            "{:?}",
            state.queue()
        );
        guard.unlock().await.unwrap();
        let reader = waiter.await.unwrap().unwrap();
        let state = mx.inspect("42").await.unwrap();
        assert_eq!(state.holders(), [reader.id()]);
        assert!(state.queue().is_empty());
    }
    // With tagged keys the key is tagged as a request tags it; an untagged name is
    // refused before anything is sent, as every request refuses it.
    let tagged = RwMutex::builder(conn.clone(), "orders")
        .hash_tag_keys(true)
        .build()
        .unwrap();
    let guard = tagged.write().key("7").await.unwrap();
    assert_eq!(tagged.inspect("7").await.unwrap().holders(), [guard.id()]);
    let untagged = RwMutex::new(conn.clone(), "orders");
    assert!(matches!(
        untagged.inspect("7").await,
        Err(Error::InvalidOptions(_))
    ));
}

/// Forced release on a cluster: the script runs on the master of the lock key's slot
/// (a hash-tagged key), and its `SPUBLISH` (its `PUBLISH` on Redis 6.2) wakes a waiter
/// (TTL 30 s: its fallback timer would be far later) from another connection.
#[tokio::test]
async fn a_forced_release_on_a_cluster_wakes_a_waiter_by_its_release_message() {
    let cluster = Cluster::start();
    let notifier = Notifier::cluster(cluster.client());
    let ttl = Duration::from_secs(30);
    let plain = RwMutex::builder(cluster.conn().await, "forced")
        .ttl(ttl)
        .hash_tag_keys(true)
        .build()
        .unwrap();
    let notified = RwMutex::builder(cluster.conn().await, "forced")
        .ttl(ttl)
        .hash_tag_keys(true)
        .notifier(notifier)
        .build()
        .unwrap();
    let holder = plain.write().key("42").await.unwrap();
    assert_eq!(holder.key(), "forced:{42}");
    let waiter = {
        let notified = notified.clone();
        tokio::spawn(async move { notified.write().key("42").await })
    };
    // Let the waiter subscribe and sleep on the channel (a release before that is found
    // by its attempt once subscribed): subscribed, it no longer polls.
    let channel = "forced:{42}:released";
    let master = cluster.master_of_slot(slot(channel));
    assert!(eventually(|| subscribed(&cluster, master, channel, 1)).await);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiter.is_finished());
    assert!(plain.force_unlock("42").await.unwrap());
    let guard = tokio::time::timeout(LIVENESS, waiter)
        .await
        .expect("woken by the release message")
        .unwrap()
        .unwrap();
    assert!(guard.fencing_token() > holder.fencing_token());
    guard.unlock().await.unwrap();
    assert!(!plain.force_unlock("42").await.unwrap());
}
