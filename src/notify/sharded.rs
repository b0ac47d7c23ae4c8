//! The subscriber connection on a Redis Cluster (feature `cluster`): a RESP3 cluster
//! connection whose sharded subscriptions (`SSUBSCRIBE`) go to the node that serves each
//! channel's slot, and whose messages come back as pushes. On a cluster whose nodes
//! have no sharded Pub/Sub (Redis 6.2) it subscribes by `SUBSCRIBE` instead, as the
//! scripts then publish by `PUBLISH`, which every node passes on to its subscribers.

use std::collections::HashSet;

use futures_util::future::join_all;
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{PushInfo, PushKind, Value};
use tokio::sync::mpsc::UnboundedReceiver;

use super::bounded::bounded;
use super::keyspace::{self, Setting};
use super::link::{Link, LinkEvent};

/// A RESP3 cluster connection whose pushes (messages, and a node's connection
/// dropping) come back on a channel. redis-rs resubscribes by itself after a node
/// reconnects or a slot moves; a node's connection that drops may still have lost a
/// release, so it is reported as [`LinkEvent::Reset`].
pub(super) struct ClusterLink {
    conn: ClusterConnection,
    pushes: UnboundedReceiver<PushInfo>,
    /// Set when a node answered that it knows no `SSUBSCRIBE` (a Redis 6.2 cluster):
    /// found once per connection, and from then on every channel is subscribed by
    /// `SUBSCRIBE`.
    classic: bool,
    /// The channels subscribed by `SUBSCRIBE`, unsubscribed by `UNSUBSCRIBE`.
    by_classic: HashSet<String>,
}

pub(super) async fn connect(client: &ClusterClient) -> Result<ClusterLink, String> {
    let (sender, pushes) = tokio::sync::mpsc::unbounded_channel();
    let config = redis::cluster::ClusterConfig::new().set_push_sender(sender);
    let conn = bounded(
        client.get_async_connection_with_config(config),
        "connecting",
    )
    .await?;
    Ok(ClusterLink {
        conn,
        pushes,
        classic: false,
        by_classic: HashSet::new(),
    })
}

/// One (un)subscribe request.
#[derive(Clone, Copy)]
enum Request {
    Subscribe,
    Unsubscribe,
}

/// Whether a request's error says that the node has no such command.
fn unknown_command(reason: &str) -> bool {
    reason.to_ascii_lowercase().contains("unknown command")
}

impl ClusterLink {
    /// Sends `request` for `channel`, by `SSUBSCRIBE`/`SUNSUBSCRIBE` or, when
    /// `classic`, by `SUBSCRIBE`/`UNSUBSCRIBE`, bounded.
    async fn send(
        mut conn: ClusterConnection,
        request: Request,
        classic: bool,
        channel: &str,
    ) -> Result<(), String> {
        match (request, classic) {
            (Request::Subscribe, false) => bounded(conn.ssubscribe(channel), "SSUBSCRIBE").await,
            (Request::Unsubscribe, false) => {
                bounded(conn.sunsubscribe(channel), "SUNSUBSCRIBE").await
            }
            (Request::Subscribe, true) => bounded(conn.subscribe(channel), "SUBSCRIBE").await,
            (Request::Unsubscribe, true) => bounded(conn.unsubscribe(channel), "UNSUBSCRIBE").await,
        }
    }

    /// Sends `request` for each channel on its own (channels of different slots cannot
    /// share one request), all at once, each bounded, each by sharded Pub/Sub or
    /// classic as `classic` says; each channel with whether it succeeded, and whether
    /// its node knows no such command.
    async fn each(
        &self,
        channels: &[String],
        request: Request,
        classic: impl Fn(&str) -> bool,
    ) -> Vec<(String, Result<(), bool>)> {
        let requests = channels.iter().map(|channel| {
            let sent = Self::send(self.conn.clone(), request, classic(channel), channel);
            async move {
                let done = sent.await.map_err(|reason| {
                    tracing::debug!(%channel, %reason, "(un)subscribe failed; waiters poll");
                    unknown_command(&reason)
                });
                (channel.clone(), done)
            }
        });
        join_all(requests).await
    }

