//! The connection task of a [`Hub`]: one subscriber connection, kept subscribed to the
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

use backon::{BackoffBuilder, ExponentialBuilder};
use futures_util::StreamExt;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::error::chain;
use crate::hub::Hub;

/// How long connecting, or one (un)subscribe request, may take before the connection is
/// taken as lost.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// The first and the largest pause between reconnection attempts (jittered).
const RECONNECT_MIN: Duration = Duration::from_millis(10);
const RECONNECT_MAX: Duration = Duration::from_secs(1);

/// Where a hub's subscriber connection goes.
#[derive(Clone)]
pub(crate) enum Source {
    /// One Redis server: a Pub/Sub connection.
    Server(redis::Client),
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
pub(crate) async fn run(
    hub: Weak<Hub>,
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
async fn connect_and_serve(
    hub: &Weak<Hub>,
    source: &Source,
    changed: &Notify,
    stop: &CancellationToken,
    backoff: &mut Backoff,
) -> (Result<(), String>, bool) {
    match source {
        Source::Server(client) => match bounded(client.get_async_pubsub(), "connecting").await {
            Ok(pubsub) => {
                *backoff = reconnect_backoff();
                (session(hub, pubsub, changed, stop).await, true)
            }
            Err(err) => (Err(err), false),
        },
        #[cfg(feature = "cluster")]
        Source::Cluster(client) => {
            let (sender, pushes) = tokio::sync::mpsc::unbounded_channel();
            let config = redis::cluster::ClusterConfig::new().set_push_sender(sender);
            match bounded(
                client.get_async_connection_with_config(config),
                "connecting",
            )
            .await
            {
                Ok(conn) => {
                    *backoff = reconnect_backoff();
                    (
                        sharded::session(hub, conn, pushes, changed, stop).await,
                        true,
                    )
                }
                Err(err) => (Err(err), false),
            }
        }
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

/// One Pub/Sub connection's life; returns why it ended.
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
            bounded(sink.subscribe(&wanted), "SUBSCRIBE").await?;
            if let Some(hub) = hub.upgrade() {
                hub.confirmed(&wanted);
            }
            subscribed.extend(wanted);
        }
        if !unwanted.is_empty() {
            bounded(sink.unsubscribe(&unwanted), "UNSUBSCRIBE").await?;
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

#[cfg(feature = "cluster")]
mod sharded {
    use std::collections::HashSet;
    use std::sync::Weak;

    use futures_util::future::join_all;
    use redis::cluster_async::ClusterConnection;
    use redis::{PushInfo, PushKind, Value};
    use tokio::sync::mpsc::UnboundedReceiver;
    use tokio::sync::Notify;
    use tokio_util::sync::CancellationToken;

    use super::bounded;
    use crate::hub::Hub;

    /// One cluster connection's life; returns why it ended.
    ///
    /// Channels are subscribed one per `SSUBSCRIBE` (channels of different slots cannot
    /// share one), all at once. redis-rs resubscribes them by itself after a node
    /// reconnects or a slot moves; a node's connection that drops may still have lost a
    /// release, so every waiter is woken and every channel subscribed again here.
    pub(super) async fn session(
        hub: &Weak<Hub>,
        conn: ClusterConnection,
        mut pushes: UnboundedReceiver<PushInfo>,
        changed: &Notify,
        stop: &CancellationToken,
    ) -> Result<(), String> {
        let mut subscribed: HashSet<String> = HashSet::new();
        loop {
            let (wanted, unwanted) = match hub.upgrade() {
                Some(hub) => hub.diff(&subscribed),
                None => return Ok(()),
            };
            if !wanted.is_empty() {
                each(&conn, &wanted, true).await?;
                if let Some(hub) = hub.upgrade() {
                    hub.confirmed(&wanted);
                }
                subscribed.extend(wanted);
            }
            if !unwanted.is_empty() {
                each(&conn, &unwanted, false).await?;
                for channel in &unwanted {
                    subscribed.remove(channel);
                }
            }
            tokio::select! {
                () = stop.cancelled() => return Ok(()),
                () = changed.notified() => {}
                push = pushes.recv() => match push {
                    Some(push) => match push.kind {
                        PushKind::SMessage => deliver(hub, &push.data),
                        PushKind::Disconnection => {
                            if let Some(hub) = hub.upgrade() {
                                hub.lost();
                            }
                            subscribed.clear();
                        }
                        _ => {}
                    },
                    None => return Err("connection closed".to_owned()),
                },
            }
        }
    }

    /// `SSUBSCRIBE` (or `SUNSUBSCRIBE`) each channel, concurrently, each bounded.
    async fn each(
        conn: &ClusterConnection,
        channels: &[String],
        subscribe: bool,
    ) -> Result<(), String> {
        let requests = channels.iter().map(|channel| {
            let mut conn = conn.clone();
            async move {
                if subscribe {
                    bounded(conn.ssubscribe(channel), "SSUBSCRIBE").await
                } else {
                    bounded(conn.sunsubscribe(channel), "SUNSUBSCRIBE").await
                }
            }
        });
        join_all(requests).await.into_iter().collect()
    }

    /// An `smessage` push: `[channel, message]`.
    fn deliver(hub: &Weak<Hub>, data: &[Value]) {
        if let ([Value::BulkString(channel), Value::BulkString(message)], Some(hub)) =
            (data, hub.upgrade())
        {
            hub.deliver(&String::from_utf8_lossy(channel), message);
        }
    }
}
