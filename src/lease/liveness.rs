//! A lease's liveness, which a guard and its refresher share: why the token fired, and
//! until when the lock is surely held.

use std::fmt;
use std::ops::Deref;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::observe::HeldMetric;
use crate::reason::CancelReason;

/// The first reason set wins. The validity deadline only moves forward; every look
/// through [`Liveness::fire_if_expired`] compares the clock with it (and fires the token
/// once it has passed), so no caller can see a lock as held after its deadline, even
/// when the refresher has not run yet (after the process was frozen, say).
///
/// The lock's [`CancellationToken`] is made on first use ([`Liveness::token`]) unless
/// the lock has a parent token (then it is the parent's child from the start): a guard
/// that nobody asks for its token costs no token. Until it exists, firing is recorded
/// here, and a token made later is cancelled at once.
///
/// The token, its reason and its parent are every guard's own; the deadline, the end and
/// the renewals are the lock's, which a nested guard reads from its outer guard
/// ([`Role`]).
#[derive(Debug)]
pub(crate) struct Liveness {
    reason: OnceLock<CancelReason>,
    /// The token was fired with no reason recorded (an `unlock` or a drop): the reason
    /// is given on first look, as for a token cancelled from outside.
    fired: AtomicBool,
    token: OnceLock<CancellationToken>,
    parent: Option<CancellationToken>,
    role: Role,
}

/// Whether a liveness speaks for a lock of its own or for an outer guard's.
#[derive(Debug)]
enum Role {
    /// The guard holds the lock in Redis: its deadline, cap, end and renewals are here.
    Owner(Tenure),
    /// A nested guard ([`Builder::reentrant`](crate::Builder::reentrant)): the liveness of
    /// the outermost guard whose lock it shares, whose deadline it reads and which it
    /// never writes. It has nothing to release, so no end to claim.
    Nested(LivenessRef),
}

/// What a [`Liveness`] lives in: a lock the refresher keeps (`KeptLock`, which holds its
/// liveness inline, so that a lock and its liveness are one allocation), or a nested
/// guard's own.
pub(crate) trait HasLiveness: Send + Sync {
    fn liveness(&self) -> &Liveness;
}

impl HasLiveness for Liveness {
    fn liveness(&self) -> &Liveness {
        self
    }
}

/// A shared [`Liveness`], as guards, acquisitions and nested guards hold it: the lock's
/// liveness through the kept lock itself, or a nested guard's own.
#[derive(Clone)]
pub(crate) struct LivenessRef(Arc<dyn HasLiveness>);

impl LivenessRef {
    /// `liveness`, shared on its own (a nested guard's).
    pub(crate) fn new(liveness: Liveness) -> Self {
        Self(Arc::new(liveness))
    }

    /// The liveness inside `holder`, sharing `holder`'s allocation.
    pub(crate) fn within(holder: Arc<dyn HasLiveness>) -> Self {
        Self(holder)
    }
}

impl Deref for LivenessRef {
    type Target = Liveness;

    fn deref(&self) -> &Liveness {
        self.0.liveness()
    }
}

impl fmt::Debug for LivenessRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

/// A held lock's time: from its acquiring request until its deadline (never past its
/// cap), the renewals that moved the deadline, and the claim of its end.
#[derive(Debug)]
struct Tenure {
    /// When the acquiring request was sent; the deadline is stored relative to it.
    base: Instant,
    /// The validity deadline, in nanoseconds after `base`.
    deadline_ns: AtomicU64,
    /// The latest the deadline may reach ([`Builder::max_hold`](crate::Builder::max_hold)),
    /// in nanoseconds after `base`; `u64::MAX` when there is no cap.
    cap_ns: u64,
    /// Whoever ends the lock (`unlock`, a drop, or the refresher) has claimed it, so that
    /// exactly one of them releases it.
    ended: AtomicBool,
    /// How many renewals of the lock succeeded.
    renewals: AtomicU64,
    /// The lock in the metrics (feature `metrics`): ended by whoever claims its end.
    held: HeldMetric,
}

