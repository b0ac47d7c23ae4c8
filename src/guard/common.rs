//! [`Guard`]: what every guard of the crate shares, for code generic over the kind.

use std::fmt;
use std::future::Future;
use std::time::SystemTime;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::Error;
use crate::reason::CancelReason;

pub(super) mod sealed {
    /// Only this crate's guards are guards.
    pub trait Sealed {}
}

/// What every guard of the crate shares: a [`WriteGuard`](crate::WriteGuard), a
/// [`ReadGuard`](crate::ReadGuard), an [`UpgradableReadGuard`](crate::UpgradableReadGuard)
/// and a semaphore's [`Permit`](crate::Permit).
///
/// Each of them has all these methods of its own, so code that holds one kind needs no
/// import. The trait is for code generic over the kind: a worker that runs its section
/// under whichever guard it is given, stopping when
/// [`cancelled`](Self::cancelled) completes, or a helper that logs a guard's
/// [`fencing_token`](Self::fencing_token). What the kinds do differently stays off it:
/// only a write guard has [`downgrade`](crate::WriteGuard::downgrade), and `exec`
/// (a guarded pipeline) runs writes for a write guard or a permit but refuses them for a
/// [read guard](crate::ReadGuard::exec). A [`Leadership`](crate::Leadership) is not a
/// guard (it ends with `resign`); its lock's guard is
/// [`Leadership::guard`](crate::Leadership::guard). Sealed: only this crate implements
/// it. Its futures make it unfit for `dyn Guard`; use a generic parameter.
///
/// # The life of a guard
///
/// While a guard lives, its handle's refresher (one background task per handle and
/// runtime, whatever the number of guards) renews the lock's TTL every `ttl / 2`; the
/// renewals due at the same time go in one request. The cancellation token fires when
/// the lock is released ([`unlock`](Self::unlock) or drop), when the request's
/// [`parent`](crate::Acquire::parent) token or the guard's own cancellation token is
/// cancelled, when a refresh finds the lock gone, or when no refresh succeeds within the
/// TTL minus the Redlock drift margin; [`cancel_reason`](Self::cancel_reason) says which.
/// Hand [`cancellation_token`](Self::cancellation_token) (or a child of it) to the work
/// the lock protects, so that work stops the moment the lock may no longer be held.
///
/// Every look through the guard ([`is_cancelled`](Self::is_cancelled),
/// [`cancel_reason`](Self::cancel_reason), [`cancelled`](Self::cancelled),
/// [`cancellation_token`](Self::cancellation_token)) compares the clock with the
/// validity deadline itself and fires the cancellation token with
/// [`CancelReason::Expired`] on the spot once it has passed, so no call reports the lock
/// held after its deadline, even right after the process was frozen and before the
/// refresher has run. A pause between such a check and the work it guards can still
/// cross the deadline: only a [fencing token](Self::fencing_token) checked by the
/// protected resource closes that gap.
///
/// Dropping a guard fires its cancellation token and has its handle's refresher release
/// the lock: `Drop` never blocks and never needs Redis to answer.
///
/// # Examples
///
/// ```no_run
/// use redismutex::Guard;
///
/// /// Runs one step of work under any guard, unless the lock may be lost.
/// async fn step(guard: &impl Guard) -> bool {
///     if guard.is_cancelled() {
///         return false;
///     }
///     println!("{} step with fencing token {}", guard.key(), guard.fencing_token());
///     true
/// }
/// # async fn demo(mx: redismutex::RwMutex<redis::aio::MultiplexedConnection>)
/// # -> Result<(), redismutex::Error> {
/// let reader = mx.read().key("report").await?;
/// step(&reader).await;
/// reader.unlock().await?;
/// let writer = mx.write().key("report").await?;
/// step(&writer).await;
/// writer.unlock().await?;
/// # Ok(())
/// # }
/// ```
pub trait Guard: sealed::Sealed + fmt::Debug + Send + Sync + 'static {
    /// The Redis key the guard holds: `<name>` or `<name>:<key>` (with
    /// [`Builder::hash_tag_keys`](crate::Builder::hash_tag_keys), as tagged).
    fn key(&self) -> &str;

    /// The guard's id: 32 lowercase hex characters from 16 CSPRNG bytes. A writer's id is
    /// the value of the lock key; a reader's is a member of the set at the lock key; a
    /// permit's is a member of the sorted set at the semaphore key.
    fn id(&self) -> &str;

    /// This acquisition's fencing token: strictly larger than the token of every earlier
    /// acquisition of the same key, by any client of this crate, in the order the lock
    /// passed between them (see the [fencing guide](crate::guide::fencing)).
    fn fencing_token(&self) -> u64;

    /// The cancellation token that fires when the lock is released, lost or cancelled.
    /// Cancelling it releases the lock (with [`CancelReason::Cancelled`]); hand out
    /// [`child_token`](CancellationToken::child_token)s to work that must not release it.
    ///
    /// This checks the validity deadline first and fires the token if it has passed.
    /// The token and its children are also fired by the refresher at the deadline, but
    /// its task may run a little late after the process was frozen: right before a
    /// write, ask [`is_cancelled`](Self::is_cancelled) rather than a token.
    fn cancellation_token(&self) -> &CancellationToken;

    /// Completes when the cancellation token fires or the validity deadline passes
    /// (which fires the token with [`CancelReason::Expired`]), whichever is first.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future has no effect on the lock.
    fn cancelled(&self) -> impl Future<Output = ()> + Send + '_;

    /// Whether the lock must be taken as not held: the cancellation token has fired, or
    /// the validity deadline has passed (which fires the token with
    /// [`CancelReason::Expired`] now). Call it right before each write the lock protects.
    fn is_cancelled(&self) -> bool;

    /// Why the cancellation token fired, or `None` while it has not. Like
    /// [`is_cancelled`](Self::is_cancelled), it fires the token with
    /// [`CancelReason::Expired`] first if the validity deadline has passed.
    fn cancel_reason(&self) -> Option<CancelReason>;

    /// The validity deadline: the send time of the last successful acquire or refresh
    /// plus the TTL minus the Redlock drift margin (1% of the TTL + 2 ms, from the
    /// Redlock algorithm's clock drift factor). Until then the lock is surely held,
    /// unless the cancellation token has fired for another reason (released,
    /// [lost](CancelReason::Lost), cancelled): ask [`is_cancelled`](Self::is_cancelled)
    /// for both. A [`tokio::time::Instant`], so it follows a paused test clock.
    fn valid_until(&self) -> Instant;

    /// When this guard was acquired: the moment its request completed, by the system
    /// clock (a [`SystemTime`], to log next to the [`fencing_token`](Self::fencing_token)
    /// and compare with other machines' logs).
    fn acquired_at(&self) -> SystemTime;

    /// How many times the lock's TTL has been renewed since it was acquired: one per
    /// successful refresh (every `ttl / 2` while the lock lives), counted when the reply
    /// arrives; 0 for a lock held less than `ttl / 2`.
    fn refreshes(&self) -> u64;

    /// Releases the lock and reports whether it was still held: `Ok(true)` when this id
    /// held it and is now removed, `Ok(false)` when it had been lost. The cancellation
    /// token fires at once, before the release is sent.
    ///
    /// # Errors
    ///
    /// [`Error::Refused`], [`Error::Redis`], [`Error::Timeout`] (no answer within one
    /// TTL; the lock then expires by its TTL), [`Error::Cancelled`] (the refresher's task
    /// was stopped first) and, over a [`Quorum`](crate::Quorum), [`Error::NoQuorum`]: as
    /// [`WriteGuard::unlock`](crate::WriteGuard::unlock) details.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping this future before the release is answered hands the
    /// release to the refresher, as dropping the guard does.
    fn unlock(self) -> impl Future<Output = Result<bool, Error>> + Send
    where
        Self: Sized;
}

