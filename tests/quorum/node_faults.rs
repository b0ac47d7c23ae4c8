//! Quorum mode (Redlock) under faults: a frozen or killed minority changes nothing; a
//! frozen or killed majority gives `NoQuorum` or `Timeout` in their bounds, a wait rides
//! it out, and a held guard's token fires by its deadline; a majority taken over is
//! `Lost`; a minority that lost the key, or was restarted empty, gets it back. Each test
//! runs on 3 and on 5 nodes.

use std::time::Duration;

use crate::common::either::Either;
use crate::common::quorum::{
    gone_everywhere, on_3_and_5_nodes, per_node_bound, read_everywhere, Fault, Nodes,
};
use crate::common::{at_once, eventually, raw, LIVENESS};
use redis::aio::MultiplexedConnection;
use redismutex::{CancelReason, Error, Guard, RwMutex};
use tokio::time::Instant;

const TTL: Duration = Duration::from_secs(2);

/// A generous bound for one request when some nodes do not answer: the per-node bound
/// (TTL/10 = 200 ms) plus a second for a noisy machine.
fn bound() -> Duration {
    per_node_bound(TTL) + Duration::from_secs(1)
}

/// Awaits `fut`, failing if it takes longer than [`bound`]; returns its output.
async fn in_bound<T>(what: &str, fut: impl std::future::IntoFuture<Output = T>) -> T {
    let started = Instant::now();
    let output = tokio::time::timeout(LIVENESS, fut)
        .await
        .unwrap_or_else(|_| panic!("{what} hung"));
    let took = started.elapsed();
    assert!(took < bound(), "{what} took {took:?}, over {:?}", bound());
    output
}

/// How many of `conns` hold `id` at `key` (as the writer's string).
async fn holding(conns: &[MultiplexedConnection], key: &str, id: &str) -> usize {
    let mut count = 0;
    for conn in conns {
        if raw::get(conn, key).await.as_deref() == Some(id) {
            count += 1;
        }
    }
    count
}

on_3_and_5_nodes!(
    a_frozen_minority_changes_nothing,
    a_killed_minority_changes_nothing,
    a_frozen_majority_gives_no_quorum_in_bounds,
    a_killed_majority_gives_no_quorum_in_bounds,
    a_wait_rides_out_a_frozen_majority,
    a_frozen_majority_fires_the_token_by_the_deadline,
    a_killed_majority_fires_the_token_by_the_deadline,
    a_majority_taken_over_is_lost,
    a_minority_that_lost_the_key_gets_it_back,
    a_minority_restarted_empty_gets_the_key_back,
);

async fn a_frozen_minority_changes_nothing(n: usize) {
    faulty_minority_changes_nothing(n, Fault::Freeze).await;
}

async fn a_killed_minority_changes_nothing(n: usize) {
    faulty_minority_changes_nothing(n, Fault::Kill).await;
}

/// With a minority frozen or killed: a write takes at most about the per-node bound and
/// holds on the healthy nodes, another client is kept out, the guard survives three
/// refresh periods with its deadline moving on, and its unlock, and a read, come in
/// bounds too.
async fn faulty_minority_changes_nothing(n: usize, fault: Fault) {
    let mut nodes = Nodes::start(n);
    let conns = nodes.conns().await;
    let mx = nodes.mutex("steady", TTL).await;
    let other = nodes.mutex("steady", TTL).await;
    let faulty = nodes.minority();
    let healthy = &conns[faulty..];
    nodes.fault(fault, 0..faulty);

    let guard = in_bound("write", mx.write()).await.unwrap();
    assert_eq!(holding(healthy, "steady", guard.id()).await, healthy.len());
    let blocked = in_bound("another client's try_write", other.try_write()).await;
    assert!(blocked.unwrap().is_none(), "two writers at once");

    let first = guard.valid_until();
    tokio::time::sleep(TTL * 3 / 2 + TTL / 4).await; // three refresh periods (TTL/2)
    assert!(!guard.is_cancelled(), "{:?}", guard.cancel_reason());
    assert!(
        guard.valid_until() > first + TTL / 2,
        "the deadline did not move: {:?} after {:?}",
        guard.valid_until(),
        first
    );
    for conn in healthy {
        assert_eq!(raw::get(conn, "steady").await.as_deref(), Some(guard.id()));
        assert!(raw::pttl(conn, "steady").await > 0);
    }
    assert!(in_bound("unlock", guard.unlock()).await.unwrap());
    gone_everywhere(healthy, "steady").await;

    let reader = in_bound("read", other.read()).await.unwrap();
    read_everywhere(healthy, "steady", &[reader.id()]).await;
    assert!(in_bound("reader's unlock", reader.unlock()).await.unwrap());
    gone_everywhere(healthy, "steady").await;
    nodes.thaw_all();
}

