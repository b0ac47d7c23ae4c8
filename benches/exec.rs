//! Guarded pipelines (`WriteGuard::exec`) beside the same pipeline sent bare
//! (`Pipeline::query_async`), against one harness-started redis-server, in the same run,
//! so results read as a ratio exec / bare for each size of pipeline.
//!
//! A write guard is held across every iteration (both arms run with it and its refresher).
//! The pipelines are cache writes: a `SET` of a 200-byte body and an increment of its
//! version (redis-rs's `incr`, sent as `INCRBY`).
//!
//! - `exec_1`: `SET cache:k <body>` (one command: the fixed cost);
//! - `exec_2`: `SET cache:k <body>` ignored + `INCRBY cache:k:version 1`;
//! - `exec_10`: five such pairs on five keys (the cost per command, against `exec_2`);
//!
//! each with `bare` (`pipe.query_async(&mut conn)`, one round trip) and `exec`
//! (`guard.exec(&pipe)`: one `EVALSHA` of `exec.lua` in steady state; the command names'
//! `COMMAND INFO` is asked once, before measuring). `exec_tasks32` runs the 2-command
//! pipeline in 32 tasks sharing the connection, each under its own write guard on its own
//! keys; one iteration is one pipeline per task.
//!
//! Two parts, as the machine's speed drifts between criterion's benchmarks more than the
//! difference looked for:
//!
//! - criterion's groups `exec_1`, `exec_2`, `exec_10` and `exec_tasks32`, each with
//!   `bare` and `exec`;
//! - then [`ROUNDS`] alternating rounds of [`CALLS`] calls of each case (the order of
//!   `bare` and `exec` swapped from round to round); each round gives the ratio exec /
//!   bare of its two blocks for each pipeline, and the median and spread of those ratios
//!   are printed: the figure of `docs/performance.md`.
//!
//! Before measuring, the bench asserts from `INFO commandstats` that a steady-state `exec`
//! sends one `EVALSHA` and no `COMMAND` or `EVAL`. `cargo bench --bench exec` measures;
//! `-- --test`, and `cargo test --benches` (which runs it without `--bench`), run each
//! benchmark once and a few short rounds.

#[path = "../tests/common/server.rs"]
#[allow(dead_code, unreachable_pub)]
mod server;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::Criterion;
use redis::aio::MultiplexedConnection;
use redis::{FromRedisValue, Pipeline};
use redismutex::{RwMutex, WriteGuard};
use tokio::runtime::Runtime;
use tokio::task::JoinSet;

/// Length of the cached body.
const BODY_LEN: usize = 200;
/// Tasks sharing one connection in `exec_tasks32`.
const TASKS: usize = 32;
/// Calls of each pipeline in the round-trip check.
const CHECKED_CALLS: u64 = 50;
/// The alternating rounds, and the calls of each case per round (for `exec_tasks32`,
/// calls per task): measured, quick.
const ROUNDS: (usize, usize) = (40, 2);
const CALLS: (u64, u64) = (200, 2);

/// A JSON-like body of [`BODY_LEN`] bytes.
fn body() -> String {
    let mut body = String::from("{\"name\":\"Ada Lovelace\",\"bio\":\"");
    while body.len() < BODY_LEN - 2 {
        body.push('x');
    }
    body.push_str("\"}");
    body
}

/// `SET <prefix>:<i> <body>` for each of `entries`, and with `version` its ignored reply
/// followed by `INCRBY <prefix>:<i>:version 1`.
fn cache_write(prefix: &str, entries: usize, version: bool) -> Pipeline {
    let body = body();
    let mut pipe = redis::pipe();
    for entry in 0..entries {
        let key = format!("{prefix}:{entry}");
        if version {
            pipe.set(&key, &body).ignore();
            pipe.incr(format!("{key}:version"), 1);
        } else {
            pipe.set(&key, &body);
        }
    }
    pipe
}

/// The calls `INFO commandstats` counts, by command name (`evalsha`, `command|info`, ...).
async fn command_calls(conn: &mut MultiplexedConnection) -> HashMap<String, u64> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .expect("INFO commandstats");
    info.lines()
        .filter_map(|line| {
            let (name, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = stats.split(',').find_map(|s| s.strip_prefix("calls="))?;
            Some((name.to_owned(), calls.parse().ok()?))
        })
        .collect()
}

