//! Each [`Op`] as the command the server runs (the crate's scripts with the arguments
//! the crate sends, Go's scripts as `tests/common/go_peer.rs` sends them, and a
//! test-only script for time passing, restarts and hostile writes), and its raw reply
//! read back as a [`Reply`].

use std::collections::BTreeMap;

use redis::Value;

use super::go_peer;
use super::op::{exhausted, record, Op, HOSTILE_PX};
use super::scripts::Scripts;
use crate::scripts::describe;
use crate::scripts::exec::Command;
use crate::scripts::inspect::Inspection;
use crate::scripts::lock::Take;
use crate::scripts::lock_all;
use crate::scripts::refresh::Hint;
use crate::scripts::unlock::{Extra, Kind};
use crate::scripts::upgrade;
use crate::scripts::{Refusal, Reply};
use crate::store::{id_text, Key, Member, Text};

/// The steps that are no script of the crate, on the keys of one lock key, in
/// [`Key::ALL`]'s order (KEYS[1] the lock key, KEYS[6] the queue's deadlines).
/// ARGV[1] names the step.
const ADMIN: &str = r#"
local op = ARGV[1]
if op == 'advance' then
    local ms = tonumber(ARGV[2])
    for i, key in ipairs(KEYS) do
        -- The time-scored sorted sets: a semaphore's lock key, the queue's deadlines.
        if (i == 1 or i == 6) and redis.call('TYPE', key)['ok'] == 'zset' then
            local all = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
            for j = 1, #all, 2 do
                redis.call('ZADD', key, tonumber(all[j + 1]) - ms, all[j])
            end
        end
        local pttl = redis.call('PTTL', key)
        if pttl >= 0 then
            if pttl - ms <= 0 then
                redis.call('DEL', key)
            else
                redis.call('PEXPIRE', key, pttl - ms)
            end
        end
    end
elseif op == 'restart' then
    redis.call('DEL', unpack(KEYS))
elseif op == 'persist' then
    redis.call('PERSIST', KEYS[1])
elseif op == 'hash' then
    redis.call('DEL', KEYS[1])
    redis.call('HSET', KEYS[1], 'f', 'v')
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
elseif op == 'set' then
    redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
end
return 0
"#;

/// The scripts a run calls, by name ("lock.lua", "go-write", "admin"), as loaded on the
/// server: their SHA1s.
#[derive(Debug)]
pub struct Loaded {
    sha: BTreeMap<&'static str, String>,
}

/// The crate's scripts a differential run calls.
const CRATE_SCRIPTS: [&str; 19] = [
    "lock.lua",
    "rlock.lua",
    "semaphore.lua",
    "unlock.lua",
    "refresh.lua",
    "renew.lua",
    "exec.lua",
    "force_unlock.lua",
    "leader.lua",
    "inspect.lua",
    "proclaim.lua",
    "downgrade.lua",
    "fence.lua",
    "retake.lua",
    "upgradable.lua",
    "upgrade.lua",
    "lock_all.lua",
    "attach.lua",
    "describe.lua",
];

impl Loaded {
    /// `SCRIPT LOAD`s every script a run calls (`dump`: the key dump's text): `Err` when
    /// one does not load (a mutation that does not compile).
    pub fn load(
        conn: &mut redis::Connection,
        scripts: &Scripts,
        dump: &str,
    ) -> Result<Loaded, String> {
        let mut texts: Vec<(&'static str, String)> = CRATE_SCRIPTS
            .iter()
            .map(|&name| (name, scripts.source(name)))
            .collect();
        texts.extend([
            ("go-write", go_peer::WRITE.to_owned()),
            ("go-read", go_peer::READ.to_owned()),
            ("go-refresh", go_peer::REFRESH.to_owned()),
            ("go-unlock", go_peer::UNLOCK.to_owned()),
            ("admin", ADMIN.to_owned()),
            ("dump", dump.to_owned()),
        ]);
        let mut sha = BTreeMap::new();
        for (name, text) in texts {
            let hash: String = redis::cmd("SCRIPT")
                .arg("LOAD")
                .arg(&text)
                .query(conn)
                .map_err(|err| format!("{name} does not load: {err}"))?;
            sha.insert(name, hash);
        }
        Ok(Loaded { sha })
    }

    /// `EVALSHA` of script `name` with `keys` and `args`.
    pub fn call(&self, name: &str, keys: &[String], args: &[String]) -> redis::Cmd {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(&self.sha[name]).arg(keys.len()).arg(keys).arg(args);
        cmd
    }
}

/// How a script's raw reply reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// lock.lua, rlock.lua, semaphore.lua, upgradable.lua, upgrade.lua: a token, or
    /// -1 - wait (or upgrade.lua's 0).
    Take,
    /// An integer.
    Int,
    /// renew.lua: integers, then the clock.
    Renew,
    /// exec.lua.
    Exec,
    /// attach.lua: 1, or `{0, i}`.
    Attach,
    /// lock_all.lua: tokens, or `{"blocked", i, pttl}`.
    Tokens,
    /// leader.lua.
    Leader,
    /// inspect.lua.
    Inspect,
    /// A Go script: nil or an integer.
    Go,
    /// A step that is no script: nothing to compare.
    None,
}

