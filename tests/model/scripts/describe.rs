//! `lua/describe.lua`: record a holder's description beside each lock key its id holds,
//! with the lock's lifetime.

use super::shared::pttl_at_least;
use super::Reply;
use crate::bugs::Bug;
use crate::store::{Id, Key, Member, Store, Text};

/// The description the steps send (ARGV[3]): the crate's format, version 1, of a fixed
/// holder; the script appends the acquisition time (server ms).
pub const TEXT: &str = "1\tmodel-host\t4242\t1700000000000\tmodel\tlabel\t";

/// Whether `id` holds the lock key at `lock` (0 or 1) now, in any form.
pub fn holds(s: &Store, lock: usize, id: Id) -> bool {
    let k = Key::Lock.on(lock);
    match s.type_of(k) {
        "string" => s.get_is(k, &Text::Id(id)),
        "set" => s.sismember(k, id) == Ok(true),
        "zset" => matches!(s.zscore(k, Member::Id(id)), Ok(Some(d)) if d > s.now_ms()),
        _ => false,
    }
}

/// describe.lua on the lock keys of `locks` (each 0 or 1): the number of keys described.
pub fn describe(s: &mut Store, locks: &[usize], id: Id, ttl: i64) -> Reply {
    let now = s.now_ms();
    let mut described = 0;
    for &lock in locks {
        // A semaphore's run-out or purged permits' descriptions go.
        if s.type_of(Key::Lock.on(lock)) == "zset" && !s.has(Bug::DescribeKeepsRunOutPermits) {
            for (other, _) in s.holders(Key::Holders.on(lock)) {
                let deadline = s.zscore(Key::Lock.on(lock), Member::Id(other));
                if !matches!(deadline, Ok(Some(d)) if d > now) {
                    let _ = s.hdel(Key::Holders.on(lock), other);
                }
            }
        }
        if holds(s, lock, id) {
            let holders = Key::Holders.on(lock);
            if s.hset(holders, id, now).is_ok() {
                let lock_pttl = s.pttl(Key::Lock.on(lock));
                let at_least = if lock_pttl > 0 { lock_pttl } else { ttl };
                pttl_at_least(s, holders, at_least, None);
                described += 1;
            }
        }
    }
    Reply::Int(described)
}
