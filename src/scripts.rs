//! The Lua scripts of the protocol, embedded from `lua/` and run by EVALSHA: the four of
//! the read-write lock, `downgrade.lua`, and the semaphore's. `lock.lua`, `rlock.lua` and
//! `semaphore.lua` are each sent with `shared.lua` before them, as one script.
//!
//! A script is sent as `EVALSHA`; on a `NOSCRIPT` reply (after `SCRIPT FLUSH`, a server
//! restart, or a failover to a replica whose script cache is empty) it is sent again as
//! `EVAL` with its body, which runs it and caches it on that server. Unlike a
//! `SCRIPT LOAD`, which a cluster client sends to every master, this needs nothing but
//! the node that serves the lock's slot. Scripts are never pipelined: that fallback does
//! not work inside a pipeline.

use std::sync::LazyLock;
use std::time::Duration;

use include_dir::{include_dir, Dir};
use redis::aio::ConnectionLike;
use redis::{Cmd, ErrorKind, FromRedisValue, RedisError, RedisResult, ServerErrorKind, Value};

use crate::error::Error;
use crate::keys::Keys;

static LUA: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/lua");

/// The scripts in `lua/` that the crate runs; a test checks `lua/` holds exactly these and
/// [`SHARED_FILE`].
pub(crate) const SCRIPT_FILES: [&str; 6] = [
    "lock.lua",
    "rlock.lua",
    "refresh.lua",
    "unlock.lua",
    "semaphore.lua",
    "downgrade.lua",
];
/// The functions that the scripts which take a lock or a permit share; sent before each.
const SHARED_FILE: &str = "shared.lua";
/// The scripts sent with [`SHARED_FILE`] before them.
const WITH_SHARED: [&str; 3] = ["lock.lua", "rlock.lua", "semaphore.lua"];

/// One script: its body and the SHA1 `EVALSHA` names it by.
struct Lua {
    code: String,
    sha: String,
}

impl Lua {
    /// Runs the script with `numkeys` keys, which `fill` adds to the command with the
    /// arguments after them.
    async fn run<C, T>(
        &self,
        conn: &mut C,
        numkeys: usize,
        fill: impl Fn(&mut Cmd),
    ) -> RedisResult<T>
    where
        C: ConnectionLike,
        T: FromRedisValue,
    {
        let mut evalsha = redis::cmd("EVALSHA");
        evalsha.arg(&self.sha).arg(numkeys);
        fill(&mut evalsha);
        match evalsha.query_async(conn).await {
            Err(err) if err.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                let mut eval = redis::cmd("EVAL");
                eval.arg(&self.code).arg(numkeys);
                fill(&mut eval);
                eval.query_async(conn).await
            }
            other => other,
        }
    }
}

impl Lua {
    /// Runs a script that takes a lock or a permit (`lock.lua`, `rlock.lua`,
    /// `semaphore.lua`) for the lock key `key`, and reads its reply.
    async fn attempt<C: ConnectionLike>(
        &self,
        conn: &mut C,
        numkeys: usize,
        key: &str,
        fill: impl Fn(&mut Cmd),
    ) -> Result<Attempt, Error> {
        let reply: Value = self
            .run(conn, numkeys, fill)
            .await
            .map_err(|err| Error::redis(key, err))?;
        parse_attempt(reply, key)
    }
}

struct Scripts {
    lock: Lua,
    rlock: Lua,
    refresh: Lua,
    unlock: Lua,
    semaphore: Lua,
    downgrade: Lua,
}

static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| {
    let [lock, rlock, refresh, unlock, semaphore, downgrade] = SCRIPT_FILES.map(load);
    Scripts {
        lock,
        rlock,
        refresh,
        unlock,
        semaphore,
        downgrade,
    }
});

#[expect(
    clippy::expect_used,
    reason = "the files are embedded at compile time and a unit test loads every one"
)]
fn file(name: &str) -> &'static str {
    LUA.get_file(name)
        .and_then(|file| file.contents_utf8())
        .expect("lua/ holds every script in SCRIPT_FILES, and SHARED_FILE, as UTF-8")
}

/// The script `name`, after [`SHARED_FILE`] when it uses it.
fn load(name: &str) -> Lua {
    let code = if WITH_SHARED.contains(&name) {
        format!("{}\n{}", file(SHARED_FILE), file(name))
    } else {
        file(name).to_owned()
    };
    Lua {
        sha: redis::Script::new(&code).get_hash().to_owned(),
        code,
    }
}