/// The keys of lock key `lock` (and of its lock 1); `on`: which lock's keys stand in
/// lock 0's places ([`Key::on`]: 1 for an [`Op::OnLock1`]'s step).
#[derive(Clone, Copy)]
pub struct Names<'a> {
    pub lock: &'a str,
    pub on: usize,
}

impl<'a> Names<'a> {
    /// The keys of lock key `lock`.
    pub fn of_lock(lock: &'a str) -> Names<'a> {
        Names { lock, on: 0 }
    }

    /// These names with lock `l`'s keys in lock 0's places.
    pub fn on_lock(self, l: usize) -> Names<'a> {
        Names { on: l, ..self }
    }

    pub fn key(&self, k: Key) -> String {
        format!("{}{}", self.lock, k.on(self.on).suffix())
    }

    /// The [`Key`] named `name`, if it is one of this lock key's.
    pub fn of(&self, name: &str) -> Option<Key> {
        let suffix = name.strip_prefix(self.lock)?;
        Key::ALL
            .into_iter()
            .find(|k| k.suffix() == suffix)
            .map(|k| k.on(self.on))
    }

    pub fn all(&self) -> Vec<String> {
        Key::ALL.iter().map(|&k| self.key(k)).collect()
    }

    fn channel(&self) -> String {
        format!("{}:released", self.lock)
    }
}

fn flag(on: bool) -> String {
    if on { "1" } else { "0" }.to_owned()
}

/// KEYS[4], KEYS[5] and ARGV[5], ARGV[6] of a take: the fair queue and the floor; the
/// floor left out when nothing follows and it is off (as the crate does).
fn fair_tail(n: &Names, take: &Take, keys: &mut Vec<String>, args: &mut Vec<String>) {
    if let Some(wait) = take.fair {
        keys.push(n.key(Key::Queue));
        keys.push(n.key(Key::QueueDeadline));
        args.push(flag(take.floor));
        args.push(if wait { "wait" } else { "try" }.to_owned());
    } else if take.floor {
        args.push(flag(true));
    }
}

