//! Heap allocations per lock cycle, next to the raw redis-rs write cycle measured in the
//! same run, against a harness-started redis-server.
//!
//! The counting global allocator (`support/counting.rs`) counts every thread's
//! allocations; the cycles (`support/cycles.rs`) run one at a time on a current-thread
//! runtime, so nothing else allocates meanwhile and the counts repeat from run to run.
//! Each kind of cycle is warmed up, then averaged over many cycles: `write()`,
//! `read()`, `try_write()` and a semaphore's `acquire()`, each followed by `unlock()`;
//! `write()` followed by dropping the guard (counted until its background release has
//! ended); and the raw cycle, `SET key id NX PX ttl` and the compare-and-delete script
//! by EVALSHA.
//!
//! `cargo bench --bench alloc` prints a table; `cargo bench --bench alloc -- --test`,
//! and `cargo test --benches` (which runs it without `--bench`), run a few cycles of each.

#[path = "../tests/common/server.rs"]
#[allow(dead_code, unreachable_pub)]
mod server;

#[path = "raw.rs"]
#[allow(dead_code, unreachable_pub)]
mod raw;

#[path = "support/counting.rs"]
#[allow(dead_code, unreachable_pub)]
mod counting;

#[path = "support/cycles.rs"]
#[allow(dead_code, unreachable_pub)]
mod cycles;

use counting::{per_cycle, PerCycle};
use cycles::{Cycle, Subjects};

/// Unmeasured and measured cycles of each kind: (warm-up, measured).
const FULL: (usize, usize) = (500, 5000);
const QUICK: (usize, usize) = (20, 50);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|arg| arg == "--test") || !args.iter().any(|arg| arg == "--bench");
    let (warm_up, cycles) = if quick { QUICK } else { FULL };
    let server = server::RedisServer::start();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let measured: Vec<(Cycle, PerCycle)> = runtime.block_on(async {
        let subjects = Subjects::new(server.conn().await).expect("mutexes");
        let mut measured = Vec::new();
        for cycle in Cycle::ALL {
            let made = per_cycle(warm_up, cycles, || subjects.run(cycle))
                .await
                .unwrap_or_else(|err| panic!("{cycle:?}: {err}"));
            measured.push((cycle, made));
        }
        measured
    });
    let raw = measured[0].1;
    println!(
        "allocations per cycle, {cycles} cycles each after {warm_up} (current-thread runtime)"
    );
    println!();
    println!("| cycle | allocations | bytes | allocations / bytes vs raw |");
    println!("|---|---|---|---|");
    for (cycle, made) in &measured {
        println!(
            "| {} | {:.1} | {:.0} | {} |",
            cycle.name(),
            made.allocations,
            made.bytes,
            made.times(&raw)
        );
    }
}
