//! What [`LockAll`](super::LockAll) and [`TryLockAll`](super::TryLockAll) share: the
//! set's keys and modes, their checks, and the hand-over to the handle's engine.

use std::collections::HashMap;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tracing::field::Empty;
use tracing::Instrument;

use crate::engine::{CheckedSet, Shared};
use crate::error::{Error, Preview};
use crate::guard::MultiGuard;
use crate::lease::registry::Caller;
use crate::mode::Mode;
use crate::observe::Outcome;
use crate::protocol::id::Id;
use crate::protocol::keys::Keys;
use crate::protocol::slot::slot;
use crate::wait::Patience;

pub use crate::protocol::check::MAX_SET_KEYS;

/// A set request's handle state, keys, modes and parent.
pub(crate) struct KeySet<C> {
    pub(crate) shared: Arc<Shared<C>>,
    /// Each key as the caller named it, with the mode to take it in, in order.
    pub(crate) parts: Vec<(String, Mode)>,
    pub(crate) parent: Option<CancellationToken>,
}

impl<C> KeySet<C> {
    pub(crate) fn new(shared: Arc<Shared<C>>) -> Self {
        Self {
            shared,
            parts: Vec::new(),
            parent: None,
        }
    }

    /// Adds `keys` to the set, each to be taken in `mode`.
    pub(crate) fn add<K: Into<String>>(&mut self, keys: impl IntoIterator<Item = K>, mode: Mode) {
        self.parts
            .extend(keys.into_iter().map(|key| (key.into(), mode)));
    }

    /// Takes the set: checks it, then takes every key through the handle's engine.
    /// `Ok(None)` only with [`Patience::Once`]. Runs in a span `acquire` (`kind` =
    /// `set`, `key` = the first lock key, `keys`, `id`, `outcome`), timed in the
    /// handle's meters under the `kind` label `set`.
    pub(crate) async fn run(self, patience: Patience) -> Result<Option<MultiGuard>, Error> {
        let span = tracing::info_span!(
            "acquire",
            kind = "set",
            key = Empty,
            keys = self.parts.len(),
            id = Empty,
            outcome = Empty,
        );
        let timed = self.shared.meters.request_set(patience.waits());
        let result = self.take(patience, &span).instrument(span.clone()).await;
        let outcome = match &result {
            Ok(Some(_)) => Outcome::Acquired,
            Ok(None) if patience.waits() => Outcome::Timeout,
            Ok(None) => Outcome::Busy,
            Err(Error::Timeout) => Outcome::Timeout,
            Err(Error::Cancelled) => Outcome::Cancelled,
            Err(_) => Outcome::Error,
        };
        span.record("outcome", outcome.label());
        timed.finish(outcome);
        result
    }

    async fn take(
        self,
        patience: Patience,
        span: &tracing::Span,
    ) -> Result<Option<MultiGuard>, Error> {
        let shared = &*self.shared;
        let settings = &shared.settings;
        shared.check_settings()?;
        settings.check_set()?;
        let keys = self.checked_keys()?;
        if self
            .parent
            .as_ref()
            .is_some_and(CancellationToken::is_cancelled)
        {
            return Err(Error::Cancelled);
        }
        self.check_reentrant(&keys)?;
        let id = Id::new();
        span.record("key", keys[0].1.lock());
        span.record("id", id.as_str());
        let token = self
            .parent
            .as_ref()
            .map_or_else(CancellationToken::new, CancellationToken::child_token);
        let checked = CheckedSet {
            settings,
            fences: &shared.fences,
            parts: keys
                .iter()
                .zip(&self.parts)
                .map(|((_, keys), (_, mode))| (keys.clone(), *mode))
                .collect(),
            id,
            parent: token.clone(),
            patience,
        };
        let Some(acquisitions) = shared.engine.acquire_set(checked).await? else {
            return Ok(None);
        };
        Ok(Some(MultiGuard::new(
            keys,
            acquisitions,
            token,
            self.parent,
        )))
    }

    /// Each key's lock keys, checked as a single lock's are, and the set as a whole: not
    /// empty, at most [`MAX_SET_KEYS`], no key named twice (nor read and written), and on
    /// a Redis Cluster (or with hash-tagged keys) every lock key in the first one's slot.
    fn checked_keys(&self) -> Result<Vec<(String, Keys)>, Error> {
        let settings = &self.shared.settings;
        let invalid = |key: &str, reason: String| Error::InvalidKey {
            key: key.to_owned(),
            reason,
        };
        if self.parts.is_empty() {
            return Err(invalid(&settings.name, "lock_all was given no key".into()));
        }
        if self.parts.len() > MAX_SET_KEYS {
            return Err(invalid(
                &settings.name,
                format!(
                    "lock_all was given {} keys; a set takes at most {MAX_SET_KEYS}",
                    self.parts.len()
                ),
            ));
        }
        let checked = self
            .parts
            .iter()
            .map(|(key, _)| Ok((key.clone(), settings.keys_of(Some(key), false)?)))
            .collect::<Result<Vec<(String, Keys)>, Error>>()?;
        let mut seen = HashMap::with_capacity(checked.len());
        for (at, (_, keys)) in checked.iter().enumerate() {
            if let Some(before) = seen.insert(keys.lock(), at) {
                let reason = if self.parts[before].1 != self.parts[at].1 {
                    "the set both reads and writes it; take it to write only"
                } else {
                    "the set names it twice"
                };
                return Err(invalid(keys.lock(), reason.into()));
            }
        }
        let one_slot = settings.on_cluster() || settings.hash_tag_keys;
        let first = checked[0].1.lock();
        if let Some((_, other)) = checked
            .iter()
            .find(|(_, keys)| one_slot && slot(keys.lock().as_bytes()) != slot(first.as_bytes()))
        {
            return Err(Error::CrossSlot {
                key: first.to_owned(),
                foreign: other.lock().to_owned(),
            });
        }
        Ok(checked)
    }

    /// On a reentrant mutex, refuses a set that would wait for a lock its own task holds:
    /// a key the task holds as a writer, or one it holds as a reader that the set writes.
    fn check_reentrant(&self, keys: &[(String, Keys)]) -> Result<(), Error> {
        let shared = &self.shared;
        if !shared.settings.product.reentrant() {
            return Ok(());
        }
        for ((_, keys), (_, mode)) in keys.iter().zip(&self.parts) {
            let lock = keys.lock().to_owned();
            let (key, outer) = shared.registry.find(lock, Caller::current());
            if let Some(outer) = outer {
                if *mode == Mode::Write || outer.lease.mode() == Mode::Write {
                    tracing::debug!(key = %Preview(&key), "lock_all would wait for its own task");
                    return Err(Error::WouldDeadlock { key });
                }
            }
        }
        Ok(())
    }
}
