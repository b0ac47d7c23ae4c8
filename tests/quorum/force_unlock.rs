//! Forced release over a quorum: every node cleared, each fence counter raised by one,
//! the holder told at its next renewal (it does not take the lock back: the raised
//! counters and granted keys mark the release), a waiter gets in; a node that granted a
//! token past the guard's is not taken back while one that only lost the key is; a lock held on
//! one node only is reported held; a node down changes nothing while a majority answers,
//! and a majority down is `NoQuorum`.

use std::time::Duration;

use crate::common::go_peer::GoPeer;
use crate::common::quorum::{
    counter, gone_everywhere, raised_everywhere, read_everywhere, written_everywhere, Nodes,
};
use crate::common::{at_once, eventually, raw, LIVENESS};
use redis::aio::MultiplexedConnection;
use redismutex::{CancelReason, Error, Guard};

const TTL: Duration = Duration::from_secs(2);
/// The TTL of the tests that wait for a renewal: one every 500 ms.
const SHORT_TTL: Duration = Duration::from_secs(1);

/// Each node's counter at `forced:fence`, once every node's is at least `token` (the
/// acquire's second round may still be going on at a node the majority did not wait for).
async fn counters_after(conns: &[MultiplexedConnection], token: u64) -> Vec<Option<u64>> {
    raised_everywhere(conns, "forced:fence", token).await;
    let mut counters = Vec::new();
    for conn in conns {
        counters.push(counter(conn, "forced:fence").await);
    }
    counters
}

/// The forced-out `holder`'s token fires `Lost` at its next renewal (within ttl/2 and a
/// generous bound), not `Expired` at its deadline.
async fn lost_at_next_renewal(holder: &impl Guard) {
    tokio::time::timeout(SHORT_TTL / 2 + LIVENESS, holder.cancelled())
        .await
        .expect("the token fires at the next renewal");
    assert_eq!(holder.cancel_reason(), Some(CancelReason::Lost));
}

