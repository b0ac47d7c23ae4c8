//! `lua/refresh.lua` (one lock) and `lua/renew.lua` (many at once, each as refresh.lua).

use super::shared::pttl_at_least;
use super::Reply;
use crate::store::{Id, Key, Member, Store, Text};

/// refresh.lua: 1 when `id` holds the lock (extended), else 0.
pub fn refresh(s: &mut Store, id: Id, ttl: i64) -> Reply {
    Reply::Int(typed(s, id, ttl))
}

/// A lock key's character in renew.lua's ARGV[2]: what the id is likely to hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Hint {
    /// `w`: a writer's string (read with GET first).
    Writer,
    /// `r` (anything but `w` or `u`): read by TYPE.
    Reader,
    /// `u`: an upgradable reader; its upgrader key (`K:upgrader`, after the lock keys in
    /// KEYS) is extended with it.
    Upgradable,
}

impl Hint {
    /// The character.
    pub fn letter(self) -> char {
        match self {
            Hint::Writer => 'w',
            Hint::Reader => 'r',
            Hint::Upgradable => 'u',
        }
    }
}

/// renew.lua over the lock key named once per `(id, hint)`.
pub fn renew(s: &mut Store, ids: &[(Id, Hint)], ttl: i64) -> Reply {
    renew_described(s, ids, ttl, false)
}

/// renew.lua over the lock key named once per `(id, hint)`, each hint's letter a capital
/// when `described` (its holders key renewed with it).
pub fn renew_described(s: &mut Store, ids: &[(Id, Hint)], ttl: i64, described: bool) -> Reply {
    let replies = ids
        .iter()
        .map(|&(id, hint)| {
            let reply = renew_one(s, id, hint == Hint::Writer, ttl);
            // Its upgrader key lives as long as its hold.
            if hint == Hint::Upgradable && reply == 1 && s.get_is(Key::Upgrader, &Text::Id(id)) {
                s.pexpire(Key::Upgrader, ttl);
            }
            // Its description too.
            if described && reply == 1 {
                pttl_at_least(s, Key::Holders, ttl, None);
            }
            reply
        })
        .collect();
    Reply::Renewed(replies)
}

/// renew.lua's `renew(key, id, writer)`.
fn renew_one(s: &mut Store, id: Id, writer: bool, ttl: i64) -> i64 {
    if writer {
        match s.get(Key::Lock) {
            Ok(Some(t)) if *t == Text::Id(id) => {
                s.pexpire(Key::Lock, ttl);
                return 1;
            }
            Ok(_) => return 0,
            Err(_) => {}
        }
    }
    typed(s, id, ttl)
}

/// The refresh of one id, by the lock key's TYPE.
fn typed(s: &mut Store, id: Id, ttl: i64) -> i64 {
    let held = match s.type_of(Key::Lock) {
        "string" => {
            if s.get_is(Key::Lock, &Text::Id(id)) {
                s.pexpire(Key::Lock, ttl);
                return 1;
            }
            false
        }
        "set" => s.sismember(Key::Lock, id) == Ok(true),
        "zset" => match s.zscore(Key::Lock, Member::Id(id)) {
            Ok(Some(deadline)) => {
                let now = s.now_ms();
                let held = deadline > now;
                if held {
                    let _ = s.zadd(Key::Lock, now + ttl, Member::Id(id));
                } else {
                    let _ = s.zrem(Key::Lock, Member::Id(id));
                }
                held
            }
            _ => false,
        },
        _ => false,
    };
    if held {
        pttl_at_least(s, Key::Lock, ttl, None);
        return 1;
    }
    0
}
