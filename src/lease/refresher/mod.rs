//! The refresher: one task per mutex (and runtime) that keeps every lock the mutex holds.
//!
//! A guard holds a [`KeptLock`], not a task. The refresher renews the locks that come due
//! in batches ([`Backend::renew`]: one `renew.lua` per server, per hash tag on a cluster),
//! fires a lock's token at its validity deadline when no renewal was answered in time,
//! fires it as lost when a renewal finds the lock gone, and releases the locks whose
//! tokens fired or whose guards were dropped.
//!
//! A lock's token can be cancelled from outside once it has a parent or was handed out
//! (`Guard::cancellation_token`), so the refresher then watches it. The task takes a new
//! lock with a parent [`WATCH_AFTER`] after the acquire. A lock nobody else can cancel
//! goes into a list the task sweeps once per sweep period ([`Timing::sweep`], at most
//! ttl/8), without waking it: the locks whose guards have gone by then (the usual
//! `write` → `unlock`) cost the refresher a slot in a vector and nothing else, and those
//! still held are scheduled for their first renewal, ttl/2 after their acquire, which
//! comes after the sweep (at most two sweep periods, ttl/4, after the acquire).

mod kept_lock;
mod run;
mod schedule;
#[cfg(test)]
mod task_tests;

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub(crate) use kept_lock::KeptLock;

use super::liveness::Liveness;
use super::HeldLease;
use crate::backend::Backend;
use crate::observe::Meters;
use crate::util;

/// How long after its acquire the refresher takes a new lock with a parent and starts
/// watching its token (tokio's timer has millisecond resolution; a lock without a parent
/// waits for the sweep instead, [`Timing::sweep`]). A parent cancelled before then has
/// the lock released when the watch starts, at most about this much later; a dropped
/// guard or an `unlock` releases at once, and a token handed out by
/// `Guard::cancellation_token` is watched at once.
const WATCH_AFTER: Duration = Duration::from_millis(1);

/// The longest sweep period ([`Timing::sweep`]), whatever the TTL: a task with new locks
/// wakes at most 20 times a second to sweep them.
const SWEEP_MAX: Duration = Duration::from_millis(50);

/// The shortest sweep period: tokio's timer resolution.
const SWEEP_MIN: Duration = Duration::from_millis(1);

/// The longest a renewal is sent ahead of its time ([`Timing::coalesce`]), whatever the
/// TTL.
const COALESCE_MAX: Duration = Duration::from_millis(4);

/// The most locks renewed by one script: a few hundred microseconds of server time.
const BATCH_MAX: usize = 128;

/// The most releases one refresher has in flight; the others wait their turn in the
/// task rather than in the connection, where a response timeout would run out while they
/// queue (a process dropping a hundred thousand guards at once).
const RELEASES_IN_FLIGHT: usize = 1_024;

/// How long an idle refresher waits for a new lock before its task ends.
const IDLE_LINGER: Duration = Duration::from_secs(5);

/// The refresher of one mutex or semaphore (and its clones): one [`Core`] per runtime
/// that has held one of its locks, so that each runtime's locks are kept by a task on
/// that runtime.
pub(crate) struct Refresher<B: Backend> {
    backend: Arc<B>,
    timing: Timing,
    tracker: Option<TaskTracker>,
    meters: Meters,
    cores: Mutex<Vec<Arc<Core<B>>>>,
}

/// The renewal times of one mutex's locks, from its TTL, and how long one may be held.
#[derive(Debug, Clone, Copy)]
struct Timing {
    /// ttl/2, as in Go.
    interval: Duration,
    /// ttl/8 after a failed renewal.
    retry: Duration,
    /// How far ahead of its time a renewal goes in the batch of renewals due now: 1 % of
    /// the TTL, at most [`COALESCE_MAX`]. Renewals due in the same few milliseconds then
    /// share one script (at 50,000 renewals a second, batches of about 128 rather than
    /// the 50 or so one millisecond of tokio's timer holds), and a lock renewed that much
    /// early is no less safe: its next renewal is due ttl/2 after this one's send.
    coalesce: Duration,
    /// How often the task sweeps the new locks nobody else can cancel ([`Inbox::fresh`]):
    /// ttl/8, at most 50 ms and at least 1 ms (tokio's timer resolution). A lock is swept
    /// at most two periods after its acquire, at most ttl/4: before its first renewal.
    sweep: Duration,
    /// [`Builder::max_hold`](crate::Builder::max_hold): no lock is kept longer after its
    /// acquiring request was sent.
    max_hold: Option<Duration>,
}

impl Timing {
    fn new(ttl: Duration) -> Self {
        Self {
            interval: ttl / 2,
            retry: ttl / 8,
            sweep: (ttl / 8).clamp(SWEEP_MIN, SWEEP_MAX),
            coalesce: (ttl / 100).min(COALESCE_MAX),
            max_hold: None,
        }
    }
}

