//! A lease's liveness, which a guard and its background task share: why the token fired,
//! and until when the lock is surely held.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::reason::CancelReason;

/// The first reason set wins. The validity deadline only moves forward; every look at the
/// token through [`Liveness::check`] compares the clock with it, so no caller can see a
/// lock as held after its deadline, even when the background task has not run yet (after
/// the process was frozen, say).
#[derive(Debug)]
pub(crate) struct Liveness {
    reason: OnceLock<CancelReason>,
    parent: Option<CancellationToken>,
    /// When the acquiring request was sent; the deadline is stored relative to it.
    base: Instant,
    /// The validity deadline, in nanoseconds after `base`.
    deadline_ns: AtomicU64,
    /// Whoever ends the lock (`unlock`, or the background task) has claimed it, so that
    /// exactly one of them releases it.
    ended: AtomicBool,
    /// For a nested guard ([`Builder::reentrant`](crate::Builder::reentrant)): the
    /// outermost guard whose lock it shares, whose deadline it reads and whose liveness
    /// it never writes.
    owner: Option<Owner>,
}

/// The outermost guard, owner of the lock in Redis, whose liveness a nested guard's
/// follows.
#[derive(Debug)]
struct Owner {
    liveness: Arc<Liveness>,
    token: CancellationToken,
}

impl Liveness {
    /// The liveness of a lock acquired by a request sent at `sent`, surely held until
    /// `deadline`.
    pub(crate) fn new(parent: Option<CancellationToken>, sent: Instant, deadline: Instant) -> Self {
        let liveness = Self {
            reason: OnceLock::new(),
            parent,
            base: sent,
            deadline_ns: AtomicU64::new(0),
            ended: AtomicBool::new(false),
            owner: None,
        };
        liveness.extend(deadline);
        liveness
    }

    /// The liveness of a nested guard sharing the lock of the owner whose liveness and
    /// token are given: its deadline is the outer's, its reason its own. There is nothing
    /// for it to release, so its end is claimed already.
    pub(crate) fn nested(
        parent: Option<CancellationToken>,
        owner: Arc<Liveness>,
        owner_token: CancellationToken,
    ) -> Self {
        Self {
            reason: OnceLock::new(),
            parent,
            base: owner.base,
            deadline_ns: AtomicU64::new(0),
            ended: AtomicBool::new(true),
            owner: Some(Owner {
                liveness: owner,
                token: owner_token,
            }),
        }
    }

    /// For a nested guard, whether the outer guard's lock is still held: its token has
    /// not fired and its deadline has not passed. Looks only; fires nothing.
    pub(crate) fn outer_held(&self) -> bool {
        self.owner.as_ref().is_some_and(|outer| {
            !outer.token.is_cancelled() && Instant::now() < outer.liveness.deadline()
        })
    }

    /// When the acquiring request was sent.
    pub(crate) fn sent(&self) -> Instant {
        self.base
    }

    /// Claims the end of the lock: true for the first caller only, who then releases it
    /// (or knows it lost).
    pub(crate) fn claim_end(&self) -> bool {
        !self.ended.swap(true, Ordering::AcqRel)
    }

    /// Moves the validity deadline to `deadline`, unless it is already later.
    pub(crate) fn extend(&self, deadline: Instant) {
        let ns = deadline.saturating_duration_since(self.base).as_nanos();
        let ns = u64::try_from(ns).unwrap_or(u64::MAX);
        self.deadline_ns.fetch_max(ns, Ordering::AcqRel);
    }

    /// Until when the lock is surely held (for a nested guard, the outer guard's
    /// deadline).
    pub(crate) fn deadline(&self) -> Instant {
        if let Some(outer) = &self.owner {
            return outer.liveness.deadline();
        }
        self.base + Duration::from_nanos(self.deadline_ns.load(Ordering::Acquire))
    }

    /// Fires `token` with [`CancelReason::Expired`] if the deadline has passed, and
    /// reports whether `token` has fired.
    pub(crate) fn check(&self, token: &CancellationToken) -> bool {
        if token.is_cancelled() {
            return true;
        }
        if Instant::now() >= self.deadline() {
            self.cancel(token, CancelReason::Expired);
            return true;
        }
        false
    }

    /// Records `reason` unless one is recorded already, then cancels `token`.
    pub(crate) fn cancel(&self, token: &CancellationToken, reason: CancelReason) {
        let _ = self.reason.set(reason);
        token.cancel();
    }

