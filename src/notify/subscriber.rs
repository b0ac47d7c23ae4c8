//! The connection task of a hub: one subscriber connection, kept subscribed to the
//! release channels that have waiters, delivering their messages.
//!
//! On a single server it is a Pub/Sub connection (`SUBSCRIBE`); on a Redis Cluster it is
//! a RESP3 cluster connection with sharded subscriptions (`SSUBSCRIBE`), each sent to
//! the node that serves the channel's slot, whose messages come back as pushes.

use std::collections::HashSet;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::time::Instant;

use backon::{BackoffBuilder, ExponentialBuilder};
use futures_util::StreamExt;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::error::chain;
use crate::util;

/// How long connecting, or one (un)subscribe request, may take before the connection is
/// taken as lost.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// The first and the largest pause between reconnection attempts (jittered).
const RECONNECT_MIN: Duration = Duration::from_millis(10);
const RECONNECT_MAX: Duration = Duration::from_secs(1);

/// What the connection task reports to: the waiters of a process (the hub). The task
/// holds it weakly and ends when it is gone.
pub(crate) trait Listener: Send + Sync + 'static {
    /// The channels to subscribe to and to unsubscribe from, given those subscribed.
    fn diff(&self, subscribed: &HashSet<String>) -> (Vec<String>, Vec<String>);
    /// The connection confirmed its subscription to `channels`.
    fn confirmed(&self, channels: &[String]);
    /// A message on `channel`: the releasing id.
    fn deliver(&self, channel: &str, id: &[u8]);
    /// The connection is gone, or reset: no channel is subscribed, and any release may
    /// have gone unheard.
    fn lost(&self);
    /// The server dropped the subscription to `channel`.
    fn dropped(&self, channel: &str);
}

/// Where a hub's subscriber connection goes.
#[derive(Clone)]
pub(crate) enum Source {
    /// One Redis server: a Pub/Sub connection.
    Server(Box<redis::Client>),
    /// A Redis Cluster: sharded Pub/Sub over a RESP3 cluster connection.
    #[cfg(feature = "cluster")]
    Cluster(Box<redis::cluster::ClusterClient>),
}

impl Source {
    pub(crate) fn is_cluster(&self) -> bool {
        match self {
            Self::Server(_) => false,
            #[cfg(feature = "cluster")]
            Self::Cluster(_) => true,
        }
    }
}

impl fmt::Debug for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Server(client) => f
                .debug_tuple("Server")
                .field(client.get_connection_info().addr())
                .finish(),
            #[cfg(feature = "cluster")]
            Self::Cluster(_) => f.write_str("Cluster"),
        }
    }
}

/// The connection task: connect, keep the subscriptions in line with the channels that
/// have waiters, deliver messages; on any failure mark everything unsubscribed, wake
/// every waiter and reconnect with a backoff. Ends when the hub is dropped.
pub(crate) async fn run<L: Listener>(
    hub: Weak<L>,
    source: Source,
    changed: Arc<Notify>,
    stop: CancellationToken,
) {
    let mut backoff = reconnect_backoff();
    loop {
        let (outcome, was_connected) = tokio::select! {
            () = stop.cancelled() => return,
            outcome = connect_and_serve(&hub, &source, &changed, &stop, &mut backoff) => outcome,
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

/// One connection attempt and, if it connects, its session; with whether it connected.
async fn connect_and_serve<L: Listener>(
    hub: &Weak<L>,
    source: &Source,
    changed: &Notify,
    stop: &CancellationToken,
    backoff: &mut Backoff,
) -> (Result<(), String>, bool) {
    match source {
        Source::Server(client) => {
            let link = bounded(client.get_async_pubsub(), "connecting").await;
            serve(link.map(ServerLink::new), hub, changed, stop, backoff).await
        }
        #[cfg(feature = "cluster")]
        Source::Cluster(client) => {
            let link = sharded::connect(client).await;
            serve(link, hub, changed, stop, backoff).await
        }
    }
}

/// The session of a link that connected, or the error of one that did not. The
/// reconnection backoff starts over only after a session that lasted
/// [`RECONNECT_MAX`], so a connection that fails as soon as it is up (a refused
/// subscription) is retried at most about once a second.
async fn serve<L: Listener>(
    connected: Result<impl Link, String>,
    hub: &Weak<L>,
    changed: &Notify,
    stop: &CancellationToken,
    backoff: &mut Backoff,
) -> (Result<(), String>, bool) {
    match connected {
        Ok(link) => {
            let started = Instant::now();
            let outcome = session(hub, link, changed, stop).await;
            if started.elapsed() >= RECONNECT_MAX {
                *backoff = reconnect_backoff();
            }
            (outcome, true)
        }
        Err(err) => (Err(err), false),
    }
}

type Backoff = backon::ExponentialBackoff;

fn reconnect_backoff() -> Backoff {
    ExponentialBuilder::new()
        .with_min_delay(RECONNECT_MIN)
        .with_max_delay(RECONNECT_MAX)
        .with_jitter()
        .without_max_times()
        .build()
}

/// `request`, given up after [`REQUEST_TIMEOUT`]; the error says `what` failed.
async fn bounded<T>(
    request: impl Future<Output = redis::RedisResult<T>>,
    what: &str,
) -> Result<T, String> {
    match tokio::time::timeout(REQUEST_TIMEOUT, request).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(err)) => Err(format!("{what}: {}", chain(&err))),
        Err(_) => Err(format!("{what} timed out")),
    }
}

/// What a subscriber connection reports next.
enum Event {
    /// A message on a channel: the releasing id.
    Message { channel: String, payload: Vec<u8> },
    /// Part of the connection dropped and came back: messages may have been missed,
    /// and subscriptions may be gone.
    #[cfg_attr(
        not(feature = "cluster"),
        expect(dead_code, reason = "only a cluster connection resets in part")
    )]
    Reset,
    /// The server ended the subscription to this channel (on a cluster, when its slot
    /// moves to another node); it may also confirm one that was asked for.
    #[cfg_attr(
        not(feature = "cluster"),
        expect(dead_code, reason = "only a cluster node drops subscriptions")
    )]
    Dropped(String),
    /// The connection is gone.
    Closed,
}

