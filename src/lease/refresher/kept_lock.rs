//! One held lock as its mutex's refresher keeps it: the lease, the guard's token and
//! liveness, and what the refresher's release of it found.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::Pipeline;
use tokio_util::task::task_tracker::TaskTrackerToken;

use super::Core;
use crate::backend::Backend;
use crate::error::{chain, Error};
use crate::lease::any::{AnyLease, ExecFuture, ExecSetFuture, LeaseFuture, UpgradeFuture};
use crate::lease::liveness::{HasLiveness, Liveness, LivenessRef};
use crate::lease::portable::Part;
use crate::lease::HeldLease;
use crate::mode::Mode;
use crate::notify::waiter::Waiter;
use crate::observe::Exec;
use crate::protocol::calls::{Leftovers, UpgradeOp};
use crate::protocol::exec::{Access, Executed};
use crate::protocol::id::Id;
use crate::protocol::keys::Keys;
use crate::reason::CancelReason;
use crate::util;

/// A held lock: what its guard and its refresher share. The guard holds it while it
/// lives; the refresher holds it weakly while it waits to renew it, and strongly while a
/// renewal or its release is in flight.
pub(crate) struct KeptLock<B: Backend> {
    pub(crate) lease: Arc<HeldLease<B>>,
    /// Inline: the lock and its liveness are one allocation, which the guard shares
    /// ([`KeptLock::liveness_ref`]).
    pub(crate) liveness: Liveness,
    /// The fencing token the acquire got: a quorum renewal takes the lock back only on a
    /// node whose fence counter is not past it.
    pub(crate) fencing_token: u64,
    core: Arc<Core<B>>,
    /// What the refresher's release found, once the refresher has ended the lock (for an
    /// `unlock` that comes after): taken by the first look.
    outcome: Mutex<Option<Box<Result<bool, Error>>>>,
    /// Whether the refresher watches the token: [`UNWATCHED`], [`TO_WATCH`] or
    /// [`WATCHED`].
    watch: AtomicU8,
    /// Counts the lock on the mutex's task tracker until its release is done.
    _tracked: Option<TaskTrackerToken>,
}

/// Only this crate can cancel the token (no parent, never handed out): nothing to watch.
const UNWATCHED: u8 = 0;
/// Someone else may cancel the token: the refresher is to watch it.
const TO_WATCH: u8 = 1;
/// The refresher watches the token.
const WATCHED: u8 = 2;

impl<B: Backend> KeptLock<B> {
    /// The kept lock, acquired with `fencing_token`, whose token is watched from the start
    /// when `watch` (it has a parent).
    pub(super) fn new(
        lease: Arc<HeldLease<B>>,
        liveness: Liveness,
        fencing_token: u64,
        core: Arc<Core<B>>,
        watch: bool,
    ) -> Self {
        let tracked = core.tracker.as_ref().map(|tracker| tracker.token());
        Self {
            lease,
            liveness,
            fencing_token,
            core,
            outcome: Mutex::new(None),
            watch: AtomicU8::new(if watch { TO_WATCH } else { UNWATCHED }),
            _tracked: tracked,
        }
    }

    /// The lock's liveness as the guard shares it: through this lock, no allocation of
    /// its own.
    pub(crate) fn liveness_ref(self: &Arc<Self>) -> LivenessRef {
        LivenessRef::within(Arc::clone(self) as Arc<dyn HasLiveness>)
    }

    /// Whether the lock's end has come: its token fired (or its deadline passed, which
    /// fires it).
    pub(super) fn ending(&self) -> bool {
        self.liveness.fire_if_expired()
    }

