//! Faults on single nodes of a quorum (quorum mode, Redlock): three independent
//! `redis-server` nodes, a proxy in front of each, four worker processes
//! (`examples/fault_worker.rs` over a `Quorum` of the three proxies, TTL 1 s) and the
//! referee of `tests/common/referee.rs`. See `tests/common/quorum_fleet.rs`.
//!
//! Each test injects one family of faults, one node at a time, on every node in turn:
//! partitions (the node's proxy blackholes, delays past the per-node bound, or cuts its
//! connections again and again), freezes (SIGSTOP shorter than ttl/2 and longer than the
//! TTL), and empty restarts on the same port at once or after less than a TTL, some of
//! them under a guard held across the restart. A majority never fails, so exclusion and
//! fencing must hold throughout: each test asserts no overlap, no lost update, no stale
//! fenced write accepted (no acquisition sharing another's token, none out of the order
//! the lock passed in, no section's write refused), no lock key left on any node, that
//! every fault took effect on its node, and that work went on during the faults.
//!
//! Faults are `GAP` apart: after a fault heals, a holder takes the node back at its
//! next refresh (ttl/2), once any key left there by a call that ran late has expired (a
//! TTL at most). Until then that node does not hold the lock, and a second node failing
//! meanwhile would be two faulty nodes at once, which no quorum of three survives.
//!
//! The tests run one at a time (`SERIAL`), each for about 25 s
//! (`cargo test --test faults_quorum -- --nocapture` prints the reports; `FAULTS_DUMP=1`
//! every event).

mod common;

use std::time::Duration;

use common::events::now_us;
use common::fault_checks::{ms, SERIAL};
use common::fleet::Spec;
use common::quorum_fleet::{assert_quorum_safe, NodeFault, QuorumFleet, QuorumReport};
use common::record::FaultKind;
use common::RedisServer;
use redismutex::redis::aio::ConnectionManager;
use redismutex::{Guard, Quorum, RwMutex};

const TTL_MS: u64 = 1000;

/// Sections a test must complete: about half of what one does on 2 cores (debug build).
const MIN_SECTIONS: u64 = 80;

/// Between the end of one fault and the start of the next: a TTL for keys left by late
/// calls to expire, and two refresh periods for the holders to take the node back.
const GAP: Duration = Duration::from_millis(2 * TTL_MS + 200);

/// Three quick workers on three keys (30% readers, two with lock intent) and one holder
/// that holds each write lock it takes on the first key for 1.5 s, so that guards live
/// across faults while others wait for them.
async fn quorum_fleet() -> QuorumFleet {
    let mut fleet = QuorumFleet::start(TTL_MS).await;
    for n in 0..3 {
        let spec = Spec {
            keys: 3,
            read_pct: 30,
            intent: n != 1,
            ..Spec::default()
        };
        fleet.spawn(&format!("w{n}"), &spec).await;
    }
    let holder = Spec {
        keys: 1,
        hold_ms: Some(1500),
        ..Spec::default()
    };
    fleet.spawn("holder", &holder).await;
    let started = fleet.started_us;
    let warm = tokio::time::Instant::now() + Duration::from_secs(10);
    while fleet.released_after(started) < 20 && tokio::time::Instant::now() < warm {
        tokio::time::sleep(ms(20)).await;
    }
    assert!(
        fleet.released_after(started) >= 20,
        "the workers did not get going over the quorum"
    );
    fleet
}

/// Injects each `(node, fault)` in turn, `GAP` apart.
async fn run(fleet: &mut QuorumFleet, faults: &[(usize, NodeFault)]) {
    for &(node, fault) in faults {
        fleet.inject(node, fault).await;
        tokio::time::sleep(GAP).await;
    }
}

/// What every test asserts beyond safety: each fault was injected and seen on its node,
/// work went on while faults were on and after the last one, and enough was done.
fn assert_faults_and_progress(
    fleet: &QuorumFleet,
    report: &QuorumReport,
    expected: &[(FaultKind, usize)],
    min_sections: u64,
) {
    for &(kind, count) in expected {
        assert_eq!(report.faults(kind), count, "{kind:?} faults injected");
    }
    assert!(
        report.unverified.is_empty(),
        "faults not seen on their node: {:?}",
        report.unverified
    );
    let during: usize = report.during_faults.values().sum();
    assert!(during > 0, "no section completed while a node was faulty");
    let last_end = fleet.faults.iter().map(|f| f.end_us).max().unwrap_or(0);
    assert!(
        fleet.released_after(last_end) >= 3,
        "work did not go on after the last fault"
    );
    assert!(
        report.fleet.referee.sections >= min_sections,
        "work stalled: {} sections",
        report.fleet.referee.sections
    );
}

