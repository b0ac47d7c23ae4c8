//! Turning a write guard into a read guard in one step.

use tokio::time::Instant;

use super::any::AnyGuard;
use crate::error::Error;
use crate::mode::Mode;

impl AnyGuard {
    /// Turns this write lock into a read lock held by the same id, in one step
    /// (`lua/downgrade.lua`); a nested guard only changes its own mode, and a read guard
    /// is returned as it is. The public docs are
    /// [`WriteGuard::downgrade`](crate::WriteGuard::downgrade)'s.
    pub(crate) async fn downgrade(mut self) -> Result<AnyGuard, Error> {
        if self.mode == Mode::Read {
            return Ok(self);
        }
        if self.is_nested() {
            self.mode = Mode::Read;
            return Ok(self);
        }
        if self.liveness.fire_if_expired() {
            return Err(self.not_held());
        }
        let sent = Instant::now();
        let downgrade = self.lease.downgrade();
        let Ok(downgraded) = tokio::time::timeout_at(self.liveness.deadline(), downgrade).await
        else {
            return Err(Error::Timeout);
        };
        if !downgraded? {
            // Not ours any more (or, if the release has begun, the token has fired).
            return Err(self.lost("downgrade"));
        }
        if self.liveness.fire_if_expired() {
            // Fired meanwhile: the refresher releases the reader's id.
            return Err(self.not_held());
        }
        self.liveness.extend(sent + self.lease.validity());
        self.mode = Mode::Read;
        Ok(self)
    }
}
