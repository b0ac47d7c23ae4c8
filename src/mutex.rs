//! The mutex handle and its four ways to take a lock.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::engine::{Deployment, Fit, Shared};
use crate::error::Error;
use crate::guard::{MultiGuard, ReadGuard, UpgradableReadGuard, WriteGuard};
use crate::lease::Lease;
use crate::lock_state::LockState;
use crate::mode::Kind;
use crate::notify::Notifier;
use crate::protocol::inspect::Form;
use crate::request::{self, Acquire, LockAll, Request, TryAcquire, TryLockAll};

/// A distributed read-write mutex on one Redis server, or on a Redis Cluster (feature
/// `cluster`): many readers or one writer per lock key, across processes and machines.
///
/// The handle is cheap to clone (one `Arc`) and holds no lock itself: each
/// [`write`](Self::write), [`read`](Self::read), [`try_write`](Self::try_write) or
/// [`try_read`](Self::try_read) takes one under a fresh random id and returns a
/// [`WriteGuard`] or a [`ReadGuard`]. The lock key is the mutex name, or `<name>:<key>` with
/// [`Acquire::key`], so one mutex can guard many resources.
///
/// `C` is any redis-rs async connection that can be cloned and shared, such as
/// [`redis::aio::MultiplexedConnection`] or [`redis::aio::ConnectionManager`], or with
/// the feature `cluster`, `redis::cluster_async::ClusterConnection`, on which every lock
/// key must carry a hash tag (see [`Builder::hash_tag_keys`](crate::Builder::hash_tag_keys) and the
/// [Redis Cluster guide](crate::guide::cluster)); or a [`Quorum`](crate::Quorum) of
/// connections to independent masters, on which a lock is held while a majority of them
/// holds it (see the [quorum guide](crate::guide::quorum)).
///
/// # Examples
///
/// ```no_run
/// # #[tokio::main]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use redismutex::RwMutex;
///
/// let client = redis::Client::open("redis://127.0.0.1/")?;
/// let conn = client.get_multiplexed_async_connection().await?;
/// let mx = RwMutex::new(conn, "orders");
///
/// let guard = mx.write().key("42").await?;
/// assert_eq!(guard.key(), "orders:42");
/// guard.unlock().await?;
/// # Ok(())
/// # }
/// ```
pub struct RwMutex<C> {
    shared: Arc<Shared<C>>,
}

impl<C: Deployment> RwMutex<C> {
    /// A mutex named `name` over `conn` with a 4 s TTL and the lock intent off.
    ///
    /// This cannot fail: a name [`Builder::build`](crate::Builder::build) would refuse (empty, too long,
    /// ending in `:fence`, `:lock-intent`, `:queue` or `:queue-deadline`, or without a
    /// hash tag on a Redis Cluster), or a quorum whose nodes are Redis Cluster
    /// connections, is reported by every acquire as
    /// [`Error::InvalidOptions`](crate::Error::InvalidOptions). Use
    /// [`builder`](Self::builder) to check it up front or to set other options.
    ///
    /// Over a [`Quorum`](crate::Quorum) (quorum mode) the requests and guards are the
    /// same. Each node's call is bounded by a tenth of the TTL; a guard's validity counts
    /// from the send of the request that took or last refreshed it on a majority, less
    /// Redlock's drift margin (1% of the TTL + 2 ms). When too few nodes answer, a try, a
    /// downgrade or a refresh gets [`Error::NoQuorum`](crate::Error::NoQuorum), and a
    /// waiting request tries again until its timeout.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use redismutex::{Quorum, RwMutex};
    ///
    /// let mut nodes = Vec::new();
    /// for url in ["redis://10.0.0.1/", "redis://10.0.0.2/", "redis://10.0.0.3/"] {
    ///     nodes.push(redis::Client::open(url)?.get_multiplexed_async_connection().await?);
    /// }
    /// let mx = RwMutex::new(Quorum::new(nodes)?, "orders");
    /// let guard = mx.write().key("42").await?;
    /// println!("token {}", guard.fencing_token());
    /// guard.unlock().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(conn: C, name: impl Into<String>) -> Self {
        let settings = conn.settings(name.into());
        Self::from_shared(conn.share(settings))
    }
}

impl<C> RwMutex<C> {
    /// The handle on what `shared` holds.
    pub(crate) fn from_shared(shared: Shared<C>) -> Self {
        Self {
            shared: Arc::new(shared),
        }
    }