/// The command of step `op` (`token`: its token argument, resolved), and how its reply
/// reads.
pub fn command(scripts: &Loaded, n: &Names, op: &Op, token: u64) -> (redis::Cmd, Shape) {
    let k = |key: Key| n.key(key);
    let ms = |v: i64| v.to_string();
    let (name, keys, args, shape): (&str, Vec<String>, Vec<String>, Shape) = match op {
        Op::Lock { take, intent } => {
            let mut keys = vec![k(Key::Lock), k(Key::Intent), k(Key::Fence)];
            let mut args = vec![
                id_text(take.id),
                ms(take.ttl),
                flag(*intent),
                ms(take.retention),
            ];
            fair_tail(n, take, &mut keys, &mut args);
            ("lock.lua", keys, args, Shape::Take)
        }
        Op::RLock { take, counting } => {
            let mut keys = vec![k(Key::Lock), k(Key::Intent), k(Key::Fence)];
            let mut args = vec![
                id_text(take.id),
                ms(take.ttl),
                ms(take.retention),
                flag(*counting),
            ];
            fair_tail(n, take, &mut keys, &mut args);
            ("rlock.lua", keys, args, Shape::Take)
        }
        Op::Semaphore { take, permits } => {
            let mut keys = vec![k(Key::Lock), k(Key::Fence)];
            let mut args = vec![
                id_text(take.id),
                ms(take.ttl),
                permits.to_string(),
                ms(take.retention),
                flag(take.floor),
            ];
            if let Some(wait) = take.fair {
                keys.push(k(Key::Queue));
                keys.push(k(Key::QueueDeadline));
                args.push(if wait { "wait" } else { "try" }.to_owned());
            }
            ("semaphore.lua", keys, args, Shape::Take)
        }
        Op::Unlock {
            id,
            kind,
            extra,
            described,
        } => {
            let mut keys = vec![k(Key::Lock)];
            if *extra != Extra::None {
                keys.push(k(Key::Intent));
            }
            if *kind == Kind::Upgradable {
                keys.push(k(Key::Upgrader));
            } else if *extra == Extra::Queue {
                keys.push(k(Key::Queue));
                keys.push(k(Key::QueueDeadline));
            }
            let letter = (kind.letter() as char).to_string();
            let mut args = vec![id_text(*id), n.channel(), letter, "0".to_owned()];
            if *described {
                keys.push(k(Key::Holders));
                args.push("1".to_owned());
            }
            ("unlock.lua", keys, args, Shape::Int)
        }
        Op::Refresh { id, ttl } => (
            "refresh.lua",
            vec![k(Key::Lock)],
            vec![id_text(*id), ms(*ttl)],
            Shape::Int,
        ),
        Op::Upgradable { take } => (
            "upgradable.lua",
            vec![
                k(Key::Lock),
                k(Key::Intent),
                k(Key::Fence),
                k(Key::Upgrader),
            ],
            vec![
                id_text(take.id),
                ms(take.ttl),
                ms(take.retention),
                flag(take.floor),
            ],
            Shape::Take,
        ),
        Op::Upgrade { take, op } => (
            "upgrade.lua",
            vec![
                k(Key::Lock),
                k(Key::Intent),
                k(Key::Fence),
                k(Key::Upgrader),
            ],
            vec![
                id_text(take.id),
                ms(take.ttl),
                ms(take.retention),
                op.arg().to_owned(),
                n.channel(),
                "0".to_owned(),
                flag(take.floor),
            ],
            if *op == upgrade::Op::Plain {
                Shape::Int
            } else {
                Shape::Take
            },
        ),
        Op::Renew {
            ids,
            ttl,
            described,
        } => {
            let mut keys = vec![k(Key::Lock); ids.len()];
            for &(_, hint) in ids {
                if hint == Hint::Upgradable {
                    keys.push(k(Key::Upgrader));
                }
                if *described {
                    keys.push(k(Key::Holders));
                }
            }
            let writers: String = ids
                .iter()
                .map(|&(_, h)| {
                    if *described {
                        h.letter().to_ascii_uppercase()
                    } else {
                        h.letter()
                    }
                })
                .collect();
            let mut args = vec![ms(*ttl), writers];
            args.extend(ids.iter().map(|&(id, _)| id_text(id)));
            ("renew.lua", keys, args, Shape::Renew)
        }
        Op::Exec {
            id,
            locks,
            commands,
        } => {
            let mut keys: Vec<String> = locks.iter().map(|&l| k(Key::Lock.on(l))).collect();
            let mut args = vec![id_text(*id), locks.len().to_string()];
            for command in commands {
                keys.push(k(Key::Data));
                match command {
                    Command::Incr => args.extend(["ak".to_owned(), "INCR".to_owned()]),
                    Command::Fail => args.extend(["aka", "INCRBY", "x"].map(str::to_owned)),
                }
            }
            ("exec.lua", keys, args, Shape::Exec)
        }
        Op::LockAll { take } => {
            let mut keys = Vec::new();
            for key in &take.keys {
                let (lock, intent, fence) = lock_all::keys(key.lock);
                keys.extend([k(lock), k(intent), k(fence)]);
            }
            let modes: String = take
                .keys
                .iter()
                .map(|key| if key.write { 'w' } else { 'r' })
                .collect();
            let args = vec![
                id_text(take.id),
                ms(take.ttl),
                ms(take.retention),
                modes,
                flag(take.intent),
                flag(take.floor),
            ];
            ("lock_all.lua", keys, args, Shape::Tokens)
        }
        Op::Attach {
            old,
            new,
            ttl,
            parts,
        } => {
            let mut keys: Vec<String> = parts.iter().map(|&(l, _)| k(Key::Lock.on(l))).collect();
            keys.extend(parts.iter().map(|&(l, _)| k(Key::Holders.on(l))));
            let modes: String = parts.iter().map(|&(_, mode)| mode.letter()).collect();
            let args = vec![id_text(*old), id_text(*new), ms(*ttl), modes];
            ("attach.lua", keys, args, Shape::Attach)
        }
        Op::OnLock1(op) => return command(scripts, &n.on_lock(1), op, token),
        Op::Describe { id, ttl, locks } => {
            let mut keys: Vec<String> = locks.iter().map(|&l| k(Key::Lock.on(l))).collect();
            keys.extend(locks.iter().map(|&l| k(Key::Holders.on(l))));
            let args = vec![id_text(*id), ms(*ttl), describe::TEXT.to_owned()];
            ("describe.lua", keys, args, Shape::Int)
        }
        Op::ForceUnlock => (
            "force_unlock.lua",
            vec![
                k(Key::Lock),
                k(Key::Fence),
                k(Key::Granted),
                k(Key::Holders),
            ],
            vec![n.channel(), id_text(0xff), "0".to_owned()],
            Shape::Int,
        ),
        Op::Leader => (
            "leader.lua",
            vec![k(Key::Lock), k(Key::Record)],
            vec![],
            Shape::Leader,
        ),
        Op::Inspect { semaphore } => (
            "inspect.lua",
            vec![
                k(Key::Lock),
                k(Key::Intent),
                k(Key::Fence),
                k(Key::Queue),
                k(Key::QueueDeadline),
                k(Key::Holders),
            ],
            vec![if *semaphore { "semaphore" } else { "lock" }.to_owned()],
            Shape::Inspect,
        ),
        Op::Proclaim {
            id,
            token,
            value,
            px,
        } => (
            "proclaim.lua",
            vec![k(Key::Lock), k(Key::Record)],
            vec![
                id_text(*id),
                record(*token, *id, *value).render(),
                ms(*px),
                "0".to_owned(),
            ],
            Shape::Int,
        ),
        Op::Downgrade { id, ttl } => (
            "downgrade.lua",
            vec![k(Key::Lock)],
            vec![id_text(*id), ms(*ttl), n.channel(), "0".to_owned()],
            Shape::Int,
        ),
        Op::Fence { retention, .. } => (
            "fence.lua",
            vec![k(Key::Fence), k(Key::Granted)],
            vec![token.to_string(), ms(*retention)],
            Shape::Int,
        ),
        Op::Retake {
            id,
            ttl,
            writer,
            retention,
            ..
        } => (
            "retake.lua",
            vec![k(Key::Lock), k(Key::Intent), k(Key::Fence), k(Key::Granted)],
            vec![
                id_text(*id),
                ms(*ttl),
                if *writer { "w" } else { "r" }.to_owned(),
                token.to_string(),
                ms(*retention),
            ],
            Shape::Int,
        ),
        Op::GoWrite { id, ttl, intent } => (
            "go-write",
            vec![k(Key::Lock), k(Key::Intent)],
            vec![id_text(*id), ms(*ttl), flag(*intent)],
            Shape::Go,
        ),
        Op::GoRead { id, ttl } => (
            "go-read",
            vec![k(Key::Lock), k(Key::Intent)],
            vec![id_text(*id), ms(*ttl)],
            Shape::Go,
        ),
        Op::GoRefresh { id, ttl } => (
            "go-refresh",
            vec![k(Key::Lock)],
            vec![id_text(*id), ms(*ttl)],
            Shape::Go,
        ),
        Op::GoUnlock { id } => (
            "go-unlock",
            vec![k(Key::Lock)],
            vec![id_text(*id)],
            Shape::Go,
        ),
        Op::Advance { ms: by } => (
            "admin",
            n.all(),
            vec!["advance".to_owned(), ms(*by)],
            Shape::None,
        ),
        Op::Restart => ("admin", n.all(), vec!["restart".to_owned()], Shape::None),
        Op::Persist { key } => (
            "admin",
            vec![k(*key)],
            vec!["persist".to_owned()],
            Shape::None,
        ),
        Op::Hash { key } => (
            "admin",
            vec![k(*key)],
            vec!["hash".to_owned(), ms(HOSTILE_PX)],
            Shape::None,
        ),
        Op::Junk { key } => (
            "admin",
            vec![k(*key)],
            vec!["set".to_owned(), Text::Junk.render(), ms(HOSTILE_PX)],
            Shape::None,
        ),
        Op::Exhausted { key, below } => (
            "admin",
            vec![k(*key)],
            vec![
                "set".to_owned(),
                exhausted(*below).to_string(),
                ms(HOSTILE_PX),
            ],
            Shape::None,
        ),
    };
    (scripts.call(name, &keys, &args), shape)
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Okay => Some("OK".to_owned()),
        _ => None,
    }
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(n) => Some(*n),
        _ => None,
    }
}

