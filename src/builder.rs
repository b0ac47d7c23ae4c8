//! The builder of a [`RwMutex`] or a [`Semaphore`].

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use tokio_util::task::TaskTracker;

use crate::engine::Deployment;
use crate::error::Error;
use crate::mutex::RwMutex;
use crate::notify::Notifier;
use crate::protocol::acks::Acks;
#[cfg(feature = "cluster")]
use crate::protocol::topology::Topology;
use crate::semaphore::Semaphore;
use crate::settings::{Product, Settings};

/// Configures a [`RwMutex`] (made by [`RwMutex::builder`]), or as
/// `Builder<C, Semaphore<C>>` a [`Semaphore`] (made by [`Semaphore::builder`]), or as
/// `Builder<C, Election<C>>` an [`Election`](crate::Election) (made by
/// [`Election::builder`](crate::Election::builder)). The options that speak of "the
/// lock" apply to a semaphore's permits and an election's leader alike; `lock_intent`
/// and `reentrant` are the mutex's alone.
///
/// # Default
///
/// - `ttl`: 4 s (the Go package's default)
/// - `fair`: off (waiters are not queued across processes)
/// - `lock_intent`: off (mutex only)
/// - `reentrant`: off (mutex only)
/// - `fence_retention`: 24 h
/// - `max_hold`: none (a lock is renewed as long as its guard lives)
/// - `replicas`: off (nothing waits for replicas)
/// - `task_tracker`: none (background tasks are spawned with `tokio::spawn`)
/// - `notifier`: none (waiters poll)
/// - `hash_tag_keys`: off (the Go package's key layout)
/// - `name_label`: off (no `name` label on the metrics; feature `metrics`)
/// - `describe_holder`: off (no holder descriptions; see `docs/performance.md`,
///   "Holder identity", for its measured cost), with no `holder_label`
/// - `cluster`: on when `C` is `redis::cluster_async::ClusterConnection` (feature
///   `cluster`)
#[must_use = "a builder does nothing until build() is called"]
pub struct Builder<C, T = RwMutex<C>> {
    conn: C,
    settings: Settings,
    made: PhantomData<fn() -> T>,
}

// The handles' `builder` constructors live here, beside what they return, so that the
// handles never name the builder: `Builder<C>`'s default type parameter names the mutex,
// and the builder is the layer above the handles it builds.
impl<C: Deployment> RwMutex<C> {
    /// A [`Builder`] for a mutex named `name`, starting from the defaults of
    /// [`new`](Self::new).
    pub fn builder(conn: C, name: impl Into<String>) -> Builder<C> {
        Builder::of(conn, name.into())
    }
}

impl<C: Deployment> Semaphore<C> {
    /// A [`Builder`] for a semaphore named `name` with `permits` permits, starting from
    /// the defaults of [`new`](Self::new).
    pub fn builder(conn: C, name: impl Into<String>, permits: u32) -> Builder<C, Self> {
        Builder::semaphore(conn, name.into(), permits)
    }
}

impl<C: Deployment> Builder<C> {
    /// Checks the options and makes the mutex.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidOptions`] when the name is empty, longer than
    /// [`MAX_KEY_BYTES`](crate::MAX_KEY_BYTES) or ends in `:fence`, `:lock-intent`,
    /// `:queue` or `:queue-deadline`, the TTL is below 10 ms or above 24 h, or the fence
    /// retention is below the TTL or above 365 days; on a Redis Cluster
    /// (`Builder::cluster`) or with [`hash_tag_keys`](Self::hash_tag_keys), when the
    /// name's lock keys would have no hash tag (see the
    /// [Redis Cluster guide](crate::guide::cluster)); and when the
    /// [`notifier`](Self::notifier) is for a single server while the mutex is on a
    /// cluster, or the other way round.
    ///
    /// Over a [`Quorum`](crate::Quorum), also when [`fair`](Self::fair) is on (each node
    /// would keep its own queue), when the nodes are Redis Cluster connections (a quorum
    /// needs independent masters), or when the [`notifier`](Self::notifier) was not made
    /// by [`Notifier::quorum`] with one client per node (see the
    /// [quorum guide](crate::guide::quorum)).
    pub fn build(self) -> Result<RwMutex<C>, Error> {
        self.settings.check()?;
        Ok(RwMutex::from_shared(self.conn.share(self.settings)))
    }
}

impl<C> Builder<C> {
    /// Turns the lock intent on or off (default off).
    ///
    /// With it on, a writer that waits sets `<key>:lock-intent` to its id (PX ttl, renewed
    /// while it waits), which keeps new readers out until the writer has acquired the lock
    /// or given up, so a steady stream of readers cannot starve writers. A writer deletes
    /// only an intent holding its own id, never another waiting writer's (nor a Go
    /// writer's, which holds `1`). `try_write` never sets it.
    pub fn lock_intent(mut self, on: bool) -> Self {
        // A mutex's builder makes a mutex (`Builder::new`): the variant is always there.
        if let Product::Mutex { lock_intent, .. } = &mut self.settings.product {
            *lock_intent = on;
        }
        self
    }

