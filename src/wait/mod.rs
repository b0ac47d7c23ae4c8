//! The wait: one lease to take in, the lock [`Taken`] (or not, for one attempt) out. It
//! sends the attempts through the lease's [`Backend`], waits between them (woken by the
//! hub, or polling), and on every way out leaves nothing behind in Redis ([`Cleanup`]).
//! The engine ([`crate::engine`]) runs it for each request and hands what it took to the
//! refresher.

mod cleanup;
mod interrupt;
pub(crate) mod set;
mod step;

use std::sync::Arc;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use self::cleanup::Cleanup;
use self::interrupt::Interrupt;
use self::step::{decide, Context, Next, Reply};
pub(crate) use self::step::{pause, BACKOFF_MAX, BACKOFF_MIN};
use self::step::{probed, PROBE_FIRST};
use crate::backend::Backend;
use crate::error::Error;
use crate::lease::HeldLease;
use crate::mode::{Kind, Mode};
use crate::notify::waiter::Waiter;
use crate::protocol::calls::AttemptKind;
use crate::protocol::fences::Fences;
use crate::protocol::replies::Attempt;
use crate::settings::Settings;
use crate::spawner::Spawner;

/// How long a waiter waits for its channel's subscription before its first attempt
/// under it (a healthy server confirms within a round trip, or a few for a first
/// connection); past this it polls until the subscription is confirmed.
pub(crate) const SUBSCRIBE_WAIT: Duration = Duration::from_millis(100);

/// Whether a request waits for the lock.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Patience {
    /// One attempt (`try_write`, `try_read`, `try_acquire`).
    Once,
    /// Retry until acquired, or until the timeout, if any, runs out.
    Wait(Option<Duration>),
}

impl Patience {
    /// When the wait's timeout, if any, runs out, counted from now.
    pub(crate) fn deadline(self) -> Option<Instant> {
        match self {
            Self::Wait(Some(timeout)) => Instant::now().checked_add(timeout),
            _ => None,
        }
    }

    /// Whether the request waits (`write`, `read`, `acquire`) rather than trying once.
    pub(crate) fn waits(self) -> bool {
        matches!(self, Self::Wait(_))
    }
}

/// One request, as the engine takes it: the checked request's lease, made on the
/// handle's backend, and what the wait needs besides.
#[derive(Debug)]
pub(crate) struct LeaseRequest<'a, B> {
    /// The lease to take: its keys, a fresh id, its kind, TTL and queueing.
    pub(crate) lease: Arc<HeldLease<B>>,
    pub(crate) patience: Patience,
    /// Cancelling it ends the wait with [`Error::Cancelled`].
    pub(crate) parent: Option<&'a CancellationToken>,
    /// The handle's options: whether a waiting writer sets the lock intent, and how long
    /// the fence key outlives an acquisition (the fast path needs half of it).
    pub(crate) settings: &'a Settings,
    /// The mutex's record of checked fence keys, for the fast paths.
    pub(crate) fences: &'a Fences,
    /// Where the clean-up after giving up runs.
    pub(crate) spawner: &'a Spawner,
}

/// A lock taken by a request sent at `sent`, with its fencing token.
#[derive(Debug)]
pub(crate) struct Taken<B> {
    pub(crate) lease: Arc<HeldLease<B>>,
    pub(crate) sent: Instant,
    pub(crate) token: u64,
}

/// Takes the lock `request` describes. `Ok(None)` only with [`Patience::Once`], when others
/// hold it.
///
/// # Cancel safety
///
/// Dropping the future leaves nothing in Redis for longer than a round trip: what an
/// attempt may have taken, an intent it set and a queue place are released from a
/// background task ([`Cleanup`]).
pub(crate) async fn run<B: Backend>(
    request: LeaseRequest<'_, B>,
) -> Result<Option<Taken<B>>, Error> {
    let interrupt = Interrupt::new(request.parent, request.patience.deadline());
    let mut wait = Wait::new(&request);
    match interrupt.or(wait.run()).await {
        Ok(acquired) => Ok(acquired),
        Err(err) => Err(wait.cleanup.give_up(err).await),
    }
}

