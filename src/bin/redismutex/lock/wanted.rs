//! Which guard a `lock` run takes: the one type the run's code is generic over.

use redismutex::{Acquire, Granted, Guard, Lease, ReadGuard, RwMutex, TryAcquire, WriteGuard};

/// The guard a run asks for: a [`WriteGuard`], or a [`ReadGuard`] with `--read`.
pub(super) trait Wanted: Guard + Granted + Sized {
    fn wait<C>(mx: &RwMutex<C>) -> Acquire<C, Self>;
    fn attempt<C>(mx: &RwMutex<C>) -> TryAcquire<C, Self>;
    /// The guard's lease: the lock stays held, refreshed no more (`lock --detach`).
    fn detach(self) -> Lease;
}

impl Wanted for WriteGuard {
    fn wait<C>(mx: &RwMutex<C>) -> Acquire<C, Self> {
        mx.write()
    }
    fn attempt<C>(mx: &RwMutex<C>) -> TryAcquire<C, Self> {
        mx.try_write()
    }
    fn detach(self) -> Lease {
        WriteGuard::detach(self)
    }
}

impl Wanted for ReadGuard {
    fn wait<C>(mx: &RwMutex<C>) -> Acquire<C, Self> {
        mx.read()
    }
    fn attempt<C>(mx: &RwMutex<C>) -> TryAcquire<C, Self> {
        mx.try_read()
    }
    fn detach(self) -> Lease {
        ReadGuard::detach(self)
    }
}