/// The calls made between `before` and `after` of the command `name` and its
/// subcommands (`command` counts `command|info` and `command|getkeys`).
fn made(before: &HashMap<String, u64>, after: &HashMap<String, u64>, name: &str) -> u64 {
    let sum = |stats: &HashMap<String, u64>| -> u64 {
        stats
            .iter()
            .filter(|(counted, _)| {
                counted.as_str() == name
                    || counted
                        .strip_prefix(name)
                        .is_some_and(|rest| rest.starts_with('|'))
            })
            .map(|(_, calls)| calls)
            .sum()
    };
    sum(after) - sum(before)
}

/// Runs each pipeline through `guard.exec` once (the command names' `COMMAND INFO`, and
/// `EVAL` if the script was not loaded), then asserts that [`CHECKED_CALLS`] more calls
/// of each send one `EVALSHA` each and nothing else of the crate's.
async fn check_round_trips(
    conn: &mut MultiplexedConnection,
    guard: &WriteGuard,
    pipes: &[Pipeline],
) {
    for pipe in pipes {
        let _: redis::Value = guard.exec(pipe).await.expect("first exec");
    }
    let before = command_calls(conn).await;
    for pipe in pipes {
        for _ in 0..CHECKED_CALLS {
            let _: redis::Value = guard.exec(pipe).await.expect("exec");
        }
    }
    let after = command_calls(conn).await;
    let calls = CHECKED_CALLS * pipes.len() as u64;
    // The refresher may renew the guard (one EVALSHA) meanwhile.
    let evalsha = made(&before, &after, "evalsha");
    assert!(
        (calls..=calls + 1).contains(&evalsha),
        "{calls} exec calls sent {evalsha} EVALSHA"
    );
    assert_eq!(
        made(&before, &after, "command"),
        0,
        "COMMAND in steady state"
    );
    assert_eq!(made(&before, &after, "eval"), 0, "EVAL in steady state");
}

/// One pipeline measured both ways.
struct Case {
    /// The criterion group and the name in the rounds' report.
    name: &'static str,
    pipe: Pipeline,
    /// Runs `calls` of the pipeline, bare or through the guard, and returns how long
    /// they took.
    run: fn(&Subjects, &Pipeline, u64, bool) -> futures_util::future::BoxFuture<'static, Duration>,
}

/// What the cases run on: one connection, a write guard held on it, and the 32 tasks'
/// guards and pipelines.
#[derive(Clone)]
struct Subjects {
    conn: MultiplexedConnection,
    guard: Arc<WriteGuard>,
    jobs: Arc<Vec<(Arc<WriteGuard>, Arc<Pipeline>)>>,
}

/// `calls` runs of `pipe`, one after the other, bare or through the guard, its replies
/// parsed as `T` by both.
async fn sequential<T: FromRedisValue>(
    subjects: Subjects,
    pipe: Pipeline,
    calls: u64,
    exec: bool,
) -> Duration {
    let mut conn = subjects.conn.clone();
    let start = Instant::now();
    for _ in 0..calls {
        let replies: T = if exec {
            subjects.guard.exec(&pipe).await.expect("exec")
        } else {
            pipe.query_async(&mut conn).await.expect("pipeline")
        };
        std::hint::black_box(replies);
    }
    start.elapsed()
}

/// `calls` runs of each task's pipeline in each of [`TASKS`] tasks concurrently, bare or
/// through its guard (the pipeline argument is unused: each task has its own).
async fn tasks(subjects: Subjects, _: Pipeline, calls: u64, exec: bool) -> Duration {
    let start = Instant::now();
    let mut set = JoinSet::new();
    for (guard, pipe) in subjects.jobs.iter() {
        let (mut conn, guard, pipe) = (subjects.conn.clone(), Arc::clone(guard), Arc::clone(pipe));
        set.spawn(async move {
            for _ in 0..calls {
                let (version,): (i64,) = if exec {
                    guard.exec(&pipe).await.expect("exec")
                } else {
                    pipe.query_async(&mut conn).await.expect("pipeline")
                };
                assert!(version > 0);
            }
        });
    }
    set.join_all().await;
    start.elapsed()
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "exec_1",
            pipe: cache_write("cache:one", 1, false),
            run: |s, p, n, e| Box::pin(sequential::<()>(s.clone(), p.clone(), n, e)),
        },
        Case {
            name: "exec_2",
            pipe: cache_write("cache:two", 1, true),
            run: |s, p, n, e| Box::pin(sequential::<(i64,)>(s.clone(), p.clone(), n, e)),
        },
        Case {
            name: "exec_10",
            pipe: cache_write("cache:ten", 5, true),
            run: |s, p, n, e| Box::pin(sequential::<Vec<i64>>(s.clone(), p.clone(), n, e)),
        },
        Case {
            name: "exec_tasks32",
            pipe: redis::pipe(),
            run: |s, p, n, e| Box::pin(tasks(s.clone(), p.clone(), n, e)),
        },
    ]
}

