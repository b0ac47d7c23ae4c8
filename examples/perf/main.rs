//! The side-by-side performance runner: every figure of the library next to a raw
//! redis-rs baseline measured in the same run, printed as one markdown table.
//!
//! Run with `cargo run --release --example perf`. It starts its own `redis-server`s
//! from PATH on free loopback ports (a fresh one for each row that counts commands or
//! memory, and three for the quorum rows 10–13) and re-executes itself as the second
//! process of the cross-process hand-offs and for each idle-guard run. It takes about
//! 3 minutes on 2 cores. Modes that run alone:
//! - `cargo run --release --example perf -- quorum`: rows 10–13 (about 30 s);
//! - `cargo run --release --example perf -- silent`: row 8c (about 25 s);
//! - `cargo run --release --example perf -- waiting`: rows 8a, 8b and 8c, the waiting
//!   rows (about 40 s);
//! - `cargo run --release --example perf -- throughput`: rows 1–5 (about 25 s);
//! - `cargo run --release --example perf -- guards`: row 9 (about a minute);
//! - `cargo run --release --example perf -- sets`: row 16 (about 40 s);
//! - `cargo run --release --example perf -- holders`: row 18, holder identity's cost
//!   (descriptions off and on, alternating: the write cycle and 100,000 idle renewals;
//!   about 2 minutes; not in the full run);
//! - `cargo run --release --example perf -- set-limit [N ...]`: row 17, one
//!   `lua/lock_all.lua` call for sets of N keys (by default 100 to 100,000), sent by
//!   redis-rs itself past `MAX_SET_KEYS`, on a server of its own (about 30 s; 400,000
//!   keys take a minute more);
//! - `cargo run --release --example perf -- million`: row 15, one child process holding
//!   1,000,000 write guards with a TTL of 30 s on a server of its own, with no
//!   `maxmemory` (the server needs about 350 MB, and the client about 1.5 GB at 1.4 KB a
//!   guard); 1–3 minutes.
//!
//! Rows: 1 one task's write and read cycles; 2–5 32 tasks (own keys; readers on one
//! key; the fenced floor, with no library; 4b the fenced read floor, with no library;
//! the crate's scripts as bare EVALSHA), row 2 also as a ratio to the fenced floor of
//! row 4, row 3 to the fenced read floor of row 4b; 6 the hand-off across two processes; 7
//! eight workers on one key; 8 one waiter behind a live holder, 8c behind a holder that
//! publishes nothing (Go's scripts), with a notifier and without; 9 idle guards (10k and
//! 100k at a TTL of 4 s, 100k at 12 s: client and server memory and CPU, renewals, lock
//! keys left once dropped, see `guards/`); 10–13 quorum mode (below); 14 heap
//! allocations per cycle (`allocations.rs`; the runner's global allocator counts them,
//! `benches/support/counting.rs`); 15 (`-- million`) as row 9
//! for a million guards; 16 sets of 1, 2, 8 and 32 keys by `lock_all`, beside the same
//! keys one by one and a raw multi-key cycle (one all-or-none `SET PX` script, one
//! compare-and-delete script over the keys); 17 (`-- set-limit`) how long one
//! `lock_all.lua` holds the server for large sets. The counting allocator is this
//! program's for every row: its atomic additions on each allocation are paid by the
//! library and the raw baselines alike.
//!
//! Raw baselines:
//! - a raw write cycle is `SET key id NX PX ttl`, then a compare-and-delete script sent
//!   as EVALSHA (`redis::Script`);
//! - a raw waiter subscribes to `<key>:released`, tries `SET NX`, and on failure waits
//!   for a message (the raw holder releases with compare, delete and `PUBLISH`);
//! - a raw quorum write cycle (`benches/raw.rs`) sends the same Redis work a quorum lock
//!   needs to every node at once, in three rounds, each node's call bounded by ttl/10:
//!   `SET key id NX PX ttl` + `INCR key:fence` pipelined, decided at a majority of
//!   `SET`s; `SET key:fence <largest token> PX <24 h>`, decided at a majority; the
//!   compare-and-delete script, waiting for every node;
//! - a raw quorum waiter subscribes to `<key>:released` on every node, tries the raw
//!   quorum acquire, and on failure waits for a message from any node (the raw holder
//!   releases with compare, delete and `PUBLISH` on every node).
//!
//! The quorum rows compare the quorum both with its raw baseline and with the library
//! on the first node alone, measured in the same phases: 10 one task, 11 32 tasks, 12 the
//! hand-off, 13 one node of three frozen by SIGSTOP (the latency of an acquire, an
//! unlock, a `try_write` that finds the lock held, and an in-process hand-off, each
//! beside the same with every node up).
//!
//! Command counts come from `INFO commandstats` deltas, which count the commands a
//! script calls as well as the EVALSHA that ran it; the INFO calls themselves are left
//! out. Throughput rows run each workload in several short phases, interleaved with its
//! baseline, and report the medians, so a slow moment hits both sides alike.
//!
//! One module a row or group of rows: `throughput/` (1–5), `handoff/` (6, and the waiting
//! process of 6 and 12), `contention.rs` (7), `idle_waiter.rs` (8), `silent_holder.rs` (8c), `guards/` (9 and 15),
//! `quorum/` (10–13), `allocations.rs` (14), `sets/` (16 and 17); beside them what rows share: `table.rs` (the
//! rows and how figures are written), `header.rs`, `commands.rs` (`INFO commandstats`),
//! `locking.rs` (the raw waits and releases, the library's checked unlock) and `proc.rs`.

