//! Quorum mode with the options and calls a mutex on one server has: downgrade,
//! reentrancy, lock intent, a task tracker; `exec`, which a quorum refuses; and what
//! unlock, a try and a lost guard do when nodes are down or taken over.

use std::time::Duration;

use crate::common::either::Either;
use crate::common::quorum::{gone_everywhere, read_everywhere, written_everywhere, Fault, Nodes};
use crate::common::{at_once, eventually, raw, LIVENESS};
use redismutex::{CancelReason, Error, ReadGuard, RwMutex};
use tokio_util::task::TaskTracker;

const TTL: Duration = Duration::from_secs(2);

#[tokio::test]
async fn a_downgrade_turns_the_lock_on_every_node_and_lets_readers_in() {
    let nodes = Nodes::start(3);
    let conns = nodes.conns().await;
    let mx = nodes.mutex("opt", TTL).await;
    let guard = mx.write().await.unwrap();
    assert!(mx.try_read().await.unwrap().is_none());
    let token = guard.fencing_token();
    let reader: ReadGuard = guard.downgrade().await.unwrap();
    assert_eq!(reader.fencing_token(), token);
    read_everywhere(&conns, "opt", &[reader.id()]).await;
    let other = mx
        .try_read()
        .await
        .unwrap()
        .expect("readers share after a downgrade");
    assert!(mx.try_write().await.unwrap().is_none());
    other.unlock().await.unwrap();
    assert!(reader.unlock().await.unwrap());
    gone_everywhere(&conns, "opt").await;
}

#[tokio::test]
async fn a_downgrade_with_a_node_frozen_holds_on_the_majority_and_releases_both_forms() {
    let mut nodes = Nodes::start(3);
    let conns = nodes.conns().await;
    let mx = nodes.mutex("opt", TTL).await;
    let guard = mx.write().await.unwrap();
    written_everywhere(&conns, "opt", guard.id()).await;
    nodes.fault(Fault::Freeze, [2]);
    let reader = at_once(guard.downgrade()).await.unwrap();
    for conn in &conns[..2] {
        assert_eq!(
            raw::members(conn, "opt").await,
            vec![reader.id().to_owned()]
        );
    }
    let other = mx
        .try_read()
        .await
        .unwrap()
        .expect("a majority is read-held");
    other.unlock().await.unwrap();
    assert!(reader.unlock().await.unwrap());
    nodes.thaw_all();
    // The frozen node still had the writer's string under the same id: removed too.
    gone_everywhere(&conns, "opt").await;
}

#[tokio::test]
async fn a_reentrant_quorum_mutex_nests_without_a_round_trip() {
    let nodes = Nodes::start(3);
    let mx = RwMutex::builder(nodes.quorum().await, "opt")
        .ttl(TTL)
        .reentrant(true)
        .build()
        .unwrap();
    let outer = mx.write().await.unwrap();
    let inner = at_once(mx.write()).await.unwrap();
    assert_eq!(
        (inner.id(), inner.fencing_token()),
        (outer.id(), outer.fencing_token())
    );
    assert!(
        matches!(mx.try_read().await, Ok(Some(_))),
        "a read inside the write nests too"
    );
    drop(inner);
    assert!(!outer.is_cancelled());
    outer.unlock().await.unwrap();
}

#[tokio::test]
async fn a_waiting_writer_keeps_new_readers_out_with_the_lock_intent() {
    let nodes = Nodes::start(3);
    let conns = nodes.conns().await;
    let mx = RwMutex::builder(nodes.quorum().await, "opt")
        .ttl(TTL)
        .lock_intent(true)
        .build()
        .unwrap();
    let reader = mx.read().await.unwrap();
    let writer = {
        let mx = mx.clone();
        tokio::spawn(async move { mx.write().await })
    };
    let intents = || async {
        let mut set = 0;
        for conn in &conns {
            set += usize::from(raw::exists(conn, "opt:lock-intent").await);
        }
        set
    };
    assert!(
        eventually(|| async { intents().await >= 2 }).await,
        "intent on a majority"
    );
    assert!(
        mx.try_read().await.unwrap().is_none(),
        "new readers stay out"
    );
    reader.unlock().await.unwrap();
    let writer = tokio::time::timeout(LIVENESS, writer)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        eventually(|| async { intents().await == 0 }).await,
        "intent cleared"
    );
    writer.unlock().await.unwrap();
}

#[tokio::test]
async fn the_task_tracker_waits_for_the_releases_past_the_majority() {
    let mut nodes = Nodes::start(3);
    let conns = nodes.conns().await;
    let tracker = TaskTracker::new();
    let mx = RwMutex::builder(nodes.quorum().await, "opt")
        .ttl(TTL)
        .task_tracker(tracker.clone())
        .build()
        .unwrap();
    let guard = mx.write().await.unwrap();
    written_everywhere(&conns, "opt", guard.id()).await;
    nodes.fault(Fault::Freeze, [2]);
    assert!(
        at_once(guard.unlock()).await.unwrap(),
        "returns at the majority"
    );
    tracker.close();
    assert!(
        !tracker.is_empty(),
        "the frozen node's release is still in flight"
    );
    nodes.thaw_all();
    tokio::time::timeout(LIVENESS, tracker.wait())
        .await
        .unwrap();
    gone_everywhere(&conns, "opt").await;
}

