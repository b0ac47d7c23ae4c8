//! The Redis Cluster the tests start: its layout, its slot arithmetic, routing through a
//! cluster connection, failover after a killed master, a killed node restarted as a
//! replica, frozen nodes (briefly: no failover), and teardown.
// The doc comes first: without the feature the crate is empty but still wants one.
#![cfg(feature = "cluster")]

use std::time::{Duration, Instant};

use crate::common::cluster::{self, Cluster, Role, State, SLOTS};
use crate::common::go_peer::GoPeer;
use redis::AsyncCommands;

/// Keys whose hash tag is easy to get wrong, with ones the crate uses.
const TRICKY_KEYS: &[&str] = &[
    "",
    "a",
    "123456789",
    "{",
    "}",
    "{}",
    "}{",
    "a{}b",
    "{}{x}",
    "}{x}",
    "{x}}",
    "{{x}}",
    "a{b}c{d}",
    "a{b",
    "a}b{c}",
    "{a}",
    "x{a}",
    "{a}y",
    "orders:42",
    "orders:42:lock-intent",
    "{orders}:42",
    "{orders}:42:lock-intent",
    "{orders}:42:fence",
    "ключ{тег}",
    "{ }",
];

#[test]
fn slot_matches_the_reference_value_without_a_server() {
    // CRC16-XMODEM("123456789") = 0x31C3, the check value of the algorithm.
    assert_eq!(cluster::slot("123456789"), 0x31C3);
    assert_eq!(cluster::slot("{123456789}:anything"), 0x31C3);
    assert_eq!(cluster::slot("x{123456789}{y}"), 0x31C3);
}

#[tokio::test]
async fn three_masters_cover_every_slot_each_with_an_attached_replica() {
    let cluster = Cluster::start();
    let masters = cluster.masters();
    assert_eq!(masters.len(), 3, "{masters:?}");
    let covered: usize = masters
        .iter()
        .flat_map(|master| master.slots.iter().map(|range| range.len()))
        .sum();
    assert_eq!(covered, usize::from(SLOTS), "{masters:?}");
    for slot in [0, 5460, 5461, 10922, 10923, SLOTS - 1] {
        let serving = masters.iter().filter(|master| master.serves(slot)).count();
        assert_eq!(serving, 1, "slot {slot}: {masters:?}");
    }
    let nodes = cluster.nodes();
    assert_eq!(nodes.len(), 6);
    assert!(nodes.iter().all(|node| node.state == State::Running));
    let replicas: Vec<_> = nodes
        .iter()
        .filter(|node| node.role == Role::Replica)
        .collect();
    assert_eq!(replicas.len(), 3, "{nodes:?}");
    for master in &masters {
        assert_eq!(master.replicas.len(), 1, "{master:?}");
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut cluster.node_conn(master.replicas[0]).await)
            .await
            .unwrap();
        assert!(
            info.contains(&format!("master_port:{}", master.port)),
            "{info}"
        );
        assert!(info.contains("master_link_status:up"), "{info}");
    }
}

#[tokio::test]
async fn slot_agrees_with_cluster_keyslot() {
    let cluster = Cluster::start();
    let mut conn = cluster.node_conn(cluster.nodes()[0].port).await;
    for key in TRICKY_KEYS {
        let expected: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(*key)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(cluster::slot(key), expected, "slot of {key:?}");
    }
}

#[tokio::test]
async fn a_cluster_connection_reads_and_writes_on_every_master() {
    let cluster = Cluster::start();
    let mut conn = cluster.conn().await;
    let masters = cluster.masters();
    for (i, master) in masters.iter().enumerate() {
        let name = cluster.name_on_master(i, "harness");
        assert!(master.serves(cluster::slot(&name)), "{name} on {master:?}");
        let key = format!("{name}:value");
        let () = conn.set(&key, i).await.unwrap();
        assert_eq!(conn.get::<_, usize>(&key).await.unwrap(), i);
        let mut direct = cluster.node_conn(master.port).await;
        let stored: Option<usize> = direct.get(&key).await.unwrap();
        assert_eq!(stored, Some(i), "{key} is stored on master {}", master.port);
    }
}

#[tokio::test]
async fn a_go_peer_locks_on_every_master_through_a_cluster_connection() {
    let cluster = Cluster::start();
    let go = GoPeer::new(cluster.conn().await, 60_000);
    for (i, master) in cluster.masters().iter().enumerate() {
        let name = cluster.name_on_master(i, "go");
        let (id, other) = (GoPeer::new_id(), GoPeer::new_id());
        assert_eq!(go.write(&name, &id, true).await, None);
        let stored: Option<String> = cluster
            .node_conn(master.port)
            .await
            .get(&name)
            .await
            .unwrap();
        assert_eq!(
            stored.as_ref(),
            Some(&id),
            "{name} is held on master {}",
            master.port
        );
        cluster.script_flush_all().await;
        assert!(go
            .write(&name, &other, true)
            .await
            .is_some_and(|pttl| pttl > 0));
        assert!(
            go.read(&name, &other).await.is_some(),
            "the intent blocks readers"
        );
        assert_eq!(go.refresh(&name, &id).await, 1);
        go.unlock(&name, &id).await;
        let blocked = go.read(&name, &other).await;
        assert!(blocked.is_some(), "the intent outlives the lock");
        assert_eq!(go.write(&name, &other, true).await, None);
        go.unlock(&name, &other).await;
    }
}

