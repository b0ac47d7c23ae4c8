//! The configurations checked, each exhaustively (breadth-first) to a stated depth, with
//! its state count printed (`cargo test --test model checker -- --nocapture`); the
//! faults that break a stated precondition, each shown to break the property that rests
//! on it, with the counterexample printed (`docs/model.md` quotes them); and the seeded
//! bugs of the model (`crate::bugs`), each shown to break its property.

use stateright::{Checker, Model};

use super::client::{Mode, Package};
use super::properties::names;
use super::{ClientSpec, Config, Faults, Protocol};
use crate::bugs::Bug;

fn rust(modes: &[Mode]) -> ClientSpec {
    ClientSpec {
        package: Package::Rust,
        modes: modes.to_vec(),
        lock: 0,
    }
}

fn go(modes: &[Mode]) -> ClientSpec {
    ClientSpec {
        package: Package::Go,
        modes: modes.to_vec(),
        lock: 0,
    }
}

/// A Rust client of lock 1.
fn rust_of_lock1(modes: &[Mode]) -> ClientSpec {
    ClientSpec {
        lock: 1,
        ..rust(modes)
    }
}

/// A Rust client taking a set: both locks, writing those whose bit of `writes` is set.
fn set(writes: u8) -> ClientSpec {
    rust(&[Mode::Set { writes }])
}

const RW: &[Mode] = &[Mode::Write, Mode::Read];
const UP: &[Mode] = &[Mode::Upgradable];

/// The defaults: a TTL of 3 ticks, a margin of 1, the fence kept 6 ticks, 5 ticks to
/// pass, writers set their intent.
fn config(clients: Vec<ClientSpec>) -> Config {
    Config {
        clients,
        ttl: 3,
        margin: 1,
        retention: 6,
        intent: true,
        fair: false,
        permits: 1,
        exec: false,
        tries: false,
        fast: false,
        late: false,
        drift: 1,
        bug: None,
        describe: false,
        go_ttl: None,
        leases: false,
        horizon: 5,
        faults: Faults::default(),
    }
}

/// Checks `config` breadth-first to `depth` steps (on two threads); prints the state
/// counts.
fn explore(name: &str, config: Config, depth: usize) -> impl Checker<Protocol> {
    let started = std::time::Instant::now();
    let checker = Protocol { config }
        .checker()
        .threads(2)
        .target_max_depth(depth)
        .spawn_bfs()
        .join();
    println!(
        "{name}: depth {depth}, {} states, {} unique, in {:.1?}",
        checker.state_count(),
        checker.unique_state_count(),
        started.elapsed()
    );
    checker
}

/// Every property holds to `depth`, and every `sometimes` is reached.
fn holds(name: &str, config: Config, depth: usize) {
    explore(name, config, depth).assert_properties();
}

