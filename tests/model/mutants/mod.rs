//! Seeded bugs: each mutation of `list.rs` applied to a copy of `lua/`, and the
//! differential test run on the copy, which must disagree with it (catch it).
//!
//! - `every_mutation_applies` (no server): the list is well formed, and every script of
//!   `lua/` has a mutation.
//! - `seeded_bugs_sample`: [`SAMPLE`], a fixed few spread over the scripts, in CI.
//! - `seeded_bugs_all` (ignored): every mutation, with a table of what caught each;
//!   `.ci/mutants` runs it (`cargo test --test model -- --ignored seeded_bugs_all
//!   --nocapture`).
//! - `equivalent_mutations_agree` (ignored): the mutations dropped as equivalent, none
//!   of which the differential test may catch (`.ci/mutants --equivalent`).

#![allow(unreachable_pub)]

mod list;
mod run;

use crate::differential;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Instant;

use list::{Mutation, EQUIVALENT, MUTATIONS};

/// The sequences each mutation of [`SAMPLE`] may take to be caught (at most: a
/// mutation's run stops at the first disagreement).
const BUDGET: u32 = 2000;

/// The sequences each mutation may take in `seeded_bugs_all` (`MUTANTS_CASES` instead
/// when set). More than [`BUDGET`]: a few mutations need a rare sequence (the table's
/// `cases` column says which: `shared_queue_head_sees_all` took 2303 sequences from
/// [`run::SEED`], 4351 from seed 7).
const ALL_BUDGET: u32 = 10_000;

/// The mutations `seeded_bugs_sample` runs: a fixed list, one in each of the shared
/// files and in each kind of script (a lock, a reader, a release, a permit, a guarded
/// write, quorum mode, an upgrade, a set, an attach, a description), each caught within
/// a few hundred sequences by the full run, so that CI says the differential test still
/// reaches each. Fixed, not rotating: a failure names the same mutation on every rerun.
const SAMPLE: [&str; 14] = [
    "base_publish_fails",
    "shared_queue_ticket_not_incremented",
    "lock_token_not_incremented",
    "rlock_intent_ignored",
    "unlock_id_check_removed",
    "semaphore_permits_off_by_one",
    "exec_writer_check_loosened",
    "retake_granted_ignored",
    "force_unlock_fence_not_raised",
    "inspect_fence_pttl_of_lock",
    "upgrade_other_readers_ignored",
    "lock_all_read_intent_ignored",
    "attach_reader_old_kept",
    "describe_reader_unchecked",
];

/// The `*.lua` files of `lua/`, by name.
fn lua_files() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("lua");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|err| panic!("reading {}: {err}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "lua"))
        .map(|path| path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The text of `lua/<name>`.
fn lua(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("lua").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("reading {}: {err}", path.display()))
}

/// Why `m` is not a well-formed mutation of `lua/`, if it is not.
fn malformed(m: &Mutation) -> Option<String> {
    if m.from == m.to {
        return Some(format!("{}: `to` is `from`", m.name));
    }
    if m.why.is_empty() {
        return Some(format!("{}: no `why`", m.name));
    }
    let count = lua(m.file).matches(m.from).count();
    (count != 1).then(|| format!("{}: `from` occurs {count} times in {}", m.name, m.file))
}

#[test]
fn every_mutation_applies() {
    let mut problems: Vec<String> = MUTATIONS
        .iter()
        .chain(EQUIVALENT)
        .filter_map(malformed)
        .collect();
    let mut names = BTreeSet::new();
    for m in MUTATIONS.iter().chain(EQUIVALENT) {
        if !names.insert(m.name) {
            problems.push(format!("{}: the name is taken twice", m.name));
        }
    }
    for name in SAMPLE {
        if !MUTATIONS.iter().any(|m| m.name == name) {
            problems.push(format!("SAMPLE names {name}, which is not in MUTATIONS"));
        }
    }
    for file in lua_files() {
        let count = MUTATIONS.iter().filter(|m| m.file == file).count();
        if count == 0 {
            problems.push(format!("{file} has no mutation"));
        }
    }
    assert!(
        problems.is_empty(),
        "the list of mutations:\n{}",
        problems.join("\n")
    );
    // The check itself: text that occurs many times, or not at all, or no change.
    let bad = |from, to| Mutation {
        name: "bad",
        file: "lock.lua",
        from,
        to,
        why: "a test",
    };
    assert!(malformed(&bad("KEYS[1]", "KEYS[2]")).is_some());
    assert!(malformed(&bad("no such text", "x")).is_some());
    assert!(malformed(&bad(
        "local ttl = tonumber(ARGV[2])",
        "local ttl = tonumber(ARGV[2])"
    ))
    .is_some());
    assert!(malformed(&bad("local ttl = tonumber(ARGV[2])", "local ttl = 1")).is_none());
    assert!(
        MUTATIONS.len() >= 24,
        "{} mutations: at least 24",
        MUTATIONS.len()
    );
}

/// Runs each of `mutations` (each on a server of its own), printing the table's header
/// and a row for each as it ends, then the differential test's report of each one
/// caught (the shrunk sequence and what differed): the mutations not caught.
fn run_each<'a>(
    mutations: impl IntoIterator<Item = &'a Mutation>,
    budget: u32,
    seed: u64,
) -> Vec<&'static str> {
    println!("{}", run::header());
    let mut outcomes = Vec::new();
    for m in mutations {
        let outcome = run::run(m, budget, seed);
        println!("{}", run::row(&outcome));
        outcomes.push(outcome);
    }
    println!("{}", run::LEGEND);
    for o in outcomes.iter().filter(|o| o.caught) {
        println!("\n{} ({}):\n{}", o.name, o.file, o.report);
    }
    outcomes
        .iter()
        .filter(|o| !o.caught)
        .map(|o| o.name)
        .collect()
}

