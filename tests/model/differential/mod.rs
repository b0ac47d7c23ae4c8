//! The differential test: random sequences of steps ([`op::Op`]: every script of `lua/`
//! and Go's four, time passing, restarts, hostile writes) run on the model
//! (`crate::scripts`, `crate::store`) and on a real `redis-server` through the scripts;
//! after every step the replies and the keys must agree. `proptest` draws the sequences
//! and shrinks a failing one.
//!
//! - `op`: the steps, their parameter domains and weights, and each on the model.
//! - `wire`: each step as the server runs it (the crate's scripts with the crate's
//!   arguments, by `EVALSHA` of the text `Scripts` assembles), and its reply read back.
//! - `dump`: the server's keys of one lock key, in one round trip, as a `Store`.
//! - `compare`: whether replies and keys agree.
//! - `run`: one sequence, step by step (each step and the dump after it in one pipeline).
//!
//! Time: both sides follow the server's clock. The model takes each step at the clock
//! the server's dump read after the step before, and after a step that agrees takes the
//! server's state as its own, so tokens floored at the clock and expiries set by the
//! server are the server's from then on and no drift adds up. What the server derives
//! from its clock during a step may be later than the model's by the time the step took
//! (`compare`); a token floored at the clock makes the model take the step again at the
//! server's reading, so the fence it stores must then match exactly. Time passing
//! ([`op::Op::Advance`]) moves the data back instead of the clock forward: every PTTL and
//! every time-valued score (a semaphore's deadlines, the queue's) less the step, on both.
//! Every TTL and step of time is a multiple of 500 ms and a sequence ends once it has
//! taken 400 ms (`run::STALL_US`), so no key is ever near expiring when a script runs.
//!
//! A restart (`Op::Restart`) deletes the sequence's keys rather than `FLUSHDB`: each
//! sequence has a lock key of its own, so this is a restart without persistence as far
//! as it can see, and sequences may share a server.
//!
//! [`check`] is what the mutation runner calls: `Err` for a script whose decisions differ
//! from the model's.

#![allow(unreachable_pub)]

#[path = "../../common/scripts.rs"]
#[allow(dead_code, unreachable_pub)]
mod common_scripts;
#[path = "../../common/go_peer.rs"]
#[allow(dead_code, unreachable_pub)]
mod go_peer;
#[path = "../../common/server.rs"]
#[allow(dead_code, unreachable_pub)]
pub(crate) mod server;

mod compare;
mod dump;
mod op;
mod run;
mod scripts;
mod wire;

#[cfg(test)]
mod tests;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::Duration;

use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

pub use scripts::Scripts;

/// The steps of a sequence: 20 on average (and down to 1 when shrinking).
const STEPS: std::ops::RangeInclusive<usize> = 1..=39;

/// Runs `cases` random sequences (seeded by `seed`: a run repeats) on a `redis-server`
/// started for the call, with `scripts`: `Ok(steps run)`, or `Err(the shrunk failing
/// sequence and what differed)`.
pub fn check(scripts: &Scripts, cases: u32, seed: u64) -> Result<u64, String> {
    let server = server::RedisServer::try_start()?;
    let mut conn = server
        .client()
        .get_connection()
        .map_err(|err| format!("connect to {}: {err}", server.url()))?;
    // A mutated script that never ends fails its step (the server goes with the call).
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|err| format!("{err}"))?;
    check_on(&mut conn, scripts, cases, seed)
}

/// [`check`] on the server behind `conn` (started by the caller; each sequence has a
/// lock key of its own, so several runs may share it).
pub fn check_on(
    conn: &mut redis::Connection,
    scripts: &Scripts,
    cases: u32,
    seed: u64,
) -> Result<u64, String> {
    check_counted(conn, scripts, cases, seed).map(|run| run.steps)
}

/// What a passing run did.
#[derive(Debug, Default)]
pub struct Run {
    /// Steps run and compared.
    pub steps: u64,
    /// Sequences that ended early, having taken too long (`run::STALL_US`).
    pub stalled: u64,
    /// How often each outcome (a step's kind and the model's reply, as
    /// `run::outcome` names them: "Lock: Token", "Unlock: Int(3)") came up.
    pub seen: BTreeMap<String, u64>,
}

/// [`check_on`], with what the run did.
pub fn check_counted(
    conn: &mut redis::Connection,
    scripts: &Scripts,
    cases: u32,
    seed: u64,
) -> Result<Run, String> {
    let loaded = wire::Loaded::load(conn, scripts, dump::DUMP)?;
    let config = Config {
        cases,
        failure_persistence: None,
        // XorShift: a ChaCha stream costs a fifth of a run's time in a debug build.
        rng_algorithm: RngAlgorithm::XorShift,
        max_shrink_iters: 2048,
        ..Config::default()
    };
    // XorShift takes 16 bytes, and an all-zero state stays zero: the seed and its
    // complement.
    let mut seed_bytes = [0u8; 16];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    seed_bytes[8..].copy_from_slice(&(!seed).to_le_bytes());
    let rng = TestRng::from_seed(RngAlgorithm::XorShift, &seed_bytes);
    let mut runner = TestRunner::new_with_rng(config, rng);
    let conn = RefCell::new(conn);
    let total = RefCell::new(Run::default());
    // Once the server does not answer, every case fails at once (shrinking would wait
    // on it for each), and the run fails with what the server did.
    let gone = RefCell::new(None);
    let result = runner.run(&op::sequence(STEPS), |ops| {
        if gone.borrow().is_some() {
            return Err(TestCaseError::fail("the server does not answer"));
        }
        let mut total = total.borrow_mut();
        match run::sequence(&mut conn.borrow_mut(), &loaded, &ops, &mut total.seen) {
            Ok(ran) => {
                total.steps += ran.steps;
                total.stalled += u64::from(ran.stalled);
                Ok(())
            }
            Err(run::Failure::Differ(why)) => Err(TestCaseError::fail(why)),
            Err(run::Failure::Server(why)) => {
                let failed = TestCaseError::fail(why.clone());
                *gone.borrow_mut() = Some((why, ops));
                Err(failed)
            }
        }
    });
    if let Some((why, ops)) = gone.into_inner() {
        return Err(format!(
            "the server stopped answering (seed {seed}): {why}\nin the sequence:\n{}",
            listed(&ops)
        ));
    }
    let total = total.into_inner();
    if total.stalled > 0 {
        eprintln!(
            "differential: {} sequences ended early, having taken over {} ms",
            total.stalled,
            run::STALL_US / 1000
        );
    }
    match result {
        Ok(()) => Ok(total),
        Err(TestError::Fail(reason, ops)) => Err(format!(
            "the model and the server disagree (seed {seed}); shrunk to {} steps:\n{}\n{reason}",
            ops.len(),
            listed(&ops),
        )),
        Err(TestError::Abort(reason)) => Err(format!("aborted: {reason}")),
    }
}

/// The steps of a sequence, one a line.
fn listed(ops: &[op::Op]) -> String {
    ops.iter()
        .enumerate()
        .map(|(i, op)| format!("  {i}: {op:?}"))
        .collect::<Vec<_>>()
        .join("\n")
}
