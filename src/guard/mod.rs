//! The guards: a held lock ([`Guard`]), its downgrade, the nested guards of a reentrant
//! mutex, and a semaphore's [`Permit`]. Each is made of an acquisition the engine
//! returned, or of another guard; the lease layer keeps it alive.

mod downgrade;
mod exec;
mod nested;
mod permit;
mod proclaim;
mod release;
#[cfg(test)]
mod sizes;

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::SystemTime;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use permit::Permit;
pub(crate) use proclaim::Proclaimer;

use crate::acquire::Acquired;
use crate::backend::Backend;
use crate::lease::liveness::Liveness;
use crate::lease::refresher::Refresher;
use crate::lease::registry::{OuterGuard, Registration};
use crate::lease::AnyLease;
use crate::mode::Mode;
use crate::reason::CancelReason;

/// A held lock, and the cancellation token that says whether it is still held.
///
/// While the guard lives, its mutex's refresher (one background task per mutex and
/// runtime, whatever the number of guards) renews the lock's TTL every `ttl / 2`; the
/// renewals due at the same time go in one request.
/// The token fires when the lock is released ([`unlock`](Self::unlock) or drop), when the
/// [`parent`](crate::Acquire::parent) token or the guard's own token is cancelled, when a
/// refresh finds the lock gone, or when no refresh succeeds within the TTL minus the
/// Redlock drift margin. [`cancel_reason`](Self::cancel_reason) says which. Hand
/// [`token`](Self::token) (or a child of it) to the work the lock protects, so that work
/// stops the moment the lock may no longer be held.
///
/// Every look through the guard ([`is_cancelled`](Self::is_cancelled),
/// [`cancel_reason`](Self::cancel_reason), [`cancelled`](Self::cancelled),
/// [`token`](Self::token)) compares the clock with the validity deadline itself and fires
/// the token with [`CancelReason::Expired`] on the spot once it has passed, so no call
/// reports the lock held after its deadline, even right after the process was frozen and
/// before the refresher has run. A pause between such a check and the work it
/// guards can still cross the deadline: only a [fencing token](Self::fencing_token)
/// checked by the protected resource closes that gap.
///
/// Dropping the guard cancels its token and has its mutex's refresher release the lock:
/// `Drop` never blocks and never needs Redis to answer.
///
/// # Nested guards
///
/// On a [reentrant](crate::Builder::reentrant) mutex, a request from the task that
/// already holds the lock key gives a nested guard, without contacting Redis. It shares
/// the outer guard's one acquisition: the same [`key`](Self::key), [`id`](Self::id) and
/// [`fencing_token`](Self::fencing_token), and [`valid_until`](Self::valid_until) is the
/// outer lock's deadline, which moves with the outer guard's refreshes. Its
/// [`mode`](Self::mode) is the one it asked for: a read inside a write is `Mode::Read`
/// while the lock in Redis stays a write lock. Its token is a child of the outer guard's
/// token (and fires too when the request's [`parent`](crate::Acquire::parent) is
/// cancelled):
///
/// - the outermost guard going (unlock, drop, lost, expired) fires the token of every
///   nested guard, whose [`cancel_reason`](Self::cancel_reason) is then the outer guard's
///   ([`CancelReason::Cancelled`] after its unlock or drop);
/// - cancelling a nested guard's token, dropping it or [`unlock`](Self::unlock)ing it
///   only ends that nested guard: the lock stays held, nothing is sent, and the outer
///   guard's token and reason are untouched. `unlock` returns `Ok(true)` while the outer
///   lock is still held, `Ok(false)` once it is not.
#[must_use = "dropping the guard releases the lock at once"]
#[clippy::has_significant_drop]
pub struct Guard {
    lease: Arc<dyn AnyLease>,
    /// [`Mode::Read`] after a downgrade.
    mode: Mode,
    fencing_token: u64,
    liveness: Arc<Liveness>,
    role: Role,
    /// When the request that gave the guard completed, by the system clock.
    acquired_at: SystemTime,
}

/// Whether a guard holds the lock in Redis or shares another guard's.
enum Role {
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

impl Guard {
    /// The guard of the lock `acquired`, which `refresher` keeps from now on; its token
    /// is a child of `parent`.
    pub(crate) fn start<B: Backend>(
        acquired: Acquired<B>,
        parent: Option<CancellationToken>,
        refresher: &Refresher<B>,
    ) -> Self {
        let Acquired {
            lease,
            sent,
            token: fencing_token,
        } = acquired;
        let mode = lease.kind.mode();
        let kept = refresher.keep(lease, sent, fencing_token, parent);
        Self {
            liveness: Arc::clone(&kept.liveness),
            lease: kept,
            mode,
            fencing_token,
            role: Role::Owner { registration: None },
            acquired_at: SystemTime::now(),
        }
    }

    /// Whether the guard shares an outer guard's lock (reentrancy) rather than holding
    /// one in Redis.
    pub(crate) fn is_nested(&self) -> bool {
        matches!(self.role, Role::Nested)
    }

    /// This guard as the outer guard of nested guards on its lock.
    pub(crate) fn as_outer(&self) -> OuterGuard {
        OuterGuard {
            lease: Arc::clone(&self.lease),
            mode: self.mode,
            fencing_token: self.fencing_token,
            liveness: Arc::clone(&self.liveness),
        }
    }

    /// Keeps this guard's entry in its mutex's reentrancy registry until it goes.
    pub(crate) fn registered(&mut self, entry: Registration) {
        if let Role::Owner { registration, .. } = &mut self.role {
            *registration = Some(Box::new(entry));
        }
    }

    /// The Redis lock key: `<name>` or `<name>:<key>`.
    pub fn key(&self) -> &str {
        self.lease.key()
    }

