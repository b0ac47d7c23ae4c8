//! One process's handle on the hand-off's lock, whichever [`Side`] it runs.

use futures_util::stream::SelectAll;
use redis::aio::{MultiplexedConnection, PubSubStream};
use redis::Script;
use redismutex::{Notifier, Quorum, RwMutex, WriteGuard};

use super::Side;
use crate::locking::{check_unlocked, raw_quorum_wait, raw_release, raw_wait};
use crate::raw::{
    raw_majority, raw_quorum_acquire, raw_quorum_release, raw_set, RELEASE, RELEASE_PUBLISH,
};
use crate::{Result, FENCE_MS, TTL_MS};

/// One process's handle on the hand-off's lock.
pub(super) enum Handle {
    Single(RwMutex<MultiplexedConnection>),
    Quorum(RwMutex<Quorum<MultiplexedConnection>>),
    Raw(MultiplexedConnection),
    RawQuorum(Vec<MultiplexedConnection>),
}

/// A raw waiter's release messages: its subscriptions on every node, merged.
pub(super) type Messages = SelectAll<PubSubStream>;

/// A client and a connection for each of `urls`.
pub(super) async fn connect(
    urls: &[String],
) -> Result<(Vec<redis::Client>, Vec<MultiplexedConnection>)> {
    let mut clients = Vec::new();
    let mut conns = Vec::new();
    for url in urls {
        let client = redis::Client::open(url.as_str())?;
        conns.push(client.get_multiplexed_async_connection().await?);
        clients.push(client);
    }
    Ok((clients, conns))
}

impl Handle {
    /// `side`'s handle on the servers of `clients` and `conns`; a library mutex has a
    /// notifier when `notified`.
    pub(super) fn new(
        side: Side,
        clients: &[redis::Client],
        conns: &[MultiplexedConnection],
        notified: bool,
    ) -> Result<Self> {
        Ok(match side {
            Side::Raw => Self::Raw(conns[0].clone()),
            Side::QuorumRaw => Self::RawQuorum(conns.to_vec()),
            Side::Library => {
                let builder = RwMutex::builder(conns[0].clone(), "perf-handoff");
                let builder = if notified {
                    builder.notifier(clients[0].clone())
                } else {
                    builder
                };
                Self::Single(builder.build()?)
            }
            Side::QuorumLibrary => {
                let builder = RwMutex::builder(Quorum::new(conns.to_vec())?, "perf-handoff");
                let builder = if notified {
                    builder.notifier(Notifier::quorum(clients.to_vec()))
                } else {
                    builder
                };
                Self::Quorum(builder.build()?)
            }
        })
    }

    /// Takes the write lock on `key` as `id` (a raw id; the library makes its own): the
    /// raw waiter waits on `messages`; without them, raw fails when the key is taken.
    pub(super) async fn take(
        &self,
        key: &str,
        id: &str,
        messages: Option<&mut Messages>,
    ) -> Result<Option<WriteGuard>> {
        match (self, messages) {
            (Self::Single(mx), _) => Ok(Some(mx.write().key(key).await?)),
            (Self::Quorum(mx), _) => Ok(Some(mx.write().key(key).await?)),
            (Self::Raw(conn), Some(messages)) => {
                raw_wait(&mut conn.clone(), messages, key, id).await?;
                Ok(None)
            }
            (Self::Raw(conn), None) => {
                if !raw_set(&mut conn.clone(), key, id, TTL_MS).await? {
                    return Err(format!("{key} is taken").into());
                }
                Ok(None)
            }
            (Self::RawQuorum(nodes), Some(messages)) => {
                raw_quorum_wait(nodes, messages, key, id).await?;
                Ok(None)
            }
            (Self::RawQuorum(nodes), None) => {
                if raw_quorum_acquire(nodes, key, id, TTL_MS, FENCE_MS)
                    .await
                    .is_none()
                {
                    return Err(format!("{key} is taken on a majority").into());
                }
                Ok(None)
            }
        }
    }

    /// Releases what [`take`](Self::take) returned; raw publishes to waiters when
    /// `publish`.
    pub(super) async fn release(
        &self,
        held: Option<WriteGuard>,
        key: &str,
        id: &str,
        publish: bool,
    ) -> Result<()> {
        if let Some(guard) = held {
            return check_unlocked(guard).await;
        }
        let script: &Script = if publish { &RELEASE_PUBLISH } else { &RELEASE };
        match self {
            Self::Raw(conn) => raw_release(&mut conn.clone(), script, key, id).await,
            Self::RawQuorum(nodes) => {
                let released = raw_quorum_release(nodes, script, key, id, TTL_MS).await;
                if released < raw_majority(nodes.len()) {
                    return Err(format!("{key} was released on {released} nodes").into());
                }
                Ok(())
            }
            Self::Single(_) | Self::Quorum(_) => Err("a library lock without its guard".into()),
        }
    }
}
