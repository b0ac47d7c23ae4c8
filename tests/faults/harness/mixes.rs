//! The fault mixes of the soaks (`tests/faults/soak.rs`) and the long run
//! (`tests/faults/long_run.rs`): one random fault per call, always healed before it
//! returns, for each deployment's fleet. Workers killed are replaced by new ones with the
//! same [`Spec`] (a [`Roster`]).

use std::collections::HashMap;
use std::time::Duration;

use rand::RngExt;

#[cfg(feature = "cluster")]
use super::cluster_fleet::ClusterFleet;
use super::fault_checks::ms;
use super::fleet::{Fleet, Spec};
use super::paused_note::PausedNote;
use super::quorum_fleet::{NodeFault, QuorumFleet, NODES, RESTART_MARGIN};
use super::sentinel_fleet::SentinelFleet;
use super::server_fleet::ServerFleet;
use crate::common::clock::ServerClock;
use crate::common::proxy::Fault;
use crate::common::record::{FaultKind, Target};

/// A random number in `lo..=hi`.
pub fn between(lo: u64, hi: u64) -> u64 {
    rand::rng().random_range(lo..=hi)
}

/// The workers of a run and their specs; a killed worker is replaced by `w<n>`, a new
/// name, with the same spec.
#[derive(Debug, Default)]
pub struct Roster {
    specs: HashMap<String, Spec>,
    spawned: usize,
}

impl Roster {
    /// Starts a worker `w0`, `w1`, ... for each of `specs`.
    pub async fn start(fleet: &mut impl Fleet, specs: &[Spec]) -> Roster {
        let mut roster = Roster::default();
        for spec in specs {
            roster.spawn(fleet, spec.clone()).await;
        }
        roster
    }

    async fn spawn(&mut self, fleet: &mut impl Fleet, spec: Spec) {
        let name = format!("w{}", self.spawned);
        fleet.spawn(&name, &spec).await;
        self.specs.insert(name, spec);
        self.spawned += 1;
    }

    /// A live worker, at random.
    pub fn any(fleet: &impl Fleet) -> String {
        let live = fleet.crew().live();
        live[rand::rng().random_range(0..live.len())].clone()
    }

    /// Kills a live worker at random and starts another with its spec.
    pub async fn replace(&mut self, fleet: &mut impl Fleet) {
        let victim = Self::any(fleet);
        fleet.crew_mut().kill(&victim).await;
        let spec = self.specs[&victim].clone();
        self.spawn(fleet, spec).await;
    }

    /// Freezes a live worker at random for 1.5–2.5 s: past the TTL of 1 s.
    pub async fn freeze_any(fleet: &mut impl Fleet) {
        let victim = Self::any(fleet);
        let d = ms(between(1500, 2500));
        fleet.crew_mut().freeze_for(&victim, d).await;
    }
}

/// One fault of the single-server mix, for a TTL of `ttl_ms`: a worker killed (and
/// replaced) or frozen past the TTL, the server paused shortly or past the TTL, killed
/// and restarted empty past the TTL, a worker's proxy blackholed, every proxy slowed,
/// or a burst of connection resets and `CLIENT KILL`s.
pub async fn single_fault(fleet: &mut ServerFleet, roster: &mut Roster, ttl_ms: u64) {
    match between(0, 7) {
        0 => roster.replace(fleet).await,
        1 => Roster::freeze_any(fleet).await,
        2 => pause_server(fleet, ms(300), FaultKind::PauseServer, false).await,
        3 => pause_server(fleet, ms(2500), FaultKind::PauseServerLong, true).await,
        4 => {
            // Down for more than a TTL: see tests/faults/server.rs on restarting at once.
            let fault = fleet.crew.begin(FaultKind::KillServer, Target::Server);
            fleet.lock.stop();
            tokio::time::sleep(ms(ttl_ms + 200)).await;
            fleet.lock.restart();
            fleet.crew.end(fault);
        }
        5 => {
            let victim = Roster::any(fleet);
            let fault = fleet
                .crew
                .proxy_fault(&victim, FaultKind::Blackhole, Fault::Blackhole);
            fleet.note_held(Some(&victim)).await;
            tokio::time::sleep(ms(between(1500, 2500))).await;
            fleet.crew.heal_proxy(fault);
        }
        6 => {
            let delay = Fault::Delay {
                base: ms(ttl_ms / 12),
                jitter: ms(ttl_ms / 12),
            };
            let crew = &mut fleet.crew;
            let faults: Vec<usize> = (crew.live().iter())
                .map(|name| crew.proxy_fault(name, FaultKind::Delay, delay))
                .collect();
            tokio::time::sleep(ms(between(2000, 3000))).await;
            for fault in faults {
                crew.heal_proxy(fault);
            }
        }
        _ => {
            for _ in 0..between(3, 6) {
                if between(0, 2) == 0 {
                    fleet.client_kill().await;
                } else {
                    let victim = Roster::any(fleet);
                    fleet.crew.reset(&victim);
                }
                tokio::time::sleep(ms(200)).await;
            }
        }
    }
}

