//! Row 17 (`-- set-limit [N ...]`): where one `lua/lock_all.lua` call stops being a
//! sensible step. The script is sent as the crate assembles it (`base.lua`, `shared.lua`,
//! `lock_all.lua`, `tests/common/scripts.rs`) by redis-rs itself, with 3 KEYS a key, so
//! sets far beyond [`MAX_SET_KEYS`] reach the server. For each size, [`RUNS`] times: an
//! attempt blocked at the set's last key (held by another id), the acquire of every key
//! as a writer, and the release as `MultiGuard::unlock` sends it (one `unlock.lua` a key,
//! all at once on the one connection). The server's time comes from `SLOWLOG` (every
//! command logged, its execution time in µs): the time the script kept every other
//! client of the server waiting.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Script, ScriptInvocation, Value};
use redismutex::{RwMutex, MAX_SET_KEYS};

use crate::server::RedisServer;
use crate::table::{chain, Row};
use crate::{Result, FENCE_MS, TTL_MS};

/// The sizes measured when the command line names none.
pub(crate) const SIZES: [usize; 6] = [100, 1_000, 5_000, 10_000, 50_000, 100_000];
/// Runs of each size; the row gives their median and largest.
const RUNS: usize = 3;
/// The server time above which one call is said to block the server, in ms.
const BLOCK_BOUND_MS: f64 = 100.0;
/// redis-rs's default response timeout of a connection, in ms: a call that runs longer
/// fails on the client while the server still applies it.
const DEFAULT_RESPONSE_TIMEOUT_MS: f64 = 500.0;
/// Redis's `busy-reply-threshold` (`lua-time-limit`) by default, in ms: past it the
/// server answers other clients `BUSY` until the script ends.
const BUSY_REPLY_MS: f64 = 5000.0;
/// How often another client pings the server during an acquire.
const PING_EVERY: Duration = Duration::from_millis(1);
/// The id of the set, and of the holder that blocks its last key.
const ID: &str = "0123456789abcdef0123456789abcdef";
const OTHER_ID: &str = "fedcba9876543210fedcba9876543210";

/// What one run of one size measured, in ms (server times from `SLOWLOG`).
struct Run {
    blocked_server: f64,
    acquire_server: f64,
    acquire_round_trip: f64,
    unlock_wall: f64,
    /// Keys `unlock.lua` found still held by the set (all `n` unless the TTL ran out).
    held: usize,
    /// The slowest `PING` of another client during the acquire, in ms, and how many of
    /// its `PING`s were answered `BUSY`.
    ping_max: f64,
    busy: usize,
}

/// Row 17, one row a size of `sizes`, on a server of its own; the crate's own refusal
/// beyond [`MAX_SET_KEYS`] goes to `notes`.
pub(crate) async fn rows(sizes: &[usize], notes: &mut Vec<String>) -> Result<Vec<Row>> {
    let server = RedisServer::try_start()?;
    // No response timeout: redis-rs's default (500 ms) would end the largest calls'
    // waits while the server still runs them.
    let config = AsyncConnectionConfig::new().set_response_timeout(None);
    let mut conn = server
        .client()
        .get_multiplexed_async_connection_with_config(&config)
        .await?;
    for (name, value) in [
        ("slowlog-log-slower-than", "0"),
        ("slowlog-max-len", "100000"),
    ] {
        redis::cmd("CONFIG")
            .arg("SET")
            .arg(name)
            .arg(value)
            .query_async::<()>(&mut conn)
            .await?;
    }
    let lock_all = crate::scripts::script("lock_all.lua");
    let unlock = crate::scripts::script("unlock.lua");
    let probe = server
        .client()
        .get_multiplexed_async_connection_with_config(&config)
        .await?;
    lock_all.prepare_invoke().load_async(&mut conn).await?;
    unlock.prepare_invoke().load_async(&mut conn).await?;
    notes.push(crate_refusal(&conn).await);
    let listed: Vec<String> = sizes.iter().map(usize::to_string).collect();
    notes.push(format!(
        "row 17: sizes {} (`-- set-limit N ...` measures others); TTL {TTL_MS} ms",
        listed.join(" ")
    ));
    let mut rows = Vec::new();
    for &n in sizes {
        eprintln!("row 17: lock_all.lua with {n} keys ...");
        let mut runs = Vec::new();
        let mut refused = None;
        for _ in 0..RUNS {
            match run(&mut conn, &probe, &lock_all, &unlock, n).await {
                Ok(run) => runs.push(run),
                Err(err) => {
                    refused = Some(chain(&*err));
                    break;
                }
            }
        }
        rows.push(row(n, &runs, refused));
    }
    Ok(rows)
}

