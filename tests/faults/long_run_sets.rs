//! The long run's set variant: the fault suite's worker processes (`examples/fault_worker.rs`
//! in set mode, `FW_SET`) each section taking a set of 2 or 3 keys with `lock_all`
//! (mixed read and write modes, named in random order, so that sets overlap in opposite
//! orders), under each deployment's fault mix as the long run's (`long_run.rs`,
//! `tests/faults/harness/mixes.rs`), checked key by key by the referee: a single server
//! (workers killed and frozen, the server paused, killed and restarted, proxies
//! blackholed and slowed, ...); the same server whose clock jumps and runs fast
//! (`clock`); and, with the feature `sentinel`, a primary with two replicas under three
//! Sentinels, every acquire and renewal acknowledged by a replica. (Not a quorum, where
//! sets are refused, nor a Redis Cluster, whose workers' keys each have a slot of their
//! own.) Each deployment runs for `LONG_RUN_SECS` seconds (default 420); then one table
//! as the long run's.
//!
//! ```sh
//! cargo test --release --all-features --test faults long_run_sets::long_run_sets -- --ignored --nocapture --exact
//! ```
//!
//! `long_run_sets_short` runs the single server for 15 s in every `cargo test`.
//!
//! What must be 0 is what the long run's rows check ([`Row::check`]), for every key of
//! every set: overlapping critical sections at the referee and guards overlapping in the
//! log (but those a worker frozen inside its check→leave window explains), lost updates
//! beyond those, stale fenced writes accepted, holders entering with a token not above the
//! last writer's, section writes after the set's validity deadline, lock keys left a TTL
//! after the workers stopped, and tokens that fired after their key expired on the server;
//! where the server's clock moved, fencing must refuse what the overlaps would break.

use crate::common::clock::server_on_a_clock;
use crate::common::events::now_us;
use crate::harness::expiry_watch::ExpiryWatch;
use crate::harness::fault_checks::SERIAL;
use crate::harness::fleet::{Fleet, Spec};
use crate::harness::mixes::{between, clock_fault, single_fault, Roster};
use crate::harness::server_fleet::ServerFleet;
use crate::long_run::{for_secs, secs_each, table, Row, TTL_MS};

/// The quick workers' keys, `k0` ..: few, so that sets meet often.
const KEYS: u64 = 12;
/// The slow workers' keys, after the quick workers'.
const SLOW_KEYS: u64 = 6;
/// The most keys a set takes.
const SET: u64 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "runs for 3 × LONG_RUN_SECS (default 420 s): cargo test --release --all-features --test faults long_run_sets::long_run_sets -- --ignored --nocapture --exact"]
async fn long_run_sets() {
    let _serial = SERIAL.lock().await;
    let secs = secs_each();
    let started = now_us();
    let mut rows = Vec::new();
    if chosen("single") {
        rows.push(single(secs).await);
    }
    if chosen("clock") {
        rows.push(clock(secs).await);
    }
    #[cfg(feature = "sentinel")]
    if chosen("sentinel") {
        rows.push(sentinel(secs).await);
    }
    finish(&rows, started, secs);
}

/// The single server for 15 s, in every `cargo test`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_run_sets_short() {
    let _serial = SERIAL.lock().await;
    let started = now_us();
    let rows = vec![single(15).await];
    finish(&rows, started, 15);
}

/// Prints the table of `rows` and checks each.
fn finish(rows: &[Row], started_us: u64, secs: u64) {
    println!(
        "sets: {}",
        table(rows, (now_us() - started_us) as f64 / 1e6)
    );
    assert!(!rows.is_empty(), "no deployment chosen");
    for row in rows {
        row.check(secs);
    }
}

/// Whether deployment `name` runs: all of them, or those `LONG_RUN_ONLY` names
/// (comma-separated: `single`, `clock`, `sentinel`).
fn chosen(name: &str) -> bool {
    std::env::var("LONG_RUN_ONLY").map_or(true, |only| only.split(',').any(|n| n.trim() == name))
}

