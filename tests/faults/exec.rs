//! Guarded writes under freezes: the workers run with `FW_EXEC`, so each writer section
//! also does a read-modify-write of a data counter on the lock server through
//! `Guard::exec` (read right after the acquire, written after the section's fenced
//! write, or after its fenced probe when it gives up; see `examples/fault_worker.rs`),
//! beside the referee's unguarded counter. Writers are frozen (SIGSTOP) past the TTL
//! between the read and the write, while the others take the lock over and write.
//!
//! As in `tests/faults/holders.rs`, the workers reach the lock server through their own
//! proxies, TTL 1 s; the report (`cargo test --test faults exec:: -- --nocapture`)
//! counts the exec writes accepted and refused next to the lost updates and fenced
//! writes refused. Runs one at a time (`SERIAL` in `tests/common/fault_checks.rs`).

use crate::common::events::Event;
use crate::common::fault_checks::{
    assert_guarded_data, assert_safe_but_for_freezes, ms, SERIAL, TTL_MS, WAIT,
};
use crate::common::fleet::{Fleet, Spec};
use crate::common::server_fleet::ServerFleet;

/// How long a writer stays frozen: past the TTL (1 s), long enough for the others to
/// take the lock over and write.
const FREEZE_MS: u64 = 2000;

/// Two quick writers on keys `k0` and `k1`, and a holder on `k0` (hold mode, 600 ms),
/// all writers with `FW_EXEC`. Two rounds freeze the holder while it holds: on waking
/// it gives up, and its exec write, tried as a probe, is refused while the others wrote
/// the data meanwhile. Four rounds freeze a quick writer the moment it has entered the
/// referee: its unguarded increment may lose the others' updates (a freeze between its
/// GET and SET), its exec write, begun after the thaw, is refused. At the end every
/// data counter equals the accepted exec writes (within the uncertain ones), though the
/// referee's counter may have lost updates.
#[tokio::test]
async fn exec_refuses_frozen_writers_and_guarded_data_loses_no_update() {
    let _serial = SERIAL.lock().await;
    let mut fleet = ServerFleet::start(TTL_MS).await;
    let quick = Spec {
        keys: 2,
        exec: true,
        ..Spec::default()
    };
    fleet.spawn("w0", &quick).await;
    fleet.spawn("w1", &quick).await;
    let holder = Spec {
        hold_ms: Some(600),
        exec: true,
        ..Spec::default()
    };
    fleet.spawn("holder", &holder).await;
    let mut after = 0;
    for round in 0..2 {
        after = freeze_holding(&mut fleet, round, after).await;
    }
    let mut caught = 0;
    for round in 0..4 {
        let (released, refused) = freeze_writing(&mut fleet, round, after).await;
        (after, caught) = (released, caught + usize::from(refused));
    }
    let report = fleet
        .finish("writers with FW_EXEC SIGSTOPped past their TTL")
        .await;
    println!(
        "   quick writers frozen after entering whose exec write began after the thaw: \
         {caught} of 4"
    );

    assert_guarded_data(&report);
    let totals = report.guarded.totals();
    assert!(
        totals.refused >= 2 && report.guarded.stale_refused >= 2,
        "the holder's stale exec probes were not counted as refused: {totals:?}"
    );
    assert!(totals.accepted > 0, "no exec write was accepted");
    assert_safe_but_for_freezes(&report);
}

/// Freezes the holder while it holds a lock taken after `after`, for [`FREEZE_MS`];
/// asserts that on waking it gave up, its exec probe was refused, and others wrote the
/// data through exec meanwhile. Returns when it released.
async fn freeze_holding(fleet: &mut ServerFleet, round: usize, after: u64) -> u64 {
    let holding = fleet
        .crew
        .log
        .wait_for(WAIT, |e| {
            e.worker == "holder" && e.is("HOLDING") && e.us > after
        })
        .await
        .unwrap_or_else(|| panic!("round {round}: the holder holds no lock"));
    let fault = fleet.crew.freeze("holder");
    let stopped_us = fleet.crew.faults[fault].start_us;
    assert!(
        stopped_us < holding.us + 600_000,
        "round {round}: frozen after its hold ended"
    );
    tokio::time::sleep(ms(FREEZE_MS)).await;
    fleet.crew.thaw(fault);
    let resumed_us = fleet.crew.faults[fault].end_us;

    let (key, token) = (holding.key().to_string(), holding.token());
    let mine = |e: &Event| e.worker == "holder" && e.key() == key && e.token() == token;
    let probe = fleet
        .crew
        .log
        .wait_for(WAIT, |e| mine(e) && e.is("EXEC") && e.last() != "read")
        .await
        .unwrap_or_else(|| panic!("round {round}: no exec after waking"));
    assert_eq!(
        (probe.field(3), probe.last()),
        ("refused", "probe"),
        "round {round}: the frozen holder's exec write went on: {probe:?}"
    );
    assert!(probe.field(2).parse::<u64>().unwrap_or(0) >= resumed_us);
    let others_wrote = fleet.crew.log.count(|e| {
        e.worker != "holder"
            && e.is("EXEC")
            && e.key() == key
            && e.field(3) == "accepted"
            && e.last() == "write"
            && e.us > stopped_us
            && e.us < resumed_us
    });
    assert!(others_wrote > 0, "round {round}: nobody wrote meanwhile");
    released(fleet, round, &mine).await
}

/// Freezes the first quick writer (`w0`, `w1`) to enter the referee after `after`, for
/// [`FREEZE_MS`], as soon as it has; asserts that its exec write, if begun after the thaw,
/// was refused. Returns when it released, and whether that write began after the thaw.
async fn freeze_writing(fleet: &mut ServerFleet, round: usize, after: u64) -> (u64, bool) {
    let entered = fleet
        .crew
        .log
        .wait_for(WAIT, |e| {
            e.worker != "holder" && e.is("ENTERED") && e.us > after
        })
        .await
        .unwrap_or_else(|| panic!("round {round}: no quick writer enters a section"));
    let victim = entered.worker.as_str();
    let fault = fleet.crew.freeze(victim);
    tokio::time::sleep(ms(FREEZE_MS)).await;
    fleet.crew.thaw(fault);
    let resumed_us = fleet.crew.faults[fault].end_us;

    let (key, token) = (entered.key().to_string(), entered.token());
    let mine = |e: &Event| e.worker == victim && e.key() == key && e.token() == token;
    let released_us = released(fleet, round, &mine).await;
    let writes = fleet
        .crew
        .log
        .filter(|e| mine(e) && e.is("EXEC") && e.last() == "write");
    let stale = writes
        .iter()
        .find(|e| e.field(2).parse::<u64>().unwrap_or(0) >= resumed_us);
    if let Some(exec) = stale {
        assert_eq!(
            exec.field(3),
            "refused",
            "round {round}: {victim}'s exec write after the thaw went on: {exec:?}"
        );
    }
    (released_us, stale.is_some())
}

/// When the section whose events `mine` picks released its lock.
async fn released(fleet: &ServerFleet, round: usize, mine: &impl Fn(&Event) -> bool) -> u64 {
    let released = fleet
        .crew
        .log
        .wait_for(WAIT, |e| mine(e) && e.is("RELEASED"))
        .await
        .unwrap_or_else(|| panic!("round {round}: not released"));
    released.us
}