async fn a_frozen_majority_gives_no_quorum_in_bounds(n: usize) {
    lost_majority_gives_no_quorum(n, Fault::Freeze).await;
}

async fn a_killed_majority_gives_no_quorum_in_bounds(n: usize) {
    lost_majority_gives_no_quorum(n, Fault::Kill).await;
}

/// With too few nodes answering for a majority: `try_write` and `try_read` give
/// `NoQuorum` naming the key and counting the nodes that answered, in about the per-node
/// bound; `write()`/`read()` with a timeout give `Timeout` soon after it; the nodes that
/// answered keep nothing. A frozen majority, thawed, runs what it was sent in order and
/// so keeps nothing either, and the lock is then free.
async fn lost_majority_gives_no_quorum(n: usize, fault: Fault) {
    let mut nodes = Nodes::start(n);
    let conns = nodes.conns().await;
    let mx = nodes.mutex("nq", TTL).await;
    let down = nodes.lost_majority();
    nodes.fault(fault, 0..down);

    for (what, result) in [
        (
            "try_write",
            in_bound("try_write", mx.try_write())
                .await
                .map(|got| got.map(Either::from)),
        ),
        (
            "try_read",
            in_bound("try_read", mx.try_read())
                .await
                .map(|got| got.map(Either::from)),
        ),
    ] {
        match result {
            Err(Error::NoQuorum {
                key,
                answered,
                needed,
                nodes: total,
                ..
            }) => {
                assert_eq!(key, "nq", "{what}");
                assert_eq!(answered, n - down, "{what}: answered");
                assert_eq!(needed, n / 2 + 1, "{what}: needed");
                assert_eq!(total, n, "{what}: nodes");
            }
            other => panic!("{what}: expected NoQuorum, got {other:?}"),
        }
    }

    let wait = Duration::from_millis(600);
    for what in ["write", "read"] {
        let started = Instant::now();
        let result = match what {
            "write" => at_once(mx.write().timeout(wait)).await.map(Either::from),
            _ => at_once(mx.read().timeout(wait)).await.map(Either::from),
        };
        let took = started.elapsed();
        assert!(matches!(result, Err(Error::Timeout)), "{what}: {result:?}");
        assert!(took < wait + bound(), "{what} timed out after {took:?}");
    }

    gone_everywhere(&conns[down..], "nq").await; // the nodes that answered
    if fault == Fault::Freeze {
        nodes.thaw_all();
        gone_everywhere(&conns, "nq").await;
        let guard = at_once(mx.try_write()).await.unwrap();
        assert!(guard.is_some(), "the lock is free after the thaw");
    }
}

/// A `write()` started while a majority is frozen keeps trying through `NoQuorum` and
/// gets the lock, on a majority, once the nodes are thawed.
async fn a_wait_rides_out_a_frozen_majority(n: usize) {
    let mut nodes = Nodes::start(n);
    let conns = nodes.conns().await;
    let mx = nodes.mutex("ride", TTL).await;
    nodes.fault(Fault::Freeze, 0..nodes.lost_majority());

    let waiting = tokio::spawn(async move { mx.write().timeout(LIVENESS * 3).await });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!waiting.is_finished(), "{:?}", waiting.await);
    nodes.thaw_all();
    let guard = tokio::time::timeout(LIVENESS, waiting)
        .await
        .expect("the wait ended after the thaw")
        .unwrap()
        .expect("the wait got the lock");
    assert!(holding(&conns, "ride", guard.id()).await >= nodes.majority());
    assert!(!guard.is_cancelled());
}

async fn a_frozen_majority_fires_the_token_by_the_deadline(n: usize) {
    lost_majority_fires_the_token(n, Fault::Freeze).await;
}

async fn a_killed_majority_fires_the_token_by_the_deadline(n: usize) {
    lost_majority_fires_the_token(n, Fault::Kill).await;
}

