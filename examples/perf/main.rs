//! The side-by-side performance runner: every figure of the library next to a raw
//! redis-rs baseline measured in the same run, printed as one markdown table.
//!
//! Run with `cargo run --release --example perf`. It starts its own `redis-server`s
//! from PATH on free loopback ports (a fresh one for each row that counts commands or
//! memory, and three for the quorum rows 10–13) and re-executes itself as the second
//! process of the cross-process hand-offs and for each idle-guard run. It takes about
//! 2 minutes on 2 cores. Modes that run alone:
//! - `cargo run --release --example perf -- quorum`: rows 10–13 (about 30 s);
//! - `cargo run --release --example perf -- million`: row 15, one child process holding
//!   1,000,000 write guards with a TTL of 30 s on a server of its own, with no
//!   `maxmemory` (the server needs about 350 MB, and the client about 1.5 GB at 1.4 KB a
//!   guard); 1–3 minutes.
//!
//! Rows: 1 one task's write and read cycles; 2–5 32 tasks (own keys; readers on one
//! key; the fenced floor, with no library; the crate's scripts as bare EVALSHA), row 2
//! also as a ratio to the fenced floor of row 4; 6 the hand-off across two processes; 7
//! eight workers on one key; 8 one waiter behind a live holder; 9 idle guards (10k and
//! 100k at a TTL of 4 s, 100k at 12 s: client and server memory and CPU, renewals, lock
//! keys left once dropped, see `guards/`); 10–13 quorum mode (below); 14
//! heap allocations per cycle (`allocations.rs`; the runner's global
//! allocator counts them, `benches/support/counting.rs`); 15 (`-- million`) as row 9
//! for a million guards. The counting allocator is this program's for every row: its
//! atomic additions on each allocation are paid by the library and the raw baselines
//! alike.
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

mod allocations;
mod guards;
mod proc;

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::stream::{select_all, SelectAll};
use futures_util::{FutureExt, Stream, StreamExt};
use proc::Process;
use raw::{
    raw_id, raw_majority, raw_quorum_acquire, raw_quorum_release, raw_set, RELEASE, RELEASE_PUBLISH,
};
use redis::aio::{MultiplexedConnection, PubSubStream};
use redis::{Script, ScriptInvocation, Value};
use redismutex::{Guard, Notifier, Quorum, RwMutex};
use server::RedisServer;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::task::JoinSet;

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
    /// Rows 1–14.
    All,
    /// Rows 10–13 alone (`-- quorum`).
    Quorum,
    /// Row 15 alone (`-- million`).
    Million,
}

impl Mode {
    /// The mode of the runner's first argument.
    fn parse(arg: Option<&str>) -> Result<Self> {
        match arg {
            None => Ok(Self::All),
            Some("quorum") => Ok(Self::Quorum),
            Some("million") => Ok(Self::Million),
            Some(other) => Err(format!("unknown argument {other:?}").into()),
        }
    }

    /// The arguments that reproduce the run.
    fn args(self) -> &'static str {
        match self {
            Self::All => "",
            Self::Quorum => " -- quorum",
            Self::Million => " -- million",
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
/// Throughput: phases per workload, each this long, interleaved with the baseline.
const ROUNDS: usize = 5;
const PHASE: Duration = Duration::from_millis(500);
const WARM_UP: Duration = Duration::from_millis(200);
/// Rows 6 and 12: hand-offs measured, after a few unmeasured ones; B's blocked time
/// before A releases (not counted).
const HANDOFFS: usize = 200;
const HANDOFF_WARM_UP: usize = 10;
const BLOCKED: Duration = Duration::from_millis(5);
/// Row 7: workers, how long each holds the lock, how long the run lasts.
const WORKERS: usize = 8;
const HOLD: Duration = Duration::from_micros(200);
const CONTENDED_FOR: Duration = Duration::from_secs(3);
/// Row 8: how long the waiter waits, and how often the raw holder renews its key.
const IDLE_WAIT: Duration = Duration::from_secs(2);
const HOLDER_RENEW: Duration = Duration::from_millis(500);
/// The crate's own scripts, sent bare in row 5, after `base.lua` (and `shared.lua`) as the
/// crate sends them.
static LOCK_LUA: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("../../lua/base.lua"),
        "\n",
        include_str!("../../lua/shared.lua"),
        "\n",
        include_str!("../../lua/lock.lua")
    ))
});
static UNLOCK_LUA: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("../../lua/base.lua"),
        "\n",
        include_str!("../../lua/unlock.lua")
    ))
});

/// `lua/lock.lua` for writer `id` on `key`, with KEYS and ARGV as its header documents
/// them: lock key, intent key, fence key; id, TTL ms, set-intent flag, fence retention ms.
fn lock_lua<'a>(key: &str, id: &str) -> ScriptInvocation<'a> {
    let mut call = LOCK_LUA.key(key);
    call.key(format!("{key}:lock-intent"))
        .key(format!("{key}:fence"))
        .arg(id)
        .arg(TTL_MS)
        .arg("0")
        .arg(FENCE_MS);
    call
}

/// `lua/unlock.lua` for writer `id` on `key`, with KEYS and ARGV as its header documents
/// them: lock key (no intent key); id, release channel, "w" (a writer's id). The reply's
/// bit 1 says that `id` held the lock.
fn unlock_lua<'a>(key: &str, id: &str) -> ScriptInvocation<'a> {
    let mut call = UNLOCK_LUA.key(key);
    call.arg(id).arg(format!("{key}:released")).arg("w");
    call
}

/// Releases `key` held by `id` with `script`; an error if `id` did not hold it.
async fn raw_release(
    conn: &mut MultiplexedConnection,
    script: &Script,
    key: &str,
    id: &str,
) -> Result<()> {
    let released: i64 = script.key(key).arg(id).invoke_async(conn).await?;
    if released != 1 {
        return Err(format!("{key} was not held by {id}").into());
    }
    Ok(())
}

/// A subscription to `<key>:released`, for a raw waiter.
async fn raw_subscribe(client: &redis::Client, key: &str) -> Result<PubSubStream> {
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub.subscribe(format!("{key}:released")).await?;
    Ok(pubsub.into_on_message())
}

/// The raw waiter: `SET NX` until it succeeds, waiting for a release message after
/// each failure. The subscription is made before the first `SET`, so no release is
/// missed; the timeout only bounds the wait on a holder that dies without publishing.
async fn raw_wait(
    conn: &mut MultiplexedConnection,
    messages: &mut (impl Stream<Item = redis::Msg> + Unpin),
    key: &str,
    id: &str,
) -> Result<()> {
    while !raw_set(conn, key, id, TTL_MS).await? {
        let _ = tokio::time::timeout(TTL, messages.next()).await;
    }
    Ok(())
}

/// The raw quorum waiter: [`raw_quorum_acquire`] until it succeeds, waiting for a release
/// message from any node after each failure. `messages` merges the subscriptions to
/// `<key>:released` on every node, made before the first attempt; the messages already
/// there (an earlier release publishes on every node, and the first woke the last wait)
/// are dropped first.
async fn raw_quorum_wait(
    nodes: &[MultiplexedConnection],
    messages: &mut (impl Stream<Item = redis::Msg> + Unpin),
    key: &str,
    id: &str,
) -> Result<()> {
    while messages.next().now_or_never().flatten().is_some() {}
    while raw_quorum_acquire(nodes, key, id, TTL_MS, FENCE_MS)
        .await
        .is_none()
    {
        let _ = tokio::time::timeout(TTL, messages.next()).await;
    }
    Ok(())
}

/// Nanoseconds since the Unix epoch, to compare instants across processes.
fn wall_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as i128)
}

