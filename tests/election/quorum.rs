//! Leader election over a quorum of three independent servers (`tests/common/quorum.rs`):
//! candidates take turns (a try, a resign, a drop) with strictly growing terms, the lock
//! and the record on a majority of the nodes when a campaign returns (read on each node's
//! own connection); `leader` names the leader with every node up and with
//! one node frozen or killed, and is `NoQuorum` with two down; the observer with a quorum
//! notifier sees a campaign, a proclaim, a resign and a new leader, in order, each pushed;
//! a former leader (its lock deleted on a majority, a new leader in) has its `proclaim`
//! refused with `NotHeld`, its stale record on a minority at most. Ignored until the
//! crate does it: a node that a renewal takes back gets the record back too.

use std::time::Duration;

use crate::common::election::{all, holding, leader, record, record_of, sees, take_turns};
use crate::common::quorum::{written_everywhere, Fault, Nodes};
use crate::common::{at_once, raw, LIVENESS};
use redis::aio::MultiplexedConnection;
use redismutex::{CancelReason, Election, Error, Leadership, Notifier, Quorum};

type El = Election<Quorum<MultiplexedConnection>>;

const TTL: Duration = Duration::from_secs(2);
/// A TTL long enough that no renewal and no expiry-timed read of the observer comes within
/// [`LIVENESS`] of a change: an observer that sees the change within it was told by
/// Pub/Sub. No renewal takes back a node that lost the key either.
const LONG_TTL: Duration = Duration::from_secs(30);

/// An election named `name` on a quorum of new connections (a client of its own), with a
/// quorum notifier.
async fn election(nodes: &Nodes, name: &str, ttl: Duration) -> El {
    Election::builder(nodes.quorum().await, name)
        .ttl(ttl)
        .notifier(Notifier::quorum(nodes.clients()))
        .build()
        .expect("valid options")
}

/// `leading`'s lock and record (with `value`) are on a majority of `nodes` when its
/// campaign or proclaim has returned (a node that the campaign's majority did not wait
/// for may hold another's lock a little longer, and then refuse the record).
async fn published(
    nodes: &Nodes,
    conns: &[MultiplexedConnection],
    leading: &Leadership,
    value: &str,
) {
    let (lock, record) = (leading.guard().key(), record_of(leading, value));
    let record_key = format!("{lock}:leader");
    assert!(
        holding(conns, lock, leading.guard().id()).await >= nodes.majority(),
        "the lock on a majority"
    );
    assert!(
        holding(conns, &record_key, &record).await >= nodes.majority(),
        "the record {record} on a majority"
    );
}

#[tokio::test]
async fn candidates_take_turns_over_a_quorum_with_growing_terms() {
    let nodes = Nodes::start(3);
    let conns = nodes.conns().await;
    let candidates = [
        election(&nodes, "sched", TTL).await,
        election(&nodes, "sched", TTL).await,
        election(&nodes, "sched", TTL).await,
    ];
    let reader = election(&nodes, "sched", TTL).await;
    let on_a_majority = async |leading: &Leadership, value: &str| {
        published(&nodes, &conns, leading, value).await;
    };
    let (third, _, mut terms) = take_turns(&candidates, &reader, on_a_majority).await;

    assert!(third.resign().await.unwrap());
    assert_eq!(reader.leader().await.unwrap(), None);
    let fourth = at_once(candidates[0].try_campaign("a2"))
        .await
        .unwrap()
        .expect("nobody leads");
    terms.push(fourth.fencing_token());
    assert!(terms.windows(2).all(|pair| pair[0] < pair[1]), "{terms:?}");
    assert!(fourth.resign().await.unwrap());
}

#[tokio::test]
async fn leader_with_one_node_frozen_names_the_leader_and_with_two_is_no_quorum() {
    leader_with_nodes_down(Fault::Freeze).await;
}

#[tokio::test]
async fn leader_with_one_node_killed_names_the_leader_and_with_two_is_no_quorum() {
    leader_with_nodes_down(Fault::Kill).await;
}

/// `leader` names the leader with every node up and with one node down by `fault` (the
/// two left name it), and is `NoQuorum` naming the lock key with two down; each within
/// the liveness bound (a frozen node is given up on at the per-node bound).
async fn leader_with_nodes_down(fault: Fault) {
    let mut nodes = Nodes::start(3);
    let conns = nodes.conns().await;
    // Long enough that no renewal runs while nodes are down.
    let candidate = election(&nodes, "led", LONG_TTL).await;
    let reader = election(&nodes, "led", TTL).await;
    let leading = at_once(candidate.campaign("a")).await.unwrap();
    published(&nodes, &conns, &leading, "a").await;
    // The node the campaign did not wait for has both too, before any node goes down.
    written_everywhere(&conns, "led", leading.guard().id()).await;
    written_everywhere(&conns, "led:leader", &record_of(&leading, "a")).await;
    let expected = Some(leader("a", leading.fencing_token()));
    assert_eq!(at_once(reader.leader()).await.unwrap(), expected);

    nodes.fault(fault, [2]);
    assert_eq!(
        at_once(reader.leader()).await.unwrap(),
        expected,
        "two nodes of three name it"
    );
    nodes.fault(fault, [1]);
    match at_once(reader.leader()).await {
        Err(Error::NoQuorum {
            key,
            answered,
            needed,
            ..
        }) => {
            assert_eq!(key, "led");
            assert_eq!((answered, needed), (1, 2));
        }
        other => panic!("leader with two nodes of three down: {other:?}"),
    }
    if fault == Fault::Freeze {
        nodes.thaw_all();
        assert_eq!(at_once(reader.leader()).await.unwrap(), expected);
    }
}

