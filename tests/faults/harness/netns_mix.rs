//! The fault mix of a [`NetnsFleet`]: one kernel-made fault on one worker's link per
//! call, healed before it returns, for a long run or a soak on that fleet (which is a
//! [`Fleet`](super::fleet::Fleet) like the single server's, so the mixes' `Roster`
//! works on it too).

use super::fault_checks::ms;
use super::mixes::{between, Roster};
use super::netns::NetFault;
use super::netns_fleet::NetnsFleet;

/// The slow link of the mix and of `tests/faults/netns.rs`: 16 kbit/s (a lock request
/// of a few hundred bytes takes a good part of 100 ms once the burst is spent), packets
/// queued at most 300 ms.
pub const SLOW: NetFault = NetFault::Slow {
    rate_kbit: 16,
    latency_ms: 300,
};

/// One fault, for a TTL of `ttl_ms`, on a live worker at random: its link down, or its
/// traffic dropped, for 1.5–2.5 TTLs (it is noted as holding what it holds then, for
/// the fire lead), or its link slowed ([`SLOW`]) for 1–3 TTLs; healed before returning.
pub async fn netns_fault(fleet: &mut NetnsFleet, ttl_ms: u64) {
    let victim = Roster::any(fleet);
    let (fault, d_ms) = match between(0, 2) {
        0 => (NetFault::Down, between(ttl_ms * 3 / 2, ttl_ms * 5 / 2)),
        1 => (NetFault::Drop, between(ttl_ms * 3 / 2, ttl_ms * 5 / 2)),
        _ => (SLOW, between(ttl_ms, ttl_ms * 3)),
    };
    let index = fleet.cut(&victim, fault);
    if fault != SLOW {
        // Nothing of the victim's reaches the server from now on: the expiries read
        // now stay its keys' expiries. A slowed link's renewals still land, later.
        fleet.note_held(Some(&victim)).await;
    }
    tokio::time::sleep(ms(d_ms)).await;
    fleet.heal(index);
}
