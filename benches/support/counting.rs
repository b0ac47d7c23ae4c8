//! The counting global allocator of `benches/alloc.rs`, `tests/allocations.rs` and
//! `examples/perf/`: including this module (`#[path]`) installs it in that program.
//!
//! It is `stats_alloc`'s wrapper of the system allocator, which counts with atomics, over
//! every thread, the calls that hand out memory (`alloc`, `alloc_zeroed`, `realloc`) and
//! the bytes they hand out (a `realloc` counts what it grows by). [`Count::now`] taken
//! before and after a window gives what was allocated in it; [`per_cycle`] averages it
//! over repeated cycles. Since every thread counts, a window measures one job only while
//! the program's other threads are idle.

use std::alloc::System;
use std::future::Future;

use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Allocations (calls that handed out memory) and bytes allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Count {
    pub allocations: u64,
    pub bytes: u64,
}

impl Count {
    /// What the whole process has allocated since it started.
    pub fn now() -> Self {
        let stats = GLOBAL.stats();
        Self {
            allocations: (stats.allocations + stats.reallocations) as u64,
            bytes: stats.bytes_allocated as u64,
        }
    }

    /// What was allocated between `earlier` and `self`.
    pub fn since(self, earlier: Self) -> Self {
        Self {
            allocations: self.allocations - earlier.allocations,
            bytes: self.bytes - earlier.bytes,
        }
    }
}

/// Allocations and bytes allocated per cycle, averaged over a window of cycles.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PerCycle {
    pub allocations: f64,
    pub bytes: f64,
}

impl PerCycle {
    /// `allocations / bytes` of `self` as multiples of `base`'s, e.g. `3.1× / 2.4×`.
    pub fn times(&self, base: &Self) -> String {
        format!(
            "{:.1}× / {:.1}×",
            self.allocations / base.allocations.max(f64::MIN_POSITIVE),
            self.bytes / base.bytes.max(f64::MIN_POSITIVE)
        )
    }
}

/// Runs `cycle` `warm_up` times unmeasured, then `cycles` times: what one cycle
/// allocated on average in the second run. The first error ends it.
pub async fn per_cycle<F, Fut, E>(
    warm_up: usize,
    cycles: usize,
    mut cycle: F,
) -> Result<PerCycle, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    for _ in 0..warm_up {
        cycle().await?;
    }
    let start = Count::now();
    for _ in 0..cycles {
        cycle().await?;
    }
    let made = Count::now().since(start);
    let n = cycles.max(1) as f64;
    Ok(PerCycle {
        allocations: made.allocations as f64 / n,
        bytes: made.bytes as f64 / n,
    })
}