#[path = "../../tests/common/server.rs"]
#[allow(dead_code, unreachable_pub)]
mod server;

#[path = "../../benches/raw.rs"]
#[allow(dead_code, unreachable_pub)]
mod raw;

#[path = "../../benches/support/counting.rs"]
#[allow(dead_code, unreachable_pub)]
mod counting;

#[path = "../../benches/support/cycles.rs"]
#[allow(dead_code, unreachable_pub)]
mod cycles;

#[path = "../../tests/common/go_peer.rs"]
#[allow(dead_code, unreachable_pub)]
mod go_peer;

#[path = "../../tests/common/scripts.rs"]
#[allow(dead_code, unreachable_pub)]
mod scripts;

mod allocations;
mod commands;
mod contention;
mod guards;
mod handoff;
mod header;
mod holders;
mod idle_waiter;
mod locking;
mod proc;
mod quorum;
mod sets;
mod silent_holder;
mod table;
mod throughput;

use std::time::Duration;

use contention::WORKERS;
use server::RedisServer;
use table::{chain, push_rows, Row};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Result<T, E = BoxError> = std::result::Result<T, E>;

/// The first argument that makes this program a child process: `--peer handoff MODE
/// URLS KEY` is the waiting process B of rows 6 and 12 (URLS comma-separated: one
/// server, or a quorum's), `--peer guards N TTL_MS IN_FLIGHT` measures one run of rows 9
/// and 15 in a process of its own (so no memory freed by earlier rows is reused).
const PEER_ARG: &str = "--peer";

/// Which rows a run prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Rows 1–14 and 16.
    All,
    /// Rows 10–13 alone (`-- quorum`).
    Quorum,
    /// Row 15 alone (`-- million`).
    Million,
    /// Row 8c alone (`-- silent`).
    Silent,
    /// Rows 8a, 8b and 8c (`-- waiting`).
    Waiting,
    /// Rows 1–5 alone (`-- throughput`).
    Throughput,
    /// Row 9 alone (`-- guards`).
    Guards,
    /// Row 16 alone (`-- sets`).
    Sets,
    /// Row 17 alone (`-- set-limit [N ...]`).
    SetLimit,
    /// Row 18 alone (`-- holders`).
    Holders,
}

impl Mode {
    /// The mode of the runner's first argument.
    fn parse(arg: Option<&str>) -> Result<Self> {
        match arg {
            None => Ok(Self::All),
            Some("quorum") => Ok(Self::Quorum),
            Some("million") => Ok(Self::Million),
            Some("silent") => Ok(Self::Silent),
            Some("waiting") => Ok(Self::Waiting),
            Some("throughput") => Ok(Self::Throughput),
            Some("guards") => Ok(Self::Guards),
            Some("sets") => Ok(Self::Sets),
            Some("set-limit") => Ok(Self::SetLimit),
            Some("holders") => Ok(Self::Holders),
            Some(other) => Err(format!("unknown argument {other:?}").into()),
        }
    }

    /// The arguments that reproduce the run.
    fn args(self) -> &'static str {
        match self {
            Self::All => "",
            Self::Quorum => " -- quorum",
            Self::Million => " -- million",
            Self::Silent => " -- silent",
            Self::Waiting => " -- waiting",
            Self::Throughput => " -- throughput",
            Self::Guards => " -- guards",
            Self::Sets => " -- sets",
            Self::SetLimit => " -- set-limit",
            Self::Holders => " -- holders",
        }
    }
}

