//! [`MultiGuard`]: the read and write locks of a set, taken all at once by
//! [`RwMutex::lock_all`](crate::RwMutex::lock_all), held and given back as one.

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use redis::{FromRedisValue, Pipeline};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::any::AnyGuard;
use crate::error::Error;
use crate::lease::acquisition::Acquisition;
use crate::mode::Mode;
use crate::protocol::exec::{read_replies, Access, Executed};
use crate::protocol::id::Id;
use crate::protocol::keys::Keys;
use crate::reason::CancelReason;

/// The read and write locks on several keys of one mutex, taken in one step by
/// [`RwMutex::lock_all`](crate::RwMutex::lock_all) or
/// [`RwMutex::try_lock_all`](crate::RwMutex::try_lock_all), all under one id.
///
/// Each key is held exactly as a single lock holds it (a writer's string, a reader's set
/// member, with its own fencing token), so Go clients, single-key guards,
/// [`RwMutex::inspect`](crate::RwMutex::inspect) and
/// [`RwMutex::force_unlock`](crate::RwMutex::force_unlock) see and respect every key of
/// the set. The handle's refresher renews every key every `ttl / 2`; the keys were taken
/// together, so their renewals fall due together and go in one batched request.
///
/// The guard has one [cancellation token](Self::cancellation_token): it fires when any
/// key is lost, expires or reaches [`Builder::max_hold`](crate::Builder::max_hold) (and
/// [`lost_key`](Self::lost_key) names it), when the
/// [`parent`](crate::LockAll::parent) token or the token itself is cancelled, or when the
/// guard is released; the refresher then releases every key still held.
///
/// Dropping the guard fires its token and has the refresher release every key: `Drop`
/// never blocks and never needs Redis to answer.
pub struct MultiGuard {
    /// Each key of the set with its lock, in the order the request named them.
    parts: Vec<Part>,
    /// The keys of every lock but the first, which `exec` checks with the first's.
    also: Vec<Keys>,
    token: CancellationToken,
    /// The parent token the request was given: its cancel is told apart from the
    /// guard's own.
    parent: Option<CancellationToken>,
    /// The index of the key whose own token fired first, and why, when one did before
    /// the set's token.
    cause: Arc<OnceLock<(usize, CancelReason)>>,
}

/// One key of a set: the key as the request named it, and its lock.
struct Part {
    key: String,
    guard: AnyGuard,
}

impl MultiGuard {
    /// The guard of the set whose locks the engine took and its refresher keeps: one
    /// acquisition per key of `keys` (each named as the request named it, with its lock's
    /// keys), in order, each token a child of `token`. A task fires `token` when any
    /// key's token fires first.
    pub(crate) fn new(
        keys: Vec<(String, Keys)>,
        acquisitions: Vec<Acquisition>,
        token: CancellationToken,
        parent: Option<CancellationToken>,
    ) -> Self {
        let cause = Arc::new(OnceLock::new());
        let also: Vec<Keys> = keys.iter().skip(1).map(|(_, keys)| keys.clone()).collect();
        let parts: Vec<Part> = keys
            .into_iter()
            .zip(acquisitions)
            .map(|((key, _), acquisition)| Part {
                key,
                guard: AnyGuard::owner(acquisition),
            })
            .collect();
        watch(&parts, &token, &cause);
        Self {
            parts,
            also,
            token,
            parent,
            cause,
        }
    }

    fn part(&self, key: &str) -> Option<&Part> {
        self.parts
            .iter()
            .find(|part| part.key == key)
            .or_else(|| self.parts.iter().find(|part| part.guard.key() == key))
    }

    /// The fencing token of `key`, as the request named it (or as its lock key,
    /// `<name>:<key>`): larger than the token of every earlier holder of that key, by any
    /// client of this crate. `None` for a key not in the set. See the
    /// [fencing guide](crate::guide::fencing).
    pub fn fencing_token(&self, key: &str) -> Option<u64> {
        self.part(key).map(|part| part.guard.fencing_token())
    }

