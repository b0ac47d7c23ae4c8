//! The subscriber connection on a Redis Cluster (feature `cluster`): a RESP3 cluster
//! connection whose sharded subscriptions (`SSUBSCRIBE`) go to the node that serves each
//! channel's slot, and whose messages come back as pushes.

use futures_util::future::join_all;
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{PushInfo, PushKind, Value};
use tokio::sync::mpsc::UnboundedReceiver;

use super::link::{bounded, Link, LinkEvent};

/// A RESP3 cluster connection whose pushes (sharded messages, and a node's
/// connection dropping) come back on a channel. redis-rs resubscribes by itself
/// after a node reconnects or a slot moves; a node's connection that drops may
/// still have lost a release, so it is reported as [`LinkEvent::Reset`].
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

    async fn next(&mut self) -> LinkEvent {
        loop {
            let Some(push) = self.pushes.recv().await else {
                return LinkEvent::Closed;
            };
            match (push.kind, push.data.as_slice()) {
                // An `smessage` push: `[channel, message]`.
                (PushKind::SMessage, [Value::BulkString(channel), Value::BulkString(payload)]) => {
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
}
