//! [`Engine::acquire_set`](super::Engine::acquire_set): a checked set's leases made on the
//! backend (one per key, one id), the set's wait, and each lock handed to the refresher.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::backend::Backend;
use crate::error::Error;
use crate::lease::acquisition::Acquisition;
use crate::lease::refresher::Refresher;
use crate::lease::HeldLease;
use crate::mode::{Kind, Mode};
use crate::protocol::calls::{Call, NodeOrder, Queueing};
use crate::protocol::fences::Fences;
use crate::protocol::id::Id;
use crate::protocol::keys::Keys;
use crate::settings::Settings;
use crate::spawner::Spawner;
use crate::wait::set::{self, SetRequest, TakenSet};
use crate::wait::Patience;

/// One checked set request, as a handle gives it to its engine.
#[derive(Debug)]
pub(crate) struct CheckedSet<'a> {
    /// The handle's options, checked (never fair).
    pub(crate) settings: &'a Settings,
    pub(crate) fences: &'a Fences,
    /// The keys of each lock of the set (lock keys checked, distinct, and on a cluster
    /// in one slot) and the mode it is taken in; not empty.
    pub(crate) parts: Vec<(Keys, Mode)>,
    /// The fresh id every key is taken under.
    pub(crate) id: Id,
    /// The set's token: cancelling it ends the wait, and each key's token is its child.
    pub(crate) parent: CancellationToken,
    pub(crate) patience: Patience,
}

/// Makes one lease per key of `request` on `refresher`'s backend, waits until one attempt
/// takes them all, and hands each lock to `refresher`: the acquisitions in the set's
/// order.
pub(super) async fn on<B: Backend>(
    refresher: &Refresher<B>,
    request: CheckedSet<'_>,
) -> Result<Option<Vec<Acquisition>>, Error> {
    let CheckedSet {
        settings,
        fences,
        parts,
        id,
        parent,
        patience,
    } = request;
    let waits = patience.waits();
    let set_intent = waits
        && settings.product.lock_intent()
        && parts.iter().any(|(_, mode)| *mode == Mode::Write);
    let leases = parts
        .into_iter()
        .map(|(keys, mode)| {
            let call = Call {
                keys,
                id,
                ttl_ms: settings.ttl_ms(),
                fence_ms: settings.fence_ms(),
                queue: Queueing::Off,
                node_order: NodeOrder::default(),
                describe: settings.holder.clone(),
            };
            let kind = match mode {
                Mode::Write => Kind::Write,
                Mode::Read => Kind::Read,
            };
            Arc::new(HeldLease::new(Arc::clone(refresher.backend()), call, kind))
        })
        .collect();
    let spawner = Spawner::current(settings.tracker.clone());
    let taken = set::run(SetRequest {
        leases,
        patience,
        parent: Some(&parent),
        set_intent,
        fences,
        spawner: &spawner,
    })
    .await?;
    Ok(taken.map(|taken| keep(refresher, taken, &parent)))
}

/// Each lock of the set `taken`, handed to `refresher`, which renews it from now on (all
/// from the same send time, so their renewals fall due together and share a batch); each
/// token is a child of `parent`.
fn keep<B: Backend>(
    refresher: &Refresher<B>,
    taken: TakenSet<B>,
    parent: &CancellationToken,
) -> Vec<Acquisition> {
    let TakenSet {
        leases,
        sent,
        tokens,
    } = taken;
    leases
        .into_iter()
        .zip(tokens)
        .map(|(lease, fencing_token)| {
            let mode = lease.kind.mode();
            let kept = refresher.keep(lease, sent, fencing_token, Some(parent.clone()));
            Acquisition {
                liveness: kept.liveness_ref(),
                lease: kept,
                mode,
                fencing_token,
            }
        })
        .collect()
}
