//! A quorum node's connection in `lock`: the live connection, or, for a node that could
//! not be reached at the start, the error it gave, returned at once to every request.
//! Such a node counts as not answering and the others can still make the majority; left
//! out of the quorum instead, it would shrink the majority needed.

use std::sync::Arc;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{Cmd, Pipeline, RedisError, RedisFuture, Value};

#[derive(Clone, Debug)]
pub(crate) enum Link {
    Up(MultiplexedConnection),
    Down {
        /// The database the URL names.
        db: i64,
        /// Why the node could not be reached.
        why: Arc<str>,
    },
}

impl Link {
    fn down_error(why: &str) -> RedisError {
        RedisError::from(std::io::Error::new(
            std::io::ErrorKind::NotConnected,
            format!("unreachable at the start: {why}"),
        ))
    }
}

impl ConnectionLike for Link {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Up(conn) => conn.req_packed_command(cmd),
            Self::Down { why, .. } => {
                let err = Self::down_error(why);
                Box::pin(async move { Err(err) })
            }
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Up(conn) => conn.req_packed_commands(pipeline, offset, count),
            Self::Down { why, .. } => {
                let err = Self::down_error(why);
                Box::pin(async move { Err(err) })
            }
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Up(conn) => conn.get_db(),
            Self::Down { db, .. } => *db,
        }
    }
}
