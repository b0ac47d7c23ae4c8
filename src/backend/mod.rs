//! The seam between the engine and Redis: every acquire attempt, refresh, release and
//! downgrade goes through one [`Backend`], and so does the choice of the channel a waiter
//! waits on. The wait loop ([`wait`](crate::wait)), the refresh task and the
//! release know only this trait; [`Direct`] implements it on one connection
//! (`direct.rs`), to one server, a Redis Cluster or one node of a quorum as its
//! [`Topology`](crate::protocol::topology::Topology) says, and [`Majority`] over a
//! quorum of such nodes (`quorum/`).
//! A handle holds its engine (`engine/`: a `BackendEngine` over the backend's refresher)
//! as a trait object, which hides the backend's type, so a new implementation needs only
//! a constructor that hands its engine to `Shared::new`.
//!
//! # What an implementation guarantees
//!
//! - **Atomicity per call.** Each call is one atomic step on the lock's keys as the
//!   scripts in `lua/` define it (or, for [`AttemptKind::FastWrite`], a pipeline whose
//!   first command decides the outcome): it takes effect wholly or not at all, and its
//!   reply says which. A new implementation that spans several servers (a quorum) must give
//!   each call this meaning as a whole: "acquired" only when the lock is held as the
//!   single-server script would hold it.
//! - **A bounded time.** Callers bound every call (an attempt by the lock's validity, a
//!   refresh by the guard's deadline, a release by one TTL, a downgrade by the guard's
//!   deadline) and drop its future past that bound. Dropping a call's future must be
//!   safe at any point: the call may then have taken effect or not, as with a request
//!   whose reply was lost, and the caller treats it so (a later release under the same
//!   id removes whatever it took). An implementation should end each call on its own
//!   well within those bounds (a per-request timeout), but must not rely on it.
//! - **The replies.** [`attempt`](Backend::attempt) answers with an
//!   [`Attempt`]: `Acquired(token)` with a fencing token larger than every earlier one
//!   for the key, `Blocked(pttl)` when others hold it, `Unchecked`, `TakenWithoutToken`
//!   and `Busy` only for the paths that give them; or a typed [`Error`] naming the key,
//!   with [`Error::changed_nothing`] true only when nothing was changed.
//!   [`refresh`](Backend::refresh) is `Ok(false)` only when the id definitely no longer
//!   holds the lock; [`release`](Backend::release) and
//!   [`downgrade`](Backend::downgrade) report in `held` whether the id held it, and in
//!   `published` whether waiters on the release channel were told.
//!   [`attach`](Backend::attach) moves a hold to a new id only where the old id holds
//!   every key, and says which key it did not hold otherwise.
//!   [`exec`](Backend::exec) runs a pipeline only while the id holds the lock, in one
//!   atomic step with that check, or refuses it with a typed error before sending it.
//!   [`inspect`](Backend::inspect) reads the state of a lock key in one step and writes
//!   nothing; [`proclaim`](Backend::proclaim) and [`leader`](Backend::leader) write and
//!   read an election's record as `exec` and `inspect` do.

mod clock_watch;
mod direct;
mod quorum;

use std::future::Future;
use std::sync::Arc;

use redis::Pipeline;

pub(crate) use clock_watch::ClockJump;
pub(crate) use direct::Direct;
pub(crate) use quorum::Majority;
pub use quorum::Quorum;

use crate::error::Error;
use crate::lock_state::LockState;
use crate::notify::hub::Hub;
use crate::protocol::calls::{
    AttachPart, Attached, AttemptKind, Call, Holder, Leftovers, Renewal, Retake, SetPart, UpgradeOp,
};
use crate::protocol::exec::{Access, Executed};
use crate::protocol::id::Id;
use crate::protocol::inspect::Form;
use crate::protocol::keys::Keys;
use crate::protocol::leader::LeaderRead;
use crate::protocol::replies::{Attempt, Downgraded, SetAttempt, Unlocked, Upgraded};

/// What one batch of renewals found ([`Backend::renew`]).
#[derive(Debug)]
pub(crate) struct Renewals {
    /// One result per renewal, in the batch's order: whether the id still held its lock
    /// (which was then extended), or the error of the request.
    pub(crate) results: Vec<Result<bool, Error>>,
    /// The server's clock moved beyond ours since the backend's last renewal (one server
    /// or a Sentinel primary: the time `renew.lua` reports; `None` where the backend does
    /// not read it, a Cluster's masters or a quorum's nodes).
    pub(crate) clock: Option<ClockJump>,
}

impl Renewals {
    /// Results that say nothing of the server's clock.
    pub(crate) fn of(results: Vec<Result<bool, Error>>) -> Self {
        Self {
            results,
            clock: None,
        }
    }
}

