//! Soak: five workers (three quick, two slow) on two keys, readers and writers with
//! lock intent, and a fault picked at random every 1–3 s (each kind of
//! `tests/faults/holders.rs` and `tests/faults/server.rs`, always healed), for
//! `SOAK_SECS` seconds (default 120). Then the full report.
//!
//! ```sh
//! SOAK_SECS=300 cargo test --release --test faults soak::soak_with_random_faults -- --ignored --nocapture
//! ```
//!
//! The quorum soak (`soak_quorum_with_random_faults`; `soak_quorum_short` runs it for
//! 20 s in every `cargo test`) does the same over a quorum of three nodes
//! (`tests/faults/harness/quorum_fleet.rs`), with the faults of `tests/faults/quorum.rs` on one
//! node at a time and workers killed or frozen, one fault every 2.2–3 s after the last
//! healed. Its nodes run with `appendonly yes` and `appendfsync always`; a node restarts
//! within quorum mode's preconditions: at once from its AOF, or empty (its AOF removed)
//! after staying down past the TTL:
//!
//! ```sh
//! SOAK_SECS=300 cargo test --release --test faults soak::soak_quorum_with_random_faults -- --ignored --nocapture
//! ```
//!
//! It asserts that every overlap the referee saw is explained by a worker frozen inside
//! its check→leave window (the residual hazard only fencing covers), that lost updates
//! come only with such overlaps, that accepted fenced writes never went back, that a
//! holder entered with a token not above the last writer's only after a freeze between
//! its check and its entry, that every token measured fired before its key expired, and
//! that no lock key outlived a TTL once everyone stopped.

use crate::common::events::now_us;
use crate::harness::fault_checks::{ms, SERIAL};
use crate::harness::fleet::{Fleet, Spec};
use crate::harness::mixes::{between, quorum_fault, single_fault, Roster};
use crate::harness::order::explained_by_worker_freeze;
use crate::harness::quorum_fleet::QuorumFleet;
use crate::harness::server_fleet::ServerFleet;

const TTL_MS: u64 = 1000;