/// Whether a fair request joins the queue when blocked (`lua/shared.lua`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fair {
    /// Not fair: no queue.
    Off,
    /// Fair, and waits: join the queue, or keep its place in it.
    Wait,
    /// Fair, one attempt: take the lock only if nobody waits ahead; never queue.
    Try,
}

impl Fair {
    /// Adds the queue keys after the other keys of a fair request.
    fn keys(self, cmd: &mut Cmd, keys: &Keys) {
        if let (Some(queue), false) = (&keys.queue, self == Fair::Off) {
            cmd.arg(&queue.order).arg(&queue.deadline);
        }
    }

    /// How many keys a request has with `plain` keys of its own.
    fn numkeys(self, plain: usize) -> usize {
        if self == Fair::Off {
            plain
        } else {
            plain + 2
        }
    }

    /// The queue operation the scripts take as their last argument.
    fn op(self) -> Option<&'static str> {
        match self {
            Fair::Off => None,
            Fair::Wait => Some("wait"),
            Fair::Try => Some("try"),
        }
    }

    /// Adds the clock-floor flag and the queue operation as the script's last arguments;
    /// the flag is left out when nothing follows it and it is off.
    fn args(self, cmd: &mut Cmd, clock_floor: bool) {
        if clock_floor || self != Fair::Off {
            cmd.arg(if clock_floor { "1" } else { "0" });
        }
        if let Some(op) = self.op() {
            cmd.arg(op);
        }
    }
}

/// What an id holds at a lock key, as `unlock.lua` takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hold {
    /// A writer's id, the string at the lock key.
    Write,
    /// A reader's id, in the set at the lock key.
    Read,
    /// A permit's id, in the sorted set at the semaphore key.
    Permit,
}

impl Hold {
    fn arg(self) -> &'static str {
        match self {
            Hold::Write => "w",
            Hold::Read => "r",
            Hold::Permit => "p",
        }
    }
}

/// The reply of `lock.lua` and `rlock.lua` when the key is usable, or of the write
/// fast path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// The lock is held under our id, with this fencing token.
    Acquired(u64),
    /// Somebody else holds it (or, for readers, a writer waits); the PTTL of what blocks.
    Blocked(Duration),
    /// `rlock.lua` took the fence key for a counter and it was not one: nothing was
    /// taken; the checked script says what it is.
    Unchecked,
    /// The write fast path took the lock key but got no usable token
    /// ([`FastLock::Taken`]).
    Taken,
    /// The write fast path found the lock key taken ([`FastLock::Busy`]).
    Busy,
}

/// The reply of the write fast path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FastLock {
    /// The lock is held under our id, with this fencing token.
    Acquired(u64),
    /// The lock key now holds our id, but the fence key gave no usable token (it was
    /// absent, or not a token): `lock.lua` mints one.
    Taken,
    /// The lock key exists: `lock.lua` says why.
    Busy,
}

/// The smallest token minted from the server clock: microseconds since 2001-09-09. A
/// counter below it was (re)created since the last mint from the clock.
const CLOCK_TOKEN_MIN: i64 = 1_000_000_000_000_000;
/// The largest token: 2^53 - 1, the largest integer a Lua number (and a JSON number)
/// holds exactly. A counter there is exhausted: the scripts refuse to count past it.
pub(crate) const TOKEN_MAX: u64 = (1 << 53) - 1;

/// The write fast path, one round trip and no script: `SET lock id NX PX ttl`, then
/// `SET fence 1 NX PX retention` (so a counter that is gone restarts with a TTL) and
/// `INCR fence`. Only for a lock key whose fence key this mutex saw hold a token, with at
/// least half its retention left ([`Fences::countable`](crate::fences::Fences::countable)):
/// `INCR` would change an integer that is not a token, and does not renew the TTL.
///
/// Taking and minting are separate commands, and still safe: the lock key is only set
/// when absent, so every earlier holder's token was minted before it (their mint
/// preceded their reply, and so their release or expiry); an `INCR` by an attempt that
/// found the lock busy only leaves a gap.
pub(crate) async fn fast_lock<C: ConnectionLike>(
    conn: &mut C,
    keys: &Keys,
    id: &str,
    ttl_ms: u64,
    fence_ms: u64,
) -> Result<FastLock, Error> {
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    pipe.cmd("SET")
        .arg(&keys.lock)
        .arg(id)
        .arg("NX")
        .arg("PX")
        .arg(ttl_ms);
    pipe.cmd("SET")
        .arg(&keys.fence)
        .arg(1)
        .arg("NX")
        .arg("PX")
        .arg(fence_ms)
        .ignore();
    pipe.cmd("INCR").arg(&keys.fence);
    let (set, token): (Value, Value) = pipe
        .query_async(conn)
        .await
        .map_err(|err| Error::redis(&keys.lock, err))?;
    match set {
        Value::Okay => {}
        Value::Nil => return Ok(FastLock::Busy),
        Value::ServerError(err) => return Err(Error::redis(&keys.lock, err.into())),
        other => return Err(unexpected(&other, &keys.lock)),
    }
    Ok(match token {
        Value::Int(token) if (CLOCK_TOKEN_MIN..=TOKEN_MAX as i64).contains(&token) => {
            FastLock::Acquired(token.unsigned_abs())
        }
        _ => FastLock::Taken,
    })
}

