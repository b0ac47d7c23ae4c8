//! Tests that need root (today: the network namespaces of `netns.rs`) skip where the
//! machine refuses what they need, so that `cargo test --all-features` passes for any
//! user: one line `SKIPPED <test>: <why>; run them as root: <command>` on stderr (written
//! past the test harness's capture, so `cargo test` shows it; under nextest,
//! `.config/nextest.toml` shows these tests' output when they pass; `$REDIS_SKIP_LOG` gets
//! it too, as it gets the version skips of `binaries.rs`).
//! With `REDISMUTEX_REQUIRE_ROOT_TESTS=1` (`.ci/run` sets it) they fail instead.
//!
//! Whether they can run is decided by trying what they need (`ip netns add`), not by
//! the uid, so a user with the capabilities runs them too; any other failure fails.

use std::io::Write;

use crate::common::binaries::note_skip;

/// The variable that makes a test needing root fail, not skip, where it cannot run.
pub const REQUIRE_ROOT_TESTS: &str = "REDISMUTEX_REQUIRE_ROOT_TESTS";

/// What the network-namespace tests need, for the skip line.
pub const NETNS_NEEDS: &str = "the network-namespace tests need root and iproute2 (ip, tc)";

/// How to run `filter` of the fault suite as root, with `env` before it (`""` or
/// `LONG_RUN_ONLY=netns `): built by the user as usual, only the test binary run as root
/// (cargo's runner: `sudo -E`, with the user's `PATH`, which `sudo` would reset, for the
/// `cargo build` of the fault worker the test runs), so `target/` stays the user's.
pub fn faults_as_root(env: &str, filter: &str) -> String {
    format!(
        "{env}cargo test --all-features --test faults \
         --config \"target.'cfg(unix)'.runner=['sudo','-E','env','PATH=$PATH']\" {filter}"
    )
}

/// [`faults_as_root`] for deployment `row` (`netns`) of the calling test, a long run
/// whose deployments `only` (`LONG_RUN_ONLY`, `LEADS_ONLY`) chooses: `short` is its
/// short version (which runs in every `cargo test`), `long` the ignored one.
pub fn row_as_root(only: &str, row: &str, short: &str, long: &str) -> String {
    let env = format!("{only}={row} ");
    match std::thread::current().name() {
        Some(name) if name == long => faults_as_root(&env, &format!("{long} -- --ignored --exact")),
        _ => faults_as_root(&env, short),
    }
}

/// Skips the calling test, or `part` of it (`Some("the netns row")`), because `refused`
/// (what the machine answered) keeps it from doing what `needs` says; prints the line
/// with `how` to run it as root. Panics instead when `REDISMUTEX_REQUIRE_ROOT_TESTS=1`.
pub fn skip(part: Option<&str>, needs: &str, refused: &str, how: &str) {
    // The test harness names each test's thread after the test.
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("this test");
    let what = match part {
        Some(part) => format!("{part} of {test}"),
        None => test.to_owned(),
    };
    let why = format!("{needs}, and here {refused}");
    if std::env::var(REQUIRE_ROOT_TESTS).is_ok_and(|v| v == "1") {
        panic!("{what} cannot run: {why} ({REQUIRE_ROOT_TESTS}=1: failing, not skipping)");
    }
    let line = format!("SKIPPED {what}: {why}; run them as root: {how}");
    // Straight to the process's stderr: `eprintln!` would be captured with the output
    // of a passing test, and the skip would not show.
    let _ = writeln!(std::io::stderr().lock(), "{line}");
    note_skip(&line);
}