impl Tenure {
    /// Moves the deadline to `deadline` (never past the cap), unless it is already later.
    fn extend(&self, deadline: Instant) {
        let ns = deadline.saturating_duration_since(self.base).as_nanos();
        let ns = u64::try_from(ns).unwrap_or(u64::MAX).min(self.cap_ns);
        self.deadline_ns.fetch_max(ns, Ordering::AcqRel);
    }

    fn deadline(&self) -> Instant {
        self.base + Duration::from_nanos(self.deadline_ns.load(Ordering::Acquire))
    }

    /// [`CancelReason::MaxHold`] when the deadline is the cap, else
    /// [`CancelReason::Expired`].
    fn expiry(&self) -> CancelReason {
        if self.deadline_ns.load(Ordering::Acquire) >= self.cap_ns {
            CancelReason::MaxHold
        } else {
            CancelReason::Expired
        }
    }
}

impl Liveness {
    /// The liveness of a lock acquired by a request sent at `sent`, surely held until
    /// `deadline`; its token is a child of `parent`, and `held` counts it in the metrics
    /// until its end.
    pub(crate) fn new(
        parent: Option<CancellationToken>,
        sent: Instant,
        deadline: Instant,
        held: HeldMetric,
    ) -> Self {
        let token = OnceLock::new();
        if let Some(parent) = &parent {
            let _ = token.set(parent.child_token());
        }
        let tenure = Tenure {
            base: sent,
            deadline_ns: AtomicU64::new(0),
            cap_ns: u64::MAX,
            ended: AtomicBool::new(false),
            renewals: AtomicU64::new(0),
            held,
        };
        tenure.extend(deadline);
        Self {
            reason: OnceLock::new(),
            fired: AtomicBool::new(false),
            token,
            parent,
            role: Role::Owner(tenure),
        }
    }

    /// This liveness with its deadline never past `cap` (a lock held at most until then);
    /// a deadline already later is moved back to it. A nested guard's cap is its outer
    /// guard's: it has none of its own to set.
    pub(crate) fn capped(mut self, cap: Instant) -> Self {
        if let Role::Owner(tenure) = &mut self.role {
            let ns = cap.saturating_duration_since(tenure.base).as_nanos();
            tenure.cap_ns = u64::try_from(ns).unwrap_or(u64::MAX);
            let deadline = tenure.deadline_ns.get_mut();
            *deadline = (*deadline).min(tenure.cap_ns);
        }
        self
    }

    /// Why the lock ends when its deadline passes: [`CancelReason::MaxHold`] when the
    /// deadline is the cap, else [`CancelReason::Expired`] (no renewal succeeded in time).
    /// A nested guard's is its outer guard's.
    pub(crate) fn expiry(&self) -> CancelReason {
        match &self.role {
            Role::Owner(tenure) => tenure.expiry(),
            Role::Nested(outer) => outer.expiry(),
        }
    }

    /// The liveness of a nested guard sharing the lock whose liveness `owner` is: its
    /// deadline is the outer's, its reason its own, and its token a child of the outer's
    /// (cancelled also by `parent`, which the caller watches). There is nothing for it to
    /// release, so it has no end to claim.
    pub(crate) fn nested(parent: Option<CancellationToken>, owner: LivenessRef) -> Self {
        let token = OnceLock::new();
        let _ = token.set(owner.token().child_token());
        Self {
            reason: OnceLock::new(),
            fired: AtomicBool::new(false),
            token,
            parent,
            role: Role::Nested(owner),
        }
    }

    /// The lock's token, made now if nobody asked for it before (and then cancelled at
    /// once if the lock has already ended).
    pub(crate) fn token(&self) -> &CancellationToken {
        if let Some(token) = self.token.get() {
            return token;
        }
        let token = self.token.get_or_init(CancellationToken::new);
        // Paired with the fence in `fire`: either that sees this token, or this sees
        // what it recorded.
        fence(Ordering::SeqCst);
        if self.reason.get().is_some() || self.fired.load(Ordering::Acquire) {
            token.cancel();
        }
        token
    }

