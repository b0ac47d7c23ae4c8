//! One lock's identity in Redis and the script calls made on its behalf.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionLike;

use crate::downgrade::Shape;
use crate::error::Error;
use crate::hub::Hub;
use crate::keys::Keys;
use crate::mode::Mode;
use crate::scripts::{self, Attempt, Fair, FastLock, Hold, Released};

/// Redlock's clock drift factor: 1% of the TTL (redis.io, "Distributed Locks with
/// Redis", the `CLOCK_DRIFT_FACTOR` of the reference implementations).
const DRIFT_FACTOR_PERCENT: u32 = 1;
/// Redlock's fixed drift allowance of 2 ms added to the factor (same source).
const DRIFT_FIXED: Duration = Duration::from_millis(2);

/// The keys, id and TTL of one lock, with the connection to reach it.
#[derive(Debug)]
pub(crate) struct Lease<C> {
    pub(crate) conn: C,
    pub(crate) keys: Keys,
    pub(crate) id: String,
    /// The mode the lock was taken in. A write lock may since have been downgraded:
    /// `shape` says which form the release must remove.
    pub(crate) mode: Mode,
    pub(crate) shape: Shape,
    pub(crate) ttl: Duration,
    pub(crate) ttl_ms: u64,
    /// The PX of the fence key, in milliseconds.
    pub(crate) fence_ms: u64,
    /// Where this process's waiters on the lock wait, when the mutex has a notifier.
    pub(crate) hub: Option<Arc<Hub>>,
    /// The lock is on a Redis Cluster: releases are published by `SPUBLISH`, not
    /// `PUBLISH`, and every token is floored at the server clock, since a failover can
    /// lose the fence key's last increments.
    pub(crate) cluster: bool,
    /// A semaphore's permit, and how many holders the caller allows; `None` for a lock.
    pub(crate) permits: Option<u32>,
    /// Waiters queue in arrival order (`lua/shared.lua`); the keys then have a
    /// [`Queue`](crate::keys::Queue).
    pub(crate) fair: bool,
}

impl<C> Lease<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// One acquire attempt under this lease's id: by the write fast path when `fast` (a
    /// writer's first attempt), else by script; `fence_checked` when a script has seen the
    /// fence key hold a token; `waits` when a fair request joins the queue if blocked.
    pub(crate) async fn attempt(
        &self,
        conn: &mut C,
        set_intent: bool,
        fast: bool,
        fence_checked: bool,
        waits: bool,
    ) -> Result<Attempt, Error> {
        let (keys, id, ttl_ms, fence_ms) = (&self.keys, &self.id, self.ttl_ms, self.fence_ms);
        let fair = match (self.fair, waits) {
            (false, _) => Fair::Off,
            (true, true) => Fair::Wait,
            (true, false) => Fair::Try,
        };
        let cluster = self.cluster;
        if let Some(permits) = self.permits {
            return scripts::semaphore(conn, keys, id, ttl_ms, permits, fence_ms, cluster, fair)
                .await;
        }
        match self.mode {
            Mode::Write if fast => Ok(
                match scripts::fast_lock(conn, keys, id, ttl_ms, fence_ms).await? {
                    FastLock::Acquired(token) => Attempt::Acquired(token),
                    FastLock::Taken => Attempt::Taken,
                    FastLock::Busy => Attempt::Busy,
                },
            ),
            Mode::Write => {
                scripts::lock(conn, keys, id, ttl_ms, set_intent, fence_ms, cluster, fair).await
            }
            Mode::Read => {
                scripts::rlock(
                    conn,
                    keys,
                    id,
                    ttl_ms,
                    fence_ms,
                    fence_checked,
                    cluster,
                    fair,
                )
                .await
            }
        }
    }

    /// Extends the lock; false when this id no longer holds it.
    pub(crate) async fn refresh(&self, conn: &mut C) -> Result<bool, Error> {
        scripts::refresh(conn, &self.keys.lock, &self.id, self.ttl_ms).await
    }

    /// Turns this writer's lock into a read lock held by the same id, in one step; waiters
    /// here and elsewhere are told. False when the id did not hold the lock as a writer
    /// (nor already as a reader), or when the release has begun (nothing is sent then).
    pub(crate) async fn downgrade(&self) -> Result<bool, Error> {
        if !self.shape.sending() {
            return Ok(false);
        }
        let mut conn = self.conn.clone();
        let downgraded =
            scripts::downgrade(&mut conn, &self.keys, &self.id, self.ttl_ms, self.cluster).await?;
        self.shape.answered(downgraded.held);
        if let (true, Some(hub)) = (downgraded.published, &self.hub) {
            hub.released(&self.keys.channel, &self.id);
        }
        Ok(downgraded.held)
    }

    /// Removes this id from the lock key, clears the lock intent when `clear_intent` and
    /// it holds this id, and leaves the fair queue when `leave_queue`; waiters here and
    /// elsewhere are told when that frees the lock. True when the id held the lock.
    ///
    /// After a downgrade whose reply was never read, the id may be a writer's or a
    /// reader's: it is removed as a writer's and, if that finds nothing, as a reader's.
    ///
    /// Waits at most one TTL for the reply ([`Error::Timeout`] after that): by then
    /// anything this id could have left in Redis has expired, since refresh has stopped.
    pub(crate) async fn release(
        &self,
        clear_intent: bool,
        leave_queue: bool,
    ) -> Result<bool, Error> {
        let mut conn = self.conn.clone();
        let modes = self.shape.releasing(self.mode);
        let unlock = async {
            let mut released = Released {
                held: false,
                published: false,
            };
            for &mode in modes {
                let hold = self.hold_as(mode);
                let (keys, id) = (&self.keys, &self.id);
                let found = scripts::unlock(
                    &mut conn,
                    keys,
                    clear_intent,
                    leave_queue,
                    id,
                    hold,
                    self.cluster,
                )
                .await?;
                released.held = found.held;
                released.published |= found.published;
                if found.held {
                    break;
                }
            }
            Ok(released)
        };
        let released = tokio::time::timeout(self.ttl, unlock)
            .await
            .unwrap_or(Err(Error::Timeout))?;
        if let (true, Some(hub)) = (released.published, &self.hub) {
            hub.released(&self.keys.channel, &self.id);
        }
        Ok(released.held)
    }
}

