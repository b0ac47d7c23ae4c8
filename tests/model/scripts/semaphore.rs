//! `lua/semaphore.lua`: take one of `permits` permits and mint its fencing token.

use super::lock::Take;
use super::shared::{
    at_least_the_clock, fence_last, pttl_at_least, until_first_deadline, zset_refusal, Queue,
};
use super::{blocked, Refusal, Reply};
use crate::bugs::Bug;
use crate::store::{Key, Member, Store, Text};

/// semaphore.lua with ARGV[3] = `permits`. The semaphore's fence is [`Key::Fence`] and
/// its queue [`Key::Queue`], [`Key::QueueDeadline`], as a lock's.
pub fn semaphore(s: &mut Store, t: Take, permits: i64) -> Reply {
    run(s, t, permits).unwrap_or_else(Reply::from)
}

fn run(s: &mut Store, t: Take, permits: i64) -> Result<Reply, Refusal> {
    if let Some(refusal) = zset_refusal(s, Key::Lock) {
        return Err(refusal);
    }
    let last = fence_last(s, Key::Fence)?;
    let queued = Member::Queued(b'p', t.id);
    let (mut queue, now, ahead) = match t.fair {
        Some(_) => {
            let (q, now) = Queue::open(s)?;
            let ahead = if s.has(Bug::SemaphoreIgnoresQueue) {
                0
            } else {
                q.rank(s, queued) as i64
            };
            (Some(q), now, ahead)
        }
        None => (None, s.now_ms(), 0),
    };
    let own = s.zscore(Key::Lock, Member::Id(t.id)).ok().flatten();
    let holds = own.is_some_and(|d| d > now);
    let live = s.zcount_after(Key::Lock, now).unwrap_or(0);
    let permits = permits + i64::from(s.has(Bug::SemaphoreOffByOne));
    if holds || live + ahead < permits {
        let (token, clock) = at_least_the_clock(s, last + 1, t.floor);
        let _ = s.zadd(Key::Lock, now + t.ttl, Member::Id(t.id));
        let _ = s.zrem_upto(Key::Lock, now);
        pttl_at_least(s, Key::Lock, t.ttl, None);
        s.set(Key::Fence, Text::Int(token), Some(t.retention));
        if let Some(q) = &queue {
            q.leave(s, queued);
        }
        return Ok(Reply::Token { token, clock });
    }
    let mut wait = until_first_deadline(s, Key::Lock, now, t.ttl);
    if let Some(q) = &mut queue {
        wait = q.blocked(s, queued, now, t.ttl, wait, t.fair == Some(true));
    }
    let _ = s.zrem_upto(Key::Lock, now);
    Ok(blocked(wait))
}
