//! The acquire loop shared by all four requests.

use std::sync::Arc;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use redis::aio::ConnectionLike;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::downgrade::Shape;
use crate::error::Error;
use crate::guard::Guard;
use crate::hub::Waiter;
use crate::id::new_id;
use crate::keys::{check_key, check_slot, Keys};
use crate::lease::Lease;
use crate::mode::Mode;
use crate::pending::Pending;
use crate::request::Request;
use crate::scripts::Attempt;
use crate::spawner::Spawner;

/// First retry delay before jitter when polling; jitter adds up to as much again.
const BACKOFF_MIN: Duration = Duration::from_millis(1);
/// Largest retry delay before jitter when polling, so retries come at most every 50 ms.
const BACKOFF_MAX: Duration = Duration::from_millis(25);
/// How long a waiter waits for its channel's subscription before its first attempt
/// under it (a healthy server confirms within a round trip, or a few for a first
/// connection); past this it polls until the subscription is confirmed.
const SUBSCRIBE_WAIT: Duration = Duration::from_millis(100);

/// Whether a request waits for the lock.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Patience {
    /// One attempt (`try_write`, `try_read`).
    Once,
    /// Retry until acquired, or until the timeout, if any, runs out.
    Wait(Option<Duration>),
}

/// Takes the lock described by `request`. `Ok(None)` only with [`Patience::Once`].
pub(crate) async fn run<C>(request: Request<C>, patience: Patience) -> Result<Option<Guard>, Error>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    let settings = &request.inner.settings;
    settings.check()?;
    let deadline = match patience {
        Patience::Wait(Some(timeout)) => Instant::now().checked_add(timeout),
        _ => None,
    };
    let parent = request.parent.clone();
    if parent.as_ref().is_some_and(CancellationToken::is_cancelled) {
        return Err(Error::Cancelled);
    }
    let key = request.lock_key();
    check_key(&key)?;
    if settings.cluster || settings.hash_tag_keys {
        check_slot(&key)?;
    }
    let hub = settings
        .notifier
        .as_ref()
        .map(|notifier| Arc::clone(&notifier.hub));
    let lease = Arc::new(Lease {
        conn: request.inner.conn.clone(),
        keys: Keys::new(key, settings.fair),
        id: new_id(),
        mode: request.mode,
        shape: Shape::default(),
        ttl: settings.ttl,
        ttl_ms: settings.ttl_ms(),
        fence_ms: settings.fence_ms(),
        hub: hub.clone(),
        cluster: settings.cluster,
        permits: settings.permits,
        fair: settings.fair,
    });
    let waits = matches!(patience, Patience::Wait(_));
    let set_intent = request.mode == Mode::Write && settings.lock_intent && waits;
    let spawner = Spawner::current(settings.tracker.clone());
    let mut pending = Pending::new(Arc::clone(&lease), spawner.clone(), lease.fair && waits);
    let mut backoff = polling_backoff();
    let mut conn = lease.conn.clone();
    let mut late_replies = 0u32;
    // This process's queue on the lock, once the request has had to wait.
    let mut waiter: Option<Waiter> = None;
    // In fair mode every release wakes all local waiters, since the queue in Redis, not
    // this process, says whose turn it is.
    let wake_as = if lease.fair { Mode::Read } else { lease.mode };
    // Local waiters came first: queue behind them and attempt when woken. Not in fair
    // mode, where the first attempt takes a place in the queue in Redis.
    let mut skip_attempt = false;
    if let (Some(hub), true, false) = (&hub, waits, lease.fair) {
        if hub.has_waiters(&lease.keys.channel) {
            waiter = Some(hub.join(&lease.keys.channel, wake_as));
            skip_attempt = true;
        }
    }
    let fences = &request.inner.fences;
    // A writer's first attempt on a lock key whose fence key this mutex has checked goes
    // without a script; not on a cluster, whose tokens are all floored at the clock, nor
    // for a permit or in fair mode.
    let fast_ok = || {
        lease.mode == Mode::Write
            && !lease.cluster
            && !lease.fair
            && lease.permits.is_none()
            && fences.countable(&lease.keys.lock, settings.fence_retention)
    };
    let mut fast = !skip_attempt && fast_ok();

    loop {
        let mut blocked_for = lease.ttl;
        // Whether a release published from before the last attempt will wake the waiter.
        let mut notified = skip_attempt && waiter.as_ref().is_some_and(Waiter::notifies);
        if !skip_attempt {
            notified = waiter.as_ref().is_some_and(Waiter::attempting);
            let use_fast = std::mem::take(&mut fast);
            // A fair reader reads the fence key (the counting path knows no queue).
            let fence_checked = !lease.fair && fences.checked(&lease.keys.lock);
            let sent = Instant::now();
            pending.sending(set_intent && !use_fast);
            // A reply later than the validity could not make a guard, so no attempt waits
            // longer, even over a connection with no response timeout of its own (or a
            // cluster client that keeps retrying through a failover).
            let attempt = tokio::time::timeout(
                lease.validity(),
                lease.attempt(&mut conn, set_intent, use_fast, fence_checked, waits),
            );
            let attempt = tokio::select! {
                biased;
                err = interrupted(parent.as_ref(), deadline) => return Err(pending.give_up(err).await),
                attempt = attempt => attempt,
            };
            let Ok(attempt) = attempt else {
                // Unanswered: it may still take the lock, or set the intent, under this
                // id. The next attempt (same id) renews what it took; giving up
                // releases it.
                tracing::debug!(key = %lease.keys.lock, id = %lease.id, "no reply within the lock's validity");
                pending.unanswered();
                fences.forget(&lease.keys.lock);
                match patience {
                    Patience::Once => return Err(pending.give_up(Error::Timeout).await),
                    Patience::Wait(_) => continue,
                }
            };
            blocked_for = match attempt {
                Ok(Attempt::Acquired(token)) if Instant::now() < sent + lease.validity() => {
                    pending.disarm();
                    if use_fast || (lease.mode == Mode::Read && fence_checked) {
                        fences.counted(&lease.keys.lock, token);
                    } else {
                        fences.minted(&lease.keys.lock, token, sent);
                    }
                    if let Some(waiter) = waiter.take() {
                        waiter.acquired();
                    }
                    return Ok(Some(Guard::start(lease, parent, sent, token, &spawner)));
                }
                Ok(Attempt::Acquired(_)) => {
                    // The reply came after the validity this acquisition would start had
                    // ended (the server or the connection stalled): the lock may already
                    // have expired, so no guard is made of it. The next attempt, under the
                    // same id, renews it if it is still ours; until then `pending` releases
                    // it if the wait ends. A try gets one immediate retry; a wait backs off.
                    tracing::debug!(key = %lease.keys.lock, id = %lease.id, "acquired too late to be valid; trying again");
                    pending.late();
                    late_replies += 1;
                    match patience {
                        Patience::Once if late_replies > 1 => return Ok(None),
                        Patience::Once => continue,
                        Patience::Wait(_) => BACKOFF_MIN,
                    }
                }
                Ok(Attempt::Busy) => {
                    // The fast path found the lock key: the script says why.
                    pending.answered();
                    continue;
                }
                Ok(Attempt::Unchecked) => {
                    // The fence key was not the counter it was taken for.
                    fences.forget(&lease.keys.lock);
                    pending.answered();
                    continue;
                }
                Ok(Attempt::Taken) => {
                    // The fast path took the lock key but got no usable token: the script
                    // mints one for the lock now held under this id.
                    fences.forget(&lease.keys.lock);
                    pending.late();
                    continue;
                }
                Ok(Attempt::Blocked(pttl)) => {
                    pending.blocked();
                    if !waits {
                        return Ok(None);
                    }
                    if let (Some(hub), None) = (&hub, &waiter) {
                        // First time blocked: queue, subscribe, and attempt again at once,
                        // since a release before the subscription would go unheard.
                        let mut joined = hub.join(&lease.keys.channel, wake_as);
                        tokio::select! {
                            biased;
                            err = interrupted(parent.as_ref(), deadline) => return Err(pending.give_up(err).await),
                            _ = joined.subscribed_within(SUBSCRIBE_WAIT) => {}
                        }
                        waiter = Some(joined);
                        continue;
                    }
                    pttl
                }
                Err(err) => {
                    if err.changed_nothing() {
                        pending.answered();
                    }
                    fences.forget(&lease.keys.lock);
                    return Err(pending.give_up(err).await);
                }
            };
        }
        skip_attempt = false;
        let pause = match &waiter {
            // A release will wake it; the timer is for holders that publish nothing (Go
            // clients, a key that expires): never past the blocker's PTTL, and at most
            // half the TTL, so a waiting writer renews its intent (PX ttl) in time.
            Some(_) if notified => blocked_for.min(lease.ttl / 2),
            _ => backoff
                .next()
                .unwrap_or(BACKOFF_MAX)
                .min(blocked_for)
                .max(BACKOFF_MIN),
        };
        tracing::trace!(key = %lease.keys.lock, id = %lease.id, ?pause, notified, "lock busy; waiting");
        let sleep = async {
            match &waiter {
                Some(waiter) => waiter.sleep(pause).await,
                None => {
                    tokio::time::sleep(pause).await;
                    false
                }
            }
        };
        let woken = tokio::select! {
            biased;
            err = interrupted(parent.as_ref(), deadline) => return Err(pending.give_up(err).await),
            woken = sleep => woken,
        };
        // Woken by a release, the lock is likely free: a writer that keeps no intent (the
        // fast path would not clear it) tries without a script.
        fast = woken && !set_intent && fast_ok();
    }
}

fn polling_backoff() -> impl Iterator<Item = Duration> {
    ExponentialBuilder::new()
        .with_min_delay(BACKOFF_MIN)
        .with_max_delay(BACKOFF_MAX)
        .with_jitter()
        .without_max_times()
        .build()
}

/// Completes with [`Error::Cancelled`] when `parent` is cancelled, or with
/// [`Error::Timeout`] at `deadline`; never when neither is given.
async fn interrupted(parent: Option<&CancellationToken>, deadline: Option<Instant>) -> Error {
    let cancelled = async {
        match parent {
            Some(parent) => parent.cancelled().await,
            None => std::future::pending().await,
        }
    };
    let timed_out = async {
        match deadline {
            Some(deadline) => tokio::time::sleep_until(deadline).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        biased;
        () = cancelled => Error::Cancelled,
        () = timed_out => Error::Timeout,
    }
}