/// Implements [`Guard`] for a guard type whose field `inner` is its
/// [`AnyGuard`](super::AnyGuard), by the type's own methods of the same names.
macro_rules! impl_guard {
    ($guard:ty) => {
        impl $crate::guard::common::sealed::Sealed for $guard {}

        impl $crate::guard::Guard for $guard {
            fn key(&self) -> &str {
                <$guard>::key(self)
            }
            fn id(&self) -> &str {
                <$guard>::id(self)
            }
            fn fencing_token(&self) -> u64 {
                <$guard>::fencing_token(self)
            }
            fn cancellation_token(&self) -> &::tokio_util::sync::CancellationToken {
                <$guard>::cancellation_token(self)
            }
            fn cancelled(&self) -> impl ::std::future::Future<Output = ()> + Send + '_ {
                <$guard>::cancelled(self)
            }
            fn is_cancelled(&self) -> bool {
                <$guard>::is_cancelled(self)
            }
            fn cancel_reason(&self) -> Option<$crate::CancelReason> {
                <$guard>::cancel_reason(self)
            }
            fn valid_until(&self) -> ::tokio::time::Instant {
                <$guard>::valid_until(self)
            }
            fn acquired_at(&self) -> ::std::time::SystemTime {
                <$guard>::acquired_at(self)
            }
            fn refreshes(&self) -> u64 {
                <$guard>::refreshes(self)
            }
            fn unlock(
                self,
            ) -> impl ::std::future::Future<Output = Result<bool, $crate::Error>> + Send {
                <$guard>::unlock(self)
            }
        }
    };
}