impl<B: Backend> Refresher<B> {
    /// The refresher of a mutex on `backend` whose locks live `ttl` without a renewal;
    /// each lock counts on `tracker` until its release is done, and in `meters` until
    /// its end.
    pub(crate) fn new(
        backend: Arc<B>,
        ttl: Duration,
        tracker: Option<TaskTracker>,
        meters: Meters,
    ) -> Self {
        Self {
            backend,
            timing: Timing::new(ttl),
            tracker,
            meters,
            cores: Mutex::new(Vec::new()),
        }
    }

    /// The refresher whose locks are held at most `max_hold` after their acquiring
    /// request was sent, when it is set.
    pub(crate) fn with_max_hold(mut self, max_hold: Option<Duration>) -> Self {
        self.timing.max_hold = max_hold;
        self
    }

    pub(crate) fn backend(&self) -> &Arc<B> {
        &self.backend
    }

    /// Keeps the lock `lease` took, with `fencing_token`, by a request sent at `sent`,
    /// until its guard goes: its token is a child of `parent`, and it is surely held until `sent` plus the lease's
    /// validity. Must run inside a Tokio runtime, whose refresher task keeps it.
    pub(crate) fn keep(
        &self,
        lease: Arc<HeldLease<B>>,
        sent: Instant,
        fencing_token: u64,
        parent: Option<CancellationToken>,
    ) -> Arc<KeptLock<B>> {
        let watch = parent.is_some();
        let held = self.meters.held(lease.kind);
        let mut liveness = Liveness::new(parent, sent, sent + lease.validity(), held);
        if let Some(until) = self.timing.max_hold.and_then(|max| sent.checked_add(max)) {
            liveness = liveness.capped(until);
        }
        let core = self.core();
        let lock = Arc::new(KeptLock::new(
            lease,
            liveness,
            fencing_token,
            Arc::clone(&core),
            watch,
        ));
        core.register(&lock, watch);
        lock
    }

    /// The core of the current runtime, made on first use.
    fn core(&self) -> Arc<Core<B>> {
        let handle = Handle::current();
        let runtime = handle.id();
        let mut cores = util::lock(&self.cores);
        if let Some(core) = cores.iter().find(|core| core.runtime == runtime) {
            return Arc::clone(core);
        }
        // The cores of runtimes that have shut down are idle: drop them.
        cores.retain(|core| !core.idle());
        let core = Arc::new(Core {
            runtime,
            handle,
            timing: self.timing,
            tracker: self.tracker.clone(),
            meters: self.meters.clone(),
            inbox: Mutex::new(Inbox {
                incoming: VecDeque::new(),
                fresh: Vec::new(),
                fresh_since: None,
                sweep_armed: false,
                watch: Vec::new(),
                released: Vec::new(),
                running: false,
            }),
            wake: Notify::new(),
            ended: Notify::new(),
            #[cfg(test)]
            scheduled: std::sync::atomic::AtomicUsize::new(0),
        });
        cores.push(Arc::clone(&core));
        core
    }
}

impl<B: Backend> fmt::Debug for Refresher<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Refresher")
            .field("timing", &self.timing)
            .finish_non_exhaustive()
    }
}

/// The refresher of one runtime: its task's inbox, and how to start the task.
pub(crate) struct Core<B: Backend> {
    runtime: tokio::runtime::Id,
    handle: Handle,
    timing: Timing,
    tracker: Option<TaskTracker>,
    /// Where renewals and guarded pipelines are counted.
    pub(super) meters: Meters,
    inbox: Mutex<Inbox<B>>,
    /// New work for a running task: a lock whose watch comes sooner than the task looks
    /// next, a token to watch, or a release (never a lock for the sweep).
    wake: Notify,
    /// A release sent by the task has ended (or was dropped): an `unlock` waiting for
    /// what it found looks again.
    ended: Notify,
    /// How many new locks the task has put in its schedule.
    #[cfg(test)]
    scheduled: std::sync::atomic::AtomicUsize,
}

/// What the guards hand the task, and whether it runs.
struct Inbox<B: Backend> {
    /// New locks with a parent, with the time the task takes them and watches their
    /// tokens, in that order.
    incoming: VecDeque<(Instant, Weak<KeptLock<B>>)>,
    /// New locks nobody else can cancel, in the order they came: the task takes them all
    /// at its next sweep, and schedules those whose guards are still there.
    fresh: Vec<Weak<KeptLock<B>>>,
    /// When the first lock of `fresh` came (`None` while it is empty): `fresh` is swept
    /// at most one sweep period later.
    fresh_since: Option<Instant>,
    /// The running task will sweep `fresh` without being woken (its next sweep is due);
    /// when false, a new lock for the sweep wakes it once.
    sweep_armed: bool,
    /// Locks whose tokens were handed out after the task took them: to watch now.
    watch: Vec<Arc<KeptLock<B>>>,
    /// Locks whose end their guard claimed without sending the release (a drop, an
    /// `unlock` dropped before its reply).
    released: Vec<Arc<KeptLock<B>>>,
    running: bool,
}

