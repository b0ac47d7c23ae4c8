//! The refresher's task: takes new locks and releases from the inbox (sweeping the new
//! locks nobody else can cancel once per sweep period), renews the locks that come due in
//! batches, and ends the locks whose tokens fire.

use std::collections::VecDeque;
use std::future::Future;
use std::mem;
#[cfg(test)]
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::FutureExt;
use tokio::time::{sleep_until, Instant};

use super::kept_lock::{release, KeptLock};
use super::schedule::Schedule;
use super::{Core, BATCH_MAX, IDLE_LINGER, RELEASES_IN_FLIGHT};
use crate::backend::{Backend, ClockJump, Renewals};
use crate::error::chain;
use crate::observe::Refreshed;
use crate::util;

/// Runs until the refresher has had nothing to keep for [`IDLE_LINGER`].
pub(super) async fn run<B: Backend>(core: Arc<Core<B>>) {
    let mut task = Task {
        schedule: Schedule::new(),
        to_release: VecDeque::new(),
        next_sweep: None,
        spare: Vec::new(),
        core,
    };
    task.run().await;
}

/// The task's own state; dropped (the runtime shut down, or the task ended), it lets the
/// next lock start a new task.
struct Task<B: Backend> {
    core: Arc<Core<B>>,
    schedule: Schedule<Weak<KeptLock<B>>>,
    /// Locks to release once fewer than [`RELEASES_IN_FLIGHT`] releases are in flight.
    to_release: VecDeque<Arc<KeptLock<B>>>,
    /// When the task sweeps the new locks nobody else can cancel (`Inbox::fresh`); `None`
    /// while there are none (the next one wakes the task).
    next_sweep: Option<Instant>,
    /// An empty vector with the capacity of the last sweep's: swapped with the inbox's
    /// at each sweep, so that sweeping allocates nothing once warm.
    spare: Vec<Weak<KeptLock<B>>>,
}

/// One batch's renewals: the locks, when it was sent, and one result per lock (`None`
/// when every lock's token fired before the reply, and the request was dropped).
struct Renewed<B: Backend> {
    locks: Vec<Arc<KeptLock<B>>>,
    sent: Instant,
    results: Option<Renewals>,
}

impl<B: Backend> Task<B> {
    async fn run(&mut self) {
        let mut watches = FuturesUnordered::new();
        let mut releases = FuturesUnordered::new();
        let mut batches = FuturesUnordered::new();
        let mut idle_since: Option<Instant> = None;
        loop {
            let now = Instant::now();
            let (to_watch, next_watch) = self.admit(now);
            for lock in to_watch {
                watches.push(watch(lock));
            }
            for batch in self.due(now) {
                batches.push(renew(batch));
            }

            while releases.len() < RELEASES_IN_FLIGHT {
                let Some(lock) = self.to_release.pop_front() else {
                    break;
                };
                releases.push(release(lock));
            }

            let busy = !(watches.is_empty()
                && releases.is_empty()
                && batches.is_empty()
                && self.schedule.is_empty()
                && next_watch.is_none()
                && self.next_sweep.is_none());
            let wake_at = if busy {
                idle_since = None;
                next_watch
                    .into_iter()
                    .chain(self.schedule.next())
                    .chain(self.next_sweep)
                    .min()
            } else {
                let since = *idle_since.get_or_insert(now);
                if now >= since + IDLE_LINGER && self.retire() {
                    return;
                }
                Some(since + IDLE_LINGER)
            };
            let wakeup = tokio::select! {
                biased;
                Some(lock) = watches.next() => Wakeup::Fired(lock),
                Some(()) = releases.next() => Wakeup::Look,
                Some(renewed) = batches.next() => Wakeup::Renewed(renewed),
                () = self.core.wake.notified() => Wakeup::Look,
                () = util::sleep_until(wake_at) => Wakeup::Look,
            };
            match wakeup {
                Wakeup::Fired(lock) => self.to_release.extend(claimed(lock)),
                Wakeup::Renewed(renewed) => self.apply(renewed),
                Wakeup::Look => {}
            }
            // Whatever else is ready is taken now, not one look per wake-up: a process
            // dropping many guards at once has many releases ending together.
            while let Some(Some(lock)) = watches.next().now_or_never() {
                self.to_release.extend(claimed(lock));
            }
            while let Some(Some(())) = releases.next().now_or_never() {}
            while let Some(Some(renewed)) = batches.next().now_or_never() {
                self.apply(renewed);
            }
        }
    }

