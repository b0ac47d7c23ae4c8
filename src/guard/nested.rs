//! The nested guards of a reentrant mutex: a second guard on a lock its task holds.

use std::sync::Arc;
use std::time::SystemTime;

use tokio_util::sync::CancellationToken;

use super::any::{AnyGuard, Role};
use crate::lease::acquisition::Acquisition;
use crate::lease::liveness::{Liveness, LivenessRef};
use crate::mode::Mode;
use crate::spawner::Spawner;

impl AnyGuard {
    /// A nested guard in `mode` on the lock `outer` holds. With a `parent`, `spawner`
    /// runs the small task that cancels the nested token when `parent` is cancelled (a
    /// token has one parent: the outer guard's).
    pub(crate) fn nested(
        outer: &Acquisition,
        mode: Mode,
        parent: Option<CancellationToken>,
        spawner: Option<Spawner>,
    ) -> Self {
        let liveness = Liveness::nested(parent.clone(), outer.liveness.clone());
        if let (Some(parent), Some(spawner)) = (&parent, spawner) {
            let token = liveness.token();
            let (parent, token) = (parent.clone(), token.clone());
            // Ends with the nested token at the latest, which fires with the outer one.
            drop(spawner.spawn(async move {
                tokio::select! {
                    biased;
                    () = token.cancelled() => {}
                    () = parent.cancelled() => token.cancel(),
                }
            }));
        }
        Self {
            lease: Arc::clone(&outer.lease),
            mode,
            fencing_token: outer.fencing_token,
            liveness: LivenessRef::new(liveness),
            role: Role::Nested,
            acquired_at: SystemTime::now(),
        }
    }
}