/// The state of one request's wait.
struct Wait<'j, 'a, B: Backend> {
    request: &'j LeaseRequest<'a, B>,
    cleanup: Cleanup<B>,
    /// This process's queue on the lock, once the request has had to wait.
    waiter: Option<Waiter>,
    backoff: ExponentialBackoff,
    /// The next attempt takes the write fast path.
    fast: bool,
    /// A release published from before the last attempt will wake the waiter.
    notified: bool,
    /// The last attempt found the lock held by another request: a sleep after it ends
    /// with that holder's release, or at the fallback timer.
    blocked: bool,
    /// The last sleep followed a blocked attempt, waited for a message, was cut short of
    /// the blocker's PTTL (at half the TTL), and its fallback timer ended it: if the next
    /// attempt takes the lock, its holder, who kept its key alive, released it without a
    /// message.
    timer_woke: bool,
    /// The next sleep of this waiter on a lock none of whose releases this process has
    /// heard yet: [`PROBE_FIRST`], doubled by each such sleep no message cut short.
    probe: Duration,
    /// When the last attempt was sent.
    sent: Instant,
    late_replies: u32,
    /// A waiting writer on a mutex with the lock intent.
    set_intent: bool,
    /// How this process's queue wakes it: in fair mode every release wakes all local
    /// waiters, since the queue in Redis, not this process, says whose turn it is.
    wake_as: Mode,
}

impl<'j, 'a, B: Backend> Wait<'j, 'a, B> {
    fn new(request: &'j LeaseRequest<'a, B>) -> Self {
        let lease = &request.lease;
        let waits = request.patience.waits();
        let fair = lease.call.queue.is_fair();
        Self {
            request,
            cleanup: Cleanup::new(Arc::clone(lease), request.spawner.clone(), fair && waits),
            waiter: None,
            backoff: ExponentialBuilder::new()
                .with_min_delay(BACKOFF_MIN)
                .with_max_delay(BACKOFF_MAX)
                .with_jitter()
                .without_max_times()
                .build(),
            fast: false,
            notified: false,
            blocked: false,
            timer_woke: false,
            probe: PROBE_FIRST,
            sent: Instant::now(),
            late_replies: 0,
            set_intent: lease.kind == Kind::Write
                && request.settings.product.lock_intent()
                && waits,
            // An upgradable reader goes in one at a time: woken as a writer is.
            wake_as: match lease.kind {
                _ if fair => Mode::Read,
                Kind::Upgradable => Mode::Write,
                kind => kind.mode(),
            },
        }
    }

    async fn run(&mut self) -> Result<Option<Taken<B>>, Error> {
        let mut next = self.start();
        loop {
            next = match next {
                Next::Attempt => self.attempt().await,
                Next::Taken(token) => return Ok(Some(self.taken(token))),
                Next::Unavailable => return Ok(None),
                Next::Fail(err) => return Err(err),
                Next::Subscribe => {
                    self.subscribe().await;
                    Next::Attempt
                }
                Next::Retry => {
                    let pause = self.backoff.next().unwrap_or(BACKOFF_MAX);
                    tokio::time::sleep(pause).await;
                    Next::Attempt
                }
                Next::Sleep(blocked_for) => {
                    let woken = self.sleep(blocked_for).await;
                    // Woken by a release, the lock is likely free: a writer that keeps no
                    // intent (the fast path would not clear it) tries without a script.
                    self.fast = woken && !self.set_intent && self.fast_ok();
                    Next::Attempt
                }
            };
        }
    }

    /// The first step: queue behind this process's waiters on the lock if there are any
    /// (not in fair mode, where the first attempt takes a place in the queue in Redis),
    /// else attempt, by the fast path when it may.
    fn start(&mut self) -> Next {
        let lease = &self.request.lease;
        if let (Some(hub), true, false) = (
            lease.backend.hub(),
            self.request.patience.waits(),
            lease.call.queue.is_fair(),
        ) {
            if hub.has_waiters(lease.call.keys.lock()) {
                let waiter = hub.join(&lease.call.keys, self.wake_as);
                self.notified = waiter.notifies();
                self.waiter = Some(waiter);
                return Next::Sleep(lease.ttl());
            }
        }
        self.fast = self.fast_ok();
        Next::Attempt
    }

