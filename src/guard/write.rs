//! [`WriteGuard`]: a held exclusive lock.

use std::fmt;

use redis::{FromRedisValue, Pipeline};

use super::any::AnyGuard;
use super::common::{guard_methods, impl_guard};
use super::ReadGuard;
use crate::error::Error;

/// A held exclusive (write) lock of a [`RwMutex`](crate::RwMutex), from
/// [`write`](crate::RwMutex::write) or [`try_write`](crate::RwMutex::try_write), and the
/// cancellation token that says whether it is still held.
///
/// The lock key is a Redis string holding this guard's [`id`](Self::id). While the guard
/// lives, its mutex's refresher renews the lock every `ttl / 2`; its cancellation token
/// fires when the lock is released, lost, cancelled or past its validity deadline, and
/// dropping the guard releases the lock from a background task, never blocking. What
/// every guard shares, and how its cancellation token and validity deadline behave, is on
/// the [`Guard`](crate::Guard) trait, whose methods this type has of its own.
///
/// Beyond what every guard does, a write guard runs guarded writes
/// ([`exec`](Self::exec)) and can become a [`ReadGuard`] with no writer in between
/// ([`downgrade`](Self::downgrade)).
///
/// # Nested guards
///
/// On a [reentrant](crate::Builder::reentrant) mutex, a request from the task that
/// already holds the lock key gives a nested guard, without contacting Redis. It shares
/// the outer guard's one acquisition: the same [`key`](Self::key), [`id`](Self::id) and
/// [`fencing_token`](Self::fencing_token), and [`valid_until`](Self::valid_until) is the
/// outer lock's deadline, which moves with the outer guard's refreshes;
/// [`refreshes`](Self::refreshes) is the outer guard's count and
/// [`acquired_at`](Self::acquired_at) its own request's time. Its type is the one it asked
/// for: a read inside a write is a [`ReadGuard`] while the lock in Redis stays a write
/// lock. Its cancellation token is a child of the outer guard's (and fires too when the
/// request's [`parent`](crate::Acquire::parent) is cancelled):
///
/// - the outermost guard going (unlock, drop, lost, expired) fires the cancellation token
///   of every nested guard, whose [`cancel_reason`](Self::cancel_reason) is then the
///   outer guard's ([`CancelReason::Cancelled`](crate::CancelReason::Cancelled) after its
///   unlock or drop);
/// - cancelling a nested guard's cancellation token, dropping it or
///   [`unlock`](Self::unlock)ing it only ends that nested guard: the lock stays held,
///   nothing is sent, and the outer guard's cancellation token and reason are untouched. `unlock`
///   returns `Ok(true)` while the outer lock is still held, `Ok(false)` once it is not.
#[must_use = "dropping the guard releases the lock at once"]
#[clippy::has_significant_drop]
pub struct WriteGuard {
    inner: AnyGuard,
}

impl WriteGuard {
    pub(crate) fn new(inner: AnyGuard) -> Self {
        Self { inner }
    }

    guard_methods!("lock");