    /// Takes what the inbox holds by `now`: new locks go into the schedule, released
    /// ones into the release queue. Returns the locks whose tokens are to be watched from
    /// now on, and when the next new lock is due to be taken.
    fn admit(&mut self, now: Instant) -> (KeptLocks<B>, Option<Instant>) {
        let Taken {
            incoming,
            swept,
            to_watch,
            released,
            next_watch,
        } = self.take_inbox(now);
        let mut watch = Vec::new();
        if let Some(swept) = swept {
            self.admit_swept(swept, &mut watch);
        }
        for lock in incoming {
            if lock.ending() {
                self.to_release.extend(claimed(lock));
                continue;
            }
            let due = lock.liveness.sent() + self.core.timing.interval;
            self.schedule.renew_at(due, Arc::downgrade(&lock));
            #[cfg(test)]
            self.core.scheduled.fetch_add(1, Ordering::Relaxed);
            if lock.start_watch() {
                watch.push(lock);
            }
        }
        watch.extend(to_watch.into_iter().filter(|lock| lock.start_watch()));
        self.to_release.extend(released);
        (watch, next_watch)
    }

    /// Schedules the first renewal of each lock of a sweep whose guard is still there, at
    /// its acquire plus ttl/2 (or releases it if its token fired), and keeps the emptied
    /// vector for the next sweep. A lock handed out since it came is watched from now on
    /// if nobody watches it yet.
    fn admit_swept(&mut self, mut swept: Vec<Weak<KeptLock<B>>>, watch: &mut KeptLocks<B>) {
        let interval = self.core.timing.interval;
        let mut live: Vec<(Instant, Weak<KeptLock<B>>)> = Vec::new();
        for weak in swept.drain(..) {
            // A lock whose guard has gone, released already, costs nothing more.
            let Some(lock) = weak.upgrade() else {
                continue;
            };
            if lock.ending() {
                self.to_release.extend(claimed(lock));
                continue;
            }
            live.push((lock.liveness.sent() + interval, weak));
            if lock.start_watch() {
                watch.push(lock);
            }
        }
        // Their requests may have been answered out of the order they were sent in.
        live.sort_by_key(|(due, _)| *due);
        for (due, weak) in live {
            self.schedule.first_at(due, weak);
            #[cfg(test)]
            self.core.scheduled.fetch_add(1, Ordering::Relaxed);
        }
        self.spare = swept;
    }

    /// The locks due by `now` (and those due within [`Timing::coalesce`] after it, which
    /// share their batches), in batches to renew; those whose tokens have fired go to the
    /// release queue unless someone else has claimed their end.
    ///
    /// [`Timing::coalesce`]: super::Timing
    fn due(&mut self, now: Instant) -> Vec<KeptLocks<B>> {
        let (due, ended) = due_locks(self.schedule.due(now + self.core.timing.coalesce));
        self.to_release
            .extend(ended.into_iter().filter_map(claimed));
        batches_of(due)
    }

    /// Takes the locks whose watch starts by `now`, the releases handed over, and, once
    /// the sweep is due, every new lock nobody else can cancel; the next sweep is then
    /// due one sweep period from now if this one found any, or some have come since.
    fn take_inbox(&mut self, now: Instant) -> Taken<B> {
        let mut inbox = util::lock(&self.core.inbox);
        let sweep = self.core.timing.sweep;
        let oldest_due = inbox.fresh_since.map(|since| since + sweep);
        let swept = if self.next_sweep.is_some_and(|at| at <= now)
            || oldest_due.is_some_and(|at| at <= now)
        {
            self.next_sweep = None;
            inbox.fresh_since = None;
            let mut swept = mem::take(&mut self.spare);
            mem::swap(&mut inbox.fresh, &mut swept);
            Some(swept)
        } else {
            None
        };
        // A sweep that found locks is followed by another one period later, whether or
        // not more came meanwhile: under a steady stream of locks the task wakes once
        // per period, and only a sweep that finds none lets the next lock wake it. A
        // lock that came since is swept at most one period after the first of them
        // came, however late the task looks (a runtime whose clock was stopped, say).
        let found = swept.as_ref().is_some_and(|swept| !swept.is_empty());
        if self.next_sweep.is_none() && found {
            self.next_sweep = Some(now + sweep);
        }
        if let Some(at) = inbox.fresh_since.map(|since| since + sweep) {
            self.next_sweep = Some(self.next_sweep.map_or(at, |next| next.min(at)));
        }
        inbox.sweep_armed = self.next_sweep.is_some();
        let mut incoming = Vec::new();
        while let Some((at, _)) = inbox.incoming.front() {
            if *at > now {
                break;
            }
            if let Some((_, weak)) = inbox.incoming.pop_front() {
                // A lock whose guard has gone, released already, costs nothing more.
                incoming.extend(weak.upgrade());
            }
        }
        Taken {
            next_watch: inbox.incoming.front().map(|(at, _)| *at),
            incoming,
            swept,
            to_watch: mem::take(&mut inbox.watch),
            released: mem::take(&mut inbox.released),
        }
    }