/// `err` and its sources, joined by `: `.
fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(err) = source {
        text.push_str(&format!(": {err}"));
        source = err.source();
    }
    text
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let run = || -> Result<()> {
        let runtime = tokio::runtime::Runtime::new()?;
        if args.get(1).map(String::as_str) != Some(PEER_ARG) {
            let mode = Mode::parse(args.get(1).map(String::as_str))?;
            return runtime.block_on(run(mode));
        }
        let [role, a, b, c] = [2, 3, 4, 5].map(|i| args.get(i).cloned().unwrap_or_default());
        match role.as_str() {
            "handoff" => runtime.block_on(peer(&a, &b, &c)),
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

/// One row of the table.
struct Row {
    id: &'static str,
    what: String,
    library: String,
    raw: String,
    ratio: String,
}

impl Row {
    fn new(
        id: &'static str,
        what: impl Into<String>,
        library: String,
        raw: String,
        ratio: String,
    ) -> Self {
        Self {
            id,
            what: what.into(),
            library,
            raw,
            ratio,
        }
    }

    /// The row of a measurement that could not be made.
    fn failed(id: &'static str, what: &str, err: &BoxError) -> Self {
        let err = chain(&**err).replace('|', "/").replace('\n', " ");
        Self::new(id, what, format!("FAILED: {err}"), "—".into(), "—".into())
    }
}

/// Appends the rows `made`, or one failed row `id`/`what` when it is an error.
fn push_rows(rows: &mut Vec<Row>, id: &'static str, what: &str, made: Result<Vec<Row>>) {
    match made {
        Ok(made) => rows.extend(made),
        Err(err) => {
            eprintln!("{id} {what}: {}", chain(&*err));
            rows.push(Row::failed(id, what, &err));
        }
    }
}

async fn run(mode: Mode) -> Result<()> {
    let header = header();
    eprintln!("{header}");
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    match mode {
        Mode::All => {
            single_server_rows(&mut rows, &mut notes).await?;
            quorum_rows(&mut rows, &mut notes).await;
            eprintln!("row 14: allocations per cycle ...");
            let made = allocations::row().await.map(|row| vec![row]);
            push_rows(&mut rows, "14", "allocations per cycle", made);
        }
        Mode::Quorum => quorum_rows(&mut rows, &mut notes).await,
        Mode::Million => guards::rows(&[guards::MILLION], &mut rows, &mut notes).await,
    }

    println!("{header}");
    println!();
    println!("| # | measurement | library | raw baseline (same run) | ratio |");
    println!("|---|---|---|---|---|");
    for row in &rows {
        println!(
            "| {} | {} | {} | {} | {} |",
            row.id, row.what, row.library, row.raw, row.ratio
        );
    }
    println!();
    for note in notes {
        println!("- {note}");
    }
    println!();
    println!(
        "Reproduce: `cargo run --release --example perf{}`",
        mode.args()
    );
    Ok(())
}

/// Rows 1–9: one server.
async fn single_server_rows(rows: &mut Vec<Row>, notes: &mut Vec<String>) -> Result<()> {
    let main_server = RedisServer::try_start()?;
    eprintln!("rows 1-5: throughput ...");
    let made = throughput_rows(&main_server).await;
    push_rows(rows, "1-5", "throughput", made);
    eprintln!("row 6: hand-off across two processes ...");
    let made = handoff_row(&main_server).await.map(|row| vec![row]);
    push_rows(rows, "6", "hand-off across two processes", made);
    drop(main_server);

    eprintln!("row 7: {WORKERS} workers on one key ...");
    let made = contended_row(notes).await.map(|row| vec![row]);
    push_rows(rows, "7", "workers on one key", made);
    eprintln!("row 8: one waiter behind a live holder ...");
    let made = idle_waiter_rows(notes).await;
    push_rows(rows, "8", "one waiter behind a live holder", made);
    guards::rows(&guards::ROW_9, rows, notes).await;
    Ok(())
}

/// nproc, CPU model, `redis-server --version` and the date, on one line.
fn header() -> String {
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|line| line.strip_prefix("model name"))
                .map(|rest| rest.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let output = |program: &str, args: &[&str]| {
        std::process::Command::new(program)
            .args(args)
            .output()
            .ok()
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string())
            .unwrap_or_else(|| format!("({program} not found)"))
    };
    let redis = output("redis-server", &["--version"]);
    let date = output("date", &["-u", "+%Y-%m-%d %H:%M:%S UTC"]);
    let load = std::fs::read_to_string("/proc/loadavg")
        .map(|load| {
            load.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    format!(
        "redismutex perf: nproc {nproc}; CPU {cpu}; {redis}; {date}; load average at start {load}"
    )
}

// ---------------------------------------------------------------- rows 1–5: throughput

/// What the tasks of a throughput phase do, one cycle at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Workload {
    /// `SET NX PX` + compare-and-delete script, each task on its own key.
    Raw,
    /// `write().await` + `unlock()`, each task on its own key.
    Write,
    /// `read().await` + `unlock()`, all tasks on one key.
    Read,
    /// Pipelined `SET NX PX` + `INCR <key>:fence`, then compare-delete-publish.
    Fenced,
    /// Bare EVALSHA of `lua/lock.lua`, then of `lua/unlock.lua`.
    Scripts,
    /// The raw quorum cycle (`raw.rs`): on every node at once, pipelined `SET NX PX` +
    /// `INCR <key>:fence` (decided at a majority), `SET <key>:fence <max> PX` (decided at
    /// a majority), then the compare-and-delete script (every node); each task on its
    /// own key.
    QuorumRaw,
    /// `write().await` + `unlock()` on the quorum mutex, each task on its own key.
    QuorumWrite,
}

/// What every task of a throughput phase shares.
struct Bench {
    conn: MultiplexedConnection,
    mx: RwMutex<MultiplexedConnection>,
    /// Quorum rows: one connection per node (the first is `conn`'s server), shared by
    /// every task, and the mutex over them; empty and `None` elsewhere.
    nodes: Vec<MultiplexedConnection>,
    quorum: Option<RwMutex<Quorum<MultiplexedConnection>>>,
}

impl Workload {
    async fn cycle(
        self,
        bench: &Bench,
        conn: &mut MultiplexedConnection,
        task: usize,
    ) -> Result<()> {
        let id = raw_id(task);
        match self {
            Self::Raw => {
                let key = format!("perf-raw:{task}");
                if !raw_set(conn, &key, &id, TTL_MS).await? {
                    return Err(format!("{key} is taken").into());
                }
                raw_release(conn, &RELEASE, &key, &id).await
            }
            Self::Write => {
                let guard = bench.mx.write().key(task.to_string()).await?;
                check_unlocked(guard).await
            }
            Self::Read => {
                let guard = bench.mx.read().key("shared").await?;
                check_unlocked(guard).await
            }
            Self::Fenced => {
                let key = format!("perf-fenced:{task}");
                let (set, _token): (Option<String>, u64) = redis::pipe()
                    .cmd("SET")
                    .arg(&key)
                    .arg(&id)
                    .arg("NX")
                    .arg("PX")
                    .arg(TTL_MS)
                    .cmd("INCR")
                    .arg(format!("{key}:fence"))
                    .query_async(conn)
                    .await?;
                if set.is_none() {
                    return Err(format!("{key} is taken").into());
                }
                raw_release(conn, &RELEASE_PUBLISH, &key, &id).await
            }
            Self::Scripts => {
                let key = format!("perf-scripts:{task}");
                let reply: Value = lock_lua(&key, &id).invoke_async(conn).await?;
                // A positive integer is the token: acquired.
                let acquired = matches!(reply, Value::Int(token) if token > 0);
                if !acquired {
                    return Err(format!("lock.lua on {key}: {reply:?}").into());
                }
                let released: i64 = unlock_lua(&key, &id).invoke_async(conn).await?;
                if released & 1 != 1 {
                    return Err(format!("unlock.lua on {key} replied {released}").into());
                }
                Ok(())
            }
            Self::QuorumRaw => {
                let key = format!("perf-qraw:{task}");
                let nodes = &bench.nodes;
                if raw_quorum_acquire(nodes, &key, &id, TTL_MS, FENCE_MS)
                    .await
                    .is_none()
                {
                    return Err(format!("{key} is taken on a majority").into());
                }
                let released = raw_quorum_release(nodes, &RELEASE, &key, &id, TTL_MS).await;
                if released < raw_majority(nodes.len()) {
                    return Err(format!("{key} was released on {released} nodes").into());
                }
                Ok(())
            }
            Self::QuorumWrite => {
                let quorum = bench.quorum.as_ref().ok_or("no quorum mutex")?;
                let guard = quorum.write().key(task.to_string()).await?;
                check_unlocked(guard).await
            }
        }
    }
}

async fn check_unlocked(guard: Guard) -> Result<()> {
    if !guard.unlock().await? {
        return Err("unlock found the lock gone".into());
    }
    Ok(())
}

/// Cycles per second of `tasks` tasks doing `workload` for `length`.
async fn phase(
    bench: &Arc<Bench>,
    workload: Workload,
    tasks: usize,
    length: Duration,
) -> Result<f64> {
    let start = Instant::now();
    let deadline = start + length;
    let mut set = JoinSet::new();
    for task in 0..tasks {
        let bench = Arc::clone(bench);
        set.spawn(async move {
            let mut conn = bench.conn.clone();
            let mut cycles = 0u64;
            while Instant::now() < deadline {
                workload.cycle(&bench, &mut conn, task).await?;
                cycles += 1;
            }
            Ok::<_, BoxError>(cycles)
        });
    }
    let mut cycles = 0;
    while let Some(done) = set.join_next().await {
        cycles += done??;
    }
    Ok(cycles as f64 / start.elapsed().as_secs_f64())
}

/// The median rate of each workload over [`ROUNDS`] interleaved phases; a workload
/// that fails is dropped from the later phases and gives its error instead.
async fn rates(
    bench: &Arc<Bench>,
    workloads: &[Workload],
    tasks: usize,
) -> Vec<Result<f64, String>> {
    let mut samples: Vec<Result<Vec<f64>, String>> = vec![Ok(Vec::new()); workloads.len()];
    for round in 0..=ROUNDS {
        for (&workload, samples) in workloads.iter().zip(&mut samples) {
            let Ok(rates) = samples else { continue };
            // Round 0 warms up and is not kept.
            let length = if round == 0 { WARM_UP } else { PHASE };
            match phase(bench, workload, tasks, length).await {
                Ok(rate) if round > 0 => rates.push(rate),
                Ok(_) => {}
                Err(err) => *samples = Err(format!("{workload:?}: {}", chain(&*err))),
            }
        }
    }
    samples
        .into_iter()
        .map(|samples| {
            let mut rates = samples?;
            rates.sort_by(f64::total_cmp);
            Ok(rates[rates.len() / 2])
        })
        .collect()
}

/// A throughput row: the library's (or floor's) rate next to the raw rate.
fn rate_row(
    id: &'static str,
    what: String,
    library: &Result<f64, String>,
    raw: &Result<f64, String>,
) -> Row {
    let show = |rate: &Result<f64, String>| match rate {
        Ok(rate) => per_s(*rate),
        Err(err) => format!("FAILED: {}", err.replace('|', "/").replace('\n', " ")),
    };
    let ratio = match (library, raw) {
        (Ok(library), Ok(raw)) => ratio(*library, *raw),
        _ => "—".into(),
    };
    Row::new(id, what, show(library), show(raw), ratio)
}

/// The fenced floor's share that the library must reach in row 2.
const FLOOR_TARGET: f64 = 0.95;

/// `row` with the ratio of `library` to the fenced floor `fenced` added to its ratio.
fn floor_row(mut row: Row, library: &Result<f64, String>, fenced: &Result<f64, String>) -> Row {
    if let (Ok(library), Ok(fenced)) = (library, fenced) {
        let share = library / fenced;
        let verdict = if share >= FLOOR_TARGET {
            "met"
        } else {
            "missed"
        };
        row.ratio = format!(
            "{} of raw; {share:.2} of the fenced floor (target ≥ {FLOOR_TARGET}: {verdict})",
            row.ratio
        );
    }
    row
}

fn per_s(rate: f64) -> String {
    format!("{} /s", thousands(rate))
}

fn thousands(x: f64) -> String {
    let digits = format!("{:.0}", x.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn ratio(library: f64, raw: f64) -> String {
    format!("{:.2}", library / raw)
}

async fn throughput_rows(server: &RedisServer) -> Result<Vec<Row>> {
    let conn = server.conn().await;
    let bench = Arc::new(Bench {
        mx: RwMutex::new(conn.clone(), "perf"),
        conn,
        nodes: Vec::new(),
        quorum: None,
    });
    use Workload::{Fenced, Raw, Read, Scripts, Write};
    let one = rates(&bench, &[Raw, Write, Read], 1).await;
    let [raw1, write1, read1] = &one[..] else {
        unreachable!("one rate per workload")
    };
    let many = rates(&bench, &[Raw, Write, Read, Fenced, Scripts], TASKS).await;
    let [raw, write, read, fenced, scripts] = &many[..] else {
        unreachable!("one rate per workload")
    };
    Ok(vec![
        rate_row(
            "1a",
            "uncontended write cycle (write + unlock), 1 task, cycles/s".into(),
            write1,
            raw1,
        ),
        rate_row(
            "1b",
            "uncontended read cycle (read + unlock), 1 task, cycles/s".into(),
            read1,
            raw1,
        ),
        floor_row(
            rate_row(
                "2",
                format!(
                    "{TASKS} tasks, own keys, one shared connection: write cycles/s (ratio \
                     to raw, and to the fenced floor of row 4, same phases)"
                ),
                write,
                raw,
            ),
            write,
            fenced,
        ),
        rate_row(
            "3",
            format!("{TASKS} readers on one key, one connection: read cycles/s"),
            read,
            raw,
        ),
        rate_row(
            "4",
            format!(
                "fenced floor, no library, {TASKS} tasks: pipelined SET NX PX + INCR fence, \
                 then compare-delete-PUBLISH script, cycles/s"
            ),
            fenced,
            raw,
        ),
        rate_row(
            "5",
            format!(
                "crate scripts as bare EVALSHA (lock.lua + unlock.lua), {TASKS} tasks, cycles/s"
            ),
            scripts,
            raw,
        ),
    ])
}

// ---------------------------------------------------------------- row 6: hand-off

/// What the two processes of a hand-off (rows 6 and 12) run: the library or the raw
/// baseline, on one server or on a quorum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    /// `SET NX PX`; the waiter wakes on `SUBSCRIBE <key>:released`.
    Raw,
    /// A mutex on one server; B's has a notifier.
    Library,
    /// The raw quorum acquire and release (`raw.rs`); the waiter wakes on any node's
    /// `<key>:released` message.
    QuorumRaw,
    /// A mutex over a quorum; B's has `Notifier::quorum`.
    QuorumLibrary,
}

impl Side {
    const ALL: [Self; 4] = [
        Self::Raw,
        Self::Library,
        Self::QuorumRaw,
        Self::QuorumLibrary,
    ];

    fn mode(self) -> &'static str {
        match self {
            Self::Raw => "raw",
            Self::Library => "library",
            Self::QuorumRaw => "quorum-raw",
            Self::QuorumLibrary => "quorum-library",
        }
    }

    fn parse(mode: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|side| side.mode() == mode)
            .ok_or_else(|| format!("unknown hand-off mode {mode:?}").into())
    }

    /// The key both processes lock: the library prefixes the mutex name, raw uses the
    /// full lock key.
    fn key(self) -> &'static str {
        match self {
            Self::Raw => "perf-handoff-raw",
            Self::Library => "k",
            Self::QuorumRaw => "perf-handoff-qraw",
            Self::QuorumLibrary => "qk",
        }
    }
}

