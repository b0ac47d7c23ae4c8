//! The public handle on a process's release notifications.

use std::fmt;
use std::sync::Arc;

use super::hub::Hub;
use crate::error::Error;

/// Wakes waiting [`write`](crate::RwMutex::write)s and [`read`](crate::RwMutex::read)s
/// when the lock they wait for is released, instead of letting them poll.
///
/// A release (unlock, drop, a reader set emptied, or a waiting writer clearing its
/// intent) publishes on the lock's channel `<lock key>:released`. A notifier holds one
/// subscriber connection (a Redis Pub/Sub connection, or on a cluster a RESP3 cluster
/// connection), opened from its client the first time a request has to wait, and one
/// subscription per lock key that has waiters in this process, dropped when the last
/// of them stops waiting. Waiters in the same process as the
/// releaser are woken at once, without waiting for the message to come back.
///
/// [`Notifier::new`] returns the process's notifier for the client's server (same
/// address, database and credentials), so every mutex made with a client for one server
/// shares one connection, even when each is given its own `redis::Client`.
///
/// One release wakes the first waiter in this process's queue for the lock key if it is
/// a writer, or every waiting reader if a reader is first; the rest sleep on, so a
/// release costs one script per process, not one per waiter. Each sleep is also bounded
/// by a fallback timer (the PTTL of whatever blocks the waiter, and at most half its
/// TTL) for holders that publish nothing: Go clients of the original package, and
/// holders that crashed and whose key expires. On a lock none of whose messages this
/// notifier has received yet, a waiter whose attempt found it held sleeps 750 ms at
/// first, doubling up to that timer (its holders may publish nothing). Once a waiter
/// found a lock free after a sleep cut short of the blocker's PTTL (a holder that kept
/// its key alive released it without a message), this process's waiters on that lock
/// poll instead, as without a notifier, for ten minutes
/// ([`guide::waiting`](crate::guide::waiting#holders-that-publish-nothing)); a message
/// still wakes them at once. [`keyspace_events`](Self::keyspace_events) makes such a
/// holder's release wake its waiters too.
///
/// If the connection drops, every waiter is woken to look again (a release may have
/// been missed), and waiters poll until the connection is back and subscribed; it is
/// reopened with a backoff of 10 ms doubling to 1 s. The connection uses the client's
/// settings (address, TLS, credentials, database).
///
/// On a Redis Cluster (feature `cluster`), use `Notifier::cluster`: releases go out by
/// `SPUBLISH` on a channel in the lock key's slot, and the notifier subscribes with
/// `SSUBSCRIBE` on the node that serves it (on Redis 6.2, which has no sharded Pub/Sub,
/// by `PUBLISH` and `SUBSCRIBE` instead).
///
/// A mutex without a notifier polls, as the [waiting guide](crate::guide::waiting)
/// describes.
///
/// # Examples
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use redismutex::RwMutex;
///
/// let client = redis::Client::open("redis://127.0.0.1/")?;
/// let conn = client.get_multiplexed_async_connection().await?;
/// let mx = RwMutex::builder(conn, "orders").notifier(client).build()?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Notifier {
    pub(crate) hub: Arc<Hub>,
}

impl Notifier {
    /// The notifier of this process for `client`'s server: made on first use, shared by
    /// every later call with a client for the same server, address, database and user.
    /// Nothing is sent until a request has to wait.
    pub fn new(client: redis::Client) -> Self {
        Self {
            hub: Hub::shared(client),
        }
    }
}

