//! Faults aimed at lock holders: a holder SIGKILLed or SIGSTOPped, cut off by its proxy,
//! slowed by latency and jitter, or its connections reset.
//!
//! As in `tests/faults/server.rs`, lock holders run as worker processes
//! (`examples/fault_worker.rs`) behind their own proxies, a referee server counts
//! overlapping critical sections, lost updates and stale fenced writes, and each test
//! injects one kind of fault with a 1 s TTL. Every test prints its report
//! (`cargo test --test faults holders:: -- --nocapture`).
//!
//! The tests run one at a time (see `SERIAL` in `tests/faults/harness/fault_checks.rs`): their
//! assertions are about timing, and fleets of processes at once would starve each other.

use std::time::Duration;

use crate::common::events::Event;
use crate::common::proxy::Fault;
use crate::common::record::FaultKind;
use crate::harness::fault_checks::{
    assert_no_loss, assert_safe, assert_taken_over_after_expiry, fleet, fleet_with_holder, mixed,
    ms, released_after, wait_released_after, SERIAL, TTL_MS, WAIT,
};
use crate::harness::fleet::{Fleet, Spec};

/// A SIGKILLed holder cannot release: its key expires by its TTL, and another worker
/// takes over within TTL + one refresh period, not before the key expired.
#[tokio::test]
async fn holder_sigkilled_is_taken_over_after_its_ttl() {
    let _serial = SERIAL.lock().await;
    let spec = Spec::default();
    let mut fleet = fleet_with_holder(&spec, "victim", 5000).await;

    let holding = fleet
        .crew
        .log
        .wait_for(WAIT, |e| e.worker == "victim" && e.is("HOLDING"))
        .await
        .expect("the victim holds a lock");
    tokio::time::sleep(ms(300)).await;
    let held = fleet.note_held(Some("victim")).await;
    assert_eq!(
        held.len(),
        1,
        "the victim's lock is on the server: {held:?}"
    );
    let expiry_us = held[0].expiry_us;
    fleet.crew.kill("victim").await;
    let kill_us = fleet.crew.faults.last().expect("the kill").start_us;
    let key = holding.key().to_string();
    let next = fleet
        .crew
        .log
        .wait_for(WAIT, |e| {
            e.is("ACQUIRED") && e.key() == key && e.worker != "victim" && e.us > kill_us
        })
        .await
        .expect("another worker takes the key over");
    tokio::time::sleep(ms(500)).await;
    let report = fleet.finish("holder SIGKILLed").await;

    let takeover_ms = (next.us - kill_us) as f64 / 1000.0;
    assert_eq!(report.takeovers_ms, vec![takeover_ms]);
    assert!(
        takeover_ms <= 1500.0,
        "takeover took {takeover_ms} ms, more than TTL + ttl/2"
    );
    assert!(
        next.us >= expiry_us,
        "{} acquired {key} {} µs before the victim's key expired",
        next.worker,
        expiry_us - next.us
    );
    let intruders = fleet
        .crew
        .log
        .count(|e| e.is("ACQUIRED") && e.key() == key && e.us > holding.us && e.us < expiry_us);
    assert_eq!(
        intruders, 0,
        "someone acquired {key} while the victim held it"
    );
    assert!(report.referee.writes > 0);
    assert_safe(&report);
}

/// A holder frozen (SIGSTOP) past its TTL inside its section: on waking, its
/// `is_cancelled()` check says Expired before it writes, and its fenced write, tried on
/// purpose as a probe, is rejected because another writer took the lock and wrote in
/// the meantime. Several rounds: waking races the guard's background task, which must
/// not matter.
#[tokio::test]
async fn frozen_holder_abandons_and_its_fenced_write_is_rejected() {
    let _serial = SERIAL.lock().await;
    let spec = Spec::default();
    let mut fleet = fleet_with_holder(&spec, "frozen", 600).await;

    let mut after = 0;
    for round in 0..4 {
        let (holding, stopped_us, resumed_us) = fleet
            .crew
            .freeze_while_holding("frozen", after, 600_000, ms(2000), WAIT)
            .await;

        let (key, token) = (holding.key().to_string(), holding.token());
        let mine = |e: &Event| e.worker == "frozen" && e.key() == key && e.token() == token;
        let outcome = fleet
            .crew
            .log
            .wait_for(WAIT, |e| mine(e) && (e.is("ABANDONED") || e.is("CHECKED")))
            .await
            .unwrap_or_else(|| panic!("round {round}: no check after waking"));
        assert!(
            outcome.is("ABANDONED") && outcome.last() == "Expired",
            "round {round}: woke up and went on: {outcome:?}"
        );
        assert!(outcome.us >= resumed_us);
        let probe = fleet
            .crew
            .log
            .wait_for(WAIT, |e| mine(e) && e.is("FENCED"))
            .await
            .unwrap_or_else(|| panic!("round {round}: no probe"));
        assert_eq!(
            (probe.field(2), probe.last()),
            ("rejected", "probe"),
            "round {round}: a stale fenced write was accepted"
        );
        let released = fleet
            .crew
            .log
            .wait_for(WAIT, |e| mine(e) && e.is("RELEASED"))
            .await
            .unwrap_or_else(|| panic!("round {round}: not released"));
        let acted = fleet.crew.log.count(|e| {
            mine(e) && (e.is("CHECKED") || e.is("ENTERED") || e.is("WROTE") || e.is("READ"))
        });
        assert_eq!(acted, 0, "round {round}: the frozen holder acted");
        let others_wrote = fleet.crew.log.count(|e| {
            e.worker != "frozen"
                && e.is("FENCED")
                && e.key() == key
                && e.field(2) == "accepted"
                && e.us > stopped_us
                && e.us < resumed_us
        });
        assert!(others_wrote > 0, "round {round}: nobody wrote meanwhile");
        after = released.us;
    }
    let report = fleet.finish("holder SIGSTOPped past its TTL").await;
    assert!(report.referee.stale_rejected >= 4);
    assert_safe(&report);
}

