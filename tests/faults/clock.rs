//! Clock faults on the lock server: its wall clock (`TIME`, key expiry, every script's
//! clock) jumps forward past the TTL, jumps back, or runs twice as fast, while worker
//! processes hold and wait for locks, checked by the referee as in `server.rs`. The clock
//! is moved by a shim preloaded into `redis-server` (`tests/common/clock.rs`,
//! `tests/support/clock_shim.rs`); the workers' clocks are left alone.
//!
//! What a single server cannot survive is shown, not hidden: a forward jump expires held
//! locks early, so other workers acquire them while their holders' guards still believe
//! they hold them (guard overlaps, `tests/faults/harness/order.rs`, which the test requires to
//! happen), and fencing then refuses every stale write (0 accepted). The worker checks
//! `is_cancelled()` after its work and before it acts, so most such holders find their
//! token fired first (the renewal found the key gone) and abandon: the referee's overlaps
//! (two inside check→leave at once) stay rare. A jump back only lengthens the locks on
//! the server: nothing overlaps. A clock that runs fast expires locks before their
//! renewals: guard overlaps may happen, and fencing still refuses every stale write.
//!
//! Over a quorum of three (the workers of `quorum.rs`, each node on a clock of its own):
//! one node's clock jumping forward is survived, with every check of the quorum fault
//! suite (guards are held on all three nodes: a node that did not take the lock at once
//! is offered it in the second round and topped up after, so no guard sits on a bare
//! majority that a jump could break); two nodes' clocks jumping at once (a majority) is
//! a single server's jump again: guard overlaps are counted, and fencing holds (no stale
//! write accepted, tokens in acquisition order). On a Redis Cluster (`clock/cluster.rs`, feature
//! `cluster`) the same three faults hit the master of the workers' keys, whose clock also
//! floors their tokens. Every test prints its report
//! (`cargo test --test faults clock:: -- --nocapture`).

#[cfg(feature = "cluster")]
mod cluster;

use crate::common::clock::{server_on_a_clock, ServerClock};
use crate::common::record::{FaultKind, Target};
use crate::harness::fault_checks::{assert_fenced_through_overlaps, ms, SERIAL, TTL_MS};
use crate::harness::fleet::{Fleet, Spec};
use crate::harness::order::guard_overlaps;
use crate::harness::quorum_fleet::{assert_quorum_safe, QuorumFleet};
use crate::harness::report::Report;
use crate::harness::server_fleet::ServerFleet;
use crate::quorum::{quorum_fleet_on, GAP, TTL_MS as QUORUM_TTL_MS};

/// Three writers on two keys with sections of 300–600 ms (longer than a renewal period),
/// polling while they wait, so that a lock the server expires early is taken at once.
fn long_sections() -> Spec {
    Spec {
        keys: 2,
        read_pct: 0,
        work_ms: (300, 600),
        notify: false,
        ..Spec::default()
    }
}

/// The fleet on a lock server whose clock the test moves.
async fn fleet_on_a_clock() -> (ServerFleet, ServerClock) {
    let (lock, clock) = server_on_a_clock(&[]);
    let mut fleet = ServerFleet::start_on(lock, TTL_MS).await;
    for n in 0..3 {
        fleet.spawn(&format!("w{n}"), &long_sections()).await;
    }
    (fleet, clock)
}

/// What every clock fault must keep: no stale fenced write accepted (a holder that
/// entered after a later holder had written, out of order, had its write refused), no
/// lost update but within an overlap, and work going on.
fn assert_fenced(report: &Report) {
    assert_fenced_through_overlaps(report, "");
    let r = &report.referee;
    assert!(r.sections >= 10, "work stopped: {} sections", r.sections);
}

#[tokio::test]
async fn a_forward_jump_past_the_ttl_makes_overlaps_and_fencing_refuses_every_stale_write() {
    let _serial = SERIAL.lock().await;
    let (mut fleet, clock) = fleet_on_a_clock().await;
    tokio::time::sleep(ms(800)).await;
    for _ in 0..5 {
        let fault = fleet.crew.begin(FaultKind::ClockForward, Target::Server);
        clock.jump(3 * TTL_MS as i64);
        fleet.crew.end(fault);
        tokio::time::sleep(ms(1500)).await;
    }
    let report = fleet
        .finish("the lock server's clock jumped 3 s forward (3 TTLs), 5 times")
        .await;
    let events = fleet.crew.log.all();
    let overlaps = guard_overlaps(&events, &fleet.crew.faults);
    println!("   guard overlaps     {}: {overlaps:#?}", overlaps.len());
    let by_clock = events
        .iter()
        .filter(|e| e.is("FIRED") && e.last() == "ClockJump")
        .count();
    println!("   fired ClockJump    {by_clock}");
    assert!(
        !overlaps.is_empty(),
        "a forward jump past the TTL expires held locks early: guard overlaps must show"
    );
    assert_fenced(&report);
}

