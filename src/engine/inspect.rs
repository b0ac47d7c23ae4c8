//! [`Engine::inspect`](super::Engine::inspect): the inspection of one of a handle's locks.

use super::Shared;
use crate::error::Error;
use crate::lock_state::LockState;
use crate::protocol::inspect::Form;

impl<C> Shared<C> {
    /// Reads the state of the lock a request for `key` takes (`""`: the name itself),
    /// kept as `form` says, through the handle's backend, within one TTL.
    pub(crate) async fn inspect(&self, key: &str, form: Form) -> Result<LockState, Error> {
        self.check_settings()?;
        // The queue's keys always: a handle that is not fair may inspect a fair one's lock.
        let keys = self.settings.keys_of(Some(key), true)?;
        let inspecting = self.engine.inspect(&keys, form);
        match tokio::time::timeout(self.settings.ttl, inspecting).await {
            Ok(state) => state,
            Err(_) => Err(Error::Timeout),
        }
    }
}