/// One worker cut off by its proxy (packets dropped, sockets open): its token fires
/// before its key expires on the server; the others take the key over and go on.
#[tokio::test]
async fn blackholed_worker_fires_before_its_key_expires() {
    let _serial = SERIAL.lock().await;
    let spec = Spec::default();
    let mut fleet = fleet_with_holder(&spec, "victim", 3000).await;

    let holding = fleet
        .crew
        .log
        .wait_for(WAIT, |e| e.worker == "victim" && e.is("HOLDING"))
        .await
        .expect("the victim holds a lock");
    let fault = fleet
        .crew
        .proxy_fault("victim", FaultKind::Blackhole, Fault::Blackhole);
    let held = fleet.note_held(Some("victim")).await;
    assert_eq!(
        held.len(),
        1,
        "the victim's lock is on the server: {held:?}"
    );
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
    let log = &fleet.crew.log;
    let taken =
        assert_taken_over_after_expiry(log, WAIT, ("victim", &key), &fired, held[0].expiry_us)
            .await;
    tokio::time::sleep(ms(700)).await;
    let blackholed_us = fleet.crew.faults[fault].start_us;
    let others_done = fleet
        .crew
        .log
        .count(|e| e.is("RELEASED") && e.worker != "victim" && e.us > taken.us);
    assert!(
        others_done >= 3,
        "the others stopped working: {others_done}"
    );
    fleet.crew.heal_proxy(fault);
    let healed_us = fleet.crew.faults[fault].end_us;
    let back = fleet
        .crew
        .log
        .wait_for(Duration::from_secs(8), |e| {
            e.worker == "victim" && e.is("ACQUIRED") && e.us > healed_us
        })
        .await;
    assert!(
        back.is_some(),
        "the victim did not come back after the blackhole"
    );
    let report = fleet.finish("one worker blackholed").await;

    assert_eq!(report.leads.len(), 1, "{:?}", report.leads);
    assert!(report.leads[0].lead_us > 0, "{:?}", report.leads);
    assert!(fired.us > blackholed_us);
    assert!(
        report.fired_spurious.is_empty(),
        "{:?}",
        report.fired_spurious
    );
    assert_safe(&report);
}

/// Round trips of ttl/6..ttl/3 with jitter for four TTLs: refreshes land in time, no
/// token fires, sections complete.
#[tokio::test]
async fn latency_and_jitter_cause_no_false_loss() {
    let _serial = SERIAL.lock().await;
    let spec = mixed();
    let mut fleet = fleet(&spec).await;
    tokio::time::sleep(ms(300)).await;
    let delay = Fault::Delay {
        base: ms(TTL_MS / 12),
        jitter: ms(TTL_MS / 12),
    };
    let names = fleet.crew.live();
    let faults: Vec<usize> = names
        .iter()
        .map(|name| fleet.crew.proxy_fault(name, FaultKind::Delay, delay))
        .collect();
    let delayed_us = fleet.crew.faults[faults[0]].start_us;
    tokio::time::sleep(ms(4 * TTL_MS)).await;
    for fault in faults {
        fleet.crew.heal_proxy(fault);
    }
    let during = released_after(&fleet.crew, delayed_us);
    tokio::time::sleep(ms(300)).await;
    let report = fleet.finish("latency ttl/6..ttl/3 round trip").await;
    assert_no_loss(&report);
    assert!(during >= 5, "only {during} sections under latency");
    assert_safe(&report);
}

/// Connections reset by the proxies and killed by the server: workers reconnect, no
/// token fires, sections keep completing.
#[tokio::test]
async fn connection_resets_cause_no_false_loss() {
    let _serial = SERIAL.lock().await;
    let spec = mixed();
    let mut fleet = fleet(&spec).await;
    tokio::time::sleep(ms(300)).await;
    let names = fleet.crew.live();
    for round in 0..12 {
        if round % 4 == 3 {
            fleet.client_kill().await;
        } else {
            fleet.crew.reset(&names[round % names.len()]);
        }
        tokio::time::sleep(ms(250)).await;
    }
    let last_us = fleet.crew.faults.last().expect("faults").end_us;
    // An unlock whose connection was reset fails and leaves its key to expire by its
    // TTL, so work on that key may pause for up to a TTL.
    let after = wait_released_after(&fleet.crew, last_us, 3, ms(3 * TTL_MS)).await;
    let report = fleet.finish("connection resets and CLIENT KILL").await;
    assert_no_loss(&report);
    assert!(after >= 3, "only {after} sections after the last reset");
    assert!(report.referee.sections >= 20, "work stalled");
    assert_safe(&report);
}
