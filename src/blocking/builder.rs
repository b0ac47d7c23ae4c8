//! [`Builder`]: the options of a blocking [`RwMutex`] or [`Semaphore`], and how one is
//! made: its background thread, its connection, its async handle.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::background::Background;
use super::{RwMutex, Semaphore};
use crate::engine::Shared;
use crate::error::Error;
use crate::notify::hub::Hub;
use crate::notify::Notifier;
use crate::protocol::acks::Acks;
use crate::settings::{Product, Settings};

/// How many times the connection is tried again after a failed attempt (each bounded by
/// redis-rs's 1 s connection timeout, the waits between them by its backoff of 100 ms,
/// doubling, jittered), when it is first made and after it dropped: so a dead server is
/// an error within about two seconds, never a hang.
const CONNECTION_RETRIES: usize = 1;

/// Configures a blocking [`RwMutex`] (made by [`RwMutex::builder`]) or, as
/// `Builder<Semaphore>`, a blocking [`Semaphore`] (made by [`Semaphore::builder`]). Each
/// option is the async [`Builder`](crate::Builder)'s of the same name.
///
/// # Default
///
/// As the async builder's: `ttl` 4 s, `fair` off, `lock_intent` off, `fence_retention`
/// 24 h, `max_hold` none, `replicas` off, `hash_tag_keys` off. Always on: a notifier for
/// the client's server, of the handle's own (one subscriber connection per handle, opened
/// when a request first waits; waiters are woken by the release, as the async API's with
/// a [`Notifier`]), and a task tracker, with which the background thread finishes
/// the releases in flight before it stops. A blocking handle speaks to one server over a
/// [`ConnectionManager`] (which reconnects after a dropped connection); for a Redis
/// Cluster, a quorum or Sentinel, use the async API.
#[must_use = "a builder does nothing until build() is called"]
pub struct Builder<T = RwMutex> {
    client: redis::Client,
    settings: Settings,
    made: PhantomData<fn() -> T>,
}

impl<T> Builder<T> {
    /// A builder for a handle named `name` over `client`'s server, making `product` (a
    /// mutex with its defaults, or a semaphore with its permit count).
    pub(super) fn new(client: redis::Client, name: String, product: Product) -> Self {
        let mut settings = Settings::for_connection::<ConnectionManager>(name);
        settings.product = product;
        Self {
            client,
            settings,
            made: PhantomData,
        }
    }

    /// Sets how long a lock lives in Redis without a refresh (default 4 s, at least
    /// 10 ms, at most 24 h); see [`Builder::ttl`](crate::Builder::ttl).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.settings.ttl = ttl;
        self
    }

    /// Serves waiters in arrival order across clients (default off); see
    /// [`Builder::fair`](crate::Builder::fair).
    pub fn fair(mut self, on: bool) -> Self {
        self.settings.fair = on;
        self
    }

    /// Sets how long the fence key outlives the last acquisition of its lock (default
    /// 24 h); see [`Builder::fence_retention`](crate::Builder::fence_retention).
    pub fn fence_retention(mut self, retention: Duration) -> Self {
        self.settings.fence_retention = retention;
        self
    }

    /// Caps how long a lock or permit is held (default: no cap); see
    /// [`Builder::max_hold`](crate::Builder::max_hold).
    pub fn max_hold(mut self, max_hold: Duration) -> Self {
        self.settings.max_hold = Some(max_hold);
        self
    }

    /// Puts a hash tag in every lock key (default off); see
    /// [`Builder::hash_tag_keys`](crate::Builder::hash_tag_keys).
    pub fn hash_tag_keys(mut self, on: bool) -> Self {
        self.settings.hash_tag_keys = on;
        self
    }

    /// Counts an acquisition and each refresh only once `n` replicas acknowledged it
    /// within `timeout` (default off); see [`Builder::replicas`](crate::Builder::replicas).
    pub fn replicas(mut self, n: usize, timeout: Duration) -> Self {
        self.settings.replicas = Some(Acks {
            replicas: n,
            timeout,
        });
        self
    }

    /// Records who holds each lock or permit, beside it in Redis (default off); see
    /// [`Builder::describe_holder`](crate::Builder::describe_holder).
    pub fn describe_holder(mut self, on: bool) -> Self {
        self.settings.describe_holder(on);
        self
    }

    /// Labels the holders' descriptions, and turns them on; see
    /// [`Builder::holder_label`](crate::Builder::holder_label).
    pub fn holder_label(mut self, label: impl Into<String>) -> Self {
        self.settings.holder_label = Some(label.into());
        self.settings.describe_holder(true);
        self
    }

    /// Adds the label `name` to every metric the handle records (default off); see
    /// [`Builder::name_label`](crate::Builder::name_label).
    #[cfg(feature = "metrics")]
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub fn name_label(mut self, on: bool) -> Self {
        self.settings.name_label = on;
        self
    }

    /// Checks the options, starts the background thread and connects; the async handle's
    /// shared state and the thread.
    fn start(self) -> Result<(Shared<ConnectionManager>, Arc<Background>), Error> {
        let Self {
            client,
            mut settings,
            ..
        } = self;
        settings.check()?;
        let background = Arc::new(Background::start(&settings.name)?);
        let config = ConnectionManagerConfig::new().set_number_of_retries(CONNECTION_RETRIES);
        let connect = ConnectionManager::new_with_config(client.clone(), config);
        let conn = background
            .block_on(connect)?
            .map_err(|err| Error::redis(&settings.name, err))?;
        // A notifier of the handle's own: its subscriber task runs on the handle's
        // runtime, which stops with the handle.
        settings.notifier = Some(Notifier {
            hub: Hub::own(client),
        });
        settings.tracker = Some(background.tracker().clone());
        let shared = background.enter(|| Shared::on_connection(conn, settings));
        Ok((shared, background))
    }
}

impl Builder<RwMutex> {
    /// Lets a writer that waits keep new readers out (default off); see
    /// [`Builder::lock_intent`](crate::Builder::lock_intent).
    pub fn lock_intent(mut self, on: bool) -> Self {
        // A mutex's builder makes a mutex (`RwMutex::builder`): the variant is always there.
        if let Product::Mutex { lock_intent, .. } = &mut self.settings.product {
            *lock_intent = on;
        }
        self
    }

    /// Checks the options, starts the handle's background thread and connects to the
    /// server.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidOptions`] as [`Builder::build`](crate::Builder::build) gives it;
    /// [`Error::Redis`] (or [`Error::Refused`]: a wrong password, say) when the server
    /// cannot be reached within about two seconds (redis-rs's 1 s connection timeout, one
    /// retry); [`Error::Background`] when the thread cannot be started;
    /// [`Error::InRuntime`] on a thread with a Tokio runtime context.
    pub fn build(self) -> Result<RwMutex, Error> {
        let (shared, background) = self.start()?;
        Ok(RwMutex::new(
            crate::RwMutex::from_shared(shared),
            background,
        ))
    }
}

impl Builder<Semaphore> {
    /// Checks the options, starts the handle's background thread and connects to the
    /// server.
    ///
    /// # Errors
    ///
    /// As for a mutex (see [`Builder::build`](Builder#method.build)), and
    /// [`Error::InvalidOptions`] for 0 permits.
    pub fn build(self) -> Result<Semaphore, Error> {
        let (shared, background) = self.start()?;
        Ok(Semaphore::new(
            crate::Semaphore::from_shared(shared),
            background,
        ))
    }
}

impl<T> fmt::Debug for Builder<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}