#[tokio::test]
async fn a_backward_jump_lengthens_locks_and_nothing_overlaps() {
    let _serial = SERIAL.lock().await;
    let (mut fleet, clock) = fleet_on_a_clock().await;
    tokio::time::sleep(ms(800)).await;
    for _ in 0..3 {
        let fault = fleet.crew.begin(FaultKind::ClockBack, Target::Server);
        clock.jump(-3 * TTL_MS as i64);
        fleet.crew.end(fault);
        tokio::time::sleep(ms(1500)).await;
    }
    let report = fleet
        .finish("the lock server's clock jumped 3 s back (3 TTLs), 3 times")
        .await;
    assert_eq!(
        report.referee.violations, 0,
        "{:?}",
        report.referee.violation_log
    );
    assert_eq!(report.referee.lost_updates, 0);
    assert_fenced(&report);
}

#[tokio::test]
async fn a_clock_running_twice_as_fast_is_fenced() {
    let _serial = SERIAL.lock().await;
    let (mut fleet, clock) = fleet_on_a_clock().await;
    tokio::time::sleep(ms(800)).await;
    let fault = fleet.crew.begin(FaultKind::ClockFast, Target::Server);
    clock.rate(1_000_000);
    tokio::time::sleep(ms(4000)).await;
    clock.rate(0);
    fleet.crew.end(fault);
    tokio::time::sleep(ms(1000)).await;
    let report = fleet
        .finish("the lock server's clock ran twice as fast for 4 s")
        .await;
    let overlaps = guard_overlaps(&fleet.crew.log.all(), &fleet.crew.faults);
    println!("   guard overlaps     {}: {overlaps:#?}", overlaps.len());
    assert_fenced(&report);
}

/// Over a quorum of three, one node's clock jumps 3 s forward at a time, on each node in
/// turn: that node's keys expire early. A guard held on all three nodes keeps its
/// majority, and its renewal takes the jumped node back (another worker's first round
/// there, which won nothing, raised only the counter, not the granted token). A guard is
/// held on all three: a node that did not take the lock in the first round (another
/// worker's attempt under way held it for a moment) is offered it in the second, and
/// topped up in the background after (`src/backend/quorum/top_up.rs`); without that, a
/// guard on a bare majority lost it when one of its two nodes jumped, and another worker
/// got in while it still believed it held the lock (guard overlaps in 8 of 34 runs). So
/// the full checks of the quorum fault suite hold: no overlap of guards or at the
/// referee, no lost update, no stale fenced write, tokens in acquisition order.
#[tokio::test]
async fn one_quorum_nodes_clock_jumping_forward_overlaps_nothing() {
    let _serial = SERIAL.lock().await;
    let (fleet, clocks) = QuorumFleet::start_on_clocks(QUORUM_TTL_MS).await;
    let mut fleet = quorum_fleet_on(fleet).await;
    for (node, clock) in clocks.iter().enumerate() {
        // Who holds what on each node, for the dump if the test fails.
        fleet.snapshot().await;
        let fault = fleet
            .crew
            .begin(FaultKind::ClockForward, Target::Node(node));
        clock.jump(3 * QUORUM_TTL_MS as i64);
        fleet.crew.end(fault);
        tokio::time::sleep(GAP).await;
    }
    let report = fleet
        .finish("one quorum node's clock jumped 3 s forward, each node in turn")
        .await;
    println!("{report}");
    let errors: std::collections::BTreeSet<String> = fleet
        .crew
        .log
        .all()
        .iter()
        .filter(|e| e.is("ERROR"))
        .map(|e| e.fields.join(" "))
        .collect();
    println!("   worker errors      {errors:?}");
    assert_quorum_safe(&fleet, &report);
    assert_fenced(&report.fleet);
}

/// Over a quorum of three, two nodes' clocks (a majority) jump 3 s forward at once, 3
/// times: the locks expire early on a majority, as on a single server, and another
/// worker can take one while its holder's guard still believes it holds it. What holds
/// is fencing: no stale fenced write accepted.
#[tokio::test]
async fn a_majority_whose_clocks_jump_forward_is_fenced() {
    let _serial = SERIAL.lock().await;
    let (fleet, clocks) = QuorumFleet::start_on_clocks(QUORUM_TTL_MS).await;
    let mut fleet = quorum_fleet_on(fleet).await;
    for round in 0..3 {
        let fault = fleet.crew.begin(FaultKind::ClockForward, Target::Server);
        for clock in clocks.iter().cycle().skip(round).take(2) {
            clock.jump(3 * QUORUM_TTL_MS as i64);
        }
        fleet.crew.end(fault);
        tokio::time::sleep(GAP).await;
    }
    let report = fleet
        .finish("two quorum nodes' clocks jumped 3 s forward at once, 3 times")
        .await;
    println!("{report}");
    assert!(report.out_of_order.is_empty(), "{:?}", report.out_of_order);
    assert_fenced(&report.fleet);
}