pub(super) use impl_guard;

/// The methods every guard type has of its own (the [`Guard`] trait's but `unlock`, by the
/// same names), each forwarded to the type's field `$field` (`inner` when not given): its
/// [`AnyGuard`](super::AnyGuard), or for a [`Leadership`](crate::Leadership) its
/// [`WriteGuard`](crate::WriteGuard). `$what` names what it holds ("lock", "permit",
/// "leader's lock") in their docs, which are written here once. Expands inside the
/// type's `impl` block.
macro_rules! guard_methods {
    ($what:literal) => {
        guard_methods!($what, inner);
    };
    ($what:literal, $field:ident) => {
        #[doc = concat!("The Redis key this ", $what, " is held at: `<name>` or `<name>:<key>`; see [`Guard::key`](crate::Guard::key).")]
        pub fn key(&self) -> &str {
            self.$field.key()
        }

        #[doc = concat!("This ", $what, "'s id: 32 lowercase hex characters from 16 CSPRNG bytes; see [`Guard::id`](crate::Guard::id).")]
        pub fn id(&self) -> &str {
            self.$field.id()
        }

        #[doc = concat!("This acquisition's fencing token: strictly larger than the token of every earlier acquisition of the same key. Send it with every write to the protected resource, which refuses a token smaller than the largest it has accepted; see [`Guard::fencing_token`](crate::Guard::fencing_token) and the [fencing guide](crate::guide::fencing).")]
        pub fn fencing_token(&self) -> u64 {
            self.$field.fencing_token()
        }

        #[doc = concat!("The cancellation token that fires when the ", $what, " is released, lost or cancelled; cancelling it releases the ", $what, ". See [`Guard::cancellation_token`](crate::Guard::cancellation_token).")]
        pub fn cancellation_token(&self) -> &::tokio_util::sync::CancellationToken {
            self.$field.cancellation_token()
        }

        #[doc = concat!("Completes when the cancellation token fires or the validity deadline passes, whichever is first; see [`Guard::cancelled`](crate::Guard::cancelled).\n\n# Cancel safety\n\nCancel safe: dropping the future has no effect on the ", $what, ".")]
        pub fn cancelled(&self) -> impl ::std::future::Future<Output = ()> + Send + '_ {
            self.$field.cancelled()
        }

        #[doc = concat!("Whether the ", $what, " must be taken as not held: the cancellation token has fired, or the validity deadline has passed (which fires it with [`CancelReason::Expired`](crate::CancelReason::Expired) now). Call it right before each write the ", $what, " protects; see [`Guard::is_cancelled`](crate::Guard::is_cancelled).")]
        pub fn is_cancelled(&self) -> bool {
            self.$field.is_cancelled()
        }

        #[doc = "Why the cancellation token fired, or `None` while it has not; see [`Guard::cancel_reason`](crate::Guard::cancel_reason)."]
        pub fn cancel_reason(&self) -> Option<$crate::CancelReason> {
            self.$field.cancel_reason()
        }

        #[doc = concat!("The validity deadline: the send time of the last successful acquire or refresh plus the TTL minus the Redlock drift margin (1% of the TTL + 2 ms). Until then the ", $what, " is surely held unless the cancellation token has fired; see [`Guard::valid_until`](crate::Guard::valid_until).")]
        pub fn valid_until(&self) -> ::tokio::time::Instant {
            self.$field.valid_until()
        }

        #[doc = concat!("When this ", $what, " was acquired: the moment its request completed, by the system clock; see [`Guard::acquired_at`](crate::Guard::acquired_at).")]
        pub fn acquired_at(&self) -> ::std::time::SystemTime {
            self.$field.acquired_at()
        }

        #[doc = concat!("How many times the ", $what, "'s TTL has been renewed since it was acquired, one per successful refresh; see [`Guard::refreshes`](crate::Guard::refreshes).")]
        pub fn refreshes(&self) -> u64 {
            self.$field.refreshes()
        }
    };
}

pub(crate) use guard_methods;
