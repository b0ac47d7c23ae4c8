//! What awaiting a request gives: a [`WriteGuard`], a [`ReadGuard`], an
//! [`UpgradableReadGuard`] or a [`Permit`].

use crate::guard::{AnyGuard, Permit, ReadGuard, UpgradableReadGuard, WriteGuard};

mod sealed {
    /// Only this crate's guards are granted.
    pub trait Sealed {}

    /// Only this crate can call [`Granted::from_any`](super::Granted::from_any).
    #[derive(Debug)]
    pub struct Token(pub(super) ());
}

/// What awaiting an [`Acquire`](crate::Acquire) or a [`TryAcquire`](crate::TryAcquire)
/// gives: a [`WriteGuard`], a [`ReadGuard`] or an [`UpgradableReadGuard`] from a
/// [`RwMutex`](crate::RwMutex), or a [`Permit`] from a [`Semaphore`](crate::Semaphore).
/// Sealed: implemented by these four only; each request's type names the one it gives.
pub trait Granted: sealed::Sealed + Send + 'static {
    /// Wraps the guard of what the engine acquired.
    #[doc(hidden)]
    #[expect(private_interfaces, reason = "sealed: only this crate can call it")]
    fn from_any(guard: AnyGuard, token: sealed::Token) -> Self;
}

impl sealed::Sealed for WriteGuard {}
impl sealed::Sealed for ReadGuard {}
impl sealed::Sealed for Permit {}
impl sealed::Sealed for UpgradableReadGuard {}

impl Granted for UpgradableReadGuard {
    #[expect(private_interfaces, reason = "sealed: only this crate can call it")]
    fn from_any(guard: AnyGuard, _: sealed::Token) -> Self {
        UpgradableReadGuard::new(guard)
    }
}

impl Granted for WriteGuard {
    #[expect(private_interfaces, reason = "sealed: only this crate can call it")]
    fn from_any(guard: AnyGuard, _: sealed::Token) -> Self {
        WriteGuard::new(guard)
    }
}

impl Granted for ReadGuard {
    #[expect(private_interfaces, reason = "sealed: only this crate can call it")]
    fn from_any(guard: AnyGuard, _: sealed::Token) -> Self {
        ReadGuard::new(guard)
    }
}

impl Granted for Permit {
    #[expect(private_interfaces, reason = "sealed: only this crate can call it")]
    fn from_any(guard: AnyGuard, _: sealed::Token) -> Self {
        Permit::new(guard)
    }
}

/// Wraps `guard` as the `G` a request gives.
pub(super) fn grant<G: Granted>(guard: AnyGuard) -> G {
    G::from_any(guard, sealed::Token(()))
}
