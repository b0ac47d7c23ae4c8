//! The side-by-side performance runner: every figure of the library next to a raw
//! redis-rs baseline measured in the same run, printed as one markdown table.
//!
//! Run with `cargo run --release --example perf`. It starts its own `redis-server`s
//! from PATH on free loopback ports (a fresh one for each row that counts commands) and
//! re-executes itself as the second process of the cross-process hand-off and for
//! each idle-guard count. It takes about a minute and a half.
//!
//! Raw baselines:
//! - a raw write cycle is `SET key id NX PX ttl`, then a compare-and-delete script sent
//!   as EVALSHA (`redis::Script`);
//! - a raw waiter subscribes to `<key>:released`, tries `SET NX`, and on failure waits
//!   for a message (the raw holder releases with compare, delete and `PUBLISH`).
//!
//! Command counts come from `INFO commandstats` deltas, which count the commands a
//! script calls as well as the EVALSHA that ran it; the INFO calls themselves are left
//! out. Throughput rows run each workload in several short phases, interleaved with its
//! baseline, and report the medians, so a slow moment hits both sides alike.

#[path = "../tests/common/server.rs"]
#[allow(dead_code, unreachable_pub)]
mod server;

#[path = "../benches/raw.rs"]
#[allow(dead_code, unreachable_pub)]
mod raw;

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::StreamExt;
use raw::{raw_id, raw_set, RELEASE, RELEASE_PUBLISH};
use redis::aio::{MultiplexedConnection, PubSubStream};
use redis::{Script, ScriptInvocation, Value};
use redismutex::{Guard, RwMutex};
use server::RedisServer;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::task::JoinSet;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Result<T, E = BoxError> = std::result::Result<T, E>;

/// The first argument that makes this program a child process: `--peer handoff MODE
/// URL KEY` is the waiting process B of row 6, `--peer guards N` measures row 9 for N
/// guards in a process of its own (so no memory freed by earlier rows is reused).
const PEER_ARG: &str = "--peer";

/// The lock TTL everywhere (the library's default), and the PX of raw locks.
const TTL: Duration = Duration::from_secs(4);
const TTL_MS: u64 = 4000;
/// The fence retention passed to `lua/lock.lua` (the library's default, 24 h).
const FENCE_MS: u64 = 24 * 3600 * 1000;
/// Concurrent tasks in rows 2–5.
const TASKS: usize = 32;
/// Throughput: phases per workload, each this long, interleaved with the baseline.
const ROUNDS: usize = 5;
const PHASE: Duration = Duration::from_millis(500);
const WARM_UP: Duration = Duration::from_millis(200);
/// Row 6: hand-offs measured, after a few unmeasured ones; B's blocked time before A
/// releases (not counted).
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
/// Row 9: (row, guards held, their mutex's TTL); a 4 s TTL asks 100k guards for 50k
/// refreshes a second, so 100k also runs with a longer one. Guards are acquired this
/// many at a time, and refreshes counted over this many ttl/2 windows.
const GUARD_RUNS: [(&str, usize, Duration); 3] = [
    ("9a", 10_000, Duration::from_secs(4)),
    ("9b", 100_000, Duration::from_secs(4)),
    ("9c", 100_000, Duration::from_secs(12)),
];
const GUARD_BATCH: usize = 500;
const GUARD_WINDOWS: u32 = 2;
const GUARD_RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);

