//! `lua/downgrade.lua`: turn the write lock an id holds into a read lock held by the
//! same id, in one step.

use super::shared::pttl_at_least;
use super::Reply;
use crate::bugs::Bug;
use crate::store::{Id, Key, Store, Text};

/// downgrade.lua. Publishing always succeeds here.
pub fn downgrade(s: &mut Store, id: Id, ttl: i64) -> Reply {
    if s.get_is(Key::Lock, &Text::Id(id)) {
        let pttl = s.pttl(Key::Lock);
        s.del(Key::Lock);
        let _ = s.sadd(Key::Lock, id);
        s.pexpire(
            Key::Lock,
            if s.has(Bug::DowngradeKeepsTtl) {
                pttl
            } else {
                ttl
            },
        );
        return Reply::Int(3);
    }
    if s.sismember(Key::Lock, id) == Ok(true) {
        pttl_at_least(s, Key::Lock, ttl, None);
        return Reply::Int(1);
    }
    Reply::Int(0)
}
