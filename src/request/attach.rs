//! The attaches of a [`Lease`]: [`RwMutex::attach_write`](crate::RwMutex::attach_write),
//! [`attach_read`](crate::RwMutex::attach_read), [`attach_all`](crate::RwMutex::attach_all)
//! and [`Semaphore::attach`](crate::Semaphore::attach). The handle's engine takes the hold
//! over; the guard is made of what it gives, as an acquire's is: registered on a
//! reentrant mutex, in a span `attach`, timed in the handle's meters under the kind it
//! takes.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tracing::field::Empty;
use tracing::{Instrument, Span};

use crate::engine::{Fit, Shared};
use crate::error::Error;
use crate::guard::{AnyGuard, MultiGuard};
use crate::lease::portable::Lease;
use crate::lease::registry::Caller;
use crate::mode::Kind;
use crate::observe::Outcome;

/// Takes over the hold of `lease`, one key held as `fit` says (a writer, a reader or a
/// permit of a request of `kind`), and makes its guard.
pub(crate) async fn one<C>(
    shared: &Arc<Shared<C>>,
    lease: &Lease,
    fit: Fit,
    kind: Kind,
) -> Result<AnyGuard, Error> {
    let span = span(kind.label(), lease);
    let timed = shared.meters.request(kind, false);
    let attach = async {
        let acquisition = shared.attach(lease, fit, None).await?.pop();
        let Some(acquisition) = acquisition else {
            return Err(Error::Cancelled);
        };
        let mut guard = AnyGuard::owner(acquisition);
        Span::current().record("id", guard.id());
        if shared.settings.product.reentrant() {
            let key = guard.key().to_owned();
            let entry = shared
                .registry
                .register(key, Caller::current(), guard.as_outer());
            guard.registered(entry);
        }
        Ok(guard)
    };
    let result = attach.instrument(span.clone()).await;
    timed.finish(finish(&span, &result));
    result
}

/// Takes over the hold of `lease`, a set's (or a single lock's), and makes its
/// [`MultiGuard`], whose keys are named by their lock keys.
pub(crate) async fn set<C>(shared: &Arc<Shared<C>>, lease: &Lease) -> Result<MultiGuard, Error> {
    let span = span("set", lease);
    let timed = shared.meters.request_set(false);
    let attach = async {
        let token = CancellationToken::new();
        let acquisitions = shared
            .attach(lease, Fit::Locks, Some(token.clone()))
            .await?;
        if let Some(first) = acquisitions.first() {
            Span::current().record("id", first.lease.id());
        }
        let keys = acquisitions
            .iter()
            .map(|acquisition| {
                let key = acquisition.lease.key();
                Ok((key.to_owned(), shared.settings.keys_of_lock(key)?))
            })
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(MultiGuard::new(keys, acquisitions, token, None))
    };
    let result = attach.instrument(span.clone()).await;
    timed.finish(finish(&span, &result));
    result
}

/// The span of an attach of `lease` that takes `kind` (`id`, the new id, is recorded once
/// known; `outcome` at the end).
fn span(kind: &str, lease: &Lease) -> Span {
    tracing::info_span!(
        "attach",
        kind,
        key = lease.lock_keys().next().unwrap_or_default(),
        lease = lease.id(),
        id = Empty,
        outcome = Empty,
    )
}

/// How the attach ended, recorded in `span`, for the request's timing.
fn finish<T>(span: &Span, result: &Result<T, Error>) -> Outcome {
    let outcome = match result {
        Ok(_) => Outcome::Acquired,
        Err(Error::Timeout) => Outcome::Timeout,
        Err(Error::Cancelled) => Outcome::Cancelled,
        Err(_) => Outcome::Error,
    };
    span.record("outcome", outcome.label());
    outcome
}
