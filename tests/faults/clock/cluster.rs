//! Clock faults on a Redis Cluster master (feature `cluster`): the workers of `clock.rs`
//! (three writers, TTL 1 s, sections of 300–600 ms, polling) over `ClusterConnection`,
//! on two hash-tagged keys that one master serves, checked by the referee, while that
//! master's wall clock jumps forward past the TTL, jumps back, or runs twice as fast.
//! Every node runs on a clock of its own (`tests/faults/harness/cluster_clocks.rs`); only the
//! keys' master's moves, and no failover happens (each test checks that the masters and
//! their slots are the same at the end).
//!
//! On a cluster every token is `max(last + 1, TIME in µs)` (`lua/shared.lua`), so the
//! master's clock counts twice: it expires the keys, and it floors the tokens. A forward
//! jump is a single server's jump (held locks expire early: guard overlaps, required
//! here as there), and the tokens minted after it follow the jumped clock. A jump back
//! lowers `TIME` below the last token, so the floor gives way to the counter: each token
//! is the last + 1 until the clock catches up; nothing overlaps. Fencing refuses every
//! stale write in all three. (`cargo test --features cluster --test faults clock:: --
//! --nocapture` prints the reports.)

use crate::common::cluster::Master;
use crate::common::events::now_us;
use crate::common::record::{FaultKind, Target};
use crate::harness::cluster_clocks::NodeClocks;
use crate::harness::cluster_fleet::ClusterFleet;
use crate::harness::fault_checks::{ms, SERIAL, TTL_MS};
use crate::harness::fleet::{Fleet, Spec};
use crate::harness::order::{guard_overlaps, out_of_order, token_steps};
use crate::harness::report::Report;

use super::{assert_fenced, long_sections};

/// The keys' master, by its place in `Cluster::masters`.
const MASTER: usize = 0;

/// The fleet on a cluster whose nodes run on clocks of their own, with three writers of
/// [`long_sections`] on two keys that master [`MASTER`] serves; the masters as they were
/// before any fault, and the clocks.
async fn fleet_on_a_master() -> (ClusterFleet, Vec<Master>, NodeClocks) {
    let (mut fleet, clocks) = ClusterFleet::start_on_clocks(TTL_MS).await;
    let masters = fleet.cluster.masters();
    let spec = Spec {
        first_key: fleet.keys_on_master(MASTER, long_sections().keys),
        ..long_sections()
    };
    for n in 0..3 {
        fleet.spawn(&format!("w{n}"), &spec).await;
    }
    (fleet, masters, clocks)
}

/// What every clock fault on the master must keep, on top of [`assert_fenced`]: no
/// failover (the same masters serve the same slots), and every token above the tokens
/// acquired before it on its key (`out_of_order`).
fn assert_fenced_on_the_master(fleet: &ClusterFleet, before: &[Master], report: &Report) {
    assert_eq!(fleet.cluster.masters(), before, "the cluster failed over");
    let out = out_of_order(&fleet.crew.log.all());
    assert!(out.is_empty(), "tokens out of acquisition order: {out:?}");
    assert_fenced(report);
}