    /// Lets the tokio task that holds a lock of this mutex take the same lock key again
    /// (default off): the inner request gets a nested guard at once, without contacting
    /// Redis, and the lock is released when the outermost guard goes. A write inside a
    /// read is refused with [`Error::WouldDeadlock`]. The holder is the tokio task that
    /// awaited the request, not a thread. The rules, and what a nested guard's
    /// cancellation token, `unlock` and drop do, are in the
    /// [reentrancy guide](crate::guide::reentrancy), and on
    /// [`WriteGuard`](crate::WriteGuard#nested-guards), "Nested guards".
    ///
    /// With the option off, a request of the holding task waits for its own lock like
    /// any other: a write inside a write waits until its timeout, or forever.
    pub fn reentrant(mut self, on: bool) -> Self {
        if let Product::Mutex { reentrant, .. } = &mut self.settings.product {
            *reentrant = on;
        }
        self
    }
}

impl<C: Deployment> Builder<C, Semaphore<C>> {
    pub(crate) fn semaphore(conn: C, name: String, permits: u32) -> Self {
        let mut settings = conn.settings(name);
        settings.product = Product::Semaphore { permits };
        Self {
            conn,
            settings,
            made: PhantomData,
        }
    }

    /// Checks the options and makes the semaphore.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidOptions`] for the reasons [`Builder::build`] gives for a mutex,
    /// when `permits` is 0, and over a [`Quorum`](crate::Quorum): a counting semaphore
    /// does not compose over majorities (see the [quorum guide](crate::guide::quorum)).
    pub fn build(self) -> Result<Semaphore<C>, Error> {
        self.settings.check()?;
        Ok(Semaphore::from_shared(self.conn.share(self.settings)))
    }
}

impl<C: Deployment, T> Builder<C, T> {
    /// A builder of a `T` named `name` over `conn`, from the deployment's defaults.
    pub(crate) fn of(conn: C, name: String) -> Self {
        Self {
            settings: conn.settings(name),
            conn,
            made: PhantomData,
        }
    }

    /// The connection and the options as set, for the `build` of a handle made
    /// elsewhere.
    pub(crate) fn into_parts(self) -> (C, Settings) {
        (self.conn, self.settings)
    }
}

