//! How a guard gives its lock back: `unlock`, and `Drop`.

use std::sync::Arc;

use super::{Guard, Role};
use crate::error::Error;
use crate::lease::AnyLease;

impl Guard {
    /// Releases the lock and reports whether it was still held: `Ok(true)` when this id
    /// held the lock and is now removed, `Ok(false)` when it had been lost (expired,
    /// deleted or taken over). The token fires at once, before the release is sent.
    ///
    /// A [nested guard](Self#nested-guards) sends nothing and leaves the lock held: it
    /// returns `Ok(true)` while the outer guard's lock is still held, `Ok(false)` once
    /// it is not.
    ///
    /// If the token had already fired for another reason, the mutex's refresher has
    /// already released the lock (unless it was [lost](crate::CancelReason::Lost)), and this
    /// returns what that release found.
    ///
    /// # Errors
    ///
    /// [`Error::Refused`] when Redis refuses the release (busy with a script, no ACL
    /// permission, ...), [`Error::Redis`] when the request fails otherwise, and
    /// [`Error::Timeout`] when Redis does not answer within one TTL; the lock then
    /// expires by its TTL, since refresh has stopped. [`Error::Cancelled`] when the refresher's task was
    /// stopped before it could release, for example by runtime shutdown.
    ///
    /// Over a [`Quorum`](crate::Quorum) the release goes to every node at once and this
    /// returns once a majority has said whether it held the lock (`Ok(false)` only when a
    /// majority did not); the other nodes' releases go on in a background task, on the
    /// mutex's [`task_tracker`](crate::Builder::task_tracker) if it has one: a process
    /// that exits right after should wait for the tracker. [`Error::NoQuorum`] when
    /// neither a majority held it nor a majority did not (too few nodes answered within
    /// the per-node bound).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping this future before the release is answered hands the
    /// release to the refresher, as dropping the guard does.
    pub async fn unlock(self) -> Result<bool, Error> {
        let Role::Owner { .. } = &self.role else {
            let held = self.liveness.outer_held();
            self.liveness.fire();
            return Ok(held);
        };
        if !self.liveness.claim_end() {
            // The refresher ended the lock first (or is ending it): what it found.
            self.liveness.fire();
            return self.lease.ended().await;
        }
        self.liveness.fire();
        let pending = ReleaseOnDrop {
            lease: Some(Arc::clone(&self.lease)),
        };
        let released = self.lease.release().await;
        pending.disarm();
        if let Ok(false) = released {
            self.liveness.found_gone();
        }
        released
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.liveness.fire();
        if let Role::Owner { .. } = self.role {
            // The refresher releases the lock, unless `unlock` or the refresher has
            // claimed its end.
            Arc::clone(&self.lease).dropped();
        }
    }
}

/// Has the refresher send the release if `unlock` is dropped before its reply.
struct ReleaseOnDrop {
    lease: Option<Arc<dyn AnyLease>>,
}

impl ReleaseOnDrop {
    fn disarm(mut self) {
        self.lease = None;
    }
}

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        if let Some(lease) = self.lease.take() {
            lease.release_later();
        }
    }
}
