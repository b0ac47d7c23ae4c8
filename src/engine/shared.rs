//! [`Shared`]: what a mutex or a semaphore handle shares with each of its requests,
//! its [`Engine`] among them.

use std::fmt;
use std::sync::Arc;

use redis::aio::ConnectionLike;

use super::{BackendEngine, Engine};
use crate::backend::{Backend, Direct, Majority, Quorum};
use crate::error::Error;
use crate::lease::refresher::Refresher;
use crate::lease::registry::Registry;
use crate::observe::Meters;
use crate::protocol::fences::Fences;
use crate::settings::Settings;

/// The connection, the refresher, the options, the record of checked fence keys and the
/// reentrancy registry of one [`RwMutex`](crate::RwMutex) or
/// [`Semaphore`](crate::Semaphore) and its clones.
pub(crate) struct Shared<C> {
    /// The connection as the user gave it, for
    /// [`RwMutex::connection`](crate::RwMutex::connection).
    pub(crate) conn: C,
    /// Where every operation of the handle runs, through the handle's backend; its
    /// refresher keeps the handle's locks.
    pub(crate) engine: Box<dyn Engine>,
    pub(crate) settings: Settings,
    pub(crate) fences: Fences,
    /// Which task holds which lock, for [`Builder::reentrant`](crate::Builder::reentrant);
    /// empty when it is off.
    pub(crate) registry: Arc<Registry>,
    /// Where the handle's requests, locks and renewals are counted (feature `metrics`).
    pub(crate) meters: Meters,
    /// Whether the settings passed [`Settings::check`] when the handle was made.
    settings_valid: bool,
}

impl<C> Shared<C> {
    /// What a handle made with `settings` on `conn` shares, running its operations on
    /// `engine` and counting them in `meters`.
    pub(crate) fn new(
        conn: C,
        settings: Settings,
        engine: Box<dyn Engine>,
        meters: Meters,
    ) -> Self {
        Self {
            conn,
            engine,
            meters,
            settings_valid: settings.check().is_ok(),
            settings,
            fences: Fences::default(),
            registry: Arc::default(),
        }
    }

    /// What a handle made with `settings` on `conn` shares, whose engine runs on
    /// `backend` and whose refresher keeps its locks.
    fn over<B: Backend>(conn: C, settings: Settings, backend: B, meters: Meters) -> Self {
        let refresher = Refresher::new(
            Arc::new(backend),
            settings.ttl,
            settings.tracker.clone(),
            meters.clone(),
        )
        .with_max_hold(settings.max_hold);
        let engine = Box::new(BackendEngine::new(refresher));
        Self::new(conn, settings, engine, meters)
    }

    /// [`Settings::check`]: the settings never change, so they are checked again (for
    /// the error) only when they did not pass when the handle was made.
    pub(crate) fn check_settings(&self) -> Result<(), Error> {
        if self.settings_valid {
            return Ok(());
        }
        self.settings.check()
    }
}

impl<C> Shared<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// What a handle on one redis-rs connection shares: its backend is a
    /// [`Direct`] to the settings' topology (one server or a Redis
    /// Cluster).
    pub(crate) fn on_connection(conn: C, settings: Settings) -> Self {
        let hub = settings
            .notifier
            .as_ref()
            .map(|notifier| Arc::clone(&notifier.hub));
        let backend = Direct::new(conn.clone(), settings.reach.topology(), hub)
            .acknowledged(settings.replicas);
        let meters = meters_of(&settings);
        Self::over(conn, settings, backend, meters)
    }
}

impl<C> Shared<Quorum<C>>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// What a handle over a quorum shares: its backend is
    /// [`Majority`], waking waiters through the settings'
    /// notifier (one made by `Notifier::quorum`).
    pub(crate) fn on_quorum(quorum: Quorum<C>, settings: Settings) -> Self {
        let hub = settings
            .notifier
            .as_ref()
            .map(|notifier| Arc::clone(&notifier.hub));
        let meters = meters_of(&settings);
        let backend = Majority::new(&quorum, hub, settings.tracker.clone(), meters.clone());
        Self::over(quorum, settings, backend, meters)
    }
}

/// The meters of a handle made with `settings`: labelled with its name if it asked.
fn meters_of(settings: &Settings) -> Meters {
    Meters::new(settings.name_label.then_some(settings.name.as_str()))
}

impl<C> fmt::Debug for Shared<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}
