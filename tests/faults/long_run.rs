//! The long checked run: the fault suite's worker processes (`examples/fault_worker.rs`)
//! on many keys with short holds, checked by the referee, under each deployment's fault
//! mix (`tests/faults/harness/mixes.rs`) one deployment after the other: a single server; a
//! single server whose clock jumps forward, back and runs fast (`clock`); a single
//! server and workers in network namespaces of their own, partitioned by the kernel
//! (`netns`, as root); a Redis Cluster (feature `cluster`), a quorum of three
//! independent nodes, and a primary with two replicas under three Sentinels (feature
//! `sentinel`, every acquire and renewal acknowledged by a replica). Each deployment
//! runs for `LONG_RUN_SECS` seconds (default 420: more than a million sections in all on
//! 2 cores, about 46 minutes); then one table of what was checked.
//!
//! ```sh
//! cargo test --release --all-features --test faults long_run::long_run -- --ignored --nocapture --exact
//! ```
//!
//! `long_run_short` runs the same for 10 s a deployment in every `cargo test`.
//!
//! What must be 0, per deployment: overlapping critical sections at the referee and
//! guards overlapping in the log (both but those a worker frozen inside its
//! check→leave window explains: the hazard only fencing covers), lost updates beyond
//! those overlaps, stale fenced writes accepted, holders entering with a token not
//! above the last writer's (but a holder frozen between its check and its entry, whose
//! fenced write is then the stale one), section writes that returned after their
//! guard's validity deadline (but after a freeze between check and write), lock keys
//! left a TTL after the workers stopped, and tokens that fired after their key expired
//! on the server. Where the server's clock moved (`clock`), overlaps are counted instead:
//! a forward jump expires held locks at once, which only fencing covers; there lost
//! updates must stay within the overlaps, every holder that entered out of token order
//! must have had its fenced write refused, and no lead is measured (the server's
//! expiries are on its moved clock). Where the writers update a data counter through `WriteGuard::exec` (every
//! deployment but the quorum), no exec write begun after its worker was frozen past the
//! TTL may go through, and no data counter may be above the exec writes accepted and
//! left uncertain (it may be below: a server restarted empty or a failover loses
//! writes); the counts are in the table.
//! Each token that fired as lost has its lead measured against the expiry an
//! [`ExpiryWatch`] last read (a lower bound), or, for a server frozen by a fault, the
//! expiry read as it froze (`tests/faults/harness/paused_note.rs`: a reading taken earlier could
//! be a renewal behind): min, p50, max.

use std::fmt::Write as _;
use std::time::Duration;

use crate::common::clock::server_on_a_clock;
use crate::common::crew::dump;
use crate::common::events::{now_us, Log};
use crate::common::record::{FaultRecord, HeldLock};
use crate::harness::expiry_watch::ExpiryWatch;
use crate::harness::fault_checks::{
    assert_ended_cleanly, assert_fenced_through_overlaps, ms, SERIAL,
};
use crate::harness::fleet::{Fleet, Spec};
use crate::harness::mixes::{between, clock_fault, quorum_fault, single_fault, Roster};
use crate::harness::order::{explained_by_worker_freeze, guard_overlaps};
use crate::harness::quorum_fleet::QuorumFleet;
use crate::harness::report::{leads, Report};
use crate::harness::server_fleet::ServerFleet;

pub(super) const TTL_MS: u64 = 1000;
const MUTEX: &str = "faults";
/// The quick workers' keys, `k0` ..
const KEYS: u64 = 32;
/// The slow workers' keys, after the quick workers'.
const SLOW_KEYS: u64 = 8;

