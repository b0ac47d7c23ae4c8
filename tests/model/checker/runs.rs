//! The configurations checked, each exhaustively (breadth-first) to a stated depth, with
//! its state count printed (`cargo test --test model checker -- --nocapture`); and the
//! faults that break a stated precondition, each shown to break the property that rests
//! on it, with the counterexample printed (`docs/model.md` quotes them).

use stateright::{Checker, Model};

use super::client::{Mode, Package};
use super::properties::names;
use super::{ClientSpec, Config, Faults, Protocol};

fn rust(modes: &[Mode]) -> ClientSpec {
    ClientSpec {
        package: Package::Rust,
        modes: modes.to_vec(),
    }
}

fn go(modes: &[Mode]) -> ClientSpec {
    ClientSpec {
        package: Package::Go,
        modes: modes.to_vec(),
    }
}

const RW: &[Mode] = &[Mode::Write, Mode::Read];

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
        go_ttl: None,
        horizon: 5,
        faults: Faults::default(),
    }
}

/// Checks `config` breadth-first to `depth` steps; prints the state counts.
fn explore(name: &str, config: Config, depth: usize) -> impl Checker<Protocol> {
    let started = std::time::Instant::now();
    let checker = Protocol { config }
        .checker()
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
/// the depth grows one step at a time until it shows); the properties `keeps` still
/// hold to that depth.
fn breaks(
    name: &str,
    mut config: Config,
    depth: usize,
    faults: Faults,
    property: &'static str,
    keeps: &[&'static str],
) {
    config.faults = faults;
    for depth in 1..=depth {
        let checker = explore(name, config.clone(), depth);
        if let Some(path) = checker.discovery(property) {
            println!("{name}: \"{property}\" fails:\n{path}");
            for kept in keeps {
                checker.assert_no_discovery(kept);
            }
            return;
        }
    }
    panic!("{name}: \"{property}\" holds to depth {depth}, though {faults:?} should break it");
}

#[test]
fn three_rust_clients_read_and_write() {
    holds(
        "3 rust, read/write",
        config(vec![rust(RW), rust(RW), rust(RW)]),
        12,
    );
}

#[test]
fn rust_and_go_clients_share_a_lock() {
    holds(
        "2 rust + 1 go, read/write",
        config(vec![rust(RW), rust(RW), go(RW)]),
        12,
    );
}

#[test]
fn fair_mode_grants_in_arrival_order() {
    let mut c = config(vec![rust(RW), rust(RW), rust(RW)]);
    c.fair = true;
    holds("3 rust, fair", c, 12);
}

#[test]
fn single_attempts_beside_waiting_ones() {
    let mut c = config(vec![rust(RW), rust(RW), rust(RW)]);
    c.tries = true;
    holds("3 rust, try and wait", c.clone(), 10);
    c.fair = true;
    holds("3 rust, fair, try and wait", c, 10);
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
fn guarded_writes_and_election_records() {
    let mut c = config(vec![rust(&[Mode::Write]), rust(&[Mode::Write])]);
    c.exec = true;
    holds("2 rust writers, exec and proclaim", c, 12);
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

/// The first configuration to a depth of `MODEL_DEPTH` (default 15), for a change to the
/// scripts: `MODEL_DEPTH=15 cargo test --release --test model deeper -- --ignored --nocapture`.
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
