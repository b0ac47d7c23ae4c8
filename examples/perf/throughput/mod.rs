//! Rows 1–5: throughput on one server, the library next to the raw write cycle.

mod rates;
mod scripts;
mod workload;

use std::sync::Arc;

use redismutex::RwMutex;

use crate::server::RedisServer;
use crate::table::Row;
use crate::{Result, TASKS};
pub(crate) use rates::rates;
use rates::{floor_row, rate_row};
pub(crate) use workload::{Bench, Workload};
use Workload::{Fenced, Raw, Read, ReadFloor, Scripts, Write};

/// Rows 1–5 on `server`: one task, then [`TASKS`] tasks, over one shared connection.
pub(crate) async fn rows(server: &RedisServer) -> Result<Vec<Row>> {
    let conn = server.conn().await;
    let bench = Arc::new(Bench {
        mx: RwMutex::new(conn.clone(), "perf"),
        conn,
        nodes: Vec::new(),
        quorum: None,
    });
    let mut rows = one_task(&bench).await;
    rows.extend(many_tasks(&bench).await);
    Ok(rows)
}

/// Rows 1a and 1b: one task's write and read cycles.
async fn one_task(bench: &Arc<Bench>) -> Vec<Row> {
    let one = rates(bench, &[Raw, Write, Read], 1).await;
    let [raw1, write1, read1] = &one[..] else {
        unreachable!("one rate per workload")
    };
    vec![
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
    ]
}

/// Rows 2–5: [`TASKS`] tasks writing on their own keys, reading one key, and the
/// floors with no library (the fenced cycle, the fenced read cycle, the crate's scripts
/// sent bare).
async fn many_tasks(bench: &Arc<Bench>) -> Vec<Row> {
    let many = rates(
        bench,
        &[Raw, Write, Read, Fenced, ReadFloor, Scripts],
        TASKS,
    )
    .await;
    let [raw, write, read, fenced, read_floor, scripts] = &many[..] else {
        unreachable!("one rate per workload")
    };
    vec![
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
            "the fenced floor",
        ),
        floor_row(
            rate_row(
                "3",
                format!(
                    "{TASKS} readers on one key, one connection: read cycles/s (ratio to \
                     raw, and to the fenced read floor of row 4b, same phases)"
                ),
                read,
                raw,
            ),
            read,
            read_floor,
            "the fenced read floor",
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
            "4b",
            format!(
                "fenced read floor, no library, {TASKS} readers on one key: a script \
                 (intent EXISTS, SADD, PTTL/PEXPIRE, INCR fence), then SREM-EXISTS-PUBLISH \
                 script, cycles/s"
            ),
            read_floor,
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
    ]
}
