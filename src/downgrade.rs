//! Turning a write guard into a read guard in one step, and what the release must know
//! about it.

use std::sync::atomic::{AtomicU8, Ordering};

use tokio::time::Instant;

use crate::error::Error;
use crate::guard::Guard;
use crate::mode::Mode;
use crate::reason::CancelReason;

/// Nothing was sent: the id is at the lock key in the lease's own mode.
const AS_ACQUIRED: u8 = 0;
/// A downgrade was sent and its reply not read: the id may be a writer's or a reader's.
const IN_FLIGHT: u8 = 1;
/// A downgrade succeeded: the id is a reader's.
const DOWNGRADED: u8 = 2;
/// The release has begun: no downgrade may be sent after it.
const RELEASING: u8 = 4;

/// In which form a lease's id may be at the lock key, as its release must know: in the
/// lease's mode until a downgrade is sent, in either while one is unanswered, a reader's
/// once one succeeded.
///
/// The release marks the start of its work here, so a downgrade is either sent before
/// the release looks (which then removes the id in both forms) or not at all.
#[derive(Debug, Default)]
pub(crate) struct Shape(AtomicU8);

impl Shape {
    /// A downgrade is about to be sent. False when the release has begun: then nothing
    /// must be sent, since the release may already have looked for a writer's id.
    pub(crate) fn sending(&self) -> bool {
        self.0
            .compare_exchange(AS_ACQUIRED, IN_FLIGHT, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// The mode a lease taken in `mode` holds the lock in now: [`Mode::Read`] once a
    /// downgrade succeeded (or may have).
    pub(crate) fn mode(&self, mode: Mode) -> Mode {
        match self.0.load(Ordering::Acquire) & !RELEASING {
            AS_ACQUIRED => mode,
            _ => Mode::Read,
        }
    }

    /// The downgrade was answered: the id is now a reader's when `downgraded`, else it
    /// was at the lock key in neither form. A release that began meanwhile keeps the
    /// forms it chose.
    pub(crate) fn answered(&self, downgraded: bool) {
        let to = if downgraded { DOWNGRADED } else { AS_ACQUIRED };
        let _ = self
            .0
            .compare_exchange(IN_FLIGHT, to, Ordering::AcqRel, Ordering::Acquire);
    }

    /// The release begins: the modes to release the id as, in order, for a lease taken in
    /// `mode`. The release stops at the first that finds the id.
    pub(crate) fn releasing(&self, mode: Mode) -> &'static [Mode] {
        match (
            self.0.fetch_or(RELEASING, Ordering::AcqRel) & !RELEASING,
            mode,
        ) {
            (DOWNGRADED, _) | (_, Mode::Read) => &[Mode::Read],
            (IN_FLIGHT, Mode::Write) => &[Mode::Write, Mode::Read],
            (_, Mode::Write) => &[Mode::Write],
        }
    }
}

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
    /// background task releases the lock as for any fired token), or when Redis no longer
    /// had this id at the lock key: the token then fires with [`CancelReason::Lost`] and
    /// nothing is released. [`Error::Refused`] when Redis refuses the script,
    /// [`Error::Redis`] when the request fails otherwise, and [`Error::Timeout`] when
    /// Redis does not answer before the validity deadline ([`valid_until`]). After these
    /// three the guard is dropped, so its background task releases the lock, removing
    /// the id whether it is still a writer's or already a reader's.
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
        if self.status.check(&self.token) {
            return Err(not_held(&self));
        }
        let sent = Instant::now();
        let downgrade = self.lease.downgrade();
        let Ok(downgraded) = tokio::time::timeout_at(self.status.deadline(), downgrade).await
        else {
            return Err(Error::Timeout);
        };
        if !downgraded? {
            // Not ours any more (or, if the release has begun, the token has fired).
            if self.status.claim_end() {
                tracing::warn!(key = %self.key(), id = %self.id(), "lock lost: downgrade found it no longer held");
                self.status.cancel(&self.token, CancelReason::Lost);
            }
            return Err(not_held(&self));
        }
        if self.status.check(&self.token) {
            // Fired meanwhile: the background task releases the reader's id.
            return Err(not_held(&self));
        }
        self.status.extend(sent + self.lease.validity());
        self.mode = Mode::Read;
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_release_removes_every_form_the_id_may_have() {
        let never = Shape::default();
        assert_eq!(never.releasing(Mode::Write), [Mode::Write]);
        assert_eq!(Shape::default().releasing(Mode::Read), [Mode::Read]);

        let done = Shape::default();
        assert!(done.sending());
        done.answered(true);
        assert_eq!(done.releasing(Mode::Write), [Mode::Read]);

        let unanswered = Shape::default();
        assert!(unanswered.sending());
        assert_eq!(unanswered.releasing(Mode::Write), [Mode::Write, Mode::Read]);
        unanswered.answered(true);
        assert_eq!(
            unanswered.releasing(Mode::Write),
            [Mode::Write, Mode::Read],
            "a reply after the release began changes nothing"
        );

        let refused = Shape::default();
        assert!(refused.sending());
        refused.answered(false);
        assert_eq!(refused.releasing(Mode::Write), [Mode::Write]);
    }

    #[test]
    fn no_downgrade_is_sent_once_the_release_has_begun() {
        let shape = Shape::default();
        assert_eq!(shape.releasing(Mode::Write), [Mode::Write]);
        assert!(!shape.sending());
    }
}