/// The crate's answer to a set of [`MAX_SET_KEYS`] + 1 keys.
async fn crate_refusal(conn: &MultiplexedConnection) -> String {
    let mx = RwMutex::new(conn.clone(), "perf-limit");
    let keys = (0..=MAX_SET_KEYS).map(|i| format!("refused:{i}"));
    match mx.lock_all().write(keys).await {
        Ok(_) => format!("row 17: the crate took a set of {} keys", MAX_SET_KEYS + 1),
        Err(err) => format!(
            "row 17: the crate refuses a set of {} keys before sending anything: {}",
            MAX_SET_KEYS + 1,
            chain(&err)
        ),
    }
}

/// The lock key of key `i` of the set of `n` keys.
fn lock_key(n: usize, i: usize) -> String {
    format!("limit:{n}:{i}")
}

/// `lock_all.lua` on the `n` keys of the set, each written, as [`ID`], with no intent and
/// no clock floor.
fn invocation<'a>(script: &'a Script, n: usize) -> ScriptInvocation<'a> {
    let mut call = script.prepare_invoke();
    for i in 0..n {
        let key = lock_key(n, i);
        call.key(&key)
            .key(format!("{key}:lock-intent"))
            .key(format!("{key}:fence"));
    }
    call.arg(ID)
        .arg(TTL_MS)
        .arg(FENCE_MS)
        .arg("w".repeat(n))
        .arg("0")
        .arg("0");
    call
}

/// One run of `n` keys: the blocked attempt, the acquire, the release.
async fn run(
    conn: &mut MultiplexedConnection,
    probe: &MultiplexedConnection,
    lock_all: &Script,
    unlock: &Script,
    n: usize,
) -> Result<Run> {
    let last = lock_key(n, n - 1);
    redis::cmd("SET")
        .arg(&last)
        .arg(OTHER_ID)
        .arg("PX")
        .arg(TTL_MS)
        .query_async::<()>(conn)
        .await?;
    let (reply, _, blocked_server) = timed(conn, invocation(lock_all, n))
        .await
        .map_err(|err| format!("the blocked attempt: {}", chain(&*err)))?;
    match &reply {
        Value::Array(items) if matches!(items.first(), Some(Value::BulkString(b)) if b == b"blocked") =>
            {}
        other => return Err(format!("the blocked attempt replied {}", brief(other)).into()),
    }
    redis::cmd("DEL").arg(&last).query_async::<()>(conn).await?;

    let done = Arc::new(AtomicBool::new(false));
    let pings = tokio::spawn(ping(probe.clone(), Arc::clone(&done)));
    let acquired = timed(conn, invocation(lock_all, n)).await;
    done.store(true, Ordering::Relaxed);
    let (ping_max, busy) = pings.await?;
    let (reply, acquire_round_trip, acquire_server) =
        acquired.map_err(|err| format!("the acquire: {}", chain(&*err)))?;
    match &reply {
        Value::Array(tokens) if tokens.len() == n && matches!(tokens[0], Value::Int(_)) => {}
        other => return Err(format!("the acquire replied {}", brief(other)).into()),
    }

    let start = Instant::now();
    let releases = (0..n).map(|i| {
        let mut conn = conn.clone();
        let key = lock_key(n, i);
        let mut call = unlock.key(&key);
        call.arg(ID).arg(format!("{key}:released")).arg("w");
        async move { call.invoke_async::<i64>(&mut conn).await }
    });
    let released = join_all(releases).await;
    let unlock_wall = start.elapsed().as_secs_f64() * 1e3;
    let held = released
        .into_iter()
        .filter(|reply| matches!(reply, Ok(bits) if bits & 1 == 1))
        .count();
    Ok(Run {
        blocked_server,
        acquire_server,
        acquire_round_trip,
        unlock_wall,
        held,
        ping_max,
        busy,
    })
}

/// Another client's `PING`s, one every [`PING_EVERY`], until `done`: the slowest in ms,
/// and how many were answered `BUSY`.
async fn ping(mut conn: MultiplexedConnection, done: Arc<AtomicBool>) -> (f64, usize) {
    let (mut slowest, mut busy) = (0f64, 0);
    while !done.load(Ordering::Relaxed) {
        let start = Instant::now();
        let reply: redis::RedisResult<String> = redis::cmd("PING").query_async(&mut conn).await;
        slowest = slowest.max(start.elapsed().as_secs_f64() * 1e3);
        if matches!(&reply, Err(err) if err.code() == Some("BUSY")) {
            busy += 1;
        }
        tokio::time::sleep(PING_EVERY).await;
    }
    (slowest, busy)
}