fn criterion_groups(c: &mut Criterion, runtime: &Runtime, subjects: &Subjects, cases: &[Case]) {
    for case in cases {
        let mut group = c.benchmark_group(case.name);
        for (name, exec) in [("bare", false), ("exec", true)] {
            group.bench_function(name, |b| {
                b.to_async(runtime)
                    .iter_custom(|iters| (case.run)(subjects, &case.pipe, iters, exec))
            });
        }
        group.finish();
    }
}

/// The `q` quantile of `values` (sorted here), by the nearest rank.
fn quantile(values: &[f64], q: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[rank]
}

/// `rounds` rounds of `calls` calls of each case both ways, bare first in even rounds
/// and exec first in odd ones; prints each case's median µs per call and the spread of
/// the rounds' ratios exec / bare.
fn alternate(runtime: &Runtime, subjects: &Subjects, cases: &[Case], rounds: usize, calls: u64) {
    let mut times: Vec<[Vec<f64>; 2]> = cases.iter().map(|_| Default::default()).collect();
    for round in 0..rounds {
        for (case, times) in cases.iter().zip(&mut times) {
            for at in 0..2 {
                let exec = (round + at) % 2 == 1;
                let took = runtime.block_on((case.run)(subjects, &case.pipe, calls, exec));
                times[usize::from(exec)].push(took.as_secs_f64() * 1e6 / calls as f64);
            }
        }
    }
    println!();
    println!(
        "{rounds} alternating rounds of {calls} calls of each case (µs per call, median; \
         exec_tasks32: per call of all {TASKS} tasks):"
    );
    for (case, [bare, exec]) in cases.iter().zip(&times) {
        let ratios: Vec<f64> = exec.iter().zip(bare).map(|(e, b)| e / b).collect();
        println!(
            "  {:<13} bare {:7.1}  exec {:7.1}  exec / bare: median {:.3}, p25–p75 {:.3}–{:.3}, min–max {:.3}–{:.3}",
            case.name,
            quantile(bare, 0.5),
            quantile(exec, 0.5),
            quantile(&ratios, 0.5),
            quantile(&ratios, 0.25),
            quantile(&ratios, 0.75),
            quantile(&ratios, 0.0),
            quantile(&ratios, 1.0),
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|arg| arg == "--test") || !args.iter().any(|arg| arg == "--bench");
    let (rounds, calls) = if quick {
        (ROUNDS.1, CALLS.1)
    } else {
        (ROUNDS.0, CALLS.0)
    };
    let runtime = Runtime::new().expect("tokio runtime");
    let server = server::RedisServer::start();
    let mut conn = runtime.block_on(server.conn());
    let mx = RwMutex::new(conn.clone(), "bench-exec");
    let cases = cases();
    let sizes: Vec<usize> = cases.iter().map(|case| case.pipe.len()).collect();
    assert_eq!(sizes, [1, 2, 10, 0]);
    let checked: Vec<Pipeline> = cases[..3].iter().map(|case| case.pipe.clone()).collect();
    let (guard, jobs) = runtime.block_on(async {
        // Checked while this guard is the only one, so that at most one renewal runs.
        let guard = mx.write().key("k").await.expect("write");
        check_round_trips(&mut conn, &guard, &checked).await;
        let mut jobs = Vec::new();
        for task in 0..TASKS {
            let guard = mx.write().key(format!("task{task}")).await.expect("write");
            let pipe = cache_write(&format!("cache:task{task}"), 1, true);
            let _: (i64,) = guard.exec(&pipe).await.expect("first exec");
            jobs.push((Arc::new(guard), Arc::new(pipe)));
        }
        (guard, jobs)
    });
    let subjects = Subjects {
        conn: conn.clone(),
        guard: Arc::new(guard),
        jobs: Arc::new(jobs),
    };

    let mut criterion = Criterion::default().configure_from_args();
    criterion_groups(&mut criterion, &runtime, &subjects, &cases);
    criterion.final_summary();

    alternate(&runtime, &subjects, &cases, rounds, calls);
}
