//! The Go package's four scripts, as `tests/common/go_peer.rs` runs them: another kind
//! of client on the same keys.

use super::Reply;
use crate::store::{Id, Key, Store, Text};

/// Go's write lock: `SET NX PX`; on success `DEL intent` (whoever set it) and nil; else,
/// with `intent`, `SET intent 1 PX ttl`, and the lock key's PTTL.
pub fn write(s: &mut Store, id: Id, ttl: i64, intent: bool) -> Reply {
    if !s.exists(Key::Lock) {
        s.set(Key::Lock, Text::Id(id), Some(ttl));
        s.del(Key::Intent);
        return Reply::Nil;
    }
    if intent {
        s.set(Key::Intent, Text::Int(1), Some(ttl));
    }
    Reply::Int(s.pttl(Key::Lock))
}

/// Go's read lock: a writer's string or an intent blocks (their PTTL); else `SADD`,
/// `PEXPIRE` and nil.
pub fn read(s: &mut Store, id: Id, ttl: i64) -> Reply {
    if s.type_of(Key::Lock) == "string" {
        return Reply::Int(s.pttl(Key::Lock));
    }
    if s.exists(Key::Intent) {
        return Reply::Int(s.pttl(Key::Intent));
    }
    if s.sadd(Key::Lock, id).is_err() {
        return Reply::ScriptError;
    }
    s.pexpire(Key::Lock, ttl);
    Reply::Nil
}

/// Go's refresh: `PEXPIRE` when the id holds the string or is in the set; 1 or 0.
pub fn refresh(s: &mut Store, id: Id, ttl: i64) -> Reply {
    let mine = match s.type_of(Key::Lock) {
        "string" => s.get_is(Key::Lock, &Text::Id(id)),
        "set" => s.sismember(Key::Lock, id) == Ok(true),
        _ => false,
    };
    if !mine {
        return Reply::Int(0);
    }
    Reply::Int(i64::from(s.pexpire(Key::Lock, ttl)))
}

/// Go's unlock: delete the string if it holds the id, or remove the id from the set.
pub fn unlock(s: &mut Store, id: Id) -> Reply {
    match s.type_of(Key::Lock) {
        "string" if s.get_is(Key::Lock, &Text::Id(id)) => {
            s.del(Key::Lock);
        }
        "set" => {
            let _ = s.srem(Key::Lock, id);
        }
        _ => {}
    }
    Reply::Int(1)
}