/// A node cut off by its proxy: blackholed (short, past a TTL, 2.5 TTLs), slowed past the
/// per-node bound (its calls time out, then run late), its connections reset every
/// 150 ms. The other two nodes carry the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitioned_node() {
    let _serial = SERIAL.lock().await;
    let mut fleet = quorum_fleet().await;
    let faults = [
        (0, NodeFault::Partition(ms(1500))),
        (1, NodeFault::Slow(ms(1500))),
        (2, NodeFault::Cut(ms(1000))),
        (1, NodeFault::Partition(ms(400))),
        (2, NodeFault::Partition(ms(2500))),
        (0, NodeFault::Slow(ms(1000))),
        (1, NodeFault::Cut(ms(1000))),
    ];
    run(&mut fleet, &faults).await;
    let report = fleet.finish("quorum: one node partitioned").await;

    assert_quorum_safe(&fleet, &report);
    assert_faults_and_progress(
        &fleet,
        &report,
        &[
            (FaultKind::PartitionNode, 3),
            (FaultKind::SlowNode, 2),
            (FaultKind::CutNode, 2),
        ],
        MIN_SECTIONS,
    );
}

/// A node's `redis-server` SIGSTOPped, shorter than ttl/2 and longer than the TTL; the
/// calls queued on it run when it resumes, long after their rounds were decided.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_node() {
    let _serial = SERIAL.lock().await;
    let mut fleet = quorum_fleet().await;
    let faults = [
        (0, NodeFault::Freeze(ms(300))),
        (1, NodeFault::Freeze(ms(2000))),
        (2, NodeFault::Freeze(ms(400))),
        (0, NodeFault::Freeze(ms(1500))),
        (1, NodeFault::Freeze(ms(300))),
        (2, NodeFault::Freeze(ms(2500))),
    ];
    run(&mut fleet, &faults).await;
    let report = fleet.finish("quorum: one node frozen").await;

    assert_quorum_safe(&fleet, &report);
    assert_faults_and_progress(
        &fleet,
        &report,
        &[(FaultKind::FreezeNode, 3), (FaultKind::FreezeNodeLong, 3)],
        MIN_SECTIONS,
    );
}

/// A node SIGKILLed and started again empty on the same port, at once or after less than
/// a TTL: no waiting for the old guards to expire. Its lock keys and fence counters are
/// gone; the restarted node mints tokens from its clock, which the raise round spreads.
/// Every other restart lands while the holder holds a lock, on a node that holds it
/// (one of the two when only two do): nobody else may get the lock while that guard is
/// valid, and a guard held on all three nodes must ride the restart out (no token
/// fired, released as held), since the other two still hold it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_restarted_empty() {
    let _serial = SERIAL.lock().await;
    let mut fleet = quorum_fleet().await;
    let faults = [
        (0, NodeFault::Restart(Duration::ZERO)),
        (1, NodeFault::Restart(ms(500))),
        (2, NodeFault::Restart(Duration::ZERO)),
        (1, NodeFault::Restart(Duration::ZERO)),
        (0, NodeFault::Restart(ms(300))),
        (2, NodeFault::Restart(ms(700))),
        (1, NodeFault::Restart(Duration::ZERO)),
    ];
    let (mut under_guard, mut bare, mut on_all) = (0, 0, Vec::new());
    for (n, &(node, fault)) in faults.iter().enumerate() {
        let mut node = node;
        if n % 2 == 0 {
            // The holder's lock, taken at least 200 ms ago.
            let since = now_us();
            let holding = fleet
                .log
                .wait_for(Duration::from_secs(5), |e| {
                    e.worker == "holder" && e.is("ACQUIRED") && e.us > since
                })
                .await
                .expect("the holder takes a lock");
            tokio::time::sleep(ms(200)).await;
            let held_on = fleet.held_on(holding.key(), holding.id()).await;
            if held_on.len() == 2 {
                bare += 1;
            }
            if !held_on.is_empty() && !held_on.contains(&node) {
                node = held_on[0];
            }
            if held_on.len() == 3 {
                on_all.push(holding);
            }
            under_guard += 1;
        }
        fleet.inject(node, fault).await;
        tokio::time::sleep(GAP).await;
    }
    let report = fleet.finish("quorum: one node restarted empty").await;
    println!(
        "   restarts under the holder's guard {under_guard}: on a lock held by all three \
         nodes {}, by only two {bare}",
        on_all.len()
    );

    assert_quorum_safe(&fleet, &report);
    assert_faults_and_progress(
        &fleet,
        &report,
        &[
            (FaultKind::RestartNode, 4),
            (FaultKind::RestartNodeLater, 3),
        ],
        MIN_SECTIONS,
    );
    for holding in &on_all {
        let section = fleet.log.filter(|e| {
            e.worker == "holder" && e.key() == holding.key() && e.token() == holding.token()
        });
        assert!(
            section
                .iter()
                .any(|e| e.is("RELEASED") && e.last() == "held=true")
                && !section.iter().any(|e| e.is_loss()),
            "the holder's guard did not ride out the restart: {section:?}"
        );
    }
}

