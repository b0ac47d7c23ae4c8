//! The backend on one Redis server (or a primary with replicas) over one connection.

use std::fmt;
use std::sync::Arc;

use redis::aio::ConnectionLike;

use super::Backend;
use crate::error::Error;
use crate::notify::hub::Hub;
use crate::protocol::calls::{self, Ask, Call, Hold, Leftovers};
use crate::protocol::replies::{Attempt, Downgraded, Unlocked};
use crate::protocol::topology::Topology;

/// One server: every call is one script (or the write fast path's pipeline) on a clone of
/// the connection; releases are published by `PUBLISH`. Its time is bounded by the
/// connection's response timeout and by the callers.
pub(crate) struct Single<C> {
    conn: C,
    hub: Option<Arc<Hub>>,
}

impl<C> Single<C> {
    pub(crate) fn new(conn: C, hub: Option<Arc<Hub>>) -> Self {
        Self { conn, hub }
    }
}

impl<C> Backend for Single<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    async fn attempt(&self, call: &Call, ask: Ask) -> Result<Attempt, Error> {
        calls::attempt(&mut self.conn.clone(), call, Topology::Server, ask).await
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
        calls::unlock(&mut conn, call, Topology::Server, hold, leftovers).await
    }

    async fn downgrade(&self, call: &Call) -> Result<Downgraded, Error> {
        calls::downgrade(&mut self.conn.clone(), call, Topology::Server).await
    }

    fn hub(&self) -> Option<&Arc<Hub>> {
        self.hub.as_ref()
    }

    fn fast_path(&self) -> bool {
        true
    }
}

impl<C> fmt::Debug for Single<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Single")
            .field("notified", &self.hub.is_some())
            .finish_non_exhaustive()
    }
}
