//! `lua/rlock.lua`: take a read lock and mint its fencing token, on its checked path or
//! its counting path (ARGV[4] "1": INCR the fence without reading it first).

use super::lock::Take;
use super::shared::{at_least_the_clock, fence_last, lock_intent, pttl_at_least, Queue};
use super::{blocked, Refusal, Reply};
use crate::bugs::Bug;
use crate::store::{Key, Member, Store, Text};

/// rlock.lua; `counting` is ARGV[4] == "1".
pub fn rlock(s: &mut Store, t: Take, counting: bool) -> Reply {
    let reply = if counting { count(s, t) } else { check(s, t) };
    reply.unwrap_or_else(Reply::from)
}

/// `refused()`: blocked by a writer's string, or the refusal of another type.
fn refused(s: &Store) -> Result<Reply, Refusal> {
    let found = s.type_of(Key::Lock);
    if found != "string" {
        return Err(Refusal::wrongtype(Key::Lock, found));
    }
    match s.pttl(Key::Lock) {
        -1 => Err(Refusal::NoExpiry { key: Key::Lock }),
        pttl => Ok(blocked(pttl)),
    }
}

/// `intent_blocks()`: blocked by a waiting writer's intent; `None` when there is none.
fn intent_blocks(s: &Store) -> Result<Option<Reply>, Refusal> {
    let (intent, pttl) = lock_intent(s, Key::Intent)?;
    if s.has(Bug::RlockIgnoresIntent) {
        return Ok(None);
    }
    Ok(intent.map(|_| blocked(pttl)))
}

fn count(s: &mut Store, t: Take) -> Result<Reply, Refusal> {
    let pttl = s.pttl(Key::Lock);
    if pttl == -1 {
        let found = s.type_of(Key::Lock);
        if found != "string" && found != "set" {
            return Err(Refusal::wrongtype(Key::Lock, found));
        }
        return Err(Refusal::NoExpiry { key: Key::Lock });
    }
    let Ok(added) = s.sadd(Key::Lock, t.id) else {
        return refused(s);
    };
    if added == 1 {
        let blocks = intent_blocks(s);
        if !matches!(blocks, Ok(None)) {
            let _ = s.srem(Key::Lock, t.id);
            return blocks.map(Option::unwrap);
        }
    }
    let token = match s.incr(Key::Fence) {
        Ok(token) if (1..=super::shared::MAX_TOKEN as i64).contains(&token) => token as u64,
        _ => {
            if added == 1 {
                let _ = s.srem(Key::Lock, t.id);
            }
            return Err(Refusal::Unchecked);
        }
    };
    let (floored, clock) = at_least_the_clock(s, token, t.floor);
    if floored != token || token < super::shared::CLOCK_TOKENS {
        s.set(Key::Fence, Text::Int(floored), Some(t.retention));
    }
    pttl_at_least(s, Key::Lock, t.ttl, Some(pttl));
    Ok(Reply::Token {
        token: floored,
        clock,
    })
}

fn check(s: &mut Store, t: Take) -> Result<Reply, Refusal> {
    let last = fence_last(s, Key::Fence)?;
    let pttl = s.pttl(Key::Lock);
    let mut member = false;
    let mut blocks = None;
    if pttl != -2 {
        match s.sismember(Key::Lock, t.id) {
            Err(_) => blocks = Some(refused(s)?),
            Ok(_) if pttl == -1 => return Err(Refusal::NoExpiry { key: Key::Lock }),
            Ok(m) => member = m,
        }
    }
    if blocks.is_none() && !member {
        blocks = intent_blocks(s)?;
    }
    let queued = Member::Queued(b'r', t.id);
    let mut queue = None;
    if t.fair.is_some() {
        let (mut q, now) = Queue::open(s)?;
        if blocks.is_none() && !member {
            let writer_ahead = q
                .ahead(s, queued)
                .iter()
                .any(|m| matches!(m, Member::Queued(b'w', _)));
            if writer_ahead {
                blocks = Some(blocked(t.ttl));
            }
        }
        if let Some(Reply::Blocked { wait }) = blocks {
            let join = t.fair == Some(true);
            return Ok(blocked(q.blocked(s, queued, now, t.ttl, wait, join)));
        }
        queue = Some(q);
    }
    if let Some(reply) = blocks {
        return Ok(reply);
    }
    let (token, clock) = at_least_the_clock(s, last + 1, t.floor);
    let _ = s.sadd(Key::Lock, t.id);
    s.set(Key::Fence, Text::Int(token), Some(t.retention));
    pttl_at_least(s, Key::Lock, t.ttl, Some(pttl));
    if let Some(q) = &queue {
        q.leave(s, queued);
    }
    Ok(Reply::Token { token, clock })
}
