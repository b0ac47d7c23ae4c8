//! The Lua scripts of the protocol, embedded from `lua/`, and how one is run.
//!
//! A script is sent as `EVALSHA`; on a `NOSCRIPT` reply (after `SCRIPT FLUSH`, a server
//! restart, or a failover to a replica whose script cache is empty) it is sent again as
//! `EVAL` with its body, which runs it and caches it on that server. Unlike a
//! `SCRIPT LOAD`, which a cluster client sends to every master, this needs nothing but
//! the node that serves the lock's slot. A script is pipelined only after another, as a
//! [`Then`] whose reply is not read (a holder's description after an acquire attempt):
//! a `NOSCRIPT` in the pipeline is answered by sending that script again on its own.

use std::sync::LazyLock;

use include_dir::{include_dir, Dir};
use redis::aio::ConnectionLike;
use redis::{Cmd, ErrorKind, FromRedisValue, Pipeline, RedisResult, ServerErrorKind, Value};

use super::keys::Keys;
use super::replies::{parse_attempt, Attempt};
use crate::error::Error;

static LUA: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/lua");

/// The scripts in `lua/` that the crate runs; a test checks `lua/` holds exactly these,
/// [`BASE_FILE`] and [`SHARED_FILE`].
pub(crate) const SCRIPT_FILES: [&str; 19] = [
    "lock.lua",
    "rlock.lua",
    "refresh.lua",
    "renew.lua",
    "unlock.lua",
    "semaphore.lua",
    "downgrade.lua",
    "fence.lua",
    "exec.lua",
    "inspect.lua",
    "force_unlock.lua",
    "retake.lua",
    "proclaim.lua",
    "leader.lua",
    "upgradable.lua",
    "upgrade.lua",
    "lock_all.lua",
    "attach.lua",
    "describe.lua",
];
/// The functions every script uses (the server clock, raising a PTTL, publishing by
/// `SPUBLISH` or `PUBLISH`); sent before each script, as one script. Small, since every
/// call of every script defines them.
const BASE_FILE: &str = "base.lua";
/// The functions the scripts that take a lock or a permit share (the fence counter, the
/// lock intent, the fair queue); sent after [`BASE_FILE`] before each of [`WITH_SHARED`].
const SHARED_FILE: &str = "shared.lua";
/// The scripts sent with [`SHARED_FILE`].
const WITH_SHARED: [&str; 8] = [
    "lock.lua",
    "rlock.lua",
    "semaphore.lua",
    "fence.lua",
    "retake.lua",
    "upgradable.lua",
    "upgrade.lua",
    "lock_all.lua",
];

/// One script: its body and the SHA1 `EVALSHA` names it by.
pub(crate) struct Lua {
    code: String,
    sha: String,
}

impl Lua {
    /// Runs the script with `numkeys` of the lock's `keys`, which `fill` adds to the
    /// command with the arguments after them.
    pub(crate) async fn run<C, T>(
        &self,
        conn: &mut C,
        keys: &Keys,
        numkeys: usize,
        fill: impl Fn(&mut Cmd),
    ) -> RedisResult<T>
    where
        C: ConnectionLike,
        T: FromRedisValue,
    {
        let mut evalsha = command("EVALSHA", &self.sha, keys, numkeys);
        fill(&mut evalsha);
        match evalsha.query_async(conn).await {
            Err(err) if err.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                let mut eval = command("EVAL", &self.code, keys, numkeys);
                fill(&mut eval);
                eval.query_async(conn).await
            }
            other => other,
        }
    }

    /// Runs the script as [`run`](Self::run) does, and `then` after it in the same
    /// request (pipelined, so no round trip is added), whose reply is not read: its
    /// failure fails nothing. On a `NOSCRIPT` (an empty script cache) the script is sent
    /// again by `EVAL`, and `then` after it on its own, as is `then` alone on its own
    /// `NOSCRIPT`.
    pub(crate) async fn run_then<C: ConnectionLike>(
        &self,
        conn: &mut C,
        keys: &Keys,
        numkeys: usize,
        fill: impl Fn(&mut Cmd),
        then: Option<&Then<'_>>,
    ) -> RedisResult<Value> {
        let Some(then) = then else {
            return self.run(conn, keys, numkeys, fill).await;
        };
        let mut first = command("EVALSHA", &self.sha, keys, numkeys);
        fill(&mut first);
        let mut pipe = Pipeline::with_capacity(2);
        pipe.add_command(first)
            .add_command(then.command())
            .ignore_errors();
        let (reply, after): (Value, Value) = pipe.query_async(conn).await?;
        let reply = match reply {
            Value::ServerError(err) if no_script(&err) => {
                let mut eval = command("EVAL", &self.code, keys, numkeys);
                fill(&mut eval);
                let reply: Value = eval.query_async(conn).await?;
                then.resend(conn).await;
                return Ok(reply);
            }
            Value::ServerError(err) => return Err(err.into()),
            reply => reply,
        };
        if matches!(&after, Value::ServerError(err) if no_script(err)) {
            then.resend(conn).await;
        }
        Ok(reply)
    }

    /// Runs a script that takes a lock or a permit (`lock.lua`, `rlock.lua`,
    /// `semaphore.lua`), or raises a fence counter (`fence.lua`), on the lock's `keys`,
    /// and reads its reply.
    pub(crate) async fn attempt<C: ConnectionLike>(
        &self,
        conn: &mut C,
        keys: &Keys,
        numkeys: usize,
        fill: impl Fn(&mut Cmd),
    ) -> Result<Attempt, Error> {
        self.attempt_then(conn, keys, numkeys, fill, None).await
    }

    /// [`attempt`](Self::attempt), with `then` after it in the same request
    /// ([`run_then`](Self::run_then)).
    pub(crate) async fn attempt_then<C: ConnectionLike>(
        &self,
        conn: &mut C,
        keys: &Keys,
        numkeys: usize,
        fill: impl Fn(&mut Cmd),
        then: Option<&Then<'_>>,
    ) -> Result<Attempt, Error> {
        let key = keys.lock();
        let reply: Value = self
            .run_then(conn, keys, numkeys, fill, then)
            .await
            .map_err(|err| Error::redis(key, err))?;
        parse_attempt(reply, key)
    }
}

