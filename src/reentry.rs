//! Reentrancy ([`Builder::reentrant`](crate::Builder::reentrant)): which task holds
//! which lock of a mutex, so that the holder can take it again as a nested guard.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::thread::ThreadId;

use redis::aio::ConnectionLike;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::acquire::{self, Patience};
use crate::error::Error;
use crate::guard::Guard;
use crate::lease::Held;
use crate::mode::Mode;
use crate::request::{AcquireFuture, Request, TryAcquireFuture};
use crate::spawner::Spawner;
use crate::status::Status;

/// Who holds a guard: the tokio task that awaited the request, or outside any task (the
/// future given to `block_on`, which always runs on its own thread) that thread. A task
/// and a thread never compare equal, even when the task runs on that thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Holder {
    Task(tokio::task::Id),
    Thread(ThreadId),
}

impl Holder {
    /// The task (or, outside any task, the thread) running now.
    pub(crate) fn current() -> Self {
        match tokio::task::try_id() {
            Some(id) => Self::Task(id),
            None => Self::Thread(std::thread::current().id()),
        }
    }
}

/// What a nested guard shares with the outermost guard of its task on a lock key.
#[derive(Clone)]
pub(crate) struct Outer {
    pub(crate) lease: Arc<dyn Held>,
    pub(crate) mode: Mode,
    pub(crate) fencing_token: u64,
    pub(crate) token: CancellationToken,
    pub(crate) status: Arc<Status>,
}

impl Outer {
    /// Whether its lock may still be held: its token has not fired and its deadline has
    /// not passed. Looks only; fires nothing.
    fn live(&self) -> bool {
        !self.token.is_cancelled() && Instant::now() < self.status.deadline()
    }
}

impl fmt::Debug for Outer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Outer")
            .field("key", &self.lease.key())
            .field("id", &self.lease.id())
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
struct Entry {
    outer: Outer,
    /// Which registration made it, so that an older guard going does not remove the
    /// entry of a newer one.
    serial: u64,
}

/// The outermost guards of one mutex that may be nested into, by lock key and holder.
///
/// An entry is added when a request acquires the lock in Redis and removed when its
/// guard goes (unlock or drop). Once the guard's token has fired, the entry is ignored
/// (and dropped by the next look at it), and the next acquisition replaces it. The map
/// is locked for a lookup or an update only, never across an await.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    entries: Mutex<HashMap<(String, Holder), Entry>>,
    serial: AtomicU64,
}

impl Registry {
    /// The live outermost guard `holder` holds on `key`, if any; `key` is handed back.
    fn find(&self, key: String, holder: Holder) -> (String, Option<Outer>) {
        let probe = (key, holder);
        let mut entries = self.lock();
        let found = match entries.get(&probe) {
            Some(entry) if entry.outer.live() => Some(entry.outer.clone()),
            Some(_) => {
                entries.remove(&probe);
                None
            }
            None => None,
        };
        drop(entries);
        (probe.0, found)
    }

