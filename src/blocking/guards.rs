//! The blocking guards: [`WriteGuard`], [`ReadGuard`] and [`Permit`], each an async guard
//! of the crate with its handle's [`Background`], whose thread refreshes it (the
//! upgradable reader's is in `upgradable.rs`).

use std::fmt;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use redis::{FromRedisValue, Pipeline};
use tokio_util::sync::CancellationToken;

use super::background::Background;
use crate::error::Error;
use crate::reason::CancelReason;

/// The methods every blocking guard has, for a type whose field `guard` is the async
/// guard it wraps and `background` its handle's thread; `$what` names what it holds
/// ("lock" or "permit"), `$async` the async guard and `$path` its path, in their docs.
macro_rules! blocking_guard_methods {
    ($what:literal, $async:literal, $path:literal) => {
        #[doc = concat!("The Redis key this ", $what, " is held at: `<name>` or `<name>:<key>`; see [`", $async, "::key`](", $path, "::key).")]
        pub fn key(&self) -> &str {
            self.guard.key()
        }

        #[doc = concat!("This ", $what, "'s id: 32 lowercase hex characters from 16 CSPRNG bytes; see [`", $async, "::id`](", $path, "::id).")]
        pub fn id(&self) -> &str {
            self.guard.id()
        }

        #[doc = concat!("This acquisition's fencing token: strictly larger than the token of every earlier acquisition of the same key; send it with every write to the protected resource (see the [fencing guide](crate::guide::fencing)).")]
        pub fn fencing_token(&self) -> u64 {
            self.guard.fencing_token()
        }

        #[doc = concat!("The cancellation token that fires when the ", $what, " is released, lost or cancelled; cancelling it releases the ", $what, ". See [`Guard::cancellation_token`](crate::Guard::cancellation_token).")]
        pub fn cancellation_token(&self) -> &CancellationToken {
            self.guard.cancellation_token()
        }

        #[doc = concat!("Whether the ", $what, " must be taken as not held: the cancellation token has fired, or the validity deadline has passed (which fires it with [`CancelReason::Expired`] now). Call it right before each write the ", $what, " protects; it never blocks.")]
        pub fn is_cancelled(&self) -> bool {
            self.guard.is_cancelled()
        }

        #[doc = "Why the cancellation token fired, or `None` while it has not; see [`Guard::cancel_reason`](crate::Guard::cancel_reason)."]
        pub fn cancel_reason(&self) -> Option<CancelReason> {
            self.guard.cancel_reason()
        }

        #[doc = concat!("The validity deadline, by this process's monotonic clock: the send time of the last successful acquire or refresh plus the TTL minus the Redlock drift margin (1% of the TTL + 2 ms). Until then the ", $what, " is surely held unless the cancellation token has fired.")]
        pub fn valid_until(&self) -> Instant {
            self.guard.valid_until().into_std()
        }

        #[doc = concat!("When this ", $what, " was acquired: the moment its request completed, by the system clock.")]
        pub fn acquired_at(&self) -> SystemTime {
            self.guard.acquired_at()
        }

        #[doc = concat!("How many times the ", $what, "'s TTL has been renewed (by the handle's background thread) since it was acquired.")]
        pub fn refreshes(&self) -> u64 {
            self.guard.refreshes()
        }

        #[doc = concat!("Releases the ", $what, " and waits for the answer: `Ok(true)` when this id held it and is now removed, `Ok(false)` when it had been lost. The cancellation token fires at once.\n\n# Errors\n\nAs [`", $async, "::unlock`](", $path, "::unlock): [`Error::Refused`], [`Error::Redis`], [`Error::Timeout`] (no answer within one TTL; it then expires by its TTL); and [`Error::InRuntime`] on a thread with a Tokio runtime context, where the release is handed to the background thread instead, as a drop does.")]
        pub fn unlock(self) -> Result<bool, Error> {
            let Self { guard, background } = self;
            background.block_on(guard.unlock())?
        }

        #[doc = concat!("Runs the commands of `pipe` only while the ", $what, " is still this guard's, in one atomic step with that check, and parses their replies into `T`; see [`", $async, "::exec`](", $path, "::exec) and the [guarded writes guide](crate::guide::guarded_writes).\n\n# Errors\n\nAs [`", $async, "::exec`](", $path, "::exec) ([`Error::NotHeld`] when the ", $what, " is no longer held: no command ran), and [`Error::InRuntime`] on a thread with a Tokio runtime context (nothing was sent).")]
        pub fn exec<T: FromRedisValue>(&self, pipe: &Pipeline) -> Result<T, Error> {
            self.background.block_on(self.guard.exec(pipe))?
        }
    };
}

/// A held exclusive (write) lock of a blocking [`RwMutex`](super::RwMutex): the blocking
/// form of [`crate::WriteGuard`], refreshed every `ttl / 2` by its handle's background
/// thread while it lives.
///
/// Dropping it fires its cancellation token and hands the release to the background
/// thread, returning at once without waiting for Redis. The one exception is the last of
/// a handle's values to go (the handle and its clones dropped before this guard): its
/// drop stops the thread, which first finishes the releases in flight, this one among
/// them (at most 5 s); see the [module docs](super#drop).
#[must_use = "dropping the guard releases the lock at once"]
#[clippy::has_significant_drop]
pub struct WriteGuard {
    guard: crate::WriteGuard,
    background: Arc<Background>,
}