    /// Subscribes to `channels` in the link's mode; the channels subscribed, and those
    /// whose node knows no `SSUBSCRIBE`.
    ///
    /// A keyspace channel is always subscribed by `SUBSCRIBE` (keyspace notifications are
    /// not sharded messages): redis-rs sends it to the node that serves the channel's
    /// slot, which is the lock key's (the channel carries the key's hash tag), so its
    /// events come on the same node connection as the key's release messages, and in
    /// the order the node sent them.
    async fn subscribe_in_mode(&mut self, channels: &[String]) -> (Vec<String>, Vec<String>) {
        let classic = self.classic;
        let by_classic = |channel: &str| classic || keyspace::lock_of_keyspace(channel).is_some();
        let (mut done, mut unknown) = (Vec::new(), Vec::new());
        for (channel, outcome) in self.each(channels, Request::Subscribe, by_classic).await {
            match outcome {
                Ok(()) if by_classic(&channel) => {
                    self.by_classic.insert(channel.clone());
                    done.push(channel);
                }
                Ok(()) => done.push(channel),
                Err(true) if !classic => unknown.push(channel),
                Err(_) => {}
            }
        }
        (done, unknown)
    }
}

impl Link for ClusterLink {
    /// A channel whose node answers that it knows no `SSUBSCRIBE` turns the link to
    /// classic Pub/Sub, and is subscribed again at once by `SUBSCRIBE`.
    async fn subscribe(&mut self, channels: &[String]) -> Result<Vec<String>, String> {
        let (mut done, unknown) = self.subscribe_in_mode(channels).await;
        if !unknown.is_empty() {
            tracing::debug!("the cluster has no sharded Pub/Sub: subscribing by SUBSCRIBE");
            self.classic = true;
            done.extend(self.subscribe_in_mode(&unknown).await.0);
        }
        Ok(done)
    }

    /// A channel that fails to unsubscribe only brings messages nobody waits for.
    async fn unsubscribe(&mut self, channels: &[String]) -> Result<(), String> {
        let by_classic = &self.by_classic;
        self.each(channels, Request::Unsubscribe, |channel| {
            by_classic.contains(channel)
        })
        .await;
        for channel in channels {
            self.by_classic.remove(channel);
        }
        Ok(())
    }

    async fn next(&mut self) -> LinkEvent {
        loop {
            let Some(push) = self.pushes.recv().await else {
                return LinkEvent::Closed;
            };
            match (push.kind, push.data.as_slice()) {
                // An `smessage` push, or a `message` one when subscribed by
                // `SUBSCRIBE`: `[channel, message]`.
                (
                    PushKind::SMessage | PushKind::Message,
                    [Value::BulkString(channel), Value::BulkString(payload)],
                ) => {
                    return LinkEvent::Message {
                        channel: String::from_utf8_lossy(channel).into_owned(),
                        payload: payload.clone(),
                    }
                }
                // `[channel, count]`: the node no longer serves the channel's slot
                // (or confirms an unsubscribe asked for).
                (PushKind::SUnsubscribe, [Value::BulkString(channel), ..]) => {
                    return LinkEvent::Dropped(String::from_utf8_lossy(channel).into_owned())
                }
                (PushKind::Disconnection, _) => return LinkEvent::Reset,
                _ => {}
            }
        }
    }

    /// Every master's setting, asked over this connection; a cluster has database 0
    /// alone.
    async fn keyspace_setting(&mut self) -> (i64, Vec<Setting>) {
        (0, keyspace::read_cluster(self.conn.clone()).await)
    }
}

#[cfg(test)]
mod tests {
    use super::unknown_command;

    #[test]
    fn only_an_unknown_command_turns_the_link_classic() {
        // What a Redis 6.2 node answers to SSUBSCRIBE, as `bounded` reports it.
        assert!(unknown_command(
            "SSUBSCRIBE: ERR unknown command `SSUBSCRIBE`, with args beginning with: `x`, "
        ));
        assert!(!unknown_command("SSUBSCRIBE timed out"));
        assert!(!unknown_command(
            "SSUBSCRIBE: NOPERM this user has no permissions"
        ));
    }
}
