//! Fire leads by the thousand: on each deployment, sixteen slow holders (each on a lock
//! key of its own, holding each lock 3 s, taking it again at once) and two quick
//! workers, TTL 1 s, under one fault repeated until `LEADS` tokens that fired as lost
//! (default 1,000 per deployment) have had their lead measured: their key's expiry on
//! the server as the fault began minus the time the token fired. The expiries are
//! noted exactly: a frozen server's in one transaction with a `CLIENT PAUSE` right
//! before its SIGSTOP (`tests/faults/harness/paused_note.rs`), so no renewal lands after the
//! note; the holders' links in netns once they are cut. The fault makes
//! the holders lose their locks while the server still keeps the keys, for 1.2–1.4 s
//! (past the TTL), each time once every holder holds again:
//!
//! - one server: the server SIGSTOPped;
//! - netns (as root): every holder's link dropping everything, in the kernel;
//! - quorum: two of the three nodes (a majority) SIGSTOPped together;
//! - Redis Cluster (feature `cluster`): the master serving every holder's key
//!   SIGSTOPped, with a node timeout of 4 s, so no failover (checked);
//! - Sentinel (feature `sentinel`): the primary SIGSTOPped, with
//!   `down-after-milliseconds` 10 s, so no failover (checked).
//!
//! ```sh
//! LEADS=1000 cargo test --release --all-features --test faults leads::leads -- --ignored --nocapture
//! ```
//!
//! `LEADS_SECS` bounds each deployment (default 1200 s), `LEADS_ONLY=single,netns,
//! quorum,cluster,sentinel` runs some of them. `leads_short` runs the same in every
//! `cargo test` until 10 leads per deployment (a fault or two each).
//!
//! What must hold, per deployment: no overlap and no lost update at the referee, no
//! holder entering out of token order, no stale fenced write accepted and no section's
//! fenced write refused, no section write after its guard's deadline, no lock key left
//! a TTL after the workers stopped (on the quorum also no guard overlap nor token out
//! of acquisition order), every lead measured above 0, and at least `LEADS` of them.

use std::time::Duration;

use crate::common::crew::Crew;
use crate::common::record::{FaultKind, HeldLock, Target};
use crate::harness::expiry_watch::majority_expiry;
use crate::harness::fault_checks::{assert_ended_cleanly, ms, SERIAL, TTL_MS};
use crate::harness::fleet::Fleet;
use crate::harness::lead_run::{spawn_workers, LeadRun, HOLDERS, QUICK_KEYS};
use crate::harness::lead_table::{table, LeadRow};
use crate::harness::mixes::between;
use crate::harness::needs_root::row_as_root;
use crate::harness::netns::NetFault;
use crate::harness::netns_fleet::NetnsFleet;
use crate::harness::paused_note::PausedNote;
use crate::harness::quorum_fleet::{assert_quorum_safe, QuorumFleet, NODES};
use crate::harness::report::Report;
use crate::harness::server_fleet::ServerFleet;

/// `LEADS`, 1,000 by default: the leads each deployment must measure.
fn wanted() -> usize {
    env_or("LEADS", 1000)
}

/// `LEADS_SECS`, 1,200 by default: how long each deployment may run.
fn bound() -> Duration {
    Duration::from_secs(env_or("LEADS_SECS", 1200))
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    let value = std::env::var(name).ok();
    value.and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "runs until LEADS (default 1000) leads per deployment: LEADS=1000 cargo test --release --all-features --test faults leads::leads -- --ignored --nocapture"]
async fn leads() {
    let _serial = SERIAL.lock().await;
    every_deployment(wanted(), bound()).await;
}

/// The same until 10 leads per deployment, in every `cargo test`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leads_short() {
    let _serial = SERIAL.lock().await;
    every_deployment(10, Duration::from_secs(30)).await;
}

/// Runs every deployment chosen until `want` leads or for `bound`, prints each row and
/// the table, then checks each.
async fn every_deployment(want: usize, bound: Duration) {
    let mut runs: Vec<(LeadRow, Report)> = Vec::new();
    if chosen("single") {
        runs.push(single(want, bound).await);
    }
    if chosen("netns") {
        runs.extend(netns(want, bound).await);
    }
    if chosen("quorum") {
        runs.push(quorum(want, bound).await);
    }
    #[cfg(feature = "cluster")]
    if chosen("cluster") {
        runs.push(cluster::run(want, bound).await);
    }
    #[cfg(feature = "sentinel")]
    if chosen("sentinel") {
        runs.push(sentinel::run(want, bound).await);
    }
    let rows: Vec<LeadRow> = runs.iter().map(|(row, _)| row.clone()).collect();
    println!(
        "== fire leads, {want} wanted per deployment\n{}",
        table(&rows)
    );
    for (row, report) in &runs {
        check(&row.label, report, want);
    }
}

