//! What a held guard costs in memory, held to the sizes of 2026-11-27: each idle guard is
//! a [`AnyGuard`] (inside the guard the caller keeps) and two allocations the refresher shares with
//! it (its [`HeldLease`], and the [`KeptLock`] around it that holds its [`Liveness`] inline,
//! each behind an `Arc`: 16 bytes more, and the allocator's rounding), besides its key
//! names. Row 9 of
//! `cargo run --release --example perf -- guards` measures the whole (see
//! `docs/performance.md`); a field added to any of these shows here first.

use super::AnyGuard;
use crate::backend::Direct;
use crate::lease::liveness::Liveness;
use crate::lease::refresher::KeptLock;
use crate::lease::HeldLease;
use crate::protocol::calls::Call;

type Conn = redis::aio::MultiplexedConnection;

#[test]
#[cfg(target_pointer_width = "64")]
fn what_an_idle_guard_holds_stays_within_its_sizes() {
    use std::mem::size_of;
    let liveness = if cfg!(feature = "metrics") { 120 } else { 88 };
    let sizes = [
        // 8 bytes more since 2026-12-07: its liveness is a wide pointer into the kept
        // lock, which saves the liveness an allocation of its own.
        ("AnyGuard", size_of::<AnyGuard>(), 80),
        ("Liveness", size_of::<Liveness>(), liveness),
        // 8 bytes more since 2026-12-07, as the call: its holder description (a thin
        // `Arc`).
        ("HeldLease", size_of::<HeldLease<Direct<Conn>>>(), 128),
        ("Call", size_of::<Call>(), 104),
        // The liveness inline since 2026-12-07.
        (
            "KeptLock",
            size_of::<KeptLock<Direct<Conn>>>(),
            56 + liveness,
        ),
    ];
    for (name, size, bound) in sizes {
        assert!(size <= bound, "{name}: {size} bytes, more than {bound}");
    }
}
