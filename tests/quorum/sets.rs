//! `lock_all` and `try_lock_all` over a quorum: each node takes the whole set in one
//! script or nothing, and the set is held once a majority took it. Every key held on
//! every node with tokens past the earlier single locks' and the counters raised; a set
//! blocked by a single lock changes nothing, waits and is woken (or polls) until the
//! release; a set that wins too few nodes releases what it took; a frozen minority
//! changes nothing, a frozen majority gives `NoQuorum`; a node that refused the set takes
//! its keys once free; sets in opposite orders neither deadlock nor overlap; `exec` is
//! refused. Each test but the last runs on 3 and on 5 nodes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::quorum::{
    gone_everywhere, on_3_and_5_nodes, per_node_bound, raised_everywhere, read_everywhere,
    written_everywhere, Fault, Nodes,
};
use crate::common::{at_once, eventually, join_within, raw, LIVENESS};
use redis::aio::MultiplexedConnection;
use redismutex::{Error, MultiGuard, Notifier, Quorum, RwMutex};
use tokio::time::Instant;

type QuorumMutex = RwMutex<Quorum<MultiplexedConnection>>;

const TTL: Duration = Duration::from_secs(2);

on_3_and_5_nodes!(
    a_set_holds_every_key_on_every_node_with_larger_tokens,
    a_set_blocked_by_a_single_lock_changes_nothing,
    a_waiting_set_is_woken_by_the_release,
    a_polling_set_gets_in_after_the_release,
    a_set_that_wins_too_few_nodes_releases_what_it_took,
    a_frozen_minority_does_not_stop_a_set,
    a_frozen_majority_gives_no_quorum_and_leaves_nothing,
    a_node_that_refused_the_set_takes_its_keys_once_free,
    sets_in_opposite_orders_neither_deadlock_nor_overlap,
);

/// A mutex named `bank` with `ttl` over a quorum of new connections to `nodes`, with the
/// lock intent on.
async fn bank(nodes: &Nodes, ttl: Duration) -> QuorumMutex {
    RwMutex::builder(nodes.quorum().await, "bank")
        .ttl(ttl)
        .lock_intent(true)
        .build()
        .unwrap()
}

/// A generous bound for one request when some nodes do not answer: the per-node bound
/// plus a second for a noisy machine.
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

/// How many of `conns` hold `id` at `key`, as its writer's string or among its readers.
async fn holding(conns: &[MultiplexedConnection], key: &str, id: &str) -> usize {
    let mut count = 0;
    for conn in conns {
        let held = match raw::key_type(conn, key).await.as_str() {
            "string" => raw::get(conn, key).await.as_deref() == Some(id),
            "set" => raw::members(conn, key).await.iter().any(|m| m == id),
            _ => false,
        };
        count += usize::from(held);
    }
    count
}

/// Whether any of `conns` has `key`.
async fn anywhere(conns: &[MultiplexedConnection], key: &str) -> bool {
    for conn in conns {
        if raw::exists(conn, key).await {
            return true;
        }
    }
    false
}

