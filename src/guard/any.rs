//! [`AnyGuard`]: what every guard is made of, one [`Acquisition`] the engine returned and the
//! lease layer keeps alive; the typed guards ([`WriteGuard`](super::WriteGuard),
//! [`ReadGuard`](super::ReadGuard), [`Permit`](super::Permit)) each wrap one.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::SystemTime;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::Error;
use crate::lease::acquisition::Acquisition;
use crate::lease::liveness::LivenessRef;
use crate::lease::registry::Registration;
use crate::lease::AnyLease;
use crate::mode::Mode;
use crate::reason::CancelReason;

/// A held lock or permit, and the cancellation token that says whether it is still held.
/// Dropping it fires the token and has the refresher release the lock.
pub(crate) struct AnyGuard {
    pub(super) lease: Arc<dyn AnyLease>,
    /// [`Mode::Read`] after a downgrade.
    pub(super) mode: Mode,
    pub(super) fencing_token: u64,
    pub(super) liveness: LivenessRef,
    pub(super) role: Role,
    /// When the request that gave the guard completed, by the system clock.
    pub(super) acquired_at: SystemTime,
}

/// Whether a guard holds the lock in Redis or shares another guard's.
pub(super) enum Role {
    /// Took the lock in Redis: its mutex's refresher renews it, and releases it when
    /// its token fires.
    Owner {
        /// Its entry in a reentrant mutex's registry, removed with the guard.
        registration: Option<Box<Registration>>,
    },
    /// Shares the lock of an outer guard of the same task; its liveness follows the
    /// outer guard's.
    Nested,
}

impl AnyGuard {
    /// The guard of the lock the engine took and its refresher keeps.
    pub(crate) fn owner(acquisition: Acquisition) -> Self {
        let Acquisition {
            lease,
            mode,
            fencing_token,
            liveness,
        } = acquisition;
        Self {
            lease,
            mode,
            fencing_token,
            liveness,
            role: Role::Owner { registration: None },
            acquired_at: SystemTime::now(),
        }
    }

    /// Whether the guard shares an outer guard's lock (reentrancy) rather than holding
    /// one in Redis.
    pub(crate) fn is_nested(&self) -> bool {
        matches!(self.role, Role::Nested)
    }

    /// This guard's acquisition, which nested guards on its lock share.
    pub(crate) fn as_outer(&self) -> Acquisition {
        Acquisition {
            lease: Arc::clone(&self.lease),
            mode: self.mode,
            fencing_token: self.fencing_token,
            liveness: self.liveness.clone(),
        }
    }

    /// Keeps this guard's entry in its mutex's reentrancy registry until it goes.
    pub(crate) fn registered(&mut self, entry: Registration) {
        if let Role::Owner { registration, .. } = &mut self.role {
            *registration = Some(Box::new(entry));
        }
    }

    pub(crate) fn key(&self) -> &str {
        self.lease.key()
    }

    pub(crate) fn id(&self) -> &str {
        self.lease.id()
    }

    pub(crate) fn fencing_token(&self) -> u64 {
        self.fencing_token
    }

    /// The cancellation token, handed out: from now on the refresher watches it, since
    /// anyone may cancel it. Fires it first if the validity deadline has passed.
    pub(crate) fn cancellation_token(&self) -> &CancellationToken {
        if matches!(self.role, Role::Owner { .. }) && !self.lease.handed_out() {
            Arc::clone(&self.lease).hand_out();
        }
        let token = self.liveness.token();
        self.liveness.fire_if_expired();
        token
    }

    pub(crate) fn cancelled(&self) -> impl Future<Output = ()> + Send + '_ {
        self.liveness.cancelled()
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.liveness.fire_if_expired()
    }

    pub(crate) fn cancel_reason(&self) -> Option<CancelReason> {
        self.liveness.reason()
    }

    pub(crate) fn valid_until(&self) -> Instant {
        self.liveness.deadline()
    }

    pub(crate) fn acquired_at(&self) -> SystemTime {
        self.acquired_at
    }

    pub(crate) fn refreshes(&self) -> u64 {
        self.liveness.renewals()
    }

    /// [`Error::NotHeld`] naming this guard's key.
    pub(super) fn not_held(&self) -> Error {
        Error::NotHeld {
            key: self.key().to_owned(),
        }
    }

    /// The lock was found not held by `what`: the token fires with
    /// [`CancelReason::Lost`] (unless its end was already claimed), and the error says so.
    pub(super) fn lost(&self, what: &str) -> Error {
        if self.liveness.claim_end() {
            tracing::warn!(key = %self.key(), id = %self.id(), "lock lost: {what} found it no longer held");
            self.liveness.cancel(CancelReason::Lost);
        }
        self.not_held()
    }

    /// The fields every guard's `Debug` shows, under the guard's type name `name`.
    pub(super) fn debug(&self, name: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(name)
            .field("key", &self.key())
            .field("id", &self.id())
            .field("fencing_token", &self.fencing_token)
            .field("nested", &self.is_nested())
            .field("cancel_reason", &self.liveness.recorded())
            .finish()
    }
}
