//! `lua/refresh.lua` (one lock) and `lua/renew.lua` (many at once, each as refresh.lua).

use super::shared::pttl_at_least;
use super::Reply;
use crate::store::{Id, Key, Member, Store, Text};

/// refresh.lua: 1 when `id` holds the lock (extended), else 0.
pub fn refresh(s: &mut Store, id: Id, ttl: i64) -> Reply {
    Reply::Int(typed(s, id, ttl))
}

/// renew.lua over the lock key named once per `(id, writer)`: `writer` is ARGV[2]'s
/// `w` for that key (its string is read with GET first).
pub fn renew(s: &mut Store, ids: &[(Id, bool)], ttl: i64) -> Reply {
    let replies = ids
        .iter()
        .map(|&(id, writer)| {
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
        })
        .collect();
    Reply::Renewed(replies)
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