    /// Runs the commands of `pipe` on the lock's server only while the lock is still this
    /// guard's, in one atomic step with that check, and parses their replies into `T` as
    /// [`pipe.query_async::<T>`](redis::Pipeline::query_async) would (ignored commands
    /// left out; an [`atomic`](redis::Pipeline::atomic) pipeline's replies as a
    /// transaction's).
    ///
    /// One script (`lua/exec.lua`, sent by `EVALSHA` as every script of the crate) checks
    /// that the lock key still holds this guard's id (a writer's string, a member of the
    /// readers' set, or a semaphore entry whose deadline is after the server's `TIME`)
    /// and then runs every command, in order; nothing else runs on the server in between.
    /// So a guard that was paused past its TTL, whose lock another holder has since
    /// taken, cannot overwrite that holder's data: its pipeline is refused whole. This
    /// proves the lock was held at the moment the commands ran, on the server they ran
    /// on; effects outside Redis still need the [fencing token](Self::fencing_token). See
    /// the [guarded writes guide](crate::guide::guarded_writes).
    ///
    /// The keys of the commands are found from the server's `COMMAND INFO` (asked once
    /// per command name and kept) or, for commands whose keys move with their arguments,
    /// `COMMAND GETKEYS`, and sent as the script's keys. An empty pipeline checks the lock
    /// and runs nothing. Replies come back through Lua, in RESP2 shapes (a hash reply is a
    /// flat array, which `HashMap` parses as well), and integers above 2^53 lose
    /// precision there.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(mx: redismutex::RwMutex<redis::aio::MultiplexedConnection>)
    /// # -> Result<(), redismutex::Error> {
    /// let guard = mx.write().key("users:42").await?;
    /// let body = "{\"name\":\"Ada\"}"; // recomputed while holding the lock
    /// let mut pipe = redis::pipe();
    /// pipe.set("cache:users:42", body).ignore().incr("cache:users:42:version", 1);
    /// // Refused with Error::NotHeld, and nothing written, if the lock is no longer ours.
    /// let (version,): (i64,) = guard.exec(&pipe).await?;
    /// # let _ = version;
    /// guard.unlock().await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// - [`Error::NotHeld`] when the lock is not this guard's any more; no command ran.
    ///   If the cancellation token had fired (or the validity deadline had passed),
    ///   nothing was sent; if Redis no longer had this id, it now fires with
    ///   [`CancelReason::Lost`](crate::CancelReason::Lost).
    /// - [`Error::CommandFailed`] when the lock was held and a command failed (a
    ///   `WRONGTYPE`, a wrong number of arguments): it says how many ran before it, and
    ///   their writes stay, as after a failed command in a Redis script or `MULTI`.
    ///   [`Error::Refused`] instead when the first command was refused for a
    ///   [`Refusal`](crate::Refusal) (`OOM` under `maxmemory`, say): nothing changed.
    /// - [`Error::InvalidPipeline`] when the pipeline cannot run as one guarded step: a
    ///   command the server does not know or that cannot run in a script (`MULTI`,
    ///   `WATCH`, `SUBSCRIBE`, ...), an empty command, one with more than 7,000
    ///   arguments, or a key of the lock itself (the lock key, `:lock-intent`, `:fence`,
    ///   `:queue`, `:queue-deadline`). No command ran.
    /// - [`Error::CrossSlot`] on a Redis Cluster when a key is not in the lock key's
    ///   slot; it names the first such key, and the pipeline was not sent.
    /// - [`Error::InvalidOptions`] over a [`Quorum`](crate::Quorum): independent masters
    ///   share no transaction, so no step can check the lock and write atomically.
    /// - [`Error::NotReplicated`] with [`Builder::replicas`](crate::Builder::replicas)
    ///   when fewer replicas than asked acknowledged the script (its `WAIT` travels in the
    ///   same request): the commands ran on the primary, but a failover now may lose them.
    /// - [`Error::Timeout`] when no reply came before the validity deadline
    ///   ([`valid_until`](Self::valid_until)): the pipeline may or may not have run.
    /// - [`Error::Redis`] when the request fails (the pipeline may or may not have run,
    ///   as with any request whose reply is lost), or when the replies do not parse as
    ///   `T` (the pipeline ran); [`Error::Refused`] when Redis refuses the script
    ///   (`NOPERM`: the user needs `EVALSHA`, `EVAL` and `COMMAND` too).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before its reply leaves the pipeline run or not, as with any
    /// request whose reply is lost; the lock and the guard are unaffected.
    pub async fn exec<T: FromRedisValue>(&self, pipe: &Pipeline) -> Result<T, Error> {
        self.inner.exec(pipe).await
    }

