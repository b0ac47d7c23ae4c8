//! What awaiting a request gives: a [`Guard`] or a [`Permit`].

use crate::guard::{Guard, Permit};

mod sealed {
    /// Only this crate's guards are granted.
    pub trait Sealed {}

    /// Only this crate can call [`Granted::from_guard`](super::Granted::from_guard).
    #[derive(Debug)]
    pub struct Token(pub(super) ());
}

/// What awaiting an [`Acquire`](crate::Acquire) or a [`TryAcquire`](crate::TryAcquire)
/// gives: a [`Guard`] from a [`RwMutex`](crate::RwMutex), or a [`Permit`] from a
/// [`Semaphore`](crate::Semaphore). Sealed: implemented by these two only.
pub trait Granted: sealed::Sealed + Send + 'static {
    /// Wraps the guard of what the engine acquired.
    #[doc(hidden)]
    fn from_guard(guard: Guard, token: sealed::Token) -> Self;
}

impl sealed::Sealed for Guard {}
impl sealed::Sealed for Permit {}

impl Granted for Guard {
    fn from_guard(guard: Guard, _: sealed::Token) -> Self {
        guard
    }
}

impl Granted for Permit {
    fn from_guard(guard: Guard, _: sealed::Token) -> Self {
        Permit::new(guard)
    }
}

/// Wraps `guard` as the `G` a request gives.
pub(super) fn grant<G: Granted>(guard: Guard) -> G {
    G::from_guard(guard, sealed::Token(()))
}