    /// Waits for the exclusive (write) lock: await the returned [`Acquire`], after
    /// setting its options if needed, for a [`WriteGuard`]. How it waits (by release
    /// notifications or polling, and the lock intent), its errors and its cancel safety
    /// are on [`Acquire`].
    ///
    /// Fairness: without [`Builder::fair`](crate::Builder::fair), waiters are not queued across processes
    /// (within one process a notifier wakes them in arrival order); with
    /// [`Builder::lock_intent`](crate::Builder::lock_intent), a waiting writer keeps new readers out so that readers
    /// cannot starve it. With [`Builder::fair`](crate::Builder::fair), every waiter is served in arrival
    /// order across clients.
    pub fn write(&self) -> Acquire<C, WriteGuard> {
        Acquire::new(self.request(Kind::Write))
    }

    /// Waits for a shared (read) lock: await the returned [`Acquire`], after setting its
    /// options if needed, for a [`ReadGuard`]. A writer that holds the lock, or waits for
    /// it with its intent set, keeps readers out. How it waits, its errors and its cancel
    /// safety are on [`Acquire`].
    pub fn read(&self) -> Acquire<C, ReadGuard> {
        Acquire::new(self.request(Kind::Read))
    }

    /// Waits for an upgradable read lock: await the returned [`Acquire`] for an
    /// [`UpgradableReadGuard`], a shared lock that
    /// [`upgrade`](UpgradableReadGuard::upgrade) turns into the exclusive one with no
    /// writer in between (parking_lot's `upgradable_read`). Plain readers share the lock
    /// with it; a writer, a writer waiting with its intent set, and another upgradable
    /// reader keep it out. How it waits, its errors and its cancel safety are on
    /// [`Acquire`]; it is never nested on a [reentrant](crate::Builder::reentrant) mutex.
    ///
    /// Offered on one server, a Redis Cluster, Sentinel and over a
    /// [`Quorum`](crate::Quorum), where it is held on a majority of the nodes and its
    /// upgrade is decided by a majority (the
    /// [quorum guide](crate::guide::quorum#upgradable-reads) says how). Refused with
    /// [`Error::InvalidOptions`](crate::Error::InvalidOptions) when awaited on a
    /// [fair](crate::Builder::fair) mutex, before anything is sent (the
    /// [reentrancy guide](crate::guide::reentrancy) says why).
    pub fn upgradable_read(&self) -> Acquire<C, UpgradableReadGuard> {
        Acquire::new(self.request(Kind::Upgradable))
    }

    /// Makes one attempt at an upgradable read lock; awaiting the returned
    /// [`TryAcquire`] gives `Ok(Some(UpgradableReadGuard))`, or `Ok(None)` when a writer
    /// holds the lock or waits for it with its intent set, or another upgradable reader
    /// holds it. Refused as [`upgradable_read`](Self::upgradable_read) is. Errors and
    /// cancel safety are on [`TryAcquire`].
    pub fn try_upgradable_read(&self) -> TryAcquire<C, UpgradableReadGuard> {
        TryAcquire::new(self.request(Kind::Upgradable))
    }

