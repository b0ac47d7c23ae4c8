//! Where background tasks run: the caller's runtime, tracked when a tracker is set.

use std::future::Future;

use tokio::runtime::Handle;
use tokio::task::JoinHandle;
use tokio_util::task::TaskTracker;

/// Spawns the crate's background tasks on the runtime that acquired the lock, so that
/// `Drop` impls can hand work over without blocking and without a runtime context.
#[derive(Debug, Clone)]
pub(crate) struct Spawner {
    handle: Handle,
    tracker: Option<TaskTracker>,
}

impl Spawner {
    /// The spawner for the current runtime.
    ///
    /// Panics outside a Tokio runtime, as `tokio::spawn` does.
    pub(crate) fn current(tracker: Option<TaskTracker>) -> Self {
        Self {
            handle: Handle::current(),
            tracker,
        }
    }

    pub(crate) fn spawn<F>(&self, task: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match &self.tracker {
            Some(tracker) => tracker.spawn_on(task, &self.handle),
            None => self.handle.spawn(task),
        }
    }
}
