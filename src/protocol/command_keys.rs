//! Which arguments of a command are keys, as the server describes the command, so that
//! a guarded pipeline ([`exec`](super::exec)) declares them as its script's keys and its
//! keys' slots can be checked before it is sent; and whether the command writes (its
//! flag `write`), so that a reader's pipeline is refused before it is sent.
//!
//! The method of redis-py's cluster client (`CommandsParser` in `redis/_parsers/
//! commands.py`): a command's legacy key range from `COMMAND INFO` (first key, last key,
//! step), asked once per command name and kept; for a command whose keys move with its
//! arguments (flag `movablekeys`: `ZUNIONSTORE`, `EVAL`, `SORT ... STORE`, ...) or that
//! has subcommands with keys of their own (`OBJECT`, `XINFO` from Redis 7), `COMMAND
//! GETKEYS` with the command's arguments, on each call.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

use crate::error::Error;

/// What a guarded pipeline may do with the lock's data: a reader shares the lock with
/// other readers, so its pipeline may only read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Commands the server flags `write` are refused before anything is sent.
    Read,
    /// Any command that can run in a script.
    Write,
}

/// Where a command's keys are among its arguments (its name is argument 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeySpec {
    /// The keys are arguments `first`, `first + step`, ... up to `last` (counted from the
    /// end when negative: -1 is the last argument).
    Range {
        first: usize,
        last: i64,
        step: usize,
    },
    /// The keys depend on the arguments: `COMMAND GETKEYS` says where, for each call.
    Ask,
    /// The command has the flag `noscript`: it cannot run inside a script.
    NoScript,
}

/// Whether a command writes, as its `COMMAND INFO` flags say.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Writes {
    /// The command has the flag `write` (even where its arguments would only read, as
    /// `SORT` without `STORE`: the server flags the command, not the call).
    Always,
    /// The command has no flag `write`, nor any of its subcommands.
    Never,
    /// Only these subcommands have the flag `write`: from Redis 7, a container command's
    /// flags are its subcommands'.
    Subcommands(Subcommands),
}

impl Writes {
    /// Whether the command called with `args` (its name first) writes.
    fn by(&self, args: &Arguments<'_>) -> bool {
        match self {
            Writes::Always => true,
            Writes::Never => false,
            Writes::Subcommands(writing) => writing.called(args),
        }
    }
}

/// Some subcommands of a container command (from Redis 7), by lowercase name without
/// the container's (`create` of `XGROUP`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Subcommands(Arc<[Box<[u8]>]>);

impl Subcommands {
    /// Whether `args` (the container's name first) call one of them.
    fn called(&self, args: &Arguments<'_>) -> bool {
        !self.0.is_empty()
            && args.get(1).is_some_and(|sub| {
                with_lowercase(sub, |sub| self.0.iter().any(|name| **name == *sub))
            })
    }
}

/// What `COMMAND INFO` said of one command.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Spec {
    keys: KeySpec,
    writes: Writes,
    /// Its subcommands that cannot run in a script (flag `noscript`: `CONFIG GET`,
    /// `CLIENT LIST`), as a container's own flags do not say from Redis 7.
    noscript: Subcommands,
}

/// The specs of the commands asked about so far, by lowercase name; one per backend.
#[derive(Debug, Default)]
pub(crate) struct CommandKeys {
    specs: Mutex<HashMap<Box<[u8]>, Spec>>,
}

/// The arguments of one command of a pipeline, its name first.
pub(crate) type Arguments<'p> = Vec<&'p [u8]>;