/// Whether deployment `name` runs: all, or those `LEADS_ONLY` names (comma-separated).
fn chosen(name: &str) -> bool {
    std::env::var("LEADS_ONLY").map_or(true, |only| only.split(',').any(|n| n.trim() == name))
}

/// How long each fault lasts: 1.2–1.4 TTLs, past the TTL.
fn past_ttl() -> Duration {
    ms(between(TTL_MS + 200, TTL_MS + 400))
}

/// The quick workers' keys `k0`, `k1` and each holder's after them.
fn holder_keys() -> Vec<u64> {
    (QUICK_KEYS..QUICK_KEYS + HOLDERS as u64).collect()
}

/// The lock keys of worker keys `keys` (`faults:k3`, or hash-tagged: `faults:{k3}`).
fn lock_keys(keys: impl IntoIterator<Item = u64>, tagged: bool) -> Vec<String> {
    let name = |k: u64| match tagged {
        true => format!("faults:{{k{k}}}"),
        false => format!("faults:k{k}"),
    };
    keys.into_iter().map(name).collect()
}

/// The lock keys of the quick workers and the holders, but on a cluster.
fn every_lock_key() -> Vec<String> {
    lock_keys(0..QUICK_KEYS + HOLDERS as u64, false)
}

/// The row of a finished run, its leads measured by `run` on `crew`'s events, printed.
async fn row(label: &str, run: LeadRun, report: &mut Report, crew: &Crew) -> LeadRow {
    run.measure(report, crew);
    let row = LeadRow::new(label, report, crew.faults.len());
    println!("{}", row.line());
    row
}

async fn single(want: usize, bound: Duration) -> (LeadRow, Report) {
    let mut fleet = ServerFleet::start(TTL_MS).await;
    let holders = spawn_workers(&mut fleet, 0, &holder_keys()).await;
    let mut run = LeadRun::new(want, bound, holders);
    let names = every_lock_key();
    run.repeat(&mut fleet, async |fleet: &mut ServerFleet| {
        let conn = fleet.lock_conn().await;
        let fault = fleet.crew.begin(FaultKind::PauseServerLong, Target::Server);
        let note = PausedNote::take(&conn, &names, false).await;
        fleet.lock.pause();
        let held = note.valid();
        tokio::time::sleep(past_ttl()).await;
        fleet.lock.resume();
        fleet.crew.end(fault);
        held
    })
    .await;
    let mut report = fleet.finish("leads: single server, paused").await;
    let row = row("single server", run, &mut report, &fleet.crew).await;
    (row, report)
}

/// `None` when the row is skipped: no namespaces here (`tests/faults/harness/needs_root.rs`).
async fn netns(want: usize, bound: Duration) -> Option<(LeadRow, Report)> {
    let how = row_as_root("LEADS_ONLY", "netns", "leads::leads_short", "leads::leads");
    let mut fleet = NetnsFleet::start_or_skip(TTL_MS, Some("the netns row"), &how).await?;
    let holders = spawn_workers(&mut fleet, 0, &holder_keys()).await;
    let mut run = LeadRun::new(want, bound, holders.clone());
    run.repeat(&mut fleet, async |fleet: &mut NetnsFleet| {
        let cuts: Vec<usize> = (holders.iter())
            .map(|name| fleet.cut(name, NetFault::Drop))
            .collect();
        // Nothing of the holders' reaches the server now: these stay their expiries.
        let held = fleet.note_held(None).await;
        tokio::time::sleep(past_ttl()).await;
        for cut in cuts {
            fleet.heal(cut);
        }
        held
    })
    .await;
    let mut report = fleet.finish("leads: network namespaces, holders cut").await;
    let row = row(
        "single server, holders cut (netns)",
        run,
        &mut report,
        &fleet.crew,
    )
    .await;
    Some((row, report))
}

async fn quorum(want: usize, bound: Duration) -> (LeadRow, Report) {
    let mut fleet = QuorumFleet::start(TTL_MS).await;
    let holders = spawn_workers(&mut fleet, 0, &holder_keys()).await;
    let mut run = LeadRun::new(want, bound, holders);
    let names = every_lock_key();
    let mut turn = 0;
    run.repeat(&mut fleet, async |fleet: &mut QuorumFleet| {
        turn += 1;
        freeze_two(fleet, [turn % NODES, (turn + 1) % NODES], &names).await
    })
    .await;
    let quorum_report = fleet.finish("leads: quorum, a majority frozen").await;
    assert_quorum_safe(&fleet, &quorum_report);
    let mut report = quorum_report.fleet;
    let row = row("quorum (3 nodes), 2 frozen", run, &mut report, &fleet.crew).await;
    (row, report)
}

