//! One process's subscriber connection and the waiters it wakes.
//!
//! A [`Hub`] keeps a queue of local waiters per release channel, in arrival order, and
//! one Pub/Sub connection subscribed to exactly the channels that have waiters. A
//! release (a message on the channel, or a release made in this process) wakes the
//! first waiter if it is a writer, or every waiting reader if a reader is first, so one
//! release sets off one script per process (or one per reader, who then share the lock).
//! A lost connection wakes every waiter, since a release may have been missed.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use futures_util::StreamExt;
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::error::chain;
use crate::mode::Mode;

/// How long connecting, or one SUBSCRIBE/UNSUBSCRIBE, may take before the connection is
/// taken as lost.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// The first and the largest pause between reconnection attempts (jittered).
const RECONNECT_MIN: Duration = Duration::from_millis(10);
const RECONNECT_MAX: Duration = Duration::from_secs(1);
/// Releases made in this process whose message is still expected back, per channel: a
/// message that is such an echo wakes nobody (the release already did, locally).
const MAX_ECHOES: usize = 64;

/// Every hub of this process, by the connection info of its client.
static HUBS: LazyLock<Mutex<HashMap<String, Weak<Hub>>>> = LazyLock::new(Default::default);

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // No code path panics while holding these locks; a poisoned one is still consistent.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The waiters of one process on one server, and its subscriber connection.
pub(crate) struct Hub {
    client: redis::Client,
    state: Mutex<State>,
    /// Tells the connection task that the set of channels with waiters changed.
    changed: Arc<Notify>,
    /// Stops the connection task when the last handle goes.
    _stop: DropGuard,
    stop: CancellationToken,
}

#[derive(Default)]
struct State {
    channels: HashMap<String, Channel>,
    task: Option<JoinHandle<()>>,
}

/// The waiters on one release channel.
struct Channel {
    /// In arrival order.
    waiters: VecDeque<Arc<Slot>>,
    /// Whether the connection is subscribed to the channel now.
    subscribed: watch::Sender<bool>,
    /// Ids released in this process whose message has not come back yet.
    echoes: VecDeque<String>,
}

impl Channel {
    fn new() -> Self {
        Self {
            waiters: VecDeque::new(),
            subscribed: watch::Sender::new(false),
            echoes: VecDeque::new(),
        }
    }

    /// Wakes the first waiter if it is a writer, or every waiting reader if a reader is
    /// first: readers share the lock, writers take it one at a time.
    fn wake_next(&self) {
        match self.waiters.front() {
            Some(first) if first.mode == Mode::Write => first.wake(),
            Some(_) => self
                .waiters
                .iter()
                .filter(|slot| slot.mode == Mode::Read)
                .for_each(|slot| slot.wake()),
            None => {}
        }
    }

    fn wake_all(&self) {
        self.waiters.iter().for_each(|slot| slot.wake());
    }
}

/// One waiting request.
struct Slot {
    mode: Mode,
    /// Set by a wake-up, cleared before each attempt.
    woken: AtomicBool,
    notify: Notify,
}

impl Slot {
    fn wake(&self) {
        self.woken.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }
}

impl Hub {
    /// The hub of this process for `client`'s server, address, database and user.
    pub(crate) fn shared(client: redis::Client) -> Arc<Self> {
        let id = format!("{:?}", client.get_connection_info());
        let mut hubs = lock(&HUBS);
        hubs.retain(|_, hub| hub.strong_count() > 0);
        if let Some(hub) = hubs.get(&id).and_then(Weak::upgrade) {
            return hub;
        }
        let stop = CancellationToken::new();
        let hub = Arc::new(Self {
            client,
            state: Mutex::default(),
            changed: Arc::new(Notify::new()),
            _stop: stop.clone().drop_guard(),
            stop,
        });
        hubs.insert(id, Arc::downgrade(&hub));
        hub
    }

    /// Whether requests in this process wait on `channel`; a new request then queues
    /// behind them instead of overtaking them.
    pub(crate) fn has_waiters(&self, channel: &str) -> bool {
        lock(&self.state)
            .channels
            .get(channel)
            .is_some_and(|channel| !channel.waiters.is_empty())
    }