impl<B: Backend> Core<B> {
    /// A new lock: watched from [`WATCH_AFTER`] on when `watch` (it has a parent), else
    /// left for the next sweep. Only the first lock after a sweep that left nothing
    /// wakes a running task (to set its next sweep); the others wake nobody.
    fn register(self: &Arc<Self>, lock: &Arc<KeptLock<B>>, watch: bool) {
        let mut inbox = util::lock(&self.inbox);
        if !watch {
            if inbox.fresh.is_empty() {
                inbox.fresh_since = Some(Instant::now());
            }
            inbox.fresh.push(Arc::downgrade(lock));
            let wake = !inbox.sweep_armed;
            inbox.sweep_armed = true;
            self.start_or_wake(inbox, wake);
            return;
        }
        let first = inbox.incoming.is_empty();
        inbox
            .incoming
            .push_back((Instant::now() + WATCH_AFTER, Arc::downgrade(lock)));
        self.start_or_wake(inbox, first);
    }

    /// Watches `lock`'s token from now on.
    fn watch(self: Arc<Self>, lock: Arc<KeptLock<B>>) {
        let mut inbox = util::lock(&self.inbox);
        inbox.watch.push(lock);
        self.start_or_wake(inbox, true);
    }

    /// Releases `lock`, whose end its guard claimed, from the task.
    fn hand_over(self: Arc<Self>, lock: Arc<KeptLock<B>>) {
        let mut inbox = util::lock(&self.inbox);
        inbox.released.push(lock);
        self.start_or_wake(inbox, true);
    }

    /// Starts the task if it is not running, or wakes it when `wake`.
    fn start_or_wake(self: &Arc<Self>, mut inbox: std::sync::MutexGuard<'_, Inbox<B>>, wake: bool) {
        if inbox.running {
            drop(inbox);
            if wake {
                self.wake.notify_one();
            }
            return;
        }
        inbox.running = true;
        drop(inbox);
        // Outside a runtime that has shut down, the task is dropped at once: its
        // releases then record `Error::Cancelled`.
        self.handle.spawn(run::run(Arc::clone(self)));
    }

    /// Whether the task has ended and nothing waits for it.
    fn idle(&self) -> bool {
        let inbox = util::lock(&self.inbox);
        !inbox.running
            && inbox.incoming.is_empty()
            && inbox.fresh.is_empty()
            && inbox.watch.is_empty()
            && inbox.released.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_renewal_has_three_retries_before_the_validity_ends() {
        // From about 21 ms on: below that the 2 ms of the drift margin leave less room.
        for ttl_ms in [25, 400, 4_000, 30_000] {
            let ttl = Duration::from_millis(ttl_ms);
            let timing = Timing::new(ttl);
            assert_eq!(timing.interval, ttl / 2);
            // HeldLease::validity: the TTL minus 1% and 2 ms.
            let validity = ttl - ttl / 100 - Duration::from_millis(2);
            let third_retry = timing.interval + timing.retry * 3;
            assert!(third_retry < validity, "{ttl:?}: {third_retry:?}");
        }
    }

    #[test]
    fn a_renewal_goes_at_most_one_percent_of_the_ttl_early() {
        for ttl_ms in [25, 400, 4_000, 30_000] {
            let ttl = Duration::from_millis(ttl_ms);
            let timing = Timing::new(ttl);
            assert!(timing.coalesce <= ttl / 100, "{ttl:?}");
            assert!(timing.coalesce <= COALESCE_MAX, "{ttl:?}");
        }
        assert_eq!(Timing::new(Duration::from_secs(4)).coalesce, COALESCE_MAX);
    }

    #[test]
    fn a_lock_is_swept_before_its_first_renewal() {
        for ttl_ms in [25, 400, 4_000, 30_000] {
            let ttl = Duration::from_millis(ttl_ms);
            let timing = Timing::new(ttl);
            assert!(timing.sweep >= SWEEP_MIN, "{ttl:?}: {:?}", timing.sweep);
            assert!(timing.sweep <= SWEEP_MAX, "{ttl:?}: {:?}", timing.sweep);
            // Swept at most two periods after the acquire: within ttl/4, before the
            // first renewal at ttl/2.
            let latest = timing.sweep * 2;
            assert!(latest <= ttl / 4, "{ttl:?}: {latest:?}");
            assert!(latest < timing.interval, "{ttl:?}: {latest:?}");
        }
    }
}
