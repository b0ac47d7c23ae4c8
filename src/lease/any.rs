//! A held lease seen without its backend type: what a guard needs of it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use redis::{Pipeline, Value};

use super::portable::Part;
use crate::error::Error;
use crate::mode::Mode;
use crate::notify::waiter::Waiter;
use crate::protocol::calls::UpgradeOp;
use crate::protocol::exec::{Access, Executed};
use crate::protocol::id::Id;
use crate::protocol::keys::Keys;
use crate::protocol::replies::Upgraded;

/// The boxed future of a call through [`AnyLease`].
pub(crate) type LeaseFuture<'a> = Pin<Box<dyn Future<Output = Result<bool, Error>> + Send + 'a>>;

/// The boxed future of [`AnyLease::exec`]: the commands' replies, or `None` when the lock
/// was not held (nothing ran).
pub(crate) type ExecFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Option<Vec<Value>>, Error>> + Send + 'a>>;

/// The boxed future of [`AnyLease::exec_set`]: the commands' replies, or which lock was
/// not held (nothing ran then).
pub(crate) type ExecSetFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Executed, Error>> + Send + 'a>>;

/// The boxed future of [`AnyLease::upgrade`]: what one `upgrade.lua` call found, or
/// `None` when none was sent (the release has begun, or the reader went plain).
pub(crate) type UpgradeFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Option<Upgraded>, Error>> + Send + 'a>>;

/// A held lease of any backend, so that a guard is one type whatever the connection.
pub(crate) trait AnyLease: Send + Sync {
    fn key(&self) -> &str;
    fn id(&self) -> &str;
    /// The mode the lock is held in now: the acquired one, or [`Mode::Read`] after a
    /// downgrade.
    fn mode(&self) -> Mode;
    /// This hold's part of a portable lease ([`HeldLease::portable`](super::HeldLease::portable)).
    fn portable(&self, fencing_token: u64) -> (Id, Part);
    /// [`HeldLease::validity`](super::HeldLease::validity).
    fn validity(&self) -> Duration;
    /// [`HeldLease::release`](super::HeldLease::release) of a held lock: nothing left over.
    fn release(&self) -> LeaseFuture<'_>;
    /// [`HeldLease::downgrade`](super::HeldLease::downgrade).
    fn downgrade(&self) -> LeaseFuture<'_>;
    /// One upgrade of an upgradable reader ([`HeldLease::upgrade`](super::HeldLease::upgrade)).
    fn upgrade(&self, op: UpgradeOp) -> UpgradeFuture<'_>;
    /// An upgradable reader stays a plain reader ([`HeldLease::plain`](super::HeldLease::plain)).
    fn plain(&self) -> LeaseFuture<'_>;
    /// A place at the front of this process's queue of waiters on the lock, when the
    /// mutex has a notifier: an upgrade waiting for the other readers to leave.
    fn wait_first(&self) -> Option<Waiter>;
    /// The lock's TTL.
    fn ttl(&self) -> Duration;
    /// Runs `pipe` only while the lock is held ([`HeldLease::exec`](super::HeldLease::exec)); a
    /// lock found not held is lost: its token fires with `CancelReason::Lost`.
    fn exec<'a>(&'a self, pipe: &'a Pipeline, access: Access) -> ExecFuture<'a>;
    /// Runs `pipe` only while this lock and every lock of `also` (the other keys of its
    /// set, under the same id) are held ([`HeldLease::exec_set`](super::HeldLease::exec_set));
    /// marks nothing lost: the caller knows which lock the reply names.
    fn exec_set<'a>(
        &'a self,
        also: &'a [Keys],
        pipe: &'a Pipeline,
        access: Access,
    ) -> ExecSetFuture<'a>;
    /// A call found the lock not held (`what`, say `exec` of a set naming this key): it is
    /// lost, so its end is claimed with nothing to send, its token fires with
    /// `CancelReason::Lost` (unless it had fired), and a later `unlock` reports `false`.
    fn found_lost(&self, what: &str);
    /// Writes an election's record while the lock is held as its writer
    /// ([`HeldLease::proclaim`](super::HeldLease::proclaim)); a lock found not held is lost, as
    /// by `exec`.
    fn proclaim<'a>(&'a self, record: &'a str) -> LeaseFuture<'a>;
    /// The guard is dropped: if nobody has claimed the lock's end yet, claims it and has
    /// the refresher release the lock.
    fn dropped(self: Arc<Self>);
    /// Whether the token may be cancelled by someone else (it has a parent, or was handed
    /// out), so the refresher watches it.
    fn handed_out(&self) -> bool;
    /// The token is handed out: from now on the refresher watches it, so that a cancel
    /// from outside releases the lock.
    fn hand_out(self: Arc<Self>);
    /// Has the refresher release the lock, whose end the caller has claimed (an `unlock`
    /// dropped before its reply).
    fn release_later(self: Arc<Self>);
    /// What the refresher's end of the lock found: the release's result, `Ok(false)`
    /// when it was lost, [`Error::Cancelled`] when the release was dropped (the runtime
    /// shut down). Only for a lock whose end the refresher claimed.
    fn ended(&self) -> LeaseFuture<'_>;
}
