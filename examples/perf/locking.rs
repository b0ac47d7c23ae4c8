//! Taking and giving back locks as every row does: the raw baselines' release, release
//! subscription and waits (beside `benches/raw.rs`), and the library's checked unlock.

use futures_util::{FutureExt, Stream, StreamExt};
use redis::aio::{MultiplexedConnection, PubSubStream};
use redis::Script;
use redismutex::Guard;

use crate::raw::{raw_quorum_acquire, raw_set};
use crate::{Result, FENCE_MS, TTL, TTL_MS};

/// Releases `key` held by `id` with `script`; an error if `id` did not hold it.
pub(crate) async fn raw_release(
    conn: &mut MultiplexedConnection,
    script: &Script,
    key: &str,
    id: &str,
) -> Result<()> {
    let released: i64 = script.key(key).arg(id).invoke_async(conn).await?;
    if released != 1 {
        return Err(format!("{key} was not held by {id}").into());
    }
    Ok(())
}

/// A subscription to `<key>:released`, for a raw waiter.
pub(crate) async fn raw_subscribe(client: &redis::Client, key: &str) -> Result<PubSubStream> {
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub.subscribe(format!("{key}:released")).await?;
    Ok(pubsub.into_on_message())
}

/// The raw waiter: `SET NX` until it succeeds, waiting for a release message after
/// each failure. The subscription is made before the first `SET`, so no release is
/// missed; the timeout only bounds the wait on a holder that dies without publishing.
pub(crate) async fn raw_wait(
    conn: &mut MultiplexedConnection,
    messages: &mut (impl Stream<Item = redis::Msg> + Unpin),
    key: &str,
    id: &str,
) -> Result<()> {
    while !raw_set(conn, key, id, TTL_MS).await? {
        let _ = tokio::time::timeout(TTL, messages.next()).await;
    }
    Ok(())
}

/// The raw quorum waiter: [`raw_quorum_acquire`] until it succeeds, waiting for a release
/// message from any node after each failure. `messages` merges the subscriptions to
/// `<key>:released` on every node, made before the first attempt; the messages already
/// there (an earlier release publishes on every node, and the first woke the last wait)
/// are dropped first.
pub(crate) async fn raw_quorum_wait(
    nodes: &[MultiplexedConnection],
    messages: &mut (impl Stream<Item = redis::Msg> + Unpin),
    key: &str,
    id: &str,
) -> Result<()> {
    while messages.next().now_or_never().flatten().is_some() {}
    while raw_quorum_acquire(nodes, key, id, TTL_MS, FENCE_MS)
        .await
        .is_none()
    {
        let _ = tokio::time::timeout(TTL, messages.next()).await;
    }
    Ok(())
}

/// Unlocks `guard`; an error if the lock was gone.
pub(crate) async fn check_unlocked(guard: impl Guard) -> Result<()> {
    if !guard.unlock().await? {
        return Err("unlock found the lock gone".into());
    }
    Ok(())
}
