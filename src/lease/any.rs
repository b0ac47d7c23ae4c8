//! A lease seen without its backend type: what a guard needs of it.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use super::Lease;
use crate::backend::Backend;
use crate::error::Error;
use crate::mode::Mode;
use crate::protocol::calls::Leftovers;

/// The boxed future of a call through [`AnyLease`].
pub(crate) type Reply<'a> = Pin<Box<dyn Future<Output = Result<bool, Error>> + Send + 'a>>;

/// A held lease of any backend, so that a guard is one type whatever the connection.
pub(crate) trait AnyLease: Send + Sync {
    fn key(&self) -> &str;
    fn id(&self) -> &str;
    /// The mode the lock is held in now: the acquired one, or [`Mode::Read`] after a
    /// downgrade.
    fn mode(&self) -> Mode;
    /// [`Lease::validity`].
    fn validity(&self) -> Duration;
    /// [`Lease::release`] of a held lock: nothing left over.
    fn release(&self) -> Reply<'_>;
    /// [`Lease::downgrade`].
    fn downgrade(&self) -> Reply<'_>;
}

impl<B: Backend> AnyLease for Lease<B> {
    fn key(&self) -> &str {
        Lease::key(self)
    }

    fn id(&self) -> &str {
        Lease::id(self)
    }

    fn mode(&self) -> Mode {
        self.form.mode(self.kind.mode())
    }

    fn validity(&self) -> Duration {
        Lease::validity(self)
    }

    fn release(&self) -> Reply<'_> {
        Box::pin(Lease::release(self, Leftovers::NONE))
    }

    fn downgrade(&self) -> Reply<'_> {
        Box::pin(Lease::downgrade(self))
    }
}
