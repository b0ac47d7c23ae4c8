//! A guarded pipeline: the commands of a redis-rs [`Pipeline`] sent as one `exec.lua`,
//! which runs them only while the lock's id still holds the lock (every lock of a set),
//! and their replies read back as the pipeline itself would read them.

use std::future::Future as _;

use redis::aio::ConnectionLike;
use redis::{Arg, Cmd, FromRedisValue, Pipeline, RedisFuture, RedisResult, Value};

use super::calls::Call;
pub(crate) use super::command_keys::Access;
use super::command_keys::{Arguments, CommandKeys};
use super::keys::Keys;
use super::lua::SCRIPTS;
use super::slot::slot;
use crate::error::{Error, Preview};

/// The most arguments one command of a guarded pipeline may have, its name included:
/// the script hands them to `redis.pcall` with Lua's `unpack`, whose results must fit in
/// the Lua stack of Redis's Lua 5.1 (`LUAI_MAXCSTACK`, 8,000 slots). A command with more
/// is refused before anything is sent (`tests/lock/exec/input.rs` runs one at the limit).
pub(crate) const MAX_COMMAND_ARGS: usize = 7_000;

/// What a guarded pipeline did.
#[derive(Debug)]
pub(crate) enum Executed {
    /// The id held the lock: every command ran; their replies, in order.
    Ran(Vec<Value>),
    /// The id did not hold the lock at this index of the locks guarding the pipeline (0
    /// for a single lock): nothing ran.
    NotHeld(usize),
}

/// A pipeline's commands, checked and with their keys found, ready to be sent.
pub(crate) struct Guarded<'p> {
    commands: Vec<Arguments<'p>>,
    /// The positions of each command's keys among its arguments.
    positions: Vec<Vec<usize>>,
}

impl<'p> Guarded<'p> {
    /// `pipe`'s commands guarded by the locks of `locks` (one, or a set's; not empty):
    /// their keys found by `command_keys` (which may ask the server on `conn`), none of
    /// them one of the locks' own keys, and all in the first lock key's slot when
    /// `sharded` (a Redis Cluster). Nothing runs yet.
    ///
    /// [`Error::InvalidPipeline`] for a command that is empty, has a cursor argument,
    /// has more than [`MAX_COMMAND_ARGS`] arguments, is unknown to the server or cannot
    /// run in a script, writes under [`Access::Read`], or touches the lock's own keys;
    /// [`Error::CrossSlot`] for the first key of another slot.
    pub(crate) async fn new<C: ConnectionLike>(
        conn: &mut C,
        command_keys: &CommandKeys,
        locks: &[&Keys],
        pipe: &'p Pipeline,
        sharded: bool,
        access: Access,
    ) -> Result<Self, Error> {
        let lock = locks.first().map_or("", |keys| keys.lock());
        let commands = pipe
            .cmd_iter()
            .enumerate()
            .map(|(at, cmd)| arguments(cmd, at, lock))
            .collect::<Result<Vec<_>, Error>>()?;
        let positions = command_keys
            .positions(conn, &commands, lock, access)
            .await?;
        let guarded = Self {
            commands,
            positions,
        };
        guarded.check_keys(locks, sharded)?;
        Ok(guarded)
    }

    /// Every key of every command, in order.
    fn keys(&self) -> impl Iterator<Item = &'p [u8]> + '_ {
        self.commands
            .iter()
            .zip(&self.positions)
            .flat_map(|(args, at)| at.iter().map(|&at| args[at]))
    }

    /// Refuses a key that is one of the locks' own, or (when `sharded`) that is not in
    /// the first lock key's slot.
    fn check_keys(&self, locks: &[&Keys], sharded: bool) -> Result<(), Error> {
        let lock = locks.first().map_or("", |keys| keys.lock());
        let lock_slot = slot(lock.as_bytes());
        for key in self.keys() {
            if locks.iter().any(|keys| keys.is_own(key)) {
                return Err(Error::InvalidPipeline {
                    key: lock.to_owned(),
                    reason: format!(
                        "it touches {}, a key of the lock itself",
                        Preview(&String::from_utf8_lossy(key))
                    ),
                });
            }
            if sharded && slot(key) != lock_slot {
                return Err(Error::CrossSlot {
                    key: lock.to_owned(),
                    foreign: String::from_utf8_lossy(key).into_owned(),
                });
            }
        }
        Ok(())
    }

    /// How many keys the script is sent: the `locks` lock keys and every command's.
    fn numkeys(&self, locks: usize) -> usize {
        locks + self.positions.iter().map(Vec::len).sum::<usize>()
    }