#[test]
fn seeded_bugs_sample() {
    let started = Instant::now();
    let sample = SAMPLE.map(|name| {
        MUTATIONS
            .iter()
            .find(|m| m.name == name)
            .expect("in MUTATIONS")
    });
    let missed = run_each(sample, BUDGET, run::SEED);
    println!(
        "seeded_bugs_sample: {} mutations in {:.1}s",
        SAMPLE.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        missed.is_empty(),
        "not caught in {BUDGET} sequences: {missed:?}"
    );
}

/// Every mutation, or those named in `MUTANTS` (comma-separated); `MUTANTS_CASES`
/// sequences each (default [`ALL_BUDGET`]), from the seed `MUTANTS_SEED` (default
/// [`run::SEED`]).
#[test]
#[ignore = "every seeded bug, a minute or two: .ci/mutants"]
fn seeded_bugs_all() {
    let budget =
        std::env::var("MUTANTS_CASES").map_or(ALL_BUDGET, |n| n.parse().expect("MUTANTS_CASES"));
    let only = std::env::var("MUTANTS").ok();
    let chosen: Vec<&Mutation> = MUTATIONS
        .iter()
        .filter(|m| {
            only.as_deref()
                .is_none_or(|names| names.split(',').any(|n| n.trim() == m.name))
        })
        .collect();
    assert!(!chosen.is_empty(), "MUTANTS names no mutation of the list");
    let started = Instant::now();
    let seed =
        std::env::var("MUTANTS_SEED").map_or(run::SEED, |n| n.parse().expect("MUTANTS_SEED"));
    let missed = run_each(chosen.iter().copied(), budget, seed);
    println!(
        "seeded_bugs_all: {} of {} caught in {:.1}s ({budget} sequences at most each, seed {seed})",
        chosen.len() - missed.len(),
        chosen.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        missed.is_empty(),
        "not caught in {budget} sequences each: {missed:?}"
    );
}

/// The dropped mutations of `EQUIVALENT` run as the others are: none may be caught (one
/// that is changes behaviour after all, and belongs in `MUTATIONS`). `MUTANTS_CASES`
/// sequences each (default [`BUDGET`]).
#[test]
#[ignore = "the equivalent mutations, a minute or two: .ci/mutants --equivalent"]
fn equivalent_mutations_agree() {
    let budget =
        std::env::var("MUTANTS_CASES").map_or(BUDGET, |n| n.parse().expect("MUTANTS_CASES"));
    let not_caught = run_each(EQUIVALENT, budget, run::SEED);
    let caught: Vec<&str> = EQUIVALENT
        .iter()
        .map(|m| m.name)
        .filter(|name| !not_caught.contains(name))
        .collect();
    assert!(
        caught.is_empty(),
        "caught, so not equivalent (move to MUTATIONS): {caught:?}"
    );
}
