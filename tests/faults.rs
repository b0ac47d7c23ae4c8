//! Fault injection: lock holders run as worker processes (`examples/fault_worker.rs`)
//! behind their own proxies, a referee server counts overlapping critical sections,
//! lost updates and stale fenced writes, and each test injects one kind of fault with a
//! 1 s TTL. Every test prints its report (`cargo test --test faults -- --nocapture`).
//!
//! The tests run one at a time (see [`SERIAL`]): their assertions are about timing
//! (a token must fire before its key expires, 12 ms of drift margin at this TTL), and
//! eight fleets of processes at once on a small machine would starve each other.

mod common;

use std::time::Duration;

use common::events::Event;
use common::fleet::{Fleet, Spec};
use common::proxy::Fault;
use common::report::{FaultKind, HeldLock, Report, Target};

const TTL_MS: u64 = 1000;

/// One fault test at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const WAIT: Duration = Duration::from_secs(5);

fn ms(d: u64) -> Duration {
    Duration::from_millis(d)
}

/// Three workers with `spec`, named w0..w2.
async fn fleet(spec: &Spec) -> Fleet {
    let mut fleet = Fleet::start(TTL_MS).await;
    for n in 0..3 {
        fleet.spawn(&format!("w{n}"), spec).await;
    }
    fleet
}

/// Workers w0 and w1 with `spec`, and `name` with `spec` but holding each lock it takes
/// for `hold_ms` (the worker's hold mode).
async fn fleet_with_holder(spec: &Spec, name: &str, hold_ms: u64) -> Fleet {
    let mut fleet = Fleet::start(TTL_MS).await;
    fleet.spawn("w0", spec).await;
    fleet.spawn("w1", spec).await;
    let holder = Spec {
        hold_ms: Some(hold_ms),
        ..spec.clone()
    };
    fleet.spawn(name, &holder).await;
    fleet
}

/// The checks every run must pass: the referee saw no overlap, no lost update, every
/// holder entering with a token above the last writer's, no section's fenced write
/// rejected, and no lock key outlived a TTL.
fn assert_safe(report: &Report) {
    let r = &report.referee;
    assert_eq!(
        r.violations, 0,
        "overlapping sections: {:?}",
        r.violation_log
    );
    assert_eq!(r.lost_updates, 0, "lost updates");
    assert_eq!(r.token_order, 0, "{:?}", r.token_order_log);
    assert_eq!(
        report.rejected_writes, 0,
        "a holder's fenced write was refused"
    );
    assert!(
        report.keys_left.is_empty(),
        "keys left: {:?}",
        report.keys_left
    );
}

/// No token fired with Lost or Expired.
fn assert_no_loss(report: &Report) {
    assert!(
        report.fired_spurious.is_empty()
            && report.fired_expected == 0
            && report.fired_on_arrival == 0,
        "tokens fired as lost: expected {}, on arrival {}, spurious {:?}",
        report.fired_expected,
        report.fired_on_arrival,
        report.fired_spurious
    );
}

fn released_after(fleet: &Fleet, us: u64) -> usize {
    fleet.log.count(|e| e.is("RELEASED") && e.us > us)
}

/// Waits up to `timeout` for `n` sections released after `us`; how many there were.
async fn wait_released_after(fleet: &Fleet, us: u64, n: usize, timeout: Duration) -> usize {
    let deadline = tokio::time::Instant::now() + timeout;
    while released_after(fleet, us) < n && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(ms(10)).await;
    }
    released_after(fleet, us)
}

