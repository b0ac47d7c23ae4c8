//! A refresher seen without its backend's type: how a handle takes a lock through
//! whichever [`Backend`] it was made with, and has it kept by the refresher of that
//! backend's locks, so that the handles and the requests are the same for every backend.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::acquire::{self, LeaseRequest, Patience};
use crate::backend::Backend;
use crate::error::Error;
use crate::guard::AnyGuard;
use crate::lease::refresher::Refresher;
use crate::lease::Lease;
use crate::lock_state::LockState;
use crate::mode::Kind;
use crate::protocol::calls::{Call, NodeOrder, Queueing};
use crate::protocol::fences::Fences;
use crate::protocol::id::Id;
use crate::protocol::inspect::Form;
use crate::protocol::keys::Keys;
use crate::protocol::leader::LeaderRead;
use crate::settings::Settings;
use crate::spawner::Spawner;

/// One checked request, as a handle gives it to its refresher.
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

/// The boxed future of [`AnyRefresher::acquire`].
pub(crate) type Acquiring<'a> =
    Pin<Box<dyn Future<Output = Result<Option<AnyGuard>, Error>> + Send + 'a>>;

/// The boxed future of [`AnyRefresher::inspect`].
pub(crate) type Inspecting<'a> =
    Pin<Box<dyn Future<Output = Result<LockState, Error>> + Send + 'a>>;

/// The refresher of a handle's locks, over a [`Backend`] of any type, as a handle holds
/// it.
pub(crate) trait AnyRefresher: Send + Sync {
    /// Takes the lock `request` asks for under a fresh id, through the backend, and makes
    /// its guard. `Ok(None)` only with [`Patience::Once`].
    fn acquire<'a>(self: Arc<Self>, request: CheckedRequest<'a>) -> Acquiring<'a>;

    /// Reads the state of the lock at `keys` through the backend ([`Backend::inspect`]).
    fn inspect<'a>(&'a self, keys: &'a Keys, form: Form) -> Inspecting<'a>;
    /// Removes every holder of `call`'s lock through the backend and wakes this
    /// process's waiters on it (see `shared/force.rs`): true when something was held.
    fn force_unlock(self: Arc<Self>, call: Call) -> Forcing;
    /// Reads who leads the election at `call`'s lock key through the backend
    /// ([`Backend::leader`]).
    fn leader(self: Arc<Self>, call: Call) -> Reading;
}

/// The boxed future of [`AnyRefresher::leader`].
pub(crate) type Reading = Pin<Box<dyn Future<Output = Result<LeaderRead, Error>> + Send>>;

/// The boxed future of [`AnyRefresher::force_unlock`].
pub(crate) type Forcing = Pin<Box<dyn Future<Output = Result<bool, Error>> + Send>>;

impl<B: Backend> AnyRefresher for Refresher<B> {
    fn acquire<'a>(self: Arc<Self>, request: CheckedRequest<'a>) -> Acquiring<'a> {
        Box::pin(acquire_on(self, request))
    }

    fn inspect<'a>(&'a self, keys: &'a Keys, form: Form) -> Inspecting<'a> {
        Box::pin(self.backend().inspect(keys, form))
    }

    fn force_unlock(self: Arc<Self>, call: Call) -> Forcing {
        Box::pin(super::force::force_on(Arc::clone(self.backend()), call))
    }

    fn leader(self: Arc<Self>, call: Call) -> Reading {
        let backend = Arc::clone(self.backend());
        Box::pin(async move { backend.leader(&call).await })
    }
}

/// Makes the lease of `request` on the refresher's backend, runs the engine, and hands the
/// lock to the refresher in a guard.
async fn acquire_on<B: Backend>(
    refresher: Arc<Refresher<B>>,
    request: CheckedRequest<'_>,
) -> Result<Option<AnyGuard>, Error> {
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
    };
    let backend = Arc::clone(refresher.backend());
    let lease = Arc::new(Lease::new(backend, call, kind));
    let spawner = Spawner::current(settings.tracker.clone());
    let acquired = acquire::run(LeaseRequest {
        lease,
        patience,
        parent: parent.as_ref(),
        settings,
        fences,
        spawner: &spawner,
    })
    .await?;
    Ok(acquired.map(|acquired| AnyGuard::start(acquired, parent, &refresher)))
}
