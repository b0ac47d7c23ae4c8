//! The connection task of a hub: one subscriber connection, kept subscribed to the
//! release channels that have waiters, delivering their messages.
//!
//! On a single server it is a Pub/Sub connection (`SUBSCRIBE`); on a Redis Cluster it is
//! a RESP3 cluster connection with sharded subscriptions (`SSUBSCRIBE`), each sent to
//! the node that serves the channel's slot, whose messages come back as pushes (classic
//! subscriptions on a cluster without sharded Pub/Sub, Redis 6.2).

use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, Weak};
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::bounded::bounded;
use super::keyspace::{self, read_server, Setting};
use super::link::{Link, LinkEvent, ServerLink};
use crate::protocol::keys::lock_of_channel;
use crate::util;

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
    /// Whether the listener wants keyspace notifications: the connection then reads the
    /// node's `notify-keyspace-events` each time it (re)connects, and reports it.
    fn keyspace(&self) -> bool {
        false
    }
    /// What the node (every master of a cluster) has `notify-keyspace-events` set to,
    /// read as the connection (re)connected; `db` is the database it uses.
    fn keyspace_setting(&self, _db: i64, _settings: &[Setting]) {}
    /// When the listener next has something to do without an event (a deletion whose
    /// release message did not follow), if ever.
    fn due(&self) -> Option<Instant> {
        None
    }
    /// The time [`due`](Self::due) named has come.
    fn flush(&self) {}
}

/// Where a hub's subscriber connection goes.
#[derive(Clone)]
pub(crate) enum Source {
    /// One Redis server: a Pub/Sub connection.
    Server(Box<redis::Client>),
    /// A Redis Cluster: sharded Pub/Sub over a RESP3 cluster connection (classic where
    /// the cluster has no sharded Pub/Sub).
    #[cfg(feature = "cluster")]
    Cluster(Box<redis::cluster::ClusterClient>),
    /// The primary that Redis Sentinel names at each connection: a Pub/Sub connection.
    #[cfg(feature = "sentinel")]
    Sentinel(Arc<tokio::sync::Mutex<redis::sentinel::SentinelClient>>),
}

impl Source {
    /// The setting of every node this source reaches now (a server, every master of a
    /// cluster, the primary the Sentinels name), each read over a connection of its own.
    pub(crate) async fn keyspace_settings(&self) -> Vec<Setting> {
        match self {
            Source::Server(client) => vec![read_server(client).await],
            #[cfg(feature = "cluster")]
            Source::Cluster(client) => {
                match bounded(client.get_async_connection(), "connecting").await {
                    Ok(conn) => keyspace::read_cluster(conn).await,
                    Err(reason) => vec![Setting {
                        node: "the cluster".to_owned(),
                        found: Err(reason),
                    }],
                }
            }
            #[cfg(feature = "sentinel")]
            Source::Sentinel(sentinels) => {
                let primary = bounded(
                    async { sentinels.lock().await.async_get_client().await },
                    "asking the Sentinels for the primary",
                )
                .await;
                match primary {
                    Ok(client) => vec![read_server(&client).await],
                    Err(reason) => vec![Setting {
                        node: "the Sentinels' primary".to_owned(),
                        found: Err(reason),
                    }],
                }
            }
        }
    }

    pub(crate) fn is_cluster(&self) -> bool {
        match self {
            Self::Server(_) => false,
            #[cfg(feature = "cluster")]
            Self::Cluster(_) => true,
            #[cfg(feature = "sentinel")]
            Self::Sentinel(_) => false,
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
            #[cfg(feature = "sentinel")]
            Self::Sentinel(_) => f.write_str("Sentinel"),
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
            let link = link.map(|pubsub| ServerLink::new(pubsub, client.as_ref().clone()));
            serve(link, hub, changed, stop, backoff).await
        }
        #[cfg(feature = "cluster")]
        Source::Cluster(client) => {
            let link = super::sharded::connect(client).await;
            serve(link, hub, changed, stop, backoff).await
        }
        #[cfg(feature = "sentinel")]
        Source::Sentinel(sentinels) => {
            let link = bounded(
                async {
                    let client = sentinels.lock().await.async_get_client().await?;
                    let pubsub = client.get_async_pubsub().await?;
                    Ok(ServerLink::new(pubsub, client))
                },
                "connecting to the primary the Sentinels name",
            )
            .await;
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
    // The node's keyspace setting is read as the connection starts, and again after a
    // part of it reconnected.
    let mut check = true;
    loop {
        if std::mem::take(&mut check) {
            check_keyspace(hub, &mut link).await;
        }
        let (wanted, unwanted, due) = match hub.upgrade() {
            Some(hub) => {
                let (wanted, unwanted) = hub.diff(&subscribed);
                (wanted, unwanted, hub.due())
            }
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
            () = util::sleep_until(due) => {
                if let Some(hub) = hub.upgrade() {
                    hub.flush();
                }
            }
            event = link.next() => check = on_event(event, hub, &mut subscribed)?,
        }
    }
}

/// Reads the node's keyspace setting and reports it, if the listener wants keyspace
/// notifications.
async fn check_keyspace<L: Listener>(hub: &Weak<L>, link: &mut impl Link) {
    if !hub.upgrade().is_some_and(|hub| hub.keyspace()) {
        return;
    }
    let (db, settings) = link.keyspace_setting().await;
    if let Some(hub) = hub.upgrade() {
        hub.keyspace_setting(db, &settings);
    }
}

/// Passes one event of the link on to the listener; an error when the link closed,
/// else whether the node's keyspace setting is to be read again (part of the connection
/// reconnected).
fn on_event<L: Listener>(
    event: LinkEvent,
    hub: &Weak<L>,
    subscribed: &mut HashSet<String>,
) -> Result<bool, String> {
    let Some(hub) = hub.upgrade() else {
        return Ok(false);
    };
    match event {
        LinkEvent::Message { channel, payload } => hub.deliver(&channel, &payload),
        LinkEvent::Reset => {
            // Wake everyone, and subscribe to every channel again.
            hub.lost();
            subscribed.clear();
            return Ok(true);
        }
        LinkEvent::Dropped(channel) => {
            if subscribed.remove(&channel) {
                // The lock key's slot moved: its keyspace channel is subscribed again
                // too, on the node that serves the slot now.
                if let Some(lock_key) = lock_of_channel(&channel) {
                    subscribed.retain(|other| keyspace::lock_of_keyspace(other) != Some(lock_key));
                }
                hub.dropped(&channel);
            }
        }
        LinkEvent::Closed => return Err("connection closed".to_owned()),
    }
    Ok(false)
}
