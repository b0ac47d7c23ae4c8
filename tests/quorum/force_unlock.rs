//! Forced release over a quorum: every node cleared, the fence counters kept, the holder
//! told at its next renewal; a lock held on one node only is reported held; a node down
//! changes nothing while a majority answers, and a majority down is `NoQuorum`.

use std::time::Duration;

use crate::common::go_peer::GoPeer;
use crate::common::quorum::{counter, gone_everywhere, written_everywhere, Nodes};
use crate::common::{at_once, raw, LIVENESS};
use redis::aio::MultiplexedConnection;
use redismutex::{CancelReason, Error, Quorum, RwMutex};

const TTL: Duration = Duration::from_secs(2);

async fn mutex(nodes: &Nodes) -> RwMutex<Quorum<MultiplexedConnection>> {
    RwMutex::builder(nodes.quorum().await, "forced")
        .ttl(TTL)
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_quorum_writer_is_forced_out_on_every_node_and_the_next_writer_gets_in_at_once() {
    let nodes = Nodes::start(3);
    let conns = nodes.conns().await;
    let mx = mutex(&nodes).await;
    let holder = mx.write().await.unwrap();
    written_everywhere(&conns, "forced", holder.id()).await;
    let mut fences = Vec::new();
    for conn in &conns {
        fences.push(counter(conn, "forced:fence").await);
    }

    assert!(at_once(mx.force_unlock("")).await.unwrap());
    gone_everywhere(&conns, "forced").await;
    for (conn, fence) in conns.iter().zip(&fences) {
        assert_eq!(
            &counter(conn, "forced:fence").await,
            fence,
            "the counter is kept"
        );
    }
    let next = at_once(mx.try_write())
        .await
        .unwrap()
        .expect("the lock is free on every node");
    assert!(next.fencing_token() > holder.fencing_token());
    // The forced-out writer's next renewal finds another's id on a majority.
    tokio::time::timeout(LIVENESS, holder.cancelled())
        .await
        .expect("the token fires at the next renewal");
    assert_eq!(holder.cancel_reason(), Some(CancelReason::Lost));
    written_everywhere(&conns, "forced", next.id()).await;
    next.unlock().await.unwrap();
    assert!(
        !at_once(mx.force_unlock("")).await.unwrap(),
        "free on every node"
    );
}

#[tokio::test]
async fn a_live_quorum_writer_nobody_replaced_takes_the_lock_back_at_its_next_renewal() {
    // As documented (guide `refresh`, "Forced release"): a quorum renewal takes the lock
    // back on the nodes that lost it while the guard is valid, as after a node restarted
    // empty, and it cannot tell those from a forced release.
    let nodes = Nodes::start(3);
    let conns = nodes.conns().await;
    let mx = mutex(&nodes).await;
    let holder = mx.write().await.unwrap();
    let refreshes = holder.refreshes();
    assert!(at_once(mx.force_unlock("")).await.unwrap());
    gone_everywhere(&conns, "forced").await;
    let deadline = tokio::time::Instant::now() + LIVENESS;
    while holder.refreshes() == refreshes && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(holder.refreshes() > refreshes, "a renewal came");
    assert!(!holder.is_cancelled());
    written_everywhere(&conns, "forced", holder.id()).await;
    assert!(holder.unlock().await.unwrap());
}

#[tokio::test]
async fn a_lock_held_on_one_node_only_is_reported_held_and_cleared() {
    let nodes = Nodes::start(3);
    let conns = nodes.conns().await;
    let mx = mutex(&nodes).await;
    let go = GoPeer::new(conns[1].clone(), 60_000);
    assert_eq!(go.write("forced", &GoPeer::new_id(), false).await, None);
    assert!(at_once(mx.force_unlock("")).await.unwrap());
    gone_everywhere(&conns, "forced").await;
}

#[tokio::test]
async fn a_node_down_changes_nothing_and_a_majority_down_is_no_quorum() {
    let mut nodes = Nodes::start(3);
    let conns = nodes.conns().await;
    let mx = mutex(&nodes).await;
    let holder = mx.write().await.unwrap();
    written_everywhere(&conns, "forced", holder.id()).await;
    nodes.kill(2);
    assert!(at_once(mx.force_unlock("")).await.unwrap());
    for conn in &conns[..2] {
        assert!(!raw::exists(conn, "forced").await);
    }

    let go = GoPeer::new(conns[0].clone(), 60_000);
    assert_eq!(go.write("forced", &GoPeer::new_id(), false).await, None);
    nodes.kill(1);
    match at_once(mx.force_unlock("")).await {
        Err(Error::NoQuorum {
            key,
            answered,
            needed,
            nodes,
            ..
        }) => assert_eq!((key.as_str(), answered, needed, nodes), ("forced", 1, 2, 3)),
        other => panic!("{other:?}"),
    }
    assert!(
        !raw::exists(&conns[0], "forced").await,
        "the node that answered was cleared all the same"
    );
}