impl WriteGuard {
    pub(super) fn new(guard: crate::WriteGuard, background: Arc<Background>) -> Self {
        Self { guard, background }
    }

    blocking_guard_methods!("lock", "WriteGuard", "crate::WriteGuard");

    /// This guard's hold as a [`Lease`](crate::Lease), while the guard keeps holding
    /// and refreshing it; nothing is sent. See
    /// [`WriteGuard::lease`](crate::WriteGuard::lease).
    pub fn lease(&self) -> crate::Lease {
        self.guard.lease()
    }

    /// Lets go of this lock without releasing it, and gives its hold as a
    /// [`Lease`](crate::Lease) that another handle (blocking or async, in this process or
    /// another) attaches, releases or renews; nothing is sent, and the lock stays
    /// held in Redis until its TTL runs out. See
    /// [`WriteGuard::detach`](crate::WriteGuard::detach).
    pub fn detach(self) -> crate::Lease {
        self.guard.detach()
    }

    /// Turns this write guard into a read guard without letting go of the lock: no other
    /// writer can take it in between. See
    /// [`WriteGuard::downgrade`](crate::WriteGuard::downgrade).
    ///
    /// # Errors
    ///
    /// As [`WriteGuard::downgrade`](crate::WriteGuard::downgrade) ([`Error::NotHeld`],
    /// [`Error::Refused`], [`Error::Redis`], [`Error::Timeout`]; after an error the guard
    /// is dropped and its lock released), and [`Error::InRuntime`] on a thread with a
    /// Tokio runtime context (nothing was sent; the guard is dropped).
    pub fn downgrade(self) -> Result<ReadGuard, Error> {
        let Self { guard, background } = self;
        let read = background.block_on(guard.downgrade())??;
        Ok(ReadGuard::new(read, background))
    }
}

/// A held shared (read) lock of a blocking [`RwMutex`](super::RwMutex): the blocking form
/// of [`crate::ReadGuard`]; its [`exec`](Self::exec) runs read-only commands.
///
/// Dropping it fires its cancellation token and hands the release to the background
/// thread, returning at once without waiting for Redis. The one exception is the last of
/// a handle's values to go (the handle and its clones dropped before this guard): its
/// drop stops the thread, which first finishes the releases in flight, this one among
/// them (at most 5 s); see the [module docs](super#drop).
#[must_use = "dropping the guard releases the lock at once"]
#[clippy::has_significant_drop]
pub struct ReadGuard {
    guard: crate::ReadGuard,
    background: Arc<Background>,
}

impl ReadGuard {
    pub(super) fn new(guard: crate::ReadGuard, background: Arc<Background>) -> Self {
        Self { guard, background }
    }

    blocking_guard_methods!("lock", "ReadGuard", "crate::ReadGuard");

    /// This guard's hold as a [`Lease`](crate::Lease), while the guard keeps holding
    /// and refreshing it; nothing is sent. See
    /// [`ReadGuard::lease`](crate::ReadGuard::lease).
    pub fn lease(&self) -> crate::Lease {
        self.guard.lease()
    }

    /// Lets go of this lock without releasing it, and gives its hold as a
    /// [`Lease`](crate::Lease) that another handle (blocking or async, in this process or
    /// another) attaches, releases or renews; nothing is sent, and the lock stays
    /// held in Redis until its TTL runs out. See
    /// [`ReadGuard::detach`](crate::ReadGuard::detach).
    pub fn detach(self) -> crate::Lease {
        self.guard.detach()
    }
}

/// One permit of a blocking [`Semaphore`](super::Semaphore): the blocking form of
/// [`crate::Permit`].
///
/// Dropping it fires its cancellation token and hands its return to the background
/// thread, returning at once, with the one exception a [`WriteGuard`]'s drop has.
#[must_use = "dropping the permit returns it at once"]
#[clippy::has_significant_drop]
pub struct Permit {
    guard: crate::Permit,
    background: Arc<Background>,
}

impl Permit {
    pub(super) fn new(guard: crate::Permit, background: Arc<Background>) -> Self {
        Self { guard, background }
    }

    blocking_guard_methods!("permit", "Permit", "crate::Permit");

    /// This guard's hold as a [`Lease`](crate::Lease), while the guard keeps holding
    /// and refreshing it; nothing is sent. See
    /// [`Permit::lease`](crate::Permit::lease).
    pub fn lease(&self) -> crate::Lease {
        self.guard.lease()
    }

    /// Lets go of this permit without releasing it, and gives its hold as a
    /// [`Lease`](crate::Lease) that another handle (blocking or async, in this process or
    /// another) attaches, releases or renews; nothing is sent, and the permit stays
    /// held in Redis until its TTL runs out. See
    /// [`Permit::detach`](crate::Permit::detach).
    pub fn detach(self) -> crate::Lease {
        self.guard.detach()
    }
}

pub(super) use blocking_guard_methods;

impl fmt::Debug for WriteGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.guard.fmt(f)
    }
}

impl fmt::Debug for ReadGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.guard.fmt(f)
    }
}

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.guard.fmt(f)
    }
}
