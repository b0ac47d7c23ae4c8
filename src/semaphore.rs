//! The semaphore handle and its two ways to take a permit.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::engine::{Deployment, Fit, Shared};
use crate::error::Error;
use crate::guard::Permit;
use crate::lease::Lease;
use crate::lock_state::LockState;
use crate::mode::Kind;
use crate::notify::Notifier;
use crate::protocol::inspect::Form;
use crate::request::{self, Acquire, Request, TryAcquire};
use crate::settings::Product;

/// A distributed counting semaphore: at most `permits` holders of one name (or of one
/// `<name>:<key>`) at a time, across processes and machines.
///
/// Each [`acquire`](Self::acquire) or [`try_acquire`](Self::try_acquire) takes one permit
/// under a fresh random id and returns a [`Permit`], which is refreshed, cancelled and
/// returned as a lock's guard is (it is a [`Guard`](crate::Guard) too). The holders live in a sorted set at the
/// semaphore key, each scored by its deadline in the server's clock; a holder that
/// crashes frees its permit when its TTL runs out by that clock, whatever the clients'
/// clocks say (see the [semaphore guide](crate::guide::semaphore)).
///
/// The permit count is each caller's own: a request gets a permit while fewer than its
/// semaphore's `permits` hold one. Changing it for a name in use revokes nothing: after a
/// lower count, holders above it keep their permits and new requests wait until fewer
/// than the new count remain; clients with different counts on one name each admit by
/// their own.
///
/// The handle is cheap to clone (one `Arc`). `C` is any redis-rs async connection that can
/// be cloned and shared, as for [`RwMutex`](crate::RwMutex), including a Redis Cluster
/// connection (feature `cluster`) on which every semaphore key must carry a hash tag.
///
/// # Examples
///
/// ```no_run
/// # #[tokio::main]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use redismutex::Semaphore;
///
/// let client = redis::Client::open("redis://127.0.0.1/")?;
/// let conn = client.get_multiplexed_async_connection().await?;
/// // At most 4 exports at once across every process.
/// let exports = Semaphore::new(conn, "exports", 4);
///
/// let permit = exports.acquire().await?;
/// // ... run the export, checking permit.is_cancelled() before each write ...
/// permit.unlock().await?;
/// # Ok(())
/// # }
/// ```
pub struct Semaphore<C> {
    shared: Arc<Shared<C>>,
}

impl<C: Deployment> Semaphore<C> {
    /// A semaphore named `name` with `permits` permits, a 4 s TTL and fair mode off.
    ///
    /// This cannot fail: options [`Builder::build`](crate::Builder#method.build-1) would
    /// refuse (0 permits, a name it refuses, or a [`Quorum`](crate::Quorum): a counting
    /// semaphore does not compose over majorities, see the
    /// [quorum guide](crate::guide::quorum)) are reported by every acquire as
    /// [`Error::InvalidOptions`](crate::Error::InvalidOptions).
    pub fn new(conn: C, name: impl Into<String>, permits: u32) -> Self {
        let mut settings = conn.settings(name.into());
        settings.product = Product::Semaphore { permits };
        Self::from_shared(conn.share(settings))
    }
}

impl<C> Semaphore<C> {
    /// The handle on what `shared` holds.
    pub(crate) fn from_shared(shared: Shared<C>) -> Self {
        Self {
            shared: Arc::new(shared),
        }
    }

    /// Waits for a permit. Await the returned [`Acquire`], after setting its options if
    /// needed (`key`, `parent`, `timeout`). How it waits, its errors and its cancel safety
    /// are on [`Acquire`].
    pub fn acquire(&self) -> Acquire<C, Permit> {
        Acquire::new(self.request())
    }

    /// Makes one attempt at a permit; awaiting the returned [`TryAcquire`] gives
    /// `Ok(None)` when all permits are taken (or, in fair mode, others wait for one).
    /// Errors and cancel safety are on [`TryAcquire`].
    pub fn try_acquire(&self) -> TryAcquire<C, Permit> {
        TryAcquire::new(self.request())
    }

