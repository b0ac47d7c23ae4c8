//! The server's keys of one lock key, read in one round trip (a test-only script) and
//! parsed into a [`Store`].

use std::collections::{BTreeMap, BTreeSet};

use redis::Value;

use super::wire::Names;
use crate::scripts::describe;
use crate::store::{id_of, Entry, Key, Member, Store, Text, Val};

/// KEYS: the keys of one lock key in [`Key::ALL`]'s order. Replies `{seconds,
/// microseconds, {type, pttl, value, expiry} per key}`: TIME, then each key's TYPE,
/// PTTL, value (GET, SMEMBERS, ZRANGE WITHSCORES, HGETALL; "" for none) and
/// PEXPIRETIME (-3 on a server without it). PTTL is measured from the time Redis cached
/// when the script began, which a busy machine can leave some ms behind TIME; so the
/// expiry is taken from PEXPIRETIME where there is one.
pub const DUMP: &str = r#"
local time = redis.call('TIME')
local out = {time[1], time[2]}
for _, key in ipairs(KEYS) do
    local key_type = redis.call('TYPE', key)['ok']
    local value = ''
    if key_type == 'string' then
        value = redis.call('GET', key)
    elseif key_type == 'set' then
        value = redis.call('SMEMBERS', key)
    elseif key_type == 'zset' then
        value = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
    elseif key_type == 'hash' then
        value = redis.call('HGETALL', key)
    end
    -- PEXPIRETIME (Redis 7.0 on): the expiry itself, read off no clock; before 7.0 an
    -- error, and the expiry is TIME + PTTL.
    local at = redis.pcall('PEXPIRETIME', key)
    if type(at) ~= 'number' then
        at = -3
    end
    out[#out + 1] = {key_type, redis.call('PTTL', key), value, at}
end
return out
"#;

fn text(v: &Value) -> Result<String, String> {
    match v {
        Value::BulkString(b) => Ok(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Ok(s.clone()),
        other => Err(format!("not a string: {other:?}")),
    }
}

fn texts(v: &Value) -> Result<Vec<String>, String> {
    match v {
        Value::Array(items) => items.iter().map(text).collect(),
        other => Err(format!("not an array: {other:?}")),
    }
}

/// A hash's fields and values, flat: the holders' descriptions when every field is an
/// id and every value the fixed description the steps send followed by a time, else a
/// hostile hash.
fn holders(flat: &[String]) -> Val {
    let mut h = BTreeMap::new();
    for pair in flat.chunks(2) {
        let at = pair
            .get(1)
            .and_then(|v| v.strip_prefix(describe::TEXT))
            .and_then(|at| at.parse().ok());
        match (id_of(&pair[0]), at) {
            (Some(id), Some(at)) => h.insert(id, at),
            _ => return Val::Hash,
        };
    }
    Val::Holders(h)
}

/// The dump `v` of the keys of `n` as a [`Store`] at the dump's TIME.
pub fn parse(n: &Names, v: &Value) -> Result<Store, String> {
    let Value::Array(items) = v else {
        return Err(format!("a dump that is no array: {v:?}"));
    };
    if items.len() != 2 + Key::ALL.len() {
        return Err(format!("a dump of {} items", items.len()));
    }
    let number = |v: &Value| -> Result<i64, String> {
        text(v)?.parse().map_err(|err| format!("TIME: {err}"))
    };
    let clock_us = number(&items[0])? * 1_000_000 + number(&items[1])?;
    let mut s = Store::at(0);
    s.clock_us = clock_us;
    s.now = clock_us.div_euclid(1000);
    for (&key, item) in Key::ALL.iter().zip(&items[2..]) {
        let Value::Array(fields) = item else {
            return Err(format!("{}: {item:?}", n.key(key)));
        };
        let [key_type, Value::Int(pttl), value, Value::Int(at)] = &fields[..] else {
            return Err(format!("{}: {fields:?}", n.key(key)));
        };
        let val = match text(key_type)?.as_str() {
            "none" => continue,
            "string" => Val::Str(Text::parse(&text(value)?)),
            "set" => {
                let ids: Option<BTreeSet<_>> = texts(value)?.iter().map(|m| id_of(m)).collect();
                Val::Set(ids.ok_or_else(|| format!("{}: a set of other members", n.key(key)))?)
            }
            "zset" => {
                let flat = texts(value)?;
                let mut z = BTreeMap::new();
                for pair in flat.chunks(2) {
                    let member = Member::parse(&pair[0])
                        .ok_or_else(|| format!("{}: member {:?}", n.key(key), pair[0]))?;
                    let score: f64 = pair[1]
                        .parse()
                        .map_err(|err| format!("{}: score {:?}: {err}", n.key(key), pair[1]))?;
                    z.insert(member, score as i64);
                }
                Val::ZSet(z)
            }
            "hash" => holders(&texts(value)?),
            other => return Err(format!("{}: type {other}", n.key(key))),
        };
        let expires = match *pttl {
            -1 => None,
            _ if *at >= 0 => Some(*at),
            ms if ms >= 0 => Some(s.now + ms),
            ms => return Err(format!("{}: PTTL {ms} of a key that exists", n.key(key))),
        };
        s.keys.insert(key, Entry { val, expires });
    }
    Ok(s)
}
