//! Faults on single nodes of a quorum (quorum mode, Redlock): three independent
//! `redis-server` nodes, a proxy in front of each, four worker processes
//! (`examples/fault_worker.rs` over a `Quorum` of the three proxies, TTL 1 s) and the
//! referee of `tests/common/referee.rs`. See `tests/faults/harness/quorum_fleet.rs`.
//!
//! Each test injects one family of faults, one node at a time, on every node in turn:
//! partitions (the node's proxy blackholes, delays past the per-node bound, or cuts its
//! connections again and again), freezes (SIGSTOP shorter than ttl/2 and longer than the
//! TTL), and restarts within quorum mode's preconditions (the quorum guide,
//! `redismutex::guide::quorum`): empty on the same port after the node stayed down at least
//! TTL + 200 ms, or at once from the node's append-only file (`appendonly yes`,
//! `appendfsync always`), most of them under a guard held across the restart. A majority
//! never fails, so exclusion and fencing must hold throughout: each test asserts no
//! overlap, no lost update, no stale fenced write accepted (no acquisition sharing
//! another's token, none out of the order the lock passed in, no section's write refused),
//! no lock key left on any node, that every fault took effect on its node, and that work
//! went on during the faults.
//!
//! Outside the preconditions, an empty restart at once, no safety is promised: a guard
//! held on two nodes of three can lose its majority to the restart, and a second writer
//! may get in while the first guard is valid (as the Redis distlock spec warns, "delayed
//! restarts"). What holds then is fencing: the second writer's token is the larger, so a
//! resource that checks tokens refuses the first holder's writes. The last test shows
//! that, in process.
//!
//! Faults are `GAP` apart: after a fault heals, a holder takes the node back at its
//! next refresh (ttl/2), once any key left there by a call that ran late has expired (a
//! TTL at most). Until then that node does not hold the lock, and a second node failing
//! meanwhile would be two faulty nodes at once, which no quorum of three survives.
//!
//! The tests run one at a time (`SERIAL`), each for 17–25 s, the module in about 80 s
//! (`cargo test --test faults quorum:: -- --nocapture` prints the reports; `FAULTS_DUMP=1`
//! every event).

use std::time::Duration;

use crate::common::events::{now_us, Event};
use crate::common::record::FaultKind;
use crate::common::referee::Referee;
use crate::common::{RedisServer, LIVENESS};
use crate::harness::fault_checks::{ms, SERIAL};
use crate::harness::fleet::{Fleet, Spec};
use crate::harness::quorum_fleet::{
    assert_quorum_safe, NodeFault, QuorumFleet, QuorumReport, RESTART_MARGIN,
};
use redismutex::{Quorum, RwMutex};

pub(crate) const TTL_MS: u64 = 1000;

/// Sections a test must complete: about half of the fewest one did in its 17–25 s on 2
/// cores (debug build; 55 to 115 over the runs, most of the spread from how long the
/// other workers wait on the holder's key).
const MIN_SECTIONS: u64 = 30;

/// Between the end of one fault and the start of the next: a TTL for keys left by late
/// calls to expire, and two refresh periods for the holders to take the node back.
pub(crate) const GAP: Duration = Duration::from_millis(2 * TTL_MS + 200);

/// Three quick workers on three keys (30% readers, two with lock intent) and one holder
/// that holds each write lock it takes on the first key for 1.5 s, so that guards live
/// across faults while others wait for them; over nodes without persistence.
async fn quorum_fleet() -> QuorumFleet {
    quorum_fleet_on(QuorumFleet::start(TTL_MS).await).await
}

/// The same workers on `fleet`, once they got going.
pub(crate) async fn quorum_fleet_on(mut fleet: QuorumFleet) -> QuorumFleet {
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
    let started = fleet.crew.started_us;
    let warm = tokio::time::Instant::now() + Duration::from_secs(10);
    while fleet.released_after(started) < 8 && tokio::time::Instant::now() < warm {
        tokio::time::sleep(ms(20)).await;
    }
    assert!(
        fleet.released_after(started) >= 8,
        "the workers did not get going over the quorum"
    );
    fleet
}

/// Injects each `(node, fault)` in turn, `GAP` apart (and `GAP` after the last).
async fn run(fleet: &mut QuorumFleet, faults: &[(usize, NodeFault)]) {
    for &(node, fault) in faults {
        fleet.inject(node, fault).await;
        tokio::time::sleep(GAP).await;
    }
}