/// Runs `lock.lua`: take the write lock under `id` for `ttl_ms` and mint a fencing token
/// kept for `fence_ms` (floored at the server clock when `clock_floor`), setting the lock
/// intent on failure when `set_intent` is true; in the queue as `fair` says.
#[expect(clippy::too_many_arguments, reason = "one per script argument")]
pub(crate) async fn lock<C: ConnectionLike>(
    conn: &mut C,
    keys: &Keys,
    id: &str,
    ttl_ms: u64,
    set_intent: bool,
    fence_ms: u64,
    clock_floor: bool,
    fair: Fair,
) -> Result<Attempt, Error> {
    SCRIPTS
        .lock
        .attempt(conn, fair.numkeys(3), &keys.lock, |cmd| {
            cmd.arg(&keys.lock).arg(&keys.intent).arg(&keys.fence);
            fair.keys(cmd, keys);
            cmd.arg(id)
                .arg(ttl_ms)
                .arg(if set_intent { "1" } else { "0" })
                .arg(fence_ms);
            // The flag is sent only when set (or when fair): a client that has not
            // authenticated may send at most 10 arguments, and must get NOAUTH, not a
            // protocol error.
            fair.args(cmd, clock_floor);
        })
        .await
}

/// Runs `rlock.lua`: add `id` to the readers of the lock for at least `ttl_ms` and mint
/// a fencing token kept for `fence_ms` (floored at the server clock when `clock_floor`);
/// with `fence_checked` (never when fair), the fence key is taken as the counter without
/// reading it first; in the queue as `fair` says.
#[expect(clippy::too_many_arguments, reason = "one per script argument")]
pub(crate) async fn rlock<C: ConnectionLike>(
    conn: &mut C,
    keys: &Keys,
    id: &str,
    ttl_ms: u64,
    fence_ms: u64,
    fence_checked: bool,
    clock_floor: bool,
    fair: Fair,
) -> Result<Attempt, Error> {
    let counting = fence_checked && fair == Fair::Off;
    SCRIPTS
        .rlock
        .attempt(conn, fair.numkeys(3), &keys.lock, |cmd| {
            cmd.arg(&keys.lock).arg(&keys.intent).arg(&keys.fence);
            fair.keys(cmd, keys);
            cmd.arg(id)
                .arg(ttl_ms)
                .arg(fence_ms)
                .arg(if counting { "1" } else { "0" });
            fair.args(cmd, clock_floor);
        })
        .await
}

/// Runs `semaphore.lua`: take one of `permits` permits under `id` for `ttl_ms` and mint a
/// fencing token kept for `fence_ms` (floored at the server clock when `clock_floor`); in
/// the queue as `fair` says.
#[expect(clippy::too_many_arguments, reason = "one per script argument")]
pub(crate) async fn semaphore<C: ConnectionLike>(
    conn: &mut C,
    keys: &Keys,
    id: &str,
    ttl_ms: u64,
    permits: u32,
    fence_ms: u64,
    clock_floor: bool,
    fair: Fair,
) -> Result<Attempt, Error> {
    SCRIPTS
        .semaphore
        .attempt(conn, fair.numkeys(2), &keys.lock, |cmd| {
            cmd.arg(&keys.lock).arg(&keys.fence);
            fair.keys(cmd, keys);
            cmd.arg(id)
                .arg(ttl_ms)
                .arg(permits)
                .arg(fence_ms)
                .arg(if clock_floor { "1" } else { "0" });
            if let Some(op) = fair.op() {
                cmd.arg(op);
            }
        })
        .await
}

