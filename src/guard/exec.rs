//! Guarded writes: a pipeline that runs only while the lock is still the guard's.

use redis::{FromRedisValue, Pipeline};

use super::any::AnyGuard;
use crate::error::Error;
use crate::mode::Mode;
use crate::protocol::exec::{read_replies, Access};

impl AnyGuard {
    /// Runs `pipe` only while the lock is still this guard's, in one step with that
    /// check, and parses the replies as `T`. A read guard's, or any on a lock held shared
    /// now (a write guard nested in an outer guard that was since downgraded), refuses a
    /// pipeline holding a command the server flags `write` before anything is sent. The
    /// public docs are [`WriteGuard::exec`](crate::WriteGuard::exec)'s.
    pub(crate) async fn exec<T: FromRedisValue>(&self, pipe: &Pipeline) -> Result<T, Error> {
        let not_held = || Error::NotHeld {
            key: self.key().to_owned(),
        };
        if self.liveness.fire_if_expired() {
            return Err(not_held());
        }
        // Other readers may hold a lock held shared, whatever this guard's type.
        let access = if self.mode == Mode::Read || self.lease.mode() == Mode::Read {
            Access::Read
        } else {
            Access::Write
        };
        let run = self.lease.exec(pipe, access);
        let Ok(replies) = tokio::time::timeout_at(self.liveness.deadline(), run).await else {
            return Err(Error::Timeout);
        };
        let Some(replies) = replies? else {
            return Err(not_held());
        };
        read_replies(pipe, replies).map_err(|source| Error::Redis {
            key: self.key().to_owned(),
            source,
        })
    }
}