/// What every test asserts beyond safety: each fault was injected and seen on its node,
/// work went on while faults were on (or within `recovery` after one ended, for the
/// restarts: see their tests) and after the last one, and enough was done.
fn assert_faults_and_progress(
    fleet: &QuorumFleet,
    report: &QuorumReport,
    expected: &[(FaultKind, usize)],
    recovery: Duration,
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
    let recovery_us = u64::try_from(recovery.as_micros()).expect("a short recovery");
    let during: usize = fleet
        .crew
        .faults
        .iter()
        .map(|f| {
            fleet.crew.log.count(|e| {
                e.is("RELEASED")
                    && e.last() == "held=true"
                    && (f.start_us..=f.end_us + recovery_us).contains(&e.us)
            })
        })
        .sum();
    println!("   sections during the faults (or within {recovery:?} after one) {during}");
    assert!(
        during > 0,
        "no section completed while a node was faulty (or within {recovery:?} after)"
    );
    let last_end = fleet
        .crew
        .faults
        .iter()
        .map(|f| f.end_us)
        .max()
        .unwrap_or(0);
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

/// A node cut off by its proxy: blackholed (past a TTL, 2.5 TTLs), slowed past the
/// per-node bound (its calls time out, then run late), its connections reset every
/// 150 ms. The other two nodes carry the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitioned_node() {
    let _serial = SERIAL.lock().await;
    let mut fleet = quorum_fleet().await;
    let faults = [
        (0, NodeFault::Partition(ms(1500))),
        (1, NodeFault::Slow(ms(1200))),
        (2, NodeFault::Cut(ms(1000))),
        (1, NodeFault::Partition(ms(2500))),
    ];
    run(&mut fleet, &faults).await;
    let report = fleet.finish("quorum: one node partitioned").await;

    assert_quorum_safe(&fleet, &report);
    assert_faults_and_progress(
        &fleet,
        &report,
        &[
            (FaultKind::PartitionNode, 2),
            (FaultKind::SlowNode, 1),
            (FaultKind::CutNode, 1),
        ],
        Duration::ZERO,
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
        (2, NodeFault::Freeze(ms(1500))),
        (1, NodeFault::Freeze(ms(400))),
        (0, NodeFault::Freeze(ms(2500))),
    ];
    run(&mut fleet, &faults).await;
    let report = fleet.finish("quorum: one node frozen").await;

    assert_quorum_safe(&fleet, &report);
    assert_faults_and_progress(
        &fleet,
        &report,
        &[(FaultKind::FreezeNode, 2), (FaultKind::FreezeNodeLong, 3)],
        Duration::ZERO,
        MIN_SECTIONS,
    );
}

/// A restart that landed under the holder's guard.
#[derive(Debug)]
struct UnderGuard {
    /// The holder's `ACQUIRED`.
    holding: Event,
    /// The nodes that held the guard's id 200 ms after it was taken, right before the kill.
    held_on: Vec<usize>,
    /// The node restarted (one of `held_on`).
    node: usize,
    /// When the node was read again after its restart, and whether the guard's id was
    /// on it then.
    after_us: u64,
    back: bool,
}

impl UnderGuard {
    /// The holder's events for this guard: its section, its `FIRED` and `RELEASED`.
    fn section(&self, fleet: &QuorumFleet) -> Vec<Event> {
        fleet.crew.log.filter(|e| {
            e.worker == "holder"
                && e.key() == self.holding.key()
                && e.token() == self.holding.token()
        })
    }

    /// Whether the guard rode the restart out: released as held, its token never fired
    /// as `Lost` or `Expired`.
    fn rode_out(&self, fleet: &QuorumFleet) -> bool {
        let section = self.section(fleet);
        section
            .iter()
            .any(|e| e.is("RELEASED") && e.last() == "held=true")
            && !section.iter().any(Event::is_loss)
    }

    /// Whether the guard's token had fired before the node was read after its restart.
    fn fired_before_read(&self, fleet: &QuorumFleet) -> bool {
        self.section(fleet)
            .iter()
            .any(|e| e.is("FIRED") && e.us < self.after_us)
    }
}

