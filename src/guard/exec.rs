//! Guarded writes: a pipeline that runs only while the lock is still the guard's.

use redis::{FromRedisValue, Pipeline};

use super::Guard;
use crate::error::Error;
use crate::protocol::exec::read_replies;

impl Guard {
    /// Runs the commands of `pipe` on the lock's server only while the lock is still this
    /// guard's, in one atomic step with that check, and parses their replies into `T` as
    /// [`pipe.query_async::<T>`](redis::Pipeline::query_async) would (ignored commands
    /// left out; an [`atomic`](redis::Pipeline::atomic) pipeline's replies as a
    /// transaction's).
    ///
    /// One script (`lua/exec.lua`, sent by `EVALSHA` as every script of the crate) checks
    /// that the lock key still holds this guard's id (a writer's string, a member of the
    /// readers' set, or a semaphore entry whose deadline is after the server's `TIME`)
    /// and then runs every command, in order; nothing else runs on the server in between.
    /// So a guard that was paused past its TTL, whose lock another holder has since
    /// taken, cannot overwrite that holder's data: its pipeline is refused whole. This
    /// proves the lock was held at the moment the commands ran, on the server they ran
    /// on; effects outside Redis still need the [fencing token](Self::fencing_token). See
    /// the [guarded writes guide](crate::guide::guarded_writes).
    ///
    /// The keys of the commands are found from the server's `COMMAND INFO` (asked once
    /// per command name and kept) or, for commands whose keys move with their arguments,
    /// `COMMAND GETKEYS`, and sent as the script's keys. An empty pipeline checks the lock
    /// and runs nothing. Replies come back through Lua, in RESP2 shapes (a hash reply is a
    /// flat array, which `HashMap` parses as well), and integers above 2^53 lose
    /// precision there.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(mx: redismutex::RwMutex<redis::aio::MultiplexedConnection>)
    /// # -> Result<(), redismutex::Error> {
    /// let guard = mx.write().key("users:42").await?;
    /// let body = "{\"name\":\"Ada\"}"; // recomputed while holding the lock
    /// let mut pipe = redis::pipe();
    /// pipe.set("cache:users:42", body).ignore().incr("cache:users:42:version", 1);
    /// // Refused with Error::NotHeld, and nothing written, if the lock is no longer ours.
    /// let (version,): (i64,) = guard.exec(&pipe).await?;
    /// # let _ = version;
    /// guard.unlock().await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// - [`Error::NotHeld`] when the lock is not this guard's any more; no command ran.
    ///   If the token had fired (or the validity deadline had passed), nothing was sent;
    ///   if Redis no longer had this id, the token now fires with
    ///   [`CancelReason::Lost`](crate::CancelReason::Lost).
    /// - [`Error::CommandFailed`] when the lock was held and a command failed (a
    ///   `WRONGTYPE`, a wrong number of arguments): it says how many ran before it, and
    ///   their writes stay, as after a failed command in a Redis script or `MULTI`.
    ///   [`Error::Refused`] instead when the first command was refused for a
    ///   [`Refusal`](crate::Refusal) (`OOM` under `maxmemory`, say): nothing changed.
    /// - [`Error::InvalidPipeline`] when the pipeline cannot run as one guarded step: a
    ///   command the server does not know or that cannot run in a script (`MULTI`,
    ///   `WATCH`, `SUBSCRIBE`, ...), an empty command, one with more than 7,000
    ///   arguments, or a key of the lock itself (the lock key, `:lock-intent`, `:fence`,
    ///   `:queue`, `:queue-deadline`). No command ran.
    /// - [`Error::CrossSlot`] on a Redis Cluster when a key is not in the lock key's
    ///   slot; it names the first such key, and the pipeline was not sent.
    /// - [`Error::InvalidOptions`] over a [`Quorum`](crate::Quorum): independent masters
    ///   share no transaction, so no step can check the lock and write atomically.
    /// - [`Error::NotReplicated`] with [`Builder::replicas`](crate::Builder::replicas)
    ///   when fewer replicas than asked acknowledged the script (its `WAIT` travels in the
    ///   same request): the commands ran on the primary, but a failover now may lose them.
    /// - [`Error::Timeout`] when no reply came before the validity deadline
    ///   ([`valid_until`](Self::valid_until)): the pipeline may or may not have run.
    /// - [`Error::Redis`] when the request fails (the pipeline may or may not have run,
    ///   as with any request whose reply is lost), or when the replies do not parse as
    ///   `T` (the pipeline ran); [`Error::Refused`] when Redis refuses the script
    ///   (`NOPERM`: the user needs `EVALSHA`, `EVAL` and `COMMAND` too).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before its reply leaves the pipeline run or not, as with any
    /// request whose reply is lost; the lock and the guard are unaffected.
    pub async fn exec<T: FromRedisValue>(&self, pipe: &Pipeline) -> Result<T, Error> {
        let not_held = || Error::NotHeld {
            key: self.key().to_owned(),
        };
        if self.liveness.fire_if_expired() {
            return Err(not_held());
        }
        let run = self.lease.exec(pipe);
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