/// One process's handle on the hand-off's lock.
enum Handle {
    Single(RwMutex<MultiplexedConnection>),
    Quorum(RwMutex<Quorum<MultiplexedConnection>>),
    Raw(MultiplexedConnection),
    RawQuorum(Vec<MultiplexedConnection>),
}

/// A raw waiter's release messages: its subscriptions on every node, merged.
type Messages = SelectAll<PubSubStream>;

/// A client and a connection for each of `urls`.
async fn connect(urls: &[String]) -> Result<(Vec<redis::Client>, Vec<MultiplexedConnection>)> {
    let mut clients = Vec::new();
    let mut conns = Vec::new();
    for url in urls {
        let client = redis::Client::open(url.as_str())?;
        conns.push(client.get_multiplexed_async_connection().await?);
        clients.push(client);
    }
    Ok((clients, conns))
}

impl Handle {
    /// `side`'s handle on the servers of `clients` and `conns`; a library mutex has a
    /// notifier when `notified`.
    fn new(
        side: Side,
        clients: &[redis::Client],
        conns: &[MultiplexedConnection],
        notified: bool,
    ) -> Result<Self> {
        Ok(match side {
            Side::Raw => Self::Raw(conns[0].clone()),
            Side::QuorumRaw => Self::RawQuorum(conns.to_vec()),
            Side::Library => {
                let builder = RwMutex::builder(conns[0].clone(), "perf-handoff");
                let builder = if notified {
                    builder.notifier(clients[0].clone())
                } else {
                    builder
                };
                Self::Single(builder.build()?)
            }
            Side::QuorumLibrary => {
                let builder = RwMutex::builder(Quorum::new(conns.to_vec())?, "perf-handoff");
                let builder = if notified {
                    builder.notifier(Notifier::quorum(clients.to_vec()))
                } else {
                    builder
                };
                Self::Quorum(builder.build()?)
            }
        })
    }

