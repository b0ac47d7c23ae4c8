//! The refresher's task: takes new locks and releases from the inbox, renews the locks
//! that come due in batches, and ends the locks whose tokens fire.

use std::collections::VecDeque;
use std::future::Future;
use std::mem;
use std::sync::{Arc, Weak};

use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::FutureExt;
use tokio::time::{sleep_until, Instant};

use super::entry::{release, Entry};
use super::schedule::Schedule;
use super::{Core, BATCH_MAX, IDLE_LINGER, RELEASES_IN_FLIGHT};
use crate::backend::Backend;
use crate::error::{chain, Error};
use crate::observe::Refreshed;
use crate::util;

/// Runs until the refresher has had nothing to keep for [`IDLE_LINGER`].
pub(super) async fn run<B: Backend>(core: Arc<Core<B>>) {
    let mut task = Task {
        schedule: Schedule::new(),
        to_release: VecDeque::new(),
        core,
    };
    task.run().await;
}

/// The task's own state; dropped (the runtime shut down, or the task ended), it lets the
/// next lock start a new task.
struct Task<B: Backend> {
    core: Arc<Core<B>>,
    schedule: Schedule<Weak<Entry<B>>>,
    /// Locks to release once fewer than [`RELEASES_IN_FLIGHT`] releases are in flight.
    to_release: VecDeque<Arc<Entry<B>>>,
}

/// One batch's renewals: the locks, when it was sent, and one result per lock (`None`
/// when every lock's token fired before the reply, and the request was dropped).
struct Renewed<B: Backend> {
    entries: Vec<Arc<Entry<B>>>,
    sent: Instant,
    results: Option<Vec<Result<bool, Error>>>,
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
            for entry in to_watch {
                watches.push(watch(entry));
            }
            for batch in self.due(now) {
                batches.push(renew(batch));
            }

            while releases.len() < RELEASES_IN_FLIGHT {
                let Some(entry) = self.to_release.pop_front() else {
                    break;
                };
                releases.push(release(entry));
            }