/// A refusal table (`{"wrongtype", key, type}`, `{"noexpiry", key}`, `{"unchecked"}`,
/// `{"reader"}`).
fn refusal(n: &Names, items: &[Value]) -> Option<Refusal> {
    let words: Option<Vec<String>> = items.iter().map(text).collect();
    let words = words?;
    let key = |i: usize| words.get(i).and_then(|name| n.of(name));
    match words.first()?.as_str() {
        "wrongtype" if words.len() == 3 => Some(Refusal::WrongType {
            key: key(1)?,
            found: words[2].clone(),
        }),
        "noexpiry" if words.len() == 2 => Some(Refusal::NoExpiry { key: key(1)? }),
        "unchecked" if words.len() == 1 => Some(Refusal::Unchecked),
        "reader" if words.len() == 1 => Some(Refusal::Reader),
        _ => None,
    }
}

/// The raw reply `v` of a script whose replies read as `shape`, as a [`Reply`]; `Err`
/// with the raw reply when it is none the script gives. A token's `clock` is `false`
/// (the server's reply does not say; the comparison takes the model's).
pub fn reply(n: &Names, shape: Shape, v: &Value) -> Result<Reply, String> {
    let odd = || format!("a reply {shape:?} does not give: {v:?}");
    if let Value::ServerError(_) = v {
        return Ok(Reply::ScriptError);
    }
    if let Value::Array(items) = v {
        if let Some(r) = refusal(n, items) {
            return Ok(Reply::Refused(r));
        }
    }
    let ints = |items: &[Value]| -> Option<Vec<i64>> { items.iter().map(int).collect() };
    let parsed = match (shape, v) {
        (Shape::Take, Value::Int(t)) if *t > 0 => Some(Reply::Token {
            token: *t as u64,
            clock: false,
        }),
        (Shape::Take, Value::Int(t)) if *t < 0 => Some(Reply::Blocked { wait: -1 - t }),
        // upgrade.lua: not the upgradable reader.
        (Shape::Take, Value::Int(0)) => Some(Reply::Int(0)),
        (Shape::Int | Shape::Go, Value::Int(t)) => Some(Reply::Int(*t)),
        (Shape::Go, Value::Nil) => Some(Reply::Nil),
        (Shape::Renew, Value::Array(items)) if !items.is_empty() => {
            ints(&items[..items.len() - 1]).map(Reply::Renewed)
        }
        (Shape::Exec, Value::Array(items)) => match items.first().and_then(int) {
            Some(0) if items.len() == 2 => int(&items[1]).map(|i| Reply::NotHeld(i as usize)),
            Some(1) => ints(&items[1..]).map(Reply::Ran),
            Some(2) if items.len() == 3 => int(&items[1]).map(|i| Reply::Failed {
                command: i as usize,
            }),
            _ => None,
        },
        (Shape::Attach, Value::Int(1)) => Some(Reply::Int(1)),
        (Shape::Attach, Value::Array(items)) => {
            match (items.first().and_then(int), items.get(1).and_then(int)) {
                (Some(0), Some(i)) if items.len() == 2 && i > 0 => Some(Reply::NotHeld(i as usize)),
                _ => None,
            }
        }
        (Shape::Tokens, Value::Array(items)) if !items.is_empty() => {
            let blocked = text(&items[0]).is_some_and(|w| w == "blocked");
            match (blocked, ints(&items[1..])) {
                (true, Some(rest)) if rest.len() == 2 && rest[0] > 0 => Some(Reply::BlockedAt {
                    index: rest[0] as usize,
                    wait: rest[1],
                }),
                (false, Some(_)) => ints(items)
                    .filter(|t| t.iter().all(|&t| t > 0))
                    .map(|t| Reply::Tokens(t.into_iter().map(|t| (t as u64, false)).collect())),
                _ => None,
            }
        }
        (Shape::Leader, Value::Array(items)) if items.len() == 3 => {
            let opt = |v: &Value| text(v).map(|s| (!s.is_empty()).then(|| Text::parse(&s)));
            match (opt(&items[0]), int(&items[1]), opt(&items[2])) {
                (Some(holder), Some(pttl), Some(record)) => Some(Reply::Leader {
                    holder,
                    pttl,
                    record,
                }),
                _ => None,
            }
        }
        (Shape::Inspect, Value::Array(items)) => {
            inspection(items).map(|i| Reply::Inspected(Box::new(i)))
        }
        _ => None,
    };
    parsed.ok_or_else(odd)
}

