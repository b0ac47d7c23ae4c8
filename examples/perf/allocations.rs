//! Row 14: heap allocations per uncontended cycle (`write()`, `read()` and a semaphore's
//! `acquire()`, each followed by `unlock()`) next to the raw write cycle's, counted by
//! the counting global allocator (`benches/support/counting.rs`) on a current-thread
//! runtime in a thread of its own, on a server of its own, while the runner waits: so
//! nothing else allocates meanwhile. `cargo bench --bench alloc` counts more kinds of
//! cycle the same way.

use crate::counting::{per_cycle, PerCycle};
use crate::cycles::{Cycle, Subjects};
use crate::server::RedisServer;
use crate::table::Row;
use crate::{BoxError, Result};

/// Unmeasured cycles of each kind, then measured ones.
const WARM_UP: usize = 200;
const CYCLES: usize = 2000;
/// The cycles measured, the baseline first.
const MEASURED: [Cycle; 4] = [Cycle::Raw, Cycle::Write, Cycle::Read, Cycle::Permit];

/// Each of [`MEASURED`] per cycle, on the server at `url`.
fn count(url: String) -> Result<Vec<PerCycle>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let conn = redis::Client::open(url)?
            .get_multiplexed_async_connection()
            .await?;
        let subjects = Subjects::new(conn)?;
        let mut measured = Vec::new();
        for cycle in MEASURED {
            measured.push(per_cycle(WARM_UP, CYCLES, || subjects.run(cycle)).await?);
        }
        Ok::<_, BoxError>(measured)
    })
}

pub(crate) async fn row() -> Result<Row> {
    let server = RedisServer::try_start()?;
    let url = server.url();
    let measured = tokio::task::spawn_blocking(move || count(url)).await??;
    let [raw, write, read, permit] = measured[..] else {
        unreachable!("one count per cycle")
    };
    let cell = |made: &PerCycle| format!("{:.1} ({:.0} B)", made.allocations, made.bytes);
    Ok(Row::new(
        "14",
        format!(
            "heap allocations (and bytes allocated) per uncontended cycle, 1 task, \
             current-thread runtime, mean of {CYCLES} after {WARM_UP}: write + unlock; \
             read + unlock; semaphore acquire + unlock (4 permits)"
        ),
        format!(
            "write {}; read {}; permit {}",
            cell(&write),
            cell(&read),
            cell(&permit)
        ),
        format!("{} (SET NX PX + compare-and-delete EVALSHA)", cell(&raw)),
        format!(
            "allocations / bytes: write {}; read {}; permit {} raw",
            write.times(&raw),
            read.times(&raw),
            permit.times(&raw)
        ),
    ))
}
