//! The wait of a set of locks ([`RwMutex::lock_all`](crate::RwMutex::lock_all)): one
//! lease per key under one id, taken all at once by each attempt (`lock_all.lua`), or
//! not at all. While a key blocks, the request waits in this process's queue on that
//! key's release channel (or polls), then attempts the whole set again. On every way out
//! it leaves nothing behind in Redis: each key has its own [`Cleanup`].

use std::sync::Arc;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use tokio::time::Instant;

use super::cleanup::Cleanup;
use super::interrupt::Interrupt;
use super::step::{pause, BACKOFF_MAX, BACKOFF_MIN};
use super::{Patience, SUBSCRIBE_WAIT};
use crate::backend::Backend;
use crate::error::Error;
use crate::lease::HeldLease;
use crate::mode::Mode;
use crate::notify::waiter::Waiter;
use crate::protocol::calls::SetPart;
use crate::protocol::fences::Fences;
use crate::protocol::replies::SetAttempt;
use crate::spawner::Spawner;

/// One set request, as the engine takes it: a lease per key (one id, one TTL; kind
/// write or read), and what the wait needs besides.
#[derive(Debug)]
pub(crate) struct SetRequest<'a, B> {
    /// The leases to take, in the set's order; not empty.
    pub(crate) leases: Vec<Arc<HeldLease<B>>>,
    pub(crate) patience: Patience,
    /// Cancelling it ends the wait with [`Error::Cancelled`].
    pub(crate) parent: Option<&'a tokio_util::sync::CancellationToken>,
    /// A waiting set keeps new readers out of its write keys while a holder blocks it.
    pub(crate) set_intent: bool,
    /// The mutex's record of checked fence keys: each key's token is recorded.
    pub(crate) fences: &'a Fences,
    /// Where the clean-up after giving up runs.
    pub(crate) spawner: &'a Spawner,
}

/// A set taken by a request sent at `sent`: the leases and their fencing tokens, in the
/// set's order.
#[derive(Debug)]
pub(crate) struct TakenSet<B> {
    pub(crate) leases: Vec<Arc<HeldLease<B>>>,
    pub(crate) sent: Instant,
    pub(crate) tokens: Vec<u64>,
}

/// Takes every key of `request`'s set, or none. `Ok(None)` only with
/// [`Patience::Once`], when others hold a key.
///
/// # Cancel safety
///
/// Dropping the future leaves nothing in Redis for longer than a round trip: what an
/// attempt may have taken and the intents it set are released from background tasks.
pub(crate) async fn run<B: Backend>(
    request: SetRequest<'_, B>,
) -> Result<Option<TakenSet<B>>, Error> {
    let interrupt = Interrupt::new(request.parent, request.patience.deadline());
    let mut wait = SetWait::new(&request);
    match interrupt.or(wait.run()).await {
        Ok(taken) => Ok(taken),
        Err(err) => {
            let cleanups = std::mem::take(&mut wait.cleanups);
            let gone = cleanups.into_iter().map(|c| c.give_up(Error::Cancelled));
            futures_util::future::join_all(gone).await;
            Err(err)
        }
    }
}

/// The state of one set request's wait.
struct SetWait<'j, 'a, B: Backend> {
    request: &'j SetRequest<'a, B>,
    /// One per lease, in the set's order.
    cleanups: Vec<Cleanup<B>>,
    /// This process's queue on the key that blocked the last attempt, and its index.
    waiter: Option<(usize, Waiter)>,
    backoff: ExponentialBackoff,
    late_replies: u32,
}

impl<'j, 'a, B: Backend> SetWait<'j, 'a, B> {
    fn new(request: &'j SetRequest<'a, B>) -> Self {
        let cleanups = request
            .leases
            .iter()
            .map(|lease| Cleanup::new(Arc::clone(lease), request.spawner.clone(), false))
            .collect();
        Self {
            request,
            cleanups,
            waiter: None,
            backoff: ExponentialBuilder::new()
                .with_min_delay(BACKOFF_MIN)
                .with_max_delay(BACKOFF_MAX)
                .with_jitter()
                .without_max_times()
                .build(),
            late_replies: 0,
        }
    }

