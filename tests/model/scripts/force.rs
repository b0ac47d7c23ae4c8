//! `lua/force_unlock.lua`: remove every holder at once and mark the forced release on
//! the fence counter.

use super::shared::MAX_TOKEN;
use super::{Refusal, Reply};
use crate::store::{Key, Store, Text};

/// force_unlock.lua, with its KEYS[4] (the holders key). Publishing always succeeds here.
pub fn force_unlock(s: &mut Store) -> Reply {
    let found = s.type_of(Key::Lock);
    if found == "none" {
        return Reply::Int(0);
    }
    if !matches!(found, "string" | "set" | "zset") {
        return Refusal::wrongtype(Key::Lock, found).into();
    }
    if s.pttl(Key::Lock) == -1 {
        return Refusal::NoExpiry { key: Key::Lock }.into();
    }
    let mut held = 1;
    if found == "zset" && s.zcount_after(Key::Lock, s.now_ms()) == Ok(0) {
        held = 0;
    }
    if let Ok(Some(Text::Int(fence))) = s.get(Key::Fence) {
        let fence = *fence;
        if fence.to_string().len() <= 16 && fence < MAX_TOKEN {
            let fence_pttl = s.pttl(Key::Fence);
            if fence_pttl > 0 {
                s.set(Key::Granted, Text::Int(fence + 1), Some(fence_pttl));
            }
            let _ = s.incr(Key::Fence);
        }
    }
    s.del(Key::Lock);
    if s.type_of(Key::Holders) == "hash" {
        s.del(Key::Holders);
    }
    Reply::Int(held + 2)
}