    /// Reads who holds permits at `key`, for how long, who waits for one and the last
    /// fencing token, as one snapshot: a [`LockState`]. `key` is what [`Acquire::key`]
    /// takes: `""` for the semaphore key `<name>`, else `<name>:<key>` (with
    /// [`Builder::hash_tag_keys`](crate::Builder::hash_tag_keys), tagged as a request tags it). One script of reads: it
    /// takes, changes and waits for nothing.
    ///
    /// A semaphore held by at least one unexpired permit is
    /// [`Mode::Read`](crate::Mode::Read) (its holders share it); its
    /// [`holders`](LockState::holders) and
    /// [`permits_in_use`](LockState::permits_in_use) count only the permits whose
    /// deadline is after the server's clock (`TIME`), as a request counts them. The
    /// permit count is each caller's own and is not stored in Redis: compare with
    /// [`permits`](Self::permits).
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidKey`] when the semaphore key cannot be used, as for a request;
    ///   [`Error::InvalidOptions`] for options every request refuses (a semaphore over a
    ///   [`Quorum`](crate::Quorum) among them). Nothing was sent.
    /// - [`Error::WrongType`] when the semaphore key, its fence or fair queue keys (or
    ///   a `:lock-intent` key beside it) hold a type the semaphore does not use (a string
    ///   or a set at the semaphore key is a read-write lock's: inspect it with
    ///   [`RwMutex::inspect`](crate::RwMutex::inspect)), or the fence key holds no
    ///   token; [`Error::NoExpiry`] when one of them has no TTL. Nothing was changed.
    /// - [`Error::Timeout`] when Redis does not answer within the TTL;
    ///   [`Error::Refused`] and [`Error::Redis`] when the request fails.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads, so dropping the future changes nothing.
    pub async fn inspect(&self, key: &str) -> Result<LockState, Error> {
        self.shared.inspect(key, Form::Semaphore).await
    }

    /// The semaphore key a request for `key` takes, `key` being what [`Acquire::key`] takes
    /// (`""` for none): `<name>`, or `<name>:<key>`; with [`Builder::hash_tag_keys`](crate::Builder::hash_tag_keys),
    /// `{<name>}` or `<name>:{<key>}` when that carries no hash tag of its own. It is
    /// the key [`inspect`](Self::inspect) reads, [`force_unlock`](Self::force_unlock)
    /// clears and a permit's [`key`](crate::Permit::key) gives; the semaphore's other keys append to it
    /// (`<semaphore key>:fence`). Sends nothing and checks nothing: a key every request
    /// refuses ([`Error::InvalidKey`]) is given all the same.
    pub fn lock_key(&self, key: &str) -> String {
        let settings = &self.shared.settings;
        crate::protocol::keys::lock_key(&settings.name, Some(key), settings.hash_tag_keys)
    }

    /// Returns every permit of `key` by force, whoever holds them (an operator clearing
    /// permits a crashed deploy left behind). `key` is what [`Acquire::key`] takes, `""`
    /// for the semaphore name itself. `Ok(true)` when a permit was held (its deadline
    /// not yet passed by the server's clock), `Ok(false)` otherwise. Waiters here and
    /// elsewhere are told at once; the fencing counter is raised by one, so the next
    /// permit's token is larger than every earlier one.
    ///
    /// The holders still running learn of it at their next renewal at the latest (up to
    /// ttl/2 later), when their tokens fire
    /// [`CancelReason::Lost`](crate::CancelReason::Lost); their
    /// [`Permit::exec`](crate::Permit::exec) is refused at once. See
    /// [Forced release](crate::guide::refresh#forced-release).
    ///
    /// # Errors
    ///
    /// As [`RwMutex::force_unlock`](crate::RwMutex::force_unlock).
    ///
    /// # Cancel safety
    ///
    /// As [`RwMutex::force_unlock`](crate::RwMutex::force_unlock): dropping the future
    /// leaves the permits cleared or not.
    pub async fn force_unlock(&self, key: &str) -> Result<bool, crate::Error> {
        self.shared.force_unlock(key).await
    }

    /// Takes over the permit a [`Lease`] names (from [`Permit::detach`], here or in
    /// another process): one script checks that the lease's id still holds an unexpired
    /// permit and moves it to a fresh id, whose deadline is this semaphore's TTL from the
    /// server's clock. The permit then behaves as if taken here (a request of `kind`
    /// `permit` in the metrics); its fencing token is the lease's. A lease attaches at
    /// most once. See [`RwMutex::attach_write`](crate::RwMutex::attach_write) and the
    /// [leases guide](crate::guide::leases).
    ///
    /// # Errors
    ///
    /// As [`RwMutex::attach_write`](crate::RwMutex::attach_write);
    /// [`Error::InvalidLease`] when the lease is not a permit's.
    ///
    /// # Cancel safety
    ///
    /// As [`RwMutex::attach_write`](crate::RwMutex::attach_write): a dropped attach may
    /// leave the permit under a new id nobody keeps, which runs out after this
    /// semaphore's TTL.
    pub async fn attach(&self, lease: &Lease) -> Result<Permit, Error> {
        let kind = self.request().kind;
        request::attach::one(&self.shared, lease, Fit::Permit, kind)
            .await
            .map(Permit::new)
    }

    /// Returns the permit a [`Lease`] names, under the lease's own id (never another
    /// holder's): `Ok(true)` when the id still held an unexpired permit, now removed.
    /// As [`RwMutex::release`](crate::RwMutex::release).
    ///
    /// # Errors
    ///
    /// As [`RwMutex::release`](crate::RwMutex::release); [`Error::InvalidLease`] when
    /// the lease is not a permit's.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves the permit returned or not.
    pub async fn release(&self, lease: &Lease) -> Result<bool, Error> {
        self.shared.release_lease(lease, Fit::Permit).await
    }

    /// Extends the permit a [`Lease`] names by this semaphore's TTL, under the lease's
    /// own id, without taking it over: `Ok(true)` when the id still held it. As
    /// [`RwMutex::renew`](crate::RwMutex::renew).
    ///
    /// # Errors
    ///
    /// As [`release`](Self::release).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves the permit renewed or not.
    pub async fn renew(&self, lease: &Lease) -> Result<bool, Error> {
        self.shared.renew_lease(lease, Fit::Permit).await
    }

    fn request(&self) -> Request<C> {
        // A count of 0 is refused by every request (`Settings::check`).
        let permits = self.shared.settings.product.permits().unwrap_or_default();
        Request::new(Arc::clone(&self.shared), Kind::Permit(permits))
    }

    /// The connection the semaphore was made with.
    pub fn connection(&self) -> &C {
        &self.shared.conn
    }

    /// The semaphore name: the semaphore key, or its prefix when a request sets a key.
    pub fn name(&self) -> &str {
        &self.shared.settings.name
    }

    /// How many holders this semaphore's requests allow at once.
    pub fn permits(&self) -> u32 {
        self.shared.settings.product.permits().unwrap_or_default()
    }

    /// How long a permit lives in Redis without a refresh.
    pub fn ttl(&self) -> Duration {
        self.shared.settings.ttl
    }

    /// Whether waiters are served in arrival order ([`Builder::fair`](crate::Builder::fair)).
    pub fn fair(&self) -> bool {
        self.shared.settings.fair
    }

    /// How long a fence key outlives the last acquisition of its semaphore key.
    pub fn fence_retention(&self) -> Duration {
        self.shared.settings.fence_retention
    }

    /// The notifier that wakes this semaphore's waiters, if it was built with one.
    pub fn notifier(&self) -> Option<&Notifier> {
        self.shared.settings.notifier.as_ref()
    }
}

impl<C> Clone for Semaphore<C> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<C> fmt::Debug for Semaphore<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("name", &self.shared.settings.name)
            .field("permits", &self.shared.settings.product.permits())
            .field("fair", &self.shared.settings.fair)
            .field("ttl", &self.shared.settings.ttl)
            .field("notifier", &self.shared.settings.notifier.is_some())
            .finish_non_exhaustive()
    }
}