/// Runs `refresh.lua`: true when `id` still holds `key`, whose TTL is now at least `ttl_ms`.
pub(crate) async fn refresh<C: ConnectionLike>(
    conn: &mut C,
    key: &str,
    id: &str,
    ttl_ms: u64,
) -> Result<bool, Error> {
    let held: i64 = SCRIPTS
        .refresh
        .run(conn, 1, |cmd| {
            cmd.arg(key).arg(id).arg(ttl_ms);
        })
        .await
        .map_err(|err| Error::redis(key, err))?;
    Ok(held == 1)
}

/// What `unlock.lua` or `downgrade.lua` did, from their reply: bit 1 and bit 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Released {
    /// `unlock.lua`: the id held the lock and was removed. `downgrade.lua`: the id now
    /// holds the lock as a reader, with a PTTL of at least the TTL.
    pub(crate) held: bool,
    /// Waiters were told on the release channel. `unlock.lua`: the lock became free, a
    /// permit was returned, or the id's own intent was deleted (or its queue place left).
    /// `downgrade.lua`: the writer's key became a readers' set just now.
    pub(crate) published: bool,
}

impl Released {
    fn from_reply(reply: i64) -> Self {
        Self {
            held: reply & 1 == 1,
            published: reply & 2 == 2,
        }
    }
}

/// Runs `unlock.lua`: remove `id` (held as `hold`) from the lock, delete the lock intent
/// too when `clear_intent` and it holds `id`, leave the fair queue when `leave_queue` (and
/// the lock has one), and publish on the release channel when the lock may now be taken:
/// by `SPUBLISH` (sharded, in the lock key's slot) when `sharded`, else by `PUBLISH`.
pub(crate) async fn unlock<C: ConnectionLike>(
    conn: &mut C,
    keys: &Keys,
    clear_intent: bool,
    leave_queue: bool,
    id: &str,
    hold: Hold,
    sharded: bool,
) -> Result<Released, Error> {
    let queue = keys.queue.as_ref().filter(|_| leave_queue);
    let numkeys = match (queue, clear_intent) {
        (Some(_), _) => 4,
        (None, true) => 2,
        (None, false) => 1,
    };
    let reply: i64 = SCRIPTS
        .unlock
        .run(conn, numkeys, |cmd| {
            cmd.arg(&keys.lock);
            // Leaving the queue passes the intent too: it is deleted only if it holds `id`.
            if numkeys > 1 {
                cmd.arg(&keys.intent);
            }
            if let Some(queue) = queue {
                cmd.arg(&queue.order).arg(&queue.deadline);
            }
            cmd.arg(id)
                .arg(&keys.channel)
                .arg(hold.arg())
                .arg(if sharded { "1" } else { "0" });
        })
        .await
        .map_err(|err| Error::redis(&keys.lock, err))?;
    Ok(Released::from_reply(reply))
}

/// Runs `downgrade.lua`: turn the write lock `id` holds into a read lock held by `id`
/// with PTTL `ttl_ms`, in one step, and publish `id` on the release channel (by
/// `SPUBLISH` when `sharded`, else by `PUBLISH`) so waiting readers look again.
pub(crate) async fn downgrade<C: ConnectionLike>(
    conn: &mut C,
    keys: &Keys,
    id: &str,
    ttl_ms: u64,
    sharded: bool,
) -> Result<Released, Error> {
    let reply: i64 = SCRIPTS
        .downgrade
        .run(conn, 1, |cmd| {
            cmd.arg(&keys.lock)
                .arg(id)
                .arg(ttl_ms)
                .arg(&keys.channel)
                .arg(if sharded { "1" } else { "0" });
        })
        .await
        .map_err(|err| Error::redis(&keys.lock, err))?;
    Ok(Released::from_reply(reply))
}

fn unexpected(reply: &Value, key: &str) -> Error {
    let err = RedisError::from((
        ErrorKind::UnexpectedReturnType,
        "unexpected reply from a redismutex script",
        format!("{reply:?}"),
    ));
    Error::redis(key, err)
}