/// A SIGKILLed holder cannot release: its key expires by its TTL, and another worker
/// takes over within TTL + one refresh period, not before the key expired.
#[tokio::test]
async fn holder_sigkilled_is_taken_over_after_its_ttl() {
    let _serial = SERIAL.lock().await;
    let spec = Spec::default();
    let mut fleet = fleet_with_holder(&spec, "victim", 5000).await;

    let holding = fleet
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
    fleet.kill_worker("victim").await;
    let kill_us = fleet.faults.last().expect("the kill").start_us;
    let key = holding.key().to_string();
    let next = fleet
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
        let holding = fleet
            .log
            .wait_for(WAIT, |e| {
                e.worker == "frozen" && e.is("HOLDING") && e.us > after
            })
            .await
            .unwrap_or_else(|| panic!("round {round}: the frozen worker holds no lock"));
        let fault = fleet.freeze("frozen");
        let stopped_us = fleet.faults[fault].start_us;
        assert!(
            stopped_us < holding.us + 600_000,
            "round {round}: frozen after its hold ended"
        );
        tokio::time::sleep(ms(2000)).await;
        fleet.thaw(fault);
        let resumed_us = fleet.faults[fault].end_us;

        let (key, token) = (holding.key().to_string(), holding.token());
        let mine = |e: &Event| e.worker == "frozen" && e.key() == key && e.token() == token;
        let outcome = fleet
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
            .log
            .wait_for(WAIT, |e| mine(e) && e.is("RELEASED"))
            .await
            .unwrap_or_else(|| panic!("round {round}: not released"));
        let acted = fleet.log.count(|e| {
            mine(e) && (e.is("CHECKED") || e.is("ENTERED") || e.is("WROTE") || e.is("READ"))
        });
        assert_eq!(acted, 0, "round {round}: the frozen holder acted");
        let others_wrote = fleet.log.count(|e| {
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

/// Redis frozen for less than ttl/2: refreshes are late, not lost; no token fires.
#[tokio::test]
async fn short_server_pause_fires_no_token() {
    let _serial = SERIAL.lock().await;
    let spec = Spec {
        keys: 2,
        read_pct: 30,
        ..Spec::default()
    };
    let mut fleet = fleet(&spec).await;
    tokio::time::sleep(ms(500)).await;
    let mut resumed_us = 0;
    for _ in 0..3 {
        let fault = fleet.begin(FaultKind::PauseServer, Target::Server);
        fleet.lock.pause();
        tokio::time::sleep(ms(300)).await;
        fleet.lock.resume();
        fleet.end(fault);
        resumed_us = fleet.faults[fault].end_us;
        tokio::time::sleep(ms(700)).await;
    }
    let report = fleet
        .finish("redis-server SIGSTOPped 300 ms, 3 times")
        .await;
    assert_no_loss(&report);
    assert!(
        released_after(&fleet, resumed_us) >= 3,
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
    let fault = fleet.begin(FaultKind::PauseServerLong, Target::Server);
    fleet.lock.pause();
    tokio::time::sleep(ms(2500)).await;
    fleet.lock.resume();
    fleet.end(fault);
    tokio::time::sleep(ms(1500)).await;
    let report = fleet.finish("redis-server SIGSTOPped 2.5 s").await;

    assert!(!held.is_empty(), "nobody held a lock when Redis froze");
    for lock in &held {
        let acquired = fleet.acquired(&lock.id).expect("a holder");
        let fired = fleet
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
        keys: 2,
        read_pct: 30,
        work_ms: (50, 300),
        ..Spec::default()
    };
    let mut fleet = fleet_with_holder(&spec, "holder", 3000).await;
    let holding = fleet
        .log
        .wait_for(WAIT, |e| e.worker == "holder" && e.is("HOLDING"))
        .await
        .expect("the holder holds a lock");
    tokio::time::sleep(ms(100)).await;
    let held = fleet.note_held(None).await;
    let fault = fleet.begin(FaultKind::KillServer, Target::Server);
    fleet.lock.stop();
    tokio::time::sleep(ms(1200)).await;
    fleet.lock.restart();
    fleet.end(fault);
    let restarted_us = fleet.faults[fault].end_us;
    let recovered = fleet
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
        let acquired = fleet.acquired(&lock.id).expect("a holder");
        let fired = fleet.log.count(|e| {
            e.is("FIRED")
                && e.worker == acquired.worker
                && e.token() == acquired.token()
                && e.us < restarted_us
        });
        assert_eq!(fired, 1, "{acquired:?} had not fired before the restart");
    }
    let holder_fired = fleet
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
        released_after(&fleet, restarted_us) >= 3,
        "work did not go on after the restart"
    );
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
        .log
        .wait_for(WAIT, |e| e.worker == "victim" && e.is("HOLDING"))
        .await
        .expect("the victim holds a lock");
    let fault = fleet.proxy_fault("victim", FaultKind::Blackhole, Fault::Blackhole);
    let held = fleet.note_held(Some("victim")).await;
    assert_eq!(
        held.len(),
        1,
        "the victim's lock is on the server: {held:?}"
    );
    let (key, token) = (holding.key().to_string(), holding.token());
    let fired = fleet
        .log
        .wait_for(WAIT, |e| {
            e.worker == "victim" && e.is("FIRED") && e.token() == token
        })
        .await
        .expect("the victim's token fired");
    assert_eq!(fired.last(), "Expired");
    let taken = fleet
        .log
        .wait_for(WAIT, |e| {
            e.is("ACQUIRED") && e.key() == key && e.worker != "victim" && e.us > fired.us
        })
        .await
        .expect("the others take the key over");
    assert!(
        taken.us >= held[0].expiry_us,
        "taken before the key expired"
    );
    tokio::time::sleep(ms(700)).await;
    let blackholed_us = fleet.faults[fault].start_us;
    let others_done = fleet
        .log
        .count(|e| e.is("RELEASED") && e.worker != "victim" && e.us > taken.us);
    assert!(
        others_done >= 3,
        "the others stopped working: {others_done}"
    );
    fleet.heal_proxy(fault);
    let healed_us = fleet.faults[fault].end_us;
    let back = fleet
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
    let spec = Spec {
        keys: 2,
        read_pct: 30,
        ..Spec::default()
    };
    let mut fleet = fleet(&spec).await;
    tokio::time::sleep(ms(300)).await;
    let delay = Fault::Delay {
        base: ms(TTL_MS / 12),
        jitter: ms(TTL_MS / 12),
    };
    let names: Vec<String> = fleet.workers.iter().map(|w| w.name.clone()).collect();
    let faults: Vec<usize> = names
        .iter()
        .map(|name| fleet.proxy_fault(name, FaultKind::Delay, delay))
        .collect();
    let delayed_us = fleet.faults[faults[0]].start_us;
    tokio::time::sleep(ms(4 * TTL_MS)).await;
    for fault in faults {
        fleet.heal_proxy(fault);
    }
    let during = released_after(&fleet, delayed_us);
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
    let spec = Spec {
        keys: 2,
        read_pct: 30,
        ..Spec::default()
    };
    let mut fleet = fleet(&spec).await;
    tokio::time::sleep(ms(300)).await;
    let names: Vec<String> = fleet.workers.iter().map(|w| w.name.clone()).collect();
    for round in 0..12 {
        if round % 4 == 3 {
            fleet.client_kill().await;
        } else {
            fleet.reset(&names[round % names.len()]);
        }
        tokio::time::sleep(ms(250)).await;
    }
    let last_us = fleet.faults.last().expect("faults").end_us;
    // An unlock whose connection was reset fails and leaves its key to expire by its
    // TTL, so work on that key may pause for up to a TTL.
    let after = wait_released_after(&fleet, last_us, 3, ms(3 * TTL_MS)).await;
    let report = fleet.finish("connection resets and CLIENT KILL").await;
    assert_no_loss(&report);
    assert!(after >= 3, "only {after} sections after the last reset");
    assert!(report.referee.sections >= 20, "work stalled");
    assert_safe(&report);
}
