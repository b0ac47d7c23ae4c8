//! Which Pub/Sub a cluster notifier subscribes by on the server under test, and who is
//! subscribed to a release channel on a node: sharded (`SSUBSCRIBE`, counted by `PUBSUB
//! SHARDNUMSUB`) from Redis 7.0, classic (`SUBSCRIBE`, counted by `PUBSUB NUMSUB`) on
//! Redis 6.2, which has no sharded Pub/Sub and where the crate falls back to it.

use super::binaries::server_version;
use super::cluster::Cluster;

/// Whether the server under test has sharded Pub/Sub (Redis 7.0 or newer, any Valkey).
pub fn sharded() -> bool {
    server_version().at_least(7, 0)
}

/// What the release notifications on a cluster run by on this server, for messages.
pub fn kind() -> &'static str {
    if sharded() {
        "sharded Pub/Sub (SSUBSCRIBE, SPUBLISH)"
    } else {
        "classic Pub/Sub (SUBSCRIBE, PUBLISH), the fallback without sharded Pub/Sub"
    }
}

/// How many subscribers `channel` has on the node at `port` by `PUBSUB <numsub>`.
async fn count(cluster: &Cluster, port: u16, numsub: &str, channel: &str) -> i64 {
    let counts: Vec<(String, i64)> = redis::cmd("PUBSUB")
        .arg(numsub)
        .arg(channel)
        .query_async(&mut cluster.node_conn(port).await)
        .await
        .unwrap();
    counts.first().map_or(0, |(_, count)| *count)
}

/// How many subscribers `channel` has on the node at `port` by the Pub/Sub of this
/// server ([`sharded`] or classic); and with sharded Pub/Sub, asserts that nobody
/// subscribed to it classically there (a cluster notifier falls back only when it must).
pub async fn subscribers(cluster: &Cluster, port: u16, channel: &str) -> i64 {
    if !sharded() {
        return count(cluster, port, "NUMSUB", channel).await;
    }
    assert_eq!(
        count(cluster, port, "NUMSUB", channel).await,
        0,
        "{channel} subscribed by SUBSCRIBE on a server with sharded Pub/Sub"
    );
    count(cluster, port, "SHARDNUMSUB", channel).await
}

/// Whether `channel` has `n` subscribers on the node at `port` ([`subscribers`]).
pub async fn subscribed(cluster: &Cluster, port: u16, channel: &str, n: i64) -> bool {
    subscribers(cluster, port, channel).await == n
}

/// How many subscribers `channel` has on all masters together ([`subscribers`]).
pub async fn subscribed_anywhere(cluster: &Cluster, channel: &str) -> i64 {
    let mut total = 0;
    for master in cluster.masters() {
        total += subscribers(cluster, master.port, channel).await;
    }
    total
}

/// How many classic subscribers (`SUBSCRIBE`, as keyspace channels are subscribed)
/// `channel` has on the node at `port`.
pub async fn classic_subscribers(cluster: &Cluster, port: u16, channel: &str) -> i64 {
    count(cluster, port, "NUMSUB", channel).await
}
