//! One process's subscriber connections and the waiters they wake.
//!
//! A [`Hub`] keeps a queue of local waiters per release channel, in arrival order (a
//! [`Queue`], which decides whom a release wakes), and one Pub/Sub connection per node
//! (one for a server or a cluster, one per node of a quorum) subscribed to exactly the
//! channels that have waiters. A release (a message on the channel, or a release made in
//! this process) wakes the first waiter if it is a writer, or every waiting reader if a
//! reader is first, so one release sets off one script per process (or one per reader,
//! who then share the lock). A lost connection wakes every waiter, since a release may
//! have been missed. A [`Waiter`] leaves its queue through the [`Queues`] trait, so it
//! knows no hub.

use std::borrow::Borrow;
use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt::{self, Write as _};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, Weak};

use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::heard::Heard;
use super::keyspace::{self, Setting};
use super::queue::{Left, Queue, Slot};
use super::silence::Silence;
use super::subscriber::{run, Listener, Source};
use super::waiter::{Queues, Waiter};
use crate::mode::Mode;
use crate::protocol::id::Id;
use crate::protocol::keys::{lock_of_channel, Keys};
use crate::util::lock;

/// Releases made in this process whose message is still expected back, per channel: a
/// message that is such an echo wakes nobody (the release already did, locally).
const MAX_ECHOES: usize = 64;

/// Every hub of this process, by the connection info of its client.
static HUBS: LazyLock<Mutex<HashMap<String, Weak<Hub>>>> = LazyLock::new(Default::default);

/// The waiters of one process on one server, cluster or quorum, and its subscriber
/// connections.
pub(crate) struct Hub {
    /// One connection task per node.
    nodes: Vec<Arc<NodeListener>>,
    /// How many nodes must be subscribed to a channel for a release to reach its
    /// waiters: one, or a majority of a quorum's nodes (which shares a node with the
    /// majority any holder holds).
    needed: usize,
    state: Mutex<State>,
    /// The lock keys whose locks were seen released without a message.
    silence: Silence,
    /// The lock keys on whose channels a message came: their holders publish.
    heard: Heard,
    /// Whether waiters also wait on their lock key's keyspace notifications
    /// ([`Notifier::keyspace_events`](super::Notifier::keyspace_events)).
    keyspace: bool,
    /// The name this hub is shared under in [`HUBS`], for a hub of [`Hub::shared`].
    shared: Option<String>,
    /// Stops the connection task when the last handle goes.
    _stop: DropGuard,
    stop: CancellationToken,
}

#[derive(Default)]
struct State {
    channels: HashMap<ChannelName, Channel>,
    /// The connection tasks, one per node, once started.
    tasks: Vec<JoinHandle<()>>,
}

impl State {
    /// The waiters on `channel`, a release channel's name as Redis sends it.
    fn on_channel(&mut self, channel: &str) -> Option<&mut Channel> {
        lock_of_channel(channel).and_then(|lock_key| self.channels.get_mut(lock_key))
    }
}

/// The lock key of a channel a hub subscribes to: a release channel, or a lock key's
/// keyspace channel.
fn lock_of_any(channel: &str) -> Option<&str> {
    lock_of_channel(channel).or_else(|| keyspace::lock_of_keyspace(channel))
}

/// A release channel with waiters, as the key of its queue: the keys of the lock that its
/// first waiter joined for, so that a queue costs no allocation for its name. It is found
/// by its lock key (the channel is `<lock key>:released`).
struct ChannelName(Keys);

impl ChannelName {
    fn lock_key(&self) -> &str {
        self.0.lock()
    }
}

impl PartialEq for ChannelName {
    fn eq(&self, other: &Self) -> bool {
        self.lock_key() == other.lock_key()
    }
}

impl Eq for ChannelName {}

impl Hash for ChannelName {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.lock_key().hash(state);
    }
}

impl Borrow<str> for ChannelName {
    fn borrow(&self) -> &str {
        self.lock_key()
    }
}