/// The crate's own scripts, sent bare in row 5, after `base.lua` (and `shared.lua`) as the
/// crate sends them.
static LOCK_LUA: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("../lua/base.lua"),
        "\n",
        include_str!("../lua/shared.lua"),
        "\n",
        include_str!("../lua/lock.lua")
    ))
});
static UNLOCK_LUA: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("../lua/base.lua"),
        "\n",
        include_str!("../lua/unlock.lua")
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
    messages: &mut PubSubStream,
    key: &str,
    id: &str,
) -> Result<()> {
    while !raw_set(conn, key, id, TTL_MS).await? {
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
            return runtime.block_on(run());
        }
        let [role, a, b, c] = [2, 3, 4, 5].map(|i| args.get(i).cloned().unwrap_or_default());
        match role.as_str() {
            "handoff" => runtime.block_on(peer(&a, &b, &c)),
            "guards" => {
                runtime.block_on(guards_peer(a.parse()?, Duration::from_millis(b.parse()?)))
            }
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

async fn run() -> Result<()> {
    let header = header();
    eprintln!("{header}");
    let mut rows = Vec::new();
    let mut notes = Vec::new();

    let main_server = RedisServer::try_start()?;
    eprintln!("rows 1-5: throughput ...");
    let made = throughput_rows(&main_server).await;
    push_rows(&mut rows, "1-5", "throughput", made);
    eprintln!("row 6: hand-off across two processes ...");
    let made = handoff_row(&main_server).await.map(|row| vec![row]);
    push_rows(&mut rows, "6", "hand-off across two processes", made);
    drop(main_server);

    eprintln!("row 7: {WORKERS} workers on one key ...");
    let made = contended_row(&mut notes).await.map(|row| vec![row]);
    push_rows(&mut rows, "7", "workers on one key", made);
    eprintln!("row 8: one waiter behind a live holder ...");
    let made = idle_waiter_rows(&mut notes).await;
    push_rows(&mut rows, "8", "one waiter behind a live holder", made);
    eprintln!("row 9: idle guards ...");
    idle_guard_rows(&mut rows, &mut notes).await;

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
    println!("Reproduce: `cargo run --release --example perf`");
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
}

/// What every task of a throughput phase shares.
struct Bench {
    conn: MultiplexedConnection,
    mx: RwMutex<MultiplexedConnection>,
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
        rate_row(
            "2",
            format!("{TASKS} tasks, own keys, one shared connection: write cycles/s"),
            write,
            raw,
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

/// Process B of row 6. For each `go` line on stdin: prints `waiting`, waits for the
/// write lock on `key` (library: a mutex with a notifier; raw: the raw waiter), prints
/// `acquired <wall-clock ns>` taken the moment the wait returned, and releases.
async fn peer(mode: &str, url: &str, key: &str) -> Result<()> {
    let client = redis::Client::open(url)?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let mx = RwMutex::builder(conn.clone(), "perf-handoff")
        .notifier(client.clone())
        .build()?;
    let mut messages = match mode {
        "library" => None,
        _ => Some(raw_subscribe(&client, key).await?),
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
        let acquired = match messages.as_mut() {
            None => {
                let guard = mx.write().key(key).await?;
                let acquired = wall_ns();
                check_unlocked(guard).await?;
                acquired
            }
            Some(messages) => {
                raw_wait(&mut conn, messages, key, &id).await?;
                let acquired = wall_ns();
                raw_release(&mut conn, &RELEASE, key, &id).await?;
                acquired
            }
        };
        println!("acquired {acquired}");
    }
    Ok(())
}

/// Hand-off latencies (ns) from A's release returning to B's acquire returning, B being
/// a child process; `library` picks the library on both sides, else raw.
async fn handoffs(server: &RedisServer, library: bool) -> Result<Vec<i128>> {
    let mode = if library { "library" } else { "raw" };
    // The library prefixes the mutex name; raw uses the full lock key.
    let (key, lock_key) = if library {
        ("k", "perf-handoff:k")
    } else {
        ("perf-handoff-raw", "perf-handoff-raw")
    };
    let mut child = tokio::process::Command::new(std::env::current_exe()?)
        .args([PEER_ARG, "handoff", mode, &server.url(), key])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let mut to_b = child.stdin.take().ok_or("no stdin for B")?;
    let mut from_b = BufReader::new(child.stdout.take().ok_or("no stdout for B")?).lines();
    let mut conn = server.conn().await;
    let mx = RwMutex::new(conn.clone(), "perf-handoff");
    let id = raw_id(1);
    let mut latencies = Vec::with_capacity(HANDOFFS);
    for round in 0..HANDOFF_WARM_UP + HANDOFFS {
        let guard = if library {
            Some(mx.write().key(key).await?)
        } else if raw_set(&mut conn, lock_key, &id, TTL_MS).await? {
            None
        } else {
            return Err(format!("{lock_key} is taken").into());
        };
        to_b.write_all(b"go\n").await?;
        to_b.flush().await?;
        let line = from_b.next_line().await?.ok_or("B exited")?;
        if line != "waiting" {
            return Err(format!("B said {line:?}").into());
        }
        // B sent its first attempt right after saying so: let it block.
        tokio::time::sleep(BLOCKED).await;
        match guard {
            Some(guard) => check_unlocked(guard).await?,
            None => raw_release(&mut conn, &RELEASE_PUBLISH, lock_key, &id).await?,
        }
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
    let mut raw = handoffs(server, false).await?;
    let mut library = handoffs(server, true).await?;
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

// ---------------------------------------------------------------- row 9: idle guards

/// What `/proc/self/stat`-style files need: a value of `getconf`, or `default`.
fn getconf(name: &str, default: u64) -> u64 {
    std::process::Command::new("getconf")
        .arg(name)
        .output()
        .ok()
        .and_then(|out| String::from_utf8_lossy(&out.stdout).trim().parse().ok())
        .unwrap_or(default)
}

/// This process's resident memory in bytes, from `/proc/self/statm`.
fn rss_bytes() -> Result<u64> {
    static PAGE: LazyLock<u64> = LazyLock::new(|| getconf("PAGESIZE", 4096));
    let statm = std::fs::read_to_string("/proc/self/statm")?;
    let resident: u64 = statm
        .split_whitespace()
        .nth(1)
        .ok_or("no resident field in /proc/self/statm")?
        .parse()?;
    Ok(resident * *PAGE)
}

/// CPU time (user + system) this process has used, from `/proc/self/stat`.
fn cpu_time() -> Result<Duration> {
    static TICK: LazyLock<u64> = LazyLock::new(|| getconf("CLK_TCK", 100));
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    // The fields after the command name: state is field 3, utime 14, stime 15.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .ok_or("no command name in /proc/self/stat")?
        .1
        .split_whitespace()
        .collect();
    let ticks = |field: usize| -> Result<u64> {
        Ok(fields
            .get(field - 3)
            .ok_or("short /proc/self/stat")?
            .parse()?)
    };
    let ticks = ticks(14)? + ticks(15)?;
    Ok(Duration::from_secs_f64(ticks as f64 / *TICK as f64))
}

/// `n` write guards on distinct keys, acquired [`GUARD_BATCH`] at a time.
async fn acquire_guards(mx: &RwMutex<MultiplexedConnection>, n: usize) -> Result<Vec<Guard>> {
    let started = Instant::now();
    let mut guards = Vec::with_capacity(n);
    for batch in (0..n).step_by(GUARD_BATCH) {
        let mut set = JoinSet::new();
        for i in batch..(batch + GUARD_BATCH).min(n) {
            let request = mx.write().key(i.to_string());
            set.spawn(async move { request.await });
        }
        while let Some(done) = set.join_next().await {
            match done? {
                Ok(guard) => guards.push(guard),
                Err(err) => {
                    return Err(format!(
                        "acquire failed after {} guards in {:.1} s: {}",
                        guards.len(),
                        started.elapsed().as_secs_f64(),
                        chain(&err)
                    )
                    .into())
                }
            }
        }
    }
    Ok(guards)
}

/// Unlocks every guard, [`GUARD_BATCH`] at a time: how many had been lost meanwhile,
/// and how many unlocks failed (those locks expire by their TTL).
async fn release_guards(guards: Vec<Guard>) -> Result<(usize, usize)> {
    let mut guards = guards.into_iter();
    let (mut lost, mut failed) = (0, 0);
    loop {
        let mut set = JoinSet::new();
        for guard in guards.by_ref().take(GUARD_BATCH) {
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

/// One row-9 measurement, made in a process of its own.
struct IdleGuards {
    bytes: f64,
    raw_bytes: f64,
    refreshes: f64,
    cpu_per_s: f64,
    cpu_per_refresh: Duration,
    cancelled: usize,
    lost: usize,
    unlock_errors: usize,
    acquired_in: f64,
    calls: String,
}

/// Row 9 for `n` guards with `ttl`, in this process (a child of the runner): prints
/// `guards` and the fields of [`IdleGuards`] on one tab-separated line.
async fn guards_peer(n: usize, ttl: Duration) -> Result<()> {
    let server = RedisServer::try_start()?;
    let mut info = server.conn().await;
    // This row counts bytes and refreshes, not latency: a slow reply while the server
    // catches up must not fail an acquire.
    let config =
        redis::AsyncConnectionConfig::new().set_response_timeout(Some(GUARD_RESPONSE_TIMEOUT));
    let conn = server
        .client()
        .get_multiplexed_async_connection_with_config(&config)
        .await?;
    let mx = RwMutex::builder(conn, "perf-guards").ttl(ttl).build()?;

    let rss0 = rss_bytes()?;
    let started = Instant::now();
    let guards = acquire_guards(&mx, n).await?;
    let acquired_in = started.elapsed().as_secs_f64();
    let bytes = rss_bytes()?.saturating_sub(rss0) as f64 / n as f64;

    // Each guard refreshes every ttl/2; count them over GUARD_WINDOWS such windows.
    let before = commandstats(&mut info).await?;
    let (cpu0, wall0) = (cpu_time()?, Instant::now());
    tokio::time::sleep(ttl / 2 * GUARD_WINDOWS).await;
    let (cpu, wall) = (cpu_time()? - cpu0, wall0.elapsed());
    let after = commandstats(&mut info).await?;
    let calls = calls_between(&before, &after);
    let refreshes = evals(&calls);
    let cancelled = guards.iter().filter(|guard| guard.is_cancelled()).count();

    // Raw: the least a client keeps per held lock, its key and id; measured while the
    // guards are still held, so it cannot reuse memory they free.
    let rss0 = rss_bytes()?;
    let raw_locks: Vec<(String, String)> = (0..n)
        .map(|i| (format!("perf-guards:{i}"), raw_id(i)))
        .collect();
    let raw_bytes = rss_bytes()?.saturating_sub(rss0) as f64 / n as f64;
    drop(raw_locks);

    let (lost, unlock_errors) = release_guards(guards).await?;
    let windows = n as f64 * f64::from(GUARD_WINDOWS);
    println!(
        "guards\t{bytes}\t{raw_bytes}\t{}\t{}\t{}\t{cancelled}\t{lost}\t{unlock_errors}\t{acquired_in}\t{}",
        refreshes as f64 / windows,
        cpu.as_secs_f64() / wall.as_secs_f64(),
        cpu.as_secs_f64() / refreshes.max(1) as f64,
        breakdown(&calls, windows)
    );
    Ok(())
}

/// Runs [`guards_peer`] in a child process.
async fn idle_guards(n: usize, ttl: Duration) -> Result<IdleGuards> {
    let out = tokio::process::Command::new(std::env::current_exe()?)
        .args([
            PEER_ARG,
            "guards",
            &n.to_string(),
            &ttl.as_millis().to_string(),
        ])
        .kill_on_drop(true)
        .output()
        .await?;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let fields: Vec<&str> = stdout
        .lines()
        .find_map(|line| line.strip_prefix("guards\t"))
        .ok_or_else(|| format!("{} ({})", stderr.trim(), out.status))?
        .split('\t')
        .collect();
    let [bytes, raw_bytes, refreshes, cpu_per_s, cpu_per_refresh, cancelled, lost, unlock_errors, acquired_in, calls] =
        fields[..]
    else {
        return Err(format!("the {n}-guard process said {stdout:?}").into());
    };
    Ok(IdleGuards {
        bytes: bytes.parse()?,
        raw_bytes: raw_bytes.parse()?,
        refreshes: refreshes.parse()?,
        cpu_per_s: cpu_per_s.parse()?,
        cpu_per_refresh: Duration::from_secs_f64(cpu_per_refresh.parse()?),
        cancelled: cancelled.parse()?,
        lost: lost.parse()?,
        unlock_errors: unlock_errors.parse()?,
        acquired_in: acquired_in.parse()?,
        calls: calls.to_string(),
    })
}

async fn idle_guard_rows(rows: &mut Vec<Row>, notes: &mut Vec<String>) {
    for (id, n, ttl) in GUARD_RUNS {
        let what = format!(
            "{n} idle write guards on distinct keys, ttl {} s: client RSS per guard; \
             EVALSHA refreshes per guard per ttl/2; client CPU while idle",
            ttl.as_secs()
        );
        let made = idle_guards(n, ttl).await.map(|run| {
            notes.push(format!(
                "row {id} ({n} guards, ttl {} s, own process): acquired in {:.1} s; \
                 {} cancelled during the windows, {} found lost at unlock, {} unlocks \
                 failed; commands per guard per ttl/2: {}",
                ttl.as_secs(),
                run.acquired_in,
                run.cancelled,
                run.lost,
                run.unlock_errors,
                run.calls
            ));
            vec![Row::new(
                id,
                what.clone(),
                format!(
                    "{:.0} B/guard; {:.2} refreshes; CPU {:.0}% of a core ({:.0} µs/refresh)",
                    run.bytes,
                    run.refreshes,
                    run.cpu_per_s * 100.0,
                    run.cpu_per_refresh.as_secs_f64() * 1e6
                ),
                format!(
                    "{:.0} B/lock (key + id strings); 1 PEXPIRE (ideal, not measured)",
                    run.raw_bytes
                ),
                format!("memory {:.1}× raw", run.bytes / run.raw_bytes.max(1.0)),
            )]
        });
        push_rows(rows, id, &what, made);
    }
}