    /// Queues a waiter on `channel`, subscribing to it if nobody here waits on it yet.
    /// Must be called within a Tokio runtime: it starts the connection task if needed.
    pub(crate) fn join(self: &Arc<Self>, channel: &str, mode: Mode) -> Waiter {
        let slot = Arc::new(Slot {
            mode,
            woken: AtomicBool::new(false),
            notify: Notify::new(),
        });
        let mut state = lock(&self.state);
        if state.task.as_ref().is_none_or(JoinHandle::is_finished) {
            // First use, or the runtime that ran the task has shut down.
            for channel in state.channels.values() {
                channel.subscribed.send_replace(false);
            }
            state.task = Some(tokio::spawn(run(
                Arc::downgrade(self),
                self.client.clone(),
                Arc::clone(&self.changed),
                self.stop.clone(),
            )));
        }
        let entry = state.channels.entry(channel.to_owned()).or_insert_with(|| {
            self.changed.notify_one();
            Channel::new()
        });
        entry.waiters.push_back(Arc::clone(&slot));
        let subscribed = entry.subscribed.subscribe();
        drop(state);
        Waiter {
            hub: Arc::clone(self),
            channel: channel.to_owned(),
            slot,
            subscribed,
            acquired: false,
        }
    }

    /// A release made in this process published `id` on `channel`: wake the next local
    /// waiters now, and skip the message when it comes back.
    pub(crate) fn released(&self, channel: &str, id: &str) {
        let mut state = lock(&self.state);
        if let Some(channel) = state.channels.get_mut(channel) {
            if *channel.subscribed.borrow() {
                if channel.echoes.len() == MAX_ECHOES {
                    channel.echoes.pop_front();
                }
                channel.echoes.push_back(id.to_owned());
            }
            channel.wake_next();
        }
    }

    /// A message on `channel` from the server.
    fn deliver(&self, channel: &str, id: &[u8]) {
        let mut state = lock(&self.state);
        if let Some(channel) = state.channels.get_mut(channel) {
            if let Some(at) = channel.echoes.iter().position(|echo| echo.as_bytes() == id) {
                channel.echoes.remove(at);
                return;
            }
            channel.wake_next();
        }
    }

    /// The channels to subscribe to and to unsubscribe from, given those subscribed. A
    /// channel whose waiters all left and that has waiters again is still subscribed, and
    /// is marked so here.
    fn diff(&self, subscribed: &HashSet<String>) -> (Vec<String>, Vec<String>) {
        let state = lock(&self.state);
        for (name, channel) in &state.channels {
            if subscribed.contains(name) {
                channel.subscribed.send_replace(true);
            }
        }
        let wanted = state
            .channels
            .keys()
            .filter(|channel| !subscribed.contains(*channel))
            .cloned()
            .collect();
        let unwanted = subscribed
            .iter()
            .filter(|channel| !state.channels.contains_key(*channel))
            .cloned()
            .collect();
        (wanted, unwanted)
    }

    /// The connection confirmed its subscription to `channels`. Their waiters learn it
    /// on their next look; nothing was missed before, since they attempt again anyway.
    fn confirmed(&self, channels: &[String]) {
        let state = lock(&self.state);
        for name in channels {
            if let Some(channel) = state.channels.get(name) {
                channel.subscribed.send_replace(true);
            }
        }
    }

    /// The connection is gone: no channel is subscribed, and any of them may have been
    /// released unseen, so every waiter is woken to look again.
    fn lost(&self) {
        let mut state = lock(&self.state);
        for channel in state.channels.values_mut() {
            channel.subscribed.send_replace(false);
            channel.echoes.clear();
            channel.wake_all();
        }
    }
}

impl fmt::Debug for Hub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hub")
            .field("server", self.client.get_connection_info().addr())
            .finish_non_exhaustive()
    }
}

/// A request's place in its channel's queue. Dropping it leaves the queue (and passes an
/// unused wake-up on to the next waiter); the last waiter's drop unsubscribes.
pub(crate) struct Waiter {
    hub: Arc<Hub>,
    channel: String,
    slot: Arc<Slot>,
    subscribed: watch::Receiver<bool>,
    acquired: bool,
}

impl Waiter {
    /// Waits until the connection is subscribed to the channel, for at most `bound`;
    /// true if it is.
    pub(crate) async fn subscribed_within(&mut self, bound: Duration) -> bool {
        let ready = self.subscribed.wait_for(|subscribed| *subscribed);
        matches!(tokio::time::timeout(bound, ready).await, Ok(Ok(_)))
    }

    /// An attempt is about to be sent: forget earlier wake-ups, and report whether a
    /// release published from now on will reach this waiter.
    pub(crate) fn attempting(&self) -> bool {
        self.slot.woken.store(false, Ordering::Release);
        *self.subscribed.borrow()
    }

    /// Whether a release published now would reach this waiter.
    pub(crate) fn notifies(&self) -> bool {
        *self.subscribed.borrow()
    }