/// `property` has a counterexample under `faults` within `depth` steps (the shortest:
/// the depth grows one step at a time until it shows); the properties `keeps` hold to
/// `depth` all the same.
fn breaks(
    name: &str,
    mut config: Config,
    depth: usize,
    faults: Faults,
    property: &'static str,
    keeps: &[&'static str],
) {
    config.faults = faults;
    let found = (1..=depth).find_map(|d| explore(name, config.clone(), d).discovery(property));
    let Some(path) = found else {
        panic!("{name}: \"{property}\" holds to depth {depth}, though it should fail");
    };
    println!("{name}: \"{property}\" fails:\n{path}");
    if !keeps.is_empty() {
        let checker = explore(name, config, depth);
        for kept in keeps {
            checker.assert_no_discovery(kept);
        }
    }
}

#[test]
fn three_rust_clients_read_and_write() {
    holds(
        "3 rust, read/write",
        config(vec![rust(RW), rust(RW), rust(RW)]),
        11,
    );
    let mut c = config(vec![rust(RW), rust(RW), rust(RW)]);
    c.intent = false;
    holds("3 rust, read/write, no intent (the default)", c, 10);
}

#[test]
fn rust_and_go_clients_share_a_lock() {
    holds(
        "2 rust + 1 go, read/write",
        config(vec![rust(RW), rust(RW), go(RW)]),
        11,
    );
}

#[test]
fn fair_mode_grants_in_arrival_order() {
    let mut c = config(vec![rust(RW), rust(RW), rust(RW)]);
    c.fair = true;
    holds("3 rust, fair", c, 10);
}

#[test]
fn single_attempts_beside_waiting_ones() {
    let mut c = config(vec![rust(RW), rust(RW), rust(RW)]);
    c.tries = true;
    holds("3 rust, try and wait", c.clone(), 10);
    c.fair = true;
    holds("3 rust, fair, try and wait", c, 9);
}

#[test]
fn late_replies_and_the_fast_path() {
    let mut c = config(vec![rust(RW), rust(RW), rust(RW)]);
    c.late = true;
    c.fast = true;
    holds("3 rust, late replies, fast path", c.clone(), 8);
    c.fair = true;
    c.fast = false;
    holds("3 rust, fair, late replies", c, 8);
}

#[test]
fn semaphore_permits() {
    let mut c = config(vec![rust(&[Mode::Permit]); 3]);
    c.permits = 2;
    holds("3 rust, semaphore of 2", c.clone(), 12);
    c.fair = true;
    holds("3 rust, fair semaphore of 2", c, 12);
}

#[test]
fn descriptions_leave_with_their_holds() {
    let mut c = config(vec![rust(RW), rust(RW), rust(RW)]);
    c.describe = true;
    holds("3 rust, read/write, described", c.clone(), 9);
    c.fast = true;
    c.late = true;
    holds("3 rust, late replies, fast path, described", c, 8);
    let mut c = config(vec![rust(&[Mode::Permit]); 3]);
    c.permits = 2;
    c.describe = true;
    holds("3 rust, semaphore of 2, described", c, 11);
    let mut c = sets_and_singles_config();
    c.describe = true;
    holds("1 set + 1 rust client of each lock, described", c, 9);
}

#[test]
fn leased_holds_are_described_by_their_new_holder() {
    // Leases: an attach describes the new id (describe.lua after attach.lua, in the same
    // request), a release by the lease deletes the lease id's description.
    let mut c = leases_config(vec![rust(RW), rust(RW), rust(RW)]);
    c.describe = true;
    holds("3 rust, read/write, leases, described", c, LEASES_DEPTH);
    let mut c = leases_config(vec![rust(&[Mode::Permit]); 3]);
    c.permits = 2;
    c.describe = true;
    holds(
        "3 rust, semaphore of 2, leases, described",
        c,
        LEASED_PERMITS_DEPTH,
    );
}

#[test]
fn guarded_writes_and_election_records() {
    let mut c = config(vec![rust(&[Mode::Write]), rust(&[Mode::Write])]);
    c.exec = true;
    holds("2 rust writers, exec and proclaim", c, 12);
}

/// Two upgradable readers beside a client that reads or writes: every step of an
/// upgradable reader (a take, waiting or single; an upgrade, waiting or single; back to
/// a plain reader; renewals and releases).
fn upgradable_config() -> Config {
    let mut c = config(vec![rust(UP), rust(UP), rust(RW)]);
    c.tries = true;
    c
}

#[test]
fn upgradable_reads_and_their_upgrades() {
    holds(
        "2 upgradable + 1 rust",
        upgradable_config(),
        UPGRADABLE_DEPTH,
    );
}

/// The depth of [`upgradable_reads_and_their_upgrades`].
const UPGRADABLE_DEPTH: usize = 10;

/// Sets (`lock_all.lua`) on two locks: one writing lock 0 and reading lock 1, one the
/// other way round, and one writing both (the holder that lets the first two wait with
/// intents that block each other's reads); waiting with intent, single attempts,
/// giving up, renewals, releases.
fn sets_config() -> Config {
    let mut c = config(vec![set(0b01), set(0b10), set(0b11)]);
    c.tries = true;
    c
}

/// A set beside single-key clients of either lock, each reading or writing.
fn sets_and_singles_config() -> Config {
    let mut c = config(vec![set(0b01), rust(RW), rust_of_lock1(RW)]);
    c.tries = true;
    c
}

/// The depths of [`sets_on_two_locks`].
const SETS_DEPTH: usize = 14;
const SETS_AND_SINGLES_DEPTH: usize = 11;

#[test]
fn sets_on_two_locks() {
    holds("3 sets on 2 locks", sets_config(), SETS_DEPTH);
    holds(
        "1 set + 1 rust client of each lock",
        sets_and_singles_config(),
        SETS_AND_SINGLES_DEPTH,
    );
}

/// `clients` with leases: holders detach, other clients attach a lease's text, its
/// holder releases the hold by it.
fn leases_config(clients: Vec<ClientSpec>) -> Config {
    let mut c = config(clients);
    c.leases = true;
    c
}

/// The depths of [`leases_attach_once_and_free_only_their_hold`].
const LEASES_DEPTH: usize = 9;
const LEASED_PERMITS_DEPTH: usize = 10;
const LEASED_SETS_DEPTH: usize = 9;

#[test]
fn leases_attach_once_and_free_only_their_hold() {
    holds(
        "3 rust, read/write, leases",
        leases_config(vec![rust(RW), rust(RW), rust(RW)]),
        LEASES_DEPTH,
    );
    let mut c = leases_config(vec![rust(&[Mode::Permit]); 3]);
    c.permits = 2;
    holds("3 rust, semaphore of 2, leases", c, LEASED_PERMITS_DEPTH);
    holds(
        "1 set + 1 rust client of each lock, leases",
        leases_config(vec![set(0b01), rust(RW), rust_of_lock1(RW)]),
        LEASED_SETS_DEPTH,
    );
}

/// Six of the configurations to a depth of `MODEL_DEPTH` (default 15; the upgradable
/// readers with late replies three less, a set beside single-key clients two less), for
/// a change to the scripts: `MODEL_DEPTH=15 cargo test --release --test model deeper --
/// --ignored --nocapture`.
#[test]
#[ignore]
fn deeper() {
    let depth =
        std::env::var("MODEL_DEPTH").map_or(15, |d| d.parse().expect("MODEL_DEPTH: a number"));
    let mut c = config(vec![rust(RW), rust(RW), go(RW)]);
    c.tries = true;
    holds("2 rust + 1 go, try and wait", c.clone(), depth);
    let mut c = config(vec![rust(RW), rust(RW), rust(RW)]);
    c.fair = true;
    holds("3 rust, fair", c, depth);
    // Go's readers and writers beside upgradable readers (one also reads plainly).
    let mut c = config(vec![
        rust(UP),
        rust(&[Mode::Upgradable, Mode::Read]),
        go(RW),
    ]);
    c.tries = true;
    holds("2 upgradable + 1 go, try and wait", c, depth);
    // Late replies of upgradable reads: three steps less, for a run of about a minute.
    let mut c = upgradable_config();
    c.late = true;
    holds(
        "2 upgradable + 1 rust, late replies",
        c,
        depth.saturating_sub(3),
    );
    // Sets: three of them to the depth, one beside single-key clients two steps less.
    holds("3 sets on 2 locks", sets_config(), depth);
    holds(
        "1 set + 1 rust client of each lock",
        sets_and_singles_config(),
        depth.saturating_sub(2),
    );
}

#[test]
fn without_the_margin_drift_breaks_held() {
    let mut c = config(vec![rust(&[Mode::Write]), rust(&[Mode::Write])]);
    c.margin = 0;
    c.drift = 1;
    breaks(
        "no margin",
        c,
        8,
        Faults::default(),
        names::HELD,
        &[names::TOKENS],
    );
}

#[test]
fn a_go_client_with_a_shorter_ttl_breaks_exclusion() {
    let mut c = config(vec![
        rust(&[Mode::Read]),
        go(&[Mode::Read]),
        rust(&[Mode::Write]),
    ]);
    c.go_ttl = Some(1);
    breaks(
        "go ttl shorter",
        c,
        8,
        Faults::default(),
        names::EXCLUSION,
        &[names::TOKENS],
    );
}

/// Two Rust writers under `faults`: `property` fails, `keeps` hold.
fn two_writers_break(name: &str, faults: Faults, property: &'static str, keeps: &[&'static str]) {
    let writers = config(vec![rust(&[Mode::Write]), rust(&[Mode::Write])]);
    breaks(name, writers, 8, faults, property, keeps);
}

