//! Quorum mode (Redlock) with every node up: exclusion and no lost update across
//! clients, shared reads, each node's keys, fencing tokens across clients and across
//! nodes restarted empty, a failed attempt leaving nothing, a minority held by others,
//! options a quorum refuses, and a notified hand-off. Each test runs on 3 and on 5
//! nodes; faults are in `tests/quorum/node_faults.rs`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::either::Either;
use crate::common::lost_update::unguarded_increment;
use crate::common::quorum::{
    counter, gone_everywhere, on_3_and_5_nodes, on_every_node, raised_everywhere, read_everywhere,
    written_everywhere, Nodes,
};
use crate::common::{at_once, eventually, join_within, raw, LIVENESS};
use redis::aio::MultiplexedConnection;
use redismutex::{Error, Notifier, Quorum, ReadGuard, RwMutex, Semaphore, WriteGuard};
use tokio::time::Instant;

type QuorumMutex = RwMutex<Quorum<MultiplexedConnection>>;

const TTL: Duration = Duration::from_secs(2);

on_3_and_5_nodes!(
    no_update_is_lost_across_clients,
    readers_share_and_a_writer_waits_for_both,
    every_node_keeps_the_single_server_layout,
    fencing_tokens_grow_across_clients,
    fencing_tokens_grow_across_nodes_restarted_empty,
    a_failed_attempt_leaves_nothing_on_the_nodes_that_said_yes,
    a_minority_held_by_others_still_grants,
    a_release_wakes_a_notified_waiter,
);

/// Three clients, twelve tasks, ten increments each of a counter read and written back
/// without any lock of its own: only the quorum lock keeps the updates from being lost.
/// Inside the lock, no other task is inside, and the tokens come in increasing order.
async fn no_update_is_lost_across_clients(n: usize) {
    const CLIENTS: usize = 3;
    const TASKS: usize = 12;
    const INCREMENTS: usize = 10;
    let nodes = Nodes::start(n);
    let store = nodes.server(0).conn().await;
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        clients.push(nodes.mutex("counter-lock", TTL).await);
    }
    let inside = Arc::new(AtomicUsize::new(0));
    let tokens = Arc::new(Mutex::new(Vec::new()));

    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..TASKS {
        let mx = clients[task % CLIENTS].clone();
        let store = store.clone();
        let (inside, tokens) = (Arc::clone(&inside), Arc::clone(&tokens));
        tasks.spawn(async move {
            for _ in 0..INCREMENTS {
                let guard = mx.write().timeout(Duration::from_secs(60)).await.unwrap();
                assert_eq!(
                    inside.fetch_add(1, Ordering::SeqCst),
                    0,
                    "two writers inside"
                );
                tokens.lock().unwrap().push(guard.fencing_token());
                unguarded_increment(&store, "counter").await;
                assert!(!guard.is_cancelled(), "{:?}", guard.cancel_reason());
                inside.fetch_sub(1, Ordering::SeqCst);
                assert!(guard.unlock().await.unwrap());
            }
        });
    }
    join_within(&mut tasks, Duration::from_secs(60), "a writer stalled").await;

    let total: i64 = raw::cmd(&store, "GET", &["counter"]).await;
    assert_eq!(total, (TASKS * INCREMENTS) as i64, "updates were lost");
    let tokens = tokens.lock().unwrap();
    assert!(
        tokens.windows(2).all(|pair| pair[0] < pair[1]),
        "tokens out of order: {tokens:?}"
    );
}

