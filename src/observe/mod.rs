//! What the crate tells the application's metrics (feature `metrics`, on the `metrics`
//! facade): a handle's [`Meters`] record each request's wait and outcome, each held
//! lock's time and end, each renewal, and a quorum's node errors. Without the feature
//! [`Meters`] is empty and every call compiles to nothing.
//!
//! The metric names and labels are fixed (see the
//! [metrics guide](crate::guide::metrics)), so that dashboards can rely on them; the lock
//! key is never a label, since its values are unbounded.

#[cfg(feature = "metrics")]
mod recording;
#[cfg(not(feature = "metrics"))]
mod silent;

#[cfg(feature = "metrics")]
pub use recording::describe;
#[cfg(feature = "metrics")]
pub(crate) use recording::{HeldMetric, Meters};
#[cfg(not(feature = "metrics"))]
pub(crate) use silent::{HeldMetric, Meters};

/// How a request ended, the `outcome` label of `redismutex_acquire_duration_seconds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// It gave a guard or a permit.
    Acquired,
    /// A `try_*` request found the lock held (or every permit taken).
    Busy,
    /// The wait's timeout ran out, or an attempt got no reply in time.
    Timeout,
    /// The parent token was cancelled, or the request's future was dropped.
    Cancelled,
    /// Any other error.
    Error,
}

impl Outcome {
    /// The label value.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Outcome::Acquired => "acquired",
            Outcome::Busy => "busy",
            Outcome::Timeout => "timeout",
            Outcome::Cancelled => "cancelled",
            Outcome::Error => "error",
        }
    }
}

/// What one lock's renewal found, the `outcome` label of `redismutex_refresh_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refreshed {
    /// The id still held the lock; its TTL is renewed.
    Ok,
    /// The id no longer held the lock.
    Lost,
    /// The renewal failed (no reply, a refused or failed request); it is retried.
    Error,
}

/// What one guarded pipeline found, the `outcome` label of `redismutex_exec_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exec {
    /// The lock was held: every command ran.
    Ran,
    /// The lock was not held: nothing ran.
    NotHeld,
    /// The lock was held and a command failed.
    Failed,
    /// The pipeline was refused before it was sent, or the request failed.
    Error,
}