/// Single locks on `a` (write) and `rates` (read), then a set writing `a` and `b` and
/// reading `rates` on another client: every node holds each key as a single lock holds
/// it, each key's token is larger than the single lock's before it and every node's
/// counter is raised to it; single locks see the set; its unlock clears every node.
async fn a_set_holds_every_key_on_every_node_with_larger_tokens(n: usize) {
    let nodes = Nodes::start(n);
    let conns = nodes.conns().await;
    let single = bank(&nodes, TTL).await;
    let writer = single.write().key("a").await.unwrap();
    let earlier_a = writer.fencing_token();
    assert!(writer.unlock().await.unwrap());
    let reader = single.read().key("rates").await.unwrap();
    let earlier_rates = reader.fencing_token();
    assert!(reader.unlock().await.unwrap());

    let set: MultiGuard = bank(&nodes, TTL)
        .await
        .lock_all()
        .write(["a", "b"])
        .read(["rates"])
        .await
        .unwrap();
    let id = set.id().to_owned();
    written_everywhere(&conns, "bank:a", &id).await;
    written_everywhere(&conns, "bank:b", &id).await;
    read_everywhere(&conns, "bank:rates", &[&id]).await;
    let token = |key| set.fencing_token(key).unwrap();
    assert!(token("a") > earlier_a, "{} after {earlier_a}", token("a"));
    assert!(
        token("rates") > earlier_rates,
        "{} after {earlier_rates}",
        token("rates")
    );
    for key in ["a", "b", "rates"] {
        raised_everywhere(&conns, &format!("bank:{key}:fence"), token(key)).await;
    }

    assert!(at_once(single.try_write().key("b"))
        .await
        .unwrap()
        .is_none());
    assert!(at_once(single.try_write().key("rates"))
        .await
        .unwrap()
        .is_none());
    let sharing = at_once(single.try_read().key("rates"))
        .await
        .unwrap()
        .expect("a reader shares the set's read key");
    assert!(sharing.unlock().await.unwrap());
    assert!(at_once(single.try_lock_all().read(["a"]))
        .await
        .unwrap()
        .is_none());

    let last_a = token("a");
    assert!(set.unlock().await.unwrap(), "every key was held");
    for key in ["bank:a", "bank:b", "bank:rates"] {
        gone_everywhere(&conns, key).await;
    }
    let after = at_once(single.try_write().key("a"))
        .await
        .unwrap()
        .expect("free after the unlock");
    assert!(after.fencing_token() > last_a);
    assert!(after.unlock().await.unwrap());
}

/// A single writer on `b` held on every node: a try of the set `a`, `b`, `c` gets
/// nothing and changes nothing on any node (no lock key, no fence key); a wait with the
/// lock intent times out and leaves no intent behind; the holder's key is as it was.
async fn a_set_blocked_by_a_single_lock_changes_nothing(n: usize) {
    let nodes = Nodes::start(n);
    let conns = nodes.conns().await;
    let holder = bank(&nodes, TTL).await.write().key("b").await.unwrap();
    written_everywhere(&conns, "bank:b", holder.id()).await;
    let mx = bank(&nodes, TTL).await;

    let tried = at_once(mx.try_lock_all().write(["a", "b", "c"])).await;
    assert!(tried.unwrap().is_none(), "b is held");
    for key in ["bank:a", "bank:c", "bank:a:fence", "bank:c:fence"] {
        assert!(!anywhere(&conns, key).await, "{key} was written");
    }

    let timed_out = at_once(
        mx.lock_all()
            .write(["a", "b", "c"])
            .timeout(Duration::from_millis(400)),
    )
    .await;
    assert!(matches!(timed_out, Err(Error::Timeout)), "{timed_out:?}");
    for key in [
        "bank:a",
        "bank:c",
        "bank:a:lock-intent",
        "bank:b:lock-intent",
    ] {
        let gone = eventually(|| async { !anywhere(&conns, key).await }).await;
        assert!(gone, "{key} left behind");
    }
    written_everywhere(&conns, "bank:b", holder.id()).await;
    assert!(!holder.is_cancelled());
    assert!(holder.unlock().await.unwrap());
}

/// With `Notifier::quorum`, a set waiting behind a single writer on one of its keys (a
/// 10 s TTL, so its fallback timer is 5 s) gets the set soon after the writer's unlock.
async fn a_waiting_set_is_woken_by_the_release(n: usize) {
    const LONG_TTL: Duration = Duration::from_secs(10);
    let nodes = Nodes::start(n);
    let conns = nodes.conns().await;
    let notified = |quorum: Quorum<MultiplexedConnection>| {
        RwMutex::builder(quorum, "bank")
            .ttl(LONG_TTL)
            .notifier(Notifier::quorum(nodes.clients()))
            .build()
            .unwrap()
    };
    let holder = notified(nodes.quorum().await)
        .write()
        .key("b")
        .await
        .unwrap();
    let waiter = notified(nodes.quorum().await);
    let waiting = tokio::spawn(async move {
        let set = waiter
            .lock_all()
            .write(["a", "b"])
            .timeout(Duration::from_secs(30))
            .await;
        (Instant::now(), set)
    });

    let subscribed = eventually(|| async {
        for conn in &conns {
            if raw::subscribers(conn, "bank:b:released").await > 0 {
                return true;
            }
        }
        false
    })
    .await;
    assert!(subscribed, "no node has a subscriber on bank:b:released");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "the set got in beside the holder");
    let released = Instant::now();
    assert!(holder.unlock().await.unwrap());
    let (acquired, set) = tokio::time::timeout(LIVENESS, waiting)
        .await
        .expect("the set was taken")
        .unwrap();
    let set = set.unwrap();
    let handoff = acquired - released;
    assert!(
        handoff < Duration::from_secs(2),
        "hand-off took {handoff:?}: the set slept until its 5 s fallback"
    );
    assert!(holding(&conns, "bank:b", set.id()).await >= nodes.majority());
    assert!(set.unlock().await.unwrap());
}

