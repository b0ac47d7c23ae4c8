//! The forced release of a handle's lock ([`RwMutex::force_unlock`],
//! [`Semaphore::force_unlock`]): every holder removed at once through the handle's
//! backend, and this process's waiters woken.
//!
//! [`RwMutex::force_unlock`]: crate::RwMutex::force_unlock
//! [`Semaphore::force_unlock`]: crate::Semaphore::force_unlock

use super::Shared;
use crate::backend::Backend;
use crate::error::Error;
use crate::protocol::calls::{Call, NodeOrder, Queueing};
use crate::protocol::id::Id;

impl<C> Shared<C> {
    /// Removes every holder of the lock a request for `key` takes (`""`: the name
    /// itself), checked as a request checks it; true when something was held. Bounded by
    /// the TTL, as an inspection is ([`Error::Timeout`] after it).
    pub(crate) async fn force_unlock(&self, key: &str) -> Result<bool, Error> {
        self.check_settings()?;
        let settings = &self.settings;
        let call = Call {
            keys: settings.keys_of(Some(key), settings.fair)?,
            // Published on the release channel: it names no holder, and lets this
            // process skip the message when it comes back.
            id: Id::new(),
            ttl_ms: settings.ttl_ms(),
            fence_ms: settings.fence_ms(),
            queue: Queueing::Off,
            node_order: NodeOrder::default(),
            describe: None,
        };
        let forcing = self.engine.force_unlock(call);
        tokio::time::timeout(settings.ttl, forcing)
            .await
            .unwrap_or(Err(Error::Timeout))
    }
}

/// Sends `call`'s forced release through `backend`; when it was published, wakes this
/// process's waiters on the lock now, as a release made here does.
pub(super) async fn on<B: Backend>(backend: &B, call: Call) -> Result<bool, Error> {
    let forced = backend.force_unlock(&call).await?;
    if forced.published {
        if let Some(hub) = backend.hub() {
            hub.released(call.keys.lock(), &call.id);
        }
    }
    tracing::info!(
        key = %call.keys.lock(),
        held = forced.held,
        "lock released by force"
    );
    Ok(forced.held)
}
