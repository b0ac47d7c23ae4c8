//! A watch on a few fixed channels, with subscriber connections of its own: it counts
//! every event that may mean something changed (a message, a subscription confirmed, a
//! connection lost or reset), so that its owner reads the state again. An election's
//! observer watches its record's channel and its release channel this way.

use std::collections::HashSet;
use std::sync::Arc;

use tokio::sync::{watch, Notify};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::hub::Hub;
use super::subscriber::{run, Listener};

/// Subscriber connections (one per node of the hub's deployment: one for a server, a
/// cluster or a Sentinel primary, one per node of a quorum) kept subscribed to fixed
/// channels, each reconnecting with a backoff when it drops. Dropping the watch closes
/// them.
pub(crate) struct ChannelWatch {
    events: watch::Receiver<u64>,
    _listeners: Vec<Arc<WatchListener>>,
    _stop: DropGuard,
}

impl ChannelWatch {
    /// Subscribes to `channels` on every node `hub` listens to, with connections of its
    /// own (the hub's waiters are not disturbed). Must be called in a Tokio runtime.
    pub(crate) fn new(hub: &Hub, channels: Vec<String>) -> Self {
        let (events, receiver) = watch::channel(0);
        let events = Arc::new(events);
        let stop = CancellationToken::new();
        let listeners: Vec<Arc<WatchListener>> = hub
            .sources()
            .into_iter()
            .map(|source| {
                let listener = Arc::new(WatchListener {
                    channels: channels.clone(),
                    events: Arc::clone(&events),
                });
                tokio::spawn(run(
                    Arc::downgrade(&listener),
                    source,
                    Arc::new(Notify::new()),
                    stop.clone(),
                ));
                listener
            })
            .collect();
        Self {
            events: receiver,
            _listeners: listeners,
            _stop: stop.drop_guard(),
        }
    }

    /// Waits for the next event after the last one this watch saw (at once if one came
    /// since): a message on a channel, a subscription confirmed, a connection lost.
    pub(crate) async fn changed(&mut self) {
        if self.events.changed().await.is_err() {
            // Every listener is gone: nothing will come.
            std::future::pending::<()>().await;
        }
    }

    /// Marks every event so far as seen.
    pub(crate) fn seen(&mut self) {
        self.events.borrow_and_update();
    }
}

/// What one node's connection task reports to: the fixed channels and the event count.
struct WatchListener {
    channels: Vec<String>,
    events: Arc<watch::Sender<u64>>,
}

impl WatchListener {
    fn event(&self) {
        self.events
            .send_modify(|count| *count = count.wrapping_add(1));
    }
}

impl Listener for WatchListener {
    fn diff(&self, subscribed: &HashSet<String>) -> (Vec<String>, Vec<String>) {
        let wanted = self
            .channels
            .iter()
            .filter(|channel| !subscribed.contains(*channel))
            .cloned()
            .collect();
        (wanted, Vec::new())
    }

    fn confirmed(&self, _channels: &[String]) {
        // A change made before the subscription was not heard: read again.
        self.event();
    }

    fn deliver(&self, _channel: &str, _payload: &[u8]) {
        self.event();
    }

    fn lost(&self) {
        self.event();
    }

    fn dropped(&self, _channel: &str) {
        self.event();
    }
}