/// Two readers on two clients hold at once, as a set of both ids on every node; a writer
/// on a third client waits until both are gone.
async fn readers_share_and_a_writer_waits_for_both(n: usize) {
    let nodes = Nodes::start(n);
    let conns = nodes.conns().await;
    let a: ReadGuard = nodes.mutex("shared", TTL).await.read().await.unwrap();
    let b: ReadGuard = nodes.mutex("shared", TTL).await.read().await.unwrap();
    assert_ne!(a.id(), b.id());
    read_everywhere(&conns, "shared", &[a.id(), b.id()]).await;

    let writers = nodes.mutex("shared", TTL).await;
    assert!(at_once(writers.try_write()).await.unwrap().is_none());
    let waiting = tokio::spawn(async move { writers.write().timeout(LIVENESS * 3).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "a writer got in beside two readers");
    assert!(a.unlock().await.unwrap());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "a writer got in beside a reader");
    assert!(b.unlock().await.unwrap());

    let writer: WriteGuard = tokio::time::timeout(LIVENESS, waiting)
        .await
        .expect("the writer got in once the readers left")
        .unwrap()
        .unwrap();
    written_everywhere(&conns, "shared", writer.id()).await;
}

/// A write guard's id at `<name>:<key>` on every node with a PTTL of at most the TTL,
/// every node's fence counter raised to its token, a deadline within TTL − drift; its
/// unlock clears every node; a reader is a one-member set on every node.
async fn every_node_keeps_the_single_server_layout(n: usize) {
    let nodes = Nodes::start(n);
    let conns = nodes.conns().await;
    let mx = nodes.mutex("orders", TTL).await;

    let writer = mx.write().key("42").await.unwrap();
    let now = Instant::now();
    assert_eq!(writer.key(), "orders:42");
    assert!(writer.valid_until() > now, "acquired already expired");
    let drift = TTL / 100 + Duration::from_millis(2);
    assert!(
        writer.valid_until() <= now + TTL - drift,
        "the deadline is {:?} ahead, more than TTL − drift",
        writer.valid_until() - now
    );
    written_everywhere(&conns, "orders:42", writer.id()).await;
    on_every_node(&conns, "0 < PTTL <= TTL", |conn| async move {
        (1..=2000).contains(&raw::pttl(&conn, "orders:42").await)
    })
    .await;
    let token = writer.fencing_token();
    raised_everywhere(&conns, "orders:42:fence", token).await;
    assert!(writer.unlock().await.unwrap());
    gone_everywhere(&conns, "orders:42").await;

    let reader = mx.read().key("42").await.unwrap();
    assert!(reader.fencing_token() > token);
    read_everywhere(&conns, "orders:42", &[reader.id()]).await;
    assert!(reader.unlock().await.unwrap());
    gone_everywhere(&conns, "orders:42").await;
}

/// Nine acquisitions in turn on three clients (writers, a reader every third): each
/// token is larger than the one before, and every node's counter ends at least at the
/// last.
async fn fencing_tokens_grow_across_clients(n: usize) {
    let nodes = Nodes::start(n);
    let conns = nodes.conns().await;
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(nodes.mutex("fenced", TTL).await);
    }
    let mut last = 0;
    for round in 0..9 {
        let mx = &clients[round % 3];
        let guard = if round % 3 == 2 {
            Either::from(mx.read().await.unwrap())
        } else {
            Either::from(mx.write().await.unwrap())
        };
        assert!(
            guard.fencing_token() > last,
            "round {round}: {} after {last}",
            guard.fencing_token()
        );
        last = guard.fencing_token();
        assert!(guard.unlock().await.unwrap());
    }
    raised_everywhere(&conns, "fenced:fence", last).await;
}