/// A subscriber connection: one Pub/Sub connection, or a cluster connection with
/// sharded subscriptions.
trait Link {
    /// Subscribes to `channels`, each request bounded by [`REQUEST_TIMEOUT`]; the
    /// channels now subscribed. An error ends the connection.
    async fn subscribe(&mut self, channels: &[String]) -> Result<Vec<String>, String>;
    /// Unsubscribes from `channels`, each request bounded by [`REQUEST_TIMEOUT`].
    async fn unsubscribe(&mut self, channels: &[String]) -> Result<(), String>;
    /// The next event; cancel safe.
    async fn next(&mut self) -> Event;
}

/// One connection's life: keep the subscriptions in line with the channels that have
/// waiters and deliver messages. A channel the link could not subscribe to is tried
/// again after a backoff (10 ms doubling to 1 s) while the others go on. Returns why
/// the connection ended.
async fn session<L: Listener>(
    hub: &Weak<L>,
    mut link: impl Link,
    changed: &Notify,
    stop: &CancellationToken,
) -> Result<(), String> {
    let mut subscribed: HashSet<String> = HashSet::new();
    // Channels whose subscription failed, left alone until `retry_at`.
    let mut failed: HashSet<String> = HashSet::new();
    let mut retry_at: Option<Instant> = None;
    let mut backoff = reconnect_backoff();
    loop {
        let (wanted, unwanted) = match hub.upgrade() {
            Some(hub) => hub.diff(&subscribed),
            None => return Ok(()),
        };
        if retry_at.is_some_and(|at| Instant::now() >= at) {
            failed.clear();
            retry_at = None;
        }
        let wanted: Vec<String> = wanted
            .into_iter()
            .filter(|channel| !failed.contains(channel))
            .collect();
        if !wanted.is_empty() {
            let done = link.subscribe(&wanted).await?;
            if let Some(hub) = hub.upgrade() {
                hub.confirmed(&done);
            }
            subscribed.extend(done);
            failed.extend(
                wanted
                    .into_iter()
                    .filter(|channel| !subscribed.contains(channel)),
            );
            if failed.is_empty() {
                backoff = reconnect_backoff();
            } else if retry_at.is_none() {
                retry_at = Some(Instant::now() + backoff.next().unwrap_or(RECONNECT_MAX));
            }
        }
        if !unwanted.is_empty() {
            link.unsubscribe(&unwanted).await?;
            for channel in &unwanted {
                subscribed.remove(channel);
            }
        }
        tokio::select! {
            () = stop.cancelled() => return Ok(()),
            () = changed.notified() => {}
            () = util::sleep_until(retry_at) => {}
            event = link.next() => on_event(event, hub, &mut subscribed)?,
        }
    }
}

/// Passes one event of the link on to the listener; an error when the link closed.
fn on_event<L: Listener>(
    event: Event,
    hub: &Weak<L>,
    subscribed: &mut HashSet<String>,
) -> Result<(), String> {
    let Some(hub) = hub.upgrade() else {
        return Ok(());
    };
    match event {
        Event::Message { channel, payload } => hub.deliver(&channel, &payload),
        Event::Reset => {
            // Wake everyone, and subscribe to every channel again.
            hub.lost();
            subscribed.clear();
        }
        Event::Dropped(channel) => {
            if subscribed.remove(&channel) {
                hub.dropped(&channel);
            }
        }
        Event::Closed => return Err("connection closed".to_owned()),
    }
    Ok(())
}