/// One node's connection task as the hub sees it: where it connects, and how the hub
/// tells it that the channels with waiters changed. The task holds it weakly and reports
/// through it, and it forwards to the hub with the node's index.
struct NodeListener {
    source: Source,
    hub: Weak<Hub>,
    node: usize,
    changed: Arc<Notify>,
    /// Whether the node has keyspace notifications on, as read when its connection last
    /// (re)connected: only then are keyspace channels subscribed there.
    keyspace_on: AtomicBool,
    /// The database the node's connection uses, which keyspace channels name.
    db: AtomicI64,
}

/// The waiters on one release channel, and its subscription.
struct Channel {
    waiters: Queue,
    /// Whether enough nodes' connections are subscribed to the channel now.
    subscribed: watch::Sender<bool>,
    /// Which nodes' connections have confirmed their subscription.
    confirmed: Vec<bool>,
    /// Ids released in this process whose message has not come back yet.
    echoes: VecDeque<Id>,
    /// Which nodes' connections have confirmed their subscription to the lock key's
    /// keyspace channel.
    keyspace: Vec<bool>,
    /// Per node, a deletion of the lock key heard there whose release message may still
    /// follow, and until when it waits for it ([`keyspace::GRACE`]).
    gone: Vec<Option<Instant>>,
}

impl Channel {
    fn new(nodes: usize) -> Self {
        Self {
            waiters: Queue::default(),
            subscribed: watch::Sender::new(false),
            confirmed: vec![false; nodes],
            echoes: VecDeque::new(),
            keyspace: vec![false; nodes],
            gone: vec![None; nodes],
        }
    }

    /// A message about the lock from node `node` other than a deletion: a release
    /// message (which wakes, or is an echo of a release that woke) or a write that made
    /// the key again (the lock is held). Either way a deletion heard just before it
    /// wakes nobody.
    fn settle_gone(&mut self, node: usize) {
        if let Some(gone) = self.gone.get_mut(node) {
            *gone = None;
        }
    }

    /// Node `node`'s connection is subscribed to the channel now, or not.
    fn confirm(&mut self, node: usize, on: bool, needed: usize) {
        if let Some(confirmed) = self.confirmed.get_mut(node) {
            *confirmed = on;
        }
        let count = self.confirmed.iter().filter(|on| **on).count();
        self.subscribed.send_replace(count >= needed);
    }

    /// How many nodes' connections are subscribed: how many messages one release
    /// published on every node sends back.
    fn listening(&self) -> usize {
        self.confirmed.iter().filter(|on| **on).count()
    }

    /// A release by this process published `id` on every node listened to: the messages
    /// that come back with it are skipped (the oldest forgotten past [`MAX_ECHOES`]).
    fn echo(&mut self, id: &Id) {
        for _ in 0..self.listening() {
            if self.echoes.len() == MAX_ECHOES {
                self.echoes.pop_front();
            }
            self.echoes.push_back(*id);
        }
    }

    /// Node `node`'s connection is not subscribed any more, and a release may have gone
    /// unheard: every waiter looks again.
    fn forget_subscription(&mut self, node: usize, needed: usize) {
        self.confirm(node, false, needed);
        if let Some(keyspace) = self.keyspace.get_mut(node) {
            *keyspace = false;
        }
        self.settle_gone(node);
        self.echoes.clear();
        self.waiters.wake_all();
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
        let hub = Self::new(
            vec![Source::Server(Box::new(client))],
            false,
            Some(id.clone()),
        );
        hubs.insert(id, Arc::downgrade(&hub));
        hub
    }

    /// This hub's sources in a hub whose waiters also wait on keyspace notifications:
    /// itself if it is one; for a shared hub, the process's shared keyspace hub for the
    /// same server (kept apart from the plain one); else a new hub of its own.
    pub(crate) fn with_keyspace(self: &Arc<Self>) -> Arc<Self> {
        if self.keyspace {
            return Arc::clone(self);
        }
        let Some(id) = &self.shared else {
            return Self::new(self.sources(), true, None);
        };
        let id = format!("{id} with keyspace events");
        let mut hubs = lock(&HUBS);
        hubs.retain(|_, hub| hub.strong_count() > 0);
        if let Some(hub) = hubs.get(&id).and_then(Weak::upgrade) {
            return hub;
        }
        let hub = Self::new(self.sources(), true, Some(id.clone()));
        hubs.insert(id, Arc::downgrade(&hub));
        hub
    }