            let busy = !(watches.is_empty()
                && releases.is_empty()
                && batches.is_empty()
                && self.schedule.is_empty()
                && next_watch.is_none());
            let wake_at = if busy {
                idle_since = None;
                next_watch.into_iter().chain(self.schedule.next()).min()
            } else {
                let since = *idle_since.get_or_insert(now);
                if now >= since + IDLE_LINGER && self.retire() {
                    return;
                }
                Some(since + IDLE_LINGER)
            };
            let event = tokio::select! {
                biased;
                Some(entry) = watches.next() => Event::Fired(entry),
                Some(()) = releases.next() => Event::Look,
                Some(renewed) = batches.next() => Event::Renewed(renewed),
                () = self.core.wake.notified() => Event::Look,
                () = sleep_until_some(wake_at) => Event::Look,
            };
            match event {
                Event::Fired(entry) => self.to_release.extend(claimed(entry)),
                Event::Renewed(renewed) => self.apply(renewed),
                Event::Look => {}
            }
            // Whatever else is ready is taken now, not one look per event: a process
            // dropping many guards at once has many releases ending together.
            while let Some(Some(entry)) = watches.next().now_or_never() {
                self.to_release.extend(claimed(entry));
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
    fn admit(&mut self, now: Instant) -> (Entries<B>, Option<Instant>) {
        let Taken {
            young,
            to_watch,
            released,
            next_watch,
        } = self.take_inbox(now);
        let mut watch = Vec::new();
        for entry in young {
            if entry.ending() {
                self.to_release.extend(claimed(entry));
                continue;
            }
            let due = entry.liveness.sent() + self.core.timing.interval;
            self.schedule.renew_at(due, Arc::downgrade(&entry));
            if entry.start_watch() {
                watch.push(entry);
            }
        }
        watch.extend(to_watch.into_iter().filter(|entry| entry.start_watch()));
        self.to_release.extend(released);
        (watch, next_watch)
    }

    /// The locks due by `now`, in batches to renew; those whose tokens have fired go to
    /// the release queue unless someone else has claimed their end.
    fn due(&mut self, now: Instant) -> Vec<Entries<B>> {
        let (due, ended) = due_entries(self.schedule.due(now));
        self.to_release
            .extend(ended.into_iter().filter_map(claimed));
        batches_of(due)
    }

    /// Takes the locks whose watch starts by `now` and the releases handed over.
    fn take_inbox(&self, now: Instant) -> Taken<B> {
        let mut inbox = util::lock(&self.core.inbox);
        let mut young = Vec::new();
        while let Some((at, _)) = inbox.young.front() {
            if *at > now {
                break;
            }
            if let Some((_, weak)) = inbox.young.pop_front() {
                // A lock whose guard has gone, released already, costs nothing more.
                young.extend(weak.upgrade());
            }
        }
        Taken {
            next_watch: inbox.young.front().map(|(at, _)| *at),
            young,
            to_watch: mem::take(&mut inbox.watch),
            released: mem::take(&mut inbox.released),
        }
    }

    /// Ends the task if the inbox is empty; false when new work came in meanwhile.
    fn retire(&self) -> bool {
        let mut inbox = util::lock(&self.core.inbox);
        if !inbox.young.is_empty() || !inbox.watch.is_empty() || !inbox.released.is_empty() {
            return false;
        }
        inbox.running = false;
        true
    }

    /// What one batch found, lock by lock.
    fn apply(&mut self, renewed: Renewed<B>) {
        let Renewed {
            entries,
            sent,
            results,
        } = renewed;
        let timing = self.core.timing;
        let Some(results) = results else {
            // Every token fired before the reply: no renewal was answered in time.
            for _ in &entries {
                self.core.meters.renewed(Refreshed::Error);
            }
            self.to_release
                .extend(entries.into_iter().filter_map(claimed));
            return;
        };
        for (entry, result) in entries.into_iter().zip(results) {
            self.core.meters.renewed(match &result {
                Ok(true) => Refreshed::Ok,
                Ok(false) => Refreshed::Lost,
                Err(_) => Refreshed::Error,
            });
            if entry.ending() {
                self.to_release.extend(claimed(entry));
                continue;
            }
            match result {
                Ok(true) => {
                    entry.liveness.renewed(sent + entry.lease.validity());
                    self.schedule
                        .renew_at(sent + timing.interval, Arc::downgrade(&entry));
                }
                Ok(false) => entry.lost(),
                Err(err) => {
                    tracing::warn!(
                        key = %entry.lease.key(), id = %entry.lease.id(), error = %chain(&err),
                        "refresh failed; retrying"
                    );
                    let at = (Instant::now() + timing.retry).min(entry.liveness.deadline());
                    self.schedule.retry_at(at, Arc::downgrade(&entry));
                }
            }
        }
    }
}

impl<B: Backend> Drop for Task<B> {
    fn drop(&mut self) {
        util::lock(&self.core.inbox).running = false;
        // Releases dropped with the task have recorded `Error::Cancelled`.
        self.core.ended.notify_waiters();
    }
}

/// Completes when `entry`'s token fires.
async fn watch<B: Backend>(entry: Arc<Entry<B>>) -> Arc<Entry<B>> {
    entry.liveness.token().cancelled().await;
    entry
}

/// Locks, as the task handles them.
type Entries<B> = Vec<Arc<Entry<B>>>;

/// The locks of `due` whose guards are still there: those to renew, and those whose
/// tokens have fired (or fire now, their deadline passed), to release unless someone
/// else has claimed their end.
fn due_entries<B: Backend>(due: Vec<Weak<Entry<B>>>) -> (Entries<B>, Entries<B>) {
    due.iter()
        .filter_map(Weak::upgrade)
        .partition(|entry| !entry.ending())
}

/// `live` in batches of at most [`BATCH_MAX`], every lock of a batch with the same
/// [`batch_tag`](Backend::batch_tag): [`Backend::renew`] sends a batch as one script, so
/// on a cluster its keys must share a slot.
fn batches_of<B: Backend>(mut live: Vec<Arc<Entry<B>>>) -> Vec<Vec<Arc<Entry<B>>>> {
    fn tag<B: Backend>(entry: &Entry<B>) -> Option<&str> {
        entry.lease.backend.batch_tag(&entry.lease.call)
    }
    if live.iter().any(|entry| tag(entry).is_some()) {
        live.sort_by(|a, b| tag(a).cmp(&tag(b)));
    }
    let mut batches: Vec<Vec<Arc<Entry<B>>>> = Vec::new();
    for entry in live {
        match batches.last_mut() {
            Some(batch) if batch.len() < BATCH_MAX && tag(&batch[0]) == tag(&entry) => {
                batch.push(entry);
            }
            _ => batches.push(vec![entry]),
        }
    }
    batches
}

/// `entry`, for the task to release, if nobody had claimed its end (its guard's `unlock`
/// or drop, or a renewal that found it lost).
fn claimed<B: Backend>(entry: Arc<Entry<B>>) -> Option<Arc<Entry<B>>> {
    entry.liveness.claim_end().then_some(entry)
}

/// What the task took from the inbox.
struct Taken<B: Backend> {
    /// The new locks, to renew (and watch, if anyone else may cancel them).
    young: Vec<Arc<Entry<B>>>,
    /// The locks whose tokens were handed out since.
    to_watch: Vec<Arc<Entry<B>>>,
    /// The locks to release.
    released: Vec<Arc<Entry<B>>>,
    /// When the next lock's watch starts.
    next_watch: Option<Instant>,
}

/// What woke the task.
enum Event<B: Backend> {
    /// A watched token fired.
    Fired(Arc<Entry<B>>),
    Renewed(Renewed<B>),
    /// A release ended, new work came in, or a time came: look again.
    Look,
}

/// Renews `entries` in one call to the backend; fires the token of each whose validity
/// deadline passes before the reply ([`CancelReason::Expired`](crate::CancelReason)),
/// and drops the call once every token has fired.
async fn renew<B: Backend>(entries: Vec<Arc<Entry<B>>>) -> Renewed<B> {
    let sent = Instant::now();
    let results = {
        let items: Vec<_> = entries
            .iter()
            .map(|entry| entry.lease.renewal(&entry.liveness))
            .collect();
        let backend = Arc::clone(&entries[0].lease.backend);
        let call = backend.renew(&items);
        expire_while(&entries, call).await
    };
    Renewed {
        entries,
        sent,
        results,
    }
}

/// Awaits `call`, firing each lock's token as its deadline passes; `None` once every
/// token has fired first.
async fn expire_while<B: Backend, T>(
    entries: &[Arc<Entry<B>>],
    call: impl Future<Output = T>,
) -> Option<T> {
    tokio::pin!(call);
    loop {
        let first = entries
            .iter()
            .filter(|entry| !entry.liveness.is_fired())
            .map(|entry| entry.liveness.deadline())
            .min()?;
        tokio::select! {
            biased;
            results = &mut call => return Some(results),
            () = sleep_until(first) => {
                let now = Instant::now();
                for entry in entries {
                    if !entry.liveness.is_fired() && now >= entry.liveness.deadline() {
                        entry.expired();
                    }
                }
            }
        }
    }
}

/// Sleeps until `at`, or forever when `None`.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => sleep_until(at).await,
        None => std::future::pending().await,
    }
}
