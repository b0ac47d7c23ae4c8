//! The blocking [`UpgradableReadGuard`]: an async upgradable read guard with its handle's
//! [`Background`], whose thread refreshes it.

use std::fmt;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use redis::{FromRedisValue, Pipeline};
use tokio_util::sync::CancellationToken;

use super::background::Background;
use super::guards::{blocking_guard_methods, ReadGuard, WriteGuard};
use crate::error::Error;
use crate::reason::CancelReason;

/// A held upgradable read lock of a blocking [`RwMutex`](super::RwMutex): the blocking
/// form of [`crate::UpgradableReadGuard`]. Plain readers share the lock with it; writers
/// and a second upgradable reader stay out; [`upgrade`](Self::upgrade) turns it into the
/// write lock with no writer in between. Its [`exec`](Self::exec) runs read-only commands.
///
/// Dropping it fires its cancellation token and hands the release to the background
/// thread, returning at once, with the one exception a [`WriteGuard`]'s drop has.
#[must_use = "dropping the guard releases the lock at once"]
#[clippy::has_significant_drop]
pub struct UpgradableReadGuard {
    guard: crate::UpgradableReadGuard,
    background: Arc<Background>,
}

impl UpgradableReadGuard {
    pub(super) fn new(guard: crate::UpgradableReadGuard, background: Arc<Background>) -> Self {
        Self { guard, background }
    }

    blocking_guard_methods!("lock", "UpgradableReadGuard", "crate::UpgradableReadGuard");

    /// Waits until no other reader is left and turns this lock into the write lock held
    /// by the same id, keeping new readers out meanwhile; see
    /// [`UpgradableReadGuard::upgrade`](crate::UpgradableReadGuard::upgrade).
    ///
    /// # Errors
    ///
    /// As [`UpgradableReadGuard::upgrade`](crate::UpgradableReadGuard::upgrade) (after an
    /// error the guard is dropped and its lock released), and [`Error::InRuntime`] on a
    /// thread with a Tokio runtime context (nothing was sent; the guard is dropped).
    pub fn upgrade(self) -> Result<WriteGuard, Error> {
        let Self { guard, background } = self;
        let write = background.block_on(guard.upgrade())??;
        Ok(WriteGuard::new(write, background))
    }

    /// One attempt to upgrade: `Ok(Err(self))` when other readers are still there; see
    /// [`UpgradableReadGuard::try_upgrade`](crate::UpgradableReadGuard::try_upgrade).
    ///
    /// # Errors
    ///
    /// As [`upgrade`](Self::upgrade).
    pub fn try_upgrade(self) -> Result<Result<WriteGuard, UpgradableReadGuard>, Error> {
        let Self { guard, background } = self;
        Ok(match background.block_on(guard.try_upgrade())?? {
            Ok(write) => Ok(WriteGuard::new(write, background)),
            Err(guard) => Err(Self::new(guard, background)),
        })
    }

    /// Gives up the right to upgrade and stays a plain reader; see
    /// [`UpgradableReadGuard::downgrade`](crate::UpgradableReadGuard::downgrade).
    ///
    /// # Errors
    ///
    /// As [`upgrade`](Self::upgrade).
    pub fn downgrade(self) -> Result<ReadGuard, Error> {
        let Self { guard, background } = self;
        let read = background.block_on(guard.downgrade())??;
        Ok(ReadGuard::new(read, background))
    }
}

impl fmt::Debug for UpgradableReadGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.guard.fmt(f)
    }
}