impl<C, T> Builder<C, T> {
    /// Sets how long a lock lives in Redis without a refresh (default 4 s). A guard
    /// refreshes it every `ttl / 2` while it lives, so the TTL only decides how long a lock
    /// outlives a holder that crashed or lost its connection.
    ///
    /// The TTL is sent as `PX`/`PEXPIRE` milliseconds, so it is rounded down to whole
    /// milliseconds. It must be between 10 ms and 24 h ([`build`](Self::build) checks).
    /// With redis-rs's default 500 ms response timeout, keep it well above 1 s so that a
    /// slow refresh can be retried before the lock expires.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.settings.ttl = ttl;
        self
    }

    /// Sets how long the fence key `<lock key>:fence` outlives the last acquisition of
    /// its lock (default 24 h); it must be at least the TTL and at most 365 days.
    ///
    /// The fence key holds the last [fencing token](crate::Guard::fencing_token) minted
    /// for the lock key: one small string per lock key used within the retention (see the
    /// [fencing guide](crate::guide::fencing) for its size). Once it expires, the next
    /// token is the server clock in microseconds, still larger than every earlier token
    /// unless the server's clock was set back by more than the time since the last
    /// acquisition. A mutex with millions of short-lived [`key`](crate::Acquire::key)s
    /// keeps memory bounded with a shorter retention.
    pub fn fence_retention(mut self, retention: Duration) -> Self {
        self.settings.fence_retention = retention;
        self
    }

    /// Caps how long a lock or permit is held (default: no cap), from 1 ms to 365 days: a
    /// lock is not renewed past `max_hold` after its acquiring request was sent. At that
    /// moment its guard's cancellation token fires with
    /// [`CancelReason::MaxHold`](crate::CancelReason::MaxHold)
    /// (its [`valid_until`](crate::Guard::valid_until) is never later), while the server
    /// still holds the lock, and the refresher releases it, so waiters get in. It stops a
    /// holder stuck in a loop from keeping its lock alive forever; the holder's work must
    /// watch the token, as for any loss. A [nested guard](crate::WriteGuard#nested-guards)
    /// shares its outer guard's cap; a [downgrade](crate::WriteGuard::downgrade) does not
    /// move it.
    pub fn max_hold(mut self, max_hold: Duration) -> Self {
        self.settings.max_hold = Some(max_hold);
        self
    }

    /// Counts every held lock on `tracker` until its release is done, and spawns the
    /// other background tasks (clean-up after giving up, a quorum's calls past the
    /// majority) on it, so a service can `tracker.close()` and `tracker.wait().await` for
    /// pending releases before it exits. The mutex's refresher task itself is not on the
    /// tracker: it ends by itself 5 s after its last lock.
    pub fn task_tracker(mut self, tracker: TaskTracker) -> Self {
        self.settings.tracker = Some(tracker);
        self
    }

    /// Wakes this mutex's waiters by Pub/Sub when the lock they wait for is released,
    /// instead of polling: pass the `redis::Client` the connection came from (or a
    /// [`Notifier`] made from it). Mutexes given clients for the same server share one
    /// subscriber connection; see [`Notifier`] for what it costs and how it recovers.
    ///
    /// Without it a waiter polls with a backoff (see the
    /// [waiting guide](crate::guide::waiting)).
    pub fn notifier(mut self, notifier: impl Into<Notifier>) -> Self {
        self.settings.notifier = Some(notifier.into());
        self
    }

    /// Puts a hash tag around the varying part of every lock key that has none (default
    /// off): `<name>:{<key>}` instead of `<name>:<key>`, and `{<name>}` instead of
    /// `<name>`. Redis Cluster places a key by its hash tag, so the lock key, its
    /// `:lock-intent` and `:fence` keys and its `:released` channel then share one slot,
    /// while the keys of one mutex still spread over the cluster. A lock key that has a
    /// tag already (a `{tagged}` name, or a key like `{42}`) is used as it is.
    ///
    /// The cost is Go compatibility on untagged names: a Go client of the original
    /// package locking `orders` with key `42` uses `orders:42`, so to share the lock it
    /// must pass the key `{42}` itself. See the
    /// [Redis Cluster guide](crate::guide::cluster).
    ///
    /// Two spellings then name one lock: `.key("42")` and `.key("{42}")` both lock
    /// `orders:{42}`, and a mutex `orders` without a key locks `{orders}`, as a mutex
    /// named `{orders}` does. The tag adds 2 bytes to the lock key, which still has to
    /// fit in [`MAX_KEY_BYTES`](crate::MAX_KEY_BYTES).
    pub fn hash_tag_keys(mut self, on: bool) -> Self {
        self.settings.hash_tag_keys = on;
        self
    }

    /// Says whether the connection reaches a Redis Cluster (feature `cluster`). It is
    /// on by default when `C` is `redis::cluster_async::ClusterConnection`; set it for a
    /// connection type that wraps one.
    ///
    /// On a cluster every lock key must carry a hash tag, so that all keys of a lock are
    /// in one slot (checked before anything is sent: [`build`](Self::build) refuses an
    /// untagged name unless [`hash_tag_keys`](Self::hash_tag_keys) is on), every fencing
    /// token is floored at the server clock (see the
    /// [fencing guide](crate::guide::fencing)), releases are published by `SPUBLISH` on
    /// the lock key's slot (by `PUBLISH` on Redis 6.2, which has no sharded Pub/Sub), and
    /// the [`notifier`](Self::notifier) must be a [`Notifier::cluster`].
    ///
    /// Turning it off for a cluster connection gives all of that up: only for a
    /// connection that does not reach a cluster.
    #[cfg(feature = "cluster")]
    #[cfg_attr(docsrs, doc(cfg(feature = "cluster")))]
    pub fn cluster(mut self, on: bool) -> Self {
        self.settings.reach.set_topology(Topology::from_cluster(on));
        self
    }

    /// Turns fair mode on or off (default off): waiters are served in arrival order,
    /// first come, first served across all clients that use fair mode on the name.
    ///
    /// Each waiting request takes a place in a queue in Redis (`<lock key>:queue` and
    /// `<lock key>:queue-deadline`) on its first attempt; a `try_*` request never queues
    /// and gets the lock only if nobody waits. A waiter that gives up leaves the queue at
    /// once; one that stops attempting holds those behind it up by at most about one TTL.
    /// Plain and Go clients of the name still take the lock when the plain rules let them.
    /// Every attempt is then a script (no write fast path). The queue's rules, its
    /// interplay with plain clients and its costs are in the
    /// [semaphore and fair mode guide](crate::guide::semaphore).
    pub fn fair(mut self, on: bool) -> Self {
        self.settings.fair = on;
        self
    }

    /// Counts an acquisition, and each refresh, only once `n` replicas have acknowledged
    /// its writes (Redis `WAIT n timeout`, on the same connection right after them)
    /// within `timeout` (default off).
    ///
    /// An acquisition the replicas do not acknowledge in time is released: a `try_*`
    /// request fails with [`Error::NotReplicated`], a waiting request tries again until
    /// its timeout. A refresh that is not acknowledged counts as failed: it is retried
    /// every `ttl / 8`, and the guard's token fires [`Expired`](crate::CancelReason::Expired)
    /// at its deadline if none succeeds.
    ///
    /// What it buys: a lock that was acknowledged is on `n` replicas, so a failover to
    /// one of them keeps it. What it does not: replication stays asynchronous, and `WAIT`
    /// is not consensus. A failover may still pick a replica that had not acknowledged,
    /// and a lock can still be lost between a refresh and its acknowledgement. Quorum
    /// mode ([`Quorum`](crate::Quorum)) or [fencing tokens](crate::Guard::fencing_token)
    /// give the guarantees (see the [Sentinel guide](crate::guide::sentinel)).
    ///
    /// `WAIT` blocks the connection it is sent on until the replicas answer or the
    /// timeout passes, so while a replica lags, every request on a shared multiplexed
    /// connection waits behind it. Keep `timeout` below the connection's response
    /// timeout (redis-rs's default is 500 ms; a `SentinelConnection`'s is 2 s): a `WAIT`
    /// cut short by it is a failed request ([`Error::Redis`]), not
    /// [`Error::NotReplicated`].
    ///
    /// [`build`](Self::build) refuses it (`Error::InvalidOptions`) with `n` = 0, a
    /// `timeout` below 1 ms or above a quarter of the TTL (a renewal and its wait leave
    /// room for a retry within the validity), over a [`Quorum`](crate::Quorum), and on a
    /// Redis Cluster.
    pub fn replicas(mut self, n: usize, timeout: Duration) -> Self {
        self.settings.replicas = Some(Acks {
            replicas: n,
            timeout,
        });
        self
    }

    /// Records who holds each lock or permit this handle takes, beside it in Redis
    /// (default off): the host name, the pid and the process's start time (which tells a
    /// reused pid apart), the program's name, the [`holder_label`](Self::holder_label)
    /// and the acquisition time, in `<lock key>:holders`, which lives as long as the holds
    /// it describes. [`LockState::holder_info`](crate::LockState::holder_info) reads it.
    ///
    /// The description is made once, here, and written by a script sent in the same
    /// request as each acquire attempt, so no round trip is added; renewals keep it and a
    /// release deletes it, as a forced release and the lock's expiry do.
    pub fn describe_holder(mut self, on: bool) -> Self {
        self.settings.describe_holder(on);
        self
    }

    /// Labels this handle's holders (what job, which tenant) in their descriptions, and
    /// turns [`describe_holder`](Self::describe_holder) on. At most 256 bytes and no
    /// control character, else `build()` refuses it with
    /// [`Error::InvalidOptions`].
    pub fn holder_label(mut self, label: impl Into<String>) -> Self {
        self.settings.holder_label = Some(label.into());
        self.settings.describe_holder(true);
        self
    }

    /// Adds the label `name` = this handle's name (the `name` given to
    /// [`RwMutex::builder`](crate::RwMutex::builder) or
    /// [`Semaphore::builder`](crate::Semaphore::builder)) to every metric it records
    /// (default off; feature `metrics`), so that a dashboard can tell mutexes apart.
    ///
    /// Only for names from a small fixed set: each name is a series of its own in the
    /// exporter. The lock key (the name with the request's [`key`](crate::Acquire::key))
    /// is never a label. The metrics are in the [metrics guide](crate::guide::metrics).
    #[cfg(feature = "metrics")]
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub fn name_label(mut self, on: bool) -> Self {
        self.settings.name_label = on;
        self
    }
}

impl<C, T> fmt::Debug for Builder<C, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("name", &self.settings.name)
            .field("permits", &self.settings.product.permits())
            .field("fair", &self.settings.fair)
            .field("ttl", &self.settings.ttl)
            .field("lock_intent", &self.settings.product.lock_intent())
            .field("reentrant", &self.settings.product.reentrant())
            .field("fence_retention", &self.settings.fence_retention)
            .field("task_tracker", &self.settings.tracker.is_some())
            .field("notifier", &self.settings.notifier.is_some())
            .field("hash_tag_keys", &self.settings.hash_tag_keys)
            .field("cluster", &self.settings.on_cluster())
            .field("name_label", &self.settings.name_label)
            .field("replicas", &self.settings.replicas)
            .field("max_hold", &self.settings.max_hold)
            .field("describe_holder", &self.settings.holder.is_some())
            .field("holder_label", &self.settings.holder_label)
            .finish_non_exhaustive()
    }
}