#[tokio::test]
async fn an_unlock_that_reaches_no_majority_is_an_error_not_a_loss() {
    let mut nodes = Nodes::start(3);
    let mx = nodes.mutex("opt", TTL).await;
    let guard = mx.write().await.unwrap();
    nodes.fault(Fault::Freeze, [1, 2]);
    match guard.unlock().await {
        Err(Error::NoQuorum {
            answered: 1,
            needed: 2,
            nodes: 3,
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
    nodes.thaw_all();
}

#[tokio::test]
async fn a_try_that_hears_too_few_nodes_is_no_quorum_even_when_one_says_busy() {
    let mut nodes = Nodes::start(3);
    let conns = nodes.conns().await;
    let mx = nodes.mutex("opt", TTL).await;
    raw::cmd::<()>(&conns[0], "SET", &["opt", "someone-else", "PX", "20000"]).await;
    nodes.fault(Fault::Freeze, [1, 2]);
    assert!(matches!(
        mx.try_write().await,
        Err(Error::NoQuorum { answered: 1, .. })
    ));
    nodes.thaw_all();
    // With a majority answering, the same key is busy.
    raw::cmd::<()>(&conns[1], "SET", &["opt", "someone-else", "PX", "20000"]).await;
    assert!(mx.try_write().await.unwrap().is_none());
}

#[tokio::test]
async fn a_lost_guard_removes_its_id_from_the_nodes_that_still_hold_it() {
    let nodes = Nodes::start(3);
    let conns = nodes.conns().await;
    let mx = nodes.mutex("opt", TTL).await;
    let guard = mx.write().await.unwrap();
    written_everywhere(&conns, "opt", guard.id()).await;
    for conn in &conns[..2] {
        raw::cmd::<()>(conn, "SET", &["opt", "someone-else", "PX", "20000"]).await;
    }
    tokio::time::timeout(LIVENESS, guard.cancelled())
        .await
        .unwrap();
    assert_eq!(guard.cancel_reason(), Some(CancelReason::Lost));
    // Its key there would live on for up to a TTL (it was refreshed 1 s ago at most);
    // the lost guard's release removes it at once.
    let gone = tokio::time::timeout(Duration::from_millis(500), async {
        while raw::exists(&conns[2], "opt").await {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    assert!(
        gone.await.is_ok(),
        "the third node no longer holds the lost guard's id"
    );
    for conn in &conns[..2] {
        assert_eq!(raw::get(conn, "opt").await.as_deref(), Some("someone-else"));
    }
}

/// `WriteGuard::exec` over a quorum is refused with `Error::InvalidOptions` saying why, and
/// without a round trip: no node is asked about the commands, runs a script or holds any
/// key of the pipeline.
#[tokio::test]
async fn exec_over_a_quorum_is_refused_saying_why_and_nothing_reaches_a_node() {
    let nodes = Nodes::start(3);
    let conns = nodes.conns().await;
    // Long enough that no refresh runs during the test.
    let mx = RwMutex::builder(nodes.quorum().await, "opt")
        .ttl(Duration::from_secs(30))
        .build()
        .unwrap();
    let writer = Either::from(mx.write().key("w").await.unwrap());
    let reader = Either::from(mx.read().key("r").await.unwrap());
    written_everywhere(&conns, "opt:w", writer.id()).await;
    read_everywhere(&conns, "opt:r", &[reader.id()]).await;
    // What each node has run so far: the acquisitions' scripts.
    let counted = ["evalsha", "eval", "command|info", "command|getkeys"];
    let mut before = Vec::new();
    for conn in &conns {
        for command in counted {
            before.push(raw::calls(conn, command).await);
        }
    }

    let mut write = redis::pipe();
    write
        .set("data", "must not be written")
        .ignore()
        .incr("data:writes", 1);
    // The reader's pipeline only reads: refused for the quorum, not for a write.
    let mut read = redis::pipe();
    read.get("data");
    for (guard, lock_key, pipe) in [(&writer, "opt:w", &write), (&reader, "opt:r", &read)] {
        let refused = guard.exec::<redis::Value>(pipe).await;
        let Err(Error::InvalidOptions(why)) = &refused else {
            panic!("{refused:?}");
        };
        assert!(why.contains(&format!("\"{lock_key}\"")), "{why}");
        assert!(why.contains("quorum"), "{why}");
        assert!(why.contains("atomically"), "{why}");
        assert!(why.contains("fencing token"), "{why}");
        assert!(!guard.is_cancelled(), "a refusal is no loss");
    }

    let mut after = Vec::new();
    for conn in &conns {
        for command in counted {
            after.push(raw::calls(conn, command).await);
        }
        assert!(!raw::exists(conn, "data").await);
        assert!(!raw::exists(conn, "data:writes").await);
    }
    assert_eq!(
        after, before,
        "a node was sent something ({counted:?} per node)"
    );
    assert!(writer.unlock().await.unwrap());
    assert!(reader.unlock().await.unwrap());
}