    /// Whether the refresher is to start watching the token now: true once, for the
    /// first caller after the token may be cancelled by someone else.
    pub(super) fn start_watch(&self) -> bool {
        self.watch
            .compare_exchange(TO_WATCH, WATCHED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Records what ending the lock found and wakes an `unlock` that waits for it.
    pub(super) fn finish(&self, outcome: Result<bool, Error>) {
        *util::lock(&self.outcome) = Some(Box::new(outcome));
        self.core.ended.notify_waiters();
    }

    /// A refresh found the lock gone: the end is claimed (nothing is sent) and the token
    /// fires with [`CancelReason::Lost`], or [`CancelReason::ClockJump`] when the same
    /// renewal saw the server's clock jump forward (`early`).
    pub(super) fn lost(&self, early: bool) {
        if early {
            tracing::warn!(key = %self.lease.key(), id = %self.lease.id(), "lock lost: refresh found it no longer held, the server's clock having jumped forward");
            self.gone(CancelReason::ClockJump);
        } else {
            tracing::warn!(key = %self.lease.key(), id = %self.lease.id(), "lock lost: refresh found it no longer held");
            self.gone(CancelReason::Lost);
        }
    }

    /// The lock was found gone: the end is claimed (nothing is sent) and the token fires
    /// with `reason`.
    fn gone(&self, reason: CancelReason) {
        if self.liveness.claim_end() {
            self.finish(Ok(false));
        }
        self.liveness.cancel(reason);
    }

    /// The deadline passed: the token fires with [`CancelReason::Expired`] when no
    /// renewal answered in time, or [`CancelReason::MaxHold`] when the deadline was the
    /// cap on holding; the refresher then releases the lock, which may still be held.
    pub(super) fn expired(&self) {
        let reason = self.liveness.expiry();
        if reason == CancelReason::MaxHold {
            tracing::info!(key = %self.lease.key(), id = %self.lease.id(), "lock ended: held for max_hold");
        } else {
            tracing::warn!(key = %self.lease.key(), id = %self.lease.id(), "lock expired: no refresh succeeded in time");
        }
        self.liveness.cancel(reason);
    }
}

/// The release the refresher sends for a lock whose end it claimed: records what it
/// found for a later `unlock`, and [`Error::Cancelled`] if it is dropped first (the
/// runtime shut down).
pub(super) async fn release<B: Backend>(lock: Arc<KeptLock<B>>) {
    let mut pending = Pending(Some(Arc::clone(&lock)));
    let reason = lock.liveness.reason();
    let (key, id) = (lock.lease.key(), lock.lease.id());
    let released = lock.lease.release(Leftovers::NONE).await;
    match &released {
        Ok(held) => {
            tracing::debug!(%key, %id, ?reason, held, "lock released");
            if !held {
                lock.liveness.found_gone();
            }
        }
        Err(err) => tracing::warn!(
            %key, %id, ?reason, error = %chain(err),
            "release failed; the lock expires by its TTL"
        ),
    }
    pending.0 = None;
    lock.finish(released);
}

/// A release in flight; dropped before its reply, it records [`Error::Cancelled`].
struct Pending<B: Backend>(Option<Arc<KeptLock<B>>>);

impl<B: Backend> Drop for Pending<B> {
    fn drop(&mut self) {
        if let Some(lock) = self.0.take() {
            lock.finish(Err(Error::Cancelled));
        }
    }
}

impl<B: Backend> HasLiveness for KeptLock<B> {
    fn liveness(&self) -> &Liveness {
        &self.liveness
    }
}

impl<B: Backend> AnyLease for KeptLock<B> {
    fn key(&self) -> &str {
        self.lease.key()
    }

    fn id(&self) -> &str {
        self.lease.id()
    }

    fn mode(&self) -> Mode {
        self.lease.mode()
    }

    fn validity(&self) -> Duration {
        self.lease.validity()
    }

    fn portable(&self, fencing_token: u64) -> (Id, Part) {
        self.lease.portable(fencing_token)
    }

    fn release(&self) -> LeaseFuture<'_> {
        Box::pin(self.lease.release(Leftovers::NONE))
    }

    fn downgrade(&self) -> LeaseFuture<'_> {
        Box::pin(self.lease.downgrade())
    }

    fn upgrade(&self, op: UpgradeOp) -> UpgradeFuture<'_> {
        Box::pin(self.lease.upgrade(op))
    }

    fn plain(&self) -> LeaseFuture<'_> {
        Box::pin(self.lease.plain())
    }

    fn wait_first(&self) -> Option<Waiter> {
        let hub = self.lease.backend.hub()?;
        Some(hub.join_first(&self.lease.call.keys))
    }

    fn ttl(&self) -> Duration {
        self.lease.ttl()
    }

    fn exec<'a>(&'a self, pipe: &'a Pipeline, access: Access) -> ExecFuture<'a> {
        Box::pin(async move {
            let replies = self.lease.exec(pipe, access).await;
            self.core.meters.exec(match &replies {
                Ok(Some(_)) => Exec::Ran,
                Ok(None) => Exec::NotHeld,
                Err(Error::CommandFailed { .. }) => Exec::Failed,
                Err(_) => Exec::Error,
            });
            let replies = replies?;
            if replies.is_none() && !self.liveness.is_fired() {
                tracing::warn!(key = %self.lease.key(), id = %self.lease.id(), "lock lost: exec found it no longer held");
                self.gone(CancelReason::Lost);
            }
            Ok(replies)
        })
    }

    fn exec_set<'a>(
        &'a self,
        also: &'a [Keys],
        pipe: &'a Pipeline,
        access: Access,
    ) -> ExecSetFuture<'a> {
        Box::pin(async move {
            let executed = self.lease.exec_set(also, pipe, access).await;
            self.core.meters.exec(match &executed {
                Ok(Executed::Ran(_)) => Exec::Ran,
                Ok(Executed::NotHeld(_)) => Exec::NotHeld,
                Err(Error::CommandFailed { .. }) => Exec::Failed,
                Err(_) => Exec::Error,
            });
            executed
        })
    }

    fn found_lost(&self, what: &str) {
        if !self.liveness.is_fired() {
            tracing::warn!(key = %self.lease.key(), id = %self.lease.id(), "lock lost: {what} found it no longer held");
            self.gone(CancelReason::Lost);
        }
    }

    fn proclaim<'a>(&'a self, record: &'a str) -> LeaseFuture<'a> {
        Box::pin(async move {
            let written = self.lease.proclaim(record).await?;
            if !written && !self.liveness.is_fired() {
                tracing::warn!(key = %self.lease.key(), id = %self.lease.id(), "lock lost: the leader's record found it no longer held");
                self.gone(CancelReason::Lost);
            }
            Ok(written)
        })
    }

    fn dropped(self: Arc<Self>) {
        if self.liveness.claim_end() {
            self.release_later();
        }
    }

    fn handed_out(&self) -> bool {
        self.watch.load(Ordering::Acquire) != UNWATCHED
    }

    fn hand_out(self: Arc<Self>) {
        let first = self
            .watch
            .compare_exchange(UNWATCHED, TO_WATCH, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if first {
            let core = Arc::clone(&self.core);
            core.watch(self);
        }
    }

    fn release_later(self: Arc<Self>) {
        let core = Arc::clone(&self.core);
        core.hand_over(self);
    }

    fn ended(&self) -> LeaseFuture<'_> {
        Box::pin(async move {
            loop {
                let notified = self.core.ended.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if let Some(outcome) = util::lock(&self.outcome).take() {
                    return *outcome;
                }
                notified.await;
            }
        })
    }
}
