//! [`Background`]: the thread of a blocking handle, running the Tokio runtime on which its
//! requests run and its guards are refreshed.

use std::future::{Future, IntoFuture};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::Error;

/// How long the thread waits, once its handle and every guard are gone, for the releases
/// still in flight: a release gives up after one TTL (24 h at most), but one that has not
/// been answered within this much is most likely not coming (the server is down), and
/// the lock then expires by its TTL.
const RELEASE_GRACE: Duration = Duration::from_secs(5);

/// How long the stopping thread waits for the runtime's blocking pool (host name
/// lookups run there) before it leaves it behind.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(100);

/// A current-thread Tokio runtime on a thread of its own, shared by a blocking handle, its
/// clones and its guards, and stopped when the last of them goes.
///
/// Requests run on the caller's thread with [`Handle::block_on`], while the background
/// thread drives the runtime's timers and I/O and runs its tasks: the refresher, the
/// notifier's subscriber connection, the releases handed over by `Drop`. Every held lock
/// counts on [`tracker`](Self::tracker) until its release is done, so that the thread
/// finishes the releases in flight before it stops.
#[derive(Debug)]
pub(crate) struct Background {
    handle: Handle,
    stop: CancellationToken,
    tracker: TaskTracker,
    thread: Option<JoinHandle<()>>,
}

impl Background {
    /// Starts the thread, named after the handle's `name`.
    ///
    /// [`Error::InRuntime`] on a thread with a Tokio runtime context, where the handle
    /// could not be used, before anything is started; [`Error::Background`] when the
    /// runtime or the thread cannot be made.
    pub(crate) fn start(name: &str) -> Result<Self, Error> {
        if Handle::try_current().is_ok() {
            return Err(Error::InRuntime);
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|source| Error::Background { source })?;
        let handle = runtime.handle().clone();
        let stop = CancellationToken::new();
        let tracker = TaskTracker::new();
        let (stopped, pending) = (stop.clone(), tracker.clone());
        let thread = std::thread::Builder::new()
            .name(format!("redismutex {name}"))
            .spawn(move || {
                runtime.block_on(async {
                    stopped.cancelled().await;
                    pending.close();
                    let _ = tokio::time::timeout(RELEASE_GRACE, pending.wait()).await;
                });
                // Not the default drop, which waits without a bound for the blocking
                // pool (a host name being resolved, say).
                runtime.shutdown_timeout(SHUTDOWN_GRACE);
            })
            .map_err(|source| Error::Background { source })?;
        Ok(Self {
            handle,
            stop,
            tracker,
            thread: Some(thread),
        })
    }

    /// The tracker every held lock of the handle counts on until its release is done.
    pub(crate) fn tracker(&self) -> &TaskTracker {
        &self.tracker
    }

    /// Runs `future` to its end on the calling thread, within the background runtime.
    ///
    /// [`Error::InRuntime`] without running it when the calling thread has a Tokio
    /// runtime context, where blocking would stall that runtime's tasks (and where
    /// [`Handle::block_on`] panics).
    pub(crate) fn block_on<F: Future>(&self, future: F) -> Result<F::Output, Error> {
        if Handle::try_current().is_ok() {
            return Err(Error::InRuntime);
        }
        Ok(self.handle.block_on(future))
    }

    /// Runs `request` (an acquire) to its end as [`block_on`](Self::block_on) does, and
    /// wraps the guard it gives in a blocking guard of this thread, with `wrap`.
    pub(crate) fn acquire<G, B>(
        self: &Arc<Self>,
        request: impl IntoFuture<Output = Result<G, Error>>,
        wrap: impl FnOnce(G, Arc<Self>) -> B,
    ) -> Result<B, Error> {
        let guard = self.block_on(request.into_future())??;
        Ok(wrap(guard, Arc::clone(self)))
    }

    /// [`acquire`](Self::acquire) for a single attempt, which may give no guard.
    pub(crate) fn try_acquire<G, B>(
        self: &Arc<Self>,
        attempt: impl IntoFuture<Output = Result<Option<G>, Error>>,
        wrap: impl FnOnce(G, Arc<Self>) -> B,
    ) -> Result<Option<B>, Error> {
        let guard = self.block_on(attempt.into_future())??;
        Ok(guard.map(|guard| wrap(guard, Arc::clone(self))))
    }

    /// Runs `make` within the background runtime's context (to make what spawns tasks on
    /// it), without blocking.
    pub(crate) fn enter<T>(&self, make: impl FnOnce() -> T) -> T {
        let _entered = self.handle.enter();
        make()
    }
}

impl Drop for Background {
    /// Stops the thread once the releases in flight are done (at most [`RELEASE_GRACE`],
    /// and [`SHUTDOWN_GRACE`] for the runtime),
    /// and waits for it, so that a program that drops its handle and exits leaves no lock
    /// behind; inside a Tokio runtime, where waiting would block it, the thread finishes
    /// on its own.
    fn drop(&mut self) {
        self.stop.cancel();
        let Some(thread) = self.thread.take() else {
            return;
        };
        if Handle::try_current().is_err() {
            let _ = thread.join();
        }
    }
}