impl Notifier {
    /// This notifier, made to wait also on the Redis keyspace notifications of each
    /// waited lock key (`__keyspace@<db>__:<lock key>`), for holders that publish
    /// nothing when they release: the Go package's clients, or any holder you do not
    /// control. A lock key's deletion (`del`: a Go writer's `DEL`, or its readers' last
    /// `SREM`, after which Redis deletes the empty set), expiry (`expired`) or eviction
    /// (`evicted`) then wakes its waiters as a release message does, at once instead of
    /// at their fallback timer. Subscribed per waited key with its release channel, and
    /// dropped with its last waiter; on a cluster on the node that serves the key's
    /// slot. A release by this crate, which publishes and deletes, still wakes once.
    ///
    /// The servers must publish them: `notify-keyspace-events` with `K`, `g` and `x`
    /// (`CONFIG SET notify-keyspace-events Kgx`, or in redis.conf; on every node of a
    /// cluster). A server then publishes a message on every change of every key (of
    /// every client), which costs it CPU in proportion to its writes. Each time the
    /// notifier's connection (re)connects to a node it reads the setting there: a node
    /// without it, or that refuses `CONFIG` (managed services), is logged as a warning
    /// (`tracing::warn!`) naming the node and what to set, and its waiters wake by their
    /// release messages and their timers, as without this option.
    /// [`check_keyspace_events`](Self::check_keyspace_events) makes that an error at
    /// start. See the [waiting guide](crate::guide::waiting).
    ///
    /// A notifier made by [`Notifier::new`] and one with keyspace events for the same
    /// server are two notifiers, each with its own connection, and each shared in the
    /// process: waiters on one lock through each are woken by their own notifier.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use redismutex::{Notifier, RwMutex};
    ///
    /// let client = redis::Client::open("redis://127.0.0.1/")?;
    /// let conn = client.get_multiplexed_async_connection().await?;
    /// let notifier = Notifier::new(client).keyspace_events();
    /// notifier.check_keyspace_events().await?;
    /// let mx = RwMutex::builder(conn, "orders").notifier(notifier).build()?;
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn keyspace_events(self) -> Self {
        Self {
            hub: self.hub.with_keyspace(),
        }
    }

    /// Reads `notify-keyspace-events` on every node the notifier reaches now (its
    /// server, every master of its cluster, the primary its Sentinels name, every node
    /// of its quorum), each over a connection of its own, and checks that it has what
    /// [`keyspace_events`](Self::keyspace_events) needs (`K`, and `g` and `x` or `A`).
    ///
    /// # Errors
    ///
    /// [`Error::KeyspaceEvents`] naming the first node that has them off, that refused
    /// `CONFIG`, or that could not be reached (each request is bounded by 2 s), with what
    /// it found and what to set.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads, and its connections close when dropped.
    pub async fn check_keyspace_events(&self) -> Result<(), Error> {
        for source in self.hub.sources() {
            for setting in source.keyspace_settings().await {
                if let Some(reason) = setting.problem() {
                    return Err(Error::KeyspaceEvents {
                        node: setting.node,
                        reason,
                    });
                }
            }
        }
        Ok(())
    }
}

impl Notifier {
    /// A notifier for a primary under Redis Sentinel (feature `sentinel`), for a mutex
    /// over a [`SentinelConnection`](crate::SentinelConnection): its subscriber
    /// connection goes to the primary the Sentinels name each time it (re)connects, so
    /// after a failover that drops it, it subscribes on the new primary. A failover that
    /// leaves the old connection open but silent (a frozen primary) is not noticed: its
    /// waiters then wake by their fallback timer (the blocker's PTTL, at most half the
    /// TTL). Each call makes a notifier of its own: clone it into every builder.
    #[cfg(feature = "sentinel")]
    #[cfg_attr(docsrs, doc(cfg(feature = "sentinel")))]
    pub fn sentinel(client: redis::sentinel::SentinelClient) -> Self {
        Self {
            hub: Hub::sentinel(client),
        }
    }
}

impl Notifier {
    /// A notifier for a [`Quorum`](crate::Quorum): one client per node, in the order of
    /// the quorum's connections (a mutex with a notifier for another number of nodes is
    /// refused with [`Error::InvalidOptions`](crate::Error::InvalidOptions)).
    ///
    /// It opens one Pub/Sub connection per node the first time a request has to wait.
    /// A release publishes on every node that held the lock, and any of those messages
    /// wakes the waiters. A waiter relies on being woken only while a majority of the
    /// nodes' connections are subscribed to its channel: a holder holds a majority, and
    /// two majorities share a node, so its release reaches one of them. With fewer (nodes
    /// down, connections being reopened with a backoff of 10 ms doubling to 1 s), its
    /// waiters poll.
    ///
    /// Each call makes a notifier of its own: make one and clone it into every builder
    /// for the quorum.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use redismutex::{Notifier, Quorum, RwMutex};
    ///
    /// let urls = ["redis://10.0.0.1/", "redis://10.0.0.2/", "redis://10.0.0.3/"];
    /// let clients = urls
    ///     .iter()
    ///     .map(|url| redis::Client::open(*url))
    ///     .collect::<Result<Vec<_>, _>>()?;
    /// let mut nodes = Vec::new();
    /// for client in &clients {
    ///     nodes.push(client.get_multiplexed_async_connection().await?);
    /// }
    /// let mx = RwMutex::builder(Quorum::new(nodes)?, "orders")
    ///     .notifier(Notifier::quorum(clients))
    ///     .build()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn quorum(clients: impl IntoIterator<Item = redis::Client>) -> Self {
        Self {
            hub: Hub::quorum(clients.into_iter().collect()),
        }
    }
}

