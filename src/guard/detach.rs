//! How a guard leaves its process: `detach`, which gives the hold as a [`Lease`] and
//! sends nothing; and `lease`, the same lease of a guard that stays.

use super::any::{AnyGuard, Role};
use crate::lease::portable::{Lease, Part};
use crate::protocol::id::Id;
use crate::reason::CancelReason;

impl AnyGuard {
    /// This guard's hold as a lease, which the guard no longer keeps: nothing is sent.
    /// An owner claims the lock's end (so the refresher neither renews nor releases it,
    /// and the held metric ends); its token fires with [`CancelReason::Detached`]; its
    /// registry entry goes with it. A nested guard's lease names the outer guard's hold,
    /// which the outer guard keeps. A guard whose end was claimed before (its token fired)
    /// still gives its lease. The public docs are
    /// [`WriteGuard::detach`](crate::WriteGuard::detach)'s.
    pub(crate) fn detach(self) -> Lease {
        let (id, part) = self.detached();
        Lease::new(id, vec![part])
    }

    /// This guard's hold as a lease, while the guard goes on keeping it: nothing is sent
    /// and nothing changes here. The public docs are
    /// [`WriteGuard::lease`](crate::WriteGuard::lease)'s.
    pub(crate) fn lease(&self) -> Lease {
        let (id, part) = self.lease.portable(self.fencing_token);
        Lease::new(id, vec![part])
    }

    /// This guard's part of its set's lease, with the hold's id; the guard keeps it.
    pub(super) fn part(&self) -> (Id, Part) {
        self.lease.portable(self.fencing_token)
    }

    /// [`detach`](Self::detach)'s work, for one key of a set too: this key's part of the
    /// lease, with the hold's id; the guard is dropped after it.
    pub(super) fn detached(self) -> (Id, Part) {
        let portable = self.lease.portable(self.fencing_token);
        if let Role::Owner { .. } = self.role {
            if self.liveness.claim_end() {
                tracing::debug!(key = %self.key(), id = %self.id(), "lock detached: it stays held until its TTL, or until its lease is attached or released");
            }
        }
        self.liveness.cancel(CancelReason::Detached);
        portable
    }
}