fn parse_attempt(reply: Value, key: &str) -> Result<Attempt, Error> {
    let items = match &reply {
        Value::Int(token) if *token > 0 => return Ok(Attempt::Acquired(token.unsigned_abs())),
        Value::Int(blocked) => {
            // -1 - pttl
            let pttl = u64::try_from(-1 - *blocked).map_err(|_| unexpected(&reply, key))?;
            return Ok(Attempt::Blocked(Duration::from_millis(pttl)));
        }
        Value::Array(items) => items,
        _ => return Err(unexpected(&reply, key)),
    };
    let text = |i: usize| match items.get(i) {
        Some(Value::BulkString(bytes)) => Some(String::from_utf8_lossy(bytes).into_owned()),
        _ => None,
    };
    match text(0).as_deref() {
        Some("unchecked") if items.len() == 1 => Ok(Attempt::Unchecked),
        Some("wrongtype") => match (text(1), text(2)) {
            (Some(key), Some(found)) => Err(Error::WrongType { key, found }),
            _ => Err(unexpected(&reply, key)),
        },
        Some("noexpiry") => match text(1) {
            Some(key) => Err(Error::NoExpiry { key }),
            None => Err(unexpected(&reply, key)),
        },
        _ => Err(unexpected(&reply, key)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lua_dir_holds_exactly_the_loaded_scripts() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("lua");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        on_disk.sort();
        let mut loaded: Vec<String> = SCRIPT_FILES.iter().map(|s| s.to_string()).collect();
        loaded.push(SHARED_FILE.to_owned());
        loaded.sort();
        assert_eq!(on_disk, loaded);
        let embedded = LUA.files().count();
        assert_eq!(
            embedded,
            SCRIPT_FILES.len() + 1,
            "include_dir embedded a stale lua/"
        );
        // Every script loads and starts with its header.
        for script in [
            &SCRIPTS.lock,
            &SCRIPTS.rlock,
            &SCRIPTS.refresh,
            &SCRIPTS.unlock,
            &SCRIPTS.semaphore,
            &SCRIPTS.downgrade,
        ] {
            assert_eq!(script.sha.len(), 40);
        }
        for name in SCRIPT_FILES {
            let code = file(name);
            assert!(
                code.starts_with(&format!("-- {name}:")),
                "{name} lacks its header"
            );
            assert!(code.contains("KEYS[1]") && code.contains("Replies:"));
            // Only the scripts sent after it use the shared functions.
            let uses_shared = [
                "fence_last(",
                "queue_",
                "at_least_the_clock(",
                "now_ms(",
                "pttl_at_least(",
                "lock_intent(",
            ]
            .iter()
            .any(|f| code.contains(f));
            assert_eq!(uses_shared, WITH_SHARED.contains(&name), "{name}");
        }
        assert!(file(SHARED_FILE).starts_with("-- shared.lua:"));
        assert!(SCRIPTS.lock.code.starts_with("-- shared.lua:"));
    }

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn replies_parse_into_attempts_and_typed_errors() {
        let parse = |reply| parse_attempt(reply, "k");
        assert_eq!(parse(Value::Int(7)).unwrap(), Attempt::Acquired(7));
        assert_eq!(
            parse(Value::Int(-1501)).unwrap(),
            Attempt::Blocked(Duration::from_millis(1500))
        );
        assert_eq!(
            parse(Value::Int(-1)).unwrap(),
            Attempt::Blocked(Duration::ZERO)
        );
        assert_eq!(
            parse(Value::Array(vec![bulk("unchecked")])).unwrap(),
            Attempt::Unchecked
        );
        match parse(Value::Array(vec![
            bulk("wrongtype"),
            bulk("k"),
            bulk("hash"),
        ])) {
            Err(Error::WrongType { key, found }) => {
                assert_eq!((key.as_str(), found.as_str()), ("k", "hash"))
            }
            other => panic!("{other:?}"),
        }
        match parse(Value::Array(vec![bulk("noexpiry"), bulk("k:lock-intent")])) {
            Err(Error::NoExpiry { key }) => assert_eq!(key, "k:lock-intent"),
            other => panic!("{other:?}"),
        }
        for bad in [
            Value::Nil,
            Value::Int(0),
            Value::Array(vec![]),
            Value::Array(vec![bulk("blocked")]),
            Value::Array(vec![bulk("acquired"), Value::Int(3)]),
            Value::Array(vec![bulk("unchecked"), Value::Int(3)]),
            Value::Array(vec![bulk("wrongtype"), bulk("k")]),
        ] {
            match parse(bad) {
                Err(Error::Redis { key, .. }) => assert_eq!(key, "k"),
                other => panic!("{other:?}"),
            }
        }
    }
}