/// inspect.lua's thirteen fields (the clock it read left out); holders and descriptions
/// sorted.
fn inspection(items: &[Value]) -> Option<Inspection> {
    let [kind, pttl, intent, fence, holders, queue, _now, intent_value, pttls, permits, tickets, deadlines, descriptions] =
        items
    else {
        return None;
    };
    let list = |v: &Value| -> Option<Vec<String>> {
        match v {
            Value::Array(items) => items.iter().map(text).collect(),
            _ => None,
        }
    };
    let scored = |v: &Value| -> Option<Vec<(Member, i64)>> {
        list(v)?
            .chunks(2)
            .map(|pair| Some((Member::parse(&pair[0])?, pair.get(1)?.parse().ok()?)))
            .collect()
    };
    let kind = match text(kind)?.as_str() {
        "none" => "none",
        "string" => "string",
        "set" => "set",
        "zset" => "zset",
        _ => return None,
    };
    let mut holders: Vec<Text> = list(holders)?.iter().map(|h| Text::parse(h)).collect();
    holders.sort();
    let queue = list(queue)?
        .iter()
        .map(|m| Member::parse(m))
        .collect::<Option<_>>()?;
    let intent_value = text(intent_value)?;
    let pttls: Vec<i64> = match pttls {
        Value::Array(items) => items.iter().map(int).collect::<Option<_>>()?,
        _ => return None,
    };
    Some(Inspection {
        kind,
        pttl: int(pttl)?,
        intent: int(intent)? == 1,
        fence: u64::try_from(int(fence)?).ok()?,
        holders,
        queue,
        intent_value: (!intent_value.is_empty()).then(|| Text::parse(&intent_value)),
        pttls: pttls.try_into().ok()?,
        permits: scored(permits)?,
        tickets: scored(tickets)?,
        deadlines: scored(deadlines)?,
        descriptions: described(&list(descriptions)?)?,
    })
}

/// inspect.lua's descriptions, flat `{id, text, ...}`, as the model's: each id with the
/// time after [`describe::TEXT`], sorted.
fn described(flat: &[String]) -> Option<Vec<(Text, i64)>> {
    let mut out: Vec<(Text, i64)> = flat
        .chunks(2)
        .map(|pair| {
            let at = pair.get(1)?.strip_prefix(describe::TEXT)?.parse().ok()?;
            Some((Text::parse(&pair[0]), at))
        })
        .collect::<Option<_>>()?;
    out.sort();
    Some(out)
}
