//! `lua/lock.lua`: take the write lock and mint its fencing token.

use super::shared::{at_least_the_clock, fence_last, lock_intent, Queue};
use super::{blocked, Refusal, Reply};
use crate::bugs::Bug;
use crate::store::{Id, Key, Member, Store, Text};

/// A request of lock.lua, rlock.lua or semaphore.lua: its ARGV.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Take {
    /// ARGV[1]: the lock id.
    pub id: Id,
    /// The TTL in ms.
    pub ttl: i64,
    /// The fence retention in ms (the fence key's PX).
    pub retention: i64,
    /// "1": floor every token at the clock (Redis Cluster).
    pub floor: bool,
    /// Fair mode (KEYS[4], KEYS[5] passed): `Some(true)` "wait" (join the queue when
    /// blocked), `Some(false)` "try".
    pub fair: Option<bool>,
}

/// lock.lua with `intent` as ARGV[3] ("1": set the lock intent when blocked).
pub fn lock(s: &mut Store, t: Take, intent: bool) -> Reply {
    run(s, t, intent).unwrap_or_else(Reply::from)
}

fn run(s: &mut Store, t: Take, set_intent: bool) -> Result<Reply, Refusal> {
    let me = Text::Id(t.id);
    let (intent, _) = lock_intent(s, Key::Intent)?;
    let last = fence_last(s, Key::Fence)?;
    // The holder: absent, a writer's id, or (GET fails) a set of readers.
    let holder = match s.get(Key::Lock) {
        Ok(h) => h.cloned().map(Some),
        Err(_) if s.type_of(Key::Lock) == "set" => Some(None),
        Err(_) => return Err(Refusal::wrongtype(Key::Lock, s.type_of(Key::Lock))),
    };
    // `holder`: None absent, Some(None) readers, Some(Some(text)) a string.
    let mine = holder == Some(Some(me.clone()));
    let mut pttl = t.ttl;
    if holder.is_some() && !mine {
        pttl = s.pttl(Key::Lock);
        if pttl == -1 {
            return Err(Refusal::NoExpiry { key: Key::Lock });
        }
    }
    let member = Member::Queued(b'w', t.id);
    let mut queue = None;
    if t.fair.is_some() {
        queue = Some(Queue::open(s)?);
    }
    let first =
        queue.as_ref().is_none_or(|(q, _)| q.rank(s, member) == 0) || s.has(Bug::LockIgnoresQueue);
    if mine || (holder.is_none() && first) {
        let next = if s.has(Bug::TokenNotIncremented) {
            last.max(1)
        } else {
            last + 1
        };
        let (token, clock) = at_least_the_clock(s, next, t.floor);
        let px = (!s.has(Bug::LockWithoutTtl)).then_some(t.ttl);
        s.set(Key::Lock, me.clone(), px);
        if intent.as_ref() == Some(&me) {
            s.del(Key::Intent);
        }
        s.set(Key::Fence, Text::Int(token), Some(t.retention));
        if let Some((q, _)) = &queue {
            q.leave(s, member);
        }
        return Ok(Reply::Token { token, clock });
    }
    if let Some((mut q, now)) = queue {
        pttl = q.blocked(s, member, now, t.ttl, pttl, t.fair == Some(true));
    }
    if set_intent {
        match intent {
            None => s.set(Key::Intent, me, Some(t.ttl)),
            Some(i) if i == me => {
                s.pexpire(Key::Intent, t.ttl);
            }
            Some(_) => {}
        }
    }
    Ok(blocked(pttl))
}
