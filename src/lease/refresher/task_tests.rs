//! The refresher's task against a backend of this file's own, on a paused clock: what it
//! sends, and when, for one lock; and how it groups the renewals due together.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::Refresher;
use crate::backend::{Backend, ClockJump, Renewals};
use crate::error::Error;
use crate::lease::any::AnyLease;
use crate::lease::HeldLease;
use crate::mode::Kind;
use crate::notify::hub::Hub;
use crate::protocol::calls::{AttemptKind, Call, Holder, Leftovers, Queueing, Renewal, Retake};
use crate::protocol::id::Id;
use crate::protocol::keys::Keys;
use crate::protocol::replies::{Attempt, Downgraded, Unlocked};
use crate::protocol::slot::hash_tag;
use crate::reason::CancelReason;
use crate::util;

/// Renewals fail (or succeed) as told, and releases are counted; with `tagged`, the
/// batch tag is the lock key's hash tag, as on a cluster.
#[derive(Default)]
struct Scripted {
    renewals_fail: AtomicBool,
    renewals: AtomicUsize,
    releases: AtomicUsize,
    tagged: bool,
    batches: AtomicUsize,
    /// A batch whose items had different batch tags was sent.
    mixed: AtomicBool,
    /// Renewals find their locks gone.
    renewals_lost: AtomicBool,
    /// What the next batch says of the server's clock.
    clock: std::sync::Mutex<Option<ClockJump>>,
}

impl Backend for Scripted {
    async fn attempt(&self, _: &Call, _: AttemptKind) -> Result<Attempt, Error> {
        Ok(Attempt::Acquired(1))
    }