    /// Whether a writer may take the fast path on this lock key: the backend allows it
    /// (its tokens need no clock floor), the lock is not fair, and this mutex has checked
    /// the fence key recently enough.
    fn fast_ok(&self) -> bool {
        let (request, lease) = (self.request, &self.request.lease);
        lease.kind == Kind::Write
            && lease.backend.fast_path()
            && !lease.call.queue.is_fair()
            && request
                .fences
                .countable(lease.key(), request.settings.fence_retention)
    }

    /// Sends one attempt and decides what comes next.
    async fn attempt(&mut self) -> Next {
        let lease = &self.request.lease;
        self.notified = self.waiter.as_ref().is_some_and(Waiter::attempting);
        let fast = std::mem::take(&mut self.fast);
        // A fair reader reads the fence key (the counting path knows no queue).
        let fence_checked = !lease.call.queue.is_fair() && self.request.fences.checked(lease.key());
        let attempt_kind = match lease.kind {
            Kind::Write if fast => AttemptKind::FastWrite,
            Kind::Write => AttemptKind::Write {
                set_intent: self.set_intent,
            },
            Kind::Read => AttemptKind::Read { fence_checked },
            Kind::Permit(permits) => AttemptKind::Permit(permits),
            Kind::Upgradable => AttemptKind::Upgradable,
        };
        self.sent = Instant::now();
        self.cleanup.left_behind.sending(self.set_intent && !fast);
        // A reply later than the validity could not make a guard, so no attempt waits
        // longer, even over a connection with no response timeout of its own (or a
        // cluster client that keeps retrying through a failover).
        let reply = match tokio::time::timeout(lease.validity(), lease.attempt(attempt_kind)).await
        {
            Err(_) => Reply::Unanswered,
            Ok(Ok(attempt)) => Reply::Answered {
                attempt,
                in_time: Instant::now() < self.sent + lease.validity(),
            },
            Ok(Err(err)) => Reply::Failed(err),
        };
        self.settle(&reply, fast || (lease.kind == Kind::Read && fence_checked));
        self.note_silence(&reply);
        self.blocked = matches!(
            reply,
            Reply::Answered {
                attempt: Attempt::Blocked(_),
                ..
            }
        );
        let context = Context {
            waits: self.request.patience.waits(),
            notifier: lease.backend.hub().is_some(),
            queued: self.waiter.is_some(),
            late_replies: self.late_replies,
        };
        decide(reply, context)
    }

    /// Records what the reply says Redis may hold for this request (for the clean-up),
    /// and what it says of the fence key; `counted` when the attempt counted on a checked
    /// fence key rather than minting by script.
    fn settle(&mut self, reply: &Reply, counted: bool) {
        let (lease, fences) = (&self.request.lease, self.request.fences);
        let (key, id) = (lease.key(), lease.id());
        match reply {
            Reply::Answered { attempt, in_time } => match attempt {
                Attempt::Acquired(token) if *in_time => {
                    self.cleanup.left_behind.disarm();
                    if counted {
                        fences.counted(key, *token);
                    } else {
                        fences.minted(key, *token, self.sent);
                    }
                }
                Attempt::Acquired(_) => {
                    // The server or the connection stalled: the lock may already have
                    // expired, so no guard is made of it; `cleanup` releases it if the
                    // wait ends before an attempt renews it.
                    tracing::debug!(%key, %id, "acquired too late to be valid; trying again");
                    self.cleanup.left_behind.late();
                    self.late_replies += 1;
                }
                Attempt::Busy => self.cleanup.left_behind.answered(),
                Attempt::Unchecked => {
                    fences.forget(key);
                    self.cleanup.left_behind.answered();
                }
                Attempt::TakenWithoutToken => {
                    fences.forget(key);
                    self.cleanup.left_behind.late();
                }
                Attempt::Blocked(_) => self.cleanup.left_behind.blocked(),
            },
            Reply::Unanswered => {
                tracing::debug!(%key, %id, "no reply within the lock's validity");
                self.cleanup.left_behind.unanswered();
                fences.forget(key);
            }
            Reply::Failed(err) => {
                if err.changed_nothing() {
                    self.cleanup.left_behind.answered();
                }
                fences.forget(key);
            }
        }
    }