/// Injects each `(node, restart, under the holder's guard)` in turn as `run` does. A
/// restart under the guard waits for the holder's next lock, 200 ms into it, and lands
/// on a node that holds it (one of the two when only two do).
async fn restarts(fleet: &mut QuorumFleet, faults: &[(usize, NodeFault, bool)]) -> Vec<UnderGuard> {
    let mut under = Vec::new();
    for &(node, fault, under_guard) in faults {
        if !under_guard {
            fleet.inject(node, fault).await;
            tokio::time::sleep(GAP).await;
            continue;
        }
        let since = now_us();
        let holding = fleet
            .crew
            .log
            .wait_for(Duration::from_secs(5), |e| {
                e.worker == "holder" && e.is("ACQUIRED") && e.us > since
            })
            .await
            .expect("the holder takes a lock");
        tokio::time::sleep(ms(200)).await;
        let held_on = fleet.held_on(holding.key(), holding.id()).await;
        let node = if held_on.is_empty() || held_on.contains(&node) {
            node
        } else {
            held_on[0]
        };
        fleet.inject(node, fault).await;
        let after_us = now_us();
        let back = fleet
            .held_on(holding.key(), holding.id())
            .await
            .contains(&node);
        under.push(UnderGuard {
            holding,
            held_on,
            node,
            after_us,
            back,
        });
        tokio::time::sleep(GAP).await;
    }
    under
}

/// Prints how the restarts under the holder's guard went.
fn print_under_guard(fleet: &QuorumFleet, under: &[UnderGuard]) {
    let on = |n: usize| under.iter().filter(|u| u.held_on.len() == n).count();
    let rode_out = under.iter().filter(|u| u.rode_out(fleet)).count();
    let back = under.iter().filter(|u| u.back).count();
    println!(
        "   restarts under the holder's guard {}: on a lock held by all three nodes {}, by \
         only two {}; guards that rode the restart out {rode_out}; the guard's id on the \
         node right after its restart {back}",
        under.len(),
        on(3),
        on(2)
    );
}

/// A node SIGKILLed, kept down past the TTL (at least TTL + 200 ms: the delayed restart
/// of quorum mode's preconditions) and started again empty on the same port. Every key
/// it held has expired by then; its fence counters are gone, and it mints tokens from
/// its clock, which the raise round spreads. Three of the four restarts land while the
/// holder holds a lock, on a node that holds it: a guard held on all three nodes must
/// ride the restart out (no token fired, released as held), since the other two still
/// hold it. A guard held on two holds one while its node is down, and takes the third
/// back only if no other attempt holds it there: often one does (three workers wait on
/// that key), and then the guard expires: a cost in liveness, never an overlap. Work
/// counts during a restart or in the TTL after it (the other workers mostly wait on the
/// holder's key while it is held).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_restarted_empty() {
    let _serial = SERIAL.lock().await;
    let mut fleet = quorum_fleet().await;
    // Down for the TTL, the margin and `extra` ms.
    let down = |extra: u64| NodeFault::RestartEmpty(ms(TTL_MS) + RESTART_MARGIN + ms(extra));
    let faults = [
        (0, down(0), true),
        (1, down(300), false),
        (2, down(0), true),
        (1, down(100), true),
    ];
    let under = restarts(&mut fleet, &faults).await;
    let report = fleet
        .finish("quorum: one node restarted empty, down past the TTL")
        .await;
    print_under_guard(&fleet, &under);

    assert_quorum_safe(&fleet, &report);
    assert_faults_and_progress(
        &fleet,
        &report,
        &[(FaultKind::RestartNodeEmpty, faults.len())],
        ms(TTL_MS),
        MIN_SECTIONS,
    );
    for guard in under.iter().filter(|u| u.held_on.len() == 3) {
        assert!(
            guard.rode_out(&fleet),
            "the holder's guard, held on all three nodes, did not ride out the restart of \
             node {}: {:?}",
            guard.node,
            guard.section(&fleet)
        );
    }
}

