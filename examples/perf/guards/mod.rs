//! Rows 9 and 15: idle write guards, each run held by a process of its own (a child of
//! the runner, so no memory freed by earlier rows is reused) on a `redis-server` of its
//! own. Row 9 holds 10,000 and 100,000 guards with a TTL of 4 s, and 100,000 with 12 s;
//! row 15 (`-- million`) holds 1,000,000 with 30 s. Each run:
//!
//! - acquires the guards on distinct keys of one mutex over one connection, a bounded
//!   number of requests in flight, and times it;
//! - measures the client's RSS growth, and the server's `used_memory` and RSS growth,
//!   per guard;
//! - over [`WINDOWS`] windows of ttl/2, measures the client's and the server's CPU time
//!   (`/proc/<pid>/stat`) over the wall time, and counts renewals as `PEXPIRE` calls
//!   (`INFO commandstats`): a writer's renewal runs exactly one `PEXPIRE`, however
//!   renewals are grouped into scripts or pipelines;
//! - drops every guard, waits until none of their lock keys (`Guard::key`) exists, for
//!   at most [`RELEASE_WAIT`] past the TTL, and reports how many were left, when the last
//!   went, and how many went by TTL expiry (`expired_keys`) instead of being released;
//!   then counts the keys under the mutex's name other than fence counters.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redismutex::{Guard, RwMutex};
use tokio::task::JoinSet;

use crate::proc::Process;
use crate::server::RedisServer;
use crate::{
    breakdown, calls_between, chain, commandstats, evals, push_rows, raw_id, Result, Row, PEER_ARG,
};

/// One run: its row, how many guards, their mutex's TTL, and how many acquires may be in
/// flight at once.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GuardRun {
    pub(crate) id: &'static str,
    pub(crate) guards: usize,
    pub(crate) ttl: Duration,
    pub(crate) in_flight: usize,
}

/// Row 9. A 4 s TTL asks 100k guards for 50k renewals a second, so 100k also runs with a
/// longer one.
pub(crate) const ROW_9: [GuardRun; 3] = [
    GuardRun {
        id: "9a",
        guards: 10_000,
        ttl: Duration::from_secs(4),
        in_flight: 500,
    },
    GuardRun {
        id: "9b",
        guards: 100_000,
        ttl: Duration::from_secs(4),
        in_flight: 500,
    },
    GuardRun {
        id: "9c",
        guards: 100_000,
        ttl: Duration::from_secs(12),
        in_flight: 500,
    },
];

/// Row 15, `-- million`.
pub(crate) const MILLION: GuardRun = GuardRun {
    id: "15",
    guards: 1_000_000,
    ttl: Duration::from_secs(30),
    in_flight: 1_000,
};

/// The ttl/2 windows over which CPU and renewals are measured.
const WINDOWS: u32 = 2;
/// The connections' response timeout: these rows count bytes and renewals, not latency,
/// so a slow reply while the server (or this process) catches up must fail neither an
/// acquire nor a look at the figures. (The library bounds its own calls by the lock's
/// validity.)
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(60);
/// Failed acquires made again in a run before it gives up.
const RETRIES: usize = 1_000;
/// How long past the TTL to wait for the dropped guards' lock keys to go.
const RELEASE_WAIT: Duration = Duration::from_secs(5);
/// The mutex's name: its lock keys are `perf-guards:<i>`.
const NAME: &str = "perf-guards";
/// Keys checked per pipeline, and per `SCAN` step.
const CHUNK: usize = 10_000;

/// The guards run as `--peer guards N TTL_MS IN_FLIGHT`.
pub(crate) const ROLE: &str = "guards";

/// The child's side: parses `args` (after the role), runs, and prints the figures on one
/// tab-separated line of `name=value` fields after `guards`.
pub(crate) async fn peer(args: &[String]) -> Result<()> {
    let [n, ttl_ms, in_flight] = args else {
        return Err(format!("expected N TTL_MS IN_FLIGHT, got {args:?}").into());
    };
    let run = GuardRun {
        id: "",
        guards: n.parse()?,
        ttl: Duration::from_millis(ttl_ms.parse()?),
        in_flight: in_flight.parse()?,
    };
    let figures = measure(run).await?;
    let fields: Vec<String> = figures.iter().map(|(k, v)| format!("{k}={v}")).collect();
    println!("guards\t{}", fields.join("\t"));
    Ok(())
}

/// The figures of one run, by name.
type Figures = BTreeMap<&'static str, String>;

