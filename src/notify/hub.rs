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
use std::sync::{Arc, LazyLock, Mutex, Weak};

use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::subscriber::{run, Listener, Source};
use super::waiter::Waiter;
use crate::mode::Mode;
use crate::util::lock;

/// Releases made in this process whose message is still expected back, per channel: a
/// message that is such an echo wakes nobody (the release already did, locally).
const MAX_ECHOES: usize = 64;

/// Every hub of this process, by the connection info of its client.
static HUBS: LazyLock<Mutex<HashMap<String, Weak<Hub>>>> = LazyLock::new(Default::default);

/// The waiters of one process on one server, and its subscriber connection.
pub(crate) struct Hub {
    source: Source,
    pub(super) state: Mutex<State>,
    /// Tells the connection task that the set of channels with waiters changed.
    pub(super) changed: Arc<Notify>,
    /// Stops the connection task when the last handle goes.
    _stop: DropGuard,
    stop: CancellationToken,
}

#[derive(Default)]
pub(super) struct State {
    pub(super) channels: HashMap<String, Channel>,
    task: Option<JoinHandle<()>>,
}

/// The waiters on one release channel.
pub(super) struct Channel {
    /// In arrival order.
    pub(super) waiters: VecDeque<Arc<Slot>>,
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
    pub(super) fn wake_next(&self) {
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

    /// Not subscribed any more, and a release may have gone unheard: every waiter looks
    /// again.
    fn forget_subscription(&mut self) {
        self.subscribed.send_replace(false);
        self.echoes.clear();
        self.waiters.iter().for_each(|slot| slot.wake());
    }
}

/// One waiting request.
pub(super) struct Slot {
    pub(super) mode: Mode,
    /// Set by a wake-up, cleared before each attempt.
    pub(super) woken: AtomicBool,
    pub(super) notify: Notify,
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
        let hub = Self::new(Source::Server(Box::new(client)));
        hubs.insert(id, Arc::downgrade(&hub));
        hub
    }

    /// A hub of its own for `client`'s cluster (a cluster client does not say which
    /// cluster it reaches, so hubs are not shared by address).
    #[cfg(feature = "cluster")]
    pub(crate) fn cluster(client: redis::cluster::ClusterClient) -> Arc<Self> {
        Self::new(Source::Cluster(Box::new(client)))
    }

    fn new(source: Source) -> Arc<Self> {
        let stop = CancellationToken::new();
        Arc::new(Self {
            source,
            state: Mutex::default(),
            changed: Arc::new(Notify::new()),
            _stop: stop.clone().drop_guard(),
            stop,
        })
    }

    /// Whether the hub listens to a Redis Cluster (by sharded pub/sub).
    pub(crate) fn is_cluster(&self) -> bool {
        self.source.is_cluster()
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
                self.source.clone(),
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
        Waiter::new(Arc::clone(self), channel.to_owned(), slot, subscribed)
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
}

impl Listener for Hub {
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
            channel.forget_subscription();
        }
    }

    /// The server dropped the subscription to `channel` (its slot moved to another
    /// node): its waiters poll until it is subscribed again, and look at once, since a
    /// release may have been missed.
    fn dropped(&self, channel: &str) {
        if let Some(channel) = lock(&self.state).channels.get_mut(channel) {
            channel.forget_subscription();
        }
    }
}

impl fmt::Debug for Hub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hub")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}