    /// This lock's id: 32 lowercase hex characters from 16 CSPRNG bytes. A writer's id
    /// is the value of the lock key; a reader's id is a member of the set at the lock key.
    pub fn id(&self) -> &str {
        self.lease.id()
    }

    /// Whether this is a read (shared) or write (exclusive) lock: [`Mode::Read`] after a
    /// [`downgrade`](Self::downgrade).
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// This acquisition's fencing token: strictly larger than the token of every earlier
    /// acquisition of the same lock key, read or write, by any client of this crate, in
    /// the order the lock passed between them.
    ///
    /// It is minted by the acquiring script itself from the counter at `<lock key>:fence`
    /// (see the [fencing guide](crate::guide::fencing)), so it never goes back across
    /// unlocks, lock expiry, client restarts or the counter's own expiry. Send it with
    /// every write to the protected resource, and have the resource reject a token
    /// smaller than the largest it has accepted: that stops a holder that was paused past
    /// its deadline from overwriting the work of a later holder that has written.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(mx: redismutex::RwMutex<redis::aio::MultiplexedConnection>)
    /// # -> Result<(), Box<dyn std::error::Error>> {
    /// // Writes ARGV[2] to the hash KEYS[1] only with a token at least as large as every
    /// // token it has accepted (see the guide `redismutex::guide::fencing`).
    /// const FENCED_WRITE: &str = "local last = tonumber(redis.call('HGET', KEYS[1], 'token') or '0') \
    ///     if tonumber(ARGV[1]) < last then return 0 end \
    ///     redis.call('HSET', KEYS[1], 'value', ARGV[2], 'token', ARGV[1]) return 1";
    /// let guard = mx.write().key("report").await?;
    /// let written: i64 = redis::Script::new(FENCED_WRITE)
    ///     .key("report-data")
    ///     .arg(guard.fencing_token())
    ///     .arg("new value")
    ///     .invoke_async(&mut mx.connection().clone())
    ///     .await?;
    /// assert_eq!(written, 1, "refused: a later holder has written");
    /// # Ok(())
    /// # }
    /// ```
    pub fn fencing_token(&self) -> u64 {
        self.fencing_token
    }

    /// The token that fires when the lock is released, lost or cancelled. Cancelling it
    /// releases the lock (with [`CancelReason::Cancelled`]); hand out
    /// [`child_token`](CancellationToken::child_token)s to work that must not release it.
    ///
    /// This checks the validity deadline first and fires the token if it has passed.
    /// The token and its children are also fired by the mutex's refresher at the
    /// deadline, but its task may run a little late after the process was frozen: right
    /// before a write, ask [`is_cancelled`](Self::is_cancelled) rather than a token.
    pub fn token(&self) -> &CancellationToken {
        if matches!(self.role, Role::Owner { .. }) && !self.lease.handed_out() {
            // Anyone may cancel it from now on: the refresher watches it.
            Arc::clone(&self.lease).hand_out();
        }
        let token = self.liveness.token();
        self.liveness.fire_if_expired();
        token
    }

    /// Completes when the token fires or the validity deadline passes (which fires the
    /// token with [`CancelReason::Expired`]), whichever is first.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future has no effect on the lock.
    pub fn cancelled(&self) -> impl Future<Output = ()> + Send + '_ {
        self.liveness.cancelled()
    }

    /// Whether the lock must be taken as not held: the token has fired, or the validity
    /// deadline has passed (which fires the token with [`CancelReason::Expired`] now).
    /// Call it right before each write the lock protects.
    pub fn is_cancelled(&self) -> bool {
        self.liveness.fire_if_expired()
    }

    /// Why the token fired, or `None` while it has not. Like
    /// [`is_cancelled`](Self::is_cancelled), it fires the token with
    /// [`CancelReason::Expired`] first if the validity deadline has passed.
    pub fn cancel_reason(&self) -> Option<CancelReason> {
        self.liveness.reason()
    }

    /// The validity deadline: the send time of the last successful acquire or refresh
    /// plus the TTL minus the Redlock drift margin (1% of the TTL + 2 ms). Until then the
    /// lock is surely held, unless the token has fired for another reason (released,
    /// [lost](CancelReason::Lost), cancelled): ask [`is_cancelled`](Self::is_cancelled)
    /// for both. A [`tokio::time::Instant`], so it follows a paused test clock.
    pub fn valid_until(&self) -> Instant {
        self.liveness.deadline()
    }

    /// When this guard was acquired: the moment its request completed, by the system
    /// clock (a [`SystemTime`], to log next to the [`fencing_token`](Self::fencing_token)
    /// and compare with other machines' logs). A [nested guard](Self#nested-guards) gives
    /// its own request's time, not the outer guard's.
    pub fn acquired_at(&self) -> SystemTime {
        self.acquired_at
    }

    /// How many times the lock's TTL has been renewed since it was acquired: one per
    /// successful refresh (every `ttl / 2` while the lock lives), counted when the reply
    /// arrives; 0 for a lock held less than `ttl / 2`. A [downgrade](Self::downgrade),
    /// which also resets the TTL, is not counted. A [nested guard](Self#nested-guards)
    /// gives the outer guard's count.
    pub fn refreshes(&self) -> u64 {
        self.liveness.renewals()
    }
}

impl Guard {
    /// Why the token fired, as recorded so far, without looking at the clock.
    pub(crate) fn recorded_reason(&self) -> Option<CancelReason> {
        self.liveness.recorded()
    }
}

impl fmt::Debug for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard")
            .field("key", &self.key())
            .field("id", &self.id())
            .field("mode", &self.mode)
            .field("fencing_token", &self.fencing_token)
            .field("nested", &self.is_nested())
            .field("cancel_reason", &self.liveness.recorded())
            .finish()
    }
}