    /// Takes the write lock on `key` as `id` (a raw id; the library makes its own): the
    /// raw waiter waits on `messages`; without them, raw fails when the key is taken.
    async fn take(
        &self,
        key: &str,
        id: &str,
        messages: Option<&mut Messages>,
    ) -> Result<Option<Guard>> {
        match (self, messages) {
            (Self::Single(mx), _) => Ok(Some(mx.write().key(key).await?)),
            (Self::Quorum(mx), _) => Ok(Some(mx.write().key(key).await?)),
            (Self::Raw(conn), Some(messages)) => {
                raw_wait(&mut conn.clone(), messages, key, id).await?;
                Ok(None)
            }
            (Self::Raw(conn), None) => {
                if !raw_set(&mut conn.clone(), key, id, TTL_MS).await? {
                    return Err(format!("{key} is taken").into());
                }
                Ok(None)
            }
            (Self::RawQuorum(nodes), Some(messages)) => {
                raw_quorum_wait(nodes, messages, key, id).await?;
                Ok(None)
            }
            (Self::RawQuorum(nodes), None) => {
                if raw_quorum_acquire(nodes, key, id, TTL_MS, FENCE_MS)
                    .await
                    .is_none()
                {
                    return Err(format!("{key} is taken on a majority").into());
                }
                Ok(None)
            }
        }
    }

    /// Releases what [`take`](Self::take) returned; raw publishes to waiters when
    /// `publish`.
    async fn release(&self, held: Option<Guard>, key: &str, id: &str, publish: bool) -> Result<()> {
        if let Some(guard) = held {
            return check_unlocked(guard).await;
        }
        let script: &Script = if publish { &RELEASE_PUBLISH } else { &RELEASE };
        match self {
            Self::Raw(conn) => raw_release(&mut conn.clone(), script, key, id).await,
            Self::RawQuorum(nodes) => {
                let released = raw_quorum_release(nodes, script, key, id, TTL_MS).await;
                if released < raw_majority(nodes.len()) {
                    return Err(format!("{key} was released on {released} nodes").into());
                }
                Ok(())
            }
            Self::Single(_) | Self::Quorum(_) => Err("a library lock without its guard".into()),
        }
    }
}

/// Process B of rows 6 and 12. For each `go` line on stdin: prints `waiting`, waits for
/// the write lock on `key` (library: a mutex with a notifier; raw: the raw waiter) on
/// the servers of `urls` (comma-separated: one, or a quorum's), prints `acquired
/// <wall-clock ns>` taken the moment the wait returned, and releases.
async fn peer(mode: &str, urls: &str, key: &str) -> Result<()> {
    let side = Side::parse(mode)?;
    let urls: Vec<String> = urls.split(',').map(str::to_string).collect();
    let (clients, conns) = connect(&urls).await?;
    let handle = Handle::new(side, &clients, &conns, true)?;
    let mut messages = match side {
        Side::Library | Side::QuorumLibrary => None,
        Side::Raw | Side::QuorumRaw => {
            let mut streams = Vec::new();
            for client in &clients {
                streams.push(raw_subscribe(client, key).await?);
            }
            Some(select_all(streams))
        }
    };
    let id = raw_id(2);
    // tokio's stdin needs a feature this crate does not enable: a thread reads it.
    let (lines_tx, mut lines) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            let Ok(line) = line else { break };
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    while let Some(line) = lines.recv().await {
        if line != "go" {
            break;
        }
        println!("waiting");
        let held = handle.take(key, &id, messages.as_mut()).await?;
        let acquired = wall_ns();
        handle.release(held, key, &id, false).await?;
        println!("acquired {acquired}");
    }
    Ok(())
}

/// Hand-off latencies (ns) from A's release returning to B's acquire returning, B being
/// a child process, both running `side` on the servers of `urls`.
async fn handoffs(urls: &[String], side: Side) -> Result<Vec<i128>> {
    let key = side.key();
    let mut child = tokio::process::Command::new(std::env::current_exe()?)
        .args([PEER_ARG, "handoff", side.mode(), &urls.join(","), key])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let mut to_b = child.stdin.take().ok_or("no stdin for B")?;
    let mut from_b = BufReader::new(child.stdout.take().ok_or("no stdout for B")?).lines();
    let (clients, conns) = connect(urls).await?;
    let handle = Handle::new(side, &clients, &conns, false)?;
    let id = raw_id(1);
    let mut latencies = Vec::with_capacity(HANDOFFS);
    for round in 0..HANDOFF_WARM_UP + HANDOFFS {
        let held = handle.take(key, &id, None).await?;
        to_b.write_all(b"go\n").await?;
        to_b.flush().await?;
        let line = from_b.next_line().await?.ok_or("B exited")?;
        if line != "waiting" {
            return Err(format!("B said {line:?}").into());
        }
        // B sent its first attempt right after saying so: let it block.
        tokio::time::sleep(BLOCKED).await;
        handle.release(held, key, &id, true).await?;
        let released = wall_ns();
        let line = from_b.next_line().await?.ok_or("B exited")?;
        let acquired: i128 = line
            .strip_prefix("acquired ")
            .ok_or_else(|| format!("B said {line:?}"))?
            .parse()?;
        if round >= HANDOFF_WARM_UP {
            latencies.push(acquired - released);
        }
    }
    to_b.write_all(b"quit\n").await?;
    drop(to_b);
    let status = child.wait().await?;
    if !status.success() {
        return Err(format!("B exited with {status}").into());
    }
    Ok(latencies)
}

