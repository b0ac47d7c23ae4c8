//! Guarded writes under freezes and under a deleted lock key: the workers run with
//! `FW_EXEC`, so each writer section also does a read-modify-write of a data counter on
//! the lock server through `WriteGuard::exec` (read right after the acquire, written after the
//! section's fenced write, or after its fenced probe when it gives up; see
//! `examples/fault_worker.rs`), beside the referee's unguarded counter.
//!
//! `exec` refuses in two places: the guard itself, before sending, once its deadline has
//! passed or its token fired; and the server, whose exec script finds the lock key no
//! longer holding the guard's id (the guard's token then fires `Lost`). The first test
//! freezes writers (SIGSTOP) past the TTL between the read and the write, while the
//! others take the lock over and write: on waking their deadline has passed, so the
//! guard refuses. The second deletes a holder's lock key on the lock server while its
//! guard is valid, as a failover that lost the key or an operator would, and another
//! worker takes the lock and writes: the holder's guard knows nothing, sends its write,
//! and the server refuses it.
//!
//! As in `tests/faults/holders.rs`, the workers reach the lock server through their own
//! proxies; the report (`cargo test --test faults exec:: -- --nocapture`) counts the exec
//! writes accepted and refused (by the guard and by the server) next to the lost updates
//! and fenced writes refused. Runs one at a time (`SERIAL` in
//! `tests/faults/harness/fault_checks.rs`).

