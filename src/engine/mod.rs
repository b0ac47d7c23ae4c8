//! The engine: the one seam every operation of a handle goes through, whatever the
//! backend. A handle holds its [`Engine`] as a trait object in its [`Shared`] state; the
//! one implementation, [`BackendEngine`], is the handle's refresher and backend with
//! their type known again, and runs each operation on them:
//!
//! - [`Engine::acquire`] (`acquire.rs`): a checked request's lease made on the backend,
//!   the wait ([`wait::run`](crate::wait::run)), and the lock handed to the refresher,
//!   which keeps it; what it gives is an [`Acquisition`], which the layer above wraps in a
//!   guard (the engine never makes one);
//! - [`Engine::acquire_set`] (`acquire_set.rs`): the same for a set of locks taken all
//!   at once ([`wait::set`](crate::wait::set)), one acquisition per key;
//! - [`Engine::attach`] (`attach.rs`): a lease's hold moved to a fresh id in one backend
//!   call and each of its locks handed to the refresher, one acquisition per key (never a
//!   guard); [`Engine::release_lease`] and [`Engine::renew_lease`] (`by_lease.rs`): a
//!   lease's hold released or renewed under its own id;
//! - [`Engine::inspect`] (`inspect.rs`), [`Engine::force_unlock`] (`force.rs`) and
//!   [`Engine::leader`] (`leader.rs`): one backend call each.
//!
//! Each operation's file also holds the [`Shared`] method that checks what a handle asks
//! (settings, key) and bounds the call, so that a handle's public method is one line.
//! `docs/architecture.md` lists the steps for adding an operation.

mod acquire;
mod acquire_set;
mod attach;
mod by_lease;
mod deployment;
mod force;
mod inspect;
mod leader;
mod shared;

use std::future::Future;
use std::pin::Pin;

pub(crate) use acquire::CheckedRequest;
pub(crate) use acquire_set::CheckedSet;
pub(crate) use attach::{CheckedAttach, Fit};
pub(crate) use by_lease::HoldKey;
pub use deployment::Deployment;
pub(crate) use shared::Shared;

use crate::backend::Backend;
use crate::error::Error;
use crate::lease::acquisition::Acquisition;
use crate::lease::refresher::Refresher;
use crate::lock_state::LockState;
use crate::protocol::calls::Call;
use crate::protocol::inspect::Form;
use crate::protocol::keys::Keys;
use crate::protocol::leader::LeaderRead;

/// The future of one of the engine's operations.
pub(crate) type Pending<'a, T> = Pin<Box<dyn Future<Output = Result<T, Error>> + Send + 'a>>;

/// Every operation a handle sends to Redis, over a backend of any type.
pub(crate) trait Engine: Send + Sync {
    /// Takes the lock `request` asks for under its fresh id, through the backend, and
    /// has the refresher keep it. `Ok(None)` only with
    /// [`Patience::Once`](crate::wait::Patience::Once), when others hold the lock.
    fn acquire<'a>(&'a self, request: CheckedRequest<'a>) -> Pending<'a, Option<Acquisition>>;
    /// Takes every key of the set `request` asks for under its fresh id, all or none,
    /// through the backend, and has the refresher keep each: one acquisition per key, in
    /// the set's order. `Ok(None)` only with
    /// [`Patience::Once`](crate::wait::Patience::Once), when others hold a key.
    fn acquire_set<'a>(&'a self, request: CheckedSet<'a>) -> Pending<'a, Option<Vec<Acquisition>>>;
    /// Moves the hold `request` names to its fresh id ([`Backend::attach`]) and has the
    /// refresher keep each of its locks from the attach's send time: one acquisition per
    /// key, in the lease's order. [`Error::NotHeld`] when the old id no longer held a key.
    fn attach<'a>(&'a self, request: CheckedAttach<'a>) -> Pending<'a, Vec<Acquisition>>;
    /// Releases every key of `hold` under its own id ([`Backend::release`]): true when it
    /// held every key.
    fn release_lease(&self, hold: Vec<HoldKey>) -> Pending<'_, bool>;
    /// Extends every key of `hold` under its own id ([`Backend::renew`]): true when it
    /// held every key.
    fn renew_lease(&self, hold: Vec<HoldKey>) -> Pending<'_, bool>;
    /// Reads the state of the lock at `keys` ([`Backend::inspect`]).
    fn inspect<'a>(&'a self, keys: &'a Keys, form: Form) -> Pending<'a, LockState>;
    /// Removes every holder of `call`'s lock and wakes this process's waiters on it:
    /// true when something was held ([`Backend::force_unlock`]).
    fn force_unlock(&self, call: Call) -> Pending<'_, bool>;
    /// Reads who leads the election at `call`'s lock key ([`Backend::leader`]).
    fn leader(&self, call: Call) -> Pending<'_, LeaderRead>;
}

/// The engine of a handle whose backend is `B`: its refresher, which holds the backend.
pub(crate) struct BackendEngine<B: Backend> {
    refresher: Refresher<B>,
}

impl<B: Backend> BackendEngine<B> {
    /// The engine that runs every operation on `refresher`'s backend.
    pub(crate) fn new(refresher: Refresher<B>) -> Self {
        Self { refresher }
    }
}

impl<B: Backend> Engine for BackendEngine<B> {
    fn acquire<'a>(&'a self, request: CheckedRequest<'a>) -> Pending<'a, Option<Acquisition>> {
        Box::pin(acquire::on(&self.refresher, request))
    }

    fn acquire_set<'a>(&'a self, request: CheckedSet<'a>) -> Pending<'a, Option<Vec<Acquisition>>> {
        Box::pin(acquire_set::on(&self.refresher, request))
    }

    fn attach<'a>(&'a self, request: CheckedAttach<'a>) -> Pending<'a, Vec<Acquisition>> {
        Box::pin(attach::on(&self.refresher, request))
    }

    fn release_lease(&self, hold: Vec<HoldKey>) -> Pending<'_, bool> {
        Box::pin(by_lease::release(&**self.refresher.backend(), hold))
    }

    fn renew_lease(&self, hold: Vec<HoldKey>) -> Pending<'_, bool> {
        Box::pin(by_lease::renew(&**self.refresher.backend(), hold))
    }

    fn inspect<'a>(&'a self, keys: &'a Keys, form: Form) -> Pending<'a, LockState> {
        Box::pin(self.refresher.backend().inspect(keys, form))
    }

    fn force_unlock(&self, call: Call) -> Pending<'_, bool> {
        Box::pin(force::on(&**self.refresher.backend(), call))
    }

    fn leader(&self, call: Call) -> Pending<'_, LeaderRead> {
        Box::pin(leader::on(&**self.refresher.backend(), call))
    }
}