    /// Ends the task if the inbox is empty; false when new work came in meanwhile.
    fn retire(&self) -> bool {
        let mut inbox = util::lock(&self.core.inbox);
        if !inbox.incoming.is_empty()
            || !inbox.fresh.is_empty()
            || !inbox.watch.is_empty()
            || !inbox.released.is_empty()
        {
            return false;
        }
        inbox.running = false;
        true
    }

    /// What one batch found, lock by lock.
    fn apply(&mut self, renewed: Renewed<B>) {
        let Renewed {
            locks,
            sent,
            results,
        } = renewed;
        let timing = self.core.timing;
        let Some(Renewals { results, clock }) = results else {
            // Every token fired before the reply: no renewal was answered in time.
            for _ in &locks {
                self.core.meters.renewed(Refreshed::Error);
            }
            self.to_release
                .extend(locks.into_iter().filter_map(claimed));
            return;
        };
        let early = self.clock_moved(clock, &locks);
        for (lock, result) in locks.into_iter().zip(results) {
            self.core.meters.renewed(match &result {
                Ok(true) => Refreshed::Ok,
                Ok(false) => Refreshed::Lost,
                Err(_) => Refreshed::Error,
            });
            if lock.ending() {
                self.to_release.extend(claimed(lock));
                continue;
            }
            match result {
                Ok(true) => {
                    lock.liveness.renewed(sent + lock.lease.validity());
                    self.schedule
                        .renew_at(sent + timing.interval, Arc::downgrade(&lock));
                }
                Ok(false) => lock.lost(early),
                Err(err) => {
                    tracing::warn!(
                        key = %lock.lease.key(), id = %lock.lease.id(), error = %chain(&err),
                        "refresh failed; retrying"
                    );
                    let at = (Instant::now() + timing.retry).min(lock.liveness.deadline());
                    self.schedule.retry_at(at, Arc::downgrade(&lock));
                }
            }
        }
    }
}

impl<B: Backend> Task<B> {
    /// Counts and logs a jump of the server's clock that a batch of `locks` saw; true
    /// when it went forward, so that the locks the batch found gone were likely expired
    /// early by it.
    fn clock_moved(&self, clock: Option<ClockJump>, locks: &[Arc<KeptLock<B>>]) -> bool {
        let Some(jump) = clock else {
            return false;
        };
        self.core
            .meters
            .clock_jump(matches!(jump, ClockJump::Forward(_)));
        let key = locks.first().map(|lock| lock.lease.key());
        match jump {
            ClockJump::Forward(by) => {
                tracing::warn!(key = ?key, ahead_ms = by.as_millis(), "the server's clock jumped forward: its locks may expire early");
                true
            }
            ClockJump::Back(by) => {
                tracing::warn!(key = ?key, behind_ms = by.as_millis(), "the server's clock went back: its locks live longer");
                false
            }
        }
    }
}

impl<B: Backend> Drop for Task<B> {
    fn drop(&mut self) {
        let mut inbox = util::lock(&self.core.inbox);
        inbox.running = false;
        inbox.sweep_armed = false;
        drop(inbox);
        // Releases dropped with the task have recorded `Error::Cancelled`.
        self.core.ended.notify_waiters();
    }
}

/// Completes when `lock`'s token fires.
async fn watch<B: Backend>(lock: Arc<KeptLock<B>>) -> Arc<KeptLock<B>> {
    lock.liveness.token().cancelled().await;
    lock
}

