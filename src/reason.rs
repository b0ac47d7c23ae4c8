//! Why a guard's token fired.

use std::sync::OnceLock;

use tokio_util::sync::CancellationToken;

/// Why a [`Guard`](crate::Guard)'s token was cancelled while the guard lives; see
/// [`Guard::cancel_reason`](crate::Guard::cancel_reason). (`unlock` and drop consume
/// the guard, so they need no reason; clones of the token just see it fire.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CancelReason {
    /// The [`parent`](crate::Acquire::parent) token was cancelled; the lock is released
    /// in the background.
    ParentCancelled,
    /// The guard's own token was cancelled through [`Guard::token`](crate::Guard::token);
    /// the lock is released in the background.
    Cancelled,
    /// A refresh found that this guard's id no longer holds the lock key: it expired, was
    /// deleted, or was taken over. Nothing is released.
    Lost,
    /// No refresh succeeded within the validity window (the TTL minus the Redlock drift
    /// margin) after the last successful acquire or refresh, for example because Redis
    /// could not be reached: the lock may have expired, so the guard gave it up.
    Expired,
}

/// The reason shared by a guard and its background task; the first one set wins.
#[derive(Debug)]
pub(crate) struct Status {
    reason: OnceLock<CancelReason>,
    parent: Option<CancellationToken>,
}

impl Status {
    pub(crate) fn new(parent: Option<CancellationToken>) -> Self {
        Self {
            reason: OnceLock::new(),
            parent,
        }
    }

    /// Records `reason` unless one is recorded already, then cancels `token`.
    pub(crate) fn cancel(&self, token: &CancellationToken, reason: CancelReason) {
        let _ = self.reason.set(reason);
        token.cancel();
    }

    /// The reason `token` fired, or `None` while it has not. A token cancelled from
    /// outside (its parent, or a clone of it) is attributed on first look.
    pub(crate) fn reason(&self, token: &CancellationToken) -> Option<CancelReason> {
        if let Some(reason) = self.reason.get() {
            return Some(*reason);
        }
        if !token.is_cancelled() {
            return None;
        }
        let parent_cancelled = self
            .parent
            .as_ref()
            .is_some_and(CancellationToken::is_cancelled);
        Some(*self.reason.get_or_init(|| {
            if parent_cancelled {
                CancelReason::ParentCancelled
            } else {
                CancelReason::Cancelled
            }
        }))
    }
}
