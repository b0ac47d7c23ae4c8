//! Turning an upgradable reader's guard into the writer's, and into a plain reader's.

use backon::{BackoffBuilder, ExponentialBuilder};
use tokio::time::Instant;

use super::any::AnyGuard;
use crate::error::Error;
use crate::mode::Mode;
use crate::notify::waiter::Waiter;
use crate::protocol::calls::UpgradeOp;
use crate::protocol::replies::Upgraded;
use crate::wait::{pause, BACKOFF_MAX, BACKOFF_MIN, SUBSCRIBE_WAIT};

impl AnyGuard {
    /// Turns this upgradable reader's lock into the write lock held by the same id, in
    /// one step once no other reader is left (`lua/upgrade.lua`): with `wait`, waits for
    /// them, keeping new readers out with the lock intent meanwhile (woken by their
    /// releases, at the front of this process's queue); without it, one attempt that
    /// sets nothing, and `Ok(Err(self))` when others still read. The public docs are
    /// [`UpgradableReadGuard::upgrade`](crate::UpgradableReadGuard::upgrade)'s.
    pub(crate) async fn upgrade(mut self, wait: bool) -> Result<Result<AnyGuard, AnyGuard>, Error> {
        let op = if wait {
            UpgradeOp::Wait
        } else {
            UpgradeOp::Try
        };
        let mut backoff = ExponentialBuilder::new()
            .with_min_delay(BACKOFF_MIN)
            .with_max_delay(BACKOFF_MAX)
            .with_jitter()
            .without_max_times()
            .build();
        let mut waiter: Option<Waiter> = None;
        loop {
            if self.liveness.fire_if_expired() {
                return Err(self.not_held());
            }
            let notified = waiter.as_ref().is_some_and(Waiter::attempting);
            let sent = Instant::now();
            let upgrade = self.lease.upgrade(op);
            let Ok(reply) = tokio::time::timeout_at(self.liveness.deadline(), upgrade).await else {
                return Err(Error::Timeout);
            };
            let blocked_for = match reply? {
                // The release has begun: the token has fired.
                None => return Err(self.not_held()),
                Some(Upgraded::NotHeld) => return Err(self.lost("upgrade")),
                // Still a reader, no longer the upgradable one: the error drops the
                // guard, whose release removes the id.
                Some(Upgraded::Reader) => return Err(self.not_held()),
                Some(Upgraded::Write(token)) => {
                    if let Some(waiter) = waiter.take() {
                        waiter.acquired();
                    }
                    if self.liveness.fire_if_expired() {
                        // Fired meanwhile: the refresher releases the writer's id.
                        return Err(self.not_held());
                    }
                    self.liveness.extend(sent + self.lease.validity());
                    self.mode = Mode::Write;
                    self.fencing_token = token;
                    return Ok(Ok(self));
                }
                Some(Upgraded::Blocked(_)) if !wait => return Ok(Err(self)),
                Some(Upgraded::Blocked(pttl)) => pttl,
            };
            if waiter.is_none() {
                if let Some(mut first) = self.lease.wait_first() {
                    // Subscribed, the next attempt's blockers' releases wake it.
                    first.subscribed_within(SUBSCRIBE_WAIT).await;
                    waiter = Some(first);
                    continue;
                }
            }
            let pause = pause(blocked_for, notified, self.lease.ttl(), || backoff.next());
            match &waiter {
                Some(waiter) => {
                    waiter.sleep(pause).await;
                }
                None => tokio::time::sleep(pause).await,
            }
        }
    }

    /// This upgradable reader gives up the right to upgrade and stays a plain reader
    /// (`lua/upgrade.lua`'s "plain"), so that another upgradable reader may go in. The
    /// public docs are
    /// [`UpgradableReadGuard::downgrade`](crate::UpgradableReadGuard::downgrade)'s.
    pub(crate) async fn plain(self) -> Result<AnyGuard, Error> {
        if self.liveness.fire_if_expired() {
            return Err(self.not_held());
        }
        let plain = self.lease.plain();
        let Ok(reader) = tokio::time::timeout_at(self.liveness.deadline(), plain).await else {
            return Err(Error::Timeout);
        };
        if !reader? {
            return Err(self.lost("downgrade"));
        }
        if self.liveness.fire_if_expired() {
            return Err(self.not_held());
        }
        // "plain" leaves the readers' PTTL as it was: the last renewal's deadline stands.
        Ok(self)
    }
}