    async fn run(&mut self) -> Result<Option<TakenSet<B>>, Error> {
        let waits = self.request.patience.waits();
        loop {
            let notified = self.waiter.as_ref().is_some_and(|(_, w)| w.attempting());
            let sent = Instant::now();
            let (reply, in_time) = self.attempt(sent).await;
            match reply {
                Ok(Some(SetAttempt::Acquired(tokens))) if in_time => {
                    return Ok(Some(self.taken(sent, tokens)));
                }
                Ok(Some(SetAttempt::Acquired(_))) => {
                    // Taken too late to be valid: the next attempt, under the same id,
                    // takes it again if it is still ours; giving up releases it.
                    self.late_replies += 1;
                    if !waits && self.late_replies > 1 {
                        return Ok(None);
                    }
                    tokio::time::sleep(BACKOFF_MIN).await;
                }
                Ok(Some(SetAttempt::Blocked { .. })) if !waits => return Ok(None),
                Ok(Some(SetAttempt::Blocked { at, pttl })) => {
                    self.sleep(at, pttl, notified).await;
                }
                // Unanswered: it may have taken the set; the next attempt renews it.
                Ok(None) if waits => {}
                Ok(None) => return Err(Error::Timeout),
                Err(err) if waits && err.passing() => {
                    let pause = self.backoff.next().unwrap_or(BACKOFF_MAX);
                    tokio::time::sleep(pause).await;
                }
                Err(err) => return Err(err),
            }
        }
    }

    /// Sends one attempt of the whole set at `sent`, bounded by the validity, and records
    /// what it may have left: its reply (`None` when none came in time), and whether it
    /// came in time to make a guard.
    async fn attempt(&mut self, sent: Instant) -> (Result<Option<SetAttempt>, Error>, bool) {
        let request = self.request;
        let set_intent = request.set_intent;
        for (cleanup, lease) in self.cleanups.iter_mut().zip(&request.leases) {
            cleanup
                .left_behind
                .sending(set_intent && lease.kind.mode() == Mode::Write);
        }
        let parts: Vec<SetPart<'_>> = request
            .leases
            .iter()
            .map(|lease| SetPart {
                call: &lease.call,
                mode: lease.kind.mode(),
            })
            .collect();
        let first = &request.leases[0];
        let attempt = first.backend.attempt_set(&parts, set_intent);
        let reply = tokio::time::timeout(first.validity(), attempt).await;
        let in_time = Instant::now() < sent + first.validity();
        for (cleanup, lease) in self.cleanups.iter_mut().zip(&request.leases) {
            let left = &mut cleanup.left_behind;
            match &reply {
                Ok(Ok(SetAttempt::Acquired(_))) if in_time => left.disarm(),
                Ok(Ok(SetAttempt::Acquired(_))) => left.late(),
                Ok(Ok(SetAttempt::Blocked { .. })) => left.blocked(),
                Ok(Err(err)) if err.changed_nothing() => left.answered(),
                Ok(Err(_)) | Err(_) => {
                    if reply.is_err() {
                        left.unanswered();
                    }
                    request.fences.forget(lease.key());
                }
            }
        }
        match reply {
            Err(_) => (Ok(None), false),
            Ok(reply) => (reply.map(Some), in_time),
        }
    }

    /// Waits before the next attempt, the key at `at` blocking for `blocked_for`: in this
    /// process's queue on that key's release channel when the mutex has a notifier (woken
    /// by its release), else polling.
    async fn sleep(&mut self, at: usize, blocked_for: std::time::Duration, notified: bool) {
        let lease = &self.request.leases[at];
        let hub = lease.backend.hub();
        if let Some(hub) = hub.filter(|_| self.waiter.as_ref().is_none_or(|(i, _)| *i != at)) {
            // A release on this key may have come before the subscription: attempt again
            // once subscribed, at once.
            self.waiter = None;
            let mut joined = hub.join(&lease.call.keys, lease.kind.mode());
            joined.subscribed_within(SUBSCRIBE_WAIT).await;
            self.waiter = Some((at, joined));
            return;
        }
        let waits_for_message = notified && self.waiter.is_some();
        let pause = pause(blocked_for, waits_for_message, lease.ttl(), || {
            self.backoff.next()
        });
        tracing::trace!(key = %lease.key(), id = %lease.id(), ?pause, "set busy; waiting");
        match &self.waiter {
            Some((_, waiter)) => {
                waiter.sleep(pause).await;
            }
            None => tokio::time::sleep(pause).await,
        }
    }

    /// The set was taken at `sent` with `tokens`: each fence key's token is recorded, and
    /// the local queue left without waking anyone.
    fn taken(&mut self, sent: Instant, tokens: Vec<u64>) -> TakenSet<B> {
        if let Some((_, waiter)) = self.waiter.take() {
            waiter.acquired();
        }
        for (lease, token) in self.request.leases.iter().zip(&tokens) {
            self.request.fences.minted(lease.key(), *token, sent);
        }
        TakenSet {
            leases: self.request.leases.clone(),
            sent,
            tokens,
        }
    }
}