/// `SOAK_SECS`, 120 by default.
fn soak_secs() -> u64 {
    std::env::var("SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(120)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "runs for SOAK_SECS (default 120 s): cargo test --release --test faults soak::soak_with_random_faults -- --ignored"]
async fn soak_with_random_faults() {
    let _serial = SERIAL.lock().await;
    let secs = soak_secs();
    let mut fleet = ServerFleet::start(TTL_MS).await;
    let mut roster = Roster::start(&mut fleet, &five_workers()).await;
    let end_us = now_us() + secs * 1_000_000;
    while now_us() < end_us {
        tokio::time::sleep(ms(between(1000, 3000))).await;
        single_fault(&mut fleet, &mut roster, TTL_MS).await;
    }
    let report = fleet.finish(&format!("soak, {secs} s")).await;

    let r = &report.referee;
    let unexplained = r.violations as usize - report.overlaps_explained;
    println!(
        "   overlaps unexplained {unexplained}, explained by a freeze in check→leave {}",
        report.overlaps_explained
    );
    assert_eq!(unexplained, 0, "overlaps: {:?}", r.violation_log);
    assert!(
        r.lost_updates <= report.overlaps_explained as i64,
        "{} lost updates, {} explained overlaps",
        r.lost_updates,
        report.overlaps_explained
    );
    assert!(r.lost_updates >= 0, "more increments than writer sections");
    assert!(
        report.token_order_unexplained.is_empty(),
        "tokens out of order: {:?}",
        report.token_order_unexplained
    );
    assert!(
        report.rejected_writes <= report.overlaps_explained,
        "{} section writes refused, {} explained overlaps",
        report.rejected_writes,
        report.overlaps_explained
    );
    assert!(
        report.keys_left.is_empty(),
        "keys left: {:?}",
        report.keys_left
    );
    assert!(
        report.leads.iter().all(|l| l.lead_us > 0),
        "tokens fired after their key expired: {:?}",
        report.leads
    );
    assert!(r.sections > secs, "work stalled: {} sections", r.sections);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "runs for SOAK_SECS (default 120 s): cargo test --release --test faults soak::soak_quorum -- --ignored"]
async fn soak_quorum_with_random_faults() {
    let _serial = SERIAL.lock().await;
    quorum_soak(soak_secs()).await;
}

/// The quorum soak for 20 s, in every `cargo test`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_quorum_short() {
    let _serial = SERIAL.lock().await;
    quorum_soak(20).await;
}

/// Five workers (three quick, two slow) on two keys over a quorum of three durable
/// nodes (`appendonly yes`, `appendfsync always`), and for `secs` seconds a fault at
/// random every 2.2–3 s after the last one healed: one node partitioned, slowed, cut,
/// frozen, or restarted within quorum mode's preconditions (at once from its AOF, or
/// empty after 1.2–1.9 s down, past the TTL), or a worker killed (and replaced) or
/// frozen past the TTL.
async fn quorum_soak(secs: u64) {
    let mut fleet = QuorumFleet::start_aof(TTL_MS).await;
    let mut roster = Roster::start(&mut fleet, &five_workers()).await;
    let end_us = now_us() + secs * 1_000_000;
    while now_us() < end_us {
        tokio::time::sleep(ms(between(2200, 3000))).await;
        quorum_fault(&mut fleet, &mut roster, TTL_MS).await;
    }
    let report = fleet.finish(&format!("quorum soak, {secs} s")).await;

    let r = &report.fleet.referee;
    let unexplained_of = |lines: &[String]| {
        lines
            .iter()
            .filter(|line| !explained_by_worker_freeze(line, &fleet.crew.faults, TTL_MS))
            .cloned()
            .collect::<Vec<String>>()
    };
    let unexplained = r.violations as usize - report.fleet.overlaps_explained;
    let out_of_order = unexplained_of(&report.out_of_order);
    let guard_overlaps = unexplained_of(&report.guard_overlaps);
    println!(
        "   overlaps unexplained {unexplained}, explained by a freeze in check→leave {}; \
         guards overlapping unexplained {}; tokens out of order unexplained {}",
        report.fleet.overlaps_explained,
        guard_overlaps.len(),
        out_of_order.len()
    );
    let evidence = || fleet.evidence(&report);
    assert_eq!(
        unexplained,
        0,
        "overlaps: {:?}\n{}",
        r.violation_log,
        evidence()
    );
    assert!(
        r.lost_updates <= report.fleet.overlaps_explained as i64,
        "{} lost updates, {} explained overlaps\n{}",
        r.lost_updates,
        report.fleet.overlaps_explained,
        evidence()
    );
    assert!(r.lost_updates >= 0, "more increments than writer sections");
    assert!(
        report.fleet.token_order_unexplained.is_empty(),
        "tokens out of order: {:?}\n{}",
        report.fleet.token_order_unexplained,
        evidence()
    );
    assert_eq!(r.stale_accepted, 0, "{:?}", r.stale_accepted_log);
    assert!(
        out_of_order.is_empty(),
        "tokens out of acquisition order: {out_of_order:?}\n{}",
        evidence()
    );
    assert!(
        guard_overlaps.is_empty(),
        "guards overlapping: {guard_overlaps:?}\n{}",
        evidence()
    );
    assert!(
        report.fleet.rejected_writes <= report.fleet.overlaps_explained,
        "{} section writes refused, {} explained overlaps\n{}",
        report.fleet.rejected_writes,
        report.fleet.overlaps_explained,
        evidence()
    );
    assert!(
        report.fleet.keys_left.is_empty(),
        "keys left: {:?}",
        report.fleet.keys_left
    );
    assert!(
        report.unverified.is_empty(),
        "faults not seen on their node: {:?}",
        report.unverified
    );
    assert!(!fleet.crew.faults.is_empty(), "no fault injected");
    assert!(r.sections > secs, "work stalled: {} sections", r.sections);
}

/// The soaks' five workers, three quick and two slow.
fn five_workers() -> Vec<Spec> {
    let (quick, slow) = quick_and_slow();
    vec![quick.clone(), quick.clone(), quick, slow.clone(), slow]
}

/// The soaks' workers: quick ones, and slow ones whose guards outlive pauses and
/// blackholes, so that tokens fire as Expired and their lead is measured. Both on two
/// keys, 40 % readers, writers with the lock intent.
fn quick_and_slow() -> (Spec, Spec) {
    let quick = Spec {
        keys: 2,
        read_pct: 40,
        work_ms: (10, 80),
        hold_ms: None,
        intent: true,
        margin_ms: 0,
        first_key: 0,
        exec: false,
        notify: true,
        set: 0,
    };
    let slow = Spec {
        work_ms: (300, 1500),
        ..quick.clone()
    };
    (quick, slow)
}