/// Without a notifier, a set waiting behind a single reader on its write key polls, and
/// gets the set once the reader has left, not before.
async fn a_polling_set_gets_in_after_the_release(n: usize) {
    let nodes = Nodes::start(n);
    let conns = nodes.conns().await;
    let reader = bank(&nodes, TTL).await.read().key("b").await.unwrap();
    let waiter = bank(&nodes, TTL).await;
    let waiting = tokio::spawn(async move { waiter.lock_all().write(["b"]).read(["a"]).await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!waiting.is_finished(), "the set got in beside a reader");
    let intent = eventually(|| async { anywhere(&conns, "bank:b:lock-intent").await }).await;
    assert!(intent, "the waiting set set no intent on its write key");
    assert!(reader.unlock().await.unwrap());
    let set = tokio::time::timeout(LIVENESS, waiting)
        .await
        .expect("the set was taken after the release")
        .unwrap()
        .unwrap();
    assert!(holding(&conns, "bank:b", set.id()).await >= nodes.majority());
    assert!(holding(&conns, "bank:a", set.id()).await >= nodes.majority());
    assert!(set.unlock().await.unwrap());
    for key in ["bank:a", "bank:b", "bank:b:lock-intent"] {
        gone_everywhere(&conns, key).await;
    }
}

/// Another client (a Go holder, say: plain `SET PX`) holds `a` on a minority and `b` on
/// another minority: each key alone is free on a majority, but the set is free on one node
/// only. A try of the set gets nothing; the free node took it (its counter moved) and has
/// it released well within the set's 30 s TTL; the blocked nodes changed nothing; nothing
/// comes back later. A wait with the lock intent gives up the same way and leaves no
/// intent. A single lock on `a` is then granted.
async fn a_set_that_wins_too_few_nodes_releases_what_it_took(n: usize) {
    let nodes = Nodes::start(n);
    let conns = nodes.conns().await;
    let m = nodes.minority();
    let (holds_a, holds_b, free) = (&conns[..m], &conns[m..2 * m], &conns[2 * m..]);
    assert!(free.len() < nodes.majority());
    for conn in holds_a {
        raw::cmd::<()>(conn, "SET", &["bank:a", "go-holder", "PX", "60000"]).await;
    }
    for conn in holds_b {
        raw::cmd::<()>(conn, "SET", &["bank:b", "go-holder", "PX", "60000"]).await;
    }
    // Long enough that only a release, not the TTL, clears the free node in time.
    let mx = bank(&nodes, Duration::from_secs(30)).await;
    let left_as_they_were = || async {
        let released = eventually(|| async {
            !anywhere(free, "bank:a").await && !anywhere(free, "bank:b").await
        })
        .await;
        assert!(released, "the free nodes kept the set");
        tokio::time::sleep(Duration::from_millis(300)).await; // nothing comes back late
        for conn in free {
            assert!(raw::exists(conn, "bank:a:fence").await, "the set was taken");
            assert!(!raw::exists(conn, "bank:a").await && !raw::exists(conn, "bank:b").await);
        }
        for (held, other, conns) in [("bank:a", "bank:b", holds_a), ("bank:b", "bank:a", holds_b)] {
            for conn in conns {
                assert_eq!(raw::get(conn, held).await.as_deref(), Some("go-holder"));
                assert!(raw::pttl(conn, held).await > 50_000, "its TTL was changed");
                assert!(
                    !raw::exists(conn, other).await,
                    "a blocked node took {other}"
                );
                assert!(
                    !raw::exists(conn, &format!("{other}:fence")).await,
                    "a blocked node minted for {other}"
                );
            }
        }
    };

    let tried = at_once(mx.try_lock_all().write(["a", "b"])).await;
    assert!(matches!(tried, Ok(None)), "{tried:?}");
    left_as_they_were().await;

    let timed_out = at_once(
        mx.lock_all()
            .write(["a", "b"])
            .timeout(Duration::from_millis(400)),
    )
    .await;
    assert!(matches!(timed_out, Err(Error::Timeout)), "{timed_out:?}");
    for key in ["bank:a:lock-intent", "bank:b:lock-intent"] {
        let gone = eventually(|| async { !anywhere(&conns, key).await }).await;
        assert!(gone, "{key} left behind");
    }
    left_as_they_were().await;

    let single = at_once(mx.try_write().key("a"))
        .await
        .unwrap()
        .expect("a alone is free on a majority");
    assert!(single.unlock().await.unwrap());
}

/// With a minority frozen: a set is taken in about the per-node bound and holds on the
/// healthy nodes, another client's set is kept out, the set survives three refresh
/// periods with its deadline moving on, and its unlock comes in bounds and clears the
/// healthy nodes.
async fn a_frozen_minority_does_not_stop_a_set(n: usize) {
    let mut nodes = Nodes::start(n);
    let conns = nodes.conns().await;
    let mx = bank(&nodes, TTL).await;
    let other = bank(&nodes, TTL).await;
    let frozen = nodes.minority();
    let healthy = &conns[frozen..];
    nodes.fault(Fault::Freeze, 0..frozen);

    let set = in_bound("lock_all", mx.lock_all().write(["a", "b"]).read(["r"]))
        .await
        .unwrap();
    for key in ["bank:a", "bank:b", "bank:r"] {
        assert_eq!(
            holding(healthy, key, set.id()).await,
            healthy.len(),
            "{key}"
        );
    }
    let blocked = in_bound(
        "another try_lock_all",
        other.try_lock_all().write(["b", "c"]),
    )
    .await;
    assert!(blocked.unwrap().is_none(), "two sets hold b");

    let first = set.valid_until();
    tokio::time::sleep(TTL * 3 / 2 + TTL / 4).await; // three refresh periods (TTL/2)
    assert!(!set.is_cancelled(), "{:?}", set.cancel_reason());
    assert!(
        set.valid_until() > first + TTL / 2,
        "the deadline did not move"
    );
    for key in ["bank:a", "bank:b", "bank:r"] {
        assert_eq!(
            holding(healthy, key, set.id()).await,
            healthy.len(),
            "{key}"
        );
    }
    assert!(in_bound("unlock", set.unlock()).await.unwrap());
    for key in ["bank:a", "bank:b", "bank:r", "bank:c"] {
        gone_everywhere(healthy, key).await;
    }
    nodes.thaw_all();
}

/// With a majority frozen: a try of the set gives `NoQuorum` naming its first key and
/// counting the nodes that answered, in about the per-node bound; a wait times out; the
/// nodes that answered keep nothing. Thawed, the frozen nodes run what they were sent in
/// order and keep nothing either, and the set is then free.
async fn a_frozen_majority_gives_no_quorum_and_leaves_nothing(n: usize) {
    let mut nodes = Nodes::start(n);
    let conns = nodes.conns().await;
    let mx = bank(&nodes, TTL).await;
    let down = nodes.lost_majority();
    nodes.fault(Fault::Freeze, 0..down);

    match in_bound("try_lock_all", mx.try_lock_all().write(["a"]).read(["b"])).await {
        Err(Error::NoQuorum {
            key,
            answered,
            needed,
            nodes: total,
            ..
        }) => {
            assert_eq!(key, "bank:a");
            assert_eq!((answered, needed, total), (n - down, n / 2 + 1, n));
        }
        other => panic!("expected NoQuorum, got {other:?}"),
    }
    let wait = Duration::from_millis(600);
    let started = Instant::now();
    let timed_out = at_once(mx.lock_all().write(["a"]).read(["b"]).timeout(wait)).await;
    assert!(matches!(timed_out, Err(Error::Timeout)), "{timed_out:?}");
    assert!(started.elapsed() < wait + bound());
    for key in ["bank:a", "bank:b"] {
        gone_everywhere(&conns[down..], key).await;
    }

    nodes.thaw_all();
    for key in ["bank:a", "bank:b"] {
        gone_everywhere(&conns, key).await;
    }
    let set = at_once(mx.try_lock_all().write(["a"]).read(["b"]))
        .await
        .unwrap()
        .expect("the set is free after the thaw");
    assert!(set.unlock().await.unwrap());
}

/// Another client holds `b` on a minority for 300 ms: the set is taken on the others, and
/// the refused nodes take both its keys (each key's renewal takes it back there) soon
/// after, with the set never cancelled.
async fn a_node_that_refused_the_set_takes_its_keys_once_free(n: usize) {
    let nodes = Nodes::start(n);
    let conns = nodes.conns().await;
    let refusing = &conns[..nodes.minority()];
    for conn in refusing {
        raw::cmd::<()>(conn, "SET", &["bank:b", "go-holder", "PX", "300"]).await;
    }
    let set = at_once(bank(&nodes, TTL).await.try_lock_all().write(["a", "b"]))
        .await
        .unwrap()
        .expect("a majority is free");
    for key in ["bank:a", "bank:b"] {
        written_everywhere(&conns, key, set.id()).await;
    }
    assert!(!set.is_cancelled(), "{:?}", set.cancel_reason());
    assert!(set.unlock().await.unwrap());
    gone_everywhere(&conns, "bank:a").await;
}

/// Three clients, six tasks, each taking the write set `x`, `y` four times, half of them
/// naming the keys in the other order: every task finishes (no deadlock), no two are
/// inside at once, and each key's tokens grow from one holder to the next.
async fn sets_in_opposite_orders_neither_deadlock_nor_overlap(n: usize) {
    const TASKS: usize = 6;
    const ROUNDS: usize = 4;
    let nodes = Nodes::start(n);
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(bank(&nodes, TTL).await);
    }
    let inside = Arc::new(AtomicUsize::new(0));
    let tokens = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..TASKS {
        let mx = clients[task % clients.len()].clone();
        let (inside, tokens) = (Arc::clone(&inside), Arc::clone(&tokens));
        let keys = if task % 2 == 0 {
            ["x", "y"]
        } else {
            ["y", "x"]
        };
        tasks.spawn(async move {
            for _ in 0..ROUNDS {
                let set = mx
                    .lock_all()
                    .write(keys)
                    .timeout(Duration::from_secs(30))
                    .await
                    .unwrap();
                assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two sets inside");
                let pair = (
                    set.fencing_token("x").unwrap(),
                    set.fencing_token("y").unwrap(),
                );
                tokens.lock().unwrap().push(pair);
                tokio::time::sleep(Duration::from_millis(5)).await;
                assert!(!set.is_cancelled(), "{:?}", set.cancel_reason());
                inside.fetch_sub(1, Ordering::SeqCst);
                assert!(set.unlock().await.unwrap());
            }
        });
    }
    join_within(&mut tasks, Duration::from_secs(60), "a set stalled").await;
    let tokens = tokens.lock().unwrap();
    assert_eq!(tokens.len(), TASKS * ROUNDS);
    assert!(
        tokens
            .windows(2)
            .all(|pair| pair[0].0 < pair[1].0 && pair[0].1 < pair[1].1),
        "tokens out of order: {tokens:?}"
    );
}

/// `exec` on a set over a quorum is refused before anything is sent, and the set stays
/// held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_on_a_set_over_a_quorum_is_refused() {
    let nodes = Nodes::start(3);
    let conns = nodes.conns().await;
    let set = bank(&nodes, TTL)
        .await
        .lock_all()
        .write(["a"])
        .read(["b"])
        .await
        .unwrap();
    let mut pipe = redis::pipe();
    pipe.cmd("INCR").arg("counter");
    let refused = at_once(set.exec::<(i64,)>(&pipe)).await;
    assert!(
        matches!(refused, Err(Error::InvalidOptions(_))),
        "{refused:?}"
    );
    assert!(!anywhere(&conns, "counter").await, "the pipeline ran");
    assert!(!set.is_cancelled());
    assert!(set.unlock().await.unwrap());
}
