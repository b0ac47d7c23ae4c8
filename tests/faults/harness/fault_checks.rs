//! What the fault tests (`tests/faults/holders.rs`, `tests/faults/server.rs`,
//! `tests/faults/exec.rs`) share: the TTL, fleets of three workers, and the checks every
//! run must pass.
//!
//! The tests that start a fleet run one at a time (see [`SERIAL`]): their assertions
//! are about timing (a token must fire before its key expires, 12 ms of drift margin at
//! this TTL), and fleets of processes at once on a small machine would starve each
//! other. They are all in one test binary (`tests/faults/main.rs`), and cargo runs test
//! binaries one after the other, so one lock in the process is enough.

use std::time::Duration;

use super::fleet::{Fleet, Spec};
use super::report::Report;
use super::server_fleet::ServerFleet;
use crate::common::crew::Crew;

pub const TTL_MS: u64 = 1000;

/// One fleet at a time: every test of `tests/faults/` that starts one holds this.
pub static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

pub const WAIT: Duration = Duration::from_secs(5);

pub fn ms(d: u64) -> Duration {
    Duration::from_millis(d)
}

/// Readers and writers on two keys: 30% of sections read.
pub fn mixed() -> Spec {
    Spec {
        keys: 2,
        read_pct: 30,
        ..Spec::default()
    }
}

/// Three workers with `spec`, named w0..w2.
pub async fn fleet(spec: &Spec) -> ServerFleet {
    let mut fleet = ServerFleet::start(TTL_MS).await;
    for n in 0..3 {
        fleet.spawn(&format!("w{n}"), spec).await;
    }
    fleet
}

/// Workers w0 and w1 with `spec`, and `name` with `spec` but holding each lock it takes
/// for `hold_ms` (the worker's hold mode).
pub async fn fleet_with_holder(spec: &Spec, name: &str, hold_ms: u64) -> ServerFleet {
    let mut fleet = ServerFleet::start(TTL_MS).await;
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
/// holder entering with a token above the last writer's, no fenced write accepted with
/// another acquisition's token, no section's fenced write rejected, and no lock key
/// outlived a TTL.
pub fn assert_safe(report: &Report) {
    let r = &report.referee;
    assert_eq!(
        r.violations, 0,
        "overlapping sections: {:?}",
        r.violation_log
    );
    assert_eq!(r.lost_updates, 0, "lost updates");
    assert_eq!(r.token_order, 0, "{:?}", r.token_order_log);
    assert_eq!(r.stale_accepted, 0, "{:?}", r.stale_accepted_log);
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
pub fn assert_no_loss(report: &Report) {
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

/// Sections released after `us`.
pub fn released_after(crew: &Crew, us: u64) -> usize {
    crew.log.count(|e| e.is("RELEASED") && e.us > us)
}

/// Waits up to `timeout` for `n` sections released after `us`; how many there were.
pub async fn wait_released_after(crew: &Crew, us: u64, n: usize, timeout: Duration) -> usize {
    let deadline = tokio::time::Instant::now() + timeout;
    while released_after(crew, us) < n && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(ms(10)).await;
    }
    released_after(crew, us)
}

/// The checks of a run whose writers were frozen inside their sections on purpose, as in
/// the soaks: every overlap explained by a freeze inside check→leave, lost updates of
/// the referee's unguarded counter and refused section writes within those, no stale
/// fenced write accepted, tokens in order but after a freeze between check and entry,
/// no write after its deadline but after a freeze, no lock key left.
pub fn assert_safe_but_for_freezes(report: &Report) {
    let r = &report.referee;
    let unexplained = r.violations as usize - report.overlaps_explained;
    assert_eq!(unexplained, 0, "overlaps: {:?}", r.violation_log);
    assert!(
        (0..=report.overlaps_explained as i64).contains(&r.lost_updates),
        "{} lost updates, {} explained overlaps",
        r.lost_updates,
        report.overlaps_explained
    );
    assert!(
        report.rejected_writes <= report.overlaps_explained,
        "{} section writes refused, {} explained overlaps",
        report.rejected_writes,
        report.overlaps_explained
    );
    assert_eq!(r.stale_accepted, 0, "{:?}", r.stale_accepted_log);
    assert!(
        report.token_order_unexplained.is_empty(),
        "tokens out of order: {:?}",
        report.token_order_unexplained
    );
    assert_ended_cleanly(report, "");
}

/// No write after its deadline, and no lock key left; `label` starts each message.
pub fn assert_ended_cleanly(report: &Report, label: &str) {
    assert!(
        report.late_writes.is_empty(),
        "{label}writes after the deadline: {:?}",
        report.late_writes
    );
    assert!(
        report.keys_left.is_empty(),
        "{label}keys left: {:?}",
        report.keys_left
    );
}

/// The guarded data of workers run with `FW_EXEC` (see `guarded.rs`): every key's data
/// counter is at least its accepted `exec` writes (no accepted update lost) and at most
/// those and the uncertain ones (no write ran uncounted), and every write begun after
/// its worker was frozen past the TTL, or after its lock key was deleted, was refused.
pub fn assert_guarded_data(report: &Report) {
    let guarded = &report.guarded;
    assert!(guarded.used(), "no worker wrote through exec");
    assert!(
        guarded.lost().is_empty(),
        "accepted exec writes lost: {:?}",
        guarded.lost()
    );
    assert!(
        guarded.uncounted().is_empty(),
        "data written by no accepted exec: {:?}",
        guarded.uncounted()
    );
    assert!(
        guarded.stale_not_refused.is_empty(),
        "stale exec writes not refused: {:?}",
        guarded.stale_not_refused
    );
}

/// What holds where overlaps are expected (a server clock that jumped forward expires
/// held locks at once): no stale fenced write accepted, every holder that entered out of
/// token order had its fenced write refused, and no lost update but within an overlap.
/// `label` starts each message.
pub fn assert_fenced_through_overlaps(report: &Report, label: &str) {
    let r = &report.referee;
    assert_eq!(r.stale_accepted, 0, "{label}{:?}", r.stale_accepted_log);
    assert!(
        r.token_order <= r.stale_rejected,
        "{label}entered out of order {} but refused {}: {:?}",
        r.token_order,
        r.stale_rejected,
        r.token_order_log
    );
    assert!(
        r.lost_updates <= i64::try_from(r.violations).unwrap_or(i64::MAX),
        "{label}lost updates {} beyond the overlaps {}",
        r.lost_updates,
        r.violations
    );
}

/// Waits (up to `wait`) for a worker other than `victim` to acquire `key` after the
/// victim's token fired (`fired`), and asserts it did so only once the victim's key had
/// expired on the server (`expiry_us`, as noted when the fault began); the acquisition.
pub async fn assert_taken_over_after_expiry(
    log: &crate::common::events::Log,
    wait: std::time::Duration,
    (victim, key): (&str, &str),
    fired: &crate::common::events::Event,
    expiry_us: u64,
) -> crate::common::events::Event {
    let taken = log
        .wait_for(wait, |e| {
            e.is("ACQUIRED") && e.key() == key && e.worker != victim && e.us > fired.us
        })
        .await
        .expect("the others take the key over");
    assert!(taken.us >= expiry_us, "taken before the key expired");
    taken
}
