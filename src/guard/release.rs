//! How a guard gives its lock back: `unlock`, and `Drop`.

use std::sync::Arc;

use super::any::{AnyGuard, Role};
use crate::error::Error;
use crate::lease::AnyLease;

impl AnyGuard {
    /// Releases the lock: `Ok(true)` when this id held it. The token fires first. A
    /// nested guard sends nothing and reports whether the outer lock is still held; a
    /// lock whose end the refresher claimed first reports what that end found. The
    /// public docs are [`WriteGuard::unlock`](crate::WriteGuard::unlock)'s.
    pub(crate) async fn unlock(self) -> Result<bool, Error> {
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

impl Drop for AnyGuard {
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
