//! The child's side of a run: holds the guards in this process and prints the figures.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redismutex::{RwMutex, WriteGuard};
use tokio::task::JoinSet;

use super::inspect::{dbsize, existing, info_field, patient, server, stray_keys};
use super::{GuardRun, NAME};
use crate::commands::{breakdown, calls_between, commandstats, evals};
use crate::proc::Process;
use crate::raw::raw_id;
use crate::table::chain;
use crate::Result;

/// The ttl/2 windows over which CPU and renewals are measured.
pub(super) const WINDOWS: u32 = 2;
/// Failed acquires made again in a run before it gives up.
const RETRIES: usize = 1_000;
/// How long past the TTL to wait for the dropped guards' lock keys to go.
pub(super) const RELEASE_WAIT: Duration = Duration::from_secs(5);

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
pub(crate) async fn acquire(
    mx: &RwMutex<MultiplexedConnection>,
    n: usize,
    in_flight: usize,
) -> Result<(Vec<WriteGuard>, usize)> {
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
    guards: &[WriteGuard],
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
    guards: Vec<WriteGuard>,
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
