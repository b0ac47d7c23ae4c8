//! Row 18 (`-- holders`): what holder identity (`Builder::describe_holder`) costs, on a
//! server of its own, each figure with the handle's descriptions off and on in the same
//! run, alternating:
//!
//! - 18a, the uncontended write cycle (one task, `write().await` + `unlock()` on its own
//!   key) in [`ROUNDS`] rounds of [`PHASE`] each for the raw baseline (`SET NX PX` +
//!   compare-and-delete), the library off and on, in a rotating order; each ratio to the
//!   raw baseline is taken within its round, and the cell is the median over the rounds;
//! - 18b, 100,000 idle write guards (TTL 4 s) renewed by the refresher: [`RUNS`] runs of
//!   off and on, alternating, each acquiring the guards, then measuring the server's and
//!   this process's CPU time over [`WINDOWS`] renewal windows (ttl/2 each: every guard is
//!   renewed once a window), then dropping them and waiting until every lock key is gone.
//!   The baseline is the same run's guards without descriptions.

use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redismutex::RwMutex;

use crate::guards::child::acquire;
use crate::guards::inspect::patient;
use crate::locking::raw_release;
use crate::proc::Process;
use crate::raw::{raw_id, raw_set, RELEASE};
use crate::server::RedisServer;
use crate::table::{per_s, Row};
use crate::{Result, TTL, TTL_MS};

/// Rounds of the cycle, each a phase of every variant.
const ROUNDS: usize = 9;
/// How long one variant runs in a round.
const PHASE: Duration = Duration::from_millis(700);
/// Runs of the idle guards, each of both variants.
const RUNS: usize = 3;
/// Idle guards per run.
const GUARDS: usize = 100_000;
/// Renewal windows (ttl/2 each) measured per run.
const WINDOWS: u32 = 2;

/// The two rows of `-- holders`, measured on `server`; details go to `notes`.
pub(crate) async fn rows(server: &RedisServer, notes: &mut Vec<String>) -> Result<Vec<Row>> {
    // A response timeout that a loaded machine does not reach while 100,000 guards renew.
    let conn = patient(server).await?;
    let cycle = cycle(&conn, notes).await?;
    let idle = idle(server, &conn, notes).await?;
    Ok(vec![cycle, idle])
}

/// A mutex `name` on `conn`, describing its holders when `on`.
fn mutex(
    conn: &MultiplexedConnection,
    name: &str,
    on: bool,
) -> Result<RwMutex<MultiplexedConnection>> {
    Ok(RwMutex::builder(conn.clone(), name)
        .ttl(TTL)
        .describe_holder(on)
        .build()?)
}

/// Cycles per second of one variant for [`PHASE`]: 0 raw, 1 off, 2 on.
async fn phase(
    variant: usize,
    conn: &MultiplexedConnection,
    mutexes: &[RwMutex<MultiplexedConnection>; 2],
) -> Result<f64> {
    let mut raw_conn = conn.clone();
    let id = raw_id(0);
    let started = Instant::now();
    let mut cycles = 0u64;
    while started.elapsed() < PHASE {
        match variant {
            0 => {
                if !raw_set(&mut raw_conn, "perf-holders-raw", &id, TTL_MS).await? {
                    return Err("the raw key is taken".into());
                }
                raw_release(&mut raw_conn, &RELEASE, "perf-holders-raw", &id).await?;
            }
            v => {
                let guard = mutexes[v - 1].write().key("cycle").await?;
                guard.unlock().await?;
            }
        }
        cycles += 1;
    }
    Ok(cycles as f64 / started.elapsed().as_secs_f64())
}