    /// Turns this write guard into a read guard without letting go of the lock, as
    /// [`RwLockWriteGuard::downgrade`](tokio::sync::RwLockWriteGuard::downgrade) does: no
    /// other writer can take the lock in between. Other readers may join at once; waiting
    /// writers go on waiting until every reader, this one included, has released it.
    ///
    /// In Redis, one script (`lua/downgrade.lua`) replaces the string holding this
    /// guard's id at the lock key by a set holding only that id, with the lock's TTL, and
    /// publishes the id on the release channel `<lock key>:released` so that waiting
    /// readers look again. That is the key layout of a read lock, so readers of the Go
    /// package can join it too. The key, the id, the fencing token, the cancellation token
    /// and the refreshes carry on;
    /// the validity deadline moves forward as after a refresh. The release of the
    /// [`ReadGuard`] removes the id from the set.
    ///
    /// The [fencing token](Self::fencing_token) stays the same: the read guard continues
    /// the same acquisition, and every later acquisition of the lock key still gets a
    /// larger token.
    ///
    /// A nested guard of a [reentrant](crate::Builder::reentrant) mutex is downgraded
    /// here only: it becomes a nested read guard, nothing is sent, and the lock stays the
    /// outermost guard's. Downgrading the outermost write guard makes a later write
    /// inside it, in the same task, [`Error::WouldDeadlock`].
    ///
    /// # Errors
    ///
    /// [`Error::NotHeld`] when the cancellation token had already fired (nothing is sent then; the
    /// refresher releases the lock as for any fired cancellation token), or when Redis no longer
    /// had this id at the lock key: the cancellation token then fires with
    /// [`CancelReason::Lost`](crate::CancelReason::Lost) and nothing is released. [`Error::Refused`] when Redis refuses the script,
    /// [`Error::Redis`] when the request fails otherwise, and [`Error::Timeout`] when
    /// Redis does not answer before the validity deadline ([`valid_until`]). After these
    /// three the guard is dropped, so its refresher releases the lock, removing
    /// the id whether it is still a writer's or already a reader's. Over a
    /// [`Quorum`](crate::Quorum), it needs a majority of the nodes to turn the lock:
    /// [`Error::NoQuorum`] (and the guard dropped, as above) when too few answered;
    /// `NotHeld` when a majority no longer held it.
    ///
    /// [`valid_until`]: Self::valid_until
    ///
    /// # Cancel safety
    ///
    /// Dropping the future drops the guard, which releases the lock from the background
    /// task, as dropping the guard does. If the downgrade was sent and its reply not yet
    /// read, it may still run: the release then removes the id as a writer's and, if that
    /// finds nothing, as a reader's, so the lock is gone either way. (A downgrade that a
    /// dropped connection delivers only after the release leaves a reader's id until
    /// the TTL, as any release that fails does.)
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(mx: redismutex::RwMutex<redis::aio::MultiplexedConnection>)
    /// # -> Result<(), redismutex::Error> {
    /// let guard = mx.write().key("report").await?;
    /// // ... write the report, alone ...
    /// let guard: redismutex::ReadGuard = guard.downgrade().await?;
    /// // ... read it back while other readers do; no writer got in between ...
    /// guard.unlock().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn downgrade(self) -> Result<ReadGuard, Error> {
        self.inner.downgrade().await.map(ReadGuard::new)
    }

    /// Releases the lock and reports whether it was still held: `Ok(true)` when this id
    /// held the lock and is now removed, `Ok(false)` when it had been lost (expired,
    /// deleted or taken over). The cancellation token fires at once, before the release is
    /// sent.
    ///
    /// A [nested guard](Self#nested-guards) sends nothing and leaves the lock held: it
    /// returns `Ok(true)` while the outer guard's lock is still held, `Ok(false)` once
    /// it is not.
    ///
    /// If the cancellation token had already fired for another reason, the mutex's
    /// refresher has already released the lock (unless it was
    /// [lost](crate::CancelReason::Lost)), and this returns what that release found.
    ///
    /// # Errors
    ///
    /// [`Error::Refused`] when Redis refuses the release (busy with a script, no ACL
    /// permission, ...), [`Error::Redis`] when the request fails otherwise, and
    /// [`Error::Timeout`] when Redis does not answer within one TTL; the lock then
    /// expires by its TTL, since refresh has stopped. [`Error::Cancelled`] when the
    /// refresher's task was stopped before it could release, for example by runtime
    /// shutdown.
    ///
    /// Over a [`Quorum`](crate::Quorum) the release goes to every node at once and this
    /// returns once a majority has said whether it held the lock (`Ok(false)` only when a
    /// majority did not); the other nodes' releases go on in a background task, on the
    /// mutex's [`task_tracker`](crate::Builder::task_tracker) if it has one: a process
    /// that exits right after should wait for the tracker. [`Error::NoQuorum`] when
    /// neither a majority held it nor a majority did not (too few nodes answered within
    /// the per-node bound).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping this future before the release is answered hands the
    /// release to the refresher, as dropping the guard does.
    pub async fn unlock(self) -> Result<bool, Error> {
        self.inner.unlock().await
    }

    /// This guard's hold as a [`Lease`](crate::Lease), while the guard goes on holding and
    /// refreshing it: nothing is sent. For a process that writes the lease down (a file,
    /// say) to take its lock back after a crash or restart within the TTL, by
    /// [`RwMutex::attach_write`](crate::RwMutex::attach_write) and the like, instead of
    /// waiting the TTL out. An attach moves the hold to a new id, so if this guard is
    /// still alive then, its next refresh finds its id gone and its token fires with
    /// [`CancelReason::Lost`](crate::CancelReason::Lost): two holders never both keep
    /// it. See the [leases guide](crate::guide::leases#the-restart-pattern).
    pub fn lease(&self) -> crate::Lease {
        self.inner.lease()
    }

    /// Lets go of this guard without releasing the lock, and gives its hold as a
    /// [`Lease`](crate::Lease) that another handle (in this process or another, after a
    /// trip through the lease's text form) attaches with
    /// [`RwMutex::attach_write`](crate::RwMutex::attach_write), releases with
    /// [`RwMutex::release`](crate::RwMutex::release) or keeps alive with
    /// [`RwMutex::renew`](crate::RwMutex::renew). See the
    /// [leases guide](crate::guide::leases).
    ///
    /// Nothing is sent: the mutex's refresher stops renewing the lock and never releases
    /// it, so it stays in Redis, held by this guard's id, until its TTL runs out (at most
    /// one TTL from the last renewal), or until the lease is attached or released. The
    /// cancellation token fires at once with
    /// [`CancelReason::Detached`](crate::CancelReason::Detached), so work handed the
    /// token stops here; the lock leaves the `redismutex_held` metric, and a reentrant
    /// mutex forgets it. The lease carries the key, the id, the mode the lock is held in
    /// now (a downgraded guard is a reader's) and the fencing token.
    ///
    /// A guard whose token has already fired (lost, expired, cancelled) still gives its
    /// lease; attaching it then fails with [`Error::NotHeld`] (the refresher has released
    /// the lock, or it was lost). A [nested guard](Self#nested-guards) detaches as a drop
    /// does: its lease names the outer guard's hold, which the outer guard still keeps
    /// and renews (attaching it takes the hold from under the outer guard, whose token
    /// fires as lost at its next renewal).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(mx: redismutex::RwMutex<redis::aio::MultiplexedConnection>)
    /// # -> Result<(), redismutex::Error> {
    /// let guard = mx.write().key("job:42").await?;
    /// let text = guard.detach().to_string();
    /// // Hand `text` to a worker, which runs `mx.attach_write(&text.parse()?)`.
    /// # let _ = text;
    /// # Ok(())
    /// # }
    /// ```
    pub fn detach(self) -> crate::Lease {
        self.inner.detach()
    }

    /// The guard this one wraps, for the crate's own layers above (an election's record).
    pub(crate) fn inner(&self) -> &AnyGuard {
        &self.inner
    }
}

impl_guard!(WriteGuard);

impl fmt::Debug for WriteGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.debug("WriteGuard", f)
    }
}