/// Runs `call`: its reply (a server error as an error), the round trip in ms and the
/// server's execution time in ms from `SLOWLOG`.
async fn timed(
    conn: &mut MultiplexedConnection,
    call: ScriptInvocation<'_>,
) -> Result<(Value, f64, f64)> {
    redis::cmd("SLOWLOG")
        .arg("RESET")
        .query_async::<()>(conn)
        .await?;
    let start = Instant::now();
    let reply: Value = call.invoke_async(conn).await?;
    let round_trip = start.elapsed().as_secs_f64() * 1e3;
    let log: Value = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(-1)
        .query_async(conn)
        .await?;
    Ok((reply, round_trip, script_us(&log)? as f64 / 1e3))
}

/// The execution time in µs of the latest `EVALSHA` or `EVAL` in a `SLOWLOG GET -1` reply
/// (every entry since the reset, latest first; each entry: id, time, µs, arguments, ...).
fn script_us(log: &Value) -> Result<i64> {
    let Value::Array(entries) = log else {
        return Err(format!("SLOWLOG GET replied {}", brief(log)).into());
    };
    entries
        .iter()
        .find_map(|entry| {
            let Value::Array(fields) = entry else {
                return None;
            };
            let (Some(Value::Int(us)), Some(Value::Array(args))) = (fields.get(2), fields.get(3))
            else {
                return None;
            };
            match args.first() {
                Some(Value::BulkString(name)) if name.eq_ignore_ascii_case(b"evalsha") => Some(*us),
                Some(Value::BulkString(name)) if name.eq_ignore_ascii_case(b"eval") => Some(*us),
                _ => None,
            }
        })
        .ok_or_else(|| "no script in SLOWLOG".into())
}

/// A reply, cut to 200 characters.
fn brief(value: &Value) -> String {
    let text = format!("{value:?}");
    text.chars().take(200).collect()
}

/// The row of `n` keys: medians and largest of `runs`, or the refusal.
fn row(n: usize, runs: &[Run], refused: Option<String>) -> Row {
    let bytes: usize = (0..n).map(|i| 3 * lock_key(n, i).len() + 18).sum();
    let what = format!(
        "`lock_all.lua`, {n} write keys ({} KEYS, {} KB of key names), one EVALSHA, {} runs: \
         median (max)",
        3 * n,
        bytes / 1000,
        runs.len()
    );
    let stat = |get: fn(&Run) -> f64| {
        let mut values: Vec<f64> = runs.iter().map(get).collect();
        values.sort_by(f64::total_cmp);
        values
            .get(values.len() / 2)
            .map(|median| (*median, values[values.len() - 1]))
    };
    let show = |get: fn(&Run) -> f64| match stat(get) {
        Some((median, max)) => format!("{median:.1} ms ({max:.1})"),
        None => "—".into(),
    };
    let library = format!(
        "acquire: server {}, round trip {}, another client's slowest PING {}{}; blocked \
         attempt (last key held): server {}; unlock ({n} unlock.lua at once): {}",
        show(|run| run.acquire_server),
        show(|run| run.acquire_round_trip),
        show(|run| run.ping_max),
        match runs.iter().map(|run| run.busy).max() {
            Some(busy) if busy > 0 => format!(" ({busy} answered BUSY)"),
            _ => String::new(),
        },
        show(|run| run.blocked_server),
        show(|run| run.unlock_wall),
    );
    let mut verdict = Vec::new();
    if let Some(err) = refused {
        verdict.push(format!(
            "REFUSED: {}",
            err.replace('|', "/").replace('\n', " ")
        ));
    }
    if let Some((_, max)) = stat(|run| run.acquire_server.max(run.blocked_server)) {
        verdict.push(if max > BLOCK_BOUND_MS {
            format!("one call holds the server over {BLOCK_BOUND_MS:.0} ms")
        } else {
            format!("under {BLOCK_BOUND_MS:.0} ms")
        });
        if max > DEFAULT_RESPONSE_TIMEOUT_MS {
            verdict.push(format!(
                "its reply comes after redis-rs's default response timeout \
                 ({DEFAULT_RESPONSE_TIMEOUT_MS:.0} ms)"
            ));
        }
        if max > BUSY_REPLY_MS {
            verdict.push(format!(
                "past Redis's busy-reply-threshold ({BUSY_REPLY_MS:.0} ms), when other \
                 clients are answered BUSY"
            ));
        }
    }
    if let Some(least) = runs
        .iter()
        .map(|run| run.held)
        .min()
        .filter(|&held| held < n)
    {
        verdict.push(format!(
            "the TTL ({TTL_MS} ms) ran out before the release: unlock found as few as \
             {least} of {n} keys held"
        ));
    }
    let verdict = if verdict.is_empty() {
        "—".to_string()
    } else {
        verdict.join("; ")
    };
    Row::new("17", what, library, "—".into(), verdict)
}