/// A held guard whose majority stops answering: its token (a child of it, so the
/// background task fires it, not a look) fires with `Expired` no later than the
/// validity deadline plus a small margin, and within a TTL of the fault.
async fn lost_majority_fires_the_token(n: usize, fault: Fault) {
    const MARGIN: Duration = Duration::from_millis(500);
    let mut nodes = Nodes::start(n);
    let mx = nodes.mutex("held", TTL).await;
    let guard = mx.write().await.unwrap();
    let child = guard.cancellation_token().child_token();
    tokio::time::sleep(TTL / 4).await; // between two refreshes

    let faulted = Instant::now();
    nodes.fault(fault, 0..nodes.lost_majority());
    tokio::time::timeout(TTL + LIVENESS, child.cancelled())
        .await
        .expect("the token fired");
    let fired = Instant::now();
    assert!(
        fired <= guard.valid_until() + MARGIN,
        "fired {:?} after the deadline",
        fired - guard.valid_until()
    );
    assert!(
        fired - faulted <= TTL + MARGIN,
        "fired {:?} after the fault",
        fired - faulted
    );
    assert_eq!(guard.cancel_reason(), Some(CancelReason::Expired));
    drop(guard);
    nodes.thaw_all();
}

/// Another client's id written over ours on a majority (as after our keys expired
/// there): the refresh finds a majority refusing, the token fires with `Lost`, the unlock
/// reports it, and the other client's keys stay.
async fn a_majority_taken_over_is_lost(n: usize) {
    let nodes = Nodes::start(n);
    let conns = nodes.conns().await;
    let guard = nodes.mutex("over", TTL).await.write().await.unwrap();
    let majority = nodes.majority();
    for conn in &conns[..majority] {
        raw::cmd::<()>(conn, "SET", &["over", "someone-else", "PX", "60000"]).await;
    }
    tokio::time::timeout(LIVENESS, guard.cancelled())
        .await
        .expect("the loss was noticed");
    assert_eq!(guard.cancel_reason(), Some(CancelReason::Lost));
    assert!(
        !at_once(guard.unlock()).await.unwrap(),
        "a lost lock unlocks as false"
    );
    for conn in &conns[..majority] {
        assert_eq!(
            raw::get(conn, "over").await.as_deref(),
            Some("someone-else")
        );
    }
}

/// The key deleted on a minority (expired there, say): the refresh takes it again there,
/// and the guard holds on.
async fn a_minority_that_lost_the_key_gets_it_back(n: usize) {
    let nodes = Nodes::start(n);
    let conns = nodes.conns().await;
    let guard = nodes.mutex("back", TTL).await.write().await.unwrap();
    for conn in &conns[..nodes.minority()] {
        raw::cmd::<i64>(conn, "DEL", &["back"]).await;
    }
    retaken_everywhere(&conns, "back", &guard).await;
}

/// A minority killed and restarted empty under a guard on connection managers (which
/// reconnect): the refresh takes the key again there, and the guard holds on.
async fn a_minority_restarted_empty_gets_the_key_back(n: usize) {
    let mut nodes = Nodes::start(n);
    let mx = RwMutex::builder(nodes.managed_quorum().await, "reborn")
        .ttl(TTL)
        .build()
        .unwrap();
    let guard = mx.write().await.unwrap();
    for node in 0..nodes.minority() {
        nodes.restart_empty(node);
    }
    let conns = nodes.conns().await;
    assert!(
        !raw::exists(&conns[0], "reborn").await,
        "node 0 came back empty"
    );
    retaken_everywhere(&conns, "reborn", &guard).await;
}

/// Every node holds `guard`'s id at `key` again within a few refreshes, and the guard
/// was never cancelled.
async fn retaken_everywhere(conns: &[MultiplexedConnection], key: &str, guard: &impl Guard) {
    let retaken =
        eventually(|| async { holding(conns, key, guard.id()).await == conns.len() }).await;
    assert!(
        retaken,
        "{} of {} nodes hold the key",
        holding(conns, key, guard.id()).await,
        conns.len()
    );
    assert!(!guard.is_cancelled(), "{:?}", guard.cancel_reason());
    tokio::time::sleep(TTL).await;
    assert!(!guard.is_cancelled(), "{:?}", guard.cancel_reason());
    assert_eq!(holding(conns, key, guard.id()).await, conns.len());
}