/// A connection to `server` whose replies may take up to [`RESPONSE_TIMEOUT`].
async fn patient(server: &RedisServer) -> Result<MultiplexedConnection> {
    let config = redis::AsyncConnectionConfig::new().set_response_timeout(Some(RESPONSE_TIMEOUT));
    Ok(server
        .client()
        .get_multiplexed_async_connection_with_config(&config)
        .await?)
}

/// A `redis-server` for one run, with no `maxmemory`, and a connection to it for the
/// figures.
async fn server() -> Result<(RedisServer, MultiplexedConnection)> {
    let server = RedisServer::try_start()?;
    let mut info = patient(&server).await?;
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("0")
        .query_async(&mut info)
        .await?;
    Ok((server, info))
}

/// `field` of `INFO section`, as a number.
async fn info_field(conn: &mut MultiplexedConnection, section: &str, field: &str) -> Result<u64> {
    let info: String = redis::cmd("INFO").arg(section).query_async(conn).await?;
    let value = info
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .ok_or_else(|| format!("no {field} in INFO {section}"))?;
    Ok(value.trim().parse()?)
}

/// One run in this process.
async fn measure(run: GuardRun) -> Result<Figures> {
    let (server, mut info) = server().await?;
    let redis = Process::Pid(server.pid());
    let mx = RwMutex::builder(patient(&server).await?, NAME)
        .ttl(run.ttl)
        .build()?;
    let n = run.guards as f64;
    let mut figures = Figures::new();

    let (rss0, used0, redis_rss0) = (
        Process::Me.rss_bytes()?,
        info_field(&mut info, "memory", "used_memory").await?,
        redis.rss_bytes()?,
    );
    let started = Instant::now();
    let (guards, retried) = acquire(&mx, run.guards, run.in_flight).await?;
    let acquired_in = started.elapsed().as_secs_f64();
    eprintln!("  {} guards acquired in {acquired_in:.1} s", run.guards);
    let (rss, used, redis_rss) = (
        Process::Me.rss_bytes()?,
        info_field(&mut info, "memory", "used_memory").await?,
        redis.rss_bytes()?,
    );
    let per_guard =
        |after: u64, before: u64| format!("{}", after.saturating_sub(before) as f64 / n);
    figures.insert("acquired_s", acquired_in.to_string());
    figures.insert("acquire_retries", retried.to_string());
    figures.insert("client_bytes", per_guard(rss, rss0));
    figures.insert("client_rss", rss.to_string());
    figures.insert("server_used_bytes", per_guard(used, used0));
    figures.insert("server_rss_bytes", per_guard(redis_rss, redis_rss0));
    figures.insert("server_rss", redis_rss.to_string());

    idle(run, &guards, &mut info, redis, &mut figures).await?;
    figures.insert("raw_bytes", raw_bytes(run.guards)?.to_string());
    released(run, guards, &mut info, &mut figures).await?;
    Ok(figures)
}

/// `n` write guards on distinct keys, at most `in_flight` requests at a time, and how
/// many requests failed and were made again (up to [`RETRIES`] in all: a loaded machine
/// may hold a reply past the connection's timeout).
async fn acquire(
    mx: &RwMutex<MultiplexedConnection>,
    n: usize,
    in_flight: usize,
) -> Result<(Vec<Guard>, usize)> {
    let started = Instant::now();
    let mut guards = Vec::with_capacity(n);
    let mut requests = JoinSet::new();
    let (mut next, mut again, mut retried) = (0, Vec::new(), 0);
    while guards.len() < n {
        while requests.len() < in_flight {
            let Some(i) = again.pop().or((next < n).then_some(next)) else {
                break;
            };
            next = next.max(i + 1);
            let request = mx.write().key(i.to_string());
            requests.spawn(async move { (i, request.await) });
        }
        let (i, done) = requests.join_next().await.ok_or("no request in flight")??;
        match done {
            Ok(guard) => guards.push(guard),
            Err(_) if retried < RETRIES => {
                retried += 1;
                again.push(i);
            }
            Err(err) => {
                return Err(format!(
                    "acquire failed after {} guards in {:.1} s and {retried} retries: {}",
                    guards.len(),
                    started.elapsed().as_secs_f64(),
                    chain(&err)
                )
                .into())
            }
        }
    }
    Ok((guards, retried))
}