/// The `p`-quantile (0..=1) of sorted `values`, nearest rank.
fn quantile<T: Copy>(sorted: &[T], p: f64) -> T {
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn ms(ns: f64) -> String {
    format!("{:.2} ms", ns / 1e6)
}

/// `p50 / p99 / max` of `values` in ns.
fn spread(values: &mut [i128]) -> String {
    values.sort_unstable();
    format!(
        "p50 {} / p99 {} / max {}",
        ms(quantile(values, 0.5) as f64),
        ms(quantile(values, 0.99) as f64),
        ms(values[values.len() - 1] as f64)
    )
}

async fn handoff_row(server: &RedisServer) -> Result<Row> {
    let urls = [server.url()];
    let mut raw = handoffs(&urls, Side::Raw).await?;
    let mut library = handoffs(&urls, Side::Library).await?;
    let negative = library.iter().chain(&raw).filter(|&&ns| ns < 0).count();
    let (lib_p50, raw_p50) = {
        library.sort_unstable();
        raw.sort_unstable();
        (quantile(&library, 0.5), quantile(&raw, 0.5))
    };
    let mut what = format!(
        "hand-off across two processes: A unlocks, B (notifier) was blocked in write(); \
         A's unlock returning to B's write returning, {HANDOFFS} hand-offs"
    );
    if negative > 0 {
        what.push_str(&format!(" ({negative} negative: clocks read out of order)"));
    }
    Ok(Row::new(
        "6",
        what,
        spread(&mut library),
        format!("{} (Pub/Sub wake + SET NX)", spread(&mut raw)),
        format!(
            "latency, p50 {:.1}× raw",
            lib_p50 as f64 / raw_p50.max(1) as f64
        ),
    ))
}

// ---------------------------------------------------------------- command counting

/// Calls per command from `INFO commandstats`, without INFO itself.
async fn commandstats(conn: &mut MultiplexedConnection) -> Result<BTreeMap<String, u64>> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await?;
    let mut calls = BTreeMap::new();
    for line in info.lines() {
        let Some((name, fields)) = line
            .strip_prefix("cmdstat_")
            .and_then(|rest| rest.split_once(':'))
        else {
            continue;
        };
        if name == "info" {
            continue;
        }
        let count = fields
            .split(',')
            .find_map(|field| field.strip_prefix("calls="))
            .ok_or_else(|| format!("no calls= in {line:?}"))?
            .parse()?;
        calls.insert(name.to_string(), count);
    }
    Ok(calls)
}

/// Calls made between two [`commandstats`] snapshots.
fn calls_between(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(name, &n)| (name.clone(), n - before.get(name).copied().unwrap_or(0)))
        .filter(|&(_, n)| n > 0)
        .collect()
}

fn total(calls: &BTreeMap<String, u64>) -> u64 {
    calls.values().sum()
}