/// A guard on lock `bare:k` taken on nodes 0 and 1 only (node 2 still held, for 300 ms,
/// by another lock id whose release has not reached it), node 0 then restarted empty at
/// once; the nodes (kept, so they live on), the mutex and the guard.
async fn guard_on_two_nodes_then_restart(
) -> (Vec<RedisServer>, RwMutex<Quorum<ConnectionManager>>, Guard) {
    let mut nodes: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let mut conns = Vec::new();
    for node in &nodes {
        conns.push(node.manager().await);
    }
    let mx = RwMutex::builder(Quorum::new(conns).expect("three nodes"), "bare")
        .ttl(ms(TTL_MS))
        .build()
        .expect("valid options");
    let _: () = redis::cmd("SET")
        .arg("bare:k")
        .arg("0123456789abcdef0123456789abcdef")
        .arg("PX")
        .arg(300)
        .query_async(&mut nodes[2].conn().await)
        .await
        .expect("SET on node 2");
    let guard = mx
        .write()
        .key("k")
        .await
        .expect("a majority: nodes 0 and 1");
    for node in [0, 1] {
        let held: Option<String> = redis::cmd("GET")
            .arg("bare:k")
            .query_async(&mut nodes[node].conn().await)
            .await
            .expect("GET");
        assert_eq!(
            held.as_deref(),
            Some(guard.id()),
            "the guard holds node {node}"
        );
    }
    tokio::task::block_in_place(|| nodes[0].restart());
    (nodes, mx, guard)
}

/// The smallest case of an empty restart under a guard: a guard held on two nodes of
/// three, one of them restarted empty at once. Until its first refresh (ttl/2) the guard
/// holds one node; the restarted node and the third, once free, make a majority for
/// another writer. No writer may get the lock while the guard is valid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_restart_under_a_guard_on_two_nodes() {
    let _serial = SERIAL.lock().await;
    let (_nodes, mx, guard) = guard_on_two_nodes_then_restart().await;
    let taken = mx.write().key("k").timeout(ms(TTL_MS)).await;
    let valid = !guard.is_cancelled();
    let tokens = (
        guard.fencing_token(),
        taken.as_ref().map(|g| g.fencing_token()).ok(),
    );
    assert!(
        taken.is_err() || !valid,
        "a second writer got the lock (tokens {tokens:?}) while the first guard was still \
         valid: the guard held nodes 0 and 1, node 0 restarted empty, and nodes 0 and 2 \
         made a majority for the second"
    );
}

/// The same start; if another writer gets the lock and gives it back before the
/// guard's first refresh, that refresh must not count the nodes it takes back: the
/// guard held one node when the other writer held two, so its token must fire (`Lost`)
/// by then rather than the guard going on as if it had held the lock throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_whose_majority_was_taken_learns_it_at_its_next_refresh() {
    let _serial = SERIAL.lock().await;
    let (nodes, mx, guard) = guard_on_two_nodes_then_restart().await;
    let Ok(other) = mx.write().key("k").timeout(ms(TTL_MS / 3)).await else {
        return; // Nobody else got the lock: nothing to learn.
    };
    let other_token = other.fencing_token();
    other.unlock().await.expect("unlock");
    // Past the guard's first refresh (ttl/2 after its acquire) and its per-node bound.
    tokio::time::sleep(ms(TTL_MS / 2)).await;
    let mut held_on = Vec::new();
    for (n, node) in nodes.iter().enumerate() {
        let held: Option<String> = redis::cmd("GET")
            .arg("bare:k")
            .query_async(&mut node.conn().await)
            .await
            .expect("GET");
        if held.as_deref() == Some(guard.id()) {
            held_on.push(n);
        }
    }
    assert!(
        guard.is_cancelled(),
        "another writer held the lock (token {other_token}, above the guard's {}) and gave \
         it back, and the guard is still valid: its refresh took nodes back and counted \
         them as held (the guard's id is now on nodes {held_on:?})",
        guard.fencing_token()
    );
}