/// Durable nodes (`appendonly yes`, `appendfsync always`, a directory that outlives the
/// restart): a node SIGKILLed and started again at once from its append-only file, the
/// durable restart of quorum mode's preconditions. Every key and fence counter it
/// acknowledged is back (checked on the node). Three of the five restarts land while the
/// holder holds a lock, on a node that holds it: its id is back on the node, and the
/// guard rides the restart out whether it was held on three nodes or two. Work counts
/// during a restart or in the two TTLs after it: a restart is over in an instant, and
/// the other workers mostly wait on the holder's key (held 1.5 s) right after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_restarted_from_its_aof_at_once() {
    let _serial = SERIAL.lock().await;
    let mut fleet = quorum_fleet_on(QuorumFleet::start_aof(TTL_MS).await).await;
    let faults = [
        (0, NodeFault::RestartFromAof, true),
        (1, NodeFault::RestartFromAof, false),
        (2, NodeFault::RestartFromAof, true),
        (1, NodeFault::RestartFromAof, true),
        (0, NodeFault::RestartFromAof, false),
    ];
    let under = restarts(&mut fleet, &faults).await;
    let report = fleet
        .finish("quorum: one node restarted at once from its AOF")
        .await;
    print_under_guard(&fleet, &under);

    assert_quorum_safe(&fleet, &report);
    assert_faults_and_progress(
        &fleet,
        &report,
        &[(FaultKind::RestartNodeAof, faults.len())],
        ms(2 * TTL_MS),
        MIN_SECTIONS,
    );
    for guard in &under {
        assert!(
            guard.back || guard.fired_before_read(&fleet),
            "the holder's lock was not back on node {} after its restart from the AOF \
             (held on {:?} before): {:?}",
            guard.node,
            guard.held_on,
            guard.section(&fleet)
        );
        assert!(
            guard.rode_out(&fleet),
            "the holder's guard (held on nodes {:?}) did not ride out the restart of node {} \
             from its AOF: {:?}",
            guard.held_on,
            guard.node,
            guard.section(&fleet)
        );
    }
}

/// Outside quorum mode's preconditions (the quorum guide: durability or a delayed
/// restart), what still holds. A guard is held on two nodes of three (node 2 held for
/// 300 ms by another lock id whose release has not reached it), and one of its two
/// nodes restarts empty at once. Until the guard's next refresh (ttl/2) it holds one
/// node, and the restarted node with node 2, once free, can make a majority for a second
/// writer while the guard is valid (the distlock spec's "delayed restarts" exist to
/// prevent this; the library does not). Whether or not that happens, fencing orders
/// the two: the second writer's token is larger than the first's, so a resource that
/// keeps the largest token it accepted (the referee's fenced write) refuses the first
/// holder's writes once the second has written. When no second writer gets in while
/// the guard lives, the guard is released and the second takes the lock after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn immediate_empty_restart_outside_the_preconditions_is_fenced() {
    let _serial = SERIAL.lock().await;
    let mut nodes: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let referee_server = RedisServer::start();
    let referee = Referee::connect(&referee_server.url())
        .await
        .expect("connect to the referee");
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
    let first = mx
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
            Some(first.id()),
            "the first guard holds node {node}"
        );
    }
    let (first_token, first_id) = (first.fencing_token(), first.id().to_string());
    assert!(
        referee
            .fenced("k", first_token, &first_id)
            .await
            .expect("fenced write"),
        "the first holder's write, the first of all, is accepted"
    );

    // Outside the preconditions: node 0 back empty at once.
    tokio::task::block_in_place(|| nodes[0].restart());
    let (second, first, while_valid) = match mx.write().key("k").timeout(ms(TTL_MS)).await {
        Ok(second) => {
            let valid = !first.is_cancelled();
            (second, Some(first), valid)
        }
        Err(_) => {
            first.unlock().await.expect("unlock");
            let second = mx
                .write()
                .key("k")
                .timeout(LIVENESS)
                .await
                .expect("the lock once the first guard is released");
            (second, None, false)
        }
    };
    let second_token = second.fencing_token();
    println!(
        "   an immediate empty restart under a guard on two nodes: a second writer got in \
         while the first guard was valid: {while_valid}; tokens {first_token} then \
         {second_token}"
    );
    assert!(
        second_token > first_token,
        "the second writer's token {second_token} is not above the first's {first_token} \
         (second writer in while the first guard was valid: {while_valid})"
    );
    assert!(
        referee
            .fenced("k", second_token, second.id())
            .await
            .expect("fenced write"),
        "the second holder's write is accepted"
    );
    assert!(
        !referee
            .fenced("k", first_token, &first_id)
            .await
            .expect("fenced write"),
        "the first holder's write after the second's is refused (its guard still believes \
         it holds the lock: {})",
        first.as_ref().is_some_and(|g| !g.is_cancelled())
    );
    let seen = referee.report().await.expect("read the referee");
    assert_eq!(
        (seen.accepted, seen.stale_rejected, seen.stale_accepted),
        (2, 1, 0),
        "fenced writes accepted, refused as stale, accepted with another's token"
    );
    drop(first);
    second.unlock().await.expect("unlock");
}
