//! Two small helpers every layer uses: a poison-tolerant lock, and a sleep until an
//! optional instant.

use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::time::Instant;

/// Locks `mutex`, taking a poisoned one as it is. The crate never panics while it holds
/// one of its locks, and every critical section leaves its data consistent, so a poisoned
/// lock (a panic elsewhere in the thread) still guards valid data.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Sleeps until `at`, or forever when it is `None`.
///
/// # Cancel safety
///
/// Cancel safe, as `tokio::time::sleep_until`.
pub(crate) async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