#[tokio::test]
async fn the_observer_with_a_quorum_notifier_sees_campaign_proclaim_and_resign_in_order() {
    let nodes = Nodes::start(3);
    let a = election(&nodes, "obs", LONG_TTL).await;
    let b = election(&nodes, "obs", LONG_TTL).await;
    let watcher = election(&nodes, "obs", TTL).await;
    let seen = record(watcher.observe().await.unwrap());
    let mut expected = vec![None];

    // Each change is seen within LIVENESS, far sooner than the 30 s lease would make the
    // observer read again: it was pushed.
    let one = a.campaign("a").await.unwrap();
    let term = one.fencing_token();
    expected.push(Some(leader("a", term)));
    sees(&seen, expected[1].clone(), LIVENESS).await;
    one.proclaim("a2").await.unwrap();
    expected.push(Some(leader("a2", term)));
    sees(&seen, expected[2].clone(), LIVENESS).await;
    assert!(one.resign().await.unwrap());
    expected.push(None);
    sees(&seen, None, LIVENESS).await;

    let two = b.campaign("b").await.unwrap();
    assert!(two.fencing_token() > term);
    expected.push(Some(leader("b", two.fencing_token())));
    sees(&seen, expected[4].clone(), LIVENESS).await;
    drop(two);
    expected.push(None);
    sees(&seen, None, LIVENESS).await;

    assert_eq!(all(&seen), expected, "every change, in order");
}

#[tokio::test]
async fn a_former_leaders_proclaim_is_not_held_and_leaves_the_new_leaders_record_on_a_majority() {
    let nodes = Nodes::start(3);
    let conns = nodes.conns().await;
    let a = election(&nodes, "former", LONG_TTL).await;
    let b = election(&nodes, "former", LONG_TTL).await;
    let leading = at_once(a.campaign("one")).await.unwrap();
    published(&nodes, &conns, &leading, "one").await;
    leading.proclaim("two").await.unwrap();
    published(&nodes, &conns, &leading, "two").await;

    // The lock is deleted on a majority behind its back (once every node has it), and
    // another candidate leads.
    written_everywhere(&conns, "former", leading.guard().id()).await;
    for conn in &conns[..nodes.majority()] {
        let deleted: i64 = raw::cmd(conn, "DEL", &["former"]).await;
        assert_eq!(deleted, 1);
    }
    let next = at_once(b.try_campaign("three"))
        .await
        .unwrap()
        .expect("the lock is free on a majority");
    assert!(next.fencing_token() > leading.fencing_token());
    let current = record_of(&next, "three");
    assert!(holding(&conns, "former:leader", &current).await >= nodes.majority());
    assert_eq!(
        a.leader().await.unwrap(),
        Some(leader("three", next.fencing_token())),
        "a majority names the new leader"
    );

    match at_once(leading.proclaim("stale")).await {
        Err(Error::NotHeld { key, .. }) => assert_eq!(key, "former"),
        other => panic!("a former leader's proclaim: {other:?}"),
    }
    assert_eq!(leading.cancel_reason(), Some(CancelReason::Lost));
    // The stale record could be written only where the former leader's lock lingers: on
    // a minority. The new leader's record stays on its majority.
    let stale = record_of(&leading, "stale");
    assert!(holding(&conns, "former:leader", &stale).await <= nodes.minority());
    assert!(holding(&conns, "former:leader", &current).await >= nodes.majority());
    assert_eq!(
        b.leader().await.unwrap(),
        Some(leader("three", next.fencing_token()))
    );
    assert!(matches!(
        at_once(leading.proclaim("again")).await,
        Err(Error::NotHeld { .. })
    ));
    assert!(next.resign().await.unwrap());
}

/// A node that lost the lock and the record (restarted empty, say) gets the lock back at
/// the leader's next renewal, but the record only at the leader's next rewrite of it,
/// every half of the fence retention (12 h by default). A read counts the lock's holders
/// and the records apart, so with one more node down the leader is still named: a
/// majority holds its lock, and the one node left with its record says what it
/// published.
#[tokio::test]
async fn a_node_retaken_without_its_record_still_counts_for_the_leader() {
    let mut nodes = Nodes::start(3);
    let conns = nodes.conns().await;
    let candidate = election(&nodes, "retaken", TTL).await;
    let reader = election(&nodes, "retaken", TTL).await;
    let leading = at_once(candidate.campaign("a")).await.unwrap();
    let current = record_of(&leading, "a");
    written_everywhere(&conns, "retaken:leader", &current).await;
    // Node 2 loses both keys, as a node restarted empty does; the renewal takes it back.
    let _: i64 = raw::cmd(&conns[2], "DEL", &["retaken", "retaken:leader"]).await;
    written_everywhere(&conns, "retaken", leading.guard().id()).await;
    assert!(
        !raw::exists(&conns[2], "retaken:leader").await,
        "no record on node 2"
    );
    nodes.fault(Fault::Kill, [0]);
    assert!(!leading.is_cancelled(), "it holds nodes 1 and 2");
    assert_eq!(
        at_once(reader.leader()).await.unwrap(),
        Some(leader("a", leading.fencing_token()))
    );
}
