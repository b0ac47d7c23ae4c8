//! Requests on a reentrant mutex ([`Builder::reentrant`](crate::Builder::reentrant)): a
//! nested guard when the running task holds the lock, else a new lock, recorded.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tracing::Span;

use super::Request;
use crate::error::Error;
use crate::guard::AnyGuard;
use crate::lease::registry::Caller;
use crate::mode::{Kind, Mode};
use crate::spawner::Spawner;
use crate::wait::Patience;

/// A nested guard when the running task holds a live lock on the request's key (an error
/// for a write inside a read), else [`Request::take_new`], recording the guard it gives.
/// A nested guard's key and id (the outer guard's) go in `span`.
pub(super) async fn run<C>(
    request: Request<C>,
    patience: Patience,
    span: &Span,
) -> Result<Option<AnyGuard>, Error> {
    let registry = Arc::clone(&request.shared.registry);
    let (key, outer) = registry.find(request.lock_key(), Caller::current());
    if let Some(outer) = outer {
        span.record("key", key.as_str());
        span.record("id", outer.lease.id());
        // The lock's mode now: an outer write guard may have been downgraded since.
        if outer.lease.mode() == Mode::Read && request.kind == Kind::Write {
            return Err(Error::WouldDeadlock { key });
        }
        let parent = request.parent;
        if parent.as_ref().is_some_and(CancellationToken::is_cancelled) {
            return Err(Error::Cancelled);
        }
        let spawner = parent
            .as_ref()
            .map(|_| Spawner::current(request.shared.settings.tracker.clone()));
        return Ok(Some(AnyGuard::nested(
            &outer,
            request.kind.mode(),
            parent,
            spawner,
        )));
    }
    let Some(mut guard) = request.take_new(patience, span).await? else {
        return Ok(None);
    };
    // The task that completed the request: the one that awaited it.
    let registration = registry.register(key, Caller::current(), guard.as_outer());
    guard.registered(registration);
    Ok(Some(guard))
}