/// A script call sent after another in the same request, whose reply is not read
/// ([`Lua::run_then`]): a holder's description after an acquire attempt.
pub(crate) struct Then<'a> {
    pub(crate) lua: &'a Lua,
    /// The keys whose names size the command.
    pub(crate) keys: &'a Keys,
    pub(crate) numkeys: usize,
    /// Adds the keys and the arguments.
    pub(crate) fill: &'a (dyn Fill + Sync),
}

/// What adds a script call's keys and arguments to its command.
pub(crate) trait Fill {
    fn fill(&self, cmd: &mut Cmd);
}

impl Then<'_> {
    /// Its `EVALSHA`.
    pub(crate) fn command(&self) -> Cmd {
        let mut cmd = command("EVALSHA", &self.lua.sha, self.keys, self.numkeys);
        self.fill.fill(&mut cmd);
        cmd
    }

    /// Sends it again on its own, after a `NOSCRIPT` in a pipeline; what it answers is
    /// not read.
    pub(crate) async fn resend<C: ConnectionLike>(&self, conn: &mut C) {
        let sent: RedisResult<Value> = self
            .lua
            .run(conn, self.keys, self.numkeys, |cmd| self.fill.fill(cmd))
            .await;
        if let Err(err) = sent {
            tracing::debug!(%err, "a script sent after another failed");
        }
    }
}

/// Whether `err` is `NOSCRIPT`: the server's script cache lacks the script.
fn no_script(err: &redis::ServerError) -> bool {
    err.kind() == Some(ServerErrorKind::NoScript)
}

/// The most arguments a script call has (`lock.lua` in fair mode): the command, the
/// script, the number of keys, 5 keys and 6 more.
const MAX_ARGS: usize = 14;

/// Room for every argument of a script call but its script and names, in bytes: the
/// command, the number of keys, an id, and numbers and flags.
const OTHER_BYTES: usize = 128;

/// `EVALSHA` or `EVAL` (`name`) of `script` with `numkeys` keys, sized for the arguments
/// a call of the lock's `keys` adds, so that it does not grow while they are written: no
/// call sends more names than the lock key and every name of [`Keys`].
fn command(name: &str, script: &str, keys: &Keys, numkeys: usize) -> Cmd {
    let bytes = script.len() + keys.lock().len() + keys.names_len() + OTHER_BYTES;
    let mut cmd = Cmd::with_capacity(MAX_ARGS, bytes);
    cmd.arg(name).arg(script).arg(numkeys);
    cmd
}

/// Every script the crate runs, loaded once.
pub(crate) struct Scripts {
    pub(crate) lock: Lua,
    pub(crate) rlock: Lua,
    pub(crate) refresh: Lua,
    pub(crate) renew: Lua,
    pub(crate) unlock: Lua,
    pub(crate) semaphore: Lua,
    pub(crate) downgrade: Lua,
    pub(crate) fence: Lua,
    pub(crate) exec: Lua,
    pub(crate) inspect: Lua,
    pub(crate) force_unlock: Lua,
    pub(crate) retake: Lua,
    pub(crate) proclaim: Lua,
    pub(crate) leader: Lua,
    pub(crate) upgradable: Lua,
    pub(crate) upgrade: Lua,
    pub(crate) lock_all: Lua,
    pub(crate) attach: Lua,
    pub(crate) describe: Lua,
}