/// Waits [`WINDOWS`] × ttl/2 with the guards held: CPU shares, renewals and the other
/// commands per guard per window, and the guards cancelled by the end.
async fn idle(
    run: GuardRun,
    guards: &[Guard],
    info: &mut MultiplexedConnection,
    redis: Process,
    figures: &mut Figures,
) -> Result<()> {
    let before = commandstats(info).await?;
    let (cpu0, redis_cpu0, wall0) = (Process::Me.cpu_time()?, redis.cpu_time()?, Instant::now());
    tokio::time::sleep(run.ttl / 2 * WINDOWS).await;
    let (cpu, redis_cpu, wall) = (
        Process::Me.cpu_time()? - cpu0,
        redis.cpu_time()? - redis_cpu0,
        wall0.elapsed().as_secs_f64(),
    );
    let calls = calls_between(&before, &commandstats(info).await?);
    let windows = run.guards as f64 * f64::from(WINDOWS);
    let pexpire = calls.get("pexpire").copied().unwrap_or(0);
    figures.insert("client_cpu", (cpu.as_secs_f64() / wall).to_string());
    figures.insert("server_cpu", (redis_cpu.as_secs_f64() / wall).to_string());
    figures.insert("renewals", (pexpire as f64 / windows).to_string());
    figures.insert("evals", (evals(&calls) as f64 / windows).to_string());
    figures.insert(
        "client_us_per_renewal",
        (cpu.as_secs_f64() * 1e6 / pexpire.max(1) as f64).to_string(),
    );
    figures.insert("calls", breakdown(&calls, windows));
    let cancelled = guards.iter().filter(|guard| guard.is_cancelled()).count();
    figures.insert("cancelled", cancelled.to_string());
    Ok(())
}

/// The least a client keeps per held lock, its key and id: RSS growth per lock for `n`
/// such strings (made while the guards are still held, so they cannot reuse memory the
/// guards free).
fn raw_bytes(n: usize) -> Result<f64> {
    let rss0 = Process::Me.rss_bytes()?;
    let raw_locks: Vec<(String, String)> =
        (0..n).map(|i| (format!("{NAME}:{i}"), raw_id(i))).collect();
    let bytes = Process::Me.rss_bytes()?.saturating_sub(rss0) as f64 / n as f64;
    drop(raw_locks);
    Ok(bytes)
}

/// Drops every guard and waits for their lock keys to go: until `DBSIZE` is down by as
/// many keys as the guards held (which costs the server next to nothing, where looking
/// at each key would slow the releases), for at most the TTL + [`RELEASE_WAIT`]. Then
/// looks at each lock key: how many were left, when the last went, how many expired
/// instead of being released, and the keys under [`NAME`] left other than fence
/// counters.
async fn released(
    run: GuardRun,
    guards: Vec<Guard>,
    info: &mut MultiplexedConnection,
    figures: &mut Figures,
) -> Result<()> {
    let keys: Vec<String> = guards.iter().map(|guard| guard.key().to_string()).collect();
    let held = existing(info, keys.clone()).await?.len() as u64;
    let expired0 = info_field(info, "stats", "expired_keys").await?;
    let without_locks = dbsize(info).await?.saturating_sub(held);
    let dropped = Instant::now();
    drop(guards);
    let cap = run.ttl + RELEASE_WAIT;
    while dbsize(info).await? > without_locks && dropped.elapsed() < cap {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let gone_in = dropped.elapsed().as_secs_f64();
    let left = existing(info, keys).await?.len();
    let expired = info_field(info, "stats", "expired_keys").await? - expired0;
    eprintln!("  dropped: {left} lock keys left after {gone_in:.1} s, {expired} expired");
    figures.insert("keys_left", left.to_string());
    figures.insert("keys_gone_s", gone_in.to_string());
    figures.insert("expired", expired.to_string());
    figures.insert("stray_keys", stray_keys(info).await?.to_string());
    Ok(())
}

/// The server's number of keys.
async fn dbsize(conn: &mut MultiplexedConnection) -> Result<u64> {
    Ok(redis::cmd("DBSIZE").query_async(conn).await?)
}

/// Those of `keys` that exist.
async fn existing(conn: &mut MultiplexedConnection, keys: Vec<String>) -> Result<Vec<String>> {
    let mut left = Vec::new();
    for chunk in keys.chunks(CHUNK) {
        let mut pipe = redis::pipe();
        for key in chunk {
            pipe.cmd("EXISTS").arg(key);
        }
        let exists: Vec<bool> = pipe.query_async(conn).await?;
        left.extend(
            chunk
                .iter()
                .zip(exists)
                .filter(|&(_, exists)| exists)
                .map(|(key, _)| key.clone()),
        );
    }
    Ok(left)
}

/// Keys under [`NAME`] that are not fence counters (`:fence`), by `SCAN`.
async fn stray_keys(conn: &mut MultiplexedConnection) -> Result<usize> {
    let (mut cursor, mut stray) = (0u64, 0);
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{NAME}:*"))
            .arg("COUNT")
            .arg(CHUNK)
            .query_async(conn)
            .await?;
        stray += keys.iter().filter(|key| !key.ends_with(":fence")).count();
        if next == 0 {
            return Ok(stray);
        }
        cursor = next;
    }
}

