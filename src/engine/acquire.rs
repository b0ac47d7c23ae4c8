//! [`Engine::acquire`](super::Engine::acquire): a checked request's lease made on the
//! backend, the wait, and the lock handed to the refresher.

use tokio_util::sync::CancellationToken;

use crate::backend::Backend;
use crate::error::Error;
use crate::lease::acquisition::Acquisition;
use crate::lease::refresher::Refresher;
use crate::lease::HeldLease;
use crate::mode::Kind;
use crate::protocol::calls::{Call, NodeOrder, Queueing};
use crate::protocol::fences::Fences;
use crate::protocol::id::Id;
use crate::protocol::keys::Keys;
use crate::settings::Settings;
use crate::spawner::Spawner;
use crate::wait::{self, LeaseRequest, Patience, Taken};

/// One checked request, as a handle gives it to its engine.
#[derive(Debug)]
pub(crate) struct CheckedRequest<'a> {
    /// The handle's options, checked.
    pub(crate) settings: &'a Settings,
    pub(crate) fences: &'a Fences,
    pub(crate) kind: Kind,
    /// The keys of the lock, whose lock key is checked.
    pub(crate) keys: Keys,
    /// The fresh id the lock is taken under.
    pub(crate) id: Id,
    pub(crate) parent: Option<CancellationToken>,
    pub(crate) patience: Patience,
}

/// Makes the lease of `request` on `refresher`'s backend, waits for it, and hands the lock
/// to `refresher`, which keeps it from then on.
pub(super) async fn on<B: Backend>(
    refresher: &Refresher<B>,
    request: CheckedRequest<'_>,
) -> Result<Option<Acquisition>, Error> {
    let CheckedRequest {
        settings,
        fences,
        kind,
        keys,
        id,
        parent,
        patience,
    } = request;
    let call = Call {
        keys,
        id,
        ttl_ms: settings.ttl_ms(),
        fence_ms: settings.fence_ms(),
        // Fairness is decided here, once: a fair wait queues, a fair try never does.
        queue: Queueing::new(settings.fair, matches!(patience, Patience::Wait(_))),
        node_order: NodeOrder::default(),
        describe: settings.holder.clone(),
    };
    let lease = std::sync::Arc::new(HeldLease::new(
        std::sync::Arc::clone(refresher.backend()),
        call,
        kind,
    ));
    let spawner = Spawner::current(settings.tracker.clone());
    let taken = wait::run(LeaseRequest {
        lease,
        patience,
        parent: parent.as_ref(),
        settings,
        fences,
        spawner: &spawner,
    })
    .await?;
    Ok(taken.map(|taken| keep(refresher, taken, parent)))
}

/// The lock `taken`, handed to `refresher`, which renews it from now on; its token is a
/// child of `parent`.
fn keep<B: Backend>(
    refresher: &Refresher<B>,
    taken: Taken<B>,
    parent: Option<CancellationToken>,
) -> Acquisition {
    let Taken {
        lease,
        sent,
        token: fencing_token,
    } = taken;
    let mode = lease.kind.mode();
    let kept = refresher.keep(lease, sent, fencing_token, parent);
    Acquisition {
        liveness: kept.liveness_ref(),
        lease: kept,
        mode,
        fencing_token,
    }
}