/// A writer, a majority of the nodes restarted empty, a writer on a new client: the
/// second token is larger (the empty nodes start from their clocks). Then a majority's
/// counters are set far ahead of the clock, as if an earlier token had been minted by
/// nodes whose clocks ran ahead: the next token is above it, as every majority includes
/// one of them, and every node's counter is raised to it, the others too. So after a
/// minority restarts empty, the token after is larger still: every majority includes a
/// node that kept the raised counter, and without the raise the others' clocks are
/// behind. (One node's counter alone does not bind the next token: the majority that
/// decides may leave it out. Nor does a majority restarted empty under a counter ahead of
/// the clock: its first majority may be empty nodes alone.)
async fn fencing_tokens_grow_across_nodes_restarted_empty(n: usize) {
    let mut nodes = Nodes::start(n);
    let write_token = |mx: QuorumMutex| async move {
        let guard = mx.write().await.unwrap();
        let token = guard.fencing_token();
        assert!(guard.unlock().await.unwrap());
        token
    };

    let first = write_token(nodes.mutex("fr", TTL).await).await;
    for node in 0..nodes.majority() {
        nodes.restart_empty(node);
    }
    let conns = nodes.conns().await;
    for conn in &conns[..nodes.majority()] {
        assert_eq!(counter(conn, "fr:fence").await, None, "came back empty");
    }
    let second = write_token(nodes.mutex("fr", TTL).await).await;
    assert!(second > first, "{second} after {first}, across restarts");

    let ahead = raw::server_us(&conns[0]).await + 100_000_000_000_000; // about 3 years
    let ahead_arg = ahead.to_string();
    for conn in &conns[..nodes.majority()] {
        raw::cmd::<()>(conn, "SET", &["fr:fence", &ahead_arg, "PX", "86400000"]).await;
    }
    let third = write_token(nodes.mutex("fr", TTL).await).await;
    assert!(
        third > ahead,
        "{third} is not above the majority's counter {ahead}"
    );
    raised_everywhere(&conns, "fr:fence", third).await;
    for node in 0..nodes.minority() {
        nodes.restart_empty(node);
    }
    let fourth = write_token(nodes.mutex("fr", TTL).await).await;
    assert!(
        fourth > third,
        "{fourth} after {third}: a minority restarted empty took the count back"
    );
}

/// Another client (a Go holder, say: plain SET PX) holds the lock on a majority. Tries,
/// and waits that time out, get nothing, leave nothing on the free nodes (no lock key, no
/// intent), and leave the holder's keys as they were.
async fn a_failed_attempt_leaves_nothing_on_the_nodes_that_said_yes(n: usize) {
    let nodes = Nodes::start(n);
    let conns = nodes.conns().await;
    let majority = nodes.majority();
    for conn in &conns[..majority] {
        raw::cmd::<()>(conn, "SET", &["busy", "go-holder", "PX", "20000"]).await;
    }
    let mx = nodes.mutex("busy", TTL).await;
    let intent = RwMutex::builder(nodes.quorum().await, "busy")
        .ttl(TTL)
        .lock_intent(true)
        .build()
        .unwrap();

    assert!(at_once(mx.try_write()).await.unwrap().is_none());
    assert!(at_once(mx.try_read()).await.unwrap().is_none());
    let short = Duration::from_millis(400);
    for result in [
        at_once(mx.write().timeout(short)).await.map(Either::from),
        at_once(mx.read().timeout(short)).await.map(Either::from),
        at_once(intent.write().timeout(short))
            .await
            .map(Either::from),
    ] {
        assert!(matches!(result, Err(Error::Timeout)), "{result:?}");
    }

    for (node, conn) in conns.iter().enumerate() {
        let clean = eventually(|| async {
            !raw::exists(conn, "busy:lock-intent").await
                && (node < majority || !raw::exists(conn, "busy").await)
        })
        .await;
        assert!(
            clean,
            "node {node} kept {:?} (type {}) and intent {:?}",
            raw::get(conn, "busy").await,
            raw::key_type(conn, "busy").await,
            raw::get(conn, "busy:lock-intent").await
        );
    }
    tokio::time::sleep(Duration::from_millis(300)).await; // nothing comes back late
    for (node, conn) in conns.iter().enumerate() {
        if node < majority {
            assert_eq!(raw::get(conn, "busy").await.as_deref(), Some("go-holder"));
            assert!(
                raw::pttl(conn, "busy").await > 15_000,
                "its TTL was changed"
            );
        } else {
            assert!(!raw::exists(conn, "busy").await, "node {node} kept our key");
        }
        assert!(!raw::exists(conn, "busy:lock-intent").await, "node {node}");
    }
}

