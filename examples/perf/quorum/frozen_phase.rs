//! Row 13's measurements in one phase, with every node up or with one frozen: acquires,
//! unlocks, refused tries and in-process hand-offs, timed one at a time.

use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redismutex::{Quorum, RwMutex, WriteGuard};
use tokio::task::JoinSet;

use crate::handoff::BLOCKED;
use crate::locking::check_unlocked;
use crate::{BoxError, Result};

/// Acquires measured in each phase, after a few unmeasured ones with all nodes up;
/// unlocks, refused `try_write`s and hand-offs timed one at a time in each phase (each
/// may take the per-node bound or more with a node frozen).
pub(crate) const FROZEN_ACQUIRES: usize = 200;
pub(crate) const FROZEN_WARM_UP: usize = 10;
pub(crate) const FROZEN_UNLOCKS: usize = 5;

/// What row 13 measures in one phase (all nodes up, or one frozen), latencies in ns.
pub(crate) struct FrozenPhase {
    /// `write()` of an uncontended lock.
    pub(crate) acquires: Vec<i128>,
    /// `unlock()` of a guard.
    pub(crate) unlocks: Vec<i128>,
    /// `try_write()` of a lock another handle holds (it returns `None`).
    pub(crate) refusals: Vec<i128>,
    /// In one process: A calls `unlock()` → B's `write()` returns, B having waited.
    pub(crate) handoffs: Vec<i128>,
}

impl FrozenPhase {
    /// Sorts each list of latencies.
    pub(crate) fn sort(&mut self) {
        for values in [
            &mut self.acquires,
            &mut self.unlocks,
            &mut self.refusals,
            &mut self.handoffs,
        ] {
            values.sort_unstable();
        }
    }
}

/// Row 13, one phase, on `a` and `b` (two mutexes over the same quorum on their own
/// connections, `b` with `Notifier::quorum`), keys named after `phase`:
/// - [`FROZEN_ACQUIRES`] uncontended `write()`s on `a`, one at a time on fresh keys, after
///   `warm_up` unmeasured ones; the guards are held until all are taken (an unlock waits
///   for every node, so unlocking each would put a frozen node's bound between
///   acquires); then [`FROZEN_UNLOCKS`] of them unlocked one at a time, the others
///   together;
/// - [`FROZEN_UNLOCKS`] times: `a` holds a key, `b.try_write()` on it; then `b.write()`
///   waits for it and `a` unlocks after [`BLOCKED`].
pub(crate) async fn frozen_phase(
    a: &RwMutex<Quorum<MultiplexedConnection>>,
    b: &RwMutex<Quorum<MultiplexedConnection>>,
    phase: &str,
    warm_up: usize,
) -> Result<FrozenPhase> {
    let mut measured = FrozenPhase {
        acquires: Vec::with_capacity(FROZEN_ACQUIRES),
        unlocks: Vec::with_capacity(FROZEN_UNLOCKS),
        refusals: Vec::with_capacity(FROZEN_UNLOCKS),
        handoffs: Vec::with_capacity(FROZEN_UNLOCKS),
    };
    acquire_and_unlock(a, phase, warm_up, &mut measured).await?;
    try_and_hand_off(a, b, phase, &mut measured).await?;
    Ok(measured)
}

/// The first part of [`frozen_phase`]: acquires, held until all are taken, then unlocks.
async fn acquire_and_unlock(
    a: &RwMutex<Quorum<MultiplexedConnection>>,
    phase: &str,
    warm_up: usize,
    measured: &mut FrozenPhase,
) -> Result<()> {
    let mut guards = Vec::with_capacity(warm_up + FROZEN_ACQUIRES);
    for i in 0..warm_up + FROZEN_ACQUIRES {
        let started = Instant::now();
        let guard = a.write().key(format!("{phase}:{i}")).await?;
        if i >= warm_up {
            measured.acquires.push(started.elapsed().as_nanos() as i128);
        }
        guards.push(guard);
    }
    let rest = guards.split_off(FROZEN_UNLOCKS);
    for guard in guards {
        let started = Instant::now();
        check_unlocked(guard).await?;
        measured.unlocks.push(started.elapsed().as_nanos() as i128);
    }
    let (lost, failed) = release_guards(rest).await?;
    if lost + failed > 0 {
        return Err(format!("{phase}: {lost} guards lost, {failed} unlocks failed").into());
    }
    Ok(())
}

/// The second part of [`frozen_phase`]: refused tries and in-process hand-offs.
async fn try_and_hand_off(
    a: &RwMutex<Quorum<MultiplexedConnection>>,
    b: &RwMutex<Quorum<MultiplexedConnection>>,
    phase: &str,
    measured: &mut FrozenPhase,
) -> Result<()> {
    for i in 0..FROZEN_UNLOCKS {
        let key = format!("{phase}-held:{i}");
        let held = a.write().key(&key).await?;
        let started = Instant::now();
        if b.try_write().key(&key).await?.is_some() {
            return Err(format!("{phase}: try_write took {key}, held by another").into());
        }
        measured.refusals.push(started.elapsed().as_nanos() as i128);
        let waiter = {
            let (b, key) = (b.clone(), key.clone());
            tokio::spawn(async move {
                let guard = b.write().key(key).await?;
                Ok::<_, BoxError>((Instant::now(), guard))
            })
        };
        tokio::time::sleep(BLOCKED).await;
        let unlocking = Instant::now();
        let unlocked = tokio::spawn(check_unlocked(held));
        let (acquired, guard) = waiter.await??;
        measured
            .handoffs
            .push(acquired.saturating_duration_since(unlocking).as_nanos() as i128);
        unlocked.await??;
        check_unlocked(guard).await?;
    }
    Ok(())
}

/// Whether the server of `conn` answers a PING within 100 ms.
pub(crate) async fn answers(conn: &mut MultiplexedConnection) -> bool {
    let ping = redis::cmd("PING");
    let ping = ping.query_async::<String>(conn);
    matches!(
        tokio::time::timeout(Duration::from_millis(100), ping).await,
        Ok(Ok(_))
    )
}

/// Guards unlocked at a time by [`release_guards`].
const UNLOCK_BATCH: usize = 500;

/// Unlocks every guard, [`UNLOCK_BATCH`] at a time: how many had been lost meanwhile,
/// and how many unlocks failed (those locks expire by their TTL).
async fn release_guards(guards: Vec<WriteGuard>) -> Result<(usize, usize)> {
    let mut guards = guards.into_iter();
    let (mut lost, mut failed) = (0, 0);
    loop {
        let mut set = JoinSet::new();
        for guard in guards.by_ref().take(UNLOCK_BATCH) {
            set.spawn(guard.unlock());
        }
        if set.is_empty() {
            return Ok((lost, failed));
        }
        while let Some(done) = set.join_next().await {
            match done? {
                Ok(true) => {}
                Ok(false) => lost += 1,
                Err(_) => failed += 1,
            }
        }
    }
}