    async fn attempt_set(
        &self,
        parts: &[crate::protocol::calls::SetPart<'_>],
        _: bool,
    ) -> Result<crate::protocol::replies::SetAttempt, Error> {
        Ok(crate::protocol::replies::SetAttempt::Acquired(vec![
            1;
            parts
                .len(
                )
        ]))
    }

    async fn attach(
        &self,
        _: &[crate::protocol::calls::AttachPart<'_>],
        _: &Id,
    ) -> Result<crate::protocol::calls::Attached, Error> {
        Ok(crate::protocol::calls::Attached::Moved)
    }

    async fn refresh(&self, _: &Call, _: Option<Retake>) -> Result<bool, Error> {
        Ok(true)
    }

    async fn renew(&self, batch: &[Renewal<'_>]) -> Renewals {
        self.renewals.fetch_add(batch.len(), Ordering::SeqCst);
        self.batches.fetch_add(1, Ordering::SeqCst);
        if batch
            .iter()
            .any(|item| self.batch_tag(item.call) != self.batch_tag(batch[0].call))
        {
            self.mixed.store(true, Ordering::SeqCst);
        }
        let fail = self.renewals_fail.load(Ordering::SeqCst);
        let lost = self.renewals_lost.load(Ordering::SeqCst);
        Renewals {
            results: batch
                .iter()
                .map(|_| match (fail, lost) {
                    (true, _) => Err(Error::Timeout),
                    (_, true) => Ok(false),
                    _ => Ok(true),
                })
                .collect(),
            clock: util::lock(&self.clock).take(),
        }
    }

    fn batch_tag<'c>(&self, call: &'c Call) -> Option<&'c str> {
        if self.tagged {
            hash_tag(call.keys.lock())
        } else {
            None
        }
    }

    async fn release(&self, _: &Call, _: Holder, _: Leftovers) -> Result<Unlocked, Error> {
        self.releases.fetch_add(1, Ordering::SeqCst);
        Ok(Unlocked::from_reply(1))
    }

    async fn exec(
        &self,
        _: &Call,
        _: &[crate::protocol::keys::Keys],
        _: &redis::Pipeline,
        _: crate::protocol::exec::Access,
    ) -> Result<crate::protocol::exec::Executed, Error> {
        Ok(crate::protocol::exec::Executed::NotHeld(0))
    }

    async fn downgrade(&self, _: &Call) -> Result<Downgraded, Error> {
        Ok(Downgraded::from_reply(3))
    }

    async fn upgrade(
        &self,
        _: &Call,
        _: crate::protocol::calls::UpgradeOp,
    ) -> Result<crate::protocol::replies::Upgraded, Error> {
        Ok(crate::protocol::replies::Upgraded::NotHeld)
    }

    async fn plain(&self, _: &Call) -> Result<bool, Error> {
        Ok(true)
    }

    async fn inspect(
        &self,
        _: &crate::protocol::keys::Keys,
        _: crate::protocol::inspect::Form,
    ) -> Result<crate::LockState, Error> {
        Err(Error::Timeout)
    }

    async fn force_unlock(&self, _: &Call) -> Result<Unlocked, Error> {
        Ok(Unlocked::from_reply(0))
    }

    async fn proclaim(&self, _: &Call, _: &str) -> Result<bool, Error> {
        Ok(false)
    }

    async fn leader(&self, _: &Call) -> Result<crate::protocol::leader::LeaderRead, Error> {
        Err(Error::Timeout)
    }

    fn hub(&self) -> Option<&Arc<Hub>> {
        None
    }

    fn fast_path(&self) -> bool {
        false
    }
}

const TTL: Duration = Duration::from_millis(400);

fn lease(backend: &Arc<Scripted>) -> Arc<HeldLease<Scripted>> {
    lease_on(backend, "k")
}

fn lease_on(backend: &Arc<Scripted>, key: &str) -> Arc<HeldLease<Scripted>> {
    lease_with(backend, key, TTL)
}

fn lease_with(backend: &Arc<Scripted>, key: &str, ttl: Duration) -> Arc<HeldLease<Scripted>> {
    let ttl_ms = u64::try_from(ttl.as_millis()).unwrap();
    let call = Call {
        keys: Keys::new(key, false),
        id: Id::new(),
        ttl_ms,
        fence_ms: ttl_ms,
        queue: Queueing::Off,
        node_order: Default::default(),
        describe: None,
    };
    Arc::new(HeldLease::new(Arc::clone(backend), call, Kind::Write))
}

#[tokio::test(start_paused = true)]
async fn renewals_come_every_half_ttl_and_a_dropped_guard_is_released_at_once() {
    let backend = Arc::new(Scripted::default());
    let refresher = Refresher::new(Arc::clone(&backend), TTL, None, Default::default());
    let lock = refresher.keep(lease(&backend), Instant::now(), 1, None);
    tokio::time::sleep(TTL / 2 - Duration::from_millis(5)).await;
    assert_eq!(
        backend.renewals.load(Ordering::SeqCst),
        0,
        "not before ttl/2"
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(backend.renewals.load(Ordering::SeqCst), 1);
    tokio::time::sleep(TTL * 2).await;
    assert_eq!(backend.renewals.load(Ordering::SeqCst), 5, "one per ttl/2");
    assert!(!lock.liveness.fire_if_expired());

    lock.liveness.fire();
    Arc::clone(&lock).dropped();
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(backend.releases.load(Ordering::SeqCst), 1);
    assert!(lock.ended().await.unwrap(), "what the release found");
    tokio::time::sleep(TTL * 2).await;
    assert_eq!(
        backend.renewals.load(Ordering::SeqCst),
        5,
        "none after the end"
    );
}

/// A lock nobody else can cancel (no parent, its token never handed out) whose renewals
/// fail fires `Expired` at its deadline, and the refresher then releases it, as it may
/// still be held.
#[tokio::test(start_paused = true)]
async fn an_unwatched_lock_that_expires_is_released_by_the_refresher() {
    let backend = Arc::new(Scripted::default());
    backend.renewals_fail.store(true, Ordering::SeqCst);
    let refresher = Refresher::new(Arc::clone(&backend), TTL, None, Default::default());
    let lock = refresher.keep(lease(&backend), Instant::now(), 1, None);
    assert!(!lock.handed_out(), "nothing to watch");
    let deadline = lock.liveness.deadline();
    tokio::time::sleep_until(deadline - Duration::from_millis(1)).await;
    assert!(!lock.liveness.is_fired());
    assert_eq!(
        backend.renewals.load(Ordering::SeqCst),
        4,
        "at ttl/2, then three retries at ttl/8"
    );
    tokio::time::sleep(Duration::from_millis(2)).await;
    assert_eq!(lock.liveness.recorded(), Some(CancelReason::Expired));
    assert_eq!(backend.releases.load(Ordering::SeqCst), 1, "released");
    assert!(!lock.liveness.claim_end(), "the refresher claimed the end");
}

/// The locks due together go out in one batch per batch tag (per hash tag on a cluster),
/// never two tags in one: the backend sends each batch as one script.
#[tokio::test(start_paused = true)]
async fn the_renewals_due_together_go_in_one_batch_per_tag() {
    let backend = Arc::new(Scripted {
        tagged: true,
        ..Scripted::default()
    });
    let refresher = Refresher::new(Arc::clone(&backend), TTL, None, Default::default());
    let now = Instant::now();
    let locks: Vec<_> = ["{a}1", "{b}2", "{a}3", "{b}4", "{a}5"]
        .into_iter()
        .map(|key| refresher.keep(lease_on(&backend, key), now, 1, None))
        .collect();
    tokio::time::sleep(TTL / 2 + Duration::from_millis(5)).await;
    assert_eq!(backend.renewals.load(Ordering::SeqCst), locks.len());
    assert_eq!(
        backend.batches.load(Ordering::SeqCst),
        2,
        "one per hash tag"
    );
    assert!(!backend.mixed.load(Ordering::SeqCst), "a batch mixed tags");
}

/// Renewals due within 1 % of the TTL (at most 4 ms) of the first due go in its batch:
/// four locks acquired a millisecond apart are renewed by one script, not four, and
/// none before ttl/2 less that margin.
#[tokio::test(start_paused = true)]
async fn the_renewals_due_within_a_few_milliseconds_share_a_batch() {
    let backend = Arc::new(Scripted::default());
    let refresher = Refresher::new(Arc::clone(&backend), TTL, None, Default::default());
    let start = Instant::now();
    let mut locks = Vec::new();
    for _ in 0..4 {
        locks.push(refresher.keep(lease(&backend), Instant::now(), 1, None));
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    tokio::time::sleep_until(start + TTL / 2 - TTL / 100 - Duration::from_millis(1)).await;
    assert_eq!(backend.renewals.load(Ordering::SeqCst), 0, "none early");
    tokio::time::sleep_until(start + TTL / 2 + Duration::from_millis(10)).await;
    assert_eq!(backend.renewals.load(Ordering::SeqCst), locks.len());
    assert_eq!(backend.batches.load(Ordering::SeqCst), 1, "one script");
}

/// A renewal that finds its lock gone while the server's clock jumped forward fires
/// `ClockJump`; without a jump, `Lost`. A jump back loses nothing.
#[tokio::test(start_paused = true)]
async fn a_lock_found_gone_as_the_servers_clock_jumped_forward_fires_clock_jump() {
    for (jump, reason) in [
        (
            Some(ClockJump::Forward(Duration::from_secs(3))),
            Some(CancelReason::ClockJump),
        ),
        (None, Some(CancelReason::Lost)),
        (Some(ClockJump::Back(Duration::from_secs(3))), None),
    ] {
        let backend = Arc::new(Scripted::default());
        backend
            .renewals_lost
            .store(reason.is_some(), Ordering::SeqCst);
        *util::lock(&backend.clock) = jump;
        let refresher = Refresher::new(Arc::clone(&backend), TTL, None, Default::default());
        let lock = refresher.keep(lease(&backend), Instant::now(), 1, None);
        tokio::time::sleep(TTL / 2 + Duration::from_millis(5)).await;
        assert_eq!(backend.renewals.load(Ordering::SeqCst), 1, "{jump:?}");
        assert_eq!(lock.liveness.recorded(), reason, "{jump:?}");
    }
}

/// A lock nobody else can cancel whose guard goes before the sweep is never scheduled:
/// the sweep drops it, and nothing of it is renewed or released by the refresher; a lock
/// still held at the sweep is scheduled.
#[tokio::test(start_paused = true)]
async fn a_lock_dropped_before_the_sweep_never_enters_the_schedule() {
    let backend = Arc::new(Scripted::default());
    let refresher = Refresher::new(Arc::clone(&backend), TTL, None, Default::default());
    let core = refresher.core();
    let short = refresher.keep(lease(&backend), Instant::now(), 1, None);
    let kept = refresher.keep(lease(&backend), Instant::now(), 2, None);
    // Held a few milliseconds (past the first millisecond, when a lock with a parent
    // is taken), then unlocked: the `unlock` claims the end and releases it itself.
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert!(short.liveness.claim_end());
    short.liveness.fire();
    drop(short);
    // Past two sweep periods (ttl/4), before the first renewal (ttl/2).
    tokio::time::sleep(TTL / 4 + Duration::from_millis(1)).await;
    assert_eq!(
        core.scheduled.load(Ordering::SeqCst),
        1,
        "the held lock only"
    );
    tokio::time::sleep(TTL).await;
    assert_eq!(
        backend.renewals.load(Ordering::SeqCst),
        2,
        "the held lock's, at ttl/2 and ttl"
    );
    assert_eq!(
        backend.releases.load(Ordering::SeqCst),
        0,
        "nothing released"
    );
    assert!(!kept.liveness.fire_if_expired());
}

/// With a short TTL, a lock still held at the sweep is renewed at ttl/2 after its
/// acquire, as one admitted at once would be, and stays held.
#[tokio::test(start_paused = true)]
async fn a_lock_alive_at_the_sweep_is_renewed_on_time_with_a_short_ttl() {
    let ttl = Duration::from_millis(25);
    let backend = Arc::new(Scripted::default());
    let refresher = Refresher::new(Arc::clone(&backend), ttl, None, Default::default());
    let sent = Instant::now();
    let lock = refresher.keep(lease_with(&backend, "k", ttl), sent, 1, None);
    let first = sent + ttl / 2;
    tokio::time::sleep_until(first - Duration::from_millis(1)).await;
    assert_eq!(
        backend.renewals.load(Ordering::SeqCst),
        0,
        "not before ttl/2"
    );
    tokio::time::sleep_until(first + Duration::from_millis(1)).await;
    assert_eq!(backend.renewals.load(Ordering::SeqCst), 1, "at ttl/2");
    tokio::time::sleep_until(sent + ttl * 4).await;
    // Each renewal is sent at the millisecond after it is due (tokio's timer).
    let renewals = backend.renewals.load(Ordering::SeqCst);
    assert!((7..=8).contains(&renewals), "one per ttl/2: {renewals}");
    assert!(!lock.liveness.fire_if_expired(), "kept past its first ttl");
}
