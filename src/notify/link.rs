//! A subscriber connection, as the connection task sees it: the [`Link`] trait, the events
//! a link reports, and the single-server link (a Pub/Sub connection).

use futures_util::StreamExt;

use super::bounded::bounded;
use super::keyspace::{self, Setting};

/// What a subscriber connection reports next.
pub(super) enum LinkEvent {
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
/// sharded subscriptions (or classic ones on a cluster without sharded Pub/Sub).
pub(super) trait Link {
    /// Subscribes to `channels`, each request bounded by [`REQUEST_TIMEOUT`](super::bounded::REQUEST_TIMEOUT); the
    /// channels now subscribed. An error ends the connection.
    async fn subscribe(&mut self, channels: &[String]) -> Result<Vec<String>, String>;
    /// Unsubscribes from `channels`, each request bounded by [`REQUEST_TIMEOUT`](super::bounded::REQUEST_TIMEOUT).
    async fn unsubscribe(&mut self, channels: &[String]) -> Result<(), String>;
    /// The next event; cancel safe.
    async fn next(&mut self) -> LinkEvent;
    /// The database the link's node uses (its keyspace channels name it), and what each
    /// node behind the link has `notify-keyspace-events` set to, each read bounded by
    /// [`REQUEST_TIMEOUT`](super::bounded::REQUEST_TIMEOUT).
    async fn keyspace_setting(&mut self) -> (i64, Vec<Setting>);
}

/// A single server's Pub/Sub connection, and the client it was opened from (for a
/// connection of its own that reads the server's keyspace setting).
pub(super) struct ServerLink {
    sink: redis::aio::PubSubSink,
    stream: redis::aio::PubSubStream,
    client: redis::Client,
}

impl ServerLink {
    pub(super) fn new(pubsub: redis::aio::PubSub, client: redis::Client) -> Self {
        let (sink, stream) = pubsub.split();
        Self {
            sink,
            stream,
            client,
        }
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

    async fn next(&mut self) -> LinkEvent {
        match self.stream.next().await {
            Some(message) => LinkEvent::Message {
                channel: message.get_channel_name().to_owned(),
                payload: message.get_payload_bytes().to_vec(),
            },
            None => LinkEvent::Closed,
        }
    }

    async fn keyspace_setting(&mut self) -> (i64, Vec<Setting>) {
        let db = self.client.get_connection_info().redis_settings().db();
        (db, vec![keyspace::read_server(&self.client).await])
    }
}
