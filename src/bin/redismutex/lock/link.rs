//! A quorum node's connection in `lock`: a multiplexed connection (as one server gets),
//! made again when it breaks. A node down at the start, or one that restarts while the
//! lock is held, fails its requests (it counts as not answering, and the others can
//! still make the majority) until it answers again; a refresh that then needs it for
//! the majority takes the lock back on it. Left out of the quorum instead, a node down
//! at the start would shrink the majority needed.

use std::fmt;
use std::sync::Arc;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{Cmd, Pipeline, RedisFuture, RedisResult, Value};
use tokio::sync::Mutex;

#[derive(Clone)]
pub(crate) struct Link {
    inner: Arc<Inner>,
}

struct Inner {
    client: redis::Client,
    /// The database the URL names.
    db: i64,
    slot: Mutex<Slot>,
}

/// The connection in use, if any, and how many have been made (so that a request that
/// failed on an old one does not drop a newer one).
struct Slot {
    conn: Option<MultiplexedConnection>,
    made: u64,
}

impl Link {
    /// A link to the node of `client`, starting with `conn` when the first attempt to
    /// connect succeeded.
    pub(crate) fn new(client: redis::Client, conn: Option<MultiplexedConnection>) -> Self {
        let db = client.get_connection_info().redis_settings().db();
        Self {
            inner: Arc::new(Inner {
                client,
                db,
                slot: Mutex::new(Slot { conn, made: 0 }),
            }),
        }
    }

    /// The connection in use, made now if there is none; and its number.
    async fn conn(&self) -> RedisResult<(MultiplexedConnection, u64)> {
        let mut slot = self.inner.slot.lock().await;
        if let Some(conn) = &slot.conn {
            return Ok((conn.clone(), slot.made));
        }
        let conn = self.inner.client.get_multiplexed_async_connection().await?;
        slot.made += 1;
        slot.conn = Some(conn.clone());
        Ok((conn, slot.made))
    }

    /// After a request on connection `made` failed with `err`: drops that connection if
    /// the error says it is broken (not for a timeout or an error reply).
    async fn check<T>(&self, made: u64, result: RedisResult<T>) -> RedisResult<T> {
        if let Err(err) = &result {
            if err.is_unrecoverable_error() {
                let mut slot = self.inner.slot.lock().await;
                if slot.made == made {
                    slot.conn = None;
                }
            }
        }
        result
    }
}

impl ConnectionLike for Link {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let (mut conn, made) = self.conn().await?;
            let result = conn.req_packed_command(cmd).await;
            self.check(made, result).await
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let (mut conn, made) = self.conn().await?;
            let result = conn.req_packed_commands(pipeline, offset, count).await;
            self.check(made, result).await
        })
    }

    fn get_db(&self) -> i64 {
        self.inner.db
    }
}

impl fmt::Debug for Link {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Link")
            .field(
                "addr",
                &self.inner.client.get_connection_info().addr().to_string(),
            )
            .field("db", &self.inner.db)
            .finish_non_exhaustive()
    }
}
