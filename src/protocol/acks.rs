//! Replica acknowledgement ([`Builder::replicas`](crate::Builder::replicas)): after the
//! writes of an acquire or a renewal, `WAIT` until enough replicas have them.

use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::{Cmd, Pipeline, RedisFuture, Value};

use crate::error::Error;

/// How many replicas must acknowledge an acquire or a renewal, and how long to wait for
/// them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Acks {
    /// At least 1.
    pub(crate) replicas: usize,
    /// At least 1 ms (`WAIT` with 0 would block until they answer).
    pub(crate) timeout: Duration,
}

impl Acks {
    /// The timeout as `WAIT` takes it: whole milliseconds, at least 1.
    fn timeout_ms(self) -> u64 {
        u64::try_from(self.timeout.as_millis())
            .unwrap_or(u64::MAX)
            .max(1)
    }
}

/// A connection that sends `WAIT <replicas> <timeout>` right behind each command or
/// pipeline (not a transaction), in the same request, and keeps the reply of the last.
///
/// The `WAIT` must reach the server that ran the writes, on the connection that sent
/// them: `WAIT` counts the replicas that have this connection's last write. Sent as a
/// request of its own, it could go out on another connection than the script's (a
/// connection manager reconnecting, or a Sentinel-following connection re-resolving the
/// primary between the two, and resending the `WAIT` alone to the new one), where the
/// connection has written nothing and any replica "has it": an acquire on a deposed
/// primary would count as acknowledged. Found by the long run (`tests/faults/long_run.rs`).
pub(crate) struct Acked<C> {
    conn: C,
    acks: Acks,
    /// The reply to the last `WAIT`, if one was sent.
    last: Option<Value>,
}

impl<C: ConnectionLike> Acked<C> {
    pub(crate) fn new(conn: C, acks: Acks) -> Self {
        Self {
            conn,
            acks,
            last: None,
        }
    }

    /// `Ok` when the `WAIT` sent behind the last command counted at least
    /// `acks.replicas` replicas; [`Error::NotReplicated`] when it counted fewer; the
    /// `WAIT`'s error (named after `key`) if it failed.
    pub(crate) fn acknowledged(&self, key: &str) -> Result<(), Error> {
        let acked = match &self.last {
            Some(Value::Int(acked)) => usize::try_from(*acked).unwrap_or(0),
            Some(Value::ServerError(err)) => {
                return Err(Error::redis(key, redis::RedisError::from(err.clone())))
            }
            _ => 0,
        };
        if acked >= self.acks.replicas {
            return Ok(());
        }
        Err(Error::NotReplicated {
            key: key.to_owned(),
            acked,
            wanted: self.acks.replicas,
        })
    }
}

impl<C: ConnectionLike + Send> Acked<C> {
    /// Sends `pipe` (whose replies are `count` from `offset`) with `WAIT` appended, keeps
    /// the `WAIT`'s reply and gives the others.
    async fn send_with_wait(
        &mut self,
        mut pipe: Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisResult<Vec<Value>> {
        self.last = None;
        pipe.cmd("WAIT")
            .arg(self.acks.replicas)
            .arg(self.acks.timeout_ms());
        let mut replies = self
            .conn
            .req_packed_commands(&pipe, offset, count + 1)
            .await?;
        if replies.len() != count + 1 {
            return Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "a request and its WAIT got another number of replies",
            )));
        }
        self.last = replies.pop();
        Ok(replies)
    }
}

impl<C: ConnectionLike + Send> ConnectionLike for Acked<C> {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let mut pipe = redis::pipe();
            pipe.add_command(cmd.clone());
            let mut replies = self.send_with_wait(pipe, 0, 1).await?;
            Ok(replies.pop().unwrap_or(Value::Nil))
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            if pipeline.is_transaction() {
                self.last = None;
                return self.conn.req_packed_commands(pipeline, offset, count).await;
            }
            self.send_with_wait(pipeline.clone(), offset, count).await
        })
    }

    fn get_db(&self) -> i64 {
        self.conn.get_db()
    }
}