#[tokio::test]
async fn a_quorum_writer_is_forced_out_on_every_node_and_the_next_writer_gets_in_at_once() {
    let nodes = Nodes::start(3);
    let conns = nodes.conns().await;
    let mx = nodes.mutex("forced", TTL).await;
    let holder = mx.write().await.unwrap();
    written_everywhere(&conns, "forced", holder.id()).await;
    let fences = counters_after(&conns, holder.fencing_token()).await;

    assert!(at_once(mx.force_unlock("")).await.unwrap());
    gone_everywhere(&conns, "forced").await;
    for (conn, fence) in conns.iter().zip(&fences) {
        assert_eq!(
            counter(conn, "forced:fence").await,
            fence.map(|fence| fence + 1),
            "the counter is raised by one"
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
    // The unlock returns at a majority; the last node's release may still be on its way.
    gone_everywhere(&conns, "forced").await;
    assert!(
        !at_once(mx.force_unlock("")).await.unwrap(),
        "free on every node"
    );
}

#[tokio::test]
async fn a_live_quorum_writer_nobody_replaced_loses_the_lock_at_its_next_renewal() {
    let nodes = Nodes::start(3);
    let conns = nodes.conns().await;
    let mx = nodes.mutex("forced", SHORT_TTL).await;
    let holder = mx.write().await.unwrap();
    let fences = counters_after(&conns, holder.fencing_token()).await;
    assert!(at_once(mx.force_unlock("")).await.unwrap());
    gone_everywhere(&conns, "forced").await;

    lost_at_next_renewal(&holder).await;
    let token = holder.fencing_token();
    assert!(
        !at_once(holder.unlock()).await.unwrap(),
        "nothing to release"
    );
    // Not taken back: the lock stays free on every node, the counters as the force left
    // them, over two more renewal periods.
    tokio::time::sleep(SHORT_TTL).await;
    gone_everywhere(&conns, "forced").await;
    for (conn, fence) in conns.iter().zip(&fences) {
        assert_eq!(
            counter(conn, "forced:fence").await,
            fence.map(|fence| fence + 1)
        );
    }
    let next = at_once(mx.try_write())
        .await
        .unwrap()
        .expect("the lock is free");
    assert!(next.fencing_token() > token);
    assert!(next.unlock().await.unwrap());
}

#[tokio::test]
async fn quorum_readers_nobody_replaced_all_lose_the_lock_at_their_next_renewal() {
    let nodes = Nodes::start(3);
    let conns = nodes.conns().await;
    let mx = nodes.mutex("forced", SHORT_TTL).await;
    let first = mx.read().await.unwrap();
    let second = mx.read().await.unwrap();
    read_everywhere(&conns, "forced", &[first.id(), second.id()]).await;
    counters_after(&conns, second.fencing_token()).await;
    assert!(at_once(mx.force_unlock("")).await.unwrap());
    gone_everywhere(&conns, "forced").await;

    lost_at_next_renewal(&first).await;
    lost_at_next_renewal(&second).await;
    tokio::time::sleep(SHORT_TTL).await;
    gone_everywhere(&conns, "forced").await;
}

#[tokio::test]
async fn a_waiting_writer_gets_the_lock_forced_free_and_the_holder_is_lost() {
    let nodes = Nodes::start(3);
    let conns = nodes.conns().await;
    let mx = nodes.mutex("forced", SHORT_TTL).await;
    let holder = mx.write().await.unwrap();
    let waiter = nodes.mutex("forced", SHORT_TTL).await;
    let waiting =
        tokio::spawn(async move { waiter.write().timeout(Duration::from_secs(30)).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiting.is_finished(),
        "the waiter got in beside the holder"
    );

    assert!(at_once(mx.force_unlock("")).await.unwrap());
    let next = tokio::time::timeout(LIVENESS, waiting)
        .await
        .expect("the waiter got the lock")
        .unwrap()
        .unwrap();
    assert!(next.fencing_token() > holder.fencing_token());
    lost_at_next_renewal(&holder).await;
    written_everywhere(&conns, "forced", next.id()).await;
    assert!(next.unlock().await.unwrap());
}

/// The mark is per node: a node that granted a token past the guard's (the key deleted,
/// the counter raised and the granted key set to it, as a forced release that reached
/// only that node leaves it) is not taken back, while a node that only lost the key, its
/// counter raised by another candidate's first round that won nothing, is; the guard,
/// held on a majority, holds on.
#[tokio::test]
async fn a_node_that_granted_past_the_token_is_not_taken_back_and_one_that_only_lost_the_key_is() {
    let nodes = Nodes::start(3);
    let conns = nodes.conns().await;
    let mx = nodes.mutex("forced", SHORT_TTL).await;
    let holder = mx.write().await.unwrap();
    written_everywhere(&conns, "forced", holder.id()).await;
    counters_after(&conns, holder.fencing_token()).await;
    raw::cmd::<i64>(&conns[0], "DEL", &["forced"]).await;
    let raised: i64 = raw::cmd(&conns[0], "INCR", &["forced:fence"]).await;
    let mark = raised.to_string();
    raw::cmd::<()>(
        &conns[0],
        "SET",
        &["forced:fence-granted", &mark, "PX", "60000"],
    )
    .await;
    raw::cmd::<i64>(&conns[1], "DEL", &["forced"]).await;
    raw::cmd::<i64>(&conns[1], "INCR", &["forced:fence"]).await;

    let retaken = eventually(|| async {
        raw::get(&conns[1], "forced").await.as_deref() == Some(holder.id())
    })
    .await;
    assert!(
        retaken,
        "node 1, which only lost the key (its counter raised by a failed first round), is taken back"
    );
    tokio::time::sleep(SHORT_TTL).await;
    assert!(
        !raw::exists(&conns[0], "forced").await,
        "node 0, which granted a token past the guard's, is not taken back"
    );
    assert!(!holder.is_cancelled(), "{:?}", holder.cancel_reason());
    assert!(holder.unlock().await.unwrap());
}

#[tokio::test]
async fn a_lock_held_on_one_node_only_is_reported_held_and_cleared() {
    let nodes = Nodes::start(3);
    let conns = nodes.conns().await;
    let mx = nodes.mutex("forced", TTL).await;
    let go = GoPeer::new(conns[1].clone(), 60_000);
    assert_eq!(go.write("forced", &GoPeer::new_id(), false).await, None);
    assert!(at_once(mx.force_unlock("")).await.unwrap());
    gone_everywhere(&conns, "forced").await;
}

#[tokio::test]
async fn a_node_down_changes_nothing_and_a_majority_down_is_no_quorum() {
    let mut nodes = Nodes::start(3);
    let conns = nodes.conns().await;
    let mx = nodes.mutex("forced", TTL).await;
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