impl CommandKeys {
    /// For each of `commands`, the positions of its arguments that are keys, in order.
    /// Asks the server on `conn` about command names not asked about before (one
    /// `COMMAND INFO` for all of them) and about the commands whose keys move (one request
    /// of `COMMAND GETKEYS`s). Errors are named after the lock key `lock`:
    /// [`Error::InvalidPipeline`] for an unknown command, one that cannot run in a script,
    /// one that writes under [`Access::Read`] (refused before any `COMMAND GETKEYS`) or
    /// whose keys the server cannot find; [`Error::Redis`] or [`Error::Refused`] when a
    /// request fails.
    pub(crate) async fn positions<C: ConnectionLike>(
        &self,
        conn: &mut C,
        commands: &[Arguments<'_>],
        lock: &str,
        access: Access,
    ) -> Result<Vec<Vec<usize>>, Error> {
        let specs = match self.specs(commands) {
            Some(specs) => specs,
            None => {
                self.learn(conn, commands, lock).await?;
                self.specs(commands)
                    .ok_or_else(|| unknown(commands, self, lock))?
            }
        };
        if let Some(at) = specs.iter().position(|spec| *spec == KeySpec::NoScript) {
            return Err(invalid(
                lock,
                format!(
                    "command {} ({}) cannot run inside a script (flag noscript)",
                    at + 1,
                    String::from_utf8_lossy(commands[at][0])
                ),
            ));
        }
        if access == Access::Read {
            if let Some(at) = self.first_write(commands) {
                return Err(invalid(
                    lock,
                    format!(
                        "command {} ({}) writes (flag write), and the lock is held shared \
                         (a read guard, or a write guard nested in one since downgraded) \
                         with other readers: take a write lock to write",
                        at + 1,
                        String::from_utf8_lossy(commands[at][0])
                    ),
                ));
            }
        }
        let mut asked = ask(conn, commands, &specs, lock).await?.into_iter();
        Ok(commands
            .iter()
            .zip(specs)
            .map(|(args, spec)| match spec {
                KeySpec::Range { first, last, step } => range(args.len(), first, last, step),
                KeySpec::Ask | KeySpec::NoScript => asked.next().unwrap_or_default(),
            })
            .collect())
    }

    /// The key spec of every command of `commands`, if each name is known, as called:
    /// [`KeySpec::NoScript`] for a subcommand that cannot run in a script. Looked up
    /// under one lock.
    fn specs(&self, commands: &[Arguments<'_>]) -> Option<Vec<KeySpec>> {
        let specs = crate::util::lock(&self.specs);
        commands
            .iter()
            .map(|args| {
                with_lowercase(args[0], |name| {
                    let spec = specs.get(name)?;
                    Some(if spec.noscript.called(args) {
                        KeySpec::NoScript
                    } else {
                        spec.keys
                    })
                })
            })
            .collect()
    }

    /// The place of the first of `commands` that writes, each of them known.
    fn first_write(&self, commands: &[Arguments<'_>]) -> Option<usize> {
        let specs = crate::util::lock(&self.specs);
        commands.iter().position(|args| {
            with_lowercase(args[0], |name| {
                specs.get(name).is_some_and(|spec| spec.writes.by(args))
            })
        })
    }

    /// Asks `COMMAND INFO` about every name of `commands` not known yet, and keeps the
    /// answers; an unknown command is left out.
    async fn learn<C: ConnectionLike>(
        &self,
        conn: &mut C,
        commands: &[Arguments<'_>],
        lock: &str,
    ) -> Result<(), Error> {
        let mut unknown: Vec<Vec<u8>> = {
            let specs = crate::util::lock(&self.specs);
            commands
                .iter()
                .map(|args| args[0].to_ascii_lowercase())
                .filter(|name| !specs.contains_key(name.as_slice()))
                .collect()
        };
        unknown.sort_unstable();
        unknown.dedup();
        let mut info = redis::cmd("COMMAND");
        info.arg("INFO").arg(&unknown);
        let reply: Value = info
            .query_async(conn)
            .await
            .map_err(|err| Error::redis(lock, err))?;
        let Value::Array(entries) = reply else {
            return Err(super::replies::unexpected(&reply, lock));
        };
        let mut specs = crate::util::lock(&self.specs);
        for (name, entry) in unknown.into_iter().zip(entries) {
            if let Some(spec) = parse_info(&entry) {
                specs.insert(name.into_boxed_slice(), spec);
            }
        }
        Ok(())
    }
}

/// The refusal of the first command of `commands` whose name the server did not know.
fn unknown(commands: &[Arguments<'_>], keys: &CommandKeys, lock: &str) -> Error {
    let specs = crate::util::lock(&keys.specs);
    let at = commands
        .iter()
        .position(|args| with_lowercase(args[0], |name| !specs.contains_key(name)))
        .unwrap_or(0);
    invalid(
        lock,
        format!(
            "command {} ({}) is not a command this server knows",
            at + 1,
            commands
                .get(at)
                .map_or_else(String::new, |args| String::from_utf8_lossy(args[0])
                    .into_owned())
        ),
    )
}

/// The longest command name lowercased without an allocation.
const SHORT_NAME: usize = 32;

/// Runs `f` on `name` in lowercase, written on the stack when it is short.
fn with_lowercase<R>(name: &[u8], f: impl FnOnce(&[u8]) -> R) -> R {
    if name.len() <= SHORT_NAME {
        let mut buf = [0_u8; SHORT_NAME];
        let lower = &mut buf[..name.len()];
        lower.copy_from_slice(name);
        lower.make_ascii_lowercase();
        f(lower)
    } else {
        f(&name.to_ascii_lowercase())
    }
}

/// The positions of the keys of a command of `argc` arguments whose legacy key range is
/// `first`, `last`, `step` (as Redis's `getKeysUsingLegacyRangeSpec` reads it); only
/// positions the command has.
fn range(argc: usize, first: usize, last: i64, step: usize) -> Vec<usize> {
    let last = if last < 0 {
        i64::try_from(argc).unwrap_or(i64::MAX) + last
    } else {
        last
    };
    let Ok(last) = usize::try_from(last) else {
        return Vec::new();
    };
    let end = last.min(argc.saturating_sub(1));
    if first == 0 || first > end {
        return Vec::new();
    }
    (first..=end).step_by(step.max(1)).collect()
}

/// The spec in one entry of a `COMMAND INFO` reply: `[name, arity, flags, first key,
/// last key, step, ...]`, from Redis 7 with `[..., acl categories, tips, key specs,
/// subcommands]` (each subcommand an entry of the same shape, named `container|sub`);
/// `None` for a nil entry (an unknown command) or one not in that shape.
fn parse_info(entry: &Value) -> Option<Spec> {
    let Value::Array(fields) = entry else {
        return None;
    };
    let number = |at: usize| match fields.get(at) {
        Some(Value::Int(n)) => Some(*n),
        _ => None,
    };
    let (first, last, step) = (number(3)?, number(4)?, number(5)?);
    let subcommands = match fields.get(9) {
        Some(Value::Array(subs)) if !subs.is_empty() => subs.as_slice(),
        _ => &[],
    };
    let keys = if has_flag(fields, "noscript")? {
        KeySpec::NoScript
    } else if has_flag(fields, "movablekeys")? || !subcommands.is_empty() {
        KeySpec::Ask
    } else {
        KeySpec::Range {
            first: usize::try_from(first).unwrap_or(0),
            last,
            step: usize::try_from(step).unwrap_or(1),
        }
    };
    let flagged = |flag: &str| -> Subcommands {
        let names: Vec<Box<[u8]>> = subcommands
            .iter()
            .filter_map(|sub| match sub {
                Value::Array(sub) if has_flag(sub, flag) == Some(true) => subcommand_name(sub),
                _ => None,
            })
            .collect();
        Subcommands(names.into())
    };
    let writing = flagged("write");
    let writes = if has_flag(fields, "write")? {
        Writes::Always
    } else if writing.0.is_empty() {
        Writes::Never
    } else {
        Writes::Subcommands(writing)
    };
    let noscript = flagged("noscript");
    Some(Spec {
        keys,
        writes,
        noscript,
    })
}

/// Whether the flags of a `COMMAND INFO` entry (its third field) hold `wanted`; `None`
/// when the entry has no flags field.
fn has_flag(fields: &[Value], wanted: &str) -> Option<bool> {
    let flags = match fields.get(2)? {
        Value::Array(flags) | Value::Set(flags) => flags,
        _ => return None,
    };
    Some(flags.iter().any(|flag| match flag {
        Value::SimpleString(flag) => flag.eq_ignore_ascii_case(wanted),
        Value::BulkString(flag) => flag.eq_ignore_ascii_case(wanted.as_bytes()),
        _ => false,
    }))
}

/// The lowercase name of a subcommand from its `COMMAND INFO` entry's name,
/// `container|sub`: `sub`.
fn subcommand_name(fields: &[Value]) -> Option<Box<[u8]>> {
    let name = match fields.first()? {
        Value::BulkString(name) => name.as_slice(),
        Value::SimpleString(name) => name.as_bytes(),
        _ => return None,
    };
    let at = name.iter().position(|&byte| byte == b'|')?;
    Some(name[at + 1..].to_ascii_lowercase().into_boxed_slice())
}

/// The key positions of each command of `commands` whose spec is [`KeySpec::Ask`], in
/// order, from one request of `COMMAND GETKEYS`s (none when no command asks).
async fn ask<C: ConnectionLike>(
    conn: &mut C,
    commands: &[Arguments<'_>],
    specs: &[KeySpec],
    lock: &str,
) -> Result<Vec<Vec<usize>>, Error> {
    let asking: Vec<(usize, &Arguments<'_>)> = commands
        .iter()
        .zip(specs)
        .enumerate()
        .filter(|(_, (_, spec))| **spec == KeySpec::Ask)
        .map(|(at, (args, _))| (at, args))
        .collect();
    if asking.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = redis::pipe();
    for (_, args) in &asking {
        pipe.cmd("COMMAND").arg("GETKEYS").arg(*args);
    }
    let replies: Vec<RedisResult<Vec<Vec<u8>>>> = pipe
        .ignore_errors()
        .query_async(conn)
        .await
        .map_err(|err| Error::redis(lock, err))?;
    asking
        .iter()
        .zip(replies)
        .map(|((at, args), keys)| match keys {
            Ok(keys) => Ok(located(args, &keys)),
            // A subcommand without keys (`OBJECT HELP`) is no error.
            Err(err) if err.to_string().contains("no key arguments") => Ok(Vec::new()),
            Err(err) => Err(invalid(
                lock,
                format!(
                    "the server could not find the keys of command {} ({}): {err}",
                    at + 1,
                    String::from_utf8_lossy(args[0])
                ),
            )),
        })
        .collect()
}

/// The positions of `keys` among `args`: each is the first argument after the previous
/// key's (after the name for the first) that equals it. An argument equal to a key that
/// comes before the key itself may be taken for it: the command the script runs is the
/// same either way, since a key is put back in its place.
fn located(args: &Arguments<'_>, keys: &[Vec<u8>]) -> Vec<usize> {
    let mut from = 1;
    let mut positions = Vec::with_capacity(keys.len());
    for key in keys {
        if let Some(found) = (from..args.len()).find(|&at| args[at] == key.as_slice()) {
            positions.push(found);
            from = found + 1;
        }
    }
    positions
}

fn invalid(lock: &str, reason: String) -> Error {
    Error::InvalidPipeline {
        key: lock.to_owned(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_legacy_range_gives_the_positions_the_command_has() {
        // SET k v; MSET k1 v1 k2 v2; DEL a b c; a command without keys; too few arguments.
        assert_eq!(range(3, 1, 1, 1), vec![1]);
        assert_eq!(range(5, 1, -1, 2), vec![1, 3]);
        assert_eq!(range(4, 1, -1, 1), vec![1, 2, 3]);
        assert_eq!(range(1, 0, 0, 0), Vec::<usize>::new());
        assert_eq!(range(1, 1, 1, 1), Vec::<usize>::new());
        // BLPOP a b 0: the last argument is the timeout.
        assert_eq!(range(4, 1, -2, 1), vec![1, 2]);
    }

    #[test]
    fn keys_are_found_in_order_after_the_name() {
        let args: Arguments<'_> = vec![b"ZUNIONSTORE", b"d", b"2", b"d", b"x"];
        assert_eq!(
            located(&args, &[b"d".to_vec(), b"d".to_vec(), b"x".to_vec()]),
            vec![1, 3, 4]
        );
        assert_eq!(located(&args, &[b"nope".to_vec()]), Vec::<usize>::new());
    }

    fn status(flag: &str) -> Value {
        Value::SimpleString(flag.to_owned())
    }

    /// A `COMMAND INFO` entry named `x` with `flags` and a key range, with Redis 7's four
    /// fields more when it has `subs`.
    fn entry(
        flags: Vec<Value>,
        first: i64,
        last: i64,
        step: i64,
        subs: Option<Vec<Value>>,
    ) -> Value {
        let mut fields = vec![
            Value::BulkString(b"x".to_vec()),
            Value::Int(-2),
            Value::Array(flags),
            Value::Int(first),
            Value::Int(last),
            Value::Int(step),
        ];
        if let Some(subs) = subs {
            fields.extend([
                Value::Array(vec![]),
                Value::Array(vec![]),
                Value::Array(vec![]),
            ]);
            fields.push(Value::Array(subs));
        }
        Value::Array(fields)
    }

    /// A subcommand's entry, named `container|sub`, with `flags`.
    fn sub(name: &str, flags: Vec<Value>) -> Value {
        let Value::Array(mut fields) = entry(flags, 2, 2, 1, None) else {
            unreachable!()
        };
        fields[0] = Value::BulkString(name.as_bytes().to_vec());
        Value::Array(fields)
    }

    fn call(args: &[&'static [u8]]) -> Arguments<'static> {
        args.to_vec()
    }

    #[test]
    fn command_info_entries_are_read_as_redis_6_and_7_give_them() {
        let keys = |entry: &Value| parse_info(entry).map(|spec| spec.keys);
        let writes = |entry: &Value| parse_info(entry).map(|spec| spec.writes);
        let set = entry(vec![status("write")], 1, 1, 1, None);
        assert_eq!(
            keys(&set),
            Some(KeySpec::Range {
                first: 1,
                last: 1,
                step: 1
            })
        );
        assert_eq!(writes(&set), Some(Writes::Always));
        let get = entry(vec![status("readonly")], 1, 1, 1, None);
        assert_eq!(writes(&get), Some(Writes::Never));
        let zunion = entry(vec![status("movablekeys")], 1, 1, 1, Some(vec![]));
        assert_eq!(keys(&zunion), Some(KeySpec::Ask));
        let object = entry(vec![], 0, 0, 0, Some(vec![Value::Nil]));
        assert_eq!(keys(&object), Some(KeySpec::Ask));
        assert_eq!(writes(&object), Some(Writes::Never));
        let multi = entry(vec![status("noscript")], 0, 0, 0, None);
        assert_eq!(keys(&multi), Some(KeySpec::NoScript));
        assert_eq!(parse_info(&Value::Nil), None);
    }

    #[test]
    fn redis_7_subcommands_carry_the_write_and_noscript_flags_of_their_containers() {
        let writes = |entry: &Value| parse_info(entry).map(|spec| spec.writes);
        // Redis 7's XGROUP: no flags of its own, `xgroup|create` flagged write.
        let xgroup = entry(
            vec![],
            0,
            0,
            0,
            Some(vec![
                sub("xgroup|create", vec![status("write"), status("denyoom")]),
                sub("xgroup|help", vec![status("loading"), status("stale")]),
            ]),
        );
        let writing = writes(&xgroup).unwrap();
        assert_eq!(
            writing,
            Writes::Subcommands(Subcommands(
                vec![b"create".to_vec().into_boxed_slice()].into()
            ))
        );
        assert!(writing.by(&call(&[b"XGROUP", b"CREATE", b"s", b"g", b"$"])));
        assert!(!writing.by(&call(&[b"XGROUP", b"HELP"])));
        assert!(!writing.by(&call(&[b"XGROUP"])));
        // Redis 7's CONFIG: `config|get` cannot run in a script, `config|help` can.
        let config = entry(
            vec![],
            0,
            0,
            0,
            Some(vec![
                sub("config|get", vec![status("admin"), status("noscript")]),
                sub("config|help", vec![status("loading"), status("stale")]),
            ]),
        );
        let config = parse_info(&config).unwrap();
        assert!(config
            .noscript
            .called(&call(&[b"CONFIG", b"get", b"maxmemory"])));
        assert!(!config.noscript.called(&call(&[b"CONFIG", b"HELP"])));
        let get = parse_info(&entry(vec![status("readonly")], 1, 1, 1, None)).unwrap();
        assert!(!get.noscript.called(&call(&[b"GET", b"k"])));
        assert_eq!(parse_info(&Value::Nil), None);
    }
}