/// Prints the guard overlaps, the workers' errors and the counter's steps of 1 (tokens
/// minted as `last + 1`, not from the clock) of a run; the guard overlaps.
fn print_figures(fleet: &ClusterFleet) -> Vec<String> {
    let events = fleet.crew.log.all();
    let overlaps = guard_overlaps(&events, &fleet.crew.faults);
    let errors: Vec<String> = events
        .iter()
        .filter(|e| e.is("ERROR"))
        .map(|e| format!("{} {}: {}", e.us, e.worker, e.fields.join(" ")))
        .collect();
    let steps = token_steps(&events, 0);
    let ones = steps.iter().filter(|s| s.step == 1).count();
    println!("   guard overlaps     {}: {overlaps:#?}", overlaps.len());
    println!("   worker errors      {}: {errors:#?}", errors.len());
    println!("   tokens last + 1    {ones} of {} steps", steps.len());
    overlaps
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_masters_forward_jump_makes_overlaps_and_its_tokens_follow_its_clock() {
    let _serial = SERIAL.lock().await;
    let (mut fleet, masters, clocks) = fleet_on_a_master().await;
    let clock = clocks.of(masters[MASTER].port);
    tokio::time::sleep(ms(800)).await;
    for _ in 0..5 {
        let fault = fleet.crew.begin(FaultKind::ClockForward, Target::Server);
        clock.jump(3 * TTL_MS as i64);
        fleet.crew.end(fault);
        tokio::time::sleep(ms(1500)).await;
    }
    let last_jump = fleet.crew.faults.last().expect("a jump").start_us;
    let ahead_us = clock.ahead_ms() as u64 * 1000;
    let report = fleet
        .finish("a cluster master's clock jumped 3 s forward (3 TTLs), 5 times")
        .await;
    let overlaps = print_figures(&fleet);
    assert!(
        (1..=20).contains(&overlaps.len()),
        "a forward jump past the TTL expires held locks early: 1 to 20 guard overlaps \
         over 5 jumps of 2 keys, not {}",
        overlaps.len()
    );
    assert_follows_the_clock(&fleet, last_jump, ahead_us);
    assert_fenced_on_the_master(&fleet, &masters, &report);
}

/// Every token acquired from a second after the last jump on is at least the master's
/// clock at that jump (the real time plus `ahead_us`): the floor at `TIME` followed the
/// jumped clock; and there is such a token.
fn assert_follows_the_clock(fleet: &ClusterFleet, last_jump_us: u64, ahead_us: u64) {
    let floor = last_jump_us + ahead_us;
    let after: Vec<u64> = fleet
        .crew
        .log
        .all()
        .iter()
        .filter(|e| e.is("ACQUIRED") && e.us > last_jump_us + 1_000_000)
        .map(|e| e.token())
        .collect();
    assert!(!after.is_empty(), "no acquisition after the last jump");
    let below: Vec<&u64> = after.iter().filter(|&&token| token < floor).collect();
    assert!(
        below.is_empty(),
        "tokens below the jumped clock's {floor} µs: {below:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_masters_backward_jump_overlaps_nothing_and_its_counter_still_grows() {
    let _serial = SERIAL.lock().await;
    let (mut fleet, masters, clocks) = fleet_on_a_master().await;
    let clock = clocks.of(masters[MASTER].port);
    tokio::time::sleep(ms(800)).await;
    for _ in 0..3 {
        let fault = fleet.crew.begin(FaultKind::ClockBack, Target::Server);
        clock.jump(-3 * TTL_MS as i64);
        fleet.crew.end(fault);
        tokio::time::sleep(ms(1500)).await;
    }
    let first_jump = fleet.crew.faults[0].start_us;
    let report = fleet
        .finish("a cluster master's clock jumped 3 s back (3 TTLs), 3 times")
        .await;
    let overlaps = print_figures(&fleet);
    assert!(overlaps.is_empty(), "{overlaps:#?}");
    let r = &report.referee;
    assert_eq!(r.violations, 0, "{:?}", r.violation_log);
    assert_eq!(r.lost_updates, 0);
    assert_the_counter_grows(&fleet, first_jump);
    assert_fenced_on_the_master(&fleet, &masters, &report);
}

/// After the first jump back (at `first_jump_us`) the master's clock stays at least 3 s
/// behind the real one, and so for a while below the last token minted before the jump:
/// every token acquired from a second after the jump on is either the last + 1 (the
/// counter) or no more than its print time less 3 s (the clock set back, once it passed
/// the counter); and the counter steps by 1 at least 5 times.
fn assert_the_counter_grows(fleet: &ClusterFleet, first_jump_us: u64) {
    let steps = token_steps(&fleet.crew.log.all(), first_jump_us + 1_000_000);
    let ones = steps.iter().filter(|s| s.step == 1).count();
    assert!(
        ones >= 5,
        "the counter stepped by 1 only {ones} times: {steps:?}"
    );
    let odd: Vec<_> = steps
        .iter()
        .filter(|s| s.step != 1 && s.token + 3 * TTL_MS * 1000 > s.us)
        .collect();
    assert!(
        odd.is_empty(),
        "neither the last + 1 nor the clock set back: {odd:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_whose_clock_runs_twice_as_fast_is_fenced() {
    let _serial = SERIAL.lock().await;
    let (mut fleet, masters, clocks) = fleet_on_a_master().await;
    let clock = clocks.of(masters[MASTER].port);
    tokio::time::sleep(ms(800)).await;
    let fault = fleet.crew.begin(FaultKind::ClockFast, Target::Server);
    let started = now_us();
    clock.rate(1_000_000);
    tokio::time::sleep(ms(4000)).await;
    clock.rate(0);
    fleet.crew.end(fault);
    let gained_ms = clock.ahead_ms();
    let ran_ms = (now_us() - started) / 1000;
    tokio::time::sleep(ms(1000)).await;
    let report = fleet
        .finish("a cluster master's clock ran twice as fast for 4 s")
        .await;
    print_figures(&fleet);
    println!("   clock gained       {gained_ms} ms in {ran_ms} ms");
    assert_fenced_on_the_master(&fleet, &masters, &report);
}
