//! The differential test's runs: a CI-sized one, a long one (ignored), and the positive
//! control that shows a script that differs is caught.

use std::time::Instant;

use super::{check, check_counted, server::RedisServer, Run, Scripts};

/// Outcomes (a step's kind and the model's reply, as `run::outcome` names them) that the
/// CI run must reach: each script's grants, blocks, releases and refusals.
const REACHED: &[&str] = &[
    "Lock: Token",
    "Lock: Blocked",
    "Lock: Refused(NoExpiry { key: Lock })",
    "Lock: WrongType(Fence, non-integer string)",
    "Lock: WrongType(Fence, exhausted counter)",
    "Lock: WrongType(Lock, zset)",
    "RLock: Token",
    "RLock: Blocked",
    "RLock: Refused(Unchecked)",
    "RLock: WrongType(Lock, hash)",
    "Semaphore: Token",
    "Semaphore: Blocked",
    "Semaphore: WrongType(Lock, string)",
    "Semaphore: Refused(NoExpiry { key: Lock })",
    "Unlock: Int(0)",
    "Unlock: Int(1)",
    "Unlock: Int(2)",
    "Unlock: Int(3)",
    "Refresh: Int(1)",
    "Renew: Renewed(2)",
    "Exec: Ran(2)",
    "Exec: NotHeld(1)",
    "ExecAll: NotHeld(1)",
    "ExecAll: NotHeld(2)",
    "ExecAll: Ran(1)",
    "LockAll: Tokens(1)",
    "LockAll: Tokens(2)",
    "LockAll: BlockedAt(1)",
    "LockAll: BlockedAt(2)",
    "LockAll: Refused(NoExpiry { key: Lock1 })",
    "LockAll: WrongType(Lock, zset)",
    "LockAll: WrongType(Fence1, non-integer string)",
    "LockAll: WrongType(Intent1, hash)",
    "Lock@1: Token",
    "Lock@1: Blocked",
    "RLock@1: Token",
    "RLock@1: Blocked",
    "Unlock@1: Int(3)",
    "Renew@1: Renewed(1)",
    "Exec: Failed { command: 2 }",
    "ForceUnlock: Int(2)",
    "ForceUnlock: Int(3)",
    "ForceUnlock: WrongType(Lock, hash)",
    "Leader: Leader(true, true)",
    "Inspect: Inspected(string, queue true)",
    "Inspect: Inspected(set, queue true)",
    "Inspect: Inspected(zset, queue false)",
    "Inspect: WrongType(Lock, zset)",
    "Inspect: Refused(NoExpiry { key: Lock })",
    "Proclaim: Int(3)",
    "Downgrade: Int(1)",
    "Downgrade: Int(3)",
    "Fence: Int(1)",
    "Fence: WrongType(Granted, exhausted counter)",
    "Retake: Int(0)",
    "Retake: Int(1)",
    "GoWrite: Nil",
    "GoWrite: Int(pttl)",
    "GoRead: Nil",
    "GoRead: ScriptError",
    "GoRefresh: Int(1)",
    "GoUnlock: Int(1)",
    "Upgradable: Token",
    "Upgradable: Blocked",
    "Upgradable: WrongType(Upgrader, hash)",
    "UpgradeWait: Token",
    "UpgradeWait: Blocked",
    "UpgradeWait: Int(0)",
    "UpgradeWait: Refused(Reader)",
    "UpgradeTry: Token",
    "UpgradeTry: Blocked",
    "UpgradePlain: Int(1)",
    "UpgradePlain: Int(0)",
    "UnlockUpgradable: Int(2)",
    "UnlockUpgradable: Int(3)",
    "RenewUpgradable: Renewed(1)",
    "AttachWrite: Int(1)",
    "AttachWrite: NotHeld(1)",
    "AttachRead: Int(1)",
    "AttachRead: NotHeld(1)",
    "AttachPermit: Int(1)",
    "AttachPermit: NotHeld(1)",
    "AttachAll: Int(1)",
    "AttachAll: NotHeld(1)",
    "AttachAll: NotHeld(2)",
    "Attach: a key of another type",
    "Attach: a permit run out",
    "Describe: Int(0)",
    "Describe: Int(1)",
    "DescribeAll: Int(2)",
];

/// Sequences per thread of [`model_and_server_agree`].
const CI_CASES: u32 = 1500;

/// Runs `cases` sequences on each of `threads` connections to one server, each thread
/// with its own seed (`seed + thread`); what they did, summed.
fn on_threads(threads: u64, cases: u32, seed: u64) -> Run {
    let server = RedisServer::start();
    let scripts = Scripts::from_dir();
    std::thread::scope(|scope| {
        let runs: Vec<_> = (0..threads)
            .map(|t| {
                let (server, scripts) = (&server, &scripts);
                scope.spawn(move || {
                    let mut conn = server.client().get_connection().expect("connect");
                    check_counted(&mut conn, scripts, cases, seed + t)
                })
            })
            .collect();
        let mut total = Run::default();
        for run in runs {
            let run = run
                .join()
                .expect("thread")
                .unwrap_or_else(|err| panic!("{err}"));
            total.steps += run.steps;
            total.stalled += run.stalled;
            for (outcome, n) in run.seen {
                *total.seen.entry(outcome).or_default() += n;
            }
        }
        total
    })
}

#[test]
fn model_and_server_agree() {
    let started = Instant::now();
    let run = on_threads(2, CI_CASES, 40);
    let steps = run.steps;
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "differential: {} sequences, {steps} steps in {secs:.1} s ({:.0} steps/s)",
        2 * CI_CASES,
        steps as f64 / secs
    );
    assert!(steps >= u64::from(CI_CASES) * 2 * 10, "{steps} steps");
    let seen = &run.seen;
    if std::env::var_os("MODEL_TALLY").is_some() {
        for (outcome, n) in seen {
            eprintln!("{n:8} {outcome}");
        }
    }
    let missing: Vec<&str> = REACHED
        .iter()
        .copied()
        .filter(|outcome| !seen.contains_key(*outcome))
        .collect();
    assert!(missing.is_empty(), "no step replied {missing:?}");
}

/// `MODEL_CASES` sequences (default 200000) per thread, two threads; `MODEL_SEED` picks
/// the seed (default: the time).
#[test]
#[ignore = "long: cargo test --test model -- --ignored model_and_server_agree_long"]
fn model_and_server_agree_long() {
    let cases = std::env::var("MODEL_CASES").map_or(200_000, |n| n.parse().expect("MODEL_CASES"));
    let seed = std::env::var("MODEL_SEED").map_or_else(
        |_| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("after 1970")
                .as_secs()
        },
        |s| s.parse().expect("MODEL_SEED"),
    );
    eprintln!("differential: seed {seed}, {cases} sequences per thread");
    let started = Instant::now();
    let run = on_threads(2, cases, seed);
    eprintln!(
        "differential: {} steps in {:.1} s ({} sequences ended early)",
        run.steps,
        started.elapsed().as_secs_f64(),
        run.stalled
    );
}

/// The check can fail: unlock.lua without its id check releases another writer's lock,
/// which the model does not.
#[test]
fn a_script_that_differs_is_caught() {
    let mutated = Scripts::from_dir()
        .mutated(
            "unlock.lua",
            "redis.pcall('GET', KEYS[1]) == ARGV[1]",
            "redis.pcall('GET', KEYS[1])",
        )
        .expect("the id check is in unlock.lua once");
    let err = check(&mutated, 2000, 1).expect_err("a mutated unlock.lua is caught");
    assert!(err.contains("Unlock"), "{err}");
}