    /// A hub of its own for `client`'s server, shared with no other handle: for a
    /// blocking handle, whose runtime stops with it (a shared hub's subscriber task on
    /// that runtime would stop for every other user of the hub too).
    #[cfg(feature = "blocking")]
    pub(crate) fn own(client: redis::Client) -> Arc<Self> {
        Self::new(vec![Source::Server(Box::new(client))], false, None)
    }

    /// A hub of its own for `client`'s cluster (a cluster client does not say which
    /// cluster it reaches, so hubs are not shared by address).
    #[cfg(feature = "cluster")]
    pub(crate) fn cluster(client: redis::cluster::ClusterClient) -> Arc<Self> {
        Self::new(vec![Source::Cluster(Box::new(client))], false, None)
    }

    /// The hub of a primary under Redis Sentinel: its subscriber connects to the primary
    /// the Sentinels name at each (re)connection.
    #[cfg(feature = "sentinel")]
    pub(crate) fn sentinel(client: redis::sentinel::SentinelClient) -> Arc<Self> {
        Self::new(
            vec![Source::Sentinel(Arc::new(tokio::sync::Mutex::new(client)))],
            false,
            None,
        )
    }

    /// A hub of its own for the nodes of a quorum, one client per node, with one
    /// subscriber connection per node.
    pub(crate) fn quorum(clients: Vec<redis::Client>) -> Arc<Self> {
        Self::new(
            clients
                .into_iter()
                .map(|client| Source::Server(Box::new(client)))
                .collect(),
            false,
            None,
        )
    }

    fn new(sources: Vec<Source>, keyspace: bool, shared: Option<String>) -> Arc<Self> {
        let stop = CancellationToken::new();
        let needed = sources.len() / 2 + 1;
        Arc::new_cyclic(|hub| Self {
            nodes: sources
                .into_iter()
                .enumerate()
                .map(|(node, source)| {
                    Arc::new(NodeListener {
                        source,
                        hub: hub.clone(),
                        node,
                        changed: Arc::new(Notify::new()),
                        keyspace_on: AtomicBool::new(false),
                        db: AtomicI64::new(0),
                    })
                })
                .collect(),
            needed,
            state: Mutex::default(),
            silence: Silence::default(),
            heard: Heard::default(),
            keyspace,
            shared,
            _stop: stop.clone().drop_guard(),
            stop,
        })
    }

    /// The lock keys whose locks were seen released without a message: their waiters
    /// poll (see [`Silence`]).
    pub(crate) fn silence(&self) -> &Silence {
        &self.silence
    }

    /// Whether a release of the lock at `lock_key` is known to wake its waiters here: a
    /// message came on one of its channels (its holders publish, or keyspace events
    /// reach this process), or its keyspace channel is subscribed on enough nodes whose
    /// setting has them on. A waiter on a lock not known so sleeps a short, doubling
    /// time before it looks again, instead of its whole fallback timer.
    pub(crate) fn wakes_on_release(&self, lock_key: &str) -> bool {
        if self.heard.knows(lock_key) {
            return true;
        }
        self.keyspace
            && lock(&self.state)
                .channels
                .get(lock_key)
                .is_some_and(|channel| {
                    channel.keyspace.iter().filter(|on| **on).count() >= self.needed
                })
    }

    /// Whether the hub listens to a Redis Cluster (by sharded pub/sub, or classic on a
    /// cluster without it).
    pub(crate) fn is_cluster(&self) -> bool {
        self.nodes.iter().any(|node| node.source.is_cluster())
    }

    /// How many nodes the hub listens to: 1, or the nodes of a quorum.
    pub(crate) fn nodes(&self) -> usize {
        self.nodes.len()
    }

    /// Tells every connection task that the channels with waiters changed.
    fn changed(&self) {
        for node in &self.nodes {
            node.changed.notify_one();
        }
    }

    /// Whether requests in this process wait on the release channel of the lock at
    /// `lock_key`; a new request then queues behind them instead of overtaking them.
    pub(crate) fn has_waiters(&self, lock_key: &str) -> bool {
        lock(&self.state)
            .channels
            .get(lock_key)
            .is_some_and(|channel| !channel.waiters.is_empty())
    }