    /// The reason `token` fired, or `None` while it has not (checking the deadline
    /// first). A token cancelled from outside (its parent, or a clone of it) is
    /// attributed on first look; a nested guard's token fired by the end of the outer
    /// lock takes the outer guard's reason, read without recording anything there.
    pub(crate) fn reason(&self, token: &CancellationToken) -> Option<CancelReason> {
        if !self.check(token) {
            return None;
        }
        let cause = match &self.owner {
            Some(outer) if !self.parent_cancelled() && outer.token.is_cancelled() => {
                outer.liveness.attributed()
            }
            _ if self.parent_cancelled() => CancelReason::ParentCancelled,
            _ => CancelReason::Cancelled,
        };
        Some(*self.reason.get_or_init(|| cause))
    }

    /// The reason recorded, or else the one a token cancelled from outside would get;
    /// records nothing.
    fn attributed(&self) -> CancelReason {
        match self.reason.get() {
            Some(reason) => *reason,
            None if self.parent_cancelled() => CancelReason::ParentCancelled,
            None => CancelReason::Cancelled,
        }
    }

    fn parent_cancelled(&self) -> bool {
        self.parent
            .as_ref()
            .is_some_and(CancellationToken::is_cancelled)
    }

    /// The reason recorded so far, without looking at the clock or the token (for
    /// `Debug`, which must not fire the token).
    pub(crate) fn recorded(&self) -> Option<CancelReason> {
        self.reason.get().copied()
    }

    /// Completes when `token` fires or the deadline passes (firing it with
    /// [`CancelReason::Expired`]), whichever comes first.
    pub(crate) async fn cancelled(&self, token: &CancellationToken) {
        while !self.check(token) {
            tokio::select! {
                biased;
                () = token.cancelled() => return,
                () = tokio::time::sleep_until(self.deadline()) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_look_after_the_deadline_fires_expired_without_the_task() {
        let now = Instant::now();
        let liveness = Liveness::new(None, now, now + Duration::from_millis(100));
        let token = CancellationToken::new();
        assert!(!liveness.check(&token));
        liveness.extend(now + Duration::from_millis(50));
        assert_eq!(
            liveness.deadline(),
            now + Duration::from_millis(100),
            "never moves back"
        );
        tokio::time::advance(Duration::from_millis(100)).await;
        assert_eq!(liveness.reason(&token), Some(CancelReason::Expired));
        assert!(token.is_cancelled());
    }

    #[tokio::test(start_paused = true)]
    async fn a_nested_liveness_reads_the_outer_deadline_and_keeps_its_own_reason() {
        let now = Instant::now();
        let outer = Arc::new(Liveness::new(None, now, now + Duration::from_millis(100)));
        let outer_token = CancellationToken::new();
        let nested = Liveness::nested(None, Arc::clone(&outer), outer_token.clone());
        let token = outer_token.child_token();
        outer.extend(now + Duration::from_millis(300));
        assert_eq!(nested.deadline(), now + Duration::from_millis(300));
        tokio::time::advance(Duration::from_millis(200)).await;
        assert!(!nested.check(&token) && nested.outer_held());
        assert!(!nested.claim_end(), "a nested guard has nothing to release");

        nested.cancel(&token, CancelReason::Cancelled);
        assert_eq!(nested.reason(&token), Some(CancelReason::Cancelled));
        assert_eq!(
            outer.recorded(),
            None,
            "nothing recorded in the outer liveness"
        );
        assert!(!outer_token.is_cancelled() && nested.outer_held());

        let second = outer_token.child_token();
        let nested = Liveness::nested(None, Arc::clone(&outer), outer_token.clone());
        outer.cancel(&outer_token, CancelReason::Lost);
        assert_eq!(nested.reason(&second), Some(CancelReason::Lost));
        assert!(!nested.outer_held());
    }

    #[tokio::test(start_paused = true)]
    async fn cancelled_follows_an_extended_deadline() {
        let now = Instant::now();
        let liveness = Liveness::new(None, now, now + Duration::from_millis(100));
        let token = CancellationToken::new();
        liveness.extend(now + Duration::from_millis(300));
        let waited = tokio::time::timeout(Duration::from_millis(250), liveness.cancelled(&token));
        assert!(waited.await.is_err(), "fired before the extended deadline");
        liveness.cancelled(&token).await;
        assert_eq!(liveness.reason(&token), Some(CancelReason::Expired));
        assert!(Instant::now() >= now + Duration::from_millis(300));
    }
}
