//! Why a guard's cancellation token fired.

/// Why a [`Guard`](crate::Guard)'s cancellation token fired while the guard lives; see
/// [`Guard::cancel_reason`](crate::Guard::cancel_reason). (`unlock` and drop consume
/// the guard, so they need no reason; clones of the token just see it fire.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CancelReason {
    /// The [`parent`](crate::Acquire::parent) token was cancelled; the lock is released
    /// in the background.
    ParentCancelled,
    /// The guard's own cancellation token was cancelled (through
    /// [`Guard::cancellation_token`](crate::Guard::cancellation_token)); the lock is
    /// released in the background.
    Cancelled,
    /// A refresh found that this guard's id no longer holds the lock key: it expired, was
    /// deleted, or was taken over. Nothing is released.
    Lost,
    /// No refresh succeeded within the validity window (the TTL minus the Redlock drift
    /// margin) after the last successful acquire or refresh, for example because Redis
    /// could not be reached: the lock may have expired, so the guard gave it up.
    Expired,
    /// The lock had been held for [`Builder::max_hold`](crate::Builder::max_hold) since
    /// its acquiring request was sent: it is renewed no further, its token fires at that
    /// moment (while the server still holds the lock), and the lock is released in the
    /// background.
    MaxHold,
    /// A refresh found that this guard's id no longer holds the lock key, and the
    /// server's clock (its `TIME`, which every renewal reads) had moved ahead of this
    /// process's monotonic clock since the previous renewal by more than Redlock's drift
    /// margin (1 % of the span + 2 ms): the server most likely expired the lock early,
    /// because its clock jumped forward or runs fast. Another holder may have had the
    /// lock before this token fired; fencing tokens are what protects a resource then
    /// (see the guarantees guide, "The server's clock"). Nothing is released. Detected on
    /// one server and on a Sentinel primary (not on a Cluster's masters or a quorum's
    /// nodes, whose renewals do not read the clock). After a Sentinel failover the new
    /// primary's clock is compared with the old one's, so a skew between the two hosts
    /// beyond the margin reads as a jump too.
    ClockJump,
    /// The guard was detached ([`WriteGuard::detach`](crate::WriteGuard::detach) and the
    /// other guards' `detach`): its hold left this guard as a [`Lease`](crate::Lease).
    /// Nothing was released: the lock stays in Redis until its TTL runs out, or until the
    /// lease is attached or released. Seen by clones of the token and by nested guards.
    Detached,
}