    /// The attempt after a sleep that waited for a message and that the fallback timer
    /// ended before the blocker's PTTL took the lock: its holder released it without a
    /// message (a Go client), and the waiters on this lock poll for a while
    /// ([`Silence`](crate::notify::silence::Silence)).
    fn note_silence(&mut self, reply: &Reply) {
        let timer_woke = std::mem::take(&mut self.timer_woke);
        let acquired = matches!(
            reply,
            Reply::Answered {
                attempt: Attempt::Acquired(_),
                in_time: true
            }
        );
        if let (true, true, Some(hub)) = (timer_woke, acquired, self.request.lease.backend.hub()) {
            hub.silence().seen(self.request.lease.call.keys.lock());
        }
    }

    /// Joins this process's queue for the lock and waits a little for the subscription.
    async fn subscribe(&mut self) {
        let lease = &self.request.lease;
        if let Some(hub) = lease.backend.hub() {
            let mut joined = hub.join(&lease.call.keys, self.wake_as);
            joined.subscribed_within(SUBSCRIBE_WAIT).await;
            self.waiter = Some(joined);
        }
    }

    /// Sleeps before the next attempt; true when a release woke it. A waiter that a
    /// message will wake sleeps until its fallback timer, unless releases on this lock
    /// were seen to come without one: it then polls, and a message still wakes it.
    async fn sleep(&mut self, blocked_for: Duration) -> bool {
        let lease = &self.request.lease;
        let notified = self.notified && self.waiter.is_some();
        let silent = notified
            && lease
                .backend
                .hub()
                .is_some_and(|hub| hub.silence().silent(lease.call.keys.lock()));
        let waits_for_message = notified && !silent;
        // Behind holders this process has not heard publish (a Go client's), the
        // fallback timer would be the first hand-off: after a blocked attempt, probe at
        // shorter, doubling sleeps (not in this process's queue before any attempt,
        // where the waiters ahead are woken by the release that lets them in).
        let probing = waits_for_message
            && self.blocked
            && lease
                .backend
                .hub()
                .is_some_and(|hub| !hub.wakes_on_release(lease.call.keys.lock()));
        let fallback = pause(blocked_for, waits_for_message, lease.ttl(), || {
            self.backoff.next()
        });
        let pause = probed(fallback, probing.then_some(self.probe));
        tracing::trace!(key = %lease.key(), id = %lease.id(), ?pause, notified, silent, probing, "lock busy; waiting");
        let woken = match &self.waiter {
            Some(waiter) => waiter.sleep(pause).await,
            None => {
                tokio::time::sleep(pause).await;
                false
            }
        };
        // Only a blocked attempt's sleep says the holder was silent (not a sleep in this
        // process's queue before any attempt, nor one after a lock taken too late), and
        // only one cut short of the blocker's PTTL: a sleep to the PTTL ends at the key's
        // expiry (a holder that crashed), which no message announces anyway.
        if probing && !woken {
            self.probe = self.probe.saturating_mul(2);
        }
        let cut_short = pause < blocked_for;
        self.timer_woke =
            std::mem::take(&mut self.blocked) && waits_for_message && cut_short && !woken;
        woken
    }

    /// The request took the lock with `token`: leave the local queue without waking
    /// anyone (the next waiters are woken when this holder releases).
    fn taken(&mut self, token: u64) -> Taken<B> {
        if let Some(waiter) = self.waiter.take() {
            waiter.acquired();
        }
        Taken {
            lease: Arc::clone(&self.request.lease),
            sent: self.sent,
            token,
        }
    }
}
