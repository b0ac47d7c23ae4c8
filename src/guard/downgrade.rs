//! Turning a write guard into a read guard in one step.

use tokio::time::Instant;

use super::Guard;
use crate::error::Error;
use crate::mode::Mode;
use crate::reason::CancelReason;

impl Guard {
    /// Turns this write guard into a read guard without letting go of the lock, as
    /// [`RwLockWriteGuard::downgrade`](tokio::sync::RwLockWriteGuard::downgrade) does: no
    /// other writer can take the lock in between. Other readers may join at once; waiting
    /// writers go on waiting until every reader, this one included, has released it.
    ///
    /// In Redis, one script (`lua/downgrade.lua`) replaces the string holding this
    /// guard's id at the lock key by a set holding only that id, with the lock's TTL, and
    /// publishes the id on the release channel `<lock key>:released` so that waiting
    /// readers look again. That is the key layout of a read lock, so readers of the Go
    /// package can join it too. The key, the id, the token and the refresh task carry on;
    /// the validity deadline moves forward as after a refresh. Afterwards
    /// [`mode`](Self::mode) is [`Mode::Read`], and the release removes the id from the
    /// set.
    ///
    /// The [fencing token](Self::fencing_token) stays the same: the read guard continues
    /// the same acquisition, and every later acquisition of the lock key still gets a
    /// larger token.
    ///
    /// A read guard is returned as it is, and nothing is sent. A nested guard of a
    /// [reentrant](crate::Builder::reentrant) mutex is downgraded here only: its
    /// [`mode`](Self::mode) becomes [`Mode::Read`], nothing is sent, and the lock stays
    /// the outermost guard's. Downgrading the outermost write guard makes a later write
    /// inside it, in the same task, [`Error::WouldDeadlock`].
    ///
    /// # Errors
    ///
    /// [`Error::NotHeld`] when the token had already fired (nothing is sent then; the
    /// refresher releases the lock as for any fired token), or when Redis no longer
    /// had this id at the lock key: the token then fires with [`CancelReason::Lost`] and
    /// nothing is released. [`Error::Refused`] when Redis refuses the script,
    /// [`Error::Redis`] when the request fails otherwise, and [`Error::Timeout`] when
    /// Redis does not answer before the validity deadline ([`valid_until`]). After these
    /// three the guard is dropped, so its refresher releases the lock, removing
    /// the id whether it is still a writer's or already a reader's. Over a
    /// [`Quorum`](crate::Quorum), it needs a majority of the nodes to turn the lock:
    /// [`Error::NoQuorum`] (and the guard dropped, as above) when too few answered;
    /// `NotHeld` when a majority no longer held it.
    ///
    /// [`valid_until`]: Self::valid_until
    ///
    /// # Cancel safety
    ///
    /// Dropping the future drops the guard, which releases the lock from the background
    /// task, as dropping the guard does. If the downgrade was sent and its reply not yet
    /// read, it may still run: the release then removes the id as a writer's and, if that
    /// finds nothing, as a reader's, so the lock is gone either way. (A downgrade that a
    /// dropped connection delivers only after the release leaves a reader's id until
    /// the TTL, as any release that fails does.)
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(mx: redismutex::RwMutex<redis::aio::MultiplexedConnection>)
    /// # -> Result<(), redismutex::Error> {
    /// let guard = mx.write().key("report").await?;
    /// // ... write the report, alone ...
    /// let guard = guard.downgrade().await?;
    /// assert_eq!(guard.mode(), redismutex::Mode::Read);
    /// // ... read it back while other readers do; no writer got in between ...
    /// guard.unlock().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn downgrade(mut self) -> Result<Guard, Error> {
        if self.mode == Mode::Read {
            return Ok(self);
        }
        if self.is_nested() {
            self.mode = Mode::Read;
            return Ok(self);
        }
        let not_held = |guard: &Self| Error::NotHeld {
            key: guard.key().to_owned(),
        };
        if self.liveness.fire_if_expired() {
            return Err(not_held(&self));
        }
        let sent = Instant::now();
        let downgrade = self.lease.downgrade();
        let Ok(downgraded) = tokio::time::timeout_at(self.liveness.deadline(), downgrade).await
        else {
            return Err(Error::Timeout);
        };
        if !downgraded? {
            // Not ours any more (or, if the release has begun, the token has fired).
            if self.liveness.claim_end() {
                tracing::warn!(key = %self.key(), id = %self.id(), "lock lost: downgrade found it no longer held");
                self.liveness.cancel(CancelReason::Lost);
            }
            return Err(not_held(&self));
        }
        if self.liveness.fire_if_expired() {
            // Fired meanwhile: the refresher releases the reader's id.
            return Err(not_held(&self));
        }
        self.liveness.extend(sent + self.lease.validity());
        self.mode = Mode::Read;
        Ok(self)
    }
}