/// Seven quick workers on [`KEYS`] keys and three slow ones on [`SLOW_KEYS`] keys of
/// their own, as the long run's, each section a set of 2 to [`SET`] keys, 30 % of them
/// read, writers with the lock intent, acting only with 50 ms of validity left. The slow
/// workers' sets outlive the faults, so that tokens fire as lost and their lead is
/// measured.
fn workers() -> Vec<Spec> {
    let quick = Spec {
        keys: KEYS,
        read_pct: 30,
        work_ms: (0, 2),
        intent: true,
        margin_ms: 50,
        set: SET,
        ..Spec::default()
    };
    let slow = Spec {
        keys: SLOW_KEYS,
        first_key: KEYS,
        work_ms: (300, 1500),
        ..quick.clone()
    };
    let mut specs = vec![quick; 7];
    specs.extend([slow.clone(), slow.clone(), slow]);
    specs
}

/// Every lock key the workers use.
fn lock_keys() -> Vec<String> {
    (0..KEYS + SLOW_KEYS)
        .map(|k| format!("faults:k{k}"))
        .collect()
}

async fn single(secs: u64) -> Row {
    let mut fleet = ServerFleet::start(TTL_MS).await;
    let watch = ExpiryWatch::server(fleet.lock.client(), lock_keys());
    let mut roster = Roster::start(&mut fleet, &workers()).await;
    for_secs(secs, (1000, 2500), async || {
        single_fault(&mut fleet, &mut roster, TTL_MS).await;
    })
    .await;
    let mut report = fleet.finish("long run, sets: single server").await;
    let crew = &fleet.crew;
    let watch = (watch, fleet.held.clone());
    let label = "sets: single server";
    Row::new(label, &mut report, &crew.log, &crew.faults, watch).await
}

/// The single server on a clock of its own, a clock fault for one fault in three: as
/// the long run's `clock` row, overlaps are counted there and fencing must hold.
async fn clock(secs: u64) -> Row {
    let (lock, clock) = server_on_a_clock(&[]);
    let mut fleet = ServerFleet::start_on(lock, TTL_MS).await;
    let watch = ExpiryWatch::server(fleet.lock.client(), lock_keys());
    let mut roster = Roster::start(&mut fleet, &workers()).await;
    for_secs(secs, (1000, 2500), async || {
        if between(0, 2) == 0 {
            clock_fault(&mut fleet, &clock, TTL_MS).await;
        } else {
            single_fault(&mut fleet, &mut roster, TTL_MS).await;
        }
    })
    .await;
    let mut report = fleet.finish("long run, sets: clock faults").await;
    let crew = &fleet.crew;
    let label = "sets: single server, its clock moved";
    let watch = (watch, fleet.held.clone());
    let mut row = Row::new(label, &mut report, &crew.log, &crew.faults, watch).await;
    row.clock_moved = true;
    row
}

#[cfg(feature = "sentinel")]
async fn sentinel(secs: u64) -> Row {
    use crate::harness::mixes::sentinel_fault;
    use crate::harness::sentinel_fleet::SentinelFleet;

    let mut fleet = SentinelFleet::start(TTL_MS).await;
    let conn = redismutex::SentinelConnection::new(fleet.deployment.sentinel_client());
    let watch = ExpiryWatch::one(conn, lock_keys());
    let mut roster = Roster::start(&mut fleet, &workers()).await;
    for_secs(secs, (1500, 2500), async || {
        sentinel_fault(&mut fleet, &mut roster).await;
    })
    .await;
    let mut report = fleet.finish("long run, sets: Sentinel, replicas(1)").await;
    let crew = &fleet.crew;
    let label = "sets: Sentinel, replicas(1)";
    let watch = (watch, Vec::new());
    Row::new(label, &mut report, &crew.log, &crew.faults, watch).await
}
