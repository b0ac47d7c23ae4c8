//! The backend on a Redis Cluster over one cluster connection.

use std::fmt;
use std::sync::Arc;

use redis::aio::ConnectionLike;

use super::Backend;
use crate::error::Error;
use crate::notify::hub::Hub;
use crate::protocol::calls::{self, Ask, Call, Hold, Leftovers};
use crate::protocol::replies::{Attempt, Downgraded, Unlocked};
use crate::protocol::topology::Topology;

/// A Redis Cluster: every call is one script on the node that serves the lock key's slot
/// (all keys of a lock carry one hash tag), every token is floored at the server clock,
/// since a failover can lose the fence key's last increments, so there is no write fast
/// path; releases are published by `SPUBLISH` in the slot. redis-rs's cluster client has
/// no response timeout of its own and retries through a failover: the callers' bounds
/// are what ends a call there.
pub(crate) struct Cluster<C> {
    conn: C,
    hub: Option<Arc<Hub>>,
}

impl<C> Cluster<C> {
    pub(crate) fn new(conn: C, hub: Option<Arc<Hub>>) -> Self {
        Self { conn, hub }
    }
}

impl<C> Backend for Cluster<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    async fn attempt(&self, call: &Call, ask: Ask) -> Result<Attempt, Error> {
        // The fast path's token would not be floored at the clock.
        let ask = match ask {
            Ask::FastWrite => Ask::Write { set_intent: false },
            other => other,
        };
        calls::attempt(&mut self.conn.clone(), call, Topology::Cluster, ask).await
    }

    async fn refresh(&self, call: &Call) -> Result<bool, Error> {
        calls::refresh(&mut self.conn.clone(), call).await
    }

    async fn release(
        &self,
        call: &Call,
        hold: Hold,
        leftovers: Leftovers,
    ) -> Result<Unlocked, Error> {
        let mut conn = self.conn.clone();
        calls::unlock(&mut conn, call, Topology::Cluster, hold, leftovers).await
    }

    async fn downgrade(&self, call: &Call) -> Result<Downgraded, Error> {
        calls::downgrade(&mut self.conn.clone(), call, Topology::Cluster).await
    }

    fn hub(&self) -> Option<&Arc<Hub>> {
        self.hub.as_ref()
    }

    fn fast_path(&self) -> bool {
        false
    }
}

impl<C> fmt::Debug for Cluster<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cluster")
            .field("notified", &self.hub.is_some())
            .finish_non_exhaustive()
    }
}
