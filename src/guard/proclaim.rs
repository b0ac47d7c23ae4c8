//! An election's record, written on behalf of the guard of its leader's lock.

use std::sync::Arc;

use super::any::AnyGuard;
use crate::error::Error;
use crate::lease::liveness::LivenessRef;
use crate::lease::AnyLease;

/// Writes an election's record for one guard's lock, and may outlive the guard (a task
/// that keeps the record alive holds one): it ends with the guard's token.
pub(crate) struct Proclaimer {
    lease: Arc<dyn AnyLease>,
    liveness: LivenessRef,
}

impl AnyGuard {
    /// What writes an election's record while this guard's lock is held.
    pub(crate) fn proclaimer(&self) -> Proclaimer {
        Proclaimer {
            lease: Arc::clone(&self.lease),
            liveness: self.liveness.clone(),
        }
    }
}

impl Proclaimer {
    /// Writes `record` beside the lock key and publishes it, only while the lock is still
    /// the guard's as a writer, in one step with that check (`lua/proclaim.lua`). A guard
    /// whose token has fired, or whose validity has ended, is refused without a round
    /// trip; a lock the server finds not held is lost (the token fires with
    /// `CancelReason::Lost`).
    ///
    /// # Errors
    ///
    /// [`Error::NotHeld`] when the lock is not the guard's; [`Error::Timeout`] when no
    /// reply came within the guard's validity; the backend's errors otherwise.
    pub(crate) async fn proclaim(&self, record: &str) -> Result<(), Error> {
        let not_held = || Error::NotHeld {
            key: self.lease.key().to_owned(),
        };
        if self.liveness.fire_if_expired() {
            return Err(not_held());
        }
        let run = self.lease.proclaim(record);
        let Ok(written) = tokio::time::timeout_at(self.liveness.deadline(), run).await else {
            return Err(Error::Timeout);
        };
        if written? {
            Ok(())
        } else {
            Err(not_held())
        }
    }

    /// Completes when the guard's token fires or its validity ends.
    pub(crate) async fn ended(&self) {
        self.liveness.cancelled().await;
    }
}