// ---------------------------------------------------------------- the runner's side

/// [`peer`] in a child process for `run`; its progress goes to this process's stderr.
async fn in_child(run: GuardRun) -> Result<Measured> {
    let out = tokio::process::Command::new(std::env::current_exe()?)
        .args([
            PEER_ARG,
            ROLE,
            &run.guards.to_string(),
            &run.ttl.as_millis().to_string(),
            &run.in_flight.to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()?
        .wait_with_output()
        .await?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|line| line.strip_prefix("guards\t"))
        .ok_or_else(|| {
            format!(
                "the {}-guard process exited with {}",
                run.guards, out.status
            )
        })?;
    let figures = line
        .split('\t')
        .filter_map(|field| field.split_once('='))
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect();
    Ok(Measured(figures))
}

/// The figures a child printed.
struct Measured(BTreeMap<String, String>);

impl Measured {
    fn text(&self, name: &str) -> Result<&str> {
        self.0
            .get(name)
            .map(String::as_str)
            .ok_or_else(|| format!("no {name} in the child's figures").into())
    }

    fn num(&self, name: &str) -> Result<f64> {
        Ok(self.text(name)?.parse()?)
    }
}

/// The rows of `runs`, each measured in a child process; details go to `notes`.
pub(crate) async fn rows(runs: &[GuardRun], rows: &mut Vec<Row>, notes: &mut Vec<String>) {
    for &run in runs {
        let what = format!(
            "{} idle write guards on distinct keys, ttl {} s, own process: client RSS per \
             guard; redis-server used_memory (and RSS) per guard; client / server CPU while \
             idle; renewals per guard per ttl/2 (PEXPIRE calls, commandstats); lock keys \
             left after the guards are dropped",
            run.guards,
            run.ttl.as_secs()
        );
        eprintln!(
            "row {}: {} guards, ttl {} s ...",
            run.id,
            run.guards,
            run.ttl.as_secs()
        );
        let made = row(run, &what, notes).await.map(|row| vec![row]);
        push_rows(rows, run.id, &what, made);
    }
}

/// One run's row, measured in a child process; its details go to `notes`.
async fn row(run: GuardRun, what: &str, notes: &mut Vec<String>) -> Result<Row> {
    let m = in_child(run).await?;
    notes.push(note(run, &m)?);
    Ok(Row::new(run.id, what, library(&m)?, raw(&m)?, ratio(&m)?))
}

/// The library's cell.
fn library(m: &Measured) -> Result<String> {
    Ok(format!(
        "{:.0} B/guard; server {:.0} B/guard (RSS {:.0} B); CPU client {:.0}% / server \
         {:.0}% of a core ({:.0} µs client CPU per renewal); {:.2} renewals; lock keys left \
         after drop: {} ({:.1} s after the drop; {} went by TTL); acquired in {:.1} s",
        m.num("client_bytes")?,
        m.num("server_used_bytes")?,
        m.num("server_rss_bytes")?,
        m.num("client_cpu")? * 100.0,
        m.num("server_cpu")? * 100.0,
        m.num("client_us_per_renewal")?,
        m.num("renewals")?,
        m.text("keys_left")?,
        m.num("keys_gone_s")?,
        m.text("expired")?,
        m.num("acquired_s")?,
    ))
}

fn raw(m: &Measured) -> Result<String> {
    Ok(format!(
        "{:.0} B/lock (key + id strings); 1 PEXPIRE (ideal, not measured)",
        m.num("raw_bytes")?
    ))
}

fn ratio(m: &Measured) -> Result<String> {
    Ok(format!(
        "client memory {:.1}× raw",
        m.num("client_bytes")? / m.num("raw_bytes")?.max(1.0)
    ))
}

fn note(run: GuardRun, m: &Measured) -> Result<String> {
    Ok(format!(
        "row {} ({} guards, ttl {} s, {} acquires in flight, own process and server): \
         client RSS {:.0} MB, redis-server RSS {:.0} MB once acquired; \
         {} guards cancelled by the end of the windows; {:.2} EVALSHA/EVAL per guard per \
         ttl/2; {} keys under the name other than fence counters at the end; {} failed \
         acquires made again; commands per guard per ttl/2: {}",
        run.id,
        run.guards,
        run.ttl.as_secs(),
        run.in_flight,
        m.num("client_rss")? / 1e6,
        m.num("server_rss")? / 1e6,
        m.text("cancelled")?,
        m.num("evals")?,
        m.text("stray_keys")?,
        m.text("acquire_retries")?,
        m.text("calls")?,
    ))
}
