//! Rows 10–11: throughput over the quorum, one task and many, and the commands and
//! client CPU time of one task's cycles.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redismutex::{Quorum, RwMutex};

use super::QUORUM_NODES;
use crate::commands::{breakdown, calls_between, commandstats, evals};
use crate::proc::Process;
use crate::server::RedisServer;
use crate::table::{per_s, ratio, Row};
use crate::throughput::{rates, Bench, Workload};
use crate::{Result, TASKS};

/// Row 10's notes: cycles (1 task) whose commands are counted on every node.
const COUNTED_CYCLES: usize = 1000;

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

/// Rows 10–11 on the quorum of `servers`: one task, then [`TASKS`] tasks; row 10's
/// commands and CPU time go to `notes`.
pub(crate) async fn rows(servers: &[RedisServer], notes: &mut Vec<String>) -> Result<Vec<Row>> {
    let bench = quorum_bench(servers).await?;
    use Workload::{QuorumRaw, QuorumWrite, Raw, Write};
    let workloads = [Raw, Write, QuorumRaw, QuorumWrite];
    let one = rates(&bench, &workloads, 1).await;
    let many = rates(&bench, &workloads, TASKS).await;
    count(servers, &bench, notes).await?;
    let mut rows = pair(("10a", "10b"), 1, &one);
    rows.extend(pair(("11a", "11b"), TASKS, &many));
    Ok(rows)
}

/// Row 10's notes: what one task's cycles cost, the quorum's, its raw baseline's and the
/// single-server library's.
async fn count(servers: &[RedisServer], bench: &Bench, notes: &mut Vec<String>) -> Result<()> {
    use Workload::{QuorumRaw, QuorumWrite, Write};
    for (workload, what) in [
        (QuorumWrite, "quorum library (write + unlock)"),
        (QuorumRaw, "raw quorum cycle"),
        (Write, "single-server library (write + unlock on node 1)"),
    ] {
        let counted = quorum_calls(servers, bench, workload).await?;
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
    Ok(())
}

/// Two rows for `tasks` tasks from the rates of [`rows`]' workloads: the quorum against
/// its raw baseline (`ids.0`), and against the single-server library (`ids.1`).
fn pair(
    (vs_raw, vs_single): (&'static str, &'static str),
    tasks: usize,
    rates: &[Result<f64, String>],
) -> Vec<Row> {
    let [raw, write, quorum_raw, quorum_write] = rates else {
        unreachable!("one rate per workload")
    };
    let setting = if tasks == 1 {
        "uncontended quorum write cycle (write + unlock), 1 task".to_string()
    } else {
        format!("{tasks} tasks, own keys, over the quorum (one shared connection per node)")
    };
    vec![
        Row::new(
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
        ),
        Row::new(
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
        ),
    ]
}

/// The ratio of two rates, or a dash when either failed.
fn ratio_of(a: &Result<f64, String>, b: &Result<f64, String>) -> String {
    match (a, b) {
        (Ok(a), Ok(b)) => ratio(*a, *b),
        _ => "—".into(),
    }
}
