//! `lua/base.lua` and `lua/shared.lua`: the fence counter, the lock intent, raising a
//! PTTL, and the fair queue.

use super::Refusal;
use crate::store::{Key, Member, Store, Text};

/// 2^53 - 1: the largest integer a Lua number holds exactly.
pub const MAX_TOKEN: u64 = (1 << 53) - 1;

/// Tokens minted from the clock are above this (microseconds since 2001).
pub const CLOCK_TOKENS: u64 = 1_000_000_000_000_000;

/// `fence_last`: the last token at `k` (0 absent), or the refusal.
pub fn fence_last(s: &Store, k: Key) -> Result<u64, Refusal> {
    let found = match s.get(k) {
        Ok(None) => return Ok(0),
        Ok(Some(Text::Int(n))) if n.to_string().len() <= 16 && *n <= MAX_TOKEN => *n,
        Ok(Some(_)) => return Err(Refusal::wrongtype(k, "non-integer string")),
        Err(_) => return Err(Refusal::wrongtype(k, s.type_of(k))),
    };
    if found == MAX_TOKEN {
        return Err(Refusal::wrongtype(k, "exhausted counter"));
    }
    if s.pttl(k) == -1 {
        return Err(Refusal::NoExpiry { key: k });
    }
    Ok(found)
}

/// `at_least_the_clock`: `token`, or TIME in microseconds when larger and `token` is
/// below 10^15 or `floor`. Also whether the clock was read (then a real server's token
/// may be larger by the time its call took: [`super::Reply::Token`]).
pub fn at_least_the_clock(s: &Store, token: u64, floor: bool) -> (u64, bool) {
    if token >= CLOCK_TOKENS && !floor {
        return (token, false);
    }
    (token.max(s.clock_us.max(0) as u64), true)
}

/// `lock_intent`: the intent's value and PTTL (`None`, -2 when absent), or the refusal.
pub fn lock_intent(s: &Store, k: Key) -> Result<(Option<Text>, i64), Refusal> {
    let pttl = s.pttl(k);
    if pttl == -2 {
        return Ok((None, -2));
    }
    let Ok(Some(intent)) = s.get(k) else {
        return Err(Refusal::wrongtype(k, s.type_of(k)));
    };
    if pttl == -1 {
        return Err(Refusal::NoExpiry { key: k });
    }
    Ok((Some(intent.clone()), pttl))
}

/// `pttl_at_least`: raises `k`'s PTTL to `ttl` if lower or unset (`pttl`: already read).
pub fn pttl_at_least(s: &mut Store, k: Key, ttl: i64, pttl: Option<i64>) {
    if pttl.unwrap_or_else(|| s.pttl(k)) < ttl {
        s.pexpire(k, ttl);
    }
}

/// `zset_refusal`: the refusal when `k` exists but is not a sorted set with a TTL.
pub fn zset_refusal(s: &Store, k: Key) -> Option<Refusal> {
    let pttl = s.pttl(k);
    if pttl == -2 {
        return None;
    }
    if s.type_of(k) != "zset" {
        return Some(Refusal::wrongtype(k, s.type_of(k)));
    }
    (pttl == -1).then_some(Refusal::NoExpiry { key: k })
}

/// `until_first_deadline`: `wait`, or less: until the first score after `now` in `k`.
pub fn until_first_deadline(s: &Store, k: Key, now: i64, wait: i64) -> i64 {
    let first = s
        .zrange(k)
        .unwrap_or_default()
        .into_iter()
        .find(|&(_, score)| score > now);
    match first {
        Some((_, score)) => wait.min((score - now).max(0)),
        None => wait,
    }
}

/// `fair_queue()`: the queue `K:queue`, `K:queue-deadline` of one fair request.
#[derive(Debug, Default)]
pub struct Queue {
    /// `queue_empty`: neither key existed when it was opened.
    empty: bool,
}

const Q: Key = Key::Queue;
const D: Key = Key::QueueDeadline;

impl Queue {
    /// `queue_open`: checks both keys, reads the clock, drops the waiters whose deadline
    /// is not after it. The server time (ms), or the refusal (nothing changed).
    pub fn open(s: &mut Store) -> Result<(Queue, i64), Refusal> {
        if !s.exists(Q) && !s.exists(D) {
            return Ok((Queue { empty: true }, s.now_ms()));
        }
        if let Some(refusal) = zset_refusal(s, Q).or_else(|| zset_refusal(s, D)) {
            return Err(refusal);
        }
        let now = s.now_ms();
        let gone: Vec<Member> = s
            .zrange(D)
            .unwrap_or_default()
            .into_iter()
            .filter(|&(_, score)| score <= now)
            .map(|(m, _)| m)
            .collect();
        if !gone.is_empty() {
            for m in gone {
                let _ = s.zrem(Q, m);
            }
            let _ = s.zrem_upto(D, now);
        }
        Ok((Queue { empty: false }, now))
    }

    /// `queue_ahead`: the members ahead of `m` (all of them when it is not queued).
    pub fn ahead(&self, s: &Store, m: Member) -> Vec<Member> {
        if self.empty {
            return Vec::new();
        }
        let all: Vec<Member> = s
            .zrange(Q)
            .unwrap_or_default()
            .into_iter()
            .map(|(m, _)| m)
            .collect();
        match all.iter().position(|&x| x == m) {
            None => all,
            Some(rank) => all[..rank].to_vec(),
        }
    }

    /// `queue_rank`: how many are ahead of `m` (all when it is not queued).
    pub fn rank(&self, s: &Store, m: Member) -> usize {
        if self.empty {
            return 0;
        }
        self.ahead(s, m).len()
    }

    /// `queue_join`: `m` at the back unless queued; its deadline now + ttl.
    fn join(&mut self, s: &mut Store, m: Member, now: i64, ttl: i64) {
        if s.zscore(Q, m).ok().flatten().is_none() {
            let last = s.zrange(Q).unwrap_or_default().last().map(|&(_, t)| t);
            let ticket = last.map_or(1, |t| t + 1);
            let _ = s.zadd(Q, ticket, m);
        }
        let _ = s.zadd(D, now + ttl, m);
        pttl_at_least(s, Q, ttl, None);
        pttl_at_least(s, D, ttl, None);
        self.empty = false;
    }

    /// `queue_leave`.
    pub fn leave(&self, s: &mut Store, m: Member) {
        if self.empty {
            return;
        }
        let _ = s.zrem(Q, m);
        let _ = s.zrem(D, m);
    }

    /// `queue_blocked`: `wait`, or less (until the first queue deadline); `m` joins
    /// when `join`.
    #[allow(clippy::too_many_arguments)]
    pub fn blocked(
        &mut self,
        s: &mut Store,
        m: Member,
        now: i64,
        ttl: i64,
        wait: i64,
        join: bool,
    ) -> i64 {
        let wait = if self.empty {
            wait
        } else {
            until_first_deadline(s, D, now, wait)
        };
        if join {
            self.join(s, m, now, ttl);
        }
        wait
    }
}