    /// Whether the lock's token has fired (or would have, had it been made), without
    /// looking at the clock.
    pub(crate) fn is_fired(&self) -> bool {
        self.reason.get().is_some()
            || self.fired.load(Ordering::Acquire)
            || self
                .token
                .get()
                .is_some_and(CancellationToken::is_cancelled)
    }

    /// For a nested guard, whether the outer guard's lock is still held: its token has
    /// not fired and its deadline has not passed. Looks only; fires nothing.
    pub(crate) fn outer_held(&self) -> bool {
        match &self.role {
            Role::Nested(outer) => !outer.is_fired() && Instant::now() < outer.deadline(),
            Role::Owner(_) => false,
        }
    }

    /// Claims the end of the lock: true for the first caller only, who then releases it
    /// (or knows it lost); never for a nested guard, which has nothing to release.
    pub(crate) fn claim_end(&self) -> bool {
        let Role::Owner(tenure) = &self.role else {
            return false;
        };
        let first = !tenure.ended.swap(true, Ordering::AcqRel);
        if first {
            tenure.held.end();
        }
        first
    }

    /// When the acquiring request was sent (for a nested guard, the outer guard's).
    pub(crate) fn sent(&self) -> Instant {
        match &self.role {
            Role::Owner(tenure) => tenure.base,
            Role::Nested(outer) => outer.sent(),
        }
    }

    /// Moves the validity deadline to `deadline` (never past the cap), unless it is
    /// already later. A nested guard's deadline is its outer guard's, which it never
    /// moves.
    pub(crate) fn extend(&self, deadline: Instant) {
        if let Role::Owner(tenure) = &self.role {
            tenure.extend(deadline);
        }
    }