    /// How the set holds `key` (named as in [`fencing_token`](Self::fencing_token)):
    /// [`Mode::Write`] or [`Mode::Read`]; `None` for a key not in the set.
    pub fn mode(&self, key: &str) -> Option<Mode> {
        self.part(key).map(|part| part.guard.mode)
    }

    /// The keys of the set, as the request named them, in that order.
    pub fn keys(&self) -> impl Iterator<Item = &str> + '_ {
        self.parts.iter().map(|part| part.key.as_str())
    }

    /// The Redis lock key of each key of the set (`<name>:<key>`, tagged with
    /// [`Builder::hash_tag_keys`](crate::Builder::hash_tag_keys)), in the set's order.
    pub fn lock_keys(&self) -> impl Iterator<Item = &str> + '_ {
        self.parts.iter().map(|part| part.guard.key())
    }

    /// The set's id, which every key holds: 32 lowercase hex characters from 16 CSPRNG
    /// bytes. A write key's value is this id; a read key's set has it as a member.
    pub fn id(&self) -> &str {
        self.parts.first().map_or("", |part| part.guard.id())
    }

    /// The cancellation token that fires when any key is lost or expires, when the set
    /// is released, or when it is cancelled. Cancelling it releases every key (with
    /// [`CancelReason::Cancelled`]).
    pub fn cancellation_token(&self) -> &CancellationToken {
        self.is_cancelled();
        &self.token
    }

    /// Completes when the cancellation token fires or a key's validity deadline passes.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future has no effect on the locks.
    pub async fn cancelled(&self) {
        if self.parts.is_empty() {
            return self.token.cancelled().await;
        }
        let keys = self
            .parts
            .iter()
            .map(|part| Box::pin(part.guard.cancelled()));
        tokio::select! {
            () = self.token.cancelled() => {}
            _ = futures_util::future::select_all(keys) => {}
        }
    }

    /// Whether the set must be taken as not held: its token has fired, or a key's
    /// validity deadline has passed (which fires that key's token with
    /// [`CancelReason::Expired`], and so the set's). Call it right before each write the
    /// set protects.
    pub fn is_cancelled(&self) -> bool {
        // Every key looks at its deadline (no short-circuit), so an expired one fires.
        let expired = self
            .parts
            .iter()
            .fold(false, |any, part| part.guard.is_cancelled() | any);
        expired || self.token.is_cancelled()
    }

    /// Why the set's token fired, or `None` while it has not: the reason of the key that
    /// ended it ([`CancelReason::Lost`], [`CancelReason::Expired`],
    /// [`CancelReason::MaxHold`], [`CancelReason::ClockJump`]; see
    /// [`lost_key`](Self::lost_key)), or [`CancelReason::ParentCancelled`] /
    /// [`CancelReason::Cancelled`] when a token was cancelled.
    pub fn cancel_reason(&self) -> Option<CancelReason> {
        if !self.is_cancelled() {
            return None;
        }
        if let Some((_, reason)) = self.cause.get() {
            return Some(*reason);
        }
        if let Some((_, reason)) = self.first_key_cause() {
            return Some(reason);
        }
        if self
            .parent
            .as_ref()
            .is_some_and(CancellationToken::is_cancelled)
        {
            Some(CancelReason::ParentCancelled)
        } else {
            Some(CancelReason::Cancelled)
        }
    }

    /// The key (as the request named it) whose loss, expiry or `max_hold` ended the set,
    /// or `None` while none has (or when a token was cancelled first).
    pub fn lost_key(&self) -> Option<&str> {
        let at = match self.cause.get() {
            Some((at, _)) => Some(*at),
            None => self.first_key_cause().map(|(at, _)| at),
        };
        at.map(|at| self.parts[at].key.as_str())
    }

    /// The first key whose token fired of itself (not by the set's), before the watch
    /// task has recorded it.
    fn first_key_cause(&self) -> Option<(usize, CancelReason)> {
        self.parts
            .iter()
            .enumerate()
            .find_map(|(at, part)| match part.guard.cancel_reason() {
                Some(CancelReason::ParentCancelled) | None => None,
                Some(reason) => Some((at, reason)),
            })
    }

    /// The earliest validity deadline of the set's keys: until then every key is surely
    /// held, unless the cancellation token has fired. Each key's deadline is its last
    /// successful acquire or refresh's send time plus the TTL minus the Redlock drift
    /// margin (1% of the TTL + 2 ms). A [`tokio::time::Instant`].
    pub fn valid_until(&self) -> Instant {
        self.parts
            .iter()
            .map(|part| part.guard.valid_until())
            .min()
            .unwrap_or_else(Instant::now)
    }

    /// When this set was acquired: the moment its request completed, by the system clock.
    pub fn acquired_at(&self) -> SystemTime {
        self.parts
            .first()
            .map_or_else(SystemTime::now, |part| part.guard.acquired_at())
    }

    /// How many times every key's TTL has been renewed since the set was acquired: the
    /// fewest renewals of any key.
    pub fn refreshes(&self) -> u64 {
        self.parts
            .iter()
            .map(|part| part.guard.refreshes())
            .min()
            .unwrap_or(0)
    }

    /// Runs `pipe`'s commands only while the set's id still holds every key of the set,
    /// in one atomic step with that check (`lua/exec.lua`), and parses the replies as
    /// `T` (as `pipe.query_async` would). A set with at least one write key may run
    /// writes; a set of read keys only is refused a command the server flags `write`.
    /// The commands' keys must be none of the set's own (lock, intent or fence keys), and
    /// on a Redis Cluster in the set's slot. As
    /// [`WriteGuard::exec`](crate::WriteGuard::exec), the commands run with no rollback.
    ///
    /// # Errors
    ///
    /// - [`Error::NotHeld`] naming the first key found not held (nothing ran): that key
    ///   is lost, so the token fires with [`CancelReason::Lost`] and the other keys are
    ///   released; also at once when the token has already fired.
    /// - [`Error::InvalidPipeline`], [`Error::CrossSlot`], [`Error::CommandFailed`],
    ///   [`Error::Refused`], [`Error::Redis`], [`Error::NotReplicated`] and
    ///   [`Error::Timeout`] (no reply by the validity deadline), as for
    ///   [`WriteGuard::exec`](crate::WriteGuard::exec).
    /// - [`Error::InvalidOptions`] over a [`Quorum`](crate::Quorum).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave the commands run or not, as a lost reply does.
    pub async fn exec<T: FromRedisValue>(&self, pipe: &Pipeline) -> Result<T, Error> {
        let Some(first) = self.parts.first() else {
            return Err(Error::Cancelled);
        };
        if self.is_cancelled() {
            return Err(first.guard.not_held());
        }
        let writes = self.parts.iter().any(|part| part.guard.mode == Mode::Write);
        let access = if writes { Access::Write } else { Access::Read };
        let run = first.guard.lease.exec_set(&self.also, pipe, access);
        let Ok(executed) = tokio::time::timeout_at(self.valid_until(), run).await else {
            return Err(Error::Timeout);
        };
        match executed? {
            Executed::Ran(replies) => read_replies(pipe, replies).map_err(|source| Error::Redis {
                key: first.guard.key().to_owned(),
                source,
            }),
            Executed::NotHeld(at) => {
                let part = self.parts.get(at).unwrap_or(first);
                part.guard.lease.found_lost("exec of its set");
                if let Some(reason) = part.guard.cancel_reason() {
                    let _ = self.cause.set((at, reason));
                }
                self.token.cancel();
                Err(part.guard.not_held())
            }
        }
    }

    /// The set's hold as one [`Lease`](crate::Lease), a part per key in the set's
    /// order, while the set stays held and refreshed: nothing is sent. As
    /// [`WriteGuard::lease`](crate::WriteGuard::lease), which says more.
    pub fn lease(&self) -> crate::Lease {
        let mut id = None;
        let parts = self
            .parts
            .iter()
            .map(|part| {
                let (hold, part) = part.guard.part();
                id.get_or_insert(hold);
                part
            })
            .collect();
        crate::Lease::new(id.unwrap_or_else(Id::new), parts)
    }

    /// Lets go of the set without releasing it, and gives its hold as one
    /// [`Lease`](crate::Lease) with a part per key, in the set's order, which another
    /// handle (in this process or another) attaches with
    /// [`RwMutex::attach_all`](crate::RwMutex::attach_all), releases with
    /// [`RwMutex::release`](crate::RwMutex::release) or keeps alive with
    /// [`RwMutex::renew`](crate::RwMutex::renew). Nothing is sent: every key stays held
    /// in Redis until its TTL runs out, or until the lease is attached or released; each
    /// key's token and the set's fire, with
    /// [`CancelReason::Detached`] for the keys. As
    /// [`WriteGuard::detach`](crate::WriteGuard::detach), which says more.
    pub fn detach(mut self) -> crate::Lease {
        let parts = std::mem::take(&mut self.parts);
        let mut id = None;
        let parts = parts
            .into_iter()
            .map(|part| {
                let (hold, part) = part.guard.detached();
                id.get_or_insert(hold);
                part
            })
            .collect();
        self.token.cancel();
        crate::Lease::new(id.unwrap_or_else(Id::new), parts)
    }

    /// Releases every key of the set and reports whether all were still held: `Ok(true)`
    /// when the set's id held every key and is now removed from each, `Ok(false)` when
    /// any had been lost (the others are released all the same). The token fires at
    /// once, before the releases are sent; the keys are released together, one
    /// `unlock.lua` each.
    ///
    /// # Errors
    ///
    /// The first error of a key's release, as
    /// [`WriteGuard::unlock`](crate::WriteGuard::unlock) gives them; the other keys are
    /// released all the same.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping this future before the releases are answered hands them to
    /// the refresher, as dropping the guard does.
    pub async fn unlock(mut self) -> Result<bool, Error> {
        let parts = std::mem::take(&mut self.parts);
        let releases = parts.into_iter().map(|part| part.guard.unlock());
        let results = futures_util::future::join_all(releases).await;
        self.token.cancel();
        let mut held = true;
        for result in results {
            held &= result?;
        }
        Ok(held)
    }
}

