//! [`Engine::release_lease`](super::Engine::release_lease) and
//! [`Engine::renew_lease`](super::Engine::renew_lease): a [`Lease`]'s hold released, or
//! renewed with this handle's TTL, under the lease's own id, by the backend's
//! [`release`](Backend::release) and [`renew`](Backend::renew) with a [`Call`] made of
//! the lease; nothing is taken over.

use super::attach::Fit;
use super::Shared;
use crate::backend::Backend;
use crate::error::Error;
use crate::lease::portable::Lease;
use crate::protocol::calls::{Call, Holder, Leftovers, NodeOrder, Queueing, Renewal};

/// One key of a lease's hold, as its release or renewal sends it: the call (the lease's
/// id, this handle's TTL) and the form the id holds the key in.
pub(crate) type HoldKey = (Call, Holder);

/// Removes the id of each of `hold`'s keys through `backend`, each in its form, all at
/// once; this process's waiters are woken where a release was published. True when the
/// id held every key (each is now released); a key it did not hold is not changed. The
/// first error, once every release has ended.
pub(super) async fn release<B: Backend>(backend: &B, hold: Vec<HoldKey>) -> Result<bool, Error> {
    let releases = hold
        .iter()
        .map(|(call, holder)| backend.release(call, *holder, Leftovers::NONE));
    let released = futures_util::future::join_all(releases).await;
    let mut held = true;
    let mut first_error = None;
    for ((call, _), unlocked) in hold.iter().zip(released) {
        match unlocked {
            Ok(unlocked) => {
                held &= unlocked.held;
                if let (true, Some(hub)) = (unlocked.published, backend.hub()) {
                    hub.released(call.keys.lock(), &call.id);
                }
            }
            Err(err) => {
                first_error.get_or_insert(err);
            }
        }
    }
    tracing::info!(key = %hold.first().map_or("", |(call, _)| call.keys.lock()), held, "lease released");
    first_error.map_or(Ok(held), Err)
}

/// Extends each of `hold`'s keys by the calls' TTL under the lease's id, through
/// `backend`: one batch when the keys share a batch tag, else one per key. True when the
/// id held every key (each held one is extended); the first error otherwise.
pub(super) async fn renew<B: Backend>(backend: &B, hold: Vec<HoldKey>) -> Result<bool, Error> {
    let renewals: Vec<Renewal<'_>> = hold
        .iter()
        .map(|(call, holder)| Renewal {
            call,
            writer: *holder == Holder::Writer,
            upgradable: false,
            retake: None,
        })
        .collect();
    let one_batch = renewals
        .windows(2)
        .all(|pair| backend.batch_tag(pair[0].call) == backend.batch_tag(pair[1].call));
    let results = if one_batch {
        backend.renew(&renewals).await.results
    } else {
        let each = renewals.chunks(1).map(|item| backend.renew(item));
        let renewed = futures_util::future::join_all(each).await;
        renewed
            .into_iter()
            .flat_map(|renewed| renewed.results)
            .collect()
    };
    results
        .into_iter()
        .try_fold(true, |all, held| Ok(all & held?))
}

impl<C> Shared<C> {
    /// Releases the hold of `lease` (which must fit `fit`) under its own id: true when
    /// it held every key. Checked as an attach is (nothing sent when that fails);
    /// bounded by the TTL ([`Error::Timeout`] after it).
    pub(crate) async fn release_lease(&self, lease: &Lease, fit: Fit) -> Result<bool, Error> {
        let hold = self.hold_of(lease, fit)?;
        let releasing = self.engine.release_lease(hold);
        tokio::time::timeout(self.settings.ttl, releasing)
            .await
            .unwrap_or(Err(Error::Timeout))
    }

    /// Extends the hold of `lease` (which must fit `fit`) by this handle's TTL under its
    /// own id, without taking it over: true when it held every key. Checked and bounded
    /// as [`release_lease`](Self::release_lease).
    pub(crate) async fn renew_lease(&self, lease: &Lease, fit: Fit) -> Result<bool, Error> {
        let hold = self.hold_of(lease, fit)?;
        let renewing = self.engine.renew_lease(hold);
        tokio::time::timeout(self.settings.ttl, renewing)
            .await
            .unwrap_or(Err(Error::Timeout))
    }

    /// The calls of `lease`'s hold under its own id and this handle's TTL, once the
    /// settings and the lease are checked.
    fn hold_of(&self, lease: &Lease, fit: Fit) -> Result<Vec<HoldKey>, Error> {
        self.check_settings()?;
        let settings = &self.settings;
        Ok(self
            .lease_keys(lease, fit)?
            .into_iter()
            .map(|key| {
                let call = Call {
                    keys: key.keys,
                    id: lease.raw_id(),
                    ttl_ms: settings.ttl_ms(),
                    fence_ms: settings.fence_ms(),
                    queue: Queueing::Off,
                    node_order: NodeOrder::default(),
                    // Whoever took the hold may have described it: a release deletes the
                    // id's description, a renewal keeps the holders key's PTTL up (on a
                    // key nobody described, neither changes anything). No description of
                    // this process is written: the text is never sent.
                    describe: Some(settings.holder.clone().unwrap_or_default()),
                };
                (call, key.holder)
            })
            .collect())
    }
}
