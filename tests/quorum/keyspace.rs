//! Waiting on keyspace notifications on a quorum (`Notifier::quorum(..)
//! .keyspace_events()`): a Go holder on a majority of the nodes (the Go package's
//! scripts on each node, one id) that releases by its silent `DEL` on every node wakes
//! a quorum waiter at once, well before a probe or its fallback timer; a node with them
//! off is named by `check_keyspace_events`; and while blocked, such a waiter is not woken
//! by its own failed attempts' release messages.

use std::time::Duration;

use crate::common::go_peer::GoPeer;
use crate::common::quorum::Nodes;
use crate::common::raw::{self, subscribers};
use crate::common::{eventually, LIVENESS};
use redis::aio::MultiplexedConnection;
use redismutex::{Error, Notifier, RwMutex, WriteGuard};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// A 10 s TTL: a waiter's fallback timer is then 5 s, and the first sleep on a key never
/// heard from is 750 ms or more, so a wake-up within [`PROMPT`] of the release is the
/// keyspace notification.
const TTL: Duration = Duration::from_secs(10);
/// How soon after the Go holder's release a waiter woken by its notification has the lock.
const PROMPT: Duration = Duration::from_millis(150);
/// How long the Go holder holds once the waiter is subscribed.
const GO_HOLDS: Duration = Duration::from_millis(300);

/// Sets `notify-keyspace-events` to `flags` on the node behind `conn`.
async fn set_keyspace_events(conn: &MultiplexedConnection, flags: &str) {
    raw::cmd::<()>(conn, "CONFIG", &["SET", "notify-keyspace-events", flags]).await;
}

/// Three nodes with keyspace notifications on, a Go writer on a majority of them (its
/// scripts on nodes 0 and 1, one id), and a quorum writer with a keyspace notifier
/// waiting behind it, subscribed on every node: the nodes' connections, the Go peers
/// and the waiting task.
async fn behind_a_go_majority(
    nodes: &Nodes,
    go_id: &str,
) -> (
    Vec<MultiplexedConnection>,
    Vec<GoPeer>,
    JoinHandle<(Instant, WriteGuard)>,
) {
    let conns = nodes.conns().await;
    for conn in &conns {
        set_keyspace_events(conn, "Kgx").await;
    }
    let peers: Vec<_> = conns
        .iter()
        .map(|conn| GoPeer::new(conn.clone(), 60_000))
        .collect();
    for go in &peers[..nodes.majority()] {
        assert_eq!(go.write("jobs", go_id, false).await, None);
    }
    let notifier = Notifier::quorum(nodes.clients()).keyspace_events();
    notifier.check_keyspace_events().await.unwrap();
    let mx = RwMutex::builder(nodes.quorum().await, "jobs")
        .ttl(TTL)
        .notifier(notifier)
        .build()
        .unwrap();
    let waiter = tokio::spawn(async move {
        let guard = mx.write().await.unwrap();
        (Instant::now(), guard)
    });
    let every = &conns;
    assert!(
        eventually(|| async move {
            for conn in every {
                if subscribers(conn, "jobs:released").await != 1
                    || subscribers(conn, "__keyspace@0__:jobs").await != 1
                {
                    return false;
                }
            }
            true
        })
        .await,
        "jobs:released and __keyspace@0__:jobs subscribed on every node"
    );
    (conns, peers, waiter)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_go_holders_silent_del_on_a_majority_wakes_a_quorum_keyspace_waiter_at_once() {
    let nodes = Nodes::start(3);
    let go_id = GoPeer::new_id();
    let (_conns, peers, waiter) = behind_a_go_majority(&nodes, &go_id).await;
    tokio::time::sleep(GO_HOLDS).await;
    assert!(!waiter.is_finished(), "the Go holder holds a majority");

    // Released once the first node it held is: the other node and the free one then
    // make a majority.
    let released = Instant::now();
    for go in &peers {
        go.unlock("jobs", &go_id).await;
    }
    let (acquired, guard) = tokio::time::timeout(LIVENESS, waiter)
        .await
        .expect("acquired in time")
        .unwrap();
    let waited = acquired.saturating_duration_since(released);
    assert!(waited < PROMPT, "in {waited:?} after the first Go DEL");
    assert!(guard.unlock().await.unwrap());
}

/// While blocked behind a Go holder on a majority, the waiter sleeps: each failed
/// attempt takes the free node and releases it, and that release's message, its own
/// id, comes back on the free node's subscription and must wake nobody (it did, and the
/// waiter tried again at once: about a thousand scripts a second on each node).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_waiter_behind_a_go_majority_sends_no_scripts_while_blocked() {
    let nodes = Nodes::start(3);
    let go_id = GoPeer::new_id();
    let (conns, peers, waiter) = behind_a_go_majority(&nodes, &go_id).await;
    for conn in &conns {
        raw::cmd::<()>(conn, "CONFIG", &["RESETSTAT"]).await;
    }
    tokio::time::sleep(GO_HOLDS).await;
    let mut sent = Vec::new();
    for conn in &conns {
        sent.push(raw::calls(conn, "evalsha").await.0 + raw::calls(conn, "eval").await.0);
    }
    // The waiting-cost row allows 2 commands a second while blocked; a probe may fall
    // in these 300 ms.
    assert!(
        sent.iter().all(|&scripts| scripts <= 2),
        "scripts per node in {GO_HOLDS:?} while blocked: {sent:?}"
    );
    for go in &peers {
        go.unlock("jobs", &go_id).await;
    }
    let (_, guard) = tokio::time::timeout(LIVENESS, waiter)
        .await
        .expect("acquired in time")
        .unwrap();
    assert!(guard.unlock().await.unwrap());
}

#[tokio::test]
async fn a_quorum_node_with_keyspace_events_off_is_named_by_the_check() {
    let nodes = Nodes::start(3);
    let conns = nodes.conns().await;
    for conn in &conns {
        set_keyspace_events(conn, "Kgx").await;
    }
    let notifier = Notifier::quorum(nodes.clients()).keyspace_events();
    notifier.check_keyspace_events().await.unwrap();

    set_keyspace_events(&conns[1], "").await;
    let off = nodes.server(1).port();
    match notifier.check_keyspace_events().await {
        Err(Error::KeyspaceEvents { node, reason, .. }) => {
            assert!(node.ends_with(&format!(":{off}")), "{node}, not {off}");
            assert!(reason.contains("notify-keyspace-events Kgx"), "{reason}");
        }
        other => panic!("expected KeyspaceEvents on {off}, got {other:?}"),
    }
}