    /// A renewal sent at `sent` succeeded: the deadline moves to `deadline`.
    pub(crate) fn renewed(&self, deadline: Instant) {
        if let Role::Owner(tenure) = &self.role {
            tenure.extend(deadline);
            tenure.renewals.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// How many renewals of the lock have succeeded (for a nested guard, of the outer
    /// guard's lock).
    pub(crate) fn renewals(&self) -> u64 {
        match &self.role {
            Role::Owner(tenure) => tenure.renewals.load(Ordering::Relaxed),
            Role::Nested(outer) => outer.renewals(),
        }
    }

    /// Until when the lock is surely held (for a nested guard, the outer guard's
    /// deadline).
    pub(crate) fn deadline(&self) -> Instant {
        match &self.role {
            Role::Owner(tenure) => tenure.deadline(),
            Role::Nested(outer) => outer.deadline(),
        }
    }

    /// Fires the token with [`CancelReason::Expired`] (or [`CancelReason::MaxHold`] at the
    /// cap) if the deadline has passed, and reports whether the token has fired (now, or
    /// before).
    pub(crate) fn fire_if_expired(&self) -> bool {
        if self.is_fired() {
            return true;
        }
        if Instant::now() >= self.deadline() {
            self.cancel(self.expiry());
            return true;
        }
        false
    }

    /// Records `reason` unless one is recorded already, then fires the token.
    pub(crate) fn cancel(&self, reason: CancelReason) {
        if self.reason.set(reason).is_ok() {
            self.held_lost(reason);
        }
        self.fire();
    }

    /// The release found the lock no longer held by this id: counted as lost in the
    /// metrics, unless its token already fired as lost or expired (counted then).
    pub(crate) fn found_gone(&self) {
        if !matches!(
            self.reason.get(),
            Some(
                CancelReason::Lost
                    | CancelReason::Expired
                    | CancelReason::MaxHold
                    | CancelReason::ClockJump
            )
        ) {
            self.held_lost(CancelReason::Lost);
        }
    }

    /// Counts the lock as lost with `reason` in the metrics; a nested guard holds no lock
    /// of its own to count.
    fn held_lost(&self, reason: CancelReason) {
        if let Role::Owner(tenure) = &self.role {
            tenure.held.lost(reason);
        }
    }

    /// Fires the token; the reason is given on first look ([`Liveness::reason`]).
    pub(crate) fn fire(&self) {
        self.fired.store(true, Ordering::Release);
        fence(Ordering::SeqCst);
        if let Some(token) = self.token.get() {
            token.cancel();
        }
    }

    /// The reason the token fired, or `None` while it has not (checking the deadline
    /// first). A token fired with no reason (by an `unlock`, a drop, its parent, or a
    /// clone of it) is attributed on first look; a nested guard's token fired by the end
    /// of the outer lock takes the outer guard's reason, read without recording anything
    /// there.
    pub(crate) fn reason(&self) -> Option<CancelReason> {
        if !self.fire_if_expired() {
            return None;
        }
        let cause = match &self.role {
            Role::Nested(outer) if !self.parent_cancelled() && outer.is_fired() => {
                outer.attributed()
            }
            _ if self.parent_cancelled() => CancelReason::ParentCancelled,
            _ => CancelReason::Cancelled,
        };
        Some(*self.reason.get_or_init(|| cause))
    }

    /// The reason recorded, or else the one a token fired from outside would get;
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

    /// Completes when the token fires or the deadline passes (firing it with
    /// [`CancelReason::Expired`]), whichever comes first.
    pub(crate) async fn cancelled(&self) {
        while !self.fire_if_expired() {
            tokio::select! {
                biased;
                () = self.token().cancelled() => return,
                () = tokio::time::sleep_until(self.deadline()) => {}
            }
        }
    }
}

impl Drop for Liveness {
    fn drop(&mut self) {
        // A lock whose end nobody claimed (its guard was never made) leaves the metrics.
        self.claim_end();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_capped_deadline_never_passes_the_cap_and_ends_as_max_hold() {
        let now = Instant::now();
        let cap = now + Duration::from_millis(250);
        let liveness = Liveness::new(
            None,
            now,
            now + Duration::from_millis(100),
            HeldMetric::default(),
        )
        .capped(cap);
        liveness.extend(now + Duration::from_millis(200));
        assert_eq!(liveness.deadline(), now + Duration::from_millis(200));
        tokio::time::advance(Duration::from_millis(150)).await;
        assert!(!liveness.fire_if_expired(), "renewed before the cap");
        liveness.extend(now + Duration::from_millis(300));
        assert_eq!(liveness.deadline(), cap, "a renewal stops at the cap");
        let nested = Liveness::nested(
            None,
            LivenessRef::new(
                Liveness::new(
                    None,
                    now,
                    now + Duration::from_millis(100),
                    HeldMetric::default(),
                )
                .capped(now + Duration::from_millis(100)),
            ),
        );
        tokio::time::advance(Duration::from_millis(100)).await;
        assert_eq!(liveness.reason(), Some(CancelReason::MaxHold));
        assert_eq!(
            nested.reason(),
            Some(CancelReason::MaxHold),
            "the outer's cap"
        );
        // Without reaching the cap, a passed deadline is an expiry.
        let short = Liveness::new(
            None,
            now,
            now + Duration::from_millis(10),
            HeldMetric::default(),
        )
        .capped(now + Duration::from_secs(60));
        assert_eq!(short.reason(), Some(CancelReason::Expired));
        // A deadline already past the cap is moved back to it.
        let late = Liveness::new(
            None,
            now,
            now + Duration::from_secs(60),
            HeldMetric::default(),
        )
        .capped(now);
        assert_eq!(late.deadline(), now);
    }

    #[tokio::test(start_paused = true)]
    async fn a_look_after_the_deadline_fires_expired_without_the_task() {
        let now = Instant::now();
        let liveness = Liveness::new(
            None,
            now,
            now + Duration::from_millis(100),
            HeldMetric::default(),
        );
        assert!(!liveness.fire_if_expired());
        liveness.extend(now + Duration::from_millis(50));
        assert_eq!(
            liveness.deadline(),
            now + Duration::from_millis(100),
            "never moves back"
        );
        tokio::time::advance(Duration::from_millis(100)).await;
        assert_eq!(liveness.reason(), Some(CancelReason::Expired));
        assert!(
            liveness.token().is_cancelled(),
            "a token made after the end is cancelled"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_nested_liveness_reads_the_outer_deadline_and_keeps_its_own_reason() {
        let now = Instant::now();
        let outer = LivenessRef::new(Liveness::new(
            None,
            now,
            now + Duration::from_millis(100),
            HeldMetric::default(),
        ));
        let nested = Liveness::nested(None, outer.clone());
        outer.extend(now + Duration::from_millis(300));
        assert_eq!(nested.deadline(), now + Duration::from_millis(300));
        tokio::time::advance(Duration::from_millis(200)).await;
        assert!(!nested.fire_if_expired() && nested.outer_held());
        assert!(!nested.claim_end(), "a nested guard has nothing to release");

        nested.cancel(CancelReason::Cancelled);
        assert_eq!(nested.reason(), Some(CancelReason::Cancelled));
        assert_eq!(
            outer.recorded(),
            None,
            "nothing recorded in the outer liveness"
        );
        assert!(!outer.is_fired() && nested.outer_held());

        let second = Liveness::nested(None, outer.clone());
        outer.cancel(CancelReason::Lost);
        assert!(second.token().is_cancelled(), "a child of the outer token");
        assert_eq!(second.reason(), Some(CancelReason::Lost));
        assert!(!second.outer_held());
    }

    #[tokio::test(start_paused = true)]
    async fn a_nested_liveness_moves_caps_and_counts_nothing_of_the_outer_lock() {
        let now = Instant::now();
        let outer = LivenessRef::new(Liveness::new(
            None,
            now,
            now + Duration::from_millis(100),
            HeldMetric::default(),
        ));
        tokio::time::advance(Duration::from_millis(10)).await;
        let nested = Liveness::nested(None, outer.clone()).capped(Instant::now());
        nested.extend(now + Duration::from_millis(500));
        nested.renewed(now + Duration::from_millis(500));
        assert_eq!(outer.deadline(), now + Duration::from_millis(100));
        assert_eq!((outer.renewals(), nested.renewals()), (0, 0));
        assert_eq!(
            (nested.sent(), nested.expiry()),
            (now, CancelReason::Expired)
        );
        outer.renewed(now + Duration::from_millis(200));
        assert_eq!(nested.deadline(), now + Duration::from_millis(200));
        assert_eq!(nested.renewals(), 1, "the outer guard's renewals");
        assert!(!outer.outer_held(), "an owner has no outer guard");
    }

    #[test]
    fn a_token_made_after_the_lock_fired_is_cancelled_and_one_made_before_is_fired() {
        let now = Instant::now();
        let later = Liveness::new(
            None,
            now,
            now + Duration::from_secs(60),
            HeldMetric::default(),
        );
        later.fire();
        assert!(later.is_fired());
        assert!(later.token().is_cancelled());
        assert_eq!(later.reason(), Some(CancelReason::Cancelled));

        let before = Liveness::new(
            None,
            now,
            now + Duration::from_secs(60),
            HeldMetric::default(),
        );
        let token = before.token().clone();
        assert!(!before.is_fired());
        before.cancel(CancelReason::Lost);
        assert!(token.is_cancelled());

        let parent = CancellationToken::new();
        let child = Liveness::new(
            Some(parent.clone()),
            now,
            now + Duration::from_secs(60),
            HeldMetric::default(),
        );
        parent.cancel();
        assert!(child.is_fired());
        assert_eq!(child.reason(), Some(CancelReason::ParentCancelled));
    }

    #[tokio::test(start_paused = true)]
    async fn cancelled_follows_an_extended_deadline() {
        let now = Instant::now();
        let liveness = Liveness::new(
            None,
            now,
            now + Duration::from_millis(100),
            HeldMetric::default(),
        );
        liveness.extend(now + Duration::from_millis(300));
        let waited = tokio::time::timeout(Duration::from_millis(250), liveness.cancelled());
        assert!(waited.await.is_err(), "fired before the extended deadline");
        liveness.cancelled().await;
        assert_eq!(liveness.reason(), Some(CancelReason::Expired));
        assert!(Instant::now() >= now + Duration::from_millis(300));
    }
}