/// Locks, as the task handles them.
type KeptLocks<B> = Vec<Arc<KeptLock<B>>>;

/// The locks of `due` whose guards are still there: those to renew, and those whose
/// tokens have fired (or fire now, their deadline passed), to release unless someone
/// else has claimed their end.
fn due_locks<B: Backend>(due: Vec<Weak<KeptLock<B>>>) -> (KeptLocks<B>, KeptLocks<B>) {
    due.iter()
        .filter_map(Weak::upgrade)
        .partition(|lock| !lock.ending())
}

/// `live` in batches of at most [`BATCH_MAX`], every lock of a batch with the same
/// [`batch_tag`](Backend::batch_tag): [`Backend::renew`] sends a batch as one script, so
/// on a cluster its keys must share a slot.
fn batches_of<B: Backend>(mut live: Vec<Arc<KeptLock<B>>>) -> Vec<Vec<Arc<KeptLock<B>>>> {
    fn tag<B: Backend>(lock: &KeptLock<B>) -> Option<&str> {
        lock.lease.backend.batch_tag(&lock.lease.call)
    }
    if live.iter().any(|lock| tag(lock).is_some()) {
        live.sort_by(|a, b| tag(a).cmp(&tag(b)));
    }
    let mut batches: Vec<Vec<Arc<KeptLock<B>>>> = Vec::new();
    for lock in live {
        match batches.last_mut() {
            Some(batch) if batch.len() < BATCH_MAX && tag(&batch[0]) == tag(&lock) => {
                batch.push(lock);
            }
            _ => batches.push(vec![lock]),
        }
    }
    batches
}

/// `lock`, for the task to release, if nobody had claimed its end (its guard's `unlock`
/// or drop, or a renewal that found it lost).
fn claimed<B: Backend>(lock: Arc<KeptLock<B>>) -> Option<Arc<KeptLock<B>>> {
    lock.liveness.claim_end().then_some(lock)
}

/// What the task took from the inbox.
struct Taken<B: Backend> {
    /// The new locks with a parent, to renew and watch.
    incoming: Vec<Arc<KeptLock<B>>>,
    /// The new locks nobody else can cancel, when the sweep was due: those whose guards
    /// are still there are to renew.
    swept: Option<Vec<Weak<KeptLock<B>>>>,
    /// The locks whose tokens were handed out since.
    to_watch: Vec<Arc<KeptLock<B>>>,
    /// The locks to release.
    released: Vec<Arc<KeptLock<B>>>,
    /// When the next lock's watch starts.
    next_watch: Option<Instant>,
}

/// What woke the task.
enum Wakeup<B: Backend> {
    /// A watched token fired.
    Fired(Arc<KeptLock<B>>),
    Renewed(Renewed<B>),
    /// A release ended, new work came in, or a time came: look again.
    Look,
}

/// Renews `locks` in one call to the backend; fires the token of each whose validity
/// deadline passes before the reply ([`CancelReason::Expired`](crate::CancelReason)),
/// and drops the call once every token has fired.
async fn renew<B: Backend>(locks: Vec<Arc<KeptLock<B>>>) -> Renewed<B> {
    let sent = Instant::now();
    let results = {
        let items: Vec<_> = locks
            .iter()
            .map(|lock| lock.lease.renewal(&lock.liveness, lock.fencing_token))
            .collect();
        let backend = Arc::clone(&locks[0].lease.backend);
        let call = backend.renew(&items);
        expire_while(&locks, call).await
    };
    Renewed {
        locks,
        sent,
        results,
    }
}

/// Awaits `call`, firing each lock's token as its deadline passes; `None` once every
/// token has fired first.
async fn expire_while<B: Backend, T>(
    locks: &[Arc<KeptLock<B>>],
    call: impl Future<Output = T>,
) -> Option<T> {
    tokio::pin!(call);
    loop {
        let first = locks
            .iter()
            .filter(|lock| !lock.liveness.is_fired())
            .map(|lock| lock.liveness.deadline())
            .min()?;
        tokio::select! {
            biased;
            results = &mut call => return Some(results),
            () = sleep_until(first) => {
                let now = Instant::now();
                for lock in locks {
                    if !lock.liveness.is_fired() && now >= lock.liveness.deadline() {
                        lock.expired();
                    }
                }
            }
        }
    }
}