/// Another client holds the lock on a minority only: a majority is free, so a try gets
/// it; the other client's keys stay, and a third client is kept out.
async fn a_minority_held_by_others_still_grants(n: usize) {
    let nodes = Nodes::start(n);
    let conns = nodes.conns().await;
    let minority = nodes.minority();
    for conn in &conns[..minority] {
        raw::cmd::<()>(conn, "SET", &["split", "go-holder", "PX", "20000"]).await;
    }
    let mx = nodes.mutex("split", TTL).await;
    let guard = at_once(mx.try_write())
        .await
        .unwrap()
        .expect("a free majority grants");
    assert!(at_once(nodes.mutex("split", TTL).await.try_read())
        .await
        .unwrap()
        .is_none());
    for (node, conn) in conns.iter().enumerate() {
        let expected = if node < minority {
            "go-holder"
        } else {
            guard.id()
        };
        assert_eq!(
            raw::get(conn, "split").await.as_deref(),
            Some(expected),
            "node {node}"
        );
    }
    assert!(guard.unlock().await.unwrap());
    gone_everywhere(&conns[minority..], "split").await;
    for conn in &conns[..minority] {
        assert_eq!(raw::get(conn, "split").await.as_deref(), Some("go-holder"));
    }
}

/// With `Notifier::quorum`, a writer waiting behind a holder (10 s TTL, so its fallback
/// timer is 5 s) gets the lock soon after the holder's unlock.
async fn a_release_wakes_a_notified_waiter(n: usize) {
    const LONG_TTL: Duration = Duration::from_secs(10);
    let nodes = Nodes::start(n);
    let conns = nodes.conns().await;
    let notified = |quorum: Quorum<MultiplexedConnection>| {
        RwMutex::builder(quorum, "jobs")
            .ttl(LONG_TTL)
            .notifier(Notifier::quorum(nodes.clients()))
            .build()
            .unwrap()
    };
    let holder = notified(nodes.quorum().await).write().await.unwrap();
    let waiter = notified(nodes.quorum().await);
    let waiting = tokio::spawn(async move {
        let guard = waiter.write().timeout(Duration::from_secs(30)).await;
        (Instant::now(), guard)
    });

    let subscribed = eventually(|| async {
        for conn in &conns {
            if raw::subscribers(conn, "jobs:released").await > 0 {
                return true;
            }
        }
        false
    })
    .await;
    assert!(subscribed, "no node has a subscriber on jobs:released");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiting.is_finished(),
        "the waiter got in beside the holder"
    );
    let released = Instant::now();
    assert!(holder.unlock().await.unwrap());
    let (acquired, guard) = tokio::time::timeout(LIVENESS, waiting)
        .await
        .expect("the waiter got the lock")
        .unwrap();
    let guard = guard.unwrap();
    let handoff = acquired - released;
    assert!(
        handoff < Duration::from_secs(2),
        "hand-off took {handoff:?}: the waiter slept until its 5 s fallback"
    );
    assert!(guard.unlock().await.unwrap());
}

#[tokio::test]
async fn a_quorum_refuses_what_it_cannot_do() {
    let nodes = Nodes::start(1);
    let conn = nodes.server(0).conn().await;

    let empty = Quorum::new(Vec::<MultiplexedConnection>::new());
    assert!(matches!(empty, Err(Error::InvalidOptions(_))), "{empty:?}");
    for size in 1..=6 {
        let quorum = Quorum::new(vec![conn.clone(); size]).unwrap();
        assert_eq!(quorum.nodes().len(), size);
        assert_eq!(quorum.majority(), size / 2 + 1, "{size} nodes");
    }

    let quorum = Quorum::new(vec![conn.clone(); 3]).unwrap();
    let fair = RwMutex::builder(quorum.clone(), "fair").fair(true).build();
    assert!(matches!(fair, Err(Error::InvalidOptions(_))), "{fair:?}");
    let semaphore = Semaphore::builder(quorum, "permits", 2).build();
    assert!(
        matches!(semaphore, Err(Error::InvalidOptions(_))),
        "{semaphore:?}"
    );
}
