//! Faults aimed at the lock server: `redis-server` paused for less than ttl/2 or past
//! the TTL, and killed and restarted after a TTL.
//!
//! As in `tests/faults/holders.rs`, lock holders run as worker processes
//! (`examples/fault_worker.rs`) behind their own proxies, a referee server counts
//! overlapping critical sections, lost updates and stale fenced writes, and each test
//! injects one kind of fault with a 1 s TTL. Every test prints its report
//! (`cargo test --test faults server:: -- --nocapture`).
//!
//! The tests run one at a time (see `SERIAL` in `tests/faults/harness/fault_checks.rs`): their
//! assertions are about timing, and fleets of processes at once would starve each other.

use std::time::Duration;

use crate::common::record::{FaultKind, HeldLock, Target};
use crate::harness::fault_checks::{
    assert_no_loss, assert_safe, fleet, fleet_with_holder, mixed, ms, released_after, SERIAL, WAIT,
};
use crate::harness::fleet::{Fleet, Spec};

/// Redis frozen for less than ttl/2: refreshes are late, not lost; no token fires.
#[tokio::test]
async fn short_server_pause_fires_no_token() {
    let _serial = SERIAL.lock().await;
    let spec = mixed();
    let mut fleet = fleet(&spec).await;
    tokio::time::sleep(ms(500)).await;
    let mut resumed_us = 0;
    for _ in 0..3 {
        let fault = fleet.crew.begin(FaultKind::PauseServer, Target::Server);
        fleet.lock.pause();
        tokio::time::sleep(ms(300)).await;
        fleet.lock.resume();
        fleet.crew.end(fault);
        resumed_us = fleet.crew.faults[fault].end_us;
        tokio::time::sleep(ms(700)).await;
    }
    let report = fleet
        .finish("redis-server SIGSTOPped 300 ms, 3 times")
        .await;
    assert_no_loss(&report);
    assert!(
        released_after(&fleet.crew, resumed_us) >= 3,
        "work stopped after the pauses"
    );
    assert_safe(&report);
}

/// Redis frozen for 2.5 TTLs: every guard held fires by its own deadline, before its key
/// expires on the server, even though Redis never answers.
#[tokio::test]
async fn long_server_pause_fires_every_token_before_its_key_expires() {
    let _serial = SERIAL.lock().await;
    let spec = Spec {
        keys: 2,
        read_pct: 80,
        work_ms: (1200, 2000),
        ..Spec::default()
    };
    let mut fleet = fleet(&spec).await;
    // Freeze Redis while at least two guards are held (readers share a key).
    let conn = fleet.lock_conn().await;
    let deadline = tokio::time::Instant::now() + ms(5000);
    while HeldLock::read(&conn, &fleet.mutex, fleet.keys).await.len() < 2
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(ms(20)).await;
    }
    let held = fleet.note_held(None).await;
    let fault = fleet.crew.begin(FaultKind::PauseServerLong, Target::Server);
    fleet.lock.pause();
    tokio::time::sleep(ms(2500)).await;
    fleet.lock.resume();
    fleet.crew.end(fault);
    tokio::time::sleep(ms(1500)).await;
    let report = fleet.finish("redis-server SIGSTOPped 2.5 s").await;

    assert!(!held.is_empty(), "nobody held a lock when Redis froze");
    for lock in &held {
        let acquired = fleet.crew.acquired(&lock.id).expect("a holder");
        let fired = fleet
            .crew
            .log
            .filter(|e| {
                e.is("FIRED")
                    && e.worker == acquired.worker
                    && e.key() == acquired.key()
                    && e.token() == acquired.token()
            })
            .into_iter()
            .next()
            .unwrap_or_else(|| panic!("the token of {acquired:?} never fired"));
        assert!(
            fired.us < lock.expiry_us,
            "{fired:?} fired {} µs after its key expired",
            fired.us - lock.expiry_us
        );
    }
    assert!(!report.leads.is_empty(), "no token fired as Expired");
    assert!(
        report
            .leads
            .iter()
            .all(|l| l.lead_us > 0 && l.reason == "Expired"),
        "{:?}",
        report.leads
    );
    assert_safe(&report);
}

/// Redis killed, down for more than a TTL, restarted empty: tokens fire, workers
/// reconnect and go on.
///
/// Why wait a TTL: a server restarted at once without persistence comes back with no
/// lock keys while the old holders still believe they hold theirs until their validity
/// deadline (up to a TTL away). A new client would get the same lock at once, and two
/// holders would act together: exclusion would be broken. Staying down for a TTL (or
/// persisting with `appendfsync always`) lets every old guard expire first.
#[tokio::test]
async fn server_killed_and_restarted_after_a_ttl() {
    let _serial = SERIAL.lock().await;
    let spec = Spec {
        work_ms: (50, 300),
        ..mixed()
    };
    let mut fleet = fleet_with_holder(&spec, "holder", 3000).await;
    let holding = fleet
        .crew
        .log
        .wait_for(WAIT, |e| e.worker == "holder" && e.is("HOLDING"))
        .await
        .expect("the holder holds a lock");
    tokio::time::sleep(ms(100)).await;
    let held = fleet.note_held(None).await;
    let fault = fleet.crew.begin(FaultKind::KillServer, Target::Server);
    fleet.lock.stop();
    tokio::time::sleep(ms(1200)).await;
    fleet.lock.restart();
    fleet.crew.end(fault);
    let restarted_us = fleet.crew.faults[fault].end_us;
    let recovered = fleet
        .crew
        .log
        .wait_for(Duration::from_secs(10), |e| {
            e.is("RELEASED") && e.us > restarted_us && e.last() == "held=true"
        })
        .await;
    assert!(
        recovered.is_some(),
        "no section completed after the restart"
    );
    tokio::time::sleep(ms(1500)).await;
    let report = fleet
        .finish("redis-server SIGKILLed, restarted after 1.2 s")
        .await;

    assert!(!held.is_empty(), "nobody held a lock when Redis died");
    for lock in &held {
        let acquired = fleet.crew.acquired(&lock.id).expect("a holder");
        let fired = fleet.crew.log.count(|e| {
            e.is("FIRED")
                && e.worker == acquired.worker
                && e.token() == acquired.token()
                && e.us < restarted_us
        });
        assert_eq!(fired, 1, "{acquired:?} had not fired before the restart");
    }
    let holder_fired = fleet
        .crew
        .log
        .filter(|e| e.worker == "holder" && e.is("FIRED") && e.token() == holding.token());
    assert!(
        holder_fired.len() == 1
            && holder_fired[0].last() == "Expired"
            && holder_fired[0].us < restarted_us,
        "the holder's token did not fire as Expired while Redis was down: {holder_fired:?}"
    );
    assert!(report.fired_expected > 0, "no token fired as lost");
    assert!(
        released_after(&fleet.crew, restarted_us) >= 3,
        "work did not go on after the restart"
    );
    assert_safe(&report);
}
