//! The reentrancy registry ([`Builder::reentrant`](crate::Builder::reentrant)): which
//! task holds which lock of a mutex, so that the holder can take it again as a nested
//! guard.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::thread::ThreadId;

use super::acquisition::Acquisition;
use crate::util;

/// Who holds a guard: the tokio task that awaited the request, or outside any task (the
/// future given to `block_on`, which always runs on its own thread) that thread. A task
/// and a thread never compare equal, even when the task runs on that thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Caller {
    Task(tokio::task::Id),
    Thread(ThreadId),
}

impl Caller {
    /// The task (or, outside any task, the thread) running now.
    pub(crate) fn current() -> Self {
        match tokio::task::try_id() {
            Some(id) => Self::Task(id),
            None => Self::Thread(std::thread::current().id()),
        }
    }
}

/// The registry's entry for one outer guard.
#[derive(Debug)]
struct Entry {
    outer: Acquisition,
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
    entries: Mutex<HashMap<(String, Caller), Entry>>,
    serial: AtomicU64,
}

impl Registry {
    /// The live outermost guard `caller` holds on `key`, if any; `key` is handed back.
    pub(crate) fn find(&self, key: String, caller: Caller) -> (String, Option<Acquisition>) {
        let probe = (key, caller);
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

    /// Records `outer` as the guard `caller` holds on `key`, replacing an older entry; the
    /// returned registration removes it when dropped.
    pub(crate) fn register(
        self: &Arc<Self>,
        key: String,
        caller: Caller,
        outer: Acquisition,
    ) -> Registration {
        let serial = self.serial.fetch_add(1, Ordering::Relaxed);
        self.lock()
            .insert((key.clone(), caller), Entry { outer, serial });
        Registration {
            registry: Arc::downgrade(self),
            key,
            caller,
            serial,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<(String, Caller), Entry>> {
        util::lock(&self.entries)
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
    caller: Caller,
    serial: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let Some(registry) = self.registry.upgrade() else {
            return;
        };
        let probe = (std::mem::take(&mut self.key), self.caller);
        let mut entries = registry.lock();
        if entries
            .get(&probe)
            .is_some_and(|entry| entry.serial == self.serial)
        {
            entries.remove(&probe);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::time::Instant;

    use super::*;
    use crate::lease::liveness::{Liveness, LivenessRef};
    use crate::lease::AnyLease;
    use crate::mode::Mode;

    struct Fake;

    impl AnyLease for Fake {
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
        fn portable(
            &self,
            fencing_token: u64,
        ) -> (crate::protocol::id::Id, crate::lease::portable::Part) {
            let part = crate::lease::portable::Part {
                key: "k".into(),
                holder: crate::protocol::calls::Holder::Writer,
                fencing_token,
            };
            (crate::protocol::id::Id::new(), part)
        }
        fn release(&self) -> crate::lease::any::LeaseFuture<'_> {
            Box::pin(async { Ok(true) })
        }
        fn downgrade(&self) -> crate::lease::any::LeaseFuture<'_> {
            Box::pin(async { Ok(true) })
        }
        fn upgrade(
            &self,
            _: crate::protocol::calls::UpgradeOp,
        ) -> crate::lease::any::UpgradeFuture<'_> {
            Box::pin(async { Ok(None) })
        }
        fn plain(&self) -> crate::lease::any::LeaseFuture<'_> {
            Box::pin(async { Ok(true) })
        }
        fn wait_first(&self) -> Option<crate::notify::waiter::Waiter> {
            None
        }
        fn ttl(&self) -> Duration {
            Duration::from_secs(60)
        }
        fn exec<'a>(
            &'a self,
            _: &'a redis::Pipeline,
            _: crate::protocol::exec::Access,
        ) -> crate::lease::any::ExecFuture<'a> {
            Box::pin(async { Ok(None) })
        }
        fn exec_set<'a>(
            &'a self,
            _: &'a [crate::protocol::keys::Keys],
            _: &'a redis::Pipeline,
            _: crate::protocol::exec::Access,
        ) -> crate::lease::any::ExecSetFuture<'a> {
            Box::pin(async { Ok(crate::protocol::exec::Executed::NotHeld(0)) })
        }
        fn found_lost(&self, _: &str) {}
        fn proclaim<'a>(&'a self, _: &'a str) -> crate::lease::any::LeaseFuture<'a> {
            Box::pin(async { Ok(false) })
        }
        fn dropped(self: Arc<Self>) {}
        fn handed_out(&self) -> bool {
            true
        }
        fn hand_out(self: Arc<Self>) {}
        fn release_later(self: Arc<Self>) {}
        fn ended(&self) -> crate::lease::any::LeaseFuture<'_> {
            Box::pin(async { Ok(true) })
        }
    }

    fn outer(liveness: &LivenessRef) -> Acquisition {
        Acquisition {
            lease: Arc::new(Fake),
            mode: Mode::Write,
            fencing_token: 7,
            liveness: liveness.clone(),
        }
    }

    fn liveness() -> LivenessRef {
        let now = Instant::now();
        LivenessRef::new(Liveness::new(
            None,
            now,
            now + Duration::from_secs(60),
            Default::default(),
        ))
    }

    #[tokio::test]
    async fn entries_go_with_their_registration_and_never_take_a_newer_one_along() {
        let registry = Arc::new(Registry::default());
        let me = Caller::current();
        let (old, new) = (liveness(), liveness());
        let first = registry.register("k".into(), me, outer(&old));
        assert!(registry.find("k".into(), me).1.is_some());
        assert!(
            registry.find("other".into(), me).1.is_none(),
            "keyed by lock key"
        );
        let elsewhere = std::thread::spawn(Caller::current).join().unwrap();
        assert!(
            registry.find("k".into(), elsewhere).1.is_none(),
            "keyed by holder"
        );

        old.fire();
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
            let inside = tokio::spawn(async { Caller::current() });
            (Caller::current(), inside.await.unwrap())
        });
        assert!(matches!(outside, Caller::Thread(id) if id == std::thread::current().id()));
        assert!(matches!(inside, Caller::Task(_)), "{inside:?}");
    }
}