/// A single server's Pub/Sub connection.
struct ServerLink {
    sink: redis::aio::PubSubSink,
    stream: redis::aio::PubSubStream,
}

impl ServerLink {
    fn new(pubsub: redis::aio::PubSub) -> Self {
        let (sink, stream) = pubsub.split();
        Self { sink, stream }
    }
}

impl Link for ServerLink {
    async fn subscribe(&mut self, channels: &[String]) -> Result<Vec<String>, String> {
        bounded(self.sink.subscribe(channels), "SUBSCRIBE").await?;
        Ok(channels.to_vec())
    }

    async fn unsubscribe(&mut self, channels: &[String]) -> Result<(), String> {
        bounded(self.sink.unsubscribe(channels), "UNSUBSCRIBE").await
    }

    async fn next(&mut self) -> Event {
        match self.stream.next().await {
            Some(message) => Event::Message {
                channel: message.get_channel_name().to_owned(),
                payload: message.get_payload_bytes().to_vec(),
            },
            None => Event::Closed,
        }
    }
}

#[cfg(feature = "cluster")]
mod sharded {
    use futures_util::future::join_all;
    use redis::cluster::ClusterClient;
    use redis::cluster_async::ClusterConnection;
    use redis::{PushInfo, PushKind, Value};
    use tokio::sync::mpsc::UnboundedReceiver;

    use super::{bounded, Event, Link};

    /// A RESP3 cluster connection whose pushes (sharded messages, and a node's
    /// connection dropping) come back on a channel. redis-rs resubscribes by itself
    /// after a node reconnects or a slot moves; a node's connection that drops may
    /// still have lost a release, so it is reported as [`Event::Reset`].
    pub(super) struct ClusterLink {
        conn: ClusterConnection,
        pushes: UnboundedReceiver<PushInfo>,
    }

    pub(super) async fn connect(client: &ClusterClient) -> Result<ClusterLink, String> {
        let (sender, pushes) = tokio::sync::mpsc::unbounded_channel();
        let config = redis::cluster::ClusterConfig::new().set_push_sender(sender);
        let conn = bounded(
            client.get_async_connection_with_config(config),
            "connecting",
        )
        .await?;
        Ok(ClusterLink { conn, pushes })
    }

    impl ClusterLink {
        /// `SSUBSCRIBE` (or `SUNSUBSCRIBE`) each channel on its own (channels of
        /// different slots cannot share one request), all at once, each bounded; the
        /// channels for which it succeeded.
        async fn each(&self, channels: &[String], subscribe: bool) -> Vec<String> {
            let requests = channels.iter().map(|channel| {
                let mut conn = self.conn.clone();
                async move {
                    let done = if subscribe {
                        bounded(conn.ssubscribe(channel), "SSUBSCRIBE").await
                    } else {
                        bounded(conn.sunsubscribe(channel), "SUNSUBSCRIBE").await
                    };
                    match done {
                        Ok(()) => Some(channel.clone()),
                        Err(reason) => {
                            tracing::debug!(%channel, %reason, "sharded (un)subscribe failed; waiters poll");
                            None
                        }
                    }
                }
            });
            join_all(requests).await.into_iter().flatten().collect()
        }
    }

    impl Link for ClusterLink {
        async fn subscribe(&mut self, channels: &[String]) -> Result<Vec<String>, String> {
            Ok(self.each(channels, true).await)
        }

        /// A channel that fails to unsubscribe only brings messages nobody waits for.
        async fn unsubscribe(&mut self, channels: &[String]) -> Result<(), String> {
            self.each(channels, false).await;
            Ok(())
        }

        async fn next(&mut self) -> Event {
            loop {
                let Some(push) = self.pushes.recv().await else {
                    return Event::Closed;
                };
                match (push.kind, push.data.as_slice()) {
                    // An `smessage` push: `[channel, message]`.
                    (
                        PushKind::SMessage,
                        [Value::BulkString(channel), Value::BulkString(payload)],
                    ) => {
                        return Event::Message {
                            channel: String::from_utf8_lossy(channel).into_owned(),
                            payload: payload.clone(),
                        }
                    }
                    // `[channel, count]`: the node no longer serves the channel's slot
                    // (or confirms an unsubscribe asked for).
                    (PushKind::SUnsubscribe, [Value::BulkString(channel), ..]) => {
                        return Event::Dropped(String::from_utf8_lossy(channel).into_owned())
                    }
                    (PushKind::Disconnection, _) => return Event::Reset,
                    _ => {}
                }
            }
        }
    }
}