    /// Each command's shape, as `exec.lua` reads it: `k` for a key, `a` for another
    /// argument.
    fn shapes(&self) -> Vec<String> {
        self.commands
            .iter()
            .zip(&self.positions)
            .map(|(args, keys)| {
                let mut shape = vec![b'a'; args.len()];
                for &at in keys {
                    shape[at] = b'k';
                }
                String::from_utf8_lossy(&shape).into_owned()
            })
            .collect()
    }

    /// Sends the commands as one `exec.lua`, guarded by `call`'s lock and every lock of
    /// `also` (the other keys of a set, held under the same id).
    pub(crate) async fn run<C: ConnectionLike>(
        &self,
        conn: &mut C,
        call: &Call,
        also: &[Keys],
    ) -> Result<Executed, Error> {
        let lock = call.keys.lock();
        let shapes = self.shapes();
        let locks = 1 + also.len();
        let reply: Value = SCRIPTS
            .exec
            .run(conn, &call.keys, self.numkeys(locks), |cmd| {
                cmd.arg(lock);
                for keys in also {
                    cmd.arg(keys.lock());
                }
                for key in self.keys() {
                    cmd.arg(key);
                }
                cmd.arg(call.id).arg(locks);
                for ((args, keys), shape) in self.commands.iter().zip(&self.positions).zip(&shapes)
                {
                    cmd.arg(shape);
                    let mut next_key = keys.iter().peekable();
                    for (at, arg) in args.iter().enumerate() {
                        if next_key.peek() == Some(&&at) {
                            next_key.next();
                        } else {
                            cmd.arg(*arg);
                        }
                    }
                }
            })
            .await
            .map_err(|err| Error::redis(lock, err))?;
        read_reply(reply, lock, locks)
    }
}

/// The arguments of the `at`-th command of a pipeline, `cmd`.
fn arguments<'p>(cmd: &'p Cmd, at: usize, lock: &str) -> Result<Arguments<'p>, Error> {
    let invalid = |reason: String| Error::InvalidPipeline {
        key: lock.to_owned(),
        reason,
    };
    let args = cmd
        .args_iter()
        .map(|arg| match arg {
            Arg::Simple(arg) => Ok(arg),
            _ => Err(invalid(format!(
                "command {} has a cursor argument, which only an iterator sends",
                at + 1
            ))),
        })
        .collect::<Result<Arguments<'p>, Error>>()?;
    match args.len() {
        0 => Err(invalid(format!("command {} is empty", at + 1))),
        n if n > MAX_COMMAND_ARGS => Err(invalid(format!(
            "command {} ({}) has {n} arguments; a guarded command may have at most {MAX_COMMAND_ARGS}",
            at + 1,
            String::from_utf8_lossy(args[0])
        ))),
        _ => Ok(args),
    }
}

/// `exec.lua`'s reply for `locks` lock keys, the first `lock`: see its header.
fn read_reply(reply: Value, lock: &str, locks: usize) -> Result<Executed, Error> {
    let Value::Array(items) = reply else {
        return Err(super::replies::unexpected(&reply, lock));
    };
    match items.first() {
        Some(Value::Int(1)) => Ok(Executed::Ran(items.into_iter().skip(1).collect())),
        Some(Value::Int(0)) => match items.as_slice() {
            [_, Value::Int(at)] if (1..=locks as i64).contains(at) => {
                Ok(Executed::NotHeld(at.unsigned_abs() as usize - 1))
            }
            _ => Err(super::replies::unexpected(&Value::Array(items), lock)),
        },
        Some(Value::Int(2)) if items.len() == 3 => {
            let (Value::Int(failed), Value::BulkString(text)) = (&items[1], &items[2]) else {
                return Err(super::replies::unexpected(&Value::Array(items), lock));
            };
            let ran = usize::try_from(*failed).unwrap_or(1).saturating_sub(1);
            Err(Error::command_failed(lock, ran, server_error(text)))
        }
        _ => Err(super::replies::unexpected(&Value::Array(items), lock)),
    }
}

/// The error reply whose text is `text` (`CODE detail`), read as redis-rs reads one from
/// the wire, so that its code and kind are those of the command's own error. Servers
/// before Redis 7.0 put the script's place before it (`@user_script:72: -OOM ...`): that
/// prefix is left out.
fn server_error(text: &[u8]) -> redis::RedisError {
    let text = strip_script_place(text);
    let mut wire = Vec::with_capacity(text.len() + 3);
    wire.push(b'-');
    wire.extend(text.iter().map(|&byte| {
        if byte == b'\r' || byte == b'\n' {
            b' '
        } else {
            byte
        }
    }));
    wire.extend_from_slice(b"\r\n");
    match redis::parse_redis_value(&wire) {
        Ok(Value::ServerError(err)) => err.into(),
        _ => redis::RedisError::from((
            redis::ErrorKind::Client,
            "a command failed",
            String::from_utf8_lossy(text).into_owned(),
        )),
    }
}