    /// Records `outer` as what `holder` holds on `key`, replacing an older entry; the
    /// returned registration removes it when dropped.
    fn register(self: &Arc<Self>, key: String, holder: Holder, outer: Outer) -> Registration {
        let serial = self.serial.fetch_add(1, Ordering::Relaxed);
        self.lock()
            .insert((key.clone(), holder), Entry { outer, serial });
        Registration {
            registry: Arc::downgrade(self),
            key,
            holder,
            serial,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<(String, Holder), Entry>> {
        // Nothing panics while holding it; a poisoned map is still a valid map.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

/// An outermost guard's entry in its mutex's [`Registry`]; removes it when dropped with
/// the guard, unless a newer acquisition has replaced it.
#[derive(Debug)]
pub(crate) struct Registration {
    registry: Weak<Registry>,
    key: String,
    holder: Holder,
    serial: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let Some(registry) = self.registry.upgrade() else {
            return;
        };
        let probe = (std::mem::take(&mut self.key), self.holder);
        let mut entries = registry.lock();
        if entries
            .get(&probe)
            .is_some_and(|entry| entry.serial == self.serial)
        {
            entries.remove(&probe);
        }
    }
}

/// [`RwMutex::write`](crate::RwMutex::write) and [`RwMutex::read`](crate::RwMutex::read)
/// on a reentrant mutex.
pub(crate) fn wait<C>(request: Request<C>, patience: Patience) -> AcquireFuture
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    // Waiting ends with a guard or an error; `None` comes only from a single attempt.
    Box::pin(async move { run(request, patience).await?.ok_or(Error::Timeout) })
}

/// [`RwMutex::try_write`](crate::RwMutex::try_write) and
/// [`RwMutex::try_read`](crate::RwMutex::try_read) on a reentrant mutex.
pub(crate) fn attempt<C>(request: Request<C>) -> TryAcquireFuture
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    Box::pin(run(request, Patience::Once))
}

/// A nested guard when the running task holds a live lock on the request's key (an
/// error for a write inside a read), else [`acquire::run`], recording the guard it
/// gives.
async fn run<C>(request: Request<C>, patience: Patience) -> Result<Option<Guard>, Error>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    let registry = Arc::clone(&request.inner.reentry);
    let (key, outer) = registry.find(request.lock_key(), Holder::current());
    if let Some(outer) = outer {
        // The lock's mode now: an outer write guard may have been downgraded since.
        if outer.lease.mode() == Mode::Read && request.mode == Mode::Write {
            return Err(Error::WouldDeadlock { key });
        }
        let parent = request.parent;
        if parent.as_ref().is_some_and(CancellationToken::is_cancelled) {
            return Err(Error::Cancelled);
        }
        let spawner = parent
            .as_ref()
            .map(|_| Spawner::current(request.inner.settings.tracker.clone()));
        return Ok(Some(Guard::nested(&outer, request.mode, parent, spawner)));
    }
    let Some(mut guard) = acquire::run(request, patience).await? else {
        return Ok(None);
    };
    // The task that completed the request: the one that awaited it.
    let registration = registry.register(key, Holder::current(), guard.outer());
    guard.registered(registration);
    Ok(Some(guard))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    struct Fake;

    impl Held for Fake {
        fn key(&self) -> &str {
            "k"
        }
        fn id(&self) -> &str {
            "id"
        }
        fn mode(&self) -> Mode {
            Mode::Write
        }
        fn validity(&self) -> Duration {
            Duration::from_secs(60)
        }
        fn release(
            &self,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<bool, Error>> + Send + '_>>
        {
            Box::pin(async { Ok(true) })
        }
        fn downgrade(
            &self,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<bool, Error>> + Send + '_>>
        {
            Box::pin(async { Ok(true) })
        }
    }

    fn outer(token: &CancellationToken) -> Outer {
        let now = Instant::now();
        Outer {
            lease: Arc::new(Fake),
            mode: Mode::Write,
            fencing_token: 7,
            token: token.clone(),
            status: Arc::new(Status::new(None, now, now + Duration::from_secs(60))),
        }
    }

    #[tokio::test]
    async fn entries_go_with_their_registration_and_never_take_a_newer_one_along() {
        let registry = Arc::new(Registry::default());
        let me = Holder::current();
        let (old, new) = (CancellationToken::new(), CancellationToken::new());
        let first = registry.register("k".into(), me, outer(&old));
        assert!(registry.find("k".into(), me).1.is_some());
        assert!(
            registry.find("other".into(), me).1.is_none(),
            "keyed by lock key"
        );
        let elsewhere = std::thread::spawn(Holder::current).join().unwrap();
        assert!(
            registry.find("k".into(), elsewhere).1.is_none(),
            "keyed by holder"
        );

        old.cancel();
        assert!(registry.find("k".into(), me).1.is_none(), "a fired token");
        assert_eq!(registry.len(), 0, "a fired entry is dropped when seen");
        let second = registry.register("k".into(), me, outer(&new));
        drop(first);
        assert!(
            registry.find("k".into(), me).1.is_some(),
            "the older guard left the newer entry"
        );
        drop(second);
        assert_eq!(registry.len(), 0);
    }

    #[test]
    fn a_thread_outside_any_task_is_not_a_task_on_it() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let (outside, inside) = runtime.block_on(async {
            let inside = tokio::spawn(async { Holder::current() });
            (Holder::current(), inside.await.unwrap())
        });
        assert!(matches!(outside, Holder::Thread(id) if id == std::thread::current().id()));
        assert!(matches!(inside, Holder::Task(_)), "{inside:?}");
    }
}
