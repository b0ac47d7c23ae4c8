//! [`Engine::leader`](super::Engine::leader): who leads the election on a handle's lock,
//! read through the handle's backend.

use super::Shared;
use crate::backend::Backend;
use crate::error::Error;
use crate::protocol::calls::{Call, NodeOrder, Queueing};
use crate::protocol::id::Id;
use crate::protocol::leader::LeaderRead;

impl<C> Shared<C> {
    /// Reads the leader of the election on the handle's name (its lock key), in one
    /// read that writes nothing; bounded by the TTL ([`Error::Timeout`] after it).
    pub(crate) async fn leader(&self) -> Result<LeaderRead, Error> {
        self.check_settings()?;
        let settings = &self.settings;
        let call = Call {
            keys: settings.keys_of(None, false)?,
            // Sent nowhere: a read names no holder.
            id: Id::new(),
            ttl_ms: settings.ttl_ms(),
            fence_ms: settings.fence_ms(),
            queue: Queueing::Off,
            node_order: NodeOrder::default(),
            describe: None,
        };
        let reading = self.engine.leader(call);
        tokio::time::timeout(settings.ttl, reading)
            .await
            .unwrap_or(Err(Error::Timeout))
    }
}

/// Reads the leader at `call`'s lock key through `backend`.
pub(super) async fn on<B: Backend>(backend: &B, call: Call) -> Result<LeaderRead, Error> {
    backend.leader(&call).await
}