/// The lock TTL everywhere (the library's default), and the PX of raw locks.
const TTL: Duration = Duration::from_secs(4);
const TTL_MS: u64 = 4000;
/// The fence retention passed to `lua/lock.lua` (the library's default, 24 h).
const FENCE_MS: u64 = 24 * 3600 * 1000;
/// Concurrent tasks in rows 2–5 and 11.
const TASKS: usize = 32;

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let run = || -> Result<()> {
        let runtime = tokio::runtime::Runtime::new()?;
        if args.get(1).map(String::as_str) != Some(PEER_ARG) {
            let mode = Mode::parse(args.get(1).map(String::as_str))?;
            return runtime.block_on(run(mode, &args[args.len().min(2)..]));
        }
        let [role, a, b, c] = [2, 3, 4, 5].map(|i| args.get(i).cloned().unwrap_or_default());
        match role.as_str() {
            "handoff" => runtime.block_on(handoff::peer(&a, &b, &c)),
            guards::ROLE => runtime.block_on(guards::peer(&args[3..])),
            _ => Err(format!("unknown peer role {role:?}").into()),
        }
    };
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {}", chain(&*err));
            std::process::ExitCode::FAILURE
        }
    }
}

/// Measures the rows of `mode` and prints them as one table; `rest` is the command
/// line after the mode (the set sizes of `-- set-limit`).
async fn run(mode: Mode, rest: &[String]) -> Result<()> {
    let header = header::header();
    eprintln!("{header}");
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    match mode {
        Mode::All => {
            single_server_rows(&mut rows, &mut notes).await?;
            quorum::rows(&mut rows, &mut notes).await;
            eprintln!("row 14: allocations per cycle ...");
            let made = allocations::row().await.map(|row| vec![row]);
            push_rows(&mut rows, "14", "allocations per cycle", made);
        }
        Mode::Quorum => quorum::rows(&mut rows, &mut notes).await,
        Mode::Million => guards::rows(&[guards::MILLION], &mut rows, &mut notes).await,
        Mode::Guards => guards::rows(&guards::ROW_9, &mut rows, &mut notes).await,
        Mode::Silent => {
            let made = silent_holder::row(&mut notes).await.map(|row| vec![row]);
            push_rows(
                &mut rows,
                "8c",
                "one waiter behind a holder that publishes nothing",
                made,
            );
        }
        Mode::Waiting => {
            let made = idle_waiter::rows(&mut notes).await;
            push_rows(&mut rows, "8", "one waiter behind a live holder", made);
            let made = silent_holder::row(&mut notes).await.map(|row| vec![row]);
            push_rows(
                &mut rows,
                "8c",
                "one waiter behind a holder that publishes nothing",
                made,
            );
        }
        Mode::Throughput => {
            let server = RedisServer::try_start()?;
            push_rows(
                &mut rows,
                "1-5",
                "throughput",
                throughput::rows(&server).await,
            );
        }
        Mode::Sets => {
            let server = RedisServer::try_start()?;
            push_rows(&mut rows, "16", "sets", sets::rows(&server).await);
        }
        Mode::Holders => {
            let server = RedisServer::try_start()?;
            let made = holders::rows(&server, &mut notes).await;
            push_rows(&mut rows, "18", "holder identity", made);
        }
        Mode::SetLimit => {
            let sizes = if rest.is_empty() {
                sets::LIMIT_SIZES.to_vec()
            } else {
                rest.iter()
                    .map(|n| {
                        n.parse::<usize>()
                            .map_err(|err| format!("size {n:?}: {err}"))
                    })
                    .collect::<Result<Vec<_>, _>>()?
            };
            if sizes.contains(&0) {
                return Err("a set has at least one key".into());
            }
            let made = sets::limit_rows(&sizes, &mut notes).await;
            push_rows(&mut rows, "17", "one lock_all.lua for large sets", made);
        }
    }
    table::print(&header, &rows, &notes, mode.args());
    Ok(())
}

/// Rows 1–9 and 16: one server.
async fn single_server_rows(rows: &mut Vec<Row>, notes: &mut Vec<String>) -> Result<()> {
    let main_server = RedisServer::try_start()?;
    eprintln!("rows 1-5: throughput ...");
    let made = throughput::rows(&main_server).await;
    push_rows(rows, "1-5", "throughput", made);
    eprintln!("row 16: sets ...");
    let made = sets::rows(&main_server).await;
    push_rows(rows, "16", "sets", made);
    eprintln!("row 6: hand-off across two processes ...");
    let made = handoff::row(&main_server).await.map(|row| vec![row]);
    push_rows(rows, "6", "hand-off across two processes", made);
    drop(main_server);

    eprintln!("row 7: {WORKERS} workers on one key ...");
    let made = contention::row(notes).await.map(|row| vec![row]);
    push_rows(rows, "7", "workers on one key", made);
    eprintln!("row 8: one waiter behind a live holder ...");
    let made = idle_waiter::rows(notes).await;
    push_rows(rows, "8", "one waiter behind a live holder", made);
    eprintln!("row 8c: one waiter behind a holder that publishes nothing ...");
    let made = silent_holder::row(notes).await.map(|row| vec![row]);
    push_rows(
        rows,
        "8c",
        "one waiter behind a holder that publishes nothing",
        made,
    );
    guards::rows(&guards::ROW_9, rows, notes).await;
    Ok(())
}