    /// Queues a waiter on the release channel of `keys`, subscribing to it if nobody here
    /// waits on it yet. Must be called within a Tokio runtime: it starts the connection
    /// task if needed.
    pub(crate) fn join(self: &Arc<Self>, keys: &Keys, mode: Mode) -> Waiter {
        self.enter(keys, Some(mode))
    }

    /// As [`join`](Self::join), at the front of this process's queue on the lock: an
    /// upgradable reader waiting for the other readers to leave, woken by the next
    /// release whoever else waits here.
    pub(crate) fn join_first(self: &Arc<Self>, keys: &Keys) -> Waiter {
        self.enter(keys, None)
    }

    /// Queues a waiter in `mode` at the back, or (`None`) at the front as a writer.
    fn enter(self: &Arc<Self>, keys: &Keys, mode: Option<Mode>) -> Waiter {
        let mut state = lock(&self.state);
        if state.tasks.is_empty() || state.tasks.iter().any(JoinHandle::is_finished) {
            // First use, or the runtime that ran the tasks has shut down.
            state.tasks.iter().for_each(JoinHandle::abort);
            for channel in state.channels.values_mut() {
                channel.confirmed.fill(false);
                channel.subscribed.send_replace(false);
            }
            state.tasks = self.start_tasks();
        }
        let entry = state
            .channels
            .entry(ChannelName(keys.clone()))
            .or_insert_with(|| {
                self.changed();
                Channel::new(self.nodes.len())
            });
        let slot = match mode {
            Some(mode) => entry.waiters.join(mode),
            None => entry.waiters.join_first(),
        };
        let subscribed = entry.subscribed.subscribe();
        drop(state);
        Waiter::new(Arc::<Self>::clone(self), keys.clone(), slot, subscribed)
    }

    /// Where each node's subscriber connection goes, for a [`ChannelWatch`] of its own.
    ///
    /// [`ChannelWatch`]: super::watch::ChannelWatch
    pub(super) fn sources(&self) -> Vec<Source> {
        self.nodes.iter().map(|node| node.source.clone()).collect()
    }

    /// One connection task per node, reporting through the node's listener.
    fn start_tasks(&self) -> Vec<JoinHandle<()>> {
        self.nodes
            .iter()
            .map(|node| {
                tokio::spawn(run(
                    Arc::downgrade(node),
                    node.source.clone(),
                    Arc::clone(&node.changed),
                    self.stop.clone(),
                ))
            })
            .collect()
    }

    /// A quorum attempt that took fewer than a majority of the nodes released what it
    /// took, publishing `id` there: skip those messages when they come back (one per node
    /// listened to, at most), waking nobody. Without this, the waiter whose attempt it was
    /// would be woken by its own release and attempt again at once, round after round,
    /// behind a holder of a bare majority (a Go holder on two nodes of three: about 1,000
    /// scripts a second per node where the waiting-cost row allows 2).
    pub(crate) fn attempt_released(&self, lock_key: &str, id: &Id) {
        let mut state = lock(&self.state);
        if let Some(channel) = state.channels.get_mut(lock_key) {
            channel.echo(id);
        }
    }

    /// A release made in this process published `id` on the release channel of the lock
    /// at `lock_key` (on every node it held): wake the next local waiters now, and skip
    /// the messages when they come back.
    pub(crate) fn released(&self, lock_key: &str, id: &Id) {
        let mut state = lock(&self.state);
        if let Some(channel) = state.channels.get_mut(lock_key) {
            channel.echo(id);
            channel.waiters.wake_next();
        }
    }

