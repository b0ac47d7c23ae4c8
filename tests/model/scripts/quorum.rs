//! Quorum mode's two scripts on one node: `lua/fence.lua` (raise the counter and the
//! granted token to a quorum's token) and `lua/retake.lua` (take a lost lock back under
//! the same id unless a larger token was granted since).

use super::shared::{fence_last, lock_intent, pttl_at_least};
use super::{Refusal, Reply};
use crate::store::{Id, Key, Store, Text};

/// fence.lua with ARGV[1] = `token`, ARGV[2] = `retention`.
pub fn fence(s: &mut Store, token: u64, retention: i64) -> Reply {
    let run = |s: &mut Store| -> Result<Reply, Refusal> {
        let last = fence_last(s, Key::Fence)?;
        let granted = fence_last(s, Key::Granted)?;
        raise(s, (last, granted), token, retention);
        Ok(Reply::Int(1))
    };
    run(s).unwrap_or_else(Reply::from)
}

/// Both scripts' last step: the counter and the granted token, each raised to `token`
/// (with PX `retention`) when below it; `(last, granted)` as read before.
fn raise(s: &mut Store, (last, granted): (u64, u64), token: u64, retention: i64) {
    if last < token {
        s.set(Key::Fence, Text::Int(token), Some(retention));
    }
    if granted < token {
        s.set(Key::Granted, Text::Int(token), Some(retention));
    }
}

/// retake.lua: `writer` is ARGV[3] == "w"; `token` the guard's token.
pub fn retake(s: &mut Store, id: Id, ttl: i64, writer: bool, token: u64, retention: i64) -> Reply {
    let run = |s: &mut Store| -> Result<Reply, Refusal> {
        let last = fence_last(s, Key::Fence)?;
        let granted = fence_last(s, Key::Granted)?;
        if granted > token {
            return Ok(Reply::Int(0));
        }
        let (intent, _) = lock_intent(s, Key::Intent)?;
        let pttl = s.pttl(Key::Lock);
        if pttl != -2 {
            let found = s.type_of(Key::Lock);
            if found != "string" && found != "set" {
                return Err(Refusal::wrongtype(Key::Lock, found));
            }
            if pttl == -1 {
                return Err(Refusal::NoExpiry { key: Key::Lock });
            }
            let taken_by_other = if writer {
                found == "set" || !s.get_is(Key::Lock, &Text::Id(id))
            } else {
                found == "string"
            };
            if taken_by_other {
                return Ok(Reply::Int(0));
            }
        }
        let me = Text::Id(id);
        if writer {
            s.set(Key::Lock, me.clone(), Some(ttl));
            if intent.as_ref() == Some(&me) {
                s.del(Key::Intent);
            }
        } else {
            let _ = s.sadd(Key::Lock, id);
            pttl_at_least(s, Key::Lock, ttl, Some(pttl));
        }
        raise(s, (last, granted), token, retention);
        Ok(Reply::Int(1))
    };
    run(s).unwrap_or_else(Reply::from)
}
