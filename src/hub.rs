//! One process's subscriber connection and the waiters it wakes.

use std::fmt;
use std::sync::Arc;

/// Stub: filled in by the notification work.
pub(crate) struct Hub {
    client: redis::Client,
}

impl Hub {
    pub(crate) fn shared(client: redis::Client) -> Arc<Self> {
        Arc::new(Self { client })
    }
}

impl fmt::Debug for Hub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hub")
            .field("server", &self.client.get_connection_info().addr())
            .finish_non_exhaustive()
    }
}