/// How the engine reaches Redis for one mutex or semaphore. See the module docs for what
/// an implementation must guarantee.
pub(crate) trait Backend: Send + Sync + 'static {
    /// One acquire attempt of `kind` for `call`.
    fn attempt(
        &self,
        call: &Call,
        kind: AttemptKind,
    ) -> impl Future<Output = Result<Attempt, Error>> + Send;

    /// One attempt of a set: every key of `parts` taken under their shared id, each in its
    /// mode, or none (`lua/lock_all.lua`); when a holder blocks, the lock intent is set on
    /// the write keys when `set_intent`. `parts` is not empty.
    fn attempt_set(
        &self,
        parts: &[SetPart<'_>],
        set_intent: bool,
    ) -> impl Future<Output = Result<SetAttempt, Error>> + Send;

    /// Moves the hold of `old` on every key of `parts` to their shared new id, renewed
    /// with their TTL, in one step (`lua/attach.lua`), only when `old` holds every key
    /// in its part's form: [`Attached::NotHeld`] names the first key it did not hold, and
    /// nothing changed. On a backend over several nodes, `Moved` once a majority moved
    /// the whole hold; else the nodes that moved are released under the new id, and the
    /// answer is `NotHeld` when a majority did not hold it, or the error of a round that
    /// reached no majority. `parts` is not empty.
    fn attach(
        &self,
        parts: &[AttachPart<'_>],
        old: &Id,
    ) -> impl Future<Output = Result<Attached, Error>> + Send;

    /// Extends the lock's TTL; `Ok(false)` when the id no longer holds it. A backend over
    /// several nodes may take the lock back on a node that lost it, as `retake` says.
    fn refresh(
        &self,
        call: &Call,
        retake: Option<Retake>,
    ) -> impl Future<Output = Result<bool, Error>> + Send;

    /// Extends every lock of `batch` at once, as [`refresh`](Backend::refresh) extends
    /// one: one result per item, in order. The items come from one mutex, so they share
    /// a TTL, and every item of a batch has the same [`batch_tag`](Backend::batch_tag)
    /// (the refresher groups them), so a backend on one connection sends the batch as
    /// one script. A backend that reads its server's clock with the renewals reports
    /// whether it jumped since its last batch ([`Renewals::clock`]).
    fn renew(&self, batch: &[Renewal<'_>]) -> impl Future<Output = Renewals> + Send;

    /// Whether [`renew`](Backend::renew) may take a lock back on a node that lost it
    /// ([`Retake`]): only a backend over several nodes does.
    fn retakes(&self) -> bool {
        false
    }

    /// Which renewals may share one [`renew`](Backend::renew): those with the same tag,
    /// and only those. On a cluster it is the lock key's hash tag, so that a batch's keys
    /// share a slot and one master's silence holds up no renewal on another; `None` (all
    /// together) elsewhere.
    fn batch_tag<'c>(&self, call: &'c Call) -> Option<&'c str>;

    /// Removes the id, held as `holder`, and the `leftovers` of an unfinished acquire.
    fn release(
        &self,
        call: &Call,
        holder: Holder,
        leftovers: Leftovers,
    ) -> impl Future<Output = Result<Unlocked, Error>> + Send;

    /// Runs `pipe`'s commands only while `call`'s id holds the lock and every lock of
    /// `also` (the other keys of a set, held under the same id), in one atomic step with
    /// that check (`lua/exec.lua`): `Executed::NotHeld(i)` when it did not hold the `i`-th
    /// of them, `call`'s first (and nothing ran). With [`Access::Read`], a pipeline with a
    /// command the server flags `write` is refused before it is sent.
    fn exec(
        &self,
        call: &Call,
        also: &[Keys],
        pipe: &Pipeline,
        access: Access,
    ) -> impl Future<Output = Result<Executed, Error>> + Send;

    /// Reads the state of the lock at `keys` (which name its fair queue's keys too), kept
    /// as a `form` handle keeps it, in one step that writes nothing (`lua/inspect.lua`).
    fn inspect(
        &self,
        keys: &Keys,
        form: Form,
    ) -> impl Future<Output = Result<LockState, Error>> + Send;

    /// Turns the id's write lock into a read lock in one step.
    fn downgrade(&self, call: &Call) -> impl Future<Output = Result<Downgraded, Error>> + Send;

    /// Turns the id's upgradable read lock into the write lock in one step once no
    /// other reader is left (`lua/upgrade.lua`, [`UpgradeOp::Wait`] or
    /// [`UpgradeOp::Try`]); a backend that cannot ([`Majority`]) refuses with
    /// [`Error::InvalidOptions`] before sending anything.
    fn upgrade(
        &self,
        call: &Call,
        op: UpgradeOp,
    ) -> impl Future<Output = Result<Upgraded, Error>> + Send;

    /// The id's upgradable read lock becomes a plain read lock (`lua/upgrade.lua`,
    /// [`UpgradeOp::Plain`]): true when the id is still one of the readers.
    fn plain(&self, call: &Call) -> impl Future<Output = Result<bool, Error>> + Send;

    /// Removes every holder of `call`'s lock key, whoever they are, in one step
    /// (`lua/force_unlock.lua`), keeping the fence key, the lock intent and the fair
    /// queue, and publishes `call`'s id (drawn for this call, naming no holder) on the
    /// release channel: `held` when something was held (on a backend over several
    /// nodes, on any node that answered), `published` when waiters were told.
    fn force_unlock(&self, call: &Call) -> impl Future<Output = Result<Unlocked, Error>> + Send;

    /// Writes the election's `record` beside `call`'s lock key
    /// and publishes it, only while `call`'s id holds the lock as its writer, in one step
    /// with that check (`lua/proclaim.lua`): true when it held the lock (on a backend over
    /// several nodes, on a majority) and the record was written there.
    fn proclaim(
        &self,
        call: &Call,
        record: &str,
    ) -> impl Future<Output = Result<bool, Error>> + Send;

    /// Reads who leads the election at `call`'s lock key, in one step that writes nothing
    /// (`lua/leader.lua`); on a backend over several nodes, the leader a majority names.
    fn leader(&self, call: &Call) -> impl Future<Output = Result<LeaderRead, Error>> + Send;

    /// Where this process's waiters wait for releases, when the mutex has a notifier.
    fn hub(&self) -> Option<&Arc<Hub>>;

    /// Whether [`AttemptKind::FastWrite`] may be sent: its token comes from the counter
    /// alone, which is not floored at the server clock.
    fn fast_path(&self) -> bool;
}