#[cfg(feature = "cluster")]
#[cfg_attr(docsrs, doc(cfg(feature = "cluster")))]
impl Notifier {
    /// A notifier for the Redis Cluster that `client` reaches (feature `cluster`), for
    /// mutexes on a `redis::cluster_async::ClusterConnection`.
    ///
    /// It opens one cluster connection of its own, with a push sender, the first time a
    /// request has to wait, and subscribes to each release channel with `SSUBSCRIBE` on
    /// the node that serves its slot (Redis 7.0 or newer). redis-rs moves those
    /// subscriptions when a replica takes over; a channel whose slot moves to another
    /// node (the old node ends the subscription) is subscribed again on the new one. A
    /// node's connection that drops wakes every waiter and subscribes every channel
    /// again, as a lost connection does on a single server. A channel that cannot be
    /// subscribed (its node is down) is tried again after a backoff of 10 ms doubling to
    /// 1 s, while the others stay subscribed; its waiters poll meanwhile.
    ///
    /// A cluster without sharded Pub/Sub (Redis 6.2) answers `SSUBSCRIBE` with "unknown
    /// command": from that answer on, the connection subscribes by `SUBSCRIBE` instead
    /// (found once per connection, so again after it is reopened), and the scripts, whose
    /// `SPUBLISH` the node refuses the same way, publish by `PUBLISH`, which every node of
    /// a cluster passes on to its subscribers. Waiters are then woken as on Redis 7.0,
    /// at the cost of each release message going to every node. In a cluster whose nodes
    /// run both kinds of server (during an upgrade), a waiter on a channel published the
    /// other way than it subscribed wakes by its fallback timer.
    ///
    /// With [`keyspace_events`](Self::keyspace_events), each waited lock key's keyspace
    /// channel is subscribed by `SUBSCRIBE` over the same connection: redis-rs sends it
    /// to the master that serves the channel's slot, which is the lock key's (a lock
    /// key on a cluster carries a hash tag, and so does its channel), and moves it when
    /// the slot moves (on `MOVED`, with the release channel) or the node reconnects. The
    /// setting is read on every master at each (re)connection: one master without it
    /// turns keyspace waiting off for the whole cluster until the next, with a warning.
    ///
    /// `client` must speak RESP3 (`ClusterClientBuilder::use_protocol(ProtocolVersion::RESP3)`,
    /// or `?protocol=resp3` in its URLs): sharded messages arrive as RESP3 pushes. With a
    /// RESP2 client the notifier cannot connect; it tries again about once a second and
    /// waiters poll (logged at debug level).
    ///
    /// Unlike [`Notifier::new`], each call makes a notifier of its own (a cluster client
    /// does not say which cluster it reaches): make one and clone it into every builder.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use redis::cluster::ClusterClientBuilder;
    /// use redismutex::{Notifier, RwMutex};
    ///
    /// let client = ClusterClientBuilder::new(["redis://127.0.0.1:7000/"])
    ///     .use_protocol(redis::ProtocolVersion::RESP3)
    ///     .build()?;
    /// let conn = client.get_async_connection().await?;
    /// let notifier = Notifier::cluster(client);
    /// let mx = RwMutex::builder(conn, "{orders}").notifier(notifier).build()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn cluster(client: redis::cluster::ClusterClient) -> Self {
        Self {
            hub: Hub::cluster(client),
        }
    }
}

#[cfg(feature = "cluster")]
#[cfg_attr(docsrs, doc(cfg(feature = "cluster")))]
impl From<redis::cluster::ClusterClient> for Notifier {
    fn from(client: redis::cluster::ClusterClient) -> Self {
        Self::cluster(client)
    }
}

impl From<redis::Client> for Notifier {
    fn from(client: redis::Client) -> Self {
        Self::new(client)
    }
}

impl fmt::Debug for Notifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Notifier").field("hub", &self.hub).finish()
    }
}
