//! [`Acquisition`]: one lock in Redis as the engine hands it over once it is taken and
//! kept, and as a reentrant mutex's registry shares it with nested guards.

use std::fmt;
use std::sync::Arc;

use tokio::time::Instant;

use super::liveness::LivenessRef;
use super::AnyLease;
use crate::mode::Mode;

/// A lock taken in Redis and kept by the refresher: the lease, the mode and fencing token
/// it was taken with, and its liveness. A guard is made of one; a reentrant mutex's
/// registry keeps the outermost guard's, which nested guards share.
#[derive(Clone)]
pub(crate) struct Acquisition {
    pub(crate) lease: Arc<dyn AnyLease>,
    pub(crate) mode: Mode,
    pub(crate) fencing_token: u64,
    pub(crate) liveness: LivenessRef,
}

impl Acquisition {
    /// Whether its lock may still be held: its token has not fired and its deadline has
    /// not passed. Looks only; fires nothing.
    pub(crate) fn live(&self) -> bool {
        !self.liveness.is_fired() && Instant::now() < self.liveness.deadline()
    }
}

impl fmt::Debug for Acquisition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Acquisition")
            .field("key", &self.lease.key())
            .field("id", &self.lease.id())
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}