    /// A message on `channel` from node `node`: a release message (`payload` is the
    /// releasing id), or a keyspace event on a lock key (`payload` is the event).
    ///
    /// A release by this crate that deletes the lock key sends two: the key's `del`
    /// event, then, from the same script and so next on the same connection, the
    /// release message. One release wakes once: a deletion is held for
    /// [`keyspace::GRACE`], and the next message about the key from that node (its
    /// release message, or an event that made the key again) settles it without a
    /// wake-up; a deletion nothing follows (a Go client's `DEL`, an expiry) wakes the
    /// queue when the grace ends ([`flush`](Self::flush)).
    fn deliver(&self, node: usize, channel: &str, payload: &[u8]) {
        if let Some(lock_key) = lock_of_any(channel) {
            self.heard.heard(lock_key);
        }
        let mut state = lock(&self.state);
        if let Some(lock_key) = lock_of_channel(channel) {
            let Some(channel) = state.channels.get_mut(lock_key) else {
                return;
            };
            channel.settle_gone(node);
            if let Some(at) = channel
                .echoes
                .iter()
                .position(|echo| echo.as_bytes() == payload)
            {
                channel.echoes.remove(at);
                return;
            }
            channel.waiters.wake_next();
        } else if let Some(lock_key) = keyspace::lock_of_keyspace(channel) {
            let Some(channel) = state.channels.get_mut(lock_key) else {
                return;
            };
            if !keyspace::is_gone(payload) {
                channel.settle_gone(node);
            } else if let Some(gone @ None) = channel.gone.get_mut(node) {
                *gone = Some(Instant::now() + keyspace::GRACE);
            }
        }
    }

    /// When the first deletion heard from node `node` that no release message followed
    /// is due to wake its queue.
    fn due(&self, node: usize) -> Option<Instant> {
        if !self.keyspace {
            return None;
        }
        lock(&self.state)
            .channels
            .values()
            .filter_map(|channel| channel.gone.get(node).copied().flatten())
            .min()
    }

    /// Wakes the queues of the lock keys whose deletion, heard from node `node`, waited
    /// its grace for a release message that did not come: a release that published
    /// nothing.
    fn flush(&self, node: usize) {
        let now = Instant::now();
        for channel in lock(&self.state).channels.values_mut() {
            if let Some(gone) = channel.gone.get_mut(node) {
                if gone.is_some_and(|at| at <= now) {
                    *gone = None;
                    channel.waiters.wake_next();
                }
            }
        }
    }

    /// What node `node` has `notify-keyspace-events` set to, read as its connection
    /// (re)connected, and the database it uses. A node without them (or that refused
    /// `CONFIG`) is logged as a warning and gets no keyspace subscriptions: its waiters
    /// wake by their release messages and their timers.
    fn keyspace_setting(&self, node: usize, db: i64, settings: &[Setting]) {
        let mut on = !settings.is_empty();
        for setting in settings {
            if let Some(problem) = setting.problem() {
                on = false;
                tracing::warn!(
                    node = %setting.node,
                    %problem,
                    "keyspace notifications are off: waiters there wake by their timers"
                );
            }
        }
        if let Some(listener) = self.nodes.get(node) {
            listener.db.store(db, Ordering::Relaxed);
            listener.keyspace_on.store(on, Ordering::Relaxed);
        }
        self.changed();
    }

    /// The channels node `node`'s connection should subscribe to and unsubscribe from,
    /// given those it is subscribed to. A channel whose waiters all left and that has
    /// waiters again is still subscribed, and is marked so here.
    ///
    /// A keyspace hub subscribes each lock key's keyspace channel too, on a node whose
    /// setting has them on.
    fn diff(&self, node: usize, subscribed: &HashSet<String>) -> (Vec<String>, Vec<String>) {
        let listener = self.nodes.get(node);
        let keyspace_on =
            self.keyspace && listener.is_some_and(|on| on.keyspace_on.load(Ordering::Relaxed));
        let db = listener.map_or(0, |on| on.db.load(Ordering::Relaxed));
        let mut state = lock(&self.state);
        let (mut wanted, mut written) = (Vec::new(), String::new());
        for (name, channel) in &mut state.channels {
            written.clear();
            // Writing to a `String` cannot fail.
            let _ = write!(written, "{}", name.0.channel());
            if subscribed.contains(&written) {
                channel.confirm(node, true, self.needed);
            } else {
                wanted.push(written.clone());
            }
            if keyspace_on {
                written.clear();
                keyspace::write_channel(&mut written, db, name.lock_key());
                if subscribed.contains(&written) {
                    if let Some(keyspace) = channel.keyspace.get_mut(node) {
                        *keyspace = true;
                    }
                } else {
                    wanted.push(written.clone());
                }
            }
        }
        let unwanted = subscribed
            .iter()
            .filter(|channel| {
                let keyspace = keyspace::lock_of_keyspace(channel).is_some();
                (keyspace && !keyspace_on)
                    || !lock_of_any(channel).is_some_and(|at| state.channels.contains_key(at))
            })
            .cloned()
            .collect();
        (wanted, unwanted)
    }