/// `text` without a leading `@user_script:<line>: -` or `@user_script: <line>: -` (the
/// forms a `redis.pcall` error takes before Redis 7.0); `text` itself otherwise.
fn strip_script_place(text: &[u8]) -> &[u8] {
    let Some(rest) = text.strip_prefix(b"@user_script:") else {
        return text;
    };
    let rest = rest.strip_prefix(b" ").unwrap_or(rest);
    let digits = rest.iter().take_while(|byte| byte.is_ascii_digit()).count();
    match rest[digits..].strip_prefix(b": -") {
        Some(error) if digits > 0 => error,
        _ => text,
    }
}

/// `replies`, the replies of `pipe`'s commands, read as
/// [`Pipeline::query_async`] reads them: ignored commands left out, an atomic pipeline's
/// replies as a transaction's.
pub(crate) fn read_replies<T: FromRedisValue>(
    pipe: &Pipeline,
    replies: Vec<Value>,
) -> RedisResult<T> {
    let mut replay = Replay(Some(replies));
    let read = pipe.query_async(&mut replay);
    // The replay answers at once: the future is ready on its first poll.
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    let mut read = std::pin::pin!(read);
    match read.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(result) => result,
        std::task::Poll::Pending => Err(redis::RedisError::from((
            redis::ErrorKind::Client,
            "reading a pipeline's replies did not complete",
        ))),
    }
}

/// A connection that answers one pipeline request with replies already received.
struct Replay(Option<Vec<Value>>);

impl ConnectionLike for Replay {
    fn req_packed_command<'a>(&'a mut self, _cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async {
            Err((redis::ErrorKind::Client, "a replay answers pipelines only").into())
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        _offset: usize,
        _count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        let replies = self.0.take().unwrap_or_default();
        Box::pin(async move {
            if pipeline.is_transaction() {
                // What `EXEC` answers: every reply in one array.
                Ok(vec![Value::Array(replies)])
            } else {
                Ok(replies)
            }
        })
    }

    fn get_db(&self) -> i64 {
        0
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn an_older_servers_script_place_is_left_out_of_a_commands_error() {
        let err = server_error(b"@user_script:72: -OOM command not allowed when used memory");
        assert_eq!(err.code(), Some("OOM"));
        let err = server_error(b"@user_script: 72: -OOM command not allowed when used memory");
        assert_eq!(err.code(), Some("OOM"));
        assert_eq!(
            server_error(b"WRONGTYPE Operation").code(),
            Some("WRONGTYPE")
        );
        // Not that form: kept as it is.
        assert_eq!(
            strip_script_place(b"@user_script:: -OOM x"),
            b"@user_script:: -OOM x"
        );
        assert_eq!(
            strip_script_place(b"@user_script:7 OOM"),
            b"@user_script:7 OOM"
        );
    }

    use super::*;

    #[test]
    fn replies_are_read_as_the_pipeline_reads_them() {
        let mut pipe = redis::pipe();
        pipe.set("a", 1).ignore().incr("b", 1).get("a");
        let replies = vec![Value::Okay, Value::Int(5), Value::BulkString(b"1".to_vec())];
        let (incr, get): (i64, String) = read_replies(&pipe, replies.clone()).unwrap();
        assert_eq!((incr, get.as_str()), (5, "1"));
        pipe.atomic();
        let (incr, get): (i64, String) = read_replies(&pipe, replies).unwrap();
        assert_eq!((incr, get.as_str()), (5, "1"));
        let empty = redis::pipe();
        let (): () = read_replies(&empty, vec![]).unwrap();
        let wrong: RedisResult<(String,)> =
            read_replies(&pipe, vec![Value::Okay, Value::Nil, Value::Nil]);
        assert!(wrong.is_err());
    }

    #[test]
    fn a_failed_command_keeps_its_code_and_what_ran_before_it() {
        let reply = Value::Array(vec![
            Value::Int(2),
            Value::Int(3),
            Value::BulkString(b"WRONGTYPE Operation against a key".to_vec()),
        ]);
        let Err(Error::CommandFailed { key, ran, source }) = read_reply(reply, "k", 1) else {
            panic!("not a failed command");
        };
        assert_eq!((key.as_str(), ran), ("k", 2));
        assert_eq!(source.code(), Some("WRONGTYPE"));
        let not_held = |at| read_reply(Value::Array(vec![Value::Int(0), Value::Int(at)]), "k", 2);
        assert!(matches!(not_held(1).unwrap(), Executed::NotHeld(0)));
        assert!(matches!(not_held(2).unwrap(), Executed::NotHeld(1)));
        assert!(not_held(3).is_err() && not_held(0).is_err());
        assert!(read_reply(Value::Array(vec![Value::Int(0)]), "k", 1).is_err());
        assert!(read_reply(Value::Int(0), "k", 1).is_err());
    }
}