/// `name n, ...` of `calls`, each divided by `per`.
fn breakdown(calls: &BTreeMap<String, u64>, per: f64) -> String {
    let mut items: Vec<_> = calls.iter().collect();
    items.sort_by(|a, b| b.1.cmp(a.1));
    items
        .iter()
        .map(|(name, &n)| format!("{name} {:.2}", n as f64 / per))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Script invocations (the round trips of script-based clients) in `calls`.
fn evals(calls: &BTreeMap<String, u64>) -> u64 {
    ["evalsha", "eval", "evalsha_ro", "eval_ro"]
        .iter()
        .filter_map(|name| calls.get(*name))
        .sum()
}

// ---------------------------------------------------------------- row 7: contention

/// What one contended run measured.
struct Contended {
    acquisitions: u64,
    rate: f64,
    waits: Vec<i128>,
    busiest_share: f64,
    calls: BTreeMap<String, u64>,
    mean_hold: Duration,
}

/// Holds the lock for [`HOLD`] without blocking the runtime's other tasks.
fn hold() -> Duration {
    let start = Instant::now();
    tokio::task::block_in_place(|| std::thread::sleep(HOLD));
    start.elapsed()
}

/// [`WORKERS`] workers with their own connections taking turns on one key for
/// [`CONTENDED_FOR`]: the library (one shared notifier client) or the raw waiter.
async fn contended(server: &RedisServer, library: bool) -> Result<Contended> {
    let client = server.client();
    let mut info = server.conn().await;
    let key = if library { "k" } else { "perf-contended-raw" };
    let mut workers = Vec::new();
    for worker in 0..WORKERS {
        let conn = server.conn().await;
        let mx = RwMutex::builder(conn.clone(), "perf-contended")
            .notifier(client.clone())
            .build()?;
        let messages = if library {
            None
        } else {
            Some(raw_subscribe(&client, key).await?)
        };
        workers.push((worker, conn, mx, messages));
    }
    let before = commandstats(&mut info).await?;
    let start = Instant::now();
    let deadline = start + CONTENDED_FOR;
    let held_ns = Arc::new(AtomicU64::new(0));
    let mut set = JoinSet::new();
    for (worker, mut conn, mx, mut messages) in workers {
        let held_ns = Arc::clone(&held_ns);
        set.spawn(async move {
            let id = raw_id(worker);
            let mut waits = Vec::new();
            while Instant::now() < deadline {
                let asked = Instant::now();
                let guard = match messages.as_mut() {
                    None => Some(mx.write().key(key).await?),
                    Some(messages) => {
                        raw_wait(&mut conn, messages, key, &id).await?;
                        None
                    }
                };
                waits.push(asked.elapsed().as_nanos() as i128);
                let held = hold();
                held_ns.fetch_add(held.as_nanos() as u64, Ordering::Relaxed);
                match guard {
                    Some(guard) => check_unlocked(guard).await?,
                    None => raw_release(&mut conn, &RELEASE_PUBLISH, key, &id).await?,
                }
            }
            Ok::<_, BoxError>(waits)
        });
    }
    let mut waits = Vec::new();
    let mut busiest = 0;
    while let Some(done) = set.join_next().await {
        let worker = done??;
        busiest = busiest.max(worker.len());
        waits.extend(worker);
    }
    let elapsed = start.elapsed();
    let after = commandstats(&mut info).await?;
    let acquisitions = waits.len() as u64;
    Ok(Contended {
        acquisitions,
        rate: acquisitions as f64 / elapsed.as_secs_f64(),
        busiest_share: busiest as f64 / acquisitions as f64,
        calls: calls_between(&before, &after),
        mean_hold: Duration::from_nanos(held_ns.load(Ordering::Relaxed) / acquisitions.max(1)),
        waits,
    })
}

impl Contended {
    fn describe(&mut self) -> String {
        let n = self.acquisitions as f64;
        format!(
            "{}; wait {}; busiest worker {:.0}%; {:.1} cmds/acq ({:.2} EVALSHA/EVAL)",
            per_s(self.rate),
            spread(&mut self.waits),
            self.busiest_share * 100.0,
            total(&self.calls) as f64 / n,
            evals(&self.calls) as f64 / n,
        )
    }
}

async fn contended_row(notes: &mut Vec<String>) -> Result<Row> {
    let server = RedisServer::try_start()?;
    let mut raw = contended(&server, false).await?;
    let mut library = contended(&server, true).await?;
    for (name, run) in [("library", &library), ("raw", &raw)] {
        notes.push(format!(
            "row 7 {name}: {} acquisitions, mean hold {:.3} ms; commands per acquisition: {}",
            run.acquisitions,
            run.mean_hold.as_secs_f64() * 1e3,
            breakdown(&run.calls, run.acquisitions as f64)
        ));
    }
    Ok(Row::new(
        "7",
        format!(
            "{WORKERS} workers (own connections, one shared notifier client), one key, \
             write lock held ~{} ms, {} s: acquisitions/s; wait p50/p99/max; busiest \
             worker's share; Redis commands per acquisition (commandstats, incl. inside scripts)",
            HOLD.as_secs_f64() * 1e3,
            CONTENDED_FOR.as_secs()
        ),
        library.describe(),
        format!("{} (Pub/Sub wake + SET NX)", raw.describe()),
        format!("acquisitions/s {}", ratio(library.rate, raw.rate)),
    ))
}

// ---------------------------------------------------------------- row 8: an idle waiter

/// Commands per second (all of them, and script invocations) sent while one waiter of
/// `kind` waits [`IDLE_WAIT`] behind a raw holder on a server used for nothing else;
/// the holder's own commands are counted and subtracted.
async fn idle_waiter(kind: &str) -> Result<(f64, f64, BTreeMap<String, u64>)> {
    let server = RedisServer::try_start()?;
    let client = server.client();
    let mut info = server.conn().await;
    let mut holder = server.conn().await;
    let waiter_conn = server.conn().await;
    let lock_key = "perf-idle:k";
    let _: () = redis::cmd("SET")
        .arg(lock_key)
        .arg(raw_id(1))
        .arg("PX")
        .arg(TTL_MS)
        .query_async(&mut holder)
        .await?;
    let mx = match kind {
        "notifier" => RwMutex::builder(waiter_conn.clone(), "perf-idle")
            .notifier(client.clone())
            .build()?,
        _ => RwMutex::new(waiter_conn.clone(), "perf-idle"),
    };
    let before = commandstats(&mut info).await?;
    let start = Instant::now();
    let waiter = {
        let (client, mut conn) = (client.clone(), waiter_conn.clone());
        let raw = kind == "raw";
        tokio::spawn(async move {
            if raw {
                let mut messages = raw_subscribe(&client, lock_key).await?;
                raw_wait(&mut conn, &mut messages, lock_key, &raw_id(2)).await?;
            } else {
                let _guard = mx.write().key("k").await?;
            }
            Ok::<_, BoxError>(())
        })
    };
    let mut renewals = 0u64;
    while start.elapsed() + HOLDER_RENEW <= IDLE_WAIT {
        tokio::time::sleep(HOLDER_RENEW).await;
        let _: i64 = redis::cmd("PEXPIRE")
            .arg(lock_key)
            .arg(TTL_MS)
            .query_async(&mut holder)
            .await?;
        renewals += 1;
    }
    tokio::time::sleep(IDLE_WAIT.saturating_sub(start.elapsed())).await;
    let after = commandstats(&mut info).await?;
    let elapsed = start.elapsed().as_secs_f64();
    if waiter.is_finished() {
        return Err(format!("the {kind} waiter stopped waiting: {:?}", waiter.await).into());
    }
    waiter.abort();
    let mut calls = calls_between(&before, &after);
    if let Some(pexpire) = calls.get_mut("pexpire") {
        *pexpire = pexpire
            .checked_sub(renewals)
            .ok_or("fewer PEXPIREs than the holder sent")?;
    }
    calls.retain(|_, n| *n > 0);
    Ok((
        total(&calls) as f64 / elapsed,
        evals(&calls) as f64 / elapsed,
        calls,
    ))
}

async fn idle_waiter_rows(notes: &mut Vec<String>) -> Result<Vec<Row>> {
    let (raw, raw_evals, raw_calls) = idle_waiter("raw").await?;
    let mut rows = Vec::new();
    for (id, kind, label) in [
        ("8a", "poll", "without notifier"),
        ("8b", "notifier", "with .notifier(..)"),
    ] {
        let (all, evals, calls) = idle_waiter(kind).await?;
        notes.push(format!(
            "row 8 {label}: commands per second: {}",
            breakdown(&calls, IDLE_WAIT.as_secs_f64())
        ));
        rows.push(Row::new(
            id,
            format!(
                "one waiter blocked {} s behind a live holder, {label}: Redis commands/s sent \
                 by the waiter (commandstats, incl. inside scripts; holder's subtracted)",
                IDLE_WAIT.as_secs()
            ),
            format!("{all:.1} /s ({evals:.1} EVALSHA/s)"),
            format!("{raw:.1} /s ({raw_evals:.1} EVALSHA/s) (Pub/Sub waiter)"),
            format!(
                "{:.1}× raw (lower is better)",
                all / raw.max(f64::MIN_POSITIVE)
            ),
        ));
    }
    notes.push(format!(
        "row 8 raw Pub/Sub waiter: commands per second: {}",
        breakdown(&raw_calls, IDLE_WAIT.as_secs_f64())
    ));
    Ok(rows)
}

// ---------------------------------------------------------------- releasing guards

/// Guards unlocked at a time by [`release_guards`].
const UNLOCK_BATCH: usize = 500;

/// Unlocks every guard, [`UNLOCK_BATCH`] at a time: how many had been lost meanwhile,
/// and how many unlocks failed (those locks expire by their TTL).
async fn release_guards(guards: Vec<Guard>) -> Result<(usize, usize)> {
    let mut guards = guards.into_iter();
    let (mut lost, mut failed) = (0, 0);
    loop {
        let mut set = JoinSet::new();
        for guard in guards.by_ref().take(UNLOCK_BATCH) {
            set.spawn(guard.unlock());
        }
        if set.is_empty() {
            return Ok((lost, failed));
        }
        while let Some(done) = set.join_next().await {
            match done? {
                Ok(true) => {}
                Ok(false) => lost += 1,
                Err(_) => failed += 1,
            }
        }
    }
}

// ---------------------------------------------------------------- rows 10–13: quorum

/// Rows 10–13: the nodes of the quorum, each a `redis-server` of its own on loopback.
const QUORUM_NODES: usize = 3;
/// Row 10's notes: cycles (1 task) whose commands are counted on every node.
const COUNTED_CYCLES: usize = 1000;
/// Row 13: acquires measured in each phase, after a few unmeasured ones with all nodes
/// up; unlocks, refused `try_write`s and hand-offs timed one at a time in each phase
/// (each may take the per-node bound or more with a node frozen).
const FROZEN_ACQUIRES: usize = 200;
const FROZEN_WARM_UP: usize = 10;
const FROZEN_UNLOCKS: usize = 5;
/// The per-node bound of a quorum mutex with the default TTL: ttl/10.
const NODE_BOUND: Duration = Duration::from_millis(TTL_MS / 10);

async fn quorum_rows(rows: &mut Vec<Row>, notes: &mut Vec<String>) {
    let servers: Result<Vec<RedisServer>, String> = (0..QUORUM_NODES)
        .map(|_| RedisServer::try_start())
        .collect();
    let servers = match servers {
        Ok(servers) => servers,
        Err(err) => {
            push_rows(rows, "10-13", "quorum", Err(err.into()));
            return;
        }
    };
    let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    eprintln!("rows 10-11: quorum throughput ...");
    let made = quorum_throughput_rows(&servers, notes).await;
    push_rows(rows, "10-11", "quorum throughput", made);
    eprintln!("row 12: quorum hand-off across two processes ...");
    let made = quorum_handoff_rows(&urls).await;
    push_rows(rows, "12", "quorum hand-off across two processes", made);
    eprintln!("row 13: one node of {QUORUM_NODES} frozen ...");
    let made = frozen_rows(&servers).await;
    push_rows(rows, "13", "one node frozen", made);
}

/// The throughput bench of rows 10–11: one connection per node, shared by every task;
/// the quorum mutex over them, and the single-server mutex on the first node alone.
async fn quorum_bench(servers: &[RedisServer]) -> Result<Arc<Bench>> {
    let mut nodes = Vec::new();
    for server in servers {
        nodes.push(server.conn().await);
    }
    Ok(Arc::new(Bench {
        conn: nodes[0].clone(),
        mx: RwMutex::new(nodes[0].clone(), "perf"),
        quorum: Some(RwMutex::new(Quorum::new(nodes.clone())?, "perf-quorum")),
        nodes,
    }))
}

/// What one task's [`COUNTED_CYCLES`] cycles of a workload cost: commands per name,
/// summed over every node; this process's CPU time and the wall time, per cycle.
struct Counted {
    calls: BTreeMap<String, u64>,
    cpu: Duration,
    wall: Duration,
}

/// [`Counted`] for `workload` on the nodes of `servers`.
async fn quorum_calls(
    servers: &[RedisServer],
    bench: &Bench,
    workload: Workload,
) -> Result<Counted> {
    let mut infos = Vec::new();
    let mut before = Vec::new();
    for server in servers {
        let mut info = server.conn().await;
        before.push(commandstats(&mut info).await?);
        infos.push(info);
    }
    let mut conn = bench.conn.clone();
    let (cpu, wall) = (Process::Me.cpu_time()?, Instant::now());
    for _ in 0..COUNTED_CYCLES {
        workload.cycle(bench, &mut conn, 0).await?;
    }
    let (cpu, wall) = (Process::Me.cpu_time()? - cpu, wall.elapsed());
    let mut calls = BTreeMap::new();
    for (info, before) in infos.iter_mut().zip(&before) {
        let after = commandstats(info).await?;
        for (name, n) in calls_between(before, &after) {
            *calls.entry(name).or_default() += n;
        }
    }
    let cycles = COUNTED_CYCLES as u32;
    Ok(Counted {
        calls,
        cpu: cpu / cycles,
        wall: wall / cycles,
    })
}

/// A rate, and for one task the time of one cycle.
fn rate_and_cycle(rate: &Result<f64, String>, tasks: usize) -> String {
    match rate {
        Ok(rate) if tasks == 1 => format!("{} ({:.0} µs/cycle)", per_s(*rate), 1e6 / rate),
        Ok(rate) => per_s(*rate),
        Err(err) => format!("FAILED: {}", err.replace('|', "/").replace('\n', " ")),
    }
}

async fn quorum_throughput_rows(
    servers: &[RedisServer],
    notes: &mut Vec<String>,
) -> Result<Vec<Row>> {
    let bench = quorum_bench(servers).await?;
    use Workload::{QuorumRaw, QuorumWrite, Raw, Write};
    let workloads = [Raw, Write, QuorumRaw, QuorumWrite];
    let one = rates(&bench, &workloads, 1).await;
    let many = rates(&bench, &workloads, TASKS).await;
    for (workload, what) in [
        (QuorumWrite, "quorum library (write + unlock)"),
        (QuorumRaw, "raw quorum cycle"),
        (Write, "single-server library (write + unlock on node 1)"),
    ] {
        let counted = quorum_calls(servers, &bench, workload).await?;
        notes.push(format!(
            "row 10 {what}, {COUNTED_CYCLES} cycles, 1 task: {:.0} µs/cycle wall, client \
             process CPU {:.0} µs/cycle (the redis-servers' not included); Redis commands \
             per cycle summed over the {QUORUM_NODES} nodes (commandstats, incl. inside \
             scripts): {} ({:.2} EVALSHA/EVAL)",
            counted.wall.as_secs_f64() * 1e6,
            counted.cpu.as_secs_f64() * 1e6,
            breakdown(&counted.calls, COUNTED_CYCLES as f64),
            evals(&counted.calls) as f64 / COUNTED_CYCLES as f64
        ));
    }
    let mut rows = Vec::new();
    for ((vs_raw, vs_single), tasks, rates) in
        [(("10a", "10b"), 1, &one), (("11a", "11b"), TASKS, &many)]
    {
        let [raw, write, quorum_raw, quorum_write] = &rates[..] else {
            unreachable!("one rate per workload")
        };
        let setting = if tasks == 1 {
            "uncontended quorum write cycle (write + unlock), 1 task".to_string()
        } else {
            format!("{tasks} tasks, own keys, over the quorum (one shared connection per node)")
        };
        let ratio_of = |a: &Result<f64, String>, b: &Result<f64, String>| match (a, b) {
            (Ok(a), Ok(b)) => ratio(*a, *b),
            _ => "—".into(),
        };
        rows.push(Row::new(
            vs_raw,
            format!(
                "{setting}, {QUORUM_NODES} loopback redis-servers: cycles/s vs the raw \
                 quorum cycle (on all nodes at once: pipelined SET NX PX + INCR fence, \
                 then SET fence PX, each decided at a majority; then compare-delete on \
                 every node; each call bounded by ttl/10)"
            ),
            rate_and_cycle(quorum_write, tasks),
            rate_and_cycle(quorum_raw, tasks),
            ratio_of(quorum_write, quorum_raw),
        ));
        rows.push(Row::new(
            vs_single,
            format!(
                "{setting}: the quorum's cycles/s vs the single-server library cycle \
                 (same phases, on node 1 alone)"
            ),
            rate_and_cycle(quorum_write, tasks),
            format!(
                "{} (single-server library; raw SET NX PX + compare-delete there {}, \
                 library/raw {})",
                rate_and_cycle(write, tasks),
                rate_and_cycle(raw, tasks),
                ratio_of(write, raw)
            ),
            format!("{} of one server", ratio_of(quorum_write, write)),
        ));
    }
    Ok(rows)
}

async fn quorum_handoff_rows(urls: &[String]) -> Result<Vec<Row>> {
    let mut raw = handoffs(urls, Side::QuorumRaw).await?;
    let mut library = handoffs(urls, Side::QuorumLibrary).await?;
    let mut single = handoffs(&urls[..1], Side::Library).await?;
    let negative = [&library, &raw, &single]
        .iter()
        .flat_map(|values| values.iter())
        .filter(|&&ns| ns < 0)
        .count();
    let p50 = |values: &mut Vec<i128>| {
        values.sort_unstable();
        quantile(values, 0.5)
    };
    let (lib_p50, raw_p50, single_p50) = (p50(&mut library), p50(&mut raw), p50(&mut single));
    let target = if lib_p50 <= 1_000_000 {
        "met"
    } else {
        "missed"
    };
    let mut what = format!(
        "hand-off across two processes over the {QUORUM_NODES}-node quorum: A unlocks, B \
         (Notifier::quorum) was blocked in write(); A's unlock returning to B's write \
         returning, {HANDOFFS} hand-offs"
    );
    if negative > 0 {
        what.push_str(&format!(" ({negative} negative: clocks read out of order)"));
    }
    Ok(vec![
        Row::new(
            "12a",
            format!("{what}; vs raw"),
            spread(&mut library),
            format!(
                "{} (raw quorum waiter: SUBSCRIBE on every node, raw quorum acquire when \
                 woken; A releases with compare-delete-PUBLISH on every node)",
                spread(&mut raw)
            ),
            format!(
                "latency, p50 {:.1}× raw; target p50 ≤ 1 ms: {target}",
                lib_p50 as f64 / raw_p50.max(1) as f64
            ),
        ),
        Row::new(
            "12b",
            format!("{what}; vs the same on node 1 alone (row 6's library setup)"),
            spread(&mut library),
            format!("{} (single server, Notifier::new)", spread(&mut single)),
            format!(
                "latency, p50 {:.1}× one server",
                lib_p50 as f64 / single_p50.max(1) as f64
            ),
        ),
    ])
}

/// What row 13 measures in one phase (all nodes up, or one frozen), latencies in ns.
struct FrozenPhase {
    /// `write()` of an uncontended lock.
    acquires: Vec<i128>,
    /// `unlock()` of a guard.
    unlocks: Vec<i128>,
    /// `try_write()` of a lock another handle holds (it returns `None`).
    refusals: Vec<i128>,
    /// In one process: A calls `unlock()` → B's `write()` returns, B having waited.
    handoffs: Vec<i128>,
}

/// Row 13, one phase, on `a` and `b` (two mutexes over the same quorum on their own
/// connections, `b` with `Notifier::quorum`), keys named after `phase`:
/// - [`FROZEN_ACQUIRES`] uncontended `write()`s on `a`, one at a time on fresh keys, after
///   `warm_up` unmeasured ones; the guards are held until all are taken (an unlock waits
///   for every node, so unlocking each would put a frozen node's bound between
///   acquires); then [`FROZEN_UNLOCKS`] of them unlocked one at a time, the others
///   together;
/// - [`FROZEN_UNLOCKS`] times: `a` holds a key, `b.try_write()` on it; then `b.write()`
///   waits for it and `a` unlocks after [`BLOCKED`].
async fn frozen_phase(
    a: &RwMutex<Quorum<MultiplexedConnection>>,
    b: &RwMutex<Quorum<MultiplexedConnection>>,
    phase: &str,
    warm_up: usize,
) -> Result<FrozenPhase> {
    let mut measured = FrozenPhase {
        acquires: Vec::with_capacity(FROZEN_ACQUIRES),
        unlocks: Vec::with_capacity(FROZEN_UNLOCKS),
        refusals: Vec::with_capacity(FROZEN_UNLOCKS),
        handoffs: Vec::with_capacity(FROZEN_UNLOCKS),
    };
    let mut guards = Vec::with_capacity(warm_up + FROZEN_ACQUIRES);
    for i in 0..warm_up + FROZEN_ACQUIRES {
        let started = Instant::now();
        let guard = a.write().key(format!("{phase}:{i}")).await?;
        if i >= warm_up {
            measured.acquires.push(started.elapsed().as_nanos() as i128);
        }
        guards.push(guard);
    }
    let rest = guards.split_off(FROZEN_UNLOCKS);
    for guard in guards {
        let started = Instant::now();
        check_unlocked(guard).await?;
        measured.unlocks.push(started.elapsed().as_nanos() as i128);
    }
    let (lost, failed) = release_guards(rest).await?;
    if lost + failed > 0 {
        return Err(format!("{phase}: {lost} guards lost, {failed} unlocks failed").into());
    }
    for i in 0..FROZEN_UNLOCKS {
        let key = format!("{phase}-held:{i}");
        let held = a.write().key(&key).await?;
        let started = Instant::now();
        if b.try_write().key(&key).await?.is_some() {
            return Err(format!("{phase}: try_write took {key}, held by another").into());
        }
        measured.refusals.push(started.elapsed().as_nanos() as i128);
        let waiter = {
            let (b, key) = (b.clone(), key.clone());
            tokio::spawn(async move {
                let guard = b.write().key(key).await?;
                Ok::<_, BoxError>((Instant::now(), guard))
            })
        };
        tokio::time::sleep(BLOCKED).await;
        let unlocking = Instant::now();
        let unlocked = tokio::spawn(check_unlocked(held));
        let (acquired, guard) = waiter.await??;
        measured
            .handoffs
            .push(acquired.saturating_duration_since(unlocking).as_nanos() as i128);
        unlocked.await??;
        check_unlocked(guard).await?;
    }
    Ok(measured)
}

/// Whether the server of `conn` answers a PING within 100 ms.
async fn answers(conn: &mut MultiplexedConnection) -> bool {
    let ping = redis::cmd("PING");
    let ping = ping.query_async::<String>(conn);
    matches!(
        tokio::time::timeout(Duration::from_millis(100), ping).await,
        Ok(Ok(_))
    )
}

/// `p50 / max` of sorted `values` in ns.
fn brief(values: &[i128]) -> String {
    format!(
        "p50 {} / max {}",
        ms(quantile(values, 0.5) as f64),
        ms(values[values.len() - 1] as f64)
    )
}

async fn frozen_rows(servers: &[RedisServer]) -> Result<Vec<Row>> {
    let (mut nodes_a, mut nodes_b, mut clients) = (Vec::new(), Vec::new(), Vec::new());
    for server in servers {
        nodes_a.push(server.conn().await);
        nodes_b.push(server.conn().await);
        clients.push(server.client());
    }
    let a = RwMutex::new(Quorum::new(nodes_a)?, "perf-frozen");
    let b = RwMutex::builder(Quorum::new(nodes_b)?, "perf-frozen")
        .notifier(Notifier::quorum(clients))
        .build()?;
    let mut up = frozen_phase(&a, &b, "up", FROZEN_WARM_UP).await?;
    let frozen_node = &servers[QUORUM_NODES - 1];
    let mut probe = frozen_node.conn().await;
    frozen_node.pause();
    let frozen = if answers(&mut probe).await {
        Err("the node answered after SIGSTOP".into())
    } else {
        frozen_phase(&a, &b, "frozen", 0).await
    };
    frozen_node.resume();
    let mut frozen = frozen?;
    for values in [
        &mut up.acquires,
        &mut up.unlocks,
        &mut up.refusals,
        &mut up.handoffs,
        &mut frozen.acquires,
        &mut frozen.unlocks,
        &mut frozen.refusals,
        &mut frozen.handoffs,
    ] {
        values.sort_unstable();
    }
    let bound_ns = NODE_BOUND.as_nanos() as i128;
    let node =
        format!("node {QUORUM_NODES} of the {QUORUM_NODES}-node quorum frozen (SIGSTOP) vs all up");
    // What freezing a node adds at p50 and at the max; for the requests that acquire (or
    // try to), whether that is at most the per-node bound.
    let adds = |frozen: &[i128], up: &[i128], judged: bool, why: &str| {
        let p50 = quantile(frozen, 0.5) - quantile(up, 0.5);
        let max = frozen[frozen.len() - 1] - up[up.len() - 1];
        let mut text = format!("adds p50 {}, max {}", ms(p50 as f64), ms(max as f64));
        if judged {
            let verdict = if p50 <= bound_ns && max <= bound_ns {
                "met"
            } else {
                "missed"
            };
            text.push_str(&format!(
                "; at most the per-node bound ttl/10 = {} ms: {verdict}",
                NODE_BOUND.as_millis()
            ));
        }
        if !why.is_empty() {
            text.push_str(&format!(" ({why})"));
        }
        text
    };
    Ok(vec![
        Row::new(
            "13a",
            format!(
                "acquire latency, 1 task, uncontended write() on fresh keys (guards held), \
                 {FROZEN_ACQUIRES} acquires: {node}"
            ),
            format!("frozen: {}", spread(&mut frozen.acquires)),
            format!("all up: {}", spread(&mut up.acquires)),
            adds(&frozen.acquires, &up.acquires, true, ""),
        ),
        Row::new(
            "13b",
            format!("unlock latency, {FROZEN_UNLOCKS} unlocks one at a time: {node}"),
            format!("frozen: {}", brief(&frozen.unlocks)),
            format!("all up: {}", brief(&up.unlocks)),
            adds(
                &frozen.unlocks,
                &up.unlocks,
                false,
                "an unlock returns at a majority; the frozen node's release goes on in the \
                 background",
            ),
        ),
        Row::new(
            "13c",
            format!(
                "try_write() on a lock another handle holds (returns None), \
                 {FROZEN_UNLOCKS} tries: {node}"
            ),
            format!("frozen: {}", brief(&frozen.refusals)),
            format!("all up: {}", brief(&up.refusals)),
            adds(
                &frozen.refusals,
                &up.refusals,
                true,
                "a lost attempt queues its releases and returns; the frozen node's waits \
                 its turn there in the background",
            ),
        ),
        Row::new(
            "13d",
            format!(
                "hand-off in one process, {FROZEN_UNLOCKS} hand-offs: B (Notifier::quorum) \
                 blocked in write(), A calls unlock() → B's write returns: {node}"
            ),
            format!("frozen: {}", brief(&frozen.handoffs)),
            format!("all up: {}", brief(&up.handoffs)),
            adds(
                &frozen.handoffs,
                &up.handoffs,
                true,
                "B's attempts are decided by the two nodes up",
            ),
        ),
    ])
}