/// Freezes nodes `pair` of the quorum together, past the TTL, each right after an
/// exact note of its lock keys (see [`PausedNote`]); the third is read once they are
/// frozen (its expiries only grow after). The locks noted held on a majority, with the
/// time they stop being held on one.
async fn freeze_two(fleet: &mut QuorumFleet, pair: [usize; 2], names: &[String]) -> Vec<HeldLock> {
    let third = (0..NODES)
        .find(|n| !pair.contains(n))
        .expect("a third node");
    let mut per_node = Vec::new();
    let mut faults = Vec::new();
    for n in pair {
        let conn = fleet.nodes[n].conn().await;
        faults.push(fleet.crew.begin(FaultKind::FreezeNodeLong, Target::Node(n)));
        let note = PausedNote::take(&conn, names, false).await;
        fleet.nodes[n].pause();
        per_node.push(note.valid());
    }
    let mut conn = fleet.nodes[third].conn().await;
    per_node.push(
        HeldLock::try_read(&mut conn, names)
            .await
            .unwrap_or_default(),
    );
    tokio::time::sleep(past_ttl()).await;
    for n in pair {
        fleet.nodes[n].resume();
    }
    for fault in faults {
        fleet.crew.end(fault);
    }
    majority_expiry(&per_node, NODES / 2 + 1)
}

#[cfg(feature = "cluster")]
mod cluster {
    use super::*;
    use crate::harness::cluster_fleet::ClusterFleet;

    /// The node timeout: a master frozen for up to half of it is not failed over.
    const NODE_TIMEOUT_MS: u64 = 4000;

    /// The holders' keys all on master 0, the quick workers' on master 1; master 0
    /// frozen.
    pub(super) async fn run(want: usize, bound: Duration) -> (LeadRow, Report) {
        let mut fleet = ClusterFleet::start_with_node_timeout(TTL_MS, NODE_TIMEOUT_MS).await;
        let quick = fleet.keys_on_master(1, QUICK_KEYS);
        let keys = fleet.keys_served_by(0, HOLDERS);
        let frozen = lock_keys(keys.clone(), true);
        let holders = spawn_workers(&mut fleet, quick, &keys).await;
        let mut run = LeadRun::new(want, bound, holders);
        run.repeat(&mut fleet, async |fleet: &mut ClusterFleet| {
            fleet.freeze_master_noted(0, past_ttl(), &frozen).await
        })
        .await;
        let mut report = fleet.finish("leads: Redis Cluster, a master frozen").await;
        let label = "Redis Cluster, master frozen";
        let row = row(label, run, &mut report, &fleet.crew).await;
        (row, report)
    }
}

#[cfg(feature = "sentinel")]
mod sentinel {
    use super::*;
    use crate::harness::sentinel_fleet::SentinelFleet;

    /// `down-after-milliseconds`: a primary frozen for less is not failed over.
    const DOWN_AFTER_MS: u64 = 10_000;

    /// The primary frozen, with every acquire and renewal acknowledged by a replica.
    pub(super) async fn run(want: usize, bound: Duration) -> (LeadRow, Report) {
        let mut fleet = SentinelFleet::start_with_down_after(TTL_MS, DOWN_AFTER_MS).await;
        let names = every_lock_key();
        let holders = spawn_workers(&mut fleet, 0, &holder_keys()).await;
        let mut run = LeadRun::new(want, bound, holders);
        run.repeat(&mut fleet, async |fleet: &mut SentinelFleet| {
            let primary = fleet.deployment.primary();
            let conn = fleet.deployment.server(primary).conn().await;
            let fault = fleet.crew.begin(FaultKind::PauseServerLong, Target::Server);
            let note = PausedNote::take(&conn, &names, false).await;
            fleet.deployment.freeze(primary);
            let held = note.valid();
            tokio::time::sleep(past_ttl()).await;
            fleet.deployment.thaw(primary);
            fleet.crew.end(fault);
            held
        })
        .await;
        let primary = fleet.deployment.primary();
        assert_eq!(primary, 0, "the primary changed: a failover happened");
        let mut report = fleet.finish("leads: Sentinel, the primary frozen").await;
        let row = row("Sentinel, primary frozen", run, &mut report, &fleet.crew).await;
        (row, report)
    }
}

/// The checks of the module doc, for the run of `label`.
fn check(label: &str, report: &Report, want: usize) {
    let r = &report.referee;
    assert_eq!(r.violations, 0, "{label}: overlaps {:?}", r.violation_log);
    assert_eq!(r.lost_updates, 0, "{label}: lost updates");
    assert_eq!(r.token_order, 0, "{label}: {:?}", r.token_order_log);
    assert_eq!(r.stale_accepted, 0, "{label}: {:?}", r.stale_accepted_log);
    assert_eq!(report.rejected_writes, 0, "{label}: section writes refused");
    assert_ended_cleanly(report, &format!("{label}: "));
    let late: Vec<_> = report.leads.iter().filter(|l| l.lead_us <= 0).collect();
    assert!(
        late.is_empty(),
        "{label}: tokens fired after their key expired: {late:?}"
    );
    assert!(
        report.leads.len() >= want,
        "{label}: {} leads measured, {want} wanted, by {:.0} s",
        report.leads.len(),
        report.secs
    );
}