pub(crate) static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| {
    let [lock, rlock, refresh, renew, unlock, semaphore, downgrade, fence, exec, inspect, force_unlock, retake, proclaim, leader, upgradable, upgrade, lock_all, attach, describe] =
        SCRIPT_FILES.map(load);
    Scripts {
        lock,
        rlock,
        refresh,
        renew,
        unlock,
        semaphore,
        downgrade,
        fence,
        exec,
        inspect,
        force_unlock,
        retake,
        proclaim,
        leader,
        upgradable,
        upgrade,
        lock_all,
        attach,
        describe,
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

/// The script `name`, after [`BASE_FILE`] and, for those that use it, [`SHARED_FILE`].
fn load(name: &str) -> Lua {
    let code = if WITH_SHARED.contains(&name) {
        format!("{}\n{}\n{}", file(BASE_FILE), file(SHARED_FILE), file(name))
    } else {
        format!("{}\n{}", file(BASE_FILE), file(name))
    };
    Lua {
        sha: redis::Script::new(&code).get_hash().to_owned(),
        code,
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
        loaded.push(BASE_FILE.to_owned());
        loaded.push(SHARED_FILE.to_owned());
        loaded.sort();
        assert_eq!(on_disk, loaded);
        let embedded = LUA.files().count();
        assert_eq!(
            embedded,
            SCRIPT_FILES.len() + 2,
            "include_dir embedded a stale lua/"
        );
        // Every script loads and starts with its header.
        for script in [
            &SCRIPTS.lock,
            &SCRIPTS.rlock,
            &SCRIPTS.refresh,
            &SCRIPTS.renew,
            &SCRIPTS.unlock,
            &SCRIPTS.semaphore,
            &SCRIPTS.downgrade,
            &SCRIPTS.fence,
            &SCRIPTS.exec,
            &SCRIPTS.inspect,
            &SCRIPTS.force_unlock,
            &SCRIPTS.retake,
            &SCRIPTS.proclaim,
            &SCRIPTS.leader,
            &SCRIPTS.upgradable,
            &SCRIPTS.upgrade,
            &SCRIPTS.lock_all,
            &SCRIPTS.attach,
            &SCRIPTS.describe,
        ] {
            assert_eq!(script.sha.len(), 40);
        }
        for name in SCRIPT_FILES {
            let code = file(name);
            assert!(
                code.starts_with(&format!("-- {name}:")),
                "{name} lacks its header"
            );
            assert!(code.contains("KEYS[1") && code.contains("Replies:"));
            // The server clock is read in base.lua only.
            assert!(!code.contains("'TIME'"), "{name} reads TIME itself");
            // Only the scripts sent after shared.lua use its functions.
            let uses_shared = shared_functions().iter().any(|f| code.contains(f.as_str()));
            assert_eq!(uses_shared, WITH_SHARED.contains(&name), "{name}");
        }
        assert!(file(SHARED_FILE).starts_with("-- shared.lua:"));
        assert!(!file(SHARED_FILE).contains("'TIME'"));
        assert!(file(BASE_FILE).starts_with("-- base.lua:"));
        // Every `local function` of the two, nested ones too, has a comment above it.
        for prelude in [BASE_FILE, SHARED_FILE] {
            let lines: Vec<&str> = file(prelude).lines().map(str::trim_start).collect();
            for (at, line) in lines.iter().enumerate().skip(1) {
                if line.starts_with("local function") {
                    assert!(lines[at - 1].starts_with("--"), "{line} has no comment");
                }
            }
        }
        assert!(SCRIPTS.refresh.code.starts_with("-- base.lua:"));
        assert!(SCRIPTS.lock.code.contains("\n-- shared.lua:"));
        assert!(!SCRIPTS.unlock.code.contains("-- shared.lua:"));
        assert!(SCRIPTS.force_unlock.code.starts_with("-- base.lua:"));
        assert!(!SCRIPTS.force_unlock.code.contains("-- shared.lua:"));
        assert!(SCRIPTS.retake.code.contains("\n-- shared.lua:"));
    }

    #[test]
    fn inspect_lua_runs_only_commands_that_read() {
        let code = file("inspect.lua");
        let reads = [
            "GET",
            "HMGET",
            "PTTL",
            "SMEMBERS",
            "TYPE",
            "ZRANGE",
            "ZRANGEBYSCORE",
        ];
        assert_eq!(commands(code), reads);
        // Of base.lua's functions it calls only the clock.
        assert!(code.contains("now_ms()") && !code.contains("pttl_at_least("));
    }

    #[test]
    fn leader_lua_runs_only_commands_that_read() {
        let code = file("leader.lua");
        assert_eq!(commands(code), ["GET", "PTTL", "TYPE"]);
        assert!(!code.contains("now_ms()") && !code.contains("pttl_at_least("));
    }

    /// The Redis commands a script calls, sorted, each once.
    fn commands(code: &str) -> Vec<&str> {
        let mut called: Vec<&str> = code
            .split("redis.")
            .skip(1)
            .filter_map(|rest| {
                let rest = rest
                    .strip_prefix("call('")
                    .or(rest.strip_prefix("pcall('"))?;
                rest.split('\'').next()
            })
            .collect();
        called.sort_unstable();
        called.dedup();
        called
    }

    /// The names of the functions shared.lua defines, as calls: `name(`.
    fn shared_functions() -> Vec<String> {
        let names: Vec<String> = file(SHARED_FILE)
            .lines()
            .filter_map(|line| line.strip_prefix("local function "))
            .filter_map(|rest| rest.split('(').next())
            .map(|name| format!("{name}("))
            .collect();
        assert!(names.len() >= 5, "{names:?}");
        names
    }
}
