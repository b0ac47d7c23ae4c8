//! What a held guard costs in memory, held to the sizes of 2026-11-27: each idle guard is
//! a [`AnyGuard`] (inside the guard the caller keeps) and three allocations the refresher shares with
//! it (its [`Liveness`], its [`HeldLease`] and the [`KeptLock`] around them, each behind an
//! `Arc`: 16 bytes more, and the allocator's rounding), besides its key names. Row 9 of
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
        ("AnyGuard", size_of::<AnyGuard>(), 72),
        ("Liveness", size_of::<Liveness>(), liveness),
        // 8 bytes more since 2026-12-07, as the call: its holder description (a thin
        // `Arc`).
        ("HeldLease", size_of::<HeldLease<Direct<Conn>>>(), 128),
        ("Call", size_of::<Call>(), 104),
        ("KeptLock", size_of::<KeptLock<Direct<Conn>>>(), 64),
    ];
    for (name, size, bound) in sizes {
        assert!(size <= bound, "{name}: {size} bytes, more than {bound}");
    }
}