    /// Node `node`'s connection confirmed its subscription to `channels`. Their waiters
    /// learn it on their next look; nothing was missed before, since they attempt again
    /// anyway.
    fn confirmed(&self, node: usize, channels: &[String]) {
        let mut state = lock(&self.state);
        for name in channels {
            if let Some(channel) = state.on_channel(name) {
                channel.confirm(node, true, self.needed);
            } else if let Some(channel) = keyspace::lock_of_keyspace(name)
                .and_then(|lock_key| state.channels.get_mut(lock_key))
            {
                if let Some(keyspace) = channel.keyspace.get_mut(node) {
                    *keyspace = true;
                }
            }
        }
    }

    /// Node `node`'s connection is gone: none of its channels is subscribed, and any of
    /// them may have been released unseen, so every waiter is woken to look again.
    fn lost(&self, node: usize) {
        let mut state = lock(&self.state);
        for channel in state.channels.values_mut() {
            channel.forget_subscription(node, self.needed);
        }
    }

    /// The node dropped the subscription to `channel` (its slot moved to another node):
    /// its waiters poll until it is subscribed again, and look at once, since a release
    /// may have been missed.
    fn dropped(&self, node: usize, channel: &str) {
        if let Some(channel) = lock(&self.state).on_channel(channel) {
            channel.forget_subscription(node, self.needed);
        }
    }
}

impl Queues for Hub {
    fn leave(&self, lock_key: &str, slot: &Arc<Slot>, acquired: bool) {
        let mut state = lock(&self.state);
        let Some(channel) = state.channels.get_mut(lock_key) else {
            return;
        };
        if channel.waiters.leave(slot, acquired) == Left::Empty {
            state.channels.remove(lock_key);
            self.changed();
        }
    }
}

impl Listener for NodeListener {
    fn diff(&self, subscribed: &HashSet<String>) -> (Vec<String>, Vec<String>) {
        match self.hub.upgrade() {
            Some(hub) => hub.diff(self.node, subscribed),
            None => (Vec::new(), subscribed.iter().cloned().collect()),
        }
    }

    fn confirmed(&self, channels: &[String]) {
        if let Some(hub) = self.hub.upgrade() {
            hub.confirmed(self.node, channels);
        }
    }

    fn deliver(&self, channel: &str, payload: &[u8]) {
        if let Some(hub) = self.hub.upgrade() {
            hub.deliver(self.node, channel, payload);
        }
    }

    fn lost(&self) {
        if let Some(hub) = self.hub.upgrade() {
            hub.lost(self.node);
        }
    }

    fn dropped(&self, channel: &str) {
        if let Some(hub) = self.hub.upgrade() {
            hub.dropped(self.node, channel);
        }
    }

    fn keyspace(&self) -> bool {
        self.hub.upgrade().is_some_and(|hub| hub.keyspace)
    }

    fn keyspace_setting(&self, db: i64, settings: &[Setting]) {
        if let Some(hub) = self.hub.upgrade() {
            hub.keyspace_setting(self.node, db, settings);
        }
    }

    fn due(&self) -> Option<Instant> {
        self.hub.upgrade().and_then(|hub| hub.due(self.node))
    }

    fn flush(&self) {
        if let Some(hub) = self.hub.upgrade() {
            hub.flush(self.node);
        }
    }
}

impl fmt::Debug for Hub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sources: Vec<&Source> = self.nodes.iter().map(|node| &node.source).collect();
        f.debug_struct("Hub")
            .field("sources", &sources)
            .field("keyspace", &self.keyspace)
            .finish_non_exhaustive()
    }
}