/// A held lease, without its connection type: what a [`Guard`](crate::Guard) needs.
pub(crate) trait Held: Send + Sync {
    fn key(&self) -> &str;
    fn id(&self) -> &str;
    /// The mode the lock is held in now: the acquired one, or [`Mode::Read`] after a
    /// downgrade.
    fn mode(&self) -> Mode;
    /// [`Lease::validity`].
    fn validity(&self) -> Duration;
    /// [`Lease::release`] without clearing an intent.
    fn release(&self) -> Pin<Box<dyn Future<Output = Result<bool, Error>> + Send + '_>>;
    /// [`Lease::downgrade`].
    fn downgrade(&self) -> Pin<Box<dyn Future<Output = Result<bool, Error>> + Send + '_>>;
}

impl<C> Held for Lease<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    fn key(&self) -> &str {
        &self.keys.lock
    }

    fn id(&self) -> &str {
        &self.id
    }

    fn mode(&self) -> Mode {
        self.shape.mode(self.mode)
    }

    fn validity(&self) -> Duration {
        Lease::validity(self)
    }

    fn release(&self) -> Pin<Box<dyn Future<Output = Result<bool, Error>> + Send + '_>> {
        Box::pin(Lease::release(self, false, false))
    }

    fn downgrade(&self) -> Pin<Box<dyn Future<Output = Result<bool, Error>> + Send + '_>> {
        Box::pin(Lease::downgrade(self))
    }
}

impl<C> Lease<C> {
    /// What this lease's id holds at the lock key when it holds it in `mode`.
    fn hold_as(&self, mode: Mode) -> Hold {
        match (self.permits, mode) {
            (Some(_), _) => Hold::Permit,
            (None, Mode::Write) => Hold::Write,
            (None, Mode::Read) => Hold::Read,
        }
    }

    /// How long after an acquire or refresh request was sent the lock is surely still
    /// held: the TTL minus Redlock's drift margin (1% of the TTL + 2 ms).
    pub(crate) fn validity(&self) -> Duration {
        let drift = self.ttl * DRIFT_FACTOR_PERCENT / 100 + DRIFT_FIXED;
        self.ttl.saturating_sub(drift)
    }

    /// When to refresh after a successful acquire or refresh: half the TTL, as in Go.
    pub(crate) fn refresh_interval(&self) -> Duration {
        self.ttl / 2
    }

    /// When to try again after a refresh failed: an eighth of the TTL, so a refresh sent
    /// at half the TTL gets three more tries before the validity ends.
    pub(crate) fn refresh_retry(&self) -> Duration {
        self.ttl / 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(ttl_ms: u64) -> Lease<()> {
        Lease {
            conn: (),
            keys: Keys::new("k".into(), false),
            id: "0".repeat(32),
            mode: Mode::Write,
            shape: Shape::default(),
            ttl: Duration::from_millis(ttl_ms),
            ttl_ms,
            fence_ms: ttl_ms,
            hub: None,
            cluster: false,
            permits: None,
            fair: false,
        }
    }

    #[test]
    fn validity_is_the_ttl_minus_the_redlock_drift_margin() {
        // 4 s - (40 ms + 2 ms), 400 ms - (4 ms + 2 ms), 10 ms - (0.1 ms + 2 ms)
        assert_eq!(lease(4000).validity(), Duration::from_millis(3958));
        assert_eq!(lease(400).validity(), Duration::from_millis(394));
        assert_eq!(lease(10).validity(), Duration::from_micros(7900));
    }

    #[test]
    fn refresh_comes_at_half_the_ttl_with_retries_before_the_validity_ends() {
        let lease = lease(400);
        assert_eq!(lease.refresh_interval(), Duration::from_millis(200));
        let third_retry = lease.refresh_interval() + lease.refresh_retry() * 3;
        assert!(third_retry < lease.validity(), "{third_retry:?}");
    }
}
