//! `lua/upgradable.lua`: take an upgradable read lock: a read lock (the id joins the
//! readers' set) that one reader of the key holds at a time, marked by the upgrader key
//! `K:upgrader`, and that `upgrade.lua` can turn into the write lock.

use super::lock::Take;
use super::shared::{at_least_the_clock, fence_last, lock_intent, pttl_at_least};
use super::{blocked, Refusal, Reply};
use crate::bugs::Bug;
use crate::store::{Key, Store, Text};

/// upgradable.lua (`t.fair` is not read: upgradable reads are refused on fair mutexes).
pub fn upgradable(s: &mut Store, t: Take) -> Reply {
    run(s, t).unwrap_or_else(Reply::from)
}

fn run(s: &mut Store, t: Take) -> Result<Reply, Refusal> {
    let last = fence_last(s, Key::Fence)?;
    // The lock: absent, a set of readers (SISMEMBER answers), or (it fails) a writer's
    // string or a foreign type.
    let pttl = s.pttl(Key::Lock);
    let mut member = false;
    if pttl != -2 {
        match s.sismember(Key::Lock, t.id) {
            Err(_) => {
                let found = s.type_of(Key::Lock);
                if found != "string" {
                    return Err(Refusal::wrongtype(Key::Lock, found));
                }
                if pttl == -1 {
                    return Err(Refusal::NoExpiry { key: Key::Lock });
                }
                return Ok(blocked(pttl));
            }
            Ok(_) if pttl == -1 => return Err(Refusal::NoExpiry { key: Key::Lock }),
            Ok(m) => member = m,
        }
    }
    // Another upgradable reader that still reads keeps this one out (SISMEMBER of a
    // value that is no id, Go's "1" or junk, answers 0: the set holds ids only).
    let (upgrader, upgrader_pttl) = lock_intent(s, Key::Upgrader)?;
    let reads = |u: &Text| match u {
        Text::Id(u) => s.sismember(Key::Lock, *u) == Ok(true),
        _ => false,
    };
    if let Some(u) = &upgrader {
        if *u != Text::Id(t.id) && pttl != -2 && reads(u) && !s.has(Bug::UpgradableIgnoresUpgrader)
        {
            return Ok(blocked(upgrader_pttl));
        }
    }
    // A waiting writer's intent keeps new readers out.
    if !member {
        let (intent, intent_pttl) = lock_intent(s, Key::Intent)?;
        if intent.is_some() && !s.has(Bug::UpgradableIgnoresIntent) {
            return Ok(blocked(intent_pttl));
        }
    }
    let (token, clock) = at_least_the_clock(s, last + 1, t.floor);
    let _ = s.sadd(Key::Lock, t.id);
    s.set(Key::Upgrader, Text::Id(t.id), Some(t.ttl));
    s.set(Key::Fence, Text::Int(token), Some(t.retention));
    pttl_at_least(s, Key::Lock, t.ttl, Some(pttl));
    Ok(Reply::Token { token, clock })
}
