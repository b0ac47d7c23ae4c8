//! [`SentinelConnection`] (feature `sentinel`): a redis-rs connection that follows the
//! primary Redis Sentinel names, so that a mutex made over it reaches the new primary
//! after a failover. It is a connection, not a backend: the one-connection backend runs
//! over it unchanged.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::sentinel::SentinelClient;
use redis::{AsyncConnectionConfig, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};

use crate::util;

/// How long finding the primary (asking the Sentinels, checking its `ROLE`) and
/// connecting to it may take before a request fails.
const RESOLVE_BOUND: Duration = Duration::from_secs(1);
/// The response timeout of the connection to the primary: past it a request counts as
/// failed over. Above redis-rs's default of 500 ms, so that a `WAIT` of
/// [`Builder::replicas`](crate::Builder::replicas) up to 2 s is answered.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);

/// A connection to the primary that Redis Sentinel names, for a [`RwMutex`] or
/// [`Semaphore`] over a replicated primary (feature `sentinel`; see the
/// [Sentinel guide](crate::guide::sentinel)).
///
/// It holds one multiplexed connection to the primary, found through the Sentinels of a
/// [`SentinelClient`] (built for `SentinelServerType::Master`). A request that fails in
/// a way a failover explains (the connection refused, dropped or timed out; `READONLY`
/// from a primary that was demoted; `MASTERDOWN`; `LOADING`) drops that connection, and
/// the next request asks the Sentinels again, so requests, refreshes and releases reach
/// the new primary without a new mutex. Finding the primary and connecting are bounded
/// by 1 s, and each request by a response timeout of 2 s; while the Sentinels name no
/// primary that answers, a request fails with [`Error::NoPrimary`](crate::Error::NoPrimary)
/// naming its key (a waiting request keeps trying until its timeout; a refresh retries
/// until the guard's deadline).
///
/// Clones share the connection. For releases to wake waiters, give the mutex a
/// [`Notifier::sentinel`](crate::Notifier::sentinel) of the same Sentinels.
///
/// [`RwMutex`]: crate::RwMutex
/// [`Semaphore`]: crate::Semaphore
///
/// # Examples
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use redis::sentinel::{SentinelClient, SentinelServerType};
/// use redismutex::{RwMutex, SentinelConnection};
///
/// let sentinels = vec!["redis://10.0.0.1:26379/", "redis://10.0.0.2:26379/"];
/// let client = SentinelClient::build(sentinels, "mymaster".to_owned(), None, SentinelServerType::Master)?;
/// let mx = RwMutex::new(SentinelConnection::new(client), "orders");
/// let guard = mx.write().await?;
/// # drop(guard);
/// # Ok(())
/// # }
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "sentinel")))]
#[derive(Clone)]
pub struct SentinelConnection {
    state: Arc<SentinelState>,
}

/// What the clones of a [`SentinelConnection`] share: the Sentinels, and the connection
/// to the primary they named.
struct SentinelState {
    sentinels: tokio::sync::Mutex<SentinelClient>,
    /// The connection to the primary, until a request finds it gone, with the number
    /// of connections made before it: a request drops only the connection it failed
    /// on, not a fresher one another request has made since.
    primary: Mutex<Option<(u64, MultiplexedConnection)>>,
    /// Connections made so far.
    made: std::sync::atomic::AtomicU64,
}

impl SentinelConnection {
    /// A connection to the primary `client`'s Sentinels name; nothing is sent until the
    /// first request.
    pub fn new(client: SentinelClient) -> Self {
        Self {
            state: Arc::new(SentinelState {
                sentinels: tokio::sync::Mutex::new(client),
                primary: Mutex::new(None),
                made: std::sync::atomic::AtomicU64::new(0),
            }),
        }
    }

    /// Runs `send` on the connection to the primary; when it fails as a failover would
    /// make it fail, once more on a connection to the primary the Sentinels name then.
    /// (Sending again is safe for this crate's requests: each script under the same id
    /// finds what the first one did.)
    async fn send<'a, T, F>(&self, send: F) -> Result<T, RedisError>
    where
        F: Fn(MultiplexedConnection) -> RedisFuture<'a, T>,
    {
        let (made, conn) = self.primary().await?;
        let reply = send(conn).await;
        match &reply {
            Err(err) if failed_over(err) => {
                tracing::debug!(error = %err, "the primary may have changed; asking the Sentinels again");
                {
                    let mut held = util::lock(&self.state.primary);
                    if held.as_ref().is_some_and(|(current, _)| *current == made) {
                        *held = None;
                    }
                }
                send(self.primary().await?.1).await
            }
            _ => reply,
        }
    }

    /// The connection to the primary and its number: the one held, or a new one to the primary the
    /// Sentinels name now; an error of kind `MasterNameNotFoundBySentinel` (which the
    /// crate reports as `Error::NoPrimary`) when none is found within [`RESOLVE_BOUND`].
    async fn primary(&self) -> Result<(u64, MultiplexedConnection), RedisError> {
        if let Some(held) = util::lock(&self.state.primary).clone() {
            return Ok(held);
        }
        let mut sentinels = self.state.sentinels.lock().await;
        // Another request may have connected while this one waited for the Sentinels.
        if let Some(held) = util::lock(&self.state.primary).clone() {
            return Ok(held);
        }
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(RESOLVE_BOUND))
            .set_response_timeout(Some(RESPONSE_TIMEOUT));
        let found = tokio::time::timeout(RESOLVE_BOUND, async {
            let client = sentinels.async_get_client().await?;
            client
                .get_multiplexed_async_connection_with_config(&config)
                .await
        })
        .await;
        let conn = match found {
            Ok(Ok(conn)) => conn,
            Ok(Err(err)) => return Err(no_primary(err.to_string())),
            Err(_) => return Err(no_primary("no answer within 1 s".to_owned())),
        };
        let made = self
            .state
            .made
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        *util::lock(&self.state.primary) = Some((made, conn.clone()));
        Ok((made, conn))
    }
}

/// The error of a request that found no primary, with what finding one reported.
fn no_primary(detail: String) -> RedisError {
    RedisError::from((
        ErrorKind::MasterNameNotFoundBySentinel,
        "no primary found through the Sentinels",
        detail,
    ))
}

/// Whether `err` is what a client of a primary sees around a failover.
fn failed_over(err: &RedisError) -> bool {
    use redis::ServerErrorKind;
    err.is_io_error()
        || err.is_connection_dropped()
        || err.is_connection_refusal()
        || err.is_timeout()
        || matches!(
            err.kind(),
            ErrorKind::Server(
                ServerErrorKind::ReadOnly
                    | ServerErrorKind::MasterDown
                    | ServerErrorKind::BusyLoading
            )
        )
}

impl ConnectionLike for SentinelConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(
            self.send(move |mut conn| Box::pin(async move { conn.req_packed_command(cmd).await })),
        )
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(self.send(move |mut conn| {
            Box::pin(async move { conn.req_packed_commands(pipeline, offset, count).await })
        }))
    }

    fn get_db(&self) -> i64 {
        0
    }
}

impl fmt::Debug for SentinelConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SentinelConnection")
            .field("connected", &util::lock(&self.state.primary).is_some())
            .finish_non_exhaustive()
    }
}