/// Fires `token` once any key's token of `parts` fires before it, recording which key and
/// why in `cause`, from a task that ends with the first to fire.
fn watch(parts: &[Part], token: &CancellationToken, cause: &Arc<OnceLock<(usize, CancelReason)>>) {
    let keys: Vec<_> = parts
        .iter()
        .map(|part| {
            (
                part.guard.cancellation_token().clone(),
                part.guard.liveness.clone(),
            )
        })
        .collect();
    if keys.is_empty() {
        return;
    }
    let (token, cause) = (token.clone(), Arc::clone(cause));
    tokio::spawn(async move {
        let fired = keys.iter().map(|(key, _)| Box::pin(key.cancelled()));
        let ((), at, _) = tokio::select! {
            () = token.cancelled() => return,
            fired = futures_util::future::select_all(fired) => fired,
        };
        if token.is_cancelled() {
            return;
        }
        if let Some(reason) = keys[at].1.reason() {
            let _ = cause.set((at, reason));
        }
        token.cancel();
    });
}

impl Drop for MultiGuard {
    fn drop(&mut self) {
        // Each key's guard fires its own token and has the refresher release it.
        self.token.cancel();
    }
}

impl fmt::Debug for MultiGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys: Vec<(&str, Mode, u64)> = self
            .parts
            .iter()
            .map(|part| {
                (
                    part.guard.key(),
                    part.guard.mode,
                    part.guard.fencing_token(),
                )
            })
            .collect();
        f.debug_struct("MultiGuard")
            .field("id", &self.id())
            .field("keys", &keys)
            .field("cancel_reason", &self.cause.get())
            .finish()
    }
}