use crate::common::events::Event;
use crate::harness::fault_checks::{
    assert_ended_cleanly, assert_guarded_data, assert_safe_but_for_freezes, ms, SERIAL, TTL_MS,
    WAIT,
};
use crate::harness::fleet::{Fleet, Spec};
use crate::harness::report::Report;
use crate::harness::server_fleet::ServerFleet;

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
    let (holding, stopped_us, resumed_us) = fleet
        .crew
        .freeze_while_holding("holder", after, 600_000, ms(FREEZE_MS), WAIT)
        .await;

    let (key, token) = (holding.key().to_string(), holding.token());
    let mine = |e: &Event| e.worker == "holder" && e.key() == key && e.token() == token;
    let probe = fleet
        .crew
        .log
        .wait_for(WAIT, |e| mine(e) && e.is("EXEC") && e.exec_what() != "read")
        .await
        .unwrap_or_else(|| panic!("round {round}: no exec after waking"));
    assert_eq!(
        (probe.verdict(), probe.exec_what()),
        ("refused", "probe"),
        "round {round}: the frozen holder's exec write went on: {probe:?}"
    );
    assert!(probe.field(2).parse::<u64>().unwrap_or(0) >= resumed_us);
    let others_wrote = fleet.crew.log.count(|e| {
        e.worker != "holder"
            && e.is("EXEC")
            && e.key() == key
            && e.verdict() == "accepted"
            && e.exec_what() == "write"
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
        .filter(|e| mine(e) && e.is("EXEC") && e.exec_what() == "write");
    let stale = writes
        .iter()
        .find(|e| e.field(2).parse::<u64>().unwrap_or(0) >= resumed_us);
    if let Some(exec) = stale {
        assert_eq!(
            exec.verdict(),
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

/// The TTL of the deleted-key test: long, so that the holder's guard is still valid when
/// it writes and no refresh of it (every TTL/2, 3 s) notices the key gone before then.
const DELETE_TTL_MS: u64 = 6000;

/// How long the holder holds in the deleted-key test: its key is deleted at the start,
/// its exec write comes after.
const DELETE_HOLD_MS: u64 = 1500;

/// How many times the holder's lock key is deleted.
const DELETE_ROUNDS: usize = 3;

/// A holder on `k0` (hold mode, 1.5 s, TTL 6 s) and a quick writer `w0` on `k0` and `k1`
/// that polls (no release notifications: none is sent for a deleted key), both with
/// `FW_EXEC`. Three rounds: the holder has read the data counter through exec and holds;
/// its lock key is deleted on the lock server (a `DEL` by the harness, directly, not
/// through the holder's proxy); `w0` takes the lock and writes the data through exec;
/// the holder, its guard valid and its token not fired, goes on with its section: its
/// exec write is refused, by the server (its guard had no cancel reason when it sent it,
/// `Lost` after) in at least one round. The data counters equal the accepted exec writes
/// (within the uncertain ones); every exec refused is the holder's; the referee's
/// overlaps, tokens out of order and rejected fenced writes are all the holder's entries
/// after its key was deleted, which only fencing and `exec` catch.
#[tokio::test]
async fn exec_is_refused_by_the_server_when_a_valid_guards_lock_key_was_deleted() {
    let _serial = SERIAL.lock().await;
    let mut fleet = ServerFleet::start(DELETE_TTL_MS).await;
    let taker = Spec {
        keys: 2,
        exec: true,
        notify: false,
        ..Spec::default()
    };
    fleet.spawn("w0", &taker).await;
    let holder = Spec {
        hold_ms: Some(DELETE_HOLD_MS),
        exec: true,
        ..Spec::default()
    };
    fleet.spawn("holder", &holder).await;
    let (mut after, mut by_server) = (0, 0);
    for round in 0..DELETE_ROUNDS {
        let (released, server) = delete_under_holder(&mut fleet, round, after).await;
        (after, by_server) = (released, by_server + usize::from(server));
    }
    let report = fleet
        .finish("the holder's lock key deleted on the lock server under a valid guard")
        .await;
    println!(
        "   the holder's exec writes after its key was deleted refused by the server: \
         {by_server} of {DELETE_ROUNDS}"
    );

    assert_guarded_data(&report);
    assert!(
        by_server >= 1 && report.guarded.server_refused >= by_server,
        "no exec write was refused by the server ({by_server} in the rounds): {:?}",
        report.guarded
    );
    let refused = fleet.crew.log.filter(|e| {
        (e.is("EXEC") && e.verdict() == "refused") || (e.is("FENCED") && e.field(2) == "rejected")
    });
    let others: Vec<_> = refused.iter().filter(|e| e.worker != "holder").collect();
    assert!(others.is_empty(), "w0 was refused: {others:?}");
    assert_safe_but_for_deleted_keys(&report);
}

/// Waits for the holder to hold a lock taken after `after`, deletes its lock key on the
/// lock server, and asserts: the holder had read the data through exec before; `w0`
/// wrote the data through exec after the deletion, before the holder's exec write
/// began; that write (or probe) was refused. Returns when the holder released, and
/// whether the server refused its write.
async fn delete_under_holder(fleet: &mut ServerFleet, round: usize, after: u64) -> (u64, bool) {
    let holding = fleet
        .crew
        .log
        .wait_for(WAIT * 2, |e| {
            e.worker == "holder" && e.is("HOLDING") && e.us > after
        })
        .await
        .unwrap_or_else(|| panic!("round {round}: the holder holds no lock"));
    let (key, token) = (holding.key().to_string(), holding.token());
    let mine = |e: &Event| e.worker == "holder" && e.key() == key && e.token() == token;
    let events = fleet.crew.log.filter(|e| mine(e));
    let id = events.iter().find(|e| e.is("ACQUIRED")).map(Event::id);
    let id = id
        .unwrap_or_else(|| panic!("round {round}: no ACQUIRED"))
        .to_string();
    let read = events.iter().find(|e| e.is("EXEC"));
    assert!(
        read.is_some_and(|e| e.exec_what() == "read" && e.verdict() == "accepted"),
        "round {round}: the holder did not read the data through exec: {read:?}"
    );
    assert!(
        fleet.delete_lock_key("holder", &key, &id).await,
        "round {round}: {key} was not held by the holder's id {id}"
    );
    let deleted_us = fleet.crew.faults.last().map_or(0, |f| f.end_us);

    let write = fleet
        .crew
        .log
        .wait_for(WAIT * 2, |e| {
            mine(e) && e.is("EXEC") && e.exec_what() != "read"
        })
        .await
        .unwrap_or_else(|| panic!("round {round}: the holder wrote no data"));
    let begun: u64 = write.field(2).parse().unwrap_or(0);
    assert!(
        begun >= deleted_us,
        "round {round}: the holder's exec write began before its key was deleted"
    );
    assert_eq!(
        write.verdict(),
        "refused",
        "round {round}: the holder's exec write after its key was deleted went on: {write:?}"
    );
    let others_wrote = fleet.crew.log.count(|e| {
        e.worker == "w0"
            && e.is("EXEC")
            && e.key() == key
            && e.verdict() == "accepted"
            && e.exec_what() == "write"
            && e.us > deleted_us
            && e.us < begun
    });
    assert!(
        others_wrote > 0,
        "round {round}: w0 did not write meanwhile"
    );
    (
        released(fleet, round, &mine).await,
        write.refused_by_server(),
    )
}

/// The checks of a run whose holder's lock key was deleted under it: no stale fenced
/// write accepted; every overlap one with the holder in it, every token out of order the
/// holder's entry (it entered after its key was deleted and another writer had entered);
/// lost updates within the overlaps; no write after its deadline; no lock key left; no
/// token fired as lost but the holder's.
fn assert_safe_but_for_deleted_keys(report: &Report) {
    let r = &report.referee;
    assert_eq!(r.stale_accepted, 0, "{:?}", r.stale_accepted_log);
    let holders = |line: &String| line.contains(" holder/");
    assert!(
        r.violation_log.iter().all(holders),
        "overlaps without the holder: {:?}",
        r.violation_log
    );
    let entrant = |line: &String| line.split_whitespace().nth(2).unwrap_or("") == "holder/w";
    assert!(
        r.token_order_log.iter().all(entrant),
        "tokens out of order but the holder's: {:?}",
        r.token_order_log
    );
    assert!(
        (0..=r.violations as i64).contains(&r.lost_updates),
        "{} lost updates, {} overlaps",
        r.lost_updates,
        r.violations
    );
    assert_ended_cleanly(report, "");
    assert!(
        report.fired_spurious.is_empty(),
        "tokens fired with no key deleted: {:?}",
        report.fired_spurious
    );
}

/// The accounting behind `assert_guarded_data`: a worker SIGKILLed between its guarded
/// read and the report of its write may have written (its exec on the wire), so that
/// write counts as uncertain; without the kill the same counter is a write nobody counted.
#[test]
fn a_worker_killed_between_its_guarded_read_and_write_leaves_one_uncertain_write() {
    use crate::common::record::{FaultKind, FaultRecord, Target};
    use crate::harness::guarded::Guarded;
    let event = |worker: &str, line: &str| Event::parse(worker, line).unwrap();
    let events = [
        event("w5", "ACQUIRED 100 w faults:{k9} 7 a"),
        event("w5", "EXEC 110 faults:{k9} 7 105 accepted read - -"),
        event("w1", "ACQUIRED 300 w faults:{k9} 8 b"),
        event("w1", "EXEC 310 faults:{k9} 8 305 accepted read - -"),
        event("w1", "EXEC 320 faults:{k9} 8 315 accepted write - -"),
    ];
    let killed = FaultRecord {
        kind: FaultKind::KillWorker,
        target: Target::Worker("w5".into()),
        start_us: 200,
        end_us: 210,
    };
    let counters = [("faults:{k9}".to_string(), 2)];
    let guarded = Guarded::build(&events, &[killed], 1000, &counters);
    assert!(guarded.uncounted().is_empty(), "{:?}", guarded.uncounted());
    assert_eq!(guarded.keys["faults:{k9}"].uncertain, 1);
    let unexplained = Guarded::build(&events, &[], 1000, &counters);
    assert_eq!(unexplained.uncounted().len(), 1);
}
