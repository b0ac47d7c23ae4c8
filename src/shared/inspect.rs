//! A handle's lock keys, checked as a request checks them, and the inspection of one.

use super::Shared;
use crate::error::Error;
use crate::lock_state::LockState;
use crate::protocol::inspect::Form;
use crate::protocol::keys::{check_key, check_slot, Keys};

impl<C> Shared<C> {
    /// The keys of the lock a request for `key` (or none) takes, with its fair queue's
    /// keys when `fair`, once its lock key passed the checks every request makes: a
    /// usable key ([`check_key`]), and one slot for all its keys on a Redis Cluster or
    /// with [`Builder::hash_tag_keys`](crate::Builder::hash_tag_keys) ([`check_slot`]).
    pub(crate) fn lock_keys(&self, key: Option<&str>, fair: bool) -> Result<Keys, Error> {
        let settings = &self.settings;
        let one_slot = settings.on_cluster() || settings.hash_tag_keys;
        Keys::of_request(&settings.name, key, settings.hash_tag_keys, fair, |lock| {
            check_key(lock)?;
            if one_slot {
                check_slot(lock)?;
            }
            Ok(())
        })
    }

    /// Reads the state of the lock a request for `key` takes (`""`: the name itself),
    /// kept as `form` says, through the handle's backend, within one TTL.
    pub(crate) async fn inspect(&self, key: &str, form: Form) -> Result<LockState, Error> {
        self.check_settings()?;
        // The queue's keys always: a handle that is not fair may inspect a fair one's lock.
        let keys = self.lock_keys(Some(key), true)?;
        let inspecting = self.refresher.inspect(&keys, form);
        match tokio::time::timeout(self.settings.ttl, inspecting).await {
            Ok(state) => state,
            Err(_) => Err(Error::Timeout),
        }
    }
}
