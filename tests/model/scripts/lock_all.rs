//! `lua/lock_all.lua`: take read and write locks on several lock keys, all or none, in
//! one step, and mint a fencing token per key (`RwMutex::lock_all`).

use super::shared::{at_least_the_clock, fence_last, lock_intent, pttl_at_least};
use super::{Refusal, Reply};
use crate::bugs::Bug;
use crate::store::{Id, Key, Store, Text};

/// One key of a set: which lock (0 or 1: [`Key::on`]) and whether it is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SetKey {
    /// The lock: its keys are `Key::Lock.on(lock)`, `Key::Intent.on(lock)`,
    /// `Key::Fence.on(lock)`.
    pub lock: usize,
    /// ARGV[4]'s character: `true` "w", the key's writer; `false` "r", one of its readers.
    pub write: bool,
}

/// A request of lock_all.lua: its KEYS (by lock, in order; every lock differs) and ARGV.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TakeAll {
    /// ARGV[1]: the lock id, one for the whole set.
    pub id: Id,
    /// ARGV[2]: the TTL in ms.
    pub ttl: i64,
    /// ARGV[3]: the fence retention in ms.
    pub retention: i64,
    /// The keys, in KEYS' order, and ARGV[4], their modes.
    pub keys: Vec<SetKey>,
    /// ARGV[5] "1": when blocked by a holder, set the intent on every write key.
    pub intent: bool,
    /// ARGV[6] "1": floor every token at the clock.
    pub floor: bool,
}

/// lock_all.lua: `Reply::Tokens` (one per key, in order), `Reply::BlockedAt` (the first
/// key that blocks, 1-based, and its wait), or a refusal (nothing changed).
pub fn lock_all(s: &mut Store, t: &TakeAll) -> Reply {
    run(s, t).unwrap_or_else(Reply::from)
}

/// What one key's check found (the Lua's `intents[i]`, `lasts[i]`, `pttls[i]`).
struct Checked {
    intent: Option<Text>,
    last: u64,
    pttl: i64,
}

fn run(s: &mut Store, t: &TakeAll) -> Result<Reply, Refusal> {
    let me = Text::Id(t.id);
    let mut checked = Vec::new();
    // The first key that blocks and its wait, and whether another waiter's intent
    // blocks any.
    let mut blocked_at: Option<(usize, i64)> = None;
    let mut by_intent = false;
    for (i, k) in t.keys.iter().enumerate() {
        let (lock, intent_key, fence_key) = keys(k.lock);
        let (intent, intent_pttl) = lock_intent(s, intent_key)?;
        let last = fence_last(s, fence_key)?;
        let pttl = s.pttl(lock);
        let lock_type = if pttl == -2 { "none" } else { s.type_of(lock) };
        if !matches!(lock_type, "none" | "string" | "set") {
            return Err(Refusal::wrongtype(lock, lock_type));
        }
        if pttl == -1 {
            return Err(Refusal::NoExpiry { key: lock });
        }
        let (mut holder_blocks, mut intent_blocks) = (false, false);
        if k.write {
            holder_blocks = lock_type == "set" || (lock_type == "string" && !s.get_is(lock, &me));
        } else if lock_type == "string" {
            holder_blocks = !s.has(Bug::LockAllIgnoresReadHolder);
        } else if lock_type == "none" || s.sismember(lock, t.id) != Ok(true) {
            intent_blocks = intent.as_ref().is_some_and(|i| *i != me);
        }
        by_intent |= intent_blocks;
        if (holder_blocks || intent_blocks) && blocked_at.is_none() {
            let wait = if holder_blocks { pttl } else { intent_pttl };
            blocked_at = Some((i + 1, wait));
        }
        checked.push(Checked { intent, last, pttl });
        if s.has(Bug::LockAllChecksFirstOnly) {
            break;
        }
    }
    if let Some((index, wait)) = blocked_at {
        // Only a set that no other waiter's intent blocks keeps (or sets) its intents;
        // one that an intent blocks removes its own.
        let keep = t.intent && (!by_intent || s.has(Bug::LockAllKeepsIntentWhenBlockedByIntent));
        for (k, c) in t.keys.iter().zip(&checked) {
            if !k.write {
                continue;
            }
            let intent_key = Key::Intent.on(k.lock);
            match &c.intent {
                None if keep => s.set(intent_key, me.clone(), Some(t.ttl)),
                Some(i) if *i == me && keep => {
                    s.pexpire(intent_key, t.ttl);
                }
                Some(i) if *i == me => {
                    s.del(intent_key);
                }
                _ => {}
            }
        }
        return Ok(Reply::BlockedAt { index, wait });
    }
    // Taken: every token read off the clock before the first write.
    let tokens: Vec<(u64, bool)> = checked
        .iter()
        .map(|c| at_least_the_clock(s, c.last + 1, t.floor))
        .collect();
    for ((k, c), &(token, _)) in t.keys.iter().zip(&checked).zip(&tokens) {
        let (lock, intent_key, fence_key) = keys(k.lock);
        if k.write {
            s.set(lock, me.clone(), Some(t.ttl));
            if c.intent.as_ref() == Some(&me) {
                s.del(intent_key);
            }
        } else {
            let _ = s.sadd(lock, t.id);
            pttl_at_least(s, lock, t.ttl, Some(c.pttl));
        }
        s.set(fence_key, Text::Int(token), Some(t.retention));
    }
    Ok(Reply::Tokens(tokens))
}

/// Lock `l`'s lock, intent and fence keys (KEYS[3i-2], KEYS[3i-1], KEYS[3i]).
pub fn keys(l: usize) -> (Key, Key, Key) {
    (Key::Lock.on(l), Key::Intent.on(l), Key::Fence.on(l))
}
