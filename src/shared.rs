//! What a mutex or a semaphore handle shares with each of its requests.

use std::sync::Arc;

use crate::backend::Connection;
use crate::lease::registry::Registry;
use crate::protocol::fences::Fences;
use crate::settings::Settings;

/// The connection, the backend on it, the options, the record of checked fence keys and
/// the reentrancy registry of one [`RwMutex`](crate::RwMutex) or
/// [`Semaphore`](crate::Semaphore) and its clones.
#[derive(Debug)]
pub(crate) struct Shared<C> {
    /// The connection as the user gave it, for [`RwMutex::connection`](crate::RwMutex::connection).
    pub(crate) conn: C,
    pub(crate) backend: Arc<Connection<C>>,
    pub(crate) settings: Settings,
    pub(crate) fences: Fences,
    /// Which task holds which lock, for [`Builder::reentrant`](crate::Builder::reentrant);
    /// empty when it is off.
    pub(crate) registry: Arc<Registry>,
}

impl<C: Clone> Shared<C> {
    /// What a mutex or a semaphore made with `settings` on `conn` shares.
    pub(crate) fn new(conn: C, settings: Settings) -> Self {
        let hub = settings
            .notifier
            .as_ref()
            .map(|notifier| Arc::clone(&notifier.hub));
        Self {
            backend: Arc::new(Connection::new(conn.clone(), settings.cluster, hub)),
            conn,
            settings,
            fences: Fences::default(),
            registry: Arc::default(),
        }
    }
}