/// `LONG_RUN_SECS`, 420 by default: seconds of work per deployment (six deployments:
/// about 46 minutes on 2 cores, and more than a million sections, `docs/long-run.md`).
pub(super) fn secs_each() -> u64 {
    std::env::var("LONG_RUN_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(420)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "runs for 6 × LONG_RUN_SECS (default 420 s): cargo test --release --all-features --test faults long_run::long_run -- --ignored --nocapture --exact"]
async fn long_run() {
    let _serial = SERIAL.lock().await;
    let secs = secs_each();
    let rows = every_deployment(secs).await;
    let total: u64 = rows.iter().map(|row| row.report.referee.sections).sum();
    // The million is that of all six deployments: not when some did not run (features
    // off, `LONG_RUN_ONLY`, the netns row skipped without root).
    let all = rows.len() == 6 && std::env::var_os("LONG_RUN_ONLY").is_none();
    assert!(
        total >= 1_000_000 || secs < 420 || !all,
        "{total} sections checked, fewer than 1,000,000"
    );
}

/// The long run for 10 s a deployment, in every `cargo test`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_run_short() {
    let _serial = SERIAL.lock().await;
    every_deployment(10).await;
}

/// Runs every deployment for `secs`, prints the table, and checks each row.
async fn every_deployment(secs: u64) -> Vec<Row> {
    let started = now_us();
    let mut rows = Vec::new();
    if chosen("single") {
        rows.push(single(secs).await);
    }
    if chosen("clock") {
        rows.push(clock(secs).await);
    }
    if chosen("netns") {
        rows.extend(netns(secs).await);
    }
    #[cfg(feature = "cluster")]
    if chosen("cluster") {
        rows.push(cluster(secs).await);
    }
    if chosen("quorum") {
        rows.push(quorum(secs).await);
    }
    #[cfg(feature = "sentinel")]
    if chosen("sentinel") {
        rows.push(sentinel(secs).await);
    }
    println!("{}", table(&rows, (now_us() - started) as f64 / 1e6));
    for row in &rows {
        row.check(secs);
    }
    rows
}

/// Whether deployment `name` runs: all of them, or those `LONG_RUN_ONLY` names
/// (comma-separated: `single`, `clock`, `netns`, `cluster`, `quorum`, `sentinel`).
fn chosen(name: &str) -> bool {
    std::env::var("LONG_RUN_ONLY").map_or(true, |only| only.split(',').any(|n| n.trim() == name))
}

/// Seven quick workers on [`KEYS`] keys and three slow ones on [`SLOW_KEYS`] keys of
/// their own (a quick worker that met a slow holder would wait up to 1.5 s), 30 %
/// readers, writers with the lock intent, each section acting only with 50 ms of
/// validity left. The slow workers' guards outlive the faults, so that tokens fire as
/// lost and their lead is measured. With `exec` (`FW_EXEC`: every deployment but the
/// quorum, where `WriteGuard::exec` is refused) the writers also update a data counter per
/// key on the lock server through `exec`.
fn workers(exec: bool) -> Vec<Spec> {
    let quick = Spec {
        keys: KEYS,
        read_pct: 30,
        work_ms: (0, 2),
        hold_ms: None,
        intent: true,
        margin_ms: 50,
        first_key: 0,
        exec,
        notify: true,
        set: 0,
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

fn lock_keys(tagged: bool) -> Vec<String> {
    let name = |k: u64| match tagged {
        true => format!("{MUTEX}:{{k{k}}}"),
        false => format!("{MUTEX}:k{k}"),
    };
    (0..KEYS + SLOW_KEYS).map(name).collect()
}

/// Runs `fault` after a pause of `pace_ms` (uniform) until `secs` have passed.
pub(super) async fn for_secs<F: AsyncFnMut()>(secs: u64, pace_ms: (u64, u64), mut fault: F) {
    let end_us = now_us() + secs * 1_000_000;
    while now_us() < end_us {
        let left = Duration::from_micros(end_us.saturating_sub(now_us()));
        tokio::time::sleep(ms(between(pace_ms.0, pace_ms.1)).min(left)).await;
        if now_us() < end_us {
            fault().await;
        }
    }
}

async fn single(secs: u64) -> Row {
    let mut fleet = ServerFleet::start(TTL_MS).await;
    let watch = ExpiryWatch::server(fleet.lock.client(), lock_keys(false));
    let mut roster = Roster::start(&mut fleet, &workers(true)).await;
    for_secs(secs, (1000, 2500), async || {
        single_fault(&mut fleet, &mut roster, TTL_MS).await;
    })
    .await;
    let mut report = fleet.finish("long run: single server").await;
    let crew = &fleet.crew;
    let watch = (watch, fleet.held.clone());
    Row::new("single server", &mut report, &crew.log, &crew.faults, watch).await
}

/// The single server on a clock of its own: its mix, with a clock fault for one fault in
/// three ([`clock_fault`]). A forward jump expires held locks at once, so overlaps are
/// counted here, not forbidden: what must hold is fencing ([`Row::check`]).
async fn clock(secs: u64) -> Row {
    let (lock, clock) = server_on_a_clock(&[]);
    let mut fleet = ServerFleet::start_on(lock, TTL_MS).await;
    let watch = ExpiryWatch::server(fleet.lock.client(), lock_keys(false));
    let mut roster = Roster::start(&mut fleet, &workers(true)).await;
    for_secs(secs, (1000, 2500), async || {
        if between(0, 2) == 0 {
            clock_fault(&mut fleet, &clock, TTL_MS).await;
        } else {
            single_fault(&mut fleet, &mut roster, TTL_MS).await;
        }
    })
    .await;
    let mut report = fleet.finish("long run: single server, clock faults").await;
    let crew = &fleet.crew;
    let label = "single server, its clock moved";
    let watch = (watch, fleet.held.clone());
    let mut row = Row::new(label, &mut report, &crew.log, &crew.faults, watch).await;
    row.clock_moved = true;
    row
}

/// The single server and each worker in network namespaces of their own, joined by veth
/// pairs (`tests/faults/harness/netns.rs`): a worker's link taken down, its traffic dropped or
/// its link slowed in the kernel ([`netns_fault`]), or a worker killed or frozen. `None`
/// when the row is skipped: no namespaces here (`tests/faults/harness/needs_root.rs`).
async fn netns(secs: u64) -> Option<Row> {
    use crate::harness::needs_root::row_as_root;
    use crate::harness::netns_fleet::NetnsFleet;
    use crate::harness::netns_mix::netns_fault;

    let (short, long) = ("long_run::long_run_short", "long_run::long_run");
    let how = row_as_root("LONG_RUN_ONLY", "netns", short, long);
    let mut fleet = NetnsFleet::start_or_skip(TTL_MS, Some("the netns row"), &how).await?;
    let watch = ExpiryWatch::server(fleet.lock.client(), lock_keys(false));
    let mut roster = Roster::start(&mut fleet, &workers(true)).await;
    for_secs(secs, (1000, 2500), async || match between(0, 3) {
        0 => roster.replace(&mut fleet).await,
        1 => Roster::freeze_any(&mut fleet).await,
        _ => netns_fault(&mut fleet, TTL_MS).await,
    })
    .await;
    let mut report = fleet.finish("long run: network namespaces").await;
    let crew = &fleet.crew;
    let label = "single server, kernel partitions";
    let watch = (watch, Vec::new());
    Some(Row::new(label, &mut report, &crew.log, &crew.faults, watch).await)
}

#[cfg(feature = "cluster")]
async fn cluster(secs: u64) -> Row {
    use crate::harness::cluster_fleet::ClusterFleet;
    use crate::harness::mixes::cluster_fault;

    let mut fleet = ClusterFleet::start(TTL_MS).await;
    let watch = ExpiryWatch::each(fleet.cluster.conn().await, lock_keys(true));
    let mut roster = Roster::start(&mut fleet, &workers(true)).await;
    for_secs(secs, (1500, 2500), async || {
        cluster_fault(&mut fleet, &mut roster).await;
    })
    .await;
    let mut report = fleet.finish("long run: Redis Cluster").await;
    let crew = &fleet.crew;
    let label = "Redis Cluster (3 masters, 3 replicas)";
    Row::new(
        label,
        &mut report,
        &crew.log,
        &crew.faults,
        (watch, Vec::new()),
    )
    .await
}

async fn quorum(secs: u64) -> Row {
    let mut fleet = QuorumFleet::start_aof(TTL_MS).await;
    let nodes = fleet.nodes.iter().map(|node| node.client()).collect();
    let watch = ExpiryWatch::majority(nodes, lock_keys(false));
    let mut roster = Roster::start(&mut fleet, &workers(false)).await;
    for_secs(secs, (1500, 2500), async || {
        quorum_fault(&mut fleet, &mut roster, TTL_MS).await;
    })
    .await;
    let mut report = fleet.finish("long run: quorum").await.fleet;
    let crew = &fleet.crew;
    Row::new(
        "quorum (3 nodes)",
        &mut report,
        &crew.log,
        &crew.faults,
        (watch, Vec::new()),
    )
    .await
}

#[cfg(feature = "sentinel")]
async fn sentinel(secs: u64) -> Row {
    use crate::harness::mixes::sentinel_fault;
    use crate::harness::sentinel_fleet::SentinelFleet;

    let mut fleet = SentinelFleet::start(TTL_MS).await;
    let conn = redismutex::SentinelConnection::new(fleet.deployment.sentinel_client());
    let watch = ExpiryWatch::one(conn, lock_keys(false));
    let mut roster = Roster::start(&mut fleet, &workers(true)).await;
    for_secs(secs, (1500, 2500), async || {
        sentinel_fault(&mut fleet, &mut roster).await;
    })
    .await;
    let mut report = fleet.finish("long run: Sentinel, replicas(1)").await;
    let crew = &fleet.crew;
    let label = "Sentinel, replicas(1)";
    let row = Row::new(
        label,
        &mut report,
        &crew.log,
        &crew.faults,
        (watch, Vec::new()),
    )
    .await;
    if row.broken() {
        let path = std::env::temp_dir().join(format!("long_run-sentinel-{}.log", now_us()));
        std::fs::write(&path, fleet.deployment.describe()).expect("write the logs");
        eprintln!("the Sentinel deployment's logs in {path:?}");
    }
    row
}

/// One deployment's run, checked.
pub(super) struct Row {
    label: &'static str,
    report: Report,
    faults: usize,
    /// Referee overlaps not explained by a freeze inside check→leave.
    overlaps: usize,
    /// Guards overlapping in the log, not explained by a worker's freeze.
    guard_overlaps: Vec<String>,
    /// The server's clock was moved: overlaps are counted, and fencing must refuse what
    /// they would have broken.
    pub(super) clock_moved: bool,
}

impl Row {
    /// The row of `report`, with the fire leads measured on the notes of `watch` (the
    /// watch, and the notes taken as faults froze the server) and the guard overlaps
    /// found in `log`.
    pub(super) async fn new(
        label: &'static str,
        report: &mut Report,
        log: &Log,
        faults: &[FaultRecord],
        watch: (ExpiryWatch, Vec<HeldLock>),
    ) -> Row {
        let events = log.all();
        let (watch, mut notes) = watch;
        notes.extend(watch.stop().await);
        // The watcher reads every 20 ms: a freeze of the server right after a renewal
        // hides it, and the note is then a renewal behind (`Lead::blinded_by`).
        report.leads = leads(&events, &notes, faults, TTL_MS);
        report.leads.retain(|lead| !lead.blinded_by(faults));
        let guard_overlaps: Vec<String> = guard_overlaps(&events, faults)
            .into_iter()
            .filter(|line| !explained_by_worker_freeze(line, faults, TTL_MS))
            .collect();
        let r = &report.referee;
        let row = Row {
            label,
            faults: faults.len(),
            overlaps: r.violations as usize - report.overlaps_explained,
            guard_overlaps,
            report: report.clone(),
            clock_moved: false,
        };
        if row.broken() || std::env::var_os("LONG_RUN_DUMP").is_some() {
            let path = std::env::temp_dir().join(format!("long_run-{}.log", now_us()));
            let from_us = events.first().map_or(0, |e| e.us);
            std::fs::write(&path, dump(&events, faults, from_us)).expect("write the log");
            eprintln!("{label}: every event and fault in {path:?}");
        }
        row
    }

    /// Whether a safety check fails (then the log is worth keeping).
    fn broken(&self) -> bool {
        let (report, r) = (&self.report, &self.report.referee);
        self.overlaps > 0
            || !self.guard_overlaps.is_empty()
            || !report.late_writes.is_empty()
            || !report.token_order_unexplained.is_empty()
            || r.stale_accepted > 0
            || !report.guarded.stale_not_refused.is_empty()
            || !report.guarded.uncounted().is_empty()
    }

    /// The assertions of the module doc.
    pub(super) fn check(&self, secs: u64) {
        let (report, label) = (&self.report, self.label);
        let r = &report.referee;
        if self.clock_moved {
            assert_fenced_through_overlaps(report, &format!("{label}: "));
        } else {
            self.check_exclusive();
        }
        assert_eq!(r.stale_accepted, 0, "{label}: {:?}", r.stale_accepted_log);
        assert_ended_cleanly(report, &format!("{label}: "));
        // Where the server's clock moved, its expiries (PEXPIRETIME) are on that clock,
        // seconds off ours: no lead is measured there.
        assert!(
            self.clock_moved || report.leads.iter().all(|l| l.lead_us > 0),
            "{label}: tokens fired after their key expired: {:?}",
            report.leads
        );
        let guarded = &report.guarded;
        assert!(
            guarded.stale_not_refused.is_empty(),
            "{label}: stale exec writes not refused {:?}",
            guarded.stale_not_refused
        );
        assert!(
            guarded.uncounted().is_empty(),
            "{label}: data written by no accepted exec {:?}",
            guarded.uncounted()
        );
        assert!(self.faults > 0, "{label}: no fault injected");
        assert!(
            r.sections > secs * 5,
            "{label}: work stalled, {} sections",
            r.sections
        );
    }
}

impl Row {
    /// Mutual exclusion: no overlap but those a frozen worker explains, and lost updates
    /// and tokens out of order only within them.
    fn check_exclusive(&self) {
        let (report, label) = (&self.report, self.label);
        let r = &report.referee;
        assert_eq!(self.overlaps, 0, "{label}: overlaps {:?}", r.violation_log);
        assert!(
            self.guard_overlaps.is_empty(),
            "{label}: guards overlapping {:?}",
            self.guard_overlaps
        );
        assert!(
            (0..=report.overlaps_explained as i64).contains(&r.lost_updates),
            "{label}: {} lost updates, {} explained overlaps",
            r.lost_updates,
            report.overlaps_explained
        );
        assert!(
            report.token_order_unexplained.is_empty(),
            "{label}: tokens out of order {:?}",
            report.token_order_unexplained
        );
    }
}

/// The rows as a Markdown table, with the run's length.
pub(super) fn table(rows: &[Row], secs: f64) -> String {
    let mut out = format!("== long run, {secs:.0} s\n");
    out.push_str(
        "| deployment | s | sections (writer) | faults | overlaps | guard overlaps | lost updates \
         | stale fenced accepted | writes after deadline | keys left | fired as lost | lead min / p50 / max ms \
         | explained by a frozen worker (overlaps / late writes / tokens out of order) \
         | exec writes accepted / refused (stale; by the server) / uncertain | data below accepted |\n",
    );
    out.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for row in rows {
        let (report, r) = (&row.report, &row.report.referee);
        let lead = match report.lead_spread_ms() {
            _ if row.clock_moved => "- (the server's clock moved)".to_string(),
            Some((min, p50, max)) => format!("{min:.0} / {p50:.0} / {max:.0}"),
            None => "none".to_string(),
        };
        let (exec, below) = exec_columns(report);
        let _ = writeln!(
            out,
            "| {} | {:.0} | {} ({}) | {} | {} | {} | {} | {} | {} | {} | {} ({} measured) | {lead} | {} / {} / {} | {exec} | {below} |",
            row.label,
            report.secs,
            r.sections,
            r.writes,
            row.faults,
            row.overlaps,
            row.guard_overlaps.len(),
            r.lost_updates,
            r.stale_accepted,
            report.late_writes.len(),
            report.keys_left.len(),
            report.losses,
            report.leads.len(),
            report.overlaps_explained,
            report.late_writes_explained,
            report.token_order_explained,
        );
    }
    let total: u64 = rows.iter().map(|row| row.report.referee.sections).sum();
    let _ = writeln!(out, "total sections checked: {total}");
    out
}

/// The exec columns of `report`'s row: the writes `exec` accepted, refused (of them
/// stale, after a freeze past the TTL; and those the server refused, not the guard
/// before sending) and left uncertain, and by how much the data
/// counters fell below the accepted writes (restarts and failovers lose writes); `-`
/// where the workers did not use `exec`.
fn exec_columns(report: &Report) -> (String, String) {
    let guarded = &report.guarded;
    if !guarded.used() {
        return ("-".to_string(), "-".to_string());
    }
    let t = guarded.totals();
    let below: i64 = (guarded.keys.values())
        .map(|d| (d.accepted - d.counter).max(0))
        .sum();
    let exec = format!(
        "{} / {} ({}; {}) / {}",
        t.accepted, t.refused, guarded.stale_refused, guarded.server_refused, t.uncertain
    );
    (exec, below.to_string())
}
