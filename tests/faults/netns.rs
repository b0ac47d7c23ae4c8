//! Real partitions: the lock server and each worker in network namespaces of their
//! own, one worker's veth pair set down, its traffic dropped by blackhole routes, or
//! its link slowed by `tbf` (`tests/faults/harness/netns.rs`), then the fault suite's checks.
//!
//! Quick workers (sections of 0–20 ms, 30 % readers, 50 ms of validity margin) and a
//! slow one (300–1500 ms) run beside the victim, with a 1 s TTL. Every test prints its
//! report (`cargo test --all-features --test faults netns:: -- --nocapture`). They need
//! root and iproute2: where namespaces cannot be made they skip with a line saying so
//! (`tests/faults/harness/needs_root.rs`), or fail with `REDISMUTEX_REQUIRE_ROOT_TESTS=1`.
//!
//! The tests run one at a time (see `SERIAL` in `tests/faults/harness/fault_checks.rs`).

use std::time::{Duration, Instant};

use crate::common::LIVENESS;
use crate::harness::expiry_watch::ExpiryWatch;
use crate::harness::fault_checks::{
    assert_ended_cleanly, assert_safe, assert_taken_over_after_expiry, ms, released_after,
    wait_released_after, SERIAL, TTL_MS, WAIT,
};
use crate::harness::fleet::{Fleet, Spec};
use crate::harness::needs_root;
use crate::harness::netns::NetFault;
use crate::harness::netns_fleet::NetnsFleet;
use crate::harness::netns_mix::{netns_fault, SLOW};
use crate::harness::report::Report;

/// A quick worker: sections of 0–20 ms on `k0`, `k1`, as the long run's quick workers.
fn quick() -> Spec {
    Spec {
        keys: 2,
        read_pct: 30,
        work_ms: (0, 20),
        intent: true,
        margin_ms: 50,
        ..Spec::default()
    }
}

/// A slow worker: sections of 300–1500 ms on `k2` alone.
fn slow() -> Spec {
    Spec {
        keys: 1,
        first_key: 2,
        work_ms: (300, 1500),
        ..quick()
    }
}

/// Quick workers `w0`, `w1`, slow worker `s0`, and `victim` with `victim_spec`, each in
/// a namespace of its own; `None` when the test is skipped (no namespaces here).
async fn fleet(victim_spec: &Spec) -> Option<NetnsFleet> {
    let how = needs_root::faults_as_root("", "netns::");
    let mut fleet = NetnsFleet::start_or_skip(TTL_MS, None, &how).await?;
    fleet.spawn("w0", &quick()).await;
    fleet.spawn("w1", &quick()).await;
    fleet.spawn("s0", &slow()).await;
    fleet.spawn("victim", victim_spec).await;
    Some(fleet)
}

/// Finishes the run with the expiries `watch` read noted for the fire lead, and checks
/// what every run must pass: no overlap, lost update, stale fenced write accepted or
/// write after its deadline, no lock key left, no token fired as lost without a fault
/// aimed at its worker, and every token measured fired before its key expired.
async fn finish_checked(fleet: &mut NetnsFleet, watch: ExpiryWatch, label: &str) -> Report {
    let notes = watch.stop().await;
    fleet.held.extend(notes);
    let report = fleet.finish(label).await;
    assert_safe(&report);
    assert_ended_cleanly(&report, "");
    assert!(
        report.fired_spurious.is_empty(),
        "{:?}",
        report.fired_spurious
    );
    assert!(
        report.leads.iter().all(|l| l.lead_us > 0),
        "a token fired after its key expired: {:?}",
        report.leads
    );
    println!("fire leads min/p50/max ms: {:?}", report.lead_spread_ms());
    report
}

/// One worker holding a write lock cut off for 2.5 TTLs by `fault`: its token fires
/// (Expired) before its key expires on the server, the others take the key over only
/// after it expired and go on, and the worker comes back once the link is healed.
async fn partition_fires_first(fault: NetFault, label: &str) {
    let victim_spec = Spec {
        read_pct: 0,
        hold_ms: Some(3000),
        ..quick()
    };
    let Some(mut fleet) = fleet(&victim_spec).await else {
        return;
    };
    let watch = ExpiryWatch::server(fleet.lock.client(), fleet.lock_keys());
    let holding = fleet
        .crew
        .log
        .wait_for(WAIT, |e| e.worker == "victim" && e.is("HOLDING"))
        .await
        .expect("the victim holds a lock");
    let cut = fleet.cut("victim", fault);
    let cut_us = fleet.crew.faults[cut].start_us;
    let held = fleet.note_held(Some("victim")).await;
    assert_eq!(held.len(), 1, "the victim's lock on the server: {held:?}");
    let (key, token) = (holding.key().to_string(), holding.token());
    let fired = fleet
        .crew
        .log
        .wait_for(WAIT, |e| {
            e.worker == "victim" && e.is("FIRED") && e.token() == token
        })
        .await
        .expect("the victim's token fired");
    assert_eq!(fired.last(), "Expired");
    assert!(
        fired.us > cut_us && fired.us < held[0].expiry_us,
        "{fired:?}"
    );
    let log = &fleet.crew.log;
    let taken =
        assert_taken_over_after_expiry(log, WAIT, ("victim", &key), &fired, held[0].expiry_us)
            .await;
    tokio::time::sleep(ms(2500).saturating_sub(since_ms(cut_us))).await;
    let others = fleet
        .crew
        .log
        .count(|e| e.is("RELEASED") && e.worker != "victim" && e.us > taken.us);
    assert!(others >= 3, "the others stopped working: {others}");
    fleet.heal(cut);
    let healed_us = fleet.crew.faults[cut].end_us;
    let back = fleet
        .crew
        .log
        .wait_for(Duration::from_secs(8), |e| {
            e.worker == "victim" && e.is("ACQUIRED") && e.us > healed_us
        })
        .await;
    assert!(
        back.is_some(),
        "the victim did not come back after the heal"
    );
    let after = wait_released_after(&fleet.crew, healed_us, 3, WAIT).await;
    assert!(after >= 3, "only {after} sections after the heal");
    let report = finish_checked(&mut fleet, watch, label).await;
    assert!(!report.leads.is_empty(), "no lead measured");
    assert!(report.fired_expected >= 1, "no token fired as lost");
}