    /// Sleeps for `pause`, or less if woken (also by a wake-up since [`attempting`]);
    /// true when woken.
    ///
    /// [`attempting`]: Self::attempting
    pub(crate) async fn sleep(&self, pause: Duration) -> bool {
        let notified = self.slot.notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if self.slot.woken.load(Ordering::Acquire) {
            return true;
        }
        tokio::select! {
            () = notified => true,
            () = tokio::time::sleep(pause) => false,
        }
    }

    /// The request took the lock: leave the queue without waking anyone (the next
    /// waiters are woken when this holder releases).
    pub(crate) fn acquired(mut self) {
        self.acquired = true;
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        let mut state = lock(&self.hub.state);
        let Some(channel) = state.channels.get_mut(&self.channel) else {
            return;
        };
        channel
            .waiters
            .retain(|slot| !Arc::ptr_eq(slot, &self.slot));
        if channel.waiters.is_empty() {
            state.channels.remove(&self.channel);
            self.hub.changed.notify_one();
        } else if !self.acquired && self.slot.woken.load(Ordering::Acquire) {
            // Woken but giving up: the release it was woken for goes to the next.
            channel.wake_next();
        }
    }
}

impl fmt::Debug for Waiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Waiter")
            .field("channel", &self.channel)
            .field("mode", &self.slot.mode)
            .finish_non_exhaustive()
    }
}

/// The connection task: connect, keep the subscriptions in line with the channels that
/// have waiters, deliver messages; on any failure mark everything unsubscribed, wake
/// every waiter and reconnect with a backoff. Ends when the hub is dropped.
async fn run(hub: Weak<Hub>, client: redis::Client, changed: Arc<Notify>, stop: CancellationToken) {
    let mut backoff = reconnect_backoff();
    loop {
        let connect = tokio::time::timeout(REQUEST_TIMEOUT, client.get_async_pubsub());
        let (outcome, was_connected) = tokio::select! {
            () = stop.cancelled() => return,
            connected = connect => match connected {
                Ok(Ok(pubsub)) => {
                    backoff = reconnect_backoff();
                    (session(&hub, pubsub, &changed, &stop).await, true)
                }
                Ok(Err(err)) => (Err(chain(&err)), false),
                Err(_) => (Err("connecting timed out".to_owned()), false),
            },
        };
        // A connection that was up may have carried a release nobody heard; a failed
        // attempt to connect lost nothing (its waiters poll meanwhile).
        if was_connected {
            let Some(strong) = hub.upgrade() else { return };
            strong.lost();
        }
        if stop.is_cancelled() {
            return;
        }
        if let Err(reason) = outcome {
            tracing::debug!(%reason, "release notifications lost; waiters poll until resubscribed");
        }
        let pause = backoff.next().unwrap_or(RECONNECT_MAX);
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(pause) => {}
        }
    }
}

fn reconnect_backoff() -> impl Iterator<Item = Duration> {
    ExponentialBuilder::new()
        .with_min_delay(RECONNECT_MIN)
        .with_max_delay(RECONNECT_MAX)
        .with_jitter()
        .without_max_times()
        .build()
}

/// One connection's life; returns why it ended.
async fn session(
    hub: &Weak<Hub>,
    pubsub: redis::aio::PubSub,
    changed: &Notify,
    stop: &CancellationToken,
) -> Result<(), String> {
    let (mut sink, mut stream) = pubsub.split();
    let mut subscribed: HashSet<String> = HashSet::new();
    loop {
        let (wanted, unwanted) = match hub.upgrade() {
            Some(hub) => hub.diff(&subscribed),
            None => return Ok(()),
        };
        if !wanted.is_empty() {
            match tokio::time::timeout(REQUEST_TIMEOUT, sink.subscribe(&wanted)).await {
                Ok(Ok(())) => {}
                Ok(Err(err)) => return Err(chain(&err)),
                Err(_) => return Err("SUBSCRIBE timed out".to_owned()),
            }
            if let Some(hub) = hub.upgrade() {
                hub.confirmed(&wanted);
            }
            subscribed.extend(wanted);
        }
        if !unwanted.is_empty() {
            match tokio::time::timeout(REQUEST_TIMEOUT, sink.unsubscribe(&unwanted)).await {
                Ok(Ok(())) => {}
                Ok(Err(err)) => return Err(chain(&err)),
                Err(_) => return Err("UNSUBSCRIBE timed out".to_owned()),
            }
            for channel in &unwanted {
                subscribed.remove(channel);
            }
        }
        tokio::select! {
            () = stop.cancelled() => return Ok(()),
            () = changed.notified() => {}
            message = stream.next() => match message {
                Some(message) => {
                    if let Some(hub) = hub.upgrade() {
                        hub.deliver(message.get_channel_name(), message.get_payload_bytes());
                    }
                }
                None => return Err("connection closed".to_owned()),
            },
        }
    }
}