#[test]
fn a_restart_without_persistence_breaks_exclusion_not_tokens() {
    let restart = Faults {
        restart: true,
        ..Faults::default()
    };
    two_writers_break("restart", restart, names::EXCLUSION, &[names::TOKENS]);
}

#[test]
fn a_clock_jump_breaks_held() {
    let forward = Faults {
        clock_forward: true,
        ..Faults::default()
    };
    two_writers_break("clock forward", forward, names::HELD, &[names::TOKENS]);
}

#[test]
fn a_restart_with_the_clock_back_breaks_tokens() {
    let back = Faults {
        restart: true,
        clock_back: true,
        ..Faults::default()
    };
    two_writers_break("restart, clock back", back, names::TOKENS, &[]);
}

#[test]
fn a_forced_release_breaks_exclusion_not_tokens() {
    let force = Faults {
        force: true,
        ..Faults::default()
    };
    two_writers_break("force_unlock", force, names::EXCLUSION, &[names::TOKENS]);
}

/// Each seeded bug of the model (`crate::bugs`) breaks the property that speaks of it:
/// no property holds only because the model cannot break it.
#[test]
fn each_seeded_bug_of_the_model_breaks_its_property() {
    let writers = || config(vec![rust(&[Mode::Write]); 3]);
    let exec = || {
        let mut c = config(vec![rust(&[Mode::Write]); 2]);
        c.exec = true;
        c
    };
    let fair = || {
        let mut c = config(vec![rust(RW), rust(RW), rust(RW)]);
        c.fair = true;
        c
    };
    let permits = |fair: bool| {
        let mut c = config(vec![rust(&[Mode::Permit]); 3]);
        c.permits = 2;
        c.fair = fair;
        c
    };
    // A writer that downgrades two ticks after its key was last set: at TTL 3 and margin
    // 1 its token has fired by then, at TTL 4 not.
    let downgrade = || {
        let mut c = config(vec![rust(RW)]);
        c.ttl = 4;
        c.horizon = 6;
        c
    };
    let intent = || {
        config(vec![
            rust(&[Mode::Read]),
            rust(&[Mode::Write]),
            rust(&[Mode::Read]),
        ])
    };
    // Upgradable readers only: the intent is an upgrader's.
    let upgraders = || config(vec![rust(UP), rust(&[Mode::Read]), rust(&[Mode::Read])]);
    // Leases of one mode: a holder detaches, two others attach its text.
    let leased = |mode| leases_config(vec![rust(&[mode]); 3]);
    let described = |mut c: Config| {
        c.describe = true;
        c
    };
    let runs: [(Bug, Config, &'static str); 25] = [
        (Bug::RlockIgnoresIntent, intent(), names::INTENT),
        (Bug::LockIgnoresQueue, fair(), names::FAIR),
        (Bug::LockWithoutTtl, writers(), names::TTL),
        (Bug::TokenNotIncremented, writers(), names::TOKENS),
        (Bug::SemaphoreOffByOne, permits(false), names::EXCLUSION),
        (Bug::SemaphoreIgnoresQueue, permits(true), names::FAIR),
        (Bug::DowngradeKeepsTtl, downgrade(), names::HELD),
        (Bug::UnlockIgnoresId, writers(), names::EXCLUSION),
        (Bug::ExecUnchecked, exec(), names::STALE_EXEC),
        (Bug::ExecRunsWhenRefusing, exec(), names::EXEC),
        (Bug::ProclaimUnchecked, exec(), names::RECORD),
        (Bug::LeaderNamesRecord, exec(), names::LEADER),
        (Bug::RlockIgnoresIntent, upgraders(), names::INTENT),
        (
            Bug::UpgradableIgnoresUpgrader,
            upgradable_config(),
            names::ONE_UPGRADER,
        ),
        (
            Bug::UpgradableIgnoresIntent,
            upgradable_config(),
            names::INTENT,
        ),
        (
            Bug::UpgradeTakesAFreeLock,
            config(vec![rust(UP), rust(&[Mode::Write])]),
            names::WRITER_BETWEEN,
        ),
        (
            Bug::LockAllChecksFirstOnly,
            sets_config(),
            names::ALL_OR_NOTHING,
        ),
        (
            Bug::LockAllIgnoresReadHolder,
            sets_and_singles_config(),
            names::EXCLUSION,
        ),
        (
            Bug::LockAllKeepsIntentWhenBlockedByIntent,
            sets_config(),
            names::SETS_MAKE_WAY,
        ),
        (Bug::AttachUnchecked, leased(Mode::Write), names::ATTACH),
        (
            Bug::AttachKeepsOldId,
            leased(Mode::Read),
            names::ATTACH_ONCE,
        ),
        (
            Bug::UnlockIgnoresId,
            leased(Mode::Write),
            names::LEASE_RELEASE,
        ),
        (
            Bug::UnlockKeepsDescription,
            described(config(vec![rust(RW), rust(RW)])),
            names::DESCRIPTIONS,
        ),
        (
            Bug::DescribeKeepsRunOutPermits,
            described(permits(false)),
            names::DESCRIPTIONS,
        ),
        (
            Bug::AttachKeepsOldDescription,
            described(leased(Mode::Read)),
            names::DESCRIPTIONS,
        ),
    ];
    for (bug, mut c, property) in runs {
        c.bug = Some(bug);
        breaks(&format!("{bug:?}"), c, 10, Faults::default(), property, &[]);
    }
}