/// SIGSTOPs the lock server for `d`, recorded as `kind`; with `note`, who holds what
/// and until when is noted for the fire lead at the freeze itself ([`PausedNote`]: no
/// renewal lands between the reading and the freeze).
async fn pause_server(fleet: &mut ServerFleet, d: Duration, kind: FaultKind, note: bool) {
    let fault = fleet.crew.begin(kind, Target::Server);
    let names: Vec<String> = (0..fleet.keys)
        .map(|k| format!("{}:k{k}", fleet.mutex))
        .collect();
    let paused = match note {
        true => Some(PausedNote::take(&fleet.lock_conn().await, &names, false).await),
        false => None,
    };
    fleet.lock.pause();
    if let Some(paused) = paused {
        fleet.held.extend(paused.valid());
    }
    tokio::time::sleep(d).await;
    fleet.lock.resume();
    fleet.crew.end(fault);
}

/// One fault of the quorum mix, for a TTL of `ttl_ms`: on one node at random, a
/// partition, a slow link, connections cut again and again, a freeze, or a restart
/// within quorum mode's preconditions (at once from its AOF, or empty after staying
/// down past the TTL); or a worker killed (and replaced) or frozen past the TTL.
pub async fn quorum_fault(fleet: &mut QuorumFleet, roster: &mut Roster, ttl_ms: u64) {
    let node = usize::try_from(between(0, NODES as u64 - 1)).expect("a node index");
    let fault = match between(0, 6) {
        0 => NodeFault::Partition(ms(between(300, 2500))),
        1 => NodeFault::Slow(ms(between(500, 2000))),
        2 => NodeFault::Cut(ms(between(500, 1500))),
        3 => NodeFault::Freeze(ms(between(200, 2500))),
        4 if between(0, 1) == 0 => NodeFault::RestartFromAof,
        4 => {
            let least = ttl_ms + RESTART_MARGIN.as_millis() as u64;
            NodeFault::RestartEmpty(ms(between(least, least + 700)))
        }
        5 => return roster.replace(fleet).await,
        _ => return Roster::freeze_any(fleet).await,
    };
    fleet.inject(node, fault).await;
}

/// One fault of the Sentinel mix: the primary killed (Sentinel fails over, the old one
/// comes back as a replica), paused shortly (no failover), or — one time in ten —
/// frozen until Sentinel has failed over, then thawed while it still takes writes; or a
/// worker killed (and replaced) or frozen past the TTL.
pub async fn sentinel_fault(fleet: &mut SentinelFleet, roster: &mut Roster) {
    match between(0, 9) {
        0 | 1 => fleet.kill_primary().await,
        2..=4 => fleet.pause_primary(ms(between(200, 600))).await,
        5 => fleet.freeze_primary_past_failover().await,
        6 | 7 => roster.replace(fleet).await,
        _ => Roster::freeze_any(fleet).await,
    }
}

/// One fault of the Redis Cluster mix: a master killed (its replica takes over, the old
/// node comes back as a replica), or frozen for 200–500 ms (under half the node
/// timeout: no failover); or a worker killed (and replaced) or frozen past the TTL.
#[cfg(feature = "cluster")]
pub async fn cluster_fault(fleet: &mut ClusterFleet, roster: &mut Roster) {
    match between(0, 7) {
        0 | 1 => fleet.kill_master().await,
        2..=4 => fleet.freeze_master(ms(between(200, 500))).await,
        5 | 6 => roster.replace(fleet).await,
        _ => Roster::freeze_any(fleet).await,
    }
}

/// One fault of the single server's clock (the lock server started on `clock`), for a TTL
/// of `ttl_ms`: a jump of 3 TTLs forward (held locks expire at once: overlaps, which only
/// fencing covers), a jump of 3 TTLs back (locks live longer), or the clock running twice
/// as fast for 2–4 TTLs (locks expire at twice the rate, racing their renewals).
pub async fn clock_fault(fleet: &mut ServerFleet, clock: &ServerClock, ttl_ms: u64) {
    let jump = i64::try_from(3 * ttl_ms).expect("a TTL in ms fits i64");
    let (kind, fast_ms) = match between(0, 2) {
        0 => (FaultKind::ClockForward, 0),
        1 => (FaultKind::ClockBack, 0),
        _ => (FaultKind::ClockFast, between(2 * ttl_ms, 4 * ttl_ms)),
    };
    let fault = fleet.crew.begin(kind, Target::Server);
    match kind {
        FaultKind::ClockForward => clock.jump(jump),
        FaultKind::ClockBack => clock.jump(-jump),
        _ => {
            clock.rate(1_000_000);
            tokio::time::sleep(ms(fast_ms)).await;
            clock.rate(0);
        }
    }
    fleet.crew.end(fault);
}