/// Row 18a.
async fn cycle(conn: &MultiplexedConnection, notes: &mut Vec<String>) -> Result<Row> {
    let mutexes = [
        mutex(conn, "perf-holders-off", false)?,
        mutex(conn, "perf-holders-on", true)?,
    ];
    // Warm: the scripts loaded, the fence keys seen (the fast path), the connection busy.
    for variant in 0..3 {
        phase(variant, conn, &mutexes).await?;
    }
    let (mut off, mut on, mut cost, mut raw) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let mut rates = [0.0; 3];
        for step in 0..3 {
            let variant = (round + step) % 3;
            rates[variant] = phase(variant, conn, &mutexes).await?;
        }
        raw.push(rates[0]);
        off.push(rates[1] / rates[0]);
        on.push(rates[2] / rates[0]);
        cost.push(rates[2] / rates[1]);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (off, on, cost, raw) = (
        median(&mut off),
        median(&mut on),
        median(&mut cost),
        median(&mut raw),
    );
    notes.push(format!(
        "18a: {ROUNDS} rounds of {PHASE:?} per variant; medians: off {off:.3} of raw, on {on:.3} of raw, on/off {cost:.3}"
    ));
    Ok(Row::new(
        "18a",
        "uncontended write cycle, describe off / on",
        format!("off {off:.3} / on {on:.3} of raw"),
        per_s(raw),
        format!("on/off {cost:.3}"),
    ))
}

/// The server's and this process's CPU time over [`WINDOWS`] renewal windows of
/// [`GUARDS`] idle guards of a mutex describing its holders when `on`, each in µs per
/// renewal; the guards cancelled meanwhile, if any, is an error.
async fn idle_run(
    server: &RedisServer,
    conn: &MultiplexedConnection,
    run: usize,
    on: bool,
) -> Result<(f64, f64)> {
    let name = format!("perf-idle-{run}-{on}");
    let mx = mutex(conn, &name, on)?;
    let (guards, _) = acquire(&mx, GUARDS, 500).await?;
    // Into the steady state: every guard renewed once since its acquire.
    tokio::time::sleep(TTL / 2).await;
    let redis = Process::Pid(server.pid());
    let (me0, redis0) = (Process::Me.cpu_time()?, redis.cpu_time()?);
    tokio::time::sleep(TTL / 2 * WINDOWS).await;
    let (me, redis_cpu) = (Process::Me.cpu_time()? - me0, redis.cpu_time()? - redis0);
    if guards.iter().any(redismutex::Guard::is_cancelled) {
        return Err(format!("a guard of run {run} (describe {on}) was lost").into());
    }
    drop(guards);
    // Every lock key released before the next run.
    let pattern = format!("{name}:*");
    let started = Instant::now();
    loop {
        let mut conn = conn.clone();
        let (_, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(0)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1_000_000)
            .query_async(&mut conn)
            .await?;
        if keys.iter().all(|key| key.ends_with(":fence")) || started.elapsed() > TTL * 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let renewals = (GUARDS as f64) * f64::from(WINDOWS);
    Ok((
        redis_cpu.as_secs_f64() * 1e6 / renewals,
        me.as_secs_f64() * 1e6 / renewals,
    ))
}

/// Row 18b.
async fn idle(
    server: &RedisServer,
    conn: &MultiplexedConnection,
    notes: &mut Vec<String>,
) -> Result<Row> {
    let (mut server_cost, mut client_cost) = (Vec::new(), Vec::new());
    for run in 0..RUNS {
        let order = if run % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        let mut figures = [(0.0, 0.0); 2];
        for on in order {
            figures[usize::from(on)] = idle_run(server, conn, run, on).await?;
        }
        let [(off_s, off_c), (on_s, on_c)] = figures;
        notes.push(format!(
            "18b run {run}: µs per renewal, server off {off_s:.2} / on {on_s:.2} ({:.3}), client off {off_c:.2} / on {on_c:.2} ({:.3})",
            on_s / off_s,
            on_c / off_c
        ));
        server_cost.push(on_s / off_s);
        client_cost.push(on_c / off_c);
    }
    let range = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        format!("{:.3}–{:.3}", v[0], v[v.len() - 1])
    };
    Ok(Row::new(
        "18b",
        "100,000 idle renewals (TTL 4 s), describe on / off",
        format!("server CPU {}", range(&mut server_cost)),
        "describe off, same run".to_owned(),
        format!("client CPU {}", range(&mut client_cost)),
    ))
}