#[tokio::test]
async fn a_killed_master_is_replaced_by_its_replica_and_its_slots_take_writes() {
    let cluster = Cluster::start();
    let name = cluster.name_on_master(0, "failover");
    let slot = cluster::slot(&name);
    let old = cluster.master_of_slot(slot);
    let replica = cluster.masters()[0].replicas[0];
    let mut conn = cluster.conn().await;
    let () = conn.set(&name, "before").await.unwrap();
    // WAIT counts acknowledgements of the connection's own writes, so it is read off the
    // replica itself: the write must be there before the master goes.
    let mut on_replica = cluster.node_conn(replica).await;
    let () = redis::cmd("READONLY")
        .query_async(&mut on_replica)
        .await
        .unwrap();
    let copied = Instant::now() + Duration::from_secs(5);
    while on_replica.get::<_, Option<String>>(&name).await.unwrap() != Some("before".into()) {
        assert!(Instant::now() < copied, "the replica never got the write");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let killed = Instant::now();
    cluster.kill(old);
    let new = cluster.wait_failover(old).await;
    eprintln!("failover took {:?}", killed.elapsed());

    assert_eq!(new, replica);
    assert_eq!(cluster.master_of_slot(slot), new);
    let old_node = cluster.nodes().into_iter().find(|node| node.port == old);
    assert_eq!(old_node.map(|node| node.state), Some(State::Killed));
    let mut fresh = cluster.conn().await;
    assert_eq!(fresh.get::<_, String>(&name).await.unwrap(), "before");
    let () = fresh.set(&name, "after").await.unwrap();
    assert_eq!(fresh.get::<_, String>(&name).await.unwrap(), "after");
    let stored: String = cluster.node_conn(new).await.get(&name).await.unwrap();
    assert_eq!(stored, "after");
    cluster.script_flush_all().await;
}

/// A killed master started again after its failover rejoins as the replica of the one
/// that took over and syncs from it; killed in turn, that one is replaced by it.
#[tokio::test]
async fn a_restarted_master_rejoins_as_its_successors_replica_and_can_take_over_again() {
    let cluster = Cluster::start();
    let name = cluster.name_on_master(0, "restart");
    let old = cluster.master_of_slot(cluster::slot(&name));
    cluster.kill(old);
    let new = cluster.wait_failover(old).await;
    let mut conn = cluster.conn().await;
    let () = conn.set(&name, "after the failover").await.unwrap();

    let restarted = Instant::now();
    assert_eq!(cluster.restart(old).await, new);
    eprintln!("the restart took {:?}", restarted.elapsed());
    let node = cluster.nodes().into_iter().find(|node| node.port == old);
    assert_eq!(
        node.map(|node| (node.role, node.state)),
        Some((Role::Replica, State::Running))
    );
    let mut on_old = cluster.node_conn(old).await;
    let () = redis::cmd("READONLY")
        .query_async(&mut on_old)
        .await
        .unwrap();
    let copied: Option<String> = on_old.get(&name).await.unwrap();
    assert_eq!(copied.as_deref(), Some("after the failover"));

    cluster.kill(new);
    assert_eq!(cluster.wait_failover(new).await, old);
    assert_eq!(cluster.restart(new).await, old);
    let mut fresh = cluster.conn().await;
    assert_eq!(
        fresh.get::<_, String>(&name).await.unwrap(),
        "after the failover"
    );
    cluster.script_flush_all().await;
}

/// A master frozen for half the node timeout, again and again, is never failed over.
#[tokio::test]
async fn a_master_paused_for_half_the_node_timeout_keeps_its_slots() {
    let cluster = Cluster::start();
    let d = cluster.node_timeout() / 2;
    for i in 0..3 {
        let master = cluster.masters()[i].port;
        // Panics if a replica took over or an election was held.
        cluster.pause_for(master, d).await;
        assert_eq!(cluster.masters()[i].port, master);
    }
}

#[tokio::test]
async fn a_paused_node_answers_nothing_until_resumed_and_drop_kills_every_node() {
    let cluster = Cluster::start();
    let replica = cluster.masters()[1].replicas[0];
    let mut conn = cluster.node_conn(replica).await;
    cluster.pause(replica);
    let frozen = tokio::time::timeout(Duration::from_millis(300), ping(&mut conn)).await;
    assert!(frozen.is_err(), "a paused node answered: {frozen:?}");
    let paused = cluster
        .nodes()
        .into_iter()
        .find(|node| node.port == replica);
    assert_eq!(paused.map(|node| node.state), Some(State::Paused));
    cluster.resume(replica);
    let thawed = tokio::time::timeout(Duration::from_secs(5), ping(&mut conn)).await;
    assert_eq!(thawed.expect("a resumed node answers"), "PONG");

    cluster.pause(replica);
    let ports: Vec<u16> = cluster.nodes().iter().map(|node| node.port).collect();
    drop(cluster);
    for port in ports {
        let refused = std::net::TcpStream::connect(("127.0.0.1", port)).is_err();
        assert!(refused, "node {port} still accepts connections after drop");
    }
}

async fn ping(conn: &mut redis::aio::MultiplexedConnection) -> String {
    redis::cmd("PING").query_async(conn).await.unwrap()
}
