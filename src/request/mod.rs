//! The requests that `write`, `read`, `try_write`, `try_read`, `acquire` and
//! `try_acquire` return: options, then await. A request checks its options and key and
//! hands them to the handle's [`Engine`](crate::engine::Engine), which makes the lease on
//! its backend, waits for the lock and has the refresher keep it; the request makes the
//! guard of what the engine took. On a reentrant mutex it first looks for a lock its
//! task holds.

mod acquire;
pub(crate) mod attach;
mod granted;
mod lock_all;
mod reentrant;
mod set;
mod try_acquire;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tracing::field::Empty;
use tracing::{Instrument, Span};

pub use self::acquire::Acquire;
pub use self::granted::Granted;
pub use self::lock_all::{LockAll, LockAllFuture, TryLockAll, TryLockAllFuture};
pub use self::set::MAX_SET_KEYS;
pub use self::try_acquire::TryAcquire;
use crate::engine::{CheckedRequest, Shared};
use crate::error::Error;
use crate::guard::AnyGuard;
use crate::mode::Kind;
use crate::observe::Outcome;
use crate::protocol::id::Id;
use crate::protocol::keys::lock_key;
use crate::wait::Patience;

/// The future of an [`Acquire`]: a [`WriteGuard`](crate::WriteGuard), a
/// [`ReadGuard`](crate::ReadGuard) or a semaphore's [`Permit`](crate::Permit), as `G`
/// says.
pub type AcquireFuture<G> = Pin<Box<dyn Future<Output = Result<G, Error>> + Send + 'static>>;

/// The future of a [`TryAcquire`]: the guard or permit `G`, if the lock or a permit was
/// free.
pub type TryAcquireFuture<G> =
    Pin<Box<dyn Future<Output = Result<Option<G>, Error>> + Send + 'static>>;

/// What both kinds of request share: the handle's shared state, the kind and the options.
pub(crate) struct Request<C> {
    pub(crate) shared: Arc<Shared<C>>,
    pub(crate) kind: Kind,
    pub(crate) key: Option<String>,
    pub(crate) parent: Option<CancellationToken>,
}

impl<C> Request<C> {
    pub(crate) fn new(shared: Arc<Shared<C>>, kind: Kind) -> Self {
        Self {
            shared,
            kind,
            key: None,
            parent: None,
        }
    }

    /// The lock key: the mutex name, or `<name>:<key>` for a non-empty key; with
    /// [`Builder::hash_tag_keys`](crate::Builder::hash_tag_keys), `{<name>}` or
    /// `<name>:{<key>}` when that has no hash tag of its own.
    pub(crate) fn lock_key(&self) -> String {
        let settings = &self.shared.settings;
        lock_key(&settings.name, self.key.as_deref(), settings.hash_tag_keys)
    }
}

impl<C> Request<C> {
    /// Takes what the request asks for: a nested guard or a new lock on a reentrant
    /// mutex, a new lock otherwise. `Ok(None)` only with [`Patience::Once`].
    ///
    /// The request runs in a span `acquire` (fields `kind`, `key`, `id`, and at its end
    /// `outcome` and `fencing_token`), and is timed in the handle's meters.
    pub(crate) async fn run(self, patience: Patience) -> Result<Option<AnyGuard>, Error> {
        let span = tracing::info_span!(
            "acquire",
            kind = self.kind.label(),
            key = Empty,
            id = Empty,
            outcome = Empty,
            fencing_token = Empty,
        );
        let timed = self.shared.meters.request(self.kind, patience.waits());
        let mut unfinished = Unfinished(Some(&span));
        // An upgradable read is never nested: it is a lock of its own.
        let nests = self.kind != Kind::Upgradable;
        let result = if nests && self.shared.settings.product.reentrant() {
            let run = reentrant::run(self, patience, &span);
            run.instrument(span.clone()).await
        } else {
            let run = self.take_new(patience, &span);
            run.instrument(span.clone()).await
        };
        let outcome = match &result {
            Ok(Some(guard)) => {
                span.record("fencing_token", guard.fencing_token());
                Outcome::Acquired
            }
            Ok(None) if patience.waits() => Outcome::Timeout,
            Ok(None) => Outcome::Busy,
            Err(Error::Timeout) => Outcome::Timeout,
            Err(Error::Cancelled) => Outcome::Cancelled,
            Err(_) => Outcome::Error,
        };
        unfinished.0 = None;
        span.record("outcome", outcome.label());
        timed.finish(outcome);
        result
    }

    /// Checks the options and the key, then takes a new lock under a fresh id through
    /// the handle's engine; the key and the id go in `span`.
    pub(super) async fn take_new(
        self,
        patience: Patience,
        span: &Span,
    ) -> Result<Option<AnyGuard>, Error> {
        let shared = &*self.shared;
        let settings = &shared.settings;
        shared.check_settings()?;
        if self.kind == Kind::Upgradable {
            settings.check_upgradable()?;
        }
        if self
            .parent
            .as_ref()
            .is_some_and(CancellationToken::is_cancelled)
        {
            return Err(Error::Cancelled);
        }
        let keys = settings.keys_of(self.key.as_deref(), settings.fair)?;
        let id = Id::new();
        span.record("key", keys.lock());
        span.record("id", id.as_str());
        let checked = CheckedRequest {
            settings,
            fences: &shared.fences,
            kind: self.kind,
            keys,
            id,
            parent: self.parent,
            patience,
        };
        let taken = shared.engine.acquire(checked).await?;
        Ok(taken.map(AnyGuard::owner))
    }
}

/// A request's span while the request runs: a request whose future is dropped first (an
/// aborted or panicking task, a `select!` or a timeout around it) ends with `outcome` =
/// `cancelled`, as its metric does.
struct Unfinished<'a>(Option<&'a Span>);

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        if let Some(span) = self.0 {
            span.record("outcome", Outcome::Cancelled.label());
        }
    }
}

impl<C> fmt::Debug for Request<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Request")
            .field("key", &self.lock_key())
            .field("kind", &self.kind)
            .field("parent", &self.parent.is_some())
            .finish_non_exhaustive()
    }
}