/// The time since `us` (µs since the epoch).
fn since_ms(us: u64) -> Duration {
    Duration::from_micros(crate::common::events::now_us().saturating_sub(us))
}

/// The server's end of one worker's veth pair set down for 2.5 TTLs.
#[tokio::test]
async fn link_down_fires_the_token_before_the_key_expires() {
    let _serial = SERIAL.lock().await;
    partition_fires_first(NetFault::Down, "netns: one worker's link down 2.5 s").await;
}

/// One worker's traffic dropped by blackhole routes on both sides for 2.5 TTLs.
#[tokio::test]
async fn dropped_traffic_fires_the_token_before_the_key_expires() {
    let _serial = SERIAL.lock().await;
    partition_fires_first(NetFault::Drop, "netns: one worker's traffic dropped 2.5 s").await;
}

/// One quick worker's link slowed to 16 kbit/s for 3 TTLs: the shaper holds packets
/// back, the others go on, nothing unsafe happens, any token that fires does so before
/// its key expires, and the worker works at full speed again once healed.
#[tokio::test]
async fn slow_link_stays_safe_and_recovers() {
    let _serial = SERIAL.lock().await;
    let Some(mut fleet) = fleet(&quick()).await else {
        return;
    };
    let watch = ExpiryWatch::server(fleet.lock.client(), fleet.lock_keys());
    tokio::time::sleep(ms(500)).await;
    let link = fleet.link("victim");
    let slowed = fleet.cut("victim", SLOW);
    let slowed_us = fleet.crew.faults[slowed].start_us;
    tokio::time::sleep(ms(3 * TTL_MS)).await;
    let shaped = fleet.net.shaped(link);
    fleet.heal(slowed);
    let healed_us = fleet.crew.faults[slowed].end_us;
    let victim_released = |from: u64, to: u64| {
        let log = &fleet.crew.log;
        log.count(|e| e.worker == "victim" && e.is("RELEASED") && e.us > from && e.us < to)
    };
    let during = victim_released(slowed_us, healed_us);
    let others = released_after(&fleet.crew, slowed_us) - victim_released(slowed_us, u64::MAX);
    // Liveness, with a generous bound: the shaper's backlog drains after the heal, and a
    // request that timed out meanwhile may wait for its reconnection.
    let healed = Instant::now();
    let mut after = victim_released(healed_us, u64::MAX);
    while after < 3 && healed.elapsed() < LIVENESS {
        tokio::time::sleep(ms(100)).await;
        after = victim_released(healed_us, u64::MAX);
    }
    let took = healed.elapsed();
    println!("slow link: {shaped} packets shaped; the victim's sections: {during} in 3 s slowed, {after} within {took:?} after");
    let report = finish_checked(
        &mut fleet,
        watch,
        "netns: one worker's link at 16 kbit/s 3 s",
    )
    .await;
    assert!(shaped > 0, "the shaper held nothing back");
    assert!(others >= 10, "the others stopped working: {others}");
    assert!(
        after >= 3,
        "the victim did not go on within {LIVENESS:?} of the heal: {after}"
    );
    assert!(report.referee.sections > 0);
}

/// The mix of `netns_fault` four times on the fleet, with two slow holders (on `k2`
/// and `k3`, 1.5 s each) beside the others: every fault healed, the checks passed, and
/// work going on after the last.
#[tokio::test]
async fn netns_mix_stays_safe() {
    let _serial = SERIAL.lock().await;
    let holder = Spec {
        hold_ms: Some(1500),
        read_pct: 0,
        ..slow()
    };
    let Some(mut fleet) = fleet(&holder).await else {
        return;
    };
    let other_holder = Spec {
        first_key: 3,
        ..holder
    };
    fleet.spawn("s1", &other_holder).await;
    let watch = ExpiryWatch::server(fleet.lock.client(), fleet.lock_keys());
    for _ in 0..4 {
        tokio::time::sleep(ms(500)).await;
        netns_fault(&mut fleet, TTL_MS).await;
    }
    let last_us = fleet.crew.faults.last().expect("faults").end_us;
    let after = wait_released_after(&fleet.crew, last_us, 3, WAIT).await;
    let report = finish_checked(&mut fleet, watch, "netns: the mix, 4 faults").await;
    let netns: usize = ["NetnsDown", "NetnsDrop", "NetnsSlow"]
        .iter()
        .filter_map(|kind| report.faults.get(*kind))
        .sum();
    assert_eq!(netns, 4, "{:?}", report.faults);
    assert!(after >= 3, "only {after} sections after the last fault");
}