    /// Waits for read and write locks on several keys at once: name the keys on the
    /// returned [`LockAll`] with [`write`](LockAll::write) and [`read`](LockAll::read),
    /// then await it for a [`MultiGuard`](crate::MultiGuard) that holds every key, each with its own fencing
    /// token. Every attempt takes the whole set in one step or nothing, so no caller
    /// holds part of a set and no order of keys can deadlock. How it waits, its errors
    /// and its cancel safety are on [`LockAll`]; the
    /// [multiple keys guide](crate::guide::multiple_keys) shows its uses.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(mx: redismutex::RwMutex<redis::aio::MultiplexedConnection>)
    /// # -> Result<(), redismutex::Error> {
    /// let set = mx.lock_all().write(["acct:1", "acct:2"]).read(["rates"]).await?;
    /// let token = set.fencing_token("acct:1"); // Some(..): that key's own token
    /// # let _ = token;
    /// set.unlock().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn lock_all(&self) -> LockAll<C> {
        LockAll::new(Arc::clone(&self.shared))
    }

    /// Makes one attempt at read and write locks on several keys at once; awaiting the
    /// returned [`TryLockAll`] gives `Ok(Some(MultiGuard))`, or `Ok(None)` when others
    /// hold a key of the set. Never sets the lock intent. Errors and cancel safety are on
    /// [`TryLockAll`].
    pub fn try_lock_all(&self) -> TryLockAll<C> {
        TryLockAll::new(Arc::clone(&self.shared))
    }

    /// Makes one attempt at the exclusive (write) lock; awaiting the returned
    /// [`TryAcquire`] gives `Ok(Some(WriteGuard))`, or `Ok(None)` when others hold the
    /// lock. Never sets the lock intent. Errors and cancel safety are on [`TryAcquire`].
    pub fn try_write(&self) -> TryAcquire<C, WriteGuard> {
        TryAcquire::new(self.request(Kind::Write))
    }

    /// Makes one attempt at a shared (read) lock; awaiting the returned [`TryAcquire`]
    /// gives `Ok(Some(ReadGuard))`, or `Ok(None)` when a writer holds the lock or waits
    /// for it with its intent set. Errors and cancel safety are on [`TryAcquire`].
    pub fn try_read(&self) -> TryAcquire<C, ReadGuard> {
        TryAcquire::new(self.request(Kind::Read))
    }

    /// Reads who holds the lock at `key`, for how long, who waits for it and its last
    /// fencing token, as one snapshot: a [`LockState`]. `key` is what [`Acquire::key`]
    /// takes: `""` for the lock key `<name>`, else `<name>:<key>` (with
    /// [`Builder::hash_tag_keys`](crate::Builder::hash_tag_keys), tagged as a request tags it). One script of reads: it
    /// takes, changes and waits for nothing, and sees the lock whether this handle, a
    /// clone, another process or a Go client took it (see the
    /// [inspection guide](crate::guide::inspection)).
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidKey`] when the lock key cannot be used, as for a request;
    ///   [`Error::InvalidOptions`] for options every request refuses, and over a
    ///   [`Quorum`](crate::Quorum): an inspection reads one server, and a quorum's nodes
    ///   may each hold another state (make a handle on one node's connection to read
    ///   it). Nothing was sent.
    /// - [`Error::WrongType`] when the lock key, its intent, fence or fair queue keys
    ///   hold a type the lock does not use (a sorted set at the lock key is a
    ///   semaphore's: inspect it with [`Semaphore::inspect`](crate::Semaphore::inspect)),
    ///   or the fence key holds no token; [`Error::NoExpiry`] when one of them has no
    ///   TTL. These are the keys a request would refuse; nothing was changed.
    /// - [`Error::Timeout`] when Redis does not answer within the TTL;
    ///   [`Error::Refused`] and [`Error::Redis`] when the request fails.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads, so dropping the future changes nothing.
    pub async fn inspect(&self, key: &str) -> Result<LockState, Error> {
        self.shared.inspect(key, Form::Lock).await
    }

    /// The lock key a request for `key` takes, `key` being what [`Acquire::key`] takes
    /// (`""` for none): `<name>`, or `<name>:<key>`; with [`Builder::hash_tag_keys`](crate::Builder::hash_tag_keys),
    /// `{<name>}` or `<name>:{<key>}` when that carries no hash tag of its own. It is
    /// the key [`inspect`](Self::inspect) reads, [`force_unlock`](Self::force_unlock)
    /// clears and a guard's [`key`](crate::Guard::key) gives; the lock's other keys append to it
    /// (`<lock key>:fence`). Sends nothing and checks nothing: a key every request
    /// refuses ([`Error::InvalidKey`]) is given all the same.
    pub fn lock_key(&self, key: &str) -> String {
        let settings = &self.shared.settings;
        crate::protocol::keys::lock_key(&settings.name, Some(key), settings.hash_tag_keys)
    }

    /// What the mutex and its clones share.
    pub(crate) fn shared(&self) -> &Arc<Shared<C>> {
        &self.shared
    }

    fn request(&self, kind: Kind) -> Request<C> {
        Request::new(Arc::clone(&self.shared), kind)
    }

    /// Releases the lock `key` by force, whoever holds it: the writer or every reader
    /// (an operator clearing a lock a crashed deploy left behind). `key` is what
    /// [`Acquire::key`] takes, `""` for the mutex name itself; the lock key is formed as
    /// a request forms it (with [`Builder::hash_tag_keys`](crate::Builder::hash_tag_keys) too). `Ok(true)` when
    /// something was held, `Ok(false)` when the lock was free. Waiters here and elsewhere
    /// are told at once; the fencing counter is raised by one (kept otherwise, with its
    /// TTL), so the next holder's token is larger than every earlier one.
    ///
    /// This breaks mutual exclusion while the holder still runs: it learns of the loss at
    /// its next renewal at the latest (up to ttl/2 later), when its token fires
    /// [`CancelReason::Lost`](crate::CancelReason::Lost); a
    /// [`WriteGuard::exec`](crate::WriteGuard::exec) of it is refused at once. See
    /// [Forced release](crate::guide::refresh#forced-release).
    ///
    /// Over a [`Quorum`](crate::Quorum), every node is cleared and its counter raised;
    /// `Ok(true)` when any node that answered had something held. A live holder there
    /// learns it the same way: its renewal takes the lock back only on nodes whose
    /// counter is not past its token (a node restarted empty), so it finds a majority
    /// refusing and fires `Lost`, and the lock stays free.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidKey`](crate::Error::InvalidKey) and
    /// [`Error::InvalidOptions`](crate::Error::InvalidOptions) as for a request, before
    /// anything is sent; [`Error::WrongType`](crate::Error::WrongType) when the lock key
    /// holds another type, and [`Error::NoExpiry`](crate::Error::NoExpiry) when it has
    /// no TTL (no request of the crate leaves one), both left untouched;
    /// [`Error::NoQuorum`](crate::Error::NoQuorum) when fewer than a majority of a
    /// quorum's nodes answered (those that did were cleared);
    /// [`Error::Timeout`](crate::Error::Timeout) when no answer came within the TTL (the
    /// lock may have been cleared or not); [`Error::Refused`](crate::Error::Refused) and
    /// [`Error::Redis`](crate::Error::Redis) when the request fails.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before its answer leaves the lock cleared or not, as with any
    /// request whose reply is lost; this process's waiters are then not woken at once
    /// (they find out by their next attempt).
    pub async fn force_unlock(&self, key: &str) -> Result<bool, crate::Error> {
        self.shared.force_unlock(key).await
    }

    /// Takes over the write lock a [`Lease`] names (from
    /// [`WriteGuard::detach`], here or in another process): one script
    /// (`lua/attach.lua`) checks that the lease's id still holds the lock key as its
    /// writer and moves the hold to a fresh id, renewed with this mutex's TTL, in the same
    /// step. The guard then behaves as if taken here: this mutex's refresher renews it
    /// from the attach's send time, its cancellation token fires as any guard's does,
    /// [`exec`](WriteGuard::exec) and [`unlock`](WriteGuard::unlock) work, the metrics
    /// count it (a request of `kind` `write`); its [`fencing_token`](WriteGuard::fencing_token)
    /// is the lease's, and its [`id`](WriteGuard::id) the new one. A lease attaches at
    /// most once: the old id is gone after it, so a second attach of the same lease (at
    /// the same time or later) gets [`Error::NotHeld`]. On a reentrant mutex the guard is
    /// registered as an acquired one is, for the attaching task. The new id has the same
    /// form as any (32 lowercase hex characters), so Go clients see the same lock.
    ///
    /// See the [leases guide](crate::guide::leases).
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidLease`] naming the key, before anything is sent, when the lease
    ///   is not a single writer's (a reader's, a set's or a semaphore permit's).
    /// - [`Error::InvalidKey`] and [`Error::InvalidOptions`] as for a request, before
    ///   anything is sent (on a Redis Cluster the lease's key must carry a hash tag).
    /// - [`Error::NotHeld`] when the lease's id no longer holds the lock as its writer:
    ///   it expired, was released or released by force, or the lease was attached
    ///   already. Nothing changed.
    /// - [`Error::Timeout`] when no answer came within the TTL minus the drift margin;
    ///   [`Error::Refused`], [`Error::Redis`] when the request fails;
    ///   [`Error::NotReplicated`] with [`Builder::replicas`](crate::Builder::replicas)
    ///   when too few replicas acknowledged it (the hold moved on the primary and
    ///   expires after this mutex's TTL). Over a [`Quorum`](crate::Quorum),
    ///   [`Error::NoQuorum`] when no majority answered; a majority must move the hold,
    ///   else the nodes that moved it release it and the answer is `NotHeld` or
    ///   `NoQuorum`.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before the reply may leave the hold moved to the new id, which
    /// nobody keeps: it expires after this mutex's TTL, and the lease no longer attaches
    /// (its old id is gone). Dropped before the script was sent, nothing changed.
    pub async fn attach_write(&self, lease: &Lease) -> Result<WriteGuard, Error> {
        request::attach::one(&self.shared, lease, Fit::Write, Kind::Write)
            .await
            .map(WriteGuard::new)
    }

    /// Takes over the read lock a [`Lease`] names (from [`ReadGuard::detach`]): the
    /// lease's id must still be one of the lock key's readers; it is replaced by a fresh
    /// id, and the readers' set's TTL raised to at least this mutex's. Otherwise as
    /// [`attach_write`](Self::attach_write) (a request of `kind` `read` in the metrics).
    ///
    /// # Errors
    ///
    /// As [`attach_write`](Self::attach_write); [`Error::InvalidLease`] when the lease
    /// is not a single reader's.
    ///
    /// # Cancel safety
    ///
    /// As [`attach_write`](Self::attach_write).
    pub async fn attach_read(&self, lease: &Lease) -> Result<ReadGuard, Error> {
        request::attach::one(&self.shared, lease, Fit::Read, Kind::Read)
            .await
            .map(ReadGuard::new)
    }

    /// Takes over every lock a [`Lease`] names (from [`MultiGuard::detach`], or a single
    /// guard's) at once: the lease's id must hold every key in the lease's mode for that
    /// key, and all move to one fresh id in one step, or none does. The
    /// [`MultiGuard`]'s keys are named by their lock keys. Otherwise as
    /// [`attach_write`](Self::attach_write) (a request of `kind` `set` in the metrics).
    ///
    /// # Errors
    ///
    /// As [`attach_write`](Self::attach_write), with [`Error::NotHeld`] naming the first
    /// key the lease no longer held; [`Error::InvalidLease`] for a semaphore permit's
    /// lease; [`Error::CrossSlot`] on a Redis Cluster (or with hash-tagged keys) when the
    /// keys are not in one slot.
    ///
    /// # Cancel safety
    ///
    /// As [`attach_write`](Self::attach_write).
    pub async fn attach_all(&self, lease: &Lease) -> Result<MultiGuard, Error> {
        request::attach::set(&self.shared, lease).await
    }

    /// Releases the hold a [`Lease`] names, under the lease's own id: one `unlock.lua`
    /// per key, which removes that id only, never another holder's. `Ok(true)` when the
    /// id still held every key (each is now released), `Ok(false)` otherwise (a key it
    /// did not hold is not changed: a newer holder keeps it). Waiters here and elsewhere
    /// are told, as after any release. For a lease whose guard is gone: a process that
    /// restarts and gives back what it held, a command line's `unlock --lease`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidLease`] for a semaphore permit's lease, and the key checks of
    /// [`attach_write`](Self::attach_write), before anything is sent; then as
    /// [`force_unlock`](Self::force_unlock) (a timeout after the TTL).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves each key released or not, as a lost reply does.
    pub async fn release(&self, lease: &Lease) -> Result<bool, Error> {
        self.shared.release_lease(lease, Fit::Locks).await
    }

    /// Extends every key of the hold a [`Lease`] names by this mutex's TTL, under the
    /// lease's own id, without taking it over (`renew.lua`: the id stays, and the lease
    /// still attaches). `Ok(true)` when the id held every key. For a process that keeps a
    /// detached hold alive without attaching it (the command line's `renew --lease`).
    ///
    /// # Errors
    ///
    /// As [`release`](Self::release).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves each key renewed or not.
    pub async fn renew(&self, lease: &Lease) -> Result<bool, Error> {
        self.shared.renew_lease(lease, Fit::Locks).await
    }

    /// The connection the mutex was made with, for the work the lock protects.
    pub fn connection(&self) -> &C {
        &self.shared.conn
    }

    /// The mutex name: the lock key, or its prefix when a request sets a key.
    pub fn name(&self) -> &str {
        &self.shared.settings.name
    }

    /// How long a lock lives in Redis without a refresh.
    pub fn ttl(&self) -> Duration {
        self.shared.settings.ttl
    }

    /// How long a fence key outlives the last acquisition of its lock.
    pub fn fence_retention(&self) -> Duration {
        self.shared.settings.fence_retention
    }

    /// Whether waiters are served in arrival order ([`Builder::fair`](crate::Builder::fair)).
    pub fn fair(&self) -> bool {
        self.shared.settings.fair
    }

    /// Whether waiting writers set the lock intent.
    pub fn lock_intent(&self) -> bool {
        self.shared.settings.product.lock_intent()
    }

    /// Whether the task holding a lock may take it again (see [`Builder::reentrant`](crate::Builder::reentrant)).
    pub fn reentrant(&self) -> bool {
        self.shared.settings.product.reentrant()
    }

    /// The notifier that wakes this mutex's waiters, if it was built with one.
    pub fn notifier(&self) -> Option<&Notifier> {
        self.shared.settings.notifier.as_ref()
    }
}

impl<C> Clone for RwMutex<C> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<C> fmt::Debug for RwMutex<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RwMutex")
            .field("name", &self.shared.settings.name)
            .field("ttl", &self.shared.settings.ttl)
            .field("lock_intent", &self.shared.settings.product.lock_intent())
            .field("fair", &self.shared.settings.fair)
            .field("reentrant", &self.shared.settings.product.reentrant())
            .field("notifier", &self.shared.settings.notifier.is_some())
            .finish_non_exhaustive()
    }
}
